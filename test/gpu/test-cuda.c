/* Every entry of the CUDA backend against the reference backend (as
 * llm.c's dev/cuda and ggml's test-backend-ops): random inputs of many
 * shapes uploaded, the entry run on the GPU, its outputs downloaded and
 * compared with dlt_backend_ref() on the same inputs.  Without a CUDA
 * device it skips (TAP's 1..0).  test-cuda --probe only says whether
 * there is one: exit 0, or 1 with the reason on stdout.  test-cuda --conv
 * (or DLT_TEST_CUDA=conv) runs only the convolution tests and the
 * failure test (which says whether any entry failed before it).
 *
 * Tolerances, on the worst |got - want| / (1 + |want|) of an output:
 *   exact (the CPU's bits): bias_grad, dropout (masks and outputs), mul,
 *     add, scale, round, nonfinite, relu/leaky relu, adam, sgd, pooling
 *     (values, argmax, gradients); memory entries.
 *   1e-6: gelu, tanh, sigmoid and softmax (CUDA's expf, erff, tanhf and
 *     logf are within 2 ulp, glibc's within 1).
 *   1e-5 over the square root of the sum's length, as test-layers: gemm
 *     and convolution in f32, bf16 and fp16 (the inputs rounded as the
 *     CPU rounds them, the products summed in f32 against the reference's
 *     double); separate cases check that f32 keeps the bits TF32 would
 *     drop, and that bf16/fp16 round ties to even as the CPU.
 *   transformer entries (test_transformer): layer norm 1e-6, its dgamma
 *     and dbeta, embeddings and positions exact, attention 1e-5.
 *   batch norm (cuDNN, float sums): 1e-5 on y, mean, invstd, running
 *     statistics and dx over 1 + |the mean of x| (cuDNN's float x - mean
 *     is good to the rounding of x: 1.5e-5 was seen at mean 100); dgamma,
 *     dbeta 1e-5 over the square root of n hw. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "vec.h"
#include "kernels/kernels.h"
#include "util/util.h"

static const dlt_backend *gpu, *ref;
static const char *const prec_name[] = { "f32", "bf16", "f16" };

/* A device copy of n floats (or ints) of host memory */
static void *up(const void *h, size_t bytes)
{
	void *d = gpu->alloc(bytes + 4);
	if (d && bytes)
		gpu->upload(d, h, bytes);
	return d;
}

static float *upf(const float *h, size_t n)
{
	return up(h, n * sizeof(float));
}

/* Device memory full of NaN: an output the kernel forgets shows */
static float *dev_nan(size_t n)
{
	float *h = nanv(n), *d = upf(h, n);
	free(h);
	return d;
}

/* The device's n floats, into new host memory; frees the device copy */
static float *down(float *d, size_t n)
{
	float *h = malloc(n * sizeof(float) + 4);
	gpu->download(h, d, n * sizeof(float));
	gpu->free(d);
	return h;
}

/* Worst |got - want| / (1 + |want|); a NaN where the other has none is
 * infinitely wrong, NaN in both agrees. */
/* Bits equal: 0, else infinitely wrong */
static double bits(const void *a, const void *b, size_t bytes)
{
	return memcmp(a, b, bytes) ? INFINITY : 0.0;
}

/* Bits equal, or both NaN (the GPU's NaNs from arithmetic are all one
 * NaN, the CPU's keep the payload of the NaN they came from) */
static int same_values(const float *a, const float *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!(isnan(a[i]) && isnan(b[i])) && memcmp(&a[i], &b[i], sizeof(float)))
			return 0;
	return 1;
}

/* The backend's first failure, said once: every entry after it may
 * leave its outputs unwritten (NaN here: "inf" as a difference), and
 * softmax_xent's loss is NaN from then on. */
static void show_error(void)
{
	static int shown;
	const char *e = gpu->error();
	if (e && !shown) {
		diag("the CUDA backend has failed: %s", e);
		shown = 1;
	}
}

static int check(double d, double tol, const char *what)
{
	int good = ok(d <= tol, "cuda %s (%.3g, tolerance %.3g)", what, d, tol);
	if (!good)
		show_error();
	return good;
}

/* For a failure's diagnosis: where got differs most from want (as diff
 * weighs it), at its coordinates in dims[4], both values, and how many
 * of each are NaN (an output left unwritten stays NaN). */
static void show_worst(const char *what, const float *got, const float *want, const int dims[4])
{
	size_t n = (size_t)dims[0] * dims[1] * dims[2] * dims[3], at = 0, nan_got = 0, nan_want = 0;
	double worst = 0.0;
	for (size_t i = 0; i < n; i++) {
		double d;
		nan_got += isnan(got[i]) != 0;
		nan_want += isnan(want[i]) != 0;
		if (isnan(got[i]) != isnan(want[i]))
			d = INFINITY;
		else if (isnan(got[i]) || got[i] == want[i])
			continue;
		else if (isnan(d = fabs((double)got[i] - want[i]) / (1.0 + fabs((double)want[i]))))
			d = INFINITY;
		if (d > worst) {
			worst = d;
			at = i;
		}
	}
	if (worst == 0.0)
		return;
	diag("  %s[%zu][%zu][%zu][%zu] of [%d][%d][%d][%d]: got %.9g, want %.9g (%.3g); NaN: "
	     "%zu got, %zu wanted, of %zu", what, at / ((size_t)dims[1] * dims[2] * dims[3]),
	     at / ((size_t)dims[2] * dims[3]) % dims[1], at / dims[3] % dims[2], at % dims[3],
	     dims[0], dims[1], dims[2], dims[3], got[at], want[at], worst, nan_got, nan_want, n);
}

/* --- the dense layers' and optimisers' entries, as test-kernels --- */

typedef struct shape {
	int rows, cols, k;
} shape;

static const shape shapes[] = {
	{ 1, 1, 1 }, { 1, 7, 3 }, { 7, 1, 5 }, { 3, 5, 1 }, { 17, 33, 9 }, { 33, 17, 64 },
	{ 128, 784, 256 }, { 257, 10, 128 }, { 10, 1000, 7 }, { 300, 300, 31 },
};

/* arg bits: 1 transposes A, 2 transposes B, 4 alpha and beta on a random
 * C (else beta 0 on a C of NaN, which must be ignored), 8 pads the
 * leading dimensions; arg >> 4 is the precision. */
static double check_gemm(shape s, int arg)
{
	int tA = arg & 1, tB = !!(arg & 2), pad = arg & 8 ? 3 : 0, prec = arg >> 4;
	int M = s.rows, N = s.cols, K = s.k;
	int lda = (tA ? M : K) + pad, ldb = (tB ? K : N) + pad, ldc = N + pad;
	size_t na = (size_t)(tA ? K : M) * lda, nb = (size_t)(tB ? N : K) * ldb;
	size_t nc = (size_t)M * ldc;
	float alpha = arg & 4 ? 0.5f : 1.0f, beta = arg & 4 ? -1.5f : 0.0f;
	float *A = randv(na, -1, 1), *B = randv(nb, -1, 1), *C = randv(nc, -1, 1), *C2, *dC;
	float *dA = upf(A, na), *dB = upf(B, nb);
	double d = 0.0;
	if (!(arg & 4))
		for (size_t i = 0; i < nc; i++)
			C[i] = NAN;
	C2 = copyv(C, nc);
	dC = upf(C, nc);
	gpu->gemm(prec, tA, tB, M, N, K, alpha, dA, lda, dB, ldb, beta, dC, ldc);
	ref->gemm(prec, tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C2, ldc);
	free(C);
	C = down(dC, nc);
	for (int i = 0; i < M; i++)
		d = fmax(d, diff(C + (size_t)i * ldc, C2 + (size_t)i * ldc, N));
	gpu->free(dA);
	gpu->free(dB);
	free(A);
	free(B);
	free(C);
	free(C2);
	return d / sqrt(K);
}

/* arg: the activation; + 16 leaves the bias out */
static double check_bias_act(shape s, int arg)
{
	size_t n = (size_t)s.rows * s.cols;
	float *y = randv(n, -4, 4), *b = randv(s.cols, -1, 1), *dy = upf(y, n);
	float *db = upf(b, s.cols), *got;
	double d;
	gpu->bias_act(dy, arg & 16 ? NULL : db, s.rows, s.cols, arg & 15, 0.1f);
	ref->bias_act(y, arg & 16 ? NULL : b, s.rows, s.cols, arg & 15, 0.1f);
	got = down(dy, n);
	d = diff(got, y, n);
	gpu->free(db);
	free(y);
	free(b);
	free(got);
	return d;
}

/* arg: the activation; + 16 in place */
static double check_act_forward(shape s, int arg)
{
	size_t n = (size_t)s.rows * s.cols;
	float *x = randv(n, -6, 6), *y = nanv(n), *dx = upf(x, n), *dy, *got;
	double d;
	dy = arg & 16 ? dx : dev_nan(n);
	gpu->act_forward(dx, dy, n, arg & 15, 0.02f);
	ref->act_forward(x, y, n, arg & 15, 0.02f);
	got = down(dy, n);
	d = diff(got, y, n);
	if (!(arg & 16))
		gpu->free(dx);
	free(x);
	free(y);
	free(got);
	return d;
}

