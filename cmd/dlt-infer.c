/* dlt-infer: a trained model's predictions for a dataset archive read from
 * a file or a pipe, as CSV or JSON Lines: classes, float targets in their
 * own units, or sets of labels, as the model's task is; its metrics when
 * the data has targets.  A language model's continuation of a prompt,
 * token by token as it is made, or of several prompts as one batch, or
 * its loss on new text (lib/infer). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "infer/infer.h"
#include "train/train.h"

static const char prog[] = "dlt-infer";

static const char usage[] =
	"usage: dlt-infer -m CKPT [-o OUT] [--format csv|jsonl] [--probs] [--threshold T] [-b N] [--device D] [-q] DATA\n"
	"       dlt-infer -m CKPT --generate N [--samples M] [--temperature T] [--top-k K] [--seed S] [--stream I] [--json] [--device D] [-o OUT] [PROMPT|-]\n"
	"       dlt-infer -m CKPT --generate N --prompts FILE|- [--temperature T] [--top-k K] [--seed S] [--stream I] [--json] [--device D] [-o OUT]\n"
	"       dlt-infer -m CKPT --score FILE|- [--json] [-b N] [--device D] [-o OUT]\n"
	"\n"
	"  -m, --model CKPT    the model: RUNDIR/model.dlt or a checkpoint\n"
	"  -o, --output FILE   write the predictions to FILE (default: stdout)\n"
	"      --format F      csv (default) or jsonl\n"
	"      --probs         the probability of every class (or label) too\n"
	"      --threshold T   multi-label: predict the labels whose probability is\n"
	"                      above T, 0 < T < 1 (default 0.5)\n"
	"  -b, --batch N       samples per forward pass (default 256; --score: 8\n"
	"                      windows)\n"
	"      --device D      cpu, cuda or cuda:N (default: the model's GPU where it\n"
	"                      is there, else the CPU)\n"
	"  -q, --quiet         no metrics line on stderr\n"
	"  -g, --generate N    a language model: N tokens after PROMPT (text; - reads\n"
	"                      it from stdin; none: from the end-of-text token),\n"
	"                      printed as they are made\n"
	"      --samples M     --generate: M continuations of the prompt, as one\n"
	"                      batch (1 to 1024)\n"
	"      --prompts FILE  --generate: a continuation of each line of FILE (-:\n"
	"                      stdin), all as one batch\n"
	"      --temperature T sampling: 0 is greedy; default 1\n"
	"      --top-k K       sampling: among the K most likely tokens (default: all)\n"
	"      --seed S        sampling: the same seed gives the same text (default 0)\n"
	"      --stream I      sampling: the random stream of the first sequence;\n"
	"                      sequence J of a batch draws from stream I + J, as a\n"
	"                      run of it alone with --stream I + J (default 0)\n"
	"      --score FILE    a language model's loss on the text of FILE (- for\n"
	"                      stdin), in nats a token and bits per byte\n"
	"      --json          --generate: a JSON line a token, with its log-\n"
	"                      probability (and its sample in a batch); --score:\n"
	"                      the numbers as JSON\n"
	"  -h, --help          this text\n"
	"      --version       the version\n"
	"\n"
	"DATA is a dataset archive (dlt-prep), - for stdin.\n";

enum { OPT_FORMAT = 256, OPT_PROBS, OPT_THRESHOLD, OPT_VERSION, OPT_TEMPERATURE, OPT_TOP_K,
       OPT_SEED, OPT_SCORE, OPT_JSON, OPT_DEVICE, OPT_SAMPLES, OPT_PROMPTS, OPT_STREAM };

static const struct option longopts[] = {
	{ "model", required_argument, NULL, 'm' },
	{ "output", required_argument, NULL, 'o' },
	{ "format", required_argument, NULL, OPT_FORMAT },
	{ "probs", no_argument, NULL, OPT_PROBS },
	{ "threshold", required_argument, NULL, OPT_THRESHOLD },
	{ "device", required_argument, NULL, OPT_DEVICE },
	{ "batch", required_argument, NULL, 'b' },
	{ "quiet", no_argument, NULL, 'q' },
	{ "generate", required_argument, NULL, 'g' },
	{ "temperature", required_argument, NULL, OPT_TEMPERATURE },
	{ "top-k", required_argument, NULL, OPT_TOP_K },
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "stream", required_argument, NULL, OPT_STREAM },
	{ "samples", required_argument, NULL, OPT_SAMPLES },
	{ "prompts", required_argument, NULL, OPT_PROMPTS },
	{ "score", required_argument, NULL, OPT_SCORE },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, OPT_VERSION },
	{ NULL, 0, NULL, 0 },
};

/* Larger batches only cost memory: the results are the same bits
 * (every kernel computes a sample's row on its own). */
#define MAX_BATCH (1 << 16)

