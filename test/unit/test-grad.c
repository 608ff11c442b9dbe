/* Gradients of every layer and of whole models against central finite
 * differences; optimiser steps and learning-rate schedules against values
 * worked out by hand from PyTorch's formulas. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "nn/model.h"
#include "archive/archive.h"
#include "train/train.h"
#include "kernels/common/math.h"
#include "kernels/cpu/gemm.h"

#define BATCH 4
#define VEC(n) ((dlt_shape){ (n), 1, 1 })
#define MLP_IN VEC(784)

static dlt_rng rng;

static dlt_layer_cfg layer(int kind, int units, int line)
{
	dlt_layer_cfg l = { .kind = kind, .line = line, .units = units, .bias = 1,
			    .slope = 0.1f };
	return l;
}

static dlt_layer_cfg dense(int units)
{
	return layer(DLT_LAYER_DENSE, units, 0);
}

static dlt_layer_cfg act(int kind)
{
	return layer(kind, 0, 0);
}

static dlt_layer_cfg dropout(float rate)
{
	dlt_layer_cfg l = layer(DLT_LAYER_DROPOUT, 0, 0);
	l.rate = rate;
	return l;
}

static dlt_config config(dlt_layer_cfg *layers, int n)
{
	dlt_config c;
	memset(&c, 0, sizeof(c));
	c.path = "test.yaml";
	c.layers = layers;
	c.n_layers = n;
	c.model_line = 3;
	c.train.seed = 5;
	return c;
}

/* Loss of the model as it stands: training mode, a fixed step, so the
 * dropout mask is the same at every call. */
static double loss_now(dlt_model *m, const int32_t *lab)
{
	dlt_model_forward(m, BATCH, 1, 17);
	return dlt_model_loss(m, lab, BATCH, NULL);
}

/* Where the model is not smooth: the sign of every relu and leaky_relu
 * output and the winner of every max pool.  Where that changes between
 * the two sides of a difference, it straddles a kink and says nothing
 * about the gradient. */
typedef struct kinks {
	unsigned char *lo, *hi;
	size_t len;
} kinks;

static size_t kink_state(const dlt_model *m, unsigned char *flags)
{
	size_t j = 0;
	for (int i = 0; i < m->n_layers; i++) {
		const dlt_layer *l = &m->layers[i];
		size_t n = (size_t)BATCH * m->t[l->out].n;
		const float *y = dlt_tensor_a(m, l->out);
		if (l->act == DLT_ACT_RELU || l->act == DLT_ACT_LEAKY_RELU)
			for (size_t e = 0; e < n; e++, j++)
				if (flags)
					flags[j] = y[e] > 0.0f;
		if (l->kind == DLT_LAYER_MAXPOOL) {
			if (flags)
				memcpy(flags + j, l->arg, n * sizeof(int32_t));
			j += n * sizeof(int32_t);
		}
	}
	return j;
}

/* Worst |numeric - analytic| over v, relative to the largest analytic
 * value (f32 forward passes make the numeric side noisy at 1e-5);
 * *skipped counts the differences across a kink even at the smallest
 * step (a conv weight moves many outputs: a smaller step often avoids
 * their kinks). */
static double fd_error(dlt_model *m, const int32_t *lab, const kinks *k, float *v,
		       const float *ana, size_t n, size_t *skipped)
{
	double worst = 0.0, scale = 1e-3;
	for (size_t i = 0; i < n; i++)
		scale = fmax(scale, fabs(ana[i]));
	for (size_t i = 0; i < n; i++) {
		float old = v[i], eps = 1e-2f;
		for (;;) {
			float hi = old + eps, lo = old - eps;
			double lp, lm, num;
			v[i] = hi;
			lp = loss_now(m, lab);
			kink_state(m, k->hi);
			v[i] = lo;
			lm = loss_now(m, lab);
			kink_state(m, k->lo);
			v[i] = old;
			if (!memcmp(k->lo, k->hi, k->len)) {
				num = (lp - lm) / ((double)hi - lo);
				worst = fmax(worst, fabs(num - ana[i]) / scale);
				break;
			}
			if ((eps /= 4) < 1e-3f) {
				++*skipped;
				break;
			}
		}
	}
	return worst;
}

/* Inputs of either sign but away from 0 by more than the finite step, so
 * no difference straddles relu's kink. */
static void fill_input(float *x, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		float u = 2.0f * dlt_rng_uniform(&rng) - 1.0f;
		x[i] = u < 0 ? 2.0f * u - 0.1f : 2.0f * u + 0.1f;
	}
}

static void check_grad(const char *what, const char *name, dlt_model *m, const int32_t *lab,
		       const kinks *k, float *v, const float *g, size_t n)
{
	float *ana = malloc(n * sizeof(float));
	size_t skipped = 0;
	double e;
	memcpy(ana, g, n * sizeof(float));
	e = fd_error(m, lab, k, v, ana, n, &skipped);
	if (!ok(e < 1e-2 && skipped <= n / 4, "%s: gradient of %s", what, name))
		diag("worst error %g of the largest gradient, %zu of %zu across a kink", e,
		     skipped, n);
	free(ana);
}

/* Checks every param's gradient and the input's. */
static void check_image_model(const char *what, dlt_layer_cfg *layers, int n, dlt_shape in,
			      int classes)
{
	dlt_config c = config(layers, n);
	size_t nin = (size_t)BATCH * in.c * in.h * in.w;
	dlt_model m;
	int32_t lab[BATCH];
	kinks k;
	if (!ok_rc(dlt_model_init(&m, &c, dlt_backend_cpu(), in, classes, BATCH), 0,
		   "%s: model builds", what))
		return;
	m.want_input_grad = 1;
	k.len = kink_state(&m, NULL);
	k.lo = malloc(k.len + 1);
	k.hi = malloc(k.len + 1);
	fill_input(dlt_model_input(&m), nin);
	for (int r = 0; r < BATCH; r++)
		lab[r] = (int32_t)dlt_rng_below(&rng, classes);
	loss_now(&m, lab);
	dlt_model_backward(&m, BATCH);
	for (int i = 0; i < m.n_params; i++)
		check_grad(what, m.params[i].name, &m, lab, &k, m.params[i].w, m.params[i].g,
			   m.params[i].n);
	check_grad(what, "the input", &m, lab, &k, dlt_model_input(&m), dlt_model_input_grad(&m),
		   nin);
	free(k.lo);
	free(k.hi);
	dlt_model_free(&m);
}

static void check_model(const char *what, dlt_layer_cfg *layers, int n, int in, int classes)
{
	check_image_model(what, layers, n, (dlt_shape){ in, 1, 1 }, classes);
}

