/* Every function of kernels/common/ (the per-element math that the CPU and
 * CUDA kernels share) against a reference computed here in double, written
 * from the definitions rather than from the code under test. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "kernels/common/math.h"
#include "kernels/common/pool.h"
#include "util/util.h"

static dlt_rng rng;

/* Values that find edges: zeros, tiny, huge, around the kinks, and
 * uniform ones over a wide range. */
static float sample(int i)
{
	static const float edge[] = { 0.0f, -0.0f, 1e-30f, -1e-30f, 1e-7f, -1e-7f, 0.5f, -0.5f,
				      1.0f, -1.0f, 3.0f, -3.0f, 8.0f, -8.0f, 20.0f, -20.0f,
				      88.0f, -88.0f, 100.0f, -100.0f };
	int ne = (int)(sizeof(edge) / sizeof(edge[0]));
	if (i < ne)
		return edge[i];
	return 24.0f * (2.0f * dlt_rng_uniform(&rng) - 1.0f);
}

#define N_SAMPLES 4000

/* |got - want| <= tol * (|want| + floor) for every sample */
static double rel_err(double got, double want, double floor)
{
	if (isnan(want) || isnan(got))
		return isnan(want) == isnan(got) ? 0.0 : INFINITY;
	return fabs(got - want) / (fabs(want) + floor);
}

static double ref_act(double x, int act, double slope)
{
	switch (act) {
	case DLT_ACT_RELU:
		return x > 0 ? x : 0;
	case DLT_ACT_LEAKY_RELU:
		return x > 0 ? x : slope * x;
	case DLT_ACT_GELU:
		return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
	case DLT_ACT_TANH:
		return tanh(x);
	case DLT_ACT_SIGMOID:
		return 1.0 / (1.0 + exp(-x));
	case DLT_ACT_GELU_TANH:
		return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
	default:
		return x;
	}
}

/* The derivative by its formula; at 0, relu's is 0 and leaky_relu's the
 * slope (PyTorch's choice). */
static double ref_act_grad(double x, int act, double slope)
{
	double s, pdf;
	switch (act) {
	case DLT_ACT_RELU:
		return x > 0 ? 1 : 0;
	case DLT_ACT_LEAKY_RELU:
		return x > 0 ? 1 : slope;
	case DLT_ACT_GELU:
		pdf = exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
		return 0.5 * (1.0 + erf(x / sqrt(2.0))) + x * pdf;
	case DLT_ACT_TANH:
		s = tanh(x);
		return 1 - s * s;
	case DLT_ACT_SIGMOID:
		s = 1.0 / (1.0 + exp(-x));
		return s * (1 - s);
	case DLT_ACT_GELU_TANH:
		/* 0.5 (1 + tanh u) + 0.5 x sech^2(u) u', u = k (x + 0.044715 x^3) */
		s = tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x));
		return 0.5 * (1 + s) +
		       0.5 * x * (1 - s * s) * sqrt(2.0 / M_PI) * (1 + 3 * 0.044715 * x * x);
	default:
		return 1;
	}
}

