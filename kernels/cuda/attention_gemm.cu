/* Attention by cuBLAS's batched products: for a chunk of the batch whose
 * scores fit the scratch and a head, S = scale Q K^T, a [T, T] for each
 * sample, then a kernel for the softmax (a warp a row: the causal mask,
 * lse, dropout's factor), then O = P V.  Backward makes S and dP = dO V^T
 * again, then a kernel P = exp(S - lse), dS = P (Z dP - D) with D_i =
 * dout_i . out_i, then dV = (P Z)^T dO, dQ = scale dS K, dK = scale dS^T
 * Q.  In f32 the products run on cuBLAS's f32 kernels (no TF32), dozens
 * of times the pace of the tiles' loops (attention_tiles.cu), at the cost
 * of the scores in memory (2 T T + T floats a sample in the chunk) and of
 * the causal half computed and masked.
 *
 * At bf16 and fp16 they run on the tensor cores, summed in f32: the
 * chunk's q, k, v (and dout) rounded once for all heads into 16-bit
 * copies, as gemm rounds its operands (a 16-bit model's are of the type
 * already), and the softmax's kernels write P Z (and dS) rounded to the
 * type into 16-bit scores of their own; S, dP, lse and D stay f32.  In
 * f32 the small GPT's attention ran at about 50 TFLOP/s on an H200, a
 * sixth of its bf16 step, where bf16's products run at about 350.
 *
 * Every sum has one order for a shape (cuBLAS on one stream, our kernels
 * in lane order and a fixed butterfly), so the bits do not depend on the
 * run.  Where not one sample's scores fit the scratch, or it cannot be
 * had, the tiles run (f32 at any prec). */
#include "kernels/cuda/internal.h"

/* Floats of the scores' scratch at most (256 MiB), made when attention
 * first runs and kept */
#define ATTN_SCRATCH ((size_t)64 << 20)
#define ROWS 8				/* rows a block, a warp each */

/* The model's row of row i of sample bi of the chunk from b0, head h */
static __device__ size_t model_row(int b0, int bi, int h, int H, int T, int i)
{
	return ((size_t)(b0 + bi) * H + h) * T + i;
}

/* Forward: S's n T rows to P Z, in place, or (p16: bf16 and fp16) as
 * prec's words into p16's rows; lse of each */
static __global__ void attn_softmax(float *S, uint16_t *p16, int prec, float *lse, int n, int T,
				    int H, int h, int b0, int causal, dlt_attn_dropout drop)
{
	size_t row = (size_t)blockIdx.x * ROWS + threadIdx.x / WARP, r;
	int lane = threadIdx.x % WARP, i, seen;
	float *s, m = -INFINITY, l = 0.0f, ls;
	if (row >= (size_t)n * T)
		return;
	i = (int)(row % T);
	s = S + row * T;
	seen = causal ? i + 1 : T;
	for (int j = lane; j < seen; j += WARP)
		m = fmaxf(m, s[j]);
	m = cu_warp_max(m);
	for (int j = lane; j < seen; j += WARP)
		l += expf(s[j] - m);
	ls = m + logf(cu_warp_sum(l));
	r = model_row(b0, (int)(row / T), h, H, T, i);
	if (lane == 0)
		lse[r] = ls;
	for (int j = lane; j < T; j += WARP) {
		float p = j < seen ? expf(s[j] - ls) * dlt_attn_keep(drop, r, T, j) : 0.0f;
		if (p16)
			p16[row * T + j] = cu_word16(p, prec);
		else
			s[j] = p;
	}
}

/* D_i = dout_i . out_i for the chunk's n T rows, into d; with g16, dout
 * as its rounded copy there (the same layout, prec's words) */
