/* kernels: compute behind one dispatch table per backend (as ggml's
 * backend struct).  lib/nn calls the table, never a backend directly.
 * All tensors are f32, row-major, contiguous, in the backend's memory
 * (alloc): host memory on the CPU, device memory on a GPU. */
#ifndef DLT_KERNELS_H
#define DLT_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {		/* kernels/cuda/ is compiled as CUDA C++ */
#endif

/* The precision of the matrix products (train.precision): their inputs are
 * rounded to it and summed in f32; the model rounds their outputs to it
 * too (round), so activations hold only values of that type.  Rounding
 * to fp16 overflows to inf as fp16 does: loss scaling sees it. */
enum dlt_prec { DLT_PREC_F32 = 0, DLT_PREC_BF16, DLT_PREC_F16 };
/* gemm's prec | DLT_ROUND_C: C rounded to prec too, as the product ends,
 * while it is still in cache (an activation or a gradient that nothing
 * is added to first): the bits of gemm then round, without the pass.
 * | DLT_A_EXACT, DLT_B_EXACT: the caller knows A (B) to hold values of
 * prec already (a model's activations and gradients do), so that a
 * backend that would check it and then spare the rounding (the CPU's
 * f32 kernels on bf16 or fp16) need not look; the bits are the same. */
/* | DLT_A_HALF, DLT_B_HALF (prec bf16 or fp16): A (B) holds prec's 16-bit
 * words (uint16_t, lda of them a row: a kept activation's half), read
 * as they are; a backward then needs no widened copy of it. */
enum { DLT_ROUND_C = 16, DLT_A_EXACT = 32, DLT_B_EXACT = 64, DLT_A_HALF = 128, DLT_B_HALF = 256 };
#define DLT_GEMM_FLAGS (DLT_ROUND_C | DLT_A_EXACT | DLT_B_EXACT | DLT_A_HALF | DLT_B_HALF)
/* The convolutions' prec (conv_forward, conv_backward and their pooled
 * ones) | DLT_X_EXACT: x holds values of prec already, | DLT_DY_EXACT: dy
 * does (a model's activations and gradients), so that a backend need not
 * check or round them for its products (the CPU looked at every one: 2%
 * of an fp16 CNN's step); the bits are the same. */
enum { DLT_X_EXACT = DLT_A_EXACT, DLT_DY_EXACT = DLT_B_EXACT };
#define DLT_CONV_FLAGS (DLT_X_EXACT | DLT_DY_EXACT)

/* The losses (train.loss).  Cross-entropy is softmax_xent's; the others
 * are element-wise, pointwise_loss's: y - t squared (mse), |y - t| (l1),
 * PyTorch's HuberLoss (huber, with delta), and binary cross-entropy of a
 * sigmoid of each output against a 0/1 target (bce, PyTorch's
 * BCEWithLogitsLoss). */
enum dlt_loss_kind { DLT_LOSS_XENT = 0, DLT_LOSS_MSE, DLT_LOSS_L1, DLT_LOSS_HUBER,
		     DLT_LOSS_BCE };

/* GELU_TANH is GPT-2's GELU, the tanh approximation (PyTorch's
 * approximate='tanh'); GELU is the exact one. */
enum dlt_act { DLT_ACT_NONE = 0, DLT_ACT_RELU, DLT_ACT_LEAKY_RELU, DLT_ACT_GELU,
	       DLT_ACT_TANH, DLT_ACT_SIGMOID, DLT_ACT_GELU_TANH };

/* A 2-d convolution over NCHW images: x [n, c, h, w], weights
 * [k, c / groups, kh, kw], bias [k], y [n, k, oh, ow] with
 * oh = (h + 2 ph - dh (kh - 1) - 1) / sh + 1 (likewise ow). */
typedef struct dlt_conv {
	int n, c, h, w;		/* input: batch, channels, height, width */
	int k, oh, ow;		/* output channels, height, width */
	int kh, kw;		/* kernel */
	int sh, sw;		/* stride */
	int ph, pw;		/* zero padding on each side */
	int dh, dw;		/* dilation */
	int groups;		/* c and k are multiples of it */
} dlt_conv;

/* The floats of a convolution's x, w and y */
static inline size_t dlt_conv_x_floats(const dlt_conv *s)
{
	return (size_t)s->n * s->c * s->h * s->w;
}

