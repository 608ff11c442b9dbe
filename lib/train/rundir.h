/* The run directory of a training run (design.md, "Run directory"). */
#ifndef DLT_RUNDIR_H
#define DLT_RUNDIR_H

#include <stdio.h>

#include "config/config.h"

typedef struct dlt_run {
	char *dir;		/* NULL: no run directory, every call a no-op */
	FILE *metrics;
	double start;		/* wall clock, for status */
	double start_mono;	/* monotonic, for the "time" of metrics */
} dlt_run;

/* Creates dir (and parents) with config.yaml (resolved c) and status
 * "running"; a directory that already holds a run is an input error. */
int dlt_run_open(dlt_run *r, const char *dir, const dlt_config *c);
/* Opens the run in dir again to go on with it: metrics.jsonl keeps its
 * records up to those of kept (the checkpoint's, without timings: they
 * are matched by count, "resume" records aside) and loses the rest; when
 * it lacks some, it is written anew from kept.  *time gets the "time" of
 * the last record kept (0 if none). */
int dlt_run_reopen(dlt_run *r, const char *dir, const char *kept, double *time);
/* Writes config.yaml (resolved c) anew, atomically. */
int dlt_run_write_config(const dlt_run *r, const dlt_config *c);
int dlt_run_record(dlt_run *r, const char *json);	/* a line of metrics.jsonl */
int dlt_run_status(dlt_run *r, const char *status);	/* running, stopped, done, failed */
int dlt_run_close(dlt_run *r);
/* The path of a file in the run directory, malloc'd (NULL: out of memory). */
char *dlt_run_file(const dlt_run *r, const char *name);

#endif
