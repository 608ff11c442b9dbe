/* dist.pipeline: stages, micro-batches and their order (pipe.h). */
#include <stdlib.h>
#include <string.h>

#include "nn/model.h"
#include "train/pipe.h"

/* The stages' first ops where the config gives none: the cuts that make
 * the costliest stage cheapest, by dynamic programming over the ops where
 * a stage may begin.  best[k][j]: the cost of the costliest of k stages
 * over the ops before cut j, at its cheapest. */
static int balance(dlt_pipe *p, const char *where)
{
	const dlt_model *m = p->m;
	int n = m->n_layers, S = p->stages, nc = 0, rc = 0;
	int *cut = malloc(((size_t)n + 1) * sizeof(int)), *from = NULL;
	double *pre = malloc(((size_t)n + 1) * sizeof(double)), *best = NULL;

	if (!cut || !pre) {
		rc = DLT_ENOMEM;
		goto out;
	}
	pre[0] = 0.0;
	for (int i = 0; i < n; i++)
		pre[i + 1] = pre[i] + dlt_model_op_cost(m, i);
	cut[nc++] = 0;
	for (int i = 1; i < n; i++)
		if (dlt_model_can_cut(m, i))
			cut[nc++] = i;
	cut[nc++] = n;
	if (nc - 1 < S) {
		rc = dlt_error(DLT_EINPUT, "%s: dist.pipeline.stages %d: the model has %d places "
			       "where a stage may begin (between residual blocks and layers), for "
			       "at most %d stages", where, S, nc - 2, nc - 1);
		goto out;
	}
	best = malloc((size_t)(S + 1) * nc * sizeof(double));
	from = malloc((size_t)(S + 1) * nc * sizeof(int));
	if (!best || !from) {
		rc = DLT_ENOMEM;
		goto out;
	}
	for (int k = 0; k <= S; k++)
		for (int j = 0; j < nc; j++)
			best[k * nc + j] = k == 0 && j == 0 ? 0.0 : -1.0;
	for (int k = 1; k <= S; k++)
		for (int j = k; j < nc; j++)
			for (int i = k - 1; i < j; i++) {
				double prev = best[(k - 1) * nc + i], c;
				if (prev < 0.0)
					continue;
				c = pre[cut[j]] - pre[cut[i]];
				c = c > prev ? c : prev;
				if (best[k * nc + j] < 0.0 || c < best[k * nc + j]) {
					best[k * nc + j] = c;
					from[k * nc + j] = i;
				}
			}
	for (int k = S, j = nc - 1; k > 0; k--) {
		p->first[k] = cut[j];
		j = from[k * nc + j];
	}
	p->first[0] = 0;
out:
	free(cut);
	free(pre);
	free(best);
	free(from);
	return rc;
}

/* The stages' first ops from the config's split: the ops of those layers */
static int split_at(dlt_pipe *p, const dlt_config *c, const char *where)
{
	const dlt_model *m = p->m;
	p->first[0] = 0;
	p->first[p->stages] = m->n_layers;
	for (int k = 1; k < p->stages; k++) {
		int want = c->dist.pipe.split[k - 1], i = 0;
		while (i < m->n_layers && m->layers[i].index != want)
			i++;
		if (i == m->n_layers || !dlt_model_can_cut(m, i))
			return dlt_error(DLT_EINPUT, "%s: dist.pipeline.split: a stage cannot begin at "
					 "layer %d (%s)", where, want, i == m->n_layers
					 ? "the model has no such layer"
					 : "inside a residual block, or after a layer that backward "
					   "needs with it");
		p->first[k] = i;
	}
	return 0;
}

