/* CSV: numeric features and one label column or none, RFC 4180 quoting ("a,b",
 * "say ""hi"""), LF or CRLF line ends.  The file is read whole and split
 * in place: fields are NUL-terminated pointers into the buffer. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "prep.h"

#define NONE ((size_t)-1)

struct csv {
	const char *name;	/* for messages */
	char *p, *end;		/* the unparsed rest of the buffer */
	size_t line;		/* line number at p */
	size_t row_line;	/* line the current row starts on */
	char **f;		/* fields of the current row */
	size_t nf, cap;
};

static int is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

static int csv_push(struct csv *c, char *field)
{
	if (dlt_grow(&c->f, &c->cap, c->nf + 1, sizeof(*c->f)) < 0)
		return DLT_ENOMEM;
	c->f[c->nf++] = field;
	return 0;
}

/* A quoted field, unescaped in place (the result is never longer than
 * the input); leaves p after the closing quote. */
static int csv_quoted(struct csv *c, char **field)
{
	char *out = c->p, *p = c->p + 1;

	*field = out;
	for (;;) {
		if (p == c->end)
			return dlt_error(DLT_EINPUT, "%s:%zu: unterminated quoted field",
					 c->name, c->row_line);
		if (*p == '"') {
			if (p + 1 < c->end && p[1] == '"') {
				*out++ = '"';
				p += 2;
				continue;
			}
			p++;
			break;
		}
		if (*p == '\n')
			c->line++;
		*out++ = *p++;
	}
	*out = 0;
	while (p < c->end && is_blank(*p))
		p++;
	if (p < c->end && *p != ',' && *p != '\n')
		return dlt_error(DLT_EINPUT, "%s:%zu: unexpected '%c' after a quoted field",
				 c->name, c->line, *p);
	c->p = p;
	return 0;
}

/* Splits the next non-blank row into c->f; returns 1 for a row, 0 at the
 * end of the input. */
static int csv_row(struct csv *c)
{
	int rc;

	for (;;) {
		int quoted = 0;

		if (c->p >= c->end)
			return 0;
		c->nf = 0;
		c->row_line = c->line;
		for (;;) {
			char *field, *e = NULL, sep;

			while (c->p < c->end && (*c->p == ' ' || *c->p == '\t'))
				c->p++;
			if (c->p < c->end && *c->p == '"') {
				if ((rc = csv_quoted(c, &field)) < 0)
					return rc;
				quoted = 1;
			} else {
				field = c->p;
				while (c->p < c->end && *c->p != ',' && *c->p != '\n')
					c->p++;
				for (e = c->p; e > field && is_blank(e[-1]); e--)
					;
			}
			sep = c->p < c->end ? *c->p : '\n';
			if (e)
				*e = 0;	/* may be the byte at c->end, allocated for it */
			c->p++;
			if ((rc = csv_push(c, field)) < 0)
				return rc;
			if (sep == '\n') {
				c->line++;
				break;
			}
		}
		/* blank lines, trailing ones included, separate nothing */
		if (c->nf > 1 || quoted || *c->f[0])
			return 1;
	}
}

/* A cell as a number: the whole cell, finite also as f32. */
static int csv_number(const char *s, float *out)
{
	char *end;
	double v;

	if (!*s)
		return -1;
	v = strtod(s, &end);
	if (*end || !isfinite((float)v))
		return -1;
	*out = (float)v;
	return 0;
}

/* A class id: digits only, so "1.0", "-1" and "+1" make the labels strings. */
static int csv_class_id(const char *s, long *out)
{
	long v = 0;

	if (!*s)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		if (v <= DLT_PREP_MAX_CLASSES)
			v = v * 10 + (*s - '0');
	}
	*out = v;
	return 0;
}

static size_t csv_find(char **hdr, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(hdr[i], name) == 0)
			return i;
	return NONE;
}

/* Decides whether the first row is a header and which column holds the
 * label (NONE when label is NULL: every column is a feature).
 * Auto-detection: the first row is a header when any cell outside the
 * label column is not a number. */
