/* The scheduler of a search: which trial trains to which budget and when,
 * over a launcher, with a journal from which a killed search goes on.  A
 * budget counts epochs, or optimiser steps (train.steps) for token data
 * (min_steps, max_steps); "epochs" below is either.
 *
 * ASHA's decisions are made as `parallel` virtual workers (the search
 * file's) would make them on a clock that counts epochs: a job of e
 * epochs started at virtual time t ends at t + e, and the decision a
 * worker makes at t sees the results of exactly the jobs that end by t,
 * waiting for those that are not in yet and ignoring those that came in
 * early.  So the decisions, and the leaderboard, follow from the search
 * file and its seed alone: not from -j, the machine's speed or which
 * trial finished first.  What that costs is a slot left idle while the
 * result its decision needs is still training, and every slot beyond
 * `parallel`.  Grid and random decide nothing from results: each free
 * slot starts the next trial.
 *
 * The journal (journal.jsonl, one JSON object a line, fsynced before the
 * decision acts) holds every decision and result.  A resumed search makes
 * the same decisions again, checks them against the journal, takes the
 * results it finds there and runs only what was interrupted, from the
 * trial's checkpoint. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "runs/runs.h"
#include "search/search.h"

#define MAX_RUNGS 32
#define TAIL_LINES 5
/* how long a resumed search waits for a trial of the killed searcher to
 * checkpoint and exit */
#define ORPHAN_WAIT_S 60

enum { JOB_PENDING, JOB_RUNNING, JOB_DONE, JOB_FAILED };

/* One dlt-train run of a trial up to the budget of a rung. */
typedef struct job {
	long long trial;
	int rung;
	long long vstart, vend;	/* virtual time, in epochs (asha) */
	int state;
	int slot;
	long long id;		/* the launcher's, while running */
	int attempt;
	int epochs;		/* trained, when it ended */
	double value;
	int exit;
	int replayed;		/* decided by the searcher before a resume */
	long long old_pid;	/* that searcher's process for it, to outlive */
	long long old_jobid;	/* that searcher's batch job for it, to adopt */
} job;

/* A job as the journal has it. */
typedef struct replayed {
	long long trial;
	int rung;
	int finished, failed;
	double value;
	int exit, epochs, attempt;
	long long pid, jobid;
	char *tail;
} replayed;

struct dlt_search_run {
	const dlt_search *s;
	char *dir;
	long long slots;
	int retries, keep_checkpoints;
	char *const *slot_gpus;
	int threads, gpus_per_trial;
	const char *trainer;
	char *launcher, *sbatch_args;	/* as the journal has them */
	char *extra[4];		/* overrides of every new trial besides its params */
	size_t nextra;
	dlt_trial *trials;
	long long count, started;
	int rungs[MAX_RUNGS], nrungs;
	job *jobs;
	size_t njobs, capjobs;
	long long *vfree;	/* each virtual worker's next decision; LLONG_MAX: none */
	int all_decided;
	long long *slot_job;	/* -1: free */
	long long running;
	int journal;
	replayed *rep;
	size_t nrep, caprep;
	int rep_end;
	char *rep_config, *rep_hash;
	char *rep_launcher, *rep_sbatch_args;
	long long rep_jobs;
	int rep_retries;
	const dlt_trial **order;
	int steps;		/* budgets count optimiser steps, not epochs */
};

/* ---- small helpers ---- */

const char *dlt_trial_value(const char *assignment)
{
	return strchr(assignment, '=') + 1;
}

const char *dlt_trial_state_name(int state)
{
	static const char *const names[] = { "waiting", "running", "paused", "done", "stopped",
					     "failed" };
	return state >= 0 && state <= DLT_TRIAL_FAILED ? names[state] : "?";
}

void dlt_trial_json_params(dlt_json *j, const char *key, const dlt_trial *t)
{
	dlt_json_object_begin(j, key);
	for (size_t i = 0; i < t->nov; i++) {
		const char *v = dlt_trial_value(t->ov[i]);
		char k[256];
		dlt_jval jv;
		int num = dlt_json_parse(v, strlen(v), &jv) == 0 && jv.type == DLT_JNUM;
		if (num)
			dlt_jval_free(&jv);
		snprintf(k, sizeof(k), "%.*s", (int)(v - 1 - t->ov[i]), t->ov[i]);
		if (num)
			dlt_json_raw(j, k, v);
		else
			dlt_json_str(j, k, v);
	}
	dlt_json_end(j);
}

/* A file of a trial: fmt names it with the trial's number. */
static char *path_of(const dlt_search_run *r, const char *fmt, long long trial)
{
	dlt_buf b = { 0 };
	if (dlt_buf_printf(&b, "%s/", r->dir) < 0 || dlt_buf_printf(&b, fmt, trial) < 0)
		return NULL;
	return b.data;
}

/* A file of the search directory. */
static char *dir_file(const dlt_search_run *r, const char *name)
{
	dlt_buf b = { 0 };
	if (dlt_buf_printf(&b, "%s/%s", r->dir, name) < 0)
		return NULL;
	return b.data;
}

static int is_asha(const dlt_search_run *r)
{
	return r->s->method == DLT_SEARCH_ASHA;
}

/* Epochs a job of rung k trains: from the budget before it to its own. */
static int cost(const dlt_search_run *r, int k)
{
	return r->rungs[k] - (k ? r->rungs[k - 1] : 0);
}

/* One line of the journal, on disk before the decision it records acts. */
static int journal_write(dlt_search_run *r, dlt_json *j)
{
	int rc = 0;

	dlt_json_num(j, "time", dlt_wall());
	dlt_json_end(j);
	if (dlt_json_ok(j) < 0 || dlt_buf_append(&j->buf, "\n", 1) < 0)
		rc = DLT_ENOMEM;
	else if (write(r->journal, j->buf.data, j->buf.len) != (ssize_t)j->buf.len ||
		 fsync(r->journal) < 0)
		rc = dlt_error_errno(DLT_EIO, "%s/journal.jsonl", r->dir);
	dlt_json_free(j);
	return rc;
}

/* The last lines of a trial's log, for the journal and the leaderboard. */
static char *log_tail(const dlt_search_run *r, long long trial)
{
	char *path = path_of(r, "logs/%03lld.log", trial), *text = NULL, *p;
	size_t len = 0;
	int lines = 0;

	if (!path || dlt_read_file(path, 0, &text, &len) < 0) {
		free(path);
		return dlt_strdup("");
	}
	free(path);
	while (len && text[len - 1] == '\n')
		text[--len] = 0;
	for (p = text + len; p > text; p--)
		if (p[-1] == '\n' && ++lines == TAIL_LINES)
			break;
	p = dlt_strdup(p);
	free(text);
	return p;
}

