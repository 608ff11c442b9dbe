/* train: datasets, the loader thread, the training loop, run directories.
 * The loop is in one place, dlt_train_run, readable in one sitting. */
#ifndef DLT_TRAIN_H
#define DLT_TRAIN_H

#include <pthread.h>

#include "util/util.h"
#include "config/config.h"
#include "nn/nn.h"

/* A source of samples: all the loader knows of the data.  Sample i of
 * [0, n) is a tensor of ndim (1 to 4) dims of dtype (DLT_U8, DLT_F32,
 * DLT_I32, DLT_U16 or DLT_U32), and its target one of:
 *   t_dtype DLT_I32, t_ndim 0    a class id (-1: none for this sample);
 *   t_dtype DLT_I32, t_ndim 1    t_dims[0] class ids (per position: tokens);
 *   t_dtype DLT_F32, t_ndim 1    t_dims[0] floats (regression targets as
 *                                stored, multi-hot labels as 0 and 1);
 *   t_dtype 0                    none (data to predict).
 * gather(src, order, n, x, y) writes samples order[0..n) one after another
 * into x, raw (in dtype, as stored), and their targets into y (when y is
 * not NULL) in t_dtype.  It is called from the loader's thread while the
 * caller may read the source's description, so it must not change the
 * source; it cannot fail (a source checks its data when it is opened).
 * What the model sees is the loader's business: normalisation
 * (dlt_normalise) and augmentation are transforms after gather.
 *
 * An implementation embeds a dlt_source as its first member (or points
 * ctx at its state) and fills in gather and close; close frees what the
 * source holds (not the dlt_source itself, which the caller owns).  The
 * dataset archive (dlt_dataset, below) is one; a token stream is another. */
typedef struct dlt_source {
	size_t n;		/* samples */
	int ndim;
	int64_t dims[4];
	int dtype;
	int t_dtype, t_ndim;
	int64_t t_dims[4];
	void (*gather)(const struct dlt_source *src, const uint32_t *order, int n, void *x,
		       void *y);
	void (*close)(struct dlt_source *src);
	void *ctx;		/* the implementation's, if it does not embed */
} dlt_source;

/* Elements of one sample; bytes of one sample as gather writes it; bytes
 * of one sample's target (at least 4: the loader hands class ids of -1 to
 * a source without targets). */
size_t dlt_source_features(const dlt_source *src);
size_t dlt_source_sample_bytes(const dlt_source *src);
size_t dlt_source_target_bytes(const dlt_source *src);
/* The model's view of a sample: [F] is F x 1 x 1, [H, W] 1 x H x W,
 * [C, H, W, ...] C x H x (the rest) */
dlt_shape dlt_source_shape(const dlt_source *src);
void dlt_source_close(dlt_source *src);	/* src->close, if any */

/* A token archive (dlt-prep text) as a source of windows of T tokens,
 * each position's target the token after it: n random windows drawn from
 * Philox(seed, sample index) (random), or up to n fixed ones, window i at
 * token i T.  *out is the caller's to dlt_source_close, which frees it. */
struct dlt_tokens;
int dlt_token_source_open(dlt_source **out, const char *path, int T, size_t n, uint64_t seed,
			  int random);
/* The stream of a token source: its tokenizer and bytes a token */
const struct dlt_tokens *dlt_token_source_tokens(const dlt_source *src);

/* The loader's transform of gathered samples into the model's floats:
 * x = (raw * scale - mean[j % n_stats]) * inv_std[j % n_stats], j the
 * element's index in its sample; float targets become (t - t_mean[k]) /
 * t_std[k] where t_mean is not NULL (regression).  The arrays are the
 * dataset's (the training set's stats), alive as long as it is. */
typedef struct dlt_normalise {
	float scale;
	const float *mean, *inv_std;
	int n_stats;
	const float *t_mean, *t_std;	/* t_k each, or NULL */
	int t_k;
	/* the samples rounded to this enum dlt_prec after the transforms
	 * (DLT_PREC_F32: not), the model's dlt_model_input_prec: on the
	 * loader's thread, not the step's */
	int round;
} dlt_normalise;

/* One archive of a dataset: its samples are [first, first + n) of the
 * dataset's.  x, y and t point into the archive's mapping where they are
 * stored raw (and y is aligned), else into the copies *_own. */
typedef struct dlt_dataset_part {
	char *path;
	struct dlt_archive *archive;
	size_t first, n;
	const void *x;
	void *x_own;
	const int32_t *y;
	int32_t *y_own;
	const void *t;
	void *t_own;
} dlt_dataset_part;

/* A dataset of one or several archives (read as one: the samples of the
 * first, then of the second, ...): "x" [N, ...] u8 or f32, "y" (class ids
 * i32 [N], float targets f32 [N, K] or multi-hot labels u8 [N, K]: dlt(7)
 * ARCHIVE KINDS), and the normalisation of the first archive's metadata
 * (dlt-prep(1)).  Nothing is copied where the archive stores it raw, so a
 * dataset larger than memory trains from the page cache.  It is a source
 * (src, its first member). */
