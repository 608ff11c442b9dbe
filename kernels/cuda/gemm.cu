/* gemm by cuBLAS.  Row-major C = op(A) op(B) is column-major
 * C^T = op(B)^T op(A)^T, and a row-major matrix is its transpose in
 * column-major with the same leading dimension: so cuBLAS is called with
 * B before A, M and N swapped, the transposes as given.
 *
 * f32: CUBLAS_COMPUTE_32F under the default math mode, true fp32 (no
 * TF32).  bf16 and fp16: A and B are rounded by dlt_round_bf16 /
 * dlt_round_f16 (the CPU's rounding, ties to even) into 16-bit copies in
 * the preallocated scratch, then multiplied on the tensor cores, summed in
 * f32 (CUBLAS_COMPUTE_32F); an operand of 16-bit words (DLT_A_HALF,
 * DLT_B_HALF) is copied there as it is.  cuBLAS's own down-conversion
 * (COMPUTE_32F_FAST_16BF / _16F) is not used: it does not document how it
 * rounds, nor that it rounds at all for every shape.  Operands too large
 * for the scratch are done a range of K at a time, the later ranges
 * added onto C. */
#include <cuda_fp16.h>

#include "kernels/cuda/internal.h"

/* rows x cols of row-major src (leading dimension ld) from (r0, c0),
 * rounded to prec and packed row-major as bf16 or fp16 bits: a thread a
 * column of a row (blockIdx.y a row, the rows a grid's height apart), no
 * division per element */
static __global__ void pack16(const float *src, int ld, int r0, int c0, int rows, int cols,
			      int prec, uint16_t *dst)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= cols)
		return;
	for (int r = blockIdx.y; r < rows; r += gridDim.y) {
		float v = src[(size_t)(r0 + r) * ld + c0 + c];
		/* the rounded value is exact in the 16-bit type: converting
		 * it only drops zero bits */
		dst[(size_t)r * cols + c] =
			prec == DLT_PREC_BF16 ? (uint16_t)(dlt_f32_bits(dlt_round_bf16(v)) >> 16)
					      : __half_as_ushort(__float2half_rn(dlt_round_f16(v)));
	}
}

/* pack16 of an operand that holds 16-bit words already (DLT_A_HALF,
 * DLT_B_HALF): the words copied */
static __global__ void copy16(const uint16_t *src, int ld, int r0, int c0, int rows, int cols,
			      uint16_t *dst)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= cols)
		return;
	for (int r = blockIdx.y; r < rows; r += gridDim.y)
		dst[(size_t)r * cols + c] = src[(size_t)(r0 + r) * ld + c0 + c];
}

void cu_pack16(const float *src, int half, int ld, int r0, int c0, int rows, int cols, int prec,
	       uint16_t *dst)
{
	dim3 grid((unsigned)((cols + CU_THREADS - 1) / CU_THREADS),
		  (unsigned)(rows < 65535 ? rows : 65535));
	if (half)
		copy16<<<grid, CU_THREADS, 0, cu.stream>>>((const uint16_t *)src, ld, r0, c0, rows,
							  cols, dst);
	else
		pack16<<<grid, CU_THREADS, 0, cu.stream>>>(src, ld, r0, c0, rows, cols, prec, dst);
	cu_launched("gemm: rounding the operands");
}

static void product(int prec, int ha, int hb, int tA, int tB, int M, int N, int K, float alpha,
		    const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
	cublasOperation_t opA = tA ? CUBLAS_OP_T : CUBLAS_OP_N;
	cublasOperation_t opB = tB ? CUBLAS_OP_T : CUBLAS_OP_N;
	cudaDataType type = prec == DLT_PREC_BF16 ? CUDA_R_16BF : CUDA_R_16F;
	const float one = 1.0f;
	size_t kc;
	if (M < 1 || N < 1)
		return;
	if (prec == DLT_PREC_F32 || K < 1) {
		cu_check_blas(cublasGemmEx(cu.blas, opB, opA, N, M, K, &alpha, B, CUDA_R_32F, ldb,
					   A, CUDA_R_32F, lda, &beta, C, CUDA_R_32F, ldc,
					   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT), "gemm");
		return;
	}
	/* A's range [M, kc] and B's [kc, N], B's start kept 16-byte aligned;
	 * ranges a multiple of 64 long keep the leading dimensions multiples
	 * of 8, as the tensor cores' fast kernels want */
	kc = (CU_HALF_SCRATCH - 8) / ((size_t)M + N);
	if (kc >= 64)
		kc &= ~(size_t)63;
	if (kc < 1) {
		cu_check(cudaErrorInvalidValue, "gemm: a matrix too large for the 16-bit scratch");
		return;
	}
	for (int k0 = 0; k0 < K; k0 += (int)kc) {
		int nk = K - k0 < (int)kc ? K - k0 : (int)kc;
		uint16_t *a = (uint16_t *)cu.half;
		uint16_t *b = a + (((size_t)M * nk + 7) & ~(size_t)7);
		if (tA)
			cu_pack16(A, ha, lda, k0, 0, nk, M, prec, a);
		else
			cu_pack16(A, ha, lda, 0, k0, M, nk, prec, a);
		if (tB)
			cu_pack16(B, hb, ldb, 0, k0, N, nk, prec, b);
		else
			cu_pack16(B, hb, ldb, k0, 0, nk, N, prec, b);
		if (!cu_check_blas(cublasGemmEx(cu.blas, opB, opA, N, M, nk, &alpha, b, type,
						tB ? nk : N, a, type, tA ? M : nk,
						k0 ? &one : &beta, C, CUDA_R_32F, ldc,
						CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT), "gemm"))
			return;
	}
}

/* DLT_ROUND_C: C rounded after the product, a pass of its own here */
void cu_gemm(int prec, int tA, int tB, int M, int N, int K, float alpha, const float *A,
	     int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
	int round = prec & DLT_ROUND_C, ha = prec & DLT_A_HALF, hb = prec & DLT_B_HALF;
	prec &= ~DLT_GEMM_FLAGS;	/* the 16-bit copies round exact operands to themselves */
	product(prec, ha, hb, tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
	if (!round || prec == DLT_PREC_F32 || M < 1 || N < 1)
		return;
	if (ldc == N)
		cu_round(C, (size_t)M * N, prec);
	else
		for (int i = 0; i < M; i++)
			cu_round(C + (size_t)i * ldc, (size_t)N, prec);
}
