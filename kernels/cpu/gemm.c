/* The CPU GEMM (gemm.h), structured as GotoBLAS and BLIS are: C is cut
 * into NC-column slabs; for each KC-deep slice of K the slab's rows of
 * op(B) are packed into NR-wide panels, and for each MC-row block of C the
 * block's op(A) into MR-tall panels (transposes are undone while packing,
 * so one micro-kernel serves all four cases); a register-blocked
 * micro-kernel then computes MR x NR tiles of C from one A panel and one
 * B panel with fused multiply-adds.  A B panel (KC x NR) stays in L1 while
 * the A panels of a block (MC x KC) stream from L2.
 *
 * Every element of C gets the same operations in the same order, whatever
 * the kernel, tile or thread: acc = fma(a[k], b[k], acc) from k = 0 up
 * within each KC slice, then C = fma(alpha, acc, prev), prev being beta * C
 * (or 0 when beta is 0, so a C of NaN is never read) for the first slice
 * and C after.  So the scalar, AVX2 and AVX-512 kernels give the same bits,
 * and so do 1 and 64 threads: threads share out blocks of C, never K.
 *
 * The SIMD kernels are compiled for their instruction sets with target
 * attributes, the rest of the build staying generic x86-64, and one is
 * chosen at the first call from cpuid. */
#include <cpuid.h>
#include <cblas.h>
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/common/math.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/transpose8.h"

/* KC x NR of B (18 KiB for AVX2, 36 KiB for AVX-512) fits L1 next to an A
 * panel (Zen 3's 32 KiB, Zen 4/5's 32/48); MC x KC of A (162 KiB) fits L2;
 * NC bounds a thread's B buffer (3.4 MiB).  KC is the same for every
 * kernel: it fixes the summation order.  288 is one slice for the CNN's
 * K = 288, and measured as good as 256 and 320 elsewhere. */
#define KC 288
#define MC 144
#define NC 3072

/* Below this many multiply-adds one thread beats a parallel region; and
 * below 4 times as many too, unless B is larger than L2 holds (bytes):
 * then the threads' caches share its stream, as in generation's rows at
 * batch 1, where else a region's start and end outlast the products (a
 * tiny GPT's batch 8 generated 1.5x slower on 2 threads than on 1). */
#define PAR_MIN_FMA (1 << 18)
#define PAR_MIN_B_BYTES (1 << 20)

/* How a micro-kernel combines its sums acc with the tile of C. */
enum { UPD_ADD, UPD_BETA, UPD_ZERO };

/* C's element (i, j) of a tile is c[i ldc + j cs]: cs is 1, or ldc's
 * role swapped with it when the GEMM runs transposed (gemm_ours).  B's
 * rows are ldb floats apart: NR in a packed panel, more where
 * dlt_cpu_gemm_packed reads B in place. */
typedef void ukr_fn(int kc, const float *a, const float *b, long ldb, float *c, long ldc,
		    long cs, int m, int n, float alpha, float beta, int upd);
/* The same on an A read where it lies: its element (i, k) of the tile is
 * a[i ars + k acs] (a row-major op(A): ars = lda, acs = 1; a transposed
 * one: ars = 1, acs = lda), full MR rows of it.  The same operations in
 * the same order as on a packed panel: the same bits. */
typedef void ukr_sa_fn(int kc, const float *a, long ars, long acs, const float *b, long ldb,
		       float *c, long ldc, long cs, int m, int n, float alpha, float beta,
		       int upd);

/* One row of C: row 0 of a packed A panel (element k at a[k acs]) against
 * np <= 4 adjacent B panels, n columns in all (UROW_DEFINE). */
typedef void urow_fn(int kc, const float *a, long acs, const float *b, int np, float *c,
		     long cs, int n, float alpha, float beta, int upd);

typedef struct impl {
	const char *name;
	int mr, nr;
	ukr_fn *ukr;
	int simd_pack;		/* packs with AVX2 */
	ukr_sa_fn *ukr_sa;	/* NULL: A is always packed */
	urow_fn *urow;		/* NULL: a row takes the tile kernel */
} impl;

#define INLINE static inline __attribute__((always_inline))

static int min_i(int a, int b)
{
	return a < b ? a : b;
}

/* The one update formula; inlined into a kernel compiled with FMA, fmaf is
 * an instruction, and it rounds as the vector one does. */
INLINE float update(float acc, const float *c, float alpha, float beta, int upd)
{
	float prev = upd == UPD_ADD ? *c : upd == UPD_BETA ? beta * *c : 0.0f;
	return fmaf(alpha, acc, prev);
}

/* The m x n corner of a tile of sums t (row stride nr) into C. */
INLINE void store_edge(const float *t, int nr, float *c, long ldc, long cs, int m, int n,
		       float alpha, float beta, int upd)
{
	for (int i = 0; i < m; i++)
		for (int j = 0; j < n; j++)
			c[i * ldc + j * cs] = update(t[i * nr + j], &c[i * ldc + j * cs], alpha, beta,
						     upd);
}

/* ---- micro-kernels: a is MR x kc (k-major), b is kc x NR (k-major, rows
 * ldb apart) ---- */

#define S_MR 4
#define S_NR 4

static void ukr_scalar(int kc, const float *a, const float *b, long ldb, float *c, long ldc,
		       long cs, int m, int n, float alpha, float beta, int upd)
{
	float acc[S_MR * S_NR] = { 0 };
	for (int k = 0; k < kc; k++, a += S_MR, b += ldb)
		for (int i = 0; i < S_MR; i++)
			for (int j = 0; j < S_NR; j++)
				acc[i * S_NR + j] = fmaf(a[i], b[j], acc[i * S_NR + j]);
	store_edge(acc, S_NR, c, ldc, cs, m, n, alpha, beta, upd);
}

/* 6 x 16: 12 accumulators, 2 B vectors and a broadcast of 16 registers;
 * per k 2 loads and 6 broadcasts feed 12 FMAs, within Zen's and Intel's
 * load ports, and 12 chains cover 2 FMA units of 4-cycle latency. */
#define A2_ROW(i)                                                    \
	do {                                                         \
		__m256 a_ = _mm256_broadcast_ss(a + (i) * ars);      \
		c##i##0 = _mm256_fmadd_ps(a_, b0, c##i##0);          \
		c##i##1 = _mm256_fmadd_ps(a_, b1, c##i##1);          \
	} while (0)

#define A2_STEP()                                                    \
	do {                                                         \
		__m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8); \
		A2_ROW(0);                                           \
		A2_ROW(1);                                           \
		A2_ROW(2);                                           \
		A2_ROW(3);                                           \
		A2_ROW(4);                                           \
		A2_ROW(5);                                           \
		a += acs;                                            \
		b += ldb;                                            \
	} while (0)

