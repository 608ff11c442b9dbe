/* The training loop.  One place where the step happens: next batch,
 * forward, loss, backward, optimiser step, metrics, checkpoint.
 *
 * Everything random is a function of (seed, epoch, step, position), and
 * the loop's sums are in the checkpoint, so a resumed run is the run that
 * never stopped: the same bits in its weights and checkpoints, the same
 * metrics apart from their timings. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive/archive.h"
#include "comm/comm.h"
#include "prep/tokens.h"
#include "rundir.h"
#include "train/ckpt.h"
#include "train/pipe.h"
#include "train.h"

/* Philox streams of the run's seed: one for the validation split, one per
 * epoch for the shuffle.  Model init, dropout and augmentation use their
 * own (nn.c, loader.c). */
#define STREAM_SPLIT 0x5350ull
#define STREAM_EPOCH(e) ((0x4550ull << 20) + (uint64_t)(e))

typedef struct run_state {
	const dlt_config *c;
	const dlt_train_hooks *h;
	dlt_run run;
	dlt_model m;
	dlt_loss loss;		/* the task's, m's too */
	float *out;		/* a batch's outputs in host memory, for metrics */
	double test_metrics[DLT_MAX_METRICS];	/* the last test evaluation's */
	dlt_optim opt;
	dlt_dataset train, test;
	dlt_loader train_ld, test_ld;
	int have_test, train_ld_up, test_ld_up;
	/* token data (a language model): windows of the train, val and test
	 * streams, and the loader of val's; the dataset train is then only
	 * the model's view of a window (dlt-train(1) LANGUAGE MODELS) */
	int tokens;
	dlt_source *tok_train, *tok_val, *tok_test;
	dlt_loader val_ld;
	int val_ld_up;
	float *acc_g;		/* train.accumulate: the micro-batches' gradient sum */
	uint32_t *base;		/* samples of train used for training */
	uint32_t *order;	/* base in this epoch's order */
	uint32_t *val_order, *test_order;
	size_t n_train, n_val;
	long long spe, total;	/* steps per epoch, in all */
	dlt_ckpt_state st;	/* position and sums: what a checkpoint keeps */
	double ckpt_at;		/* dlt_now() of the last checkpoint */
	char *ckpt_dir;
	dlt_train_result *res;
	double step_delay;	/* DLT_TEST_STEP_DELAY */
	int ckpt_on_start;	/* DLT_TEST_CKPT_ON_RESUME, on a resumed run */
	int fault, fault_rank;	/* DLT_TEST_FAULT */
	long long fault_step;
	/* data parallelism: rank of ranks, comm NULL for one process */
	dlt_comm *comm;
	int rank, ranks, local_ranks;
	/* the comm's bytes sent, the step, the time and a pipeline stage's
	 * waits at the log window's start */
	unsigned long long win_sent;
	long long win_step;
	double win_t, win_waited;
	dlt_buckets buckets;
	/* dist.zero (-1 when not set, or one process) and the ranks' ranges
	 * of the parameter block (dlt_comm_ranges) */
	int zero;
	size_t *ranges;
	/* ZeRO 3: the first failure of a gather for an op (op_params); the
	 * peak bytes of weights, gradients and optimizer state this rank has
	 * held in memory since the last record (note_state), measured in the
	 * first step after it (state_step) */
	int params_err;
	size_t state_peak;
	int state_step;
	/* the data-parallel rank and ranks: rank and ranks, or 0 of 1 in a
	 * pipeline, whose ranks are its stages */
	int dp_rank, dp_ranks;
	/* a pipeline's stage's replicas, which sum its gradients (NULL for
	 * one replica) */
	dlt_comm *group;
	/* dist.pipeline (pipe.c's): stages 0 when none; whether the optimizer
	 * state (ZeRO 1 to 3, a pipeline) and the weights (ZeRO 3, a
	 * pipeline) are current on each rank only in its range */
	dlt_pipe pipe;
	int shard_state, shard_w;
	/* a sharded run's checkpoints: each rank writes its own ranges into
	 * the one file (write_shards), until a rank cannot open it (the
	 * ranks share no file system), from when on rank 0 gathers them */
	int ckpt_gather;
	int ckpt_fault, ckpt_fault_rank;	/* DLT_TEST_CKPT_FAULT */
	long long ckpt_fault_step;
	/* a new run's directory, opened on a thread of its own while the
	 * first step runs (open_run_start) */
	const char *rundir;
	pthread_t open_thread;
	int open_pending, open_rc;
	double open_mono;
	char open_msg[1024];
} run_state;

static void warn(run_state *s, const char *msg)
{
	if (s->h && s->h->warn)
		s->h->warn(s->h->ctx, msg);
}

/* Ends the record j and writes it.  The checkpoint keeps the records
 * without what timing puts in them (from byte `timed` on), so that a
 * resumed run's checkpoints are byte for byte the uninterrupted one's. */
static int emit(run_state *s, dlt_json *j, size_t timed)
{
	int rc;
	dlt_json_end(j);
	if ((rc = dlt_json_ok(j)) == 0)
		rc = dlt_run_record(&s->run, j->buf.data);
	if (rc == 0 && (rc = dlt_buf_append(&s->st.metrics, j->buf.data, timed)) == 0)
		rc = dlt_buf_append(&s->st.metrics, "}\n", 2);
	if (rc == 0 && s->h && s->h->record)
		s->h->record(s->h->ctx, j->buf.data);
	dlt_json_free(j);
	return rc;
}

/* The time field every record ends with: training seconds over all
 * restarts. */
static size_t timed_part(run_state *s, dlt_json *j)
{
	size_t at = j->buf.len;
	dlt_json_num(j, "time", dlt_now() - s->run.start_mono);
	return at;
}

/* Whether the task's metrics need the outputs in host memory: all but
 * classification's accuracy, which softmax_xent counts (eval: top-5). */
static int wants_outputs(const run_state *s, int eval)
{
	return s->loss.task != DLT_TASK_CLASS ||
	       (eval && s->loss.outputs > 5 && !(s->loss.bytes_per_token > 0));
}

/* The mean loss of the batch the model has just run forward, targets y;
 * the outputs that the task's metrics read are taken first (into s->out),
 * as the loss writes their gradient over them */
static double take_loss(run_state *s, int eval, const void *y, int b, int *correct)
{
	if (wants_outputs(s, eval))
		dlt_model_output(&s->m, s->out, b);
	return dlt_model_loss(&s->m, y, b, correct);
}

/* The task's sums of a batch whose loss take_loss has taken */
static void add_sums(run_state *s, int eval, const void *y, int b, int hits, double *sums)
{
	dlt_loss_add(&s->loss, eval, s->out, y, b, hits, sums);
}

/* A pipeline's loss, on its last stage: rows [k0, k0 + n) of the batch
 * whose targets are y, into loss and the task's sums */
typedef struct pipe_loss {
	run_state *s;
	const void *y;
	int eval;
	double loss, *sums;
} pipe_loss;

static int pipe_loss_at(void *ctx, int k0, int n)
{
	pipe_loss *pl = ctx;
	run_state *s = pl->s;
	const void *y = (const char *)pl->y + (size_t)k0 * dlt_loss_target_size(&s->loss);
	int correct;
	double l = take_loss(s, pl->eval, y, n, &correct) * n;
	if (!pl->eval && !isfinite(l))
		return dlt_error(DLT_EFAIL, "step %lld: the loss is %g (diverged; try a lower "
				 "learning rate)", s->opt.step + 1, l / n);
	pl->loss += l;
	add_sums(s, pl->eval, y, n, correct, pl->sums);
	return 0;
}

/* Mean loss and the task's metrics (dlt_loss_metric_names' for eval) of
 * the model on order[0..n) of a dataset; samples per second in *rate. */
static int evaluate(run_state *s, dlt_loader *l, const uint32_t *order, size_t n,
		    double *loss, double *metrics, double *rate)
{
	size_t ns = 1 + dlt_loss_n_sums(&s->loss, 1);
	double *sums = dlt_calloc(ns, sizeof(double)), t0 = dlt_now();	/* loss, the task's */
	float *x;
	void *y;
	int b, c, rc = 0;

	if (!sums)
		return DLT_ENOMEM;
	dlt_loader_pass(l, order, n, NULL);
	while (dlt_loader_next(l, &x, &y, &b) > 0 && !s->params_err) {
		if (s->pipe.stages) {
			pipe_loss pl = { .s = s, .y = y, .eval = 1, .sums = sums + 1 };
			if ((rc = dlt_pipe_forward(&s->pipe, x, b, pipe_loss_at, &pl)) < 0)
				break;
			sums[0] += pl.loss;
			continue;
		}
		if (!b) {	/* ZeRO 3: the others' gathers all the same */
			dlt_model_params_pass(&s->m, 0);
			continue;
		}
		dlt_model_set_input(&s->m, x, b, dlt_loader_rounds(l));
		dlt_model_forward(&s->m, b, 0, 0);
		sums[0] += take_loss(s, 1, y, b, &c) * b;
		add_sums(s, 1, y, b, c, sums + 1);
	}
	if (rc < 0 || s->params_err) {
		free(sums);
		return rc < 0 ? rc : s->params_err;
	}
	if (s->comm)
		rc = dlt_comm_sum_f64(s->comm, sums, ns);
	*loss = sums[0] / n;
	dlt_loss_metrics(&s->loss, 1, sums + 1, (double)n, sums[0] / n, metrics);
	*rate = n / (dlt_now() - t0);
	free(sums);
	return rc;
}

/* The task's metrics as fields of a record (prefix: "test." or "") */
static void put_metrics(run_state *s, dlt_json *j, int eval, const char *prefix,
			const double *v)
{
	const char *names[DLT_MAX_METRICS];
	int n = dlt_loss_metric_names(&s->loss, eval, names);
	for (int i = 0; i < n; i++) {
		char key[32];
		snprintf(key, sizeof(key), "%s%s", prefix, names[i]);
		dlt_json_num(j, key, v[i]);
	}
}

static int emit_eval(run_state *s, const char *split, int epoch, double loss,
		     const double *metrics, double rate)
{
	dlt_json j;
	size_t timed;
	dlt_json_begin(&j);
	dlt_json_str(&j, "event", "eval");
	dlt_json_str(&j, "split", split);
	dlt_json_int(&j, "epoch", epoch);
	dlt_json_int(&j, "step", s->opt.step);
	dlt_json_num(&j, "loss", loss);
	put_metrics(s, &j, 1, "", metrics);
	timed = j.buf.len;
	dlt_json_num(&j, "samples_per_s", rate);
	timed_part(s, &j);
	return emit(s, &j, timed);
}

