/* dlt-train: train a model from a YAML config on a dataset archive;
 * resume a run; supervise it and restart it after a crash. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "config/config.h"
#include "train/train.h"

static const char prog[] = "dlt-train";

static const char usage[] =
	"usage: dlt-train -c CONFIG [-o RUNDIR] [-s KEY=VALUE]... [--restarts N] [--json] [-q]\n"
	"       dlt-train --resume RUNDIR [-s train.epochs=N] [--restarts N] [--json] [-q]\n"
	"\n"
	"  -c, --config FILE   the training config (YAML; - for stdin)\n"
	"  -o, --output DIR    the run directory (default runs/CONFIG-DATE-TIME)\n"
	"  -s, --set KEY=VAL   override a config key, e.g. -s train.optimizer.adam.lr=3e-4\n"
	"  -r, --resume DIR    continue the run in DIR from its newest valid checkpoint;\n"
	"                      -s train.epochs=N may raise its epochs, even when done\n"
	"      --restarts N    restart the training process up to N times when it dies\n"
	"      --json          write the metrics records (JSON Lines) to stdout\n"
	"  -q, --quiet         no per-epoch lines on stdout\n"
	"  -h, --help          this text\n"
	"      --version       the version\n";

typedef struct ui {
	int json, quiet, tty;
	double last_draw;
} ui;

/* Set by the signal handlers, read after every step (on_poll). */
static volatile sig_atomic_t got_stop, got_ckpt;

static void on_signal(int sig)
{
	if (sig == SIGUSR1) {
		got_ckpt = 1;
		return;
	}
	got_stop = 1;
	/* a second Ctrl-C is not asked twice: it ends the process at once */
	if (sig == SIGINT)
		signal(SIGINT, SIG_DFL);
}

static int on_poll(void *ctx)
{
	int ask = (got_ckpt ? DLT_POLL_CHECKPOINT : 0) | (got_stop ? DLT_POLL_STOP : 0);
	(void)ctx;
	got_ckpt = 0;
	return ask;
}

static void on_warn(void *ctx, const char *msg)
{
	ui *u = ctx;
	if (u->tty)
		fputs("\r\033[K", stderr);
	fprintf(stderr, "%s: warning: %s\n", prog, msg);
}

static void catch_signals(void (*handler)(int))
{
	struct sigaction sa = { .sa_handler = handler };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
}

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
	putchar('\n');
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
	const char *config, *rundir, *resume;
	char **overrides;
	int n_overrides;
	int restarts;
	int resume_epochs;	/* -s train.epochs=N with --resume; 0: the run's */
	int json, quiet, help, version;
	double t_start;
};

/* Fills a from the command line; returns 0, or the exit status of a usage
 * error already reported. */
static int parse_args(struct args *a, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "output", required_argument, NULL, 'o' },
		{ "set", required_argument, NULL, 's' },
		{ "resume", required_argument, NULL, 'r' },
		{ "restarts", required_argument, NULL, 'R' },
		{ "json", no_argument, NULL, 'j' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int opt;
	long long n;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":c:o:s:r:qh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c': a->config = optarg; break;
		case 'o': a->rundir = optarg; break;
		case 's': a->overrides[a->n_overrides++] = optarg; break;
		case 'r': a->resume = optarg; break;
		case 'R':
			if (dlt_parse_i64(optarg, 0, 1000, &n, "--restarts") < 0)
				return cli_usage(prog, "%s", dlt_errmsg());
			a->restarts = (int)n;
			break;
		case 'j': a->json = 1; break;
		case 'q': a->quiet = 1; break;
		case 'h': a->help = 1; return 0;
		case 'V': a->version = 1; return 0;
		default: return cli_bad_option(prog, opt, argv, longopts);
		}
	}
	if (optind < argc)
		return cli_usage(prog, "unexpected argument '%s'", argv[optind]);
	if (a->resume && (a->config || a->rundir))
		return cli_usage(prog, "--resume takes the run's own config: no -c or -o");
	/* a resume may go on for longer (dlt-search's promotions), not change
	 * what it trains */
	for (int i = 0; a->resume && i < a->n_overrides; i++) {
		static const char epochs[] = "train.epochs=";
		if (strncmp(a->overrides[i], epochs, sizeof(epochs) - 1))
			return cli_usage(prog, "--resume: -s %s: only train.epochs can change "
					 "on resume", a->overrides[i]);
		if (dlt_parse_i64(a->overrides[i] + sizeof(epochs) - 1, 1, 1000000, &n,
				  "train.epochs") < 0)
			return cli_usage(prog, "--resume: -s %s", dlt_errmsg());
		a->resume_epochs = (int)n;
	}
	if (!a->config && !a->resume)
		return cli_usage(prog, "no config: give -c FILE or --resume RUNDIR (see -h)");
	return 0;
}

