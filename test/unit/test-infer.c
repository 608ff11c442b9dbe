/* lib/infer: generation over the KV cache gives the tokens (and, to
 * rounding, the logits) of recomputing the whole window for each token,
 * greedy and sampled, before and past the context length; a seed gives
 * the same text again; top-k 1 is greedy; a batch's sequences are their
 * runs alone, each with its stream; scoring's windows; bad input.
 * Models are small random GPTs written to model files here.
 *
 *   test-infer --write-model PATH KIND
 * writes one for the shell tests (t6100): KIND gpt (context 16, the
 * bytes tokenizer with an eot, stored), bare (vocabulary 100, no
 * tokenizer stored), bidir (attention without the causal mask) or mlp
 * (not a token model). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "archive/archive.h"
#include "infer/infer.h"

#define T 16

/* A GPT-2 shaped model: every op kind that generation runs a row at a
 * time (dropout, an activation fused into a dense, a tied head) */
static const char gpt_yaml[] =
	"data: {train: t.dlt}\n"
	"model:\n"
	"  - embedding: {vocab: %d, dim: 16, name: wte}\n"
	"  - positional: {max: 16}\n"
	"  - residual: [layernorm, attention: {heads: 2, causal: %s}]\n"
	"  - residual: [layernorm, dense: 32, gelu: tanh, dense: 16, dropout: 0.1]\n"
	"  - residual: [layernorm, attention: 4]\n"
	"  - residual: [layernorm, dense: 24, relu, dense: 16]\n"
	"  - layernorm\n"
	"  - dense: {tie: wte}\n"
	"train: {context: 16, seed: %d}\n";

static const char mlp_yaml[] =
	"data: {train: t.dlt}\n"
	"model:\n"
	"  - dense: 8\n"
	"  - relu\n"
	"  - dense: 3\n";

/* Writes a model file of the config yaml (its input [in], outputs
 * classes) with random weights, and tok's keys when tok is not NULL. */
static int write_model(const char *path, const char *yaml, int in, int classes,
		       const dlt_tokenizer *tok)
{
	dlt_config c;
	dlt_model m;
	dlt_archive_writer *w = NULL;
	dlt_json j;
	char input[128];
	int rc;

	DLT_TRY_RC(dlt_config_load_string(&c, yaml, strlen(yaml), "gpt.yaml", NULL, 0));
	if ((rc = dlt_model_init(&m, &c, dlt_backend_cpu(), (dlt_shape){ in, 1, 1 }, classes, 1)) < 0) {
		dlt_config_free(&c);
		return rc;
	}
	snprintf(input, sizeof(input), "{\"shape\":[%d,1,1],\"num_classes\":%d,\"scale\":1,"
		 "\"mean\":[0],\"std\":[1]}", in, classes);
	dlt_json_begin(&j);
	dlt_json_str(&j, "kind", "model");
	dlt_json_int(&j, "format", 1);
	dlt_json_int(&j, "step", 0);
	dlt_json_str(&j, "config", yaml);
	dlt_json_raw(&j, "input", input);
	DLT_TRY(dlt_archive_create(&w, path));
	if (tok)
		DLT_TRY(dlt_tokenizer_write(tok, w, &j));
	dlt_json_end(&j);
	DLT_TRY(dlt_json_ok(&j));
	DLT_TRY(dlt_model_write(&m, w, DLT_RAW, 0));
	DLT_TRY(dlt_archive_write_meta(w, j.buf.data));
	rc = dlt_archive_writer_close(w);
	w = NULL;
fail:
	if (w)
		dlt_archive_writer_abort(w);
	dlt_json_free(&j);
	dlt_model_free(&m);
	dlt_config_free(&c);
	return rc;
}

