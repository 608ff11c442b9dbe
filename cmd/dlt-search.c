/* dlt-search: hyper-parameter search over dlt-train runs (grid, random). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "runs/runs.h"
#include "search/search.h"

static const char prog[] = "dlt-search";

static const char usage[] =
	"usage: dlt-search -c SEARCH -o DIR [-j N] [-f FORMAT]\n"
	"\n"
	"  -c, --config FILE   the search config (YAML)\n"
	"  -o, --output DIR    the search directory: journal.jsonl, trials/NNN/,\n"
	"                      logs/NNN.log, best.yaml\n"
	"  -j, --jobs N        trials run at the same time (default 1); each trains\n"
	"                      with cores / N threads\n"
	"  -f, --format FORMAT the leaderboard on stdout: table (default), csv or json\n"
	"  -h, --help          this text\n"
	"      --version       the version\n";

enum { OPT_VERSION = 256 };

static const struct option longopts[] = {
	{ "config", required_argument, NULL, 'c' },
	{ "output", required_argument, NULL, 'o' },
	{ "jobs", required_argument, NULL, 'j' },
	{ "format", required_argument, NULL, 'f' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, OPT_VERSION },
	{ NULL, 0, NULL, 0 },
};

enum { FMT_TABLE, FMT_CSV, FMT_JSON };

typedef struct trial {
	long long id;
	char **ov;		/* the params' "key=value" */
	size_t nov;
	pid_t pid;
	int state;		/* 0 waiting, 1 running, 2 done, 3 failed */
	int exit;		/* exit status; 128 + signal for a signal */
	long long epochs;
	double value;		/* the metric's last value; NaN none */
} trial;

static const char *outdir;
static int journal = -1;
static const dlt_search *search;

static const char *value_of(const char *assignment)
{
	return strchr(assignment, '=') + 1;
}

/* One line of the journal, on disk before the decision it records acts. */
static int journal_write(dlt_json *j)
{
	int rc = 0;

	dlt_json_num(j, "time", dlt_wall());
	dlt_json_end(j);
	if (dlt_json_ok(j) < 0 || dlt_buf_append(&j->buf, "\n", 1) < 0)
		rc = DLT_ENOMEM;
	else if (write(journal, j->buf.data, j->buf.len) != (ssize_t)j->buf.len ||
		 fsync(journal) < 0)
		rc = dlt_error_errno(DLT_EIO, "%s/journal.jsonl", outdir);
	dlt_json_free(j);
	return rc;
}

static void json_params(dlt_json *j, const trial *t)
{
	dlt_json_object_begin(j, "params");
	for (size_t i = 0; i < t->nov; i++) {
		const char *v = value_of(t->ov[i]);
		char key[256];
		dlt_jval jv;
		int num = dlt_json_parse(v, strlen(v), &jv) == 0 && jv.type == DLT_JNUM;
		if (num)
			dlt_jval_free(&jv);
		snprintf(key, sizeof(key), "%.*s", (int)(strchr(t->ov[i], '=') - t->ov[i]), t->ov[i]);
		if (num)
			dlt_json_raw(j, key, v);
		else
			dlt_json_str(j, key, v);
	}
	dlt_json_end(j);
}

/* The trainer beside this program, so a search runs the dlt-train of its
 * own build; PATH's when /proc is not there. */
static char *trainer_path(void)
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

