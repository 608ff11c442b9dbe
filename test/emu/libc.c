/* What kernels/cpu/gemm.c and gemm_bf16.c call of libc, OpenMP and
 * OpenBLAS, for a program with no OS that runs on one thread (emu.h), and
 * the TAP that such a program writes. */
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "test/emu/emu.h"

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

void *memmove(void *d, const void *s, size_t n)
{
	unsigned char *p = d;
	const unsigned char *q = s;
	if (p < q)
		return memcpy(d, s, n);
	while (n--)
		p[n] = q[n];
	return d;
}

int memcmp(const void *a, const void *b, size_t n)
{
	const unsigned char *p = a, *q = b;
	for (size_t i = 0; i < n; i++)
		if (p[i] != q[i])
			return p[i] - q[i];
	return 0;
}

int strcmp(const char *a, const char *b)
{
	while (*a && *a == *b)
		a++, b++;
	return (unsigned char)*a - (unsigned char)*b;
}

char *getenv(const char *name)
{
	return NULL;
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

/* The packing buffers, never freed: they only grow.  A failure would send
 * a GEMM down a path past its micro-kernels, so the tests check that
 * none failed (emu_alloc_failed). */
static unsigned char heap[4 << 20] __attribute__((aligned(64)));
static size_t heap_used;
int emu_alloc_failed;

void *aligned_alloc(size_t align, size_t n)
{
	size_t at = (heap_used + align - 1) & ~(align - 1);
	if (at + n > sizeof(heap)) {
		emu_alloc_failed++;
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

int omp_get_num_threads(void)
{
	return 1;
}

int omp_get_thread_num(void)
{
	return 0;
}

/* gemm.c's f32 GEMM by OpenBLAS, which the tests never ask for: a call
 * stops the program with an exception that x86-run.py reports. */
void cblas_sgemm(void)
{
	__builtin_trap();
}

/* ---- TAP ---- */

static char *out, *out_end;
static int tests, failed;

void emu_tap_start(char *buf, size_t cap, int plan)
{
	out = buf;
	out_end = buf + cap - 1;
	put("1..");
	put_int(plan);
	put("\n");
}

void put(const char *s)
{
	while (*s && out < out_end)
		*out++ = *s++;
}

void put_int(long v)
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

void put_hex(uint32_t v)
{
	char c[11] = "0x";
	for (int i = 0; i < 8; i++)
		c[2 + i] = "0123456789abcdef"[v >> (28 - 4 * i) & 15];
	c[10] = 0;
	put(c);
}

int ok(int cond)
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

int emu_tap_end(void)
{
	*out = 0;
	return failed;
}
