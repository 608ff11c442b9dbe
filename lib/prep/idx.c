/* IDX files (LeCun's MNIST format): a big-endian header, then the data.
 * Header: 0x00 0x00, a type byte (0x08: u8), the number of dims, then one
 * u32 per dim.  Real data ships gzip'd; zlib's gz* functions check for the
 * 1f 8b magic and read a plain file as it is, so one path serves both. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "prep.h"

#define IDX_U8_IMAGES 0x00000803u
#define IDX_U8_LABELS 0x00000801u

struct idx {
	const char *name;	/* for messages */
	uint32_t dims[3];
	int ndim;
	uint8_t *data;
	size_t size;		/* data bytes, as the header claims */
};

static const char *idx_name(const char *path)
{
	return strcmp(path, "-") ? path : "standard input";
}

static int idx_gzopen(gzFile *g, const char *path)
{
	int fd;

	if (strcmp(path, "-") == 0) {
		/* gzclose closes the descriptor; stdin stays usable for others */
		if ((fd = dup(0)) < 0 || !(*g = gzdopen(fd, "rb"))) {
			if (fd >= 0)
				close(fd);
			return dlt_error_errno(DLT_EIO, "standard input");
		}
		return 0;
	}
	if (!(*g = gzopen(path, "rb")))
		return dlt_error_errno(errno == ENOENT || errno == EACCES || errno == ENOTDIR ?
				       DLT_EINPUT : DLT_EIO, "%s", path);
	return 0;
}

