/* The search file of dlt-search (lib/search): loaded from a file, its
 * trials counted and the overrides of the first few and of the last drawn.
 * (The journal, journal.jsonl, has no reader yet: dlt-search --resume
 * will add one, and its harness with it.) */
#include "search/search.h"
#include "util/util.h"

#include "fuzz.h"

static void trial(const dlt_search *s, long long i)
{
	char **ov;
	size_t n;

	if (dlt_search_trial(s, i, &ov, &n) == 0)
		dlt_search_free_overrides(ov, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	dlt_search s;
	long long n;

	if (dlt_search_load(&s, fuzz_file("search.yaml", data, size)) < 0)
		return 0;
	n = dlt_search_count(&s);
	for (long long i = 0; i < n && i < 4; i++)
		trial(&s, i);
	if (n > 0)
		trial(&s, n - 1);
	dlt_search_free(&s);
	return 0;
}
