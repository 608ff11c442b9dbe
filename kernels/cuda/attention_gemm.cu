/* Attention by cuBLAS's batched f32 products (no TF32): for a head and a
 * chunk of the batch whose scores fit the scratch, S = scale Q K^T, a
 * [T, T] for each sample, then a kernel for the softmax (a warp a row:
 * the causal mask, lse, dropout's factor), then O = P V.  Backward makes
 * S and dP = dO V^T again, then a kernel P = exp(S - lse), dS = P (Z dP
 * - D) with D_i = dout_i . out_i, then dV = (P Z)^T dO, dQ = scale dS K,
 * dK = scale dS^T Q.  The products run on cuBLAS's f32 kernels, dozens of
 * times the pace of the tiles' loops (attention_tiles.cu), at the cost of
 * the scores in memory (2 T T + T floats a sample in the chunk) and of
 * the causal half computed and masked.  Every sum has one order for a
 * shape (cuBLAS on one stream, our kernels in lane order and a fixed
 * butterfly), so the bits do not depend on the run.  Where not one
 * sample's scores fit the scratch, or it cannot be had, the tiles run. */
#include "kernels/cuda/internal.h"

/* Floats of the scores' scratch at most (256 MiB), made when attention
 * first runs and kept */
#define ATTN_SCRATCH ((size_t)64 << 20)
#define ROWS 8				/* rows a block, a warp each */

/* The model's row of row i of sample bi of the chunk from b0, head h */
static __device__ size_t model_row(int b0, int bi, int h, int H, int T, int i)
{
	return ((size_t)(b0 + bi) * H + h) * T + i;
}

/* Forward: S's n T rows in place to P Z, lse of each */
static __global__ void attn_softmax(float *S, float *lse, int n, int T, int H, int h, int b0,
				    int causal, dlt_attn_dropout drop)
{
	size_t row = (size_t)blockIdx.x * ROWS + threadIdx.x / WARP, r;
	int lane = threadIdx.x % WARP, i, seen;
	float *s, m = -INFINITY, l = 0.0f, ls;
	if (row >= (size_t)n * T)
		return;
	i = (int)(row % T);
	s = S + row * T;
	seen = causal ? i + 1 : T;
	for (int j = lane; j < seen; j += WARP)
		m = fmaxf(m, s[j]);
	m = cu_warp_max(m);
	for (int j = lane; j < seen; j += WARP)
		l += expf(s[j] - m);
	ls = m + logf(cu_warp_sum(l));
	r = model_row(b0, (int)(row / T), h, H, T, i);
	if (lane == 0)
		lse[r] = ls;
	for (int j = lane; j < T; j += WARP)
		s[j] = j < seen ? expf(s[j] - ls) * dlt_attn_keep(drop, r, T, j) : 0.0f;
}

/* D_i = dout_i . out_i for the chunk's n T rows, into d */
static __global__ void attn_d(const float *out, const float *dout, float *d, int n, int T, int C,
			      int D)
{
	size_t row = (size_t)blockIdx.x * ROWS + threadIdx.x / WARP;
	int lane = threadIdx.x % WARP;
	float acc = 0.0f;
	if (row >= (size_t)n * T)
		return;
	for (int e = lane; e < D; e += WARP)
		acc += dout[row * C + e] * out[row * C + e];
	acc = cu_warp_sum(acc);
	if (lane == 0)
		d[row] = acc;
}

/* Backward: from S (scale Q K^T) and dP (dO V^T) to P Z in S and dS =
 * P (Z dP - D) in dP */
static __global__ void attn_ds(float *S, float *dP, const float *lse, const float *d, int n,
			       int T, int H, int h, int b0, int causal, dlt_attn_dropout drop)
{
	size_t row = (size_t)blockIdx.x * ROWS + threadIdx.x / WARP, r;
	int lane = threadIdx.x % WARP, i, seen;
	float *s, *g, ls, di;
	if (row >= (size_t)n * T)
		return;
	i = (int)(row % T);
	s = S + row * T;
	g = dP + row * T;
	seen = causal ? i + 1 : T;
	r = model_row(b0, (int)(row / T), h, H, T, i);
	ls = lse[r];
	di = d[row];
	for (int j = lane; j < T; j += WARP) {
		float p = j < seen ? expf(s[j] - ls) : 0.0f;
		float z = p ? dlt_attn_keep(drop, r, T, j) : 0.0f;
		s[j] = p * z;
		g[j] = p * (z * g[j] - di);
	}
}

/* Row-major C = alpha op(A) op(B) for n samples, each operand a stride
 * apart (gemm.cu's call: B first, M and N swapped) */
static int products(int tA, int tB, int M, int N, int K, float alpha, const float *A, int lda,
		    size_t sa, const float *B, int ldb, size_t sb, float *C, int ldc, size_t sc,
		    int n)
{
	const float zero = 0.0f;
	return cu_check_blas(cublasGemmStridedBatchedEx(
				     cu.blas, tB ? CUBLAS_OP_T : CUBLAS_OP_N,
				     tA ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B, CUDA_R_32F,
				     ldb, (long long)sb, A, CUDA_R_32F, lda, (long long)sa, &zero, C,
				     CUDA_R_32F, ldc, (long long)sc, n, CUBLAS_COMPUTE_32F,
				     CUBLAS_GEMM_DEFAULT),
			     "attention: products");
}

