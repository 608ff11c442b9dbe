/* What every dlt program does the same way: report a library error, parse
 * options and dispatch a subcommand, print usage, write CSV.  Header-only
 * because it is the programs' edge (it prints); the library below never
 * does. */
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

/* The next item of a list "a,b,c" (sep ",") into item, cut to size;
 * advances *list past it and its separator. */
static inline const char *cli_next_item(const char **list, const char *sep, char *item,
					size_t size)
{
	size_t n = strcspn(*list, sep);

	snprintf(item, size, "%.*s", (int)n, *list);
	*list += n + ((*list)[n] != 0);
	return item;
}

/* The NULL-terminated items as prose, "a, b or c", into buf. */
static inline const char *cli_list(char *buf, size_t size, const char *const *items)
{
	size_t len = 0;

	buf[0] = 0;
	for (int i = 0; items[i] && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, "%s%s",
					!i ? "" : items[i + 1] ? ", " : " or ", items[i]);
	return buf;
}

/* An option's value that must be one of the NULL-terminated list allowed:
 * its index in *index, or exit status 2 after "OPT: 'v' is not a, b or c". */
static inline int cli_choice(const char *prog, const char *opt, const char *value,
			     const char *const *allowed, int *index)
{
	char say[256];

	for (int i = 0; allowed[i]; i++)
		if (strcmp(value, allowed[i]) == 0) {
			*index = i;
			return 0;
		}
	return cli_usage(prog, "%s: '%s' is not %s", opt, value,
			 cli_list(say, sizeof(say), allowed));
}

/* -f, --format of a program that prints records: a table for a person,
 * CSV or JSON Lines for a program. */
enum { CLI_TABLE, CLI_CSV, CLI_JSON };

static inline int cli_format(const char *prog, const char *value, int *format)
{
	static const char *const formats[] = { "table", "csv", "json", NULL };
	return cli_choice(prog, "--format", value, formats, format);
}

/* A CSV field (RFC 4180): quoted, its quotes doubled, when it holds a
 * comma, a quote or a newline. */
static inline void cli_csv_field(FILE *fp, const char *s)
{
	if (!strpbrk(s, ",\"\n")) {
		fputs(s, fp);
		return;
	}
	putc('"', fp);
	for (; *s; s++) {
		if (*s == '"')
			putc('"', fp);
		putc(*s, fp);
	}
	putc('"', fp);
}

/* ---- subcommands ----------------------------------------------------------
 * As git.c's table of builtins: a program of subcommands declares each as
 * {name, function, options}, and cli_main parses the command line, checks
 * what the command was given against what it takes, and runs it. */

/* Each program of subcommands defines struct cli_args, the values of its
 * options, which its commands' functions take with the operands. */
struct cli_args;

typedef struct cli_command {
	const char *name;
	int (*run)(const struct cli_args *a, char **ops, int nops);	/* exit status */
	unsigned opts;		/* the options it takes: bit i, the program's options[i] */
	unsigned need;		/* of them, those it requires */
	int min, max;		/* operands; max 0: no limit */
	const char *operands;	/* for messages: "one CKPT", "two RUNs or more" */
} cli_command;

typedef struct cli_option {
	int c;			/* getopt_long's value: 'o', or OPT_JSON */
	const char *name;	/* for messages: "-o", "--json" */
	const char *needs;	/* what a command that requires it says: "-o OUT" */
} cli_option;

typedef struct cli_program {
	const char *name;		/* "dlt-ckpt" */
	const char *usage;		/* what -h prints */
	const cli_command *commands;	/* ending in a NULL name */
	const char *optstring;		/* getopt_long's, beginning with ':' */
	const struct option *longopts;	/* with "help" ('h') and "version" */
	const cli_option *options;	/* ending in c 0 */
	/* Takes the value of option c (optarg) into a: 0, or exit status 2
	 * after a message. */
	int (*option)(struct cli_args *a, int c);
	int say_operands;		/* "got 1 operand", not "got 1" */
} cli_program;

/* The command argv[1] names, with *argc and *argv moved past it; NULL when
 * argv[1] is an option or absent (for -h and --version; the missing
 * command is reported after the options).  0, or exit status 2 after the
 * message for a name that is no command. */
static inline int cli_command_find(const cli_program *p, const cli_command **cmd, int *argc,
				   char ***argv)
{
	const cli_command *c = p->commands;

	*cmd = NULL;
	if (*argc < 2 || (*argv)[1][0] == '-')
		return 0;
	while (c->name && strcmp(c->name, (*argv)[1]))
		c++;
	if (!c->name)
		return cli_usage(p->name, "unknown command '%s'", (*argv)[1]);
	*cmd = c;
	(*argc)--;
	(*argv)++;
	return 0;
}

/* The first usage error of command c (NULL: none named) given the options
 * given (bits) and nops operands: a command missing, an option it does not
 * take or one it needs, too few or too many operands.  0, or exit status 2
 * after the message. */
static inline int cli_command_check(const cli_program *p, const cli_command *c, unsigned given,
				    int nops)
{
	if (!c) {
		const char *names[32];
		char say[512];
		int n = 0;

		for (; p->commands[n].name && n < 31; n++)
			names[n] = p->commands[n].name;
		names[n] = NULL;
		return cli_usage(p->name, "missing command: %s (see %s -h)",
				 cli_list(say, sizeof(say), names), p->name);
	}
	for (int i = 0; p->options[i].c; i++) {
		unsigned o = 1u << i;
		if ((given & o) && !(c->opts & o))
			return cli_usage(p->name, "%s takes no %s", c->name, p->options[i].name);
		if ((c->need & o) && !(given & o))
			return cli_usage(p->name, "%s needs %s", c->name, p->options[i].needs);
	}
	if (nops < c->min || (c->max && nops > c->max)) {
		if (!p->say_operands)
			return cli_usage(p->name, "%s takes %s, got %d", c->name, c->operands,
					 nops);
		return cli_usage(p->name, "%s takes %s, got %d operand%s", c->name, c->operands,
				 nops, nops == 1 ? "" : "s");
	}
	return 0;
}

/* A program of subcommands: "PROG COMMAND [OPTION]... [OPERAND]...", or
 * -h or --version in place of the command.  Returns the exit status: the
 * command's, or 0 after -h or --version, or 2 after a usage error. */
static inline int cli_main(const cli_program *p, struct cli_args *a, int argc, char **argv)
{
	const cli_command *cmd;
	unsigned given = 0;
	int c, rc, version = 0;

	for (const struct option *o = p->longopts; o->name; o++)
		if (strcmp(o->name, "version") == 0)
			version = o->val;
	if ((rc = cli_command_find(p, &cmd, &argc, &argv)))
		return rc;
	opterr = 0;
	while ((c = getopt_long(argc, argv, p->optstring, p->longopts, NULL)) != -1) {
		int i = 0;

		if (c == 'h')
			return cli_help(p->usage);
		if (c == version)
			return cli_version(p->name);
		if (c == '?' || c == ':')
			return cli_bad_option(p->name, c, argv, p->longopts);
		while (p->options[i].c && p->options[i].c != c)
			i++;
		given |= p->options[i].c ? 1u << i : 0;
		if ((rc = p->option(a, c)))
			return rc;
	}
	if ((rc = cli_command_check(p, cmd, given, argc - optind)))
		return rc;
	return cmd->run(a, argv + optind, argc - optind);
}

#endif
