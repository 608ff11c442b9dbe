/* Convolution by cuDNN (NCHW, fp32 data, fp32 compute with
 * CUDNN_FMA_MATH: no TF32, so the results stay within float rounding of
 * the CPU's), then our kernel for bias and activation (dlt_act), and our
 * fixed-order sum for the bias gradient.
 *
 * bf16 and fp16: x, w and dy are rounded (dlt_round_prec, the CPU's
 * rounding) into copies at the start of the workspace and cuDNN runs in
 * fp32 on the copies: the products are of the rounded values, exact in
 * f32, summed in f32, as on the CPU.  (cuDNN in bf16/half data would give
 * its outputs in that type, rounded before the bias and activation, which
 * the CPU does not do.)  The copies come before cuDNN's workspace, for
 * bf16 and fp16 only.
 *
 * A plan (descriptors and algorithms) is cached per shape, n included.
 * Algorithms come from cuDNN's heuristics, the first one that is
 * deterministic (the same bits run after run: resumed runs must match),
 * not a tensor-op one, and needs no more workspace than allowed: at most
 * PLAN_CAP when conv_workspace plans a shape, and, for a smaller batch
 * later, what conv_workspace planned for cuDNN at the batch it was planned
 * at (the model sizes `work` from it once).  cuDNN's workspace does not
 * shrink with the batch for every algorithm, so a smaller batch may find
 * no deterministic one within that budget; it then runs those it finds
 * within PLAN_CAP in a workspace of the backend's own (spare), made when
 * first needed and kept, rather than fail. */
#include <stdio.h>
#include <string.h>

#include "kernels/cuda/internal.h"

#define PLAN_CAP ((size_t)128 << 20)	/* bytes of cuDNN workspace a conv may take */
#define PLANS 256
#define BUDGETS 256

typedef struct conv_plan {
	dlt_conv s;		/* n == 0: unused */
	cudnnTensorDescriptor_t x, y;
	cudnnFilterDescriptor_t w;
	cudnnConvolutionDescriptor_t conv;
	cudnnConvolutionFwdAlgo_t fwd;
	cudnnConvolutionBwdDataAlgo_t data;
	cudnnConvolutionBwdFilterAlgo_t filter;
	size_t bytes;		/* the workspace the three algorithms need at most */
} conv_plan;

/* cuDNN's part of what conv_workspace reported for a shape planned at
 * batch s.n */
typedef struct conv_budget {
	dlt_conv s;
	size_t floats;
} conv_budget;

static conv_plan plans[PLANS];
static int next_victim;
static conv_budget budgets[BUDGETS];
static int n_budgets, next_budget;

static int same_shape(const dlt_conv *a, const dlt_conv *b)
{
	dlt_conv x = *a, y = *b;
	x.n = y.n = 0;
	return !memcmp(&x, &y, sizeof(x));
}

/* Floats rounded up so that what follows starts 256-byte aligned */
static size_t aligned(size_t floats)
{
	return (floats + 63) & ~(size_t)63;
}

/* The rounded copies of x, w and dy, before cuDNN's workspace */
static size_t copies(int prec, const dlt_conv *s)
{
	if (prec == DLT_PREC_F32)
		return 0;
	return aligned(dlt_conv_x_floats(s)) + aligned(dlt_conv_w_floats(s)) +
	       aligned(dlt_conv_y_floats(s));
}