static double check_act_backward(shape s, int arg)
{
	size_t n = (size_t)s.rows * s.cols;
	float *x = randv(n, -6, 6), *y = nanv(n), *dy = randv(n, -1, 1), *dx = nanv(n);
	float *gx, *gy, *gdy, *gdx, *got;
	double d;
	ref->act_forward(x, y, n, arg, 0.02f);
	gx = upf(x, n);
	gy = upf(y, n);
	gdy = upf(dy, n);
	gdx = dev_nan(n);
	gpu->act_backward(gx, gy, gdy, gdx, n, arg, 0.02f);
	ref->act_backward(x, y, dy, dx, n, arg, 0.02f);
	got = down(gdx, n);
	d = diff(got, dx, n);
	gpu->free(gx);
	gpu->free(gy);
	gpu->free(gdy);
	free(x);
	free(y);
	free(dy);
	free(dx);
	free(got);
	return d;
}

static double check_bias_grad(shape s, int arg)
{
	size_t n = (size_t)s.rows * s.cols;
	float *dy = randv(n, -1, 1), *db = nanv(s.cols), *gdy = upf(dy, n);
	float *gdb = dev_nan(s.cols), *got;
	double d;
	gpu->bias_grad(gdy, gdb, s.rows, s.cols);
	ref->bias_grad(dy, db, s.rows, s.cols);
	got = down(gdb, s.cols);
	d = bits(got, db, s.cols * sizeof(float));
	gpu->free(gdy);
	free(dy);
	free(db);
	free(got);
	return d;
}

/* arg: the logits' spread */
static double check_softmax_xent(shape s, int arg)
{
	size_t n = (size_t)s.rows * s.cols;
	float *x = randv(n, -arg, arg), *dx = nanv(n), *gx = upf(x, n), *gdx = dev_nan(n), *got;
	int32_t *lab = malloc(s.rows * sizeof(int32_t)), *glab;
	double loss, loss2, d;
	int hits, hits2;
	for (int r = 0; r < s.rows; r++)
		lab[r] = (int32_t)dlt_rng_below(&rng, s.cols);
	glab = up(lab, s.rows * sizeof(int32_t));
	gpu->softmax_xent(gx, glab, s.rows, s.cols, gdx, &loss, &hits);
	ref->softmax_xent(x, lab, s.rows, s.cols, dx, &loss2, &hits2);
	got = down(gdx, n);
	d = fmax(diff(got, dx, n), fabs(loss - loss2) / (1.0 + fabs(loss2)));
	if (hits != hits2 || !isfinite(loss))
		d = INFINITY;
	gpu->free(gx);
	gpu->free(glab);
	free(x);
	free(dx);
	free(got);
	free(lab);
	return d;
}

/* arg: the rate in percent */
static double check_dropout(shape s, int arg)
{
	size_t n = (size_t)s.rows * s.cols;
	float *x = randv(n, -1, 1), *y = nanv(n), *mk = nanv(n), *gx = upf(x, n);
	float *gy = dev_nan(n), *gmk = dev_nan(n), *goty, *gotmk;
	double d;
	gpu->dropout(gx, gy, gmk, n, arg / 100.0f, 42, 7 + n);
	ref->dropout(x, y, mk, n, arg / 100.0f, 42, 7 + n);
	goty = down(gy, n);
	gotmk = down(gmk, n);
	d = fmax(bits(goty, y, n * 4), bits(gotmk, mk, n * 4));
	gpu->free(gx);
	free(x);
	free(y);
	free(mk);
	free(goty);
	free(gotmk);
	return d;
}

/* arg: 0 mul, 1 add, 2 scale */
static double check_arith(shape s, int arg)
{
	size_t n = (size_t)s.rows * s.cols;
	float *a = randv(n, -3, 3), *b = randv(n, -3, 3), *y = nanv(n);
	float *ga = upf(a, n), *gb = upf(b, n), *gy = dev_nan(n), *got;
	double d;
	if (arg == 0) {
		gpu->mul(ga, gb, gy, n);
		ref->mul(a, b, y, n);
	} else if (arg == 1) {
		gpu->add(ga, gb, gy, n);
		ref->add(a, b, y, n);
	} else {
		gpu->scale(ga, n, 0.37f);
		ref->scale(a, n, 0.37f);
		gpu->copy(gy, ga, n * sizeof(float));
		memcpy(y, a, n * sizeof(float));
	}
	got = down(gy, n);
	d = bits(got, y, n * 4);
	gpu->free(ga);
	gpu->free(gb);
	free(a);
	free(b);
	free(y);
	free(got);
	return d;
}

/* Values of every kind: wide, tiny (fp16 subnormals), ties, infinities,
 * NaN and fp16's overflow */
static float *special_values(size_t n)
{
	static const float odd[] = { INFINITY, -INFINITY, NAN, 65504.0f, 65519.0f, 65520.0f,
				     -70000.0f, 0x1p-25f, 0x1p-24f, 0x3p-25f, 1.0f + 0x1p-8f,
				     1.0f + 0x3p-8f, 1.0f + 0x1p-11f, 0.0f, -0.0f, 3e38f };
	float *x = randv(n, -2, 2);
	for (size_t i = 0; i < n; i++) {
		uint32_t r = dlt_rng_u32(&rng);
		if (r % 7 == 0)
			x[i] = odd[r / 7 % (sizeof(odd) / sizeof(odd[0]))];
		else if (r % 7 == 1)
			x[i] *= ldexpf(1.0f, (int)(r / 7 % 80) - 40);
	}
	return x;
}

/* arg: the precision */
static double check_round(shape s, int arg)
{
	size_t n = (size_t)s.rows * s.cols;
	float *x = special_values(n), *gx = upf(x, n), *got;
	double d;
	gpu->round(gx, n, arg);
	ref->round(x, n, arg);
	got = down(gx, n);
	d = bits(got, x, n * 4);
	free(x);
	free(got);
	return d;
}

static double check_nonfinite(shape s, int arg)
{
	size_t n = (size_t)s.rows * s.cols;
	float *x = special_values(n), *gx = upf(x, n);
	double d = gpu->nonfinite(gx, n) == ref->nonfinite(x, n) ? 0.0 : INFINITY;
	gpu->free(gx);
	free(x);
	return d;
}

/* arg: 1 decoupled (AdamW) */
static double check_adam(shape s, int arg)
{
	size_t n = (size_t)s.rows * s.cols;
	float *w = randv(n, -1, 1), *g = randv(n, -1, 1), *m = randv(n, -0.1f, 0.1f);
	float *v = randv(n, 0, 0.01f);
	float *gw = upf(w, n), *gg = upf(g, n), *gm = upf(m, n), *gv = upf(v, n), *a, *b, *c;
	double d;
	gpu->adam(gw, gg, gm, gv, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, arg, 3);
	ref->adam(w, g, m, v, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, arg, 3);
	a = down(gw, n);
	b = down(gm, n);
	c = down(gv, n);
	d = fmax(bits(a, w, n * 4), fmax(bits(b, m, n * 4), bits(c, v, n * 4)));
	gpu->free(gg);
	free(w);
	free(g);
	free(m);
	free(v);
	free(a);
	free(b);
	free(c);
	return d;
}

/* arg: 0 plain, 1 momentum, 2 nesterov; + 4 the first step */
static double check_sgd(shape s, int arg)
{
	size_t n = (size_t)s.rows * s.cols;
	float mom = arg & 3 ? 0.9f : 0.0f;
	float *w = randv(n, -1, 1), *g = randv(n, -1, 1), *b = randv(n, -1, 1);
	float *gw = upf(w, n), *gg = upf(g, n), *gb = upf(b, n), *a, *c;
	double d;
	gpu->sgd(gw, gg, mom ? gb : NULL, n, 0.1f, mom, (arg & 3) == 2, 1e-4f, !!(arg & 4));
	ref->sgd(w, g, mom ? b : NULL, n, 0.1f, mom, (arg & 3) == 2, 1e-4f, !!(arg & 4));
	a = down(gw, n);
	c = down(gb, n);
	d = fmax(bits(a, w, n * 4), bits(c, b, n * 4));
	gpu->free(gg);
	free(w);
	free(g);
	free(b);
	free(a);
	free(c);
	return d;
}

typedef struct kcase {
	const char *name;
	double (*check)(shape s, int arg);
	int arg;
	double tol;
} kcase;

#define GEMM(p) ((p) << 4)