static void test_layers(void)
{
	static const struct {
		const char *name;
		int kind;
	} acts[] = {
		{ "relu", DLT_LAYER_RELU }, { "leaky_relu", DLT_LAYER_LEAKY_RELU },
		{ "gelu", DLT_LAYER_GELU }, { "tanh", DLT_LAYER_TANH },
		{ "sigmoid", DLT_LAYER_SIGMOID },
	};
	dlt_layer_cfg l[8];
	char what[64];
	check_model("softmax-xent", l, 0, 5, 5);
	l[0] = dense(5);
	check_model("dense", l, 1, 7, 5);
	l[0].bias = 0;
	check_model("dense without bias", l, 1, 7, 5);
	for (size_t i = 0; i < sizeof(acts) / sizeof(acts[0]); i++) {
		l[0] = act(acts[i].kind);
		snprintf(what, sizeof(what), "%s", acts[i].name);
		check_model(what, l, 1, 5, 5);
		/* after a dense: fused where possible */
		l[0] = dense(6);
		l[1] = act(acts[i].kind);
		l[2] = dense(5);
		snprintf(what, sizeof(what), "dense + %s", acts[i].name);
		check_model(what, l, 3, 7, 5);
		/* after another activation: never in place over it */
		l[0] = dense(6);
		l[1] = act(DLT_LAYER_TANH);
		l[2] = act(acts[i].kind);
		l[3] = dense(5);
		snprintf(what, sizeof(what), "dense + tanh + %s", acts[i].name);
		check_model(what, l, 4, 7, 5);
	}
	l[0] = dropout(0.5f);
	check_model("dropout", l, 1, 5, 5);
	l[0] = dense(8);
	l[1] = dropout(0.3f);
	l[2] = dense(5);
	check_model("dense + dropout", l, 3, 7, 5);
	l[0] = act(DLT_LAYER_FLATTEN);
	l[1] = dense(5);
	l[2] = act(DLT_LAYER_FLATTEN);
	check_model("flatten", l, 3, 7, 5);
}

static dlt_layer_cfg conv(int filters, int k, int stride, int pad, int dil, int groups)
{
	dlt_layer_cfg l = layer(DLT_LAYER_CONV2D, 0, 0);
	l.filters = filters;
	l.kernel[0] = l.kernel[1] = k;
	l.stride[0] = l.stride[1] = stride;
	l.pad[0] = l.pad[1] = pad;
	l.dilation[0] = l.dilation[1] = dil;
	l.groups = groups;
	return l;
}

static dlt_layer_cfg pool(int kind, int k, int stride, int pad)
{
	dlt_layer_cfg l = layer(kind, 0, 0);
	l.kernel[0] = l.kernel[1] = k;
	l.stride[0] = l.stride[1] = stride;
	l.pad[0] = l.pad[1] = pad;
	return l;
}

static dlt_layer_cfg batchnorm(void)
{
	dlt_layer_cfg l = layer(DLT_LAYER_BATCHNORM, 0, 0);
	l.momentum = 0.1f;
	l.eps = 1e-5f;
	return l;
}

static dlt_layer_cfg residual(dlt_layer_cfg *body, int n_body, dlt_layer_cfg *sc, int n_sc)
{
	dlt_layer_cfg l = layer(DLT_LAYER_RESIDUAL, 0, 0);
	l.body = body;
	l.n_body = n_body;
	l.shortcut = sc;
	l.n_shortcut = n_sc;
	return l;
}

/* Language models: token ids in, per-position logits out, the loss per
 * token.  Every param's gradient against finite differences. */
#define SEQ_T 5
#define SEQ_V 11

static dlt_layer_cfg seq_layer(int kind)
{
	dlt_layer_cfg l = layer(kind, 0, 0);
	l.vocab = SEQ_V;
	l.dim = 8;
	l.max = 6;
	l.heads = 2;
	l.causal = 1;
	l.eps = 1e-5f;
	return l;
}

static void check_seq_model(const char *what, dlt_layer_cfg *layers, int n, int gpt2)
{
	dlt_config c = config(layers, n);
	dlt_model m;
	int32_t lab[BATCH * SEQ_T], *ids;
	kinks k;
	c.train.init_gpt2 = gpt2;
	if (!ok_rc(dlt_model_init(&m, &c, dlt_backend_cpu(), VEC(SEQ_T), SEQ_V, BATCH), 0,
		   "%s: model builds", what))
		return;
	k.len = kink_state(&m, NULL);
	k.lo = malloc(k.len + 1);
	k.hi = malloc(k.len + 1);
	ids = (int32_t *)dlt_model_input(&m);
	for (int i = 0; i < BATCH * SEQ_T; i++) {
		ids[i] = (int32_t)dlt_rng_below(&rng, SEQ_V);
		lab[i] = (int32_t)dlt_rng_below(&rng, SEQ_V);
	}
	loss_now(&m, lab);
	dlt_model_backward(&m, BATCH);
	for (int i = 0; i < m.n_params; i++)
		check_grad(what, m.params[i].name, &m, lab, &k, m.params[i].w, m.params[i].g,
			   m.params[i].n);
	free(k.lo);
	free(k.hi);
	dlt_model_free(&m);
}

/* A GPT's memory: its layer norms' and GELU's outputs are made again in
 * backward (4 remakes: 2 a block and the last norm's), and the outputs
 * that backward never reads (the embedding's, to which the positions are
 * added, and the projections that end the residual blocks) are in the
 * pool too, and the logits, whose gradient the loss writes over them: 8
 * in all; what a block keeps is its input, q, k, v, the heads' output,
 * the sum after attention and the MLP's hidden layer */
static void check_gpt_memory(dlt_layer_cfg *layers, int n)
{
	dlt_config c = config(layers, n);
	dlt_model m;
	int remakes = 0, pooled = 0;
	if (!ok_rc(dlt_model_init(&m, &c, dlt_backend_cpu(), VEC(SEQ_T), SEQ_V, BATCH), 0,
		   "GPT memory: model builds"))
		return;
	for (int i = 0; i < m.n_layers; i++)
		remakes += m.layers[i].remade_in &&
			   (m.layers[i - 1].kind == DLT_LAYER_LAYERNORM ||
			    m.layers[i - 1].kind == DLT_LAYER_GELU);
	for (int i = 0; i < m.n_t; i++)
		pooled += m.t[i].pooled;
	ok(remakes == 4 && pooled == 8, "GPT memory: %d outputs made again in backward (4), "
	   "%d activations in the pool (8)", remakes, pooled);
	ok(m.t[m.n_t - 1].pooled && m.t[m.n_t - 1].a == m.t[m.n_t - 1].g,
	   "GPT memory: the logits' gradient in their block, in the pool");
	dlt_model_free(&m);
}

/* bf16 and fp16: the activations backward reads wait for it in 16 bits
 * (plan_halves): each GPT block's input, its sum after attention and its
 * MLP's hidden layer, and the final norm's input, each in the pool
 * around its reads, where that takes a tenth less memory: want of them
 * (a single block too, now that backward reads its hidden layer and the
 * attention's q, k, v in 16 bits, not widened whole: 4).
 * The loss and every gradient keep the bits of the same model on a
 * backend that keeps them in f32, over two steps (the second on other
 * data, in a pool the first has used), with the stage as small as the
 * model allows: backward widens 16 bits a row at a time, and the
 * attention runs 3 batches of 4 and then 1 (the dropout's row0). */
