/* pointwise_loss: the element-wise losses (mse, l1, huber, bce) of
 * kernels/common/math.h, summed as softmax_xent's are: a thread a row
 * (and the rows a grid's width further on, in order), each block's sums
 * in a fixed tree, the blocks' in order by one thread, so the total's
 * bits depend on rows and cols alone. */
#include "kernels/cuda/internal.h"

static __global__ void pointwise_rows(int kind, float delta, const float *y, const float *t,
				      int rows, int cols, float scale, float *dy, double *partial)
{
	__shared__ double loss[CU_THREADS];
	int k = threadIdx.x;
	loss[k] = 0.0;
	for (int r = blockIdx.x * CU_THREADS + k; r < rows; r += gridDim.x * CU_THREADS) {
		size_t off = (size_t)r * cols;
		for (int j = 0; j < cols; j++)
			loss[k] += dlt_pointwise_loss(kind, delta, y[off + j], t[off + j], scale,
						      dy + off + j);
	}
	__syncthreads();
	for (int s = CU_THREADS / 2; s > 0; s >>= 1) {
		if (k < s)
			loss[k] += loss[k + s];
		__syncthreads();
	}
	if (k == 0)
		partial[blockIdx.x] = loss[0];
}

static __global__ void pointwise_total(double *partial, int blocks)
{
	double s = 0.0;
	for (int b = 0; b < blocks; b++)
		s += partial[b];
	partial[0] = s;
}

void cu_pointwise_loss(int kind, float delta, const float *y, const float *t, int rows, int cols,
		       float *dy, double *loss_sum)
{
	int blocks = (rows + CU_THREADS - 1) / CU_THREADS;
	double *back = (double *)cu.host;
	*loss_sum = 0.0;
	if (rows < 1 || cols < 1)
		return;
	if (blocks > CU_MAX_PARTIALS)
		blocks = CU_MAX_PARTIALS;
	pointwise_rows<<<blocks, CU_THREADS, 0, cu.stream>>>(kind, delta, y, t, rows, cols,
							     (float)(1.0 / ((double)rows * cols)),
							     dy, cu.partial);
	cu_launched("pointwise_loss");
	pointwise_total<<<1, 1, 0, cu.stream>>>(cu.partial, blocks);
	cu_launched("pointwise_loss");
	cu_check(cudaMemcpyAsync(back, cu.partial, sizeof(double), cudaMemcpyDeviceToHost,
				 cu.stream), "pointwise_loss");
	if (cu_check(cudaStreamSynchronize(cu.stream), "pointwise_loss") && !cu.error[0])
		*loss_sum = *back;
	else
		*loss_sum = NAN;
}
