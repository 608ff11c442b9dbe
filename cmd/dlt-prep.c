/* dlt-prep: raw data (IDX, CSV, NumPy arrays, image folders) into .dlt dataset archives,
 * text into token archives, and what an archive holds. */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "prep/prep.h"
#include "prep/tokens.h"

static const char prog[] = "dlt-prep";

static const char usage[] =
	"usage: dlt-prep idx [-q] [--shuffle] [--seed N] [--split F] [--codec C] -o OUT [-o OUT2] IMAGES LABELS\n"
	"       dlt-prep csv [-q] [--shuffle] [--seed N] [--split F] [--codec C] [--header | --no-header] "
	"(-l COL [--classes] | --target COLS | --labels COLS) -o OUT [-o OUT2] FILE\n"
	"       dlt-prep npy [-q] [--shuffle] [--seed N] [--split F] [--codec C] [--x NAME] [--y NAME] "
	"-o OUT [-o OUT2] X [Y]\n"
	"       dlt-prep images [-q] [--shuffle] [--seed N] [--split F] [--codec C] [--size HxW] "
	"[--channels 1|3] -o OUT [-o OUT2] DIR\n"
	"       dlt-prep text [-q] [--split F] [--codec C] [--tokenizer bytes | --tokenizer bpe "
	"--vocab N | --tokenizer-from TOKENS] [--eot] -o OUT [-o OUT2] FILE...\n"
	"       dlt-prep info [--json] FILE\n"
	"\n"
	"  -o, --output FILE   write the dataset to FILE (- for stdout); with --split, a\n"
	"                      second -o takes the rest\n"
	"  -l, --label COL     csv: the label column, by header name or 0-based index;\n"
	"                      none: no labels, every column a feature\n"
	"      --classes       csv: classes even when the labels look continuous\n"
	"      --target COLS   csv: float targets (regression), one or more columns\n"
	"                      (a,b,...), by header name or 0-based index\n"
	"      --labels COLS   csv: multi-label targets, columns of 0 or 1\n"
	"      --x NAME        npy: the array of samples in an .npz (default x)\n"
	"      --y NAME        npy: the array of targets in an .npz (default y)\n"
	"      --size HxW      images: resize each to cover HxW (antialiased bilinear),\n"
	"                      then crop its centre; default: the first image's size\n"
	"      --channels C    images: 1 (grey) or 3 (RGB); default: 1 if the first\n"
	"                      image is grey, else 3\n"
	"      --tokenizer T   text: bytes (default: 256 ids, one a byte) or bpe\n"
	"                      (byte-level BPE learned from the text)\n"
	"      --vocab N       text: the ids bpe learns, 257 to 65536\n"
	"      --tokenizer-from TOKENS\n"
	"                      text: the tokenizer of token archive TOKENS\n"
	"      --eot           text: an end-of-text token between files\n"
	"      --header        csv: the first row is a header\n"
	"      --no-header     csv: the first row is data (default: a header if any cell\n"
	"                      outside the label column is not a number)\n"
	"      --shuffle       shuffle the samples (before splitting)\n"
	"      --seed N        the shuffle's seed (default 0)\n"
	"      --split F       the first round(N*F) samples (text: tokens) to the first\n"
	"                      -o, the rest to the second, 0 < F < 1\n"
	"      --codec C       raw (default: loads fastest), zstd or shuffle-zstd\n"
	"  -q, --quiet         no summary on stderr\n"
	"      --json          info: one JSON object\n"
	"  -h, --help          this text\n"
	"      --version       the version\n";

enum { OPT_SHUFFLE = 256, OPT_SEED, OPT_SPLIT, OPT_CODEC, OPT_HEADER, OPT_NO_HEADER, OPT_JSON,
       OPT_VERSION, OPT_CLASSES, OPT_TARGET, OPT_LABELS, OPT_X, OPT_Y,
       OPT_SIZE, OPT_CHANNELS, OPT_TOKENIZER, OPT_VOCAB, OPT_TOKENIZER_FROM, OPT_EOT,
       OPT_DECODE };

