/* The tokenizers of lib/prep/tokens.h: the chunker, BPE learning (merge
 * order and ties checked by hand, the same twice), encoding (what learning
 * made of the training text; bytes back from random bytes and text), the
 * tokenizer in an archive, and damaged merges, each an input error that
 * names the file.
 *
 * With arguments it is the fixture maker of test/t1600-prep-text.sh:
 *   test-bpe --write-merges PATH later|range
 * writes a token archive whose merge 0 refers to a token made after it
 * (later) or whose merge 1 holds id -1 (range). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive/archive.h"
#include "prep/tokens.h"
#include "tap.h"
#include "util/util.h"

static const char *tpath(const char *name)
{
	static char buf[4][512];
	static int k;
	char *p = buf[k++ % 4];
	snprintf(p, sizeof(buf[0]), "%s/%s", tap_tmpdir(), name);
	return p;
}

/* The chunks of s, joined by '|' */
static void chunks(const char *s, size_t n, char *out)
{
	size_t len;
	for (; n > 0; s += len, n -= len) {
		len = dlt_tokenizer_chunk(s, n);
		memcpy(out, s, len);
		out += len;
		*out++ = '|';
	}
	*out = 0;
}

static void test_chunks(void)
{
	static const char s[] = "Hello  world42!! x\n\n  y\t z \xc3\xa9t\xc3\xa9 3.5";
	char out[256], run[301];

	chunks(s, sizeof(s) - 1, out);
	if (!ok(strcmp(out, "Hello| | world|42|!!| x|\n\n | y|\t| z| \xc3\xa9t\xc3\xa9| 3|.|5|") == 0,
		"chunks: runs of a class, a space joins the word after it"))
		diag("got '%s'", out);
	memset(run, 'a', 300);
	run[300] = 0;
	ok(dlt_tokenizer_chunk(run, 300) == DLT_BPE_MAX_TOKEN &&
	   dlt_tokenizer_chunk(run + 256, 44) == 44 && dlt_tokenizer_chunk(run, 0) == 0,
	   "a run is cut at %d bytes", DLT_BPE_MAX_TOKEN);
	ok(dlt_tokenizer_chunk("  \n", 3) == 3 && dlt_tokenizer_chunk(" ", 1) == 1 &&
	   dlt_tokenizer_chunk("  ", 2) == 2, "trailing whitespace is one chunk");
}

static int same_merges(const dlt_tokenizer *t, const uint32_t *want, uint32_t n)
{
	const uint32_t *m;
	return dlt_tokenizer_merges(t, &m) == n && memcmp(m, want, 2 * n * sizeof(*m)) == 0;
}

static void test_learn_by_hand(void)
{
	/* "aaab", " aab", " ab": (a,a) 3 (overlapping ones count), (a,b) 3,
	 * (' ',a) 2: the tie goes to the smaller pair (a,a); "aaab" becomes
	 * [256 a b] (left to right), then (a,b) 2 is first, and so on, each
	 * tie of counts of 1 to the smallest (left, right) */
	static const uint32_t want[] = { 'a', 'a', 'a', 'b', ' ', 256, ' ', 257, 256, 257, 258, 'b' };
	static const uint32_t want2[] = { ' ', 'c', 'a', 'b', 256, 'd' };
	dlt_text text = { "aaab aab ab", 11 };
	dlt_tokenizer *t = NULL;
	uint32_t ids[16];
	uint16_t enc[16];
	size_t n;

	ok_rc(dlt_tokenizer_learn(&t, &text, 1, 300, ids, &n), 0, "learn a tiny text");
	ok(t && same_merges(t, want, 6), "merge order and ties as worked by hand");
	ok(t && dlt_tokenizer_vocab(t) == 262 && dlt_tokenizer_eot(t) == -1,
	   "6 merges when the pairs run out: a vocabulary of 262");
	ok(n == 3 && ids[0] == 260 && ids[1] == 261 && ids[2] == 259,
	   "learning leaves the chunks as single tokens");
	ok_rc(dlt_tokenizer_encode(t, "aaab aaaa", 9, DLT_U16, enc, &n), 0, "encode");
	/* " aaaa": (a,a) twice, left to right, then (' ', 256) */
	ok(n == 3 && enc[0] == 260 && enc[1] == 258 && enc[2] == 256,
	   "encode by rank, GPT-2's way");
	dlt_tokenizer_free(t);
	t = NULL;
	text = (dlt_text){ "ab cd", 5 };
	ok_rc(dlt_tokenizer_learn(&t, &text, 1, 257 + 2, NULL, NULL), 0, "learn 3 ids");
	ok(t && same_merges(t, want2, 3), "ties of 1: (' ', c) before (a, b), then (256, d)");
	dlt_tokenizer_free(t);
	t = NULL;
	text = (dlt_text){ "ab cd", 5 };
	ok_rc(dlt_tokenizer_learn(&t, &text, 1, 257, NULL, NULL), 0, "learn one merge");
	ok(t && same_merges(t, want2, 1), "the vocabulary stops learning");
	dlt_tokenizer_free(t);
	ok_rc(dlt_tokenizer_learn(&t, &text, 1, 256, NULL, NULL), DLT_EINPUT, "vocab 256");
	ok_rc(dlt_tokenizer_learn(&t, &text, 1, 65537, NULL, NULL), DLT_EINPUT, "vocab 65537");
}

