/* dlt-ckpt: inspect and convert checkpoints: info, verify, diff, export
 * (safetensors, npy), import, average, strip. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive/archive.h"
#include "cli.h"
#include "ckpt/ckpt.h"

static const char prog[] = "dlt-ckpt";

static const char usage[] =
	"usage: dlt-ckpt info [--json] CKPT\n"
	"       dlt-ckpt verify CKPT...\n"
	"       dlt-ckpt diff [--json] A B\n"
	"       dlt-ckpt export [--weights-only] -f safetensors|npy -o OUT CKPT\n"
	"       dlt-ckpt import [-c CONFIG] -o CKPT SAFETENSORS\n"
	"       dlt-ckpt average -o OUT CKPT CKPT...\n"
	"       dlt-ckpt strip -o OUT CKPT\n"
	"\n"
	"  -o, --output PATH   write PATH: a file (- for stdout, not a terminal), or\n"
	"                      for npy a directory of NAME.npy files\n"
	"  -f, --format F      export: safetensors or npy\n"
	"      --weights-only  export: leave the optimiser state (optim.*) out\n"
	"  -c, --config FILE   import: a config to check and store with the weights\n"
	"      --json          info, diff: one JSON object\n"
	"  -h, --help          this text\n"
	"      --version       the version\n";

enum { OPT_JSON = 256, OPT_WEIGHTS_ONLY, OPT_VERSION };

static const struct option longopts[] = {
	{ "output", required_argument, NULL, 'o' },
	{ "format", required_argument, NULL, 'f' },
	{ "weights-only", no_argument, NULL, OPT_WEIGHTS_ONLY },
	{ "config", required_argument, NULL, 'c' },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, OPT_VERSION },
	{ NULL, 0, NULL, 0 },
};

/* Which options each command takes, and how many operands. */
enum { O_OUT = 1, O_FORMAT = 2, O_WEIGHTS = 4, O_CONFIG = 8, O_JSON = 16 };
static const struct command {
	const char *name;
	int opts;		/* O_* it accepts */
	int need;		/* of them, those it requires */
	int min, max;		/* operands; max 0: no limit */
	const char *operands;	/* for messages */
} commands[] = {
	{ "info", O_JSON, 0, 1, 1, "one CKPT" },
	{ "verify", 0, 0, 1, 0, "one CKPT or more" },
	{ "diff", O_JSON, 0, 2, 2, "A and B" },
	{ "export", O_OUT | O_FORMAT | O_WEIGHTS, O_OUT | O_FORMAT, 1, 1, "one CKPT" },
	{ "import", O_OUT | O_CONFIG, O_OUT, 1, 1, "one SAFETENSORS" },
	{ "average", O_OUT, O_OUT, 2, 0, "two CKPTs or more" },
	{ "strip", O_OUT, O_OUT, 1, 1, "one CKPT" },
	{ NULL, 0, 0, 0, 0, NULL },
};

struct args {
	const struct command *cmd;
	const char *out, *config;
	int format;		/* DLT_EXPORT_* */
	int given;		/* O_* seen */
	int json, weights_only;
	int help, version;
	char **files;
	int nfiles;
};

static const char *opt_name(int o)
{
	switch (o) {
	case O_OUT: return "-o";
	case O_FORMAT: return "-f";
	case O_WEIGHTS: return "--weights-only";
	case O_CONFIG: return "-c";
	default: return "--json";
	}
}

static int parse_opt(struct args *a, int c, char **argv)
{
	switch (c) {
	case 'o':
		if (a->given & O_OUT)
			return cli_usage(prog, "more than one -o");
		a->given |= O_OUT;
		a->out = optarg;
		return 0;
	case 'f':
		a->given |= O_FORMAT;
		if (strcmp(optarg, "safetensors") == 0)
			a->format = DLT_EXPORT_SAFETENSORS;
		else if (strcmp(optarg, "npy") == 0)
			a->format = DLT_EXPORT_NPY;
		else
			return cli_usage(prog, "--format: '%s' is not safetensors or npy", optarg);
		return 0;
	case OPT_WEIGHTS_ONLY:
		a->given |= O_WEIGHTS;
		a->weights_only = 1;
		return 0;
	case 'c':
		a->given |= O_CONFIG;
		a->config = optarg;
		return 0;
	case OPT_JSON:
		a->given |= O_JSON;
		a->json = 1;
		return 0;
	case 'h':
		a->help = 1;
		return 0;
	case OPT_VERSION:
		a->version = 1;
		return 0;
	default:
		return cli_bad_option(prog, c, argv, longopts);
	}
}

