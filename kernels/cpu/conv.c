/* Convolution as GEMM over patches (im2col), the batch cut into chunks
 * of CONV_CHUNK samples, one chunk per task, one GEMM per chunk and group.
 *
 * A chunk's patches go side by side, col [c kh kw, CONV_CHUNK oh ow], to
 * the slot of the thread that runs it (a slot per thread, not per chunk,
 * keeps the workspace in cache and small).  Forward: ybuf = W col, one
 * GEMM whose N is the chunk's pixels (a GEMM per sample would pack W each
 * time and waste the edge tiles of N = oh ow), then y_n = act(ybuf's
 * columns of sample n + b).  Backward: the chunk's dy is gathered the same
 * way, dybuf [k, CONV_CHUNK oh ow], with each channel's sum for db on the
 * way; the chunk's partial dW = dybuf col^T (the samples summed in the
 * GEMM's K) and dcol = W^T dybuf, which overwrites col and col2im adds
 * into dx_n.  The partials of dW and db are added in chunk order
 * afterwards.
 *
 * Every GEMM runs inside the parallel region, on one thread, and the
 * chunks do not depend on the number of threads: the results are the same
 * bits on any number of threads.
 *
 * Where the CPU has AVX2 (cpuid, at each call): the shifted patch rows
 * (stride 1, ow = w) are copied under a mask in one pass, and a first
 * layer (one input channel, 3x3) skips the GEMMs, whose K = 9 would be
 * all edge: its forward weights the patches straight into y, its dW (it
 * has no dx) reads dy once instead of gathering it. */
#include <immintrin.h>
#include <omp.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/common/math.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/layers.h"
#include "kernels/cpu/pool_avx2.h"

/* Output columns [lo, hi) whose input column ox sw - pw + off lies in [0, w) */
static void conv_span(int ow, int w, int sw, int pw, int off, int *lo, int *hi)
{
	int first = pw - off, last = w - 1 + pw - off;	/* bounds on ox sw */
	*lo = first <= 0 ? 0 : (first + sw - 1) / sw;
	*hi = last < 0 ? 0 : last / sw + 1;
	if (*hi > ow)
		*hi = ow;
	if (*lo > *hi)
		*lo = *hi;
}

/* With stride 1 and ow = w (3x3 with padding 1, say) a patch row is its
 * input plane shifted: output rows [y0, y1) read the plane from first on,
 * in one piece, except for the columns outside [lo, hi), which wrap
 * around to the next or previous row (and may lie outside the plane).
 * Row by row it would be a few floats per call. */
typedef struct conv_shift {
	int y0, y1, lo, hi;
	long first;
} conv_shift;

static conv_shift conv_shifted(const dlt_conv *s, int ky, int kx)
{
	conv_shift t;
	int shift = ky * s->dh - s->ph;
	t.y0 = shift >= 0 ? 0 : -shift < s->oh ? -shift : s->oh;
	t.y1 = s->h - shift < s->oh ? s->h - shift : s->oh;
	if (t.y1 < t.y0)
		t.y1 = t.y0;
	t.first = (long)(t.y0 + shift) * s->w + kx * s->dw - s->pw;
	conv_span(s->ow, s->w, 1, s->pw, kx * s->dw, &t.lo, &t.hi);
	return t;
}

/* out[oy][ox] = 0 for the wrapped columns of rows [y0, y1) */
static void conv_zero_wrapped(const dlt_conv *s, const conv_shift *t, float *out)
{
	for (int oy = t->y0; oy < t->y1; oy++) {
		float *row = out + (size_t)oy * s->ow;
		for (int ox = 0; ox < t->lo; ox++)
			row[ox] = 0.0f;
		for (int ox = t->hi; ox < s->ow; ox++)
			row[ox] = 0.0f;
	}
}

static void im2col_shifted(const dlt_conv *s, const float *plane, float *out, int ky, int kx)
{
	conv_shift t = conv_shifted(s, ky, kx);
	long size = (long)s->h * s->w, end = t.first + (long)(t.y1 - t.y0) * s->ow;
	long a = t.first < 0 ? 0 : t.first, b = end < size ? end : size;
	memset(out, 0, (size_t)t.y0 * s->ow * sizeof(*out));
	if (a < b)
		memcpy(out + (size_t)t.y0 * s->ow + (a - t.first), plane + a,
		       (b - a) * sizeof(*out));
	conv_zero_wrapped(s, &t, out);
	memset(out + (size_t)t.y1 * s->ow, 0, (size_t)(s->oh - t.y1) * s->ow * sizeof(*out));
}

/* The adjoint: the wrapped columns of g (scratch) are zeroed, then added
 * in one piece. */
static void col2im_shifted(const dlt_conv *s, float *g, float *plane, int ky, int kx)
{
	conv_shift t = conv_shifted(s, ky, kx);
	long size = (long)s->h * s->w, end = t.first + (long)(t.y1 - t.y0) * s->ow;
	long a = t.first < 0 ? 0 : t.first, b = end < size ? end : size;
	const float *from = g + (size_t)t.y0 * s->ow;
	conv_zero_wrapped(s, &t, g);
	#pragma omp simd
	for (long i = a; i < b; i++)
		plane[i] += from[i - t.first];
}

/* With AVX2 the shifted rows go in one pass: a tap's mask (conv_masks)
 * has all bits set at the output pixels that read inside the plane, so
 * out = the plane from first on, and-ed with it.  Only the pixels whose
 * reads lie inside the plane's memory are loaded; the rest are zeros. */
static int conv_is_shifted(const dlt_conv *s)
{
	return s->sh == 1 && s->sw == 1 && s->ow == s->w;
}

/* The taps' masks, [kh kw, oh ow], for the shifted rows; NULL where they
 * are not used (no AVX2, or not shifted) */
static const int32_t *conv_masks(const dlt_conv *s, int32_t *m)
{
	if (!conv_is_shifted(s) || !__builtin_cpu_supports("avx2"))
		return NULL;
	for (int ky = 0; ky < s->kh; ky++) {
		for (int kx = 0; kx < s->kw; kx++) {
			conv_shift t = conv_shifted(s, ky, kx);
			int32_t *row = m + (size_t)(ky * s->kw + kx) * s->oh * s->ow;
			for (int oy = 0; oy < s->oh; oy++)
				for (int ox = 0; ox < s->ow; ox++)
					row[oy * s->ow + ox] = oy >= t.y0 && oy < t.y1 &&
							       ox >= t.lo && ox < t.hi ? -1 : 0;
		}
	}
	return m;
}

/* Output pixel i of the tap reads the plane at base + i (where its mask
 * lets it); pixels [*i0, *i1) read inside the plane's memory */
static long conv_loadable(const dlt_conv *s, const conv_shift *t, long *i0, long *i1)
{
	long size = (long)s->h * s->w, p = (long)s->oh * s->ow;
	long base = t->first - (long)t->y0 * s->ow;
	*i0 = base < 0 ? -base : 0;
	*i1 = size - base < p ? size - base : p;
	if (*i0 > p)
		*i0 = p;
	if (*i1 < *i0)
		*i1 = *i0;
	return base;
}

__attribute__((target("avx2")))
static void im2col_masked_avx2(const dlt_conv *s, const float *plane, float *out, int ky, int kx,
			       const int32_t *mask)
{
	conv_shift t = conv_shifted(s, ky, kx);
	long p = (long)s->oh * s->ow, i0, i1, i;
	long base = conv_loadable(s, &t, &i0, &i1);
	for (i = 0; i < i0; i++)
		out[i] = 0.0f;
	for (i = i0; i + 8 <= i1; i += 8)
		_mm256_storeu_ps(out + i, _mm256_and_ps(_mm256_loadu_ps(plane + (base + i)),
				 _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)(mask + i)))));
	for (; i < i1; i++)
		out[i] = mask[i] ? plane[base + i] : 0.0f;
	for (; i < p; i++)
		out[i] = 0.0f;
}

/* The adjoint: plane += g and-ed with the mask, from first on; adding the
 * masked-out pixels' +0 as col2im_shifted does */
__attribute__((target("avx2")))
static void col2im_masked_avx2(const dlt_conv *s, const float *g, float *plane, int ky, int kx,
			       const int32_t *mask)
{
	conv_shift t = conv_shifted(s, ky, kx);
	long i0, i1, i;
	long base = conv_loadable(s, &t, &i0, &i1);
	for (i = i0; i + 8 <= i1; i += 8) {
		float *in = plane + (base + i);
		__m256 v = _mm256_and_ps(_mm256_loadu_ps(g + i), _mm256_castsi256_ps(
			_mm256_loadu_si256((const __m256i *)(mask + i))));
		_mm256_storeu_ps(in, _mm256_add_ps(_mm256_loadu_ps(in), v));
	}
	for (; i < i1; i++)
		plane[base + i] += mask[i] ? g[i] : 0.0f;
}

/* Patches of one sample x [c, h, w]: row (ci, ky, kx) of col [c kh kw,
 * oh ow] holds, for each output pixel, the input it meets under that
 * kernel tap (0 in the padding).  Rows are ld floats apart: a chunk's
 * samples lie side by side. */
static void im2col(const dlt_conv *s, const float *x, float *col, size_t ld,
		   const int32_t *masks)
{
	int shifted = conv_is_shifted(s), taps = s->kh * s->kw;
	size_t r = 0;
	for (int ci = 0; ci < s->c; ci++) {
		const float *plane = x + (size_t)ci * s->h * s->w;
		for (int ky = 0; ky < s->kh; ky++) {
			for (int kx = 0; kx < s->kw; kx++, r++) {
				int off = kx * s->dw - s->pw, lo, hi;
				if (masks) {
					im2col_masked_avx2(s, plane, col + r * ld, ky, kx,
							   masks + (size_t)(r % taps) * s->oh * s->ow);
					continue;
				}
				if (shifted) {
					im2col_shifted(s, plane, col + r * ld, ky, kx);
					continue;
				}
				conv_span(s->ow, s->w, s->sw, s->pw, kx * s->dw, &lo, &hi);
				for (int oy = 0; oy < s->oh; oy++) {
					float *out = col + r * ld + (size_t)oy * s->ow;
					int iy = oy * s->sh - s->ph + ky * s->dh;
					const float *in;
					if (iy < 0 || iy >= s->h) {
						memset(out, 0, s->ow * sizeof(*out));
						continue;
					}
					in = plane + (size_t)iy * s->w;
					memset(out, 0, lo * sizeof(*out));
					if (s->sw == 1)
						memcpy(out + lo, in + lo + off,
						       (hi - lo) * sizeof(*out));
					else
						for (int ox = lo; ox < hi; ox++)
							out[ox] = in[ox * s->sw + off];
					memset(out + hi, 0, (s->ow - hi) * sizeof(*out));
				}
			}
		}
	}
}

