/* tools: info, diff, export, import, average and strip of checkpoints.
 * Every tensor is read, converted or written one at a time, so a model
 * larger than half the memory still goes through. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive/archive.h"
#include "ckpt/ckpt.h"
#include "ckpt/safetensors.h"
#include "config/config.h"
#include "kernels/common/math.h"
#include "util/util.h"

#define CODEC DLT_SHUFFLE_ZSTD
#define LEVEL 1

/* The keys of train/ckpt.h that only a run going on needs. */
static const char *const training_keys[] = {
	"step", "epoch", "batch", "epochs", "metrics", "best", "loss_scale", "time", NULL,
};

int dlt_ckpt_is_optim(const char *name)
{
	return strncmp(name, "optim.", 6) == 0;
}

/* A language model's BPE tokenizer, which a checkpoint keeps beside the
 * weights as its token archive did (prep/tokens.h): "merges", i32 [N, 2].
 * Not a weight: export writes it as it is, import takes it back, average
 * wants the same one in every checkpoint and keeps it. */
static int is_tokenizer(const char *name)
{
	return strcmp(name, "merges") == 0;
}

/* A tensor name for a message: control bytes become '?' and a long name
 * is cut, so that a hostile file cannot break the one-line message. */
enum { NAME_SIZE = 80 };
static const char *safe(char *buf, const char *name)
{
	size_t i, len = strlen(name);
	for (i = 0; i < len && i < NAME_SIZE - 4; i++)
		buf[i] = (unsigned char)name[i] < 0x20 || name[i] == 0x7f ? '?' : name[i];
	strcpy(buf + i, i < len ? "..." : "");
	return buf;
}

static int is_training_key(const char *key)
{
	for (const char *const *k = training_keys; *k; k++)
		if (strcmp(*k, key) == 0)
			return 1;
	return 0;
}

/* Metadata */

/* The archive's metadata object; an empty one when it has none. */
static int read_meta(const dlt_archive *a, dlt_jval *meta)
{
	const char *m = dlt_archive_meta(a);
	int rc;

	memset(meta, 0, sizeof(*meta));
	meta->type = DLT_JOBJ;
	if (!m)
		return 0;
	/* the reader checked that it parses and is an object */
	if ((rc = dlt_json_parse(m, strlen(m), meta)) < 0)
		return dlt_error_prefix(rc, "%s: metadata", dlt_archive_path(a));
	return 0;
}

static void put_jval(dlt_json *j, const char *key, const dlt_jval *v)
{
	switch (v->type) {
	case DLT_JNULL:
		dlt_json_raw(j, key, "null");
		break;
	case DLT_JBOOL:
		dlt_json_bool(j, key, v->num != 0);
		break;
	case DLT_JNUM:
		dlt_json_num(j, key, v->num);
		break;
	case DLT_JSTR:
		dlt_json_str(j, key, v->str);
		break;
	case DLT_JARR:
		dlt_json_array_begin(j, key);
		for (size_t i = 0; i < v->n; i++)
			put_jval(j, NULL, &v->items[i]);
		dlt_json_array_end(j);
		break;
	case DLT_JOBJ:
		dlt_json_object_begin(j, key);
		for (size_t i = 0; i < v->n; i++)
			put_jval(j, v->items[i].key, &v->items[i]);
		dlt_json_end(j);
		break;
	}
}

/* A value as JSON text, in a new string. */
static char *jval_text(const dlt_jval *v)
{
	dlt_json j;
	memset(&j, 0, sizeof(j));
	put_jval(&j, NULL, v);
	if (dlt_json_ok(&j) < 0 || dlt_buf_append(&j.buf, "", 0) < 0) {
		dlt_json_free(&j);
		dlt_error(DLT_ENOMEM, "out of memory (json)");
		return NULL;
	}
	return j.buf.data;
}

/* The metadata of the weights alone: kind "model" (where kind was, else
 * first), without the training keys. */
static int stripped_meta(const dlt_jval *meta, dlt_json *j)
{
	dlt_json_begin(j);
	if (!dlt_jval_get(meta, "kind"))
		dlt_json_str(j, "kind", "model");
	for (size_t i = 0; i < meta->n; i++) {
		const dlt_jval *v = &meta->items[i];
		if (strcmp(v->key, "kind") == 0)
			dlt_json_str(j, "kind", "model");
		else if (!is_training_key(v->key))
			put_jval(j, v->key, v);
	}
	dlt_json_end(j);
	return dlt_json_ok(j);
}

static const char *shape_text(char *buf, size_t size, int ndim, const uint64_t *dims)
{
	size_t n = snprintf(buf, size, "[");
	for (int i = 0; i < ndim && n < size; i++)
		n += snprintf(buf + n, size - n, i ? ", %llu" : "%llu", (unsigned long long)dims[i]);
	if (n < size)
		snprintf(buf + n, size - n, "]");
	return buf;
}

static int same_shape(const dlt_tensor_info *a, const dlt_tensor_info *b)
{
	if (a->ndim != b->ndim)
		return 0;
	for (int i = 0; i < a->ndim; i++)
		if (a->dims[i] != b->dims[i])
			return 0;
	return 1;
}

/* A tensor's raw bytes in a new buffer. */
static int read_tensor(dlt_archive *a, const dlt_tensor_info *t, void **out)
{
	void *p = dlt_malloc(t->raw_size);
	int rc;

	*out = NULL;
	if (!p)
		return DLT_ENOMEM;
	if ((rc = dlt_archive_read(a, t, p, t->raw_size)) < 0) {
		free(p);
		return rc;
	}
	*out = p;
	return 0;
}

/* A model file of the weights of src, each as it is, and the metadata
 * text meta. */