/* ---- setting up ---- */

static int rungs_of(dlt_search_run *r)
{
	const dlt_search *s = r->s;
	dlt_config c;

	if (s->method != DLT_SEARCH_ASHA) {
		int rc = dlt_config_load(&c, s->base, r->extra, (int)r->nextra);
		if (rc < 0)
			return dlt_error_prefix(rc, "%s:%d: base", s->path, s->base_line);
		/* token data trains train.steps */
		r->steps = c.train.steps > 0;
		r->rungs[0] = r->steps ? (int)c.train.steps : c.train.epochs;
		r->nrungs = 1;
		dlt_config_free(&c);
		return 0;
	}
	r->nrungs = 0;
	r->steps = s->steps;
	for (long long b = s->min_budget; r->nrungs < MAX_RUNGS - 1; b *= s->eta) {
		if (b >= s->max_budget)
			break;
		r->rungs[r->nrungs++] = (int)b;
	}
	r->rungs[r->nrungs++] = s->max_budget;
	return 0;
}

static int add_extra(dlt_search_run *r, const char *key, long long v)
{
	dlt_buf b = { 0 };
	if (dlt_buf_printf(&b, "%s=%lld", key, v) < 0)
		return DLT_ENOMEM;
	r->extra[r->nextra++] = b.data;
	return 0;
}

static int add_extra_text(dlt_search_run *r, const char *assignment)
{
	if (!(r->extra[r->nextra] = dlt_strdup(assignment)))
		return DLT_ENOMEM;
	r->nextra++;
	return 0;
}

/* The run without journal: trials, rungs, slots. */
static int setup(dlt_search_run **out, const dlt_search *s, const char *dir,
		 const dlt_search_opts *o, long long slots, int retries)
{
	dlt_search_run *r = dlt_calloc(1, sizeof(*r));
	int rc;

	*out = r;
	if (!r)
		return DLT_ENOMEM;
	r->s = s;
	r->journal = -1;
	r->slots = slots;
	r->retries = retries;
	r->keep_checkpoints = o->keep_checkpoints;
	r->slot_gpus = o->slot_gpus;
	r->gpus_per_trial = o->gpus_per_trial;
	r->trainer = o->trainer;
	r->threads = o->threads / slots > 0 ? (int)(o->threads / slots) : 1;
	r->count = dlt_search_count(s);
	if (!(r->dir = dlt_strdup(dir)))
		return DLT_ENOMEM;
	/* a trial's GPU is the first it sees (CUDA_VISIBLE_DEVICES); CPU
	 * trials share the cores */
	if (o->slot_gpus || o->gpus_per_trial > 0)
		DLT_TRY_RC(add_extra_text(r, "device=cuda"));
	else
		DLT_TRY_RC(add_extra(r, "train.threads", r->threads));
	if (s->method == DLT_SEARCH_ASHA) {
		DLT_TRY_RC(add_extra(r, s->steps ? "train.steps" : "train.epochs", s->min_budget));
		/* each rung's budget ends on a checkpoint that a promotion resumes
		 * (token data: its steps are one pass, which ends an epoch) */
		DLT_TRY_RC(add_extra_text(r, "checkpoint.every=epoch"));
	}
	DLT_TRY_RC(rungs_of(r));
	if (!(r->trials = dlt_calloc((size_t)r->count, sizeof(*r->trials))) ||
	    !(r->order = dlt_calloc((size_t)r->count, sizeof(*r->order))) ||
	    !(r->slot_job = dlt_calloc((size_t)slots, sizeof(*r->slot_job))) ||
	    !(r->vfree = dlt_calloc((size_t)s->parallel, sizeof(*r->vfree))))
		return DLT_ENOMEM;
	for (long long i = 0; i < slots; i++)
		r->slot_job[i] = -1;
	for (long long i = 0; i < r->count; i++) {
		dlt_trial *t = &r->trials[i];
		t->id = i;
		t->rung = -1;
		t->value = NAN;
		DLT_TRY(dlt_search_trial(s, i, &t->ov, &t->nov));
	}
	return 0;
fail:
	return rc;
}

/* *name and *args, freed, become copies of name and args (NULL: none). */
static int copy_launcher(char **name, char **args, const char *new_name, const char *new_args)
{
	free(*name);
	free(*args);
	*name = *args = NULL;
	if ((new_name && !(*name = dlt_strdup(new_name))) ||
	    (new_args && !(*args = dlt_strdup(new_args))))
		return DLT_ENOMEM;
	return 0;
}

/* What runs the trials: name NULL is the local launcher. */
static int set_launcher(dlt_search_run *r, const char *name, const char *sbatch_args)
{
	return copy_launcher(&r->launcher, &r->sbatch_args, name ? name : "local", sbatch_args);
}

static void journal_launcher(const dlt_search_run *r, dlt_json *j)
{
	dlt_json_str(j, "launcher", r->launcher);
	if (r->sbatch_args)
		dlt_json_str(j, "sbatch_args", r->sbatch_args);
}

void dlt_search_launcher(const dlt_search_run *r, const char **name, const char **sbatch_args)
{
	*name = r->launcher;
	*sbatch_args = r->sbatch_args;
}

static int lock_journal(dlt_search_run *r)
{
	if (flock(r->journal, LOCK_EX | LOCK_NB) < 0)
		return errno == EWOULDBLOCK
			? dlt_error(DLT_EINPUT, "%s: a searcher runs there already", r->dir)
			: dlt_error_errno(DLT_EIO, "%s/journal.jsonl", r->dir);
	return 0;
}

/* xxh64 of the search file, so a resume finds out that it changed. */
static int file_hash(const char *path, char out[17])
{
	char *text;
	size_t len;
	DLT_TRY_RC(dlt_read_file(path, 1 << 20, &text, &len));
	snprintf(out, 17, "%016llx", (unsigned long long)dlt_xxh64(text, len, 0));
	free(text);
	return 0;
}

