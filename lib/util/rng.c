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