static int write_weights(const char *out, dlt_archive *src, const char *meta)
{
	dlt_archive_writer *w = NULL;
	void *buf = NULL;
	int rc;

	DLT_TRY(dlt_archive_create(&w, out));
	DLT_TRY(dlt_archive_write_meta(w, meta));
	for (size_t i = 0; i < dlt_archive_count(src); i++) {
		const dlt_tensor_info *t = dlt_archive_tensor(src, i);
		if (dlt_ckpt_is_optim(t->name))
			continue;
		DLT_TRY(read_tensor(src, t, &buf));
		DLT_TRY(dlt_archive_write_tensor(w, t->name, t->dtype, t->ndim, t->dims, buf,
						 CODEC, LEVEL));
		free(buf);
		buf = NULL;
	}
	rc = dlt_archive_writer_close(w);
	w = NULL;
fail:
	free(buf);
	if (w)
		dlt_archive_writer_abort(w);
	return rc;
}

/* info */

/* The last "train" record and the last "eval" record of each split. */
typedef struct last_metrics {
	const dlt_jval *rec[16];
	const char *name[16];
	int n;
} last_metrics;

static void find_last(const dlt_jval *metrics, last_metrics *lm)
{
	memset(lm, 0, sizeof(*lm));
	if (!metrics || metrics->type != DLT_JARR)
		return;
	for (size_t i = 0; i < metrics->n; i++) {
		const dlt_jval *r = &metrics->items[i], *ev = dlt_jval_get(r, "event");
		const char *name;
		int k;
		if (!ev || ev->type != DLT_JSTR)
			continue;
		if (strcmp(ev->str, "train") == 0) {
			name = "train";
		} else if (strcmp(ev->str, "eval") == 0) {
			const dlt_jval *sp = dlt_jval_get(r, "split");
			if (!sp || sp->type != DLT_JSTR)
				continue;
			name = sp->str;
		} else {
			continue;
		}
		for (k = 0; k < lm->n && strcmp(lm->name[k], name); k++)
			;
		if (k == lm->n) {
			if (lm->n == 16)
				continue;
			lm->name[lm->n++] = name;
		}
		lm->rec[k] = r;
	}
}

static int is_position_key(const char *key)
{
	return !strcmp(key, "event") || !strcmp(key, "split") || !strcmp(key, "epoch") ||
		!strcmp(key, "step") || !strcmp(key, "time") || !strcmp(key, "samples_per_s");
}

static void text_num(dlt_buf *out, double v)
{
	dlt_buf_printf(out, "%.6g", v);
}

static const dlt_jval *num_key(const dlt_jval *meta, const char *key)
{
	const dlt_jval *v = dlt_jval_get(meta, key);
	return v && v->type == DLT_JNUM ? v : NULL;
}

static void info_text_meta(dlt_buf *out, const dlt_jval *meta, const last_metrics *lm)
{
	static const char *const shown[] = { "kind", "format", "step", "epoch", "batch", "epochs",
					     "best", "time", "input", "config", "metrics", NULL };
	const dlt_jval *v, *ep = num_key(meta, "epoch"), *eps = num_key(meta, "epochs"),
		*ba = num_key(meta, "batch");

	if ((v = dlt_jval_get(meta, "kind")) && v->type == DLT_JSTR) {
		dlt_buf_printf(out, "kind        %s", v->str);
		if ((v = num_key(meta, "format")))
			dlt_buf_printf(out, " (format %.17g)", v->num);
		dlt_buf_printf(out, "\n");
	}
	if ((v = num_key(meta, "step")))
		dlt_buf_printf(out, "step        %.17g\n", v->num);
	/* epoch is the one to go on with, batch its batches done: at the
	 * end of an epoch that is the next epoch and 0 */
	if (ep && ba && ba->num == 0) {
		dlt_buf_printf(out, "epoch       %.17g", ep->num - 1);
		if (eps)
			dlt_buf_printf(out, " of %.17g", eps->num);
		dlt_buf_printf(out, " done\n");
	} else if (ep || eps) {
		dlt_buf_printf(out, "epoch       ");
		if (ep)
			dlt_buf_printf(out, "%.17g", ep->num);
		if (eps)
			dlt_buf_printf(out, ep ? " of %.17g" : "? of %.17g", eps->num);
		if (ba)
			dlt_buf_printf(out, ", %.17g batches of it done", ba->num);
		dlt_buf_printf(out, "\n");
	}
	if ((v = dlt_jval_get(meta, "best")) && v->type == DLT_JOBJ) {
		const dlt_jval *m = dlt_jval_get(v, "metric"), *val = num_key(v, "value"),
			*st = num_key(v, "step");
		dlt_buf_printf(out, "best        %s", m && m->type == DLT_JSTR ? m->str : "?");
		if (val) {
			dlt_buf_printf(out, " ");
			text_num(out, val->num);
		}
		if (st)
			dlt_buf_printf(out, " at step %.17g", st->num);
		dlt_buf_printf(out, "\n");
	}
	if ((v = num_key(meta, "time")))
		dlt_buf_printf(out, "time        %.1f s\n", v->num);
	if ((v = dlt_jval_get(meta, "input")) && v->type == DLT_JOBJ) {
		const dlt_jval *sh = dlt_jval_get(v, "shape"), *k = num_key(v, "num_classes");
		dlt_buf_printf(out, "input       ");
		if (sh && sh->type == DLT_JARR) {
			dlt_buf_printf(out, "[");
			for (size_t i = 0; i < sh->n; i++)
				dlt_buf_printf(out, i ? ", %.17g" : "%.17g", sh->items[i].num);
			dlt_buf_printf(out, "]");
		}
		if (k)
			dlt_buf_printf(out, ", %.17g classes", k->num);
		dlt_buf_printf(out, "\n");
	}
	if ((v = dlt_jval_get(meta, "config")) && v->type == DLT_JSTR) {
		size_t lines = 0;
		for (const char *s = v->str; *s; s++)
			lines += *s == '\n';
		dlt_buf_printf(out, "config      %zu lines of YAML\n", lines);
	}
	/* other keys as they are, cut to a line */
	for (size_t i = 0; i < meta->n; i++) {
		const char *key = meta->items[i].key;
		char *t;
		int k;
		for (k = 0; shown[k] && strcmp(shown[k], key); k++)
			;
		if (shown[k] || !(t = jval_text(&meta->items[i])))
			continue;
		dlt_buf_printf(out, "%-11s %.*s%s\n", key, 60, t, strlen(t) > 60 ? "..." : "");
		free(t);
	}
	for (int i = 0; i < lm->n; i++) {
		const dlt_jval *r = lm->rec[i], *s = num_key(r, "step"), *e = num_key(r, "epoch");
		int first = 1;
		dlt_buf_printf(out, "%-11s", lm->name[i]);
		if (s)
			dlt_buf_printf(out, " step %.17g", s->num);
		if (e)
			dlt_buf_printf(out, " (epoch %.17g)", e->num);
		dlt_buf_printf(out, ":");
		for (size_t k = 0; k < r->n; k++) {
			if (r->items[k].type != DLT_JNUM || is_position_key(r->items[k].key))
				continue;
			dlt_buf_printf(out, "%s %s ", first ? "" : ",", r->items[k].key);
			text_num(out, r->items[k].num);
			first = 0;
		}
		dlt_buf_printf(out, "\n");
	}
}

