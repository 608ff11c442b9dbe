/* The .dlt archive: round trips of every dtype and codec through files,
 * memory and pipes; then damaged and hostile files, which must all get
 * DLT_EINPUT with a message naming the file, and nothing worse. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#include "archive/archive.h"
#include "tap.h"
#include "util/util.h"

static const int dtypes[] = { DLT_F32, DLT_F16, DLT_BF16, DLT_I32, DLT_I64, DLT_U8, DLT_U16,
			      DLT_U32 };
static const int codecs[] = { DLT_RAW, DLT_ZSTD, DLT_SHUFFLE_ZSTD };
#define NDTYPES (sizeof(dtypes) / sizeof(*dtypes))
#define NCODECS (sizeof(codecs) / sizeof(*codecs))

struct shape {
	int ndim;
	uint64_t dims[DLT_MAX_DIMS];
};

static const struct shape shapes[] = {
	{ 0, { 0 } },			/* a scalar: one element */
	{ 1, { 0 } },			/* empty */
	{ 3, { 3, 0, 2 } },		/* empty among other dims */
	{ 1, { 7 } },
	{ 2, { 64, 33 } },		/* big enough to compress */
	{ 4, { 2, 3, 4, 5 } },
	{ 8, { 1, 2, 1, 3, 1, 2, 1, 2 } },
};
#define NSHAPES (sizeof(shapes) / sizeof(*shapes))
#define BIG 4				/* the shape that surely compresses */
static const struct shape noise_shape = { 1, { 1000 } };

struct tcase {
	char name[48];
	int dtype, codec, noise;
	const struct shape *s;
	unsigned char *data;
	size_t n;
};

static struct tcase cases[NDTYPES * NCODECS * (NSHAPES + 1)];
static size_t ncases;

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
	static uint64_t x = 88172645463325252ull;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return x;
}

static uint64_t elements(const struct shape *s)
{
	uint64_t n = 1;
	for (int i = 0; i < s->ndim; i++)
		n *= s->dims[i];
	return n;
}

/* Smooth values, as weights and images are, that zstd can shrink. */
static void fill_smooth(unsigned char *p, size_t count, int dtype)
{
	for (size_t i = 0; i < count; i++) {
		float f = sinf(i * 0.01f);
		uint32_t u;
		uint16_t h = 0x3c00 + i % 64;
		int32_t i32 = i / 4;
		int64_t i64 = i * 1000;
		memcpy(&u, &f, 4);
		switch (dtype) {
		case DLT_F32: memcpy(p + 4 * i, &f, 4); break;
		case DLT_F16: memcpy(p + 2 * i, &h, 2); break;
		case DLT_BF16: h = u >> 16; memcpy(p + 2 * i, &h, 2); break;
		case DLT_I32: memcpy(p + 4 * i, &i32, 4); break;
		case DLT_I64: memcpy(p + 8 * i, &i64, 8); break;
		case DLT_U8: p[i] = i / 8; break;
		case DLT_U16: h = i / 3; memcpy(p + 2 * i, &h, 2); break;
		case DLT_U32: memcpy(p + 4 * i, &i32, 4); break;
		}
	}
}

static void add_case(int dtype, int codec, const struct shape *s, int noise)
{
	struct tcase *c = &cases[ncases];
	c->dtype = dtype;
	c->codec = codec;
	c->s = s;
	c->noise = noise;
	c->n = elements(s) * dlt_dtype_size(dtype);
	c->data = malloc(c->n ? c->n : 1);
	snprintf(c->name, sizeof(c->name), "%s/%s/%s%zu", dlt_dtype_name(dtype),
		 dlt_codec_name(codec), noise ? "noise" : "s", ncases);
	if (noise)
		for (size_t i = 0; i < c->n; i++)
			c->data[i] = rnd();
	else
		fill_smooth(c->data, elements(s), dtype);
	ncases++;
}

static void make_cases(void)
{
	for (size_t d = 0; d < NDTYPES; d++)
		for (size_t c = 0; c < NCODECS; c++) {
			for (size_t s = 0; s < NSHAPES; s++)
				add_case(dtypes[d], codecs[c], &shapes[s], 0);
			add_case(dtypes[d], codecs[c], &noise_shape, 1);
		}
}

static int write_cases(const char *path, const char *meta)
{
	dlt_archive_writer *w;
	int rc = dlt_archive_create(&w, path);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < ncases && rc == 0; i++) {
		const struct tcase *c = &cases[i];
		rc = dlt_archive_write_tensor(w, c->name, c->dtype, c->s->ndim, c->s->dims,
					      c->data, c->codec, i % 2 ? 0 : 9);
		if (rc == 0 && meta && i == ncases / 2)
			rc = dlt_archive_write_meta(w, meta);
	}
	if (rc < 0) {
		dlt_archive_writer_abort(w);
		return rc;
	}
	return dlt_archive_writer_close(w);
}

/* The codec a case must have been stored with: a compressed codec falls
 * back to raw where it cannot shrink the data. */
static int codec_ok(const struct tcase *c, const dlt_tensor_info *t)
{
	if (c->codec == DLT_RAW || c->noise)
		return t->codec == DLT_RAW && t->stored_size == t->raw_size;
	if (t->codec == DLT_RAW)
		return c->s != &shapes[BIG] && t->stored_size == t->raw_size;
	return t->codec == c->codec && t->stored_size < t->raw_size;
}

static int check_case(dlt_archive *a, const struct tcase *c)
{
	const dlt_tensor_info *t = dlt_archive_find(a, c->name);
	unsigned char *buf;
	int rc;

	if (!t || strcmp(t->name, c->name) != 0 || t->dtype != c->dtype ||
	    t->ndim != c->s->ndim || t->count != elements(c->s) || t->raw_size != c->n ||
	    memcmp(t->dims, c->s->dims, c->s->ndim * 8) != 0 || !codec_ok(c, t)) {
		diag("%s: wrong info", c->name);
		return 0;
	}
	buf = malloc(c->n ? c->n : 1);
	rc = dlt_archive_read(a, t, buf, c->n);
	if (rc < 0 || memcmp(buf, c->data, c->n) != 0) {
		diag("%s: %s", c->name, rc < 0 ? dlt_errmsg() : "data differs");
		free(buf);
		return 0;
	}
	free(buf);
	return 1;
}

static void check_all(dlt_archive *a, const char *how, const char *meta)
{
	const char *m = dlt_archive_meta(a);
	for (size_t d = 0; d < NDTYPES; d++)
		for (size_t k = 0; k < NCODECS; k++) {
			int good = 1;
			for (size_t i = 0; i < ncases; i++)
				if (cases[i].dtype == dtypes[d] && cases[i].codec == codecs[k])
					good &= check_case(a, &cases[i]);
			ok(good, "%s: every shape of %s with %s reads back", how,
			   dlt_dtype_name(dtypes[d]), dlt_codec_name(codecs[k]));
		}
	ok(dlt_archive_count(a) == ncases, "%s: %zu tensors", how, ncases);
	ok(meta ? m && strcmp(m, meta) == 0 : !m, "%s: metadata %s", how,
	   meta ? "reads back" : "absent");
	ok_rc(dlt_archive_verify(a), 0, "%s: verifies", how);
}

static char *slurp(const char *path, size_t *n)
{
	char *p = NULL;
	if (dlt_read_file(path, 0, &p, n) < 0)
		diag("%s", dlt_errmsg());
	return p;
}

static void test_names(void)
{
	for (size_t i = 0; i < NDTYPES; i++)
		ok(dlt_dtype_parse(dlt_dtype_name(dtypes[i])) == dtypes[i] &&
		   dlt_dtype_size(dtypes[i]) > 0, "dtype %s parses back",
		   dlt_dtype_name(dtypes[i]));
	ok(dlt_dtype_size(DLT_BF16) == 2 && dlt_dtype_size(DLT_I64) == 8 &&
	   dlt_dtype_size(0) == 0 && dlt_dtype_size(9) == 0 && !dlt_dtype_name(9) &&
	   dlt_dtype_parse("f64") == 0 && dlt_dtype_parse(NULL) == 0, "dtype sizes and unknowns");
	ok(strcmp(dlt_codec_name(DLT_SHUFFLE_ZSTD), "shuffle-zstd") == 0 &&
	   !dlt_codec_name(3), "codec names");
}

