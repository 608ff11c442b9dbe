/* writer: appends records and never seeks, so an archive can go down a
 * pipe; the index and trailer follow the last record.  Two exceptions,
 * for a file of its own only: a tensor written in pieces gets its header
 * over a placeholder, and records placed ahead (dlt_archive_reserve) get
 * theirs where other processes wrote their bytes. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
/* for ZSTD_compressSequences: a frame of literals only, Huffman-coded */
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include "archive/archive.h"
#include "archive/format.h"
#include "util/util.h"

/* The tensor names written so far, an open-addressing hash set: a dataset
 * can hold many tensors and each needs its duplicate check. */
struct nameset {
	char **slot;
	size_t cap, n;		/* cap: a power of two, at most half full */
};

struct dlt_archive_writer {
	dlt_ofile out;
	char *name;		/* for messages */
	uint64_t off;		/* bytes written so far */
	dlt_buf index;		/* the index as it will be written */
	uint64_t nrec;
	struct nameset names;
	int has_meta;
	int rc;			/* the first failure after which the output is unusable */
	struct scratch *x;	/* NULL until a tensor is compressed */
	struct pieces *pc;	/* a tensor being written in pieces, or NULL */
	/* records placed ahead (dlt_archive_reserve): [placed_at, placed_end)
	 * of the file is still to be adopted; pfd reads their bytes back and
	 * writes their headers, -1 until the first is adopted */
	uint64_t placed_at, placed_end;
	int pfd;
};

_Static_assert(DLT_ARCHIVE_FIRST_RECORD == AR_HEADER, "archive.h's first record is format.h's");

/* A raw tensor written in pieces (dlt_archive_begin_tensor).  The record
 * header holds both checksums and comes first, so the header goes in
 * last: over a placeholder in the file, which is read back for the
 * record checksum, or, where the output cannot be read back (standard
 * output, a pipe), before the pieces copied from a temporary file. */
struct pieces {
	char *name;
	int dtype, ndim;
	uint64_t dims[DLT_MAX_DIMS];
	uint64_t bytes, got;	/* the tensor's size; written so far */
	uint64_t rec_off;	/* w->off of the record */
	off_t pos;		/* in place: the file position of the record */
	size_t hsize;		/* of its header */
	ar_xxh64_state raw;
	int rfd;		/* in place: the file, for reading back; else -1 */
	FILE *spool;		/* else: the pieces, until end */
};

/* What compressing takes besides the data: a zstd context and buffers
 * for the shuffled planes and the frames, grown to the largest tensor and
 * kept until the writer closes. */
struct scratch {
	ZSTD_CCtx *zc;
	unsigned char *shuf, *zbuf;	/* the shuffled planes; compressed bytes */
	size_t shuf_cap, zbuf_cap;
};

static void scratch_free(struct scratch *x)
{
	if (!x)
		return;
	ZSTD_freeCCtx(x->zc);
	free(x->shuf);
	free(x->zbuf);
	free(x);
}

static int scratch_init(dlt_archive_writer *w)
{
	if (!w->x && !(w->x = dlt_calloc(1, sizeof(*w->x))))
		return DLT_ENOMEM;
	if (!w->x->zc && !(w->x->zc = ZSTD_createCCtx()))
		return dlt_error(DLT_ENOMEM, "out of memory (zstd context)");
	return 0;
}

/* The slot that holds name, or the empty one where it belongs. */
static char **nameset_slot(const struct nameset *s, const char *name)
{
	size_t mask = s->cap - 1;
	size_t i = dlt_xxh64(name, strlen(name), 0) & mask;
	while (s->slot[i] && strcmp(s->slot[i], name) != 0)
		i = (i + 1) & mask;
	return &s->slot[i];
}

static int nameset_grow(struct nameset *s)
{
	size_t cap = s->cap ? s->cap * 2 : 64;
	struct nameset t = { dlt_calloc(cap, sizeof(char *)), cap, s->n };
	if (!t.slot)
		return DLT_ENOMEM;
	for (size_t i = 0; i < s->cap; i++)
		if (s->slot[i])
			*nameset_slot(&t, s->slot[i]) = s->slot[i];
	free(s->slot);
	*s = t;
	return 0;
}

/* 1 if name was added, 0 if it was there already. */
static int nameset_add(struct nameset *s, const char *name)
{
	char **slot;
	int rc;
	if (2 * (s->n + 1) > s->cap && (rc = nameset_grow(s)) < 0)
		return rc;
	slot = nameset_slot(s, name);
	if (*slot)
		return 0;
	if (!(*slot = dlt_strdup(name)))
		return DLT_ENOMEM;
	s->n++;
	return 1;
}

static void nameset_free(struct nameset *s)
{
	for (size_t i = 0; i < s->cap; i++)
		free(s->slot[i]);
	free(s->slot);
}

static void pieces_free(struct pieces *pc)
{
	if (!pc)
		return;
	if (pc->rfd >= 0)
		close(pc->rfd);
	if (pc->spool)
		fclose(pc->spool);
	free(pc->name);
	free(pc);
}

