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

int dlt_prep_read_idx(dlt_prep_data *d, const char *images, const char *labels)
{
	struct idx img, lab = { 0 };
	int rc;

	memset(d, 0, sizeof(*d));
	if ((rc = idx_read(&img, images, IDX_U8_IMAGES, "u8 images")) < 0)
		return rc;
	DLT_TRY(idx_read(&lab, labels, IDX_U8_LABELS, "u8 labels"));
	if (lab.dims[0] != img.dims[0]) {
		rc = dlt_error(DLT_EINPUT, "%s: %u labels, but %s has %u images",
			       lab.name, lab.dims[0], img.name, img.dims[0]);
		goto fail;
	}
	d->source = "idx";
	d->dtype = DLT_U8;
	d->ndim = 3;
	d->dims[0] = 1;		/* one channel: the trainer wants [N, C, H, W] */
	d->dims[1] = img.dims[1];
	d->dims[2] = img.dims[2];
	d->n = img.dims[0];
	d->sample_size = img.size / img.dims[0];
	d->x = img.data;
	d->scale = 1.0 / 255;
	img.data = NULL;
	DLT_TRY(idx_labels(d, &lab));
	free(lab.data);
	return 0;
fail:
	free(img.data);
	free(lab.data);
	dlt_prep_data_free(d);
	return rc;
}
