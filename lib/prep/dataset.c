/* From a dataset to archives: shuffle, split, normalisation stats,
 * metadata.  A dataset in memory is written whole; samples still in
 * their file (read_x) are streamed a chunk at a time where nothing needs
 * them all at once. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prep.h"

void dlt_prep_data_free(dlt_prep_data *d)
{
	if (d->classes)
		for (int i = 0; i < d->num_classes; i++)
			free(d->classes[i]);
	free(d->classes);
	if (d->t_names)
		for (int i = 0; i < d->t_width; i++)
			free(d->t_names[i]);
	free(d->t_names);
	free(d->x);
	free(d->y);
	free(d->t);
	if (d->x_close)
		d->x_close(d->x_ctx);
	memset(d, 0, sizeof(*d));
}

size_t dlt_prep_split_count(size_t n, double split)
{
	return split > 0 ? (size_t)llround((double)n * split) : n;
}

struct stats {
	size_t n;		/* one mean and std per element of a sample, mod n */
	double *mean, *std;
};

/* A std of 0 (a constant pixel or column) would divide by zero; 1 leaves
 * the centred value, 0. */
static double std_of(double ss, size_t count, double scale)
{
	return ss == 0 ? 1 : sqrt(ss / (double)count) * scale;
}

static void hist_add(uint64_t hist[256], const uint8_t *x, size_t count)
{
	for (size_t i = 0; i < count; i++)
		hist[x[i]]++;
}

/* u8 images: one global mean and std, from a histogram, so the sums are
 * exact integers, 60000 images cost one pass, and a stream of them one
 * pass of its chunks. */
static void stats_hist(struct stats *s, const uint64_t hist[256], size_t count, double scale)
{
	double sum = 0, ss = 0, mean;

	for (int v = 0; v < 256; v++)
		sum += (double)hist[v] * v;
	mean = sum / (double)count;
	for (int v = 0; v < 256; v++)
		ss += (double)hist[v] * (v - mean) * (v - mean);
	s->mean[0] = mean * scale;
	s->std[0] = std_of(ss, count, scale);
}

static void stats_u8(struct stats *s, const uint8_t *x, size_t count, double scale)
{
	uint64_t hist[256] = { 0 };
	hist_add(hist, x, count);
	stats_hist(s, hist, count, scale);
}

/* f32: two passes in double, the first summing differences from the first
 * row, so a constant column gets its value as mean and exactly 0 as
 * variance instead of a rounding error that would blow it up. */
static void stats_f32(struct stats *s, const float *x, size_t count, double scale)
{
	size_t k = s->n, rows = count / k;
	double *ss = s->std;	/* sums of squares, turned into stds at the end */

	for (size_t j = 0; j < k; j++)
		s->mean[j] = ss[j] = 0;
	for (size_t i = 0; i < count; i++)
		s->mean[i % k] += (double)x[i] - x[i % k];
	for (size_t j = 0; j < k; j++)
		s->mean[j] = x[j] + s->mean[j] / (double)rows;
	for (size_t i = 0; i < count; i++) {
		double dv = x[i] - s->mean[i % k];
		ss[i % k] += dv * dv;
	}
	for (size_t j = 0; j < k; j++) {
		s->mean[j] *= scale;
		s->std[j] = std_of(ss[j], rows, scale);
	}
}

/* Bytes of one sample's float targets or multi-hot labels */
static size_t t_size(const dlt_prep_data *d)
{
	return d->t_dtype ? (size_t)d->t_width * dlt_dtype_size(d->t_dtype) : 0;
}

/* Room for the stats of d's samples */
static int stats_alloc(struct stats *s, const dlt_prep_data *d)
{
	/* images: one global value; a row of features: one per column */
	s->n = d->dtype == DLT_F32 && d->ndim == 1 ? d->dims[0] : 1;
	s->mean = dlt_calloc(s->n, sizeof(double));
	s->std = dlt_calloc(s->n, sizeof(double));
	if (!s->mean || !s->std)
		return DLT_ENOMEM;
	return 0;
}

