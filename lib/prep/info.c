/* dlt-prep info: what an archive holds, for people or as JSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prep.h"
#include "tokens.h"

struct info {
	const char *path;	/* as given, for the JSON */
	dlt_archive *a;
	const char *meta;	/* raw metadata JSON, or NULL */
	dlt_jval m;		/* parsed */
	uint64_t *counts;	/* samples per class, when the archive has labels */
	size_t k;
	/* multi-label (y u8 [N, K]): samples with each label set */
	uint64_t *positives;
	/* float targets (y f32 [N, K]): each column's least and greatest */
	double *tmin, *tmax;
	size_t kt;		/* K of either */
};

static const dlt_jval *meta_get(const struct info *in, const char *key)
{
	return in->meta ? dlt_jval_get(&in->m, key) : NULL;
}

/* Samples per class, from tensor "y" and num_classes: they show class
 * balance at a glance, and reading y checks its checksum on the way. */
static int count_classes(struct info *in)
{
	const dlt_jval *nc = meta_get(in, "num_classes");
	const dlt_tensor_info *t;
	void *buf = NULL;
	int32_t *y;
	int rc;

	if (!nc || !dlt_archive_find(in->a, "y"))
		return 0;
	if (nc->type != DLT_JNUM || nc->num < 1 || nc->num > DLT_PREP_MAX_CLASSES ||
	    nc->num != (double)(size_t)nc->num)
		return dlt_error(DLT_EINPUT, "%s: bad num_classes in metadata",
				 dlt_archive_path(in->a));
	in->k = (size_t)nc->num;
	DLT_TRY(dlt_archive_read_alloc(in->a, "y", DLT_I32, 1, &t, &buf));
	y = buf;
	if (!(in->counts = dlt_calloc(in->k, sizeof(*in->counts)))) {
		rc = DLT_ENOMEM;
		goto fail;
	}
	for (uint64_t i = 0; i < t->count; i++) {
		if (y[i] < 0 || (size_t)y[i] >= in->k) {
			rc = dlt_error(DLT_EINPUT, "%s: tensor 'y': label %d at %llu is not below "
				       "num_classes %zu", dlt_archive_path(in->a), y[i],
				       (unsigned long long)i, in->k);
			goto fail;
		}
		in->counts[y[i]]++;
	}
fail:
	free(buf);
	return rc;
}

/* Multi-hot labels: how many samples have each; every cell must be 0 or 1 */
static int count_positives(struct info *in)
{
	const dlt_tensor_info *t;
	void *buf = NULL;
	uint8_t *y;
	int rc;

	DLT_TRY(dlt_archive_read_alloc(in->a, "y", DLT_U8, 2, &t, &buf));
	y = buf;
	in->kt = (size_t)t->dims[1];
	if (!(in->positives = dlt_calloc(in->kt ? in->kt : 1, sizeof(*in->positives)))) {
		rc = DLT_ENOMEM;
		goto fail;
	}
	for (uint64_t i = 0; i < t->count; i++) {
		if (y[i] > 1) {
			rc = dlt_error(DLT_EINPUT, "%s: tensor 'y': label %d at %llu is not 0 or 1",
				       dlt_archive_path(in->a), y[i], (unsigned long long)i);
			goto fail;
		}
		in->positives[i % in->kt] += y[i];
	}
fail:
	free(buf);
	return rc;
}

/* Float targets: each column's range */
static int target_range(struct info *in)
{
	const dlt_tensor_info *t;
	void *buf = NULL;
	float *y;
	int rc;

	DLT_TRY(dlt_archive_read_alloc(in->a, "y", DLT_F32, 2, &t, &buf));
	y = buf;
	in->kt = (size_t)t->dims[1];
	if (!(in->tmin = dlt_calloc(in->kt ? in->kt : 1, sizeof(double))) ||
	    !(in->tmax = dlt_calloc(in->kt ? in->kt : 1, sizeof(double)))) {
		rc = DLT_ENOMEM;
		goto fail;
	}
	for (uint64_t i = 0; i < t->count; i++) {
		size_t k = i % in->kt;
		if (i < in->kt || y[i] < in->tmin[k])
			in->tmin[k] = y[i];
		if (i < in->kt || y[i] > in->tmax[k])
			in->tmax[k] = y[i];
	}
fail:
	free(buf);
	return rc;
}

