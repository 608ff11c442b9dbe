/* Reading run directories: status, config.yaml, metrics.jsonl. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "runs.h"

static char *join(const char *dir, const char *name)
{
	char *p = dlt_malloc(strlen(dir) + strlen(name) + 2);
	if (p)
		sprintf(p, "%s/%s", dir, name);
	return p;
}

static int is_file(const char *dir, const char *name, struct stat *st)
{
	struct stat s;
	char *p = join(dir, name);
	int ok = p && stat(p, st ? st : &s) == 0 && S_ISREG((st ? st : &s)->st_mode);
	free(p);
	return ok;
}

int dlt_runs_is_run(const char *dir)
{
	return is_file(dir, "metrics.jsonl", NULL);
}

/* ---- finding runs ----------------------------------------------------- */

struct found {
	char **paths;
	size_t n, cap;
	struct stat up[32];	/* the directories above, against link loops */
	int depth;
};

static int walk(struct found *f, const char *dir)
{
	DIR *d;
	struct dirent *e;
	struct stat st;
	int rc = 0;

	if (dlt_runs_is_run(dir)) {
		char *p = dlt_strdup(dir);
		if (!p || dlt_grow(&f->paths, &f->cap, f->n + 1, sizeof(char *)) < 0) {
			free(p);
			return DLT_ENOMEM;
		}
		f->paths[f->n++] = p;
		return 0;
	}
	if (stat(dir, &st) != 0 || f->depth == 32)
		return 0;
	for (int i = 0; i < f->depth; i++)
		if (f->up[i].st_dev == st.st_dev && f->up[i].st_ino == st.st_ino)
			return 0;
	if (!(d = opendir(dir)))
		return 0;	/* unreadable: not ours to judge */
	f->up[f->depth++] = st;
	while (rc == 0 && (e = readdir(d))) {
		char *p;
		if (e->d_name[0] == '.')
			continue;
		if (!(p = join(dir, e->d_name))) {
			rc = DLT_ENOMEM;
			break;
		}
		if (stat(p, &st) == 0 && S_ISDIR(st.st_mode))
			rc = walk(f, p);
		free(p);
	}
	f->depth--;
	closedir(d);
	return rc;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int dlt_runs_find(const char *dir, char ***paths, size_t *n)
{
	struct found f = { .paths = *paths, .n = *n, .cap = *n };
	struct stat st;
	size_t first = *n;
	size_t len = strlen(dir);
	char *top;
	int rc;

	if (stat(dir, &st) != 0)
		return dlt_error_errno(errno == ENOENT || errno == EACCES || errno == ENOTDIR ?
				       DLT_EINPUT : DLT_EIO, "%s", dir);
	if (!S_ISDIR(st.st_mode))
		return dlt_error(DLT_EINPUT, "%s: not a directory", dir);
	while (len > 1 && dir[len - 1] == '/')
		len--;		/* runs/ and runs name the same runs */
	if (!(top = dlt_strdup(dir)))
		return DLT_ENOMEM;
	top[len] = 0;
	rc = walk(&f, top);
	free(top);
	*paths = f.paths;
	*n = f.n;
	if (rc == 0)
		qsort(*paths + first, *n - first, sizeof(char *), cmp_str);
	return rc;
}

/* ---- status ------------------------------------------------------------ */

/* When process pid started (wall clock; 0 if unknown), and whether it is
 * a zombie: killed, and not yet reaped by its parent. */
static double process_start(long long pid, int *zombie)
{
	char path[64], *text = NULL, *p;
	size_t len;
	double btime = 0, ticks = 0;

	*zombie = 0;
	if (dlt_read_file("/proc/stat", 1 << 20, &text, &len) == 0 &&
	    (p = strstr(text, "\nbtime ")))
		btime = strtod(p + 7, NULL);
	free(text);
	text = NULL;
	snprintf(path, sizeof(path), "/proc/%lld/stat", pid);
	if (dlt_read_file(path, 1 << 16, &text, &len) == 0 && (p = strrchr(text, ')'))) {
		/* ") S ...": the state is field 3, starttime field 22 */
		p += 2;
		*zombie = *p == 'Z' || *p == 'X';
		for (int field = 3; field < 22 && p; field++)
			if ((p = strchr(p, ' ')))
				p++;
		if (p)
			ticks = strtod(p, NULL);
	}
	free(text);
	return ticks > 0 && btime > 0 ? btime + ticks / (double)sysconf(_SC_CLK_TCK) : 0;
}

/* Whether the process that wrote "running" at time written is alive: its
 * pid is taken, and not by a process started after that (a pid reused). */
static int alive(long long pid, double written)
{
	double began;
	int zombie;

	if (pid <= 0 || (kill((pid_t)pid, 0) != 0 && errno != EPERM))
		return 0;
	began = process_start(pid, &zombie);
	return !zombie && !(began > 0 && written > 0 && began > written + 2);
}

static void read_status(dlt_runinfo *r)
{
	char *path = join(r->dir, "status"), *text = NULL, host[256] = "";
	const dlt_jval *v;
	dlt_jval j = { 0 };
	size_t len;
	double written = 0;

	strcpy(r->status, "unknown");
	if (!path || dlt_read_file(path, 1 << 16, &text, &len) < 0 ||
	    dlt_json_parse(text, len, &j) < 0 || j.type != DLT_JOBJ)
		goto out;
	if ((v = dlt_jval_get(&j, "status")) && v->type == DLT_JSTR)
		snprintf(r->status, sizeof(r->status), "%s", v->str);
	/* a pid that is no pid is unknown: kill(-1, 0) would ask every process */
	if (!dlt_jval_int(dlt_jval_get(&j, "pid"), 1, INT_MAX, &r->pid))
		r->pid = 0;
	if ((v = dlt_jval_get(&j, "host")) && v->type == DLT_JSTR)
		snprintf(r->host, sizeof(r->host), "%s", v->str);
	if ((v = dlt_jval_get(&j, "slurm_job")) && v->type == DLT_JSTR)
		snprintf(r->slurm_job, sizeof(r->slurm_job), "%s", v->str);
	if ((v = dlt_jval_get(&j, "start")) && v->type == DLT_JNUM)
		r->start = v->num;
	if ((v = dlt_jval_get(&j, "time")) && v->type == DLT_JNUM)
		written = v->num;
	/* a process of another host cannot be asked: it stays "running" */
	gethostname(host, sizeof(host) - 1);
	if (strcmp(r->status, "running") == 0 && strcmp(r->host, host) == 0 &&
	    !alive(r->pid, written))
		strcpy(r->status, "dead");
out:
	dlt_jval_free(&j);
	free(text);
	free(path);
}

/* ---- config.yaml ------------------------------------------------------- */

static int add_kv(dlt_runinfo *r, size_t *cap, const char *key, const char *value)
{
	char *k = dlt_strdup(key), *v = dlt_strdup(value);
	if (!k || !v || dlt_grow(&r->config, cap, r->nconfig + 1, sizeof(dlt_kv)) < 0) {
		free(k);
		free(v);
		return DLT_ENOMEM;
	}
	r->config[r->nconfig++] = (dlt_kv){ k, v };
	return 0;
}

static int flatten(dlt_runinfo *r, size_t *cap, const dlt_node *n, dlt_buf *key)
{
	size_t len = key->len;
	int rc = 0;

	if (n->type == DLT_NODE_SCALAR)
		return add_kv(r, cap, key->data ? key->data : "", n->value ? n->value : "");
	if (n->n == 0)
		return add_kv(r, cap, key->data, n->type == DLT_NODE_MAP ? "{}" : "[]");
	for (size_t i = 0; i < n->n && rc == 0; i++) {
		const dlt_node *c = &n->items[i];
		key->len = len;
		if (n->type == DLT_NODE_MAP)
			rc = dlt_buf_printf(key, "%s%s", len ? "." : "", c->key);
		else
			rc = dlt_buf_printf(key, "%s%zu", len ? "." : "", i);
		if (rc == 0)
			rc = flatten(r, cap, c, key);
	}
	key->len = len;
	if (key->data)
		key->data[len] = 0;
	return rc;
}

static int read_config(dlt_runinfo *r)
{
	char *path = join(r->dir, "config.yaml"), *text = NULL;
	dlt_node root = { 0 };
	dlt_buf key = { 0 };
	size_t len, cap = 0;
	struct stat st;
	const char *epochs;
	int rc;

	if (!path)
		return DLT_ENOMEM;
	if (stat(path, &st) != 0) {
		free(path);
		return 0;	/* a run may lack it; its keys are then absent */
	}
	/* config.yaml is written once, when the run begins: a resumed run
	 * (whose status has the start of the last process) keeps its first */
	if (r->start == 0 || st.st_mtime < r->start)
		r->start = st.st_mtim.tv_sec + st.st_mtim.tv_nsec * 1e-9;
	DLT_TRY(dlt_read_file(path, 1 << 24, &text, &len));
	DLT_TRY(dlt_node_parse(&root, text, len, path));
	DLT_TRY(dlt_buf_append(&key, "", 1));
	key.len = 0;
	if (root.type == DLT_NODE_MAP)
		DLT_TRY(flatten(r, &cap, &root, &key));
	if ((epochs = dlt_runs_config(r, "train.epochs")))
		r->epochs = strtoll(epochs, NULL, 10);
fail:
	dlt_buf_free(&key);
	dlt_node_free(&root);
	free(text);
	free(path);
	return rc;
}

/* ---- metrics.jsonl ----------------------------------------------------- */

static dlt_series *series(dlt_runinfo *r, size_t *cap, const char *name)
{
	dlt_series *s;

	for (size_t i = 0; i < r->nseries; i++)
		if (strcmp(r->series[i].name, name) == 0)
			return &r->series[i];
	if (dlt_grow(&r->series, cap, r->nseries + 1, sizeof(dlt_series)) < 0)
		return NULL;
	s = &r->series[r->nseries];
	memset(s, 0, sizeof(*s));
	if (!(s->name = dlt_strdup(name)))
		return NULL;
	r->nseries++;
	return s;
}

static double num(const dlt_jval *rec, const char *key)
{
	const dlt_jval *v = dlt_jval_get(rec, key);
	return v && v->type == DLT_JNUM ? v->num : NAN;
}

/* Fields of every record that are not metrics. */
static int is_meta(const char *key)
{
	static const char *const meta[] = { "event", "split", "epoch", "step", "time",
		"samples_per_s", "train_time", "startup", NULL };
	for (int i = 0; meta[i]; i++)
		if (strcmp(key, meta[i]) == 0)
			return 1;
	return 0;
}

static int add_record(dlt_runinfo *r, size_t *cap, const dlt_jval *rec)
{
	const dlt_jval *event = dlt_jval_get(rec, "event"), *split;
	dlt_point at = { num(rec, "step"), num(rec, "epoch"), num(rec, "time"), 0 };
	const char *prefix = "";
	int done;

	if (!event || event->type != DLT_JSTR)
		return 0;
	done = strcmp(event->str, "done") == 0;
	if (strcmp(event->str, "train") == 0)
		prefix = "train";
	else if (strcmp(event->str, "eval") == 0 &&
		 (split = dlt_jval_get(rec, "split")) && split->type == DLT_JSTR)
		prefix = split->str;
	else if (!done)
		return 0;	/* resume, and events to come */
	/* no run reaches 2^53 steps; a larger number would not convert */
	if (at.step > r->step && at.step <= 0x1p53)
		r->step = (long long)at.step;
	if (at.epoch > r->epoch && at.epoch <= 0x1p53)
		r->epoch = (long long)at.epoch;
	if (at.time > 0)
		r->duration = at.time;
	if (!isnan(num(rec, "samples_per_s")) && (done || strcmp(prefix, "train") == 0))
		r->samples_per_s = num(rec, "samples_per_s");
	for (size_t i = 0; i < rec->n; i++) {
		const dlt_jval *f = &rec->items[i];
		char name[128];
		dlt_series *s;
		int len;

		if (f->type != DLT_JNUM || is_meta(f->key))
			continue;
		/* done repeats the last test evaluation as test.acc: a metric
		 * of its own only when there was none */
		if (done) {
			if (!strchr(f->key, '.') || dlt_runs_series(r, f->key))
				continue;
			len = snprintf(name, sizeof(name), "%s", f->key);
		} else {
			len = snprintf(name, sizeof(name), "%s.%s", prefix, f->key);
		}
		/* no metric dlt writes has such a name; cut short, it could
		 * lose its dot or become another's */
		if (len >= (int)sizeof(name))
			continue;
		if (!(s = series(r, cap, name)) ||
		    dlt_grow(&s->p, &s->cap, s->n + 1, sizeof(dlt_point)) < 0)
			return DLT_ENOMEM;
		at.value = f->num;
		s->p[s->n++] = at;
	}
	return 0;
}

/* Train records come every log_every steps within an epoch: with the
 * steps of an epoch known (the last step of epoch 1, once epoch 2 began),
 * each point's epoch becomes step / steps-per-epoch. */
static void fractional_epochs(dlt_runinfo *r)
{
	double per = 0;
	int later = 0;

	for (size_t i = 0; i < r->nseries; i++)
		for (size_t k = 0; k < r->series[i].n; k++) {
			const dlt_point *p = &r->series[i].p[k];
			if (p->epoch == 1 && p->step > per)
				per = p->step;
			later |= p->epoch > 1;
		}
	if (!later || per <= 0)
		return;
	for (size_t i = 0; i < r->nseries; i++)
		for (size_t k = 0; k < r->series[i].n; k++)
			r->series[i].p[k].epoch = r->series[i].p[k].step / per;
}

static int read_metrics(dlt_runinfo *r)
{
	char *path = join(r->dir, "metrics.jsonl"), *text = NULL;
	size_t len, cap = 0, line = 0;
	int rc = 0;

	if (!path)
		return DLT_ENOMEM;
	DLT_TRY(dlt_read_file(path, 0, &text, &len));
	for (size_t i = 0; i < len; i++) {
		size_t start = i;
		dlt_jval rec;

		while (i < len && text[i] != '\n')
			i++;
		if (i == len)
			break;		/* a line cut short by a kill */
		line++;
		if (i == start)
			continue;
		if (dlt_json_parse(text + start, i - start, &rec) < 0) {
			rc = dlt_error_prefix(DLT_EINPUT, "%s:%zu", path, line);
			goto fail;
		}
		rc = rec.type == DLT_JOBJ ? add_record(r, &cap, &rec) : 0;
		dlt_jval_free(&rec);
		if (rc < 0)
			goto fail;
	}
	fractional_epochs(r);
fail:
	free(text);
	free(path);
	return rc;
}

int dlt_runs_load(dlt_runinfo *r, const char *dir)
{
	int rc;

	memset(r, 0, sizeof(*r));
	if (!(r->dir = dlt_strdup(dir)))
		return DLT_ENOMEM;
	if (!dlt_runs_is_run(dir)) {
		struct stat st;
		rc = stat(dir, &st) != 0 ? dlt_error_errno(DLT_EINPUT, "%s", dir) :
			dlt_error(DLT_EINPUT, "%s: not a run directory (no metrics.jsonl)", dir);
		goto fail;
	}
	read_status(r);
	DLT_TRY(read_config(r));
	DLT_TRY(read_metrics(r));
	return 0;
fail:
	dlt_runs_free(r);
	return rc;
}

void dlt_runs_free(dlt_runinfo *r)
{
	for (size_t i = 0; i < r->nconfig; i++) {
		free(r->config[i].key);
		free(r->config[i].value);
	}
	for (size_t i = 0; i < r->nseries; i++) {
		free(r->series[i].name);
		free(r->series[i].p);
	}
	free(r->config);
	free(r->series);
	free(r->dir);
	memset(r, 0, sizeof(*r));
}

/* ---- questions about runs --------------------------------------------- */

char *dlt_runs_metric_name(const char *metric)
{
	char *p;

	if (strchr(metric, '.'))
		return dlt_strdup(metric);
	if ((p = dlt_malloc(strlen(metric) + 7)))
		sprintf(p, "train.%s", metric);
	return p;
}

const dlt_series *dlt_runs_series(const dlt_runinfo *r, const char *metric)
{
	const char *dot = strchr(metric, '.');

	for (size_t i = 0; i < r->nseries; i++) {
		const char *name = r->series[i].name;
		if (dot ? strcmp(name, metric) == 0 :
		    strncmp(name, "train.", 6) == 0 && strcmp(name + 6, metric) == 0)
			return &r->series[i];
	}
	return NULL;
}

const char *dlt_runs_config(const dlt_runinfo *r, const char *key)
{
	for (size_t i = 0; i < r->nconfig; i++)
		if (strcmp(r->config[i].key, key) == 0)
			return r->config[i].value;
	return NULL;
}

double dlt_runs_best_value(const dlt_series *s, int mode)
{
	double best = NAN;

	for (size_t i = 0; s && i < s->n; i++)
		if (isnan(best) || (mode > 0 ? s->p[i].value > best : s->p[i].value < best))
			best = s->p[i].value;
	return best;
}

const char *dlt_runs_main_metric(const dlt_runinfo *runs, size_t n)
{
	/* language models record bpb (and a token accuracy, which says
	 * less), classifiers and multi-label runs acc, regressions rmse;
	 * every run records loss */
	static const char *const order[] = { "test.bpb", "val.bpb", "test.acc", "val.acc",
		"test.rmse", "val.rmse", "test.f1", "val.f1", NULL };

	for (int k = 0; order[k]; k++)
		for (size_t i = 0; i < n; i++)
			if (dlt_runs_series(&runs[i], order[k]))
				return order[k];
	return "train.loss";
}

/* ---- choosing and ordering runs ---------------------------------------- */

int dlt_runs_where_check(const char *w)
{
	if (!strchr(w, '=') || w[0] == '=' || w[0] == '!')
		return dlt_error(DLT_EINPUT, "'%s' is not KEY=VALUE or KEY!=VALUE", w);
	return 0;
}

/* The next item of the comma-separated list *list into item; advances
 * *list. */
static const char *next_item(const char **list, char *item, size_t size)
{
	size_t n = strcspn(*list, ",");

	snprintf(item, size, "%.*s", (int)n, *list);
	*list += n + ((*list)[n] != 0);
	return item;
}

static int same_value(const char *a, const char *b)
{
	char *end_a, *end_b;
	double x = strtod(a, &end_a), y = strtod(b, &end_b);

	if (*a && *b && !*end_a && !*end_b)
		return x == y;		/* 1e-2 is 0.01 */
	return strcmp(a, b) == 0;
}

static int matches(const dlt_runinfo *r, const char *const *where, size_t nwhere,
		   const char *status)
{
	if (status) {
		const char *s = status;
		char one[32] = "";
		while (*s && strcmp(next_item(&s, one, sizeof(one)), r->status))
			;
		if (strcmp(one, r->status))
			return 0;
	}
	for (size_t i = 0; i < nwhere; i++) {
		const char *w = where[i], *eq = strchr(w, '=');
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

int dlt_runs_filter(dlt_runinfo *runs, size_t *n, const char *const *where, size_t nwhere,
		    const char *status)
{
	size_t kept = 0;

	for (size_t i = 0; i < nwhere; i++)
		DLT_TRY_RC(dlt_runs_where_check(where[i]));
	for (size_t i = 0; i < nwhere && *n; i++) {
		char key[256];
		size_t k = 0;
		snprintf(key, sizeof(key), "%.*s", (int)strcspn(where[i], "!="), where[i]);
		while (k < *n && !dlt_runs_config(&runs[k], key))
			k++;
		if (k == *n)
			return dlt_error(DLT_EINPUT, "no run has config key '%s'", key);
	}
	for (size_t i = 0; i < *n; i++) {
		if (matches(&runs[i], where, nwhere, status))
			runs[kept++] = runs[i];
		else
			dlt_runs_free(&runs[i]);
	}
	*n = kept;
	return 0;
}

static const char *const properties[] = { "run", "status", "start", "duration", "epochs",
	"samples/s", "samples_per_s", NULL };

int dlt_runs_is_property(const char *key)
{
	for (int i = 0; properties[i]; i++)
		if (strcmp(key, properties[i]) == 0)
			return 1;
	return 0;
}

struct order {
	const char *key;
	int mode;		/* of a metric */
	int reverse;
};

static double sort_value(const dlt_runinfo *r, const struct order *o)
{
	if (strcmp(o->key, "start") == 0)
		return r->start;
	if (strcmp(o->key, "duration") == 0)
		return r->duration;
	if (strcmp(o->key, "epochs") == 0)
		return (double)r->epoch;
	if (strcmp(o->key, "samples/s") == 0 || strcmp(o->key, "samples_per_s") == 0)
		return r->samples_per_s;
	/* a metric: best first, runs without it last */
	return -o->mode * dlt_runs_best_value(dlt_runs_series(r, o->key), o->mode);
}

static int cmp_runs(const void *pa, const void *pb, void *ctx)
{
	const dlt_runinfo *a = pa, *b = pb;
	const struct order *o = ctx;
	int c;

	if (strcmp(o->key, "run") == 0)
		c = strcmp(a->dir, b->dir);
	else if (strcmp(o->key, "status") == 0)
		c = strcmp(a->status, b->status);
	else {
		double x = sort_value(a, o), y = sort_value(b, o);
		if (isnan(x) || isnan(y))
			return isnan(x) - isnan(y);
		c = (x > y) - (x < y);
	}
	c = o->reverse ? -c : c;
	return c ? c : strcmp(a->dir, b->dir);
}

void dlt_runs_sort(dlt_runinfo *runs, size_t n, const char *key, int reverse)
{
	struct order o = { key, key ? dlt_metric_mode(key) : 0, reverse };

	if (key) {
		qsort_r(runs, n, sizeof(*runs), cmp_runs, &o);
		return;
	}
	for (size_t i = 0; reverse && i < n / 2; i++) {
		dlt_runinfo t = runs[i];
		runs[i] = runs[n - 1 - i];
		runs[n - 1 - i] = t;
	}
}

const dlt_runinfo *dlt_runs_best(const dlt_runinfo *runs, size_t n, const char *metric,
				 int mode)
{
	const dlt_runinfo *top = NULL;
	double top_v = NAN;

	for (size_t i = 0; i < n; i++) {
		double v = dlt_runs_best_value(dlt_runs_series(&runs[i], metric), mode);
		if (!isnan(v) && (!top || (mode > 0 ? v > top_v : v < top_v))) {
			top = &runs[i];
			top_v = v;
		}
	}
	return top;
}

int dlt_runs_checkpoint(const dlt_runinfo *r, char **path)
{
	static const char *const fixed[] = { "ckpt/best.dlt", "model.dlt" };
	char *ckpt, newest[256] = "";
	struct dirent *e;
	DIR *d;

	for (int i = 0; i < 2; i++)
		if (is_file(r->dir, fixed[i], NULL))
			return (*path = join(r->dir, fixed[i])) ? 0 : DLT_ENOMEM;
	/* step-%08lld.dlt: the newest has the greatest name */
	if (!(ckpt = join(r->dir, "ckpt")))
		return DLT_ENOMEM;
	if ((d = opendir(ckpt))) {
		while ((e = readdir(d))) {
			size_t n = strlen(e->d_name);
			if (strncmp(e->d_name, "step-", 5) == 0 && n > 9 && n < sizeof(newest) &&
			    strcmp(e->d_name + n - 4, ".dlt") == 0 && strcmp(e->d_name, newest) > 0)
				strcpy(newest, e->d_name);
		}
		closedir(d);
	}
	*path = newest[0] ? join(ckpt, newest) : NULL;
	free(ckpt);
	if (newest[0] && !*path)
		return DLT_ENOMEM;
	return *path ? 0 : dlt_error(DLT_EFAIL, "%s: no checkpoint (ckpt/best.dlt, model.dlt, "
				     "ckpt/step-*.dlt)", r->dir);
}
