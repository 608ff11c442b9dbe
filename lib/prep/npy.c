/* NumPy arrays: .npy files (format 1.0, 2.0, 3.0) and .npz archives of
 * them (zip: stored or deflated members, data descriptors, zip64), into a
 * dataset.
 *
 * A .npy file is the magic \x93NUMPY, a major and a minor version byte, a
 * little-endian header length (u16 in 1.0, u32 after), a header that is a
 * Python dict literal such as
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (100, 3), }
 * padded with spaces and ending in a newline, then the elements.  Files
 * are mapped, not read (dlt_file_bytes), and every length and count in
 * them is checked against the bytes there are before it is used. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <zlib.h>

#include "kernels/common/math.h"
#include "prep.h"

#define NPY_MAX_HEADER (1u << 20)	/* NumPy itself refuses headers past 10000 bytes */
#define NPY_MAX_NDIM 64		/* NumPy's own limit */
/* deflate expands at most 1032 to 1: a member that claims more is a lie */
#define ZIP_MAX_RATIO 1032
/* The largest double that rounds to a finite float */
#define F32_LIMIT 0x1.ffffffp+127

/* One input file's bytes */
struct npy_file {
	const char *name;	/* for messages */
	void *map;
	char *mem;
	const uint8_t *p;
	size_t size;
};

/* One array */
struct npy {
	char name[512];		/* for messages: "x.npy", or "d.npz: x.npy" */
	char kind;		/* b(ool), i(nt), u(nsigned), f(loat) */
	int size;		/* bytes an element: 1, 2, 4 or 8 */
	int swap;		/* big-endian elements */
	int fortran;		/* column-major */
	int ndim;
	uint64_t dims[NPY_MAX_NDIM];
	size_t count;		/* elements */
	const uint8_t *data;	/* count * size bytes */
	uint8_t *own;		/* an inflated member, to free */
};

static uint16_t le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
	return le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* ---- the header: a Python dict literal ---------------------------------- */

struct hdr {
	const struct npy *a;	/* for its name */
	const char *p, *end;
};

static int hdr_bad(const struct hdr *h, const char *what)
{
	return dlt_error(DLT_EINPUT, "%s: bad .npy header: %s", h->a->name, what);
}

static void hdr_ws(struct hdr *h)
{
	while (h->p < h->end && (*h->p == ' ' || *h->p == '\t' || *h->p == '\n' || *h->p == '\r'))
		h->p++;
}

static int hdr_char(struct hdr *h, char c)
{
	hdr_ws(h);
	if (h->p < h->end && *h->p == c) {
		h->p++;
		return 1;
	}
	return 0;
}

/* A quoted string without escapes (no key or dtype of NumPy's has one),
 * copied to out (n bytes, NUL-terminated). */
static int hdr_str(struct hdr *h, char *out, size_t n, const char *what)
{
	char q;
	size_t len = 0;

	hdr_ws(h);
	if (h->p == h->end || (*h->p != '\'' && *h->p != '"'))
		return hdr_bad(h, what);
	q = *h->p++;
	for (; h->p < h->end && *h->p != q; h->p++) {
		if (*h->p == '\\' || *h->p == '\n')
			return hdr_bad(h, "escape or newline in a string");
		if (len + 1 < n)
			out[len] = *h->p;
		len++;
	}
	if (h->p == h->end)
		return hdr_bad(h, "unterminated string");
	h->p++;
	if (len >= n)
		return hdr_bad(h, "string too long");
	out[len] = 0;
	return 0;
}

/* The shape: a tuple of non-negative integers, (), (5,) or (2, 3). */
static int hdr_shape(struct hdr *h, struct npy *a)
{
	if (!hdr_char(h, '('))
		return hdr_bad(h, hdr_char(h, '[') ? "shape is a list, not a tuple" :
			       "shape is not a tuple");
	a->ndim = 0;
	for (;;) {
		uint64_t v = 0;
		const char *start;

		if (hdr_char(h, ')'))
			break;
		if (a->ndim > 0 && !hdr_char(h, ','))
			return hdr_bad(h, "expected ',' or ')' in the shape");
		if (hdr_char(h, ')'))
			break;
		hdr_ws(h);
		if (h->p < h->end && *h->p == '-')
			return hdr_bad(h, "a negative dimension");
		for (start = h->p; h->p < h->end && *h->p >= '0' && *h->p <= '9'; h->p++) {
			if (v > (UINT64_MAX - 9) / 10)
				return dlt_error(DLT_EINPUT, "%s: shape overflow: a dimension of "
						 "2^64 or more", a->name);
			v = v * 10 + (uint64_t)(*h->p - '0');
		}
		if (h->p == start)
			return hdr_bad(h, "a dimension that is not an integer");
		if (h->p < h->end && *h->p == 'L')	/* written by Python 2 */
			h->p++;
		if (a->ndim == NPY_MAX_NDIM)
			return dlt_error(DLT_EINPUT, "%s: more than %d dimensions", a->name,
					 NPY_MAX_NDIM);
		a->dims[a->ndim++] = v;
	}
	return 0;
}

