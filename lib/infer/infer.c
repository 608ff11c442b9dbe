/* Inference: the model of a file on a backend; generation over a KV cache
 * and scoring for language models (infer.h says how). */
#define _GNU_SOURCE	/* qsort_r */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer/infer.h"
#include "kernels/common/math.h"
#include "kernels/common/philox.h"
#include "nn/model.h"
#include "train/ckpt.h"

struct dlt_infer {
	char *path;
	dlt_ckpt k;
	dlt_config c;
	int have_c;
	dlt_dataset like;
	dlt_model m;
	int have_m;
	dlt_tokenizer *tok;
	int lm;			/* the config's first layer is an embedding */
	int T;			/* positions a forward pass (language models) */
	uint32_t V;		/* outputs a position */
	uint32_t n_sample;	/* ids sampled from: the vocabulary, or the
				 * tokenizer's when it is smaller */
	int cache;		/* every op runs a row at a time (run_span) */
	/* each attention's cache of its sequences' past q, k, v [max_batch,
	 * T, 3C]: its qkv, or memory of its own where training's 16-bit
	 * storage put qkv in the model's pool (l->half), which the other ops
	 * reuse between tokens */
	float **kv;
	float *packed;		/* the rows' heads' output, and q, k, v where
				 * packed (span's): max(max_batch, T) rows of
				 * the widest attention */
	float *logits;		/* host: max_batch x V, each sequence's last
				 * position's */
	int last;		/* the sequence of the token the callback has */
	float *rows;		/* host: T x V, a scored window's */
	int32_t *in;		/* host: T x max_batch ids */
	uint32_t *cand;		/* V: top-k's candidates */
	double *w;		/* V: their weights */
};

int dlt_infer_open(dlt_infer **out, const char *path)
{
	dlt_infer *x = dlt_calloc(1, sizeof(*x));
	int rc;

	*out = NULL;
	if (!x)
		return DLT_ENOMEM;
	if (!(x->path = dlt_strdup(path))) {
		free(x);
		return DLT_ENOMEM;
	}
	DLT_TRY(dlt_ckpt_open(&x->k, path, &x->c));
	x->have_c = 1;
	DLT_TRY(dlt_ckpt_input(&x->k, &x->like));
	x->lm = x->c.n_layers > 0 && x->c.layers[0].kind == DLT_LAYER_EMBEDDING;
	if (x->lm) {
		x->T = x->like.features;
		x->V = (uint32_t)x->like.n_classes;
		/* a file without one (weights imported, say): the bytes */
		if (dlt_jval_get(&x->k.meta, "tokenizer"))
			DLT_TRY(dlt_tokenizer_read(&x->tok, x->k.a));
		else
			DLT_TRY(dlt_tokenizer_bytes(&x->tok));
	}
	*out = x;
	return 0;
fail:
	dlt_infer_close(x);
	return rc;
}

void dlt_infer_close(dlt_infer *x)
{
	if (!x)
		return;
	for (int i = 0; x->kv && i < x->m.n_layers; i++)
		if (x->m.layers[i].half)
			x->m.be->free(x->kv[i]);
	free(x->kv);
	if (x->packed)
		x->m.be->free(x->packed);
	if (x->have_m)
		dlt_model_free(&x->m);
	dlt_ckpt_close(&x->k);
	if (x->have_c)
		dlt_config_free(&x->c);
	dlt_dataset_free(&x->like);
	dlt_tokenizer_free(x->tok);
	free(x->logits);
	free(x->rows);
	free(x->in);
	free(x->cand);
	free(x->w);
	free(x->path);
	free(x);
}

const dlt_dataset *dlt_infer_input(const dlt_infer *x)
{
	return &x->like;
}

dlt_model *dlt_infer_model(dlt_infer *x)
{
	return x->have_m ? &x->m : NULL;
}

int dlt_infer_class_row(const float *logits, int k, float *probs)
{
	int pred;
	dlt_softmax_xent_row(logits, k, -1, 1.0f, probs, &pred);
	return pred;
}

const dlt_tokenizer *dlt_infer_tokenizer(const dlt_infer *x)
{
	return x->tok;
}

int dlt_infer_context(const dlt_infer *x)
{
	return x->T;
}

uint32_t dlt_infer_vocab(const dlt_infer *x)
{
	return x->V;
}

