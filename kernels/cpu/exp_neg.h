/* exp of a non-positive argument, vectorisable: attention's softmax on
 * the CPU (transformer.c, decode.c). */
#ifndef DLT_CPU_EXP_NEG_H
#define DLT_CPU_EXP_NEG_H

#include <stdint.h>
#include <string.h>

/* exp(x) for the x <= 0 of a score less its row's maximum (or lse), in
 * a form the compiler vectorises (expf is a call per element): 2^n e^f
 * with n = round(x log2 e), |f| <= ln 2 / 2, e^f by its degree-6 Taylor
 * polynomial (within 3 ulp of exp over [-87, 1]); below -87 it is 0, as
 * expf's underflow nearly is.  attention_simd.h's exp_neg_v_ is the same
 * on W lanes at once, with a lane mask: a change here goes there too. */
static inline float exp_neg(float x)
{
	float t = x * 1.44269504088896341f;
	float n = (t + 12582912.0f) - 12582912.0f;	/* round to nearest */
	float f = x - n * 0.693145751953125f - n * 1.428606765330187e-06f;
	float p = 1.0f / 720.0f;
	uint32_t bits;
	float two_n;
	p = p * f + 1.0f / 120.0f;
	p = p * f + 1.0f / 24.0f;
	p = p * f + 1.0f / 6.0f;
	p = p * f + 0.5f;
	p = p * f + 1.0f;
	p = p * f + 1.0f;
	n = n < -126.0f ? -126.0f : n;
	bits = (uint32_t)((int32_t)n + 127) << 23;
	memcpy(&two_n, &bits, sizeof(two_n));
	return x < -87.0f ? 0.0f : p * two_n;
}

#endif