static void writer_free(dlt_archive_writer *w)
{
	if (w->pfd >= 0)
		close(w->pfd);
	pieces_free(w->pc);
	nameset_free(&w->names);
	dlt_buf_free(&w->index);
	scratch_free(w->x);
	free(w->name);
	free(w);
}

/* Records placed ahead come first in the file, so the others wait for
 * them: an error while some are not yet adopted. */
static int placed_pending(dlt_archive_writer *w)
{
	if (w->placed_at == w->placed_end)
		return 0;
	return dlt_error(DLT_EINPUT, "%s: %llu bytes of records placed ahead not yet adopted",
			 w->name, (unsigned long long)(w->placed_end - w->placed_at));
}

/* Whether a record may begin now: not after a failure, nor while a
 * tensor is written in pieces, nor (but for an adopted one: placed) while
 * placed_pending. */
static int record_may_begin(dlt_archive_writer *w, int placed)
{
	if (w->rc < 0)
		return w->rc;
	if (w->pc)
		return dlt_error(DLT_EINPUT, "%s: tensor '%s' is being written in pieces",
				 w->name, w->pc->name);
	return placed ? 0 : placed_pending(w);
}

/* The index's entry of the record at `at` (a file offset) */
static int index_add(dlt_archive_writer *w, uint64_t at)
{
	unsigned char off[8];
	int rc;
	ar_put64(off, at);
	if ((rc = dlt_buf_append(&w->index, off, 8)) < 0)
		return rc;
	w->nrec++;
	return 0;
}

/* Writes n bytes; a failure is sticky, so that close never commits a
 * file with a hole in it. */
static int emit(dlt_archive_writer *w, const void *p, size_t n)
{
	if (w->rc < 0)
		return w->rc;
	if (n && fwrite(p, 1, n, w->out.fp) != n)
		return w->rc = dlt_error_errno(DLT_EIO, "%s", w->name);
	w->off += n;
	return 0;
}

static void file_header(unsigned char h[AR_HEADER])
{
	memcpy(h, AR_MAGIC, 8);
	ar_put32(h + 8, AR_VERSION);
	ar_put32(h + 12, 0);
}

int dlt_archive_create(dlt_archive_writer **wp, const char *path)
{
	static const unsigned char index_fixed[AR_INDEX_FIXED];
	unsigned char h[AR_HEADER];
	dlt_archive_writer *w;
	int rc;

	*wp = NULL;
	if (!(w = dlt_calloc(1, sizeof(*w))))
		return DLT_ENOMEM;
	w->pfd = -1;
	w->name = dlt_strdup(strcmp(path, "-") == 0 ? "standard output" : path);
	/* the index's fixed part is filled in at close */
	if (!w->name || (rc = dlt_buf_append(&w->index, index_fixed, AR_INDEX_FIXED)) < 0) {
		writer_free(w);
		return DLT_ENOMEM;
	}
	if ((rc = dlt_ofile_open(&w->out, path)) < 0) {
		writer_free(w);
		return rc;
	}
	file_header(h);
	if ((rc = emit(w, h, sizeof(h))) < 0) {
		dlt_archive_writer_abort(w);
		return rc;
	}
	*wp = w;
	return 0;
}

/* A record's bytes as stored, in pieces that go out one after another, so
 * that a raw plane is written from where it lies, never copied. */
struct stored {
	int codec;		/* the record's codec byte */
	uint64_t n;		/* bytes in all pieces */
	uint64_t raw_hash;	/* xxh64 of the raw bytes */
	int hashed;		/* raw_hash is set */
	int npiece;
	struct piece {
		const void *p;
		size_t n;
	} piece[1 + AR_MAX_ESIZE];
	unsigned char table[AR_PLANE_ENTRY * AR_MAX_ESIZE];	/* AR_CODEC_PLANES */
};

static void stored_raw(struct stored *s, const void *data, size_t n)
{
	s->hashed = 0;
	s->codec = AR_CODEC_RAW;
	s->n = n;
	s->npiece = 1;
	s->piece[0] = (struct piece){ data, n };
}

/* Makes *buf hold at least n bytes; what it held is not kept. */
static int reserve(unsigned char **buf, size_t *cap, size_t n)
{
	if (n <= *cap)
		return 0;
	free(*buf);
	*cap = 0;
	if (!(*buf = dlt_malloc(n)))
		return DLT_ENOMEM;
	*cap = n;
	return 0;
}

static int zstd_failed(dlt_archive_writer *w, size_t z)
{
	return dlt_error(DLT_EFAIL, "%s: zstd: %s", w->name, ZSTD_getErrorName(z));
}

/* One frame of src (the data, or for AR_CODEC_SHUFFLE_FRAME its planes)
 * as codec, where that is smaller. */
static int encode_zstd(dlt_archive_writer *w, struct stored *s, const void *src, size_t n,
		       int level, int codec)
{
	struct scratch *x = w->x;
	size_t z;
	if (reserve(&x->zbuf, &x->zbuf_cap, ZSTD_compressBound(n)) < 0)
		return DLT_ENOMEM;
	z = ZSTD_compressCCtx(x->zc, x->zbuf, x->zbuf_cap, src, n, level);
	if (ZSTD_isError(z))
		return zstd_failed(w, z);
	/* not smaller: raw reads faster and the reader insists on it */
	if (z < n) {
		s->codec = codec;
		s->n = z;
		s->piece[0] = (struct piece){ x->zbuf, z };
	}
	return 0;
}

