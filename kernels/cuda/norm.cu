/* Batch normalisation: cuDNN's spatial mode where it fits, our own
 * kernels where it does not: training on one value per channel (m = 1:
 * cuDNN's unbiased variance would divide by 0, ours takes the biased one
 * as the CPU does), an eps below CUDNN_BN_MIN_EPSILON (0 in cuDNN 9; the
 * config wants eps > 0) and a backward without dx (cuDNN always writes
 * one; we keep no scratch of activations' size).  cuDNN's
 * saved mean and inverse standard deviation are our mean and invstd, and
 * it moves the running variance towards the unbiased variance, as
 * PyTorch.  Our kernels are the reference's arithmetic, a block per
 * channel, sums in double in a fixed tree. */
#include "kernels/cuda/internal.h"

static cudnnTensorDescriptor_t x_desc, p_desc;

/* x [n, c, hw] as NCHW with a plane of hw x 1, and the per-channel
 * parameters' shape derived from it */
static int bn_descs(int n, int c, int hw)
{
	if (!x_desc && (!cu_check_dnn(cudnnCreateTensorDescriptor(&x_desc), "batchnorm") ||
			!cu_check_dnn(cudnnCreateTensorDescriptor(&p_desc), "batchnorm")))
		return 0;
	return cu_check_dnn(cudnnSetTensor4dDescriptor(x_desc, CUDNN_TENSOR_NCHW,
							 CUDNN_DATA_FLOAT, n, c, hw, 1),
			    "batchnorm") &&
	       cu_check_dnn(cudnnDeriveBNTensorDescriptor(p_desc, x_desc,
							  CUDNN_BATCHNORM_SPATIAL), "batchnorm");
}

/* v summed over the block in a fixed tree; every thread gets the total */
static __device__ double block_sum(double v, double *sh)
{
	int t = threadIdx.x;
	double total;
	sh[t] = v;
	__syncthreads();
	for (int s = CU_THREADS / 2; s > 0; s >>= 1) {
		if (t < s)
			sh[t] += sh[t + s];
		__syncthreads();
	}
	total = sh[0];
	__syncthreads();
	return total;
}

/* Element e of channel ch: sample e / hw, position e % hw */
static __device__ size_t bn_at(int c, int hw, int ch, size_t e)
{
	return ((e / hw) * c + ch) * hw + e % hw;
}

static __global__ void bn_train_kernel(int n, int c, int hw, const float *x, const float *gamma,
				       const float *beta, float *y, float *mean, float *invstd,
				       float *run_mean, float *run_var, float momentum, float eps)
{
	__shared__ double sh[CU_THREADS];
	int ch = blockIdx.x;
	size_t m = (size_t)n * hw;
	double sum = 0.0, sq = 0.0, mu, var;
	float mf, is;
	for (size_t e = threadIdx.x; e < m; e += CU_THREADS)
		sum += x[bn_at(c, hw, ch, e)];
	mu = block_sum(sum, sh) / (double)m;
	for (size_t e = threadIdx.x; e < m; e += CU_THREADS) {
		double d = x[bn_at(c, hw, ch, e)] - mu;
		sq += d * d;
	}
	sq = block_sum(sq, sh);
	var = sq / (double)m;
	mf = (float)mu;
	is = (float)(1.0 / sqrt(var + eps));
	for (size_t e = threadIdx.x; e < m; e += CU_THREADS) {
		size_t at = bn_at(c, hw, ch, e);
		y[at] = (x[at] - mf) * is * gamma[ch] + beta[ch];
	}
	if (threadIdx.x == 0) {
		mean[ch] = mf;
		invstd[ch] = is;
		run_mean[ch] = (float)(momentum * mu + (1.0 - momentum) * run_mean[ch]);
		run_var[ch] = (float)(momentum * (m > 1 ? sq / (double)(m - 1) : var) +
				      (1.0 - momentum) * run_var[ch]);
	}
}

