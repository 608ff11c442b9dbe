/* dlt-runs: experiment tracking from a shell: list, filter, compare and
 * plot run directories; pick the best run's checkpoint. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "runs/runs.h"

static const char prog[] = "dlt-runs";

static const char usage[] =
	"usage: dlt-runs ls [-s KEY] [-r] [-w KEY=VALUE]... [--status S] [-m METRIC] [-f FORMAT] [DIR...]\n"
	"       dlt-runs diff RUN RUN...\n"
	"       dlt-runs plot [-m METRIC[,METRIC...]] [-x step|epoch|time] [-o FILE] RUN...\n"
	"       dlt-runs best [-m METRIC] [--mode max|min] [-w KEY=VALUE]... [--status S] DIR...\n"
	"\n"
	"  -s, --sort KEY         ls: order by run, status, start, duration, epochs,\n"
	"                         samples/s, or by a metric's best value, best first\n"
	"  -r, --reverse          ls: the other way round\n"
	"  -w, --where KEY=VALUE  ls, best: runs whose config.yaml has KEY=VALUE (or\n"
	"                         KEY!=VALUE); KEY dotted: train.batch; repeatable\n"
	"      --status S[,S...]  ls, best: runs of status S: running, stopped, done,\n"
	"                         failed, dead\n"
	"  -m, --metric METRIC    ls: the metric shown (default the first of test.bpb,\n"
	"                         val.bpb, test.acc, val.acc, test.rmse, val.rmse,\n"
	"                         test.f1, val.f1 a run has, else train.loss); best:\n"
	"                         the one ranked by;\n"
	"                         plot: the ones drawn (default train.loss and that)\n"
	"      --mode max|min     best: whether more is better (default: min for losses\n"
	"                         and errors: *loss, *error, rmse, mae, mse, ppl, bpb)\n"
	"  -f, --format FORMAT    ls: table (default), csv or json (JSON Lines)\n"
	"  -x, --x step|epoch|time  plot: the x axis (default step)\n"
	"  -o, --output FILE      plot: FILE.svg or FILE.png, and FILE.gp, the gnuplot\n"
	"                         script; - for a text chart on stdout (the default\n"
	"                         on a terminal)\n"
	"  -h, --help             this text\n"
	"      --version          the version\n"
	"\n"
	"DIR (default runs) is searched for runs at any depth; a RUN is a run directory.\n";

enum { OPT_STATUS = 256, OPT_MODE, OPT_VERSION };

static const struct option longopts[] = {
	{ "sort", required_argument, NULL, 's' },
	{ "reverse", no_argument, NULL, 'r' },
	{ "where", required_argument, NULL, 'w' },
	{ "status", required_argument, NULL, OPT_STATUS },
	{ "metric", required_argument, NULL, 'm' },
	{ "mode", required_argument, NULL, OPT_MODE },
	{ "format", required_argument, NULL, 'f' },
	{ "x", required_argument, NULL, 'x' },
	{ "output", required_argument, NULL, 'o' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, OPT_VERSION },
	{ NULL, 0, NULL, 0 },
};

struct cli_args {
	const char *sort, *metric, *status, *x, *out;
	int reverse, mode, format;
	const char *where[32];
	int nwhere;
};

/* ---- arguments ----------------------------------------------------------- */

static int parse_opt(struct cli_args *a, int c)
{
	static const char *const modes[] = { "max", "min", NULL };
	static const char *const xs[] = { "step", "epoch", "time", NULL };
	static const char *const statuses[] = { "running", "stopped", "done", "failed",
		"dead", "unknown", NULL };
	int i = 0;

	switch (c) {
	case 's': a->sort = optarg; return 0;
	case 'r': a->reverse = 1; return 0;
	case 'w':
		if (dlt_runs_where_check(optarg) < 0)
			return cli_usage(prog, "--where: %s", dlt_errmsg());
		if (a->nwhere == 32)
			return cli_usage(prog, "--where: at most 32");
		a->where[a->nwhere++] = optarg;
		return 0;
	case OPT_STATUS:
		a->status = optarg;
		for (const char *s = optarg; *s;) {
			char one[32];
			if (cli_choice(prog, "--status", cli_next_item(&s, ",", one, sizeof(one)),
				       statuses, &i))
				return 2;
		}
		return 0;
	case 'm': a->metric = optarg; return 0;
	case OPT_MODE:
		if (cli_choice(prog, "--mode", optarg, modes, &i))
			return 2;
		a->mode = i ? -1 : 1;
		return 0;
	case 'f': return cli_format(prog, optarg, &a->format);
	case 'x':
		if (cli_choice(prog, "--x", optarg, xs, &i))
			return 2;
		a->x = optarg;
		return 0;
	case 'o': a->out = optarg; return 0;
	}
	return 0;
}

