/* The reference of attention over a KV cache: each query's row of scores
 * in double, as dlt_ref_attention_forward computes it. */
#include <math.h>
#include <stdlib.h>

#include "kernels/cpu/decode.h"

void dlt_ref_attention_decode(const float *qkv, float *out, int q0, int n, int C, int H)
{
	int D = C / H;
	size_t ld = (size_t)3 * C;
	double scale = 1.0 / sqrt(D), *s = malloc(((size_t)q0 + n + 1) * sizeof(double));
	double *o = malloc(((size_t)D + 1) * sizeof(double));
	if (!s || !o) {	/* a reference for tests: no error path to report through */
		free(s);
		free(o);
		abort();
	}
	for (int i = 0; i < n; i++)
	for (int h = 0; h < H; h++) {
		const float *base = qkv + (size_t)h * D, *q = base + (size_t)(q0 + i) * ld;
		int keys = q0 + i + 1;
		double mx = -INFINITY, sum = 0.0;
		for (int j = 0; j < keys; j++) {
			const float *k = base + (size_t)j * ld + C;
			double d = 0.0;
			for (int e = 0; e < D; e++)
				d += (double)q[e] * k[e];
			s[j] = d * scale;
			mx = fmax(mx, s[j]);
		}
		for (int e = 0; e < D; e++)
			o[e] = 0.0;
		for (int j = 0; j < keys; j++) {
			const float *v = base + (size_t)j * ld + 2 * C;
			double p = exp(s[j] - mx);
			sum += p;
			for (int e = 0; e < D; e++)
				o[e] += p * v[e];
		}
		for (int e = 0; e < D; e++)
			out[(size_t)i * C + (size_t)h * D + e] = (float)(o[e] / sum);
	}
	free(s);
	free(o);
}
