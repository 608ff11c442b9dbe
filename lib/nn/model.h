/* The model's insides, shared by nn.c and the white-box tests (the
 * gradient checks look at activations to avoid differences across a
 * kink).  Everything else uses nn.h. */
#ifndef DLT_NN_MODEL_H
#define DLT_NN_MODEL_H

#include "nn/nn.h"

/* Ops that a residual block adds around its layers, after DLT_LAYER_*. */
enum { DLT_OP_FORK = 100, DLT_OP_ADD };

/* A tensor between ops: max_batch rows of n floats (one image, channel-
 * major).  Its activations and gradient are its own or another tensor's:
 * a_of and g_of name the tensor that owns each (itself when own). */
typedef struct dlt_tensor {
	dlt_shape s;
	/* positions a sample: T for a sequence [T, C] (s is then {C, 1, 1},
	 * per position), 1 otherwise */
	int rows;
	size_t n;		/* floats per sample: rows * c * h * w */
	int a_of, g_of;
	float *a, *g;		/* set on the owners */
	int pooled;		/* a is in the model's pool */
	/* bf16 and fp16 training: an activation backward reads is kept in
	 * half, 16 bits, from the forward of op narrow_at (its last reader
	 * there); the ops whose backward can read 16 bits (dense, attention,
	 * an activation's, a remake) read half, and where one cannot, a is
	 * widened again before the backward of op widen_at (its first there);
	 * a is then in the pool, for those two spans only.  held: half holds
	 * this step's values.  read16: backward's readers read half; so they
	 * do of an output remade in 16 bits (half_pooled: half is in the pool,
	 * where backward remakes it). */
	uint16_t *half;
	int narrow_at, widen_at, held, read16, half_pooled;
	/* halves: a pooled activation's block in backward (widened or made
	 * again there) apart from its block in forward, a_fwd, so that each
	 * packs on its own; a is a_back from then to the next forward */
	float *a_fwd, *a_back;
	int back_apart;
} dlt_tensor;

/* One op of the flattened model.  A residual block becomes
 *   FORK (in -> out, in2: the body's and the shortcut's input, both
 *         aliases of in's activations with gradients of their own),
 *   the body's ops, the shortcut's ops,
 *   ADD (in + in2 -> out; the gradients of in and in2 are out's),
 * so forward and backward are plain loops over the ops.  FORK's backward
 * sums the two paths' gradients into the block input's. */
struct dlt_layer {
	int kind;		/* DLT_LAYER_* or DLT_OP_* */
	int index;		/* of the layer in the config, flattened: names */
	int line;
	int in, out, in2;	/* tensors */
	int act;		/* an activation's own; dense/conv: the fused one */
	float slope;		/* leaky_relu */
	int fused;		/* an activation the op before it applies; a
				 * max pool: the ways (DLT_FUSES_*) the conv
				 * two before it does it */
	int pool_op;		/* conv: the max pool it does too (the op
				 * index, after its ReLU), 0: none */
	int by_pool;		/* a ReLU whose backward the max pool after it does */
	float rate;		/* dropout; attention: its weights' */
	int w, b;		/* params (batchnorm: gamma, beta); -1: none */
	int rm, rv;		/* buffers: batchnorm running mean and variance */
	float momentum, eps;	/* batchnorm */
	dlt_conv conv;		/* conv2d, n set per call */
	dlt_pool pool;		/* pools, n set per call */
	float *mask;		/* dropout: 0 or 1 / (1 - rate) per element */
	int masked;		/* dropout: the last forward applied mask */
	int32_t *arg;		/* maxpool: argmax per output */
	float *mean, *invstd;	/* batchnorm: the last training batch's;
				 * layernorm: its rows' mean and rstd */
	char name[DLT_NAME_MAX];	/* the config's name:, "" without */
	int tied;		/* dense: w is an embedding's (tie:), not its own */
	int ends_residual;	/* dense: the last of a residual block's (init) */
	int shared;		/* embedding: a tied head writes its gradient first */
	int remade_in;		/* backward: its input, which the op before made
				 * and the step did not keep, is made again first */
	int heads, causal;	/* attention */
	dlt_attn_dropout drop;	/* attention: the last forward's dropout */
	int w2, b2;		/* attention: the output projection's params */
	/* attention: q, k, v [rows, 3C], the heads' output [rows, C] and the
	 * rows' log-sum-exp [B, H, T]; their gradients.  With half (bf16 and
	 * fp16 where plan_halves keeps activations in 16 bits), qkv and att
	 * are in the pool at the op in forward, and half holds their 16 bits
	 * for backward (qkv's 3 rows C, then att's), which reads them there,
	 * a range of batches at a time. */
	float *qkv, *att, *lse, *dqkv, *datt;
	uint16_t *half;
};

/* The activations and gradient of tensor i. */
static inline float *dlt_tensor_a(const dlt_model *m, int i)
{
	return m->t[m->t[i].a_of].a;
}

static inline float *dlt_tensor_g(const dlt_model *m, int i)
{
	return m->t[m->t[i].g_of].g;
}

/* Whether op l's forward leaves its output rounded to the model's
 * precision itself, in the pass that ends it (bias_act's, or the
 * product's: DLT_ROUND_C), so that no pass of its own follows; its
 * backward does so for its input's gradient and its weights' */
static inline int dlt_op_rounds(const dlt_layer *l)
{
	return l->kind == DLT_LAYER_DENSE || l->kind == DLT_LAYER_ATTENTION;
}

/* A dense op's forward on rows rows of x (its input's positions rows of
 * their own) into y, rounded (dlt_op_rounds): training's and
 * generation's */
void dlt_dense_forward(const dlt_model *m, const dlt_layer *l, const float *x, float *y,
		       int rows);

#endif