static int write_kind(const char *path, const char *kind, int seed)
{
	char yaml[1024];
	dlt_tokenizer *tok = NULL;
	int rc;
	if (!strcmp(kind, "mlp"))
		return write_model(path, mlp_yaml, 4, 3, NULL);
	if (!strcmp(kind, "bare") || !strcmp(kind, "bidir")) {
		snprintf(yaml, sizeof(yaml), gpt_yaml, 100, strcmp(kind, "bare") ? "false" : "true",
			 seed);
		return write_model(path, yaml, T, 100, NULL);
	}
	if (strcmp(kind, "gpt"))
		return dlt_error(DLT_EINPUT, "unknown kind '%s'", kind);
	DLT_TRY_RC(dlt_tokenizer_bytes(&tok));
	dlt_tokenizer_add_eot(tok);
	snprintf(yaml, sizeof(yaml), gpt_yaml, 257, "true", seed);
	rc = write_model(path, yaml, T, 257, tok);
	dlt_tokenizer_free(tok);
	return rc;
}

static const char *tpath(const char *name)
{
	static char buf[4][512];
	static int k;
	char *p = buf[k++ % 4];
	snprintf(p, sizeof(buf[0]), "%s/%s", tap_tmpdir(), name);
	return p;
}

/* What a generation made: ids, log-probabilities, the logits of each */
typedef struct run {
	dlt_infer *x;
	uint32_t ids[256];
	double lp[256];
	float *logits;	/* n x V */
	int n;
} run;

static int collect(void *arg, uint32_t id, const uint8_t *bytes, size_t len, double logprob)
{
	run *r = arg;
	uint32_t V = dlt_infer_vocab(r->x);
	if (r->n == 256)
		return dlt_error(DLT_EINPUT, "too many tokens");
	r->ids[r->n] = id;
	r->lp[r->n] = logprob;
	memcpy(r->logits + (size_t)r->n * V, dlt_infer_logits(r->x), V * sizeof(float));
	r->n++;
	return 0;
}

static int generate(dlt_infer *x, run *r, const uint32_t *prompt, size_t n, size_t n_new,
		    double temp, int top_k, uint64_t seed, int recompute)
{
	dlt_sampling s = { .temperature = temp, .top_k = top_k, .seed = seed,
			   .recompute = recompute };
	free(r->logits);
	memset(r, 0, sizeof(*r));
	r->x = x;
	if (!(r->logits = malloc(n_new * dlt_infer_vocab(x) * sizeof(float))))
		return DLT_ENOMEM;
	return dlt_infer_generate(x, prompt, n, n_new, &s, collect, r);
}

/* Worst |a - b| / (1 + |b|) of the logits of two runs */
static double logit_diff(const run *a, const run *b, uint32_t V)
{
	double worst = 0;
	for (size_t i = 0; i < (size_t)a->n * V; i++)
		worst = fmax(worst, fabs((double)a->logits[i] - b->logits[i]) /
			     (1 + fabs((double)b->logits[i])));
	return worst;
}

static int same_ids(const run *a, const run *b)
{
	return a->n == b->n && !memcmp(a->ids, b->ids, (size_t)a->n * sizeof(a->ids[0]));
}

static int first_diff(const run *a, const run *b)
{
	for (int i = 0; i < a->n && i < b->n; i++)
		if (a->ids[i] != b->ids[i])
			return i;
	return a->n < b->n ? a->n : b->n;
}

/* The cache against the reference on backend be, for a prompt of np
 * tokens and n_new more: greedy, sampled at a temperature over all
 * tokens and over the top 5 */
