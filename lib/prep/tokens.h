/* tokens: text as token ids, and the token archive (dlt-prep text).
 *
 * A tokenizer turns bytes into ids and back.  "bytes" is the identity:
 * ids 0..255 are the bytes, every input is valid.  "bpe" is a byte-level
 * BPE as GPT-2's: ids 0..255 are the bytes, and merge i makes token 256+i
 * of the pair of tokens (left, right) made before it.  Either may have an
 * end-of-text token, the id after the last one ("eot"), that decodes to no
 * bytes.  The vocabulary is every id: 256 + merges, + 1 with an eot.
 *
 * Text is first cut into chunks (dlt_tokenizer_chunk); merges never cross
 * a chunk's edge, in learning or in encoding, so a token is at most a
 * chunk, DLT_BPE_MAX_TOKEN bytes.
 *
 * A token archive (metadata kind "tokens") holds:
 *   tensor "tokens"  u16 [N] (u32 when the vocabulary is over 65536);
 *   tensor "merges"  i32 [M, 2], the pairs in merge order (bpe only);
 *   metadata {"kind":"tokens","tokenizer":"bytes"|"bpe","vocab":V,
 *             "eot":id (only with one),"n":N,"bytes":B}
 * B is the count of input bytes that these N tokens came from, so B/N is
 * the bytes a token (bits per byte = loss / ln 2 / (B/N)).  Any archive
 * with "tokenizer" and "vocab" (and "merges") in it carries a tokenizer
 * that dlt_tokenizer_read takes: a checkpoint can, too. */
#ifndef DLT_TOKENS_H
#define DLT_TOKENS_H

#include <stddef.h>
#include <stdint.h>

#include "archive/archive.h"
#include "util/util.h"

#define DLT_BPE_MAX_VOCAB 65536	/* bytes and merges, the eot not counted */
#define DLT_BPE_MAX_TOKEN 256	/* bytes of a chunk, so of a token */

typedef struct dlt_tokenizer dlt_tokenizer;

/* A text: the bytes of a file, say */
typedef struct dlt_text {
	const void *data;
	size_t len;
} dlt_text;

/* The length of the chunk that text starts with (0 when n is 0).  A chunk
 * is a run of one class of bytes: letters (A-Z, a-z and every byte from
 * 0x80, so UTF-8 stays whole), digits, whitespace (space, \t, \n, \v, \f,
 * \r) or other (punctuation); a space before a letter, digit or other run
 * belongs to that run (" world"), so a whitespace run that ends in a space
 * before one leaves that space to it.  A run is cut every
 * DLT_BPE_MAX_TOKEN bytes.  GPT-2 splits with a regular expression of
 * Unicode letters, numbers, whitespace and contractions; this is its
 * byte-wise, locale-free cousin, and as deterministic. */
size_t dlt_tokenizer_chunk(const void *text, size_t n);

/* The byte tokenizer: vocabulary 256. */
int dlt_tokenizer_bytes(dlt_tokenizer **t);

/* Learns a BPE of vocab ids (257..DLT_BPE_MAX_VOCAB) from texts, chunked
 * each on its own: from the 256 bytes it merges the most frequent pair of
 * adjacent tokens of the chunks, the smallest (left, right) ids of those
 * as frequent, until it has vocab ids or no pair is left (a text of few
 * distinct pairs gives fewer).  Pair counts live in a hash table with a
 * heap over them, and each merge updates only the pairs beside its
 * occurrences, in the distinct chunks that hold it.  When ids is not NULL
 * it receives the tokens of the texts, one after another, as learning
 * left them (dlt_tokenizer_encode gives the same), *nids their count; it
 * must hold as many as the texts have bytes. */
int dlt_tokenizer_learn(dlt_tokenizer **t, const dlt_text *texts, size_t ntexts,
			uint32_t vocab, uint32_t *ids, size_t *nids);

/* Gives the tokenizer an end-of-text token, unless it has one. */
void dlt_tokenizer_add_eot(dlt_tokenizer *t);
void dlt_tokenizer_free(dlt_tokenizer *t);

const char *dlt_tokenizer_kind(const dlt_tokenizer *t);	/* "bytes" or "bpe" */
uint32_t dlt_tokenizer_vocab(const dlt_tokenizer *t);	/* ids 0..vocab-1, the eot too */
int64_t dlt_tokenizer_eot(const dlt_tokenizer *t);	/* its id, or -1 without one */
/* The merges: 2 x the count of ids, (left, right) for token 256+i. */
uint32_t dlt_tokenizer_merges(const dlt_tokenizer *t, const uint32_t **pairs);
/* The bytes of token id (< vocab), *len of them (0 for the eot). */
const uint8_t *dlt_tokenizer_token(const dlt_tokenizer *t, uint32_t id, size_t *len);
/* The dtype of a token archive's ids for a vocabulary: u16, or u32 over 65536 */
int dlt_tokens_dtype(uint32_t vocab);

