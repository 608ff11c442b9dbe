/* train: datasets, the loader thread, the training loop, run directories.
 * The loop is in one place, dlt_train_run, readable in one sitting. */
#ifndef DLT_TRAIN_H
#define DLT_TRAIN_H

#include <pthread.h>

#include "util/util.h"
#include "config/config.h"
#include "nn/nn.h"

/* A dataset archive in memory: "x" [N, ...] u8 or f32, "y" (class ids
 * i32 [N], float targets f32 [N, K] or multi-hot labels u8 [N, K]:
 * dlt(7) ARCHIVE KINDS), and the normalisation of its metadata
 * (dlt-prep(1)). */
typedef struct dlt_dataset {
	char *path;
	size_t n;		/* samples */
	int features;		/* floats per sample */
	int n_classes;		/* the model's outputs: classes, targets or labels */
	int ndim;		/* of one sample */
	int64_t shape[4];
	dlt_shape sample;	/* the model's view: [F] is F x 1 x 1, [H, W] 1 x H x W */
	int dtype;		/* DLT_U8 or DLT_F32 */
	const void *x;		/* in the archive's mapping when stored raw */
	void *x_own;		/* else a copy, which this is */
	struct dlt_archive *archive;	/* open while x points into it */
	int32_t *y;		/* class ids; NULL: none (dlt-prep csv --label none) */
	int task;		/* enum dlt_task: what "y" holds */
	/* float targets or multi-hot labels ([n, n_classes], t_dtype f32
	 * or u8), in the archive's mapping or in t_own; NULL: none */
	const void *t;
	void *t_own;
	int t_dtype;
	/* regression: the training set's targets' mean and std (n_classes
	 * each); the loader hands over (t - mean) / std */
	float *t_mean, *t_std;
	/* x_normalised = (x * scale - mean[j % n_stats]) / std[j % n_stats] */
	float scale;
	float *mean, *inv_std;
	int n_stats;
} dlt_dataset;

int dlt_dataset_load(dlt_dataset *d, const char *path);
/* Uses the normalisation of src (the training set's) for d too. */
int dlt_dataset_use_stats(dlt_dataset *d, const dlt_dataset *src);
void dlt_dataset_free(dlt_dataset *d);
/* Whether d has targets to train on (class ids, float targets or labels) */
int dlt_dataset_has_targets(const dlt_dataset *d);
/* Normalised samples order[0..count) into x, their targets into y (when
 * not NULL): class ids (i32, -1 without), or n_classes floats a sample. */
void dlt_dataset_gather(const dlt_dataset *d, const uint32_t *order, int count, float *x, void *y);

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
 * them, so data preparation overlaps compute. */
typedef struct dlt_loader {
	const dlt_dataset *d;
	const dlt_backend *be;	/* its host_alloc holds the batches */
	int batch;		/* of all ranks together */
	int rank, ranks;	/* data parallelism: this rank's slice of each batch */
	float *x[2];
	void *y[2];		/* targets: dlt_loss_target_size bytes a sample */
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
 * model's upload_async can copy them while the step before runs. */
int dlt_loader_start(dlt_loader *l, const dlt_dataset *d, int batch, int rank, int ranks,
		     const dlt_backend *be);
/* Begins a pass over order[0..n) (the caller keeps order alive), with
 * augmentation when aug is not NULL. */
void dlt_loader_pass(dlt_loader *l, const uint32_t *order, size_t n, const dlt_augment *aug);
/* The next batch of the pass: returns its size, 0 at the end; *mine is
 * the size of this rank's slice of it (rank r of R takes samples
 * [size * r / R, size * (r + 1) / R) of each batch), which x and y hold.
 * The buffers stay valid until the next call. */
int dlt_loader_next(dlt_loader *l, float **x, void **y, int *mine);
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
 * promotions do), and config.yaml says so. */
int dlt_train_resume(const char *rundir, int epochs, const dlt_train_hooks *h,
		     dlt_train_result *res);

/* What rundir holds: no run (no metrics.jsonl: dlt_train_run may create
 * one there), a run that dlt_train_resume continues, or a run whose status
 * says done (dlt-train --auto-resume's question after a requeue). */
enum { DLT_RUNDIR_NONE, DLT_RUNDIR_UNFINISHED, DLT_RUNDIR_DONE };
int dlt_train_rundir_state(const char *rundir);

#endif
