/* dlt-search: hyper-parameter search over dlt-train runs (grid, random,
 * ASHA).  The scheduler, journal and launcher are lib/search's; this is
 * the command line, the live table and the leaderboard. */
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cli.h"
#include "search/search.h"

static const char prog[] = "dlt-search";

static const char usage[] =
	"usage: dlt-search -c SEARCH -o DIR [-j N] [--gpus LIST] [--gpus-per-trial K]\n"
	"                  [--launcher NAME] [--sbatch-args ARGS] [--retries N]\n"
	"                  [--keep-checkpoints] [-f FORMAT] [-q]\n"
	"       dlt-search --resume DIR [-j N] [--gpus LIST] [--gpus-per-trial K]\n"
	"                  [--launcher NAME] [--sbatch-args ARGS] [--retries N]\n"
	"                  [--keep-checkpoints] [-f FORMAT] [-q]\n"
	"       dlt-search status DIR [-f FORMAT]\n"
	"\n"
	"  -c, --config FILE     the search config (YAML)\n"
	"  -o, --output DIR      the search directory: journal.jsonl, trials/NNN/,\n"
	"                        logs/NNN.log, best.yaml, best.dlt\n"
	"  -r, --resume DIR      go on with the search in DIR after its searcher died\n"
	"  -j, --jobs N          trials run at the same time (default 1, or one per GPU\n"
	"                        slot); CPU trials train with cores / N threads each\n"
	"      --gpus LIST       GPUs for the trials, e.g. 0,1,2,3: each trial sees its\n"
	"                        own (CUDA_VISIBLE_DEVICES) and trains on device cuda\n"
	"      --gpus-per-trial K  GPUs a trial gets from LIST (default 1), or from Slurm;\n"
	"                        K > 1: dlt-train --gpus K\n"
	"      --launcher NAME   how trials run: local (child processes, the default)\n"
	"                        or slurm (one batch job each; -j: jobs in the queue);\n"
	"                        --resume: the search's own\n"
	"      --sbatch-args ARGS  more sbatch options for every trial's job, split at\n"
	"                        blanks, '...' and \"...\" quote\n"
	"      --retries N       run a crashed trial again up to N times (default 0)\n"
	"      --keep-checkpoints  keep the checkpoints of trials ASHA stopped early\n"
	"  -f, --format FORMAT   the leaderboard on stdout: table (default), csv or json\n"
	"  -q, --quiet           no progress on stderr\n"
	"  -h, --help            this text\n"
	"      --version         the version\n";

enum { OPT_VERSION = 256, OPT_GPUS, OPT_GPUS_PER_TRIAL, OPT_RETRIES, OPT_KEEP, OPT_LAUNCHER,
       OPT_SBATCH_ARGS };

static const struct option longopts[] = {
	{ "config", required_argument, NULL, 'c' },
	{ "output", required_argument, NULL, 'o' },
	{ "resume", required_argument, NULL, 'r' },
	{ "jobs", required_argument, NULL, 'j' },
	{ "gpus", required_argument, NULL, OPT_GPUS },
	{ "gpus-per-trial", required_argument, NULL, OPT_GPUS_PER_TRIAL },
	{ "launcher", required_argument, NULL, OPT_LAUNCHER },
	{ "sbatch-args", required_argument, NULL, OPT_SBATCH_ARGS },
	{ "retries", required_argument, NULL, OPT_RETRIES },
	{ "keep-checkpoints", no_argument, NULL, OPT_KEEP },
	{ "format", required_argument, NULL, 'f' },
	{ "quiet", no_argument, NULL, 'q' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, OPT_VERSION },
	{ NULL, 0, NULL, 0 },
};

/* What the progress display needs between calls. */
typedef struct ui {
	int tty, quiet;
	int drawn;		/* lines of the live table now on the terminal */
	const char *dir;
} ui;

static volatile sig_atomic_t got_stop;

static void on_signal(int sig)
{
	(void)sig;
	got_stop = 1;
}

