/* Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as
 * 1, 2, 3", SC'11) as one function that compiles as C and as CUDA, so the
 * host (dlt_rng in lib/util) and every kernel draw the same numbers from
 * the same (key, counter). */
#ifndef DLT_KERNELS_COMMON_PHILOX_H
#define DLT_KERNELS_COMMON_PHILOX_H

#include <stdint.h>

#ifndef DLT_HD
#ifdef __CUDACC__
#define DLT_HD __host__ __device__
#else
#define DLT_HD
#endif
#endif

/* Ten rounds on the counter c in place; key is the 64-bit seed as two
 * halves, low first. */
DLT_HD static inline void dlt_philox4x32_10(uint32_t c[4], const uint32_t key[2])
{
	uint32_t k0 = key[0], k1 = key[1];
#ifndef __CUDACC__
#pragma GCC unroll 10	/* no inner loop: a loop around it vectorises */
#endif
	for (int i = 0; i < 10; i++) {
		uint64_t p0 = (uint64_t)0xD2511F53u * c[0];
		uint64_t p1 = (uint64_t)0xCD9E8D57u * c[2];
		uint32_t n0 = (uint32_t)(p1 >> 32) ^ c[1] ^ k0;
		uint32_t n2 = (uint32_t)(p0 >> 32) ^ c[3] ^ k1;
		c[1] = (uint32_t)p1;
		c[3] = (uint32_t)p0;
		c[0] = n0;
		c[2] = n2;
		k0 += 0x9E3779B9u;
		k1 += 0xBB67AE85u;
	}
}

/* Block `block` (four numbers) of a kernel's stream: the counter is
 * (block, stream) as two 64-bit halves.  dlt_rng keeps the high half
 * zero, so a kernel stream other than 0 never meets a host stream. */
DLT_HD static inline void dlt_philox_block(uint64_t seed, uint64_t stream, uint64_t block,
					   uint32_t out[4])
{
	uint32_t key[2] = { (uint32_t)seed, (uint32_t)(seed >> 32) };
	out[0] = (uint32_t)block;
	out[1] = (uint32_t)(block >> 32);
	out[2] = (uint32_t)stream;
	out[3] = (uint32_t)(stream >> 32);
	dlt_philox4x32_10(out, key);
}

/* [0, 1) from the top 24 bits: exact in float, the same as dlt_rng_uniform */
DLT_HD static inline float dlt_u32_to_unit(uint32_t u)
{
	return (float)(u >> 8) * (1.0f / 16777216.0f);
}

#endif
