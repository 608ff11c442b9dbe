/* The run directory: config.yaml, metrics.jsonl, status. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "comm/comm.h"
#include "rundir.h"

char *dlt_run_file(const dlt_run *r, const char *name)
{
	char *p = dlt_malloc(strlen(r->dir) + strlen(name) + 2);
	if (p)
		sprintf(p, "%s/%s", r->dir, name);
	return p;
}

int dlt_run_status(dlt_run *r, const char *status)
{
	dlt_batch_job job;
	dlt_json j;
	char host[256] = "";
	char *path;
	int rc;

	if (!r->dir)
		return 0;
	gethostname(host, sizeof(host) - 1);
	dlt_batch_job_get(&job);
	dlt_json_begin(&j);
	dlt_json_str(&j, "status", status);
	dlt_json_int(&j, "pid", (long long)getpid());
	dlt_json_str(&j, "host", host);
	if (job.id[0])
		dlt_json_str(&j, "slurm_job", job.id);
	dlt_json_num(&j, "start", r->start);
	dlt_json_num(&j, "time", dlt_wall());
	dlt_json_end(&j);
	if ((rc = dlt_json_ok(&j)) == 0 && (rc = dlt_buf_append(&j.buf, "\n", 1)) == 0) {
		if (!(path = dlt_run_file(r, "status")))
			rc = DLT_ENOMEM;
		else
			rc = dlt_write_file_atomic(path, j.buf.data, j.buf.len);
		free(path);
	}
	dlt_json_free(&j);
	return rc;
}

int dlt_run_write_config(const dlt_run *r, const dlt_config *c)
{
	dlt_buf yaml = { 0 };
	char *path = dlt_run_file(r, "config.yaml");
	int rc;

	if (!path)
		return DLT_ENOMEM;
	if ((rc = dlt_config_write_yaml(c, &yaml)) == 0)
		rc = dlt_write_file_atomic(path, yaml.data, yaml.len);
	dlt_buf_free(&yaml);
	free(path);
	return rc;
}

int dlt_run_open(dlt_run *r, const char *dir, const dlt_config *c)
{
	char *metrics = NULL;
	struct stat st;
	int rc;

	memset(r, 0, sizeof(*r));
	r->start = dlt_wall();
	if (!dir)
		return 0;
	if (!(r->dir = dlt_strdup(dir)))
		return DLT_ENOMEM;
	if (!(metrics = dlt_run_file(r, "metrics.jsonl"))) {
		rc = DLT_ENOMEM;
		goto fail;
	}
	/* before anything is written, so an old run's config.yaml stays */
	if (stat(metrics, &st) == 0) {
		rc = dlt_error(DLT_EINPUT, "%s: already holds a run (give another -o)", dir);
		goto fail;
	}
	DLT_TRY(dlt_mkdir_p(dir));
	DLT_TRY(dlt_run_write_config(r, c));
	if (!(r->metrics = fopen(metrics, "wx"))) {
		rc = dlt_error_errno(errno == EEXIST ? DLT_EINPUT : DLT_EIO, "%s", metrics);
		goto fail;
	}
	DLT_TRY(dlt_run_status(r, "running"));
	rc = 0;
fail:
	free(metrics);
	if (rc < 0)
		dlt_run_close(r);
	return rc;
}

static int is_resume(const char *line)
{
	static const char prefix[] = "{\"event\":\"resume\"";
	return !strncmp(line, prefix, sizeof(prefix) - 1);
}

/* The "time" of a record, 0 if it has none. */
static double record_time(const char *line, size_t n)
{
	dlt_jval v;
	const dlt_jval *t;
	double time = 0;
	if (dlt_json_parse(line, n, &v) < 0)
		return 0;
	if ((t = dlt_jval_get(&v, "time")) && t->type == DLT_JNUM)
		time = t->num;
	dlt_jval_free(&v);
	return time;
}

int dlt_run_reopen(dlt_run *r, const char *dir, const char *kept, double *time)
{
	size_t want = 0, got = 0, len = 0, keep = 0, last = 0;
	char *path = NULL, *text = NULL;
	int rc;

	memset(r, 0, sizeof(*r));
	r->start = dlt_wall();
	*time = 0;
	for (const char *p = kept; *p; p++)
		want += *p == '\n';
	if (!(r->dir = dlt_strdup(dir)) || !(path = dlt_run_file(r, "metrics.jsonl"))) {
		rc = DLT_ENOMEM;
		goto fail;
	}
	if ((rc = dlt_read_file(path, 0, &text, &len)) < 0 && errno != ENOENT)
		goto fail;
	for (size_t i = 0; text && got < want && i < len; i++) {
		size_t start = i;
		while (i < len && text[i] != '\n')
			i++;
		if (i == len)
			break;		/* a line cut short by a kill */
		if (!is_resume(text + start)) {
			got++;
			last = start;
		}
		keep = i + 1;
	}
	if (got == want) {
		if (truncate(path, (off_t)keep) != 0) {
			rc = dlt_error_errno(DLT_EIO, "%s", path);
			goto fail;
		}
		if (want)
			*time = record_time(text + last, keep - last - 1);
	} else {
		DLT_TRY(dlt_write_file_atomic(path, kept, strlen(kept)));
	}
	if (!(r->metrics = fopen(path, "a"))) {
		rc = dlt_error_errno(DLT_EIO, "%s", path);
		goto fail;
	}
	rc = dlt_run_status(r, "running");
fail:
	free(path);
	free(text);
	if (rc < 0)
		dlt_run_close(r);
	return rc;
}

int dlt_run_record(dlt_run *r, const char *json)
{
	if (!r->metrics)
		return 0;
	/* flushed line by line: dlt-smi and tail -f read it while we run */
	if (fprintf(r->metrics, "%s\n", json) < 0 || fflush(r->metrics) != 0)
		return dlt_error_errno(DLT_EIO, "%s/metrics.jsonl", r->dir);
	return 0;
}

int dlt_run_close(dlt_run *r)
{
	int rc = 0;
	if (r->metrics) {
		if (fsync(fileno(r->metrics)) != 0 && errno != EINVAL)
			rc = dlt_error_errno(DLT_EIO, "%s/metrics.jsonl", r->dir);
		if (fclose(r->metrics) != 0 && rc == 0)
			rc = dlt_error_errno(DLT_EIO, "%s/metrics.jsonl", r->dir);
	}
	free(r->dir);
	memset(r, 0, sizeof(*r));
	return rc;
}