static int hdr_bool(struct hdr *h, int *out)
{
	hdr_ws(h);
	if ((size_t)(h->end - h->p) >= 4 && memcmp(h->p, "True", 4) == 0) {
		h->p += 4;
		*out = 1;
		return 0;
	}
	if ((size_t)(h->end - h->p) >= 5 && memcmp(h->p, "False", 5) == 0) {
		h->p += 5;
		*out = 0;
		return 0;
	}
	return hdr_bad(h, "fortran_order is not True or False");
}

/* descr: a byte order (<, >, | or =), a kind and a size, such as '<f4'.
 * The kinds of numbers only: no objects, strings, dates or records. */
static int npy_dtype(struct npy *a, const char *descr)
{
	const char *s = descr;
	char *end;
	long size;

	a->swap = 0;
	if (*s == '<' || *s == '|' || *s == '=')
		s++;
	else if (*s == '>')
		a->swap = 1, s++;
	if (*s == 'O')
		return dlt_error(DLT_EINPUT, "%s: object arrays (dtype '%s') are not supported",
				 a->name, descr);
	a->kind = *s;
	if (!*s || !strchr("biuf", *s) || s[1] < '1' || s[1] > '9')
		goto bad;
	size = strtol(s + 1, &end, 10);
	if (*end || !(size == 1 || size == 2 || size == 4 || size == 8) ||
	    (a->kind == 'b' && size != 1) || (a->kind == 'f' && size == 1))
		goto bad;
	a->size = (int)size;
	if (a->size == 1)
		a->swap = 0;
	return 0;
bad:
	return dlt_error(DLT_EINPUT, "%s: unsupported dtype '%s' (bool, integers and floats of "
			 "up to 8 bytes are)", a->name, descr);
}

/* The dict: the keys descr, fortran_order and shape, each once, in any
 * order, as NumPy's own reader wants them. */
static int npy_header(struct npy *a, const char *p, size_t n)
{
	struct hdr h = { a, p, p + n };
	char key[32], descr[64];
	int seen = 0, rc;

	if (!hdr_char(&h, '{'))
		return hdr_bad(&h, "not a dict");
	for (;;) {
		if (hdr_char(&h, '}'))
			break;
		if (seen && !hdr_char(&h, ','))
			return hdr_bad(&h, "expected ',' or '}'");
		if (hdr_char(&h, '}'))
			break;
		DLT_TRY_RC(hdr_str(&h, key, sizeof(key), "a key that is not a string"));
		if (!hdr_char(&h, ':'))
			return hdr_bad(&h, "expected ':' after a key");
		if (strcmp(key, "descr") == 0 && !(seen & 1)) {
			hdr_ws(&h);
			if (h.p < h.end && (*h.p == '[' || *h.p == '{'))
				return dlt_error(DLT_EINPUT, "%s: structured dtypes are not supported",
						 a->name);
			DLT_TRY_RC(hdr_str(&h, descr, sizeof(descr), "descr is not a string"));
			seen |= 1;
		} else if (strcmp(key, "fortran_order") == 0 && !(seen & 2)) {
			DLT_TRY_RC(hdr_bool(&h, &a->fortran));
			seen |= 2;
		} else if (strcmp(key, "shape") == 0 && !(seen & 4)) {
			DLT_TRY_RC(hdr_shape(&h, a));
			seen |= 4;
		} else {
			return dlt_error(DLT_EINPUT, "%s: bad .npy header: %s key '%s'", a->name,
					 strcmp(key, "descr") && strcmp(key, "fortran_order") &&
					 strcmp(key, "shape") ? "unknown" : "a second", key);
		}
	}
	hdr_ws(&h);
	if (h.p != h.end)
		return hdr_bad(&h, "text after the dict");
	if (seen != 7)
		return dlt_error(DLT_EINPUT, "%s: bad .npy header: no '%s'", a->name,
				 !(seen & 1) ? "descr" : !(seen & 2) ? "fortran_order" : "shape");
	if ((rc = npy_dtype(a, descr)) < 0)
		return rc;
	return 0;
}