/* Whether op l runs a row at a time in run_rows: the per-position ops
 * of a sequence, and attention over the cache */
static int row_op(const dlt_model *m, const dlt_layer *l)
{
	switch (l->kind) {
	case DLT_LAYER_EMBEDDING:
	case DLT_LAYER_POSITIONAL:
	case DLT_LAYER_LAYERNORM:
	case DLT_LAYER_DENSE:
	case DLT_LAYER_DROPOUT:
	case DLT_LAYER_RELU:
	case DLT_LAYER_LEAKY_RELU:
	case DLT_LAYER_GELU:
	case DLT_LAYER_TANH:
	case DLT_LAYER_SIGMOID:
	case DLT_OP_FORK:
	case DLT_OP_ADD:
		return 1;
	case DLT_LAYER_ATTENTION:
		return m->be->attention_decode != NULL;
	default:	/* conv, pools, batchnorm, flatten: not per position */
		return 0;
	}
}

/* Why the model is not a language model, as an error when report;
 * 0 when it is one (as far as can be told before it is loaded). */
static int lm_check(const dlt_infer *x, int report)
{
	const dlt_model *m = &x->m;
	if (!x->lm)
		return report ? dlt_error(DLT_EINPUT, "%s: not a token model (its first layer is "
					  "not an embedding)", x->path) : -1;
	if (x->like.sample.h != 1 || x->like.sample.w != 1)
		return report ? dlt_error(DLT_EINPUT, "%s: a token model's input must be [T], not "
					  "[%d, %d, %d]", x->path, x->like.sample.c,
					  x->like.sample.h, x->like.sample.w) : -1;
	if (!x->have_m)
		return 0;
	for (int i = 0; i < m->n_layers; i++)
		if (m->layers[i].kind == DLT_LAYER_ATTENTION && !m->layers[i].causal)
			return report ? dlt_error(DLT_EINPUT, "%s: its attention (layer %d) is not "
						  "causal: each position sees the ones after it",
						  x->path, m->layers[i].index) : -1;
	if (m->out_rows != (int)m->t[0].n)
		return report ? dlt_error(DLT_EINPUT, "%s: its outputs are not per position (%d "
					  "rows for %zu tokens)", x->path, m->out_rows,
					  m->t[0].n) : -1;
	return 0;
}

int dlt_infer_need_lm(const dlt_infer *x)
{
	return lm_check(x, 1);
}

/* Floats a position of tensor i (ids: 1) */
static size_t width(const dlt_model *m, int i)
{
	return i == 0 ? 1 : m->t[i].n / (size_t)m->t[i].rows;
}

/* The buffers of a language model's generation and scoring; none for a
 * model that takes tokens but is not one (a classifier of sequences) */
static int lm_setup(dlt_infer *x)
{
	dlt_model *m = &x->m;
	uint32_t tv = dlt_tokenizer_vocab(x->tok);
	size_t tv_floats, packed = 0;

	if (!(x->kv = dlt_calloc((size_t)m->n_layers, sizeof(*x->kv))))
		return DLT_ENOMEM;
	if (lm_check(x, 0) < 0)
		return 0;
	x->n_sample = tv < x->V ? tv : x->V;
	x->cache = 1;
	for (int i = 0; i < m->n_layers; i++) {
		const dlt_layer *l = &m->layers[i];
		size_t n = 3 * (size_t)m->max_batch * m->t[l->in].n;
		x->cache &= row_op(m, l);
		if (l->kind != DLT_LAYER_ATTENTION)
			continue;
		if (!(x->kv[i] = l->half ? m->be->alloc(n * sizeof(float)) : l->qkv))
			return dlt_error(DLT_ENOMEM, "%s: out of memory for the attention's cache",
					 x->path);
		if ((size_t)4 * width(m, l->in) > packed)
			packed = 4 * width(m, l->in);
	}
	packed *= (size_t)(m->max_batch > x->T ? m->max_batch : x->T);
	if (packed && !(x->packed = m->be->alloc(packed * sizeof(float))))
		return dlt_error(DLT_ENOMEM, "%s: out of memory for the attention's rows", x->path);
	if (!dlt_mul_ok((size_t)x->T, (size_t)x->V, &tv_floats))
		return dlt_error(DLT_ENOMEM, "%s: %d x %u logits are too many", x->path, x->T, x->V);
	if (!(x->logits = dlt_malloc((size_t)m->max_batch * x->V * sizeof(float))) ||
	    !(x->rows = dlt_malloc(tv_floats * sizeof(float))) ||
	    !(x->in = dlt_calloc((size_t)x->T * m->max_batch, sizeof(int32_t))) ||
	    !(x->cand = dlt_malloc((size_t)x->V * sizeof(uint32_t))) ||
	    !(x->w = dlt_malloc((size_t)x->V * sizeof(double))))
		return DLT_ENOMEM;
	return 0;
}

