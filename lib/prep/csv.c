/* CSV: numeric features and a class label column, float target columns,
 * 0/1 label columns, or none; RFC 4180 quoting ("a,b",
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

/* The y columns: which they are, and where each cell of a row goes. */
struct csv_y {
	int kind;		/* DLT_CSV_* */
	const char *word;	/* "label" or "target", for messages */
	char *spec;		/* a copy of the option, split in place at commas */
	char **item;		/* the columns as given */
	size_t n;		/* how many: 0 for none */
	size_t *col;		/* their indices, in the order given */
	size_t *slot;		/* per column of the file: its place in y, or NONE */
	int force;		/* classes even when they look continuous */
};

static void csv_y_free(struct csv_y *y)
{
	free(y->spec);
	free(y->item);
	free(y->col);
	free(y->slot);
}

/* Splits the option into columns: targets and labels take a list, a
 * class column one name, commas and all. */
static int csv_y_items(struct csv_y *y, const dlt_csv_opts *o, const char *name)
{
	size_t n = 1;

	y->kind = o->kind;
	y->force = o->classes;
	y->word = o->kind == DLT_CSV_TARGETS ? "target" : "label";
	if (!o->cols)
		return 0;
	if (!(y->spec = dlt_strdup(o->cols)))
		return DLT_ENOMEM;
	if (o->kind != DLT_CSV_CLASSES)
		for (const char *p = y->spec; *p; p++)
			n += *p == ',';
	if (!(y->item = dlt_calloc(n, sizeof(*y->item))) ||
	    !(y->col = dlt_calloc(n, sizeof(*y->col))))
		return DLT_ENOMEM;
	y->item[0] = y->spec;
	for (char *p = y->spec; o->kind != DLT_CSV_CLASSES && *p; p++)
		if (*p == ',') {
			*p = 0;
			y->item[++y->n] = p + 1;
		}
	y->n++;
	for (size_t k = 0; k < y->n; k++)
		if (!*y->item[k])
			return dlt_error(DLT_EINPUT, "%s: an empty %s column name in '%s'", name,
					 y->word, o->cols);
	return 0;
}

/* A column given as a 0-based index: its value, or -1 */
static long long csv_index(const char *s)
{
	if (!*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 18)
		return -1;
	return strtoll(s, NULL, 10);
}

/* Where item k of the y columns is in row f (the first row), assuming it
 * is a header: its name there, or its index; NONE if neither. */
static size_t csv_guess(const struct csv *c, const struct csv_y *y, size_t k, int header)
{
	size_t named = header != DLT_CSV_NO_HEADER ? csv_find(c->f, c->nf, y->item[k]) : NONE;
	long long idx = csv_index(y->item[k]);

	return named != NONE ? named : idx >= 0 && (size_t)idx < c->nf ? (size_t)idx : NONE;
}

/* Decides whether the first row is a header and which columns are y
 * (none when y->n is 0: every column is a feature).  Auto-detection: the
 * first row is a header when any cell outside the y columns is not a
 * number. */
