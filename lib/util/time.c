#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
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
int dlt_env_threads_shared(int local_ranks)
{
	const char *names[] = { "DLT_THREADS", "OMP_NUM_THREADS" };
	cpu_set_t set;
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	int mine;
	for (int i = 0; i < 2; i++) {
		const char *s = getenv(names[i]);
		long long v;
		if (!s || !*s)
			continue;
		if (dlt_parse_i64(s, 1, 4096, &v, names[i]) < 0)
			return DLT_EINPUT;
		return (int)v;
	}
	mine = sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0
	       ? CPU_COUNT(&set) : (int)online;
	/* ranks that the launcher bound to cores of their own keep them;
	 * ranks that may all run anywhere share the cores */
	if (local_ranks > 1 && (long)mine * local_ranks > online)
		mine = mine / local_ranks > 0 ? mine / local_ranks : 1;
	return mine;
}

int dlt_env_threads(void)
{
	return dlt_env_threads_shared(1);
}

/* DLT_TEST_STEP_DELAY: seconds the training loop sleeps after each step,
 * so that tests can signal or kill a run at a chosen point of a small,
 * fast one.  0 when unset. */
double dlt_env_test_step_delay(void)
{
	const char *s = getenv("DLT_TEST_STEP_DELAY");
	double v;
	if (!s || !*s || dlt_parse_f64(s, &v, "DLT_TEST_STEP_DELAY") < 0 || !(v > 0 && v < 10))
		return 0;
	return v;
}

int dlt_env_test_ckpt_on_resume(void)
{
	const char *s = getenv("DLT_TEST_CKPT_ON_RESUME");
	return s && !strcmp(s, "1");
}

int dlt_env_test_fault(int *rank, long long *step)
{
	const char *s = getenv("DLT_TEST_FAULT");
	char kind[8];
	if (!s || sscanf(s, "%7[a-z]:%d:%lld", kind, rank, step) != 3)
		return 0;
	return !strcmp(kind, "nan") ? DLT_FAULT_NAN : !strcmp(kind, "extra") ? DLT_FAULT_EXTRA : 0;
}

int dlt_env_test_ckpt_fault(int *rank, long long *step)
{
	const char *s = getenv("DLT_TEST_CKPT_FAULT");
	char kind[8];
	if (!s || sscanf(s, "%7[a-z]:%d:%lld", kind, rank, step) != 3)
		return 0;
	return !strcmp(kind, "open") ? DLT_CKPT_FAULT_OPEN
	     : !strcmp(kind, "write") ? DLT_CKPT_FAULT_WRITE : 0;
}

void dlt_sleep(double seconds)
{
	struct timespec t = { (time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9) };
	while (nanosleep(&t, &t) != 0 && errno == EINTR)
		;
}