/* What y holds, by its dtype: class ids, multi-hot labels, float targets */
static int describe_y(struct info *in)
{
	const dlt_tensor_info *t = dlt_archive_find(in->a, "y");

	if (t && t->dtype == DLT_U8 && t->ndim == 2)
		return count_positives(in);
	if (t && t->dtype == DLT_F32 && t->ndim == 2)
		return target_range(in);
	return count_classes(in);
}

/* A token archive (tokens.h): dlt_tokens_describe adds what it holds */
static int is_tokens(const struct info *in)
{
	const dlt_jval *kind = meta_get(in, "kind");
	return kind && kind->type == DLT_JSTR && strcmp(kind->str, "tokens") == 0;
}

static int shape_text(dlt_buf *b, const dlt_tensor_info *t)
{
	int rc = dlt_buf_append(b, "[", 1);

	for (int d = 0; d < t->ndim && rc == 0; d++)
		rc = dlt_buf_printf(b, d ? ", %llu" : "%llu", (unsigned long long)t->dims[d]);
	return rc ? rc : dlt_buf_append(b, "]", 1);
}

static int value_text(dlt_buf *b, const dlt_jval *v)
{
	int rc = 0;

	switch (v->type) {
	case DLT_JNULL:
		return dlt_buf_printf(b, "null");
	case DLT_JBOOL:
		return dlt_buf_printf(b, v->num ? "true" : "false");
	case DLT_JNUM:
		return dlt_buf_printf(b, "%.10g", v->num);
	case DLT_JSTR:
		return dlt_buf_printf(b, "%s", v->str);
	case DLT_JARR:
		rc = dlt_buf_append(b, "[", 1);
		for (size_t i = 0; i < v->n && rc == 0; i++) {
			if (i)
				rc = dlt_buf_append(b, ", ", 2);
			if (rc == 0)
				rc = value_text(b, &v->items[i]);
		}
		return rc ? rc : dlt_buf_append(b, "]", 1);
	default:
		return dlt_buf_printf(b, "{...}");
	}
}

static int tensors_text(dlt_buf *out, const struct info *in)
{
	size_t n = dlt_archive_count(in->a);
	int wname = 4, wshape = 5;
	dlt_buf shape = { 0 };
	int rc = 0;

	for (size_t i = 0; i < n; i++) {
		const dlt_tensor_info *t = dlt_archive_tensor(in->a, i);
		shape.len = 0;
		DLT_TRY(shape_text(&shape, t));
		wname = (int)strlen(t->name) > wname ? (int)strlen(t->name) : wname;
		wshape = (int)shape.len > wshape ? (int)shape.len : wshape;
	}
	DLT_TRY(dlt_buf_printf(out, "tensors:\n  %-*s  dtype  %-*s  codec  %12s  %12s\n",
			       wname, "name", wshape, "shape", "raw", "stored"));
	for (size_t i = 0; i < n; i++) {
		const dlt_tensor_info *t = dlt_archive_tensor(in->a, i);
		shape.len = 0;
		DLT_TRY(shape_text(&shape, t));
		DLT_TRY(dlt_buf_printf(out, "  %-*s  %-5s  %-*s  %-5s  %12llu  %12llu\n",
				       wname, t->name, dlt_dtype_name(t->dtype), wshape, shape.data,
				       dlt_codec_name(t->codec), (unsigned long long)t->raw_size,
				       (unsigned long long)t->stored_size));
	}
fail:
	dlt_buf_free(&shape);
	return rc;
}

