/* What the CUDA backend's files share: the one device's state (stream,
 * cuBLAS and cuDNN handles, preallocated scratch), the sticky error and
 * launch helpers.  Every entry runs on the one stream, in order; only
 * alloc, upload, download and the two entries that return numbers
 * (softmax_xent, nonfinite) wait for it. */
#ifndef DLT_CUDA_INTERNAL_H
#define DLT_CUDA_INTERNAL_H

#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <cudnn.h>

#include "kernels/kernels.h"
#include "kernels/common/math.h"

/* Threads per block of the element-wise kernels and the reductions */
#define CU_THREADS 256
/* Partial results a multi-block reduction may leave in cu.partial */
#define CU_MAX_PARTIALS 1024
/* 16-bit values of the gemm's bf16/fp16 operand scratch: the rounded copies of
 * A and B, a range of K at a time (gemm.cu) */
#define CU_HALF_SCRATCH (16u << 20)

typedef struct cu_state {
	int device;
	cudaStream_t stream;
	cudaStream_t copy;		/* upload_async's, beside the step's */
	cudaEvent_t copied;		/* the last upload_async done */
	cudaEvent_t called;		/* the step's work before the last upload_async */
	cublasHandle_t blas;
	cudnnHandle_t dnn;
	void *blas_work;		/* cuBLAS's workspace, ours so it never allocates */
	double *partial;		/* CU_MAX_PARTIALS doubles */
	unsigned long long *count;	/* CU_MAX_PARTIALS counters */
	void *host;			/* pinned: the results copied back */
	void *half;			/* CU_HALF_SCRATCH 16-bit values */
	double *colsum;		/* CU_COLSUM doubles: column sums' ranges */
	float *attn;			/* attention's scores (attention_gemm.cu), or NULL */
	size_t attn_floats;
	char error[256];		/* the first failure, "" while none */
} cu_state;

extern cu_state cu;

/* Records the first failure (the table's entries return nothing, and the
 * library never prints); returns whether ok. */
int cu_check(cudaError_t e, const char *what);
int cu_check_blas(cublasStatus_t s, const char *what);
int cu_check_dnn(cudnnStatus_t s, const char *what);
/* A launch's own error (bad configuration), recorded */
int cu_launched(const char *what);

/* Element i of n for each thread, a grid's width apart */
#define GRID_STRIDE(i, n) \
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
	     i += (size_t)gridDim.x * blockDim.x)

#define WARP 32

/* v rounded to prec (bf16 or fp16) as that type's 16-bit word: the common
 * code's rounding, then its exact narrowing, as the CPU's */
static __device__ inline uint16_t cu_word16(float v, int prec)
{
	return dlt_narrow16(dlt_round_prec(v, prec), prec);
}

/* The sum and the maximum of v over a warp's lanes, every lane getting
 * it: a butterfly of shuffles, in one order, so the same bits each run */
