/* smi: what dlt-smi shows besides the GPUs: the host's load and memory,
 * and the training jobs of a tree of run directories (read by lib/runs).
 * The library reads, it never prints. */
#ifndef DLT_SMI_H
#define DLT_SMI_H

#include "util/util.h"

typedef struct dlt_smi_host {
	double load1, load5, load15;	/* /proc/loadavg */
	int cpus;
	double mem_total, mem_avail;	/* MiB, /proc/meminfo; 0 unknown */
} dlt_smi_host;

/* /proc/loadavg and /proc/meminfo; DLT_EIO when neither can be read. */
int dlt_smi_host_read(dlt_smi_host *h);

typedef struct dlt_smi_job {
	char *name;		/* the run's directory below the runs directory */
	char status[16];	/* running, stopped, done, failed, dead, unknown */
	long long pid;		/* of the process that wrote the status; 0 unknown */
	long long epoch, epochs, step;	/* epochs 0: unknown */
	double samples_per_s;	/* NaN unknown */
	double loss;		/* the last train.loss; NaN unknown */
	char metric[32];	/* the last evaluation's metric: test.acc, val.acc; "" none */
	double metric_value;
	double eta;		/* seconds left, for a running job; NaN unknown */
	char slurm_job[64];	/* its Slurm job's id; "" none */
	char node[256];		/* the host it runs or ran on; "" unknown */
} dlt_smi_job;

/* The jobs of the runs at or below dir, sorted by name.  A dir that does
 * not exist gives no jobs when missing_ok, else a DLT_EINPUT error; a run
 * that cannot be read is left out. */
int dlt_smi_jobs(const char *dir, int missing_ok, dlt_smi_job **jobs, size_t *n);
void dlt_smi_jobs_free(dlt_smi_job *jobs, size_t n);

#endif
