/* bench/gemm: dlt's GEMM against OpenBLAS's on the shapes the models run,
 * and both against this machine's FMA peak, measured in the same run.
 *
 *   gemm [--json FILE] [--threads N] [--kind NAME]
 *
 * The peak is a loop of independent FMA chains in the widest vector ISA
 * the CPU has, on 1 thread and on N (default: OpenMP's count).  Each GEMM
 * runs on 1 and on N threads, the best of several repetitions counting. */
#include <errno.h>
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/threads.h"

typedef struct shape {
	const char *name;
	int m, n, k, ta, tb;
} shape;

/* lib/nn's calls: forward x W^T (tB), dW = dY^T X (tA), dX = dY W */
static const shape shapes[] = {
	{ "mlp fc1 fwd", 128, 256, 784, 0, 1 },
	{ "mlp fc2 fwd", 128, 128, 256, 0, 1 },
	{ "mlp fc3 fwd", 128, 10, 128, 0, 1 },
	{ "mlp fc1 dW", 256, 784, 128, 1, 0 },
	{ "mlp fc2 dW", 128, 256, 128, 1, 0 },
	{ "mlp fc3 dW", 10, 128, 128, 1, 0 },
	{ "mlp fc2 dX", 128, 256, 128, 0, 0 },
	{ "mlp fc3 dX", 128, 128, 10, 0, 0 },
	{ "cnn conv1 fwd", 32, 100352, 9, 0, 0 },
	{ "cnn conv2 fwd", 64, 25088, 288, 0, 0 },
	{ "cnn conv1 dW", 32, 9, 100352, 0, 1 },
	{ "cnn conv2 dW", 64, 288, 25088, 0, 1 },
	{ "cnn conv2 dcol", 288, 25088, 64, 1, 0 },
	{ "cnn dense fwd", 128, 128, 3136, 0, 1 },
	{ "cnn dense dW", 128, 3136, 128, 1, 0 },
	{ "cnn dense dX", 128, 3136, 128, 0, 0 },
	{ "square 1024", 1024, 1024, 1024, 0, 0 },
};
#define NSHAPES (sizeof(shapes) / sizeof(shapes[0]))

typedef struct result {
	double ours, blas;	/* GFLOP/s */
} result;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- FMA peak: CHAINS independent accumulators hide the latency ---- */

#define CHAINS 16

__attribute__((target("avx512f")))
static float fma_loop_avx512(long iters)
{
	__m512 x[CHAINS], m = _mm512_set1_ps(0.9999999f), a = _mm512_set1_ps(1e-7f);
	for (int j = 0; j < CHAINS; j++)
		x[j] = _mm512_set1_ps(1.0f + j);
	for (long i = 0; i < iters; i++)
		#pragma GCC unroll 16
		for (int j = 0; j < CHAINS; j++)
			x[j] = _mm512_fmadd_ps(x[j], m, a);
	for (int j = 1; j < CHAINS; j++)
		x[0] = _mm512_add_ps(x[0], x[j]);
	return _mm512_reduce_add_ps(x[0]);
}

/* 12 chains and 16 registers: enough for 2 units of 4-cycle latency */
__attribute__((target("avx2,fma")))
static float fma_loop_avx2(long iters)
{
	__m256 x[12], m = _mm256_set1_ps(0.9999999f), a = _mm256_set1_ps(1e-7f);
	float out[8];
	for (int j = 0; j < 12; j++)
		x[j] = _mm256_set1_ps(1.0f + j);
	for (long i = 0; i < iters; i++)
		#pragma GCC unroll 12
		for (int j = 0; j < 12; j++)
			x[j] = _mm256_fmadd_ps(x[j], m, a);
	for (int j = 1; j < 12; j++)
		x[0] = _mm256_add_ps(x[0], x[j]);
	_mm256_storeu_ps(out, x[0]);
	return out[0];
}

static int isa_wide;	/* 16 (AVX-512), 8 (AVX2) or 0 */
static volatile float sink;

/* GFLOP/s of the FMA loop on `threads` threads, best of 3 */
static double fma_peak(int threads)
{
	long iters = 20000000;
	double best = 0.0;
	int chains = isa_wide == 16 ? CHAINS : 12;
	for (int rep = 0; rep < 3; rep++) {
		double t = now();
		#pragma omp parallel num_threads(threads)
		{
			float s = isa_wide == 16 ? fma_loop_avx512(iters) : fma_loop_avx2(iters);
			if (s == 12345.0f)
				sink = s;
		}
		t = now() - t;
		double g = 2.0 * isa_wide * chains * iters * threads / t * 1e-9;
		if (g > best)
			best = g;
	}
	return best;
}

/* ---- GEMM timings ---- */