int dlt_infer_backend(const dlt_infer *x, const char *device, const dlt_backend **be)
{
	char why[256], *end;
	long n = 0;

	*be = dlt_backend_cpu();
	if (!device) {	/* the model's own GPU where it is there; quietly the CPU if not */
		const dlt_backend *gpu;
		if (x->c.device >= 0 && (gpu = dlt_backend_cuda(x->c.device, why, sizeof(why))))
			*be = gpu;
		return 0;
	}
	if (!strcmp(device, "cpu"))
		return 0;
	if (strncmp(device, "cuda", 4) || (device[4] && device[4] != ':'))
		return dlt_error(DLT_EINPUT, "--device: '%s' is not cpu, cuda or cuda:N", device);
	if (device[4]) {
		errno = 0;
		n = strtol(device + 5, &end, 10);
		if (end == device + 5 || *end || n < 0 || n > 1023 || errno)
			return dlt_error(DLT_EINPUT, "--device: '%s' is not cpu, cuda or cuda:N",
					 device);
	}
	if (!(*be = dlt_backend_cuda((int)n, why, sizeof(why))))
		return dlt_error(DLT_EFAIL, "no CUDA device: %s", why);
	return 0;
}

int dlt_infer_load(dlt_infer *x, const dlt_backend *be, int max_batch, int threads)
{
	if (threads > 0)
		dlt_backend_cpu()->set_threads(threads);
	DLT_TRY_RC(dlt_model_init(&x->m, &x->c, be, x->like.sample, x->like.n_classes,
				  max_batch));
	x->have_m = 1;
	DLT_TRY_RC(dlt_model_read(&x->m, x->k.a));
	dlt_ckpt_close(&x->k);	/* all read: the weights are in the model */
	memset(&x->k, 0, sizeof(x->k));
	return x->lm ? lm_setup(x) : 0;
}

int dlt_infer_encode(const dlt_infer *x, const void *text, size_t len, uint32_t **ids,
		     size_t *n)
{
	uint32_t *out = dlt_malloc((len ? len : 1) * sizeof(*out));
	int rc;

	*ids = NULL;
	*n = 0;
	if (!out)
		return DLT_ENOMEM;
	DLT_TRY(dlt_tokenizer_encode(x->tok, text, len, DLT_U32, out, n));
	for (size_t i = 0; i < *n; i++)
		if (out[i] >= x->V) {
			rc = dlt_error(DLT_EINPUT, "%s: token %zu of the text is id %u, beyond the "
				       "model's vocabulary of %u", x->path, i, out[i], x->V);
			goto fail;
		}
	*ids = out;
	return 0;
fail:
	free(out);
	*n = 0;
	return rc;
}

/* ---- the model a row at a time ---- */

static const float *pw(const dlt_model *m, int k)
{
	return k >= 0 ? m->dev_w + m->params[k].off : NULL;
}

/* The rows of one pass over the cache.  Either positions [p0, p0 + n)
 * of sequence seq, in its own batch row (the positions before p0 done
 * already), or (pos set) one new position of each of n sequences, packed
 * in rows 0 .. n - 1 of every tensor: row i is position pos[i] of
 * sequence seqs[i], so the per-position ops, the GEMMs above all, run
 * once on the n rows.  Only attention's cache (x->kv) holds a sequence's
 * past; the other tensors' rows of the positions before are not read
 * again, so the packed rows may overwrite them. */
typedef struct span {
	int seq, p0, n;
	const int *seqs, *pos;
	float *packed;		/* room for the rows' heads' output, and with pos
				 * set their q, k, v before it */
} span;

/* The first tensor row of a span */
static size_t span_row(const dlt_model *m, const span *sp)
{
	return sp->pos ? 0 : (size_t)sp->seq * m->t[0].n + (size_t)sp->p0;	/* T ids a row */
}