/* The most tokens --generate makes */
#define MAX_GENERATE (1 << 24)
/* The most sequences of a batch of --samples or --prompts */
#define MAX_SEQS 1024
/* Windows a forward pass of --score, unless -b says */
#define SCORE_BATCH 8

struct args {
	const char *model, *out, *data;
	const char *device;	/* NULL: the model's own */
	int jsonl, probs, quiet, help, version, json;
	int batch, batch_set;
	double threshold;
	const char *set_by;	/* an option of predictions, for messages */
	const char *sampling;	/* an option of --generate's, likewise */
	long long generate;	/* tokens; 0: not generating */
	const char *score;
	double temperature;
	long long top_k;
	long long seed;
	long long stream;
	long long samples;	/* 0: not given */
	const char *prompts;
};

/* The options of one mode given with another's */
static int check_modes(const struct args *a, int argc, char **argv)
{
	if (a->generate && a->score)
		return cli_usage(prog, "--generate and --score: give one");
	if ((a->generate || a->score) && a->set_by)
		return cli_usage(prog, "%s is for predictions, not %s", a->set_by,
				 a->generate ? "--generate" : "--score");
	if (!a->generate && a->sampling)
		return cli_usage(prog, "%s needs --generate", a->sampling);
	if (!a->generate && (a->samples || a->prompts))
		return cli_usage(prog, "%s needs --generate", a->samples ? "--samples" : "--prompts");
	if (a->samples && a->prompts)
		return cli_usage(prog, "--samples and --prompts: give one");
	if (a->prompts && optind < argc)
		return cli_usage(prog, "unexpected argument '%s' (--prompts reads FILE)",
				 argv[optind]);
	if (a->generate && a->batch_set)
		return cli_usage(prog, "-b is for predictions and --score, not --generate");
	if (a->score && optind < argc)
		return cli_usage(prog, "unexpected argument '%s' (--score reads FILE)",
				 argv[optind]);
	if (a->generate && argc - optind > 1)
		return cli_usage(prog, "unexpected argument '%s' (quote a prompt of several "
				 "words)", argv[optind + 1]);
	return 0;
}

static int parse_args(struct args *a, int argc, char **argv)
{
	static const char *const formats[] = { "csv", "jsonl", NULL };	/* a->jsonl */
	long long n;
	int c;

	a->batch = 256;
	a->threshold = 0.5;
	a->temperature = 1.0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":m:o:b:qg:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'm': a->model = optarg; break;
		case 'o': a->out = optarg; break;
		case OPT_FORMAT:
			if (cli_choice(prog, "--format", optarg, formats, &a->jsonl))
				return 2;
			a->set_by = "--format";
			break;
		case OPT_PROBS: a->probs = 1; a->set_by = "--probs"; break;
		case OPT_THRESHOLD:
			if (dlt_parse_f64(optarg, &a->threshold, "--threshold") < 0)
				return cli_usage(prog, "%s", dlt_errmsg());
			if (!(a->threshold > 0 && a->threshold < 1))
				return cli_usage(prog, "--threshold: %s is not between 0 and 1", optarg);
			a->set_by = "--threshold";
			break;
		case 'b':
			if (dlt_parse_i64(optarg, 1, MAX_BATCH, &n, "--batch") < 0)
				return cli_usage(prog, "%s", dlt_errmsg());
			a->batch = (int)n;
			a->batch_set = 1;
			break;
		case 'q': a->quiet = 1; break;
		case OPT_DEVICE: a->device = optarg; break;
		case 'g':
			if (dlt_parse_i64(optarg, 1, MAX_GENERATE, &a->generate, "--generate") < 0)
				return cli_usage(prog, "%s", dlt_errmsg());
			break;
		case OPT_TEMPERATURE:
			if (dlt_parse_f64(optarg, &a->temperature, "--temperature") < 0)
				return cli_usage(prog, "%s", dlt_errmsg());
			if (!(a->temperature >= 0) || !isfinite(a->temperature))
				return cli_usage(prog, "--temperature: %s is not 0 or more", optarg);
			a->sampling = "--temperature";
			break;
		case OPT_TOP_K:
			if (dlt_parse_i64(optarg, 1, INT32_MAX, &a->top_k, "--top-k") < 0)
				return cli_usage(prog, "%s", dlt_errmsg());
			a->sampling = "--top-k";
			break;
		case OPT_SEED:
			if (dlt_parse_i64(optarg, 0, INT64_MAX, &a->seed, "--seed") < 0)
				return cli_usage(prog, "%s", dlt_errmsg());
			a->sampling = "--seed";
			break;
		case OPT_STREAM:
			if (dlt_parse_i64(optarg, 0, INT64_MAX, &a->stream, "--stream") < 0)
				return cli_usage(prog, "%s", dlt_errmsg());
			a->sampling = "--stream";
			break;
		case OPT_SAMPLES:
			if (dlt_parse_i64(optarg, 1, MAX_SEQS, &a->samples, "--samples") < 0)
				return cli_usage(prog, "%s", dlt_errmsg());
			break;
		case OPT_PROMPTS: a->prompts = optarg; break;
		case OPT_SCORE: a->score = optarg; break;
		case OPT_JSON: a->json = 1; break;
		case 'h': a->help = 1; return 0;
		case OPT_VERSION: a->version = 1; return 0;
		default: return cli_bad_option(prog, c, argv, longopts);
		}
	}
	if (!a->model)
		return cli_usage(prog, "no model: give -m CKPT (see -h)");
	if ((c = check_modes(a, argc, argv)) != 0)
		return c;
	if (a->generate || a->score) {
		a->data = optind < argc ? argv[optind] : NULL;
		if (a->score && !a->batch_set)
			a->batch = SCORE_BATCH;
		return 0;
	}
	if (a->json)
		a->jsonl = 1;
	if (optind == argc)
		return cli_usage(prog, "no data: give a dataset archive, or - for stdin");
	if (argc - optind > 1)
		return cli_usage(prog, "unexpected argument '%s'", argv[optind + 1]);
	a->data = argv[optind];
	if (strcmp(a->data, "-") == 0 && isatty(0))
		return cli_usage(prog, "refusing to read an archive from a terminal");
	return 0;
}

