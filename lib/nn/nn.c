/* The model: layers from the config, buffers planned once, forward and
 * backward through the backend's table.
 *
 * Buffers.  act[i+1] is layer i's output, grad[i] the loss's gradient with
 * respect to act[i].  Layers that change nothing share their input's
 * buffer: flatten (act and grad), and an activation fused into the dense
 * before it, whose output buffer then holds act(x W^T + b) directly.  A
 * buffer is freed once, where it first appears. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive/archive.h"
#include "nn/nn.h"

struct dlt_layer {
	int kind;		/* DLT_LAYER_* */
	int in, out;		/* features per row */
	int act;		/* DLT_ACT_*: an activation's own; for dense, the fused one */
	float slope;		/* leaky_relu */
	float rate;		/* dropout */
	int fused;		/* an activation already applied by the dense before it */
	int w, b;		/* dense: indices in params; b is -1 without bias */
	float *mask;		/* dropout: 0 or 1 / (1 - rate) per element */
	int masked;		/* dropout: the last forward applied mask */
};

/* Parameter init draws from dlt_rng stream INIT_STREAM + param index of
 * the seed: a range of its own, apart from the loader's streams. */
#define INIT_STREAM 0x40000000u

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
		return DLT_ACT_GELU;
	case DLT_LAYER_TANH:
		return DLT_ACT_TANH;
	case DLT_LAYER_SIGMOID:
		return DLT_ACT_SIGMOID;
	default:
		return DLT_ACT_NONE;
	}
}

/* An activation can be fused into dense when its gradient follows from
 * its output alone (the pre-activation is never stored): not gelu. */
static int fusable(const dlt_layer *l)
{
	switch (l->act) {
	case DLT_ACT_RELU:
	case DLT_ACT_TANH:
	case DLT_ACT_SIGMOID:
		return 1;
	case DLT_ACT_LEAKY_RELU:
		return l->slope >= 0.0f;
	default:
		return 0;
	}
}

/* Shapes and layer settings from the config; counts the params. */
static int plan_layers(dlt_model *m, const dlt_config *c, int n_classes)
{
	int feat = m->in_features;
	for (int i = 0; i < m->n_layers; i++) {
		const dlt_layer_cfg *lc = &c->layers[i];
		dlt_layer *l = &m->layers[i];
		l->kind = lc->kind;
		l->in = feat;
		l->act = act_of(lc->kind);
		l->slope = lc->slope;
		l->w = l->b = -1;
		switch (lc->kind) {
		case DLT_LAYER_DENSE:
			if (lc->units < 1)
				return cfg_error(c, lc->line, "dense needs at least 1 unit");
			feat = lc->units;
			l->w = m->n_params++;
			if (lc->bias)
				l->b = m->n_params++;
			break;
		case DLT_LAYER_DROPOUT:
			if (!(lc->rate >= 0.0f && lc->rate < 1.0f))
				return cfg_error(c, lc->line, "dropout rate %g is not in [0, 1)",
						 lc->rate);
			l->rate = lc->rate;
			break;
		case DLT_LAYER_FLATTEN:
			break;
		default:
			if (l->act == DLT_ACT_NONE)
				return cfg_error(c, lc->line, "layer kind %d is not supported",
						 lc->kind);
			if (i > 0 && l[-1].kind == DLT_LAYER_DENSE && fusable(l)) {
				l->fused = 1;
				l[-1].act = l->act;
				l[-1].slope = l->slope;
			}
		}
		l->out = feat;
	}
	if (feat != n_classes)
		return cfg_error(c, m->n_layers ? c->layers[m->n_layers - 1].line : c->model_line,
				 "the model ends with %d features but the data has %d classes",
				 feat, n_classes);
	return 0;
}

static void init_uniform(float *p, size_t n, float bound, uint64_t seed, int index)
{
	dlt_rng r;
	dlt_rng_init(&r, seed, INIT_STREAM + (uint64_t)index);
	for (size_t i = 0; i < n; i++)
		p[i] = bound * (2.0f * dlt_rng_uniform(&r) - 1.0f);
}

static void describe_param(dlt_param *p, int layer, const char *role, int out, int in)
{
	snprintf(p->name, sizeof(p->name), "%d.%s", layer, role);
	p->ndim = in ? 2 : 1;
	p->dims[0] = out;
	p->dims[1] = in;
	p->n = (size_t)out * (in ? in : 1);
}

/* Every param's w (and g) is a slice of one block, in order, so the
 * optimiser and the all-reduce can treat them as one array. */