static __global__ void attn_d(const float *out, const float *dout, const uint16_t *g16, int prec,
			      float *d, int n, int T, int C, int D)
{
	size_t row = (size_t)blockIdx.x * ROWS + threadIdx.x / WARP;
	int lane = threadIdx.x % WARP;
	float acc = 0.0f;
	if (row >= (size_t)n * T)
		return;
	for (int e = lane; e < D; e += WARP)
		acc += (g16 ? dlt_widen16(g16[row * C + e], prec) : dout[row * C + e]) *
		       out[row * C + e];
	acc = cu_warp_sum(acc);
	if (lane == 0)
		d[row] = acc;
}

/* Backward: from S (scale Q K^T) and dP (dO V^T) to P Z in S and dS =
 * P (Z dP - D) in dP; or (p16, ds16: bf16 and fp16) as prec's words into
 * their rows */
static __global__ void attn_ds(float *S, float *dP, uint16_t *p16, uint16_t *ds16, int prec,
			       const float *lse, const float *d, int n, int T, int H, int h,
			       int b0, int causal, dlt_attn_dropout drop)
{
	size_t row = (size_t)blockIdx.x * ROWS + threadIdx.x / WARP, r;
	int lane = threadIdx.x % WARP, i, seen;
	float *s, *g, ls, di;
	if (row >= (size_t)n * T)
		return;
	i = (int)(row % T);
	s = S + row * T;
	g = dP + row * T;
	seen = causal ? i + 1 : T;
	r = model_row(b0, (int)(row / T), h, H, T, i);
	ls = lse[r];
	di = d[row];
	for (int j = lane; j < T; j += WARP) {
		float p = j < seen ? expf(s[j] - ls) : 0.0f;
		float z = p ? dlt_attn_keep(drop, r, T, j) : 0.0f;
		float ds = p * (z * g[j] - di);
		if (p16) {
			p16[row * T + j] = cu_word16(p * z, prec);
			ds16[row * T + j] = cu_word16(ds, prec);
		} else {
			s[j] = p * z;
			g[j] = ds;
		}
	}
}

/* Row-major C = alpha op(A) op(B) for n samples, each operand a stride
 * apart (gemm.cu's call: B first, M and N swapped); A and B floats, or
 * (prec bf16, fp16) its 16-bit words, C floats */
static int products(int prec, int tA, int tB, int M, int N, int K, float alpha, const void *A,
		    int lda, size_t sa, const void *B, int ldb, size_t sb, float *C, int ldc,
		    size_t sc, int n)
{
	const float zero = 0.0f;
	cudaDataType type = prec == DLT_PREC_BF16 ? CUDA_R_16BF
			  : prec == DLT_PREC_F16 ? CUDA_R_16F : CUDA_R_32F;
	return cu_check_blas(cublasGemmStridedBatchedEx(
				     cu.blas, tB ? CUBLAS_OP_T : CUBLAS_OP_N,
				     tA ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B, type,
				     ldb, (long long)sb, A, type, lda, (long long)sa, &zero, C,
				     CUDA_R_32F, ldc, (long long)sc, n, CUBLAS_COMPUTE_32F,
				     CUBLAS_GEMM_DEFAULT),
			     "attention: products");
}

/* A chunk's parts in the scratch, in floats from its start: S, dP and D
 * (f32, n T T, n T T, n T), then at bf16 and fp16 the 16-bit P Z and dS
 * (n T T words each) and the copies of q, k, v (n T 3C) and of dout (n T
 * C), each from a multiple of 64 floats */
typedef struct attn_parts {
	float *S, *dP, *d;
	uint16_t *p16, *ds16, *x16, *g16;
} attn_parts;

#define ATTN_ALIGN 64
static size_t aligned(size_t floats)
{
	return (floats + ATTN_ALIGN - 1) / ATTN_ALIGN * ATTN_ALIGN;
}

/* The layout of a chunk of n samples, the one place it is written: its
 * parts from base into *p (where p), and the floats they take */
