/* config: YAML text to a dlt_node tree, and -s overrides that edit it.
 *
 * The tree is built from libyaml's event stream by a recursive descent whose
 * depth is bounded, so hostile input cannot exhaust the stack; the number of
 * nodes is bounded too.  Anchors and aliases are refused: they are rarely
 * useful in a config and they are how "billion laughs" inputs explode. */
#include "config/config.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define MAX_DEPTH 64
#define MAX_NODES (1 << 18)
#define YAML_STR_TAG "tag:yaml.org,2002:str"

struct parser {
	yaml_parser_t yp;
	const char *text;
	size_t len;
	const char *file;
	int is_override;	/* lines are 0: the override names the place */
	int max_depth;
	size_t n_nodes;
};

static int vnode_error(const char *file, int line, const char *fmt, va_list ap)
{
	char msg[512];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (line > 0)
		return dlt_error(DLT_EINPUT, "%s:%d: %s", file, line, msg);
	return dlt_error(DLT_EINPUT, "%s: %s", file, msg);
}

int dlt_node_error(const dlt_node *n, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = vnode_error(n->file, n->line, fmt, ap);
	va_end(ap);
	return rc;
}

static int parse_error(const struct parser *p, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int parse_error(const struct parser *p, int line, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = vnode_error(p->file, p->is_override ? 0 : line, fmt, ap);
	va_end(ap);
	return rc;
}

/* Reader errors (bad UTF-8, control characters) carry a byte offset rather
 * than a mark, so the line is counted here. */
static int yaml_fail(const struct parser *p)
{
	const yaml_parser_t *yp = &p->yp;
	int line = (int)yp->problem_mark.line + 1;

	if (yp->error == YAML_MEMORY_ERROR)
		return dlt_error(DLT_ENOMEM, "%s: out of memory parsing yaml", p->file);
	if (yp->error == YAML_READER_ERROR) {
		line = 1;
		for (size_t i = 0; i < yp->problem_offset && i < p->len; i++)
			line += p->text[i] == '\n';
	}
	return parse_error(p, line, "yaml: %s", yp->problem ? yp->problem : "syntax error");
}

static int next_event(struct parser *p, yaml_event_t *ev)
{
	if (!yaml_parser_parse(&p->yp, ev))
		return yaml_fail(p);
	return 0;
}

static int event_line(const yaml_event_t *ev)
{
	return (int)ev->start_mark.line + 1;
}

static int check_event(struct parser *p, const yaml_event_t *ev)
{
	const yaml_char_t *anchor = NULL, *tag = NULL;

	switch (ev->type) {
	case YAML_ALIAS_EVENT:
		return parse_error(p, event_line(ev), "yaml anchors and aliases are not supported");
	case YAML_SCALAR_EVENT:
		anchor = ev->data.scalar.anchor;
		tag = ev->data.scalar.tag;
		if (tag && !strcmp((const char *)tag, YAML_STR_TAG))
			tag = NULL;
		break;
	case YAML_SEQUENCE_START_EVENT:
		anchor = ev->data.sequence_start.anchor;
		tag = ev->data.sequence_start.tag;
		break;
	case YAML_MAPPING_START_EVENT:
		anchor = ev->data.mapping_start.anchor;
		tag = ev->data.mapping_start.tag;
		break;
	default:
		break;
	}
	if (anchor)
		return parse_error(p, event_line(ev), "yaml anchors and aliases are not supported");
	if (tag)
		return parse_error(p, event_line(ev), "yaml tag '%.64s' is not supported",
				   (const char *)tag);
	if (++p->n_nodes > MAX_NODES)
		return parse_error(p, event_line(ev), "yaml: more than %d nodes", MAX_NODES);
	return 0;
}

static int scalar_text(struct parser *p, const yaml_event_t *ev, char **out)
{
	size_t n = ev->data.scalar.length;

	if (memchr(ev->data.scalar.value, 0, n))
		return parse_error(p, event_line(ev), "strings may not contain NUL");
	*out = dlt_malloc(n + 1);
	if (!*out)
		return DLT_ENOMEM;
	memcpy(*out, ev->data.scalar.value, n);
	(*out)[n] = 0;
	return 0;
}

static int build(struct parser *p, yaml_event_t *ev, int depth, dlt_node *out);

/* Appends a zeroed node to n->items; cap is the caller's running capacity. */
static dlt_node *push(dlt_node *n, size_t *cap)
{
	if (n->n == *cap) {
		size_t c = *cap ? 2 * *cap : 4;
		dlt_node *items = dlt_calloc(c, sizeof(*items));

		if (!items)
			return NULL;
		if (n->n)
			memcpy(items, n->items, n->n * sizeof(*items));
		free(n->items);
		n->items = items;
		*cap = c;
	}
	memset(&n->items[n->n], 0, sizeof(n->items[0]));
	return &n->items[n->n++];
}

static int cmp_key(const void *a, const void *b)
{
	const dlt_node *x = *(const dlt_node *const *)a, *y = *(const dlt_node *const *)b;
	int c = strcmp(x->key, y->key);

	if (c)
		return c;
	return (x > y) - (x < y);
}

/* Sorting pointers keeps the check O(n log n) for maps of any size; on a
 * tie the later entry sorts second, and that is the one reported. */
static int check_duplicates(struct parser *p, const dlt_node *map)
{
	const dlt_node **v;
	int rc = 0;

	if (map->n < 2)
		return 0;
	v = dlt_calloc(map->n, sizeof(*v));
	if (!v)
		return DLT_ENOMEM;
	for (size_t i = 0; i < map->n; i++)
		v[i] = &map->items[i];
	qsort(v, map->n, sizeof(*v), cmp_key);
	for (size_t i = 1; i < map->n && !rc; i++)
		if (!strcmp(v[i - 1]->key, v[i]->key))
			rc = parse_error(p, v[i]->line, "duplicate key '%.64s'", v[i]->key);
	free(v);
	return rc;
}

/* Reads the entries of a mapping up to its end event. */
static int build_map(struct parser *p, int depth, dlt_node *out)
{
	yaml_event_t ev;
	size_t cap = 0;
	dlt_node *item;
	char *key;
	int rc, line;

	for (;;) {
		DLT_TRY(next_event(p, &ev));
		if (ev.type == YAML_MAPPING_END_EVENT)
			break;
		line = event_line(&ev);
		rc = check_event(p, &ev);
		if (!rc && ev.type != YAML_SCALAR_EVENT)
			rc = parse_error(p, line, "mapping keys must be strings");
		if (!rc)
			rc = scalar_text(p, &ev, &key);
		yaml_event_delete(&ev);
		if (rc < 0)
			return rc;
		item = push(out, &cap);
		if (!item) {
			free(key);
			return DLT_ENOMEM;
		}
		item->key = key;
		DLT_TRY(next_event(p, &ev));
		rc = build(p, &ev, depth + 1, item);
		yaml_event_delete(&ev);
		if (rc < 0)
			return rc;
		/* an entry is where its key is: "train:" rather than the line below */
		item->line = p->is_override ? 0 : line;
	}
	yaml_event_delete(&ev);
	return check_duplicates(p, out);
fail:
	return rc;
}

static int build_seq(struct parser *p, int depth, dlt_node *out)
{
	yaml_event_t ev;
	size_t cap = 0;
	dlt_node *item;
	int rc;

	for (;;) {
		DLT_TRY(next_event(p, &ev));
		if (ev.type == YAML_SEQUENCE_END_EVENT)
			break;
		item = push(out, &cap);
		rc = item ? build(p, &ev, depth + 1, item) : DLT_ENOMEM;
		yaml_event_delete(&ev);
		if (rc < 0)
			return rc;
	}
	yaml_event_delete(&ev);
	return 0;
fail:
	return rc;
}

/* Builds the node that starts with ev into out (zeroed; the caller frees it,
 * even on error, and deletes ev). */
static int build(struct parser *p, yaml_event_t *ev, int depth, dlt_node *out)
{
	int rc = check_event(p, ev);

	if (rc < 0)
		return rc;
	out->file = p->file;
	out->line = p->is_override ? 0 : event_line(ev);
	if (depth > p->max_depth)
		return parse_error(p, out->line, "nested too deep (more than %d levels)",
				   p->max_depth);
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		out->type = DLT_NODE_SCALAR;
		out->quoted = ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE ||
			      ev->data.scalar.tag;
		return scalar_text(p, ev, &out->value);
	case YAML_SEQUENCE_START_EVENT:
		out->type = DLT_NODE_SEQ;
		return build_seq(p, depth, out);
	case YAML_MAPPING_START_EVENT:
		out->type = DLT_NODE_MAP;
		return build_map(p, depth, out);
	default:
		return parse_error(p, out->line, "yaml: unexpected event %d", (int)ev->type);
	}
}