#define A2_UPD(i)                                                                    \
	do {                                                                         \
		float *r_ = c + (i) * ldc;                                           \
		__m256 p0 = _mm256_setzero_ps(), p1 = _mm256_setzero_ps();           \
		if (upd == UPD_ADD) {                                                \
			p0 = _mm256_loadu_ps(r_);                                    \
			p1 = _mm256_loadu_ps(r_ + 8);                                \
		} else if (upd == UPD_BETA) {                                        \
			p0 = _mm256_mul_ps(vb, _mm256_loadu_ps(r_));                 \
			p1 = _mm256_mul_ps(vb, _mm256_loadu_ps(r_ + 8));             \
		}                                                                    \
		_mm256_storeu_ps(r_, _mm256_fmadd_ps(va, c##i##0, p0));              \
		_mm256_storeu_ps(r_ + 8, _mm256_fmadd_ps(va, c##i##1, p1));          \
	} while (0)

#define A2_SAVE(i)                                                   \
	do {                                                         \
		_mm256_store_ps(t + (i) * 16, c##i##0);              \
		_mm256_store_ps(t + (i) * 16 + 8, c##i##1);          \
	} while (0)

/* A's element (i, k) at a[i ars + k acs]: ars 1 and acs MR for a packed
 * panel (constants, once inlined) */
__attribute__((target("avx2,fma"), always_inline))
static inline void ukr_avx2_t(int kc, const float *restrict a, long ars, long acs,
			      const float *restrict b, long ldb, float *restrict c, long ldc,
			      long cs, int m, int n, float alpha, float beta, int upd)
{
	__m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
	__m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
	int k = kc;
	for (int i = 0; i < 6; i++) {
		_mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
		_mm_prefetch((const char *)(c + i * ldc + 15), _MM_HINT_T0);
	}
	for (; k > 0; k--)
		A2_STEP();
	if (m == 6 && n == 16 && cs == 1) {
		__m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
		A2_UPD(0);
		A2_UPD(1);
		A2_UPD(2);
		A2_UPD(3);
		A2_UPD(4);
		A2_UPD(5);
	} else {
		float t[6 * 16] __attribute__((aligned(32)));
		A2_SAVE(0);
		A2_SAVE(1);
		A2_SAVE(2);
		A2_SAVE(3);
		A2_SAVE(4);
		A2_SAVE(5);
		store_edge(t, 16, c, ldc, cs, m, n, alpha, beta, upd);
	}
}

__attribute__((target("avx2,fma")))
static void ukr_avx2(int kc, const float *restrict a, const float *restrict b, long ldb,
		     float *restrict c, long ldc, long cs, int m, int n, float alpha, float beta,
		     int upd)
{
	ukr_avx2_t(kc, a, 1, 6, b, ldb, c, ldc, cs, m, n, alpha, beta, upd);
}

__attribute__((target("avx2,fma")))
static void ukr_avx2_sa(int kc, const float *restrict a, long ars, long acs,
			const float *restrict b, long ldb, float *restrict c, long ldc, long cs,
			int m, int n, float alpha, float beta, int upd)
{
	ukr_avx2_t(kc, a, ars, acs, b, ldb, c, ldc, cs, m, n, alpha, beta, upd);
}

/* 8 x 32: 16 accumulators of 32 registers; the broadcasts fold into the
 * FMAs as embedded broadcasts. */
#define A5_ROW(i)                                                    \
	do {                                                         \
		__m512 a_ = _mm512_set1_ps(a[(i) * ars]);            \
		c##i##0 = _mm512_fmadd_ps(a_, b0, c##i##0);          \
		c##i##1 = _mm512_fmadd_ps(a_, b1, c##i##1);          \
	} while (0)

#define A5_STEP()                                                    \
	do {                                                         \
		__m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16); \
		A5_ROW(0);                                           \
		A5_ROW(1);                                           \
		A5_ROW(2);                                           \
		A5_ROW(3);                                           \
		A5_ROW(4);                                           \
		A5_ROW(5);                                           \
		A5_ROW(6);                                           \
		A5_ROW(7);                                           \
		a += acs;                                            \
		b += ldb;                                            \
	} while (0)

#define A5_UPD(i)                                                                    \
	do {                                                                         \
		float *r_ = c + (i) * ldc;                                           \
		__m512 p0 = _mm512_setzero_ps(), p1 = _mm512_setzero_ps();           \
		if (upd == UPD_ADD) {                                                \
			p0 = _mm512_loadu_ps(r_);                                    \
			p1 = _mm512_loadu_ps(r_ + 16);                               \
		} else if (upd == UPD_BETA) {                                        \
			p0 = _mm512_mul_ps(vb, _mm512_loadu_ps(r_));                 \
			p1 = _mm512_mul_ps(vb, _mm512_loadu_ps(r_ + 16));            \
		}                                                                    \
		_mm512_storeu_ps(r_, _mm512_fmadd_ps(va, c##i##0, p0));              \
		_mm512_storeu_ps(r_ + 16, _mm512_fmadd_ps(va, c##i##1, p1));         \
	} while (0)

#define A5_SAVE(i)                                                   \
	do {                                                         \
		_mm512_store_ps(t + (i) * 32, c##i##0);              \
		_mm512_store_ps(t + (i) * 32 + 16, c##i##1);         \
	} while (0)

__attribute__((target("avx512f"), always_inline))
static inline void ukr_avx512_t(int kc, const float *restrict a, long ars, long acs,
				const float *restrict b, long ldb, float *restrict c, long ldc,
				long cs, int m, int n, float alpha, float beta, int upd)
{
	__m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
	__m512 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
	__m512 c60 = c00, c61 = c00, c70 = c00, c71 = c00;
	int k = kc;
	for (int i = 0; i < 8; i++) {
		_mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
		_mm_prefetch((const char *)(c + i * ldc + 31), _MM_HINT_T0);
	}
	for (; k > 0; k--)
		A5_STEP();
	if (m == 8 && n == 32 && cs == 1) {
		__m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
		A5_UPD(0);
		A5_UPD(1);
		A5_UPD(2);
		A5_UPD(3);
		A5_UPD(4);
		A5_UPD(5);
		A5_UPD(6);
		A5_UPD(7);
	} else {
		float t[8 * 32] __attribute__((aligned(64)));
		A5_SAVE(0);
		A5_SAVE(1);
		A5_SAVE(2);
		A5_SAVE(3);
		A5_SAVE(4);
		A5_SAVE(5);
		A5_SAVE(6);
		A5_SAVE(7);
		store_edge(t, 32, c, ldc, cs, m, n, alpha, beta, upd);
	}
}

__attribute__((target("avx512f")))
static void ukr_avx512(int kc, const float *restrict a, const float *restrict b, long ldb,
		       float *restrict c, long ldc, long cs, int m, int n, float alpha, float beta,
		       int upd)
{
	ukr_avx512_t(kc, a, 1, 8, b, ldb, c, ldc, cs, m, n, alpha, beta, upd);
}

__attribute__((target("avx512f")))
static void ukr_avx512_sa(int kc, const float *restrict a, long ars, long acs,
			  const float *restrict b, long ldb, float *restrict c, long ldc, long cs,
			  int m, int n, float alpha, float beta, int upd)
{
	ukr_avx512_t(kc, a, ars, acs, b, ldb, c, ldc, cs, m, n, alpha, beta, upd);
}

/* ---- one row: the matrix-vector products of generation at batch 1 ----
 *
 * Row 0 of a packed A panel (element k at a[k acs]) against np <= 4
 * adjacent B panels of NR = 2 W columns (n in all): the row's sums of
 * the tile kernel in its order, so the same bits, without the MR - 1 rows
 * of zeros the tile kernel would multiply.  Its 2 np chains of sums cover
 * the FMA latency that one panel's 2 would leave bare. */

#define UROW_DEFINE(SFX, W, TGT, VEC, SET1, LOADU, STOREU, FMADD, MUL)                     \
	__attribute__((target(TGT), always_inline)) static inline void urow_##SFX##_t(      \
		int kc, const float *restrict a, long acs, const float *restrict b,          \
		float *restrict c, long cs, int n, float alpha, float beta, int upd,         \
		const int NP)                                                                \
	{                                                                                    \
		const long ps = (long)kc * 2 * W;                                            \
		VEC acc[8];                                                                  \
		_Pragma("GCC unroll 8") for (int v = 0; v < 2 * NP; v++)                     \
			acc[v] = SET1(0.0f);                                                 \
		for (int k = 0; k < kc; k++, a += acs, b += 2 * W) {                         \
			VEC ak = SET1(*a);                                                   \
			_Pragma("GCC unroll 4") for (int p = 0; p < NP; p++) {               \
				acc[2 * p] = FMADD(ak, LOADU(b + p * ps), acc[2 * p]);       \
				acc[2 * p + 1] = FMADD(ak, LOADU(b + p * ps + W),            \
						       acc[2 * p + 1]);                      \
			}                                                                    \
		}                                                                            \
		if (n == 2 * W * NP && cs == 1) {                                            \
			VEC va = SET1(alpha), vb = SET1(beta);                               \
			_Pragma("GCC unroll 8") for (int v = 0; v < 2 * NP; v++) {           \
				VEC prev = upd == UPD_ADD    ? LOADU(c + v * W)                  \
					   : upd == UPD_BETA ? MUL(vb, LOADU(c + v * W))         \
							     : SET1(0.0f);               \
				STOREU(c + v * W, FMADD(va, acc[v], prev));                  \
			}                                                                    \
		} else {                                                                     \
			float t[8 * W] __attribute__((aligned(64)));                         \
			_Pragma("GCC unroll 8") for (int v = 0; v < 2 * NP; v++)             \
				STOREU(t + v * W, acc[v]);                                   \
			store_edge(t, n, c, 0, cs, 1, n, alpha, beta, upd);                  \
		}                                                                            \
	}                                                                                    \
	__attribute__((target(TGT))) static void urow_##SFX(                               \
		int kc, const float *a, long acs, const float *b, int np, float *c, long cs, \
		int n, float alpha, float beta, int upd)                                     \
	{                                                                                    \
		switch (np) {                                                                \
		case 1: urow_##SFX##_t(kc, a, acs, b, c, cs, n, alpha, beta, upd, 1); break; \
		case 2: urow_##SFX##_t(kc, a, acs, b, c, cs, n, alpha, beta, upd, 2); break; \
		case 3: urow_##SFX##_t(kc, a, acs, b, c, cs, n, alpha, beta, upd, 3); break; \
		default: urow_##SFX##_t(kc, a, acs, b, c, cs, n, alpha, beta, upd, 4);       \
		}                                                                            \
	}

UROW_DEFINE(avx2, 8, "avx2,fma", __m256, _mm256_set1_ps, _mm256_loadu_ps, _mm256_storeu_ps,
	    _mm256_fmadd_ps, _mm256_mul_ps)
UROW_DEFINE(avx512, 16, "avx512f", __m512, _mm512_set1_ps, _mm512_loadu_ps, _mm512_storeu_ps,
	    _mm512_fmadd_ps, _mm512_mul_ps)

/* ---- packing: zero-padded panels, so edge tiles run the full kernel ---- */

/* Rows i0 .. i0+m of op(A), columns p0 .. p0+kc, into MR-tall panels. */
INLINE void pack_a_mr(int mr, int tA, const float *A, int lda, int i0, int m, int p0, int kc,
		      float *dst)
{
	for (int ip = 0; ip < m; ip += mr, dst += (size_t)mr * kc) {
		int mm = min_i(mr, m - ip);
		if (tA) {
			for (int k = 0; k < kc; k++) {
				const float *s = A + (size_t)(p0 + k) * lda + i0 + ip;
				float *d = dst + (size_t)k * mr;
				for (int i = 0; i < mm; i++)
					d[i] = s[i];
				for (int i = mm; i < mr; i++)
					d[i] = 0.0f;
			}
		} else {
			for (int i = 0; i < mm; i++) {
				const float *s = A + (size_t)(i0 + ip + i) * lda + p0;
				for (int k = 0; k < kc; k++)
					dst[(size_t)k * mr + i] = s[k];
			}
			for (int i = mm; i < mr; i++)
				for (int k = 0; k < kc; k++)
					dst[(size_t)k * mr + i] = 0.0f;
		}
	}
}

/* Rows p0 .. p0+kc of op(B), columns j0 .. j0+n, into NR-wide panels. */
INLINE void pack_b_nr(int nr, int tB, const float *B, int ldb, int p0, int kc, int j0, int n,
		      float *dst)
{
	for (int jp = 0; jp < n; jp += nr, dst += (size_t)nr * kc) {
		int nn = min_i(nr, n - jp);
		if (!tB) {
			for (int k = 0; k < kc; k++) {
				const float *s = B + (size_t)(p0 + k) * ldb + j0 + jp;
				float *d = dst + (size_t)k * nr;
				if (nn == nr) {
					memcpy(d, s, nr * sizeof(float));
				} else {
					for (int j = 0; j < nn; j++)
						d[j] = s[j];
					for (int j = nn; j < nr; j++)
						d[j] = 0.0f;
				}
			}
		} else {
			for (int j = 0; j < nn; j++) {
				const float *s = B + (size_t)(j0 + jp + j) * ldb + p0;
				for (int k = 0; k < kc; k++)
					dst[(size_t)k * nr + j] = s[k];
			}
			for (int j = nn; j < nr; j++)
				for (int k = 0; k < kc; k++)
					dst[(size_t)k * nr + j] = 0.0f;
		}
	}
}

/* One panel from r full rows (r = 6 or a multiple of 8) that run along k,
 * as a transposed A (tA = 0) or B (tB = 1) gives them: dst[k r + i] =
 * src[i ld + k], through 8 x 8 transposes in registers where a scalar
 * copy would store one float a cycle.  With 6 rows each k's 8-float store
 * runs 2 floats into the next k's (stored after it), and the last one 2
 * floats past the panel: the buffer has room. */
__attribute__((target("avx2")))
static void pack_rows_avx2(int r, const float *src, long ld, int kc, float *dst)
{
	int g = r == 6 ? 6 : 8;
	for (int i0 = 0; i0 < r; i0 += g) {
		int k = 0;
		for (; k + 8 <= kc; k += 8) {
			__m256 v[8];
			for (int i = 0; i < 8; i++)
				v[i] = i < g ? _mm256_loadu_ps(src + (i0 + i) * ld + k)
					     : _mm256_setzero_ps();
			TRANSPOSE8(v);
			for (int kk = 0; kk < 8; kk++)
				_mm256_storeu_ps(dst + (size_t)(k + kk) * r + i0, v[kk]);
		}
		for (; k < kc; k++)
			for (int i = 0; i < g; i++)
				dst[(size_t)k * r + i0 + i] = src[(i0 + i) * ld + k];
	}
}

/* The packers for each kernel's constant MR and NR, so their loops
 * unroll; simd: the CPU has AVX2 (the scalar kernel's path never asks). */
static void pack_a(int mr, int simd, int tA, const float *A, int lda, int i0, int m, int p0,
		   int kc, float *dst)
{
	if (simd && !tA) {
		int full = m / mr * mr;
		for (int ip = 0; ip < full; ip += mr, dst += (size_t)mr * kc)
			pack_rows_avx2(mr, A + (size_t)(i0 + ip) * lda + p0, lda, kc, dst);
		i0 += full;
		m -= full;
		if (!m)
			return;
	}
	switch (mr) {
	case 4:
		pack_a_mr(4, tA, A, lda, i0, m, p0, kc, dst);
		break;
	case 6:
		pack_a_mr(6, tA, A, lda, i0, m, p0, kc, dst);
		break;
	default:
		pack_a_mr(8, tA, A, lda, i0, m, p0, kc, dst);
	}
}

static void pack_b(int nr, int simd, int tB, const float *B, int ldb, int p0, int kc, int j0,
		   int n, float *dst)
{
	if (simd && tB) {
		int full = n / nr * nr;
		for (int jp = 0; jp < full; jp += nr, dst += (size_t)nr * kc)
			pack_rows_avx2(nr, B + (size_t)(j0 + jp) * ldb + p0, ldb, kc, dst);
		j0 += full;
		n -= full;
		if (!n)
			return;
	}
	switch (nr) {
	case 4:
		pack_b_nr(4, tB, B, ldb, p0, kc, j0, n, dst);
		break;
	case 16:
		pack_b_nr(16, tB, B, ldb, p0, kc, j0, n, dst);
		break;
	default:
		pack_b_nr(32, tB, B, ldb, p0, kc, j0, n, dst);
	}
}

/* A 16-bit operand's panels: each panel's part of the operand widened
 * into stage (room for DLT_GEMM_NR_MAX x kc floats), then packed from
 * there as an f32 operand would be from where it lies: the same panels.
 * A B whose rows run along N (tB = 0, a weight gradient's activations)
 * is widened straight into its panels, whose rows those are. */
static void pack_a16(int mr, int simd, int tA, const uint16_t *A, int lda, int i0, int m,
		     int p0, int kc, int prec, float *stage, float *dst)
{
	for (int ip = 0; ip < m; ip += mr, dst += (size_t)mr * kc) {
		int r = min_i(mr, m - ip);
		if (!tA) {
			dlt_cpu_widen_rows(A + (size_t)(i0 + ip) * lda + p0, lda, r, kc, prec, stage, kc);
			pack_a(mr, simd, 0, stage, kc, 0, r, 0, kc, dst);
		} else {
			dlt_cpu_widen_rows(A + (size_t)p0 * lda + i0 + ip, lda, kc, r, prec, stage, r);
			pack_a(mr, simd, 1, stage, r, 0, r, 0, kc, dst);
		}
	}
}

static void pack_b16(int nr, int simd, int tB, const uint16_t *B, int ldb, int p0, int kc,
		     int j0, int n, int prec, float *stage, float *dst)
{
	for (int jp = 0; jp < n; jp += nr, dst += (size_t)nr * kc) {
		int c = min_i(nr, n - jp);
		if (!tB) {
			dlt_cpu_widen_rows(B + (size_t)p0 * ldb + j0 + jp, ldb, kc, c, prec, dst, nr);
			for (int k = 0; c < nr && k < kc; k++)	/* a short panel's rest */
				memset(dst + (size_t)k * nr + c, 0, (size_t)(nr - c) * sizeof(float));
		} else {
			dlt_cpu_widen_rows(B + (size_t)(j0 + jp) * ldb + p0, ldb, c, kc, prec, stage, kc);
			pack_b(nr, simd, 1, stage, kc, 0, kc, 0, c, dst);
		}
	}
}

/* ---- the blocked loops over one thread's block of C ---- */

/* Each thread's packing buffer, grown to the largest need and then kept,
 * so a training step allocates nothing once its first step has run;
 * freed when the thread ends. */
static __thread float *tl_buf;
static __thread size_t tl_cap;
static pthread_key_t buf_key;

static float *packing_buffer(size_t n)
{
	if (n > tl_cap) {
		size_t bytes = (n * sizeof(float) + 63) & ~(size_t)63;
		float *p = aligned_alloc(64, bytes);
		if (!p)
			return NULL;
		free(tl_buf);
		tl_buf = p;
		tl_cap = bytes / sizeof(float);
		pthread_setspecific(buf_key, p);
	}
	return tl_buf;
}

static size_t round_up(size_t x, size_t to)
{
	return (x + to - 1) / to * to;
}

typedef struct gemm_args {
	int tA, tB, M, N, K;
	float alpha, beta;
	const float *A, *B;
	float *C;
	int lda, ldb;
	long ldc, cs;		/* C's element (i, j) is C[i ldc + j cs] */
	int prec;		/* enum dlt_prec: A and B are rounded to it */
	int weights;		/* B is the table's weights, which may be held */
	/* what A's and B's panels are rounded to: prec, or f32 where the
	 * operand holds values of prec already (exact_operands) */
	int prec_a, prec_b;
	int round;		/* what C is rounded to (DLT_ROUND_C's), f32: not */
	/* A (B) holds prec's 16-bit words, not floats (DLT_A_HALF, DLT_B_HALF) */
	int half_a, half_b;
} gemm_args;

/* bf16 by dlt_round_bf16's integer steps, 8 lanes at a time */
__attribute__((target("avx2")))
static void round_bf16_avx2(const float *x, float *y, size_t n)
{
	const __m256i one = _mm256_set1_epi32(1), half = _mm256_set1_epi32(0x7fff);
	const __m256i high = _mm256_set1_epi32((int)0xffff0000u), quiet = _mm256_set1_epi32(0x00400000);
	const __m256i mag = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256i u = _mm256_loadu_si256((const __m256i *)(x + i));
		__m256i even = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
		__m256i r = _mm256_and_si256(_mm256_add_epi32(u, _mm256_add_epi32(half, even)), high);
		__m256i nan = _mm256_or_si256(_mm256_and_si256(u, high), quiet);
		__m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, mag), inf);
		_mm256_storeu_si256((__m256i *)(y + i), _mm256_blendv_epi8(r, nan, is_nan));
	}
	for (; i < n; i++)
		y[i] = dlt_round_bf16(x[i]);
}

/* bf16 by vcvtneps2bf16, 16 lanes an instruction (the integer steps'
 * bits: to nearest even, a NaN quietened with its payload's top kept),
 * where dlt_cpu_bf16_native says the CPU has it (and vfpclassps); a
 * vector with a subnormal, which the instruction reads as zero, the
 * integer way */
__attribute__((target("avx2,avx512f,avx512dq,avx512bf16")))
static void round_bf16_cvt(const float *x, float *y, size_t n)
{
	size_t i = 0;
	for (; i + 16 <= n; i += 16) {
		__m512 v = _mm512_loadu_ps(x + i);
		__m256i h;
		if (_mm512_fpclass_ps_mask(v, 0x20)) {
			round_bf16_avx2(x + i, y + i, 16);
			continue;
		}
		h = (__m256i)_mm512_cvtneps_pbh(v);
		_mm512_storeu_si512(y + i, _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
	}
	round_bf16_avx2(x + i, y + i, n - i);
}

/* fp16 by F16C's conversions there and back, which round as
 * dlt_round_f16 does (to nearest even, subnormals kept, inf from 65520);
 * a NaN is made as it makes one, quietened with its payload kept (the
 * conversion would drop the payload's low bits). */
__attribute__((target("avx2,f16c")))
static void round_f16_avx2(const float *x, float *y, size_t n)
{
	const __m256 quiet = _mm256_castsi256_ps(_mm256_set1_epi32(0x00400000));
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 v = _mm256_loadu_ps(x + i);
		__m256 r = _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
		__m256 is_nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
		_mm256_storeu_ps(y + i, _mm256_blendv_ps(r, _mm256_or_ps(v, quiet), is_nan));
	}
	for (; i < n; i++)
		y[i] = dlt_round_f16(x[i]);
}

/* round_f16_avx2's conversions 16 lanes at a time */
__attribute__((target("avx2,f16c,avx512f")))
static void round_f16_avx512(const float *x, float *y, size_t n)
{
	const __m512i quiet = _mm512_set1_epi32(0x00400000);
	size_t i = 0;
	for (; i + 16 <= n; i += 16) {
		__m512 v = _mm512_loadu_ps(x + i);
		__m512 r = _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
		__mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
		r = _mm512_mask_mov_ps(r, nan, _mm512_castsi512_ps(_mm512_or_si512(
			_mm512_castps_si512(v), quiet)));
		_mm512_storeu_ps(y + i, r);
	}
	round_f16_avx2(x + i, y + i, n - i);
}

static void round_bf16_plain(const float *x, float *y, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] = dlt_round_bf16(x[i]);
}

static void round_f16_plain(const float *x, float *y, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] = dlt_round_f16(x[i]);
}

/* 16-bit words to floats: a bf16's are a float's upper half */
__attribute__((target("avx2")))
static void widen_bf16_avx2(const uint16_t *x, float *y, size_t n)
{
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(x + i)));
		_mm256_storeu_si256((__m256i *)(y + i), _mm256_slli_epi32(h, 16));
	}
	for (; i < n; i++)
		y[i] = dlt_widen16(x[i], DLT_PREC_BF16);
}

__attribute__((target("avx2,f16c")))
static void widen_f16_f16c(const uint16_t *x, float *y, size_t n)
{
	size_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
	for (; i < n; i++)
		y[i] = dlt_widen16(x[i], DLT_PREC_F16);
}

__attribute__((target("avx512f")))
static void widen_bf16_avx512(const uint16_t *x, float *y, size_t n)
{
	size_t i = 0;
	for (; i + 16 <= n; i += 16) {
		__m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(x + i)));
		_mm512_storeu_si512(y + i, _mm512_slli_epi32(h, 16));
	}
	for (; i < n; i++)
		y[i] = dlt_widen16(x[i], DLT_PREC_BF16);
}