static int make_params(dlt_model *m, uint64_t seed)
{
	float *w, *g;
	size_t off = 0;
	if (!(m->params = dlt_calloc(m->n_params ? m->n_params : 1, sizeof(*m->params))))
		return DLT_ENOMEM;
	for (int i = 0; i < m->n_layers; i++) {
		dlt_layer *l = &m->layers[i];
		if (l->w >= 0)
			describe_param(&m->params[l->w], i, "w", l->out, l->in);
		if (l->b >= 0)
			describe_param(&m->params[l->b], i, "b", l->out, 0);
	}
	for (int k = 0; k < m->n_params; k++)
		if (__builtin_add_overflow(m->n_weights, m->params[k].n, &m->n_weights) ||
		    m->n_weights > SIZE_MAX / sizeof(float))
			return dlt_error(DLT_ENOMEM, "the model has too many parameters");
	if (!m->n_weights)
		return 0;
	w = dlt_malloc_aligned(m->n_weights * sizeof(float));
	g = w ? dlt_malloc_aligned(m->n_weights * sizeof(float)) : NULL;
	if (!g) {
		free(w);
		return DLT_ENOMEM;
	}
	memset(g, 0, m->n_weights * sizeof(float));
	for (int k = 0; k < m->n_params; k++) {
		m->params[k].w = w + off;
		m->params[k].g = g + off;
		off += m->params[k].n;
	}
	/* PyTorch's nn.Linear: weights and bias uniform in +-1/sqrt(fan_in) */
	for (int i = 0; i < m->n_layers; i++) {
		dlt_layer *l = &m->layers[i];
		float bound = 1.0f / sqrtf((float)l->in);
		if (l->w >= 0)
			init_uniform(m->params[l->w].w, m->params[l->w].n, bound, seed, l->w);
		if (l->b >= 0)
			init_uniform(m->params[l->b].w, m->params[l->b].n, bound, seed, l->b);
	}
	return 0;
}

static float *alloc_rows(int rows, int features)
{
	size_t n;
	if (!dlt_mul_ok((size_t)rows, (size_t)features * sizeof(float), &n)) {
		dlt_error(DLT_ENOMEM, "a batch of %d x %d features is too large", rows, features);
		return NULL;
	}
	return dlt_malloc_aligned(n);
}

static int make_buffers(dlt_model *m)
{
	int n = m->n_layers;
	if (!(m->act[0] = alloc_rows(m->max_batch, m->in_features)))
		return DLT_ENOMEM;
	for (int i = 0; i < n; i++) {
		dlt_layer *l = &m->layers[i];
		if (l->kind == DLT_LAYER_FLATTEN || l->fused)
			m->act[i + 1] = m->act[i];
		else if (!(m->act[i + 1] = alloc_rows(m->max_batch, l->out)))
			return DLT_ENOMEM;
		if (l->kind == DLT_LAYER_DROPOUT && !(l->mask = alloc_rows(m->max_batch, l->out)))
			return DLT_ENOMEM;
	}
	/* grad[0], the input's, only when there are no layers: then it is
	 * the logits' gradient */
	for (int i = n; i >= (n ? 1 : 0); i--) {
		if (i < n && m->layers[i].kind == DLT_LAYER_FLATTEN)
			m->grad[i] = m->grad[i + 1];
		else if (!(m->grad[i] = alloc_rows(m->max_batch, i ? m->layers[i - 1].out
								      : m->in_features)))
			return DLT_ENOMEM;
	}
	return 0;
}

int dlt_model_init(dlt_model *m, const dlt_config *c, const dlt_backend *be,
		   int in_features, int n_classes, int max_batch)
{
	int rc;
	memset(m, 0, sizeof(*m));
	if (in_features < 1 || n_classes < 1 || max_batch < 1)
		return dlt_error(DLT_EINPUT, "bad model size: %d features, %d classes, batch %d",
				 in_features, n_classes, max_batch);
	m->be = be;
	m->n_layers = c->n_layers;
	m->max_batch = max_batch;
	m->in_features = in_features;
	m->out_features = n_classes;
	m->seed = (uint64_t)c->train.seed;
	m->layers = dlt_calloc((size_t)m->n_layers + 1, sizeof(*m->layers));
	m->act = dlt_calloc((size_t)m->n_layers + 1, sizeof(*m->act));
	m->grad = dlt_calloc((size_t)m->n_layers + 1, sizeof(*m->grad));
	if (!m->layers || !m->act || !m->grad) {
		rc = DLT_ENOMEM;
		goto fail;
	}
	DLT_TRY(plan_layers(m, c, n_classes));
	DLT_TRY(make_params(m, m->seed));
	DLT_TRY(make_buffers(m));
	return 0;
fail:
	dlt_model_free(m);
	return rc;
}

void dlt_model_free(dlt_model *m)
{
	int n = m->n_layers;
	if (m->act)
		for (int i = 0; i <= n; i++)
			if (i == 0 || m->act[i] != m->act[i - 1])
				free(m->act[i]);
	/* grad[0] belongs to the caller, unless there are no layers */
	if (m->grad)
		for (int i = n; i >= (n ? 1 : 0); i--)
			if (i == n || m->grad[i] != m->grad[i + 1])
				free(m->grad[i]);
	if (m->layers)
		for (int i = 0; i < n; i++)
			free(m->layers[i].mask);
	if (m->params) {
		free(m->params[0].w);
		free(m->params[0].g);
		free(m->params[0].m);
		free(m->params[0].v);
	}
	free(m->params);
	free(m->layers);
	free(m->act);
	free(m->grad);
	memset(m, 0, sizeof(*m));
}