static inline size_t dlt_conv_w_floats(const dlt_conv *s)
{
	return (size_t)s->k * (s->c / s->groups) * s->kh * s->kw;
}

static inline size_t dlt_conv_y_floats(const dlt_conv *s)
{
	return (size_t)s->n * s->k * s->oh * s->ow;
}

/* Max or average pooling over NCHW images, each channel on its own.
 * Average pooling counts the padding as zeros (PyTorch's default
 * count_include_pad); global average pooling is kh = h, kw = w.
 * relu: max pooling of a ReLU's output that does the ReLU's backward too:
 * a window whose maximum is not above 0 gets the argmax -1, and no
 * gradient (dlt_maxpool_arg). */
typedef struct dlt_pool {
	int n, c, h, w;
	int oh, ow;
	int kh, kw, sh, sw, ph, pw;
	int relu;
} dlt_pool;

/* Dropout of the attention's weights: weight (i, j) of head h of batch b,
 * which is row r = row0 + (b H + h) T + i, is dropped when draw r T + j
 * of Philox(seed, stream) is below rate, else scaled by 1 / (1 - rate)
 * (dlt_attn_keep, kernels/common/math.h).  rate 0: no dropout.  row0:
 * b0 H T for a call on the step's batches from b0, else 0. */
typedef struct dlt_attn_dropout {
	float rate;
	uint64_t seed, stream, row0;
} dlt_attn_dropout;

/* What conv_pool_fuses says a backend does as one op */
enum { DLT_FUSES_FORWARD = 1, DLT_FUSES_BACKWARD = 2 };

/* The layout of dlt_backend: libdlt-cuda.so, built apart, fills one and
 * refuses a program of another layout.  One more with every change of
 * the struct. */
#define DLT_BACKEND_ABI 8