static float *rand_floats(size_t n, unsigned *seed)
{
	float *p = malloc(n * sizeof(float));
	if (!p) {
		fprintf(stderr, "gemm: out of memory\n");
		exit(1);
	}
	for (size_t i = 0; i < n; i++) {
		*seed = *seed * 1664525u + 1013904223u;
		p[i] = (float)(*seed >> 8) / (1 << 24) - 0.5f;
	}
	return p;
}

/* One call: kind (converted where prec is not f32), or kind < 0: what
 * dlt_cpu_sgemm runs for prec (bf16 on the CPU's own dot products where
 * it has them). */
static void call_gemm(int kind, int prec, const shape *s, const float *A, const float *B,
		      float *C)
{
	int lda = s->ta ? s->m : s->k, ldb = s->tb ? s->k : s->n;
	if (kind < 0)
		dlt_cpu_sgemm(prec, s->ta, s->tb, s->m, s->n, s->k, 1.0f, A, lda, B, ldb, 0.0f, C,
			      s->n);
	else
		dlt_cpu_sgemm_kind(kind, prec, s->ta, s->tb, s->m, s->n, s->k, 1.0f, A, lda, B, ldb,
				   0.0f, C, s->n);
}

/* GFLOP/s of one kind on one shape: the best of at least 3 runs and
 * 0.15 s, after a warm-up run that also grows the packing buffers */
static double time_prec(int kind, int prec, const shape *s, const float *A, const float *B,
			float *C)
{
	double best = 1e30, spent = 0.0, flops = 2.0 * s->m * s->n * s->k;
	call_gemm(kind, prec, s, A, B, C);
	for (int rep = 0; rep < 1000 && (rep < 3 || spent < 0.15); rep++) {
		double t = now();
		call_gemm(kind, prec, s, A, B, C);
		t = now() - t;
		spent += t;
		if (t < best)
			best = t;
	}
	return flops / best * 1e-9;
}

static double time_gemm(int kind, const shape *s, const float *A, const float *B, float *C)
{
	return time_prec(kind, DLT_PREC_F32, s, A, B, C);
}

