/* The op table: each row an entry of the backend table (and a variant of
 * its arguments), a check that runs it on a backend and on the reference
 * with the same random inputs, a set of shapes, and a tolerance for each
 * backend on the check's measure (see ops.h).  The inputs live in the
 * backend's memory (alloc, upload, download), so the same check serves
 * the CPU and a GPU.
 *
 * The measure is the worst |got - want| / (1 + |want|) of the outputs
 * (dist), divided where a row says so by the square root of the length of
 * the sums behind an output (gemm, convolution: float sums drift like
 * it).  A tolerance of 0 asks for the reference's bits (any NaN agrees
 * with any NaN: the GPU's carry no payload).  Why the CUDA column differs
 * from the CPU's:
 *   1e-6 where the CPU has 1e-7 or 0: gelu, tanh, sigmoid, softmax and
 *     bce (CUDA's expf, erff, tanhf and logf are within 2 ulp, glibc's
 *     within 1), the losses' sums (a tree, not the CPU's row order);
 *   0 where the CPU has 1e-7: relu and leaky relu, adam and sgd (the CUDA
 *     backend is built without FMA contraction: the reference's bits);
 *   1e-5 on gemm and convolution in f32, bf16 and fp16 (the inputs
 *     rounded as the CPU rounds them, the products summed in f32 by
 *     cuBLAS and cuDNN against the reference's double);
 *   layer norm 1e-6 (double sums in another order), attention 1e-5 (float
 *     sums over up to 130 keys; 1.2e-6 seen on an H200);
 *   batch norm (cuDNN, float sums) only over 1 + |the mean of x| (cuDNN's
 *     float x - mean is good to the rounding of x: 1.5e-5 was seen at mean
 *     100) and dgamma, dbeta over the square root of n hw.
 * NO: not run on that backend.  "The same bits every run" rows run a
 * layer twice: on 1 then 2 threads where the backend has set_threads,
 * else simply again (cuBLAS and cuDNN must not pick another algorithm).
 * "On 1, 2 and 3 threads" rows need the host's threads and memory: CPU
 * only. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "tap.h"
#include "vec.h"
#include "ops.h"
#include "kernels/common/math.h"
#include "util/util.h"

#define NO (-1.0)

static const dlt_backend *ref;
static int threads0;		/* the threads before ops_run, given back after a repeat */

/* ---- the backend's memory ---- */

static void *up(const dlt_backend *be, const void *h, size_t bytes)
{
	void *d = be->alloc(bytes + 4);
	if (d && bytes)
		be->upload(d, h, bytes);
	return d;
}

static float *upf(const dlt_backend *be, const float *h, size_t n)
{
	return up(be, h, n * sizeof(float));
}

/* Full of NaN: an output the entry forgets shows */
static float *dnan(const dlt_backend *be, size_t n)
{
	float *h = nanv(n), *d = upf(be, h, n);
	free(h);
	return d;
}

/* The backend's n floats (or ints) into new host memory; frees d */
static void *down_bytes(const dlt_backend *be, void *d, size_t bytes)
{
	void *h = malloc(bytes + 4);
	be->download(h, d, bytes);
	be->free(d);
	return h;
}

static float *down(const dlt_backend *be, float *d, size_t n)
{
	return down_bytes(be, d, n * sizeof(float));
}

/* vec.h's diff; where that is 0, values equal but not in bits (0 and -0)
 * differ by DBL_MIN, so that a tolerance of 0 asks for the bits */
static double dist(const float *got, const float *want, size_t n)
{
	double d = diff(got, want, n);
	for (size_t i = 0; d == 0.0 && i < n; i++)
		if (!(isnan(got[i]) && isnan(want[i])) && memcmp(&got[i], &want[i], sizeof(float)))
			d = DBL_MIN;
	return d;
}

static double bits(const void *a, const void *b, size_t bytes)
{
	return memcmp(a, b, bytes) ? INFINITY : 0.0;
}

static double max3(double a, double b, double c)
{
	return fmax(a, fmax(b, c));
}

/* Before the k-th run of a repeat: k + 1 threads where the backend's
 * work is on the host's threads (elsewhere it simply runs again); k -1
 * gives back the threads ops_run found */
static void repeat_threads(const dlt_backend *be, int k)
{
	if (be->set_threads)
		be->set_threads(k < 0 ? threads0 : k + 1);
}

#define REPEATS 3

/* ---- shapes ---- */

/* rows x cols for element-wise entries; M x N x K for gemm */
typedef struct mat {
	int rows, cols, k;
} mat;

static const mat mats[] = {
	{ 1, 1, 1 }, { 1, 7, 3 }, { 7, 1, 5 }, { 3, 5, 1 }, { 17, 33, 9 }, { 33, 17, 64 },
	{ 128, 784, 256 }, { 257, 10, 128 }, { 10, 1000, 7 }, { 300, 300, 31 },
	{ 1, 100003, 1 },
};

/* A gemm whose 16-bit operands do not fit the CUDA backend's scratch at
 * once (done a range of K at a time there) */
static const mat longk[] = { { 16, 16, 600000 } };

/* Column sums over rows enough that CUDA sums them in ranges (one per
 * 512 rows, the ranges' sums in order): rows and width as its GPT's, and
 * one short of a range more */
static const mat tall[] = { { 32768, 384, 1 }, { 2559, 33, 1 } };

/* [B, T, C] activations, H heads: T around the attention's 64-row tiles
 * (1, 7, 33, 63, 64, 65, 75, 130), head sizes 8 to 64, rows 1 to 300 */
typedef struct seq {
	int B, T, C, H;
} seq;

static const seq seqs[] = {
	{ 1, 1, 16, 2 }, { 2, 7, 16, 2 }, { 1, 63, 48, 6 }, { 2, 64, 128, 4 },
	{ 1, 65, 16, 2 }, { 1, 130, 48, 6 }, { 2, 130, 128, 4 }, { 4, 75, 40, 5 },
	{ 3, 1, 128, 4 }, { 2, 33, 384, 6 },
};

/* A layer norm over as many rows as tall[]'s first */
static const seq tall_seqs[] = { { 128, 256, 384, 6 }, { 3, 853, 40, 5 } };

#define NO_BIAS 1
#define NO_DX 2
#define NO_DB 4

typedef struct conv_case {
	int n, c, h, w, k, kh, kw, sh, sw, ph, pw, dh, dw, groups, act, flags;
} conv_case;

/* Each runs in f32, bf16 and fp16, at batch n + 2 and n in one workspace
 * planned for n + 2 (the model's way: a smaller last batch) */
static const conv_case convs[] = {
	/* n  c   h   w   k kh kw sh sw ph pw dh dw  g  act               flags */
	{ 2, 3, 7, 7, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, DLT_ACT_NONE, 0 },
	{ 1, 2, 8, 6, 3, 3, 3, 2, 2, 0, 0, 1, 1, 1, DLT_ACT_RELU, 0 },
	{ 3, 4, 9, 7, 4, 3, 5, 1, 2, 2, 1, 1, 1, 2, DLT_ACT_LEAKY_RELU, 0 },
	{ 2, 4, 9, 9, 8, 3, 3, 1, 1, 2, 2, 2, 2, 4, DLT_ACT_GELU, NO_BIAS },
	{ 2, 6, 7, 5, 6, 3, 3, 2, 1, 1, 1, 1, 2, 6, DLT_ACT_TANH, 0 },
	{ 5, 6, 6, 6, 12, 3, 3, 1, 1, 1, 1, 1, 1, 6, DLT_ACT_SIGMOID, NO_DB },
	{ 3, 5, 6, 6, 7, 1, 1, 1, 1, 0, 0, 1, 1, 1, DLT_ACT_RELU, 0 },
	{ 3, 5, 6, 6, 7, 1, 1, 1, 1, 0, 0, 1, 1, 1, DLT_ACT_RELU, NO_DB },
	{ 2, 4, 5, 7, 6, 1, 1, 1, 1, 0, 0, 1, 1, 2, DLT_ACT_NONE, NO_DX },
	{ 2, 4, 9, 8, 6, 1, 1, 2, 2, 0, 0, 1, 1, 1, DLT_ACT_NONE, NO_BIAS | NO_DB },
	/* dx 0 on every other row and column, which no window reads */
	{ 2, 4, 9, 8, 6, 1, 1, 2, 2, 0, 0, 1, 1, 1, DLT_ACT_NONE, 0 },
	{ 2, 3, 5, 5, 2, 5, 5, 1, 1, 2, 2, 1, 1, 1, DLT_ACT_NONE, 0 },
	{ 1, 2, 4, 4, 3, 3, 3, 3, 3, 0, 0, 1, 1, 1, DLT_ACT_NONE, 0 },
	{ 3, 2, 5, 6, 3, 3, 3, 2, 2, 3, 2, 1, 1, 1, DLT_ACT_RELU, 0 },
	{ 7, 3, 6, 5, 4, 2, 2, 1, 1, 0, 1, 1, 1, 1, DLT_ACT_NONE, 0 },
	{ 2, 3, 6, 7, 4, 3, 3, 1, 1, 0, 1, 1, 1, 1, DLT_ACT_NONE, 0 },
	{ 2, 2, 4, 5, 3, 3, 3, 1, 1, 3, 1, 1, 1, 1, DLT_ACT_RELU, 0 },
	{ 1, 2, 1, 9, 2, 1, 3, 1, 1, 0, 1, 1, 1, 1, DLT_ACT_NONE, 0 },
	/* the CPU's Winograd F(2x2, 3x3) (3x3, stride 1, padding 1, 16
	 * channels or more): odd planes, a plane a tile high, rows of more
	 * than 8 tiles, blocks that end inside a sample, every activation */
	{ 3, 16, 7, 9, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, DLT_ACT_LEAKY_RELU, 0 },
	{ 5, 17, 5, 5, 19, 3, 3, 1, 1, 1, 1, 1, 1, 1, DLT_ACT_NONE, NO_BIAS },
	{ 2, 16, 1, 9, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, DLT_ACT_RELU, NO_DB },
	{ 2, 24, 17, 18, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, DLT_ACT_TANH, 0 },
	{ 9, 16, 6, 4, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, DLT_ACT_GELU, 0 },
	{ 3, 16, 2, 2, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, DLT_ACT_SIGMOID, NO_DX },
	{ 2, 16, 14, 14, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, DLT_ACT_RELU, 0 },
	/* the CPU's direct kernels of a first layer: without bias, with dx,
	 * odd k */
	{ 2, 1, 28, 28, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, DLT_ACT_NONE, NO_BIAS },
	{ 3, 1, 8, 8, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, DLT_ACT_LEAKY_RELU, 0 },
	{ 3, 1, 8, 8, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, DLT_ACT_NONE, NO_DX },
	/* the models' shapes */
	{ 2, 16, 9, 9, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, DLT_ACT_RELU, 0 },
	{ 2, 1, 28, 28, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, DLT_ACT_RELU, NO_DX },
	{ 4, 1, 28, 28, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, DLT_ACT_RELU, NO_DX },
	{ 2, 32, 14, 14, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, DLT_ACT_RELU, 0 },
	{ 3, 32, 14, 14, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, DLT_ACT_RELU, 0 },
};

