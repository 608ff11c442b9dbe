/* dlt's GEMM (kernels/cpu/gemm.c), every kernel the CPU runs, against a
 * double-precision reference: edge sizes around the tiles, every
 * transpose, alpha and beta, beta = 0 over a C of NaN, padded leading
 * dimensions, shapes crossing the MC, KC and NC blocks; and the same bits
 * on 1, 2 and 3 threads, inside a parallel region, and from each kernel. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "tap.h"
#include "kernels/common/math.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_bf16.h"

static unsigned seed = 1;

static float *randv(size_t n)
{
	float *p = malloc(n * sizeof(float) + 1);
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1664525u + 1013904223u;
		p[i] = (float)(seed >> 8) / (1 << 23) - 1.0f;
	}
	return p;
}

typedef struct problem {
	int tA, tB, M, N, K, lda, ldb, ldc;
	float alpha, beta;
	float *A, *B, *C0;	/* C0: C before the call */
	size_t nc;
} problem;

/* pad widens the leading dimensions; nan_c fills C with NaN (beta = 0) */
static void make(problem *p, int tA, int tB, int M, int N, int K, int pad, float alpha,
		 float beta)
{
	p->tA = tA;
	p->tB = tB;
	p->M = M;
	p->N = N;
	p->K = K;
	p->lda = (tA ? M : K) + pad;
	p->ldb = (tB ? K : N) + pad;
	p->ldc = N + pad;
	p->alpha = alpha;
	p->beta = beta;
	p->A = randv((size_t)(tA ? K : M) * p->lda + 1);
	p->B = randv((size_t)(tB ? N : K) * p->ldb + 1);
	p->nc = (size_t)M * p->ldc;
	p->C0 = randv(p->nc);
	if (beta == 0.0f)
		for (size_t i = 0; i < p->nc; i++)
			p->C0[i] = NAN;
}

static void drop(problem *p)
{
	free(p->A);
	free(p->B);
	free(p->C0);
}

static float *run(int kind, const problem *p)
{
	float *C = malloc(p->nc * sizeof(float) + 1);
	memcpy(C, p->C0, p->nc * sizeof(float));
	dlt_cpu_sgemm_kind(kind, DLT_PREC_F32, p->tA, p->tB, p->M, p->N, p->K, p->alpha, p->A, p->lda, p->B,
			   p->ldb, p->beta, C, p->ldc);
	return C;
}

/* The double-precision answer and its error bound: K float roundings of
 * the terms' magnitudes. */
typedef struct answer {
	double *want, *bound;
} answer;

static answer reference(const problem *p)
{
	size_t n = (size_t)p->M * p->N;
	answer r = { malloc(n * sizeof(double) + 1), malloc(n * sizeof(double) + 1) };
	for (int i = 0; i < p->M; i++) {
		for (int j = 0; j < p->N; j++) {
			size_t at = (size_t)i * p->ldc + j;
			double s = 0.0, mag = 0.0;
			for (int k = 0; k < p->K; k++) {
				double a = p->tA ? p->A[(size_t)k * p->lda + i]
						 : p->A[(size_t)i * p->lda + k];
				double b = p->tB ? p->B[(size_t)j * p->ldb + k]
						 : p->B[(size_t)k * p->ldb + j];
				s += a * b;
				mag += fabs(a * b);
			}
			s *= p->alpha;
			mag *= fabs(p->alpha);
			if (p->beta != 0.0f) {	/* beta 0 ignores C, NaN included */
				s += (double)p->beta * p->C0[at];
				mag += fabs((double)p->beta * p->C0[at]);
			}
			r.want[(size_t)i * p->N + j] = s;
			r.bound[(size_t)i * p->N + j] = 1e-30 + mag * (p->K + 3) * 0x1p-24;
		}
	}
	return r;
}

/* The worst error of C over its bound; > 1 fails.  Padding columns must
 * be untouched (a NaN stays the same NaN: compare bits). */
static double check(const problem *p, const answer *r, const float *C)
{
	double worst = 0.0;
	for (int i = 0; i < p->M; i++) {
		for (int j = 0; j < p->ldc; j++) {
			size_t at = (size_t)i * p->ldc + j, e = (size_t)i * p->N + j;
			if (j >= p->N) {
				if (memcmp(&C[at], &p->C0[at], sizeof(float)))
					return INFINITY;
				continue;
			}
			if (!isfinite(C[at]))
				return INFINITY;
			worst = fmax(worst, fabs(C[at] - r->want[e]) / r->bound[e]);
		}
	}
	return worst;
}

