/* Byte-level BPE (tokens.h): the chunker, learning, encoding and decoding,
 * and the tokenizer in an archive. */
#include <stdlib.h>
#include <string.h>

#include "tokens.h"

#define NONE UINT32_MAX

struct dlt_tokenizer {
	int bpe;		/* 0: bytes */
	uint32_t nmerges;
	uint32_t *merges;	/* (left, right) of token 256+i */
	int64_t eot;		/* -1: none */
	/* (left, right) -> rank, open addressing: what encoding asks */
	uint64_t *keys;
	uint32_t *ranks;
	size_t mask;
	/* the bytes of token id: pool[off[id] .. off[id]+len[id]) */
	uint32_t *off;
	uint16_t *len;
	uint8_t *pool;
};

static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	return x ^ (x >> 33);
}

static inline uint64_t pair_key(uint32_t l, uint32_t r)
{
	return (uint64_t)l << 32 | r;
}

/* The chunker */

enum { C_LETTER, C_DIGIT, C_SPACE, C_OTHER };

static inline int byte_class(uint8_t c)
{
	if (((c | 32) >= 'a' && (c | 32) <= 'z') || c >= 0x80)
		return C_LETTER;
	if (c >= '0' && c <= '9')
		return C_DIGIT;
	if (c == ' ' || (c >= '\t' && c <= '\r'))
		return C_SPACE;
	return C_OTHER;
}

size_t dlt_tokenizer_chunk(const void *text, size_t n)
{
	const uint8_t *p = text;
	size_t i = 0, max = n < DLT_BPE_MAX_TOKEN ? n : DLT_BPE_MAX_TOKEN;
	int c;

	if (n == 0)
		return 0;
	if (p[0] == ' ' && n > 1 && byte_class(p[1]) != C_SPACE)
		i = 1;
	c = byte_class(p[i++]);
	while (i < max && byte_class(p[i]) == c)
		i++;
	/* "\n  word": the space before the word goes with it */
	if (c == C_SPACE && i > 1 && i < n && p[i - 1] == ' ' && byte_class(p[i]) != C_SPACE)
		i--;
	return i;
}

/* The tokenizer */

void dlt_tokenizer_free(dlt_tokenizer *t)
{
	if (!t)
		return;
	free(t->merges);
	free(t->keys);
	free(t->ranks);
	free(t->off);
	free(t->len);
	free(t->pool);
	free(t);
}

const char *dlt_tokenizer_kind(const dlt_tokenizer *t)
{
	return t->bpe ? "bpe" : "bytes";
}

uint32_t dlt_tokenizer_vocab(const dlt_tokenizer *t)
{
	return 256 + t->nmerges + (t->eot >= 0);
}

int64_t dlt_tokenizer_eot(const dlt_tokenizer *t)
{
	return t->eot;
}

void dlt_tokenizer_add_eot(dlt_tokenizer *t)
{
	if (t->eot < 0)
		t->eot = 256 + (int64_t)t->nmerges;
}

uint32_t dlt_tokenizer_merges(const dlt_tokenizer *t, const uint32_t **pairs)
{
	*pairs = t->merges;
	return t->nmerges;
}

const uint8_t *dlt_tokenizer_token(const dlt_tokenizer *t, uint32_t id, size_t *len)
{
	if (id >= 256 + t->nmerges) {
		*len = 0;
		return t->pool;
	}
	*len = t->len[id];
	return t->pool + t->off[id];
}

int dlt_tokens_dtype(uint32_t vocab)
{
	return vocab <= 65536 ? DLT_U16 : DLT_U32;
}

static uint32_t rank_of(const dlt_tokenizer *t, uint32_t l, uint32_t r)
{
	uint64_t key = pair_key(l, r);

	if (!t->keys)
		return NONE;
	for (size_t i = mix64(key) & t->mask;; i = (i + 1) & t->mask) {
		if (t->keys[i] == key)
			return t->ranks[i];
		if (t->keys[i] == UINT64_MAX)
			return NONE;
	}
}

/* The byte table and the rank table of the merges, which must refer to
 * tokens made before them; name is for messages about a tokenizer read
 * from a file: a token too long, a pair merged twice. */