static uint32_t *identity(size_t n)
{
	uint32_t *p = dlt_malloc(n * sizeof(*p));
	if (p)
		for (size_t i = 0; i < n; i++)
			p[i] = (uint32_t)i;
	return p;
}

/* data.train or data.test: its archives, read as one dataset (or the
 * one path of a config built by hand) */
/* Whether path is a token archive (dlt-prep text): it has "tokens" */
static int is_token_archive(const char *path)
{
	dlt_archive *a;
	int yes;
	if (!strcmp(path, "-") || dlt_archive_open(&a, path) < 0)
		return 0;	/* load_set reports what is wrong */
	yes = dlt_archive_find(a, "tokens") != NULL;
	dlt_archive_close(a);
	return yes;
}

/* Token data: random windows of train.context + 1 tokens of data.train,
 * as many as the steps take, and fixed ones of data.val and data.test.
 * The dataset train becomes the model's view: T ids a sample, the
 * vocabulary its classes, no normalisation. */
static int load_tokens(run_state *s)
{
	const dlt_config *c = s->c;
	const int T = c->train.context;
	size_t n_eval = (size_t)c->train.eval_batches * c->train.batch, n;
	const dlt_tokens *tok;
	dlt_dataset *d = &s->train;

	if (c->data.n_train_paths > 1)
		return dlt_error(DLT_EINPUT, "%s: token data takes one archive in data.train",
				 c->data.train);
	if (!c->train.steps || !T)
		return dlt_error(DLT_EINPUT, "%s: token data needs train.steps and train.context "
				 "(dlt-train(1) LANGUAGE MODELS)", c->data.train);
	if (c->data.val_split > 0)
		return dlt_error(DLT_EINPUT, "%s: token data takes its validation stream from "
				 "data.val, not data.val_split", c->data.train);
	if (!dlt_mul_ok((size_t)c->train.steps, (size_t)c->train.batch * c->train.accumulate, &n) ||
	    n > UINT32_MAX)
		return dlt_error(DLT_EINPUT, "train.steps %lld x train.batch %d: more than 2^32 "
				 "windows", c->train.steps, c->train.batch);
	s->tokens = 1;
	DLT_TRY_RC(dlt_token_source_open(&s->tok_train, c->data.train, T, n,
					 (uint64_t)c->train.seed, 1));
	if (c->data.val)
		DLT_TRY_RC(dlt_token_source_open(&s->tok_val, c->data.val, T, n_eval, 0, 0));
	if (c->data.test)
		DLT_TRY_RC(dlt_token_source_open(&s->tok_test, c->data.test, T, n_eval, 0, 0));
	tok = dlt_token_source_tokens(s->tok_train);
	memset(d, 0, sizeof(*d));
	if (!(d->path = dlt_strdup(c->data.train)) || !(d->mean = dlt_calloc(1, sizeof(float))) ||
	    !(d->inv_std = dlt_malloc(sizeof(float))))
		return DLT_ENOMEM;
	d->inv_std[0] = 1;
	d->n_stats = 1;
	d->scale = 1;
	d->n = n;
	d->features = T;
	d->ndim = 1;
	d->shape[0] = T;
	d->sample = (dlt_shape){ T, 1, 1 };
	d->dtype = DLT_I32;
	d->n_classes = (int)dlt_tokenizer_vocab(tok->tok);
	d->tokenizer = tok->tok;
	s->n_train = n;
	s->n_val = s->tok_val ? s->tok_val->n : 0;
	s->have_test = s->tok_test != NULL;
	/* windows in order: where each starts is random already */
	if (!(s->order = identity(n)) || (s->tok_val && !(s->val_order = identity(s->n_val))) ||
	    (s->tok_test && !(s->test_order = identity(s->tok_test->n))))
		return DLT_ENOMEM;
	return 0;
}

static int load_set(dlt_dataset *d, char *const *paths, int n, const char *one)
{
	return n > 0 ? dlt_dataset_load_list(d, paths, n) : dlt_dataset_load(d, one);
}

static int load_data(run_state *s)
{
	const dlt_config *c = s->c;
	dlt_rng rng;
	uint32_t *all;
	int rc;

	if (is_token_archive(c->data.train))
		return load_tokens(s);
	if (c->data.val)
		return dlt_error(DLT_EINPUT, "%s: data.val is for token data; a dataset's "
				 "validation part is data.val_split", c->data.train);
	DLT_TRY(load_set(&s->train, c->data.train_paths, c->data.n_train_paths, c->data.train));
	if (!dlt_dataset_has_targets(&s->train))
		return dlt_error(DLT_EINPUT, "%s: has no labels to train on", c->data.train);
	if (c->data.test) {
		DLT_TRY(load_set(&s->test, c->data.test_paths, c->data.n_test_paths, c->data.test));
		if (!dlt_dataset_has_targets(&s->test))
			return dlt_error(DLT_EINPUT, "%s: has no labels to test on", c->data.test);
		if (s->test.task != s->train.task ||
		    (s->test.task != DLT_TASK_CLASS && s->test.n_classes != s->train.n_classes))
			return dlt_error(DLT_EINPUT, "%s: its targets are not of the kind of %s's "
					 "(dlt-prep info shows both)", c->data.test, c->data.train);
		DLT_TRY(dlt_dataset_use_stats(&s->test, &s->train));
		if (s->test.n_classes > s->train.n_classes)
			return dlt_error(DLT_EINPUT, "%s: %d classes, but %s has %d", c->data.test,
					 s->test.n_classes, c->data.train, s->train.n_classes);
		s->have_test = 1;
		if (!(s->test_order = identity(s->test.n)))
			return DLT_ENOMEM;
	}
	/* the validation split is a fixed random subset: the same for every
	 * epoch and for a resumed run */
	s->n_val = (size_t)floor(c->data.val_split * s->train.n);
	s->n_train = s->train.n - s->n_val;
	if (s->n_train == 0)
		return dlt_error(DLT_EINPUT, "%s: data.val_split %g leaves no training samples",
				 c->data.train, c->data.val_split);
	if (!(all = dlt_malloc(s->train.n * sizeof(*all))))
		return DLT_ENOMEM;
	dlt_rng_init(&rng, (uint64_t)c->train.seed, STREAM_SPLIT);
	if (s->n_val)
		dlt_rng_permute(&rng, all, s->train.n);
	else
		for (size_t i = 0; i < s->train.n; i++)
			all[i] = (uint32_t)i;
	s->base = all;
	if (!(s->order = dlt_malloc(s->n_train * sizeof(uint32_t))))
		return DLT_ENOMEM;
	if (s->n_val) {
		if (!(s->val_order = dlt_malloc(s->n_val * sizeof(uint32_t))))
			return DLT_ENOMEM;
		memcpy(s->val_order, all + s->n_train, s->n_val * sizeof(uint32_t));
	}
	return 0;
fail:
	return rc;
}

/* One epoch's order: a permutation of the training part from the epoch's
 * own stream, a function of (seed, epoch) alone, so that a resumed run
 * replays any epoch without the ones before it. */
static void shuffle(run_state *s, int epoch)
{
	dlt_rng rng;
	dlt_rng_init(&rng, (uint64_t)s->c->train.seed, STREAM_EPOCH(epoch));
	dlt_rng_permute(&rng, s->order, s->n_train);
	for (size_t i = 0; i < s->n_train; i++)
		s->order[i] = s->base[s->order[i]];
}

/* The config's device: no GPU is a failed job, not bad input. */
static int open_backend(const run_state *s, const dlt_config *c, const dlt_backend **be)
{
	char why[256];
	if (c->device < 0) {
		*be = dlt_backend_cpu();
		return 0;
	}
	if (!(*be = dlt_backend_cuda(s->comm ? dlt_rank_device(s->h->ranks, c->device)
					     : c->device, why, sizeof(why))))
		return dlt_error(DLT_EFAIL, "no CUDA device: %s", why);
	return 0;
}

static void on_grads(void *ctx, size_t off)
{
	dlt_buckets_ready(ctx, off);
}

/* The pages of block[a, b) outside [lo, hi) go back to the system: a
 * host backend's (a GPU's memory would need its virtual memory calls,
 * cuMemMap; madvise on its addresses releases nothing) */
static void release_except(const run_state *s, float *block, size_t a, size_t b, size_t lo,
			   size_t hi)
{
	if (!s->m.be->host)
		return;
	if (a < lo)
		dlt_mem_release(block + a, ((b < lo ? b : lo) - a) * sizeof(float));
	if (b > hi) {
		size_t from = a > hi ? a : hi;
		dlt_mem_release(block + from, (b - from) * sizeof(float));
	}
}

/* ZeRO 2 and 3: the pages of block[a, b) outside this rank's range */
static void release_outside(const run_state *s, float *block, size_t a, size_t b)
{
	release_except(s, block, a, b, s->ranges[s->rank], s->ranges[s->rank + 1]);
}

/* A pipeline's rank holds the weights of its stage alone, and the last
 * stage its tied head's embedding too: the others' pages go back */
static void release_stages(const run_state *s)
{
	const dlt_pipe *p = &s->pipe;
	const dlt_model *m = &s->m;
	size_t lo = p->ranges[p->stage], hi = p->ranges[p->stage + 1];
	size_t keep = m->n_weights, end = m->n_weights;	/* none */
	if (p->tied >= 0 && p->stage == p->stages - 1) {
		keep = m->params[p->tied].off;
		end = keep + m->params[p->tied].n;
	}
	release_except(s, m->dev_w, 0, lo, keep, end);
	release_except(s, m->dev_w, hi, m->n_weights, keep, end);
}

/* The bytes of weights, gradients and optimizer state in memory now, by
 * their pages (dlt_mem_resident), into the peak.  Every step holds the
 * same pages at the same points, so only the first step of a log window
 * is measured: a walk of the page tables per op would cost a ZeRO 3
 * step 2 %. */
static void note_state(run_state *s)
{
	size_t bytes = s->m.n_weights * sizeof(float), now = s->opt.state_bytes;
	if (!s->m.be->host || !s->comm || !s->state_step)
		return;
	now += dlt_mem_resident(s->m.dev_w, bytes) + dlt_mem_resident(s->m.dev_g, bytes);
	if (s->acc_g)
		now += dlt_mem_resident(s->acc_g, bytes);
	if (now > s->state_peak)
		s->state_peak = now;
}

/* ZeRO 3: an op's params [a, b) from every rank before it runs, and let
 * go after */