static int csv_layout(struct csv *c, struct csv_y *y, int *header)
{
	float v;

	if (!(y->slot = dlt_malloc(c->nf * sizeof(*y->slot))))
		return DLT_ENOMEM;
	for (size_t i = 0; i < c->nf; i++)
		y->slot[i] = NONE;
	for (size_t k = 0; k < y->n; k++) {
		size_t g = csv_guess(c, y, k, *header);
		if (g != NONE)
			y->slot[g] = k;
	}
	if (*header == DLT_CSV_HEADER_AUTO) {
		*header = 0;
		for (size_t i = 0; i < c->nf; i++)
			if (y->slot[i] == NONE && csv_number(c->f[i], &v) < 0)
				*header = 1;
	}
	for (size_t i = 0; i < c->nf; i++)
		y->slot[i] = NONE;
	for (size_t k = 0; k < y->n; k++) {
		const char *item = y->item[k];
		size_t named = *header ? csv_find(c->f, c->nf, item) : NONE;
		long long idx = csv_index(item);

		if (named != NONE) {
			y->col[k] = named;
		} else if (idx >= 0) {
			if ((size_t)idx >= c->nf)
				return dlt_error(DLT_EINPUT, "%s: %s column %lld out of range: %zu "
						 "columns", c->name, y->word, idx, c->nf);
			y->col[k] = (size_t)idx;
		} else if (*header) {
			return dlt_error(DLT_EINPUT, "%s: unknown %s column '%s'", c->name, y->word,
					 item);
		} else {
			return dlt_error(DLT_EINPUT, "%s: no header row to find %s column '%s' in",
					 c->name, y->word, item);
		}
		if (y->slot[y->col[k]] != NONE)
			return dlt_error(DLT_EINPUT, "%s: %s column '%s' given twice", c->name,
					 y->word, item);
		y->slot[y->col[k]] = k;
	}
	if (y->n && c->nf <= y->n)
		return dlt_error(DLT_EINPUT, "%s: no feature columns besides the %s%s", c->name,
				 y->word, y->kind == DLT_CSV_CLASSES ? "" : "s");
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

/* A cell's column for messages: 'name' with a header, its index without */
static int csv_cell_error(const struct csv *c, char **hdr, size_t i, const char *what)
{
	if (hdr)
		return dlt_error(DLT_EINPUT, "%s:%zu: column '%s': %s: '%s'", c->name, c->row_line,
				 hdr[i], what, c->f[i]);
	return dlt_error(DLT_EINPUT, "%s:%zu: column %zu: %s: '%s'", c->name, c->row_line, i, what,
			 c->f[i]);
}

/* One data row: the features into x, float targets or 0/1 labels into t,
 * a class label (if any) aside. */
static int csv_data_row(struct csv *c, char **hdr, const struct csv_y *y, dlt_buf *x,
			float *row, dlt_buf *t, float *trow, struct csv_labels *l)
{
	size_t k = 0, label = NONE;
	int rc;

	for (size_t i = 0; i < c->nf; i++) {
		size_t s = y->slot[i];
		float v;

		if (s != NONE && y->kind == DLT_CSV_CLASSES) {
			label = i;
			continue;
		}
		if (s != NONE && y->kind == DLT_CSV_LABELS) {
			if (csv_number(c->f[i], &v) < 0 || (v != 0 && v != 1))
				return csv_cell_error(c, hdr, i, "not 0 or 1");
			trow[s] = v;
		} else if (csv_number(c->f[i], s == NONE ? &row[k] : &trow[s]) < 0) {
			return csv_cell_error(c, hdr, i, "not a number");
		} else if (s == NONE) {
			k++;
		}
	}
	if ((rc = dlt_buf_append(x, row, k * sizeof(*row))) < 0)
		return rc;
	if (y->kind == DLT_CSV_TARGETS && y->n)
		return dlt_buf_append(t, trow, y->n * sizeof(*trow));
	if (y->kind == DLT_CSV_LABELS) {
		for (size_t j = 0; j < y->n; j++) {
			uint8_t b = trow[j] != 0;
			if ((rc = dlt_buf_append(t, &b, 1)) < 0)
				return rc;
		}
		return 0;
	}
	return label == NONE ? 0 : csv_label(l, c->f[label], c);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Labels that look like measurements, not classes: every one a number,
 * more than half of them distinct and more than half not integers.  A
 * price or a length made into one class per distinct value would train a
 * nonsense classifier. */
static int csv_continuous(const struct csv_labels *l, size_t *distinct, int *yes)
{
	size_t fractional = 0;
	double *v;

	*yes = 0;
	*distinct = 0;
	if (!(v = dlt_malloc(l->n * sizeof(*v))))
		return DLT_ENOMEM;
	for (size_t i = 0; i < l->n; i++) {
		char *end;
		v[i] = strtod(l->s[i], &end);
		if (*end || !isfinite(v[i])) {
			free(v);
			return 0;
		}
		fractional += v[i] != floor(v[i]);
	}
	qsort(v, l->n, sizeof(*v), cmp_double);
	for (size_t i = 0; i < l->n; i++)
		*distinct += i == 0 || v[i] != v[i - 1];
	free(v);
	*yes = 2 * fractional > l->n && 2 * *distinct > l->n;
	return 0;
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

/* The labels as class ids, into a new d->y; col names the label column. */
static int csv_labels_to_ids(dlt_prep_data *d, struct csv_labels *l, const char *name,
			     const char *col, int force)
{
	size_t distinct;
	int continuous;

	if (!l->all_ids && !force) {
		DLT_TRY_RC(csv_continuous(l, &distinct, &continuous));
		if (continuous)
			return dlt_error(DLT_EINPUT, "%s: label column '%s' looks continuous (%zu "
					 "of %zu values distinct, most not integers): --target %s "
					 "for regression, or --classes to make them classes",
					 name, col, distinct, l->n, col);
	}
	if (!(d->y = dlt_malloc(l->n * sizeof(*d->y))))
		return DLT_ENOMEM;
	return l->all_ids ? csv_ids(d, l, name) : csv_classes(d, l, name);
}

/* Float targets or multi-hot labels: t, and the names from the header */
static int csv_targets(dlt_prep_data *d, const struct csv_y *y, char **hdr, dlt_buf *t)
{
	d->t_dtype = y->kind == DLT_CSV_TARGETS ? DLT_F32 : DLT_U8;
	d->t_width = (int)y->n;
	d->t = t->data;
	t->data = NULL;
	if (!hdr)
		return 0;
	if (!(d->t_names = dlt_calloc(y->n, sizeof(*d->t_names))))
		return DLT_ENOMEM;
	for (size_t k = 0; k < y->n; k++)
		if (!(d->t_names[k] = dlt_strdup(hdr[y->col[k]])))
			return DLT_ENOMEM;
	return 0;
}

static int csv_rows(dlt_prep_data *d, struct csv *c, const dlt_csv_opts *o)
{
	struct csv_labels l = { .all_ids = 1 };
	struct csv_y y = { 0 };
	char **hdr = NULL, colname[32];
	dlt_buf x = { 0 }, t = { 0 };
	float *row = NULL, *trow = NULL;
	size_t width, features, rows = 0;
	int header = o->header, rc;

	DLT_TRY(csv_y_items(&y, o, c->name));
	if ((rc = csv_row(c)) <= 0) {
		rc = rc < 0 ? rc : dlt_error(DLT_EINPUT, "%s: empty file", c->name);
		goto fail;
	}
	DLT_TRY(csv_layout(c, &y, &header));
	width = c->nf;
	features = width - y.n;
	if (header) {
		if (!(hdr = dlt_malloc(width * sizeof(*hdr)))) {
			rc = DLT_ENOMEM;
			goto fail;
		}
		memcpy(hdr, c->f, width * sizeof(*hdr));
	}
	if (!(row = dlt_malloc(features * sizeof(*row))) ||
	    !(trow = dlt_malloc((y.n ? y.n : 1) * sizeof(*trow)))) {
		rc = DLT_ENOMEM;
		goto fail;
	}
	/* without a header the first row, in c->f now, is data */
	for (rc = header ? csv_row(c) : 1; rc > 0; rc = csv_row(c)) {
		if (c->nf != width) {
			rc = dlt_error(DLT_EINPUT, "%s:%zu: expected %zu fields, got %zu", c->name,
				       c->row_line, width, c->nf);
			goto fail;
		}
		DLT_TRY(csv_data_row(c, hdr, &y, &x, row, &t, trow, &l));
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
	if (y.n && y.kind == DLT_CSV_CLASSES) {
		snprintf(colname, sizeof(colname), "%zu", y.col[0]);
		rc = csv_labels_to_ids(d, &l, c->name, hdr ? hdr[y.col[0]] : colname, y.force);
	} else if (y.n) {
		rc = csv_targets(d, &y, hdr, &t);
	}
fail:
	dlt_buf_free(&x);
	dlt_buf_free(&t);
	csv_y_free(&y);
	free(l.s);
	free(hdr);
	free(row);
	free(trow);
	return rc;
}

int dlt_prep_read_csv(dlt_prep_data *d, const char *path, const dlt_csv_opts *o)
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
	if ((rc = csv_rows(d, &c, o)) < 0)
		dlt_prep_data_free(d);
	free(c.f);
	free(data);
	return rc;
}