static int on_stopping(void *ctx)
{
	(void)ctx;
	return got_stop;
}

static void params_text(char *buf, size_t n, const dlt_trial *t, const char *sep)
{
	size_t len = 0;
	buf[0] = 0;
	for (size_t i = 0; i < t->nov && len < n; i++)
		len += (size_t)snprintf(buf + len, n - len, "%s%s", i ? sep : "", t->ov[i]);
}

static void metric_text(char *buf, size_t n, double v)
{
	if (isnan(v))
		snprintf(buf, n, "-");
	else
		snprintf(buf, n, "%.6g", v);
}

/* The live table: the started trials best first, as many as the
 * terminal has rows for, redrawn in place. */
/* The unit of a search's budgets: "epochs", or "steps" for token data */
static const char *unit_of(const dlt_search_run *r)
{
	return dlt_search_in_steps(r) ? "steps" : "epochs";
}

static void draw(ui *u, const dlt_search_run *r)
{
	const dlt_search *s = dlt_search_of(r);
	const dlt_trial *const *o;
	struct winsize ws;
	size_t n, shown = 0, started = 0, rows = 24;
	char params[512], metric[32];

	if (ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 4)
		rows = ws.ws_row;
	o = dlt_search_leaderboard(r, &n);
	for (size_t i = 0; i < n; i++)
		started += o[i]->state != DLT_TRIAL_WAITING;
	if (u->drawn)
		fprintf(stderr, "\033[%dA", u->drawn);
	fprintf(stderr, "\r\033[K%-5s  %-4s  %-6s  %-10s  %-8s  %s\n", "trial", "rung", unit_of(r),
		s->metric, "status", "params");
	u->drawn = 1;
	for (size_t i = 0; i < n; i++) {
		const dlt_trial *t = o[i];
		if (t->state == DLT_TRIAL_WAITING)
			continue;
		/* a table taller than the terminal would scroll away from
		 * the cursor that redraws it */
		if (shown++ == rows - 3) {
			fprintf(stderr, "\r\033[K... %zu more\n", started - shown + 1);
			u->drawn++;
			break;
		}
		params_text(params, sizeof(params), t, " ");
		metric_text(metric, sizeof(metric), t->value);
		fprintf(stderr, "\r\033[K%03lld    %-4d  %-6d  %-10s  %-8s  %s\n", t->id, t->rung,
			t->epochs, metric, dlt_trial_state_name(t->state), params);
		u->drawn++;
	}
	fflush(stderr);
}

static void on_trial(void *ctx, const dlt_search_run *r, const dlt_trial *t, const char *what)
{
	ui *u = ctx;
	const dlt_search *s = dlt_search_of(r);
	char params[512], metric[32];
	int nrungs;
	const int *rungs = dlt_search_rungs(r, &nrungs);

	if (!strcmp(what, "failed")) {
		/* a failure is reported even with -q: the leaderboard says only its status */
		if (u->tty && !u->quiet)
			draw(u, r);
		fprintf(stderr, "%s: trial %03lld failed (exit status %d), see %s/logs/%03lld.log\n",
			prog, t->id, t->exit, u->dir, t->id);
		u->drawn = 0;
		return;
	}
	if (u->quiet)
		return;
	if (u->tty) {
		draw(u, r);
		return;
	}
	params_text(params, sizeof(params), t, " ");
	metric_text(metric, sizeof(metric), t->value);
	if (!strcmp(what, "start"))
		fprintf(stderr, "%s: trial %03lld started: %s\n", prog, t->id, params);
	else if (!strcmp(what, "promote"))
		fprintf(stderr, "%s: trial %03lld promoted to rung %d (%d %s)\n", prog, t->id,
			t->rung + 1, rungs[t->rung + 1], unit_of(r));
	else if (!strcmp(what, "retry"))
		fprintf(stderr, "%s: trial %03lld crashed (exit status %d); retry %d\n", prog, t->id,
			t->exit, t->attempt);
	else
		fprintf(stderr, "%s: trial %03lld rung %d (%d %.*s): %s %s\n", prog, t->id,
			t->rung, t->epochs, (int)strlen(unit_of(r)) - (t->epochs == 1),
			unit_of(r), s->metric, metric);
}

