/* prep: raw data (IDX, CSV) into a .dlt dataset archive.
 *
 * A dataset archive holds tensor "x" (the samples, [N, per-sample dims]),
 * tensor "y" (i32 class ids [N], 0..K-1) and one metadata object:
 *   {"kind":"dataset","source":"idx"|"csv","n":N,"shape":[dims],
 *    "num_classes":K,"classes":[names] (string labels only),
 *    "scale":S,"mean":[...],"std":[...]}
 * A dataset without labels (new data for dlt-infer) has no "y", and no
 * num_classes or classes in its metadata.
 * The trainer feeds (x*scale - mean[j % len]) / std[j % len], where j is the
 * element's index within its sample: images carry one global mean and std,
 * CSV one per column.  The stats are those of the (first, training) part
 * written, so a validation part is normalised like the data it is checked
 * against. */
#ifndef DLT_PREP_H
#define DLT_PREP_H

#include <stddef.h>
#include <stdint.h>

#include "archive/archive.h"
#include "util/util.h"

/* Label values above this are refused: num_classes is max label + 1 and
 * the trainer sizes its output layer by it. */
#define DLT_PREP_MAX_CLASSES (1 << 20)

/* A dataset in memory, in file order. */
typedef struct dlt_prep_data {
	const char *source;	/* "idx" or "csv" */
	int dtype;		/* of x: DLT_U8 (images) or DLT_F32 */
	int ndim;		/* per-sample dims */
	uint64_t dims[DLT_MAX_DIMS - 1];
	size_t n;		/* samples */
	size_t sample_size;	/* bytes of one sample of x */
	void *x;
	int32_t *y;		/* NULL: no labels */
	int num_classes;	/* 0 without labels */
	char **classes;		/* names in class-id order, or NULL */
	double scale;		/* the trainer multiplies x by it */
} dlt_prep_data;

void dlt_prep_data_free(dlt_prep_data *d);

/* Reads IDX images (magic 0x00000803) and labels (0x00000801), gzip'd or
 * plain; either path may be "-".  x is u8 [N, 1, rows, cols]. */
int dlt_prep_read_idx(dlt_prep_data *d, const char *images, const char *labels);

enum { DLT_CSV_HEADER_AUTO = -1, DLT_CSV_NO_HEADER = 0, DLT_CSV_HEADER = 1 };

/* Reads a numeric CSV file ("-" for stdin).  label is a header name or a
 * 0-based column index, or NULL for data without labels (every column a
 * feature, d->y NULL); header is one of DLT_CSV_*.  Labels that are all
 * non-negative integers are the class ids; otherwise the distinct strings,
 * sorted bytewise, get ids 0..K-1 and become d->classes.  x is f32 [N, F]
 * with the label column left out. */
int dlt_prep_read_csv(dlt_prep_data *d, const char *path, const char *label, int header);

typedef struct dlt_prep_opts {
	const char *out;	/* "-" for stdout */
	const char *out2;	/* the rest after split, or NULL */
	double split;		/* fraction for out, 0 < split < 1; 0: no split */
	int shuffle;
	uint64_t seed;
	/* of the tensors (archive.h).  DLT_RAW by default: a trainer reads
	 * the whole set at every start, and a raw one is mapped and checked at
	 * memory speed, where zstd costs about a second per GB */
	int codec;
} dlt_prep_opts;

/* Samples that go to the first part: round(n * split), or n without split. */
size_t dlt_prep_split_count(size_t n, double split);

/* Shuffles (when asked), splits, computes the normalisation stats and
 * writes the archive(s).  On error no output file is left behind. */
int dlt_prep_write(const dlt_prep_data *d, const dlt_prep_opts *o);

/* Describes an archive: its tensors, and from a dataset's metadata kind, n,
 * shape, classes with their counts and the normalisation.  Appends text for
 * people, or (json) one JSON object and a newline, to out. */
int dlt_prep_info(const char *path, int json, dlt_buf *out);

#endif
