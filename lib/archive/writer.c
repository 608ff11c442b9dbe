/* writer: appends records and never seeks, so an archive can go down a
 * pipe; the index and trailer follow the last record. */
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "archive/archive.h"
#include "archive/format.h"
#include "util/util.h"

/* The tensor names written so far, an open-addressing hash set: a dataset
 * can hold many tensors and each needs its duplicate check. */
struct nameset {
	char **slot;
	size_t cap, n;		/* cap: a power of two, at most half full */
};

struct dlt_archive_writer {
	dlt_ofile out;
	char *name;		/* for messages */
	uint64_t off;		/* bytes written so far */
	dlt_buf index;		/* the index as it will be written */
	uint64_t nrec;
	struct nameset names;
	int has_meta;
	int rc;			/* the first failure after which the output is unusable */
	ZSTD_CCtx *zc;
};

/* The slot that holds name, or the empty one where it belongs. */
static char **nameset_slot(const struct nameset *s, const char *name)
{
	size_t mask = s->cap - 1;
	size_t i = dlt_xxh64(name, strlen(name), 0) & mask;
	while (s->slot[i] && strcmp(s->slot[i], name) != 0)
		i = (i + 1) & mask;
	return &s->slot[i];
}

static int nameset_grow(struct nameset *s)
{
	size_t cap = s->cap ? s->cap * 2 : 64;
	struct nameset t = { dlt_calloc(cap, sizeof(char *)), cap, s->n };
	if (!t.slot)
		return DLT_ENOMEM;
	for (size_t i = 0; i < s->cap; i++)
		if (s->slot[i])
			*nameset_slot(&t, s->slot[i]) = s->slot[i];
	free(s->slot);
	*s = t;
	return 0;
}

/* 1 if name was added, 0 if it was there already. */
static int nameset_add(struct nameset *s, const char *name)
{
	char **slot;
	int rc;
	if (2 * (s->n + 1) > s->cap && (rc = nameset_grow(s)) < 0)
		return rc;
	slot = nameset_slot(s, name);
	if (*slot)
		return 0;
	if (!(*slot = dlt_strdup(name)))
		return DLT_ENOMEM;
	s->n++;
	return 1;
}

static void nameset_free(struct nameset *s)
{
	for (size_t i = 0; i < s->cap; i++)
		free(s->slot[i]);
	free(s->slot);
}

static void writer_free(dlt_archive_writer *w)
{
	nameset_free(&w->names);
	dlt_buf_free(&w->index);
	ZSTD_freeCCtx(w->zc);
	free(w->name);
	free(w);
}

/* Writes n bytes; a failure is sticky, so that close never commits a
 * file with a hole in it. */
static int emit(dlt_archive_writer *w, const void *p, size_t n)
{
	if (w->rc < 0)
		return w->rc;
	if (n && fwrite(p, 1, n, w->out.fp) != n)
		return w->rc = dlt_error_errno(DLT_EIO, "%s", w->name);
	w->off += n;
	return 0;
}

static void file_header(unsigned char h[AR_HEADER])
{
	memcpy(h, AR_MAGIC, 8);
	ar_put32(h + 8, AR_VERSION);
	ar_put32(h + 12, 0);
}

int dlt_archive_create(dlt_archive_writer **wp, const char *path)
{
	static const unsigned char index_fixed[AR_INDEX_FIXED];
	unsigned char h[AR_HEADER];
	dlt_archive_writer *w;
	int rc;

	*wp = NULL;
	if (!(w = dlt_calloc(1, sizeof(*w))))
		return DLT_ENOMEM;
	w->name = dlt_strdup(strcmp(path, "-") == 0 ? "standard output" : path);
	/* the index's fixed part is filled in at close */
	if (!w->name || (rc = dlt_buf_append(&w->index, index_fixed, AR_INDEX_FIXED)) < 0) {
		writer_free(w);
		return DLT_ENOMEM;
	}
	if ((rc = dlt_ofile_open(&w->out, path)) < 0) {
		writer_free(w);
		return rc;
	}
	file_header(h);
	if ((rc = emit(w, h, sizeof(h))) < 0) {
		dlt_archive_writer_abort(w);
		return rc;
	}
	*wp = w;
	return 0;
}

/* A record's bytes as stored: the data itself, or its compressed form
 * when that is smaller.  *buf is what the caller frees. */
struct stored {
	const void *p;
	size_t n;
	int codec;
	void *buf;
};

