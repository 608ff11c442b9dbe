/* Every kernel of the fast backends against the reference, on random
 * inputs of many shapes (as ggml's test-backend-ops).  A new kernel gets
 * its test by adding a row to `cases`. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "tap.h"
#include "vec.h"
#include "kernels/kernels.h"
#include "kernels/common/math.h"
#include "kernels/common/philox.h"
#include "util/util.h"

/* rows x cols for element-wise kernels; M x N x K for gemm */
typedef struct shape {
	int rows, cols, k;
} shape;

static const shape shapes[] = {
	{ 1, 1, 1 }, { 1, 7, 3 }, { 7, 1, 5 }, { 3, 5, 1 }, { 17, 33, 9 }, { 33, 17, 64 },
	{ 128, 784, 256 }, { 257, 10, 128 }, { 10, 1000, 7 }, { 300, 300, 31 },
};

/* Worst |got - want| / (1 + |want|); NaN where the other has none counts
 * as infinitely wrong. */
static double max3(double a, double b, double c)
{
	return fmax(a, fmax(b, c));
}

/* arg bits: 1 transposes A, 2 transposes B, 4 uses alpha and beta on a
 * random C (else beta = 0 on a C of NaN, which BLAS must ignore), 8 pads
 * the leading dimensions, 16 rounds the inputs to bf16, 32 to fp16. */