/* "[4]" for a vector, "[1, 28, 28]" for an image. */
static void shape_text(char *s, size_t n, dlt_shape sh)
{
	if (sh.h == 1 && sh.w == 1)
		snprintf(s, n, "[%d]", sh.c);
	else
		snprintf(s, n, "[%d, %d, %d]", sh.c, sh.h, sh.w);
}

/* The data fits the model: its samples have the shape the model was
 * trained on, its labels (if any) are among the model's classes. */
static int check_data(const dlt_dataset *d, const dlt_dataset *like)
{
	char got[64], want[64];

	if (d->sample.c != like->sample.c || d->sample.h != like->sample.h ||
	    d->sample.w != like->sample.w) {
		shape_text(got, sizeof(got), d->sample);
		shape_text(want, sizeof(want), like->sample);
		return dlt_error(DLT_EINPUT, "%s: samples of shape %s (%d features), but %s "
				 "expects %s (%d)", d->path, got, d->features, like->path, want,
				 like->features);
	}
	if (dlt_dataset_has_targets(d) &&
	    (d->task != like->task || (d->task != DLT_TASK_CLASS && d->n_classes != like->n_classes)))
		return dlt_error(DLT_EINPUT, "%s: its targets are not of the kind %s predicts "
				 "(%d %s)", d->path, like->path, like->n_classes,
				 like->task == DLT_TASK_CLASS ? "classes" : like->task ==
				 DLT_TASK_REGRESS ? "float targets" : "labels");
	for (size_t i = 0; d->y && i < d->n; i++)
		if (d->y[i] >= like->n_classes)
			return dlt_error(DLT_EINPUT, "%s: label %d of sample %zu, but %s has %d "
					 "classes", d->path, d->y[i], i, like->path,
					 like->n_classes);
	return 0;
}

/* One prediction, in the output's format; probs NULL without --probs,
 * label < 0 without labels. */
static void put_row(FILE *fp, int jsonl, size_t index, int pred, const float *probs, int k,
		    int label)
{
	if (!jsonl) {
		fprintf(fp, "%zu,%d", index, pred);
		for (int j = 0; probs && j < k; j++)
			fprintf(fp, ",%.6g", probs[j]);
		if (label >= 0)
			fprintf(fp, ",%d", label);
		fputc('\n', fp);
		return;
	}
	fprintf(fp, "{\"index\":%zu,\"pred\":%d", index, pred);
	if (label >= 0)
		fprintf(fp, ",\"label\":%d", label);
	if (probs) {
		fputs(",\"probs\":[", fp);
		for (int j = 0; j < k; j++)	/* NaN logits (a diverged model) give null */
			fprintf(fp, isfinite(probs[j]) ? "%s%.6g" : "%snull", j ? "," : "",
				probs[j]);
		fputc(']', fp);
	}
	fputs("}\n", fp);
}

/* A regression's prediction (and target) in the targets' units, or a
 * multi-label one: the labels above the threshold, ';'-separated in CSV
 * (a list in JSON), their probabilities with --probs, and the true set. */
