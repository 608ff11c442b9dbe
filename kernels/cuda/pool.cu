/* Pooling by our own kernels, not cuDNN's: cuDNN's max pooling keeps no
 * argmax (our backward needs it, and its rule: the first of equal maxima,
 * a NaN wins, padding never does) and its average pooling need not sum
 * as the CPU does.  Forward: a thread per output, its window from
 * dlt_pool_window_at, the reference's loop.  Backward: a thread per
 * input gathers the outputs whose window holds it, in the order the CPU
 * adds them (outputs in row-major order), so no atomics and the CPU's
 * bits. */
#include "kernels/cuda/internal.h"
#include "kernels/common/pool.h"

static __global__ void maxpool_fwd(dlt_pool s, const float *x, float *y, int32_t *arg)
{
	size_t out = (size_t)s.oh * s.ow;
	GRID_STRIDE(o, (size_t)s.n * s.c * out) {
		size_t p = o / out;
		int oy = (int)(o % out) / s.ow, ox = (int)(o % out) % s.ow;
		const float *in = x + p * s.h * s.w;
		dlt_pool_window r = dlt_pool_window_at(&s, oy, ox);
		float best = -INFINITY;
		int32_t at = r.y0 * s.w + r.x0;
		for (int iy = r.y0; iy < r.y1; iy++) {
			for (int ix = r.x0; ix < r.x1; ix++) {
				float v = in[iy * s.w + ix];
				if (v > best || isnan(v)) {
					best = v;
					at = iy * s.w + ix;
				}
			}
		}
		y[o] = best;
		arg[o] = dlt_maxpool_arg(&s, best, at);
	}
}

static __global__ void avgpool_fwd(dlt_pool s, const float *x, float *y)
{
	size_t out = (size_t)s.oh * s.ow;
	GRID_STRIDE(o, (size_t)s.n * s.c * out) {
		size_t p = o / out;
		int oy = (int)(o % out) / s.ow, ox = (int)(o % out) % s.ow;
		const float *in = x + p * s.h * s.w;
		dlt_pool_window r = dlt_pool_window_at(&s, oy, ox);
		double acc = 0.0;
		for (int iy = r.y0; iy < r.y1; iy++)
			for (int ix = r.x0; ix < r.x1; ix++)
				acc += in[iy * s.w + ix];
		y[o] = (float)(acc / r.size);
	}
}

/* The outputs whose window (before clipping to the image) holds input
 * row i: o * stride - pad <= i < o * stride - pad + kernel. */
static __device__ void outputs_over(int i, int pad, int kernel, int stride, int outs, int *lo,
				    int *hi)
{
	int t = i + pad - kernel + 1;
	*lo = t <= 0 ? 0 : (t + stride - 1) / stride;
	*hi = (i + pad) / stride;
	if (*hi > outs - 1)
		*hi = outs - 1;
}

/* max: each output's gradient goes to its argmax (none where it is -1) */
static __global__ void maxpool_bwd(dlt_pool s, const float *dy, const int32_t *arg, float *dx)
{
	size_t plane = (size_t)s.h * s.w, out = (size_t)s.oh * s.ow;
	GRID_STRIDE(e, (size_t)s.n * s.c * plane) {
		size_t p = e / plane;
		int at = (int)(e % plane), iy = at / s.w, ix = at % s.w;
		int y0, y1, x0, x1;
		float acc = 0.0f;
		outputs_over(iy, s.ph, s.kh, s.sh, s.oh, &y0, &y1);
		outputs_over(ix, s.pw, s.kw, s.sw, s.ow, &x0, &x1);
		for (int oy = y0; oy <= y1; oy++)
			for (int ox = x0; ox <= x1; ox++) {
				size_t o = p * out + (size_t)oy * s.ow + ox;
				if (arg[o] == at)
					acc += dy[o];
			}
		dx[e] = acc;
	}
}

/* average: each output's gradient over its window's size, padding
 * counted, to every input in the window */
static __global__ void avgpool_bwd(dlt_pool s, const float *dy, float *dx)
{
	size_t plane = (size_t)s.h * s.w, out = (size_t)s.oh * s.ow;
	GRID_STRIDE(e, (size_t)s.n * s.c * plane) {
		size_t p = e / plane;
		int iy = (int)(e % plane) / s.w, ix = (int)(e % plane) % s.w;
		int y0, y1, x0, x1;
		float acc = 0.0f;
		outputs_over(iy, s.ph, s.kh, s.sh, s.oh, &y0, &y1);
		outputs_over(ix, s.pw, s.kw, s.sw, s.ow, &x0, &x1);
		for (int oy = y0; oy <= y1; oy++)
			for (int ox = x0; ox <= x1; ox++) {
				dlt_pool_window r = dlt_pool_window_at(&s, oy, ox);
				if (iy >= r.y0 && iy < r.y1 && ix >= r.x0 && ix < r.x1)
					acc += dy[p * out + (size_t)oy * s.ow + ox] / r.size;
			}
		dx[e] = acc;
	}
}

void cu_maxpool_forward(const dlt_pool *s, const float *x, float *y, int32_t *arg)
{
	size_t n = (size_t)s->n * s->c * s->oh * s->ow;
	if (!n)
		return;
	maxpool_fwd<<<cu_blocks(n), CU_THREADS, 0, cu.stream>>>(*s, x, y, arg);
	cu_launched("maxpool_forward");
}

void cu_maxpool_backward(const dlt_pool *s, const float *dy, const int32_t *arg, float *dx)
{
	size_t n = (size_t)s->n * s->c * s->h * s->w;
	if (!n)
		return;
	maxpool_bwd<<<cu_blocks(n), CU_THREADS, 0, cu.stream>>>(*s, dy, arg, dx);
	cu_launched("maxpool_backward");
}

void cu_avgpool_forward(const dlt_pool *s, const float *x, float *y)
{
	size_t n = (size_t)s->n * s->c * s->oh * s->ow;
	if (!n)
		return;
	avgpool_fwd<<<cu_blocks(n), CU_THREADS, 0, cu.stream>>>(*s, x, y);
	cu_launched("avgpool_forward");
}

void cu_avgpool_backward(const dlt_pool *s, const float *dy, float *dx)
{
	size_t n = (size_t)s->n * s->c * s->h * s->w;
	if (!n)
		return;
	avgpool_bwd<<<cu_blocks(n), CU_THREADS, 0, cu.stream>>>(*s, dy, dx);
	cu_launched("avgpool_backward");
}