static double check_gemm(const dlt_backend *be, const dlt_backend *ref, shape s, int arg)
{
	int tA = arg & 1, tB = !!(arg & 2), pad = arg & 8 ? 3 : 0;
	int M = s.rows, N = s.cols, K = s.k;
	int lda = (tA ? M : K) + pad, ldb = (tB ? K : N) + pad, ldc = N + pad;
	size_t na = (size_t)(tA ? K : M) * lda, nb = (size_t)(tB ? N : K) * ldb;
	size_t nc = (size_t)M * ldc;
	float alpha = arg & 4 ? 0.5f : 1.0f, beta = arg & 4 ? -1.5f : 0.0f;
	float *A = randv(na, -1, 1), *B = randv(nb, -1, 1), *C = randv(nc, -1, 1), *C2;
	int prec = arg & 16 ? DLT_PREC_BF16 : arg & 32 ? DLT_PREC_F16 : DLT_PREC_F32;
	double d;
	if (!(arg & 4))
		for (size_t i = 0; i < nc; i++)
			C[i] = NAN;
	C2 = copyv(C, nc);
	be->gemm(prec, tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
	ref->gemm(prec, tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C2, ldc);
	/* padding columns are not part of C: compare row by row */
	d = 0.0;
	for (int i = 0; i < M; i++)
		d = fmax(d, diff(C + (size_t)i * ldc, C2 + (size_t)i * ldc, N));
	free(A);
	free(B);
	free(C);
	free(C2);
	return d / sqrt(K);	/* float sums drift like sqrt(K) */
}

/* arg: the activation; + 16 leaves the bias out */
static double check_bias_act(const dlt_backend *be, const dlt_backend *ref, shape s, int arg)
{
	size_t n = (size_t)s.rows * s.cols;
	float *y = randv(n, -4, 4), *y2 = copyv(y, n), *b = randv(s.cols, -1, 1);
	double d;
	be->bias_act(y, arg & 16 ? NULL : b, s.rows, s.cols, arg & 15, 0.1f);
	ref->bias_act(y2, arg & 16 ? NULL : b, s.rows, s.cols, arg & 15, 0.1f);
	d = diff(y, y2, n);
	free(y);
	free(y2);
	free(b);
	return d;
}

/* arg: the activation; + 16 runs in place */
static double check_act_forward(const dlt_backend *be, const dlt_backend *ref, shape s, int arg)
{
	size_t n = (size_t)s.rows * s.cols;
	float *x = randv(n, -6, 6), *y = malloc(n * 4 + 1), *x2 = copyv(x, n);
	float *y2 = malloc(n * 4 + 1);
	double d;
	if (arg & 16) {
		be->act_forward(x, x, n, arg & 15, 0.02f);
		ref->act_forward(x2, x2, n, arg & 15, 0.02f);
		d = diff(x, x2, n);
	} else {
		be->act_forward(x, y, n, arg & 15, 0.02f);
		ref->act_forward(x, y2, n, arg & 15, 0.02f);
		d = diff(y, y2, n);
	}
	free(x);
	free(y);
	free(x2);
	free(y2);
	return d;
}

static double check_act_backward(const dlt_backend *be, const dlt_backend *ref, shape s, int arg)
{
	size_t n = (size_t)s.rows * s.cols;
	float *x = randv(n, -6, 6), *y = malloc(n * 4 + 1), *dy = randv(n, -1, 1);
	float *dx = malloc(n * 4 + 1), *dx2 = malloc(n * 4 + 1);
	double d;
	ref->act_forward(x, y, n, arg, 0.02f);
	be->act_backward(x, y, dy, dx, n, arg, 0.02f);
	ref->act_backward(x, y, dy, dx2, n, arg, 0.02f);
	d = diff(dx, dx2, n);
	free(x);
	free(y);
	free(dy);
	free(dx);
	free(dx2);
	return d;
}

static double check_bias_grad(const dlt_backend *be, const dlt_backend *ref, shape s, int arg)
{
	float *dy = randv((size_t)s.rows * s.cols, -1, 1);
	float *db = malloc(s.cols * 4 + 1), *db2 = malloc(s.cols * 4 + 1);
	double d;
	be->bias_grad(dy, db, s.rows, s.cols);
	ref->bias_grad(dy, db2, s.rows, s.cols);
	d = diff(db, db2, s.cols);
	free(dy);
	free(db);
	free(db2);
	return d;
}

/* arg: the logits' spread; wide ones test the max subtraction */
static double check_softmax_xent(const dlt_backend *be, const dlt_backend *ref, shape s, int arg)
{
	size_t n = (size_t)s.rows * s.cols;
	float *x = randv(n, -arg, arg), *dx = malloc(n * 4 + 1), *dx2 = malloc(n * 4 + 1);
	int32_t *lab = malloc(s.rows * sizeof(int32_t));
	double loss, loss2, d;
	int hits, hits2;
	for (int r = 0; r < s.rows; r++)
		lab[r] = (int32_t)dlt_rng_below(&rng, s.cols);
	be->softmax_xent(x, lab, s.rows, s.cols, dx, &loss, &hits);
	ref->softmax_xent(x, lab, s.rows, s.cols, dx2, &loss2, &hits2);
	d = max3(diff(dx, dx2, n), fabs(loss - loss2) / (1.0 + fabs(loss2)),
		 hits == hits2 && isfinite(loss) ? 0.0 : INFINITY);
	free(x);
	free(dx);
	free(dx2);
	free(lab);
	return d;
}

/* arg: the loss kind (enum dlt_loss_kind); bce's targets are 0 or 1 */
static double check_pointwise_loss(const dlt_backend *be, const dlt_backend *ref, shape s, int arg)
{
	size_t n = (size_t)s.rows * s.cols;
	float *y = randv(n, -4, 4), *t = randv(n, -4, 4);
	float *dy = malloc(n * 4 + 1), *dy2 = malloc(n * 4 + 1);
	double loss, loss2, d;
	for (size_t i = 0; arg == DLT_LOSS_BCE && i < n; i++)
		t[i] = t[i] > 0;
	be->pointwise_loss(arg, 1.5f, y, t, s.rows, s.cols, dy, &loss);
	ref->pointwise_loss(arg, 1.5f, y, t, s.rows, s.cols, dy2, &loss2);
	d = max3(diff(dy, dy2, n), fabs(loss - loss2) / (1.0 + fabs(loss2)),
		 isfinite(loss) ? 0.0 : INFINITY);
	free(y);
	free(t);
	free(dy);
	free(dy2);
	return d;
}

/* arg: the rate in percent */
static double check_dropout(const dlt_backend *be, const dlt_backend *ref, shape s, int arg)
{
	size_t n = (size_t)s.rows * s.cols;
	float *x = randv(n, -1, 1), *y = malloc(n * 4 + 1), *y2 = malloc(n * 4 + 1);
	float *mk = malloc(n * 4 + 1), *mk2 = malloc(n * 4 + 1);
	double d;
	be->dropout(x, y, mk, n, arg / 100.0f, 42, 7 + n);
	ref->dropout(x, y2, mk2, n, arg / 100.0f, 42, 7 + n);
	d = fmax(diff(y, y2, n), diff(mk, mk2, n));
	free(x);
	free(y);
	free(y2);
	free(mk);
	free(mk2);
	return d;
}

static double check_mul(const dlt_backend *be, const dlt_backend *ref, shape s, int arg)
{
	size_t n = (size_t)s.rows * s.cols;
	float *a = randv(n, -3, 3), *b = randv(n, -3, 3), *y = malloc(n * 4 + 1);
	float *y2 = malloc(n * 4 + 1);
	double d;
	be->mul(a, b, y, n);
	ref->mul(a, b, y2, n);
	d = diff(y, y2, n);
	free(a);
	free(b);
	free(y);
	free(y2);
	return d;
}

/* arg: 1 decoupled (AdamW) */
static double check_adam(const dlt_backend *be, const dlt_backend *ref, shape s, int arg)
{
	size_t n = (size_t)s.rows * s.cols;
	float *w = randv(n, -1, 1), *g = randv(n, -1, 1), *m = randv(n, -0.1f, 0.1f);
	float *v = randv(n, 0, 0.01f);
	float *w2 = copyv(w, n), *m2 = copyv(m, n), *v2 = copyv(v, n);
	double d;
	be->adam(w, g, m, v, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, arg, 3);
	ref->adam(w2, g, m2, v2, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, arg, 3);
	d = max3(diff(w, w2, n), diff(m, m2, n), diff(v, v2, n));
	free(w);
	free(g);
	free(m);
	free(v);
	free(w2);
	free(m2);
	free(v2);
	return d;
}

/* arg: 0 plain, 1 momentum, 2 nesterov; + 4 the first step */
static double check_sgd(const dlt_backend *be, const dlt_backend *ref, shape s, int arg)
{
	size_t n = (size_t)s.rows * s.cols;
	float mom = arg & 3 ? 0.9f : 0.0f;
	float *w = randv(n, -1, 1), *g = randv(n, -1, 1), *b = randv(n, -1, 1);
	float *w2 = copyv(w, n), *b2 = copyv(b, n);
	double d;
	be->sgd(w, g, mom ? b : NULL, n, 0.1f, mom, (arg & 3) == 2, 1e-4f, !!(arg & 4));
	ref->sgd(w2, g, mom ? b2 : NULL, n, 0.1f, mom, (arg & 3) == 2, 1e-4f, !!(arg & 4));
	d = fmax(diff(w, w2, n), diff(b, b2, n));
	free(w);
	free(g);
	free(b);
	free(w2);
	free(b2);
	return d;
}

static double check_scale(const dlt_backend *be, const dlt_backend *ref, shape s, int arg)
{
	size_t n = (size_t)s.rows * s.cols;
	float *x = randv(n, -3, 3), *x2 = copyv(x, n);
	double d;
	be->scale(x, n, 0x1p-16f);
	ref->scale(x2, n, 0x1p-16f);
	d = diff(x, x2, n);
	free(x);
	free(x2);
	return d;
}

/* arg: the precision; the values span fp16's range and beyond, and every
 * third is a bit pattern from a stride through all 2^32 (NaNs with
 * payloads, infinities, subnormals) */
static double check_round(const dlt_backend *be, const dlt_backend *ref, shape s, int arg)
{
	size_t n = (size_t)s.rows * s.cols;
	float *x = randv(n, -1, 1), *x2;
	double d;
	for (size_t i = 0; i < n; i++)
		x[i] = i % 3 == 2 ? dlt_bits_f32((uint32_t)i * 2654435761u)
				  : ldexpf(x[i], (int)(i % 60) - 40);
	x2 = copyv(x, n);
	be->round(x, n, arg);
	ref->round(x2, n, arg);
	d = memcmp(x, x2, n * sizeof(float)) ? INFINITY : 0.0;
	free(x);
	free(x2);
	return d;
}

/* Counts of inf and NaN planted at every arg-th element. */
static double check_nonfinite(const dlt_backend *be, const dlt_backend *ref, shape s, int arg)
{
	size_t n = (size_t)s.rows * s.cols, want = 0, got, got2;
	float *x = randv(n, -1, 1);
	for (size_t i = 0; i < n; i += (size_t)arg, want++)
		x[i] = i % 2 ? NAN : -INFINITY;
	got = be->nonfinite(x, n);
	got2 = ref->nonfinite(x, n);
	free(x);
	return got == want && got2 == want ? 0.0 : INFINITY;
}

typedef struct kcase {
	const char *name;
	double (*check)(const dlt_backend *be, const dlt_backend *ref, shape s, int arg);
	int arg;
	double tol;		/* on the worst relative difference */
} kcase;

static const kcase cases[] = {
	{ "gemm nn", check_gemm, 0, 2e-6 },
	{ "gemm tn", check_gemm, 1, 2e-6 },
	{ "gemm nt", check_gemm, 2, 2e-6 },
	{ "gemm tt", check_gemm, 3, 2e-6 },
	{ "gemm nn alpha beta", check_gemm, 4, 2e-6 },
	{ "gemm tt alpha beta padded", check_gemm, 15, 2e-6 },
	{ "gemm nt padded", check_gemm, 10, 2e-6 },
	{ "gemm nn bf16", check_gemm, 16, 2e-6 },
	{ "gemm tt alpha beta padded bf16", check_gemm, 15 + 16, 2e-6 },
	{ "gemm nt fp16", check_gemm, 2 + 32, 2e-6 },
	{ "gemm tn alpha beta fp16", check_gemm, 5 + 32, 2e-6 },
	{ "bias_act none", check_bias_act, DLT_ACT_NONE, 1e-7 },
	{ "bias_act relu", check_bias_act, DLT_ACT_RELU, 1e-7 },
	{ "bias_act leaky_relu", check_bias_act, DLT_ACT_LEAKY_RELU, 1e-7 },
	{ "bias_act gelu", check_bias_act, DLT_ACT_GELU, 1e-7 },
	{ "bias_act tanh", check_bias_act, DLT_ACT_TANH, 1e-7 },
	{ "bias_act sigmoid", check_bias_act, DLT_ACT_SIGMOID, 1e-7 },
	{ "bias_act gelu_tanh", check_bias_act, DLT_ACT_GELU_TANH, 1e-7 },
	{ "bias_act gelu_tanh, no bias", check_bias_act, DLT_ACT_GELU_TANH + 16, 1e-7 },
	{ "bias_act relu, no bias", check_bias_act, DLT_ACT_RELU + 16, 1e-7 },
	{ "bias_act gelu, no bias", check_bias_act, DLT_ACT_GELU + 16, 1e-7 },
	{ "act_forward none", check_act_forward, DLT_ACT_NONE, 1e-7 },
	{ "act_forward relu", check_act_forward, DLT_ACT_RELU, 1e-7 },
	{ "act_forward leaky_relu", check_act_forward, DLT_ACT_LEAKY_RELU, 1e-7 },
	{ "act_forward gelu", check_act_forward, DLT_ACT_GELU, 1e-7 },
	{ "act_forward tanh", check_act_forward, DLT_ACT_TANH, 1e-7 },
	{ "act_forward sigmoid", check_act_forward, DLT_ACT_SIGMOID, 1e-7 },
	{ "act_forward sigmoid in place", check_act_forward, DLT_ACT_SIGMOID + 16, 1e-7 },
	{ "act_forward gelu_tanh", check_act_forward, DLT_ACT_GELU_TANH, 1e-7 },
	{ "act_forward gelu_tanh in place", check_act_forward, DLT_ACT_GELU_TANH + 16, 1e-7 },
	{ "act_forward relu in place", check_act_forward, DLT_ACT_RELU + 16, 1e-7 },
	{ "act_backward none", check_act_backward, DLT_ACT_NONE, 1e-7 },
	{ "act_backward relu", check_act_backward, DLT_ACT_RELU, 1e-7 },
	{ "act_backward leaky_relu", check_act_backward, DLT_ACT_LEAKY_RELU, 1e-7 },
	{ "act_backward gelu", check_act_backward, DLT_ACT_GELU, 1e-7 },
	{ "act_backward tanh", check_act_backward, DLT_ACT_TANH, 1e-7 },
	{ "act_backward sigmoid", check_act_backward, DLT_ACT_SIGMOID, 1e-7 },
	{ "act_backward gelu_tanh", check_act_backward, DLT_ACT_GELU_TANH, 1e-7 },
	{ "bias_grad", check_bias_grad, 0, 0 },
	{ "softmax_xent", check_softmax_xent, 3, 1e-7 },
	{ "softmax_xent wide logits", check_softmax_xent, 200, 1e-7 },
	{ "pointwise_loss mse", check_pointwise_loss, DLT_LOSS_MSE, 0 },
	{ "pointwise_loss l1", check_pointwise_loss, DLT_LOSS_L1, 0 },
	{ "pointwise_loss huber", check_pointwise_loss, DLT_LOSS_HUBER, 0 },
	{ "pointwise_loss bce", check_pointwise_loss, DLT_LOSS_BCE, 0 },
	{ "dropout 0.5", check_dropout, 50, 0 },
	{ "dropout 0.1", check_dropout, 10, 0 },
	{ "dropout 0", check_dropout, 0, 0 },
	{ "mul", check_mul, 0, 0 },
	{ "adam", check_adam, 0, 1e-7 },
	{ "adamw", check_adam, 1, 1e-7 },
	{ "sgd", check_sgd, 0, 1e-7 },
	{ "sgd momentum", check_sgd, 1, 1e-7 },
	{ "sgd momentum first step", check_sgd, 1 + 4, 1e-7 },
	{ "sgd nesterov", check_sgd, 2, 1e-7 },
	{ "sgd nesterov first step", check_sgd, 2 + 4, 1e-7 },
	{ "scale", check_scale, 0, 0 },
	{ "round bf16", check_round, DLT_PREC_BF16, 0 },
	{ "round fp16", check_round, DLT_PREC_F16, 0 },
	{ "round fp32", check_round, DLT_PREC_F32, 0 },
	{ "nonfinite, every element", check_nonfinite, 1, 0 },
	{ "nonfinite, every 7th", check_nonfinite, 7, 0 },
};

static void run_table(const dlt_backend *be, const dlt_backend *ref)
{
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
			shape s = shapes[i];
			double d = cases[c].check(be, ref, s, cases[c].arg);
			if (!ok(d <= cases[c].tol, "%s %s %dx%d (k %d)", be->name, cases[c].name,
				s.rows, s.cols, s.k))
				diag("worst relative difference %g, tolerance %g", d,
				     cases[c].tol);
		}
	}
}

