/* Convolution as GEMM over patches (im2col), the batch cut into chunks
 * of CONV_CHUNK samples, one chunk per task.
 *
 * A sample's patches, col [c kh kw, oh ow], go to its chunk's slot of the
 * workspace (reused sample after sample while it is in cache).  Forward:
 * y_n = W col per group, then bias and activation on y_n's rows.
 * Backward: each chunk sums dy_n col^T over its samples into its own
 * partial dW; the partials are added in chunk order afterwards.  dcol =
 * W^T dy_n overwrites the slot and col2im adds it into dx_n.
 *
 * Every GEMM runs inside the parallel region, on one thread, and the
 * chunks do not depend on the number of threads: the results are the same
 * bits on any number of threads.  1x1 kernels with stride 1 and no
 * padding need no patches: x_n is col. */
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/common/math.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/layers.h"

static int conv_is_pointwise(const dlt_conv *s)
{
	return s->kh == 1 && s->kw == 1 && s->sh == 1 && s->sw == 1 && s->ph == 0 &&
	       s->pw == 0;
}

/* Output columns [lo, hi) whose input column ox sw - pw + off lies in [0, w) */
static void conv_span(int ow, int w, int sw, int pw, int off, int *lo, int *hi)
{
	int first = pw - off, last = w - 1 + pw - off;	/* bounds on ox sw */
	*lo = first <= 0 ? 0 : (first + sw - 1) / sw;
	*hi = last < 0 ? 0 : last / sw + 1;
	if (*hi > ow)
		*hi = ow;
	if (*lo > *hi)
		*lo = *hi;
}

/* With stride 1 and ow = w (3x3 with padding 1, say) a patch row is its
 * input plane shifted: output rows [y0, y1) read the plane from first on,
 * in one piece, except for the columns outside [lo, hi), which wrap
 * around to the next or previous row (and may lie outside the plane).
 * Row by row it would be a few floats per call. */
typedef struct conv_shift {
	int y0, y1, lo, hi;
	long first;
} conv_shift;

static conv_shift conv_shifted(const dlt_conv *s, int ky, int kx)
{
	conv_shift t;
	int shift = ky * s->dh - s->ph;
	t.y0 = shift >= 0 ? 0 : -shift < s->oh ? -shift : s->oh;
	t.y1 = s->h - shift < s->oh ? s->h - shift : s->oh;
	if (t.y1 < t.y0)
		t.y1 = t.y0;
	t.first = (long)(t.y0 + shift) * s->w + kx * s->dw - s->pw;
	conv_span(s->ow, s->w, 1, s->pw, kx * s->dw, &t.lo, &t.hi);
	return t;
}

/* out[oy][ox] = 0 for the wrapped columns of rows [y0, y1) */
static void conv_zero_wrapped(const dlt_conv *s, const conv_shift *t, float *out)
{
	for (int oy = t->y0; oy < t->y1; oy++) {
		float *row = out + (size_t)oy * s->ow;
		for (int ox = 0; ox < t->lo; ox++)
			row[ox] = 0.0f;
		for (int ox = t->hi; ox < s->ow; ox++)
			row[ox] = 0.0f;
	}
}

static void im2col_shifted(const dlt_conv *s, const float *plane, float *out, int ky, int kx)
{
	conv_shift t = conv_shifted(s, ky, kx);
	long size = (long)s->h * s->w, end = t.first + (long)(t.y1 - t.y0) * s->ow;
	long a = t.first < 0 ? 0 : t.first, b = end < size ? end : size;
	memset(out, 0, (size_t)t.y0 * s->ow * sizeof(*out));
	if (a < b)
		memcpy(out + (size_t)t.y0 * s->ow + (a - t.first), plane + a,
		       (b - a) * sizeof(*out));
	conv_zero_wrapped(s, &t, out);
	memset(out + (size_t)t.y1 * s->ow, 0, (size_t)(s->oh - t.y1) * s->ow * sizeof(*out));
}

/* The adjoint: the wrapped columns of g (scratch) are zeroed, then added
 * in one piece. */
static void col2im_shifted(const dlt_conv *s, float *g, float *plane, int ky, int kx)
{
	conv_shift t = conv_shifted(s, ky, kx);
	long size = (long)s->h * s->w, end = t.first + (long)(t.y1 - t.y0) * s->ow;
	long a = t.first < 0 ? 0 : t.first, b = end < size ? end : size;
	const float *from = g + (size_t)t.y0 * s->ow;
	conv_zero_wrapped(s, &t, g);
	#pragma omp simd
	for (long i = a; i < b; i++)
		plane[i] += from[i - t.first];
}

/* Patches of one sample x [c, h, w]: row (ci, ky, kx) of col [c kh kw,
 * oh ow] holds, for each output pixel, the input it meets under that
 * kernel tap (0 in the padding). */