int dlt_pipe_init(dlt_pipe *p, const dlt_config *c, dlt_model *m, dlt_comm *comm, int batch,
		  const char *where)
{
	int S = c->dist.pipe.stages, ranks = comm ? comm->size : 1;
	size_t n_in, n_out, n_acc;

	memset(p, 0, sizeof(*p));
	p->tied = -1;
	p->m = m;
	p->c = comm;
	p->stages = S;
	p->micro = c->dist.pipe.micro;
	p->schedule = c->dist.pipe.schedule;
	/* its forward runs twice a micro-batch: the running statistics would
	 * move twice */
	for (int i = 0; i < m->n_layers; i++)
		if (m->layers[i].kind == DLT_LAYER_BATCHNORM)
			return dlt_error(DLT_EINPUT, "%s: dist.pipeline: a model with batchnorm "
					 "cannot run in a pipeline", where);
	if (!(p->first = calloc((size_t)S + 1, sizeof(int))) ||
	    !(p->ranges = calloc((size_t)S + 1, sizeof(size_t))))
		return DLT_ENOMEM;
	p->first[S] = m->n_layers;
	DLT_TRY_RC(c->dist.pipe.n_split ? split_at(p, c, where) : balance(p, where));
	if (ranks % S)
		return dlt_error(DLT_EINPUT, "%s: dist.pipeline.stages %d runs on a multiple of %d "
				 "ranks (its stages times data-parallel replicas), not %d", where, S,
				 S, ranks);
	p->width = ranks / S;
	p->stage = comm->rank / p->width;
	p->replica = comm->rank % p->width;
	for (int k = 1; k < S; k++)
		p->ranges[k] = dlt_model_params_from(m, p->first[k]);
	p->ranges[S] = m->n_weights;
	p->lo = p->first[p->stage];
	p->hi = p->first[p->stage + 1];
	for (int i = 0; i < m->n_layers; i++)
		if (m->layers[i].kind == DLT_LAYER_DENSE && m->layers[i].tied)
			p->tied = m->layers[i].w;
	p->w_in = m->t[m->layers[p->lo].in].n;
	p->w_out = m->t[m->layers[p->hi - 1].out].n;
	n_in = (size_t)batch * p->w_in;
	n_out = (size_t)batch * p->w_out;
	n_acc = p->ranges[p->stage + 1] - p->ranges[p->stage];
	/* in the backend's memory, which the comm sends from (a GPU's) */
	if ((p->stage > 0 && (!(p->in = m->be->alloc(n_in * sizeof(float))) ||
			      !(p->gin = m->be->alloc(n_in * sizeof(float))))) ||
	    (p->stage < S - 1 && (!(p->out = m->be->alloc(n_out * sizeof(float))) ||
				  !(p->gout = m->be->alloc(n_out * sizeof(float))))) ||
	    (n_acc && !(p->acc = m->be->alloc(n_acc * sizeof(float)))) ||
	    (p->tied >= 0 && !(p->tied_acc = m->be->alloc(m->params[p->tied].n *
							   sizeof(float)))))
		return dlt_error(DLT_ENOMEM, "out of %s memory for the pipeline's stashes",
				 m->be->name);
	return dlt_comm_p2p_open(comm);
}

void dlt_pipe_rank_ranges(const dlt_pipe *p, size_t *ranges)
{
	for (int s = 0; s < p->stages; s++) {
		size_t lo = p->ranges[s], n = p->ranges[s + 1] - lo;
		size_t q = n / (size_t)p->width, rem = n % (size_t)p->width;
		for (size_t r = 0; r < (size_t)p->width; r++)
			ranges[(size_t)s * p->width + r] = lo + q * r + (r < rem ? r : rem);
	}
	ranges[p->stages * p->width] = p->ranges[p->stages];
}

void dlt_pipe_free(dlt_pipe *p)
{
	float *stash[] = { p->in, p->out, p->gout, p->gin, p->acc, p->tied_acc };
	free(p->first);
	free(p->ranges);
	for (size_t i = 0; i < sizeof(stash) / sizeof(stash[0]); i++)
		if (stash[i])
			p->m->be->free(stash[i]);
	memset(p, 0, sizeof(*p));
}

/* The rank of stage s in this rank's replica */
static int rank_of(const dlt_pipe *p, int s)
{
	return s * p->width + p->replica;
}