static int stats(struct stats *s, const dlt_prep_data *d, const void *x, size_t n)
{
	size_t count = n * (d->sample_size / dlt_dtype_size(d->dtype));
	int rc;

	if ((rc = stats_alloc(s, d)) < 0)
		return rc;
	if (d->dtype == DLT_U8)
		stats_u8(s, x, count, d->scale);
	else
		stats_f32(s, x, count, d->scale);
	return 0;
}

static void meta_doubles(dlt_json *j, const char *key, const double *v, size_t n)
{
	dlt_json_array_begin(j, key);
	for (size_t i = 0; i < n; i++)
		dlt_json_num(j, NULL, v[i]);
	dlt_json_array_end(j);
}

static void meta_names(dlt_json *j, const char *key, char *const *names, int n)
{
	dlt_json_array_begin(j, key);
	for (int i = 0; i < n; i++)
		dlt_json_str(j, NULL, names[i]);
	dlt_json_array_end(j);
}

/* ts: the float targets' stats (a mean and std per column), or NULL */
static int meta(dlt_json *j, const dlt_prep_data *d, size_t n, const struct stats *s,
		const struct stats *ts)
{
	dlt_json_begin(j);
	dlt_json_str(j, "kind", "dataset");
	dlt_json_str(j, "source", d->source);
	dlt_json_int(j, "n", (long long)n);
	dlt_json_array_begin(j, "shape");
	for (int i = 0; i < d->ndim; i++)
		dlt_json_int(j, NULL, (long long)d->dims[i]);
	dlt_json_array_end(j);
	if (d->y)
		dlt_json_int(j, "num_classes", d->num_classes);
	if (d->classes)
		meta_names(j, "classes", d->classes, d->num_classes);
	if (d->t_names)
		meta_names(j, d->t_dtype == DLT_F32 ? "targets" : "labels", d->t_names, d->t_width);
	dlt_json_num(j, "scale", d->scale);
	meta_doubles(j, "mean", s->mean, s->n);
	meta_doubles(j, "std", s->std, s->n);
	if (ts) {
		meta_doubles(j, "target_mean", ts->mean, ts->n);
		meta_doubles(j, "target_std", ts->std, ts->n);
	}
	dlt_json_end(j);
	return dlt_json_ok(j);
}

/* Writes samples [0, n) of x and y as one archive, left open for the
 * caller to close once every part is written. */
static int write_part(dlt_archive_writer **w, const char *path, const dlt_prep_data *d,
		      const void *x, const int32_t *y, const void *t, size_t n,
		      const struct stats *s, const struct stats *ts, int codec)
{
	uint64_t dims[DLT_MAX_DIMS];
	dlt_json j = { 0 };
	int rc;

	dims[0] = n;
	memcpy(dims + 1, d->dims, (size_t)d->ndim * sizeof(*dims));
	DLT_TRY(dlt_archive_create(w, path));
	DLT_TRY(dlt_archive_write_tensor(*w, "x", d->dtype, d->ndim + 1, dims, x, codec, 0));
	if (y)
		DLT_TRY(dlt_archive_write_tensor(*w, "y", DLT_I32, 1, dims, y, codec, 0));
	if (t) {
		uint64_t tdims[2] = { n, (uint64_t)d->t_width };
		DLT_TRY(dlt_archive_write_tensor(*w, "y", d->t_dtype, 2, tdims, t, codec, 0));
	}
	DLT_TRY(meta(&j, d, n, s, ts));
	DLT_TRY(dlt_archive_write_meta(*w, j.buf.data));
fail:
	dlt_json_free(&j);
	return rc;
}

/* The samples in permuted order, in new buffers. */
static int gather(const dlt_prep_data *d, const uint32_t *perm, void **x, int32_t **y,
		  void **t)
{
	size_t ts = t_size(d);
	if (!(*x = dlt_calloc(d->n, d->sample_size)) ||
	    (d->y && !(*y = dlt_calloc(d->n, sizeof(**y)))) ||
	    (d->t && !(*t = dlt_calloc(d->n, ts))))
		return DLT_ENOMEM;
	for (size_t i = 0; i < d->n; i++) {
		memcpy((char *)*x + i * d->sample_size,
		       (const char *)d->x + perm[i] * d->sample_size, d->sample_size);
		if (d->y)
			(*y)[i] = d->y[perm[i]];
		if (d->t)
			memcpy((char *)*t + i * ts, (const char *)d->t + perm[i] * ts, ts);
	}
	return 0;
}

