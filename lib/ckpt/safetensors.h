/* safetensors: Hugging Face's tensor file format, read and written, so
 * that dlt's weights travel to and from PyTorch, JAX and the rest.
 *
 * Layout (https://github.com/huggingface/safetensors):
 *   u64 LE N, then N bytes of a JSON object (UTF-8, which writers pad with
 *   spaces so that the data starts 8-byte aligned), then the data area:
 *   {"__metadata__": {"KEY": "VALUE", ...},        optional; strings only
 *    "NAME": {"dtype": "F32", "shape": [2, 3], "data_offsets": [B, E]}, ...}
 * B and E are byte offsets into the data area.  Tensor bytes are
 * little-endian, row-major.
 *
 * The reader trusts nothing: N at most DLT_ST_MAX_HEADER and within the
 * file; the header valid UTF-8 and a JSON object of objects; names
 * unique; every dtype known; every shape a list of non-negative integers
 * whose product (and byte size) does not overflow; every data_offsets
 * pair inside the data area and exactly the size the shape and dtype
 * give; no two tensors overlapping, and every byte of the data area
 * belonging to one tensor (the rule of safetensors itself).  Errors are
 * DLT_EINPUT "FILE: safetensors: what", naming the tensor. */
#ifndef DLT_SAFETENSORS_H
#define DLT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

/* The dtypes of safetensors that have a whole number of bytes. */
enum dlt_st_dtype {
	DLT_ST_BOOL = 1, DLT_ST_U8, DLT_ST_I8, DLT_ST_F8_E5M2, DLT_ST_F8_E4M3,
	DLT_ST_F8_E8M0, DLT_ST_I16, DLT_ST_U16, DLT_ST_F16, DLT_ST_BF16, DLT_ST_I32,
	DLT_ST_U32, DLT_ST_F32, DLT_ST_F64, DLT_ST_I64, DLT_ST_U64, DLT_ST_C64,
};

/* The limit of safetensors itself (MAX_HEADER_SIZE). */
#define DLT_ST_MAX_HEADER 100000000ull

const char *dlt_st_dtype_name(int dtype);	/* "F32", ...; NULL if unknown */
int dlt_st_dtype_parse(const char *name);	/* 0 if unknown */
size_t dlt_st_dtype_size(int dtype);		/* 0 if unknown */
/* The archive dtype (archive.h) of a safetensors dtype and back; 0 when
 * the other format has no such type. */
int dlt_st_dtype_to_dlt(int st_dtype);
int dlt_st_dtype_from_dlt(int dlt_dtype);

typedef struct dlt_st_tensor {
	const char *name;
	int dtype;		/* DLT_ST_* */
	int ndim;
	const uint64_t *dims;
	uint64_t count;		/* elements: product of dims */
	uint64_t begin, end;	/* data_offsets, within the data area */
} dlt_st_tensor;

typedef struct dlt_safetensors dlt_safetensors;

/* Opens and checks a file ("-": standard input, read to its end). */
int dlt_safetensors_open(dlt_safetensors **st, const char *path);
/* The same from bytes in memory (copied); name is used in messages. */
int dlt_safetensors_open_mem(dlt_safetensors **st, const void *data, size_t n,
			     const char *name);
void dlt_safetensors_close(dlt_safetensors *st);
const char *dlt_safetensors_path(const dlt_safetensors *st);

/* Tensors in the order of their data (by offset); pointers stay valid
 * until close. */
size_t dlt_safetensors_count(const dlt_safetensors *st);
const dlt_st_tensor *dlt_safetensors_tensor(const dlt_safetensors *st, size_t i);
const dlt_st_tensor *dlt_safetensors_find(const dlt_safetensors *st, const char *name);
/* The bytes of a tensor (end - begin of them), in the mapped file: not
 * aligned to anything. */
const void *dlt_safetensors_data(const dlt_safetensors *st, const dlt_st_tensor *t);
/* Converts a F32, F16 or BF16 tensor into n = t->count floats; other
 * dtypes are DLT_EINPUT. */
int dlt_safetensors_read_f32(const dlt_safetensors *st, const dlt_st_tensor *t,
			     float *out, size_t n);

/* __metadata__, in the file's order. */
size_t dlt_safetensors_meta_count(const dlt_safetensors *st);
const char *dlt_safetensors_meta_key(const dlt_safetensors *st, size_t i);
const char *dlt_safetensors_meta_value(const dlt_safetensors *st, size_t i);
const char *dlt_safetensors_meta_get(const dlt_safetensors *st, const char *key);

/* Writer.  The caller names every tensor up front (the header comes
 * first), then hands their bytes over in the same order, which is the
 * order of their data.  path "-" is standard output; any other path is
 * written to a temporary file renamed into place by close (dlt_ofile).
 * meta holds n_meta (key, value) pairs: 2 * n_meta UTF-8 strings.  On any
 * error the caller calls dlt_safetensors_writer_abort. */
typedef struct dlt_st_entry {
	const char *name;
	int dtype;		/* DLT_ST_* */
	int ndim;
	const uint64_t *dims;
} dlt_st_entry;

typedef struct dlt_safetensors_writer dlt_safetensors_writer;
int dlt_safetensors_create(dlt_safetensors_writer **w, const char *path,
			   const dlt_st_entry *t, size_t n,
			   const char *const *meta, size_t n_meta);
/* The next tensor's bytes, all of them (count * dtype size) at once. */
int dlt_safetensors_write_data(dlt_safetensors_writer *w, const void *data, size_t n);
int dlt_safetensors_writer_close(dlt_safetensors_writer *w);	/* commits; frees */
void dlt_safetensors_writer_abort(dlt_safetensors_writer *w);	/* frees */

#endif
