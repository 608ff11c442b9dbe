/* The CPU GEMM's AVX-512 kernels, which no CPU without AVX-512 runs:
 * kernels/cpu/gemm.c's f32 (and fp16) kernel and gemm_bf16.c's vdpbf16ps
 * one, run on an emulated Sapphire Rapids (test/emu/x86-run.py, Bochs;
 * test/t0500-gemm-emulated.sh), so that they are tested on every machine.
 * Each is held, bit for bit, to kernels that test-gemm checks against a
 * double-precision reference everywhere: the f32 one to the scalar and
 * AVX2 kernels (gemm.c sums in the same order in all three), vdpbf16ps to
 * the portable micro-kernel that does its arithmetic in C.  NaN counts as
 * equal to any NaN.
 *
 * A program for no OS (emu.h): gemm.c and gemm_bf16.c as they are, built
 * without OpenMP and linked with libc.c's one-thread stand-ins. */
#include <string.h>

#include "kernels/common/math.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_bf16.h"
#include "test/emu/emu.h"

typedef struct shape {
	int tA, tB, M, N, K;
	float alpha, beta;
	int specials;
} shape;

/* Whole tiles; partial ones and odd K; beta 0 (C unread); K over KC (the
 * later slices add onto C); N over NC; M over MC; the transposes; every
 * kind of value. */
static const shape shapes[] = {
	{ 0, 0, 64, 64, 64, 1.0f, 0.0f, 0 },	 { 0, 0, 37, 45, 19, 0.5f, 0.25f, 0 },
	{ 1, 0, 40, 96, 33, -1.5f, 1.0f, 0 },	 { 0, 1, 17, 70, 101, 1.0f, -2.0f, 0 },
	{ 1, 1, 9, 33, 7, 2.0f, 0.0f, 0 },	 { 0, 0, 24, 40, 1100, 1.0f, 0.5f, 0 },
	{ 0, 0, 3, 3100, 5, 1.0f, 1.0f, 0 },	 { 0, 0, 320, 64, 64, 1.0f, 0.0f, 0 },
	{ 0, 1, 48, 96, 130, 0.75f, 0.5f, 1 },
};
#define SHAPES (int)(sizeof(shapes) / sizeof(shapes[0]))

static float A[26400], B[44000], Cin[20480], C0[20480], C1[20480];

static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint32_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

static float near_one(void)
{
	return (float)((int32_t)(next() % 2001) - 1000) / 256.0f;
}

/* Mostly values near 1 of either sign, and with specials some of every
 * kind: zeros, infinities and NaNs of any sign and payload, bf16
 * subnormals, and values whose products fall below f32's normals
 * (vdpbf16ps flushes both to zero).  No product overflows: Bochs does
 * each step of vdpbf16ps as one fused multiply-add, where the Intel
 * manual rounds the product first, and the two differ only where the
 * product overflows f32 (an inf against a finite sum, or NaN against an
 * inf). */
static float value(int specials)
{
	uint32_t kind = specials ? next() % 16 : 15;
	if (kind == 0)
		return 0.0f;
	if (kind == 1)
		return dlt_bits_f32((next() & 0x807fffffu) | 0x7f800000u);
	if (kind == 2)
		return near_one() * 0x1p-130f;
	if (kind == 3)
		return near_one() * 0x1p-64f;
	return near_one();
}

static void fill(const shape *s)
{
	for (int i = 0; i < s->M * s->K; i++)
		A[i] = value(s->specials);
	for (int i = 0; i < s->K * s->N; i++)
		B[i] = value(s->specials);
	for (int i = 0; i < s->M * s->N; i++)
		Cin[i] = near_one() * 4.0f;
}

static void gemm_kind(int kind, int prec, const shape *s, float *C)
{
	memcpy(C, Cin, (size_t)s->M * s->N * sizeof(float));
	dlt_cpu_sgemm_kind(kind, prec, s->tA, s->tB, s->M, s->N, s->K, s->alpha, A,
			   s->tA ? s->M : s->K, B, s->tB ? s->K : s->N, s->beta, C, s->N);
}

static void gemm_bf16(int native, const shape *s, float *C)
{
	memcpy(C, Cin, (size_t)s->M * s->N * sizeof(float));
	if (native)	/* as the model calls it: dlt_cpu_sgemm picks vdpbf16ps */
		dlt_cpu_sgemm(DLT_PREC_BF16, s->tA, s->tB, s->M, s->N, s->K, s->alpha, A,
			      s->tA ? s->M : s->K, B, s->tB ? s->K : s->N, s->beta, C, s->N);
	else
		dlt_cpu_sgemm_bf16(0, s->tA, s->tB, s->M, s->N, s->K, s->alpha, A,
				   s->tA ? s->M : s->K, B, s->tB ? s->K : s->N, s->beta, C, s->N);
}