/* One training process: a new run (note NULL, resume NULL) or the run in
 * resume continued.  Returns the exit status. */
static int train(const struct args *a, const char *rundir, const char *resume,
		 const char *note)
{
	ui u = { .json = a->json, .quiet = a->quiet, .tty = isatty(2) };
	dlt_train_hooks hooks = { .ctx = &u, .record = on_record, .progress = on_progress,
				  .epoch = on_epoch, .warn = on_warn, .poll = on_poll,
				  .t_start = a->t_start, .note = note };
	dlt_train_result res;
	dlt_config c;
	int rc;

	catch_signals(on_signal);
	if (resume) {
		rc = dlt_train_resume(resume, a->resume_epochs, &hooks, &res);
		rundir = resume;
	} else {
		if ((rc = dlt_config_load(&c, a->config, a->overrides, a->n_overrides)) < 0)
			return cli_fail(prog, rc);
		rc = dlt_train_run(&c, rundir, &hooks, &res);
		dlt_config_free(&c);
	}
	if (u.tty)
		fputs("\r\033[K", stderr);
	if (rc < 0)
		return cli_fail(prog, rc);
	if (res.stopped) {
		fprintf(stderr, "%s: stopped at step %lld; checkpoint %s; go on with: "
			"dlt-train --resume %s\n", prog, res.steps, res.ckpt, rundir);
		return 0;
	}
	if (!u.json && !isnan(res.test_acc))
		printf("test accuracy: %.4f\n", res.test_acc);
	fflush(stdout);
	if (!u.json && !u.quiet)
		fprintf(stderr, "%s: run directory %s\n", prog, rundir);
	return 0;
}

/* The supervisor's child, forwarded the signals that ask it to stop. */
static volatile pid_t child;

static void forward_signal(int sig)
{
	if (child > 0)
		kill(child, sig);
}

/* --restarts: runs the training in a child process and, when that dies
 * of a signal (a crash, kill -9, the OOM killer), runs it again from the
 * run's newest checkpoint, up to a->restarts times.  An exit, even a
 * failed one, is final: a diverged or misconfigured run would only fail
 * again. */
static int supervise(const struct args *a, const char *rundir)
{
	char note[160] = "";
	int restarts = 0;

	catch_signals(forward_signal);
	for (;;) {
		int status;
		pid_t pid;

		fflush(stdout);
		if ((pid = fork()) < 0) {
			dlt_error_errno(DLT_EFAIL, "fork");
			return cli_fail(prog, DLT_EFAIL);
		}
		if (pid == 0)
			_exit(train(a, rundir, restarts || a->resume ? rundir : NULL,
				    restarts ? note : NULL));
		child = pid;
		while (waitpid(pid, &status, 0) < 0)
			if (errno != EINTR)
				return cli_fail(prog, dlt_error_errno(DLT_EFAIL, "waitpid"));
		child = 0;
		if (WIFEXITED(status))
			return WEXITSTATUS(status);
		if (restarts == a->restarts) {
			fprintf(stderr, "%s: the training process was killed by signal %d (%s); "
				"no restarts left\n", prog, WTERMSIG(status),
				strsignal(WTERMSIG(status)));
			return 1;
		}
		restarts++;
		snprintf(note, sizeof(note), "restart %d of %d: the training process was "
			 "killed by signal %d (%s)", restarts, a->restarts, WTERMSIG(status),
			 strsignal(WTERMSIG(status)));
		fprintf(stderr, "%s: %s\n", prog, note);
	}
}

static int run(const struct args *a)
{
	const char *rundir = a->resume ? a->resume : a->rundir;
	char *auto_dir = NULL;
	int status;

	if (!rundir && !(rundir = auto_dir = default_rundir(a->config)))
		return cli_fail(prog, DLT_ENOMEM);
	if (a->restarts)
		status = supervise(a, rundir);
	else
		status = train(a, rundir, a->resume, NULL);
	free(auto_dir);
	return status;
}

int main(int argc, char **argv)
{
	struct args a = { .overrides = dlt_calloc(argc, sizeof(char *)), .t_start = dlt_now() };
	int status;

	if (!a.overrides)
		return cli_fail(prog, DLT_ENOMEM);
	if ((status = parse_args(&a, argc, argv)) == 0) {
		if (a.help)
			status = cli_help(usage);
		else if (a.version)
			status = cli_version(prog);
		else
			status = run(&a);
	}
	free(a.overrides);
	return status;
}