/* The dropout mask's Philox stream: step and layer, offset so that it is
 * never 0 (stream 0 is the one place kernel streams meet dlt_rng's). */
static uint64_t dropout_stream(long long step, int layer)
{
	return ((uint64_t)step + 1) << 16 | (uint64_t)layer;
}

static void dense_forward(dlt_model *m, dlt_layer *l, const float *x, float *y, int batch)
{
	const float *b = l->b >= 0 ? m->params[l->b].w : NULL;
	m->be->gemm(0, 1, batch, l->out, l->in, 1.0f, x, l->in, m->params[l->w].w, l->in,
		    0.0f, y, l->out);
	if (b || l->act != DLT_ACT_NONE)
		m->be->bias_act(y, b, batch, l->out, l->act, l->slope);
}

float *dlt_model_forward(dlt_model *m, int batch, int train, long long step)
{
	if (batch < 1 || batch > m->max_batch) {
		dlt_error(DLT_EINPUT, "batch of %d rows, the model was planned for 1 to %d",
			  batch, m->max_batch);
		return NULL;
	}
	for (int i = 0; i < m->n_layers; i++) {
		dlt_layer *l = &m->layers[i];
		const float *x = m->act[i];
		float *y = m->act[i + 1];
		size_t n = (size_t)batch * l->out;
		switch (l->kind) {
		case DLT_LAYER_DENSE:
			dense_forward(m, l, x, y, batch);
			break;
		case DLT_LAYER_DROPOUT:
			l->masked = train && l->rate > 0.0f;
			if (l->masked)
				m->be->dropout(x, y, l->mask, n, l->rate, m->seed,
					       dropout_stream(step, i));
			else
				memcpy(y, x, n * sizeof(*y));
			break;
		case DLT_LAYER_FLATTEN:
			break;
		default:
			if (!l->fused)
				m->be->act_forward(x, y, n, l->act, l->slope);
		}
	}
	return m->act[m->n_layers];
}

double dlt_model_loss(dlt_model *m, const int32_t *labels, int batch, int *correct)
{
	double sum;
	int hits;
	m->be->softmax_xent(m->act[m->n_layers], labels, batch, m->out_features,
			    m->grad[m->n_layers], &sum, &hits);
	if (correct)
		*correct = hits;
	return sum / batch;
}

static void dense_backward(dlt_model *m, dlt_layer *l, const float *x, const float *dy,
			   float *dx, int batch)
{
	const dlt_param *w = &m->params[l->w];
	m->be->gemm(1, 0, l->out, l->in, batch, 1.0f, dy, l->out, x, l->in, 0.0f, w->g, l->in);
	if (l->b >= 0)
		m->be->bias_grad(dy, m->params[l->b].g, batch, l->out);
	if (dx)
		m->be->gemm(0, 0, batch, l->in, l->out, 1.0f, dy, l->out, w->w, l->in, 0.0f, dx,
			    l->in);
}

void dlt_model_backward(dlt_model *m, int batch)
{
	for (int i = m->n_layers - 1; i >= 0; i--) {
		dlt_layer *l = &m->layers[i];
		const float *dy = m->grad[i + 1];
		float *dx = m->grad[i];
		size_t n = (size_t)batch * l->in;
		if (l->kind == DLT_LAYER_DENSE) {
			dense_backward(m, l, m->act[i], dy, dx, batch);
			continue;
		}
		if (!dx || dx == dy)
			continue;
		if (l->kind == DLT_LAYER_DROPOUT && l->masked)
			m->be->mul(dy, l->mask, dx, n);
		else if (l->kind == DLT_LAYER_DROPOUT || l->kind == DLT_LAYER_FLATTEN)
			memcpy(dx, dy, n * sizeof(*dx));
		else
			/* a fused activation has act[i] == act[i + 1], its
			 * output, which is all its gradient needs */
			m->be->act_backward(m->act[i], m->act[i + 1], dy, dx, n, l->act,
					    l->slope);
	}
}

int dlt_model_write(const dlt_model *m, dlt_archive_writer *w)
{
	for (int i = 0; i < m->n_params; i++) {
		const dlt_param *p = &m->params[i];
		uint64_t dims[4];
		int rc;
		for (int d = 0; d < p->ndim; d++)
			dims[d] = (uint64_t)p->dims[d];
		rc = dlt_archive_write_tensor(w, p->name, DLT_F32, p->ndim, dims, p->w, DLT_RAW, 0);
		if (rc < 0)
			return rc;
	}
	return 0;
}
