/* Checkpoints: write and read the state of a run (format in ckpt.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "archive/archive.h"
#include "prep/tokens.h"
#include "train/ckpt.h"

/* Optimiser state tensors are named after their param. */
static void optim_name(char *out, size_t n, const char *moment, const char *param)
{
	snprintf(out, n, "optim.%s/%s", moment, param);
}

static void write_input(dlt_json *j, const dlt_dataset *d)
{
	dlt_json_object_begin(j, "input");
	dlt_json_array_begin(j, "shape");
	dlt_json_int(j, NULL, d->sample.c);
	dlt_json_int(j, NULL, d->sample.h);
	dlt_json_int(j, NULL, d->sample.w);
	dlt_json_array_end(j);
	dlt_json_int(j, "num_classes", d->n_classes);
	dlt_json_f32(j, "scale", d->scale);
	dlt_json_array_begin(j, "mean");
	for (int i = 0; i < d->n_stats; i++)
		dlt_json_f32(j, NULL, d->mean[i]);
	dlt_json_array_end(j);
	/* 1 / inv_std in double reads back to the same float inv_std */
	dlt_json_array_begin(j, "std");
	for (int i = 0; i < d->n_stats; i++)
		dlt_json_num(j, NULL, 1.0 / d->inv_std[i]);
	dlt_json_array_end(j);
	if (d->task != DLT_TASK_CLASS)
		dlt_json_str(j, "task", d->task == DLT_TASK_REGRESS ? "regression" : "multilabel");
	if (d->t_mean) {
		dlt_json_array_begin(j, "target_mean");
		for (int i = 0; i < d->n_classes; i++)
			dlt_json_f32(j, NULL, d->t_mean[i]);
		dlt_json_array_end(j);
		dlt_json_array_begin(j, "target_std");
		for (int i = 0; i < d->n_classes; i++)
			dlt_json_f32(j, NULL, d->t_std[i]);
		dlt_json_array_end(j);
	}
	dlt_json_end(j);
}

static void write_sums(dlt_json *j, const char *key, const double *v)
{
	dlt_json_array_begin(j, key);
	for (int i = 0; i < DLT_TRAIN_SUMS; i++)
		dlt_json_num(j, NULL, v[i]);
	dlt_json_array_end(j);
}

/* The metadata of a checkpoint, or with st NULL of a model file. */
static int write_meta(dlt_archive_writer *w, const dlt_config *c, const dlt_dataset *d,
		      const dlt_ckpt_state *st, long long step)
{
	dlt_buf yaml = { 0 };
	dlt_json j;
	int rc;

	if ((rc = dlt_config_write_yaml(c, &yaml)) < 0)
		return rc;
	dlt_json_begin(&j);
	dlt_json_str(&j, "kind", st ? "checkpoint" : "model");
	dlt_json_int(&j, "format", DLT_CKPT_FORMAT);
	dlt_json_int(&j, "step", step);
	if (st) {
		dlt_json_int(&j, "epoch", st->epoch);
		dlt_json_int(&j, "batch", st->batch);
		dlt_json_int(&j, "epochs", st->epochs);
	}
	dlt_json_str(&j, "config", yaml.data);
	write_input(&j, d);
	/* a language model's tokenizer, as a token archive holds it, so that
	 * dlt-infer encodes and decodes as the training data did */
	if (d->tokenizer && (rc = dlt_tokenizer_write(d->tokenizer, w, &j)) < 0) {
		dlt_json_free(&j);
		dlt_buf_free(&yaml);
		return rc;
	}
	if (!st)
		goto end;
	dlt_json_num(&j, "loss_scale", st->loss_scale);
	dlt_json_int(&j, "scale_clean", st->scale_clean);
	dlt_json_int(&j, "skipped", st->skipped);
	if (st->have_best) {
		dlt_json_object_begin(&j, "best");
		dlt_json_str(&j, "metric", c->ckpt.best);
		dlt_json_num(&j, "value", st->best);
		dlt_json_int(&j, "step", st->best_step);
		dlt_json_end(&j);
	}
	dlt_json_object_begin(&j, "sums");
	dlt_json_num(&j, "epoch_loss", st->ep_loss);
	if (d->task == DLT_TASK_CLASS)
		dlt_json_int(&j, "epoch_correct", (long long)st->ep_m[0]);
	else
		write_sums(&j, "epoch_metrics", st->ep_m);
	dlt_json_int(&j, "epoch_samples", st->ep_samples);
	dlt_json_num(&j, "window_loss", st->win_loss);
	if (d->task == DLT_TASK_CLASS)
		dlt_json_int(&j, "window_correct", (long long)st->win_m[0]);
	else
		write_sums(&j, "window_metrics", st->win_m);
	dlt_json_int(&j, "window_samples", st->win_samples);
	dlt_json_end(&j);
	dlt_json_str(&j, "metrics", st->metrics.data ? st->metrics.data : "");
end:
	dlt_json_end(&j);
	if ((rc = dlt_json_ok(&j)) == 0)
		rc = dlt_archive_write_meta(w, j.buf.data);
	dlt_json_free(&j);
	dlt_buf_free(&yaml);
	return rc;
}