static int encode(dlt_archive_writer *w, struct stored *s, const void *data, size_t n,
		    size_t esize, int level)
{
	size_t cap = ZSTD_compressBound(n), z;
	void *src = (void *)data, *shuf = NULL;

	if (!w->zc && !(w->zc = ZSTD_createCCtx()))
		return dlt_error(DLT_ENOMEM, "out of memory (zstd context)");
	if (s->codec == DLT_SHUFFLE_ZSTD) {
		if (!(src = shuf = dlt_malloc(n)))
			return DLT_ENOMEM;
		ar_shuffle(shuf, data, n / esize, esize);
	}
	if (!(s->buf = dlt_malloc(cap))) {
		free(shuf);
		return DLT_ENOMEM;
	}
	z = ZSTD_compressCCtx(w->zc, s->buf, cap, src, n, level ? level : ZSTD_CLEVEL_DEFAULT);
	free(shuf);
	if (ZSTD_isError(z))
		return dlt_error(DLT_EFAIL, "%s: zstd: %s", w->name, ZSTD_getErrorName(z));
	/* not smaller: raw reads faster and the reader insists on it */
	if (z >= n) {
		free(s->buf);
		s->buf = NULL;
		s->codec = DLT_RAW;
		return 0;
	}
	s->p = s->buf;
	s->n = z;
	return 0;
}

/* Builds the record header in h and returns its size. */
static size_t record_header(unsigned char *h, const char *tag, const char *name, int dtype,
			    int ndim, const uint64_t *dims, uint64_t raw_size,
			    const struct stored *s, uint64_t raw_hash)
{
	size_t namelen = strlen(name);
	size_t size = ar_rec_header_size(ndim, namelen);
	unsigned char *p = h + AR_REC_FIXED;

	memset(h, 0, size);
	memcpy(h, tag, 4);
	ar_put32(h + 4, size);
	h[8] = dtype;
	h[9] = s->codec;
	h[10] = ndim;
	ar_put32(h + 12, namelen);
	ar_put64(h + 16, s->n);
	ar_put64(h + 24, raw_size);
	ar_put64(h + 32, raw_hash);
	for (int i = 0; i < ndim; i++, p += 8)
		ar_put64(p, dims[i]);
	memcpy(p, name, namelen);
	return size;
}

static int write_record(dlt_archive_writer *w, const char *tag, const char *name, int dtype,
			int ndim, const uint64_t *dims, const void *data, uint64_t n,
			int codec, int level)
{
	static const unsigned char zero[8];
	unsigned char h[AR_REC_FIXED + 8 * DLT_MAX_DIMS + DLT_MAX_NAME + 8];
	unsigned char off[8];
	struct stored s = { data, n, codec, NULL };
	uint64_t hash;
	size_t hsize;
	int rc;

	if (codec != DLT_RAW && (rc = encode(w, &s, data, n, dlt_dtype_size(dtype), level)) < 0)
		goto fail;
	hsize = record_header(h, tag, name, dtype, ndim, dims, n, &s, dlt_xxh64(data, n, 0));
	if ((rc = ar_hash(&hash, h, hsize - 8, s.p, s.n)) < 0)
		goto fail;
	ar_put64(h + hsize - 8, hash);
	ar_put64(off, w->off);
	if ((rc = dlt_buf_append(&w->index, off, 8)) < 0)
		goto fail;
	w->nrec++;
	if ((rc = emit(w, h, hsize)) < 0 || (rc = emit(w, s.p, s.n)) < 0)
		goto fail;
	rc = emit(w, zero, ar_pad(s.n));
fail:
	free(s.buf);
	/* past the argument checks, any failure leaves the output unusable */
	if (rc < 0 && w->rc == 0)
		w->rc = rc;
	return rc;
}

