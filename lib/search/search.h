/* search: hyper-parameter search configs and their trials, for dlt-search.
 *
 * A search file names a base training config, a metric and a space of
 * params (dotted config keys, as -s takes them).  The samplers turn trial
 * i into a list of "key=value" overrides, the same for the same file and
 * seed on every machine: grid counts through the choices (the last param
 * fastest), random draws trial i from a dlt_rng keyed by the seed on
 * stream i, so a trial does not depend on the ones before it.
 *
 * A running search (dlt_search_run) is a scheduler over a launcher: it
 * decides which trial trains to which budget (epochs, or steps for token
 * data), asks the launcher to
 * run dlt-train for it, and writes every decision and result to an
 * fsynced journal, from which a search that was killed goes on. */
#ifndef DLT_SEARCH_H
#define DLT_SEARCH_H

#include "util/util.h"

enum dlt_param_kind { DLT_PARAM_CHOICE = 1, DLT_PARAM_UNIFORM, DLT_PARAM_LOGUNIFORM, DLT_PARAM_INT };
enum dlt_search_method { DLT_SEARCH_GRID = 1, DLT_SEARCH_RANDOM, DLT_SEARCH_ASHA };

typedef struct dlt_search_param {
	char *key;		/* "train.optimizer.adam.lr" */
	int line;		/* of the key in the search file */
	int kind;
	char **choices;		/* DLT_PARAM_CHOICE: scalar texts */
	size_t nchoices;
	double lo, hi;		/* uniform, loguniform, int: [lo, hi] */
	int log;		/* int: drawn log-uniformly */
} dlt_search_param;

typedef struct dlt_search {
	char *path;		/* the search file */
	char *base;		/* the base config, relative to the working directory */
	int base_line;
	char *metric;		/* canonical: "test.acc" */
	int mode;		/* 1: more is better, -1: less */
	int method, method_line;
	long long trials;	/* 0: not given (grid: every combination) */
	long long seed;
	/* asha: the budgets of the first and last rung, in epochs, or in
	 * optimiser steps (train.steps, token data) where the file gives
	 * min_steps and max_steps: steps is then 1 */
	int eta, min_budget, max_budget, steps;
	int parallel;		/* asha: the trials its decisions assume run at once */
	dlt_search_param *params;
	size_t nparams;
} dlt_search;

/* Reads and checks a search file; errors are DLT_EINPUT "file:line: ...". */
int dlt_search_load(dlt_search *s, const char *path);
void dlt_search_free(dlt_search *s);
/* The number of trials: trials:, or for grid the combinations (at most
 * trials: when given). */
long long dlt_search_count(const dlt_search *s);
/* The overrides of trial i, "key=value" each, one per param in the order
 * of the file; *ov and its strings malloc'd (dlt_search_free_overrides). */
int dlt_search_trial(const dlt_search *s, long long i, char ***ov, size_t *n);
void dlt_search_free_overrides(char **ov, size_t n);
/* Loads the base config with each value of each param alone, then with
 * the overrides of every trial (after extra, e.g. train.threads=2), so a
 * bad key or value is found before a trial runs: "file:line: KEY: ..."
 * naming the param's line, or "file: trial N: ..." */
int dlt_search_check(const dlt_search *s, char *const *extra, size_t nextra);

/* One trial's dlt-train process, as the scheduler asks a launcher for it. */
typedef struct dlt_trial_cmd {
	long long trial;
	int slot;		/* 0 .. slots-1 */
	char *const *argv;	/* NULL-terminated; argv[0] the trainer */
	const char *log;	/* stdout and stderr go to its end */
	const char *gpus;	/* CUDA_VISIBLE_DEVICES; NULL: left as it is */
	int threads;		/* the cores it trains with */
	int ngpus;		/* the GPUs it trains on; 0: CPU */
	/* the search directory's real path and the job's number: by it a
	 * resumed searcher finds a batch job whose id its journal lacks */
	const char *key;
} dlt_trial_cmd;

/* How trials run: the local launcher forks children; a batch system's
 * launcher (Slurm jobs) fills in the same three calls.  A status is the
 * exit status, or 128 + N for a process killed by signal N. */
typedef struct dlt_launcher {
	const char *name;	/* "local", "slurm": the journal's "launcher" */
	void *ctx;
	int (*start)(void *ctx, const dlt_trial_cmd *cmd, long long *id);
	/* Waits at most timeout seconds for a started trial to end: 1 with
	 * its id and status, 0 when none ended. */
	int (*poll)(void *ctx, double timeout, long long *id, int *status);
	/* Asks a trial to stop: it checkpoints and exits. */
	int (*stop)(void *ctx, long long id);
	/* A trial that a killed searcher may have started: *id from its
	 * journal, or 0 where the searcher died before it wrote the id down,
	 * and the key it was started with.  1 and *id when it is still queued
	 * or running, and poll reports its end from now on; 0 when none is.
	 * NULL where trials end with their searcher (local): the journal's id
	 * is then a "pid", else a "jobid". */
	int (*adopt)(void *ctx, const char *key, long long *id);
	void (*close)(void *ctx);	/* NULL: nothing to free */
} dlt_launcher;

/* Trials as child processes that get SIGTERM when the searcher dies
 * (PR_SET_PDEATHSIG), so none trains on unwatched into a directory that
 * a resumed search restarts; the ids are process ids. */
void dlt_launcher_local(dlt_launcher *l);