static int build(dlt_tokenizer *t, const char *name)
{
	uint32_t v = 256 + t->nmerges;
	size_t pool = 0, cap = 16;

	if (!(t->off = dlt_calloc(v, sizeof(*t->off))) || !(t->len = dlt_calloc(v, sizeof(*t->len))))
		return DLT_ENOMEM;
	for (uint32_t i = 0; i < v; i++) {
		size_t n = i < 256 ? 1 : (size_t)t->len[t->merges[2 * (i - 256)]] +
						t->len[t->merges[2 * (i - 256) + 1]];
		if (n > DLT_BPE_MAX_TOKEN)
			return dlt_error(DLT_EINPUT, "%s: tensor 'merges': merge %u makes a token of "
					 "%zu bytes (at most %d)", name, i - 256, n,
					 DLT_BPE_MAX_TOKEN);
		t->off[i] = (uint32_t)pool;
		t->len[i] = (uint16_t)n;
		pool += n;
	}
	if (!(t->pool = dlt_malloc(pool)))
		return DLT_ENOMEM;
	for (uint32_t i = 0; i < v; i++) {
		if (i < 256) {
			t->pool[t->off[i]] = (uint8_t)i;
		} else {
			uint32_t l = t->merges[2 * (i - 256)], r = t->merges[2 * (i - 256) + 1];
			memcpy(t->pool + t->off[i], t->pool + t->off[l], t->len[l]);
			memcpy(t->pool + t->off[i] + t->len[l], t->pool + t->off[r], t->len[r]);
		}
	}
	while (cap < 2 * (size_t)t->nmerges)
		cap *= 2;
	t->mask = cap - 1;
	if (!(t->keys = dlt_malloc(cap * sizeof(*t->keys))) ||
	    !(t->ranks = dlt_malloc(cap * sizeof(*t->ranks))))
		return DLT_ENOMEM;
	memset(t->keys, 0xff, cap * sizeof(*t->keys));
	for (uint32_t m = 0; m < t->nmerges; m++) {
		uint64_t key = pair_key(t->merges[2 * m], t->merges[2 * m + 1]);
		size_t i = mix64(key) & t->mask;
		while (t->keys[i] != UINT64_MAX && t->keys[i] != key)
			i = (i + 1) & t->mask;
		if (t->keys[i] == key)
			return dlt_error(DLT_EINPUT, "%s: tensor 'merges': merge %u repeats merge %u "
					 "(%u, %u)", name, m, t->ranks[i], t->merges[2 * m],
					 t->merges[2 * m + 1]);
		t->keys[i] = key;
		t->ranks[i] = m;
	}
	return 0;
}

static dlt_tokenizer *tokenizer_new(void)
{
	dlt_tokenizer *t = dlt_calloc(1, sizeof(*t));
	if (t)
		t->eot = -1;
	return t;
}

int dlt_tokenizer_bytes(dlt_tokenizer **out)
{
	dlt_tokenizer *t = tokenizer_new();
	int rc;

	*out = NULL;
	if (!t)
		return DLT_ENOMEM;
	if ((rc = build(t, "bytes")) < 0) {
		dlt_tokenizer_free(t);
		return rc;
	}
	*out = t;
	return 0;
}

/* Learning */

struct word {
	const uint8_t *bytes;	/* its first occurrence in the text */
	uint32_t nbytes, len;	/* bytes, and tokens now: toks[off .. off+len) */
	size_t off;
	uint64_t freq;
	uint32_t stamp;		/* the last merge that went through it, + 1 */
};

struct pair {
	uint32_t l, r;
	int64_t count;		/* occurrences in the text, overlapping ones too */
	uint32_t heap;		/* index in the heap */
	uint32_t nw, cw;	/* words that may hold it, and their capacity */
	uint32_t *w;
};

struct learn {
	struct word *words;
	size_t nwords, cwords;
	uint32_t *wslot;	/* word ids by hash of bytes; NONE: empty */
	size_t wmask;
	uint32_t *toks;
	size_t ntoks, ctoks;
	struct pair *pairs;
	size_t npairs, cpairs;
	uint32_t *pslot;	/* pair ids by hash of (l, r) */
	size_t pmask;
	uint32_t *heap;		/* pair ids, the most frequent on top */
	size_t nheap, cheap;
	int heap_live;		/* off while the counts are first made */
};

static uint32_t *slots_new(size_t n)
{
	uint32_t *s = dlt_malloc(n * sizeof(*s));
	if (s)
		memset(s, 0xff, n * sizeof(*s));
	return s;
}