/* Attention on a span: the heads' output is made in sp->packed (after
 * the packed rows' q, k and v), then each row's k and v go to its
 * sequence's cache (kv) and its query attends there.  In bf16 and fp16,
 * q, k, v and the heads' output are rounded, as in forward. */
static void attention_span(dlt_model *m, dlt_layer *l, const span *sp, float *kv,
			   const float *x, float *y)
{
	const dlt_backend *be = m->be;
	const int C = (int)width(m, l->in), n = sp->n;
	const size_t row = span_row(m, sp), seq_qkv = m->t[0].n * 3 * C;
	float *qkv = sp->pos ? sp->packed : kv + row * 3 * C;
	float *att = sp->packed + (sp->pos ? (size_t)n * 3 * C : 0);

	be->gemm(m->prec, 0, 1, n, 3 * C, C, 1.0f, x, C, pw(m, l->w), C, 0.0f, qkv, 3 * C);
	be->bias_act(qkv, pw(m, l->b), n, 3 * C, DLT_ACT_NONE, 0.0f, m->prec);
	if (!sp->pos) {
		be->attention_decode(kv + (size_t)sp->seq * seq_qkv, att, sp->p0, n, C, l->heads);
	} else {
		for (int i = 0; i < n; i++) {
			float *cache = kv + (size_t)sp->seqs[i] * seq_qkv;
			be->copy(cache + (size_t)sp->pos[i] * 3 * C, qkv + (size_t)i * 3 * C,
				 (size_t)3 * C * sizeof(float));
			be->attention_decode(cache, att + (size_t)i * C, sp->pos[i], 1, C, l->heads);
		}
	}
	if (m->prec != DLT_PREC_F32)
		be->round(att, (size_t)n * C, m->prec);
	be->gemm(m->prec, 0, 1, n, C, C, 1.0f, att, C, pw(m, l->w2), C, 0.0f, y, C);
	be->bias_act(y, pw(m, l->b2), n, C, DLT_ACT_NONE, 0.0f, m->prec);
}

/* Op l on the rows of a span: forward_op's arithmetic on those rows (kv:
 * an attention's cache).  Returns the tensor it wrote, -1 if none. */
static int row_forward(dlt_model *m, dlt_layer *l, const span *sp, float *kv)
{
	const dlt_backend *be = m->be;
	const size_t r0 = span_row(m, sp);
	int n = sp->n, win = (int)width(m, l->in), wout = (int)width(m, l->out);
	const float *x = dlt_tensor_a(m, l->in) + r0 * win;
	float *y = dlt_tensor_a(m, l->out) + r0 * wout;

	switch (l->kind) {
	case DLT_LAYER_EMBEDDING:
		be->embedding_forward((const int32_t *)x, pw(m, l->w), y, n,
				      (int)m->params[l->w].dims[1], (int)m->params[l->w].dims[0]);
		break;
	case DLT_LAYER_POSITIONAL:
		if (!sp->pos) {
			be->positional_forward(x, pw(m, l->w) + (size_t)sp->p0 * win, y, 1, n, win);
			break;
		}
		/* packed rows: a call for each run of rows at one position */
		for (int i = 0, j; i < n; i = j) {
			for (j = i + 1; j < n && sp->pos[j] == sp->pos[i]; j++)
				;
			be->positional_forward(x + (size_t)i * win, pw(m, l->w) +
					       (size_t)sp->pos[i] * win, y + (size_t)i * win, j - i,
					       1, win);
		}
		break;
	case DLT_LAYER_LAYERNORM:
		be->layernorm_forward(x, pw(m, l->w), pw(m, l->b), y, l->mean + r0,
				      l->invstd + r0, n, win, l->eps);
		break;
	case DLT_LAYER_DENSE:
		dlt_dense_forward(m, l, x, y, n);
		break;
	case DLT_LAYER_ATTENTION:
		attention_span(m, l, sp, kv, x, y);
		break;
	case DLT_LAYER_DROPOUT:	/* evaluation: the identity */
		be->copy(y, x, (size_t)n * win * sizeof(*y));
		break;
	case DLT_OP_FORK:
		return -1;
	case DLT_OP_ADD:
		be->add(x, dlt_tensor_a(m, l->in2) + r0 * win, y, (size_t)n * win);
		break;
	default:	/* an activation */
		if (l->fused)
			return -1;
		be->act_forward(x, y, (size_t)n * win, l->act, l->slope);
	}
	return l->out;
}

