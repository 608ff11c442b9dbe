#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "util.h"

int dlt_mul_ok(size_t a, size_t b, size_t *out)
{
	return !__builtin_mul_overflow(a, b, out);
}

double dlt_mem_total(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
	return pages > 0 && size > 0 ? (double)pages * (double)size : 0;
}

double dlt_mem_peak(void)
{
	struct rusage u;
	return getrusage(RUSAGE_SELF, &u) == 0 ? (double)u.ru_maxrss * 1024 : 0;
}

int dlt_grow(void *array, size_t *cap, size_t n, size_t size)
{
	void *old, *q;
	size_t c = *cap ? *cap : 8, bytes;
	if (n <= *cap)
		return 0;
	while (c < n)
		c = c > SIZE_MAX / 2 ? n : c * 2;
	if (!dlt_mul_ok(c, size, &bytes))
		return dlt_error(DLT_ENOMEM, "array of %zu x %zu bytes overflows", c, size);
	/* through memcpy: array points at a T *, not a void * */
	memcpy(&old, array, sizeof(old));
	if (!(q = dlt_realloc(old, bytes)))
		return DLT_ENOMEM;
	memcpy(array, &q, sizeof(q));
	*cap = c;
	return 0;
}

void *dlt_malloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		dlt_error(DLT_ENOMEM, "out of memory (%zu bytes)", n);
	return p;
}

void *dlt_calloc(size_t n, size_t size)
{
	void *p;
	size_t total;
	if (!dlt_mul_ok(n, size, &total)) {
		dlt_error(DLT_ENOMEM, "allocation of %zu x %zu bytes overflows", n, size);
		return NULL;
	}
	p = calloc(total ? total : 1, 1);
	if (!p)
		dlt_error(DLT_ENOMEM, "out of memory (%zu bytes)", total);
	return p;
}

void *dlt_realloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q)
		dlt_error(DLT_ENOMEM, "out of memory (%zu bytes)", n);
	return q;
}

void *dlt_malloc_aligned(size_t n)
{
	void *p = NULL;
	/* 64 bytes: a cache line and an AVX-512 vector */
	if (posix_memalign(&p, 64, n ? (n + 63) / 64 * 64 : 64) != 0) {
		dlt_error(DLT_ENOMEM, "out of memory (%zu bytes)", n);
		return NULL;
	}
	return p;
}

/* calloc aligns to 16 only: the block is over-allocated and calloc's own
 * pointer kept just before ours, for free */
void *dlt_zalloc_aligned(size_t n)
{
	size_t total = n + sizeof(void *) + 64;
	uintptr_t at;
	void *p;
	if (total < n || !(p = calloc(1, total))) {
		dlt_error(DLT_ENOMEM, "out of memory (%zu bytes)", n);
		return NULL;
	}
	at = ((uintptr_t)p + sizeof(void *) + 63) & ~(uintptr_t)63;
	((void **)at)[-1] = p;
	return (void *)at;
}

void dlt_free_aligned(void *p)
{
	if (p)
		free(((void **)p)[-1]);
}

static uintptr_t page_size(void)
{
	long n = sysconf(_SC_PAGESIZE);
	return n > 0 ? (uintptr_t)n : 4096;
}

/* MADV_DONTNEED: private anonymous memory, which every heap block is,
 * reads as zero pages afterwards (the allocator assumes nothing of a
 * block's contents it has handed out) */
void dlt_mem_release(void *p, size_t n)
{
	uintptr_t ps = page_size(), a = ((uintptr_t)p + ps - 1) & ~(ps - 1);
	uintptr_t b = ((uintptr_t)p + n) & ~(ps - 1);
	if (b > a)
		madvise((void *)a, b - a, MADV_DONTNEED);
}

size_t dlt_mem_resident(const void *p, size_t n)
{
	uintptr_t ps = page_size(), a = (uintptr_t)p & ~(ps - 1), end = (uintptr_t)p + n;
	size_t bytes = 0;
	unsigned char v[4096];
	while (n && a < end) {
		size_t pages = (end - a + ps - 1) / ps;
		if (pages > sizeof(v))
			pages = sizeof(v);
		if (mincore((void *)a, pages * ps, v) == 0)
			for (size_t i = 0; i < pages; i++)
				bytes += (v[i] & 1) * ps;
		a += pages * ps;
	}
	return bytes;
}

char *dlt_strdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = dlt_malloc(n);
	if (p)
		memcpy(p, s, n);
	return p;
}

int dlt_buf_append(dlt_buf *b, const void *p, size_t n)
{
	if (n > SIZE_MAX - b->len - 1)
		return dlt_error(DLT_ENOMEM, "buffer too large");
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		char *d;
		while (cap < b->len + n + 1)
			cap = cap > SIZE_MAX / 2 ? b->len + n + 1 : cap * 2;
		if (!(d = dlt_realloc(b->data, cap)))
			return DLT_ENOMEM;
		b->data = d;
		b->cap = cap;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = 0;
	return 0;
}

int dlt_buf_printf(dlt_buf *b, const char *fmt, ...)
{
	char small[256];
	va_list ap;
	int n;
	va_start(ap, fmt);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		return dlt_error(DLT_EFAIL, "bad format");
	if ((size_t)n < sizeof(small))
		return dlt_buf_append(b, small, n);
	{
		char *big = dlt_malloc((size_t)n + 1);
		int rc;
		if (!big)
			return DLT_ENOMEM;
		va_start(ap, fmt);
		vsnprintf(big, (size_t)n + 1, fmt, ap);
		va_end(ap);
		rc = dlt_buf_append(b, big, n);
		free(big);
		return rc;
	}
}

void dlt_buf_free(dlt_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}