static void test_round_trip(void)
{
	static const char meta[] = "{\"kind\":\"test\",\"n\":[1,2,3]}";
	const char *with = tpath("rt-meta.dlt"), *without = tpath("rt.dlt");
	dlt_archive *a;
	size_t n;
	char *bytes;

	ok_rc(write_cases(with, meta), 0, "write every dtype, codec and shape, with metadata");
	ok_rc(write_cases(without, NULL), 0, "the same without metadata");
	ok_rc(dlt_archive_open(&a, with), 0, "open it");
	if (a) {
		check_all(a, "file", meta);
		ok(strcmp(dlt_archive_path(a), with) == 0, "the archive knows its path");
		dlt_archive_close(a);
	}
	ok_rc(dlt_archive_open(&a, without), 0, "open the one without metadata");
	if (a) {
		check_all(a, "file without metadata", NULL);
		dlt_archive_close(a);
	}
	bytes = slurp(with, &n);
	ok_rc(dlt_archive_open_mem(&a, bytes, n, "mem.dlt"), 0, "open it from memory");
	if (a) {
		check_all(a, "memory", meta);
		ok(dlt_archive_file_size(a) == n, "memory: file size");
		dlt_archive_close(a);
	}
	free(bytes);
}

/* The same tensors make the same bytes: a resumed run's checkpoint must be
 * byte-identical to the one it would have written anyway. */
static void test_deterministic(void)
{
	size_t n1, n2;
	char *b1, *b2;
	write_cases(tpath("d1.dlt"), "{}");
	write_cases(tpath("d2.dlt"), "{}");
	b1 = slurp(tpath("d1.dlt"), &n1);
	b2 = slurp(tpath("d2.dlt"), &n2);
	ok(b1 && b2 && n1 == n2 && memcmp(b1, b2, n1) == 0, "the same tensors give the same bytes");
	ok(n1 % 8 == 0, "the file is a multiple of 8 bytes");
	free(b1);
	free(b2);
}

static int wait_child(pid_t pid)
{
	int st;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

/* A child that writes the cases to its standard output, a pipe. */
static pid_t writer_child(int fd)
{
	pid_t pid;
	fflush(stdout);
	if ((pid = fork()) == 0) {
		dup2(fd, 1);
		close(fd);
		_exit(write_cases("-", "{}") == 0 ? 0 : 1);
	}
	close(fd);
	return pid;
}

static char *read_fd(int fd, size_t *len)
{
	dlt_buf b = { 0 };
	char chunk[65536];
	ssize_t n;
	while ((n = read(fd, chunk, sizeof(chunk))) > 0)
		dlt_buf_append(&b, chunk, n);
	close(fd);
	*len = b.len;
	return b.data;
}

static void test_pipe_write(void)
{
	int p[2];
	size_t n, nf;
	char *got, *want;
	pid_t pid;

	if (pipe(p) != 0)
		return;
	pid = writer_child(p[1]);
	got = read_fd(p[0], &n);
	ok(wait_child(pid) == 0, "a writer streams to a pipe (\"-\")");
	write_cases(tpath("pipe.dlt"), "{}");
	want = slurp(tpath("pipe.dlt"), &nf);
	ok(got && want && n == nf && memcmp(got, want, n) == 0,
	   "the stream is byte for byte the file");
	free(got);
	free(want);
}

static void test_pipe_read(void)
{
	int p[2], saved = dup(0);
	dlt_archive *a;
	pid_t pid;
	int rc;

	if (pipe(p) != 0)
		return;
	pid = writer_child(p[1]);
	dup2(p[0], 0);
	close(p[0]);
	rc = dlt_archive_open(&a, "-");
	dup2(saved, 0);
	close(saved);
	clearerr(stdin);
	ok_rc(rc, 0, "a reader reads a pipe (\"-\") written by a streaming writer");
	ok(wait_child(pid) == 0, "the writer succeeded");
	if (a) {
		check_all(a, "pipe", "{}");
		ok(strcmp(dlt_archive_path(a), "standard input") == 0, "stdin is named so");
		dlt_archive_close(a);
	}
}

static void test_fifo(void)
{
	const char *fifo = tpath("fifo.dlt");
	dlt_archive *a;
	pid_t pid;
	int rc;

	if (mkfifo(fifo, 0600) != 0)
		return;
	fflush(stdout);
	if ((pid = fork()) == 0) {
		int fd = open(fifo, O_WRONLY);
		dup2(fd, 1);
		_exit(write_cases("-", NULL) == 0 ? 0 : 1);
	}
	rc = dlt_archive_open(&a, fifo);
	ok_rc(rc, 0, "a named pipe, which cannot be mapped, is read like a stream");
	ok(wait_child(pid) == 0, "its writer succeeded");
	if (a) {
		ok_rc(dlt_archive_verify(a), 0, "the fifo's archive verifies");
		dlt_archive_close(a);
	}
}

static void test_stdout_full(void)
{
	pid_t pid;
	fflush(stdout);
	if ((pid = fork()) == 0) {
		int fd = open("/dev/full", O_WRONLY);
		dup2(fd, 1);
		_exit(write_cases("-", NULL) == DLT_EIO ? 0 : 1);
	}
	ok(wait_child(pid) == 0, "a full disk under stdout is DLT_EIO");
}

static int dir_entries(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;
	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.' || (e->d_name[1] && strcmp(e->d_name, ".."));
	closedir(d);
	return n;
}

static void test_atomic(void)
{
	const char *dir = tpath("atomic"), *keep = tpath("atomic/keep.dlt");
	static const uint64_t dims[] = { 4 };
	static const float x[4] = { 1, 2, 3, 4 };
	dlt_archive_writer *w;
	dlt_archive *a;
	size_t n;
	char *old;

	mkdir(dir, 0700);
	ok_rc(dlt_archive_create(&w, tpath("atomic/new.dlt")), 0, "create");
	dlt_archive_write_tensor(w, "x", DLT_F32, 1, dims, x, DLT_RAW, 0);
	dlt_archive_writer_abort(w);
	ok(dir_entries(dir) == 0, "abort leaves no file, final or temporary");

	dlt_write_file_atomic(keep, "old", 3);
	dlt_archive_create(&w, keep);
	dlt_archive_write_tensor(w, "x", DLT_F32, 1, dims, x, DLT_RAW, 0);
	dlt_archive_writer_abort(w);
	old = slurp(keep, &n);
	ok(old && n == 3 && memcmp(old, "old", 3) == 0, "abort leaves the old file alone");
	free(old);

	dlt_archive_create(&w, keep);
	dlt_archive_write_tensor(w, "x", DLT_F32, 1, dims, x, DLT_RAW, 0);
	ok_rc(dlt_archive_writer_close(w), 0, "close replaces it");
	ok(dir_entries(dir) == 1, "and leaves no temporary file");
	ok_rc(dlt_archive_open(&a, keep), 0, "the new file opens");
	dlt_archive_close(a);

	ok(dlt_archive_create(&w, tpath("no/such/dir.dlt")) < 0 && !w,
	   "create in a missing directory fails");
	ok_msg("no/such/dir.dlt", "naming the file");
}

/* A child process writing its part of records placed ahead, as another
 * rank does: off and n bytes of src, into the temporary file at path. */
static int place_child(const char *path, const unsigned char *src, size_t n, uint64_t off)
{
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open(path, O_WRONLY | O_CLOEXEC);
		_exit(fd < 0 || dlt_pwrite_all(fd, src, n, off) != 0 || fsync(fd) != 0 ||
		      close(fd) != 0);
	}
	return pid > 0 && wait_child(pid) == 0 ? 0 : -1;
}