static void info_text_tensors(dlt_buf *out, const dlt_archive *a)
{
	size_t n = dlt_archive_count(a), wname = 6, wshape = 5;
	uint64_t raw = 0, stored = 0;
	char sh[256];

	for (size_t i = 0; i < n; i++) {
		const dlt_tensor_info *t = dlt_archive_tensor(a, i);
		size_t l = strlen(t->name);
		wname = l > wname ? l : wname;
		l = strlen(shape_text(sh, sizeof(sh), t->ndim, t->dims));
		wshape = l > wshape ? l : wshape;
	}
	dlt_buf_printf(out, "%-*s  dtype  %-*s  codec         %10s  %10s\n", (int)wname,
		       "tensor", (int)wshape, "shape", "raw", "stored");
	for (size_t i = 0; i < n; i++) {
		const dlt_tensor_info *t = dlt_archive_tensor(a, i);
		dlt_buf_printf(out, "%-*s  %-5s  %-*s  %-12s  %10llu  %10llu\n", (int)wname, t->name,
			       dlt_dtype_name(t->dtype), (int)wshape,
			       shape_text(sh, sizeof(sh), t->ndim, t->dims),
			       dlt_codec_name(t->codec), (unsigned long long)t->raw_size,
			       (unsigned long long)t->stored_size);
		raw += t->raw_size;
		stored += t->stored_size;
	}
	snprintf(sh, sizeof(sh), "%zu tensor%s", n, n == 1 ? "" : "s");
	dlt_buf_printf(out, "%-*s  %10llu  %10llu", (int)(wname + wshape + 23), sh,
		       (unsigned long long)raw, (unsigned long long)stored);
	if (stored)
		dlt_buf_printf(out, "  ratio %.2f", (double)raw / stored);
	dlt_buf_printf(out, "\n");
}

static void info_json(dlt_json *j, const dlt_archive *a, const dlt_jval *meta,
		      const last_metrics *lm)
{
	static const char *const ours[] = { "file", "size", "last", "tensors", "raw_size",
					    "stored_size", "ratio", "metrics", NULL };
	uint64_t raw = 0, stored = 0;

	dlt_json_begin(j);
	dlt_json_str(j, "file", dlt_archive_path(a));
	dlt_json_int(j, "size", (long long)dlt_archive_file_size(a));
	for (size_t i = 0; i < meta->n; i++) {
		int k;
		for (k = 0; ours[k] && strcmp(ours[k], meta->items[i].key); k++)
			;
		if (!ours[k])
			put_jval(j, meta->items[i].key, &meta->items[i]);
	}
	dlt_json_object_begin(j, "last");
	for (int i = 0; i < lm->n; i++)
		put_jval(j, lm->name[i], lm->rec[i]);
	dlt_json_end(j);
	dlt_json_array_begin(j, "tensors");
	for (size_t i = 0; i < dlt_archive_count(a); i++) {
		const dlt_tensor_info *t = dlt_archive_tensor(a, i);
		dlt_json_object_begin(j, NULL);
		dlt_json_str(j, "name", t->name);
		dlt_json_str(j, "dtype", dlt_dtype_name(t->dtype));
		dlt_json_array_begin(j, "shape");
		for (int k = 0; k < t->ndim; k++)
			dlt_json_int(j, NULL, (long long)t->dims[k]);
		dlt_json_array_end(j);
		dlt_json_str(j, "codec", dlt_codec_name(t->codec));
		dlt_json_int(j, "raw_size", (long long)t->raw_size);
		dlt_json_int(j, "stored_size", (long long)t->stored_size);
		dlt_json_end(j);
		raw += t->raw_size;
		stored += t->stored_size;
	}
	dlt_json_array_end(j);
	dlt_json_int(j, "raw_size", (long long)raw);
	dlt_json_int(j, "stored_size", (long long)stored);
	dlt_json_num(j, "ratio", stored ? (double)raw / stored : 1.0);
	dlt_json_end(j);
}

