/* A sysconf that says the machine has DLT_FAKE_PHYS_PAGES pages of
 * memory, preloaded (LD_PRELOAD) by test/t9100-resources.sh to reach the
 * limits that dlt sets from the memory (dlt_mem_total) without filling a
 * real machine's.  Every other question goes to the C library's. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

long sysconf(int name)
{
	static long (*real)(int);
	const char *pages = getenv("DLT_FAKE_PHYS_PAGES");

	if (name == _SC_PHYS_PAGES && pages)
		return atol(pages);
	if (!real)
		real = (long (*)(int))dlsym(RTLD_NEXT, "sysconf");
	return real(name);
}
