/* NVML through dlopen.  The declarations below follow nvml.h of the
 * driver's API 10 to 12; only what dlt-smi reads. */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "smi/nvml.h"
#include "util/util.h"

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
enum {
	NVML_SUCCESS = 0,
	NVML_ERROR_NOT_SUPPORTED = 3,
	NVML_ERROR_INSUFFICIENT_SIZE = 7,
	NVML_ERROR_FUNCTION_NOT_FOUND = 13,
};
enum { NVML_TEMPERATURE_GPU = 0 };
enum { NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 };
enum { NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1 };
enum { NVML_VOLATILE_ECC = 0 };

typedef struct {
	char busIdLegacy[16];
	unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
	char busId[32];
} nvmlPciInfo_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
/* _v2 leaves the driver's reserved memory out of used, as nvidia-smi
 * shows it; version is the struct's size and 2 << 24 */
typedef struct {
	unsigned int version;
	unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
#define NVML_MEMORY_V2 ((unsigned int)(sizeof(nvmlMemory_v2_t) | 2u << 24))
/* nvmlDeviceGetComputeRunningProcesses (v1) fills the first; _v2 and _v3
 * the second: the size of an element differs, so each gets its own. */
typedef struct { unsigned int pid; unsigned long long usedGpuMemory; } nvmlProcessInfo_v1_t;
typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_v2_t;

/* NVML's value for "memory used by a process" that it cannot tell */
#define NVML_VALUE_NOT_AVAILABLE 0xffffffffffffffffULL

struct dlt_nvml {
	void *lib;
	unsigned count;
	nvmlReturn_t (*init)(void);
	nvmlReturn_t (*shutdown)(void);
	const char *(*error_string)(nvmlReturn_t);
	nvmlReturn_t (*get_count)(unsigned int *);
	nvmlReturn_t (*get_handle)(unsigned int, nvmlDevice_t *);
	nvmlReturn_t (*get_name)(nvmlDevice_t, char *, unsigned int);
	nvmlReturn_t (*get_pci)(nvmlDevice_t, nvmlPciInfo_t *);
	nvmlReturn_t (*get_util)(nvmlDevice_t, nvmlUtilization_t *);
	nvmlReturn_t (*get_mem)(nvmlDevice_t, nvmlMemory_t *);
	nvmlReturn_t (*get_mem_v2)(nvmlDevice_t, nvmlMemory_v2_t *);
	nvmlReturn_t (*get_power)(nvmlDevice_t, unsigned int *);
	nvmlReturn_t (*get_power_limit)(nvmlDevice_t, unsigned int *);
	nvmlReturn_t (*get_temp)(nvmlDevice_t, int, unsigned int *);
	nvmlReturn_t (*get_clock)(nvmlDevice_t, int, unsigned int *);
	nvmlReturn_t (*get_fan)(nvmlDevice_t, unsigned int *);
	nvmlReturn_t (*get_pstate)(nvmlDevice_t, int *);
	nvmlReturn_t (*get_throttle)(nvmlDevice_t, unsigned long long *);
	nvmlReturn_t (*get_ecc)(nvmlDevice_t, int, int, unsigned long long *);
	nvmlReturn_t (*get_procs_v2)(nvmlDevice_t, unsigned int *, nvmlProcessInfo_v2_t *);
	nvmlReturn_t (*get_procs_v1)(nvmlDevice_t, unsigned int *, nvmlProcessInfo_v1_t *);
};

static void *sym(void *lib, const char *const *names)
{
	void *p = NULL;
	for (; *names && !p; names++)
		p = dlsym(lib, *names);
	return p;
}

#define LOAD(field, ...) \
	(nv->field = (__typeof__(nv->field))sym(nv->lib, (const char *const[]){ __VA_ARGS__, NULL }))

int dlt_nvml_open(dlt_nvml **out, const char *path)
{
	dlt_nvml *nv;
	unsigned int n = 0;
	nvmlReturn_t r;
	int rc;

	*out = NULL;
	if (!path || !*path)
		path = "libnvidia-ml.so.1";
	if (!(nv = dlt_calloc(1, sizeof(*nv))))
		return DLT_ENOMEM;
	if (!(nv->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL))) {
		rc = dlt_error(DLT_EFAIL, "no NVIDIA driver: %s not found", path);
		goto fail;
	}
	LOAD(init, "nvmlInit_v2", "nvmlInit");
	LOAD(shutdown, "nvmlShutdown");
	LOAD(error_string, "nvmlErrorString");
	LOAD(get_count, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
	LOAD(get_handle, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
	LOAD(get_name, "nvmlDeviceGetName");
	LOAD(get_pci, "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2");
	LOAD(get_util, "nvmlDeviceGetUtilizationRates");
	LOAD(get_mem, "nvmlDeviceGetMemoryInfo");
	LOAD(get_mem_v2, "nvmlDeviceGetMemoryInfo_v2");
	LOAD(get_power, "nvmlDeviceGetPowerUsage");
	LOAD(get_power_limit, "nvmlDeviceGetEnforcedPowerLimit");
	LOAD(get_temp, "nvmlDeviceGetTemperature");
	LOAD(get_clock, "nvmlDeviceGetClockInfo");
	LOAD(get_fan, "nvmlDeviceGetFanSpeed");
	LOAD(get_pstate, "nvmlDeviceGetPerformanceState");
	LOAD(get_throttle, "nvmlDeviceGetCurrentClocksThrottleReasons",
	     "nvmlDeviceGetCurrentClocksEventReasons");
	LOAD(get_ecc, "nvmlDeviceGetTotalEccErrors");
	LOAD(get_procs_v2, "nvmlDeviceGetComputeRunningProcesses_v3",
	     "nvmlDeviceGetComputeRunningProcesses_v2");
	LOAD(get_procs_v1, "nvmlDeviceGetComputeRunningProcesses");
	if (!nv->init || !nv->shutdown || !nv->get_count || !nv->get_handle) {
		rc = dlt_error(DLT_EFAIL, "no NVIDIA driver: %s: not the NVIDIA management library",
			       path);
		goto fail;
	}
	if ((r = nv->init()) != NVML_SUCCESS) {
		rc = dlt_error(DLT_EFAIL, "no NVIDIA driver: %s",
			       nv->error_string ? nv->error_string(r) : "nvmlInit failed");
		goto fail;
	}
	if ((r = nv->get_count(&n)) != NVML_SUCCESS) {
		rc = dlt_error(DLT_EFAIL, "NVML: %s",
			       nv->error_string ? nv->error_string(r) : "nvmlDeviceGetCount failed");
		nv->shutdown();
		goto fail;
	}
	nv->count = n;
	*out = nv;
	return 0;
fail:
	if (nv->lib)
		dlclose(nv->lib);
	free(nv);
	return rc;
}

void dlt_nvml_close(dlt_nvml *nv)
{
	if (!nv)
		return;
	nv->shutdown();
	dlclose(nv->lib);
	free(nv);
}

unsigned dlt_nvml_count(const dlt_nvml *nv)
{
	return nv->count;
}

/* The queries as dlt-smi's --query names their fields. */
static const char *const query_names[DLT_GPU_NQUERIES] = {
	[DLT_GPU_Q_HANDLE] = "handle",
	[DLT_GPU_Q_NAME] = "name",
	[DLT_GPU_Q_PCI] = "pci.bus_id",
	[DLT_GPU_Q_UTIL] = "utilization",
	[DLT_GPU_Q_MEM] = "memory",
	[DLT_GPU_Q_POWER] = "power.draw",
	[DLT_GPU_Q_POWER_LIMIT] = "power.limit",
	[DLT_GPU_Q_TEMP] = "temperature.gpu",
	[DLT_GPU_Q_CLOCK_SM] = "clocks.sm",
	[DLT_GPU_Q_CLOCK_MEM] = "clocks.mem",
	[DLT_GPU_Q_FAN] = "fan.speed",
	[DLT_GPU_Q_PSTATE] = "pstate",
	[DLT_GPU_Q_THROTTLE] = "clocks_throttle_reasons.active",
	[DLT_GPU_Q_ECC] = "ecc.errors",
	[DLT_GPU_Q_PROCS] = "processes",
};

/* One GPU being sampled: what each query returned, for g->error. */
struct probe {
	const dlt_nvml *nv;
	dlt_gpu *g;
	nvmlReturn_t r[DLT_GPU_NQUERIES];
};

/* A call's result: 0 when it answered, 1 when unsupported (the field
 * stays n/a), -1 when it failed: the query is marked failed. */
static int check(struct probe *p, int q, nvmlReturn_t r)
{
	p->r[q] = r;
	if (r == NVML_SUCCESS)
		return 0;
	if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_FUNCTION_NOT_FOUND)
		return 1;
	p->g->failed |= 1u << q;
	return -1;
}

static void errstr(const dlt_nvml *nv, nvmlReturn_t r, char *msg, size_t size)
{
	const char *s = nv->error_string ? nv->error_string(r) : NULL;

	snprintf(msg, size, "%s", s ? s : "unknown error");
	/* NVML's messages are in title case ("Unknown Error"): ours are
	 * lowercase, but for names ("GPU is lost", "Corrupted infoROM") */
	for (char *w = msg; *w; w += strcspn(w, " ")) {
		size_t n, caps = 0;
		w += strspn(w, " ");
		n = strcspn(w, " ");
		for (size_t i = 0; i < n; i++)
			caps += w[i] >= 'A' && w[i] <= 'Z';
		if (caps == 1 && w[0] >= 'A' && w[0] <= 'Z')
			w[0] = (char)(w[0] - 'A' + 'a');
	}
}

static void add(char *buf, size_t size, size_t *len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void add(char *buf, size_t size, size_t *len, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*len + 1 >= size)
		return;
	va_start(ap, fmt);
	n = vsnprintf(buf + *len, size - *len, fmt, ap);
	va_end(ap);
	if (n > 0)
		*len = *len + (size_t)n < size ? *len + (size_t)n : size - 1;
}

/* g->error from the failed queries: those that failed alike in one group,
 * "name, pci.bus_id: MESSAGE", the groups in query order, "; " apart. */
static void describe(struct probe *p)
{
	dlt_gpu *g = p->g;
	char msg[96];
	size_t len = 0;
	unsigned done = 0;
	int all = 1, first = -1;

	g->error[0] = 0;
	if (!g->failed)
		return;
	if (DLT_GPU_FAILED(g, DLT_GPU_Q_HANDLE)) {
		errstr(p->nv, p->r[DLT_GPU_Q_HANDLE], msg, sizeof(msg));
		snprintf(g->error, sizeof(g->error), "handle: %s", msg);
		return;
	}
	for (int q = DLT_GPU_Q_HANDLE + 1; q < DLT_GPU_NQUERIES; q++) {
		if (first < 0 && DLT_GPU_FAILED(g, q))
			first = q;
		if (!DLT_GPU_FAILED(g, q) || p->r[q] != p->r[first])
			all = 0;
	}
	/* a GPU fallen off the bus fails them all: one line says so */
	if (all) {
		errstr(p->nv, p->r[first], msg, sizeof(msg));
		snprintf(g->error, sizeof(g->error), "all queries: %s", msg);
		return;
	}
	for (int q = first; q < DLT_GPU_NQUERIES; q++) {
		if (!DLT_GPU_FAILED(g, q) || (done >> q & 1u))
			continue;
		add(g->error, sizeof(g->error), &len, "%s", len ? "; " : "");
		for (int k = q; k < DLT_GPU_NQUERIES; k++)
			if (DLT_GPU_FAILED(g, k) && p->r[k] == p->r[q]) {
				add(g->error, sizeof(g->error), &len, "%s%s", k == q ? "" : ", ",
				    query_names[k]);
				done |= 1u << k;
			}
		errstr(p->nv, p->r[q], msg, sizeof(msg));
		add(g->error, sizeof(g->error), &len, ": %s", msg);
	}
}

/* A function the library lacks is as unsupported. */
#define CALL(fn, ...) (nv->fn ? nv->fn(__VA_ARGS__) : NVML_ERROR_FUNCTION_NOT_FOUND)

static void proc_name(long long pid, char *name, size_t size)
{
	char path[64];
	FILE *f;

	name[0] = 0;
	snprintf(path, sizeof(path), "/proc/%lld/comm", pid);
	if ((f = fopen(path, "r"))) {
		if (fgets(name, (int)size, f))
			name[strcspn(name, "\n")] = 0;
		fclose(f);
	}
}

static int add_proc(dlt_gpu *g, unsigned int pid, unsigned long long used)
{
	dlt_gpu_proc *p = &g->procs[g->nprocs++];
	p->pid = pid;
	p->mem_mib = used == NVML_VALUE_NOT_AVAILABLE ? DLT_GPU_NA : (double)used / (1 << 20);
	proc_name(pid, p->name, sizeof(p->name));
	return 0;
}

/* The compute processes, through _v3/_v2 (four fields an entry) where the
 * library has them, else the first version (two fields). */
static int sample_procs(dlt_nvml *nv, nvmlDevice_t dev, struct probe *pr)
{
	dlt_gpu *g = pr->g;
	unsigned int n = 0;
	nvmlReturn_t r;

	for (int tries = 0; tries < 4; tries++) {
		unsigned int cap = n + 8;
		void *buf;

		n = cap;
		if (!(buf = dlt_calloc(cap, sizeof(nvmlProcessInfo_v2_t))))
			return DLT_ENOMEM;
		r = nv->get_procs_v2 ? nv->get_procs_v2(dev, &n, buf) :
			CALL(get_procs_v1, dev, &n, buf);
		if (r == NVML_SUCCESS && n <= cap) {
			if (n && !(g->procs = dlt_calloc(n, sizeof(*g->procs)))) {
				free(buf);
				return DLT_ENOMEM;
			}
			for (unsigned int i = 0; i < n; i++) {
				if (nv->get_procs_v2) {
					const nvmlProcessInfo_v2_t *p = (nvmlProcessInfo_v2_t *)buf + i;
					add_proc(g, p->pid, p->usedGpuMemory);
				} else {
					const nvmlProcessInfo_v1_t *p = (nvmlProcessInfo_v1_t *)buf + i;
					add_proc(g, p->pid, p->usedGpuMemory);
				}
			}
			free(buf);
			return 0;
		}
		free(buf);
		if (r != NVML_ERROR_INSUFFICIENT_SIZE)
			break;
	}
	check(pr, DLT_GPU_Q_PROCS, r);
	return 0;
}

int dlt_nvml_sample(dlt_nvml *nv, unsigned index, dlt_gpu *g)
{
	struct probe p = { .nv = nv, .g = g };
	nvmlDevice_t dev = NULL;
	nvmlPciInfo_t pci;
	nvmlUtilization_t util;
	nvmlMemory_t mem;
	nvmlMemory_v2_t mem2 = { .version = NVML_MEMORY_V2 };
	unsigned int u;
	unsigned long long ull;
	int ps, rc;

	memset(g, 0, sizeof(*g));
	g->index = index;
	g->util_gpu = g->util_mem = g->mem_used = g->mem_total = DLT_GPU_NA;
	g->power = g->power_limit = g->temp = g->clock_sm = g->clock_mem = DLT_GPU_NA;
	g->fan = g->ecc = DLT_GPU_NA;
	g->pstate = -1;
	snprintf(g->name, sizeof(g->name), "n/a");
	snprintf(g->bus_id, sizeof(g->bus_id), "n/a");
	if (check(&p, DLT_GPU_Q_HANDLE, nv->get_handle(index, &dev)) != 0) {
		/* nothing else can be asked: every query failed with it */
		g->failed = (1u << DLT_GPU_NQUERIES) - 1;
		describe(&p);
		return 0;
	}
	/* Every query is made even after one fails: a GPU that answers some
	 * and not others still says which card it is and what it answered. */
	if (check(&p, DLT_GPU_Q_NAME, CALL(get_name, dev, g->name, sizeof(g->name))) != 0)
		snprintf(g->name, sizeof(g->name), "n/a");
	if (check(&p, DLT_GPU_Q_PCI, CALL(get_pci, dev, &pci)) == 0)
		snprintf(g->bus_id, sizeof(g->bus_id), "%s", pci.busId);
	if (check(&p, DLT_GPU_Q_UTIL, CALL(get_util, dev, &util)) == 0) {
		g->util_gpu = util.gpu;
		g->util_mem = util.memory;
	}
	if (nv->get_mem_v2) {
		if (check(&p, DLT_GPU_Q_MEM, CALL(get_mem_v2, dev, &mem2)) == 0) {
			g->mem_used = (double)mem2.used / (1 << 20);
			g->mem_total = (double)mem2.total / (1 << 20);
		}
	} else if (check(&p, DLT_GPU_Q_MEM, CALL(get_mem, dev, &mem)) == 0) {
		g->mem_used = (double)mem.used / (1 << 20);
		g->mem_total = (double)mem.total / (1 << 20);
	}
	if (check(&p, DLT_GPU_Q_POWER, CALL(get_power, dev, &u)) == 0)
		g->power = u / 1000.0;
	if (check(&p, DLT_GPU_Q_POWER_LIMIT, CALL(get_power_limit, dev, &u)) == 0)
		g->power_limit = u / 1000.0;
	if (check(&p, DLT_GPU_Q_TEMP, CALL(get_temp, dev, NVML_TEMPERATURE_GPU, &u)) == 0)
		g->temp = u;
	if (check(&p, DLT_GPU_Q_CLOCK_SM, CALL(get_clock, dev, NVML_CLOCK_SM, &u)) == 0)
		g->clock_sm = u;
	if (check(&p, DLT_GPU_Q_CLOCK_MEM, CALL(get_clock, dev, NVML_CLOCK_MEM, &u)) == 0)
		g->clock_mem = u;
	if (check(&p, DLT_GPU_Q_FAN, CALL(get_fan, dev, &u)) == 0)
		g->fan = u;
	if (check(&p, DLT_GPU_Q_PSTATE, CALL(get_pstate, dev, &ps)) == 0 && ps >= 0 && ps <= 15)
		g->pstate = ps;
	if (check(&p, DLT_GPU_Q_THROTTLE, CALL(get_throttle, dev, &ull)) == 0) {
		g->have_throttle = 1;
		g->throttle = ull;
	}
	if (check(&p, DLT_GPU_Q_ECC, CALL(get_ecc, dev, NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
					  NVML_VOLATILE_ECC, &ull)) == 0)
		g->ecc = (double)ull;
	if ((rc = sample_procs(nv, dev, &p)) < 0) {
		dlt_gpu_free(g);
		return rc;
	}
	describe(&p);
	return 0;
}

void dlt_gpu_free(dlt_gpu *g)
{
	free(g->procs);
	g->procs = NULL;
	g->nprocs = 0;
}