/* "(2, 3)", for messages */
static void shape_str(const struct npy *a, char *out, size_t n)
{
	size_t len = (size_t)snprintf(out, n, "(");
	for (int i = 0; i < a->ndim && len < n; i++)
		len += (size_t)snprintf(out + len, n - len, i ? ", %llu" : "%llu",
					(unsigned long long)a->dims[i]);
	if (len < n)
		snprintf(out + len, n - len, a->ndim == 1 ? ",)" : ")");
}

/* Parses the .npy file in p[0, n) into a; a->data points into p. */
static int npy_parse(struct npy *a, const uint8_t *p, size_t n)
{
	size_t hlen, off, bytes;
	char shape[256];

	if (n == 0)
		return dlt_error(DLT_EINPUT, "%s: empty file", a->name);
	if (memcmp(p, "\x93NUMPY", n < 6 ? n : 6) != 0)
		return dlt_error(DLT_EINPUT, "%s: not a .npy or .npz file (bad magic)", a->name);
	if (n < 10)
		return dlt_error(DLT_EINPUT, "%s: truncated .npy header", a->name);
	if (p[6] < 1 || p[6] > 3 || p[7] != 0)
		return dlt_error(DLT_EINPUT, "%s: unsupported .npy version %d.%d", a->name, p[6], p[7]);
	if (p[6] == 1) {
		hlen = le16(p + 8);
		off = 10;
	} else {
		if (n < 12)
			return dlt_error(DLT_EINPUT, "%s: truncated .npy header", a->name);
		hlen = le32(p + 8);
		off = 12;
	}
	if (hlen > NPY_MAX_HEADER)
		return dlt_error(DLT_EINPUT, "%s: header of %zu bytes (at most %u)", a->name, hlen,
				 NPY_MAX_HEADER);
	if (hlen > n - off)
		return dlt_error(DLT_EINPUT, "%s: header of %zu bytes, but the file has %zu after "
				 "its length", a->name, hlen, n - off);
	if (memchr(p + off, 0, hlen))
		return dlt_error(DLT_EINPUT, "%s: bad .npy header: a NUL byte", a->name);
	DLT_TRY_RC(npy_header(a, (const char *)p + off, hlen));
	off += hlen;
	shape_str(a, shape, sizeof(shape));
	a->count = 1;
	for (int i = 0; i < a->ndim; i++)
		if (!dlt_mul_ok(a->count, a->dims[i], &a->count) || a->dims[i] > SIZE_MAX)
			return dlt_error(DLT_EINPUT, "%s: shape %s is too large", a->name, shape);
	if (!dlt_mul_ok(a->count, (size_t)a->size, &bytes))
		return dlt_error(DLT_EINPUT, "%s: shape %s is too large", a->name, shape);
	if (bytes > n - off)
		return dlt_error(DLT_EINPUT, "%s: truncated: shape %s of %d-byte elements is %zu "
				 "bytes of data, the file holds %zu", a->name, shape, a->size, bytes,
				 n - off);
	if (bytes < n - off)
		return dlt_error(DLT_EINPUT, "%s: trailing data after the %zu bytes that shape %s "
				 "holds", a->name, bytes, shape);
	if (a->ndim == 0)
		return dlt_error(DLT_EINPUT, "%s: a scalar, not an array of samples", a->name);
	for (int i = 0; i < a->ndim; i++)
		if (a->dims[i] == 0)
			return dlt_error(DLT_EINPUT, "%s: an empty array, of shape %s", a->name, shape);
	a->data = p + off;
	return 0;
}

/* ---- .npz: a zip file of .npy members ------------------------------------ */

struct zip_entry {
	const uint8_t *name;
	size_t nlen;
	int method, flags;
	uint32_t crc;
	uint64_t csize, usize, offset;
};

/* Copies a name from the file into out, printable ASCII only. */
static void clean_name(char *out, size_t n, const uint8_t *s, size_t len)
{
	size_t k = 0;

	for (size_t i = 0; i < len && k + 1 < n; i++)
		out[k++] = s[i] >= 0x20 && s[i] < 0x7f ? (char)s[i] : '?';
	out[k] = 0;
}

/* Sizes of 0xffffffff (and an offset) are in the zip64 extra field, in
 * the order usize, csize, offset. */
static int zip64_extra(const struct npy_file *f, struct zip_entry *e, const uint8_t *x,
		       size_t xlen)
{
	while (xlen >= 4) {
		size_t id = le16(x), len = le16(x + 2);
		if (len > xlen - 4)
			break;
		if (id == 1) {
			const uint8_t *v = x + 4;
			uint64_t *fields[3] = { &e->usize, &e->csize, &e->offset };
			for (int i = 0; i < 3; i++) {
				if (*fields[i] != 0xffffffffu)
					continue;
				if (len < 8)
					return dlt_error(DLT_EINPUT, "%s: zip64 field too short",
							 f->name);
				*fields[i] = le64(v);
				v += 8;
				len -= 8;
			}
			return 0;
		}
		x += 4 + len;
		xlen -= 4 + len;
	}
	if (e->usize == 0xffffffffu || e->csize == 0xffffffffu || e->offset == 0xffffffffu)
		return dlt_error(DLT_EINPUT, "%s: zip64 sizes missing", f->name);
	return 0;
}

