/* Image folders (dlt-prep images): a subfolder per class, as torchvision's
 * ImageFolder reads them, PNG through libpng and JPEG through libjpeg-turbo,
 * decoded on all cores straight into one u8 [N, C, H, W] buffer, so that no
 * file's bytes are kept once its pixels are in place.
 *
 * What is read, in which order (dlt-prep(1) says the same for users):
 *  - the classes are DIR's subfolders (or links to folders), sorted bytewise;
 *    class k is the k-th and its name the folder's;
 *  - a class's images are the files under its folder, subfolders included,
 *    in the order of ImageFolder's sorted(os.walk()): by folder path, then
 *    by name, bytewise;
 *  - names starting with '.' are skipped (ImageFolder reads them, and picks
 *    up editors' and notebooks' litter with them);
 *  - .png, .jpg and .jpeg, in any case, are read, by their content: a JPEG
 *    named x.png is read as the JPEG it is.  The other extensions that
 *    ImageFolder reads (.bmp .pgm .ppm .tif .tiff .webp) are an error, so
 *    that the data set is never silently smaller than torchvision's; any
 *    other file (README, labels.csv, Thumbs.db) is skipped, as ImageFolder
 *    skips it.
 * The pixels are those of PIL's Image.open(f).convert("L" or "RGB"), then
 * (with --size) torchvision's Resize and CenterCrop on that PIL image:
 * the same integer luma, the same fixed-point antialiased bilinear filter
 * and the same crop offset, so a model trained here sees what one trained
 * through torchvision sees. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <jpeglib.h>
#include <jerror.h>	/* after jpeglib.h, whose jconfig.h says which codes exist */
#include <png.h>

#include "prep.h"

/* Folders nested deeper than this under a class are refused: it bounds
 * the open directories, and a loop of links is found before it anyway. */
#define WALK_DEPTH 64
/* libjpeg-turbo's own fuzzers stop at 500 scans: a progressive file of
 * thousands of tiny scans makes each one a pass over the whole image. */
#define JPEG_MAX_SCANS 500
/* libjpeg's working memory: the coefficients of a progressive JPEG at the
 * pixel limit take 384 MiB; more means a file that lies. */
#define JPEG_MAX_MEMORY (1L << 30)

/* A decoded image: h rows of w pixels of cn interleaved samples. */
struct img {
	uint32_t h, w;
	int cn;
	int grey;
	const char *format;
	uint8_t *px;
};

static int image_error(int code, const char *name, const char *format, const char *msg)
{
	char m[256];

	/* the libraries write "Not enough image data"; our messages are
	 * lowercase, but "IHDR: CRC error" keeps its chunk name */
	snprintf(m, sizeof(m), "%s", msg);
	if (m[0] >= 'A' && m[0] <= 'Z' && m[1] >= 'a' && m[1] <= 'z')
		m[0] = (char)(m[0] - 'A' + 'a');
	if (code == DLT_ENOMEM)
		return dlt_error(code, "%s: out of memory decoding the %s image", name, format);
	return dlt_error(code, "%s: damaged %s: %s", name, format, m);
}

static int check_size(const struct img *im, const char *name)
{
	if (im->h == 0 || im->w == 0)
		return dlt_error(DLT_EINPUT, "%s: %s image of %ux%u pixels", name, im->format,
				 im->h, im->w);
	if ((uint64_t)im->h * im->w > DLT_PREP_MAX_PIXELS)
		return dlt_error(DLT_EINPUT, "%s: %ux%u pixels is over the limit of %u (8192x8192)",
				 name, im->h, im->w, DLT_PREP_MAX_PIXELS);
	return 0;
}

/* ---- PNG ------------------------------------------------------------ */

struct png_dec {
	png_structp png;
	png_infop info;
	const uint8_t *data;
	size_t n, pos;
	char msg[200];
};

/* libpng reports through a handler that must not return: keep the
 * message, go back to png_run's setjmp.  Nothing is printed. */
static void png_err_fn(png_structp png, png_const_charp msg)
{
	struct png_dec *d = png_get_error_ptr(png);

	snprintf(d->msg, sizeof(d->msg), "%s", msg);
	png_longjmp(png, 1);
}

static void png_warn_fn(png_structp png, png_const_charp msg)
{
	(void)png;
	(void)msg;
}

static void png_read_fn(png_structp png, png_bytep out, size_t n)
{
	struct png_dec *d = png_get_io_ptr(png);

	if (n > d->n - d->pos)
		png_error(png, "truncated");
	memcpy(out, d->data + d->pos, n);
	d->pos += n;
}