static void drop_answer(answer *r)
{
	free(r->want);
	free(r->bound);
}

static int kinds[DLT_GEMM_KINDS], nkinds;

/* Edge sizes 1 .. 33 around the 4, 6, 8, 16 and 32 of the tiles, each
 * kernel, one line per kernel, transpose pair and alpha / beta case. */
static void test_edges(void)
{
	static const int ms[] = { 1, 2, 3, 5, 6, 7, 8, 9, 12, 13, 16, 17, 25, 31, 32, 33 };
	static const int ns[] = { 1, 2, 4, 7, 8, 9, 15, 16, 17, 23, 31, 32, 33 };
	static const int ks[] = { 1, 2, 7, 8, 9, 16, 33 };
	static const struct { float alpha, beta; int pad; const char *what; } ab[] = {
		{ 1.0f, 0.0f, 0, "alpha 1, beta 0 over NaN" },
		{ 0.5f, -1.5f, 0, "alpha 0.5, beta -1.5" },
		{ -2.0f, 1.0f, 3, "alpha -2, beta 1, leading dimensions + 3" },
		{ 1.0f, 0.0f, 5, "beta 0 over NaN, leading dimensions + 5" },
	};
	for (int c = 0; c < (int)(sizeof(ab) / sizeof(ab[0])); c++) {
		for (int t = 0; t < 4; t++) {
			double worst[DLT_GEMM_KINDS] = { 0 };
			int wm[DLT_GEMM_KINDS] = { 0 }, wn[DLT_GEMM_KINDS] = { 0 };
			int wk[DLT_GEMM_KINDS] = { 0 };
			for (size_t a = 0; a < sizeof(ms) / sizeof(ms[0]); a++)
			for (size_t b = 0; b < sizeof(ns) / sizeof(ns[0]); b++)
			for (size_t k = 0; k < sizeof(ks) / sizeof(ks[0]); k++) {
				problem p;
				answer r;
				make(&p, t & 1, t >> 1, ms[a], ns[b], ks[k], ab[c].pad, ab[c].alpha,
				     ab[c].beta);
				r = reference(&p);
				for (int q = 0; q < nkinds; q++) {
					float *C = run(kinds[q], &p);
					double d = check(&p, &r, C);
					if (!(d <= worst[q])) {
						worst[q] = d;
						wm[q] = ms[a];
						wn[q] = ns[b];
						wk[q] = ks[k];
					}
					free(C);
				}
				drop_answer(&r);
				drop(&p);
			}
			for (int q = 0; q < nkinds; q++)
				if (!ok(worst[q] <= 1.0, "%s tA %d tB %d, M, N, K 1 to 33, %s",
					dlt_cpu_gemm_kind_name(kinds[q]), t & 1, t >> 1, ab[c].what))
					diag("error %g of its bound at M %d N %d K %d", worst[q], wm[q],
					     wn[q], wk[q]);
		}
	}
}

/* Shapes that cross MC (144 rows), KC (256) and NC (3072 columns), with
 * K in unequal slices. */
static void test_blocks(void)
{
	static const int shapes[][3] = { { 20, 3100, 520 }, { 300, 40, 1000 }, { 7, 3200, 3 } };
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		for (int t = 0; t < 4; t++) {
			problem p;
			answer r;
			float *C[DLT_GEMM_KINDS];
			int same = 1;
			make(&p, t & 1, t >> 1, shapes[s][0], shapes[s][1], shapes[s][2], 1, 0.75f,
			     t == 3 ? 0.5f : 0.0f);
			r = reference(&p);
			for (int q = 0; q < nkinds; q++) {
				double d;
				C[q] = run(kinds[q], &p);
				d = check(&p, &r, C[q]);
				if (!ok(d <= 1.0, "%s tA %d tB %d, %d x %d x %d",
					dlt_cpu_gemm_kind_name(kinds[q]), t & 1, t >> 1, p.M, p.N, p.K))
					diag("error %g of its bound", d);
				same &= !memcmp(C[q], C[0], p.nc * sizeof(float));
			}
			/* every element gets the same fmas in the same order */
			ok(same, "tA %d tB %d, %d x %d x %d: the same bits from all %d kernels",
			   t & 1, t >> 1, p.M, p.N, p.K, nkinds);
			for (int q = 0; q < nkinds; q++)
				free(C[q]);
			drop_answer(&r);
			drop(&p);
		}
	}
}

