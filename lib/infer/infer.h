/* infer: a trained model read from a model file or checkpoint, on any
 * backend, and what is done with it: batches of predictions, and for a
 * language model (a model whose first layer is an embedding: token ids
 * in, a row of logits over the vocabulary out for each position) text
 * generation and the scoring of new text.
 *
 * Generation runs the model a position at a time over a KV cache: the
 * model's own activations of a sequence (its batch row) are the cache,
 * every op but attention is per position and runs on the new row alone,
 * and attention's queries, keys and values of the positions before stay
 * in its qkv buffer, so a new token costs one position
 * (attention_decode, kernels.h, for the one query).  A batch of
 * sequences makes a token of each a step: their new rows packed
 * together, so each GEMM runs once on the B rows, and each sequence's
 * query attends over its own cache.  Past the context length T the
 * positions shift, so the cache is recomputed over the last T tokens for
 * each new token: the model never sees more than T, as in training.  The
 * reference (dlt_sampling.recompute) runs the whole model over the last
 * min(len, T) tokens of every sequence for every token, padded with id 0
 * (the attention is causal, so the padding after the last real position
 * changes nothing before it); both give the same tokens.
 *
 * Sampling is on the host, from the logits of the last position: greedy
 * (temperature 0) or softmax at a temperature over the k most likely
 * tokens (a partial selection, not a sort of the vocabulary) or over all,
 * with a uniform number from Philox(seed) at (stream, position): the
 * same seed, stream and prompt give the same text on every run.
 * Sequence i of a batch draws from stream s.stream + i, and every op
 * computes a row on its own, so it gets the tokens of generating it
 * alone with that stream (on the CPU bit for bit; a GPU's GEMM may round
 * another way for another number of rows). */
#ifndef DLT_INFER_H
#define DLT_INFER_H

#include "nn/nn.h"
#include "prep/tokens.h"
#include "train/train.h"

typedef struct dlt_infer dlt_infer;

/* Opens a model file or checkpoint, every checksum checked: its config
 * and input description (dlt_ckpt_input), and for a language model its
 * tokenizer (the file's, as a token archive carries it; the bytes
 * tokenizer where the file has none). */
int dlt_infer_open(dlt_infer **ctx, const char *path);
/* Builds the model on be for batches of up to max_batch samples and
 * reads its weights; then the file is closed.  threads > 0 sets the CPU
 * kernels' threads. */
int dlt_infer_load(dlt_infer *ctx, const dlt_backend *be, int max_batch, int threads);
/* The backend to load on: device "cpu", "cuda" or "cuda:N" (no such GPU
 * is DLT_EFAIL, with the driver's reason); NULL: the model's own (its
 * config's device) where that GPU is there, else the CPU. */
int dlt_infer_backend(const dlt_infer *ctx, const char *device, const dlt_backend **be);
void dlt_infer_close(dlt_infer *ctx);

/* What the model expects (dlt_ckpt_input's description) */
const dlt_dataset *dlt_infer_input(const dlt_infer *ctx);
/* The model, after dlt_infer_load */
dlt_model *dlt_infer_model(dlt_infer *ctx);
/* Classification: the softmax of a row of k logits into probs and the
 * first index of the largest (the trainer's argmax) */
int dlt_infer_class_row(const float *logits, int k, float *probs);

/* Language models.  dlt_infer_need_lm is an error naming the file for a
 * model that is not one (first layer not an embedding, logits not per
 * position, attention not causal); the others are only meaningful for
 * one. */
int dlt_infer_need_lm(const dlt_infer *ctx);
const dlt_tokenizer *dlt_infer_tokenizer(const dlt_infer *ctx);
int dlt_infer_context(const dlt_infer *ctx);		/* T: positions a forward pass */
uint32_t dlt_infer_vocab(const dlt_infer *ctx);		/* the model's outputs a position */
/* Text into *n ids (*ids, malloc'd, the caller's to free), each checked
 * to be below the model's vocabulary (else DLT_EINPUT naming it) */
int dlt_infer_encode(const dlt_infer *ctx, const void *text, size_t len, uint32_t **ids,
		     size_t *n);

/* Called with each new token as soon as it is made: its id, its bytes
 * (none for the eot) and the model's log-probability of it (softmax at
 * temperature 1 over the whole vocabulary).  A negative return stops the
 * generation, which returns it. */
typedef int (*dlt_infer_token_fn)(void *arg, uint32_t id, const uint8_t *bytes, size_t len,
				  double logprob);

typedef struct dlt_sampling {
	double temperature;	/* 0: the most likely token (greedy), else > 0 */
	int top_k;		/* sample among the k most likely; 0: all */
	uint64_t seed;
	uint64_t stream;	/* the random stream (of a batch's first sequence) */
	int recompute;		/* the reference path: no KV cache */
} dlt_sampling;

/* n_new tokens after the n of prompt (n >= 1, each below the vocabulary). */
int dlt_infer_generate(dlt_infer *ctx, const uint32_t *prompt, size_t n, size_t n_new,
		       const dlt_sampling *s, dlt_infer_token_fn fn, void *arg);

/* dlt_infer_token_fn for a token of sequence seq of a batch */
typedef int (*dlt_infer_seq_fn)(void *arg, int seq, uint32_t id, const uint8_t *bytes,
				size_t len, double logprob);
/* n_seq sequences as one batch (1 to the loaded max_batch): n_new tokens
 * after each of prompts[i] (n[i] >= 1 ids); a step makes one token of
 * every sequence, passed to fn in the sequences' order.  Memory is
 * allocated once, not a token. */
int dlt_infer_generate_batch(dlt_infer *ctx, int n_seq, const uint32_t *const *prompts,
			     const size_t *n, size_t n_new, const dlt_sampling *s,
			     dlt_infer_seq_fn fn, void *arg);
/* The logits that the last token was drawn from (host memory, vocab
 * floats; those of the token's sequence), for the callback */
const float *dlt_infer_logits(const dlt_infer *ctx);

/* The loss of n ids (n >= 2) under the model, every token after the
 * first predicted once: fixed windows of T + 1 tokens, window i from
 * token i T (its first T the input, its last T the targets), the last
 * one shorter and padded; batches of the loaded max_batch windows.
 * bytes: the bytes the ids came from, for bits per byte as training
 * reports it (the loss / ln 2 / the bytes a token). */
typedef struct dlt_score {
	double nats;		/* summed over the predicted tokens */
	uint64_t predicted;	/* n - 1 */
	double loss;		/* nats a predicted token */
	double bpb;
} dlt_score;
int dlt_infer_score(dlt_infer *ctx, const uint32_t *ids, size_t n, uint64_t bytes,
		    dlt_score *r);

#endif