static int csv_layout(struct csv *c, const char *label, int *header, size_t *col)
{
	long long idx = -1;
	size_t named, skip;
	float v;

	if (!label) {
		*col = NONE;
		if (*header == DLT_CSV_HEADER_AUTO) {
			*header = 0;
			for (size_t i = 0; i < c->nf; i++)
				if (csv_number(c->f[i], &v) < 0)
					*header = 1;
		}
		return 0;
	}
	named = *header != DLT_CSV_NO_HEADER ? csv_find(c->f, c->nf, label) : NONE;
	if (label[0] >= '0' && label[0] <= '9' && strspn(label, "0123456789") == strlen(label))
		idx = strtoll(label, NULL, 10);
	skip = named != NONE ? named : idx >= 0 && (size_t)idx < c->nf ? (size_t)idx : NONE;
	if (*header == DLT_CSV_HEADER_AUTO) {
		*header = 0;
		for (size_t i = 0; i < c->nf; i++)
			if (i != skip && csv_number(c->f[i], &v) < 0)
				*header = 1;
	}
	if (*header && named != NONE) {
		*col = named;
	} else if (idx >= 0) {
		if ((size_t)idx >= c->nf)
			return dlt_error(DLT_EINPUT, "%s: label column %lld out of range: %zu columns",
					 c->name, idx, c->nf);
		*col = (size_t)idx;
	} else if (*header) {
		return dlt_error(DLT_EINPUT, "%s: unknown label column '%s'", c->name, label);
	} else {
		return dlt_error(DLT_EINPUT, "%s: no header row to find label column '%s' in",
				 c->name, label);
	}
	if (c->nf < 2)
		return dlt_error(DLT_EINPUT, "%s: no feature columns besides the label", c->name);
	return 0;
}

struct csv_labels {
	char **s;		/* the label cells, pointing into the buffer */
	size_t n, cap;
	int all_ids;		/* every label is a class id so far */
	size_t big_line;	/* first line with an id over the limit, or 0 */
};

static int csv_label(struct csv_labels *l, char *s, const struct csv *c)
{
	long id;

	if (!*s)
		return dlt_error(DLT_EINPUT, "%s:%zu: empty label", c->name, c->row_line);
	if (dlt_grow(&l->s, &l->cap, l->n + 1, sizeof(*l->s)) < 0)
		return DLT_ENOMEM;
	l->s[l->n++] = s;
	if (csv_class_id(s, &id) < 0)
		l->all_ids = 0;
	else if (id >= DLT_PREP_MAX_CLASSES && !l->big_line)
		l->big_line = c->row_line;
	return 0;
}