/* The header into im; with pixels, the image into im->px too.  All state
 * that outlives a longjmp is in *d and *im, not in locals. */
static int png_run(struct png_dec *d, struct img *im, const char *name, int pixels)
{
	int type, depth, passes;

	if (setjmp(png_jmpbuf(d->png)))
		return image_error(strcmp(d->msg, "Out of memory") ? DLT_EINPUT : DLT_ENOMEM, name,
				   "PNG", d->msg);
	png_set_read_fn(d->png, d, png_read_fn);
	/* libpng's own limit is a million pixels a side; ours (check_size)
	 * counts pixels, and says so in its own words */
	png_set_user_limits(d->png, 0x7fffffff, 0x7fffffff);
	png_read_info(d->png, d->info);
	im->w = png_get_image_width(d->png, d->info);
	im->h = png_get_image_height(d->png, d->info);
	type = png_get_color_type(d->png, d->info);
	depth = png_get_bit_depth(d->png, d->info);
	/* grey or grey+alpha; a palette is colour, as PIL's mode "P" */
	im->grey = !(type & PNG_COLOR_MASK_COLOR);
	DLT_TRY_RC(check_size(im, name));
	if (!pixels)
		return 0;
	/* to 8-bit grey, grey+alpha, RGB or RGBA; alpha is dropped below, as
	 * PIL's convert("RGB") drops it */
	if (type == PNG_COLOR_TYPE_PALETTE)
		png_set_palette_to_rgb(d->png);
	if (!(type & PNG_COLOR_MASK_COLOR) && depth < 8)
		png_set_expand_gray_1_2_4_to_8(d->png);
	if (depth == 16)
		png_set_scale_16(d->png);
	passes = png_set_interlace_handling(d->png);
	png_read_update_info(d->png, d->info);
	im->cn = png_get_channels(d->png, d->info);
	if (im->cn < 1 || im->cn > 4 ||
	    png_get_rowbytes(d->png, d->info) != (size_t)im->w * (size_t)im->cn)
		return dlt_error(DLT_EINPUT, "%s: damaged PNG: unexpected row layout", name);
	if (!(im->px = dlt_malloc((size_t)im->h * im->w * (size_t)im->cn)))
		return DLT_ENOMEM;
	/* row by row into the image: an interlaced file's later passes fill in
	 * the rows of the earlier ones, and no array of h row pointers is
	 * needed for a file of 1 x 2^26 pixels */
	for (int p = 0; p < passes; p++)
		for (uint32_t y = 0; y < im->h; y++)
			png_read_row(d->png, im->px + (size_t)y * im->w * (size_t)im->cn, NULL);
	return 0;
}

static int png_decode(const uint8_t *data, size_t n, const char *name, struct img *im,
		      int pixels)
{
	struct png_dec d = { .data = data, .n = n };
	int rc;

	im->format = "PNG";
	if (!(d.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &d, png_err_fn, png_warn_fn)) ||
	    !(d.info = png_create_info_struct(d.png))) {
		png_destroy_read_struct(&d.png, NULL, NULL);
		return dlt_error(DLT_ENOMEM, "%s: out of memory decoding the PNG image", name);
	}
	rc = png_run(&d, im, name, pixels);
	png_destroy_read_struct(&d.png, &d.info, NULL);
	return rc;
}

/* ---- JPEG ----------------------------------------------------------- */

struct jpeg_dec {
	struct jpeg_decompress_struct cinfo;
	struct jpeg_error_mgr err;
	struct jpeg_progress_mgr progress;
	jmp_buf jb;
	char msg[JMSG_LENGTH_MAX];
	int nomem;
};

static void jpeg_exit_fn(j_common_ptr c)
{
	struct jpeg_dec *d = c->client_data;

	(*c->err->format_message)(c, d->msg);
	d->nomem = c->err->msg_code == JERR_OUT_OF_MEMORY;
	longjmp(d->jb, 1);
}

/* Warnings that mean the pixels are wrong (the data ends early or is
 * garbled) are errors: libjpeg would fill the rest with grey and carry on.
 * The others (junk between markers, an unknown JFIF version) leave the
 * image whole and are ignored, as PIL ignores them.  Nothing is printed. */
static void jpeg_emit_fn(j_common_ptr c, int level)
{
	switch (level < 0 ? c->err->msg_code : -1) {
	case JWRN_JPEG_EOF:
	case JWRN_HIT_MARKER:
	case JWRN_HUFF_BAD_CODE:
#if defined(D_ARITH_CODING_SUPPORTED) || JPEG_LIB_VERSION >= 70
	case JWRN_ARITH_BAD_CODE:
#endif
	case JWRN_MUST_RESYNC:
	case JWRN_NOT_SEQUENTIAL:
		jpeg_exit_fn(c);
		break;
	default:
		break;
	}
}

