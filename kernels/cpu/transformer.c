/* The transformer's layers on the CPU.  Every sum has a fixed order, so
 * no result depends on the number of threads:
 *  - layer norm: rows in parallel for y and dx; dgamma and dbeta by
 *    blocks of columns, each column summed over rows in order in double
 *    (the reference's order, so its bits);
 *  - embedding backward: each thread owns a range of vocabulary rows and
 *    adds the tokens' gradients to them in token order (the reference's);
 *  - attention (flash attention): tiles of TQ queries by TK keys, the
 *    products of each tile by the GEMM (dlt_cpu_sgemm, on the calling
 *    thread inside the parallel region, with the same bits on any thread),
 *    an online softmax between them.  Forward runs a task per (batch,
 *    head, query tile); backward a task per (batch, head), which owns that
 *    head's columns of dqkv, so dq, dk and dv accumulate without locks.
 * Scratch is on each thread's stack: one TQ x TK tile of scores forward
 * (16 KiB), two backward (32 KiB); the GEMM packs its panels into its own
 * per-thread buffers. */
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "kernels/kernels.h"
#include "kernels/common/math.h"
#include "kernels/cpu/exp_neg.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/transformer.h"
#include "kernels/cpu/transpose8.h"

/* Below this many elements a parallel region costs more than it saves. */
#define PAR_MIN 16384

/* ---- layer norm ---- */

/* One pass for the mean and variance, in double: the float values'
 * squares are exact there, so E[x^2] - mean^2 loses nothing that
 * matters for any mean a float row can have next to its spread. */
__attribute__((target_clones("avx2", "default")))
static void ln_row(const float *x, const float *gamma, const float *beta, float *y,
		   float *mean, float *rstd, int C, float eps)
{
	double s = 0.0, sq = 0.0, mu, var;
	float m, rs;
	#pragma omp simd reduction(+:s, sq)
	for (int c = 0; c < C; c++) {
		s += x[c];
		sq += (double)x[c] * x[c];
	}
	mu = s / C;
	var = sq / C - mu * mu;
	var = var > 0.0 ? var : 0.0;
	m = (float)mu;
	rs = (float)(1.0 / sqrt(var + eps));
	*mean = m;
	*rstd = rs;
	#pragma omp simd
	for (int c = 0; c < C; c++)
		y[c] = (x[c] - m) * rs * gamma[c] + beta[c];
}

void dlt_cpu_layernorm_forward(const float *x, const float *gamma, const float *beta, float *y,
			       float *mean, float *rstd, int rows, int C, float eps)
{
	#pragma omp parallel for schedule(static) if ((size_t)rows * C >= PAR_MIN)
	for (int r = 0; r < rows; r++)
		ln_row(x + (size_t)r * C, gamma, beta, y + (size_t)r * C, mean + r, rstd + r, C,
		       eps);
}

/* dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy gamma */
__attribute__((target_clones("avx2", "default")))
static void ln_back_row(const float *x, const float *dy, const float *gamma, float m, float rs,
			float *dx, int C)
{
	double sg = 0.0, sgx = 0.0;
	float a, b;
	#pragma omp simd reduction(+:sg, sgx)
	for (int c = 0; c < C; c++) {
		float xh = (x[c] - m) * rs, g = dy[c] * gamma[c];
		sg += g;
		sgx += (double)g * xh;
	}
	a = (float)(sg / C);
	b = (float)(sgx / C);
	#pragma omp simd
	for (int c = 0; c < C; c++) {
		float xh = (x[c] - m) * rs, g = dy[c] * gamma[c];
		dx[c] = rs * (g - a - xh * b);
	}
}

/* Columns a block per task, every row in order, the sums in double */
#define LN_COLS 32