/* ---- loading and choosing runs ------------------------------------------ */

struct runs {
	dlt_runinfo *r;
	size_t n;
	int status;		/* exit status of what went wrong on the way */
};

static void runs_free(struct runs *rs)
{
	for (size_t i = 0; i < rs->n; i++)
		dlt_runs_free(&rs->r[i]);
	free(rs->r);
}

/* The runs under the DIRs.  A DIR that cannot be read, or a run that
 * cannot, is reported and left out (exit status 2), as ls(1) does. */
static int find_runs(char **dirs, int ndirs, struct runs *rs)
{
	char **paths = NULL;
	size_t n = 0;
	int rc = 0;

	for (int i = 0; i < ndirs; i++)
		if ((rc = dlt_runs_find(dirs[i], &paths, &n)) < 0) {
			if (rc != DLT_EINPUT)
				goto fail;
			rs->status = cli_fail(prog, rc);
		}
	if (!(rs->r = dlt_calloc(n ? n : 1, sizeof(dlt_runinfo)))) {
		rc = DLT_ENOMEM;
		goto fail;
	}
	for (size_t i = 0; i < n; i++) {
		if ((rc = dlt_runs_load(&rs->r[rs->n], paths[i])) == 0)
			rs->n++;
		else if (rc == DLT_EINPUT)
			rs->status = cli_fail(prog, rc);
		else
			goto fail;
	}
	rc = 0;
fail:
	for (size_t i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
	return rc < 0 ? cli_fail(prog, rc) : 0;
}

/* The RUN operands, each of which must be a run. */
static int load_runs(char **dirs, int ndirs, struct runs *rs)
{
	int rc;

	if (!(rs->r = dlt_calloc(ndirs, sizeof(dlt_runinfo))))
		return cli_fail(prog, DLT_ENOMEM);
	for (; rs->n < (size_t)ndirs; rs->n++)
		if ((rc = dlt_runs_load(&rs->r[rs->n], dirs[rs->n])) < 0)
			return cli_fail(prog, rc);
	return 0;
}

/* Keeps the runs that match --where and --status. */
static int filter(const struct cli_args *a, struct runs *rs)
{
	if (dlt_runs_filter(rs->r, &rs->n, a->where, (size_t)a->nwhere, a->status) < 0)
		return cli_usage(prog, "--where: %s", dlt_errmsg());
	return 0;
}

/* The canonical name of a metric some run has. */
static int metric_of(const char *given, const struct runs *rs, char **out)
{
	size_t i = 0;

	if (!(*out = dlt_runs_metric_name(given)))
		return cli_fail(prog, DLT_ENOMEM);
	while (i < rs->n && !dlt_runs_series(&rs->r[i], *out))
		i++;
	if (rs->n && i == rs->n)
		return cli_usage(prog, "no run has metric '%s'", given);
	return 0;
}

/* ---- ls ------------------------------------------------------------------ */

/* Cells of a table, csv or json, a row at a time. */
struct out {
	int format;
	const char *const *head;
	int ncol;
	unsigned text;		/* columns that are strings in json (bits) */
	dlt_buf cells;		/* NUL-separated */
	size_t ncells;
	int failed;		/* an append ran out of memory */
};

static int cell(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int cell(struct out *o, const char *fmt, ...)
{
	char s[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s, sizeof(s), fmt, ap);
	va_end(ap);
	o->ncells++;
	if (dlt_buf_append(&o->cells, s, strlen(s) + 1) < 0)
		o->failed = 1;
	return 0;
}

static int number(struct out *o, double v, const char *table_fmt)
{
	if (isnan(v))
		return cell(o, "%s", o->format == CLI_TABLE ? "-" : "");
	return o->format == CLI_TABLE ? cell(o, table_fmt, v) : cell(o, "%.9g", v);
}

static int put_json(const struct out *o, const char **row)
{
	dlt_json j;
	int rc;

	dlt_json_begin(&j);
	for (int k = 0; k < o->ncol; k++) {
		if (!row[k][0])
			dlt_json_raw(&j, o->head[k], "null");
		else if (o->text & (1u << k))
			dlt_json_str(&j, o->head[k], row[k]);
		else
			dlt_json_raw(&j, o->head[k], row[k]);
	}
	dlt_json_end(&j);
	if ((rc = dlt_json_ok(&j)) == 0)
		printf("%s\n", j.buf.data);
	dlt_json_free(&j);
	return rc;
}

/* Prints the rows collected and empties o for more. */
static int print_out(struct out *o)
{
	size_t rows = o->ncells / o->ncol, *w = dlt_calloc(o->ncol, sizeof(size_t));
	const char **c = dlt_calloc(o->ncells + o->ncol, sizeof(char *));
	int rc = o->failed || !c || !w ? DLT_ENOMEM : 0;

	for (int k = 0; rc == 0 && k < o->ncol; k++)
		c[k] = o->head[k];
	for (size_t i = 0, off = 0; rc == 0 && i < o->ncells;
	     i++, off += strlen(o->cells.data + off) + 1)
		c[o->ncol + i] = o->cells.data + off;
	for (size_t i = 0; rc == 0 && i < (rows + 1) * o->ncol; i++)
		if (strlen(c[i]) > w[i % o->ncol])
			w[i % o->ncol] = strlen(c[i]);
	for (size_t r = o->format == CLI_JSON; rc == 0 && r <= rows; r++) {
		const char **row = c + r * o->ncol;
		if (o->format == CLI_JSON) {
			rc = put_json(o, row);
			continue;
		}
		for (int k = 0; k < o->ncol; k++) {
			if (o->format == CLI_CSV) {
				if (k)
					putchar(',');
				cli_csv_field(stdout, row[k]);
			} else {	/* the last column unpadded */
				printf(k ? "  %-*s" : "%-*s", k < o->ncol - 1 ? (int)w[k] : 0,
				       row[k]);
			}
		}
		putchar('\n');
	}
	free(c);
	free(w);
	dlt_buf_free(&o->cells);
	o->ncells = 0;
	if (rc < 0)
		return cli_fail(prog, rc);
	if (fflush(stdout) != 0 || ferror(stdout))
		return cli_fail(prog, dlt_error_errno(DLT_EIO, "standard output"));
	return 0;
}

static int when(struct out *o, double t)
{
	char s[32];
	time_t sec;
	struct tm tm;

	/* a time before 1970 or after the year 30000 is no start of a run
	 * (nor would every one convert to a time_t and a struct tm) */
	if (!(t > 0 && t < 9e11))
		return number(o, NAN, NULL);
	sec = (time_t)t;
	if (o->format == CLI_TABLE)
		strftime(s, sizeof(s), "%Y-%m-%d %H:%M", localtime_r(&sec, &tm));
	else
		strftime(s, sizeof(s), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&sec, &tm));
	return cell(o, "%s", s);
}

static int how_long(struct out *o, double s)
{
	if (o->format != CLI_TABLE || s <= 0)
		return number(o, s > 0 ? s : NAN, NULL);
	if (s < 60)
		return cell(o, "%.1fs", s);
	if (s < 3600)
		return cell(o, "%dm%02ds", (int)s / 60, (int)s % 60);
	if (s < 3.6e9)
		return cell(o, "%lldh%02lldm", (long long)s / 3600, (long long)s / 60 % 60);
	return cell(o, "%.3gh", s / 3600);	/* a million hours: a damaged record */
}

static int ls(const struct cli_args *a, char **ops, int nops)
{
	static const char *const table[] = { "run", "status", "job", "node", "start", "duration",
		"epochs", NULL, NULL, "samples/s" };
	static const char *const machine[] = { "run", "status", "start", "duration", "epoch",
		"epochs", "metric", "best", "last", "samples_per_s", "slurm_job", "host" };
	char *dflt[] = { "runs" }, *metric = NULL, *sort_metric = NULL, best[80], last[80];
	int slurm = 0, by_metric = a->sort && !dlt_runs_is_property(a->sort);
	const char *head[10];
	struct runs rs = { 0 };
	struct out o = { .format = a->format };
	int rc;

	if ((rc = find_runs(nops ? ops : dflt, nops ? nops : 1, &rs)) ||
	    (rc = filter(a, &rs)))
		goto out;
	/* --sort by a metric shows that metric, unless -m says another */
	if ((rc = metric_of(a->metric ? a->metric : by_metric ? a->sort :
			    dlt_runs_main_metric(rs.r, rs.n), &rs, &metric)))
		goto out;
	if (by_metric && (rc = metric_of(a->sort, &rs, &sort_metric)))
		goto out;
	dlt_runs_sort(rs.r, rs.n, by_metric ? sort_metric : a->sort, a->reverse);
	snprintf(best, sizeof(best), "best:%s", metric);
	snprintf(last, sizeof(last), "last:%s", metric);
	/* a table has the Slurm job and node of each run when a run has one */
	for (size_t i = 0; i < rs.n; i++)
		slurm |= rs.r[i].slurm_job[0] != 0;
	memcpy(head, table, sizeof(head));
	if (!slurm)
		memmove(head + 2, head + 4, 6 * sizeof(head[0]));
	head[slurm ? 7 : 5] = best;
	head[slurm ? 8 : 6] = last;
	o.head = a->format == CLI_TABLE ? head : machine;
	o.ncol = a->format == CLI_TABLE ? (slurm ? 10 : 8) : 12;
	/* run, status, start, metric, slurm_job, host */
	o.text = 1 | 2 | 4 | 64 | 1024 | 2048;
	for (size_t i = 0; i < rs.n; i++) {
		const dlt_runinfo *r = &rs.r[i];
		const dlt_series *s = dlt_runs_series(r, metric);
		int mode = dlt_metric_mode(metric);

		cell(&o, "%s", r->dir);
		cell(&o, "%s", r->status);
		if (a->format == CLI_TABLE && slurm) {
			cell(&o, "%s", r->slurm_job[0] ? r->slurm_job : "-");
			cell(&o, "%s", r->slurm_job[0] && r->host[0] ? r->host : "-");
		}
		when(&o, r->start);
		how_long(&o, r->duration);
		if (a->format == CLI_TABLE) {
			cell(&o, r->epochs ? "%lld/%lld" : "%lld", r->epoch, r->epochs);
		} else {
			cell(&o, "%lld", r->epoch);
			number(&o, r->epochs ? (double)r->epochs : NAN, NULL);
			cell(&o, "%s", metric);
		}
		number(&o, dlt_runs_best_value(s, mode), "%.4g");
		number(&o, s && s->n ? s->p[s->n - 1].value : NAN, "%.4g");
		number(&o, r->samples_per_s > 0 ? r->samples_per_s : NAN, "%.0f");
		if (a->format != CLI_TABLE) {
			cell(&o, "%s", r->slurm_job);
			cell(&o, "%s", r->host);
		}
	}
	rc = print_out(&o);
out:
	free(metric);
	free(sort_metric);
	rc = rc ? rc : rs.status;
	runs_free(&rs);
	return rc;
}

/* ---- diff ---------------------------------------------------------------- */

static int differs(const struct runs *rs, const char *key)
{
	const char *first = dlt_runs_config(&rs->r[0], key);

	for (size_t i = 1; i < rs->n; i++) {
		const char *v = dlt_runs_config(&rs->r[i], key);
		if (!v != !first || (v && strcmp(v, first)))
			return 1;
	}
	return 0;
}

/* Whether run i's config key k, or series k, came in an earlier place:
 * each key and metric is shown once, where it first appears. */
static int shown_before(const struct runs *rs, size_t i, size_t k, int series)
{
	const char *name = series ? rs->r[i].series[k].name : rs->r[i].config[k].key;

	for (size_t j = 0; j <= i; j++)
		for (size_t m = 0; m < (j < i ? (series ? rs->r[j].nseries : rs->r[j].nconfig) : k);
		     m++)
			if (strcmp(series ? rs->r[j].series[m].name : rs->r[j].config[m].key,
				   name) == 0)
				return 1;
	return 0;
}

/* The config keys whose values differ, then min, max and last of every
 * metric: a column per run. */
static int diff(const struct cli_args *a, char **ops, int nops)
{
	static const char *const stat[] = { "min", "max", "last" };
	struct runs rs = { 0 };
	struct out o = { .format = CLI_TABLE };
	const char **head = NULL;
	int rc;

	if ((rc = load_runs(ops, nops, &rs)))
		goto out;
	if (!(head = dlt_calloc(rs.n + 1, sizeof(char *)))) {
		rc = cli_fail(prog, DLT_ENOMEM);
		goto out;
	}
	for (size_t i = 0; i < rs.n; i++)
		head[i + 1] = rs.r[i].dir;
	o.head = head;
	o.ncol = (int)rs.n + 1;
	head[0] = "config";
	for (size_t i = 0; i < rs.n; i++)
		for (size_t k = 0; k < rs.r[i].nconfig; k++) {
			const char *key = rs.r[i].config[k].key;
			if (shown_before(&rs, i, k, 0) || !differs(&rs, key))
				continue;
			cell(&o, "%s", key);
			for (size_t j = 0; j < rs.n; j++) {
				const char *v = dlt_runs_config(&rs.r[j], key);
				cell(&o, "%s", v ? v : "-");
			}
		}
	if ((rc = print_out(&o)))
		goto out;
	putchar('\n');
	head[0] = "metric";
	for (size_t i = 0; i < rs.n; i++)
		for (size_t k = 0; k < rs.r[i].nseries; k++) {
			const char *name = rs.r[i].series[k].name;
			for (int t = 0; t < 3 && !shown_before(&rs, i, k, 1); t++) {
				cell(&o, "%s %s", name, stat[t]);
				for (size_t j = 0; j < rs.n; j++) {
					const dlt_series *s = dlt_runs_series(&rs.r[j], name);
					number(&o, !s || !s->n ? NAN : t == 2 ? s->p[s->n - 1].value :
					       dlt_runs_best_value(s, t ? 1 : -1), "%.6g");
				}
			}
		}
	rc = print_out(&o);
out:
	free(head);
	runs_free(&rs);
	return rc;
}

/* ---- plot ---------------------------------------------------------------- */

static int have_gnuplot(void)
{
	const char *path = getenv("PATH");
	char dir[4096], file[4200];

	for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
		cli_next_item(&p, ":", dir, sizeof(dir));
		snprintf(file, sizeof(file), "%s/gnuplot", dir[0] ? dir : ".");
		if (access(file, X_OK) == 0)
			return 1;
	}
	return 0;
}