/* n floats of x to stage stage of this replica */
static int send_to(dlt_pipe *p, const float *x, size_t n, int stage)
{
	return dlt_comm_send(p->c, x, n, rank_of(p, stage));
}

/* n floats from stage from (of this replica) into x, the wait counted */
static int receive(dlt_pipe *p, float *x, size_t n, int from)
{
	double t0 = dlt_now();
	int rc = dlt_comm_recv(p->c, x, n, rank_of(p, from));
	p->waited += dlt_now() - t0;
	return rc;
}

/* Micro-batch k of mb over b rows: rows [*k0, *k0 + *n), the first b % mb
 * one row more */
static void rows_of(int b, int mb, int k, int *k0, int *n)
{
	int base = b / mb, rem = b % mb;
	*k0 = k * base + (k < rem ? k : rem);
	*n = base + (k < rem);
}

static size_t bytes(size_t floats)
{
	return floats * sizeof(float);
}

/* The stage's input rows [k0, k0 + n) in its tensor: the batch's, or the
 * ones it received */
static void put_input(dlt_pipe *p, const float *x, int k0, int n)
{
	dlt_model *m = p->m;
	if (p->stage == 0)
		dlt_model_set_input(m, x + (size_t)k0 * m->in_features, n, 0);
	else
		m->be->copy(dlt_tensor_a(m, m->layers[p->lo].in), p->in + (size_t)k0 * p->w_in,
			    bytes((size_t)n * p->w_in));
}

/* Rows [k0, k0 + n) forward (train: a micro-batch's, else evaluation's):
 * the input received (stages after the first); the output computed and
 * sent (stages before the last: the last computes its forward where it
 * takes the loss) */
static int forward_one(dlt_pipe *p, const float *x, int k0, int n, int train, long long step)
{
	dlt_model *m = p->m;
	float *out = p->out + (size_t)k0 * p->w_out;
	if (p->stage > 0)
		DLT_TRY_RC(receive(p, p->in + (size_t)k0 * p->w_in, (size_t)n * p->w_in,
				   p->stage - 1));
	if (p->stage == p->stages - 1)
		return 0;
	put_input(p, x, k0, n);
	dlt_model_forward_ops(m, p->lo, p->hi, n, train, step);
	m->be->copy(out, dlt_tensor_a(m, m->layers[p->hi - 1].out), bytes((size_t)n * p->w_out));
	return send_to(p, out, (size_t)n * p->w_out, p->stage + 1);
}

/* Adds (or, for the first micro-batch, copies) n floats of g into sum */
static void accumulate(const dlt_model *m, float *sum, const float *g, size_t n, int first)
{
	if (first)
		m->be->copy(sum, g, bytes(n));
	else
		m->be->add(sum, g, sum, n);
}

/* A micro-batch's backward: the output's gradient received (or the loss
 * taken, on the last stage) after the forward computed again, the
 * input's gradient sent, the weights' added up */
static int backward_one(dlt_pipe *p, const float *x, int k0, int n, long long step, int first,
			dlt_pipe_loss_fn *loss, void *ctx)
{
	dlt_model *m = p->m;
	size_t lo = p->ranges[p->stage], hi = p->ranges[p->stage + 1];
	float *gin = p->gin + (size_t)k0 * p->w_in;
	int last = p->stage == p->stages - 1;

	if (!last)
		DLT_TRY_RC(receive(p, p->gout + (size_t)k0 * p->w_out, (size_t)n * p->w_out,
				   p->stage + 1));
	put_input(p, x, k0, n);
	dlt_model_forward_ops(m, p->lo, p->hi, n, 1, step);
	if (last)
		DLT_TRY_RC(loss(ctx, k0, n));
	else
		m->be->copy(dlt_tensor_g(m, m->layers[p->hi - 1].out),
			    p->gout + (size_t)k0 * p->w_out, bytes((size_t)n * p->w_out));
	/* the embedding adds to what its tied head wrote, on another stage */
	if (p->stage == 0 && p->tied >= 0)
		m->be->zero(m->dev_g + m->params[p->tied].off, bytes(m->params[p->tied].n));
	dlt_model_backward_ops(m, p->lo, p->hi, n);
	if (hi > lo)
		accumulate(m, p->acc, m->dev_g + lo, hi - lo, first);
	if (last && p->tied >= 0)
		accumulate(m, p->tied_acc, m->dev_g + m->params[p->tied].off,
			   m->params[p->tied].n, first);
	if (p->stage == 0)
		return 0;
	m->be->copy(gin, dlt_tensor_g(m, m->layers[p->lo].in), bytes((size_t)n * p->w_in));
	return send_to(p, gin, (size_t)n * p->w_in, p->stage - 1);
}