static void jpeg_output_fn(j_common_ptr c)
{
	(void)c;
}

static void jpeg_progress_fn(j_common_ptr c)
{
	struct jpeg_dec *d = c->client_data;

	if (d->cinfo.input_scan_number > JPEG_MAX_SCANS) {
		snprintf(d->msg, sizeof(d->msg), "more than %d scans", JPEG_MAX_SCANS);
		d->nomem = 0;
		longjmp(d->jb, 1);
	}
}

static int jpeg_run(struct jpeg_dec *d, struct img *im, const uint8_t *data, size_t n,
		    const char *name, int pixels)
{
	struct jpeg_decompress_struct *c = &d->cinfo;

	if (setjmp(d->jb))
		return image_error(d->nomem ? DLT_ENOMEM : DLT_EINPUT, name, "JPEG", d->msg);
	jpeg_create_decompress(c);
	c->client_data = d;
	c->progress = &d->progress;
	c->mem->max_memory_to_use = JPEG_MAX_MEMORY;
	jpeg_mem_src(c, data, (unsigned long)n);
	jpeg_read_header(c, TRUE);
	im->w = c->image_width;
	im->h = c->image_height;
	im->grey = c->jpeg_color_space == JCS_GRAYSCALE;
	switch (c->jpeg_color_space) {
	case JCS_GRAYSCALE:
		c->out_color_space = JCS_GRAYSCALE;
		break;
	case JCS_YCbCr:
	case JCS_RGB:
		c->out_color_space = JCS_RGB;
		break;
	case JCS_CMYK:
	case JCS_YCCK:
		return dlt_error(DLT_EINPUT, "%s: CMYK JPEG images are not supported", name);
	default:
		return dlt_error(DLT_EINPUT, "%s: JPEG of %d components in an unknown colour space",
				 name, c->num_components);
	}
	DLT_TRY_RC(check_size(im, name));
	if (!pixels)
		return 0;
	jpeg_start_decompress(c);
	im->cn = c->output_components;
	if (c->output_width != im->w || c->output_height != im->h || im->cn < 1 || im->cn > 3)
		return dlt_error(DLT_EINPUT, "%s: damaged JPEG: unexpected output layout", name);
	if (!(im->px = dlt_malloc((size_t)im->h * im->w * (size_t)im->cn)))
		return DLT_ENOMEM;
	while (c->output_scanline < c->output_height) {
		JSAMPROW row = im->px + (size_t)c->output_scanline * im->w * (size_t)im->cn;
		jpeg_read_scanlines(c, &row, 1);
	}
	/* no jpeg_finish_decompress: what follows the last row (a missing EOI,
	 * trailing bytes) does not change the pixels, and PIL accepts it */
	return 0;
}

static int jpeg_decode(const uint8_t *data, size_t n, const char *name, struct img *im,
		       int pixels)
{
	struct jpeg_dec *d = dlt_calloc(1, sizeof(*d));
	int rc;

	im->format = "JPEG";
	if (!d)
		return DLT_ENOMEM;
	d->cinfo.err = jpeg_std_error(&d->err);
	d->err.error_exit = jpeg_exit_fn;
	d->err.emit_message = jpeg_emit_fn;
	d->err.output_message = jpeg_output_fn;
	d->progress.progress_monitor = jpeg_progress_fn;
	/* client_data is read by the handlers even if create fails */
	d->cinfo.client_data = d;
	rc = jpeg_run(d, im, data, n, name, pixels);
	jpeg_destroy_decompress(&d->cinfo);
	free(d);
	return rc;
}

/* ---- one image ------------------------------------------------------ */

static int decode(const void *data, size_t n, const char *name, struct img *im, int pixels)
{
	static const uint8_t png_sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
	const uint8_t *p = data;

	memset(im, 0, sizeof(*im));
	if (n == 0)
		return dlt_error(DLT_EINPUT, "%s: empty file", name);
	if (n >= 8 && memcmp(p, png_sig, 8) == 0)
		return png_decode(p, n, name, im, pixels);
	if (n >= 3 && p[0] == 0xff && p[1] == 0xd8 && p[2] == 0xff)
		return jpeg_decode(p, n, name, im, pixels);
	return dlt_error(DLT_EINPUT, "%s: not a PNG or JPEG image", name);
}

int dlt_prep_image_info(const void *data, size_t n, const char *name, dlt_prep_image *info)
{
	struct img im;
	int rc = decode(data, n, name, &im, 0);

	memset(info, 0, sizeof(*info));
	if (rc < 0)
		return rc;
	info->format = im.format;
	info->h = im.h;
	info->w = im.w;
	info->grey = im.grey;
	return 0;
}

