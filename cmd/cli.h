/* What every dlt program does the same way: report a library error, parse
 * a number option, print usage.  Header-only because it is the programs'
 * edge (it prints); the library below never does. */
#ifndef DLT_CLI_H
#define DLT_CLI_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/util.h"

/* Prints "prog: message" for a library status and returns the exit status
 * (2 for bad input, 1 for a failed job). */
static inline int cli_fail(const char *prog, int rc)
{
	fprintf(stderr, "%s: %s\n", prog, dlt_errmsg());
	return dlt_exit_status(rc);
}

/* A usage error: one line, exit status 2. */
static inline int cli_usage(const char *prog, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static inline int cli_usage(const char *prog, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 2;
}

/* -h prints the usage text to stdout and exits 0; --version likewise. */
static inline int cli_help(const char *usage)
{
	fputs(usage, stdout);
	return 0;
}

static inline int cli_version(const char *prog)
{
	printf("%s %s\n", prog, DLT_VERSION);
	return 0;
}

#endif