/* The central directory: where it is and how many entries it has, from
 * the end record (and the zip64 one where the sizes need it). */
static int zip_directory(const struct npy_file *f, uint64_t *cd, uint64_t *cd_size,
			 uint64_t *count)
{
	const uint8_t *p = f->p, *e = NULL;
	size_t n = f->size, pos;

	if (n < 22)
		return dlt_error(DLT_EINPUT, "%s: truncated zip file", f->name);
	/* the end record is the last 22 bytes and a comment of up to 64 KiB */
	for (pos = n - 22;; pos--) {
		if (le32(p + pos) == 0x06054b50 && pos + 22 + le16(p + pos + 20) == n) {
			e = p + pos;
			break;
		}
		if (pos == 0 || n - pos >= 22 + 0xffff)
			break;
	}
	if (!e)
		return dlt_error(DLT_EINPUT, "%s: not a zip file (no end of central directory)",
				 f->name);
	if (le16(e + 4) != 0 || le16(e + 6) != 0)
		return dlt_error(DLT_EINPUT, "%s: a zip file of several disks", f->name);
	*count = le16(e + 10);
	*cd_size = le32(e + 12);
	*cd = le32(e + 16);
	if (*count == 0xffff || *cd_size == 0xffffffffu || *cd == 0xffffffffu) {
		const uint8_t *z;
		uint64_t zoff;
		if (pos < 20 || le32(e - 20) != 0x07064b50)
			return dlt_error(DLT_EINPUT, "%s: zip64 end locator missing", f->name);
		zoff = le64(e - 20 + 8);
		if (zoff > pos - 20 || pos - 20 - zoff < 56 || le32(p + zoff) != 0x06064b50)
			return dlt_error(DLT_EINPUT, "%s: bad zip64 end record offset %llu", f->name,
					 (unsigned long long)zoff);
		z = p + zoff;
		*count = le64(z + 32);
		*cd_size = le64(z + 40);
		*cd = le64(z + 48);
		pos = (size_t)zoff;
	}
	if (*cd > pos || *cd_size > pos - *cd)
		return dlt_error(DLT_EINPUT, "%s: central directory of %llu bytes at %llu, past its "
				 "end record at %zu", f->name, (unsigned long long)*cd_size,
				 (unsigned long long)*cd, pos);
	return 0;
}

/* Looks for member NAME.npy (or NAME); *found 0 when there is none, and
 * then the members' names, ".npy" left out, go to names for the message. */
static int zip_find(const struct npy_file *f, const char *name, struct zip_entry *out,
		    int *found, char *names, size_t names_size)
{
	uint64_t cd = 0, cd_size = 0, count = 0, pos;
	size_t want = strlen(name), nl = 0;

	*found = 0;
	if (names_size)
		names[0] = 0;
	DLT_TRY_RC(zip_directory(f, &cd, &cd_size, &count));
	pos = cd;
	for (uint64_t i = 0; i < count; i++) {
		struct zip_entry e = { 0 };
		const uint8_t *c = f->p + pos;
		size_t xlen, clen, left = (size_t)(cd + cd_size - pos);

		if (left < 46 || le32(c) != 0x02014b50)
			return dlt_error(DLT_EINPUT, "%s: bad central directory entry %llu", f->name,
					 (unsigned long long)i);
		e.flags = le16(c + 8);
		e.method = le16(c + 10);
		e.crc = le32(c + 16);
		e.csize = le32(c + 20);
		e.usize = le32(c + 24);
		e.nlen = le16(c + 28);
		xlen = le16(c + 30);
		clen = le16(c + 32);
		e.offset = le32(c + 42);
		if (e.nlen + xlen + clen > left - 46)
			return dlt_error(DLT_EINPUT, "%s: central directory entry %llu runs past "
					 "its end", f->name, (unsigned long long)i);
		e.name = c + 46;
		DLT_TRY_RC(zip64_extra(f, &e, c + 46 + e.nlen, xlen));
		pos += 46 + e.nlen + xlen + clen;
		if ((e.nlen == want || (e.nlen == want + 4 && !memcmp(e.name + want, ".npy", 4))) &&
		    !memcmp(e.name, name, want)) {
			*out = e;
			*found = 1;
			return 0;
		}
		if (nl + 4 < names_size) {
			size_t len = e.nlen >= 4 && !memcmp(e.name + e.nlen - 4, ".npy", 4) ?
				     e.nlen - 4 : e.nlen;
			nl += (size_t)snprintf(names + nl, names_size - nl, nl ? ", " : "");
			if (nl < names_size)
				clean_name(names + nl, names_size - nl, e.name, len);
			nl += strlen(names + nl);
		}
	}
	return 0;
}

