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

struct cli_args {
	const char *out, *config;
	int format;		/* DLT_EXPORT_* */
	int json, weights_only;
};

static int parse_opt(struct cli_args *a, int c)
{
	static const char *const formats[] = { "safetensors", "npy", NULL };
	int i = 0;

	switch (c) {
	case 'o':
		if (a->out)
			return cli_usage(prog, "more than one -o");
		a->out = optarg;
		return 0;
	case 'f':
		if (cli_choice(prog, "--format", optarg, formats, &i))
			return 2;
		a->format = i ? DLT_EXPORT_NPY : DLT_EXPORT_SAFETENSORS;
		return 0;
	case OPT_WEIGHTS_ONLY: a->weights_only = 1; return 0;
	case 'c': a->config = optarg; return 0;
	case OPT_JSON: a->json = 1; return 0;
	}
	return 0;
}

static int print(const dlt_buf *out)
{
	fwrite(out->data, 1, out->len, stdout);
	if (fflush(stdout) != 0 || ferror(stdout))
		return cli_fail(prog, dlt_error_errno(DLT_EIO, "standard output"));
	return 0;
}

static int info(const struct cli_args *a, char **files, int nfiles)
{
	dlt_buf out = { 0 };
	int rc = dlt_ckpt_info(files[0], a->json, &out);

	rc = rc < 0 ? cli_fail(prog, rc) : print(&out);
	dlt_buf_free(&out);
	return rc;
}

/* Like cmp: 1 when a file is damaged, 2 when one cannot be read at all. */
static int verify(const struct cli_args *a, char **files, int nfiles)
{
	int status = 0;

	for (int i = 0; i < nfiles; i++) {
		const char *path = files[i];
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

static int diff(const struct cli_args *a, char **files, int nfiles)
{
	dlt_buf out = { 0 };
	size_t differ = 0;
	int rc = dlt_ckpt_diff(files[0], files[1], a->json, &out, &differ);

	rc = rc < 0 ? cli_fail(prog, rc) : print(&out);
	dlt_buf_free(&out);
	return rc ? rc : differ ? 1 : 0;
}

/* The commands that write a file: the library's status, mapped.  A
 * binary file goes to standard output only when it is no terminal. */
static int done(int rc)
{
	return rc < 0 ? cli_fail(prog, rc) : 0;
}

static int bad_output(const struct cli_args *a)
{
	if (strcmp(a->out, "-"))
		return 0;
	if (a->format == DLT_EXPORT_NPY)
		return cli_usage(prog, "npy needs a directory, not -o -");
	if (isatty(1))
		return cli_usage(prog, "refusing to write a binary file to a terminal");
	return 0;
}

static int export(const struct cli_args *a, char **files, int nfiles)
{
	return bad_output(a) ? 2 :
	       done(dlt_ckpt_export(files[0], a->format, a->out, a->weights_only));
}

static int import(const struct cli_args *a, char **files, int nfiles)
{
	return bad_output(a) ? 2 : done(dlt_ckpt_import(files[0], a->out, a->config));
}

static int average(const struct cli_args *a, char **files, int nfiles)
{
	return bad_output(a) ? 2 :
	       done(dlt_ckpt_average((const char *const *)files, nfiles, a->out));
}

static int strip(const struct cli_args *a, char **files, int nfiles)
{
	return bad_output(a) ? 2 : done(dlt_ckpt_strip(files[0], a->out));
}

/* Which options each command takes, and how many operands. */
enum { O_OUT = 1, O_FORMAT = 2, O_WEIGHTS = 4, O_CONFIG = 8, O_JSON = 16 };
static const cli_command commands[] = {
	{ "info", info, O_JSON, 0, 1, 1, "one CKPT" },
	{ "verify", verify, 0, 0, 1, 0, "one CKPT or more" },
	{ "diff", diff, O_JSON, 0, 2, 2, "A and B" },
	{ "export", export, O_OUT | O_FORMAT | O_WEIGHTS, O_OUT | O_FORMAT, 1, 1, "one CKPT" },
	{ "import", import, O_OUT | O_CONFIG, O_OUT, 1, 1, "one SAFETENSORS" },
	{ "average", average, O_OUT, O_OUT, 2, 0, "two CKPTs or more" },
	{ "strip", strip, O_OUT, O_OUT, 1, 1, "one CKPT" },
	{ NULL, NULL, 0, 0, 0, 0, NULL },
};
static const cli_option options[] = {
	{ 'o', "-o", "-o OUT" },
	{ 'f', "-f", "-f safetensors|npy" },
	{ OPT_WEIGHTS_ONLY, "--weights-only", NULL },
	{ 'c', "-c", NULL },
	{ OPT_JSON, "--json", NULL },
	{ 0, NULL, NULL },
};
static const cli_program program = {
	prog, usage, commands, ":o:f:c:h", longopts, options, parse_opt, 1,
};

int main(int argc, char **argv)
{
	struct cli_args a = { 0 };
	return cli_main(&program, &a, argc, argv);
}
