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
	"  -m, --metric METRIC    ls: the metric shown (default test.acc, else val.acc,\n"
	"                         else train.loss); best: the one ranked by; plot: the\n"
	"                         ones drawn (default train.loss and that metric)\n"
	"      --mode max|min     best: whether more is better (default: min for *loss)\n"
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

/* The options each command takes, and its operands. */
enum { O_SORT = 1, O_REVERSE = 2, O_WHERE = 4, O_STATUS = 8, O_METRIC = 16, O_MODE = 32,
       O_FORMAT = 64, O_X = 128, O_OUT = 256 };
static const struct command {
	const char *name;
	int opts;
	int min;		/* operands */
	const char *operands;
} commands[] = {
	{ "ls", O_SORT | O_REVERSE | O_WHERE | O_STATUS | O_METRIC | O_FORMAT, 0, NULL },
	{ "diff", 0, 2, "two RUNs or more" },
	{ "plot", O_METRIC | O_X | O_OUT, 1, "one RUN or more" },
	{ "best", O_WHERE | O_STATUS | O_METRIC | O_MODE, 1, "one DIR or more" },
	{ NULL, 0, 0, NULL },
};
static const char *const opt_names[] = { "--sort", "--reverse", "--where", "--status",
	"--metric", "--mode", "--format", "--x", "--output" };

enum { TABLE, CSV, JSON };

struct args {
	const struct command *cmd;
	int given;
	const char *sort, *metric, *status, *x, *out;
	int reverse, mode, format;
	const char *where[32];
	int nwhere;
	char **ops;
	int nops;
	int help, version;
};

/* ---- arguments ----------------------------------------------------------- */

/* The next item of a list "a,b,c" (sep ",") into item; advances *list. */
static const char *next_item(const char **list, const char *sep, char *item, size_t size)
{
	size_t n = strcspn(*list, sep);

	snprintf(item, size, "%.*s", (int)n, *list);
	*list += n + ((*list)[n] != 0);
	return item;
}

static int one_of(const char *opt, const char *v, const char *const *allowed, const char *say)
{
	for (int i = 0; allowed[i]; i++)
		if (strcmp(v, allowed[i]) == 0)
			return i;
	return -cli_usage(prog, "%s: '%s' is not %s", opt, v, say);
}

static int parse_opt(struct args *a, int c, char **argv)
{
	static const char *const formats[] = { "table", "csv", "json", NULL };
	static const char *const modes[] = { "min", "max", NULL };
	static const char *const xs[] = { "step", "epoch", "time", NULL };
	static const char *const statuses[] = { "running", "stopped", "done", "failed",
		"dead", "unknown", NULL };
	int i;

	switch (c) {
	case 's': a->given |= O_SORT; a->sort = optarg; return 0;
	case 'r': a->given |= O_REVERSE; a->reverse = 1; return 0;
	case 'w':
		a->given |= O_WHERE;
		if (!strchr(optarg, '=') || optarg[0] == '=' || optarg[0] == '!')
			return cli_usage(prog, "--where: '%s' is not KEY=VALUE or KEY!=VALUE", optarg);
		if (a->nwhere == 32)
			return cli_usage(prog, "--where: at most 32");
		a->where[a->nwhere++] = optarg;
		return 0;
	case OPT_STATUS:
		a->given |= O_STATUS;
		a->status = optarg;
		for (const char *s = optarg; *s;) {
			char one[32];
			if (one_of("--status", next_item(&s, ",", one, sizeof(one)), statuses,
				   "running, stopped, done, failed, dead or unknown") < 0)
				return 2;
		}
		return 0;
	case 'm': a->given |= O_METRIC; a->metric = optarg; return 0;
	case OPT_MODE:
		a->given |= O_MODE;
		if ((i = one_of("--mode", optarg, modes, "max or min")) < 0)
			return 2;
		a->mode = i ? 1 : -1;
		return 0;
	case 'f':
		a->given |= O_FORMAT;
		if ((i = one_of("--format", optarg, formats, "table, csv or json")) < 0)
			return 2;
		a->format = i;
		return 0;
	case 'x':
		a->given |= O_X;
		if (one_of("--x", optarg, xs, "step, epoch or time") < 0)
			return 2;
		a->x = optarg;
		return 0;
	case 'o': a->given |= O_OUT; a->out = optarg; return 0;
	case 'h': a->help = 1; return 0;
	case OPT_VERSION: a->version = 1; return 0;
	default: return cli_bad_option(prog, c, argv, longopts);
	}
}