/* got against want, n floats: a test line, and the first difference */
static void same_bits(const float *got, const float *want, int n, int cols, const char *what,
		      const shape *s)
{
	int differ = 0, at = 0;
	for (int i = 0; i < n; i++)
		if (dlt_f32_bits(got[i]) != dlt_f32_bits(want[i]) &&
		    (got[i] == got[i] || want[i] == want[i]) && !differ++)
			at = i;
	ok(!differ);
	put(what);
	put(": ");
	put_int(s->M);
	put(" x ");
	put_int(s->N);
	put(" x ");
	put_int(s->K);
	put(s->tA ? " tA" : "");
	put(s->tB ? " tB" : "");
	put(s->specials ? ", every kind of value" : "");
	put("\n");
	if (differ) {
		put("# ");
		put_int(differ);
		put(" differ, the first at row ");
		put_int(at / cols);
		put(" column ");
		put_int(at % cols);
		put(": ");
		put_hex(dlt_f32_bits(got[at]));
		put(", want ");
		put_hex(dlt_f32_bits(want[at]));
		put("\n");
	}
}

/* An A packed once and B read in place, with NaN past its N columns (the
 * Winograd convs' GEMM), against the AVX-512 kernel's dlt_cpu_sgemm */
static void test_packed(const shape *s)
{
	int ldb = s->N + 3;
	static float bwide[26000], ap[30000];
	for (int i = 0; i < s->K * ldb + DLT_GEMM_NR_MAX; i++)
		bwide[i] = dlt_bits_f32(0x7fc00000u);
	for (int k = 0; k < s->K; k++)
		memcpy(bwide + (size_t)k * ldb, B + (size_t)k * s->N, s->N * sizeof(float));
	memset(C1, 0, sizeof(C1));
	dlt_cpu_gemm_pack(s->M, s->K, A, s->K, ap);
	dlt_cpu_gemm_packed(s->M, s->N, s->K, ap, bwide, ldb, C1, s->N);
	dlt_cpu_sgemm_kind(DLT_GEMM_AVX512, DLT_PREC_F32, 0, 0, s->M, s->N, s->K, 1.0f, A, s->K,
			   B, s->N, 0.0f, C0, s->N);
	same_bits(C1, C0, s->M * s->N, s->N, "AVX-512, A packed, B in place: dlt_cpu_sgemm's bits",
		  s);
}

int emu_main(char *buf, size_t cap)
{
	static const shape packed[] = { { 0, 0, 64, 224, 32, 1.0f, 0.0f, 0 },
					{ 0, 0, 7, 37, 5, 1.0f, 0.0f, 0 },
					{ 0, 0, 66, 50, 400, 1.0f, 0.0f, 0 } };
	emu_tap_start(buf, cap, 3 + 4 * SHAPES + 3);
	ok(dlt_cpu_gemm_supported(DLT_GEMM_AVX512) && dlt_cpu_gemm_kind() == DLT_GEMM_AVX512);
	put("cpuid: the f32 GEMM runs the AVX-512 kernel\n");
	ok(dlt_cpu_bf16_native() && !strcmp(dlt_cpu_gemm_prec_name(DLT_PREC_BF16),
					     "dlt-avx512-bf16"));
	put("cpuid and xgetbv: the bf16 GEMM runs vdpbf16ps\n");
	for (int i = 0; i < SHAPES; i++) {
		const shape *s = &shapes[i];
		int n = s->M * s->N;
		fill(s);
		gemm_kind(DLT_GEMM_AVX512, DLT_PREC_F32, s, C1);
		gemm_kind(DLT_GEMM_SCALAR, DLT_PREC_F32, s, C0);
		same_bits(C1, C0, n, s->N, "f32 AVX-512: the scalar kernel's bits", s);
		gemm_kind(DLT_GEMM_AVX2, DLT_PREC_F32, s, C0);
		same_bits(C1, C0, n, s->N, "f32 AVX-512: the AVX2 kernel's bits", s);
		gemm_kind(DLT_GEMM_AVX512, DLT_PREC_F16, s, C1);
		gemm_kind(DLT_GEMM_SCALAR, DLT_PREC_F16, s, C0);
		same_bits(C1, C0, n, s->N, "fp16 AVX-512: the scalar kernel's bits", s);
		gemm_bf16(1, s, C1);
		gemm_bf16(0, s, C0);
		same_bits(C1, C0, n, s->N, "bf16 vdpbf16ps: the portable kernel's bits", s);
	}
	for (int i = 0; i < 3; i++) {
		fill(&packed[i]);
		test_packed(&packed[i]);
	}
	ok(!emu_alloc_failed);
	put("the packing buffers were had: the micro-kernels ran\n");
	return emu_tap_end();
}