/* Threads share out blocks of C, never K: the same bits on any count,
 * and inside a parallel region (each thread alone on its own C). */
static void test_threads(void)
{
	int saved = omp_get_max_threads();
	for (int q = 0; q < nkinds; q++) {
		for (int t = 0; t < 4; t++) {
			problem p;
			float *C1, *C2, *C3, *Cin[2];
			make(&p, t & 1, t >> 1, 200, 301, 400, 0, 1.0f, t == 2 ? -1.0f : 0.0f);
			omp_set_num_threads(1);
			C1 = run(kinds[q], &p);
			omp_set_num_threads(2);
			C2 = run(kinds[q], &p);
			omp_set_num_threads(3);
			C3 = run(kinds[q], &p);
			#pragma omp parallel num_threads(2)
			Cin[omp_get_thread_num()] = run(kinds[q], &p);
			ok(!memcmp(C1, C2, p.nc * 4) && !memcmp(C1, C3, p.nc * 4),
			   "%s tA %d tB %d: the same bits on 1, 2 and 3 threads",
			   dlt_cpu_gemm_kind_name(kinds[q]), t & 1, t >> 1);
			ok(!memcmp(C1, Cin[0], p.nc * 4) && !memcmp(C1, Cin[1], p.nc * 4),
			   "%s tA %d tB %d: the same bits inside a parallel region",
			   dlt_cpu_gemm_kind_name(kinds[q]), t & 1, t >> 1);
			free(C1);
			free(C2);
			free(C3);
			free(Cin[0]);
			free(Cin[1]);
			drop(&p);
		}
	}
	omp_set_num_threads(saved);
}

/* BLAS's corner cases: K = 0 and alpha = 0 scale C by beta without
 * reading A or B; M or N = 0 touch nothing. */
static void test_degenerate(void)
{
	for (int q = 0; q < nkinds; q++) {
		const char *name = dlt_cpu_gemm_kind_name(kinds[q]);
		float A[4] = { NAN, NAN, NAN, NAN }, B[4] = { NAN, NAN, NAN, NAN };
		float C[4] = { 1, 2, 3, 4 }, Cn[4] = { NAN, NAN, NAN, NAN };
		dlt_cpu_sgemm_kind(kinds[q], DLT_PREC_F32, 0, 0, 2, 2, 2, 0.0f, A, 2, B, 2, 2.0f, C, 2);
		ok(C[0] == 2 && C[1] == 4 && C[2] == 6 && C[3] == 8,
		   "%s alpha 0 scales C by beta and ignores NaN in A and B", name);
		dlt_cpu_sgemm_kind(kinds[q], DLT_PREC_F32, 0, 0, 2, 2, 0, 1.0f, A, 2, B, 2, 0.0f, Cn, 2);
		ok(Cn[0] == 0 && Cn[1] == 0 && Cn[2] == 0 && Cn[3] == 0,
		   "%s K 0, beta 0 zeroes a C of NaN", name);
		dlt_cpu_sgemm_kind(kinds[q], DLT_PREC_F32, 0, 0, 0, 2, 2, 1.0f, A, 2, B, 2, 0.0f, C, 2);
		dlt_cpu_sgemm_kind(kinds[q], DLT_PREC_F32, 0, 0, 2, 0, 2, 1.0f, A, 2, B, 2, 0.0f, C, 2);
		ok(C[0] == 2 && C[3] == 8, "%s M or N 0 leaves C alone", name);
	}
}

/* An A packed once and B read in place (the Winograd convs') against
 * dlt_cpu_sgemm with our kernel: the same bits, for N off the tiles, K
 * over KC, and the columns read past N (NaN here) never stored. */
