#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "archive/archive.h"
#include "kernels/common/math.h"
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

/* The labels of part p: all in [0, n_classes), n_classes from the
 * metadata or the largest label + 1.  They are read where they lie. */
static int check_labels(dlt_dataset *d, const dlt_dataset_part *p)
{
	int32_t max = -1;
	for (size_t i = 0; i < p->n; i++) {
		if (p->y[i] < 0)
			return dlt_error(DLT_EINPUT, "%s: label %d of sample %zu is negative",
					 p->path, p->y[i], i);
		if (p->y[i] > max)
			max = p->y[i];
	}
	if (d->n_classes == 0)
		d->n_classes = max + 1;
	if (max >= d->n_classes)
		return dlt_error(DLT_EINPUT, "%s: label %d but num_classes is %d", p->path, max,
				 d->n_classes);
	return 0;
}

/* Multi-hot labels are 0 or 1 */
static int check_multi_hot(const dlt_dataset *d, const dlt_dataset_part *p)
{
	const uint8_t *t = p->t;
	size_t n = p->n * (size_t)d->n_classes;
	for (size_t i = 0; i < n; i++)
		if (t[i] > 1)
			return dlt_error(DLT_EINPUT, "%s: label %d of sample %zu is %d, not 0 or 1",
					 p->path, (int)(i % d->n_classes), i / d->n_classes, t[i]);
	return 0;
}

int dlt_dataset_has_targets(const dlt_dataset *d)
{
	return d->targets || d->y || d->t;
}

static void source_gather(const dlt_source *src, const uint32_t *order, int n, void *x, void *y);
static void source_close(dlt_source *src);

/* The dataset as a source: its description from the fields above */
static void set_source(dlt_dataset *d)
{
	dlt_source *s = &d->src;
	memset(s, 0, sizeof(*s));
	s->n = d->n;
	s->ndim = d->ndim;
	memcpy(s->dims, d->shape, sizeof(s->dims));
	s->dtype = d->dtype;
	if (dlt_dataset_has_targets(d) && d->task == DLT_TASK_CLASS) {
		s->t_dtype = DLT_I32;
	} else if (dlt_dataset_has_targets(d)) {
		s->t_dtype = DLT_F32;
		s->t_ndim = 1;
		s->t_dims[0] = d->n_classes;
	}
	s->gather = source_gather;
	s->close = source_close;
}

/* One archive into d, as its only part.  x is viewed in the archive's
 * mapping when stored raw, and so are the targets (class ids when
 * 4-byte aligned, as the archive's 8-byte records are); a compressed
 * tensor is read into a copy. */
static int load_one(dlt_dataset *d, const char *path)
{
	dlt_dataset_part *p;
	dlt_archive *a = NULL;
	const dlt_tensor_info *xi, *yi;
	int rc;
	uint64_t features = 1;

	memset(d, 0, sizeof(*d));
	if (!(d->parts = p = dlt_calloc(1, sizeof(*p))))
		return DLT_ENOMEM;
	d->n_parts = 1;
	/* messages name the file as the archive reader does */
	if (!(d->path = dlt_strdup(strcmp(path, "-") ? path : "standard input")) ||
	    !(p->path = dlt_strdup(d->path))) {
		rc = DLT_ENOMEM;
		goto fail;
	}
	DLT_TRY(dlt_archive_open(&a, path));
	p->archive = a;
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
	d->n = p->n = xi->dims[0];
	d->features = (int)features;
	d->ndim = xi->ndim - 1;
	d->dtype = xi->dtype;
	set_source(d);
	d->sample = dlt_source_shape(&d->src);
	DLT_TRY(dlt_archive_view(a, xi, &p->x));
	if (!p->x) {
		DLT_TRY(dlt_archive_read_alloc(a, "x", xi->dtype, -1, NULL, &p->x_own));
		p->x = p->x_own;
	}
	if (yi && yi->dtype == DLT_I32) {
		const void *v;
		DLT_TRY(dlt_archive_view(a, yi, &v));
		if (v && (uintptr_t)v % sizeof(int32_t) == 0) {
			p->y = v;
		} else {
			DLT_TRY(dlt_archive_read_alloc(a, "y", DLT_I32, 1, NULL, (void **)&p->y_own));
			p->y = p->y_own;
		}
	} else if (yi) {
		d->task = yi->dtype == DLT_F32 ? DLT_TASK_REGRESS : DLT_TASK_MULTI;
		d->n_classes = (int)yi->dims[1];
		d->t_dtype = yi->dtype;
		DLT_TRY(dlt_archive_view(a, yi, &p->t));
		if (p->t && yi->dtype == DLT_F32 && (uintptr_t)p->t % sizeof(float))
			p->t = NULL;
		if (!p->t) {
			DLT_TRY(dlt_archive_read_alloc(a, "y", yi->dtype, 2, NULL, &p->t_own));
			p->t = p->t_own;
		}
	}
	d->targets = yi != NULL;
	DLT_TRY(load_stats(d, dlt_archive_meta(a)));
	if (p->y)
		DLT_TRY(check_labels(d, p));
	if (p->t && d->t_dtype == DLT_U8)
		DLT_TRY(check_multi_hot(d, p));
	d->x = p->x;
	d->y = p->y;
	d->t = p->t;
	set_source(d);
	return 0;
fail:
	dlt_dataset_free(d);
	return rc;
}

