/* search: hyper-parameter search configs and their trials, for dlt-search.
 *
 * A search file names a base training config, a metric and a space of
 * params (dotted config keys, as -s takes them).  The samplers turn trial
 * i into a list of "key=value" overrides, the same for the same file and
 * seed on every machine: grid counts through the choices (the last param
 * fastest), random draws trial i from a dlt_rng keyed by the seed on
 * stream i, so a trial does not depend on the ones before it.  The
 * library reads and samples; running trials is the program's job. */
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
	int eta, min_epochs, max_epochs;	/* asha */
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

#endif