int dlt_search_begin(dlt_search_run **out, const dlt_search *s, const char *dir,
		     const dlt_search_opts *o)
{
	static const char *const methods[] = { "", "grid", "random", "asha" };
	char *path = NULL, real[PATH_MAX], hash[17];
	dlt_search_run *r;
	dlt_json j;
	int rc;

	DLT_TRY(setup(out, s, dir, o, o->slots, o->retries));
	r = *out;
	DLT_TRY(set_launcher(r, o->launcher, o->sbatch_args));
	DLT_TRY(dlt_search_check(s, r->extra, r->nextra));
	if (!realpath(s->path, real)) {
		rc = dlt_error_errno(DLT_EIO, "%s", s->path);
		goto fail;
	}
	DLT_TRY(file_hash(s->path, hash));
	if (!(path = dir_file(r, "trials")))
		goto nomem;
	DLT_TRY(dlt_mkdir_p(path));
	free(path);
	if (!(path = dir_file(r, "logs")))
		goto nomem;
	DLT_TRY(dlt_mkdir_p(path));
	free(path);
	if (!(path = dir_file(r, "journal.jsonl")))
		goto nomem;
	r->journal = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND, 0666);
	if (r->journal < 0) {
		rc = errno == EEXIST ? dlt_error(DLT_EINPUT, "%s: holds a search already", dir)
				     : dlt_error_errno(DLT_EIO, "%s", path);
		goto fail;
	}
	DLT_TRY(lock_journal(r));
	dlt_json_begin(&j);
	dlt_json_str(&j, "event", "search");
	dlt_json_str(&j, "config", real);
	dlt_json_str(&j, "hash", hash);
	dlt_json_str(&j, "base", s->base);
	dlt_json_str(&j, "metric", s->metric);
	dlt_json_str(&j, "mode", s->mode > 0 ? "max" : "min");
	dlt_json_str(&j, "method", methods[s->method]);
	dlt_json_int(&j, "trials", r->count);
	dlt_json_int(&j, "seed", s->seed);
	dlt_json_int(&j, "jobs", r->slots);
	dlt_json_int(&j, "retries", r->retries);
	journal_launcher(r, &j);
	if (is_asha(r)) {
		dlt_json_int(&j, "eta", s->eta);
		dlt_json_int(&j, "parallel", s->parallel);
		dlt_json_array_begin(&j, "rungs");
		for (int k = 0; k < r->nrungs; k++)
			dlt_json_int(&j, NULL, r->rungs[k]);
		dlt_json_array_end(&j);
	}
	DLT_TRY(journal_write(r, &j));
	rc = 0;
fail:
	free(path);
	return rc;
nomem:
	rc = DLT_ENOMEM;
	goto fail;
}

/* ---- the journal read back ---- */

static double num_of(const dlt_jval *v, const char *key, double none)
{
	const dlt_jval *x = dlt_jval_get(v, key);
	return x && x->type == DLT_JNUM ? x->num : none;
}

static const char *str_of(const dlt_jval *v, const char *key)
{
	const dlt_jval *x = dlt_jval_get(v, key);
	return x && x->type == DLT_JSTR ? x->str : NULL;
}

/* A whole number of an event, none when absent or not a number.  One
 * outside [lo, hi] is a damaged journal: converting 1e300 to an integer is
 * undefined, and a count like jobs sizes allocations and divides. */
static int int_of(const dlt_jval *v, const char *key, long long lo, long long hi,
		  long long none, long long *out, const char *where)
{
	const dlt_jval *x = dlt_jval_get(v, key);

	*out = none;
	if (!x || x->type != DLT_JNUM || dlt_jval_int(x, lo, hi, out))
		return 0;
	return dlt_error(DLT_EINPUT, "%s: %s %g: not a whole number from %lld to %lld", where,
			 key, x->num, lo, hi);
}

/* The replayed job of an event, checked to be one the journal decided. */
static replayed *rep_job(dlt_search_run *r, const dlt_jval *v)
{
	double d = num_of(v, "job", -1);
	return d >= 0 && d < (double)r->nrep ? &r->rep[(size_t)d] : NULL;
}

/* The launcher a search or resume event names; the last one counts. */
static int read_launcher(dlt_search_run *r, const dlt_jval *v)
{
	return copy_launcher(&r->rep_launcher, &r->rep_sbatch_args, str_of(v, "launcher"),
			     str_of(v, "sbatch_args"));
}

static int read_event(dlt_search_run *r, const dlt_jval *v, const char *where)
{
	const char *ev = str_of(v, "event"), *s;
	replayed *p;
	long long n;

	if (!ev)
		return dlt_error(DLT_EINPUT, "%s: no event", where);
	if (!strcmp(ev, "search")) {
		/* a search begins a journal once: a second would leak the first's
		 * config and hash, and say nothing a resume could trust */
		if (r->rep_config)
			return dlt_error(DLT_EINPUT, "%s: a second search event", where);
		if (!(s = str_of(v, "config")) || !(r->rep_config = dlt_strdup(s)) ||
		    !(s = str_of(v, "hash")) || !(r->rep_hash = dlt_strdup(s)))
			return dlt_error(DLT_EINPUT, "%s: a search event without config or hash",
					 where);
		/* the ranges of -j and --retries */
		DLT_TRY_RC(int_of(v, "jobs", 1, 1024, 1, &r->rep_jobs, where));
		DLT_TRY_RC(int_of(v, "retries", 0, 100, 0, &n, where));
		r->rep_retries = (int)n;
		DLT_TRY_RC(read_launcher(r, v));
	} else if (!strcmp(ev, "resume")) {
		DLT_TRY_RC(read_launcher(r, v));
	} else if (!strcmp(ev, "start") || !strcmp(ev, "promote")) {
		if (num_of(v, "job", -1) != (double)r->nrep)
			return dlt_error(DLT_EINPUT, "%s: job %g out of order", where,
					 num_of(v, "job", -1));
		DLT_TRY_RC(dlt_grow(&r->rep, &r->caprep, r->nrep + 1, sizeof(*r->rep)));
		p = &r->rep[r->nrep++];
		memset(p, 0, sizeof(*p));
		/* which trial and rung exist is checked against the search */
		DLT_TRY_RC(int_of(v, "trial", -1, 1LL << 53, -1, &p->trial, where));
		DLT_TRY_RC(int_of(v, "rung", 0, MAX_RUNGS - 1, 0, &n, where));
		p->rung = (int)n;
	} else if (!strcmp(ev, "launch") || !strcmp(ev, "adopt") || !strcmp(ev, "retry") ||
		   !strcmp(ev, "finish")) {
		if (!(p = rep_job(r, v)))
			return dlt_error(DLT_EINPUT, "%s: %s of a job not started", where, ev);
		if (!strcmp(ev, "launch") || !strcmp(ev, "adopt")) {
			/* a pid goes to kill(2) as a pid_t */
			DLT_TRY_RC(int_of(v, "pid", 0, INT_MAX, 0, &p->pid, where));
			DLT_TRY_RC(int_of(v, "jobid", 0, 1LL << 53, 0, &p->jobid, where));
		} else if (!strcmp(ev, "retry")) {
			DLT_TRY_RC(int_of(v, "attempt", 0, 100, 0, &n, where));
			p->attempt = (int)n;
		} else {
			p->finished = 1;
			p->failed = (s = str_of(v, "status")) && !strcmp(s, "failed");
			p->value = num_of(v, "value", NAN);
			DLT_TRY_RC(int_of(v, "exit", INT_MIN, INT_MAX, 0, &n, where));
			p->exit = (int)n;
			/* "steps" in a search whose budgets count steps */
			DLT_TRY_RC(int_of(v, dlt_jval_get(v, "steps") ? "steps" : "epochs", 0,
					  INT_MAX, 0, &n, where));
			p->epochs = (int)n;
			/* a job finished twice, the second time without a log, kept
			 * the freed tail: freed again with the replay */
			free(p->tail);
			p->tail = NULL;
			if ((s = str_of(v, "log")) && !(p->tail = dlt_strdup(s)))
				return DLT_ENOMEM;
		}
	} else if (!strcmp(ev, "end")) {
		r->rep_end = 1;
	}
	return 0;
}

