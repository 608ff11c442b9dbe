/* The CPU backend's kernels: every row of the op table (ops.c: each
 * kernel against the reference on random inputs of many shapes, as
 * ggml's test-backend-ops, and the same bits on 1, 2 and 3 threads); then
 * values known by hand, Philox's known answers, the reference's gradients
 * against finite differences, and the fast attention's timings.
 * test-kernels PREFIX runs only the table's rows whose names begin so. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "tap.h"
#include "vec.h"
#include "ops.h"
#include "kernels/kernels.h"
#include "kernels/common/math.h"
#include "kernels/common/philox.h"
#include "util/util.h"

/* ---- values known by hand ---- */

/* [B, T, C] activations, H heads */
typedef struct tshape {
	int B, T, C, H;
} tshape;

/* Values worked out by hand: one position attends to itself alone, so
 * its output is its value and its lse its one score; an id out of range
 * embeds as NaN. */
static void test_transformer_known(const dlt_backend *be)
{
	float qkv[3 * 4] = { 1, 2, 3, 4, 0.5f, 0.25f, -1, 2, 7, 8, 9, 10 }, o[4], l[2];
	float w[2 * 2] = { 1, 2, 3, 4 }, e[3 * 2];
	int32_t ids[3] = { 1, 2, 0 };
	be->attention_forward(DLT_PREC_F32, qkv, o, l, 1, 1, 4, 2, 1, (dlt_attn_dropout){ 0 });
	ok(o[0] == 7 && o[1] == 8 && o[2] == 9 && o[3] == 10, "%s attention of one position is "
	   "its value", be->name);
	ok(fabsf(l[0] - 1.0f / sqrtf(2.0f)) < 1e-6f && fabsf(l[1] - 5.0f / sqrtf(2.0f)) < 1e-6f,
	   "%s attention's lse of one position is its scaled score (%g %g)", be->name, l[0], l[1]);
	be->embedding_forward(ids, w, e, 3, 2, 2);
	ok(e[0] == 3 && e[1] == 4 && isnan(e[2]) && isnan(e[3]) && e[4] == 1 && e[5] == 2,
	   "%s embedding_forward: rows by id, NaN for an id out of range", be->name);
}

/* A NaN in one key (key 5 of 64, head size 64: the register-blocked
 * tiles) reaches the output of every query that sees it, causally, and
 * of no other: the softmax's lane masks hide only the lanes past a row's
 * keys, never a NaN score. */
static void test_attention_nan(const dlt_backend *be)
{
	enum { T = 64, C = 64 };
	float *qkv = calloc(T * 3 * C, sizeof(float)), *o = calloc(T * C, sizeof(float));
	float l[T];
	int before = 0, after = 0;
	for (int i = 0; i < T * 3 * C; i++)
		qkv[i] = (float)((i * 37) % 11) / 11.0f - 0.5f;
	qkv[5 * 3 * C + C + 3] = NAN;
	be->attention_forward(DLT_PREC_F32, qkv, o, l, 1, T, C, 1, 1, (dlt_attn_dropout){ 0 });
	for (int t = 0; t < T; t++)
		for (int c = 0; c < C; c++)
			if (isnan(o[t * C + c]))
				*(t < 5 ? &before : &after) += 1;
	ok(before == 0 && after == (T - 5) * C, "%s attention: a NaN key reaches the %d outputs "
	   "of the queries that see it (%d) and none before (%d)", be->name, (T - 5) * C, after,
	   before);
	free(qkv);
	free(o);
}

/* ---- the reference's gradients against finite differences ---- */

/* sum(y * w) in double */
static double weighted(const float *y, const float *w, size_t n)
{
	double s = 0.0;
	for (size_t i = 0; i < n; i++)
		s += (double)y[i] * w[i];
	return s;
}

static double ln_loss(const dlt_backend *ref, const float *x, const float *g, const float *b,
		      const float *w, int rows, int C)
{
	size_t n = (size_t)rows * C;
	float *y = malloc(n * 4), *mu = malloc(rows * 4), *rs = malloc(rows * 4);
	double s;
	ref->layernorm_forward(x, g, b, y, mu, rs, rows, C, 1e-5f);
	s = weighted(y, w, n);
	free(y);
	free(mu);
	free(rs);
	return s;
}

/* Central differences of a float input v[i], step h; the worst
 * |numeric - analytic| / (1 + |analytic|) over the n of them */
