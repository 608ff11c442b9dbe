/* The Slurm launcher: each trial a batch job, followed through squeue.
 *
 * A job is submitted with sbatch --parsable and --wrap "exec dlt-train
 * ...", so dlt-train is the job's batch process and gets scancel's SIGTERM
 * itself (it checkpoints and exits).  The launcher asks squeue for the
 * states of this user's jobs (--states=all keeps those that ended for
 * MinJobAge) at most once a QUERY_EVERY_S; a job in a final state, or no
 * longer known at all, has ended, and scontrol gives its exit code while
 * Slurm still knows it.  One that Slurm forgot ends with status 0: the
 * scheduler then trusts the trial's run directory alone, which says
 * whether it trained to its budget.
 *
 * The commands run as children in their own process group, so a Ctrl-C
 * at the terminal reaches the searcher and not an sbatch half way. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "search/search.h"

#define QUERY_EVERY_S 1.0
/* how long squeue may fail (a controller restarting) before the search
 * gives up on following its jobs */
#define QUERY_FAIL_S 120.0

typedef struct sjob {
	long long id;
	int ended, status;
} sjob;

typedef struct slurm {
	char **args;		/* --sbatch-args, split */
	size_t nargs;
	sjob *jobs;		/* the jobs followed */
	size_t njobs, cap;
	double last_query;	/* dlt_now(); 0: never */
	double failing_since;	/* 0: squeue answered the last time */
} slurm;

/* ---- running a command ---- */

/* Runs argv (PATH's) with stdin /dev/null; *out (malloc'd, NUL-terminated)
 * gets its stdout and stderr.  The exit status, or 128 + N for signal N,
 * 127 when it could not be run. */