/* Raw deflate data of csize bytes into exactly usize bytes at out */
static int zip_inflate(const struct npy_file *f, const char *member, const uint8_t *in,
		       uint64_t csize, uint8_t *out, uint64_t usize)
{
	z_stream z = { 0 };
	char msg[128];
	int zr;

	if (inflateInit2(&z, -MAX_WBITS) != Z_OK)
		return dlt_error(DLT_ENOMEM, "%s: %s: inflateInit failed", f->name, member);
	do {
		uInt ain = csize > UINT_MAX ? UINT_MAX : (uInt)csize;
		uInt aout = usize > UINT_MAX ? UINT_MAX : (uInt)usize;
		z.next_in = (Bytef *)(uintptr_t)in;
		z.avail_in = ain;
		z.next_out = out;
		z.avail_out = aout;
		zr = inflate(&z, Z_NO_FLUSH);
		in += ain - z.avail_in;
		csize -= ain - z.avail_in;
		out += aout - z.avail_out;
		usize -= aout - z.avail_out;
	} while (zr == Z_OK);
	snprintf(msg, sizeof(msg), "%s", z.msg ? z.msg : "bad data");
	inflateEnd(&z);
	if (zr == Z_STREAM_END && usize == 0)
		return 0;
	if (zr == Z_STREAM_END)
		return dlt_error(DLT_EINPUT, "%s: %s: deflate data ends %llu bytes short of its "
				 "size", f->name, member, (unsigned long long)usize);
	if (usize == 0)
		return dlt_error(DLT_EINPUT, "%s: %s: deflate data longer than its size says",
				 f->name, member);
	if (zr == Z_BUF_ERROR)
		return dlt_error(DLT_EINPUT, "%s: %s: truncated deflate data", f->name, member);
	return dlt_error(DLT_EINPUT, "%s: %s: deflate: %s", f->name, member, msg);
}

/* The bytes of member e: in place when stored, inflated into *own. */
static int zip_member(const struct npy_file *f, const struct zip_entry *e, const char *member,
		      const uint8_t **data, size_t *size, uint8_t **own)
{
	const uint8_t *l;
	size_t start;

	if (e->flags & 1)
		return dlt_error(DLT_EINPUT, "%s: %s is encrypted", f->name, member);
	if (e->method != 0 && e->method != 8)
		return dlt_error(DLT_EINPUT, "%s: %s: compression method %d (stored and deflate "
				 "are supported)", f->name, member, e->method);
	if (e->offset > f->size || f->size - e->offset < 30 || le32(f->p + e->offset) != 0x04034b50)
		return dlt_error(DLT_EINPUT, "%s: %s: bad local header offset %llu", f->name, member,
				 (unsigned long long)e->offset);
	l = f->p + e->offset;
	start = (size_t)e->offset + 30 + le16(l + 26) + le16(l + 28);
	if (start > f->size || e->csize > f->size - start)
		return dlt_error(DLT_EINPUT, "%s: %s: %llu bytes of data past the end of the file",
				 f->name, member, (unsigned long long)e->csize);
	if (e->method == 0) {
		if (e->usize != e->csize)
			return dlt_error(DLT_EINPUT, "%s: %s: stored, but %llu bytes hold %llu",
					 f->name, member, (unsigned long long)e->csize,
					 (unsigned long long)e->usize);
		*data = f->p + start;
	} else {
		if (e->usize / ZIP_MAX_RATIO > e->csize || e->usize > SIZE_MAX - 1)
			return dlt_error(DLT_EINPUT, "%s: %s: impossible size %llu for %llu bytes of "
					 "deflate data", f->name, member,
					 (unsigned long long)e->usize, (unsigned long long)e->csize);
		if (!(*own = dlt_malloc((size_t)e->usize + 1)))
			return DLT_ENOMEM;
		DLT_TRY_RC(zip_inflate(f, member, f->p + start, e->csize, *own, e->usize));
		*data = *own;
	}
	*size = (size_t)e->usize;
	{
		/* zlib's crc32 takes uInt lengths */
		uLong crc = crc32(0, Z_NULL, 0);
		for (size_t done = 0; done < *size;) {
			uInt k = *size - done > (1u << 30) ? (1u << 30) : (uInt)(*size - done);
			crc = crc32(crc, *data + done, k);
			done += k;
		}
		if (crc != e->crc)
			return dlt_error(DLT_EINPUT, "%s: %s: crc mismatch", f->name, member);
	}
	return 0;
}