/* Runs gnuplot on the script file, or on the script through a pipe. */
static int gnuplot(const char *file, const dlt_buf *script)
{
	int fd[2] = { -1, -1 }, status;
	pid_t pid;

	if (!file && pipe(fd) != 0)
		return cli_fail(prog, dlt_error_errno(DLT_EIO, "pipe"));
	fflush(stdout);
	if ((pid = fork()) < 0)
		return cli_fail(prog, dlt_error_errno(DLT_EIO, "fork"));
	if (pid == 0) {
		if (!file) {
			dup2(fd[0], 0);
			close(fd[0]);
			close(fd[1]);
		}
		execlp("gnuplot", "gnuplot", file, (char *)NULL);
		_exit(127);
	}
	if (!file) {
		void (*old)(int) = signal(SIGPIPE, SIG_IGN);
		close(fd[0]);
		for (size_t off = 0; off < script->len;) {
			ssize_t n = write(fd[1], script->data + off, script->len - off);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;	/* gnuplot is gone: its status says why */
			off += (size_t)n;
		}
		close(fd[1]);
		signal(SIGPIPE, old);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return cli_fail(prog, dlt_error_errno(DLT_EIO, "waitpid"));
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "%s: gnuplot failed on %s\n", prog, file ? file : "the script");
		return 1;
	}
	return 0;
}

