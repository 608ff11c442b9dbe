/* shuffle-zstd: the fast byte shuffle and xxh64 against the plain loops
 * and libxxhash; how the writer stores planes of different kinds, read
 * back byte for byte; and archives written and read by several threads at
 * once, which share a reader's kept zstd context.
 * Damaged and hostile plane tables are in test-archive.c, with the other
 * hostile records. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive/archive.h"
#include "archive/format.h"
#include "tap.h"
#include "util/util.h"

static const char *tpath(const char *name)
{
	static char buf[4][512];
	static int k;
	char *p = buf[k++ % 4];
	snprintf(p, sizeof(buf[0]), "%s/%s", tap_tmpdir(), name);
	return p;
}

/* xorshift64: test data that owes nothing to the library under test */
static uint64_t rnd(void)
{
	static __thread uint64_t x = 88172645463325252ull;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return x;
}

static void fill_random(unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = rnd();
}

static void test_xxh64(void)
{
	size_t big = 3 << 20;
	unsigned char *buf = malloc(big + 8);
	ar_xxh64_state h;
	int bad = 0;

	fill_random(buf, big + 8);
	for (size_t n = 0; n <= 1100; n++)
		for (size_t off = 0; off < 8; off += 3)
			bad += ar_xxh64(buf + off, n) != dlt_xxh64(buf + off, n, 0);
	ok(bad == 0, "xxh64 of 0 to 1100 bytes at 3 alignments is libxxhash's (%d differ)", bad);
	for (int t = 0; t < 300; t++) {
		size_t n = rnd() % 5000, i = 0;
		ar_xxh64_init(&h);
		while (i < n) {
			size_t k = rnd() % 70;
			k = k < n - i ? k : n - i;
			ar_xxh64_update(&h, buf + i, k);
			i += k;
		}
		bad += ar_xxh64_final(&h) != dlt_xxh64(buf, n, 0);
	}
	ok(bad == 0, "streamed in pieces of 0 to 69 bytes too (%d differ)", bad);
	ok(ar_xxh64(buf + 1, big) == dlt_xxh64(buf + 1, big, 0), "and of 3 MiB");
	ok(ar_xxh64("", 0) == 0xEF46DB3751D8E999ull, "xxh64 of nothing is the spec's");
	free(buf);
}

/* ar_shuffle and ar_unshuffle against the plain loops, and their hashes
 * against libxxhash, for counts around every step and tail of the fast
 * paths; the planes of ar_unshuffle lie apart and in reverse order. */
static int shuffle_case(size_t count, size_t esize)
{
	size_t n = count * esize;
	unsigned char *src = malloc(n + 1), *got = malloc(n + 1), *want = malloc(n + 1);
	unsigned char *back = malloc(n + 1), *planes[AR_MAX_ESIZE];
	const unsigned char *cp[AR_MAX_ESIZE];
	int good;

	fill_random(src, n);
	ar_shuffle_ref(want, src, count, esize);
	good = ar_shuffle(got, src, count, esize) == dlt_xxh64(src, n, 0) &&
	       memcmp(got, want, n) == 0;
	for (size_t k = esize; k-- > 0;) {
		planes[k] = malloc(count + 1);
		memcpy(planes[k], want + k * count, count);
		cp[k] = planes[k];
	}
	good &= ar_unshuffle(back, cp, count, esize) == dlt_xxh64(src, n, 0) &&
		memcmp(back, src, n) == 0;
	ar_unshuffle_ref(back, cp, count, esize);
	good &= memcmp(back, src, n) == 0;
	if (!good)
		diag("esize %zu, count %zu: differs", esize, count);
	for (size_t k = 0; k < esize; k++)
		free(planes[k]);
	free(src);
	free(got);
	free(want);
	free(back);
	return good;
}

static void test_shuffle(void)
{
	static const size_t sizes[] = { 1, 2, 4, 8, 3 };

	diag("the fast shuffle paths %s", ar_shuffle_simd() ? "run (AVX2)" : "do not run here");
	for (size_t s = 0; s < sizeof(sizes) / sizeof(*sizes); s++) {
		int good = 1;
		for (size_t count = 0; count <= 300 && good; count++)
			good = shuffle_case(count, sizes[s]);
		good = good && shuffle_case(4096 + 7, sizes[s]) && shuffle_case(100003, sizes[s]);
		ok(good, "%zu-byte elements: shuffle and unshuffle match the plain loops, "
		   "with the raw bytes' hash", sizes[s]);
	}
}

