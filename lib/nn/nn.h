/* nn: layers, the model built from config, forward/backward, optimisers
 * and learning-rate schedules.  Activations are f32, [batch, features]
 * per layer (an image is its C*H*W features, channel-major).  All buffers
 * are planned once for the largest batch: the step allocates nothing. */
#ifndef DLT_NN_H
#define DLT_NN_H

#include "util/util.h"
#include "config/config.h"
#include "kernels/kernels.h"
#include "nn/loss.h"

/* The shape of one sample: channels, height, width (a vector of F
 * features is F x 1 x 1). */
typedef struct dlt_shape {
	int c, h, w;
} dlt_shape;

/* A trainable tensor: weights, gradient and optimiser state together.
 * The w (likewise g, m, v) of all params of a model are slices of one
 * block, in param order: params[0].w spans n_weights floats, so the
 * optimiser and the all-reduce handle the whole model at once.  Buffers
 * (batchnorm's running statistics) are dlt_params too, with only w.
 *
 * The kernels work on the backend's copy of the blocks (dlt_model's
 * dev_*), which on the CPU is the host's own.  On a GPU the host copy is
 * what checkpoints read and write: dlt_model_pull brings it up to date,
 * dlt_model_push sends it back. */
typedef struct dlt_param {
	char name[64];		/* "0.w", "0.b", "3.running_mean": layer index and role */
	float *w, *g;		/* value and gradient, n floats each, in host memory */
	float *m, *v;		/* optimiser state (adam m/v; sgd momentum in m) */
	size_t off;		/* where it starts in its block */
	size_t n;
	int ndim;
	int64_t dims[4];
} dlt_param;

typedef struct dlt_layer dlt_layer;
struct dlt_tensor;
typedef struct dlt_model {
	const dlt_backend *be;
	dlt_layer *layers;	/* the ops, in forward order (model.h) */
	int n_layers;
	struct dlt_tensor *t;	/* t[0] is the input, t[n_t - 1] the logits */
	int n_t;
	int max_batch;
	dlt_shape in_shape;
	int in_features, out_features;
	/* Backward computes the input's gradient (dlt_model_input_grad)
	 * only when this is set. */
	int want_input_grad;
	dlt_param *params;
	int n_params;
	size_t n_weights;	/* total floats in params */
	dlt_param *bufs;	/* state that is not trained */
	int n_bufs;
	float *work;		/* scratch of the conv kernels, planned once */
	/* halves: where backward widens 16-bit activations a range at a time
	 * (stage floats) */
	float *stage;
	size_t stage_n;
	/* what a step needs a while: the tensors' gradients, the activations
	 * that backward does not keep, attention's scratch (nn.c) */
	float *pool;
	uint64_t seed;		/* dropout masks: Philox keyed by seed, step, layer */
	int prec;		/* enum dlt_prec of the activations and products */
	int halves;		/* activations wait for backward in 16 bits (make_pool) */
	int init_gpt2;		/* train.init: gpt2 */
	int storage;		/* train.storage: 0 (auto), 16, 32 */
	int n_attention;	/* attention layers (GPT-2's init scales by them) */
	int out_rows;		/* positions of the output a sample (a sequence's T) */
	float loss_scale;	/* the loss's gradient is multiplied by it (fp16) */
	/* the blocks of params' w, g, m, v and of the buffers in the
	 * backend's memory (the host blocks themselves on a host backend) */
	float *dev_w, *dev_g, *dev_m, *dev_v, *dev_bufs;
	dlt_loss loss;		/* classification by default (dlt_model_set_loss) */
	int32_t *labels;	/* max_batch labels in the backend's memory */
	float *targets;		/* float targets: max_batch x out_features */
	/* The input's two buffers: dlt_model_set_input fills one while the
	 * step before may still read the other (its first layer's dW). */
	float *in_buf[2];
	int in_slot;
	/* bf16 and fp16: the ops that read the input round it to prec first
	 * (input_rounds), so it is rounded once (dlt_model_set_input), and
	 * they read it as it is (input_exact) until dlt_model_input hands
	 * out the rows to write */
	int input_rounds, input_exact;
	/* the loss's gradient is taken over this many samples (0: the
	 * batch's): data parallelism's ranks take the global batch's */
	int grad_batch;
	/* dlt_model_on_grads's */
	void (*grads_ready)(void *ctx, size_t off);
	void *grads_ctx;
	size_t *ready_at;	/* per op: the offset its backward finishes */
	/* dlt_model_on_params's */
	void (*params_use)(void *ctx, size_t a, size_t b, int need);
	void *params_ctx;
} dlt_model;

