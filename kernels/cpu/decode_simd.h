/* Attention over a KV cache for one query of one head in W-lane vectors
 * (gcc vector extensions): decode.c includes this once per instruction
 * set (each_isa.h), with W and SFX (the functions' suffix) and the
 * target set.  The scores of W keys at a time: each key's products summed in a
 * vector, then the W vectors reduced together (reduce_, a transpose of
 * sums) rather than one horizontal sum a key.  The output's NV vectors
 * stay in registers over all the keys, in two sets (even and odd keys),
 * so that each addition need not wait for the one before. */

#include "kernels/cpu/vec_begin.h"

/* Lane i of the result: the sum of a[i]'s lanes */
static inline __attribute__((always_inline)) VT FN(reduce_)(const VT *a)
{
#if W == 16
	__m512 b[8], c[4], d[2], e;
	/* halves of keys j and j + 8; quarters of j, j + 8, j + 4, j + 12 */
	for (int j = 0; j < 8; j++)
		b[j] = _mm512_add_ps(_mm512_shuffle_f32x4((__m512)a[j], (__m512)a[j + 8], 0x44),
				     _mm512_shuffle_f32x4((__m512)a[j], (__m512)a[j + 8], 0xee));
	for (int j = 0; j < 4; j++)
		c[j] = _mm512_add_ps(_mm512_shuffle_f32x4(b[j], b[j + 4], 0x88),
				     _mm512_shuffle_f32x4(b[j], b[j + 4], 0xdd));
	for (int j = 0; j < 2; j++)
		d[j] = _mm512_add_ps(_mm512_shuffle_ps(c[j], c[j + 2], 0x44),
				     _mm512_shuffle_ps(c[j], c[j + 2], 0xee));
	e = _mm512_add_ps(_mm512_shuffle_ps(d[0], d[1], 0x88), _mm512_shuffle_ps(d[0], d[1], 0xdd));
	/* e's lane i holds key p(i), p its own inverse */
	return (VT)_mm512_permutexvar_ps(_mm512_setr_epi32(0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7,
							   12, 14, 13, 15), e);
#else
	__m256 h0 = _mm256_hadd_ps((__m256)a[0], (__m256)a[1]);
	__m256 h1 = _mm256_hadd_ps((__m256)a[2], (__m256)a[3]);
	__m256 h2 = _mm256_hadd_ps((__m256)a[4], (__m256)a[5]);
	__m256 h3 = _mm256_hadd_ps((__m256)a[6], (__m256)a[7]);
	__m256 g0 = _mm256_hadd_ps(h0, h1), g1 = _mm256_hadd_ps(h2, h3);
	return (VT)_mm256_add_ps(_mm256_permute2f128_ps(g0, g1, 0x20),
				 _mm256_permute2f128_ps(g0, g1, 0x31));
#endif
}

/* s[j] = exp(s[j] - m) for j < n; their sum */
static float FN(exp_chunk_)(float *s, int n, float m)
{
	float sum = 0.0f;
	#pragma omp simd reduction(+:sum)
	for (int j = 0; j < n; j++) {
		s[j] = exp_neg(s[j] - m);
		sum += s[j];
	}
	return sum;
}

/* Query t of the head whose columns start at base (row 0), its D = NV W
 * outputs to o */
static inline __attribute__((always_inline))
void FN(decode_nv_)(const float *base, float *o, int t, int C, float scale, const int NV)
{
	const size_t ld = (size_t)3 * C;
	const float *q = base + (size_t)t * ld, *k = base + C, *v = base + 2 * (size_t)C;
	float s[KCHUNK] __attribute__((aligned(64))), m = -INFINITY, l = 0.0f;
	VT qv[8], o0[8], o1[8];
	UNROLL for (int e = 0; e < NV; e++) {
		qv[e] = LD(q + e * W);
		o0[e] = o1[e] = SPLAT(0.0f);
	}
	for (int j0 = 0; j0 <= t; j0 += KCHUNK) {
		int nk = t + 1 - j0 < KCHUNK ? t + 1 - j0 : KCHUNK, j = 0;
		float mx, alpha;
		VT vmax = SPLAT(m);
		for (; j + W <= nk; j += W) {
			VT acc[W], r;
			UNROLL for (int u = 0; u < W; u++) {
				const float *kr = k + (size_t)(j0 + j + u) * ld;
				VT x = qv[0] * LD(kr);
				UNROLL for (int e = 1; e < NV; e++)
					x += qv[e] * LD(kr + e * W);
				acc[u] = x;
			}
			r = FN(reduce_)(acc) * SPLAT(scale);
			ST(s + j, r);
			vmax = VMAX(vmax, r);
		}
		mx = vmax[0];
		for (int i = 1; i < W; i++)
			mx = vmax[i] > mx ? vmax[i] : mx;
		for (; j < nk; j++) {	/* the last keys, one at a time */
			const float *kr = k + (size_t)(j0 + j) * ld;
			VT x = qv[0] * LD(kr);
			float d = 0.0f;
			UNROLL for (int e = 1; e < NV; e++)
				x += qv[e] * LD(kr + e * W);
			for (int i = 0; i < W; i++)
				d += x[i];
			s[j] = d * scale;
			mx = s[j] > mx ? s[j] : mx;
		}
		alpha = expf(m - mx);
		l = l * alpha + FN(exp_chunk_)(s, nk, mx);
		if (alpha != 1.0f)
			UNROLL for (int e = 0; e < NV; e++) {
				o0[e] *= SPLAT(alpha);
				o1[e] *= SPLAT(alpha);
			}
		for (j = 0; j + 2 <= nk; j += 2) {
			const float *v0 = v + (size_t)(j0 + j) * ld, *v1 = v0 + ld;
			VT p0 = SPLAT(s[j]), p1 = SPLAT(s[j + 1]);
			UNROLL for (int e = 0; e < NV; e++) {
				o0[e] += p0 * LD(v0 + e * W);
				o1[e] += p1 * LD(v1 + e * W);
			}
		}
		if (j < nk) {
			const float *v0 = v + (size_t)(j0 + j) * ld;
			VT p0 = SPLAT(s[j]);
			UNROLL for (int e = 0; e < NV; e++)
				o0[e] += p0 * LD(v0 + e * W);
		}
		m = mx;
	}
	UNROLL for (int e = 0; e < NV; e++)
		ST(o + e * W, (o0[e] + o1[e]) * SPLAT(1.0f / l));
}

/* D = W .. 8 W */
static void FN(decode_)(const float *base, float *o, int t, int C, int D, float scale)
{
	switch (D / W) {
	case 1: FN(decode_nv_)(base, o, t, C, scale, 1); break;
	case 2: FN(decode_nv_)(base, o, t, C, scale, 2); break;
	case 3: FN(decode_nv_)(base, o, t, C, scale, 3); break;
	case 4: FN(decode_nv_)(base, o, t, C, scale, 4); break;
	case 5: FN(decode_nv_)(base, o, t, C, scale, 5); break;
	case 6: FN(decode_nv_)(base, o, t, C, scale, 6); break;
	case 7: FN(decode_nv_)(base, o, t, C, scale, 7); break;
	default: FN(decode_nv_)(base, o, t, C, scale, 8); break;
	}
}

#include "kernels/cpu/vec_end.h"