static int plot(const struct cli_args *a, char **ops, int nops)
{
	struct runs rs = { 0 };
	dlt_plot p = { .x = a->x ? a->x : "step", .width = 80, .height = 24 };
	char *metrics[16] = { 0 }, *script_path = NULL;
	const char *dot = a->out ? strrchr(a->out, '.') : NULL;
	dlt_buf script = { 0 };
	struct winsize ws;
	int rc;

	if (!a->out && !isatty(1))
		return cli_usage(prog, "plot: give -o FILE.svg or FILE.png, or -o - for a text chart");
	if (a->out && strcmp(a->out, "-") &&
	    (!dot || (strcmp(dot, ".svg") && strcmp(dot, ".png"))))
		return cli_usage(prog, "-o: '%s' does not end in .svg or .png (or give -o -)", a->out);
	if (!have_gnuplot()) {
		fprintf(stderr, "%s: gnuplot not found; install Debian's gnuplot-nox\n", prog);
		return 1;
	}
	if ((rc = load_runs(ops, nops, &rs)))
		goto out;
	if (a->metric) {
		for (const char *m = a->metric; *m; p.nmetrics++) {
			char one[128];
			if (p.nmetrics == 16) {
				rc = cli_usage(prog, "--metric: at most 16");
				goto out;
			}
			cli_next_item(&m, ",", one, sizeof(one));
			if ((rc = metric_of(one, &rs, &metrics[p.nmetrics])))
				goto out;
		}
	} else {
		const char *main = dlt_runs_main_metric(rs.r, rs.n);
		if (!(metrics[p.nmetrics++] = dlt_strdup("train.loss")) ||
		    (strcmp(main, "train.loss") && !(metrics[p.nmetrics++] = dlt_strdup(main))))
			goto nomem;
	}
	p.metrics = (const char *const *)metrics;
	if (!a->out || strcmp(a->out, "-") == 0) {
		p.terminal = "dumb";
		p.height = 20 * (int)p.nmetrics;	/* no window: a page a panel */
		if (ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 40 && ws.ws_row >= 10) {
			p.width = ws.ws_col;
			p.height = ws.ws_row - 1;
		}
	} else {
		p.terminal = dot + 1;
		p.output = a->out;
		if (!(script_path = dlt_malloc(strlen(a->out) + 1)))
			goto nomem;
		sprintf(script_path, "%.*s.gp", (int)(dot - a->out), a->out);
	}
	if (dlt_runs_gnuplot(&p, rs.r, rs.n, &script) < 0)
		goto nomem;
	if (script_path && (rc = dlt_write_file_atomic(script_path, script.data, script.len)) < 0)
		rc = cli_fail(prog, rc);
	else
		rc = gnuplot(script_path, &script);
	goto out;
nomem:
	rc = cli_fail(prog, DLT_ENOMEM);
out:
	for (size_t i = 0; i < 16; i++)
		free(metrics[i]);
	free(script_path);
	dlt_buf_free(&script);
	runs_free(&rs);
	return rc;
}

