/* The transformer's layers on the GPU: simple, parallel, deterministic
 * (no atomics: every sum has one order, so the bits never depend on the
 * schedule).
 *  - layer norm: a warp a row for y and dx, its sums in double by lanes
 *    and a butterfly (every lane gets the same bits); dgamma and dbeta a
 *    thread a column, rows in order in double by ranges (column_pass):
 *    the reference's order and arithmetic, so its bits, where the rows
 *    are one range;
 *  - embedding backward: a block an id, its tokens in order (the
 *    reference's bits); positional backward: a thread an element of dp,
 *    the batch in order (likewise);
 *  - attention: a warp a (batch, head, query), lanes over the head's
 *    dimensions, an online softmax over the keys one at a time (forward);
 *    backward in three kernels: D_i = dout_i . out_i, parked in the first
 *    float of row i's dq (written last); a warp a key for dk and dv,
 *    looping over the queries that see it; a warp a query for dq, looping
 *    over its keys.  Head sizes up to CU_ATTN_DMAX.  Heads up to 64 run
 *    on tiles in shared memory instead (attention_tiles.cu). */
#include "kernels/cuda/internal.h"

/* Rows (or queries, keys) a block of the warp-per-row kernels */
#define ROWS_PER_BLOCK 4
/* The largest head size: each lane keeps D / 32 floats of each vector */
#define CU_ATTN_DMAX 256
#define PER_LANE (CU_ATTN_DMAX / WARP)