int dlt_dataset_load(dlt_dataset *d, const char *path)
{
	return load_one(d, path);
}

/* "u8 [1, 28, 28]" */
static void sample_text(char *s, size_t size, const dlt_dataset *d)
{
	int k = snprintf(s, size, "%s [", dlt_dtype_name(d->dtype));
	for (int i = 0; i < d->ndim && k > 0 && (size_t)k < size; i++)
		k += snprintf(s + k, size - k, i ? ", %lld" : "%lld", (long long)d->shape[i]);
	if (k > 0 && (size_t)k < size)
		snprintf(s + k, size - k, "]");
}

/* "class ids", "3 float targets", "5 0/1 labels", "no targets" */
static void target_text(char *s, size_t size, const dlt_dataset *d)
{
	if (!dlt_dataset_has_targets(d))
		snprintf(s, size, "no targets");
	else if (d->task == DLT_TASK_CLASS)
		snprintf(s, size, "class ids");
	else
		snprintf(s, size, "%d %s%s", d->n_classes,
			 d->task == DLT_TASK_REGRESS ? "float target" : "0/1 label",
			 d->n_classes == 1 ? "" : "s");
}

/* Part b of a list agrees with the first, a: the same samples and the
 * same kind of target */
static int check_agree(const dlt_dataset *a, const dlt_dataset *b)
{
	char sa[160], sb[160];
	int same = a->dtype == b->dtype && a->ndim == b->ndim &&
		   !memcmp(a->shape, b->shape, sizeof(a->shape));
	if (!same) {
		sample_text(sa, sizeof(sa), a);
		sample_text(sb, sizeof(sb), b);
		return dlt_error(DLT_EINPUT, "%s: samples of %s, but %s has samples of %s",
				 b->path, sb, a->path, sa);
	}
	if (dlt_dataset_has_targets(a) != dlt_dataset_has_targets(b) || a->task != b->task ||
	    (a->task != DLT_TASK_CLASS && a->n_classes != b->n_classes)) {
		target_text(sa, sizeof(sa), a);
		target_text(sb, sizeof(sb), b);
		return dlt_error(DLT_EINPUT, "%s: %s, but %s has %s", b->path, sb, a->path, sa);
	}
	return 0;
}

int dlt_dataset_load_list(dlt_dataset *d, char *const *paths, int n)
{
	dlt_dataset *one;
	dlt_dataset_part *parts;
	size_t total = 0;
	int rc = 0, loaded = 0;

	if (n == 1)
		return load_one(d, paths[0]);
	memset(d, 0, sizeof(*d));
	if (n < 1)
		return dlt_error(DLT_EINPUT, "no dataset archive");
	if (!(one = dlt_calloc((size_t)n, sizeof(*one))) ||
	    !(parts = dlt_calloc((size_t)n, sizeof(*parts)))) {
		free(one);
		return DLT_ENOMEM;
	}
	for (; loaded < n; loaded++) {
		DLT_TRY(load_one(&one[loaded], paths[loaded]));
		if (loaded)
			DLT_TRY(check_agree(&one[0], &one[loaded]));
		total += one[loaded].n;
	}
	if (total > UINT32_MAX) {
		rc = dlt_error(DLT_EINPUT, "%s and the rest: %zu samples, at most %u", paths[0],
			       total, UINT32_MAX);
		goto fail;
	}
	/* the first archive's stats and description, every archive's part */
	*d = one[0];
	total = 0;
	for (int i = 0; i < n; i++) {
		parts[i] = one[i].parts[0];
		parts[i].first = total;
		total += parts[i].n;
		if (one[i].n_classes > d->n_classes)
			d->n_classes = one[i].n_classes;
		free(one[i].parts);
		one[i].parts = NULL;
		one[i].n_parts = 0;
		if (i)
			dlt_dataset_free(&one[i]);
	}
	d->parts = parts;
	d->n_parts = n;
	d->n = total;
	d->x = NULL;
	d->y = NULL;
	d->t = NULL;
	set_source(d);
	free(one);
	return 0;
fail:
	/* one[loaded] failed to load (and is cleared) or to agree */
	for (int i = 0; i <= loaded && i < n; i++)
		dlt_dataset_free(&one[i]);
	free(one);
	free(parts);
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
	for (int i = 0; i < d->n_parts; i++) {
		dlt_dataset_part *p = &d->parts[i];
		free(p->path);
		free(p->x_own);
		free(p->y_own);
		free(p->t_own);
		dlt_archive_close(p->archive);
	}
	free(d->parts);
	free(d->path);
	free(d->t_mean);
	free(d->t_std);
	free(d->mean);
	free(d->inv_std);
	memset(d, 0, sizeof(*d));
}

