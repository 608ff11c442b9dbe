/* The reference of the convolutional layers: one output (or one gradient
 * element) at a time, straight from the definitions, sums in double.
 * Slow on purpose; conv.c, pool.c and norm.c are tested against it. */
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/common/math.h"
#include "kernels/common/pool.h"
#include "kernels/cpu/layers.h"

/* x[n][c][iy][ix], 0 in the padding */
static float conv_in(const dlt_conv *s, const float *x, int n, int c, int iy, int ix)
{
	if (iy < 0 || iy >= s->h || ix < 0 || ix >= s->w)
		return 0.0f;
	return x[(((size_t)n * s->c + c) * s->h + iy) * s->w + ix];
}

static size_t conv_w_at(const dlt_conv *s, int k, int ci, int ky, int kx)
{
	return (((size_t)k * (s->c / s->groups) + ci) * s->kh + ky) * s->kw + kx;
}

static size_t conv_y_at(const dlt_conv *s, int n, int k, int oy, int ox)
{
	return (((size_t)n * s->k + k) * s->oh + oy) * s->ow + ox;
}

size_t dlt_ref_conv_workspace(int prec, const dlt_conv *s)
{
	return 0;
}

void dlt_ref_conv_forward(int prec, const dlt_conv *s, const float *x, const float *w, const float *b,
			  float *y, int act, float slope, float *work)
{
	int cg = s->c / s->groups, kg = s->k / s->groups;
	prec &= ~DLT_CONV_FLAGS;	/* it rounds every input: the same bits */
	for (int n = 0; n < s->n; n++)
	for (int k = 0; k < s->k; k++)
	for (int oy = 0; oy < s->oh; oy++)
	for (int ox = 0; ox < s->ow; ox++) {
		double acc = 0.0;
		for (int ci = 0; ci < cg; ci++)
		for (int ky = 0; ky < s->kh; ky++)
		for (int kx = 0; kx < s->kw; kx++) {
			int iy = oy * s->sh - s->ph + ky * s->dh;
			int ix = ox * s->sw - s->pw + kx * s->dw;
			acc += (double)dlt_round_prec(w[conv_w_at(s, k, ci, ky, kx)], prec) *
			       dlt_round_prec(conv_in(s, x, n, k / kg * cg + ci, iy, ix), prec);
		}
		y[conv_y_at(s, n, k, oy, ox)] = dlt_act((float)acc + (b ? b[k] : 0.0f), act,
							 slope);
	}
}

/* dx by gathering, for each input, the outputs whose window holds it */
static float conv_dx_at(int prec, const dlt_conv *s, const float *w, const float *dy, int n,
			int c, int iy, int ix)
{
	int cg = s->c / s->groups, kg = s->k / s->groups, g = c / cg;
	double acc = 0.0;
	for (int k = g * kg; k < (g + 1) * kg; k++)
	for (int ky = 0; ky < s->kh; ky++)
	for (int kx = 0; kx < s->kw; kx++) {
		int ty = iy + s->ph - ky * s->dh, tx = ix + s->pw - kx * s->dw;
		int oy = ty / s->sh, ox = tx / s->sw;
		if (ty < 0 || tx < 0 || ty % s->sh || tx % s->sw || oy >= s->oh || ox >= s->ow)
			continue;
		acc += (double)dlt_round_prec(w[conv_w_at(s, k, c - g * cg, ky, kx)], prec) *
		       dlt_round_prec(dy[conv_y_at(s, n, k, oy, ox)], prec);
	}
	return (float)acc;
}