static void im2col(const dlt_conv *s, const float *x, float *col)
{
	int shifted = s->sh == 1 && s->sw == 1 && s->ow == s->w;
	size_t r = 0;
	for (int ci = 0; ci < s->c; ci++) {
		const float *plane = x + (size_t)ci * s->h * s->w;
		for (int ky = 0; ky < s->kh; ky++) {
			for (int kx = 0; kx < s->kw; kx++, r++) {
				int off = kx * s->dw - s->pw, lo, hi;
				if (shifted) {
					im2col_shifted(s, plane, col + r * s->oh * s->ow, ky, kx);
					continue;
				}
				conv_span(s->ow, s->w, s->sw, s->pw, kx * s->dw, &lo, &hi);
				for (int oy = 0; oy < s->oh; oy++) {
					float *out = col + (r * s->oh + oy) * s->ow;
					int iy = oy * s->sh - s->ph + ky * s->dh;
					const float *in;
					if (iy < 0 || iy >= s->h) {
						memset(out, 0, s->ow * sizeof(*out));
						continue;
					}
					in = plane + (size_t)iy * s->w;
					memset(out, 0, lo * sizeof(*out));
					if (s->sw == 1)
						memcpy(out + lo, in + lo + off,
						       (hi - lo) * sizeof(*out));
					else
						for (int ox = lo; ox < hi; ox++)
							out[ox] = in[ox * s->sw + off];
					memset(out + hi, 0, (s->ow - hi) * sizeof(*out));
				}
			}
		}
	}
}

/* The adjoint of im2col: dx [c, h, w] = the sum of the patches' gradients
 * over the taps that read each input, in a fixed order.  col is scratch. */
static void col2im(const dlt_conv *s, float *col, float *dx)
{
	int shifted = s->sh == 1 && s->sw == 1 && s->ow == s->w;
	size_t r = 0;
	memset(dx, 0, (size_t)s->c * s->h * s->w * sizeof(*dx));
	for (int ci = 0; ci < s->c; ci++) {
		float *plane = dx + (size_t)ci * s->h * s->w;
		for (int ky = 0; ky < s->kh; ky++) {
			for (int kx = 0; kx < s->kw; kx++, r++) {
				int off = kx * s->dw - s->pw, lo, hi;
				if (shifted) {
					col2im_shifted(s, col + r * s->oh * s->ow, plane, ky, kx);
					continue;
				}
				conv_span(s->ow, s->w, s->sw, s->pw, kx * s->dw, &lo, &hi);
				for (int oy = 0; oy < s->oh; oy++) {
					const float *g = col + (r * s->oh + oy) * s->ow;
					int iy = oy * s->sh - s->ph + ky * s->dh;
					float *in;
					if (iy < 0 || iy >= s->h)
						continue;
					in = plane + (size_t)iy * s->w;
					if (s->sw == 1) {
						#pragma omp simd
						for (int ox = lo; ox < hi; ox++)
							in[ox + off] += g[ox];
					} else {
						for (int ox = lo; ox < hi; ox++)
							in[ox * s->sw + off] += g[ox];
					}
				}
			}
		}
	}
}

/* y = act(y + b) over one output channel's plane */
static void conv_bias_act(float *y, float b, int n, int act, float slope)
{
	int i;
	switch (act) {
	case DLT_ACT_RELU:
		#pragma omp simd
		for (i = 0; i < n; i++)
			y[i] = dlt_relu(y[i] + b);
		break;
	case DLT_ACT_LEAKY_RELU:
		#pragma omp simd
		for (i = 0; i < n; i++)
			y[i] = dlt_leaky_relu(y[i] + b, slope);
		break;
	default:
		for (i = 0; i < n; i++)
			y[i] = dlt_act(y[i] + b, act, slope);
	}
}

/* Samples per task: sums of dW in a fixed order; small enough that a
 * training batch gives every thread work. */
#define CONV_CHUNK 4
/* Floats of dW summed at a time */
#define DW_BLOCK 256

static int conv_chunks(const dlt_conv *s)
{
	return (s->n + CONV_CHUNK - 1) / CONV_CHUNK;
}

static size_t conv_col_floats(const dlt_conv *s)
{
	return conv_is_pointwise(s) ? 0 : (size_t)s->c * s->kh * s->kw * s->oh * s->ow;
}

size_t dlt_cpu_conv_workspace(const dlt_conv *s)
{
	size_t wn = (size_t)s->k * (s->c / s->groups) * s->kh * s->kw;
	return (size_t)conv_chunks(s) * (conv_col_floats(s) + wn);
}