static void on_tick(void *ctx, const dlt_search_run *r)
{
	ui *u = ctx;
	if (u->tty && !u->quiet)
		draw(u, r);
}

/* One trial as a JSON line; rungs: with its rung (status). */
static int json_trial(const dlt_search_run *r, const dlt_trial *t, int rungs)
{
	const dlt_search *s = dlt_search_of(r);
	dlt_json j;
	dlt_json_begin(&j);
	dlt_json_int(&j, "trial", t->id);
	dlt_trial_json_params(&j, "params", t);
	if (rungs)
		dlt_json_int(&j, "rung", t->rung);
	dlt_json_int(&j, unit_of(r), t->epochs);
	dlt_json_str(&j, "metric", s->metric);
	dlt_json_num(&j, "value", t->value);
	dlt_json_str(&j, "status", dlt_trial_state_name(t->state));
	dlt_json_int(&j, "exit", t->exit);
	if (t->state == DLT_TRIAL_FAILED && t->tail)
		dlt_json_str(&j, "log", t->tail);
	dlt_json_end(&j);
	if (dlt_json_ok(&j) < 0)
		return DLT_ENOMEM;
	printf("%.*s\n", (int)j.buf.len, j.buf.data);
	dlt_json_free(&j);
	return 0;
}

/* The trials in order as a table, CSV or JSON Lines; rungs: with a rung
 * column (status). */
static int print_trials(const dlt_search_run *run, const dlt_trial *const *order, size_t n,
			int format, int rungs)
{
	const dlt_search *s = dlt_search_of(run);
	size_t np = s->nparams, ncol = np + 5 + (size_t)rungs;
	char ***cells;
	size_t *width;

	if (format == CLI_JSON) {
		for (size_t i = 0; i < n; i++)
			DLT_TRY_RC(json_trial(run, order[i], rungs));
		return 0;
	}
	cells = dlt_calloc(n + 1, sizeof(*cells));
	width = dlt_calloc(ncol, sizeof(*width));
	if (!cells || !width)
		return DLT_ENOMEM;
	for (size_t r = 0; r <= n; r++) {
		char buf[64];
		size_t c = 0;
		if (!(cells[r] = dlt_calloc(ncol, sizeof(**cells))))
			return DLT_ENOMEM;
		if (r == 0) {
			cells[0][c++] = dlt_strdup("trial");
			for (size_t i = 0; i < np; i++)
				cells[0][c++] = dlt_strdup(s->params[i].key);
			if (rungs)
				cells[0][c++] = dlt_strdup("rung");
			cells[0][c++] = dlt_strdup(unit_of(run));
			cells[0][c++] = dlt_strdup(s->metric);
			cells[0][c++] = dlt_strdup("status");
			cells[0][c++] = dlt_strdup("exit");
		} else {
			const dlt_trial *t = order[r - 1];
			snprintf(buf, sizeof(buf), "%03lld", t->id);
			cells[r][c++] = dlt_strdup(buf);
			for (size_t i = 0; i < np; i++)
				cells[r][c++] = dlt_strdup(dlt_trial_value(t->ov[i]));
			if (rungs) {
				snprintf(buf, sizeof(buf), "%d", t->rung);
				cells[r][c++] = dlt_strdup(buf);
			}
			snprintf(buf, sizeof(buf), "%d", t->epochs);
			cells[r][c++] = dlt_strdup(buf);
			metric_text(buf, sizeof(buf), t->value);
			cells[r][c++] = dlt_strdup(buf);
			cells[r][c++] = dlt_strdup(dlt_trial_state_name(t->state));
			snprintf(buf, sizeof(buf), "%d", t->exit);
			cells[r][c++] = dlt_strdup(buf);
		}
		for (c = 0; c < ncol; c++) {
			if (!cells[r][c])
				return DLT_ENOMEM;
			if (strlen(cells[r][c]) > width[c])
				width[c] = strlen(cells[r][c]);
		}
	}
	for (size_t r = 0; r <= n; r++) {
		for (size_t c = 0; c < ncol; c++) {
			if (format == CLI_CSV) {
				if (c)
					putchar(',');
				cli_csv_field(stdout, cells[r][c]);
			} else if (c + 1 < ncol) {
				printf("%-*s  ", (int)width[c], cells[r][c]);
			} else {
				fputs(cells[r][c], stdout);
			}
			free(cells[r][c]);
		}
		putchar('\n');
		free(cells[r]);
	}
	free(cells);
	free(width);
	return 0;
}