/* Reads dir/journal.jsonl into r's replay; a last line cut short by a
 * kill is left out. */
static int read_journal(dlt_search_run *r, const char *path)
{
	char *text = NULL, where[PATH_MAX + 32];
	size_t len, line = 0;
	int rc = 0;

	DLT_TRY_RC(dlt_read_file(path, 0, &text, &len));
	for (size_t i = 0; i < len && rc == 0;) {
		size_t end = i;
		dlt_jval v;
		while (end < len && text[end] != '\n')
			end++;
		if (end == len)
			break;
		line++;
		snprintf(where, sizeof(where), "%s:%zu", path, line);
		if ((rc = dlt_json_parse(text + i, end - i, &v)) < 0) {
			rc = dlt_error_prefix(rc, "%s", where);
			break;
		}
		rc = read_event(r, &v, where);
		dlt_jval_free(&v);
		i = end + 1;
	}
	free(text);
	if (rc == 0 && !r->rep_config)
		rc = dlt_error(DLT_EINPUT, "%s: no search event", path);
	return rc;
}

/* The journal's search file loaded into s, checked against its hash. */
static int load_journal(dlt_search_run *head, dlt_search *s, const char *dir, char **path)
{
	char hash[17];

	head->dir = (char *)dir;
	if (!(*path = dir_file(head, "journal.jsonl")))
		return DLT_ENOMEM;
	DLT_TRY_RC(read_journal(head, *path));
	DLT_TRY_RC(dlt_search_load(s, head->rep_config));
	if (file_hash(head->rep_config, hash) < 0 || strcmp(hash, head->rep_hash))
		return dlt_error(DLT_EINPUT, "%s: changed since the search in %s began",
				 head->rep_config, dir);
	return 0;
}

static void free_replay(dlt_search_run *r)
{
	for (size_t i = 0; i < r->nrep; i++)
		free(r->rep[i].tail);
	free(r->rep);
	free(r->rep_config);
	free(r->rep_hash);
	free(r->rep_launcher);
	free(r->rep_sbatch_args);
}

/* Opens dir's journal: a run with the replay of head moved into it. */
static int open_journal(dlt_search_run **out, dlt_search *s, const char *dir,
			const dlt_search_opts *o, int writing)
{
	dlt_search_run head = { .journal = -1 };
	char *path = NULL;
	int rc;

	*out = NULL;
	memset(s, 0, sizeof(*s));
	if ((rc = load_journal(&head, s, dir, &path)) < 0) {
		free_replay(&head);
		free(path);
		return rc;
	}
	rc = setup(out, s, dir, o, o->slots > 0 ? o->slots : head.rep_jobs,
		   o->retries >= 0 ? o->retries : head.rep_retries);
	if (*out) {
		(*out)->rep = head.rep;
		(*out)->nrep = head.nrep;
		(*out)->rep_end = head.rep_end;
		(*out)->rep_config = head.rep_config;
		(*out)->rep_hash = head.rep_hash;
		(*out)->rep_launcher = head.rep_launcher;
		(*out)->rep_sbatch_args = head.rep_sbatch_args;
	} else {
		free_replay(&head);
	}
	if (rc == 0 && ((*out)->journal = open(path, writing ? O_WRONLY | O_APPEND : O_RDONLY)) < 0)
		rc = dlt_error_errno(DLT_EIO, "%s", path);
	free(path);
	return rc;
}

int dlt_search_reopen(dlt_search_run **out, dlt_search *s, const char *dir,
		      const dlt_search_opts *o)
{
	dlt_json j;

	DLT_TRY_RC(open_journal(out, s, dir, o, 1));
	DLT_TRY_RC(lock_journal(*out));
	if (o->launcher)
		DLT_TRY_RC(set_launcher(*out, o->launcher, o->sbatch_args));
	else
		DLT_TRY_RC(set_launcher(*out, (*out)->rep_launcher,
					o->sbatch_args ? o->sbatch_args : (*out)->rep_sbatch_args));
	dlt_json_begin(&j);
	dlt_json_str(&j, "event", "resume");
	dlt_json_int(&j, "pid", getpid());
	dlt_json_int(&j, "jobs", (*out)->slots);
	journal_launcher(*out, &j);
	return journal_write(*out, &j);
}

/* ---- results ---- */

/* A finished job's run: done to its budget, with the metric's last value. */
static int read_result(dlt_search_run *r, job *jb, int *ok)
{
	char *dir = path_of(r, "trials/%03lld", jb->trial);
	const dlt_series *series;
	dlt_runinfo ri;

	*ok = 0;
	if (!dir)
		return DLT_ENOMEM;
	if (!dlt_runs_is_run(dir) || dlt_runs_load(&ri, dir) < 0) {
		free(dir);
		return 0;
	}
	free(dir);
	jb->epochs = (int)(r->steps ? ri.step : ri.epoch);
	series = dlt_runs_series(&ri, r->s->metric);
	jb->value = series && series->n ? series->p[series->n - 1].value : NAN;
	*ok = !strcmp(ri.status, "done") && (!is_asha(r) || jb->epochs >= r->rungs[jb->rung]);
	dlt_runs_free(&ri);
	return 0;
}

static void note(dlt_search_run *r, const dlt_search_hooks *h, const dlt_trial *t,
		 const char *what)
{
	if (h && h->trial)
		h->trial(h->ctx, r, t, what);
}

static void trial_done(dlt_search_run *r, const job *jb)
{
	dlt_trial *t = &r->trials[jb->trial];
	t->rung = jb->rung;
	t->value = jb->value;
	t->epochs = r->rungs[jb->rung];
	t->attempt = 0;
	t->exit = 0;
	t->state = jb->rung < r->nrungs - 1 ? DLT_TRIAL_PAUSED : DLT_TRIAL_DONE;
}

static void trial_failed(dlt_search_run *r, const job *jb, char *tail)
{
	dlt_trial *t = &r->trials[jb->trial];
	t->state = DLT_TRIAL_FAILED;
	t->value = NAN;
	t->exit = jb->exit;
	t->epochs = jb->epochs;
	free(t->tail);
	t->tail = tail;
}