/* An empty stream is an empty mapping for a file, a null for an override
 * value ("-s data.test=" clears the key as "test:" would). */
static int empty_doc(struct parser *p, dlt_node *root)
{
	root->file = p->file;
	root->line = p->is_override ? 0 : 1;
	if (!p->is_override) {
		root->type = DLT_NODE_MAP;
		return 0;
	}
	root->type = DLT_NODE_SCALAR;
	root->value = dlt_strdup("");
	return root->value ? 0 : DLT_ENOMEM;
}

/* stream-start, then nothing or one document, then stream-end */
static int parse_stream(struct parser *p, dlt_node *root)
{
	yaml_event_t ev;
	int rc;

	for (int i = 0; i < 2; i++) {	/* stream start, document start */
		DLT_TRY(next_event(p, &ev));
		if (ev.type == YAML_STREAM_END_EVENT) {
			yaml_event_delete(&ev);
			return empty_doc(p, root);
		}
		yaml_event_delete(&ev);
	}
	DLT_TRY(next_event(p, &ev));
	rc = build(p, &ev, 0, root);
	yaml_event_delete(&ev);
	if (rc < 0)
		return rc;
	DLT_TRY(next_event(p, &ev));	/* document end */
	yaml_event_delete(&ev);
	DLT_TRY(next_event(p, &ev));
	if (ev.type != YAML_STREAM_END_EVENT)
		rc = parse_error(p, event_line(&ev), "yaml: more than one document");
	yaml_event_delete(&ev);
fail:
	return rc;
}