/* ---- the transformer's kernels, on shapes of their own ---- */

/* [B, T, C] activations, H heads; layer norm runs over B * T rows of C */
typedef struct tshape {
	int B, T, C, H;
} tshape;

/* T around the attention's 64-row tiles (1, 7, 63, 64, 65, 130), head
 * sizes 8 to 32, rows 1 to 300 */
static const tshape tshapes[] = {
	{ 1, 1, 16, 2 }, { 2, 7, 16, 2 }, { 1, 63, 48, 6 }, { 2, 64, 128, 4 },
	{ 1, 65, 16, 2 }, { 1, 130, 48, 6 }, { 2, 130, 128, 4 }, { 4, 75, 40, 5 },
	{ 3, 1, 128, 4 },
};

/* arg: the inputs' offset, so a mean far from 0 shows a one-pass variance */
static double check_layernorm_forward(const dlt_backend *be, const dlt_backend *ref, tshape s,
				      int arg)
{
	int rows = s.B * s.T, C = s.C;
	size_t n = (size_t)rows * C;
	float *x = randv(n, arg - 3.0f, arg + 3.0f), *g = randv(C, 0.5f, 1.5f);
	float *b = randv(C, -1, 1), *y = nanv(n), *y2 = nanv(n);
	float *mu = nanv(rows), *mu2 = nanv(rows), *rs = nanv(rows), *rs2 = nanv(rows);
	double d;
	be->layernorm_forward(x, g, b, y, mu, rs, rows, C, 1e-5f);
	ref->layernorm_forward(x, g, b, y2, mu2, rs2, rows, C, 1e-5f);
	d = max3(diff(y, y2, n), diff(mu, mu2, rows), diff(rs, rs2, rows));
	free(x);
	free(g);
	free(b);
	free(y);
	free(y2);
	free(mu);
	free(mu2);
	free(rs);
	free(rs2);
	return d;
}

