/* A fake libnvidia-ml.so.1 for the tests of dlt-smi: the NVML functions
 * that lib/smi/nvml.c calls, answering from the file named by
 * DLT_FAKE_NVML, read at nvmlInit.  The file has a line "gpu" to start
 * each GPU, then lines "KEY VALUE": name, bus, util, mutil, used, total
 * (bytes), power, limit (mW), temp, sm, mem (MHz), fan, pstate, throttle,
 * ecc, and "proc PID BYTES" for each process.  A key left out makes its
 * function answer NVML_ERROR_NOT_SUPPORTED; a line "lost" makes every call
 * about that GPU answer NVML_ERROR_GPU_IS_LOST (its handle still answers,
 * as NVML's does for a GPU fallen off the bus).  "fail KEY [CODE]" makes
 * the one function that reads KEY answer the NVML error CODE (default 15,
 * GPU is lost): KEY is one of the keys above ("util" or "mutil" fails the
 * utilisation, "used" or "total" the memory), "handle" or "proc". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOT_SUPPORTED 3
#define INVALID_ARGUMENT 2
#define INSUFFICIENT_SIZE 7
#define GPU_IS_LOST 15
#define UNINITIALIZED 1
#define NO_PERMISSION 4
#define TIMEOUT 10

enum { NAME, BUS, UTIL, MUTIL, USED, TOTAL, POWER, LIMIT, TEMP, SM, MEM, FAN, PSTATE,
       THROTTLE, ECC, NKEYS, HANDLE = NKEYS, PROC, NFAIL };
static const char *const keys[NFAIL] = { "name", "bus", "util", "mutil", "used", "total",
	"power", "limit", "temp", "sm", "mem", "fan", "pstate", "throttle", "ecc", "handle",
	"proc" };

struct gpu {
	int lost;
	int fail[NFAIL];	/* the error of the function reading the key; 0 none */
	int have[NKEYS];
	char text[NKEYS][96];
	unsigned long long v[NKEYS];
	unsigned int pid[16];
	unsigned long long pmem[16];
	unsigned int nproc;
};
static struct gpu gpus[8];
static unsigned int ngpus;
static int inited;

int nvmlInit_v2(void)
{
	const char *path = getenv("DLT_FAKE_NVML");
	char line[256];
	FILE *f;

	ngpus = 0;
	memset(gpus, 0, sizeof(gpus));
	if (!path || !(f = fopen(path, "r")))
		return 9;	/* NVML_ERROR_DRIVER_NOT_LOADED */
	while (fgets(line, sizeof(line), f)) {
		struct gpu *g = ngpus ? &gpus[ngpus - 1] : NULL;
		char *val = strchr(line, ' ');
		line[strcspn(line, "\n")] = 0;
		if (val)
			*val++ = 0;
		if (strcmp(line, "gpu") == 0 && ngpus < 8) {
			ngpus++;
			continue;
		}
		if (!g)
			continue;
		if (strcmp(line, "lost") == 0)
			g->lost = 1;
		else if (strcmp(line, "fail") == 0 && val) {
			char key[32];
			int code = GPU_IS_LOST;
			if (sscanf(val, "%31s %i", key, &code) >= 1)
				for (int k = 0; k < NFAIL; k++)
					if (strcmp(key, keys[k]) == 0)
						g->fail[k] = code;
			continue;
		} else if (strcmp(line, "proc") == 0 && val && g->nproc < 16) {
			sscanf(val, "%u %llu", &g->pid[g->nproc], &g->pmem[g->nproc]);
			g->nproc++;
		}
		for (int k = 0; k < NKEYS && val; k++)
			if (strcmp(line, keys[k]) == 0) {
				g->have[k] = 1;
				snprintf(g->text[k], sizeof(g->text[k]), "%s", val);
				g->v[k] = strtoull(val, NULL, 0);
			}
	}
	fclose(f);
	inited = 1;
	return 0;
}

int nvmlShutdown(void)
{
	inited = 0;
	return 0;
}

const char *nvmlErrorString(int r)
{
	switch (r) {
	case 0: return "Success";
	case UNINITIALIZED: return "Uninitialized";
	case INVALID_ARGUMENT: return "Invalid Argument";
	case NOT_SUPPORTED: return "Not Supported";
	case INSUFFICIENT_SIZE: return "Insufficient Size";
	case 9: return "Driver Not Loaded";
	case GPU_IS_LOST: return "GPU is lost";
	case NO_PERMISSION: return "Insufficient Permissions";
	case TIMEOUT: return "Timeout";
	default: return "Unknown Error";
	}
}

