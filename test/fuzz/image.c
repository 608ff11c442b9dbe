/* dlt-prep images (lib/prep/images.c): one PNG or JPEG file from memory,
 * its header read, then decoded at its own size as grey and as RGB, and
 * resized to a small size that the input picks.  Input: the file.  A
 * colour image decoded as grey must be the luma of its RGB decode, and a
 * grey one the same in all three channels; anything else aborts. */
#include "prep/prep.h"
#include "util/util.h"

#include "fuzz.h"

/* Larger images are only read up to their header: decoding 2^26 pixels
 * takes a second, and the fuzzer would spend its time there. */
#define FUZZ_MAX_PIXELS (1u << 20)

static void check_luma(const uint8_t *grey, const uint8_t *rgb, size_t np, int is_grey)
{
	for (size_t i = 0; i < np; i++) {
		unsigned r = rgb[i], g = rgb[np + i], b = rgb[2 * np + i];
		unsigned l = (r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16;
		if (grey[i] != l || (is_grey && (r != grey[i] || g != grey[i] || b != grey[i])))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	dlt_prep_image im;
	uint8_t *grey = NULL, *rgb = NULL, *small = NULL;
	uint32_t oh, ow;
	size_t np;

	if (dlt_prep_image_info(data, size, "in", &im) < 0)
		return 0;
	if (im.h == 0 || im.w == 0 || (uint64_t)im.h * im.w > DLT_PREP_MAX_PIXELS)
		abort();	/* the header check lets nothing of this through */
	if ((uint64_t)im.h * im.w > FUZZ_MAX_PIXELS)
		return 0;
	np = (size_t)im.h * im.w;
	oh = 1 + (im.h * 7 + im.w) % 40;
	ow = 1 + (im.w * 5 + im.h) % 40;
	if (!(grey = malloc(np)) || !(rgb = malloc(3 * np)) || !(small = malloc(3 * 40 * 40)))
		abort();
	if (dlt_prep_decode_image(data, size, "in", 1, im.h, im.w, grey) == 0) {
		/* the same bytes decode the same way every time */
		if (dlt_prep_decode_image(data, size, "in", 3, im.h, im.w, rgb) != 0)
			abort();
		check_luma(grey, rgb, np, im.grey);
		if (dlt_prep_decode_image(data, size, "in", 3, oh, ow, small) != 0 ||
		    dlt_prep_decode_image(data, size, "in", 1, ow, oh, small) != 0)
			abort();
	}
	free(grey);
	free(rgb);
	free(small);
	return 0;
}