/* ---- best ---------------------------------------------------------------- */

static int best(const struct cli_args *a, char **ops, int nops)
{
	struct runs rs = { 0 };
	const dlt_runinfo *top;
	char *metric = NULL, *ckpt = NULL;
	int rc;

	if ((rc = find_runs(ops, nops, &rs)) || (rc = filter(a, &rs)))
		goto out;
	if ((rc = metric_of(a->metric ? a->metric : dlt_runs_main_metric(rs.r, rs.n), &rs,
			    &metric)))
		goto out;
	top = dlt_runs_best(rs.r, rs.n, metric, a->mode ? a->mode : dlt_metric_mode(metric));
	if (!top) {
		fprintf(stderr, "%s: no run found\n", prog);
		rc = 1;
	} else if ((rc = dlt_runs_checkpoint(top, &ckpt)) < 0) {
		rc = cli_fail(prog, rc);
	} else {
		printf("%s\n", ckpt);
		if (fflush(stdout) != 0 || ferror(stdout))
			rc = cli_fail(prog, dlt_error_errno(DLT_EIO, "standard output"));
	}
out:
	rc = rc ? rc : rs.status;
	free(ckpt);
	free(metric);
	runs_free(&rs);
	return rc;
}

/* The options each command takes, and its operands. */
enum { O_SORT = 1, O_REVERSE = 2, O_WHERE = 4, O_STATUS = 8, O_METRIC = 16, O_MODE = 32,
       O_FORMAT = 64, O_X = 128, O_OUT = 256 };