__attribute__((target_clones("avx2", "default")))
static void ln_param_block(const float *x, const float *dy, const float *mean, const float *rstd,
			   float *dgamma, float *dbeta, int rows, int C, int c0, int nc)
{
	double sg[LN_COLS] = { 0 }, sb[LN_COLS] = { 0 };
	for (int r = 0; r < rows; r++) {
		const float *xr = x + (size_t)r * C + c0, *dyr = dy + (size_t)r * C + c0;
		float m = mean[r], rs = rstd[r];
		#pragma omp simd
		for (int j = 0; j < nc; j++) {
			float xh = (xr[j] - m) * rs;
			sg[j] += (double)dyr[j] * xh;
			sb[j] += dyr[j];
		}
	}
	for (int j = 0; j < nc; j++) {
		dgamma[c0 + j] += (float)sg[j];
		dbeta[c0 + j] += (float)sb[j];
	}
}

void dlt_cpu_layernorm_backward(const float *x, const float *dy, const float *gamma,
				const float *mean, const float *rstd, float *dx, float *dgamma,
				float *dbeta, int rows, int C)
{
	int blocks = (C + LN_COLS - 1) / LN_COLS;
	int par = (size_t)rows * C >= PAR_MIN;
	#pragma omp parallel if (par)
	{
		#pragma omp for schedule(static) nowait
		for (int r = 0; r < rows; r++)
			ln_back_row(x + (size_t)r * C, dy + (size_t)r * C, gamma, mean[r], rstd[r],
				    dx + (size_t)r * C, C);
		#pragma omp for schedule(static)
		for (int k = 0; k < blocks; k++) {
			int c0 = k * LN_COLS, nc = C - c0 < LN_COLS ? C - c0 : LN_COLS;
			ln_param_block(x, dy, mean, rstd, dgamma, dbeta, rows, C, c0, nc);
		}
	}
}

/* ---- embeddings and positions ---- */

void dlt_cpu_embedding_forward(const int32_t *ids, const float *w, float *out, int n, int C,
			       int V)
{
	#pragma omp parallel for schedule(static) if ((size_t)n * C >= PAR_MIN)
	for (int i = 0; i < n; i++) {
		float *o = out + (size_t)i * C;
		if (ids[i] >= 0 && ids[i] < V)
			memcpy(o, w + (size_t)ids[i] * C, (size_t)C * sizeof(*o));
		else
			for (int c = 0; c < C; c++)
				o[c] = NAN;
	}
}

/* Each thread owns vocabulary rows [V t / nt, V (t + 1) / nt) and scans
 * every token, in order: a row's sum has the reference's order whoever
 * owns it. */
void dlt_cpu_embedding_backward(const int32_t *ids, const float *dout, float *dw, int n, int C,
				int V)
{
	#pragma omp parallel if ((size_t)n * C >= PAR_MIN)
	{
		int nt = omp_get_num_threads(), t = omp_get_thread_num();
		int32_t lo = (int32_t)((long long)V * t / nt);
		int32_t hi = (int32_t)((long long)V * (t + 1) / nt);
		for (int i = 0; i < n; i++) {
			float *d;
			const float *g = dout + (size_t)i * C;
			if (ids[i] < lo || ids[i] >= hi)
				continue;
			d = dw + (size_t)ids[i] * C;
			#pragma omp simd
			for (int c = 0; c < C; c++)
				d[c] += g[c];
		}
	}
}

void dlt_cpu_positional_forward(const float *x, const float *p, float *y, int B, int T, int C)
{
	size_t rows = (size_t)B * T;
	#pragma omp parallel for schedule(static) if (rows * C >= PAR_MIN)
	for (size_t r = 0; r < rows; r++) {
		const float *xr = x + r * C, *pr = p + (r % T) * C;
		float *yr = y + r * C;
		#pragma omp simd
		for (int c = 0; c < C; c++)
			yr[c] = xr[c] + pr[c];
	}
}

void dlt_cpu_positional_backward(const float *dy, float *dp, int B, int T, int C)
{
	#pragma omp parallel for schedule(static) if ((size_t)B * T * C >= PAR_MIN)
	for (int t = 0; t < T; t++) {
		float *d = dp + (size_t)t * C;
		for (int b = 0; b < B; b++) {
			const float *g = dy + ((size_t)b * T + t) * C;
			#pragma omp simd
			for (int c = 0; c < C; c++)
				d[c] += g[c];
		}
	}
}