static void check_cache(dlt_infer *x, const char *be, size_t np, size_t n_new)
{
	static const struct { double temp; int k; uint64_t seed; } how[] = {
		{ 0, 0, 0 }, { 1.0, 0, 7 }, { 0.7, 5, 11 },
	};
	uint32_t prompt[40];
	uint32_t V = dlt_infer_vocab(x);
	run a = { 0 }, b = { 0 };
	for (size_t i = 0; i < np; i++)
		prompt[i] = (uint32_t)(i * 37 + 5) % (V < 256 ? V : 256);
	for (size_t h = 0; h < sizeof(how) / sizeof(how[0]); h++) {
		int rc1 = generate(x, &a, prompt, np, n_new, how[h].temp, how[h].k, how[h].seed, 0);
		int rc2 = generate(x, &b, prompt, np, n_new, how[h].temp, how[h].k, how[h].seed, 1);
		double d;
		if (!ok(rc1 == 0 && rc2 == 0, "%s: prompt %zu + %zu, temperature %g top-k %d: both "
			"paths run", be, np, n_new, how[h].temp, how[h].k)) {
			diag("%s", dlt_errmsg());
			continue;
		}
		if (!ok(same_ids(&a, &b), "%s: prompt %zu + %zu tokens (context %d), temperature "
			"%g top-k %d: the KV cache gives the tokens of recomputing", be, np, n_new,
			T, how[h].temp, how[h].k))
			diag("first difference at token %d", first_diff(&a, &b));
		d = logit_diff(&a, &b, V);
		if (!ok(d <= 1e-5, "%s: ... and the same logits within 1e-5", be))
			diag("worst relative difference %g", d);
	}
	free(a.logits);
	free(b.logits);
}

static void test_generate(void)
{
	const char *path = tpath("gpt.dlt");
	dlt_infer *x;
	run a = { 0 }, b = { 0 };
	uint32_t prompt[3] = { 'a', 'b', 'c' };

	if (!ok_rc(write_kind(path, "gpt", 3), 0, "a small GPT written") ||
	    !ok_rc(dlt_infer_open(&x, path), 0, "opened") )
		return;
	if (!ok_rc(dlt_infer_load(x, dlt_backend_cpu(), 4, 0), 0, "loaded on the cpu")) {
		dlt_infer_close(x);
		return;
	}
	ok(dlt_infer_context(x) == T && dlt_infer_vocab(x) == 257 &&
	   dlt_tokenizer_eot(dlt_infer_tokenizer(x)) == 256,
	   "context %d, vocabulary 257, the file's tokenizer (eot 256)", T);
	check_cache(x, "cpu", 3, 10);		/* within the context */
	check_cache(x, "cpu", 5, 40);		/* sliding past it */
	check_cache(x, "cpu", 20, 6);		/* a prompt longer than it */
	check_cache(x, "cpu", 1, T);		/* up to it exactly, then one past */

	generate(x, &a, prompt, 3, 30, 0.9, 0, 42, 0);
	generate(x, &b, prompt, 3, 30, 0.9, 0, 42, 0);
	ok(a.n == 30 && same_ids(&a, &b), "the same seed gives the same tokens");
	generate(x, &b, prompt, 3, 30, 0.9, 0, 43, 0);
	ok(!same_ids(&a, &b), "another seed, other tokens");
	generate(x, &a, prompt, 3, 30, 0, 0, 0, 0);
	generate(x, &b, prompt, 3, 30, 1.5, 1, 99, 0);
	ok(same_ids(&a, &b), "top-k 1 at temperature 1.5 is greedy");
	generate(x, &b, prompt, 3, 30, 1.0, 257, 5, 0);
	generate(x, &a, prompt, 3, 30, 1.0, 0, 5, 0);
	ok(same_ids(&a, &b), "top-k of the whole vocabulary is no top-k");
	{
		double worst = 0;
		for (int i = 0; i < a.n; i++) {
			const float *z = a.logits + (size_t)i * 257;
			double mx = -INFINITY, sum = 0;
			for (int j = 0; j < 257; j++)
				mx = fmax(mx, z[j]);
			for (int j = 0; j < 257; j++)
				sum += exp(z[j] - mx);
			worst = fmax(worst, fabs(a.lp[i] - (z[a.ids[i]] - mx - log(sum))));
		}
		ok(worst < 1e-9, "logprob is the log-softmax of the token's logit");
	}
	/* top-k 5 draws only among the 5 largest logits */
	{
		int inside = 1;
		generate(x, &a, prompt, 3, 60, 5.0, 5, 8, 0);
		for (int i = 0; i < a.n; i++) {
			const float *z = a.logits + (size_t)i * 257;
			int larger = 0;
			for (int j = 0; j < 257; j++)
				larger += z[j] > z[a.ids[i]];
			inside &= larger < 5;
		}
		ok(inside, "top-k 5 at temperature 5 picks among the 5 largest logits");
	}
	free(a.logits);
	free(b.logits);
	dlt_infer_close(x);
}