/* bf16 where the GEMM has bf16 dot products and the patches are shifted
 * rows (conv_masks): im2col in bf16 words (x holds bf16 values), which
 * the GEMM takes as they are (DLT_B_HALF) where it would otherwise pack
 * pairs out of floats: half the bytes written, and no conversion.  With
 * AVX-512 (every CPU with bf16 dot products has F, BW and VL). */
static int im2col16_on(int prec, const int32_t *masks)
{
	return masks && prec == DLT_PREC_BF16 && dlt_cpu_gemm_bf16_dots() &&
	       __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
}

/* The operand at element at of buf, which holds floats or, half, bf16
 * words: the GEMM's pointer (DLT_A_HALF, DLT_B_HALF cast it back) */
static const float *of_rows(const float *buf, int half, size_t at)
{
	return half ? (const float *)((const uint16_t *)buf + at) : buf + at;
}

/* im2col's masked rows in words: a tap's shift and mask found once for
 * all channels; each float's upper half (x holds bf16 values), 16 pixels
 * at a time, a load only where the mask lets one (the rest read nothing,
 * inside the plane's memory or not) */
__attribute__((target("avx512f,avx512bw,avx512vl")))
static void im2col16(const dlt_conv *s, const float *x, uint16_t *col, size_t ld,
		     const int32_t *masks)
{
	int taps = s->kh * s->kw;
	long p = (long)s->oh * s->ow, hw = (long)s->h * s->w;
	for (int k = 0; k < taps; k++) {
		conv_shift t = conv_shifted(s, k / s->kw, k % s->kw);
		const int32_t *mask = masks + (size_t)k * p;
		long i0, i1, base = conv_loadable(s, &t, &i0, &i1);
		for (int ci = 0; ci < s->c; ci++) {
			const int32_t *plane = (const int32_t *)(x + ci * hw) + base;
			uint16_t *out = col + ((size_t)ci * taps + k) * ld;
			for (long i = 0; i < p; i += 16) {
				__mmask16 tail = p - i >= 16 ? 0xffff : (__mmask16)((1u << (p - i)) - 1);
				__m512i m = _mm512_maskz_loadu_epi32(tail, mask + i);
				__m512i v = _mm512_maskz_loadu_epi32(
					_mm512_mask_test_epi32_mask(tail, m, m), plane + i);
				_mm256_mask_storeu_epi16(out + i, tail,
							 _mm512_cvtepi32_epi16(_mm512_srli_epi32(v, 16)));
			}
		}
	}
}

/* The patches of a chunk's samples n0 .. n0 + ns side by side in col
 * (rows ld apart): floats, or (half: im2col16_on) bf16 words */
static void chunk_patches(const dlt_conv *s, const float *x, int n0, int ns, float *col,
			  size_t ld, const int32_t *masks, int half)
{
	size_t p = (size_t)s->oh * s->ow;
	for (int j = 0; j < ns; j++) {
		const float *xj = x + (size_t)(n0 + j) * s->c * s->h * s->w;
		if (half)
			im2col16(s, xj, (uint16_t *)col + (size_t)j * p, ld, masks);
		else
			im2col(s, xj, col + (size_t)j * p, ld, masks);
	}
}

/* The adjoint of im2col: dx [c, h, w] = the sum of the patches' gradients
 * over the taps that read each input, in a fixed order.  col is scratch. */
static void col2im(const dlt_conv *s, float *col, size_t ld, float *dx, const int32_t *masks)
{
	int shifted = conv_is_shifted(s), taps = s->kh * s->kw;
	size_t r = 0;
	memset(dx, 0, (size_t)s->c * s->h * s->w * sizeof(*dx));
	for (int ci = 0; ci < s->c; ci++) {
		float *plane = dx + (size_t)ci * s->h * s->w;
		for (int ky = 0; ky < s->kh; ky++) {
			for (int kx = 0; kx < s->kw; kx++, r++) {
				int off = kx * s->dw - s->pw, lo, hi;
				if (masks) {
					col2im_masked_avx2(s, col + r * ld, plane, ky, kx,
							   masks + (size_t)(r % taps) * s->oh * s->ow);
					continue;
				}
				if (shifted) {
					col2im_shifted(s, col + r * ld, plane, ky, kx);
					continue;
				}
				conv_span(s->ow, s->w, s->sw, s->pw, kx * s->dw, &lo, &hi);
				for (int oy = 0; oy < s->oh; oy++) {
					const float *g = col + r * ld + (size_t)oy * s->ow;
					int iy = oy * s->sh - s->ph + ky * s->dh;
					float *in;
					if (iy < 0 || iy >= s->h)
						continue;
					in = plane + (size_t)iy * s->w;
					if (s->sw == 1) {
						#pragma omp simd
						for (int ox = lo; ox < hi; ox++)
							in[ox + off] += g[ox];
					} else {
						for (int ox = lo; ox < hi; ox++)
							in[ox * s->sw + off] += g[ox];
					}
				}
			}
		}
	}
}

/* ---- Winograd F(2x2, 3x3): 3x3 convolutions of stride 1, padding 1 ----
 *
 * Each 2x2 block of output (a tile) comes from the 4x4 input around it:
 * Y = A^T [(G g G^T) . (B^T d B)] A (Lavin and Gray 2015), 16 products a
 * tile and channel pair where the direct sum takes 36.  Over all channels
 * the products are 16 GEMMs, one per point xi of the 4x4 transform:
 * M[xi] = U[xi] V[xi], U[xi] [cout, cin] the transformed kernels, V[xi]
 * [cin, tiles] the transformed inputs: 2.25 times fewer multiply-adds than
 * im2col and GEMM, and no im2col.  The forward runs so, and so does dx,
 * which is the convolution of dy with the kernel flipped and its in and
 * out channels swapped.  With AVX2; for fp16 too, and bf16 where the GEMM
 * has no bf16 dot products (conv_is_wino), on the rounded copies of x, w
 * and dy (conv_forward): the transforms' arithmetic is f32's, as the
 * GEMM's sums are.
 *
 * Tiles go in blocks of whole tile rows (a sample's row of tw tiles), as
 * many as make about a multiple of 16 tiles (the micro-kernel's NR); the
 * transforms run on 8 tiles of a row at once.  Each output is computed the
 * same whatever the block and thread: the same bits on any thread count.
 * The sums differ from the direct ones by rounding only; the tests hold
 * both to the reference. */

/* Floats of dW summed at a time */
#define DW_BLOCK 256

/* Whether the Winograd path runs for s at prec: not for bf16 where the
 * GEMM has bf16 dot products, whose im2col products (2.25 times as many,
 * at twice the rate, of the rounded values themselves) beat Winograd's
 * f32 ones: the bench CNN's step 1.09 times as fast */
static int conv_is_wino(int prec, const dlt_conv *s)
{
	if (prec == DLT_PREC_BF16 && dlt_cpu_gemm_bf16_dots())
		return 0;
	/* in and out channels are the GEMMs' K: too few and they are all edge */
	return s->c >= 16 && s->k >= 16 && s->kh == 3 && s->kw == 3 &&
	       s->sh == 1 && s->sw == 1 &&
	       s->ph == 1 && s->pw == 1 && s->dh == 1 && s->dw == 1 && s->groups == 1 &&
	       dlt_cpu_gemm_kind() != DLT_GEMM_OPENBLAS && __builtin_cpu_supports("avx2") &&
	       __builtin_cpu_supports("fma");
}

typedef struct wino_plan {
	int th, tw;		/* tiles down and across a plane */
	int rows;		/* tile rows a block */
	int ld;			/* floats from one V or M row to the next: a block's
				 * tiles and 8 of room for a row's spill */
	int cmax;		/* the larger channel count: V and M are sized by it */
} wino_plan;

/* Tiles a block, at most: the forward's and dx's GEMMs (112 for the
 * CNN's 7 tiles a row), whose V and M then sit nearer L2, measured faster
 * now that the GEMM reads V in place; dW's dots (224), whose every block
 * is 16 k c more partial sums to add up. */
enum { WINO_CONV_TILES = 128, WINO_DW_TILES = 256 };

static wino_plan wino_plan_of(const dlt_conv *s, int tiles)
{
	wino_plan p;
	int g = 16;
	p.th = (s->h + 1) / 2;
	p.tw = (s->w + 1) / 2;
	while (p.tw % g)
		g /= 2;
	p.rows = 16 / g;	/* rows tw = a multiple of 16 */
	while (p.rows * p.tw * 2 <= tiles)
		p.rows *= 2;
	p.ld = p.rows * p.tw + 8;
	p.cmax = s->c > s->k ? s->c : s->k;
	return p;
}

/* A thread's scratch: V then M, [16, cmax, ld] each, each xi's matrix
 * a line more than its size from the next (wino_xi_stride) */
static size_t wino_scratch(const wino_plan *p)
{
	return 2 * 16 * ((size_t)p->cmax * p->ld + DLT_GEMM_NR_MAX);
}

/* Floats from one xi's matrix of c rows to the next: two lines more than
 * its size, so that the transforms' 16 streams, one a xi, do not fall on
 * the same few sets of L1 as they would at a multiple of 4 KiB apart,
 * and so that the GEMM's reads past a last row's tiles stay in V */
static size_t wino_xi_stride(const wino_plan *p, int c)
{
	return (size_t)c * p->ld + DLT_GEMM_NR_MAX;
}

/* Floats of one xi's kernels packed for the GEMM, cout x cin */
static size_t wino_packed(int cout, int cin)
{
	return (dlt_cpu_gemm_packed_floats(cout, cin) + 15) & ~(size_t)15;
}

/* U [16, cout, cin] from w [cout, cin, 3, 3] (or, flip, from w [cin,
 * cout, 3, 3] with each 3x3 reversed: dx's), then each xi's packed for
 * dlt_cpu_gemm_packed into up, wino_packed floats apart */