static __global__ void bn_backward_kernel(int n, int c, int hw, const float *x, const float *dy,
					  const float *gamma, const float *mean,
					  const float *invstd, float *dx, float *dgamma,
					  float *dbeta)
{
	__shared__ double sh[CU_THREADS];
	int ch = blockIdx.x;
	size_t m = (size_t)n * hw;
	float mu = mean[ch], is = invstd[ch];
	double sdy = 0.0, sdyx = 0.0;
	for (size_t e = threadIdx.x; e < m; e += CU_THREADS) {
		size_t at = bn_at(c, hw, ch, e);
		sdy += dy[at];
		sdyx += (double)dy[at] * ((x[at] - mu) * is);
	}
	sdy = block_sum(sdy, sh);
	sdyx = block_sum(sdyx, sh);
	if (threadIdx.x == 0) {
		dbeta[ch] = (float)sdy;
		dgamma[ch] = (float)sdyx;
	}
	if (!dx)
		return;
	for (size_t e = threadIdx.x; e < m; e += CU_THREADS) {
		size_t at = bn_at(c, hw, ch, e);
		double xhat = (x[at] - mu) * is;
		dx[at] = (float)((double)gamma[ch] * is *
				 (dy[at] - sdy / (double)m - xhat * sdyx / (double)m));
	}
}

/* cuDNN's results overwrite (alpha 1, beta 0) */
static const float one = 1.0f, zero = 0.0f;

void cu_batchnorm_train(int n, int c, int hw, const float *x, const float *gamma,
			const float *beta, float *y, float *mean, float *invstd, float *run_mean,
			float *run_var, float momentum, float eps)
{
	if (n < 1 || c < 1 || hw < 1)
		return;
	if (eps >= CUDNN_BN_MIN_EPSILON && (size_t)n * hw > 1) {
		if (bn_descs(n, c, hw))
			cu_check_dnn(cudnnBatchNormalizationForwardTraining(
					     cu.dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, x_desc, x,
					     x_desc, y, p_desc, gamma, beta, momentum, run_mean,
					     run_var, eps, mean, invstd),
				     "batchnorm_train");
		return;
	}
	bn_train_kernel<<<c, CU_THREADS, 0, cu.stream>>>(n, c, hw, x, gamma, beta, y, mean, invstd,
							 run_mean, run_var, momentum, eps);
	cu_launched("batchnorm_train");
}

void cu_batchnorm_eval(int n, int c, int hw, const float *x, const float *gamma,
		       const float *beta, const float *run_mean, const float *run_var, float eps,
		       float *y)
{
	if (n < 1 || c < 1 || hw < 1 || !bn_descs(n, c, hw))
		return;
	cu_check_dnn(cudnnBatchNormalizationForwardInference(cu.dnn, CUDNN_BATCHNORM_SPATIAL, &one,
							     &zero, x_desc, x, x_desc, y, p_desc,
							     gamma, beta, run_mean, run_var, eps),
		     "batchnorm_eval");
}

void cu_batchnorm_backward(int n, int c, int hw, const float *x, const float *dy,
			   const float *gamma, const float *mean, const float *invstd, float *dx,
			   float *dgamma, float *dbeta)
{
	if (n < 1 || c < 1 || hw < 1)
		return;
	if (dx && (size_t)n * hw > 1) {
		/* the saved statistics are given, so cuDNN does not use eps:
		 * any value it accepts will do */
		if (bn_descs(n, c, hw))
			cu_check_dnn(cudnnBatchNormalizationBackward(
					     cu.dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero,
					     x_desc, x, x_desc, dy, x_desc, dx, p_desc, gamma, dgamma,
					     dbeta, 1e-5, mean, invstd),
				     "batchnorm_backward");
		return;
	}
	bn_backward_kernel<<<c, CU_THREADS, 0, cu.stream>>>(n, c, hw, x, dy, gamma, mean, invstd,
							    dx, dgamma, dbeta);
	cu_launched("batchnorm_backward");
}