/* An event of job jb begun in j: its trial, number and attempt, for the
 * caller to add to and write. */
static void job_event(dlt_json *j, const dlt_search_run *r, const job *jb, const char *ev)
{
	dlt_json_begin(j);
	dlt_json_str(j, "event", ev);
	dlt_json_int(j, "trial", jb->trial);
	dlt_json_int(j, "job", (long long)(jb - r->jobs));
	dlt_json_int(j, "attempt", jb->attempt);
}

static int journal_finish(dlt_search_run *r, const job *jb, const char *tail)
{
	dlt_json j;
	dlt_json_begin(&j);
	dlt_json_str(&j, "event", "finish");
	dlt_json_int(&j, "trial", jb->trial);
	dlt_json_str(&j, "status", jb->state == JOB_DONE ? "done" : "failed");
	dlt_json_int(&j, "exit", jb->exit);
	dlt_json_int(&j, r->steps ? "steps" : "epochs", jb->epochs);
	dlt_json_str(&j, "metric", r->s->metric);
	dlt_json_num(&j, "value", jb->value);
	dlt_json_int(&j, "job", (long long)(jb - r->jobs));
	dlt_json_int(&j, "rung", jb->rung);
	if (tail)
		dlt_json_str(&j, "log", tail);
	return journal_write(r, &j);
}

static int job_done(dlt_search_run *r, job *jb, const dlt_search_hooks *h)
{
	jb->state = JOB_DONE;
	jb->exit = 0;
	DLT_TRY_RC(journal_finish(r, jb, NULL));
	trial_done(r, jb);
	note(r, h, &r->trials[jb->trial], "result");
	return 0;
}

/* A job's process ended with status. */
static int job_ended(dlt_search_run *r, job *jb, int status, const dlt_search_hooks *h)
{
	dlt_trial *t = &r->trials[jb->trial];
	dlt_json j;
	char *tail;
	int ok;

	r->running--;
	r->slot_job[jb->slot] = -1;
	DLT_TRY_RC(read_result(r, jb, &ok));
	if (status == 0 && ok)
		return job_done(r, jb, h);
	jb->exit = status;
	if (jb->attempt < r->retries) {
		jb->attempt++;
		jb->state = JOB_PENDING;
		t->attempt = jb->attempt;
		t->exit = status;
		job_event(&j, r, jb, "retry");
		dlt_json_int(&j, "exit", status);
		DLT_TRY_RC(journal_write(r, &j));
		note(r, h, t, "retry");
		return 0;
	}
	jb->state = JOB_FAILED;
	jb->value = NAN;
	if (!(tail = log_tail(r, jb->trial)))
		return DLT_ENOMEM;
	if ((ok = journal_finish(r, jb, tail)) < 0) {
		free(tail);
		return ok;
	}
	trial_failed(r, jb, tail);
	note(r, h, t, "failed");
	return 0;
}

/* ---- decisions ---- */

static int promoted(const dlt_search_run *r, long long trial, int rung)
{
	for (size_t i = 0; i < r->njobs; i++)
		if (r->jobs[i].trial == trial && r->jobs[i].rung == rung)
			return 1;
	return 0;
}

/* Whether a is better than b: by the metric, then the lower number. */
static int better(const dlt_search_run *r, const job *a, const job *b)
{
	if (a->value != b->value)
		return (a->value > b->value) == (r->s->mode > 0);
	return a->trial < b->trial;
}

/* ASHA at virtual time t: the best trial in the top 1/eta of the highest
 * rung that has one not yet promoted, else a new trial.  1 and the job's
 * trial and rung, or 0: nothing to do now. */
static int decide(dlt_search_run *r, long long t, long long *trial, int *rung)
{
	const job **c = dlt_calloc(r->njobs + 1, sizeof(*c));

	if (!c)
		return DLT_ENOMEM;
	for (int k = r->nrungs - 2; k >= 0; k--) {
		size_t n = 0, nc = 0;
		for (size_t i = 0; i < r->njobs; i++) {
			const job *jb = &r->jobs[i];
			if (jb->rung != k || jb->vend > t)
				continue;
			n++;
			if (jb->state == JOB_DONE && !isnan(jb->value)) {
				size_t p = nc++;	/* insertion sort, best first */
				for (; p > 0 && better(r, jb, c[p - 1]); p--)
					c[p] = c[p - 1];
				c[p] = jb;
			}
		}
		for (size_t i = 0; i < n / (size_t)r->s->eta && i < nc; i++) {
			if (!promoted(r, c[i]->trial, k + 1)) {
				*trial = c[i]->trial;
				*rung = k + 1;
				free(c);
				return 1;
			}
		}
	}
	free(c);
	if (r->started < r->count) {
		*trial = r->started;
		*rung = 0;
		return 1;
	}
	return 0;
}

/* Whether every job that ends by virtual time t has its result. */
static int ready(const dlt_search_run *r, long long t)
{
	for (size_t i = 0; i < r->njobs; i++)
		if (r->jobs[i].vend <= t && r->jobs[i].state != JOB_DONE &&
		    r->jobs[i].state != JOB_FAILED)
			return 0;
	return 1;
}

/* The first job to end after t, virtually; LLONG_MAX when none runs. */
static long long next_end(const dlt_search_run *r, long long t)
{
	long long next = LLONG_MAX;
	for (size_t i = 0; i < r->njobs; i++)
		if (r->jobs[i].vend > t && r->jobs[i].vend < next)
			next = r->jobs[i].vend;
	return next;
}

static long long pending(const dlt_search_run *r)
{
	long long n = 0;
	for (size_t i = 0; i < r->njobs; i++)
		n += r->jobs[i].state == JOB_PENDING;
	return n;
}

/* A decision: the job of trial on rung, journaled, or taken from the
 * journal of the searcher before a resume. */
