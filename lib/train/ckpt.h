/* ckpt: checkpoints and model files, both .dlt archives (archive.h).
 *
 * A checkpoint holds everything a run needs to go on bit-for-bit as if
 * it had never stopped.  Its metadata record is one JSON object:
 *
 *   {"kind": "checkpoint",   "model" for weights only (model.dlt, strip, import)
 *    "format": 1,
 *    "step": S,              optimiser updates done
 *    "epoch": E,             the epoch to go on with (1-based) ...
 *    "batch": B,             ... and the batches of it already done
 *    "epochs": N,            of the whole run
 *    "config": "YAML",       the resolved config (dlt_config_write_yaml)
 *    "input": {"shape": [C, H, W], "num_classes": K,
 *              "scale": s, "mean": [...], "std": [...],
 *              "task": "regression" | "multilabel", absent for classes,
 *              "target_mean": [...], "target_std": [...] (regression)},
 *                            what the model expects and the training
 *                            set's normalisation, for dlt-infer
 *    "loss_scale": 1,        fp16 dynamic loss scaling (1 for fp32)
 *    "scale_clean": N,       clean steps since the scale changed (optional, 0)
 *    "skipped": N,           steps skipped for inf/NaN gradients (optional, 0)
 *    "best": {"metric": "test.acc", "value": v, "step": S},  optional
 *    "sums": {...},          the loop's running sums of the epoch and of
 *                            the metrics window, so the records after a
 *                            resume are the ones it would have written
 *                            (classes: epoch_correct, window_correct;
 *                            other tasks: epoch_metrics, window_metrics)
 *    "metrics": "JSONL"}     the records of metrics.jsonl so far, less
 *                            their timings (samples_per_s, time, ...):
 *                            nothing in a checkpoint depends on the clock,
 *                            so a resumed run's are byte for byte the
 *                            uninterrupted run's
 *
 * The random state needs no tensor: every random number dlt draws comes
 * from Philox streams keyed by (train.seed, a stream number that the step,
 * epoch, layer or sample gives), so (seed, step, epoch, batch) is the
 * whole of it.  A model file has "kind": "model" and may lack the
 * training keys (epoch, batch, epochs, metrics, sums, best, loss_scale);
 * "config" and "input" are optional for imported weights.
 *
 * Tensors, all f32, shuffle-zstd where that is smaller (raw where a
 * sharded run placed them, below):
 *   "0.w", "0.b", "3.w", ...        parameters (batchnorm: w gamma, b beta), named "LAYER.ROLE" with
 *                                   the layer's index in the flattened
 *                                   model (residual blocks count their
 *                                   layers in order: body, then shortcut)
 *   "3.running_mean", "3.running_var"   buffers: state that is not trained
 *   "optim.m/0.w", "optim.v/0.w"    optimiser state of a parameter (Adam:
 *                                   m and v; SGD with momentum: m)
 *
 * A sharded run (ZeRO 1 to 3, a pipeline) writes the same tensors, with
 * the same values, in a layout that depends on the model alone, not on
 * the ranks, buckets or stages: each rank writes its own range of each
 * sharded tensor into the one file, and none gathers another's.  The
 * sharded tensors come first, raw, placed ahead (archive.h) in this
 * order: every param's value (ZeRO 1 and 2, whose ranks all hold the
 * weights, write them so too, each rank its range, so that one layout
 * serves every stage and split), then each param's "optim.m/P" and
 * "optim.v/P" in turn.  Then the metadata (a tokenizer's tensors before
 * it) and the buffers (rank 0's), written by rank 0 as above.  A model
 * file of a run whose weights are sharded (ZeRO 3, a pipeline) is written
 * so too, its params' values placed; ZeRO 1 and 2's rank 0 writes it as
 * any run does.  Every reader reads these files as any checkpoint, and
 * any run resumes from one.  A run of one process, or without dist.zero
 * or a pipeline, writes as it always did.
 *
 * Files of a run directory: ckpt/step-SSSSSSSS.dlt (the newest keep of
 * them), ckpt/best.dlt, model.dlt (weights only, at the end). */
#ifndef DLT_CKPT_H
#define DLT_CKPT_H

#include "train/train.h"

#define DLT_CKPT_FORMAT 1

/* Where the loop stands and what it has summed, besides model and
 * optimiser. */