/* arg 0: dx, against the reference's double; 1: dgamma and dbeta, added
 * to what they held, in the reference's order (its bits) */
static double check_layernorm_backward(const dlt_backend *be, const dlt_backend *ref,
				       tshape s, int arg)
{
	int rows = s.B * s.T, C = s.C;
	size_t n = (size_t)rows * C;
	float *x = randv(n, -2, 2), *g = randv(C, 0.5f, 1.5f), *b = randv(C, -1, 1);
	float *dy = randv(n, -1, 1), *y = nanv(n), *mu = nanv(rows), *rs = nanv(rows);
	float *dx = nanv(n), *dx2 = nanv(n), *dg = randv(C, -1, 1), *db = randv(C, -1, 1);
	float *dg2 = copyv(dg, C), *db2 = copyv(db, C);
	double d;
	ref->layernorm_forward(x, g, b, y, mu, rs, rows, C, 1e-5f);
	be->layernorm_backward(x, dy, g, mu, rs, dx, dg, db, rows, C);
	ref->layernorm_backward(x, dy, g, mu, rs, dx2, dg2, db2, rows, C);
	d = arg ? fmax(diff(dg, dg2, C), diff(db, db2, C)) : diff(dx, dx2, n);
	free(x);
	free(g);
	free(b);
	free(dy);
	free(y);
	free(mu);
	free(rs);
	free(dx);
	free(dx2);
	free(dg);
	free(db);
	free(dg2);
	free(db2);
	return d;
}

/* ids of B * T tokens in a vocabulary of V = T + 3 (repeats when T is
 * small); arg 1 puts -1 and V among them */
static int32_t *token_ids(int n, int V, int bad)
{
	int32_t *ids = malloc((size_t)n * sizeof(*ids) + 4);
	for (int i = 0; i < n; i++)
		ids[i] = (int32_t)dlt_rng_below(&rng, V);
	if (bad && n > 2) {
		ids[1] = -1;
		ids[n - 1] = V;
	}
	return ids;
}

static double check_embedding_forward(const dlt_backend *be, const dlt_backend *ref, tshape s,
				      int arg)
{
	int n = s.B * s.T, V = s.T + 3;
	int32_t *ids = token_ids(n, V, arg);
	float *w = randv((size_t)V * s.C, -1, 1), *o = nanv((size_t)n * s.C);
	float *o2 = randv((size_t)n * s.C, -1, 1);
	double d;
	be->embedding_forward(ids, w, o, n, s.C, V);
	ref->embedding_forward(ids, w, o2, n, s.C, V);
	d = diff(o, o2, (size_t)n * s.C);
	free(ids);
	free(w);
	free(o);
	free(o2);
	return d;
}

static double check_embedding_backward(const dlt_backend *be, const dlt_backend *ref,
				       tshape s, int arg)
{
	int n = s.B * s.T, V = s.T + 3;
	int32_t *ids = token_ids(n, V, arg);
	float *g = randv((size_t)n * s.C, -1, 1), *dw = randv((size_t)V * s.C, -1, 1);
	float *dw2 = copyv(dw, (size_t)V * s.C);
	double d;
	be->embedding_backward(ids, g, dw, n, s.C, V);
	ref->embedding_backward(ids, g, dw2, n, s.C, V);
	d = diff(dw, dw2, (size_t)V * s.C);
	free(ids);
	free(g);
	free(dw);
	free(dw2);
	return d;
}

/* arg 1: in place */
static double check_positional_forward(const dlt_backend *be, const dlt_backend *ref,
				       tshape s, int arg)
{
	size_t n = (size_t)s.B * s.T * s.C;
	float *x = randv(n, -1, 1), *p = randv((size_t)s.T * s.C, -1, 1), *x2 = copyv(x, n);
	float *y = nanv(n), *y2 = nanv(n);
	double d;
	be->positional_forward(x, p, arg ? x : y, s.B, s.T, s.C);
	ref->positional_forward(x2, p, arg ? x2 : y2, s.B, s.T, s.C);
	d = arg ? diff(x, x2, n) : diff(y, y2, n);
	free(x);
	free(p);
	free(x2);
	free(y);
	free(y2);
	return d;
}