static void put_task_row(FILE *fp, int jsonl, const dlt_loss *l, size_t index, const float *y,
			 const float *t, float *probs)
{
	const int k = l->outputs;
	const char *sep = "";
	if (jsonl)
		fprintf(fp, "{\"index\":%zu,\"%s\":%s", index,
			l->task == DLT_TASK_REGRESS ? "pred" : "labels", k > 1 ||
			l->task == DLT_TASK_MULTI ? "[" : "");
	else
		fprintf(fp, "%zu,", index);
	for (int j = 0; j < k; j++) {
		if (l->task == DLT_TASK_REGRESS) {
			fprintf(fp, "%s%.9g", j ? "," : "",
				y[j] * l->t_std[j] + l->t_mean[j]);
		} else if (y[j] > l->cut) {
			fprintf(fp, "%s%d", sep, j);
			sep = jsonl ? "," : ";";
		}
	}
	if (jsonl && (k > 1 || l->task == DLT_TASK_MULTI))
		fputc(']', fp);
	if (l->task == DLT_TASK_MULTI && probs) {
		for (int j = 0; j < k; j++)
			probs[j] = 1.0f / (1.0f + expf(-y[j]));
		fputs(jsonl ? ",\"probs\":[" : "", fp);
		for (int j = 0; j < k; j++)
			fprintf(fp, jsonl ? (j ? ",%.6g" : "%.6g") : ",%.6g", probs[j]);
		fputs(jsonl ? "]" : "", fp);
	}
	if (t) {
		sep = "";
		fputs(jsonl ? (l->task == DLT_TASK_REGRESS ? ",\"target\":" : ",\"true\":[")
		      : ",", fp);
		if (jsonl && l->task == DLT_TASK_REGRESS && k > 1)
			fputc('[', fp);
		for (int j = 0; j < k; j++) {
			if (l->task == DLT_TASK_REGRESS) {
				fprintf(fp, "%s%.9g", j ? "," : "", t[j] * l->t_std[j] + l->t_mean[j]);
			} else if (t[j] > 0.5f) {
				fprintf(fp, "%s%d", sep, j);
				sep = jsonl ? "," : ";";
			}
		}
		if (jsonl && (l->task == DLT_TASK_MULTI || k > 1))
			fputc(']', fp);
	}
	fputs(jsonl ? "}\n" : "\n", fp);
}

/* CSV's header of a regression or multi-label model */
static void put_task_header(FILE *fp, const dlt_loss *l, int probs, int targets)
{
	const int k = l->outputs;
	fputs("index", fp);
	if (l->task == DLT_TASK_REGRESS) {
		for (int j = 0; j < k; j++)
			fprintf(fp, k > 1 ? ",pred%d" : ",pred", j);
		for (int j = 0; targets && j < k; j++)
			fprintf(fp, k > 1 ? ",target%d" : ",target", j);
	} else {
		fputs(",labels", fp);
		for (int j = 0; probs && j < k; j++)
			fprintf(fp, ",p%d", j);
		if (targets)
			fputs(",true", fp);
	}
	fputc('\n', fp);
}

static void put_header(FILE *fp, int k, int probs, int labels)
{
	fputs("index,pred", fp);
	for (int j = 0; probs && j < k; j++)
		fprintf(fp, ",p%d", j);
	if (labels)
		fputs(",label", fp);
	fputc('\n', fp);
}

typedef struct infer {
	dlt_infer *x;
	const dlt_dataset *like;	/* what the model expects */
	dlt_dataset data;
	dlt_model *m;
	uint32_t *order;	/* the batch's samples */
	void *labels;		/* and their targets */
	float *probs;		/* one row of softmax */
	float *xh, *logits;	/* a batch's inputs and outputs in host memory (a GPU's) */
	dlt_ofile out;
	long long correct;
	dlt_loss loss;		/* the model's task */
	double sums[DLT_TRAIN_SUMS];	/* its metrics' (other tasks than classes) */
} infer;

/* Model and data, checked against each other. */
static int setup(infer *s, const struct args *a)
{
	const dlt_backend *be;
	int threads, batch;

	if ((threads = dlt_env_threads()) < 0)
		return threads;
	DLT_TRY_RC(dlt_infer_open(&s->x, a->model));
	s->like = dlt_infer_input(s->x);
	DLT_TRY_RC(dlt_dataset_load(&s->data, a->data));
	DLT_TRY_RC(check_data(&s->data, s->like));
	DLT_TRY_RC(dlt_dataset_use_stats(&s->data, s->like));
	batch = (size_t)a->batch < s->data.n ? a->batch : (int)s->data.n;
	DLT_TRY_RC(dlt_infer_backend(s->x, a->device, &be));
	DLT_TRY_RC(dlt_infer_load(s->x, be, batch, threads));
	s->m = dlt_infer_model(s->x);
	if (!be->host &&
	    (!(s->xh = dlt_malloc((size_t)batch * s->like->features * sizeof(float))) ||
	     !(s->logits = dlt_malloc((size_t)batch * s->like->n_classes * sizeof(float)))))
		return DLT_ENOMEM;
	DLT_TRY_RC(dlt_loss_init(&s->loss, s->like->task, s->like->n_classes, 0, 0, a->model));
	s->loss.t_mean = s->like->t_mean;
	s->loss.t_std = s->like->t_std;
	s->loss.cut = (float)log(a->threshold / (1 - a->threshold));
	if (!(s->order = dlt_malloc((size_t)batch * sizeof(*s->order))) ||
	    !(s->labels = dlt_malloc((size_t)batch * dlt_loss_target_size(&s->loss))) ||
	    !(s->probs = dlt_malloc((size_t)s->like->n_classes * sizeof(*s->probs))))
		return DLT_ENOMEM;
	return 0;
}