static void wino_kernels(const float *w, int cout, int cin, int flip, float *u, float *up)
{
	for (int o = 0; o < cout; o++) {
		for (int i = 0; i < cin; i++) {
			const float *g0 = flip ? w + ((size_t)i * cout + o) * 9 : w + ((size_t)o * cin + i) * 9;
			float g[9], q[4][3], t[4][4];
			for (int r = 0; r < 9; r++)
				g[r] = flip ? g0[8 - r] : g0[r];
			for (int c = 0; c < 3; c++) {
				q[0][c] = g[c];
				q[1][c] = 0.5f * (g[c] + g[3 + c] + g[6 + c]);
				q[2][c] = 0.5f * (g[c] - g[3 + c] + g[6 + c]);
				q[3][c] = g[6 + c];
			}
			for (int r = 0; r < 4; r++) {
				t[r][0] = q[r][0];
				t[r][1] = 0.5f * (q[r][0] + q[r][1] + q[r][2]);
				t[r][2] = 0.5f * (q[r][0] - q[r][1] + q[r][2]);
				t[r][3] = q[r][2];
			}
			for (int xi = 0; xi < 16; xi++)
				u[((size_t)xi * cout + o) * cin + i] = t[xi / 4][xi % 4];
		}
	}
	for (int xi = 0; xi < 16; xi++)
		dlt_cpu_gemm_pack(cout, cin, u + (size_t)xi * cout * cin, cin,
				  up + xi * wino_packed(cout, cin));
}

/* The first n (0 .. 8) floats of v to p */
__attribute__((target("avx2"), always_inline))
static inline void store_part(float *p, __m256 v, int n)
{
	__m128 x = _mm256_castps256_ps128(v);
	if (n >= 8) {
		_mm256_storeu_ps(p, v);
		return;
	}
	if (n >= 4) {
		_mm_storeu_ps(p, x);
		x = _mm256_extractf128_ps(v, 1);
		p += 4;
		n -= 4;
	}
	if (n >= 2) {
		_mm_storel_pi((__m64 *)p, x);
		x = _mm_movehl_ps(x, x);
		p += 2;
		n -= 2;
	}
	if (n)
		_mm_store_ss(p, x);
}

/* V's columns for tile row ty of a plane [h, w] (B^T d B, d the 4x4
 * input from row 2 ty - 1, column 2 tx - 1, zero outside), 8 tiles at a
 * time, all in registers; V's rows are vs floats apart per xi, and up to 7
 * floats past the row's tw are written (the next row's, or the block's
 * room).  Columns outside the row are and-ed away; a read that would
 * leave the tensor [lo, hi) is a masked load, which does not touch them. */
__attribute__((target("avx2,fma")))
static void wino_in_row(const float *plane, int h, int w, int tw, int ty, float *v, size_t vs,
			const float *lo, const float *hi)
{
	const float *rows[4];
	const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
	const __m256i rot = _mm256_setr_epi32(1, 2, 3, 4, 5, 6, 7, 0);
	for (int i = 0; i < 4; i++) {
		int y = 2 * ty - 1 + i;
		rows[i] = y >= 0 && y < h ? plane + (size_t)y * w : NULL;
	}
	for (int tx = 0; tx < tw; tx += 8) {
		__m256 t[4][3];
		#pragma GCC unroll 3
		for (int c = 0; c < 3; c++) {
			int c0 = 2 * tx - 1 + 8 * c;
			__m256i col = _mm256_add_epi32(_mm256_set1_epi32(c0), lane);
			__m256i in = _mm256_andnot_si256(
				_mm256_cmpgt_epi32(_mm256_setzero_si256(), col),
				_mm256_cmpgt_epi32(_mm256_set1_epi32(w), col));
			__m256 d[4];
			#pragma GCC unroll 4
			for (int i = 0; i < 4; i++) {
				const float *at = rows[i] ? rows[i] + c0 : NULL;
				if (!at)
					d[i] = _mm256_setzero_ps();
				else if (at >= lo && at + 8 <= hi)
					d[i] = _mm256_and_ps(_mm256_loadu_ps(at), _mm256_castsi256_ps(in));
				else
					d[i] = _mm256_maskload_ps(at, in);
			}
			t[0][c] = _mm256_sub_ps(d[0], d[2]);
			t[1][c] = _mm256_add_ps(d[1], d[2]);
			t[2][c] = _mm256_sub_ps(d[2], d[1]);
			t[3][c] = _mm256_sub_ps(d[1], d[3]);
		}
		#pragma GCC unroll 4
		for (int i = 0; i < 4; i++) {
			__m256 a = t[i][0], b = t[i][1], c = t[i][2];
			/* e = columns 0, 2 .. 14, o = 1 .. 15, e2 = 2 .. 16, o3 = 3 .. 17 */
			__m256 e = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(
				_mm256_shuffle_ps(a, b, 0x88)), 0xd8));
			__m256 o = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(
				_mm256_shuffle_ps(a, b, 0xdd)), 0xd8));
			__m256 e2 = _mm256_blend_ps(_mm256_permutevar8x32_ps(e, rot),
						    _mm256_permutevar8x32_ps(c, _mm256_setzero_si256()),
						    0x80);
			__m256 o3 = _mm256_blend_ps(_mm256_permutevar8x32_ps(o, rot),
						    _mm256_permutevar8x32_ps(c, _mm256_set1_epi32(1)),
						    0x80);
			_mm256_storeu_ps(v + (4 * i + 0) * vs + tx, _mm256_sub_ps(e, e2));
			_mm256_storeu_ps(v + (4 * i + 1) * vs + tx, _mm256_add_ps(o, e2));
			_mm256_storeu_ps(v + (4 * i + 2) * vs + tx, _mm256_sub_ps(e2, o));
			_mm256_storeu_ps(v + (4 * i + 3) * vs + tx, _mm256_sub_ps(o, o3));
		}
	}
}

/* Tile row ty of output plane [h, w] from M's columns (A^T m A), then
 * act(+ bias) as conv_bias_act computes it where add.  pool (2x2, h and
 * w even): each tile is a window, pooled into plane [h / 2, w / 2] and
 * pa, its argmax, as dlt_cpu_maxpool_plane pools. */
__attribute__((target("avx2,fma")))
static void wino_out_row(const float *m, size_t ms, int h, int w, int tw, int ty, float *plane,
			 int add, float bias, int act, float slope, const dlt_pool *pool,
			 int32_t *pa)
{
	__m256 bv = _mm256_set1_ps(bias);
	int nrows = h - 2 * ty < 2 ? h - 2 * ty : 2;
	for (int tx = 0; tx < tw; tx += 8) {
		/* straight-line, so that it all stays in registers */
		const float *q = m + tx;
#define WX(i, j) _mm256_loadu_ps(q + (4 * (i) + (j)) * ms)
		__m256 s00 = _mm256_add_ps(_mm256_add_ps(WX(0, 0), WX(1, 0)), WX(2, 0));
		__m256 s01 = _mm256_add_ps(_mm256_add_ps(WX(0, 1), WX(1, 1)), WX(2, 1));
		__m256 s02 = _mm256_add_ps(_mm256_add_ps(WX(0, 2), WX(1, 2)), WX(2, 2));
		__m256 s03 = _mm256_add_ps(_mm256_add_ps(WX(0, 3), WX(1, 3)), WX(2, 3));
		__m256 s10 = _mm256_sub_ps(_mm256_sub_ps(WX(1, 0), WX(2, 0)), WX(3, 0));
		__m256 s11 = _mm256_sub_ps(_mm256_sub_ps(WX(1, 1), WX(2, 1)), WX(3, 1));
		__m256 s12 = _mm256_sub_ps(_mm256_sub_ps(WX(1, 2), WX(2, 2)), WX(3, 2));
		__m256 s13 = _mm256_sub_ps(_mm256_sub_ps(WX(1, 3), WX(2, 3)), WX(3, 3));
#undef WX
		__m256 y0 = _mm256_add_ps(_mm256_add_ps(s00, s01), s02);
		__m256 y1 = _mm256_sub_ps(_mm256_sub_ps(s01, s02), s03);
		__m256 y2 = _mm256_add_ps(_mm256_add_ps(s10, s11), s12);
		__m256 y3 = _mm256_sub_ps(_mm256_sub_ps(s11, s12), s13);
		if (add) {
			y0 = _mm256_add_ps(y0, bv);
			y1 = _mm256_add_ps(y1, bv);
			y2 = _mm256_add_ps(y2, bv);
			y3 = _mm256_add_ps(y3, bv);
		}
		if (act == DLT_ACT_RELU) {
			__m256 z = _mm256_setzero_ps();
			y0 = _mm256_andnot_ps(_mm256_cmp_ps(y0, z, _CMP_LT_OQ), y0);
			y1 = _mm256_andnot_ps(_mm256_cmp_ps(y1, z, _CMP_LT_OQ), y1);
			y2 = _mm256_andnot_ps(_mm256_cmp_ps(y2, z, _CMP_LT_OQ), y2);
			y3 = _mm256_andnot_ps(_mm256_cmp_ps(y3, z, _CMP_LT_OQ), y3);
		}
		if (pool) {
			__m256i at;
			__m256 best = dlt_max2x2_avx2(pool, y0, y1, y2, y3, 2 * ty * w + 2 * tx, w,
						      &at);
			int n = tw - tx < 8 ? tw - tx : 8;
			store_part(plane + (size_t)ty * tw + tx, best, n);
			store_part((float *)(pa + (size_t)ty * tw + tx), _mm256_castsi256_ps(at), n);
			continue;
		}
		for (int i = 0; i < nrows; i++) {
			__m256 ya = i ? y2 : y0, yb = i ? y3 : y1;
			__m256 lo = _mm256_unpacklo_ps(ya, yb);
			__m256 hi = _mm256_unpackhi_ps(ya, yb);
			float *row = plane + (size_t)(2 * ty + i) * w + 2 * tx;
			int n = w - 2 * tx;
			store_part(row, _mm256_permute2f128_ps(lo, hi, 0x20), n);
			if (n > 8)
				store_part(row + 8, _mm256_permute2f128_ps(lo, hi, 0x31), n - 8);
			if (act != DLT_ACT_NONE && act != DLT_ACT_RELU)
				for (int c = 0; c < n && c < 16; c++)
					row[c] = dlt_act(row[c], act, slope);
		}
	}
}

typedef void wino_row_fn(const float *plane, int h, int w, int tw, int ty, float *v, size_t vs,
			 const float *lo, const float *hi);

/* The tiles of tile rows [r0, r0 + nr) of x [n, c, h, w], transformed by
 * row (wino_in_row, wino_dy_row), into v: channel ci at v + ci * p->ld,
 * vs floats per xi.  A sample's rows at a time, so that its planes are
 * read and written in the order they lie in memory. */