/* Builds the model of c for samples of shape in and n_classes outputs;
 * checks that shapes fit (errors name "config:line"); initialises weights
 * like PyTorch (uniform +-1/sqrt(fan_in)) from c->train.seed.  Every
 * buffer is planned here for batches up to max_batch: the step allocates
 * nothing.  The precision is c->train.precision's. */
int dlt_model_init(dlt_model *m, const dlt_config *c, const dlt_backend *be,
		   dlt_shape in, int n_classes, int max_batch);
void dlt_model_free(dlt_model *m);
/* The model's input: batch rows (batch x in_features floats) of host
 * memory that stays as it is until the next loss has been computed (the
 * loader's batch).  A host backend reads them there; on a GPU they are
 * copied while the step before still runs (upload_async).  Rounded to
 * dlt_model_input_prec where every op that reads them would round them:
 * by the model, or, rounded, by the caller already (the loader). */
void dlt_model_set_input(dlt_model *m, const float *x, int batch, int rounded);
/* The enum dlt_prec that the model rounds its input to (DLT_PREC_F32:
 * none), for a caller that rounds it first */
int dlt_model_input_prec(const dlt_model *m);
/* The input rows and their gradient after backward, in the backend's
 * memory (host backends: the caller may fill and read them in place). */
float *dlt_model_input(dlt_model *m);
float *dlt_model_input_grad(dlt_model *m);
/* Runs the model on batch input rows; returns the logits in the backend's
 * memory, or NULL if batch is not in 1..max_batch.  train != 0: dropout,
 * batch statistics (and their running averages move); step (>= 0) keys
 * dropout's mask. */
float *dlt_model_forward(dlt_model *m, int batch, int train, long long step);
/* A pipeline's stage: ops [from, to) on batch rows, forward (the input
 * of op from in its tensor) and backward (the gradient of op to - 1's
 * output in its tensor); dlt_model_forward and _backward are all ops. */
void dlt_model_forward_ops(dlt_model *m, int from, int to, int batch, int train, long long step);
void dlt_model_backward_ops(dlt_model *m, int from, int to, int batch);
/* Whether a stage may begin at op i: one tensor passes from the ops
 * before (no residual block open, and op i neither an activation that the
 * op before applies nor one whose input backward remakes by running the
 * op before again). */
int dlt_model_can_cut(const dlt_model *m, int i);
/* Op i's multiply-adds a sample, roughly (its params times the positions
 * they apply at; attention's scores too; a lookup or an element-wise op
 * its outputs): what a pipeline balances its stages by. */
double dlt_model_op_cost(const dlt_model *m, int i);
/* Where the params of ops op, op + 1, ... begin in the weight block (a
 * tied head's weights are its embedding's); n_weights if they have none. */
size_t dlt_model_params_from(const dlt_model *m, int op);
/* The last forward's logits (batch x out_features) copied to host memory:
 * before dlt_model_loss, which writes their gradient over them. */
void dlt_model_output(dlt_model *m, float *out, int batch);
/* A language model's vocabulary: the rows of its first layer, an
 * embedding that reads token ids; 0 for a model of other inputs. */
int dlt_model_token_vocab(const dlt_model *m);
/* Trains the model for l's task and loss instead of softmax cross-
 * entropy over classes; l->outputs must be out_features. */
int dlt_model_set_loss(dlt_model *m, const dlt_loss *l);
/* The loss of the last forward's outputs against targets (host memory,
 * dlt_loss_target_size bytes a sample); fills the outputs' gradient
 * (times loss_scale), over the outputs themselves; returns the mean loss
 * (over samples, and over outputs for element-wise losses).
 * Classification counts the correct predictions into *correct. */
double dlt_model_loss(dlt_model *m, const void *targets, int batch, int *correct);
/* Backpropagates from the loss gradient, filling every param's g. */
void dlt_model_backward(dlt_model *m, int batch);
/* Has backward call ready(ctx, off) as soon as the gradients from off to
 * the end of the block are final (they become final from the end down),
 * so that data parallelism sums them while backward goes on. */
int dlt_model_on_grads(dlt_model *m, void (*ready)(void *ctx, size_t off), void *ctx);
/* Has every op that reads params call use(ctx, a, b, 1) for each run
 * [a, b) of the weight block it reads (its own, a tied head's embedding)
 * before it runs, in forward, in a remade forward and in backward, and
 * use(ctx, a, b, 0) once it is done with them: ZeRO 3 gathers them for
 * the op and lets them go after. */
void dlt_model_on_params(dlt_model *m, void (*use)(void *ctx, size_t a, size_t b, int need),
			 void *ctx);