static int start(trial *t, const char *train, const char *threads)
{
	char dir[PATH_MAX], log[PATH_MAX];
	dlt_json j;

	snprintf(dir, sizeof(dir), "%s/trials/%03lld", outdir, t->id);
	snprintf(log, sizeof(log), "%s/logs/%03lld.log", outdir, t->id);
	dlt_json_begin(&j);
	dlt_json_str(&j, "event", "start");
	dlt_json_int(&j, "trial", t->id);
	json_params(&j, t);
	DLT_TRY_RC(journal_write(&j));

	fflush(NULL);
	t->pid = fork();
	if (t->pid < 0)
		return dlt_error_errno(DLT_EIO, "fork");
	if (t->pid == 0) {
		char **argv = calloc(2 * t->nov + 12, sizeof(*argv));
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0666), k = 0;
		int in = open("/dev/null", O_RDONLY);
		/* a trial ends with its searcher rather than train on unwatched */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (!argv || fd < 0 || in < 0)
			_exit(127);
		dup2(in, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		argv[k++] = "dlt-train";
		argv[k++] = "-c";
		argv[k++] = search->base;
		argv[k++] = "-o";
		argv[k++] = dir;
		argv[k++] = "-q";
		argv[k++] = "-s";
		argv[k++] = (char *)threads;
		for (size_t i = 0; i < t->nov; i++) {
			argv[k++] = "-s";
			argv[k++] = t->ov[i];
		}
		execvp(train, argv);
		fprintf(stderr, "%s: %s: %s\n", prog, train, strerror(errno));
		_exit(127);
	}
	t->state = 1;
	return 0;
}

static int finish(trial *t, int status)
{
	char dir[PATH_MAX];
	dlt_runinfo r;
	dlt_json j;

	snprintf(dir, sizeof(dir), "%s/trials/%03lld", outdir, t->id);
	t->exit = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	t->state = t->exit ? 3 : 2;
	t->value = NAN;
	if (dlt_runs_is_run(dir) && dlt_runs_load(&r, dir) == 0) {
		const dlt_series *s = dlt_runs_series(&r, search->metric);
		t->epochs = r.epoch;
		if (s && s->n && t->state == 2)
			t->value = s->p[s->n - 1].value;
		dlt_runs_free(&r);
	}
	dlt_json_begin(&j);
	dlt_json_str(&j, "event", "finish");
	dlt_json_int(&j, "trial", t->id);
	dlt_json_str(&j, "status", t->state == 2 ? "done" : "failed");
	dlt_json_int(&j, "exit", t->exit);
	dlt_json_int(&j, "epochs", t->epochs);
	dlt_json_str(&j, "metric", search->metric);
	dlt_json_num(&j, "value", t->value);
	DLT_TRY_RC(journal_write(&j));
	if (t->state == 3)
		fprintf(stderr, "%s: trial %03lld failed (exit status %d), see %s/logs/%03lld.log\n",
			prog, t->id, t->exit, outdir, t->id);
	return 0;
}

/* Best first; trials without a value last; then by number, so the order
 * never depends on which trial finished first. */
static int by_metric(const void *a, const void *b)
{
	const trial *x = *(trial *const *)a, *y = *(trial *const *)b;
	int nx = isnan(x->value), ny = isnan(y->value);

	if (nx != ny)
		return nx - ny;
	if (!nx && x->value != y->value)
		return (x->value < y->value) == (search->mode > 0) ? 1 : -1;
	return (x->id > y->id) - (x->id < y->id);
}

static void csv_field(const char *s)
{
	if (strpbrk(s, ",\"\n")) {
		putchar('"');
		for (; *s; s++) {
			if (*s == '"')
				putchar('"');
			putchar(*s);
		}
		putchar('"');
	} else {
		fputs(s, stdout);
	}
}

