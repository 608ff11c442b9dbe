/* dlt-prep text: text files into token archives (tokens.h); the token
 * archive's reader, and what dlt-prep info says of one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "prep.h"
#include "tokens.h"

/* The token archive */

static void tokens_free(dlt_tokens *t)
{
	dlt_tokenizer_free(t->tok);
	free(t->owned);
}

/* The tokens of archive a, which the caller keeps: its kind, tokenizer,
 * count and ids, each id below the vocabulary. */
static int tokens_load(dlt_tokens *t, dlt_archive *a)
{
	const char *path = dlt_archive_path(a), *meta = dlt_archive_meta(a);
	const dlt_jval *kind, *n, *bytes;
	const dlt_tensor_info *info;
	dlt_jval m = { 0 };
	long long vn, vb;
	uint32_t v;
	int rc = 0, parsed = 0;

	memset(t, 0, sizeof(*t));
	t->a = a;
	if (meta) {
		DLT_TRY(dlt_json_parse(meta, strlen(meta), &m));
		parsed = 1;
	}
	kind = parsed && m.type == DLT_JOBJ ? dlt_jval_get(&m, "kind") : NULL;
	if (!kind || kind->type != DLT_JSTR || strcmp(kind->str, "tokens") != 0) {
		rc = kind && kind->type == DLT_JSTR ?
		     dlt_error(DLT_EINPUT, "%s: not a token archive (a %s archive)", path, kind->str) :
		     dlt_error(DLT_EINPUT, "%s: not a token archive (no kind \"tokens\" in its "
			       "metadata)", path);
		goto fail;
	}
	DLT_TRY(dlt_tokenizer_read(&t->tok, a));
	v = dlt_tokenizer_vocab(t->tok);
	if (!(info = dlt_archive_find(a, "tokens"))) {
		rc = dlt_error(DLT_EINPUT, "%s: no tensor 'tokens'", path);
		goto fail;
	}
	if ((info->dtype != DLT_U16 && info->dtype != DLT_U32) || info->ndim != 1) {
		rc = dlt_error(DLT_EINPUT, "%s: tensor 'tokens' is not u16 or u32 of one dimension",
			       path);
		goto fail;
	}
	t->dtype = info->dtype;
	t->n = info->count;
	n = dlt_jval_get(&m, "n");
	bytes = dlt_jval_get(&m, "bytes");
	if (!n || !dlt_jval_int(n, 0, 1LL << 53, &vn) || (uint64_t)vn != t->n) {
		rc = dlt_error(DLT_EINPUT, "%s: metadata 'n' is not the %llu ids of tensor 'tokens'",
			       path, (unsigned long long)t->n);
		goto fail;
	}
	if (!bytes || !dlt_jval_int(bytes, 0, 1LL << 53, &vb)) {
		rc = dlt_error(DLT_EINPUT, "%s: metadata 'bytes' is missing or out of range", path);
		goto fail;
	}
	t->bytes = (uint64_t)vb;
	DLT_TRY(dlt_archive_view(a, info, &t->ids));
	if (!t->ids) {
		DLT_TRY(dlt_archive_read_alloc(a, "tokens", t->dtype, 1, &info, &t->owned));
		t->ids = t->owned;
	}
	for (uint64_t i = 0; i < t->n; i++) {
		uint32_t id = dlt_tokens_at(t, i);
		if (id >= v) {
			rc = dlt_error(DLT_EINPUT, "%s: tensor 'tokens': id %u at %llu is not below "
				       "the vocabulary of %u", path, id, (unsigned long long)i, v);
			goto fail;
		}
	}
fail:
	if (parsed)
		dlt_jval_free(&m);
	if (rc < 0) {
		tokens_free(t);
		memset(t, 0, sizeof(*t));
	}
	return rc;
}

