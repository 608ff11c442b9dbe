/* The reference backend: plain loops, one element at a time, doubles where
 * a sum is long.  Slow on purpose; the fast kernels are tested against it. */
#include <math.h>

#include "kernels/kernels.h"
#include "kernels/common/math.h"
#include "kernels/cpu/decode.h"
#include "kernels/cpu/layers.h"
#include "kernels/cpu/transformer.h"

/* Element i of a gemm operand: a float, or prec's 16-bit word (half) */
static float operand(const float *X, int half, int prec, size_t i)
{
	return half && prec != DLT_PREC_F32 ? dlt_widen16(((const uint16_t *)X)[i], prec) : X[i];
}

static void ref_gemm(int prec, int tA, int tB, int M, int N, int K, float alpha,
		     const float *A, int lda, const float *B, int ldb,
		     float beta, float *C, int ldc)
{
	int p = prec & ~DLT_GEMM_FLAGS, ha = prec & DLT_A_HALF, hb = prec & DLT_B_HALF;
	for (int i = 0; i < M; i++) {
		for (int j = 0; j < N; j++) {
			double s = 0.0;
			for (int k = 0; k < K; k++) {
				float a = operand(A, ha, p, tA ? (size_t)k * lda + i
							       : (size_t)i * lda + k);
				float b = operand(B, hb, p, tB ? (size_t)j * ldb + k
							       : (size_t)k * ldb + j);
				s += (double)dlt_round_prec(a, p) * dlt_round_prec(b, p);
			}
			/* beta == 0 ignores C, as BLAS does: it may hold garbage */
			float *c = &C[(size_t)i * ldc + j];
			*c = (float)(alpha * s) + (beta == 0.0f ? 0.0f : beta * *c);
			if (prec & DLT_ROUND_C)
				*c = dlt_round_prec(*c, p);
		}
	}
}

static void ref_bias_act(float *y, const float *bias, int rows, int cols, int act, float slope,
			 int prec)
{
	for (int r = 0; r < rows; r++) {
		for (int c = 0; c < cols; c++) {
			float *p = &y[(size_t)r * cols + c];
			*p = dlt_round_prec(dlt_act(*p + (bias ? bias[c] : 0.0f), act, slope), prec);
		}
	}
}

static void ref_act_forward(const float *x, float *y, size_t n, int act, float slope)
{
	for (size_t i = 0; i < n; i++)
		y[i] = dlt_act(x[i], act, slope);
}

static void ref_act_backward(const float *x, const float *y, const float *dy, float *dx,
			     size_t n, int act, float slope)
{
	for (size_t i = 0; i < n; i++)
		dx[i] = dlt_act_backward(x[i], y[i], dy[i], act, slope);
}

/* rows in order, in double: the order the fast kernel must match */
static void ref_bias_grad(const float *dy, float *db, int rows, int cols)
{
	for (int c = 0; c < cols; c++) {
		double s = 0.0;
		for (int r = 0; r < rows; r++)
			s += dy[(size_t)r * cols + c];
		db[c] = (float)s;
	}
}

static void ref_softmax_xent(const float *logits, const int32_t *labels, int rows, int cols,
			     float *dlogits, double *loss_sum, int *correct)
{
	double loss = 0.0;
	int hits = 0;
	for (int r = 0; r < rows; r++) {
		int am;
		loss += dlt_softmax_xent_row(logits + (size_t)r * cols, cols, labels[r],
					     1.0f / rows, dlogits + (size_t)r * cols, &am);
		hits += am == labels[r];
	}
	*loss_sum = loss;
	*correct = hits;
}

static void ref_pointwise_loss(int kind, float delta, const float *y, const float *t, int rows,
			       int cols, float *dy, double *loss_sum)
{
	double loss = 0.0;
	float scale = (float)(1.0 / ((double)rows * cols));
	for (int r = 0; r < rows; r++) {
		double row = 0.0;
		for (int j = 0; j < cols; j++) {
			size_t i = (size_t)r * cols + j;
			row += dlt_pointwise_loss(kind, delta, y[i], t[i], scale, dy + i);
		}
		loss += row;
	}
	*loss_sum = loss;
}

static void ref_dropout(const float *x, float *y, float *mask, size_t n, float rate,
			uint64_t seed, uint64_t stream)
{
	float scale = dlt_dropout_scale(rate);
	for (size_t i = 0; i < n; i++) {
		uint32_t bits[4];
		dlt_philox_block(seed, stream, i / 4, bits);
		mask[i] = dlt_dropout_mask(bits[i % 4], rate, scale);
		y[i] = x[i] * mask[i];
	}
}

static void ref_mul(const float *a, const float *b, float *y, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] = a[i] * b[i];
}

