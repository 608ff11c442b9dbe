/* The attention's tiles with register-blocked loops of W-lane vectors (gcc
 * vector extensions), for head sizes D that are multiples of W up to
 * 8 W: transformer.c includes this once per instruction set (each_isa.h),
 * with W, SFX (the functions' suffix) and the target set.  Where the generic
 * tiles (transformer.c) call the GEMM, which packs its operands on every
 * call (a third of their time for these small K), these read Q, K, V and
 * dout where they lie; only K (and V in backward) are transposed, once a
 * tile (forward) or once a head (backward), so that a score tile's
 * columns are vectors.
 *
 * Scores s and dP are tiles of TQ x TK (row stride TK); the transposed
 * keys kt (and values vt) D rows of kt_ld floats, zero past the keys.
 * Each output element is summed in a fixed order: the same bits on any
 * number of threads. */

#include "kernels/cpu/vec_begin.h"

/* s[r][c] = alpha sum_d a[r][d] kt[d][c], rows r < nq (a's rows lda
 * apart), columns c < ncol (a multiple of 4 W, within the tile) */
static void FN(tile_scores_)(const float *a, long lda, const float *kt, int kt_ld, int D,
			     int nq, int ncol, float alpha, float *s)
{
	enum { MR = 4, CV = 4 };
	for (int c0 = 0; c0 < ncol; c0 += CV * W) {
		int r = 0;
		for (; r + MR <= nq; r += MR) {
			VT acc[MR][CV];
			UNROLL for (int i = 0; i < MR; i++)
				UNROLL for (int v = 0; v < CV; v++)
					acc[i][v] = SPLAT(0.0f);
			for (int d = 0; d < D; d++) {
				VT b[CV];
				UNROLL for (int v = 0; v < CV; v++)
					b[v] = LD(kt + (long)d * kt_ld + c0 + v * W);
				UNROLL for (int i = 0; i < MR; i++) {
					VT ai = SPLAT(a[(r + i) * lda + d]);
					UNROLL for (int v = 0; v < CV; v++)
						acc[i][v] += ai * b[v];
				}
			}
			UNROLL for (int i = 0; i < MR; i++)
				UNROLL for (int v = 0; v < CV; v++)
					ST(s + (r + i) * TK + c0 + v * W, acc[i][v] * alpha);
		}
		for (; r < nq; r++) {
			VT acc[CV];
			UNROLL for (int v = 0; v < CV; v++)
				acc[v] = SPLAT(0.0f);
			for (int d = 0; d < D; d++) {
				VT ai = SPLAT(a[r * lda + d]);
				UNROLL for (int v = 0; v < CV; v++)
					acc[v] += ai * LD(kt + (long)d * kt_ld + c0 + v * W);
			}
			UNROLL for (int v = 0; v < CV; v++)
				ST(s + r * TK + c0 + v * W, acc[v] * alpha);
		}
	}
}

/* o[r][:] += sum_{j < nk} p[r][j] b[j][:] over D = NV W columns: rows r < nq
 * of p (the tile) and o (rows ldo apart), b's rows ldb apart.  Row r sees
 * the first lim0 + r keys (causal; lim0 >= nk: all): the rest of its p
 * are zeros, which the sums skip (adding them changes no bit). */
static inline __attribute__((always_inline))
void FN(tile_rows_nv_)(const float *p, int nq, int nk, int lim0, const float *b, long ldb,
		       float *o, long ldo, const int NV, const int MR)
{
	int r = 0;
	for (; r + MR <= nq; r += MR) {
		VT acc[8][8];
		int jn = min_i(nk, lim0 + r + MR - 1);
		UNROLL for (int i = 0; i < MR; i++)
			UNROLL for (int v = 0; v < NV; v++)
				acc[i][v] = LD(o + (r + i) * ldo + v * W);
		for (int j = 0; j < jn; j++) {
			VT bj[8];
			UNROLL for (int v = 0; v < NV; v++)
				bj[v] = LD(b + j * ldb + v * W);
			UNROLL for (int i = 0; i < MR; i++) {
				VT pi = SPLAT(p[(r + i) * TK + j]);
				UNROLL for (int v = 0; v < NV; v++)
					acc[i][v] += pi * bj[v];
			}
		}
		UNROLL for (int i = 0; i < MR; i++)
			UNROLL for (int v = 0; v < NV; v++)
				ST(o + (r + i) * ldo + v * W, acc[i][v]);
	}
	for (; r < nq; r++) {
		VT acc[8];
		int jn = min_i(nk, lim0 + r);
		UNROLL for (int v = 0; v < NV; v++)
			acc[v] = LD(o + r * ldo + v * W);
		for (int j = 0; j < jn; j++) {
			VT pj = SPLAT(p[r * TK + j]);
			UNROLL for (int v = 0; v < NV; v++)
				acc[v] += pj * LD(b + j * ldb + v * W);
		}
		UNROLL for (int v = 0; v < NV; v++)
			ST(o + r * ldo + v * W, acc[v]);
	}
}