typedef struct dlt_dataset {
	dlt_source src;
	char *path;		/* the first archive's */
	size_t n;		/* samples */
	int features;		/* floats per sample */
	int n_classes;		/* the model's outputs: classes, targets or labels */
	int ndim;		/* of one sample */
	int64_t shape[4];
	dlt_shape sample;	/* the model's view: [F] is F x 1 x 1, [H, W] 1 x H x W */
	int dtype;		/* DLT_U8 or DLT_F32 */
	dlt_dataset_part *parts;
	int n_parts;
	int targets;		/* it has targets to train on */
	/* of a dataset of one archive, its part's x, y and t (NULL with
	 * several: read them through src.gather) */
	const void *x;
	const int32_t *y;	/* class ids; NULL: none (dlt-prep csv --label none) */
	int task;		/* enum dlt_task: what "y" holds */
	/* float targets or multi-hot labels ([n, n_classes], t_dtype f32
	 * or u8); NULL: none */
	const void *t;
	int t_dtype;
	/* regression: the training set's targets' mean and std (n_classes
	 * each); the loader hands over (t - mean) / std */
	float *t_mean, *t_std;
	/* x_normalised = (x * scale - mean[j % n_stats]) / std[j % n_stats] */
	float scale;
	float *mean, *inv_std;
	int n_stats;
	/* token data: the stream's tokenizer (its source owns it), which
	 * checkpoints carry for dlt-infer --generate; NULL otherwise */
	const struct dlt_tokenizer *tokenizer;
} dlt_dataset;

int dlt_dataset_load(dlt_dataset *d, const char *path);
/* paths[0..n) read as one dataset.  They must agree in sample shape and
 * dtype and in the kind of target (and its width), or it is DLT_EINPUT
 * naming both files; the normalisation is the first archive's, n_classes
 * of class ids the largest of theirs. */
int dlt_dataset_load_list(dlt_dataset *d, char *const *paths, int n);
/* Uses the normalisation of src (the training set's) for d too. */
int dlt_dataset_use_stats(dlt_dataset *d, const dlt_dataset *src);
void dlt_dataset_free(dlt_dataset *d);
/* Whether d has targets to train on (class ids, float targets or labels) */
int dlt_dataset_has_targets(const dlt_dataset *d);
/* The transform of d's samples into the model's input */
dlt_normalise dlt_dataset_normalise(const dlt_dataset *d);
/* Normalised samples order[0..count) into x, their targets into y (when
 * not NULL): class ids (i32, -1 without), or n_classes floats a sample
 * (standardised): what the loader makes of the source, bit for bit, in
 * the caller's thread and without a buffer of raw samples. */
void dlt_dataset_gather(const dlt_dataset *d, const uint32_t *order, int count, float *x, void *y);
/* The transforms alone: raw samples (n of src's, as gather wrote them)
 * into the model's floats, normalised and rounded to nm->round (without
 * nm: their values as floats, but i32
 * token ids, which stay i32 in the floats' place for the embedding), and
 * targets in place (float targets standardised; others as they are). */
void dlt_normalise_samples(const dlt_normalise *nm, const dlt_source *src, const void *raw,
			   int n, float *x);
void dlt_normalise_targets(const dlt_normalise *nm, const dlt_source *src, void *y, int n);

/* Random crops and flips of training images (config data.augment), drawn
 * from Philox keyed by the seed, the epoch and the sample's position in
 * the epoch: the same in a resumed run. */
typedef struct dlt_augment {
	int crop, flip;
	uint64_t seed;
	int epoch;
	size_t first;		/* position of order[0] in the epoch */
} dlt_augment;

/* The loader fills batches in a thread, one ahead of the step that uses
 * them, so data preparation overlaps compute: gather from the source,
 * normalise, augment. */
typedef struct dlt_loader {
	const dlt_source *src;
	dlt_normalise norm;
	int norm_on;		/* norm applies (else samples as their values) */
	dlt_shape shape;	/* of a sample, for augmentation */
	size_t features;
	const dlt_backend *be;	/* its host_alloc holds the batches */
	int batch;		/* of all ranks together */
	int rank, ranks;	/* data parallelism: this rank's slice of each batch */
	float *x[2];
	void *y[2];		/* targets: dlt_source_target_bytes a sample */
	void *raw;		/* a slice of samples as the source gathers them */
	int count[2], total[2], full[2];
	const uint32_t *order;	/* the pass: samples in this order */
	dlt_augment aug;
	int augment;
	float *scratch;		/* one image, for augmentation */
	size_t n, n_batches, next_fill, next_take;
	int holding, filling, quit;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
} dlt_loader;

/* The batches are in be's host memory (pinned on a GPU), so that the
 * model's upload_async can copy them while the step before runs.  norm:
 * the transform of src's samples (copied; its arrays must outlive the
 * loader), or NULL: samples as their values (token ids), targets as they
 * are. */
int dlt_loader_start(dlt_loader *l, const dlt_source *src, const dlt_normalise *norm,
		     int batch, int rank, int ranks, const dlt_backend *be);
