/* TRANSPOSE8(v): the 8 x 8 floats of __m256 v[8] transposed in registers
 * (unpack, shuffle, swap of 128-bit halves), where a scalar copy would
 * move one float a cycle: the GEMMs' packing (gemm.c, gemm_bf16.c) and
 * the attention's keys (attention_simd.h).  For code compiled with AVX;
 * a macro, so that it takes the target of the function it is in. */
#ifndef DLT_CPU_TRANSPOSE8_H
#define DLT_CPU_TRANSPOSE8_H

#include <immintrin.h>

#define TRANSPOSE8(v)                                                                  \
	do {                                                                           \
		__m256 t0 = _mm256_unpacklo_ps(v[0], v[1]), t1 = _mm256_unpackhi_ps(v[0], v[1]); \
		__m256 t2 = _mm256_unpacklo_ps(v[2], v[3]), t3 = _mm256_unpackhi_ps(v[2], v[3]); \
		__m256 t4 = _mm256_unpacklo_ps(v[4], v[5]), t5 = _mm256_unpackhi_ps(v[4], v[5]); \
		__m256 t6 = _mm256_unpacklo_ps(v[6], v[7]), t7 = _mm256_unpackhi_ps(v[6], v[7]); \
		__m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee); \
		__m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee); \
		__m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee); \
		__m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee); \
		v[0] = _mm256_permute2f128_ps(u0, u4, 0x20);                           \
		v[1] = _mm256_permute2f128_ps(u1, u5, 0x20);                           \
		v[2] = _mm256_permute2f128_ps(u2, u6, 0x20);                           \
		v[3] = _mm256_permute2f128_ps(u3, u7, 0x20);                           \
		v[4] = _mm256_permute2f128_ps(u0, u4, 0x31);                           \
		v[5] = _mm256_permute2f128_ps(u1, u5, 0x31);                           \
		v[6] = _mm256_permute2f128_ps(u2, u6, 0x31);                           \
		v[7] = _mm256_permute2f128_ps(u3, u7, 0x31);                           \
	} while (0)

#endif