static int word_grow(struct learn *L)
{
	size_t n = (L->wmask + 1) * 2;
	uint32_t *s = slots_new(n);

	if (!s)
		return DLT_ENOMEM;
	for (size_t w = 0; w < L->nwords; w++) {
		size_t i = dlt_xxh64(L->words[w].bytes, L->words[w].nbytes, 0) & (n - 1);
		while (s[i] != NONE)
			i = (i + 1) & (n - 1);
		s[i] = (uint32_t)w;
	}
	free(L->wslot);
	L->wslot = s;
	L->wmask = n - 1;
	return 0;
}

/* The word of the chunk p[0..n), or NONE; with add, made when new. */
static int word_find(struct learn *L, const uint8_t *p, size_t n, int add, uint32_t *id)
{
	size_t i;

	if (add && (L->nwords + 1) * 2 > L->wmask + 1)
		DLT_TRY_RC(word_grow(L));
	for (i = dlt_xxh64(p, n, 0) & L->wmask; L->wslot[i] != NONE; i = (i + 1) & L->wmask) {
		const struct word *w = &L->words[L->wslot[i]];
		if (w->nbytes == n && memcmp(w->bytes, p, n) == 0) {
			*id = L->wslot[i];
			return 0;
		}
	}
	*id = NONE;
	if (!add)
		return 0;
	if (L->nwords >= NONE - 1)
		return dlt_error(DLT_EINPUT, "more than %u distinct chunks of text", NONE - 1);
	DLT_TRY_RC(dlt_grow(&L->words, &L->cwords, L->nwords + 1, sizeof(*L->words)));
	DLT_TRY_RC(dlt_grow(&L->toks, &L->ctoks, L->ntoks + n, sizeof(*L->toks)));
	L->words[L->nwords] = (struct word){ .bytes = p, .nbytes = (uint32_t)n,
					     .off = L->ntoks, .len = (uint32_t)n };
	for (size_t k = 0; k < n; k++)
		L->toks[L->ntoks + k] = p[k];
	L->ntoks += n;
	L->wslot[i] = (uint32_t)L->nwords;
	*id = (uint32_t)L->nwords++;
	return 0;
}

/* Whether pair a goes above pair b: more frequent, or as frequent and of
 * smaller (left, right) ids */
static inline int above(const struct learn *L, uint32_t a, uint32_t b)
{
	const struct pair *x = &L->pairs[a], *y = &L->pairs[b];
	if (x->count != y->count)
		return x->count > y->count;
	return x->l != y->l ? x->l < y->l : x->r < y->r;
}

static void heap_put(struct learn *L, size_t i, uint32_t p)
{
	L->heap[i] = p;
	L->pairs[p].heap = (uint32_t)i;
}

static void sift_down(struct learn *L, size_t i)
{
	uint32_t p = L->heap[i];
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= L->nheap)
			break;
		if (c + 1 < L->nheap && above(L, L->heap[c + 1], L->heap[c]))
			c++;
		if (!above(L, L->heap[c], p))
			break;
		heap_put(L, i, L->heap[c]);
		i = c;
	}
	heap_put(L, i, p);
}