/* "0,1,2,3" in groups of k: each slot's CUDA_VISIBLE_DEVICES. */
static int split_slots(char *copy, const char *list, long long k, char ***slots, long long *n,
		       char ***ids)
{
	char *save = NULL;
	long long count = 0, id;

	for (char *p = strtok_r(copy, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		if (dlt_parse_i64(p, 0, 1023, &id, "--gpus") < 0)
			return cli_usage(prog, "%s", dlt_errmsg());
		if (!(*ids = realloc(*ids, (size_t)(count + 1) * sizeof(**ids))))
			return cli_fail(prog, DLT_ENOMEM);
		(*ids)[count++] = p;
	}
	if (count == 0)
		return cli_usage(prog, "--gpus: '%s' names no GPU", list);
	if (count % k)
		return cli_usage(prog, "--gpus-per-trial %lld: %lld GPUs do not split into groups "
				 "of %lld", k, count, k);
	*n = count / k;
	if (!(*slots = calloc((size_t)*n, sizeof(**slots))))
		return cli_fail(prog, DLT_ENOMEM);
	for (long long s = 0; s < *n; s++) {
		dlt_buf b = { 0 };
		for (long long i = 0; i < k; i++)
			if (dlt_buf_printf(&b, "%s%s", i ? "," : "", (*ids)[s * k + i]) < 0)
				return cli_fail(prog, DLT_ENOMEM);
		(*slots)[s] = b.data;
	}
	return 0;
}

static void free_slots(char **slots, long long n)
{
	for (long long i = 0; slots && i < n; i++)
		free(slots[i]);
	free(slots);
}

static int gpu_slots(const char *list, long long k, char ***slots, long long *n)
{
	char *copy = strdup(list), **ids = NULL;
	int rc;
	if (!copy)
		return cli_fail(prog, DLT_ENOMEM);
	rc = split_slots(copy, list, k, slots, n, &ids);
	free(ids);
	free(copy);
	return rc;
}

/* The trainer beside this program, so a search runs the dlt-train of its
 * own build; PATH's when /proc is not there. */
static const char *trainer_path(void)
{
	static char path[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 32);
	char *slash;

	if (n <= 0)
		return "dlt-train";
	path[n] = 0;
	if (!(slash = strrchr(path, '/')))
		return "dlt-train";
	strcpy(slash + 1, "dlt-train");
	return path;
}

/* dlt-search status DIR [-f FORMAT] */
static int status_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "format", required_argument, NULL, 'f' },
		{ NULL, 0, NULL, 0 },
	};
	static const char *const methods[] = { "", "grid", "random", "asha" };
	dlt_search_run *r = NULL;
	const dlt_trial *const *o;
	dlt_search s;
	int c, format = CLI_TABLE, running, rc, ended;
	long long started = 0, live = 0;
	size_t n;

	optind = 1;
	while ((c = getopt_long(argc, argv, ":f:", opts, NULL)) != -1) {
		if (c != 'f')
			return cli_bad_option(prog, c, argv, opts);
		if ((rc = cli_format(prog, optarg, &format)))
			return rc;
	}
	if (optind + 1 != argc)
		return cli_usage(prog, "status takes one search directory (see -h)");
	if ((rc = dlt_search_status(&r, &s, argv[optind], &running)) < 0) {
		dlt_search_run_free(r);
		dlt_search_free(&s);
		return cli_fail(prog, rc);
	}
	o = dlt_search_leaderboard(r, &n);
	ended = 1;
	for (size_t i = 0; i < n; i++) {
		started += o[i]->state != DLT_TRIAL_WAITING;
		live += o[i]->state == DLT_TRIAL_RUNNING;
		ended &= o[i]->state != DLT_TRIAL_WAITING && o[i]->state != DLT_TRIAL_RUNNING &&
			 o[i]->state != DLT_TRIAL_PAUSED;
	}
	if (format == CLI_TABLE)
		printf("%s: %s, %s %s, %zu trials, %lld started, %lld running, %lld %s "
		       "trained; %s\n", argv[optind], methods[s.method], s.metric,
		       s.mode > 0 ? "max" : "min", n, started, live, dlt_search_epochs(r), unit_of(r),
		       running ? "searching" : ended ? "finished" : "stopped (dlt-search --resume)");
	rc = print_trials(r, o, n, format, 1);
	dlt_search_run_free(r);
	dlt_search_free(&s);
	return rc < 0 ? cli_fail(prog, rc) : 0;
}