/* The codec byte and plane table of a tensor, from the file's bytes. */
static int stored_layout(const char *path, const char *name, int *codec, uint64_t *sizes)
{
	const dlt_tensor_info *t;
	dlt_archive *a;
	size_t n;
	char *f;
	int rc;

	if ((rc = dlt_read_file(path, 0, &f, &n)) < 0)
		return rc;
	if ((rc = dlt_archive_open(&a, path)) < 0) {
		free(f);
		return rc;
	}
	if ((t = dlt_archive_find(a, name))) {
		const unsigned char *h = (const unsigned char *)f + t->offset;
		const unsigned char *s = h + ar_rec_header_size(t->ndim, strlen(name));
		*codec = h[9];
		for (size_t k = 0; *codec == AR_CODEC_PLANES && k < dlt_dtype_size(t->dtype); k++)
			sizes[k] = ar_get64(s + 8 * k);
	}
	dlt_archive_close(a);
	free(f);
	return t ? 0 : DLT_EINPUT;
}

/* Writes one tensor with shuffle-zstd at level, reads it back and compares
 * the bytes; *codec and sizes: its stored layout. */
static int round_trip(const char *file, int dtype, uint64_t count, const void *data, int level,
		      int *codec, uint64_t *sizes)
{
	const char *path = tpath(file);
	const dlt_tensor_info *t = NULL;
	dlt_archive_writer *w;
	dlt_archive *a;
	void *back = NULL;
	int good;

	if (dlt_archive_create(&w, path) < 0 ||
	    dlt_archive_write_tensor(w, "t", dtype, 1, &count, data, DLT_SHUFFLE_ZSTD, level) < 0 ||
	    dlt_archive_writer_close(w) < 0 || dlt_archive_open(&a, path) < 0) {
		diag("%s: %s", file, dlt_errmsg());
		return 0;
	}
	good = dlt_archive_read_alloc(a, "t", dtype, 1, &t, &back) == 0 &&
	       memcmp(back, data, count * dlt_dtype_size(dtype)) == 0 && dlt_archive_verify(a) == 0;
	if (!good)
		diag("%s: %s", file, back ? "data differs" : dlt_errmsg());
	if (good && t->codec != DLT_SHUFFLE_ZSTD && t->codec != DLT_RAW)
		good = 0, diag("%s: codec %d", file, t->codec);
	free(back);
	dlt_archive_close(a);
	return good && stored_layout(path, "t", codec, sizes) == 0;
}

static void test_plane_kinds(void)
{
	enum { N = 100000 };
	uint64_t sizes[AR_MAX_ESIZE] = { 0 };
	unsigned char *x = malloc(8 * N);
	int codec = -1, good;

	/* f32: noise, a constant byte, noise, a skewed byte of 4 values
	 * (entropy 1.75 bits) without runs */
	for (size_t i = 0; i < N; i++) {
		unsigned r = rnd() % 8;
		x[4 * i] = rnd();
		x[4 * i + 1] = 0x55;
		x[4 * i + 2] = rnd();
		x[4 * i + 3] = r < 4 ? 0x3c : r < 6 ? 0x3d : r < 7 ? 0xbc : 0xbd;
	}
	ok(round_trip("kinds-f32.dlt", DLT_F32, N, x, 1, &codec, sizes),
	   "f32 with noise, constant and skewed planes reads back");
	ok(codec == AR_CODEC_PLANES && sizes[0] == N && sizes[2] == N,
	   "the noise planes are stored raw (codec %d, %llu and %llu bytes)", codec,
	   (unsigned long long)sizes[0], (unsigned long long)sizes[2]);
	ok(sizes[1] < N / 1000, "the constant plane in %llu bytes", (unsigned long long)sizes[1]);
	ok(sizes[3] > N * 1.75 / 8 && sizes[3] < N * 1.85 / 8,
	   "the skewed plane in %llu bytes, within 6%% of its entropy (%d)",
	   (unsigned long long)sizes[3], (int)(N * 1.75 / 8));

	good = round_trip("kinds-f32-neg.dlt", DLT_F32, N, x, -5, &codec, sizes);
	ok(good && sizes[3] < N * 1.85 / 8, "at zstd level -5 too (%llu bytes)",
	   (unsigned long long)sizes[3]);

	/* bf16: noise below a byte that repeats in runs of 8 */
	for (size_t i = 0; i < N; i++) {
		x[2 * i] = rnd();
		x[2 * i + 1] = i / 8 % 7 + 0x3e;
	}
	good = round_trip("kinds-bf16.dlt", DLT_BF16, N, x, 3, &codec, sizes);
	ok(good && codec == AR_CODEC_PLANES && sizes[0] == N && sizes[1] < N / 20,
	   "bf16: noise raw, runs in %llu bytes", (unsigned long long)sizes[1]);

	/* i64: two noise bytes, then zeros */
	memset(x, 0, 8 * N);
	for (size_t i = 0; i < N; i++)
		x[8 * i] = rnd(), x[8 * i + 1] = rnd();
	good = round_trip("kinds-i64.dlt", DLT_I64, N, x, 0, &codec, sizes);
	ok(good && codec == AR_CODEC_PLANES && sizes[0] == N && sizes[1] == N &&
	   sizes[7] < N / 1000, "i64: 8 planes, noise raw, zeros in %llu bytes",
	   (unsigned long long)sizes[7]);

	/* u8: one plane, mostly zeros; all noise stays a raw record */
	for (size_t i = 0; i < N; i++)
		x[i] = rnd() % 4 ? 0 : rnd();
	good = round_trip("kinds-u8.dlt", DLT_U8, N, x, 1, &codec, sizes);
	ok(good && codec == AR_CODEC_PLANES && sizes[0] < N / 2,
	   "u8: sparse bytes as one frame of %llu bytes", (unsigned long long)sizes[0]);
	fill_random(x, 4 * N);
	ok(round_trip("kinds-noise.dlt", DLT_F32, N, x, 1, &codec, sizes) && codec == AR_CODEC_RAW,
	   "f32 noise: a raw record, not a bigger shuffle-zstd one");

	/* counts around the smallest that gets planes */
	{
		good = 1;
		for (uint64_t n = 1; n <= 200 && good; n += n < 70 ? 1 : 13) {
			for (size_t i = 0; i < n; i++) {
				float f = 1 + (i % 3) * 0.25f;
				memcpy(x + 4 * i, &f, 4);
			}
			good = round_trip("small.dlt", DLT_F32, n, x, 1, &codec, sizes);
		}
		ok(good, "1 to 200 smooth f32 elements read back");
	}
	free(x);
}