static __device__ inline float cu_warp_sum(float v)
{
	for (int o = WARP / 2; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

static __device__ inline float cu_warp_max(float v)
{
	for (int o = WARP / 2; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

/* Column sums (bias and layer-norm gradients) in an order that the shape
 * alone fixes: the rows in col_chunks ranges, each range's rows in order
 * in double by one block, then the ranges' sums in order (col_finish).
 * One range (a matrix of fewer than 2 * COL_CHUNK_ROWS rows) is the
 * reference's order, so its bits; more differ from them by a float's last
 * bit at most, and fill the GPU: a range a block, where the rows in order
 * left 12 blocks of 132 SMs to sum a GPT's 32768 rows.
 *
 * In a block of COL_BLOCK threads, 32 columns, a lane a column: warps 1
 * to 8 stage tiles of COL_ROWS rows into shared memory, each issuing the
 * loads of its COL_ROWS / 8 rows together (load(row, col, v) gives the NV
 * floats of an element), while warp 0 folds the tile before in order
 * (fold(v)) into its lane's sums.  Launch with COL_BLOCK threads and
 * dim3(col_blocks(cols), col_chunks(rows, NS, cols)) blocks; warp 0's
 * lanes end with their sums, which col_out keeps. */
#define COL_ROWS 64
#define COL_LOADERS 8
#define COL_BLOCK ((COL_LOADERS + 1) * WARP)
#define COL_CHUNK_ROWS 512
#define COL_CHUNKS_MAX 64
/* Doubles of cu.colsum: the ranges' sums */
#define CU_COLSUM ((size_t)1 << 20)

static inline unsigned col_blocks(int cols)
{
	return (unsigned)((cols + WARP - 1) / WARP);
}

/* Ranges of a sum over units (rows, samples): one per `per` units, at
 * most COL_CHUNKS_MAX and as many as cu.colsum holds `width` sums of
 * each for */
static inline unsigned col_ranges(size_t units, size_t per, size_t width)
{
	size_t n = units / per, room = CU_COLSUM / width;
	n = n < room ? n : room;
	n = n < COL_CHUNKS_MAX ? n : COL_CHUNKS_MAX;
	return n ? (unsigned)n : 1u;
}

/* column_pass's ranges of rows for NS sums of each column */
static inline unsigned col_chunks(int rows, int ns, int cols)
{
	return col_ranges((size_t)rows, COL_CHUNK_ROWS, (size_t)ns * cols);
}

template <int NV, class Load, class Fold>
static __device__ void column_pass(int rows, int cols, Load load, Fold fold)
{
	const int per = COL_ROWS / COL_LOADERS;
	__shared__ float tile[2][NV][COL_ROWS][WARP];
	int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP, col = blockIdx.x * WARP + lane;
	int span = (rows + gridDim.y - 1) / gridDim.y, r0 = blockIdx.y * span;
	int r1 = r0 + span < rows ? r0 + span : rows;
	int tiles = r1 > r0 ? (r1 - r0 + COL_ROWS - 1) / COL_ROWS : 0;
	for (int t = 0; t <= tiles; t++) {
		if (warp > 0 && t < tiles) {
			float v[per][NV];
			#pragma unroll
			for (int k = 0; k < per; k++) {
				int row = r0 + t * COL_ROWS + (warp - 1) * per + k;
				#pragma unroll
				for (int e = 0; e < NV; e++)
					v[k][e] = 0.0f;
				if (row < r1 && col < cols)
					load(row, col, v[k]);
			}
			#pragma unroll
			for (int k = 0; k < per; k++)
				#pragma unroll
				for (int e = 0; e < NV; e++)
					tile[t & 1][e][(warp - 1) * per + k][lane] = v[k][e];
		} else if (warp == 0 && t > 0) {
			int n = r1 - r0 - (t - 1) * COL_ROWS;
			n = n < COL_ROWS ? n : COL_ROWS;
			#pragma unroll 16
			for (int r = 0; r < n; r++) {
				float v[NV];
				#pragma unroll
				for (int e = 0; e < NV; e++)
					v[e] = tile[(t - 1) & 1][e][r][lane];
				fold(v);
			}
		}
		__syncthreads();
	}
}

/* out[col] = s, or += s where add (layer norm's parameters gather) */
static __device__ inline void col_put(float *out, int col, double s, int add)
{
	out[col] = add ? out[col] + (float)s : (float)s;
}

/* A range's NS sums of column col (NS 1 or 2: out0, out1): the outputs
 * where the rows are one range, else cu.colsum's [range][NS][cols] for
 * col_finish */
template <int NS>
static __device__ void col_out(const double *s, int col, int cols, double *part, float *out0,
			       float *out1, int add)
{
	if (col >= cols)
		return;
	if (gridDim.y > 1) {
		for (int e = 0; e < NS; e++)
			part[((size_t)blockIdx.y * NS + e) * cols + col] = s[e];
		return;
	}
	col_put(out0, col, s[0], add);
	if (NS > 1)
		col_put(out1, col, s[1], add);
}

/* The ranges' sums in order into out0 (and out1 where ns is 2): after a
 * launch of more than one range; nothing after one */
void cu_col_finish(int ns, int cols, unsigned chunks, float *out0, float *out1, int add);

/* Blocks for n elements a thread each, grid-stride beyond */
static inline unsigned cu_blocks(size_t n)
{
	size_t b = (n + CU_THREADS - 1) / CU_THREADS;
	return b > 65535 ? 65535u : (unsigned)(b ? b : 1);
}

/* The table's entries that live outside backend.cu */
void cu_gemm(int prec, int tA, int tB, int M, int N, int K, float alpha, const float *A,
	     int lda, const float *B, int ldb, float beta, float *C, int ldc);
/* rows x cols of row-major src (leading dimension ld) from (r0, c0),
 * rounded to prec (bf16 or fp16) and packed row-major as its 16-bit words
 * into dst (gemm.cu) */
void cu_pack16(const float *src, int ld, int r0, int c0, int rows, int cols, int prec,
	       uint16_t *dst);
size_t cu_conv_workspace(int prec, const dlt_conv *s);
void cu_conv_forward(int prec, const dlt_conv *s, const float *x, const float *w,
		     const float *b, float *y, int act, float slope, float *work);
void cu_conv_backward(int prec, const dlt_conv *s, const float *x, const float *w,
		      const float *dy, float *dx, float *dw, float *db, float *work);
void cu_maxpool_forward(const dlt_pool *s, const float *x, float *y, int32_t *arg);
void cu_maxpool_backward(const dlt_pool *s, const float *dy, const int32_t *arg, float *dx);
void cu_avgpool_forward(const dlt_pool *s, const float *x, float *y);
void cu_avgpool_backward(const dlt_pool *s, const float *dy, float *dx);
void cu_batchnorm_train(int n, int c, int hw, const float *x, const float *gamma,
			const float *beta, float *y, float *mean, float *invstd, float *run_mean,
			float *run_var, float momentum, float eps);
void cu_batchnorm_eval(int n, int c, int hw, const float *x, const float *gamma,
		       const float *beta, const float *run_mean, const float *run_var, float eps,
		       float *y);
void cu_batchnorm_backward(int n, int c, int hw, const float *x, const float *dy,
			   const float *gamma, const float *mean, const float *invstd, float *dx,
			   float *dgamma, float *dbeta);
void cu_bias_act(float *y, const float *bias, int rows, int cols, int act, float slope, int prec);
void cu_act_forward(const float *x, float *y, size_t n, int act, float slope);
void cu_act_backward(const float *x, const float *y, const float *dy, float *dx, size_t n,
		     int act, float slope);
void cu_bias_grad(const float *dy, float *db, int rows, int cols);
void cu_softmax_xent(const float *logits, const int32_t *labels, int rows, int cols,
		     float *dlogits, double *loss_sum, int *correct);
void cu_pointwise_loss(int kind, float delta, const float *y, const float *t, int rows, int cols,
		       float *dy, double *loss_sum);
void cu_dropout(const float *x, float *y, float *mask, size_t n, float rate, uint64_t seed,
		uint64_t stream);
void cu_mul(const float *a, const float *b, float *y, size_t n);
void cu_add(const float *a, const float *b, float *y, size_t n);
void cu_scale(float *x, size_t n, float s);
void cu_round(float *x, size_t n, int prec);
void cu_narrow(const float *x, uint16_t *y, size_t n, int prec);
void cu_widen(const uint16_t *x, float *y, size_t n, int prec);
size_t cu_nonfinite(const float *x, size_t n);
double cu_sum_squares(const float *x, size_t n);
void cu_adam(float *w, const float *g, float *m, float *v, size_t n, float lr, float beta1,
	     float beta2, float eps, float wd, int decoupled, long long step, float gscale);
void cu_sgd(float *w, const float *g, float *buf, size_t n, float lr, float momentum,
	    int nesterov, float wd, int first, float gscale);
void cu_layernorm_forward(const float *x, const float *gamma, const float *beta, float *y,
			  float *mean, float *rstd, int rows, int C, float eps);
void cu_layernorm_backward(const float *x, const float *dy, const float *gamma,
			   const float *mean, const float *rstd, float *dx, float *dgamma,
			   float *dbeta, int rows, int C);
void cu_embedding_forward(const int32_t *ids, const float *w, float *out, int n, int C, int V);
void cu_embedding_backward(const int32_t *ids, const float *dout, float *dw, int n, int C, int V);
void cu_positional_forward(const float *x, const float *p, float *y, int B, int T, int C);
void cu_positional_backward(const float *dy, float *dp, int B, int T, int C);
void cu_attention_forward(int prec, const float *qkv, float *out, float *lse, int B, int T,
			  int C, int H, int causal, dlt_attn_dropout drop);
void cu_attention_backward(int prec, const float *qkv, const float *out, const float *dout,
			   const float *lse, float *dqkv, int B, int T, int C, int H, int causal,
			   dlt_attn_dropout drop);
/* Attention by batched products (attention_gemm.cu), in prec's type on
 * the tensor cores at bf16 and fp16: 0, having done nothing, where a
 * sample's scores do not fit its scratch */
int cu_attention_gemm_forward(int prec, const float *qkv, float *out, float *lse, int B, int T,
			      int C, int H, int causal, float scale, dlt_attn_dropout drop);
int cu_attention_gemm_backward(int prec, const float *qkv, const float *out, const float *dout,
			       const float *lse, float *dqkv, int B, int T, int C, int H,
			       int causal, float scale, dlt_attn_dropout drop);
/* The tiled attention (attention_tiles.cu): 0, having done nothing, where
 * the head or the GPU does not fit its tiles */
int cu_attention_tiles_forward(const float *qkv, float *out, float *lse, int B, int T, int C,
			       int H, int causal, float scale, dlt_attn_dropout drop);
int cu_attention_tiles_backward(const float *qkv, const float *dout, const float *lse,
				float *dqkv, int B, int T, int C, int H, int causal, float scale,
				dlt_attn_dropout drop);
void cu_attention_decode(const float *qkv, float *out, int q0, int n, int C, int H);

#endif
