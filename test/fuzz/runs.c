/* A run directory as dlt-runs reads it (lib/runs): metrics.jsonl, status
 * and config.yaml, the three pieces of the input between NUL bytes.  The
 * run is loaded, its main metric's series looked up and its best taken,
 * and the gnuplot script of every series drawn. */
#include "runs/runs.h"
#include "util/util.h"

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *metrics[8];
	dlt_runinfo r;
	dlt_buf out = { 0 };
	dlt_plot p = { .metrics = metrics, .x = "epoch", .terminal = "dumb",
		       .width = 80, .height = 24 };
	char *ckpt;

	fuzz_run_dir(data, size);
	if (dlt_runs_load(&r, fuzz_path("runs/r")) < 0)
		return 0;
	for (size_t i = 0; i < r.nseries && p.nmetrics < 8; i++) {
		const dlt_series *s = dlt_runs_series(&r, r.series[i].name);
		if (!s)
			abort();
		dlt_runs_best_value(s, dlt_metric_mode(s->name));
		metrics[p.nmetrics++] = s->name;
	}
	dlt_runs_series(&r, dlt_runs_main_metric(&r, 1));
	for (size_t i = 0; i < r.nconfig; i++)
		if (!dlt_runs_config(&r, r.config[i].key))
			abort();
	if (dlt_runs_checkpoint(&r, &ckpt) == 0)
		free(ckpt);
	dlt_runs_gnuplot(&p, &r, 1, &out);
	dlt_buf_free(&out);
	dlt_runs_free(&r);
	return 0;
}