static void check_gpt_halves(dlt_layer_cfg *layers, int n, const char *prec, int want)
{
	dlt_config c = config(layers, n);
	dlt_backend f32 = *dlt_backend_cpu();
	dlt_model ma, mb;
	int32_t lab[BATCH * SEQ_T], *ia, *ib;
	int halves = 0, pooled = 1, same = 1;
	snprintf(c.train.precision, sizeof(c.train.precision), "%s", prec);
	f32.narrow = NULL;
	f32.widen = NULL;
	if (!ok_rc(dlt_model_init(&ma, &c, dlt_backend_cpu(), VEC(SEQ_T), SEQ_V, BATCH), 0,
		   "%s GPT: model builds", prec))
		return;
	if (!ok_rc(dlt_model_init(&mb, &c, &f32, VEC(SEQ_T), SEQ_V, BATCH), 0,
		   "%s GPT on a backend without 16-bit storage: model builds", prec)) {
		dlt_model_free(&ma);
		return;
	}
	ma.stage_n = 0;	/* it holds more: using less is safe */
	for (int i = 0; i < ma.n_layers; i++)
		if (ma.layers[i].kind == DLT_LAYER_ATTENTION && 4 * ma.t[ma.layers[i].in].n > ma.stage_n)
			ma.stage_n = 4 * ma.t[ma.layers[i].in].n;
	for (int i = 0; i < ma.n_t; i++) {
		if (2 * (ma.t[i].n / ma.t[i].rows) > ma.stage_n)
			ma.stage_n = 2 * (ma.t[i].n / ma.t[i].rows);
		halves += ma.t[i].narrow_at >= 0 && ma.t[i].half;
		pooled &= ma.t[i].narrow_at < 0 || ma.t[i].pooled;
		pooled &= mb.t[i].narrow_at < 0 && !mb.t[i].half;
	}
	ok(halves == want && pooled, "%s GPT of %d layers: %d activations kept in 16 bits (%d), "
	   "in the pool around their reads; none without the backend's narrow", prec, n, halves,
	   want);
	ia = (int32_t *)dlt_model_input(&ma);
	ib = (int32_t *)dlt_model_input(&mb);
	for (int step = 0; step < 2; step++) {
		for (int i = 0; i < BATCH * SEQ_T; i++) {
			ia[i] = ib[i] = (int32_t)dlt_rng_below(&rng, SEQ_V);
			lab[i] = (int32_t)dlt_rng_below(&rng, SEQ_V);
		}
		same &= loss_now(&ma, lab) == loss_now(&mb, lab);
		dlt_model_backward(&ma, BATCH);
		dlt_model_backward(&mb, BATCH);
		same &= !memcmp(ma.dev_g, mb.dev_g, ma.n_weights * sizeof(float));
	}
	ok(same, "%s GPT of %d layers: the loss's and every gradient's bits of the f32 storage, "
	   "2 steps", prec, n);
	dlt_model_free(&ma);
	dlt_model_free(&mb);
}

static void test_seq_layers(void)
{
	dlt_layer_cfg emb = seq_layer(DLT_LAYER_EMBEDDING), pos = seq_layer(DLT_LAYER_POSITIONAL);
	dlt_layer_cfg ln = seq_layer(DLT_LAYER_LAYERNORM), att = seq_layer(DLT_LAYER_ATTENTION);
	dlt_layer_cfg head = dense(SEQ_V), tied = dense(0), gelu = act(DLT_LAYER_GELU);
	dlt_layer_cfg full = att, dropped = att, up = dense(32), down = dense(8);
	strcpy(emb.name, "wte");
	strcpy(tied.tie, "wte");
	full.causal = 0;
	dropped.rate = 0.3f;
	gelu.tanh = 1;
	{
		dlt_layer_cfg l[] = { emb, pos, ln, head };
		check_seq_model("embedding, positional, layernorm, dense per position", l, 4, 0);
	}
	{
		dlt_layer_cfg l[] = { emb, pos, att, head };
		check_seq_model("causal attention", l, 4, 0);
	}
	{
		dlt_layer_cfg l[] = { emb, pos, full, head };
		check_seq_model("attention without the mask", l, 4, 0);
	}
	{
		dlt_layer_cfg l[] = { emb, pos, dropped, head };
		check_seq_model("causal attention, dropout 0.3 of its weights", l, 4, 0);
	}
	{
		dlt_layer_cfg l[] = { emb, pos, ln, up, gelu, down, tied };
		check_seq_model("gelu tanh and a head tied to the embedding", l, 7, 0);
	}
	{
		dlt_layer_cfg b1[] = { ln, att }, b2[] = { ln, up, gelu, down };
		dlt_layer_cfg l[] = { emb, pos, residual(b1, 2, NULL, 0), residual(b2, 4, NULL, 0),
				      ln, tied };
		check_seq_model("a GPT-2 block, tied head", l, 6, 0);
		check_gpt_memory(l, 6);
		check_gpt_halves(l, 6, "bf16", 4);
	}
	{
		/* 3 blocks with an MLP 32 times as wide as the stream: the
		 * hidden layers are most of what backward reads, and one at a
		 * time is wide in the pool; bf16, fp16, then bf16 with the
		 * attention's weights dropped out */
		dlt_layer_cfg wide = dense(256);
		for (int d = 0; d < 3; d++) {
			dlt_layer_cfg b1[] = { ln, d == 2 ? dropped : att };
			dlt_layer_cfg b2[] = { ln, wide, gelu, down };
			dlt_layer_cfg l[] = { emb, pos, residual(b1, 2, NULL, 0),
					      residual(b2, 4, NULL, 0), residual(b1, 2, NULL, 0),
					      residual(b2, 4, NULL, 0), residual(b1, 2, NULL, 0),
					      residual(b2, 4, NULL, 0), ln, tied };
			check_gpt_halves(l, 10, d == 1 ? "fp16" : "bf16", 10);
		}
	}
	{
		/* a GELU straight after a layer norm: the norm's output, remade
		 * in 16 bits for the GELU, which writes its gradient as it
		 * reads it, has a block of its own */
		dlt_layer_cfg wide = dense(256);
		dlt_layer_cfg b1[] = { ln, att }, b2[] = { ln, gelu, wide, down };
		dlt_layer_cfg l[] = { emb, pos, residual(b1, 2, NULL, 0), residual(b2, 4, NULL, 0),
				      residual(b1, 2, NULL, 0), residual(b2, 4, NULL, 0), ln, tied };
		check_gpt_halves(l, 8, "bf16", 9);
	}
}

