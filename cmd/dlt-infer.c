/* dlt-infer: a trained model's predictions for a dataset archive read from
 * a file or a pipe, as CSV or JSON Lines: classes, float targets in their
 * own units, or sets of labels, as the model's task is; its metrics when
 * the data has targets. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "kernels/common/math.h"
#include "kernels/cpu/threads.h"
#include "train/ckpt.h"
#include "train/train.h"

static const char prog[] = "dlt-infer";

static const char usage[] =
	"usage: dlt-infer -m CKPT [-o OUT] [--format csv|jsonl] [--probs] [--threshold T] [-b N] [-q] DATA\n"
	"\n"
	"  -m, --model CKPT    the model: RUNDIR/model.dlt or a checkpoint\n"
	"  -o, --output FILE   write the predictions to FILE (default: stdout)\n"
	"      --format F      csv (default) or jsonl\n"
	"      --probs         the probability of every class (or label) too\n"
	"      --threshold T   multi-label: predict the labels whose probability is\n"
	"                      above T, 0 < T < 1 (default 0.5)\n"
	"  -b, --batch N       samples per forward pass (default 256)\n"
	"  -q, --quiet         no metrics line on stderr\n"
	"  -h, --help          this text\n"
	"      --version       the version\n"
	"\n"
	"DATA is a dataset archive (dlt-prep), - for stdin.\n";

enum { OPT_FORMAT = 256, OPT_PROBS, OPT_THRESHOLD, OPT_VERSION };

static const struct option longopts[] = {
	{ "model", required_argument, NULL, 'm' },
	{ "output", required_argument, NULL, 'o' },
	{ "format", required_argument, NULL, OPT_FORMAT },
	{ "probs", no_argument, NULL, OPT_PROBS },
	{ "threshold", required_argument, NULL, OPT_THRESHOLD },
	{ "batch", required_argument, NULL, 'b' },
	{ "quiet", no_argument, NULL, 'q' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, OPT_VERSION },
	{ NULL, 0, NULL, 0 },
};

/* Larger batches only cost memory: the results are the same bits
 * (every kernel computes a sample's row on its own). */
#define MAX_BATCH (1 << 16)

struct args {
	const char *model, *out, *data;
	int jsonl, probs, quiet, help, version;
	int batch;
	double threshold;
};

static int parse_args(struct args *a, int argc, char **argv)
{
	long long n;
	int c;

	a->batch = 256;
	a->threshold = 0.5;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":m:o:b:qh", longopts, NULL)) != -1) {
		switch (c) {
		case 'm': a->model = optarg; break;
		case 'o': a->out = optarg; break;
		case OPT_FORMAT:
			if (strcmp(optarg, "csv") && strcmp(optarg, "jsonl"))
				return cli_usage(prog, "--format: '%s' is not csv or jsonl", optarg);
			a->jsonl = strcmp(optarg, "jsonl") == 0;
			break;
		case OPT_PROBS: a->probs = 1; break;
		case OPT_THRESHOLD:
			if (dlt_parse_f64(optarg, &a->threshold, "--threshold") < 0)
				return cli_usage(prog, "%s", dlt_errmsg());
			if (!(a->threshold > 0 && a->threshold < 1))
				return cli_usage(prog, "--threshold: %s is not between 0 and 1", optarg);
			break;
		case 'b':
			if (dlt_parse_i64(optarg, 1, MAX_BATCH, &n, "--batch") < 0)
				return cli_usage(prog, "%s", dlt_errmsg());
			a->batch = (int)n;
			break;
		case 'q': a->quiet = 1; break;
		case 'h': a->help = 1; return 0;
		case OPT_VERSION: a->version = 1; return 0;
		default: return cli_bad_option(prog, c, argv, longopts);
		}
	}
	if (!a->model)
		return cli_usage(prog, "no model: give -m CKPT (see -h)");
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
	dlt_ckpt k;
	dlt_config c;
	int have_c;
	dlt_dataset like, data;
	dlt_model m;
	int have_m;
	uint32_t *order;	/* the batch's samples */
	void *labels;		/* and their targets */
	float *probs;		/* one row of softmax */
	dlt_ofile out;
	long long correct;
	dlt_loss loss;		/* the model's task */
	double sums[DLT_TRAIN_SUMS];	/* its metrics' (other tasks than classes) */
} infer;

