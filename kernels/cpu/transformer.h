/* The transformer's layers on the CPU (layer norm, embeddings, learned
 * positions, attention), each fast (transformer.c: OpenMP, the GEMM on
 * tiles) and as a plain reference (ref_transformer.c).  The semantics
 * are those of the backend table's entries (kernels.h), which these fill
 * in. */
#ifndef DLT_CPU_TRANSFORMER_H
#define DLT_CPU_TRANSFORMER_H

#include <stdint.h>

#include "kernels/kernels.h"

void dlt_cpu_layernorm_forward(const float *x, const float *gamma, const float *beta, float *y,
			       float *mean, float *rstd, int rows, int C, float eps);
void dlt_cpu_layernorm_backward(const float *x, const float *dy, const float *gamma,
				const float *mean, const float *rstd, float *dx, float *dgamma,
				float *dbeta, int rows, int C);
void dlt_cpu_embedding_forward(const int32_t *ids, const float *w, float *out, int n, int C,
			       int V);
void dlt_cpu_embedding_backward(const int32_t *ids, const float *dout, float *dw, int n, int C,
				int V);
void dlt_cpu_positional_forward(const float *x, const float *p, float *y, int B, int T, int C);
void dlt_cpu_positional_backward(const float *dy, float *dp, int B, int T, int C);
void dlt_cpu_attention_forward(int prec, const float *qkv, float *out, float *lse, int B, int T,
			       int C, int H, int causal, dlt_attn_dropout drop);
void dlt_cpu_attention_backward(int prec, const float *qkv, const float *out, const float *dout,
				const float *lse, float *dqkv, int B, int T, int C, int H,
				int causal, dlt_attn_dropout drop);

/* The lanes of the CPU's register-blocked attention kernels (16 for
 * AVX-512, 8 for AVX2 with FMA) that serve head size D, a multiple of
 * them up to 8 vectors; 0 where none does (the generic paths then) */
int dlt_cpu_attention_lanes(int D);

void dlt_ref_layernorm_forward(const float *x, const float *gamma, const float *beta, float *y,
			       float *mean, float *rstd, int rows, int C, float eps);
void dlt_ref_layernorm_backward(const float *x, const float *dy, const float *gamma,
				const float *mean, const float *rstd, float *dx, float *dgamma,
				float *dbeta, int rows, int C);
void dlt_ref_embedding_forward(const int32_t *ids, const float *w, float *out, int n, int C,
			       int V);
void dlt_ref_embedding_backward(const int32_t *ids, const float *dout, float *dw, int n, int C,
				int V);
void dlt_ref_positional_forward(const float *x, const float *p, float *y, int B, int T, int C);
void dlt_ref_positional_backward(const float *dy, float *dp, int B, int T, int C);
void dlt_ref_attention_forward(int prec, const float *qkv, float *out, float *lse, int B, int T,
			       int C, int H, int causal, dlt_attn_dropout drop);
void dlt_ref_attention_backward(int prec, const float *qkv, const float *out, const float *dout,
				const float *lse, float *dqkv, int B, int T, int C, int H,
				int causal, dlt_attn_dropout drop);

#endif