static double check_positional_backward(const dlt_backend *be, const dlt_backend *ref,
					tshape s, int arg)
{
	size_t n = (size_t)s.B * s.T * s.C, np = (size_t)s.T * s.C;
	float *g = randv(n, -1, 1), *dp = randv(np, -1, 1), *dp2 = copyv(dp, np);
	double d;
	be->positional_backward(g, dp, s.B, s.T, s.C);
	ref->positional_backward(g, dp2, s.B, s.T, s.C);
	d = diff(dp, dp2, np);
	free(g);
	free(dp);
	free(dp2);
	return d;
}

/* qkv in [-1, 1]; arg 2 makes the queries 8 times wider, so softmax rows
 * are sharp and the running maximum moves between tiles */
static float *attention_input(tshape s, int arg)
{
	size_t n = (size_t)s.B * s.T * 3 * s.C;
	float *qkv = randv(n, -1, 1);
	for (size_t i = 0; arg & 2 && i < n; i++)
		if (i % (3 * (size_t)s.C) < (size_t)s.C)
			qkv[i] *= 8.0f;
	return qkv;
}

/* arg 1: causal; 2: wide scores */
static double check_attention_forward(const dlt_backend *be, const dlt_backend *ref, tshape s,
				      int arg)
{
	size_t n = (size_t)s.B * s.T * s.C, nl = (size_t)s.B * s.H * s.T;
	float *qkv = attention_input(s, arg), *o = nanv(n), *o2 = nanv(n);
	float *l = nanv(nl), *l2 = nanv(nl);
	double d;
	be->attention_forward(qkv, o, l, s.B, s.T, s.C, s.H, arg & 1);
	ref->attention_forward(qkv, o2, l2, s.B, s.T, s.C, s.H, arg & 1);
	d = fmax(diff(o, o2, n), diff(l, l2, nl));
	free(qkv);
	free(o);
	free(o2);
	free(l);
	free(l2);
	return d;
}

/* From the reference's out and lse, so only backward differs */
static double check_attention_backward(const dlt_backend *be, const dlt_backend *ref,
				       tshape s, int arg)
{
	size_t n = (size_t)s.B * s.T * s.C, nl = (size_t)s.B * s.H * s.T, n3 = 3 * n;
	float *qkv = attention_input(s, arg), *o = nanv(n), *l = nanv(nl);
	float *g = randv(n, -1, 1), *dq = nanv(n3), *dq2 = nanv(n3);
	double d;
	ref->attention_forward(qkv, o, l, s.B, s.T, s.C, s.H, arg & 1);
	be->attention_backward(qkv, o, g, l, dq, s.B, s.T, s.C, s.H, arg & 1);
	ref->attention_backward(qkv, o, g, l, dq2, s.B, s.T, s.C, s.H, arg & 1);
	d = diff(dq, dq2, n3);
	free(qkv);
	free(o);
	free(l);
	free(g);
	free(dq);
	free(dq2);
	return d;
}

/* Generation's attention over a KV cache: each sequence's last query
 * (arg 0), or its second half at once (arg 1), against the reference's
 * causal attention_forward rows; the reference's decode too.  arg 2: the
 * last query of one sequence 5 times as long, past the CPU's chunks of
 * 256 keys. */
static double check_attention_decode(const dlt_backend *be, const dlt_backend *ref, tshape s,
				     int arg)
{
	size_t n, nl;
	float *qkv, *o, *l, *d, *d2;
	int q0, nq;
	double worst = 0;
	if (arg == 2)
		s = (tshape){ 1, 5 * s.T, s.C, s.H };
	n = (size_t)s.B * s.T * s.C;
	nl = (size_t)s.B * s.H * s.T;
	qkv = attention_input(s, 0);
	o = nanv(n);
	l = nanv(nl);
	q0 = arg == 1 ? s.T / 2 : s.T - 1;
	nq = s.T - q0;
	d = nanv((size_t)nq * s.C);
	d2 = nanv((size_t)nq * s.C);
	ref->attention_forward(qkv, o, l, s.B, s.T, s.C, s.H, 1);
	for (int b = 0; b < s.B; b++) {
		const float *want = o + ((size_t)b * s.T + q0) * s.C;
		be->attention_decode(qkv + (size_t)b * s.T * 3 * s.C, d, q0, nq, s.C, s.H);
		ref->attention_decode(qkv + (size_t)b * s.T * 3 * s.C, d2, q0, nq, s.C, s.H);
		worst = fmax(worst, fmax(diff(d, want, (size_t)nq * s.C),
					 diff(d2, want, (size_t)nq * s.C)));
	}
	free(qkv);
	free(o);
	free(l);
	free(d);
	free(d2);
	return worst;
}

typedef struct tcase {
	const char *name;
	double (*check)(const dlt_backend *be, const dlt_backend *ref, tshape s, int arg);
	int arg;
	double tol;
} tcase;

static const tcase tcases[] = {
	{ "layernorm_forward", check_layernorm_forward, 0, 2e-6 },
	{ "layernorm_forward, mean 100", check_layernorm_forward, 100, 2e-6 },
	{ "layernorm_backward dx", check_layernorm_backward, 0, 2e-6 },
	{ "layernorm_backward dgamma dbeta", check_layernorm_backward, 1, 0 },
	{ "embedding_forward", check_embedding_forward, 0, 0 },
	{ "embedding_forward, ids out of range", check_embedding_forward, 1, 0 },
	{ "embedding_backward", check_embedding_backward, 0, 0 },
	{ "embedding_backward, ids out of range", check_embedding_backward, 1, 0 },
	{ "positional_forward", check_positional_forward, 0, 0 },
	{ "positional_forward in place", check_positional_forward, 1, 0 },
	{ "positional_backward", check_positional_backward, 0, 0 },
	{ "attention_forward", check_attention_forward, 0, 1e-5 },
	{ "attention_forward causal", check_attention_forward, 1, 1e-5 },
	{ "attention_forward wide", check_attention_forward, 2, 1e-5 },
	{ "attention_forward causal wide", check_attention_forward, 3, 1e-5 },
	{ "attention_backward", check_attention_backward, 0, 1e-5 },
	{ "attention_backward causal", check_attention_backward, 1, 1e-5 },
	{ "attention_backward wide", check_attention_backward, 2, 1e-5 },
	{ "attention_backward causal wide", check_attention_backward, 3, 1e-5 },
	{ "attention_decode, the last query", check_attention_decode, 0, 1e-5 },
	{ "attention_decode, half the queries", check_attention_decode, 1, 1e-5 },
	{ "attention_decode, 5 T keys", check_attention_decode, 2, 1e-5 },
};