const pool_case ops_pools[] = {
	/* n  c   h   w kh kw sh sw ph pw */
	{ 4, 32, 28, 28, 2, 2, 2, 2, 0, 0 },
	{ 3, 5, 14, 14, 2, 2, 2, 2, 0, 0 },
	{ 2, 3, 8, 8, 2, 2, 2, 2, 0, 0 },
	{ 2, 3, 6, 6, 2, 2, 2, 2, 0, 0 },
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
const size_t ops_n_pools = sizeof(ops_pools) / sizeof(ops_pools[0]);

dlt_pool ops_pool_shape(const pool_case *pc)
{
	dlt_pool s = {
		.n = pc->n, .c = pc->c, .h = pc->h, .w = pc->w, .kh = pc->kh, .kw = pc->kw,
		.sh = pc->sh, .sw = pc->sw, .ph = pc->ph, .pw = pc->pw,
	};
	s.oh = (s.h + 2 * s.ph - s.kh) / s.sh + 1;
	s.ow = (s.w + 2 * s.pw - s.kw) / s.sw + 1;
	return s;
}

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

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void say_mat(const mat *m, char *buf, size_t len)
{
	snprintf(buf, len, "%dx%d (k %d)", m->rows, m->cols, m->k);
}

/* ---- dense layers, losses, optimisers, element-wise ---- */

/* arg bits: 1 transposes A, 2 transposes B, 4 uses alpha and beta on a
 * random C (else beta = 0 on a C of NaN, which BLAS must ignore), 8 pads
 * the leading dimensions, 16 rounds the inputs to bf16, 32 to fp16.  Over
 * the square root of K. */
static double gemm_on(const dlt_backend *be, mat s, int arg)
{
	int tA = arg & 1, tB = !!(arg & 2), pad = arg & 8 ? 3 : 0;
	int M = s.rows, N = s.cols, K = s.k;
	int lda = (tA ? M : K) + pad, ldb = (tB ? K : N) + pad, ldc = N + pad;
	size_t na = (size_t)(tA ? K : M) * lda, nb = (size_t)(tB ? N : K) * ldb;
	size_t nc = (size_t)M * ldc;
	float alpha = arg & 4 ? 0.5f : 1.0f, beta = arg & 4 ? -1.5f : 0.0f;
	float *A = randv(na, -1, 1), *B = randv(nb, -1, 1), *C = randv(nc, -1, 1), *C2, *got;
	float *dA = upf(be, A, na), *dB = upf(be, B, nb), *dC;
	int prec = arg & 16 ? DLT_PREC_BF16 : arg & 32 ? DLT_PREC_F16 : DLT_PREC_F32;
	double d = 0.0;
	if (!(arg & 4))
		for (size_t i = 0; i < nc; i++)
			C[i] = NAN;
	C2 = copyv(C, nc);
	dC = upf(be, C, nc);
	be->gemm(prec, tA, tB, M, N, K, alpha, dA, lda, dB, ldb, beta, dC, ldc);
	ref->gemm(prec, tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C2, ldc);
	got = down(be, dC, nc);
	/* padding columns are not part of C: compare row by row */
	for (int i = 0; i < M; i++)
		d = fmax(d, dist(got + (size_t)i * ldc, C2 + (size_t)i * ldc, N));
	be->free(dA);
	be->free(dB);
	free(A);
	free(B);
	free(C);
	free(C2);
	free(got);
	return d / sqrt(K);
}

static double check_gemm(const dlt_backend *be, size_t i, int arg)
{
	return gemm_on(be, mats[i], arg);
}

static double check_gemm_longk(const dlt_backend *be, size_t i, int arg)
{
	return gemm_on(be, longk[i], arg);
}

/* d1 and d2, n floats of be's (freed): 0 where their bits are the same,
 * else 1 */
static double same_bits(const dlt_backend *be, float *d1, float *d2, size_t n)
{
	float *c1 = down(be, d1, n), *c2 = down(be, d2, n);
	int same = !memcmp(c1, c2, n * sizeof(float));
	free(c1);
	free(c2);
	return same ? 0.0 : 1.0;
}

/* DLT_ROUND_C (arg as gemm_on's): C of the product and its rounding in
 * one, against the product, then round, on the same backend: the same
 * bits (0 where they are, else 1) */
static double gemm_round_on(const dlt_backend *be, mat s, int arg)
{
	int tA = arg & 1, tB = !!(arg & 2), M = s.rows, N = s.cols, K = s.k;
	int prec = arg & 16 ? DLT_PREC_BF16 : DLT_PREC_F16;
	size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
	float *A = randv(na, -2, 2), *B = randv(nb, -2, 2), *C = randv(nc, -1, 1);
	float *dA = upf(be, A, na), *dB = upf(be, B, nb), *d1 = upf(be, C, nc), *d2 = upf(be, C, nc);
	be->gemm(prec | DLT_ROUND_C, tA, tB, M, N, K, 0.5f, dA, tA ? M : K, dB, tB ? K : N, 1.5f,
		 d1, N);
	be->gemm(prec, tA, tB, M, N, K, 0.5f, dA, tA ? M : K, dB, tB ? K : N, 1.5f, d2, N);
	be->round(d2, nc, prec);
	be->free(dA);
	be->free(dB);
	free(A);
	free(B);
	free(C);
	return same_bits(be, d1, d2, nc);
}

static double check_gemm_round(const dlt_backend *be, size_t i, int arg)
{
	return gemm_round_on(be, mats[i], arg);
}

static double check_gemm_round_longk(const dlt_backend *be, size_t i, int arg)
{
	return gemm_round_on(be, longk[i], arg);
}

/* DLT_A_HALF, DLT_B_HALF (arg: 1 tA, 2 tB, 4 A of 16-bit words, 8 B of
 * them, + BF16 (16) or FP16 (32)): the product of operands narrowed to
 * their words against that of the same values as floats, on the same
 * backend: the same bits (0 where they are, else 1) */
static double gemm_half_on(const dlt_backend *be, mat s, int arg)
{
	int tA = arg & 1, tB = !!(arg & 2), M = s.rows, N = s.cols, K = s.k;
	int prec = arg & 16 ? DLT_PREC_BF16 : DLT_PREC_F16;
	int flags = (arg & 4 ? DLT_A_HALF : DLT_A_EXACT) | (arg & 8 ? DLT_B_HALF : DLT_B_EXACT);
	size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
	float *A = randv(na, -2, 2), *B = randv(nb, -2, 2), *C = randv(nc, -1, 1);
	float *dA, *dB, *d1, *d2;
	uint16_t *hA, *hB;
	ref->round(A, na, prec);
	ref->round(B, nb, prec);
	dA = upf(be, A, na);
	dB = upf(be, B, nb);
	d1 = upf(be, C, nc);
	d2 = upf(be, C, nc);
	hA = be->alloc(na * sizeof(uint16_t) + 4);
	hB = be->alloc(nb * sizeof(uint16_t) + 4);
	be->narrow(dA, hA, na, prec);
	be->narrow(dB, hB, nb, prec);
	be->gemm(prec | flags | DLT_ROUND_C, tA, tB, M, N, K, 0.5f,
		 arg & 4 ? (const float *)hA : dA, tA ? M : K, arg & 8 ? (const float *)hB : dB,
		 tB ? K : N, 1.5f, d1, N);
	be->gemm(prec | DLT_A_EXACT | DLT_B_EXACT | DLT_ROUND_C, tA, tB, M, N, K, 0.5f, dA,
		 tA ? M : K, dB, tB ? K : N, 1.5f, d2, N);
	be->free(dA);
	be->free(dB);
	be->free(hA);
	be->free(hB);
	free(A);
	free(B);
	free(C);
	return same_bits(be, d1, d2, nc);
}

static double check_gemm_half(const dlt_backend *be, size_t i, int arg)
{
	return gemm_half_on(be, mats[i], arg);
}

static double check_gemm_half_longk(const dlt_backend *be, size_t i, int arg)
{
	return gemm_half_on(be, longk[i], arg);
}

/* arg: the activation; + 16 leaves the bias out; + BF16 or FP16 (32, 64
 * here) rounds to it */
static double check_bias_act(const dlt_backend *be, size_t i, int arg)
{
	mat s = mats[i];
	size_t n = (size_t)s.rows * s.cols;
	float *y = randv(n, -4, 4), *b = randv(s.cols, -1, 1), *dy = upf(be, y, n);
	float *db = upf(be, b, s.cols), *got;
	int prec = arg & 32 ? DLT_PREC_BF16 : arg & 64 ? DLT_PREC_F16 : DLT_PREC_F32;
	double d;
	be->bias_act(dy, arg & 16 ? NULL : db, s.rows, s.cols, arg & 15, 0.1f, prec);
	ref->bias_act(y, arg & 16 ? NULL : b, s.rows, s.cols, arg & 15, 0.1f, prec);
	got = down(be, dy, n);
	d = dist(got, y, n);
	be->free(db);
	free(y);
	free(b);
	free(got);
	return d;
}

/* arg: the activation; + 16 in place */
static double check_act_forward(const dlt_backend *be, size_t i, int arg)
{
	mat s = mats[i];
	size_t n = (size_t)s.rows * s.cols;
	float *x = randv(n, -6, 6), *y = nanv(n), *dx = upf(be, x, n), *dy, *got;
	double d;
	dy = arg & 16 ? dx : dnan(be, n);
	be->act_forward(dx, dy, n, arg & 15, 0.02f);
	ref->act_forward(x, y, n, arg & 15, 0.02f);
	got = down(be, dy, n);
	d = dist(got, y, n);
	if (!(arg & 16))
		be->free(dx);
	free(x);
	free(y);
	free(got);
	return d;
}

static double check_act_backward(const dlt_backend *be, size_t i, int arg)
{
	mat s = mats[i];
	size_t n = (size_t)s.rows * s.cols;
	float *x = randv(n, -6, 6), *y = nanv(n), *dy = randv(n, -1, 1), *dx = nanv(n);
	float *gx, *gy, *gdy, *gdx, *got;
	double d;
	ref->act_forward(x, y, n, arg, 0.02f);
	gx = upf(be, x, n);
	gy = upf(be, y, n);
	gdy = upf(be, dy, n);
	gdx = dnan(be, n);
	be->act_backward(gx, gy, gdy, gdx, n, arg, 0.02f);
	ref->act_backward(x, y, dy, dx, n, arg, 0.02f);
	got = down(be, gdx, n);
	d = dist(got, dx, n);
	be->free(gx);
	be->free(gy);
	be->free(gdy);
	free(x);
	free(y);
	free(dy);
	free(dx);
	free(got);
	return d;
}

/* arg: 1 for tall[] */
static double check_bias_grad(const dlt_backend *be, size_t i, int arg)
{
	mat s = arg ? tall[i] : mats[i];
	size_t n = (size_t)s.rows * s.cols;
	float *dy = randv(n, -1, 1), *db = nanv(s.cols), *gdy = upf(be, dy, n);
	float *gdb = dnan(be, s.cols), *got;
	double d;
	be->bias_grad(gdy, gdb, s.rows, s.cols);
	ref->bias_grad(dy, db, s.rows, s.cols);
	got = down(be, gdb, s.cols);
	d = dist(got, db, s.cols);
	be->free(gdy);
	free(dy);
	free(db);
	free(got);
	return d;
}

/* arg: the logits' spread; wide ones test the max subtraction */
static double check_softmax_xent(const dlt_backend *be, size_t i, int arg)
{
	mat s = mats[i];
	size_t n = (size_t)s.rows * s.cols;
	float *x = randv(n, -arg, arg), *dx = nanv(n), *gx = upf(be, x, n), *gdx = dnan(be, n);
	int32_t *lab = malloc(s.rows * sizeof(int32_t)), *glab;
	float *got;
	double loss, loss2, d;
	int hits, hits2;
	for (int r = 0; r < s.rows; r++)
		lab[r] = (int32_t)dlt_rng_below(&rng, s.cols);
	glab = up(be, lab, s.rows * sizeof(int32_t));
	be->softmax_xent(gx, glab, s.rows, s.cols, gdx, &loss, &hits);
	ref->softmax_xent(x, lab, s.rows, s.cols, dx, &loss2, &hits2);
	got = down(be, gdx, n);
	d = max3(dist(got, dx, n), fabs(loss - loss2) / (1.0 + fabs(loss2)),
		 hits == hits2 && isfinite(loss) ? 0.0 : INFINITY);
	be->free(gx);
	be->free(glab);
	free(x);
	free(dx);
	free(got);
	free(lab);
	return d;
}

/* arg: the loss kind (enum dlt_loss_kind); bce's targets are 0 or 1 */
static double check_pointwise_loss(const dlt_backend *be, size_t i, int arg)
{
	mat s = mats[i];
	size_t n = (size_t)s.rows * s.cols;
	float *y = randv(n, -4, 4), *t = randv(n, -4, 4), *dy = nanv(n), *gy, *gt, *gdy, *got;
	double loss, loss2, d;
	for (size_t j = 0; arg == DLT_LOSS_BCE && j < n; j++)
		t[j] = t[j] > 0;
	gy = upf(be, y, n);
	gt = upf(be, t, n);
	gdy = dnan(be, n);
	be->pointwise_loss(arg, 1.5f, gy, gt, s.rows, s.cols, gdy, &loss);
	ref->pointwise_loss(arg, 1.5f, y, t, s.rows, s.cols, dy, &loss2);
	got = down(be, gdy, n);
	d = max3(dist(got, dy, n), fabs(loss - loss2) / (1.0 + fabs(loss2)),
		 isfinite(loss) ? 0.0 : INFINITY);
	be->free(gy);
	be->free(gt);
	free(y);
	free(t);
	free(dy);
	free(got);
	return d;
}

/* arg: the rate in percent */
static double check_dropout(const dlt_backend *be, size_t i, int arg)
{
	mat s = mats[i];
	size_t n = (size_t)s.rows * s.cols;
	float *x = randv(n, -1, 1), *y = nanv(n), *mk = nanv(n), *gx = upf(be, x, n);
	float *gy = dnan(be, n), *gmk = dnan(be, n), *goty, *gotmk;
	double d;
	be->dropout(gx, gy, gmk, n, arg / 100.0f, 42, 7 + n);
	ref->dropout(x, y, mk, n, arg / 100.0f, 42, 7 + n);
	goty = down(be, gy, n);
	gotmk = down(be, gmk, n);
	d = fmax(dist(goty, y, n), dist(gotmk, mk, n));
	be->free(gx);
	free(x);
	free(y);
	free(mk);
	free(goty);
	free(gotmk);
	return d;
}

/* arg: 0 mul, 1 add, 2 add in place, 3 scale by 2^-16, 4 scale by 0.37 */
static double check_arith(const dlt_backend *be, size_t i, int arg)
{
	mat s = mats[i];
	size_t n = (size_t)s.rows * s.cols;
	float *a = randv(n, -3, 3), *b = randv(n, -3, 3), *y = nanv(n);
	float *ga = upf(be, a, n), *gb = upf(be, b, n), *gy = dnan(be, n), *got;
	double d;
	if (arg == 0) {
		be->mul(ga, gb, gy, n);
		ref->mul(a, b, y, n);
	} else if (arg <= 2) {
		be->add(ga, gb, arg == 2 ? ga : gy, n);
		ref->add(a, b, y, n);
		if (arg == 2)
			be->copy(gy, ga, n * sizeof(float));
	} else {
		float k = arg == 3 ? 0x1p-16f : 0.37f;
		be->scale(ga, n, k);
		ref->scale(a, n, k);
		be->copy(gy, ga, n * sizeof(float));
		memcpy(y, a, n * sizeof(float));
	}
	got = down(be, gy, n);
	d = dist(got, y, n);
	be->free(ga);
	be->free(gb);
	free(a);
	free(b);
	free(y);
	free(got);
	return d;
}

/* arg: 1 decoupled (AdamW) */
static double check_adam(const dlt_backend *be, size_t i, int arg)
{
	mat s = mats[i];
	size_t n = (size_t)s.rows * s.cols;
	float *w = randv(n, -1, 1), *g = randv(n, -1, 1), *m = randv(n, -0.1f, 0.1f);
	float *v = randv(n, 0, 0.01f);
	float *gw = upf(be, w, n), *gg = upf(be, g, n), *gm = upf(be, m, n), *gv = upf(be, v, n);
	float *a, *b, *c;
	double d;
	be->adam(gw, gg, gm, gv, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, arg, 3, 1.0f);
	ref->adam(w, g, m, v, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, arg, 3, 1.0f);
	a = down(be, gw, n);
	b = down(be, gm, n);
	c = down(be, gv, n);
	d = max3(dist(a, w, n), dist(b, m, n), dist(c, v, n));
	be->free(gg);
	free(w);
	free(g);
	free(m);
	free(v);
	free(a);
	free(b);
	free(c);
	return d;
}

/* The update with gscale (a loss scale's inverse, a clipping's factor)
 * against scale and then the update with 1, on the same backend: the
 * same bits (0 where they are, else 1).  arg: 0 Adam, 1 AdamW, 2 SGD
 * with momentum, 3 SGD */
static double check_update_gscale(const dlt_backend *be, size_t i, int arg)
{
	mat s = mats[i];
	size_t n = (size_t)s.rows * s.cols;
	const float gs = 0.37f;	/* every product rounds */
	float *w = randv(n, -1, 1), *g = randv(n, -100, 100), *m = randv(n, -0.1f, 0.1f);
	float *v = randv(n, 0, 0.01f);
	float *w1 = upf(be, w, n), *w2 = upf(be, w, n), *g1 = upf(be, g, n), *g2 = upf(be, g, n);
	float *m1 = upf(be, m, n), *m2 = upf(be, m, n), *v1 = upf(be, v, n), *v2 = upf(be, v, n);
	float *a, *b, *c, *e;
	int same;
	be->scale(g2, n, gs);
	if (arg < 2) {
		be->adam(w1, g1, m1, v1, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, arg, 3, gs);
		be->adam(w2, g2, m2, v2, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, arg, 3, 1.0f);
	} else {
		float mom = arg == 2 ? 0.9f : 0.0f;
		be->sgd(w1, g1, mom ? m1 : NULL, n, 0.1f, mom, 0, 1e-4f, 0, gs);
		be->sgd(w2, g2, mom ? m2 : NULL, n, 0.1f, mom, 0, 1e-4f, 0, 1.0f);
	}
	a = down(be, w1, n);
	b = down(be, w2, n);
	c = down(be, m1, n);
	e = down(be, m2, n);
	same = !memcmp(a, b, n * sizeof(float)) && !memcmp(c, e, n * sizeof(float));
	free(a);
	free(b);
	free(c);
	free(e);
	a = down(be, v1, n);
	b = down(be, v2, n);
	same &= !memcmp(a, b, n * sizeof(float));
	be->free(g1);
	be->free(g2);
	free(w);
	free(g);
	free(m);
	free(v);
	free(a);
	free(b);
	return same ? 0.0 : 1.0;
}

/* arg: 0 plain, 1 momentum, 2 nesterov; + 4 the first step */
static double check_sgd(const dlt_backend *be, size_t i, int arg)
{
	mat s = mats[i];
	size_t n = (size_t)s.rows * s.cols;
	float mom = arg & 3 ? 0.9f : 0.0f;
	float *w = randv(n, -1, 1), *g = randv(n, -1, 1), *b = randv(n, -1, 1);
	float *gw = upf(be, w, n), *gg = upf(be, g, n), *gb = upf(be, b, n), *a, *c;
	double d;
	be->sgd(gw, gg, mom ? gb : NULL, n, 0.1f, mom, (arg & 3) == 2, 1e-4f, !!(arg & 4), 1.0f);
	ref->sgd(w, g, mom ? b : NULL, n, 0.1f, mom, (arg & 3) == 2, 1e-4f, !!(arg & 4), 1.0f);
	a = down(be, gw, n);
	c = down(be, gb, n);
	d = fmax(dist(a, w, n), dist(c, b, n));
	be->free(gg);
	free(w);
	free(g);
	free(b);
	free(a);
	free(c);
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
			x[i] = odd[r / 7 % N(odd)];
		else if (r % 7 == 1)
			x[i] *= ldexpf(1.0f, (int)(r / 7 % 80) - 40);
	}
	return x;
}