/* One line per class: id, samples, name when the labels were strings. */
static int classes_text(dlt_buf *out, const struct info *in)
{
	const dlt_jval *names = meta_get(in, "classes");
	int rc;

	if (!in->counts)
		return 0;
	if (names && (names->type != DLT_JARR || names->n != in->k))
		names = NULL;
	DLT_TRY(dlt_buf_printf(out, "classes:\n  %5s  %10s%s\n", "id", "samples",
			       names ? "  name" : ""));
	for (size_t i = 0; i < in->k; i++) {
		DLT_TRY(dlt_buf_printf(out, "  %5zu  %10llu", i, (unsigned long long)in->counts[i]));
		if (names) {
			DLT_TRY(dlt_buf_append(out, "  ", 2));
			DLT_TRY(value_text(out, &names->items[i]));
		}
		DLT_TRY(dlt_buf_append(out, "\n", 1));
	}
fail:
	return rc;
}

/* A name from a metadata array of kt names, or nothing */
static int name_text(dlt_buf *out, const dlt_jval *names, size_t i)
{
	if (!names)
		return 0;
	DLT_TRY_RC(dlt_buf_append(out, "  ", 2));
	return value_text(out, &names->items[i]);
}

/* Float targets (their standardisation and range) or multi-hot labels
 * (how many samples have each), one line a column */
static int targets_text(dlt_buf *out, const struct info *in)
{
	const dlt_jval *names = meta_get(in, in->positives ? "labels" : "targets");
	const dlt_jval *mean = meta_get(in, "target_mean"), *std = meta_get(in, "target_std");
	int rc = 0;

	if (!in->positives && !in->tmin)
		return 0;
	if (names && (names->type != DLT_JARR || names->n != in->kt))
		names = NULL;
	if (mean && (mean->type != DLT_JARR || mean->n != in->kt))
		mean = NULL;
	if (std && (std->type != DLT_JARR || std->n != in->kt))
		std = NULL;
	if (in->positives)
		DLT_TRY(dlt_buf_printf(out, "labels:\n  %5s  %10s%s\n", "#", "positives",
				       names ? "  name" : ""));
	else
		DLT_TRY(dlt_buf_printf(out, "targets:\n  %5s  %12s  %12s  %12s  %12s%s\n", "#",
				       "mean", "std", "min", "max", names ? "  name" : ""));
	for (size_t i = 0; i < in->kt; i++) {
		if (in->positives) {
			DLT_TRY(dlt_buf_printf(out, "  %5zu  %10llu", i,
					       (unsigned long long)in->positives[i]));
		} else {
			DLT_TRY(dlt_buf_printf(out, "  %5zu", i));
			DLT_TRY(mean && mean->items[i].type == DLT_JNUM ?
				dlt_buf_printf(out, "  %12.6g", mean->items[i].num) :
				dlt_buf_printf(out, "  %12s", "-"));
			DLT_TRY(std && std->items[i].type == DLT_JNUM ?
				dlt_buf_printf(out, "  %12.6g", std->items[i].num) :
				dlt_buf_printf(out, "  %12s", "-"));
			DLT_TRY(dlt_buf_printf(out, "  %12.6g  %12.6g", in->tmin[i], in->tmax[i]));
		}
		DLT_TRY(name_text(out, names, i));
		DLT_TRY(dlt_buf_append(out, "\n", 1));
	}
fail:
	return rc;
}

/* Metadata that a table shows instead */
static int in_table(const struct info *in, const char *key)
{
	if (in->counts && strcmp(key, "classes") == 0)
		return 1;
	if (in->positives && strcmp(key, "labels") == 0)
		return 1;
	return in->tmin && (strcmp(key, "targets") == 0 || strcmp(key, "target_mean") == 0 ||
			    strcmp(key, "target_std") == 0);
}

static int info_text(dlt_buf *out, const struct info *in)
{
	const dlt_jval *kind;
	int rc;

	DLT_TRY(dlt_buf_printf(out, "file: %s (%llu bytes)\n", dlt_archive_path(in->a),
			       (unsigned long long)dlt_archive_file_size(in->a)));
	DLT_TRY(tensors_text(out, in));
	/* the metadata in its own order; the class names go in the table */
	for (size_t i = 0; in->meta && in->m.type == DLT_JOBJ && i < in->m.n; i++) {
		const dlt_jval *v = &in->m.items[i];
		if (in_table(in, v->key))
			continue;
		DLT_TRY(dlt_buf_printf(out, "%s: ", v->key));
		DLT_TRY(value_text(out, v));
		DLT_TRY(dlt_buf_append(out, "\n", 1));
	}
	if (is_tokens(in))
		DLT_TRY(dlt_tokens_describe(in->a, out, NULL));
	if (!dlt_archive_find(in->a, "y") && (kind = meta_get(in, "kind")) &&
	    kind->type == DLT_JSTR && strcmp(kind->str, "dataset") == 0)
		DLT_TRY(dlt_buf_printf(out, "labels: none\n"));
	DLT_TRY(classes_text(out, in));
	DLT_TRY(targets_text(out, in));
fail:
	return rc;
}

