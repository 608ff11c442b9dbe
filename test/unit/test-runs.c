/* runs: which way a metric improves, the default metric of each task, and
 * choosing and ordering runs (dlt-runs ls and best, on the library). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runs/runs.h"
#include "tap.h"
#include "util/util.h"

static void test_metric_mode(void)
{
	static const char *const smaller[] = { "loss", "train.loss", "val.loss", "test.rmse",
		"val.mae", "train.mse", "val.ppl", "test.bpb", "val.error", "val.err",
		"test.top5_error", "val.nll_loss", "rmse", "a.b.loss", NULL };
	static const char *const larger[] = { "acc", "test.acc", "val.top5", "val.f1", "test.r2",
		"train.lr", "val.speed", "", ".", "val.rmse.x", "rmse.acc", "val.lossy", NULL };

	for (int i = 0; smaller[i]; i++)
		ok(dlt_metric_mode(smaller[i]) == -1, "%s: smaller is better", smaller[i]);
	for (int i = 0; larger[i]; i++)
		ok(dlt_metric_mode(larger[i]) == 1, "'%s': larger is better", larger[i]);
}

/* A run directory under the test's tmpdir, its config and records; the
 * path in dir (static buffers, four at a time). */
static const char *mkrun(const char *name, const char *config, const char *metrics)
{
	static char buf[4][512];
	static int next;
	char *dir = buf[next++ % 4], path[600];

	snprintf(dir, sizeof(buf[0]), "%s/%s", tap_tmpdir(), name);
	mkdir(dir, 0777);
	snprintf(path, sizeof(path), "%s/config.yaml", dir);
	dlt_write_file_atomic(path, config, strlen(config));
	snprintf(path, sizeof(path), "%s/metrics.jsonl", dir);
	dlt_write_file_atomic(path, metrics, strlen(metrics));
	return dir;
}

enum { NRUNS = 4 };

static int load(dlt_runinfo *r, size_t *n)
{
	static const char *const config[NRUNS] = {
		"train: {batch: 16, epochs: 2}\n", "train: {batch: 32, epochs: 2}\n",
		"train: {batch: 1.6e1, epochs: 3}\nmodel: [dense: 8]\n",
		"train: {epochs: 2}\n",
	};
	static const char *const metrics[NRUNS] = {
		"{\"event\":\"eval\",\"split\":\"val\",\"epoch\":1,\"step\":5,\"loss\":1,\"rmse\":0.5,\"r2\":0.4,\"time\":2}\n",
		"{\"event\":\"eval\",\"split\":\"val\",\"epoch\":1,\"step\":5,\"loss\":1,\"rmse\":0.3,\"r2\":0.7,\"time\":9}\n"
		"{\"event\":\"eval\",\"split\":\"val\",\"epoch\":2,\"step\":9,\"loss\":1,\"rmse\":0.9,\"r2\":0.1,\"time\":10}\n",
		"{\"event\":\"eval\",\"split\":\"val\",\"epoch\":1,\"step\":5,\"loss\":1,\"rmse\":0.7,\"r2\":0.2,\"time\":5}\n",
		"{\"event\":\"train\",\"epoch\":1,\"step\":5,\"loss\":2,\"time\":1}\n",
	};
	static const char *const names[NRUNS] = { "a", "b", "c", "d" };
	int rc = 0;

	for (*n = 0; *n < NRUNS && rc == 0; (*n)++)
		rc = dlt_runs_load(&r[*n], mkrun(names[*n], config[*n], metrics[*n]));
	return rc;
}

static void free_runs(dlt_runinfo *r, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dlt_runs_free(&r[i]);
}

/* The last part of each run's directory, in order: "bac". */
static const char *order(const dlt_runinfo *r, size_t n)
{
	static char s[NRUNS + 1];

	for (size_t i = 0; i < n; i++)
		s[i] = r[i].dir[strlen(r[i].dir) - 1];
	s[n] = 0;
	return s;
}

static void test_main_metric(void)
{
	dlt_runinfo r[NRUNS];
	size_t n;

	if (!ok_rc(load(r, &n), 0, "load four runs"))
		return;
	ok(strcmp(dlt_runs_main_metric(r, n), "val.rmse") == 0, "regression runs: val.rmse");
	ok(strcmp(dlt_runs_main_metric(r + 3, 1), "train.loss") == 0, "no eval: train.loss");
	free_runs(r, n);
	{
		dlt_runinfo m[2];
		const char *x = mkrun("ml1", "", "{\"event\":\"eval\",\"split\":\"test\",\"epoch\":1,"
				      "\"step\":1,\"loss\":1,\"f1\":0.5}\n");
		const char *y = mkrun("ml2", "", "{\"event\":\"eval\",\"split\":\"val\",\"epoch\":1,"
				      "\"step\":1,\"loss\":1,\"acc\":0.5,\"f1\":0.5}\n");
		if (!ok_rc(dlt_runs_load(&m[0], x), 0, "load %s", x) ||
		    !ok_rc(dlt_runs_load(&m[1], y), 0, "load %s", y))
			return;
		ok(strcmp(dlt_runs_main_metric(m, 1), "test.f1") == 0, "f1 alone: test.f1");
		ok(strcmp(dlt_runs_main_metric(m, 2), "val.acc") == 0, "acc before f1");
		free_runs(m, 2);
	}
}