/* Text of made-up words of English syllables, numbers and punctuation,
 * from a fixed generator */
static char *some_text(size_t *n)
{
	static const char *const syl[] = { "the", "of", "an", "to", "in", "is", "ou", "ing",
					   "er", "it", "he", "was", "for", "on", "are", "as",
					   "ith", "his", "ey", "I", "at", "be", "st", "ha",
					   "fr", "or", "one", "ed", "by", "wo", "rd", "ut" };
	static const char *const sep[] = { " ", " ", " ", " ", " ", ", ", ". ", "\n", "\n\n",
					   " -- ", "    ", "! ", " 1984 ", " 42" };
	size_t cap = 200000, len = 0;
	char *s = malloc(cap + 64);
	uint32_t x = 12345;

	while (len < cap) {
		x = x * 1103515245 + 12345;
		for (uint32_t k = 0; k < 1 + (x >> 28) % 3; k++)
			len += (size_t)sprintf(s + len, "%s", syl[(x >> (8 + 5 * k)) % 32]);
		x = x * 1103515245 + 12345;
		len += (size_t)sprintf(s + len, "%s", sep[(x >> 16) % 14]);
	}
	*n = len;
	return s;
}

static int round_trip(const dlt_tokenizer *t, const void *text, size_t n, int dtype)
{
	void *ids = malloc((n ? n : 1) * 4);
	dlt_buf back = { 0 };
	size_t k;
	int good = dlt_tokenizer_encode(t, text, n, dtype, ids, &k) == 0 &&
		   dlt_tokenizer_decode(t, ids, dtype, k, &back) == 0 && back.len == n &&
		   (n == 0 || memcmp(back.data, text, n) == 0);

	free(ids);
	dlt_buf_free(&back);
	return good;
}

