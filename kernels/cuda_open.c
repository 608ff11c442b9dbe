/* dlt_backend_cuda: the CUDA backend lives in a shared object of its own,
 * libdlt-cuda.so (kernels/cuda/, linked with cuBLAS and cuDNN), opened the
 * first time a config asks for a GPU.  Linking the programs with those
 * libraries instead would map and relocate about 700 MB of them in every
 * process: 0.3 s and 200 MB of RSS before main, on machines with a GPU or
 * without. */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/kernels.h"

#define SONAME "libdlt-cuda.so"

typedef const dlt_backend *open_fn(int device, char *why, size_t n);

/* The directory of the running program, with a trailing slash, or "". */
static void exe_dir(char *dir, size_t n)
{
	ssize_t len = readlink("/proc/self/exe", dir, n - 1);
	char *slash;
	dir[len > 0 ? len : 0] = '\0';
	slash = strrchr(dir, '/');
	if (slash)
		slash[1] = '\0';
	else
		dir[0] = '\0';
}

/* DLT_CUDA_LIB, else beside the program as installed (PREFIX/bin and
 * PREFIX/lib/dlt) or as built (bin/, build/test/ and build/). */
static void *open_lib(char *why, size_t n)
{
	static const char *const rel[] = { "../lib/dlt/", "../build/", "../", "" };
	const char *env = getenv("DLT_CUDA_LIB");
	char dir[PATH_MAX], path[PATH_MAX + 32];
	void *h;

	if (env && *env) {
		if (!(h = dlopen(env, RTLD_NOW | RTLD_LOCAL)))
			snprintf(why, n, "DLT_CUDA_LIB: %s", dlerror());
		return h;
	}
	exe_dir(dir, sizeof(dir));
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		snprintf(path, sizeof(path), "%s%s" SONAME, dir, rel[i]);
		if (access(path, F_OK) != 0)
			continue;
		if (!(h = dlopen(path, RTLD_NOW | RTLD_LOCAL)))
			snprintf(why, n, "%s", dlerror());
		return h;
	}
#if DLT_CUDA
	snprintf(why, n, SONAME " is not beside %s (set DLT_CUDA_LIB)", dir);
#else
	snprintf(why, n, "dlt was built without CUDA (make CUDA=0 or no nvcc)");
#endif
	return NULL;
}

const dlt_backend *dlt_backend_cuda(int device, char *why, size_t n)
{
	static void *lib;
	static open_fn *open_backend;

	if (!lib) {
		if (!(lib = open_lib(why, n)))
			return NULL;
		if (!(open_backend = (open_fn *)dlsym(lib, "dlt_backend_cuda_open"))) {
			snprintf(why, n, SONAME ": %s", dlerror());
			dlclose(lib);
			lib = NULL;
			return NULL;
		}
	}
	return open_backend(device, why, n);
}