/* The resize of PIL's Image.resize(BILINEAR) (Resample.c): a separable
 * triangle filter widened by the scale when shrinking (so it averages
 * every source pixel, antialiased), weights normalised and rounded to
 * 22-bit fixed point, a horizontal pass then a vertical one, each
 * rounded to u8.  Only the outputs inside the crop are computed: each
 * output depends only on its own weights, so the result is the same. */
#define RS_BITS 22

struct coeffs {
	int ksize;
	uint32_t *lo, *cnt;	/* per output: first input and how many */
	int32_t *k;		/* per output: ksize weights */
};

static void coeffs_free(struct coeffs *c)
{
	free(c->lo);
	free(c->cnt);
	free(c->k);
}

/* Weights for outputs [o0, o0 + n) of in inputs resized to out. */
static int coeffs_init(struct coeffs *c, uint32_t in, uint64_t out, uint64_t o0, uint32_t n)
{
	double scale = (double)(float)in / (double)out, fscale = scale < 1 ? 1 : scale;
	double support = fscale, ss = 1.0 / fscale, *w;
	int rc = 0;

	memset(c, 0, sizeof(*c));
	c->ksize = (int)ceil(support) * 2 + 1;
	w = dlt_calloc((size_t)c->ksize, sizeof(*w));
	c->lo = dlt_calloc(n, sizeof(*c->lo));
	c->cnt = dlt_calloc(n, sizeof(*c->cnt));
	c->k = dlt_calloc(n, (size_t)c->ksize * sizeof(*c->k));
	if (!w || !c->lo || !c->cnt || !c->k) {
		rc = DLT_ENOMEM;
		goto fail;
	}
	for (uint32_t i = 0; i < n; i++) {
		double center = ((double)(o0 + i) + 0.5) * scale, sum = 0;
		double lo = center - support + 0.5, hi = center + support + 0.5;
		int64_t xmin = lo < 0 ? 0 : (int64_t)lo, xmax = hi > in ? in : (int64_t)hi;
		int count = (int)(xmax > xmin ? xmax - xmin : 0);
		int32_t *k = c->k + (size_t)i * (size_t)c->ksize;

		if (count > c->ksize)
			count = c->ksize;
		for (int x = 0; x < count; x++) {
			double t = fabs(((double)(x + xmin) - center + 0.5) * ss);
			w[x] = t < 1 ? 1 - t : 0;
			sum += w[x];
		}
		for (int x = 0; x < count; x++) {
			double v = sum != 0 ? w[x] / sum : w[x];
			v *= 1 << RS_BITS;
			k[x] = (int32_t)(v < 0 ? v - 0.5 : v + 0.5);
		}
		c->lo[i] = (uint32_t)xmin;
		c->cnt[i] = (uint32_t)count;
	}
	free(w);
	return 0;
fail:
	free(w);
	coeffs_free(c);
	return rc;
}

static uint8_t rs_clip(int64_t v)
{
	if (v >= (int64_t)1 << RS_BITS << 8)
		return 255;
	if (v <= 0)
		return 0;
	return (uint8_t)(v >> RS_BITS);
}

static uint8_t rs_dot(const uint8_t *p, size_t stride, const int32_t *k, uint32_t n)
{
	int64_t s = 1 << (RS_BITS - 1);

	for (uint32_t i = 0; i < n; i++)
		s += (int64_t)p[i * stride] * k[i];
	return rs_clip(s);
}

/* Python's round() of (a - b) / 2: halves go to the even neighbour, as
 * torchvision's CenterCrop computes its offsets. */
static uint64_t crop_offset(uint64_t a, uint64_t b)
{
	uint64_t d = a - b, q = d / 2;

	return (d & 1) && (q & 1) ? q + 1 : q;
}

/* One plane of h x w at in into oh x ow at out, through tmp (rows
 * [y0, y1) of the horizontal pass): cx and cy are the weights of the
 * cropped outputs, NULL where that side keeps its size, and (top, left)
 * is the crop's corner then. */