static unsigned warp_blocks(size_t rows)
{
	return (unsigned)((rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
}

static __device__ double warp_sum_d(double v)
{
	for (int o = WARP / 2; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

/* ---- layer norm ---- */

static __global__ void ln_forward_kernel(const float *x, const float *gamma, const float *beta,
					 float *y, float *mean, float *rstd, int rows, int C,
					 float eps)
{
	int r = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / WARP, lane = threadIdx.x % WARP;
	const float *xr;
	float *yr;
	double s = 0.0, sq = 0.0, mu;
	float m, rs;
	if (r >= rows)
		return;
	xr = x + (size_t)r * C;
	yr = y + (size_t)r * C;
	for (int c = lane; c < C; c += WARP)
		s += xr[c];
	mu = warp_sum_d(s) / C;
	for (int c = lane; c < C; c += WARP)
		sq += (xr[c] - mu) * (xr[c] - mu);
	m = (float)mu;
	rs = (float)(1.0 / sqrt(warp_sum_d(sq) / C + eps));
	if (lane == 0) {
		mean[r] = m;
		rstd[r] = rs;
	}
	for (int c = lane; c < C; c += WARP)
		yr[c] = (xr[c] - m) * rs * gamma[c] + beta[c];
}

void cu_layernorm_forward(const float *x, const float *gamma, const float *beta, float *y,
			  float *mean, float *rstd, int rows, int C, float eps)
{
	if (rows < 1 || C < 1)
		return;
	ln_forward_kernel<<<warp_blocks(rows), ROWS_PER_BLOCK * WARP, 0, cu.stream>>>(
		x, gamma, beta, y, mean, rstd, rows, C, eps);
	cu_launched("layernorm_forward");
}

/* dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy gamma, in double */
static __global__ void ln_dx_kernel(const float *x, const float *dy, const float *gamma,
				    const float *mean, const float *rstd, float *dx, int rows,
				    int C)
{
	int r = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / WARP, lane = threadIdx.x % WARP;
	const float *xr, *dyr;
	double mg = 0.0, mgx = 0.0, m, rs;
	if (r >= rows)
		return;
	xr = x + (size_t)r * C;
	dyr = dy + (size_t)r * C;
	m = mean[r];
	rs = rstd[r];
	for (int c = lane; c < C; c += WARP) {
		double xh = (xr[c] - m) * rs, g = (double)dyr[c] * gamma[c];
		mg += g;
		mgx += g * xh;
	}
	mg = warp_sum_d(mg) / C;
	mgx = warp_sum_d(mgx) / C;
	for (int c = lane; c < C; c += WARP) {
		double xh = (xr[c] - m) * rs, g = (double)dyr[c] * gamma[c];
		dx[(size_t)r * C + c] = (float)(rs * (g - mg - xh * mgx));
	}
}

static __global__ void ln_param_kernel(const float *x, const float *dy, const float *mean,
				       const float *rstd, float *dgamma, float *dbeta, int rows,
				       int C, double *part)
{
	int c = blockIdx.x * WARP + threadIdx.x % WARP;
	double s[2] = { 0.0, 0.0 };	/* dgamma's, dbeta's */
	column_pass<2>(rows, C,
		       [=](int r, int col, float *v) {
			       size_t i = (size_t)r * C + col;
			       v[0] = (x[i] - mean[r]) * rstd[r];
			       v[1] = dy[i];
		       },
		       [&](const float *v) {
			       s[0] += (double)v[1] * v[0];
			       s[1] += v[1];
		       });
	if (threadIdx.x < WARP)
		col_out<2>(s, c, C, part, dgamma, dbeta, 1);
}

void cu_layernorm_backward(const float *x, const float *dy, const float *gamma,
			   const float *mean, const float *rstd, float *dx, float *dgamma,
			   float *dbeta, int rows, int C)
{
	unsigned chunks;
	if (rows < 1 || C < 1)
		return;
	ln_dx_kernel<<<warp_blocks(rows), ROWS_PER_BLOCK * WARP, 0, cu.stream>>>(
		x, dy, gamma, mean, rstd, dx, rows, C);
	cu_launched("layernorm_backward");
	chunks = col_chunks(rows, 2, C);
	ln_param_kernel<<<dim3(col_blocks(C), chunks), COL_BLOCK, 0, cu.stream>>>(
		x, dy, mean, rstd, dgamma, dbeta, rows, C, cu.colsum);
	cu_launched("layernorm_backward");
	cu_col_finish(2, C, chunks, dgamma, dbeta, 1);
}

/* ---- embeddings and positions ---- */

static __global__ void embedding_forward_kernel(const int32_t *ids, const float *w, float *out,
						int n, int C, int V)
{
	GRID_STRIDE(e, (size_t)n * C) {
		int32_t id = ids[e / C];
		out[e] = id >= 0 && id < V ? w[(size_t)id * C + e % C] : NAN;
	}
}

void cu_embedding_forward(const int32_t *ids, const float *w, float *out, int n, int C, int V)
{
	size_t e = (size_t)n * C;
	if (!e)
		return;
	embedding_forward_kernel<<<cu_blocks(e), CU_THREADS, 0, cu.stream>>>(ids, w, out, n, C, V);
	cu_launched("embedding_forward");
}

/* A block an id (and every gridDim.x-th after it): it finds the id's
 * tokens a block's width at a time, in order (a ballot per warp, the
 * warps' counts added in order), then its threads add those tokens' rows
 * onto the id's row of dw, a column each, in token order: the
 * reference's order, so its bits. */
#define EMB_IDS_BLOCKS 4096

static __global__ void embedding_backward_kernel(const int32_t *__restrict__ ids,
						 const float *__restrict__ dout,
						 float *__restrict__ dw, int n, int C, int V)
{
	__shared__ int hits[CU_THREADS], counts[CU_THREADS / WARP];
	int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
	for (int v = blockIdx.x; v < V; v += gridDim.x) {
		for (int base = 0; base < n; base += CU_THREADS) {
			int i = base + threadIdx.x, before = 0, total = 0;
			bool hit = i < n && ids[i] == v;
			unsigned m = __ballot_sync(0xffffffffu, hit);
			if (lane == 0)
				counts[warp] = __popc(m);
			__syncthreads();
			for (int w = 0; w < CU_THREADS / WARP; w++) {
				before += w < warp ? counts[w] : 0;
				total += counts[w];
			}
			if (hit)
				hits[before + __popc(m & ((1u << lane) - 1))] = i;
			__syncthreads();
			for (int c = threadIdx.x; total && c < C; c += CU_THREADS) {
				float s = dw[(size_t)v * C + c];
				#pragma unroll 8
				for (int k = 0; k < total; k++)
					s += dout[(size_t)hits[k] * C + c];
				dw[(size_t)v * C + c] = s;
			}
			__syncthreads();
		}
	}
}

void cu_embedding_backward(const int32_t *ids, const float *dout, float *dw, int n, int C, int V)
{
	if (n < 1 || C < 1 || V < 1)
		return;
	embedding_backward_kernel<<<V < EMB_IDS_BLOCKS ? V : EMB_IDS_BLOCKS, CU_THREADS, 0,
				    cu.stream>>>(ids, dout, dw, n, C, V);
	cu_launched("embedding_backward");
}

static __global__ void positional_forward_kernel(const float *x, const float *p, float *y,
						 size_t n, size_t tc)
{
	GRID_STRIDE(e, n)
		y[e] = x[e] + p[e % tc];
}

void cu_positional_forward(const float *x, const float *p, float *y, int B, int T, int C)
{
	size_t n = (size_t)B * T * C;
	if (!n)
		return;
	positional_forward_kernel<<<cu_blocks(n), CU_THREADS, 0, cu.stream>>>(x, p, y, n,
									     (size_t)T * C);
	cu_launched("positional_forward");
}

static __global__ void positional_backward_kernel(const float *dy, float *dp, int B, size_t tc)
{
	GRID_STRIDE(e, tc) {
		float s = dp[e];
		for (int b = 0; b < B; b++)
			s += dy[b * tc + e];
		dp[e] = s;
	}
}

void cu_positional_backward(const float *dy, float *dp, int B, int T, int C)
{
	size_t tc = (size_t)T * C;
	if (!tc)
		return;
	positional_backward_kernel<<<cu_blocks(tc), CU_THREADS, 0, cu.stream>>>(dy, dp, B, tc);
	cu_launched("positional_backward");
}

/* ---- attention ---- */

/* Where a warp's row is: query (or key) t of head h of batch b */
typedef struct attn_row {
	int b, h, t;
} attn_row;

static __device__ attn_row attn_where(size_t row, int H, int T)
{
	attn_row a;
	a.t = (int)(row % T);
	a.h = (int)(row / T % H);
	a.b = (int)(row / T / H);
	return a;
}

/* A row's D floats to the lane's registers: element lane + 32 k */
static __device__ void lane_load(float *r, const float *src, int D, int lane)
{
	#pragma unroll
	for (int k = 0; k < PER_LANE; k++) {
		int d = lane + WARP * k;
		r[k] = d < D ? src[d] : 0.0f;
	}
}

static __device__ float lane_dot(const float *r, const float *src, int D, int lane)
{
	float s = 0.0f;
	#pragma unroll
	for (int k = 0; k < PER_LANE; k++) {
		int d = lane + WARP * k;
		if (d < D)
			s += r[k] * src[d];
	}
	return cu_warp_sum(s);
}

static __device__ void lane_axpy(float *r, float a, const float *src, int D, int lane)
{
	#pragma unroll
	for (int k = 0; k < PER_LANE; k++) {
		int d = lane + WARP * k;
		if (d < D)
			r[k] += a * src[d];
	}
}

static __device__ void lane_store(float *dst, const float *r, float a, int D, int lane)
{
	#pragma unroll
	for (int k = 0; k < PER_LANE; k++) {
		int d = lane + WARP * k;
		if (d < D)
			dst[d] = r[k] * a;
	}
}

static __global__ void attn_forward_kernel(const float *qkv, float *out, float *lse, int B,
					   int T, int C, int H, int causal, float scale,
					   dlt_attn_dropout drop)
{
	size_t row = (size_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / WARP;
	int lane = threadIdx.x % WARP, D = C / H, n;
	size_t ld = (size_t)3 * C;
	float q[PER_LANE], o[PER_LANE], m = -INFINITY, l = 0.0f;
	const float *base;
	attn_row a;
	if (row >= (size_t)B * H * T)
		return;
	a = attn_where(row, H, T);
	base = qkv + (size_t)a.b * T * ld + (size_t)a.h * D;
	lane_load(q, base + a.t * ld, D, lane);
	#pragma unroll
	for (int k = 0; k < PER_LANE; k++)
		o[k] = 0.0f;
	n = causal ? a.t + 1 : T;
	for (int j = 0; j < n; j++) {
		float s = lane_dot(q, base + j * ld + C, D, lane) * scale;
		float mx = s > m ? s : m, corr = expf(m - mx), p = expf(s - mx);
		l = l * corr + p;
		#pragma unroll
		for (int k = 0; k < PER_LANE; k++)
			o[k] *= corr;
		lane_axpy(o, p * dlt_attn_keep(drop, row, T, j), base + j * ld + 2 * C, D, lane);
		m = mx;
	}
	lane_store(out + ((size_t)a.b * T + a.t) * C + (size_t)a.h * D, o, 1.0f / l, D, lane);
	if (lane == 0)
		lse[row] = m + logf(l);
}

static int attn_ok(int C, int H, const char *what)
{
	if (H < 1 || C % H || C / H > CU_ATTN_DMAX)
		return cu_check(cudaErrorInvalidValue, what);	/* records it */
	return 1;
}

/* The tiles and the kernels below are f32 at any prec: where the
 * products cannot run (their scratch), bf16 and fp16 run them too */
void cu_attention_forward(int prec, const float *qkv, float *out, float *lse, int B, int T,
			  int C, int H, int causal, dlt_attn_dropout drop)
{
	size_t rows = (size_t)B * H * T;
	float scale;
	if (!rows || !attn_ok(C, H, "attention_forward: head size over 256"))
		return;
	scale = (float)(1.0 / sqrt((double)(C / H)));
	if (cu_attention_gemm_forward(prec, qkv, out, lse, B, T, C, H, causal, scale, drop) ||
	    cu_attention_tiles_forward(qkv, out, lse, B, T, C, H, causal, scale, drop))
		return;
	attn_forward_kernel<<<warp_blocks(rows), ROWS_PER_BLOCK * WARP, 0, cu.stream>>>(
		qkv, out, lse, B, T, C, H, causal, scale, drop);
	cu_launched("attention_forward");
}

/* D_i = dout_i . out_i, into the first float of query i's dq */
static __global__ void attn_di_kernel(const float *out, const float *dout, float *dqkv, int B,
				      int T, int C, int H)
{
	size_t row = (size_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / WARP;
	int lane = threadIdx.x % WARP, D = C / H;
	float g[PER_LANE], di;
	size_t at;
	attn_row a;
	if (row >= (size_t)B * H * T)
		return;
	a = attn_where(row, H, T);
	at = ((size_t)a.b * T + a.t) * C + (size_t)a.h * D;
	lane_load(g, dout + at, D, lane);
	di = lane_dot(g, out + at, D, lane);
	if (lane == 0)
		dqkv[((size_t)a.b * T + a.t) * 3 * C + (size_t)a.h * D] = di;
}

/* A warp a key j: dk_j = scale sum_i dS_ij q_i, dv_j = sum_i P_ij Z_ij dout_i
 * over the queries i that see it, in order; dS_ij = P_ij (Z_ij dP_ij - D_i)
 * with the dropout's factors Z */
static __global__ void attn_dkv_kernel(const float *qkv, const float *dout, const float *lse,
				       float *dqkv, int B, int T, int C, int H, int causal,
				       float scale, dlt_attn_dropout drop)
{
	size_t row = (size_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / WARP;
	int lane = threadIdx.x % WARP, D = C / H;
	size_t ld = (size_t)3 * C;
	float k[PER_LANE], v[PER_LANE], dk[PER_LANE], dv[PER_LANE];
	const float *base, *gbase, *lrow;
	float *dbase;
	attn_row a;
	if (row >= (size_t)B * H * T)
		return;
	a = attn_where(row, H, T);
	base = qkv + (size_t)a.b * T * ld + (size_t)a.h * D;
	gbase = dout + (size_t)a.b * T * C + (size_t)a.h * D;
	dbase = dqkv + (size_t)a.b * T * ld + (size_t)a.h * D;
	lrow = lse + row - a.t;
	lane_load(k, base + a.t * ld + C, D, lane);
	lane_load(v, base + a.t * ld + 2 * C, D, lane);
	#pragma unroll
	for (int e = 0; e < PER_LANE; e++)
		dk[e] = dv[e] = 0.0f;
	for (int i = causal ? a.t : 0; i < T; i++) {
		const float *q = base + i * ld, *g = gbase + (size_t)i * C;
		float p = expf(lane_dot(k, q, D, lane) * scale - lrow[i]);
		float z = dlt_attn_keep(drop, row - a.t + i, T, a.t);
		float ds = p * (z * lane_dot(v, g, D, lane) - dbase[i * ld]);
		lane_axpy(dk, ds * scale, q, D, lane);
		lane_axpy(dv, p * z, g, D, lane);
	}
	lane_store(dbase + a.t * ld + C, dk, 1.0f, D, lane);
	lane_store(dbase + a.t * ld + 2 * C, dv, 1.0f, D, lane);
}

/* A warp a query i: dq_i = scale sum_j dS_ij k_j over its keys, in order;
 * D_i read from where attn_di_kernel left it, then written over */
static __global__ void attn_dq_kernel(const float *qkv, const float *dout, const float *lse,
				      float *dqkv, int B, int T, int C, int H, int causal,
				      float scale, dlt_attn_dropout drop)
{
	size_t row = (size_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / WARP;
	int lane = threadIdx.x % WARP, D = C / H, n;
	size_t ld = (size_t)3 * C;
	float q[PER_LANE], g[PER_LANE], dq[PER_LANE], di, l;
	const float *base;
	float *dst;
	attn_row a;
	if (row >= (size_t)B * H * T)
		return;
	a = attn_where(row, H, T);
	base = qkv + (size_t)a.b * T * ld + (size_t)a.h * D;
	dst = dqkv + ((size_t)a.b * T + a.t) * ld + (size_t)a.h * D;
	lane_load(q, base + a.t * ld, D, lane);
	lane_load(g, dout + ((size_t)a.b * T + a.t) * C + (size_t)a.h * D, D, lane);
	di = dst[0];
	l = lse[row];
	#pragma unroll
	for (int e = 0; e < PER_LANE; e++)
		dq[e] = 0.0f;
	n = causal ? a.t + 1 : T;
	for (int j = 0; j < n; j++) {
		const float *kj = base + j * ld + C;
		float p = expf(lane_dot(q, kj, D, lane) * scale - l);
		float z = dlt_attn_keep(drop, row, T, j);
		float ds = p * (z * lane_dot(g, kj + C, D, lane) - di);
		lane_axpy(dq, ds * scale, kj, D, lane);
	}
	__syncwarp();	/* every lane has read D_i */
	lane_store(dst, dq, 1.0f, D, lane);
}

void cu_attention_backward(int prec, const float *qkv, const float *out, const float *dout,
			   const float *lse, float *dqkv, int B, int T, int C, int H, int causal,
			   dlt_attn_dropout drop)
{
	size_t rows = (size_t)B * H * T;
	unsigned blocks = warp_blocks(rows);
	float scale;
	if (!rows || !attn_ok(C, H, "attention_backward: head size over 256"))
		return;
	scale = (float)(1.0 / sqrt((double)(C / H)));
	if (cu_attention_gemm_backward(prec, qkv, out, dout, lse, dqkv, B, T, C, H, causal, scale,
				       drop))
		return;
	attn_di_kernel<<<blocks, ROWS_PER_BLOCK * WARP, 0, cu.stream>>>(out, dout, dqkv, B, T, C,
									 H);
	cu_launched("attention_backward");
	if (cu_attention_tiles_backward(qkv, dout, lse, dqkv, B, T, C, H, causal, scale, drop))
		return;
	attn_dkv_kernel<<<blocks, ROWS_PER_BLOCK * WARP, 0, cu.stream>>>(qkv, dout, lse, dqkv, B,
									  T, C, H, causal, scale, drop);
	cu_launched("attention_backward");
	attn_dq_kernel<<<blocks, ROWS_PER_BLOCK * WARP, 0, cu.stream>>>(qkv, dout, lse, dqkv, B, T,
									 C, H, causal, scale, drop);
	cu_launched("attention_backward");
}
