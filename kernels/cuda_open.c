/* dlt_backend_cuda: the CUDA backend lives in a shared object of its own,
 * libdlt-cuda.so (kernels/cuda/, linked with cuBLAS, cuDNN and NCCL),
 * opened the first time a config asks for a GPU.  Linking the programs
 * with those libraries instead would map and relocate about 700 MB of them
 * in every process: 0.3 s and 200 MB of RSS before main, on machines with
 * a GPU or without. */
#include <stddef.h>

#include "kernels/kernels.h"
#include "util/util.h"

#define SONAME "libdlt-cuda.so"

typedef const dlt_backend *open_fn(int abi, int device, char *why, size_t n);

void *dlt_cuda_lib(char *why, size_t n)
{
	static void *lib;
	if (!lib)
		lib = dlt_plugin_open(SONAME, "DLT_CUDA_LIB",
				      DLT_CUDA ? NULL : "dlt was built without CUDA (make CUDA=0 "
				      "or no nvcc)", why, n);
	return lib;
}

const dlt_backend *dlt_backend_cuda(int device, char *why, size_t n)
{
	void *lib = dlt_cuda_lib(why, n);
	open_fn *open_backend;
	if (!lib || !(open_backend = (open_fn *)dlt_plugin_sym(lib, SONAME,
							       "dlt_backend_cuda_abi_open", why, n)))
		return NULL;
	return open_backend(DLT_BACKEND_ABI, device, why, n);
}