static size_t chunk_layout(int prec, size_t n, int T, int C, float *base, attn_parts *p)
{
	size_t tt = (size_t)T * T, at = aligned(2 * n * tt + n * T);
	/* the 16-bit parts in order, and their words */
	uint16_t **part[4] = { NULL, NULL, NULL, NULL };
	size_t words[4] = { n * tt, n * tt, n * T * 3 * C, n * T * C };
	if (p) {
		*p = (attn_parts){ base, base + n * tt, base + 2 * n * tt, NULL, NULL, NULL, NULL };
		part[0] = &p->p16, part[1] = &p->ds16, part[2] = &p->x16, part[3] = &p->g16;
	}
	if (prec == DLT_PREC_F32)
		return at;
	for (int k = 0; k < 4; k++) {
		if (p)
			*part[k] = (uint16_t *)(base + at);
		at += aligned((words[k] + 1) / 2);
	}
	return at;
}

static size_t chunk_floats(int prec, size_t n, int T, int C)
{
	return chunk_layout(prec, n, T, C, NULL, NULL);
}

/* Samples of a chunk: as many of B as fit ATTN_SCRATCH; 0 where not one
 * does */
static int chunk_of(int prec, int B, int T, int C)
{
	size_t per = chunk_floats(prec, 1, T, C), n = ATTN_SCRATCH / per;
	while (n > 0 && chunk_floats(prec, n, T, C) > ATTN_SCRATCH)	/* the alignments */
		n--;
	return n < (size_t)B ? (int)n : B;
}

static attn_parts parts_of(float *base, int prec, size_t n, int T, int C)
{
	attn_parts p;
	chunk_layout(prec, n, T, C, base, &p);
	return p;
}

/* The scratch of at least floats, or NULL (nothing recorded: the tiles
 * run instead) */
static float *scratch_for(size_t floats)
{
	if (floats <= cu.attn_floats)
		return cu.attn;
	/* the stream may still run on the smaller one */
	if (cudaStreamSynchronize(cu.stream) != cudaSuccess)
		return NULL;
	cudaFree(cu.attn);
	cu.attn = NULL;
	cu.attn_floats = 0;
	if (cudaMalloc((void **)&cu.attn, floats * sizeof(float)) != cudaSuccess) {
		cudaGetLastError();	/* not sticky: clear it */
		cu.attn = NULL;
		return NULL;
	}
	cu.attn_floats = floats;
	return cu.attn;
}

static unsigned row_blocks(size_t rows)
{
	return (unsigned)((rows + ROWS - 1) / ROWS);
}

/* The first of a chunk's products' operand at element at of x (floats),
 * or of its 16-bit copy x16, where there is one */
static const void *operand(const float *x, const uint16_t *x16, size_t at)
{
	return x16 ? (const void *)(x16 + at) : (const void *)(x + at);
}

int cu_attention_gemm_forward(int prec, const float *qkv, float *out, float *lse, int B, int T,
			      int C, int H, int causal, float scale, dlt_attn_dropout drop)
{
	int D = C / H, nb = chunk_of(prec, B, T, C);
	size_t ld = (size_t)3 * C, tt = (size_t)T * T;
	float *base;
	attn_parts p;
	const void *pz;
	if (!nb || !(base = scratch_for(chunk_floats(prec, nb, T, C))))
		return 0;
	/* laid out for nb samples: a shorter last chunk uses each part's start */
	p = parts_of(base, prec, nb, T, C);
	pz = p.p16 ? (const void *)p.p16 : (const void *)p.S;
	for (int b0 = 0; b0 < B; b0 += nb) {
		int n = B - b0 < nb ? B - b0 : nb;
		const float *x = qkv + (size_t)b0 * T * ld;
		if (p.x16)	/* the heads' operands are then of the copy */
			cu_pack16(x, (int)ld, 0, 0, n * T, (int)ld, prec, p.x16);
		for (int h = 0; h < H; h++) {
			size_t q = (size_t)h * D;
			if (!products(prec, 0, 1, T, T, D, scale, operand(x, p.x16, q), (int)ld,
				      T * ld, operand(x, p.x16, q + C), (int)ld, T * ld, p.S, T, tt,
				      n))
				return 1;
			attn_softmax<<<row_blocks((size_t)n * T), ROWS * WARP, 0, cu.stream>>>(
				p.S, p.p16, prec, lse, n, T, H, h, b0, causal, drop);
			cu_launched("attention_forward");
			if (!products(prec, 0, 0, T, D, T, 1.0f, pz, T, tt,
				      operand(x, p.x16, q + 2 * C), (int)ld, T * ld,
				      out + (size_t)b0 * T * C + q, C, (size_t)T * C, n))
				return 1;
		}
	}
	return 1;
}