/* The forward pass over the data, a batch at a time, as the trainer
 * evaluates: the same normalised inputs, the same argmax (the first
 * index of the largest logit), so the same accuracy. */
static int predict(infer *s, const struct args *a)
{
	const dlt_dataset *d = &s->data;
	const int k = s->like->n_classes, batch = s->m->max_batch;
	FILE *fp;

	DLT_TRY_RC(dlt_ofile_open(&s->out, a->out ? a->out : "-"));
	fp = s->out.fp;
	if (!a->jsonl && s->loss.task != DLT_TASK_CLASS)
		put_task_header(fp, &s->loss, a->probs, d->t != NULL);
	else if (!a->jsonl)
		put_header(fp, k, a->probs, d->y != NULL);
	for (size_t i0 = 0; i0 < d->n; i0 += (size_t)batch) {
		int b = d->n - i0 < (size_t)batch ? (int)(d->n - i0) : batch;
		const float *logits;

		for (int i = 0; i < b; i++)
			s->order[i] = (uint32_t)(i0 + i);
		if (s->xh) {	/* a GPU's model: through host buffers */
			dlt_dataset_gather(d, s->order, b, s->xh, s->labels);
			dlt_model_set_input(s->m, s->xh, b, 0);
			dlt_model_forward(s->m, b, 0, 0);
			dlt_model_output(s->m, s->logits, b);
			logits = s->logits;
		} else {	/* on the CPU in place, as the trainer's evaluation */
			dlt_dataset_gather(d, s->order, b, dlt_model_input(s->m), s->labels);
			logits = dlt_model_forward(s->m, b, 0, 0);
		}
		if (dlt_model_error(s->m))
			return dlt_error(DLT_EFAIL, "%s: %s", s->m->be->name, dlt_model_error(s->m));
		if (s->loss.task != DLT_TASK_CLASS && d->t)
			dlt_loss_add(&s->loss, 0, logits, s->labels, b, 0, s->sums);
		for (int i = 0; s->loss.task != DLT_TASK_CLASS && i < b; i++)
			put_task_row(fp, a->jsonl, &s->loss, i0 + i, logits + (size_t)i * k,
				     d->t ? (const float *)s->labels + (size_t)i * k : NULL,
				     a->probs ? s->probs : NULL);
		for (int i = 0; s->loss.task == DLT_TASK_CLASS && i < b; i++) {
			const int32_t *labels = s->labels;
			int pred = dlt_infer_class_row(logits + (size_t)i * k, k, s->probs);
			if (d->y && pred == labels[i])
				s->correct++;
			put_row(fp, a->jsonl, i0 + i, pred, a->probs ? s->probs : NULL, k,
				d->y ? labels[i] : -1);
		}
		if (ferror(fp))
			break;
	}
	if (fflush(fp) != 0 || ferror(fp))
		return dlt_error_errno(DLT_EIO, "%s", a->out ? a->out : "standard output");
	return dlt_ofile_commit(&s->out);
}

static void teardown(infer *s)
{
	if (s->out.fp)
		dlt_ofile_abort(&s->out);
	dlt_infer_close(s->x);
	dlt_dataset_free(&s->data);
	free(s->order);
	free(s->labels);
	free(s->probs);
	free(s->xh);
	free(s->logits);
}

/* ---- language models ---- */

/* What --generate writes to */
typedef struct gen_out {
	FILE *fp;
	int json;
	const char *name;
	int n_seq;		/* sequences of the batch */
	size_t n_new, step;	/* tokens a sequence; steps done */
	uint32_t *ids;		/* the text of a batch: n_seq x n_new ids,
				 * written at the end; NULL: as they come */
} gen_out;

/* The length of the valid UTF-8 sequence that p[0..n) starts with, 0 if
 * none */
static size_t utf8_len(const uint8_t *p, size_t n)
{
	size_t len = p[0] < 0xc2 ? 0 : p[0] < 0xe0 ? 2 : p[0] < 0xf0 ? 3 : p[0] < 0xf5 ? 4 : 0;
	if (!len || len > n)
		return 0;
	for (size_t i = 1; i < len; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] > 0x9f) ||
	    (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] > 0x8f))
		return 0;	/* overlong, a surrogate, beyond U+10FFFF */
	return len;
}

