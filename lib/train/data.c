#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "archive/archive.h"
#include "train.h"

/* Reads an array of numbers from the metadata; n = 0 when absent. */
static int meta_floats(const dlt_dataset *d, const dlt_jval *v, const char *key, float **out, int *n)
{
	const dlt_jval *a = dlt_jval_get(v, key);
	*out = NULL;
	*n = 0;
	if (!a)
		return 0;
	if (a->type != DLT_JARR || a->n == 0 || a->n > (1u << 24))
		return dlt_error(DLT_EINPUT, "%s: metadata '%s' is not a list of numbers", d->path, key);
	if (!(*out = dlt_malloc(a->n * sizeof(float))))
		return DLT_ENOMEM;
	for (size_t i = 0; i < a->n; i++) {
		if (a->items[i].type != DLT_JNUM)
			return dlt_error(DLT_EINPUT, "%s: metadata '%s' is not a list of numbers", d->path, key);
		(*out)[i] = (float)a->items[i].num;
	}
	*n = (int)a->n;
	return 0;
}

/* Normalisation stats from the metadata; without them, raw values (u8
 * scaled to [0, 1]). */
static int load_stats(dlt_dataset *d, const char *meta)
{
	dlt_jval v = { 0 };
	const dlt_jval *s, *k;
	float *std = NULL;
	int n_std = 0, rc = 0;

	d->scale = d->dtype == DLT_U8 ? 1.0f / 255 : 1.0f;
	if (meta && (rc = dlt_json_parse(meta, strlen(meta), &v)) < 0)
		return dlt_error_prefix(DLT_EINPUT, "%s: metadata", d->path);
	if ((s = dlt_jval_get(&v, "scale"))) {
		if (s->type != DLT_JNUM || !((float)s->num > 0) || !isfinite((float)s->num)) {
			rc = dlt_error(DLT_EINPUT, "%s: metadata 'scale' must be a positive number", d->path);
			goto fail;
		}
		d->scale = (float)s->num;
	}
	if (d->task == DLT_TASK_CLASS && (k = dlt_jval_get(&v, "num_classes"))) {
		if (k->type != DLT_JNUM || k->num < 1 || k->num > 1 << 24 || k->num != (int)k->num) {
			rc = dlt_error(DLT_EINPUT, "%s: metadata 'num_classes' must be a positive integer", d->path);
			goto fail;
		}
		d->n_classes = (int)k->num;
	}
	if (d->task == DLT_TASK_REGRESS) {
		float *tstd;
		int nm, ns;
		DLT_TRY(meta_floats(d, &v, "target_mean", &d->t_mean, &nm));
		DLT_TRY(meta_floats(d, &v, "target_std", &d->t_std, &ns));
		tstd = d->t_std;
		if (nm != d->n_classes || ns != d->n_classes) {
			rc = dlt_error(DLT_EINPUT, "%s: metadata 'target_mean' and 'target_std' do "
				       "not fit %d targets", d->path, d->n_classes);
			goto fail;
		}
		for (int i = 0; i < ns; i++)
			if (!(tstd[i] > 0) || !isfinite(tstd[i]) || !isfinite(d->t_mean[i])) {
				rc = dlt_error(DLT_EINPUT, "%s: metadata 'target_std' must be "
					       "positive", d->path);
				goto fail;
			}
	}
	DLT_TRY(meta_floats(d, &v, "mean", &d->mean, &d->n_stats));
	DLT_TRY(meta_floats(d, &v, "std", &std, &n_std));
	if (n_std != d->n_stats || (d->n_stats && d->features % d->n_stats)) {
		rc = dlt_error(DLT_EINPUT, "%s: metadata 'mean' and 'std' do not fit %d features",
			       d->path, d->features);
		goto fail;
	}
	if (!d->n_stats) {
		if (!(d->mean = dlt_malloc(sizeof(float))) || !(std = dlt_malloc(sizeof(float)))) {
			rc = DLT_ENOMEM;
			goto fail;
		}
		d->mean[0] = 0;
		std[0] = 1;
		d->n_stats = 1;
	}
	for (int i = 0; i < d->n_stats; i++) {
		if (!(std[i] > 0) || !isfinite(std[i]) || !isfinite(d->mean[i])) {
			rc = dlt_error(DLT_EINPUT, "%s: metadata 'std' must be positive", d->path);
			goto fail;
		}
		std[i] = 1 / std[i];
	}
	d->inv_std = std;
	std = NULL;
fail:
	free(std);
	dlt_jval_free(&v);
	return rc;
}

/* The labels: all in [0, n_classes), n_classes from the metadata or
 * the largest label + 1. */
