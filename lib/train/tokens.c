/* The token stream as a source of samples (train.h): windows of T + 1
 * tokens, the first T the sample and the last T its targets (each
 * position's next token).
 *
 * Training windows start where Philox(seed, sample index) says, so any
 * step replays alone (a resumed run, a rank's rows: the index is the
 * row's place in the run) and no window is favoured by an epoch's order.
 * Evaluation windows are fixed: window i starts at i T, so every
 * evaluation of a run sees the same tokens. */
#include <stdlib.h>
#include <string.h>

#include "prep/tokens.h"
#include "train.h"

/* Philox streams of the windows: a range of their own */
#define STREAM_WINDOW(i) ((0x544bull << 48) | (uint64_t)(i))

typedef struct token_source {
	dlt_source src;		/* first: the loader's view */
	dlt_tokens *tok;
	int T;
	uint64_t seed;
	int random;
} token_source;

/* Where window idx starts: in [0, n - T - 1] */
static uint64_t window_start(const token_source *s, uint32_t idx)
{
	uint64_t span = s->tok->n - (uint64_t)s->T;	/* starts 0..span-1 */
	dlt_rng r;
	if (!s->random)
		return (uint64_t)idx * (uint64_t)s->T % span;
	dlt_rng_init(&r, s->seed, STREAM_WINDOW(idx));
	if (span <= UINT32_MAX)
		return dlt_rng_below(&r, (uint32_t)span);
	/* a stream past 2^32 tokens: 64 bits, the bias below 2^-32 */
	return (((uint64_t)dlt_rng_u32(&r) << 32) | dlt_rng_u32(&r)) % span;
}

static void gather(const dlt_source *src, const uint32_t *order, int n, void *x, void *y)
{
	const token_source *s = (const token_source *)src;
	int32_t *xi = x, *yi = y;
	for (int i = 0; i < n; i++) {
		uint64_t at = window_start(s, order[i]);
		for (int t = 0; t < s->T; t++) {
			xi[(size_t)i * s->T + t] = (int32_t)dlt_tokens_at(s->tok, at + t);
			if (yi)
				yi[(size_t)i * s->T + t] = (int32_t)dlt_tokens_at(s->tok, at + t + 1);
		}
	}
}

static void source_close(dlt_source *src)
{
	token_source *s = (token_source *)src;
	dlt_tokens_close(s->tok);
	free(s);
}

int dlt_token_source_open(dlt_source **out, const char *path, int T, size_t n, uint64_t seed,
			  int random)
{
	token_source *s = dlt_calloc(1, sizeof(*s));
	int rc;

	*out = NULL;
	if (!s)
		return DLT_ENOMEM;
	if ((rc = dlt_tokens_open(&s->tok, path)) < 0) {
		free(s);
		return rc;
	}
	if (s->tok->n < (uint64_t)T + 2) {
		rc = dlt_error(DLT_EINPUT, "%s: %llu tokens, fewer than a window of train.context "
			       "%d + 1", path, (unsigned long long)s->tok->n, T);
		source_close(&s->src);
		return rc;
	}
	s->T = T;
	s->seed = seed;
	s->random = random;
	/* fixed windows: as many as the stream holds, at most n */
	if (!random && n > (s->tok->n - 1) / (uint64_t)T)
		n = (size_t)((s->tok->n - 1) / (uint64_t)T);
	s->src = (dlt_source){
		.n = n, .ndim = 1, .dims = { T }, .dtype = DLT_I32,
		.t_dtype = DLT_I32, .t_ndim = 1, .t_dims = { T },
		.gather = gather, .close = source_close,
	};
	*out = &s->src;
	return 0;
}

const dlt_tokens *dlt_token_source_tokens(const dlt_source *src)
{
	return ((const token_source *)src)->tok;
}
