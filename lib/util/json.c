/* JSON: a writer for metrics and metadata, and a small parser for reading
 * them back (metadata of archives, metrics.jsonl of runs). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* An append that fails sets j->failed; dlt_json_ok tells, once, at the end. */
static void put(dlt_json *j, const char *s, size_t n)
{
	if (dlt_buf_append(&j->buf, s, n) < 0)
		j->failed = 1;
}

static void puts_(dlt_json *j, const char *s)
{
	put(j, s, strlen(s));
}

int dlt_json_escape(dlt_buf *b, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	int rc = dlt_buf_append(b, "\"", 1);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		char e[7] = "\\u00";
		if (c == '"' || c == '\\') {
			e[1] = c;
			rc |= dlt_buf_append(b, e, 2);
		} else if (c == '\n') {
			rc |= dlt_buf_append(b, "\\n", 2);
		} else if (c == '\t') {
			rc |= dlt_buf_append(b, "\\t", 2);
		} else if (c < 0x20) {
			e[4] = hex[c >> 4];
			e[5] = hex[c & 15];
			rc |= dlt_buf_append(b, e, 6);
		} else {
			rc |= dlt_buf_append(b, s, 1);
		}
	}
	rc |= dlt_buf_append(b, "\"", 1);
	return rc ? DLT_ENOMEM : 0;
}

void dlt_json_key(dlt_json *j, const char *key)
{
	if (j->need_comma)
		put(j, ",", 1);
	j->need_comma = 1;
	if (key) {
		if (dlt_json_escape(&j->buf, key) < 0)
			j->failed = 1;
		put(j, ":", 1);
	}
}

void dlt_json_begin(dlt_json *j)
{
	memset(j, 0, sizeof(*j));
	put(j, "{", 1);
}

void dlt_json_end(dlt_json *j)
{
	put(j, "}", 1);
	j->need_comma = 1;
}

void dlt_json_object_begin(dlt_json *j, const char *key)
{
	dlt_json_key(j, key);
	put(j, "{", 1);
	j->need_comma = 0;
}

void dlt_json_array_begin(dlt_json *j, const char *key)
{
	dlt_json_key(j, key);
	put(j, "[", 1);
	j->need_comma = 0;
}

void dlt_json_array_end(dlt_json *j)
{
	put(j, "]", 1);
	j->need_comma = 1;
}

void dlt_json_str(dlt_json *j, const char *key, const char *v)
{
	dlt_json_key(j, key);
	if (dlt_json_escape(&j->buf, v) < 0)
		j->failed = 1;
}

void dlt_json_int(dlt_json *j, const char *key, long long v)
{
	char s[32];
	dlt_json_key(j, key);
	snprintf(s, sizeof(s), "%lld", v);
	puts_(j, s);
}

/* The shortest %g form that reads back to the same value: 0.1, not
 * 0.10000000000000001.  digits is 17 for doubles, 9 for floats. */
static void num(dlt_json *j, const char *key, double v, int digits)
{
	char s[40];
	dlt_json_key(j, key);
	if (!isfinite(v)) {
		puts_(j, "null");
		return;
	}
	for (int d = digits == 9 ? 6 : 15; d <= digits; d++) {
		snprintf(s, sizeof(s), "%.*g", d, v);
		if (digits == 9 ? (float)strtod(s, NULL) == (float)v : strtod(s, NULL) == v)
			break;
	}
	puts_(j, s);
}

void dlt_json_num(dlt_json *j, const char *key, double v)
{
	num(j, key, v, 17);
}

void dlt_json_f32(dlt_json *j, const char *key, float v)
{
	num(j, key, v, 9);
}

void dlt_json_bool(dlt_json *j, const char *key, int v)
{
	dlt_json_key(j, key);
	puts_(j, v ? "true" : "false");
}

void dlt_json_raw(dlt_json *j, const char *key, const char *json)
{
	dlt_json_key(j, key);
	puts_(j, json);
}

int dlt_json_ok(const dlt_json *j)
{
	return j->failed ? dlt_error(DLT_ENOMEM, "out of memory (json)") : 0;
}

void dlt_json_free(dlt_json *j)
{
	dlt_buf_free(&j->buf);
}

/* The parser: recursive descent with a depth bound, so hostile input can
 * neither overflow the stack nor allocate more than a few times its size. */
enum { MAX_DEPTH = 128 };