static void op_params(void *ctx, size_t a, size_t b, int need)
{
	run_state *s = ctx;
	if (s->params_err)
		return;
	if (!need) {
		release_outside(s, s->m.dev_w, a, b);
		return;
	}
	s->params_err = dlt_comm_all_gather(s->comm, s->m.dev_w, s->ranges, a, b,
					    s->buckets.bucket);
	if (s->params_err == 0)
		s->params_err = dlt_comm_sum_wait(s->comm);
	note_state(s);
}

/* ZeRO 2 and 3: a bucket's gradients reduce-scattered, the other ranks'
 * parts go */
static void grads_done(void *ctx, size_t a, size_t b)
{
	run_state *s = ctx;
	note_state(s);
	release_outside(s, s->m.dev_g, a, b);
}

/* ZeRO 3: rank 0's whole weight block, for a checkpoint or the model
 * that rank 0 writes alone (write_shards); every rank takes part; let go
 * again with release_outside */
static int gather_params(run_state *s)
{
	size_t lo = s->ranges[s->rank];
	DLT_TRY_RC(dlt_comm_gather(s->comm, s->m.dev_w + lo, s->rank ? NULL : s->m.dev_w,
				   s->ranges, s->buckets.bucket, 0));
	return dlt_comm_sum_wait(s->comm);
}

/* The optimiser's decisions over the ranks (ZeRO) */
static int sum_ranks(void *ctx, double *x, int n)
{
	return dlt_comm_sum_f64(ctx, x, n);
}

/* ZeRO: m and v of this rank's range from a checkpoint of any run
 * (ckpt.h: "optim.m/PARAM", "optim.v/PARAM"), which every rank reads,
 * a param at a time. */
static int restore_shard(run_state *s, dlt_ckpt *k)
{
	static const char *const moment[2] = { "m", "v" };
	dlt_model *m = &s->m;
	float *state[2] = { s->opt.sm, s->opt.sv }, *tmp = NULL;
	size_t lo = s->ranges[s->rank], hi = s->ranges[s->rank + 1], cap = 0;
	int rc = 0;

	for (int i = 0; i < m->n_params && rc == 0; i++) {
		const dlt_param *p = &m->params[i];
		size_t a = p->off > lo ? p->off : lo, b = p->off + p->n < hi ? p->off + p->n : hi;
		for (int j = 0; j < 2 && a < b && rc == 0; j++) {
			const dlt_tensor_info *t;
			char name[96];
			if (!state[j])
				continue;
			snprintf(name, sizeof(name), "optim.%s/%s", moment[j], p->name);
			if (!(t = dlt_archive_find(k->a, name)) || t->dtype != DLT_F32 ||
			    t->count != p->n) {
				rc = dlt_error(DLT_EINPUT, "%s: no optimizer state '%s' of the model's "
					       "shape", dlt_archive_path(k->a), name);
				break;
			}
			if (p->n > cap) {
				free(tmp);
				if (!(tmp = dlt_malloc(p->n * sizeof(float)))) {
					rc = DLT_ENOMEM;
					break;
				}
				cap = p->n;
			}
			if ((rc = dlt_archive_read(k->a, t, tmp, p->n * sizeof(float))) < 0)
				break;
			if (m->be->host)
				memcpy(state[j] + (a - lo), tmp + (a - p->off), (b - a) * sizeof(float));
			else
				m->be->upload(state[j] + (a - lo), tmp + (a - p->off),
					      (b - a) * sizeof(float));
		}
	}
	free(tmp);
	return rc;
}

/* The optimizer's moments a param: Adam's m and v, SGD's momentum, or
 * none */
static int optim_moments(const run_state *s)
{
	return s->opt.cfg.kind != DLT_OPT_SGD ? 2 : s->opt.cfg.momentum != 0.0;
}

/* ZeRO: rank 0's whole optimizer state for a checkpoint that rank 0
 * writes alone (when the ranks share no file system: write_shards),
 * gathered from every rank's range (every rank takes part); the params'
 * m and v point into it until release_state. */
static int gather_state(run_state *s, float **out)
{
	dlt_model *m = &s->m;
	const dlt_optim *o = &s->opt;
	size_t n = m->n_weights, bytes = n * sizeof(float);
	float *state[2] = { o->sm, o->sv }, *host = NULL, *dev = NULL;
	int moments = optim_moments(s), rc = 0;

	*out = NULL;
	if (!n || !moments)
		return 0;
	if (s->rank == 0 && (!(host = dlt_malloc((size_t)moments * bytes)) ||
			     (!m->be->host && !(dev = m->be->alloc(bytes))))) {
		free(host);
		return dlt_error(DLT_ENOMEM, "out of memory for the optimizer state of a "
				 "checkpoint");
	}
	for (int k = 0; k < moments && rc == 0; k++) {
		float *all = s->rank ? NULL : dev ? dev : host + (size_t)k * n;
		rc = dlt_comm_gather(s->comm, state[k], all, s->ranges, s->buckets.bucket, 0);
		if (rc == 0)
			rc = dlt_comm_sum_wait(s->comm);
		if (rc == 0 && dev)
			m->be->download(host + (size_t)k * n, dev, bytes);
	}
	if (dev)
		m->be->free(dev);
	if (rc < 0) {
		free(host);
		return rc;
	}
	for (int i = 0; host && i < m->n_params; i++) {
		m->params[i].m = host + m->params[i].off;
		m->params[i].v = moments > 1 ? host + n + m->params[i].off : NULL;
	}
	*out = host;
	return 0;
}

static void release_state(run_state *s, float *host)
{
	for (int i = 0; host && i < s->m.n_params; i++)
		s->m.params[i].m = s->m.params[i].v = NULL;
	free(host);
}

/* Every rank from rank 0's state: weights, buffers, optimiser state and
 * the loop's position and sums (all ranks built the same model from the
 * same seed, or read the same checkpoint; this makes sure). */
static int sync_start(run_state *s)
{
	dlt_model *m = &s->m;
	dlt_ckpt_state *st = &s->st;
	size_t wb = m->n_weights * sizeof(float);
	double v[15 + 2 * DLT_TRAIN_SUMS] = {
		s->opt.step, s->opt.skipped, s->opt.scale, s->opt.clean, st->epoch, st->batch,
		st->ep_loss, st->ep_samples, st->win_loss, st->win_samples, st->have_best,
		st->best, st->best_step,
	};
	size_t nb = 0;

	for (int i = 0; i < m->n_bufs; i++)
		nb += m->bufs[i].n;
	if (!s->comm)
		return 0;
	memcpy(v + 15, st->ep_m, sizeof(st->ep_m));
	memcpy(v + 15 + DLT_TRAIN_SUMS, st->win_m, sizeof(st->win_m));
	DLT_TRY_RC(dlt_comm_broadcast(s->comm, v, sizeof(v)));
	if (wb)
		DLT_TRY_RC(dlt_comm_broadcast(s->comm, m->dev_w, wb));
	if (wb && m->dev_m)
		DLT_TRY_RC(dlt_comm_broadcast(s->comm, m->dev_m, wb));
	if (wb && m->dev_v)
		DLT_TRY_RC(dlt_comm_broadcast(s->comm, m->dev_v, wb));
	if (nb)
		DLT_TRY_RC(dlt_comm_broadcast(s->comm, m->dev_bufs, nb * sizeof(float)));
	s->opt.step = (long long)v[0];
	s->opt.skipped = (long long)v[1];
	s->opt.scale = v[2];
	m->loss_scale = (float)v[2];
	s->opt.clean = (long long)v[3];
	st->epoch = (int)v[4];
	st->batch = (long long)v[5];
	st->ep_loss = v[6];
	st->ep_samples = (long long)v[7];
	st->win_loss = v[8];
	st->win_samples = (long long)v[9];
	st->have_best = (int)v[10];
	st->best = v[11];
	st->best_step = (long long)v[12];
	memcpy(st->ep_m, v + 15, sizeof(st->ep_m));
	memcpy(st->win_m, v + 15 + DLT_TRAIN_SUMS, sizeof(st->win_m));
	/* ZeRO 3: from here on a rank holds its range of the weights alone;
	 * a pipeline's, its stage's */
	if (s->zero == 3)
		release_outside(s, m->dev_w, 0, m->n_weights);
	if (s->pipe.stages)
		release_stages(s);
	return 0;
}

/* The end of a step on every rank: its loss and metric sums summed over
 * the ranks, and the program's asks (a signal that any rank saw), so that
 * every rank logs, checkpoints and stops at the same step. */
static int sync_step(run_state *s, double *loss_sum, double *sums, int *ask)
{
	double v[3 + DLT_TRAIN_SUMS] = { *loss_sum, *ask & DLT_POLL_CHECKPOINT,
					 *ask & DLT_POLL_STOP };
	memcpy(v + 3, sums, DLT_TRAIN_SUMS * sizeof(double));
	DLT_TRY_RC(dlt_comm_sum_f64(s->comm, v, 3 + DLT_TRAIN_SUMS));
	*loss_sum = v[0];
	memcpy(sums, v + 3, DLT_TRAIN_SUMS * sizeof(double));
	*ask = (v[1] > 0 ? DLT_POLL_CHECKPOINT : 0) | (v[2] > 0 ? DLT_POLL_STOP : 0);
	return 0;
}

static int check_best(const run_state *s);

/* Data, model, optimiser and loaders: all that bad input can fail on,
 * before the run directory is touched. */