/* ---- files and arrays ------------------------------------------------------ */

static int file_open(struct npy_file *f, const char *path)
{
	void *map;
	char *mem;

	memset(f, 0, sizeof(*f));
	f->name = strcmp(path, "-") ? path : "standard input";
	DLT_TRY_RC(dlt_file_bytes(path, &map, &mem, &f->size));
	f->map = map;
	f->mem = mem;
	f->p = map ? map : (const uint8_t *)mem;
	if (f->size == 0)
		return dlt_error(DLT_EINPUT, "%s: empty file", f->name);
	return 0;
}

static void file_close(struct npy_file *f)
{
	if (f->map)
		munmap(f->map, f->size);
	free(f->mem);
	memset(f, 0, sizeof(*f));
}

static int is_zip(const struct npy_file *f)
{
	return f->size >= 4 && (le32(f->p) == 0x04034b50 || le32(f->p) == 0x06054b50);
}

/* Array name of the file f: the file itself for a .npy (name NULL), the
 * member for an .npz.  *found 0 (and no error) when an .npz has no such
 * member and optional says that is fine. */
static int array_open(struct npy *a, const struct npy_file *f, const char *name, int optional,
		      int *found)
{
	struct zip_entry e = { 0 };
	const uint8_t *data = NULL;
	size_t size = 0;
	char names[256], member[300];

	memset(a, 0, sizeof(*a));
	*found = 1;
	if (!is_zip(f)) {
		snprintf(a->name, sizeof(a->name), "%s", f->name);
		if (name)
			return dlt_error(DLT_EINPUT, "%s: not an .npz file, so it has no array '%s'",
					 f->name, name);
		return npy_parse(a, f->p, f->size);
	}
	DLT_TRY_RC(zip_find(f, name, &e, found, names, sizeof(names)));
	if (!*found) {
		if (optional)
			return 0;
		return dlt_error(DLT_EINPUT, "%s: no array '%s' (it holds: %s)", f->name, name,
				 *names ? names : "nothing");
	}
	clean_name(member, sizeof(member), e.name, e.nlen);
	snprintf(a->name, sizeof(a->name), "%s: %s", f->name, member);
	DLT_TRY_RC(zip_member(f, &e, member, &data, &size, &a->own));
	return npy_parse(a, data, size);
}

static void array_free(struct npy *a)
{
	free(a->own);
	a->own = NULL;
}

/* The C-order walk over an array's elements: the element offset of each
 * index in turn, for C and Fortran order alike. */
struct walk {
	int ndim, fortran;
	uint64_t idx[NPY_MAX_NDIM];
	size_t stride[NPY_MAX_NDIM];
	const uint64_t *dims;
	size_t off;
};

static void walk_init(struct walk *w, const struct npy *a)
{
	size_t s = 1;

	memset(w, 0, sizeof(*w));
	w->ndim = a->ndim;
	w->fortran = a->fortran && a->ndim > 1;
	w->dims = a->dims;
	for (int k = 0; k < a->ndim; k++) {
		w->stride[k] = s;
		s *= (size_t)a->dims[k];	/* no overflow: count was checked */
	}
}

static void walk_next(struct walk *w)
{
	if (!w->fortran) {
		w->off++;
		return;
	}
	for (int k = w->ndim - 1; k >= 0; k--) {
		w->off += w->stride[k];
		if (++w->idx[k] < w->dims[k])
			return;
		w->off -= w->stride[k] * (size_t)w->dims[k];
		w->idx[k] = 0;
	}
}

static uint64_t load(const struct npy *a, size_t off)
{
	const uint8_t *p = a->data + off * (size_t)a->size;
	uint64_t v = 0;

	if (a->swap)
		for (int i = 0; i < a->size; i++)
			v = v << 8 | p[i];
	else
		for (int i = a->size - 1; i >= 0; i--)
			v = v << 8 | p[i];
	return v;
}

/* An integer element, sign-extended */
static int64_t load_int(const struct npy *a, size_t off)
{
	uint64_t v = load(a, off);
	int shift = 64 - 8 * a->size;

	if (a->kind != 'i' || shift == 0)
		return (int64_t)v;
	return (int64_t)(v << shift) >> shift;
}

/* An element as f32, as NumPy's astype(np.float32) gives it; 0 when it is
 * not a finite f32 (nan, inf, or a double beyond the floats). */
