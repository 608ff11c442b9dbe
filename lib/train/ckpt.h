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
 * Tensors, all f32, shuffle-zstd where that is smaller:
 *   "0.w", "0.b", "3.w", ...        parameters (batchnorm: w gamma, b beta), named "LAYER.ROLE" with
 *                                   the layer's index in the flattened
 *                                   model (residual blocks count their
 *                                   layers in order: body, then shortcut)
 *   "3.running_mean", "3.running_var"   buffers: state that is not trained
 *   "optim.m/0.w", "optim.v/0.w"    optimiser state of a parameter (Adam:
 *                                   m and v; SGD with momentum: m)
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