static void test_activations(void)
{
	static const struct { int act; const char *name; double tol; } acts[] = {
		{ DLT_ACT_NONE, "none", 0 }, { DLT_ACT_RELU, "relu", 0 },
		{ DLT_ACT_LEAKY_RELU, "leaky_relu", 1e-7 }, { DLT_ACT_GELU, "gelu", 4e-7 },
		{ DLT_ACT_TANH, "tanh", 4e-7 }, { DLT_ACT_SIGMOID, "sigmoid", 4e-7 },
		{ DLT_ACT_GELU_TANH, "gelu_tanh", 6e-7 },
	};
	const float slope = 0.01f, dy = 0.75f;
	for (size_t a = 0; a < sizeof(acts) / sizeof(acts[0]); a++) {
		double worst = 0, worst_g = 0;
		dlt_rng_init(&rng, 5, a);
		for (int i = 0; i < N_SAMPLES; i++) {
			float x = sample(i), y = dlt_act(x, acts[a].act, slope);
			float g = dlt_act_backward(x, y, dy, acts[a].act, slope);
			/* relative, or absolute below 1: gelu's 1 + erf(x)
			 * cancels for x < 0 (PyTorch's formula does the same),
			 * and the backward of tanh and sigmoid works from the
			 * float y, whose rounding shows where the slope is tiny */
			worst = fmax(worst, rel_err(y, ref_act(x, acts[a].act, slope), 1.0));
			worst_g = fmax(worst_g, rel_err(g, dy * ref_act_grad(x, acts[a].act, slope),
							1.0));
		}
		ok(worst <= acts[a].tol, "%s: forward within %g of fp64 (worst %.3g)", acts[a].name,
		   acts[a].tol, worst);
		ok(worst_g <= acts[a].tol, "%s: backward within %g of fp64 (worst %.3g)",
		   acts[a].name, acts[a].tol, worst_g);
	}
	ok(isnan(dlt_act(NAN, DLT_ACT_RELU, 0)) && isnan(dlt_act(NAN, DLT_ACT_LEAKY_RELU, 0.1f)),
	   "relu and leaky_relu pass NaN on, so divergence shows");
	ok(dlt_relu(-0.0f) == 0.0f && dlt_relu_backward(0.0f, 1.0f) == 0.0f &&
	   dlt_leaky_relu_backward(0.0f, 1.0f, 0.2f) == 0.2f, "the kinks at 0 are PyTorch's");
}

/* The nearest value of a format with `bits` of significand (the leading
 * one counted), smallest normal exponent emin, largest finite max; ties
 * to even; in double, from the definition. */
static double ref_round(double x, int bits, int emin, double max, double overflow_at)
{
	double a = fabs(x), q, lo, r;
	int e;
	if (isnan(x) || isinf(x))
		return x;
	if (a == 0)
		return x;
	frexp(a, &e);		/* a = f * 2^e, f in [0.5, 1) */
	e = e - 1 < emin ? emin : e - 1;
	q = ldexp(1.0, e - (bits - 1));	/* the spacing at a */
	lo = floor(a / q) * q;
	if (a - lo > q / 2)
		r = lo + q;
	else if (a - lo < q / 2)
		r = lo;
	else
		r = fmod(lo / q, 2.0) == 0 ? lo : lo + q;
	if (a >= overflow_at)
		r = INFINITY;
	else if (r > max)
		r = max;
	return copysign(r, x);
}

static void test_rounding(void)
{
	int bad_bf = 0, bad_h = 0;
	/* every float whose bits step by a prime through the whole range,
	 * and the ties and boundaries by name */
	for (uint64_t u = 0; u <= 0xffffffffu; u += 65537 * 7 + 2) {
		float x = dlt_bits_f32((uint32_t)u);
		double bf = ref_round(x, 8, -126, 0x1.fep127, INFINITY);
		double h = ref_round(x, 11, -14, 65504.0, 65520.0);
		float gb = dlt_round_bf16(x), gh = dlt_round_f16(x);
		if (isnan(x)) {
			bad_bf += !isnan(gb);
			bad_h += !isnan(gh);
			continue;
		}
		/* bf16 keeps f32's exponent range: near FLT_MAX it may round
		 * to inf, as a conversion does */
		if (!(gb == bf || (fabs(x) > 0x1.fep127 && isinf(gb))))
			bad_bf++;
		bad_h += !(gh == h && signbit(gh) == signbit(x));
	}
	ok(bad_bf == 0, "bf16 rounding = the fp64 reference over the float range (%d differ)",
	   bad_bf);
	ok(bad_h == 0, "fp16 rounding = the fp64 reference over the float range (%d differ)",
	   bad_h);
	ok(dlt_round_bf16(1.0f + 0x1p-8f) == 1.0f && dlt_round_bf16(1.0f + 0x1p-7f + 0x1p-8f) ==
	   1.0f + 0x1p-6f, "bf16: ties go to even");
	ok(dlt_round_f16(1.0f + 0x1p-11f) == 1.0f && dlt_round_f16(1.0f + 0x1p-10f + 0x1p-11f) ==
	   1.0f + 0x1p-9f, "fp16: ties go to even");
	ok(dlt_round_f16(65504.0f) == 65504.0f && dlt_round_f16(65519.99f) == 65504.0f &&
	   isinf(dlt_round_f16(65520.0f)) && dlt_round_f16(-1e6f) == -INFINITY,
	   "fp16: 65504 is the largest, 65520 and up overflow to inf");
	ok(dlt_round_f16(0x1p-24f) == 0x1p-24f && dlt_round_f16(0x1p-25f) == 0.0f &&
	   dlt_round_f16(0x1.8p-25f) == 0x1p-24f && dlt_round_f16(3 * 0x1p-25f) == 0x1p-23f,
	   "fp16: subnormals down to 2^-24, ties to even below");
	ok(isnan(dlt_round_bf16(dlt_bits_f32(0x7f800001u))) &&
	   isnan(dlt_round_f16(dlt_bits_f32(0x7f800001u))) && isinf(dlt_round_bf16(INFINITY)),
	   "a NaN with a low payload stays NaN, inf stays inf");
	ok(dlt_round_prec(0.1f, DLT_PREC_F32) == 0.1f &&
	   dlt_round_prec(0.1f, DLT_PREC_BF16) == dlt_round_bf16(0.1f) &&
	   dlt_round_prec(0.1f, DLT_PREC_F16) == dlt_round_f16(0.1f), "dlt_round_prec picks");
	ok(dlt_f32_bits(1.0f) == 0x3f800000u && dlt_bits_f32(0xc0000000u) == -2.0f,
	   "the bits of a float and back");
}