dlt_normalise dlt_dataset_normalise(const dlt_dataset *d)
{
	return (dlt_normalise){ .scale = d->scale, .mean = d->mean, .inv_std = d->inv_std,
				.n_stats = d->n_stats, .t_mean = d->t_mean, .t_std = d->t_std,
				.t_k = d->n_classes };
}

size_t dlt_source_features(const dlt_source *src)
{
	size_t f = 1;
	for (int i = 0; i < src->ndim; i++)
		f *= (size_t)src->dims[i];
	return f;
}

size_t dlt_source_sample_bytes(const dlt_source *src)
{
	return dlt_source_features(src) * dlt_dtype_size(src->dtype);
}

size_t dlt_source_target_bytes(const dlt_source *src)
{
	size_t k = 1;
	for (int i = 0; i < src->t_ndim; i++)
		k *= (size_t)src->t_dims[i];
	return k * (src->t_dtype ? dlt_dtype_size(src->t_dtype) : sizeof(int32_t));
}

dlt_shape dlt_source_shape(const dlt_source *src)
{
	int f = (int)dlt_source_features(src);
	if (src->ndim == 2)
		return (dlt_shape){ 1, (int)src->dims[0], (int)src->dims[1] };
	if (src->ndim >= 3)
		return (dlt_shape){ (int)src->dims[0], (int)src->dims[1],
				    (int)(f / src->dims[0] / src->dims[1]) };
	return (dlt_shape){ f, 1, 1 };
}

void dlt_source_close(dlt_source *src)
{
	if (src && src->close)
		src->close(src);
}

/* The part that holds sample s of the dataset; *s becomes its index
 * there.  Parts are few (the archives listed), so a binary search over
 * their first samples is all. */
static const dlt_dataset_part *part_of(const dlt_dataset *d, size_t *s)
{
	int lo = 0, hi = d->n_parts - 1;
	while (lo < hi) {
		int mid = (lo + hi + 1) / 2;
		if (d->parts[mid].first <= *s)
			lo = mid;
		else
			hi = mid - 1;
	}
	*s -= d->parts[lo].first;
	return &d->parts[lo];
}

/* out = (in * scale - mean) * inv_std, the stats of element j being
 * j % ns, then rounded to d->round (bf16 and fp16 training: the model's
 * input, dlt_round_prec's bits; f32: not) while the sample's floats are
 * in L1, rather than in a pass of its own over the batch (a rounding in
 * the first loop did not vectorise: 20x slower for fp16); one set of
 * stats (the common case) is hoisted out of the loop, which the division
 * by ns kept from vectorising.  In AVX-512 and AVX2 clones (the loader's
 * thread shares the cores with the step's: scalar, it took 8% of one in
 * an MLP's step), without contraction into FMA: the same bits in every
 * clone. */
#define NORMALISE(T)									\
	__attribute__((target_clones("avx512f", "avx2", "default"),			\
		       optimize("fp-contract=off")))					\
	static void normalise_##T(const T *in, float *out, int f, const dlt_normalise *d)	\
	{										\
		const int ns = d->n_stats;						\
		const float scale = d->scale, m0 = d->mean[0], s0 = d->inv_std[0];	\
		if (ns == 1) {								\
			_Pragma("omp simd")						\
			for (int j = 0; j < f; j++)					\
				out[j] = (in[j] * scale - m0) * s0;			\
		} else {								\
			for (int j = 0; j < f; j++)					\
				out[j] = (in[j] * scale - d->mean[j % ns]) * d->inv_std[j % ns];	\
		}									\
		if (d->round == DLT_PREC_BF16) {					\
			_Pragma("omp simd")						\
			for (int j = 0; j < f; j++)					\
				out[j] = dlt_round_bf16(out[j]);			\
		} else if (d->round == DLT_PREC_F16) {					\
			_Pragma("omp simd")						\
			for (int j = 0; j < f; j++)					\
				out[j] = dlt_round_f16(out[j]);				\
		}									\
	}