/* Begins a pass over order[0..n) (the caller keeps order alive), with
 * augmentation when aug is not NULL. */
void dlt_loader_pass(dlt_loader *l, const uint32_t *order, size_t n, const dlt_augment *aug);
/* The next batch of the pass: returns its size, 0 at the end; *mine is
 * the size of this rank's slice of it (rank r of R takes samples
 * [size * r / R, size * (r + 1) / R) of each batch), which x and y hold.
 * The buffers stay valid until the next call. */
int dlt_loader_next(dlt_loader *l, float **x, void **y, int *mine);
/* Whether the batches come rounded to a precision (norm's round, which
 * train sets from dlt_model_input_prec) */
int dlt_loader_rounds(const dlt_loader *l);
void dlt_loader_stop(dlt_loader *l);

/* What the loop reports as it goes; the program decides how to show it. */
typedef struct dlt_progress {
	int epoch, epochs;	/* 1-based */
	long long step, steps_per_epoch, step_in_epoch;
	double loss;		/* running mean over the epoch */
	double samples_per_s, elapsed_s, eta_s;
} dlt_progress;

typedef struct dlt_epoch_summary {
	int epoch, epochs;
	double loss;		/* training, over the epoch */
	double val_loss;	/* NaN without a validation split */
	double test_loss;	/* NaN without a test set */
	/* The task's metrics (dlt_loss_metric_names): names[0..n_train) of
	 * training, all n of the evaluations (NaN: no such split) */
	const char *names[DLT_MAX_METRICS];
	int n, n_train;
	double train[DLT_MAX_METRICS], val[DLT_MAX_METRICS], test[DLT_MAX_METRICS];
	double samples_per_s, elapsed_s;
} dlt_epoch_summary;

/* What the program asks of the loop after a step (dlt_train_hooks.poll). */
enum { DLT_POLL_CHECKPOINT = 1, DLT_POLL_STOP = 2 };

typedef struct dlt_train_hooks {
	void *ctx;
	void (*record)(void *ctx, const char *json);	/* each metrics line */
	void (*progress)(void *ctx, const dlt_progress *p);
	void (*epoch)(void *ctx, const dlt_epoch_summary *s);
	/* what the run survives: a checkpoint not written, a damaged one
	 * passed over on resume */
	void (*warn)(void *ctx, const char *msg);
	/* after every step: DLT_POLL_* bits (SIGUSR1: checkpoint; SIGTERM:
	 * checkpoint and stop) */
	int (*poll)(void *ctx);
	double t_start;		/* dlt_now() when the program started; 0: unknown */
	const char *note;	/* on resume: why, for the resume record */
	/* Data parallelism: this process is ranks->rank of ranks->size,
	 * the ranks sum their gradients through comm (NULL: one process).
	 * Every rank runs the loop on its slice of every batch; rank 0
	 * alone writes the run directory. */
	const struct dlt_rank_info *ranks;
	struct dlt_comm *comm;
	/* dlt_train_resume: the config whose dist (ZeRO stage, pipeline)
	 * the run goes on with, NULL for its checkpoint's: a run resumes on
	 * other ranks in another layout */
	const dlt_config *layout;
} dlt_train_hooks;

typedef struct dlt_train_result {
	double test_loss;	/* NaN without a test set */
	/* the task's first metric on the test set (acc, rmse, ...) */
	const char *test_metric;
	double test_value;
	long long steps;
	double elapsed_s;
	int stopped;		/* DLT_POLL_STOP: checkpointed, not finished */
	char ckpt[4096];	/* the last checkpoint written, "" if none */
} dlt_train_result;

/* Trains c to the end.  rundir: created (must not hold a run already);
 * gets config.yaml, metrics.jsonl, status, ckpt/ and model.dlt.  NULL:
 * no run directory (and no checkpoints). */
int dlt_train_run(const dlt_config *c, const char *rundir, const dlt_train_hooks *h,
		  dlt_train_result *res);
/* Continues the run in rundir from its newest checkpoint that verifies
 * (a damaged one is reported through warn and the one before it used),
 * or from the start when it has none; bit for bit the run it would have
 * been.  metrics.jsonl loses what came after that checkpoint and gains a
 * "resume" record.  epochs: 0 keeps the run's train.epochs; more raises it
 * (a run that is done goes on from its last checkpoint, as dlt-search's
 * promotions do), and config.yaml says so.  steps: the same for the
 * train.steps of a run on token data (0 keeps them). */
int dlt_train_resume(const char *rundir, int epochs, long long steps,
		     const dlt_train_hooks *h, dlt_train_result *res);

/* What rundir holds: no run (no metrics.jsonl: dlt_train_run may create
 * one there), a run that dlt_train_resume continues, or a run whose status
 * says done (dlt-train --auto-resume's question after a requeue). */
enum { DLT_RUNDIR_NONE, DLT_RUNDIR_UNFINISHED, DLT_RUNDIR_DONE };
int dlt_train_rundir_state(const char *rundir);

#endif