static const kcase cases[] = {
	{ "gemm nn f32", check_gemm, 0, 1e-5 },
	{ "gemm tn f32", check_gemm, 1, 1e-5 },
	{ "gemm nt f32", check_gemm, 2, 1e-5 },
	{ "gemm tt f32", check_gemm, 3, 1e-5 },
	{ "gemm nn alpha beta f32", check_gemm, 4, 1e-5 },
	{ "gemm tt alpha beta padded f32", check_gemm, 15, 1e-5 },
	{ "gemm nt bf16", check_gemm, 2 + GEMM(DLT_PREC_BF16), 1e-5 },
	{ "gemm tn bf16", check_gemm, 1 + GEMM(DLT_PREC_BF16), 1e-5 },
	{ "gemm nn alpha beta padded bf16", check_gemm, 12 + GEMM(DLT_PREC_BF16), 1e-5 },
	{ "gemm nt f16", check_gemm, 2 + GEMM(DLT_PREC_F16), 1e-5 },
	{ "gemm tt alpha beta padded f16", check_gemm, 15 + GEMM(DLT_PREC_F16), 1e-5 },
	{ "bias_act none", check_bias_act, DLT_ACT_NONE, 0 },
	{ "bias_act relu", check_bias_act, DLT_ACT_RELU, 0 },
	{ "bias_act leaky_relu", check_bias_act, DLT_ACT_LEAKY_RELU, 0 },
	{ "bias_act gelu", check_bias_act, DLT_ACT_GELU, 1e-6 },
	{ "bias_act tanh", check_bias_act, DLT_ACT_TANH, 1e-6 },
	{ "bias_act sigmoid", check_bias_act, DLT_ACT_SIGMOID, 1e-6 },
	{ "bias_act gelu_tanh", check_bias_act, DLT_ACT_GELU_TANH, 1e-6 },
	{ "bias_act relu, no bias", check_bias_act, DLT_ACT_RELU + 16, 0 },
	{ "bias_act none, no bias", check_bias_act, DLT_ACT_NONE + 16, 0 },
	{ "act_forward none", check_act_forward, DLT_ACT_NONE, 0 },
	{ "act_forward relu", check_act_forward, DLT_ACT_RELU, 0 },
	{ "act_forward leaky_relu", check_act_forward, DLT_ACT_LEAKY_RELU, 0 },
	{ "act_forward gelu", check_act_forward, DLT_ACT_GELU, 1e-6 },
	{ "act_forward tanh", check_act_forward, DLT_ACT_TANH, 1e-6 },
	{ "act_forward sigmoid", check_act_forward, DLT_ACT_SIGMOID, 1e-6 },
	{ "act_forward sigmoid in place", check_act_forward, DLT_ACT_SIGMOID + 16, 1e-6 },
	{ "act_forward gelu_tanh", check_act_forward, DLT_ACT_GELU_TANH, 1e-6 },
	{ "act_forward none in place", check_act_forward, DLT_ACT_NONE + 16, 0 },
	{ "act_backward none", check_act_backward, DLT_ACT_NONE, 0 },
	{ "act_backward relu", check_act_backward, DLT_ACT_RELU, 0 },
	{ "act_backward leaky_relu", check_act_backward, DLT_ACT_LEAKY_RELU, 0 },
	{ "act_backward gelu", check_act_backward, DLT_ACT_GELU, 1e-6 },
	{ "act_backward tanh", check_act_backward, DLT_ACT_TANH, 0 },
	{ "act_backward sigmoid", check_act_backward, DLT_ACT_SIGMOID, 0 },
	{ "act_backward gelu_tanh", check_act_backward, DLT_ACT_GELU_TANH, 1e-6 },
	{ "bias_grad", check_bias_grad, 0, 0 },
	{ "softmax_xent", check_softmax_xent, 3, 1e-6 },
	{ "softmax_xent wide logits", check_softmax_xent, 200, 1e-6 },
	{ "dropout 0.5", check_dropout, 50, 0 },
	{ "dropout 0.1", check_dropout, 10, 0 },
	{ "dropout 0", check_dropout, 0, 0 },
	{ "mul", check_arith, 0, 0 },
	{ "add", check_arith, 1, 0 },
	{ "scale", check_arith, 2, 0 },
	{ "round bf16", check_round, DLT_PREC_BF16, 0 },
	{ "round f16", check_round, DLT_PREC_F16, 0 },
	{ "round f32", check_round, DLT_PREC_F32, 0 },
	{ "nonfinite", check_nonfinite, 0, 0 },
	{ "adam", check_adam, 0, 0 },
	{ "adamw", check_adam, 1, 0 },
	{ "sgd", check_sgd, 0, 0 },
	{ "sgd momentum", check_sgd, 1, 0 },
	{ "sgd momentum first step", check_sgd, 1 + 4, 0 },
	{ "sgd nesterov", check_sgd, 2, 0 },
	{ "sgd nesterov first step", check_sgd, 2 + 4, 0 },
};

static void test_table(void)
{
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		double worst = 0.0;
		int bad = 0;
		for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
			shape s = shapes[i];
			double d = cases[c].check(s, cases[c].arg);
			if (d > cases[c].tol && bad++ < 3)
				diag("%s %dx%d (k %d): %g", cases[c].name, s.rows, s.cols, s.k, d);
			worst = fmax(worst, d);
		}
		check(worst, cases[c].tol, cases[c].name);
	}
}

/* --- the transformer's entries, on shapes of their own --- */

/* [B, T, C] activations, H heads; layer norm's rows are B * T */
typedef struct tshape {
	int B, T, C, H;
} tshape;

/* T around 64 (the CPU's tiles), head sizes 8 to 64, rows 1 to 300 */
static const tshape tshapes[] = {
	{ 1, 1, 16, 2 }, { 2, 7, 16, 2 }, { 1, 63, 48, 6 }, { 2, 64, 128, 4 },
	{ 1, 65, 16, 2 }, { 1, 130, 48, 6 }, { 2, 130, 128, 4 }, { 4, 75, 40, 5 },
	{ 2, 33, 384, 6 },
};

/* arg: the inputs' offset (a mean far from 0) */
static double check_layernorm_forward(tshape s, int arg)
{
	int rows = s.B * s.T, C = s.C;
	size_t n = (size_t)rows * C;
	float *x = randv(n, arg - 3.0f, arg + 3.0f), *g = randv(C, 0.5f, 1.5f);
	float *b = randv(C, -1, 1), *y = nanv(n), *mu = nanv(rows), *rs = nanv(rows);
	float *gx = upf(x, n), *gg = upf(g, C), *gb = upf(b, C), *gy = dev_nan(n);
	float *gmu = dev_nan(rows), *grs = dev_nan(rows), *hy, *hmu, *hrs;
	double d;
	gpu->layernorm_forward(gx, gg, gb, gy, gmu, grs, rows, C, 1e-5f);
	ref->layernorm_forward(x, g, b, y, mu, rs, rows, C, 1e-5f);
	hy = down(gy, n);
	hmu = down(gmu, rows);
	hrs = down(grs, rows);
	d = fmax(diff(hy, y, n), fmax(diff(hmu, mu, rows), diff(hrs, rs, rows)));
	gpu->free(gx);
	gpu->free(gg);
	gpu->free(gb);
	free(x);
	free(g);
	free(b);
	free(y);
	free(mu);
	free(rs);
	free(hy);
	free(hmu);
	free(hrs);
	return d;
}

/* arg 0: dx; 1: dgamma and dbeta added to what they held (the
 * reference's order and arithmetic: its bits) */
static double check_layernorm_backward(tshape s, int arg)
{
	int rows = s.B * s.T, C = s.C;
	size_t n = (size_t)rows * C;
	float *x = randv(n, -2, 2), *g = randv(C, 0.5f, 1.5f), *b = randv(C, -1, 1);
	float *dy = randv(n, -1, 1), *y = nanv(n), *mu = nanv(rows), *rs = nanv(rows);
	float *dx = nanv(n), *dg = randv(C, -1, 1), *db = randv(C, -1, 1);
	float *gx = upf(x, n), *gdy = upf(dy, n), *gg = upf(g, C), *gmu, *grs, *gdx, *gdg, *gdb;
	float *hdx, *hdg, *hdb;
	double d;
	ref->layernorm_forward(x, g, b, y, mu, rs, rows, C, 1e-5f);
	gmu = upf(mu, rows);
	grs = upf(rs, rows);
	gdx = dev_nan(n);
	gdg = upf(dg, C);
	gdb = upf(db, C);
	gpu->layernorm_backward(gx, gdy, gg, gmu, grs, gdx, gdg, gdb, rows, C);
	ref->layernorm_backward(x, dy, g, mu, rs, dx, dg, db, rows, C);
	hdx = down(gdx, n);
	hdg = down(gdg, C);
	hdb = down(gdb, C);
	d = arg ? fmax(bits(hdg, dg, C * sizeof(float)), bits(hdb, db, C * sizeof(float)))
		: diff(hdx, dx, n);
	gpu->free(gx);
	gpu->free(gdy);
	gpu->free(gg);
	gpu->free(gmu);
	gpu->free(grs);
	free(x);
	free(g);
	free(b);
	free(dy);
	free(y);
	free(mu);
	free(rs);
	free(dx);
	free(dg);
	free(db);
	free(hdx);
	free(hdg);
	free(hdb);
	return d;
}

/* ids of B * T tokens among V = T + 3 (repeats where T is small); bad:
 * -1 and V among them */
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

/* arg 1: ids out of range */
static double check_embedding_forward(tshape s, int arg)
{
	int n = s.B * s.T, V = s.T + 3;
	size_t no = (size_t)n * s.C, nw = (size_t)V * s.C;
	int32_t *ids = token_ids(n, V, arg), *gids = up(ids, n * sizeof(int32_t));
	float *w = randv(nw, -1, 1), *o = nanv(no), *gw = upf(w, nw), *go = dev_nan(no), *h;
	double d;
	gpu->embedding_forward(gids, gw, go, n, s.C, V);
	ref->embedding_forward(ids, w, o, n, s.C, V);
	h = down(go, no);
	d = same_values(h, o, no) ? 0.0 : INFINITY;
	gpu->free(gids);
	gpu->free(gw);
	free(ids);
	free(w);
	free(o);
	free(h);
	return d;
}