static const struct option longopts[] = {
	{ "output", required_argument, NULL, 'o' },
	{ "label", required_argument, NULL, 'l' },
	{ "classes", no_argument, NULL, OPT_CLASSES },
	{ "target", required_argument, NULL, OPT_TARGET },
	{ "labels", required_argument, NULL, OPT_LABELS },
	{ "x", required_argument, NULL, OPT_X },
	{ "y", required_argument, NULL, OPT_Y },
	{ "size", required_argument, NULL, OPT_SIZE },
	{ "channels", required_argument, NULL, OPT_CHANNELS },
	{ "tokenizer", required_argument, NULL, OPT_TOKENIZER },
	{ "vocab", required_argument, NULL, OPT_VOCAB },
	{ "tokenizer-from", required_argument, NULL, OPT_TOKENIZER_FROM },
	{ "eot", no_argument, NULL, OPT_EOT },
	/* not in the usage: a token archive's bytes to stdout, for the tests */
	{ "decode", no_argument, NULL, OPT_DECODE },
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

struct cli_args {
	const char *out[2];
	int nout;
	const char *label;
	const char *targets, *labels;	/* csv --target, --labels */
	int classes;			/* csv --classes */
	const char *xname, *yname;	/* npy --x, --y */
	uint32_t size_h, size_w;	/* images --size; 0: none */
	int channels;			/* images --channels; 0: none */
	const char *tokenizer;		/* text --tokenizer */
	long long vocab;		/* text --vocab; 0: none */
	const char *from;		/* text --tokenizer-from */
	int eot, decode;		/* text --eot, --decode */
	int header;		/* DLT_CSV_* */
	int quiet, json;
	int shuffle, seed_given;
	long long seed;
	double split;
	int codec, codec_given;
};

/* --size HxW: each side 1 or more, the two at most DLT_PREP_MAX_PIXELS */
static int parse_size(struct cli_args *a, const char *s)
{
	const char *x = strchr(s, 'x');
	long long h, w;
	char hs[32];

	if (!x || (size_t)(x - s) >= sizeof(hs))
		return cli_usage(prog, "--size: expected HxW, got '%s'", s);
	memcpy(hs, s, (size_t)(x - s));
	hs[x - s] = 0;
	if (dlt_parse_i64(hs, 1, DLT_PREP_MAX_PIXELS, &h, "--size") < 0 ||
	    dlt_parse_i64(x + 1, 1, DLT_PREP_MAX_PIXELS, &w, "--size") < 0)
		return cli_usage(prog, "--size: expected HxW, each from 1 to %u, got '%s'",
				 DLT_PREP_MAX_PIXELS, s);
	if (h * w > DLT_PREP_MAX_PIXELS)
		return cli_usage(prog, "--size: %s is more than %u pixels", s, DLT_PREP_MAX_PIXELS);
	a->size_h = (uint32_t)h;
	a->size_w = (uint32_t)w;
	return 0;
}

static int parse_opt(struct cli_args *a, int c)
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
	case OPT_CLASSES:
		a->classes = 1;
		return 0;
	case OPT_TARGET:
		a->targets = optarg;
		return 0;
	case OPT_LABELS:
		a->labels = optarg;
		return 0;
	case OPT_X:
		a->xname = optarg;
		return 0;
	case OPT_Y:
		a->yname = optarg;
		return 0;
	case OPT_SIZE:
		return parse_size(a, optarg);
	case OPT_CHANNELS:
		if (strcmp(optarg, "1") && strcmp(optarg, "3"))
			return cli_usage(prog, "--channels: expected 1 or 3, got '%s'", optarg);
		a->channels = optarg[0] - '0';
		return 0;
	case OPT_TOKENIZER:
		if (strcmp(optarg, "bytes") && strcmp(optarg, "bpe"))
			return cli_usage(prog, "--tokenizer: unknown tokenizer '%s' (bytes, bpe)",
					 optarg);
		a->tokenizer = optarg;
		return 0;
	case OPT_VOCAB:
		if (dlt_parse_i64(optarg, 257, DLT_BPE_MAX_VOCAB, &a->vocab, "--vocab") < 0)
			return cli_usage(prog, "--vocab: expected 257 to %d, got '%s'",
					 DLT_BPE_MAX_VOCAB, optarg);
		return 0;
	case OPT_TOKENIZER_FROM:
		a->from = optarg;
		return 0;
	case OPT_EOT:
		a->eot = 1;
		return 0;
	case OPT_DECODE:
		a->decode = 1;
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
	}
	return 0;
}

enum { IDX, CSV, NPY, IMAGES, TEXT, INFO };

/* Options that make sense only for some commands are errors elsewhere, so
 * a mistyped command line is not half obeyed.  cmd is IDX to INFO. */
