/* gemm_bf16: the GEMM of bf16 inputs on the CPU's own bf16 dot products
 * (AVX-512 BF16's vdpbf16ps: Intel Cooper Lake and Sapphire Rapids on, AMD
 * Zen 4 on), for train.precision bf16 where the CPU has them (gemm.h).
 *
 * A and B are rounded to bf16 as the converted path rounds them
 * (dlt_round_bf16: to nearest, ties to even, NaN kept a NaN) and packed as
 * pairs along k: a B panel holds, for each pair of k, its 32 columns' two
 * bf16 side by side (two zmm registers), an A panel each of its 8 rows'
 * pair as one 32-bit word to broadcast.  vdpbf16ps adds to each f32 lane
 * the products of one pair: acc += a[k+1] b[k+1], then acc += a[k] b[k],
 * each rounded to f32 (the products of two bf16 are exact in f32), with
 * bf16 subnormals read as zero and f32 subnormal results flushed to zero.
 * So the sums are those of the converted path (fma from k = 0 up) but for
 * the order within each pair and the subnormals: each is within
 * (K + 3) 2^-24 (|alpha| sum |a b| + |beta c|) of the exact value for the
 * rounded inputs, and the two differ by at most twice that (test-gemm.c).
 * Every element of C gets its sums in the same order whatever the tile or
 * the thread count, so the bits do not depend on the threads.
 *
 * The same loops also run a portable micro-kernel that does vdpbf16ps's
 * arithmetic in C, so that the packing and the blocking are tested on
 * every machine, the instruction itself where the CPU has it and, on an
 * emulated CPU, in test/t0500-gemm-emulated.sh everywhere.  Kept
 * apart from gemm.c, whose packing for f32 changes on its own. */
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "kernels/common/math.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/transpose8.h"

#define MR 8
#define NR 32
#define KC 512			/* k per slice, even: B's panel is 32 KiB */
#define MC 96			/* rows of A per block: 96 KiB packed */
#define NC 2048			/* columns of B per slab: 2 MiB packed */
#define PAR_MIN_FMA (1 << 18)	/* below, one thread */

enum { UPD_ADD, UPD_BETA, UPD_ZERO };

typedef void ukr_fn(int kp, const uint16_t *a, const uint16_t *b, float *c, int ldc, int m,
		    int n, float alpha, float beta, int upd);

static int min_i(int a, int b)
{
	return a < b ? a : b;
}

/* The upper half of x's bits after rounding to bf16. */
static inline uint16_t to_bf16(float x)
{
	return (uint16_t)(dlt_f32_bits(dlt_round_bf16(x)) >> 16);
}

static inline float from_bf16(uint16_t h)
{
	return dlt_bits_f32((uint32_t)h << 16);
}

/* C's tile from the sums t (MR x NR, row-major), m x n of it. */
static void store_tile(const float *t, float *c, int ldc, int m, int n, float alpha, float beta,
		       int upd)
{
	for (int i = 0; i < m; i++)
		for (int j = 0; j < n; j++) {
			float *p = c + (size_t)i * ldc + j, s = t[i * NR + j];
			*p = upd == UPD_ADD ? fmaf(alpha, s, *p)
			   : upd == UPD_BETA ? fmaf(alpha, s, beta * *p) : alpha * s;
		}
}

/* ---- the micro-kernels: C's MR x NR tile from kp pairs of k ---- */

/* The bf16 pair at p as one word: k in the low half, k + 1 in the high
 * (little-endian), as vdpbf16ps reads it. */
static inline uint32_t pair(const uint16_t *p)
{
	uint32_t w;
	memcpy(&w, p, 4);
	return w;
}

/* vdpbf16ps in C: bf16 subnormals read as zero, f32 subnormal sums
 * flushed to zero, the odd element of a pair first. */
static inline float daz(float x)
{
	return fabsf(x) < 0x1p-126f ? 0.0f * x : x;
}

static inline float dot_pair(float acc, uint32_t a, uint32_t b)
{
	acc = daz(acc + daz(from_bf16(a >> 16)) * daz(from_bf16(b >> 16)));
	return daz(acc + daz(from_bf16(a & 0xffff)) * daz(from_bf16(b & 0xffff)));
}

static void ukr_emulated(int kp, const uint16_t *a, const uint16_t *b, float *c, int ldc, int m,
			 int n, float alpha, float beta, int upd)
{
	float t[MR * NR] = { 0 };
	for (int q = 0; q < kp; q++, a += 2 * MR, b += 2 * NR)
		for (int i = 0; i < MR; i++) {
			uint32_t ai = pair(a + 2 * i);
			for (int j = 0; j < NR; j++)
				t[i * NR + j] = dot_pair(t[i * NR + j], ai, pair(b + 2 * j));
		}
	store_tile(t, c, ldc, m, n, alpha, beta, upd);
}

