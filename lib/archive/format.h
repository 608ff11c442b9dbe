/* format: the byte layout of archive.h, private to lib/archive, shared by
 * the writer and the reader so that they cannot disagree. */
#ifndef DLT_ARCHIVE_FORMAT_H
#define DLT_ARCHIVE_FORMAT_H

#include <stdint.h>
#include <string.h>

/* Tensor bytes are stored as they lie in memory, and the format says
 * little-endian. */
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the .dlt format stores tensors in host byte order, which must be little-endian"
#endif
/* Every size in the file is a u64 and must be usable as a size_t. */
_Static_assert(SIZE_MAX >= UINT64_MAX, "dlt needs a 64-bit size_t");

#define AR_MAGIC "\x89" "DLT\r\n\x1a\n"
#define AR_END "DLTEND\0\0"
#define AR_VERSION 1
#define AR_HEADER 16		/* magic, version, flags */
#define AR_TRAILER 32		/* index offset, index size, checksum, AR_END */
#define AR_INDEX_FIXED 16	/* "INDX", reserved, count */
#define AR_REC_FIXED 40		/* a record header up to its dims */
#define AR_TAG_TENS "TENS"
#define AR_TAG_META "META"
#define AR_TAG_INDEX "INDX"
/* The codec byte of a record.  Raw and zstd are those of enum dlt_codec;
 * shuffle-zstd (DLT_SHUFFLE_ZSTD) has two layouts, AR_CODEC_PLANES and its
 * first, AR_CODEC_SHUFFLE_FRAME, both shown as DLT_SHUFFLE_ZSTD in
 * dlt_tensor_info.  The layouts are in archive.h. */
#define AR_CODEC_RAW 0
#define AR_CODEC_ZSTD 1
#define AR_CODEC_SHUFFLE_FRAME 2
#define AR_CODEC_PLANES 3
#define AR_MAX_ESIZE 8		/* the widest dtype: the most planes */
#define AR_PLANE_ENTRY 8	/* u64 stored size of a plane, in the plane table */
/* zstd regenerates at most one 128 KiB block from 4 bytes (an RLE block),
 * so a frame cannot expand more than this: it bounds the raw size that a
 * compressed record may claim, and so what a reader allocates for it. */
#define AR_ZSTD_MAX_RATIO 32768

static inline uint32_t ar_get32(const unsigned char *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

static inline uint64_t ar_get64(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

static inline void ar_put32(unsigned char *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static inline void ar_put64(unsigned char *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

/* Zero bytes that follow n bytes to reach a multiple of 8. */
static inline uint64_t ar_pad(uint64_t n)
{
	return (8 - n % 8) % 8;
}

/* A record header's size, its checksum field included. */
static inline uint64_t ar_rec_header_size(unsigned ndim, uint64_t namelen)
{
	return AR_REC_FIXED + 8 * (uint64_t)ndim + namelen + ar_pad(namelen) + 8;
}

/* Elements and bytes of a shape: 0 when the product overflows. */
int ar_shape_size(int dtype, int ndim, const uint64_t *dims, uint64_t *count, uint64_t *bytes);

/* xxh64 of a, then b, then b's zero padding to 8: a record's checksum
 * (a = its header, b = its stored bytes) and the trailer's (a = the file
 * header, b = the index). */
uint64_t ar_hash(const void *a, size_t na, const void *b, size_t nb);

/* xxh64 with seed 0 (shuffle.c): of n bytes, or streamed in pieces. */
typedef struct ar_xxh64_state {
	uint64_t v[4], total;
	unsigned char buf[32];
	size_t nbuf;
} ar_xxh64_state;
uint64_t ar_xxh64(const void *p, size_t n);
void ar_xxh64_init(ar_xxh64_state *h);
void ar_xxh64_update(ar_xxh64_state *h, const void *p, size_t n);
uint64_t ar_xxh64_final(const ar_xxh64_state *h);

/* shuffle-zstd's byte shuffle (shuffle.c): plane k, count bytes at
 * dst + k * count, holds byte k of every element; both return the xxh64
 * of the raw bytes (src, or what ar_unshuffle writes), which they hash as
 * they go.  ar_unshuffle reads plane k from planes[k], which need not lie
 * together.  The _ref ones are the plain loops that the fast paths must
 * match, without the hash; ar_shuffle_simd says whether the fast paths run
 * (1: AVX2). */
uint64_t ar_shuffle(unsigned char *dst, const unsigned char *src, size_t count, size_t esize);
uint64_t ar_unshuffle(unsigned char *dst, const unsigned char *const *planes, size_t count,
		      size_t esize);
void ar_shuffle_ref(unsigned char *dst, const unsigned char *src, size_t count, size_t esize);
void ar_unshuffle_ref(unsigned char *dst, const unsigned char *const *planes, size_t count,
		      size_t esize);
int ar_shuffle_simd(void);

#endif