#define FD_WORST(v, n, grad, h, loss_expr)                                        \
	do {                                                                      \
		for (size_t i_ = 0; i_ < (n); i_++) {                             \
			float old_ = (v)[i_];                                     \
			double lp_, lm_, num_;                                    \
			(v)[i_] = old_ + (h);                                     \
			lp_ = (loss_expr);                                        \
			(v)[i_] = old_ - (h);                                     \
			lm_ = (loss_expr);                                        \
			(v)[i_] = old_;                                           \
			num_ = (lp_ - lm_) / ((double)(old_ + (h)) - (double)(old_ - (h))); \
			worst = fmax(worst, fabs(num_ - (grad)[i_]) /             \
					    (1.0 + fabs((grad)[i_])));            \
		}                                                                 \
	} while (0)

static void test_layernorm_fd(const dlt_backend *ref)
{
	int rows = 3, C = 10;
	size_t n = (size_t)rows * C;
	float *x = randv(n, -2, 2), *g = randv(C, 0.5f, 1.5f), *b = randv(C, -1, 1);
	float *w = randv(n, -1, 1), *y = malloc(n * 4), *mu = malloc(rows * 4);
	float *rs = malloc(rows * 4), *dx = malloc(n * 4), *dg = calloc(C, 4), *db = calloc(C, 4);
	double worst = 0.0;
	ref->layernorm_forward(x, g, b, y, mu, rs, rows, C, 1e-5f);
	ref->layernorm_backward(x, w, g, mu, rs, dx, dg, db, rows, C);
	FD_WORST(x, n, dx, 1e-2f, ln_loss(ref, x, g, b, w, rows, C));
	FD_WORST(g, (size_t)C, dg, 1e-2f, ln_loss(ref, x, g, b, w, rows, C));
	FD_WORST(b, (size_t)C, db, 1e-2f, ln_loss(ref, x, g, b, w, rows, C));
	ok(worst < 1e-3, "ref layernorm: x, gamma and beta gradients match finite "
	   "differences (worst %.3g)", worst);
	free(x);
	free(g);
	free(b);
	free(w);
	free(y);
	free(mu);
	free(rs);
	free(dx);
	free(dg);
	free(db);
}

static double attn_loss(const dlt_backend *ref, const float *qkv, const float *w, tshape s,
			int causal, dlt_attn_dropout drop)
{
	size_t n = (size_t)s.B * s.T * s.C;
	float *o = malloc(n * 4), *l = malloc((size_t)s.B * s.H * s.T * 4);
	double v;
	ref->attention_forward(DLT_PREC_F32, qkv, o, l, s.B, s.T, s.C, s.H, causal, drop);
	v = weighted(o, w, n);
	free(o);
	free(l);
	return v;
}

/* The dropout's mask is a function of (seed, stream, position): the
 * same in every evaluation, so finite differences see it fixed */
static void test_attention_fd(const dlt_backend *ref, int causal, float rate)
{
	dlt_attn_dropout drop = { rate, 3, 5, 0 };
	tshape s = { 2, 5, 8, 2 };
	size_t n = (size_t)s.B * s.T * s.C;
	float *qkv = randv(3 * n, -1.5f, 1.5f), *w = randv(n, -1, 1), *o = malloc(n * 4);
	float *l = malloc((size_t)s.B * s.H * s.T * 4), *dq = malloc(3 * n * 4);
	double worst = 0.0;
	ref->attention_forward(DLT_PREC_F32, qkv, o, l, s.B, s.T, s.C, s.H, causal, drop);
	ref->attention_backward(DLT_PREC_F32, qkv, o, w, l, dq, s.B, s.T, s.C, s.H, causal, drop);
	FD_WORST(qkv, 3 * n, dq, 1e-2f, attn_loss(ref, qkv, w, s, causal, drop));
	ok(worst < 1e-3, "ref attention%s%s: q, k and v gradients match finite differences "
	   "(worst %.3g)", causal ? " causal" : "", rate > 0 ? " with dropout" : "", worst);
	free(qkv);
	free(w);
	free(o);
	free(l);
	free(dq);
}

/* Dropout of the attention's weights: a quarter of 10^6 factors are 0,
 * the others 4/3; with values all 1, a row's output is the sum of its
 * weights' factors, which over 4096 rows of 64 keys averages 1 */