static int run(char *const *argv, char **out)
{
	dlt_buf b = { 0 };
	int fd[2], st;
	pid_t pid;
	char chunk[4096];
	ssize_t n;

	*out = NULL;
	if (pipe2(fd, O_CLOEXEC) < 0)
		return dlt_error_errno(DLT_EIO, "pipe");
	fflush(NULL);
	if ((pid = fork()) < 0) {
		close(fd[0]);
		close(fd[1]);
		return dlt_error_errno(DLT_EIO, "fork");
	}
	if (pid == 0) {
		int in = open("/dev/null", O_RDONLY);
		setpgid(0, 0);
		if (in >= 0)
			dup2(in, 0);
		dup2(fd[1], 1);
		dup2(fd[1], 2);
		execvp(argv[0], argv);
		dprintf(2, "%s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(fd[1]);
	for (;;) {
		n = read(fd[0], chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (dlt_buf_append(&b, chunk, (size_t)n) < 0)
			break;
	}
	close(fd[0]);
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR) {
			free(b.data);
			return dlt_error_errno(DLT_EIO, "waitpid %s", argv[0]);
		}
	if (dlt_buf_append(&b, "", 1) < 0) {
		free(b.data);
		return DLT_ENOMEM;
	}
	*out = b.data;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A command's output for a message: its first line. */
static const char *first_line(char *out)
{
	char *nl;
	if (!out || !*out)
		return "no output";
	if ((nl = strchr(out, '\n')))
		*nl = 0;
	return out;
}

/* ---- quoting and splitting ---- */

/* s in single quotes for sh: ' as '\'' */
static int sh_quote(dlt_buf *b, const char *s)
{
	DLT_TRY_RC(dlt_buf_append(b, "'", 1));
	for (; *s; s++)
		DLT_TRY_RC(*s == '\'' ? dlt_buf_append(b, "'\\''", 4) : dlt_buf_append(b, s, 1));
	return dlt_buf_append(b, "'", 1);
}

int dlt_split_args(const char *text, char ***argv, size_t *n)
{
	size_t len = strlen(text), count = 0;
	char *words = dlt_calloc(len + 1, 1), *w = words, **block;
	const char *p = text;

	*argv = NULL;
	*n = 0;
	if (!words)
		return DLT_ENOMEM;
	while (*p) {
		int word = 0;
		while (*p == ' ' || *p == '\t' || *p == '\n')
			p++;
		while (*p && *p != ' ' && *p != '\t' && *p != '\n') {
			word = 1;
			if (*p == '\'' || *p == '"') {
				const char *end = strchr(p + 1, *p);
				if (!end) {
					free(words);
					return dlt_error(DLT_EINPUT, "--sbatch-args: %c not closed: %s",
							 *p, text);
				}
				memcpy(w, p + 1, (size_t)(end - p - 1));
				w += end - p - 1;
				p = end + 1;
			} else {
				*w++ = *p++;
			}
		}
		if (word) {
			*w++ = 0;
			count++;
		}
	}
	if (!(block = dlt_calloc(1, (count + 1) * sizeof(char *) + (size_t)(w - words) + 1))) {
		free(words);
		return DLT_ENOMEM;
	}
	memcpy(block + count + 1, words, (size_t)(w - words));
	w = (char *)(block + count + 1);
	for (size_t i = 0; i < count; i++) {
		block[i] = w;
		w += strlen(w) + 1;
	}
	free(words);
	*argv = block;
	*n = count;
	return 0;
}

/* ---- the launcher ---- */

static int follow(slurm *s, long long id)
{
	DLT_TRY_RC(dlt_grow(&s->jobs, &s->cap, s->njobs + 1, sizeof(*s->jobs)));
	s->jobs[s->njobs++] = (sjob){ .id = id };
	return 0;
}

/* The job id that sbatch --parsable printed: "ID" or "ID;CLUSTER", on its
 * own line after any warnings. */
static long long parse_jobid(const char *out)
{
	long long id = -1;
	for (const char *l = out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		char *end;
		long long v = strtoll(l, &end, 10);
		if (end > l && v > 0 && (*end == '\n' || *end == ';' || *end == 0))
			id = v;
	}
	return id;
}

static int slurm_start(void *ctx, const dlt_trial_cmd *cmd, long long *id)
{
	slurm *s = ctx;
	char name[64], cpus[32], gres[48], *comment = NULL;
	dlt_buf wrap = { 0 }, log = { 0 };
	char **argv = dlt_calloc(s->nargs + 20, sizeof(*argv)), *out = NULL;
	int k = 0, rc;

	if (!argv)
		return DLT_ENOMEM;
	/* sbatch -o expands %j and the like: a % of the path stays one */
	rc = 0;
	for (const char *p = cmd->log; *p && rc == 0; p++)
		rc = dlt_buf_append(&log, *p == '%' ? "%%" : p, *p == '%' ? 2 : 1);
	if (rc == 0 && (dlt_buf_append(&log, "", 1) < 0 || dlt_buf_append(&wrap, "exec", 4) < 0))
		rc = DLT_ENOMEM;
	for (int i = 0; rc == 0 && cmd->argv[i]; i++)
		if (dlt_buf_append(&wrap, " ", 1) < 0 || sh_quote(&wrap, cmd->argv[i]) < 0)
			rc = DLT_ENOMEM;
	if (rc == 0 && dlt_buf_append(&wrap, "", 1) < 0)
		rc = DLT_ENOMEM;
	if (rc == 0 && !(comment = dlt_calloc(strlen(cmd->key) + 16, 1)))
		rc = DLT_ENOMEM;
	if (rc < 0)
		goto out;
	sprintf(comment, "--comment=%s", cmd->key);
	snprintf(name, sizeof(name), "dlt-trial-%03lld", cmd->trial);
	snprintf(cpus, sizeof(cpus), "%d", cmd->threads > 0 ? cmd->threads : 1);
	snprintf(gres, sizeof(gres), "--gres=gpu:%d", cmd->ngpus);
	argv[k++] = "sbatch";
	argv[k++] = "--parsable";
	argv[k++] = "-J";
	argv[k++] = name;
	argv[k++] = "-o";
	argv[k++] = log.data;
	argv[k++] = "--open-mode=append";
	argv[k++] = comment;
	argv[k++] = "-n";
	argv[k++] = "1";
	argv[k++] = "-c";
	argv[k++] = cpus;
	if (cmd->ngpus > 0)
		argv[k++] = gres;
	for (size_t i = 0; i < s->nargs; i++)
		argv[k++] = s->args[i];
	argv[k++] = "--wrap";
	argv[k++] = wrap.data;
	argv[k] = NULL;
	if ((rc = run(argv, &out)) < 0)
		goto out;
	if (rc != 0 || (*id = parse_jobid(out)) < 0) {
		rc = dlt_error(DLT_EFAIL, "trial %03lld: sbatch: %s", cmd->trial, first_line(out));
		goto out;
	}
	rc = follow(s, *id);
out:
	free(out);
	free(argv);
	free(comment);
	free(wrap.data);
	free(log.data);
	return rc;
}

/* A state in which a job will not run again. */
static int final_state(const char *st)
{
	static const char *const done[] = { "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT",
					    "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE",
					    "PREEMPTED", "REVOKED" };
	for (size_t i = 0; i < sizeof(done) / sizeof(*done); i++)
		if (!strcmp(st, done[i]))
			return 1;
	return 0;
}

/* An ended job's status from scontrol's ExitCode=N:S; a job that did not
 * complete without a code of its own (a timeout, a node that failed) is
 * status 1. */
static int exit_status(long long id, const char *state)
{
	char jid[32], *out = NULL, *p;
	char *argv[] = { "scontrol", "show", "job", "-o", jid, NULL };
	int code = 0, sig = 0, st;

	snprintf(jid, sizeof(jid), "%lld", id);
	if (run(argv, &out) == 0 && (p = strstr(out, " ExitCode=")))
		sscanf(p, " ExitCode=%d:%d", &code, &sig);
	free(out);
	st = sig ? 128 + sig : code;
	return st == 0 && strcmp(state, "COMPLETED") ? 1 : st;
}

/* One look at the queue: the jobs followed that have ended are marked. */
static int query(slurm *s)
{
	char *argv[] = { "squeue", "-h", "--me", "--states=all", "-o", "%i %T", NULL };
	char *out = NULL, *line, *save = NULL;
	int rc;

	s->last_query = dlt_now();
	if ((rc = run(argv, &out)) < 0)
		return rc;
	if (rc != 0) {
		if (!s->failing_since)
			s->failing_since = s->last_query;
		if (s->last_query - s->failing_since > QUERY_FAIL_S)
			rc = dlt_error(DLT_EFAIL, "squeue: %s", first_line(out));
		else
			rc = 0;
		free(out);
		return rc;
	}
	s->failing_since = 0;
	for (size_t i = 0; i < s->njobs; i++)
		s->jobs[i].ended = 2;	/* not listed: forgotten, so ended */
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char state[64];
		long long id;
		if (sscanf(line, "%lld %63s", &id, state) != 2)
			continue;
		for (size_t i = 0; i < s->njobs; i++) {
			sjob *j = &s->jobs[i];
			if (j->id != id || j->ended == 1)
				continue;
			j->ended = final_state(state);
			if (j->ended)
				j->status = exit_status(id, state);
		}
	}
	free(out);
	for (size_t i = 0; i < s->njobs; i++)
		if (s->jobs[i].ended == 2) {
			s->jobs[i].ended = 1;
			s->jobs[i].status = 0;
		}
	return 0;
}

static int take_ended(slurm *s, long long *id, int *status)
{
	for (size_t i = 0; i < s->njobs; i++)
		if (s->jobs[i].ended) {
			*id = s->jobs[i].id;
			*status = s->jobs[i].status;
			s->jobs[i] = s->jobs[--s->njobs];
			return 1;
		}
	return 0;
}

static int slurm_poll(void *ctx, double timeout, long long *id, int *status)
{
	slurm *s = ctx;
	double end = dlt_now() + timeout;

	for (;;) {
		double now = dlt_now(), next;
		if (take_ended(s, id, status))
			return 1;
		if (s->njobs == 0)
			return 0;
		if (now - s->last_query >= QUERY_EVERY_S) {
			DLT_TRY_RC(query(s));
			continue;
		}
		if (now >= end)
			return 0;
		next = s->last_query + QUERY_EVERY_S;
		dlt_sleep((next < end ? next : end) - now);
	}
}

static int slurm_stop(void *ctx, long long id)
{
	char jid[32], *out = NULL;
	char *argv[] = { "scancel", jid, NULL };
	int rc;

	(void)ctx;
	snprintf(jid, sizeof(jid), "%lld", id);
	/* a job that ended meanwhile is no error: poll reports it */
	if ((rc = run(argv, &out)) == 127)
		rc = dlt_error(DLT_EFAIL, "scancel %lld: %s", id, first_line(out));
	free(out);
	return rc < 0 || rc == 127 ? rc : 0;
}

/* The killed searcher's job: by its id where the journal has one, else by
 * the key it was submitted with (--comment), as sbatch may have queued it
 * just before the kill. */
static int slurm_adopt(void *ctx, const char *key, long long *id)
{
	slurm *s = ctx;
	char *argv[] = { "squeue", "-h", "--me", "--states=all", "-o", "%i|%T|%k", NULL };
	char *out = NULL, *line, *save = NULL;
	long long found = 0;
	int rc;

	if ((rc = run(argv, &out)) < 0)
		return rc;
	if (rc != 0) {
		rc = dlt_error(DLT_EFAIL, "squeue: %s", first_line(out));
		free(out);
		return rc;
	}
	for (line = strtok_r(out, "\n", &save); line && !found; line = strtok_r(NULL, "\n", &save)) {
		char state[64], *comment;
		long long jid;
		int n = 0;
		if (sscanf(line, "%lld|%63[^|]|%n", &jid, state, &n) != 2 || !n || final_state(state))
			continue;
		comment = line + n;
		if (!strcmp(comment, key) || (*id > 0 && jid == *id))
			found = jid;
	}
	free(out);
	if (!found)
		return 0;
	*id = found;
	DLT_TRY_RC(follow(s, found));
	return 1;
}

static void slurm_close(void *ctx)
{
	slurm *s = ctx;
	if (!s)
		return;
	free(s->args);
	free(s->jobs);
	free(s);
}

int dlt_launcher_slurm(dlt_launcher *l, const char *sbatch_args)
{
	slurm *s = dlt_calloc(1, sizeof(*s));
	int rc;

	*l = (dlt_launcher){ .name = "slurm", .start = slurm_start, .poll = slurm_poll,
			     .stop = slurm_stop, .adopt = slurm_adopt, .close = slurm_close };
	if (!s)
		return DLT_ENOMEM;
	if (sbatch_args && (rc = dlt_split_args(sbatch_args, &s->args, &s->nargs)) < 0) {
		free(s);
		return rc;
	}
	l->ctx = s;
	return 0;
}