static void test_filter(void)
{
	dlt_runinfo r[NRUNS];
	size_t n;
	const char *eq[] = { "train.batch=16" }, *ne[] = { "train.batch!=16", "train.epochs=2" };
	const char *typo[] = { "train.bach=16" }, *bad[] = { "batch" };

	if (!ok_rc(load(r, &n), 0, "load four runs"))
		return;
	ok_rc(dlt_runs_filter(r, &n, typo, 1, NULL), DLT_EINPUT, "a key no run has");
	ok_msg("no run has config key 'train.bach'", "says which");
	ok(n == NRUNS, "and keeps every run");
	ok_rc(dlt_runs_filter(r, &n, bad, 1, NULL), DLT_EINPUT, "not KEY=VALUE");
	ok_msg("'batch' is not KEY=VALUE or KEY!=VALUE", "says so");
	ok_rc(dlt_runs_filter(r, &n, NULL, 0, "done,running"), 0, "--status of no run");
	ok(n == 0, "keeps none: the runs have no status file (unknown)");
	free_runs(r, n);

	load(r, &n);
	ok_rc(dlt_runs_filter(r, &n, NULL, 0, "failed,unknown"), 0, "--status unknown");
	ok(n == NRUNS, "keeps all");
	ok_rc(dlt_runs_filter(r, &n, eq, 1, NULL), 0, "KEY=VALUE");
	ok(strcmp(order(r, n), "ac") == 0, "16 and 1.6e1 are equal as numbers: %s", order(r, n));
	free_runs(r, n);

	load(r, &n);
	ok_rc(dlt_runs_filter(r, &n, ne, 2, NULL), 0, "KEY!=VALUE, and a KEY=VALUE");
	ok(strcmp(order(r, n), "bd") == 0, "a run without the key is not equal: %s",
	   order(r, n));
	free_runs(r, n);
}

static void test_sort(void)
{
	dlt_runinfo r[NRUNS];
	size_t n;

	if (!ok_rc(load(r, &n), 0, "load four runs"))
		return;
	ok(dlt_runs_is_property("samples/s") && dlt_runs_is_property("run") &&
	   !dlt_runs_is_property("val.rmse") && !dlt_runs_is_property("loss"),
	   "properties are not metrics");
	dlt_runs_sort(r, n, "val.rmse", 0);
	ok(strcmp(order(r, n), "bacd") == 0, "val.rmse: smallest first, none last: %s",
	   order(r, n));
	dlt_runs_sort(r, n, "val.rmse", 1);
	ok(strcmp(order(r, n), "cabd") == 0, "reversed: none still last: %s", order(r, n));
	dlt_runs_sort(r, n, "val.r2", 0);
	ok(strcmp(order(r, n), "bacd") == 0, "val.r2: largest first: %s", order(r, n));
	dlt_runs_sort(r, n, "duration", 0);
	ok(strcmp(order(r, n), "dacb") == 0, "duration: shortest first: %s", order(r, n));
	dlt_runs_sort(r, n, "epochs", 0);
	ok(strcmp(order(r, n), "acdb") == 0, "epochs, ties by directory: %s", order(r, n));
	dlt_runs_sort(r, n, "run", 1);
	ok(strcmp(order(r, n), "dcba") == 0, "run, reversed: %s", order(r, n));
	dlt_runs_sort(r, n, NULL, 1);
	ok(strcmp(order(r, n), "abcd") == 0, "no key: turned over: %s", order(r, n));
	dlt_runs_sort(r, n, NULL, 0);
	ok(strcmp(order(r, n), "abcd") == 0, "no key, not reversed: as they were");

	ok(dlt_runs_best(r, n, "val.rmse", dlt_metric_mode("val.rmse")) == &r[1],
	   "best val.rmse: b's 0.3");
	ok(dlt_runs_best(r, n, "val.rmse", 1) == &r[1], "max val.rmse: b's 0.9");
	ok(dlt_runs_best(r, n, "val.r2", dlt_metric_mode("val.r2")) == &r[1], "best r2: b's 0.7");
	ok(dlt_runs_best(r, n, "train.loss", -1) == &r[3], "only d has train.loss");
	ok(!dlt_runs_best(r, n, "test.acc", 1), "no run has test.acc: none");
	ok(!dlt_runs_best(r, 0, "val.rmse", 1), "no runs: none");
	free_runs(r, n);
}

int main(void)
{
	test_metric_mode();
	test_main_metric();
	test_filter();
	test_sort();
	return done_testing();
}