/* Samples of a chunk: as many of B as 2 T T + T floats each fit
 * ATTN_SCRATCH; 0 where not one does */
static int chunk_of(int B, int T)
{
	size_t n = ATTN_SCRATCH / (2 * (size_t)T * T + T);
	return n < (size_t)B ? (int)n : B;
}

/* The scratch of at least floats, or NULL (nothing recorded: the tiles
 * run instead) */
static float *scratch_for(size_t floats)
{
	if (floats <= cu.attn_floats)
		return cu.attn;
	/* the stream may still run on the smaller one */
	if (cudaStreamSynchronize(cu.stream) != cudaSuccess)
		return NULL;
	cudaFree(cu.attn);
	cu.attn = NULL;
	cu.attn_floats = 0;
	if (cudaMalloc((void **)&cu.attn, floats * sizeof(float)) != cudaSuccess) {
		cudaGetLastError();	/* not sticky: clear it */
		cu.attn = NULL;
		return NULL;
	}
	cu.attn_floats = floats;
	return cu.attn;
}

static unsigned row_blocks(size_t rows)
{
	return (unsigned)((rows + ROWS - 1) / ROWS);
}

int cu_attention_gemm_forward(const float *qkv, float *out, float *lse, int B, int T, int C,
			      int H, int causal, float scale, dlt_attn_dropout drop)
{
	int D = C / H, nb = chunk_of(B, T);
	size_t ld = (size_t)3 * C, tt = (size_t)T * T;
	float *S;
	if (!nb || !(S = scratch_for((2 * tt + T) * nb)))
		return 0;
	for (int h = 0; h < H; h++) {
		for (int b0 = 0; b0 < B; b0 += nb) {
			int n = B - b0 < nb ? B - b0 : nb;
			const float *q = qkv + (size_t)b0 * T * ld + (size_t)h * D;
			if (!products(0, 1, T, T, D, scale, q, (int)ld, T * ld, q + C, (int)ld,
				      T * ld, S, T, tt, n))
				return 1;
			attn_softmax<<<row_blocks((size_t)n * T), ROWS * WARP, 0, cu.stream>>>(
				S, lse, n, T, H, h, b0, causal, drop);
			cu_launched("attention_forward");
			if (!products(0, 0, T, D, T, 1.0f, S, T, tt, q + 2 * C, (int)ld, T * ld,
				      out + (size_t)b0 * T * C + (size_t)h * D, C, (size_t)T * C,
				      n))
				return 1;
		}
	}
	return 1;
}

int cu_attention_gemm_backward(const float *qkv, const float *out, const float *dout,
			       const float *lse, float *dqkv, int B, int T, int C, int H,
			       int causal, float scale, dlt_attn_dropout drop)
{
	int D = C / H, nb = chunk_of(B, T);
	size_t ld = (size_t)3 * C, tt = (size_t)T * T, tc = (size_t)T * C;
	float *S, *dP, *d;
	if (!nb || !(S = scratch_for((2 * tt + T) * nb)))
		return 0;
	dP = S + tt * nb;
	d = dP + tt * nb;
	for (int h = 0; h < H; h++) {
		for (int b0 = 0; b0 < B; b0 += nb) {
			int n = B - b0 < nb ? B - b0 : nb;
			size_t at = (size_t)b0 * T * ld + (size_t)h * D;
			size_t ot = (size_t)b0 * tc + (size_t)h * D;
			const float *q = qkv + at, *k = q + C, *v = q + 2 * C, *g = dout + ot;
			float *dq = dqkv + at, *dk = dq + C, *dv = dq + 2 * C;
			attn_d<<<row_blocks((size_t)n * T), ROWS * WARP, 0, cu.stream>>>(
				out + ot, g, d, n, T, C, D);
			cu_launched("attention_backward");
			if (!products(0, 1, T, T, D, scale, q, (int)ld, T * ld, k, (int)ld, T * ld,
				      S, T, tt, n) ||
			    !products(0, 1, T, T, D, 1.0f, g, C, tc, v, (int)ld, T * ld, dP, T, tt,
				      n))
				return 1;
			attn_ds<<<row_blocks((size_t)n * T), ROWS * WARP, 0, cu.stream>>>(
				S, dP, lse, d, n, T, H, h, b0, causal, drop);
			cu_launched("attention_backward");
			if (!products(1, 0, T, D, T, 1.0f, S, T, tt, g, C, tc, dv, (int)ld, T * ld,
				      n) ||
			    !products(0, 0, T, D, T, scale, dP, T, tt, k, (int)ld, T * ld, dq,
				      (int)ld, T * ld, n) ||
			    !products(1, 0, T, D, T, scale, dP, T, tt, q, (int)ld, T * ld, dk,
				      (int)ld, T * ld, n))
				return 1;
		}
	}
	return 1;
}