static void run_transformer_table(const dlt_backend *be, const dlt_backend *ref)
{
	for (size_t c = 0; c < sizeof(tcases) / sizeof(tcases[0]); c++) {
		for (size_t i = 0; i < sizeof(tshapes) / sizeof(tshapes[0]); i++) {
			tshape s = tshapes[i];
			double d = tcases[c].check(be, ref, s, tcases[c].arg);
			if (!ok(d <= tcases[c].tol, "%s %s B %d T %d C %d H %d", be->name,
				tcases[c].name, s.B, s.T, s.C, s.H))
				diag("worst relative difference %g, tolerance %g", d,
				     tcases[c].tol);
		}
	}
}

/* The transformer's backward sums (and attention's tiles) on 1 and 3
 * threads: the same bits. */
static void test_transformer_threads(const dlt_backend *be)
{
	tshape s = { 3, 130, 128, 4 };
	int rows = 3000, C = 300, V = 40, saved = omp_get_max_threads(), same[5] = { 1, 1, 1, 1, 1 };
	size_t n = (size_t)rows * C, na = (size_t)s.B * s.T * s.C, nl = (size_t)s.B * s.H * s.T;
	float *x = randv(n, -2, 2), *dy = randv(n, -1, 1), *g = randv(C, 0.5f, 1.5f);
	float *mu = malloc(rows * 4), *rs = malloc(rows * 4), *y = malloc(n * 4);
	float *qkv = attention_input(s, 0), *ga = randv(na, -1, 1);
	int32_t *ids = token_ids(rows, V, 0);
	float *res[2][8];
	be->layernorm_forward(x, g, g, y, mu, rs, rows, C, 1e-5f);
	for (int k = 0; k < 2; k++) {
		float **r = res[k];
		omp_set_num_threads(k ? 3 : 1);
		r[0] = malloc(n * 4);			/* dx */
		r[1] = calloc(C, 4);			/* dgamma */
		r[2] = calloc(C, 4);			/* dbeta */
		r[3] = calloc((size_t)V * C, 4);	/* embedding's dw */
		r[4] = calloc((size_t)s.T * s.C, 4);	/* dp */
		r[5] = malloc(na * 4);			/* attention's out */
		r[6] = malloc(nl * 4);			/* lse */
		r[7] = malloc(na * 3 * 4);		/* dqkv */
		be->layernorm_backward(x, dy, g, mu, rs, r[0], r[1], r[2], rows, C);
		be->embedding_backward(ids, dy, r[3], rows, C, V);
		be->positional_backward(ga, r[4], s.B, s.T, s.C);
		be->attention_forward(qkv, r[5], r[6], s.B, s.T, s.C, s.H, 1);
		be->attention_backward(qkv, r[5], ga, r[6], r[7], s.B, s.T, s.C, s.H, 1);
	}
	omp_set_num_threads(saved);
	same[0] = !memcmp(res[0][0], res[1][0], n * 4) && !memcmp(res[0][1], res[1][1], C * 4) &&
		  !memcmp(res[0][2], res[1][2], C * 4);
	same[1] = !memcmp(res[0][3], res[1][3], (size_t)V * C * 4);
	same[2] = !memcmp(res[0][4], res[1][4], (size_t)s.T * s.C * 4);
	same[3] = !memcmp(res[0][5], res[1][5], na * 4) && !memcmp(res[0][6], res[1][6], nl * 4);
	same[4] = !memcmp(res[0][7], res[1][7], na * 3 * 4);
	ok(same[0], "%s layernorm_backward: same bits on 1 and 3 threads", be->name);
	ok(same[1], "%s embedding_backward: same bits on 1 and 3 threads", be->name);
	ok(same[2], "%s positional_backward: same bits on 1 and 3 threads", be->name);
	ok(same[3], "%s attention_forward: same bits on 1 and 3 threads", be->name);
	ok(same[4], "%s attention_backward: same bits on 1 and 3 threads", be->name);
	for (int k = 0; k < 2; k++)
		for (int j = 0; j < 8; j++)
			free(res[k][j]);
	free(x);
	free(dy);
	free(g);
	free(mu);
	free(rs);
	free(y);
	free(qkv);
	free(ga);
	free(ids);
}

/* Values worked out by hand: one position attends to itself alone, so
 * its output is its value and its lse its one score; an id out of range
 * embeds as NaN. */
static void test_transformer_known(const dlt_backend *be)
{
	float qkv[3 * 4] = { 1, 2, 3, 4, 0.5f, 0.25f, -1, 2, 7, 8, 9, 10 }, o[4], l[2];
	float w[2 * 2] = { 1, 2, 3, 4 }, e[3 * 2];
	int32_t ids[3] = { 1, 2, 0 };
	be->attention_forward(qkv, o, l, 1, 1, 4, 2, 1);
	ok(o[0] == 7 && o[1] == 8 && o[2] == 9 && o[3] == 10, "%s attention of one position is "
	   "its value", be->name);
	ok(fabsf(l[0] - 1.0f / sqrtf(2.0f)) < 1e-6f && fabsf(l[1] - 5.0f / sqrtf(2.0f)) < 1e-6f,
	   "%s attention's lse of one position is its scaled score (%g %g)", be->name, l[0], l[1]);
	be->embedding_forward(ids, w, e, 3, 2, 2);
	ok(e[0] == 3 && e[1] == 4 && isnan(e[2]) && isnan(e[3]) && e[4] == 1 && e[5] == 2,
	   "%s embedding_forward: rows by id, NaN for an id out of range", be->name);
}

/* ---- the reference's gradients against finite differences ---- */

/* sum(y * w) in double */
static double weighted(const float *y, const float *w, size_t n)
{
	double s = 0.0;
	for (size_t i = 0; i < n; i++)
		s += (double)y[i] * w[i];
	return s;
}