__attribute__((target("avx512f,f16c")))
static void widen_f16_avx512(const uint16_t *x, float *y, size_t n)
{
	size_t i = 0;
	for (; i + 16 <= n; i += 16)
		_mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(x + i))));
	for (; i < n; i++)
		y[i] = dlt_widen16(x[i], DLT_PREC_F16);
}

static void widen_bf16_plain(const uint16_t *x, float *y, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] = dlt_widen16(x[i], DLT_PREC_BF16);
}

static void widen_f16_plain(const uint16_t *x, float *y, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] = dlt_widen16(x[i], DLT_PREC_F16);
}

/* Floats of prec (rounded already) to their 16-bit words, and back: a
 * bf16's are a float's upper half; fp16's by F16C, exact for values of
 * fp16 (dlt_narrow16 where the CPU has no F16C) */
static void narrow_bf16_plain(const float *x, uint16_t *y, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] = dlt_narrow16(x[i], DLT_PREC_BF16);
}

static void narrow_f16_plain(const float *x, uint16_t *y, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] = dlt_narrow16(x[i], DLT_PREC_F16);
}

__attribute__((target("avx2")))
static void narrow_bf16_avx2(const float *x, uint16_t *y, size_t n)
{
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256i u = _mm256_srli_epi32(_mm256_loadu_si256((const __m256i *)(x + i)), 16);
		u = _mm256_permute4x64_epi64(_mm256_packus_epi32(u, u), 0x08);
		_mm_storeu_si128((__m128i *)(y + i), _mm256_castsi256_si128(u));
	}
	narrow_bf16_plain(x + i, y + i, n - i);
}