/* Each image layer inside a small model, and a residual network. */
static void test_image_layers(void)
{
	static const int cv[][5] = {	/* filters, kernel, stride, pad, dilation; groups */
		{ 3, 3, 1, 1, 1 }, { 4, 3, 2, 0, 1 }, { 2, 2, 1, 2, 2 }, { 4, 1, 1, 0, 1 },
	};
	dlt_shape img = { 2, 5, 6 };
	dlt_layer_cfg l[8], body[4], sc[2];
	char what[96];
	for (size_t i = 0; i < sizeof(cv) / sizeof(cv[0]); i++) {
		l[0] = conv(cv[i][0], cv[i][1], cv[i][2], cv[i][3], cv[i][4], 1);
		l[1] = act(DLT_LAYER_FLATTEN);
		l[2] = dense(3);
		snprintf(what, sizeof(what), "conv2d %d filters %dx%d stride %d pad %d dilation %d",
			 cv[i][0], cv[i][1], cv[i][1], cv[i][2], cv[i][3], cv[i][4]);
		check_image_model(what, l, 3, img, 3);
	}
	/* tanh, not relu: a conv weight moves so many outputs that some
	 * relu kink is always within the finite step */
	l[0] = conv(4, 3, 1, 1, 1, 2);
	l[1] = act(DLT_LAYER_TANH);
	l[2] = dense(3);
	check_image_model("conv2d groups 2 + tanh (fused)", l, 3, img, 3);
	l[0] = conv(2, 3, 1, 1, 1, 2);
	l[0].bias = 0;
	l[1] = dense(3);
	check_image_model("conv2d depthwise without bias", l, 2, img, 3);
	l[0] = pool(DLT_LAYER_MAXPOOL, 2, 2, 0);
	l[1] = dense(3);
	check_image_model("maxpool 2", l, 2, img, 3);
	l[0] = pool(DLT_LAYER_MAXPOOL, 3, 2, 1);
	check_image_model("maxpool 3 stride 2 pad 1", l, 2, img, 3);
	l[0] = pool(DLT_LAYER_AVGPOOL, 2, 2, 0);
	check_image_model("avgpool 2", l, 2, img, 3);
	l[0] = pool(DLT_LAYER_AVGPOOL, 3, 1, 1);
	check_image_model("avgpool 3 stride 1 pad 1", l, 2, img, 3);
	l[0] = act(DLT_LAYER_GLOBAL_AVGPOOL);
	check_image_model("global avgpool", l, 2, img, 3);
	l[0] = batchnorm();
	check_image_model("batchnorm over images", l, 2, img, 3);
	l[0] = dense(6);
	l[1] = batchnorm();
	l[2] = act(DLT_LAYER_RELU);
	l[3] = dense(3);
	check_model("dense + batchnorm + relu (in place)", l, 4, 5, 3);
	body[0] = conv(2, 3, 1, 1, 1, 1);
	body[1] = batchnorm();
	body[2] = act(DLT_LAYER_TANH);
	l[0] = residual(body, 3, NULL, 0);
	l[1] = act(DLT_LAYER_TANH);
	l[2] = dense(3);
	check_image_model("residual, identity shortcut", l, 3, img, 3);
	body[0] = conv(4, 3, 2, 1, 1, 1);
	sc[0] = conv(4, 1, 2, 0, 1, 1);
	sc[1] = batchnorm();
	l[0] = conv(2, 3, 1, 1, 1, 1);
	l[1] = act(DLT_LAYER_RELU);
	l[2] = residual(body, 3, sc, 2);
	l[3] = act(DLT_LAYER_GLOBAL_AVGPOOL);
	l[4] = dense(3);
	check_image_model("resnet: conv, residual with projection, global avgpool", l, 5, img, 3);
	body[2] = act(DLT_LAYER_RELU);
	l[0] = residual(body + 2, 1, NULL, 0);
	l[1] = dense(3);
	check_image_model("residual starting with relu (never in place)", l, 2, img, 3);
	/* max pooling that does the relu's backward before it */
	l[0] = act(DLT_LAYER_RELU);
	l[1] = pool(DLT_LAYER_MAXPOOL, 2, 2, 0);
	l[2] = dense(3);
	check_image_model("relu + maxpool 2 over the input (whose gradient is apart)", l, 3, img,
			  3);
	l[0] = batchnorm();
	l[1] = act(DLT_LAYER_RELU);
	l[2] = pool(DLT_LAYER_MAXPOOL, 3, 1, 1);
	l[3] = dense(3);
	check_image_model("batchnorm + relu (in place) + maxpool 3 stride 1 pad 1", l, 4, img, 3);
}

/* The model's gradients with a relu's backward done by the max pool after
 * it: the bits of the model whose relu does its own (a dropout of rate 0
 * between them, which changes no value, keeps them apart). */
static void test_pool_after_relu(void)
{
	dlt_shape img = { 2, 6, 6 };
	dlt_layer_cfg a[] = { conv(3, 3, 1, 1, 1, 1), act(DLT_LAYER_RELU),
			      pool(DLT_LAYER_MAXPOOL, 2, 2, 0), act(DLT_LAYER_FLATTEN), dense(3) };
	dlt_layer_cfg b[] = { conv(3, 3, 1, 1, 1, 1), act(DLT_LAYER_RELU), dropout(0.0f),
			      pool(DLT_LAYER_MAXPOOL, 2, 2, 0), act(DLT_LAYER_FLATTEN), dense(3) };
	dlt_config ca = config(a, 5), cb = config(b, 6);
	size_t nin = (size_t)BATCH * img.c * img.h * img.w;
	dlt_model ma, mb;
	int32_t lab[BATCH];
	int same = 1, fused = 0;

	if (!ok_rc(dlt_model_init(&ma, &ca, dlt_backend_cpu(), img, 3, BATCH), 0, "relu + maxpool") ||
	    !ok_rc(dlt_model_init(&mb, &cb, dlt_backend_cpu(), img, 3, BATCH), 0,
		   "relu + dropout 0 + maxpool"))
		return;
	ma.want_input_grad = mb.want_input_grad = 1;
	fill_input(dlt_model_input(&ma), nin);
	memcpy(dlt_model_input(&mb), dlt_model_input(&ma), nin * sizeof(float));
	for (int r = 0; r < BATCH; r++)
		lab[r] = (int32_t)dlt_rng_below(&rng, 3);
	loss_now(&ma, lab);
	loss_now(&mb, lab);
	dlt_model_backward(&ma, BATCH);
	dlt_model_backward(&mb, BATCH);
	for (int i = 0; i < ma.n_layers; i++)
		fused += ma.layers[i].by_pool;
	for (int i = 0; i < ma.n_params; i++)
		same &= !memcmp(ma.params[i].g, mb.params[i].g, ma.params[i].n * sizeof(float));
	same &= !memcmp(dlt_model_input_grad(&ma), dlt_model_input_grad(&mb), nin * sizeof(float));
	ok(fused == 1 && same, "conv + relu + maxpool: the pool does the relu's backward, and "
	   "every gradient has the bits of the model where the relu does it");
	/* which reads no activation: the ReLU's output lives in the pool
	 * from its forward to the pool's, not through backward */
	ok(ma.t[ma.t[ma.layers[1].out].a_of].pooled && !mb.t[mb.t[mb.layers[1].out].a_of].pooled,
	   "conv + relu + maxpool: the relu's output is not kept for backward (it is where the "
	   "relu does its own backward)");
	dlt_model_free(&ma);
	dlt_model_free(&mb);
}

/* The storage make_pool picks for bf16 on the CPU (train.storage auto):
 * 32 bits for bench/cnn.yaml at batch 128, where the first conv's output
 * and gradient, which the fused conv and pool never write, were counted
 * and made 16 bits look a tenth smaller (they were more memory, and the
 * passes); 16 for a residual CNN with batch norms, whose activations
 * backward reads are most of its memory. */
static void test_cnn_storage(void)
{
	dlt_layer_cfg cnn[] = { conv(32, 3, 1, 1, 1, 1), act(DLT_LAYER_RELU),
				pool(DLT_LAYER_MAXPOOL, 2, 2, 0), conv(64, 3, 1, 1, 1, 1),
				act(DLT_LAYER_RELU), pool(DLT_LAYER_MAXPOOL, 2, 2, 0),
				act(DLT_LAYER_FLATTEN), dense(128), act(DLT_LAYER_RELU), dense(10) };
	dlt_layer_cfg bn[] = { conv(16, 3, 1, 1, 1, 1), layer(DLT_LAYER_BATCHNORM, 0, 0),
			       act(DLT_LAYER_RELU), conv(16, 3, 1, 1, 1, 1),
			       layer(DLT_LAYER_BATCHNORM, 0, 0), act(DLT_LAYER_RELU),
			       layer(DLT_LAYER_GLOBAL_AVGPOOL, 0, 0), act(DLT_LAYER_FLATTEN),
			       dense(10) };
	dlt_config ca = config(cnn, 10), cb = config(bn, 9);
	dlt_model ma, mb;
	snprintf(ca.train.precision, sizeof(ca.train.precision), "bf16");
	snprintf(cb.train.precision, sizeof(cb.train.precision), "bf16");
	if (!ok_rc(dlt_model_init(&ma, &ca, dlt_backend_cpu(), (dlt_shape){ 1, 28, 28 }, 10, 128),
		   0, "bf16 bench CNN builds"))
		return;
	if (ok_rc(dlt_model_init(&mb, &cb, dlt_backend_cpu(), (dlt_shape){ 1, 28, 28 }, 10, 128),
		  0, "bf16 conv + batch norm CNN builds")) {
		ok(ma.layers[0].pool_op && !ma.halves && mb.halves, "bf16, storage auto: 32 bits "
		   "for the bench CNN (its first conv does the pool), 16 with batch norms");
		dlt_model_free(&mb);
	}
	dlt_model_free(&ma);
}

