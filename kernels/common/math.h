/* The scalar math of every kernel, as static inline functions that compile
 * both as C and as CUDA __host__ __device__: the reference, the fast CPU
 * kernels and the CUDA kernels all call these, so the CPU tests check the
 * math the GPU runs. */
#ifndef DLT_KERNELS_COMMON_MATH_H
#define DLT_KERNELS_COMMON_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "philox.h"		/* defines DLT_HD */
#include "../kernels.h"		/* enum dlt_act */

/* A float's bits and back, as memcpy: the one type pun that C and CUDA
 * both define. */
DLT_HD static inline uint32_t dlt_f32_bits(float x)
{
	uint32_t u;
	memcpy(&u, &x, sizeof(u));
	return u;
}

DLT_HD static inline float dlt_bits_f32(uint32_t u)
{
	float x;
	memcpy(&x, &u, sizeof(x));
	return x;
}

/* x rounded to the nearest bfloat16 (8 bits of significand), ties to
 * even, as a float.  Infinities stay; a NaN stays a NaN (its payload's
 * low bits are cleared, the quiet bit set so it cannot become inf). */
DLT_HD static inline float dlt_round_bf16(float x)
{
	uint32_t u = dlt_f32_bits(x);
	uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
	uint32_t nan = (u & 0xffff0000u) | 0x00400000u;
	return dlt_bits_f32((u & 0x7fffffffu) > 0x7f800000u ? nan : r);
}

/* x rounded to the nearest IEEE half (11 bits of significand, exponents
 * -14 to 15, subnormals down to 2^-24), ties to even, as a float.  From
 * 65520 up it is inf, as a conversion to half gives: the overflow that
 * fp16 loss scaling must see. */
DLT_HD static inline float dlt_round_f16(float x)
{
	uint32_t u = dlt_f32_bits(x), sign = u & 0x80000000u, a = u ^ sign;
	uint32_t normal = (a + 0xfffu + ((a >> 13) & 1u)) & 0xffffe000u;
	/* below 2^-14 the step is 2^-24 whatever the exponent: adding and
	 * taking away 2^-24 * 2^23 (0.5) rounds to it, ties to even */
	float f = dlt_bits_f32(a);
	float sub = (f + 0.5f) - 0.5f;
	uint32_t r = a < 0x38800000u ? dlt_f32_bits(sub) : normal;
	r = a >= 0x477ff000u ? 0x7f800000u : r;
	r = a > 0x7f800000u ? a | 0x00400000u : r;
	return dlt_bits_f32(sign | r);
}

DLT_HD static inline float dlt_round_prec(float x, int prec)
{
	return prec == DLT_PREC_BF16 ? dlt_round_bf16(x)
	     : prec == DLT_PREC_F16 ? dlt_round_f16(x) : x;
}

/* A value of prec (rounded to it already: dlt_round_prec) as prec's 16
 * bits, and back: the kept activations' storage in bf16 and fp16
 * training.  Exact, but that an fp16 NaN keeps only the top 10 bits of
 * its payload (as F16C's conversion does). */
DLT_HD static inline uint16_t dlt_narrow16(float x, int prec)
{
	uint32_t u = dlt_f32_bits(x), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
	if (prec == DLT_PREC_BF16)
		return (uint16_t)(u >> 16);
	if (a > 0x7f800000u)
		return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
	if (a >= 0x477ff000u)
		return (uint16_t)(sign | 0x7c00u);
	if (a >= 0x38800000u)
		return (uint16_t)(sign | ((a - 0x38000000u) >> 13));
	return (uint16_t)(sign | (uint32_t)(dlt_bits_f32(a) * 16777216.0f));	/* 2^24 */
}

DLT_HD static inline float dlt_widen16(uint16_t h, int prec)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
	if (prec == DLT_PREC_BF16)
		return dlt_bits_f32((uint32_t)h << 16);
	if (e == 0)
		return dlt_bits_f32(sign | dlt_f32_bits((float)m * 0x1p-24f));
	if (e == 31)
		return dlt_bits_f32(sign | 0x7f800000u | (m << 13));
	return dlt_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