static int parse(dlt_node *root, const char *text, size_t len, const char *file,
		 int is_override, int max_depth)
{
	struct parser p = {
		.text = text, .len = len, .file = file,
		.is_override = is_override, .max_depth = max_depth,
	};
	int rc;

	memset(root, 0, sizeof(*root));
	if (!yaml_parser_initialize(&p.yp))
		return dlt_error(DLT_ENOMEM, "%s: out of memory parsing yaml", file);
	yaml_parser_set_input_string(&p.yp, (const unsigned char *)text, len);
	rc = parse_stream(&p, root);
	yaml_parser_delete(&p.yp);
	if (rc < 0)
		dlt_node_free(root);
	return rc;
}

int dlt_node_parse(dlt_node *root, const char *text, size_t len, const char *file)
{
	return parse(root, text, len, file, 0, MAX_DEPTH);
}

void dlt_node_free(dlt_node *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->n; i++)
		dlt_node_free(&n->items[i]);
	free(n->items);
	free(n->value);
	free(n->key);
	free(n->own_file);
	memset(n, 0, sizeof(*n));
}

dlt_node *dlt_node_get(const dlt_node *map, const char *key)
{
	if (!map || map->type != DLT_NODE_MAP)
		return NULL;
	for (size_t i = 0; i < map->n; i++)
		if (!strcmp(map->items[i].key, key))
			return &map->items[i];
	return NULL;
}

/* -s overrides.  The tree is left untouched when one fails: every check
 * that can fail happens on nodes that already exist, before the first node
 * is added. */

struct override {
	const char *name;	/* "-s a.b=1", the file of every node it adds */
	char path[256];		/* the part of the key walked so far */
	dlt_node *added;	/* first node added; it owns name */
};