static void test_packed(void)
{
	static const int shapes[][3] = { { 64, 224, 32 }, { 32, 224, 64 }, { 7, 37, 5 },
					 { 13, 3, 300 }, { 66, 50, 577 } };
	int kind = dlt_cpu_gemm_kind() == DLT_GEMM_OPENBLAS ? kinds[nkinds - 1]
							    : dlt_cpu_gemm_kind();
	for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
		int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], ldb = N + 3;
		problem p;
		make(&p, 0, 0, M, N, K, 0, 1.0f, 0.0f);
		float *B = malloc(((size_t)K * ldb + DLT_GEMM_NR_MAX) * sizeof(float));
		for (size_t i = 0; i < (size_t)K * ldb + DLT_GEMM_NR_MAX; i++)
			B[i] = NAN;
		for (int k = 0; k < K; k++)
			memcpy(B + (size_t)k * ldb, p.B + (size_t)k * p.ldb, N * sizeof(float));
		float *ap = malloc(dlt_cpu_gemm_packed_floats(M, K) * sizeof(float));
		float *C = malloc(p.nc * sizeof(float)), *want = run(kind, &p);
		memcpy(C, p.C0, p.nc * sizeof(float));
		dlt_cpu_gemm_pack(M, K, p.A, p.lda, ap);
		dlt_cpu_gemm_packed(M, N, K, ap, B, ldb, C, p.ldc);
		ok(!memcmp(C, want, p.nc * sizeof(float)),
		   "packed A, B in place: %d x %d x %d the bits of %s", M, N, K,
		   dlt_cpu_gemm_kind_name(kind));
		free(ap);
		free(B);
		free(C);
		free(want);
		drop(&p);
	}
}

/* bf16 on the CPU's dot products (gemm_bf16.c) against the converted
 * path (ours, rounding the packed panels, f32 fma from k = 0 up).  Both
 * sum the same bf16-rounded products, in orders that differ within each
 * pair of k, so each is within (K + 3) 2^-24 (|alpha| sum |a b| + |beta c|)
 * of the exact sum and they differ by at most twice that: the tolerance.
 * The portable micro-kernel runs everywhere, so the bf16 packing and loops
 * are tested here; vdpbf16ps only where the CPU has it. */
static double bf16_worst(const problem *p, const float *got, const float *want)
{
	double worst = 0.0;
	for (int i = 0; i < p->M; i++) {
		for (int j = 0; j < p->ldc; j++) {
			size_t at = (size_t)i * p->ldc + j;
			double mag = 0.0, err;
			if (j >= p->N) {	/* padding: untouched */
				if (memcmp(&got[at], &p->C0[at], sizeof(float)))
					return INFINITY;
				continue;
			}
			for (int k = 0; k < p->K; k++) {
				float a = p->tA ? p->A[(size_t)k * p->lda + i] : p->A[(size_t)i * p->lda + k];
				float b = p->tB ? p->B[(size_t)j * p->ldb + k] : p->B[(size_t)k * p->ldb + j];
				mag += fabs((double)dlt_round_bf16(a) * dlt_round_bf16(b));
			}
			mag *= fabs(p->alpha);
			if (p->beta != 0.0f)
				mag += fabs((double)p->beta * p->C0[at]);
			err = fabs((double)got[at] - want[at]);
			if (!(err <= 1e-30 + 2 * mag * (p->K + 3) * 0x1p-24))
				return INFINITY;	/* NaN too */
			if (mag > 0)
				worst = fmax(worst, err / (2 * mag * (p->K + 3) * 0x1p-24));
		}
	}
	return worst;
}

static float *run_bf16(int native, const problem *p)
{
	float *C = malloc(p->nc * sizeof(float) + 1);
	memcpy(C, p->C0, p->nc * sizeof(float));
	dlt_cpu_sgemm_bf16(native, p->tA, p->tB, p->M, p->N, p->K, p->alpha, p->A, p->lda, p->B,
			   p->ldb, p->beta, C, p->ldc);
	return C;
}

static float *run_converted(const problem *p)
{
	float *C = malloc(p->nc * sizeof(float) + 1);
	memcpy(C, p->C0, p->nc * sizeof(float));
	dlt_cpu_sgemm_kind(kinds[nkinds - 1], DLT_PREC_BF16, p->tA, p->tB, p->M, p->N, p->K,
			   p->alpha, p->A, p->lda, p->B, p->ldb, p->beta, C, p->ldc);
	return C;
}

