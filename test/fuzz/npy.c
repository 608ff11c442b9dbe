/* dlt-prep npy (lib/prep/npy.c, then dataset.c): NumPy arrays, .npy or
 * .npz, read from files and written as a dataset archive, which is then
 * described.  The first byte picks: bit 0, a second file for y; bits 1-2,
 * the array names asked of an .npz (none, x and y, arr_0 and arr_1, a and
 * none); bit 3, shuffle; bit 4, info as JSON.  With bit 0, a u16
 * (little-endian) length of the file of x follows, then the file of x and
 * the file of y; without, the rest is the file of x. */
#include "prep/prep.h"
#include "util/util.h"

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const xnames[] = { NULL, "x", "arr_0", "a" };
	static const char *const ynames[] = { NULL, "y", "arr_1", NULL };
	const char *xpath, *ypath = NULL;
	dlt_prep_data d;
	size_t n;
	int mode;

	if (size < 1)
		return 0;
	mode = data[0];
	data++;
	size--;
	if (mode & 1) {
		if (size < 2)
			return 0;
		n = data[0] | (size_t)data[1] << 8;
		data += 2;
		size -= 2;
		n = n < size ? n : size;
		xpath = fuzz_file("x.npy", data, n);
		ypath = fuzz_file("y.npy", data + n, size - n);
	} else {
		xpath = fuzz_file("x.npy", data, size);
	}
	if (dlt_prep_read_npy(&d, xpath, ypath, xnames[mode >> 1 & 3], ynames[mode >> 1 & 3]) == 0) {
		dlt_prep_opts o = { .out = fuzz_path("out.dlt"), .out2 = fuzz_path("out2.dlt"),
				    .split = 0.5, .shuffle = mode >> 3 & 1, .seed = 3,
				    .codec = DLT_RAW };
		dlt_buf info = { 0 };
		if (dlt_prep_write(&d, &o) == 0 && dlt_prep_info(o.out, mode >> 4 & 1, &info) < 0)
			abort();
		dlt_buf_free(&info);
		dlt_prep_data_free(&d);
	}
	return 0;
}
