/* Pooling: each (sample, channel) plane on its own, the planes shared
 * among threads.  Every output is computed by one thread in the
 * reference's order, so the results are the reference's bits on any
 * number of threads.  2x2 max pooling with stride 2, the common case, has
 * a loop of its own that the compiler vectorises, and with AVX2 one that
 * takes 8 outputs of a row at a time, their inputs' even and odd columns
 * split with shuffles (a row of 7, the CNN's second pool, under a mask;
 * the compiler's loop would run it scalar). */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/common/pool.h"
#include "kernels/cpu/layers.h"
#include "kernels/cpu/pool_avx2.h"

static int pool_is_2x2(const dlt_pool *s)
{
	return s->kh == 2 && s->kw == 2 && s->sh == 2 && s->sw == 2 && s->ph == 0 &&
	       s->pw == 0;
}

/* One output row of 2x2 pooling.  The first of equal maxima wins and so
 * does a NaN, as in the general loop; picks, not branches, so it
 * vectorises. */
static void maxpool_row_2x2(const dlt_pool *s, const float *in, int oy, float *y, int32_t *arg)
{
	int w = s->w, ow = s->ow;
	const float *r0 = in + (size_t)2 * oy * w, *r1 = r0 + w;
	int32_t base = 2 * oy * w;
	#pragma omp simd
	for (int ox = 0; ox < ow; ox++) {
		float best = r0[2 * ox], v;
		int32_t at = base + 2 * ox;
		int take;
		v = r0[2 * ox + 1];
		take = v > best || v != v;
		best = take ? v : best;
		at = take ? base + 2 * ox + 1 : at;
		v = r1[2 * ox];
		take = v > best || v != v;
		best = take ? v : best;
		at = take ? base + w + 2 * ox : at;
		v = r1[2 * ox + 1];
		take = v > best || v != v;
		best = take ? v : best;
		at = take ? base + w + 2 * ox + 1 : at;
		y[ox] = best;
		arg[ox] = dlt_maxpool_arg(s, best, at);
	}
}

/* Lanes [0, n) set: the mask of a row's last, partial group of 8 */
__attribute__((target("avx2")))
static __m256i lanes_below(int n)
{
	return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* The even and odd floats of 16 at p, loaded where mask lo and hi let
 * (masked: all 16 are not known to lie in the plane) */
__attribute__((target("avx2")))
static void load_pairs(const float *p, int masked, __m256i lo, __m256i hi, __m256 *even,
		       __m256 *odd)
{
	__m256 a = masked ? _mm256_maskload_ps(p, lo) : _mm256_loadu_ps(p);
	__m256 b = masked ? _mm256_maskload_ps(p + 8, hi) : _mm256_loadu_ps(p + 8);
	*even = _mm256_castpd_ps(_mm256_permute4x64_pd(
		_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xd8));
	*odd = _mm256_castpd_ps(_mm256_permute4x64_pd(
		_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xdd)), 0xd8));
}

/* One plane of 2x2 pooling, maxpool_row_2x2's results */
__attribute__((target("avx2")))
static void maxpool_plane_2x2_avx2(const dlt_pool *s, const float *in, float *y, int32_t *arg)
{
	int w = s->w, ow = s->ow, plane = s->h * s->w, out = s->oh * s->ow;
	__m256i all = _mm256_set1_epi32(-1);
	for (int oy = 0; oy < s->oh; oy++) {
		const float *r0 = in + (size_t)2 * oy * w, *r1 = r0 + w;
		for (int ox = 0; ox < ow; ox += 8) {
			int n = ow - ox < 8 ? ow - ox : 8;
			__m256i lo = all, hi = all;
			__m256 e0, o0, e1, o1, best;
			__m256i at;
			int o = oy * ow + ox;
			int masked = 2 * oy * w + w + 2 * ox + 16 > plane;
			if (masked) {
				lo = lanes_below(2 * n);
				hi = lanes_below(2 * n - 8);
			}
			load_pairs(r0 + 2 * ox, masked, lo, hi, &e0, &o0);
			load_pairs(r1 + 2 * ox, masked, lo, hi, &e1, &o1);
			best = dlt_max2x2_avx2(s, e0, o0, e1, o1, 2 * oy * w + 2 * ox, w, &at);
			if (o + 8 <= out) {
				_mm256_storeu_ps(y + o, best);
				_mm256_storeu_si256((__m256i *)(arg + o), at);
			} else {
				float tb[8];
				int32_t ta[8];
				_mm256_storeu_ps(tb, best);
				_mm256_storeu_si256((__m256i *)ta, at);
				memcpy(y + o, tb, n * sizeof(*tb));
				memcpy(arg + o, ta, n * sizeof(*ta));
			}
		}
	}
}