/* Model and data, checked against each other. */
static int setup(infer *s, const struct args *a)
{
	int threads, batch, rc;

	if ((threads = dlt_env_threads()) < 0)
		return threads;
	dlt_cpu_set_threads(threads);
	DLT_TRY_RC(dlt_ckpt_open(&s->k, a->model, &s->c));
	s->have_c = 1;
	DLT_TRY_RC(dlt_ckpt_input(&s->k, &s->like));
	DLT_TRY_RC(dlt_dataset_load(&s->data, a->data));
	DLT_TRY_RC(check_data(&s->data, &s->like));
	DLT_TRY_RC(dlt_dataset_use_stats(&s->data, &s->like));
	batch = (size_t)a->batch < s->data.n ? a->batch : (int)s->data.n;
	rc = dlt_model_init(&s->m, &s->c, dlt_backend_cpu(), s->like.sample,
			    s->like.n_classes, batch);
	if (rc < 0)
		return rc;
	s->have_m = 1;
	DLT_TRY_RC(dlt_model_read(&s->m, s->k.a));
	dlt_ckpt_close(&s->k);	/* all read: the weights are in the model */
	DLT_TRY_RC(dlt_loss_init(&s->loss, s->like.task, s->like.n_classes, 0, 0, a->model));
	s->loss.t_mean = s->like.t_mean;
	s->loss.t_std = s->like.t_std;
	s->loss.cut = (float)log(a->threshold / (1 - a->threshold));
	if (!(s->order = dlt_malloc((size_t)batch * sizeof(*s->order))) ||
	    !(s->labels = dlt_malloc((size_t)batch * dlt_loss_target_size(&s->loss))) ||
	    !(s->probs = dlt_malloc((size_t)s->like.n_classes * sizeof(*s->probs))))
		return DLT_ENOMEM;
	return 0;
}

/* The forward pass over the data, a batch at a time, as the trainer
 * evaluates: the same normalised inputs, the same argmax (the first
 * index of the largest logit), so the same accuracy. */
static int predict(infer *s, const struct args *a)
{
	const dlt_dataset *d = &s->data;
	const int k = s->like.n_classes, batch = s->m.max_batch;
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
		dlt_dataset_gather(d, s->order, b, dlt_model_input(&s->m), s->labels);
		logits = dlt_model_forward(&s->m, b, 0, 0);
		if (s->loss.task != DLT_TASK_CLASS && d->t)
			dlt_loss_add(&s->loss, 0, logits, s->labels, b, 0, s->sums);
		for (int i = 0; s->loss.task != DLT_TASK_CLASS && i < b; i++)
			put_task_row(fp, a->jsonl, &s->loss, i0 + i, logits + (size_t)i * k,
				     d->t ? (const float *)s->labels + (size_t)i * k : NULL,
				     a->probs ? s->probs : NULL);
		for (int i = 0; s->loss.task == DLT_TASK_CLASS && i < b; i++) {
			const int32_t *labels = s->labels;
			int pred;
			dlt_softmax_xent_row(logits + (size_t)i * k, k, -1, 1.0f, s->probs, &pred);
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
	if (s->have_m)
		dlt_model_free(&s->m);
	dlt_ckpt_close(&s->k);
	if (s->have_c)
		dlt_config_free(&s->c);
	dlt_dataset_free(&s->like);
	dlt_dataset_free(&s->data);
	free(s->order);
	free(s->labels);
	free(s->probs);
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
		dlt_loss_metrics(&s.loss, 0, s.sums, (double)s.data.n, v);
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
	return run(&a);
}
