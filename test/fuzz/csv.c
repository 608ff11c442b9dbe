/* dlt-prep csv (lib/prep/csv.c, then dataset.c): a CSV file read with
 * each header mode and y choice that the first byte picks (bits 0-1:
 * auto, none, header; bits 2-3: no label, column 0, the last column by
 * index, a column named "label"; bits 6-7: class labels, float targets,
 * 0/1 labels, classes forced; targets and labels take columns 1 and the
 * choice), written as a dataset archive, which is then described.  The
 * rest is the file. */
#include "prep/prep.h"
#include "util/util.h"

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int headers[] = { DLT_CSV_HEADER_AUTO, DLT_CSV_NO_HEADER, DLT_CSV_HEADER,
				       DLT_CSV_HEADER_AUTO };
	static const char *const labels[] = { NULL, "0", "3", "label" };
	static const char *const lists[] = { NULL, "1,0", "1,3", "1,label" };
	const char *path;
	dlt_prep_data d;
	dlt_csv_opts co;
	int y;

	if (size < 1)
		return 0;
	y = data[0] >> 6;
	co = (dlt_csv_opts){ .header = headers[data[0] & 3],
			     .kind = y == 1 ? DLT_CSV_TARGETS : y == 2 ? DLT_CSV_LABELS :
				     DLT_CSV_CLASSES,
			     .cols = (y == 1 || y == 2 ? lists : labels)[data[0] >> 2 & 3],
			     .classes = y == 3 };
	path = fuzz_file("data.csv", data + 1, size - 1);
	if (dlt_prep_read_csv(&d, path, &co) == 0) {
		dlt_prep_opts o = { .out = fuzz_path("out.dlt"), .out2 = fuzz_path("out2.dlt"),
				    .split = 0.75, .shuffle = data[0] >> 4 & 1, .seed = 7,
				    .codec = data[0] >> 5 & 1 ? DLT_SHUFFLE_ZSTD : DLT_RAW };
		dlt_buf info = { 0 };
		if (dlt_prep_write(&d, &o) == 0 && dlt_prep_info(o.out, 0, &info) < 0)
			abort();
		dlt_buf_free(&info);
		dlt_prep_data_free(&d);
	}
	return 0;
}