static void test_attention_dropout(const dlt_backend *ref)
{
	dlt_attn_dropout drop = { 0.25f, 11, 13, 0 };
	tshape s = { 4, 64, 16, 16 };	/* D = 1 */
	size_t n = (size_t)s.B * s.T * s.C, dropped = 0;
	float *qkv = randv(3 * n, -1, 1), *o = malloc(n * 4);
	float *l = malloc((size_t)s.B * s.H * s.T * 4);
	double mean = 0.0, last = 0.0;
	int odd = 0;
	for (size_t i = 0; i < 1000000; i++) {
		float z = dlt_attn_keep(drop, i / 1000, 1000, (int)(i % 1000));
		dropped += z == 0.0f;
		odd += z != 0.0f && z != 4.0f / 3.0f;
	}
	ok(!odd && fabs(dropped / 1e6 - 0.25) < 0.002, "attention dropout 0.25: %.4f of 10^6 "
	   "weights dropped, the others scaled by 4/3", dropped / 1e6);
	for (size_t i = 0; i < 3 * n; i++)
		if (i % (3 * (size_t)s.C) >= 2 * (size_t)s.C)
			qkv[i] = 1.0f;
	ref->attention_forward(DLT_PREC_F32, qkv, o, l, s.B, s.T, s.C, s.H, 0, drop);
	for (size_t i = 0; i < n; i++)
		mean += o[i];
	mean /= (double)n;
	drop.stream++;
	ref->attention_forward(DLT_PREC_F32, qkv, o, l, s.B, s.T, s.C, s.H, 0, drop);
	for (size_t i = 0; i < n; i++)
		last += o[i];
	ok(fabs(mean - 1.0) < 0.01 && fabs(last / (double)n - mean) > 1e-6,
	   "attention dropout: outputs of unit values average %.4f; another stream, another "
	   "mask (%.4f)", mean, last / (double)n);
	free(qkv);
	free(o);
	free(l);
}

/* Not a test: the fast attention's forward + backward against the
 * reference's, in ms, at two GPT-ish sizes (skipped under the sanitizers) */
static void bench_attention(const dlt_backend *be, const dlt_backend *ref)
{
#if defined(__SANITIZE_ADDRESS__)
	diag("attention timings skipped under the sanitizers");
	(void)be;
	(void)ref;
#else
	static const tshape sizes[] = { { 16, 128, 128, 4 }, { 8, 256, 384, 6 } };
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		tshape s = sizes[i];
		size_t n = (size_t)s.B * s.T * s.C, nl = (size_t)s.B * s.H * s.T;
		float *qkv = randv(3 * n, -1, 1), *g = randv(n, -1, 1), *o = malloc(n * 4);
		float *l = malloc(nl * 4), *dq = malloc(3 * n * 4);
		const dlt_backend *bs[2] = { be, ref };
		dlt_attn_dropout none = { 0 };
		double ms[2][2];
		for (int k = 0; k < 2; k++) {
			int reps = k ? 1 : 5;
			double t0, t1, t2;
			/* warm */
			bs[k]->attention_forward(DLT_PREC_F32, qkv, o, l, s.B, s.T, s.C, s.H, 1, none);
			t0 = dlt_now();
			for (int r = 0; r < reps; r++)
				bs[k]->attention_forward(DLT_PREC_F32, qkv, o, l, s.B, s.T, s.C, s.H, 1,
							 none);
			t1 = dlt_now();
			for (int r = 0; r < reps; r++)
				bs[k]->attention_backward(DLT_PREC_F32, qkv, o, g, l, dq, s.B, s.T,
							  s.C, s.H, 1, none);
			t2 = dlt_now();
			ms[k][0] = (t1 - t0) * 1e3 / reps;
			ms[k][1] = (t2 - t1) * 1e3 / reps;
		}
		diag("attention causal B %d T %d C %d H %d, %d threads: %s fwd %.2f ms bwd %.2f ms, "
		     "ref fwd %.1f ms bwd %.1f ms (%.0fx)", s.B, s.T, s.C, s.H, omp_get_max_threads(),
		     be->name, ms[0][0], ms[0][1], ms[1][0], ms[1][1],
		     (ms[1][0] + ms[1][1]) / (ms[0][0] + ms[0][1]));
		free(qkv);
		free(g);
		free(o);
		free(l);
		free(dq);
	}
#endif
}

