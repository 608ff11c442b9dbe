/* kernels: compute behind one dispatch table per backend (as ggml's
 * backend struct).  lib/nn calls the table, never a backend directly.
 * All tensors are f32, row-major, contiguous. */
#ifndef DLT_KERNELS_H
#define DLT_KERNELS_H

#include <stddef.h>
#include <stdint.h>

enum dlt_act { DLT_ACT_NONE = 0, DLT_ACT_RELU, DLT_ACT_LEAKY_RELU, DLT_ACT_GELU,
	       DLT_ACT_TANH, DLT_ACT_SIGMOID };

typedef struct dlt_backend {
	const char *name;
	/* C = alpha * op(A) * op(B) + beta * C, row-major, op = transpose when tX */
	void (*gemm)(int tA, int tB, int M, int N, int K, float alpha,
		     const float *A, int lda, const float *B, int ldb,
		     float beta, float *C, int ldc);
	/* y[r][c] = act(y[r][c] + bias[c]) in place; bias may be NULL */
	void (*bias_act)(float *y, const float *bias, int rows, int cols, int act, float slope);
	/* out = act(x) element-wise (x == out allowed) */
	void (*act_forward)(const float *x, float *y, size_t n, int act, float slope);
	/* dx = dy * act'(x); y = act(x) is given too (sigmoid and tanh use it) */
	void (*act_backward)(const float *x, const float *y, const float *dy, float *dx,
			     size_t n, int act, float slope);
	/* db[c] = sum over rows of dy[r][c]; order fixed so results are deterministic */
	void (*bias_grad)(const float *dy, float *db, int rows, int cols);
	/* mean softmax cross-entropy over rows: dlogits = (softmax - onehot) / rows;
	 * returns the summed loss in *loss_sum and the count of argmax == label */
	void (*softmax_xent)(const float *logits, const int32_t *labels, int rows, int cols,
			     float *dlogits, double *loss_sum, int *correct);
	/* Dropout with a Philox mask keyed by (seed, stream): the same on every
	 * backend and machine.  mask gets 0 or 1/(1-rate). */
	void (*dropout)(const float *x, float *y, float *mask, size_t n, float rate,
			uint64_t seed, uint64_t stream);
	void (*mul)(const float *a, const float *b, float *y, size_t n);	/* y = a * b */
	/* Adam / AdamW update of n parameters; step >= 1; decoupled != 0 is AdamW */
	void (*adam)(float *w, const float *g, float *m, float *v, size_t n, float lr,
		     float beta1, float beta2, float eps, float wd, int decoupled, long long step);
	/* SGD with momentum buffer buf (may be NULL when momentum == 0), PyTorch semantics */
	void (*sgd)(float *w, const float *g, float *buf, size_t n, float lr, float momentum,
		    int nesterov, float wd, int first);
} dlt_backend;

const dlt_backend *dlt_backend_cpu(void);
/* The plain C reference of every kernel: what the fast ones are tested against. */
const dlt_backend *dlt_backend_ref(void);

#endif
