/* Batch normalisation, each channel on one thread: its sums run over the
 * batch in order and over each plane in vectorised double lanes, a fixed
 * order whatever the number of threads.  And the residual add of ResNet
 * blocks, the element-wise op next to it. */
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/cpu/layers.h"

/* Below this many elements a parallel region costs more than it saves. */
#define PAR_MIN 16384

static double plane_sum(const float *x, int hw)
{
	double acc = 0.0;
	#pragma omp simd reduction(+:acc)
	for (int j = 0; j < hw; j++)
		acc += x[j];
	return acc;
}

static double plane_sq_dev(const float *x, int hw, double mu)
{
	double acc = 0.0;
	#pragma omp simd reduction(+:acc)
	for (int j = 0; j < hw; j++)
		acc += (x[j] - mu) * (x[j] - mu);
	return acc;
}

/* y = (x - mu) a + b: the mean subtracted first, so a mean far from 0
 * costs no precision */
static void plane_affine(const float *x, float *y, int hw, float mu, float a, float b)
{
	#pragma omp simd
	for (int j = 0; j < hw; j++)
		y[j] = (x[j] - mu) * a + b;
}

void dlt_cpu_batchnorm_train(int n, int c, int hw, const float *x, const float *gamma,
			     const float *beta, float *y, float *mean, float *invstd,
			     float *run_mean, float *run_var, float momentum, float eps)
{
	double m = (double)n * hw;
	size_t stride = (size_t)c * hw;
	#pragma omp parallel for schedule(static) if (m * c >= PAR_MIN)
	for (int ch = 0; ch < c; ch++) {
		const float *xc = x + (size_t)ch * hw;
		double sum = 0.0, sq = 0.0, mu, var;
		float a;
		for (int i = 0; i < n; i++)
			sum += plane_sum(xc + i * stride, hw);
		mu = sum / m;
		for (int i = 0; i < n; i++)
			sq += plane_sq_dev(xc + i * stride, hw, mu);
		var = sq / m;
		mean[ch] = (float)mu;
		invstd[ch] = (float)(1.0 / sqrt(var + eps));
		a = invstd[ch] * gamma[ch];
		for (int i = 0; i < n; i++)
			plane_affine(xc + i * stride, y + (size_t)ch * hw + i * stride, hw, mean[ch],
				     a, beta[ch]);
		/* one value per channel has no unbiased variance */
		run_mean[ch] = (float)(momentum * mu + (1.0 - momentum) * run_mean[ch]);
		run_var[ch] = (float)(momentum * (m > 1 ? sq / (m - 1) : var) +
				      (1.0 - momentum) * run_var[ch]);
	}
}

void dlt_cpu_batchnorm_eval(int n, int c, int hw, const float *x, const float *gamma,
			    const float *beta, const float *run_mean, const float *run_var,
			    float eps, float *y)
{
	#pragma omp parallel for schedule(static) if ((size_t)n * c * hw >= PAR_MIN)
	for (int p = 0; p < n * c; p++) {
		int ch = p % c;
		float a = (float)(gamma[ch] / sqrt((double)run_var[ch] + eps));
		plane_affine(x + (size_t)p * hw, y + (size_t)p * hw, hw, run_mean[ch], a,
			     beta[ch]);
	}
}

static double plane_dot_dev(const float *x, const float *dy, int hw, float mu, float is)
{
	double acc = 0.0;
	#pragma omp simd reduction(+:acc)
	for (int j = 0; j < hw; j++)
		acc += dy[j] * ((x[j] - mu) * is);
	return acc;
}

void dlt_cpu_batchnorm_backward(int n, int c, int hw, const float *x, const float *dy,
				const float *gamma, const float *mean, const float *invstd,
				float *dx, float *dgamma, float *dbeta)
{
	double m = (double)n * hw;
	size_t stride = (size_t)c * hw;
	#pragma omp parallel for schedule(static) if (m * c >= PAR_MIN)
	for (int ch = 0; ch < c; ch++) {
		size_t off = (size_t)ch * hw;
		float mu = mean[ch], is = invstd[ch], a, k_dy, k_x;
		double sdy = 0.0, sdyx = 0.0;
		for (int i = 0; i < n; i++) {
			sdy += plane_sum(dy + off + i * stride, hw);
			sdyx += plane_dot_dev(x + off + i * stride, dy + off + i * stride, hw, mu,
					      is);
		}
		dbeta[ch] = (float)sdy;
		dgamma[ch] = (float)sdyx;
		if (!dx)
			continue;
		/* dx = a (dy - sdy / m - xhat sdyx / m), a = gamma invstd */
		a = gamma[ch] * is;
		k_dy = (float)(a * sdy / m);
		k_x = (float)(a * sdyx / m);
		for (int i = 0; i < n; i++) {
			const float *xi = x + off + i * stride, *dyi = dy + off + i * stride;
			float *dxi = dx + off + i * stride;
			#pragma omp simd
			for (int j = 0; j < hw; j++)
				dxi[j] = a * dyi[j] - k_dy - k_x * ((xi[j] - mu) * is);
		}
	}
}

void dlt_cpu_add(const float *a, const float *b, float *y, size_t n)
{
	#pragma omp parallel for simd schedule(static) if (n >= PAR_MIN)
	for (size_t i = 0; i < n; i++)
		y[i] = a[i] + b[i];
}
