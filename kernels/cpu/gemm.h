/* The CPU's single-precision GEMM, row-major, as the backend table's gemm:
 * C = alpha * op(A) * op(B) + beta * C, A and B rounded to prec.  Called outside a parallel region
 * it uses the backend's threads; inside one (a conv kernel's per-sample
 * loop) it runs on the calling thread alone.  The same inputs give the
 * same bits for the same thread count.
 *
 * dlt's own kernels (gemm.c) give the same bits for any thread count, and
 * the scalar, AVX2 and AVX-512 ones give the same bits as each other: each
 * element of C is summed by fused multiply-adds in the same order.  Which
 * one runs is fixed at the first call from cpuid and DLT_GEMM (dlt(7)),
 * never from timings, so every process on a machine runs the same one. */
#ifndef DLT_CPU_GEMM_H
#define DLT_CPU_GEMM_H

#include "kernels/kernels.h"	/* enum dlt_prec */

void dlt_cpu_sgemm(int prec, int tA, int tB, int M, int N, int K, float alpha,
		   const float *A, int lda, const float *B, int ldb,
		   float beta, float *C, int ldc);

/* y = x rounded to prec (enum dlt_prec), dlt_round_prec's bits; y may be
 * x.  On the calling thread: the GEMM rounds its panels with it. */
void dlt_cpu_round_to(const float *x, float *y, size_t n, int prec);
/* y = the 16-bit words x of prec widened to floats (the backend's
 * widen), on the calling thread: the GEMM packs 16-bit operands with it */
void dlt_cpu_widen_to(const uint16_t *x, float *y, size_t n, int prec);
/* y = the floats x, of prec already, as its 16-bit words (the backend's
 * narrow), on the calling thread */
void dlt_cpu_narrow_to(const float *x, uint16_t *y, size_t n, int prec);
/* rows x cols of the words at src (rows ld apart) widened to dst (rows
 * dst_ld apart), on the calling thread: the GEMMs' 16-bit panels */
void dlt_cpu_widen_rows(const uint16_t *src, long ld, int rows, int cols, int prec, float *dst,
			long dst_ld);
/* Whether x holds values of prec already (rounding would keep its bits);
 * on the backend's threads outside a parallel region */
int dlt_cpu_is_rounded(const float *x, size_t n, int prec);

/* The implementations, for logs, the tests and bench/gemm. */
enum dlt_cpu_gemm_kind {
	DLT_GEMM_OPENBLAS,	/* cblas_sgemm: bits depend on the thread count */
	DLT_GEMM_SCALAR,	/* portable C, for CPUs without AVX2; slow */
	DLT_GEMM_AVX2,		/* AVX2 + FMA, 6 x 16 micro-kernel */
	DLT_GEMM_AVX512,	/* AVX-512F, 8 x 32 micro-kernel */
	DLT_GEMM_KINDS
};

/* The kind dlt_cpu_sgemm runs, and its name ("dlt-avx2", "openblas", ...). */
int dlt_cpu_gemm_kind(void);
const char *dlt_cpu_gemm_name(void);
/* The kernel dlt_cpu_sgemm runs for prec (enum dlt_prec): for bf16
 * "dlt-avx512-bf16" where the CPU has bf16 dot products (gemm_bf16.h)
 * and DLT_GEMM does not name a kernel, else the converted path's. */
const char *dlt_cpu_gemm_prec_name(int prec);
/* Whether dlt_cpu_sgemm runs bf16 on the CPU's bf16 dot products (that
 * kernel, "dlt-avx512-bf16") */
int dlt_cpu_gemm_bf16_dots(void);
const char *dlt_cpu_gemm_kind_name(int kind);
/* kernels.h's hold_weights: B's packed panels kept between calls (of our
 * kinds, not OpenBLAS's nor the native bf16 one), until it is called
 * with 0, which frees them; for the calls of dlt_cpu_gemm_weights (the
 * backend table's gemm) alone: dlt_cpu_sgemm's, from the other kernels,
 * have activations for B. */
void dlt_cpu_hold_weights(int on);
void dlt_cpu_gemm_weights(int prec, int tA, int tB, int M, int N, int K, float alpha,
			  const float *A, int lda, const float *B, int ldb, float beta, float *C,
			  int ldc);
/* Whether this CPU can run the kind. */
int dlt_cpu_gemm_supported(int kind);
/* dlt_cpu_sgemm with the given kind; a kind the CPU cannot run runs the
 * best of ours that it can, and so does openblas for a prec (enum
 * dlt_prec) other than f32: ours rounds A and B as it packs them. */
void dlt_cpu_sgemm_kind(int kind, int prec, int tA, int tB, int M, int N, int K, float alpha,
			const float *A, int lda, const float *B, int ldb,
			float beta, float *C, int ldc);

/* C [M, N] = A B for an A [M, K] used many times (a Winograd conv's
 * kernels): packed once by dlt_cpu_gemm_pack into ap (of
 * dlt_cpu_gemm_packed_floats), then dlt_cpu_gemm_packed reads B [K, N]
 * (rows ldb floats apart) where it lies, on the calling thread.  The
 * micro-kernels read up to DLT_GEMM_NR_MAX - 1 floats past each row's N
 * (the memory after B's last row must have that room); C's columns from
 * them are not stored.  C gets the bits our f32 kernels give it in
 * dlt_cpu_sgemm. */
#define DLT_GEMM_NR_MAX 32
size_t dlt_cpu_gemm_packed_floats(int M, int K);
void dlt_cpu_gemm_pack(int M, int K, const float *A, int lda, float *ap);
void dlt_cpu_gemm_packed(int M, int N, int K, const float *ap, const float *B, int ldb,
			 float *C, int ldc);

#endif