int dlt_ckpt_info(const char *path, int json, dlt_buf *out)
{
	dlt_archive *a = NULL;
	dlt_jval meta = { 0 };
	last_metrics lm;
	dlt_json j = { 0 };
	int rc;

	DLT_TRY(dlt_archive_open(&a, path));
	DLT_TRY(read_meta(a, &meta));
	find_last(dlt_jval_get(&meta, "metrics"), &lm);
	if (json) {
		info_json(&j, a, &meta, &lm);
		DLT_TRY(dlt_json_ok(&j));
		DLT_TRY(dlt_buf_append(out, j.buf.data, j.buf.len));
		DLT_TRY(dlt_buf_append(out, "\n", 1));
	} else {
		dlt_buf_printf(out, "file        %s, %llu bytes\n", dlt_archive_path(a),
			       (unsigned long long)dlt_archive_file_size(a));
		info_text_meta(out, &meta, &lm);
		dlt_buf_printf(out, "\n");
		info_text_tensors(out, a);
		/* dlt_buf_printf fails only for memory, and then it leaves the
		 * buffer short: a final append tells */
		DLT_TRY(dlt_buf_append(out, "", 0));
	}
fail:
	dlt_json_free(&j);
	dlt_jval_free(&meta);
	dlt_archive_close(a);
	return rc;
}

/* diff */

static double elem(const void *p, int dtype, size_t i)
{
	const unsigned char *b = p;
	switch (dtype) {
	case DLT_F32: { float v; memcpy(&v, b + 4 * i, 4); return v; }
	case DLT_F16: { uint16_t v; memcpy(&v, b + 2 * i, 2); return dlt_widen16(v, DLT_PREC_F16); }
	case DLT_BF16: { uint16_t v; memcpy(&v, b + 2 * i, 2); return dlt_widen16(v, DLT_PREC_BF16); }
	case DLT_I32: { int32_t v; memcpy(&v, b + 4 * i, 4); return v; }
	case DLT_I64: { int64_t v; memcpy(&v, b + 8 * i, 8); return (double)v; }
	default: return b[i];
	}
}

enum { D_EQUAL, D_DIFFERS, D_ONLY_A, D_ONLY_B, D_SHAPE, D_DTYPE };
static const char *const d_json[] = { "equal", "differs", "only_a", "only_b", "shape", "dtype" };

typedef struct diff_row {
	const char *name;
	int status;
	double max_abs, rel_l2;
	const dlt_tensor_info *ta, *tb;
} diff_row;

static int diff_tensor(dlt_archive *a, dlt_archive *b, diff_row *r)
{
	void *pa = NULL, *pb = NULL;
	double num = 0, den = 0;
	int rc;

	if (r->ta->dtype != r->tb->dtype) {
		r->status = D_DTYPE;
		return 0;
	}
	if (!same_shape(r->ta, r->tb)) {
		r->status = D_SHAPE;
		return 0;
	}
	DLT_TRY(read_tensor(a, r->ta, &pa));
	DLT_TRY(read_tensor(b, r->tb, &pb));
	r->status = memcmp(pa, pb, r->ta->raw_size) ? D_DIFFERS : D_EQUAL;
	for (uint64_t i = 0; r->status == D_DIFFERS && i < r->ta->count; i++) {
		double x = elem(pa, r->ta->dtype, i), y = elem(pb, r->ta->dtype, i), d = fabs(x - y);
		if (!(d <= r->max_abs))	/* NaN sticks */
			r->max_abs = d;
		num += (x - y) * (x - y);
		den += y * y;
	}
	if (r->status == D_DIFFERS)
		r->rel_l2 = den > 0 ? sqrt(num) / sqrt(den) : num == 0 ? 0 : INFINITY;
fail:
	free(pa);
	free(pb);
	return rc;
}

static void diff_text(dlt_buf *out, const diff_row *rows, size_t n, size_t differ)
{
	size_t w = 6;
	char s1[256], s2[256];

	for (size_t i = 0; i < n; i++)
		w = strlen(rows[i].name) > w ? strlen(rows[i].name) : w;
	dlt_buf_printf(out, "%-*s  %-9s %12s %12s\n", (int)w, "tensor", "status", "max_abs",
		       "rel_l2");
	for (size_t i = 0; i < n; i++) {
		const diff_row *r = &rows[i];
		dlt_buf_printf(out, "%-*s  ", (int)w, r->name);
		switch (r->status) {
		case D_EQUAL:
		case D_DIFFERS:
			dlt_buf_printf(out, "%-9s %12.6g %12.6g\n", r->status ? "differs" : "equal",
				       r->max_abs, r->rel_l2);
			break;
		case D_ONLY_A:
		case D_ONLY_B:
			dlt_buf_printf(out, "only in %c\n", r->status == D_ONLY_A ? 'A' : 'B');
			break;
		case D_SHAPE:
			dlt_buf_printf(out, "shape %s vs %s\n",
				       shape_text(s1, sizeof(s1), r->ta->ndim, r->ta->dims),
				       shape_text(s2, sizeof(s2), r->tb->ndim, r->tb->dims));
			break;
		case D_DTYPE:
			dlt_buf_printf(out, "dtype %s vs %s\n", dlt_dtype_name(r->ta->dtype),
				       dlt_dtype_name(r->tb->dtype));
			break;
		}
	}
	if (differ)
		dlt_buf_printf(out, "%zu of %zu tensors differ\n", differ, n);
	else
		dlt_buf_printf(out, "all %zu tensors equal\n", n);
}

static void json_shape(dlt_json *j, const char *key, const dlt_tensor_info *t)
{
	dlt_json_array_begin(j, key);
	for (int k = 0; k < t->ndim; k++)
		dlt_json_int(j, NULL, (long long)t->dims[k]);
	dlt_json_array_end(j);
}

static void diff_json(dlt_json *j, const char *a, const char *b, const diff_row *rows,
		      size_t n, size_t differ)
{
	dlt_json_begin(j);
	dlt_json_str(j, "a", a);
	dlt_json_str(j, "b", b);
	dlt_json_array_begin(j, "tensors");
	for (size_t i = 0; i < n; i++) {
		const diff_row *r = &rows[i];
		dlt_json_object_begin(j, NULL);
		dlt_json_str(j, "name", r->name);
		dlt_json_str(j, "status", d_json[r->status]);
		if (r->status <= D_DIFFERS) {
			dlt_json_num(j, "max_abs", r->max_abs);
			dlt_json_num(j, "rel_l2", r->rel_l2);
		}
		if (r->status == D_SHAPE) {
			json_shape(j, "shape_a", r->ta);
			json_shape(j, "shape_b", r->tb);
		}
		if (r->status == D_DTYPE) {
			dlt_json_str(j, "dtype_a", dlt_dtype_name(r->ta->dtype));
			dlt_json_str(j, "dtype_b", dlt_dtype_name(r->tb->dtype));
		}
		dlt_json_end(j);
	}
	dlt_json_array_end(j);
	dlt_json_int(j, "differ", (long long)differ);
	dlt_json_end(j);
}

