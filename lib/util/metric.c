/* Which way a named metric improves, for every tool that ranks by one:
 * dlt-runs, dlt-search, checkpoint.best. */
#include <string.h>

#include "util.h"

static int ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), k = strlen(tail);
	return n >= k && strcmp(s + n - k, tail) == 0;
}

int dlt_metric_mode(const char *name)
{
	/* losses and errors: what a loss returns (mse, l1's mae, ...), and
	 * the language model's per-token cost */
	static const char *const smaller[] = { "rmse", "mae", "mse", "ppl", "bpb", "err", NULL };
	const char *dot = strrchr(name, '.'), *field = dot ? dot + 1 : name;

	if (ends_with(field, "loss") || ends_with(field, "error"))
		return -1;
	for (int i = 0; smaller[i]; i++)
		if (strcmp(field, smaller[i]) == 0)
			return -1;
	return 1;	/* acc, top5, f1, r2, and what no one told us of */
}