/* ---- batches ---- */

#define NSEQ 5

typedef struct batch_runs {
	run r[NSEQ];
} batch_runs;

static int collect_seq(void *arg, int seq, uint32_t id, const uint8_t *bytes, size_t len,
		       double logprob)
{
	batch_runs *b = arg;
	return collect(&b->r[seq], id, bytes, len, logprob);
}

static int generate_batch(dlt_infer *x, batch_runs *br, int n_seq, const uint32_t *const *p,
			  const size_t *n, size_t n_new, const dlt_sampling *s)
{
	for (int i = 0; i < n_seq && i < NSEQ; i++) {	/* more: refused before a token */
		free(br->r[i].logits);
		memset(&br->r[i], 0, sizeof(br->r[i]));
		br->r[i].x = x;
		if (!(br->r[i].logits = malloc(n_new * dlt_infer_vocab(x) * sizeof(float))))
			return DLT_ENOMEM;
	}
	return dlt_infer_generate_batch(x, n_seq, p, n, n_new, s, collect_seq, br);
}

/* Sequence i of a batch is the run of its prompt alone with stream
 * s.stream + i: the same tokens, log-probabilities and logits, to the
 * bit, over the cache and on the reference path; prompts of other
 * lengths (one longer than the context), sliding past it */
static void test_batch(void)
{
	static const struct { double temp; int k; uint64_t seed, stream; } how[] = {
		{ 0, 0, 0, 0 }, { 1.0, 0, 7, 0 }, { 0.8, 5, 11, 3 },
	};
	static const size_t n[NSEQ] = { 3, 1, 20, 7, 3 };
	uint32_t ids[NSEQ][20];
	const uint32_t *p[NSEQ];
	batch_runs br = { 0 };
	run one = { 0 };
	dlt_infer *x;
	uint32_t V;

	if (!ok_rc(dlt_infer_open(&x, tpath("gpt.dlt")), 0, "opened for batches") ||
	    !ok_rc(dlt_infer_load(x, dlt_backend_cpu(), NSEQ, 0), 0, "loaded for %d", NSEQ))
		return;
	V = dlt_infer_vocab(x);
	for (int i = 0; i < NSEQ; i++) {
		for (size_t j = 0; j < n[i]; j++)
			ids[i][j] = (uint32_t)((i == 4 ? 0 : i) * 11 + j * 37 + 5) % 256;
		p[i] = ids[i];
	}
	for (int recompute = 0; recompute < 2; recompute++)
		for (size_t h = 0; h < sizeof(how) / sizeof(how[0]); h++) {
			dlt_sampling s = { .temperature = how[h].temp, .top_k = how[h].k,
					   .seed = how[h].seed, .stream = how[h].stream,
					   .recompute = recompute };
			int same = 1, rc = generate_batch(x, &br, NSEQ, p, n, 30, &s);
			if (!ok_rc(rc, 0, "a batch of %d, temperature %g top-k %d%s", NSEQ,
				   how[h].temp, how[h].k, recompute ? ", recomputing" : ""))
				continue;
			for (int i = 0; i < NSEQ; i++) {
				dlt_sampling s1 = s;
				s1.stream = s.stream + (uint64_t)i;
				free(one.logits);
				memset(&one, 0, sizeof(one));
				one.x = x;
				one.logits = malloc(30 * (size_t)V * sizeof(float));
				rc = dlt_infer_generate(x, p[i], n[i], 30, &s1, collect, &one);
				if (rc < 0 || !same_ids(&br.r[i], &one) ||
				    memcmp(br.r[i].lp, one.lp, 30 * sizeof(one.lp[0])) ||
				    memcmp(br.r[i].logits, one.logits, 30 * (size_t)V * sizeof(float))) {
					diag("sequence %d: first difference at token %d", i,
					     first_diff(&br.r[i], &one));
					same = 0;
				}
			}
			ok(same, "... each sequence is its run alone with its stream, to the bit");
			if (how[h].temp > 0)
				ok(!same_ids(&br.r[0], &br.r[4]), "... the same prompt in another "
				   "stream gives other tokens");
		}
	ok(generate_batch(x, &br, NSEQ + 1, (const uint32_t *[NSEQ + 1]){ 0 },
			  (size_t[NSEQ + 1]){ 0 }, 3, &(dlt_sampling){ 0 }) == DLT_EINPUT,
	   "a batch larger than the loaded one is refused");
	ok_msg("6 sequences, but", "... saying so");
	ok(generate_batch(x, &br, 2, p, (size_t[2]){ 3, 0 }, 3, &(dlt_sampling){ 0 }) ==
	   DLT_EINPUT, "an empty prompt in a batch is refused");
	ok_msg("prompt 1 of the batch is empty", "... naming it");
	for (int i = 0; i < NSEQ; i++)
		free(br.r[i].logits);
	free(one.logits);
	dlt_infer_close(x);
}