int nvmlDeviceGetCount_v2(unsigned int *n)
{
	if (!inited)
		return UNINITIALIZED;
	*n = ngpus;
	return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **dev)
{
	if (i >= ngpus)
		return INVALID_ARGUMENT;
	if (gpus[i].fail[HANDLE])
		return gpus[i].fail[HANDLE];
	*dev = &gpus[i];
	return 0;
}

/* The value of key k of a GPU, or why not; k2 fails the call too. */
#define GET2(k, k2) \
	struct gpu *g = dev; \
	if (g->lost) \
		return GPU_IS_LOST; \
	if (g->fail[k] || g->fail[k2]) \
		return g->fail[k] ? g->fail[k] : g->fail[k2]; \
	if (!g->have[k]) \
		return NOT_SUPPORTED
#define GET(k) GET2(k, k)

int nvmlDeviceGetName(void *dev, char *name, unsigned int len)
{
	GET(NAME);
	snprintf(name, len, "%.95s", g->text[NAME]);
	return 0;
}

typedef struct {
	char busIdLegacy[16];
	unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
	char busId[32];
} pci_t;

int nvmlDeviceGetPciInfo_v3(void *dev, pci_t *p)
{
	GET(BUS);
	memset(p, 0, sizeof(*p));
	snprintf(p->busId, sizeof(p->busId), "%.31s", g->text[BUS]);
	return 0;
}

int nvmlDeviceGetUtilizationRates(void *dev, unsigned int *u)
{
	GET2(UTIL, MUTIL);
	u[0] = (unsigned)g->v[UTIL];
	u[1] = (unsigned)g->v[MUTIL];
	return 0;
}

int nvmlDeviceGetMemoryInfo(void *dev, unsigned long long *m)
{
	GET2(TOTAL, USED);
	m[0] = g->v[TOTAL];
	m[2] = g->v[USED];
	m[1] = m[0] - m[2];
	return 0;
}

#define UINT_GETTER(fn, k) \
	int fn(void *dev, unsigned int *out) { GET(k); *out = (unsigned)g->v[k]; return 0; }
UINT_GETTER(nvmlDeviceGetPowerUsage, POWER)
UINT_GETTER(nvmlDeviceGetEnforcedPowerLimit, LIMIT)
UINT_GETTER(nvmlDeviceGetFanSpeed, FAN)

int nvmlDeviceGetTemperature(void *dev, int sensor, unsigned int *t)
{
	GET(TEMP);
	*t = (unsigned)g->v[TEMP];
	return sensor == 0 ? 0 : INVALID_ARGUMENT;
}

int nvmlDeviceGetClockInfo(void *dev, int type, unsigned int *mhz)
{
	GET(type == 1 ? SM : MEM);
	*mhz = (unsigned)g->v[type == 1 ? SM : MEM];
	return type == 1 || type == 2 ? 0 : INVALID_ARGUMENT;
}

int nvmlDeviceGetPerformanceState(void *dev, int *p)
{
	GET(PSTATE);
	*p = (int)g->v[PSTATE];
	return 0;
}

int nvmlDeviceGetCurrentClocksThrottleReasons(void *dev, unsigned long long *r)
{
	GET(THROTTLE);
	*r = g->v[THROTTLE];
	return 0;
}

int nvmlDeviceGetTotalEccErrors(void *dev, int type, int counter, unsigned long long *n)
{
	GET(ECC);
	*n = type == 1 && counter == 0 ? g->v[ECC] : 0;
	return 0;
}

typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId, computeInstanceId;
} proc_t;

int nvmlDeviceGetComputeRunningProcesses_v3(void *dev, unsigned int *n, proc_t *p)
{
	struct gpu *g = dev;

	if (g->lost)
		return GPU_IS_LOST;
	if (g->fail[PROC])
		return g->fail[PROC];
	if (*n < g->nproc) {
		*n = g->nproc;
		return INSUFFICIENT_SIZE;
	}
	for (unsigned int i = 0; i < g->nproc; i++) {
		p[i].pid = g->pid[i];
		p[i].usedGpuMemory = g->pmem[i];
		p[i].gpuInstanceId = p[i].computeInstanceId = 0xffffffffu;
	}
	*n = g->nproc;
	return 0;
}