/* arg: the precision; + 16 special_values, else values that span fp16's
 * range and beyond, every third a bit pattern from a stride through all
 * 2^32 (NaNs with payloads, infinities, subnormals).  Bit for bit, NaN
 * payloads too. */
static double check_round(const dlt_backend *be, size_t i, int arg)
{
	mat s = mats[i];
	size_t n = (size_t)s.rows * s.cols;
	float *x, *gx, *got;
	double d;
	if (arg & 16) {
		x = special_values(n);
	} else {
		x = randv(n, -1, 1);
		for (size_t j = 0; j < n; j++)
			x[j] = j % 3 == 2 ? dlt_bits_f32((uint32_t)j * 2654435761u)
					  : ldexpf(x[j], (int)(j % 60) - 40);
	}
	gx = upf(be, x, n);
	be->round(gx, n, arg & 15);
	ref->round(x, n, arg & 15);
	got = down(be, gx, n);
	d = bits(got, x, n * sizeof(float));
	free(x);
	free(got);
	return d;
}

/* arg: the precision.  special_values rounded to it (round), then
 * narrowed and widened again: the words and the values bit for bit the
 * reference's, and the values those rounded, NaNs aside (an fp16 NaN
 * keeps the top of its payload) */
static double check_narrow(const dlt_backend *be, size_t i, int arg)
{
	mat s = mats[i];
	size_t n = (size_t)s.rows * s.cols, lost = 0;
	float *x = special_values(n), *back = nanv(n), *gx, *gback, *got;
	uint16_t *w = malloc(n * sizeof(uint16_t)), *gw, *gotw;
	double d;
	ref->round(x, n, arg);
	gx = upf(be, x, n);
	gw = up(be, w, n * sizeof(uint16_t));
	gback = dnan(be, n);
	be->narrow(gx, gw, n, arg);
	be->widen(gw, gback, n, arg);
	ref->narrow(x, w, n, arg);
	ref->widen(w, back, n, arg);
	got = down(be, gback, n);
	gotw = down_bytes(be, gw, n * sizeof(uint16_t));
	for (size_t j = 0; j < n; j++)
		lost += x[j] == x[j] && dlt_f32_bits(back[j]) != dlt_f32_bits(x[j]);
	d = fmax(fmax(bits(got, back, n * sizeof(float)), bits(gotw, w, n * sizeof(uint16_t))),
		 (double)lost);
	be->free(gx);
	free(x);
	free(back);
	free(w);
	free(got);
	free(gotw);
	return d;
}

/* arg: inf and NaN planted at every arg-th element, the count known; 0:
 * special_values, the reference's count */
static double check_nonfinite(const dlt_backend *be, size_t i, int arg)
{
	mat s = mats[i];
	size_t n = (size_t)s.rows * s.cols, want = 0, got;
	float *x = arg ? randv(n, -1, 1) : special_values(n), *gx;
	for (size_t j = 0; arg && j < n; j += (size_t)arg, want++)
		x[j] = j % 2 ? NAN : -INFINITY;
	if (!arg)
		want = ref->nonfinite(x, n);
	gx = upf(be, x, n);
	got = be->nonfinite(gx, n);
	if (arg && ref->nonfinite(x, n) != want)
		got = want + 1;		/* the reference miscounts */
	be->free(gx);
	free(x);
	return got == want ? 0.0 : INFINITY;
}

/* arg: tall[]'s shapes (thousands of chunks) for mats[]; values of both
 * signs and a thousand times apart, so that the order of the sums shows */
static double check_sum_squares(const dlt_backend *be, size_t i, int arg)
{
	mat s = arg ? tall[i] : mats[i];
	size_t n = (size_t)s.rows * s.cols;
	float *x = randv(n, -1, 1), *big = randv(n / 97 + 1, -1000, 1000), *gx;
	double want, got;
	for (size_t j = 0; j < n; j += 97)
		x[j] = big[j / 97];
	want = ref->sum_squares(x, n);
	gx = upf(be, x, n);
	got = be->sum_squares(gx, n);
	be->free(gx);
	free(x);
	free(big);
	return got == want ? 0.0 : want ? fabs(got - want) / want : INFINITY;
}

/* ---- the transformer's entries ---- */