static int set_descs(conv_plan *p, const dlt_conv *s)
{
	int n, k, oh, ow;
	if (!p->x && (!cu_check_dnn(cudnnCreateTensorDescriptor(&p->x), "conv") ||
		      !cu_check_dnn(cudnnCreateTensorDescriptor(&p->y), "conv") ||
		      !cu_check_dnn(cudnnCreateFilterDescriptor(&p->w), "conv") ||
		      !cu_check_dnn(cudnnCreateConvolutionDescriptor(&p->conv), "conv")))
		return 0;
	if (!cu_check_dnn(cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
						     s->n, s->c, s->h, s->w), "conv: x") ||
	    !cu_check_dnn(cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
						     s->n, s->k, s->oh, s->ow), "conv: y") ||
	    !cu_check_dnn(cudnnSetFilter4dDescriptor(p->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
						     s->k, s->c / s->groups, s->kh, s->kw),
			  "conv: w") ||
	    !cu_check_dnn(cudnnSetConvolution2dDescriptor(p->conv, s->ph, s->pw, s->sh, s->sw,
							  s->dh, s->dw, CUDNN_CROSS_CORRELATION,
							  CUDNN_DATA_FLOAT), "conv") ||
	    !cu_check_dnn(cudnnSetConvolutionGroupCount(p->conv, s->groups), "conv: groups") ||
	    !cu_check_dnn(cudnnSetConvolutionMathType(p->conv, CUDNN_FMA_MATH), "conv") ||
	    !cu_check_dnn(cudnnGetConvolution2dForwardOutputDim(p->conv, p->x, p->w, &n, &k, &oh,
								&ow), "conv"))
		return 0;
	if (n != s->n || k != s->k || oh != s->oh || ow != s->ow)
		return cu_check_dnn(CUDNN_STATUS_BAD_PARAM, "conv: output shape");
	return 1;
}

static int usable(cudnnStatus_t status, cudnnDeterminism_t det, cudnnMathType_t math)
{
	return status == CUDNN_STATUS_SUCCESS && det == CUDNN_DETERMINISTIC &&
	       math != CUDNN_TENSOR_OP_MATH && math != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

/* The algorithm pickers: the first usable algorithm of cuDNN's ranking
 * whose workspace is at most limit bytes, its workspace in *bytes.  1; 0
 * when none fits (not recorded: the caller may try a larger limit); -1
 * when cuDNN failed (recorded). */
static int pick_fwd(conv_plan *p, size_t limit, size_t *bytes)
{
	cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
	int got = 0;
	if (!cu_check_dnn(cudnnGetConvolutionForwardAlgorithm_v7(
				  cu.dnn, p->x, p->w, p->conv, p->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
				  &got, perf), "conv: forward algorithm"))
		return -1;
	for (int i = 0; i < got; i++) {
		if (!usable(perf[i].status, perf[i].determinism, perf[i].mathType) ||
		    cudnnGetConvolutionForwardWorkspaceSize(cu.dnn, p->x, p->w, p->conv, p->y,
							    perf[i].algo, bytes) !=
			    CUDNN_STATUS_SUCCESS || *bytes > limit)
			continue;
		p->fwd = perf[i].algo;
		return 1;
	}
	return 0;
}

static int pick_data(conv_plan *p, size_t limit, size_t *bytes)
{
	cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
	int got = 0;
	if (!cu_check_dnn(cudnnGetConvolutionBackwardDataAlgorithm_v7(
				  cu.dnn, p->w, p->y, p->conv, p->x,
				  CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, perf),
			  "conv: backward data algorithm"))
		return -1;
	for (int i = 0; i < got; i++) {
		if (!usable(perf[i].status, perf[i].determinism, perf[i].mathType) ||
		    cudnnGetConvolutionBackwardDataWorkspaceSize(cu.dnn, p->w, p->y, p->conv, p->x,
								 perf[i].algo, bytes) !=
			    CUDNN_STATUS_SUCCESS || *bytes > limit)
			continue;
		p->data = perf[i].algo;
		return 1;
	}
	return 0;
}

static int pick_filter(conv_plan *p, size_t limit, size_t *bytes)
{
	cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
	int got = 0;
	if (!cu_check_dnn(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
				  cu.dnn, p->x, p->y, p->conv, p->w,
				  CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, perf),
			  "conv: backward filter algorithm"))
		return -1;
	for (int i = 0; i < got; i++) {
		if (!usable(perf[i].status, perf[i].determinism, perf[i].mathType) ||
		    cudnnGetConvolutionBackwardFilterWorkspaceSize(cu.dnn, p->x, p->y, p->conv,
								   p->w, perf[i].algo, bytes) !=
			    CUDNN_STATUS_SUCCESS || *bytes > limit)
			continue;
		p->filter = perf[i].algo;
		return 1;
	}
	return 0;
}

