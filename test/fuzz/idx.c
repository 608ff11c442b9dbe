/* dlt-prep idx (lib/prep/idx.c, then dataset.c): images and labels, plain
 * or gzip'd, read from files and written as a dataset archive, which is
 * then described.  Input: a u16 (little-endian) length of the images
 * file, the images file, the labels file. */
#include "prep/prep.h"
#include "util/util.h"

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *images, *labels;
	dlt_prep_data d;
	size_t n;

	if (size < 2)
		return 0;
	n = data[0] | (size_t)data[1] << 8;
	data += 2;
	size -= 2;
	n = n < size ? n : size;
	images = fuzz_file("images", data, n);
	labels = fuzz_file("labels", data + n, size - n);
	if (dlt_prep_read_idx(&d, images, labels) == 0) {
		dlt_prep_opts o = { .out = fuzz_path("out.dlt"), .out2 = fuzz_path("out2.dlt"),
				    .split = 0.5, .shuffle = 1, .seed = 1, .codec = DLT_RAW };
		dlt_buf info = { 0 };
		if (dlt_prep_write(&d, &o) == 0 && dlt_prep_info(o.out, 1, &info) < 0)
			abort();
		dlt_buf_free(&info);
		dlt_prep_data_free(&d);
	}
	return 0;
}