static void ref_adam(float *w, const float *g, float *m, float *v, size_t n, float lr,
		     float beta1, float beta2, float eps, float wd, int decoupled,
		     long long step, float gscale)
{
	dlt_adam_step s = dlt_adam_prepare(lr, beta1, beta2, eps, wd, decoupled, step, gscale);
	for (size_t i = 0; i < n; i++)
		dlt_adam_update(&w[i], g[i], &m[i], &v[i], s);
}

static void ref_sgd(float *w, const float *g, float *buf, size_t n, float lr, float momentum,
		    int nesterov, float wd, int first, float gscale)
{
	for (size_t i = 0; i < n; i++) {
		if (momentum == 0.0f)
			dlt_sgd_update(&w[i], g[i] * gscale, lr, wd);
		else
			dlt_sgd_momentum_update(&w[i], g[i] * gscale, &buf[i], lr, momentum,
						nesterov, wd, first);
	}
}

static void ref_scale(float *x, size_t n, float s)
{
	for (size_t i = 0; i < n; i++)
		x[i] *= s;
}

static void ref_round(float *x, size_t n, int prec)
{
	for (size_t i = 0; i < n; i++)
		x[i] = dlt_round_prec(x[i], prec);
}

static void ref_narrow(const float *x, uint16_t *y, size_t n, int prec)
{
	for (size_t i = 0; i < n; i++)
		y[i] = dlt_narrow16(x[i], prec);
}

static void ref_widen(const uint16_t *x, float *y, size_t n, int prec)
{
	for (size_t i = 0; i < n; i++)
		y[i] = dlt_widen16(x[i], prec);
}

static size_t ref_nonfinite(const float *x, size_t n)
{
	size_t bad = 0;
	for (size_t i = 0; i < n; i++)
		bad += !isfinite(x[i]);
	return bad;
}

static double ref_sum_squares(const float *x, size_t n)
{
	double total = 0;
	for (size_t at = 0; at < n; at += DLT_SQUARES_CHUNK) {
		double s[8] = { 0 };
		for (size_t i = at; i < n && i < at + DLT_SQUARES_CHUNK; i++)
			s[(i - at) % 8] += (double)x[i] * x[i];
		total += dlt_squares_lanes(s);
	}
	return total;
}

static const dlt_backend ref_backend = {
	.name = "ref",
	.host = 1,
	.alloc = dlt_host_alloc,
	.free = dlt_host_free,
	.upload = dlt_host_copy,
	.download = dlt_host_copy,
	.copy = dlt_host_copy,
	.zero = dlt_host_zero,
	.host_alloc = dlt_host_alloc,
	.host_free = dlt_host_free,
	.upload_async = dlt_host_copy,
	.gemm = ref_gemm,
	.bias_act = ref_bias_act,
	.act_forward = ref_act_forward,
	.act_backward = ref_act_backward,
	.bias_grad = ref_bias_grad,
	.softmax_xent = ref_softmax_xent,
	.pointwise_loss = ref_pointwise_loss,
	.dropout = ref_dropout,
	.mul = ref_mul,
	.adam = ref_adam,
	.sgd = ref_sgd,
	.conv_workspace = dlt_ref_conv_workspace,
	.conv_forward = dlt_ref_conv_forward,
	.conv_backward = dlt_ref_conv_backward,
	.maxpool_forward = dlt_ref_maxpool_forward,
	.maxpool_backward = dlt_ref_maxpool_backward,
	.avgpool_forward = dlt_ref_avgpool_forward,
	.avgpool_backward = dlt_ref_avgpool_backward,
	.batchnorm_train = dlt_ref_batchnorm_train,
	.batchnorm_eval = dlt_ref_batchnorm_eval,
	.batchnorm_backward = dlt_ref_batchnorm_backward,
	.add = dlt_ref_add,
	.scale = ref_scale,
	.round = ref_round,
	.narrow = ref_narrow,
	.widen = ref_widen,
	.nonfinite = ref_nonfinite,
	.sum_squares = ref_sum_squares,
	.layernorm_forward = dlt_ref_layernorm_forward,
	.layernorm_backward = dlt_ref_layernorm_backward,
	.embedding_forward = dlt_ref_embedding_forward,
	.embedding_backward = dlt_ref_embedding_backward,
	.positional_forward = dlt_ref_positional_forward,
	.positional_backward = dlt_ref_positional_backward,
	.attention_forward = dlt_ref_attention_forward,
	.attention_backward = dlt_ref_attention_backward,
	.attention_decode = dlt_ref_attention_decode,
};

const dlt_backend *dlt_backend_ref(void)
{
	return &ref_backend;
}
