/* Optimisers and learning-rate schedules, with PyTorch's semantics so that
 * hyper-parameters carry over. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn.h"

static int check_cfg(const dlt_optim_cfg *c)
{
	if (c->kind != DLT_OPT_SGD && c->kind != DLT_OPT_ADAM && c->kind != DLT_OPT_ADAMW)
		return dlt_error(DLT_EINPUT, "unknown optimizer kind %d", c->kind);
	if (!(c->lr >= 0.0) || !(c->weight_decay >= 0.0))
		return dlt_error(DLT_EINPUT, "optimizer: lr and weight_decay must be >= 0");
	if (c->kind == DLT_OPT_SGD) {
		if (!(c->momentum >= 0.0))
			return dlt_error(DLT_EINPUT, "sgd: momentum must be >= 0");
		if (c->nesterov && c->momentum == 0.0)
			return dlt_error(DLT_EINPUT, "sgd: nesterov needs a momentum above 0");
		return 0;
	}
	if (!(c->beta1 >= 0.0 && c->beta1 < 1.0) || !(c->beta2 >= 0.0 && c->beta2 < 1.0))
		return dlt_error(DLT_EINPUT, "adam: betas must be in [0, 1)");
	if (!(c->eps >= 0.0))
		return dlt_error(DLT_EINPUT, "adam: eps must be >= 0");
	return 0;
}

/* This rank's range of the block (the whole block for one process) */
static size_t range_lo(const dlt_optim *o)
{
	return o->has_ranks ? o->ranks.ranges[o->ranks.rank] : 0;
}

static size_t range_hi(const dlt_optim *o, const dlt_model *m)
{
	return o->has_ranks ? o->ranks.ranges[o->ranks.rank + 1] : m->n_weights;
}

/* ZeRO: m and v of this rank's range alone, zeros, in the backend's
 * memory; the model keeps none. */
static int init_shard(dlt_optim *o, dlt_model *m, int moments)
{
	size_t n = range_hi(o, m) - range_lo(o), bytes = n * sizeof(float);
	float **state[2] = { &o->sm, &o->sv };

	dlt_free_aligned(m->params[0].m);
	dlt_free_aligned(m->params[0].v);
	for (int k = 0; k < m->n_params; k++)
		m->params[k].m = m->params[k].v = NULL;
	if (!m->be->host) {
		m->be->free(m->dev_m);
		m->be->free(m->dev_v);
	}
	m->dev_m = m->dev_v = NULL;
	for (int i = 0; i < moments && n; i++) {
		if (m->be->host ? !(*state[i] = dlt_zalloc_aligned(bytes))
				: !(*state[i] = m->be->alloc(bytes)))
			return dlt_error(DLT_ENOMEM, "out of %s memory for the optimizer state",
					 m->be->name);
		if (!m->be->host)
			m->be->zero(*state[i], bytes);
		o->state_bytes += bytes;
	}
	return 0;
}

void dlt_optim_free(dlt_optim *o)
{
	void (*release)(void *) = o->be && !o->be->host ? o->be->free : dlt_free_aligned;
	if (o->sm)
		release(o->sm);
	if (o->sv)
		release(o->sv);
	o->sm = o->sv = NULL;
}

/* The state is one block per moment, sliced like the weights, owned by
 * the params (dlt_model_free frees it), and its copy in the backend's
 * memory (the same block on a host backend). */
int dlt_optim_init(dlt_optim *o, const dlt_optim_cfg *cfg, dlt_model *m, double loss_scale,
		   int growth_interval)
{
	return dlt_optim_init_ranks(o, cfg, m, loss_scale, growth_interval, NULL);
}