static conv_plan *find_plan(const dlt_conv *s)
{
	for (int i = 0; i < PLANS; i++)
		if (plans[i].s.n && !memcmp(&plans[i].s, s, sizeof(*s)))
			return &plans[i];
	return NULL;
}

/* "conv n1 c2 8x6 k3 3x3 s2,2 p0,0 d1,1 g1", as test-cuda names a case */
static void conv_name(const dlt_conv *s, char *buf, size_t n)
{
	snprintf(buf, n, "conv n%d c%d %dx%d k%d %dx%d s%d,%d p%d,%d d%d,%d g%d", s->n, s->c, s->h,
		 s->w, s->k, s->kh, s->kw, s->sh, s->sw, s->ph, s->pw, s->dh, s->dw, s->groups);
}

/* Plans s with algorithms whose workspace is at most limit bytes: the
 * cached plan when it fits, else a new one in its place or a victim's.
 * NULL when cuDNN failed (recorded) or none fits: then *none is set, and
 * it is recorded only if none is NULL. */
static conv_plan *plan_for(const dlt_conv *s, size_t limit, int *none)
{
	conv_plan *p = find_plan(s);
	size_t f = 0, d = 0, w = 0;
	const char *what = "forward";
	int rc;
	if (p && p->bytes <= limit)
		return p;
	if (!p) {
		p = &plans[next_victim];
		next_victim = (next_victim + 1) % PLANS;
	}
	p->s.n = 0;
	if (!set_descs(p, s))
		return NULL;
	if ((rc = pick_fwd(p, limit, &f)) > 0) {
		what = "backward data";
		if ((rc = pick_data(p, limit, &d)) > 0) {
			what = "backward filter";
			rc = pick_filter(p, limit, &w);
		}
	}
	if (rc == 0 && none)
		*none = 1;
	if (rc == 0 && !none) {
		char why[192];
		conv_name(s, why, sizeof(why));
		snprintf(why + strlen(why), sizeof(why) - strlen(why),
			 ": no deterministic %s algorithm within %zu bytes", what, limit);
		cu_check_dnn(CUDNN_STATUS_NOT_SUPPORTED, why);
	}
	if (rc <= 0)
		return NULL;
	p->s = *s;
	p->bytes = f > d ? (f > w ? f : w) : (d > w ? d : w);
	return p;
}

static void remember_budget(const dlt_conv *s, size_t floats)
{
	conv_budget *b = NULL;
	for (int i = 0; i < n_budgets && !b; i++)
		if (!memcmp(&budgets[i].s, s, sizeof(*s)))
			b = &budgets[i];
	if (!b && n_budgets < BUDGETS)
		b = &budgets[n_budgets++];
	if (!b) {
		b = &budgets[next_budget];
		next_budget = (next_budget + 1) % BUDGETS;
	}
	b->s = *s;
	b->floats = floats;
}

/* The least cuDNN workspace planned for this shape at a batch >= s->n:
 * any caller that planned for a batch this large has at least that.
 * Whether one was planned. */
static int budget_for(const dlt_conv *s, size_t *least)
{
	int found = 0;
	for (int i = 0; i < n_budgets; i++)
		if (same_shape(&budgets[i].s, s) && budgets[i].s.n >= s->n &&
		    (!found || budgets[i].floats < *least)) {
			*least = budgets[i].floats;
			found = 1;
		}
	return found;
}

/* cuDNN's workspace for s, planned within PLAN_CAP, and remembered */
static size_t dnn_floats(const dlt_conv *s)
{
	conv_plan *p = plan_for(s, PLAN_CAP, NULL);
	size_t floats = p ? (p->bytes + 3) / 4 : 0;
	remember_budget(s, floats);
	return floats;
}

size_t cu_conv_workspace(int prec, const dlt_conv *s)
{
	return copies(prec, s) + dnn_floats(s);
}