static void usage(void)
{
	fprintf(stderr, "usage: gemm [--json FILE] [--threads N] [--kind dlt-avx512|dlt-avx2|dlt-scalar]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *json = NULL;
	int kind = -1, nthreads = omp_get_max_threads(), tcounts[2], ntc;
	double peak[2], bf16[2] = { 0, 0 };	/* square 1024, 1 thread: default, converted */
	result res[2][NSHAPES];
	unsigned seed = 12345;
	FILE *f;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json") && i + 1 < argc) {
			json = argv[++i];
		} else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
			char *end;
			long v;
			errno = 0;
			v = strtol(argv[++i], &end, 10);
			if (errno || *end || end == argv[i] || v < 1 || v > 4096) {
				fprintf(stderr, "gemm: --threads '%s': not a count from 1 to 4096\n",
					argv[i]);
				exit(2);
			}
			nthreads = (int)v;
		} else if (!strcmp(argv[i], "--kind") && i + 1 < argc) {
			i++;
			for (int k = DLT_GEMM_SCALAR; k < DLT_GEMM_KINDS; k++)
				if (!strcmp(argv[i], dlt_cpu_gemm_kind_name(k)))
					kind = k;
			if (kind < 0 || !dlt_cpu_gemm_supported(kind)) {
				fprintf(stderr, "gemm: --kind '%s': not one of ours this CPU runs\n",
					argv[i]);
				exit(2);
			}
		} else {
			usage();
		}
	}
	if (kind < 0)
		kind = dlt_cpu_gemm_supported(DLT_GEMM_AVX512) ? DLT_GEMM_AVX512
		     : dlt_cpu_gemm_supported(DLT_GEMM_AVX2) ? DLT_GEMM_AVX2 : DLT_GEMM_SCALAR;
	isa_wide = __builtin_cpu_supports("avx512f") ? 16
		 : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 8 : 0;
	tcounts[0] = 1;
	tcounts[1] = nthreads;
	ntc = nthreads > 1 ? 2 : 1;

	for (int t = 0; t < ntc; t++)
		peak[t] = isa_wide ? fma_peak(tcounts[t]) : 0.0;
	for (size_t s = 0; s < NSHAPES; s++) {
		const shape *sh = &shapes[s];
		float *A = rand_floats((size_t)sh->m * sh->k, &seed);
		float *B = rand_floats((size_t)sh->k * sh->n, &seed);
		float *C = rand_floats((size_t)sh->m * sh->n, &seed);
		for (int t = 0; t < ntc; t++) {
			dlt_cpu_set_threads(tcounts[t]);
			res[t][s].ours = time_gemm(kind, sh, A, B, C);
			res[t][s].blas = time_gemm(DLT_GEMM_OPENBLAS, sh, A, B, C);
		}
		if (!strcmp(sh->name, "square 1024")) {
			dlt_cpu_set_threads(1);
			bf16[0] = time_prec(-1, DLT_PREC_BF16, sh, A, B, C);
			bf16[1] = time_prec(kind, DLT_PREC_BF16, sh, A, B, C);
		}
		free(A);
		free(B);
		free(C);
	}

	printf("gemm: ours %s (default %s, for bf16 %s); FMA peak %s: %.1f GFLOP/s on 1 thread",
	       dlt_cpu_gemm_kind_name(kind), dlt_cpu_gemm_name(),
	       dlt_cpu_gemm_prec_name(DLT_PREC_BF16),
	       isa_wide == 16 ? "avx512" : isa_wide == 8 ? "avx2" : "none", peak[0]);
	if (ntc > 1)
		printf(", %.1f on %d", peak[1], tcounts[1]);
	printf("\nbf16 square 1024, 1 thread: %s %.1f GFLOP/s, converted %s %.1f (%.2fx)",
	       dlt_cpu_gemm_prec_name(DLT_PREC_BF16), bf16[0], dlt_cpu_gemm_kind_name(kind),
	       bf16[1], bf16[1] > 0 ? bf16[0] / bf16[1] : 0.0);
	printf("\n%-16s %6s %6s %6s %2s %2s %3s %8s %6s %8s %6s %7s\n", "shape", "M", "N", "K",
	       "tA", "tB", "thr", "dlt GF/s", "peak", "blas GF/s", "peak", "dlt/blas");
	for (int t = 0; t < ntc; t++) {
		for (size_t s = 0; s < NSHAPES; s++) {
			const shape *sh = &shapes[s];
			const result *r = &res[t][s];
			double p = peak[t] > 0 ? peak[t] : 1e30;
			printf("%-16s %6d %6d %6d %2d %2d %3d %8.1f %5.0f%% %9.1f %5.0f%% %7.2f\n",
			       sh->name, sh->m, sh->n, sh->k, sh->ta, sh->tb, tcounts[t], r->ours,
			       100 * r->ours / p, r->blas, 100 * r->blas / p, r->ours / r->blas);
		}
	}

	if (!json)
		return 0;
	f = fopen(json, "w");
	if (!f) {
		fprintf(stderr, "gemm: %s: %s\n", json, strerror(errno));
		return 1;
	}
	fprintf(f, "{\n  \"bench\": \"gemm\",\n  \"dlt_kind\": \"%s\",\n  \"default_kind\": \"%s\",\n"
		"  \"bf16_kind\": \"%s\",\n", dlt_cpu_gemm_kind_name(kind), dlt_cpu_gemm_name(),
		dlt_cpu_gemm_prec_name(DLT_PREC_BF16));
	fprintf(f, "  \"bf16_square_gflops\": %.2f,\n  \"bf16_converted_square_gflops\": %.2f,\n",
		bf16[0], bf16[1]);
	fprintf(f, "  \"peak_isa\": \"%s\",\n  \"peak_gflops\": {",
		isa_wide == 16 ? "avx512" : isa_wide == 8 ? "avx2" : "none");
	for (int t = 0; t < ntc; t++)
		fprintf(f, "%s\"%d\": %.2f", t ? ", " : "", tcounts[t], peak[t]);
	fprintf(f, "},\n  \"results\": [\n");
	for (int t = 0; t < ntc; t++) {
		for (size_t s = 0; s < NSHAPES; s++) {
			const shape *sh = &shapes[s];
			const result *r = &res[t][s];
			double p = peak[t] > 0 ? peak[t] : 1e30;
			fprintf(f, "    {\"name\": \"%s\", \"m\": %d, \"n\": %d, \"k\": %d, \"ta\": %d, "
				"\"tb\": %d, \"threads\": %d, \"dlt_gflops\": %.2f, "
				"\"openblas_gflops\": %.2f, \"dlt_frac_peak\": %.4f, "
				"\"openblas_frac_peak\": %.4f, \"dlt_over_openblas\": %.4f}%s\n",
				sh->name, sh->m, sh->n, sh->k, sh->ta, sh->tb, tcounts[t], r->ours,
				r->blas, r->ours / p, r->blas / p, r->ours / r->blas,
				t == ntc - 1 && s == NSHAPES - 1 ? "" : ",");
		}
	}
	fprintf(f, "  ]\n}\n");
	if (fclose(f)) {
		fprintf(stderr, "gemm: %s: %s\n", json, strerror(errno));
		return 1;
	}
	return 0;
}
