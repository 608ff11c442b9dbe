/* ckpt: what dlt-ckpt does to checkpoints and model files (their format:
 * train/ckpt.h), over the archive and safetensors modules.
 *
 * Weights are every tensor but the optimiser state ("optim.*").  Files
 * written here are kind "model", their tensors shuffle-zstd at level 1,
 * written atomically (a temporary file renamed into place when complete).
 * Errors name the file and the tensor; DLT_EINPUT for bad input. */
#ifndef DLT_CKPT_CKPT_H
#define DLT_CKPT_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

/* Whether a tensor name is optimiser state. */
int dlt_ckpt_is_optim(const char *name);

/* What a checkpoint holds, as text or (json) one JSON object, appended to
 * out: its training position, the last metrics, its tensors. */
int dlt_ckpt_info(const char *path, int json, dlt_buf *out);

/* Compares every tensor of a and b (maximum absolute difference, relative
 * L2 norm of the difference ||a-b||/||b||), as text or JSON appended to
 * out; *differ counts the tensors that are not bit-equal or not in both.
 * The metadata is not compared. */
int dlt_ckpt_diff(const char *a, const char *b, int json, dlt_buf *out, size_t *differ);

enum { DLT_EXPORT_SAFETENSORS = 1, DLT_EXPORT_NPY };
/* safetensors: out is a file ("-": standard output), whose __metadata__
 * holds the checkpoint's metadata, every value a string (JSON text for a
 * value that is not one), "format": "dlt" added and the checkpoint's own
 * "format" renamed "dlt_format".  npy: out is a directory that gets one
 * NAME.npy per tensor, '/' in names written "__".  weights_only leaves
 * optim.* out and makes the kind "model". */
int dlt_ckpt_export(const char *path, int format, const char *out, int weights_only);

/* A safetensors file into a model file: F32 tensors as they are, F16 and
 * BF16 converted to f32, other dtypes refused; optim.* left out.  The
 * metadata of a file that dlt exported comes back as it was (kind
 * "model"); other files' __metadata__ is kept under "safetensors".
 * config (may be NULL): a config file, checked and stored resolved. */
int dlt_ckpt_import(const char *path, const char *out, const char *config);

/* The element-wise mean of the weights of n checkpoints with the same
 * weight names, dtypes (f32) and shapes; the metadata of the first,
 * stripped. */
int dlt_ckpt_average(const char *const *paths, int n, const char *out);

/* The weights alone, with the metadata less the training keys (step,
 * epoch, batch, epochs, metrics, best, loss_scale, time). */
int dlt_ckpt_strip(const char *path, const char *out);

/* A .npy file (format 1.0, little-endian) of dtype (archive.h; not bf16,
 * which numpy lacks), written atomically. */
int dlt_npy_write(const char *path, int dtype, int ndim, const uint64_t *dims,
		  const void *data);

#endif