static void test_bf16_kernel(int native, const char *what)
{
	/* around the 8 x 32 tile, odd K, K across the 512 slice, M across
	 * the 96-row block */
	static const int shapes[][3] = { { 1, 1, 1 }, { 7, 33, 5 }, { 8, 32, 2 }, { 9, 31, 3 },
					 { 17, 65, 513 }, { 100, 70, 1030 }, { 200, 40, 64 } };
	int saved = omp_get_max_threads();
	for (int t = 0; t < 4; t++) {
		double worst = 0.0;
		for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
			for (int v = 0; v < 2; v++) {
				problem p;
				float *got, *want;
				make(&p, t & 1, t >> 1, shapes[s][0], shapes[s][1], shapes[s][2], 3,
				     v ? 1.0f : 0.5f, v ? 0.0f : 2.0f);
				got = run_bf16(native, &p);
				want = run_converted(&p);
				worst = fmax(worst, bf16_worst(&p, got, want));
				free(got);
				free(want);
				drop(&p);
			}
		}
		ok(worst <= 1.0, "bf16 %s tA %d tB %d: the converted path's sums within the "
		   "tolerance (worst %.3g of it), beta 0 over NaN, padding untouched", what, t & 1,
		   t >> 1, worst);
	}
	{
		problem p;
		float *C1, *C2;
		make(&p, 0, 1, 300, 64, 600, 0, 1.0f, 0.5f);
		omp_set_num_threads(1);
		C1 = run_bf16(native, &p);
		omp_set_num_threads(3);
		C2 = run_bf16(native, &p);
		omp_set_num_threads(saved);
		ok(!memcmp(C1, C2, p.nc * sizeof(float)), "bf16 %s: the same bits on 1 and 3 threads",
		   what);
		free(C1);
		free(C2);
		drop(&p);
	}
}

/* The packing rounds as dlt_round_bf16: the largest f32 subnormal goes
 * up to bf16's smallest normal, 2^-126, where a conversion that reads
 * subnormals as zero (vcvtne2ps2bf16's) would drop it.  Each element of C
 * sums two products of it with 2^100, one from A and one from B: 2^-25,
 * every layout, whole vectors of the packing (M 16: two A panels at once, N 32, K 64). */
static void test_bf16_subnormal(int native, const char *what)
{
	const int M = 16, N = 32, K = 64;
	float sub, *A = calloc((size_t)M * K, 4), *B = calloc((size_t)K * N, 4);
	float *C = malloc((size_t)M * N * 4);
	uint32_t bits = 0x007fffff;
	int bad = 0;
	memcpy(&sub, &bits, 4);
	for (int t = 0; t < 4; t++) {
		int tA = t & 1, tB = t >> 1;
		for (int i = 0; i < M; i++) {
			A[tA ? 5 * M + i : i * K + 5] = sub;
			A[tA ? 9 * M + i : i * K + 9] = 0x1p100f;
		}
		for (int j = 0; j < N; j++) {
			B[tB ? j * K + 5 : 5 * N + j] = 0x1p100f;
			B[tB ? j * K + 9 : 9 * N + j] = sub;
		}
		dlt_cpu_sgemm_bf16(native, tA, tB, M, N, K, 1.0f, A, tA ? M : K, B, tB ? K : N,
				   0.0f, C, N);
		for (int e = 0; e < M * N; e++)
			bad += C[e] != 0x1p-25f;
		memset(A, 0, (size_t)M * K * 4);
		memset(B, 0, (size_t)K * N * 4);
	}
	ok(!bad, "bf16 %s: the largest subnormal packed as 2^-126, in A and in B, every "
	   "transpose (%d of %d wrong)", what, bad, 4 * M * N);
	free(A);
	free(B);
	free(C);
}

static void test_bf16(void)
{
	diag("bf16 GEMM: %s", dlt_cpu_gemm_prec_name(DLT_PREC_BF16));
	test_bf16_kernel(0, "portable micro-kernel");
	test_bf16_subnormal(0, "portable micro-kernel");
	if (!dlt_cpu_bf16_native()) {
		skip("bf16 vdpbf16ps: this CPU or OS lacks AVX512_BF16 (cpuid 7.1 eax bit 5) "
		     "or the ZMM state (xgetbv); t0500 runs it on an emulated CPU");
		return;
	}
	test_bf16_kernel(1, "vdpbf16ps");
	test_bf16_subnormal(1, "vdpbf16ps");
	{
		problem p;
		float *C1 = NULL, *C2;
		make(&p, 0, 0, 33, 65, 77, 0, 1.0f, 0.0f);
		if (!strcmp(dlt_cpu_gemm_prec_name(DLT_PREC_BF16), "dlt-avx512-bf16")) {
			C1 = malloc(p.nc * sizeof(float));
			dlt_cpu_sgemm(DLT_PREC_BF16, 0, 0, p.M, p.N, p.K, 1.0f, p.A, p.lda, p.B,
				      p.ldb, 0.0f, C1, p.ldc);
		}
		C2 = run_bf16(1, &p);
		if (C1)
			ok(!memcmp(C1, C2, p.nc * sizeof(float)),
			   "dlt_cpu_sgemm runs vdpbf16ps for bf16");
		else
			skip("DLT_GEMM names a kernel: bf16 runs converted");
		free(C1);
		free(C2);
		drop(&p);
	}
}