/* The backward of one plane of 2x2 pooling whose windows tile it (h =
 * 2 oh, w = 2 ow), each input written once: dy + 0 where arg picked it
 * (the + 0 of the general loop's dx = 0, dx += dy, for the bits of -0),
 * else 0.  A row's partial group stores 16 floats all the same, into
 * the start of the next row: the groups go from the last, so that the
 * first then writes that start again, and the plane's last row, whose
 * next is another plane, goes through a buffer.  Rows of 8 floats or
 * more (ow >= 4), so that the spill of the last row but one stays in
 * the plane. */
__attribute__((target("avx2")))
static void maxpool_back_2x2_avx2(const dlt_pool *s, const float *dy, const int32_t *arg, float *d)
{
	int w = s->w, ow = s->ow, plane = s->h * s->w, out = s->oh * s->ow;
	__m256i two = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
	__m256 zero = _mm256_setzero_ps();
	for (int oy = 0; oy < s->oh; oy++) {
		float *r0 = d + (size_t)2 * oy * w, *r1 = r0 + w;
		for (int ox = (ow - 1) / 8 * 8; ox >= 0; ox -= 8) {
			int n = ow - ox < 8 ? ow - ox : 8;
			int o = oy * ow + ox;
			__m256i i00 = _mm256_add_epi32(_mm256_set1_epi32(2 * oy * w + 2 * ox), two);
			__m256i i01 = _mm256_add_epi32(i00, _mm256_set1_epi32(1));
			__m256i i10 = _mm256_add_epi32(i00, _mm256_set1_epi32(w));
			__m256i i11 = _mm256_add_epi32(i10, _mm256_set1_epi32(1));
			__m256i a;
			__m256 g;
			if (o + 8 <= out) {
				a = _mm256_loadu_si256((const __m256i *)(arg + o));
				g = _mm256_loadu_ps(dy + o);
			} else {
				__m256i m = lanes_below(n);
				a = _mm256_maskload_epi32(arg + o, m);
				g = _mm256_maskload_ps(dy + o, m);
			}
			g = _mm256_add_ps(g, zero);
			__m256 e0 = _mm256_and_ps(g, _mm256_castsi256_ps(_mm256_cmpeq_epi32(a, i00)));
			__m256 o0 = _mm256_and_ps(g, _mm256_castsi256_ps(_mm256_cmpeq_epi32(a, i01)));
			__m256 e1 = _mm256_and_ps(g, _mm256_castsi256_ps(_mm256_cmpeq_epi32(a, i10)));
			__m256 o1 = _mm256_and_ps(g, _mm256_castsi256_ps(_mm256_cmpeq_epi32(a, i11)));
			__m256 l0 = _mm256_unpacklo_ps(e0, o0), h0 = _mm256_unpackhi_ps(e0, o0);
			__m256 l1 = _mm256_unpacklo_ps(e1, o1), h1 = _mm256_unpackhi_ps(e1, o1);
			_mm256_storeu_ps(r0 + 2 * ox, _mm256_permute2f128_ps(l0, h0, 0x20));
			_mm256_storeu_ps(r0 + 2 * ox + 8, _mm256_permute2f128_ps(l0, h0, 0x31));
			if (2 * oy * w + w + 2 * ox + 16 <= plane) {
				_mm256_storeu_ps(r1 + 2 * ox, _mm256_permute2f128_ps(l1, h1, 0x20));
				_mm256_storeu_ps(r1 + 2 * ox + 8, _mm256_permute2f128_ps(l1, h1, 0x31));
			} else {
				float t[16];
				_mm256_storeu_ps(t, _mm256_permute2f128_ps(l1, h1, 0x20));
				_mm256_storeu_ps(t + 8, _mm256_permute2f128_ps(l1, h1, 0x31));
				memcpy(r1 + 2 * ox, t, 2 * n * sizeof(*t));
			}
		}
	}
}

static void maxpool_plane(const dlt_pool *s, const float *in, float *y, int32_t *arg)
{
	for (int oy = 0; oy < s->oh; oy++) {
		for (int ox = 0; ox < s->ow; ox++) {
			dlt_pool_window r = dlt_pool_window_at(s, oy, ox);
			float best = -INFINITY;
			int32_t at = r.y0 * s->w + r.x0;
			for (int iy = r.y0; iy < r.y1; iy++) {
				for (int ix = r.x0; ix < r.x1; ix++) {
					float v = in[iy * s->w + ix];
					if (v > best || isnan(v)) {
						best = v;
						at = iy * s->w + ix;
					}
				}
			}
			y[oy * s->ow + ox] = best;
			arg[oy * s->ow + ox] = dlt_maxpool_arg(s, best, at);
		}
	}
}

