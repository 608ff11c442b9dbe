/* Vectors for the kernel tests (test-kernels, test-layers, test/gpu's
 * test-cuda): random, copied and NaN-filled ones, and the worst relative
 * difference of two.  Each test file seeds its own rng. */
#ifndef DLT_TEST_VEC_H
#define DLT_TEST_VEC_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

static dlt_rng rng;

/* A few bytes more than asked, so that n = 0 is a real allocation */
static __attribute__((unused)) float *randv(size_t n, float lo, float hi)
{
	float *p = malloc(n * sizeof(float) + 4);
	for (size_t i = 0; i < n; i++)
		p[i] = lo + (hi - lo) * dlt_rng_uniform(&rng);
	return p;
}

static __attribute__((unused)) float *copyv(const float *p, size_t n)
{
	float *q = malloc(n * sizeof(float) + 4);
	memcpy(q, p, n * sizeof(float));
	return q;
}

/* NaN-filled: an output the kernel forgets to write shows */
static __attribute__((unused)) float *nanv(size_t n)
{
	float *p = malloc(n * sizeof(float) + 4);
	for (size_t i = 0; i < n; i++)
		p[i] = NAN;
	return p;
}

/* Worst |got - want| / (1 + |want|); a NaN where the other has none is
 * infinitely wrong, NaN in both agrees, and so do equal infinities. */
static __attribute__((unused)) double diff(const float *got, const float *want, size_t n)
{
	double worst = 0.0;
	for (size_t i = 0; i < n; i++) {
		double d;
		if (isnan(got[i]) || isnan(want[i])) {
			if (isnan(got[i]) != isnan(want[i]))
				return INFINITY;
			continue;
		}
		if (got[i] == want[i])
			continue;
		d = fabs((double)got[i] - want[i]) / (1.0 + fabs((double)want[i]));
		if (isinf(d))
			return INFINITY;
		worst = fmax(worst, d);
	}
	return worst;
}

#endif