static void wino_gather(const dlt_conv *s, const wino_plan *p, wino_row_fn *row, const float *x,
			int c, int r0, int nr, float *v, size_t vs)
{
	size_t hw = (size_t)s->h * s->w;

	for (int r = 0; r < nr;) {
		int n = (r0 + r) / p->th, ty0 = (r0 + r) % p->th;
		int rows = p->th - ty0 < nr - r ? p->th - ty0 : nr - r;
		for (int ci = 0; ci < c; ci++)
			for (int j = 0; j < rows; j++)
				row(x + ((size_t)n * c + ci) * hw, s->h, s->w, p->tw, ty0 + j,
				    v + (size_t)ci * p->ld + (r + j) * p->tw, vs, x,
				    x + (size_t)s->n * c * hw);
		r += rows;
	}
}

/* out [n, cout, h, w] = the 3x3 convolution (padding 1) of in [n, cin,
 * h, w] whose kernels transformed and packed are up (wino_kernels), then
 * act(+ b) (add: the bias, 0 without b, is added as conv_bias_act does) */
static void wino_conv(const dlt_conv *s, const wino_plan *p, int cin, int cout, const float *in,
		      const float *up, const float *b, int add, int act, float slope, float *out,
		      const dlt_pool *pool, int32_t *arg, float *work, size_t slot, int slots)
{
	int trows = s->n * p->th, blocks = (trows + p->rows - 1) / p->rows;
	int threads = omp_get_max_threads() < slots ? omp_get_max_threads() : slots;
	size_t hw = (size_t)s->h * s->w, vs = wino_xi_stride(p, cin), ms = wino_xi_stride(p, cout);

	#pragma omp parallel num_threads(blocks < threads ? blocks : threads)
	{
		float *v = work + omp_get_thread_num() * slot, *m = v + 16 * wino_xi_stride(p, p->cmax);
		#pragma omp for schedule(dynamic)
		for (int blk = 0; blk < blocks; blk++) {
			int r0 = blk * p->rows, nr = trows - r0 < p->rows ? trows - r0 : p->rows;
			int nt = nr * p->tw;
			wino_gather(s, p, wino_in_row, in, cin, r0, nr, v, vs);
			for (int xi = 0; xi < 16; xi++)
				dlt_cpu_gemm_packed(cout, nt, cin, up + xi * wino_packed(cout, cin),
						    v + xi * vs, p->ld, m + xi * ms, p->ld);
			for (int r = 0; r < nr;) {
				int n = (r0 + r) / p->th, ty0 = (r0 + r) % p->th;
				int m_rows = p->th - ty0 < nr - r ? p->th - ty0 : nr - r;
				for (int co = 0; co < cout; co++) {
					size_t at = ((size_t)n * cout + co) * (pool ? hw / 4 : hw);
					for (int j = 0; j < m_rows; j++)
						wino_out_row(m + (size_t)co * p->ld + (r + j) * p->tw, ms,
							     s->h, s->w, p->tw, ty0 + j, out + at, add,
							     add && b ? b[co] : 0.0f, act, slope, pool,
							     pool ? arg + at : NULL);
				}
				r += m_rows;
			}
		}
	}
}

/* E's columns for tile row ty of dy's plane [h, w]: A dY A^T, dY the 2x2
 * block of dy at row 2 ty, column 2 tx (zero outside), A = [1 0; 1 1;
 * 1 -1; 0 -1]: what a tile's 16 products pass back to them (the adjoint
 * of wino_out_row without its activation).  8 tiles at a time; as
 * wino_in_row, up to 7 floats past the row's tw are written. */
__attribute__((target("avx2,fma")))
static void wino_dy_row(const float *plane, int h, int w, int tw, int ty, float *e, size_t es,
			const float *lo, const float *hi)
{
	const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
	for (int tx = 0; tx < tw; tx += 8) {
		__m256 a[2], b[2];
		#pragma GCC unroll 2
		for (int i = 0; i < 2; i++) {
			__m256 v[2];
			int y = 2 * ty + i;
			#pragma GCC unroll 2
			for (int c = 0; c < 2; c++) {
				int c0 = 2 * tx + 8 * c;
				const float *at = plane + (size_t)y * w + c0;
				__m256i col = _mm256_add_epi32(_mm256_set1_epi32(c0), lane);
				__m256i in = _mm256_cmpgt_epi32(_mm256_set1_epi32(w), col);
				if (y >= h)
					v[c] = _mm256_setzero_ps();
				else if (at >= lo && at + 8 <= hi)
					v[c] = _mm256_and_ps(_mm256_loadu_ps(at), _mm256_castsi256_ps(in));
				else
					v[c] = _mm256_maskload_ps(at, in);
			}
			a[i] = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(
				_mm256_shuffle_ps(v[0], v[1], 0x88)), 0xd8));
			b[i] = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(
				_mm256_shuffle_ps(v[0], v[1], 0xdd)), 0xd8));
		}
		{
			__m256 z = _mm256_setzero_ps();
			/* rows: P[i] = (a, a + b, a - b, -b) */
			__m256 p00 = a[0], p01 = _mm256_add_ps(a[0], b[0]);
			__m256 p02 = _mm256_sub_ps(a[0], b[0]), p03 = _mm256_sub_ps(z, b[0]);
			__m256 p10 = a[1], p11 = _mm256_add_ps(a[1], b[1]);
			__m256 p12 = _mm256_sub_ps(a[1], b[1]), p13 = _mm256_sub_ps(z, b[1]);
			/* columns: E[0] = P0, E[1] = P0 + P1, E[2] = P0 - P1, E[3] = -P1 */
			float *q = e + tx;
			_mm256_storeu_ps(q + 0 * es, p00);
			_mm256_storeu_ps(q + 1 * es, p01);
			_mm256_storeu_ps(q + 2 * es, p02);
			_mm256_storeu_ps(q + 3 * es, p03);
			_mm256_storeu_ps(q + 4 * es, _mm256_add_ps(p00, p10));
			_mm256_storeu_ps(q + 5 * es, _mm256_add_ps(p01, p11));
			_mm256_storeu_ps(q + 6 * es, _mm256_add_ps(p02, p12));
			_mm256_storeu_ps(q + 7 * es, _mm256_add_ps(p03, p13));
			_mm256_storeu_ps(q + 8 * es, _mm256_sub_ps(p00, p10));
			_mm256_storeu_ps(q + 9 * es, _mm256_sub_ps(p01, p11));
			_mm256_storeu_ps(q + 10 * es, _mm256_sub_ps(p02, p12));
			_mm256_storeu_ps(q + 11 * es, _mm256_sub_ps(p03, p13));
			_mm256_storeu_ps(q + 12 * es, _mm256_sub_ps(z, p10));
			_mm256_storeu_ps(q + 13 * es, _mm256_sub_ps(z, p11));
			_mm256_storeu_ps(q + 14 * es, _mm256_sub_ps(z, p12));
			_mm256_storeu_ps(q + 15 * es, _mm256_sub_ps(z, p13));
		}
	}
}

/* The sum of the 8 lanes of a, always in this order */
__attribute__((target("avx2"), always_inline))
static inline float hsum8(__m256 a)
{
	__m128 x = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
	x = _mm_add_ps(x, _mm_movehl_ps(x, x));
	return _mm_cvtss_f32(_mm_add_ss(x, _mm_movehdup_ps(x)));
}

/* The dot products of rows e[0 .. ne) with rows v[0 .. nv) (ne <= 4,
 * nv <= 3; rows ld apart, nt floats long, a multiple of 8) into z[r c + j]:
 * 8 lanes of partial sums each, added up by hsum8. */
__attribute__((target("avx2,fma"), always_inline))
static inline void dots(const float *e, const float *v, size_t ld, int nt, int ne, int nv,
			float *z, int c)
{
	__m256 acc[4][3];
	for (int r = 0; r < 4; r++)
		for (int j = 0; j < 3; j++)
			acc[r][j] = _mm256_setzero_ps();
	for (int t = 0; t < nt; t += 8) {
		__m256 b[3];
		#pragma GCC unroll 3
		for (int j = 0; j < nv; j++)
			b[j] = _mm256_loadu_ps(v + j * ld + t);
		#pragma GCC unroll 4
		for (int r = 0; r < ne; r++) {
			__m256 a = _mm256_loadu_ps(e + r * ld + t);
			#pragma GCC unroll 3
			for (int j = 0; j < nv; j++)
				acc[r][j] = _mm256_fmadd_ps(a, b[j], acc[r][j]);
		}
	}
	for (int r = 0; r < ne; r++)
		for (int j = 0; j < nv; j++)
			z[r * c + j] = hsum8(acc[r][j]);
}

/* z [k, c] = E V^T, E [k, nt] and V [c, nt] rows ld apart, nt a multiple
 * of 8: dW's products of a block, as dot products along its tiles.  A
 * GEMM would pack (transpose) E and V first, which costs about as much as
 * its multiply-adds here, where K (the tiles) is long and M and N (the
 * channels) are short.  4 x 3 dots at a time, from registers (12 sums, 3
 * rows of V, a row of E); the edges fewer.  Each z is the same sum
 * however the block and threads are cut: the same bits. */
__attribute__((target("avx2,fma")))
static void wino_dots(const float *e, const float *v, size_t ld, int k, int c, int nt, float *z)
{
	for (int o = 0; o < k; o += 4) {
		int ne = k - o < 4 ? k - o : 4;
		for (int i = 0; i < c; i += 3) {
			int nv = c - i < 3 ? c - i : 3;
			const float *eo = e + (size_t)o * ld, *vi = v + (size_t)i * ld;
			float *zo = z + (size_t)o * c + i;
			if (ne == 4 && nv == 3)
				dots(eo, vi, ld, nt, 4, 3, zo, c);
			else
				dots(eo, vi, ld, nt, ne, nv, zo, c);
		}
	}
}

/* dW by Winograd: Z[xi] = sum over tiles of E[xi] V[xi]^T (E from dy,
 * V from x, as the forward's) by wino_dots; each block's Z to its own
 * part, the parts summed in block order (the same bits on any thread
 * count), then dw = G^T Z G. */
