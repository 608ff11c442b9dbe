/* Generation's attention over a KV cache on the GPU: a warp a (query,
 * head), lanes over the head's dimensions, an online softmax over the
 * keys one at a time, as attention_forward's kernel (transformer.cu) does
 * for a query of a whole sequence.  Head sizes up to DEC_DMAX. */
#include "kernels/cuda/internal.h"

#define DEC_ROWS 4		/* warps a block */
#define DEC_DMAX 256
#define DEC_PER_LANE (DEC_DMAX / WARP)

static __global__ void attn_decode_kernel(const float *qkv, float *out, int q0, int n, int C,
					  int H, float scale)
{
	size_t row = (size_t)blockIdx.x * DEC_ROWS + threadIdx.x / WARP;
	int lane = threadIdx.x % WARP, D = C / H, i, h, t;
	size_t ld = (size_t)3 * C;
	float q[DEC_PER_LANE], o[DEC_PER_LANE], m = -INFINITY, l = 0.0f;
	const float *base;
	if (row >= (size_t)n * H)
		return;
	i = (int)(row / H);
	h = (int)(row % H);
	t = q0 + i;
	base = qkv + (size_t)h * D;
	#pragma unroll
	for (int k = 0; k < DEC_PER_LANE; k++) {
		int d = lane + WARP * k;
		q[k] = d < D ? base[(size_t)t * ld + d] : 0.0f;
		o[k] = 0.0f;
	}
	for (int j = 0; j <= t; j++) {
		const float *kr = base + (size_t)j * ld + C, *vr = kr + C;
		float s = 0.0f, mx, corr, p;
		#pragma unroll
		for (int k = 0; k < DEC_PER_LANE; k++) {
			int d = lane + WARP * k;
			if (d < D)
				s += q[k] * kr[d];
		}
		s = cu_warp_sum(s) * scale;
		mx = s > m ? s : m;
		corr = expf(m - mx);
		p = expf(s - mx);
		l = l * corr + p;
		#pragma unroll
		for (int k = 0; k < DEC_PER_LANE; k++) {
			int d = lane + WARP * k;
			o[k] = o[k] * corr + (d < D ? p * vr[d] : 0.0f);
		}
		m = mx;
	}
	#pragma unroll
	for (int k = 0; k < DEC_PER_LANE; k++) {
		int d = lane + WARP * k;
		if (d < D)
			out[(size_t)i * C + (size_t)h * D + d] = o[k] / l;
	}
}

void cu_attention_decode(const float *qkv, float *out, int q0, int n, int C, int H)
{
	size_t rows = (size_t)n * H;
	if (!rows)
		return;
	if (H < 1 || C % H || C / H > DEC_DMAX) {
		cu_check(cudaErrorInvalidValue, "attention_decode: head size over 256");
		return;
	}
	attn_decode_kernel<<<(unsigned)((rows + DEC_ROWS - 1) / DEC_ROWS), DEC_ROWS * WARP, 0,
			     cu.stream>>>(qkv, out, q0, n, C, H,
					  (float)(1.0 / sqrt((double)(C / H))));
	cu_launched("attention_decode");
}