static void *spare;
static size_t spare_bytes;

/* The backend's own workspace of at least bytes, or NULL (recorded) */
static void *spare_for(size_t bytes)
{
	if (bytes <= spare_bytes)
		return spare;
	/* the step's stream may still run on the smaller one */
	if (!cu_check(cudaStreamSynchronize(cu.stream), "conv: workspace"))
		return NULL;
	if (spare)
		cu_check(cudaFree(spare), "conv: workspace");
	spare = NULL;
	spare_bytes = 0;
	if (!cu_check(cudaMalloc(&spare, bytes), "conv: workspace beyond the planned one"))
		return NULL;
	spare_bytes = bytes;
	return spare;
}

/* The plan a forward or backward call uses, and in *ws the workspace it
 * runs in: the caller's (work, after the copies) when the plan fits what
 * conv_workspace planned for this shape at this batch or a larger one,
 * else the spare.  NULL on failure (recorded).
 *
 * work may be NULL: in f32 there are no copies, and a shape whose
 * algorithms need no workspace gets 0 floats from conv_workspace, which
 * the model (and cudaMalloc) turn into a NULL workspace.  cuDNN takes NULL
 * with 0 bytes, so a NULL *ws is a failure only when it is the spare's. */
static conv_plan *plan_within(const dlt_conv *s, float *work, void **ws)
{
	size_t budget = 0, limit;
	conv_plan *p;
	int none = 0;
	if (!budget_for(s, &budget))
		budget = dnn_floats(s);
	limit = budget * sizeof(float);
	if (limit > PLAN_CAP)
		limit = PLAN_CAP;
	if (!(p = find_plan(s)) && !(p = plan_for(s, limit, &none)) && none)
		p = plan_for(s, PLAN_CAP, NULL);
	if (!p)
		return NULL;
	if (p->bytes <= limit) {
		*ws = work;
		return p;
	}
	*ws = spare_for(p->bytes);
	return *ws ? p : NULL;
}

static __global__ void round_copy(const float *x, float *y, size_t n, int prec)
{
	GRID_STRIDE(i, n)
		y[i] = dlt_round_prec(x[i], prec);
}

/* x rounded to prec into to; returns what the convolution reads */
static const float *rounded(const float *x, size_t n, int prec, float *to)
{
	if (prec == DLT_PREC_F32)
		return x;
	round_copy<<<cu_blocks(n), CU_THREADS, 0, cu.stream>>>(x, to, n, prec);
	cu_launched("conv: rounding");
	return to;
}

/* y[n][k][p] = act(y + bias[k]), as the reference: bias or 0 added */
static __global__ void channel_bias_act(float *y, const float *bias, size_t n, int k, size_t hw,
					int act, float slope)
{
	GRID_STRIDE(i, n)
		y[i] = dlt_act(y[i] + (bias ? bias[i / hw % k] : 0.0f), act, slope);
}

/* db[k] = sum over samples and the plane of dy[n][k]: a block a channel
 * and a range of samples (blockIdx.y of gridDim.y), a thread the plane's
 * elements a block apart in each sample in order, in double, the block's
 * threads in a fixed tree; the ranges' sums in order by cu_col_finish.
 * The shape alone fixes the order, so the bits. */
static __global__ void channel_sum(const float *dy, float *db, int n, int k, int hw,
				   double *part)
{
	__shared__ double sh[CU_THREADS];
	int span = (n + gridDim.y - 1) / gridDim.y, i0 = blockIdx.y * span;
	int i1 = i0 + span < n ? i0 + span : n, t = threadIdx.x;
	double acc = 0.0;
	for (int i = i0; i < i1; i++) {
		const float *plane = dy + ((size_t)i * k + blockIdx.x) * hw;
		for (int e = t; e < hw; e += CU_THREADS)
			acc += plane[e];
	}
	sh[t] = acc;
	__syncthreads();
	for (int s = CU_THREADS / 2; s > 0; s >>= 1) {
		if (t < s)
			sh[t] += sh[t + s];
		__syncthreads();
	}
	if (t == 0)
		col_out<1>(sh, blockIdx.x, k, part, db, NULL, 0);
}