static int check_labels(dlt_dataset *d)
{
	int32_t max = -1;
	for (size_t i = 0; i < d->n; i++) {
		if (d->y[i] < 0)
			return dlt_error(DLT_EINPUT, "%s: label %d of sample %zu is negative",
					 d->path, d->y[i], i);
		if (d->y[i] > max)
			max = d->y[i];
	}
	if (d->n_classes == 0)
		d->n_classes = max + 1;
	if (max >= d->n_classes)
		return dlt_error(DLT_EINPUT, "%s: label %d but num_classes is %d", d->path, max,
				 d->n_classes);
	return 0;
}

/* Multi-hot labels are 0 or 1 */
static int check_multi_hot(const dlt_dataset *d)
{
	const uint8_t *t = d->t;
	size_t n = d->n * (size_t)d->n_classes;
	for (size_t i = 0; i < n; i++)
		if (t[i] > 1)
			return dlt_error(DLT_EINPUT, "%s: label %d of sample %zu is %d, not 0 or 1",
					 d->path, (int)(i % d->n_classes), i / d->n_classes, t[i]);
	return 0;
}

int dlt_dataset_has_targets(const dlt_dataset *d)
{
	return d->y || d->t;
}

int dlt_dataset_load(dlt_dataset *d, const char *path)
{
	dlt_archive *a = NULL;
	const dlt_tensor_info *xi, *yi;
	int rc;
	uint64_t features = 1;

	memset(d, 0, sizeof(*d));
	/* messages name the file as the archive reader does */
	if (!(d->path = dlt_strdup(strcmp(path, "-") ? path : "standard input")))
		return DLT_ENOMEM;
	DLT_TRY(dlt_archive_open(&a, path));
	path = d->path;
	if (!(xi = dlt_archive_find(a, "x"))) {
		rc = dlt_error(DLT_EINPUT, "%s: not a dataset (no tensor 'x')", path);
		goto fail;
	}
	if (xi->dtype != DLT_U8 && xi->dtype != DLT_F32) {
		rc = dlt_error(DLT_EINPUT, "%s: tensor 'x' has dtype %s, expected u8 or f32",
			       path, dlt_dtype_name(xi->dtype));
		goto fail;
	}
	/* no "y": data without labels, to predict; i32 [N] class ids, f32
	 * [N, K] float targets, u8 [N, K] multi-hot labels */
	yi = dlt_archive_find(a, "y");
	if (yi && yi->dtype != DLT_I32 && yi->dtype != DLT_F32 && yi->dtype != DLT_U8) {
		rc = dlt_error(DLT_EINPUT, "%s: tensor 'y' has dtype %s, expected i32 (classes), "
			       "f32 (targets) or u8 (multi-hot labels)", path,
			       dlt_dtype_name(yi->dtype));
		goto fail;
	}
	if (xi->ndim < 2 || xi->ndim > 5 ||
	    (yi && (yi->ndim != (yi->dtype == DLT_I32 ? 1 : 2) || xi->dims[0] != yi->dims[0] ||
		    (yi->ndim == 2 && (yi->dims[1] < 1 || yi->dims[1] > 1 << 20))))) {
		rc = dlt_error(DLT_EINPUT, "%s: tensors 'x' and 'y' must be [N, ...] and [N] "
			       "(i32) or [N, K] (f32, u8)", path);
		goto fail;
	}
	for (int i = 1; i < xi->ndim; i++) {
		features *= xi->dims[i];
		d->shape[i - 1] = (int64_t)xi->dims[i];
	}
	if (xi->dims[0] == 0 || xi->dims[0] > UINT32_MAX || features == 0 || features > 1 << 26) {
		rc = dlt_error(DLT_EINPUT, "%s: tensor 'x' has an unusable shape", path);
		goto fail;
	}
	d->n = xi->dims[0];
	d->features = (int)features;
	d->ndim = xi->ndim - 1;
	d->sample = (dlt_shape){ (int)features, 1, 1 };
	if (d->ndim == 2)
		d->sample = (dlt_shape){ 1, (int)d->shape[0], (int)d->shape[1] };
	else if (d->ndim >= 3)
		d->sample = (dlt_shape){ (int)d->shape[0], (int)d->shape[1],
					 (int)(features / d->shape[0] / d->shape[1]) };
	d->dtype = xi->dtype;
	DLT_TRY(dlt_archive_view(a, xi, &d->x));
	if (!d->x) {
		DLT_TRY(dlt_archive_read_alloc(a, "x", xi->dtype, -1, NULL, &d->x_own));
		d->x = d->x_own;
	}
	if (yi && yi->dtype == DLT_I32) {
		DLT_TRY(dlt_archive_read_alloc(a, "y", DLT_I32, 1, NULL, (void **)&d->y));
	} else if (yi) {
		d->task = yi->dtype == DLT_F32 ? DLT_TASK_REGRESS : DLT_TASK_MULTI;
		d->n_classes = (int)yi->dims[1];
		d->t_dtype = yi->dtype;
		DLT_TRY(dlt_archive_view(a, yi, &d->t));
		if (!d->t) {
			DLT_TRY(dlt_archive_read_alloc(a, "y", yi->dtype, 2, NULL, &d->t_own));
			d->t = d->t_own;
		}
	}
	DLT_TRY(load_stats(d, dlt_archive_meta(a)));
	if (d->y)
		DLT_TRY(check_labels(d));
	if (d->t && d->t_dtype == DLT_U8)
		DLT_TRY(check_multi_hot(d));
	if (d->x_own && (!d->t || d->t_own))
		dlt_archive_close(a);
	else
		d->archive = a;
	return 0;
fail:
	dlt_archive_close(a);
	dlt_dataset_free(d);
	return rc;
}