/* The float targets' mean and std per column, of the first part: the
 * trainer standardises them with these, and dlt-infer turns predictions
 * back into the targets' units. */
static int target_stats(struct stats *ts, const dlt_prep_data *d, const float *t, size_t n)
{
	ts->n = (size_t)d->t_width;
	ts->mean = dlt_calloc(ts->n, sizeof(double));
	ts->std = dlt_calloc(ts->n, sizeof(double));
	if (!ts->mean || !ts->std)
		return DLT_ENOMEM;
	stats_f32(ts, t, n * ts->n, 1);
	return 0;
}

static int check_opts(const dlt_prep_data *d, const dlt_prep_opts *o, size_t n1)
{
	if (d->n > UINT32_MAX)
		return dlt_error(DLT_EINPUT, "%zu samples: at most %u", d->n, UINT32_MAX);
	if (o->split > 0 && (n1 == 0 || n1 == d->n))
		return dlt_error(DLT_EINPUT, "split %g of %zu samples leaves one part empty",
				 o->split, d->n);
	if (o->out2 && strcmp(o->out, "-") == 0 && strcmp(o->out2, "-") == 0)
		return dlt_error(DLT_EINPUT, "only one output can be standard output");
	return 0;
}

/* Bytes of samples a chunk of a stream holds: a few MiB, so that memory
 * stays small whatever the set's size */
#define STREAM_CHUNK (4u << 20)

/* Samples still in their file, u8, one part, raw: read a chunk at a time
 * into the archive, the histogram for the stats on the way.  y and t are
 * in memory (a label a sample). */
static int write_stream(const dlt_prep_data *d, const dlt_prep_opts *o)
{
	uint64_t dims[DLT_MAX_DIMS], hist[256] = { 0 };
	size_t per = STREAM_CHUNK / d->sample_size ? STREAM_CHUNK / d->sample_size : 1;
	dlt_archive_writer *w = NULL;
	struct stats s = { 0 };
	dlt_json j = { 0 };
	uint8_t *buf;
	int rc;

	if (!(buf = dlt_malloc(per * d->sample_size)))
		return DLT_ENOMEM;
	dims[0] = d->n;
	memcpy(dims + 1, d->dims, (size_t)d->ndim * sizeof(*dims));
	DLT_TRY(dlt_archive_create(&w, o->out));
	DLT_TRY(dlt_archive_begin_tensor(w, "x", d->dtype, d->ndim + 1, dims));
	for (size_t i = 0; i < d->n; i += per) {
		size_t k = d->n - i < per ? d->n - i : per;
		DLT_TRY(d->read_x(d->x_ctx, buf, k));
		hist_add(hist, buf, k * d->sample_size);
		DLT_TRY(dlt_archive_write_piece(w, buf, k * d->sample_size));
	}
	DLT_TRY(dlt_archive_end_tensor(w));
	if (d->y)
		DLT_TRY(dlt_archive_write_tensor(w, "y", DLT_I32, 1, dims, d->y, o->codec, 0));
	DLT_TRY(stats_alloc(&s, d));
	stats_hist(&s, hist, d->n * d->sample_size, d->scale);
	DLT_TRY(meta(&j, d, d->n, &s, NULL));
	DLT_TRY(dlt_archive_write_meta(w, j.buf.data));
	rc = dlt_archive_writer_close(w);
	w = NULL;
fail:
	if (w)
		dlt_archive_writer_abort(w);
	dlt_json_free(&j);
	free(s.mean);
	free(s.std);
	free(buf);
	return rc;
}

static int write_data(const dlt_prep_data *d, const dlt_prep_opts *o);

/* Samples still in their file that cannot stream: into memory, then as
 * any other set.  The memory grows with what the file gives, a chunk at a
 * time (doubling), so that a header that claims more than its file holds
 * is found short by read_x before anything of the claimed size is
 * allocated. */