static int setup(run_state *s)
{
	const dlt_config *c = s->c;
	const dlt_backend *be;
	dlt_normalise norm;
	int threads = c->train.threads, input_round, rc;

	s->comm = s->h ? s->h->comm : NULL;
	s->rank = s->comm ? s->comm->rank : 0;
	s->ranks = s->comm ? s->comm->size : 1;
	s->local_ranks = s->comm ? s->h->ranks->local_size : 1;
	if (threads == 0 && (threads = dlt_env_threads_shared(s->local_ranks)) < 0)
		return threads;
	/* the host's threads: the loader's transforms and a CPU model's */
	dlt_backend_cpu()->set_threads(threads);
	DLT_TRY(open_backend(s, c, &be));
	DLT_TRY(load_data(s));
	/* a pipeline's ranks: its stages times its replicas (pipe.h) */
	s->dp_ranks = c->dist.pipe.stages ? s->ranks / c->dist.pipe.stages : s->ranks;
	s->dp_rank = s->dp_ranks ? s->rank % s->dp_ranks : 0;
	if (!s->dp_ranks)
		s->dp_ranks = 1;	/* fewer ranks than stages: dlt_pipe_init says so */
	if (c->train.batch < s->dp_ranks)
		return dlt_error(DLT_EINPUT, "train.batch %d is the batch of all ranks: fewer "
				 "samples than the %d ranks", c->train.batch, s->ranks);
	if ((c->n_layers && c->layers[0].kind == DLT_LAYER_EMBEDDING) != s->tokens)
		return dlt_error(DLT_EINPUT, "%s: %s", c->data.train, s->tokens
				 ? "token data needs a model that starts with an embedding"
				 : "the model starts with an embedding (token ids), but this is not "
				   "a token archive (dlt-prep text)");
	DLT_TRY(dlt_model_init(&s->m, c, be, s->train.sample, s->train.n_classes,
			       (c->train.batch + s->dp_ranks - 1) / s->dp_ranks));
	DLT_TRY(dlt_loss_init(&s->loss, s->train.task, s->train.n_classes, c->train.loss,
			      c->train.huber_delta, c->path ? c->path : "config"));
	s->loss.t_mean = s->train.t_mean;
	s->loss.t_std = s->train.t_std;
	if (s->tokens) {
		if (dlt_model_token_vocab(&s->m) < s->train.n_classes)
			return dlt_error(DLT_EINPUT, "%s: a vocabulary of %d tokens, but the model's "
					 "embedding has %d", c->data.train, s->train.n_classes,
					 dlt_model_token_vocab(&s->m));
		if (s->m.out_rows != c->train.context)
			return dlt_error(DLT_EINPUT, "%s: token data needs a model of logits per "
					 "position (an embedding first)", c->path ? c->path : "config");
		s->loss.rows = s->m.out_rows;
		s->loss.bytes_per_token =
			dlt_tokens_bytes_per_token(dlt_token_source_tokens(s->tok_train));
	}
	DLT_TRY(dlt_model_set_loss(&s->m, &s->loss));
	DLT_TRY(check_best(s));
	if (!(s->out = dlt_malloc((size_t)s->m.max_batch * s->m.out_rows * s->loss.outputs *
				  sizeof(float))))
		return DLT_ENOMEM;
	if ((c->train.steps || c->train.context) && !s->tokens)
		return dlt_error(DLT_EINPUT, "%s: train.steps and train.context are for token data; "
				 "a dataset trains train.epochs", c->path ? c->path : "config");
	if (c->train.eval_every && !s->tokens)
		return dlt_error(DLT_EINPUT, "%s: train.eval_every is for token data; datasets are "
				 "evaluated at each epoch's end", c->path ? c->path : "config");
	if (c->train.accumulate > 1) {
		if (s->m.n_weights && !(s->acc_g = be->alloc(s->m.n_weights * sizeof(float))))
			return dlt_error(DLT_ENOMEM, "out of memory for train.accumulate's sums");
	}
	s->zero = s->comm ? c->dist.zero : -1;
	if (c->dist.pipe.stages) {
		/* each stage updates its own params and keeps their state */
		dlt_optim_ranks r = { .rank = s->rank, .size = s->ranks, .shard = 1,
				      .sum = sum_ranks, .ctx = s->comm };
		if ((c->dist.zero >= 0 && c->dist.zero != 1) || c->train.accumulate > 1)
			return dlt_error(DLT_EINPUT, "%s: dist.pipeline: its micro-batches are the "
					 "step's, and its replicas shard the optimizer state (ZeRO "
					 "1): no train.accumulate, dist.zero 1 or none",
					 c->path ? c->path : "config");
		DLT_TRY(dlt_pipe_init(&s->pipe, c, &s->m, s->comm,
				      (c->train.batch + s->dp_ranks - 1) / s->dp_ranks,
				      c->path ? c->path : "config"));
		if (!(s->ranges = dlt_malloc(((size_t)s->ranks + 1) * sizeof(size_t))))
			return DLT_ENOMEM;
		dlt_pipe_rank_ranges(&s->pipe, s->ranges);
		r.ranges = s->ranges;
		if (s->pipe.width > 1)
			DLT_TRY(dlt_comm_split(s->comm, s->pipe.stage, s->pipe.replica, &s->group));
		DLT_TRY(dlt_optim_init_ranks(&s->opt, &c->train.optim, &s->m,
					     s->m.prec == DLT_PREC_F16 ? c->train.loss_scale.init : 0,
					     c->train.loss_scale.growth_interval, &r));
	} else if (s->zero >= 0) {
		/* every rank sums its range in rank order; ZeRO 1 and 2 keep
		 * its optimizer state alone */
		dlt_optim_ranks r = { .rank = s->rank, .size = s->ranks, .shard = s->zero >= 1,
				      .sum = sum_ranks, .ctx = s->comm };
		if (!(s->ranges = dlt_malloc(((size_t)s->ranks + 1) * sizeof(size_t))))
			return DLT_ENOMEM;
		dlt_comm_ranges(s->comm, s->m.n_weights, s->ranges);
		r.ranges = s->ranges;
		DLT_TRY(dlt_optim_init_ranks(&s->opt, &c->train.optim, &s->m,
					     s->m.prec == DLT_PREC_F16 ? c->train.loss_scale.init : 0,
					     c->train.loss_scale.growth_interval, &r));
	} else {
		DLT_TRY(dlt_optim_init(&s->opt, &c->train.optim, &s->m,
				       s->m.prec == DLT_PREC_F16 ? c->train.loss_scale.init : 0,
				       c->train.loss_scale.growth_interval));
	}
	/* the loader's thread rounds the input where the model would (not a
	 * pipeline's: its stages' models are apart) */
	input_round = s->pipe.stages ? DLT_PREC_F32 : dlt_model_input_prec(&s->m);
	norm = dlt_dataset_normalise(&s->train);
	norm.round = input_round;
	DLT_TRY(dlt_loader_start(&s->train_ld, s->tokens ? s->tok_train : &s->train.src,
				 s->tokens ? NULL : &norm, c->train.batch, s->dp_rank, s->dp_ranks,
				 be));
	s->train_ld_up = 1;
	if (s->tok_val) {
		DLT_TRY(dlt_loader_start(&s->val_ld, s->tok_val, NULL, c->train.batch, s->dp_rank,
					 s->dp_ranks, be));
		s->val_ld_up = 1;
	}
	if (s->have_test) {
		norm = dlt_dataset_normalise(&s->test);
		norm.round = input_round;
		DLT_TRY(dlt_loader_start(&s->test_ld, s->tokens ? s->tok_test : &s->test.src,
					 s->tokens ? NULL : &norm, c->train.batch, s->dp_rank,
					 s->dp_ranks, be));
		s->test_ld_up = 1;
	}
	if (s->comm && !s->pipe.stages) {
		/* each rank's dropout masks its own samples */
		s->m.seed += (uint64_t)s->rank * 0x9e3779b97f4a7c15ull;
		dlt_buckets_init(&s->buckets, s->comm, s->m.dev_g, s->m.n_weights,
				 (size_t)(c->dist.bucket_mb * 1e6));
		if (s->zero >= 0)
			dlt_buckets_scatter(&s->buckets, s->ranges, s->zero >= 2);
		if (s->zero >= 2 && be->host)
			dlt_buckets_on_done(&s->buckets, grads_done, s);
		if (s->zero == 3)
			dlt_model_on_params(&s->m, op_params, s);
		/* micro-batches: the sums begin when the step's gradients are
		 * all in, not during each backward */
		if (c->train.accumulate > 1)
			dlt_buckets_at_finish(&s->buckets);
		DLT_TRY(dlt_model_on_grads(&s->m, on_grads, &s->buckets));
	}
	s->shard_state = s->zero >= 1 || s->pipe.stages;
	s->shard_w = s->zero == 3 || s->pipe.stages;
	s->opt.clip = c->train.clip;
	/* a step takes accumulate batches */
	s->spe = (long long)((s->n_train + (size_t)c->train.batch * c->train.accumulate - 1) /
			     ((size_t)c->train.batch * c->train.accumulate));
	s->total = s->spe * c->train.epochs;
	s->st.epoch = 1;
	s->st.epochs = c->train.epochs;
	s->step_delay = dlt_env_test_step_delay();
	s->fault = dlt_env_test_fault(&s->fault_rank, &s->fault_step);
	s->ckpt_fault = dlt_env_test_ckpt_fault(&s->ckpt_fault_rank, &s->ckpt_fault_step);
	return 0;
fail:
	return rc;
}

static void teardown(run_state *s)
{
	if (s->train_ld_up)
		dlt_loader_stop(&s->train_ld);
	if (s->test_ld_up)
		dlt_loader_stop(&s->test_ld);
	if (s->val_ld_up)
		dlt_loader_stop(&s->val_ld);
	dlt_source_close(s->tok_train);
	dlt_source_close(s->tok_val);
	dlt_source_close(s->tok_test);
	if (s->acc_g)
		s->m.be->free(s->acc_g);
	dlt_optim_free(&s->opt);
	dlt_comm_close(s->group);
	dlt_pipe_free(&s->pipe);
	dlt_model_free(&s->m);
	free(s->ranges);
	free(s->out);
	dlt_dataset_free(&s->train);
	dlt_dataset_free(&s->test);
	dlt_buf_free(&s->st.metrics);
	free(s->base);
	free(s->order);
	free(s->val_order);
	free(s->test_order);
	free(s->ckpt_dir);
}

/* ckpt/step-SSSSSSSS.dlt: the step, so names sort in order. */
static char *ckpt_path(const run_state *s, long long step)
{
	char *p = dlt_malloc(strlen(s->ckpt_dir) + 32);
	if (p)
		sprintf(p, "%s/step-%08lld.dlt", s->ckpt_dir, step);
	return p;
}

/* The steps of the checkpoints in dir, newest first; their count, or an
 * error. */
static int list_ckpts(const char *dir, long long **steps)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t cap = 0;
	int n = 0;

	*steps = NULL;
	if (!d)
		return errno == ENOENT ? 0 : dlt_error_errno(DLT_EIO, "%s", dir);
	while ((e = readdir(d))) {
		long long step;
		int end = 0;
		if (sscanf(e->d_name, "step-%lld.dlt%n", &step, &end) != 1 ||
		    e->d_name[end] || step < 0)
			continue;
		if (dlt_grow(steps, &cap, (size_t)n + 1, sizeof(**steps)) < 0) {
			closedir(d);
			return DLT_ENOMEM;
		}
		(*steps)[n++] = step;
	}
	closedir(d);
	for (int i = 1; i < n; i++)	/* few files: insertion sort, newest first */
		for (int j = i; j > 0 && (*steps)[j - 1] < (*steps)[j]; j--) {
			long long t = (*steps)[j];
			(*steps)[j] = (*steps)[j - 1];
			(*steps)[j - 1] = t;
		}
	return n;
}