/* Trials as Slurm batch jobs (sbatch, squeue, scontrol, scancel from
 * PATH), the ids Slurm's job ids.  Each job asks -n1 -c THREADS (and
 * --gres=gpu:K for K GPUs), writes the trial's log with --open-mode=append
 * and runs in the searcher's working directory, which every node must
 * share.  sbatch_args (NULL: none) go to sbatch after those: split at
 * blanks, '...' and "..." quote (no backslash escapes); a quote left open
 * is an input error.  The jobs outlive the searcher: a resumed one adopts
 * them.  dlt_launcher_close frees it. */
int dlt_launcher_slurm(dlt_launcher *l, const char *sbatch_args);
void dlt_launcher_close(dlt_launcher *l);
/* sbatch_args split as dlt_launcher_slurm does, *argv NULL-terminated,
 * one malloc'd block (free(*argv)). */
int dlt_split_args(const char *text, char ***argv, size_t *n);

enum dlt_trial_state {
	DLT_TRIAL_WAITING,	/* not started */
	DLT_TRIAL_RUNNING,
	DLT_TRIAL_PAUSED,	/* asha: at a rung, not promoted (yet) */
	DLT_TRIAL_DONE,		/* trained to its last budget */
	DLT_TRIAL_STOPPED,	/* asha: stopped early, never promoted */
	DLT_TRIAL_FAILED,	/* crashed more often than retries allow */
};

typedef struct dlt_trial {
	long long id;
	char **ov;		/* the params' "key=value" */
	size_t nov;
	int state;
	int rung;		/* of the last result; -1 before any */
	int epochs;		/* trained, in the search's unit: epochs or steps
				 * (running: the budget it trains to) */
	double value;		/* the metric at that rung; NaN: none */
	int exit;		/* failed: the status of the last attempt */
	int attempt;		/* of the job it is in: 0, then 1.. retries */
	char *tail;		/* failed: the last lines of its log */
} dlt_trial;

typedef struct dlt_search_opts {
	long long slots;	/* trials at once (-j); 0 on resume: the journal's */
	int retries;		/* a crashed job runs again this often; -1 on
				 * resume: the journal's */
	int keep_checkpoints;	/* of trials that asha stopped early */
	int threads;		/* the cores CPU trials share: each gets threads / slots */
	char *const *slot_gpus;	/* CUDA_VISIBLE_DEVICES of each slot; NULL: CPU */
	const char *trainer;	/* the dlt-train to run */
	int gpus_per_trial;	/* > 1: dlt-train --gpus K */
	/* what runs the trials, for the journal: "local", "slurm"; NULL on
	 * resume: the journal's (dlt_search_launcher says which) */
	const char *launcher;
	const char *sbatch_args;	/* NULL: none */
} dlt_search_opts;

typedef struct dlt_search_run dlt_search_run;

/* What the program shows as the search goes. */
typedef struct dlt_search_hooks {
	void *ctx;
	/* a trial started, was promoted, retried, gave a result or failed;
	 * what says which ("start", "promote", "retry", "result", "failed") */
	void (*trial)(void *ctx, const dlt_search_run *r, const dlt_trial *t, const char *what);
	/* about once a second while trials run */
	void (*tick)(void *ctx, const dlt_search_run *r);
	/* nonzero: stop the trials (they checkpoint) and return DLT_EINTR */
	int (*stopping)(void *ctx);
} dlt_search_hooks;

/* A new search of s in dir (created; one that holds a journal is an input
 * error), every trial checked against the base config first. */
int dlt_search_begin(dlt_search_run **r, const dlt_search *s, const char *dir,
		     const dlt_search_opts *o);
/* The search in dir again, after its searcher was killed: its search file
 * (loaded into s, which must outlive r; a changed one is an error) and
 * journal.  dlt_search_go then decides again what it decided, runs what
 * was interrupted from its checkpoints and goes on. */
int dlt_search_reopen(dlt_search_run **r, dlt_search *s, const char *dir,
		      const dlt_search_opts *o);
/* The launcher of the search and its sbatch args (NULL: none), as the
 * options or, on resume without one, the journal said. */
void dlt_search_launcher(const dlt_search_run *r, const char **name, const char **sbatch_args);
/* Runs the search to its end: trials, journal, best.yaml, best.dlt.  On
 * an error it asks the trials that run to stop, so none trains on
 * unwatched (a batch system's jobs outlive the searcher). */
int dlt_search_go(dlt_search_run *r, const dlt_launcher *l, const dlt_search_hooks *h);
/* What the journal of dir says now, for a running or finished search,
 * without running anything; *running: whether a searcher holds it. */
int dlt_search_status(dlt_search_run **r, dlt_search *s, const char *dir, int *running);
void dlt_search_run_free(dlt_search_run *r);

/* The trials of r, best first: by the highest rung reached, the metric,
 * then the number; failed ones last.  Valid until r is freed. */
const dlt_trial *const *dlt_search_leaderboard(const dlt_search_run *r, size_t *n);
const dlt_search *dlt_search_of(const dlt_search_run *r);
/* The budget of each rung (asha; else the base's epochs or steps, one
 * rung). */
const int *dlt_search_rungs(const dlt_search_run *r, int *n);
/* Whether budgets count optimiser steps (min_steps, or a base config
 * with train.steps) rather than epochs: the unit of dlt_trial.epochs,
 * the rungs and dlt_search_epochs. */
int dlt_search_in_steps(const dlt_search_run *r);
/* Epochs (or steps) trained by all trials so far. */
long long dlt_search_epochs(const dlt_search_run *r);
/* The params of t as a JSON object under key (numbers as numbers). */
void dlt_trial_json_params(dlt_json *j, const char *key, const dlt_trial *t);
/* The value of a "key=value" override. */
const char *dlt_trial_value(const char *assignment);
/* A state's name: "waiting", "running", ... */
const char *dlt_trial_state_name(int state);

#endif
