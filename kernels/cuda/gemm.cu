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
 * DLT_B_HALF) is read where it lies.  cuBLAS's own down-conversion
 * (COMPUTE_32F_FAST_16BF / _16F) is not used: it does not document how it
 * rounds, nor that it rounds at all for every shape.  Operands too large
 * for the scratch are done a range of K at a time, the later ranges
 * added onto C. */
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
	for (int r = blockIdx.y; r < rows; r += gridDim.y)
		dst[(size_t)r * cols + c] = cu_word16(src[(size_t)(r0 + r) * ld + c0 + c], prec);
}

/* Two floats' words as one 32-bit word, the first in the low half */
static __device__ inline uint32_t words2(float lo, float hi, int prec)
{
	return cu_word16(lo, prec) | (uint32_t)cu_word16(hi, prec) << 16;
}

/* pack16 8 columns a thread, where the rows are whole 8s and every 8
 * lies 16-byte aligned (vec8): a 32-byte load and a 16-byte store each.
 * With a thread an element, pack16 and the rounding of C took a fifth of
 * a bf16 GPT step on an H200 (ncu, bench/results/gpu-h200-20261127.json).
 * src and dst at the submatrix's start. */
static __global__ void pack16_vec8(const float *src, size_t ld, size_t rows, size_t cols8,
				   int prec, uint16_t *dst)
{
	GRID_STRIDE(i, rows * cols8) {
		size_t r = i / cols8, c = i % cols8 * 8;
		float4 a = *(const float4 *)(src + r * ld + c);
		float4 b = *(const float4 *)(src + r * ld + c + 4);
		uint4 w = make_uint4(words2(a.x, a.y, prec), words2(a.z, a.w, prec),
				     words2(b.x, b.y, prec), words2(b.z, b.w, prec));
		*(uint4 *)(dst + r * cols8 * 8 + c) = w;
	}
}

/* Whether rows of cols floats, ld apart from p, go 8 at a time into dst:
 * 16-byte aligned at each row's start and 8 columns on */
static int vec8(const float *p, size_t ld, int cols, const void *dst)
{
	return cols % 8 == 0 && ld % 4 == 0 && ((uintptr_t)p % 16) == 0 &&
	       ((uintptr_t)dst % 16) == 0;
}

void cu_pack16(const float *src, int ld, int r0, int c0, int rows, int cols, int prec,
	       uint16_t *dst)
{
	const float *f = src + (size_t)r0 * ld + c0;
	if (vec8(f, (size_t)ld, cols, dst)) {
		size_t n8 = (size_t)rows * (cols / 8);
		pack16_vec8<<<cu_blocks(n8), CU_THREADS, 0, cu.stream>>>(f, (size_t)ld, (size_t)rows,
									 (size_t)cols / 8, prec, dst);
	} else {
		dim3 grid((unsigned)((cols + CU_THREADS - 1) / CU_THREADS),
			  (unsigned)(rows < 65535 ? rows : 65535));
		pack16<<<grid, CU_THREADS, 0, cu.stream>>>(src, ld, r0, c0, rows, cols, prec, dst);
	}
	cu_launched("gemm: rounding the operands");
}

/* k range [k0, k0 + nk) of a product's operand X as 16-bit words for
 * cuBLAS, X's k along its rows (kr: rows k0 on) or its columns, m the
 * other way; *ldo their leading dimension.  X of words already (half):
 * read where it lies; floats: rounded into dst, packed. */
static const uint16_t *operand16(const float *X, int half, int kr, int ld, int m, int k0, int nk,
				 int prec, uint16_t *dst, int *ldo)
{
	if (half) {
		*ldo = ld;
		return (const uint16_t *)X + (kr ? (size_t)k0 * ld : (size_t)k0);
	}
	*ldo = kr ? m : nk;
	if (kr)
		cu_pack16(X, ld, k0, 0, nk, m, prec, dst);
	else
		cu_pack16(X, ld, 0, k0, m, nk, prec, dst);
	return dst;
}

static void product(int prec, int ha, int hb, int tA, int tB, int M, int N, int K, float alpha,
		    const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
	cublasOperation_t opA = tA ? CUBLAS_OP_T : CUBLAS_OP_N;
	cublasOperation_t opB = tB ? CUBLAS_OP_T : CUBLAS_OP_N;
	cudaDataType type = prec == DLT_PREC_BF16 ? CUDA_R_16BF : CUDA_R_16F;
	const float one = 1.0f;
	size_t kc, wide = (ha ? 0 : (size_t)M) + (hb ? 0 : (size_t)N);
	if (M < 1 || N < 1)
		return;
	if (prec == DLT_PREC_F32 || K < 1) {
		cu_check_blas(cublasGemmEx(cu.blas, opB, opA, N, M, K, &alpha, B, CUDA_R_32F, ldb,
					   A, CUDA_R_32F, lda, &beta, C, CUDA_R_32F, ldc,
					   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT), "gemm");
		return;
	}
	/* the float operands' range, A's [M, kc] and B's [kc, N], in the
	 * scratch (an operand of 16-bit words is read where it lies), B's
	 * start kept 16-byte aligned; ranges a multiple of 64 long keep the
	 * leading dimensions multiples of 8, as the tensor cores' fast
	 * kernels want */
	kc = wide ? (CU_HALF_SCRATCH - 8) / wide : (size_t)K;
	if (kc >= 64 && kc < (size_t)K)
		kc &= ~(size_t)63;
	if (kc < 1) {
		cu_check(cudaErrorInvalidValue, "gemm: a matrix too large for the 16-bit scratch");
		return;
	}
	for (int k0 = 0; k0 < K; k0 += (int)kc) {
		int nk = K - k0 < (int)kc ? K - k0 : (int)kc, la, lb;
		uint16_t *sa = (uint16_t *)cu.half;
		uint16_t *sb = sa + (ha ? 0 : ((size_t)M * nk + 7) & ~(size_t)7);
		const uint16_t *a = operand16(A, ha, tA, lda, M, k0, nk, prec, sa, &la);
		const uint16_t *b = operand16(B, hb, !tB, ldb, N, k0, nk, prec, sb, &lb);
		if (!cu_check_blas(cublasGemmEx(cu.blas, opB, opA, N, M, nk, &alpha, b, type, lb, a,
						type, la, k0 ? &one : &beta, C, CUDA_R_32F, ldc,
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