static double ln_loss(const dlt_backend *ref, const float *x, const float *g, const float *b,
		      const float *w, int rows, int C)
{
	size_t n = (size_t)rows * C;
	float *y = malloc(n * 4), *mu = malloc(rows * 4), *rs = malloc(rows * 4);
	double s;
	ref->layernorm_forward(x, g, b, y, mu, rs, rows, C, 1e-5f);
	s = weighted(y, w, n);
	free(y);
	free(mu);
	free(rs);
	return s;
}

/* Central differences of a float input v[i], step h; the worst
 * |numeric - analytic| / (1 + |analytic|) over the n of them */
#define FD_WORST(v, n, grad, h, loss_expr)                                        \
	do {                                                                      \
		for (size_t i_ = 0; i_ < (n); i_++) {                             \
			float old_ = (v)[i_];                                     \
			double lp_, lm_, num_;                                    \
			(v)[i_] = old_ + (h);                                     \
			lp_ = (loss_expr);                                        \
			(v)[i_] = old_ - (h);                                     \
			lm_ = (loss_expr);                                        \
			(v)[i_] = old_;                                           \
			num_ = (lp_ - lm_) / ((double)(old_ + (h)) - (double)(old_ - (h))); \
			worst = fmax(worst, fabs(num_ - (grad)[i_]) /             \
					    (1.0 + fabs((grad)[i_])));            \
		}                                                                 \
	} while (0)

static void test_layernorm_fd(const dlt_backend *ref)
{
	int rows = 3, C = 10;
	size_t n = (size_t)rows * C;
	float *x = randv(n, -2, 2), *g = randv(C, 0.5f, 1.5f), *b = randv(C, -1, 1);
	float *w = randv(n, -1, 1), *y = malloc(n * 4), *mu = malloc(rows * 4);
	float *rs = malloc(rows * 4), *dx = malloc(n * 4), *dg = calloc(C, 4), *db = calloc(C, 4);
	double worst = 0.0;
	ref->layernorm_forward(x, g, b, y, mu, rs, rows, C, 1e-5f);
	ref->layernorm_backward(x, w, g, mu, rs, dx, dg, db, rows, C);
	FD_WORST(x, n, dx, 1e-2f, ln_loss(ref, x, g, b, w, rows, C));
	FD_WORST(g, (size_t)C, dg, 1e-2f, ln_loss(ref, x, g, b, w, rows, C));
	FD_WORST(b, (size_t)C, db, 1e-2f, ln_loss(ref, x, g, b, w, rows, C));
	ok(worst < 1e-3, "ref layernorm: x, gamma and beta gradients match finite "
	   "differences (worst %.3g)", worst);
	free(x);
	free(g);
	free(b);
	free(w);
	free(y);
	free(mu);
	free(rs);
	free(dx);
	free(dg);
	free(db);
}

static double attn_loss(const dlt_backend *ref, const float *qkv, const float *w, tshape s,
			int causal)
{
	size_t n = (size_t)s.B * s.T * s.C;
	float *o = malloc(n * 4), *l = malloc((size_t)s.B * s.H * s.T * 4);
	double v;
	ref->attention_forward(qkv, o, l, s.B, s.T, s.C, s.H, causal);
	v = weighted(o, w, n);
	free(o);
	free(l);
	return v;
}

static void test_attention_fd(const dlt_backend *ref, int causal)
{
	tshape s = { 2, 5, 8, 2 };
	size_t n = (size_t)s.B * s.T * s.C;
	float *qkv = randv(3 * n, -1.5f, 1.5f), *w = randv(n, -1, 1), *o = malloc(n * 4);
	float *l = malloc((size_t)s.B * s.H * s.T * 4), *dq = malloc(3 * n * 4);
	double worst = 0.0;
	ref->attention_forward(qkv, o, l, s.B, s.T, s.C, s.H, causal);
	ref->attention_backward(qkv, o, w, l, dq, s.B, s.T, s.C, s.H, causal);
	FD_WORST(qkv, 3 * n, dq, 1e-2f, attn_loss(ref, qkv, w, s, causal));
	ok(worst < 1e-3, "ref attention%s: q, k and v gradients match finite differences "
	   "(worst %.3g)", causal ? " causal" : "", worst);
	free(qkv);
	free(w);
	free(o);
	free(l);
	free(dq);
}

/* Not a test: the fast attention's forward + backward against the
 * reference's, in ms, at two GPT-ish sizes (skipped under the sanitizers) */
static void bench_attention(const dlt_backend *be, const dlt_backend *ref)
{
#if defined(__SANITIZE_ADDRESS__)
	diag("attention timings skipped under the sanitizers");
	(void)be;
	(void)ref;
#else
	static const tshape sizes[] = { { 16, 128, 128, 4 }, { 8, 256, 384, 6 } };
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		tshape s = sizes[i];
		size_t n = (size_t)s.B * s.T * s.C, nl = (size_t)s.B * s.H * s.T;
		float *qkv = attention_input(s, 0), *g = randv(n, -1, 1), *o = malloc(n * 4);
		float *l = malloc(nl * 4), *dq = malloc(3 * n * 4);
		const dlt_backend *bs[2] = { be, ref };
		double ms[2][2];
		for (int k = 0; k < 2; k++) {
			int reps = k ? 1 : 5;
			double t0, t1, t2;
			bs[k]->attention_forward(qkv, o, l, s.B, s.T, s.C, s.H, 1);	/* warm */
			t0 = dlt_now();
			for (int r = 0; r < reps; r++)
				bs[k]->attention_forward(qkv, o, l, s.B, s.T, s.C, s.H, 1);
			t1 = dlt_now();
			for (int r = 0; r < reps; r++)
				bs[k]->attention_backward(qkv, o, g, l, dq, s.B, s.T, s.C, s.H, 1);
			t2 = dlt_now();
			ms[k][0] = (t1 - t0) * 1e3 / reps;
			ms[k][1] = (t2 - t1) * 1e3 / reps;
		}
		diag("attention causal B %d T %d C %d H %d, %d threads: %s fwd %.2f ms bwd %.2f ms, "
		     "ref fwd %.1f ms bwd %.1f ms (%.0fx)", s.B, s.T, s.C, s.H, omp_get_max_threads(),
		     be->name, ms[0][0], ms[0][1], ms[1][0], ms[1][1],
		     (ms[1][0] + ms[1][1]) / (ms[0][0] + ms[0][1]));
		free(qkv);
		free(g);
		free(o);
		free(l);
		free(dq);
	}