static int score(const char *path, int batch, const uint32_t *ids, size_t n, dlt_score *r)
{
	dlt_infer *x;
	int rc = dlt_infer_open(&x, path);
	if (rc < 0)
		return rc;
	if ((rc = dlt_infer_load(x, dlt_backend_cpu(), batch, 0)) == 0)
		rc = dlt_infer_score(x, ids, n, 2 * n, r);
	dlt_infer_close(x);
	return rc;
}

static void test_score(void)
{
	const char *path = tpath("gpt.dlt");
	uint32_t ids[2 * T + 5];
	dlt_score all, one, parts[3];
	const size_t n = sizeof(ids) / sizeof(ids[0]);
	dlt_infer *x;
	double want;

	for (size_t i = 0; i < n; i++)
		ids[i] = (uint32_t)(i * 91 + 3) % 256;
	if (!ok_rc(score(path, 4, ids, n, &all), 0, "scores %zu tokens", n))
		return;
	ok(all.predicted == n - 1 && fabs(all.loss - all.nats / (n - 1)) < 1e-12 &&
	   fabs(all.bpb - all.loss / log(2.0) / 2.0) < 1e-12,
	   "%zu predicted, loss the mean, bpb loss / ln 2 / bytes a token", n - 1);
	ok_rc(score(path, 1, ids, n, &one), 0, "scores a window at a time");
	ok_near(one.nats, all.nats, 1e-9, "the same loss in batches of 1 and 4 windows");
	/* window i: tokens i T .. i T + T, each scored alone */
	score(path, 1, ids, T + 1, &parts[0]);
	score(path, 1, ids + T, T + 1, &parts[1]);
	score(path, 1, ids + 2 * T, n - 2 * T, &parts[2]);
	ok_near(parts[0].nats + parts[1].nats + parts[2].nats, all.nats, 1e-9,
		"windows of T + 1 tokens from every T-th, the last one shorter");
	/* one window against the model's own loss */
	if (dlt_infer_open(&x, path) == 0 && dlt_infer_load(x, dlt_backend_cpu(), 1, 0) == 0) {
		dlt_model *m = dlt_infer_model(x);
		int32_t *in = (int32_t *)dlt_model_input(m), lab[T];
		for (int t = 0; t < T; t++) {
			in[t] = (int32_t)ids[t];
			lab[t] = (int32_t)ids[t + 1];
		}
		dlt_model_forward(m, 1, 0, 0);
		want = dlt_model_loss(m, lab, 1, NULL) * T;
		ok_near(parts[0].nats, want, 1e-5, "a window's loss is the trainer's");
	}
	dlt_infer_close(x);
}