int dlt_ckpt_diff(const char *pa, const char *pb, int json, dlt_buf *out, size_t *differ)
{
	dlt_archive *a = NULL, *b = NULL;
	diff_row *rows = NULL;
	size_t n = 0;
	dlt_json j = { 0 };
	int rc;

	*differ = 0;
	DLT_TRY(dlt_archive_open(&a, pa));
	DLT_TRY(dlt_archive_open(&b, pb));
	rc = DLT_ENOMEM;
	if (!(rows = dlt_calloc(dlt_archive_count(a) + dlt_archive_count(b) + 1, sizeof(*rows))))
		goto fail;
	for (size_t i = 0; i < dlt_archive_count(a); i++) {
		diff_row *r = &rows[n++];
		r->ta = dlt_archive_tensor(a, i);
		r->tb = dlt_archive_find(b, r->ta->name);
		r->name = r->ta->name;
		if (!r->tb)
			r->status = D_ONLY_A;
		else
			DLT_TRY(diff_tensor(a, b, r));
	}
	for (size_t i = 0; i < dlt_archive_count(b); i++) {
		const dlt_tensor_info *t = dlt_archive_tensor(b, i);
		if (!dlt_archive_find(a, t->name))
			rows[n++] = (diff_row){ .name = t->name, .status = D_ONLY_B, .tb = t };
	}
	for (size_t i = 0; i < n; i++)
		*differ += rows[i].status != D_EQUAL;
	if (json) {
		diff_json(&j, pa, pb, rows, n, *differ);
		DLT_TRY(dlt_json_ok(&j));
		DLT_TRY(dlt_buf_append(out, j.buf.data, j.buf.len));
		DLT_TRY(dlt_buf_append(out, "\n", 1));
	} else {
		diff_text(out, rows, n, *differ);
		DLT_TRY(dlt_buf_append(out, "", 0));
	}
	rc = 0;
fail:
	dlt_json_free(&j);
	free(rows);
	dlt_archive_close(a);
	dlt_archive_close(b);
	return rc;
}

/* export */

/* __metadata__: "format": "dlt", then the checkpoint's keys in order,
 * every value a string. */
static int export_meta(const dlt_jval *meta, int weights_only, char ***kv, size_t *n)
{
	char **p = dlt_calloc(2 * (meta->n + 2), sizeof(*p));
	size_t k = 0;
	int rc = DLT_ENOMEM;

	*kv = p;
	*n = 0;
	if (!p)
		return DLT_ENOMEM;
	if (!(p[k++] = dlt_strdup("format")) || !(p[k++] = dlt_strdup("dlt")))
		goto fail;
	if (weights_only && !dlt_jval_get(meta, "kind") &&
	    (!(p[k++] = dlt_strdup("kind")) || !(p[k++] = dlt_strdup("model"))))
		goto fail;
	for (size_t i = 0; i < meta->n; i++) {
		const dlt_jval *v = &meta->items[i];
		const char *key = strcmp(v->key, "format") ? v->key : "dlt_format";
		if (!(p[k++] = dlt_strdup(key)))
			goto fail;
		if (weights_only && strcmp(v->key, "kind") == 0)
			p[k++] = dlt_strdup("model");
		else
			p[k++] = v->type == DLT_JSTR ? dlt_strdup(v->str) : jval_text(v);
		if (!p[k - 1])
			goto fail;
	}
	*n = k / 2;
	return 0;
fail:
	return rc;
}

static void free_strings(char **p, size_t n)
{
	if (!p)
		return;
	for (size_t i = 0; i < n; i++)
		free(p[i]);
	free(p);
}

static int export_safetensors(dlt_archive *a, const dlt_jval *meta, const char *out,
			      int weights_only)
{
	size_t n = dlt_archive_count(a), k = 0, n_meta = 0;
	dlt_st_entry *e = dlt_calloc(n + 1, sizeof(*e));
	const dlt_tensor_info **ts = dlt_calloc(n + 1, sizeof(*ts));
	dlt_safetensors_writer *w = NULL;
	char **kv = NULL;
	void *buf = NULL;
	int rc = DLT_ENOMEM;

	if (!e || !ts)
		goto fail;
	for (size_t i = 0; i < n; i++) {
		const dlt_tensor_info *t = dlt_archive_tensor(a, i);
		if (weights_only && dlt_ckpt_is_optim(t->name))
			continue;
		ts[k] = t;
		e[k++] = (dlt_st_entry){ t->name, dlt_st_dtype_from_dlt(t->dtype), t->ndim, t->dims };
	}
	DLT_TRY(export_meta(meta, weights_only, &kv, &n_meta));
	DLT_TRY(dlt_safetensors_create(&w, out, e, k, (const char *const *)kv, n_meta));
	for (size_t i = 0; i < k; i++) {
		DLT_TRY(read_tensor(a, ts[i], &buf));
		DLT_TRY(dlt_safetensors_write_data(w, buf, ts[i]->raw_size));
		free(buf);
		buf = NULL;
	}
	rc = dlt_safetensors_writer_close(w);
	w = NULL;
fail:
	dlt_safetensors_writer_abort(w);
	free(buf);
	free_strings(kv, 2 * (meta->n + 2));
	free(e);
	free(ts);
	return rc;
}