/* Activations, forward and backward (dy times the derivative).  Choices
 * pick between values and the arithmetic is done on what was picked: a
 * choice between computations would be a branch to gcc (-ftrapping-math)
 * and the loop would not vectorise.  relu and leaky_relu (slope >= 0) look
 * only at the sign of x, which y shares, so they may be given y in place
 * of x: that lets dense fuse them.  A NaN input gives a NaN output, as in
 * PyTorch, so divergence shows. */
DLT_HD static inline float dlt_relu(float x)
{
	return x < 0.0f ? 0.0f : x;
}

DLT_HD static inline float dlt_relu_backward(float x, float dy)
{
	return x > 0.0f ? dy : 0.0f;
}

DLT_HD static inline float dlt_leaky_relu(float x, float slope)
{
	return (x < 0.0f ? 0.0f : x) + slope * (x < 0.0f ? x : 0.0f);
}

/* at 0 the slope, as PyTorch */
DLT_HD static inline float dlt_leaky_relu_backward(float x, float dy, float slope)
{
	return (x > 0.0f ? dy : 0.0f) + slope * (x > 0.0f ? 0.0f : dy);
}

/* Exact GELU, x * Phi(x), like PyTorch's default (approximate='none') */
DLT_HD static inline float dlt_gelu(float x)
{
	return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}

DLT_HD static inline float dlt_gelu_backward(float x, float dy)
{
	float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
	float pdf = expf(-0.5f * x * x) * 0.39894228040143268f;
	return dy * (cdf + x * pdf);
}

/* GPT-2's GELU, the tanh approximation, PyTorch's approximate='tanh':
 * 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))); its backward is
 * PyTorch's formula, term by term. */
#define DLT_GELU_TANH_BETA 0.79788456080286536f	/* sqrt(2 / pi) */
#define DLT_GELU_TANH_KAPPA 0.044715f

/* tanh for GELU, ours rather than libm's: the same operations on every
 * machine and libm, and a loop of them vectorises, where tanhf is a call
 * an element (half a GPT's step on the CPU).  Within 1.35 ulp of tanh
 * (glibc 2.36's tanhf: 2.2); GELU's errors against fp64 are tanhf's.
 * Below 0.625 an odd polynomial, a least-squares fit of (tanh(a) / a - 1)
 * / a^2 in a^2 (0.8 ulp); above, 1 - 2 / (e^2a + 1), e^2a as 2^n e^f with
 * e^f by its degree-7 Taylor polynomial (|f| <= ln 2 / 2), 2a capped at
 * 30, where tanh is 1 in floats.  Both are computed and one picked (see
 * the activations below), NaN passed on.  Every product that a sum takes
 * is an fmaf: one rounding, the same on the GPU (which contracts them
 * anyway) and in the CPU's vectors, where it is a third fewer operations
 * than a product and a sum (GELU was 4 % of a GPT step). */
DLT_HD static inline float dlt_tanhf(float x)
{
	float a = fabsf(x), z = a * a, p, small, y, n, f, e, large, r;
	p = 2.148984000e-03f;
	p = fmaf(p, z, -8.184661157e-03f);
	p = fmaf(p, z, 2.170399949e-02f);
	p = fmaf(p, z, -5.394745246e-02f);
	p = fmaf(p, z, 1.333321184e-01f);
	p = fmaf(p, z, -3.333333135e-01f);
	small = fmaf(a, z * p, a);
	y = a < 15.0f ? a : 15.0f;
	y = y + y;
	n = fmaf(y, 1.44269504088896341f, 12582912.0f) - 12582912.0f;	/* round(y / ln 2) */
	f = fmaf(-n, 1.428606765330187e-06f, fmaf(-n, 0.693145751953125f, y));
	p = 1.0f / 5040.0f;
	p = fmaf(p, f, 1.0f / 720.0f);
	p = fmaf(p, f, 1.0f / 120.0f);
	p = fmaf(p, f, 1.0f / 24.0f);
	p = fmaf(p, f, 1.0f / 6.0f);
	p = fmaf(p, f, 0.5f);
	p = fmaf(p, f, 1.0f);
	p = fmaf(p, f, 1.0f);
	e = p * dlt_bits_f32((uint32_t)((int32_t)n + 127) << 23);
	large = 1.0f - 2.0f / (e + 1.0f);
	r = copysignf(a < 0.625f ? small : large, x);
	return x != x ? x : r;
}