/* Records placed ahead (a sharded run's checkpoint): two tensors whose
 * bytes two processes write, each its part, then the metadata and a
 * compressed tensor; the file is byte for byte the one written in order
 * with DLT_RAW for the two. */
static void test_placed(void)
{
	static const uint64_t da[] = { 64, 33 }, db[] = { 7 }, dc[] = { 3, 5 };
	static const char meta[] = "{\"kind\":\"placed\"}";
	const char *dir = tpath("placed"), *path = tpath("placed/p.dlt"), *ref = tpath("ref.dlt");
	float a[64 * 33], c[15];
	unsigned char b[7];
	uint64_t ra, rb, da_at, db_at, total;
	dlt_archive_writer *w;
	dlt_archive *ar;
	const char *tmp;
	char *x, *y;
	size_t nx, ny;

	for (size_t i = 0; i < 64 * 33; i++)
		a[i] = (float)(rnd() % 1000) / 7;
	for (size_t i = 0; i < 7; i++)
		b[i] = (unsigned char)rnd();
	for (size_t i = 0; i < 15; i++)
		c[i] = (float)i / 3;
	ra = dlt_archive_raw_record_size("a", DLT_F32, 2, da, &da_at);
	rb = dlt_archive_raw_record_size("optim.m/b", DLT_U8, 1, db, &db_at);
	ok(ra == 40 + 16 + 8 + 8 + sizeof(a) && rb == 40 + 8 + 16 + 8 + 8 && da_at == 72 &&
	   db_at == 72, "raw record sizes: header, bytes, padding to 8");
	ok(dlt_archive_raw_record_size("", DLT_F32, 2, da, NULL) == 0 &&
	   dlt_archive_raw_record_size("a", 99, 2, da, NULL) == 0, "0 for what cannot be written");
	total = ra + rb;

	mkdir(dir, 0700);
	ok_rc(dlt_archive_create(&w, path), 0, "create");
	ok_rc(dlt_archive_reserve(w, total), 0, "reserve the room of two records");
	tmp = dlt_archive_temp_path(w);
	ok(tmp && strstr(tmp, "placed/.p.dlt."), "the temporary file's name: %s", tmp ? tmp : "");
	ok(dlt_archive_write_meta(w, meta) == DLT_EINPUT, "no other record before they are adopted");
	ok_msg("bytes of records placed ahead not yet adopted", "saying so");
	/* a's first 1000 floats by a child, the rest and b by this process */
	ok(tmp && place_child(tmp, (const unsigned char *)a, 4000,
			      DLT_ARCHIVE_FIRST_RECORD + da_at) == 0, "a child writes its part");
	{
		int fd = tmp ? open(tmp, O_WRONLY) : -1;
		ok(fd >= 0 && dlt_pwrite_all(fd, (const unsigned char *)a + 4000, sizeof(a) - 4000,
					     DLT_ARCHIVE_FIRST_RECORD + da_at + 4000) == 0 &&
		   dlt_pwrite_all(fd, b, 7, DLT_ARCHIVE_FIRST_RECORD + ra + db_at) == 0 &&
		   close(fd) == 0, "this process writes the rest");
	}
	ok_rc(dlt_archive_adopt_tensor(w, "a", DLT_F32, 2, da), 0, "adopt a");
	ok(dlt_archive_adopt_tensor(w, "optim.m/b", DLT_U8, 2, da) == DLT_EINPUT,
	   "a tensor larger than the room left is refused");
	ok_msg("'optim.m/b' is not in the room placed ahead", "naming it");
	ok_rc(dlt_archive_adopt_tensor(w, "optim.m/b", DLT_U8, 1, db), 0, "adopt b");
	ok(dlt_archive_adopt_tensor(w, "c", DLT_F32, 2, dc) == DLT_EINPUT, "no room is left");
	ok_rc(dlt_archive_write_meta(w, meta), 0, "then the metadata");
	ok_rc(dlt_archive_write_tensor(w, "c", DLT_F32, 2, dc, c, DLT_SHUFFLE_ZSTD, 1), 0,
	      "and a compressed tensor");
	ok_rc(dlt_archive_writer_close(w), 0, "close");
	ok(dir_entries(dir) == 1, "the file under its name, no temporary file left");

	dlt_archive_create(&w, ref);
	dlt_archive_write_tensor(w, "a", DLT_F32, 2, da, a, DLT_RAW, 0);
	dlt_archive_write_tensor(w, "optim.m/b", DLT_U8, 1, db, b, DLT_RAW, 0);
	dlt_archive_write_meta(w, meta);
	dlt_archive_write_tensor(w, "c", DLT_F32, 2, dc, c, DLT_SHUFFLE_ZSTD, 1);
	ok_rc(dlt_archive_writer_close(w), 0, "the same written in order");
	x = slurp(path, &nx);
	y = slurp(ref, &ny);
	ok(x && y && nx == ny && memcmp(x, y, nx) == 0, "byte for byte the same file");
	free(x);
	free(y);
	ok_rc(dlt_archive_open(&ar, path), 0, "it opens");
	if (ar) {
		ok_rc(dlt_archive_verify(ar), 0, "and verifies");
		dlt_archive_close(ar);
	}

	/* bytes that no one wrote are zeros, checksummed as such */
	dlt_archive_create(&w, path);
	dlt_archive_reserve(w, ra);
	ok_rc(dlt_archive_adopt_tensor(w, "a", DLT_F32, 2, da), 0, "a record no one wrote");
	ok_rc(dlt_archive_writer_close(w), 0, "closes");
	ok_rc(dlt_archive_open(&ar, path), 0, "and opens");
	if (ar) {
		float *z = NULL;
		const dlt_tensor_info *t;
		ok(dlt_archive_read_alloc(ar, "a", DLT_F32, 2, &t, (void **)&z) == 0 && z &&
		   z[0] == 0 && z[64 * 33 - 1] == 0, "as zeros");
		free(z);
		dlt_archive_close(ar);
	}

	dlt_archive_create(&w, path);
	dlt_archive_write_tensor(w, "c", DLT_F32, 2, dc, c, DLT_RAW, 0);
	ok(dlt_archive_reserve(w, 64) == DLT_EINPUT, "reserve after a record is refused");
	ok(dlt_archive_reserve(w, 12) == DLT_EINPUT, "so is room of no multiple of 8");
	dlt_archive_writer_abort(w);
	dlt_archive_create(&w, path);
	dlt_archive_reserve(w, total);
	ok(dlt_archive_writer_close(w) == DLT_EINPUT, "close with records not adopted fails");
	ok(dir_entries(dir) == 1, "leaving the earlier file and no temporary one");
	ok_rc(dlt_archive_open(&ar, path), 0, "the earlier file is whole");
	dlt_archive_close(ar);
}

/* Argument errors are DLT_EINPUT, name the tensor, and leave the writer
 * usable. */