static void param_dims(const dlt_param *p, uint64_t dims[4])
{
	for (int d = 0; d < p->ndim; d++)
		dims[d] = (uint64_t)p->dims[d];
}

static int write_optim(dlt_archive_writer *w, const dlt_model *m)
{
	for (int i = 0; i < m->n_params; i++) {
		const dlt_param *p = &m->params[i];
		const float *state[2] = { p->m, p->v };
		static const char *const moment[2] = { "m", "v" };
		uint64_t dims[4];
		char name[96];
		param_dims(p, dims);
		for (int k = 0; k < 2; k++) {
			int rc;
			if (!state[k])
				continue;
			optim_name(name, sizeof(name), moment[k], p->name);
			rc = dlt_archive_write_tensor(w, name, DLT_F32, p->ndim, dims, state[k],
						      DLT_SHUFFLE_ZSTD, 1);
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

int dlt_ckpt_write(const char *path, const dlt_config *c, const dlt_dataset *train,
		   const dlt_model *m, const dlt_ckpt_state *st, long long step)
{
	dlt_archive_writer *w = NULL;
	int rc;
	DLT_TRY(dlt_archive_create(&w, path));
	DLT_TRY(write_meta(w, c, train, st, step));
	DLT_TRY(dlt_model_write(m, w, DLT_SHUFFLE_ZSTD, 1));
	if (st)
		DLT_TRY(write_optim(w, m));
	rc = dlt_archive_writer_close(w);
	w = NULL;
fail:
	if (w)
		dlt_archive_writer_abort(w);
	return rc;
}

/* Sharded runs: the tensors placed ahead, in file order (ckpt.h). */
typedef struct placed {
	int param;		/* in m->params */
	int what;		/* 0: its value, 1: its optim m, 2: its optim v */
	uint64_t data;		/* where its bytes begin in the file */
} placed;

static void placed_name(char *out, size_t n, const dlt_model *m, const placed *t)
{
	static const char *const moment[3] = { NULL, "m", "v" };
	const char *param = m->params[t->param].name;
	if (t->what)
		optim_name(out, n, moment[t->what], param);
	else
		snprintf(out, n, "%s", param);
}

/* Every rank computes the same places from the model's params alone:
 * with weights, each param's value, then with moments each param's m
 * (and v) in turn.  *bytes: the room they take. */
static int layout(const dlt_model *m, int weights, int moments, placed **out, size_t *n,
		  uint64_t *bytes)
{
	size_t cap = (size_t)m->n_params * (size_t)((weights != 0) + moments), k = 0;
	uint64_t at = DLT_ARCHIVE_FIRST_RECORD;
	placed *t;

	*out = NULL;
	*n = 0;
	*bytes = 0;
	if (!(t = dlt_calloc(cap ? cap : 1, sizeof(*t))))
		return DLT_ENOMEM;
	for (int i = 0; weights && i < m->n_params; i++)
		t[k++] = (placed){ i, 0, 0 };
	for (int i = 0; i < m->n_params; i++)
		for (int j = 1; j <= moments; j++)
			t[k++] = (placed){ i, j, 0 };
	for (size_t i = 0; i < k; i++) {
		const dlt_param *p = &m->params[t[i].param];
		uint64_t dims[4], size, data;
		char name[96];
		placed_name(name, sizeof(name), m, &t[i]);
		param_dims(p, dims);
		if (!(size = dlt_archive_raw_record_size(name, DLT_F32, p->ndim, dims, &data))) {
			free(t);
			return dlt_error(DLT_EINPUT, "tensor '%s' cannot be written", name);
		}
		t[i].data = at + data;
		at += size;
	}
	*out = t;
	*n = k;
	*bytes = at - DLT_ARCHIVE_FIRST_RECORD;
	return 0;
}

struct dlt_ckpt_writer {
	dlt_archive_writer *w;
	char *tmp;		/* the temporary file, an absolute path */
	int weights, moments;
};

void dlt_ckpt_shards_abort(dlt_ckpt_writer *k)
{
	if (!k)
		return;
	dlt_archive_writer_abort(k->w);
	free(k->tmp);
	free(k);
}

const char *dlt_ckpt_shards_temp(const dlt_ckpt_writer *k)
{
	return k->tmp;
}

int dlt_ckpt_shards_create(dlt_ckpt_writer **out, const char *path, const dlt_model *m,
			   int weights, int moments)
{
	dlt_ckpt_writer *k;
	placed *t = NULL;
	size_t n;
	uint64_t bytes;
	const char *tmp;
	char cwd[PATH_MAX] = "";
	int rc;

	*out = NULL;
	if (!(k = dlt_calloc(1, sizeof(*k))))
		return DLT_ENOMEM;
	k->weights = weights;
	k->moments = moments;
	DLT_TRY(layout(m, weights, moments, &t, &n, &bytes));
	DLT_TRY(dlt_archive_create(&k->w, path));
	DLT_TRY(dlt_archive_reserve(k->w, bytes));
	/* the other ranks may not share this one's working directory */
	tmp = dlt_archive_temp_path(k->w);
	if (tmp[0] != '/' && !getcwd(cwd, sizeof(cwd))) {
		rc = dlt_error_errno(DLT_EIO, "%s: the working directory", path);
		goto fail;
	}
	if (!(k->tmp = dlt_malloc(strlen(cwd) + strlen(tmp) + 2))) {
		rc = DLT_ENOMEM;
		goto fail;
	}
	if (tmp[0] == '/')
		strcpy(k->tmp, tmp);
	else
		sprintf(k->tmp, "%s/%s", cwd, tmp);
	free(t);
	*out = k;
	return 0;
fail:
	free(t);
	dlt_ckpt_shards_abort(k);
	return rc;
}

/* n floats at src, in be's memory, to fd at off: from where they lie on
 * the host, else through buf (cap floats) a piece at a time */
static int put_floats(int fd, const dlt_backend *be, const float *src, size_t n, uint64_t off,
		      float *buf, size_t cap)
{
	if (be->host)
		return dlt_pwrite_all(fd, src, n * sizeof(float), off);
	for (size_t i = 0; i < n; i += cap) {
		size_t k = n - i < cap ? n - i : cap;
		be->download(buf, src + i, k * sizeof(float));
		if (dlt_pwrite_all(fd, buf, k * sizeof(float), off + i * sizeof(float)) != 0)
			return -1;
	}
	return 0;
}

/* the floats a GPU rank's range goes through on its way to the file */
#define SHARD_BOUNCE (1u << 20)

int dlt_ckpt_shards_put(const char *tmp, const dlt_model *m, int weights, int moments,
			const dlt_ckpt_shard *r, int *opened, int *err)
{
	placed *t = NULL;
	float *buf = NULL;
	size_t n;
	uint64_t bytes;
	int fd = -1, rc = 0;

	*opened = 0;
	*err = 0;
	if ((fd = open(tmp, O_WRONLY | O_CLOEXEC)) < 0) {
		*err = errno;
		return dlt_error_errno(DLT_EIO, "%s", tmp);
	}
	*opened = 1;
	if ((rc = layout(m, weights, moments, &t, &n, &bytes)) < 0 ||
	    (!r->be->host && !(buf = dlt_malloc(SHARD_BOUNCE * sizeof(float))))) {
		rc = rc < 0 ? rc : DLT_ENOMEM;
		*err = rc == DLT_ENOMEM ? ENOMEM : EINVAL;
		goto done;
	}
	for (size_t i = 0; i < n; i++) {
		const dlt_param *p = &m->params[t[i].param];
		size_t a = p->off > r->lo ? p->off : r->lo;
		size_t b = p->off + p->n < r->hi ? p->off + p->n : r->hi;
		const float *src;
		if (a >= b)
			continue;
		src = t[i].what == 0 ? r->w + a : (t[i].what == 1 ? r->m : r->v) + (a - r->lo);
		if (put_floats(fd, r->be, src, b - a, t[i].data + (a - p->off) * sizeof(float), buf,
			       SHARD_BOUNCE) != 0) {
			*err = errno;
			rc = dlt_error_errno(DLT_EIO, "%s", tmp);
			goto done;
		}
	}
	if (fsync(fd) != 0) {
		*err = errno;
		rc = dlt_error_errno(DLT_EIO, "%s: fsync", tmp);
	}
done:
	/* closed before the others read: a network file system writes back
	 * on close */
	if (close(fd) != 0 && rc == 0) {
		*err = errno;
		rc = dlt_error_errno(DLT_EIO, "%s", tmp);
	}
	free(buf);
	free(t);
	return rc;
}

int dlt_ckpt_shards_commit(dlt_ckpt_writer *k, const dlt_config *c, const dlt_dataset *train,
			   const dlt_model *m, const dlt_ckpt_state *st, long long step)
{
	placed *t = NULL;
	size_t n;
	uint64_t bytes;
	int rc;

	DLT_TRY(layout(m, k->weights, k->moments, &t, &n, &bytes));
	for (size_t i = 0; i < n; i++) {
		const dlt_param *p = &m->params[t[i].param];
		uint64_t dims[4];
		char name[96];
		placed_name(name, sizeof(name), m, &t[i]);
		param_dims(p, dims);
		DLT_TRY(dlt_archive_adopt_tensor(k->w, name, DLT_F32, p->ndim, dims));
	}
	DLT_TRY(write_meta(k->w, c, train, st, step));
	/* the rest as dlt_ckpt_write has it: their host copies */
	DLT_TRY(k->weights ? dlt_model_write_buffers(m, k->w, DLT_SHUFFLE_ZSTD, 1)
			   : dlt_model_write(m, k->w, DLT_SHUFFLE_ZSTD, 1));
	rc = dlt_archive_writer_close(k->w);
	k->w = NULL;
fail:
	free(t);
	dlt_ckpt_shards_abort(k);
	return rc;
}

void dlt_ckpt_close(dlt_ckpt *k)
{
	dlt_archive_close(k->a);
	dlt_jval_free(&k->meta);
	memset(k, 0, sizeof(*k));
}

static int bad_meta(const dlt_ckpt *k, const char *key)
{
	return dlt_error(DLT_EINPUT, "%s: metadata '%s' is missing or out of range",
			 dlt_archive_path(k->a), key);
}

/* An integer of the metadata in [lo, hi]. */
static int meta_int(const dlt_ckpt *k, const dlt_jval *obj, const char *key, long long lo,
		    long long hi, long long *out)
{
	return dlt_jval_int(dlt_jval_get(obj, key), lo, hi, out) ? 0 : bad_meta(k, key);
}

static int meta_num(const dlt_ckpt *k, const dlt_jval *obj, const char *key, double *out)
{
	const dlt_jval *v = dlt_jval_get(obj, key);
	if (!v || v->type != DLT_JNUM || !isfinite(v->num))
		return bad_meta(k, key);
	*out = v->num;
	return 0;
}

int dlt_ckpt_open(dlt_ckpt *k, const char *path, dlt_config *c)
{
	const char *meta;
	const dlt_jval *kind, *yaml;
	int rc;

	memset(k, 0, sizeof(*k));
	DLT_TRY(dlt_archive_open(&k->a, path));
	DLT_TRY(dlt_archive_verify(k->a));
	if (!(meta = dlt_archive_meta(k->a))) {
		rc = dlt_error(DLT_EINPUT, "%s: not a checkpoint (no metadata)", path);
		goto fail;
	}
	if ((rc = dlt_json_parse(meta, strlen(meta), &k->meta)) < 0) {
		rc = dlt_error_prefix(DLT_EINPUT, "%s: metadata", path);
		goto fail;
	}
	kind = dlt_jval_get(&k->meta, "kind");
	if (!kind || kind->type != DLT_JSTR ||
	    (strcmp(kind->str, "checkpoint") && strcmp(kind->str, "model"))) {
		rc = dlt_error(DLT_EINPUT, "%s: not a checkpoint or model file", path);
		goto fail;
	}
	if (!(yaml = dlt_jval_get(&k->meta, "config")) || yaml->type != DLT_JSTR) {
		rc = dlt_error(DLT_EINPUT, "%s: holds no config to build the model from", path);
		goto fail;
	}
	DLT_TRY(dlt_config_load_string(c, yaml->str, strlen(yaml->str), path, NULL, 0));
	return 0;
fail:
	dlt_ckpt_close(k);
	return rc;
}

/* A list of n numbers of the metadata, each finite as a float, into a
 * new array of floats: as they are (mean), or with inverse as 1 / v
 * rounded once from double, each v positive (std to inv_std: that gives
 * back the very float that write_input wrote 1 / inv_std of). */
static int meta_floats(const dlt_ckpt *k, const dlt_jval *a, const char *key, size_t n,
		       int inverse, float **out)
{
	*out = NULL;
	if (!a || a->type != DLT_JARR || a->n != n)
		return bad_meta(k, key);
	for (size_t i = 0; i < n; i++) {
		const dlt_jval *v = &a->items[i];
		if (v->type != DLT_JNUM || !isfinite(v->num) || !isfinite((float)v->num) ||
		    (inverse && !(v->num > 0 && isfinite((float)(1.0 / v->num)) &&
				  (float)(1.0 / v->num) > 0)))
			return bad_meta(k, key);
	}
	if (!(*out = dlt_malloc(n * sizeof(float))))
		return DLT_ENOMEM;
	for (size_t i = 0; i < n; i++)
		(*out)[i] = inverse ? (float)(1.0 / a->items[i].num) : (float)a->items[i].num;
	return 0;
}

/* The task of input: classes without "task"; regression with the
 * targets' mean and std. */
static int read_task(const dlt_ckpt *k, const dlt_jval *in, dlt_dataset *like)
{
	const dlt_jval *task = dlt_jval_get(in, "task");
	int rc;
	if (!task)
		return 0;
	if (task->type != DLT_JSTR ||
	    (strcmp(task->str, "regression") && strcmp(task->str, "multilabel")))
		return bad_meta(k, "input.task");
	like->task = strcmp(task->str, "regression") ? DLT_TASK_MULTI : DLT_TASK_REGRESS;
	like->t_dtype = like->task == DLT_TASK_REGRESS ? DLT_F32 : DLT_U8;
	if (like->task == DLT_TASK_MULTI)
		return 0;
	DLT_TRY(meta_floats(k, dlt_jval_get(in, "target_mean"), "input.target_mean",
			    (size_t)like->n_classes, 0, &like->t_mean));
	DLT_TRY(meta_floats(k, dlt_jval_get(in, "target_std"), "input.target_std",
			    (size_t)like->n_classes, 0, &like->t_std));
	for (int i = 0; i < like->n_classes; i++)
		if (!(like->t_std[i] > 0))
			return bad_meta(k, "input.target_std");
fail:
	return rc;
}

/* The largest sample dlt_dataset_load takes, in floats. */
#define MAX_FEATURES (1 << 26)

int dlt_ckpt_input(const dlt_ckpt *k, dlt_dataset *like)
{
	const dlt_jval *in = dlt_jval_get(&k->meta, "input"), *shape, *mean;
	long long dims[3], classes, features = 1;
	double scale;
	int rc;

	memset(like, 0, sizeof(*like));
	if (!in)
		return dlt_error(DLT_EINPUT, "%s: holds no 'input' (the model's input shape and "
				 "normalisation)", dlt_archive_path(k->a));
	if (in->type != DLT_JOBJ || !(shape = dlt_jval_get(in, "shape")) ||
	    shape->type != DLT_JARR || shape->n != 3)
		return bad_meta(k, "input.shape");
	for (int i = 0; i < 3; i++) {
		const dlt_jval *v = &shape->items[i];
		if (v->type != DLT_JNUM || !(v->num >= 1 && v->num <= MAX_FEATURES) ||
		    v->num != floor(v->num) || (features *= (long long)v->num) > MAX_FEATURES)
			return bad_meta(k, "input.shape");
		dims[i] = (long long)v->num;
	}
	if (meta_int(k, in, "num_classes", 1, 1 << 24, &classes) < 0)
		return bad_meta(k, "input.num_classes");
	if (meta_num(k, in, "scale", &scale) < 0 || !(scale > 0) ||
	    !isfinite((float)scale) || (float)scale <= 0)
		return bad_meta(k, "input.scale");
	/* one mean and std for every element, or one per element of a group
	 * that the sample is a whole number of (dlt-prep(1)) */
	if (!(mean = dlt_jval_get(in, "mean")) || mean->type != DLT_JARR || mean->n == 0 ||
	    mean->n > (size_t)features || features % (long long)mean->n)
		return bad_meta(k, "input.mean");
	if (!(like->path = dlt_strdup(dlt_archive_path(k->a))))
		return DLT_ENOMEM;
	like->n_stats = (int)mean->n;
	DLT_TRY(meta_floats(k, mean, "input.mean", mean->n, 0, &like->mean));
	DLT_TRY(meta_floats(k, dlt_jval_get(in, "std"), "input.std", mean->n, 1, &like->inv_std));
	like->features = (int)features;
	like->n_classes = (int)classes;
	like->ndim = 3;
	for (int i = 0; i < 3; i++)
		like->shape[i] = dims[i];
	like->sample = (dlt_shape){ (int)dims[0], (int)dims[1], (int)dims[2] };
	like->dtype = DLT_F32;
	like->scale = (float)scale;
	DLT_TRY(read_task(k, in, like));
	return 0;
fail:
	dlt_dataset_free(like);
	return rc;
}

static int read_optim(dlt_ckpt *k, dlt_model *m)
{
	for (int i = 0; i < m->n_params; i++) {
		dlt_param *p = &m->params[i];
		float *state[2] = { p->m, p->v };
		static const char *const moment[2] = { "m", "v" };
		char name[96];
		for (int s = 0; s < 2; s++) {
			const dlt_tensor_info *t;
			if (!state[s])
				continue;
			optim_name(name, sizeof(name), moment[s], p->name);
			if (!(t = dlt_archive_find(k->a, name)) || t->dtype != DLT_F32 ||
			    t->count != p->n)
				return dlt_error(DLT_EINPUT, "%s: no optimizer state '%s' of the "
						 "model's shape", dlt_archive_path(k->a), name);
			DLT_TRY_RC(dlt_archive_read(k->a, t, state[s], p->n * sizeof(float)));
		}
	}
	return 0;
}

/* The metric sums of the epoch or the window: classification's correct
 * count, or the task's sums */
static int read_sums(const dlt_ckpt *k, const dlt_model *m, const dlt_jval *sums,
		     const char *which, double *v)
{
	char key[32];
	const dlt_jval *a;
	long long n;

	memset(v, 0, DLT_TRAIN_SUMS * sizeof(*v));
	if (m->loss.task == DLT_TASK_CLASS) {
		snprintf(key, sizeof(key), "%s_correct", which);
		DLT_TRY_RC(meta_int(k, sums, key, 0, 1LL << 50, &n));
		v[0] = (double)n;
		return 0;
	}
	snprintf(key, sizeof(key), "%s_metrics", which);
	if (!(a = dlt_jval_get(sums, key)) || a->type != DLT_JARR || a->n != DLT_TRAIN_SUMS)
		return bad_meta(k, key);
	for (int i = 0; i < DLT_TRAIN_SUMS; i++) {
		if (a->items[i].type != DLT_JNUM || !isfinite(a->items[i].num))
			return bad_meta(k, key);
		v[i] = a->items[i].num;
	}
	return 0;
}

int dlt_ckpt_restore(dlt_ckpt *k, dlt_model *m, dlt_optim *o, dlt_ckpt_state *st)
{
	const dlt_jval *sums = dlt_jval_get(&k->meta, "sums"), *best, *metrics;
	long long v;

	DLT_TRY_RC(dlt_model_read(m, k->a));
	DLT_TRY_RC(read_optim(k, m));
	DLT_TRY_RC(meta_int(k, &k->meta, "step", 0, 1LL << 50, &st->step));
	DLT_TRY_RC(meta_int(k, &k->meta, "epoch", 1, 1 << 30, &v));
	st->epoch = (int)v;
	DLT_TRY_RC(meta_int(k, &k->meta, "batch", 0, 1LL << 40, &st->batch));
	DLT_TRY_RC(meta_int(k, &k->meta, "epochs", 1, 1 << 30, &v));
	st->epochs = (int)v;
	if (!sums || sums->type != DLT_JOBJ)
		return bad_meta(k, "sums");
	DLT_TRY_RC(meta_num(k, sums, "epoch_loss", &st->ep_loss));
	DLT_TRY_RC(read_sums(k, m, sums, "epoch", st->ep_m));
	DLT_TRY_RC(meta_int(k, sums, "epoch_samples", 0, 1LL << 50, &st->ep_samples));
	DLT_TRY_RC(meta_num(k, sums, "window_loss", &st->win_loss));
	DLT_TRY_RC(read_sums(k, m, sums, "window", st->win_m));
	DLT_TRY_RC(meta_int(k, sums, "window_samples", 0, 1LL << 50, &st->win_samples));
	if ((best = dlt_jval_get(&k->meta, "best"))) {
		st->have_best = 1;
		DLT_TRY_RC(meta_num(k, best, "value", &st->best));
		DLT_TRY_RC(meta_int(k, best, "step", 0, 1LL << 50, &st->best_step));
	}
	if (!(metrics = dlt_jval_get(&k->meta, "metrics")) || metrics->type != DLT_JSTR)
		return bad_meta(k, "metrics");
	st->metrics.len = 0;
	DLT_TRY_RC(dlt_buf_append(&st->metrics, metrics->str, strlen(metrics->str)));
	/* a power of two from 2^-126 to 2^127 (1 without loss scaling) */
	if (meta_num(k, &k->meta, "loss_scale", &st->loss_scale) < 0 ||
	    !(st->loss_scale >= 0x1p-126 && st->loss_scale <= 0x1p127) ||
	    frexp(st->loss_scale, &(int){ 0 }) != 0.5 || (!o->dynamic && st->loss_scale != 1.0))
		return bad_meta(k, "loss_scale");
	st->scale_clean = st->skipped = 0;
	if (dlt_jval_get(&k->meta, "scale_clean"))
		DLT_TRY_RC(meta_int(k, &k->meta, "scale_clean", 0, o->growth_interval - 1,
				    &st->scale_clean));
	if (dlt_jval_get(&k->meta, "skipped"))
		DLT_TRY_RC(meta_int(k, &k->meta, "skipped", 0, st->step, &st->skipped));
	o->step = st->step;
	o->scale = st->loss_scale;
	o->clean = st->scale_clean;
	o->skipped = st->skipped;
	m->loss_scale = (float)o->scale;
	dlt_model_push(m);
	return 0;
}
