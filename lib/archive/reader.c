/* reader: maps an archive (or holds a stream's bytes) and trusts nothing in
 * it: every size, count and offset is checked against the file length and
 * for overflow before it is used, so damaged or hostile bytes get a message,
 * never a crash, a hang or a huge allocation. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "archive/archive.h"
#include "archive/format.h"
#include "util/util.h"

struct rec {
	dlt_tensor_info info;	/* first: a dlt_tensor_info * leads back here */
	int format;		/* the codec byte: AR_CODEC_* */
	uint64_t raw_hash, rec_hash;
	size_t hsize;		/* header bytes, the checksum field included */
	size_t name_off;	/* in dlt_archive.names */
};

struct dlt_archive {
	char *path;		/* for messages */
	const unsigned char *base;
	size_t size;
	void *map;		/* base when mapped, else NULL */
	char *mem;		/* base when read or copied, else NULL */
	struct rec *recs;	/* tensors in file order */
	size_t n;
	const dlt_tensor_info **byname;	/* sorted by name, for find */
	dlt_buf names;		/* NUL-terminated, one after another */
	char *meta;
	ZSTD_DCtx *dctx;	/* one kept for the next read, taken atomically */
};

/* A name from the file made safe to print: control bytes become '?' and a
 * long name is cut, so that a hostile name cannot drive the terminal. */
static const char *label(char *buf, size_t size, const char *what,
			 const unsigned char *name, size_t len)
{
	size_t n = snprintf(buf, size, "%s '", what), i;
	for (i = 0; i < len && n + 6 < size; i++, n++)
		buf[n] = name[i] < 0x20 || name[i] == 0x7f ? '?' : name[i];
	snprintf(buf + n, size - n, i < len ? "...'" : "'");
	return buf;
}

#define LABEL_SIZE 120

static const char *rec_label(char *buf, const struct rec *r)
{
	if (!*r->info.name)
		return strcpy(buf, "metadata");
	return label(buf, LABEL_SIZE, "tensor", (const unsigned char *)r->info.name,
		     strlen(r->info.name));
}

static int is_zero(const unsigned char *p, size_t n)
{
	while (n--)
		if (*p++)
			return 0;
	return 1;
}

