/* bench/layers: the CPU backend's kernels one at a time, on the calls a
 * training step of bench/cnn.yaml and bench/mlp.yaml makes at batch 128,
 * and of examples/gpt.yaml's GPT (tiny: T 128, 4 layers, 4 heads, width
 * 128, vocab 256, batch 16), in the order lib/nn makes them: milliseconds
 * (best of the repetitions) and GFLOP/s where the call does multiply-adds,
 * then each step's sum (the GPT's calls of a block counted once a layer).
 *
 *   layers [--threads N] [--reps N] [--model cnn|mlp|gpt|all] [--unfused]
 *          [--precision fp32|bf16|fp16]
 *
 * On 1 thread the times are the thread's CPU time, on more the wall
 * clock's.  A tool to see where a step's time goes; make bench does not
 * run it. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/common/math.h"
#include "kernels/kernels.h"
#include "kernels/cpu/threads.h"

#define BATCH 128

/* On 1 thread the thread's CPU time: on a busy machine the wall clock
 * counts the other processes' turns too */
static clockid_t clock_id = CLOCK_MONOTONIC;

static double now(void)
{
	struct timespec ts;
	clock_gettime(clock_id, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* --precision: the products' (gemm, conv) and the rounding of bias_act's
 * output; buffers stay floats, as the model's are with 32-bit storage */
static int prec;

/* Values of --precision's type, as a 16-bit model's activations are:
 * the kernels then find them rounded, as in training, and copy nothing */
static float *buf(size_t n)
{
	float *p = aligned_alloc(64, (n * sizeof(float) + 63) & ~(size_t)63);
	if (!p) {
		fprintf(stderr, "layers: out of memory\n");
		exit(1);
	}
	for (size_t i = 0; i < n; i++)
		p[i] = dlt_round_prec((float)((i * 2654435761u) >> 8 & 0xffff) / 65536.0f - 0.5f,
				      prec);
	return p;
}

static const dlt_backend *be;
static int reps = 20;
static double total;
static int times = 1;	/* how many of each call a step makes */

/* The call between the braces, timed: best of reps, after one warm-up */
#define TIME(name, flops, call)                                                       \
	do {                                                                          \
		double best_ = 1e9;                                                   \
		for (int r_ = 0; r_ <= reps; r_++) {                                  \
			double t_ = now();                                            \
			call;                                                         \
			t_ = now() - t_;                                              \
			if (r_ && t_ < best_)                                         \
				best_ = t_;                                           \
		}                                                                     \
		total += best_ * times;                                               \
		if ((flops) > 0)                                                      \
			printf("  %-22s %8.3f ms %7.1f GF/s\n", name, best_ * 1e3,    \
			       (flops) / best_ * 1e-9);                               \
		else                                                                  \
			printf("  %-22s %8.3f ms\n", name, best_ * 1e3);              \
	} while (0)

static dlt_conv conv_shape(int c, int h, int k)
{
	dlt_conv s = { BATCH, c, h, h, k, h, h, 3, 3, 1, 1, 1, 1, 1, 1, 1 };
	return s;
}

/* after a ReLU, whose backward the model's pool does (dlt_pool.relu) */
static dlt_pool pool_shape(int c, int h)
{
	dlt_pool s = { BATCH, c, h, h, h / 2, h / 2, 2, 2, 2, 2, 0, 0, .relu = 1 };
	return s;
}

static double conv_flops(const dlt_conv *s)
{
	return 2.0 * s->n * s->k * s->c * s->kh * s->kw * s->oh * s->ow;
}

static void dense_fwd(const char *name, int in, int out, int act, const float *x, const float *w,
		      const float *b, float *y)
{
	char label[64];
	snprintf(label, sizeof(label), "%s fwd", name);
	TIME(label, 2.0 * BATCH * in * out,
	     (be->gemm(prec, 0, 1, BATCH, out, in, 1.0f, x, in, w, in, 0.0f, y, out),
	      be->bias_act(y, b, BATCH, out, act, 0.0f, prec)));
}

static void dense_bwd(const char *name, int in, int out, const float *x, const float *w,
		      const float *dy, float *dw, float *db, float *dx)
{
	char label[64];
	snprintf(label, sizeof(label), "%s dW", name);
	TIME(label, 2.0 * BATCH * in * out,
	     be->gemm(prec, 1, 0, out, in, BATCH, 1.0f, dy, out, x, in, 0.0f, dw, in));
	snprintf(label, sizeof(label), "%s db", name);
	TIME(label, 0, be->bias_grad(dy, db, BATCH, out));
	if (!dx)
		return;
	snprintf(label, sizeof(label), "%s dX", name);
	TIME(label, 2.0 * BATCH * in * out,
	     be->gemm(prec, 0, 0, BATCH, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in));
}

static void relu_bwd(const char *name, size_t n, const float *y, const float *dy, float *dx)
{
	TIME(name, 0, be->act_backward(y, y, dy, dx, n, DLT_ACT_RELU, 0.0f));
}

static void adam(size_t n, float *w, float *g, float *m, float *v)
{
	TIME("adam", 0, be->adam(w, g, m, v, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 0, 10, 1.0f));
}

static void xent(int cols, const float *logits, float *dlogits)
{
	int32_t labels[BATCH];
	double loss;
	int correct;
	for (int i = 0; i < BATCH; i++)
		labels[i] = i % cols;
	TIME("softmax xent", 0,
	     be->softmax_xent(logits, labels, BATCH, cols, dlogits, &loss, &correct));
}

/* A conv with its ReLU, and the max pool after it, as the model runs
 * them: as one op the ways the backend has (conv_pool_fuses);
 * --unfused: never, to compare */
static int unfused;

static int fuses(const dlt_conv *c, const dlt_pool *p)
{
	return unfused || !be->conv_pool_fuses ? 0 : be->conv_pool_fuses(prec, c, p);
}

static void conv_pool_fwd(const dlt_conv *c, const dlt_pool *p, const float *x, const float *w,
			  const float *b, float *y, float *pooled, int32_t *arg, float *work)
{
	if (fuses(c, p) & DLT_FUSES_FORWARD) {
		be->conv_pool_forward(prec, c, p, x, w, b, DLT_ACT_RELU, 0.0f, pooled, arg, work);
		return;
	}
	be->conv_forward(prec, c, x, w, b, y, DLT_ACT_RELU, 0.0f, work);
	be->maxpool_forward(p, y, pooled, arg);
}

/* dy: the conv's gradient, made from the pool's, dpooled */
static void conv_pool_bwd(const dlt_conv *c, const dlt_pool *p, const float *x, const float *w,
			  float *dy, const float *dpooled, const int32_t *arg, float *dx,
			  float *dw, float *work)
{
	size_t nw = (size_t)c->k * c->c * c->kh * c->kw;
	if (!dx && (fuses(c, p) & DLT_FUSES_BACKWARD)) {
		be->conv_pool_backward(prec, c, p, x, dpooled, arg, dw, dw + nw, work);
		return;
	}
	be->maxpool_backward(p, dpooled, arg, dy);
	be->conv_backward(prec, c, x, w, dy, dx, dw, dw + nw, work);
}

static void cnn(void)
{
	dlt_conv c1 = conv_shape(1, 28, 32), c2 = conv_shape(32, 14, 64);
	dlt_pool p1 = pool_shape(32, 28), p2 = pool_shape(64, 14);
	size_t ws1 = be->conv_workspace(prec, &c1), ws2 = be->conv_workspace(prec, &c2);
	size_t ws = ws1 > ws2 ? ws1 : ws2;
	size_t a1 = (size_t)BATCH * 32 * 28 * 28, a2 = (size_t)BATCH * 32 * 14 * 14;
	size_t a3 = (size_t)BATCH * 64 * 14 * 14, a4 = (size_t)BATCH * 3136;
	size_t np = 32 * 9 + 32 + 64 * 288 + 64 + 3136 * 128 + 128 + 1280 + 10;
	float *x = buf(BATCH * 784), *work = buf(ws), *w1 = buf(288), *b1 = buf(32);
	float *w2 = buf(64 * 288), *b2 = buf(64), *w3 = buf(3136 * 128), *b3 = buf(128);
	float *w4 = buf(1280), *b4 = buf(10);
	float *y1 = buf(a1), *y2 = buf(a2), *y3 = buf(a3), *y4 = buf(a4);
	float *y5 = buf(BATCH * 128), *y6 = buf(BATCH * 10);
	float *g1 = buf(a1), *g2 = buf(a2), *g3 = buf(a3), *g4 = buf(a4), *g5 = buf(BATCH * 128);
	float *g6 = buf(BATCH * 10), *dw = buf(np), *m = buf(np), *v = buf(np), *w = buf(np);
	int32_t *arg1 = malloc(a2 * sizeof(int32_t)), *arg2 = malloc(a4 * sizeof(int32_t));
	double fwd, bwd;

	for (size_t i = 0; i < np; i++)
		v[i] = v[i] * v[i];
	printf("cnn, batch %d, %d threads%s\n", BATCH, omp_get_max_threads(),
	       unfused ? ", convs and pools apart" : "");
	TIME(fuses(&c1, &p1) ? "conv1+relu+maxpool1 fwd" : "conv1+relu, maxpool1 fwd",
	     conv_flops(&c1), conv_pool_fwd(&c1, &p1, x, w1, b1, y1, y2, arg1, work));
	TIME(fuses(&c2, &p2) ? "conv2+relu+maxpool2 fwd" : "conv2+relu, maxpool2 fwd",
	     conv_flops(&c2), conv_pool_fwd(&c2, &p2, y2, w2, b2, y3, y4, arg2, work));
	dense_fwd("dense1", 3136, 128, DLT_ACT_RELU, y4, w3, b3, y5);
	dense_fwd("dense2", 128, 10, DLT_ACT_NONE, y5, w4, b4, y6);
	xent(10, y6, g6);
	fwd = total;
	dense_bwd("dense2", 128, 10, y5, w4, g6, dw, dw + 1280, g5);
	relu_bwd("relu3 bwd", BATCH * 128, y5, g5, g5);
	dense_bwd("dense1", 3136, 128, y4, w3, g5, dw, dw + 3136 * 128, g4);
	TIME("maxpool2+relu2, conv2 bwd", 2 * conv_flops(&c2),
	     conv_pool_bwd(&c2, &p2, y2, w2, g3, g4, arg2, g2, dw, work));
	TIME(fuses(&c1, &p1) & DLT_FUSES_BACKWARD ? "maxpool1+relu1+conv1 bwd (no dx)"
						  : "maxpool1+relu1, conv1 bwd (no dx)",
	     conv_flops(&c1), conv_pool_bwd(&c1, &p1, x, w1, g1, g2, arg1, NULL, dw, work));
	adam(np, w, dw, m, v);
	bwd = total - fwd;
	printf("  forward %.3f ms, backward+adam %.3f ms, step %.3f ms: %.0f samples/s, "
	       "%.1f GF/s\n", fwd * 1e3, bwd * 1e3, total * 1e3, BATCH / total,
	       24.995e6 * BATCH / total * 1e-9);
	/* the calls back to back, as a training step makes them: each one
	 * finds in the caches what the one before left, not its own data */
	{
		double best = 1e9;
		for (int r = 0; r <= reps; r++) {
			double t = now();
			conv_pool_fwd(&c1, &p1, x, w1, b1, y1, y2, arg1, work);
			conv_pool_fwd(&c2, &p2, y2, w2, b2, y3, y4, arg2, work);
			be->gemm(prec, 0, 1, BATCH, 128, 3136, 1.0f, y4, 3136, w3, 3136, 0.0f, y5, 128);
			be->bias_act(y5, b3, BATCH, 128, DLT_ACT_RELU, 0.0f, prec);
			be->gemm(prec, 0, 1, BATCH, 10, 128, 1.0f, y5, 128, w4, 128, 0.0f, y6, 10);
			be->gemm(prec, 0, 0, BATCH, 3136, 128, 1.0f, g5, 128, w3, 3136, 0.0f, g4, 3136);
			conv_pool_bwd(&c2, &p2, y2, w2, g3, g4, arg2, g2, dw, work);
			conv_pool_bwd(&c1, &p1, x, w1, g1, g2, arg1, NULL, dw, work);
			be->adam(w, dw, m, v, np, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 0, 10, 1.0f);
			t = now() - t;
			if (r && t < best)
				best = t;
		}
		printf("  in sequence (the main calls): %.3f ms: %.0f samples/s\n\n", best * 1e3,
		       BATCH / best);
	}
}

static void mlp(void)
{
	size_t np = 784 * 256 + 256 + 256 * 128 + 128 + 1280 + 10;
	float *x = buf(BATCH * 784), *w1 = buf(784 * 256), *b1 = buf(256), *w2 = buf(256 * 128);
	float *b2 = buf(128), *w3 = buf(1280), *b3 = buf(10);
	float *y1 = buf(BATCH * 256), *y2 = buf(BATCH * 128), *y3 = buf(BATCH * 10);
	float *g1 = buf(BATCH * 256), *g2 = buf(BATCH * 128), *g3 = buf(BATCH * 10);
	float *dw = buf(np), *m = buf(np), *v = buf(np), *w = buf(np);
	double fwd, bwd;

	for (size_t i = 0; i < np; i++)
		v[i] = v[i] * v[i];
	printf("mlp, batch %d, %d threads\n", BATCH, omp_get_max_threads());
	total = 0.0;
	dense_fwd("fc1", 784, 256, DLT_ACT_RELU, x, w1, b1, y1);
	dense_fwd("fc2", 256, 128, DLT_ACT_RELU, y1, w2, b2, y2);
	dense_fwd("fc3", 128, 10, DLT_ACT_NONE, y2, w3, b3, y3);
	xent(10, y3, g3);
	fwd = total;
	dense_bwd("fc3", 128, 10, y2, w3, g3, dw, dw + 1280, g2);
	relu_bwd("relu2 bwd", BATCH * 128, y2, g2, g2);
	dense_bwd("fc2", 256, 128, y1, w2, g2, dw, dw + 256 * 128, g1);
	relu_bwd("relu1 bwd", BATCH * 256, y1, g1, g1);
	dense_bwd("fc1", 784, 256, x, w1, g1, dw, dw + 784 * 256, NULL);
	adam(np, w, dw, m, v);
	bwd = total - fwd;
	printf("  forward %.3f ms, backward+adam %.3f ms, step %.3f ms: %.0f samples/s, "
	       "%.1f GF/s\n\n", fwd * 1e3, bwd * 1e3, total * 1e3, BATCH / total,
	       1.007e6 * BATCH / total * 1e-9);
}

/* The GPT's per-position dense: rows x in by [out, in] */
static void seq_dense_fwd(const char *name, int rows, int in, int out, const float *x,
			  const float *w, const float *b, float *y)
{
	char label[64];
	snprintf(label, sizeof(label), "%s fwd", name);
	TIME(label, 2.0 * rows * in * out,
	     (be->gemm(prec, 0, 1, rows, out, in, 1.0f, x, in, w, in, 0.0f, y, out),
	      b ? be->bias_act(y, b, rows, out, DLT_ACT_NONE, 0.0f, prec) : (void)0));
}

static void seq_dense_bwd(const char *name, int rows, int in, int out, const float *x,
			  const float *w, const float *dy, float *dw, float *db, float *dx)
{
	char label[64];
	snprintf(label, sizeof(label), "%s dW", name);
	TIME(label, 2.0 * rows * in * out,
	     be->gemm(prec, 1, 0, out, in, rows, 1.0f, dy, out, x, in, 0.0f, dw, in));
	if (db) {
		snprintf(label, sizeof(label), "%s db", name);
		TIME(label, 0, be->bias_grad(dy, db, rows, out));
	}
	snprintf(label, sizeof(label), "%s dX", name);
	TIME(label, 2.0 * rows * in * out,
	     be->gemm(prec, 0, 0, rows, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in));
}

/* examples/gpt.yaml's tiny GPT: the calls of one block, each counted L
 * times in the step, then the embedding, the tied head and the loss */
static void gpt(void)
{
	enum { B = 16, T = 128, C = 128, H = 4, V = 256, L = 4 };
	int rows = B * T;
	size_t n = (size_t)rows * C, np = (size_t)L * (12 * C * C + 13 * C) + (V + T + 2) * C;
	float *x = buf(n), *ln = buf(n), *qkv = buf(3 * n), *att = buf(n), *y = buf(n);
	float *h = buf(4 * n), *hg = buf(4 * n), *logits = buf((size_t)rows * V);
	float *mean = buf(rows), *rstd = buf(rows), *lse = buf((size_t)B * H * T);
	float *wqkv = buf(3 * C * C), *wproj = buf(C * C), *w1 = buf(4 * C * C);
	float *w2 = buf(4 * C * C), *wte = buf(V * C), *wpe = buf(T * C), *bias = buf(4 * C);
	float *gamma = buf(C), *dw = buf(4 * C * C), *db = buf(4 * C), *dg = buf(C);
	float *g = buf(n), *g2 = buf(n), *dqkv = buf(3 * n), *dh = buf(4 * n);
	float *dlogits = buf((size_t)rows * V);
	float *pw = buf(np), *pg = buf(np), *pm = buf(np), *pv = buf(np);
	int32_t *ids = malloc(rows * sizeof(int32_t)), *labels = malloc(rows * sizeof(int32_t));
	double loss, fwd, bwd, flops = 6.0 * ((double)L * 12 * C * C + (double)V * C) +
					  6.0 * L * T * C;
	int correct;

	for (int i = 0; i < rows; i++) {
		ids[i] = (i * 7) % V;
		labels[i] = (i * 13) % V;
	}
	for (size_t i = 0; i < np; i++)
		pv[i] = pv[i] * pv[i];
	for (int i = 0; i < B * H * T; i++)
		lse[i] = 8.0f;
	printf("gpt tiny (T %d, %d layers, %d heads, width %d, vocab %d), batch %d, %d threads\n",
	       T, L, H, C, V, B, omp_get_max_threads());
	total = 0.0;
	times = 1;
	TIME("embedding+pos fwd", 0,
	     (be->embedding_forward(ids, wte, x, rows, C, V),
	      be->positional_forward(x, wpe, x, B, T, C)));
	times = L;
	TIME("ln1 fwd", 0, be->layernorm_forward(x, gamma, bias, ln, mean, rstd, rows, C, 1e-5f));
	seq_dense_fwd("qkv", rows, C, 3 * C, ln, wqkv, bias, qkv);
	TIME("attention fwd", 4.0 * B * H * T * T / 2 * (C / H),
	     be->attention_forward(prec, qkv, att, lse, B, T, C, H, 1, (dlt_attn_dropout){ 0 }));
	seq_dense_fwd("proj", rows, C, C, att, wproj, bias, y);
	TIME("residual add", 0, be->add(x, y, x, n));
	TIME("ln2 fwd", 0, be->layernorm_forward(x, gamma, bias, ln, mean, rstd, rows, C, 1e-5f));
	seq_dense_fwd("fc1", rows, C, 4 * C, ln, w1, bias, h);
	TIME("gelu fwd", 0, be->act_forward(h, hg, 4 * n, DLT_ACT_GELU_TANH, 0.0f));
	seq_dense_fwd("fc2", rows, 4 * C, C, hg, w2, bias, y);
	TIME("residual add", 0, be->add(x, y, x, n));
	times = 1;
	TIME("ln_f fwd", 0, be->layernorm_forward(x, gamma, bias, ln, mean, rstd, rows, C, 1e-5f));
	seq_dense_fwd("head", rows, C, V, ln, wte, NULL, logits);
	TIME("softmax xent", 0,
	     be->softmax_xent(logits, labels, rows, V, dlogits, &loss, &correct));
	fwd = total;
	seq_dense_bwd("head", rows, C, V, ln, wte, dlogits, dw, NULL, g);
	TIME("ln_f bwd", 0,
	     be->layernorm_backward(x, g, gamma, mean, rstd, g2, dg, db, rows, C));
	times = L;
	seq_dense_bwd("fc2", rows, 4 * C, C, hg, w2, g2, dw, db, dh);
	TIME("gelu bwd", 0, be->act_backward(h, hg, dh, dh, 4 * n, DLT_ACT_GELU_TANH, 0.0f));
	seq_dense_bwd("fc1", rows, C, 4 * C, ln, w1, dh, dw, db, g);
	TIME("ln2 bwd", 0, be->layernorm_backward(x, g, gamma, mean, rstd, y, dg, db, rows, C));
	TIME("fork add", 0, be->add(y, g2, g2, n));
	TIME("proj dW+db", 2.0 * rows * C * C,
	     (be->gemm(prec, 1, 0, C, C, rows, 1.0f, g2, C, att, C, 0.0f, dw, C),
	      be->bias_grad(g2, db, rows, C)));
	TIME("proj dX", 2.0 * rows * C * C,
	     be->gemm(prec, 0, 0, rows, C, C, 1.0f, g2, C, wproj, C, 0.0f, g, C));
	TIME("attention bwd", 8.0 * B * H * T * T / 2 * (C / H),
	     be->attention_backward(prec, qkv, att, g, lse, dqkv, B, T, C, H, 1,
				    (dlt_attn_dropout){ 0 }));
	seq_dense_bwd("qkv", rows, C, 3 * C, ln, wqkv, dqkv, dw, db, g);
	TIME("ln1 bwd", 0, be->layernorm_backward(x, g, gamma, mean, rstd, y, dg, db, rows, C));
	TIME("fork add", 0, be->add(y, g2, g2, n));
	times = 1;
	TIME("embedding+pos bwd", 0,
	     (be->positional_backward(g2, dw, B, T, C),
	      be->embedding_backward(ids, g2, dw, rows, C, V)));
	TIME("adamw", 0, be->adam(pw, pg, pm, pv, np, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, 1, 10, 1.0f));
	bwd = total - fwd;
	printf("  forward %.3f ms, backward+adam %.3f ms, step %.3f ms: %.0f tokens/s, "
	       "%.1f GF/s\n\n", fwd * 1e3, bwd * 1e3, total * 1e3, rows / total,
	       flops * rows / total * 1e-9);
}

int main(int argc, char **argv)
{
	const char *model = "all";
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			dlt_cpu_set_threads(atoi(argv[++i]));
		else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
			reps = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--model") && i + 1 < argc)
			model = argv[++i];
		else if (!strcmp(argv[i], "--precision") && i + 1 < argc) {
			const char *p = argv[++i];
			prec = !strcmp(p, "bf16") ? DLT_PREC_BF16 : !strcmp(p, "fp16") ? DLT_PREC_F16
			     : !strcmp(p, "fp32") ? DLT_PREC_F32 : -1;
			if (prec < 0) {
				fprintf(stderr, "layers: unknown precision '%s'\n", p);
				return 2;
			}
		} else if (!strcmp(argv[i], "--unfused"))
			unfused = 1;
		else {
			fprintf(stderr, "usage: layers [--threads N] [--reps N] "
					"[--model cnn|mlp|gpt|all] [--unfused]\n"
					"              [--precision fp32|bf16|fp16]\n");
			return 2;
		}
	}
	if (reps < 1)
		reps = 1;
	if (omp_get_max_threads() == 1)
		clock_id = CLOCK_THREAD_CPUTIME_ID;
	be = dlt_backend_cpu();
	if (!strcmp(model, "all") || !strcmp(model, "cnn"))
		cnn();
	if (!strcmp(model, "all") || !strcmp(model, "mlp"))
		mlp();
	if (!strcmp(model, "all") || !strcmp(model, "gpt"))
		gpt();
	return 0;
}