void dlt_ref_conv_backward(int prec, const dlt_conv *s, const float *x, const float *w,
			   const float *dy, float *dx, float *dw, float *db, float *work)
{
	int cg = s->c / s->groups, kg = s->k / s->groups;
	prec &= ~DLT_CONV_FLAGS;
	for (int k = 0; k < s->k && db; k++) {
		double acc = 0.0;
		for (int n = 0; n < s->n; n++)
			for (int p = 0; p < s->oh * s->ow; p++)
				acc += dlt_round_prec(dy[conv_y_at(s, n, k, 0, 0) + p], prec);
		db[k] = (float)acc;
	}
	for (int k = 0; k < s->k; k++)
	for (int ci = 0; ci < cg; ci++)
	for (int ky = 0; ky < s->kh; ky++)
	for (int kx = 0; kx < s->kw; kx++) {
		double acc = 0.0;
		for (int n = 0; n < s->n; n++)
		for (int oy = 0; oy < s->oh; oy++)
		for (int ox = 0; ox < s->ow; ox++) {
			int iy = oy * s->sh - s->ph + ky * s->dh;
			int ix = ox * s->sw - s->pw + kx * s->dw;
			acc += (double)dlt_round_prec(dy[conv_y_at(s, n, k, oy, ox)], prec) *
			       dlt_round_prec(conv_in(s, x, n, k / kg * cg + ci, iy, ix), prec);
		}
		dw[conv_w_at(s, k, ci, ky, kx)] = (float)acc;
	}
	if (!dx)
		return;
	for (int n = 0; n < s->n; n++)
	for (int c = 0; c < s->c; c++)
	for (int iy = 0; iy < s->h; iy++)
	for (int ix = 0; ix < s->w; ix++)
		dx[(((size_t)n * s->c + c) * s->h + iy) * s->w + ix] =
			conv_dx_at(prec, s, w, dy, n, c, iy, ix);
}

/* The first of equal maxima; a NaN wins (the last one), as in PyTorch. */
void dlt_ref_maxpool_forward(const dlt_pool *s, const float *x, float *y, int32_t *arg)
{
	for (int p = 0; p < s->n * s->c; p++)
	for (int oy = 0; oy < s->oh; oy++)
	for (int ox = 0; ox < s->ow; ox++) {
		const float *in = x + (size_t)p * s->h * s->w;
		size_t o = ((size_t)p * s->oh + oy) * s->ow + ox;
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
		y[o] = best;
		arg[o] = dlt_maxpool_arg(s, best, at);
	}
}

void dlt_ref_maxpool_backward(const dlt_pool *s, const float *dy, const int32_t *arg,
			      float *dx)
{
	size_t plane = (size_t)s->h * s->w, out = (size_t)s->oh * s->ow;
	memset(dx, 0, (size_t)s->n * s->c * plane * sizeof(*dx));
	for (size_t p = 0; p < (size_t)s->n * s->c; p++)
		for (size_t o = 0; o < out; o++)
			if (arg[p * out + o] >= 0)
				dx[p * plane + arg[p * out + o]] += dy[p * out + o];
}

void dlt_ref_avgpool_forward(const dlt_pool *s, const float *x, float *y)
{
	for (int p = 0; p < s->n * s->c; p++)
	for (int oy = 0; oy < s->oh; oy++)
	for (int ox = 0; ox < s->ow; ox++) {
		const float *in = x + (size_t)p * s->h * s->w;
		dlt_pool_window r = dlt_pool_window_at(s, oy, ox);
		double acc = 0.0;
		for (int iy = r.y0; iy < r.y1; iy++)
			for (int ix = r.x0; ix < r.x1; ix++)
				acc += in[iy * s->w + ix];
		y[((size_t)p * s->oh + oy) * s->ow + ox] = (float)(acc / r.size);
	}
}

void dlt_ref_avgpool_backward(const dlt_pool *s, const float *dy, float *dx)
{
	size_t plane = (size_t)s->h * s->w;
	memset(dx, 0, (size_t)s->n * s->c * plane * sizeof(*dx));
	for (int p = 0; p < s->n * s->c; p++)
	for (int oy = 0; oy < s->oh; oy++)
	for (int ox = 0; ox < s->ow; ox++) {
		dlt_pool_window r = dlt_pool_window_at(s, oy, ox);
		float g = dy[((size_t)p * s->oh + oy) * s->ow + ox] / r.size;
		for (int iy = r.y0; iy < r.y1; iy++)
			for (int ix = r.x0; ix < r.x1; ix++)
				dx[p * plane + iy * s->w + ix] += g;
	}
}

