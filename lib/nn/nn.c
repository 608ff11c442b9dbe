/* The model: the config's layers flattened into ops over tensors, buffers
 * planned once, forward and backward as two loops over the ops through
 * the backend's table (model.h describes the ops).
 *
 * Buffers.  Ops that change no value share their input's activations:
 * flatten (and its gradient), FORK, and an activation fused into the
 * dense or conv before it, or applied in place on a tensor that no other
 * op reads.  Such an activation's gradient follows from its output alone
 * (relu, leaky relu with slope >= 0, tanh, sigmoid), so the value before
 * it is never needed.  Everything else owns its buffers. */
#define _GNU_SOURCE	/* qsort_r */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/common/math.h"
#include "archive/archive.h"
#include "nn/model.h"

/* Parameter init draws from dlt_rng stream INIT_STREAM + param index of
 * the seed: a range of its own, apart from the loader's streams. */
#define INIT_STREAM 0x40000000u
#define MAX_OPS 4096

/* A DLT_EINPUT error "file:line: ...", or "file: ..." for a layer an
 * override added (line 0), as the config's own messages. */
static int cfg_error(const dlt_config *c, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int cfg_error(const dlt_config *c, int line, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (line > 0)
		return dlt_error(DLT_EINPUT, "%s:%d: %s", c->path ? c->path : "config", line, msg);
	return dlt_error(DLT_EINPUT, "%s: %s", c->path ? c->path : "config", msg);
}

static int act_of(int kind)
{
	switch (kind) {
	case DLT_LAYER_RELU:
		return DLT_ACT_RELU;
	case DLT_LAYER_LEAKY_RELU:
		return DLT_ACT_LEAKY_RELU;
	case DLT_LAYER_GELU:
		return DLT_ACT_GELU;	/* gelu: tanh is DLT_ACT_GELU_TANH (act_of_cfg) */
	case DLT_LAYER_TANH:
		return DLT_ACT_TANH;
	case DLT_LAYER_SIGMOID:
		return DLT_ACT_SIGMOID;
	default:
		return DLT_ACT_NONE;
	}
}

/* Whether an activation's gradient follows from its output alone. */
static int output_only(int act, float slope)
{
	switch (act) {
	case DLT_ACT_RELU:
	case DLT_ACT_TANH:
	case DLT_ACT_SIGMOID:
		return 1;
	case DLT_ACT_LEAKY_RELU:
		return slope >= 0.0f;
	default:
		return 0;
	}
}

/* Planning: ops and tensors appended as the config is walked. */
typedef struct planner {
	dlt_model *m;
	const dlt_config *c;
	size_t cap_ops, cap_t, cap_params, cap_bufs;
	int next_index;		/* config layers seen, flattened */
	const char *name;	/* of the layer being planned: its params' prefix */
} planner;

/* rows: positions a sample (a sequence's T), 1 for anything else */
static int new_tensor(planner *p, dlt_shape s, int rows)
{
	dlt_model *m = p->m;
	dlt_tensor *t;
	size_t n;
	if (!dlt_mul_ok((size_t)s.c, (size_t)s.h, &n) || !dlt_mul_ok(n, (size_t)s.w, &n) ||
	    !dlt_mul_ok(n, (size_t)rows, &n) || n > (1u << 30))
		return dlt_error(DLT_EINPUT, "a layer's output of %d x %d x %d is too large",
				 s.c, s.h, s.w);
	if (dlt_grow(&m->t, &p->cap_t, (size_t)m->n_t + 1, sizeof(*m->t)) < 0)
		return DLT_ENOMEM;
	t = &m->t[m->n_t];
	memset(t, 0, sizeof(*t));
	t->s = s;
	t->rows = rows;
	t->n = n;
	t->a_of = t->g_of = m->n_t;
	t->narrow_at = t->widen_at = -1;
	return m->n_t++;
}

static dlt_layer *new_op(planner *p, int kind, int index, int line, int in)
{
	dlt_model *m = p->m;
	dlt_layer *l;
	if (m->n_layers == MAX_OPS) {
		cfg_error(p->c, line, "the model has more than %d layers", MAX_OPS);
		return NULL;
	}
	if (dlt_grow(&m->layers, &p->cap_ops, (size_t)m->n_layers + 1, sizeof(*m->layers)) < 0)
		return NULL;
	l = &m->layers[m->n_layers++];
	memset(l, 0, sizeof(*l));
	l->kind = kind;
	l->index = index;
	l->line = line;
	l->in = l->out = l->in2 = in;
	l->w = l->b = l->rm = l->rv = l->w2 = l->b2 = -1;
	return l;
}

/* A param or buffer: named INDEX.ROLE, sized later by make_params. */
static int new_param(planner *p, int buffer, int index, const char *role, int ndim,
		     const int64_t *dims)
{
	dlt_model *m = p->m;
	dlt_param **arr = buffer ? &m->bufs : &m->params;
	int *n = buffer ? &m->n_bufs : &m->n_params;
	dlt_param *q;
	if (dlt_grow(arr, buffer ? &p->cap_bufs : &p->cap_params, (size_t)*n + 1, sizeof(**arr)) < 0)
		return DLT_ENOMEM;
	q = &(*arr)[*n];
	memset(q, 0, sizeof(*q));
	/* a named layer's params keep their names when layers are added */
	if (p->name && p->name[0])
		snprintf(q->name, sizeof(q->name), "%s.%s", p->name, role);
	else
		snprintf(q->name, sizeof(q->name), "%d.%s", index, role);
	q->ndim = ndim;
	q->n = 1;
	for (int d = 0; d < ndim; d++) {
		q->dims[d] = dims[d];
		q->n *= (size_t)dims[d];
	}
	return (*n)++;
}

/* Output size of a window sliding over n with padding p, kernel k
 * (dilated: span), stride s; < 1 when it does not fit. */
static int out_size(int n, int p, int span, int s)
{
	long long o = ((long long)n + 2LL * p - span) / s + 1;
	return (long long)n + 2LL * p < span ? 0 : (int)o;
}

static int plan_seq(planner *p, const dlt_layer_cfg *lc, int n, int *cur);

static int plan_conv(planner *p, const dlt_layer_cfg *lc, dlt_layer *l, dlt_shape in,
		     dlt_shape *out)
{
	dlt_conv *v = &l->conv;
	int64_t dims[4];
	*v = (dlt_conv){ .c = in.c, .h = in.h, .w = in.w, .k = lc->filters,
			 .kh = lc->kernel[0], .kw = lc->kernel[1], .sh = lc->stride[0],
			 .sw = lc->stride[1], .ph = lc->pad[0], .pw = lc->pad[1],
			 .dh = lc->dilation[0], .dw = lc->dilation[1], .groups = lc->groups };
	if (v->groups < 1 || in.c % v->groups || v->k % v->groups)
		return cfg_error(p->c, lc->line, "conv2d: groups %d does not divide %d input and "
				 "%d output channels", v->groups, in.c, v->k);
	v->oh = out_size(in.h, v->ph, v->dh * (v->kh - 1) + 1, v->sh);
	v->ow = out_size(in.w, v->pw, v->dw * (v->kw - 1) + 1, v->sw);
	if (v->oh < 1 || v->ow < 1)
		return cfg_error(p->c, lc->line, "conv2d: a %dx%d kernel does not fit a %dx%d "
				 "input", v->kh, v->kw, in.h, in.w);
	*out = (dlt_shape){ v->k, v->oh, v->ow };
	dims[0] = v->k;
	dims[1] = in.c / v->groups;
	dims[2] = v->kh;
	dims[3] = v->kw;
	if ((l->w = new_param(p, 0, l->index, "w", 4, dims)) < 0)
		return l->w;
	if (lc->bias && (l->b = new_param(p, 0, l->index, "b", 1, dims)) < 0)
		return l->b;
	return 0;
}

/* Max pooling of a ReLU's output (the ReLU fused into a conv, say) does
 * the ReLU's backward too (dlt_pool.relu), and the ReLU passes its
 * gradient on as it is: its input's gradient is its output's, the buffer
 * the pool writes, one pass over the model's largest tensors fewer.  Not
 * where that would share the model input's gradient, which is kept
 * apart. */
static void pool_after_relu(dlt_model *m, dlt_layer *l)
{
	dlt_layer *relu = m->n_layers > 1 ? l - 1 : NULL;
	int owner;

	if (!relu || relu->kind != DLT_LAYER_RELU || relu->out != l->in)
		return;
	for (owner = relu->in; m->t[owner].g_of != owner; owner = m->t[owner].g_of)
		;
	if (owner == 0)
		return;
	m->t[owner].g_of = relu->out;
	relu->by_pool = 1;
	l->pool.relu = 1;
}

/* A conv whose ReLU is fused into it and the max pool after that, as one
 * op where the backend has one for them (conv_pool_fuses: the pool's
 * fused says which ways): the conv's output, never written, is not read
 * either. */
static void pool_by_conv(dlt_model *m, dlt_layer *l)
{
	dlt_layer *relu = l - 1, *conv = m->n_layers > 2 ? l - 2 : NULL;
	int ways;

	if (!l->pool.relu || !relu->fused || !conv || conv->kind != DLT_LAYER_CONV2D ||
	    conv->out != relu->in || !m->be->conv_pool_fuses)
		return;
	ways = m->be->conv_pool_fuses(m->prec, &conv->conv, &l->pool);
	if (!(ways & DLT_FUSES_FORWARD))
		return;
	conv->pool_op = (int)(l - m->layers);
	l->fused = ways;
}

/* Whether op l's input gradient is wanted: the model input's only when
 * asked for */
static int wants_dx(const dlt_model *m, const dlt_layer *l)
{
	return m->t[l->in].g_of != 0 || m->want_input_grad;
}

/* Whether conv l does the backward of the pool it does too: where the
 * backend has it and the conv makes no dx */
static int pools_back(const dlt_model *m, const dlt_layer *l)
{
	return l->pool_op && (m->layers[l->pool_op].fused & DLT_FUSES_BACKWARD) &&
	       !wants_dx(m, l);
}

static int plan_pool(planner *p, const dlt_layer_cfg *lc, dlt_layer *l, dlt_shape in,
		     dlt_shape *out)
{
	dlt_pool *v = &l->pool;
	*v = (dlt_pool){ .c = in.c, .h = in.h, .w = in.w, .oh = 1, .ow = 1, .kh = in.h,
			 .kw = in.w, .sh = 1, .sw = 1 };
	if (lc->kind != DLT_LAYER_GLOBAL_AVGPOOL) {
		v->kh = lc->kernel[0];
		v->kw = lc->kernel[1];
		v->sh = lc->stride[0];
		v->sw = lc->stride[1];
		v->ph = lc->pad[0];
		v->pw = lc->pad[1];
		v->oh = out_size(in.h, v->ph, v->kh, v->sh);
		v->ow = out_size(in.w, v->pw, v->kw, v->sw);
		if (v->oh < 1 || v->ow < 1)
			return cfg_error(p->c, lc->line, "a %dx%d pool does not fit a %dx%d input",
					 v->kh, v->kw, in.h, in.w);
	}
	if (lc->kind == DLT_LAYER_MAXPOOL) {
		pool_after_relu(p->m, l);
		pool_by_conv(p->m, l);
	}
	*out = (dlt_shape){ in.c, v->oh, v->ow };
	return 0;
}

static int plan_batchnorm(planner *p, const dlt_layer_cfg *lc, dlt_layer *l, dlt_shape in)
{
	int64_t dims[1] = { in.c };
	l->momentum = lc->momentum;
	l->eps = lc->eps;
	if ((l->w = new_param(p, 0, l->index, "w", 1, dims)) < 0 ||
	    (l->b = new_param(p, 0, l->index, "b", 1, dims)) < 0 ||
	    (l->rm = new_param(p, 1, l->index, "running_mean", 1, dims)) < 0 ||
	    (l->rv = new_param(p, 1, l->index, "running_var", 1, dims)) < 0)
		return DLT_ENOMEM;
	return 0;
}

/* An activation: fused into the dense or conv that made its input, else
 * in place where its input's activations are its own and read by nothing
 * else, else into a buffer of its own. */
static int plan_act(planner *p, const dlt_layer_cfg *lc, dlt_layer *l, int *cur)
{
	dlt_model *m = p->m;
	dlt_layer *prev = m->n_layers > 1 && l[-1].out == *cur ? l - 1 : NULL;
	int out, inplace;
	l->act = lc->kind == DLT_LAYER_GELU && lc->tanh ? DLT_ACT_GELU_TANH : act_of(lc->kind);
	l->slope = lc->kind == DLT_LAYER_LEAKY_RELU ? lc->slope : 0.0f;
	/* not over the model's input, over a tensor others read, or over
	 * another activation's output, which that one's gradient needs */
	inplace = output_only(l->act, l->slope) && *cur != 0 && m->t[*cur].a_of == *cur &&
		  prev && act_of(prev->kind) == DLT_ACT_NONE;
	if ((out = new_tensor(p, m->t[*cur].s, m->t[*cur].rows)) < 0)
		return out;
	if (inplace) {
		m->t[out].a_of = *cur;
		if (prev && prev->out == *cur && prev->act == DLT_ACT_NONE &&
		    (prev->kind == DLT_LAYER_DENSE || prev->kind == DLT_LAYER_CONV2D)) {
			l->fused = 1;
			prev->act = l->act;
			prev->slope = l->slope;
		}
	}
	l->out = *cur = out;
	return 0;
}

static int plan_residual(planner *p, const dlt_layer_cfg *lc, int index, int *cur)
{
	dlt_model *m = p->m;
	int in = *cur, body, shortcut, out, fork;
	dlt_layer *l;
	dlt_shape s = m->t[in].s;

	if (!(l = new_op(p, DLT_OP_FORK, index, lc->line, in)))
		return DLT_ENOMEM;
	fork = (int)(l - m->layers);
	if ((body = new_tensor(p, s, m->t[in].rows)) < 0 ||
	    (shortcut = new_tensor(p, s, m->t[in].rows)) < 0)
		return body < 0 ? body : shortcut;
	m->t[body].a_of = m->t[shortcut].a_of = m->t[in].a_of;
	m->layers[fork].out = body;
	m->layers[fork].in2 = shortcut;
	DLT_TRY_RC(plan_seq(p, lc->body, lc->n_body, &body));
	/* GPT-2's init scales the projection that ends the block */
	for (int i = m->n_layers - 1; i > fork; i--)
		if (m->layers[i].kind == DLT_LAYER_DENSE || m->layers[i].kind == DLT_LAYER_ATTENTION) {
			m->layers[i].ends_residual = m->layers[i].kind == DLT_LAYER_DENSE;
			break;
		}
	DLT_TRY_RC(plan_seq(p, lc->shortcut, lc->n_shortcut, &shortcut));
	if (m->t[body].s.c != m->t[shortcut].s.c || m->t[body].s.h != m->t[shortcut].s.h ||
	    m->t[body].s.w != m->t[shortcut].s.w)
		return cfg_error(p->c, lc->line, "residual: the layers give %dx%dx%d but the "
				 "shortcut %dx%dx%d", m->t[body].s.c, m->t[body].s.h,
				 m->t[body].s.w, m->t[shortcut].s.c, m->t[shortcut].s.h,
				 m->t[shortcut].s.w);
	if ((out = new_tensor(p, m->t[body].s, m->t[body].rows)) < 0)
		return out;
	if (!(l = new_op(p, DLT_OP_ADD, index, lc->line, body)))
		return DLT_ENOMEM;
	l->in2 = shortcut;
	l->out = out;
	/* the sum passes its gradient to both inputs unchanged: they share
	 * it (through whatever tensor already owns theirs) */
	m->t[m->t[body].g_of].g_of = out;
	m->t[m->t[shortcut].g_of].g_of = out;
	*cur = out;
	return 0;
}

/* dense: {tie: NAME}: the weights of the embedding of that name, [V, C]
 * as a dense's [units, in]: a head that shares them (GPT-2's) */
static int plan_tie(planner *p, const dlt_layer_cfg *lc, dlt_layer *l, int64_t in)
{
	dlt_model *m = p->m;
	for (int i = 0; i < m->n_layers - 1; i++) {
		const dlt_layer *e = &m->layers[i];
		if (strcmp(e->name, lc->tie))
			continue;
		if (e->kind != DLT_LAYER_EMBEDDING)
			return cfg_error(p->c, lc->line, "dense: tie: '%s' is not an embedding",
					 lc->tie);
		if (m->params[e->w].dims[1] != in)
			return cfg_error(p->c, lc->line, "dense: tie: '%s' is [%lld, %lld], but this "
					 "layer's input has %lld features", lc->tie,
					 (long long)m->params[e->w].dims[0],
					 (long long)m->params[e->w].dims[1], (long long)in);
		l->w = e->w;
		l->tied = 1;
		m->layers[i].shared = 1;
		return 0;
	}
	return cfg_error(p->c, lc->line, "dense: tie: no embedding named '%s' before it", lc->tie);
}

/* The layers of sequences [T, C]: embedding (token ids to vectors; the
 * first layer, its input T ids a sample), learned positions, layer
 * normalisation and self-attention, all per position. */
static int plan_sequence(planner *p, const dlt_layer_cfg *lc, dlt_layer *l, int cur,
			 dlt_shape *os, int *rows)
{
	dlt_model *m = p->m;
	const dlt_tensor *t = &m->t[cur];
	int C = t->s.c, index = l->index;
	int64_t dims[2];

	if (lc->kind == DLT_LAYER_EMBEDDING) {
		if (cur != 0 || m->n_layers != 1)
			return cfg_error(p->c, lc->line, "embedding must be the model's first layer "
					 "(it reads the token ids)");
		*rows = (int)t->n;	/* the input: T ids */
		*os = (dlt_shape){ lc->dim, 1, 1 };
		dims[0] = lc->vocab;
		dims[1] = lc->dim;
		return (l->w = new_param(p, 0, index, "w", 2, dims)) < 0 ? l->w : 0;
	}
	if (t->rows < 2 && lc->kind != DLT_LAYER_LAYERNORM)
		return cfg_error(p->c, lc->line, "%s works on sequences [T, C] (after an "
				 "embedding)", lc->kind == DLT_LAYER_POSITIONAL ? "positional"
				 : "attention");
	if (t->s.h != 1 || t->s.w != 1)
		return cfg_error(p->c, lc->line, "a sequence's positions must be vectors");
	if (t->rows < 2)
		C = (int)t->n;
	if (cur == 0)	/* its backward always writes the input's gradient */
		return cfg_error(p->c, lc->line, "layernorm cannot be the model's first layer");
	dims[0] = C;
	switch (lc->kind) {
	case DLT_LAYER_POSITIONAL:
		if (t->rows > lc->max)
			return cfg_error(p->c, lc->line, "positional: max %d, but sequences have %d "
					 "positions (train.context)", lc->max, t->rows);
		dims[0] = lc->max;
		dims[1] = C;
		return (l->w = new_param(p, 0, index, "w", 2, dims)) < 0 ? l->w : 0;
	case DLT_LAYER_LAYERNORM:
		l->eps = lc->eps;
		if ((l->w = new_param(p, 0, index, "w", 1, dims)) < 0 ||
		    (l->b = new_param(p, 0, index, "b", 1, dims)) < 0)
			return DLT_ENOMEM;
		return 0;
	default:	/* attention: qkv projection [3C, C], output projection [C, C] */
		if (lc->heads < 1 || C % lc->heads)
			return cfg_error(p->c, lc->line, "attention: %d heads do not divide %d "
					 "features", lc->heads, C);
		l->rate = lc->rate;
		l->heads = lc->heads;
		l->causal = lc->causal;
		dims[0] = 3 * (int64_t)C;
		dims[1] = C;
		if ((l->w = new_param(p, 0, index, "qkv.w", 2, dims)) < 0 ||
		    (l->b = new_param(p, 0, index, "qkv.b", 1, dims)) < 0)
			return DLT_ENOMEM;
		dims[0] = C;
		if ((l->w2 = new_param(p, 0, index, "proj.w", 2, dims)) < 0 ||
		    (l->b2 = new_param(p, 0, index, "proj.b", 1, dims)) < 0)
			return DLT_ENOMEM;
		return 0;
	}
}

static int plan_layer(planner *p, const dlt_layer_cfg *lc, int *cur)
{
	dlt_model *m = p->m;
	int index = p->next_index++, out, rows = m->t[*cur].rows;
	dlt_shape in = m->t[*cur].s, os = in;
	dlt_layer *l;
	int64_t dims[2];

	if (lc->kind == DLT_LAYER_RESIDUAL)
		return plan_residual(p, lc, index, cur);
	if (!(l = new_op(p, lc->kind, index, lc->line, *cur)))
		return DLT_ENOMEM;
	snprintf(l->name, sizeof(l->name), "%s", lc->name);
	p->name = lc->name;
	switch (lc->kind) {
	case DLT_LAYER_DENSE:
		/* a sequence's: per position, over its last dimension */
		dims[1] = rows > 1 ? in.c : (int64_t)m->t[*cur].n;
		if (lc->tie[0]) {
			DLT_TRY_RC(plan_tie(p, lc, l, dims[1]));
			os = (dlt_shape){ (int)m->params[l->w].dims[0], 1, 1 };
			dims[0] = os.c;
		} else {
			if (lc->units < 1)
				return cfg_error(p->c, lc->line, "dense needs at least 1 unit");
			os = (dlt_shape){ lc->units, 1, 1 };
			dims[0] = lc->units;
			if ((l->w = new_param(p, 0, index, "w", 2, dims)) < 0)
				return DLT_ENOMEM;
		}
		if (lc->bias && (l->b = new_param(p, 0, index, "b", 1, dims)) < 0)
			return DLT_ENOMEM;
		break;
	case DLT_LAYER_EMBEDDING:
	case DLT_LAYER_POSITIONAL:
	case DLT_LAYER_LAYERNORM:
	case DLT_LAYER_ATTENTION:
		DLT_TRY_RC(plan_sequence(p, lc, l, *cur, &os, &rows));
		m->n_attention += lc->kind == DLT_LAYER_ATTENTION;
		break;
	case DLT_LAYER_CONV2D:
		DLT_TRY_RC(plan_conv(p, lc, l, in, &os));
		break;
	case DLT_LAYER_MAXPOOL:
	case DLT_LAYER_AVGPOOL:
	case DLT_LAYER_GLOBAL_AVGPOOL:
		DLT_TRY_RC(plan_pool(p, lc, l, in, &os));
		break;
	case DLT_LAYER_BATCHNORM:
		DLT_TRY_RC(plan_batchnorm(p, lc, l, in));
		break;
	case DLT_LAYER_DROPOUT:
		if (!(lc->rate >= 0.0f && lc->rate < 1.0f))
			return cfg_error(p->c, lc->line, "dropout rate %g is not in [0, 1)",
					 lc->rate);
		l->rate = lc->rate;
		break;
	case DLT_LAYER_FLATTEN:
		if ((out = new_tensor(p, (dlt_shape){ (int)m->t[*cur].n, 1, 1 }, 1)) < 0)
			return out;
		m->t[out].a_of = m->t[*cur].a_of;
		m->t[out].g_of = m->t[*cur].g_of;
		l->out = *cur = out;
		return 0;
	default:
		if (act_of(lc->kind) == DLT_ACT_NONE)
			return cfg_error(p->c, lc->line, "layer kind %d is not supported", lc->kind);
		return plan_act(p, lc, l, cur);
	}
	if ((out = new_tensor(p, os, rows)) < 0)
		return out;
	/* added positions pass the gradient on unchanged, as a sum does */
	if (lc->kind == DLT_LAYER_POSITIONAL)
		m->t[m->t[*cur].g_of].g_of = out;
	m->layers[m->n_layers - 1].out = *cur = out;
	return 0;
}

static int plan_seq(planner *p, const dlt_layer_cfg *lc, int n, int *cur)
{
	for (int i = 0; i < n; i++)
		DLT_TRY_RC(plan_layer(p, &lc[i], cur));
	return 0;
}

static void init_uniform(float *p, size_t n, float bound, uint64_t seed, int index)
{
	dlt_rng r;
	dlt_rng_init(&r, seed, INIT_STREAM + (uint64_t)index);
	for (size_t i = 0; i < n; i++)
		p[i] = bound * (2.0f * dlt_rng_uniform(&r) - 1.0f);
}

/* N(0, std^2), from the param's own stream, as init_uniform */
static void init_normal(float *p, size_t n, float std, uint64_t seed, int index)
{
	dlt_rng_normals(p, n, std, seed, INIT_STREAM + (uint64_t)index);
}

static void fill(float *p, size_t n, float v)
{
	for (size_t i = 0; i < n; i++)
		p[i] = v;
}

/* The sequence layers' init, and with train.init: gpt2 GPT-2's for
 * every layer: weights N(0, 0.02), biases 0, and the projections that end
 * a residual block (attention's output, a block's last dense) N(0, 0.02 /
 * sqrt(2 L)) for L attention layers.  Otherwise PyTorch's defaults:
 * embeddings N(0, 1), layernorm 1 and 0, attention's projections as
 * Linear's.  Returns whether it initialised l. */
static int init_sequence(dlt_model *m, const dlt_layer *l)
{
	int seq = l->kind == DLT_LAYER_EMBEDDING || l->kind == DLT_LAYER_POSITIONAL ||
		  l->kind == DLT_LAYER_LAYERNORM || l->kind == DLT_LAYER_ATTENTION;
	const int params[4] = { l->w, l->b, l->w2, l->b2 };
	float std = 0.02f;

	if (!seq && !(m->init_gpt2 && (l->kind == DLT_LAYER_DENSE || l->kind == DLT_LAYER_CONV2D)))
		return 0;
	if (l->kind == DLT_LAYER_LAYERNORM) {
		fill(m->params[l->w].w, m->params[l->w].n, 1.0f);
		fill(m->params[l->b].w, m->params[l->b].n, 0.0f);
		return 1;
	}
	if (!m->init_gpt2) {
		if (l->kind != DLT_LAYER_ATTENTION) {
			init_normal(m->params[l->w].w, m->params[l->w].n, 1.0f, m->seed, l->w);
			return 1;
		}
		/* both projections take C inputs, as Linear(C, ...) */
		float bound = 1.0f / sqrtf((float)m->params[l->w].dims[1]);
		for (int k = 0; k < 4; k++)
			init_uniform(m->params[params[k]].w, m->params[params[k]].n, bound, m->seed,
				     params[k]);
		return 1;
	}
	for (int k = 0; k < 4; k++) {
		int q = params[k];
		if (q < 0)
			continue;
		if (m->params[q].ndim == 1) {
			fill(m->params[q].w, m->params[q].n, 0.0f);
			continue;
		}
		std = 0.02f;
		if ((k == 2 && l->kind == DLT_LAYER_ATTENTION) || l->ends_residual)
			std = 0.02f / sqrtf(2.0f * (float)(m->n_attention ? m->n_attention : 1));
		init_normal(m->params[q].w, m->params[q].n, std, m->seed, q);
	}
	return 1;
}

/* Every param's w (and g) is a slice of one block, in order, so the
 * optimiser and the all-reduce can treat them as one array; buffers are
 * one block too.  The host blocks are made here; make_buffers makes the
 * backend's. */
static int make_params(dlt_model *m)
{
	size_t off = 0, n_bufs = 0;
	for (int k = 0; k < m->n_params; k++)
		if (__builtin_add_overflow(m->n_weights, m->params[k].n, &m->n_weights) ||
		    m->n_weights > (SIZE_MAX >> 3))
			return dlt_error(DLT_ENOMEM, "the model has too many parameters");
	for (int k = 0; k < m->n_bufs; k++)
		n_bufs += m->bufs[k].n;
	if (m->n_params) {
		float *w = dlt_zalloc_aligned(m->n_weights * sizeof(float));
		float *g = w ? dlt_zalloc_aligned(m->n_weights * sizeof(float)) : NULL;
		if (!g) {
			dlt_free_aligned(w);
			return DLT_ENOMEM;
		}
		for (int k = 0; k < m->n_params; k++) {
			m->params[k].w = w + off;
			m->params[k].g = g + off;
			m->params[k].off = off;
			off += m->params[k].n;
		}
	}
	if (m->n_bufs) {
		float *b = dlt_malloc_aligned(n_bufs * sizeof(float));
		if (!b)
			return DLT_ENOMEM;
		off = 0;
		for (int k = 0; k < m->n_bufs; k++) {
			m->bufs[k].w = b + off;
			m->bufs[k].off = off;
			off += m->bufs[k].n;
		}
	}
	/* PyTorch's Linear and Conv2d: weights and bias uniform in
	 * +-1/sqrt(fan_in); BatchNorm: gamma 1, beta 0, running var 1 */
	for (int i = 0; i < m->n_layers; i++) {
		const dlt_layer *l = &m->layers[i];
		float bound;
		if (l->tied)
			continue;	/* the embedding's */
		if (init_sequence(m, l))
			continue;
		if (l->kind == DLT_LAYER_BATCHNORM) {
			fill(m->params[l->w].w, m->params[l->w].n, 1.0f);
			fill(m->params[l->b].w, m->params[l->b].n, 0.0f);
			fill(m->bufs[l->rm].w, m->bufs[l->rm].n, 0.0f);
			fill(m->bufs[l->rv].w, m->bufs[l->rv].n, 1.0f);
			continue;
		}
		if (l->w < 0)
			continue;
		bound = 1.0f / sqrtf((float)(m->params[l->w].n / m->params[l->w].dims[0]));
		init_uniform(m->params[l->w].w, m->params[l->w].n, bound, m->seed, l->w);
		if (l->b >= 0)
			init_uniform(m->params[l->b].w, m->params[l->b].n, bound, m->seed, l->b);
	}
	return 0;
}

/* n elements of size bytes in the backend's memory, zeroed. */
static void *dev_alloc(const dlt_model *m, size_t n, size_t size)
{
	void *p;
	if (!dlt_mul_ok(n, size, &n)) {
		dlt_error(DLT_ENOMEM, "%zu values of %zu bytes are too many", n, size);
		return NULL;
	}
	if (!(p = m->be->alloc(n ? n : 1)))
		dlt_error(DLT_ENOMEM, "out of %s memory for %zu bytes", m->be->name, n);
	return p;
}

static void *alloc_rows(const dlt_model *m, int rows, size_t features, size_t size)
{
	size_t n;
	if (!dlt_mul_ok((size_t)rows, features, &n)) {
		dlt_error(DLT_ENOMEM, "a batch of %d x %zu values is too large", rows, features);
		return NULL;
	}
	return dev_alloc(m, n, size);
}

/* The backend's copy of the weights, gradients and buffers: the host
 * blocks themselves on a host backend. */
static int make_dev_params(dlt_model *m)
{
	size_t n_bufs = 0;
	for (int k = 0; k < m->n_bufs; k++)
		n_bufs += m->bufs[k].n;
	if (m->be->host) {
		m->dev_w = m->n_params ? m->params[0].w : NULL;
		m->dev_g = m->n_params ? m->params[0].g : NULL;
		m->dev_bufs = m->n_bufs ? m->bufs[0].w : NULL;
		return 0;
	}
	if ((m->n_params && (!(m->dev_w = dev_alloc(m, m->n_weights, sizeof(float))) ||
			     !(m->dev_g = dev_alloc(m, m->n_weights, sizeof(float))))) ||
	    (m->n_bufs && !(m->dev_bufs = dev_alloc(m, n_bufs, sizeof(float)))))
		return DLT_ENOMEM;
	dlt_model_push(m);
	return 0;
}
static int root(const dlt_model *m, int i, int grad)
{
	while ((grad ? m->t[i].g_of : m->t[i].a_of) != i)
		i = grad ? m->t[i].g_of : m->t[i].a_of;
	return i;
}

/* Whether the model can fit in the machine's memory at all.  Linux
 * overcommits: a model larger than the memory would be allocated, then
 * killed by the kernel without a word as its pages are touched.  The
 * params count four times (w, g and up to two optimiser moments); on a
 * host backend the activations and their gradients count too, once for
 * each tensor that owns its memory. */
static int check_memory(const dlt_model *m)
{
	double need = 0, have = dlt_mem_total();
	for (int k = 0; k < m->n_params; k++)
		need += 4.0 * (double)m->params[k].n;
	for (int k = 0; k < m->n_bufs; k++)
		need += (double)m->bufs[k].n;
	for (int i = 0; m->be->host && i < m->n_t; i++)
		need += (double)m->max_batch * (double)m->t[i].n *
			((root(m, i, 0) == i) + (root(m, i, 1) == i));
	need *= sizeof(float);
	if (have > 0 && need > have)
		return dlt_error(DLT_ENOMEM, "out of memory: the model needs %.0f MiB for a batch "
				 "of %d, the machine has %.0f MiB", need / (1 << 20), m->max_batch,
				 have / (1 << 20));
	return 0;
}

/* The life of a buffer in the model's pool (its activations that
 * backward does not keep, its gradients, attention's scratch), in steps
 * of one step's time: forward's op i is i, the loss n_layers, backward's
 * op i 2 n_layers - i.  Two spans: a remade activation lives in forward
 * and again in backward. */
typedef struct buf_life {
	int lo, hi, lo2, hi2;	/* spans; lo > hi: none */
	int slot;		/* the one whose memory it takes (itself: own) */
	size_t size, off;	/* floats, a multiple of POOL_ALIGN */
	size_t load;		/* pack_lives: the floats of the larger lives it meets */
} buf_life;

/* Where an output remade in 16 bits (dlt_tensor.half_pooled) is: a life
 * of its own in the pool, or the block of its gradient (its own, not
 * shared) where its reader is a dense or an attention (dlt_op_rounds),
 * which writes that gradient only after its weights' gradient has read
 * the output, and its own op's backward does not read it (an
 * activation's reader writes its gradient as it reads) */
enum { HALF_OWN_LIFE = 1, HALF_IN_GRADIENT };

/* 256 bytes: what a GPU allocation is aligned to */
#define POOL_ALIGN 64

static buf_life no_life(size_t floats, int slot)
{
	return (buf_life){ .lo = INT_MAX, .hi = -1, .lo2 = INT_MAX, .hi2 = -1, .slot = slot,
			   .size = (floats + POOL_ALIGN - 1) & ~(size_t)(POOL_ALIGN - 1) };
}

static void touch(buf_life *g, int r, int i)
{
	if (i < g[r].lo)
		g[r].lo = i;
	if (i > g[r].hi)
		g[r].hi = i;
}

static int spans_meet(int a, int b, int c, int d)
{
	return a <= b && c <= d && a <= d && c <= b;
}

static int lives_meet(const buf_life *x, const buf_life *y)
{
	return spans_meet(x->lo, x->hi, y->lo, y->hi) || spans_meet(x->lo, x->hi, y->lo2, y->hi2) ||
	       spans_meet(x->lo2, x->hi2, y->lo, y->hi) ||
	       spans_meet(x->lo2, x->hi2, y->lo2, y->hi2);
}

static int by_size(const void *a, const void *b, void *ctx)
{
	const buf_life *g = ctx;
	int x = *(const int *)a, y = *(const int *)b;
	if (g[x].size != g[y].size)
		return g[x].size < g[y].size ? 1 : -1;
	return x - y;
}

static int by_off(const void *a, const void *b, void *ctx)
{
	const buf_life *g = ctx;
	size_t x = g[*(const int *)a].off, y = g[*(const int *)b].off;
	return x < y ? -1 : x > y;
}

/* Largest first; of lives as large, the most hemmed in by larger ones
 * first (they have the fewest places left), then the earliest */
static int by_load(const void *a, const void *b, void *ctx)
{
	const buf_life *g = ctx;
	int x = *(const int *)a, y = *(const int *)b;
	if (g[x].size != g[y].size)
		return g[x].size < g[y].size ? 1 : -1;
	if (g[x].load != g[y].load)
		return g[x].load < g[y].load ? 1 : -1;
	if (g[x].lo != g[y].lo)
		return g[x].lo < g[y].lo ? -1 : 1;
	return x - y;
}

/* Offsets in one block for the n lives of order[] (live: room for n):
 * greedy in the order cmp gives, each at the lowest offset that no life
 * meeting it in time takes.  *total: the block's floats. */
static void pack_in_order(buf_life *g, int *order, int n, int *live, size_t *total,
			  int (*cmp)(const void *, const void *, void *))
{
	*total = 0;
	qsort_r(order, (size_t)n, sizeof(int), cmp, g);
	for (int k = 0; k < n; k++) {
		buf_life *s = &g[order[k]];
		int nl = 0;
		size_t at = 0;
		for (int j = 0; j < k; j++)
			if (lives_meet(&g[order[j]], s))
				live[nl++] = order[j];
		qsort_r(live, (size_t)nl, sizeof(int), by_off, g);
		for (int j = 0; j < nl; j++) {
			const buf_life *o = &g[live[j]];
			if (at + s->size <= o->off)
				break;
			if (o->off + o->size > at)
				at = o->off + o->size;
		}
		s->off = at;
		if (at + s->size > *total)
			*total = at + s->size;
	}
}

/* pack_in_order largest first (by_size), and again with the lives as
 * large that larger ones hem in first (by_load), which finds a block
 * as small as the busiest step where the first leaves gaps (a GPT's
 * residual gradients, each across a block's backward, beside its MLP's
 * widest gradient): the smaller of the two.  Out of memory for the
 * second: the first. */
static void pack_lives(buf_life *g, int *order, int n, int *live, size_t *total)
{
	size_t *first = dlt_malloc((size_t)(n ? n : 1) * sizeof(size_t)), second;
	int *again = dlt_malloc((size_t)(n ? n : 1) * sizeof(int));
	pack_in_order(g, order, n, live, total, by_size);
	for (int k = 0; first && again && k < n; k++) {
		buf_life *s = &g[order[k]];
		first[k] = s->off;
		again[k] = order[k];
		s->load = 0;
		for (int j = 0; j < n; j++)
			if (g[order[j]].size > s->size && lives_meet(&g[order[j]], s))
				s->load += g[order[j]].size;
	}
	if (first && again) {
		pack_in_order(g, again, n, live, &second, by_load);
		if (second < *total)
			*total = second;
		else
			for (int k = 0; k < n; k++)
				g[order[k]].off = first[k];
	}
	free(first);
	free(again);
}

/* The gradients' lives, g[i] of tensor i's owner: written by the op that
 * reads the tensor (the highest index), read by the op that made it (the
 * lowest); the loss writes the logits'.  An activation's dx may
 * overwrite its dy in place, element by element, when dy's life ends
 * there: the two are one slot.  The input's, read after backward
 * (dlt_model_input_grad) when the next step may have run, and any that
 * no op reads, live for good.  Owners that take a slot of their own go
 * to order[], *n of them. */
static void plan_grads(const dlt_model *m, buf_life *g, int *order, int *n)
{
	const int end = 2 * m->n_layers;
	for (int i = 0; i < m->n_t; i++)
		g[i] = no_life((size_t)m->max_batch * m->t[i].n, i);
	for (int i = 0; i < m->n_layers; i++) {
		const dlt_layer *l = &m->layers[i];
		touch(g, m->t[l->in].g_of, i);
		touch(g, m->t[l->out].g_of, i);
		touch(g, m->t[l->in2].g_of, i);
	}
	/* a conv that pools backward reads the pool's gradient */
	for (int i = 0; i < m->n_layers; i++)
		if (m->layers[i].pool_op)
			touch(g, m->t[m->layers[m->layers[i].pool_op].out].g_of, i);
	touch(g, m->t[m->n_t - 1].g_of, m->n_layers);
	for (int i = m->n_layers - 1; i >= 0; i--) {
		const dlt_layer *l = &m->layers[i];
		int a = m->t[l->out].g_of, b = m->t[l->in].g_of;
		while (g[a].slot != a)
			a = g[a].slot;
		if (act_of(l->kind) != DLT_ACT_NONE && a != b && g[a].lo == i && g[b].hi == i &&
		    g[a].size == g[b].size && b != 0) {
			g[b].slot = a;
			g[a].lo = g[b].lo;
		}
	}
	for (int i = 0; i < m->n_t; i++) {
		int lo = g[i].lo, hi = g[i].hi;
		if (m->t[i].g_of != i || g[i].slot != i)
			continue;
		/* backward runs ops from hi down to lo */
		g[i].lo = i == m->t[0].g_of || hi < 0 ? 0 : end - hi;
		g[i].hi = i == m->t[0].g_of || hi < 0 ? end : end - lo;
		order[(*n)++] = i;
	}
}

/* Whether op l's backward reads the activations of its input and of
 * its output */
static void backward_reads(const dlt_layer *l, int *in, int *out)
{
	switch (l->kind) {
	case DLT_LAYER_DENSE:
	case DLT_LAYER_EMBEDDING:
	case DLT_LAYER_LAYERNORM:
	case DLT_LAYER_ATTENTION:
	case DLT_LAYER_CONV2D:
	case DLT_LAYER_BATCHNORM:
		*in = 1;
		*out = 0;
		return;
	case DLT_LAYER_POSITIONAL:
	case DLT_LAYER_MAXPOOL:
	case DLT_LAYER_AVGPOOL:
	case DLT_LAYER_GLOBAL_AVGPOOL:
	case DLT_LAYER_DROPOUT:
	case DLT_LAYER_FLATTEN:
	case DLT_OP_ADD:
	case DLT_OP_FORK:
		*in = *out = 0;
		return;
	default:	/* an activation: act_backward(x, y), one of them; a ReLU
			 * the max pool after it does the backward of reads
			 * neither (the pool's arg is -1 where its gradient is 0) */
		*out = !l->by_pool && dlt_act_backward_reads_y(act_of(l->kind));
		*in = !l->by_pool && !*out;
	}
}

/* Whether op l's backward can read the activations of its input (out 0)
 * or its output (out 1) in 16 bits: a product's operand (DLT_B_HALF), an
 * activation's a range at a time; a layer norm's sums over all rows and
 * the convolutions' kernels read floats. */
static int reads16(const dlt_layer *l, int out)
{
	if (l->kind == DLT_LAYER_DENSE || l->kind == DLT_LAYER_ATTENTION)
		return !out;
	return act_of(l->kind) != DLT_ACT_NONE && !l->fused && !l->by_pool;
}

/* Whether op l can be made again (remade_in) from its input in 16 bits,
 * its output to 16 bits, a range of rows at a time */
static int remakes16(const dlt_layer *l)
{
	return l->kind == DLT_LAYER_LAYERNORM || reads16(l, 0);
}

/* Whether op l's backward reads its own output (a tanh's, a sigmoid's) */
static int reads_own_output(const dlt_layer *l)
{
	int in, out;
	backward_reads(l, &in, &out);
	return out;
}

/* Op p's output can be made again before the backward of the op after
 * it, its one reader, instead of being kept through the step: a layer
 * norm's or an activation's of its own (cheap to remake, and as large as
 * what it reads: GPT-2's two layer norms and GELU a block).  keep[]:
 * the owners that backward reads. */
static int remakeable(const dlt_model *m, int p, const unsigned char *keep, const int *touches)
{
	const dlt_layer *l = &m->layers[p], *c = l + 1;
	int o = l->out, in, out;
	if (p + 1 >= m->n_layers || o == m->n_t - 1 || m->t[o].a_of != o || !keep[o] ||
	    touches[o] != 2 || c->in != o || c->kind == DLT_OP_ADD || c->kind == DLT_OP_FORK ||
	    m->t[c->out].a_of == o || !keep[m->t[l->in].a_of] || m->t[m->t[l->in].a_of].pooled)
		return 0;
	if (l->kind != DLT_LAYER_LAYERNORM &&
	    !(act_of(l->kind) != DLT_ACT_NONE && !l->fused && !l->by_pool))
		return 0;
	backward_reads(c, &in, &out);
	return in;
}

/* bf16 and fp16 training: the activations backward reads hold values of
 * that type (each op's output is rounded to it), so they can wait for
 * backward in 16 bits, exactly: in half from the forward of their last
 * reader there (g's first span ends there).  The readers that can read
 * 16 bits (reads16, remakes16) read half; for those that cannot, the
 * pool holds it widened again, a second span from the backward of the
 * highest such reader to the lowest one's.  A remade output (remakeable)
 * whose readers all read 16 bits is remade in 16 bits (half_pooled: in
 * its gradient's block, or a life of its own, plan_block).  Last, an
 * activation may write over its input (below).  last[]: room for n_t. */
static void plan_halves(dlt_model *m, buf_life *g, const unsigned char *keep, int *last)
{
	const int end = 2 * m->n_layers, out = m->t[m->n_t - 1].a_of;
	for (int i = 0; i < m->n_t; i++) {
		m->t[i].narrow_at = m->t[i].widen_at = -1;
		m->t[i].read16 = 0;
		last[i] = -1;
	}
	for (int i = m->n_layers - 1; i >= 0; i--) {
		const dlt_layer *l = &m->layers[i];
		int in, o, reads[3], wide[3], nr = 0;
		backward_reads(l, &in, &o);
		if (in) {
			wide[nr] = !reads16(l, 0);
			reads[nr++] = m->t[l->in].a_of;
		}
		if (o) {
			wide[nr] = !reads16(l, 1);
			reads[nr++] = m->t[l->out].a_of;
		}
		if (l->remade_in) {
			wide[nr] = !remakes16(l - 1);
			reads[nr++] = m->t[l[-1].in].a_of;
		}
		for (int k = 0; k < nr; k++) {
			m->t[reads[k]].read16 = 1;	/* read at all, for now */
			if (!wide[k])
				continue;
			if (m->t[reads[k]].widen_at < 0)
				m->t[reads[k]].widen_at = i;
			last[reads[k]] = i;
		}
	}
	for (int i = 1; i < m->n_t; i++) {
		dlt_tensor *t = &m->t[i];
		if (t->a_of == i && keep[i] && i != out && !t->pooled && t->read16 && g[i].hi >= 0) {
			t->narrow_at = g[i].hi;
			if (t->widen_at >= 0) {
				g[i].lo2 = end - t->widen_at;
				g[i].hi2 = end - last[i];
			}
		} else {
			t->widen_at = -1;
			t->read16 = 0;
		}
	}
	for (int p = 0; p + 1 < m->n_layers; p++) {
		const dlt_layer *l = &m->layers[p];
		dlt_tensor *t = &m->t[l->out];
		int o = l->out;
		if (!l[1].remade_in || !reads16(l + 1, 0) ||
		    (l->kind != DLT_LAYER_LAYERNORM && !reads16(l, 1)))
			continue;
		t->read16 = 1;
		t->half_pooled = dlt_op_rounds(l + 1) && !reads_own_output(l) && t->g_of == o
				 ? HALF_IN_GRADIENT : HALF_OWN_LIFE;
		g[o].lo2 = INT_MAX;
		g[o].hi2 = -1;
	}
	/* An activation whose input forward reads last and backward reads in
	 * 16 bits alone writes over that input, narrowed after the op before
	 * it: the two take one block in forward (GPT-2's GELU, on the MLP's
	 * widest tensors), where its output has no life in backward apart */
	for (int i = 1; i < m->n_layers; i++) {
		const dlt_layer *l = &m->layers[i];
		int u = m->t[l->in].a_of, h = l->out;
		dlt_tensor *t = &m->t[u];
		if (act_of(l->kind) == DLT_ACT_NONE || l->fused || l->by_pool || t->narrow_at != i ||
		    t->widen_at >= 0 || m->t[h].a_of != h || m->t[h].n != t->n || h == out ||
		    g[h].lo2 <= g[h].hi2 || g[h].lo != i)
			continue;
		t->narrow_at = i - 1;
		g[h].slot = u;
		g[u].hi = g[h].hi;
	}
}

/* The activations in the pool, g[i] of owner i: one that no op's
 * backward reads lives from the first op that touches it to the last,
 * in forward; one that remakeable() allows, from its op to the next in
 * forward and around the next one's backward; with halves, one that
 * backward reads, as plan_halves says.  The model's input and output keep
 * their own.  Owners in the pool go to order[], *n. */
static int plan_acts(dlt_model *m, buf_life *g, int *order, int *n, int halves)
{
	const int end = 2 * m->n_layers;
	unsigned char *keep = dlt_calloc((size_t)m->n_t, 1);
	int *touches = dlt_calloc((size_t)m->n_t, sizeof(int));

	if (!keep || !touches) {
		free(keep);
		free(touches);
		return DLT_ENOMEM;
	}
	for (int i = 0; i < m->n_t; i++)
		g[i] = no_life((size_t)m->max_batch * m->t[i].n, i);
	/* the outputs live on to the loss, which writes their gradient over
	 * them (out_gradient) */
	keep[0] = 1;
	touch(g, m->t[m->n_t - 1].a_of, m->n_layers);
	for (int i = 0; i < m->n_layers; i++) {
		const dlt_layer *l = &m->layers[i];
		int a = m->t[l->in].a_of, b = m->t[l->out].a_of, in, out;
		backward_reads(l, &in, &out);
		keep[a] |= (unsigned char)in;
		keep[b] |= (unsigned char)out;
		touch(g, a, i);
		touch(g, b, i);
		touches[a]++;
		touches[b] += b != a;
		if (l->kind == DLT_OP_ADD) {
			touch(g, m->t[l->in2].a_of, i);
			touches[m->t[l->in2].a_of]++;
		}
		/* a conv that pools writes the pool's output */
		if (l->pool_op) {
			touch(g, m->t[m->layers[l->pool_op].out].a_of, i);
			keep[m->t[m->layers[l->pool_op].out].a_of] = 1;
		}
	}
	for (int p = 0; p < m->n_layers; p++)
		if (remakeable(m, p, keep, touches)) {
			int o = m->layers[p].out;
			keep[o] = 0;
			m->t[o].pooled = 1;
			m->layers[p + 1].remade_in = 1;
			g[o].lo2 = end - (p + 1);
			g[o].hi2 = end - (p + 1) + reads_own_output(&m->layers[p]);
		}
	if (halves) {
		plan_halves(m, g, keep, touches);	/* touches[]: done with, its room */
		for (int i = 1; i < m->n_t; i++)
			keep[i] &= m->t[i].narrow_at < 0;
	}
	for (int i = 1; i < m->n_t; i++)
		if (m->t[i].a_of == i && !keep[i] && g[i].hi >= 0) {
			m->t[i].pooled = 1;
			if (g[i].slot == i)	/* else in the block of the input it overwrote */
				order[(*n)++] = i;
		}
	free(keep);
	free(touches);
	return 0;
}

/* The loss takes the outputs and writes their gradient over them
 * (dlt_model_loss): one block from the forward of the op that makes them
 * through its backward, in place of a block of the outputs' own for the
 * whole step and one of the gradient's, often the model's largest
 * tensors (a language model's logits: 16 MiB for bench/gpt's tiny at
 * batch 128, 1.5 GiB for GPT-2's vocabulary at 8 x 1024 positions).  Not
 * where the outputs are the model's input or the gradient is the
 * input's, which keep theirs. */
static void out_gradient(const dlt_model *m, buf_life *g, int *order, int *n)
{
	int o = m->t[m->n_t - 1].a_of, r = m->n_t + m->t[m->n_t - 1].g_of, k = 0;
	while (g[r].slot != r)
		r = g[r].slot;
	if (o == 0 || r == m->n_t + m->t[0].g_of || !m->t[o].pooled || g[o].slot != o ||
	    g[r].size > g[o].size)
		return;
	g[r].slot = o;
	if (g[r].lo < g[o].lo)
		g[o].lo = g[r].lo;
	if (g[r].hi > g[o].hi)
		g[o].hi = g[r].hi;
	for (int j = 0; j < *n; j++)
		if (order[j] != r)
			order[k++] = order[j];
	*n = k;
}

/* For the choice of 16-bit storage alone (make_pool): the lives that a
 * step never writes, as the plan stands, take no room.  A conv that does
 * the max pool after it never writes its own output, nor, where it does
 * the pool's backward too, that output's gradient, often the largest of a
 * CNN's (the bench CNN's first conv: 12.85 of its 16.46 MB).  Counted,
 * they hid that 16 bits there would take more memory, not less, and cost
 * the passes.  The plan itself keeps their room: whether the conv does
 * the pool's backward turns on want_input_grad, which may change after
 * planning.  A gradient's block that another's shares keeps its size. */
static void unwritten(const dlt_model *m, buf_life *g)
{
	for (int i = 0; i < m->n_layers; i++) {
		const dlt_layer *l = &m->layers[i];
		int r = m->n_t + m->t[l->out].g_of, shared = 0;
		if (!l->pool_op)
			continue;
		g[m->t[l->out].a_of].size = 0;
		if (!pools_back(m, l))
			continue;
		for (int j = m->n_t; j < 2 * m->n_t; j++)
			shared |= j != r && g[j].slot == r;
		if (g[r].slot == r && !shared)
			g[r].size = 0;
	}
}

/* One block, the pool, for what a step needs only a while: the
 * activations backward does not keep (plan_acts), the gradients of the
 * tensors (plan_grads), and each attention's dqkv and datt, live at its
 * op in backward (generation has rows of its own, lib/infer).  lives:
 * the activations', then the gradients' (n_t on), then the attentions'.
 * plan_block plans it with or without 16-bit storage (halves): *n lives in
 * order[], the block *total floats, and *floats what the activations take
 * in all (the pool, the kept ones' own memory, the halves); estimate:
 * without the room of what a step never writes (unwritten), for
 * make_pool's choice. */
static int plan_block(dlt_model *m, int halves, int estimate, buf_life *g, int *order,
		      int *live, int *n, size_t *total, double *floats)
{
	int ng = 0, k = 2 * m->n_t, rc;
	*n = 0;
	for (int i = 0; i < m->n_t; i++) {
		m->t[i].pooled = m->t[i].read16 = m->t[i].half_pooled = m->t[i].back_apart = 0;
		m->t[i].narrow_at = m->t[i].widen_at = -1;
	}
	for (int i = 0; i < m->n_layers; i++)
		m->layers[i].remade_in = 0;
	if ((rc = plan_acts(m, g, order, n, halves)) < 0)
		return rc;
	plan_grads(m, g + m->n_t, order + *n, &ng);
	for (int j = *n; j < *n + ng; j++)
		order[j] += m->n_t;
	*n += ng;
	for (int i = m->n_t; i < 2 * m->n_t; i++)
		g[i].slot += m->n_t;
	out_gradient(m, g, order, n);
	if (estimate)
		unwritten(m, g);
	/* dqkv and datt, in backward (with halves, forward's q, k, v and
	 * heads' output are in the stage, a range of batches at a time) */
	for (int i = 0; i < m->n_layers; i++)
		if (m->layers[i].kind == DLT_LAYER_ATTENTION) {
			g[k] = no_life(4 * (size_t)m->max_batch * m->t[m->layers[i].in].n, k);
			g[k].lo = g[k].hi = 2 * m->n_layers - i;
			order[(*n)++] = k++;
		}
	/* the outputs remade in 16 bits that take a block of their own, around
	 * the backward of their reader and their own */
	for (int p = 0; p + 1 < m->n_layers; p++) {
		int o = m->layers[p].out;
		if (m->t[o].half_pooled != HALF_OWN_LIFE)
			continue;
		g[k] = no_life(((size_t)m->max_batch * m->t[o].n + 1) / 2, k);
		g[k].lo = 2 * m->n_layers - (p + 1);
		g[k].hi = 2 * m->n_layers - p;
		order[(*n)++] = k++;
	}
	/* with halves, an activation's block in backward (its second span)
	 * apart from its block in forward, each packed on its own; a moves
	 * between them (widen_before, remake, dlt_model_forward_ops) */
	for (int i = 0; halves && i < m->n_t; i++) {
		if (!m->t[i].pooled || g[i].slot != i || g[i].lo2 > g[i].hi2)
			continue;
		g[k] = no_life((size_t)m->max_batch * m->t[i].n, k);
		g[k].lo = g[i].lo2;
		g[k].hi = g[i].hi2;
		g[i].lo2 = INT_MAX;
		g[i].hi2 = -1;
		m->t[i].back_apart = 1;
		order[(*n)++] = k++;
	}
	pack_lives(g, order, *n, live, total);
	*floats = (double)*total;
	for (int i = 0; i < m->n_layers; i++)
		if (m->layers[i].kind == DLT_LAYER_ATTENTION)
			*floats += (halves ? 2.0 : 4.0) * m->max_batch * m->t[m->layers[i].in].n;
	for (int i = 0; i < m->n_t; i++) {
		double rows = (double)m->max_batch * (double)m->t[i].n;
		if (m->t[i].a_of == i && !m->t[i].pooled)
			*floats += rows;
		if (m->t[i].narrow_at >= 0)
			*floats += rows / 2;
	}
	return 0;
}

/* bf16 and fp16 keep what backward reads in 16 bits (train.storage 16),
 * or by default on a host backend where that takes a tenth less memory:
 * where backward needs an activation beside gradients as large (a CNN's
 * first conv), its peak stays, and the narrowing and widening passes
 * would cost time for nothing.  A device's kernels read f32, so there
 * the passes cost time the memory they save seldom pays for (a sixth of
 * the small GPT's bf16 step on an H200): 32 unless asked.  pipelined: a
 * stage runs a range of the ops, so an activation's last reader in
 * forward may not run where its backward does: none is kept in 16
 * bits. */
static int make_pool(dlt_model *m, int pipelined)
{
	int n = 0, k, n_attn = 0, rc, halves = 0, can16;
	size_t total;
	double with, without;
	buf_life *g;
	int *order, *live;

	/* the activations' (and their blocks in backward apart), the
	 * gradients', the attentions' dqkv, the outputs remade in 16 bits' (at
	 * most one an op) */
	for (int i = 0; i < m->n_layers; i++)
		n_attn += (m->layers[i].kind == DLT_LAYER_ATTENTION) + 1;
	g = dlt_calloc((size_t)(3 * m->n_t + n_attn), sizeof(*g));
	order = dlt_calloc((size_t)(3 * m->n_t + n_attn), sizeof(int));
	live = dlt_calloc((size_t)(3 * m->n_t + n_attn), sizeof(int));
	if (!g || !order || !live) {
		rc = DLT_ENOMEM;
		goto out;
	}
	can16 = m->prec != DLT_PREC_F32 && m->be->narrow && !pipelined;
	if (can16 && m->storage == 16) {
		halves = 1;
	} else if (can16 && !m->storage && m->be->host) {
		if ((rc = plan_block(m, 1, 1, g, order, live, &n, &total, &with)) < 0 ||
		    (rc = plan_block(m, 0, 1, g, order, live, &n, &total, &without)) < 0)
			goto out;
		halves = with < 0.9 * without;
	}
	if ((rc = plan_block(m, halves, 0, g, order, live, &n, &total, &with)) < 0)
		goto out;
	m->halves = halves;
	if (!(m->pool = alloc_rows(m, 1, total, sizeof(float)))) {
		rc = DLT_ENOMEM;
		goto out;
	}
	for (int i = 0; i < m->n_t; i++) {
		int r = m->n_t + i;
		while (g[r].slot != r)
			r = g[r].slot;
		if (m->t[i].pooled)
			m->t[i].a = m->pool + g[g[i].slot].off;
		if (m->t[i].g_of == i)
			m->t[i].g = m->pool + g[r].off;
	}
	k = 2 * m->n_t;
	for (int i = 0; i < m->n_layers; i++) {
		dlt_layer *l = &m->layers[i];
		size_t rows_c = (size_t)m->max_batch * m->t[l->in].n;
		if (l->kind != DLT_LAYER_ATTENTION)
			continue;
		l->dqkv = m->pool + g[k++].off;
		l->datt = l->dqkv + 3 * rows_c;
		/* half set: qkv and att are not allocated (make_buffers) */
		if (halves && !(l->half = alloc_rows(m, 4, rows_c, sizeof(uint16_t)))) {
			rc = DLT_ENOMEM;
			goto out;
		}
	}
	for (int p = 0; p + 1 < m->n_layers; p++) {
		dlt_tensor *t = &m->t[m->layers[p].out];
		if (t->half_pooled == HALF_OWN_LIFE)
			t->half = (uint16_t *)(m->pool + g[k++].off);
		else if (t->half_pooled == HALF_IN_GRADIENT)
			t->half = (uint16_t *)dlt_tensor_g(m, m->layers[p].out);
	}
	for (int i = 0; i < m->n_t; i++) {
		m->t[i].a_fwd = m->t[i].a;
		if (m->t[i].back_apart)
			m->t[i].a_back = m->pool + g[k++].off;
	}
out:
	free(g);
	free(order);
	free(live);
	return rc;
}

/* The stage's floats at least (2 MiB): the attention runs on ranges of
 * batches that fit it (a range is one parallel region: too short a one
 * and 2 threads wait on each other more than they work), and backward
 * widens 16-bit activations into its halves (x, then y) */
#define STAGE_FLOATS ((size_t)1 << 19)
/* A device backend's stage: as large as the longest range it can use, up
 * to 64 MiB, since each range is a launch of every kernel over it and a
 * GPU wants them long */
#define DEVICE_STAGE_FLOATS ((size_t)1 << 24)

static int make_buffers(dlt_model *m, int pipelined)
{
	size_t work = 0, stage = 0, whole = 0;
	int rc;
	/* sharing was planned a link at a time; point each at the owner */
	for (int i = 0; i < m->n_t; i++) {
		m->t[i].a_of = root(m, i, 0);
		m->t[i].g_of = root(m, i, 1);
	}
	if ((rc = make_pool(m, pipelined)) < 0)
		return rc;
	for (int i = 0; i < m->n_t; i++) {
		dlt_tensor *t = &m->t[i];
		if (!t->pooled && t->a_of == i &&
		    !(t->a = alloc_rows(m, m->max_batch, t->n, sizeof(float))))
			return DLT_ENOMEM;
		if (t->narrow_at >= 0 &&
		    !(t->half = alloc_rows(m, m->max_batch, t->n, sizeof(uint16_t))))
			return DLT_ENOMEM;
		if (t->read16 && 2 * (t->n / t->rows) > stage)
			stage = 2 * (t->n / t->rows);	/* a row of x and one of y */
		if (t->read16 && 2 * t->n * (size_t)m->max_batch > whole)
			whole = 2 * t->n * (size_t)m->max_batch;
	}
	for (int i = 0; m->halves && i < m->n_layers; i++) {
		const dlt_layer *l = &m->layers[i];
		if (l->kind == DLT_LAYER_ATTENTION && 4 * m->t[l->in].n > stage)
			stage = 4 * m->t[l->in].n;	/* a batch's q, k, v and att */
		if (l->kind == DLT_LAYER_ATTENTION && 4 * m->t[l->in].n * (size_t)m->max_batch > whole)
			whole = 4 * m->t[l->in].n * (size_t)m->max_batch;
	}
	if (m->halves) {
		if (!m->be->host && stage < whole)
			stage = whole < DEVICE_STAGE_FLOATS ? whole : DEVICE_STAGE_FLOATS;
		m->stage_n = stage > STAGE_FLOATS ? stage : STAGE_FLOATS;
		if (!(m->stage = alloc_rows(m, 1, m->stage_n, sizeof(float))))
			return DLT_ENOMEM;
	}
	for (int i = 0; i < m->n_layers; i++) {
		dlt_layer *l = &m->layers[i];
		size_t out = m->t[l->out].n, c = (size_t)m->t[l->in].s.c;
		switch (l->kind) {
		case DLT_LAYER_DROPOUT:
			if (!(l->mask = alloc_rows(m, m->max_batch, out, sizeof(float))))
				return DLT_ENOMEM;
			break;
		case DLT_LAYER_MAXPOOL:
			if (!(l->arg = alloc_rows(m, m->max_batch, out, sizeof(int32_t))))
				return DLT_ENOMEM;
			break;
		case DLT_LAYER_BATCHNORM:
			if (!(l->mean = alloc_rows(m, 2, c, sizeof(float))))
				return DLT_ENOMEM;
			l->invstd = l->mean + c;
			break;
		case DLT_LAYER_LAYERNORM: {
			size_t rows = (size_t)m->max_batch * m->t[l->in].rows;
			if (!(l->mean = alloc_rows(m, 2, rows, sizeof(float))))
				return DLT_ENOMEM;
			l->invstd = l->mean + rows;
			break;
		}
		case DLT_LAYER_ATTENTION: {
			size_t rows = (size_t)m->max_batch * m->t[l->in].rows;
			if ((!l->half && (!(l->qkv = alloc_rows(m, 3, rows * c, sizeof(float))) ||
					  !(l->att = alloc_rows(m, 1, rows * c, sizeof(float))))) ||
			    !(l->lse = alloc_rows(m, l->heads, rows, sizeof(float))))
				return DLT_ENOMEM;
			break;
		}
		case DLT_LAYER_CONV2D: {
			size_t need;
			l->conv.n = m->max_batch;
			need = m->be->conv_workspace(m->prec, &l->conv);
			if (need > work)
				work = need;
			break;
		}
		}
	}
	if (work && !(m->work = alloc_rows(m, 1, work, sizeof(float))))
		return DLT_ENOMEM;
	if (!(m->labels = alloc_rows(m, m->max_batch, (size_t)m->out_rows, sizeof(int32_t))) ||
	    !(m->in_buf[1] = alloc_rows(m, m->max_batch, m->t[0].n, sizeof(float))))
		return DLT_ENOMEM;
	m->in_buf[0] = m->t[0].a;
	return make_dev_params(m);
}

/* bf16 and fp16: whether every op that reads the input (or a view of
 * it) rounds it to prec before it uses it, and so would give the same
 * bits from a rounded copy: a dense's product (its operand rounded in the
 * packing) or a conv's (it rounds a copy).  Then dlt_model_set_input
 * rounds it once, and they read it in place (exact). */
static int input_rounds(const dlt_model *m)
{
	if (m->prec == DLT_PREC_F32)
		return 0;
	for (int i = 0; i < m->n_layers; i++) {
		const dlt_layer *l = &m->layers[i];
		int reads = m->t[l->in].a_of == 0 || (l->kind == DLT_OP_ADD && m->t[l->in2].a_of == 0);
		if (reads && l->kind != DLT_LAYER_DENSE && l->kind != DLT_LAYER_CONV2D &&
		    l->kind != DLT_LAYER_FLATTEN && l->kind != DLT_OP_FORK)
			return 0;
	}
	return 1;
}

int dlt_model_init(dlt_model *m, const dlt_config *c, const dlt_backend *be,
		   dlt_shape in, int n_classes, int max_batch)
{
	planner p = { .m = m, .c = c };
	int cur = 0, rc;

	memset(m, 0, sizeof(*m));
	if (in.c < 1 || in.h < 1 || in.w < 1 || n_classes < 1 || max_batch < 1)
		return dlt_error(DLT_EINPUT, "bad model size: input %dx%dx%d, %d classes, "
				 "batch %d", in.c, in.h, in.w, n_classes, max_batch);
	m->be = be;
	m->max_batch = max_batch;
	m->in_shape = in;
	m->out_features = n_classes;
	m->loss = (dlt_loss){ .task = DLT_TASK_CLASS, .kind = DLT_LOSS_XENT, .outputs = n_classes };
	m->seed = (uint64_t)c->train.seed;
	m->prec = !strcmp(c->train.precision, "bf16") ? DLT_PREC_BF16
		: !strcmp(c->train.precision, "fp16") ? DLT_PREC_F16 : DLT_PREC_F32;
	m->loss_scale = 1.0f;
	m->init_gpt2 = c->train.init_gpt2;
	m->storage = c->train.storage;
	DLT_TRY(new_tensor(&p, in, 1));
	m->in_features = (int)m->t[0].n;
	DLT_TRY(plan_seq(&p, c->layers, c->n_layers, &cur));
	/* a sequence's outputs are per position: logits over the vocabulary */
	m->out_rows = m->t[cur].rows;
	if (m->t[cur].n / (size_t)m->out_rows != (size_t)n_classes) {
		rc = cfg_error(c, c->n_layers ? c->layers[c->n_layers - 1].line : c->model_line,
			       "the model ends with %zu features but the data has %d %s",
			       m->t[cur].n / (size_t)m->out_rows, n_classes,
			       m->out_rows > 1 ? "tokens in its vocabulary" : "classes");
		goto fail;
	}
	m->input_rounds = input_rounds(m);
	DLT_TRY(check_memory(m));
	DLT_TRY(make_params(m));
	DLT_TRY(make_buffers(m, c->dist.pipe.stages > 1));
	return 0;
fail:
	dlt_model_free(m);
	return rc;
}

void dlt_model_free(dlt_model *m)
{
	void (*dev_free)(void *) = m->be ? m->be->free : NULL;
	if (dev_free) {
		if (m->in_buf[1]) {	/* t[0].a is one of them */
			m->t[0].a = NULL;
			dev_free(m->in_buf[0]);
			dev_free(m->in_buf[1]);
		}
		for (int i = 0; i < m->n_t; i++) {
			if (!m->t[i].pooled)
				dev_free(m->t[i].a);
			if (!m->t[i].half_pooled)
				dev_free(m->t[i].half);
		}
		dev_free(m->pool);
		for (int i = 0; i < m->n_layers; i++) {
			dev_free(m->layers[i].mask);
			dev_free(m->layers[i].arg);
			dev_free(m->layers[i].mean);
			if (!m->layers[i].half) {
				dev_free(m->layers[i].qkv);
				dev_free(m->layers[i].att);
			}
			dev_free(m->layers[i].half);
			dev_free(m->layers[i].lse);
		}
		dev_free(m->work);
		dev_free(m->stage);
		dev_free(m->labels);
		dev_free(m->targets);
		if (!m->be->host) {
			dev_free(m->dev_w);
			dev_free(m->dev_g);
			dev_free(m->dev_m);
			dev_free(m->dev_v);
			dev_free(m->dev_bufs);
		}
	}
	if (m->n_params) {
		dlt_free_aligned(m->params[0].w);
		dlt_free_aligned(m->params[0].g);
		dlt_free_aligned(m->params[0].m);
		dlt_free_aligned(m->params[0].v);
	}
	if (m->n_bufs)
		free(m->bufs[0].w);	/* NULL if make_params failed first */
	free(m->params);
	free(m->bufs);
	free(m->layers);
	free(m->ready_at);
	free(m->t);
	memset(m, 0, sizeof(*m));
}

void dlt_model_set_input(dlt_model *m, const float *x, int batch, int rounded)
{
	size_t n = (size_t)batch * m->in_features;
	rounded |= !m->input_rounds;
	m->input_exact = m->input_rounds;
	if (m->be->host && rounded) {
		/* read where it lies: no op writes the model's input (plan_act) */
		m->t[0].a = (float *)x;
		return;
	}
	m->in_slot ^= 1;
	m->t[0].a = m->in_buf[m->in_slot];
	m->be->upload_async(m->t[0].a, x, n * sizeof(float));
	if (!rounded)
		m->be->round(m->t[0].a, n, m->prec);
}

int dlt_model_input_prec(const dlt_model *m)
{
	return m->input_rounds ? m->prec : DLT_PREC_F32;
}

float *dlt_model_input(dlt_model *m)
{
	m->input_exact = 0;	/* the caller may write floats of any precision */
	m->t[0].a = m->in_buf[m->in_slot];	/* its own rows, not a caller's */
	return dlt_tensor_a(m, 0);
}

float *dlt_model_input_grad(dlt_model *m)
{
	return dlt_tensor_g(m, 0);
}

void dlt_model_output(dlt_model *m, float *out, int batch)
{
	m->be->download(out, dlt_tensor_a(m, m->n_t - 1),
			(size_t)batch * m->out_rows * m->out_features * sizeof(float));
}

/* One block between host and backend memory, the way push says. */
static void move_block(const dlt_model *m, int push, float *dev, float *host, size_t n)
{
	if (!dev || !host)
		return;
	if (push)
		m->be->upload(dev, host, n * sizeof(float));
	else
		m->be->download(host, dev, n * sizeof(float));
}

/* Moves the host blocks (w, m, v, buffers) one way or the other. */
static void sync_params(dlt_model *m, int push)
{
	size_t n_bufs = 0;
	if (m->be->host)
		return;
	for (int k = 0; k < m->n_bufs; k++)
		n_bufs += m->bufs[k].n;
	if (m->n_params) {
		move_block(m, push, m->dev_w, m->params[0].w, m->n_weights);
		move_block(m, push, m->dev_m, m->params[0].m, m->n_weights);
		move_block(m, push, m->dev_v, m->params[0].v, m->n_weights);
	}
	if (m->n_bufs)
		move_block(m, push, m->dev_bufs, m->bufs[0].w, n_bufs);
}

void dlt_model_pull(dlt_model *m)
{
	sync_params(m, 0);
}

void dlt_model_push(dlt_model *m)
{
	sync_params(m, 1);
}

/* The dropout mask's Philox stream: step and layer, offset so that it is
 * never 0 (stream 0 is the one place kernel streams meet dlt_rng's). */
static uint64_t dropout_stream(long long step, int layer)
{
	return ((uint64_t)step + 1) << 16 | (uint64_t)layer;
}

static const float *pw(const dlt_model *m, int k)
{
	return k >= 0 ? m->dev_w + m->params[k].off : NULL;
}

static float *bufw(const dlt_model *m, int k)
{
	return m->dev_bufs + m->bufs[k].off;
}

/* bf16 and fp16: n activations or gradients rounded to the type, as every
 * op's output and every gradient is */
static void round_acts(const dlt_model *m, float *x, size_t n)
{
	if (m->prec != DLT_PREC_F32)
		m->be->round(x, n, m->prec);
}

/* flag (DLT_A_EXACT or DLT_B_EXACT) for a product's operand that is
 * tensor t's activations: every op's output is rounded to the type, but
 * the model's input holds the data as they come, unless
 * dlt_model_set_input rounded them (input_exact).  Gradients are all
 * rounded: theirs is always the flag. */
static int exact(const dlt_model *m, int t, int flag)
{
	return m->t[t].a_of || m->input_exact ? flag : 0;
}

/* Tensor i's activations as backward reads them in 16 bits (its owner's
 * read16: plan_halves), or NULL where it reads floats */
static const uint16_t *half_read(const dlt_model *m, int i)
{
	const dlt_tensor *t = &m->t[m->t[i].a_of];
	return t->read16 ? t->half : NULL;
}

/* The flags of tensor t as a product's B in backward, *x where it is
 * read: its 16 bits (DLT_B_HALF) where backward reads them (half_read) */
static int operand_b(const dlt_model *m, int t, const float **x)
{
	const uint16_t *h = half_read(m, t);
	if (!h)
		return exact(m, t, DLT_B_EXACT);
	*x = (const float *)h;
	return DLT_B_HALF;
}

void dlt_dense_forward(const dlt_model *m, const dlt_layer *l, const float *x, float *y,
		       int rows)
{
	const dlt_tensor *ti = &m->t[l->in];
	int out = (int)(m->t[l->out].n / ti->rows), in = (int)(ti->n / ti->rows);
	int prec = m->prec | exact(m, l->in, DLT_A_EXACT);
	if (l->b >= 0 || l->act != DLT_ACT_NONE) {
		m->be->gemm(prec, 0, 1, rows, out, in, 1.0f, x, in, pw(m, l->w), in, 0.0f, y, out);
		m->be->bias_act(y, pw(m, l->b), rows, out, l->act, l->slope, m->prec);
	} else {
		m->be->gemm(prec | DLT_ROUND_C, 0, 1, rows, out, in, 1.0f, x, in, pw(m, l->w), in,
			    0.0f, y, out);
	}
}

/* An attention's forward on batches b0 .. b0 + nb of x into y, its q, k,
 * v and heads' output in qkv and att (rows of their own) */
static void attention_batches(const dlt_model *m, const dlt_layer *l, const float *x, float *y,
			      float *qkv, float *att, size_t b0, int nb)
{
	const dlt_backend *be = m->be;
	const dlt_tensor *ti = &m->t[l->in];
	int T = ti->rows, C = ti->s.c, rows = nb * T;
	size_t r0 = b0 * (size_t)T;
	dlt_attn_dropout drop = l->drop;
	be->gemm(m->prec | exact(m, l->in, DLT_A_EXACT), 0, 1, rows, 3 * C, C, 1.0f, x + r0 * C,
		 C, pw(m, l->w), C, 0.0f, qkv, 3 * C);
	be->bias_act(qkv, pw(m, l->b), rows, 3 * C, DLT_ACT_NONE, 0.0f, m->prec);
	drop.row0 = b0 * (uint64_t)l->heads * (uint64_t)T;
	be->attention_forward(m->prec, qkv, att, l->lse + b0 * l->heads * T, nb, T, C, l->heads,
			      l->causal, drop);
	round_acts(m, att, (size_t)rows * C);
	be->gemm(m->prec | DLT_A_EXACT, 0, 1, rows, C, C, 1.0f, att, C, pw(m, l->w2), C, 0.0f,
		 y + r0 * C, C);
	be->bias_act(y + r0 * C, pw(m, l->b2), rows, C, DLT_ACT_NONE, 0.0f, m->prec);
}

/* An attention's forward: on all the batches in qkv and att, or with half
 * (bf16 and fp16 storage) a range of batches at a time in the stage, q,
 * k, v and the heads' output narrowed into half for backward (training):
 * the rows apart, so the same bits */
static void attention_forward_rows(const dlt_model *m, const dlt_layer *l, const float *x,
				   float *y, int batch, int train)
{
	const dlt_tensor *ti = &m->t[l->in];
	size_t bt = (size_t)ti->rows * ti->s.c, rows_c = (size_t)m->max_batch * ti->n, step;
	if (!l->half) {
		attention_batches(m, l, x, y, l->qkv, l->att, 0, batch);
		return;
	}
	step = m->stage_n / (4 * bt);
	for (size_t b0 = 0; b0 < (size_t)batch; b0 += step) {
		int nb = (int)((size_t)batch - b0 < step ? (size_t)batch - b0 : step);
		float *qkv = m->stage, *att = m->stage + 3 * nb * bt;
		attention_batches(m, l, x, y, qkv, att, b0, nb);
		if (train) {
			m->be->narrow(qkv, l->half + 3 * b0 * bt, 3 * nb * bt, m->prec);
			m->be->narrow(att, l->half + 3 * rows_c + b0 * bt, nb * bt, m->prec);
		}
	}
}

/* Returns the tensor whose activations it wrote, -1 if none (a conv that
 * does the max pool after it writes the pool's). */
static int forward_op(dlt_model *m, dlt_layer *l, int batch, int train, long long step)
{
	const dlt_backend *be = m->be;
	const dlt_tensor *ti = &m->t[l->in];
	const float *x = dlt_tensor_a(m, l->in);
	float *y = dlt_tensor_a(m, l->out);
	size_t n = (size_t)batch * ti->n;
	int hw = ti->s.h * ti->s.w;

	switch (l->kind) {
	case DLT_LAYER_DENSE:
		dlt_dense_forward(m, l, x, y, batch * ti->rows);
		break;
	case DLT_LAYER_EMBEDDING:
		/* the input holds token ids, i32, in its floats' place */
		be->embedding_forward((const int32_t *)x, pw(m, l->w), y, batch * (int)ti->n,
				      (int)m->params[l->w].dims[1], (int)m->params[l->w].dims[0]);
		break;
	case DLT_LAYER_POSITIONAL:
		be->positional_forward(x, pw(m, l->w), y, batch, ti->rows, ti->s.c);
		break;
	case DLT_LAYER_LAYERNORM:
		be->layernorm_forward(x, pw(m, l->w), pw(m, l->b), y, l->mean, l->invstd,
				      batch * ti->rows, (int)(ti->n / ti->rows), l->eps);
		break;
	case DLT_LAYER_ATTENTION:
		l->drop.rate = train ? l->rate : 0.0f;
		l->drop.seed = m->seed;
		l->drop.stream = dropout_stream(step, l->index);
		attention_forward_rows(m, l, x, y, batch, train);
		break;
	case DLT_LAYER_CONV2D:
		l->conv.n = batch;
		if (l->pool_op) {
			dlt_layer *p = &m->layers[l->pool_op];
			p->pool.n = batch;
			be->conv_pool_forward(m->prec | exact(m, l->in, DLT_X_EXACT), &l->conv,
					      &p->pool, x, pw(m, l->w),
					      pw(m, l->b), l->act, l->slope,
					      dlt_tensor_a(m, p->out), p->arg, m->work);
			return p->out;
		}
		be->conv_forward(m->prec | exact(m, l->in, DLT_X_EXACT), &l->conv, x, pw(m, l->w),
				 pw(m, l->b), y, l->act, l->slope, m->work);
		break;
	case DLT_LAYER_MAXPOOL:
		if (l->fused)
			return -1;
		l->pool.n = batch;
		be->maxpool_forward(&l->pool, x, y, l->arg);
		break;
	case DLT_LAYER_AVGPOOL:
	case DLT_LAYER_GLOBAL_AVGPOOL:
		l->pool.n = batch;
		be->avgpool_forward(&l->pool, x, y);
		break;
	case DLT_LAYER_BATCHNORM:
		if (train)
			be->batchnorm_train(batch, ti->s.c, hw, x, pw(m, l->w), pw(m, l->b), y,
					    l->mean, l->invstd, bufw(m, l->rm), bufw(m, l->rv),
					    l->momentum, l->eps);
		else
			be->batchnorm_eval(batch, ti->s.c, hw, x, pw(m, l->w), pw(m, l->b),
					   bufw(m, l->rm), bufw(m, l->rv), l->eps, y);
		break;
	case DLT_LAYER_DROPOUT:
		l->masked = train && l->rate > 0.0f;
		if (l->masked)
			be->dropout(x, y, l->mask, n, l->rate, m->seed, dropout_stream(step, l->index));
		else
			be->copy(y, x, n * sizeof(*y));
		break;
	case DLT_LAYER_FLATTEN:
	case DLT_OP_FORK:
		return -1;
	case DLT_OP_ADD:
		be->add(x, dlt_tensor_a(m, l->in2), y, n);
		break;
	default:
		if (l->fused)
			return -1;
		be->act_forward(x, y, n, l->act, l->slope);
	}
	return l->out;
}

/* Param k (0: w, 1: b, 2 and 3: attention's projection) of op l, -1 if
 * none: the ops of a residual block (FORK, ADD) carry no params of their
 * own.  A tied head's weights are its embedding's: tied 0 leaves them
 * out. */
static int op_param(const dlt_layer *l, int k, int tied)
{
	if (l->kind == DLT_OP_FORK || l->kind == DLT_OP_ADD || (k == 0 && l->tied && !tied))
		return -1;
	return k == 0 ? l->w : k == 1 ? l->b : k == 2 ? l->w2 : l->b2;
}

/* dlt_model_on_params's calls for op l: its params' ranges, adjacent ones
 * as one */
static void use_params(dlt_model *m, const dlt_layer *l, int need)
{
	size_t a = 0, b = 0;
	if (!m->params_use)
		return;
	for (int k = 0; k < 4; k++) {
		int p = op_param(l, k, 1);
		if (p < 0)
			continue;
		if (b > a && m->params[p].off != b) {
			m->params_use(m->params_ctx, a, b, need);
			a = b;
		}
		if (b == a)
			a = m->params[p].off;
		b = m->params[p].off + m->params[p].n;
	}
	if (b > a)
		m->params_use(m->params_ctx, a, b, need);
}

/* Whether op l's output (out 1) or its input's gradient (out 0) holds
 * values of the activations' precision whenever what it reads does (its
 * input exact; every gradient is): a max pool and a ReLU pick values or
 * zeros, and a max pool whose windows do not overlap passes each gradient
 * to one place.  Rounding them again would change no bit. */
static int keeps_exact(const dlt_model *m, const dlt_layer *l, int out)
{
	if (l->kind == DLT_LAYER_RELU)
		return !out || exact(m, l->in, 1);
	if (l->kind == DLT_LAYER_MAXPOOL)
		return out ? exact(m, l->in, 1)
			   : l->pool.sh >= l->pool.kh && l->pool.sw >= l->pool.kw;
	return 0;
}

/* forward_op, its output rounded to the activations' precision */
static void run_forward(dlt_model *m, dlt_layer *l, int batch, int train, long long step)
{
	int t;
	use_params(m, l, 1);
	t = forward_op(m, l, batch, train, step);
	use_params(m, l, 0);
	if (t >= 0 && !dlt_op_rounds(l) && !keeps_exact(m, l, 1))
		round_acts(m, dlt_tensor_a(m, t), (size_t)batch * m->t[t].n);
}

float *dlt_model_forward(dlt_model *m, int batch, int train, long long step)
{
	if (batch < 1 || batch > m->max_batch) {
		dlt_error(DLT_EINPUT, "batch of %d rows, the model was planned for 1 to %d",
			  batch, m->max_batch);
		return NULL;
	}
	dlt_model_forward_ops(m, 0, m->n_layers, batch, train, step);
	return dlt_tensor_a(m, m->n_t - 1);
}

/* The activations op i's forward read last, narrowed to their 16 bits
 * (plan_halves; an attention's q, k, v and output as it goes:
 * attention_forward_rows); before op i's backward, those it reads first
 * as floats widened */
static void narrow_after(dlt_model *m, int i, int batch)
{
	if (!m->halves)
		return;
	for (int k = 0; k < m->n_t; k++) {
		dlt_tensor *t = &m->t[k];
		if (t->narrow_at == i) {
			m->be->narrow(t->a, t->half, (size_t)batch * t->n, m->prec);
			t->held = 1;
		}
	}
}

static void widen_before(dlt_model *m, int i, int batch)
{
	if (!m->halves)
		return;
	for (int k = 0; k < m->n_t; k++) {
		dlt_tensor *t = &m->t[k];
		if (t->widen_at == i && t->held) {
			if (t->back_apart)
				t->a = t->a_back;
			m->be->widen(t->half, t->a, (size_t)batch * t->n, m->prec);
			t->held = 0;
		}
	}
}

void dlt_model_forward_ops(dlt_model *m, int from, int to, int batch, int train, long long step)
{
	for (int i = 0; m->halves && i < m->n_t; i++)
		if (m->t[i].back_apart)
			m->t[i].a = m->t[i].a_fwd;
	for (int i = from; i < to; i++) {
		run_forward(m, &m->layers[i], batch, train, step);
		if (train)	/* an evaluation's activations are not read again */
			narrow_after(m, i, batch);
	}
}

int dlt_model_can_cut(const dlt_model *m, int i)
{
	const dlt_layer *l = &m->layers[i];
	int open = 0;
	if (i <= 0 || i >= m->n_layers)
		return 0;
	for (int j = 0; j < i; j++)
		open += m->layers[j].kind == DLT_OP_FORK ? 1 : m->layers[j].kind == DLT_OP_ADD ? -1 : 0;
	return !open && l->in == m->layers[i - 1].out && !l->remade_in && !l->fused &&
	       !l->by_pool;
}

double dlt_model_op_cost(const dlt_model *m, int i)
{
	const dlt_layer *l = &m->layers[i];
	const dlt_tensor *out = &m->t[l->out];
	double rows = out->rows, params = 0.0;
	if (l->kind == DLT_LAYER_EMBEDDING || l->kind == DLT_LAYER_POSITIONAL)
		return (double)out->n;	/* a lookup, not a product */
	for (int k = 0; k < 4; k++) {
		int p = op_param(l, k, 1);
		if (p >= 0)
			params += (double)m->params[p].n;
	}
	if (l->kind == DLT_LAYER_CONV2D)
		rows = (double)out->s.h * out->s.w;
	if (l->kind == DLT_LAYER_ATTENTION)	/* scores and their weighted values */
		params += 2.0 * out->rows * out->s.c;
	return params > 0.0 ? params * rows : (double)out->n;
}

size_t dlt_model_params_from(const dlt_model *m, int op)
{
	for (int i = op; i < m->n_layers; i++)
		for (int k = 0; k < 4; k++) {
			int p = op_param(&m->layers[i], k, 0);
			if (p >= 0)
				return m->params[p].off;
		}
	return m->n_weights;
}

const char *dlt_model_error(const dlt_model *m)
{
	return m->be->error ? m->be->error() : NULL;
}

int dlt_model_token_vocab(const dlt_model *m)
{
	if (!m->n_layers || m->layers[0].kind != DLT_LAYER_EMBEDDING)
		return 0;
	return (int)m->params[m->layers[0].w].dims[0];
}

int dlt_model_set_loss(dlt_model *m, const dlt_loss *l)
{
	if (l->outputs != m->out_features)
		return dlt_error(DLT_EINPUT, "the model has %d outputs but the targets %d",
				 m->out_features, l->outputs);
	if (l->task != DLT_TASK_CLASS && !m->targets &&
	    !(m->targets = alloc_rows(m, m->max_batch, (size_t)l->outputs, sizeof(float))))
		return DLT_ENOMEM;
	m->loss = *l;
	return 0;
}

double dlt_model_loss(dlt_model *m, const void *targets, int batch, int *correct)
{
	double sum;
	int hits = 0;
	float *dy = dlt_tensor_g(m, m->n_t - 1);
	const float *y = dlt_tensor_a(m, m->n_t - 1);
	size_t n = (size_t)batch * m->out_rows * m->out_features;
	if (m->loss.task == DLT_TASK_CLASS) {
		/* a sequence's: one label a position (the next token) */
		int rows = batch * m->out_rows;
		m->be->upload(m->labels, targets, (size_t)rows * sizeof(int32_t));
		m->be->softmax_xent(y, m->labels, rows, m->out_features, dy, &sum, &hits);
		sum /= m->out_rows;
	} else {
		m->be->upload(m->targets, targets, n * sizeof(float));
		m->be->pointwise_loss(m->loss.kind, m->loss.delta, y, m->targets, batch,
				      m->out_features, dy, &sum);
		sum /= m->out_features;
	}
	/* the gradient of the mean over grad_batch samples, of which these
	 * are batch: the loss's is over batch */
	float k = m->loss_scale;
	if (m->grad_batch && m->grad_batch != batch)
		k = (float)((double)m->loss_scale * batch / m->grad_batch);
	if (k != 1.0f)
		m->be->scale(dy, n, k);
	round_acts(m, dy, n);
	if (correct)
		*correct = hits;
	return sum / batch;
}

static float *pg(const dlt_model *m, int k)
{
	return k >= 0 ? m->dev_g + m->params[k].off : NULL;
}

/* bf16 and fp16: a matrix product's weight and bias gradients come out
 * in that type, as from the half-precision product on a GPU; they are
 * summed into the f32 master weights' update.  Dense's and attention's
 * products round their weights' themselves (dlt_op_rounds); a conv's
 * are rounded here, and every bias's. */
static void round_grads(const dlt_model *m, const dlt_layer *l)
{
	if (m->prec == DLT_PREC_F32)
		return;
	if (!dlt_op_rounds(l))
		m->be->round(pg(m, l->w), m->params[l->w].n, m->prec);
	if (l->b >= 0)
		m->be->round(pg(m, l->b), m->params[l->b].n, m->prec);
	if (l->b2 >= 0)
		m->be->round(pg(m, l->b2), m->params[l->b2].n, m->prec);
}

/* Rows r0 .. r0 + n of width w of tensor i's activations as floats: where
 * they are, or widened from their 16 bits (h) into at */
static const float *rows_of(const dlt_model *m, int i, const uint16_t *h, size_t r0, size_t n,
			    size_t w, float *at)
{
	if (!h)
		return dlt_tensor_a(m, i) + r0 * w;
	m->be->widen(h + r0 * w, at, n * w, m->prec);
	return at;
}

/* Rows of width w a range of the stage takes, a half of it for x and one
 * for y (make_buffers makes room for one row each): on the host
 * RANGE_FLOATS each at most (512 KiB), so that the widened range is still
 * in cache when the op reads it */
#define RANGE_FLOATS ((size_t)1 << 17)

static size_t stage_rows(const dlt_model *m, size_t w)
{
	size_t n = m->be->host && m->stage_n / 2 > RANGE_FLOATS ? RANGE_FLOATS : m->stage_n / 2;
	return n / w ? n / w : 1;
}

/* Backward's remake of op p's output (remade_in): run_forward, or where
 * its input is read in 16 bits or its output is remade in them
 * (half_pooled), the same arithmetic a range of rows at a time through
 * the stage: a layer norm's rows and an activation's elements are apart. */
static void remake(dlt_model *m, dlt_layer *p, int batch)
{
	const dlt_backend *be = m->be;
	const dlt_tensor *ti = &m->t[p->in];
	dlt_tensor *to = &m->t[m->t[p->out].a_of];
	const uint16_t *x16 = half_read(m, p->in);
	uint16_t *y16 = to->half_pooled ? to->half : NULL;
	size_t w = ti->n / ti->rows, rows = (size_t)batch * ti->rows, step = stage_rows(m, w);

	if (to->back_apart)
		to->a = to->a_back;

	if (!x16 && !y16) {	/* a layer norm or an activation, which does not draw */
		run_forward(m, p, batch, 1, 0);
		return;
	}
	use_params(m, p, 1);
	for (size_t r0 = 0; r0 < rows; r0 += step) {
		size_t n = rows - r0 < step ? rows - r0 : step;
		const float *x = rows_of(m, p->in, x16, r0, n, w, m->stage);
		float *y = y16 ? m->stage + m->stage_n / 2 : dlt_tensor_a(m, p->out) + r0 * w;
		if (p->kind == DLT_LAYER_LAYERNORM)
			be->layernorm_forward(x, pw(m, p->w), pw(m, p->b), y, p->mean + r0,
					      p->invstd + r0, (int)n, (int)w, p->eps);
		else
			be->act_forward(x, y, n * w, p->act, p->slope);
		round_acts(m, y, n * w);
		if (y16)
			be->narrow(y, y16 + r0 * w, n * w, m->prec);
	}
	use_params(m, p, 0);
}

/* An activation's backward, the one of x and y its derivative reads
 * (dlt_act_backward_reads_y) widened a range at a time where it is read
 * in 16 bits; the other, which may hold anything, is given it too */
static void act_backward_rows(const dlt_model *m, const dlt_layer *l, const float *dy, float *dx,
			      int batch)
{
	const dlt_tensor *ti = &m->t[l->in];
	int t = dlt_act_backward_reads_y(l->act) ? l->out : l->in;
	const uint16_t *h = half_read(m, t);
	size_t w = ti->n / ti->rows, rows = (size_t)batch * ti->rows, step = stage_rows(m, w);

	if (!h) {
		const float *v = dlt_tensor_a(m, t);
		m->be->act_backward(v, v, dy, dx, rows * w, l->act, l->slope);
		return;
	}
	for (size_t r0 = 0; r0 < rows; r0 += step) {
		size_t n = rows - r0 < step ? rows - r0 : step;
		const float *v = rows_of(m, t, h, r0, n, w, m->stage);
		m->be->act_backward(v, v, dy + r0 * w, dx + r0 * w, n * w, l->act, l->slope);
	}
}

/* The heads' backward (into l->dqkv from l->datt): with half, q, k, v and
 * the heads' output widened a range of batches at a time into the stage,
 * the dropout's rows those of the step (row0) */
static void attention_backward_rows(const dlt_model *m, const dlt_layer *l, int batch)
{
	const dlt_tensor *ti = &m->t[l->in];
	int T = ti->rows, C = ti->s.c, H = l->heads;
	size_t bt = (size_t)T * C, rows_c = (size_t)m->max_batch * ti->n, step;

	if (!l->half) {
		m->be->attention_backward(m->prec, l->qkv, l->att, l->datt, l->lse, l->dqkv, batch, T,
					  C, H, l->causal, l->drop);
		return;
	}
	step = m->stage_n / (4 * bt);
	for (size_t b0 = 0; b0 < (size_t)batch; b0 += step) {
		size_t nb = (size_t)batch - b0 < step ? (size_t)batch - b0 : step;
		dlt_attn_dropout drop = l->drop;
		float *qkv = m->stage, *att = m->stage + 3 * nb * bt;
		m->be->widen(l->half + 3 * b0 * bt, qkv, 3 * nb * bt, m->prec);
		m->be->widen(l->half + 3 * rows_c + b0 * bt, att, nb * bt, m->prec);
		drop.row0 = (uint64_t)b0 * (uint64_t)H * (uint64_t)T;
		m->be->attention_backward(m->prec, qkv, att, l->datt + b0 * bt, l->lse + b0 * H * T,
					  l->dqkv + 3 * b0 * bt, (int)nb, T, C, H, l->causal, drop);
	}
}

/* Returns the input gradient it wrote, NULL if none. */
static float *backward_op(dlt_model *m, dlt_layer *l, int batch)
{
	const dlt_backend *be = m->be;
	const dlt_tensor *ti = &m->t[l->in];
	const float *x = dlt_tensor_a(m, l->in), *dy = dlt_tensor_g(m, l->out);
	float *dx = dlt_tensor_g(m, l->in);
	size_t n = (size_t)batch * ti->n;
	int hw = ti->s.h * ti->s.w;

	if (!wants_dx(m, l))
		dx = NULL;
	switch (l->kind) {
	case DLT_LAYER_DENSE: {
		int rows = batch * ti->rows, out = (int)(m->t[l->out].n / ti->rows);
		int in = (int)(ti->n / ti->rows), xf = operand_b(m, l->in, &x);
		/* a tied head runs first in backward: it writes the embedding's
		 * gradient, which the embedding then adds to */
		be->gemm(m->prec | DLT_ROUND_C | DLT_A_EXACT | xf, 1, 0, out, in, rows, 1.0f, dy,
			 out, x, in, 0.0f, pg(m, l->w), in);
		if (l->b >= 0)
			be->bias_grad(dy, pg(m, l->b), rows, out);
		if (dx)
			be->gemm(m->prec | DLT_ROUND_C | DLT_A_EXACT, 0, 0, rows, in, out, 1.0f, dy,
				 out, pw(m, l->w), in, 0.0f, dx, in);
		round_grads(m, l);
		break;
	}
	case DLT_LAYER_EMBEDDING: {
		const dlt_param *q = &m->params[l->w];
		if (!l->shared)
			be->zero(pg(m, l->w), q->n * sizeof(float));
		be->embedding_backward((const int32_t *)x, dy, pg(m, l->w), batch * (int)ti->n,
				       (int)q->dims[1], (int)q->dims[0]);
		return NULL;
	}
	case DLT_LAYER_POSITIONAL:
		be->zero(pg(m, l->w), m->params[l->w].n * sizeof(float));
		be->positional_backward(dy, pg(m, l->w), batch, ti->rows, ti->s.c);
		return NULL;	/* the input's gradient is the output's, shared */
	case DLT_LAYER_LAYERNORM:
		be->zero(pg(m, l->w), m->params[l->w].n * sizeof(float));
		be->zero(pg(m, l->b), m->params[l->b].n * sizeof(float));
		be->layernorm_backward(x, dy, pw(m, l->w), l->mean, l->invstd, dx, pg(m, l->w),
				       pg(m, l->b), batch * ti->rows, (int)(ti->n / ti->rows));
		break;
	case DLT_LAYER_ATTENTION: {
		int rows = batch * ti->rows, C = ti->s.c, xf;
		/* the heads' output from half, where it is kept there */
		const float *att = l->half ? (const float *)(l->half + (size_t)3 * m->max_batch * ti->n)
					   : l->att;
		be->gemm(m->prec | DLT_ROUND_C | DLT_A_EXACT | (l->half ? DLT_B_HALF : DLT_B_EXACT),
			 1, 0, C, C, rows, 1.0f, dy, C, att, C, 0.0f, pg(m, l->w2), C);
		be->bias_grad(dy, pg(m, l->b2), rows, C);
		be->gemm(m->prec | DLT_ROUND_C | DLT_A_EXACT, 0, 0, rows, C, C, 1.0f, dy, C,
			 pw(m, l->w2), C, 0.0f, l->datt, C);
		attention_backward_rows(m, l, batch);
		round_acts(m, l->dqkv, (size_t)rows * 3 * C);
		xf = operand_b(m, l->in, &x);
		be->gemm(m->prec | DLT_ROUND_C | DLT_A_EXACT | xf, 1, 0, 3 * C, C, rows, 1.0f,
			 l->dqkv, 3 * C, x, C, 0.0f, pg(m, l->w), C);
		be->bias_grad(l->dqkv, pg(m, l->b), rows, 3 * C);
		if (dx)
			be->gemm(m->prec | DLT_ROUND_C | DLT_A_EXACT, 0, 0, rows, C, 3 * C, 1.0f,
				 l->dqkv, 3 * C, pw(m, l->w), C, 0.0f, dx, C);
		round_grads(m, l);
		break;
	}
	case DLT_LAYER_CONV2D:
		l->conv.n = batch;
		if (pools_back(m, l)) {
			const dlt_layer *p = &m->layers[l->pool_op];
			be->conv_pool_backward(m->prec | exact(m, l->in, DLT_X_EXACT) | DLT_DY_EXACT,
					       &l->conv, &p->pool, x, dlt_tensor_g(m, p->out),
					       p->arg, pg(m, l->w), pg(m, l->b), m->work);
		} else {
			be->conv_backward(m->prec | exact(m, l->in, DLT_X_EXACT) | DLT_DY_EXACT,
					  &l->conv, x, pw(m, l->w), dy, dx, pg(m, l->w), pg(m, l->b),
					  m->work);
		}
		round_grads(m, l);
		break;
	case DLT_LAYER_MAXPOOL:
		/* fused: the conv two before may do it */
		if (dx && !(l->fused && pools_back(m, l - 2)))
			be->maxpool_backward(&l->pool, dy, l->arg, dx);
		break;
	case DLT_LAYER_AVGPOOL:
	case DLT_LAYER_GLOBAL_AVGPOOL:
		if (dx)
			be->avgpool_backward(&l->pool, dy, dx);
		break;
	case DLT_LAYER_BATCHNORM:
		be->batchnorm_backward(batch, ti->s.c, hw, x, dy, pw(m, l->w), l->mean, l->invstd,
				       dx, pg(m, l->w), pg(m, l->b));
		break;
	case DLT_LAYER_DROPOUT:
		if (dx && l->masked)
			be->mul(dy, l->mask, dx, n);
		else if (dx)
			be->copy(dx, dy, n * sizeof(*dx));
		break;
	case DLT_LAYER_FLATTEN:
	case DLT_OP_ADD:
		return NULL;	/* their gradients are shared, not computed */
	case DLT_OP_FORK:
		if (dx)
			be->add(dy, dlt_tensor_g(m, l->in2), dx, n);
		break;
	default:
		if (l->by_pool)
			return NULL;	/* the pool after it did its backward */
		/* in place or fused, x is the output: all the gradient needs */
		if (dx)
			act_backward_rows(m, l, dy, dx, batch);
	}
	return dx;
}

void dlt_model_backward(dlt_model *m, int batch)
{
	dlt_model_backward_ops(m, 0, m->n_layers, batch);
}

void dlt_model_backward_ops(dlt_model *m, int from, int to, int batch)
{
	for (int i = to - 1; i >= from; i--) {
		dlt_layer *l = &m->layers[i];
		float *dx;
		widen_before(m, i, batch);
		/* a layer norm or an activation, which does not draw: no step */
		if (l->remade_in)
			remake(m, l - 1, batch);
		use_params(m, l, 1);
		dx = backward_op(m, l, batch);
		use_params(m, l, 0);
		if (dx && !dlt_op_rounds(l) && !keeps_exact(m, l, 0))
			round_acts(m, dx, (size_t)batch * m->t[l->in].n);
		if (m->grads_ready && m->ready_at[i] != SIZE_MAX)
			m->grads_ready(m->grads_ctx, m->ready_at[i]);
	}
}

void dlt_model_on_params(dlt_model *m, void (*use)(void *ctx, size_t a, size_t b, int need),
			 void *ctx)
{
	m->params_use = use;
	m->params_ctx = ctx;
}

void dlt_model_params_pass(dlt_model *m, int backward)
{
	for (int i = 0; i < m->n_layers; i++) {
		use_params(m, &m->layers[i], 1);
		use_params(m, &m->layers[i], 0);
	}
	for (int i = m->n_layers - 1; backward && i >= 0; i--) {
		if (m->layers[i].remade_in) {
			use_params(m, &m->layers[i - 1], 1);
			use_params(m, &m->layers[i - 1], 0);
		}
		use_params(m, &m->layers[i], 1);
		use_params(m, &m->layers[i], 0);
	}
}

/* Where the gradients of ops i.. begin in the block: the smallest offset
 * of their params, if no op before i has a param beyond it (params are
 * made in op order, so that holds but where an op has none).  A tied
 * head's weights are left out: their gradient is final only after the
 * embedding's backward. */
int dlt_model_on_grads(dlt_model *m, void (*ready)(void *ctx, size_t off), void *ctx)
{
	size_t *at = dlt_calloc(m->n_layers ? m->n_layers : 1, sizeof(*at));
	size_t end = 0, lo = m->n_weights;
	if (!at)
		return DLT_ENOMEM;
	/* at[i]: first the end of the params of the ops before i */
	for (int i = 0; i < m->n_layers; i++) {
		at[i] = end;
		for (int k = 0; k < 4; k++) {
			int p = op_param(&m->layers[i], k, 0);
			if (p >= 0 && m->params[p].off + m->params[p].n > end)
				end = m->params[p].off + m->params[p].n;
		}
	}
	for (int i = m->n_layers - 1; i >= 0; i--) {
		int own = 0;
		for (int k = 0; k < 4; k++) {
			int p = op_param(&m->layers[i], k, 0);
			if (p >= 0) {
				own = 1;
				if (m->params[p].off < lo)
					lo = m->params[p].off;
			}
		}
		at[i] = own && at[i] <= lo ? lo : SIZE_MAX;
	}
	free(m->ready_at);
	m->ready_at = at;
	m->grads_ready = ready;
	m->grads_ctx = ctx;
	return 0;
}

static int write_params(const dlt_param *p, int n, dlt_archive_writer *w, int codec, int level)
{
	for (int i = 0; i < n; i++) {
		uint64_t dims[4];
		int rc;
		for (int d = 0; d < p[i].ndim; d++)
			dims[d] = (uint64_t)p[i].dims[d];
		rc = dlt_archive_write_tensor(w, p[i].name, DLT_F32, p[i].ndim, dims, p[i].w,
					      codec, level);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int dlt_model_write_buffers(const dlt_model *m, dlt_archive_writer *w, int codec, int level)
{
	return write_params(m->bufs, m->n_bufs, w, codec, level);
}

int dlt_model_write(const dlt_model *m, dlt_archive_writer *w, int codec, int level)
{
	int rc = write_params(m->params, m->n_params, w, codec, level);
	return rc < 0 ? rc : dlt_model_write_buffers(m, w, codec, level);
}

static int read_params(dlt_param *p, int n, dlt_archive *a)
{
	for (int i = 0; i < n; i++) {
		const dlt_tensor_info *t = dlt_archive_find(a, p[i].name);
		int same = t && t->dtype == DLT_F32 && t->ndim == p[i].ndim;
		for (int d = 0; same && d < p[i].ndim; d++)
			same = t->dims[d] == (uint64_t)p[i].dims[d];
		if (!t)
			return dlt_error(DLT_EINPUT, "%s: no tensor '%s' for the model",
					 dlt_archive_path(a), p[i].name);
		if (!same)
			return dlt_error(DLT_EINPUT, "%s: tensor '%s' is not f32 of the model's shape",
					 dlt_archive_path(a), p[i].name);
		DLT_TRY_RC(dlt_archive_read(a, t, p[i].w, p[i].n * sizeof(float)));
	}
	return 0;
}

int dlt_model_read(dlt_model *m, dlt_archive *a)
{
	DLT_TRY_RC(read_params(m->params, m->n_params, a));
	DLT_TRY_RC(read_params(m->bufs, m->n_bufs, a));
	dlt_model_push(m);
	return 0;
}