static void test_learn_text(void)
{
	size_t n, k1, k2;
	char *s = some_text(&n);
	dlt_text text[2] = { { s, n / 2 }, { s + n / 2, n - n / 2 } };
	dlt_tokenizer *t1 = NULL, *t2 = NULL, *b = NULL;
	uint32_t *ids1 = malloc(n * 4), *ids2 = malloc(n * 4), *enc = malloc(n * 4);
	const uint32_t *m1;
	unsigned char rnd[5000];
	uint32_t x = 7;
	int good = 1;
	double t0 = dlt_now();

	ok_rc(dlt_tokenizer_learn(&t1, text, 2, 1000, ids1, &k1), 0, "learn 1000 ids");
	diag("learning 1000 ids on %zu bytes: %.3f s", n, dlt_now() - t0);
	ok_rc(dlt_tokenizer_learn(&t2, text, 2, 1000, ids2, &k2), 0, "learn them again");
	ok(t1 && t2 && dlt_tokenizer_vocab(t1) == 1000 &&
	   same_merges(t2, (dlt_tokenizer_merges(t1, &m1), m1), 744) && k1 == k2 &&
	   memcmp(ids1, ids2, k1 * 4) == 0, "learning twice gives the same merges and ids");
	if (t1) {
		size_t e1, e2;
		ok(dlt_tokenizer_encode(t1, text[0].data, text[0].len, DLT_U32, enc, &e1) == 0 &&
		   dlt_tokenizer_encode(t1, text[1].data, text[1].len, DLT_U32, enc + e1, &e2) == 0 &&
		   e1 + e2 == k1 && memcmp(enc, ids1, k1 * 4) == 0,
		   "encoding the training text gives the ids learning made (%zu)", k1);
		ok(k1 < n / 2, "fewer than half as many ids as bytes (%zu of %zu)", k1, n);
		ok(round_trip(t1, s, n, DLT_U16) && round_trip(t1, s, n, DLT_U32) &&
		   round_trip(t1, s, n, DLT_I32) && round_trip(t1, "", 0, DLT_U16),
		   "text comes back from its ids (u16, u32, i32; empty)");
		for (int r = 0; r < 50; r++) {
			size_t len = r * 97 % sizeof(rnd);
			for (size_t i = 0; i < len; i++) {
				x = x * 1664525 + 1013904223;
				/* half of them from few bytes, for long runs */
				rnd[i] = r % 2 ? (unsigned char)(x >> 24) : "a a\n"[(x >> 24) % 4];
			}
			good &= round_trip(t1, rnd, len, DLT_U16);
		}
		ok(good, "random bytes come back from their ids");
	}
	ok_rc(dlt_tokenizer_bytes(&b), 0, "the bytes tokenizer");
	if (b) {
		size_t k;
		ok(round_trip(b, rnd, sizeof(rnd), DLT_U16) && dlt_tokenizer_vocab(b) == 256 &&
		   dlt_tokenizer_encode(b, "ab", 2, DLT_U16, enc, &k) == 0 && k == 2 &&
		   ((uint16_t *)enc)[0] == 'a' && ((uint16_t *)enc)[1] == 'b', "bytes: an id a byte");
		dlt_tokenizer_add_eot(b);
		ok(dlt_tokenizer_vocab(b) == 257 && dlt_tokenizer_eot(b) == 256,
		   "an eot: id 256, a vocabulary of 257");
		dlt_tokenizer_free(b);
	}
	{
		/* a learned tokenizer of runs of one byte: tokens up to 256 bytes */
		char *run = malloc(5000);
		dlt_text rt = { run, 5000 };
		dlt_tokenizer *tr = NULL;
		size_t len;
		memset(run, '=', 5000);
		ok(dlt_tokenizer_learn(&tr, &rt, 1, 300, NULL, NULL) == 0 &&
		   (dlt_tokenizer_token(tr, dlt_tokenizer_vocab(tr) - 1, &len), len) <= 256 &&
		   round_trip(tr, run, 5000, DLT_U16), "a run of 5000 bytes: tokens of at most 256");
		dlt_tokenizer_free(tr);
		free(run);
	}
	if (t1) {
		uint16_t bad[2] = { 5, 1000 };
		dlt_buf out = { 0 };
		ok_rc(dlt_tokenizer_decode(t1, bad, DLT_U16, 2, &out), DLT_EINPUT, "an id too large");
		ok_msg("token 1000 at 1 is not below the vocabulary of 1000", "is named");
		dlt_buf_free(&out);
	}
	dlt_tokenizer_free(t1);
	dlt_tokenizer_free(t2);
	free(ids1);
	free(ids2);
	free(enc);
	free(s);
}

