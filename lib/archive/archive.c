/* archive: dtypes, codecs and the pieces of the format that the writer
 * (writer.c) and the reader (reader.c) share. */
#include <string.h>

#include "archive/archive.h"
#include "archive/format.h"
#include "util/util.h"

static const struct {
	const char *name;
	size_t size;
} dtypes[] = {
	[DLT_F32] = { "f32", 4 },
	[DLT_F16] = { "f16", 2 },
	[DLT_BF16] = { "bf16", 2 },
	[DLT_I32] = { "i32", 4 },
	[DLT_I64] = { "i64", 8 },
	[DLT_U8] = { "u8", 1 },
	[DLT_U16] = { "u16", 2 },
	[DLT_U32] = { "u32", 4 },
};

static int dtype_known(int dtype)
{
	return dtype >= DLT_F32 && dtype <= DLT_U32;
}

size_t dlt_dtype_size(int dtype)
{
	return dtype_known(dtype) ? dtypes[dtype].size : 0;
}

const char *dlt_dtype_name(int dtype)
{
	return dtype_known(dtype) ? dtypes[dtype].name : NULL;
}

int dlt_dtype_parse(const char *name)
{
	for (int d = DLT_F32; d <= DLT_U32; d++)
		if (name && strcmp(name, dtypes[d].name) == 0)
			return d;
	return 0;
}

const char *dlt_codec_name(int codec)
{
	switch (codec) {
	case DLT_RAW:
		return "raw";
	case DLT_ZSTD:
		return "zstd";
	case DLT_SHUFFLE_ZSTD:
		return "shuffle-zstd";
	}
	return NULL;
}

int ar_shape_size(int dtype, int ndim, const uint64_t *dims, uint64_t *count, uint64_t *bytes)
{
	uint64_t n = 1;
	for (int i = 0; i < ndim; i++)
		if (__builtin_mul_overflow(n, dims[i], &n))
			return 0;
	*count = n;
	return !__builtin_mul_overflow(n, (uint64_t)dlt_dtype_size(dtype), bytes);
}

uint64_t ar_hash(const void *a, size_t na, const void *b, size_t nb)
{
	static const unsigned char zero[8];
	ar_xxh64_state h;
	ar_xxh64_init(&h);
	ar_xxh64_update(&h, a, na);
	ar_xxh64_update(&h, b, nb);
	ar_xxh64_update(&h, zero, ar_pad(nb));
	return ar_xxh64_final(&h);
}