static int new_job(dlt_search_run *r, long long trial, int rung, long long t,
		   const dlt_search_hooks *h)
{
	size_t d = r->njobs;
	dlt_trial *tr = &r->trials[trial];
	job *jb;
	dlt_json j;

	DLT_TRY_RC(dlt_grow(&r->jobs, &r->capjobs, d + 1, sizeof(*r->jobs)));
	jb = &r->jobs[r->njobs++];
	*jb = (job){ .trial = trial, .rung = rung, .vstart = t, .vend = t + cost(r, rung),
		     .state = JOB_PENDING, .slot = -1, .value = NAN };
	if (rung == 0)
		r->started++;
	if (d < r->nrep) {
		const replayed *p = &r->rep[d];
		if (p->trial != trial || p->rung != rung)
			return dlt_error(DLT_EINPUT, "%s/journal.jsonl: decision %zu was trial %lld "
					 "to rung %d, now it is trial %lld to rung %d: not the "
					 "same search", r->dir, d, p->trial, p->rung, trial, rung);
		jb->replayed = 1;
		jb->attempt = p->attempt;
		jb->old_pid = p->pid;
		jb->old_jobid = p->jobid;
		tr->attempt = p->attempt;
		if (!p->finished)
			return 0;
		jb->state = p->failed ? JOB_FAILED : JOB_DONE;
		jb->value = p->value;
		jb->exit = p->exit;
		jb->epochs = p->epochs;
		if (p->failed)
			trial_failed(r, jb, dlt_strdup(p->tail ? p->tail : ""));
		else
			trial_done(r, jb);
		return 0;
	}
	dlt_json_begin(&j);
	dlt_json_str(&j, "event", rung ? "promote" : "start");
	dlt_json_int(&j, "trial", trial);
	if (!rung)
		dlt_trial_json_params(&j, "params", tr);
	dlt_json_int(&j, "job", (long long)d);
	dlt_json_int(&j, "rung", rung);
	dlt_json_int(&j, r->steps ? "steps" : "epochs", r->rungs[rung]);
	DLT_TRY_RC(journal_write(r, &j));
	note(r, h, tr, rung ? "promote" : "start");
	return 0;
}

/* The virtual worker that decides next: the earliest, the lowest number
 * among equals; -1 when all are done. */
static int next_worker(const dlt_search_run *r)
{
	int w = -1;
	for (int i = 0; i < r->s->parallel; i++)
		if (r->vfree[i] != LLONG_MAX && (w < 0 || r->vfree[i] < r->vfree[w]))
			w = i;
	return w;
}

/* Makes every decision that can be made now: one per free slot, and any
 * the journal already holds. */
static int decide_now(dlt_search_run *r, const dlt_search_hooks *h)
{
	while (!r->all_decided) {
		long long trial, t;
		int rung, w, rc;

		if (r->njobs >= r->nrep && r->running + pending(r) >= r->slots)
			return 0;
		if (!is_asha(r)) {
			if (r->started == r->count) {
				r->all_decided = 1;
				return 0;
			}
			DLT_TRY_RC(new_job(r, r->started, 0, 0, h));
			continue;
		}
		if ((w = next_worker(r)) < 0) {
			r->all_decided = 1;
			return 0;
		}
		t = r->vfree[w];
		if (!ready(r, t))
			return 0;
		if ((rc = decide(r, t, &trial, &rung)) < 0)
			return rc;
		if (rc) {
			DLT_TRY_RC(new_job(r, trial, rung, t, h));
			r->vfree[w] = t + cost(r, rung);
		} else {
			r->vfree[w] = next_end(r, t);
		}
	}
	return 0;
}

/* ---- launching ---- */

/* A process of the killed searcher's, still checkpointing on SIGTERM:
 * waited for, so two never write to one trial. */
static int outlive(const dlt_search_run *r, const job *jb)
{
	double end = dlt_now() + ORPHAN_WAIT_S;
	char comm[64], path[64], *text;
	size_t len;

	if (jb->old_pid <= 0 || jb->old_pid == getpid())
		return 0;
	snprintf(path, sizeof(path), "/proc/%lld/comm", jb->old_pid);
	while (dlt_now() < end) {
		if (kill((pid_t)jb->old_pid, 0) < 0 || dlt_read_file(path, 256, &text, &len) < 0)
			return 0;
		snprintf(comm, sizeof(comm), "%s", text);
		free(text);
		if (strncmp(comm, "dlt-train", 9))
			return 0;	/* the number went to another program */
		dlt_sleep(0.05);
	}
	return dlt_error(DLT_EFAIL, "%s: trial %lld: dlt-train (pid %lld) of the killed searcher "
			 "still runs", r->dir, jb->trial, jb->old_pid);
}

/* The next free slot, taken by jb, which runs as the launcher's id. */
static int take_slot(dlt_search_run *r, job *jb, long long id)
{
	int slot = 0;
	while (r->slot_job[slot] >= 0)
		slot++;
	jb->id = id;
	jb->slot = slot;
	jb->state = JOB_RUNNING;
	r->slot_job[slot] = jb - r->jobs;
	r->running++;
	r->trials[jb->trial].state = DLT_TRIAL_RUNNING;
	r->trials[jb->trial].epochs = r->rungs[jb->rung];
	return slot;
}

/* The key of a job for a batch launcher: "dlt-search REALDIR job N". */
static int job_key(const dlt_search_run *r, const job *jb, char **key)
{
	char real[PATH_MAX];
	dlt_buf b = { 0 };

	*key = NULL;
	if (!realpath(r->dir, real))
		return dlt_error_errno(DLT_EIO, "%s", r->dir);
	if (dlt_buf_printf(&b, "dlt-search %s job %td", real, jb - r->jobs) < 0)
		return DLT_ENOMEM;
	*key = b.data;
	return 0;
}

/* A batch job of the killed searcher that is still queued or running is
 * followed, not started again: 1.  0: none is, so the trial's run
 * directory says what is left to do. */
static int adopt(dlt_search_run *r, const dlt_launcher *l, job *jb)
{
	long long id = jb->old_jobid;
	char *key;
	dlt_json j;
	int rc, slot;

	if (!l->adopt) {
		if (!r->rep_launcher || !strcmp(r->rep_launcher, "local"))
			return 0;
		return dlt_error(DLT_EINPUT, "%s: trial %lld: its %s job may still run; go on with "
				 "--launcher %s", r->dir, jb->trial, r->rep_launcher, r->rep_launcher);
	}
	DLT_TRY_RC(job_key(r, jb, &key));
	rc = l->adopt(l->ctx, key, &id);
	free(key);
	if (rc <= 0)
		return rc;
	slot = take_slot(r, jb, id);
	job_event(&j, r, jb, "adopt");
	dlt_json_int(&j, "slot", slot);
	dlt_json_int(&j, "jobid", jb->id);
	DLT_TRY_RC(journal_write(r, &j));
	return 1;
}