/* The model on a span, its ids in the input; the logits of its last row
 * (a sequence's) or of each row (packed) to the sequences' x->logits */
static void run_span(dlt_infer *x, const span *sp)
{
	dlt_model *m = &x->m;
	const size_t r0 = span_row(m, sp), V = x->V;
	const float *out = dlt_tensor_a(m, m->n_t - 1);

	for (int i = 0; i < m->n_layers; i++) {
		int t = row_forward(m, &m->layers[i], sp, x->kv[i]);
		size_t w;
		if (t < 0 || m->prec == DLT_PREC_F32 || dlt_op_rounds(&m->layers[i]))
			continue;
		w = width(m, t);
		m->be->round(dlt_tensor_a(m, t) + r0 * w, (size_t)sp->n * w, m->prec);
	}
	if (!sp->pos) {
		m->be->download(x->logits + (size_t)sp->seq * V, out + (r0 + sp->n - 1) * V,
				V * sizeof(float));
		return;
	}
	/* a download for each run of rows of consecutive sequences */
	for (int i = 0, j; i < sp->n; i = j) {
		for (j = i + 1; j < sp->n && sp->seqs[j] == sp->seqs[i] + (j - i); j++)
			;
		m->be->download(x->logits + (size_t)sp->seqs[i] * V, out + (size_t)i * V,
				(size_t)(j - i) * V * sizeof(float));
	}
}

/* ids[0..n) to rows [r0, r0 + n) of the input */
static void put_ids(dlt_infer *x, const uint32_t *ids, size_t r0, int n)
{
	for (int i = 0; i < n; i++)
		x->in[i] = (int32_t)ids[i];
	x->m.be->upload((int32_t *)dlt_model_input(&x->m) + r0, x->in, (size_t)n * sizeof(int32_t));
}

/* The reference: the whole model over the windows of n_seq sequences in
 * one batch, window b (w[b] <= T ids at ids[b]) in batch row b padded
 * with id 0; the logits of each window's last position. */
static int run_windows(dlt_infer *x, int n_seq, const uint32_t *const *ids, const int *w)
{
	dlt_model *m = &x->m;
	const size_t T = (size_t)x->T, V = x->V;
	const float *out;
	for (int b = 0; b < n_seq; b++)
		for (size_t i = 0; i < T; i++)
			x->in[b * T + i] = i < (size_t)w[b] ? (int32_t)ids[b][i] : 0;
	m->be->upload(dlt_model_input(m), x->in, (size_t)n_seq * T * sizeof(int32_t));
	if (!(out = dlt_model_forward(m, n_seq, 0, 0)))
		return DLT_EINPUT;
	for (int b = 0; b < n_seq; b++)
		m->be->download(x->logits + (size_t)b * V, out + ((size_t)b * T + w[b] - 1) * V,
				V * sizeof(float));
	return 0;
}

/* ---- sampling ---- */

/* NaN logits (a diverged model) are never picked over a number */
static float key(float v)
{
	return isnan(v) ? -INFINITY : v;
}

/* Whether token a comes before token b: the larger logit, then the
 * smaller id (a total order, so the top k are one set) */
static int before(const float *z, uint32_t a, uint32_t b)
{
	float za = key(z[a]), zb = key(z[b]);
	return za > zb || (za == zb && a < b);
}

static int by_logit(const void *pa, const void *pb, void *ctx)
{
	uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
	return a == b ? 0 : before(ctx, a, b) ? -1 : 1;
}

static void swap_u32(uint32_t *a, uint32_t *b)
{
	uint32_t t = *a;
	*a = *b;
	*b = t;
}

/* Puts the first k of idx[0..n) (in before's order) in idx[0..k), in
 * that order: a quickselect, then a sort of the k alone. */
static void select_top(const float *z, uint32_t *idx, size_t n, size_t k)
{
	size_t lo = 0, hi = n;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2, store = lo;
		/* the median of three to the end, as the pivot */
		if (before(z, idx[mid], idx[lo]))
			swap_u32(&idx[mid], &idx[lo]);
		if (before(z, idx[hi - 1], idx[lo]))
			swap_u32(&idx[hi - 1], &idx[lo]);
		if (before(z, idx[mid], idx[hi - 1]))
			swap_u32(&idx[mid], &idx[hi - 1]);
		for (size_t i = lo; i < hi - 1; i++)
			if (before(z, idx[i], idx[hi - 1]))
				swap_u32(&idx[i], &idx[store++]);
		swap_u32(&idx[store], &idx[hi - 1]);
		if (k == store || k == store + 1)
			break;
		if (k < store)
			hi = store;
		else
			lo = store + 1;
	}
	qsort_r(idx, k, sizeof(*idx), by_logit, (void *)z);
}