/* ---- attention ---- */

/* Queries by keys of a tile: 64 x 64 keeps a tile of scores (16 KiB) and
 * the GEMM's panels in L1 and L2 for head sizes up to 128. */
#define TQ 64
#define TK 64

static int min_i(int a, int b)
{
	return a < b ? a : b;
}

/* How many of the tile's nk keys (from j0) query i may see */
static int keys_seen(int i, int j0, int nk, int causal)
{
	int lim = causal ? i - j0 + 1 : nk;
	return lim < 0 ? 0 : lim > nk ? nk : lim;
}

__attribute__((target_clones("avx2", "default")))
static float row_max(const float *s, int n)
{
	float m = -INFINITY;
	#pragma omp simd reduction(max:m)
	for (int c = 0; c < n; c++)
		m = s[c] > m ? s[c] : m;
	return m;
}

/* s[c] = exp(s[c] - m) for c < lim, 0 from lim to nk; returns their sum */
__attribute__((target_clones("avx512f", "avx2", "default")))
static float exp_row(float *s, int lim, int nk, float m)
{
	float sum = 0.0f;
	#pragma omp simd reduction(+:sum)
	for (int c = 0; c < lim; c++) {
		s[c] = exp_neg(s[c] - m);
		sum += s[c];
	}
	for (int c = lim; c < nk; c++)
		s[c] = 0.0f;
	return sum;
}

__attribute__((target_clones("avx2", "default")))
static void scale_row(float *x, int n, float a)
{
	#pragma omp simd
	for (int c = 0; c < n; c++)
		x[c] *= a;
}

__attribute__((target_clones("avx2", "default")))
static void mul_row(float *x, const float *z, int n)
{
	#pragma omp simd
	for (int c = 0; c < n; c++)
		x[c] *= z[c];
}

/* z[c]: the dropout's factor of weight j0 + c of row r, c < n, the
 * Philox blocks drawn once each (dlt_attn_keep's numbers) */
static void keep_row(dlt_attn_dropout drop, size_t r, int T, int j0, int n, float *z)
{
	uint64_t first = ((uint64_t)r + drop.row0) * (uint64_t)T + (uint64_t)j0;
	uint64_t end = first + (uint64_t)n;
	float scale = dlt_dropout_scale(drop.rate);
	for (uint64_t blk = first >> 2; blk <= (end - 1) >> 2; blk++) {
		uint32_t bits[4];
		dlt_philox_block(drop.seed, drop.stream, blk, bits);
		for (uint64_t k = 0, at = blk << 2; k < 4; k++, at++)
			if (at >= first && at < end)
				z[at - first] = dlt_dropout_mask(bits[k], drop.rate, scale);
	}
}

/* The nq rows (TK apart) of a tile of weights from key j0 times their
 * dropout's factors; query i0's row is r0 */
static void drop_tile(dlt_attn_dropout drop, float *s, int nq, int nk, size_t r0, int i0,
		      int j0, int T)
{
	float z[TK];
	for (int r = 0; r < nq; r++) {
		keep_row(drop, r0 + (size_t)(i0 + r), T, j0, nk, z);
		mul_row(s + r * TK, z, nk);
	}
}

/* The online softmax of a tile of nq query rows (flash attention), the
 * same for the GEMM tiles below and the register-blocked ones of
 * attention_simd.h: each row's running maximum m and sum l, and its
 * output o (rows C apart, D values) rescaled when the maximum grows. */
static void online_start(float *m, float *l, float *o, int nq, int C, int D)
{
	for (int r = 0; r < nq; r++) {
		m[r] = -INFINITY;
		l[r] = 0.0f;
		memset(o + (size_t)r * C, 0, (size_t)D * sizeof(*o));
	}
}

/* The scores s (rows TK apart) of keys j0 .. j0 + nk - 1 become their
 * exponentials less the row's maximum, which m, l and o follow; with the
 * row passes given (the register-blocked tiles inline their own). */
