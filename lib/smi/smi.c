/* The host line and the jobs of dlt-smi. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runs/runs.h"
#include "smi/smi.h"

int dlt_smi_host_read(dlt_smi_host *h)
{
	char *text = NULL, *p;
	size_t len;
	int got = 0;

	memset(h, 0, sizeof(*h));
	h->cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (dlt_read_file("/proc/loadavg", 1 << 12, &text, &len) == 0 &&
	    sscanf(text, "%lf %lf %lf", &h->load1, &h->load5, &h->load15) == 3)
		got = 1;
	free(text);
	text = NULL;
	if (dlt_read_file("/proc/meminfo", 1 << 16, &text, &len) == 0) {
		if ((p = strstr(text, "MemTotal:")))
			h->mem_total = strtod(p + 9, NULL) / 1024;
		if ((p = strstr(text, "MemAvailable:")))
			h->mem_avail = strtod(p + 13, NULL) / 1024;
		got |= h->mem_total > 0;
	}
	free(text);
	return got ? 0 : dlt_error(DLT_EIO, "/proc/loadavg, /proc/meminfo: cannot be read");
}

static double last_value(const dlt_series *s)
{
	return s && s->n ? s->p[s->n - 1].value : NAN;
}

/* Steps of an epoch: an evaluation ends an epoch, so its step / epoch;
 * else a train record past epoch 1, whose epoch lib/runs made
 * fractional (step / steps of an epoch).  0 unknown. */
static double steps_per_epoch(const dlt_runinfo *r)
{
	const dlt_series *loss = dlt_runs_series(r, "train.loss");

	for (size_t i = 0; i < r->nseries; i++) {
		const dlt_series *s = &r->series[i];
		if (strncmp(s->name, "train.", 6) == 0 || !s->n)
			continue;
		if (s->p[0].epoch >= 1 && s->p[0].step > 0)
			return s->p[0].step / s->p[0].epoch;
	}
	if (r->epoch > 1 && loss && loss->n) {
		const dlt_point *p = &loss->p[loss->n - 1];
		if (p->epoch > 0 && p->step > 0)
			return p->step / p->epoch;
	}
	return 0;
}

/* Seconds left: the steps left at the time per step of the last two train
 * records. */
static double eta(const dlt_runinfo *r)
{
	const dlt_series *loss = dlt_runs_series(r, "train.loss");
	double per = steps_per_epoch(r), dt, ds;

	if (strcmp(r->status, "running") != 0 || r->epochs <= 0 || per <= 0 || !loss ||
	    loss->n < 2)
		return NAN;
	dt = loss->p[loss->n - 1].time - loss->p[loss->n - 2].time;
	ds = loss->p[loss->n - 1].step - loss->p[loss->n - 2].step;
	if (!(dt > 0 && ds > 0))
		return NAN;
	double left = (double)r->epochs * per - loss->p[loss->n - 1].step;
	return left > 0 ? left * dt / ds : 0;
}

static int job(dlt_smi_job *j, const char *dir, const char *path)
{
	dlt_runinfo r;
	size_t n = strlen(dir);
	const char *name = path, *metric;

	if (dlt_runs_load(&r, path) < 0)
		return 1;
	if (strncmp(path, dir, n) == 0 && path[n] == '/')
		name = path + n + 1;
	else if (strcmp(path, dir) == 0 && strrchr(path, '/') && strrchr(path, '/')[1])
		name = strrchr(path, '/') + 1;
	memset(j, 0, sizeof(*j));
	if (!(j->name = dlt_strdup(name))) {
		dlt_runs_free(&r);
		return DLT_ENOMEM;
	}
	snprintf(j->status, sizeof(j->status), "%s", r.status);
	j->pid = r.pid;
	snprintf(j->slurm_job, sizeof(j->slurm_job), "%s", r.slurm_job);
	snprintf(j->node, sizeof(j->node), "%s", r.host);
	j->epoch = r.epoch;
	j->epochs = r.epochs;
	j->step = r.step;
	j->samples_per_s = r.samples_per_s > 0 ? r.samples_per_s : NAN;
	j->loss = last_value(dlt_runs_series(&r, "train.loss"));
	metric = dlt_runs_main_metric(&r, 1);
	if (strncmp(metric, "train.", 6) != 0 && dlt_runs_series(&r, metric)) {
		snprintf(j->metric, sizeof(j->metric), "%s", metric);
		j->metric_value = last_value(dlt_runs_series(&r, metric));
	}
	j->eta = eta(&r);
	dlt_runs_free(&r);
	return 0;
}

int dlt_smi_jobs(const char *dir, int missing_ok, dlt_smi_job **jobs, size_t *n)
{
	char **paths = NULL;
	size_t npaths = 0;
	struct stat st;
	int rc = 0;

	*jobs = NULL;
	*n = 0;
	if (missing_ok && stat(dir, &st) != 0 && errno == ENOENT)
		return 0;
	DLT_TRY(dlt_runs_find(dir, &paths, &npaths));
	if (npaths && !(*jobs = dlt_calloc(npaths, sizeof(**jobs)))) {
		rc = DLT_ENOMEM;
		goto fail;
	}
	for (size_t i = 0; i < npaths; i++) {
		DLT_TRY(job(&(*jobs)[*n], dir, paths[i]));
		if (rc == 0)
			(*n)++;
	}
	rc = 0;
fail:
	for (size_t i = 0; i < npaths; i++)
		free(paths[i]);
	free(paths);
	if (rc < 0) {
		dlt_smi_jobs_free(*jobs, *n);
		*jobs = NULL;
		*n = 0;
	}
	return rc;
}

void dlt_smi_jobs_free(dlt_smi_job *jobs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(jobs[i].name);
	free(jobs);
}