/* GPT-2's GELU: its backward against central differences of the fp64
 * definition (step 1e-5, error ~1e-10, so what shows is the float's), and
 * PyTorch's value at 1 (gelu(1., approximate='tanh') = 0.8411920). */
static void test_gelu_tanh(void)
{
	double worst = 0.0;
	dlt_rng saved = rng;	/* the later tests' draws stay as they were */
	dlt_rng_init(&rng, 9, 0);
	for (int i = 0; i < N_SAMPLES; i++) {
		float x = sample(i);
		double h = 1e-5, num;
		if (fabsf(x) > 30.0f)	/* the difference of two huge values: nothing */
			continue;
		num = (ref_act(x + h, DLT_ACT_GELU_TANH, 0) - ref_act(x - h, DLT_ACT_GELU_TANH, 0)) /
		      (2 * h);
		worst = fmax(worst, rel_err(dlt_gelu_tanh_backward(x, 1.0f), num, 1.0));
	}
	rng = saved;
	ok(worst <= 1e-6, "gelu_tanh: backward within 1e-6 of fp64 finite differences "
	   "(worst %.3g)", worst);
	ok_near(dlt_gelu_tanh(1.0f), 0.8411920, 1e-6, "gelu_tanh(1) is PyTorch's");
	ok(dlt_gelu_tanh(-20.0f) == 0.0f && dlt_gelu_tanh(20.0f) == 20.0f &&
	   isnan(dlt_gelu_tanh(NAN)), "gelu_tanh: 0 and x far out, NaN passed on");
}

static void test_dropout(void)
{
	int bad = 0;
	for (int i = 0; i < 1000; i++) {
		uint32_t u = dlt_rng_u32(&rng);
		double unit = (double)(u >> 8) / 16777216.0;
		float rate = (float)(i % 10) / 10.0f, scale = dlt_dropout_scale(rate);
		double want = unit < rate ? 0.0 : 1.0 / (1.0 - (double)rate);
		bad += dlt_u32_to_unit(u) != unit;
		bad += rel_err(dlt_dropout_mask(u, rate, scale), want, 0) > 1e-7;
	}
	ok(bad == 0, "dropout masks and [0, 1) draws = fp64 (%d differ)", bad);
}