int dlt_tokens_open(dlt_tokens **out, const char *path)
{
	dlt_tokens *t = dlt_calloc(1, sizeof(*t));
	dlt_archive *a = NULL;
	int rc;

	*out = NULL;
	if (!t)
		return DLT_ENOMEM;
	DLT_TRY(dlt_archive_open(&a, path));
	DLT_TRY(tokens_load(t, a));
	*out = t;
	return 0;
fail:
	if (a)
		dlt_archive_close(a);
	free(t);
	return rc;
}

void dlt_tokens_close(dlt_tokens *t)
{
	if (!t)
		return;
	tokens_free(t);
	dlt_archive_close(t->a);
	free(t);
}

/* dlt-prep text */

struct input {
	const char *path;
	void *map;
	char *mem;
	size_t size;
};

static void inputs_free(struct input *in, int n)
{
	for (int i = 0; i < n; i++) {
		if (in[i].map)
			munmap(in[i].map, in[i].size);
		free(in[i].mem);
	}
	free(in);
}

static int read_inputs(struct input **out, dlt_text **texts, char *const *files, int n,
		       size_t *total)
{
	struct input *in = dlt_calloc((size_t)n, sizeof(*in));
	int stdin_seen = 0, rc = 0;

	*out = in;
	*total = 0;
	if (!in || !(*texts = dlt_calloc((size_t)n, sizeof(**texts))))
		return DLT_ENOMEM;
	for (int i = 0; i < n; i++) {
		in[i].path = files[i];
		if (strcmp(files[i], "-") == 0 && stdin_seen++)
			return dlt_error(DLT_EINPUT, "standard input (-) given twice");
		DLT_TRY_RC(dlt_file_bytes(files[i], &in[i].map, &in[i].mem, &in[i].size));
		(*texts)[i].data = in[i].map ? in[i].map : (void *)in[i].mem;
		(*texts)[i].len = in[i].size;
		*total += in[i].size;
	}
	if (*total == 0)
		return n == 1 ? dlt_error(DLT_EINPUT, "%s: no text",
					  strcmp(files[0], "-") ? files[0] : "standard input") :
				dlt_error(DLT_EINPUT, "no text: the %d files are empty", n);
	return rc;
}

static int get_tokenizer(dlt_tokenizer **t, const dlt_text *texts, int n,
			 const dlt_text_opts *o, dlt_text_result *r)
{
	dlt_archive *a = NULL;
	int rc;

	if (o->from) {
		DLT_TRY_RC(dlt_archive_open(&a, o->from));
		rc = dlt_tokenizer_read(t, a);
		dlt_archive_close(a);
		if (rc < 0)
			return rc;
	} else if (o->tokenizer && strcmp(o->tokenizer, "bpe") == 0) {
		double t0 = dlt_now();
		DLT_TRY_RC(dlt_tokenizer_learn(t, texts, (size_t)n, o->vocab, NULL, NULL));
		r->learn_s = dlt_now() - t0;
	} else if (!o->tokenizer || strcmp(o->tokenizer, "bytes") == 0) {
		DLT_TRY_RC(dlt_tokenizer_bytes(t));
	} else {
		return dlt_error(DLT_EINPUT, "unknown tokenizer '%s' (bytes, bpe)", o->tokenizer);
	}
	if (o->eot)
		dlt_tokenizer_add_eot(*t);
	return 0;
}

/* The input bytes that ids [0, n) came from */
static uint64_t bytes_of(const dlt_tokenizer *t, const void *ids, int dtype, uint64_t n)
{
	uint64_t b = 0;

	for (uint64_t i = 0; i < n; i++) {
		size_t len;
		uint32_t id = dtype == DLT_U16 ? ((const uint16_t *)ids)[i] :
						((const uint32_t *)ids)[i];
		dlt_tokenizer_token(t, id, &len);
		b += len;
	}
	return b;
}

