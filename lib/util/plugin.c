/* Shared objects of dlt's own that programs open only when a job needs
 * them (libdlt-cuda.so, libdlt-mpi.so): linking the programs with CUDA or
 * MPI instead would cost every process their start-up. */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

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

void *dlt_plugin_open(const char *soname, const char *env, const char *missing, char *why,
		      size_t n)
{
	static const char *const rel[] = { "../lib/dlt/", "../build/", "../", "" };
	const char *path_env = getenv(env);
	char dir[PATH_MAX], path[PATH_MAX + 64];
	void *h;

	if (path_env && *path_env) {
		if (!(h = dlopen(path_env, RTLD_NOW | RTLD_LOCAL)))
			snprintf(why, n, "%s: %s", env, dlerror());
		return h;
	}
	exe_dir(dir, sizeof(dir));
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		snprintf(path, sizeof(path), "%s%s%s", dir, rel[i], soname);
		if (access(path, F_OK) != 0)
			continue;
		if (!(h = dlopen(path, RTLD_NOW | RTLD_LOCAL)))
			snprintf(why, n, "%s", dlerror());
		return h;
	}
	if (missing)
		snprintf(why, n, "%s", missing);
	else
		snprintf(why, n, "%s is not beside %s (set %s)", soname, dir, env);
	return NULL;
}

void *dlt_plugin_sym(void *lib, const char *soname, const char *name, char *why, size_t n)
{
	void *f = dlsym(lib, name);
	if (!f)
		snprintf(why, n, "%s: %s", soname, dlerror());
	return f;
}
