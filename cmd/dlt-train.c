/* dlt-train: train a model from a YAML config on a dataset archive;
 * resume a run; supervise it and restart it after a crash. */
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "comm/comm.h"
#include "config/config.h"
#include "train/train.h"

static const char prog[] = "dlt-train";

static const char usage[] =
	"usage: dlt-train -c CONFIG [-o RUNDIR] [-s KEY=VALUE]... [--gpus N | --ranks N]\n"
	"                 [--auto-resume] [--restarts N] [--json] [-q] [-v]\n"
	"       dlt-train --resume RUNDIR [-s train.epochs=N | -s train.steps=N] [-s dist.KEY=V]\n"
	"                 [--gpus N | --ranks N] [--restarts N] [--json] [-q] [-v]\n"
	"\n"
	"  -c, --config FILE   the training config (YAML; - for stdin)\n"
	"  -o, --output DIR    the run directory (default runs/CONFIG-DATE-TIME; in a\n"
	"                      Slurm job runs/CONFIG-JOBID)\n"
	"  -s, --set KEY=VAL   override a config key, e.g. -s train.optimizer.adam.lr=3e-4\n"
	"  -r, --resume DIR    continue the run in DIR from its newest valid checkpoint;\n"
	"                      -s train.epochs=N (token data: train.steps=N) may raise\n"
	"                      its epochs (steps), even when done; -s dist.KEY=V goes\n"
	"                      on in another layout (ZeRO stage, pipeline)\n"
	"      --auto-resume   continue RUNDIR's run of CONFIG when it holds one, else\n"
	"                      start it (a job that Slurm requeues)\n"
	"      --gpus N        data parallel on N GPUs of this machine (device: cuda)\n"
	"      --ranks N       data parallel in N processes of this machine: GPUs as\n"
	"                      --gpus, CPU ranks through mpirun\n"
	"      --restarts N    restart the training (all ranks) up to N times when it dies\n"
	"  -v, --verbose       the output of every rank, not rank 0's alone\n"
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
	printf("epoch %d/%d: loss %.4f", s->epoch, s->epochs, s->loss);
	for (int i = 0; i < s->n_train; i++)
		printf(" %s %.4f", s->names[i], s->train[i]);
	if (!isnan(s->val_loss)) {
		printf(" | val loss %.4f", s->val_loss);
		for (int i = 0; i < s->n; i++)
			printf(" %s %.4f", s->names[i], s->val[i]);
	}
	if (!isnan(s->test_loss)) {
		printf(" | test loss %.4f", s->test_loss);
		for (int i = 0; i < s->n; i++)
			printf(" %s %.4f", s->names[i], s->test[i]);
	}
	putchar('\n');
	fflush(stdout);
}

/* runs/STEM-YYYYmmdd-HHMMSS, after the config file's name; in a Slurm job
 * runs/STEM-JOBID, which every rank and every requeue of the job names
 * alike. */
static char *default_rundir(const char *config)
{
	const char *base = strrchr(config, '/');
	char stamp[64], *dir;
	dlt_batch_job job;
	size_t len;
	time_t t = time(NULL);

	base = base ? base + 1 : config;
	if (strcmp(config, "-") == 0)
		base = "stdin";
	len = strcspn(base, ".");
	dlt_batch_job_get(&job);
	if (job.id[0])
		snprintf(stamp, sizeof(stamp), "%s", job.id);
	else
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
	int ranks;		/* --ranks N or --gpus N */
	int gpus;		/* the ranks are GPUs' (forked), else mpirun's */
	int resume_epochs;	/* -s train.epochs=N with --resume; 0: the run's */
	long long resume_steps;	/* -s train.steps=N with --resume; 0: the run's */
	int auto_resume;	/* --auto-resume */
	int json, quiet, verbose, help, version;
	double t_start;
	dlt_rank_info job;	/* from the launcher that started this process */
};

/* The config of the job: the resumed run's own (RUNDIR/config.yaml), or
 * -c's with the -s overrides. */
static int job_config(const struct args *a, const char *resume, dlt_config *c)
{
	char *path, **dist;
	int rc, n_dist = 0;

	if (!resume)
		return dlt_config_load(c, a->config, a->overrides, a->n_overrides);
	/* a --resume's -s dist.* (parse_args let only those and the length
	 * through) */
	if (!(dist = dlt_calloc((size_t)a->n_overrides + 1, sizeof(*dist))))
		return DLT_ENOMEM;
	for (int i = 0; a->resume && i < a->n_overrides; i++)
		if (!strncmp(a->overrides[i], "dist.", 5))
			dist[n_dist++] = a->overrides[i];
	if (!(path = dlt_malloc(strlen(resume) + 16))) {
		free(dist);
		return DLT_ENOMEM;
	}
	sprintf(path, "%s/config.yaml", resume);
	rc = dlt_config_load(c, path, dist, n_dist);
	free(path);
	free(dist);
	return rc;
}