static void resize_plane(const uint8_t *in, uint32_t w, uint8_t *out, uint32_t oh, uint32_t ow,
			 uint64_t top, uint64_t left, const struct coeffs *cx,
			 const struct coeffs *cy, uint8_t *tmp, uint32_t y0, uint32_t y1)
{
	for (uint32_t y = y0; y < y1; y++) {
		const uint8_t *row = in + (size_t)y * w;
		uint8_t *t = tmp + (size_t)(y - y0) * ow;
		if (!cx) {
			memcpy(t, row + left, ow);
			continue;
		}
		for (uint32_t x = 0; x < ow; x++)
			t[x] = rs_dot(row + cx->lo[x], 1, cx->k + (size_t)x * (size_t)cx->ksize,
				      cx->cnt[x]);
	}
	for (uint32_t y = 0; y < oh; y++) {
		uint8_t *o = out + (size_t)y * ow;
		if (!cy) {
			memcpy(o, tmp + (size_t)(top + y - y0) * ow, ow);
			continue;
		}
		for (uint32_t x = 0; x < ow; x++)
			o[x] = rs_dot(tmp + (size_t)(cy->lo[y] - y0) * ow + x, ow,
				      cy->k + (size_t)y * (size_t)cy->ksize, cy->cnt[y]);
	}
}

/* PIL's convert: "L" from RGB by the ITU-R 601-2 luma in 16-bit fixed
 * point, rounded (Convert.c's L24); "RGB" from grey by copying; alpha
 * dropped.  Into c planes of h x w. */
static void to_planes(const struct img *im, int c, uint8_t *out)
{
	size_t np = (size_t)im->h * im->w;
	const uint8_t *p = im->px;
	int cn = im->cn;

	if (c == 1 && cn >= 3) {
		for (size_t i = 0; i < np; i++, p += cn)
			out[i] = (uint8_t)((p[0] * 19595 + p[1] * 38470 + p[2] * 7471 + 0x8000)
					   >> 16);
		return;
	}
	for (size_t i = 0; i < np; i++, p += cn)
		for (int k = 0; k < c; k++)
			out[(size_t)k * np + i] = p[cn >= 3 ? k : 0];
}

int dlt_prep_decode_image(const void *data, size_t n, const char *name, int c, uint32_t oh,
			  uint32_t ow, uint8_t *out)
{
	struct coeffs cx = { 0 }, cy = { 0 };
	uint8_t *planes = NULL, *tmp = NULL;
	uint64_t rh, rw, top, left;
	uint32_t y0, y1;
	struct img im;
	int rc;

	if ((c != 1 && c != 3) || oh == 0 || ow == 0 ||
	    (uint64_t)oh * ow > DLT_PREP_MAX_PIXELS)
		return dlt_error(DLT_EINPUT, "%s: cannot decode to %d channels of %ux%u", name, c,
				 oh, ow);
	DLT_TRY(decode(data, n, name, &im, 1));
	if (im.h == oh && im.w == ow) {
		to_planes(&im, c, out);
		rc = 0;
		goto fail;
	}
	/* torchvision's Resize(int) scales the shorter side to the size and
	 * the other to int(size * long / short); for H x W the side whose
	 * ratio is the larger plays the shorter side's part, so the image
	 * covers H x W, and CenterCrop cuts H x W from the middle */
	if ((uint64_t)ow * im.h >= (uint64_t)oh * im.w) {
		rw = ow;
		rh = (uint64_t)((double)((uint64_t)ow * im.h) / im.w);
	} else {
		rh = oh;
		rw = (uint64_t)((double)((uint64_t)oh * im.w) / im.h);
	}
	if (rh < oh || rw < ow) {
		rc = dlt_error(DLT_EINPUT, "%s: cannot resize %ux%u to cover %ux%u", name, im.h,
			       im.w, oh, ow);
		goto fail;
	}
	top = crop_offset(rh, oh);
	left = crop_offset(rw, ow);
	if (rw != im.w)
		DLT_TRY(coeffs_init(&cx, im.w, rw, left, ow));
	if (rh != im.h)
		DLT_TRY(coeffs_init(&cy, im.h, rh, top, oh));
	/* the input rows the vertical pass reads: about oh / scale, so a
	 * strip of an enlarged image costs what the strip needs */
	y0 = rh != im.h ? cy.lo[0] : (uint32_t)top;
	y1 = rh != im.h ? cy.lo[oh - 1] + cy.cnt[oh - 1] : (uint32_t)top + oh;
	if (!(planes = dlt_malloc((size_t)im.h * im.w * (size_t)c)) ||
	    !(tmp = dlt_malloc((size_t)(y1 - y0) * ow))) {
		rc = DLT_ENOMEM;
		goto fail;
	}
	to_planes(&im, c, planes);
	for (int k = 0; k < c; k++)
		resize_plane(planes + (size_t)k * im.h * im.w, im.w, out + (size_t)k * oh * ow, oh,
			     ow, top, left, rw != im.w ? &cx : NULL, rh != im.h ? &cy : NULL, tmp,
			     y0, y1);
fail:
	coeffs_free(&cx);
	coeffs_free(&cy);
	free(planes);
	free(tmp);
	free(im.px);
	return rc;
}

