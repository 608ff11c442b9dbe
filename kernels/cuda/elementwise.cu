/* The element-wise kernels and the small reductions of the dense layers,
 * the loss and the optimisers.  Each element's value comes from the
 * same function of kernels/common/math.h as on the CPU; built with
 * -fmad=false (see the Makefile) so that a * b + c rounds twice, as the
 * CPU's plain x86-64 code does, and the arithmetic ones (relu, adam, sgd,
 * round, dropout...) give the CPU's bits.  Reductions have a fixed order,
 * so a result never depends on how the blocks were scheduled. */
#include "kernels/cuda/internal.h"

/* kernel on `blocks` blocks, where there are n elements */
#define LAUNCH_ON(blocks, kernel, n, ...) \
	do { \
		if (n) { \
			kernel<<<(blocks), CU_THREADS, 0, cu.stream>>>(__VA_ARGS__); \
			cu_launched(#kernel); \
		} \
	} while (0)
/* an element a thread; and 4 a thread (vec4 below) */
#define LAUNCH(kernel, n, ...) LAUNCH_ON(cu_blocks(n), kernel, n, __VA_ARGS__)
#define VEC4_LAUNCH(kernel, n, ...) LAUNCH_ON(vec4_blocks(n), kernel, n, __VA_ARGS__)

static __global__ void act_kernel(const float *x, float *y, size_t n, int act, float slope)
{
	GRID_STRIDE(i, n)
		y[i] = dlt_act(x[i], act, slope);
}

/* The streaming kernels of large tensors (activations and their
 * gradients, the residual adds) take 4 elements a thread where their
 * arrays are 16-byte aligned: 16-byte loads and stores, so that four
 * times the bytes are in flight a thread, where an element a thread
 * leaves much of a GPU's memory bandwidth unused.  The same function of
 * each element, so the same bits; the last n % 4 elements by block 0's
 * first threads. */
static int vec4(const void *a, const void *b, const void *c, const void *d)
{
	return (uintptr_t)a % 16 == 0 && (uintptr_t)b % 16 == 0 && (uintptr_t)c % 16 == 0 &&
	       (uintptr_t)d % 16 == 0;
}

/* Blocks for n elements, 4 a thread */
static unsigned vec4_blocks(size_t n)
{
	return cu_blocks(n / 4 ? n / 4 : 1);
}

/* The element of the last n % 4 that this thread takes, or n */
static __device__ inline size_t vec4_tail(size_t n)
{
	return blockIdx.x == 0 && threadIdx.x < n % 4 ? n / 4 * 4 + threadIdx.x : n;
}

#define LANES(v) (reinterpret_cast<float *>(&(v)))

static __global__ void act_kernel4(const float *x, float *y, size_t n, int act, float slope)
{
	size_t t = vec4_tail(n);
	GRID_STRIDE(i, n / 4) {
		float4 v = reinterpret_cast<const float4 *>(x)[i];
		#pragma unroll
		for (int k = 0; k < 4; k++)
			LANES(v)[k] = dlt_act(LANES(v)[k], act, slope);
		reinterpret_cast<float4 *>(y)[i] = v;
	}
	if (t < n)
		y[t] = dlt_act(x[t], act, slope);
}

void cu_act_forward(const float *x, float *y, size_t n, int act, float slope)
{
	if (act == DLT_ACT_NONE && x != y && n)
		cu_check(cudaMemcpyAsync(y, x, n * sizeof(*y), cudaMemcpyDeviceToDevice, cu.stream),
			 "act_forward");
	else if (act != DLT_ACT_NONE && vec4(x, y, NULL, NULL))
		VEC4_LAUNCH(act_kernel4, n, x, y, n, act, slope);
	else if (act != DLT_ACT_NONE)
		LAUNCH(act_kernel, n, x, y, n, act, slope);
}

/* Element i of y: without a bias, y as it is (a -0 stays -0, as
 * act_forward keeps it) */
static __device__ inline float bias_act1(float v, const float *bias, size_t i, int cols,
					 int act, float slope, int prec)
{
	return dlt_round_prec(dlt_act(bias ? v + bias[i % cols] : v, act, slope), prec);
}

static __global__ void bias_act_kernel(float *y, const float *bias, size_t n, int cols, int act,
				       float slope, int prec)
{
	GRID_STRIDE(i, n)
		y[i] = bias_act1(y[i], bias, i, cols, act, slope, prec);
}

static __global__ void bias_act_kernel4(float *y, const float *bias, size_t n, int cols, int act,
					float slope, int prec)
{
	size_t t = vec4_tail(n);
	GRID_STRIDE(i, n / 4) {
		float4 v = reinterpret_cast<float4 *>(y)[i];
		#pragma unroll
		for (int k = 0; k < 4; k++)
			LANES(v)[k] = bias_act1(LANES(v)[k], bias, 4 * i + k, cols, act, slope, prec);
		reinterpret_cast<float4 *>(y)[i] = v;
	}
	if (t < n)
		y[t] = bias_act1(y[t], bias, t, cols, act, slope, prec);
}

void cu_bias_act(float *y, const float *bias, int rows, int cols, int act, float slope, int prec)
{
	size_t n = (size_t)rows * cols;
	if (!n || (!bias && act == DLT_ACT_NONE && prec == DLT_PREC_F32))
		return;
	if (vec4(y, NULL, NULL, NULL))
		VEC4_LAUNCH(bias_act_kernel4, n, y, bias, n, cols, act, slope, prec);
	else
		LAUNCH(bias_act_kernel, n, y, bias, n, cols, act, slope, prec);
}

static __global__ void act_backward_kernel(const float *x, const float *y, const float *dy,
					   float *dx, size_t n, int act, float slope)
{
	GRID_STRIDE(i, n)
		dx[i] = dlt_act_backward(x[i], y[i], dy[i], act, slope);
}

static __global__ void act_backward_kernel4(const float *x, const float *y, const float *dy,
					    float *dx, size_t n, int act, float slope)
{
	size_t t = vec4_tail(n);
	GRID_STRIDE(i, n / 4) {
		float4 a = reinterpret_cast<const float4 *>(x)[i];
		float4 b = reinterpret_cast<const float4 *>(y)[i];
		float4 g = reinterpret_cast<const float4 *>(dy)[i];
		#pragma unroll
		for (int k = 0; k < 4; k++)
			LANES(g)[k] = dlt_act_backward(LANES(a)[k], LANES(b)[k], LANES(g)[k], act,
						       slope);
		reinterpret_cast<float4 *>(dx)[i] = g;
	}
	if (t < n)
		dx[t] = dlt_act_backward(x[t], y[t], dy[t], act, slope);
}

void cu_act_backward(const float *x, const float *y, const float *dy, float *dx, size_t n,
		     int act, float slope)
{
	if (vec4(x, y, dy, dx))
		VEC4_LAUNCH(act_backward_kernel4, n, x, y, dy, dx, n, act, slope);
	else
		LAUNCH(act_backward_kernel, n, x, y, dy, dx, n, act, slope);
}

/* Each column's rows in double, in column_pass's ranges */
static __global__ void bias_grad_kernel(const float *dy, float *db, int rows, int cols,
					double *part)
{
	int c = blockIdx.x * WARP + threadIdx.x % WARP;
	double s = 0.0;
	column_pass<1>(rows, cols,
		       [=](int r, int col, float *v) { v[0] = dy[(size_t)r * cols + col]; },
		       [&](const float *v) { s += v[0]; });
	if (threadIdx.x < WARP)
		col_out<1>(&s, c, cols, part, db, NULL, 0);
}

void cu_bias_grad(const float *dy, float *db, int rows, int cols)
{
	unsigned chunks;
	if (cols < 1)
		return;
	chunks = col_chunks(rows, 1, cols);
	bias_grad_kernel<<<dim3(col_blocks(cols), chunks), COL_BLOCK, 0, cu.stream>>>(
		dy, db, rows, cols, cu.colsum);
	cu_launched("bias_grad");
	cu_col_finish(1, cols, chunks, db, NULL, 0);
}

/* A thread a column: the ranges in order */
static __global__ void col_finish_kernel(int ns, int cols, int chunks, const double *part,
					 float *out0, float *out1, int add)
{
	int col = blockIdx.x * blockDim.x + threadIdx.x;
	double s0 = 0.0, s1 = 0.0;
	if (col >= cols)
		return;
	for (int k = 0; k < chunks; k++) {
		s0 += part[(size_t)k * ns * cols + col];
		if (ns > 1)
			s1 += part[((size_t)k * ns + 1) * cols + col];
	}
	col_put(out0, col, s0, add);
	if (ns > 1)
		col_put(out1, col, s1, add);
}

void cu_col_finish(int ns, int cols, unsigned chunks, float *out0, float *out1, int add)
{
	if (chunks < 2)
		return;
	col_finish_kernel<<<(unsigned)((cols + CU_THREADS - 1) / CU_THREADS), CU_THREADS, 0,
			    cu.stream>>>(ns, cols, (int)chunks, cu.colsum, out0, out1, add);
	cu_launched("column sums");
}

/* softmax_xent: a thread a row (and the rows a grid's width further on,
 * in order), each block's losses summed in a fixed tree, the blocks' sums
 * in order by one thread.  The grid depends only on rows, so the total's
 * bits do too. */
static __global__ void xent_rows(const float *logits, const int32_t *labels, int rows,
				 int cols, float scale, float *dlogits, double *partial,
				 unsigned long long *hits)
{
	__shared__ double loss[CU_THREADS];
	__shared__ unsigned long long hit[CU_THREADS];
	int t = threadIdx.x;
	loss[t] = 0.0;
	hit[t] = 0;
	for (int r = blockIdx.x * CU_THREADS + t; r < rows; r += gridDim.x * CU_THREADS) {
		size_t off = (size_t)r * cols;
		int am;
		loss[t] += dlt_softmax_xent_row(logits + off, cols, labels[r], scale,
						dlogits + off, &am);
		hit[t] += am == labels[r];
	}
	__syncthreads();
	for (int s = CU_THREADS / 2; s > 0; s >>= 1) {
		if (t < s) {
			loss[t] += loss[t + s];
			hit[t] += hit[t + s];
		}
		__syncthreads();
	}
	if (t == 0) {
		partial[blockIdx.x] = loss[0];
		hits[blockIdx.x] = hit[0];
	}
}

static __global__ void xent_total(double *partial, unsigned long long *hits, int blocks)
{
	double s = 0.0;
	unsigned long long h = 0;
	for (int b = 0; b < blocks; b++) {
		s += partial[b];
		h += hits[b];
	}
	partial[0] = s;
	hits[0] = h;
}

/* The one wait of a training step: the loss and the count come back. */
void cu_softmax_xent(const float *logits, const int32_t *labels, int rows, int cols,
		     float *dlogits, double *loss_sum, int *correct)
{
	int blocks = (rows + CU_THREADS - 1) / CU_THREADS;
	double *back = (double *)cu.host;
	unsigned long long *back_hits = (unsigned long long *)(back + 1);
	*loss_sum = 0.0;
	*correct = 0;
	if (rows < 1 || cols < 1)
		return;
	if (blocks > CU_MAX_PARTIALS)
		blocks = CU_MAX_PARTIALS;
	xent_rows<<<blocks, CU_THREADS, 0, cu.stream>>>(logits, labels, rows, cols, 1.0f / rows,
							dlogits, cu.partial, cu.count);
	cu_launched("softmax_xent");
	xent_total<<<1, 1, 0, cu.stream>>>(cu.partial, cu.count, blocks);
	cu_launched("softmax_xent");
	cu_check(cudaMemcpyAsync(back, cu.partial, sizeof(double), cudaMemcpyDeviceToHost,
				 cu.stream), "softmax_xent");
	cu_check(cudaMemcpyAsync(back_hits, cu.count, sizeof(*back_hits), cudaMemcpyDeviceToHost,
				 cu.stream), "softmax_xent");
	/* after any failure (kept in cu.error) the results are not to be
	 * trusted: a NaN loss says so in the metrics */
	if (cu_check(cudaStreamSynchronize(cu.stream), "softmax_xent") && !cu.error[0]) {
		*loss_sum = *back;
		*correct = (int)*back_hits;
	} else {
		*loss_sum = NAN;
	}
}

/* A thread per Philox block: four consecutive elements, as on the CPU */
static __global__ void dropout_kernel(const float *x, float *y, float *mask, size_t n,
				      float rate, float scale, uint64_t seed, uint64_t stream)
{
	GRID_STRIDE(b, (n + 3) / 4) {
		uint32_t bits[4];
		size_t i0 = b * 4;
		dlt_philox_block(seed, stream, b, bits);
		for (int j = 0; j < 4 && i0 + j < n; j++) {
			mask[i0 + j] = dlt_dropout_mask(bits[j], rate, scale);
			y[i0 + j] = x[i0 + j] * mask[i0 + j];
		}
	}
}

void cu_dropout(const float *x, float *y, float *mask, size_t n, float rate, uint64_t seed,
		uint64_t stream)
{
	LAUNCH(dropout_kernel, (n + 3) / 4, x, y, mask, n, rate, dlt_dropout_scale(rate), seed,
	       stream);
}

static __global__ void mul_kernel(const float *a, const float *b, float *y, size_t n)
{
	GRID_STRIDE(i, n)
		y[i] = a[i] * b[i];
}

void cu_mul(const float *a, const float *b, float *y, size_t n)
{
	LAUNCH(mul_kernel, n, a, b, y, n);
}

static __global__ void add_kernel(const float *a, const float *b, float *y, size_t n)
{
	GRID_STRIDE(i, n)
		y[i] = a[i] + b[i];
}

static __global__ void add_kernel4(const float *a, const float *b, float *y, size_t n)
{
	size_t t = vec4_tail(n);
	GRID_STRIDE(i, n / 4) {
		float4 u = reinterpret_cast<const float4 *>(a)[i];
		float4 v = reinterpret_cast<const float4 *>(b)[i];
		#pragma unroll
		for (int k = 0; k < 4; k++)
			LANES(u)[k] = LANES(u)[k] + LANES(v)[k];
		reinterpret_cast<float4 *>(y)[i] = u;
	}
	if (t < n)
		y[t] = a[t] + b[t];
}

void cu_add(const float *a, const float *b, float *y, size_t n)
{
	if (vec4(a, b, y, NULL))
		VEC4_LAUNCH(add_kernel4, n, a, b, y, n);
	else
		LAUNCH(add_kernel, n, a, b, y, n);
}

static __global__ void scale_kernel(float *x, size_t n, float s)
{
	GRID_STRIDE(i, n)
		x[i] *= s;
}

void cu_scale(float *x, size_t n, float s)
{
	LAUNCH(scale_kernel, n, x, n, s);
}

static __global__ void round_kernel(float *x, size_t n, int prec)
{
	GRID_STRIDE(i, n)
		x[i] = dlt_round_prec(x[i], prec);
}

/* round_kernel 4 elements a thread (vec4): the rounding of every bf16
 * product's output, with gemm's packing a fifth of a bf16 GPT step an
 * element a thread (gemm.cu) */
static __global__ void round_kernel4(float *x, size_t n, int prec)
{
	size_t t = vec4_tail(n);
	GRID_STRIDE(i, n / 4) {
		float4 v = reinterpret_cast<float4 *>(x)[i];
		#pragma unroll
		for (int k = 0; k < 4; k++)
			LANES(v)[k] = dlt_round_prec(LANES(v)[k], prec);
		reinterpret_cast<float4 *>(x)[i] = v;
	}
	if (t < n)
		x[t] = dlt_round_prec(x[t], prec);
}

void cu_round(float *x, size_t n, int prec)
{
	if (prec == DLT_PREC_F32)
		return;
	if (vec4(x, NULL, NULL, NULL))
		VEC4_LAUNCH(round_kernel4, n, x, n, prec);
	else
		LAUNCH(round_kernel, n, x, n, prec);
}

/* 16-bit storage: the common code's exact conversions, an element a
 * thread */
static __global__ void narrow_kernel(const float *x, uint16_t *y, size_t n, int prec)
{
	GRID_STRIDE(i, n)
		y[i] = dlt_narrow16(x[i], prec);
}

static __global__ void widen_kernel(const uint16_t *x, float *y, size_t n, int prec)
{
	GRID_STRIDE(i, n)
		y[i] = dlt_widen16(x[i], prec);
}

/* 4 elements a thread (vec4): 16 bytes of floats, 8 of words */
static __global__ void narrow_kernel4(const float *x, uint16_t *y, size_t n, int prec)
{
	size_t t = vec4_tail(n);
	GRID_STRIDE(i, n / 4) {
		float4 v = reinterpret_cast<const float4 *>(x)[i];
		reinterpret_cast<uint2 *>(y)[i] =
			make_uint2(dlt_narrow16(v.x, prec) | (uint32_t)dlt_narrow16(v.y, prec) << 16,
				   dlt_narrow16(v.z, prec) | (uint32_t)dlt_narrow16(v.w, prec) << 16);
	}
	if (t < n)
		y[t] = dlt_narrow16(x[t], prec);
}

static __global__ void widen_kernel4(const uint16_t *x, float *y, size_t n, int prec)
{
	size_t t = vec4_tail(n);
	GRID_STRIDE(i, n / 4) {
		uint2 w = reinterpret_cast<const uint2 *>(x)[i];
		reinterpret_cast<float4 *>(y)[i] =
			make_float4(dlt_widen16((uint16_t)w.x, prec), dlt_widen16((uint16_t)(w.x >> 16), prec),
				    dlt_widen16((uint16_t)w.y, prec), dlt_widen16((uint16_t)(w.y >> 16), prec));
	}
	if (t < n)
		y[t] = dlt_widen16(x[t], prec);
}

/* The words' side is 8-byte aligned where the floats' is 16 */
static int vec4_words(const float *f, const uint16_t *w)
{
	return vec4(f, NULL, NULL, NULL) && (uintptr_t)w % 8 == 0;
}

void cu_narrow(const float *x, uint16_t *y, size_t n, int prec)
{
	if (vec4_words(x, y))
		VEC4_LAUNCH(narrow_kernel4, n, x, y, n, prec);
	else
		LAUNCH(narrow_kernel, n, x, y, n, prec);
}

void cu_widen(const uint16_t *x, float *y, size_t n, int prec)
{
	if (vec4_words(y, x))
		VEC4_LAUNCH(widen_kernel4, n, x, y, n, prec);
	else
		LAUNCH(widen_kernel, n, x, y, n, prec);
}

/* Counts are integers: adding them in any order gives the same total. */
static __global__ void nonfinite_kernel(const float *x, size_t n, unsigned long long *count)
{
	__shared__ unsigned long long c[CU_THREADS];
	unsigned long long mine = 0;
	GRID_STRIDE(i, n)
		mine += !isfinite(x[i]);
	c[threadIdx.x] = mine;
	__syncthreads();
	for (int s = CU_THREADS / 2; s > 0; s >>= 1) {
		if (threadIdx.x < s)
			c[threadIdx.x] += c[threadIdx.x + s];
		__syncthreads();
	}
	if (threadIdx.x == 0 && c[0])
		atomicAdd(count, c[0]);
}

size_t cu_nonfinite(const float *x, size_t n)
{
	unsigned long long *back = (unsigned long long *)cu.host;
	if (!n)
		return 0;
	*back = 0;
	cu_check(cudaMemsetAsync(cu.count, 0, sizeof(*cu.count), cu.stream), "nonfinite");
	LAUNCH(nonfinite_kernel, n, x, n, cu.count);
	cu_check(cudaMemcpyAsync(back, cu.count, sizeof(*back), cudaMemcpyDeviceToHost, cu.stream),
		 "nonfinite");
	cu_check(cudaStreamSynchronize(cu.stream), "nonfinite");
	return (size_t)*back;
}

/* dlt_squares_lanes's order: a thread a lane of a chunk (CU_THREADS / 8
 * chunks a block), then a chunk's sum from its lanes; the squares are
 * exact in double and the kernels do not contract (-fmad=false), so a
 * lane rounds as the CPU's does. */
static __global__ void squares_kernel(const float *x, size_t n, size_t c0, size_t chunks,
				      double *sums)
{
	__shared__ double lanes[CU_THREADS];
	size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x, c = t / 8;
	double s = 0;
	if (c < chunks) {
		size_t at = (c0 + c) * DLT_SQUARES_CHUNK;
		size_t end = n - at < DLT_SQUARES_CHUNK ? n : at + DLT_SQUARES_CHUNK;
		for (size_t i = at + t % 8; i < end; i += 8)
			s += (double)x[i] * x[i];
	}
	lanes[threadIdx.x] = s;
	__syncthreads();
	if (t % 8 == 0 && c < chunks)
		sums[c] = dlt_squares_lanes(lanes + threadIdx.x);
}

/* Chunks' sums a pass: they come to the host, which adds them in order */
#define SQUARES_PASS 16384

double cu_sum_squares(const float *x, size_t n)
{
	static double sums[SQUARES_PASS];
	size_t chunks = (n + DLT_SQUARES_CHUNK - 1) / DLT_SQUARES_CHUNK;
	double total = 0;
	static_assert(SQUARES_PASS <= CU_COLSUM, "a pass's sums fit cu.colsum");
	for (size_t c0 = 0; c0 < chunks; c0 += SQUARES_PASS) {
		size_t k = chunks - c0 < SQUARES_PASS ? chunks - c0 : SQUARES_PASS;
		squares_kernel<<<(unsigned)((8 * k + CU_THREADS - 1) / CU_THREADS), CU_THREADS, 0,
				 cu.stream>>>(x, n, c0, k, cu.colsum);
		if (!cu_launched("sum_squares") ||
		    !cu_check(cudaMemcpyAsync(sums, cu.colsum, k * sizeof(double),
					      cudaMemcpyDeviceToHost, cu.stream), "sum_squares") ||
		    !cu_check(cudaStreamSynchronize(cu.stream), "sum_squares"))
			return NAN;
		for (size_t c = 0; c < k; c++)
			total += sums[c];
	}
	return total;
}

static __global__ void adam_kernel(float *w, const float *g, float *m, float *v, size_t n,
				   dlt_adam_step s)
{
	GRID_STRIDE(i, n)
		dlt_adam_update(&w[i], g[i], &m[i], &v[i], s);
}

void cu_adam(float *w, const float *g, float *m, float *v, size_t n, float lr, float beta1,
	     float beta2, float eps, float wd, int decoupled, long long step, float gscale)
{
	dlt_adam_step s = dlt_adam_prepare(lr, beta1, beta2, eps, wd, decoupled, step, gscale);
	LAUNCH(adam_kernel, n, w, g, m, v, n, s);
}

static __global__ void sgd_kernel(float *w, const float *g, size_t n, float lr, float wd,
				  float gscale)
{
	GRID_STRIDE(i, n)
		dlt_sgd_update(&w[i], g[i] * gscale, lr, wd);
}

static __global__ void sgd_momentum_kernel(float *w, const float *g, float *buf, size_t n,
					   float lr, float momentum, int nesterov, float wd,
					   int first, float gscale)
{
	GRID_STRIDE(i, n)
		dlt_sgd_momentum_update(&w[i], g[i] * gscale, &buf[i], lr, momentum, nesterov,
					wd, first);
}

void cu_sgd(float *w, const float *g, float *buf, size_t n, float lr, float momentum,
	    int nesterov, float wd, int first, float gscale)
{
	if (momentum == 0.0f || !buf)
		LAUNCH(sgd_kernel, n, w, g, n, lr, wd, gscale);
	else
		LAUNCH(sgd_momentum_kernel, n, w, g, buf, n, lr, momentum, nesterov, wd, first,
		       gscale);
}