/* How a plane is stored.  The byte planes of floats differ in kind: the
 * low mantissa bytes are noise, which zstd spends time failing to shrink;
 * the sign-and-exponent byte takes few values in no long repeats, where
 * Huffman codes alone (a zstd frame of literals) come within a few percent
 * of its entropy at several times zstd's speed, as zstd's match finder
 * finds short matches all the time and each costs; zeros and long runs
 * (optimiser state of inputs that never fire, sparse or smooth tensors)
 * are where matches pay, and there zstd is fast too. */
enum { PLANE_RAW, PLANE_HUFFMAN, PLANE_ZSTD };

#define SAMPLE_RUN 256		/* elements, contiguous */
#define SAMPLE_RUNS 16		/* spread over the tensor */
#define SAMPLE_MAX (SAMPLE_RUN * SAMPLE_RUNS)

static float nlog2n[SAMPLE_MAX + 1];	/* n log2 n */
static pthread_once_t nlog2n_once = PTHREAD_ONCE_INIT;

static void nlog2n_init(void)
{
	for (int i = 1; i <= SAMPLE_MAX; i++)
		nlog2n[i] = i * log2(i);
}

/* Each plane's method, from a sample of the elements: where the commonest
 * byte is half the plane or three bytes in four repeat the one before,
 * zstd; else Huffman where the sample's entropy (with the Miller-Madow
 * correction of its bias) and the cost of a code table promise to save
 * 10%; else raw: Huffman coding costs about 1 ns a byte here, writing a
 * byte to tmpfs 0.4, so a plane that would lose less than a tenth is faster
 * stored raw, and the size it gives up is small.  The sample costs a few
 * percent of the rest, where a trial compression of each plane would cost
 * as much as coding it. */
static void plan_planes(int *method, const unsigned char *data, size_t count, size_t esize)
{
	uint32_t hist[AR_MAX_ESIZE][256], hist2[AR_MAX_ESIZE][256], same[AR_MAX_ESIZE] = { 0 };
	size_t runs = count <= SAMPLE_MAX ? 1 : SAMPLE_RUNS;
	size_t len = runs == 1 ? count : SAMPLE_RUN, n = runs * len;

	pthread_once(&nlog2n_once, nlog2n_init);
	memset(hist, 0, esize * sizeof(hist[0]));
	memset(hist2, 0, esize * sizeof(hist2[0]));
	for (size_t r = 0; r < runs; r++) {
		const unsigned char *p = data + (runs == 1 ? 0 : (count - len) / (runs - 1) * r) * esize;
		/* a plane at a time, two elements a step into two histograms:
		 * a run of one byte value would otherwise wait on each count */
		for (size_t k = 0; k < esize; k++) {
			uint32_t *h0 = hist[k], *h1 = hist2[k], eq = 0;
			unsigned prev = p[k];
			size_t i;
			for (i = 0; i + 2 <= len; i += 2) {
				unsigned b0 = p[i * esize + k], b1 = p[(i + 1) * esize + k];
				h0[b0]++;
				h1[b1]++;
				eq += (b0 == prev) + (b1 == b0);
				prev = b1;
			}
			if (i < len) {
				h0[p[i * esize + k]]++;
				eq += p[i * esize + k] == prev;
			}
			same[k] += eq - 1;	/* not the first byte against itself */
		}
	}
	for (size_t k = 0; k < esize; k++) {
		uint32_t top = 0, symbols = 0;
		double sum = 0, bits, bytes;
		for (int v = 0; v < 256; v++) {
			uint32_t c = hist[k][v] + hist2[k][v];
			sum += nlog2n[c];
			top = c > top ? c : top;
			symbols += c != 0;
		}
		bits = log2(n) - sum / n + (symbols - 1) / (2 * M_LN2 * n);
		/* the code table's 4 bits a symbol, the frame and block headers */
		bytes = count * bits / 8 + symbols / 2 + 16 + 3 * (count >> 17);
		if (2 * top >= n || 4 * same[k] >= 3 * (n - runs))
			method[k] = PLANE_ZSTD;
		else if (bytes < 0.90 * count)
			method[k] = PLANE_HUFFMAN;
		else
			method[k] = PLANE_RAW;
	}
}

/* One plane as a zstd frame; 0 when it does not save 1/50 of its size. */
static int compress_plane(dlt_archive_writer *w, size_t *z, unsigned char *dst, size_t cap,
			  const unsigned char *src, size_t count, int method, int level)
{
	static const ZSTD_Sequence no_sequences[1];
	size_t r = 0;
	int done = 0;
	if (method == PLANE_HUFFMAN) {
		ZSTD_CCtx *zc = w->x->zc;
		ZSTD_CCtx_reset(zc, ZSTD_reset_session_and_parameters);
		r = ZSTD_CCtx_setParameter(zc, ZSTD_c_compressionLevel, level);
		/* negative levels would store the literals raw */
		if (!ZSTD_isError(r))
			r = ZSTD_CCtx_setParameter(zc, ZSTD_c_literalCompressionMode, ZSTD_ps_enable);
		/* no sequences: all of src is literals */
		if (!ZSTD_isError(r))
			r = ZSTD_compressSequences(zc, dst, cap, no_sequences, 0, src, count);
		done = !ZSTD_isError(r);
	}
	/* also where another libzstd refuses the experimental call */
	if (!done)
		r = ZSTD_compressCCtx(w->x->zc, dst, cap, src, count, level);
	if (ZSTD_isError(r))
		return zstd_failed(w, r);
	*z = r < count - count / 50 ? r : 0;
	return 0;
}