static double check_embedding_backward(tshape s, int arg)
{
	int n = s.B * s.T, V = s.T + 3;
	size_t no = (size_t)n * s.C, nw = (size_t)V * s.C;
	int32_t *ids = token_ids(n, V, arg), *gids = up(ids, n * sizeof(int32_t));
	float *g = randv(no, -1, 1), *dw = randv(nw, -1, 1), *gg = upf(g, no), *gdw = upf(dw, nw);
	float *h;
	double d;
	gpu->embedding_backward(gids, gg, gdw, n, s.C, V);
	ref->embedding_backward(ids, g, dw, n, s.C, V);
	h = down(gdw, nw);
	d = bits(h, dw, nw * sizeof(float));
	gpu->free(gids);
	gpu->free(gg);
	free(ids);
	free(g);
	free(dw);
	free(h);
	return d;
}

/* arg 1: in place */
static double check_positional_forward(tshape s, int arg)
{
	size_t n = (size_t)s.B * s.T * s.C, np = (size_t)s.T * s.C;
	float *x = randv(n, -1, 1), *p = randv(np, -1, 1), *y = nanv(n);
	float *gx = upf(x, n), *gp = upf(p, np), *gy = arg ? gx : dev_nan(n), *h;
	double d;
	gpu->positional_forward(gx, gp, gy, s.B, s.T, s.C);
	ref->positional_forward(x, p, y, s.B, s.T, s.C);
	h = down(gy, n);
	d = bits(h, y, n * sizeof(float));
	if (!arg)
		gpu->free(gx);
	gpu->free(gp);
	free(x);
	free(p);
	free(y);
	free(h);
	return d;
}

static double check_positional_backward(tshape s, int arg)
{
	size_t n = (size_t)s.B * s.T * s.C, np = (size_t)s.T * s.C;
	float *g = randv(n, -1, 1), *dp = randv(np, -1, 1), *gg = upf(g, n), *gdp = upf(dp, np);
	float *h;
	double d;
	gpu->positional_backward(gg, gdp, s.B, s.T, s.C);
	ref->positional_backward(g, dp, s.B, s.T, s.C);
	h = down(gdp, np);
	d = bits(h, dp, np * sizeof(float));
	gpu->free(gg);
	free(g);
	free(dp);
	free(h);
	return d;
}

/* qkv in [-1, 1]; arg 2: queries 8 times wider (sharp softmax rows) */
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
static double check_attention_forward(tshape s, int arg)
{
	size_t n = (size_t)s.B * s.T * s.C, nl = (size_t)s.B * s.H * s.T;
	float *qkv = attention_input(s, arg), *o = nanv(n), *l = nanv(nl);
	float *gq = upf(qkv, 3 * n), *go = dev_nan(n), *gl = dev_nan(nl), *ho, *hl;
	double d;
	gpu->attention_forward(gq, go, gl, s.B, s.T, s.C, s.H, arg & 1);
	ref->attention_forward(qkv, o, l, s.B, s.T, s.C, s.H, arg & 1);
	ho = down(go, n);
	hl = down(gl, nl);
	d = fmax(diff(ho, o, n), diff(hl, l, nl));
	gpu->free(gq);
	free(qkv);
	free(o);
	free(l);
	free(ho);
	free(hl);
	return d;
}

/* From the reference's out and lse */
static double check_attention_backward(tshape s, int arg)
{
	size_t n = (size_t)s.B * s.T * s.C, nl = (size_t)s.B * s.H * s.T;
	float *qkv = attention_input(s, arg), *o = nanv(n), *l = nanv(nl), *g = randv(n, -1, 1);
	float *dq = nanv(3 * n), *gq = upf(qkv, 3 * n), *go, *gl, *gg = upf(g, n);
	float *gdq = dev_nan(3 * n), *h;
	double d;
	ref->attention_forward(qkv, o, l, s.B, s.T, s.C, s.H, arg & 1);
	go = upf(o, n);
	gl = upf(l, nl);
	gpu->attention_backward(gq, go, gg, gl, gdq, s.B, s.T, s.C, s.H, arg & 1);
	ref->attention_backward(qkv, o, g, l, dq, s.B, s.T, s.C, s.H, arg & 1);
	h = down(gdq, 3 * n);
	d = diff(h, dq, 3 * n);
	gpu->free(gq);
	gpu->free(go);
	gpu->free(gl);
	gpu->free(gg);
	free(qkv);
	free(o);
	free(l);
	free(g);
	free(dq);
	free(h);
	return d;
}

typedef struct tcase {
	const char *name;
	double (*check)(tshape s, int arg);
	int arg;
	double tol;
} tcase;

/* layer norm: double sums in another order than the reference's (1e-6);
 * its dgamma and dbeta, the embedding's and the positions' sums: the
 * reference's order, its bits; attention: float sums over up to 130 keys
 * and CUDA's expf against the reference's double (1e-5; 1.2e-6 seen on an
 * H200) */
static const tcase tcases[] = {
	{ "layernorm_forward", check_layernorm_forward, 0, 1e-6 },
	{ "layernorm_forward, mean 100", check_layernorm_forward, 100, 1e-6 },
	{ "layernorm_backward dx", check_layernorm_backward, 0, 1e-6 },
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
	{ "attention_forward causal wide", check_attention_forward, 3, 1e-5 },
	{ "attention_backward", check_attention_backward, 0, 1e-5 },
	{ "attention_backward causal", check_attention_backward, 1, 1e-5 },
	{ "attention_backward causal wide", check_attention_backward, 3, 1e-5 },
};

static void test_transformer(void)
{
	for (size_t c = 0; c < sizeof(tcases) / sizeof(tcases[0]); c++) {
		double worst = 0.0;
		int bad = 0;
		for (size_t i = 0; i < sizeof(tshapes) / sizeof(tshapes[0]); i++) {
			tshape s = tshapes[i];
			double d = tcases[c].check(s, tcases[c].arg);
			if (d > tcases[c].tol && bad++ < 3)
				diag("%s B %d T %d C %d H %d: %g", tcases[c].name, s.B, s.T, s.C,
				     s.H, d);
			worst = fmax(worst, d);
		}
		check(worst, tcases[c].tol, tcases[c].name);
	}
}

/* --- memory, known values, the device's choice --- */

static void test_memory(void)
{
	size_t n = 100003;
	float *h = randv(n, -1, 1), *back = nanv(n), *z = malloc(n * 4);
	float *a = gpu->alloc(n * 4), *b = gpu->alloc(n * 4);
	int zeroed;
	gpu->download(back, a, n * 4);
	memset(z, 0, n * 4);
	zeroed = !memcmp(back, z, n * 4);
	ok(a && b && zeroed, "cuda alloc returns zeroed memory");
	gpu->upload(a, h, n * 4);
	gpu->copy(b, a, n * 4);
	gpu->zero(a + 10, 100 * 4);
	gpu->download(back, b, n * 4);
	ok(!memcmp(back, h, n * 4), "cuda upload, copy and download keep every bit");
	gpu->download(back, a, n * 4);
	memset(h + 10, 0, 100 * 4);
	ok(!memcmp(back, h, n * 4), "cuda zero clears only its range");
	ok(gpu->alloc((size_t)1 << 50) == NULL, "cuda alloc of a petabyte is NULL");
	gpu->free(a);
	gpu->free(b);
	gpu->free(NULL);
	free(h);
	free(back);
	free(z);
}

static void test_known_values(void)
{
	/* 1 + 2^-12 times 1, 64 times: 64 + 2^-6 in f32 (every partial sum
	 * exact), 64 in TF32 (10 bits: 1 + 2^-12 is 1) */
	int n = 64;
	float *a = malloc(n * n * 4), *one = malloc(n * n * 4), *c;
	float *ga, *gb, *gc;
	/* 1 + 2^-10 is a float, not a bf16 (rounds to 1) nor, with 2^-12
	 * more, an fp16 (rounds to 1 + 2^-10); 1 + 2^-8 is a bf16 tie (to
	 * even: 1), 1 + 3 2^-8 the other way (1 + 2^-6) */
	float x[4] = { 1.0f + 0x1p-10f + 0x1p-12f, 3.0f, 1.0f + 0x1p-8f, 1.0f + 0x3p-8f };
	float y[2] = { 1.0f, 0.0f }, r[5];
	for (int i = 0; i < n * n; i++) {
		a[i] = 1.0f + 0x1p-12f;
		one[i] = 1.0f;
	}
	ga = upf(a, n * n);
	gb = upf(one, n * n);
	gc = dev_nan(n * n);
	gpu->gemm(DLT_PREC_F32, 0, 0, n, n, n, 1.0f, ga, n, gb, n, 0.0f, gc, n);
	c = down(gc, n * n);
	ok(c[0] == 64.0f + 0x1p-6f && c[n * n - 1] == c[0],
	   "cuda gemm f32 keeps the bits TF32 drops (%a)", c[0]);
	free(c);
	gpu->free(ga);
	ga = upf(x, 4);
	gb = upf(y, 2);
	gc = dev_nan(5);
	gpu->gemm(DLT_PREC_F32, 0, 0, 1, 1, 2, 1.0f, ga, 2, gb, 1, 0.0f, gc, 1);
	gpu->gemm(DLT_PREC_BF16, 0, 0, 1, 1, 2, 1.0f, ga, 2, gb, 1, 0.0f, gc + 1, 1);
	gpu->gemm(DLT_PREC_F16, 0, 0, 1, 1, 2, 1.0f, ga, 2, gb, 1, 0.0f, gc + 2, 1);
	gpu->gemm(DLT_PREC_BF16, 0, 0, 1, 1, 1, 1.0f, ga + 2, 1, gb, 1, 0.0f, gc + 3, 1);
	gpu->gemm(DLT_PREC_BF16, 0, 0, 1, 1, 1, 1.0f, ga + 3, 1, gb, 1, 0.0f, gc + 4, 1);
	gpu->download(r, gc, sizeof(r));
	ok(r[0] == x[0] && r[1] == 1.0f && r[2] == 1.0f + 0x1p-10f && r[3] == 1.0f &&
	   r[4] == 1.0f + 0x1p-6f, "cuda gemm rounds its inputs to bf16 and fp16, ties to even "
	   "(%a %a %a %a %a)", r[0], r[1], r[2], r[3], r[4]);
	gpu->free(ga);
	gpu->free(gb);
	gpu->free(gc);
	free(a);
	free(one);
	{
		float logits[3] = { 1000.0f, 0.0f, -1000.0f }, dl[3];
		int32_t lab = 1;
		float *gl = upf(logits, 3), *gdl = dev_nan(3);
		int32_t *glab = up(&lab, 4);
		double loss;
		int hits;
		gpu->softmax_xent(gl, glab, 1, 3, gdl, &loss, &hits);
		gpu->download(dl, gdl, sizeof(dl));
		ok(fabs(loss - 1000.0) < 1e-9 && dl[0] == 1.0f && dl[1] == -1.0f && dl[2] == 0.0f &&
		   hits == 0, "cuda softmax_xent of logits 1000, 0, -1000 at 1");
		lab = 7;
		gpu->upload(glab, &lab, 4);
		gpu->softmax_xent(gl, glab, 1, 3, gdl, &loss, &hits);
		ok(isnan(loss), "cuda softmax_xent: a label out of range gives a NaN loss");
		gpu->free(gl);
		gpu->free(gdl);
		gpu->free(glab);
	}
}