typedef struct dlt_ckpt_state {
	long long step;		/* = the optimiser's */
	int epoch;		/* to go on with, 1-based */
	long long batch;	/* batches of it done */
	int epochs;
	double ep_loss, win_loss;	/* sums over the epoch and the window */
	long long ep_samples, win_samples;
	/* the task's metric sums (dlt_loss_add), over the epoch and the
	 * window: classification's correct count in [0] */
	double ep_m[DLT_TRAIN_SUMS], win_m[DLT_TRAIN_SUMS];
	int have_best;
	double best;
	long long best_step;
	dlt_buf metrics;	/* metrics.jsonl so far */
	double loss_scale;	/* = the optimiser's scale, clean and skipped */
	long long scale_clean, skipped;
} dlt_ckpt_state;

/* Writes a checkpoint of the run at step to path, or with st NULL a
 * model file (weights, config and input only), atomically: a failure leaves what
 * was there.  The optimiser's moments are in the params; on a GPU the host
 * copy is written, which dlt_model_pull brings up to date. */
int dlt_ckpt_write(const char *path, const dlt_config *c, const dlt_dataset *train,
		   const dlt_model *m, const dlt_ckpt_state *st, long long step);
/* A sharded run's checkpoint (or model file), written by every rank
 * without a gather; the ranks agree between the steps through their comm
 * (lib/train/train.c):
 *   1. rank 0: dlt_ckpt_shards_create makes path's temporary file, with
 *      the room of the sharded tensors (weights: the params' values;
 *      moments: 0, 1 (m) or 2 (m and v) optimizer moments a param), and
 *      gives its name, absolute, to the others (dlt_ckpt_shards_temp);
 *   2. every rank: dlt_ckpt_shards_put writes its range of each sharded
 *      tensor there, syncs and closes the file;
 *   3. rank 0, once all have: dlt_ckpt_shards_commit reads them back a
 *      piece at a time for the checksums, writes the headers and the rest
 *      (st NULL: a model file) and renames the file into place; or
 *      dlt_ckpt_shards_abort removes it.  Both free the writer.
 * Rank 0's host copies of the params that are not sharded and of the
 * buffers are written, which dlt_model_pull brings up to date. */
typedef struct dlt_ckpt_writer dlt_ckpt_writer;
int dlt_ckpt_shards_create(dlt_ckpt_writer **w, const char *path, const dlt_model *m,
			   int weights, int moments);
const char *dlt_ckpt_shards_temp(const dlt_ckpt_writer *w);
/* What a rank holds of the sharded tensors, in be's memory (a GPU's:
 * brought down a piece at a time): the weight block, current in [lo, hi)
 * (with weights), and the moments of [lo, hi), m[0] the moment of lo. */
typedef struct dlt_ckpt_shard {
	const dlt_backend *be;
	const float *w, *m, *v;
	size_t lo, hi;
} dlt_ckpt_shard;
/* *opened: whether tmp opened (ranks without the file system of rank 0
 * cannot); *err: the errno of a failure (ENOMEM for memory), else 0, so
 * that the ranks can tell rank 0 why. */
int dlt_ckpt_shards_put(const char *tmp, const dlt_model *m, int weights, int moments,
			const dlt_ckpt_shard *r, int *opened, int *err);
int dlt_ckpt_shards_commit(dlt_ckpt_writer *w, const dlt_config *c, const dlt_dataset *train,
			   const dlt_model *m, const dlt_ckpt_state *st, long long step);
void dlt_ckpt_shards_abort(dlt_ckpt_writer *w);

/* Reads path, checking every checksum: the config (loaded into c), then
 * after the caller has built the model and optimiser from it,
 * dlt_ckpt_restore fills them and st. */
typedef struct dlt_ckpt {
	struct dlt_archive *a;
	dlt_jval meta;
} dlt_ckpt;
int dlt_ckpt_open(dlt_ckpt *k, const char *path, dlt_config *c);
int dlt_ckpt_restore(dlt_ckpt *k, dlt_model *m, dlt_optim *o, dlt_ckpt_state *st);
void dlt_ckpt_close(dlt_ckpt *k);
/* What the model of an open checkpoint or model file expects, from its
 * "input": like gets the sample shape (ndim 3: C, H, W), features,
 * n_classes and the training set's normalisation (scale, mean, inv_std)
 * and path, but no samples; so dlt_dataset_use_stats(&data, like)
 * normalises new data bit for bit as training did.  Every value is
 * checked: a bad one is DLT_EINPUT.  Free like with dlt_dataset_free. */
int dlt_ckpt_input(const dlt_ckpt *k, dlt_dataset *like);

#endif
