/* archive: the .dlt tensor archive, one container for datasets,
 * checkpoints and predictions.
 *
 * Layout (little-endian, every record 8-byte aligned):
 *   header   16 bytes  magic "\x89DLT\r\n\x1a\n", u32 version (1), u32 flags (0)
 *   records  tensor and metadata records, one after another
 *   index    u32 "INDX", u32 reserved 0, u64 count, count x u64 record offset
 *   trailer  32 bytes  u64 index offset, u64 index size,
 *                      u64 xxh64(header bytes + index bytes), "DLTEND\0\0"
 * A record:
 *   u32 tag ("TENS" or "META"), u32 header size (multiple of 8),
 *   u8 dtype, u8 codec, u8 ndim, u8 0, u32 name length,
 *   u64 stored size, u64 raw size, u64 xxh64 of the raw bytes,
 *   ndim x u64 dims, name bytes, zero padding to 8,
 *   u64 xxh64 of the record (header bytes before this field and the
 *       stored bytes with their zero padding),
 *   stored bytes, zero padding to 8.
 * The codec byte says what the stored bytes are:
 *   0 raw      the raw bytes (stored size = raw size)
 *   1 zstd     one zstd frame of the raw bytes
 *   3 shuffle-zstd: the raw bytes as esize byte planes (plane k holds byte k
 *              of every element): esize x u64 plane sizes, then the planes
 *              one after another, each as it is (its size is the element
 *              count) or as one zstd frame of it (its size is less).  The
 *              writer picks per plane: the low bytes of floats are noise and
 *              stay raw, the sign-and-exponent byte gets Huffman codes (a
 *              frame of literals only), zeros and long runs get zstd's
 *              matches too; a frame is kept where it saves 2%.  A tensor
 *              under 16 KiB is kept raw unless a plane has runs or one
 *              dominant byte: a zstd call's fixed cost is more than the
 *              few bytes Huffman codes would save there.
 *   2 shuffle-zstd in its first layout: one zstd frame of all the planes.
 *              The writer keeps it for tensors of fewer than 64 elements,
 *              where a table of plane sizes costs more than it saves.
 * A compressed record (1 to 3) is smaller than its raw size, and the raw
 * size is at most AR_ZSTD_MAX_RATIO (format.h) times the stored size.
 * Codecs 2 and 3 both show as DLT_SHUFFLE_ZSTD, "shuffle-zstd": the name
 * says what the codec does, whichever layout a tensor has.  A reader older
 * than codec 3 refuses an archive with one as "unknown codec 3".
 * So every byte of the file is covered by a checksum or checked to have the
 * one value it may have.  The writer never seeks a stream, so it can write
 * to a pipe (records in pieces and placed ahead, below, aside); the reader
 * maps a file, or reads a stream into memory, and checks every size and
 * offset against the file length before use. */
#ifndef DLT_ARCHIVE_H
#define DLT_ARCHIVE_H

#include <stddef.h>
#include <stdint.h>

/* u16 and u32 hold token ids (lib/prep/tokens.h) */
enum dlt_dtype { DLT_F32 = 1, DLT_F16, DLT_BF16, DLT_I32, DLT_I64, DLT_U8, DLT_U16, DLT_U32 };
enum dlt_codec { DLT_RAW = 0, DLT_ZSTD = 1, DLT_SHUFFLE_ZSTD = 2 };

#define DLT_MAX_DIMS 8
#define DLT_MAX_NAME 1024	/* bytes of a tensor name */
#define DLT_MAX_TENSORS (1u << 20)

size_t dlt_dtype_size(int dtype);	/* 0 for an unknown dtype */
const char *dlt_dtype_name(int dtype);	/* "f32", ...; NULL if unknown */
int dlt_dtype_parse(const char *name);	/* 0 if unknown */
const char *dlt_codec_name(int codec);	/* "raw", "zstd", "shuffle-zstd"; NULL if unknown */

/* What the reader knows of a tensor; pointers stay valid until close. */
typedef struct dlt_tensor_info {
	const char *name;
	int dtype, codec, ndim;
	uint64_t dims[DLT_MAX_DIMS];
	uint64_t count;		/* elements: product of dims */
	uint64_t raw_size, stored_size;
	uint64_t offset;	/* of the record in the file */
} dlt_tensor_info;

typedef struct dlt_archive_writer dlt_archive_writer;
typedef struct dlt_archive dlt_archive;

/* Writer.  path "-" streams to stdout; any other path is written to a
 * temporary file that replaces path only at dlt_archive_writer_close.
 * On any error the caller calls dlt_archive_writer_abort. */
int dlt_archive_create(dlt_archive_writer **w, const char *path);
/* level: zstd level for DLT_ZSTD/DLT_SHUFFLE_ZSTD (0 for default 3).  A
 * compressed codec falls back to DLT_RAW for a tensor it does not shrink. */
int dlt_archive_write_tensor(dlt_archive_writer *w, const char *name, int dtype,
			     int ndim, const uint64_t *dims, const void *data,
			     int codec, int level);