int dlt_optim_init_ranks(dlt_optim *o, const dlt_optim_cfg *cfg, dlt_model *m,
			 double loss_scale, int growth_interval, const dlt_optim_ranks *r)
{
	int rc = check_cfg(cfg), moments;
	float *mb = NULL, *vb = NULL;
	size_t off = 0, bytes = m->n_weights * sizeof(float);
	if (rc)
		return rc;
	memset(o, 0, sizeof(*o));
	o->cfg = *cfg;
	o->be = m->be;
	o->dynamic = loss_scale > 0;
	o->scale = o->dynamic ? loss_scale : 1.0;
	o->growth_interval = growth_interval;
	m->loss_scale = (float)o->scale;
	if (r) {
		o->has_ranks = 1;
		o->ranks = *r;
	}
	if (!m->n_params || !m->n_weights)
		return 0;
	moments = cfg->kind != DLT_OPT_SGD ? 2 : cfg->momentum != 0.0;
	if (r && r->shard)
		return init_shard(o, m, moments);
	if (moments && !(mb = dlt_zalloc_aligned(bytes)))
		return DLT_ENOMEM;
	if (moments > 1 && !(vb = dlt_zalloc_aligned(bytes))) {
		dlt_free_aligned(mb);
		return DLT_ENOMEM;
	}
	o->state_bytes = (size_t)moments * bytes;
	dlt_free_aligned(m->params[0].m);
	dlt_free_aligned(m->params[0].v);
	for (int k = 0; k < m->n_params; k++) {
		m->params[k].m = mb ? mb + off : NULL;
		m->params[k].v = vb ? vb + off : NULL;
		off += m->params[k].n;
	}
	if (m->be->host) {
		m->dev_m = mb;
		m->dev_v = vb;
		return 0;
	}
	m->be->free(m->dev_m);
	m->be->free(m->dev_v);
	m->dev_m = mb ? m->be->alloc(bytes) : NULL;
	m->dev_v = vb ? m->be->alloc(bytes) : NULL;
	if ((mb && !m->dev_m) || (vb && !m->dev_v))
		return dlt_error(DLT_ENOMEM, "out of %s memory for the optimizer state",
				 m->be->name);
	return 0;
}

/* The gradients' sum of squares over [lo, hi): in double, in the order
 * of DLT_SQUARES_CHUNK, where they are (a GPU's own), so that every
 * backend and every thread count gives the same bits */
static double sum_squares(dlt_model *m, size_t lo, size_t hi)
{
	return hi > lo ? m->be->sum_squares(m->dev_g + lo, hi - lo) : 0;
}

/* The global norm of ranks: the ranges' sums of squares, each rank's own
 * when they shard (the others' come as zeros but one, which adds them
 * exactly), added in rank order. */
static int ranks_norm(dlt_optim *o, dlt_model *m, double *norm)
{
	const dlt_optim_ranks *r = &o->ranks;
	double *part = dlt_calloc((size_t)r->size, sizeof(double)), s = 0;
	int rc = 0;

	if (!part)
		return DLT_ENOMEM;
	for (int k = 0; k < r->size; k++)
		if (!r->shard || k == r->rank)
			part[k] = sum_squares(m, r->ranges[k], r->ranges[k + 1]);
	if (r->shard)
		rc = r->sum(r->ctx, part, r->size);
	for (int k = 0; k < r->size; k++)
		s += part[k];
	free(part);
	*norm = sqrt(s);
	return rc;
}

static double grad_norm(dlt_model *m)
{
	return sqrt(sum_squares(m, 0, m->n_weights));
}

/* Whether any gradient is inf or NaN: of all ranks, when they shard */
static int nonfinite(dlt_optim *o, dlt_model *m, size_t lo, size_t hi)
{
	double bad = (double)o->be->nonfinite(m->dev_g + lo, hi - lo);
	int rc;
	if (o->has_ranks && o->ranks.shard && (rc = o->ranks.sum(o->ranks.ctx, &bad, 1)) < 0)
		return rc;
	return bad > 0;
}

/* All params are one contiguous block (see make_params), so one kernel
 * call updates the whole model (or a rank's range of it). */