/* ---- the folder ----------------------------------------------------- */

struct file {
	char *path;
	size_t dirlen;		/* the folder part of path, up to its last '/' */
};

struct walk {
	struct file *f;
	size_t n, cap;
	dev_t dev[WALK_DEPTH];	/* the folders being read, to find loops of links */
	ino_t ino[WALK_DEPTH];
	int depth;
};

static char *join(const char *dir, const char *name)
{
	size_t a = strlen(dir), b = strlen(name);
	char *p = dlt_malloc(a + b + 2);

	if (p) {
		memcpy(p, dir, a);
		p[a] = '/';
		memcpy(p + a + 1, name, b + 1);
	}
	return p;
}

/* 1: a file to read; 0: one to skip; -1: an image that ImageFolder reads
 * and we cannot, which would make the two data sets differ. */
static int image_kind(const char *name)
{
	static const char *const ours[] = { "png", "jpg", "jpeg" };
	static const char *const theirs[] = { "bmp", "pgm", "ppm", "tif", "tiff", "webp" };
	const char *dot = strrchr(name, '.');

	if (!dot)
		return 0;
	for (size_t i = 0; i < sizeof(ours) / sizeof(*ours); i++)
		if (strcasecmp(dot + 1, ours[i]) == 0)
			return 1;
	for (size_t i = 0; i < sizeof(theirs) / sizeof(*theirs); i++)
		if (strcasecmp(dot + 1, theirs[i]) == 0)
			return -1;
	return 0;
}

static int walk_add(struct walk *w, char *path)
{
	if (dlt_grow(&w->f, &w->cap, w->n + 1, sizeof(*w->f)) < 0) {
		free(path);
		return DLT_ENOMEM;
	}
	w->f[w->n].path = path;
	w->f[w->n].dirlen = (size_t)(strrchr(path, '/') - path);
	w->n++;
	return 0;
}

static int walk_dir(struct walk *w, const char *path);

/* One entry of a class's folder: a folder to walk, an image to keep, or
 * something to skip. */
static int walk_entry(struct walk *w, const char *dir, const char *name)
{
	char *path = join(dir, name);
	struct stat st;
	int kind = image_kind(name), rc = 0;

	if (!path)
		return DLT_ENOMEM;
	if (stat(path, &st) != 0) {
		/* a dangling link: ImageFolder fails on it if it has an image's
		 * name and lists nothing otherwise */
		if (kind != 0)
			rc = dlt_error_errno(DLT_EINPUT, "%s", path);
	} else if (S_ISDIR(st.st_mode)) {
		rc = walk_dir(w, path);
	} else if (kind < 0) {
		rc = dlt_error(DLT_EINPUT, "%s: %s images are not supported (PNG and JPEG only)",
			       path, strrchr(name, '.') + 1);
	} else if (kind > 0 && !S_ISREG(st.st_mode)) {
		rc = dlt_error(DLT_EINPUT, "%s: not a regular file", path);
	} else if (kind > 0) {
		return walk_add(w, path);
	}
	free(path);
	return rc;
}

static int walk_dir(struct walk *w, const char *path)
{
	struct dirent *e;
	struct stat st;
	DIR *dir;
	int rc = 0;

	if (!(dir = opendir(path)))
		return dlt_error_errno(errno == ENOENT || errno == EACCES || errno == ENOTDIR ?
				       DLT_EINPUT : DLT_EIO, "%s", path);
	if (fstat(dirfd(dir), &st) != 0) {
		rc = dlt_error_errno(DLT_EIO, "%s", path);
		goto fail;
	}
	for (int i = 0; i < w->depth; i++)
		if (w->dev[i] == st.st_dev && w->ino[i] == st.st_ino) {
			rc = dlt_error(DLT_EINPUT, "%s: a link back to a folder above it", path);
			goto fail;
		}
	if (w->depth == WALK_DEPTH) {
		rc = dlt_error(DLT_EINPUT, "%s: folders nested more than %d deep", path,
			       WALK_DEPTH);
		goto fail;
	}
	w->dev[w->depth] = st.st_dev;
	w->ino[w->depth++] = st.st_ino;
	for (errno = 0; (e = readdir(dir)); errno = 0) {
		/* ".", ".." and hidden names */
		if (e->d_name[0] == '.')
			continue;
		if ((rc = walk_entry(w, path, e->d_name)) < 0)
			break;
	}
	if (rc == 0 && errno != 0)
		rc = dlt_error_errno(DLT_EIO, "%s", path);
	w->depth--;
fail:
	closedir(dir);
	return rc;
}