static int load_f32(const struct npy *a, size_t off, float *out)
{
	uint64_t v;
	double d;
	float f;

	switch (a->kind) {
	case 'b':
		*out = a->data[off] != 0;
		return 1;
	case 'i':
		*out = (float)load_int(a, off);
		return 1;
	case 'u':
		*out = (float)load(a, off);
		return 1;
	}
	v = load(a, off);
	if (a->size == 2) {
		f = dlt_widen16((uint16_t)v, DLT_PREC_F16);
	} else if (a->size == 4) {
		uint32_t b = (uint32_t)v;
		memcpy(&f, &b, sizeof(f));
	} else {
		memcpy(&d, &v, sizeof(d));
		if (!(fabs(d) < F32_LIMIT))
			return 0;
		f = (float)d;
	}
	*out = f;
	return isfinite(f);
}

/* The elements of a in C order as f32 into out */
static int to_f32(const struct npy *a, float *out, size_t per_sample)
{
	struct walk w;
	size_t i = 0;

	if (a->kind == 'f' && a->size == 4 && !a->swap && (!a->fortran || a->ndim < 2)) {
		/* NumPy's own dtype on this machine: a copy and a check */
		memcpy(out, a->data, a->count * sizeof(float));
		for (; i < a->count; i++)
			if (!isfinite(out[i]))
				break;
	} else {
		walk_init(&w, a);
		for (; i < a->count; i++, walk_next(&w))
			if (!load_f32(a, w.off, &out[i]))
				break;
	}
	if (i < a->count)
		return dlt_error(DLT_EINPUT, "%s: sample %zu holds a value that is not a finite "
				 "f32 number (nan, inf or beyond 3.4e38)", a->name, i / per_sample);
	return 0;
}

static int to_u8(const struct npy *a, uint8_t *out)
{
	struct walk w;

	if (!a->fortran || a->ndim < 2) {
		memcpy(out, a->data, a->count);
		return 0;
	}
	walk_init(&w, a);
	for (size_t i = 0; i < a->count; i++, walk_next(&w))
		out[i] = a->data[w.off];
	return 0;
}

/* x: [N, ...] samples.  u8 stays u8 (images: the trainer scales by
 * 1/255, as for IDX); everything else becomes f32. */
static int read_x(dlt_prep_data *d, const struct npy *x)
{
	size_t per = 1;

	if (x->ndim > DLT_MAX_DIMS)
		return dlt_error(DLT_EINPUT, "%s: %d dimensions (at most %d: the samples and %d "
				 "more)", x->name, x->ndim, DLT_MAX_DIMS, DLT_MAX_DIMS - 1);
	d->n = (size_t)x->dims[0];
	d->ndim = x->ndim > 1 ? x->ndim - 1 : 1;
	d->dims[0] = 1;		/* a 1-D x is one feature a sample */
	for (int k = 1; k < x->ndim; k++) {
		d->dims[k - 1] = x->dims[k];
		per *= (size_t)x->dims[k];
	}
	if (x->kind == 'u' && x->size == 1) {
		d->dtype = DLT_U8;
		d->scale = 1.0 / 255;
		d->sample_size = per;
		if (!(d->x = dlt_malloc(x->count)))
			return DLT_ENOMEM;
		return to_u8(x, d->x);
	}
	d->dtype = DLT_F32;
	d->scale = 1;
	d->sample_size = per * sizeof(float);
	if (!(d->x = dlt_calloc(x->count, sizeof(float))))
		return DLT_ENOMEM;
	return to_f32(x, d->x, per);
}

/* An integer element as text, for messages */
static void int_text(const struct npy *a, size_t off, char *out, size_t n)
{
	if (a->kind == 'u')
		snprintf(out, n, "%llu", (unsigned long long)load(a, off));
	else
		snprintf(out, n, "%lld", (long long)load_int(a, off));
}

/* An integer or bool element, clamped to [-1, DLT_PREP_MAX_CLASSES]: all
 * that the callers tell apart */
static int64_t load_clamped(const struct npy *a, size_t off)
{
	if (a->kind == 'b')
		return a->data[off] != 0;
	if (a->kind == 'u') {
		uint64_t u = load(a, off);
		return u > DLT_PREP_MAX_CLASSES ? DLT_PREP_MAX_CLASSES : (int64_t)u;
	}
	int64_t v = load_int(a, off);
	return v < 0 ? -1 : v > DLT_PREP_MAX_CLASSES ? DLT_PREP_MAX_CLASSES : v;
}