/* 0.5 x (1 + t) as h + h t, h = x / 2 (exact) */
DLT_HD static inline float dlt_gelu_tanh(float x)
{
	float inner = DLT_GELU_TANH_BETA * fmaf(DLT_GELU_TANH_KAPPA * x * x, x, x);
	float h = 0.5f * x;
	return fmaf(h, dlt_tanhf(inner), h);
}

DLT_HD static inline float dlt_gelu_tanh_backward(float x, float dy)
{
	float x2 = x * x;
	float t = dlt_tanhf(DLT_GELU_TANH_BETA * fmaf(DLT_GELU_TANH_KAPPA * x2, x, x));
	float left_d = fmaf(0.5f, t, 0.5f);
	float right_d = 0.5f * x * fmaf(-t, t, 1.0f);
	float inner_d = DLT_GELU_TANH_BETA * fmaf(3.0f * DLT_GELU_TANH_KAPPA, x2, 1.0f);
	return dy * fmaf(right_d, inner_d, left_d);
}

DLT_HD static inline float dlt_tanh(float x)
{
	return tanhf(x);
}

/* from the output: 1 - tanh^2 */
DLT_HD static inline float dlt_tanh_backward(float y, float dy)
{
	return dy * (1.0f - y * y);
}

/* expf(-x) overflows to inf for x < -88, giving the right limit 0 */
DLT_HD static inline float dlt_sigmoid(float x)
{
	return 1.0f / (1.0f + expf(-x));
}

DLT_HD static inline float dlt_sigmoid_backward(float y, float dy)
{
	return dy * (y * (1.0f - y));
}

DLT_HD static inline float dlt_act(float x, int act, float slope)
{
	switch (act) {
	case DLT_ACT_RELU:
		return dlt_relu(x);
	case DLT_ACT_LEAKY_RELU:
		return dlt_leaky_relu(x, slope);
	case DLT_ACT_GELU:
		return dlt_gelu(x);
	case DLT_ACT_TANH:
		return dlt_tanh(x);
	case DLT_ACT_SIGMOID:
		return dlt_sigmoid(x);
	case DLT_ACT_GELU_TANH:
		return dlt_gelu_tanh(x);
	default:
		return x;
	}
}

/* dy * act'(x), given y = act(x) as well */
/* Whether dlt_act_backward reads y (tanh, sigmoid) rather than x (the
 * others): the other may hold anything */
DLT_HD static inline int dlt_act_backward_reads_y(int act)
{
	return act == DLT_ACT_TANH || act == DLT_ACT_SIGMOID;
}

DLT_HD static inline float dlt_act_backward(float x, float y, float dy, int act, float slope)
{
	switch (act) {
	case DLT_ACT_RELU:
		return dlt_relu_backward(x, dy);
	case DLT_ACT_LEAKY_RELU:
		return dlt_leaky_relu_backward(x, dy, slope);
	case DLT_ACT_GELU:
		return dlt_gelu_backward(x, dy);
	case DLT_ACT_TANH:
		return dlt_tanh_backward(y, dy);
	case DLT_ACT_SIGMOID:
		return dlt_sigmoid_backward(y, dy);
	case DLT_ACT_GELU_TANH:
		return dlt_gelu_tanh_backward(x, dy);
	default:
		return dy;
	}
}

