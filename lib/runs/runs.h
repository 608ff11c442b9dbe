/* runs: reading run directories for dlt-runs (experiment tracking).
 *
 * A run is a directory holding metrics.jsonl (what dlt_run_open writes
 * first); config.yaml and status are read when present.  Metrics are
 * named SPLIT.FIELD: train records give train.loss, train.acc, train.lr,
 * eval records val.* and test.*; a name without a dot means train.NAME,
 * so "loss" is train.loss.  The library reads, it never prints. */
#ifndef DLT_RUNS_H
#define DLT_RUNS_H

#include "util/util.h"

/* One value of a metric and where it was taken.  epoch is fractional for
 * train records (step / steps of an epoch) once an epoch has ended, so
 * curves over epochs are not stairs. */
typedef struct dlt_point {
	double step, epoch, time, value;
} dlt_point;

typedef struct dlt_series {
	char *name;		/* "train.loss", "test.acc", ... */
	dlt_point *p;
	size_t n, cap;
} dlt_series;

typedef struct dlt_kv {
	char *key, *value;	/* "train.optimizer.adam.lr", "0.01" */
} dlt_kv;

typedef struct dlt_runinfo {
	char *dir;
	/* running, stopped, done, failed, or dead: "running" written by a
	 * process of this host that is gone; unknown without a status file */
	char status[16];
	long long pid;
	char host[256];
	char slurm_job[64];	/* the Slurm job that wrote the status; "" none */
	double start;		/* wall clock; 0 unknown */
	double duration;	/* seconds of training, over all restarts */
	long long epoch;	/* the last epoch reached */
	long long epochs;	/* train.epochs of the config; 0 unknown */
	long long step;
	double samples_per_s;	/* training throughput; 0 unknown */
	dlt_kv *config;		/* config.yaml flattened to dotted keys, in order */
	size_t nconfig;
	dlt_series *series;	/* in the order first seen */
	size_t nseries;
} dlt_runinfo;

/* Whether dir holds a run. */
int dlt_runs_is_run(const char *dir);
/* The runs at or below dir (a run directory is not searched further),
 * appended to *paths (malloc'd strings, sorted); dot directories and
 * symbolic-link loops are skipped.  A dir that is no directory is a
 * DLT_EINPUT error. */
int dlt_runs_find(const char *dir, char ***paths, size_t *n);

/* Reads the run in dir.  A last line of metrics.jsonl without its newline
 * (cut by a kill) is left out; any other line that is not JSON is a
 * DLT_EINPUT error "dir/metrics.jsonl:LINE: ...". */
int dlt_runs_load(dlt_runinfo *r, const char *dir);
void dlt_runs_free(dlt_runinfo *r);

/* The series of a metric (aliases resolved), NULL if the run has none. */
const dlt_series *dlt_runs_series(const dlt_runinfo *r, const char *metric);
/* The value of a flattened config key, NULL if absent. */
const char *dlt_runs_config(const dlt_runinfo *r, const char *key);
/* The canonical name of a metric: "loss" is "train.loss"; malloc'd. */
char *dlt_runs_metric_name(const char *metric);
/* The best value of s by mode (1 max, -1 min); NaN when s is empty. */
double dlt_runs_best_value(const dlt_series *s, int mode);
/* The metric that ls shows by default: the first of test.bpb, val.bpb,
 * test.acc, val.acc, test.rmse, val.rmse, test.f1, val.f1 that a run has,
 * else train.loss.
 * Which way a metric improves is dlt_metric_mode's (util.h). */
const char *dlt_runs_main_metric(const dlt_runinfo *runs, size_t n);
/* Choosing and ordering runs, for ls and best. */

/* Whether w is a filter KEY=VALUE or KEY!=VALUE; DLT_EINPUT when not. */
int dlt_runs_where_check(const char *w);
/* Keeps, in order, the runs of status one of the comma-separated list
 * status (NULL: any) whose config.yaml has every KEY=VALUE of where (a
 * number equal as a number: 1e-2 is 0.01), and none of its KEY!=VALUE;
 * frees the others and sets *n.  A key that no run has is a typo, not a
 * filter: DLT_EINPUT "no run has config key 'KEY'", and nothing changes. */
int dlt_runs_filter(dlt_runinfo *runs, size_t *n, const char *const *where, size_t nwhere,
		    const char *status);
/* Whether key is a property of every run that dlt_runs_sort orders by:
 * run, status, start, duration, epochs, samples/s (samples_per_s). */
int dlt_runs_is_property(const char *key);
/* Orders runs by key: a property (run and status by name, the others by
 * number, smallest first) or a metric (by its best value, best first; runs
 * without it last, whichever the direction); reverse turns it over.  Ties
 * go by directory.  key NULL: the order they are in, turned over when
 * reverse. */
void dlt_runs_sort(dlt_runinfo *runs, size_t n, const char *key, int reverse);
/* The run with the best value of metric by mode (1 max, -1 min), the first
 * of equals; NULL when no run has a value of it. */
const dlt_runinfo *dlt_runs_best(const dlt_runinfo *runs, size_t n, const char *metric,
				 int mode);

/* The best checkpoint of a run: ckpt/best.dlt, else model.dlt, else the
 * newest ckpt/step-*.dlt; malloc'd in *path.  DLT_EFAIL when none. */
int dlt_runs_checkpoint(const dlt_runinfo *r, char **path);

/* A gnuplot script drawing the metrics of the runs, one panel per metric
 * with a curve per run, data inline.  x: "step", "epoch" or "time";
 * terminal: "svg", "png" or "dumb"; output: the file to write, NULL for
 * standard output; width and height: of the dumb terminal. */
typedef struct dlt_plot {
	const char *const *metrics;
	size_t nmetrics;
	const char *x;
	const char *terminal;
	const char *output;
	int width, height;
} dlt_plot;
int dlt_runs_gnuplot(const dlt_plot *p, const dlt_runinfo *runs, size_t n, dlt_buf *out);

#endif