int cu_attention_gemm_backward(int prec, const float *qkv, const float *out, const float *dout,
			       const float *lse, float *dqkv, int B, int T, int C, int H,
			       int causal, float scale, dlt_attn_dropout drop)
{
	int D = C / H, nb = chunk_of(prec, B, T, C);
	size_t ld = (size_t)3 * C, tt = (size_t)T * T, tc = (size_t)T * C;
	float *base;
	attn_parts p;
	const void *pz, *ds;
	if (!nb || !(base = scratch_for(chunk_floats(prec, nb, T, C))))
		return 0;
	/* laid out for nb samples: a shorter last chunk uses each part's start */
	p = parts_of(base, prec, nb, T, C);
	pz = p.p16 ? (const void *)p.p16 : (const void *)p.S;
	ds = p.ds16 ? (const void *)p.ds16 : (const void *)p.dP;
	for (int b0 = 0; b0 < B; b0 += nb) {
		int n = B - b0 < nb ? B - b0 : nb;
		const float *x = qkv + (size_t)b0 * T * ld, *g = dout + (size_t)b0 * tc;
		float *dx = dqkv + (size_t)b0 * T * ld;
		if (p.x16) {
			cu_pack16(x, (int)ld, 0, 0, n * T, (int)ld, prec, p.x16);
			cu_pack16(g, C, 0, 0, n * T, C, prec, p.g16);
		}
		for (int h = 0; h < H; h++) {
			size_t q = (size_t)h * D;
			const void *qh = operand(x, p.x16, q), *kh = operand(x, p.x16, q + C);
			const void *vh = operand(x, p.x16, q + 2 * C), *gh = operand(g, p.g16, q);
			attn_d<<<row_blocks((size_t)n * T), ROWS * WARP, 0, cu.stream>>>(
				out + (size_t)b0 * tc + q, g + q, p.g16 ? p.g16 + q : NULL, prec, p.d,
				n, T, C, D);
			cu_launched("attention_backward");
			if (!products(prec, 0, 1, T, T, D, scale, qh, (int)ld, T * ld, kh, (int)ld,
				      T * ld, p.S, T, tt, n) ||
			    !products(prec, 0, 1, T, T, D, 1.0f, gh, C, tc, vh, (int)ld, T * ld,
				      p.dP, T, tt, n))
				return 1;
			attn_ds<<<row_blocks((size_t)n * T), ROWS * WARP, 0, cu.stream>>>(
				p.S, p.dP, p.p16, p.ds16, prec, lse, p.d, n, T, H, h, b0, causal,
				drop);
			cu_launched("attention_backward");
			if (!products(prec, 1, 0, T, D, T, 1.0f, pz, T, tt, gh, C, tc, dx + q + 2 * C,
				      (int)ld, T * ld, n) ||
			    !products(prec, 0, 0, T, D, T, scale, ds, T, tt, kh, (int)ld, T * ld,
				      dx + q, (int)ld, T * ld, n) ||
			    !products(prec, 1, 0, T, D, T, scale, ds, T, tt, qh, (int)ld, T * ld,
				      dx + q + C, (int)ld, T * ld, n))
				return 1;
		}
	}
	return 1;
}