/* Below this many elements the plane table costs more than planes save. */
#define PLANES_MIN 64
/* Below this many bytes a tensor is coded only where a plane has runs or
 * one dominant byte: a zstd call costs some microseconds whatever its
 * size, 5% of the whole Fashion-MNIST MLP checkpoint for its 12 biases and
 * small layers, for a few hundred bytes that Huffman codes would save. */
#define SMALL_BYTES 16384

/* shuffle-zstd: a table of plane sizes, then each plane raw or as a zstd
 * frame; or for a small tensor, one frame of all its planes (archive.h). */
static int encode_planes(dlt_archive_writer *w, struct stored *s, const void *data, size_t n,
			 size_t esize, int level)
{
	struct scratch *x = w->x;
	size_t count = n / esize, bound = ZSTD_compressBound(count), used = 0;
	const unsigned char *planes = data;
	int method[AR_MAX_ESIZE], rc;
	uint64_t total = AR_PLANE_ENTRY * esize;

	if (count >= PLANES_MIN) {
		int runs = 0;
		plan_planes(method, data, count, esize);
		for (size_t k = 0; k < esize; k++) {
			used += method[k] != PLANE_RAW;
			runs |= method[k] == PLANE_ZSTD;
		}
		if (used == 0 || (n < SMALL_BYTES && !runs))
			return 0;
	}
	if (esize > 1) {
		if ((rc = reserve(&x->shuf, &x->shuf_cap, n)) < 0)
			return rc;
		s->raw_hash = ar_shuffle(x->shuf, data, count, esize);
		s->hashed = 1;
		planes = x->shuf;
	}
	if (count < PLANES_MIN)
		return encode_zstd(w, s, planes, n, level, AR_CODEC_SHUFFLE_FRAME);
	if ((rc = reserve(&x->zbuf, &x->zbuf_cap, used * bound)) < 0)
		return rc;
	used = 0;
	for (size_t k = 0; k < esize; k++) {
		const unsigned char *p = planes + k * count;
		size_t z = 0;
		if (method[k] != PLANE_RAW &&
		    (rc = compress_plane(w, &z, x->zbuf + used, bound, p, count, method[k], level)) < 0)
			return rc;
		if (z) {
			s->piece[1 + k] = (struct piece){ x->zbuf + used, z };
			used += z;
		} else {
			s->piece[1 + k] = (struct piece){ p, count };
		}
		ar_put64(s->table + AR_PLANE_ENTRY * k, s->piece[1 + k].n);
		total += s->piece[1 + k].n;
	}
	/* not smaller: raw reads faster and the reader insists on it */
	if (total >= n)
		return 0;
	s->codec = AR_CODEC_PLANES;
	s->n = total;
	s->npiece = 1 + esize;
	s->piece[0] = (struct piece){ s->table, AR_PLANE_ENTRY * esize };
	return 0;
}

/* Fills s with data as codec stores it, or raw where that is no smaller,
 * and the raw bytes' hash. */
static int encode(dlt_archive_writer *w, struct stored *s, const void *data, size_t n,
		  size_t esize, int codec, int level)
{
	int rc = 0;

	stored_raw(s, data, n);
	if (codec != DLT_RAW && n > 0 && (rc = scratch_init(w)) == 0) {
		level = level ? level : ZSTD_CLEVEL_DEFAULT;
		if (codec == DLT_SHUFFLE_ZSTD)
			rc = encode_planes(w, s, data, n, esize, level);
		else
			rc = encode_zstd(w, s, data, n, level, AR_CODEC_ZSTD);
	}
	if (rc == 0 && !s->hashed)
		s->raw_hash = ar_xxh64(data, n);
	return rc;
}

/* Builds the record header in h and returns its size. */
static size_t record_header(unsigned char *h, const char *tag, const char *name, int dtype,
			    int ndim, const uint64_t *dims, uint64_t raw_size,
			    const struct stored *s)
{
	size_t namelen = strlen(name);
	size_t size = ar_rec_header_size(ndim, namelen);
	unsigned char *p = h + AR_REC_FIXED;

	memset(h, 0, size);
	memcpy(h, tag, 4);
	ar_put32(h + 4, size);
	h[8] = dtype;
	h[9] = s->codec;
	h[10] = ndim;
	ar_put32(h + 12, namelen);
	ar_put64(h + 16, s->n);
	ar_put64(h + 24, raw_size);
	ar_put64(h + 32, s->raw_hash);
	for (int i = 0; i < ndim; i++, p += 8)
		ar_put64(p, dims[i]);
	memcpy(p, name, namelen);
	return size;
}