/* o[j][:] += sum_{r < nq} p[r][j] b[r][:]: the tile transposed, keys j < nk;
 * key j is seen from row j - lim0 + 1 on (tile_rows_nv_) */
static inline __attribute__((always_inline))
void FN(tile_cols_nv_)(const float *p, int nq, int nk, int lim0, const float *b, long ldb,
		       float *o, long ldo, const int NV, const int MR)
{
	int j = 0;
	for (; j + MR <= nk; j += MR) {
		VT acc[8][8];
		UNROLL for (int i = 0; i < MR; i++)
			UNROLL for (int v = 0; v < NV; v++)
				acc[i][v] = LD(o + (j + i) * ldo + v * W);
		for (int r = j - lim0 + 1 > 0 ? j - lim0 + 1 : 0; r < nq; r++) {
			VT br[8];
			UNROLL for (int v = 0; v < NV; v++)
				br[v] = LD(b + r * ldb + v * W);
			UNROLL for (int i = 0; i < MR; i++) {
				VT pi = SPLAT(p[r * TK + j + i]);
				UNROLL for (int v = 0; v < NV; v++)
					acc[i][v] += pi * br[v];
			}
		}
		UNROLL for (int i = 0; i < MR; i++)
			UNROLL for (int v = 0; v < NV; v++)
				ST(o + (j + i) * ldo + v * W, acc[i][v]);
	}
	for (; j < nk; j++) {
		VT acc[8];
		UNROLL for (int v = 0; v < NV; v++)
			acc[v] = LD(o + j * ldo + v * W);
		for (int r = j - lim0 + 1 > 0 ? j - lim0 + 1 : 0; r < nq; r++) {
			VT pr = SPLAT(p[r * TK + j]);
			UNROLL for (int v = 0; v < NV; v++)
				acc[v] += pr * LD(b + r * ldb + v * W);
		}
		UNROLL for (int v = 0; v < NV; v++)
			ST(o + j * ldo + v * W, acc[v]);
	}
}

/* Registers: MR x NV sums, NV of b and a broadcast, within 32 (AVX-512)
 * or 16 (AVX2) */
#if W == 16
#define MR_OF(nv) ((nv) <= 2 ? 8 : (nv) <= 4 ? 4 : 2)
#else
#define MR_OF(nv) ((nv) == 1 ? 8 : (nv) == 2 ? 4 : (nv) <= 4 ? 2 : 1)
#endif
#define NV_CASE(f, nv)                                                                \
	case nv:                                                                      \
		FN(f)(p, nq, nk, lim0, b, ldb, o, ldo, nv, MR_OF(nv));                 \
		break

static void FN(tile_rows_)(const float *p, int nq, int nk, int lim0, const float *b, long ldb,
			   float *o, long ldo, int D)
{
	switch (D / W) {
	NV_CASE(tile_rows_nv_, 1);
	NV_CASE(tile_rows_nv_, 2);
	NV_CASE(tile_rows_nv_, 3);
	NV_CASE(tile_rows_nv_, 4);
	NV_CASE(tile_rows_nv_, 5);
	NV_CASE(tile_rows_nv_, 6);
	NV_CASE(tile_rows_nv_, 7);
	default:
		FN(tile_rows_nv_)(p, nq, nk, lim0, b, ldb, o, ldo, 8, MR_OF(8));
	}
}

static void FN(tile_cols_)(const float *p, int nq, int nk, int lim0, const float *b, long ldb,
			   float *o, long ldo, int D)
{
	switch (D / W) {
	NV_CASE(tile_cols_nv_, 1);
	NV_CASE(tile_cols_nv_, 2);
	NV_CASE(tile_cols_nv_, 3);
	NV_CASE(tile_cols_nv_, 4);
	NV_CASE(tile_cols_nv_, 5);
	NV_CASE(tile_cols_nv_, 6);
	NV_CASE(tile_cols_nv_, 7);
	default:
		FN(tile_cols_nv_)(p, nq, nk, lim0, b, ldb, o, ldo, 8, MR_OF(8));
	}
}

/* kt[d][j] = k[j][d] for keys j < nk (rows ld apart), 0 for j up to pad:
 * blocks of 8 x 8 turned in registers (TRANSPOSE8), where an element a
 * load and a store had it at two cycles, a tenth of a GPT step's
 * attention. */
