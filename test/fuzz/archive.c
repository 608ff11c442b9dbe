/* The .dlt archive reader (lib/archive), on any bytes: open from memory,
 * every tensor read, viewed and found by name, verify; then the same bytes
 * as a file, opened by mapping, described as a dataset (dlt-prep info,
 * lib/prep/info.c) and loaded as one (dlt-train and dlt-infer,
 * lib/train/data.c).
 *
 * The checksums would stop a fuzzer at the first byte it changes, so the
 * harness first sets those it can compute where the structure allows:
 * the trailer's, each record's, and a raw record's checksum of its raw
 * bytes (a compressed record's needs its decoding, which the reader then
 * runs before it finds the mismatch). */
#include "archive/archive.h"
#include "archive/format.h"
#include "prep/prep.h"
#include "train/train.h"
#include "util/util.h"

#include "fuzz.h"

static void fix_record(unsigned char *p, uint64_t off, uint64_t end)
{
	unsigned char *r;
	uint64_t hsize, stored;

	if (off < AR_HEADER || off > end || end - off < AR_REC_FIXED + 8)
		return;
	r = p + off;
	hsize = ar_rec_header_size(r[10], ar_get32(r + 12));
	stored = ar_get64(r + 16);
	if (r[10] > DLT_MAX_DIMS || ar_get32(r + 12) > DLT_MAX_NAME || hsize > end - off ||
	    stored > end - off - hsize)
		return;
	if (r[9] == AR_CODEC_RAW)
		ar_put64(r + 32, ar_xxh64(r + hsize, stored));
	ar_put64(r + hsize - 8, ar_hash(r, hsize - 8, r + hsize, stored));
}

static void fix_checksums(unsigned char *p, size_t n)
{
	unsigned char *t = p + n - AR_TRAILER, *ix;
	uint64_t off, size, count;

	if (n < AR_HEADER + AR_INDEX_FIXED + AR_TRAILER)
		return;
	off = ar_get64(t);
	size = ar_get64(t + 8);
	if (off < AR_HEADER || off > n - AR_TRAILER || size != n - AR_TRAILER - off ||
	    size < AR_INDEX_FIXED)
		return;
	ix = p + off;
	count = (size - AR_INDEX_FIXED) / 8;
	for (uint64_t i = 0; i < count; i++) {
		uint64_t end = i + 1 < count ? ar_get64(ix + AR_INDEX_FIXED + 8 * (i + 1)) : off;
		if (end <= off)
			fix_record(p, ar_get64(ix + AR_INDEX_FIXED + 8 * i), end);
	}
	ar_put64(t + 16, ar_hash(p, AR_HEADER, ix, size));
}

static void read_all(dlt_archive *a)
{
	size_t n = dlt_archive_count(a);

	for (size_t i = 0; i < n; i++) {
		const dlt_tensor_info *t = dlt_archive_tensor(a, i);
		const void *view;
		void *out;
		if (dlt_archive_find(a, t->name) == NULL)
			abort();
		if (dlt_archive_view(a, t, &view) == 0 && view && t->codec != DLT_RAW)
			abort();
		if ((out = dlt_malloc(t->raw_size)) != NULL) {
			dlt_archive_read(a, t, out, t->raw_size);
			free(out);
		}
	}
	dlt_archive_verify(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned char *p = malloc(size ? size : 1);
	dlt_archive *a;
	dlt_buf info = { 0 };
	dlt_dataset d;
	const char *path;

	memcpy(p, data, size);
	fix_checksums(p, size);
	if (dlt_archive_open_mem(&a, p, size, "fuzz.dlt") == 0) {
		read_all(a);
		dlt_archive_close(a);
	}
	path = fuzz_file("fuzz.dlt", p, size);
	if (dlt_archive_open(&a, path) == 0) {
		read_all(a);
		dlt_archive_close(a);
	}
	dlt_prep_info(path, 0, &info);
	info.len = 0;
	dlt_prep_info(path, 1, &info);
	dlt_buf_free(&info);
	if (dlt_dataset_load(&d, path) == 0)
		dlt_dataset_free(&d);
	free(p);
	return 0;
}