static void wino_dw(const dlt_conv *s, const wino_plan *p, const float *x, const float *dy,
		    float *dw, float *work, size_t slot, int slots, float *parts)
{
	int trows = s->n * p->th, blocks = (trows + p->rows - 1) / p->rows;
	int threads = omp_get_max_threads() < slots ? omp_get_max_threads() : slots;
	int c = s->c, k = s->k;
	size_t vs = wino_xi_stride(p, c), es = wino_xi_stride(p, k);
	size_t zn = 16 * (size_t)k * c;

	#pragma omp parallel num_threads(blocks < threads ? blocks : threads)
	{
		float *v = work + omp_get_thread_num() * slot, *e = v + 16 * wino_xi_stride(p, p->cmax);
		#pragma omp for schedule(dynamic)
		for (int blk = 0; blk < blocks; blk++) {
			int r0 = blk * p->rows, nr = trows - r0 < p->rows ? trows - r0 : p->rows;
			int nt = nr * p->tw, nt8 = (nt + 7) / 8 * 8;
			wino_gather(s, p, wino_in_row, x, c, r0, nr, v, vs);
			wino_gather(s, p, wino_dy_row, dy, k, r0, nr, e, es);
			/* the rows' ends past the tiles (what the transforms spilled
			 * there) out of the dots */
			for (int xi = 0; xi < 16; xi++) {
				for (int ci = 0; ci < c && nt8 > nt; ci++)
					memset(v + xi * vs + (size_t)ci * p->ld + nt, 0,
					       (nt8 - nt) * sizeof(float));
				for (int ko = 0; ko < k && nt8 > nt; ko++)
					memset(e + xi * es + (size_t)ko * p->ld + nt, 0,
					       (nt8 - nt) * sizeof(float));
				wino_dots(e + xi * es, v + xi * vs, p->ld, k, c, nt8,
					  parts + blk * zn + (size_t)xi * k * c);
			}
		}
	}
	/* the parts summed in block order, a run of 256 at a time, into the
	 * first */
	#pragma omp parallel for schedule(static)
	for (size_t j0 = 0; j0 < zn; j0 += DW_BLOCK) {
		double acc[DW_BLOCK] = { 0 };
		size_t m = zn - j0 < DW_BLOCK ? zn - j0 : DW_BLOCK;
		for (int blk = 0; blk < blocks; blk++) {
			const float *part = parts + blk * zn + j0;
			#pragma omp simd
			for (size_t j = 0; j < m; j++)
				acc[j] += part[j];
		}
		for (size_t j = 0; j < m; j++)
			parts[j0 + j] = (float)acc[j];
	}
	#pragma omp parallel for schedule(static)
	for (int o = 0; o < k; o++) {
		for (int i = 0; i < c; i++) {
			float zf[16], t[3][4];
			for (int xi = 0; xi < 16; xi++)
				zf[xi] = parts[((size_t)xi * k + o) * c + i];
			/* G^T Z G, G^T = [1 .5 .5 0; 0 .5 -.5 0; 0 .5 .5 1] */
			for (int j = 0; j < 4; j++) {
				t[0][j] = zf[j] + 0.5f * (zf[4 + j] + zf[8 + j]);
				t[1][j] = 0.5f * (zf[4 + j] - zf[8 + j]);
				t[2][j] = 0.5f * (zf[4 + j] + zf[8 + j]) + zf[12 + j];
			}
			for (int r = 0; r < 3; r++) {
				float *g = dw + ((size_t)o * c + i) * 9 + r * 3;
				g[0] = t[r][0] + 0.5f * (t[r][1] + t[r][2]);
				g[1] = 0.5f * (t[r][1] - t[r][2]);
				g[2] = 0.5f * (t[r][1] + t[r][2]) + t[r][3];
			}
		}
	}
}

/* Samples per task: sums of dW in a fixed order; small enough that a
 * training batch gives every thread work. */
#define CONV_CHUNK 4
/* Where the workspace's parts lie, in floats: slots (col, ybuf or dybuf,
 * the taps' masks), then each chunk's partial dW, then each chunk's partial db in
 * doubles.  The Winograd path uses no chunk partials: its kernels U and
 * dW's partial sums (one after the other, never both at once) take
 * their place. */
typedef struct conv_plan {
	int kg, kk, p, chunks, slots;
	size_t col, masks, slot, wn, parts, u, up, zparts, dbs, total;
} conv_plan;

static conv_plan conv_plan_of(int prec, const dlt_conv *s)
{
	conv_plan q;
	int procs = omp_get_num_procs();
	size_t region;
	q.kg = s->k / s->groups;
	q.kk = s->c / s->groups * s->kh * s->kw;
	q.p = s->oh * s->ow;
	q.chunks = (s->n + CONV_CHUNK - 1) / CONV_CHUNK;
	/* the most threads a conv runs on; the machine's processors, so
	 * that the workspace asked for at build time still fits later */
	q.slots = q.chunks < procs ? q.chunks : procs > 0 ? procs : 1;
	q.col = ((size_t)s->c * s->kh * s->kw * CONV_CHUNK * q.p + 15) & ~(size_t)15;
	if (conv_is_wino(prec, s)) {
		/* the Winograd scratch in a slot's col */
		wino_plan wp = wino_plan_of(s, WINO_DW_TILES), wc = wino_plan_of(s, WINO_CONV_TILES);
		size_t need = (wino_scratch(&wp) + 15) & ~(size_t)15;
		if (need < ((wino_scratch(&wc) + 15) & ~(size_t)15))
			need = (wino_scratch(&wc) + 15) & ~(size_t)15;
		if (q.col < need)
			q.col = need;
	}
	q.masks = q.col + (((size_t)s->k * CONV_CHUNK * q.p + 15) & ~(size_t)15);
	q.slot = q.masks + (((size_t)s->kh * s->kw * q.p + 15) & ~(size_t)15);
	q.wn = (size_t)s->k * q.kk;
	q.parts = q.slots * q.slot;
	q.u = q.zparts = q.parts;
	q.up = q.u + 16 * (size_t)s->k * s->c;
	region = q.chunks * q.wn;
	if (conv_is_wino(prec, s)) {
		/* Winograd's kernels, 16 (k c), then packed, each way's */
		size_t fwd = wino_packed(s->k, s->c), bwd = wino_packed(s->c, s->k);
		if (region < q.up - q.u + 16 * (fwd > bwd ? fwd : bwd))
			region = q.up - q.u + 16 * (fwd > bwd ? fwd : bwd);
		/* Winograd dW's partial sums, 16 (k c) a block */
		wino_plan wp = wino_plan_of(s, WINO_DW_TILES);
		int blocks = (s->n * wp.th + wp.rows - 1) / wp.rows;
		if (region < (size_t)blocks * 16 * s->k * s->c)
			region = (size_t)blocks * 16 * s->k * s->c;
	}
	q.dbs = (q.parts + region + 1) & ~(size_t)1;
	q.total = q.dbs + 2 * (size_t)q.chunks * s->k;
	return q;
}

/* bf16 and fp16: x, w and dy (or the pool's dy) are rounded into copies
 * after the plan's workspace, and every path reads the copies: the
 * products are of rounded values, as the GEMM's with prec, and the f32
 * paths (Winograd, the first layer's) run for every precision.  The GEMM
 * path still passes prec on, so that a CPU with bf16 dot products runs
 * them; elsewhere the GEMM's rounding of the copies leaves them as they
 * are.  What holds values of prec already (bf16 and fp16 training rounds
 * every activation and gradient) is read where it is: its copy's pages
 * are then never touched, so they take no memory. */
static size_t round16(size_t floats)
{
	return (floats + 15) & ~(size_t)15;
}

/* from rounded to prec into to, or from itself at f32 or where rounding
 * would not change it */
static const float *rounded(int prec, const float *from, size_t n, float *to)
{
	if (prec == DLT_PREC_F32 || dlt_cpu_is_rounded(from, n, prec))
		return from;
	dlt_cpu_round(from, to, n, prec);
	return to;
}

size_t dlt_cpu_conv_workspace(int prec, const dlt_conv *s)
{
	size_t copies = round16(dlt_conv_x_floats(s)) + round16(dlt_conv_w_floats(s)) +
			dlt_conv_y_floats(s);
	return conv_plan_of(prec, s).total + (prec == DLT_PREC_F32 ? 0 : copies);
}

/* Threads for the chunks: at most the slots */
static int conv_threads(const conv_plan *q)
{
	int t = omp_get_max_threads();
	return t < q->slots ? t : q->slots;
}

/* y = act(ybuf + b) for one output channel's plane of one sample; the
 * same bits in both clones */
__attribute__((target_clones("avx2", "default")))
static void conv_bias_act(float *y, const float *in, float b, int n, int act, float slope)
{
	int i;
	switch (act) {
	case DLT_ACT_RELU:
		#pragma omp simd
		for (i = 0; i < n; i++)
			y[i] = dlt_relu(in[i] + b);
		break;
	case DLT_ACT_LEAKY_RELU:
		#pragma omp simd
		for (i = 0; i < n; i++)
			y[i] = dlt_leaky_relu(in[i] + b, slope);
		break;
	default:
		for (i = 0; i < n; i++)
			y[i] = dlt_act(in[i] + b, act, slope);
	}
}

/* A first layer's forward, 9 taps on one channel and planes of a
 * multiple of 8 pixels: y = col's 9 rows weighted, straight into y (as a
 * GEMM, K = 9 is all edge and its output one more pass).  The sums are
 * the GEMM's, from 0 by fused multiply-adds in tap order, so the bits are
 * too. */
