#include <math.h>
#include <string.h>

#include "kernels/common/philox.h"
#include "util.h"

/* Philox-4x32-10, the generator of the kernels too (so a dropout mask is
 * the same on CPU and GPU).  The counter's high half is the stream, so independent streams of one
 * seed (one per parameter, per loader, per epoch) never overlap. */
void dlt_rng_init(dlt_rng *r, uint64_t seed, uint64_t stream)
{
	r->key = seed;
	r->ctr = stream << 32;
	r->have = 0;
}

uint32_t dlt_rng_u32(dlt_rng *r)
{
	if (r->have == 0) {
		uint32_t key[2] = { (uint32_t)r->key, (uint32_t)(r->key >> 32) };
		r->buf[0] = (uint32_t)r->ctr;
		r->buf[1] = (uint32_t)(r->ctr >> 32);
		r->buf[2] = 0;
		r->buf[3] = 0;
		dlt_philox4x32_10(r->buf, key);
		r->ctr++;
		r->have = 4;
	}
	return r->buf[4 - r->have--];
}

float dlt_rng_uniform(dlt_rng *r)
{
	return (dlt_rng_u32(r) >> 8) * (1.0f / 16777216.0f);
}

uint32_t dlt_rng_below(dlt_rng *r, uint32_t n)
{
	/* Lemire's multiply-shift with rejection: unbiased, no division in
	 * the common case */
	uint64_t m = (uint64_t)dlt_rng_u32(r) * n;
	uint32_t lo = (uint32_t)m;
	if (lo < n) {
		uint32_t t = -n % n;
		while (lo < t) {
			m = (uint64_t)dlt_rng_u32(r) * n;
			lo = (uint32_t)m;
		}
	}
	return (uint32_t)(m >> 32);
}

void dlt_rng_permute(dlt_rng *r, uint32_t *idx, size_t n)
{
	for (size_t i = 0; i < n; i++)
		idx[i] = (uint32_t)i;
	for (size_t i = n; i > 1; i--) {
		uint32_t j = dlt_rng_below(r, (uint32_t)i);
		uint32_t t = idx[i - 1];
		idx[i - 1] = idx[j];
		idx[j] = t;
	}
}

/* dlt_rng_normals' math in float, vectorised by the compiler: a version
 * for AVX-512, one for AVX2 with FMA, one for any CPU, all of the same
 * bits (normals.h) */
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#pragma GCC push_options
#pragma GCC target("avx512f")
#define SFX avx512
#include "util/normals.h"
#undef SFX
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#define SFX avx2
#include "util/normals.h"
#undef SFX
#pragma GCC pop_options
#define SFX plain
#include "util/normals.h"
#undef SFX
#pragma GCC pop_options

void dlt_rng_normals(float *p, size_t n, float std, uint64_t seed, uint64_t stream)
{
	const uint64_t chunk = 4096;	/* blocks a task */
	uint64_t blocks = n / 4, tasks = (blocks + chunk - 1) / chunk;
	#pragma omp parallel for schedule(static) if (blocks > 4 * chunk)
	for (uint64_t t = 0; t < tasks; t++) {
		uint64_t b0 = t * chunk, nb = blocks - b0 < chunk ? blocks - b0 : chunk;
		if (__builtin_cpu_supports("avx512f"))
			normals_run_avx512(p + 4 * b0, std, seed, stream, b0, nb);
		else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
			normals_run_avx2(p + 4 * b0, std, seed, stream, b0, nb);
		else
			normals_run_plain(p + 4 * b0, std, seed, stream, b0, nb);
	}
	if (n % 4) {
		float last[4];
		normals_block_plain(last, std, seed, stream, blocks);
		memcpy(p + 4 * blocks, last, (n % 4) * sizeof(*p));
	}
}