static int parse_args(struct args *a, int argc, char **argv)
{
	int c, rc;

	if (argc > 1 && argv[1][0] != '-') {
		for (a->cmd = commands; a->cmd->name && strcmp(a->cmd->name, argv[1]); a->cmd++)
			;
		if (!a->cmd->name)
			return cli_usage(prog, "unknown command '%s'", argv[1]);
		argc--;
		argv++;
	}
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":s:rw:m:f:x:o:h", longopts, NULL)) != -1) {
		if ((rc = parse_opt(a, c, argv)) != 0)
			return rc;
		if (a->help || a->version)
			return 0;
	}
	if (!a->cmd)
		return cli_usage(prog, "missing command: ls, diff, plot or best (see dlt-runs -h)");
	for (int i = 0; i < 9; i++)
		if ((a->given & (1 << i)) && !(a->cmd->opts & (1 << i)))
			return cli_usage(prog, "%s takes no %s", a->cmd->name, opt_names[i]);
	a->ops = argv + optind;
	a->nops = argc - optind;
	if (a->nops < a->cmd->min)
		return cli_usage(prog, "%s takes %s, got %d", a->cmd->name, a->cmd->operands,
				 a->nops);
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

static int same_value(const char *a, const char *b)
{
	char *end_a, *end_b;
	double x = strtod(a, &end_a), y = strtod(b, &end_b);

	if (*a && *b && !*end_a && !*end_b)
		return x == y;		/* 1e-2 is 0.01 */
	return strcmp(a, b) == 0;
}

static int matches(const struct args *a, const dlt_runinfo *r)
{
	if (a->status) {
		const char *s = a->status;
		char one[32];
		while (*s && strcmp(next_item(&s, ",", one, sizeof(one)), r->status))
			;
		if (strcmp(one, r->status))
			return 0;
	}
	for (int i = 0; i < a->nwhere; i++) {
		const char *w = a->where[i], *eq = strchr(w, '=');
		int neg = eq[-1] == '!';
		char key[256];
		const char *v;

		snprintf(key, sizeof(key), "%.*s", (int)(eq - w - neg), w);
		v = dlt_runs_config(r, key);
		if (neg ? v && same_value(v, eq + 1) : !v || !same_value(v, eq + 1))
			return 0;
	}
	return 1;
}

/* Keeps the runs that match --where and --status; a --where key that no
 * run has is a typo, not a filter. */
static int filter(const struct args *a, struct runs *rs)
{
	size_t kept = 0;

	for (int i = 0; i < a->nwhere && rs->n; i++) {
		char key[256];
		size_t k = 0;
		snprintf(key, sizeof(key), "%.*s", (int)strcspn(a->where[i], "!="), a->where[i]);
		while (k < rs->n && !dlt_runs_config(&rs->r[k], key))
			k++;
		if (k == rs->n)
			return cli_usage(prog, "--where: no run has config key '%s'", key);
	}
	for (size_t i = 0; i < rs->n; i++) {
		if (matches(a, &rs->r[i]))
			rs->r[kept++] = rs->r[i];
		else
			dlt_runs_free(&rs->r[i]);
	}
	rs->n = kept;
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

static const char *sort_key;
static int sort_mode, sort_reverse;

static double sort_value(const dlt_runinfo *r)
{
	if (strcmp(sort_key, "start") == 0)
		return r->start;
	if (strcmp(sort_key, "duration") == 0)
		return r->duration;
	if (strcmp(sort_key, "epochs") == 0)
		return (double)r->epoch;
	if (strcmp(sort_key, "samples/s") == 0 || strcmp(sort_key, "samples_per_s") == 0)
		return r->samples_per_s;
	/* a metric: best first, runs without it last */
	return -sort_mode * dlt_runs_best_value(dlt_runs_series(r, sort_key), sort_mode);
}

static int cmp_runs(const void *pa, const void *pb)
{
	const dlt_runinfo *a = pa, *b = pb;
	int c;

	if (strcmp(sort_key, "run") == 0)
		c = strcmp(a->dir, b->dir);
	else if (strcmp(sort_key, "status") == 0)
		c = strcmp(a->status, b->status);
	else {
		double x = sort_value(a), y = sort_value(b);
		if (isnan(x) || isnan(y))
			return isnan(x) - isnan(y);
		c = (x > y) - (x < y);
	}
	c = sort_reverse ? -c : c;
	return c ? c : strcmp(a->dir, b->dir);
}

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
		return cell(o, "%s", o->format == TABLE ? "-" : "");
	return o->format == TABLE ? cell(o, table_fmt, v) : cell(o, "%.9g", v);
}