static const cli_command commands[] = {
	{ "ls", ls, O_SORT | O_REVERSE | O_WHERE | O_STATUS | O_METRIC | O_FORMAT, 0, 0, 0, NULL },
	{ "diff", diff, 0, 0, 2, 0, "two RUNs or more" },
	{ "plot", plot, O_METRIC | O_X | O_OUT, 0, 1, 0, "one RUN or more" },
	{ "best", best, O_WHERE | O_STATUS | O_METRIC | O_MODE, 0, 1, 0, "one DIR or more" },
	{ NULL, NULL, 0, 0, 0, 0, NULL },
};
static const cli_option options[] = {
	{ 's', "--sort", NULL },
	{ 'r', "--reverse", NULL },
	{ 'w', "--where", NULL },
	{ OPT_STATUS, "--status", NULL },
	{ 'm', "--metric", NULL },
	{ OPT_MODE, "--mode", NULL },
	{ 'f', "--format", NULL },
	{ 'x', "--x", NULL },
	{ 'o', "--output", NULL },
	{ 0, NULL, NULL },
};
static const cli_program program = {
	prog, usage, commands, ":s:rw:m:f:x:o:h", longopts, options, parse_opt, 0,
};

int main(int argc, char **argv)
{
	struct cli_args a = { 0 };
	return cli_main(&program, &a, argc, argv);
}