/* Encodes n bytes into *nout ids of dtype (DLT_U16, DLT_U32 or DLT_I32;
 * u16 only for a vocabulary of at most 65536), at out, which must hold n
 * of them (a token is at least one byte).  Chunk by chunk, GPT-2's way:
 * the pair of the lowest merge rank is merged first, the leftmost of
 * equals first.  Thread-safe: it keeps its cache of chunks per call. */
int dlt_tokenizer_encode(const dlt_tokenizer *t, const void *text, size_t n, int dtype,
			 void *out, size_t *nout);
/* Appends the bytes of n ids of dtype to out; an id not below the
 * vocabulary is DLT_EINPUT, naming it and its index. */
int dlt_tokenizer_decode(const dlt_tokenizer *t, const void *ids, int dtype, size_t n,
			 dlt_buf *out);

/* Reads the tokenizer of an archive: metadata "tokenizer", "vocab" and
 * "eot", and tensor "merges" for bpe, each checked (a merge of ids not
 * made before it, a repeated pair, a token longer than DLT_BPE_MAX_TOKEN,
 * a vocabulary that is not 256 + merges (+ 1 with an eot)); errors name
 * the file.  An archive without one is "not a token archive". */
int dlt_tokenizer_read(dlt_tokenizer **t, dlt_archive *a);
/* Writes tensor "merges" (bpe) to w, and the keys "tokenizer", "vocab"
 * and "eot" (with one) into the metadata object j is building. */
int dlt_tokenizer_write(const dlt_tokenizer *t, dlt_archive_writer *w, dlt_json *j);

/* A token archive, open for reading: its tokenizer and its ids, every one
 * checked to be below the vocabulary. */
typedef struct dlt_tokens {
	dlt_archive *a;
	dlt_tokenizer *tok;
	int dtype;		/* of ids: DLT_U16 or DLT_U32 */
	uint64_t n;		/* ids */
	const void *ids;	/* in the archive's mapping, or in owned */
	uint64_t bytes;		/* input bytes the ids came from */
	void *owned;		/* the ids of a compressed tensor, read */
} dlt_tokens;

int dlt_tokens_open(dlt_tokens **t, const char *path);
void dlt_tokens_close(dlt_tokens *t);

static inline uint32_t dlt_tokens_at(const dlt_tokens *t, uint64_t i)
{
	return t->dtype == DLT_U16 ? ((const uint16_t *)t->ids)[i] : ((const uint32_t *)t->ids)[i];
}

static inline double dlt_tokens_bytes_per_token(const dlt_tokens *t)
{
	return t->n ? (double)t->bytes / (double)t->n : 0;
}

/* dlt-prep text: files (or "-") into one or two token archives. */
typedef struct dlt_text_opts {
	const char *tokenizer;	/* "bytes" (NULL too) or "bpe" */
	uint32_t vocab;		/* bpe: 257..DLT_BPE_MAX_VOCAB */
	const char *from;	/* a token archive whose tokenizer to take, or NULL */
	int eot;		/* an end-of-text token between files */
	const char *out;	/* "-" for stdout */
	const char *out2;	/* the rest after split, or NULL */
	double split;		/* the first round(N*split) ids to out; 0: no split */
	int codec;
} dlt_text_opts;

/* What dlt_prep_text wrote, for its summary */
typedef struct dlt_text_result {
	char kind[8];		/* "bytes" or "bpe" */
	uint32_t vocab;
	uint64_t n[2], bytes[2];	/* ids and bytes of each part */
	double learn_s;		/* seconds learning took; 0 without */
} dlt_text_result;

/* Reads the files, learns or takes the tokenizer, encodes each file (an
 * eot between them with o->eot), splits and writes.  It holds the input
 * and the ids, no more (learning's tables are freed before encoding).
 * Errors leave no output file. */
int dlt_prep_text(char *const *files, int nfiles, const dlt_text_opts *o, dlt_text_result *r);

/* The bytes of a token archive's ids, appended to out (the eot gives
 * none): dlt-prep text --decode, which the tests use. */
int dlt_prep_text_decode(const char *path, dlt_buf *out);

/* For dlt-prep info of an archive of kind "tokens": checks it as
 * dlt_tokens_open does, then appends the bytes a token and the longest
 * merged tokens (escaped, as "\x0a") as text to out, or as members to
 * the JSON object j is building (one of them NULL). */
int dlt_tokens_describe(dlt_archive *a, dlt_buf *out, dlt_json *j);

#endif