typedef struct parser {
	const char *s, *end, *start;
} parser;

static int perr(parser *p, const char *what)
{
	return dlt_error(DLT_EINPUT, "offset %zu: %s", (size_t)(p->s - p->start), what);
}

static void skip_ws(parser *p)
{
	while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r'))
		p->s++;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static void put_utf8(dlt_buf *b, unsigned cp)
{
	char u[4];
	int n;
	if (cp < 0x80) {
		u[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		u[0] = (char)(0xC0 | cp >> 6);
		u[1] = (char)(0x80 | (cp & 0x3F));
		n = 2;
	} else if (cp < 0x10000) {
		u[0] = (char)(0xE0 | cp >> 12);
		u[1] = (char)(0x80 | (cp >> 6 & 0x3F));
		u[2] = (char)(0x80 | (cp & 0x3F));
		n = 3;
	} else {
		u[0] = (char)(0xF0 | cp >> 18);
		u[1] = (char)(0x80 | (cp >> 12 & 0x3F));
		u[2] = (char)(0x80 | (cp >> 6 & 0x3F));
		u[3] = (char)(0x80 | (cp & 0x3F));
		n = 4;
	}
	dlt_buf_append(b, u, n);
}

static int parse_hex4(parser *p, unsigned *out)
{
	unsigned v = 0;
	if (p->end - p->s < 4)
		return perr(p, "truncated \\u escape");
	for (int i = 0; i < 4; i++) {
		int h = hexval(p->s[i]);
		if (h < 0)
			return perr(p, "bad \\u escape");
		v = v << 4 | (unsigned)h;
	}
	p->s += 4;
	*out = v;
	return 0;
}

static int parse_string(parser *p, char **out)
{
	dlt_buf b = { 0 };
	int rc;
	p->s++;			/* opening quote */
	while (p->s < p->end && *p->s != '"') {
		unsigned char c = (unsigned char)*p->s;
		if (c < 0x20) {
			rc = perr(p, "control character in string");
			goto fail;
		}
		if (c != '\\') {
			const char *q = p->s;
			while (q < p->end && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20)
				q++;
			dlt_buf_append(&b, p->s, q - p->s);
			p->s = q;
			continue;
		}
		if (++p->s >= p->end)
			break;
		switch (*p->s++) {
		case '"': dlt_buf_append(&b, "\"", 1); break;
		case '\\': dlt_buf_append(&b, "\\", 1); break;
		case '/': dlt_buf_append(&b, "/", 1); break;
		case 'b': dlt_buf_append(&b, "\b", 1); break;
		case 'f': dlt_buf_append(&b, "\f", 1); break;
		case 'n': dlt_buf_append(&b, "\n", 1); break;
		case 'r': dlt_buf_append(&b, "\r", 1); break;
		case 't': dlt_buf_append(&b, "\t", 1); break;
		case 'u': {
			unsigned cp, lo;
			if ((rc = parse_hex4(p, &cp)) < 0)
				goto fail;
			if (cp >= 0xD800 && cp < 0xDC00 && p->end - p->s >= 6 &&
			    p->s[0] == '\\' && p->s[1] == 'u') {
				p->s += 2;
				if ((rc = parse_hex4(p, &lo)) < 0)
					goto fail;
				if (lo >= 0xDC00 && lo < 0xE000)
					cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
				else
					cp = 0xFFFD;
			} else if (cp >= 0xD800 && cp < 0xE000) {
				cp = 0xFFFD;
			}
			if (cp == 0) {
				rc = perr(p, "NUL in string");
				goto fail;
			}
			put_utf8(&b, cp);
			break;
		}
		default:
			p->s--;
			rc = perr(p, "bad escape in string");
			goto fail;
		}
	}
	if (p->s >= p->end) {
		rc = perr(p, "unterminated string");
		goto fail;
	}
	p->s++;
	if (!b.data && dlt_buf_append(&b, "", 0) < 0)
		return DLT_ENOMEM;
	*out = b.data;
	return 0;
fail:
	dlt_buf_free(&b);
	return rc;
}

static int parse_value(parser *p, dlt_jval *v, int depth);

static int parse_container(parser *p, dlt_jval *v, int depth, char close)
{
	size_t cap = 0;
	int rc;
	p->s++;
	skip_ws(p);
	if (p->s < p->end && *p->s == close) {
		p->s++;
		return 0;
	}
	for (;;) {
		dlt_jval *it;
		if (dlt_grow(&v->items, &cap, v->n + 1, sizeof(*v->items)) < 0)
			return DLT_ENOMEM;
		it = &v->items[v->n];
		memset(it, 0, sizeof(*it));
		skip_ws(p);
		if (close == '}') {
			char *key;
			if (p->s >= p->end || *p->s != '"')
				return perr(p, "expected a string key");
			if ((rc = parse_string(p, &key)) < 0)
				return rc;
			skip_ws(p);
			if (p->s >= p->end || *p->s != ':') {
				free(key);
				return perr(p, "expected ':'");
			}
			p->s++;
			rc = parse_value(p, it, depth + 1);
			it->key = key;
			v->n++;
		} else {
			rc = parse_value(p, it, depth + 1);
			v->n++;
		}
		if (rc < 0)
			return rc;
		skip_ws(p);
		if (p->s < p->end && *p->s == ',') {
			p->s++;
			continue;
		}
		if (p->s < p->end && *p->s == close) {
			p->s++;
			return 0;
		}
		return perr(p, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
	}
}

static int parse_value(parser *p, dlt_jval *v, int depth)
{
	if (depth > MAX_DEPTH)
		return perr(p, "nested too deeply");
	skip_ws(p);
	if (p->s >= p->end)
		return perr(p, "unexpected end");
	switch (*p->s) {
	case '{':
		v->type = DLT_JOBJ;
		return parse_container(p, v, depth, '}');
	case '[':
		v->type = DLT_JARR;
		return parse_container(p, v, depth, ']');
	case '"':
		v->type = DLT_JSTR;
		return parse_string(p, &v->str);
	}
	if (p->end - p->s >= 4 && memcmp(p->s, "true", 4) == 0) {
		v->type = DLT_JBOOL;
		v->num = 1;
		p->s += 4;
		return 0;
	}
	if (p->end - p->s >= 5 && memcmp(p->s, "false", 5) == 0) {
		v->type = DLT_JBOOL;
		p->s += 5;
		return 0;
	}
	if (p->end - p->s >= 4 && memcmp(p->s, "null", 4) == 0) {
		v->type = DLT_JNULL;
		p->s += 4;
		return 0;
	}
	{
		/* copy the number out: the input need not be NUL-terminated */
		char tmp[64];
		const char *q = p->s;
		char *end;
		size_t n;
		while (q < p->end && strchr("+-0123456789.eE", *q))
			q++;
		n = q - p->s;
		if (n == 0 || n >= sizeof(tmp))
			return perr(p, n ? "number too long" : "unexpected character");
		memcpy(tmp, p->s, n);
		tmp[n] = 0;
		v->num = strtod(tmp, &end);
		if (*end || tmp[0] == '+' || tmp[0] == '.')
			return perr(p, "bad number");
		v->type = DLT_JNUM;
		p->s = q;
		return 0;
	}
}

int dlt_json_parse(const char *s, size_t n, dlt_jval *out)
{
	parser p = { s, s + n, s };
	int rc;
	memset(out, 0, sizeof(*out));
	rc = parse_value(&p, out, 0);
	if (rc == 0) {
		skip_ws(&p);
		if (p.s != p.end)
			rc = perr(&p, "trailing characters");
	}
	if (rc < 0)
		dlt_jval_free(out);
	return rc;
}

void dlt_jval_free(dlt_jval *v)
{
	for (size_t i = 0; i < v->n; i++)
		dlt_jval_free(&v->items[i]);
	free(v->items);
	free(v->str);
	free(v->key);
	memset(v, 0, sizeof(*v));
}

const dlt_jval *dlt_jval_get(const dlt_jval *obj, const char *key)
{
	if (!obj || obj->type != DLT_JOBJ)
		return NULL;
	for (size_t i = 0; i < obj->n; i++)
		if (strcmp(obj->items[i].key, key) == 0)
			return &obj->items[i];
	return NULL;
}

int dlt_jval_int(const dlt_jval *v, long long lo, long long hi, long long *out)
{
	/* the range first: converting a double outside long long's is undefined */
	if (!v || v->type != DLT_JNUM || !(v->num >= (double)lo && v->num <= (double)hi) ||
	    v->num != floor(v->num))
		return 0;
	*out = (long long)v->num;
	return 1;
}
