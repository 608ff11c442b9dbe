/* prep: raw data (IDX, CSV, NumPy arrays, image folders) into a .dlt
 * dataset archive.
 *
 * A dataset archive holds tensor "x" (the samples, [N, per-sample dims]),
 * tensor "y" (the targets) and one metadata object:
 *   {"kind":"dataset","source":"idx"|"csv"|...,"n":N,"shape":[dims],
 *    "num_classes":K,"classes":[names] (string labels only),
 *    "scale":S,"mean":[...],"std":[...]}
 * y's dtype says the task (dlt(7), ARCHIVE KINDS):
 *   i32 [N]      class ids 0..K-1 (classification);
 *   f32 [N, K]   K float targets a sample (regression), with "targets"
 *                (column names, when known), "target_mean" and
 *                "target_std" (the first part's, as for x) in the metadata;
 *   u8 [N, K]    K labels of 0 or 1 a sample (multi-label), with
 *                "labels" (their names) in the metadata.
 * A dataset without targets (new data for dlt-infer) has no "y", and no
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
	int32_t *y;		/* class ids, or NULL */
	int num_classes;	/* 0 without class ids */
	char **classes;		/* names in class-id order, or NULL */
	/* Instead of y: float targets (t_dtype DLT_F32) or multi-hot labels
	 * (DLT_U8, each 0 or 1), t_width a sample; t_dtype 0: none. */
	int t_dtype, t_width;
	void *t;
	char **t_names;		/* t_width names, or NULL */
	double scale;		/* the trainer multiplies x by it */
	/* x not read yet (x NULL, IDX images): read_x(x_ctx, buf, k) reads
	 * the next k samples in file order into buf, and with the last of
	 * them checks the end of the input.  dlt_prep_write streams them
	 * into the archive; x_close(x_ctx) in dlt_prep_data_free. */
	int (*read_x)(void *ctx, void *buf, size_t k);
	void (*x_close)(void *ctx);
	void *x_ctx;
} dlt_prep_data;

void dlt_prep_data_free(dlt_prep_data *d);

/* Reads IDX images (magic 0x00000803) and labels (0x00000801), gzip'd or
 * plain; either path may be "-".  x is u8 [N, 1, rows, cols], left in
 * the file (read_x) after its header: dlt_prep_write streams it, so a set
 * larger than memory converts.  A damaged or short images file is found
 * there, before any output is committed. */
int dlt_prep_read_idx(dlt_prep_data *d, const char *images, const char *labels);

enum { DLT_CSV_HEADER_AUTO = -1, DLT_CSV_NO_HEADER = 0, DLT_CSV_HEADER = 1 };

/* What the y columns of a CSV file are */
enum { DLT_CSV_CLASSES, DLT_CSV_TARGETS, DLT_CSV_LABELS };

typedef struct dlt_csv_opts {
	int header;		/* DLT_CSV_HEADER_AUTO, _NO_HEADER or _HEADER */
	int kind;		/* DLT_CSV_CLASSES, _TARGETS or _LABELS */
	/* CLASSES: one column, a header name or a 0-based index, or NULL for
	 * data without labels (every column a feature, no y).  TARGETS and
	 * LABELS: a comma-separated list of such columns. */
	const char *cols;
	int classes;		/* take labels that look continuous as classes all the same */
} dlt_csv_opts;

/* Reads a numeric CSV file ("-" for stdin); x is f32 [N, F], the y
 * columns left out.  CLASSES: labels that are all non-negative integers
 * are the class ids; otherwise the distinct strings, sorted bytewise, get
 * ids 0..K-1 and become d->classes, unless they look continuous (every
 * one a number, and more than half of them distinct and more than half
 * not integers): that is refused, naming --target, without o->classes.
 * TARGETS: float targets, t f32 [N, K]; LABELS: multi-hot labels, t u8
 * [N, K], each cell 0 or 1; their header names become t_names. */
int dlt_prep_read_csv(dlt_prep_data *d, const char *path, const dlt_csv_opts *o);

/* Reads NumPy arrays: x from xpath, a .npy file or an .npz archive (its
 * array xname, "x" by default, or arr_0 as np.savez names arrays given
 * without names); y from ypath (a .npy, or an .npz's array yname or "y"),
 * or without ypath from the .npz of x (its array yname, or "y" or arr_1
 * when it has one: none means a dataset without targets).  Either path
 * may be "-".  x of u8 stays u8 (scale 1/255), others become f32, [N,
 * ...] with N the first axis (a 1-D x is one feature a sample).  y of
 * integers or bools of [N] is class ids; floats of [N] or [N, K] are
 * float targets; integers or bools of [N, K] are multi-hot labels. */
int dlt_prep_read_npy(dlt_prep_data *d, const char *xpath, const char *ypath, const char *xname,
		      const char *yname);

/* Images (lib/prep/images.c).  An image of more pixels than this (8192 x
 * 8192) is refused from its header, before anything of its size is
 * allocated; so is a --size of more. */
#define DLT_PREP_MAX_PIXELS (1u << 26)

typedef struct dlt_prep_image {
	const char *format;	/* "PNG" or "JPEG" */
	uint32_t h, w;
	int grey;		/* one channel in the file: PNG grey, JPEG of one component */
} dlt_prep_image;

/* The header of a PNG or JPEG image of n bytes; name is for messages. */
int dlt_prep_image_info(const void *data, size_t n, const char *name, dlt_prep_image *info);

/* Decodes a PNG or JPEG image of n bytes into out, u8 [c, oh, ow]: c 1
 * (grey, by PIL's convert("L") of RGB) or 3 (RGB; grey repeated), alpha
 * dropped, 16-bit samples scaled to 8; then, when the image is not oh x
 * ow, resized as torchvision's Resize (PIL's antialiased bilinear) so it
 * covers oh x ow, and cropped as CenterCrop.  Damaged or hostile data is
 * DLT_EINPUT with a message that starts with name; libpng and libjpeg
 * print nothing. */
int dlt_prep_decode_image(const void *data, size_t n, const char *name, int c, uint32_t oh,
			  uint32_t ow, uint8_t *out);

typedef struct dlt_prep_image_opts {
	uint32_t h, w;		/* every image resized and cropped to h x w; 0: none */
	int channels;		/* 1 or 3; 0: 1 if the first image is grey, else 3 */
	int threads;		/* decoding at once; 0: dlt_env_threads() */
} dlt_prep_image_opts;

/* Reads a folder of class folders of PNG and JPEG images, as torchvision's
 * ImageFolder (the order and the files read: lib/prep/images.c).  x is u8
 * [N, C, H, W] with scale 1/255, y the class ids, classes the folders'
 * names.  Without a size every image must be the first one's size. */
int dlt_prep_read_images(dlt_prep_data *d, const char *dir, const dlt_prep_image_opts *o);

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
 * writes the archive(s).  On error no output file is left behind.  Data
 * still in its file (read_x) of u8 is streamed in chunks, its stats
 * taken on the way, unless it is shuffled, split or compressed: those
 * read it all into memory first. */
int dlt_prep_write(const dlt_prep_data *d, const dlt_prep_opts *o);

/* Describes an archive: its tensors, and from a dataset's metadata kind, n,
 * shape, classes with their counts and the normalisation.  Appends text for
 * people, or (json) one JSON object and a newline, to out. */
int dlt_prep_info(const char *path, int json, dlt_buf *out);

#endif