NORMALISE(uint8_t)
NORMALISE(float)

/* Samples as their values: token ids and the like, no stats */
#define AS_FLOATS(T)									\
	static void floats_##T(const T *in, float *out, size_t n)			\
	{										\
		for (size_t j = 0; j < n; j++)						\
			out[j] = (float)in[j];						\
	}
AS_FLOATS(uint8_t)
AS_FLOATS(float)
AS_FLOATS(uint16_t)
AS_FLOATS(uint32_t)

void dlt_normalise_samples(const dlt_normalise *nm, const dlt_source *src, const void *raw,
			   int n, float *x)
{
	const size_t f = dlt_source_features(src), count = f * (size_t)n;
	if (!nm) {
		switch (src->dtype) {
		case DLT_U8: floats_uint8_t(raw, x, count); break;
		case DLT_F32: floats_float(raw, x, count); break;
		/* token ids stay i32, in the floats' place: the embedding
		 * that reads them takes them so (nn.c) */
		case DLT_I32: memcpy(x, raw, count * sizeof(int32_t)); break;
		case DLT_U16: floats_uint16_t(raw, x, count); break;
		case DLT_U32: floats_uint32_t(raw, x, count); break;
		}
		return;
	}
	for (int i = 0; i < n; i++) {
		if (src->dtype == DLT_U8)
			normalise_uint8_t((const uint8_t *)raw + i * f, x + i * f, (int)f, nm);
		else
			normalise_float((const float *)raw + i * f, x + i * f, (int)f, nm);
	}
}

void dlt_normalise_targets(const dlt_normalise *nm, const dlt_source *src, void *y, int n)
{
	const int k = nm ? nm->t_k : 0;
	float *t = y;
	if (!nm || !nm->t_mean || src->t_dtype != DLT_F32 || src->t_dims[0] != k)
		return;
	for (int i = 0; i < n; i++, t += k)
		for (int j = 0; j < k; j++)
			t[j] = (t[j] - nm->t_mean[j]) / nm->t_std[j];
}

/* Sample s's float targets or multi-hot labels, as floats */
static void gather_targets(const dlt_dataset *d, const dlt_dataset_part *p, size_t s, float *out)
{
	const int k = d->n_classes;
	if (d->t_dtype == DLT_U8) {
		const uint8_t *t = (const uint8_t *)p->t + s * k;
		for (int j = 0; j < k; j++)
			out[j] = t[j];
		return;
	}
	memcpy(out, (const float *)p->t + s * k, (size_t)k * sizeof(float));
}

static void source_gather(const dlt_source *src, const uint32_t *order, int n, void *x, void *y)
{
	const dlt_dataset *d = (const dlt_dataset *)src;	/* its first member */
	const size_t sb = dlt_source_sample_bytes(src);
	for (int i = 0; i < n; i++) {
		size_t s = order[i];
		const dlt_dataset_part *p = part_of(d, &s);
		memcpy((char *)x + i * sb, (const char *)p->x + s * sb, sb);
		if (y && d->task != DLT_TASK_CLASS && p->t)
			gather_targets(d, p, s, (float *)y + (size_t)i * d->n_classes);
		else if (y)
			((int32_t *)y)[i] = p->y ? p->y[s] : -1;
	}
}

/* The dataset's memory is the caller's (dlt_dataset_free) */
static void source_close(dlt_source *src)
{
	(void)src;
}

void dlt_dataset_gather(const dlt_dataset *d, const uint32_t *order, int count, float *x, void *y)
{
	const dlt_normalise nm = dlt_dataset_normalise(d);
	const int f = d->features;
	for (int i = 0; i < count; i++) {
		float *out = x + (size_t)i * f;
		size_t s = order[i];
		const dlt_dataset_part *p = part_of(d, &s);
		if (y && d->task != DLT_TASK_CLASS && p->t) {
			gather_targets(d, p, s, (float *)y + (size_t)i * d->n_classes);
			dlt_normalise_targets(&nm, &d->src, (float *)y + (size_t)i * d->n_classes, 1);
		} else if (y) {
			((int32_t *)y)[i] = p->y ? p->y[s] : -1;
		}
		if (d->dtype == DLT_U8)
			normalise_uint8_t((const uint8_t *)p->x + s * f, out, f, &nm);
		else
			normalise_float((const float *)p->x + s * f, out, f, &nm);
	}
}
