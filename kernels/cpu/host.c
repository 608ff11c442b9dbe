/* Host memory, the memory of the cpu and ref backends: 64-byte aligned
 * for the vector loads, zeroed as the table's alloc promises.
 *
 * Zeroed by calloc, not by a memset: a large block comes from mmap as
 * zero pages, which take no memory until they are written.  So the parts
 * of a model's buffers that its ops never write (a conv's output that the
 * fused max pool never stores, the workspace a smaller conv leaves
 * unused) stay out of the resident set: dlt_zalloc_aligned's blocks. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/layers.h"
#include "util/util.h"

void *dlt_host_alloc(size_t bytes)
{
	return dlt_zalloc_aligned(bytes);
}

void dlt_host_free(void *p)
{
	dlt_free_aligned(p);
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