/* Keeps the newest `keep` checkpoints. */
static void prune(run_state *s)
{
	long long *steps;
	int n = list_ckpts(s->ckpt_dir, &steps);
	for (int i = s->c->ckpt.keep; i < n; i++) {
		char *p = ckpt_path(s, steps[i]);
		if (p && unlink(p) != 0 && errno != ENOENT)
			warn(s, dlt_errmsg());
		free(p);
	}
	free(steps);
}

/* Whether a checkpoint (ckpt) or the model file is a sharded run's, each
 * rank writing its own ranges (write_shards): a checkpoint where the
 * optimizer state is sharded (ZeRO 1 to 3, pipelines), the model file
 * where the weights are (ZeRO 3, pipelines) */
static int sharded_write(const run_state *s, int ckpt)
{
	if (!s->comm || s->ckpt_gather)
		return 0;
	return ckpt ? s->shard_state : s->shard_w;
}

/* What write_shards did */
enum { SHARDS_WRITTEN, SHARDS_GATHER, SHARDS_FAILED };

/* Rank 0's message to the others: 1 when it made the file (0: none is
 * written, 2: it failed), then the file's name */
#define SHARDS_MSG (PATH_MAX + 8)

/* A sharded run's checkpoint (st) or model file (st NULL) to path (rank
 * 0's; NULL on the other ranks, and where none is written): each rank
 * writes its own range of the sharded tensors into the one file
 * (ckpt.h), none gathers another's.  The ranks agree twice, so that any
 * rank's failure is every rank's to know: rank 0's file (or that it has
 * none) goes to all, then the sum of each rank's outcome and errno comes
 * back to all.  SHARDS_WRITTEN; SHARDS_GATHER when a rank other than 0
 * could not open the file (they share no file system), which rank 0 has
 * removed: the caller gathers instead; SHARDS_FAILED, with rank 0's error
 * set and its status in *why, the file removed; or a failure of the comm,
 * which ends the run. */
static int write_shards(run_state *s, const char *path, const dlt_ckpt_state *st, int *why)
{
	/* a checkpoint's weights are placed too where every rank holds them
	 * (ZeRO 1 and 2), each rank writing its range: one layout for every
	 * sharded run */
	int weights = st || s->shard_w, moments = st ? optim_moments(s) : 0, n = s->ranks;
	dlt_ckpt_shard r = { .be = s->m.be, .w = s->m.dev_w, .m = s->opt.sm, .v = s->opt.sv,
			     .lo = s->ranges[s->rank], .hi = s->ranges[s->rank + 1] };
	dlt_ckpt_writer *w = NULL;
	char *msg = dlt_calloc(1, SHARDS_MSG), mine[1024] = "";
	double *v = dlt_calloc(2 * (size_t)n, sizeof(double));
	int rc, opened = 1, err = 0, gather = -1, failed = -1, how = SHARDS_WRITTEN;
	int fault = s->ckpt_fault && s->rank == s->ckpt_fault_rank &&
		    s->opt.step == s->ckpt_fault_step ? s->ckpt_fault : 0;

	*why = 0;
	if (!msg || !v) {
		rc = DLT_ENOMEM;
		goto fail;
	}
	if (s->rank == 0 && path) {
		if ((rc = dlt_ckpt_shards_create(&w, path, &s->m, weights, moments)) == 0 &&
		    strlen(dlt_ckpt_shards_temp(w)) >= SHARDS_MSG - 1)
			rc = dlt_error(DLT_EINPUT, "%s: a path of more than %d bytes", path,
				       SHARDS_MSG - 2);
		msg[0] = rc < 0 ? 2 : 1;
		if (rc == 0)
			strcpy(msg + 1, dlt_ckpt_shards_temp(w));
		*why = rc;
	}
	if ((rc = dlt_comm_broadcast(s->comm, msg, SHARDS_MSG)) < 0)
		goto fail;
	if (msg[0] != 1) {
		how = msg[0] == 2 ? SHARDS_FAILED : SHARDS_WRITTEN;
		goto done;
	}
	/* each rank's range; the injected faults of the tests as a rank
	 * without the file system, or with a full disk, would have them */
	if (fault == DLT_CKPT_FAULT_OPEN) {
		opened = 0;
		err = ENOENT;
	} else if (dlt_ckpt_shards_put(msg + 1, &s->m, weights, moments, &r, &opened, &err) < 0) {
		snprintf(mine, sizeof(mine), "%s", dlt_errmsg());
		err = err ? err : EIO;
	} else if (fault == DLT_CKPT_FAULT_WRITE) {
		err = ENOSPC;
	}
	v[s->rank] = err ? (opened ? 2 : 1) : 0;
	v[n + s->rank] = err;
	if ((rc = dlt_comm_sum_f64(s->comm, v, 2 * n)) < 0)
		goto fail;
	for (int i = n - 1; i >= 0; i--) {
		if (v[i] == 1 && i > 0)
			gather = i;
		if (v[i] != 0)
			failed = i;
	}
	if (gather < 0 && failed < 0) {
		if (s->rank == 0) {
			dlt_model_pull(&s->m);
			rc = dlt_ckpt_shards_commit(w, s->c, &s->train, &s->m, st, s->opt.step);
			w = NULL;
			if (rc < 0) {
				how = SHARDS_FAILED;
				*why = rc;
			}
		}
		goto done;
	}
	how = gather >= 0 ? SHARDS_GATHER : SHARDS_FAILED;
	if (s->rank == 0) {
		int at = gather >= 0 ? gather : failed, e = (int)v[n + at];
		*why = DLT_EIO;
		if (gather >= 0)
			dlt_error(DLT_EIO, "rank %d cannot open %s, which rank 0 made (%s)", at,
				  msg + 1, strerror(e));
		else if (at == 0 && mine[0])
			dlt_error(DLT_EIO, "%s", mine);
		else
			dlt_error(DLT_EIO, "%s: rank %d's part: %s", path, at, strerror(e));
	}
done:
	rc = how;
fail:
	dlt_ckpt_shards_abort(w);
	free(msg);
	free(v);
	return rc;
}

/* A rank could not open the file of a sharded write (write_shards' error):
 * rank 0 gathers the state and writes alone from now on, which it says
 * once, as a warning and a record of metrics.jsonl (not of the
 * checkpoints, so a resumed run's are the same). */
static void gather_from_now(run_state *s)
{
	char text[1400];
	dlt_json j;

	s->ckpt_gather = 1;
	if (s->rank)
		return;
	snprintf(text, sizeof(text), "%s: the ranks share no file system, so rank 0 gathers "
		 "the state and writes every checkpoint alone from now on", dlt_errmsg());
	warn(s, text);
	if (!s->run.dir)
		return;
	dlt_json_begin(&j);
	dlt_json_str(&j, "event", "warning");
	dlt_json_int(&j, "step", s->opt.step);
	dlt_json_str(&j, "message", text);
	dlt_json_end(&j);
	if (dlt_json_ok(&j) == 0 && dlt_run_record(&s->run, j.buf.data) == 0 && s->h &&
	    s->h->record)
		s->h->record(s->h->ctx, j.buf.data);
	dlt_json_free(&j);
}

/* A checkpoint now (to ckpt/best.dlt when best), which rank 0 writes; a
 * sharded run's ranks each their own ranges of it (write_shards).  A
 * write that fails leaves the earlier checkpoints as they were and is a
 * warning: the run goes on, and may write the next one. */
static int checkpoint(run_state *s, int best)
{
	char *path = NULL;
	float *state = NULL;
	int rc, why = 0, how = SHARDS_GATHER;

	if (s->rank == 0 && s->ckpt_dir &&
	    !(path = best ? dlt_run_file(&s->run, "ckpt/best.dlt") : ckpt_path(s, s->opt.step)))
		return DLT_ENOMEM;
	s->st.step = s->opt.step;
	s->st.loss_scale = s->opt.scale;
	s->st.scale_clean = s->opt.clean;
	s->st.skipped = s->opt.skipped;
	if (sharded_write(s, 1)) {
		if ((how = write_shards(s, path, &s->st, &why)) < 0) {
			free(path);
			return how;
		}
		if (how == SHARDS_GATHER)
			gather_from_now(s);
	}
	if (how == SHARDS_GATHER) {
		/* every rank sends its range of the optimizer state (and ZeRO
		 * 3's, a pipeline's, of the weights) to rank 0, which alone
		 * writes */
		if (s->shard_state && (rc = gather_state(s, &state)) < 0) {
			free(path);
			return rc;
		}
		if (s->shard_w && (rc = gather_params(s)) < 0) {
			release_state(s, state);
			free(path);
			return rc;
		}
		how = SHARDS_WRITTEN;
		if (path) {
			dlt_model_pull(&s->m);
			if ((why = dlt_ckpt_write(path, s->c, &s->train, &s->m, &s->st,
						  s->opt.step)) < 0)
				how = SHARDS_FAILED;
		}
		release_state(s, state);
		if (s->zero == 3)
			release_outside(s, s->m.dev_w, 0, s->m.n_weights);
		if (s->pipe.stages)
			release_stages(s);
	}
	if (path && how == SHARDS_FAILED) {
		char msg[1200];
		snprintf(msg, sizeof(msg), "checkpoint not written: %s", dlt_errmsg());
		warn(s, msg);
	} else if (path && !best) {
		snprintf(s->res->ckpt, sizeof(s->res->ckpt), "%s", path);
		prune(s);
	}
	s->ckpt_at = dlt_now();
	free(path);
	return why == DLT_ENOMEM ? why : 0;
}

/* The trained weights, RUNDIR/model.dlt: a checkpoint without the
 * optimiser state, for dlt-infer; ZeRO 3's and a pipeline's ranks each
 * write their own ranges of it (write_shards). */
static int save_model(run_state *s)
{
	char *path = NULL;
	int rc = 0, how = SHARDS_GATHER;

	if (s->rank == 0 && s->run.dir && !(path = dlt_run_file(&s->run, "model.dlt")))
		return DLT_ENOMEM;
	if (sharded_write(s, 0)) {
		if ((how = write_shards(s, path, NULL, &rc)) < 0) {
			free(path);
			return how;
		}
		if (how == SHARDS_GATHER)
			gather_from_now(s);
		if (how == SHARDS_FAILED && rc == 0)
			rc = DLT_EIO;
	}
	if (how == SHARDS_GATHER) {
		/* every rank sends its range, at the run's end */
		if (s->shard_w && (rc = gather_params(s)) < 0) {
			free(path);
			return rc;
		}
		if (path) {
			dlt_model_pull(&s->m);
			rc = dlt_ckpt_write(path, s->c, &s->train, &s->m, NULL, s->opt.step);
		}
	}
	free(path);
	return s->rank == 0 ? rc : 0;
}

