#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

double dlt_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

double dlt_wall(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

/* The one place the library reads DLT_THREADS and OMP_NUM_THREADS. */
int dlt_env_threads(void)
{
	const char *names[] = { "DLT_THREADS", "OMP_NUM_THREADS" };
	cpu_set_t set;
	for (int i = 0; i < 2; i++) {
		const char *s = getenv(names[i]);
		long long v;
		if (!s || !*s)
			continue;
		if (dlt_parse_i64(s, 1, 4096, &v, names[i]) < 0)
			return DLT_EINPUT;
		return (int)v;
	}
	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return CPU_COUNT(&set);
	return (int)sysconf(_SC_NPROCESSORS_ONLN);
}