static void test_writer_errors(void)
{
	static const uint64_t d4[] = { 4 }, big[] = { 1ull << 32, 1ull << 32, 1ull << 32 };
	static const float x[4];
	const char *path = tpath("args.dlt");
	char longname[DLT_MAX_NAME + 2];
	dlt_archive_writer *w;
	dlt_archive *a;

	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = 0;
	dlt_archive_create(&w, path);
	ok_rc(dlt_archive_write_tensor(w, "a", DLT_F32, 1, d4, x, DLT_RAW, 0), 0, "a tensor");
	ok_rc(dlt_archive_write_tensor(w, "a", DLT_F32, 1, d4, x, DLT_ZSTD, 0), DLT_EINPUT,
	      "a duplicate name");
	ok_msg("args.dlt: duplicate tensor 'a'", "is named");
	ok_rc(dlt_archive_write_tensor(w, "b", 9, 1, d4, x, DLT_RAW, 0), DLT_EINPUT, "dtype 9");
	ok_msg("'b'", "names the tensor");
	ok_rc(dlt_archive_write_tensor(w, "b", 0, 1, d4, x, DLT_RAW, 0), DLT_EINPUT, "dtype 0");
	ok_rc(dlt_archive_write_tensor(w, "b", DLT_F32, 9, big, x, DLT_RAW, 0), DLT_EINPUT,
	      "rank 9");
	ok_rc(dlt_archive_write_tensor(w, "b", DLT_F32, -1, d4, x, DLT_RAW, 0), DLT_EINPUT,
	      "rank -1");
	ok_rc(dlt_archive_write_tensor(w, "b", DLT_F32, 3, big, x, DLT_RAW, 0), DLT_EINPUT,
	      "a shape that overflows");
	ok_rc(dlt_archive_write_tensor(w, "b", DLT_F32, 1, d4, NULL, DLT_RAW, 0), DLT_EINPUT,
	      "no data");
	ok_rc(dlt_archive_write_tensor(w, "b", DLT_F32, 1, d4, x, 3, 0), DLT_EINPUT, "codec 3");
	ok_rc(dlt_archive_write_tensor(w, "b", DLT_F32, 1, d4, x, DLT_ZSTD, 99), DLT_EINPUT,
	      "zstd level 99");
	ok_rc(dlt_archive_write_tensor(w, "", DLT_F32, 1, d4, x, DLT_RAW, 0), DLT_EINPUT,
	      "an empty name");
	ok_rc(dlt_archive_write_tensor(w, longname, DLT_F32, 1, d4, x, DLT_RAW, 0), DLT_EINPUT,
	      "a name of %d bytes", DLT_MAX_NAME + 1);
	longname[DLT_MAX_NAME] = 0;
	ok_rc(dlt_archive_write_tensor(w, longname, DLT_F32, 1, d4, x, DLT_RAW, 0), 0,
	      "a name of %d bytes", DLT_MAX_NAME);
	ok_rc(dlt_archive_write_meta(w, "{\"a\":"), DLT_EINPUT, "metadata that is not json");
	ok_msg("args.dlt: metadata", "is named");
	ok_rc(dlt_archive_write_meta(w, "[1]"), DLT_EINPUT, "metadata that is not an object");
	ok_rc(dlt_archive_write_meta(w, "{\"a\":1}"), 0, "metadata");
	ok_rc(dlt_archive_write_meta(w, "{}"), DLT_EINPUT, "a second metadata record");
	ok_rc(dlt_archive_writer_close(w), 0, "the writer still closes");
	ok_rc(dlt_archive_open(&a, path), 0, "and its archive opens");
	if (a) {
		ok(dlt_archive_count(a) == 2 && dlt_archive_find(a, longname) &&
		   strcmp(dlt_archive_meta(a), "{\"a\":1}") == 0, "holding what was accepted");
		dlt_archive_close(a);
	}
}

static void test_many(void)
{
	static const uint64_t d1[] = { 1 };
	const char *path = tpath("many.dlt");
	dlt_archive_writer *w;
	dlt_archive *a;
	char name[32];
	int good = 1;
	unsigned char v;

	dlt_archive_create(&w, path);
	for (int i = 0; i < 3000; i++) {
		snprintf(name, sizeof(name), "t%d", i);
		v = i;
		good &= dlt_archive_write_tensor(w, name, DLT_U8, 1, d1, &v, DLT_RAW, 0) == 0;
	}
	ok(good, "3000 tensors");
	ok_rc(dlt_archive_write_tensor(w, "t2999", DLT_U8, 1, d1, &v, DLT_RAW, 0), DLT_EINPUT,
	      "the last name again is a duplicate");
	ok_rc(dlt_archive_writer_close(w), 0, "close");
	ok_rc(dlt_archive_open(&a, path), 0, "open");
	if (!a)
		return;
	for (int i = 0; i < 3000; i++) {
		const dlt_tensor_info *t;
		snprintf(name, sizeof(name), "t%d", i);
		t = dlt_archive_find(a, name);
		good &= t && t == dlt_archive_tensor(a, i) &&
			dlt_archive_read(a, t, &v, 1) == 0 && v == (unsigned char)i;
	}
	ok(good, "each is found by name, in file order, with its value");
	ok(!dlt_archive_find(a, "t3000") && !dlt_archive_find(a, "") &&
	   !dlt_archive_tensor(a, 3000), "absent names and indices are NULL");
	dlt_archive_close(a);
}

/* Zeros compress within a hair of zstd's greatest ratio, which the reader
 * uses to refuse zstd bombs: the bound must not refuse them. */
static void test_zeros(void)
{
	static const uint64_t dims[] = { 8 << 20 };
	const char *path = tpath("zeros.dlt");
	float *x = calloc(dims[0], 4);
	const dlt_tensor_info *t = NULL;
	dlt_archive_writer *w;
	dlt_archive *a;
	void *p = NULL;

	dlt_archive_create(&w, path);
	dlt_archive_write_tensor(w, "z", DLT_F32, 1, dims, x, DLT_ZSTD, 19);
	dlt_archive_writer_close(w);
	ok_rc(dlt_archive_open(&a, path), 0, "32 MiB of zeros, compressed");
	if (a) {
		ok_rc(dlt_archive_read_alloc(a, "z", DLT_F32, 1, &t, &p), 0, "read back");
		ok(p && memcmp(p, x, dims[0] * 4) == 0 && t->raw_size / t->stored_size > 20000,
		   "equal, at a ratio of %llu",
		   t ? (unsigned long long)(t->raw_size / t->stored_size) : 0ull);
		free(p);
		dlt_archive_close(a);
	}
	free(x);
}

static void test_read_errors(void)
{
	static const uint64_t dims[] = { 2, 3 };
	static const float x[6] = { 1, 2, 3, 4, 5, 6 };
	const char *path = tpath("ra.dlt");
	const dlt_tensor_info *t;
	dlt_archive_writer *w;
	dlt_archive *a, *b;
	float got[6];
	void *p;

	dlt_archive_create(&w, path);
	dlt_archive_write_tensor(w, "w", DLT_F32, 2, dims, x, DLT_ZSTD, 0);
	dlt_archive_writer_close(w);
	if (dlt_archive_open(&a, path) < 0 || dlt_archive_open(&b, path) < 0)
		return;
	ok_rc(dlt_archive_read_alloc(a, "w", DLT_F32, 2, &t, &p), 0, "read_alloc");
	ok(p && t && t->count == 6 && memcmp(p, x, sizeof(x)) == 0, "gives the data and info");
	free(p);
	ok_rc(dlt_archive_read_alloc(a, "w", DLT_F32, -1, NULL, &p), 0, "any rank with -1");
	free(p);
	ok_rc(dlt_archive_read_alloc(a, "w", DLT_BF16, 2, &t, &p), DLT_EINPUT, "a dtype mismatch");
	ok_msg("ra.dlt: tensor 'w' is f32, not bf16", "names the tensor and both dtypes");
	ok(!p, "and gives no buffer");
	ok_rc(dlt_archive_read_alloc(a, "w", DLT_F32, 1, &t, &p), DLT_EINPUT, "a rank mismatch");
	ok_msg("ra.dlt: tensor 'w' has rank 2, not 1", "names the tensor and both ranks");
	ok_rc(dlt_archive_read_alloc(a, "v", DLT_F32, 1, &t, &p), DLT_EINPUT, "an absent tensor");
	ok_msg("ra.dlt: no tensor 'v'", "is named");
	t = dlt_archive_find(a, "w");
	ok_rc(dlt_archive_read(a, t, got, 5 * 4), DLT_EINPUT, "a buffer of the wrong size");
	ok_msg("ra.dlt: tensor 'w' has 24 bytes, not 20", "names the file and the tensor");
	ok_rc(dlt_archive_read(b, t, got, sizeof(got)), DLT_EINPUT,
	      "a tensor of another archive");
	ok_rc(dlt_archive_read(a, NULL, got, sizeof(got)), DLT_EINPUT, "no tensor");
	dlt_archive_close(a);
	dlt_archive_close(b);

	ok_rc(dlt_archive_open(&a, tpath("absent.dlt")), DLT_EINPUT, "a missing file");
	ok_msg("absent.dlt", "is named");
	ok(!a, "and gives no archive");
	ok_rc(dlt_archive_open(&a, tap_tmpdir()), DLT_EINPUT, "a directory");
	dlt_write_file_atomic(tpath("empty.dlt"), "", 0);
	ok_rc(dlt_archive_open(&a, tpath("empty.dlt")), DLT_EINPUT, "an empty file");
	ok_msg("empty.dlt: not a dlt archive (empty file)", "says so");
	dlt_write_file_atomic(tpath("text.dlt"), "hello, world\n", 13);
	ok_rc(dlt_archive_open(&a, tpath("text.dlt")), DLT_EINPUT, "a text file");
	ok_msg("text.dlt: not a dlt archive (bad magic)", "says so");
}

