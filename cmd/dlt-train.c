/* dlt-train: train a model from a YAML config on a dataset archive. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "config/config.h"
#include "train/train.h"

static const char prog[] = "dlt-train";

static const char usage[] =
	"usage: dlt-train -c CONFIG [-o RUNDIR] [-s KEY=VALUE]... [--json] [-q]\n"
	"\n"
	"  -c, --config FILE   the training config (YAML; - for stdin)\n"
	"  -o, --output DIR    the run directory (default runs/CONFIG-DATE-TIME)\n"
	"  -s, --set KEY=VAL   override a config key, e.g. -s train.optimizer.adam.lr=3e-4\n"
	"      --json          write the metrics records (JSON Lines) to stdout\n"
	"  -q, --quiet         no per-epoch lines on stdout\n"
	"  -h, --help          this text\n"
	"      --version       the version\n";

typedef struct ui {
	int json, quiet, tty;
	double last_draw;
} ui;

static void on_record(void *ctx, const char *json)
{
	ui *u = ctx;
	if (u->json) {
		puts(json);
		fflush(stdout);
	}
}

static void fmt_time(char *s, size_t n, double sec)
{
	long t = isfinite(sec) && sec > 0 ? (long)(sec + 0.5) : 0;
	if (t >= 3600)
		snprintf(s, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
	else
		snprintf(s, n, "%ld:%02ld", t / 60, t % 60);
}

/* A progress bar on stderr, only on a terminal, redrawn at most 10 times
 * a second. */
static void on_progress(void *ctx, const dlt_progress *p)
{
	ui *u = ctx;
	double now = dlt_now();
	char eta[32], bar[31];
	int fill;

	if (!u->tty || (now - u->last_draw < 0.1 && p->step_in_epoch != p->steps_per_epoch))
		return;
	u->last_draw = now;
	fill = (int)(30 * p->step_in_epoch / p->steps_per_epoch);
	memset(bar, '=', fill);
	memset(bar + fill, ' ', 30 - fill);
	bar[30] = 0;
	fmt_time(eta, sizeof(eta), p->eta_s);
	fprintf(stderr, "\repoch %d/%d [%s] %lld/%lld loss %.4f %.0f samples/s ETA %s \033[K",
		p->epoch, p->epochs, bar, p->step_in_epoch, p->steps_per_epoch, p->loss,
		p->samples_per_s, eta);
}

static void on_epoch(void *ctx, const dlt_epoch_summary *s)
{
	ui *u = ctx;
	if (u->tty)
		fputs("\r\033[K", stderr);
	if (u->json || u->quiet)
		return;
	printf("epoch %d/%d: loss %.4f acc %.4f", s->epoch, s->epochs, s->loss, s->acc);
	if (!isnan(s->val_acc))
		printf(" | val loss %.4f acc %.4f", s->val_loss, s->val_acc);
	if (!isnan(s->test_acc))
		printf(" | test loss %.4f acc %.4f", s->test_loss, s->test_acc);
	printf(" | %.0f samples/s\n", s->samples_per_s);
	fflush(stdout);
}

/* runs/STEM-YYYYmmdd-HHMMSS, after the config file's name. */
static char *default_rundir(const char *config)
{
	const char *base = strrchr(config, '/');
	char stamp[32], *dir;
	size_t len;
	time_t t = time(NULL);

	base = base ? base + 1 : config;
	if (strcmp(config, "-") == 0)
		base = "stdin";
	len = strcspn(base, ".");
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", localtime(&t));
	dir = dlt_malloc(len + strlen(stamp) + 8);
	if (dir)
		sprintf(dir, "runs/%.*s-%s", (int)len, base, stamp);
	return dir;
}

struct args {
	const char *config, *rundir;
	char **overrides;
	int n_overrides;
	int json, quiet, help, version;
};

/* Fills a from the command line; returns 0, or the exit status of a usage
 * error already reported. */
static int parse_args(struct args *a, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "output", required_argument, NULL, 'o' },
		{ "set", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int opt;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":c:o:s:qh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c': a->config = optarg; break;
		case 'o': a->rundir = optarg; break;
		case 's': a->overrides[a->n_overrides++] = optarg; break;
		case 'j': a->json = 1; break;
		case 'q': a->quiet = 1; break;
		case 'h': a->help = 1; return 0;
		case 'V': a->version = 1; return 0;
		default: return cli_bad_option(prog, opt, argv, longopts);
		}
	}
	if (optind < argc)
		return cli_usage(prog, "unexpected argument '%s'", argv[optind]);
	if (!a->config)
		return cli_usage(prog, "no config: give -c FILE (see -h)");
	return 0;
}

static int train(const struct args *a)
{
	ui u = { .json = a->json, .quiet = a->quiet, .tty = isatty(2) };
	dlt_train_hooks hooks = { &u, on_record, on_progress, on_epoch };
	dlt_train_result res;
	const char *rundir = a->rundir;
	char *auto_dir = NULL;
	dlt_config c;
	int rc;

	if ((rc = dlt_config_load(&c, a->config, a->overrides, a->n_overrides)) < 0)
		return cli_fail(prog, rc);
	if (!rundir && !(rundir = auto_dir = default_rundir(a->config))) {
		dlt_config_free(&c);
		return cli_fail(prog, DLT_ENOMEM);
	}
	rc = dlt_train_run(&c, rundir, &hooks, &res);
	if (u.tty)
		fputs("\r\033[K", stderr);
	if (rc == 0) {
		if (!u.json && !isnan(res.test_acc))
			printf("test accuracy: %.4f\n", res.test_acc);
		fflush(stdout);
		if (!u.json && !u.quiet)
			fprintf(stderr, "%s: run directory %s\n", prog, rundir);
	}
	dlt_config_free(&c);
	free(auto_dir);
	return rc < 0 ? cli_fail(prog, rc) : 0;
}

int main(int argc, char **argv)
{
	struct args a = { .overrides = dlt_calloc(argc, sizeof(char *)) };
	int status;

	if (!a.overrides)
		return cli_fail(prog, DLT_ENOMEM);
	if ((status = parse_args(&a, argc, argv)) == 0) {
		if (a.help)
			status = cli_help(usage);
		else if (a.version)
			status = cli_version(prog);
		else
			status = train(&a);
	}
	free(a.overrides);
	return status;
}
