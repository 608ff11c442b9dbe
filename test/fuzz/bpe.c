/* The tokenizers (lib/prep/bpe.c, text.c).  The first byte picks: bit 0
 * clear, the rest is an archive whose tokenizer is read (the merges
 * reader) and, when it reads, used to encode a fixed text and the input
 * itself, which must decode to the same bytes; the archive is then
 * described as dlt-prep info does.  Bit 0 set: a BPE of 257 + (byte >> 1)
 * ids is learned from the rest, whose ids must be what encoding gives and
 * decode to it. */
#include "prep/tokens.h"
#include "util/util.h"

#include "fuzz.h"

static void round_trip(const dlt_tokenizer *t, const void *text, size_t n)
{
	uint32_t *ids = malloc((n ? n : 1) * sizeof(*ids));
	dlt_buf back = { 0 };
	size_t k;

	if (!ids)
		abort();
	if (dlt_tokenizer_encode(t, text, n, DLT_U32, ids, &k) < 0 ||
	    dlt_tokenizer_decode(t, ids, DLT_U32, k, &back) < 0 || back.len != n ||
	    (n && memcmp(back.data, text, n) != 0))
		abort();
	free(ids);
	dlt_buf_free(&back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char text[] = "It was the best of times, it was the worst of times...\n"
				   "  \t 1984 -- \xc3\xa9t\xc3\xa9!!";
	dlt_tokenizer *t = NULL;

	if (size < 1)
		return 0;
	if (data[0] & 1) {
		dlt_text in = { data + 1, size - 1 };
		uint32_t *ids = malloc(size * sizeof(*ids)), *enc = malloc(size * sizeof(*enc));
		size_t n, k;
		if (!ids || !enc)
			abort();
		if (dlt_tokenizer_learn(&t, &in, 1, 257 + (data[0] >> 1), ids, &n) == 0) {
			if (dlt_tokenizer_encode(t, in.data, in.len, DLT_U32, enc, &k) < 0 || k != n ||
			    memcmp(ids, enc, n * sizeof(*ids)) != 0)
				abort();
			round_trip(t, in.data, in.len);
			round_trip(t, text, sizeof(text) - 1);
			dlt_tokenizer_free(t);
		}
		free(ids);
		free(enc);
	} else {
		dlt_archive *a;
		if (dlt_archive_open_mem(&a, data + 1, size - 1, "fuzz.dlt") < 0)
			return 0;
		if (dlt_tokenizer_read(&t, a) == 0) {
			round_trip(t, text, sizeof(text) - 1);
			round_trip(t, data, size);
			dlt_tokenizer_free(t);
		}
		{
			dlt_buf out = { 0 };
			dlt_json j = { 0 };
			dlt_tokens_describe(a, &out, NULL);
			dlt_json_begin(&j);
			dlt_tokens_describe(a, NULL, &j);
			dlt_buf_free(&out);
			dlt_json_free(&j);
		}
		dlt_archive_close(a);
	}
	return 0;
}