static int write_record(dlt_archive_writer *w, const char *tag, const char *name, int dtype,
			int ndim, const uint64_t *dims, const void *data, uint64_t n,
			int codec, int level)
{
	static const unsigned char zero[8];
	unsigned char h[AR_REC_FIXED + 8 * DLT_MAX_DIMS + DLT_MAX_NAME + 8];
	struct stored s;
	ar_xxh64_state hash;
	size_t hsize;
	int rc;

	if ((rc = encode(w, &s, data, n, dlt_dtype_size(dtype), codec, level)) < 0)
		goto fail;
	hsize = record_header(h, tag, name, dtype, ndim, dims, n, &s);
	ar_xxh64_init(&hash);
	ar_xxh64_update(&hash, h, hsize - 8);
	for (int i = 0; i < s.npiece; i++)
		ar_xxh64_update(&hash, s.piece[i].p, s.piece[i].n);
	ar_xxh64_update(&hash, zero, ar_pad(s.n));
	ar_put64(h + hsize - 8, ar_xxh64_final(&hash));
	if ((rc = index_add(w, w->off)) < 0)
		goto fail;
	if ((rc = emit(w, h, hsize)) < 0)
		goto fail;
	for (int i = 0; i < s.npiece; i++)
		if ((rc = emit(w, s.piece[i].p, s.piece[i].n)) < 0)
			goto fail;
	rc = emit(w, zero, ar_pad(s.n));
fail:
	/* past the argument checks, any failure leaves the output unusable */
	if (rc < 0 && w->rc == 0)
		w->rc = rc;
	return rc;
}

static int check_tensor_args(dlt_archive_writer *w, const char *name, int dtype, int ndim,
			     const uint64_t *dims, const void *data, int codec, int level,
			     uint64_t *bytes)
{
	uint64_t count;
	size_t namelen = name ? strlen(name) : 0;

	if (namelen == 0 || namelen > DLT_MAX_NAME)
		return dlt_error(DLT_EINPUT, "%s: tensor name of %zu bytes (1 to %d allowed)",
				 w->name, namelen, DLT_MAX_NAME);
	if (!dlt_dtype_size(dtype))
		return dlt_error(DLT_EINPUT, "%s: unknown dtype %d for tensor '%s'",
				 w->name, dtype, name);
	if (ndim < 0 || ndim > DLT_MAX_DIMS || (ndim && !dims))
		return dlt_error(DLT_EINPUT, "%s: bad rank %d for tensor '%s'", w->name, ndim, name);
	if (!ar_shape_size(dtype, ndim, dims, &count, bytes))
		return dlt_error(DLT_EINPUT, "%s: shape of tensor '%s' overflows", w->name, name);
	if (*bytes && !data)
		return dlt_error(DLT_EINPUT, "%s: no data for tensor '%s'", w->name, name);
	if (!dlt_codec_name(codec))
		return dlt_error(DLT_EINPUT, "%s: unknown codec %d for tensor '%s'",
				 w->name, codec, name);
	if (codec != DLT_RAW && level && (level < ZSTD_minCLevel() || level > ZSTD_maxCLevel()))
		return dlt_error(DLT_EINPUT, "%s: zstd level %d out of range %d to %d",
				 w->name, level, ZSTD_minCLevel(), ZSTD_maxCLevel());
	if (w->names.n >= DLT_MAX_TENSORS)
		return dlt_error(DLT_EINPUT, "%s: more than %u tensors", w->name, DLT_MAX_TENSORS);
	return 0;
}

int dlt_archive_write_tensor(dlt_archive_writer *w, const char *name, int dtype,
			     int ndim, const uint64_t *dims, const void *data,
			     int codec, int level)
{
	uint64_t bytes;
	int rc;

	if ((rc = record_may_begin(w, 0)) < 0)
		return rc;
	if ((rc = check_tensor_args(w, name, dtype, ndim, dims, data, codec, level, &bytes)) < 0)
		return rc;
	if ((rc = nameset_add(&w->names, name)) < 0)
		return w->rc = rc;
	if (rc == 0)
		return dlt_error(DLT_EINPUT, "%s: duplicate tensor '%s'", w->name, name);
	return write_record(w, AR_TAG_TENS, name, dtype, ndim, dims, data, bytes, codec, level);
}

/* Sticky, as emit's: past begin, a failure leaves the output unusable */
static int pieces_fail(dlt_archive_writer *w, int rc)
{
	if (w->rc == 0)
		w->rc = rc;
	return rc;
}