static void test_softmax_xent(void)
{
	double worst_l = 0, worst_g = 0;
	int bad_arg = 0;
	for (int t = 0; t < 300; t++) {
		int cols = 1 + t % 37, label = (int)(dlt_rng_u32(&rng) % (uint32_t)cols), am, ram = 0;
		float x[40], dx[40], scale = t % 3 ? 1.0f / 64 : 1.0f;
		double mx, sum = 0, loss;
		for (int j = 0; j < cols; j++)
			x[j] = (t % 5 == 0 ? 80.0f : 8.0f) * (2.0f * dlt_rng_uniform(&rng) - 1.0f);
		mx = x[0];
		for (int j = 1; j < cols; j++)
			if (x[j] > mx) {
				mx = x[j];
				ram = j;
			}
		for (int j = 0; j < cols; j++)
			sum += exp(x[j] - mx);
		loss = dlt_softmax_xent_row(x, cols, label, scale, dx, &am);
		/* relative, or absolute below 1 (of scale for the gradient):
		 * a float sum of 1 + tiny, and softmax - 1 at the label,
		 * cancel */
		worst_l = fmax(worst_l, rel_err(loss, log(sum) - (x[label] - mx), 1.0));
		for (int j = 0; j < cols; j++) {
			double want = scale * (exp(x[j] - mx) / sum - (j == label));
			worst_g = fmax(worst_g, fabs(dx[j] - want) / (fabs(want) + scale));
		}
		bad_arg += am != ram;
	}
	ok(worst_l < 1e-6, "softmax cross-entropy loss within 1e-6 of fp64 (worst %.3g)", worst_l);
	ok(worst_g < 1e-6, "its gradient within 1e-6 of fp64 (worst %.3g)", worst_g);
	ok(bad_arg == 0, "argmax is the first largest logit");
}

/* The element-wise losses against fp64 formulas, their gradients against
 * central differences of those */
static double loss64(int kind, double delta, double y, double t)
{
	double d = y - t;
	switch (kind) {
	case DLT_LOSS_MSE: return d * d;
	case DLT_LOSS_L1: return fabs(d);
	case DLT_LOSS_HUBER: return fabs(d) <= delta ? 0.5 * d * d : delta * (fabs(d) - 0.5 * delta);
	default: return -t * log(1 / (1 + exp(-y))) - (1 - t) * log(1 - 1 / (1 + exp(-y)));
	}
}

static void test_pointwise_loss(void)
{
	static const char *const names[] = { "", "mse", "l1", "huber", "bce" };
	for (int kind = DLT_LOSS_MSE; kind <= DLT_LOSS_BCE; kind++) {
		double worst_l = 0, worst_g = 0;
		for (int i = 0; i < 2000; i++) {
			float y = 12.0f * dlt_rng_uniform(&rng) - 6.0f;
			float t = kind == DLT_LOSS_BCE ? (float)(dlt_rng_u32(&rng) & 1)
				: 12.0f * dlt_rng_uniform(&rng) - 6.0f, g;
			double h = 1e-4, want_g, l = dlt_pointwise_loss(kind, 1.5f, y, t, 0.25f, &g);
			if (fabs((double)y - t) < 2 * h || fabs(fabs((double)y - t) - 1.5) < 2 * h)
				continue;	/* a kink: no derivative to compare */
			want_g = 0.25 * (loss64(kind, 1.5, y + h, t) - loss64(kind, 1.5, y - h, t)) / (2 * h);
			worst_l = fmax(worst_l, rel_err(l, loss64(kind, 1.5, y, t), 1.0));
			worst_g = fmax(worst_g, fabs(g - want_g) / (fabs(want_g) + 0.25));
		}
		ok(worst_l < 1e-6, "%s loss within 1e-6 of fp64 (worst %.3g)", names[kind], worst_l);
		ok(worst_g < 1e-5, "%s gradient within 1e-5 of a central difference (worst %.3g)",
		   names[kind], worst_g);
	}
}