/* A token's bytes as a JSON string: UTF-8 as it is, a byte that is not
 * (a token may end inside a character) as the code point of its value */
static void put_json_text(FILE *fp, const uint8_t *p, size_t n)
{
	fputc('"', fp);
	for (size_t i = 0; i < n;) {
		size_t u = p[i] >= 0x80 ? utf8_len(p + i, n - i) : 1;
		if (p[i] == '"' || p[i] == '\\')
			fprintf(fp, "\\%c", p[i]);
		else if (p[i] == '\n')
			fputs("\\n", fp);
		else if (p[i] == '\t')
			fputs("\\t", fp);
		else if (p[i] < 0x20 || p[i] == 0x7f || !u)
			fprintf(fp, "\\u%04x", p[i]);
		else
			fwrite(p + i, 1, u, fp);
		i += u ? u : 1;
	}
	fputc('"', fp);
}

/* A token as it is made: its bytes, or its JSON line; a step's tokens
 * of a batch in one write.  The text of a batch is kept for the end. */
static int put_token(void *arg, int seq, uint32_t id, const uint8_t *bytes, size_t len,
		     double logprob)
{
	gen_out *g = arg;
	if (g->ids) {
		g->ids[(size_t)seq * g->n_new + g->step] = id;
		g->step += seq == g->n_seq - 1;
		return 0;
	}
	if (g->json) {
		if (g->n_seq > 1)
			fprintf(g->fp, "{\"sample\":%d,\"token\":%u,\"text\":", seq, id);
		else
			fprintf(g->fp, "{\"token\":%u,\"text\":", id);
		put_json_text(g->fp, bytes, len);
		fprintf(g->fp, isfinite(logprob) ? ",\"logprob\":%.9g}\n" : ",\"logprob\":null}\n",
			logprob);
	} else if (len) {
		fwrite(bytes, 1, len, g->fp);
	}
	if (seq < g->n_seq - 1)
		return 0;
	/* a pipe sees each token (each step's) at once */
	if (fflush(g->fp) != 0 || ferror(g->fp))
		return dlt_error_errno(DLT_EIO, "%s", g->name);
	return 0;
}

/* The text of a batch: each sequence after a header, its prompt then its
 * continuation, ended by a newline where its text has none */
static void put_batch_text(const gen_out *g, const dlt_tokenizer *tok, const char *const *text,
			   const size_t *tlen)
{
	for (int b = 0; b < g->n_seq; b++) {
		int end = tlen[b] ? (unsigned char)text[b][tlen[b] - 1] : -1;
		fprintf(g->fp, "--- sample %d\n", b);
		fwrite(text[b], 1, tlen[b], g->fp);
		for (size_t i = 0; i < g->n_new; i++) {
			size_t len;
			const uint8_t *bytes = dlt_tokenizer_token(tok, g->ids[(size_t)b * g->n_new + i],
								   &len);
			if (len) {
				fwrite(bytes, 1, len, g->fp);
				end = bytes[len - 1];
			}
		}
		if (end != '\n')
			fputc('\n', g->fp);
	}
}

/* A language model's file, opened (the model not yet built) */
static int open_lm(dlt_infer **x, const struct args *a, int *threads)
{
	if ((*threads = dlt_env_threads()) < 0)
		return *threads;
	DLT_TRY_RC(dlt_infer_open(x, a->model));
	return dlt_infer_need_lm(*x);
}

/* Its model, built for batch windows a pass */
static int load_lm(dlt_infer *x, const char *device, int batch, int threads)
{
	const dlt_backend *be;
	DLT_TRY_RC(dlt_infer_backend(x, device, &be));
	DLT_TRY_RC(dlt_infer_load(x, be, batch, threads));
	return dlt_infer_need_lm(x);
}

/* The ids of a prompt's text; an empty one is the end-of-text token,
 * where the tokenizer has one */
static int prompt_ids(dlt_infer *x, const char *model, const char *text, size_t len,
		      uint32_t **ids, size_t *n)
{
	const dlt_tokenizer *tok = dlt_infer_tokenizer(x);
	int64_t eot = dlt_tokenizer_eot(tok);

	DLT_TRY_RC(dlt_infer_encode(x, text, len, ids, n));
	if (*n > 0)
		return 0;
	free(*ids);
	*ids = NULL;
	if (eot < 0 || (uint64_t)eot >= dlt_infer_vocab(x))
		return dlt_error(DLT_EINPUT, "an empty prompt, and the %s tokenizer of %s has no "
				 "end-of-text token to start from", dlt_tokenizer_kind(tok), model);
	if (!(*ids = dlt_malloc(sizeof(**ids))))
		return DLT_ENOMEM;
	(*ids)[0] = (uint32_t)eot;
	*n = 1;
	return 0;
}