/* Inverted dropout: an element is dropped when its uniform draw is below
 * rate, kept ones are scaled by 1 / (1 - rate) so eval needs no scaling. */
DLT_HD static inline float dlt_dropout_scale(float rate)
{
	return 1.0f / (1.0f - rate);
}

DLT_HD static inline float dlt_dropout_mask(uint32_t bits, float rate, float scale)
{
	return dlt_u32_to_unit(bits) < rate ? 0.0f : scale;
}

/* The factor of attention weight j of row r (kernels.h's dlt_attn_dropout):
 * 0 or 1 / (1 - rate); 1, with nothing drawn, at rate 0 */
DLT_HD static inline float dlt_attn_keep(dlt_attn_dropout d, size_t r, int T, int j)
{
	uint64_t n = ((uint64_t)r + d.row0) * (uint64_t)T + (uint64_t)j;
	uint32_t bits[4];
	if (!(d.rate > 0.0f))
		return 1.0f;
	dlt_philox_block(d.seed, d.stream, n >> 2, bits);
	return dlt_dropout_mask(bits[n & 3], d.rate, dlt_dropout_scale(d.rate));
}

/* Softmax cross-entropy of one row of logits, the max subtracted so exp
 * never overflows.  Writes (softmax - onehot(label)) * scale to dx and
 * returns the row's loss, -log softmax[label]; *argmax gets the first
 * index of the largest logit.  A label outside [0, cols) gives a NaN loss
 * (and no onehot), so bad data shows up instead of reading out of bounds.
 * dx may be x: each logit is read before its place is written. */
DLT_HD static inline double dlt_softmax_xent_row(const float *x, int cols, int label,
						 float scale, float *dx, int *argmax)
{
	float mx = x[0], sum = 0.0f, inv, xl = label >= 0 && label < cols ? x[label] : 0.0f;
	int am = 0;
	for (int j = 1; j < cols; j++) {
		if (x[j] > mx) {
			mx = x[j];
			am = j;
		}
	}
	for (int j = 0; j < cols; j++) {
		dx[j] = expf(x[j] - mx);
		sum += dx[j];
	}
	inv = scale / sum;
	for (int j = 0; j < cols; j++)
		dx[j] *= inv;
	*argmax = am;
	if (label < 0 || label >= cols)
		return NAN;
	dx[label] -= scale;
	return (double)logf(sum) - (double)(xl - mx);
}

/* One output's loss (kind: enum dlt_loss_kind, not XENT) against its
 * target, with the gradient times scale into *dy: PyTorch's arithmetic.
 * l1's gradient at y == t is 0, as torch.sign gives; bce takes a logit,
 * loss max(y, 0) - y t + log(1 + exp(-|y|)), which never overflows. */
DLT_HD static inline double dlt_pointwise_loss(int kind, float delta, float y, float t,
					       float scale, float *dy)
{
	float d = y - t, a = fabsf(d);
	switch (kind) {
	case DLT_LOSS_MSE:
		*dy = 2.0f * d * scale;
		return (double)d * d;
	case DLT_LOSS_L1:
		*dy = d > 0 ? scale : d < 0 ? -scale : 0.0f;
		return a;
	case DLT_LOSS_HUBER:
		if (a <= delta) {
			*dy = d * scale;
			return 0.5 * (double)d * d;
		}
		*dy = (d > 0 ? delta : -delta) * scale;
		return (double)delta * (a - 0.5 * (double)delta);
	case DLT_LOSS_BCE: {
		float e = expf(-fabsf(y)), s = y >= 0 ? 1.0f / (1.0f + e) : e / (1.0f + e);
		*dy = (s - t) * scale;
		return (double)(y > 0 ? y : 0.0f) - (double)y * t + (double)log1pf(e);
	}
	default:
		*dy = NAN;
		return NAN;
	}
}