__attribute__((target("avx2,f16c")))
static void narrow_f16_f16c(const float *x, uint16_t *y, size_t n)
{
	size_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm_storeu_si128((__m128i *)(y + i),
				 _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
	narrow_f16_plain(x + i, y + i, n - i);
}

__attribute__((target("avx512f")))
static void narrow_bf16_avx512(const float *x, uint16_t *y, size_t n)
{
	size_t i = 0;
	for (; i + 16 <= n; i += 16)
		_mm256_storeu_si256((__m256i *)(y + i),
				    _mm512_cvtepi32_epi16(_mm512_srli_epi32(
					    _mm512_loadu_si512(x + i), 16)));
	narrow_bf16_plain(x + i, y + i, n - i);
}

__attribute__((target("avx512f,f16c")))
static void narrow_f16_avx512(const float *x, uint16_t *y, size_t n)
{
	size_t i = 0;
	for (; i + 16 <= n; i += 16)
		_mm256_storeu_si256((__m256i *)(y + i),
				    _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
	narrow_f16_plain(x + i, y + i, n - i);
}

/* The CPU's best rounding, widening and narrowing of each type, chosen
 * once: bias_act and the GEMMs round a row of a few hundred floats a
 * call, the GEMMs widen a 16-bit operand's rows as they pack them, and
 * the backend's narrow and widen keep activations in 16 bits */
typedef void round_fn(const float *x, float *y, size_t n);
typedef void widen_fn(const uint16_t *x, float *y, size_t n);
typedef void narrow_fn(const float *x, uint16_t *y, size_t n);
static round_fn *round_bf16 = round_bf16_plain, *round_f16 = round_f16_plain;
static widen_fn *widen_bf16 = widen_bf16_plain, *widen_f16 = widen_f16_plain;
static narrow_fn *narrow_bf16 = narrow_bf16_plain, *narrow_f16 = narrow_f16_plain;
static pthread_once_t round_once = PTHREAD_ONCE_INIT;

/* F16C, CPUID.1:ECX bit 29: clang's __builtin_cpu_supports does not know
 * the name (make fuzz builds with clang) */
static int has_f16c(void)
{
	unsigned a, b, c, d;
	return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}

static void round_choose(void)
{
	int avx2 = __builtin_cpu_supports("avx2") && has_f16c();
	if (dlt_cpu_bf16_native())
		round_bf16 = round_bf16_cvt;
	else if (avx2)
		round_bf16 = round_bf16_avx2;
	if (avx2 && __builtin_cpu_supports("avx512f")) {
		round_f16 = round_f16_avx512;
		widen_bf16 = widen_bf16_avx512;
		widen_f16 = widen_f16_avx512;
		narrow_bf16 = narrow_bf16_avx512;
		narrow_f16 = narrow_f16_avx512;
	} else if (avx2) {
		round_f16 = round_f16_avx2;
		widen_bf16 = widen_bf16_avx2;
		widen_f16 = widen_f16_f16c;
		narrow_bf16 = narrow_bf16_avx2;
		narrow_f16 = narrow_f16_f16c;
	}
}

static widen_fn *widen_for(int prec)
{
	pthread_once(&round_once, round_choose);
	return prec == DLT_PREC_BF16 ? widen_bf16 : widen_f16;
}

void dlt_cpu_widen_to(const uint16_t *x, float *y, size_t n, int prec)
{
	widen_for(prec)(x, y, n);
}

void dlt_cpu_narrow_to(const float *x, uint16_t *y, size_t n, int prec)
{
	pthread_once(&round_once, round_choose);
	(prec == DLT_PREC_BF16 ? narrow_bf16 : narrow_f16)(x, y, n);
}

void dlt_cpu_widen_rows(const uint16_t *src, long ld, int rows, int cols, int prec, float *dst,
			long dst_ld)
{
	widen_fn *w = widen_for(prec);
	for (int r = 0; r < rows; r++)
		w(src + (size_t)r * ld, dst + (size_t)r * dst_ld, (size_t)cols);
}

void dlt_cpu_round_to(const float *x, float *y, size_t n, int prec)
{
	pthread_once(&round_once, round_choose);
	if (prec == DLT_PREC_BF16)
		round_bf16(x, y, n);
	else if (prec == DLT_PREC_F16)
		round_f16(x, y, n);
	else if (x != y)
		memmove(y, x, n * sizeof(*y));
}

/* The first 1024 on their own: values that are not of the type show
 * there, and the pass over the rest is spared */
int dlt_cpu_is_rounded(const float *x, size_t n, int prec)
{
	float r[1024];
	size_t k = n < 1024 ? n : 1024;
	int same;
	dlt_cpu_round_to(x, r, k, prec);
	same = !memcmp(r, x, k * sizeof(float));
	#pragma omp parallel for schedule(static) reduction(&&:same) if (same && n >= (1 << 16))
	for (size_t i = k; i < n; i += 1024) {
		float t[1024];
		size_t c = n - i < 1024 ? n - i : 1024;
		if (!same)
			continue;
		dlt_cpu_round_to(x + i, t, c, prec);
		same = !memcmp(t, x + i, c * sizeof(float));
	}
	return same;
}

/* bf16 or fp16 inputs: the packed panels are rounded, so the micro-
 * kernels and the order of the sums stay those of f32. */
static void round_panel(float *p, size_t n, int prec)
{
	if (prec != DLT_PREC_F32)
		dlt_cpu_round_to(p, p, n, prec);
}

/* K in equal slices of at most KC (a multiple of 8 but the last): 288
 * is 144 + 144, not 256 + 32 and a pass over C for 32 multiply-adds. */
static int kc_step(int K)
{
	int slices = (K + KC - 1) / KC;
	return min_i(K, (int)round_up((K + slices - 1) / slices, 8));
}

static float element(const float *X, int half, int prec, size_t i)
{
	return half ? dlt_widen16(((const uint16_t *)X)[i], prec) : X[i];
}

/* Out of memory for the packing buffer: the same sums one element at a
 * time, slowly, so even then the bits do not change. */
static void gemm_unpacked(const gemm_args *g, int i0, int i1, int j0, int j1)
{
	int kcmax = kc_step(g->K);
	for (int i = i0; i < i1; i++) {
		for (int j = j0; j < j1; j++) {
			float *c = g->C + i * g->ldc + j * g->cs;
			for (int pc = 0; pc < g->K; pc += kcmax) {
				float acc = 0.0f;
				for (int k = pc; k < min_i(pc + kcmax, g->K); k++) {
					float a = element(g->A, g->half_a, g->prec,
							  g->tA ? (size_t)k * g->lda + i
								: (size_t)i * g->lda + k);
					float b = element(g->B, g->half_b, g->prec,
							  g->tB ? (size_t)j * g->ldb + k
								: (size_t)k * g->ldb + j);
					acc = fmaf(dlt_round_prec(a, g->prec),
						   dlt_round_prec(b, g->prec), acc);
				}
				*c = update(acc, c, g->alpha, g->beta,
					    pc ? UPD_ADD : g->beta == 0.0f ? UPD_ZERO : UPD_BETA);
			}
		}
	}
}

/* Whether gemm_block reads A's full panels where they lie: in f32
 * (nothing to round), for a block of at most 1024 columns, where packing
 * A cost up to a third of the time of the products (a GPT's [B T, C] x
 * [C, 4 C] and their gradients: K or N a few hundred); not where A's
 * stride is a multiple of 4 KiB, whose rows or columns would then share
 * an L1 set (the 8 rows of a 1024 x 1024 A run at half speed). */
static int a_in_place(const impl *im, const gemm_args *g, int cols)
{
	return im->ukr_sa && g->prec_a == DLT_PREC_F32 && !g->half_a && cols <= 1024 &&
	       g->lda % 1024 != 0;
}

/* ---- weights held: B's panels packed once (dlt_cpu_hold_weights) ---- */

typedef struct held_entry {
	const float *B;
	int tB, ldb, K, N, prec, nr, simd;
	float *panels;
} held_entry;

/* The held weights: set and read by the thread that calls the backend
 * table (generation's), never by the ones of a parallel loop */
#define MAX_HELD 512
static held_entry held_b[MAX_HELD];
static int n_held, holding;

void dlt_cpu_hold_weights(int on)
{
	holding = on;
	if (!on) {
		for (int i = 0; i < n_held; i++)
			free(held_b[i].panels);
		n_held = 0;
	}
}

/* g's B as gemm_block packs it, every slice of K and every column: the
 * slice at pc from round_up(N, NR) pc on, column j's panel j kc into it;
 * packed on the first call while weights are held, NULL when they are
 * not (or no memory: then gemm_block packs as always). */
static const float *held_panels(const impl *im, const gemm_args *g)
{
	const float *p = NULL;
	int kcmax = kc_step(g->K);
	size_t npad = round_up((size_t)g->N, im->nr);
	for (int i = 0; !p && i < n_held; i++) {
		const held_entry *h = &held_b[i];
		if (h->B == g->B && h->tB == g->tB && h->ldb == g->ldb && h->K == g->K &&
		    h->N == g->N && h->prec == g->prec && h->nr == im->nr && h->simd == im->simd_pack)
			p = h->panels;
	}
	if (!p && n_held < MAX_HELD) {
		float *dst = aligned_alloc(64, round_up((npad * g->K + 16) * sizeof(float), 64));
		for (int pc = 0; dst && pc < g->K; pc += kcmax) {
			int kc = min_i(kcmax, g->K - pc);
			pack_b(im->nr, im->simd_pack, g->tB, g->B, g->ldb, pc, kc, 0, g->N,
			       dst + npad * pc);
			round_panel(dst + npad * pc, npad * kc, g->prec);
		}
		if (dst)
			held_b[n_held++] = (held_entry){ g->B, g->tB, g->ldb, g->K, g->N, g->prec, im->nr,
						   im->simd_pack, dst };
		p = dst;
	}
	return p;
}

/* C's rows i0 .. i1, columns j0 .. j1 rounded to g->round, the block just
 * done, so still in cache */
static void round_c(const gemm_args *g, int i0, int i1, int j0, int j1)
{
	if (g->round == DLT_PREC_F32)
		return;
	for (int i = i0; i < i1; i++) {
		float *c = g->C + i * g->ldc + j0 * g->cs;
		if (g->cs == 1)
			dlt_cpu_round_to(c, c, (size_t)(j1 - j0), g->round);
		else
			for (int j = 0; j < j1 - j0; j++)
				c[j * g->cs] = dlt_round_prec(c[j * g->cs], g->round);
	}
}

/* Rows i0 .. i1, columns j0 .. j1 of C.  A's panels packed, or read where
 * they lie but for one short of MR rows (a_in_place); B's packed, or
 * held's (held_panels); the same sums. */
static void gemm_block(const impl *im, const gemm_args *g, const float *held, int i0, int i1,
		       int j0, int j1)
{
	int mr = im->mr, nr = im->nr, kcmax = kc_step(g->K), simd = im->simd_pack;
	int a_in = a_in_place(im, g, j1 - j0);
	long ars = g->tA ? 1 : g->lda, acs = g->tA ? g->lda : 1;
	/* 16 floats of room after A's panels for pack_rows_avx2 */
	size_t a_n = round_up((size_t)min_i(MC, (int)round_up(i1 - i0, mr)) * kcmax, 16) + 16;
	size_t b_n = (size_t)min_i(NC, (int)round_up(j1 - j0, nr)) * kcmax;
	size_t stage_n = g->half_a || g->half_b ? (size_t)DLT_GEMM_NR_MAX * kcmax : 0;
	float *buf = packing_buffer(a_n + b_n + stage_n), *ap = buf, *bp = buf + a_n;
	float *stage = bp + b_n;
	if (!buf) {
		gemm_unpacked(g, i0, i1, j0, j1);
		return;
	}
	for (int jc = j0; jc < j1; jc += NC) {
		int nc = min_i(NC, j1 - jc);
		for (int pc = 0; pc < g->K; pc += kcmax) {
			int kc = min_i(kcmax, g->K - pc);
			int upd = pc ? UPD_ADD : g->beta == 0.0f ? UPD_ZERO : UPD_BETA;
			if (held) {
				bp = (float *)held + round_up((size_t)g->N, nr) * pc + (size_t)jc * kc;
			} else if (g->half_b) {
				pack_b16(nr, simd, g->tB, (const uint16_t *)g->B, g->ldb, pc, kc, jc,
					 nc, g->prec, stage, bp);
			} else {
				pack_b(nr, simd, g->tB, g->B, g->ldb, pc, kc, jc, nc, bp);
				round_panel(bp, round_up(nc, nr) * kc, g->prec_b);
			}
			for (int ic = i0; ic < i1; ic += MC) {
				/* rows from full_m are packed, at ap */
				int mc = min_i(MC, i1 - ic), full_m = a_in ? mc / mr * mr : 0;
				if (full_m < mc && g->half_a) {
					pack_a16(mr, simd, g->tA, (const uint16_t *)g->A, g->lda,
						 ic + full_m, mc - full_m, pc, kc, g->prec, stage, ap);
				} else if (full_m < mc) {
					pack_a(mr, simd, g->tA, g->A, g->lda, ic + full_m, mc - full_m,
					       pc, kc, ap);
					round_panel(ap, round_up(mc - full_m, mr) * kc, g->prec_a);
				}
				if (mc == 1 && im->urow) {	/* one row: 4 panels a call */
					for (int jr = 0; jr < nc; jr += 4 * nr) {
						int n = min_i(4 * nr, nc - jr);
						im->urow(kc, ap, mr, bp + (size_t)jr * kc,
							 (n + nr - 1) / nr,
							 g->C + ic * g->ldc + (jc + jr) * g->cs, g->cs,
							 n, g->alpha, g->beta, upd);
					}
					if (pc + kc >= g->K)
						round_c(g, ic, ic + mc, jc, jc + nc);
					continue;
				}
				for (int jr = 0; jr < nc; jr += nr) {
					float *c = g->C + ic * g->ldc + (jc + jr) * g->cs;
					const float *b = bp + (size_t)jr * kc;
					for (int ir = 0; ir < mc; ir += mr) {
						int m = min_i(mr, mc - ir), n = min_i(nr, nc - jr);
						if (ir < full_m)
							im->ukr_sa(kc, g->A + (ic + ir) * ars + pc * acs,
								   ars, acs, b, nr, c + ir * g->ldc,
								   g->ldc, g->cs, m, n, g->alpha,
								   g->beta, upd);
						else
							im->ukr(kc, ap + (size_t)(ir - full_m) * kc, b,
								nr, c + ir * g->ldc, g->ldc, g->cs, m,
								n, g->alpha, g->beta, upd);
					}
				}
				if (pc + kc >= g->K)
					round_c(g, ic, ic + mc, jc, jc + nc);
			}
		}
	}
}

/* ---- threads: a grid of blocks of C, one per thread ---- */

/* The grid tm x tn (tm * tn <= threads) that minimises the busiest
 * thread's work: its block's multiply-adds per k, plus its packing (each
 * thread packs its rows of A and columns of B), a packed float costing
 * about as much as 4 of those. */
static void choose_grid(int threads, int tiles_m, int tiles_n, int mr, int nr, int *tm, int *tn)
{
	double best = -1.0;
	*tm = *tn = 1;
	for (int m = 1; m <= threads && m <= tiles_m; m++) {
		for (int n = 1; m * n <= threads && n <= tiles_n; n++) {
			double rows = (double)((tiles_m + m - 1) / m) * mr;
			double cols = (double)((tiles_n + n - 1) / n) * nr;
			double cost = rows * cols + 4.0 * (rows + cols);
			if (best < 0 || cost < best) {
				best = cost;
				*tm = m;
				*tn = n;
			}
		}
	}
}

static void scale_c(int M, int N, float beta, float *C, int ldc)
{
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++)
			C[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[(size_t)i * ldc + j];
}

/* The fraction of a grid of mr x nr tiles that M x N fills. */
static double tile_use(int M, int N, int mr, int nr)
{
	return (double)M * N / (round_up(M, mr) * round_up(N, nr));
}

static void gemm_ours(const impl *im, const gemm_args *g0)
{
	/* C^T = op(B)^T op(A)^T when that wastes less of the tiles: an N
	 * under NR, as 32 x 9 x 100352 (conv1 dW) or 128 x 10 x 128 (the
	 * logits).  Each element gets the same products in the same order,
	 * so the same bits. */
	gemm_args gt = { !g0->tB, !g0->tA, g0->N, g0->M, g0->K, g0->alpha, g0->beta, g0->B,
			 g0->A, g0->C, g0->ldb, g0->lda, g0->cs, g0->ldc, g0->prec, 0,
			 g0->prec_b, g0->prec_a, g0->round, g0->half_b, g0->half_a };
	const gemm_args *g = g0->N < im->nr &&
		tile_use(g0->N, g0->M, im->mr, im->nr) > 1.2 * tile_use(g0->M, g0->N, im->mr, im->nr)
		? &gt : g0;
	int tiles_m = (g->M + im->mr - 1) / im->mr, tiles_n = (g->N + im->nr - 1) / im->nr;
	int threads = omp_in_parallel() ? 1 : omp_get_max_threads(), tm, tn;
	const float *held = g0->weights && holding && g == g0 ? held_panels(im, g) : NULL;
	double fmas = (double)g->M * g->N * g->K;
	if (fmas < PAR_MIN_FMA ||
	    (fmas < 4.0 * PAR_MIN_FMA && (double)g->K * g->N * sizeof(float) < PAR_MIN_B_BYTES))
		threads = 1;
	choose_grid(threads, tiles_m, tiles_n, im->mr, im->nr, &tm, &tn);
	if (tm * tn == 1) {
		gemm_block(im, g, held, 0, g->M, 0, g->N);
		return;
	}
	#pragma omp parallel num_threads(tm * tn)
	for (int r = omp_get_thread_num(); r < tm * tn; r += omp_get_num_threads()) {
		int rm = r / tn, rn = r % tn;
		int i0 = tiles_m * rm / tm * im->mr, i1 = min_i(g->M, tiles_m * (rm + 1) / tm * im->mr);
		int j0 = tiles_n * rn / tn * im->nr, j1 = min_i(g->N, tiles_n * (rn + 1) / tn * im->nr);
		gemm_block(im, g, held, i0, i1, j0, j1);
	}
}

/* ---- which GEMM runs ---- */

static const impl impls[DLT_GEMM_KINDS] = {
	[DLT_GEMM_OPENBLAS] = { "openblas", 0, 0, NULL, 0 },
	[DLT_GEMM_SCALAR] = { "dlt-scalar", S_MR, S_NR, ukr_scalar, 0 },
	[DLT_GEMM_AVX2] = { "dlt-avx2", 6, 16, ukr_avx2, 1, ukr_avx2_sa, urow_avx2 },
	[DLT_GEMM_AVX512] = { "dlt-avx512", 8, 32, ukr_avx512, 1, ukr_avx512_sa, urow_avx512 },
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int supported[DLT_GEMM_KINDS];
static int best_ours, active;
static int bf16_native;		/* bf16 runs on vdpbf16ps (gemm_bf16.c) */

/* cpuid and DLT_GEMM, once: the choice never depends on timings, so
 * every process on a machine makes the same one.  Without AVX2 ours is
 * the slow scalar kernel, and OpenBLAS runs unless DLT_GEMM asks. */
static void init(void)
{
	const char *env = getenv("DLT_GEMM");
	__builtin_cpu_init();
	supported[DLT_GEMM_OPENBLAS] = supported[DLT_GEMM_SCALAR] = 1;
	supported[DLT_GEMM_AVX2] = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
	supported[DLT_GEMM_AVX512] = __builtin_cpu_supports("avx512f");
	best_ours = supported[DLT_GEMM_AVX512] ? DLT_GEMM_AVX512
		  : supported[DLT_GEMM_AVX2] ? DLT_GEMM_AVX2 : DLT_GEMM_SCALAR;
	active = best_ours == DLT_GEMM_SCALAR ? DLT_GEMM_OPENBLAS : best_ours;
	if (env && !strcmp(env, "dlt"))
		active = best_ours;
	for (int k = 0; env && k < DLT_GEMM_KINDS; k++)
		if (!strcmp(env, impls[k].name) && supported[k])
			active = k;
	/* a DLT_GEMM that names one kernel gets it for bf16 too, converted */
	bf16_native = dlt_cpu_bf16_native() && (!env || !strcmp(env, "dlt"));
	pthread_key_create(&buf_key, free);
}

int dlt_cpu_gemm_kind(void)
{
	pthread_once(&once, init);
	return active;
}

const char *dlt_cpu_gemm_name(void)
{
	return impls[dlt_cpu_gemm_kind()].name;
}

int dlt_cpu_gemm_bf16_dots(void)
{
	pthread_once(&once, init);
	return bf16_native;
}

const char *dlt_cpu_gemm_prec_name(int prec)
{
	int k = dlt_cpu_gemm_kind();
	if (prec == DLT_PREC_BF16 && bf16_native)
		return "dlt-avx512-bf16";
	return impls[k == DLT_GEMM_OPENBLAS && prec != DLT_PREC_F32 ? best_ours : k].name;
}

const char *dlt_cpu_gemm_kind_name(int kind)
{
	return kind >= 0 && kind < DLT_GEMM_KINDS ? impls[kind].name : "?";
}

int dlt_cpu_gemm_supported(int kind)
{
	pthread_once(&once, init);
	return kind >= 0 && kind < DLT_GEMM_KINDS && supported[kind];
}

/* bf16 (without the CPU's bf16 products) and fp16 run the f32 kernels on
 * rounded panels.  Training's activations and gradients hold values of
 * the type already, so an A or B that does is not rounded again, and A
 * is then read where it lies as in f32 (a_in_place).  The caller may say
 * so (DLT_A_EXACT, DLT_B_EXACT, as nn does: prec_a, prec_b are f32 from
 * the start); else an operand whole, without gaps between its rows, is
 * checked, a pass over it that spares the packing one and a half.
 * Weights are f32 masters: not checked. */
static void exact_operands(gemm_args *g)
{
	if (g->prec_a != DLT_PREC_F32 && g->lda == (g->tA ? g->M : g->K) &&
	    dlt_cpu_is_rounded(g->A, (size_t)g->M * g->K, g->prec))
		g->prec_a = DLT_PREC_F32;
	if (g->prec_b != DLT_PREC_F32 && !g->weights && g->ldb == (g->tB ? g->K : g->N) &&
	    dlt_cpu_is_rounded(g->B, (size_t)g->K * g->N, g->prec))
		g->prec_b = DLT_PREC_F32;
}

/* dlt_cpu_sgemm_kind; weights: called through the backend table, whose B
 * are weights that may be held */
static void sgemm(int kind, int weights, int prec, int tA, int tB, int M, int N, int K,
		  float alpha, const float *A, int lda, const float *B, int ldb, float beta,
		  float *C, int ldc)
{
	int p = prec & ~DLT_GEMM_FLAGS, round = prec & DLT_ROUND_C ? p : DLT_PREC_F32;
	int half_a = p != DLT_PREC_F32 && prec & DLT_A_HALF;
	int half_b = p != DLT_PREC_F32 && prec & DLT_B_HALF;
	gemm_args g = { tA, tB, M, N, K, alpha, beta, A, B, C, lda, ldb, ldc, 1, p,
			weights && !half_b,
			prec & (DLT_A_EXACT | DLT_A_HALF) ? DLT_PREC_F32 : p,
			prec & (DLT_B_EXACT | DLT_B_HALF) ? DLT_PREC_F32 : p, round, half_a, half_b };
	prec = p;
	pthread_once(&once, init);
	if (M <= 0 || N <= 0)
		return;
	/* OpenBLAS cannot round its inputs: ours runs for bf16 and fp16 */
	if (kind == DLT_GEMM_OPENBLAS && prec == DLT_PREC_F32) {
		cblas_sgemm(CblasRowMajor, tA ? CblasTrans : CblasNoTrans,
			    tB ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C,
			    ldc);
		return;
	}
	if (K <= 0 || alpha == 0.0f) {
		scale_c(M, N, beta, C, ldc);
		round_c(&g, 0, M, 0, N);
		return;
	}
	if (kind < 0 || kind >= DLT_GEMM_KINDS || !supported[kind])
		kind = best_ours;
	exact_operands(&g);
	gemm_ours(&impls[kind], &g);
}

void dlt_cpu_sgemm_kind(int kind, int prec, int tA, int tB, int M, int N, int K, float alpha,
			const float *A, int lda, const float *B, int ldb,
			float beta, float *C, int ldc)
{
	sgemm(kind, 0, prec, tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

static void dispatch(int weights, int prec, int tA, int tB, int M, int N, int K, float alpha,
		     const float *A, int lda, const float *B, int ldb, float beta, float *C,
		     int ldc)
{
	int kind = dlt_cpu_gemm_kind();	/* and bf16_native */
	if ((prec & ~DLT_GEMM_FLAGS) == DLT_PREC_BF16 && bf16_native) {
		dlt_cpu_sgemm_bf16(1 | (prec & (DLT_ROUND_C | DLT_A_HALF | DLT_B_HALF)), tA, tB, M,
				   N, K, alpha, A, lda, B, ldb, beta, C, ldc);
		return;
	}
	sgemm(kind, weights, prec, tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void dlt_cpu_sgemm(int prec, int tA, int tB, int M, int N, int K, float alpha,
		   const float *A, int lda, const float *B, int ldb,
		   float beta, float *C, int ldc)
{
	dispatch(0, prec, tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void dlt_cpu_gemm_weights(int prec, int tA, int tB, int M, int N, int K, float alpha,
			  const float *A, int lda, const float *B, int ldb, float beta, float *C,
			  int ldc)
{
	dispatch(1, prec, tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* ---- an A packed once, a B read in place ---- */

/* Ours that runs: the packed GEMM has no OpenBLAS counterpart */
static const impl *packed_impl(void)
{
	int kind = dlt_cpu_gemm_kind();
	return &impls[kind == DLT_GEMM_OPENBLAS ? best_ours : kind];
}

size_t dlt_cpu_gemm_packed_floats(int M, int K)
{
	/* and room for pack_rows_avx2's last store */
	return round_up((size_t)M, packed_impl()->mr) * K + 16;
}

void dlt_cpu_gemm_pack(int M, int K, const float *A, int lda, float *ap)
{
	const impl *im = packed_impl();
	int kcmax = kc_step(K);
	for (int pc = 0; pc < K; pc += kcmax) {
		int kc = min_i(kcmax, K - pc);
		pack_a(im->mr, im->simd_pack, 0, A, lda, 0, M, pc, kc, ap);
		ap += round_up((size_t)M, im->mr) * kc;
	}
}

/* gemm_block's loops, K sliced as there, without B's panels: each micro-
 * kernel reads its NR columns of B where they lie, rows ldb apart */
void dlt_cpu_gemm_packed(int M, int N, int K, const float *ap, const float *B, int ldb,
			 float *C, int ldc)
{
	const impl *im = packed_impl();
	int mr = im->mr, nr = im->nr, kcmax = kc_step(K);
	for (int pc = 0; pc < K; pc += kcmax) {
		int kc = min_i(kcmax, K - pc), upd = pc ? UPD_ADD : UPD_ZERO;
		const float *a = ap + round_up((size_t)M, mr) * pc;
		for (int j = 0; j < N; j += nr)
			for (int i = 0; i < M; i += mr)
				im->ukr(kc, a + (size_t)i * kc, B + (size_t)pc * ldb + j, ldb,
					C + (size_t)i * ldc + j, ldc, 1, min_i(mr, M - i),
					min_i(nr, N - j), 1.0f, 0.0f, upd);
	}
}