/* Beyond agreeing with the reference, the kernels must be right. */
static void test_known_values(const dlt_backend *be)
{
	size_t n = 100000;
	float *x = randv(n, 1, 2), *y = malloc(n * 4), *mk = malloc(n * 4);
	float logits[3] = { 1000.0f, 0.0f, -1000.0f }, dl[3];
	int32_t lab = 1;
	double loss, kept = 0.0;
	int hits;
	be->dropout(x, y, mk, n, 0.3f, 1, 99);
	for (size_t i = 0; i < n; i++)
		kept += mk[i] != 0.0f;
	ok_near(kept / n, 0.7, 0.01, "%s dropout 0.3 keeps 70%%", be->name);
	ok(mk[0] == 0.0f || fabsf(mk[0] - 1.0f / 0.7f) < 1e-6f, "%s dropout scales by 1/(1-p)",
	   be->name);
	be->softmax_xent(logits, &lab, 1, 3, dl, &loss, &hits);
	ok_near(loss, 1000.0, 1e-9, "%s softmax_xent of logits 1000, 0, -1000 at 0", be->name);
	ok(dl[0] == 1.0f && dl[1] == -1.0f && dl[2] == 0.0f && hits == 0,
	   "%s softmax_xent gradient is softmax - onehot", be->name);
	lab = 7;
	be->softmax_xent(logits, &lab, 1, 3, dl, &loss, &hits);
	ok(isnan(loss), "%s softmax_xent: a label out of range gives a NaN loss", be->name);
	{
		/* 1 + 2^-10 is a float, not a bf16 (rounds to 1) nor,
		 * with 2^-12 more, an fp16 (rounds to 1 + 2^-10) */
		float a[2] = { 1.0f + 0x1p-10f + 0x1p-12f, 3.0f }, b[2] = { 1.0f, 0.0f }, c[3];
		be->gemm(DLT_PREC_F32, 0, 0, 1, 1, 2, 1.0f, a, 2, b, 1, 0.0f, &c[0], 1);
		be->gemm(DLT_PREC_BF16, 0, 0, 1, 1, 2, 1.0f, a, 2, b, 1, 0.0f, &c[1], 1);
		be->gemm(DLT_PREC_F16, 0, 0, 1, 1, 2, 1.0f, a, 2, b, 1, 0.0f, &c[2], 1);
		ok(c[0] == a[0] && c[1] == 1.0f && c[2] == 1.0f + 0x1p-10f,
		   "%s gemm rounds its inputs to bf16 and fp16 (%a %a %a)", be->name, c[0], c[1],
		   c[2]);
	}
	free(x);
	free(y);
	free(mk);
}

/* The kernels' Philox is the host's: Random123's known answers, and the
 * same numbers as dlt_rng where their counters meet (stream 0). */
static void test_philox(void)
{
	uint32_t c[4] = { 0, 0, 0, 0 }, k[2] = { 0, 0 }, dev[4];
	uint32_t ones[4] = { ~0u, ~0u, ~0u, ~0u }, kones[2] = { ~0u, ~0u };
	int same = 1;
	dlt_rng r;
	dlt_philox4x32_10(c, k);
	ok(c[0] == 0x6627e8d5 && c[1] == 0xe169c58d && c[2] == 0xbc57ac4c && c[3] == 0x9b00dbd8,
	   "philox4x32-10 of zeros");
	dlt_philox4x32_10(ones, kones);
	ok(ones[0] == 0x408f276d && ones[1] == 0x41c83b0e && ones[2] == 0xa20bc7c6 &&
	   ones[3] == 0x6d5451fd, "philox4x32-10 of ones");
	dlt_rng_init(&r, 0x123456789abcdefull, 0);
	for (uint64_t b = 0; b < 10; b++) {
		dlt_philox_block(0x123456789abcdefull, 0, b, dev);
		for (int j = 0; j < 4; j++)
			same &= dev[j] == dlt_rng_u32(&r);
	}
	ok(same, "dlt_philox_block of stream 0 = dlt_rng's stream 0");
}

int main(int argc, char **argv)
{
	const dlt_backend *cpu = dlt_backend_cpu();
	dlt_rng_init(&rng, 1234, 0);
	ops_run(cpu, OPS_CPU, argc > 1 ? argv[1] : NULL);
	if (argc > 1)
		return done_testing();
	test_philox();
	test_known_values(cpu);
	test_transformer_known(cpu);
	test_attention_nan(cpu);
	test_layernorm_fd(dlt_backend_ref());
	test_attention_fd(dlt_backend_ref(), 0, 0.0f);
	test_attention_fd(dlt_backend_ref(), 1, 0.0f);
	test_attention_fd(dlt_backend_ref(), 1, 0.3f);
	test_attention_dropout(dlt_backend_ref());
	bench_attention(cpu, dlt_backend_ref());
	return done_testing();
}
