/* The training jobs that dlt-smi shows (lib/smi): a run directory of
 * metrics.jsonl, status and config.yaml, the three pieces of the input
 * between NUL bytes, found under its runs directory. */
#include "smi/smi.h"
#include "util/util.h"

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	dlt_smi_job *jobs;
	size_t n;

	if (dlt_smi_jobs(fuzz_run_dir(data, size), 0, &jobs, &n) == 0)
		dlt_smi_jobs_free(jobs, n);
	return 0;
}