static void FN(transpose_)(const float *k, long ld, int nk, int pad, int D, float *kt, int kt_ld)
{
	int j = 0;
	for (; j + 8 <= nk; j += 8)
		for (int d = 0; d + 8 <= D; d += 8) {	/* D is a multiple of W */
			__m256 v[8];
			UNROLL for (int i = 0; i < 8; i++)
				v[i] = _mm256_loadu_ps(k + (j + i) * ld + d);
			TRANSPOSE8(v);
			UNROLL for (int i = 0; i < 8; i++)
				_mm256_storeu_ps(kt + (long)(d + i) * kt_ld + j, v[i]);
		}
	for (int d = 0; d < D; d++) {
		float *row = kt + (long)d * kt_ld;
		for (int jj = j; jj < nk; jj++)
			row[jj] = k[jj * ld + d];
		for (int jj = nk; jj < pad; jj++)
			row[jj] = 0.0f;
	}
}

/* The softmax's row passes, here so that each is a loop of W-lane vectors
 * inside the tile's function: as calls of target_clones functions a row
 * (64 scores) at a time, their entry and horizontal sums cost as much as
 * their work, and took 40 % of the forward. */

typedef int FN(vi_) __attribute__((vector_size(W * 4)));
#define VI FN(vi_)
#if W == 16
#define IOTA ((VI){ 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 })
#else
#define IOTA ((VI){ 0, 1, 2, 3, 4, 5, 6, 7 })
#endif

/* The largest and the sum of a vector's lanes, in registers (a loop over
 * the lanes goes through memory, and stalls on the store) */
static inline float FN(hmax_)(VT v)
{
#if W == 16
	return _mm512_reduce_max_ps((__m512)v);
#else
	__m128 h = _mm_max_ps(_mm256_castps256_ps128((__m256)v),
			      _mm256_extractf128_ps((__m256)v, 1));
	h = _mm_max_ps(h, _mm_movehl_ps(h, h));
	return _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
#endif
}

static inline float FN(hsum_)(VT v)
{
#if W == 16
	return _mm512_reduce_add_ps((__m512)v);
#else
	__m128 h = _mm_add_ps(_mm256_castps256_ps128((__m256)v),
			      _mm256_extractf128_ps((__m256)v, 1));
	h = _mm_add_ps(h, _mm_movehl_ps(h, h));
	return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
#endif
}

/* exp_neg (exp_neg.h) of W lanes, operation for operation, and 0 where
 * keep is 0 (lanes past a row's keys: whatever they hold, even a NaN);
 * a NaN score stays a NaN, as there */
static inline VT FN(exp_neg_v_)(VT x, VI keep)
{
	VT n = (x * SPLAT(1.44269504088896341f) + SPLAT(12582912.0f)) - SPLAT(12582912.0f);
	VT f = x - n * SPLAT(0.693145751953125f) - n * SPLAT(1.428606765330187e-06f);
	VT p = SPLAT(1.0f / 720.0f);
	VI bits;
	p = p * f + SPLAT(1.0f / 120.0f);
	p = p * f + SPLAT(1.0f / 24.0f);
	p = p * f + SPLAT(1.0f / 6.0f);
	p = p * f + SPLAT(0.5f);
	p = p * f + SPLAT(1.0f);
	p = p * f + SPLAT(1.0f);
	n = VMAX(n, SPLAT(-126.0f));
	bits = (__builtin_convertvector(n, VI) + 127) << 23;
	return (VT)((VI)(p * (VT)bits) & ~(x < SPLAT(-87.0f)) & keep);
}

/* The largest of s[0, n), n within the tile's row */
static inline float FN(row_max_)(const float *s, int n)
{
	VT vm = SPLAT(-INFINITY);
	for (int c = 0; c < n; c += W) {
		VI in = IOTA + c;
		vm = VMAX(vm, (VT)(((VI)LD(s + c) & (in < n)) | ((VI)SPLAT(-INFINITY) & (in >= n))));
	}
	return FN(hmax_)(vm);
}

/* s[c] = exp(s[c] - m) for c < lim, 0 from lim to nk (whole vectors:
 * within the tile's row, TK a multiple of W); returns their sum */
static inline float FN(exp_row_)(float *s, int lim, int nk, float m)
{
	VT sum = SPLAT(0.0f);
	for (int c = 0; c < nk; c += W) {
		VI in = IOTA + c;
		VT e;
		e = FN(exp_neg_v_)(LD(s + c) - SPLAT(m), in < lim);
		ST(s + c, e);
		sum += e;
	}
	return FN(hsum_)(sum);
}

/* x[0, D) *= a, D a multiple of W */
static inline void FN(scale_row_)(float *x, int D, float a)
{
	for (int c = 0; c < D; c += W)
		ST(x + c, LD(x + c) * SPLAT(a));
}