/* A gemm whose 16-bit operands do not fit the scratch at once: done a
 * range of K at a time */
static void test_gemm_split(void)
{
	shape s = { 16, 16, 600000 };
	check(check_gemm(s, 2 + GEMM(DLT_PREC_BF16)), 1e-5, "gemm nt bf16 16x16 (k 600000), "
	      "over the 16-bit scratch");
	check(check_gemm(s, 1 + GEMM(DLT_PREC_F16)), 1e-5, "gemm tn f16 16x16 (k 600000), "
	      "over the 16-bit scratch");
}

/* cuBLAS, on one stream with our workspace, sums in the same order
 * every time */
static void test_gemm_repeat(void)
{
	int M = 513, N = 385, K = 1001;
	float *a = randv((size_t)M * K, -1, 1), *b = randv((size_t)K * N, -1, 1);
	float *ga = upf(a, (size_t)M * K), *gb = upf(b, (size_t)K * N);
	for (int prec = DLT_PREC_F32; prec <= DLT_PREC_F16; prec++) {
		float *c1 = dev_nan((size_t)M * N), *c2 = dev_nan((size_t)M * N), *h1, *h2;
		gpu->gemm(prec, 0, 0, M, N, K, 1.0f, ga, K, gb, N, 0.0f, c1, N);
		gpu->gemm(prec, 0, 0, M, N, K, 1.0f, ga, K, gb, N, 0.0f, c2, N);
		h1 = down(c1, (size_t)M * N);
		h2 = down(c2, (size_t)M * N);
		ok(!memcmp(h1, h2, (size_t)M * N * 4), "cuda gemm %s %dx%dx%d: the same bits twice",
		   prec_name[prec], M, N, K);
		free(h1);
		free(h2);
	}
	gpu->free(ga);
	gpu->free(gb);
	free(a);
	free(b);
}

/* --- convolution --- */

#define NO_BIAS 1
#define NO_DX 2
#define NO_DB 4

typedef struct conv_case {
	int n, c, h, w, k, kh, kw, sh, sw, ph, pw, dh, dw, groups, act, flags;
} conv_case;

static const conv_case convs[] = {
	/* n  c   h   w   k kh kw sh sw ph pw dh dw  g  act               flags */
	{ 2, 3, 7, 7, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, DLT_ACT_NONE, 0 },
	{ 1, 2, 8, 6, 3, 3, 3, 2, 2, 0, 0, 1, 1, 1, DLT_ACT_RELU, 0 },
	{ 3, 4, 9, 7, 4, 3, 5, 1, 2, 2, 1, 1, 1, 2, DLT_ACT_LEAKY_RELU, 0 },
	{ 2, 4, 9, 9, 8, 3, 3, 1, 1, 2, 2, 2, 2, 4, DLT_ACT_GELU, NO_BIAS },
	{ 2, 6, 7, 5, 6, 3, 3, 2, 1, 1, 1, 1, 2, 6, DLT_ACT_TANH, 0 },
	{ 5, 6, 6, 6, 12, 3, 3, 1, 1, 1, 1, 1, 1, 6, DLT_ACT_SIGMOID, NO_DB },
	{ 3, 5, 6, 6, 7, 1, 1, 1, 1, 0, 0, 1, 1, 1, DLT_ACT_RELU, 0 },
	{ 2, 4, 5, 7, 6, 1, 1, 1, 1, 0, 0, 1, 1, 2, DLT_ACT_NONE, NO_DX },
	{ 2, 4, 9, 8, 6, 1, 1, 2, 2, 0, 0, 1, 1, 1, DLT_ACT_NONE, NO_BIAS | NO_DB },
	/* dx 0 on every other row and column, which no window reads */
	{ 2, 4, 9, 8, 6, 1, 1, 2, 2, 0, 0, 1, 1, 1, DLT_ACT_NONE, 0 },
	{ 2, 3, 5, 5, 2, 5, 5, 1, 1, 2, 2, 1, 1, 1, DLT_ACT_NONE, 0 },
	{ 3, 2, 5, 6, 3, 3, 3, 2, 2, 3, 2, 1, 1, 1, DLT_ACT_RELU, 0 },
	{ 7, 3, 6, 5, 4, 2, 2, 1, 1, 0, 1, 1, 1, 1, DLT_ACT_NONE, 0 },
	{ 1, 2, 1, 9, 2, 1, 3, 1, 1, 0, 1, 1, 1, 1, DLT_ACT_NONE, 0 },
	{ 2, 16, 9, 9, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, DLT_ACT_RELU, 0 },
	{ 4, 1, 28, 28, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, DLT_ACT_RELU, NO_DX },
	{ 3, 32, 14, 14, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, DLT_ACT_RELU, 0 },
};

static dlt_conv conv_shape(const conv_case *cc, int n)
{
	dlt_conv s = {
		.n = n, .c = cc->c, .h = cc->h, .w = cc->w, .k = cc->k,
		.kh = cc->kh, .kw = cc->kw, .sh = cc->sh, .sw = cc->sw, .ph = cc->ph,
		.pw = cc->pw, .dh = cc->dh, .dw = cc->dw, .groups = cc->groups,
	};
	s.oh = (s.h + 2 * s.ph - s.dh * (s.kh - 1) - 1) / s.sh + 1;
	s.ow = (s.w + 2 * s.pw - s.dw * (s.kw - 1) - 1) / s.sw + 1;
	return s;
}

typedef struct conv_out {
	float *y, *dx, *dw, *db;
} conv_out;

static void conv_free(conv_out *o)
{
	free(o->y);
	free(o->dx);
	free(o->dw);
	free(o->db);
}

/* Forward and backward of a batch of s->n on the GPU, in work */
static void conv_gpu(int prec, const dlt_conv *s, const conv_case *cc, const float *x,
		     const float *w, const float *b, const float *dy, float *work, conv_out *o)
{
	size_t nx = (size_t)s->n * s->c * s->h * s->w, ny = (size_t)s->n * s->k * s->oh * s->ow;
	size_t nw = (size_t)s->k * (s->c / s->groups) * s->kh * s->kw;
	float *gx = upf(x, nx), *gw = upf(w, nw), *gb = upf(b, s->k), *gdy = upf(dy, ny);
	float *gy = dev_nan(ny), *gdx = dev_nan(nx), *gdw = dev_nan(nw), *gdb = dev_nan(s->k);
	gpu->conv_forward(prec, s, gx, gw, cc->flags & NO_BIAS ? NULL : gb, gy, cc->act, 0.1f,
			  work);
	gpu->conv_backward(prec, s, gx, gw, gdy, cc->flags & NO_DX ? NULL : gdx, gdw,
			   cc->flags & NO_DB ? NULL : gdb, work);
	o->y = down(gy, ny);
	o->dx = down(gdx, nx);
	o->dw = down(gdw, nw);
	o->db = down(gdb, s->k);
	gpu->free(gx);
	gpu->free(gw);
	gpu->free(gb);
	gpu->free(gdy);
}

static void conv_ref(int prec, const dlt_conv *s, const conv_case *cc, const float *x,
		     const float *w, const float *b, const float *dy, conv_out *o)
{
	size_t nx = (size_t)s->n * s->c * s->h * s->w, ny = (size_t)s->n * s->k * s->oh * s->ow;
	size_t nw = (size_t)s->k * (s->c / s->groups) * s->kh * s->kw;
	o->y = nanv(ny);
	o->dx = nanv(nx);
	o->dw = nanv(nw);
	o->db = nanv(s->k);
	ref->conv_forward(prec, s, x, w, cc->flags & NO_BIAS ? NULL : b, o->y, cc->act, 0.1f, NULL);
	ref->conv_backward(prec, s, x, w, dy, cc->flags & NO_DX ? NULL : o->dx, o->dw,
			   cc->flags & NO_DB ? NULL : o->db, NULL);
}

