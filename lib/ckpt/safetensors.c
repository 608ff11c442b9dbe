/* safetensors: the reader checks every size and offset before use, as the
 * archive reader does; the writer streams, one tensor at a time. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive/archive.h"
#include "ckpt/safetensors.h"
#include "kernels/common/math.h"
#include "util/util.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian and is read in place"
#endif

/* Integers in the header are JSON numbers, which the parser holds as
 * doubles: above 2^53 they are no longer exact, and no real file needs
 * them (a data area that large does not exist). */
#define MAX_INT 9007199254740992.0

static const struct {
	const char *name;
	size_t size;
	int dlt;
} dtypes[] = {
	[DLT_ST_BOOL] = { "BOOL", 1, 0 },
	[DLT_ST_U8] = { "U8", 1, DLT_U8 },
	[DLT_ST_I8] = { "I8", 1, 0 },
	[DLT_ST_F8_E5M2] = { "F8_E5M2", 1, 0 },
	[DLT_ST_F8_E4M3] = { "F8_E4M3", 1, 0 },
	[DLT_ST_F8_E8M0] = { "F8_E8M0", 1, 0 },
	[DLT_ST_I16] = { "I16", 2, 0 },
	[DLT_ST_U16] = { "U16", 2, 0 },
	[DLT_ST_F16] = { "F16", 2, DLT_F16 },
	[DLT_ST_BF16] = { "BF16", 2, DLT_BF16 },
	[DLT_ST_I32] = { "I32", 4, DLT_I32 },
	[DLT_ST_U32] = { "U32", 4, 0 },
	[DLT_ST_F32] = { "F32", 4, DLT_F32 },
	[DLT_ST_F64] = { "F64", 8, 0 },
	[DLT_ST_I64] = { "I64", 8, DLT_I64 },
	[DLT_ST_U64] = { "U64", 8, 0 },
	[DLT_ST_C64] = { "C64", 8, 0 },
};
#define NDTYPES ((int)(sizeof(dtypes) / sizeof(*dtypes)))

const char *dlt_st_dtype_name(int dtype)
{
	return dtype > 0 && dtype < NDTYPES ? dtypes[dtype].name : NULL;
}

size_t dlt_st_dtype_size(int dtype)
{
	return dtype > 0 && dtype < NDTYPES ? dtypes[dtype].size : 0;
}

int dlt_st_dtype_parse(const char *name)
{
	for (int i = 1; i < NDTYPES; i++)
		if (strcmp(dtypes[i].name, name) == 0)
			return i;
	return 0;
}

int dlt_st_dtype_to_dlt(int st_dtype)
{
	return st_dtype > 0 && st_dtype < NDTYPES ? dtypes[st_dtype].dlt : 0;
}

int dlt_st_dtype_from_dlt(int dlt_dtype)
{
	for (int i = 1; i < NDTYPES; i++)
		if (dlt_dtype && dtypes[i].dlt == dlt_dtype)
			return i;
	return 0;
}

/* A name from the file, quoted and made safe to print on one line (as
 * the archive reader does): control bytes become '?', a long name is cut. */
static const char *quote(char *buf, size_t size, const char *name)
{
	size_t n = snprintf(buf, size, "'"), i, len = strlen(name);
	for (i = 0; i < len && n + 6 < size; i++, n++)
		buf[n] = (unsigned char)name[i] < 0x20 || name[i] == 0x7f ? '?' : name[i];
	snprintf(buf + n, size - n, i < len ? "...'" : "'");
	return buf;
}

enum { LABEL_SIZE = 96 };

/* Whether n bytes are valid UTF-8 (no overlongs, no surrogates). */
static int utf8_ok(const unsigned char *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		unsigned c = s[i], len, cp, min;
		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			len = 2, cp = c & 0x1f, min = 0x80;
		else if (c >= 0xe0 && c <= 0xef)
			len = 3, cp = c & 0x0f, min = 0x800;
		else if (c >= 0xf0 && c <= 0xf4)
			len = 4, cp = c & 0x07, min = 0x10000;
		else
			return 0;
		if (n - i < len)
			return 0;
		for (unsigned k = 1; k < len; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return 0;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000))
			return 0;
		i += len;
	}
	return 1;
}

/* Reader */