/* --auto-resume: what rundir holds (DLT_RUNDIR_*), a run of another
 * config than -c's with its -s being an input error.  Each rank asks
 * before it opens the comm, and rank 0 creates a run only after that, so
 * the ranks cannot see the directory differently. */
static int auto_resume(const struct args *a, const char *rundir)
{
	dlt_config mine = { 0 }, theirs = { 0 };
	dlt_buf y1 = { 0 }, y2 = { 0 };
	int state = dlt_train_rundir_state(rundir), rc;

	if (state == DLT_RUNDIR_NONE)
		return state;
	if ((rc = job_config(a, NULL, &mine)) == 0 && (rc = job_config(a, rundir, &theirs)) == 0 &&
	    (rc = dlt_config_write_yaml(&mine, &y1)) == 0 &&
	    (rc = dlt_config_write_yaml(&theirs, &y2)) == 0 &&
	    (y1.len != y2.len || memcmp(y1.data, y2.data, y1.len) != 0))
		rc = dlt_error(DLT_EINPUT, "%s: holds a run of another config than %s "
			       "(its config.yaml): give another -o", rundir, a->config);
	dlt_buf_free(&y1);
	dlt_buf_free(&y2);
	dlt_config_free(&mine);
	dlt_config_free(&theirs);
	return rc < 0 ? rc : state;
}

/* --gpus N trains on GPUs whatever the config's device; --ranks N on
 * the config's device (a resumed run's own): forked ranks with NCCL on
 * GPUs, mpirun's on the CPU.  0, or the exit status of an error. */
static int ranks_device(struct args *a)
{
	dlt_config c;
	int rc;

	if (!a->resume && a->gpus)
		a->overrides[a->n_overrides++] = "device=cuda";
	if ((rc = job_config(a, a->resume, &c)) < 0)
		return cli_fail(prog, rc);
	if (a->gpus && c.device < 0)
		rc = cli_usage(prog, "--gpus: the run in %s trains on the CPU (use --ranks)",
			       a->resume);
	a->gpus = c.device >= 0;
	dlt_config_free(&c);
	return rc;
}

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
		{ "auto-resume", no_argument, NULL, 'A' },
		{ "gpus", required_argument, NULL, 'G' },
		{ "ranks", required_argument, NULL, 'N' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "json", no_argument, NULL, 'j' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int opt, rc;
	long long n;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":c:o:s:r:qvh", longopts, NULL)) != -1) {
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
		case 'G':
		case 'N':
			if (dlt_parse_i64(optarg, 1, DLT_LAUNCH_MAX, &n,
					  opt == 'G' ? "--gpus" : "--ranks") < 0)
				return cli_usage(prog, "%s", dlt_errmsg());
			a->ranks = (int)n;
			a->gpus = opt == 'G';
			break;
		case 'A': a->auto_resume = 1; break;
		case 'v': a->verbose = 1; break;
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
	if (a->resume && a->auto_resume)
		return cli_usage(prog, "--auto-resume goes with -c CONFIG -o RUNDIR, not --resume");
	/* a resume may go on for longer (dlt-search's promotions), and on
	 * other ranks (dist.*: a pipeline's stages, a ZeRO stage), not change
	 * what it trains */
	for (int i = 0; a->resume && i < a->n_overrides; i++) {
		static const char epochs[] = "train.epochs=", steps[] = "train.steps=";
		if (!strncmp(a->overrides[i], "dist.", 5))
			continue;
		if (!strncmp(a->overrides[i], steps, sizeof(steps) - 1)) {
			if (dlt_parse_i64(a->overrides[i] + sizeof(steps) - 1, 1, INT64_MAX, &n,
					  "train.steps") < 0)
				return cli_usage(prog, "--resume: -s %s", dlt_errmsg());
			a->resume_steps = n;
			continue;
		}
		if (strncmp(a->overrides[i], epochs, sizeof(epochs) - 1))
			return cli_usage(prog, "--resume: -s %s: only train.epochs can change on "
					 "resume (or train.steps, for token data)", a->overrides[i]);
		if (dlt_parse_i64(a->overrides[i] + sizeof(epochs) - 1, 1, 1000000, &n,
				  "train.epochs") < 0)
			return cli_usage(prog, "--resume: -s %s", dlt_errmsg());
		a->resume_epochs = (int)n;
	}
	if (!a->config && !a->resume)
		return cli_usage(prog, "no config: give -c FILE or --resume RUNDIR (see -h)");
	if (dlt_rank_info_get(&a->job) < 0)
		return cli_fail(prog, DLT_EINPUT);
	if (a->ranks && (rc = ranks_device(a)) != 0)
		return rc;
	if (a->job.size > 1 && (a->ranks || a->restarts))
		return cli_usage(prog, "this is rank %d of %d started by %s: --ranks, --gpus and "
				 "--restarts are for a job that dlt-train starts (under Slurm: "
				 "--requeue)", a->job.rank, a->job.size, a->job.launcher);
	return 0;
}