/* As test-layers: over the square root of the length of each output's sum */
static double conv_diff(const dlt_conv *s, const conv_case *cc, const conv_out *a,
			const conv_out *b)
{
	double taps = (double)s->kh * s->kw, pixels = (double)s->n * s->oh * s->ow;
	size_t nx = (size_t)s->n * s->c * s->h * s->w, ny = (size_t)s->n * s->k * s->oh * s->ow;
	size_t nw = (size_t)s->k * (s->c / s->groups) * s->kh * s->kw;
	double d = diff(a->y, b->y, ny) / sqrt(taps * s->c / s->groups);
	d = fmax(d, diff(a->dw, b->dw, nw) / sqrt(pixels));
	if (!(cc->flags & NO_DX))
		d = fmax(d, diff(a->dx, b->dx, nx) / sqrt(taps * s->k / s->groups));
	if (!(cc->flags & NO_DB))
		d = fmax(d, diff(a->db, b->db, s->k) / sqrt(pixels));
	return d;
}

/* Each output's worst element, for a case that failed */
static void conv_show(const dlt_conv *s, const conv_case *cc, const conv_out *g,
		      const conv_out *r)
{
	int y[4] = { s->n, s->k, s->oh, s->ow }, x[4] = { s->n, s->c, s->h, s->w };
	int w[4] = { s->k, s->c / s->groups, s->kh, s->kw }, b[4] = { 1, s->k, 1, 1 };
	show_worst("y", g->y, r->y, y);
	show_worst("dw", g->dw, r->dw, w);
	if (!(cc->flags & NO_DX))
		show_worst("dx", g->dx, r->dx, x);
	if (!(cc->flags & NO_DB))
		show_worst("db", g->db, r->db, b);
	show_error();
	if (!gpu->error())
		diag("  the CUDA backend recorded no error: an entry that returned early "
		     "without recording one leaves its outputs NaN");
}

static int conv_same(const dlt_conv *s, const conv_out *a, const conv_out *b)
{
	size_t nx = (size_t)s->n * s->c * s->h * s->w, ny = (size_t)s->n * s->k * s->oh * s->ow;
	size_t nw = (size_t)s->k * (s->c / s->groups) * s->kh * s->kw;
	return !memcmp(a->y, b->y, ny * 4) && !memcmp(a->dx, b->dx, nx * 4) &&
	       !memcmp(a->dw, b->dw, nw * 4) && !memcmp(a->db, b->db, s->k * 4);
}

/* The model's way: the workspace planned once at the largest batch,
 * then used by that batch and by a smaller last one.  A workspace of 0
 * floats (f32, algorithms that need none) is NULL, as the model's: the
 * entries must run without one.  Counts those in *no_work. */
static void test_conv_case(const conv_case *cc, int prec, double *worst, int *deterministic,
			   int *no_work)
{
	int max = cc->n + 2, sizes[2] = { max, cc->n };
	dlt_conv smax = conv_shape(cc, max);
	size_t nwork = gpu->conv_workspace(prec, &smax);
	float *work = nwork ? gpu->alloc(nwork * sizeof(float)) : NULL;
	size_t nx = (size_t)max * smax.c * smax.h * smax.w;
	size_t ny = (size_t)max * smax.k * smax.oh * smax.ow;
	size_t nw = (size_t)smax.k * (smax.c / smax.groups) * smax.kh * smax.kw;
	float *x = randv(nx, -1, 1), *w = randv(nw, -1, 1), *b = randv(smax.k, -1, 1);
	float *dy = randv(ny, -1, 1);
	for (int i = 0; i < 2; i++) {
		dlt_conv s = conv_shape(cc, sizes[i]);
		conv_out g, g2, r;
		double d;
		conv_gpu(prec, &s, cc, x, w, b, dy, work, &g);
		conv_ref(prec, &s, cc, x, w, b, dy, &r);
		d = conv_diff(&s, cc, &g, &r);
		if (d > 1e-5)
			diag("conv %s n%d c%d %dx%d k%d %dx%d s%d,%d p%d,%d d%d,%d g%d: %g "
			     "(workspace of %zu floats planned at n%d)", prec_name[prec], s.n, s.c,
			     s.h, s.w, s.k, s.kh, s.kw, s.sh, s.sw, s.ph, s.pw, s.dh, s.dw,
			     s.groups, d, nwork, max);
		if (d > 1e-5)
			conv_show(&s, cc, &g, &r);
		*worst = fmax(*worst, d);
		conv_gpu(prec, &s, cc, x, w, b, dy, work, &g2);
		*deterministic &= conv_same(&s, &g, &g2);
		conv_free(&g);
		conv_free(&g2);
		conv_free(&r);
	}
	*no_work += !nwork;
	gpu->free(work);
	free(x);
	free(w);
	free(b);
	free(dy);
}

static void test_conv(void)
{
	for (int prec = DLT_PREC_F32; prec <= DLT_PREC_F16; prec++) {
		double worst = 0.0;
		int deterministic = 1, no_work = 0;
		char name[96];
		for (size_t i = 0; i < sizeof(convs) / sizeof(convs[0]); i++)
			test_conv_case(&convs[i], prec, &worst, &deterministic, &no_work);
		diag("conv %s: %d of %zu shapes with no workspace (NULL)", prec_name[prec],
		     no_work, sizeof(convs) / sizeof(convs[0]));
		snprintf(name, sizeof(name), "conv %s forward and backward, %zu shapes, batch of "
			 "max and max - 2 in one workspace", prec_name[prec],
			 sizeof(convs) / sizeof(convs[0]));
		check(worst, 1e-5, name);
		ok(deterministic, "cuda conv %s: the same bits run after run", prec_name[prec]);
	}
}

/* x = 1 + 2^-12 everywhere, w = 1: every output sums 144 of them, 144
 * (1 + 2^-12) in f32 by products and sums (exactly, every partial sum a
 * float) and near it by any algorithm (Winograd, FFT); TF32 (10 bits)
 * makes 1 + 2^-12 1 and the sum 144. */
static void test_conv_exact(void)
{
	dlt_conv s = { .n = 2, .c = 16, .h = 8, .w = 8, .k = 32, .oh = 6, .ow = 6, .kh = 3,
		       .kw = 3, .sh = 1, .sw = 1, .dh = 1, .dw = 1, .groups = 1 };
	size_t nx = 2 * 16 * 64, nw = 32 * 16 * 9, ny = 2 * 32 * 36;
	float *x = malloc(nx * 4), *w = malloc(nw * 4), *y;
	float *gx, *gw, *gy = dev_nan(ny), *work = gpu->alloc(gpu->conv_workspace(DLT_PREC_F32, &s) * 4);
	double want = 144.0 * (1.0 + 0x1p-12), worst = 0.0;
	for (size_t i = 0; i < nx; i++)
		x[i] = 1.0f + 0x1p-12f;
	for (size_t i = 0; i < nw; i++)
		w[i] = 1.0f;
	gx = upf(x, nx);
	gw = upf(w, nw);
	gpu->conv_forward(DLT_PREC_F32, &s, gx, gw, NULL, gy, DLT_ACT_NONE, 0.0f, work);
	y = down(gy, ny);
	for (size_t i = 0; i < ny; i++)
		worst = fmax(worst, fabs(y[i] - want));
	ok(worst < 144.0 * 0x1p-14, "cuda conv f32 keeps the bits TF32 drops (%a, want %a)",
	   y[0], want);
	gpu->free(gx);
	gpu->free(gw);
	gpu->free(work);
	free(x);
	free(w);
	free(y);
}

/* --- pooling: the reference's bits --- */

typedef struct pool_case {
	int n, c, h, w, kh, kw, sh, sw, ph, pw;
} pool_case;

static const pool_case pools[] = {
	/* n  c   h   w kh kw sh sw ph pw */
	{ 4, 32, 28, 28, 2, 2, 2, 2, 0, 0 },
	{ 2, 3, 7, 9, 2, 2, 2, 2, 0, 0 },
	{ 1, 2, 8, 7, 3, 3, 2, 2, 1, 1 },
	{ 2, 3, 6, 6, 3, 3, 1, 1, 1, 1 },
	{ 3, 2, 5, 8, 2, 3, 1, 2, 1, 0 },
	{ 2, 4, 8, 8, 8, 8, 8, 8, 0, 0 },
	{ 2, 3, 7, 7, 1, 1, 2, 2, 0, 0 },
	{ 1, 1, 9, 5, 4, 2, 3, 1, 2, 1 },
	{ 3, 5, 7, 7, 7, 7, 1, 1, 0, 0 },
	{ 2, 2, 9, 9, 3, 3, 3, 3, 1, 1 },
};

/* relu: the max pool that does a ReLU's backward too (argmax -1 where
 * the maximum is not above 0) */
