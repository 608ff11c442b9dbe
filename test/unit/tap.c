#include "tap.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

static int n_run, n_failed;
static char tmpdir[256];

static int report(int cond, const char *fmt, va_list ap)
{
	n_run++;
	if (!cond)
		n_failed++;
	printf("%sok %d - ", cond ? "" : "not ", n_run);
	vprintf(fmt, ap);
	putchar('\n');
	fflush(stdout);
	return cond;
}

int ok(int cond, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	report(cond, fmt, ap);
	va_end(ap);
	return cond;
}

void skip(const char *fmt, ...)
{
	va_list ap;
	n_run++;
	printf("ok %d # skip ", n_run);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

int ok_near(double got, double want, double tol, const char *fmt, ...)
{
	double err = fabs(got - want);
	int cond = err <= tol || err <= tol * fabs(want);
	va_list ap;
	va_start(ap, fmt);
	report(cond, fmt, ap);
	va_end(ap);
	if (!cond)
		diag("got %.9g, want %.9g (tolerance %g)", got, want, tol);
	return cond;
}

int ok_rc(int rc, int want, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	report(rc == want, fmt, ap);
	va_end(ap);
	if (rc != want)
		diag("status %d, want %d: %s", rc, want, rc ? dlt_errmsg() : "");
	return rc == want;
}

int ok_msg(const char *needle, const char *fmt, ...)
{
	const char *msg = dlt_errmsg();
	int cond = strstr(msg, needle) != NULL;
	va_list ap;
	va_start(ap, fmt);
	report(cond, fmt, ap);
	va_end(ap);
	if (!cond)
		diag("message '%s' lacks '%s'", msg, needle);
	return cond;
}

void diag(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("# ");
	vprintf(fmt, ap);
	putchar('\n');
	va_end(ap);
}

static void remove_tmpdir(void)
{
	char cmd[300];
	if (tmpdir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		if (system(cmd) != 0)
			fprintf(stderr, "tap: could not remove %s\n", tmpdir);
	}
}

const char *tap_tmpdir(void)
{
	if (!tmpdir[0]) {
		const char *base = getenv("TMPDIR");
		snprintf(tmpdir, sizeof(tmpdir), "%s/dlt-unit-XXXXXX", base ? base : "/tmp");
		if (!mkdtemp(tmpdir)) {
			perror("mkdtemp");
			exit(1);
		}
		atexit(remove_tmpdir);
	}
	return tmpdir;
}

int done_testing(void)
{
	printf("1..%d\n", n_run);
	return n_failed != 0;
}