/* One data row: the features into x, the label (if any) aside. */
static int csv_data_row(struct csv *c, char **hdr, size_t width, size_t col,
			dlt_buf *x, float *row, struct csv_labels *l)
{
	size_t k = 0;
	int rc;

	if (c->nf != width)
		return dlt_error(DLT_EINPUT, "%s:%zu: expected %zu fields, got %zu",
				 c->name, c->row_line, width, c->nf);
	for (size_t i = 0; i < width; i++) {
		if (i == col)
			continue;
		if (csv_number(c->f[i], &row[k++]) == 0)
			continue;
		if (hdr)
			return dlt_error(DLT_EINPUT, "%s:%zu: column '%s': not a number: '%s'",
					 c->name, c->row_line, hdr[i], c->f[i]);
		return dlt_error(DLT_EINPUT, "%s:%zu: column %zu: not a number: '%s'",
				 c->name, c->row_line, i, c->f[i]);
	}
	if ((rc = dlt_buf_append(x, row, k * sizeof(*row))) < 0)
		return rc;
	return col == NONE ? 0 : csv_label(l, c->f[col], c);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* String labels: the distinct names, sorted bytewise so that the same
 * data gives the same ids whatever its row order, become classes. */
static int csv_classes(dlt_prep_data *d, struct csv_labels *l, const char *name)
{
	char **u = dlt_malloc(l->n * sizeof(*u));
	size_t k = 0;

	if (!u)
		return DLT_ENOMEM;
	memcpy(u, l->s, l->n * sizeof(*u));
	qsort(u, l->n, sizeof(*u), cmp_str);
	for (size_t i = 0; i < l->n; i++)
		if (k == 0 || strcmp(u[k - 1], u[i]) != 0)
			u[k++] = u[i];
	if (k > DLT_PREP_MAX_CLASSES) {
		free(u);
		return dlt_error(DLT_EINPUT, "%s: %zu distinct labels: more than %d classes",
				 name, k, DLT_PREP_MAX_CLASSES);
	}
	if (!(d->classes = dlt_calloc(k, sizeof(*d->classes))))
		goto nomem;
	d->num_classes = (int)k;
	for (size_t i = 0; i < k; i++)
		if (!(d->classes[i] = dlt_strdup(u[i])))
			goto nomem;
	for (size_t i = 0; i < l->n; i++) {
		char **hit = bsearch(&l->s[i], u, k, sizeof(*u), cmp_str);
		d->y[i] = (int32_t)(hit - u);
	}
	free(u);
	return 0;
nomem:
	free(u);
	return DLT_ENOMEM;
}

static int csv_ids(dlt_prep_data *d, const struct csv_labels *l, const char *name)
{
	long id = 0, max = 0;

	if (l->big_line)
		return dlt_error(DLT_EINPUT, "%s:%zu: label too large: at most %d classes",
				 name, l->big_line, DLT_PREP_MAX_CLASSES);
	for (size_t i = 0; i < l->n; i++) {
		csv_class_id(l->s[i], &id);
		d->y[i] = (int32_t)id;
		max = id > max ? id : max;
	}
	d->num_classes = (int)max + 1;
	return 0;
}

/* The labels as class ids, into a new d->y. */
static int csv_labels_to_ids(dlt_prep_data *d, struct csv_labels *l, const char *name)
{
	if (!(d->y = dlt_malloc(l->n * sizeof(*d->y))))
		return DLT_ENOMEM;
	return l->all_ids ? csv_ids(d, l, name) : csv_classes(d, l, name);
}

static int csv_rows(dlt_prep_data *d, struct csv *c, const char *label, int header)
{
	struct csv_labels l = { .all_ids = 1 };
	char **hdr = NULL;
	dlt_buf x = { 0 };
	float *row = NULL;
	size_t width, col = 0, features, rows = 0;
	int rc;

	if ((rc = csv_row(c)) <= 0)
		return rc < 0 ? rc : dlt_error(DLT_EINPUT, "%s: empty file", c->name);
	DLT_TRY(csv_layout(c, label, &header, &col));
	width = c->nf;
	features = col == NONE ? width : width - 1;
	if (header) {
		if (!(hdr = dlt_malloc(width * sizeof(*hdr)))) {
			rc = DLT_ENOMEM;
			goto fail;
		}
		memcpy(hdr, c->f, width * sizeof(*hdr));
	}
	if (!(row = dlt_malloc(features * sizeof(*row)))) {
		rc = DLT_ENOMEM;
		goto fail;
	}
	if (!header) {
		DLT_TRY(csv_data_row(c, NULL, width, col, &x, row, &l));
		rows++;
	}
	while ((rc = csv_row(c)) > 0) {
		DLT_TRY(csv_data_row(c, hdr, width, col, &x, row, &l));
		rows++;
	}
	if (rc < 0)
		goto fail;
	if (rows == 0) {
		rc = dlt_error(DLT_EINPUT, "%s: no data rows", c->name);
		goto fail;
	}
	d->n = rows;
	d->dims[0] = features;
	d->sample_size = features * sizeof(float);
	d->x = x.data;
	x.data = NULL;
	if (col != NONE)	/* without labels: no y, no classes */
		rc = csv_labels_to_ids(d, &l, c->name);
fail:
	dlt_buf_free(&x);
	free(l.s);
	free(hdr);
	free(row);
	return rc;
}

int dlt_prep_read_csv(dlt_prep_data *d, const char *path, const char *label, int header)
{
	struct csv c = { .name = strcmp(path, "-") ? path : "standard input", .line = 1 };
	char *data;
	size_t len;
	int rc;

	memset(d, 0, sizeof(*d));
	if ((rc = dlt_read_file(path, 0, &data, &len)) < 0)
		return rc;
	/* one byte more, so the last field of a file without a final newline
	 * can be NUL-terminated in place too */
	if (!(c.p = dlt_realloc(data, len + 1))) {
		free(data);
		return DLT_ENOMEM;
	}
	c.end = c.p + len;
	data = c.p;
	/* a NUL would end a cell early and let "1<NUL>junk" pass as 1 */
	if (memchr(data, 0, len)) {
		free(data);
		return dlt_error(DLT_EINPUT, "%s: not a text file: it holds a NUL byte", c.name);
	}
	d->source = "csv";
	d->dtype = DLT_F32;
	d->ndim = 1;
	d->scale = 1;
	if ((rc = csv_rows(d, &c, label, header)) < 0)
		dlt_prep_data_free(d);
	free(c.f);
	free(data);
	return rc;
}
