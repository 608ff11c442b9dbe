/* Host memory, the memory of the cpu and ref backends: 64-byte aligned
 * for the vector loads, zeroed as the table's alloc promises.
 *
 * Zeroed by calloc, not by a memset: a large block comes from mmap as
 * zero pages, which take no memory until they are written.  So the parts
 * of a model's buffers that its ops never write (a conv's output that the
 * fused max pool never stores, the workspace a smaller conv leaves
 * unused) stay out of the resident set.  calloc aligns to 16 only: the
 * block is over-allocated and calloc's own pointer kept just before
 * ours, for free. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/layers.h"

#define ALIGN 64

void *dlt_host_alloc(size_t bytes)
{
	size_t n = bytes + sizeof(void *) + ALIGN;
	uintptr_t at;
	void *p;
	if (n < bytes || !(p = calloc(1, n)))
		return NULL;
	at = ((uintptr_t)p + sizeof(void *) + ALIGN - 1) & ~(uintptr_t)(ALIGN - 1);
	((void **)at)[-1] = p;
	return (void *)at;
}

void dlt_host_free(void *p)
{
	if (p)
		free(((void **)p)[-1]);
}

/* upload, download and copy alike: the bytes are already in reach */
void dlt_host_copy(void *dst, const void *src, size_t bytes)
{
	if (dst != src)
		memmove(dst, src, bytes);
}

void dlt_host_zero(void *p, size_t bytes)
{
	memset(p, 0, bytes);
}