static void test_errors(void)
{
	dlt_infer *x;
	uint32_t *ids, p[2] = { 1, 300 };
	size_t n;
	dlt_sampling s = { 0 };
	run r = { 0 };

	write_kind(tpath("mlp.dlt"), "mlp", 1);
	if (ok_rc(dlt_infer_open(&x, tpath("mlp.dlt")), 0, "an MLP opens")) {
		ok(dlt_infer_need_lm(x) < 0, "it is no language model");
		ok_msg("mlp.dlt: not a token model (its first layer is not an embedding)",
		       "... and says so");
		dlt_infer_close(x);
	}
	write_kind(tpath("bidir.dlt"), "bidir", 1);
	if (ok_rc(dlt_infer_open(&x, tpath("bidir.dlt")), 0, "a model without the causal "
		  "mask opens")) {
		dlt_infer_load(x, dlt_backend_cpu(), 1, 0);
		ok(dlt_infer_need_lm(x) < 0, "it cannot generate");
		ok_msg("bidir.dlt: its attention (layer 4) is not causal", "... and says why");
		dlt_infer_close(x);
	}
	write_kind(tpath("bare.dlt"), "bare", 1);
	if (!ok_rc(dlt_infer_open(&x, tpath("bare.dlt")), 0, "a model file without a tokenizer"))
		return;
	dlt_infer_load(x, dlt_backend_cpu(), 1, 0);
	ok(!strcmp(dlt_tokenizer_kind(dlt_infer_tokenizer(x)), "bytes") &&
	   dlt_tokenizer_eot(dlt_infer_tokenizer(x)) < 0, "gets the bytes tokenizer, no eot");
	ok(dlt_infer_encode(x, "HELLO", 5, &ids, &n) == 0 && n == 5 && ids[4] == 'O',
	   "ids of its vocabulary encode");
	free(ids);
	ok(dlt_infer_encode(x, "HI\x7f", 3, &ids, &n) == DLT_EINPUT && !ids,
	   "a byte beyond its vocabulary of 100 does not");
	ok_msg("bare.dlt: token 2 of the text is id 127, beyond the model's vocabulary of 100",
	       "... naming it");
	ok(generate(x, &r, p, 2, 3, 0, 0, 0, 0) == DLT_EINPUT, "nor does a prompt's id");
	ok_msg("token 1 of the prompt is id 300", "... naming it");
	ok(generate(x, &r, p, 0, 3, 0, 0, 0, 0) == DLT_EINPUT, "an empty prompt is refused");
	s.top_k = -1;
	ok(dlt_infer_generate(x, p, 1, 3, &s, collect, &r) == DLT_EINPUT, "top-k -1 is refused");
	s.top_k = 0;
	s.temperature = -1;
	ok(dlt_infer_generate(x, p, 1, 3, &s, collect, &r) == DLT_EINPUT,
	   "temperature -1 is refused");
	ok(dlt_infer_score(x, p, 1, 1, &(dlt_score){ 0 }) == DLT_EINPUT, "one token: no score");
	/* a vocabulary of 100 with the byte tokenizer: what it makes decodes */
	ok(generate(x, &r, p, 1, 20, 1.0, 0, 3, 0) == 0 && r.n == 20, "it generates");
	free(r.logits);
	dlt_infer_close(x);
}

/* libdlt-cuda.so refuses a program whose backend table has another
 * layout, by name, before it looks for a GPU (so this runs without one) */
