/* nvml: the GPUs of this machine through NVIDIA's management library,
 * opened at run time (dlopen), so dlt builds and runs without a driver.
 * Our own declarations of the few NVML functions used stand in for
 * nvml.h.  The library reads, it never prints. */
#ifndef DLT_NVML_H
#define DLT_NVML_H

#include <stdint.h>

/* A value NVML could not give: unsupported by this GPU or driver (n/a). */
#define DLT_GPU_NA (-1.0)

typedef struct dlt_gpu_proc {
	long long pid;
	char name[64];		/* from /proc/PID/comm; "" when gone */
	double mem_mib;		/* DLT_GPU_NA when NVML does not say */
} dlt_gpu_proc;

/* The NVML queries of a sample, each of which may fail on its own.  A
 * failed handle fails them all: nothing else could be asked. */
enum {
	DLT_GPU_Q_HANDLE, DLT_GPU_Q_NAME, DLT_GPU_Q_PCI, DLT_GPU_Q_UTIL, DLT_GPU_Q_MEM,
	DLT_GPU_Q_POWER, DLT_GPU_Q_POWER_LIMIT, DLT_GPU_Q_TEMP, DLT_GPU_Q_CLOCK_SM,
	DLT_GPU_Q_CLOCK_MEM, DLT_GPU_Q_FAN, DLT_GPU_Q_PSTATE, DLT_GPU_Q_THROTTLE,
	DLT_GPU_Q_ECC, DLT_GPU_Q_PROCS, DLT_GPU_NQUERIES
};
#define DLT_GPU_FAILED(g, q) (((g)->failed >> (q)) & 1u)

/* One sample of one GPU.  Numbers are DLT_GPU_NA where unsupported or
 * where their query failed; failed says which did. */
typedef struct dlt_gpu {
	unsigned index;
	unsigned failed;	/* bit DLT_GPU_Q_* of each query that failed */
	/* "" when every query answered, else which failed and why:
	 * "utilization: GPU is lost", "name, processes: Unknown Error;
	 * fan.speed: Timeout", "all queries: GPU is lost" (every one after
	 * the handle, with one error), "handle: GPU is lost" */
	char error[1024];
	char name[96];
	char bus_id[32];
	double util_gpu, util_mem;	/* % */
	double mem_used, mem_total;	/* MiB */
	double power, power_limit;	/* W */
	double temp;		/* C */
	double clock_sm, clock_mem;	/* MHz */
	double fan;		/* % */
	int pstate;		/* 0..15; -1 unknown */
	int have_throttle;
	uint64_t throttle;	/* bit mask of clocks throttle reasons */
	double ecc;		/* uncorrected errors since boot (volatile) */
	dlt_gpu_proc *procs;
	int nprocs;
} dlt_gpu;

typedef struct dlt_nvml dlt_nvml;

/* Opens NVML: path, or libnvidia-ml.so.1 when NULL.  A library that is
 * missing is DLT_EFAIL "no NVIDIA driver: PATH not found"; one that fails
 * to initialise is DLT_EFAIL "no NVIDIA driver: MESSAGE". */
int dlt_nvml_open(dlt_nvml **nv, const char *path);
void dlt_nvml_close(dlt_nvml *nv);
/* The number of GPUs NVML sees. */
unsigned dlt_nvml_count(const dlt_nvml *nv);
/* Samples GPU index into *g (freed by dlt_gpu_free): every query is made,
 * and what answered is kept when others fail.  A GPU that fails is no
 * error of the call: g->failed and g->error say what; DLT_ENOMEM only. */
int dlt_nvml_sample(dlt_nvml *nv, unsigned index, dlt_gpu *g);
void dlt_gpu_free(dlt_gpu *g);

#endif