/* Held weights (generation's): a B packed once and kept gives the bits
 * of packing it every call, in f32 and bf16 (where bf16 runs on our f32
 * kernels; the native one holds nothing), over 1 and 2 threads and over
 * K's slices; once let go, a B changed in place is read anew. */
static void test_held(void)
{
	static const int shapes[][3] = { { 1, 1152, 384 }, { 8, 300, 700 }, { 3, 17, 5 } };
	int threads = omp_get_max_threads();
	for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
		for (int prec = DLT_PREC_F32; prec <= DLT_PREC_BF16; prec++) {
			int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], same = 1;
			float *A = randv((size_t)M * K), *B = randv((size_t)N * K);
			float *want = calloc((size_t)M * N, sizeof(float));
			float *C = calloc((size_t)M * N, sizeof(float));
			dlt_cpu_sgemm(prec, 0, 1, M, N, K, 1.0f, A, K, B, K, 0.0f, want, N);
			dlt_cpu_hold_weights(1);
			for (int t = 1; t <= 2; t++) {	/* the first call packs, the second reads */
				omp_set_num_threads(t);
				dlt_cpu_gemm_weights(prec, 0, 1, M, N, K, 1.0f, A, K, B, K, 0.0f, C, N);
				same &= !memcmp(C, want, (size_t)M * N * sizeof(float));
			}
			omp_set_num_threads(threads);
			dlt_cpu_hold_weights(0);
			B[0] += 1.0f;
			dlt_cpu_sgemm(prec, 0, 1, M, N, K, 1.0f, A, K, B, K, 0.0f, want, N);
			dlt_cpu_gemm_weights(prec, 0, 1, M, N, K, 1.0f, A, K, B, K, 0.0f, C, N);
			ok(same && !memcmp(C, want, (size_t)M * N * sizeof(float)) && C[0] != 0.0f,
			   "held weights %dx%dx%d %s: the bits of packing B every call; let go, B "
			   "read anew", M, N, K, prec ? "bf16" : "f32");
			free(A);
			free(B);
			free(want);
			free(C);
		}
}

/* A GEMM of one row (generation's at batch 1, which the AVX kernels run
 * row-wise) gives the bits of that row in a GEMM of 8: panels in fours
 * and at an edge, K across its slices, C's columns across NC, each
 * transpose pair, beta 0 over NaN and 2. */
static void test_one_row(void)
{
	static const int shapes[][2] = { { 33, 5 }, { 200, 300 }, { 3100, 40 }, { 129, 520 } };
	for (int q = 0; q < nkinds; q++) {
		int same = 1;
		for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
			for (int t = 0; t < 8; t++) {
				problem p;
				float *C8, *C1;
				make(&p, t & 1, (t >> 1) & 1, 8, shapes[s][0], shapes[s][1], 3,
				     t >> 2 ? 1.0f : 0.5f, t >> 2 ? 0.0f : 2.0f);
				C8 = run(kinds[q], &p);
				p.M = 1;	/* A's row 0, where it lies in either layout */
				C1 = run(kinds[q], &p);
				same &= !memcmp(C1, C8, (size_t)p.N * sizeof(float));
				free(C8);
				free(C1);
				drop(&p);
			}
		ok(same, "%s: a GEMM of one row gives the bits of that row among 8",
		   dlt_cpu_gemm_kind_name(kinds[q]));
	}
}

int main(void)
{
	for (int k = DLT_GEMM_SCALAR; k < DLT_GEMM_KINDS; k++)
		if (dlt_cpu_gemm_supported(k))
			kinds[nkinds++] = k;
	diag("dlt_cpu_sgemm runs %s; testing %d of our kernels%s", dlt_cpu_gemm_name(), nkinds,
	     dlt_cpu_gemm_supported(DLT_GEMM_AVX512) ? ""
						     : " (t0500 runs dlt-avx512 on an emulated CPU)");
	ok(dlt_cpu_gemm_supported(DLT_GEMM_SCALAR) && dlt_cpu_gemm_supported(DLT_GEMM_OPENBLAS),
	   "the scalar kernel and OpenBLAS run anywhere");
	test_edges();
	test_blocks();
	test_threads();
	test_degenerate();
	test_packed();
	test_bf16();
	test_held();
	test_one_row();
	return done_testing();
}
