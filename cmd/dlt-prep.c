/* dlt-prep: raw data (IDX, CSV) into .dlt dataset archives, and what an
 * archive holds. */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "prep/prep.h"

static const char prog[] = "dlt-prep";

static const char usage[] =
	"usage: dlt-prep idx [-q] [--shuffle] [--seed N] [--split F] [--codec C] -o OUT [-o OUT2] IMAGES LABELS\n"
	"       dlt-prep csv [-q] [--shuffle] [--seed N] [--split F] [--codec C] [--header | --no-header] "
	"-l COL -o OUT [-o OUT2] FILE\n"
	"       dlt-prep info [--json] FILE\n"
	"\n"
	"  -o, --output FILE   write the dataset to FILE (- for stdout); with --split, a\n"
	"                      second -o takes the rest\n"
	"  -l, --label COL     csv: the label column, by header name or 0-based index;\n"
	"                      none: no labels, every column a feature\n"
	"      --header        csv: the first row is a header\n"
	"      --no-header     csv: the first row is data (default: a header if any cell\n"
	"                      outside the label column is not a number)\n"
	"      --shuffle       shuffle the samples (before splitting)\n"
	"      --seed N        the shuffle's seed (default 0)\n"
	"      --split F       the first round(N*F) samples to the first -o, 0 < F < 1\n"
	"      --codec C       raw (default: loads fastest), zstd or shuffle-zstd\n"
	"  -q, --quiet         no summary on stderr\n"
	"      --json          info: one JSON object\n"
	"  -h, --help          this text\n"
	"      --version       the version\n";

enum { OPT_SHUFFLE = 256, OPT_SEED, OPT_SPLIT, OPT_CODEC, OPT_HEADER, OPT_NO_HEADER, OPT_JSON,
       OPT_VERSION };

static const struct option longopts[] = {
	{ "output", required_argument, NULL, 'o' },
	{ "label", required_argument, NULL, 'l' },
	{ "header", no_argument, NULL, OPT_HEADER },
	{ "no-header", no_argument, NULL, OPT_NO_HEADER },
	{ "shuffle", no_argument, NULL, OPT_SHUFFLE },
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "split", required_argument, NULL, OPT_SPLIT },
	{ "codec", required_argument, NULL, OPT_CODEC },
	{ "quiet", no_argument, NULL, 'q' },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, OPT_VERSION },
	{ NULL, 0, NULL, 0 },
};

struct args {
	const char *cmd;
	const char *out[2];
	int nout;
	const char *label;
	int header;		/* DLT_CSV_* */
	int quiet, json;
	int help, version;	/* print that and stop */
	int shuffle, seed_given;
	long long seed;
	double split;
	int codec, codec_given;
	char **files;
	int nfiles;
};