static int conv_fwd_direct(const dlt_conv *s, const conv_plan *q)
{
	return q->kk == 9 && s->groups == 1 && q->p % 8 == 0 &&
	       __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

#define TAP9(acc, wk, c)                                                           \
	do {                                                                       \
		_Pragma("GCC unroll 9")                                            \
		for (int r = 0; r < 9; r++)                                        \
			acc = _mm256_fmadd_ps(_mm256_broadcast_ss((wk) + r),        \
					      _mm256_loadu_ps((c) + r * ld), acc); \
	} while (0)

/* acc + bias, then the ReLU where relu: conv_bias_act's bits */
__attribute__((target("avx2"), always_inline))
static inline __m256 taps9_out(__m256 acc, float bias, int relu)
{
	__m256 y = _mm256_add_ps(acc, _mm256_set1_ps(bias));
	return relu ? _mm256_andnot_ps(_mm256_cmp_ps(y, _mm256_setzero_ps(), _CMP_LT_OQ), y) : y;
}

/* Whether conv_fwd_taps9_avx2 applies act itself (the others go through
 * conv_bias_act after it) */
static int taps9_acts(int act)
{
	return act == DLT_ACT_NONE || act == DLT_ACT_RELU;
}

/* y's planes k of one sample from its patches col [9, ld], + b (NULL:
 * 0) and act where taps9_acts */
__attribute__((target("avx2,fma")))
static void conv_fwd_taps9_avx2(const dlt_conv *s, const conv_plan *q, const float *w,
				const float *b, int act, const float *col, size_t ld, float *y)
{
	int k = 0, own = taps9_acts(act), relu = own && act == DLT_ACT_RELU;
	for (; k + 2 <= s->k; k += 2) {
		const float *w0 = w + k * 9, *w1 = w0 + 9;
		float *y0 = y + (size_t)k * q->p, *y1 = y0 + q->p;
		float b0 = own && b ? b[k] : 0.0f, b1 = own && b ? b[k + 1] : 0.0f;
		int i = 0;
		for (; i + 32 <= q->p; i += 32) {
			__m256 a[8];
			for (int v = 0; v < 8; v++)
				a[v] = _mm256_setzero_ps();
			#pragma GCC unroll 9
			for (int r = 0; r < 9; r++) {
				__m256 c0 = _mm256_broadcast_ss(w0 + r), c1 = _mm256_broadcast_ss(w1 + r);
				#pragma GCC unroll 4
				for (int v = 0; v < 4; v++) {
					__m256 c = _mm256_loadu_ps(col + r * ld + i + 8 * v);
					a[v] = _mm256_fmadd_ps(c0, c, a[v]);
					a[4 + v] = _mm256_fmadd_ps(c1, c, a[4 + v]);
				}
			}
			for (int v = 0; v < 4; v++) {
				_mm256_storeu_ps(y0 + i + 8 * v, taps9_out(a[v], b0, relu));
				_mm256_storeu_ps(y1 + i + 8 * v, taps9_out(a[4 + v], b1, relu));
			}
		}
		for (; i < q->p; i += 8) {
			__m256 a0 = _mm256_setzero_ps(), a1 = a0;
			TAP9(a0, w0, col + i);
			TAP9(a1, w1, col + i);
			_mm256_storeu_ps(y0 + i, taps9_out(a0, b0, relu));
			_mm256_storeu_ps(y1 + i, taps9_out(a1, b1, relu));
		}
	}
	for (; k < s->k; k++) {
		float bk = own && b ? b[k] : 0.0f;
		for (int i = 0; i < q->p; i += 8) {
			__m256 a0 = _mm256_setzero_ps();
			TAP9(a0, w + k * 9, col + i);
			_mm256_storeu_ps(y + (size_t)k * q->p + i, taps9_out(a0, bk, relu));
		}
	}
}

/* A first layer's 3x3 conv (one channel, stride 1, padding 1) and its
 * 2x2 max pool, as one pass that never writes the conv's planes: each
 * output's 2x2 window is made in registers, 8 windows side by side, and
 * pooled there.  The image is split first into its even and odd columns
 * (c1_split), so that the 8 windows' taps are 8 consecutive floats.  The
 * sums are those of conv_fwd_taps9_avx2, so the bits are too. */
static int c1_width(const dlt_conv *s)
{
	return (s->ow / 2 + 7) / 8 * 8 + 8;	/* and the taps one column on */
}

/* A chunk's samples split (backward; forward needs one) */
static size_t c1_scratch(const dlt_conv *s)
{
	return CONV_CHUNK * 2 * (size_t)(s->h + 2) * c1_width(s);
}

static int conv_pool_c1(const dlt_conv *s, const conv_plan *q, const dlt_pool *p)
{
	return conv_fwd_direct(s, q) && s->c == 1 && s->kh == 3 && s->kw == 3 &&
	       s->sh == 1 && s->sw == 1 && s->ph == 1 && s->pw == 1 && s->dh == 1 && s->dw == 1 &&
	       p && p->kh == 2 && p->kw == 2 && p->sh == 2 && p->sw == 2 && p->ph == 0 &&
	       p->pw == 0 && s->oh % 2 == 0 && s->ow % 2 == 0 && c1_scratch(s) <= q->slot;
}

/* The image x [h, w] zero-padded by one, as planes e then o at eo, of h
 * + 2 rows of ew floats: e's column t is the padded image's 2t (the
 * image's 2t - 1), o's its 2t + 1 */
static void c1_split(const float *x, int h, int w, int ew, float *eo)
{
	float *e = eo, *o = eo + (size_t)(h + 2) * ew;
	memset(eo, 0, 2 * (size_t)(h + 2) * ew * sizeof(float));
	for (int y = 0; y < h; y++)
		for (int c = 0; c < w; c++)
			(c & 1 ? e : o)[(size_t)(y + 1) * ew + (c + 1) / 2] = x[(size_t)y * w + c];
}

/* One sample's pooled planes y [k, oh / 2, ow / 2] and arg from its split
 * image e, o (c1_split); window (i, t) of 8 side by side: its top row's
 * even and odd columns, then its bottom row's (a, b, c, d), each 9 taps:
 * e, o, e one on for the even columns, o, e one on, o one on for the odd.
 * (Two runs of 8 at a time, for more chains of FMAs, spill registers and
 * measured slower.) */
__attribute__((target("avx2,fma")))
static void conv_pool_c1_avx2(const dlt_conv *s, const dlt_pool *p, const float *w,
			      const float *b, int relu, const float *eo, int ew, float *y,
			      int32_t *arg)
{
	int ph = s->oh / 2, pw = s->ow / 2;
	const float *e = eo, *o = eo + (size_t)(s->h + 2) * ew;
	for (int k = 0; k < s->k; k++) {
		__m256 wk[9];
		float bk = b ? b[k] : 0.0f;
		float *yk = y + (size_t)k * ph * pw;
		int32_t *ak = arg + (size_t)k * ph * pw;
		for (int r = 0; r < 9; r++)
			wk[r] = _mm256_broadcast_ss(w + k * 9 + r);
		for (int i = 0; i < ph; i++) {
			for (int t = 0; t < pw; t += 8) {
				__m256 acc[4], best;
				__m256i at;
				int n = pw - t < 8 ? pw - t : 8;
				for (int v = 0; v < 4; v++)
					acc[v] = _mm256_setzero_ps();
				#pragma GCC unroll 3
				for (int ky = 0; ky < 3; ky++) {
					#pragma GCC unroll 2
					for (int a = 0; a < 2; a++) {
						size_t row = (size_t)(2 * i + a + ky) * ew + t;
						__m256 e0 = _mm256_loadu_ps(e + row);
						__m256 o0 = _mm256_loadu_ps(o + row);
						__m256 e1 = _mm256_loadu_ps(e + row + 1);
						__m256 o1 = _mm256_loadu_ps(o + row + 1);
						__m256 *ev = &acc[2 * a], *od = &acc[2 * a + 1];
						*ev = _mm256_fmadd_ps(wk[3 * ky], e0, *ev);
						*ev = _mm256_fmadd_ps(wk[3 * ky + 1], o0, *ev);
						*ev = _mm256_fmadd_ps(wk[3 * ky + 2], e1, *ev);
						*od = _mm256_fmadd_ps(wk[3 * ky], o0, *od);
						*od = _mm256_fmadd_ps(wk[3 * ky + 1], e1, *od);
						*od = _mm256_fmadd_ps(wk[3 * ky + 2], o1, *od);
					}
				}
				best = dlt_max2x2_avx2(p, taps9_out(acc[0], bk, relu),
						       taps9_out(acc[1], bk, relu),
						       taps9_out(acc[2], bk, relu),
						       taps9_out(acc[3], bk, relu), 2 * i * s->ow + 2 * t,
						       s->ow, &at);
				store_part(yk + (size_t)i * pw + t, best, n);
				store_part((float *)(ak + (size_t)i * pw + t), _mm256_castsi256_ps(at), n);
			}
		}
	}
}

static void conv_pool_c1_forward(const dlt_conv *s, const conv_plan *q, const dlt_pool *p,
				 const float *x, const float *w, const float *b, int act,
				 float *y, int32_t *arg, float *work)
{
	size_t out = (size_t)s->k * (s->oh / 2) * (s->ow / 2);
	int ew = c1_width(s);
	#pragma omp parallel num_threads(conv_threads(q))
	{
		float *eo = work + omp_get_thread_num() * q->slot;
		#pragma omp for schedule(static)
		for (int n = 0; n < s->n; n++) {
			c1_split(x + (size_t)n * s->h * s->w, s->h, s->w, ew, eo);
			conv_pool_c1_avx2(s, p, w, b, act == DLT_ACT_RELU, eo, ew, y + n * out,
					  arg + n * out);
		}
	}
}

/* pool: the planes go through ybuf, one sample's at a time, and are
 * pooled from there into y and arg (only on the direct path, see
 * dlt_cpu_conv_pool_fuses) */
static void conv_forward_chunk(int prec, const dlt_conv *s, const conv_plan *q, const float *x,
			       const float *w, const float *b, float *y, int act, float slope,
			       const dlt_pool *pool, int32_t *arg, float *slot,
			       const int32_t *masks, int ch)
{
	int n0 = ch * CONV_CHUNK, ns = s->n - n0 < CONV_CHUNK ? s->n - n0 : CONV_CHUNK;
	size_t ld = (size_t)ns * q->p;
	float *col = slot, *ybuf = slot + q->col;
	int half = im2col16_on(prec, masks) && !conv_fwd_direct(s, q);
	chunk_patches(s, x, n0, ns, col, ld, masks, half);
	if (conv_fwd_direct(s, q)) {
		size_t out = pool ? (size_t)pool->oh * pool->ow : 0;
		for (int j = 0; j < ns; j++) {
			size_t at = (size_t)(n0 + j) * s->k;
			float *yn = pool ? ybuf : y + at * q->p;
			conv_fwd_taps9_avx2(s, q, w, b, act, col + (size_t)j * q->p, ld, yn);
			for (int k = 0; k < s->k; k++) {
				float *plane = yn + (size_t)k * q->p;
				if (!taps9_acts(act))
					conv_bias_act(plane, plane, b ? b[k] : 0.0f, q->p, act,
						      slope);
				if (pool)
					dlt_cpu_maxpool_plane(pool, plane, y + (at + k) * out,
							      arg + (at + k) * out);
			}
		}
		return;
	}
	for (int g = 0; g < s->groups; g++)
		dlt_cpu_sgemm(prec | (half ? DLT_B_HALF : 0), 0, 0, q->kg, (int)ld, q->kk, 1.0f,
			      w + (size_t)g * q->kg * q->kk, q->kk,
			      of_rows(col, half, (size_t)g * q->kk * ld), (int)ld, 0.0f,
			      ybuf + (size_t)g * q->kg * ld, (int)ld);
	/* with a pool, each plane pooled from ybuf as it is made (in cache):
	 * the conv's output is never written */
	for (int j = 0; j < ns; j++)
		for (int k = 0; k < s->k; k++) {
			size_t at = (size_t)(n0 + j) * s->k + k;
			float *plane = ybuf + k * ld + (size_t)j * q->p;
			if (!pool) {
				conv_bias_act(y + at * q->p, plane, b ? b[k] : 0.0f, q->p, act, slope);
				continue;
			}
			conv_bias_act(plane, plane, b ? b[k] : 0.0f, q->p, act, slope);
			dlt_cpu_maxpool_plane(pool, plane, y + at * pool->oh * pool->ow,
					      arg + at * pool->oh * pool->ow);
		}
}

static void conv_forward(int prec, const dlt_conv *s, const float *x, const float *w,
			 const float *b, float *y, int act, float slope, const dlt_pool *pool,
			 int32_t *arg, float *work)
{
	int exact = prec & DLT_CONV_FLAGS;
	conv_plan q = conv_plan_of(prec &= ~DLT_CONV_FLAGS, s);
	float *rx = work + q.total, *rw = rx + round16(dlt_conv_x_floats(s));

	if (!(exact & DLT_X_EXACT))
		x = rounded(prec, x, dlt_conv_x_floats(s), rx);
	w = rounded(prec, w, dlt_conv_w_floats(s), rw);
	if (conv_is_wino(prec, s)) {
		wino_plan wp = wino_plan_of(s, WINO_CONV_TILES);
		wino_kernels(w, s->k, s->c, 0, work + q.u, work + q.up);
		wino_conv(s, &wp, s->c, s->k, x, work + q.up, b, 1, act, slope, y, pool, arg, work,
			  q.slot, q.slots);
		return;
	}
	if (conv_pool_c1(s, &q, pool) && taps9_acts(act)) {
		conv_pool_c1_forward(s, &q, pool, x, w, b, act, y, arg, work);
		return;
	}
	#pragma omp parallel num_threads(conv_threads(&q))
	{
		int t = omp_get_thread_num();
		float *slot = work + t * q.slot;
		const int32_t *masks = conv_masks(s, (int32_t *)(slot + q.masks));
		#pragma omp for schedule(dynamic)
		for (int ch = 0; ch < q.chunks; ch++)
			conv_forward_chunk(prec, s, &q, x, w, b, y, act, slope, pool, arg, slot,
					   masks, ch);
	}
}

void dlt_cpu_conv_forward(int prec, const dlt_conv *s, const float *x, const float *w, const float *b,
			  float *y, int act, float slope, float *work)
{
	conv_forward(prec, s, x, w, b, y, act, slope, NULL, NULL, work);
}

/* to[0, n) = from[0, n) (to NULL: no copy), and their sum in double: 8
 * lanes, added up in a fixed order at the end */
static double copy_sum(const float *from, float *to, int n)
{
	double lane[8] = { 0 }, sum = 0.0;
	for (int i = 0; i < n; i++) {
		if (to)
			to[i] = from[i];
		lane[i % 8] += from[i];
	}
	for (int l = 0; l < 8; l++)
		sum += lane[l];
	return sum;
}

/* The same sums, the same bits; half: to in bf16 words, from holding
 * bf16 values (each word its float's upper half) */
__attribute__((target("avx2")))
static double copy_sum_avx2(const float *from, void *to, int half, int n)
{
	float *tf = half ? NULL : to;
	uint16_t *th = half ? to : NULL;
	__m256d lo = _mm256_setzero_pd(), hi = lo;
	double lane[8], sum = 0.0;
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 v = _mm256_loadu_ps(from + i);
		if (tf)
			_mm256_storeu_ps(tf + i, v);
		if (th) {
			__m256i u = _mm256_srli_epi32(_mm256_castps_si256(v), 16);
			u = _mm256_permute4x64_epi64(_mm256_packus_epi32(u, u), 0x08);
			_mm_storeu_si128((__m128i *)(th + i), _mm256_castsi256_si128(u));
		}
		lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
		hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
	}
	_mm256_storeu_pd(lane, lo);
	_mm256_storeu_pd(lane + 4, hi);
	for (; i < n; i++) {
		if (tf)
			tf[i] = from[i];
		if (th)
			th[i] = (uint16_t)(dlt_f32_bits(from[i]) >> 16);
		lane[i % 8] += from[i];
	}
	for (int l = 0; l < 8; l++)
		sum += lane[l];
	return sum;
}