/* One rank's failure: said with its rank, and the job ended on every rank
 * (MPI_Abort), so that none waits for it until the timeout. */
static int rank_fail(dlt_comm *comm, int rc)
{
	int status;
	if (!comm)
		return cli_fail(prog, rc);
	fprintf(stderr, "%s: rank %d: %s\n", prog, comm->rank, dlt_errmsg());
	fflush(NULL);
	status = dlt_exit_status(rc);
	dlt_comm_abort(comm, status);
	return status;
}

/* One training process: a new run (note NULL, resume NULL) or the run in
 * resume continued.  Returns the exit status. */
static int train(const struct args *a, const dlt_rank_info *job, const char *rundir,
		 const char *resume, const char *note)
{
	/* the ranks after 0 train in silence unless --verbose */
	int quiet = job->rank != 0 && !a->verbose;
	ui u = { .json = a->json && !quiet, .quiet = a->quiet || quiet,
		 .tty = isatty(2) && !quiet };
	dlt_train_hooks hooks = { .ctx = &u, .record = on_record, .progress = on_progress,
				  .epoch = on_epoch, .warn = on_warn, .poll = on_poll,
				  .t_start = a->t_start, .note = note, .ranks = job };
	dlt_train_result res;
	dlt_config c = { 0 };
	dlt_comm *comm = NULL;
	int rc;

	catch_signals(on_signal);
	if (!resume && a->auto_resume) {
		if ((rc = auto_resume(a, rundir)) < 0)
			return cli_fail(prog, rc);
		if (rc == DLT_RUNDIR_DONE) {	/* requeued after its end */
			if (!quiet)
				fprintf(stderr, "%s: %s: the run is done\n", prog, rundir);
			return 0;
		}
		if (rc == DLT_RUNDIR_UNFINISHED)
			resume = rundir;
	}
	/* a resumed run's config is the library's to read, unless the
	 * ranks need its device and timeout for their comm first, or a
	 * --resume -s dist.* its layout */
	if ((!resume || dlt_comm_wanted(job) || a->resume) && (rc = job_config(a, resume, &c)) < 0)
		return cli_fail(prog, rc);
	if (resume && (dlt_comm_wanted(job) || a->resume))
		hooks.layout = &c;
	if (dlt_comm_wanted(job) && (rc = dlt_comm_open(&comm, job, dlt_rank_device(job, c.device),
							c.dist.timeout)) < 0) {
		dlt_config_free(&c);
		return cli_fail(prog, rc);
	}
	hooks.comm = comm;
	if (resume) {
		rc = dlt_train_resume(resume, a->resume_epochs, a->resume_steps, &hooks, &res);
		rundir = resume;
	} else {
		rc = dlt_train_run(&c, rundir, &hooks, &res);
	}
	dlt_config_free(&c);
	if (u.tty)
		fputs("\r\033[K", stderr);
	if (rc < 0)
		return rank_fail(comm, rc);
	dlt_comm_close(comm);
	if (quiet)
		return 0;
	if (res.stopped) {
		fprintf(stderr, "%s: stopped at step %lld; checkpoint %s; go on with: "
			"dlt-train --resume %s\n", prog, res.steps, res.ckpt, rundir);
		return 0;
	}
	/* the task's first metric: accuracy, rmse, ... */
	if (!u.json && !isnan(res.test_value))
		printf("test %s: %.4f\n", strcmp(res.test_metric, "acc") ? res.test_metric
		       : "accuracy", res.test_value);
	fflush(stdout);
	if (!u.json && !u.quiet)
		fprintf(stderr, "%s: run directory %s\n", prog, rundir);
	return 0;
}

/* What a process of the job runs: the job on this machine (the child of
 * --restarts's supervisor) or one of its ranks. */
struct job_args {
	const struct args *a;
	const char *rundir, *resume, *note;
};

static int train_rank(const dlt_rank_info *rank, void *ctx)
{
	const struct job_args *j = ctx;
	return train(j->a, rank, j->rundir, j->resume, j->note);
}

/* CPU ranks: mpirun -np N of this program with the run's options, less
 * the launcher's.  Its exit status is the job's: 128 + the signal when a
 * rank was killed by one (mpirun names the rank and ends the others). */
