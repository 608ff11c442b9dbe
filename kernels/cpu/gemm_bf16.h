/* The GEMM of bf16 inputs on the CPU's own bf16 dot products (AVX-512
 * BF16), which dlt_cpu_sgemm runs for DLT_PREC_BF16 where the CPU has them
 * (gemm_bf16.c says how its sums differ from the converted path's). */
#ifndef DLT_CPU_GEMM_BF16_H
#define DLT_CPU_GEMM_BF16_H

/* Whether the CPU and the OS run vdpbf16ps: cpuid's AVX512F and
 * AVX512_BF16, and XCR0's ZMM state; and AVX512DQ, whose vfpclassps the
 * bf16 conversions use (every CPU with AVX512_BF16 has it). */
int dlt_cpu_bf16_native(void);

/* C = alpha op(A) op(B) + beta C, row-major, A and B rounded to bf16.
 * flags: 1, vdpbf16ps where the CPU has it; else, or without, the same
 * packing and loops around a portable C micro-kernel that does the
 * instruction's arithmetic (slow: for the tests); DLT_ROUND_C, C rounded
 * to bf16 too; DLT_A_HALF, DLT_B_HALF, the operand holds bf16 words
 * (kernels.h). */
void dlt_cpu_sgemm_bf16(int flags, int tA, int tB, int M, int N, int K, float alpha,
			const float *A, int lda, const float *B, int ldb, float beta, float *C,
			int ldc);

#endif
