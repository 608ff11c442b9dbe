/* The codecs of the archive (lib/archive, shuffle.c): the byte shuffle and
 * its inverse against their plain loops, xxh64 whole against streamed, and
 * a tensor of any bytes written with each codec and read back the same.
 * The first byte picks the dtype, the zstd level and where the streamed
 * hash splits; the rest is the tensor's bytes (cut to whole elements). */
#include "archive/archive.h"
#include "archive/format.h"
#include "util/util.h"

#include "fuzz.h"

static void check_shuffle(const unsigned char *src, size_t count, size_t esize)
{
	size_t n = count * esize;
	unsigned char *fast = malloc(n + 1), *ref = malloc(n + 1), *rev = malloc(n + 1);
	const unsigned char *planes[AR_MAX_ESIZE];

	if (ar_shuffle(fast, src, count, esize) != ar_xxh64(src, n))
		abort();
	ar_shuffle_ref(ref, src, count, esize);
	if (memcmp(fast, ref, n))
		abort();
	/* the planes in reverse order, not together as the writer left
	 * them: as a reader hands them over from their frames */
	for (size_t k = 0; k < esize; k++) {
		planes[k] = rev + (esize - 1 - k) * count;
		memcpy(rev + (esize - 1 - k) * count, ref + k * count, count);
	}
	if (ar_unshuffle(fast, planes, count, esize) != ar_xxh64(src, n) || memcmp(fast, src, n))
		abort();
	ar_unshuffle_ref(fast, planes, count, esize);
	if (memcmp(fast, src, n))
		abort();
	free(fast);
	free(ref);
	free(rev);
}

static void check_hash(const unsigned char *p, size_t n, size_t split)
{
	ar_xxh64_state h;

	split = n ? split % (n + 1) : 0;
	ar_xxh64_init(&h);
	ar_xxh64_update(&h, p, split);
	ar_xxh64_update(&h, p + split, n - split);
	if (ar_xxh64_final(&h) != ar_xxh64(p, n) || ar_xxh64(p, n) != dlt_xxh64(p, n, 0))
		abort();
}

static void round_trip(const unsigned char *p, size_t count, int dtype, int codec, int level)
{
	dlt_archive_writer *w;
	dlt_archive *a;
	const char *path = fuzz_path("codec.dlt");
	uint64_t dims[2] = { count, 1 };
	size_t n = count * dlt_dtype_size(dtype);
	unsigned char *back = malloc(n + 1);

	if (dlt_archive_create(&w, path) < 0)
		abort();
	if (dlt_archive_write_tensor(w, "t", dtype, 2, dims, p, codec, level) < 0 ||
	    dlt_archive_writer_close(w) < 0)
		abort();
	if (dlt_archive_open(&a, path) < 0 || dlt_archive_count(a) != 1 ||
	    dlt_archive_read(a, dlt_archive_tensor(a, 0), back, n) < 0 || memcmp(back, p, n))
		abort();
	dlt_archive_close(a);
	free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int dtypes[] = { DLT_U8, DLT_F16, DLT_F32, DLT_I64 };
	int dtype, level;
	size_t esize, count;

	if (size < 1)
		return 0;
	dtype = dtypes[data[0] & 3];
	level = 1 + (data[0] >> 2 & 3);
	esize = dlt_dtype_size(dtype);
	count = (size - 1) / esize;
	check_hash(data + 1, size - 1, data[0]);
	check_shuffle(data + 1, count, esize);
	for (int codec = DLT_RAW; codec <= DLT_SHUFFLE_ZSTD; codec++)
		round_trip(data + 1, count, dtype, codec, level);
	return 0;
}
