/* dlt_backend_cuda of a build without CUDA (make CUDA=0). */
#include <stdio.h>

#include "kernels/kernels.h"

const dlt_backend *dlt_backend_cuda(int device, char *why, size_t n)
{
	snprintf(why, n, "dlt was built without CUDA (make CUDA=0)");
	return NULL;
}
