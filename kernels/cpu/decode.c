/* Attention over a KV cache on the CPU: a task per (query, head), its
 * keys in chunks of KCHUNK, an online softmax between chunks (as flash
 * attention's).  Head sizes of whole AVX-512 or AVX2 vectors take the
 * register-blocked kernels of decode_simd.h; others the generic one
 * below, which sums the weighted values in the output row itself.  A
 * query's sums run in a fixed order on one thread, so the bits do not
 * depend on the number of threads.  Scratch: one chunk of scores on the
 * stack. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/cpu/decode.h"
#include "kernels/cpu/exp_neg.h"
#include "kernels/cpu/transformer.h"

#define KCHUNK 256
/* Below this much work (query-head pairs times keys) one thread does it */
#define PAR_MIN (1 << 19)

/* The helpers are inlined into decode_one's clones: called per key
 * through target_clones' dispatch, they took half of a batch's step */
static inline __attribute__((always_inline)) float dot_f(const float *a, const float *b, int n)
{
	float s = 0.0f;
	#pragma omp simd reduction(+:s)
	for (int c = 0; c < n; c++)
		s += a[c] * b[c];
	return s;
}

static inline __attribute__((always_inline)) void axpy_f(float *y, float a, const float *x,
							 int n)
{
	#pragma omp simd
	for (int c = 0; c < n; c++)
		y[c] += a * x[c];
}

static inline __attribute__((always_inline)) void scale_f(float *y, float a, int n)
{
	#pragma omp simd
	for (int c = 0; c < n; c++)
		y[c] *= a;
}

/* One query (row t) of one head: base points at the head's columns of
 * row 0, o at the query's D outputs */
__attribute__((target_clones("avx512f", "avx2", "default")))
static void decode_one(const float *base, float *o, int t, int C, int D, float scale)
{
	float s[KCHUNK], m = -INFINITY, l = 0.0f;
	size_t ld = (size_t)3 * C;
	const float *q = base + (size_t)t * ld;
	memset(o, 0, (size_t)D * sizeof(*o));
	for (int j0 = 0; j0 <= t; j0 += KCHUNK) {
		int nk = t + 1 - j0 < KCHUNK ? t + 1 - j0 : KCHUNK;
		float mx = m, alpha;
		for (int j = 0; j < nk; j++) {
			s[j] = dot_f(q, base + (size_t)(j0 + j) * ld + C, D) * scale;
			mx = s[j] > mx ? s[j] : mx;
		}
		alpha = expf(m - mx);
		if (alpha != 1.0f)
			scale_f(o, alpha, D);
		l *= alpha;
		for (int j = 0; j < nk; j++) {
			float p = expf(s[j] - mx);
			l += p;
			axpy_f(o, p, base + (size_t)(j0 + j) * ld + 2 * C, D);
		}
		m = mx;
	}
	scale_f(o, 1.0f / l, D);
}

#define DLT_EACH_ISA "kernels/cpu/decode_simd.h"
#include "kernels/cpu/each_isa.h"
#undef DLT_EACH_ISA

void dlt_cpu_attention_decode(const float *qkv, float *out, int q0, int n, int C, int H)
{
	int D = C / H;
	long tasks = (long)n * H;
	float scale = (float)(1.0 / sqrt(D));
	int lanes = dlt_cpu_attention_lanes(D);
	void (*one)(const float *, float *, int, int, int, float) =
		lanes == 16 ? decode_avx512 : lanes == 8 ? decode_avx2 : decode_one;
	#pragma omp parallel for schedule(dynamic) if (tasks * (q0 + n) * D >= PAR_MIN && tasks > 1)
	for (long task = 0; task < tasks; task++) {
		int i = (int)(task / H), h = (int)(task % H);
		one(qkv + (size_t)h * D, out + (size_t)i * C + (size_t)h * D, q0 + i, C, D,
		    scale);
	}
}