static int write_part(dlt_archive_writer **w, const char *path, const dlt_tokenizer *t,
		      int dtype, const void *ids, uint64_t n, uint64_t bytes, int codec)
{
	dlt_json j = { 0 };
	int rc;

	DLT_TRY(dlt_archive_create(w, path));
	DLT_TRY(dlt_archive_write_tensor(*w, "tokens", dtype, 1, &n, ids, codec, 0));
	dlt_json_begin(&j);
	dlt_json_str(&j, "kind", "tokens");
	DLT_TRY(dlt_tokenizer_write(t, *w, &j));
	dlt_json_int(&j, "n", (long long)n);
	dlt_json_int(&j, "bytes", (long long)bytes);
	dlt_json_end(&j);
	DLT_TRY(dlt_json_ok(&j));
	DLT_TRY(dlt_archive_write_meta(*w, j.buf.data));
fail:
	dlt_json_free(&j);
	return rc;
}

int dlt_prep_text(char *const *files, int nfiles, const dlt_text_opts *o, dlt_text_result *r)
{
	dlt_archive_writer *w1 = NULL, *w2 = NULL;
	struct input *in = NULL;
	dlt_text *texts = NULL;
	dlt_tokenizer *t = NULL;
	size_t total, n = 0, esize;
	uint64_t n1;
	char *ids = NULL, *shrunk;
	int dtype, rc;

	memset(r, 0, sizeof(*r));
	if (o->out2 && strcmp(o->out, "-") == 0 && strcmp(o->out2, "-") == 0)
		return dlt_error(DLT_EINPUT, "only one output can be standard output");
	DLT_TRY(read_inputs(&in, &texts, files, nfiles, &total));
	DLT_TRY(get_tokenizer(&t, texts, nfiles, o, r));
	dtype = dlt_tokens_dtype(dlt_tokenizer_vocab(t));
	esize = dlt_dtype_size(dtype);
	/* at most a token a byte, and the eots; untouched pages cost nothing */
	if (!(ids = dlt_calloc(total + (size_t)nfiles, esize))) {
		rc = DLT_ENOMEM;
		goto fail;
	}
	for (int i = 0; i < nfiles; i++) {
		size_t k;
		if (i > 0 && o->eot) {
			uint32_t eot = (uint32_t)dlt_tokenizer_eot(t);
			if (dtype == DLT_U16)
				((uint16_t *)ids)[n++] = (uint16_t)eot;
			else
				((uint32_t *)ids)[n++] = eot;
		}
		DLT_TRY(dlt_tokenizer_encode(t, texts[i].data, texts[i].len, dtype, ids + n * esize,
					     &k));
		n += k;
	}
	if ((shrunk = realloc(ids, n * esize)))
		ids = shrunk;
	n1 = dlt_prep_split_count(n, o->split);
	if (o->split > 0 && (n1 == 0 || n1 == n)) {
		rc = dlt_error(DLT_EINPUT, "split %g of %zu tokens leaves one part empty", o->split,
			       n);
		goto fail;
	}
	r->n[0] = n1;
	r->n[1] = n - n1;
	r->bytes[0] = o->out2 ? bytes_of(t, ids, dtype, n1) : total;
	r->bytes[1] = total - r->bytes[0];
	r->vocab = dlt_tokenizer_vocab(t);
	snprintf(r->kind, sizeof(r->kind), "%s", dlt_tokenizer_kind(t));
	DLT_TRY(write_part(&w1, o->out, t, dtype, ids, n1, r->bytes[0], o->codec));
	if (o->out2)
		DLT_TRY(write_part(&w2, o->out2, t, dtype, ids + n1 * esize, n - n1, r->bytes[1],
				   o->codec));
	rc = dlt_archive_writers_close(w1, w2, o->out);
	w1 = w2 = NULL;
fail:
	if (w1)
		dlt_archive_writer_abort(w1);
	if (w2)
		dlt_archive_writer_abort(w2);
	dlt_tokenizer_free(t);
	free(ids);
	free(texts);
	if (in)
		inputs_free(in, nfiles);
	return rc;
}