/* An archive of a tokenizer's metadata and merges, as given */
static const char *write_merges(const char *name, const char *meta, const int32_t *m,
				uint64_t rows, uint64_t cols)
{
	const char *path = tpath(name);
	dlt_archive_writer *w;
	uint64_t dims[2] = { rows, cols }, n = 1;
	uint16_t tok = 1;

	if (dlt_archive_create(&w, path) < 0 ||
	    dlt_archive_write_tensor(w, "tokens", DLT_U16, 1, &n, &tok, DLT_RAW, 0) < 0 ||
	    (m && dlt_archive_write_tensor(w, "merges", DLT_I32, 2, dims, m, DLT_RAW, 0) < 0) ||
	    dlt_archive_write_meta(w, meta) < 0 || dlt_archive_writer_close(w) < 0)
		diag("%s", dlt_errmsg());
	return path;
}

static void bad_tokenizer(const char *what, const char *meta, const int32_t *m, uint64_t rows,
			  uint64_t cols, const char *msg)
{
	const char *path = write_merges("bad.dlt", meta, m, rows, cols);
	dlt_tokenizer *t = NULL;
	dlt_archive *a;

	if (dlt_archive_open(&a, path) < 0) {
		ok(0, "%s: %s", what, dlt_errmsg());
		return;
	}
	ok_rc(dlt_tokenizer_read(&t, a), DLT_EINPUT, "%s", what);
	ok_msg(msg, "%s: says so", what);
	ok(strstr(dlt_errmsg(), "bad.dlt") != NULL && t == NULL, "%s: names the file", what);
	dlt_archive_close(a);
}