/* Each rank's bytes sent a step over the log window and its peak
 * memory, to rank 0's record: "sent" [bytes a step of rank 0, 1, ...]
 * and "peak_mib" [...].  Every rank logs at the same step, so this sum
 * is reached by all. */
static int rank_usage(run_state *s, dlt_json *j)
{
	double *v = dlt_calloc(4 * (size_t)s->ranks, sizeof(double)), now = dlt_now();
	long long steps = s->opt.step - s->win_step;
	if (!v)
		return DLT_ENOMEM;
	if (now > s->win_t)
		v[3 * s->ranks + s->rank] = (s->pipe.waited - s->win_waited) / (now - s->win_t);
	s->win_t = now;
	s->win_waited = s->pipe.waited;
	v[s->rank] = steps > 0 ? (double)(s->comm->sent - s->win_sent) / (double)steps : 0;
	v[s->ranks + s->rank] = dlt_mem_peak() / (1 << 20);
	v[2 * s->ranks + s->rank] = (double)s->state_peak / (1 << 20);
	s->win_sent = s->comm->sent;
	s->win_step = s->opt.step;
	s->state_peak = 0;
	s->state_step = 1;
	if (dlt_comm_sum_f64(s->comm, v, 4 * s->ranks) < 0) {
		free(v);
		return DLT_EFAIL;
	}
	dlt_json_array_begin(j, "sent");
	for (int r = 0; r < s->ranks; r++)
		dlt_json_num(j, NULL, v[r]);
	dlt_json_array_end(j);
	dlt_json_array_begin(j, "peak_mib");
	for (int r = 0; r < s->ranks; r++)
		dlt_json_num(j, NULL, round(v[s->ranks + r] * 10) / 10);
	dlt_json_array_end(j);
	if (s->m.be->host) {
		dlt_json_array_begin(j, "state_mib");
		for (int r = 0; r < s->ranks; r++)
			dlt_json_num(j, NULL, round(v[2 * s->ranks + r] * 10) / 10);
		dlt_json_array_end(j);
	}
	/* a pipeline: the fraction of the window each stage waited for
	 * another, its bubble */
	if (s->pipe.stages) {
		dlt_json_array_begin(j, "bubble");
		for (int r = 0; r < s->ranks; r++)
			dlt_json_num(j, NULL, round(v[3 * s->ranks + r] * 1000) / 1000);
		dlt_json_array_end(j);
	}
	free(v);
	return 0;
}

static int emit_train(run_state *s, int epoch, double lr, double t_window)
{
	dlt_ckpt_state *st = &s->st;
	dlt_json j;
	double now = dlt_now(), v[DLT_MAX_METRICS];
	size_t timed;
	dlt_json_begin(&j);
	dlt_json_str(&j, "event", "train");
	dlt_json_int(&j, "epoch", epoch);
	dlt_json_int(&j, "step", s->opt.step);
	dlt_json_num(&j, "loss", st->win_loss / st->win_samples);
	dlt_loss_metrics(&s->loss, 0, st->win_m, (double)st->win_samples,
			 st->win_loss / st->win_samples, v);
	put_metrics(s, &j, 0, "", v);
	dlt_json_num(&j, "lr", lr);
	if (s->opt.dynamic) {
		dlt_json_num(&j, "loss_scale", s->opt.scale);
		dlt_json_int(&j, "skipped", s->opt.skipped);
	}
	timed = j.buf.len;
	dlt_json_num(&j, "samples_per_s", st->win_samples / (now - t_window));
	if (s->comm && s->ranks > 1)
		DLT_TRY_RC(rank_usage(s, &j));
	timed_part(s, &j);
	st->win_loss = 0;
	st->win_samples = 0;
	memset(st->win_m, 0, sizeof(st->win_m));
	return emit(s, &j, timed);
}

/* checkpoint.best must name a metric of the task */
static int check_best(const run_state *s)
{
	const char *b = s->c->ckpt.best, *names[DLT_MAX_METRICS];
	int n = dlt_loss_metric_names(&s->loss, strncmp(b ? b : "", "train.", 6) != 0, names);
	if (!b || !strcmp(strchr(b, '.') + 1, "loss"))
		return 0;
	for (int i = 0; i < n; i++)
		if (!strcmp(strchr(b, '.') + 1, names[i]))
			return 0;
	return dlt_error(DLT_EINPUT, "%s: checkpoint.best %s: the data's task has no such "
			 "metric (it records loss and %s%s%s%s%s)", s->c->path ? s->c->path : "config",
			 b, names[0], n > 1 ? ", " : "", n > 1 ? names[1] : "", n > 2 ? ", " : "",
			 n > 2 ? names[2] : "");
}

/* Whether the metric named by checkpoint.best improved with these
 * values of the epoch. */
static int improved(run_state *s, const dlt_epoch_summary *e)
{
	const char *b = s->c->ckpt.best, *name;
	const double *vals;
	double v = NAN;
	if (!b)
		return 0;
	name = strchr(b, '.') + 1;
	vals = !strncmp(b, "train.", 6) ? e->train : !strncmp(b, "val.", 4) ? e->val : e->test;
	if (!strcmp(name, "loss"))
		v = !strncmp(b, "train.", 6) ? e->loss : !strncmp(b, "val.", 4) ? e->val_loss
		  : e->test_loss;
	for (int i = 0; i < e->n; i++)
		if (!strcmp(name, e->names[i]))
			v = vals[i];
	if (isnan(v) || (s->st.have_best && (s->c->ckpt.best_max ? v <= s->st.best
								  : v >= s->st.best)))
		return 0;
	s->st.have_best = 1;
	s->st.best = v;
	s->st.best_step = s->opt.step;
	return 1;
}

/* train.eval_every: the validation and test streams' fixed windows now
 * (token data: their loaders are their own, the training pass goes on) */
static int evaluate_now(run_state *s, int epoch)
{
	double loss, v[DLT_MAX_METRICS], rate;
	if (s->n_val) {
		DLT_TRY_RC(evaluate(s, &s->val_ld, s->val_order, s->n_val, &loss, v, &rate));
		DLT_TRY_RC(emit_eval(s, "val", epoch, loss, v, rate));
	}
	if (s->have_test) {
		DLT_TRY_RC(evaluate(s, &s->test_ld, s->test_order, s->tok_test->n, &loss, v, &rate));
		DLT_TRY_RC(emit_eval(s, "test", epoch, loss, v, rate));
	}
	return 0;
}

static int end_epoch(run_state *s, int epoch, double t_start)
{
	dlt_ckpt_state *st = &s->st;
	dlt_epoch_summary sum = { .epoch = epoch, .epochs = s->c->train.epochs,
				  .val_loss = NAN, .test_loss = NAN };
	int best;
	double rate;

	sum.n_train = dlt_loss_metric_names(&s->loss, 0, sum.names);
	sum.n = dlt_loss_metric_names(&s->loss, 1, sum.names);
	for (int i = 0; i < DLT_MAX_METRICS; i++)
		sum.val[i] = sum.test[i] = NAN;
	sum.loss = st->ep_loss / st->ep_samples;
	dlt_loss_metrics(&s->loss, 0, st->ep_m, (double)st->ep_samples, sum.loss, sum.train);
	if (s->n_val) {
		DLT_TRY_RC(evaluate(s, s->tokens ? &s->val_ld : &s->train_ld, s->val_order,
				    s->n_val, &sum.val_loss,
				    sum.val, &rate));
		DLT_TRY_RC(emit_eval(s, "val", epoch, sum.val_loss, sum.val, rate));
	}
	if (s->have_test) {
		DLT_TRY_RC(evaluate(s, &s->test_ld, s->test_order,
				    s->tokens ? s->tok_test->n : s->test.n, &sum.test_loss,
				    sum.test, &rate));
		DLT_TRY_RC(emit_eval(s, "test", epoch, sum.test_loss, sum.test, rate));
		s->res->test_loss = sum.test_loss;
		s->res->test_metric = sum.names[0];
		s->res->test_value = sum.test[0];
		memcpy(s->test_metrics, sum.test, sizeof(sum.test));
	}
	sum.elapsed_s = dlt_now() - t_start;
	if (s->h && s->h->epoch)
		s->h->epoch(s->h->ctx, &sum);
	best = improved(s, &sum);
	st->epoch = epoch + 1;
	st->batch = 0;
	st->ep_loss = 0;
	st->ep_samples = 0;
	memset(st->ep_m, 0, sizeof(st->ep_m));
	if (best)
		DLT_TRY_RC(checkpoint(s, 1));
	if (s->c->ckpt.every == DLT_CKPT_EPOCH && epoch % s->c->ckpt.every_n == 0)
		DLT_TRY_RC(checkpoint(s, 0));
	return 0;
}

/* Whether the config's steps or seconds call for a checkpoint now. */
static int ckpt_due(const run_state *s)
{
	const dlt_config *c = s->c;
	if (c->ckpt.every == DLT_CKPT_STEPS)
		return s->opt.step % c->ckpt.every_n == 0;
	if (c->ckpt.every == DLT_CKPT_SECONDS)
		return dlt_now() - s->ckpt_at >= (double)c->ckpt.every_n;
	return 0;
}

static int done_record(run_state *s, double train_time, double startup, double samples)
{
	dlt_json j;
	size_t timed;
	dlt_json_begin(&j);
	dlt_json_str(&j, "event", "done");
	dlt_json_int(&j, "epoch", s->c->train.epochs);
	dlt_json_int(&j, "step", s->opt.step);
	if (s->have_test) {
		dlt_json_num(&j, "test.loss", s->res->test_loss);
		put_metrics(s, &j, 1, "test.", s->test_metrics);
	}
	/* ZeRO: the optimizer state rank 0 holds (its range's) */
	if (s->zero >= 0 || s->pipe.stages)
		dlt_json_int(&j, "optim_state_bytes", (long long)s->opt.state_bytes);
	timed = j.buf.len;
	dlt_json_num(&j, "samples_per_s", samples / train_time);
	dlt_json_num(&j, "train_time", train_time);
	if (startup >= 0)
		dlt_json_num(&j, "startup", startup);
	/* which kernel did the work, as machines differ: with the times */
	if (s->c->device < 0 && s->m.be->gemm_name)
		dlt_json_str(&j, "cpu_gemm", s->m.be->gemm_name(s->m.prec));
	timed_part(s, &j);
	return emit(s, &j, timed);
}

static int open_ckpt_dir(run_state *s);