static size_t bn_at(int c, int hw, int n, int ch, int j)
{
	return ((size_t)n * c + ch) * hw + j;
}

void dlt_ref_batchnorm_train(int n, int c, int hw, const float *x, const float *gamma,
			     const float *beta, float *y, float *mean, float *invstd,
			     float *run_mean, float *run_var, float momentum, float eps)
{
	double m = (double)n * hw;
	for (int ch = 0; ch < c; ch++) {
		double sum = 0.0, sq = 0.0, mu, var;
		for (int i = 0; i < n; i++)
			for (int j = 0; j < hw; j++)
				sum += x[bn_at(c, hw, i, ch, j)];
		mu = sum / m;
		for (int i = 0; i < n; i++) {
			for (int j = 0; j < hw; j++) {
				double d = x[bn_at(c, hw, i, ch, j)] - mu;
				sq += d * d;
			}
		}
		var = sq / m;
		mean[ch] = (float)mu;
		invstd[ch] = (float)(1.0 / sqrt(var + eps));
		for (int i = 0; i < n; i++) {
			for (int j = 0; j < hw; j++) {
				size_t e = bn_at(c, hw, i, ch, j);
				y[e] = (x[e] - mean[ch]) * invstd[ch] * gamma[ch] + beta[ch];
			}
		}
		/* PyTorch's update, in double; one value per channel has no
		 * unbiased variance (PyTorch refuses to train on it) */
		run_mean[ch] = (float)(momentum * mu + (1.0 - momentum) * run_mean[ch]);
		run_var[ch] = (float)(momentum * (m > 1 ? sq / (m - 1) : var) +
				      (1.0 - momentum) * run_var[ch]);
	}
}

void dlt_ref_batchnorm_eval(int n, int c, int hw, const float *x, const float *gamma,
			    const float *beta, const float *run_mean, const float *run_var,
			    float eps, float *y)
{
	for (int i = 0; i < n; i++) {
		for (int ch = 0; ch < c; ch++) {
			double sd = sqrt((double)run_var[ch] + eps);
			for (int j = 0; j < hw; j++) {
				size_t e = bn_at(c, hw, i, ch, j);
				y[e] = (float)((x[e] - (double)run_mean[ch]) / sd * gamma[ch] +
					       beta[ch]);
			}
		}
	}
}

/* dx = gamma invstd (dy - mean(dy) - xhat mean(dy xhat)) */
void dlt_ref_batchnorm_backward(int n, int c, int hw, const float *x, const float *dy,
				const float *gamma, const float *mean, const float *invstd,
				float *dx, float *dgamma, float *dbeta)
{
	double m = (double)n * hw;
	for (int ch = 0; ch < c; ch++) {
		double sdy = 0.0, sdyx = 0.0;
		for (int i = 0; i < n; i++) {
			for (int j = 0; j < hw; j++) {
				size_t e = bn_at(c, hw, i, ch, j);
				sdy += dy[e];
				sdyx += (double)dy[e] * ((x[e] - mean[ch]) * invstd[ch]);
			}
		}
		dbeta[ch] = (float)sdy;
		dgamma[ch] = (float)sdyx;
		for (int i = 0; i < n && dx; i++) {
			for (int j = 0; j < hw; j++) {
				size_t e = bn_at(c, hw, i, ch, j);
				double xhat = (x[e] - mean[ch]) * invstd[ch];
				dx[e] = (float)((double)gamma[ch] * invstd[ch] *
						(dy[e] - sdy / m - xhat * sdyx / m));
			}
		}
	}
}

void dlt_ref_add(const float *a, const float *b, float *y, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] = a[i] + b[i];
}
