/* GELU tanh W lanes at a time (cpu.c includes this once per instruction
 * set, each_isa.h, with W, SFX and the target set): kernels/common/math.h's
 * dlt_tanhf, dlt_gelu_tanh and dlt_gelu_tanh_backward, operation for
 * operation, so the same bits as they give: their fmaf an FMA here, and
 * every other product and sum an intrinsic that gcc does not contract
 * into one (AVX-512's with a rounding argument; AVX2's from an unfused
 * intrinsic, which gcc keeps as written). */

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define FN(name) CAT(name, SFX)

#if W == 16
#define VT __m512
#define RN (_MM_FROUND_CUR_DIRECTION)
#define ADD(a, b) _mm512_add_round_ps(a, b, RN)
#define SUB(a, b) _mm512_sub_round_ps(a, b, RN)
#define MUL(a, b) _mm512_mul_round_ps(a, b, RN)
#define DIV(a, b) _mm512_div_round_ps(a, b, RN)
#define FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define FNMA(a, b, c) _mm512_fnmadd_ps(a, b, c)	/* c - a b */
#define SET1(x) _mm512_set1_ps(x)
#define LOAD(p) _mm512_loadu_ps(p)
#define STORE(p, v) _mm512_storeu_ps(p, v)
#define MIN(a, b) _mm512_min_ps(a, b)
#define BITS(v) _mm512_castps_si512(v)
#define AND(a, b) _mm512_castsi512_ps(_mm512_and_si512(BITS(a), BITS(b)))
#define ANDNOT(a, b) _mm512_castsi512_ps(_mm512_andnot_si512(BITS(a), BITS(b)))
#define OR(a, b) _mm512_castsi512_ps(_mm512_or_si512(BITS(a), BITS(b)))
/* 2^n for the integer-valued float n */
#define POW2(n)                                                                        \
	_mm512_castsi512_ps(_mm512_slli_epi32(                                         \
		_mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23))
/* where a < b: y, else x */
#define SEL_LT(a, b, x, y) _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), x, y)
#define SEL_NAN(a, x, y) _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), x, y)
#else
#define VT __m256
#define ADD(a, b) _mm256_add_ps(a, b)
#define SUB(a, b) _mm256_sub_ps(a, b)
#define MUL(a, b) _mm256_mul_ps(a, b)
#define DIV(a, b) _mm256_div_ps(a, b)
#define FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define FNMA(a, b, c) _mm256_fnmadd_ps(a, b, c)
#define SET1(x) _mm256_set1_ps(x)
#define LOAD(p) _mm256_loadu_ps(p)
#define STORE(p, v) _mm256_storeu_ps(p, v)
#define MIN(a, b) _mm256_min_ps(a, b)
#define AND(a, b) _mm256_and_ps(a, b)
#define ANDNOT(a, b) _mm256_andnot_ps(a, b)
#define OR(a, b) _mm256_or_ps(a, b)
#define POW2(n)                                                                        \
	_mm256_castsi256_ps(_mm256_slli_epi32(                                         \
		_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23))
#define SEL_LT(a, b, x, y) _mm256_blendv_ps(x, y, _mm256_cmp_ps(a, b, _CMP_LT_OQ))
#define SEL_NAN(a, x, y) _mm256_blendv_ps(x, y, _mm256_cmp_ps(a, a, _CMP_UNORD_Q))
#endif

static inline VT FN(tanh_)(VT x)
{
	const VT sign = SET1(-0.0f), one = SET1(1.0f), magic = SET1(12582912.0f);
	VT a = ANDNOT(sign, x), z = MUL(a, a), p, small, y, n, f, e, large, r;
	p = SET1(2.148984000e-03f);
	p = FMA(p, z, SET1(-8.184661157e-03f));
	p = FMA(p, z, SET1(2.170399949e-02f));
	p = FMA(p, z, SET1(-5.394745246e-02f));
	p = FMA(p, z, SET1(1.333321184e-01f));
	p = FMA(p, z, SET1(-3.333333135e-01f));
	small = FMA(a, MUL(z, p), a);
	y = MIN(a, SET1(15.0f));	/* a < 15 ? a : 15, and 15 for NaN */
	y = ADD(y, y);
	n = SUB(FMA(y, SET1(1.44269504088896341f), magic), magic);
	f = FNMA(n, SET1(1.428606765330187e-06f), FNMA(n, SET1(0.693145751953125f), y));
	p = SET1(1.0f / 5040.0f);
	p = FMA(p, f, SET1(1.0f / 720.0f));
	p = FMA(p, f, SET1(1.0f / 120.0f));
	p = FMA(p, f, SET1(1.0f / 24.0f));
	p = FMA(p, f, SET1(1.0f / 6.0f));
	p = FMA(p, f, SET1(0.5f));
	p = FMA(p, f, one);
	p = FMA(p, f, one);
	e = MUL(p, POW2(n));
	large = SUB(one, DIV(SET1(2.0f), ADD(e, one)));
	r = SEL_LT(a, SET1(0.625f), large, small);
	r = OR(ANDNOT(sign, r), AND(sign, x));
	return SEL_NAN(x, r, x);
}

/* beta (x + kappa x^3) as beta fma(k2, x, x), k2 grouped as the scalar
 * form groups it */
static inline VT FN(gelu_inner_)(VT x, VT k2)
{
	return MUL(SET1(DLT_GELU_TANH_BETA), FMA(k2, x, x));
}

static size_t FN(gelu_tanh_)(const float *x, float *y, size_t n)
{
	size_t i = 0;
	for (; i + W <= n; i += W) {
		VT v = LOAD(x + i), h = MUL(SET1(0.5f), v);
		/* kappa x x: (kappa x) x */
		VT t = FN(tanh_)(FN(gelu_inner_)(v, MUL(MUL(SET1(DLT_GELU_TANH_KAPPA), v), v)));
		STORE(y + i, FMA(h, t, h));
	}
	return i;
}

static size_t FN(gelu_tanh_grad_)(const float *x, const float *dy, float *dx, size_t n)
{
	size_t i = 0;
	for (; i + W <= n; i += W) {
		VT v = LOAD(x + i), x2 = MUL(v, v), t, left, right, inner;
		t = FN(tanh_)(FN(gelu_inner_)(v, MUL(SET1(DLT_GELU_TANH_KAPPA), x2)));
		left = FMA(SET1(0.5f), t, SET1(0.5f));
		right = MUL(MUL(SET1(0.5f), v), FNMA(t, t, SET1(1.0f)));
		inner = MUL(SET1(DLT_GELU_TANH_BETA),
			    FMA(SET1(3.0f * DLT_GELU_TANH_KAPPA), x2, SET1(1.0f)));
		STORE(dx + i, MUL(LOAD(dy + i), FMA(right, inner, left)));
	}
	return i;
}

#undef SEL_NAN
#undef SEL_LT
#undef POW2
#undef OR
#undef BITS
#undef ANDNOT
#undef AND
#undef MIN
#undef STORE
#undef LOAD
#undef SET1
#undef FNMA
#undef FMA
#undef DIV
#undef MUL
#undef SUB
#undef ADD
#undef RN
#undef VT
#undef FN
#undef CAT
#undef CAT_