static inline __attribute__((always_inline))
void online_tile_with(float *s, float *m, float *l, float *o, int nq, int nk, int i0, int j0,
		      int causal, int C, int D, float (*max_of)(const float *, int),
		      float (*exp_of)(float *, int, int, float), void (*scale)(float *, int, float))
{
	for (int r = 0; r < nq; r++) {
		float *sr = s + r * TK, mx, alpha;
		int lim = keys_seen(i0 + r, j0, nk, causal);
		if (!lim) {
			memset(sr, 0, (size_t)nk * sizeof(*sr));
			continue;
		}
		mx = max_of(sr, lim);
		mx = mx > m[r] ? mx : m[r];
		alpha = mx == m[r] ? 1.0f : expf(m[r] - mx);	/* expf(0) is 1 */
		l[r] = l[r] * alpha + exp_of(sr, lim, nk, mx);
		if (alpha != 1.0f)
			scale(o + (size_t)r * C, D, alpha);
		m[r] = mx;
	}
}

static void online_tile(float *s, float *m, float *l, float *o, int nq, int nk, int i0, int j0,
			int causal, int C, int D)
{
	online_tile_with(s, m, l, o, nq, nk, i0, j0, causal, C, D, row_max, exp_row, scale_row);
}

/* o divided by the running sums; lse the rows' log-sum-exp */
static void online_end(const float *m, const float *l, float *o, float *lse, int nq, int C,
		       int D)
{
	for (int r = 0; r < nq; r++) {
		scale_row(o + (size_t)r * C, D, 1.0f / l[r]);
		lse[r] = m[r] + logf(l[r]);
	}
}

/* One tile of nq queries from i0 of one (batch, head): q, k and v point
 * at row 0 of the head's columns in qkv (rows ld floats apart), o at row
 * i0 of its columns in out (rows C apart), lse at row i0 of its [T].
 * o accumulates the weighted values, rescaled whenever a row's running
 * maximum grows, and is divided by the running sum at the end.  With
 * dropout, the weights times their factors go to o (not to the sums);
 * query 0's row of the mask is r0. */
static void attn_forward_tile(const float *q, const float *k, const float *v, float *o,
			      float *lse, int T, int C, int D, int i0, int nq, int causal,
			      float scale, dlt_attn_dropout drop, size_t r0)
{
	float s[TQ * TK] __attribute__((aligned(64)));
	float m[TQ], l[TQ];
	size_t ld = (size_t)3 * C;
	int kend = causal ? i0 + nq : T;
	online_start(m, l, o, nq, C, D);
	for (int j0 = 0; j0 < kend; j0 += TK) {
		int nk = min_i(TK, kend - j0);
		dlt_cpu_sgemm(DLT_PREC_F32, 0, 1, nq, nk, D, scale, q + i0 * ld, (int)ld,
			      k + j0 * ld, (int)ld, 0.0f, s, TK);
		online_tile(s, m, l, o, nq, nk, i0, j0, causal, C, D);
		if (drop.rate > 0.0f)
			drop_tile(drop, s, nq, nk, r0, i0, j0, T);
		dlt_cpu_sgemm(DLT_PREC_F32, 0, 0, nq, D, nk, 1.0f, s, TK, v + j0 * ld, (int)ld,
			      1.0f, o, C);
	}
	online_end(m, l, o, lse, nq, C, D);
}

__attribute__((target_clones("avx2", "default")))
static float dot_f(const float *a, const float *b, int n)
{
	float s = 0.0f;
	#pragma omp simd reduction(+:s)
	for (int c = 0; c < n; c++)
		s += a[c] * b[c];
	return s;
}

/* dS = P (dP - D_i), in place of dP */
__attribute__((target_clones("avx2", "default")))
static void ds_row(const float *p, float *dp, int n, float di)
{
	#pragma omp simd
	for (int c = 0; c < n; c++)
		dp[c] = p[c] * (dp[c] - di);
}

/* The register-blocked tiles (attention_simd.h), for AVX-512 and for
 * AVX2 with FMA */