int dlt_pipe_step(dlt_pipe *p, const float *x, int b, long long step, dlt_pipe_loss_fn *loss,
		  void *ctx)
{
	dlt_model *m = p->m;
	int mb = p->micro < b ? p->micro : b, warm = mb, f = 0, k0, n, rc = 0;
	size_t lo = p->ranges[p->stage], hi = p->ranges[p->stage + 1];

	/* a replica without a row of the batch: no gradient */
	if (!mb) {
		if (hi > lo)
			m->be->zero(p->acc, bytes(hi - lo));
		if (p->tied >= 0)
			m->be->zero(p->tied_acc, bytes(m->params[p->tied].n));
	}
	/* 1F1B: this many forwards before the first backward */
	if (p->schedule == DLT_PIPE_1F1B && p->stages - p->stage - 1 < mb)
		warm = p->stages - p->stage - 1;
	for (; f < warm && rc == 0; f++) {
		rows_of(b, mb, f, &k0, &n);
		rc = forward_one(p, x, k0, n, 1, step);
	}
	for (int k = 0; k < mb && rc == 0; k++) {
		if (f < mb) {
			rows_of(b, mb, f++, &k0, &n);
			if ((rc = forward_one(p, x, k0, n, 1, step)) < 0)
				break;
		}
		rows_of(b, mb, k, &k0, &n);
		rc = backward_one(p, x, k0, n, step, k == 0, loss, ctx);
	}
	if (rc < 0)
		return rc;
	if (hi > lo)
		m->be->copy(m->dev_g + lo, p->acc, bytes(hi - lo));
	/* the tied head's gradient to its embedding's stage, added there */
	if (p->tied >= 0) {
		const dlt_param *t = &m->params[p->tied];
		if (p->stage == p->stages - 1)
			DLT_TRY_RC(send_to(p, p->tied_acc, t->n, 0));
		if (p->stage == 0) {
			DLT_TRY_RC(receive(p, p->tied_acc, t->n, p->stages - 1));
			m->be->add(m->dev_g + t->off, p->tied_acc, m->dev_g + t->off, t->n);
		}
	}
	/* every send done before the stashes are written again */
	return dlt_comm_sum_wait(p->c);
}

int dlt_pipe_after_step(dlt_pipe *p)
{
	dlt_model *m = p->m;
	if (p->tied < 0)
		return 0;
	if (p->stage == 0)
		DLT_TRY_RC(send_to(p, m->dev_w + m->params[p->tied].off,
					 m->params[p->tied].n, p->stages - 1));
	if (p->stage == p->stages - 1)
		DLT_TRY_RC(receive(p, m->dev_w + m->params[p->tied].off, m->params[p->tied].n, 0));
	return dlt_comm_sum_wait(p->c);
}

int dlt_pipe_forward(dlt_pipe *p, const float *x, int b, dlt_pipe_loss_fn *loss, void *ctx)
{
	dlt_model *m = p->m;
	if (!b)		/* a replica without a row: the others' wait all the same */
		return dlt_comm_sum_wait(p->c);
	DLT_TRY_RC(forward_one(p, x, 0, b, 0, 0));
	if (p->stage == p->stages - 1) {
		put_input(p, x, 0, b);
		dlt_model_forward_ops(m, p->lo, p->hi, b, 0, 0);
		DLT_TRY_RC(loss(ctx, 0, b));
	}
	return dlt_comm_sum_wait(p->c);
}