/* A uniform double in [0, 1), 53 bits of Philox(seed) at block
 * position of stream: where the stream is 0, the first two words of
 * dlt_rng_init(seed, position)'s first block (the position in the
 * block's high half), so a sequence of stream 0 gets the text it got
 * before there were streams */
static double uniform(uint64_t seed, uint64_t stream, uint64_t pos)
{
	uint32_t c[4];
	uint64_t a, b;
	dlt_philox_block(seed, stream, pos << 32 | pos >> 32, c);
	a = c[0] >> 5;
	b = c[1] >> 6;
	return ((double)a * 67108864.0 + (double)b) / 9007199254740992.0;
}

/* The token after position pos - 1 of the sequence of stream, from its
 * logits z */
static uint32_t pick(dlt_infer *x, const dlt_sampling *s, const float *z, uint64_t stream,
		     uint64_t pos)
{
	size_t n = x->n_sample, k = n;
	double total = 0, u, mx;
	uint32_t best = 0;

	if (s->temperature == 0) {
		for (uint32_t j = 1; j < n; j++)
			if (before(z, j, best))
				best = j;
		return best;
	}
	for (uint32_t j = 0; j < n; j++)
		x->cand[j] = j;
	if (s->top_k > 0 && (size_t)s->top_k < n) {
		k = (size_t)s->top_k;
		select_top(z, x->cand, n, k);
	}
	mx = -INFINITY;
	for (size_t i = 0; i < k; i++)
		mx = fmax(mx, key(z[x->cand[i]]));
	for (size_t i = 0; i < k; i++) {
		float v = key(z[x->cand[i]]);
		x->w[i] = v == -INFINITY ? 0 : exp(((double)v - mx) / s->temperature);
		total += x->w[i];
	}
	u = uniform(s->seed, stream, pos) * total;
	for (size_t i = 0; i < k; i++) {
		if (u < x->w[i])
			return x->cand[i];
		u -= x->w[i];
	}
	/* rounding left u past the last: the last of weight > 0 */
	for (size_t i = k; i-- > 0;)
		if (x->w[i] > 0)
			return x->cand[i];
	return x->cand[0];
}

/* log softmax(z)[id], in double */
static double logprob(const float *z, uint32_t V, uint32_t id)
{
	double mx = -INFINITY, sum = 0;
	for (uint32_t j = 0; j < V; j++)
		mx = fmax(mx, key(z[j]));
	for (uint32_t j = 0; j < V; j++)
		sum += exp((double)key(z[j]) - mx);
	return (double)z[id] - mx - log(sum);
}

static int check_ids(const dlt_infer *x, const uint32_t *ids, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++)
		if (ids[i] >= x->V)
			return dlt_error(DLT_EINPUT, "%s: token %zu of the %s is id %u, beyond the "
					 "model's vocabulary of %u", x->path, i, what, ids[i], x->V);
	return 0;
}

static int lm_ready(const dlt_infer *x)
{
	if (!x->have_m)
		return dlt_error(DLT_EINPUT, "%s: the model is not loaded", x->path);
	return dlt_infer_need_lm(x);
}

/* A generation in progress: its sequences, and room for a step's */
typedef struct gen {
	int n_seq;
	struct gen_seq {
		uint32_t *ids;	/* its prompt, then its new tokens */
		size_t len;	/* ids so far */
		size_t cached;	/* positions of its cache filled */
	} *g;
	uint32_t *ids;		/* the sequences' ids, one block */
	int *seqs, *pos;	/* n_seq: the packed span's rows */
	const uint32_t **win;	/* n_seq: the reference's windows */
} gen;

static void gen_free(gen *q)
{
	free(q->g);
	free(q->ids);
	free(q->seqs);
	free(q->win);
}

/* The arguments checked, each prompt copied to a buffer with room for
 * its new tokens: all a generation allocates */