/* A conv on img, its ReLU, a 2x2 max pool and a dense layer, at prec (""
 * is f32); apart: with a dropout of rate 0 between the ReLU and the pool,
 * which keeps the conv and the pool two ops.  Whether it was made. */
static int conv_pool_model(dlt_model *m, dlt_shape img, int filters, int apart,
			   const char *prec)
{
	dlt_layer_cfg l[] = { conv(filters, 3, 1, 1, 1, 1), act(DLT_LAYER_RELU), dropout(0.0f),
			      pool(DLT_LAYER_MAXPOOL, 2, 2, 0), act(DLT_LAYER_FLATTEN), dense(3) };
	dlt_config c;
	if (!apart)
		memmove(l + 2, l + 3, 3 * sizeof(*l));
	c = config(l, apart ? 6 : 5);
	snprintf(c.train.precision, sizeof(c.train.precision), "%s", prec);
	return ok_rc(dlt_model_init(m, &c, dlt_backend_cpu(), img, 3, BATCH), 0,
		     "conv + relu + %smaxpool%s%s", apart ? "dropout 0 + " : "", *prec ? ", " : "",
		     prec);
}

/* A conv, its ReLU and the max pool after it, as one op where the cpu
 * backend has it (conv_pool_fuses says which ways: a first conv on one
 * channel both, Winograd's forward): every gradient has the bits of the
 * model that runs them apart (a dropout of rate 0 between ReLU and pool),
 * with the input's gradient not wanted (the fused backward, where there
 * is one) and wanted (the pool's and conv's own).  The gradients have the
 * same bits, but for a fused backward's conv, whose sums run in another
 * order. */
static void test_conv_pool(dlt_shape img, int filters, int ways)
{
	size_t nin = (size_t)BATCH * img.c * img.h * img.w;
	dlt_model ma, mb;
	int32_t lab[BATCH];

	if (!conv_pool_model(&ma, img, filters, 0, "") ||
	    !conv_pool_model(&mb, img, filters, 1, ""))
		return;
	ok(ma.layers[0].pool_op == 2 && ma.layers[2].fused == ways && !mb.layers[0].pool_op,
	   "conv on %d channels %dx%d + relu + maxpool: one op, %s", img.c, img.h, img.w,
	   ways & DLT_FUSES_BACKWARD ? "both ways" : "forward");
	fill_input(dlt_model_input(&ma), nin);
	memcpy(dlt_model_input(&mb), dlt_model_input(&ma), nin * sizeof(float));
	for (int r = 0; r < BATCH; r++)
		lab[r] = (int32_t)dlt_rng_below(&rng, 3);
	for (int want = 0; want < 2; want++) {
		int same;
		ma.want_input_grad = mb.want_input_grad = want;
		ok(loss_now(&ma, lab) == loss_now(&mb, lab), "conv + relu + maxpool as one op: "
		   "the loss's bits");
		dlt_model_backward(&ma, BATCH);
		dlt_model_backward(&mb, BATCH);
		same = 1;
		/* the fused backward of a first layer sums its dW and db in
		 * another order (conv_pool_c1_dw_avx2): those to rounding */
		for (int i = (ways & DLT_FUSES_BACKWARD) && !want ? 2 : 0; i < ma.n_params; i++)
			same &= !memcmp(ma.params[i].g, mb.params[i].g,
					ma.params[i].n * sizeof(float));
		for (int i = 0; i < 2 && (ways & DLT_FUSES_BACKWARD) && !want; i++) {
			float big = 0.0f;
			for (size_t j = 0; j < ma.params[i].n; j++)
				big = fmaxf(big, fabsf(mb.params[i].g[j]));
			for (size_t j = 0; j < ma.params[i].n; j++)
				same &= fabsf(ma.params[i].g[j] - mb.params[i].g[j]) <= 1e-5f * big;
		}
		if (want)
			same &= !memcmp(dlt_model_input_grad(&ma), dlt_model_input_grad(&mb),
					nin * sizeof(float));
		ok(same, "conv + relu + maxpool as one op, the input's gradient %s: every "
		   "gradient's bits%s", want ? "wanted" : "not wanted",
		   (ways & DLT_FUSES_BACKWARD) && !want ? " (the conv's to rounding)" : "");
	}
	dlt_model_free(&ma);
	dlt_model_free(&mb);
}

/* bf16 and fp16: the same ops are one op, on the rounded copies of the
 * input and weights, and the loss has the bits of the model that runs
 * them apart, which rounds the conv's output before the pool: rounding
 * keeps the order, so the pool's maxima are the same values.  (Which of
 * two inputs that round alike is the argmax can differ, and so can the
 * gradients, by where they go.) */
static void test_conv_pool_prec(dlt_shape img, int filters, int ways, const char *prec)
{
	size_t nin = (size_t)BATCH * img.c * img.h * img.w;
	dlt_model ma, mb;
	int32_t lab[BATCH];
	double la, lb;

	if (!conv_pool_model(&ma, img, filters, 0, prec) ||
	    !conv_pool_model(&mb, img, filters, 1, prec))
		return;
	ok(ma.layers[0].pool_op == 2 && ma.layers[2].fused == ways,
	   "%s: conv on %d channels %dx%d + relu + maxpool: one op", prec, img.c, img.h, img.w);
	fill_input(dlt_model_input(&ma), nin);
	memcpy(dlt_model_input(&mb), dlt_model_input(&ma), nin * sizeof(float));
	for (int r = 0; r < BATCH; r++)
		lab[r] = (int32_t)dlt_rng_below(&rng, 3);
	la = loss_now(&ma, lab);
	lb = loss_now(&mb, lab);
	/* the same model in f32 (the same seed, so the same weights) */
	dlt_model_free(&mb);
	if (conv_pool_model(&mb, img, filters, 1, "")) {
		memcpy(dlt_model_input(&mb), dlt_model_input(&ma), nin * sizeof(float));
		ok(la == lb && la != loss_now(&mb, lab),
		   "%s: conv + relu + maxpool as one op: the loss's bits, not f32's", prec);
		dlt_model_backward(&ma, BATCH);
		ok(isfinite(ma.params[0].g[0]), "%s: the fused backward runs", prec);
		dlt_model_free(&mb);
	}
	dlt_model_free(&ma);
}

/* bf16 and fp16: a model whose first op rounds its input (a conv, a
 * dense after a flatten) gets it rounded once by dlt_model_set_input, or
 * by the caller, and reads it in place: the loss and every gradient have
 * the bits of the same model fed its input raw (dlt_model_input), which
 * each op rounds on its own.  A model whose first op reads floats (a
 * batch norm) gets its input as it is. */