int dlt_archive_begin_tensor(dlt_archive_writer *w, const char *name, int dtype, int ndim,
			     const uint64_t *dims)
{
	static const unsigned char zero[AR_REC_FIXED + 8 * DLT_MAX_DIMS + DLT_MAX_NAME + 8];
	struct pieces *pc;
	uint64_t bytes;
	int rc;

	if ((rc = record_may_begin(w, 0)) < 0)
		return rc;
	/* a non-NULL data pointer: the pieces bring the bytes */
	if ((rc = check_tensor_args(w, name, dtype, ndim, dims, zero, DLT_RAW, 0, &bytes)) < 0)
		return rc;
	if ((rc = nameset_add(&w->names, name)) < 0)
		return w->rc = rc;
	if (rc == 0)
		return dlt_error(DLT_EINPUT, "%s: duplicate tensor '%s'", w->name, name);
	if (!(pc = dlt_calloc(1, sizeof(*pc))))
		return pieces_fail(w, DLT_ENOMEM);
	pc->rfd = -1;
	w->pc = pc;
	if (!(pc->name = dlt_strdup(name)))
		return pieces_fail(w, DLT_ENOMEM);
	pc->dtype = dtype;
	pc->ndim = ndim;
	if (ndim)
		memcpy(pc->dims, dims, (size_t)ndim * sizeof(*dims));
	pc->bytes = bytes;
	pc->rec_off = w->off;
	pc->hsize = (size_t)ar_rec_header_size((unsigned)ndim, strlen(name));
	ar_xxh64_init(&pc->raw);
	/* in place where the output is our own temporary file */
	if (w->out.tmp && fflush(w->out.fp) == 0 && (pc->pos = ftello(w->out.fp)) >= 0 &&
	    (pc->rfd = open(w->out.tmp, O_RDONLY | O_CLOEXEC)) >= 0)
		return emit(w, zero, pc->hsize);
	if (!(pc->spool = tmpfile()))
		return pieces_fail(w, dlt_error_errno(DLT_EIO, "%s: a temporary file for "
						      "tensor '%s'", w->name, name));
	return 0;
}

int dlt_archive_write_piece(dlt_archive_writer *w, const void *data, size_t n)
{
	struct pieces *pc = w->pc;

	if (w->rc < 0)
		return w->rc;
	if (!pc)
		return dlt_error(DLT_EINPUT, "%s: a piece, but no tensor begun", w->name);
	if (n > pc->bytes - pc->got)
		return pieces_fail(w, dlt_error(DLT_EINPUT, "%s: tensor '%s': pieces of more "
						"than its %llu bytes", w->name, pc->name,
						(unsigned long long)pc->bytes));
	ar_xxh64_update(&pc->raw, data, n);
	pc->got += n;
	if (pc->rfd >= 0)
		return emit(w, data, n);
	if (n && fwrite(data, 1, n, pc->spool) != n)
		return pieces_fail(w, dlt_error_errno(DLT_EIO, "%s: temporary file", w->name));
	return 0;
}

/* n bytes read back from fd at off: fed to the hash h, or with h NULL
 * copied to the output. */
static int read_back(dlt_archive_writer *w, int fd, off_t off, uint64_t n, ar_xxh64_state *h)
{
	const size_t chunk = 1 << 20;
	unsigned char *buf = dlt_malloc(chunk);
	int rc = 0;

	if (!buf)
		return DLT_ENOMEM;
	while (n > 0 && rc == 0) {
		size_t want = n < chunk ? (size_t)n : chunk;
		ssize_t r = pread(fd, buf, want, off);
		if (r <= 0) {
			rc = r < 0 ? dlt_error_errno(DLT_EIO, "%s: reading back", w->name)
				   : dlt_error(DLT_EIO, "%s: reading back: short file", w->name);
			break;
		}
		if (h)
			ar_xxh64_update(h, buf, (size_t)r);
		else
			rc = emit(w, buf, (size_t)r);
		off += r;
		n -= (uint64_t)r;
	}
	free(buf);
	return rc;
}

/* The record checksum of header h (hsize bytes, the checksum its last
 * 8) and the bytes of its tensor, read back from fd at off, and the
 * padding after them, into h */
static int seal_header(dlt_archive_writer *w, unsigned char *h, size_t hsize, int fd, off_t off,
		       uint64_t bytes)
{
	static const unsigned char zero[8];
	ar_xxh64_state hash;
	int rc;

	ar_xxh64_init(&hash);
	ar_xxh64_update(&hash, h, hsize - 8);
	if ((rc = read_back(w, fd, off, bytes, &hash)) < 0)
		return rc;
	ar_xxh64_update(&hash, zero, ar_pad(bytes));
	ar_put64(h + hsize - 8, ar_xxh64_final(&hash));
	return 0;
}