static int leaderboard(trial **order, size_t n, int format)
{
	size_t np = search->nparams, ncol = np + 5;
	char ***cells = calloc(n + 1, sizeof(*cells));
	size_t *width = calloc(ncol, sizeof(*width));

	if (!cells || !width)
		return dlt_error(DLT_ENOMEM, "out of memory");
	if (format == FMT_JSON) {
		for (size_t i = 0; i < n; i++) {
			const trial *t = order[i];
			dlt_json j;
			dlt_json_begin(&j);
			dlt_json_int(&j, "trial", t->id);
			json_params(&j, t);
			dlt_json_int(&j, "epochs", t->epochs);
			dlt_json_str(&j, "metric", search->metric);
			dlt_json_num(&j, "value", t->value);
			dlt_json_str(&j, "status", t->state == 2 ? "done" : "failed");
			dlt_json_int(&j, "exit", t->exit);
			dlt_json_end(&j);
			if (dlt_json_ok(&j) < 0)
				return DLT_ENOMEM;
			printf("%.*s\n", (int)j.buf.len, j.buf.data);
			dlt_json_free(&j);
		}
		free(cells);
		free(width);
		return 0;
	}
	for (size_t r = 0; r <= n; r++) {
		char buf[64];
		if (!(cells[r] = calloc(ncol, sizeof(**cells))))
			return dlt_error(DLT_ENOMEM, "out of memory");
		if (r == 0) {
			cells[0][0] = strdup("trial");
			for (size_t i = 0; i < np; i++)
				cells[0][1 + i] = strdup(search->params[i].key);
			cells[0][np + 1] = strdup("epochs");
			cells[0][np + 2] = strdup(search->metric);
			cells[0][np + 3] = strdup("status");
			cells[0][np + 4] = strdup("exit");
		} else {
			const trial *t = order[r - 1];
			snprintf(buf, sizeof(buf), "%03lld", t->id);
			cells[r][0] = strdup(buf);
			for (size_t i = 0; i < np; i++)
				cells[r][1 + i] = strdup(value_of(t->ov[i]));
			snprintf(buf, sizeof(buf), "%lld", t->epochs);
			cells[r][np + 1] = strdup(buf);
			if (isnan(t->value))
				snprintf(buf, sizeof(buf), "-");
			else
				snprintf(buf, sizeof(buf), "%.6g", t->value);
			cells[r][np + 2] = strdup(buf);
			cells[r][np + 3] = strdup(t->state == 2 ? "done" : "failed");
			snprintf(buf, sizeof(buf), "%d", t->exit);
			cells[r][np + 4] = strdup(buf);
		}
		for (size_t c = 0; c < ncol; c++) {
			if (!cells[r][c])
				return dlt_error(DLT_ENOMEM, "out of memory");
			if (strlen(cells[r][c]) > width[c])
				width[c] = strlen(cells[r][c]);
		}
	}
	for (size_t r = 0; r <= n; r++) {
		for (size_t c = 0; c < ncol; c++) {
			if (format == FMT_CSV) {
				if (c)
					putchar(',');
				csv_field(cells[r][c]);
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

static int copy_best(const trial *best)
{
	char src[PATH_MAX], dst[PATH_MAX];
	char *data;
	size_t len;
	int rc;

	snprintf(src, sizeof(src), "%s/trials/%03lld/config.yaml", outdir, best->id);
	snprintf(dst, sizeof(dst), "%s/best.yaml", outdir);
	DLT_TRY_RC(dlt_read_file(src, 0, &data, &len));
	rc = dlt_write_file_atomic(dst, data, len);
	free(data);
	return rc;
}

/* The search with count trials t, and order to rank them in. */
static int search_trials(const dlt_search *s, long long jobs, int format, trial *t,
			 trial **order, long long count)
{
	long long next = 0, running = 0;
	char threads[64], path[PATH_MAX];
	const char *train = trainer_path();
	int cores = dlt_env_threads(), rc = 0;
	dlt_json j;

	if (cores < 0)
		return cores;
	snprintf(threads, sizeof(threads), "train.threads=%lld", cores / jobs > 0 ? cores / jobs : 1);
	{
		char *extra = threads;
		DLT_TRY_RC(dlt_search_check(s, &extra, 1));
	}
	for (long long i = 0; i < count; i++) {
		t[i].id = i;
		t[i].value = NAN;
		DLT_TRY_RC(dlt_search_trial(s, i, &t[i].ov, &t[i].nov));
	}
	snprintf(path, sizeof(path), "%s/trials", outdir);
	DLT_TRY_RC(dlt_mkdir_p(path));
	snprintf(path, sizeof(path), "%s/logs", outdir);
	DLT_TRY_RC(dlt_mkdir_p(path));
	snprintf(path, sizeof(path), "%s/journal.jsonl", outdir);
	journal = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND, 0666);
	if (journal < 0 && errno == EEXIST)
		return dlt_error(DLT_EINPUT, "%s: holds a search already", outdir);
	if (journal < 0)
		return dlt_error_errno(DLT_EIO, "%s", path);

	dlt_json_begin(&j);
	dlt_json_str(&j, "event", "search");
	dlt_json_str(&j, "config", s->path);
	dlt_json_str(&j, "base", s->base);
	dlt_json_str(&j, "metric", s->metric);
	dlt_json_str(&j, "mode", s->mode > 0 ? "max" : "min");
	dlt_json_str(&j, "method", s->method == DLT_SEARCH_GRID ? "grid" : "random");
	dlt_json_int(&j, "trials", count);
	dlt_json_int(&j, "seed", s->seed);
	dlt_json_int(&j, "jobs", jobs);
	DLT_TRY_RC(journal_write(&j));

	while (next < count || running > 0) {
		int status;
		pid_t pid;

		while (rc == 0 && running < jobs && next < count) {
			if ((rc = start(&t[next], train, threads)) < 0)
				break;
			next++;
			running++;
		}
		if (rc < 0)
			next = count;	/* start no more; wait for the running ones */
		if (running == 0)
			break;
		pid = wait(&status);
		if (pid < 0) {
			if (errno == EINTR)
				continue;
			return dlt_error_errno(DLT_EIO, "wait");
		}
		for (long long i = 0; i < count; i++) {
			if (t[i].state == 1 && t[i].pid == pid) {
				running--;
				int frc = finish(&t[i], status);
				if (frc < 0 && rc == 0)
					rc = frc;
			}
		}
	}
	if (rc < 0)
		return rc;
	for (long long i = 0; i < count; i++)
		order[i] = &t[i];
	qsort(order, (size_t)count, sizeof(*order), by_metric);
	DLT_TRY_RC(leaderboard(order, (size_t)count, format));
	fflush(stdout);

	dlt_json_begin(&j);
	dlt_json_str(&j, "event", "end");
	if (!isnan(order[0]->value))
		dlt_json_int(&j, "best", order[0]->id);
	DLT_TRY_RC(journal_write(&j));
	if (isnan(order[0]->value))
		return dlt_error(DLT_EFAIL, "no trial gave %s", s->metric);
	return copy_best(order[0]);
}

static int run(const dlt_search *s, long long jobs, int format)
{
	long long count = dlt_search_count(s);
	trial *t = calloc((size_t)count, sizeof(*t));
	trial **order = calloc((size_t)count, sizeof(*order));
	int rc = t && order ? search_trials(s, jobs, format, t, order, count)
		: dlt_error(DLT_ENOMEM, "out of memory");

	for (long long i = 0; t && i < count; i++)
		dlt_search_free_overrides(t[i].ov, t[i].nov);
	free(t);
	free(order);
	return rc;
}

int main(int argc, char **argv)
{
	const char *config = NULL;
	long long jobs = 1;
	int c, format = FMT_TABLE, rc;
	dlt_search s;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":c:o:j:f:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			config = optarg;
			break;
		case 'o':
			outdir = optarg;
			break;
		case 'j':
			if (dlt_parse_i64(optarg, 1, 1024, &jobs, "-j") < 0)
				return cli_usage(prog, "%s", dlt_errmsg());
			break;
		case 'f':
			if (!strcmp(optarg, "table"))
				format = FMT_TABLE;
			else if (!strcmp(optarg, "csv"))
				format = FMT_CSV;
			else if (!strcmp(optarg, "json"))
				format = FMT_JSON;
			else
				return cli_usage(prog, "--format: '%s' is not table, csv or json", optarg);
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
	if (!config)
		return cli_usage(prog, "missing -c SEARCH (see -h)");
	if (!outdir)
		return cli_usage(prog, "missing -o DIR (see -h)");
	if ((rc = dlt_search_load(&s, config)) < 0)
		return cli_fail(prog, rc);
	search = &s;
	if (s.method == DLT_SEARCH_ASHA) {
		fprintf(stderr, "%s: %s:%d: method asha is not implemented yet\n", prog, s.path,
			s.method_line);
		dlt_search_free(&s);
		return 2;
	}
	rc = run(&s, jobs, format);
	dlt_search_free(&s);
	if (journal >= 0)
		close(journal);
	return rc < 0 ? cli_fail(prog, rc) : 0;
}