static void test_pool_case(const pool_case *pc, int relu)
{
	dlt_pool s = {
		.n = pc->n, .c = pc->c, .h = pc->h, .w = pc->w, .kh = pc->kh, .kw = pc->kw,
		.sh = pc->sh, .sw = pc->sw, .ph = pc->ph, .pw = pc->pw, .relu = relu,
	};
	size_t nx, ny;
	float *x, *dy, *y, *dx, *ay, *adx, *gx, *gdy, *gy, *gdx, *gay, *gadx;
	int32_t *arg, *garg, *gotarg;
	float *goty, *gotdx, *gotay, *gotadx;
	char name[128];
	s.oh = (s.h + 2 * s.ph - s.kh) / s.sh + 1;
	s.ow = (s.w + 2 * s.pw - s.kw) / s.sw + 1;
	nx = (size_t)s.n * s.c * s.h * s.w;
	ny = (size_t)s.n * s.c * s.oh * s.ow;
	x = randv(nx, -1, 1);
	dy = randv(ny, -1, 1);
	/* ties, for the first-of-equals rule, and a NaN, which wins */
	for (size_t i = 0; i < nx; i += 3)
		x[i] = 0.5f;
	x[nx / 2] = NAN;
	y = nanv(ny);
	ay = nanv(ny);
	dx = nanv(nx);
	adx = nanv(nx);
	arg = malloc(ny * 4);
	gotarg = malloc(ny * 4);
	ref->maxpool_forward(&s, x, y, arg);
	ref->maxpool_backward(&s, dy, arg, dx);
	ref->avgpool_forward(&s, x, ay);
	ref->avgpool_backward(&s, dy, adx);
	gx = upf(x, nx);
	gdy = upf(dy, ny);
	gy = dev_nan(ny);
	gay = dev_nan(ny);
	gdx = dev_nan(nx);
	gadx = dev_nan(nx);
	garg = gpu->alloc(ny * 4);
	gpu->maxpool_forward(&s, gx, gy, garg);
	gpu->maxpool_backward(&s, gdy, garg, gdx);
	gpu->avgpool_forward(&s, gx, gay);
	gpu->avgpool_backward(&s, gdy, gadx);
	gpu->download(gotarg, garg, ny * 4);
	goty = down(gy, ny);
	gotdx = down(gdx, nx);
	gotay = down(gay, ny);
	gotadx = down(gadx, nx);
	snprintf(name, sizeof(name), "n%d c%d %dx%d k%dx%d s%d,%d p%d,%d%s", s.n, s.c, s.h, s.w,
		 s.kh, s.kw, s.sh, s.sw, s.ph, s.pw, relu ? " relu" : "");
	ok(same_values(goty, y, ny) && !memcmp(gotarg, arg, ny * 4) && same_values(gotdx, dx, nx),
	   "cuda maxpool %s = reference, bit for bit", name);
	ok(same_values(gotay, ay, ny) && same_values(gotadx, adx, nx),
	   "cuda avgpool %s = reference, bit for bit", name);
	gpu->free(gx);
	gpu->free(gdy);
	gpu->free(garg);
	free(x);
	free(dy);
	free(y);
	free(dx);
	free(ay);
	free(adx);
	free(arg);
	free(gotarg);
	free(goty);
	free(gotdx);
	free(gotay);
	free(gotadx);
}

/* --- batch normalisation --- */

typedef struct bn_case {
	int n, c, hw;
	float offset;		/* added to x: a mean far from 0 */
	int no_dx;
} bn_case;

static const bn_case bns[] = {
	{ 4, 3, 25, 0, 0 }, { 1, 5, 7, 0, 0 }, { 16, 8, 1, 0, 0 }, { 2, 32, 49, 0, 0 },
	{ 8, 16, 196, 0, 0 }, { 32, 32, 784, 0, 0 }, { 6, 4, 33, 100, 0 }, { 3, 2, 1, -5, 0 },
	{ 1, 6, 1, 0, 0 }, { 8, 16, 49, 0, 1 }, { 1, 3, 1, 2, 1 }, { 100, 10, 1, 0, 0 },
};

typedef struct bn_out {
	float *y, *mean, *invstd, *rm, *rv, *ey, *dx, *dg, *db;
} bn_out;

static void bn_free(bn_out *o)
{
	free(o->y);
	free(o->mean);
	free(o->invstd);
	free(o->rm);
	free(o->rv);
	free(o->ey);
	free(o->dx);
	free(o->dg);
	free(o->db);
}

static void bn_gpu(const bn_case *bc, const float *x, const float *g, const float *b,
		   const float *dy, const float *rm0, const float *rv0, bn_out *o)
{
	size_t nx = (size_t)bc->n * bc->c * bc->hw, c = bc->c;
	float *gx = upf(x, nx), *gg = upf(g, c), *gb = upf(b, c), *gdy = upf(dy, nx);
	float *grm = upf(rm0, c), *grv = upf(rv0, c), *gy = dev_nan(nx), *gey = dev_nan(nx);
	float *gdx = dev_nan(nx), *gmean = dev_nan(c), *ginv = dev_nan(c), *gdg = dev_nan(c);
	float *gdb = dev_nan(c);
	gpu->batchnorm_train(bc->n, bc->c, bc->hw, gx, gg, gb, gy, gmean, ginv, grm, grv, 0.1f,
			     1e-5f);
	gpu->batchnorm_eval(bc->n, bc->c, bc->hw, gx, gg, gb, grm, grv, 1e-5f, gey);
	gpu->batchnorm_backward(bc->n, bc->c, bc->hw, gx, gdy, gg, gmean, ginv,
				bc->no_dx ? NULL : gdx, gdg, gdb);
	o->y = down(gy, nx);
	o->ey = down(gey, nx);
	o->dx = down(gdx, nx);
	o->mean = down(gmean, c);
	o->invstd = down(ginv, c);
	o->rm = down(grm, c);
	o->rv = down(grv, c);
	o->dg = down(gdg, c);
	o->db = down(gdb, c);
	gpu->free(gx);
	gpu->free(gg);
	gpu->free(gb);
	gpu->free(gdy);
}

static void bn_ref(const bn_case *bc, const float *x, const float *g, const float *b,
		   const float *dy, const float *rm0, const float *rv0, bn_out *o)
{
	size_t nx = (size_t)bc->n * bc->c * bc->hw, c = bc->c;
	o->y = nanv(nx);
	o->ey = nanv(nx);
	o->dx = nanv(nx);
	o->mean = nanv(c);
	o->invstd = nanv(c);
	o->dg = nanv(c);
	o->db = nanv(c);
	o->rm = copyv(rm0, c);
	o->rv = copyv(rv0, c);
	ref->batchnorm_train(bc->n, bc->c, bc->hw, x, g, b, o->y, o->mean, o->invstd, o->rm,
			     o->rv, 0.1f, 1e-5f);
	ref->batchnorm_eval(bc->n, bc->c, bc->hw, x, g, b, o->rm, o->rv, 1e-5f, o->ey);
	ref->batchnorm_backward(bc->n, bc->c, bc->hw, x, dy, g, o->mean, o->invstd,
				bc->no_dx ? NULL : o->dx, o->dg, o->db);
}

static void test_bn(void)
{
	double worst = 0.0, worst_sums = 0.0;
	int deterministic = 1;
	for (size_t i = 0; i < sizeof(bns) / sizeof(bns[0]); i++) {
		const bn_case *bc = &bns[i];
		size_t nx = (size_t)bc->n * bc->c * bc->hw, c = bc->c;
		float *x = randv(nx, -2, 2), *g = randv(c, 0.5f, 1.5f), *b = randv(c, -1, 1);
		float *dy = randv(nx, -1, 1), *rm0 = randv(c, -1, 1), *rv0 = randv(c, 0.5f, 2);
		bn_out go, go2, r;
		double d, ds;
		for (size_t j = 0; j < nx; j++)
			x[j] += bc->offset;
		bn_gpu(bc, x, g, b, dy, rm0, rv0, &go);
		bn_gpu(bc, x, g, b, dy, rm0, rv0, &go2);
		bn_ref(bc, x, g, b, dy, rm0, rv0, &r);
		d = fmax(diff(go.y, r.y, nx), diff(go.ey, r.ey, nx));
		d = fmax(d, fmax(diff(go.mean, r.mean, c), diff(go.invstd, r.invstd, c)));
		d = fmax(d, fmax(diff(go.rm, r.rm, c), diff(go.rv, r.rv, c)));
		if (!bc->no_dx)
			d = fmax(d, diff(go.dx, r.dx, nx));
		/* cuDNN's float x - mean is good to the rounding of x's
		 * magnitude, the mean's */
		d /= 1.0 + fabs(bc->offset);
		ds = fmax(diff(go.dg, r.dg, c), diff(go.db, r.db, c)) / sqrt((double)bc->n * bc->hw);
		if (d > 1e-5 || ds > 1e-5)
			diag("batchnorm n%d c%d hw%d%s: %g, sums %g", bc->n, bc->c, bc->hw,
			     bc->no_dx ? " no dx" : "", d, ds);
		worst = fmax(worst, d);
		worst_sums = fmax(worst_sums, ds);
		deterministic &= !memcmp(go.y, go2.y, nx * 4) && !memcmp(go.dx, go2.dx, nx * 4) &&
				 !memcmp(go.dg, go2.dg, c * 4) && !memcmp(go.db, go2.db, c * 4) &&
				 !memcmp(go.rv, go2.rv, c * 4);
		bn_free(&go);
		bn_free(&go2);
		bn_free(&r);
		free(x);
		free(g);
		free(b);
		free(dy);
		free(rm0);
		free(rv0);
	}
	check(worst, 1e-5, "batchnorm train, eval, backward: y, statistics, dx "
	      "(over 1 + |mean of x|)");
	check(worst_sums, 1e-5, "batchnorm backward: dgamma, dbeta (over sqrt(n hw))");
	ok(deterministic, "cuda batchnorm: the same bits run after run");
}

/* --- timings (information, not tests) --- */

