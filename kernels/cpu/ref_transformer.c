/* The reference of the transformer's layers: straight from the
 * definitions, one row (or one query) at a time, sums in double; the
 * attention computes each query's whole row of scores in double.  Slow on
 * purpose; transformer.c and the CUDA kernels are tested against it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/common/math.h"
#include "kernels/cpu/transformer.h"

void dlt_ref_layernorm_forward(const float *x, const float *gamma, const float *beta, float *y,
			       float *mean, float *rstd, int rows, int C, float eps)
{
	for (int r = 0; r < rows; r++) {
		const float *xr = x + (size_t)r * C;
		float *yr = y + (size_t)r * C;
		double s = 0.0, sq = 0.0, mu;
		for (int c = 0; c < C; c++)
			s += xr[c];
		mu = s / C;
		for (int c = 0; c < C; c++)
			sq += (xr[c] - mu) * (xr[c] - mu);
		mean[r] = (float)mu;
		rstd[r] = (float)(1.0 / sqrt(sq / C + eps));
		for (int c = 0; c < C; c++)
			yr[c] = (xr[c] - mean[r]) * rstd[r] * gamma[c] + beta[c];
	}
}

/* dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy gamma, in double;
 * dgamma and dbeta: each column's sum over rows in order, in double, of
 * the float xhat's products, then added */
void dlt_ref_layernorm_backward(const float *x, const float *dy, const float *gamma,
				const float *mean, const float *rstd, float *dx, float *dgamma,
				float *dbeta, int rows, int C)
{
	for (int r = 0; r < rows; r++) {
		const float *xr = x + (size_t)r * C, *dyr = dy + (size_t)r * C;
		double mg = 0.0, mgx = 0.0;
		for (int c = 0; c < C; c++) {
			double xh = ((double)xr[c] - mean[r]) * rstd[r], g = (double)dyr[c] * gamma[c];
			mg += g;
			mgx += g * xh;
		}
		mg /= C;
		mgx /= C;
		for (int c = 0; c < C; c++) {
			double xh = ((double)xr[c] - mean[r]) * rstd[r], g = (double)dyr[c] * gamma[c];
			dx[(size_t)r * C + c] = (float)(rstd[r] * (g - mg - xh * mgx));
		}
	}
	for (int c = 0; c < C; c++) {
		double sg = 0.0, sb = 0.0;
		for (int r = 0; r < rows; r++) {
			size_t i = (size_t)r * C + c;
			float xh = (x[i] - mean[r]) * rstd[r];
			sg += (double)dy[i] * xh;
			sb += dy[i];
		}
		dgamma[c] += (float)sg;
		dbeta[c] += (float)sb;
	}
}

void dlt_ref_embedding_forward(const int32_t *ids, const float *w, float *out, int n, int C,
			       int V)
{
	for (int i = 0; i < n; i++)
		for (int c = 0; c < C; c++)
			out[(size_t)i * C + c] = ids[i] >= 0 && ids[i] < V
						 ? w[(size_t)ids[i] * C + c] : NAN;
}

/* token order, in float: the order the fast kernel keeps */
void dlt_ref_embedding_backward(const int32_t *ids, const float *dout, float *dw, int n, int C,
				int V)
{
	for (int i = 0; i < n; i++) {
		if (ids[i] < 0 || ids[i] >= V)
			continue;
		for (int c = 0; c < C; c++)
			dw[(size_t)ids[i] * C + c] += dout[(size_t)i * C + c];
	}
}

void dlt_ref_positional_forward(const float *x, const float *p, float *y, int B, int T, int C)
{
	for (int b = 0; b < B; b++)
		for (int t = 0; t < T; t++)
			for (int c = 0; c < C; c++) {
				size_t i = ((size_t)b * T + t) * C + c;
				y[i] = x[i] + p[(size_t)t * C + c];
			}
}

void dlt_ref_positional_backward(const float *dy, float *dp, int B, int T, int C)
{
	for (int b = 0; b < B; b++)
		for (int t = 0; t < T; t++)
			for (int c = 0; c < C; c++)
				dp[(size_t)t * C + c] += dy[((size_t)b * T + t) * C + c];
}

static double dot_d(const float *a, const float *b, int n)
{
	double s = 0.0;
	for (int i = 0; i < n; i++)
		s += (double)a[i] * b[i];
	return s;
}

