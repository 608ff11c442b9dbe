/* The fast CPU backend: dlt's GEMM (gemm.c), OpenMP over rows or chunks for
 * the rest, loops simple enough for the compiler to vectorise.  They say
 * `omp simd` because gcc -O2 only vectorises loops it is told are worth it.
 * Our reductions have a fixed order, independent of the thread count
 * (so is the GEMM's: every element of C is summed in one order). */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include <omp.h>

#include "kernels/kernels.h"
#include "kernels/common/math.h"
#include "kernels/cpu/decode.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/layers.h"
#include "kernels/cpu/threads.h"
#include "kernels/cpu/transformer.h"

/* Below this many elements a parallel region costs more than it saves. */
#define PAR_MIN 16384
/* Element-wise work is cut into chunks of this many floats. */
#define CHUNK 4096

static size_t min_sz(size_t a, size_t b)
{
	return a < b ? a : b;
}

/* GELU tanh (kernels/common/math.h's dlt_gelu_tanh, dlt_gelu_tanh_backward
 * and the dlt_tanhf in both) with the same operations in the same order,
 * 8 or 16 lanes at a time: the same bits (gelu_simd.h). */
#define DLT_EACH_ISA "kernels/cpu/gelu_simd.h"
#include "kernels/cpu/each_isa.h"
#undef DLT_EACH_ISA

