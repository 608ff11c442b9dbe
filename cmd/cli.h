/* What every dlt program does the same way: report a library error, parse
 * a number option, print usage.  Header-only because it is the programs'
 * edge (it prints); the library below never does. */
#ifndef DLT_CLI_H
#define DLT_CLI_H

#include <getopt.h>
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

/* The option getopt stopped at, for messages: "--name" without any
 * "=value", or the one letter out of a bundle like -qx. */
static inline const char *cli_option_name(char **argv)
{
	static char s[64];
	const char *arg = argv[optind - 1];

	if (strncmp(arg, "--", 2) == 0)
		snprintf(s, sizeof(s), "%.*s", (int)strcspn(arg, "="), arg);
	else
		snprintf(s, sizeof(s), "-%c", optopt);
	return s;
}

/* Whether a long option, perhaps abbreviated, is one without a value:
 * getopt reports --json=1 as it reports an unknown option. */
static inline int cli_is_flag(const struct option *longopts, const char *name)
{
	const struct option *hit = NULL;
	size_t n = strlen(name);

	for (const struct option *o = longopts; o->name; o++) {
		if (strcmp(o->name, name) == 0)
			return o->has_arg == no_argument;
		if (strncmp(o->name, name, n) == 0) {
			if (hit)
				return 0;	/* ambiguous */
			hit = o;
		}
	}
	return hit && hit->has_arg == no_argument;
}

/* getopt_long's complaint in our one-line form; the program sets
 * opterr = 0 and starts its optstring with ':' so getopt stays quiet and
 * returns ':' for a missing value. */
static inline int cli_bad_option(const char *prog, int c, char **argv,
				 const struct option *longopts)
{
	const char *name = cli_option_name(argv);
	if (c == ':')
		return cli_usage(prog, "option '%s' needs a value", name);
	if (strchr(argv[optind - 1], '=') && name[1] == '-' && cli_is_flag(longopts, name + 2))
		return cli_usage(prog, "option '%s' takes no value", name);
	return cli_usage(prog, "unknown option '%s' (see -h)", name);
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