static int check_args(const struct args *a)
{
	const struct command *c = a->cmd;

	for (int o = 1; o <= O_JSON; o <<= 1) {
		if ((a->given & o) && !(c->opts & o))
			return cli_usage(prog, "%s takes no %s", c->name, opt_name(o));
		if ((c->need & o) && !(a->given & o))
			return cli_usage(prog, "%s needs %s", c->name,
					 o == O_OUT ? "-o OUT" : "-f safetensors|npy");
	}
	if (a->nfiles < c->min || (c->max && a->nfiles > c->max))
		return cli_usage(prog, "%s takes %s, got %d operand%s", c->name, c->operands,
				 a->nfiles, a->nfiles == 1 ? "" : "s");
	if (a->out && strcmp(a->out, "-") == 0) {
		if (a->format == DLT_EXPORT_NPY)
			return cli_usage(prog, "npy needs a directory, not -o -");
		if (isatty(1))
			return cli_usage(prog, "refusing to write a binary file to a terminal");
	}
	return 0;
}

static int parse_args(struct args *a, int argc, char **argv)
{
	int c, rc;

	if (argc > 1 && argv[1][0] != '-') {
		for (a->cmd = commands; a->cmd->name && strcmp(a->cmd->name, argv[1]); a->cmd++)
			;
		if (!a->cmd->name)
			return cli_usage(prog, "unknown command '%s'", argv[1]);
		argc--;
		argv++;
	}
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":o:f:c:h", longopts, NULL)) != -1) {
		if ((rc = parse_opt(a, c, argv)) != 0)
			return rc;
		if (a->help || a->version)
			return 0;
	}
	if (!a->cmd)
		return cli_usage(prog, "missing command: info, verify, diff, export, import, "
				 "average or strip (see dlt-ckpt -h)");
	a->files = argv + optind;
	a->nfiles = argc - optind;
	return check_args(a);
}

static int print(const dlt_buf *out)
{
	fwrite(out->data, 1, out->len, stdout);
	if (fflush(stdout) != 0 || ferror(stdout))
		return cli_fail(prog, dlt_error_errno(DLT_EIO, "standard output"));
	return 0;
}

static int info(const struct args *a)
{
	dlt_buf out = { 0 };
	int rc = dlt_ckpt_info(a->files[0], a->json, &out);

	rc = rc < 0 ? cli_fail(prog, rc) : print(&out);
	dlt_buf_free(&out);
	return rc;
}

/* Like cmp: 1 when a file is damaged, 2 when one cannot be read at all. */
static int verify(const struct args *a)
{
	int status = 0;

	for (int i = 0; i < a->nfiles; i++) {
		const char *path = a->files[i];
		dlt_archive *ar = NULL;
		struct stat st;
		int rc;

		if (strcmp(path, "-") && stat(path, &st) != 0) {
			fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
			status = 2;
			continue;
		}
		rc = dlt_archive_open(&ar, path);
		if (rc == 0)
			rc = dlt_archive_verify(ar);
		dlt_archive_close(ar);
		if (rc < 0) {
			cli_fail(prog, rc);
			status = status ? status : 1;
			continue;
		}
		printf("%s: ok\n", strcmp(path, "-") ? path : "standard input");
	}
	if (fflush(stdout) != 0 || ferror(stdout))
		return cli_fail(prog, dlt_error_errno(DLT_EIO, "standard output"));
	return status;
}

static int diff(const struct args *a)
{
	dlt_buf out = { 0 };
	size_t differ = 0;
	int rc = dlt_ckpt_diff(a->files[0], a->files[1], a->json, &out, &differ);

	rc = rc < 0 ? cli_fail(prog, rc) : print(&out);
	dlt_buf_free(&out);
	return rc ? rc : differ ? 1 : 0;
}

static int run(const struct args *a)
{
	const char *cmd = a->cmd->name;
	int rc;

	if (strcmp(cmd, "export") == 0)
		rc = dlt_ckpt_export(a->files[0], a->format, a->out, a->weights_only);
	else if (strcmp(cmd, "import") == 0)
		rc = dlt_ckpt_import(a->files[0], a->out, a->config);
	else if (strcmp(cmd, "average") == 0)
		rc = dlt_ckpt_average((const char *const *)a->files, a->nfiles, a->out);
	else
		rc = dlt_ckpt_strip(a->files[0], a->out);
	return rc < 0 ? cli_fail(prog, rc) : 0;
}

int main(int argc, char **argv)
{
	struct args a = { 0 };
	int rc = parse_args(&a, argc, argv);

	if (rc != 0)
		return rc;
	if (a.help)
		return cli_help(usage);
	if (a.version)
		return cli_version(prog);
	if (strcmp(a.cmd->name, "info") == 0)
		return info(&a);
	if (strcmp(a.cmd->name, "verify") == 0)
		return verify(&a);
	if (strcmp(a.cmd->name, "diff") == 0)
		return diff(&a);
	return run(&a);
}
