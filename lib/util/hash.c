#include <xxhash.h>

#include "util.h"

uint64_t dlt_xxh64(const void *p, size_t n, uint64_t seed)
{
	return XXH64(p, n, seed);
}

int dlt_hash_init(dlt_hash *h)
{
	XXH64_state_t *s = XXH64_createState();
	if (!s)
		return dlt_error(DLT_ENOMEM, "out of memory (hash state)");
	XXH64_reset(s, 0);
	h->state = s;
	return 0;
}

void dlt_hash_update(dlt_hash *h, const void *p, size_t n)
{
	XXH64_update(h->state, p, n);
}

uint64_t dlt_hash_final(dlt_hash *h)
{
	uint64_t v = XXH64_digest(h->state);
	XXH64_freeState(h->state);
	h->state = NULL;
	return v;
}