int main(int argc, char **argv)
{
	const char *config = NULL, *outdir = NULL, *resume = NULL, *gpus = NULL;
	const char *launcher_name = NULL, *sbatch_args = NULL;
	long long jobs = 0, per_trial = 0, retries = -1, nslots = 0;
	int c, format = CLI_TABLE, rc, keep = 0, quiet = 0, slurm;
	char **slot_gpus = NULL;
	dlt_search_run *r = NULL;
	dlt_launcher launcher = { 0 };
	dlt_search s = { 0 };
	ui u = { .tty = isatty(2) };
	dlt_search_hooks hooks = { .ctx = &u, .trial = on_trial, .tick = on_tick,
				   .stopping = on_stopping };
	struct sigaction sa = { .sa_handler = on_signal };

	if (argc > 1 && !strcmp(argv[1], "status"))
		return status_main(argc - 1, argv + 1);
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":c:o:r:j:f:qh", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			config = optarg;
			break;
		case 'o':
			outdir = optarg;
			break;
		case 'r':
			resume = optarg;
			break;
		case 'j':
			if (dlt_parse_i64(optarg, 1, 1024, &jobs, "-j") < 0)
				return cli_usage(prog, "%s", dlt_errmsg());
			break;
		case OPT_GPUS:
			gpus = optarg;
			break;
		case OPT_GPUS_PER_TRIAL:
			if (dlt_parse_i64(optarg, 1, 1024, &per_trial, "--gpus-per-trial") < 0)
				return cli_usage(prog, "%s", dlt_errmsg());
			break;
		case OPT_RETRIES:
			if (dlt_parse_i64(optarg, 0, 100, &retries, "--retries") < 0)
				return cli_usage(prog, "%s", dlt_errmsg());
			break;
		case OPT_KEEP:
			keep = 1;
			break;
		case OPT_LAUNCHER:
			if (strcmp(optarg, "local") && strcmp(optarg, "slurm"))
				return cli_usage(prog, "--launcher: '%s' is not local or slurm", optarg);
			launcher_name = optarg;
			break;
		case OPT_SBATCH_ARGS: {
			char **split;
			size_t n;
			if (dlt_split_args(optarg, &split, &n) < 0)
				return cli_usage(prog, "%s", dlt_errmsg());
			free(split);
			sbatch_args = optarg;
			break;
		}
		case 'f':
			if ((rc = cli_format(prog, optarg, &format)))
				return rc;
			break;
		case 'q':
			quiet = 1;
			break;
		case 'h':
			return cli_help(usage);
		case OPT_VERSION:
			return cli_version(prog);
		default:
			return cli_bad_option(prog, c, argv, longopts);
		}
	}
	if (optind < argc)
		return cli_usage(prog, "unexpected argument '%s'", argv[optind]);
	if (resume && (config || outdir))
		return cli_usage(prog, "--resume takes the search's own config: no -c or -o");
	if (!resume && !config)
		return cli_usage(prog, "missing -c SEARCH (see -h)");
	if (!resume && !outdir)
		return cli_usage(prog, "missing -o DIR (see -h)");
	if (!resume && !launcher_name)
		launcher_name = "local";
	slurm = launcher_name && !strcmp(launcher_name, "slurm");
	if (slurm && gpus)
		return cli_usage(prog, "--gpus picks GPUs of this machine: with --launcher slurm "
				 "give --gpus-per-trial K");
	if (per_trial && !gpus && !slurm)
		return cli_usage(prog, "--gpus-per-trial needs --gpus");
	if (sbatch_args && launcher_name && !slurm)
		return cli_usage(prog, "--sbatch-args needs --launcher slurm");
	if (gpus && !per_trial)
		per_trial = 1;
	if (gpus && (rc = gpu_slots(gpus, per_trial, &slot_gpus, &nslots)))
		return rc;
	if (gpus && jobs > nslots) {
		free_slots(slot_gpus, nslots);
		return cli_usage(prog, "-j %lld: --gpus has %lld slots of %lld GPUs", jobs, nslots,
				 per_trial);
	}
	if (!jobs && (gpus || !resume))
		jobs = gpus ? nslots : 1;

	{
		dlt_search_opts o = { .slots = jobs, .retries = resume || retries >= 0 ? (int)retries : 0,
				      .keep_checkpoints = keep, .slot_gpus = slot_gpus,
				      .trainer = trainer_path(),
				      .gpus_per_trial = (int)per_trial,
				      .launcher = launcher_name, .sbatch_args = sbatch_args };
		if ((o.threads = dlt_env_threads()) < 0)
			return cli_fail(prog, o.threads);
		if (resume) {
			u.dir = resume;
			rc = dlt_search_reopen(&r, &s, resume, &o);
		} else {
			u.dir = outdir;
			if ((rc = dlt_search_load(&s, config)) == 0)
				rc = dlt_search_begin(&r, &s, outdir, &o);
		}
	}
	if (rc == 0 && s.method == DLT_SEARCH_ASHA && jobs > s.parallel)
		fprintf(stderr, "%s: warning: -j %lld is more than parallel: %d of %s; %lld slots "
			"stay idle\n", prog, jobs, s.parallel, s.path, jobs - s.parallel);
	u.quiet = quiet;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (rc == 0) {
		const char *name, *args;
		dlt_search_launcher(r, &name, &args);
		if (!strcmp(name, "slurm"))
			rc = dlt_launcher_slurm(&launcher, args);
		else if (!strcmp(name, "local") && !sbatch_args)
			dlt_launcher_local(&launcher);
		else if (!strcmp(name, "local"))
			rc = dlt_error(DLT_EINPUT, "--sbatch-args: %s runs its trials locally", u.dir);
		else
			rc = dlt_error(DLT_EINPUT, "%s: launcher '%s' unknown", u.dir, name);
	}
	if (rc == 0)
		rc = dlt_search_go(r, &launcher, &hooks);
	if (rc == 0 && u.tty && !quiet)
		draw(&u, r);	/* the trials ASHA stopped say so now */
	if (rc == 0) {
		size_t n;
		const dlt_trial *const *o = dlt_search_leaderboard(r, &n);
		rc = print_trials(r, o, n, format, 0);
		fflush(stdout);
		if (rc == 0 && (!n || o[0]->state == DLT_TRIAL_FAILED || isnan(o[0]->value)))
			rc = dlt_error(DLT_EFAIL, "no trial gave %s", s.metric);
	}
	dlt_launcher_close(&launcher);
	dlt_search_run_free(r);
	dlt_search_free(&s);
	free_slots(slot_gpus, nslots);
	return rc < 0 ? cli_fail(prog, rc) : 0;
}