static void test_optimisers(void)
{
	double worst_a = 0, worst_s = 0, worst_m = 0;
	for (int t = 1; t <= 200; t++) {
		float lr = 1e-3f * (float)(1 + t % 4), b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
		float wd = t % 2 ? 0.01f : 0.0f, mom = 0.9f;
		int decoupled = t % 4 < 2, nesterov = t % 3 == 0, first = t % 7 == 1;
		float w = 2.0f * dlt_rng_uniform(&rng) - 1.0f, g = dlt_rng_uniform(&rng) - 0.5f;
		float m = 0.1f * (dlt_rng_uniform(&rng) - 0.5f), v = 0.01f * dlt_rng_uniform(&rng);
		float w1 = w, m1 = m, v1 = v, w2 = w, w3 = w, buf = m;
		double dw = w, dg = g + (decoupled ? 0 : (double)wd * w), dm, dv, b, ahead;
		dlt_adam_step s = dlt_adam_prepare(lr, b1, b2, eps, wd, decoupled, t, 1.0f);

		dlt_adam_update(&w1, g, &m1, &v1, s);
		if (decoupled)
			dw *= 1.0 - (double)lr * wd;
		dm = b1 * (double)m + (1.0 - b1) * dg;
		dv = b2 * (double)v + (1.0 - b2) * dg * dg;
		dw -= lr / (1 - pow(b1, t)) * dm / (sqrt(dv) / sqrt(1 - pow(b2, t)) + eps);
		worst_a = fmax(worst_a, rel_err(w1, dw, 1e-3) + rel_err(m1, dm, 1e-6) +
					rel_err(v1, dv, 1e-9));

		dlt_sgd_update(&w2, g, lr, wd);
		worst_s = fmax(worst_s, rel_err(w2, w - (double)lr * (g + (double)wd * w), 1e-6));

		dlt_sgd_momentum_update(&w3, g, &buf, lr, mom, nesterov, wd, first);
		dg = g + (double)wd * w;
		b = mom * (first ? 0.0 : (double)m) + dg;
		ahead = nesterov ? dg + mom * b : b;
		worst_m = fmax(worst_m, rel_err(w3, w - lr * ahead, 1e-6) + rel_err(buf, b, 1e-6));
	}
	ok(worst_a < 1e-5, "adam and adamw: w, m, v within 1e-5 of fp64 (worst %.3g)", worst_a);
	ok(worst_s < 1e-6, "sgd within 1e-6 of fp64 (worst %.3g)", worst_s);
	ok(worst_m < 1e-5, "sgd with momentum and nesterov within 1e-5 of fp64 (worst %.3g)",
	   worst_m);
}

/* The window from its definition: the input rows and columns that the
 * kernel covers, and its size counting padding but not past it. */
static void test_pool_window(void)
{
	int bad = 0, cases = 0;
	for (int h = 1; h <= 7; h++)
	for (int k = 1; k <= 4; k++)
	for (int st = 1; st <= 3; st++)
	for (int p = 0; p <= k / 2; p++) {
		dlt_pool s = { .n = 1, .c = 1, .h = h, .w = h + 1, .kh = k, .kw = k, .sh = st,
			       .sw = st, .ph = p, .pw = p };
		s.oh = (h + 2 * p - k) / st + 1;
		s.ow = (h + 1 + 2 * p - k) / st + 1;
		if (h + 2 * p < k)
			continue;
		for (int oy = 0; oy < s.oh; oy++)
		for (int ox = 0; ox < s.ow; ox++) {
			dlt_pool_window r = dlt_pool_window_at(&s, oy, ox);
			int y0 = s.h, y1 = 0, x0 = s.w, x1 = 0, size = 0;
			for (int ky = 0; ky < k; ky++)
			for (int kx = 0; kx < k; kx++) {
				int iy = oy * st - p + ky, ix = ox * st - p + kx;
				size += iy < h + p && ix < s.w + p;
				if (iy < 0 || ix < 0 || iy >= h || ix >= s.w)
					continue;
				y0 = iy < y0 ? iy : y0;
				y1 = iy + 1 > y1 ? iy + 1 : y1;
				x0 = ix < x0 ? ix : x0;
				x1 = ix + 1 > x1 ? ix + 1 : x1;
			}
			bad += r.y0 != y0 || r.y1 != y1 || r.x0 != x0 || r.x1 != x1 ||
			       r.size != size;
			cases++;
		}
	}
	ok(bad == 0, "pooling windows as defined, %d windows (%d differ)", cases, bad);
}

int main(void)
{
	dlt_rng_init(&rng, 77, 0);
	test_activations();
	test_gelu_tanh();
	test_rounding();
	test_dropout();
	test_softmax_xent();
	test_pointwise_loss();
	test_optimisers();
	test_pool_window();
	return done_testing();
}