void dlt_cpu_conv_forward(int prec, const dlt_conv *s, const float *x, const float *w, const float *b,
			  float *y, int act, float slope, float *work)
{
	int kg = s->k / s->groups, kk = s->c / s->groups * s->kh * s->kw;
	int p = s->oh * s->ow, chunks = conv_chunks(s);

	#pragma omp parallel for schedule(static)
	for (int ch = 0; ch < chunks; ch++) {
		float *slot = work + ch * conv_col_floats(s);
		for (int n = ch * CONV_CHUNK; n < s->n && n < (ch + 1) * CONV_CHUNK; n++) {
			const float *xn = x + (size_t)n * s->c * s->h * s->w, *col = xn;
			float *yn = y + (size_t)n * s->k * p;
			if (!conv_is_pointwise(s)) {
				im2col(s, xn, slot);
				col = slot;
			}
			for (int g = 0; g < s->groups; g++)
				dlt_cpu_sgemm(prec, 0, 0, kg, p, kk, 1.0f, w + (size_t)g * kg * kk, kk,
					      col + (size_t)g * kk * p, p, 0.0f,
					      yn + (size_t)g * kg * p, p);
			for (int k = 0; k < s->k; k++)
				conv_bias_act(yn + (size_t)k * p, b ? b[k] : 0.0f, p, act, slope);
		}
	}
}

/* db[k]: over the batch in order, over each plane in vectorised lanes */
static void conv_bias_grad(const dlt_conv *s, const float *dy, float *db)
{
	int p = s->oh * s->ow;
	#pragma omp parallel for schedule(static)
	for (int k = 0; k < s->k; k++) {
		double acc = 0.0;
		for (int n = 0; n < s->n; n++) {
			const float *row = dy + ((size_t)n * s->k + k) * p;
			double plane = 0.0;
			#pragma omp simd reduction(+:plane)
			for (int i = 0; i < p; i++)
				plane += row[i];
			acc += plane;
		}
		db[k] = (float)acc;
	}
}

/* One chunk's samples: its partial dW and dx. */
static void conv_backward_chunk(int prec, const dlt_conv *s, const float *x, const float *w,
				const float *dy, float *dx, float *slot, float *part, int ch)
{
	int kg = s->k / s->groups, kk = s->c / s->groups * s->kh * s->kw;
	int p = s->oh * s->ow, first = ch * CONV_CHUNK;
	for (int n = first; n < s->n && n < first + CONV_CHUNK; n++) {
		const float *xn = x + (size_t)n * s->c * s->h * s->w, *col = xn;
		const float *dyn = dy + (size_t)n * s->k * p;
		float *dxn = dx ? dx + (size_t)n * s->c * s->h * s->w : NULL;
		float *dcol = slot;
		if (!conv_is_pointwise(s)) {
			im2col(s, xn, slot);
			col = slot;
		}
		for (int g = 0; g < s->groups; g++)
			dlt_cpu_sgemm(prec, 0, 1, kg, kk, p, 1.0f, dyn + (size_t)g * kg * p, p,
				      col + (size_t)g * kk * p, p, n == first ? 0.0f : 1.0f,
				      part + (size_t)g * kg * kk, kk);
		if (!dx)
			continue;
		if (conv_is_pointwise(s))
			dcol = dxn;
		for (int g = 0; g < s->groups; g++)
			dlt_cpu_sgemm(prec, 1, 0, kk, p, kg, 1.0f, w + (size_t)g * kg * kk, kk,
				      dyn + (size_t)g * kg * p, p, 0.0f, dcol + (size_t)g * kk * p,
				      p);
		if (!conv_is_pointwise(s))
			col2im(s, dcol, dxn);
	}
}

void dlt_cpu_conv_backward(int prec, const dlt_conv *s, const float *x, const float *w,
			   const float *dy, float *dx, float *dw, float *db, float *work)
{
	int chunks = conv_chunks(s);
	size_t wn = (size_t)s->k * (s->c / s->groups) * s->kh * s->kw;
	float *parts = work + chunks * conv_col_floats(s);

	#pragma omp parallel for schedule(static)
	for (int ch = 0; ch < chunks; ch++)
		conv_backward_chunk(prec, s, x, w, dy, dx, work + ch * conv_col_floats(s),
				    parts + ch * wn, ch);

	/* dw = the chunks' partials added in chunk order, a block at a time */
	#pragma omp parallel for schedule(static)
	for (size_t j0 = 0; j0 < wn; j0 += DW_BLOCK) {
		double acc[DW_BLOCK] = { 0 };
		size_t m = wn - j0 < DW_BLOCK ? wn - j0 : DW_BLOCK;
		for (int ch = 0; ch < chunks; ch++) {
			const float *part = parts + ch * wn + j0;
			#pragma omp simd
			for (size_t j = 0; j < m; j++)
				acc[j] += part[j];
		}
		for (size_t j = 0; j < m; j++)
			dw[j0 + j] = (float)acc[j];
	}
	if (db)
		conv_bias_grad(s, dy, db);
}