/* The sequences of --generate: each one's prompt, as text (for the
 * output of a batch) and as ids.  --samples repeats one prompt. */
typedef struct prompts {
	int n;
	char *buf;		/* the text read: stdin's or --prompts' */
	const char **text;
	size_t *len;
	uint32_t **ids;		/* the first `owned` their own, the rest copies */
	size_t *n_ids;
	int owned;
} prompts;

static int prompts_alloc(prompts *p, int n)
{
	p->n = n;
	if (!(p->text = dlt_calloc((size_t)n, sizeof(*p->text))) ||
	    !(p->len = dlt_calloc((size_t)n, sizeof(*p->len))) ||
	    !(p->ids = dlt_calloc((size_t)n, sizeof(*p->ids))) ||
	    !(p->n_ids = dlt_calloc((size_t)n, sizeof(*p->n_ids))))
		return DLT_ENOMEM;
	return 0;
}

static void prompts_free(prompts *p)
{
	for (int i = 0; i < p->owned; i++)
		free(p->ids[i]);
	free(p->text);
	free(p->len);
	free(p->ids);
	free(p->n_ids);
	free(p->buf);
}

/* --prompts FILE: a prompt a line (the last one's newline optional), at
 * most a batch of them, each within the model's context */
static int read_prompts(dlt_infer *x, const struct args *a, prompts *p)
{
	const char *name = a->prompts;
	size_t len, lines = 0;
	char *s, *end;
	int rc;

	DLT_TRY_RC(dlt_read_file(name, 0, &p->buf, &len));
	if (len == 0)
		return dlt_error(DLT_EINPUT, "%s: no prompts (an empty file)", name);
	for (size_t i = 0; i < len; i++)
		lines += p->buf[i] == '\n';
	lines += p->buf[len - 1] != '\n';
	if (lines > MAX_SEQS)
		return dlt_error(DLT_EINPUT, "%s: %zu prompts, more than a batch of %d", name, lines,
				 MAX_SEQS);
	DLT_TRY_RC(prompts_alloc(p, (int)lines));
	for (s = p->buf, end = p->buf + len; p->owned < p->n; s += p->len[p->owned++] + 1) {
		const int i = p->owned;
		char *nl = memchr(s, '\n', (size_t)(end - s));
		p->text[i] = s;
		p->len[i] = nl ? (size_t)(nl - s) : (size_t)(end - s);
		if ((rc = prompt_ids(x, a->model, s, p->len[i], &p->ids[i], &p->n_ids[i])) < 0)
			return dlt_error_prefix(rc, "%s:%d", name, i + 1);
		if (p->n_ids[i] > (size_t)dlt_infer_context(x)) {
			p->owned++;
			return dlt_error(DLT_EINPUT, "%s:%d: %zu tokens, longer than the context of "
					 "%s (%d)", name, i + 1, p->n_ids[i], a->model,
					 dlt_infer_context(x));
		}
	}
	return 0;
}

/* The prompt of the argument or of stdin, --samples times (once without) */
static int read_prompt(dlt_infer *x, const struct args *a, prompts *p)
{
	const char *text = a->data ? a->data : "";
	size_t len = strlen(text);

	if (a->data && strcmp(a->data, "-") == 0) {
		DLT_TRY_RC(dlt_read_file("-", 0, &p->buf, &len));
		text = p->buf;
	}
	DLT_TRY_RC(prompts_alloc(p, a->samples ? (int)a->samples : 1));
	DLT_TRY_RC(prompt_ids(x, a->model, text, len, &p->ids[0], &p->n_ids[0]));
	p->owned = 1;
	for (int i = 0; i < p->n; i++) {
		p->text[i] = text;
		p->len[i] = len;
		p->ids[i] = p->ids[0];
		p->n_ids[i] = p->n_ids[0];
	}
	return 0;
}

/* --generate: one sequence's tokens as they are made, as ever; a batch's
 * JSON lines a step at a time, its text at the end */