/* A new run's directory takes a few fsyncs (config.yaml and status are
 * written atomically), 3 to 20 ms on a busy disk: it is opened on a thread
 * of its own while the first step runs, and the loop waits for it before
 * the first thing it writes there.  Bad input has been ruled out by then
 * (setup), so that no run directory is left behind for it; an error of
 * the opening itself ends the run after its first step. */
static void *open_run_thread(void *arg)
{
	run_state *s = arg;
	int rc = dlt_run_open(&s->run, s->rundir, s->c);
	if (rc == 0) {
		s->run.start_mono = s->open_mono;
		if ((rc = open_ckpt_dir(s)) < 0) {
			snprintf(s->open_msg, sizeof(s->open_msg), "%s", dlt_errmsg());
			dlt_run_close(&s->run);
		}
	} else {
		snprintf(s->open_msg, sizeof(s->open_msg), "%s", dlt_errmsg());
	}
	s->open_rc = rc;
	return NULL;
}

static int open_run_start(run_state *s, const char *rundir)
{
	int rc;
	char *metrics;
	struct stat st;
	s->rundir = rundir;
	s->open_mono = dlt_now();
	/* a directory that holds a run already: the error now, not after a step */
	if (rundir && (metrics = dlt_malloc(strlen(rundir) + 16))) {
		sprintf(metrics, "%s/metrics.jsonl", rundir);
		rc = stat(metrics, &st);
		free(metrics);
		if (rc == 0)
			return dlt_run_open(&s->run, rundir, s->c);
	}
	if (pthread_create(&s->open_thread, NULL, open_run_thread, s) == 0) {
		s->open_pending = 1;
		return 0;
	}
	/* no thread: here and now */
	if ((rc = dlt_run_open(&s->run, rundir, s->c)) < 0)
		return rc;
	s->run.start_mono = s->open_mono;
	if ((rc = open_ckpt_dir(s)) < 0)
		dlt_run_close(&s->run);
	return rc;
}

/* Waits for the run directory; its error, if it could not be opened */
static int open_run_wait(run_state *s)
{
	if (!s->open_pending)
		return 0;
	pthread_join(s->open_thread, NULL);
	s->open_pending = 0;
	if (s->open_rc < 0)
		return dlt_error(s->open_rc, "%s", s->open_msg);
	return 0;
}

/* A pipeline's replicas of this rank's stage: their gradients of the
 * stage's params summed in replica order into each one's range (after
 * 0), or each one's updated range to the others (1) */
static int replicas(run_state *s, int weights)
{
	const dlt_pipe *p = &s->pipe;
	const size_t *r = s->ranges + (size_t)p->stage * p->width;
	size_t lo = p->ranges[p->stage], hi = p->ranges[p->stage + 1];
	if (!s->group || hi == lo)
		return 0;
	DLT_TRY_RC(weights ? dlt_comm_all_gather(s->group, s->m.dev_w, r, lo, hi, 0)
			   : dlt_comm_reduce_scatter(s->group, s->m.dev_g, r, lo, hi, 0, 1));
	return dlt_comm_sum_wait(s->group);
}

/* The update from the summed gradients.  ZeRO 0: every rank's range,
 * summed in rank order, to every rank, and each updates the whole block;
 * 1 and 2: each updates its range, and the parameters go to every rank;
 * 3: each updates its range, which it alone holds. */
static int optim_step(run_state *s, double lr)
{
	size_t n = s->m.n_weights, chunk = s->buckets.bucket;
	int rc;
	if (s->zero == 0) {
		DLT_TRY_RC(dlt_comm_all_gather(s->comm, s->m.dev_g, s->ranges, 0, n, chunk));
		DLT_TRY_RC(dlt_comm_sum_wait(s->comm));
	}
	if ((rc = dlt_optim_step(&s->opt, &s->m, lr)) < 0)
		return rc;
	/* a step skipped by all changed nothing; ZeRO 3 gathers each op's
	 * weights when it runs */
	if (s->zero >= 1 && s->zero < 3 && rc) {
		DLT_TRY_RC(dlt_comm_all_gather(s->comm, s->m.dev_w, s->ranges, 0, n, chunk));
		DLT_TRY_RC(dlt_comm_sum_wait(s->comm));
	}
	if (s->pipe.stages && rc)
		DLT_TRY_RC(replicas(s, 1));
	if (s->pipe.stages)
		DLT_TRY_RC(dlt_pipe_after_step(&s->pipe));
	note_state(s);
	s->state_step = 0;
	return 0;
}

/* Whether DLT_TEST_FAULT's fault is this rank's at this step */
static int faulty(const run_state *s)
{
	return s->rank == s->fault_rank && s->opt.step + 1 == s->fault_step;
}

/* The loop, from wherever s->st stands. */
static int train_loop(run_state *s)
{
	const dlt_config *c = s->c;
	const dlt_train_hooks *h = s->h;
	dlt_ckpt_state *st = &s->st;
	double t_start = dlt_now(), t_train = 0, samples_done = 0, startup = -1;

	const int acc = c->train.accumulate;

	s->ckpt_at = t_start;
	if (s->ckpt_on_start)	/* what the checkpoint loaded gives, written again */
		DLT_TRY_RC(checkpoint(s, 0));
	s->win_step = s->opt.step;
	s->win_sent = s->comm ? s->comm->sent : 0;
	s->win_t = dlt_now();
	s->win_waited = s->pipe.waited;
	s->state_step = 1;
	for (int epoch = st->epoch; epoch <= c->train.epochs; epoch++) {
		size_t first = (size_t)st->batch * c->train.batch * acc;
		dlt_augment aug = { .crop = c->data.augment.crop, .flip = c->data.augment.flip,
				    .seed = (uint64_t)c->train.seed, .epoch = epoch,
				    .first = first };
		double t_window = dlt_now(), lr;
		float *x;
		void *y;
		int b, mine;

		if (!s->tokens)
			shuffle(s, epoch);
		if (first > s->n_train)
			first = s->n_train;
		dlt_loader_pass(&s->train_ld, s->order + first, s->n_train - first, &aug);
		while ((b = dlt_loader_next(&s->train_ld, &x, &y, &mine)) > 0) {
			double t0 = dlt_now(), loss = 0, sums[DLT_TRAIN_SUMS] = { 0 };
			int correct = 0, ask, micro = 0, taken = 0;

			if (startup < 0 && h && h->t_start > 0)
				startup = t0 - h->t_start;
			lr = dlt_lr_at(&c->train.optim, &c->train.sched, s->opt.step, s->spe, s->total);
			if (s->comm)
				dlt_buckets_reset(&s->buckets);
			if (s->pipe.stages) {	/* the micro-batches through the stages */
				pipe_loss pl = { .s = s, .y = y, .sums = sums };
				s->m.grad_batch = b;
				DLT_TRY_RC(dlt_pipe_step(&s->pipe, x, mine, s->opt.step, pipe_loss_at,
							 &pl));
				DLT_TRY_RC(replicas(s, 0));
				loss = pl.loss;
				taken = b;
			} else for (;;) {	/* the step's micro-batches: train.accumulate of them */
				if (mine > 0) {
					/* the gradient of the mean over the whole batch
					 * (of every micro-batch), of which this rank has
					 * mine samples */
					double l;
					s->m.grad_batch = b * acc;
					dlt_model_set_input(&s->m, x, mine, dlt_loader_rounds(&s->train_ld));
					dlt_model_forward(&s->m, mine, 1, s->opt.step);
					l = take_loss(s, 0, y, mine, &correct) * mine;
					if (s->fault == DLT_FAULT_NAN && faulty(s))
						l = NAN;
					if (dlt_model_error(&s->m))
						return dlt_error(DLT_EFAIL, "step %lld: %s: %s",
								 s->opt.step + 1, s->m.be->name,
								 dlt_model_error(&s->m));
					if (!isfinite(l))
						return dlt_error(DLT_EFAIL, "step %lld: the loss is %g "
								 "(diverged; try a lower learning "
								 "rate)", s->opt.step + 1, l / mine);
					loss += l;
					add_sums(s, 0, y, mine, correct, sums);
					dlt_model_backward(&s->m, mine);
				} else {	/* a rank with no sample of a small last batch */
					s->m.be->zero(s->m.dev_g, s->m.n_weights * sizeof(float));
					dlt_model_params_pass(&s->m, 1);
				}
				if (s->params_err)
					return s->params_err;
				taken += b;
				if (acc > 1 && micro)
					s->m.be->add(s->acc_g, s->m.dev_g, s->acc_g, s->m.n_weights);
				else if (acc > 1)
					s->m.be->copy(s->acc_g, s->m.dev_g,
						      s->m.n_weights * sizeof(float));
				/* the last step of a pass may have fewer */
				if (++micro == acc ||
				    (b = dlt_loader_next(&s->train_ld, &x, &y, &mine)) <= 0)
					break;
			}
			if (acc > 1)
				s->m.be->copy(s->m.dev_g, s->acc_g, s->m.n_weights * sizeof(float));
			b = taken;
			if (s->comm && !s->pipe.stages)
				DLT_TRY_RC(dlt_buckets_finish(&s->buckets));
			if (s->comm && s->fault == DLT_FAULT_EXTRA && faulty(s)) {
				DLT_TRY_RC(dlt_comm_sum_begin(s->comm, s->m.dev_g, s->m.n_weights));
				DLT_TRY_RC(dlt_comm_sum_wait(s->comm));
			}
			DLT_TRY_RC(optim_step(s, lr));
			ask = h && h->poll ? h->poll(h->ctx) : 0;
			/* every rank writes a sharded run's checkpoints: all decide */
			if (s->shard_state && ckpt_due(s))
				ask |= DLT_POLL_CHECKPOINT;
			if (s->comm)
				DLT_TRY_RC(sync_step(s, &loss, sums, &ask));
			t_train += dlt_now() - t0;
			/* all below may write to the run directory */
			DLT_TRY_RC(open_run_wait(s));

			st->win_loss += loss;
			st->win_samples += b;
			st->ep_loss += loss;
			st->ep_samples += b;
			for (int i = 0; i < DLT_TRAIN_SUMS; i++) {
				st->win_m[i] += sums[i];
				st->ep_m[i] += sums[i];
			}
			st->batch++;
			samples_done += b;
			if (s->opt.step % c->train.log_every == 0 || st->batch == s->spe) {
				DLT_TRY_RC(emit_train(s, epoch, lr, t_window));
				t_window = dlt_now();
			}
			/* the epoch's end evaluates anyway */
			if (c->train.eval_every && s->opt.step % c->train.eval_every == 0 &&
			    st->batch < s->spe) {
				DLT_TRY_RC(evaluate_now(s, epoch));
				t_window = dlt_now();
			}
			if (h && h->progress) {
				double el = dlt_now() - t_start, rate = samples_done / el;
				dlt_progress p = {
					.epoch = epoch, .epochs = c->train.epochs, .step = s->opt.step,
					.steps_per_epoch = s->spe, .step_in_epoch = st->batch,
					.loss = st->ep_loss / st->ep_samples, .samples_per_s = rate,
					.elapsed_s = el,
					.eta_s = (double)(s->total - s->opt.step) * c->train.batch / rate,
				};
				h->progress(h->ctx, &p);
			}
			if (s->step_delay > 0)
				dlt_sleep(s->step_delay);
			if (ask || (!s->shard_state && ckpt_due(s)))
				DLT_TRY_RC(checkpoint(s, 0));
			if (ask & DLT_POLL_STOP) {
				s->res->stopped = 1;
				s->res->steps = s->opt.step;
				return 0;
			}
		}
		DLT_TRY_RC(end_epoch(s, epoch, t_start));
	}
	s->res->steps = s->opt.step;
	s->res->elapsed_s = dlt_now() - t_start;
	DLT_TRY_RC(save_model(s));
	return done_record(s, t_train, startup, samples_done);
}