/* Opens n bytes and verifies them: the status of the first failure. */
static int open_verify(const void *p, size_t n, const char *name)
{
	dlt_archive *a;
	int rc = dlt_archive_open_mem(&a, p, n, name);
	if (rc == 0) {
		rc = dlt_archive_verify(a);
		dlt_archive_close(a);
	}
	return rc;
}

/* A damaged copy must fail with DLT_EINPUT and a message that starts with
 * the file's name; diag the first that does not. */
static int damaged_fails(const void *p, size_t n, const char *what, size_t at, int *shown)
{
	int rc = open_verify(p, n, "dmg.dlt");
	int good = rc == DLT_EINPUT && strncmp(dlt_errmsg(), "dmg.dlt: ", 9) == 0;
	if (!good && !(*shown)++)
		diag("%s at %zu: status %d, '%s'", what, at, rc, rc ? dlt_errmsg() : "");
	return good;
}

/* A small archive with a record of each kind. */
static char *small_archive(const char *path, size_t *n)
{
	static const uint64_t d4[] = { 4 }, d64[] = { 64 }, d0[] = { 0 };
	static const float x[4] = { 1, 2, 3, 4 };
	static const unsigned char z[64];
	dlt_archive_writer *w;
	dlt_archive_create(&w, path);
	dlt_archive_write_tensor(w, "x", DLT_F32, 1, d4, x, DLT_RAW, 0);
	dlt_archive_write_tensor(w, "z", DLT_U8, 1, d64, z, DLT_ZSTD, 0);
	dlt_archive_write_meta(w, "{\"a\":1}");
	dlt_archive_write_tensor(w, "e", DLT_I64, 1, d0, NULL, DLT_SHUFFLE_ZSTD, 0);
	dlt_archive_writer_close(w);
	return slurp(path, n);
}