/* "path: what in where": the form of every message about a damaged file. */
static int bad(const dlt_archive *a, const char *where, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int bad(const dlt_archive *a, const char *where, const char *fmt, ...)
{
	char what[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (!where)
		return dlt_error(DLT_EINPUT, "%s: %s", a->path, what);
	return dlt_error(DLT_EINPUT, "%s: %s in %s", a->path, what, where);
}

static int check_header(const dlt_archive *a)
{
	const unsigned char *p = a->base;
	if (a->size == 0)
		return bad(a, NULL, "not a dlt archive (empty file)");
	if (memcmp(p, AR_MAGIC, a->size < 8 ? a->size : 8) != 0)
		return bad(a, NULL, "not a dlt archive (bad magic)");
	if (a->size < AR_HEADER)
		return bad(a, NULL, "truncated (header missing)");
	if (ar_get32(p + 8) != AR_VERSION)
		return bad(a, NULL, "unsupported version %u", ar_get32(p + 8));
	if (ar_get32(p + 12) != 0)
		return bad(a, NULL, "unsupported flags 0x%x", ar_get32(p + 12));
	return 0;
}

/* The trailer and the index; *count: records listed. */
static int check_index(const dlt_archive *a, uint64_t *index_off, uint64_t *count)
{
	const unsigned char *t, *ix;
	uint64_t off, size;

	if (a->size < AR_HEADER + AR_INDEX_FIXED + AR_TRAILER)
		return bad(a, NULL, "truncated (trailer missing)");
	t = a->base + a->size - AR_TRAILER;
	if (memcmp(t + 24, AR_END, 8) != 0)
		return bad(a, NULL, "truncated (trailer missing)");
	off = ar_get64(t);
	size = ar_get64(t + 8);
	if (off < AR_HEADER || off > a->size - AR_TRAILER ||
	    size != a->size - AR_TRAILER - off || size < AR_INDEX_FIXED)
		return bad(a, NULL, "bad trailer (index at %llu, %llu bytes)",
			   (unsigned long long)off, (unsigned long long)size);
	ix = a->base + off;
	if (ar_hash(a->base, AR_HEADER, ix, size) != ar_get64(t + 16))
		return bad(a, NULL, "checksum mismatch in index");
	*count = ar_get64(ix + 8);
	if (memcmp(ix, AR_TAG_INDEX, 4) != 0 || ar_get32(ix + 4) != 0 ||
	    *count != (size - AR_INDEX_FIXED) / 8 || (size - AR_INDEX_FIXED) % 8)
		return bad(a, NULL, "bad index");
	if (*count > DLT_MAX_TENSORS + 1ull)
		return bad(a, NULL, "too many records (%llu)", (unsigned long long)*count);
	*index_off = off;
	return 0;
}

/* The fixed fields of a record header, as read from the file. */
struct fields {
	const unsigned char *p;
	uint32_t hsize, namelen;
	int dtype, codec, ndim, meta;
	uint64_t stored, raw;
};

/* The parts of a record that locate it: tag, header size, name. */
static int check_frame(const dlt_archive *a, const char *where, struct fields *f,
		       uint64_t span)
{
	const unsigned char *p = f->p, *name;

	if (span < AR_REC_FIXED + 8)
		return bad(a, where, "truncated header");
	f->meta = memcmp(p, AR_TAG_META, 4) == 0;
	if (!f->meta && memcmp(p, AR_TAG_TENS, 4) != 0)
		return bad(a, where, "bad tag");
	f->hsize = ar_get32(p + 4);
	f->dtype = p[8];
	f->codec = p[9];
	f->ndim = p[10];
	f->namelen = ar_get32(p + 12);
	f->stored = ar_get64(p + 16);
	f->raw = ar_get64(p + 24);
	if (f->ndim > DLT_MAX_DIMS)
		return bad(a, where, "%d dimensions (at most %d)", f->ndim, DLT_MAX_DIMS);
	if (f->namelen > DLT_MAX_NAME)
		return bad(a, where, "name of %u bytes (at most %d)", f->namelen, DLT_MAX_NAME);
	if (f->hsize != ar_rec_header_size(f->ndim, f->namelen) || p[11] != 0)
		return bad(a, where, "bad header");
	if (f->hsize > span)
		return bad(a, where, "truncated header");
	name = p + AR_REC_FIXED + 8 * f->ndim;
	if (memchr(name, 0, f->namelen) || !is_zero(name + f->namelen, ar_pad(f->namelen)))
		return bad(a, where, "bad name");
	if (!f->meta && !f->namelen)
		return bad(a, where, "empty name");
	if (f->meta && (f->namelen || f->dtype != DLT_U8 || f->ndim != 1))
		return bad(a, where, "bad metadata header");
	return 0;
}

/* The sizes of a located record, against its shape and its span. */
static int check_sizes(const dlt_archive *a, const char *where, const struct fields *f,
		       const uint64_t *dims, uint64_t span, uint64_t *count)
{
	uint64_t bytes, room = span - f->hsize;

	if (!dlt_dtype_size(f->dtype))
		return bad(a, where, "unknown dtype %d", f->dtype);
	if (f->codec > AR_CODEC_PLANES)
		return bad(a, where, "unknown codec %d", f->codec);
	if (!ar_shape_size(f->dtype, f->ndim, dims, count, &bytes))
		return bad(a, where, "shape overflow");
	if (bytes != f->raw)
		return bad(a, where, "raw size %llu not that of the shape",
			   (unsigned long long)f->raw);
	if (f->stored > room || room - f->stored != ar_pad(f->stored))
		return bad(a, where, "stored size %llu not that of the record",
			   (unsigned long long)f->stored);
	if (f->codec == AR_CODEC_RAW ? f->stored != f->raw :
	    f->stored >= f->raw || f->raw / AR_ZSTD_MAX_RATIO > f->stored)
		return bad(a, where, "impossible stored size %llu for raw size %llu",
			   (unsigned long long)f->stored, (unsigned long long)f->raw);
	if (!is_zero(f->p + f->hsize + f->stored, ar_pad(f->stored)))
		return bad(a, where, "bad padding");
	return 0;
}

/* Record i of the index, which spans [off, end) of the file. */
static int parse_record(dlt_archive *a, size_t i, uint64_t off, uint64_t end,
			struct rec *r, int *meta)
{
	char where[LABEL_SIZE];
	struct fields f = { .p = a->base + off };
	const unsigned char *name;
	int rc;

	snprintf(where, sizeof(where), "record %zu (offset %llu)", i, (unsigned long long)off);
	if ((rc = check_frame(a, where, &f, end - off)) < 0)
		return rc;
	for (int d = 0; d < f.ndim; d++)
		r->info.dims[d] = ar_get64(f.p + AR_REC_FIXED + 8 * d);
	name = f.p + AR_REC_FIXED + 8 * f.ndim;
	if (f.meta)
		snprintf(where, sizeof(where), "metadata");
	else
		label(where, sizeof(where), "tensor", name, f.namelen);
	if ((rc = check_sizes(a, where, &f, r->info.dims, end - off, &r->info.count)) < 0)
		return rc;
	r->name_off = a->names.len;
	if ((rc = dlt_buf_append(&a->names, name, f.namelen)) < 0 ||
	    (rc = dlt_buf_append(&a->names, "", 1)) < 0)
		return rc;
	r->info.dtype = f.dtype;
	r->format = f.codec;
	r->info.codec = f.codec == AR_CODEC_PLANES ? DLT_SHUFFLE_ZSTD : f.codec;
	r->info.ndim = f.ndim;
	r->info.raw_size = f.raw;
	r->info.stored_size = f.stored;
	r->info.offset = off;
	/* a tensor's name goes in place when the names buffer stops moving */
	r->info.name = f.meta ? "" : NULL;
	r->raw_hash = ar_get64(f.p + 32);
	r->rec_hash = ar_get64(f.p + f.hsize - 8);
	r->hsize = f.hsize;
	*meta = f.meta;
	return 0;
}

/* A zstd context for one decode: the one a kept, or a new one.  Threads
 * that read at once each get their own. */
static ZSTD_DCtx *dctx_take(dlt_archive *a)
{
	ZSTD_DCtx *d = __atomic_exchange_n(&a->dctx, NULL, __ATOMIC_ACQ_REL);
	return d ? d : ZSTD_createDCtx();
}

static void dctx_give(dlt_archive *a, ZSTD_DCtx *d)
{
	ZSTD_freeDCtx(__atomic_exchange_n(&a->dctx, d, __ATOMIC_ACQ_REL));
}

/* zstd data that must decode to exactly n bytes. */
static int unzstd(const dlt_archive *a, const char *where, ZSTD_DCtx *d, void *dst, size_t n,
		  const void *src, size_t sn)
{
	size_t z = ZSTD_decompressDCtx(d, dst, n, src, sn);
	if (ZSTD_isError(z))
		return bad(a, where, "bad zstd data (%s)", ZSTD_getErrorName(z));
	if (z != n)
		return bad(a, where, "zstd data of %zu bytes, not %zu", z, n);
	return 0;
}

/* AR_CODEC_SHUFFLE_FRAME, the first layout: one frame of all planes.
 * *hash: the xxh64 of what it writes to out. */
static int decode_frame(const dlt_archive *a, const struct rec *r, const char *where,
			ZSTD_DCtx *d, const unsigned char *src, unsigned char *out, uint64_t *hash)
{
	size_t n = r->info.raw_size, count = r->info.count, esize = dlt_dtype_size(r->info.dtype);
	const unsigned char *planes[AR_MAX_ESIZE];
	unsigned char *buf = dlt_malloc(n);
	int rc;

	if (!buf)
		return DLT_ENOMEM;
	if ((rc = unzstd(a, where, d, buf, n, src, r->info.stored_size)) == 0) {
		for (size_t k = 0; k < esize; k++)
			planes[k] = buf + k * count;
		*hash = ar_unshuffle(out, planes, count, esize);
	}
	free(buf);
	return rc;
}

/* AR_CODEC_PLANES: the plane table, checked against the stored size, then
 * each plane where it lies (raw) or decoded (a frame).  *hash: the xxh64
 * of what it writes to out. */
static int decode_planes(const dlt_archive *a, const struct rec *r, const char *where,
			 ZSTD_DCtx *d, const unsigned char *src, unsigned char *out, uint64_t *hash)
{
	size_t count = r->info.count, esize = dlt_dtype_size(r->info.dtype);
	size_t table = AR_PLANE_ENTRY * esize, left = r->info.stored_size, frames = 0;
	const unsigned char *planes[AR_MAX_ESIZE], *p = src + table;
	uint64_t size[AR_MAX_ESIZE];
	char pwhere[LABEL_SIZE + 32];
	unsigned char *buf, *at;
	int rc = 0;

	if (left < table)
		return bad(a, where, "stored size %zu less than its plane table", left);
	left -= table;
	for (size_t k = 0; k < esize; k++) {
		size[k] = ar_get64(src + AR_PLANE_ENTRY * k);
		if (size[k] > count || size[k] > left)
			return bad(a, where, "plane %zu of %llu bytes (%zu elements, %zu bytes left)",
				   k, (unsigned long long)size[k], count, left);
		planes[k] = p;
		p += size[k];
		left -= size[k];
		frames += size[k] < count;
	}
	if (left)
		return bad(a, where, "%zu stored bytes after the last plane", left);
	/* frames decode into buf, or out for a byte's one plane (a frame, as
	 * the record is smaller than raw); raw planes are read where they lie */
	if (!(buf = esize == 1 ? out : dlt_malloc(frames * count)))
		return DLT_ENOMEM;
	at = buf;
	for (size_t k = 0; k < esize && rc == 0; k++) {
		if (size[k] == count)
			continue;
		snprintf(pwhere, sizeof(pwhere), "plane %zu of %s", k, where);
		rc = unzstd(a, pwhere, d, at, count, planes[k], size[k]);
		planes[k] = at;
		at += count;
	}
	if (rc == 0)
		*hash = esize == 1 ? ar_xxh64(out, count) : ar_unshuffle(out, planes, count, esize);
	if (buf != out)
		free(buf);
	return rc;
}

/* A large raw record is hashed twice, for its record checksum and for
 * its raw one, each pass bound by the integer multiplier (xxh64: 8
 * multiplies a 32-byte stripe), 5 ms each for a 47 MB training set on Zen 3:
 * most of dlt-train's start-up.  From this size on the raw hash runs on a
 * thread of its own beside the record's, and the record's pages are
 * mapped in one call rather than a fault every 64 KiB. */
#define RAW_HASH_THREAD (4u << 20)

struct raw_hash_job {
	const void *p;
	size_t n;
	uint64_t hash;
};

static void *raw_hash_thread(void *arg)
{
	struct raw_hash_job *j = arg;
	j->hash = ar_xxh64(j->p, j->n);
	return NULL;
}

static void populate(const void *p, size_t n)
{
#ifdef MADV_POPULATE_READ
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)p & ~(page - 1);
	/* an old kernel says EINVAL: the faults then map it as before */
	madvise((void *)a, (uintptr_t)p + n - a, MADV_POPULATE_READ);
#else
	(void)p;
	(void)n;
#endif
}

/* Checks both checksums of a record and decodes it into out (raw_size
 * bytes); out may be NULL for a raw record, to check it only.  Of a's
 * state it uses only its bytes and the kept zstd context, so that threads
 * may read at once. */
static int decode(dlt_archive *a, const struct rec *r, void *out)
{
	const unsigned char *h = a->base + r->info.offset, *src = h + r->hsize;
	size_t n = r->info.raw_size;
	char where[LABEL_SIZE];
	uint64_t hash = 0;
	ZSTD_DCtx *d;
	int rc = 0;

	struct raw_hash_job job = { src, n, 0 };
	pthread_t th;
	int threaded = 0;

	rec_label(where, r);
	if (r->format == AR_CODEC_RAW && n >= RAW_HASH_THREAD && n <= r->info.stored_size) {
		if (a->map)
			populate(h, r->hsize + n);
		threaded = pthread_create(&th, NULL, raw_hash_thread, &job) == 0;
	}
	if (ar_hash(h, r->hsize - 8, src, r->info.stored_size) != r->rec_hash) {
		if (threaded)
			pthread_join(th, NULL);
		return bad(a, where, "checksum mismatch");
	}
	if (r->format == AR_CODEC_RAW) {
		if (out && n)
			memcpy(out, src, n);
		if (threaded) {
			pthread_join(th, NULL);
			hash = job.hash;
		} else {
			hash = ar_xxh64(src, n);
		}
	} else {
		if (!(d = dctx_take(a)))
			return dlt_error(DLT_ENOMEM, "out of memory (zstd context)");
		if (r->format == AR_CODEC_ZSTD) {
			if ((rc = unzstd(a, where, d, out, n, src, r->info.stored_size)) == 0)
				hash = ar_xxh64(out, n);
		} else if (r->format == AR_CODEC_SHUFFLE_FRAME) {
			rc = decode_frame(a, r, where, d, src, out, &hash);
		} else {
			rc = decode_planes(a, r, where, d, src, out, &hash);
		}
		dctx_give(a, d);
		if (rc < 0)
			return rc;
	}
	if (hash != r->raw_hash)
		return bad(a, where, "checksum mismatch (decoded data)");
	return 0;
}

/* The metadata must be text: it is handed out as a C string. */
static int load_meta(dlt_archive *a, const struct rec *r)
{
	size_t n = r->info.raw_size;
	dlt_jval v;
	int rc;

	if (a->meta)
		return bad(a, NULL, "more than one metadata record");
	if (!(a->meta = dlt_malloc(n + 1)))
		return DLT_ENOMEM;
	if ((rc = decode(a, r, a->meta)) < 0)
		return rc;
	a->meta[n] = 0;
	if (memchr(a->meta, 0, n))
		return bad(a, NULL, "nul byte in metadata");
	if ((rc = dlt_json_parse(a->meta, n, &v)) < 0)
		return dlt_error_prefix(rc, "%s: metadata", a->path);
	rc = v.type == DLT_JOBJ;
	dlt_jval_free(&v);
	return rc ? 0 : bad(a, NULL, "metadata is not a json object");
}

static int by_name(const void *x, const void *y)
{
	const dlt_tensor_info *const *p = x, *const *q = y;
	return strcmp((*p)->name, (*q)->name);
}

/* Names go in place once the names buffer has stopped moving. */
static int index_names(dlt_archive *a)
{
	char where[LABEL_SIZE];

	if (!(a->byname = dlt_calloc(a->n ? a->n : 1, sizeof(*a->byname))))
		return DLT_ENOMEM;
	for (size_t i = 0; i < a->n; i++) {
		a->recs[i].info.name = a->names.data + a->recs[i].name_off;
		a->byname[i] = &a->recs[i].info;
	}
	qsort(a->byname, a->n, sizeof(*a->byname), by_name);
	for (size_t i = 1; i < a->n; i++)
		if (strcmp(a->byname[i - 1]->name, a->byname[i]->name) == 0)
			return bad(a, NULL, "duplicate %s",
				   rec_label(where, (const struct rec *)a->byname[i]));
	return 0;
}

/* Every record, which must tile [AR_HEADER, index_off) in index order:
 * no gap, no overlap, no byte that nothing covers. */
static int parse_records(dlt_archive *a, uint64_t index_off, uint64_t count)
{
	const unsigned char *ix = a->base + index_off + AR_INDEX_FIXED;
	uint64_t off = AR_HEADER, end;
	struct rec r;
	int rc, meta;

	/* each record takes at least AR_REC_FIXED + 8 bytes: a count the
	 * file cannot hold is refused before anything is allocated for it */
	if (count > (index_off - AR_HEADER) / (AR_REC_FIXED + 8))
		return bad(a, NULL, "bad index (%llu records)", (unsigned long long)count);
	if (!(a->recs = dlt_calloc(count ? count : 1, sizeof(*a->recs))))
		return DLT_ENOMEM;
	for (uint64_t i = 0; i < count; i++, off = end) {
		end = i + 1 < count ? ar_get64(ix + 8 * (i + 1)) : index_off;
		if (ar_get64(ix + 8 * i) != off || end <= off || end > index_off)
			return bad(a, NULL, "bad index (record %llu at %llu)",
				   (unsigned long long)i, (unsigned long long)ar_get64(ix + 8 * i));
		memset(&r, 0, sizeof(r));
		if ((rc = parse_record(a, i, off, end, &r, &meta)) < 0)
			return rc;
		if (meta)
			rc = load_meta(a, &r);
		else
			a->recs[a->n++] = r;
		if (rc < 0)
			return rc;
	}
	if (off != index_off)
		return bad(a, NULL, "bad index (bytes in no record)");
	return index_names(a);
}

static int parse(dlt_archive *a)
{
	uint64_t index_off = 0, count = 0;
	int rc;
	if ((rc = check_header(a)) < 0 || (rc = check_index(a, &index_off, &count)) < 0)
		return rc;
	return parse_records(a, index_off, count);
}

static int open_file(dlt_archive *a, const char *path)
{
	int rc = dlt_file_bytes(path, &a->map, &a->mem, &a->size);
	if (rc == 0 && a->map)
		a->base = a->map;
	return rc;
}

static int archive_new(dlt_archive **ap, const char *path)
{
	dlt_archive *a = dlt_calloc(1, sizeof(*a));
	*ap = a;
	if (!a)
		return DLT_ENOMEM;
	if (!(a->path = dlt_strdup(path))) {
		free(a);
		*ap = NULL;
		return DLT_ENOMEM;
	}
	return 0;
}

static int finish_open(dlt_archive **ap, dlt_archive *a)
{
	int rc;
	if (a->mem)
		a->base = (const unsigned char *)a->mem;
	if ((rc = parse(a)) < 0) {
		dlt_archive_close(a);
		return rc;
	}
	*ap = a;
	return 0;
}

int dlt_archive_open(dlt_archive **ap, const char *path)
{
	dlt_archive *a;
	int rc;

	*ap = NULL;
	if ((rc = archive_new(&a, strcmp(path, "-") == 0 ? "standard input" : path)) < 0)
		return rc;
	if ((rc = open_file(a, path)) < 0) {
		dlt_archive_close(a);
		return rc;
	}
	return finish_open(ap, a);
}

int dlt_archive_open_mem(dlt_archive **ap, const void *data, size_t n, const char *name)
{
	dlt_archive *a;
	int rc;

	*ap = NULL;
	if ((rc = archive_new(&a, name)) < 0)
		return rc;
	if (!(a->mem = dlt_malloc(n))) {
		dlt_archive_close(a);
		return DLT_ENOMEM;
	}
	if (n)
		memcpy(a->mem, data, n);
	a->size = n;
	return finish_open(ap, a);
}

void dlt_archive_close(dlt_archive *a)
{
	if (!a)
		return;
	if (a->map)
		munmap(a->map, a->size);
	free(a->mem);
	free(a->recs);
	free(a->byname);
	dlt_buf_free(&a->names);
	free(a->meta);
	free(a->path);
	ZSTD_freeDCtx(a->dctx);
	free(a);
}

const char *dlt_archive_path(const dlt_archive *a)
{
	return a->path;
}

uint64_t dlt_archive_file_size(const dlt_archive *a)
{
	return a->size;
}

size_t dlt_archive_count(const dlt_archive *a)
{
	return a->n;
}

const dlt_tensor_info *dlt_archive_tensor(const dlt_archive *a, size_t i)
{
	return i < a->n ? &a->recs[i].info : NULL;
}

const dlt_tensor_info *dlt_archive_find(const dlt_archive *a, const char *name)
{
	dlt_tensor_info key = { .name = name };
	const dlt_tensor_info *k = &key, **hit;
	hit = bsearch(&k, a->byname, a->n, sizeof(*a->byname), by_name);
	return hit ? *hit : NULL;
}

const char *dlt_archive_meta(const dlt_archive *a)
{
	return a->meta;
}

/* The record behind t, or NULL when t is not one of a's. */
static const struct rec *rec_of(const dlt_archive *a, const dlt_tensor_info *t)
{
	uintptr_t base = (uintptr_t)a->recs, p = (uintptr_t)t;
	size_t i = (p - base) / sizeof(*a->recs);
	return p >= base && i < a->n && &a->recs[i].info == t ? &a->recs[i] : NULL;
}

int dlt_archive_read(dlt_archive *a, const dlt_tensor_info *t, void *out, size_t out_size)
{
	const struct rec *r = rec_of(a, t);
	char where[LABEL_SIZE];

	if (!r)
		return dlt_error(DLT_EINPUT, "%s: not a tensor of this archive", a->path);
	if (out_size != t->raw_size || (out_size && !out))
		return dlt_error(DLT_EINPUT, "%s: %s has %llu bytes, not %zu", a->path,
				 rec_label(where, r), (unsigned long long)t->raw_size, out_size);
	return decode(a, r, out);
}

int dlt_archive_view(dlt_archive *a, const dlt_tensor_info *t, const void **data)
{
	const struct rec *r = rec_of(a, t);
	int rc;

	*data = NULL;
	if (!r)
		return dlt_error(DLT_EINPUT, "%s: not a tensor of this archive", a->path);
	if (t->codec != DLT_RAW)
		return 0;
	if ((rc = decode(a, r, NULL)) < 0)
		return rc;
	*data = a->base + t->offset + r->hsize;
	return 0;
}

int dlt_archive_read_alloc(dlt_archive *a, const char *name, int dtype, int ndim,
			   const dlt_tensor_info **info, void **out)
{
	const dlt_tensor_info *t = dlt_archive_find(a, name);
	char where[LABEL_SIZE];
	void *p;
	int rc;

	*out = NULL;
	if (!t)
		return dlt_error(DLT_EINPUT, "%s: no tensor '%s'", a->path, name);
	rec_label(where, (const struct rec *)t);
	if (t->dtype != dtype)
		return dlt_error(DLT_EINPUT, "%s: %s is %s, not %s", a->path, where,
				 dlt_dtype_name(t->dtype),
				 dlt_dtype_name(dtype) ? dlt_dtype_name(dtype) : "a known dtype");
	if (ndim >= 0 && t->ndim != ndim)
		return dlt_error(DLT_EINPUT, "%s: %s has rank %d, not %d", a->path, where,
				 t->ndim, ndim);
	if (!(p = dlt_malloc(t->raw_size)))
		return DLT_ENOMEM;
	if ((rc = decode(a, (const struct rec *)t, p)) < 0) {
		free(p);
		return rc;
	}
	if (info)
		*info = t;
	*out = p;
	return 0;
}

int dlt_archive_verify(dlt_archive *a)
{
	for (size_t i = 0; i < a->n; i++) {
		const struct rec *r = &a->recs[i];
		void *buf = NULL;
		int rc;
		if (r->info.codec != DLT_RAW && !(buf = dlt_malloc(r->info.raw_size)))
			return DLT_ENOMEM;
		rc = decode(a, r, buf);
		free(buf);
		if (rc < 0)
			return rc;
	}
	return 0;
}