/* dybuf's row k = the chunk's planes k side by side; db[k] = their sum.
 * half: dybuf in bf16 words (im2col16_on's; dy holds bf16 values) */
static void conv_gather_dy(const dlt_conv *s, const conv_plan *q, const float *dy, int n0,
			   int ns, float *dybuf, int half, double *db)
{
	size_t ld = (size_t)ns * q->p;
	int avx2 = __builtin_cpu_supports("avx2");
	for (int k = 0; k < s->k; k++) {
		double acc = 0.0;
		for (int j = 0; j < ns; j++) {
			const float *from = dy + ((size_t)(n0 + j) * s->k + k) * q->p;
			size_t at = k * ld + (size_t)j * q->p;
			acc += half ? copy_sum_avx2(from, (uint16_t *)dybuf + at, 1, q->p)
			     : avx2 ? copy_sum_avx2(from, dybuf + at, 0, q->p)
				    : copy_sum(from, dybuf + at, q->p);
		}
		db[k] = acc;
	}
}

/* A first layer's dW, 9 taps (a 3x3 kernel on one channel), no dx and
 * planes of a multiple of 8 pixels: as a GEMM, K = 9 is all edge and the
 * gathered dy one more pass over the largest tensor.  Here each channel's
 * planes are read once, straight from dy, into 9 sums of dy col and db's
 * in 8 float lanes, added up in a fixed order at the end.  col is the
 * chunk's patches, [9, ld]. */