/* Integer (or bool) y of [N]: class ids */
static int read_classes(dlt_prep_data *d, const struct npy *y)
{
	int64_t max = 0;
	char text[32];

	if (!(d->y = dlt_calloc(y->count, sizeof(*d->y))))
		return DLT_ENOMEM;
	for (size_t i = 0; i < y->count; i++) {
		int64_t v = load_clamped(y, i);
		if (v < 0 || v >= DLT_PREP_MAX_CLASSES) {
			int_text(y, i, text, sizeof(text));
			if (v < 0)
				return dlt_error(DLT_EINPUT, "%s: sample %zu: class id %s is negative",
						 y->name, i, text);
			return dlt_error(DLT_EINPUT, "%s: sample %zu: class id %s too large: at "
					 "most %d classes", y->name, i, text, DLT_PREP_MAX_CLASSES);
		}
		d->y[i] = (int32_t)v;
		max = v > max ? v : max;
	}
	d->num_classes = (int)max + 1;
	return 0;
}

/* Integer (or bool) y of [N, K]: K labels of 0 or 1 a sample */
static int read_multi_hot(dlt_prep_data *d, const struct npy *y)
{
	size_t k = (size_t)d->t_width;
	struct walk w;
	char text[32];
	uint8_t *t;

	if (!(t = dlt_malloc(y->count)))
		return DLT_ENOMEM;
	d->t = t;
	walk_init(&w, y);
	for (size_t i = 0; i < y->count; i++, walk_next(&w)) {
		int64_t v = load_clamped(y, w.off);
		if (v != 0 && v != 1) {
			int_text(y, w.off, text, sizeof(text));
			return dlt_error(DLT_EINPUT, "%s: sample %zu: label %zu is %s, not 0 or 1 "
					 "(integers of [N, K] are K labels a sample)", y->name,
					 i / k, i % k, text);
		}
		t[i] = (uint8_t)v;
	}
	return 0;
}

static int read_y(dlt_prep_data *d, const struct npy *y, const struct npy *x)
{
	if (y->dims[0] != x->dims[0])
		return dlt_error(DLT_EINPUT, "%s: %llu rows, but %s has %llu samples", y->name,
				 (unsigned long long)y->dims[0], x->name,
				 (unsigned long long)x->dims[0]);
	if (y->ndim > 2)
		return dlt_error(DLT_EINPUT, "%s: y of %d dimensions (classes or targets are [N] "
				 "or [N, K])", y->name, y->ndim);
	if (y->kind != 'f' && y->ndim == 1)
		return read_classes(d, y);
	if (y->ndim == 2 && y->dims[1] > INT32_MAX)
		return dlt_error(DLT_EINPUT, "%s: %llu targets a sample", y->name,
				 (unsigned long long)y->dims[1]);
	d->t_width = y->ndim == 2 ? (int)y->dims[1] : 1;
	if (y->kind != 'f') {
		d->t_dtype = DLT_U8;
		return read_multi_hot(d, y);
	}
	d->t_dtype = DLT_F32;
	if (!(d->t = dlt_calloc(y->count, sizeof(float))))
		return DLT_ENOMEM;
	return to_f32(y, d->t, (size_t)d->t_width);
}

int dlt_prep_read_npy(dlt_prep_data *d, const char *xpath, const char *ypath, const char *xname,
		      const char *yname)
{
	struct npy_file fx = { 0 }, fy = { 0 };
	struct npy x = { 0 }, y = { 0 };
	const struct npy_file *yf;
	int found = 0, rc = 0, y_needed = ypath || yname;

	memset(d, 0, sizeof(*d));
	d->source = "npy";
	DLT_TRY(file_open(&fx, xpath));
	if (ypath)
		DLT_TRY(file_open(&fy, ypath));
	yf = ypath ? &fy : &fx;
	/* np.savez(f, x, y) names them arr_0 and arr_1 */
	if (!xname && is_zip(&fx)) {
		DLT_TRY(array_open(&x, &fx, "x", 1, &found));
		if (!found) {
			DLT_TRY(array_open(&x, &fx, "arr_0", 1, &found));
			if (found && !yname && !ypath)
				yname = "arr_1";
		}
		if (!found)
			DLT_TRY(array_open(&x, &fx, "x", 0, &found));
	} else {
		DLT_TRY(array_open(&x, &fx, xname, 0, &found));
	}
	found = 0;
	/* y of an .npz given alone is optional unless named */
	if (y_needed || is_zip(&fx))
		DLT_TRY(array_open(&y, yf, yname ? yname : is_zip(yf) ? "y" : NULL, !y_needed,
				   &found));
	DLT_TRY(read_x(d, &x));
	if (found && y.data)
		DLT_TRY(read_y(d, &y, &x));
fail:
	array_free(&x);
	array_free(&y);
	file_close(&fx);
	file_close(&fy);
	if (rc < 0)
		dlt_prep_data_free(d);
	return rc;
}
