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
	{ "bias_act relu, no bias", check_bias_act, DLT_ACT_RELU + 16, 1e-7 },
	{ "bias_act gelu, no bias", check_bias_act, DLT_ACT_GELU + 16, 1e-7 },
	{ "act_forward none", check_act_forward, DLT_ACT_NONE, 1e-7 },
	{ "act_forward relu", check_act_forward, DLT_ACT_RELU, 1e-7 },
	{ "act_forward leaky_relu", check_act_forward, DLT_ACT_LEAKY_RELU, 1e-7 },
	{ "act_forward gelu", check_act_forward, DLT_ACT_GELU, 1e-7 },
	{ "act_forward tanh", check_act_forward, DLT_ACT_TANH, 1e-7 },
	{ "act_forward sigmoid", check_act_forward, DLT_ACT_SIGMOID, 1e-7 },
	{ "act_forward sigmoid in place", check_act_forward, DLT_ACT_SIGMOID + 16, 1e-7 },
	{ "act_forward relu in place", check_act_forward, DLT_ACT_RELU + 16, 1e-7 },
	{ "act_backward none", check_act_backward, DLT_ACT_NONE, 1e-7 },
	{ "act_backward relu", check_act_backward, DLT_ACT_RELU, 1e-7 },
	{ "act_backward leaky_relu", check_act_backward, DLT_ACT_LEAKY_RELU, 1e-7 },
	{ "act_backward gelu", check_act_backward, DLT_ACT_GELU, 1e-7 },
	{ "act_backward tanh", check_act_backward, DLT_ACT_TANH, 1e-7 },
	{ "act_backward sigmoid", check_act_backward, DLT_ACT_SIGMOID, 1e-7 },
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
	}
	return done_testing();
}
