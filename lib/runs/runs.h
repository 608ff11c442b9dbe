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
/* 1 when more of metric is better (*.acc and the rest), -1 for *loss. */
int dlt_runs_mode(const char *metric);
/* The best value of s by mode (1 max, -1 min); NaN when s is empty. */
double dlt_runs_best_value(const dlt_series *s, int mode);
/* The metric that ls shows by default: test.acc if a run has it, else
 * val.acc, else train.loss. */
const char *dlt_runs_main_metric(const dlt_runinfo *runs, size_t n);
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