static int gen_start(dlt_infer *x, gen *q, const uint32_t *const *prompts, const size_t *n,
		     size_t n_new, const dlt_sampling *s)
{
	const int n_seq = q->n_seq;
	size_t total = 0;
	char what[32];

	DLT_TRY_RC(lm_ready(x));
	if (n_seq < 1 || n_seq > x->m.max_batch)
		return dlt_error(DLT_EINPUT, "%d sequences, but %s is loaded for batches of 1 to %d",
				 n_seq, x->path, x->m.max_batch);
	if (!(s->temperature >= 0) || !isfinite(s->temperature) || s->top_k < 0)
		return dlt_error(DLT_EINPUT, "bad sampling: temperature %g, top-k %d",
				 s->temperature, s->top_k);
	for (int b = 0; b < n_seq; b++) {
		if (n[b] == 0 && n_seq == 1)
			return dlt_error(DLT_EINPUT, "an empty prompt: give at least one token");
		if (n[b] == 0)
			return dlt_error(DLT_EINPUT, "prompt %d of the batch is empty: give at least "
					 "one token", b);
		snprintf(what, sizeof(what), n_seq == 1 ? "prompt" : "prompt %d", b);
		DLT_TRY_RC(check_ids(x, prompts[b], n[b], what));
		if (n[b] + n_new < n_new || total + n[b] + n_new < total)
			return DLT_ENOMEM;
		total += n[b] + n_new;
	}
	if (!(q->g = dlt_calloc((size_t)n_seq, sizeof(*q->g))) ||
	    !(q->ids = dlt_malloc(total * sizeof(*q->ids))) ||
	    !(q->seqs = dlt_malloc((size_t)n_seq * 2 * sizeof(*q->seqs))) ||
	    !(q->win = dlt_malloc((size_t)n_seq * sizeof(*q->win))))
		return DLT_ENOMEM;
	q->pos = q->seqs + n_seq;
	total = 0;
	for (int b = 0; b < n_seq; b++) {
		q->g[b].ids = q->ids + total;
		q->g[b].len = n[b];
		memcpy(q->g[b].ids, prompts[b], n[b] * sizeof(*q->ids));
		total += n[b] + n_new;
	}
	return 0;
}

/* The logits of every sequence's next token, over the cache: a sequence
 * whose window moved (or its prompt) runs on its own rows, then the
 * others' one new position each, packed in one span */
static void gen_cached(dlt_infer *x, gen *q)
{
	const size_t T = (size_t)x->T;
	span sp = { .seqs = q->seqs, .pos = q->pos, .packed = x->packed };

	for (int b = 0; b < q->n_seq; b++) {
		struct gen_seq *g = &q->g[b];
		size_t start = g->len > T ? g->len - T : 0, w = g->len - start;
		if (start == 0 && g->cached > 0) {
			/* one position more: the cache holds the ones before */
			q->seqs[sp.n] = b;
			q->pos[sp.n++] = (int)g->cached;
			g->cached = g->len;
		} else {
			/* the prompt, or a window that moved: its positions shift */
			span one = { .seq = b, .p0 = 0, .n = (int)w, .packed = x->packed };
			put_ids(x, g->ids + start, (size_t)b * T, (int)w);
			run_span(x, &one);
			g->cached = w;
		}
	}
	if (sp.n == 0)
		return;
	for (int i = 0; i < sp.n; i++) {
		const struct gen_seq *g = &q->g[q->seqs[i]];
		x->in[i] = (int32_t)g->ids[g->len - 1];
	}
	x->m.be->upload(dlt_model_input(&x->m), x->in, (size_t)sp.n * sizeof(int32_t));
	run_span(x, &sp);
}

/* The reference's logits: the windows of all sequences in one batch */
static int gen_windows(dlt_infer *x, gen *q)
{
	const size_t T = (size_t)x->T;
	for (int b = 0; b < q->n_seq; b++) {
		size_t start = q->g[b].len > T ? q->g[b].len - T : 0;
		q->win[b] = q->g[b].ids + start;
		q->pos[b] = (int)(q->g[b].len - start);
	}
	return run_windows(x, q->n_seq, q->win, q->pos);
}