/* Runs the loop on a set-up state; the run's status tells how it ended. */
static int run(run_state *s)
{
	int rc = train_loop(s), orc = open_run_wait(s);
	if (orc < 0)
		return orc;	/* no run directory to say how it ended */
	if (rc == 0)
		rc = dlt_run_status(&s->run, s->res->stopped ? "stopped" : "done");
	if (rc == 0)
		return dlt_run_close(&s->run);
	if (s->run.dir) {
		/* the run's own status says it failed; the error is the caller's to show */
		char msg[1024];
		snprintf(msg, sizeof(msg), "%s", dlt_errmsg());
		dlt_run_status(&s->run, "failed");
		dlt_run_close(&s->run);
		dlt_error(rc, "%s", msg);
	}
	return rc;
}

static int open_ckpt_dir(run_state *s)
{
	if (!s->run.dir)
		return 0;
	/* a resume has looked for checkpoints in the same directory */
	free(s->ckpt_dir);
	if (!(s->ckpt_dir = dlt_run_file(&s->run, "ckpt")))
		return DLT_ENOMEM;
	return dlt_mkdir_p(s->ckpt_dir);
}

int dlt_train_run(const dlt_config *c, const char *rundir, const dlt_train_hooks *h,
		  dlt_train_result *res)
{
	run_state s = { .c = c, .h = h, .res = res };
	int rc;

	memset(res, 0, sizeof(*res));
	res->test_loss = res->test_value = NAN;
	DLT_TRY(setup(&s));
	DLT_TRY(sync_start(&s));
	/* the run directory last: bad input must not leave one behind */
	if ((rc = open_run_start(&s, s.rank ? NULL : rundir)) < 0)
		goto fail;
	rc = run(&s);
fail:
	teardown(&s);
	return rc;
}

/* The newest checkpoint of the run that opens and verifies; the ones
 * that do not are reported.  0 and *k empty when there is none. */
static int newest_ckpt(run_state *s, const char *rundir, dlt_ckpt *k, dlt_config *c)
{
	long long *steps;
	char *dir = dlt_malloc(strlen(rundir) + 8);
	int n, rc = 0;

	memset(k, 0, sizeof(*k));
	if (!dir)
		return DLT_ENOMEM;
	sprintf(dir, "%s/ckpt", rundir);
	s->ckpt_dir = dir;
	if ((n = list_ckpts(dir, &steps)) < 0)
		return n;
	for (int i = 0; i < n; i++) {
		char *path = ckpt_path(s, steps[i]), msg[1200];
		if (!path) {
			rc = DLT_ENOMEM;
			break;
		}
		rc = dlt_ckpt_open(k, path, c);
		free(path);
		if (rc == 0 || rc == DLT_ENOMEM)
			break;
		snprintf(msg, sizeof(msg), "%s; using the checkpoint before it", dlt_errmsg());
		warn(s, msg);
		rc = 0;
	}
	free(steps);
	return rc;
}

/* Whether the run's status says it finished. */
int dlt_train_rundir_state(const char *rundir)
{
	char *path = dlt_malloc(strlen(rundir) + 16), *text = NULL;
	const dlt_jval *st;
	struct stat sb;
	dlt_jval v;
	size_t len;
	int state = DLT_RUNDIR_UNFINISHED;

	if (!path)
		return DLT_RUNDIR_UNFINISHED;
	sprintf(path, "%s/metrics.jsonl", rundir);
	if (stat(path, &sb) != 0 && errno == ENOENT)
		state = DLT_RUNDIR_NONE;
	sprintf(path, "%s/status", rundir);
	if (state && dlt_read_file(path, 1 << 16, &text, &len) == 0 &&
	    dlt_json_parse(text, len, &v) == 0) {
		if ((st = dlt_jval_get(&v, "status")) && st->type == DLT_JSTR &&
		    !strcmp(st->str, "done"))
			state = DLT_RUNDIR_DONE;
		dlt_jval_free(&v);
	}
	free(text);
	free(path);
	return state;
}

int dlt_train_resume(const char *rundir, int epochs, long long steps, const dlt_train_hooks *h,
		      dlt_train_result *res)
{
	run_state s = { .h = h, .res = res };
	dlt_config c = { 0 };
	dlt_ckpt k = { 0 };
	char *yaml = NULL;
	double time_before = 0;
	int rc, done = dlt_train_rundir_state(rundir) == DLT_RUNDIR_DONE, run_epochs;
	long long run_steps;

	memset(res, 0, sizeof(*res));
	res->test_loss = res->test_value = NAN;
	DLT_TRY(newest_ckpt(&s, rundir, &k, &c));
	if (!k.a) {	/* none yet: from the start, with the run's config */
		if (!(yaml = dlt_malloc(strlen(rundir) + 16))) {
			rc = DLT_ENOMEM;
			goto fail;
		}
		sprintf(yaml, "%s/config.yaml", rundir);
		DLT_TRY(dlt_config_load(&c, yaml, NULL, 0));
	}
	run_epochs = c.train.epochs;
	run_steps = c.train.steps;
	if (steps && !run_steps) {
		rc = dlt_error(DLT_EINPUT, "%s: train.steps=%lld: the run trains epochs (train.steps "
			       "is for token data)", rundir, steps);
		goto fail;
	}
	if (done && epochs <= run_epochs && steps <= run_steps) {
		rc = dlt_error(DLT_EINPUT, "%s: the run is done; nothing to resume", rundir);
		goto fail;
	}
	if (epochs)
		c.train.epochs = epochs;
	if (steps)
		c.train.steps = steps;
	if (h && h->layout)
		c.dist = h->layout->dist;
	s.c = &c;
	DLT_TRY(setup(&s));
	if (k.a) {
		DLT_TRY(dlt_ckpt_restore(&k, &s.m, &s.opt, &s.st));
		if (s.shard_state)
			DLT_TRY(restore_shard(&s, &k));
		/* token data: the steps are one pass, and the checkpoint at its
		 * end stands at the next epoch; a raised train.steps goes on
		 * with the same pass (the windows of steps past the old end
		 * are the ones a longer run draws there) */
		if (s.tokens && steps > run_steps && s.st.batch == 0 && s.st.epoch == 2 &&
		    s.st.step == run_steps) {
			s.st.epoch = 1;
			s.st.batch = s.st.step;
		}
		if (s.tokens && s.st.step > c.train.steps) {
			rc = dlt_error(DLT_EINPUT, "%s: train.steps=%lld: the run has trained %lld "
				       "steps already", rundir, c.train.steps, s.st.step);
			goto fail;
		}
		if (s.st.epochs != run_epochs || s.st.step != (s.st.epoch - 1) * s.spe + s.st.batch) {
			rc = dlt_error(DLT_EINPUT, "%s: the checkpoint's position does not fit "
				       "its config", dlt_archive_path(k.a));
			goto fail;
		}
		if (s.st.epoch - 1 > c.train.epochs) {
			rc = dlt_error(DLT_EINPUT, "%s: train.epochs=%d: the run has trained %d "
				       "epochs already", rundir, c.train.epochs, s.st.epoch - 1);
			goto fail;
		}
		s.st.epochs = c.train.epochs;
	}
	DLT_TRY(sync_start(&s));
	s.ckpt_on_start = k.a && dlt_env_test_ckpt_on_resume();
	if (s.rank) {	/* rank 0 alone writes the run */
		dlt_ckpt_close(&k);
		rc = run(&s);
		goto fail;
	}
	DLT_TRY(dlt_run_reopen(&s.run, rundir, s.st.metrics.data ? s.st.metrics.data : "",
			       &time_before));
	s.run.start_mono = dlt_now() - time_before;
	/* config.yaml says what the run now trains to, and how, for
	 * dlt-runs and a later resume without a checkpoint */
	if (c.train.epochs != run_epochs || c.train.steps != run_steps || (h && h->layout))
		DLT_TRY(dlt_run_write_config(&s.run, &c));
	DLT_TRY(open_ckpt_dir(&s));
	{
		dlt_batch_job job;
		dlt_json j;
		dlt_json_begin(&j);
		dlt_json_str(&j, "event", "resume");
		dlt_json_int(&j, "epoch", s.st.epoch);
		dlt_json_int(&j, "step", s.opt.step);
		if (c.train.epochs != run_epochs)
			dlt_json_int(&j, "epochs", c.train.epochs);
		if (c.train.steps != run_steps)
			dlt_json_int(&j, "steps", c.train.steps);
		if (k.a)
			dlt_json_str(&j, "from", dlt_archive_path(k.a));
		if (h && h->note)
			dlt_json_str(&j, "note", h->note);
		/* a job that Slurm requeued (node failure, preemption) */
		dlt_batch_job_get(&job);
		if (job.id[0]) {
			dlt_json_str(&j, "slurm_job", job.id);
			dlt_json_int(&j, "slurm_restart_count", job.restarts);
		}
		dlt_json_end(&j);
		/* in metrics.jsonl only: not a record of the run that never stopped */
		if ((rc = dlt_json_ok(&j)) == 0)
			rc = dlt_run_record(&s.run, j.buf.data);
		if (rc == 0 && h && h->record)
			h->record(h->ctx, j.buf.data);
		dlt_json_free(&j);
		if (rc < 0)
			goto fail;
	}
	dlt_ckpt_close(&k);
	rc = run(&s);
fail:
	if (s.run.dir && rc < 0)
		dlt_run_close(&s.run);
	dlt_ckpt_close(&k);
	teardown(&s);
	dlt_config_free(&c);
	free(yaml);
	return rc;
}