/* Each query's row of scores in double: its maximum, the sum of the
 * exponentials, the weighted sum of the values (the weights times their
 * dropout's factors; the sum without). */
void dlt_ref_attention_forward(int prec, const float *qkv, float *out, float *lse, int B, int T,
			       int C, int H, int causal, dlt_attn_dropout drop)
{
	int D = C / H;
	size_t ld = (size_t)3 * C;
	double scale = 1.0 / sqrt(D), *s = malloc(((size_t)T + 1) * sizeof(double));
	double *o = malloc(((size_t)D + 1) * sizeof(double));
	for (int b = 0; b < B; b++)
	for (int h = 0; h < H; h++)
	for (int t = 0; t < T; t++) {
		const float *base = qkv + (size_t)b * T * ld + (size_t)h * D;
		const float *q = base + t * ld;
		int n = causal ? t + 1 : T;
		double mx = -INFINITY, sum = 0.0;
		for (int j = 0; j < n; j++) {
			s[j] = dot_d(q, base + j * ld + C, D) * scale;
			mx = fmax(mx, s[j]);
		}
		for (int d = 0; d < D; d++)
			o[d] = 0.0;
		for (int j = 0; j < n; j++) {
			const float *v = base + j * ld + 2 * C;
			double p = exp(s[j] - mx);
			double pz = p * dlt_attn_keep(drop, ((size_t)b * H + h) * T + t, T, j);
			sum += p;
			for (int d = 0; d < D; d++)
				o[d] += pz * v[d];
		}
		for (int d = 0; d < D; d++)
			out[((size_t)b * T + t) * C + (size_t)h * D + d] = (float)(o[d] / sum);
		lse[((size_t)b * H + h) * T + t] = (float)(mx + log(sum));
	}
	free(s);
	free(o);
}

/* With P = exp(S - lse), Z the dropout's factors and D_i = dout_i . out_i
 * (= sum_j P_ij Z_ij dout_i . v_j): dv_j = sum_i P_ij Z_ij dout_i,
 * dS_ij = P_ij (Z_ij dout_i . v_j - D_i), dq_i = scale sum_j dS_ij k_j,
 * dk_j = scale sum_i dS_ij q_i; summed in double for one (b, h) at a time. */
void dlt_ref_attention_backward(int prec, const float *qkv, const float *out, const float *dout,
				const float *lse, float *dqkv, int B, int T, int C, int H,
				int causal, dlt_attn_dropout drop)
{
	int D = C / H;
	size_t ld = (size_t)3 * C;
	double scale = 1.0 / sqrt(D);
	double *acc = malloc(((size_t)T * 3 * D + 1) * sizeof(double));
	for (size_t i = 0; i < (size_t)B * T * ld; i++)
		dqkv[i] = 0.0f;
	for (int b = 0; b < B; b++)
	for (int h = 0; h < H; h++) {
		const float *base = qkv + (size_t)b * T * ld + (size_t)h * D;
		for (size_t i = 0; i < (size_t)T * 3 * D; i++)
			acc[i] = 0.0;
		for (int i = 0; i < T; i++) {
			const float *q = base + i * ld;
			const float *o = out + ((size_t)b * T + i) * C + (size_t)h * D;
			const float *g = dout + ((size_t)b * T + i) * C + (size_t)h * D;
			double di = dot_d(g, o, D), l = lse[((size_t)b * H + h) * T + i];
			double *dq = acc + (size_t)i * 3 * D;
			int n = causal ? i + 1 : T;
			for (int j = 0; j < n; j++) {
				const float *k = base + j * ld + C, *v = base + j * ld + 2 * C;
				double *dk = acc + (size_t)j * 3 * D + D, *dv = dk + D;
				double p = exp(dot_d(q, k, D) * scale - l);
				double z = dlt_attn_keep(drop, ((size_t)b * H + h) * T + i, T, j);
				double ds = p * (z * dot_d(g, v, D) - di);
				for (int d = 0; d < D; d++) {
					dq[d] += ds * scale * k[d];
					dk[d] += ds * scale * q[d];
					dv[d] += p * z * g[d];
				}
			}
		}
		for (int t = 0; t < T; t++)
			for (int part = 0; part < 3; part++)
				for (int d = 0; d < D; d++)
					dqkv[((size_t)b * T + t) * ld + (size_t)part * C +
					     (size_t)h * D + d] =
						(float)acc[((size_t)t * 3 + part) * D + d];
	}
	free(acc);
}