#if defined(__x86_64__)
#define T_BF16 __attribute__((target("avx512f,avx512bf16")))

#define B_STEP(i)                                                                    \
	do {                                                                         \
		__m512i ai = _mm512_set1_epi32((int)pair(a + 2 * (i)));               \
		c##i##0 = _mm512_dpbf16_ps(c##i##0, (__m512bh)ai, (__m512bh)b0);     \
		c##i##1 = _mm512_dpbf16_ps(c##i##1, (__m512bh)ai, (__m512bh)b1);     \
	} while (0)

#define B_SAVE(i)                                                                    \
	do {                                                                         \
		_mm512_store_ps(t + (i) * NR, c##i##0);                              \
		_mm512_store_ps(t + (i) * NR + 16, c##i##1);                         \
	} while (0)

/* The full tile's update, as the f32 kernels do it: fma(alpha, acc, C). */
#define B_UPD(i)                                                                     \
	do {                                                                         \
		float *r = c + (size_t)(i) * ldc;                                    \
		__m512 p0 = _mm512_loadu_ps(r), p1 = _mm512_loadu_ps(r + 16);       \
		if (upd == UPD_ZERO)                                                 \
			p0 = p1 = _mm512_setzero_ps();                               \
		else if (upd == UPD_BETA)                                            \
			p0 = _mm512_mul_ps(vb, p0), p1 = _mm512_mul_ps(vb, p1);      \
		_mm512_storeu_ps(r, _mm512_fmadd_ps(va, c##i##0, p0));               \
		_mm512_storeu_ps(r + 16, _mm512_fmadd_ps(va, c##i##1, p1));          \
	} while (0)

T_BF16
static void ukr_avx512bf16(int kp, const uint16_t *a, const uint16_t *b, float *c, int ldc,
			   int m, int n, float alpha, float beta, int upd)
{
	__m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
	__m512 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
	__m512 c60 = c00, c61 = c00, c70 = c00, c71 = c00;
	for (int q = 0; q < kp; q++, a += 2 * MR, b += 2 * NR) {
		__m512i b0 = _mm512_load_si512((const void *)b);
		__m512i b1 = _mm512_load_si512((const void *)(b + 32));
		B_STEP(0);
		B_STEP(1);
		B_STEP(2);
		B_STEP(3);
		B_STEP(4);
		B_STEP(5);
		B_STEP(6);
		B_STEP(7);
	}
	if (m == MR && n == NR) {
		__m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
		B_UPD(0);
		B_UPD(1);
		B_UPD(2);
		B_UPD(3);
		B_UPD(4);
		B_UPD(5);
		B_UPD(6);
		B_UPD(7);
	} else {
		float t[MR * NR] __attribute__((aligned(64)));
		B_SAVE(0);
		B_SAVE(1);
		B_SAVE(2);
		B_SAVE(3);
		B_SAVE(4);
		B_SAVE(5);
		B_SAVE(6);
		B_SAVE(7);
		store_tile(t, c, ldc, m, n, alpha, beta, upd);
	}
}
#endif

/* ---- which one: cpuid, once ---- */

/* Whole panels of whole pairs, with no test an element (the packing's
 * time was most of a step's GEMMs): word q stride + r of dst (a pair of
 * bf16, k even in the low half) from rows r < n of src, each along k
 * (ld apart); or from the columns r < n of rows 2q and 2q + 1 (ld apart,
 * each along r).  The bits of to_bf16.  A version for AVX-512, one for
 * AVX2 and one for any CPU, chosen by init's CPUID (no target_clones:
 * the emulated CPU of t0500 runs this file without ifunc). */
static inline __attribute__((always_inline)) void pairs_of_rows(const float *src, long ld, int n,
								 int kp, uint32_t *dst,
								 int stride)
{
	uint32_t w[KC / 2];
	for (int r = 0; r < n; r++) {
		const float *row = src + (size_t)r * ld;
		#pragma omp simd
		for (int q = 0; q < kp; q++)
			w[q] = (uint32_t)to_bf16(row[2 * q]) | (uint32_t)to_bf16(row[2 * q + 1]) << 16;
		for (int q = 0; q < kp; q++)
			dst[(size_t)q * stride + r] = w[q];
	}
}

static inline __attribute__((always_inline)) void pairs_of_cols(const float *src, long ld, int n,
								 int kp, uint32_t *dst,
								 int stride)
{
	for (int q = 0; q < kp; q++) {
		const float *lo = src + (size_t)2 * q * ld, *hi = lo + ld;
		uint32_t *d = dst + (size_t)q * stride;
		#pragma omp simd
		for (int r = 0; r < n; r++)
			d[r] = (uint32_t)to_bf16(lo[r]) | (uint32_t)to_bf16(hi[r]) << 16;
	}
}

typedef void pairs_fn(int cols, const float *src, long ld, int n, int kp, uint32_t *dst,
		      int stride);

#if defined(__x86_64__)
/* 8 rows' words w[i][q], q < kp, to word q stride + i of dst: 8 x 8 of
 * them turned into place in registers at a time */
__attribute__((target("avx2"), always_inline))
static inline void words_of_rows8(uint32_t (*w)[KC / 2], int kp, uint32_t *dst, int stride)
{
	int q = 0;
	for (; q + 8 <= kp; q += 8) {
		__m256 v[8];
		for (int i = 0; i < 8; i++)
			v[i] = _mm256_load_ps((const float *)&w[i][q]);
		TRANSPOSE8(v);
		for (int i = 0; i < 8; i++)
			_mm256_storeu_ps((float *)(dst + (size_t)(q + i) * stride), v[i]);
	}
	for (; q < kp; q++)
		for (int i = 0; i < 8; i++)
			dst[(size_t)q * stride + i] = w[i][q];
}

/* pairs_of_rows for the first n / 8 * 8 rows, which it returns: each 8
 * rows' words turned into place 8 x 8 in registers, where a store a word
 * to a column of dst made the packing of bf16 take half the time of the
 * products */
__attribute__((target("avx2")))
static int pairs_of_rows8(const float *src, long ld, int n, int kp, uint32_t *dst, int stride)
{
	uint32_t w[8][KC / 2] __attribute__((aligned(32)));
	int r0 = 0;
	for (; r0 + 8 <= n; r0 += 8) {
		for (int i = 0; i < 8; i++) {
			const float *row = src + (size_t)(r0 + i) * ld;
			#pragma omp simd
			for (int k = 0; k < kp; k++)
				w[i][k] = (uint32_t)to_bf16(row[2 * k]) |
					  (uint32_t)to_bf16(row[2 * k + 1]) << 16;
		}
		words_of_rows8(w, kp, dst + r0, stride);
	}
	return r0;
}
#endif

#if defined(__x86_64__)
#define T_CVT __attribute__((target("avx2,avx512f,avx512dq,avx512bf16")))

/* Whether any of 16 floats is subnormal (vfpclassps' class 0x20), which
 * vcvtne2ps2bf16 reads as zero where dlt_round_bf16 rounds it */
T_CVT static inline int subnormals(__m512 v)
{
	return _mm512_fpclass_ps_mask(v, 0x20) != 0;
}

/* 32 floats from x as 16 pairs (word q: x[2q] low, x[2q + 1] high) by
 * vcvtne2ps2bf16, which rounds to nearest even and quietens a NaN as
 * dlt_round_bf16 does: the bits of to_bf16, the rare vector with a
 * subnormal made by it */
T_CVT static inline void pairs32(const float *x, uint32_t *w)
{
	__m512 lo = _mm512_loadu_ps(x), hi = _mm512_loadu_ps(x + 16);
	if (subnormals(lo) || subnormals(hi)) {
		for (int q = 0; q < 16; q++)
			w[q] = (uint32_t)to_bf16(x[2 * q]) | (uint32_t)to_bf16(x[2 * q + 1]) << 16;
		return;
	}
	_mm512_storeu_si512(w, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}

/* pairs_of_rows8 with the words made 16 at a time by pairs32: where the
 * CPU has AVX512_BF16, whose packing took a third of the products' time */
T_CVT static int pairs_of_rows8_cvt(const float *src, long ld, int n, int kp, uint32_t *dst,
				    int stride)
{
	uint32_t w[8][KC / 2] __attribute__((aligned(64)));
	int r0 = 0;
	for (; r0 + 8 <= n; r0 += 8) {
		for (int i = 0; i < 8; i++) {
			const float *row = src + (size_t)(r0 + i) * ld;
			int k = 0;
			for (; k + 16 <= kp; k += 16)
				pairs32(row + 2 * k, &w[i][k]);
			for (; k < kp; k++)
				w[i][k] = (uint32_t)to_bf16(row[2 * k]) |
					  (uint32_t)to_bf16(row[2 * k + 1]) << 16;
		}
		words_of_rows8(w, kp, dst + r0, stride);
	}
	return r0;
}

/* The words of 16 columns (those of in) of rows lo and hi: columns 0-7
 * in *w0, 8-15 in *w1, by vcvtneps2bf16 and an interleave of the bf16; 0
 * where a subnormal leaves them to to_bf16 */
T_CVT static inline int words16(const float *lo, const float *hi, __mmask16 in, __m256i *w0,
				__m256i *w1)
{
	__m512 a = _mm512_maskz_loadu_ps(in, lo), b = _mm512_maskz_loadu_ps(in, hi);
	__m256i x, y, p0, p1;
	if (subnormals(a) || subnormals(b))
		return 0;
	x = (__m256i)_mm512_cvtneps_pbh(a);
	y = (__m256i)_mm512_cvtneps_pbh(b);
	p0 = _mm256_unpacklo_epi16(x, y);	/* columns 0-3, 8-11 */
	p1 = _mm256_unpackhi_epi16(x, y);	/* 4-7, 12-15 */
	*w0 = _mm256_permute2x128_si256(p0, p1, 0x20);
	*w1 = _mm256_permute2x128_si256(p0, p1, 0x31);
	return 1;
}

/* pairs_of_cols, 16 columns at a time (an A's panel of 8 in the lower
 * half) by words16 */
T_CVT static void pairs_of_cols_cvt(const float *src, long ld, int n, int kp, uint32_t *dst,
				    int stride)
{
	for (int q = 0; q < kp; q++) {
		const float *lo = src + (size_t)2 * q * ld, *hi = lo + ld;
		uint32_t *d = dst + (size_t)q * stride;
		for (int r = 0; r < n; r += 16) {
			__mmask16 in = n - r >= 16 ? 0xffff : (__mmask16)((1u << (n - r)) - 1);
			__m256i w[2];
			if (!words16(lo + r, hi + r, in, &w[0], &w[1])) {
				for (int c = r; c < n && c < r + 16; c++)
					d[c] = (uint32_t)to_bf16(lo[c]) | (uint32_t)to_bf16(hi[c]) << 16;
			} else if (in == 0xffff) {
				_mm256_storeu_si256((__m256i *)(d + r), w[0]);
				_mm256_storeu_si256((__m256i *)(d + r + 8), w[1]);
			} else {
				memcpy(d + r, w, (size_t)(n - r) * sizeof(uint32_t));
			}
		}
	}
}

/* Two A panels (MR = 8 columns each) from rows 2q and 2q + 1 at once, q <
 * kp: 16 columns, a whole cache line of each row, where a panel alone
 * reads half of one and the next panel the other half much later */
T_CVT static void two_panels_cvt(const float *src, long ld, int kp, uint32_t *d0, uint32_t *d1)
{
	for (int q = 0; q < kp; q++) {
		const float *lo = src + (size_t)2 * q * ld, *hi = lo + ld;
		__m256i w0, w1;
		if (words16(lo, hi, 0xffff, &w0, &w1)) {
			_mm256_storeu_si256((__m256i *)(d0 + (size_t)q * 8), w0);
			_mm256_storeu_si256((__m256i *)(d1 + (size_t)q * 8), w1);
			continue;
		}
		for (int c = 0; c < 8; c++) {
			d0[(size_t)q * 8 + c] = (uint32_t)to_bf16(lo[c]) | (uint32_t)to_bf16(hi[c]) << 16;
			d1[(size_t)q * 8 + c] = (uint32_t)to_bf16(lo[c + 8]) |
						(uint32_t)to_bf16(hi[c + 8]) << 16;
		}
	}
}

T_CVT static void pairs_avx512bf16(int cols, const float *src, long ld, int n, int kp,
				   uint32_t *dst, int stride)
{
	int n8;
	if (cols) {
		pairs_of_cols_cvt(src, ld, n, kp, dst, stride);
		return;
	}
	n8 = pairs_of_rows8_cvt(src, ld, n, kp, dst, stride);
	pairs_of_rows(src + (size_t)n8 * ld, ld, n - n8, kp, dst + n8, stride);
}
#endif

static int no_rows8(const float *src, long ld, int n, int kp, uint32_t *dst, int stride)
{
	(void)src, (void)ld, (void)n, (void)kp, (void)dst, (void)stride;
	return 0;
}

/* rows8: the rows it can do 8 at a time, the rest by pairs_of_rows */
#define PAIRS(name, attr, rows8)                                                        \
	attr static void name(int cols, const float *src, long ld, int n, int kp,      \
			      uint32_t *dst, int stride)                                \
	{                                                                               \
		int n8;                                                                 \
		if (cols) {                                                             \
			pairs_of_cols(src, ld, n, kp, dst, stride);                     \
			return;                                                         \
		}                                                                       \
		n8 = rows8(src, ld, n, kp, dst, stride);                                \
		pairs_of_rows(src + (size_t)n8 * ld, ld, n - n8, kp, dst + n8, stride); \
	}
#if defined(__x86_64__)
PAIRS(pairs_avx512, __attribute__((target("avx512f"))), pairs_of_rows8)
PAIRS(pairs_avx2, __attribute__((target("avx2"))), pairs_of_rows8)
#endif
PAIRS(pairs_plain, , no_rows8)

static pairs_fn *pairs = pairs_plain;
/* d[i] = a[i] | b[i] << 16, i < n: two rows' bf16 words as pairs (b
 * NULL: zeros) */
static void interleave_plain(const uint16_t *a, const uint16_t *b, int n, uint32_t *d)
{
	for (int i = 0; i < n; i++)
		d[i] = a[i] | (uint32_t)(b ? b[i] : 0) << 16;
}

__attribute__((target("avx512f")))
static void interleave_avx512(const uint16_t *a, const uint16_t *b, int n, uint32_t *d)
{
	int i = 0;
	for (; b && i + 16 <= n; i += 16) {
		__m512i lo = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(a + i)));
		__m512i hi = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(b + i)));
		_mm512_storeu_si512(d + i, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
	}
	interleave_plain(a + i, b ? b + i : NULL, n - i, d + i);
}

static void (*interleave)(const uint16_t *a, const uint16_t *b, int n,
			  uint32_t *d) = interleave_plain;

static int no_words16(const uint16_t *src, long ld, int n, int kp, uint32_t *dst, int stride)
{
	(void)src, (void)ld, (void)n, (void)kp, (void)dst, (void)stride;
	return 0;
}

#if defined(__x86_64__)
/* Rows of bf16 words along k whose pairs lie whole (src and ld even):
 * each row's 32-bit words are its pairs, turned into place 8 rows at a
 * time as pairs_of_rows8's; the rows done, n / 8 * 8 */
__attribute__((target("avx2")))
static int words16_of_rows8(const uint16_t *src, long ld, int n, int kp, uint32_t *dst,
			    int stride)
{
	int r0 = 0;
	for (; r0 + 8 <= n; r0 += 8) {
		const uint16_t *rows = src + (size_t)r0 * ld;
		int q = 0;
		for (; q + 8 <= kp; q += 8) {
			__m256 v[8];
			for (int i = 0; i < 8; i++)
				v[i] = _mm256_loadu_ps((const float *)(rows + (size_t)i * ld + 2 * q));
			TRANSPOSE8(v);
			for (int i = 0; i < 8; i++)
				_mm256_storeu_ps((float *)(dst + (size_t)(q + i) * stride + r0), v[i]);
		}
		for (; q < kp; q++)
			for (int i = 0; i < 8; i++)
				memcpy(dst + (size_t)q * stride + r0 + i, rows + (size_t)i * ld + 2 * q,
				       sizeof(uint32_t));
	}
	return r0;
}
#endif

static int (*words16_of_rows)(const uint16_t *src, long ld, int n, int kp, uint32_t *dst,
			      int stride) = no_words16;

/* two_panels_cvt where the CPU has AVX512_BF16, else NULL */
static void (*two_panels)(const float *src, long ld, int kp, uint32_t *d0, uint32_t *d1);

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int native;
static pthread_key_t key_a, key_b, key_s;

/* AVX512_BF16 is CPUID.(EAX=7,ECX=1):EAX bit 5; AVX512F CPUID.(7,0):EBX
 * bit 16; and the OS must save the ZMM state: OSXSAVE (CPUID.1:ECX bit
 * 27), then XCR0 bits 1, 2 (SSE, AVX) and 5-7 (opmask, ZMM0-15 upper
 * halves, ZMM16-31).  AVX2 (the packing's pairs) is CPUID.(7,0):EBX bit
 * 5 with XCR0 bits 1 and 2.  The conversions find subnormals with
 * AVX512DQ's vfpclassps, CPUID.(7,0):EBX bit 17, which every CPU with
 * AVX512_BF16 has (Cooper Lake, Sapphire Rapids, Zen 4 on). */
static void init(void)
{
	pthread_key_create(&key_a, free);
	pthread_key_create(&key_b, free);
	pthread_key_create(&key_s, free);
#if defined(__x86_64__)
	unsigned a, b, c, d, lo, hi, dq;
	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27)))
		return;
	__asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	if ((lo & 0x6) != 0x6 || __get_cpuid_max(0, NULL) < 7 ||
	    !__get_cpuid_count(7, 0, &a, &b, &c, &d))
		return;
	if (b & (1u << 5)) {	/* AVX2, the YMM state saved */
		pairs = pairs_avx2;
		words16_of_rows = words16_of_rows8;
	}
	if ((lo & 0xe6) != 0xe6 || !(b & (1u << 16)))
		return;
	pairs = pairs_avx512;
	interleave = interleave_avx512;
	dq = b & (1u << 17);
	if (a < 1)
		return;
	__get_cpuid_count(7, 1, &a, &b, &c, &d);
	native = (a & (1u << 5)) && dq;
	if (native) {
		pairs = pairs_avx512bf16;
		two_panels = two_panels_cvt;
	}
#endif
}

int dlt_cpu_bf16_native(void)
{
	pthread_once(&once, init);
	return native;
}

/* ---- packing: bf16 pairs along k, zero-padded to whole panels ---- */

/* A panel of w rows (or columns) of op(X), k p0 .. p0+kc, as kp pairs:
 * whole pairs by the loops above when the panel is whole, the rest (a
 * last odd k, a short panel, the padding) an element at a time */
static void pack_panel(int t, const float *X, int ld, int r0, int m, int w, int p0, int kc,
		       int kp, uint16_t *dst)
{
	int whole = m >= w ? kc / 2 : 0;
	if (whole)
		pairs(t, t ? X + (size_t)p0 * ld + r0 : X + (size_t)r0 * ld + p0, ld, w, whole,
		      (uint32_t *)dst, w);
	for (int q = whole; q < kp; q++)
		for (int i = 0; i < w; i++)
			for (int e = 0; e < 2; e++) {
				int r = r0 + i, k = p0 + 2 * q + e;
				float v = i < m && 2 * q + e < kc
					? (t ? X[(size_t)k * ld + r] : X[(size_t)r * ld + k]) : 0.0f;
				dst[(size_t)(q * w + i) * 2 + e] = to_bf16(v);
			}
}

/* pack_panel of an operand of bf16 words (DLT_A_HALF, DLT_B_HALF), the
 * same words.  Along k (t = 1, a weight gradient's activations as B) a
 * pair is two rows' words side by side, interleaved where they lie.
 * Across (t = 0: a conv's patches as B of its weight gradient) a pair is
 * two words side by side in a row: where they lie whole (ld and p0 even)
 * the rows' 32-bit words are moved into place; elsewhere the panel's part
 * is widened into stage (room for NR x KC floats) and packed from
 * there. */
static void pack_panel16(int t, const uint16_t *X, int ld, int r0, int m, int w, int p0, int kc,
			 int kp, float *stage, uint16_t *dst)
{
	int n = min_i(m, w), whole = kc / 2, done;
	uint32_t *d = (uint32_t *)dst;
	if (t) {
		for (int q = 0; q < kp; q++) {
			const uint16_t *a = X + (size_t)(p0 + 2 * q) * ld + r0;
			/* the last k alone: its pair's other 0 */
			interleave(a, 2 * q + 1 < kc ? a + ld : NULL, n, d + (size_t)q * w);
			if (n < w)
				memset(d + (size_t)q * w + n, 0, (size_t)(w - n) * sizeof(uint32_t));
		}
		return;
	}
	if ((ld | p0) & 1) {
		dlt_cpu_widen_rows(X + (size_t)r0 * ld + p0, ld, n, kc, DLT_PREC_BF16, stage, kc);
		pack_panel(0, stage, kc, 0, m, w, 0, kc, kp, dst);
		return;
	}
	done = words16_of_rows(X + (size_t)r0 * ld + p0, ld, n, whole, d, w);
	for (int i = done; i < n; i++)
		for (int q = 0; q < whole; q++)
			memcpy(d + (size_t)q * w + i, X + (size_t)(r0 + i) * ld + p0 + 2 * q,
			       sizeof(uint32_t));
	for (int i = 0; i < n && whole < kp; i++)	/* a last k alone */
		d[(size_t)whole * w + i] = X[(size_t)(r0 + i) * ld + p0 + kc - 1];
	for (int q = 0; q < kp && n < w; q++)
		memset(d + (size_t)q * w + n, 0, (size_t)(w - n) * sizeof(uint32_t));
}

/* op(A)'s rows i0 .. i0+m, k p0 .. p0+kc, as MR-row panels of kp pairs;
 * a transposed A's whole panels two at a time where two_panels can;
 * stage: bf16 words' room (pack_panel16), or NULL where A is floats */
static void pack_a(int tA, const float *A, int lda, int i0, int m, int p0, int kc, int kp,
		   float *stage, uint16_t *dst)
{
	int ip = 0;
	if (stage) {
		for (; ip < m; ip += MR, dst += (size_t)2 * MR * kp)
			pack_panel16(tA, (const uint16_t *)A, lda, i0 + ip, m - ip, MR, p0, kc, kp,
				     stage, dst);
		return;
	}
	if (tA && two_panels && kc % 2 == 0)
		for (; ip + 2 * MR <= m; ip += 2 * MR, dst += (size_t)4 * MR * kp)
			two_panels(A + (size_t)p0 * lda + i0 + ip, lda, kp, (uint32_t *)dst,
				   (uint32_t *)dst + (size_t)MR * kp);
	for (; ip < m; ip += MR, dst += (size_t)2 * MR * kp)
		pack_panel(tA, A, lda, i0 + ip, m - ip, MR, p0, kc, kp, dst);
}

/* op(B)'s k p0 .. p0+kc, columns j0 .. j0+n, as NR-column panels: B's
 * transpose is an A (op(B)^T's rows are its columns) */
static void pack_b(int tB, const float *B, int ldb, int p0, int kc, int kp, int j0, int n,
		   float *stage, uint16_t *dst)
{
	for (int jp = 0; jp < n; jp += NR, dst += (size_t)2 * NR * kp)
		if (stage)
			pack_panel16(!tB, (const uint16_t *)B, ldb, j0 + jp, n - jp, NR, p0, kc, kp,
				     stage, dst);
		else
			pack_panel(!tB, B, ldb, j0 + jp, n - jp, NR, p0, kc, kp, dst);
}

/* ---- the loops ---- */

/* Per-thread packing buffers, grown and kept, so a training step
 * allocates nothing after its first; freed when the thread ends. */
static __thread uint16_t *tl_a, *tl_b, *tl_s;
static __thread size_t tl_a_cap, tl_b_cap, tl_s_cap;

static uint16_t *grow(uint16_t **p, size_t *cap, pthread_key_t key, size_t n)
{
	if (n > *cap) {
		size_t bytes = (n * sizeof(uint16_t) + 63) & ~(size_t)63;
		uint16_t *q = aligned_alloc(64, bytes);
		if (!q)
			return NULL;
		free(*p);
		*p = q;
		*cap = bytes / sizeof(uint16_t);
		pthread_setspecific(key, q);
	}
	return *p;
}

typedef struct args {
	int tA, tB, M, N, K, lda, ldb, ldc;
	float alpha, beta;
	const float *A, *B;
	float *C;
	ukr_fn *ukr;
	int round;		/* C rounded to bf16 too (DLT_ROUND_C) */
	int half_a, half_b;	/* A (B) holds bf16 words (DLT_A_HALF, DLT_B_HALF) */
} args;

/* This thread's stage for the operand's bf16 words (pack_panel16), NULL
 * where the operand is floats; *failed where there was no memory */
static float *stage_for(int half, int *failed)
{
	float *s;
	if (!half)
		return NULL;
	s = (float *)grow(&tl_s, &tl_s_cap, key_s, (size_t)2 * NR * KC);
	*failed |= !s;
	return s;
}

static float element(const float *X, int half, size_t i)
{
	return half ? from_bf16(((const uint16_t *)X)[i]) : X[i];
}

/* Out of memory for a packing buffer: rows ic .. ic+mc, columns jc ..
 * jc+nc of C one element at a time, with vdpbf16ps's arithmetic in C, so
 * even then C is whole (and where the CPU's instruction is that arithmetic,
 * the same bits). */
static void unpacked(const args *g, int ic, int mc, int jc, int nc, int pc, int kc, int upd)
{
	for (int i = ic; i < ic + mc; i++)
		for (int j = jc; j < jc + nc; j++) {
			float t = 0.0f;
			for (int k = pc; k < pc + kc; k += 2) {
				uint32_t a = 0, b = 0;
				for (int e = 0; e < 2 && k + e < pc + kc; e++) {
					int kk = k + e;
					size_t ia = g->tA ? (size_t)kk * g->lda + i
							  : (size_t)i * g->lda + kk;
					size_t ib = g->tB ? (size_t)j * g->ldb + kk
							  : (size_t)kk * g->ldb + j;
					a |= (uint32_t)to_bf16(element(g->A, g->half_a, ia)) << 16 * e;
					b |= (uint32_t)to_bf16(element(g->B, g->half_b, ib)) << 16 * e;
				}
				t = dot_pair(t, a, b);
			}
			float *p = g->C + (size_t)i * g->ldc + j;
			*p = upd == UPD_ADD ? fmaf(g->alpha, t, *p)
			   : upd == UPD_BETA ? fmaf(g->alpha, t, g->beta * *p) : g->alpha * t;
		}
}

/* With DLT_ROUND_C, C's rows ic .. ic+mc, columns jc .. jc+nc rounded once
 * k's last slice (the one ending at k) is in: the block just done, still in
 * cache */
static void round_c(const args *g, int ic, int mc, int jc, int nc, int k)
{
	if (!g->round || k < g->K)
		return;
	for (int i = ic; i < ic + mc; i++)
		dlt_cpu_round_to(g->C + (size_t)i * g->ldc + jc, g->C + (size_t)i * g->ldc + jc,
				 (size_t)nc, DLT_PREC_BF16);
}

/* Rows ic .. ic+mc of C against the packed slab bp (nc columns from jc;
 * NULL: there was no memory for it). */
static void row_block(const args *g, const uint16_t *bp, int ic, int mc, int jc, int nc, int pc,
		      int kc, int kp, int upd)
{
	uint16_t *ap = bp ? grow(&tl_a, &tl_a_cap, key_a, (size_t)2 * kp * ((mc + MR - 1) / MR * MR))
			  : NULL;
	int failed = 0;
	float *stage = stage_for(g->half_a, &failed);
	if (!ap || failed) {
		unpacked(g, ic, mc, jc, nc, pc, kc, upd);
		round_c(g, ic, mc, jc, nc, pc + kc);
		return;
	}
	pack_a(g->tA, g->A, g->lda, ic, mc, pc, kc, kp, stage, ap);
	for (int jr = 0; jr < nc; jr += NR)
		for (int ir = 0; ir < mc; ir += MR)
			g->ukr(kp, ap + (size_t)2 * kp * ir, bp + (size_t)2 * kp * jr,
			       g->C + (size_t)(ic + ir) * g->ldc + jc + jr, g->ldc, min_i(MR, mc - ir),
			       min_i(NR, nc - jr), g->alpha, g->beta, upd);
	round_c(g, ic, mc, jc, nc, pc + kc);
}

/* Slabs of NC columns, slices of KC along k; each slice's B packed once,
 * its panels shared out among the threads, then the threads take blocks of
 * up to MC rows, packing their own A.  Fewer blocks than threads (an M of
 * less than a panel a thread) split the slab's columns too, a share of its
 * panels to each: every element still gets the same sums, so the same
 * bits. */
static void run(const args *g)
{
	int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
	int blocks = (g->M + MC - 1) / MC, mb;
	if ((double)g->M * g->N * g->K < PAR_MIN_FMA)
		threads = 1;
	/* blocks of at most MC rows, a multiple of the threads of them, as
	 * even as whole panels allow: 128 rows on 2 threads are 64 + 64, not
	 * 96 + 32 with one thread waiting for the other */
	blocks = (blocks + threads - 1) / threads * threads;
	mb = ((g->M + blocks - 1) / blocks + MR - 1) / MR * MR;
	blocks = (g->M + mb - 1) / mb;
	for (int jc = 0; jc < g->N; jc += NC) {
		int nc = min_i(NC, g->N - jc), panels = (nc + NR - 1) / NR;
		int splits = blocks >= threads ? 1 : min_i(panels, (threads + blocks - 1) / blocks);
		int packers = min_i(threads, panels), tasks = blocks * splits;
		for (int pc = 0; pc < g->K; pc += KC) {
			int kc = min_i(KC, g->K - pc), kp = (kc + 1) / 2;
			int upd = pc ? UPD_ADD : g->beta == 0.0f ? UPD_ZERO : UPD_BETA;
			uint16_t *bp = grow(&tl_b, &tl_b_cap, key_b, (size_t)2 * kp * panels * NR);
			int failed = 0;
			#pragma omp parallel for num_threads(packers) schedule(static) \
				if (bp && packers > 1) reduction(| : failed)
			for (int s = 0; s < packers; s++) {
				int p0 = s * panels / packers, p1 = (s + 1) * panels / packers;
				float *stage = bp ? stage_for(g->half_b, &failed) : NULL;
				if (bp && p1 > p0 && !failed)
					pack_b(g->tB, g->B, g->ldb, pc, kc, kp, jc + p0 * NR,
					       min_i(p1 * NR, nc) - p0 * NR, stage,
					       bp + (size_t)2 * kp * NR * p0);
			}
			if (failed)	/* the B panels of some thread: all unpacked */
				bp = NULL;
			#pragma omp parallel for num_threads(min_i(threads, tasks)) schedule(static) \
				if (threads > 1 && tasks > 1)
			for (int t = 0; t < tasks; t++) {
				int b = t / splits, s = t % splits;
				int p0 = s * panels / splits, p1 = (s + 1) * panels / splits;
				if (p1 > p0)
					row_block(g, bp ? bp + (size_t)2 * kp * NR * p0 : NULL, b * mb,
						  min_i(mb, g->M - b * mb), jc + p0 * NR,
						  min_i(p1 * NR, nc) - p0 * NR, pc, kc, kp, upd);
			}
		}
	}
}

void dlt_cpu_sgemm_bf16(int flags, int tA, int tB, int M, int N, int K, float alpha,
			const float *A, int lda, const float *B, int ldb, float beta, float *C,
			int ldc)
{
	args g = { tA, tB, M, N, K, lda, ldb, ldc, alpha, beta, A, B, C, ukr_emulated,
		   !!(flags & DLT_ROUND_C), !!(flags & DLT_A_HALF), !!(flags & DLT_B_HALF) };
	pthread_once(&once, init);	/* the buffers' keys */
#if defined(__x86_64__)
	if ((flags & 1) && dlt_cpu_bf16_native())
		g.ukr = ukr_avx512bf16;
#endif
	if (M <= 0 || N <= 0)
		return;
	if (K <= 0 || alpha == 0.0f) {	/* BLAS: C = beta C, A and B unread */
		for (int i = 0; i < M; i++)
			for (int j = 0; j < N; j++) {
				float *p = C + (size_t)i * ldc + j;
				*p = beta == 0.0f ? 0.0f : beta * *p;
			}
		round_c(&g, 0, M, 0, N, K);
		return;
	}
	run(&g);
}