static uint64_t get64(const char *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

static void test_truncation(void)
{
	size_t n, cuts = 0, failed = 0;
	char *f = small_archive(tpath("trunc.dlt"), &n);
	uint64_t index = get64(f + n - 32), count = get64(f + index + 8);
	dlt_archive *a;
	int shown = 0;

	for (size_t len = 0; len < n; len++) {
		int edge = len <= 16 || len >= index;
		for (uint64_t i = 0; i < count && !edge; i++)
			edge = len == get64(f + index + 16 + 8 * i);
		if (!edge && len % 5)	/* every record boundary, every 5th byte inside */
			continue;
		cuts++;
		failed += !damaged_fails(f, len, "truncated", len, &shown);
	}
	ok(failed == 0, "%zu truncations of a %zu-byte archive all fail (%zu did not)",
	   cuts, n, failed);
	ok_rc(open_verify(f, index, "dmg.dlt"), DLT_EINPUT, "cut at the index");
	ok_msg("dmg.dlt: truncated (trailer missing)", "says the trailer is missing");
	ok_rc(open_verify(f, 10, "dmg.dlt"), DLT_EINPUT, "cut in the header");
	ok_msg("dmg.dlt: truncated (header missing)", "says the header is missing");

	/* the mapped path, not only memory */
	dlt_write_file_atomic(tpath("cut.dlt"), f, index - 8);
	ok_rc(dlt_archive_open(&a, tpath("cut.dlt")), DLT_EINPUT, "a truncated file on disk");
	ok_msg("cut.dlt: truncated (trailer missing)", "names it");
	free(f);
}

/* Every byte is covered by a checksum or checked, so any change fails. */
static void test_flips(void)
{
	static const unsigned masks[] = { 0x01, 0x80, 0xff };
	size_t n, failed = 0;
	char *f = small_archive(tpath("flip.dlt"), &n);
	int shown = 0;

	ok(n >= 200 && n <= 400, "a small archive of %zu bytes", n);
	ok_rc(open_verify(f, n, "dmg.dlt"), 0, "that verifies");
	for (size_t m = 0; m < sizeof(masks) / sizeof(*masks); m++) {
		failed = 0;
		for (size_t i = 0; i < n; i++) {
			f[i] ^= masks[m];
			failed += !damaged_fails(f, n, "flipped", i, &shown);
			f[i] ^= masks[m];
		}
		ok(failed == 0, "each of its bytes xor 0x%02x fails open or verify (%zu did not)",
		   masks[m], failed);
	}
	free(f);
}

/* An archive of one f32 tensor stored with shuffle-zstd's planes: two raw
 * (noise), two frames. */
static char *planes_archive(const char *path, size_t *n, int *codec)
{
	static const uint64_t d[] = { 96 };
	float x[96];
	dlt_archive_writer *w;
	char *f;
	for (int i = 0; i < 96; i++)
		x[i] = 1.5f + (float)(rnd() % 65536) / (1 << 24);
	dlt_archive_create(&w, path);
	dlt_archive_write_tensor(w, "p", DLT_F32, 1, d, x, DLT_SHUFFLE_ZSTD, 1);
	dlt_archive_writer_close(w);
	f = slurp(path, n);
	*codec = f ? (unsigned char)f[16 + 9] : -1;
	return f;
}

/* The same for shuffle-zstd's plane table and frames. */
static void test_planes_damage(void)
{
	size_t n, failed = 0, cuts = 0;
	int codec, shown = 0;
	char *f = planes_archive(tpath("pflip.dlt"), &n, &codec);

	ok(f && codec == 3, "a %zu-byte archive of a tensor in planes (codec %d)", n, codec);
	ok_rc(open_verify(f, n, "dmg.dlt"), 0, "that verifies");
	for (size_t i = 0; i < n; i++) {
		f[i] ^= 0x01;
		failed += !damaged_fails(f, n, "flipped", i, &shown);
		f[i] ^= 0x01;
		f[i] ^= 0xff;
		failed += !damaged_fails(f, n, "flipped", i, &shown);
		f[i] ^= 0xff;
	}
	ok(failed == 0, "each of its bytes xor 0x01 or 0xff fails open or verify (%zu did not)",
	   failed);
	failed = 0;
	for (size_t len = 0; len < n; len++, cuts++)
		failed += !damaged_fails(f, len, "truncated", len, &shown);
	ok(failed == 0, "%zu truncations all fail (%zu did not)", cuts, failed);
	free(f);
}

/* Damage inside one tensor's data names it, and spares the others. */
static void test_damage_names(void)
{
	size_t n;
	char *f = small_archive(tpath("dn.dlt"), &n);
	const dlt_tensor_info *x;
	dlt_archive *a;
	float v[4];
	void *p;

	f[16 + 64] ^= 1;	/* the first data byte of 'x', after 64 bytes of header */
	if (dlt_archive_open_mem(&a, f, n, "data.dlt") < 0) {
		ok(0, "open with damaged data: %s", dlt_errmsg());
		return;
	}
	x = dlt_archive_find(a, "x");
	ok_rc(dlt_archive_read(a, x, v, sizeof(v)), DLT_EINPUT, "damaged data");
	ok_msg("data.dlt: checksum mismatch in tensor 'x'", "names the file and the tensor");
	ok_rc(dlt_archive_verify(a), DLT_EINPUT, "verify finds it");
	ok_msg("data.dlt: checksum mismatch in tensor 'x'", "names it too");
	ok_rc(dlt_archive_read_alloc(a, "z", DLT_U8, 1, NULL, &p), 0, "other tensors read");
	free(p);
	dlt_archive_close(a);
	free(f);
}

/* A hostile writer: any field, but right checksums, so that only the
 * reader's checks of sizes and offsets stand in the way. */
struct hrec {
	const char *tag;	/* NULL: "TENS" */
	int dtype, codec, ndim;	/* dtype 0: DLT_U8 */
	const uint64_t *dims;
	const char *name;	/* NULL: "t" */
	size_t namelen;		/* bytes of name written; 0: strlen(name) */
	uint32_t namelen_field;	/* 0: namelen */
	uint64_t stored, raw;	/* as written */
	uint64_t raw_hash;	/* 0: xxh64 of data */
	const void *data;	/* n bytes after the header */
	size_t n;
};

static void put32(dlt_buf *b, uint32_t v)
{
	dlt_buf_append(b, &v, 4);
}

static void put64(dlt_buf *b, uint64_t v)
{
	dlt_buf_append(b, &v, 8);
}

static void put_zeros(dlt_buf *b, size_t n)
{
	static const char zero[8];
	dlt_buf_append(b, zero, n);
}

static size_t pad8(size_t n)
{
	return (8 - n % 8) % 8;
}

static void hrec_put(dlt_buf *b, const struct hrec *r)
{
	size_t start = b->len;
	const char *name = r->name ? r->name : "t";
	size_t namelen = r->namelen ? r->namelen : strlen(name);
	unsigned char small[4] = { r->dtype ? r->dtype : DLT_U8, r->codec, r->ndim, 0 };
	dlt_hash h;

	dlt_buf_append(b, r->tag ? r->tag : "TENS", 4);
	put32(b, 40 + 8 * r->ndim + namelen + pad8(namelen) + 8);
	dlt_buf_append(b, small, 4);
	put32(b, r->namelen_field ? r->namelen_field : namelen);
	put64(b, r->stored);
	put64(b, r->raw);
	put64(b, r->raw_hash ? r->raw_hash : dlt_xxh64(r->data, r->n, 0));
	for (int i = 0; i < r->ndim; i++)
		put64(b, r->dims[i]);
	dlt_buf_append(b, name, namelen);
	put_zeros(b, pad8(namelen));
	dlt_hash_init(&h);
	dlt_hash_update(&h, b->data + start, b->len - start);
	dlt_hash_update(&h, r->data, r->n);
	dlt_hash_update(&h, "\0\0\0\0\0\0\0", pad8(r->n));
	put64(b, dlt_hash_final(&h));
	dlt_buf_append(b, r->data, r->n);
	put_zeros(b, pad8(r->n));
}

/* Rewrites the trailer for the index at index_off, with a right checksum. */
static void put_trailer(dlt_buf *b, size_t index_off)
{
	size_t isize = b->len - index_off;
	dlt_hash h;
	dlt_hash_init(&h);
	dlt_hash_update(&h, b->data, 16);
	dlt_hash_update(&h, b->data + index_off, isize);
	put64(b, index_off);
	put64(b, isize);
	put64(b, dlt_hash_final(&h));
	dlt_buf_append(b, "DLTEND\0\0", 8);
}

/* An archive of the records, its index count set to count. */
static void build(dlt_buf *b, const struct hrec *r, size_t nrec, uint64_t count)
{
	uint64_t off[8];
	size_t index_off;
	b->len = 0;
	dlt_buf_append(b, "\x89" "DLT\r\n\x1a\n", 8);
	put32(b, 1);
	put32(b, 0);
	for (size_t i = 0; i < nrec; i++) {
		off[i] = b->len;
		hrec_put(b, &r[i]);
	}
	index_off = b->len;
	dlt_buf_append(b, "INDX", 4);
	put32(b, 0);
	put64(b, count);
	for (size_t i = 0; i < nrec; i++)
		put64(b, off[i]);
	put_trailer(b, index_off);
}

/* Opens a hostile archive, then verifies it; expects DLT_EINPUT with
 * needle in the message. */
static void hostile(const struct hrec *r, size_t nrec, uint64_t count, const char *what,
		    const char *needle)
{
	dlt_buf b = { 0 };
	int rc;
	build(&b, r, nrec, count);
	rc = open_verify(b.data, b.len, "evil.dlt");
	ok_rc(rc, DLT_EINPUT, "%s", what);
	if (rc == DLT_EINPUT)
		ok_msg(needle, "%s: says '%s'", what, needle);
	dlt_buf_free(&b);
}

#define R(...) (&(struct hrec){ __VA_ARGS__ })
/* a u8 tensor 't' of 8 bytes, raw */
#define GOOD8 .ndim = 1, .dims = d8, .stored = 8, .raw = 8, .data = eight, .n = 8

static void test_hostile_records(void)
{
	static const uint64_t d8[] = { 8 }, huge[] = { 1ull << 40, 1ull << 40 },
		d36[] = { 1ull << 36 }, d40[] = { 1ull << 40 }, d5000[] = { 5000 },
		d100[] = { 100 }, d500[] = { 500 };
	static const char eight[8] = "abcdefgh", zeros[1000];
	static uint64_t d200[200];
	static char longname[5000];
	unsigned char frame[64];
	size_t fn = ZSTD_compress(frame, sizeof(frame), zeros, sizeof(zeros), 3);
	struct hrec two[2];
	dlt_buf b = { 0 };

	for (int i = 0; i < 200; i++)
		d200[i] = 1;
	memset(longname, 'n', sizeof(longname));
	build(&b, R(GOOD8), 1, 1);
	ok_rc(open_verify(b.data, b.len, "evil.dlt"), 0,
	      "a hand-made record opens: the builder is sound");
	dlt_buf_free(&b);

	hostile(R(.ndim = 200, .dims = d200, .stored = 8, .raw = 8, .data = eight, .n = 8), 1, 1,
		"ndim 200", "200 dimensions (at most 8) in record 0");
	hostile(R(.ndim = 2, .dims = huge, .stored = 8, .raw = 8, .data = eight, .n = 8), 1, 1,
		"dims whose product overflows", "shape overflow in tensor 't'");
	hostile(R(.dtype = DLT_F32, .ndim = 1, .dims = d36, .stored = 1ull << 38,
		  .raw = 1ull << 38, .data = eight, .n = 8), 1, 1,
		"a 256 GiB tensor in 8 bytes", "stored size 274877906944 not that of the record");
	hostile(R(.ndim = 1, .dims = d8, .stored = UINT64_MAX - 3, .raw = 8, .data = eight,
		  .n = 8), 1, 1, "a stored size near 2^64", "stored size");
	hostile(R(.ndim = 1, .dims = d8, .stored = 8, .raw = 9, .data = eight, .n = 8), 1, 1,
		"a raw size unlike the shape", "raw size 9");
	hostile(R(GOOD8, .namelen_field = 5000), 1, 1, "a name length of 5000",
		"name of 5000 bytes");
	hostile(R(GOOD8, .name = longname, .namelen = 5000), 1, 1, "a name of 5000 bytes",
		"name of 5000 bytes");
	hostile(R(GOOD8, .name = "a\0b", .namelen = 3), 1, 1, "a name with a nul byte",
		"bad name");
	hostile(R(GOOD8, .name = ""), 1, 1, "an empty name", "empty name");
	hostile(R(GOOD8, .dtype = 9), 1, 1, "dtype 9", "unknown dtype 9 in tensor 't'");
	hostile(R(GOOD8, .codec = 7), 1, 1, "codec 7", "unknown codec 7");
	hostile(R(GOOD8, .raw_hash = 1), 1, 1,
		"a raw checksum that is wrong under a right record checksum",
		"checksum mismatch (decoded data) in tensor 't'");
	hostile(R(.ndim = 1, .dims = d40, .codec = DLT_ZSTD, .stored = fn, .raw = 1ull << 40,
		  .data = frame, .n = fn), 1, 1, "a zstd bomb: 1 TiB from a few bytes",
		"impossible stored size");
	hostile(R(.ndim = 1, .dims = d5000, .codec = DLT_ZSTD, .stored = fn, .raw = 5000,
		  .data = frame, .n = fn), 1, 1, "zstd data that decodes short",
		"zstd data of 1000 bytes, not 5000 in tensor 't'");
	hostile(R(.ndim = 1, .dims = d500, .codec = DLT_ZSTD, .stored = fn, .raw = 500,
		  .data = frame, .n = fn), 1, 1, "zstd data that decodes long", "bad zstd data");
	hostile(R(.ndim = 1, .dims = d100, .codec = DLT_SHUFFLE_ZSTD, .stored = 8, .raw = 100,
		  .data = eight, .n = 8), 1, 1, "zstd data that is garbage", "bad zstd data");
	hostile(R(GOOD8, .codec = DLT_ZSTD), 1, 1, "a compressed record no smaller than raw",
		"impossible stored size");
	hostile(R(.ndim = 1, .dims = d8, .stored = 0, .raw = 8, .data = eight, .n = 0), 1, 1,
		"a raw record whose stored size is not its raw size", "stored size");
	hostile(R(GOOD8, .tag = "XXXX"), 1, 1, "an unknown record tag",
		"bad tag in record 0 (offset 16)");
	two[0] = two[1] = *R(GOOD8);
	hostile(two, 2, 2, "a duplicate name", "evil.dlt: duplicate tensor 't'");
	two[0] = two[1] = *R(.tag = "META", .name = "", .ndim = 1, .dims = d8, .stored = 8,
			     .raw = 8, .data = "{\"a\":1}", .n = 8);
	hostile(two, 1, 1, "metadata with a nul byte", "nul byte in metadata");
	two[0].data = two[1].data = "{\"a\":10}";
	hostile(two, 2, 2, "two metadata records", "more than one metadata record");
	two[0].data = "[1,2,3] ";
	hostile(two, 1, 1, "metadata that is not an object", "metadata is not a json object");
	two[0].data = "{\"a\":1  ";
	hostile(two, 1, 1, "metadata that is not json", "evil.dlt: metadata: ");
	two[0].name = "m";
	hostile(two, 1, 1, "metadata with a name", "bad metadata header");
}

/* shuffle-zstd's first layout (codec 2), as the writer wrote it before the
 * planes: one zstd frame of the shuffled bytes.  Made here by hand, it
 * must still read. */
static void test_old_shuffle(void)
{
	static const uint64_t d[] = { 3000 }, d8[] = { 1000 };
	enum { N = 3000 };
	float x[N], back[N];
	int64_t y[1000], yback[1000];
	unsigned char shuf[8 * N], frame[8 * N + 512];
	struct hrec r[2];
	dlt_archive *a;
	dlt_buf b = { 0 };
	size_t fn, yn;

	for (size_t i = 0; i < N; i++) {
		x[i] = sinf(i * 0.003f) * (1 + (rnd() % 100) / 1e4f);
		for (int k = 0; k < 4; k++)
			shuf[k * N + i] = ((unsigned char *)x)[4 * i + k];
	}
	fn = ZSTD_compress(frame, sizeof(frame), shuf, 4 * N, 3);
	r[0] = (struct hrec){ .dtype = DLT_F32, .codec = 2, .ndim = 1, .dims = d, .name = "old",
			      .stored = fn, .raw = 4 * N, .raw_hash = dlt_xxh64(x, 4 * N, 0),
			      .data = frame, .n = fn };
	for (size_t i = 0; i < 1000; i++)
		y[i] = (int64_t)i * 977 - 4000;
	for (size_t i = 0; i < 1000; i++)
		for (int k = 0; k < 8; k++)
			shuf[k * 1000 + i] = ((unsigned char *)y)[8 * i + k];
	yn = ZSTD_compress(frame + fn, sizeof(frame) - fn, shuf, 8000, 3);
	r[1] = (struct hrec){ .dtype = DLT_I64, .codec = 2, .ndim = 1, .dims = d8, .name = "old64",
			      .stored = yn, .raw = 8000, .raw_hash = dlt_xxh64(y, 8000, 0),
			      .data = frame + fn, .n = yn };
	build(&b, r, 2, 2);
	ok(fn < 4 * N && yn < 8000, "old-layout records of %zu and %zu bytes", fn, yn);
	ok_rc(dlt_archive_open_mem(&a, b.data, b.len, "old.dlt"), 0, "an archive of them opens");
	if (a) {
		const dlt_tensor_info *t = dlt_archive_find(a, "old"), *u = dlt_archive_find(a, "old64");
		ok(t && u && t->codec == DLT_SHUFFLE_ZSTD && u->codec == DLT_SHUFFLE_ZSTD,
		   "their codec shows as shuffle-zstd");
		ok(t && dlt_archive_read(a, t, back, sizeof(back)) == 0 &&
		   memcmp(back, x, sizeof(x)) == 0, "f32 reads back, byte for byte");
		ok(u && dlt_archive_read(a, u, yback, sizeof(yback)) == 0 &&
		   memcmp(yback, y, sizeof(y)) == 0, "i64 reads back, byte for byte");
		ok_rc(dlt_archive_verify(a), 0, "and verifies");
		dlt_archive_close(a);
	}
	dlt_buf_free(&b);
}

/* A codec 3 record of an f32 tensor 't' of 100 elements: the plane table
 * sizes[4], then body (n bytes).  raw_hash 0: that of want. */
static void planes_put(dlt_buf *b, const uint64_t sizes[4], const void *body, size_t n,
		       uint64_t raw_hash, const void *want)
{
	static const uint64_t d100[] = { 100 };
	dlt_buf payload = { 0 };
	dlt_buf_append(&payload, sizes, 32);
	dlt_buf_append(&payload, body, n);
	build(b, R(.dtype = DLT_F32, .codec = 3, .ndim = 1, .dims = d100, .stored = payload.len,
		   .raw = 400, .raw_hash = raw_hash ? raw_hash : dlt_xxh64(want, 400, 0),
		   .data = payload.data, .n = payload.len), 1, 1);
	dlt_buf_free(&payload);
}

static void hostile_planes(const char *what, const uint64_t sizes[4], const void *body, size_t n,
			   uint64_t raw_hash, const char *needle)
{
	static const float want[100];
	dlt_buf b = { 0 };
	int rc;
	planes_put(&b, sizes, body, n, raw_hash, want);
	rc = open_verify(b.data, b.len, "evil.dlt");
	ok_rc(rc, DLT_EINPUT, "%s", what);
	if (rc == DLT_EINPUT)
		ok_msg(needle, "%s: says '%s'", what, needle);
	dlt_buf_free(&b);
}

/* Plane tables that lie, under right checksums, and frames that are cut or
 * decode to the wrong size: a message naming the plane, nothing worse. */
static void test_hostile_planes(void)
{
	static const unsigned char zeros[400];
	unsigned char body[400 + 64], frame[64], more[400];
	float x[100], got[100];
	size_t fz, f50, f150, fx;
	dlt_archive *a;
	dlt_buf b = { 0 };

	/* planes 0 to 2 raw (zeros), plane 3 a frame of 100 bytes */
	for (int i = 0; i < 100; i++)
		more[i] = 0x3c + i % 3;
	fz = ZSTD_compress(frame, sizeof(frame), more, 100, 3);
	memcpy(body, zeros, 300);
	memcpy(body + 300, frame, fz);
	for (int i = 0; i < 100; i++) {
		uint32_t u = (uint32_t)more[i] << 24;
		memcpy(&x[i], &u, 4);
	}
	planes_put(&b, (uint64_t[]){ 100, 100, 100, fz }, body, 300 + fz, 0, x);
	ok_rc(dlt_archive_open_mem(&a, b.data, b.len, "planes.dlt"), 0,
	      "a hand-made record in planes opens");
	if (a) {
		ok(dlt_archive_read(a, dlt_archive_find(a, "t"), got, sizeof(got)) == 0 &&
		   memcmp(got, x, sizeof(x)) == 0, "and reads back: the layout is as documented");
		dlt_archive_close(a);
	}
	dlt_buf_free(&b);

	hostile_planes("planes of no bytes", (uint64_t[]){ 0, 0, 0, 0 }, zeros, 0, 1,
		       "zstd data of 0 bytes, not 100 in plane 0 of tensor 't'");
	{
		/* 16 stored bytes: half a table */
		dlt_buf h = { 0 };
		static const uint64_t d100[] = { 100 };
		build(&h, R(.dtype = DLT_F32, .codec = 3, .ndim = 1, .dims = d100, .stored = 16,
			    .raw = 400, .raw_hash = 1, .data = zeros, .n = 16), 1, 1);
		ok_rc(open_verify(h.data, h.len, "evil.dlt"), DLT_EINPUT, "half a plane table");
		ok_msg("evil.dlt: stored size 16 less than its plane table in tensor 't'",
		       "says so, naming the tensor");
		dlt_buf_free(&h);
	}
	hostile_planes("a plane larger than its elements", (uint64_t[]){ 100, 100, 1000, fz },
		       body, 300 + fz, 0, "plane 2 of 1000 bytes (100 elements");
	hostile_planes("a plane size near 2^64", (uint64_t[]){ 100, UINT64_MAX - 50, 100, fz },
		       body, 300 + fz, 0, "plane 1 of 18446744073709551565 bytes");
	hostile_planes("planes that run past the stored bytes", (uint64_t[]){ 100, 100, 100, 50 },
		       body, 300 + 20, 0, "plane 3 of 50 bytes (100 elements, 20 bytes left)");
	hostile_planes("bytes after the last plane", (uint64_t[]){ 100, 100, 100, fz },
		       body, 300 + fz + 5, 0, "5 stored bytes after the last plane in tensor 't'");
	hostile_planes("every plane raw: no smaller than raw", (uint64_t[]){ 100, 100, 100, 100 },
		       zeros, 400, 0, "impossible stored size");
	memset(more, 0xa5, sizeof(more));
	hostile_planes("a plane frame that is garbage", (uint64_t[]){ 100, 100, 100, 12 },
		       more, 312, 0, "bad zstd data (");
	ok_msg("in plane 3 of tensor 't'", "names the plane and the tensor");
	hostile_planes("a plane frame cut short", (uint64_t[]){ 100, 100, 100, fz - 2 },
		       body, 300 + fz - 2, 0, "bad zstd data");
	f50 = ZSTD_compress(body + 300, 64, zeros, 50, 3);
	hostile_planes("a plane frame that decodes short", (uint64_t[]){ 100, 100, 100, f50 },
		       body, 300 + f50, 0, "zstd data of 50 bytes, not 100 in plane 3 of tensor 't'");
	f150 = ZSTD_compress(body + 300, 64, zeros, 150, 3);
	hostile_planes("a plane frame that decodes long", (uint64_t[]){ 100, 100, 100, f150 },
		       body, 300 + f150, 0, "bad zstd data");
	fx = ZSTD_compress(body, 64, zeros, 100, 3);
	memcpy(body + fx, zeros, 300);
	hostile_planes("a raw checksum that is wrong under a right plane table",
		       (uint64_t[]){ fx, 100, 100, 100 }, body, fx + 300, 1,
		       "checksum mismatch (decoded data) in tensor 't'");
}

/* Changes n bytes at off of a well-formed archive, then puts the trailer's
 * checksum right again. */
static void hostile_index(const char *what, size_t off, const void *p, size_t n,
			  const char *needle)
{
	static const uint64_t d8[] = { 8 };
	static const char eight[8] = "abcdefgh";
	dlt_buf b = { 0 };
	int rc;
	build(&b, R(GOOD8), 1, 1);
	b.len -= 32;
	memcpy(b.data + off, p, n);
	put_trailer(&b, 16 + 72);
	rc = open_verify(b.data, b.len, "evil.dlt");
	ok_rc(rc, DLT_EINPUT, "%s", what);
	if (rc == DLT_EINPUT)
		ok_msg(needle, "%s: says '%s'", what, needle);
	dlt_buf_free(&b);
}

static void test_hostile_index(void)
{
	uint64_t v;
	const size_t ix = 16 + 72;	/* the index of one 8-byte tensor named 't' */
	dlt_buf b = { 0 };

	v = 1ull << 40;
	hostile_index("an index count of 2^40", ix + 8, &v, 8, "bad index");
	v = UINT64_MAX / 8 + 3;
	hostile_index("an index count whose size overflows", ix + 8, &v, 8, "bad index");
	v = 0;
	hostile_index("an index count of 0 with a record", ix + 8, &v, 8, "bad index");
	v = 24;
	hostile_index("a record offset inside the header", ix + 16, &v, 8, "bad index");
	v = 1ull << 62;
	hostile_index("a record offset past the end", ix + 16, &v, 8, "bad index");
	hostile_index("an index tag that is wrong", ix, "XNDX", 4, "bad index");
	hostile_index("a file header of version 2", 8, "\2", 1, "unsupported version 2");
	hostile_index("a file header with flags", 12, "\1", 1, "unsupported flags 0x1");

	/* two records both at offset 16: overlap */
	build(&b, R(.stored = 1, .raw = 1, .data = "a", .n = 1), 1, 1);
	b.len -= 32;
	put64(&b, 16);		/* a second entry, also at 16 */
	memcpy(b.data + 16 + 56 + 8 + 8, (uint64_t[]){ 2 }, 8);
	put_trailer(&b, 16 + 56 + 8);
	ok_rc(open_verify(b.data, b.len, "evil.dlt"), DLT_EINPUT, "two records at one offset");
	ok_msg("bad index", "the index is bad");

	/* trailers pointing anywhere */
	build(&b, R(.stored = 1, .raw = 1, .data = "a", .n = 1), 1, 1);
	for (int k = 0; k < 4; k++) {
		static const uint64_t offs[] = { 0, 8, 1ull << 63, UINT64_MAX };
		memcpy(b.data + b.len - 32, &offs[k], 8);
		ok_rc(open_verify(b.data, b.len, "evil.dlt"), DLT_EINPUT,
		      "a trailer with the index at %llu", (unsigned long long)offs[k]);
	}
	memcpy(b.data + b.len - 24, (uint64_t[]){ UINT64_MAX - 8 }, 8);
	ok_rc(open_verify(b.data, b.len, "evil.dlt"), DLT_EINPUT, "an index size near 2^64");
	dlt_buf_free(&b);
}

/* A hostile file must not make the reader ask for much memory: with the
 * address space held to what the process has plus 1 GiB, a big allocation
 * would fail, as DLT_ENOMEM, and the DLT_EINPUT tests would catch it.
 * AddressSanitizer reserves terabytes up front, so it runs unlimited. */
static void with_memory_limit(void (*fn)(void))
{
#ifndef __SANITIZE_ADDRESS__
	struct rlimit old, lim;
	unsigned long pages = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f) {
		if (fscanf(f, "%lu", &pages) != 1)
			pages = 0;
		fclose(f);
	}
	if (pages && getrlimit(RLIMIT_AS, &old) == 0) {
		lim = old;
		lim.rlim_cur = pages * sysconf(_SC_PAGESIZE) + (1ul << 30);
		if (old.rlim_cur == RLIM_INFINITY || lim.rlim_cur < old.rlim_cur)
			setrlimit(RLIMIT_AS, &lim);
		fn();
		setrlimit(RLIMIT_AS, &old);
		return;
	}
#endif
	fn();
}

static void test_hostile(void)
{
	test_hostile_records();
	test_hostile_planes();
	test_hostile_index();
}

int main(void)
{
	make_cases();
	test_names();
	test_round_trip();
	test_deterministic();
	test_pipe_write();
	test_pipe_read();
	test_fifo();
	test_stdout_full();
	test_atomic();
	test_placed();
	test_writer_errors();
	test_many();
	test_zeros();
	test_read_errors();
	test_truncation();
	test_flips();
	test_planes_damage();
	test_damage_names();
	test_old_shuffle();
	with_memory_limit(test_hostile);
	for (size_t i = 0; i < ncases; i++)
		free(cases[i].data);
	return done_testing();
}