static int check_args(const struct cli_args *a, int cmd, int nfiles)
{
	static const char *const name[] = { "idx", "csv", "npy", "images", "text", "info" };
	int data = cmd != INFO, want = cmd == IDX ? 2 : 1;
	int csv = cmd == CSV, npy = cmd == NPY, images = cmd == IMAGES, text = cmd == TEXT;
	int textopt = a->tokenizer || a->vocab || a->from || a->eot || a->decode;

	if (!data && (a->nout || a->label || a->header != DLT_CSV_HEADER_AUTO || a->shuffle ||
		      a->seed_given || a->split > 0 || a->quiet || a->codec_given || a->targets ||
		      a->labels || a->classes || a->xname || a->yname || a->size_h || a->channels ||
		      textopt))
		return cli_usage(prog, "info takes only --json and FILE");
	if (data && !text && textopt)
		return cli_usage(prog, "--tokenizer, --vocab, --tokenizer-from and --eot apply to "
				 "text only");
	if (text && (a->label || a->header != DLT_CSV_HEADER_AUTO))
		return cli_usage(prog, "--label, --header and --no-header apply to csv only");
	if (text && (a->shuffle || a->seed_given))
		return cli_usage(prog, "--shuffle and --seed do not apply to text: a token stream "
				 "keeps its order");
	if (data && a->json)
		return cli_usage(prog, "--json applies to info only");
	if (cmd == IDX && (a->label || a->header != DLT_CSV_HEADER_AUTO))
		return cli_usage(prog, "--label, --header and --no-header apply to csv only");
	if (data && !csv && (a->targets || a->labels || a->classes))
		return cli_usage(prog, "--target, --labels and --classes apply to csv only");
	if (data && !npy && (a->xname || a->yname))
		return cli_usage(prog, "--x and --y apply to npy only");
	if (npy && (a->label || a->header != DLT_CSV_HEADER_AUTO))
		return cli_usage(prog, "--label, --header and --no-header apply to csv only");
	if (images && (a->label || a->header != DLT_CSV_HEADER_AUTO))
		return cli_usage(prog, "--label, --header and --no-header apply to csv only");
	if (data && !images && (a->size_h || a->channels))
		return cli_usage(prog, "--size and --channels apply to images only");
	if (npy && (nfiles < 1 || nfiles > 2))
		return cli_usage(prog, "npy takes X and perhaps Y, got %d operands", nfiles);
	if (text && a->decode) {
		if (nfiles != 1 || a->nout || a->tokenizer || a->vocab || a->from || a->eot ||
		    a->split > 0 || a->codec_given)
			return cli_usage(prog, "--decode takes one token archive and nothing else");
		return 0;
	}
	if (text && nfiles < 1)
		return cli_usage(prog, "text takes FILE... (- for standard input), got no operands");
	if (text && a->from && (a->tokenizer || a->vocab))
		return cli_usage(prog, "--tokenizer-from excludes --tokenizer and --vocab");
	if (text && a->vocab && !(a->tokenizer && strcmp(a->tokenizer, "bpe") == 0))
		return cli_usage(prog, "--vocab needs --tokenizer bpe");
	if (text && a->tokenizer && strcmp(a->tokenizer, "bpe") == 0 && !a->vocab)
		return cli_usage(prog, "--tokenizer bpe needs --vocab N");
	if (!npy && !text && nfiles != want)
		return cli_usage(prog, "%s takes %s, got %d operand%s", name[cmd],
				 want == 2 ? "IMAGES and LABELS" : images ? "one DIR" : "one FILE",
				 nfiles, nfiles == 1 ? "" : "s");
	if (!data)
		return 0;
	if (csv && !a->label && !a->targets && !a->labels)
		return cli_usage(prog, "csv needs --label COL, --target COLS or --labels COLS");
	if (csv && !!a->label + !!a->targets + !!a->labels > 1)
		return cli_usage(prog, "--label, --target and --labels exclude each other");
	if (a->classes && (!a->label || strcmp(a->label, "none") == 0))
		return cli_usage(prog, "--classes needs --label COL");
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

static void summary(const struct cli_args *a, const dlt_prep_data *d)
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
		else if (d->t)
			fprintf(stderr, "] %s, %d %s\n", dlt_dtype_name(d->dtype), d->t_width,
				d->t_dtype == DLT_F32 ? "float targets" : "0/1 labels");
		else
			fprintf(stderr, "] %s, no labels\n", dlt_dtype_name(d->dtype));
	}
}

/* The samples a reader gave (rc its status) into the archives of -o */
static int write_data(const struct cli_args *a, dlt_prep_data *d, int rc)
{
	dlt_prep_opts o = {
		.out = a->out[0], .out2 = a->out[1], .split = a->split,
		.shuffle = a->shuffle, .seed = (uint64_t)a->seed, .codec = a->codec,
	};

	if (rc < 0)
		return cli_fail(prog, rc);
	if ((rc = dlt_prep_write(d, &o)) == 0)
		summary(a, d);
	dlt_prep_data_free(d);
	return rc < 0 ? cli_fail(prog, rc) : 0;
}