int dlt_prep_text_decode(const char *path, dlt_buf *out)
{
	dlt_tokens *t;
	int rc;

	DLT_TRY_RC(dlt_tokens_open(&t, path));
	rc = dlt_tokenizer_decode(t->tok, t->ids, t->dtype, t->n, out);
	dlt_tokens_close(t);
	return rc;
}

/* dlt-prep info */

/* A token's bytes as C writes them in a string, quotes and all */
static int escape(dlt_buf *b, const uint8_t *p, size_t n)
{
	int rc = dlt_buf_append(b, "\"", 1);

	for (size_t i = 0; i < n && rc == 0; i++) {
		uint8_t c = p[i];
		if (c == '"' || c == '\\')
			rc = dlt_buf_printf(b, "\\%c", c);
		else if (c == '\n')
			rc = dlt_buf_printf(b, "\\n");
		else if (c == '\t')
			rc = dlt_buf_printf(b, "\\t");
		else if (c == '\r')
			rc = dlt_buf_printf(b, "\\r");
		else if (c < 0x20 || c > 0x7e)
			rc = dlt_buf_printf(b, "\\x%02x", c);
		else
			rc = dlt_buf_append(b, &c, 1);
	}
	return rc ? rc : dlt_buf_append(b, "\"", 1);
}

#define LONGEST 5

/* The ids of the longest merged tokens, the smaller id first of equals */
static int longest(const dlt_tokenizer *t, uint32_t *top)
{
	uint32_t v = 256 + dlt_tokenizer_merges(t, &(const uint32_t *){ NULL });
	int k = 0;

	for (uint32_t id = 256; id < v; id++) {
		size_t len, lj;
		int i;
		dlt_tokenizer_token(t, id, &len);
		for (i = k; i > 0; i--) {
			dlt_tokenizer_token(t, top[i - 1], &lj);
			if (lj >= len)
				break;
			if (i < LONGEST)
				top[i] = top[i - 1];
		}
		if (i < LONGEST) {
			top[i] = id;
			if (k < LONGEST)
				k++;
		}
	}
	return k;
}

int dlt_tokens_describe(dlt_archive *a, dlt_buf *out, dlt_json *j)
{
	uint32_t top[LONGEST];
	dlt_buf esc = { 0 };
	dlt_tokens t;
	int k, rc = 0;

	DLT_TRY_RC(tokens_load(&t, a));
	k = longest(t.tok, top);
	if (out) {
		DLT_TRY(dlt_buf_printf(out, "bytes per token: %.4g\n",
				       dlt_tokens_bytes_per_token(&t)));
		if (k)
			DLT_TRY(dlt_buf_printf(out, "longest tokens:\n  %5s  %5s  token\n", "id",
					       "bytes"));
	} else {
		dlt_json_num(j, "bytes_per_token", dlt_tokens_bytes_per_token(&t));
		dlt_json_array_begin(j, "longest_tokens");
	}
	for (int i = 0; i < k; i++) {
		size_t len;
		const uint8_t *b = dlt_tokenizer_token(t.tok, top[i], &len);
		esc.len = 0;
		DLT_TRY(escape(&esc, b, len));
		DLT_TRY(dlt_buf_append(&esc, "", 1));
		if (out) {
			DLT_TRY(dlt_buf_printf(out, "  %5u  %5zu  %s\n", top[i], len, esc.data));
		} else {
			dlt_json_object_begin(j, NULL);
			dlt_json_int(j, "id", top[i]);
			dlt_json_int(j, "bytes", (long long)len);
			dlt_json_str(j, "token", esc.data);
			dlt_json_end(j);
		}
	}
	if (j)
		dlt_json_array_end(j);
fail:
	dlt_buf_free(&esc);
	tokens_free(&t);
	return rc;
}