/* Reads up to n bytes; returns the count read, or an error. */
static long idx_gzread(gzFile g, const char *name, void *p, size_t n)
{
	size_t got = 0;
	int err;

	while (got < n) {
		size_t want = n - got < (1u << 30) ? n - got : (1u << 30);
		int r = gzread(g, (char *)p + got, (unsigned)want);
		if (r < 0) {
			const char *msg = gzerror(g, &err), *colon;
			if (err == Z_ERRNO)
				return dlt_error_errno(DLT_EIO, "%s", name);
			/* zlib puts the path first; ours goes first anyway */
			while ((colon = strstr(msg, ": ")))
				msg = colon + 2;
			return dlt_error(DLT_EINPUT, "%s: gzip: %s", name, msg);
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	/* zlib reports a gzip stream cut short as a soft error, not as -1 */
	gzerror(g, &err);
	if (err == Z_BUF_ERROR)
		return dlt_error(DLT_EINPUT, "%s: truncated gzip data", name);
	return (long)got;
}

static int idx_header(struct idx *f, gzFile g, uint32_t magic, const char *what)
{
	uint8_t h[4 + 4 * 3];
	uint32_t m;
	long n;

	if ((n = idx_gzread(g, f->name, h, 4)) < 0)
		return (int)n;
	if (n == 0)
		return dlt_error(DLT_EINPUT, "%s: empty file", f->name);
	if (n < 4)
		return dlt_error(DLT_EINPUT, "%s: truncated IDX header", f->name);
	m = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
	if (m != magic)
		return dlt_error(DLT_EINPUT, "%s: bad IDX magic 0x%08x, expected 0x%08x (%s)",
				 f->name, m, magic, what);
	f->ndim = h[3];
	if ((n = idx_gzread(g, f->name, h + 4, 4 * (size_t)f->ndim)) < 0)
		return (int)n;
	if (n < 4 * f->ndim)
		return dlt_error(DLT_EINPUT, "%s: truncated IDX header", f->name);
	f->size = 1;
	for (int i = 0; i < f->ndim; i++) {
		const uint8_t *b = h + 4 + 4 * i;
		f->dims[i] = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
		if (f->dims[i] == 0)
			return dlt_error(DLT_EINPUT, "%s: IDX dimension %d is 0", f->name, i);
		if (!dlt_mul_ok(f->size, f->dims[i], &f->size) || f->size == SIZE_MAX)
			return dlt_error(DLT_EINPUT, "%s: IDX dimensions too large", f->name);
	}
	return 0;
}

/* Reads the data the header claims and checks that nothing follows.  The
 * buffer grows with what actually arrives, so a header that lies about its
 * size costs no more memory than the file holds. */
static int idx_data(struct idx *f, gzFile g)
{
	size_t cap = 0, len = 0, want = f->size + 1;
	uint8_t *p;
	long n;

	while (len < want) {
		if (len == cap) {
			cap = cap == 0 ? 65536 : cap > want / 2 ? want : cap * 2;
			if (cap > want)
				cap = want;
			if (!(p = dlt_realloc(f->data, cap)))
				return DLT_ENOMEM;
			f->data = p;
		}
		if ((n = idx_gzread(g, f->name, f->data + len, cap - len)) < 0)
			return (int)n;
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (len < f->size)
		return dlt_error(DLT_EINPUT, "%s: truncated: the header promises %zu bytes of data, "
				 "the file holds %zu", f->name, f->size, len);
	if (len > f->size)
		return dlt_error(DLT_EINPUT, "%s: trailing data after the %zu bytes the header promises",
				 f->name, f->size);
	return 0;
}

static int idx_read(struct idx *f, const char *path, uint32_t magic, const char *what)
{
	gzFile g;
	int rc, rc2;

	memset(f, 0, sizeof(*f));
	f->name = idx_name(path);
	if ((rc = idx_gzopen(&g, path)) < 0)
		return rc;
	gzbuffer(g, 1 << 17);
	rc = idx_header(f, g, magic, what);
	if (rc == 0)
		rc = idx_data(f, g);
	rc2 = gzclose(g);
	if (rc == 0 && rc2 != Z_OK)
		rc = dlt_error(DLT_EIO, "%s: close failed", f->name);
	if (rc < 0) {
		free(f->data);
		f->data = NULL;
	}
	return rc;
}

static int idx_labels(dlt_prep_data *d, const struct idx *lab)
{
	int max = 0;

	if (!(d->y = dlt_malloc(lab->size * sizeof(*d->y))))
		return DLT_ENOMEM;
	for (size_t i = 0; i < lab->size; i++) {
		d->y[i] = lab->data[i];
		max = lab->data[i] > max ? lab->data[i] : max;
	}
	d->num_classes = max + 1;
	return 0;
}

/* The images, read as dlt_prep_write asks for them: only a chunk is in
 * memory at a time. */
struct idx_stream {
	struct idx f;		/* the header */
	gzFile g;		/* NULL once the end is checked */
	size_t done;		/* bytes of data read so far */
	size_t sample;		/* bytes of one image */
};

static void stream_close(void *ctx)
{
	struct idx_stream *st = ctx;
	if (st && st->g)
		gzclose(st->g);
	free(st);
}

/* n bytes of the data; with the last of them, the end of the file: what
 * idx_data checks of a file in memory, with the same messages. */
static int stream_bytes(struct idx_stream *st, void *buf, size_t n)
{
	long r;
	int rc;

	if (!st->g || n > st->f.size - st->done)
		return dlt_error(DLT_EINPUT, "%s: read past the images", st->f.name);
	if ((r = idx_gzread(st->g, st->f.name, buf, n)) < 0)
		return (int)r;
	st->done += (size_t)r;
	if ((size_t)r < n)
		return dlt_error(DLT_EINPUT, "%s: truncated: the header promises %zu bytes of data, "
				 "the file holds %zu", st->f.name, st->f.size, st->done);
	if (st->done < st->f.size)
		return 0;
	if ((r = idx_gzread(st->g, st->f.name, &(char){ 0 }, 1)) < 0)
		return (int)r;
	if (r > 0)
		return dlt_error(DLT_EINPUT, "%s: trailing data after the %zu bytes the header promises",
				 st->f.name, st->f.size);
	rc = gzclose(st->g);
	st->g = NULL;
	if (rc != Z_OK)
		return dlt_error(DLT_EIO, "%s: close failed", st->f.name);
	return 0;
}

static int stream_read(void *ctx, void *buf, size_t k)
{
	struct idx_stream *st = ctx;
	size_t n;

	if (!dlt_mul_ok(k, st->sample, &n))
		return dlt_error(DLT_EINPUT, "%s: read past the images", st->f.name);
	return stream_bytes(st, buf, n);
}

/* Reads the rest of the data to its end and drops it: the file's own
 * faults (short, trailing data, gzip) come before a disagreement with the
 * labels, as they did when the file was read whole. */
static int stream_drain(struct idx_stream *st)
{
	const size_t chunk = 1 << 20;
	char *buf = dlt_malloc(chunk);
	int rc = 0;

	if (!buf)
		return DLT_ENOMEM;
	while (rc == 0 && st->g) {
		size_t n = st->f.size - st->done < chunk ? st->f.size - st->done : chunk;
		rc = stream_bytes(st, buf, n);
	}
	free(buf);
	return rc;
}

int dlt_prep_read_idx(dlt_prep_data *d, const char *images, const char *labels)
{
	struct idx_stream *st;
	struct idx lab = { 0 };
	int rc;

	memset(d, 0, sizeof(*d));
	if (!(st = dlt_calloc(1, sizeof(*st))))
		return DLT_ENOMEM;
	st->f.name = idx_name(images);
	if ((rc = idx_gzopen(&st->g, images)) < 0) {
		st->g = NULL;
		goto fail;
	}
	gzbuffer(st->g, 1 << 17);
	DLT_TRY(idx_header(&st->f, st->g, IDX_U8_IMAGES, "u8 images"));
	DLT_TRY(idx_read(&lab, labels, IDX_U8_LABELS, "u8 labels"));
	if (lab.dims[0] != st->f.dims[0]) {
		if ((rc = stream_drain(st)) == 0)
			rc = dlt_error(DLT_EINPUT, "%s: %u labels, but %s has %u images",
				       lab.name, lab.dims[0], st->f.name, st->f.dims[0]);
		goto fail;
	}
	/* what dlt-train takes, and a sample is read whole (dlt_prep_write) */
	if ((uint64_t)st->f.dims[1] * st->f.dims[2] > DLT_PREP_MAX_PIXELS) {
		rc = dlt_error(DLT_EINPUT, "%s: images of %u x %u pixels: more than %u", st->f.name,
			       st->f.dims[1], st->f.dims[2], DLT_PREP_MAX_PIXELS);
		goto fail;
	}
	d->source = "idx";
	d->dtype = DLT_U8;
	d->ndim = 3;
	d->dims[0] = 1;		/* one channel: the trainer wants [N, C, H, W] */
	d->dims[1] = st->f.dims[1];
	d->dims[2] = st->f.dims[2];
	d->n = st->f.dims[0];
	d->sample_size = st->sample = st->f.size / st->f.dims[0];
	d->scale = 1.0 / 255;
	d->read_x = stream_read;
	d->x_close = stream_close;
	d->x_ctx = st;
	st = NULL;
	DLT_TRY(idx_labels(d, &lab));
	free(lab.data);
	return 0;
fail:
	stream_close(st);
	free(lab.data);
	dlt_prep_data_free(d);
	return rc;
}