/* Threads: each writes and reads its own archive again and again, and
 * reads a shared one, whose reader keeps one zstd context for them all. */
enum { THREADS = 4, ROUNDS = 8, TN = 3, TCOUNT = 50000 };

static float *tdata[TN];
static dlt_archive *shared;

static void *thread_main(void *arg)
{
	intptr_t id = (intptr_t)arg, bad = 0;
	uint64_t dims[1] = { TCOUNT };
	char path[512], name[16];
	float *back = malloc(4 * TCOUNT);

	snprintf(path, sizeof(path), "%s/thread-%d.dlt", tap_tmpdir(), (int)id);
	for (int r = 0; r < ROUNDS; r++) {
		dlt_archive_writer *w;
		dlt_archive *a;
		if (dlt_archive_create(&w, path) < 0)
			return (void *)(intptr_t)1000;
		for (int k = 0; k < TN; k++) {
			snprintf(name, sizeof(name), "t%d", k);
			bad += dlt_archive_write_tensor(w, name, DLT_F32, 1, dims, tdata[k],
							DLT_SHUFFLE_ZSTD, 1) < 0;
		}
		bad += dlt_archive_writer_close(w) < 0;
		if (dlt_archive_open(&a, path) < 0)
			return (void *)(intptr_t)1000;
		for (int k = 0; k < TN; k++) {
			const dlt_tensor_info *t = dlt_archive_tensor(a, k);
			bad += dlt_archive_read(a, t, back, 4 * TCOUNT) < 0 ||
			       memcmp(back, tdata[k], 4 * TCOUNT) != 0;
			t = dlt_archive_tensor(shared, (k + id) % TN);
			bad += dlt_archive_read(shared, t, back, 4 * TCOUNT) < 0 ||
			       memcmp(back, tdata[(k + id) % TN], 4 * TCOUNT) != 0;
		}
		dlt_archive_close(a);
	}
	free(back);
	return (void *)bad;
}

static void test_threads(void)
{
	uint64_t dims[1] = { TCOUNT };
	pthread_t th[THREADS];
	dlt_archive_writer *w;
	intptr_t bad = 0;
	char name[8];

	dlt_archive_create(&w, tpath("shared.dlt"));
	for (int k = 0; k < TN; k++) {
		tdata[k] = malloc(4 * TCOUNT);
		for (size_t i = 0; i < TCOUNT; i++)
			tdata[k][i] = (float)((int64_t)(rnd() % 20001) - 10000) / (1000 << k);
		snprintf(name, sizeof(name), "t%d", k);
		dlt_archive_write_tensor(w, name, DLT_F32, 1, dims, tdata[k], DLT_SHUFFLE_ZSTD, 1);
	}
	ok_rc(dlt_archive_writer_close(w), 0, "an archive of %d tensors", TN);
	ok_rc(dlt_archive_open(&shared, tpath("shared.dlt")), 0, "opened once for the threads");
	if (!shared)
		return;
	for (intptr_t i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, thread_main, (void *)i);
	for (int i = 0; i < THREADS; i++) {
		void *r;
		pthread_join(th[i], &r);
		bad += (intptr_t)r;
	}
	ok(bad == 0, "%d threads each write and read %d archives and read the shared one "
	   "at once (%d failures)", THREADS, ROUNDS, (int)bad);
	dlt_archive_close(shared);
	for (int k = 0; k < TN; k++)
		free(tdata[k]);
}

int main(void)
{
	test_xxh64();
	test_shuffle();
	test_plane_kinds();
	test_threads();
	return done_testing();
}