static int avx2_fma(void)
{
	return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

static void gelu_tanh_span(const float *x, float *y, size_t n)
{
	size_t i = __builtin_cpu_supports("avx512f") ? gelu_tanh_avx512(x, y, n)
		 : avx2_fma() ? gelu_tanh_avx2(x, y, n) : 0;
	for (; i < n; i++)
		y[i] = dlt_gelu_tanh(x[i]);
}

static void gelu_tanh_grad_span(const float *x, const float *dy, float *dx, size_t n)
{
	size_t i = __builtin_cpu_supports("avx512f") ? gelu_tanh_grad_avx512(x, dy, dx, n)
		 : avx2_fma() ? gelu_tanh_grad_avx2(x, dy, dx, n) : 0;
	for (; i < n; i++)
		dx[i] = dlt_gelu_tanh_backward(x[i], dy[i]);
}

/* One loop per activation, the switch outside: the loops that need no
 * libm call (relu, leaky_relu) vectorise.  The element-wise loops come in
 * an AVX2 clone too, chosen at load time from cpuid; neither uses FMA, so
 * both give the same bits. */
__attribute__((target_clones("avx2", "default")))
static void act_span(const float *x, float *y, size_t n, int act, float slope)
{
	size_t i;
	switch (act) {
	case DLT_ACT_RELU:
		#pragma omp simd
		for (i = 0; i < n; i++)
			y[i] = dlt_relu(x[i]);
		break;
	case DLT_ACT_LEAKY_RELU:
		#pragma omp simd
		for (i = 0; i < n; i++)
			y[i] = dlt_leaky_relu(x[i], slope);
		break;
	case DLT_ACT_GELU:
		for (i = 0; i < n; i++)
			y[i] = dlt_gelu(x[i]);
		break;
	case DLT_ACT_TANH:
		for (i = 0; i < n; i++)
			y[i] = dlt_tanh(x[i]);
		break;
	case DLT_ACT_SIGMOID:
		for (i = 0; i < n; i++)
			y[i] = dlt_sigmoid(x[i]);
		break;
	case DLT_ACT_GELU_TANH:
		gelu_tanh_span(x, y, n);
		break;
	default:
		if (x != y)
			memmove(y, x, n * sizeof(*y));
	}
}

static void cpu_act_forward(const float *x, float *y, size_t n, int act, float slope)
{
	#pragma omp parallel for schedule(dynamic) if (n >= PAR_MIN)
	for (size_t i = 0; i < n; i += CHUNK)
		act_span(x + i, y + i, min_sz(CHUNK, n - i), act, slope);
}

__attribute__((target_clones("avx2", "default")))
static void bias_act_row(float *y, const float *bias, int cols, int act, float slope)
{
	int c;
	switch (act) {
	case DLT_ACT_RELU:
		#pragma omp simd
		for (c = 0; c < cols; c++)
			y[c] = dlt_relu(y[c] + bias[c]);
		break;
	case DLT_ACT_LEAKY_RELU:
		#pragma omp simd
		for (c = 0; c < cols; c++)
			y[c] = dlt_leaky_relu(y[c] + bias[c], slope);
		break;
	default:
		#pragma omp simd
		for (c = 0; c < cols; c++)
			y[c] += bias[c];
		act_span(y, y, cols, act, slope);
	}
}

/* each chunk or row rounded as soon as it is done, while in L1 (f32: not
 * at all) */
static void cpu_bias_act(float *y, const float *bias, int rows, int cols, int act, float slope,
			 int prec)
{
	size_t n = (size_t)rows * cols;
	if (!bias) {
		#pragma omp parallel for schedule(dynamic) if (n >= PAR_MIN)
		for (size_t i = 0; i < n; i += CHUNK) {
			act_span(y + i, y + i, min_sz(CHUNK, n - i), act, slope);
			if (prec != DLT_PREC_F32)
				dlt_cpu_round_to(y + i, y + i, min_sz(CHUNK, n - i), prec);
		}
		return;
	}
	#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
	for (int r = 0; r < rows; r++) {
		bias_act_row(y + (size_t)r * cols, bias, cols, act, slope);
		if (prec != DLT_PREC_F32)
			dlt_cpu_round_to(y + (size_t)r * cols, y + (size_t)r * cols, (size_t)cols,
					 prec);
	}
}

__attribute__((target_clones("avx2", "default")))
static void act_grad_span(const float *x, const float *y, const float *dy, float *dx,
			  size_t n, int act, float slope)
{
	size_t i;
	switch (act) {
	case DLT_ACT_RELU:
		#pragma omp simd
		for (i = 0; i < n; i++)
			dx[i] = dlt_relu_backward(x[i], dy[i]);
		break;
	case DLT_ACT_LEAKY_RELU:
		#pragma omp simd
		for (i = 0; i < n; i++)
			dx[i] = dlt_leaky_relu_backward(x[i], dy[i], slope);
		break;
	case DLT_ACT_GELU:
		for (i = 0; i < n; i++)
			dx[i] = dlt_gelu_backward(x[i], dy[i]);
		break;
	case DLT_ACT_TANH:
		#pragma omp simd
		for (i = 0; i < n; i++)
			dx[i] = dlt_tanh_backward(y[i], dy[i]);
		break;
	case DLT_ACT_SIGMOID:
		#pragma omp simd
		for (i = 0; i < n; i++)
			dx[i] = dlt_sigmoid_backward(y[i], dy[i]);
		break;
	case DLT_ACT_GELU_TANH:
		gelu_tanh_grad_span(x, dy, dx, n);
		break;
	default:
		if (dx != dy)
			memmove(dx, dy, n * sizeof(*dx));
	}
}

static void cpu_act_backward(const float *x, const float *y, const float *dy, float *dx,
			     size_t n, int act, float slope)
{
	#pragma omp parallel for schedule(dynamic) if (n >= PAR_MIN)
	for (size_t i = 0; i < n; i += CHUNK)
		act_grad_span(x + i, y + i, dy + i, dx + i, min_sz(CHUNK, n - i), act, slope);
}

/* Columns are cut into blocks, one block per task, and each column is
 * summed over rows in order, in double: the reference's order exactly,
 * whatever the number of threads.  A block is as wide as the threads
 * allow, up to COLS_BLOCK: each row's part is then one long run of
 * memory (blocks of 64 read 256 bytes a row, and the bias gradients took
 * 1.5 % of a GPT step). */
#define COLS_BLOCK 512

__attribute__((target_clones("avx512f", "avx2", "default")))
static void bias_grad_block(const float *dy, float *db, int rows, int cols, int c0, int nc)
{
	double acc[COLS_BLOCK] = { 0 };
	for (int r = 0; r < rows; r++) {
		const float *row = dy + (size_t)r * cols + c0;
		#pragma omp simd
		for (int j = 0; j < nc; j++)
			acc[j] += row[j];
	}
	#pragma omp simd
	for (int j = 0; j < nc; j++)
		db[c0 + j] = (float)acc[j];
}

static void cpu_bias_grad(const float *dy, float *db, int rows, int cols)
{
	int par = (size_t)rows * cols >= PAR_MIN, threads = par ? omp_get_max_threads() : 1;
	int width = (cols + threads - 1) / threads, blocks;
	width = width < 64 ? 64 : width > COLS_BLOCK ? COLS_BLOCK : (width + 15) / 16 * 16;
	blocks = (cols + width - 1) / width;
	#pragma omp parallel for schedule(static) if (par && blocks > 1)
	for (int b = 0; b < blocks; b++) {
		int c0 = b * width;
		int nc = cols - c0 < width ? cols - c0 : width;
		bias_grad_block(dy, db, rows, cols, c0, nc);
	}
}

/* Rows in parallel, a chunk at a time, their losses summed afterwards in
 * row order (as the reference does) so the total never depends on how
 * rows were shared among threads. */
#define XENT_ROWS 1024

static void cpu_softmax_xent(const float *logits, const int32_t *labels, int rows, int cols,
			     float *dlogits, double *loss_sum, int *correct)
{
	double row_loss[XENT_ROWS], loss = 0.0;
	int hits = 0;
	float scale = 1.0f / rows;
	for (int r0 = 0; r0 < rows; r0 += XENT_ROWS) {
		int nr = rows - r0 < XENT_ROWS ? rows - r0 : XENT_ROWS;
		#pragma omp parallel for schedule(static) reduction(+:hits) \
			if ((size_t)nr * cols >= PAR_MIN)
		for (int k = 0; k < nr; k++) {
			size_t off = (size_t)(r0 + k) * cols;
			int am;
			row_loss[k] = dlt_softmax_xent_row(logits + off, cols, labels[r0 + k],
							   scale, dlogits + off, &am);
			hits += am == labels[r0 + k];
		}
		for (int k = 0; k < nr; k++)
			loss += row_loss[k];
	}
	*loss_sum = loss;
	*correct = hits;
}

static double pointwise_row(int kind, float delta, const float *y, const float *t, int cols,
			    float scale, float *dy)
{
	double s = 0.0;
	for (int j = 0; j < cols; j++)
		s += dlt_pointwise_loss(kind, delta, y[j], t[j], scale, dy + j);
	return s;
}

/* As softmax_xent: rows in parallel, their sums added in row order. */
static void cpu_pointwise_loss(int kind, float delta, const float *y, const float *t, int rows,
			       int cols, float *dy, double *loss_sum)
{
	double row_loss[XENT_ROWS], loss = 0.0;
	float scale = (float)(1.0 / ((double)rows * cols));
	for (int r0 = 0; r0 < rows; r0 += XENT_ROWS) {
		int nr = rows - r0 < XENT_ROWS ? rows - r0 : XENT_ROWS;
		#pragma omp parallel for schedule(static) if ((size_t)nr * cols >= PAR_MIN)
		for (int k = 0; k < nr; k++) {
			size_t off = (size_t)(r0 + k) * cols;
			row_loss[k] = pointwise_row(kind, delta, y + off, t + off, cols, scale,
						    dy + off);
		}
		for (int k = 0; k < nr; k++)
			loss += row_loss[k];
	}
	*loss_sum = loss;
}

/* One Philox block gives the mask of four consecutive elements. */
static void cpu_dropout(const float *x, float *y, float *mask, size_t n, float rate,
			uint64_t seed, uint64_t stream)
{
	float scale = dlt_dropout_scale(rate);
	size_t blocks = (n + 3) / 4;
	#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
	for (size_t b = 0; b < blocks; b++) {
		uint32_t bits[4];
		size_t i0 = b * 4, m = min_sz(4, n - i0);
		dlt_philox_block(seed, stream, b, bits);
		for (size_t j = 0; j < m; j++) {
			mask[i0 + j] = dlt_dropout_mask(bits[j], rate, scale);
			y[i0 + j] = x[i0 + j] * mask[i0 + j];
		}
	}
}

static void cpu_mul(const float *a, const float *b, float *y, size_t n)
{
	#pragma omp parallel for simd schedule(static) if (n >= PAR_MIN)
	for (size_t i = 0; i < n; i++)
		y[i] = a[i] * b[i];
}

/* AVX-512 or AVX2 where the CPU has it, without FMA (no contraction:
 * AVX-512 brings FMA with it): the same operations, the same bits as the
 * SSE2 clone */
__attribute__((target_clones("avx512f", "avx2", "default"), optimize("fp-contract=off")))
static void adam_span(float *w, const float *g, float *m, float *v, size_t n, dlt_adam_step s)
{
	#pragma omp simd
	for (size_t i = 0; i < n; i++)
		dlt_adam_update(&w[i], g[i], &m[i], &v[i], s);
}

/* Vectorises only under -fno-math-errno: otherwise sqrtf keeps a branch
 * to set errno (never taken, v >= 0), and the update runs 4x slower. */
static void cpu_adam(float *w, const float *g, float *m, float *v, size_t n, float lr,
		     float beta1, float beta2, float eps, float wd, int decoupled,
		     long long step, float gscale)
{
	dlt_adam_step s = dlt_adam_prepare(lr, beta1, beta2, eps, wd, decoupled, step, gscale);
	#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
	for (size_t i = 0; i < n; i += CHUNK)
		adam_span(w + i, g + i, m + i, v + i, min_sz(CHUNK, n - i), s);
}

static void sgd_plain(float *w, const float *g, size_t n, float lr, float wd, float gscale)
{
	#pragma omp parallel for simd schedule(static) if (n >= PAR_MIN)
	for (size_t i = 0; i < n; i++)
		dlt_sgd_update(&w[i], g[i] * gscale, lr, wd);
}

static void cpu_sgd(float *w, const float *g, float *buf, size_t n, float lr, float momentum,
		    int nesterov, float wd, int first, float gscale)
{
	if (momentum == 0.0f || !buf) {
		sgd_plain(w, g, n, lr, wd, gscale);
		return;
	}
	#pragma omp parallel for simd schedule(static) if (n >= PAR_MIN)
	for (size_t i = 0; i < n; i++)
		dlt_sgd_momentum_update(&w[i], g[i] * gscale, &buf[i], lr, momentum, nesterov, wd,
					first);
}

static void cpu_scale(float *x, size_t n, float s)
{
	#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
	for (size_t i = 0; i < n; i++)
		x[i] *= s;
}

void dlt_cpu_round(const float *x, float *y, size_t n, int prec)
{
	#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
	for (size_t i = 0; i < n; i += CHUNK)
		dlt_cpu_round_to(x + i, y + i, min_sz(CHUNK, n - i), prec);
}

static void cpu_round(float *x, size_t n, int prec)
{
	dlt_cpu_round(x, x, n, prec);
}

static void cpu_narrow(const float *x, uint16_t *y, size_t n, int prec)
{
	#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
	for (size_t i = 0; i < n; i += CHUNK)
		dlt_cpu_narrow_to(x + i, y + i, min_sz(CHUNK, n - i), prec);
}

static void cpu_widen(const uint16_t *x, float *y, size_t n, int prec)
{
	#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
	for (size_t i = 0; i < n; i += CHUNK)
		dlt_cpu_widen_to(x + i, y + i, min_sz(CHUNK, n - i), prec);
}

/* inf and NaN: the exponent's bits all set (an integer test, which
 * vectorises where isfinite did not) */
__attribute__((target_clones("avx512f", "avx2", "default")))
static unsigned nonfinite_span(const float *x, size_t n)
{
	unsigned bad = 0;
	#pragma omp simd reduction(+:bad)
	for (size_t i = 0; i < n; i++)
		bad += (dlt_f32_bits(x[i]) & 0x7f800000u) == 0x7f800000u;
	return bad;
}

static size_t cpu_nonfinite(const float *x, size_t n)
{
	size_t bad = 0;
	#pragma omp parallel for schedule(static) reduction(+:bad) if (n >= PAR_MIN)
	for (size_t i = 0; i < n; i += CHUNK)
		bad += nonfinite_span(x + i, min_sz(CHUNK, n - i));
	return bad;
}

/* One chunk of n <= DLT_SQUARES_CHUNK floats in its 8 lanes: eight
 * running sums, a vector of doubles on the wide clones, whose bits are
 * the same (the squares are exact) */
__attribute__((target_clones("avx512f", "avx2", "default")))
static double squares_chunk(const float *x, size_t n)
{
	double s[8] = { 0 };
	size_t i = 0;
	for (; i + 8 <= n; i += 8)
		for (int k = 0; k < 8; k++)
			s[k] += (double)x[i + k] * x[i + k];
	for (int k = 0; i + k < n; k++)
		s[k] += (double)x[i + k] * x[i + k];
	return dlt_squares_lanes(s);
}

static double cpu_sum_squares(const float *x, size_t n)
{
	enum { ROUND = 256 };	/* chunks a parallel round: a megafloat */
	size_t chunks = (n + DLT_SQUARES_CHUNK - 1) / DLT_SQUARES_CHUNK;
	double sums[ROUND], total = 0;
	for (size_t c0 = 0; c0 < chunks; c0 += ROUND) {
		int k = (int)min_sz(ROUND, chunks - c0);
		#pragma omp parallel for schedule(static) if (k >= 8)
		for (int c = 0; c < k; c++) {
			size_t at = (c0 + (size_t)c) * DLT_SQUARES_CHUNK;
			sums[c] = squares_chunk(x + at, min_sz(DLT_SQUARES_CHUNK, n - at));
		}
		for (int c = 0; c < k; c++)
			total += sums[c];
	}
	return total;
}

static const dlt_backend cpu_backend = {
	.name = "cpu",
	.host = 1,
	.alloc = dlt_host_alloc,
	.free = dlt_host_free,
	.upload = dlt_host_copy,
	.download = dlt_host_copy,
	.copy = dlt_host_copy,
	.zero = dlt_host_zero,
	.host_alloc = dlt_host_alloc,
	.host_free = dlt_host_free,
	.upload_async = dlt_host_copy,
	.gemm = dlt_cpu_gemm_weights,
	.bias_act = cpu_bias_act,
	.act_forward = cpu_act_forward,
	.act_backward = cpu_act_backward,
	.bias_grad = cpu_bias_grad,
	.softmax_xent = cpu_softmax_xent,
	.pointwise_loss = cpu_pointwise_loss,
	.dropout = cpu_dropout,
	.mul = cpu_mul,
	.adam = cpu_adam,
	.sgd = cpu_sgd,
	.conv_workspace = dlt_cpu_conv_workspace,
	.conv_forward = dlt_cpu_conv_forward,
	.conv_backward = dlt_cpu_conv_backward,
	.conv_pool_fuses = dlt_cpu_conv_pool_fuses,
	.conv_pool_forward = dlt_cpu_conv_pool_forward,
	.conv_pool_backward = dlt_cpu_conv_pool_backward,
	.maxpool_forward = dlt_cpu_maxpool_forward,
	.maxpool_backward = dlt_cpu_maxpool_backward,
	.avgpool_forward = dlt_cpu_avgpool_forward,
	.avgpool_backward = dlt_cpu_avgpool_backward,
	.batchnorm_train = dlt_cpu_batchnorm_train,
	.batchnorm_eval = dlt_cpu_batchnorm_eval,
	.batchnorm_backward = dlt_cpu_batchnorm_backward,
	.add = dlt_cpu_add,
	.scale = cpu_scale,
	.round = cpu_round,
	.narrow = cpu_narrow,
	.widen = cpu_widen,
	.nonfinite = cpu_nonfinite,
	.sum_squares = cpu_sum_squares,
	.layernorm_forward = dlt_cpu_layernorm_forward,
	.layernorm_backward = dlt_cpu_layernorm_backward,
	.embedding_forward = dlt_cpu_embedding_forward,
	.embedding_backward = dlt_cpu_embedding_backward,
	.positional_forward = dlt_cpu_positional_forward,
	.positional_backward = dlt_cpu_positional_backward,
	.attention_forward = dlt_cpu_attention_forward,
	.attention_backward = dlt_cpu_attention_backward,
	.attention_decode = dlt_cpu_attention_decode,
	.set_threads = dlt_cpu_set_threads,
	.gemm_name = dlt_cpu_gemm_prec_name,
	.hold_weights = dlt_cpu_hold_weights,
};

const dlt_backend *dlt_backend_cpu(void)
{
	return &cpu_backend;
}