int dlt_archive_end_tensor(dlt_archive_writer *w)
{
	static const unsigned char zero[8];
	unsigned char h[AR_REC_FIXED + 8 * DLT_MAX_DIMS + DLT_MAX_NAME + 8];
	struct pieces *pc = w->pc;
	struct stored s;
	int rc;

	if (w->rc < 0)
		return w->rc;
	if (!pc)
		return dlt_error(DLT_EINPUT, "%s: no tensor begun", w->name);
	if (pc->got != pc->bytes)
		return pieces_fail(w, dlt_error(DLT_EINPUT, "%s: tensor '%s': pieces of %llu "
						"bytes, not %llu", w->name, pc->name,
						(unsigned long long)pc->got,
						(unsigned long long)pc->bytes));
	stored_raw(&s, NULL, pc->bytes);
	s.raw_hash = ar_xxh64_final(&pc->raw);
	record_header(h, AR_TAG_TENS, pc->name, pc->dtype, pc->ndim, pc->dims, pc->bytes, &s);
	if (pc->rfd >= 0) {
		if (fflush(w->out.fp) != 0)
			return pieces_fail(w, dlt_error_errno(DLT_EIO, "%s", w->name));
		if ((rc = seal_header(w, h, pc->hsize, pc->rfd, pc->pos + (off_t)pc->hsize,
				      pc->bytes)) < 0)
			return pieces_fail(w, rc);
		if ((rc = emit(w, zero, ar_pad(pc->bytes))) < 0)
			return rc;
		if (fflush(w->out.fp) != 0 || fseeko(w->out.fp, pc->pos, SEEK_SET) != 0 ||
		    fwrite(h, 1, pc->hsize, w->out.fp) != pc->hsize ||
		    fseeko(w->out.fp, 0, SEEK_END) != 0)
			return pieces_fail(w, dlt_error_errno(DLT_EIO, "%s", w->name));
	} else {
		if (fflush(w->out.fp) != 0 || fflush(pc->spool) != 0)
			return pieces_fail(w, dlt_error_errno(DLT_EIO, "%s", w->name));
		if ((rc = seal_header(w, h, pc->hsize, fileno(pc->spool), 0, pc->bytes)) < 0)
			return pieces_fail(w, rc);
		if ((rc = emit(w, h, pc->hsize)) < 0 ||
		    (rc = read_back(w, fileno(pc->spool), 0, pc->bytes, NULL)) < 0 ||
		    (rc = emit(w, zero, ar_pad(pc->bytes))) < 0)
			return pieces_fail(w, rc);
	}
	if ((rc = index_add(w, pc->rec_off)) < 0)
		return pieces_fail(w, rc);
	pieces_free(pc);
	w->pc = NULL;
	return 0;
}

uint64_t dlt_archive_raw_record_size(const char *name, int dtype, int ndim, const uint64_t *dims,
				     uint64_t *data)
{
	size_t namelen = name ? strlen(name) : 0;
	uint64_t count, bytes, h, size;

	if (namelen == 0 || namelen > DLT_MAX_NAME || !dlt_dtype_size(dtype) || ndim < 0 ||
	    ndim > DLT_MAX_DIMS || (ndim && !dims) || !ar_shape_size(dtype, ndim, dims, &count, &bytes))
		return 0;
	h = ar_rec_header_size((unsigned)ndim, namelen);
	if (__builtin_add_overflow(h, bytes, &size) ||
	    __builtin_add_overflow(size, ar_pad(bytes), &size) || size > (uint64_t)INT64_MAX)
		return 0;
	if (data)
		*data = h;
	return size;
}

const char *dlt_archive_temp_path(const dlt_archive_writer *w)
{
	return w->out.tmp;
}

int dlt_archive_reserve(dlt_archive_writer *w, uint64_t bytes)
{
	off_t end;

	if (w->rc < 0)
		return w->rc;
	if (!w->out.tmp)
		return dlt_error(DLT_EINPUT, "%s: records placed ahead need a file of the "
				 "writer's own", w->name);
	if (w->nrec || w->pc || w->has_meta || w->placed_end || w->off != AR_HEADER)
		return dlt_error(DLT_EINPUT, "%s: room for records placed ahead is reserved "
				 "before any record", w->name);
	if (bytes % 8 || bytes > (uint64_t)INT64_MAX - AR_HEADER)
		return dlt_error(DLT_EINPUT, "%s: %llu bytes cannot be records placed ahead",
				 w->name, (unsigned long long)bytes);
	/* a hole that reads as zeros until the bytes are there */
	end = (off_t)(AR_HEADER + bytes);
	if (fflush(w->out.fp) != 0 || ftruncate(fileno(w->out.fp), end) != 0 ||
	    fseeko(w->out.fp, end, SEEK_SET) != 0)
		return w->rc = dlt_error_errno(DLT_EIO, "%s", w->name);
	w->placed_at = AR_HEADER;
	w->placed_end = w->off = AR_HEADER + bytes;
	return 0;
}