/* Bytewise by folder, then by name: Python's sorted(os.walk(...)) sorts
 * the folders' paths, and each folder's names after. */
static int file_cmp(const void *pa, const void *pb)
{
	const struct file *a = pa, *b = pb;
	size_t n = a->dirlen < b->dirlen ? a->dirlen : b->dirlen;
	int c = memcmp(a->path, b->path, n);

	if (c != 0)
		return c;
	if (a->dirlen != b->dirlen)
		return a->dirlen < b->dirlen ? -1 : 1;
	return strcmp(a->path + a->dirlen, b->path + b->dirlen);
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Class names go into the metadata's JSON, which must be UTF-8. */
static int utf8_ok(const unsigned char *s)
{
	while (*s) {
		int n = *s < 0x80 ? 0 : (*s & 0xe0) == 0xc0 ? 1 : (*s & 0xf0) == 0xe0 ? 2 :
			(*s & 0xf8) == 0xf0 ? 3 : -1;
		if (n < 0 || (n == 1 && *s < 0xc2))
			return 0;
		s++;
		for (int i = 0; i < n; i++, s++)
			if ((*s & 0xc0) != 0x80)
				return 0;
	}
	return 1;
}

/* The class folders of dir, sorted, into d->classes. */
static int list_classes(dlt_prep_data *d, const char *dir)
{
	struct dirent *e;
	struct stat st;
	size_t cap = 0, n = 0;
	DIR *dp;
	int rc = 0;

	if (!(dp = opendir(dir)))
		return dlt_error_errno(errno == ENOENT || errno == EACCES || errno == ENOTDIR ?
				       DLT_EINPUT : DLT_EIO, "%s", dir);
	for (errno = 0; (e = readdir(dp)); errno = 0) {
		char *path;
		if (e->d_name[0] == '.')
			continue;
		if (!(path = join(dir, e->d_name))) {
			rc = DLT_ENOMEM;
			break;
		}
		/* files beside the class folders are not samples (ImageFolder
		 * ignores them too); a link to a folder is a class */
		if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
			free(path);
			continue;
		}
		free(path);
		if (!utf8_ok((const unsigned char *)e->d_name)) {
			rc = dlt_error(DLT_EINPUT, "%s: a class folder's name is not UTF-8", dir);
			break;
		}
		if (n == DLT_PREP_MAX_CLASSES) {
			rc = dlt_error(DLT_EINPUT, "%s: more than %d class folders", dir,
				       DLT_PREP_MAX_CLASSES);
			break;
		}
		if (dlt_grow(&d->classes, &cap, n + 1, sizeof(*d->classes)) < 0 ||
		    !(d->classes[n] = dlt_strdup(e->d_name))) {
			rc = DLT_ENOMEM;
			break;
		}
		d->num_classes = (int)++n;
	}
	if (rc == 0 && errno != 0)
		rc = dlt_error_errno(DLT_EIO, "%s", dir);
	closedir(dp);
	if (rc == 0 && n == 0)
		rc = dlt_error(DLT_EINPUT, "%s: no class folders (a subfolder of images per class)",
			       dir);
	if (rc == 0)
		qsort(d->classes, n, sizeof(*d->classes), str_cmp);
	return rc;
}

/* Every image of every class, in order, with its class id in *y. */
static int list_files(const dlt_prep_data *d, const char *dir, struct walk *w, int32_t **y)
{
	size_t cap = 0;
	int rc = 0;

	for (int k = 0; k < d->num_classes; k++) {
		size_t first = w->n;
		char *path = join(dir, d->classes[k]);
		if (!path)
			return DLT_ENOMEM;
		rc = walk_dir(w, path);
		if (rc == 0 && w->n == first)
			rc = dlt_error(DLT_EINPUT, "%s: no PNG or JPEG images", path);
		free(path);
		if (rc < 0)
			return rc;
		qsort(w->f + first, w->n - first, sizeof(*w->f), file_cmp);
		if (dlt_grow(y, &cap, w->n, sizeof(**y)) < 0)
			return DLT_ENOMEM;
		for (size_t i = first; i < w->n; i++)
			(*y)[i] = k;
	}
	return 0;
}

/* Decodes file f into out (c x h x w); with same_size, an image of
 * another size is an error rather than resized. */