static int parse_opt(struct args *a, int c, char **argv)
{
	double f;
	int rc;

	switch (c) {
	case 'o':
		if (a->nout == 2)
			return cli_usage(prog, "at most two -o: the first part and the rest");
		a->out[a->nout++] = optarg;
		return 0;
	case 'l':
		a->label = optarg;
		return 0;
	case OPT_HEADER:
	case OPT_NO_HEADER:
		a->header = c == OPT_HEADER ? DLT_CSV_HEADER : DLT_CSV_NO_HEADER;
		return 0;
	case OPT_SHUFFLE:
		a->shuffle = 1;
		return 0;
	case OPT_SEED:
		a->seed_given = 1;
		if ((rc = dlt_parse_i64(optarg, 0, LLONG_MAX, &a->seed, "--seed")) < 0)
			return cli_fail(prog, rc);
		return 0;
	case OPT_SPLIT:
		if ((rc = dlt_parse_f64(optarg, &f, "--split")) < 0)
			return cli_fail(prog, rc);
		if (!(f > 0 && f < 1))
			return cli_usage(prog, "--split: %s is not between 0 and 1", optarg);
		a->split = f;
		return 0;
	case OPT_CODEC:
		for (a->codec = DLT_RAW; dlt_codec_name(a->codec); a->codec++)
			if (!strcmp(optarg, dlt_codec_name(a->codec)))
				break;
		if (!dlt_codec_name(a->codec))
			return cli_usage(prog, "--codec: unknown codec '%s' (raw, zstd, shuffle-zstd)",
					 optarg);
		a->codec_given = 1;
		return 0;
	case 'q':
		a->quiet = 1;
		return 0;
	case OPT_JSON:
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

/* Options that make sense only for some commands are errors elsewhere, so
 * a mistyped command line is not half obeyed. */
static int check_args(const struct args *a)
{
	int data = strcmp(a->cmd, "info") != 0;
	int want = strcmp(a->cmd, "idx") == 0 ? 2 : 1;

	if (!data && (a->nout || a->label || a->header != DLT_CSV_HEADER_AUTO || a->shuffle ||
		      a->seed_given || a->split > 0 || a->quiet || a->codec_given))
		return cli_usage(prog, "info takes only --json and FILE");
	if (data && a->json)
		return cli_usage(prog, "--json applies to info only");
	if (strcmp(a->cmd, "idx") == 0 && (a->label || a->header != DLT_CSV_HEADER_AUTO))
		return cli_usage(prog, "--label, --header and --no-header apply to csv only");
	if (a->nfiles != want)
		return cli_usage(prog, "%s takes %s, got %d operand%s", a->cmd,
				 want == 2 ? "IMAGES and LABELS" : "one FILE", a->nfiles,
				 a->nfiles == 1 ? "" : "s");
	if (!data)
		return 0;
	if (strcmp(a->cmd, "csv") == 0 && !a->label)
		return cli_usage(prog, "csv needs --label COL");
	if (a->seed_given && !a->shuffle)
		return cli_usage(prog, "--seed needs --shuffle");
	if (a->nout == 0)
		return cli_usage(prog, "missing -o OUT");
	if (a->split > 0 && a->nout != 2)
		return cli_usage(prog, "--split needs a second -o for the rest");
	if (a->split == 0 && a->nout == 2)
		return cli_usage(prog, "a second -o needs --split");
	for (int i = 0; i < a->nout; i++)
		if (strcmp(a->out[i], "-") == 0 && isatty(1))
			return cli_usage(prog, "refusing to write an archive to a terminal");
	return 0;
}

static int parse_args(struct args *a, int argc, char **argv)
{
	int c, rc;

	a->header = DLT_CSV_HEADER_AUTO;
	/* getopt then sees the command as its argv[0], so options follow it */
	if (argc > 1 && argv[1][0] != '-') {
		a->cmd = argv[1];
		if (strcmp(a->cmd, "idx") && strcmp(a->cmd, "csv") && strcmp(a->cmd, "info"))
			return cli_usage(prog, "unknown command '%s'", a->cmd);
		argc--;
		argv++;
	}
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":o:l:qh", longopts, NULL)) != -1) {
		if ((rc = parse_opt(a, c, argv)) != 0)
			return rc;
		if (a->help || a->version)
			return 0;
	}
	if (!a->cmd)
		return cli_usage(prog, "missing command: idx, csv or info (see dlt-prep -h)");
	a->files = argv + optind;
	a->nfiles = argc - optind;
	return check_args(a);
}

static void summary(const struct args *a, const dlt_prep_data *d)
{
	size_t n1 = dlt_prep_split_count(d->n, a->split);

	if (a->quiet || !isatty(2))
		return;
	for (int i = 0; i < a->nout; i++) {
		fprintf(stderr, "%s: %s: %zu samples of [", prog,
			strcmp(a->out[i], "-") ? a->out[i] : "standard output", i ? d->n - n1 : n1);
		for (int k = 0; k < d->ndim; k++)
			fprintf(stderr, k ? ", %llu" : "%llu", (unsigned long long)d->dims[k]);
		if (d->y)
			fprintf(stderr, "] %s, %d classes\n", dlt_dtype_name(d->dtype),
				d->num_classes);
		else
			fprintf(stderr, "] %s, no labels\n", dlt_dtype_name(d->dtype));
	}
}

static int prep(const struct args *a)
{
	dlt_prep_opts o = {
		.out = a->out[0], .out2 = a->out[1], .split = a->split,
		.shuffle = a->shuffle, .seed = (uint64_t)a->seed, .codec = a->codec,
	};
	dlt_prep_data d;
	int rc;

	if (strcmp(a->cmd, "idx") == 0)
		rc = dlt_prep_read_idx(&d, a->files[0], a->files[1]);
	else
		rc = dlt_prep_read_csv(&d, a->files[0],
				       strcmp(a->label, "none") ? a->label : NULL, a->header);
	if (rc < 0)
		return cli_fail(prog, rc);
	if ((rc = dlt_prep_write(&d, &o)) == 0)
		summary(a, &d);
	dlt_prep_data_free(&d);
	return rc < 0 ? cli_fail(prog, rc) : 0;
}

static int info(const struct args *a)
{
	dlt_buf out = { 0 };
	int rc = dlt_prep_info(a->files[0], a->json, &out);

	if (rc < 0) {
		dlt_buf_free(&out);
		return cli_fail(prog, rc);
	}
	fwrite(out.data, 1, out.len, stdout);
	dlt_buf_free(&out);
	if (fflush(stdout) != 0 || ferror(stdout))
		return cli_fail(prog, dlt_error_errno(DLT_EIO, "standard output"));
	return 0;
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
	return strcmp(a.cmd, "info") == 0 ? info(&a) : prep(&a);
}