static const float one = 1.0f, zero = 0.0f;

/* A cuDNN call's failure, recorded with the shape, the algorithm and its
 * workspace */
static int dnn_ok(cudnnStatus_t st, const dlt_conv *s, const char *what, int algo,
		  size_t bytes)
{
	char why[224];
	if (st == CUDNN_STATUS_SUCCESS)
		return 1;
	conv_name(s, why, sizeof(why));
	snprintf(why + strlen(why), sizeof(why) - strlen(why), ": %s (algorithm %d, %zu bytes)",
		 what, algo, bytes);
	return cu_check_dnn(st, why);
}

void cu_conv_forward(int prec, const dlt_conv *s, const float *x, const float *w,
		     const float *b, float *y, int act, float slope, float *work)
{
	int exact = prec & DLT_CONV_FLAGS;
	void *ws = NULL;
	conv_plan *p = plan_within(s, work + copies(prec &= ~DLT_CONV_FLAGS, s), &ws);
	float *xr = work, *wr = xr + aligned(dlt_conv_x_floats(s));
	size_t ny = dlt_conv_y_floats(s);
	if (!p)
		return;
	if (!(exact & DLT_X_EXACT))
		x = rounded(x, dlt_conv_x_floats(s), prec, xr);
	w = rounded(w, dlt_conv_w_floats(s), prec, wr);
	if (!dnn_ok(cudnnConvolutionForward(cu.dnn, &one, p->x, x, p->w, w, p->conv, p->fwd, ws,
					    p->bytes, &zero, p->y, y),
		    s, "forward", p->fwd, p->bytes))
		return;
	if (b || act != DLT_ACT_NONE) {
		channel_bias_act<<<cu_blocks(ny), CU_THREADS, 0, cu.stream>>>(
			y, b, ny, s->k, (size_t)s->oh * s->ow, act, slope);
		cu_launched("conv_forward: bias and activation");
	}
}

void cu_conv_backward(int prec, const dlt_conv *s, const float *x, const float *w,
		      const float *dy, float *dx, float *dw, float *db, float *work)
{
	int exact = prec & DLT_CONV_FLAGS;
	void *ws = NULL;
	conv_plan *p = plan_within(s, work + copies(prec &= ~DLT_CONV_FLAGS, s), &ws);
	float *xr = work, *wr = xr + aligned(dlt_conv_x_floats(s));
	float *dyr = wr + aligned(dlt_conv_w_floats(s));
	const float *dyp;
	if (!p)
		return;
	dyp = exact & DLT_DY_EXACT ? dy : rounded(dy, dlt_conv_y_floats(s), prec, dyr);
	/* the bias gradient sums the rounded dy, as the CPU */
	if (db) {
		/* a range per 8 samples */
		unsigned chunks = col_ranges((size_t)s->n, 8, (size_t)s->k);
		channel_sum<<<dim3((unsigned)s->k, chunks), CU_THREADS, 0, cu.stream>>>(
			dyp, db, s->n, s->k, s->oh * s->ow, cu.colsum);
		cu_launched("conv_backward: bias");
		cu_col_finish(1, s->k, chunks, db, NULL, 0);
	}
	dnn_ok(cudnnConvolutionBackwardFilter(cu.dnn, &one, p->x,
					      exact & DLT_X_EXACT ? x
								  : rounded(x, dlt_conv_x_floats(s),
									    prec, xr),
					      p->y, dyp,
					      p->conv, p->filter, ws, p->bytes, &zero, p->w, dw),
	       s, "backward filter", p->filter, p->bytes);
	if (dx)
		dnn_ok(cudnnConvolutionBackwardData(cu.dnn, &one, p->w,
						    rounded(w, dlt_conv_w_floats(s), prec, wr), p->y,
						    dyp, p->conv, p->data, ws, p->bytes, &zero, p->x,
						    dx),
		       s, "backward data", p->data, p->bytes);
}
