/* Host memory, the memory of the cpu and ref backends: 64-byte aligned
 * for the vector loads, zeroed as the table's alloc promises. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/layers.h"

void *dlt_host_alloc(size_t bytes)
{
	size_t n = (bytes + 63) / 64 * 64;
	void *p;
	if (n < bytes)
		return NULL;
	p = aligned_alloc(64, n ? n : 64);
	if (p)
		memset(p, 0, n);
	return p;
}

void dlt_host_free(void *p)
{
	free(p);
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