/* Whether the AVX2 loop pools planes of s: any 2x2 pool, the rows of 7
 * of the CNN's second pool too, which the compiler's loop runs scalar */
static int pool_avx2(const dlt_pool *s)
{
	return pool_is_2x2(s) && __builtin_cpu_supports("avx2");
}

/* Whether backward's planes go through maxpool_back_2x2_avx2 */
static int pool_back_tiled(const dlt_pool *s)
{
	return pool_is_2x2(s) && s->h == 2 * s->oh && s->w == 2 * s->ow && s->ow >= 4 &&
	       __builtin_cpu_supports("avx2");
}

static void pool_plane(const dlt_pool *s, int avx2, const float *in, float *y, int32_t *arg)
{
	if (avx2) {
		maxpool_plane_2x2_avx2(s, in, y, arg);
		return;
	}
	if (!pool_is_2x2(s)) {
		maxpool_plane(s, in, y, arg);
		return;
	}
	for (int oy = 0; oy < s->oh; oy++)
		maxpool_row_2x2(s, in, oy, y + (size_t)oy * s->ow, arg + (size_t)oy * s->ow);
}

static void pool_back_plane(const dlt_pool *s, int tiled, const float *dy, const int32_t *arg,
			    float *d)
{
	size_t plane = (size_t)s->h * s->w, out = (size_t)s->oh * s->ow;
	if (tiled) {
		maxpool_back_2x2_avx2(s, dy, arg, d);
		return;
	}
	memset(d, 0, plane * sizeof(*d));
	for (size_t o = 0; o < out; o++)
		if (arg[o] >= 0)
			d[arg[o]] += dy[o];
}

void dlt_cpu_maxpool_plane(const dlt_pool *s, const float *in, float *y, int32_t *arg)
{
	pool_plane(s, pool_avx2(s), in, y, arg);
}

void dlt_cpu_maxpool_back_plane(const dlt_pool *s, const float *dy, const int32_t *arg, float *dx)
{
	pool_back_plane(s, pool_back_tiled(s), dy, arg, dx);
}

void dlt_cpu_maxpool_forward(const dlt_pool *s, const float *x, float *y, int32_t *arg)
{
	size_t plane = (size_t)s->h * s->w, out = (size_t)s->oh * s->ow;
	int avx2 = pool_avx2(s);
	#pragma omp parallel for schedule(dynamic, 32)
	for (int p = 0; p < s->n * s->c; p++)
		pool_plane(s, avx2, x + p * plane, y + p * out, arg + p * out);
}

void dlt_cpu_maxpool_backward(const dlt_pool *s, const float *dy, const int32_t *arg,
			      float *dx)
{
	size_t plane = (size_t)s->h * s->w, out = (size_t)s->oh * s->ow;
	int tiled = pool_back_tiled(s);
	#pragma omp parallel for schedule(dynamic, 32)
	for (int p = 0; p < s->n * s->c; p++)
		pool_back_plane(s, tiled, dy + p * out, arg + p * out, dx + p * plane);
}

/* Sums in double, in the reference's order */
void dlt_cpu_avgpool_forward(const dlt_pool *s, const float *x, float *y)
{
	size_t plane = (size_t)s->h * s->w, out = (size_t)s->oh * s->ow;
	#pragma omp parallel for schedule(static)
	for (int p = 0; p < s->n * s->c; p++) {
		const float *in = x + p * plane;
		for (int oy = 0; oy < s->oh; oy++) {
			for (int ox = 0; ox < s->ow; ox++) {
				dlt_pool_window r = dlt_pool_window_at(s, oy, ox);
				double acc = 0.0;
				for (int iy = r.y0; iy < r.y1; iy++)
					for (int ix = r.x0; ix < r.x1; ix++)
						acc += in[iy * s->w + ix];
				y[p * out + oy * s->ow + ox] = (float)(acc / r.size);
			}
		}
	}
}

void dlt_cpu_avgpool_backward(const dlt_pool *s, const float *dy, float *dx)
{
	size_t plane = (size_t)s->h * s->w, out = (size_t)s->oh * s->ow;
	#pragma omp parallel for schedule(static)
	for (int p = 0; p < s->n * s->c; p++) {
		float *d = dx + p * plane;
		memset(d, 0, plane * sizeof(*d));
		for (int oy = 0; oy < s->oh; oy++) {
			for (int ox = 0; ox < s->ow; ox++) {
				dlt_pool_window r = dlt_pool_window_at(s, oy, ox);
				float g = dy[p * out + oy * s->ow + ox] / r.size;
				for (int iy = r.y0; iy < r.y1; iy++)
					for (int ix = r.x0; ix < r.x1; ix++)
						d[iy * s->w + ix] += g;
			}
		}
	}
}