#define DLT_EACH_ISA "kernels/cpu/attention_simd.h"
#include "kernels/cpu/each_isa.h"
#undef DLT_EACH_ISA

int dlt_cpu_attention_lanes(int D)
{
	if (D % 16 == 0 && D <= 128 && __builtin_cpu_supports("avx512f"))
		return 16;
	if (D % 8 == 0 && D <= 64 && __builtin_cpu_supports("avx2") &&
	    __builtin_cpu_supports("fma"))
		return 8;
	return 0;
}

/* Each thread's transposed keys and values in backward, grown to the
 * largest need and kept (no allocation once the first step has run);
 * freed when the thread ends. */
static __thread float *tl_kv;
static __thread size_t tl_kv_cap;
static pthread_key_t kv_key;
static pthread_once_t kv_once = PTHREAD_ONCE_INIT;

static void kv_key_init(void)
{
	pthread_key_create(&kv_key, free);
}

static float *kv_buffer(size_t n)
{
	if (n > tl_kv_cap) {
		float *p = aligned_alloc(64, (n * sizeof(float) + 63) & ~(size_t)63);
		if (!p)
			return NULL;
		pthread_once(&kv_once, kv_key_init);
		free(tl_kv);
		tl_kv = p;
		tl_kv_cap = n;
		pthread_setspecific(kv_key, p);
	}
	return tl_kv;
}

/* One (batch, head): q, o and g (dout) at its row 0; dq at row 0 of its
 * columns in dqkv, dk and dv C and 2 C further.  Query tiles outside, key
 * tiles inside: P and dS of a tile, then dv_j += P^T dout_i,
 * dq_i += scale dS k_j, dk_j += scale dS^T q_i, all in this task's
 * columns, in this fixed order.  With dropout's factors Z (query 0's row
 * r0), dS = P (Z dP - D_i) and dv_j += (P Z)^T dout_i. */
static void attn_backward_head(const float *q, const float *o, const float *g,
			       const float *lse, float *dq, int T, int C, int D, int causal,
			       float scale, dlt_attn_dropout drop, size_t r0)
{
	float s[TQ * TK] __attribute__((aligned(64))), dp[TQ * TK] __attribute__((aligned(64)));
	float di[TQ], z[TK];
	size_t ld = (size_t)3 * C;
	const float *k = q + C, *v = q + 2 * C;
	float *dk = dq + C, *dv = dq + 2 * C;
	for (int t = 0; t < T; t++)
		for (int part = 0; part < 3; part++)
			memset(dq + t * ld + (size_t)part * C, 0, (size_t)D * sizeof(*dq));
	for (int i0 = 0; i0 < T; i0 += TQ) {
		int nq = min_i(TQ, T - i0), kend = causal ? i0 + nq : T;
		for (int r = 0; r < nq; r++)
			di[r] = dot_f(g + (size_t)(i0 + r) * C, o + (size_t)(i0 + r) * C, D);
		for (int j0 = 0; j0 < kend; j0 += TK) {
			int nk = min_i(TK, kend - j0);
			dlt_cpu_sgemm(DLT_PREC_F32, 0, 1, nq, nk, D, scale, q + i0 * ld, (int)ld,
				      k + j0 * ld, (int)ld, 0.0f, s, TK);
			for (int r = 0; r < nq; r++)
				exp_row(s + r * TK, keys_seen(i0 + r, j0, nk, causal), nk,
					lse[i0 + r]);
			dlt_cpu_sgemm(DLT_PREC_F32, 0, 1, nq, nk, D, 1.0f, g + (size_t)i0 * C, C,
				      v + j0 * ld, (int)ld, 0.0f, dp, TK);
			for (int r = 0; r < nq; r++) {
				float *sr = s + r * TK, *dpr = dp + r * TK;
				if (drop.rate > 0.0f) {	/* a row's mask drawn once */
					keep_row(drop, r0 + (size_t)(i0 + r), T, j0, nk, z);
					mul_row(dpr, z, nk);
				}
				ds_row(sr, dpr, nk, di[r]);
				if (drop.rate > 0.0f)
					mul_row(sr, z, nk);
			}
			dlt_cpu_sgemm(DLT_PREC_F32, 1, 0, nk, D, nq, 1.0f, s, TK, g + (size_t)i0 * C,
				      C, 1.0f, dv + j0 * ld, (int)ld);
			dlt_cpu_sgemm(DLT_PREC_F32, 0, 0, nq, D, nk, scale, dp, TK, k + j0 * ld,
				      (int)ld, 1.0f, dq + i0 * ld, (int)ld);
			dlt_cpu_sgemm(DLT_PREC_F32, 1, 0, nk, D, nq, scale, dp, TK, q + i0 * ld,
				      (int)ld, 1.0f, dk + j0 * ld, (int)ld);
		}
	}
}