static int write_read_all(const dlt_prep_data *d, const dlt_prep_opts *o)
{
	dlt_prep_data all = *d;
	size_t per = STREAM_CHUNK / d->sample_size ? STREAM_CHUNK / d->sample_size : 1;
	size_t bytes, cap = 0;	/* samples */
	uint8_t *x = NULL, *p;
	int rc = 0;

	if (!dlt_mul_ok(d->n, d->sample_size, &bytes))
		return dlt_error(DLT_EINPUT, "%zu samples of %zu bytes: too large", d->n,
				 d->sample_size);
	for (size_t i = 0; rc == 0 && i < d->n; i += per) {
		size_t k = d->n - i < per ? d->n - i : per;
		if (i + k > cap) {
			cap = i + k > 2 * cap ? i + k : 2 * cap < d->n ? 2 * cap : d->n;
			if (!(p = realloc(x, cap * d->sample_size))) {
				rc = dlt_error(DLT_ENOMEM, "out of memory for %zu bytes of samples (to "
					       "shuffle, split or compress, the set is read into "
					       "memory)", cap * d->sample_size);
				break;
			}
			x = p;
		}
		rc = d->read_x(d->x_ctx, x + i * d->sample_size, k);
	}
	if (rc == 0 && !x && !(x = dlt_malloc(1)))	/* no samples */
		rc = DLT_ENOMEM;
	if (rc == 0) {
		all.x = x;
		all.read_x = NULL;
		rc = write_data(&all, o);
	}
	free(x);
	return rc;
}

int dlt_prep_write(const dlt_prep_data *d, const dlt_prep_opts *o)
{
	int rc;

	if (d->x || !d->read_x)
		return write_data(d, o);
	DLT_TRY(check_opts(d, o, dlt_prep_split_count(d->n, o->split)));
	if (!o->shuffle && !o->out2 && o->codec == DLT_RAW && d->dtype == DLT_U8 && !d->t)
		return write_stream(d, o);
	return write_read_all(d, o);
fail:
	return rc;
}

static int write_data(const dlt_prep_data *d, const dlt_prep_opts *o)
{
	size_t n1 = dlt_prep_split_count(d->n, o->split);
	dlt_archive_writer *w1 = NULL, *w2 = NULL;
	struct stats s = { 0 }, ts = { 0 };
	uint32_t *perm = NULL;
	void *xs = NULL, *tsamples = NULL;
	int32_t *ys = NULL;
	const void *x = d->x, *t = d->t;
	const int32_t *y = d->y;
	const size_t tb = t_size(d);
	int rc;

	DLT_TRY(check_opts(d, o, n1));
	if (o->shuffle) {
		dlt_rng r;
		if (!(perm = dlt_calloc(d->n, sizeof(*perm)))) {
			rc = DLT_ENOMEM;
			goto fail;
		}
		dlt_rng_init(&r, o->seed, 0);
		dlt_rng_permute(&r, perm, d->n);
		DLT_TRY(gather(d, perm, &xs, &ys, &tsamples));
		x = xs;
		y = ys;
		t = tsamples;
	}
	DLT_TRY(stats(&s, d, x, n1));
	if (t && d->t_dtype == DLT_F32)
		DLT_TRY(target_stats(&ts, d, t, n1));
	DLT_TRY(write_part(&w1, o->out, d, x, y, t, n1, &s, ts.n ? &ts : NULL, o->codec));
	if (o->out2)
		DLT_TRY(write_part(&w2, o->out2, d, (const char *)x + n1 * d->sample_size,
				   y ? y + n1 : NULL, t ? (const char *)t + n1 * tb : NULL,
				   d->n - n1, &s, ts.n ? &ts : NULL, o->codec));
	rc = dlt_archive_writers_close(w1, w2, o->out);
	w1 = w2 = NULL;
fail:
	if (w1)
		dlt_archive_writer_abort(w1);
	if (w2)
		dlt_archive_writer_abort(w2);
	free(s.mean);
	free(s.std);
	free(ts.mean);
	free(ts.std);
	free(perm);
	free(xs);
	free(ys);
	free(tsamples);
	return rc;
}