static int launch(dlt_search_run *r, const dlt_launcher *l, job *jb, const dlt_search_hooks *h)
{
	char *dir = path_of(r, "trials/%03lld", jb->trial);
	char *log = path_of(r, "logs/%03lld.log", jb->trial);
	dlt_trial *t = &r->trials[jb->trial];
	char **argv = dlt_calloc(2 * (r->nextra + t->nov) + 10, sizeof(*argv)), epochs[64];
	char gpus[32], *key = NULL;
	dlt_trial_cmd cmd = { .trial = jb->trial, .argv = argv, .log = log,
			      .threads = r->threads, .ngpus = r->gpus_per_trial };
	int k = 0, slot = 0, fresh, ok = 0, rc = 0;
	long long id;
	dlt_json j;

	if (!dir || !log || !argv) {
		rc = DLT_ENOMEM;
		goto out;
	}
	if (jb->replayed) {
		if ((rc = adopt(r, l, jb)) != 0)
			goto out;
		if ((rc = outlive(r, jb)) < 0)
			goto out;
		/* a job that ended before its searcher could journal it */
		if ((rc = read_result(r, jb, &ok)) < 0 || ok) {
			if (ok)
				rc = job_done(r, jb, h);
			goto out;
		}
	}
	while (r->slot_job[slot] >= 0)
		slot++;
	fresh = !dlt_runs_is_run(dir);
	snprintf(epochs, sizeof(epochs), "train.%s=%d", r->steps ? "steps" : "epochs",
		 r->rungs[jb->rung]);
	argv[k++] = (char *)r->trainer;
	if (fresh) {
		argv[k++] = "-c";
		argv[k++] = r->s->base;
		argv[k++] = "-o";
		argv[k++] = dir;
		for (size_t i = 0; i < r->nextra; i++) {
			argv[k++] = "-s";
			argv[k++] = r->extra[i];
		}
		for (size_t i = 0; i < t->nov; i++) {
			argv[k++] = "-s";
			argv[k++] = t->ov[i];
		}
	} else {
		argv[k++] = "--resume";
		argv[k++] = dir;
		if (is_asha(r)) {
			argv[k++] = "-s";
			argv[k++] = epochs;
		}
	}
	/* a trial of K GPUs trains data parallel on all of them */
	if (r->gpus_per_trial > 1) {
		snprintf(gpus, sizeof(gpus), "%d", r->gpus_per_trial);
		argv[k++] = "--gpus";
		argv[k++] = gpus;
	}
	argv[k++] = "-q";
	argv[k] = NULL;
	cmd.slot = slot;
	cmd.gpus = r->slot_gpus ? r->slot_gpus[slot] : NULL;
	if (l->adopt && (rc = job_key(r, jb, &key)) < 0)
		goto out;
	cmd.key = key;
	if ((rc = l->start(l->ctx, &cmd, &id)) < 0)
		goto out;
	take_slot(r, jb, id);
	job_event(&j, r, jb, "launch");
	dlt_json_int(&j, "slot", slot);
	dlt_json_int(&j, l->adopt ? "jobid" : "pid", id);
	dlt_json_bool(&j, "resume", !fresh);
	rc = journal_write(r, &j);
out:
	free(key);
	free(argv);
	free(dir);
	free(log);
	return rc;
}

static int launch_pending(dlt_search_run *r, const dlt_launcher *l, const dlt_search_hooks *h)
{
	for (size_t i = 0; i < r->njobs && r->running < r->slots; i++)
		if (r->jobs[i].state == JOB_PENDING)
			DLT_TRY_RC(launch(r, l, &r->jobs[i], h));
	return 0;
}

/* ---- the end ---- */

static int remove_tree_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[PATH_MAX];

	if (!d)
		return errno == ENOENT ? 0 : dlt_error_errno(DLT_EIO, "%s", dir);
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (unlink(path) < 0 && errno != ENOENT) {
			closedir(d);
			return dlt_error_errno(DLT_EIO, "%s", path);
		}
	}
	closedir(d);
	if (rmdir(dir) < 0)
		return dlt_error_errno(DLT_EIO, "%s", dir);
	return 0;
}

/* An early-stopped trial keeps its metrics, not its checkpoints. */
static int prune(dlt_search_run *r, const dlt_trial *t)
{
	char *ckpt = path_of(r, "trials/%03lld/ckpt", t->id);
	char *model = path_of(r, "trials/%03lld/model.dlt", t->id);
	struct stat st;
	dlt_json j;
	int rc = 0;

	if (!ckpt || !model)
		rc = DLT_ENOMEM;
	else if (stat(ckpt, &st) == 0 || stat(model, &st) == 0) {
		if ((rc = remove_tree_files(ckpt)) == 0 && unlink(model) < 0 && errno != ENOENT)
			rc = dlt_error_errno(DLT_EIO, "%s", model);
		if (rc == 0) {
			dlt_json_begin(&j);
			dlt_json_str(&j, "event", "prune");
			dlt_json_int(&j, "trial", t->id);
			rc = journal_write(r, &j);
		}
	}
	free(ckpt);
	free(model);
	return rc;
}

static int copy_file(const char *src, const char *dst)
{
	char *data;
	size_t len;
	int rc;

	DLT_TRY_RC(dlt_read_file(src, 0, &data, &len));
	rc = dlt_write_file_atomic(dst, data, len);
	free(data);
	return rc;
}

/* best.yaml, the full config of the best trial, and best.dlt, its model. */
static int keep_best(dlt_search_run *r, const dlt_trial *best)
{
	char *src = path_of(r, "trials/%03lld/config.yaml", best->id);
	char *dst = dir_file(r, "best.yaml");
	int rc = src && dst ? copy_file(src, dst) : DLT_ENOMEM;

	free(src);
	free(dst);
	src = path_of(r, "trials/%03lld/model.dlt", best->id);
	dst = dir_file(r, "best.dlt");
	if (rc == 0)
		rc = src && dst ? copy_file(src, dst) : DLT_ENOMEM;
	free(src);
	free(dst);
	return rc;
}

static int by_rank(const dlt_search_run *r, const dlt_trial *x, const dlt_trial *y)
{
	int fx = x->state == DLT_TRIAL_FAILED, fy = y->state == DLT_TRIAL_FAILED;
	int nx = isnan(x->value), ny = isnan(y->value);

	if (fx != fy)
		return fx - fy;
	if (x->rung != y->rung)
		return y->rung - x->rung;
	if (nx != ny)
		return nx - ny;
	if (!nx && x->value != y->value)
		return (x->value < y->value) == (r->s->mode > 0) ? 1 : -1;
	return (x->id > y->id) - (x->id < y->id);
}

const dlt_trial *const *dlt_search_leaderboard(const dlt_search_run *r, size_t *n)
{
	const dlt_trial **o = r->order;

	for (long long i = 0; i < r->count; i++) {
		long long p = i;	/* insertion sort: stable, no context-free qsort */
		for (; p > 0 && by_rank(r, &r->trials[i], o[p - 1]) < 0; p--)
			o[p] = o[p - 1];
		o[p] = &r->trials[i];
	}
	*n = (size_t)r->count;
	return (const dlt_trial *const *)o;
}