/* The register-blocked tiles have no dropout: with it, the GEMM's tiles.
 * f32 at any prec: the scores are not a GEMM's here, and the 16-bit
 * model's q, k and v are of its type already */
void dlt_cpu_attention_forward(int prec, const float *qkv, float *out, float *lse, int B, int T,
			       int C, int H, int causal, dlt_attn_dropout drop)
{
	int D = C / H, tiles = (T + TQ - 1) / TQ;
	long tasks = (long)B * H * tiles;
	float scale = (float)(1.0 / sqrt(D));
	int lanes = drop.rate > 0.0f ? 0 : dlt_cpu_attention_lanes(D);
	#pragma omp parallel for schedule(dynamic)
	for (long task = 0; task < tasks; task++) {
		int b = (int)(task / ((long)H * tiles)), h = (int)(task / tiles % H);
		int i0 = (int)(task % tiles) * TQ, nq = min_i(TQ, T - i0);
		const float *q = qkv + (size_t)b * T * 3 * C + (size_t)h * D;
		float *o = out + ((size_t)b * T + i0) * C + (size_t)h * D;
		float *l = lse + ((size_t)b * H + h) * T + i0;
		if (lanes == 16)
			attn_forward_tile_avx512(q, q + C, q + 2 * C, o, l, T, C, D, i0, nq, causal,
						 scale);
		else if (lanes == 8)
			attn_forward_tile_avx2(q, q + C, q + 2 * C, o, l, T, C, D, i0, nq, causal,
					       scale);
		else
			attn_forward_tile(q, q + C, q + 2 * C, o, l, T, C, D, i0, nq, causal, scale,
					  drop, ((size_t)b * H + h) * T);
	}
}

void dlt_cpu_attention_backward(int prec, const float *qkv, const float *out, const float *dout,
				const float *lse, float *dqkv, int B, int T, int C, int H,
				int causal, dlt_attn_dropout drop)
{
	int D = C / H, lanes = drop.rate > 0.0f ? 0 : dlt_cpu_attention_lanes(D);
	int tp = (T + TK - 1) / TK * TK;
	float scale = (float)(1.0 / sqrt(D));
	#pragma omp parallel for schedule(dynamic)
	for (int bh = 0; bh < B * H; bh++) {
		int b = bh / H, h = bh % H;
		size_t row = (size_t)b * T, col = (size_t)h * D;
		const float *q = qkv + row * 3 * C + col, *o = out + row * C + col;
		const float *g = dout + row * C + col, *l = lse + (size_t)bh * T;
		float *dq = dqkv + row * 3 * C + col;
		float *kv = lanes ? kv_buffer((size_t)2 * D * tp) : NULL;
		if (kv && lanes == 16)
			attn_backward_head_avx512(q, o, g, l, dq, T, C, D, causal, scale, kv,
						  kv + (size_t)D * tp, tp);
		else if (kv && lanes == 8)
			attn_backward_head_avx2(q, o, g, l, dq, T, C, D, causal, scale, kv,
						kv + (size_t)D * tp, tp);
		else
			attn_backward_head(q, o, g, l, dq, T, C, D, causal, scale, drop,
					   (size_t)bh * T);
	}
}