struct dlt_safetensors {
	char *path;		/* for messages */
	const unsigned char *base;
	size_t size;
	void *map;		/* base when mapped */
	char *mem;		/* base when read or copied */
	const unsigned char *data;	/* the data area */
	uint64_t data_size;
	dlt_jval header;	/* names and metadata point into it */
	dlt_st_tensor *t;	/* by offset */
	size_t n;
	const dlt_st_tensor **byname;
	uint64_t *dims;		/* every tensor's, one after another */
	const char **meta;	/* key, value, key, value, ... */
	size_t n_meta;
};

static int bad(const dlt_safetensors *st, const char *where, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int bad(const dlt_safetensors *st, const char *where, const char *fmt, ...)
{
	char what[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (!where)
		return dlt_error(DLT_EINPUT, "%s: safetensors: %s", st->path, what);
	return dlt_error(DLT_EINPUT, "%s: safetensors: %s: %s", st->path, where, what);
}

/* A header integer: a JSON number that is a whole number in [0, 2^53). */
static int get_uint(const dlt_jval *v, uint64_t *out)
{
	if (v->type != DLT_JNUM || !(v->num >= 0) || v->num >= MAX_INT || v->num != floor(v->num))
		return -1;
	*out = (uint64_t)v->num;
	return 0;
}

/* "[2, 3]" for messages, cut when long. */
static const char *shape_str(char *buf, size_t size, const uint64_t *dims, int ndim)
{
	size_t n = snprintf(buf, size, "[");
	for (int i = 0; i < ndim && n + 24 < size; i++)
		n += snprintf(buf + n, size - n, i ? ", %llu" : "%llu", (unsigned long long)dims[i]);
	snprintf(buf + n, size - n, n + 24 >= size ? ", ...]" : "]");
	return buf;
}

static int parse_meta(dlt_safetensors *st, const dlt_jval *m)
{
	if (st->meta)
		return bad(st, NULL, "two __metadata__ entries");
	if (m->type != DLT_JOBJ)
		return bad(st, NULL, "__metadata__ is not an object");
	if (!(st->meta = dlt_calloc(2 * m->n + 1, sizeof(*st->meta))))
		return DLT_ENOMEM;
	for (size_t i = 0; i < m->n; i++) {
		if (m->items[i].type != DLT_JSTR) {
			char key[LABEL_SIZE];
			return bad(st, NULL, "__metadata__: the value of %s is not a string",
				   quote(key, sizeof(key), m->items[i].key));
		}
		st->meta[2 * i] = m->items[i].key;
		st->meta[2 * i + 1] = m->items[i].str;
	}
	st->n_meta = m->n;
	return 0;
}

/* One tensor entry: {"dtype": .., "shape": [..], "data_offsets": [b, e]}. */
static int parse_entry(dlt_safetensors *st, const dlt_jval *e, dlt_st_tensor *t, uint64_t *dims)
{
	char where[LABEL_SIZE + 8], sh[128];
	const dlt_jval *dt = NULL, *shape = NULL, *off = NULL;
	uint64_t count = 1, bytes, size;

	snprintf(where, sizeof(where), "tensor %s", quote(sh, sizeof(sh), e->key));
	t->name = e->key;
	if (e->type != DLT_JOBJ)
		return bad(st, where, "not an object");
	for (size_t i = 0; i < e->n; i++) {
		const char *k = e->items[i].key;
		const dlt_jval **slot = strcmp(k, "dtype") == 0 ? &dt :
			strcmp(k, "shape") == 0 ? &shape :
			strcmp(k, "data_offsets") == 0 ? &off : NULL;
		if (!slot)
			return bad(st, where, "unknown key %s", quote(sh, sizeof(sh), k));
		if (*slot)
			return bad(st, where, "two '%s' keys", k);
		*slot = &e->items[i];
	}
	if (!dt || !shape || !off)
		return bad(st, where, "no '%s'", !dt ? "dtype" : !shape ? "shape" : "data_offsets");
	if (dt->type != DLT_JSTR)
		return bad(st, where, "dtype is not a string");
	if (!(t->dtype = dlt_st_dtype_parse(dt->str)))
		return bad(st, where, "unknown dtype %s", quote(sh, sizeof(sh), dt->str));
	if (shape->type != DLT_JARR)
		return bad(st, where, "shape is not a list");
	if (shape->n > INT32_MAX)
		return bad(st, where, "shape has too many dimensions");
	t->ndim = (int)shape->n;
	t->dims = dims;
	for (size_t i = 0; i < shape->n; i++) {
		if (get_uint(&shape->items[i], &dims[i]) < 0)
			return bad(st, where, "shape: dimension %zu is not an integer in [0, 2^53)", i);
		if (count && dims[i] && count > UINT64_MAX / dims[i])
			count = UINT64_MAX;	/* overflowed; kept saturated to report it */
		else
			count *= dims[i];
	}
	size = dtypes[t->dtype].size;
	if (count == UINT64_MAX || count > UINT64_MAX / size)
		return bad(st, where, "shape %s is too large",
			   shape_str(sh, sizeof(sh), dims, t->ndim));
	t->count = count;
	bytes = count * size;
	if (off->type != DLT_JARR || off->n != 2 ||
	    get_uint(&off->items[0], &t->begin) < 0 || get_uint(&off->items[1], &t->end) < 0)
		return bad(st, where, "data_offsets is not a list of two integers in [0, 2^53)");
	if (t->begin > t->end || t->end > st->data_size)
		return bad(st, where, "data_offsets [%llu, %llu] outside the data area of %llu bytes",
			   (unsigned long long)t->begin, (unsigned long long)t->end,
			   (unsigned long long)st->data_size);
	if (t->end - t->begin != bytes)
		return bad(st, where, "data_offsets [%llu, %llu] hold %llu bytes, but %s %s is %llu",
			   (unsigned long long)t->begin, (unsigned long long)t->end,
			   (unsigned long long)(t->end - t->begin), dtypes[t->dtype].name,
			   shape_str(sh, sizeof(sh), dims, t->ndim), (unsigned long long)bytes);
	return 0;
}

static int by_offset(const void *x, const void *y)
{
	const dlt_st_tensor *a = x, *b = y;
	if (a->begin != b->begin)
		return a->begin < b->begin ? -1 : 1;
	if (a->end != b->end)
		return a->end < b->end ? -1 : 1;
	return strcmp(a->name, b->name);
}

static int by_name(const void *x, const void *y)
{
	const dlt_st_tensor *const *a = x, *const *b = y;
	return strcmp((*a)->name, (*b)->name);
}

/* Every byte of the data area belongs to exactly one tensor. */
static int check_cover(const dlt_safetensors *st)
{
	char w1[LABEL_SIZE], w2[LABEL_SIZE];
	uint64_t pos = 0;

	for (size_t i = 0; i < st->n; i++) {
		const dlt_st_tensor *t = &st->t[i];
		if (t->begin < pos)
			return bad(st, NULL, "tensor %s: data overlaps tensor %s",
				   quote(w1, sizeof(w1), t->name),
				   quote(w2, sizeof(w2), st->t[i - 1].name));
		if (t->begin > pos)
			return bad(st, NULL, "bytes %llu to %llu of the data area belong to no tensor",
				   (unsigned long long)pos, (unsigned long long)t->begin);
		pos = t->end;
	}
	if (pos != st->data_size)
		return bad(st, NULL, "bytes %llu to %llu of the data area belong to no tensor",
			   (unsigned long long)pos, (unsigned long long)st->data_size);
	return 0;
}

static int parse(dlt_safetensors *st)
{
	const char *h = (const char *)st->base + 8;
	uint64_t n, ndims = 0;
	size_t k = 0;
	int rc;

	if (st->size < 8)
		return bad(st, NULL, st->size ? "truncated (no header length)" : "empty file");
	memcpy(&n, st->base, 8);
	if (n > DLT_ST_MAX_HEADER)
		return bad(st, NULL, "header length %llu is over the limit of %llu bytes",
			   (unsigned long long)n, DLT_ST_MAX_HEADER);
	if (n > st->size - 8)
		return bad(st, NULL, "header length %llu, but the file has %zu bytes after it",
			   (unsigned long long)n, st->size - 8);
	if (n < 2 || h[0] != '{')
		return bad(st, NULL, "the header is not a JSON object");
	if (!utf8_ok((const unsigned char *)h, n))
		return bad(st, NULL, "the header is not UTF-8");
	st->data = st->base + 8 + n;
	st->data_size = st->size - 8 - n;
	if ((rc = dlt_json_parse(h, n, &st->header)) < 0)
		return dlt_error_prefix(rc, "%s: safetensors: header", st->path);
	if (st->header.type != DLT_JOBJ)
		return bad(st, NULL, "the header is not a JSON object");
	for (size_t i = 0; i < st->header.n; i++) {
		const dlt_jval *e = &st->header.items[i];
		const dlt_jval *shape = e->type == DLT_JOBJ ? dlt_jval_get(e, "shape") : NULL;
		if (shape && shape->type == DLT_JARR)
			ndims += shape->n;
	}
	if (!(st->t = dlt_calloc(st->header.n + 1, sizeof(*st->t))) ||
	    !(st->dims = dlt_calloc(ndims + 1, sizeof(*st->dims))))
		return DLT_ENOMEM;
	ndims = 0;
	for (size_t i = 0; i < st->header.n; i++) {
		const dlt_jval *e = &st->header.items[i];
		if (strcmp(e->key, "__metadata__") == 0) {
			DLT_TRY(parse_meta(st, e));
			continue;
		}
		DLT_TRY(parse_entry(st, e, &st->t[k], st->dims + ndims));
		ndims += st->t[k++].ndim;
	}
	st->n = k;
	qsort(st->t, k, sizeof(*st->t), by_offset);
	if (!(st->byname = dlt_calloc(k + 1, sizeof(*st->byname))))
		return DLT_ENOMEM;
	for (size_t i = 0; i < k; i++)
		st->byname[i] = &st->t[i];
	qsort(st->byname, k, sizeof(*st->byname), by_name);
	for (size_t i = 1; i < k; i++)
		if (strcmp(st->byname[i - 1]->name, st->byname[i]->name) == 0) {
			char w[LABEL_SIZE];
			return bad(st, NULL, "tensor %s: named twice",
				   quote(w, sizeof(w), st->byname[i]->name));
		}
	return check_cover(st);
fail:
	return rc;
}

static int open_file(dlt_safetensors *st, const char *path)
{
	return dlt_file_bytes(path, &st->map, &st->mem, &st->size);
}

static int finish_open(dlt_safetensors **out, dlt_safetensors *st)
{
	int rc;
	st->base = st->map ? st->map : (const unsigned char *)st->mem;
	if ((rc = parse(st)) < 0) {
		dlt_safetensors_close(st);
		return rc;
	}
	*out = st;
	return 0;
}

int dlt_safetensors_open(dlt_safetensors **out, const char *path)
{
	dlt_safetensors *st = dlt_calloc(1, sizeof(*st));
	int rc;

	*out = NULL;
	if (!st)
		return DLT_ENOMEM;
	if (!(st->path = dlt_strdup(strcmp(path, "-") ? path : "standard input")) ||
	    (rc = open_file(st, path)) < 0) {
		rc = st->path ? rc : DLT_ENOMEM;
		dlt_safetensors_close(st);
		return rc;
	}
	return finish_open(out, st);
}

int dlt_safetensors_open_mem(dlt_safetensors **out, const void *data, size_t n, const char *name)
{
	dlt_safetensors *st = dlt_calloc(1, sizeof(*st));

	*out = NULL;
	if (!st)
		return DLT_ENOMEM;
	if (!(st->path = dlt_strdup(name)) || !(st->mem = dlt_malloc(n + 1))) {
		dlt_safetensors_close(st);
		return DLT_ENOMEM;
	}
	if (n)
		memcpy(st->mem, data, n);
	st->size = n;
	return finish_open(out, st);
}

void dlt_safetensors_close(dlt_safetensors *st)
{
	if (!st)
		return;
	if (st->map)
		munmap(st->map, st->size);
	free(st->mem);
	dlt_jval_free(&st->header);
	free(st->t);
	free(st->byname);
	free(st->dims);
	free(st->meta);
	free(st->path);
	free(st);
}

const char *dlt_safetensors_path(const dlt_safetensors *st)
{
	return st->path;
}

size_t dlt_safetensors_count(const dlt_safetensors *st)
{
	return st->n;
}

const dlt_st_tensor *dlt_safetensors_tensor(const dlt_safetensors *st, size_t i)
{
	return i < st->n ? &st->t[i] : NULL;
}

const dlt_st_tensor *dlt_safetensors_find(const dlt_safetensors *st, const char *name)
{
	size_t lo = 0, hi = st->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(name, st->byname[mid]->name);
		if (c == 0)
			return st->byname[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

const void *dlt_safetensors_data(const dlt_safetensors *st, const dlt_st_tensor *t)
{
	return st->data + t->begin;
}

int dlt_safetensors_read_f32(const dlt_safetensors *st, const dlt_st_tensor *t,
			     float *out, size_t n)
{
	const unsigned char *p = st->data + t->begin;
	char where[LABEL_SIZE];

	quote(where, sizeof(where), t->name);
	if (t->dtype != DLT_ST_F32 && t->dtype != DLT_ST_F16 && t->dtype != DLT_ST_BF16)
		return dlt_error(DLT_EINPUT, "%s: tensor %s is %s, not a float type (F32, F16, BF16)",
				 st->path, where, dtypes[t->dtype].name);
	if (n != t->count)
		return dlt_error(DLT_EINPUT, "%s: tensor %s has %llu elements, not %zu", st->path, where,
				 (unsigned long long)t->count, n);
	if (t->dtype == DLT_ST_F32) {
		if (n)
			memcpy(out, p, n * 4);
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		uint16_t h;
		memcpy(&h, p + 2 * i, 2);
		out[i] = dlt_widen16(h, t->dtype == DLT_ST_F16 ? DLT_PREC_F16 : DLT_PREC_BF16);
	}
	return 0;
}

size_t dlt_safetensors_meta_count(const dlt_safetensors *st)
{
	return st->n_meta;
}

const char *dlt_safetensors_meta_key(const dlt_safetensors *st, size_t i)
{
	return i < st->n_meta ? st->meta[2 * i] : NULL;
}

const char *dlt_safetensors_meta_value(const dlt_safetensors *st, size_t i)
{
	return i < st->n_meta ? st->meta[2 * i + 1] : NULL;
}

const char *dlt_safetensors_meta_get(const dlt_safetensors *st, const char *key)
{
	for (size_t i = 0; i < st->n_meta; i++)
		if (strcmp(st->meta[2 * i], key) == 0)
			return st->meta[2 * i + 1];
	return NULL;
}

/* Writer */

struct dlt_safetensors_writer {
	dlt_ofile f;
	const char *name;	/* for messages: the path or "standard output" */
	uint64_t *sizes;	/* bytes of each tensor */
	size_t n, next;
};

static int wbad(const char *path, const char *where, const char *what)
{
	char w[LABEL_SIZE];
	if (!where)
		return dlt_error(DLT_EINPUT, "%s: safetensors: %s", path, what);
	return dlt_error(DLT_EINPUT, "%s: safetensors: tensor %s: %s", path,
			 quote(w, sizeof(w), where), what);
}

static int cmp_str(const void *x, const void *y)
{
	return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* What the reader would refuse, the writer refuses to write. */
static int check_entries(const char *path, const dlt_st_entry *t, size_t n, uint64_t *sizes,
			 const char *const *meta, size_t n_meta)
{
	const char **names = dlt_calloc(n + 1, sizeof(*names));
	int rc = 0;

	if (!names)
		return DLT_ENOMEM;
	for (size_t i = 0; i < n && rc == 0; i++) {
		uint64_t count = 1, size = dlt_st_dtype_size(t[i].dtype);
		names[i] = t[i].name;
		if (!utf8_ok((const unsigned char *)t[i].name, strlen(t[i].name)))
			rc = wbad(path, t[i].name, "the name is not UTF-8");
		else if (strcmp(t[i].name, "__metadata__") == 0)
			rc = wbad(path, t[i].name, "a reserved name");
		else if (!size)
			rc = wbad(path, t[i].name, "unknown dtype");
		else if (t[i].ndim < 0)
			rc = wbad(path, t[i].name, "negative rank");
		for (int k = 0; k < t[i].ndim && rc == 0; k++) {
			if (t[i].dims[k] >= (uint64_t)MAX_INT)
				rc = wbad(path, t[i].name, "a dimension of 2^53 or more");
			else if (count && t[i].dims[k] > UINT64_MAX / count)
				rc = wbad(path, t[i].name, "shape too large");
			count *= t[i].dims[k];
		}
		if (rc == 0 && count > UINT64_MAX / size)
			rc = wbad(path, t[i].name, "shape too large");
		sizes[i] = count * size;
	}
	if (rc == 0) {
		qsort(names, n, sizeof(*names), cmp_str);
		for (size_t i = 1; i < n && rc == 0; i++)
			if (strcmp(names[i - 1], names[i]) == 0)
				rc = wbad(path, names[i], "named twice");
	}
	for (size_t i = 0; i < 2 * n_meta && rc == 0; i++)
		if (!utf8_ok((const unsigned char *)meta[i], strlen(meta[i])))
			rc = wbad(path, NULL, "__metadata__ that is not UTF-8");
	free(names);
	return rc;
}

/* The header: __metadata__ first, then the tensors in the order of their
 * data, padded with spaces to a multiple of 8 bytes. */
static int build_header(dlt_json *j, const dlt_st_entry *t, size_t n, const uint64_t *sizes,
			const char *const *meta, size_t n_meta)
{
	uint64_t off = 0;

	dlt_json_begin(j);
	if (n_meta) {
		dlt_json_object_begin(j, "__metadata__");
		for (size_t i = 0; i < n_meta; i++)
			dlt_json_str(j, meta[2 * i], meta[2 * i + 1]);
		dlt_json_end(j);
	}
	for (size_t i = 0; i < n; i++) {
		if (sizes[i] > UINT64_MAX - off || off + sizes[i] >= (uint64_t)MAX_INT)
			return dlt_error(DLT_EINPUT, "safetensors: more than 2^53 bytes of data");
		dlt_json_object_begin(j, t[i].name);
		dlt_json_str(j, "dtype", dlt_st_dtype_name(t[i].dtype));
		dlt_json_array_begin(j, "shape");
		for (int k = 0; k < t[i].ndim; k++)
			dlt_json_int(j, NULL, (long long)t[i].dims[k]);
		dlt_json_array_end(j);
		dlt_json_array_begin(j, "data_offsets");
		dlt_json_int(j, NULL, (long long)off);
		dlt_json_int(j, NULL, (long long)(off + sizes[i]));
		dlt_json_array_end(j);
		dlt_json_end(j);
		off += sizes[i];
	}
	dlt_json_end(j);
	while (j->buf.len % 8 && !j->failed)
		if (dlt_buf_append(&j->buf, " ", 1) < 0)
			j->failed = 1;
	return dlt_json_ok(j);
}

int dlt_safetensors_create(dlt_safetensors_writer **out, const char *path,
			   const dlt_st_entry *t, size_t n,
			   const char *const *meta, size_t n_meta)
{
	dlt_safetensors_writer *w = dlt_calloc(1, sizeof(*w));
	dlt_json j = { 0 };
	uint64_t len;
	int rc;

	*out = NULL;
	if (!w)
		return DLT_ENOMEM;
	w->name = strcmp(path, "-") ? path : "standard output";
	w->n = n;
	if (!(w->sizes = dlt_calloc(n + 1, sizeof(*w->sizes)))) {
		free(w);
		return DLT_ENOMEM;
	}
	DLT_TRY(check_entries(w->name, t, n, w->sizes, meta, n_meta));
	DLT_TRY(build_header(&j, t, n, w->sizes, meta, n_meta));
	len = j.buf.len;
	if (len > DLT_ST_MAX_HEADER) {
		rc = dlt_error(DLT_EINPUT, "%s: safetensors: a header of %llu bytes, over the "
			       "limit of %llu", w->name, (unsigned long long)len, DLT_ST_MAX_HEADER);
		goto fail;
	}
	DLT_TRY(dlt_ofile_open(&w->f, path));
	if (fwrite(&len, 8, 1, w->f.fp) != 1 || fwrite(j.buf.data, 1, len, w->f.fp) != len) {
		rc = dlt_error_errno(DLT_EIO, "%s", w->name);
		goto fail;
	}
	dlt_json_free(&j);
	*out = w;
	return 0;
fail:
	dlt_json_free(&j);
	dlt_safetensors_writer_abort(w);
	return rc;
}

int dlt_safetensors_write_data(dlt_safetensors_writer *w, const void *data, size_t n)
{
	if (w->next >= w->n)
		return dlt_error(DLT_EFAIL, "%s: safetensors: more tensors than the header names",
				 w->name);
	if (n != w->sizes[w->next])
		return dlt_error(DLT_EFAIL, "%s: safetensors: tensor %zu has %zu bytes, not %llu",
				 w->name, w->next, n, (unsigned long long)w->sizes[w->next]);
	if (n && fwrite(data, 1, n, w->f.fp) != n)
		return dlt_error_errno(DLT_EIO, "%s", w->name);
	w->next++;
	return 0;
}

int dlt_safetensors_writer_close(dlt_safetensors_writer *w)
{
	int rc;
	if (w->next != w->n) {
		rc = dlt_error(DLT_EFAIL, "%s: safetensors: %zu of %zu tensors written", w->name,
			       w->next, w->n);
		dlt_safetensors_writer_abort(w);
		return rc;
	}
	if (ferror(w->f.fp)) {
		rc = dlt_error_errno(DLT_EIO, "%s", w->name);
		dlt_safetensors_writer_abort(w);
		return rc;
	}
	rc = dlt_ofile_commit(&w->f);
	free(w->sizes);
	free(w);
	return rc;
}

void dlt_safetensors_writer_abort(dlt_safetensors_writer *w)
{
	if (!w)
		return;
	if (w->f.fp)
		dlt_ofile_abort(&w->f);
	free(w->sizes);
	free(w);
}