static int read_one(const struct file *f, int c, uint32_t h, uint32_t w, int same_size,
		    uint8_t *out)
{
	void *map;
	char *mem;
	size_t n;
	int rc;

	DLT_TRY_RC(dlt_file_bytes(f->path, &map, &mem, &n));
	rc = 0;
	if (same_size) {
		dlt_prep_image im;
		rc = dlt_prep_image_info(map ? map : mem, n, f->path, &im);
		if (rc == 0 && (im.h != h || im.w != w))
			rc = dlt_error(DLT_EINPUT, "%s: %ux%u, not the first image's %ux%u "
				       "(--size resizes them all)", f->path, im.h, im.w, h, w);
	}
	if (rc == 0)
		rc = dlt_prep_decode_image(map ? map : mem, n, f->path, c, h, w, out);
	if (map)
		munmap(map, n);
	free(mem);
	return rc;
}

/* The first image's size and colour, for the defaults. */
static int first_info(const struct file *f, dlt_prep_image *im)
{
	void *map;
	char *mem;
	size_t n;
	int rc;

	DLT_TRY_RC(dlt_file_bytes(f->path, &map, &mem, &n));
	rc = dlt_prep_image_info(map ? map : mem, n, f->path, im);
	if (map)
		munmap(map, n);
	free(mem);
	return rc;
}

/* Every file on threads threads, each into its own sample.  The error
 * reported is that of the first failing file in order, whatever the
 * threads' timing, so a run says the same thing every time. */
static int read_all(const struct walk *wk, int c, uint32_t h, uint32_t w, int same_size,
		    int threads, uint8_t *x)
{
	size_t sample = (size_t)c * h * w, first_bad = SIZE_MAX;
	char msg[1024] = "";
	int bad_rc = 0;

	#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
	for (size_t i = 0; i < wk->n; i++) {
		size_t bad;
		int rc;
		#pragma omp atomic read
		bad = first_bad;
		if (i > bad)
			continue;
		rc = read_one(&wk->f[i], c, h, w, same_size, x + i * sample);
		if (rc < 0) {
			#pragma omp critical(dlt_prep_images)
			if (i < first_bad) {
				/* the message is in this thread's buffer */
				snprintf(msg, sizeof(msg), "%s", dlt_errmsg());
				bad_rc = rc;
				#pragma omp atomic write
				first_bad = i;
			}
		}
	}
	return bad_rc < 0 ? dlt_error(bad_rc, "%s", msg) : 0;
}

int dlt_prep_read_images(dlt_prep_data *d, const char *dir, const dlt_prep_image_opts *o)
{
	struct walk wk = { 0 };
	dlt_prep_image first;
	size_t len = strlen(dir), total;
	char *root = NULL;
	uint32_t h, w;
	int c, rc, threads = o->threads;

	memset(d, 0, sizeof(*d));
	if ((o->h == 0) != (o->w == 0) || (uint64_t)o->h * o->w > DLT_PREP_MAX_PIXELS ||
	    (o->channels != 0 && o->channels != 1 && o->channels != 3))
		return dlt_error(DLT_EINPUT, "%s: bad image options", dir);
	/* "dir/" names its files dir/cls/x.png, not dir//cls/x.png */
	while (len > 1 && dir[len - 1] == '/')
		len--;
	if (!(root = dlt_malloc(len + 1)))
		return DLT_ENOMEM;
	memcpy(root, dir, len);
	root[len] = 0;
	DLT_TRY(list_classes(d, root));
	DLT_TRY(list_files(d, root, &wk, &d->y));
	DLT_TRY(first_info(&wk.f[0], &first));
	h = o->h ? o->h : first.h;
	w = o->w ? o->w : first.w;
	c = o->channels ? o->channels : first.grey ? 1 : 3;
	if (!dlt_mul_ok(wk.n, (size_t)c * h * w, &total)) {
		rc = dlt_error(DLT_EINPUT, "%s: %zu images of %dx%ux%u are too many bytes", root,
			       wk.n, c, h, w);
		goto fail;
	}
	/* the one buffer of the whole data set: each file is decoded into
	 * its place in it and its bytes dropped */
	if (!(d->x = dlt_malloc(total))) {
		rc = DLT_ENOMEM;
		goto fail;
	}
	if (threads <= 0 && (threads = dlt_env_threads()) < 0) {
		rc = threads;
		goto fail;
	}
	DLT_TRY(read_all(&wk, c, h, w, o->h == 0, threads, d->x));
	d->source = "images";
	d->dtype = DLT_U8;
	d->ndim = 3;
	d->dims[0] = (uint64_t)c;
	d->dims[1] = h;
	d->dims[2] = w;
	d->n = wk.n;
	d->sample_size = (size_t)c * h * w;
	d->scale = 1.0 / 255;
fail:
	for (size_t i = 0; i < wk.n; i++)
		free(wk.f[i].path);
	free(wk.f);
	free(root);
	if (rc < 0)
		dlt_prep_data_free(d);
	return rc;
}
