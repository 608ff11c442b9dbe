/* The picks of 2x2 max pooling, 8 windows at a time, shared by the pool
 * (pool.c) and the Winograd conv that pools its output tiles as it makes
 * them (conv.c).  Include after <immintrin.h>. */
#ifndef DLT_CPU_POOL_AVX2_H
#define DLT_CPU_POOL_AVX2_H

#include "kernels/kernels.h"

/* best, at = v, idx where v > best or v is NaN: the scalar loop's picks */
__attribute__((target("avx2"), always_inline))
static inline void dlt_max_pick_avx2(__m256 *best, __m256i *at, __m256 v, __m256i idx)
{
	__m256 t = _mm256_or_ps(_mm256_cmp_ps(v, *best, _CMP_GT_OQ),
				_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
	*best = _mm256_blendv_ps(*best, v, t);
	*at = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(*at),
						   _mm256_castsi256_ps(idx), t));
}

/* The plane indices of the top left inputs of 8 2x2 windows side by
 * side, the first's at at0 */
__attribute__((target("avx2"), always_inline))
static inline __m256i dlt_win2x2_avx2(int at0)
{
	return _mm256_add_epi32(_mm256_set1_epi32(at0), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14));
}

/* The maxima of 8 windows side by side whose inputs, in the window's
 * order, are a b (its top row) and c d, the first window's a at index
 * at0 of the plane [., w]; their argmax in *arg as dlt_maxpool_arg gives
 * it. */
__attribute__((target("avx2"), always_inline))
static inline __m256 dlt_max2x2_avx2(const dlt_pool *s, __m256 a, __m256 b, __m256 c, __m256 d,
				     int at0, int w, __m256i *arg)
{
	__m256i i00 = dlt_win2x2_avx2(at0);
	__m256i i10 = _mm256_add_epi32(i00, _mm256_set1_epi32(w)), one = _mm256_set1_epi32(1);
	__m256 best = a;
	__m256i at = i00;
	dlt_max_pick_avx2(&best, &at, b, _mm256_add_epi32(i00, one));
	dlt_max_pick_avx2(&best, &at, c, i10);
	dlt_max_pick_avx2(&best, &at, d, _mm256_add_epi32(i10, one));
	if (s->relu)	/* -1 where not best > 0 */
		at = _mm256_castps_si256(_mm256_blendv_ps(
			_mm256_castsi256_ps(_mm256_set1_epi32(-1)), _mm256_castsi256_ps(at),
			_mm256_cmp_ps(best, _mm256_setzero_ps(), _CMP_GT_OQ)));
	*arg = at;
	return best;
}

#endif