static void sift_up(struct learn *L, size_t i)
{
	uint32_t p = L->heap[i];
	while (i > 0 && above(L, p, L->heap[(i - 1) / 2])) {
		heap_put(L, i, L->heap[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
	heap_put(L, i, p);
}

static int pair_grow(struct learn *L)
{
	size_t n = (L->pmask + 1) * 2;
	uint32_t *s = slots_new(n);

	if (!s)
		return DLT_ENOMEM;
	for (size_t p = 0; p < L->npairs; p++) {
		size_t i = mix64(pair_key(L->pairs[p].l, L->pairs[p].r)) & (n - 1);
		while (s[i] != NONE)
			i = (i + 1) & (n - 1);
		s[i] = (uint32_t)p;
	}
	free(L->pslot);
	L->pslot = s;
	L->pmask = n - 1;
	return 0;
}

/* Adds delta to the count of (l, r), made if new; a word that gains it
 * goes on its list. */
static int pair_add(struct learn *L, uint32_t l, uint32_t r, int64_t delta, uint32_t w)
{
	uint64_t key = pair_key(l, r);
	struct pair *p;
	size_t i;
	uint32_t id;

	if ((L->npairs + 1) * 2 > L->pmask + 1)
		DLT_TRY_RC(pair_grow(L));
	for (i = mix64(key) & L->pmask; L->pslot[i] != NONE; i = (i + 1) & L->pmask)
		if (L->pairs[L->pslot[i]].l == l && L->pairs[L->pslot[i]].r == r)
			break;
	if ((id = L->pslot[i]) == NONE) {
		if (L->npairs >= NONE - 1)
			return dlt_error(DLT_EINPUT, "more than %u distinct pairs of tokens", NONE - 1);
		DLT_TRY_RC(dlt_grow(&L->pairs, &L->cpairs, L->npairs + 1, sizeof(*L->pairs)));
		DLT_TRY_RC(dlt_grow(&L->heap, &L->cheap, L->nheap + 1, sizeof(*L->heap)));
		id = (uint32_t)L->npairs++;
		L->pairs[id] = (struct pair){ .l = l, .r = r };
		L->pslot[i] = id;
		heap_put(L, L->nheap++, id);
	}
	p = &L->pairs[id];
	p->count += delta;
	if (delta > 0 && (p->nw == 0 || p->w[p->nw - 1] != w)) {
		size_t cap = p->cw;
		DLT_TRY_RC(dlt_grow(&p->w, &cap, p->nw + 1, sizeof(*p->w)));
		p->cw = (uint32_t)cap;
		p->w[p->nw++] = w;
	}
	if (L->heap_live) {
		sift_up(L, p->heap);
		sift_down(L, L->pairs[id].heap);
	}
	return 0;
}

/* Merges (a, b) into z in word w, left to right, and moves the counts of
 * the pairs beside each occurrence to their new neighbours (the count of
 * (a, b) itself is dropped by the caller). */
static int merge_word(struct learn *L, uint32_t w, uint32_t a, uint32_t b, uint32_t z)
{
	struct word *wd = &L->words[w];
	int64_t f = (int64_t)wd->freq;
	uint32_t *t = L->toks + wd->off, n = wd->len, o = 0, i = 0;

	while (i < n) {
		if (i + 1 < n && t[i] == a && t[i + 1] == b) {
			if (o > 0) {
				DLT_TRY_RC(pair_add(L, t[o - 1], a, -f, w));
				DLT_TRY_RC(pair_add(L, t[o - 1], z, f, w));
			}
			if (i + 2 < n) {
				DLT_TRY_RC(pair_add(L, b, t[i + 2], -f, w));
				DLT_TRY_RC(pair_add(L, z, t[i + 2], f, w));
			}
			t[o++] = z;
			i += 2;
		} else {
			t[o++] = t[i++];
		}
	}
	wd->len = o;
	return 0;
}

static void learn_free(struct learn *L)
{
	for (size_t p = 0; p < L->npairs; p++)
		free(L->pairs[p].w);
	free(L->pairs);
	free(L->pslot);
	free(L->heap);
	free(L->words);
	free(L->wslot);
	free(L->toks);
}

static int learn_words(struct learn *L, const dlt_text *texts, size_t ntexts)
{
	uint32_t id;

	if (!(L->wslot = slots_new(1024)) || !(L->pslot = slots_new(1024)))
		return DLT_ENOMEM;
	L->wmask = L->pmask = 1023;
	for (size_t k = 0; k < ntexts; k++) {
		const uint8_t *p = texts[k].data;
		size_t left = texts[k].len, n;
		for (; left > 0; p += n, left -= n) {
			n = dlt_tokenizer_chunk(p, left);
			DLT_TRY_RC(word_find(L, p, n, 1, &id));
			L->words[id].freq++;
		}
	}
	for (uint32_t w = 0; w < L->nwords; w++) {
		const struct word *wd = &L->words[w];
		for (uint32_t i = 0; i + 1 < wd->len; i++)
			DLT_TRY_RC(pair_add(L, L->toks[wd->off + i], L->toks[wd->off + i + 1],
					    (int64_t)wd->freq, w));
	}
	for (size_t i = L->nheap / 2; i-- > 0;)
		sift_down(L, i);
	L->heap_live = 1;
	return 0;
}

static int learn_merges(struct learn *L, dlt_tokenizer *t, uint32_t want)
{
	while (t->nmerges < want && L->nheap > 0 && L->pairs[L->heap[0]].count > 0) {
		uint32_t top = L->heap[0], z = 256 + t->nmerges, stamp = t->nmerges + 1;
		uint32_t a = L->pairs[top].l, b = L->pairs[top].r, nw = L->pairs[top].nw;
		uint32_t *ws = L->pairs[top].w;
		int rc = 0;

		t->merges[2 * t->nmerges] = a;
		t->merges[2 * t->nmerges + 1] = b;
		t->nmerges++;
		/* the list is ours now: the new pairs (x, z), (z, y) get lists of
		 * their own, and pairs may move in memory as they are made */
		L->pairs[top].w = NULL;
		L->pairs[top].nw = L->pairs[top].cw = 0;
		for (uint32_t k = 0; k < nw && rc == 0; k++) {
			if (L->words[ws[k]].stamp == stamp)
				continue;
			L->words[ws[k]].stamp = stamp;
			rc = merge_word(L, ws[k], a, b, z);
		}
		free(ws);
		if (rc < 0)
			return rc;
		L->pairs[top].count = 0;
		sift_down(L, L->pairs[top].heap);
	}
	return 0;
}

int dlt_tokenizer_learn(dlt_tokenizer **out, const dlt_text *texts, size_t ntexts,
			uint32_t vocab, uint32_t *ids, size_t *nids)
{
	struct learn L = { 0 };
	dlt_tokenizer *t = NULL;
	int rc;

	*out = NULL;
	if (vocab <= 256 || vocab > DLT_BPE_MAX_VOCAB)
		return dlt_error(DLT_EINPUT, "a vocabulary of %u: expected 257 to %d", vocab,
				 DLT_BPE_MAX_VOCAB);
	if (!(t = tokenizer_new()) || !(t->merges = dlt_calloc(vocab - 256, 2 * sizeof(uint32_t)))) {
		rc = DLT_ENOMEM;
		goto fail;
	}
	t->bpe = 1;
	DLT_TRY(learn_words(&L, texts, ntexts));
	DLT_TRY(learn_merges(&L, t, vocab - 256));
	DLT_TRY(build(t, "learned"));
	if (ids) {
		size_t k = 0;
		for (size_t x = 0; x < ntexts; x++) {
			const uint8_t *p = texts[x].data;
			size_t left = texts[x].len, n;
			uint32_t w;
			for (; left > 0; p += n, left -= n) {
				n = dlt_tokenizer_chunk(p, left);
				DLT_TRY(word_find(&L, p, n, 0, &w));
				memcpy(ids + k, L.toks + L.words[w].off, L.words[w].len * sizeof(*ids));
				k += L.words[w].len;
			}
		}
		*nids = k;
	}
	*out = t;
	t = NULL;
fail:
	learn_free(&L);
	dlt_tokenizer_free(t);
	return rc;
}

/* Encoding */

/* The ids of one chunk of n (<= DLT_BPE_MAX_TOKEN) bytes into out: the
 * pair of the lowest rank first, the leftmost of equals first, from a
 * heap of (rank, position) */
static size_t encode_chunk(const dlt_tokenizer *t, const uint8_t *p, size_t n, uint32_t *out)
{
	uint32_t tok[DLT_BPE_MAX_TOKEN];
	uint16_t nxt[DLT_BPE_MAX_TOKEN];
	int16_t prv[DLT_BPE_MAX_TOKEN];
	uint64_t heap[3 * DLT_BPE_MAX_TOKEN];
	size_t nh = 0, k = 0;

#define PUSH(r, pos)                                                               \
	do {                                                                       \
		size_t c_ = nh++;                                                  \
		uint64_t e_ = (uint64_t)(r) << 32 | (pos);                         \
		while (c_ > 0 && heap[(c_ - 1) / 2] > e_) {                        \
			heap[c_] = heap[(c_ - 1) / 2];                             \
			c_ = (c_ - 1) / 2;                                         \
		}                                                                  \
		heap[c_] = e_;                                                     \
	} while (0)

	for (size_t i = 0; i < n; i++) {
		tok[i] = p[i];
		nxt[i] = (uint16_t)(i + 1);
		prv[i] = (int16_t)(i - 1);
	}
	for (size_t i = 0; i + 1 < n; i++) {
		uint32_t r = rank_of(t, tok[i], tok[i + 1]);
		if (r != NONE)
			PUSH(r, i);
	}
	while (nh > 0) {
		uint64_t e = heap[0], last = heap[--nh];
		uint32_t r = (uint32_t)(e >> 32), i = (uint32_t)e, j, r2;
		size_t c = 0;

		for (;;) {	/* the last entry sinks from the top */
			size_t m = 2 * c + 1;
			if (m >= nh)
				break;
			if (m + 1 < nh && heap[m + 1] < heap[m])
				m++;
			if (heap[m] >= last)
				break;
			heap[c] = heap[m];
			c = m;
		}
		if (nh > 0)
			heap[c] = last;
		if (tok[i] == NONE || (j = nxt[i]) >= n || tok[i] != t->merges[2 * r] ||
		    tok[j] != t->merges[2 * r + 1])
			continue;	/* stale: merged away or changed since */
		tok[i] = 256 + r;
		tok[j] = NONE;
		nxt[i] = nxt[j];
		if (nxt[j] < n)
			prv[nxt[j]] = (int16_t)i;
		if (prv[i] >= 0 && (r2 = rank_of(t, tok[prv[i]], tok[i])) != NONE)
			PUSH(r2, (uint32_t)prv[i]);
		if (nxt[i] < n && (r2 = rank_of(t, tok[i], tok[nxt[i]])) != NONE)
			PUSH(r2, i);
	}
#undef PUSH
	for (size_t i = 0; i < n; i = nxt[i])
		out[k++] = tok[i];
	return k;
}

/* Encoded chunks by hash of their bytes, for one call */
struct cache {
	struct centry {
		const uint8_t *bytes;
		uint32_t nbytes, n;
		size_t off;
	} *e;
	uint32_t *slot;
	size_t mask, count, ce;
	uint32_t *ids;
	size_t nids, cids;
};

static int cache_grow(struct cache *c)
{
	size_t n = c->slot ? (c->mask + 1) * 2 : 1024;
	uint32_t *s = slots_new(n);

	if (!s)
		return DLT_ENOMEM;
	for (size_t k = 0; k < c->count; k++) {
		size_t i = dlt_xxh64(c->e[k].bytes, c->e[k].nbytes, 0) & (n - 1);
		while (s[i] != NONE)
			i = (i + 1) & (n - 1);
		s[i] = (uint32_t)k;
	}
	free(c->slot);
	c->slot = s;
	c->mask = n - 1;
	return 0;
}

/* The ids of chunk p[0..n) in the cache, encoded and added if new */
static int cache_get(struct cache *c, const dlt_tokenizer *t, const uint8_t *p, size_t n,
		     const uint32_t **ids, size_t *nids)
{
	size_t i;

	if (!c->slot || (c->count + 1) * 2 > c->mask + 1)
		DLT_TRY_RC(cache_grow(c));
	for (i = dlt_xxh64(p, n, 0) & c->mask; c->slot[i] != NONE; i = (i + 1) & c->mask) {
		const struct centry *e = &c->e[c->slot[i]];
		if (e->nbytes == n && memcmp(e->bytes, p, n) == 0) {
			*ids = c->ids + e->off;
			*nids = e->n;
			return 0;
		}
	}
	DLT_TRY_RC(dlt_grow(&c->e, &c->ce, c->count + 1, sizeof(*c->e)));
	DLT_TRY_RC(dlt_grow(&c->ids, &c->cids, c->nids + n, sizeof(*c->ids)));
	c->e[c->count] = (struct centry){ .bytes = p, .nbytes = (uint32_t)n,
					  .off = c->nids };
	c->e[c->count].n = (uint32_t)encode_chunk(t, p, n, c->ids + c->nids);
	*ids = c->ids + c->nids;
	*nids = c->e[c->count].n;
	c->nids += *nids;
	c->slot[i] = (uint32_t)c->count++;
	return 0;
}

static inline void put_id(void *out, int dtype, size_t k, uint32_t id)
{
	if (dtype == DLT_U16)
		((uint16_t *)out)[k] = (uint16_t)id;
	else
		((uint32_t *)out)[k] = id;	/* u32, and i32 of ids below 2^31 */
}

int dlt_tokenizer_encode(const dlt_tokenizer *t, const void *text, size_t n, int dtype,
			 void *out, size_t *nout)
{
	const uint8_t *p = text;
	struct cache c = { 0 };
	size_t k = 0, len;
	int rc = 0;

	*nout = 0;
	if (dtype != DLT_U16 && dtype != DLT_U32 && dtype != DLT_I32)
		return dlt_error(DLT_EINPUT, "token ids of dtype %s: u16, u32 or i32 only",
				 dlt_dtype_name(dtype) ? dlt_dtype_name(dtype) : "?");
	if (dtype == DLT_U16 && dlt_tokenizer_vocab(t) > 65536)
		return dlt_error(DLT_EINPUT, "a vocabulary of %u does not fit u16 ids",
				 dlt_tokenizer_vocab(t));
	for (; n > 0; p += len, n -= len) {
		const uint32_t *ids;
		size_t nids;
		len = dlt_tokenizer_chunk(p, n);
		if (len == 1 || t->nmerges == 0) {
			for (size_t i = 0; i < len; i++)
				put_id(out, dtype, k++, p[i]);
			continue;
		}
		DLT_TRY(cache_get(&c, t, p, len, &ids, &nids));
		for (size_t i = 0; i < nids; i++)
			put_id(out, dtype, k++, ids[i]);
	}
	*nout = k;
fail:
	free(c.e);
	free(c.slot);
	free(c.ids);
	return rc;
}

int dlt_tokenizer_decode(const dlt_tokenizer *t, const void *ids, int dtype, size_t n,
			 dlt_buf *out)
{
	uint32_t v = dlt_tokenizer_vocab(t);
	size_t total = 0;

	if (dtype != DLT_U16 && dtype != DLT_U32 && dtype != DLT_I32)
		return dlt_error(DLT_EINPUT, "token ids of dtype %s: u16, u32 or i32 only",
				 dlt_dtype_name(dtype) ? dlt_dtype_name(dtype) : "?");
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1 && out->cap - out->len < total + 1) {
			char *d = dlt_realloc(out->data, out->len + total + 1);
			if (!d)
				return DLT_ENOMEM;
			out->data = d;
			out->cap = out->len + total + 1;
		}
		for (size_t i = 0; i < n; i++) {
			uint32_t id = dtype == DLT_U16 ? ((const uint16_t *)ids)[i] :
							((const uint32_t *)ids)[i];
			size_t len;
			const uint8_t *b;
			if (id >= v)
				return dlt_error(DLT_EINPUT, "token %u at %zu is not below the "
						 "vocabulary of %u", id, i, v);
			b = dlt_tokenizer_token(t, id, &len);
			if (pass == 0) {
				total += len;
			} else {
				memcpy(out->data + out->len, b, len);
				out->len += len;
			}
		}
	}
	out->data[out->len] = 0;
	return 0;
}

/* In an archive */

static int not_tokens(const char *path, const dlt_jval *m)
{
	const dlt_jval *kind = m ? dlt_jval_get(m, "kind") : NULL;

	if (kind && kind->type == DLT_JSTR)
		return dlt_error(DLT_EINPUT, "%s: not a token archive (a %s archive)", path,
				 kind->str);
	return dlt_error(DLT_EINPUT, "%s: not a token archive (no tokenizer in its metadata)",
			 path);
}

/* The merges of tensor "merges", i32 [m, 2], each of ids made before it */
static int read_merges(dlt_tokenizer *t, dlt_archive *a, uint32_t m)
{
	const char *path = dlt_archive_path(a);
	const dlt_tensor_info *info;
	int32_t *v = NULL;
	void *buf = NULL;
	int rc;

	DLT_TRY(dlt_archive_read_alloc(a, "merges", DLT_I32, 2, &info, &buf));
	v = buf;
	if (info->dims[1] != 2 || info->dims[0] != m) {
		rc = dlt_error(DLT_EINPUT, "%s: tensor 'merges' is [%llu, %llu], not [%u, 2] as the "
			       "vocabulary says", path, (unsigned long long)info->dims[0],
			       (unsigned long long)info->dims[1], m);
		goto fail;
	}
	if (!(t->merges = dlt_calloc(m ? m : 1, 2 * sizeof(*t->merges)))) {
		rc = DLT_ENOMEM;
		goto fail;
	}
	for (uint32_t i = 0; i < m; i++) {
		for (int s = 0; s < 2; s++) {
			int32_t id = v[2 * i + s];
			if (id < 0 || id >= 256 + (int64_t)m) {
				rc = dlt_error(DLT_EINPUT, "%s: tensor 'merges': merge %u: token %d "
					       "is not in the vocabulary", path, i, id);
				goto fail;
			}
			if (id >= 256 + (int64_t)i) {
				rc = dlt_error(DLT_EINPUT, "%s: tensor 'merges': merge %u refers to "
					       "token %d, which a later merge makes", path, i, id);
				goto fail;
			}
			t->merges[2 * i + s] = (uint32_t)id;
		}
	}
	t->nmerges = m;
fail:
	free(buf);
	return rc;
}

int dlt_tokenizer_read(dlt_tokenizer **out, dlt_archive *a)
{
	const char *path = dlt_archive_path(a), *meta = dlt_archive_meta(a);
	const dlt_jval *kind, *voc, *eot;
	dlt_tokenizer *t = NULL;
	dlt_jval m = { 0 };
	long long v, e = -1;
	int rc, parsed = 0;

	*out = NULL;
	if (!meta)
		return not_tokens(path, NULL);
	if ((rc = dlt_json_parse(meta, strlen(meta), &m)) < 0)
		return dlt_error_prefix(rc, "%s: metadata", path);
	parsed = 1;
	if (m.type != DLT_JOBJ || !(kind = dlt_jval_get(&m, "tokenizer"))) {
		rc = not_tokens(path, m.type == DLT_JOBJ ? &m : NULL);
		goto fail;
	}
	if (kind->type != DLT_JSTR || (strcmp(kind->str, "bytes") && strcmp(kind->str, "bpe"))) {
		rc = dlt_error(DLT_EINPUT, "%s: metadata 'tokenizer' is not \"bytes\" or \"bpe\"",
			       path);
		goto fail;
	}
	voc = dlt_jval_get(&m, "vocab");
	eot = dlt_jval_get(&m, "eot");
	if (!voc || !dlt_jval_int(voc, 256, DLT_BPE_MAX_VOCAB + 1, &v)) {
		rc = dlt_error(DLT_EINPUT, "%s: metadata 'vocab' is missing or out of range", path);
		goto fail;
	}
	if (eot && (!dlt_jval_int(eot, 256, DLT_BPE_MAX_VOCAB, &e) || e != v - 1)) {
		rc = dlt_error(DLT_EINPUT, "%s: metadata 'eot' is not the last id of the "
			       "vocabulary of %lld", path, v);
		goto fail;
	}
	if (!(t = tokenizer_new())) {
		rc = DLT_ENOMEM;
		goto fail;
	}
	t->eot = e;
	t->bpe = strcmp(kind->str, "bpe") == 0;
	if (!t->bpe && v != 256 + (e >= 0)) {
		rc = dlt_error(DLT_EINPUT, "%s: metadata 'vocab' is %lld, but the bytes tokenizer "
			       "has %d ids", path, v, 256 + (e >= 0));
		goto fail;
	}
	if (v - (e >= 0) > DLT_BPE_MAX_VOCAB) {
		rc = dlt_error(DLT_EINPUT, "%s: metadata 'vocab' is missing or out of range", path);
		goto fail;
	}
	if (t->bpe)
		DLT_TRY(read_merges(t, a, (uint32_t)(v - 256 - (e >= 0))));
	DLT_TRY(build(t, path));
	*out = t;
	t = NULL;
fail:
	if (parsed)
		dlt_jval_free(&m);
	dlt_tokenizer_free(t);
	return rc;
}

int dlt_tokenizer_write(const dlt_tokenizer *t, dlt_archive_writer *w, dlt_json *j)
{
	int rc = 0;

	if (t->bpe) {
		uint64_t dims[2] = { t->nmerges, 2 };
		int32_t *m = dlt_calloc(t->nmerges ? t->nmerges : 1, 2 * sizeof(*m));
		if (!m)
			return DLT_ENOMEM;
		for (uint32_t i = 0; i < 2 * t->nmerges; i++)
			m[i] = (int32_t)t->merges[i];
		rc = dlt_archive_write_tensor(w, "merges", DLT_I32, 2, dims, m, DLT_RAW, 0);
		free(m);
	}
	dlt_json_str(j, "tokenizer", dlt_tokenizer_kind(t));
	dlt_json_int(j, "vocab", dlt_tokenizer_vocab(t));
	if (t->eot >= 0)
		dlt_json_int(j, "eot", t->eot);
	return rc;
}
