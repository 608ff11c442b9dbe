/* Pooling: each (sample, channel) plane on its own, the planes shared
 * among threads.  Every output is computed by one thread in the
 * reference's order, so the results are the reference's bits on any
 * number of threads.  2x2 max pooling with stride 2, the common case, has
 * a loop of its own that the compiler vectorises. */
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/common/pool.h"
#include "kernels/cpu/layers.h"

static int pool_is_2x2(const dlt_pool *s)
{
	return s->kh == 2 && s->kw == 2 && s->sh == 2 && s->sw == 2 && s->ph == 0 &&
	       s->pw == 0;
}

/* One output row of 2x2 pooling.  The first of equal maxima wins and so
 * does a NaN, as in the general loop; picks, not branches, so it
 * vectorises. */
static void maxpool_row_2x2(const float *in, int w, int oy, int ow, float *y, int32_t *arg)
{
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
		arg[ox] = at;
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
			arg[oy * s->ow + ox] = at;
		}
	}
}

void dlt_cpu_maxpool_forward(const dlt_pool *s, const float *x, float *y, int32_t *arg)
{
	size_t plane = (size_t)s->h * s->w, out = (size_t)s->oh * s->ow;
	int fast = pool_is_2x2(s);
	#pragma omp parallel for schedule(static)
	for (int p = 0; p < s->n * s->c; p++) {
		const float *in = x + p * plane;
		if (!fast) {
			maxpool_plane(s, in, y + p * out, arg + p * out);
			continue;
		}
		for (int oy = 0; oy < s->oh; oy++)
			maxpool_row_2x2(in, s->w, oy, s->ow, y + p * out + (size_t)oy * s->ow,
					arg + p * out + (size_t)oy * s->ow);
	}
}

void dlt_cpu_maxpool_backward(const dlt_pool *s, const float *dy, const int32_t *arg,
			      float *dx)
{
	size_t plane = (size_t)s->h * s->w, out = (size_t)s->oh * s->ow;
	#pragma omp parallel for schedule(static)
	for (int p = 0; p < s->n * s->c; p++) {
		float *d = dx + p * plane;
		memset(d, 0, plane * sizeof(*d));
		for (size_t o = 0; o < out; o++)
			d[arg[p * out + o]] += dy[p * out + o];
	}
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