static int info_json(dlt_buf *out, const struct info *in)
{
	size_t n = dlt_archive_count(in->a);
	dlt_json j;
	int rc;

	dlt_json_begin(&j);
	dlt_json_str(&j, "file", in->path);
	dlt_json_int(&j, "size", (long long)dlt_archive_file_size(in->a));
	dlt_json_array_begin(&j, "tensors");
	for (size_t i = 0; i < n; i++) {
		const dlt_tensor_info *t = dlt_archive_tensor(in->a, i);
		dlt_json_object_begin(&j, NULL);
		dlt_json_str(&j, "name", t->name);
		dlt_json_str(&j, "dtype", dlt_dtype_name(t->dtype));
		dlt_json_array_begin(&j, "shape");
		for (int d = 0; d < t->ndim; d++)
			dlt_json_int(&j, NULL, (long long)t->dims[d]);
		dlt_json_array_end(&j);
		dlt_json_str(&j, "codec", dlt_codec_name(t->codec));
		dlt_json_int(&j, "raw_size", (long long)t->raw_size);
		dlt_json_int(&j, "stored_size", (long long)t->stored_size);
		dlt_json_end(&j);
	}
	dlt_json_array_end(&j);
	/* parsed above, so it is one valid JSON value */
	if (in->meta)
		dlt_json_raw(&j, "meta", in->meta);
	if (in->counts) {
		dlt_json_array_begin(&j, "counts");
		for (size_t i = 0; i < in->k; i++)
			dlt_json_int(&j, NULL, (long long)in->counts[i]);
		dlt_json_array_end(&j);
	}
	if (in->positives) {
		dlt_json_array_begin(&j, "positives");
		for (size_t i = 0; i < in->kt; i++)
			dlt_json_int(&j, NULL, (long long)in->positives[i]);
		dlt_json_array_end(&j);
	}
	if (in->tmin) {
		dlt_json_array_begin(&j, "target_min");
		for (size_t i = 0; i < in->kt; i++)
			dlt_json_num(&j, NULL, in->tmin[i]);
		dlt_json_array_end(&j);
		dlt_json_array_begin(&j, "target_max");
		for (size_t i = 0; i < in->kt; i++)
			dlt_json_num(&j, NULL, in->tmax[i]);
		dlt_json_array_end(&j);
	}
	if (is_tokens(in) && (rc = dlt_tokens_describe(in->a, NULL, &j)) < 0) {
		dlt_json_free(&j);
		return rc;
	}
	dlt_json_end(&j);
	if ((rc = dlt_json_ok(&j)) == 0)
		rc = dlt_buf_printf(out, "%s\n", j.buf.data);
	dlt_json_free(&j);
	return rc;
}

int dlt_prep_info(const char *path, int json, dlt_buf *out)
{
	struct info in = { .path = path };
	int rc;

	DLT_TRY(dlt_archive_open(&in.a, path));
	if ((in.meta = dlt_archive_meta(in.a))) {
		if ((rc = dlt_json_parse(in.meta, strlen(in.meta), &in.m)) < 0) {
			in.meta = NULL;
			rc = dlt_error_prefix(rc, "%s: metadata", dlt_archive_path(in.a));
			goto fail;
		}
	}
	DLT_TRY(describe_y(&in));
	rc = json ? info_json(out, &in) : info_text(out, &in);
fail:
	if (in.meta)
		dlt_jval_free(&in.m);
	free(in.counts);
	free(in.positives);
	free(in.tmin);
	free(in.tmax);
	if (in.a)
		dlt_archive_close(in.a);
	return rc;
}