/* online_tile (transformer.c) with these passes */
static void FN(online_tile_)(float *s, float *m, float *l, float *o, int nq, int nk, int i0,
			     int j0, int causal, int C, int D)
{
	online_tile_with(s, m, l, o, nq, nk, i0, j0, causal, C, D, FN(row_max_), FN(exp_row_),
			 FN(scale_row_));
}

/* attn_forward_tile's work (transformer.c), the products on these tiles */
static void FN(attn_forward_tile_)(const float *q, const float *k, const float *v, float *o,
				   float *lse, int T, int C, int D, int i0, int nq, int causal,
				   float scale)
{
	float s[TQ * TK] __attribute__((aligned(64)));
	float kt[TK * 8 * W] __attribute__((aligned(64)));
	float m[TQ], l[TQ];
	long ld = 3L * C;
	int kend = causal ? i0 + nq : T;
	(void)T;
	online_start(m, l, o, nq, C, D);
	for (int j0 = 0; j0 < kend; j0 += TK) {
		int nk = min_i(TK, kend - j0), ncol = (nk + 4 * W - 1) / (4 * W) * (4 * W);
		FN(transpose_)(k + j0 * ld, ld, nk, ncol, D, kt, TK);
		FN(tile_scores_)(q + i0 * ld, ld, kt, TK, D, nq, ncol, scale, s);
		FN(online_tile_)(s, m, l, o, nq, nk, i0, j0, causal, C, D);
		FN(tile_rows_)(s, nq, nk, causal ? i0 - j0 + 1 : nk, v + j0 * ld, ld, o, C, D);
	}
	online_end(m, l, o, lse, nq, C, D);
}

/* attn_backward_head's work (transformer.c) on these tiles; kt and vt:
 * the head's keys and values transposed, D rows of tp floats each */
static void FN(attn_backward_head_)(const float *q, const float *o, const float *g,
				    const float *lse, float *dq, int T, int C, int D, int causal,
				    float scale, float *kt, float *vt, int tp)
{
	float s[TQ * TK] __attribute__((aligned(64))), dp[TQ * TK] __attribute__((aligned(64)));
	float di[TQ];
	long ld = 3L * C;
	const float *k = q + C, *v = q + 2 * C;
	float *dk = dq + C, *dv = dq + 2 * C;
	FN(transpose_)(k, ld, T, tp, D, kt, tp);
	FN(transpose_)(v, ld, T, tp, D, vt, tp);
	for (int t = 0; t < T; t++)
		for (int part = 0; part < 3; part++)
			memset(dq + t * ld + (long)part * C, 0, (size_t)D * sizeof(*dq));
	for (int i0 = 0; i0 < T; i0 += TQ) {
		int nq = min_i(TQ, T - i0), kend = causal ? i0 + nq : T;
		for (int r = 0; r < nq; r++) {
			const float *gr = g + (long)(i0 + r) * C, *orow = o + (long)(i0 + r) * C;
			VT acc = SPLAT(0.0f);
			for (int c = 0; c < D; c += W)
				acc += LD(gr + c) * LD(orow + c);
			di[r] = FN(hsum_)(acc);
		}
		for (int j0 = 0; j0 < kend; j0 += TK) {
			int nk = min_i(TK, kend - j0), ncol = (nk + 4 * W - 1) / (4 * W) * (4 * W);
			int lim0 = causal ? i0 - j0 + 1 : nk;
			FN(tile_scores_)(q + i0 * ld, ld, kt + j0, tp, D, nq, ncol, scale, s);
			for (int r = 0; r < nq; r++)
				FN(exp_row_)(s + r * TK, keys_seen(i0 + r, j0, nk, causal), nk,
					     lse[i0 + r]);
			FN(tile_scores_)(g + (long)i0 * C, C, vt + j0, tp, D, nq, ncol, 1.0f, dp);
			/* dS, scaled: what dq and dk take */
			for (int r = 0; r < nq; r++) {
				const float *pr = s + r * TK;
				float *dr = dp + r * TK;
				#pragma omp simd
				for (int c = 0; c < nk; c++)
					dr[c] = scale * (pr[c] * (dr[c] - di[r]));
			}
			FN(tile_cols_)(s, nq, nk, lim0, g + (long)i0 * C, C, dv + j0 * ld, ld, D);
			FN(tile_rows_)(dp, nq, nk, lim0, k + j0 * ld, ld, dq + i0 * ld, ld, D);
			FN(tile_cols_)(dp, nq, nk, lim0, q + i0 * ld, ld, dk + j0 * ld, ld, D);
		}
	}
}

#undef IOTA
#undef VI
#undef NV_CASE
#undef MR_OF
#include "kernels/cpu/vec_end.h"