int dlt_dataset_use_stats(dlt_dataset *d, const dlt_dataset *src)
{
	float *mean, *inv_std;
	size_t n = (size_t)src->n_stats * sizeof(float);
	if (d->features != src->features)
		return dlt_error(DLT_EINPUT, "%s: samples have %d features, but %s has %d",
				 d->path, d->features, src->path, src->features);
	if (!(mean = dlt_malloc(n)) || !(inv_std = dlt_malloc(n))) {
		free(mean);
		return DLT_ENOMEM;
	}
	memcpy(mean, src->mean, n);
	memcpy(inv_std, src->inv_std, n);
	if (src->t_mean && d->task == DLT_TASK_REGRESS && d->n_classes == src->n_classes) {
		size_t tn = (size_t)src->n_classes * sizeof(float);
		float *tm = dlt_malloc(tn), *ts = dlt_malloc(tn);
		if (!tm || !ts) {
			free(tm);
			free(ts);
			free(mean);
			free(inv_std);
			return DLT_ENOMEM;
		}
		memcpy(tm, src->t_mean, tn);
		memcpy(ts, src->t_std, tn);
		free(d->t_mean);
		free(d->t_std);
		d->t_mean = tm;
		d->t_std = ts;
	}
	free(d->mean);
	free(d->inv_std);
	d->mean = mean;
	d->inv_std = inv_std;
	d->n_stats = src->n_stats;
	d->scale = src->scale;
	return 0;
}

void dlt_dataset_free(dlt_dataset *d)
{
	free(d->path);
	free(d->x_own);
	dlt_archive_close(d->archive);
	free(d->y);
	free(d->t_own);
	free(d->t_mean);
	free(d->t_std);
	free(d->mean);
	free(d->inv_std);
	memset(d, 0, sizeof(*d));
}

/* out = (in * scale - mean) * inv_std, the stats of element j being
 * j % ns; one set of stats (the common case) is hoisted out of the loop,
 * which the division by ns kept from vectorising. */
#define NORMALISE(T)									\
	static void normalise_##T(const T *in, float *out, int f, const dlt_dataset *d)	\
	{										\
		const int ns = d->n_stats;						\
		const float scale = d->scale, m0 = d->mean[0], s0 = d->inv_std[0];	\
		if (ns == 1) {								\
			for (int j = 0; j < f; j++)					\
				out[j] = (in[j] * scale - m0) * s0;			\
			return;								\
		}									\
		for (int j = 0; j < f; j++)						\
			out[j] = (in[j] * scale - d->mean[j % ns]) * d->inv_std[j % ns];	\
	}
NORMALISE(uint8_t)
NORMALISE(float)

/* Sample s's float targets (standardised) or multi-hot labels, as floats */
static void gather_targets(const dlt_dataset *d, size_t s, float *out)
{
	const int k = d->n_classes;
	if (d->t_dtype == DLT_U8) {
		const uint8_t *t = (const uint8_t *)d->t + s * k;
		for (int j = 0; j < k; j++)
			out[j] = t[j];
		return;
	}
	const float *t = (const float *)d->t + s * k;
	for (int j = 0; j < k; j++)
		out[j] = d->t_mean ? (t[j] - d->t_mean[j]) / d->t_std[j] : t[j];
}

void dlt_dataset_gather(const dlt_dataset *d, const uint32_t *order, int count, float *x, void *y)
{
	const int f = d->features;
	for (int i = 0; i < count; i++) {
		float *out = x + (size_t)i * f;
		size_t s = order[i];
		if (y && d->t)
			gather_targets(d, s, (float *)y + (size_t)i * d->n_classes);
		else if (y)
			((int32_t *)y)[i] = d->y ? d->y[s] : -1;
		if (d->dtype == DLT_U8)
			normalise_uint8_t((const uint8_t *)d->x + s * f, out, f, d);
		else
			normalise_float((const float *)d->x + s * f, out, f, d);
	}
}