/* Adam and AdamW with PyTorch's arithmetic.  The per-step scalars are
 * computed once per step in double and rounded once, the same way on
 * every backend:
 *   l2        = weight_decay (Adam: added to the gradient), 0 for AdamW
 *   decay     = 1 - lr * weight_decay (AdamW: decoupled), 1 for Adam
 *   step_size = lr / (1 - beta1^t)
 *   bc2_sqrt  = sqrt(1 - beta2^t)
 * m is updated as PyTorch's lerp_ (m + (1 - beta1) (g - m)). */
typedef struct dlt_adam_step {
	float beta1, beta2, eps, l2, decay, step_size, bc2_sqrt;
	float gscale;		/* the gradient as read is times this first */
} dlt_adam_step;

DLT_HD static inline dlt_adam_step dlt_adam_prepare(float lr, float beta1, float beta2,
						    float eps, float wd, int decoupled,
						    long long t, float gscale)
{
	dlt_adam_step s;
	s.gscale = gscale;
	s.beta1 = beta1;
	s.beta2 = beta2;
	s.eps = eps;
	s.l2 = decoupled ? 0.0f : wd;
	s.decay = decoupled ? (float)(1.0 - (double)lr * wd) : 1.0f;
	s.step_size = (float)(lr / (1.0 - pow(beta1, (double)t)));
	s.bc2_sqrt = (float)sqrt(1.0 - pow(beta2, (double)t));
	return s;
}

DLT_HD static inline void dlt_adam_update(float *w, float g, float *m, float *v,
					  dlt_adam_step s)
{
	float p = *w;
	float mm, vv;
	g *= s.gscale;	/* a rounding of its own: the bits of scaling g first */
	g += s.l2 * p;
	p *= s.decay;
	mm = *m + (1.0f - s.beta1) * (g - *m);
	vv = s.beta2 * *v + (1.0f - s.beta2) * g * g;
	*m = mm;
	*v = vv;
	*w = p - s.step_size * (mm / (sqrtf(vv) / s.bc2_sqrt + s.eps));
}

/* A sum of squares in double (the gradients' norm that clipping takes),
 * in one order on every backend: chunks of DLT_SQUARES_CHUNK floats from
 * the start, each summed in 8 lanes (lane k the floats k, k + 8, ... of
 * the chunk, in order) that dlt_squares_lanes adds in a fixed tree, and
 * the chunks' sums added in order.  A float's square is exact in double,
 * so only the sums round, and a contracted multiply-add rounds as they
 * do: the bits depend on the values alone.  The chunks let a GPU sum
 * its gradients where they are, 8 threads a chunk, instead of sending
 * them to the host. */
#define DLT_SQUARES_CHUNK 4096

DLT_HD static inline double dlt_squares_lanes(const double s[8])
{
	return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* SGD as PyTorch (dampening 0): weight decay joins the gradient; the
 * momentum buffer starts as the first gradient; nesterov looks ahead.
 * The flags pick values (0 for the old buffer on the first step; g and
 * momentum, or 0 and 1, for the look-ahead), not code paths, so the loop
 * vectorises; the values are PyTorch's, up to the sign of a zero. */
DLT_HD static inline void dlt_sgd_update(float *w, float g, float lr, float wd)
{
	float p = *w;
	g += wd * p;
	*w = p - lr * g;
}

DLT_HD static inline void dlt_sgd_momentum_update(float *w, float g, float *buf, float lr,
						  float momentum, int nesterov, float wd,
						  int first)
{
	float p = *w;
	float old, b, ahead_g, ahead_m;
	g += wd * p;
	old = first ? 0.0f : *buf;
	b = momentum * old + g;
	ahead_g = nesterov ? g : 0.0f;
	ahead_m = nesterov ? momentum : 1.0f;
	*buf = b;
	*w = p - lr * (ahead_g + ahead_m * b);
}

#endif