static int mpirun_ranks(const struct args *a, const char *rundir, const char *resume)
{
	char exe[PATH_MAX];
	char **v = dlt_calloc((size_t)a->n_overrides * 2 + 16, sizeof(char *));
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	dlt_launch_status st;
	int n = 0, rc;

	if (!v || len <= 0) {
		rc = v ? dlt_error_errno(DLT_EFAIL, "/proc/self/exe") : DLT_ENOMEM;
		free(v);
		return cli_fail(prog, rc);
	}
	exe[len] = '\0';
	v[n++] = exe;
	if (resume) {
		v[n++] = "--resume";
		v[n++] = (char *)resume;
	} else {
		v[n++] = "-c";
		v[n++] = (char *)a->config;
		v[n++] = "-o";
		v[n++] = (char *)rundir;
		if (a->auto_resume)
			v[n++] = "--auto-resume";
	}
	/* a new run's -s, or a user's --resume -s train.epochs=N; not a new
	 * run's -s on the --resume of its restart */
	for (int i = 0; (!resume || a->resume) && i < a->n_overrides; i++) {
		v[n++] = "-s";
		v[n++] = a->overrides[i];
	}
	if (a->json)
		v[n++] = "--json";
	if (a->quiet)
		v[n++] = "-q";
	if (a->verbose)
		v[n++] = "-v";
	rc = dlt_launch_mpirun(a->ranks, v, &st);
	free(v);
	if (st.exec_errno)
		fprintf(stderr, "%s: --ranks %d of CPU ranks runs mpirun: %s (install openmpi-bin)\n",
			prog, a->ranks, strerror(st.exec_errno));
	else if (rc < 0 && st.rank < 0)
		return cli_fail(prog, rc);
	return st.exit;
}

/* The job on this machine: one process, or a->ranks of them (GPU ranks
 * forked, after a probe of the GPUs; CPU ranks through mpirun). */
static int job(const struct args *a, const char *rundir, const char *resume, const char *note)
{
	struct job_args j = { a, rundir, resume, note };
	dlt_launch_status st;
	int rc;

	if (!a->ranks)
		return train(a, &a->job, rundir, resume, note);
	catch_signals(dlt_launch_forward_signal);
	if (!a->gpus)
		return mpirun_ranks(a, rundir, resume);
	if ((rc = dlt_launch_probe_gpus(a->ranks)) < 0) {
		fprintf(stderr, "%s: --gpus %d: %s\n", prog, a->ranks, dlt_errmsg());
		return dlt_exit_status(rc);
	}
	rc = dlt_launch_ranks(a->ranks, a->job.comm, train_rank, &j, &st);
	/* a rank that exited with a failure has said why itself */
	if (rc < 0 && (st.rank < 0 || st.signal))
		fprintf(stderr, "%s: %s\n", prog, dlt_errmsg());
	return st.exit;
}

/* The child of the supervisor: dies of the signal that killed a rank, so
 * that the supervisor restarts the job as it would after its own crash. */
static int supervised_job(void *ctx)
{
	const struct job_args *j = ctx;
	int st = job(j->a, j->rundir, j->resume, j->note);

	if (st > 128) {
		fflush(NULL);
		signal(st - 128, SIG_DFL);
		raise(st - 128);
	}
	return st;
}

/* --restarts: runs the job in a child process and, when that dies of a
 * signal (a crash, kill -9, the OOM killer; for a job of ranks, any of
 * its ranks), runs it again from the run's newest checkpoint, up to
 * a->restarts times.  An exit, even a failed one, is final: a diverged
 * or misconfigured run would only fail again. */
static int supervise(const struct args *a, const char *rundir)
{
	char note[160] = "";
	int restarts = 0;

	catch_signals(dlt_launch_forward_signal);
	for (;;) {
		struct job_args j = { a, rundir, restarts || a->resume ? rundir : NULL,
				      restarts ? note : NULL };
		dlt_launch_status st;
		int rc = dlt_launch_child(supervised_job, &j, &st);

		if (rc < 0 && st.rank < 0)
			return cli_fail(prog, rc);
		if (!st.signal)
			return st.exit;
		if (restarts == a->restarts) {
			fprintf(stderr, "%s: the training process was killed by signal %d (%s); no restarts "
				"left\n", prog, st.signal, strsignal(st.signal));
			return 1;
		}
		restarts++;
		snprintf(note, sizeof(note), "restart %d of %d: the training process was killed by "
			 "signal %d (%s)", restarts, a->restarts, st.signal, strsignal(st.signal));
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
	else if ((status = job(a, rundir, a->resume, NULL)) > 128)
		status = 1;	/* the launcher or mpirun said which rank died */
	free(auto_dir);
	return status;
}

int main(int argc, char **argv)
{
	/* room for the overrides and --gpus's device=cuda */
	struct args a = { .overrides = dlt_calloc(argc + 1, sizeof(char *)), .t_start = dlt_now() };
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