static void test_cuda_abi(void)
{
	typedef const dlt_backend *open_fn(int abi, int device, char *why, size_t n);
	char why[256] = "", want[128];
	void *lib = dlt_cuda_lib(why, sizeof(why));
	open_fn *open_backend;
	if (!lib) {
		skip("no libdlt-cuda.so: %s", why);
		return;
	}
	open_backend = (open_fn *)dlt_plugin_sym(lib, "libdlt-cuda.so",
						 "dlt_backend_cuda_abi_open", why, sizeof(why));
	snprintf(want, sizeof(want), "libdlt-cuda.so is of another dlt (backend ABI %d, not %d)",
		 DLT_BACKEND_ABI, DLT_BACKEND_ABI + 1);
	ok(open_backend && !open_backend(DLT_BACKEND_ABI + 1, 0, why, sizeof(why)) &&
	   !strcmp(why, want), "libdlt-cuda.so refuses another table layout: %s", why);
}

/* On a GPU, where there is one: the cache against the reference there,
 * and the CPU's logits within 1e-4 */
static void test_cuda(void)
{
	char why[256];
	const dlt_backend *be = dlt_backend_cuda(0, why, sizeof(why));
	dlt_infer *x, *y;
	run a = { 0 }, b = { 0 };
	uint32_t prompt[4] = { 'd', 'l', 't', ' ' };
	double d;

	if (!be) {
		skip("no CUDA backend: %s", why);
		return;
	}
	if (!ok_rc(dlt_infer_open(&x, tpath("gpt.dlt")), 0, "opened for the GPU") ||
	    !ok_rc(dlt_infer_load(x, be, 4, 0), 0, "loaded on %s", be->name))
		return;
	check_cache(x, be->name, 5, 40);
	check_cache(x, be->name, 1, T);
	dlt_infer_open(&y, tpath("gpt.dlt"));
	dlt_infer_load(y, dlt_backend_cpu(), 1, 0);
	generate(x, &a, prompt, 4, 30, 0, 0, 0, 0);
	generate(y, &b, prompt, 4, 30, 0, 0, 0, 0);
	ok(same_ids(&a, &b), "the GPU's greedy tokens are the CPU's");
	d = logit_diff(&a, &b, 257);
	if (!ok(d < 1e-4, "... and its logits within 1e-4"))
		diag("worst relative difference %g", d);
	{	/* a batch there: its GEMMs on more rows may round otherwise */
		static const size_t n[3] = { 4, 1, 20 };
		const uint32_t *p[3] = { prompt, prompt + 2, NULL };
		uint32_t long_p[20];
		batch_runs br = { 0 };
		int same = 1;
		double worst = 0;
		for (int i = 0; i < 20; i++)
			long_p[i] = (uint32_t)(i * 13 + 7) % 256;
		p[2] = long_p;
		ok_rc(generate_batch(x, &br, 3, p, n, 30, &(dlt_sampling){ 0 }), 0,
		      "%s: a batch of 3, greedy, past the context", be->name);
		for (int i = 0; i < 3; i++) {
			generate(x, &a, p[i], n[i], 30, 0, 0, 0, 0);
			same &= same_ids(&br.r[i], &a);
			worst = fmax(worst, logit_diff(&br.r[i], &a, 257));
			free(br.r[i].logits);
		}
		ok(same, "... each sequence's tokens are its run alone");
		if (!ok(worst < 1e-5, "... and its logits within 1e-5"))
			diag("worst relative difference %g", worst);
	}
	free(a.logits);
	free(b.logits);
	dlt_infer_close(x);
	dlt_infer_close(y);
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "--write-model")) {
		int rc = write_kind(argv[2], argv[3], 3);
		if (rc < 0)
			fprintf(stderr, "test-infer: %s\n", dlt_errmsg());
		return rc < 0;
	}
	test_generate();
	test_batch();
	test_score();
	test_errors();
	test_cuda_abi();
	test_cuda();
	return done_testing();
}