static void put_csv(const char *s)
{
	if (!s[strcspn(s, ",\"\n")]) {
		fputs(s, stdout);
		return;
	}
	putchar('"');
	for (; *s; s++)
		fputs(*s == '"' ? "\"\"" : (char[]){ *s, 0 }, stdout);
	putchar('"');
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
	for (size_t r = o->format == JSON; rc == 0 && r <= rows; r++) {
		const char **row = c + r * o->ncol;
		if (o->format == JSON) {
			rc = put_json(o, row);
			continue;
		}
		for (int k = 0; k < o->ncol; k++) {
			if (o->format == CSV) {
				if (k)
					putchar(',');
				put_csv(row[k]);
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
	if (o->format == TABLE)
		strftime(s, sizeof(s), "%Y-%m-%d %H:%M", localtime_r(&sec, &tm));
	else
		strftime(s, sizeof(s), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&sec, &tm));
	return cell(o, "%s", s);
}

static int how_long(struct out *o, double s)
{
	if (o->format != TABLE || s <= 0)
		return number(o, s > 0 ? s : NAN, NULL);
	if (s < 60)
		return cell(o, "%.1fs", s);
	if (s < 3600)
		return cell(o, "%dm%02ds", (int)s / 60, (int)s % 60);
	if (s < 3.6e9)
		return cell(o, "%lldh%02lldm", (long long)s / 3600, (long long)s / 60 % 60);
	return cell(o, "%.3gh", s / 3600);	/* a million hours: a damaged record */
}

static int ls(const struct args *a)
{
	static const char *const table[] = { "run", "status", "job", "node", "start", "duration",
		"epochs", NULL, NULL, "samples/s" };
	static const char *const machine[] = { "run", "status", "start", "duration", "epoch",
		"epochs", "metric", "best", "last", "samples_per_s", "slurm_job", "host" };
	static const char *const cols[] = { "run", "status", "start", "duration", "epochs",
		"samples/s", "samples_per_s", NULL };
	char *dflt[] = { "runs" }, *metric = NULL, *sort_metric = NULL, best[80], last[80];
	int k = 0, slurm = 0;
	const char *head[10];
	struct runs rs = { 0 };
	struct out o = { .format = a->format };
	int rc;

	if ((rc = find_runs(a->nops ? a->ops : dflt, a->nops ? a->nops : 1, &rs)) ||
	    (rc = filter(a, &rs)))
		goto out;
	while (a->sort && cols[k] && strcmp(cols[k], a->sort))
		k++;
	/* --sort by a metric shows that metric, unless -m says another */
	if ((rc = metric_of(a->metric ? a->metric : a->sort && !cols[k] ? a->sort :
			    dlt_runs_main_metric(rs.r, rs.n), &rs, &metric)))
		goto out;
	if (a->sort && !cols[k] && (rc = metric_of(a->sort, &rs, &sort_metric)))
		goto out;
	if (a->sort) {
		sort_key = cols[k] ? cols[k] : sort_metric;
		sort_mode = dlt_runs_mode(sort_key);
		sort_reverse = a->reverse;
		qsort(rs.r, rs.n, sizeof(*rs.r), cmp_runs);
	} else if (a->reverse) {
		for (size_t i = 0; i < rs.n / 2; i++) {
			dlt_runinfo t = rs.r[i];
			rs.r[i] = rs.r[rs.n - 1 - i];
			rs.r[rs.n - 1 - i] = t;
		}
	}
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
	o.head = a->format == TABLE ? head : machine;
	o.ncol = a->format == TABLE ? (slurm ? 10 : 8) : 12;
	/* run, status, start, metric, slurm_job, host */
	o.text = 1 | 2 | 4 | 64 | 1024 | 2048;
	for (size_t i = 0; i < rs.n; i++) {
		const dlt_runinfo *r = &rs.r[i];
		const dlt_series *s = dlt_runs_series(r, metric);
		int mode = dlt_runs_mode(metric);

		cell(&o, "%s", r->dir);
		cell(&o, "%s", r->status);
		if (a->format == TABLE && slurm) {
			cell(&o, "%s", r->slurm_job[0] ? r->slurm_job : "-");
			cell(&o, "%s", r->slurm_job[0] && r->host[0] ? r->host : "-");
		}
		when(&o, r->start);
		how_long(&o, r->duration);
		if (a->format == TABLE) {
			cell(&o, r->epochs ? "%lld/%lld" : "%lld", r->epoch, r->epochs);
		} else {
			cell(&o, "%lld", r->epoch);
			number(&o, r->epochs ? (double)r->epochs : NAN, NULL);
			cell(&o, "%s", metric);
		}
		number(&o, dlt_runs_best_value(s, mode), "%.4g");
		number(&o, s && s->n ? s->p[s->n - 1].value : NAN, "%.4g");
		number(&o, r->samples_per_s > 0 ? r->samples_per_s : NAN, "%.0f");
		if (a->format != TABLE) {
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
static int diff(const struct args *a)
{
	static const char *const stat[] = { "min", "max", "last" };
	struct runs rs = { 0 };
	struct out o = { .format = TABLE };
	const char **head = NULL;
	int rc;

	if ((rc = load_runs(a->ops, a->nops, &rs)))
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
		next_item(&p, ":", dir, sizeof(dir));
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

static int plot(const struct args *a)
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
	if ((rc = load_runs(a->ops, a->nops, &rs)))
		goto out;
	if (a->metric) {
		for (const char *m = a->metric; *m; p.nmetrics++) {
			char one[128];
			if (p.nmetrics == 16) {
				rc = cli_usage(prog, "--metric: at most 16");
				goto out;
			}
			next_item(&m, ",", one, sizeof(one));
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

static int best(const struct args *a)
{
	struct runs rs = { 0 };
	const dlt_runinfo *top = NULL;
	char *metric = NULL, *ckpt = NULL;
	double top_v = NAN;
	int rc, mode;

	if ((rc = find_runs(a->ops, a->nops, &rs)) || (rc = filter(a, &rs)))
		goto out;
	if ((rc = metric_of(a->metric ? a->metric : dlt_runs_main_metric(rs.r, rs.n), &rs,
			    &metric)))
		goto out;
	mode = a->mode ? a->mode : dlt_runs_mode(metric);
	for (size_t i = 0; i < rs.n; i++) {
		double v = dlt_runs_best_value(dlt_runs_series(&rs.r[i], metric), mode);
		if (!isnan(v) && (!top || (mode > 0 ? v > top_v : v < top_v))) {
			top = &rs.r[i];
			top_v = v;
		}
	}
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
	if (strcmp(a.cmd->name, "ls") == 0)
		return ls(&a);
	if (strcmp(a.cmd->name, "diff") == 0)
		return diff(&a);
	if (strcmp(a.cmd->name, "plot") == 0)
		return plot(&a);
	return best(&a);
}