/* A raw tensor written in pieces, for data larger than memory: begin
 * declares it, write_piece appends bytes (in order, of any sizes), end
 * checks that they add up to its size and completes the record, which is
 * byte for byte what dlt_archive_write_tensor writes with DLT_RAW.  The
 * record's header holds the checksums of the bytes and precedes them, so
 * end goes back for it: to a file, the writer reads the pieces back once
 * and writes the header over a placeholder; to standard output (or a
 * device) it keeps the pieces in a temporary file (tmpfile(3), in
 * $TMPDIR) until end.  No other record may be written in between. */
int dlt_archive_begin_tensor(dlt_archive_writer *w, const char *name, int dtype, int ndim,
			     const uint64_t *dims);
int dlt_archive_write_piece(dlt_archive_writer *w, const void *data, size_t n);
int dlt_archive_end_tensor(dlt_archive_writer *w);
/* Records placed ahead: raw tensors whose bytes other processes write
 * into the writer's temporary file at the same time (a checkpoint's
 * shards, each rank its own ranges: lib/train/ckpt.h), at places that
 * each computes alike.  They come first, one after another from
 * DLT_ARCHIVE_FIRST_RECORD, each taking dlt_archive_raw_record_size
 * bytes (the record's header, then its bytes from *data on, then zeros
 * to 8).  dlt_archive_reserve, before any record, leaves that room as a
 * hole of zeros in the file (a path's only: not standard output), whose
 * name dlt_archive_temp_path gives the other writers (NULL for standard
 * output); they write their bytes there with pwrite.  Once they all have
 * (and synced and closed the file), dlt_archive_adopt_tensor takes each
 * record in file order: it reads its bytes back twice, for the raw
 * checksum the header holds and then for the record's, which covers the
 * header, and writes the header.  The record is then byte for byte what
 * dlt_archive_write_tensor writes with DLT_RAW, and the other records
 * follow the last one adopted.  raw_record_size returns 0 for a tensor
 * that cannot be written (name, dtype or shape). */
#define DLT_ARCHIVE_FIRST_RECORD 16
uint64_t dlt_archive_raw_record_size(const char *name, int dtype, int ndim, const uint64_t *dims,
				     uint64_t *data);
int dlt_archive_reserve(dlt_archive_writer *w, uint64_t bytes);
const char *dlt_archive_temp_path(const dlt_archive_writer *w);
int dlt_archive_adopt_tensor(dlt_archive_writer *w, const char *name, int dtype, int ndim,
			     const uint64_t *dims);
/* A metadata record: one JSON object (UTF-8).  At most one per archive. */
int dlt_archive_write_meta(dlt_archive_writer *w, const char *json);
int dlt_archive_writer_close(dlt_archive_writer *w);	/* index, trailer, commit; frees */
void dlt_archive_writer_abort(dlt_archive_writer *w);	/* removes the temp file; frees */
/* Two archives that make one whole (a training set and its held-out
 * part): both committed, or neither; where the second fails, the first,
 * already in place at first_path, is removed again ("-": it has gone to
 * standard output).  second may be NULL. */
int dlt_archive_writers_close(dlt_archive_writer *first, dlt_archive_writer *second,
			      const char *first_path);

/* Reader.  path "-" reads standard input to its end.  Opening checks the
 * header, trailer and index (and their checksum), every record header's
 * sizes and offsets, and the metadata record's checksum; a tensor's record
 * checksum, which covers its header too, is checked when it is read.
 * Errors name the file ("standard input" for "-").  Reads of one archive
 * may run in several threads at once. */
int dlt_archive_open(dlt_archive **a, const char *path);
/* The same from bytes in memory (copied); name is used in messages. */
int dlt_archive_open_mem(dlt_archive **a, const void *data, size_t n, const char *name);
void dlt_archive_close(dlt_archive *a);
const char *dlt_archive_path(const dlt_archive *a);
uint64_t dlt_archive_file_size(const dlt_archive *a);

size_t dlt_archive_count(const dlt_archive *a);	/* tensors, metadata excluded */
const dlt_tensor_info *dlt_archive_tensor(const dlt_archive *a, size_t i);
const dlt_tensor_info *dlt_archive_find(const dlt_archive *a, const char *name);	/* NULL if absent */
/* The metadata JSON, NUL-terminated, or NULL when the archive has none. */
const char *dlt_archive_meta(const dlt_archive *a);

/* Decodes a tensor into out (raw_size bytes) and checks both checksums.
 * Errors name the file and the tensor. */
int dlt_archive_read(dlt_archive *a, const dlt_tensor_info *t, void *out, size_t out_size);
/* A raw tensor's bytes where they lie (the mapping, or the copy in
 * memory), valid until close, after both checksums are checked: no copy,
 * so a dataset of gigabytes loads at memory speed.  A compressed tensor
 * gets *data = NULL and no check: read it instead. */
int dlt_archive_view(dlt_archive *a, const dlt_tensor_info *t, const void **data);
/* Looks a tensor up by name, checks its dtype and rank (ndim < 0: any), and
 * reads it into a new malloc'd buffer. */
int dlt_archive_read_alloc(dlt_archive *a, const char *name, int dtype, int ndim,
			   const dlt_tensor_info **info, void **out);
/* Checks every checksum of every record; errors name the first damaged one. */
int dlt_archive_verify(dlt_archive *a);

#endif
