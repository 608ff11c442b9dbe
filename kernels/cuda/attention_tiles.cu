/* Attention on tiles of 64 queries by 64 keys in shared memory (head
 * sizes up to 64), FlashAttention-2's form in f32: a block a tile of one
 * (batch, head), 256 threads as 16 x 16, each thread 4 x 4 of a score
 * tile (rows ty + 16 a, columns tx + 16 b: with rows 65 floats apart,
 * the 16 lanes of a row group read 16 banks, and the other operand is
 * one address) and 4 rows by 4 dimensions (tx + 16 c) of the output.
 *  - forward: the online softmax a key tile at a time, the row sums
 *    without dropout (the CPU's and the reference's form);
 *  - backward: D_i parked in the first float of query i's dq as before
 *    (attn_di_kernel), then a block a key tile for dk and dv over the
 *    query tiles that see it, and a block a query tile for dq over its
 *    key tiles.
 * No atomics: every sum has one order, so the bits do not depend on the
 * schedule.  The warp-a-row kernels of transformer.cu remain for larger
 * heads and for GPUs without the shared memory. */
#include "kernels/cuda/internal.h"

#define TILE 64
#define TLD (TILE + 1)			/* floats between a tile's rows */
#define TILE_FLOATS (TILE * TLD)
#define TILE_THREADS 256
#define FWD_SMEM (4 * TILE_FLOATS * sizeof(float))
#define DQ_SMEM (5 * TILE_FLOATS * sizeof(float))
#define DKV_SMEM ((5 * TILE_FLOATS + 2 * TILE) * sizeof(float))

/* rows [r0, r0 + 64) of one head's D columns, at src + r * ld, into a
 * tile; zeros past n rows and past D */
static __device__ void tile_load(float *t, const float *src, size_t ld, int r0, int n, int D)
{
	for (int e = threadIdx.x; e < TILE * TILE; e += TILE_THREADS) {
		int r = e / TILE, d = e % TILE;
		t[r * TLD + d] = r0 + r < n && d < D ? src[(size_t)(r0 + r) * ld + d] : 0.0f;
	}
}

/* acc[a][b] += sum_d x[ty + 16 a][d] y[tx + 16 b][d] */
static __device__ void tile_dots(float acc[4][4], const float *x, const float *y, int D)
{
	int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
	for (int d = 0; d < D; d++) {
		float xa[4], yb[4];
		#pragma unroll
		for (int k = 0; k < 4; k++) {
			xa[k] = x[(ty + 16 * k) * TLD + d];
			yb[k] = y[(tx + 16 * k) * TLD + d];
		}
		#pragma unroll
		for (int a = 0; a < 4; a++)
			#pragma unroll
			for (int b = 0; b < 4; b++)
				acc[a][b] += xa[a] * yb[b];
	}
}

/* acc[a][c] += sum_j p[ty + 16 a][j] y[j][tx + 16 c] */
static __device__ void tile_mul(float acc[4][4], const float *p, const float *y)
{
	int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
	for (int j = 0; j < TILE; j++) {
		float pa[4], yc[4];
		#pragma unroll
		for (int k = 0; k < 4; k++) {
			pa[k] = p[(ty + 16 * k) * TLD + j];
			yc[k] = y[j * TLD + tx + 16 * k];
		}
		#pragma unroll
		for (int a = 0; a < 4; a++)
			#pragma unroll
			for (int c = 0; c < 4; c++)
				acc[a][c] += pa[a] * yc[c];
	}
}