static void test_archive(void)
{
	static const int32_t good[] = { 'a', 'b', 256, 'c' };
	static const int32_t later[] = { 'a', 257, 'a', 'b' };
	static const int32_t range[] = { 'a', 'b', -1, 'c' };
	static const int32_t big[] = { 'a', 'b', 70000, 'c' };
	static const int32_t twice[] = { 'a', 'b', 'a', 'b' };
	int32_t doubling[2 * 10];
	const char *tk = "{\"kind\":\"tokens\",\"tokenizer\":\"bpe\",\"vocab\":258,\"n\":1,\"bytes\":1}";
	size_t n;
	char *s = some_text(&n);
	dlt_text text = { s, n };
	dlt_tokenizer *t = NULL, *r = NULL;
	dlt_archive_writer *w;
	dlt_archive *a;
	dlt_json j = { 0 };
	const uint32_t *m;

	ok_rc(dlt_tokenizer_learn(&t, &text, 1, 500, NULL, NULL), 0, "learn 500 ids");
	dlt_tokenizer_add_eot(t);
	dlt_json_begin(&j);
	dlt_json_str(&j, "kind", "tokens");
	ok(dlt_archive_create(&w, tpath("t.dlt")) == 0 && dlt_tokenizer_write(t, w, &j) == 0 &&
	   (dlt_json_end(&j), dlt_archive_write_meta(w, j.buf.data)) == 0 &&
	   dlt_archive_writer_close(w) == 0, "write the tokenizer");
	dlt_json_free(&j);
	ok(dlt_archive_open(&a, tpath("t.dlt")) == 0 && dlt_tokenizer_read(&r, a) == 0,
	   "read it back");
	dlt_archive_close(a);
	ok(r && dlt_tokenizer_vocab(r) == 501 && dlt_tokenizer_eot(r) == 500 &&
	   strcmp(dlt_tokenizer_kind(r), "bpe") == 0 &&
	   same_merges(r, (dlt_tokenizer_merges(t, &m), m), 244), "the same tokenizer");
	ok(r && round_trip(r, s, n, DLT_U16), "it encodes and decodes");
	dlt_tokenizer_free(t);
	dlt_tokenizer_free(r);
	free(s);

	write_merges("ok.dlt", tk, good, 2, 2);
	ok(dlt_archive_open(&a, tpath("ok.dlt")) == 0 && dlt_tokenizer_read(&r, a) == 0 &&
	   dlt_tokenizer_vocab(r) == 258, "a hand-made tokenizer of 2 merges reads");
	if (r && round_trip(r, "abcab", 5, DLT_U16)) {
		uint16_t ids[5];
		ok(dlt_tokenizer_encode(r, "abcab", 5, DLT_U16, ids, &n) == 0 && n == 2 &&
		   ids[0] == 257 && ids[1] == 256, "and encodes by it");
	}
	dlt_tokenizer_free(r);
	dlt_archive_close(a);

	bad_tokenizer("a merge of a later token", tk, later, 2, 2,
		      "merge 0 refers to token 257, which a later merge makes");
	bad_tokenizer("a negative id", tk, range, 2, 2, "merge 1: token -1 is not in the vocabulary");
	bad_tokenizer("an id past the vocabulary", tk, big, 2, 2,
		      "merge 1: token 70000 is not in the vocabulary");
	bad_tokenizer("a pair merged twice", tk, twice, 2, 2, "merge 1 repeats merge 0 (97, 98)");
	bad_tokenizer("merges [4, 1]", tk, good, 4, 1, "tensor 'merges' is [4, 1], not [2, 2]");
	bad_tokenizer("no merges", tk, NULL, 0, 0, "no tensor 'merges'");
	bad_tokenizer("merges of the wrong count",
		      "{\"kind\":\"tokens\",\"tokenizer\":\"bpe\",\"vocab\":300}", good, 2, 2,
		      "not [44, 2] as the vocabulary says");
	bad_tokenizer("vocab 70000", "{\"tokenizer\":\"bpe\",\"vocab\":70000}", good, 2, 2,
		      "metadata 'vocab' is missing or out of range");
	bad_tokenizer("eot not the last id", "{\"tokenizer\":\"bpe\",\"vocab\":259,\"eot\":256}",
		      good, 2, 2, "metadata 'eot' is not the last id of the vocabulary of 259");
	bad_tokenizer("bytes of 300 ids", "{\"tokenizer\":\"bytes\",\"vocab\":300}", NULL, 0, 0,
		      "metadata 'vocab' is 300, but the bytes tokenizer has 256 ids");
	bad_tokenizer("tokenizer 'words'", "{\"tokenizer\":\"words\",\"vocab\":300}", NULL, 0, 0,
		      "metadata 'tokenizer' is not \"bytes\" or \"bpe\"");
	bad_tokenizer("a dataset", "{\"kind\":\"dataset\",\"n\":1}", NULL, 0, 0,
		      "not a token archive (a dataset archive)");
	bad_tokenizer("no kind", "{\"n\":1}", NULL, 0, 0,
		      "not a token archive (no tokenizer in its metadata)");
	/* token i+1 = token i twice: 2^9 bytes at merge 8 */
	doubling[0] = doubling[1] = 'a';
	for (int i = 1; i < 10; i++)
		doubling[2 * i] = doubling[2 * i + 1] = 255 + i;
	bad_tokenizer("a token of 512 bytes", "{\"tokenizer\":\"bpe\",\"vocab\":266}", doubling,
		      10, 2, "merge 8 makes a token of 512 bytes (at most 256)");
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "--write-merges") == 0) {
		static const int32_t later[] = { 'a', 257, 'a', 'b' };
		static const int32_t range[] = { 'a', 'b', -1, 'c' };
		dlt_archive_writer *w;
		uint64_t dims[2] = { 2, 2 }, n = 1;
		uint16_t tok = 'a';
		int rc;
		if ((rc = dlt_archive_create(&w, argv[2])) == 0) {
			if ((rc = dlt_archive_write_tensor(w, "tokens", DLT_U16, 1, &n, &tok, DLT_RAW,
							   0)) < 0 ||
			    (rc = dlt_archive_write_tensor(w, "merges", DLT_I32, 2, dims,
							   strcmp(argv[3], "later") ? range : later,
							   DLT_RAW, 0)) < 0 ||
			    (rc = dlt_archive_write_meta(w, "{\"kind\":\"tokens\",\"tokenizer\":"
							 "\"bpe\",\"vocab\":258,\"n\":1,"
							 "\"bytes\":1}")) < 0)
				dlt_archive_writer_abort(w);
			else
				rc = dlt_archive_writer_close(w);
		}
		if (rc < 0)
			fprintf(stderr, "test-bpe: %s\n", dlt_errmsg());
		return rc < 0;
	}
	test_chunks();
	test_learn_by_hand();
	test_learn_text();
	test_archive();
	return done_testing();
}