static int override_error(const struct override *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int override_error(const struct override *o, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = vnode_error(o->name, 0, fmt, ap);
	va_end(ap);
	return rc;
}

static dlt_node *add_entry(struct override *o, dlt_node *map, const char *key)
{
	dlt_node *items = dlt_realloc(map->items, (map->n + 1) * sizeof(*items));
	dlt_node *item;

	if (!items)
		return NULL;
	map->items = items;
	item = &items[map->n];
	memset(item, 0, sizeof(*item));
	item->key = key ? dlt_strdup(key) : NULL;
	if (key && !item->key)
		return NULL;
	map->n++;
	item->type = DLT_NODE_MAP;
	item->file = o->name;
	if (!o->added)
		o->added = item;
	return item;
}

/* A scalar "adam" stands for {adam: {}} when a key walks through it, so
 * "-s train.optimizer.adam.lr=3e-4" works on "optimizer: adam". */
static int expand_scalar(struct override *o, dlt_node *n, const char *key)
{
	char *value = n->value;

	n->type = DLT_NODE_MAP;
	n->value = NULL;
	n->quoted = 0;
	if (!add_entry(o, n, key)) {
		n->type = DLT_NODE_SCALAR;
		n->value = value;
		return DLT_ENOMEM;
	}
	free(value);
	return 0;
}

static const char *walked(const struct override *o)
{
	return o->path[0] ? o->path : "the document";
}

static int seq_index(struct override *o, const dlt_node *seq, const char *key, size_t *idx)
{
	size_t len = strlen(key);

	if (!len || len > 9 || strspn(key, "0123456789") != len)
		return override_error(o, "%s is a sequence: expected an index, got '%.64s'",
				      walked(o), key);
	*idx = strtoul(key, NULL, 10);
	if (*idx > seq->n)
		return override_error(o, "index %zu is out of range for %s (length %zu)", *idx,
				      walked(o), seq->n);
	return 0;
}

/* Finds (or adds) the child key of n. */
static int child(struct override *o, dlt_node *n, const char *key, dlt_node **out)
{
	size_t idx = 0;
	int rc;

	switch (n->type) {
	case DLT_NODE_MAP:
		*out = dlt_node_get(n, key);
		if (!*out)
			*out = add_entry(o, n, key);
		return *out ? 0 : DLT_ENOMEM;
	case DLT_NODE_SEQ:
		DLT_TRY(seq_index(o, n, key, &idx));
		*out = idx < n->n ? &n->items[idx] : add_entry(o, n, NULL);
		return *out ? 0 : DLT_ENOMEM;
	default:
		if (n->quoted || strcmp(n->value, key))
			return override_error(o, "%s is a scalar, it has no key '%.64s'",
					      walked(o), key);
		DLT_TRY(expand_scalar(o, n, key));
		*out = &n->items[0];
		return 0;
	}
fail:
	return rc;
}

static int walk(struct override *o, dlt_node *root, char *key, dlt_node **slot)
{
	dlt_node *n = root;
	char *part, *save = NULL;
	int rc = 0;

	for (part = strtok_r(key, ".", &save); part; part = strtok_r(NULL, ".", &save)) {
		DLT_TRY(child(o, n, part, &n));
		snprintf(o->path + strlen(o->path), sizeof(o->path) - strlen(o->path),
			 "%s%s", o->path[0] ? "." : "", part);
	}
	*slot = n;
fail:
	return rc;
}

/* Splits "a.b=v" into a key of non-empty parts and a value. */
static int split(struct override *o, const char *assignment, char **key, const char **value,
		 int *n_parts)
{
	const char *eq = strchr(assignment, '=');
	size_t len;

	if (!eq)
		return override_error(o, "expected key=value");
	len = (size_t)(eq - assignment);
	if (!len)
		return override_error(o, "empty key");
	*n_parts = 1;
	for (size_t i = 0; i < len; i++) {
		if (assignment[i] != '.')
			continue;
		if (i == 0 || i == len - 1 || assignment[i + 1] == '.')
			return override_error(o, "empty part in key '%.*s'", (int)len,
					      assignment);
		(*n_parts)++;
	}
	if (*n_parts >= MAX_DEPTH)
		return override_error(o, "key nested too deep (more than %d levels)", MAX_DEPTH);
	*key = dlt_malloc(len + 1);
	if (!*key)
		return DLT_ENOMEM;
	memcpy(*key, assignment, len);
	(*key)[len] = 0;
	*value = eq + 1;
	return 0;
}

static char *override_name(const char *assignment)
{
	size_t n = strlen(assignment);
	char *s = dlt_malloc(n + 4);

	if (s) {
		memcpy(s, "-s ", 3);
		memcpy(s + 3, assignment, n + 1);
	}
	return s;
}

int dlt_node_override(dlt_node *root, const char *assignment)
{
	struct override o = { 0 };
	dlt_node value = { 0 }, *slot;
	const char *text = NULL;
	char *key = NULL, *name = override_name(assignment);
	int rc, n_parts = 0;

	if (!name)
		return DLT_ENOMEM;
	o.name = name;
	DLT_TRY(split(&o, assignment, &key, &text, &n_parts));
	DLT_TRY(parse(&value, text, strlen(text), name, 1, MAX_DEPTH - n_parts));
	DLT_TRY(walk(&o, root, key, &slot));
	value.key = slot->key;
	slot->key = NULL;
	dlt_node_free(slot);
	*slot = value;
	/* the added node holds every other node of this override below it */
	if (!o.added)
		o.added = slot;
	o.added->own_file = name;
	free(key);
	return 0;
fail:
	dlt_node_free(&value);
	free(key);
	free(name);
	return rc;
}