int dlt_infer_generate_batch(dlt_infer *x, int n_seq, const uint32_t *const *prompts,
			     const size_t *n, size_t n_new, const dlt_sampling *s,
			     dlt_infer_seq_fn fn, void *arg)
{
	gen q = { .n_seq = n_seq };
	int rc;

	DLT_TRY(gen_start(x, &q, prompts, n, n_new, s));
	/* the weights stay as they are until the last token */
	if (x->m.be->hold_weights)
		x->m.be->hold_weights(1);
	for (size_t i = 0; i < n_new; i++) {
		if (s->recompute || !x->cache)
			DLT_TRY(gen_windows(x, &q));
		else
			gen_cached(x, &q);
		if (dlt_model_error(&x->m)) {
			rc = dlt_error(DLT_EIO, "%s: %s", x->m.be->name, dlt_model_error(&x->m));
			goto fail;
		}
		for (int b = 0; b < n_seq; b++) {
			struct gen_seq *g = &q.g[b];
			const float *z = x->logits + (size_t)b * x->V;
			uint32_t id = pick(x, s, z, s->stream + (uint64_t)b, g->len);
			const uint8_t *bytes;
			size_t blen;
			g->ids[g->len++] = id;
			bytes = dlt_tokenizer_token(x->tok, id, &blen);
			x->last = b;
			DLT_TRY(fn(arg, b, id, bytes, blen, logprob(z, x->V, id)));
		}
	}
	rc = 0;
fail:
	if (x->m.be->hold_weights)
		x->m.be->hold_weights(0);
	gen_free(&q);
	return rc;
}

/* dlt_infer_generate's callback, through the batch's */
typedef struct one_fn {
	dlt_infer_token_fn fn;
	void *arg;
} one_fn;

static int call_one(void *arg, int seq, uint32_t id, const uint8_t *bytes, size_t len,
		    double logprob)
{
	one_fn *o = arg;
	(void)seq;
	return o->fn(o->arg, id, bytes, len, logprob);
}

int dlt_infer_generate(dlt_infer *x, const uint32_t *prompt, size_t n, size_t n_new,
		       const dlt_sampling *s, dlt_infer_token_fn fn, void *arg)
{
	one_fn o = { fn, arg };
	return dlt_infer_generate_batch(x, 1, &prompt, &n, n_new, s, call_one, &o);
}

const float *dlt_infer_logits(const dlt_infer *x)
{
	return x->logits + (size_t)x->last * x->V;
}

/* ---- scoring ---- */

int dlt_infer_score(dlt_infer *x, const uint32_t *ids, size_t n, uint64_t bytes, dlt_score *r)
{
	const int T = x->T;
	dlt_model *m = &x->m;
	size_t windows, V = x->V;
	double nats = 0;

	memset(r, 0, sizeof(*r));
	DLT_TRY_RC(lm_ready(x));
	if (n < 2)
		return dlt_error(DLT_EINPUT, "%zu token%s: nothing to score (at least 2: each "
				 "token after the first is predicted)", n, n == 1 ? "" : "s");
	DLT_TRY_RC(check_ids(x, ids, n, "text"));
	windows = (n - 2) / (size_t)T + 1;
	for (size_t w0 = 0; w0 < windows; w0 += (size_t)m->max_batch) {
		int b = windows - w0 < (size_t)m->max_batch ? (int)(windows - w0) : m->max_batch;
		const float *out;
		for (int i = 0; i < b; i++)
			for (int t = 0; t < T; t++) {
				size_t at = (w0 + (size_t)i) * T + (size_t)t;
				x->in[(size_t)i * T + t] = at < n ? (int32_t)ids[at] : 0;
			}
		m->be->upload(dlt_model_input(m), x->in, (size_t)b * T * sizeof(int32_t));
		if (!(out = dlt_model_forward(m, b, 0, 0)))
			return DLT_EINPUT;
		for (int i = 0; i < b; i++) {
			size_t first = (w0 + (size_t)i) * T;
			int rows = n - 1 - first < (size_t)T ? (int)(n - 1 - first) : T;
			m->be->download(x->rows, out + (size_t)i * T * V, (size_t)rows * V * sizeof(float));
			for (int t = 0; t < rows; t++)
				nats -= logprob(x->rows + (size_t)t * V, x->V, ids[first + t + 1]);
		}
		if (dlt_model_error(m))
			return dlt_error(DLT_EIO, "%s: %s", m->be->name, dlt_model_error(m));
	}
	r->nats = nats;
	r->predicted = n - 1;
	r->loss = nats / (double)(n - 1);
	r->bpb = bytes ? r->loss / log(2.0) / ((double)bytes / (double)n) : NAN;
	return 0;
}