static void test_input_rounded(const char *prec)
{
	dlt_shape img = { 1, 4, 6 };
	dlt_layer_cfg first_conv[] = { conv(3, 3, 1, 1, 1, 1), act(DLT_LAYER_RELU),
				       act(DLT_LAYER_FLATTEN), dense(3) };
	dlt_layer_cfg first_dense[] = { act(DLT_LAYER_FLATTEN), dense(5), act(DLT_LAYER_RELU),
					dense(3) };
	dlt_layer_cfg first_norm[] = { batchnorm(), act(DLT_LAYER_FLATTEN), dense(3) };
	struct { const char *what; dlt_layer_cfg *l; int n, rounds; } cases[] = {
		{ "conv first", first_conv, 4, 1 },
		{ "dense first", first_dense, 4, 1 },
		{ "batch norm first", first_norm, 3, 0 },
	};
	size_t nin = (size_t)BATCH * img.c * img.h * img.w;
	float *x = malloc(nin * sizeof(float)), *xr = malloc(nin * sizeof(float));
	int32_t lab[BATCH];

	fill_input(x, nin);
	for (int r = 0; r < BATCH; r++)
		lab[r] = (int32_t)dlt_rng_below(&rng, 3);
	for (size_t k = 0; x && k < sizeof(cases) / sizeof(cases[0]); k++) {
		dlt_config c = config(cases[k].l, cases[k].n);
		dlt_model ma, mb;
		size_t rounded = 0, changed = 0;
		int same;
		snprintf(c.train.precision, sizeof(c.train.precision), "%s", prec);
		if (!ok_rc(dlt_model_init(&ma, &c, dlt_backend_cpu(), img, 3, BATCH), 0, "%s: %s",
			   prec, cases[k].what) ||
		    !ok_rc(dlt_model_init(&mb, &c, dlt_backend_cpu(), img, 3, BATCH), 0, "%s: %s",
			   prec, cases[k].what))
			break;
		dlt_model_set_input(&ma, x, BATCH, 0);
		memcpy(dlt_model_input(&mb), x, nin * sizeof(float));
		for (size_t i = 0; i < nin; i++) {
			float v = dlt_tensor_a(&ma, 0)[i];
			rounded += v == dlt_round_prec(x[i], ma.prec);
			changed += v != x[i];
		}
		ok(ma.input_rounds == cases[k].rounds && ma.input_exact == cases[k].rounds &&
		   rounded == (cases[k].rounds ? nin : rounded) &&
		   (cases[k].rounds ? changed > 0 : changed == 0),
		   "%s: %s: the input set %s (%zu of %zu values changed)", prec, cases[k].what,
		   cases[k].rounds ? "is rounded once" : "stays as it is", changed, nin);
		ok(loss_now(&ma, lab) == loss_now(&mb, lab), "%s: %s: the loss's bits", prec,
		   cases[k].what);
		dlt_model_backward(&ma, BATCH);
		dlt_model_backward(&mb, BATCH);
		same = 1;
		for (int i = 0; i < ma.n_params; i++)
			same &= !memcmp(ma.params[i].g, mb.params[i].g,
					ma.params[i].n * sizeof(float));
		ok(same, "%s: %s: every gradient's bits, the input rounded or not", prec,
		   cases[k].what);
		/* rounded by the caller (the loader): read where it lies */
		if (xr) {
			for (size_t i = 0; i < nin; i++)
				xr[i] = dlt_round_prec(x[i], dlt_model_input_prec(&ma));
			dlt_model_set_input(&ma, xr, BATCH, 1);
			ok(dlt_tensor_a(&ma, 0) == xr && ma.input_exact == cases[k].rounds &&
			   loss_now(&ma, lab) == loss_now(&mb, lab) && dlt_model_input(&ma) != xr,
			   "%s: %s: an input rounded by the caller read in place, the loss's bits; "
			   "dlt_model_input hands out the model's own rows", prec, cases[k].what);
		}
		dlt_model_free(&ma);
		dlt_model_free(&mb);
	}
	free(x);
	free(xr);
}

/* bf16 and fp16: a ReLU and a max pool leave their outputs, and a max
 * pool whose windows do not overlap its input's gradient, unrounded,
 * holding values of prec already; where those are not (a ReLU on the raw
 * input, a pool of 3 at stride 2 that adds gradients) they round them.
 * Each model against the same one with dropouts of rate 0 about the ops,
 * which round what they copy, forward (after an op) and backward (before
 * it): the loss's and every gradient's bits.  Batch norms around them
 * read floats as they are. */
static void test_exact_ops(const char *prec)
{
	dlt_shape img = { 2, 6, 6 };
	dlt_layer_cfg relu_in[] = { act(DLT_LAYER_RELU), batchnorm(), act(DLT_LAYER_FLATTEN),
				    dense(3) };
	dlt_layer_cfg relu_in_b[] = { act(DLT_LAYER_RELU), dropout(0.0f), batchnorm(),
				      act(DLT_LAYER_FLATTEN), dense(3) };
	dlt_layer_cfg pools[] = { conv(3, 3, 1, 1, 1, 1), batchnorm(), act(DLT_LAYER_RELU),
				  pool(DLT_LAYER_MAXPOOL, 2, 2, 0), batchnorm(),
				  pool(DLT_LAYER_MAXPOOL, 3, 2, 1), batchnorm(),
				  act(DLT_LAYER_FLATTEN), dense(3) };
	dlt_layer_cfg pools_b[] = { conv(3, 3, 1, 1, 1, 1), batchnorm(), act(DLT_LAYER_RELU),
				    dropout(0.0f), pool(DLT_LAYER_MAXPOOL, 2, 2, 0), dropout(0.0f),
				    batchnorm(), dropout(0.0f), pool(DLT_LAYER_MAXPOOL, 3, 2, 1),
				    dropout(0.0f), batchnorm(), act(DLT_LAYER_FLATTEN), dense(3) };
	struct { const char *what; dlt_layer_cfg *a, *b; int na, nb; } cases[] = {
		{ "a ReLU on the raw input", relu_in, relu_in_b, 4, 5 },
		{ "max pools of 2 and of 3 at stride 2", pools, pools_b, 9, 13 },
	};
	size_t nin = (size_t)BATCH * img.c * img.h * img.w;
	int32_t lab[BATCH];

	for (int r = 0; r < BATCH; r++)
		lab[r] = (int32_t)dlt_rng_below(&rng, 3);
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		dlt_config ca = config(cases[k].a, cases[k].na), cb = config(cases[k].b, cases[k].nb);
		dlt_model ma, mb;
		int same = 1;
		snprintf(ca.train.precision, sizeof(ca.train.precision), "%s", prec);
		snprintf(cb.train.precision, sizeof(cb.train.precision), "%s", prec);
		if (!ok_rc(dlt_model_init(&ma, &ca, dlt_backend_cpu(), img, 3, BATCH), 0, "%s: %s",
			   prec, cases[k].what) ||
		    !ok_rc(dlt_model_init(&mb, &cb, dlt_backend_cpu(), img, 3, BATCH), 0,
			   "%s: %s, dropouts of rate 0 after", prec, cases[k].what))
			break;
		fill_input(dlt_model_input(&ma), nin);
		memcpy(dlt_model_input(&mb), dlt_model_input(&ma), nin * sizeof(float));
		ok(loss_now(&ma, lab) == loss_now(&mb, lab), "%s: %s: the loss's bits", prec,
		   cases[k].what);
		dlt_model_backward(&ma, BATCH);
		dlt_model_backward(&mb, BATCH);
		for (int i = 0; i < ma.n_params; i++)
			same &= !memcmp(ma.params[i].g, mb.params[i].g,
					ma.params[i].n * sizeof(float));
		ok(same, "%s: %s: every gradient's bits, with the dropouts' rounding or without", prec,
		   cases[k].what);
		dlt_model_free(&ma);
		dlt_model_free(&mb);
	}
}

/* The loader's rounding of a batch as it normalises it (the clones of
 * dlt_normalise_samples, one set of stats or one per element) against
 * dlt_round_prec, bit for bit: ties, the overflow to inf, the
 * subnormals of each type, NaN.  Stats of 0 and 1 leave the values as
 * they are, so only the rounding shows. */
