/* The bf16 GEMM of gemm_bf16.c, vdpbf16ps and all, for an emulated CPU
 * that has AVX512_BF16 (test/emu/x86-run.py runs it in Bochs as a
 * Sapphire Rapids): so the kernel that only such CPUs run is run on every
 * machine, against the portable micro-kernel that does the instruction's
 * arithmetic in C.
 *
 * No OS and no libc: the program is gemm_bf16.c itself (included, to
 * reach its static kernels and cpuid test), what it needs of libc and
 * OpenMP for one thread, written below, and emu_main, which writes TAP
 * into the emulator's buffer. */
#include "kernels/cpu/gemm_bf16.c"

/* ---- libc and OpenMP for one thread, no OS ---- */

void *memset(void *d, int c, size_t n)
{
	unsigned char *p = d;
	while (n--)
		*p++ = (unsigned char)c;
	return d;
}

void *memcpy(void *restrict d, const void *restrict s, size_t n)
{
	unsigned char *p = d;
	const unsigned char *q = s;
	while (n--)
		*p++ = *q++;
	return d;
}

int pthread_once(pthread_once_t *o, void (*f)(void))
{
	if (!*o) {
		*o = 1;
		f();
	}
	return 0;
}

int pthread_key_create(pthread_key_t *k, void (*destructor)(void *))
{
	*k = 0;
	return 0;
}

int pthread_setspecific(pthread_key_t k, const void *p)
{
	return 0;
}

/* The packing buffers, never freed: they only grow, and a failure would
 * send the GEMM down its unpacked path, past the micro-kernels, so it is
 * counted and fails the test. */
static unsigned char heap[4 << 20] __attribute__((aligned(64)));
static size_t heap_used;
static int heap_failed;

void *aligned_alloc(size_t align, size_t n)
{
	size_t at = (heap_used + align - 1) & ~(align - 1);
	if (at + n > sizeof(heap)) {
		heap_failed++;
		return NULL;
	}
	heap_used = at + n;
	return heap + at;
}

void free(void *p)
{
}

int omp_in_parallel(void)
{
	return 0;
}

int omp_get_max_threads(void)
{
	return 1;
}

/* ---- TAP into the emulator's buffer ---- */

static char *out, *out_end;
static int tests, failed;

static void put(const char *s)
{
	while (*s && out < out_end)
		*out++ = *s++;
}

static void put_int(long v)
{
	char d[24];
	int n = 0;
	unsigned long u = v < 0 ? -(unsigned long)v : (unsigned long)v;
	if (v < 0)
		put("-");
	do
		d[n++] = (char)('0' + u % 10);
	while (u /= 10);
	while (n--) {
		char c[2] = { d[n], 0 };
		put(c);
	}
}

static void put_hex(uint32_t v)
{
	char c[11] = "0x";
	for (int i = 0; i < 8; i++)
		c[2 + i] = "0123456789abcdef"[v >> (28 - 4 * i) & 15];
	c[10] = 0;
	put(c);
}

static int ok(int cond)
{
	tests++;
	if (!cond) {
		failed++;
		put("not ");
	}
	put("ok ");
	put_int(tests);
	put(" - ");
	return cond;
}

/* ---- the cases ---- */

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

static float A[26400], B[44000], C0[20480], C1[20480];

/* C = alpha op(A) op(B) + beta C by vdpbf16ps (C1) and by the portable
 * micro-kernel (C0): the same bits, NaN for NaN. */
static void test_case(int tA, int tB, int M, int N, int K, float alpha, float beta,
		      int specials)
{
	int lda = tA ? M : K, ldb = tB ? K : N, differ = 0, fi = 0;
	size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
	for (size_t i = 0; i < na; i++)
		A[i] = value(specials);
	for (size_t i = 0; i < nb; i++)
		B[i] = value(specials);
	for (size_t i = 0; i < nc; i++)
		C0[i] = C1[i] = near_one() * 4.0f;
	dlt_cpu_sgemm_bf16(1, tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C1, N);
	dlt_cpu_sgemm_bf16(0, tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C0, N);
	for (size_t i = 0; i < nc; i++)
		if (dlt_f32_bits(C1[i]) != dlt_f32_bits(C0[i]) &&
		    (C1[i] == C1[i] || C0[i] == C0[i]) && !differ++)
			fi = (int)i;
	ok(!differ);
	put("vdpbf16ps: ");
	put_int(M);
	put(" x ");
	put_int(N);
	put(" x ");
	put_int(K);
	put(tA ? " tA" : "");
	put(tB ? " tB" : "");
	put(specials ? ", every kind of value" : "");
	put(": the portable kernel's bits\n");
	if (differ) {
		put("# ");
		put_int(differ);
		put(" differ, the first at row ");
		put_int(fi / N);
		put(" column ");
		put_int(fi % N);
		put(": ");
		put_hex(dlt_f32_bits(C1[fi]));
		put(", want ");
		put_hex(dlt_f32_bits(C0[fi]));
		put("\n");
	}
}

/* The program: TAP into buf (cap bytes, NUL-terminated); returns the
 * count of failed tests. */
int emu_main(char *buf, size_t cap)
{
	out = buf;
	out_end = buf + cap - 1;
	put("1..11\n");
	ok(dlt_cpu_bf16_native());
	put("cpuid and xgetbv say the CPU runs vdpbf16ps\n");
	/* whole tiles; partial ones and odd K; beta 0 (C unread); K over
	 * KC (later slices add onto C); N over NC; the transposes; every
	 * kind of value */
	test_case(0, 0, 64, 64, 64, 1.0f, 0.0f, 0);
	test_case(0, 0, 37, 45, 19, 0.5f, 0.25f, 0);
	test_case(1, 0, 40, 96, 33, -1.5f, 1.0f, 0);
	test_case(0, 1, 17, 70, 101, 1.0f, -2.0f, 0);
	test_case(1, 1, 9, 33, 7, 2.0f, 0.0f, 0);
	test_case(0, 0, 24, 40, 1100, 1.0f, 0.5f, 0);
	test_case(0, 0, 3, 2100, 5, 1.0f, 1.0f, 0);
	test_case(0, 0, 320, 64, 64, 1.0f, 0.0f, 0);
	test_case(0, 1, 48, 96, 130, 0.75f, 0.5f, 1);
	ok(!heap_failed);
	put("the packing buffers were had: the micro-kernels ran\n");
	*out = 0;
	return failed;
}