#endif
}

/* The reductions must give the same bits on any number of threads. */
static void test_thread_independence(const dlt_backend *be)
{
	int rows = 3000, cols = 300;
	size_t n = (size_t)rows * cols;
	float *dy = randv(n, -1, 1), *db1 = malloc(cols * 4), *db3 = malloc(cols * 4);
	float *dx1 = malloc(n * 4), *dx3 = malloc(n * 4);
	int32_t *lab = malloc(rows * sizeof(int32_t));
	double l1, l3;
	int h1, h3, saved = omp_get_max_threads();
	for (int r = 0; r < rows; r++)
		lab[r] = (int32_t)dlt_rng_below(&rng, cols);
	omp_set_num_threads(1);
	be->bias_grad(dy, db1, rows, cols);
	be->softmax_xent(dy, lab, rows, cols, dx1, &l1, &h1);
	omp_set_num_threads(3);
	be->bias_grad(dy, db3, rows, cols);
	be->softmax_xent(dy, lab, rows, cols, dx3, &l3, &h3);
	omp_set_num_threads(saved);
	ok(!memcmp(db1, db3, cols * 4), "%s bias_grad: same bits on 1 and 3 threads", be->name);
	ok(l1 == l3 && h1 == h3 && !memcmp(dx1, dx3, n * 4),
	   "%s softmax_xent: same bits on 1 and 3 threads", be->name);
	free(dy);
	free(db1);
	free(db3);
	free(dx1);
	free(dx3);
	free(lab);
}

/* Beyond agreeing with the reference, the kernels must be right. */
static void test_known_values(const dlt_backend *be)
{
	size_t n = 100000;
	float *x = randv(n, 1, 2), *y = malloc(n * 4), *mk = malloc(n * 4);
	float logits[3] = { 1000.0f, 0.0f, -1000.0f }, dl[3];
	int32_t lab = 1;
	double loss, kept = 0.0;
	int hits;
	be->dropout(x, y, mk, n, 0.3f, 1, 99);
	for (size_t i = 0; i < n; i++)
		kept += mk[i] != 0.0f;
	ok_near(kept / n, 0.7, 0.01, "%s dropout 0.3 keeps 70%%", be->name);
	ok(mk[0] == 0.0f || fabsf(mk[0] - 1.0f / 0.7f) < 1e-6f, "%s dropout scales by 1/(1-p)",
	   be->name);
	be->softmax_xent(logits, &lab, 1, 3, dl, &loss, &hits);
	ok_near(loss, 1000.0, 1e-9, "%s softmax_xent of logits 1000, 0, -1000 at 0", be->name);
	ok(dl[0] == 1.0f && dl[1] == -1.0f && dl[2] == 0.0f && hits == 0,
	   "%s softmax_xent gradient is softmax - onehot", be->name);
	lab = 7;
	be->softmax_xent(logits, &lab, 1, 3, dl, &loss, &hits);
	ok(isnan(loss), "%s softmax_xent: a label out of range gives a NaN loss", be->name);
	{
		/* 1 + 2^-10 is a float, not a bf16 (rounds to 1) nor,
		 * with 2^-12 more, an fp16 (rounds to 1 + 2^-10) */
		float a[2] = { 1.0f + 0x1p-10f + 0x1p-12f, 3.0f }, b[2] = { 1.0f, 0.0f }, c[3];
		be->gemm(DLT_PREC_F32, 0, 0, 1, 1, 2, 1.0f, a, 2, b, 1, 0.0f, &c[0], 1);
		be->gemm(DLT_PREC_BF16, 0, 0, 1, 1, 2, 1.0f, a, 2, b, 1, 0.0f, &c[1], 1);
		be->gemm(DLT_PREC_F16, 0, 0, 1, 1, 2, 1.0f, a, 2, b, 1, 0.0f, &c[2], 1);
		ok(c[0] == a[0] && c[1] == 1.0f && c[2] == 1.0f + 0x1p-10f,
		   "%s gemm rounds its inputs to bf16 and fp16 (%a %a %a)", be->name, c[0], c[1],
		   c[2]);
	}
	free(x);
	free(y);
	free(mk);
}

/* The kernels' Philox is the host's: Random123's known answers, and the
 * same numbers as dlt_rng where their counters meet (stream 0). */
static void test_philox(void)
{
	uint32_t c[4] = { 0, 0, 0, 0 }, k[2] = { 0, 0 }, dev[4];
	uint32_t ones[4] = { ~0u, ~0u, ~0u, ~0u }, kones[2] = { ~0u, ~0u };
	int same = 1;
	dlt_rng r;
	dlt_philox4x32_10(c, k);
	ok(c[0] == 0x6627e8d5 && c[1] == 0xe169c58d && c[2] == 0xbc57ac4c && c[3] == 0x9b00dbd8,
	   "philox4x32-10 of zeros");
	dlt_philox4x32_10(ones, kones);
	ok(ones[0] == 0x408f276d && ones[1] == 0x41c83b0e && ones[2] == 0xa20bc7c6 &&
	   ones[3] == 0x6d5451fd, "philox4x32-10 of ones");
	dlt_rng_init(&r, 0x123456789abcdefull, 0);
	for (uint64_t b = 0; b < 10; b++) {
		dlt_philox_block(0x123456789abcdefull, 0, b, dev);
		for (int j = 0; j < 4; j++)
			same &= dev[j] == dlt_rng_u32(&r);
	}
	ok(same, "dlt_philox_block of stream 0 = dlt_rng's stream 0");
}

int main(void)
{
	const dlt_backend *backends[] = { dlt_backend_cpu() };
	dlt_rng_init(&rng, 1234, 0);
	test_philox();
	for (size_t b = 0; b < sizeof(backends) / sizeof(backends[0]); b++) {
		run_table(backends[b], dlt_backend_ref());
		test_thread_independence(backends[b]);
		test_known_values(backends[b]);
		run_transformer_table(backends[b], dlt_backend_ref());
		test_transformer_threads(backends[b]);
		test_transformer_known(backends[b]);
	}
	test_layernorm_fd(dlt_backend_ref());
	test_attention_fd(dlt_backend_ref(), 0);
	test_attention_fd(dlt_backend_ref(), 1);
	bench_attention(dlt_backend_cpu(), dlt_backend_ref());
	return done_testing();
}