static __device__ float row16_max(float v)
{
	for (int o = 8; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

static __device__ float row16_sum(float v)
{
	for (int o = 8; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

/* Whether query i sees key j */
static __device__ bool sees(int i, int j, int T, int causal)
{
	return i < T && j < T && (!causal || j <= i);
}

static __global__ void __launch_bounds__(TILE_THREADS)
attn_tile_forward(const float *qkv, float *out, float *lse, int T, int C, int H, int causal,
		  float scale, dlt_attn_dropout drop)
{
	extern __shared__ float sm[];
	float *qs = sm, *ks = qs + TILE_FLOATS, *vs = ks + TILE_FLOATS, *ps = vs + TILE_FLOATS;
	int tx = threadIdx.x % 16, ty = threadIdx.x / 16, D = C / H;
	int b = blockIdx.y / H, h = blockIdx.y % H, q0 = blockIdx.x * TILE;
	int kend = causal && q0 + TILE < T ? q0 + TILE : T;
	size_t ld = (size_t)3 * C, row0 = (size_t)blockIdx.y * T;
	const float *base = qkv + (size_t)b * T * ld + (size_t)h * D;
	float m[4], l[4], o[4][4] = { { 0 } };
	#pragma unroll
	for (int a = 0; a < 4; a++) {
		m[a] = -INFINITY;
		l[a] = 0.0f;
	}
	tile_load(qs, base, ld, q0, T, D);
	for (int k0 = 0; k0 < kend; k0 += TILE) {
		float s[4][4] = { { 0 } };
		__syncthreads();	/* the tiles before are used */
		tile_load(ks, base + C, ld, k0, T, D);
		tile_load(vs, base + 2 * C, ld, k0, T, D);
		__syncthreads();
		tile_dots(s, qs, ks, D);
		#pragma unroll
		for (int a = 0; a < 4; a++) {
			int i = q0 + ty + 16 * a;
			float mx = -INFINITY, mnew, corr, sum = 0.0f;
			#pragma unroll
			for (int c = 0; c < 4; c++) {
				int j = k0 + tx + 16 * c;
				s[a][c] = sees(i, j, T, causal) ? s[a][c] * scale : -INFINITY;
				mx = fmaxf(mx, s[a][c]);
			}
			mnew = fmaxf(m[a], row16_max(mx));
			/* a row past T sees no key: keep it finite */
			mnew = mnew == -INFINITY ? 0.0f : mnew;
			corr = expf(m[a] - mnew);
			#pragma unroll
			for (int c = 0; c < 4; c++) {
				int j = k0 + tx + 16 * c;
				float p = expf(s[a][c] - mnew);
				sum += p;
				ps[(ty + 16 * a) * TLD + tx + 16 * c] =
					p ? p * dlt_attn_keep(drop, row0 + i, T, j) : 0.0f;
				o[a][c] *= corr;
			}
			l[a] = l[a] * corr + row16_sum(sum);
			m[a] = mnew;
		}
		__syncthreads();
		tile_mul(o, ps, vs);
	}
	#pragma unroll
	for (int a = 0; a < 4; a++) {
		int i = q0 + ty + 16 * a;
		if (i >= T)
			continue;
		#pragma unroll
		for (int c = 0; c < 4; c++) {
			int d = tx + 16 * c;
			if (d < D)
				out[((size_t)b * T + i) * C + (size_t)h * D + d] = o[a][c] * (1.0f / l[a]);
		}
		if (tx == 0)
			lse[row0 + i] = m[a] + logf(l[a]);
	}
}

/* dq_i = scale sum_j dS_ij k_j, dS_ij = P_ij (Z_ij dP_ij - D_i) */
static __global__ void __launch_bounds__(TILE_THREADS)
attn_tile_dq(const float *qkv, const float *dout, const float *lse, float *dqkv, int T, int C,
	     int H, int causal, float scale, dlt_attn_dropout drop)
{
	extern __shared__ float sm[];
	float *qs = sm, *gs = qs + TILE_FLOATS, *ks = gs + TILE_FLOATS, *vs = ks + TILE_FLOATS;
	float *dss = vs + TILE_FLOATS;
	int tx = threadIdx.x % 16, ty = threadIdx.x / 16, D = C / H;
	int b = blockIdx.y / H, h = blockIdx.y % H, q0 = blockIdx.x * TILE;
	int kend = causal && q0 + TILE < T ? q0 + TILE : T;
	size_t ld = (size_t)3 * C, row0 = (size_t)blockIdx.y * T;
	const float *base = qkv + (size_t)b * T * ld + (size_t)h * D;
	float *dbase = dqkv + (size_t)b * T * ld + (size_t)h * D;
	float dq[4][4] = { { 0 } }, li[4], di[4];
	#pragma unroll
	for (int a = 0; a < 4; a++) {
		int i = q0 + ty + 16 * a;
		li[a] = i < T ? lse[row0 + i] : 0.0f;
		di[a] = i < T ? dbase[(size_t)i * ld] : 0.0f;
	}
	tile_load(qs, base, ld, q0, T, D);
	tile_load(gs, dout + (size_t)b * T * C + (size_t)h * D, C, q0, T, D);
	for (int k0 = 0; k0 < kend; k0 += TILE) {
		float s[4][4] = { { 0 } }, dp[4][4] = { { 0 } };
		__syncthreads();
		tile_load(ks, base + C, ld, k0, T, D);
		tile_load(vs, base + 2 * C, ld, k0, T, D);
		__syncthreads();
		tile_dots(s, qs, ks, D);
		tile_dots(dp, gs, vs, D);
		#pragma unroll
		for (int a = 0; a < 4; a++)
			#pragma unroll
			for (int c = 0; c < 4; c++) {
				int i = q0 + ty + 16 * a, j = k0 + tx + 16 * c;
				float ds = 0.0f;
				if (sees(i, j, T, causal)) {
					float p = expf(s[a][c] * scale - li[a]);
					float z = dlt_attn_keep(drop, row0 + i, T, j);
					ds = p * (z * dp[a][c] - di[a]) * scale;
				}
				dss[(ty + 16 * a) * TLD + tx + 16 * c] = ds;
			}
		__syncthreads();
		tile_mul(dq, dss, ks);
	}
	__syncthreads();	/* every thread has read its rows' D_i */
	#pragma unroll
	for (int a = 0; a < 4; a++) {
		int i = q0 + ty + 16 * a;
		#pragma unroll
		for (int c = 0; c < 4; c++) {
			int d = tx + 16 * c;
			if (i < T && d < D)
				dbase[(size_t)i * ld + d] = dq[a][c];
		}
	}
}

/* dk_j = scale sum_i dS_ij q_i, dv_j = sum_i P_ij Z_ij dout_i over the
 * queries that see key j */
static __global__ void __launch_bounds__(TILE_THREADS)
attn_tile_dkv(const float *qkv, const float *dout, const float *lse, float *dqkv, int T, int C,
	      int H, int causal, float scale, dlt_attn_dropout drop)
{
	extern __shared__ float sm[];
	float *ks = sm, *vs = ks + TILE_FLOATS, *qs = vs + TILE_FLOATS, *gs = qs + TILE_FLOATS;
	float *ps = gs + TILE_FLOATS, *li = ps + TILE_FLOATS, *di = li + TILE;
	int tx = threadIdx.x % 16, ty = threadIdx.x / 16, D = C / H;
	int b = blockIdx.y / H, h = blockIdx.y % H, k0 = blockIdx.x * TILE;
	size_t ld = (size_t)3 * C, row0 = (size_t)blockIdx.y * T;
	const float *base = qkv + (size_t)b * T * ld + (size_t)h * D;
	const float *gbase = dout + (size_t)b * T * C + (size_t)h * D;
	float *dbase = dqkv + (size_t)b * T * ld + (size_t)h * D;
	float dk[4][4] = { { 0 } }, dv[4][4] = { { 0 } };
	tile_load(ks, base + C, ld, k0, T, D);
	tile_load(vs, base + 2 * C, ld, k0, T, D);
	for (int q0 = causal ? k0 : 0; q0 < T; q0 += TILE) {
		float s[4][4] = { { 0 } }, dp[4][4] = { { 0 } };
		__syncthreads();
		tile_load(qs, base, ld, q0, T, D);
		tile_load(gs, gbase, C, q0, T, D);
		if (threadIdx.x < TILE) {
			int i = q0 + threadIdx.x;
			li[threadIdx.x] = i < T ? lse[row0 + i] : 0.0f;
			di[threadIdx.x] = i < T ? dbase[(size_t)i * ld] : 0.0f;
		}
		__syncthreads();
		/* rows: keys ty + 16 a; columns: queries tx + 16 c */
		tile_dots(s, ks, qs, D);
		tile_dots(dp, vs, gs, D);
		#pragma unroll
		for (int a = 0; a < 4; a++)
			#pragma unroll
			for (int c = 0; c < 4; c++) {
				int j = k0 + ty + 16 * a, q = tx + 16 * c, i = q0 + q;
				float p = sees(i, j, T, causal) ? expf(s[a][c] * scale - li[q]) : 0.0f;
				float z = p ? dlt_attn_keep(drop, row0 + i, T, j) : 0.0f;
				ps[(ty + 16 * a) * TLD + q] = p * z;
				s[a][c] = p * (z * dp[a][c] - di[q]) * scale;	/* dS, scaled */
			}
		__syncthreads();
		tile_mul(dv, ps, gs);
		__syncthreads();
		#pragma unroll
		for (int a = 0; a < 4; a++)
			#pragma unroll
			for (int c = 0; c < 4; c++)
				ps[(ty + 16 * a) * TLD + tx + 16 * c] = s[a][c];
		__syncthreads();
		tile_mul(dk, ps, qs);
	}
	#pragma unroll
	for (int a = 0; a < 4; a++) {
		int j = k0 + ty + 16 * a;
		#pragma unroll
		for (int c = 0; c < 4; c++) {
			int d = tx + 16 * c;
			if (j < T && d < D) {
				dbase[(size_t)j * ld + C + d] = dk[a][c];
				dbase[(size_t)j * ld + 2 * C + d] = dv[a][c];
			}
		}
	}
}

/* Whether the tiles can run: heads up to 64, and the shared memory they
 * ask for granted (once; a GPU with less keeps the warp-a-row kernels) */
static int tiles_fit(int D)
{
	static int granted = -1;
	if (granted < 0) {
		granted = cudaFuncSetAttribute(attn_tile_forward,
					       cudaFuncAttributeMaxDynamicSharedMemorySize,
					       (int)FWD_SMEM) == cudaSuccess &&
			  cudaFuncSetAttribute(attn_tile_dq,
					       cudaFuncAttributeMaxDynamicSharedMemorySize,
					       (int)DQ_SMEM) == cudaSuccess &&
			  cudaFuncSetAttribute(attn_tile_dkv,
					       cudaFuncAttributeMaxDynamicSharedMemorySize,
					       (int)DKV_SMEM) == cudaSuccess;
		cudaGetLastError();	/* a refusal is an answer, not a failure */
	}
	return granted && D <= TILE;
}

/* Whether tiles of B H heads fit the grid (its y at most 65535) */
static int tiles_grid(int B, int H, int T, dim3 *grid)
{
	if ((size_t)B * H > 65535)
		return 0;
	*grid = dim3((unsigned)((T + TILE - 1) / TILE), (unsigned)(B * H));
	return 1;
}

int cu_attention_tiles_forward(const float *qkv, float *out, float *lse, int B, int T, int C,
			       int H, int causal, float scale, dlt_attn_dropout drop)
{
	dim3 grid;
	if (!tiles_fit(C / H) || !tiles_grid(B, H, T, &grid))
		return 0;
	attn_tile_forward<<<grid, TILE_THREADS, FWD_SMEM, cu.stream>>>(qkv, out, lse, T, C, H,
								      causal, scale, drop);
	cu_launched("attention_forward");
	return 1;
}

int cu_attention_tiles_backward(const float *qkv, const float *dout, const float *lse,
				float *dqkv, int B, int T, int C, int H, int causal, float scale,
				dlt_attn_dropout drop)
{
	dim3 grid;
	if (!tiles_fit(C / H) || !tiles_grid(B, H, T, &grid))
		return 0;
	attn_tile_dkv<<<grid, TILE_THREADS, DKV_SMEM, cu.stream>>>(qkv, dout, lse, dqkv, T, C, H,
								  causal, scale, drop);
	cu_launched("attention_backward");
	attn_tile_dq<<<grid, TILE_THREADS, DQ_SMEM, cu.stream>>>(qkv, dout, lse, dqkv, T, C, H,
								causal, scale, drop);
	cu_launched("attention_backward");
	return 1;
}