static int run_generate(const struct args *a)
{
	dlt_infer *x = NULL;
	prompts p = { 0 };
	dlt_ofile out = { 0 };
	dlt_sampling sm = { .temperature = a->temperature, .top_k = (int)a->top_k,
			    .seed = (uint64_t)a->seed, .stream = (uint64_t)a->stream };
	gen_out g = { .json = a->json, .name = a->out ? a->out : "standard output",
		      .n_new = (size_t)a->generate };
	int rc, threads;

	DLT_TRY(open_lm(&x, a, &threads));
	DLT_TRY(a->prompts ? read_prompts(x, a, &p) : read_prompt(x, a, &p));
	DLT_TRY(load_lm(x, a->device, p.n, threads));
	g.n_seq = p.n;
	if (p.n > 1 && !a->json && !(g.ids = dlt_malloc((size_t)p.n * g.n_new * sizeof(*g.ids)))) {
		rc = DLT_ENOMEM;
		goto fail;
	}
	DLT_TRY(dlt_ofile_open(&out, a->out ? a->out : "-"));
	g.fp = out.fp;
	DLT_TRY(dlt_infer_generate_batch(x, p.n, (const uint32_t *const *)p.ids, p.n_ids, g.n_new,
					 &sm, put_token, &g));
	if (g.ids)
		put_batch_text(&g, dlt_infer_tokenizer(x), p.text, p.len);
	else if (!a->json && isatty(fileno(out.fp)))
		fputc('\n', out.fp);	/* the shell's prompt on a line of its own */
	if (fflush(out.fp) != 0 || ferror(out.fp)) {
		rc = dlt_error_errno(DLT_EIO, "%s", g.name);
		goto fail;
	}
	DLT_TRY(dlt_ofile_commit(&out));
	out.fp = NULL;
	rc = 0;
fail:
	if (out.fp)
		dlt_ofile_abort(&out);
	free(g.ids);
	prompts_free(&p);
	dlt_infer_close(x);
	return rc < 0 ? cli_fail(prog, rc) : 0;
}

static int run_score(const struct args *a)
{
	dlt_infer *x = NULL;
	uint32_t *ids = NULL;
	char *text = NULL;
	size_t n = 0, len = 0, windows;
	dlt_ofile out = { 0 };
	dlt_score r;
	int rc, threads;

	DLT_TRY(dlt_read_file(a->score, 0, &text, &len));
	DLT_TRY(open_lm(&x, a, &threads));
	DLT_TRY(dlt_infer_encode(x, text, len, &ids, &n));
	if (n < 2) {
		rc = dlt_error(DLT_EINPUT, "%s: %zu token%s: nothing to score (each token after "
			       "the first is predicted)", a->score, n, n == 1 ? "" : "s");
		goto fail;
	}
	/* no more windows a pass than the text has */
	windows = (n - 2) / (size_t)dlt_infer_context(x) + 1;
	DLT_TRY(load_lm(x, a->device, windows < (size_t)a->batch ? (int)windows : a->batch, threads));
	DLT_TRY(dlt_infer_score(x, ids, n, len, &r));
	DLT_TRY(dlt_ofile_open(&out, a->out ? a->out : "-"));
	if (a->json)
		fprintf(out.fp, "{\"loss\":%.9g,\"bpb\":%.9g,\"nats\":%.17g,\"tokens\":%zu,"
			"\"predicted\":%llu,\"bytes\":%zu}\n", r.loss, r.bpb, r.nats, n,
			(unsigned long long)r.predicted, len);
	else
		fprintf(out.fp, "loss: %.4f nats/token, bpb: %.4f (%zu tokens, %zu bytes)\n",
			r.loss, r.bpb, n, len);
	if (fflush(out.fp) != 0 || ferror(out.fp)) {
		rc = dlt_error_errno(DLT_EIO, "%s", a->out ? a->out : "standard output");
		goto fail;
	}
	DLT_TRY(dlt_ofile_commit(&out));
	out.fp = NULL;
	rc = 0;
fail:
	if (out.fp)
		dlt_ofile_abort(&out);
	free(ids);
	free(text);
	dlt_infer_close(x);
	return rc < 0 ? cli_fail(prog, rc) : 0;
}

static int run(const struct args *a)
{
	infer s = { 0 };
	int rc = setup(&s, a);

	if (rc == 0)
		rc = predict(&s, a);
	if (rc < 0) {
		teardown(&s);
		return cli_fail(prog, rc);
	}
	if (s.data.y && !a->quiet)
		fprintf(stderr, "accuracy: %.4f (%lld/%zu)\n", (double)s.correct / s.data.n,
			s.correct, s.data.n);
	if (s.data.t && !a->quiet) {
		const char *names[DLT_MAX_METRICS];
		double v[DLT_MAX_METRICS];
		int n = dlt_loss_metric_names(&s.loss, 0, names);
		dlt_loss_metrics(&s.loss, 0, s.sums, (double)s.data.n, NAN, v);
		for (int i = 0; i < n; i++)
			fprintf(stderr, "%s%s: %.6g", i ? " " : "", names[i], v[i]);
		fputc('\n', stderr);
	}
	teardown(&s);
	return 0;
}

int main(int argc, char **argv)
{
	struct args a = { 0 };
	int status = parse_args(&a, argc, argv);

	if (status != 0)
		return status;
	if (a.help)
		return cli_help(usage);
	if (a.version)
		return cli_version(prog);
	if (a.generate)
		return run_generate(&a);
	if (a.score)
		return run_score(&a);
	return run(&a);
}