/* OUT/NAME.npy, with '/' written "__" */
static char *npy_path(const char *dir, const char *name)
{
	size_t slashes = 0;
	char *p, *q;

	for (const char *s = name; *s; s++)
		slashes += *s == '/';
	if (!(p = dlt_malloc(strlen(dir) + strlen(name) + slashes + 6)))
		return NULL;
	q = p + sprintf(p, "%s/", dir);
	for (const char *s = name; *s; s++) {
		if (*s == '/') {
			*q++ = '_';
			*q++ = '_';
		} else {
			*q++ = *s;
		}
	}
	strcpy(q, ".npy");
	return p;
}

static int cmp_str(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

static int export_npy(dlt_archive *a, const char *out, int weights_only)
{
	size_t n = dlt_archive_count(a), k = 0;
	char **paths = dlt_calloc(n + 1, sizeof(*paths)), **sorted = NULL;
	const dlt_tensor_info **ts = dlt_calloc(n + 1, sizeof(*ts));
	void *buf = NULL;
	int rc = DLT_ENOMEM;

	if (!paths || !ts || !(sorted = dlt_calloc(n + 1, sizeof(*sorted))))
		goto fail;
	for (size_t i = 0; i < n; i++) {
		const dlt_tensor_info *t = dlt_archive_tensor(a, i);
		if (weights_only && dlt_ckpt_is_optim(t->name))
			continue;
		if (t->dtype == DLT_BF16) {
			char nm[NAME_SIZE];
			rc = dlt_error(DLT_EINPUT, "%s: tensor '%s' is bf16, which npy has not",
				       dlt_archive_path(a), safe(nm, t->name));
			goto fail;
		}
		ts[k] = t;
		if (!(paths[k++] = npy_path(out, t->name)))
			goto fail;
	}
	/* "a/b" and "a__b" would overwrite each other */
	memcpy(sorted, paths, k * sizeof(*paths));
	qsort(sorted, k, sizeof(*sorted), cmp_str);
	for (size_t i = 1; i < k; i++)
		if (strcmp(sorted[i - 1], sorted[i]) == 0) {
			char nm[NAME_SIZE];
			rc = dlt_error(DLT_EINPUT, "%s: two tensors make %s", dlt_archive_path(a),
				       safe(nm, sorted[i]));
			goto fail;
		}
	DLT_TRY(dlt_mkdir_p(out));
	for (size_t i = 0; i < k; i++) {
		DLT_TRY(read_tensor(a, ts[i], &buf));
		DLT_TRY(dlt_npy_write(paths[i], ts[i]->dtype, ts[i]->ndim, ts[i]->dims, buf));
		free(buf);
		buf = NULL;
	}
	rc = 0;
fail:
	free(buf);
	free_strings(paths, n);
	free(sorted);
	free(ts);
	return rc;
}

int dlt_ckpt_export(const char *path, int format, const char *out, int weights_only)
{
	dlt_archive *a = NULL;
	dlt_jval meta = { 0 };
	int rc;

	DLT_TRY(dlt_archive_open(&a, path));
	DLT_TRY(read_meta(a, &meta));
	if (format == DLT_EXPORT_SAFETENSORS)
		rc = export_safetensors(a, &meta, out, weights_only);
	else
		rc = export_npy(a, out, weights_only);
fail:
	dlt_jval_free(&meta);
	dlt_archive_close(a);
	return rc;
}

int dlt_npy_write(const char *path, int dtype, int ndim, const uint64_t *dims, const void *data)
{
	static const char *const descr[] = {
		[DLT_F32] = "<f4", [DLT_F16] = "<f2", [DLT_I32] = "<i4", [DLT_I64] = "<i8",
		[DLT_U8] = "|u1",
	};
	dlt_buf h = { 0 };
	uint64_t count = 1;
	size_t size = dlt_dtype_size(dtype), total;
	dlt_ofile f;
	uint16_t hlen;
	int rc;

	if (dtype <= 0 || dtype > DLT_U8 || !descr[dtype])
		return dlt_error(DLT_EINPUT, "%s: npy has no %s", path,
				 dlt_dtype_name(dtype) ? dlt_dtype_name(dtype) : "such dtype");
	dlt_buf_printf(&h, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr[dtype]);
	for (int i = 0; i < ndim; i++) {
		dlt_buf_printf(&h, i ? ", %llu" : "%llu", (unsigned long long)dims[i]);
		count *= dims[i];
	}
	dlt_buf_printf(&h, "%s), }", ndim == 1 ? "," : "");
	/* numpy pads the header with spaces and a newline so that the data
	 * starts at a multiple of 64 bytes */
	while ((10 + h.len + 1) % 64)
		dlt_buf_append(&h, " ", 1);
	if ((rc = dlt_buf_append(&h, "\n", 1)) < 0)
		goto done;
	if (h.len > UINT16_MAX) {
		rc = dlt_error(DLT_EINPUT, "%s: npy header too long", path);
		goto done;
	}
	hlen = (uint16_t)h.len;
	total = count * size;
	if ((rc = dlt_ofile_open(&f, path)) < 0)
		goto done;
	if (fwrite("\x93NUMPY\x01\x00", 1, 8, f.fp) != 8 || fwrite(&hlen, 2, 1, f.fp) != 1 ||
	    fwrite(h.data, 1, h.len, f.fp) != h.len ||
	    (total && fwrite(data, 1, total, f.fp) != total)) {
		rc = dlt_error_errno(DLT_EIO, "%s", path);
		dlt_ofile_abort(&f);
		goto done;
	}
	rc = dlt_ofile_commit(&f);
done:
	dlt_buf_free(&h);
	return rc;
}

/* import */

/* The metadata of an imported file.  One that dlt exported ("format":
 * "dlt") gets its keys back in order: values that read as JSON as that
 * JSON (a number, an object), others as strings; "dlt_format" is the
 * checkpoint's "format" again. */
static int import_meta(const dlt_safetensors *st, const char *config, dlt_json *j)
{
	const char *fmt = dlt_safetensors_meta_get(st, "format");
	size_t n = dlt_safetensors_meta_count(st);
	int ours = fmt && strcmp(fmt, "dlt") == 0, have_config = 0;

	dlt_json_begin(j);
	if (!ours) {
		dlt_json_str(j, "kind", "model");
		dlt_json_int(j, "format", 1);
		if (config)
			dlt_json_str(j, "config", config);
		if (n) {
			dlt_json_object_begin(j, "safetensors");
			for (size_t i = 0; i < n; i++)
				dlt_json_str(j, dlt_safetensors_meta_key(st, i),
					     dlt_safetensors_meta_value(st, i));
			dlt_json_end(j);
		}
		dlt_json_end(j);
		return dlt_json_ok(j);
	}
	if (!dlt_safetensors_meta_get(st, "kind"))
		dlt_json_str(j, "kind", "model");
	for (size_t i = 0; i < n; i++) {
		const char *k = dlt_safetensors_meta_key(st, i), *v = dlt_safetensors_meta_value(st, i);
		dlt_jval jv;
		if (strcmp(k, "format") == 0)
			continue;
		if (strcmp(k, "kind") == 0) {
			dlt_json_str(j, k, "model");
		} else if (strcmp(k, "config") == 0 && config) {
			dlt_json_str(j, k, config);
			have_config = 1;
		} else if (dlt_json_parse(v, strlen(v), &jv) == 0) {
			put_jval(j, strcmp(k, "dlt_format") ? k : "format", &jv);
			dlt_jval_free(&jv);
		} else {
			dlt_json_str(j, strcmp(k, "dlt_format") ? k : "format", v);
		}
	}
	if (config && !have_config)
		dlt_json_str(j, "config", config);
	dlt_json_end(j);
	return dlt_json_ok(j);
}

static int load_config(const char *path, dlt_buf *yaml)
{
	dlt_config c;
	int rc = dlt_config_load(&c, path, NULL, 0);

	if (rc == 0) {
		rc = dlt_config_write_yaml(&c, yaml);
		if (rc == 0)
			rc = dlt_buf_append(yaml, "", 0);
	}
	dlt_config_free(&c);
	return rc;
}

int dlt_ckpt_import(const char *path, const char *out, const char *config)
{
	dlt_safetensors *st = NULL;
	dlt_archive_writer *w = NULL;
	dlt_buf yaml = { 0 };
	dlt_json j = { 0 };
	float *buf = NULL;
	int rc;

	DLT_TRY(dlt_safetensors_open(&st, path));
	if (config)
		DLT_TRY(load_config(config, &yaml));
	/* every tensor is checked before the output is started */
	for (size_t i = 0; i < dlt_safetensors_count(st); i++) {
		const dlt_st_tensor *t = dlt_safetensors_tensor(st, i);
		char nm[NAME_SIZE];
		if (dlt_ckpt_is_optim(t->name))
			continue;
		safe(nm, t->name);
		if (is_tokenizer(t->name) && t->dtype == DLT_ST_I32 && t->ndim == 2 &&
		    t->dims[1] == 2)
			continue;
		if (t->dtype != DLT_ST_F32 && t->dtype != DLT_ST_F16 && t->dtype != DLT_ST_BF16) {
			rc = dlt_error(DLT_EINPUT, "%s: tensor '%s' is %s, not F32, F16 or BF16",
				       dlt_safetensors_path(st), nm, dlt_st_dtype_name(t->dtype));
			goto fail;
		}
		if (t->ndim > DLT_MAX_DIMS) {
			rc = dlt_error(DLT_EINPUT, "%s: tensor '%s' has %d dimensions, more than %d",
				       dlt_safetensors_path(st), nm, t->ndim, DLT_MAX_DIMS);
			goto fail;
		}
	}
	DLT_TRY(import_meta(st, config ? yaml.data : NULL, &j));
	DLT_TRY(dlt_archive_create(&w, out));
	DLT_TRY(dlt_archive_write_meta(w, j.buf.data));
	for (size_t i = 0; i < dlt_safetensors_count(st); i++) {
		const dlt_st_tensor *t = dlt_safetensors_tensor(st, i);
		if (dlt_ckpt_is_optim(t->name))
			continue;
		rc = DLT_ENOMEM;
		if (!(buf = dlt_calloc(t->count + 1, sizeof(float))))
			goto fail;
		if (t->dtype == DLT_ST_I32) {	/* the tokenizer, checked above: as it is */
			memcpy(buf, dlt_safetensors_data(st, t), t->count * sizeof(int32_t));
			DLT_TRY(dlt_archive_write_tensor(w, t->name, DLT_I32, t->ndim, t->dims, buf,
							 CODEC, LEVEL));
			free(buf);
			buf = NULL;
			continue;
		}
		DLT_TRY(dlt_safetensors_read_f32(st, t, buf, t->count));
		DLT_TRY(dlt_archive_write_tensor(w, t->name, DLT_F32, t->ndim, t->dims, buf,
						 CODEC, LEVEL));
		free(buf);
		buf = NULL;
	}
	rc = dlt_archive_writer_close(w);
	w = NULL;
fail:
	if (w)
		dlt_archive_writer_abort(w);
	free(buf);
	dlt_json_free(&j);
	dlt_buf_free(&yaml);
	dlt_safetensors_close(st);
	return rc;
}

/* average */

/* Whether b has the tokenizer t of a, to the byte. */
static int same_tokenizer(dlt_archive *a, const dlt_tensor_info *t, dlt_archive *b)
{
	const dlt_tensor_info *u = dlt_archive_find(b, t->name);
	void *x = NULL, *y = NULL;
	int rc;

	if (!u || u->dtype != t->dtype || !same_shape(t, u))
		goto differ;
	DLT_TRY(read_tensor(a, t, &x));
	DLT_TRY(read_tensor(b, u, &y));
	if (memcmp(x, y, t->raw_size))
		goto differ;
	rc = 0;
fail:
	free(x);
	free(y);
	return rc;
differ:
	rc = dlt_error(DLT_EINPUT, "%s: its tokenizer (merges) is not that of %s",
		       dlt_archive_path(b), dlt_archive_path(a));
	goto fail;
}

/* Whether b has the weights of a, no more, with the same dtypes and shapes
 * (and the same tokenizer). */
static int same_weights(dlt_archive *a, dlt_archive *b)
{
	const char *pa = dlt_archive_path(a), *pb = dlt_archive_path(b);
	char s1[256], s2[256], nm[NAME_SIZE];

	for (size_t i = 0; i < dlt_archive_count(a); i++) {
		const dlt_tensor_info *t = dlt_archive_tensor(a, i), *u;
		if (dlt_ckpt_is_optim(t->name))
			continue;
		safe(nm, t->name);
		if (is_tokenizer(t->name)) {
			DLT_TRY_RC(same_tokenizer(a, t, b));
			continue;
		}
		if (t->dtype != DLT_F32)
			return dlt_error(DLT_EINPUT, "%s: tensor '%s' is %s, not f32", pa, nm,
					 dlt_dtype_name(t->dtype));
		if (!(u = dlt_archive_find(b, t->name)))
			return dlt_error(DLT_EINPUT, "%s: no tensor '%s', which %s has", pb,
					 nm, pa);
		if (u->dtype != DLT_F32)
			return dlt_error(DLT_EINPUT, "%s: tensor '%s' is %s, not f32", pb, nm,
					 dlt_dtype_name(u->dtype));
		if (!same_shape(t, u))
			return dlt_error(DLT_EINPUT, "%s: tensor '%s' has shape %s, but %s in %s",
					 pb, nm, shape_text(s1, sizeof(s1), u->ndim, u->dims),
					 shape_text(s2, sizeof(s2), t->ndim, t->dims), pa);
	}
	for (size_t i = 0; i < dlt_archive_count(b); i++) {
		const dlt_tensor_info *u = dlt_archive_tensor(b, i);
		if (!dlt_ckpt_is_optim(u->name) && !dlt_archive_find(a, u->name))
			return dlt_error(DLT_EINPUT, "%s: tensor '%s' is not in %s", pb,
					 safe(nm, u->name), pa);
	}
	return 0;
}

int dlt_ckpt_average(const char *const *paths, int n, const char *out)
{
	dlt_archive **a = dlt_calloc(n + 1, sizeof(*a)), *first;
	dlt_archive_writer *w = NULL;
	dlt_jval meta = { 0 };
	dlt_json j = { 0 };
	double *sum = NULL;
	float *buf = NULL;
	int rc;

	if (!a)
		return DLT_ENOMEM;
	for (int i = 0; i < n; i++)
		DLT_TRY(dlt_archive_open(&a[i], paths[i]));
	first = a[0];
	for (int i = 1; i < n; i++)
		DLT_TRY(same_weights(first, a[i]));
	if (n == 1)
		DLT_TRY(same_weights(first, first));	/* f32 only, like the rest */
	DLT_TRY(read_meta(first, &meta));
	DLT_TRY(stripped_meta(&meta, &j));
	DLT_TRY(dlt_archive_create(&w, out));
	DLT_TRY(dlt_archive_write_meta(w, j.buf.data));
	for (size_t i = 0; i < dlt_archive_count(first); i++) {
		const dlt_tensor_info *t = dlt_archive_tensor(first, i);
		size_t count = t->count;
		if (dlt_ckpt_is_optim(t->name))
			continue;
		if (is_tokenizer(t->name)) {	/* the same in all: the first's */
			DLT_TRY(read_tensor(first, t, (void **)&buf));
			DLT_TRY(dlt_archive_write_tensor(w, t->name, t->dtype, t->ndim, t->dims, buf,
							 CODEC, LEVEL));
			free(buf);
			buf = NULL;
			continue;
		}
		rc = DLT_ENOMEM;
		if (!(sum = dlt_calloc(count + 1, sizeof(*sum))) ||
		    !(buf = dlt_calloc(count + 1, sizeof(*buf))))
			goto fail;
		/* in double, so that n copies of x sum exactly and the mean
		 * of identical checkpoints is bit-identical to them */
		for (int k = 0; k < n; k++) {
			const dlt_tensor_info *u = dlt_archive_find(a[k], t->name);
			DLT_TRY(dlt_archive_read(a[k], u, buf, u->raw_size));
			for (size_t e = 0; e < count; e++)
				sum[e] += buf[e];
		}
		for (size_t e = 0; e < count; e++)
			buf[e] = (float)(sum[e] / n);
		DLT_TRY(dlt_archive_write_tensor(w, t->name, DLT_F32, t->ndim, t->dims, buf,
						 CODEC, LEVEL));
		free(sum);
		free(buf);
		sum = NULL;
		buf = NULL;
	}
	rc = dlt_archive_writer_close(w);
	w = NULL;
fail:
	if (w)
		dlt_archive_writer_abort(w);
	free(sum);
	free(buf);
	dlt_json_free(&j);
	dlt_jval_free(&meta);
	for (int i = 0; i < n; i++)
		dlt_archive_close(a[i]);
	free(a);
	return rc;
}

/* strip */

int dlt_ckpt_strip(const char *path, const char *out)
{
	dlt_archive *a = NULL;
	dlt_jval meta = { 0 };
	dlt_json j = { 0 };
	int rc;

	DLT_TRY(dlt_archive_open(&a, path));
	DLT_TRY(read_meta(a, &meta));
	DLT_TRY(stripped_meta(&meta, &j));
	rc = write_weights(out, a, j.buf.data);
fail:
	dlt_json_free(&j);
	dlt_jval_free(&meta);
	dlt_archive_close(a);
	return rc;
}