/* Seconds per call of fn(arg), after a warm-up; downloading a float of
 * out waits for the stream. */
static double gpu_time(void (*fn)(void *), void *arg, const float *out, int reps)
{
	float sync;
	double t0;
	fn(arg);
	gpu->download(&sync, out, 4);
	t0 = dlt_now();
	for (int i = 0; i < reps; i++)
		fn(arg);
	gpu->download(&sync, out, 4);
	return (dlt_now() - t0) / reps;
}

typedef struct gemm_job {
	float *c, *a, *b;
	int n, prec;
} gemm_job;

static void run_gemm(void *p)
{
	gemm_job *j = p;
	gpu->gemm(j->prec, 0, 1, j->n, j->n, j->n, 1.0f, j->a, j->n, j->b, j->n, 0.0f, j->c, j->n);
}

typedef struct conv_job {
	float *y, *x, *w, *b, *dy, *dx, *dw, *db, *work;
	dlt_conv s;
	int prec;
} conv_job;

static void run_conv(void *p)
{
	conv_job *j = p;
	gpu->conv_forward(j->prec, &j->s, j->x, j->w, j->b, j->y, DLT_ACT_RELU, 0.0f, j->work);
	gpu->conv_backward(j->prec, &j->s, j->x, j->w, j->dy, j->dx, j->dw, j->db, j->work);
}

/* The same work on the CPU backend, once, for the ratio */
static double cpu_gemm_time(int n)
{
	const dlt_backend *cpu = dlt_backend_cpu();
	float *a = randv((size_t)n * n, -1, 1), *b = randv((size_t)n * n, -1, 1);
	float *c = malloc((size_t)n * n * 4);
	double t0 = dlt_now();
	cpu->gemm(DLT_PREC_F32, 0, 1, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
	t0 = dlt_now() - t0;
	free(a);
	free(b);
	free(c);
	return t0;
}

static double cpu_conv_time(const dlt_conv *s)
{
	const dlt_backend *cpu = dlt_backend_cpu();
	size_t nx = (size_t)s->n * s->c * s->h * s->w, ny = (size_t)s->n * s->k * s->oh * s->ow;
	size_t nw = (size_t)s->k * s->c * s->kh * s->kw;
	float *x = randv(nx, -1, 1), *w = randv(nw, -1, 1), *b = randv(s->k, -1, 1);
	float *dy = randv(ny, -1, 1), *y = malloc(ny * 4), *dx = malloc(nx * 4);
	float *dw = malloc(nw * 4), *db = malloc(s->k * 4);
	float *work = malloc(cpu->conv_workspace(DLT_PREC_F32, s) * 4 + 4);
	double t0 = dlt_now();
	cpu->conv_forward(DLT_PREC_F32, s, x, w, b, y, DLT_ACT_RELU, 0.0f, work);
	cpu->conv_backward(DLT_PREC_F32, s, x, w, dy, dx, dw, db, work);
	t0 = dlt_now() - t0;
	free(x);
	free(w);
	free(b);
	free(dy);
	free(y);
	free(dx);
	free(dw);
	free(db);
	free(work);
	return t0;
}

static void timings(void)
{
	int n = 4096;
	gemm_job g = { gpu->alloc((size_t)n * n * 4), gpu->alloc((size_t)n * n * 4),
		       gpu->alloc((size_t)n * n * 4), n, 0 };
	conv_job c = { 0 };
	dlt_conv s = { .n = 128, .c = 32, .h = 14, .w = 14, .k = 64, .oh = 14, .ow = 14, .kh = 3,
		       .kw = 3, .sh = 1, .sw = 1, .ph = 1, .pw = 1, .dh = 1, .dw = 1,
		       .groups = 1 };
	double flop = 2.0 * n * n * n, t, cpu = cpu_gemm_time(n);
	for (g.prec = DLT_PREC_F32; g.prec <= DLT_PREC_F16; g.prec++) {
		t = gpu_time(run_gemm, &g, g.c, 10);
		diag("timing: gemm %s %dx%dx%d: %.3f ms, %.1f TFLOP/s, %.0fx the CPU backend's f32",
		     prec_name[g.prec], n, n, n, t * 1e3, flop / t / 1e12, cpu / t);
	}
	gpu->free(g.a);
	gpu->free(g.b);
	gpu->free(g.c);
	c.s = s;
	c.y = gpu->alloc((size_t)128 * 64 * 196 * 4);
	c.x = gpu->alloc((size_t)128 * 32 * 196 * 4);
	c.dx = gpu->alloc((size_t)128 * 32 * 196 * 4);
	c.dy = gpu->alloc((size_t)128 * 64 * 196 * 4);
	c.w = gpu->alloc(64 * 32 * 9 * 4);
	c.dw = gpu->alloc(64 * 32 * 9 * 4);
	c.b = gpu->alloc(64 * 4);
	c.db = gpu->alloc(64 * 4);
	c.work = gpu->alloc(gpu->conv_workspace(DLT_PREC_BF16, &s) * 4);
	flop = 3 * 2.0 * 128 * 64 * 196 * 32 * 9;
	cpu = cpu_conv_time(&s);
	for (c.prec = DLT_PREC_F32; c.prec <= DLT_PREC_BF16; c.prec++) {
		t = gpu_time(run_conv, &c, c.dx, 20);
		diag("timing: conv %s n128 32->64 14x14 3x3, forward + backward: %.3f ms, "
		     "%.1f TFLOP/s, %.0fx the CPU backend's f32", prec_name[c.prec], t * 1e3,
		     flop / t / 1e12, cpu / t);
	}
	gpu->free(c.y);
	gpu->free(c.x);
	gpu->free(c.dx);
	gpu->free(c.dy);
	gpu->free(c.w);
	gpu->free(c.dw);
	gpu->free(c.b);
	gpu->free(c.db);
	gpu->free(c.work);
}

/* Last, since it leaves the backend failed: an entry that fails (a
 * convolution whose output shape is wrong) makes the losses NaN. */
static void test_failure_shows(void)
{
	dlt_conv s = { .n = 1, .c = 1, .h = 4, .w = 4, .k = 1, .oh = 9, .ow = 9, .kh = 1,
		       .kw = 1, .sh = 1, .sw = 1, .dh = 1, .dw = 1, .groups = 1 };
	float zeros[16] = { 0 }, *x = upf(zeros, 16), *w = upf(zeros, 1), *y = upf(zeros, 16);
	float *work;
	int32_t lab = 0, *glab = up(&lab, 4);
	double loss;
	int hits;
	/* a failure before this one makes the loss NaN: say which */
	ok(!gpu->error(), "cuda: no entry failed before the failure test (%s)",
	   gpu->error() ? gpu->error() : "none did");
	gpu->softmax_xent(x, glab, 1, 4, y, &loss, &hits);
	ok(fabs(loss - log(4.0)) < 1e-6, "cuda softmax_xent of 4 zeros: log 4 (%.17g)", loss);
	work = gpu->alloc(gpu->conv_workspace(DLT_PREC_F32, &s) * 4 + 4);
	gpu->conv_forward(DLT_PREC_F32, &s, x, w, NULL, y, DLT_ACT_NONE, 0.0f, work);
	gpu->softmax_xent(x, glab, 1, 4, y, &loss, &hits);
	ok(isnan(loss), "cuda: after a failed entry (a conv of a wrong shape) the loss is NaN");
	gpu->free(x);
	gpu->free(w);
	gpu->free(y);
	gpu->free(work);
	gpu->free(glab);
}

int main(int argc, char **argv)
{
	char why[256] = "", why_bad[256] = "";
	const dlt_backend *bad = dlt_backend_cuda(999, why_bad, sizeof(why_bad));
	const dlt_backend *other;
	gpu = dlt_backend_cuda(0, why, sizeof(why));
	if (argc > 1 && !strcmp(argv[1], "--probe")) {
		if (!gpu)
			printf("no CUDA device: %s\n", why);
		return !gpu;
	}
	if (!gpu) {
		printf("1..0 # SKIP no CUDA device: %s\n", why);
		return 0;
	}
	ref = dlt_backend_ref();
	dlt_rng_init(&rng, 4321, 0);
	if ((argc > 1 && !strcmp(argv[1], "--conv")) ||
	    (getenv("DLT_TEST_CUDA") && !strcmp(getenv("DLT_TEST_CUDA"), "conv"))) {
		test_conv_exact();
		test_conv();
		test_failure_shows();
		return done_testing();
	}
	ok(!bad && why_bad[0], "dlt_backend_cuda(999) is NULL with a reason (%s)", why_bad);
	ok(dlt_backend_cuda(0, why, sizeof(why)) == gpu, "dlt_backend_cuda(0) again: the same table");
	other = dlt_backend_cuda(1, why, sizeof(why));
	ok(!other && strstr(why, "already uses CUDA device 0"),
	   "one device per process: another one is NULL (%s)", why);
	ok(!gpu->host && !strcmp(gpu->name, "cuda"), "the table says device memory, 'cuda'");
	test_memory();
	test_known_values();
	test_table();
	test_transformer();
	test_gemm_split();
	test_gemm_repeat();
	test_conv_exact();
	test_conv();
	for (size_t i = 0; i < sizeof(pools) / sizeof(pools[0]); i++)
		for (int relu = 0; relu < 2; relu++)
			test_pool_case(&pools[i], relu);
	test_bn();
	if (!getenv("DLT_TEST_NO_TIMINGS"))
		timings();
	test_failure_shows();
	return done_testing();
}