int dlt_archive_adopt_tensor(dlt_archive_writer *w, const char *name, int dtype, int ndim,
			     const uint64_t *dims)
{
	static const unsigned char zero[AR_REC_FIXED + 8 * DLT_MAX_DIMS + DLT_MAX_NAME + 8];
	unsigned char h[AR_REC_FIXED + 8 * DLT_MAX_DIMS + DLT_MAX_NAME + 8];
	uint64_t at = w->placed_at, bytes, hsize;
	ar_xxh64_state raw;
	struct stored s;
	int rc;

	if ((rc = record_may_begin(w, 1)) < 0)
		return rc;
	if ((rc = check_tensor_args(w, name, dtype, ndim, dims, zero, DLT_RAW, 0, &bytes)) < 0)
		return rc;
	hsize = ar_rec_header_size((unsigned)ndim, strlen(name));
	if (hsize + ar_pad(bytes) > w->placed_end - at ||
	    bytes > w->placed_end - at - hsize - ar_pad(bytes))
		return dlt_error(DLT_EINPUT, "%s: tensor '%s' is not in the room placed ahead",
				 w->name, name);
	if ((rc = nameset_add(&w->names, name)) < 0)
		return w->rc = rc;
	if (rc == 0)
		return dlt_error(DLT_EINPUT, "%s: duplicate tensor '%s'", w->name, name);
	/* opened now, after the other writers closed the file: a network
	 * file system shows a file's bytes as they were at the open */
	if (w->pfd < 0 && (w->pfd = open(w->out.tmp, O_RDWR | O_CLOEXEC)) < 0)
		return pieces_fail(w, dlt_error_errno(DLT_EIO, "%s", w->name));
	/* both checksums from the bytes read back: the raw bytes', which
	 * the header holds, then the record's, which covers the header */
	ar_xxh64_init(&raw);
	if ((rc = read_back(w, w->pfd, (off_t)(at + hsize), bytes, &raw)) < 0)
		return pieces_fail(w, rc);
	stored_raw(&s, NULL, bytes);
	s.raw_hash = ar_xxh64_final(&raw);
	record_header(h, AR_TAG_TENS, name, dtype, ndim, dims, bytes, &s);
	if ((rc = seal_header(w, h, hsize, w->pfd, (off_t)(at + hsize), bytes)) < 0)
		return pieces_fail(w, rc);
	/* the padding too: no writer was to touch it, and now none has */
	if (dlt_pwrite_all(w->pfd, h, hsize, at) != 0 ||
	    dlt_pwrite_all(w->pfd, zero, ar_pad(bytes), at + hsize + bytes) != 0)
		return pieces_fail(w, dlt_error_errno(DLT_EIO, "%s", w->name));
	if ((rc = index_add(w, at)) < 0)
		return pieces_fail(w, rc);
	w->placed_at = at + hsize + bytes + ar_pad(bytes);
	return 0;
}

int dlt_archive_write_meta(dlt_archive_writer *w, const char *json)
{
	uint64_t len;
	dlt_jval v;
	int rc;

	if ((rc = record_may_begin(w, 0)) < 0)
		return rc;
	if (w->has_meta)
		return dlt_error(DLT_EINPUT, "%s: more than one metadata record", w->name);
	if (!json)
		return dlt_error(DLT_EINPUT, "%s: no metadata", w->name);
	len = strlen(json);
	if ((rc = dlt_json_parse(json, len, &v)) < 0)
		return dlt_error_prefix(rc, "%s: metadata", w->name);
	rc = v.type == DLT_JOBJ;
	dlt_jval_free(&v);
	if (!rc)
		return dlt_error(DLT_EINPUT, "%s: metadata is not a json object", w->name);
	w->has_meta = 1;
	return write_record(w, AR_TAG_META, "", DLT_U8, 1, &len, json, len, DLT_RAW, 0);
}

/* The index's fixed part, then the trailer, whose checksum also covers the
 * file header: with the record checksums, every byte is covered. */
static int write_end(dlt_archive_writer *w)
{
	unsigned char h[AR_HEADER], t[AR_TRAILER];
	unsigned char *ix = (unsigned char *)w->index.data;
	uint64_t hash;
	int rc;

	memcpy(ix, AR_TAG_INDEX, 4);
	ar_put64(ix + 8, w->nrec);
	file_header(h);
	hash = ar_hash(h, sizeof(h), ix, w->index.len);
	ar_put64(t, w->off);
	ar_put64(t + 8, w->index.len);
	ar_put64(t + 16, hash);
	memcpy(t + 24, AR_END, 8);
	if ((rc = emit(w, ix, w->index.len)) < 0)
		return rc;
	return emit(w, t, sizeof(t));
}

int dlt_archive_writer_close(dlt_archive_writer *w)
{
	int rc = w->rc;
	if (rc == 0 && w->pc)
		rc = dlt_error(DLT_EINPUT, "%s: tensor '%s' was not finished", w->name, w->pc->name);
	if (rc == 0)
		rc = placed_pending(w);
	/* the headers written through pfd are the file's too: synced before
	 * the rename, and closed first (a network file system writes back on
	 * close) */
	if (rc == 0 && w->pfd >= 0) {
		int fd = w->pfd;
		w->pfd = -1;
		if (fsync(fd) != 0 || close(fd) != 0)
			rc = dlt_error_errno(DLT_EIO, "%s", w->name);
	}
	if (rc == 0)
		rc = write_end(w);
	if (rc == 0)
		rc = dlt_ofile_commit(&w->out);
	if (rc < 0) {
		dlt_archive_writer_abort(w);
		return rc;
	}
	writer_free(w);
	return 0;
}

void dlt_archive_writer_abort(dlt_archive_writer *w)
{
	if (!w)
		return;
	dlt_ofile_abort(&w->out);
	writer_free(w);
}

int dlt_archive_writers_close(dlt_archive_writer *first, dlt_archive_writer *second,
			      const char *first_path)
{
	int rc = dlt_archive_writer_close(first);

	if (rc < 0) {
		if (second)
			dlt_archive_writer_abort(second);
		return rc;
	}
	if (second && (rc = dlt_archive_writer_close(second)) < 0 && strcmp(first_path, "-") != 0)
		remove(first_path);
	return rc;
}