static void test_round_samples(void)
{
	static const float zeros[2], ones[2] = { 1.0f, 1.0f };
	dlt_source src = { .ndim = 1, .dims = { 517 }, .dtype = DLT_F32 };
	float v[517], w[517];
	for (int prec = DLT_PREC_BF16; prec <= DLT_PREC_F16; prec++) {
		for (int ns = 1; ns <= 2; ns++) {
			dlt_normalise nm = { .scale = 1.0f, .mean = zeros, .inv_std = ones,
					     .n_stats = ns, .round = prec };
			int same = 1;
			for (int i = 0; i < 517; i++)
				v[i] = i % 7 == 0 ? ldexpf(1.0f + (float)i / 1024.0f, -20 - i % 13)
				     : i % 7 == 1 ? 65504.0f + (float)(i % 32)
				     : i % 7 == 2 ? ldexpf(1.0f + 1.0f / 256.0f + 1.0f / 2048.0f * (i % 3),
							   i % 9)
				     : i == 3 ? NAN : i == 10 ? -INFINITY
				     : 8.0f * dlt_rng_uniform(&rng) - 4.0f;
			dlt_normalise_samples(&nm, &src, v, 1, w);
			for (int i = 0; i < 517; i++) {
				float r = dlt_round_prec(v[i], prec);
				same &= !memcmp(&w[i], &r, sizeof(r));
			}
			ok(same, "%s: the loader's rounding of a batch as it normalises it (%s) has "
			   "dlt_round_prec's bits", prec == DLT_PREC_BF16 ? "bf16" : "fp16",
			   ns == 1 ? "one set of stats" : "stats per element");
		}
	}
}

static void test_mlp(void)
{
	dlt_layer_cfg l[] = {
		act(DLT_LAYER_FLATTEN), dense(16), act(DLT_LAYER_GELU), dense(12),
		act(DLT_LAYER_TANH), dropout(0.2f), dense(10), act(DLT_LAYER_LEAKY_RELU),
		dense(8), act(DLT_LAYER_SIGMOID), dense(6),
	};
	check_model("mlp", l, sizeof(l) / sizeof(l[0]), 9, 6);
}

static void test_init(void)
{
	dlt_layer_cfg l[] = { dense(300), act(DLT_LAYER_RELU), dense(10) };
	dlt_config c = config(l, 3);
	dlt_model a, b;
	float bound = 1.0f / sqrtf(784.0f), lo = 0, hi = 0;
	dlt_param *w;
	ok_rc(dlt_model_init(&a, &c, dlt_backend_cpu(), MLP_IN, 10, 8), 0, "mnist mlp builds");
	ok_rc(dlt_model_init(&b, &c, dlt_backend_cpu(), MLP_IN, 10, 8), 0, "again");
	ok(a.n_params == 4 && a.n_weights == 784 * 300 + 300 + 300 * 10 + 10,
	   "4 params, 238510 weights");
	w = &a.params[0];
	ok(!strcmp(w->name, "0.w") && w->ndim == 2 && w->dims[0] == 300 && w->dims[1] == 784 &&
	   !strcmp(a.params[3].name, "2.b") && a.params[3].ndim == 1 && a.params[3].dims[0] == 10,
	   "params named and shaped like PyTorch's");
	ok(!memcmp(a.params[0].w, b.params[0].w, a.n_weights * sizeof(float)),
	   "the same seed gives the same weights");
	for (size_t i = 0; i < w->n; i++) {
		lo = fminf(lo, w->w[i]);
		hi = fmaxf(hi, w->w[i]);
	}
	ok(lo >= -bound && hi <= bound && lo < -0.99f * bound && hi > 0.99f * bound,
	   "weights fill +-1/sqrt(fan_in)");
	ok(a.params[1].w[0] != a.params[0].w[0] && fabsf(a.params[3].w[0]) <= 1 / sqrtf(300),
	   "bias drawn from its own stream, bound by its fan_in");
	dlt_model_free(&b);
	c.train.seed = 6;
	ok_rc(dlt_model_init(&b, &c, dlt_backend_cpu(), MLP_IN, 10, 8), 0, "seed 6 builds");
	ok(memcmp(a.params[0].w, b.params[0].w, 64), "another seed, other weights");
	ok(dlt_model_forward(&a, 9, 0, 0) == NULL, "a batch above max_batch is refused");
	dlt_model_free(&a);
	dlt_model_free(&b);
}

static void test_errors(void)
{
	dlt_layer_cfg l[] = { layer(DLT_LAYER_DENSE, 8, 4), layer(DLT_LAYER_DROPOUT, 0, 5) };
	dlt_config c = config(l, 2);
	dlt_model m;
	ok_rc(dlt_model_init(&m, &c, dlt_backend_cpu(), VEC(4), 5, 2), DLT_EINPUT,
	      "wrong number of classes");
	ok_msg("test.yaml:5: the model ends with 8 features but the data has 5 classes",
	       "the message names the config line");
	c.n_layers = 0;
	ok_rc(dlt_model_init(&m, &c, dlt_backend_cpu(), VEC(4), 5, 2), DLT_EINPUT,
	      "no layers, wrong classes");
	ok_msg("test.yaml:3: the model ends with 4 features", "the message names the model");
	c.n_layers = 2;
	l[1].rate = 1.0f;
	ok_rc(dlt_model_init(&m, &c, dlt_backend_cpu(), VEC(4), 8, 2), DLT_EINPUT, "dropout rate 1");
	ok_msg("test.yaml:5: dropout rate", "the message names the line");
	l[1].rate = 0.5f;
	l[0].units = 0;
	ok_rc(dlt_model_init(&m, &c, dlt_backend_cpu(), VEC(4), 8, 2), DLT_EINPUT, "dense: 0");
}

/* A model whose params are w = {0.5, -1, 2} (a 1x2 dense and its bias). */
static void tiny(dlt_model *m, dlt_optim *o, dlt_optim_cfg oc)
{
	static dlt_layer_cfg l[1];
	static const float w0[3] = { 0.5f, -1.0f, 2.0f };
	dlt_config c;
	l[0] = dense(1);
	c = config(l, 1);
	dlt_model_init(m, &c, dlt_backend_cpu(), VEC(2), 1, 1);
	memcpy(m->params[0].w, w0, sizeof(w0));
	dlt_optim_init(o, &oc, m, 0, 0);
}

/* Two steps with gradients g1 = {0.1, -0.2, -0.1}, g2 = {-0.1, -0.2, 0.6}
 * (just one when want2 is NULL). */
static void check_steps(const char *what, dlt_optim_cfg oc, const double *want1,
			const double *want2)
{
	static const float g1[3] = { 0.1f, -0.2f, -0.1f }, g2[3] = { -0.1f, -0.2f, 0.6f };
	dlt_model m;
	dlt_optim o;
	int good = 1;
	tiny(&m, &o, oc);
	memcpy(m.params[0].g, g1, sizeof(g1));
	dlt_optim_step(&o, &m, oc.lr);
	for (int i = 0; i < 3 && want1; i++)
		good &= fabs(m.params[0].w[i] - want1[i]) < 1e-6;
	if (want2) {
		memcpy(m.params[0].g, g2, sizeof(g2));
		dlt_optim_step(&o, &m, oc.lr);
		for (int i = 0; i < 3; i++)
			good &= fabs(m.params[0].w[i] - want2[i]) < 1e-6;
	}
	if (!ok(good && o.step == (want2 ? 2 : 1), "%s", what))
		diag("got %.9g %.9g %.9g", m.params[0].w[0], m.params[0].w[1], m.params[0].w[2]);
	dlt_model_free(&m);
}