static int finish_search(dlt_search_run *r)
{
	const dlt_trial *const *o;
	dlt_json j;
	size_t n;

	for (long long i = 0; i < r->count; i++) {
		dlt_trial *t = &r->trials[i];
		if (t->state == DLT_TRIAL_PAUSED)
			t->state = DLT_TRIAL_STOPPED;
		if (t->state == DLT_TRIAL_STOPPED && !r->keep_checkpoints)
			DLT_TRY_RC(prune(r, t));
	}
	o = dlt_search_leaderboard(r, &n);
	if (n && o[0]->state != DLT_TRIAL_FAILED && !isnan(o[0]->value))
		DLT_TRY_RC(keep_best(r, o[0]));
	else
		o = NULL;
	if (r->rep_end)
		return 0;
	dlt_json_begin(&j);
	dlt_json_str(&j, "event", "end");
	if (o)
		dlt_json_int(&j, "best", o[0]->id);
	dlt_json_int(&j, r->steps ? "steps" : "epochs", dlt_search_epochs(r));
	return journal_write(r, &j);
}

static int stop_all(dlt_search_run *r, const dlt_launcher *l)
{
	long long id;
	int status;

	for (size_t i = 0; i < r->njobs; i++)
		if (r->jobs[i].state == JOB_RUNNING)
			l->stop(l->ctx, r->jobs[i].id);
	while (r->running > 0) {
		int got = l->poll(l->ctx, 1.0, &id, &status);
		if (got < 0)
			return got;
		for (size_t i = 0; got && i < r->njobs; i++)
			if (r->jobs[i].state == JOB_RUNNING && r->jobs[i].id == id) {
				r->jobs[i].state = JOB_PENDING;
				r->slot_job[r->jobs[i].slot] = -1;
				r->running--;
			}
	}
	return dlt_error(DLT_EINTR, "stopped; go on with: dlt-search --resume %s", r->dir);
}

static int go(dlt_search_run *r, const dlt_launcher *l, const dlt_search_hooks *h)
{
	double last_tick = dlt_now();

	for (;;) {
		long long id;
		int status, got;

		if (h && h->stopping && h->stopping(h->ctx))
			return stop_all(r, l);
		DLT_TRY_RC(decide_now(r, h));
		DLT_TRY_RC(launch_pending(r, l, h));
		if (r->running == 0) {
			if (r->all_decided && pending(r) == 0)
				break;
			/* with nothing running every result is in, so the next
			 * decision can be made (or a job found done at launch
			 * freed its slot) */
			continue;
		}
		if ((got = l->poll(l->ctx, 0.5, &id, &status)) < 0)
			return got;
		for (size_t i = 0; got && i < r->njobs; i++) {
			job *jb = &r->jobs[i];
			if (jb->state != JOB_RUNNING || jb->id != id)
				continue;
			/* a trial that a Ctrl-C stopped is resumed, not retried */
			if (h && h->stopping && h->stopping(h->ctx)) {
				jb->state = JOB_PENDING;
				r->running--;
				r->slot_job[jb->slot] = -1;
				return stop_all(r, l);
			}
			DLT_TRY_RC(job_ended(r, jb, status, h));
		}
		if (h && h->tick && dlt_now() - last_tick >= 1) {
			h->tick(h->ctx, r);
			last_tick = dlt_now();
		}
	}
	return finish_search(r);
}

int dlt_search_go(dlt_search_run *r, const dlt_launcher *l, const dlt_search_hooks *h)
{
	int rc = go(r, l, h);

	/* best effort: the error to report is rc's */
	if (rc < 0 && rc != DLT_EINTR)
		for (size_t i = 0; i < r->njobs; i++)
			if (r->jobs[i].state == JOB_RUNNING)
				l->stop(l->ctx, r->jobs[i].id);
	return rc;
}

/* ---- status ---- */

int dlt_search_status(dlt_search_run **out, dlt_search *s, const char *dir, int *running)
{
	dlt_search_opts o = { .slots = 0, .retries = -1, .threads = 1, .trainer = "dlt-train" };
	dlt_search_run *r;

	DLT_TRY_RC(open_journal(out, s, dir, &o, 0));
	r = *out;
	*running = flock(r->journal, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
	for (size_t d = 0; d < r->nrep; d++) {
		const replayed *p = &r->rep[d];
		dlt_trial *t;
		job jb = { .trial = p->trial, .rung = p->rung, .value = p->value, .exit = p->exit,
			   .epochs = p->epochs };
		if (p->trial < 0 || p->trial >= r->count || p->rung < 0 || p->rung >= r->nrungs)
			return dlt_error(DLT_EINPUT, "%s/journal.jsonl: job %zu: no trial %lld rung %d",
					 dir, d, p->trial, p->rung);
		t = &r->trials[p->trial];
		t->attempt = p->attempt;
		jb.state = !p->finished ? JOB_RUNNING : p->failed ? JOB_FAILED : JOB_DONE;
		DLT_TRY_RC(dlt_grow(&r->jobs, &r->capjobs, r->njobs + 1, sizeof(*r->jobs)));
		r->jobs[r->njobs++] = jb;
		if (!p->finished) {
			t->state = *running ? DLT_TRIAL_RUNNING : DLT_TRIAL_PAUSED;
			t->epochs = r->rungs[p->rung];
		} else if (p->failed) {
			trial_failed(r, &jb, dlt_strdup(p->tail ? p->tail : ""));
		} else {
			trial_done(r, &jb);
		}
	}
	for (long long i = 0; r->rep_end && i < r->count; i++)
		if (r->trials[i].state == DLT_TRIAL_PAUSED)
			r->trials[i].state = DLT_TRIAL_STOPPED;
	return 0;
}

/* ---- the rest ---- */

const dlt_search *dlt_search_of(const dlt_search_run *r)
{
	return r->s;
}

const int *dlt_search_rungs(const dlt_search_run *r, int *n)
{
	*n = r->nrungs;
	return r->rungs;
}

int dlt_search_in_steps(const dlt_search_run *r)
{
	return r->steps;
}

long long dlt_search_epochs(const dlt_search_run *r)
{
	long long n = 0;
	for (size_t i = 0; i < r->njobs; i++)
		if (r->jobs[i].state == JOB_DONE)
			n += cost(r, r->jobs[i].rung);
	return n;
}

void dlt_search_run_free(dlt_search_run *r)
{
	if (!r)
		return;
	for (long long i = 0; r->trials && i < r->count; i++) {
		dlt_search_free_overrides(r->trials[i].ov, r->trials[i].nov);
		free(r->trials[i].tail);
	}
	for (size_t i = 0; i < r->nextra; i++)
		free(r->extra[i]);
	free_replay(r);
	if (r->journal >= 0)
		close(r->journal);
	free(r->trials);
	free(r->order);
	free(r->jobs);
	free(r->vfree);
	free(r->slot_job);
	free(r->dir);
	free(r->launcher);
	free(r->sbatch_args);
	free(r);
}
