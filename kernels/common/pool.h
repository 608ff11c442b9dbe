/* The window of a pooling output, shared by the fast kernels, the
 * reference and (host and device alike) the GPU's. */
#ifndef DLT_COMMON_POOL_H
#define DLT_COMMON_POOL_H

#include "kernels/kernels.h"
#include "kernels/common/math.h"

/* Rows [y0, y1) and columns [x0, x1) of the image under the window of
 * output (oy, ox), and its size with the padding: PyTorch's divisor for
 * average pooling counts padding but nothing past it. */
typedef struct dlt_pool_window {
	int y0, y1, x0, x1;
	int size;
} dlt_pool_window;

static inline DLT_HD dlt_pool_window dlt_pool_window_at(const dlt_pool *s, int oy, int ox)
{
	dlt_pool_window r;
	int y0 = oy * s->sh - s->ph, x0 = ox * s->sw - s->pw;
	int y1 = y0 + s->kh < s->h + s->ph ? y0 + s->kh : s->h + s->ph;
	int x1 = x0 + s->kw < s->w + s->pw ? x0 + s->kw : s->w + s->pw;
	r.size = (y1 - y0) * (x1 - x0);
	r.y0 = y0 < 0 ? 0 : y0;
	r.x0 = x0 < 0 ? 0 : x0;
	r.y1 = y1 < s->h ? y1 : s->h;
	r.x1 = x1 < s->w ? x1 : s->w;
	return r;
}

/* The argmax that max pooling keeps for a window: its maximum's, or -1
 * (no gradient) where the pool does a ReLU's backward and the maximum is
 * not above 0, where the ReLU's gradient is 0 (a NaN's too). */
static inline DLT_HD int32_t dlt_maxpool_arg(const dlt_pool *s, float best, int32_t at)
{
	return s->relu && !(best > 0.0f) ? -1 : at;
}

#endif