static int conv_dw_direct(const dlt_conv *s, const conv_plan *q, const float *dx)
{
	return !dx && q->kk == 9 && s->groups == 1 && q->p % 8 == 0 &&
	       __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

/* The lanes of a added to sum, in lane order: the first layer's dW and
 * db paths' fixed order */
__attribute__((target("avx2"), always_inline))
static inline double lanes_add(double sum, __m256 a)
{
	float lane[8];
	_mm256_storeu_ps(lane, a);
	for (int l = 0; l < 8; l++)
		sum += lane[l];
	return sum;
}

/* A channel's 9 taps' sums from their lanes, in lane order, into part */
__attribute__((target("avx2"), always_inline))
static inline void taps9_sums(const __m256 acc[9], float *part)
{
	for (int r = 0; r < 9; r++) {
		float lane[8], sum = 0.0f;
		_mm256_storeu_ps(lane, acc[r]);
		for (int l = 0; l < 8; l++)
			sum += lane[l];
		part[r] = sum;
	}
}

/* pool: dy is the pool's, each plane of the conv's made from it in buf
 * (p floats) as the pool's backward makes it, and read from there */
__attribute__((target("avx2,fma")))
static void conv_dw_taps9_avx2(const dlt_conv *s, const conv_plan *q, const float *dy, int n0,
			       int ns, const float *col, size_t ld, float *part, double *db,
			       const dlt_pool *pool, const int32_t *arg, float *buf)
{
	size_t out = pool ? (size_t)pool->oh * pool->ow : 0;
	for (int k = 0; k < s->k; k++) {
		__m256 acc[9];
		double dbk = 0.0;
		for (int r = 0; r < 9; r++)
			acc[r] = _mm256_setzero_ps();
		for (int j = 0; j < ns; j++) {
			size_t at = (size_t)(n0 + j) * s->k + k;
			const float *d = dy + at * q->p;
			const float *c = col + (size_t)j * q->p;
			if (pool) {
				dlt_cpu_maxpool_back_plane(pool, dy + at * out, arg + at * out, buf);
				d = buf;
			}
			__m256 plane = _mm256_setzero_ps();
			for (int i = 0; i < q->p; i += 8) {
				__m256 v = _mm256_loadu_ps(d + i);
				plane = _mm256_add_ps(plane, v);
				#pragma GCC unroll 9
				for (int r = 0; r < 9; r++)
					acc[r] = _mm256_fmadd_ps(v, _mm256_loadu_ps(c + r * ld + i),
								 acc[r]);
			}
			dbk = lanes_add(dbk, plane);
		}
		db[k] = dbk;
		taps9_sums(acc, part + k * 9);
	}
}

/* conv_pool_c1's backward: its dW and db from the pool's dy and arg, no
 * dx.  Each window's gradient goes to the one of its 4 inputs the pool
 * picked (none where the ReLU stopped it), so the conv's planes are never
 * made: for 8 windows side by side, dy masked by arg for each of the 4,
 * times their taps as conv_pool_c1_avx2 reads them.  The chunk's samples
 * split in slot, 9 sums and db's in 8 float lanes a channel, added up in
 * a fixed order at the end: the same bits on any thread count, and equal
 * to the direct path's (conv_dw_taps9_avx2) up to the order of the sums. */
__attribute__((target("avx2,fma")))
static void conv_pool_c1_dw_avx2(const dlt_conv *s, const dlt_pool *p, const float *dy,
				 const int32_t *arg, int n0, int ns, const float *eo, int ew,
				 float *part, double *db)
{
	int ph = s->oh / 2, pw = s->ow / 2;
	size_t out = (size_t)ph * pw, split = 2 * (size_t)(s->h + 2) * ew;
	const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
	for (int k = 0; k < s->k; k++) {
		__m256 g[9];
		double dbk = 0.0;
		for (int r = 0; r < 9; r++)
			g[r] = _mm256_setzero_ps();
		for (int j = 0; j < ns; j++) {
			const float *e = eo + j * split, *o = e + split / 2;
			const float *d = dy + ((size_t)(n0 + j) * s->k + k) * out;
			const int32_t *at = arg + ((size_t)(n0 + j) * s->k + k) * out;
			__m256 plane = _mm256_setzero_ps();
			for (int i = 0; i < ph; i++) {
				for (int t = 0; t < pw; t += 8) {
					__m256i in = _mm256_cmpgt_epi32(_mm256_set1_epi32(pw - t), lane);
					__m256 dv = _mm256_maskload_ps(d + (size_t)i * pw + t, in);
					__m256i av = _mm256_maskload_epi32((const int *)at + (size_t)i * pw + t,
									   in);
					__m256i i00 = dlt_win2x2_avx2(2 * i * s->ow + 2 * t);
					__m256i i10 = _mm256_add_epi32(i00, _mm256_set1_epi32(s->ow));
					__m256i one = _mm256_set1_epi32(1);
					/* the window's top row's even and odd, its bottom row's */
					__m256 win[4] = {
						_mm256_and_ps(dv, _mm256_castsi256_ps(_mm256_cmpeq_epi32(av, i00))),
						_mm256_and_ps(dv, _mm256_castsi256_ps(_mm256_cmpeq_epi32(
							av, _mm256_add_epi32(i00, one)))),
						_mm256_and_ps(dv, _mm256_castsi256_ps(_mm256_cmpeq_epi32(av, i10))),
						_mm256_and_ps(dv, _mm256_castsi256_ps(_mm256_cmpeq_epi32(
							av, _mm256_add_epi32(i10, one)))),
					};
					plane = _mm256_add_ps(plane, _mm256_add_ps(_mm256_add_ps(win[0], win[1]),
										   _mm256_add_ps(win[2], win[3])));
					#pragma GCC unroll 3
					for (int ky = 0; ky < 3; ky++) {
						#pragma GCC unroll 2
						for (int a = 0; a < 2; a++) {
							size_t row = (size_t)(2 * i + a + ky) * ew + t;
							__m256 e0 = _mm256_loadu_ps(e + row);
							__m256 o0 = _mm256_loadu_ps(o + row);
							__m256 e1 = _mm256_loadu_ps(e + row + 1);
							__m256 o1 = _mm256_loadu_ps(o + row + 1);
							__m256 ev = win[2 * a], od = win[2 * a + 1];
							g[3 * ky] = _mm256_fmadd_ps(ev, e0, g[3 * ky]);
							g[3 * ky] = _mm256_fmadd_ps(od, o0, g[3 * ky]);
							g[3 * ky + 1] = _mm256_fmadd_ps(ev, o0, g[3 * ky + 1]);
							g[3 * ky + 1] = _mm256_fmadd_ps(od, e1, g[3 * ky + 1]);
							g[3 * ky + 2] = _mm256_fmadd_ps(ev, e1, g[3 * ky + 2]);
							g[3 * ky + 2] = _mm256_fmadd_ps(od, o1, g[3 * ky + 2]);
						}
					}
				}
			}
			dbk = lanes_add(dbk, plane);
		}
		db[k] = dbk;
		taps9_sums(g, part + k * 9);
	}
}

/* One chunk's samples: its partial dW and db, and dx. */
static void conv_backward_chunk(int prec, const dlt_conv *s, const conv_plan *q, const float *x,
				const float *w, const float *dy, float *dx, const dlt_pool *pool,
				const int32_t *arg, float *slot, const int32_t *masks, float *part,
				double *dbpart, int ch)
{
	int n0 = ch * CONV_CHUNK, ns = s->n - n0 < CONV_CHUNK ? s->n - n0 : CONV_CHUNK;
	size_t ld = (size_t)ns * q->p;
	float *col = slot, *dybuf = slot + q->col;
	int half;
	if (!dx && conv_pool_c1(s, q, pool)) {
		int ew = c1_width(s);
		size_t split = 2 * (size_t)(s->h + 2) * ew;
		for (int j = 0; j < ns; j++)
			c1_split(x + (size_t)(n0 + j) * s->h * s->w, s->h, s->w, ew, slot + j * split);
		conv_pool_c1_dw_avx2(s, pool, dy, arg, n0, ns, slot, ew, part, dbpart);
		return;
	}
	if (conv_dw_direct(s, q, dx)) {
		chunk_patches(s, x, n0, ns, col, ld, masks, 0);
		conv_dw_taps9_avx2(s, q, dy, n0, ns, col, ld, part, dbpart, pool, arg, dybuf);
		return;
	}
	half = im2col16_on(prec, masks);
	conv_gather_dy(s, q, dy, n0, ns, dybuf, half, dbpart);
	chunk_patches(s, x, n0, ns, col, ld, masks, half);
	/* dx's product then writes col as floats: the words are read by then */
	for (int g = 0; g < s->groups; g++)
		dlt_cpu_sgemm(prec | (half ? DLT_A_HALF | DLT_B_HALF : 0), 0, 1, q->kg, q->kk,
			      (int)ld, 1.0f, of_rows(dybuf, half, (size_t)g * q->kg * ld), (int)ld,
			      of_rows(col, half, (size_t)g * q->kk * ld), (int)ld, 0.0f,
			      part + (size_t)g * q->kg * q->kk, q->kk);
	if (!dx)
		return;
	for (int g = 0; g < s->groups; g++)
		dlt_cpu_sgemm(prec | (half ? DLT_B_HALF : 0), 1, 0, q->kk, (int)ld, q->kg, 1.0f,
			      w + (size_t)g * q->kg * q->kk, q->kk,
			      of_rows(dybuf, half, (size_t)g * q->kg * ld), (int)ld, 0.0f,
			      col + (size_t)g * q->kk * ld, (int)ld);
	for (int j = 0; j < ns; j++)
		col2im(s, col + (size_t)j * q->p, ld, dx + (size_t)(n0 + j) * s->c * s->h * s->w,
		       masks);
}

/* pool: dy is the pool's (only with no dx, on the direct path) */
static void conv_backward(int prec, const dlt_conv *s, const float *x, const float *w,
			  const float *dy, float *dx, float *dw, float *db, const dlt_pool *pool,
			  const int32_t *arg, float *work)
{
	int exact = prec & DLT_CONV_FLAGS;
	conv_plan q = conv_plan_of(prec &= ~DLT_CONV_FLAGS, s);
	float *parts = work + q.parts;
	double *dbs = (double *)(work + q.dbs);
	float *rx = work + q.total, *rw = rx + round16(dlt_conv_x_floats(s));
	float *rdy = rw + round16(dlt_conv_w_floats(s));

	if (!(exact & DLT_X_EXACT))
		x = rounded(prec, x, dlt_conv_x_floats(s), rx);
	if (w)
		w = rounded(prec, w, dlt_conv_w_floats(s), rw);
	if (!(exact & DLT_DY_EXACT))
		dy = rounded(prec, dy,
			     pool ? (size_t)pool->n * pool->c * pool->oh * pool->ow
				  : dlt_conv_y_floats(s),
			     rdy);
	if (conv_is_wino(prec, s)) {
		wino_plan wp = wino_plan_of(s, WINO_DW_TILES), wc = wino_plan_of(s, WINO_CONV_TILES);
		/* db: each chunk's sums as conv_gather_dy makes them */
		#pragma omp parallel num_threads(conv_threads(&q))
		{
			int avx2 = __builtin_cpu_supports("avx2");
			#pragma omp for schedule(dynamic)
			for (int ch = 0; ch < q.chunks; ch++) {
				int n0 = ch * CONV_CHUNK;
				int ns = s->n - n0 < CONV_CHUNK ? s->n - n0 : CONV_CHUNK;
				for (int k = 0; k < s->k; k++) {
					double acc = 0.0;
					for (int j = 0; j < ns; j++) {
						const float *from = dy + ((size_t)(n0 + j) * s->k + k) * q.p;
						acc += avx2 ? copy_sum_avx2(from, NULL, 0, q.p)
							    : copy_sum(from, NULL, q.p);
					}
					dbs[(size_t)ch * s->k + k] = acc;
				}
			}
		}
		wino_dw(s, &wp, x, dy, dw, work, q.slot, q.slots, work + q.zparts);
		if (dx) {
			wino_kernels(w, s->c, s->k, 1, work + q.u, work + q.up);
			wino_conv(s, &wc, s->k, s->c, dy, work + q.up, NULL, 0, DLT_ACT_NONE, 0.0f,
				  dx, NULL, NULL, work, q.slot, q.slots);
		}
		goto db;
	}
	#pragma omp parallel num_threads(conv_threads(&q))
	{
		int t = omp_get_thread_num();
		float *slot = work + t * q.slot;
		const int32_t *masks = conv_masks(s, (int32_t *)(slot + q.masks));
		#pragma omp for schedule(dynamic)
		for (int ch = 0; ch < q.chunks; ch++)
			conv_backward_chunk(prec, s, &q, x, w, dy, dx, pool, arg, slot, masks,
					    parts + ch * q.wn, dbs + (size_t)ch * s->k, ch);
	}

	/* dw = the chunks' partials added in chunk order, a block at a time */
	#pragma omp parallel for schedule(static)
	for (size_t j0 = 0; j0 < q.wn; j0 += DW_BLOCK) {
		double acc[DW_BLOCK] = { 0 };
		size_t m = q.wn - j0 < DW_BLOCK ? q.wn - j0 : DW_BLOCK;
		for (int ch = 0; ch < q.chunks; ch++) {
			const float *part = parts + ch * q.wn + j0;
			#pragma omp simd
			for (size_t j = 0; j < m; j++)
				acc[j] += part[j];
		}
		for (size_t j = 0; j < m; j++)
			dw[j0 + j] = (float)acc[j];
	}
db:
	for (int k = 0; db && k < s->k; k++) {
		double acc = 0.0;
		for (int ch = 0; ch < q.chunks; ch++)
			acc += dbs[(size_t)ch * s->k + k];
		db[k] = (float)acc;
	}
}

void dlt_cpu_conv_backward(int prec, const dlt_conv *s, const float *x, const float *w,
			   const float *dy, float *dx, float *dw, float *db, float *work)
{
	conv_backward(prec, s, x, w, dy, dx, dw, db, NULL, NULL, work);
}

/* The conv's planes, the model's largest tensors, stay in cache: a first
 * layer's 3x3 conv on one channel (the direct paths, no dx) a sample's
 * planes at a time forward, a plane's backward; the GEMM's chunks pool
 * each plane as it is made, any pool; Winograd's tiles are 2x2 windows,
 * pooled as they are made.  (Forward only but the first: backward reads
 * dy's planes whole.) */
int dlt_cpu_conv_pool_fuses(int prec, const dlt_conv *s, const dlt_pool *p)
{
	conv_plan q = conv_plan_of(prec, s);
	if (!p->relu || p->c != s->k || p->h != s->oh || p->w != s->ow)
		return 0;
	if (conv_fwd_direct(s, &q) && conv_dw_direct(s, &q, NULL))
		return DLT_FUSES_FORWARD | DLT_FUSES_BACKWARD;
	if (!conv_is_wino(prec, s))	/* the chunks' planes, pooled as they are made */
		return DLT_FUSES_FORWARD;
	if (p->kh == 2 && p->kw == 2 && p->sh == 2 && p->sw == 2 && p->ph == 0 && p->pw == 0 &&
	    s->oh % 2 == 0 && s->ow % 2 == 0)
		return DLT_FUSES_FORWARD;
	return 0;
}

void dlt_cpu_conv_pool_forward(int prec, const dlt_conv *s, const dlt_pool *p, const float *x,
			       const float *w, const float *b, int act, float slope, float *y,
			       int32_t *arg, float *work)
{
	conv_forward(prec, s, x, w, b, y, act, slope, p, arg, work);
}

void dlt_cpu_conv_pool_backward(int prec, const dlt_conv *s, const dlt_pool *p, const float *x,
				const float *dy, const int32_t *arg, float *dw, float *db,
				float *work)
{
	conv_backward(prec, s, x, NULL, dy, NULL, dw, db, p, arg, work);
}