typedef struct dlt_backend {
	const char *name;
	/* Memory the kernels work on.  host: it is the host's own (the CPU),
	 * so the model skips its host mirror.  alloc returns zeroed memory or
	 * NULL; upload and download copy between it and host memory and
	 * return when done; copy and zero work within it. */
	int host;
	void *(*alloc)(size_t bytes);
	void (*free)(void *p);
	void (*upload)(void *dst, const void *src, size_t bytes);
	void (*download)(void *dst, const void *src, size_t bytes);
	void (*copy)(void *dst, const void *src, size_t bytes);
	void (*zero)(void *p, size_t bytes);
	/* Host memory that uploads go fastest from (pinned on a GPU), zeroed,
	 * or NULL; and a copy from it that returns at once: entries called
	 * after it see the data, and src must stay as it is until an entry
	 * that returns results (softmax_xent) has returned.  The loop uploads
	 * the next batch this way while the GPU still runs the step before.
	 * dst may be read by work called before the upload_async before this
	 * one (the model's two input buffers, taken by turns): the copy waits
	 * for that work, not for what came since. */
	void *(*host_alloc)(size_t bytes);
	void (*host_free)(void *p);
	void (*upload_async)(void *dst, const void *src, size_t bytes);

	/* C = alpha * op(A) * op(B) + beta * C, row-major, op = transpose when
	 * tX; A and B rounded to prec (enum dlt_prec; | DLT_ROUND_C: C too;
	 * | DLT_A_EXACT, DLT_B_EXACT: they are already; | DLT_A_HALF,
	 * DLT_B_HALF: 16-bit words, the pointer cast) */
	void (*gemm)(int prec, int tA, int tB, int M, int N, int K, float alpha,
		     const float *A, int lda, const float *B, int ldb,
		     float beta, float *C, int ldc);
	/* y[r][c] = act(y[r][c] + bias[c]) in place, rounded to prec (a
	 * product's output: the same pass); bias may be NULL */
	void (*bias_act)(float *y, const float *bias, int rows, int cols, int act, float slope,
			 int prec);
	/* out = act(x) element-wise (x == out allowed) */
	void (*act_forward)(const float *x, float *y, size_t n, int act, float slope);
	/* dx = dy * act'(x); y = act(x) is given too (sigmoid and tanh use it,
	 * and only it: dlt_act_backward_reads_y; the one not read may hold
	 * anything) */
	void (*act_backward)(const float *x, const float *y, const float *dy, float *dx,
			     size_t n, int act, float slope);
	/* db[c] = sum over rows of dy[r][c]; order fixed so results are deterministic */
	void (*bias_grad)(const float *dy, float *db, int rows, int cols);
	/* mean softmax cross-entropy over rows: dlogits = (softmax - onehot) / rows;
	 * returns the summed loss in *loss_sum and the count of argmax == label.
	 * dlogits may be logits (the model's loss writes over its outputs), as
	 * pointwise_loss's dy may be y. */
	void (*softmax_xent)(const float *logits, const int32_t *labels, int rows, int cols,
			     float *dlogits, double *loss_sum, int *correct);
	/* The mean of an element-wise loss (kind: enum dlt_loss_kind, not
	 * XENT) over rows x cols outputs y against targets t: dy gets its
	 * gradient; *loss_sum the loss summed over every element, each row's
	 * sum added in row order so the total does not depend on threads. */
	void (*pointwise_loss)(int kind, float delta, const float *y, const float *t, int rows,
			       int cols, float *dy, double *loss_sum);
	/* Dropout with a Philox mask keyed by (seed, stream): the same on every
	 * backend and machine.  mask gets 0 or 1/(1-rate). */
	void (*dropout)(const float *x, float *y, float *mask, size_t n, float rate,
			uint64_t seed, uint64_t stream);
	void (*mul)(const float *a, const float *b, float *y, size_t n);	/* y = a * b */
	/* Adam / AdamW update of n parameters; step >= 1; decoupled != 0 is
	 * AdamW.  Each gradient as read is times gscale first (a loss
	 * scale's inverse, a clipping's factor; 1: none), rounded: the bits
	 * of scaling g (scale) and then updating, without that pass. */
	void (*adam)(float *w, const float *g, float *m, float *v, size_t n, float lr,
		     float beta1, float beta2, float eps, float wd, int decoupled, long long step,
		     float gscale);
	/* SGD with momentum buffer buf (may be NULL when momentum == 0), PyTorch
	 * semantics; gscale as adam's */
	void (*sgd)(float *w, const float *g, float *buf, size_t n, float lr, float momentum,
		    int nesterov, float wd, int first, float gscale);

	/* Floats of scratch that conv_forward and conv_backward need for s
	 * at prec (the model plans it once, with the other buffers). */
	size_t (*conv_workspace)(int prec, const dlt_conv *s);
	/* y = act(conv(x, w) + b); b may be NULL.  x and w rounded to prec,
	 * and in backward dy too (db is the sum of the rounded dy), as the
	 * inputs of gemm; the arithmetic is f32's. */
	void (*conv_forward)(int prec, const dlt_conv *s, const float *x, const float *w, const float *b,
			     float *y, int act, float slope, float *work);
	/* From dy (the gradient of the conv's output, before any activation):
	 * dw and db are overwritten, not accumulated; db and dx may be NULL. */
	void (*conv_backward)(int prec, const dlt_conv *s, const float *x, const float *w, const float *dy,
			      float *dx, float *dw, float *db, float *work);
	/* A conv whose ReLU it applies (act) and the max pool after it, as
	 * one op that never writes the conv's output, where conv_pool_fuses
	 * says the backend has one for s and p at prec: DLT_FUSES_FORWARD,
	 * and DLT_FUSES_BACKWARD too where it has backward's (0, or NULL:
	 * none).  forward writes the pool's y and arg, the bits of
	 * conv_forward then maxpool_forward; backward, for a conv with no
	 * dx, takes the pool's dy and arg and writes the conv's dw and db
	 * (db may be NULL): those of maxpool_backward then conv_backward, to
	 * the order of their sums (the CPU's first 3x3 conv on a 2x2 pool
	 * sums in another, so its bits differ).  The workspace is
	 * conv_workspace's. */
	int (*conv_pool_fuses)(int prec, const dlt_conv *s, const dlt_pool *p);
	void (*conv_pool_forward)(int prec, const dlt_conv *s, const dlt_pool *p, const float *x,
				  const float *w, const float *b, int act, float slope, float *y,
				  int32_t *arg, float *work);
	void (*conv_pool_backward)(int prec, const dlt_conv *s, const dlt_pool *p, const float *x,
				   const float *dy, const int32_t *arg, float *dw, float *db,
				   float *work);
	/* Max pooling keeps, per output, the index of its input within the
	 * [h, w] plane (the first of equal maxima; padding never wins). */
	void (*maxpool_forward)(const dlt_pool *s, const float *x, float *y, int32_t *arg);
	void (*maxpool_backward)(const dlt_pool *s, const float *dy, const int32_t *arg, float *dx);
	void (*avgpool_forward)(const dlt_pool *s, const float *x, float *y);
	void (*avgpool_backward)(const dlt_pool *s, const float *dy, float *dx);
	/* Batch normalisation of x [n, c, hw] per channel.  Training: batch
	 * mean and biased variance normalise; mean and invstd (c floats each)
	 * are kept for backward; the running statistics move by momentum
	 * towards the batch's (running_var towards the unbiased variance), as
	 * PyTorch's BatchNorm.  Eval: the running statistics normalise. */
	void (*batchnorm_train)(int n, int c, int hw, const float *x, const float *gamma,
				const float *beta, float *y, float *mean, float *invstd,
				float *run_mean, float *run_var, float momentum, float eps);
	void (*batchnorm_eval)(int n, int c, int hw, const float *x, const float *gamma,
			       const float *beta, const float *run_mean, const float *run_var,
			       float eps, float *y);
	/* dgamma and dbeta are overwritten; dx may be NULL */
	void (*batchnorm_backward)(int n, int c, int hw, const float *x, const float *dy,
				   const float *gamma, const float *mean, const float *invstd,
				   float *dx, float *dgamma, float *dbeta);
	void (*add)(const float *a, const float *b, float *y, size_t n);	/* y = a + b */
	void (*scale)(float *x, size_t n, float s);			/* x *= s */
	/* x rounded in place to the nearest value of prec, ties to even */
	void (*round)(float *x, size_t n, int prec);
	/* 16-bit storage (bf16 and fp16 training keeps activations so between
	 * forward and backward): x, whose values are of prec already (round),
	 * as prec's 16-bit words, and back; exact (dlt_narrow16).  NULL where
	 * the backend keeps f32. */
	void (*narrow)(const float *x, uint16_t *y, size_t n, int prec);
	void (*widen)(const uint16_t *x, float *y, size_t n, int prec);
	/* How many of x are inf or NaN (fp16 loss scaling skips such steps). */
	size_t (*nonfinite)(const float *x, size_t n);
	/* The sum of x's squares in double, in DLT_SQUARES_CHUNK's order
	 * (kernels/common/math.h): the same bits on every backend. */
	double (*sum_squares)(const float *x, size_t n);

	/* The transformer's (GPT-2's) layers over [B, T, C] activations, rows
	 * = B * T.  Their backward ADDS into parameter gradients (+=), as
	 * llm.c's does, and overwrites the input's gradient; every sum has a
	 * fixed order, so the bits never depend on the number of threads. */
	/* Layer normalisation over the last dimension: x [rows, C];
	 * y = (x - mean) * rstd * gamma + beta, rstd = 1 / sqrt(var + eps)
	 * (the biased variance, PyTorch's); mean and rstd (rows floats each)
	 * are kept for backward. */
	void (*layernorm_forward)(const float *x, const float *gamma, const float *beta, float *y,
				  float *mean, float *rstd, int rows, int C, float eps);
	/* dx is overwritten; dgamma and dbeta are added to (+=), summed over
	 * rows in a fixed order, so the result does not depend on threads */
	void (*layernorm_backward)(const float *x, const float *dy, const float *gamma,
				   const float *mean, const float *rstd, float *dx, float *dgamma,
				   float *dbeta, int rows, int C);
	/* Token embedding: out[i, :] = w[ids[i], :] for n tokens, w [V, C].
	 * An id outside [0, V) gives a row of NaN, so bad data shows. */
	void (*embedding_forward)(const int32_t *ids, const float *w, float *out, int n, int C,
				  int V);
	/* dw[ids[i], :] += dout[i, :], each row's sum in token order: the
	 * same bits on any number of threads.  Ids outside [0, V) are skipped. */
	void (*embedding_backward)(const int32_t *ids, const float *dout, float *dw, int n, int C,
				   int V);
	/* Learned positions: y[b, t, :] = x[b, t, :] + p[t, :] (x == y
	 * allowed); backward: dp[t, :] += the sum over b of dy[b, t, :], in b
	 * order. */
	void (*positional_forward)(const float *x, const float *p, float *y, int B, int T, int C);
	void (*positional_backward)(const float *dy, float *dp, int B, int T, int C);
	/* Multi-head self-attention's core.  qkv [B, T, 3C]: head h's query
	 * at columns [h D, (h + 1) D), its key at C + h D, its value at
	 * 2 C + h D, D = C / H; out [B, T, C] (head h at h D); scores scaled
	 * by 1 / sqrt(D); causal: position t attends to 0..t only.  lse
	 * [B, H, T]: each row's log-sum-exp of its scaled scores, kept for
	 * backward (the weights' dropout, drop, comes after the softmax and
	 * leaves it alone).  The T x T scores are never stored: an online
	 * softmax over tiles of keys (flash attention), the dropout's mask
	 * drawn again where a tile needs it.  prec (enum dlt_prec): the
	 * model's, as gemm's; at bf16 and fp16 a backend whose attention is
	 * products (CUDA's) may multiply in that type, q, k and v rounded to it
	 * as gemm rounds its operands and the softmax's weights rounded to it
	 * before they weight v; the sums stay f32.  The CPU's kernels, not
	 * products, are f32 at any prec. */
	void (*attention_forward)(int prec, const float *qkv, float *out, float *lse, int B, int T,
				  int C, int H, int causal, dlt_attn_dropout drop);
	/* dqkv [B, T, 3C] overwritten from dout, the scores recomputed tile by
	 * tile from qkv and lse; out is forward's, for the D_i = rowsum(dout *
	 * out) term of the softmax's backward; drop forward's.  prec as
	 * forward's: dout rounded with q, k and v, and the scores' gradients
	 * dS with the weights. */
	void (*attention_backward)(int prec, const float *qkv, const float *out, const float *dout,
				   const float *lse, float *dqkv, int B, int T, int C, int H,
				   int causal, dlt_attn_dropout drop);
	/* The first failure of an entry since the backend started, or NULL;
	 * NULL itself on backends whose entries cannot fail (the CPU's).  An
	 * entry that failed leaves its outputs undefined, so the caller
	 * checks this where it reads results back (the loss, each step). */
	const char *(*error)(void);

	/* Generation's attention (lib/infer): n queries at positions q0 ..
	 * q0 + n - 1 of one sequence, causal, over the keys and values of
	 * positions 0 .. q0 + n - 1 (a KV cache: rows before q0 hold those of
	 * the tokens before).  qkv [q0 + n, 3C] as attention_forward's, out
	 * [n, C]: attention_forward's rows q0 .. q0 + n - 1 (B = 1, causal),
	 * to rounding (another order of sums).  No lse: nothing goes
	 * backward.  C / H at most 256. */
	void (*attention_decode)(const float *qkv, float *out, int q0, int n, int C, int H);
	/* The threads its entries use (the CPU's OpenMP and GEMM threads);
	 * NULL where its work is not on the host's threads */
	void (*set_threads)(int n);
	/* The kernel of its matrix products at prec, for the records (the
	 * machines differ): "dlt-avx2", "dlt-avx512-bf16", "openblas" ...;
	 * NULL: nothing to say */
	const char *(*gemm_name)(int prec);
	/* Generation multiplies a few rows by the same weights token after
	 * token: hold_weights(1) promises that gemm's B operands keep their
	 * values until hold_weights(0), so the backend may keep them in its
	 * own layout between calls (the CPU its packed panels: a batch of 1
	 * would spend most of a GEMM packing B).  The same bits either way.
	 * NULL: nothing to gain. */
	void (*hold_weights)(int on);
} dlt_backend;

const dlt_backend *dlt_backend_cpu(void);
/* CUDA device `device`, made current for this process (one device per
 * process; data parallelism runs a process per GPU).  NULL when there is
 * none, with the driver's reason in why. */
const dlt_backend *dlt_backend_cuda(int device, char *why, size_t n);
/* libdlt-cuda.so, opened once (NULL with the reason in why): the backend
 * and NCCL's comm (lib/comm) are in it. */
void *dlt_cuda_lib(char *why, size_t n);

#ifdef __cplusplus
}
#endif
/* The plain C reference of every kernel: what the fast ones are tested against. */
const dlt_backend *dlt_backend_ref(void);

#endif