static int check_tensor_args(dlt_archive_writer *w, const char *name, int dtype, int ndim,
			     const uint64_t *dims, const void *data, int codec, int level,
			     uint64_t *bytes)
{
	uint64_t count;
	size_t namelen = name ? strlen(name) : 0;

	if (namelen == 0 || namelen > DLT_MAX_NAME)
		return dlt_error(DLT_EINPUT, "%s: tensor name of %zu bytes (1 to %d allowed)",
				 w->name, namelen, DLT_MAX_NAME);
	if (!dlt_dtype_size(dtype))
		return dlt_error(DLT_EINPUT, "%s: unknown dtype %d for tensor '%s'",
				 w->name, dtype, name);
	if (ndim < 0 || ndim > DLT_MAX_DIMS || (ndim && !dims))
		return dlt_error(DLT_EINPUT, "%s: bad rank %d for tensor '%s'", w->name, ndim, name);
	if (!ar_shape_size(dtype, ndim, dims, &count, bytes))
		return dlt_error(DLT_EINPUT, "%s: shape of tensor '%s' overflows", w->name, name);
	if (*bytes && !data)
		return dlt_error(DLT_EINPUT, "%s: no data for tensor '%s'", w->name, name);
	if (!dlt_codec_name(codec))
		return dlt_error(DLT_EINPUT, "%s: unknown codec %d for tensor '%s'",
				 w->name, codec, name);
	if (codec != DLT_RAW && level && (level < ZSTD_minCLevel() || level > ZSTD_maxCLevel()))
		return dlt_error(DLT_EINPUT, "%s: zstd level %d out of range %d to %d",
				 w->name, level, ZSTD_minCLevel(), ZSTD_maxCLevel());
	if (w->names.n >= DLT_MAX_TENSORS)
		return dlt_error(DLT_EINPUT, "%s: more than %u tensors", w->name, DLT_MAX_TENSORS);
	return 0;
}

int dlt_archive_write_tensor(dlt_archive_writer *w, const char *name, int dtype,
			     int ndim, const uint64_t *dims, const void *data,
			     int codec, int level)
{
	uint64_t bytes;
	int rc;

	if (w->rc < 0)
		return w->rc;
	if ((rc = check_tensor_args(w, name, dtype, ndim, dims, data, codec, level, &bytes)) < 0)
		return rc;
	if ((rc = nameset_add(&w->names, name)) < 0)
		return w->rc = rc;
	if (rc == 0)
		return dlt_error(DLT_EINPUT, "%s: duplicate tensor '%s'", w->name, name);
	return write_record(w, AR_TAG_TENS, name, dtype, ndim, dims, data, bytes, codec, level);
}

int dlt_archive_write_meta(dlt_archive_writer *w, const char *json)
{
	uint64_t len;
	dlt_jval v;
	int rc;

	if (w->rc < 0)
		return w->rc;
	if (w->has_meta)
		return dlt_error(DLT_EINPUT, "%s: more than one metadata record", w->name);
	if (!json)
		return dlt_error(DLT_EINPUT, "%s: no metadata", w->name);
	len = strlen(json);
	if ((rc = dlt_json_parse(json, len, &v)) < 0)
		return dlt_error_prefix(rc, "%s: metadata", w->name);
	rc = v.type == DLT_JOBJ;
	dlt_jval_free(&v);
	if (!rc)
		return dlt_error(DLT_EINPUT, "%s: metadata is not a json object", w->name);
	w->has_meta = 1;
	return write_record(w, AR_TAG_META, "", DLT_U8, 1, &len, json, len, DLT_RAW, 0);
}

/* The index's fixed part, then the trailer, whose checksum also covers the
 * file header: with the record checksums, every byte is covered. */
static int write_end(dlt_archive_writer *w)
{
	unsigned char h[AR_HEADER], t[AR_TRAILER];
	unsigned char *ix = (unsigned char *)w->index.data;
	uint64_t hash;
	int rc;

	memcpy(ix, AR_TAG_INDEX, 4);
	ar_put64(ix + 8, w->nrec);
	file_header(h);
	if ((rc = ar_hash(&hash, h, sizeof(h), ix, w->index.len)) < 0)
		return rc;
	ar_put64(t, w->off);
	ar_put64(t + 8, w->index.len);
	ar_put64(t + 16, hash);
	memcpy(t + 24, AR_END, 8);
	if ((rc = emit(w, ix, w->index.len)) < 0)
		return rc;
	return emit(w, t, sizeof(t));
}

int dlt_archive_writer_close(dlt_archive_writer *w)
{
	int rc = w->rc;
	if (rc == 0)
		rc = write_end(w);
	if (rc == 0)
		rc = dlt_ofile_commit(&w->out);
	if (rc < 0) {
		dlt_archive_writer_abort(w);
		return rc;
	}
	writer_free(w);
	return 0;
}

void dlt_archive_writer_abort(dlt_archive_writer *w)
{
	if (!w)
		return;
	dlt_ofile_abort(&w->out);
	writer_free(w);
}