int dlt_optim_step(dlt_optim *o, dlt_model *m, double lr)
{
	const dlt_optim_cfg *c = &o->cfg;
	/* the part this rank updates, and where it starts in m and v */
	const int shard = o->has_ranks && o->ranks.shard;
	const size_t lo = shard ? range_lo(o) : 0, hi = shard ? range_hi(o, m) : m->n_weights;
	float *mm = shard ? o->sm : m->dev_m, *vv = shard ? o->sv : m->dev_v;
	const size_t at = shard ? lo : 0;
	/* the last factor the gradients take, which the update applies as it
	 * reads them (the bits of a pass of scale first, without the pass) */
	float gscale = 1.0f;
	long long t;
	int rc;
	o->step++;
	if (!m->n_params || !m->n_weights)
		return 1;
	if (o->dynamic) {
		if ((rc = nonfinite(o, m, lo, hi)) < 0)
			return rc;
		if (rc) {
			/* an overflow: this step's gradients are lost, and a
			 * smaller scale should keep the next ones in range */
			o->skipped++;
			o->scale *= 0.5;
			o->clean = 0;
			m->loss_scale = (float)o->scale;
			return 0;
		}
		/* clipping's norm is of the gradients unscaled */
		if (o->clip > 0)
			o->be->scale(m->dev_g + lo, hi - lo, (float)(1.0 / o->scale));
		else
			gscale = (float)(1.0 / o->scale);
		if (++o->clean == o->growth_interval) {
			o->scale *= 2.0;
			o->clean = 0;
		}
		m->loss_scale = (float)o->scale;
	}
	if (o->clip > 0) {
		/* PyTorch's clip_grad_norm_: the global norm, scaled down to
		 * clip when above it */
		if (o->has_ranks && (rc = ranks_norm(o, m, &o->grad_norm)) < 0)
			return rc;
		if (!o->has_ranks)
			o->grad_norm = grad_norm(m);
		if (o->grad_norm + 1e-6 > o->clip)
			gscale = (float)(o->clip / (o->grad_norm + 1e-6));
	}
	/* Adam's bias correction counts the updates made */
	t = o->step - o->skipped;
	if (hi == lo)
		return 1;	/* a rank of more ranks than floats */
	if (c->kind == DLT_OPT_SGD)
		o->be->sgd(m->dev_w + lo, m->dev_g + lo, mm, hi - lo, (float)lr,
			   (float)c->momentum, c->nesterov, (float)c->weight_decay, t == 1, gscale);
	else if (c->kind == DLT_OPT_ADAMW && c->decay_matrices)
		/* GPT-2's convention: weight decay on matrices (and conv
		 * kernels), not on biases, norms' gains or vectors; each
		 * param's part in [lo, hi) */
		for (int k = 0; k < m->n_params; k++) {
			const dlt_param *q = &m->params[k];
			size_t a = q->off > lo ? q->off : lo, b = q->off + q->n < hi ? q->off + q->n : hi;
			if (a >= b)
				continue;
			o->be->adam(m->dev_w + a, m->dev_g + a, mm + (a - at), vv + (a - at), b - a,
				    (float)lr, (float)c->beta1, (float)c->beta2, (float)c->eps,
				    q->ndim >= 2 ? (float)c->weight_decay : 0.0f, 1, t, gscale);
		}
	else
		o->be->adam(m->dev_w + lo, m->dev_g + lo, mm, vv, hi - lo, (float)lr,
			    (float)c->beta1, (float)c->beta2, (float)c->eps,
			    (float)c->weight_decay, c->kind == DLT_OPT_ADAMW, t, gscale);
	return 1;
}

/* The learning rate at update `step` (0-based), base = o->lr:
 *
 *   step < warmup:  base * (step + 1) / warmup            (any schedule)
 *   constant:       base
 *   step:           base * gamma ^ floor(epoch / step_every),
 *                   epoch = floor(step / steps_per_epoch)
 *   cosine:         min_lr + (base - min_lr) * (1 + cos(pi * t)) / 2,
 *                   t = min(1, (step - warmup) / (total_steps - warmup))
 *
 * so cosine starts at base right after warmup and reaches min_lr at
 * total_steps; the step schedule counts epochs from the start of the run,
 * warmup included. */
double dlt_lr_at(const dlt_optim_cfg *o, const dlt_sched_cfg *s, long long step,
		 long long steps_per_epoch, long long total_steps)
{
	double base = o->lr;
	if (step < s->warmup)
		return base * (double)(step + 1) / s->warmup;
	switch (s->kind) {
	case DLT_SCHED_STEP: {
		long long epoch = step / (steps_per_epoch > 0 ? steps_per_epoch : 1);
		long long every = s->step_every > 0 ? s->step_every : 1;
		return base * pow(s->gamma, (double)(epoch / every));
	}
	case DLT_SCHED_COSINE: {
		long long span = total_steps - s->warmup;
		double t = span > 0 ? (double)(step - s->warmup) / span : 1.0;
		if (t > 1.0)
			t = 1.0;
		return s->min_lr + (base - s->min_lr) * 0.5 * (1.0 + cos(M_PI * t));
	}
	default:
		return base;
	}
}