static void test_optim(void)
{
	dlt_optim_cfg sgd = { .kind = DLT_OPT_SGD, .lr = 0.1 };
	dlt_optim_cfg adam = { .kind = DLT_OPT_ADAM, .lr = 0.1, .beta1 = 0.9, .beta2 = 0.999,
			       .eps = 1e-8 };
	dlt_optim_cfg c;
	/* w - lr g */
	check_steps("sgd", sgd, (double[]){ 0.49, -0.98, 2.01 }, NULL);
	/* g + wd w = 0.105, ...: 0.5 - 0.0105 */
	c = sgd;
	c.weight_decay = 0.01;
	check_steps("sgd weight decay", c, (double[]){ 0.4895, -0.979, 2.008 }, NULL);
	/* buf = g1, w = 0.49; buf = 0.9 * 0.1 - 0.1 = -0.01, w = 0.49 + 0.001 */
	c = sgd;
	c.momentum = 0.9;
	check_steps("sgd momentum", c, (double[]){ 0.49, -0.98, 2.01 },
		    (double[]){ 0.491, -0.942, 1.959 });
	/* step g + 0.9 buf: 0.19, w = 0.481; buf = -0.01, step -0.109, w = 0.4919 */
	c.nesterov = 1;
	check_steps("sgd nesterov", c, (double[]){ 0.481, -0.962, 2.019 },
		    (double[]){ 0.4919, -0.9078, 1.9131 });
	c.weight_decay = 0.1;
	check_steps("sgd nesterov weight decay", c, NULL,
		    (double[]){ 0.4693915, -0.862783, 1.821261 });
	/* the first Adam step is lr * sign(g) (bias correction undoes the
	 * betas); the second: m = -0.001, v = 1.999e-5, m^ = -0.001 / 0.19,
	 * v^ = 0.01, w = 0.4 + 0.1 * 0.0052632 / 0.1 */
	check_steps("adam", adam, (double[]){ 0.4, -0.9, 2.1 },
		    (double[]){ 0.40526316736842, -0.80000001, 2.0376081248035804 });
	/* L2: g + 0.1 w turns the third gradient positive: w = 2 - 0.1 */
	c = adam;
	c.weight_decay = 0.1;
	check_steps("adam weight decay", c, (double[]){ 0.4, -0.9, 1.9 },
		    (double[]){ 0.3654394245410893, -0.8001027137942831, 1.8177643829229517 });
	/* decoupled: w (1 - lr wd) - lr sign(g) = 0.495 - 0.1 */
	c.kind = DLT_OPT_ADAMW;
	check_steps("adamw", c, (double[]){ 0.395, -0.89, 2.08 },
		    (double[]){ 0.39631316726842, -0.78110000995, 1.9968081249035805 });
}

static void test_schedules(void)
{
	dlt_optim_cfg o = { .kind = DLT_OPT_SGD, .lr = 0.1 };
	dlt_sched_cfg s = { .kind = DLT_SCHED_CONSTANT };
	ok_near(dlt_lr_at(&o, &s, 0, 100, 1000), 0.1, 1e-12, "constant");
	ok_near(dlt_lr_at(&o, &s, 999, 100, 1000), 0.1, 1e-12, "constant at the end");
	s.warmup = 10;
	ok_near(dlt_lr_at(&o, &s, 0, 100, 1000), 0.01, 1e-12, "warmup: lr/10 at step 0");
	ok_near(dlt_lr_at(&o, &s, 4, 100, 1000), 0.05, 1e-12, "warmup: lr/2 at step 4");
	ok_near(dlt_lr_at(&o, &s, 9, 100, 1000), 0.1, 1e-12, "warmup: lr at its last step");
	ok_near(dlt_lr_at(&o, &s, 10, 100, 1000), 0.1, 1e-12, "after warmup: lr");
	s = (dlt_sched_cfg){ .kind = DLT_SCHED_STEP, .step_every = 2, .gamma = 0.1 };
	ok_near(dlt_lr_at(&o, &s, 199, 100, 1000), 0.1, 1e-12, "step: epochs 0-1 at lr");
	ok_near(dlt_lr_at(&o, &s, 200, 100, 1000), 0.01, 1e-12, "step: epoch 2 at lr * gamma");
	ok_near(dlt_lr_at(&o, &s, 450, 100, 1000), 0.001, 1e-12, "step: epoch 4 at lr * gamma^2");
	s = (dlt_sched_cfg){ .kind = DLT_SCHED_COSINE, .warmup = 10, .min_lr = 0.001 };
	ok_near(dlt_lr_at(&o, &s, 5, 100, 110), 0.06, 1e-12, "cosine: warmup first");
	ok_near(dlt_lr_at(&o, &s, 10, 100, 110), 0.1, 1e-12, "cosine: lr after warmup");
	ok_near(dlt_lr_at(&o, &s, 35, 100, 110), 0.0855017856687341, 1e-12,
		"cosine: a quarter of the way");
	ok_near(dlt_lr_at(&o, &s, 60, 100, 110), 0.0505, 1e-12, "cosine: half way");
	ok_near(dlt_lr_at(&o, &s, 110, 100, 110), 0.001, 1e-12, "cosine: min_lr at the end");
	ok_near(dlt_lr_at(&o, &s, 500, 100, 110), 0.001, 1e-12, "cosine: min_lr after");
}

int main(void)
{
	dlt_rng_init(&rng, 99, 0);
	test_layers();
	test_image_layers();
	test_pool_after_relu();
	test_cnn_storage();
	test_mlp();
	test_init();
	test_errors();
	test_optim();
	test_schedules();
	/* last: its draws would move the others' data */
	test_conv_pool((dlt_shape){ 1, 8, 6 }, 4, DLT_FUSES_FORWARD | DLT_FUSES_BACKWARD);
	test_conv_pool((dlt_shape){ 1, 16, 16 }, 4, DLT_FUSES_FORWARD | DLT_FUSES_BACKWARD);
	/* rows of 14 windows: a run of 8 and one of 6 */
	test_conv_pool((dlt_shape){ 1, 4, 28 }, 3, DLT_FUSES_FORWARD | DLT_FUSES_BACKWARD);
	test_conv_pool_prec((dlt_shape){ 1, 4, 28 }, 3, DLT_FUSES_FORWARD | DLT_FUSES_BACKWARD,
			    "bf16");
	/* the GEMM's chunks (3 channels: 27 taps), each plane pooled as made */
	test_conv_pool((dlt_shape){ 3, 8, 6 }, 4, DLT_FUSES_FORWARD);
	test_conv_pool_prec((dlt_shape){ 3, 8, 6 }, 4, DLT_FUSES_FORWARD, "fp16");
	test_input_rounded("bf16");
	test_input_rounded("fp16");
	test_exact_ops("bf16");
	test_exact_ops("fp16");
	test_round_samples();
	/* Winograd's: with AVX2 and FMA, and the GEMM dlt's own */
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
	    dlt_cpu_gemm_kind() != DLT_GEMM_OPENBLAS) {
		test_conv_pool((dlt_shape){ 16, 6, 10 }, 16, DLT_FUSES_FORWARD);
		test_conv_pool_prec((dlt_shape){ 16, 6, 10 }, 16, DLT_FUSES_FORWARD, "fp16");
		/* bf16: Winograd's, or the GEMM's on bf16 dot products */
		test_conv_pool_prec((dlt_shape){ 16, 6, 10 }, 16, DLT_FUSES_FORWARD, "bf16");
	} else
		skip("conv + relu + maxpool as one op on Winograd's tiles: no Winograd here");
	test_seq_layers();
	return done_testing();
}
