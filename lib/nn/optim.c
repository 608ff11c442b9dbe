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

static float *zeroed(size_t n)
{
	float *p = dlt_malloc_aligned(n * sizeof(float));
	if (p)
		memset(p, 0, n * sizeof(float));
	return p;
}

/* The state is one block per moment, sliced like the weights, owned by
 * the params (dlt_model_free frees it), and its copy in the backend's
 * memory (the same block on a host backend). */
int dlt_optim_init(dlt_optim *o, const dlt_optim_cfg *cfg, dlt_model *m, double loss_scale,
		   int growth_interval)
{
	int rc = check_cfg(cfg);
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
	if (!m->n_params || !m->n_weights)
		return 0;
	if (cfg->kind != DLT_OPT_SGD || cfg->momentum != 0.0)
		if (!(mb = zeroed(m->n_weights)))
			return DLT_ENOMEM;
	if (cfg->kind != DLT_OPT_SGD && !(vb = zeroed(m->n_weights))) {
		free(mb);
		return DLT_ENOMEM;
	}
	free(m->params[0].m);
	free(m->params[0].v);
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

/* All params are one contiguous block (see make_params), so one kernel
 * call updates the whole model. */
/* The gradients' global L2 norm: summed in double, in param order, on
 * the host (the gradients come down from a GPU), so every backend and
 * every thread count gives the same bits. */
static double grad_norm(dlt_model *m)
{
	const float *g = m->dev_g;
	double s = 0;
	if (!m->be->host) {
		m->be->download(m->params[0].g, m->dev_g, m->n_weights * sizeof(float));
		g = m->params[0].g;
	}
	for (size_t i = 0; i < m->n_weights; i++)
		s += (double)g[i] * g[i];
	return sqrt(s);
}

int dlt_optim_step(dlt_optim *o, dlt_model *m, double lr)
{
	const dlt_optim_cfg *c = &o->cfg;
	long long t;
	o->step++;
	if (!m->n_params || !m->n_weights)
		return 1;
	if (o->dynamic) {
		if (o->be->nonfinite(m->dev_g, m->n_weights)) {
			/* an overflow: this step's gradients are lost, and a
			 * smaller scale should keep the next ones in range */
			o->skipped++;
			o->scale *= 0.5;
			o->clean = 0;
			m->loss_scale = (float)o->scale;
			return 0;
		}
		o->be->scale(m->dev_g, m->n_weights, (float)(1.0 / o->scale));
		if (++o->clean == o->growth_interval) {
			o->scale *= 2.0;
			o->clean = 0;
		}
		m->loss_scale = (float)o->scale;
	}
	if (o->clip > 0) {
		/* PyTorch's clip_grad_norm_: the global norm, scaled down to
		 * clip when above it */
		o->grad_norm = grad_norm(m);
		if (o->grad_norm + 1e-6 > o->clip)
			o->be->scale(m->dev_g, m->n_weights, (float)(o->clip / (o->grad_norm + 1e-6)));
	}
	/* Adam's bias correction counts the updates made */
	t = o->step - o->skipped;
	if (c->kind == DLT_OPT_SGD)
		o->be->sgd(m->dev_w, m->dev_g, m->dev_m, m->n_weights, (float)lr,
			   (float)c->momentum, c->nesterov, (float)c->weight_decay, t == 1);
	else if (c->kind == DLT_OPT_ADAMW && c->decay_matrices)
		/* GPT-2's convention: weight decay on matrices (and conv
		 * kernels), not on biases, norms' gains or vectors */
		for (int k = 0; k < m->n_params; k++) {
			const dlt_param *q = &m->params[k];
			o->be->adam(m->dev_w + q->off, m->dev_g + q->off, m->dev_m + q->off,
				    m->dev_v + q->off, q->n, (float)lr, (float)c->beta1,
				    (float)c->beta2, (float)c->eps,
				    q->ndim >= 2 ? (float)c->weight_decay : 0.0f, 1, t);
		}
	else
		o->be->adam(m->dev_w, m->dev_g, m->dev_m, m->dev_v, m->n_weights, (float)lr,
			    (float)c->beta1, (float)c->beta2, (float)c->eps,
			    (float)c->weight_decay, c->kind == DLT_OPT_ADAMW, t);
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