/* The calls to use of a forward (backward 0) or of a forward and a
 * backward (1), in their order, without computing: a rank with no sample
 * of a batch still takes part in the others' gathers. */
void dlt_model_params_pass(dlt_model *m, int backward);
/* The backend's first failure (a GPU's), NULL while none: the loss and
 * everything after it are then meaningless. */
const char *dlt_model_error(const dlt_model *m);
/* The host copy of weights, optimiser state and buffers from the
 * backend's, and back (no-ops on host backends). */
void dlt_model_pull(dlt_model *m);
void dlt_model_push(dlt_model *m);

/* Writes every param's and buffer's values as an f32 tensor named after
 * it, with codec (archive.h) at level. */
struct dlt_archive_writer;
struct dlt_archive;
int dlt_model_write(const dlt_model *m, struct dlt_archive_writer *w, int codec, int level);
/* The buffers' alone (a sharded checkpoint places the params: ckpt.h) */
int dlt_model_write_buffers(const dlt_model *m, struct dlt_archive_writer *w, int codec,
			    int level);
/* Reads them back by name from an archive; each must be there with the
 * same shape. */
int dlt_model_read(dlt_model *m, struct dlt_archive *a);

/* The step of one rank of several (dist.zero, dlt-train(1) MULTI-GPU AND
 * MULTI-NODE): the block is cut into ranges, rank r's [ranges[r],
 * ranges[r + 1]), and the gradients' global norm is the sum of the
 * ranges' squared norms, added in rank order, so that it has the same
 * bits whichever rank holds which gradients.  shard (ZeRO 1 and 2): the
 * rank holds the summed gradients of its range only, keeps m and v of it
 * alone and updates it alone (the caller gathers the parameters after);
 * else every rank holds the whole summed gradient and updates the whole
 * block.  Skips and clipping are decided by all ranks together, through
 * sum (a few host values summed over the ranks, blocking). */
typedef struct dlt_optim_ranks {
	const size_t *ranges;	/* size + 1 offsets, the caller's */
	int rank, size;
	int shard;
	int (*sum)(void *ctx, double *x, int n);
	void *ctx;
} dlt_optim_ranks;

/* Optimiser over all params of a model (state allocated once, in the
 * params' m and v, freed by dlt_model_free; with ranks that shard, in sm
 * and sv, freed by dlt_optim_free). */
typedef struct dlt_optim {
	dlt_optim_cfg cfg;
	const dlt_backend *be;
	long long step;		/* steps done, skipped ones too */
	long long skipped;	/* steps skipped for a gradient of inf or NaN */
	/* fp16 dynamic loss scaling (PyTorch's GradScaler): the scale halves
	 * at each skipped step and doubles after growth_interval clean ones;
	 * 1 and never changing otherwise */
	int dynamic;
	double scale;
	long long clean;	/* clean steps since the scale last changed */
	int growth_interval;
	double clip;		/* train.clip: the gradients' largest global norm, 0: none */
	double grad_norm;	/* the last step's, before clipping (with clip) */
	int has_ranks;		/* ranks is set (dlt_optim_init_ranks) */
	dlt_optim_ranks ranks;
	/* ranks that shard: m and v of this rank's range, in the backend's
	 * memory (the model's dev_m, dev_v and params' m, v are then NULL) */
	float *sm, *sv;
	size_t state_bytes;	/* the optimiser state this rank holds */
} dlt_optim;
/* loss_scale > 0 turns on dynamic loss scaling from that scale (fp16's
 * train.loss_scale); 0 leaves it off. */
int dlt_optim_init(dlt_optim *o, const dlt_optim_cfg *cfg, dlt_model *m, double loss_scale,
		   int growth_interval);
/* The same for one rank of several (r, copied; its ranges stay the
 * caller's): with r->shard, the state of its range alone. */
int dlt_optim_init_ranks(dlt_optim *o, const dlt_optim_cfg *cfg, dlt_model *m,
			 double loss_scale, int growth_interval, const dlt_optim_ranks *r);
void dlt_optim_free(dlt_optim *o);
/* One step from the gradients that backward left, scaled by o->scale:
 * when they are finite, unscales them and updates the params; else (with
 * loss scaling) skips the update.  Moves the scale and sets
 * m->loss_scale for the next step.  Returns 1 if it updated, 0 if not,
 * or (ranks' sums only) an error. */
int dlt_optim_step(dlt_optim *o, dlt_model *m, double lr);

/* Learning rate at an update step (0-based) of a run of steps_per_epoch x epochs. */
double dlt_lr_at(const dlt_optim_cfg *o, const dlt_sched_cfg *s, long long step,
		 long long steps_per_epoch, long long total_steps);

#endif