/* arg: the inputs' offset, so a mean far from 0 shows a one-pass variance */
static double check_layernorm_forward(const dlt_backend *be, size_t i, int arg)
{
	seq s = seqs[i];
	int rows = s.B * s.T, C = s.C;
	size_t n = (size_t)rows * C;
	float *x = randv(n, arg - 3.0f, arg + 3.0f), *g = randv(C, 0.5f, 1.5f);
	float *b = randv(C, -1, 1), *y = nanv(n), *mu = nanv(rows), *rs = nanv(rows);
	float *gx = upf(be, x, n), *gg = upf(be, g, C), *gb = upf(be, b, C), *gy = dnan(be, n);
	float *gmu = dnan(be, rows), *grs = dnan(be, rows), *hy, *hmu, *hrs;
	double d;
	be->layernorm_forward(gx, gg, gb, gy, gmu, grs, rows, C, 1e-5f);
	ref->layernorm_forward(x, g, b, y, mu, rs, rows, C, 1e-5f);
	hy = down(be, gy, n);
	hmu = down(be, gmu, rows);
	hrs = down(be, grs, rows);
	d = max3(dist(hy, y, n), dist(hmu, mu, rows), dist(hrs, rs, rows));
	be->free(gx);
	be->free(gg);
	be->free(gb);
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

/* From the reference's mean and rstd.  arg 0: dx, against the
 * reference's double; 1: dgamma and dbeta, added to what they held, in
 * the reference's order (its bits) */
static double check_layernorm_backward(const dlt_backend *be, size_t i, int arg)
{
	seq s = arg & 2 ? tall_seqs[i] : seqs[i];
	int rows = s.B * s.T, C = s.C;
	size_t n = (size_t)rows * C;
	float *x = randv(n, -2, 2), *g = randv(C, 0.5f, 1.5f), *b = randv(C, -1, 1);
	float *dy = randv(n, -1, 1), *y = nanv(n), *mu = nanv(rows), *rs = nanv(rows);
	float *dx = nanv(n), *dg = randv(C, -1, 1), *db = randv(C, -1, 1);
	float *gx = upf(be, x, n), *gdy = upf(be, dy, n), *gg = upf(be, g, C);
	float *gmu, *grs, *gdx, *gdg, *gdb, *hdx, *hdg, *hdb;
	double d;
	ref->layernorm_forward(x, g, b, y, mu, rs, rows, C, 1e-5f);
	gmu = upf(be, mu, rows);
	grs = upf(be, rs, rows);
	gdx = dnan(be, n);
	gdg = upf(be, dg, C);
	gdb = upf(be, db, C);
	be->layernorm_backward(gx, gdy, gg, gmu, grs, gdx, gdg, gdb, rows, C);
	ref->layernorm_backward(x, dy, g, mu, rs, dx, dg, db, rows, C);
	hdx = down(be, gdx, n);
	hdg = down(be, gdg, C);
	hdb = down(be, gdb, C);
	d = arg ? fmax(dist(hdg, dg, C), dist(hdb, db, C)) : dist(hdx, dx, n);
	be->free(gx);
	be->free(gdy);
	be->free(gg);
	be->free(gmu);
	be->free(grs);
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

/* ids of n tokens among V (repeats where n is large); bad: -1 and V
 * among them */
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

/* B * T tokens of a vocabulary of T + 3; arg 1: ids out of range (a row
 * of NaN) */
static double check_embedding_forward(const dlt_backend *be, size_t i, int arg)
{
	seq s = seqs[i];
	int n = s.B * s.T, V = s.T + 3;
	size_t no = (size_t)n * s.C, nw = (size_t)V * s.C;
	int32_t *ids = token_ids(n, V, arg), *gids = up(be, ids, n * sizeof(int32_t));
	float *w = randv(nw, -1, 1), *o = randv(no, -1, 1), *gw = upf(be, w, nw);
	float *go = dnan(be, no), *h;
	double d;
	be->embedding_forward(gids, gw, go, n, s.C, V);
	ref->embedding_forward(ids, w, o, n, s.C, V);
	h = down(be, go, no);
	d = dist(h, o, no);
	be->free(gids);
	be->free(gw);
	free(ids);
	free(w);
	free(o);
	free(h);
	return d;
}

static double check_embedding_backward(const dlt_backend *be, size_t i, int arg)
{
	seq s = seqs[i];
	int n = s.B * s.T, V = s.T + 3;
	size_t no = (size_t)n * s.C, nw = (size_t)V * s.C;
	int32_t *ids = token_ids(n, V, arg), *gids = up(be, ids, n * sizeof(int32_t));
	float *g = randv(no, -1, 1), *dw = randv(nw, -1, 1), *gg = upf(be, g, no);
	float *gdw = upf(be, dw, nw), *h;
	double d;
	be->embedding_backward(gids, gg, gdw, n, s.C, V);
	ref->embedding_backward(ids, g, dw, n, s.C, V);
	h = down(be, gdw, nw);
	d = dist(h, dw, nw);
	be->free(gids);
	be->free(gg);
	free(ids);
	free(g);
	free(dw);
	free(h);
	return d;
}

/* arg 1: in place */
static double check_positional_forward(const dlt_backend *be, size_t i, int arg)
{
	seq s = seqs[i];
	size_t n = (size_t)s.B * s.T * s.C, np = (size_t)s.T * s.C;
	float *x = randv(n, -1, 1), *p = randv(np, -1, 1), *y = nanv(n);
	float *gx = upf(be, x, n), *gp = upf(be, p, np), *gy = arg ? gx : dnan(be, n), *h;
	double d;
	be->positional_forward(gx, gp, gy, s.B, s.T, s.C);
	ref->positional_forward(x, p, arg ? x : y, s.B, s.T, s.C);
	h = down(be, gy, n);
	d = dist(h, arg ? x : y, n);
	if (!arg)
		be->free(gx);
	be->free(gp);
	free(x);
	free(p);
	free(y);
	free(h);
	return d;
}

static double check_positional_backward(const dlt_backend *be, size_t i, int arg)
{
	seq s = seqs[i];
	size_t n = (size_t)s.B * s.T * s.C, np = (size_t)s.T * s.C;
	float *g = randv(n, -1, 1), *dp = randv(np, -1, 1), *gg = upf(be, g, n);
	float *gdp = upf(be, dp, np), *h;
	double d;
	(void)arg;
	be->positional_backward(gg, gdp, s.B, s.T, s.C);
	ref->positional_backward(g, dp, s.B, s.T, s.C);
	h = down(be, gdp, np);
	d = dist(h, dp, np);
	be->free(gg);
	free(g);
	free(dp);
	free(h);
	return d;
}

/* qkv in [-1, 1]; arg 2 makes the queries 8 times wider, so softmax rows
 * are sharp and the running maximum moves between tiles */
static float *attention_input(seq s, int arg)
{
	size_t n = (size_t)s.B * s.T * 3 * s.C;
	float *qkv = randv(n, -1, 1);
	for (size_t i = 0; arg & 2 && i < n; i++)
		if (i % (3 * (size_t)s.C) < (size_t)s.C)
			qkv[i] *= 8.0f;
	return qkv;
}

/* arg 4: dropout of a quarter of the weights */
static dlt_attn_dropout attention_dropout(int arg)
{
	return arg & 4 ? (dlt_attn_dropout){ 0.25f, 7, 99, 0 } : (dlt_attn_dropout){ 0 };
}

/* arg 8: bf16, 16: fp16 (else f32) */
enum { ATTN_BF16 = 8, ATTN_F16 = 16 };

static int attention_prec(int arg)
{
	return arg & ATTN_BF16 ? DLT_PREC_BF16 : arg & ATTN_F16 ? DLT_PREC_F16 : DLT_PREC_F32;
}

/* arg 1: causal; 2: wide scores; 4: dropout; 8, 16: bf16, fp16, q, k and
 * v rounded to it first (as a 16-bit model's are), so that only what
 * the backend rounds itself (CUDA: the softmax's weights) differs from
 * the reference's exact sums */
static double check_attention_forward(const dlt_backend *be, size_t i, int arg)
{
	seq s = seqs[i];
	size_t n = (size_t)s.B * s.T * s.C, nl = (size_t)s.B * s.H * s.T;
	int prec = attention_prec(arg);
	float *qkv = attention_input(s, arg), *o = nanv(n), *l = nanv(nl);
	float *gq, *go = dnan(be, n), *gl = dnan(be, nl), *ho, *hl;
	double d;
	ref->round(qkv, 3 * n, prec);
	gq = upf(be, qkv, 3 * n);
	be->attention_forward(prec, gq, go, gl, s.B, s.T, s.C, s.H, arg & 1,
			      attention_dropout(arg));
	ref->attention_forward(prec, qkv, o, l, s.B, s.T, s.C, s.H, arg & 1,
			       attention_dropout(arg));
	ho = down(be, go, n);
	hl = down(be, gl, nl);
	d = fmax(dist(ho, o, n), dist(hl, l, nl));
	be->free(gq);
	free(qkv);
	free(o);
	free(l);
	free(ho);
	free(hl);
	return d;
}

/* A backward's inputs: q, k, v, and the reference's out and lse from
 * them (so that only backward differs), and a gradient g; on the host
 * and in the backend's memory (gq, go, gl, gg) */
typedef struct attn_back {
	float *qkv, *o, *l, *g, *gq, *go, *gl, *gg;
} attn_back;

static attn_back attn_back_inputs(const dlt_backend *be, seq s, int arg)
{
	size_t n = (size_t)s.B * s.T * s.C, nl = (size_t)s.B * s.H * s.T;
	int prec = attention_prec(arg);
	attn_back a = { .qkv = attention_input(s, arg), .o = nanv(n), .l = nanv(nl),
			.g = randv(n, -1, 1) };
	ref->round(a.qkv, 3 * n, prec);
	ref->round(a.g, n, prec);
	ref->attention_forward(prec, a.qkv, a.o, a.l, s.B, s.T, s.C, s.H, arg & 1,
			       attention_dropout(arg));
	a.gq = upf(be, a.qkv, 3 * n);
	a.go = upf(be, a.o, n);
	a.gl = upf(be, a.l, nl);
	a.gg = upf(be, a.g, n);
	return a;
}

static void attn_back_free(const dlt_backend *be, attn_back *a)
{
	be->free(a->gq);
	be->free(a->go);
	be->free(a->gl);
	be->free(a->gg);
	free(a->qkv);
	free(a->o);
	free(a->l);
	free(a->g);
}

static double check_attention_backward(const dlt_backend *be, size_t i, int arg)
{
	seq s = seqs[i];
	size_t n = (size_t)s.B * s.T * s.C;
	attn_back a = attn_back_inputs(be, s, arg);
	float *dq = nanv(3 * n), *gdq = dnan(be, 3 * n), *h;
	int prec = attention_prec(arg);
	double d;
	be->attention_backward(prec, a.gq, a.go, a.gg, a.gl, gdq, s.B, s.T, s.C, s.H, arg & 1,
			       attention_dropout(arg));
	ref->attention_backward(prec, a.qkv, a.o, a.g, a.l, dq, s.B, s.T, s.C, s.H, arg & 1,
				attention_dropout(arg));
	h = down(be, gdq, 3 * n);
	d = dist(h, dq, 3 * n);
	attn_back_free(be, &a);
	free(dq);
	free(h);
	return d;
}

/* The backward on the batches from b1 on alone (row0 b1 H T, as nn runs
 * it a range at a time) against those batches' part of the backward on
 * all; arg as above.  A wrong row0 takes other dropout masks, far from
 * the whole call's values */
static double check_attention_backward_rows(const dlt_backend *be, size_t i, int arg)
{
	seq s = seqs[i];
	int b1 = s.B / 2, nb = s.B - b1;
	size_t n = (size_t)s.B * s.T * s.C, r1 = (size_t)b1 * s.T;
	attn_back a = attn_back_inputs(be, s, arg);
	float *d1 = dnan(be, 3 * n), *d2 = dnan(be, 3 * n), *h1, *h2;
	dlt_attn_dropout drop = attention_dropout(arg);
	double d;
	int prec = attention_prec(arg);
	be->attention_backward(prec, a.gq, a.go, a.gg, a.gl, d1, s.B, s.T, s.C, s.H, arg & 1,
			       drop);
	drop.row0 = (uint64_t)b1 * s.H * s.T;
	be->attention_backward(prec, a.gq + 3 * r1 * s.C, a.go + r1 * s.C, a.gg + r1 * s.C,
			       a.gl + (size_t)b1 * s.H * s.T, d2 + 3 * r1 * s.C, nb, s.T, s.C, s.H,
			       arg & 1, drop);
	h1 = down(be, d1, 3 * n);
	h2 = down(be, d2, 3 * n);
	d = dist(h2 + 3 * r1 * s.C, h1 + 3 * r1 * s.C, 3 * (n - r1 * s.C));
	attn_back_free(be, &a);
	free(h1);
	free(h2);
	return d;
}

/* Generation's attention over a KV cache: each sequence's last query
 * (arg 0), or its second half at once (arg 1), against the reference's
 * causal attention_forward rows; the reference's decode too.  arg 2: the
 * last query of one sequence 5 times as long, past the CPU's chunks of
 * 256 keys. */
static double check_attention_decode(const dlt_backend *be, size_t i, int arg)
{
	seq s = seqs[i];
	size_t n, nl, nd;
	float *qkv, *gq, *o, *l, *d2;
	int q0, nq;
	double worst = 0;
	if (arg == 2)
		s = (seq){ 1, 5 * s.T, s.C, s.H };
	n = (size_t)s.B * s.T * s.C;
	nl = (size_t)s.B * s.H * s.T;
	qkv = attention_input(s, 0);
	gq = upf(be, qkv, 3 * n);
	o = nanv(n);
	l = nanv(nl);
	q0 = arg == 1 ? s.T / 2 : s.T - 1;
	nq = s.T - q0;
	nd = (size_t)nq * s.C;
	d2 = nanv(nd);
	ref->attention_forward(DLT_PREC_F32, qkv, o, l, s.B, s.T, s.C, s.H, 1,
			       attention_dropout(0));
	for (int b = 0; b < s.B; b++) {
		const float *want = o + ((size_t)b * s.T + q0) * s.C;
		float *gd = dnan(be, nd), *h;
		be->attention_decode(gq + (size_t)b * s.T * 3 * s.C, gd, q0, nq, s.C, s.H);
		ref->attention_decode(qkv + (size_t)b * s.T * 3 * s.C, d2, q0, nq, s.C, s.H);
		h = down(be, gd, nd);
		worst = max3(worst, dist(h, want, nd), dist(d2, want, nd));
		free(h);
	}
	be->free(gq);
	free(qkv);
	free(o);
	free(l);
	free(d2);
	return worst;
}

/* ---- convolution ---- */

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

#define CONV_FORWARD 1
#define CONV_BACKWARD 2
#define CONV_REPEAT 3
#define CONV_EXACT 4

/* Forward (what & CONV_FORWARD) and backward (& CONV_BACKWARD) of a
 * batch of s->n on be, in its workspace work; the outputs into host
 * memory (NaN where not run) */
static void conv_run(const dlt_backend *be, int prec, const dlt_conv *s, const conv_case *cc,
		     const float *x, const float *w, const float *b, const float *dy, float *work,
		     int what, conv_out *o)
{
	size_t nx = dlt_conv_x_floats(s), ny = dlt_conv_y_floats(s), nw = dlt_conv_w_floats(s);
	float *gx = upf(be, x, nx), *gw = upf(be, w, nw), *gb = upf(be, b, s->k);
	float *gdy = upf(be, dy, ny), *gy = dnan(be, ny), *gdx = dnan(be, nx);
	float *gdw = dnan(be, nw), *gdb = dnan(be, s->k);
	if (what & CONV_FORWARD)
		be->conv_forward(prec, s, gx, gw, cc->flags & NO_BIAS ? NULL : gb, gy, cc->act,
				 0.1f, work);
	if (what & CONV_BACKWARD)
		be->conv_backward(prec, s, gx, gw, gdy, cc->flags & NO_DX ? NULL : gdx, gdw,
				  cc->flags & NO_DB ? NULL : gdb, work);
	o->y = down(be, gy, ny);
	o->dx = down(be, gdx, nx);
	o->dw = down(be, gdw, nw);
	o->db = down(be, gdb, s->k);
	be->free(gx);
	be->free(gw);
	be->free(gb);
	be->free(gdy);
}

static int conv_same(const dlt_conv *s, const conv_out *a, const conv_out *b)
{
	return !memcmp(a->y, b->y, dlt_conv_y_floats(s) * 4) &&
	       !memcmp(a->dx, b->dx, dlt_conv_x_floats(s) * 4) &&
	       !memcmp(a->dw, b->dw, dlt_conv_w_floats(s) * 4) && !memcmp(a->db, b->db, s->k * 4);
}

/* Over the square root of the length of each output's sum: forward's y,
 * or backward's dw, and dx and db where asked for */
static double conv_diff(const dlt_conv *s, const conv_case *cc, const conv_out *a,
			const conv_out *b, int what)
{
	double taps = (double)s->kh * s->kw, pixels = (double)s->n * s->oh * s->ow, d;
	if (what == CONV_FORWARD)
		return dist(a->y, b->y, dlt_conv_y_floats(s)) / sqrt(taps * s->c / s->groups);
	d = dist(a->dw, b->dw, dlt_conv_w_floats(s)) / sqrt(pixels);
	if (!(cc->flags & NO_DX))
		d = fmax(d, dist(a->dx, b->dx, dlt_conv_x_floats(s)) / sqrt(taps * s->k / s->groups));
	if (!(cc->flags & NO_DB))
		d = fmax(d, dist(a->db, b->db, s->k) / sqrt(pixels));
	return d;
}

/* arg: the precision, + 4 times CONV_FORWARD, CONV_BACKWARD, CONV_REPEAT
 * (both, the same bits twice) or CONV_EXACT (both, x and dy rounded to
 * the precision: with DLT_X_EXACT and DLT_DY_EXACT the bits they have
 * without).  The workspace is planned for n + 2,
 * full of NaN, and used by a batch of n + 2 and of n; a workspace of 0
 * floats is NULL, as the model's: the entries must run without one. */
static double check_conv(const dlt_backend *be, size_t i, int arg)
{
	const conv_case *cc = &convs[i];
	int prec = arg & 3, what = arg >> 2, max = cc->n + 2, sizes[2] = { max, cc->n };
	dlt_conv smax = conv_shape(cc, max);
	size_t nwork = be->conv_workspace(prec, &smax);
	float *work = nwork ? dnan(be, nwork) : NULL;
	float *x = randv(dlt_conv_x_floats(&smax), -1, 1), *w = randv(dlt_conv_w_floats(&smax), -1, 1);
	float *b = randv(smax.k, -1, 1), *dy = randv(dlt_conv_y_floats(&smax), -1, 1);
	double d = 0.0;
	conv_out rmax = { 0 };	/* the reference's forward of n + 2: n's is its start */
	if (what == CONV_EXACT) {
		ref->round(x, dlt_conv_x_floats(&smax), prec);
		ref->round(dy, dlt_conv_y_floats(&smax), prec);
	}
	for (int j = 0; j < 2; j++) {
		dlt_conv s = conv_shape(cc, sizes[j]);
		conv_out g, r = { 0 };
		if (what == CONV_EXACT) {
			conv_run(be, prec | DLT_CONV_FLAGS, &s, cc, x, w, b, dy, work,
				 CONV_FORWARD | CONV_BACKWARD, &g);
			conv_run(be, prec, &s, cc, x, w, b, dy, work, CONV_FORWARD | CONV_BACKWARD,
				 &r);
			d = fmax(d, conv_same(&s, &g, &r) ? 0.0 : INFINITY);
			conv_free(&g);
			conv_free(&r);
			continue;
		}
		if (what == CONV_REPEAT)
			repeat_threads(be, 0);
		conv_run(be, prec, &s, cc, x, w, b, dy, work, what, &g);
		if (what == CONV_REPEAT) {
			repeat_threads(be, 1);
			conv_run(be, prec, &s, cc, x, w, b, dy, work, what, &r);
			repeat_threads(be, -1);
			d = fmax(d, conv_same(&s, &g, &r) ? 0.0 : INFINITY);
		} else if (what == CONV_FORWARD) {
			if (!j) {
				rmax.y = nanv(dlt_conv_y_floats(&s));
				ref->conv_forward(prec, &s, x, w, cc->flags & NO_BIAS ? NULL : b,
						  rmax.y, cc->act, 0.1f, NULL);
			}
			d = fmax(d, conv_diff(&s, cc, &g, &rmax, what));
		} else {
			r.dx = nanv(dlt_conv_x_floats(&s));
			r.dw = nanv(dlt_conv_w_floats(&s));
			r.db = nanv(s.k);
			ref->conv_backward(prec, &s, x, w, dy, cc->flags & NO_DX ? NULL : r.dx, r.dw,
					   cc->flags & NO_DB ? NULL : r.db, NULL);
			d = fmax(d, conv_diff(&s, cc, &g, &r, what));
		}
		conv_free(&g);
		conv_free(&r);
	}
	conv_free(&rmax);
	if (work)
		be->free(work);
	free(x);
	free(w);
	free(b);
	free(dy);
	return d;
}

/* ---- pooling: the reference's bits ---- */

#define POOL_RELU 1	/* the max pool that does a ReLU's backward too */
#define POOL_NAN 2	/* a NaN in x, which wins */
#define POOL_AVG 4	/* average pooling, not max */
#define POOL_REPEAT 8	/* max and average, the same bits run after run */

typedef struct pool_out {
	float *y, *dx, *ay, *adx;
	int32_t *arg;
} pool_out;

static void pool_free(pool_out *p)
{
	free(p->y);
	free(p->dx);
	free(p->ay);
	free(p->adx);
	free(p->arg);
}

static void pool_run(const dlt_backend *be, const dlt_pool *s, const float *x, const float *dy,
		     pool_out *o)
{
	size_t nx = (size_t)s->n * s->c * s->h * s->w, ny = (size_t)s->n * s->c * s->oh * s->ow;
	float *gx = upf(be, x, nx), *gdy = upf(be, dy, ny), *gy = dnan(be, ny);
	float *gay = dnan(be, ny), *gdx = dnan(be, nx), *gadx = dnan(be, nx);
	int32_t *garg = be->alloc(ny * sizeof(int32_t) + 4);
	be->maxpool_forward(s, gx, gy, garg);
	be->maxpool_backward(s, gdy, garg, gdx);
	be->avgpool_forward(s, gx, gay);
	be->avgpool_backward(s, gdy, gadx);
	o->y = down(be, gy, ny);
	o->dx = down(be, gdx, nx);
	o->ay = down(be, gay, ny);
	o->adx = down(be, gadx, nx);
	o->arg = down_bytes(be, garg, ny * sizeof(int32_t));
	be->free(gx);
	be->free(gdy);
}

static double check_pool(const dlt_backend *be, size_t i, int arg)
{
	dlt_pool s = ops_pool_shape(&ops_pools[i]);
	size_t nx = (size_t)s.n * s.c * s.h * s.w, ny;
	float *x = randv(nx, -1, 1), *dy;
	pool_out g, r;
	double d;
	s.relu = arg & POOL_RELU;
	ny = (size_t)s.n * s.c * s.oh * s.ow;
	dy = randv(ny, -1, 1);
	/* ties, for the first-of-equals rule */
	for (size_t j = 0; j < nx; j += 3)
		x[j] = 0.5f;
	if (arg & POOL_NAN)
		x[nx / 2] = NAN;
	if (arg & POOL_REPEAT)
		repeat_threads(be, 0);
	pool_run(be, &s, x, dy, &g);
	if (arg & POOL_REPEAT) {
		d = 0.0;
		for (int k = 1; k < 2; k++) {
			repeat_threads(be, k);
			pool_run(be, &s, x, dy, &r);
			d = fmax(d, bits(g.y, r.y, ny * 4) + bits(g.arg, r.arg, ny * 4) +
				    bits(g.dx, r.dx, nx * 4) + bits(g.ay, r.ay, ny * 4) +
				    bits(g.adx, r.adx, nx * 4));
			pool_free(&r);
		}
		repeat_threads(be, -1);
	} else {
		pool_run(ref, &s, x, dy, &r);
		if (arg & POOL_AVG)
			d = fmax(dist(g.ay, r.ay, ny), dist(g.adx, r.adx, nx));
		else
			d = max3(dist(g.y, r.y, ny), bits(g.arg, r.arg, ny * 4),
				 dist(g.dx, r.dx, nx));
		pool_free(&r);
	}
	pool_free(&g);
	free(x);
	free(dy);
	return d;
}

/* ---- batch normalisation ---- */

enum {
	BN_TRAIN, BN_TRAIN_SCALED, BN_EVAL, BN_EVAL_SCALED, BN_BACKWARD, BN_DX_SCALED,
	BN_SUMS_SCALED, BN_REPEAT
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

/* train, eval with the running statistics train left, backward with its
 * mean and invstd */
static void bn_run(const dlt_backend *be, const bn_case *bc, const float *x, const float *g,
		   const float *b, const float *dy, const float *rm0, const float *rv0, bn_out *o)
{
	size_t nx = (size_t)bc->n * bc->c * bc->hw, c = bc->c;
	float *gx = upf(be, x, nx), *gg = upf(be, g, c), *gb = upf(be, b, c);
	float *gdy = upf(be, dy, nx), *grm = upf(be, rm0, c), *grv = upf(be, rv0, c);
	float *gy = dnan(be, nx), *gey = dnan(be, nx), *gdx = dnan(be, nx), *gmean = dnan(be, c);
	float *ginv = dnan(be, c), *gdg = dnan(be, c), *gdb = dnan(be, c);
	be->batchnorm_train(bc->n, bc->c, bc->hw, gx, gg, gb, gy, gmean, ginv, grm, grv, 0.1f,
			    1e-5f);
	be->batchnorm_eval(bc->n, bc->c, bc->hw, gx, gg, gb, grm, grv, 1e-5f, gey);
	be->batchnorm_backward(bc->n, bc->c, bc->hw, gx, gdy, gg, gmean, ginv,
			       bc->no_dx ? NULL : gdx, gdg, gdb);
	o->y = down(be, gy, nx);
	o->ey = down(be, gey, nx);
	o->dx = down(be, gdx, nx);
	o->mean = down(be, gmean, c);
	o->invstd = down(be, ginv, c);
	o->rm = down(be, grm, c);
	o->rv = down(be, grv, c);
	o->dg = down(be, gdg, c);
	o->db = down(be, gdb, c);
	be->free(gx);
	be->free(gg);
	be->free(gb);
	be->free(gdy);
}

static int bn_same(const bn_out *a, const bn_out *b, size_t nx, size_t c)
{
	return !memcmp(a->y, b->y, nx * 4) && !memcmp(a->ey, b->ey, nx * 4) &&
	       !memcmp(a->dx, b->dx, nx * 4) && !memcmp(a->mean, b->mean, c * 4) &&
	       !memcmp(a->invstd, b->invstd, c * 4) && !memcmp(a->rm, b->rm, c * 4) &&
	       !memcmp(a->rv, b->rv, c * 4) && !memcmp(a->dg, b->dg, c * 4) &&
	       !memcmp(a->db, b->db, c * 4);
}

/* arg: which outputs, and over what (the BN_ names) */
static double check_bn(const dlt_backend *be, size_t i, int arg)
{
	const bn_case *bc = &bns[i];
	size_t nx = (size_t)bc->n * bc->c * bc->hw, c = bc->c;
	float *x = randv(nx, -2, 2), *g = randv(c, 0.5f, 1.5f), *b = randv(c, -1, 1);
	float *dy = randv(nx, -1, 1), *rm0 = randv(c, -1, 1), *rv0 = randv(c, 0.5f, 2);
	double d = 0.0, mean = 1.0 + fabs(bc->offset);
	bn_out o, r;
	for (size_t j = 0; j < nx; j++)
		x[j] += bc->offset;
	if (arg == BN_REPEAT)
		repeat_threads(be, 0);
	bn_run(be, bc, x, g, b, dy, rm0, rv0, &o);
	if (arg == BN_REPEAT) {
		for (int k = 1; k < 2; k++) {
			repeat_threads(be, k);
			bn_run(be, bc, x, g, b, dy, rm0, rv0, &r);
			d = fmax(d, bn_same(&o, &r, nx, c) ? 0.0 : INFINITY);
			bn_free(&r);
		}
		repeat_threads(be, -1);
	} else {
		bn_run(ref, bc, x, g, b, dy, rm0, rv0, &r);
		switch (arg) {
		case BN_TRAIN:
		case BN_TRAIN_SCALED:
			d = max3(dist(o.y, r.y, nx), dist(o.mean, r.mean, c),
				 max3(dist(o.invstd, r.invstd, c), dist(o.rm, r.rm, c),
				      dist(o.rv, r.rv, c)));
			break;
		case BN_EVAL:
		case BN_EVAL_SCALED:
			d = dist(o.ey, r.ey, nx);
			break;
		case BN_BACKWARD:
			d = max3(bc->no_dx ? 0.0 : dist(o.dx, r.dx, nx), dist(o.dg, r.dg, c),
				 dist(o.db, r.db, c));
			break;
		case BN_DX_SCALED:
			d = bc->no_dx ? 0.0 : dist(o.dx, r.dx, nx);
			break;
		case BN_SUMS_SCALED:
			d = fmax(dist(o.dg, r.dg, c), dist(o.db, r.db, c)) /
			    sqrt((double)bc->n * bc->hw);
			break;
		}
		if (arg == BN_TRAIN_SCALED || arg == BN_EVAL_SCALED || arg == BN_DX_SCALED)
			d /= mean;
		bn_free(&r);
	}
	bn_free(&o);
	free(x);
	free(g);
	free(b);
	free(dy);
	free(rm0);
	free(rv0);
	return d;
}

/* ---- the same bits on 1, 2 and 3 threads (the CPU's sums have a fixed
 * order), on shapes large enough to split; host memory ---- */

enum {
	T_BIAS_GRAD, T_SOFTMAX_XENT, T_LAYERNORM_BACKWARD, T_EMBEDDING_BACKWARD,
	T_POSITIONAL_BACKWARD, T_ATTENTION_FORWARD, T_ATTENTION_BACKWARD
};

static double check_threads(const dlt_backend *be, size_t i, int arg)
{
	seq s = { 3, 130, 128, 4 };
	int rows = 3000, C = 300, V = 40;
	size_t n = (size_t)rows * C, na = (size_t)s.B * s.T * s.C, nl = (size_t)s.B * s.H * s.T;
	float *x = randv(n, -2, 2), *dy = randv(n, -1, 1), *g = randv(C, 0.5f, 1.5f);
	float *mu = malloc(rows * 4), *rs = malloc(rows * 4), *y = malloc(n * 4);
	float *qkv = attention_input(s, 0), *ga = randv(na, -1, 1);
	int32_t *ids = token_ids(rows, V, 0), *lab = token_ids(rows, C, 0);
	void *out[REPEATS][3] = { { 0 } };
	size_t bytes[3] = { 0 };
	double d = 0.0;
	(void)i;
	be->layernorm_forward(x, g, g, y, mu, rs, rows, C, 1e-5f);
	for (int k = 0; k < REPEATS; k++) {
		void **o = out[k];
		repeat_threads(be, k);
		switch (arg) {
		case T_BIAS_GRAD:
			o[0] = malloc(bytes[0] = C * 4);
			be->bias_grad(dy, o[0], rows, C);
			break;
		case T_SOFTMAX_XENT:
			o[0] = malloc(bytes[0] = n * 4);
			o[1] = malloc(bytes[1] = sizeof(double));
			o[2] = malloc(bytes[2] = sizeof(int));
			be->softmax_xent(dy, lab, rows, C, o[0], o[1], o[2]);
			break;
		case T_LAYERNORM_BACKWARD:
			o[0] = malloc(bytes[0] = n * 4);
			o[1] = calloc(C, 4);
			o[2] = calloc(C, 4);
			bytes[1] = bytes[2] = C * 4;
			be->layernorm_backward(x, dy, g, mu, rs, o[0], o[1], o[2], rows, C);
			break;
		case T_EMBEDDING_BACKWARD:
			o[0] = calloc((size_t)V * C, 4);
			bytes[0] = (size_t)V * C * 4;
			be->embedding_backward(ids, dy, o[0], rows, C, V);
			break;
		case T_POSITIONAL_BACKWARD:
			o[0] = calloc((size_t)s.T * s.C, 4);
			bytes[0] = (size_t)s.T * s.C * 4;
			be->positional_backward(ga, o[0], s.B, s.T, s.C);
			break;
		case T_ATTENTION_FORWARD:
		case T_ATTENTION_BACKWARD:
			o[0] = malloc(bytes[0] = na * 4);
			o[1] = malloc(bytes[1] = nl * 4);
			be->attention_forward(DLT_PREC_F32, qkv, o[0], o[1], s.B, s.T, s.C, s.H, 1,
					      attention_dropout(0));
			if (arg == T_ATTENTION_FORWARD)
				break;
			o[2] = malloc(bytes[2] = 3 * na * 4);
			be->attention_backward(DLT_PREC_F32, qkv, o[0], ga, o[1], o[2], s.B, s.T,
					       s.C, s.H, 1, attention_dropout(0));
			break;
		}
	}
	repeat_threads(be, -1);
	for (int k = 1; k < REPEATS; k++)
		for (int j = 0; j < 3; j++)
			if (bytes[j])
				d = fmax(d, bits(out[0][j], out[k][j], bytes[j]));
	for (int k = 0; k < REPEATS; k++)
		for (int j = 0; j < 3; j++)
			free(out[k][j]);
	free(x);
	free(dy);
	free(g);
	free(mu);
	free(rs);
	free(y);
	free(qkv);
	free(ga);
	free(ids);
	free(lab);
	return d;
}

/* ---- the table ---- */

enum set { MATS, LONGK, TALL, SEQS, TALL_SEQS, CONVS, POOLS, BNS, ONE };

static size_t set_size(int set)
{
	static const size_t n[] = { N(mats), N(longk), N(tall), N(seqs),
				     N(tall_seqs), N(convs), N(ops_pools), N(bns), 1 };
	return n[set];
}

static void say_shape(int set, size_t i, char *buf, size_t len)
{
	static const char *const act[] = { "", " relu", " leaky_relu", " gelu", " tanh",
					   " sigmoid", " gelu_tanh" };
	const conv_case *c = set == CONVS ? &convs[i] : NULL;
	const pool_case *p = set == POOLS ? &ops_pools[i] : NULL;
	const bn_case *b = set == BNS ? &bns[i] : NULL;
	const seq *q;
	char mean[32];
	switch (set) {
	case MATS:
		say_mat(&mats[i], buf, len);
		break;
	case LONGK:
		say_mat(&longk[i], buf, len);
		break;
	case TALL:
		say_mat(&tall[i], buf, len);
		break;
	case SEQS:
	case TALL_SEQS:
		q = set == SEQS ? &seqs[i] : &tall_seqs[i];
		snprintf(buf, len, "B %d T %d C %d H %d", q->B, q->T, q->C, q->H);
		break;
	case CONVS:
		snprintf(buf, len, "n%d c%d %dx%d k%d %dx%d s%d,%d p%d,%d d%d,%d g%d%s%s%s%s",
			 c->n, c->c, c->h, c->w, c->k, c->kh, c->kw, c->sh, c->sw, c->ph, c->pw,
			 c->dh, c->dw, c->groups, act[c->act], c->flags & NO_BIAS ? " no bias" : "",
			 c->flags & NO_DX ? " no dx" : "", c->flags & NO_DB ? " no db" : "");
		break;
	case POOLS:
		snprintf(buf, len, "n%d c%d %dx%d k%dx%d s%d,%d p%d,%d", p->n, p->c, p->h, p->w,
			 p->kh, p->kw, p->sh, p->sw, p->ph, p->pw);
		break;
	case BNS:
		snprintf(mean, sizeof(mean), " mean %g", b->offset);
		snprintf(buf, len, "n%d c%d hw%d%s%s", b->n, b->c, b->hw, b->offset ? mean : "",
			 b->no_dx ? " no dx" : "");
		break;
	default:
		buf[0] = 0;
	}
}

typedef struct row {
	const char *name;
	/* the worst difference of be's outputs from the reference's, on the
	 * set's shape i, for the row's arg */
	double (*check)(const dlt_backend *be, size_t i, int arg);
	int arg;
	int set;
	double tol[OPS_COLUMNS];	/* CPU, CUDA; NO: not run there */
} row;

#define CPU_ONLY(t) { t, NO }
#define BF16 16
#define FP16 32

static const row rows[] = {
	{ "gemm nn", check_gemm, 0, MATS, { 2e-6, 1e-5 } },
	{ "gemm tn", check_gemm, 1, MATS, { 2e-6, 1e-5 } },
	{ "gemm nt", check_gemm, 2, MATS, { 2e-6, 1e-5 } },
	{ "gemm tt", check_gemm, 3, MATS, { 2e-6, 1e-5 } },
	{ "gemm nn alpha beta", check_gemm, 4, MATS, { 2e-6, 1e-5 } },
	{ "gemm tt alpha beta padded", check_gemm, 15, MATS, { 2e-6, 1e-5 } },
	{ "gemm nt padded", check_gemm, 10, MATS, { 2e-6, 1e-5 } },
	{ "gemm nn bf16", check_gemm, BF16, MATS, { 2e-6, 1e-5 } },
	{ "gemm nt bf16", check_gemm, 2 + BF16, MATS, { 2e-6, 1e-5 } },
	{ "gemm tn bf16", check_gemm, 1 + BF16, MATS, { 2e-6, 1e-5 } },
	{ "gemm nn alpha beta padded bf16", check_gemm, 12 + BF16, MATS, { 2e-6, 1e-5 } },
	{ "gemm tt alpha beta padded bf16", check_gemm, 15 + BF16, MATS, { 2e-6, 1e-5 } },
	{ "gemm nt fp16", check_gemm, 2 + FP16, MATS, { 2e-6, 1e-5 } },
	{ "gemm tn alpha beta fp16", check_gemm, 5 + FP16, MATS, { 2e-6, 1e-5 } },
	{ "gemm tt alpha beta padded fp16", check_gemm, 15 + FP16, MATS, { 2e-6, 1e-5 } },
	/* the CUDA backend's 16-bit operands a range of K at a time */
	{ "gemm nt bf16, long k", check_gemm_longk, 2 + BF16, LONGK, { NO, 1e-5 } },
	{ "gemm tn fp16, long k", check_gemm_longk, 1 + FP16, LONGK, { NO, 1e-5 } },
	/* DLT_ROUND_C: the bits of the product then round, every backend */
	{ "gemm nt bf16, C rounded", check_gemm_round, 2 + BF16, MATS, { 0, 0 } },
	{ "gemm tn bf16, C rounded", check_gemm_round, 1 + BF16, MATS, { 0, 0 } },
	{ "gemm nn fp16, C rounded", check_gemm_round, FP16, MATS, { 0, 0 } },
	{ "gemm tt fp16, C rounded", check_gemm_round, 3 + FP16, MATS, { 0, 0 } },
	{ "gemm tn bf16, C rounded, long k", check_gemm_round_longk, 1 + BF16, LONGK, { 0, 0 } },
	{ "gemm nt fp16, C rounded, long k", check_gemm_round_longk, 2 + FP16, LONGK, { 0, 0 } },
	/* 16-bit operands (DLT_A_HALF, DLT_B_HALF): the bits of their values
	 * as floats, every backend, every transpose */
	{ "gemm nn bf16, A and B 16-bit", check_gemm_half, 4 + 8 + BF16, MATS, { 0, 0 } },
	{ "gemm tn bf16, B 16-bit", check_gemm_half, 1 + 8 + BF16, MATS, { 0, 0 } },
	{ "gemm nt bf16, A 16-bit", check_gemm_half, 2 + 4 + BF16, MATS, { 0, 0 } },
	{ "gemm tt bf16, A and B 16-bit", check_gemm_half, 3 + 4 + 8 + BF16, MATS, { 0, 0 } },
	{ "gemm nn fp16, B 16-bit", check_gemm_half, 8 + FP16, MATS, { 0, 0 } },
	{ "gemm tn fp16, A and B 16-bit", check_gemm_half, 1 + 4 + 8 + FP16, MATS, { 0, 0 } },
	{ "gemm nt fp16, A and B 16-bit", check_gemm_half, 2 + 4 + 8 + FP16, MATS, { 0, 0 } },
	{ "gemm tt fp16, A 16-bit", check_gemm_half, 3 + 4 + FP16, MATS, { 0, 0 } },
	{ "gemm tn bf16, B 16-bit, long k", check_gemm_half_longk, 1 + 8 + BF16, LONGK, { 0, 0 } },
	{ "gemm nn fp16, A 16-bit, long k", check_gemm_half_longk, 4 + FP16, LONGK, { 0, 0 } },
	{ "bias_act none", check_bias_act, DLT_ACT_NONE, MATS, { 1e-7, 0 } },
	{ "bias_act relu", check_bias_act, DLT_ACT_RELU, MATS, { 1e-7, 0 } },
	{ "bias_act leaky_relu", check_bias_act, DLT_ACT_LEAKY_RELU, MATS, { 1e-7, 0 } },
	{ "bias_act gelu", check_bias_act, DLT_ACT_GELU, MATS, { 1e-7, 1e-6 } },
	{ "bias_act tanh", check_bias_act, DLT_ACT_TANH, MATS, { 1e-7, 1e-6 } },
	{ "bias_act sigmoid", check_bias_act, DLT_ACT_SIGMOID, MATS, { 1e-7, 1e-6 } },
	{ "bias_act gelu_tanh", check_bias_act, DLT_ACT_GELU_TANH, MATS, { 1e-7, 1e-6 } },
	{ "bias_act none, no bias", check_bias_act, DLT_ACT_NONE + 16, MATS, { 1e-7, 0 } },
	{ "bias_act relu, no bias", check_bias_act, DLT_ACT_RELU + 16, MATS, { 1e-7, 0 } },
	{ "bias_act gelu, no bias", check_bias_act, DLT_ACT_GELU + 16, MATS, { 1e-7, 1e-6 } },
	{ "bias_act gelu_tanh, no bias", check_bias_act, DLT_ACT_GELU_TANH + 16, MATS,
	  { 1e-7, 1e-6 } },
	/* rounded in the same pass: within an ulp of bf16 where the
	 * activation's arithmetic may differ in f32's last bit */
	{ "bias_act none, bf16", check_bias_act, DLT_ACT_NONE + 32, MATS, { 0, 0 } },
	{ "bias_act relu, fp16", check_bias_act, DLT_ACT_RELU + 64, MATS, { 0, 0 } },
	{ "bias_act none, no bias, fp16", check_bias_act, DLT_ACT_NONE + 16 + 64, MATS, { 0, 0 } },
	{ "bias_act gelu_tanh, bf16", check_bias_act, DLT_ACT_GELU_TANH + 32, MATS,
	  { 4e-3, 4e-3 } },
	{ "act_forward none", check_act_forward, DLT_ACT_NONE, MATS, { 1e-7, 0 } },
	{ "act_forward relu", check_act_forward, DLT_ACT_RELU, MATS, { 1e-7, 0 } },
	{ "act_forward leaky_relu", check_act_forward, DLT_ACT_LEAKY_RELU, MATS, { 1e-7, 0 } },
	{ "act_forward gelu", check_act_forward, DLT_ACT_GELU, MATS, { 1e-7, 1e-6 } },
	{ "act_forward tanh", check_act_forward, DLT_ACT_TANH, MATS, { 1e-7, 1e-6 } },
	{ "act_forward sigmoid", check_act_forward, DLT_ACT_SIGMOID, MATS, { 1e-7, 1e-6 } },
	{ "act_forward gelu_tanh", check_act_forward, DLT_ACT_GELU_TANH, MATS, { 1e-7, 1e-6 } },
	{ "act_forward none in place", check_act_forward, DLT_ACT_NONE + 16, MATS, { 1e-7, 0 } },
	{ "act_forward relu in place", check_act_forward, DLT_ACT_RELU + 16, MATS, { 1e-7, 0 } },
	{ "act_forward sigmoid in place", check_act_forward, DLT_ACT_SIGMOID + 16, MATS,
	  { 1e-7, 1e-6 } },
	{ "act_forward gelu_tanh in place", check_act_forward, DLT_ACT_GELU_TANH + 16, MATS,
	  { 1e-7, 1e-6 } },
	{ "act_backward none", check_act_backward, DLT_ACT_NONE, MATS, { 1e-7, 0 } },
	{ "act_backward relu", check_act_backward, DLT_ACT_RELU, MATS, { 1e-7, 0 } },
	{ "act_backward leaky_relu", check_act_backward, DLT_ACT_LEAKY_RELU, MATS, { 1e-7, 0 } },
	{ "act_backward gelu", check_act_backward, DLT_ACT_GELU, MATS, { 1e-7, 1e-6 } },
	{ "act_backward tanh", check_act_backward, DLT_ACT_TANH, MATS, { 1e-7, 0 } },
	{ "act_backward sigmoid", check_act_backward, DLT_ACT_SIGMOID, MATS, { 1e-7, 0 } },
	{ "act_backward gelu_tanh", check_act_backward, DLT_ACT_GELU_TANH, MATS, { 1e-7, 1e-6 } },
	{ "bias_grad", check_bias_grad, 0, MATS, { 0, 0 } },
	/* CUDA's ranges: a float's last bit apart from the rows in order */
	{ "bias_grad, rows in ranges", check_bias_grad, 1, TALL, { 0, 2.4e-7 } },
	{ "softmax_xent", check_softmax_xent, 3, MATS, { 1e-7, 1e-6 } },
	{ "softmax_xent wide logits", check_softmax_xent, 200, MATS, { 1e-7, 1e-6 } },
	{ "pointwise_loss mse", check_pointwise_loss, DLT_LOSS_MSE, MATS, { 0, 1e-6 } },
	{ "pointwise_loss l1", check_pointwise_loss, DLT_LOSS_L1, MATS, { 0, 1e-6 } },
	{ "pointwise_loss huber", check_pointwise_loss, DLT_LOSS_HUBER, MATS, { 0, 1e-6 } },
	{ "pointwise_loss bce", check_pointwise_loss, DLT_LOSS_BCE, MATS, { 0, 1e-6 } },
	{ "dropout 0.5", check_dropout, 50, MATS, { 0, 0 } },
	{ "dropout 0.1", check_dropout, 10, MATS, { 0, 0 } },
	{ "dropout 0", check_dropout, 0, MATS, { 0, 0 } },
	{ "mul", check_arith, 0, MATS, { 0, 0 } },
	{ "add", check_arith, 1, MATS, { 0, 0 } },
	{ "add in place", check_arith, 2, MATS, { 0, 0 } },
	{ "scale by 2^-16", check_arith, 3, MATS, { 0, 0 } },
	{ "scale by 0.37", check_arith, 4, MATS, { 0, 0 } },
	{ "adam", check_adam, 0, MATS, { 1e-7, 0 } },
	{ "adamw", check_adam, 1, MATS, { 1e-7, 0 } },
	{ "sgd", check_sgd, 0, MATS, { 1e-7, 0 } },
	{ "sgd momentum", check_sgd, 1, MATS, { 1e-7, 0 } },
	{ "sgd momentum first step", check_sgd, 1 + 4, MATS, { 1e-7, 0 } },
	{ "sgd nesterov", check_sgd, 2, MATS, { 1e-7, 0 } },
	{ "sgd nesterov first step", check_sgd, 2 + 4, MATS, { 1e-7, 0 } },
	/* the gradients' last factor as the update reads them: the bits of a
	 * pass of scale first */
	{ "adam, gradients scaled as read", check_update_gscale, 0, MATS, { 0, 0 } },
	{ "adamw, gradients scaled as read", check_update_gscale, 1, MATS, { 0, 0 } },
	{ "sgd momentum, gradients scaled as read", check_update_gscale, 2, MATS, { 0, 0 } },
	{ "sgd, gradients scaled as read", check_update_gscale, 3, MATS, { 0, 0 } },
	{ "round bf16", check_round, DLT_PREC_BF16, MATS, { 0, 0 } },
	{ "round fp16", check_round, DLT_PREC_F16, MATS, { 0, 0 } },
	{ "round fp32", check_round, DLT_PREC_F32, MATS, { 0, 0 } },
	{ "round bf16, special values", check_round, DLT_PREC_BF16 + 16, MATS, { 0, 0 } },
	{ "round fp16, special values", check_round, DLT_PREC_F16 + 16, MATS, { 0, 0 } },
	{ "round fp32, special values", check_round, DLT_PREC_F32 + 16, MATS, { 0, 0 } },
	{ "narrow and widen bf16: exact", check_narrow, DLT_PREC_BF16, MATS, { 0, NO } },
	{ "narrow and widen fp16: exact", check_narrow, DLT_PREC_F16, MATS, { 0, NO } },
	{ "nonfinite, every element", check_nonfinite, 1, MATS, { 0, 0 } },
	{ "nonfinite, every 7th", check_nonfinite, 7, MATS, { 0, 0 } },
	{ "nonfinite, special values", check_nonfinite, 0, MATS, { 0, 0 } },
	{ "sum_squares: DLT_SQUARES_CHUNK's order, bits", check_sum_squares, 0, MATS, { 0, 0 } },
	{ "sum_squares, thousands of chunks", check_sum_squares, 1, TALL, { 0, 0 } },

	{ "layernorm_forward", check_layernorm_forward, 0, SEQS, { 2e-6, 1e-6 } },
	{ "layernorm_forward, mean 100", check_layernorm_forward, 100, SEQS, { 2e-6, 1e-6 } },
	{ "layernorm_backward dx", check_layernorm_backward, 0, SEQS, { 2e-6, 1e-6 } },
	{ "layernorm_backward dgamma dbeta", check_layernorm_backward, 1, SEQS, { 0, 0 } },
	{ "layernorm_backward dgamma dbeta, rows in ranges", check_layernorm_backward, 3,
	  TALL_SEQS, { 0, 2.4e-7 } },
	{ "embedding_forward", check_embedding_forward, 0, SEQS, { 0, 0 } },
	{ "embedding_forward, ids out of range", check_embedding_forward, 1, SEQS, { 0, 0 } },
	{ "embedding_backward", check_embedding_backward, 0, SEQS, { 0, 0 } },
	{ "embedding_backward, ids out of range", check_embedding_backward, 1, SEQS, { 0, 0 } },
	{ "positional_forward", check_positional_forward, 0, SEQS, { 0, 0 } },
	{ "positional_forward in place", check_positional_forward, 1, SEQS, { 0, 0 } },
	{ "positional_backward", check_positional_backward, 0, SEQS, { 0, 0 } },
	{ "attention_forward", check_attention_forward, 0, SEQS, { 1e-5, 1e-5 } },
	{ "attention_forward causal", check_attention_forward, 1, SEQS, { 1e-5, 1e-5 } },
	{ "attention_forward wide", check_attention_forward, 2, SEQS, { 1e-5, 1e-5 } },
	{ "attention_forward causal wide", check_attention_forward, 3, SEQS, { 1e-5, 1e-5 } },
	{ "attention_forward dropout", check_attention_forward, 4, SEQS, { 1e-5, 1e-5 } },
	{ "attention_forward causal dropout", check_attention_forward, 5, SEQS, { 1e-5, 1e-5 } },
	{ "attention_backward", check_attention_backward, 0, SEQS, { 1e-5, 1e-5 } },
	{ "attention_backward causal", check_attention_backward, 1, SEQS, { 1e-5, 1e-5 } },
	{ "attention_backward wide", check_attention_backward, 2, SEQS, { 1e-5, 1e-5 } },
	{ "attention_backward causal wide", check_attention_backward, 3, SEQS, { 1e-5, 1e-5 } },
	{ "attention_backward dropout", check_attention_backward, 4, SEQS, { 1e-5, 1e-5 } },
	{ "attention_backward causal dropout", check_attention_backward, 5, SEQS, { 1e-5, 1e-5 } },
	/* a range of the batches (row0): the bits of the whole call's on the
	 * CPU; on CUDA cuBLAS chooses its kernels by the batch count too (on
	 * an H200 a range of 1 sample of 2 differed in its last bits, of 2 of
	 * 3 or 4 not) */
	{ "attention_backward causal dropout, later batches", check_attention_backward_rows, 5,
	  SEQS, { 0, 1e-5 } },
	{ "attention_backward dropout, later batches", check_attention_backward_rows, 4, SEQS,
	  { 0, 1e-5 } },
	/* bf16 and fp16: q, k, v and dout rounded first; CUDA's products are
	 * of that type and round the softmax's weights (and dS) to it too, a
	 * relative 2^-9 (2^-12) of terms summed over up to 130 keys */
	{ "attention_forward bf16", check_attention_forward, ATTN_BF16, SEQS, { 1e-5, 3e-2 } },
	{ "attention_forward causal wide bf16", check_attention_forward, 3 + ATTN_BF16, SEQS,
	  { 1e-5, 3e-2 } },
	{ "attention_forward causal dropout bf16", check_attention_forward, 5 + ATTN_BF16, SEQS,
	  { 1e-5, 3e-2 } },
	{ "attention_forward causal fp16", check_attention_forward, 1 + ATTN_F16, SEQS,
	  { 1e-5, 1e-2 } },
	{ "attention_backward bf16", check_attention_backward, ATTN_BF16, SEQS, { 1e-5, 3e-2 } },
	{ "attention_backward causal wide bf16", check_attention_backward, 3 + ATTN_BF16, SEQS,
	  { 1e-5, 3e-2 } },
	{ "attention_backward causal dropout bf16", check_attention_backward, 5 + ATTN_BF16, SEQS,
	  { 1e-5, 3e-2 } },
	{ "attention_backward causal fp16", check_attention_backward, 1 + ATTN_F16, SEQS,
	  { 1e-5, 1e-2 } },
	{ "attention_backward causal dropout bf16, later batches", check_attention_backward_rows,
	  5 + ATTN_BF16, SEQS, { 0, 3e-2 } },
	{ "attention_decode, the last query", check_attention_decode, 0, SEQS, { 1e-5, 1e-5 } },
	{ "attention_decode, half the queries", check_attention_decode, 1, SEQS, { 1e-5, 1e-5 } },
	{ "attention_decode, 5 T keys", check_attention_decode, 2, SEQS, { 1e-5, 1e-5 } },

	{ "conv_forward f32", check_conv, 4 * CONV_FORWARD + DLT_PREC_F32, CONVS, { 2e-6, 1e-5 } },
	{ "conv_backward f32", check_conv, 4 * CONV_BACKWARD + DLT_PREC_F32, CONVS, { 2e-6, 1e-5 } },
	{ "conv_forward bf16", check_conv, 4 * CONV_FORWARD + DLT_PREC_BF16, CONVS, { 2e-6, 1e-5 } },
	{ "conv_backward bf16", check_conv, 4 * CONV_BACKWARD + DLT_PREC_BF16, CONVS, { 2e-6, 1e-5 } },
	{ "conv_forward fp16", check_conv, 4 * CONV_FORWARD + DLT_PREC_F16, CONVS, { 2e-6, 1e-5 } },
	{ "conv_backward fp16", check_conv, 4 * CONV_BACKWARD + DLT_PREC_F16, CONVS, { 2e-6, 1e-5 } },
	{ "conv f32: the same bits every run", check_conv, 4 * CONV_REPEAT + DLT_PREC_F32, CONVS,
	  { 0, 0 } },
	{ "conv bf16: the same bits every run", check_conv, 4 * CONV_REPEAT + DLT_PREC_BF16, CONVS,
	  { 0, 0 } },
	{ "conv fp16: the same bits every run", check_conv, 4 * CONV_REPEAT + DLT_PREC_F16, CONVS,
	  { 0, 0 } },
	{ "conv bf16: x and dy flagged exact, the same bits", check_conv,
	  4 * CONV_EXACT + DLT_PREC_BF16, CONVS, { 0, 0 } },
	{ "conv fp16: x and dy flagged exact, the same bits", check_conv,
	  4 * CONV_EXACT + DLT_PREC_F16, CONVS, { 0, 0 } },
	{ "maxpool", check_pool, 0, POOLS, { 0, 0 } },
	{ "maxpool relu", check_pool, POOL_RELU, POOLS, { 0, 0 } },
	{ "maxpool, a NaN", check_pool, POOL_NAN, POOLS, { 0, 0 } },
	{ "maxpool relu, a NaN", check_pool, POOL_RELU | POOL_NAN, POOLS, { 0, 0 } },
	{ "avgpool", check_pool, POOL_AVG, POOLS, { 0, 0 } },
	{ "avgpool, a NaN", check_pool, POOL_AVG | POOL_NAN, POOLS, { 0, 0 } },
	{ "pools: the same bits every run", check_pool, POOL_REPEAT, POOLS, { 0, 0 } },
	{ "pools relu: the same bits every run", check_pool, POOL_REPEAT | POOL_RELU, POOLS,
	  { 0, 0 } },
	{ "batchnorm_train", check_bn, BN_TRAIN, BNS, CPU_ONLY(1e-5) },
	{ "batchnorm_train, over 1 + |mean of x|", check_bn, BN_TRAIN_SCALED, BNS,
	  { 1e-5, 1e-5 } },
	{ "batchnorm_eval", check_bn, BN_EVAL, BNS, CPU_ONLY(1e-5) },
	{ "batchnorm_eval, over 1 + |mean of x|", check_bn, BN_EVAL_SCALED, BNS, { 1e-5, 1e-5 } },
	{ "batchnorm_backward", check_bn, BN_BACKWARD, BNS, CPU_ONLY(1e-5) },
	{ "batchnorm_backward dx, over 1 + |mean of x|", check_bn, BN_DX_SCALED, BNS,
	  { 1e-5, 1e-5 } },
	{ "batchnorm_backward dgamma dbeta, over sqrt(n hw)", check_bn, BN_SUMS_SCALED, BNS,
	  { 1e-5, 1e-5 } },
	{ "batchnorm: the same bits every run", check_bn, BN_REPEAT, BNS, { 0, 0 } },

	/* the host's threads */
	{ "bias_grad: the same bits on 1, 2 and 3 threads", check_threads, T_BIAS_GRAD, ONE,
	  CPU_ONLY(0) },
	{ "softmax_xent: the same bits on 1, 2 and 3 threads", check_threads, T_SOFTMAX_XENT,
	  ONE, CPU_ONLY(0) },
	{ "layernorm_backward: the same bits on 1, 2 and 3 threads", check_threads,
	  T_LAYERNORM_BACKWARD, ONE, CPU_ONLY(0) },
	{ "embedding_backward: the same bits on 1, 2 and 3 threads", check_threads,
	  T_EMBEDDING_BACKWARD, ONE, CPU_ONLY(0) },
	{ "positional_backward: the same bits on 1, 2 and 3 threads", check_threads,
	  T_POSITIONAL_BACKWARD, ONE, CPU_ONLY(0) },
	{ "attention_forward: the same bits on 1, 2 and 3 threads", check_threads,
	  T_ATTENTION_FORWARD, ONE, CPU_ONLY(0) },
	{ "attention_backward: the same bits on 1, 2 and 3 threads", check_threads,
	  T_ATTENTION_BACKWARD, ONE, CPU_ONLY(0) },
};

static int wanted(const row *r, int column, const char *prefix)
{
	return r->tol[column] >= 0 && (!prefix || !strncmp(r->name, prefix, strlen(prefix)));
}

int ops_run(const dlt_backend *be, int column, const char *prefix)
{
	int failed = 0, said = 0;
	ref = dlt_backend_ref();
	threads0 = omp_get_max_threads();
	dlt_rng_init(&rng, 1234, 0);
	for (size_t k = 0; k < N(rows); k++) {
		const row *r = &rows[k];
		double tol = r->tol[column];
		if (!wanted(r, column, prefix))
			continue;
		for (size_t i = 0; i < set_size(r->set); i++) {
			char shape[160];
			double d = r->check(be, i, r->arg);
			say_shape(r->set, i, shape, sizeof(shape));
			if (ok(d <= tol, "%s %s%s%s", be->name, r->name, shape[0] ? " " : "", shape))
				continue;
			failed++;
			diag("worst relative difference %g, tolerance %g", d, tol);
			if (be->error && be->error() && !said++)
				diag("the %s backend has failed: %s (an entry after it may leave its "
				     "outputs unwritten)", be->name, be->error());
		}
	}
	return failed;
}

int ops_list(int column, const char *prefix)
{
	int n = 0;
	for (size_t k = 0; k < N(rows); k++) {
		if (!wanted(&rows[k], column, prefix))
			continue;
		diag("%s: %zu shape%s, tolerance %g", rows[k].name, set_size(rows[k].set),
		     set_size(rows[k].set) > 1 ? "s" : "", rows[k].tol[column]);
		n++;
	}
	return n;
}