/* The data commands: each checks its options, then reads its operands */
static int idx(const struct cli_args *a, char **files, int nfiles)
{
	dlt_prep_data d;
	int rc = check_args(a, IDX, nfiles);

	return rc ? rc : write_data(a, &d, dlt_prep_read_idx(&d, files[0], files[1]));
}

static int csv(const struct cli_args *a, char **files, int nfiles)
{
	dlt_csv_opts co = {
		.header = a->header, .classes = a->classes,
		.kind = a->targets ? DLT_CSV_TARGETS : a->labels ? DLT_CSV_LABELS : DLT_CSV_CLASSES,
		.cols = a->targets ? a->targets : a->labels ? a->labels :
			a->label && strcmp(a->label, "none") ? a->label : NULL,
	};
	dlt_prep_data d;
	int rc = check_args(a, CSV, nfiles);

	return rc ? rc : write_data(a, &d, dlt_prep_read_csv(&d, files[0], &co));
}

static int npy(const struct cli_args *a, char **files, int nfiles)
{
	dlt_prep_data d;
	int rc = check_args(a, NPY, nfiles);

	return rc ? rc : write_data(a, &d, dlt_prep_read_npy(&d, files[0],
							      nfiles > 1 ? files[1] : NULL,
							      a->xname, a->yname));
}

static int images(const struct cli_args *a, char **files, int nfiles)
{
	dlt_prep_image_opts io = { .h = a->size_h, .w = a->size_w, .channels = a->channels };
	dlt_prep_data d;
	int rc = check_args(a, IMAGES, nfiles);

	return rc ? rc : write_data(a, &d, dlt_prep_read_images(&d, files[0], &io));
}

static void text_summary(const struct cli_args *a, const dlt_text_result *r)
{
	if (a->quiet || !isatty(2))
		return;
	if (r->learn_s > 0)
		fprintf(stderr, "%s: bpe learned in %.2f s\n", prog, r->learn_s);
	for (int i = 0; i < a->nout; i++)
		fprintf(stderr, "%s: %s: %llu tokens of %llu bytes (%.3g bytes a token), %s, "
			"vocabulary %u\n", prog, strcmp(a->out[i], "-") ? a->out[i] :
			"standard output", (unsigned long long)r->n[i],
			(unsigned long long)r->bytes[i],
			r->n[i] ? (double)r->bytes[i] / (double)r->n[i] : 0.0, r->kind, r->vocab);
}

/* Writes what the library made to stdout */
static int put(dlt_buf *out, int rc)
{
	if (rc < 0) {
		dlt_buf_free(out);
		return cli_fail(prog, rc);
	}
	fwrite(out->data, 1, out->len, stdout);
	dlt_buf_free(out);
	if (fflush(stdout) != 0 || ferror(stdout))
		return cli_fail(prog, dlt_error_errno(DLT_EIO, "standard output"));
	return 0;
}

static int text(const struct cli_args *a, char **files, int nfiles)
{
	dlt_text_opts o = {
		.tokenizer = a->tokenizer, .vocab = (uint32_t)a->vocab, .from = a->from,
		.eot = a->eot, .out = a->out[0], .out2 = a->out[1], .split = a->split,
		.codec = a->codec,
	};
	dlt_text_result r;
	dlt_buf out = { 0 };
	int rc = check_args(a, TEXT, nfiles);

	if (rc)
		return rc;
	if (a->decode)
		return put(&out, dlt_prep_text_decode(files[0], &out));
	if ((rc = dlt_prep_text(files, nfiles, &o, &r)) < 0)
		return cli_fail(prog, rc);
	text_summary(a, &r);
	return 0;
}

static int info(const struct cli_args *a, char **files, int nfiles)
{
	dlt_buf out = { 0 };
	int rc = check_args(a, INFO, nfiles);

	return rc ? rc : put(&out, dlt_prep_info(files[0], a->json, &out));
}

/* The commands take every option and any operands here: check_args says
 * which, in the order of its messages. */
static const cli_command commands[] = {
	{ "idx", idx, 0, 0, 0, 0, NULL },
	{ "csv", csv, 0, 0, 0, 0, NULL },
	{ "npy", npy, 0, 0, 0, 0, NULL },
	{ "images", images, 0, 0, 0, 0, NULL },
	{ "text", text, 0, 0, 0, 0, NULL },
	{ "info", info, 0, 0, 0, 0, NULL },
	{ NULL, NULL, 0, 0, 0, 0, NULL },
};
static const cli_option options[] = { { 0, NULL, NULL } };
static const cli_program program = {
	prog, usage, commands, ":o:l:qh", longopts, options, parse_opt, 1,
};

int main(int argc, char **argv)
{
	struct cli_args a = { .header = DLT_CSV_HEADER_AUTO };
	return cli_main(&program, &a, argc, argv);
}
