/* config: the dlt-train schema, from a dlt_node tree to struct dlt_config.
 *
 * Every key is checked: an unknown one is an error (with a suggestion when
 * it is close to a known one), because a misspelt "epoch: 100" silently
 * training for one epoch costs a user far more than a refusal.  A null value
 * ("key:", "key: ~") is the same as an absent key: the default. */
#include "config/config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CONFIG_BYTES (4 << 20)
/* Bounds on layer sizes, so that products of them fit later arithmetic. */
#define MAX_COUNT 65536		/* conv2d filters and groups */
#define MAX_WINDOW 1024		/* kernel, stride, pad, dilation */
#define MAX_NESTING 16		/* residual blocks inside residual blocks */
#define MAX_CROP 64		/* data.augment.crop, pixels */

typedef char path_t[128];

static int bad(const dlt_node *n, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int bad(const dlt_node *n, const char *path, const char *fmt, ...)
{
	char msg[384];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return dlt_node_error(n, "%s: %s", path, msg);
}

static const char *join(path_t out, const char *parent, const char *key)
{
	if (snprintf(out, sizeof(path_t), "%s%s%s", parent, parent[0] ? "." : "", key) >=
	    (int)sizeof(path_t))
		strcpy(out + sizeof(path_t) - 4, "...");
	return out;
}

static int is_null(const dlt_node *n)
{
	static const char *const nulls[] = { "", "~", "null", "Null", "NULL" };

	if (!n || n->type != DLT_NODE_SCALAR || n->quoted)
		return 0;
	for (size_t i = 0; i < sizeof(nulls) / sizeof(nulls[0]); i++)
		if (!strcmp(n->value, nulls[i]))
			return 1;
	return 0;
}

/* The value of key in map, NULL when absent or null. */
static const dlt_node *get(const dlt_node *map, const char *key)
{
	const dlt_node *n = dlt_node_get(map, key);

	return is_null(n) ? NULL : n;
}

static int type_error(const dlt_node *n, const char *path, const char *want)
{
	if (n->type == DLT_NODE_MAP)
		return bad(n, path, "expected %s, got a mapping", want);
	if (n->type == DLT_NODE_SEQ)
		return bad(n, path, "expected %s, got a sequence", want);
	return bad(n, path, "expected %s, got %s'%.64s'", want, n->quoted ? "the string " : "",
		   n->value);
}

static int is_plain(const dlt_node *n)
{
	return n->type == DLT_NODE_SCALAR && !n->quoted;
}

/* Levenshtein distance, for "did you mean"; long words are never close. */
static size_t distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), row[33];

	if (la > 32 || lb > 32)
		return SIZE_MAX;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];

		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);

			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb];
}

/* " (did you mean 'x'?)" when word is a small edit of one of names. */
static const char *suggest(char *buf, size_t size, const char *word, const char *const *names)
{
	const char *best = NULL;
	size_t best_d = SIZE_MAX;

	for (; *names; names++) {
		size_t d = distance(word, *names), limit = 1 + strlen(*names) / 4;

		if (d <= (limit < 2 ? limit : 2) && d < best_d) {
			best = *names;
			best_d = d;
		}
	}
	buf[0] = 0;
	if (best)
		snprintf(buf, size, " (did you mean '%s'?)", best);
	return buf;
}

static int check_keys(const dlt_node *map, const char *path, const char *const *keys)
{
	char hint[64];

	for (size_t i = 0; i < map->n; i++) {
		const char *key = map->items[i].key;
		const char *const *k;

		for (k = keys; *k && strcmp(*k, key); k++)
			;
		if (*k)
			continue;
		suggest(hint, sizeof(hint), key, keys);
		if (path[0])
			return dlt_node_error(&map->items[i], "unknown key '%.64s' in %s%s", key,
					      path, hint);
		return dlt_node_error(&map->items[i], "unknown key '%.64s'%s", key, hint);
	}
	return 0;
}

/* A mapping holding only keys; a null one is an empty mapping. */
static int as_map(const dlt_node *n, const char *path, const char *const *keys)
{
	if (!n || is_null(n))
		return 0;
	if (n->type != DLT_NODE_MAP)
		return type_error(n, path, "a mapping");
	return check_keys(n, path, keys);
}

/* Integers may be written as integral floats (warmup: 1e3). */
static int to_int(const dlt_node *n, const char *path, long long min, long long max,
		  long long *out)
{
	long long v;
	double d;

	if (!is_plain(n))
		return type_error(n, path, "an integer");
	if (dlt_parse_i64(n->value, LLONG_MIN, LLONG_MAX, &v, path) < 0) {
		if (dlt_parse_f64(n->value, &d, path) < 0 || d != floor(d))
			return type_error(n, path, "an integer");
		/* integral doubles below 2^63 convert exactly */
		if (d < -0x1p63 || d >= 0x1p63)
			return bad(n, path, "must be %s %lld, got %.64s", d < 0 ? ">=" : "<=",
				   d < 0 ? min : max, n->value);
		v = (long long)d;
	}
	if (v < min)
		return bad(n, path, "must be >= %lld, got %.64s", min, n->value);
	if (v > max)
		return bad(n, path, "must be <= %lld, got %.64s", max, n->value);
	*out = v;
	return 0;
}

static int to_i32(const dlt_node *n, const char *path, int min, int max, int *out)
{
	long long v;
	int rc;

	DLT_TRY(to_int(n, path, min, max, &v));
	*out = (int)v;
fail:
	return rc;
}

static int get_i64(const dlt_node *map, const char *parent, const char *key, long long min,
		   long long *out)
{
	const dlt_node *n = get(map, key);
	path_t path;

	return n ? to_int(n, join(path, parent, key), min, LLONG_MAX, out) : 0;
}

static int get_int(const dlt_node *map, const char *parent, const char *key, int min, int max,
		   int *out)
{
	const dlt_node *n = get(map, key);
	path_t path;

	return n ? to_i32(n, join(path, parent, key), min, max, out) : 0;
}

/* Ranges of real-valued settings. */
enum range { ANY, POSITIVE, NONNEG, UNIT_CLOSED_OPEN, UNIT_OPEN_CLOSED, UNIT_CLOSED };

static int check_range(const dlt_node *n, const char *path, double v, enum range r)
{
	static const char *const text[] = {
		[POSITIVE] = "> 0", [NONNEG] = ">= 0",
		[UNIT_CLOSED_OPEN] = "in [0, 1)", [UNIT_OPEN_CLOSED] = "in (0, 1]",
		[UNIT_CLOSED] = "in [0, 1]",
	};
	int fits = r == ANY ||
		   (r == POSITIVE && v > 0) || (r == NONNEG && v >= 0) ||
		   (r == UNIT_CLOSED_OPEN && v >= 0 && v < 1) ||
		   (r == UNIT_OPEN_CLOSED && v > 0 && v <= 1) ||
		   (r == UNIT_CLOSED && v >= 0 && v <= 1);

	return fits ? 0 : bad(n, path, "must be %s, got %.64s", text[r], n->value);
}

static int to_f64(const dlt_node *n, const char *path, enum range r, double *out)
{
	double v;

	if (!is_plain(n) || dlt_parse_f64(n->value, &v, path) < 0)
		return type_error(n, path, "a number");
	if (!isfinite(v))
		return bad(n, path, "must be a finite number, got %.64s", n->value);
	if (check_range(n, path, v, r) < 0)
		return DLT_EINPUT;
	*out = v;
	return 0;
}

static int get_f64(const dlt_node *map, const char *parent, const char *key, enum range r,
		   double *out)
{
	const dlt_node *n = get(map, key);
	path_t path;

	return n ? to_f64(n, join(path, parent, key), r, out) : 0;
}

/* The range is checked after rounding: 0.99999999999 is 1.0f. */
static int to_f32(const dlt_node *n, const char *path, enum range r, float *out)
{
	double v;
	int rc;

	DLT_TRY(to_f64(n, path, ANY, &v));
	if (!isfinite((float)v))
		return bad(n, path, "must be a finite number, got %.64s", n->value);
	DLT_TRY(check_range(n, path, (float)v, r));
	*out = (float)v;
fail:
	return rc;
}

static int to_bool(const dlt_node *n, const char *path, int *out)
{
	static const char *const yes[] = { "true", "True", "TRUE", "yes", "Yes", "YES", NULL };
	static const char *const no[] = { "false", "False", "FALSE", "no", "No", "NO", NULL };

	for (int i = 0; is_plain(n) && yes[i]; i++) {
		if (!strcmp(n->value, yes[i]) || !strcmp(n->value, no[i])) {
			*out = !strcmp(n->value, yes[i]);
			return 0;
		}
	}
	return type_error(n, path, "true or false");
}

static int get_bool(const dlt_node *map, const char *parent, const char *key, int *out)
{
	const dlt_node *n = get(map, key);
	path_t path;

	return n ? to_bool(n, join(path, parent, key), out) : 0;
}

/* A string, quoted or not: paths are kept as written. */
static int get_str(const dlt_node *map, const char *parent, const char *key, const char *want,
		   char **out)
{
	const dlt_node *n = get(map, key);
	path_t path;

	if (!n)
		return 0;
	join(path, parent, key);
	if (n->type != DLT_NODE_SCALAR)
		return type_error(n, path, want);
	if (!n->value[0])
		return bad(n, path, "must not be empty");
	*out = dlt_strdup(n->value);
	return *out ? 0 : DLT_ENOMEM;
}

/* Layers, optimizers and schedules are each a choice of kind written
 * "name" or {name: options}; *at is where the name was written. */
static int choice(const dlt_node *n, const char *path, const char *what, const char **name,
		  const dlt_node **opts, const dlt_node **at)
{
	char want[64];

	*opts = NULL;
	*at = n;
	if (n->type == DLT_NODE_SCALAR && !is_null(n)) {
		*name = n->value;
		return 0;
	}
	snprintf(want, sizeof(want), "a %s name or {name: options}", what);
	if (n->type != DLT_NODE_MAP)
		return type_error(n, path, want);
	if (n->n != 1)
		return bad(n, path, "expected one %s (one key), got %zu keys", what, n->n);
	*name = n->items[0].key;
	*opts = &n->items[0];
	*at = &n->items[0];
	return 0;
}

static int unknown(const dlt_node *at, const char *what, const char *name,
		   const char *const *names)
{
	char hint[64];

	return dlt_node_error(at, "unknown %s '%.64s'%s", what, name,
			      suggest(hint, sizeof(hint), name, names));
}

static int lookup(const char *name, const char *const *names)
{
	for (int i = 0; names[i]; i++)
		if (!strcmp(name, names[i]))
			return i + 1;
	return 0;
}

/* A word from names, quoted or not; *out is its 1-based index. */
static int get_word(const dlt_node *map, const char *parent, const char *key, const char *want,
		    const char *const *names, int *out)
{
	const dlt_node *n = get(map, key);
	char hint[64];
	path_t path;

	if (!n)
		return 0;
	join(path, parent, key);
	if (n->type != DLT_NODE_SCALAR)
		return type_error(n, path, want);
	*out = lookup(n->value, names);
	if (*out)
		return 0;
	return bad(n, path, "expected %s, got '%.64s'%s", want, n->value,
		   suggest(hint, sizeof(hint), n->value, names));
}

/* Layers, indexed by enum dlt_layer_kind. */
static const char *const layer_names[] = {
	"dense", "relu", "leaky_relu", "gelu", "tanh", "sigmoid", "dropout", "flatten",
	"conv2d", "maxpool", "avgpool", "global_avgpool", "batchnorm", "residual",
	"embedding", "positional", "layernorm", "attention", NULL,
};
static const char *const no_keys[] = { NULL };
static const char *const dense_keys[] = { "units", "bias", "tie", NULL };
static const char *const gelu_keys[] = { "approximate", NULL };
static const char *const embedding_keys[] = { "vocab", "dim", NULL };
static const char *const positional_keys[] = { "max", NULL };
static const char *const layernorm_keys[] = { "eps", NULL };
static const char *const attention_keys[] = { "heads", "causal", "dropout", NULL };
static const char *const leaky_keys[] = { "slope", NULL };
static const char *const dropout_keys[] = { "rate", NULL };
static const char *const conv_keys[] = {
	"filters", "kernel", "stride", "pad", "dilation", "groups", "bias", NULL,
};
static const char *const pool_keys[] = { "kernel", "stride", "pad", NULL };
static const char *const batchnorm_keys[] = { "momentum", "eps", NULL };
static const char *const residual_keys[] = { "layers", "shortcut", NULL };

/* The options of each kind.  With bare, a value that is not a mapping sets
 * keys[0] (dense: 256 is dense: {units: 256}); the first required keys have
 * no default; usage shows the forms in messages. */
static const struct layer_form {
	const char *const *keys;
	int bare, required;
	const char *usage;
} layer_forms[] = {
	[DLT_LAYER_DENSE] = { dense_keys, 1, 0, "dense: N or dense: {units: N}" },
	[DLT_LAYER_RELU] = { no_keys, 0, 0, NULL },
	[DLT_LAYER_LEAKY_RELU] = { leaky_keys, 1, 0, NULL },
	[DLT_LAYER_GELU] = { gelu_keys, 1, 0, "gelu, gelu: tanh or gelu: {approximate: tanh}" },
	[DLT_LAYER_TANH] = { no_keys, 0, 0, NULL },
	[DLT_LAYER_SIGMOID] = { no_keys, 0, 0, NULL },
	[DLT_LAYER_DROPOUT] = { dropout_keys, 1, 1, "dropout: N or dropout: {rate: N}" },
	[DLT_LAYER_FLATTEN] = { no_keys, 0, 0, NULL },
	[DLT_LAYER_CONV2D] = { conv_keys, 0, 2, "conv2d: {filters: N, kernel: K}" },
	[DLT_LAYER_MAXPOOL] = { pool_keys, 1, 1, "maxpool: K or maxpool: {kernel: K}" },
	[DLT_LAYER_AVGPOOL] = { pool_keys, 1, 1, "avgpool: K or avgpool: {kernel: K}" },
	[DLT_LAYER_GLOBAL_AVGPOOL] = { no_keys, 0, 0, NULL },
	[DLT_LAYER_BATCHNORM] = { batchnorm_keys, 0, 0, "batchnorm: {momentum: M, eps: E}" },
	[DLT_LAYER_RESIDUAL] = {
		residual_keys, 1, 1,
		"residual: [layers] or residual: {layers: [layers], shortcut: [layers]}",
	},
	[DLT_LAYER_EMBEDDING] = { embedding_keys, 0, 2, "embedding: {vocab: V, dim: C}" },
	[DLT_LAYER_POSITIONAL] = { positional_keys, 1, 1, "positional: T or positional: {max: T}" },
	[DLT_LAYER_LAYERNORM] = { layernorm_keys, 0, 0, "layernorm or layernorm: {eps: E}" },
	[DLT_LAYER_ATTENTION] = {
		attention_keys, 1, 1,
		"attention: H or attention: {heads: H, causal: true, dropout: 0}",
	},
};
_Static_assert(sizeof(layer_names) / sizeof(layer_names[0]) == DLT_LAYER_COUNT &&
	       sizeof(layer_forms) / sizeof(layer_forms[0]) == DLT_LAYER_COUNT,
	       "a layer kind without a name or a form");

/* kernel: 3 is kernel: [3, 3] (height, width). */
static int to_pair(const dlt_node *n, const char *path, int min, int out[2])
{
	path_t p;
	int rc = 0;

	if (n->type == DLT_NODE_MAP)
		return type_error(n, path, "a number or a pair [h, w]");
	if (n->type == DLT_NODE_SCALAR) {
		DLT_TRY(to_i32(n, path, min, MAX_WINDOW, &out[0]));
		out[1] = out[0];
		return 0;
	}
	if (n->n != 2)
		return bad(n, path, "expected a number or a pair [h, w], got %zu items", n->n);
	DLT_TRY(to_i32(&n->items[0], join(p, path, "0"), min, MAX_WINDOW, &out[0]));
	DLT_TRY(to_i32(&n->items[1], join(p, path, "1"), min, MAX_WINDOW, &out[1]));
fail:
	return rc;
}

static int to_layers(const dlt_node *n, const char *path, int depth, int min,
		     dlt_layer_cfg **out, int *n_out);

/* A layer's name: letters, digits, '_' and '-', so that it can name
 * tensors and keys */
static int to_name(const dlt_node *v, const char *path, char *out)
{
	if (v->type != DLT_NODE_SCALAR)
		return type_error(v, path, "a name");
	if (!v->value[0] || strlen(v->value) >= DLT_NAME_MAX)
		return bad(v, path, "must be 1 to %d characters", DLT_NAME_MAX - 1);
	for (const char *c = v->value; *c; c++)
		if (!isalnum((unsigned char)*c) && *c != '_' && *c != '-')
			return bad(v, path, "'%.64s': letters, digits, _ and - only", v->value);
	strcpy(out, v->value);
	return 0;
}

/* One option of a layer (keys already checked against its kind). */
static int layer_key(const dlt_node *v, const char *path, const char *key, int depth,
		     dlt_layer_cfg *l)
{
	if (!strcmp(key, "units"))
		return to_i32(v, path, 1, INT_MAX, &l->units);
	if (!strcmp(key, "vocab"))
		return to_i32(v, path, 1, 1 << 24, &l->vocab);
	if (!strcmp(key, "dim"))
		return to_i32(v, path, 1, 1 << 20, &l->dim);
	if (!strcmp(key, "max"))
		return to_i32(v, path, 1, 1 << 20, &l->max);
	if (!strcmp(key, "heads"))
		return to_i32(v, path, 1, MAX_COUNT, &l->heads);
	if (!strcmp(key, "causal"))
		return to_bool(v, path, &l->causal);
	if (!strcmp(key, "dropout"))
		return to_f32(v, path, UNIT_CLOSED_OPEN, &l->rate);
	if (!strcmp(key, "tie") || !strcmp(key, "name"))
		return to_name(v, path, !strcmp(key, "tie") ? l->tie : l->name);
	if (!strcmp(key, "approximate")) {
		if (v->type != DLT_NODE_SCALAR || (strcmp(v->value, "tanh") && strcmp(v->value, "none")))
			return bad(v, path, "expected tanh or none, got '%.64s'",
				   v->type == DLT_NODE_SCALAR ? v->value : "a collection");
		l->tanh = !strcmp(v->value, "tanh");
		return 0;
	}
	if (!strcmp(key, "filters"))
		return to_i32(v, path, 1, MAX_COUNT, &l->filters);
	if (!strcmp(key, "groups"))
		return to_i32(v, path, 1, MAX_COUNT, &l->groups);
	if (!strcmp(key, "kernel"))
		return to_pair(v, path, 1, l->kernel);
	if (!strcmp(key, "stride"))
		return to_pair(v, path, 1, l->stride);
	if (!strcmp(key, "pad"))
		return to_pair(v, path, 0, l->pad);
	if (!strcmp(key, "dilation"))
		return to_pair(v, path, 1, l->dilation);
	if (!strcmp(key, "bias"))
		return to_bool(v, path, &l->bias);
	if (!strcmp(key, "slope"))
		return to_f32(v, path, ANY, &l->slope);
	if (!strcmp(key, "rate"))
		return to_f32(v, path, UNIT_CLOSED_OPEN, &l->rate);
	if (!strcmp(key, "momentum"))
		return to_f32(v, path, UNIT_CLOSED, &l->momentum);
	if (!strcmp(key, "eps"))
		return to_f32(v, path, POSITIVE, &l->eps);
	if (!strcmp(key, "layers"))
		return to_layers(v, path, depth + 1, 1, &l->body, &l->n_body);
	return to_layers(v, path, depth + 1, 0, &l->shortcut, &l->n_shortcut);
}

/* A value that is not a mapping, for a kind without a bare form. */
static int bare_error(const dlt_node *v, const char *path, const struct layer_form *f)
{
	char want[128];

	if (f->keys[0]) {
		snprintf(want, sizeof(want), "a mapping (%s)", f->usage);
		return type_error(v, path, want);
	}
	if (v->type != DLT_NODE_SCALAR)
		return type_error(v, path, "no options");
	return bad(v, path, "takes no options, got '%.64s'", v->value);
}

/* Checks between options, and defaults that depend on another option;
 * at: the layer, for messages about options that are missing. */
static int layer_check(const dlt_node *at, const dlt_node *opts, const char *path,
		       dlt_layer_cfg *l)
{
	path_t p;

	if (l->kind == DLT_LAYER_MAXPOOL || l->kind == DLT_LAYER_AVGPOOL) {
		if (!l->stride[0])
			memcpy(l->stride, l->kernel, sizeof(l->stride));
		/* PyTorch's rule: no window may lie wholly in the padding */
		for (int d = 0; d < 2; d++)
			if (l->pad[d] > l->kernel[d] / 2)
				return bad(get(opts, "pad"), join(p, path, "pad"),
					   "must be <= half the kernel (%d), got %d",
					   l->kernel[d] / 2, l->pad[d]);
	}
	if (l->kind == DLT_LAYER_DENSE && !l->units && !l->tie[0])
		return bad(opts ? opts : at, path, "units is required (dense: N or dense: {units: N}, "
			   "or dense: {tie: NAME})");
	if (l->kind == DLT_LAYER_DENSE && l->units && l->tie[0])
		return bad(get(opts, "units"), join(p, path, "units"), "a tied layer's units are "
			   "its embedding's vocab: give tie or units, not both");
	if (l->kind == DLT_LAYER_CONV2D && l->filters % l->groups)
		return bad(get(opts, "groups"), join(p, path, "groups"),
			   "must divide filters (%d), got %d", l->filters, l->groups);
	return 0;
}

/* A layer's options: its kind's keys, and name, which every layer takes */
static int as_map_named(const dlt_node *opts, const char *path, const char *const *keys)
{
	const char *with[16];
	int n = 0;
	while (keys[n] && n < 14) {
		with[n] = keys[n];
		n++;
	}
	with[n++] = "name";
	with[n] = NULL;
	return as_map(opts, path, with);
}

static int layer_options(const dlt_node *layer, const dlt_node *opts, const char *path,
			 int depth, dlt_layer_cfg *l)
{
	const struct layer_form *f = &layer_forms[l->kind];
	path_t p;
	int rc = 0;

	if (opts && !is_null(opts) && opts->type != DLT_NODE_MAP) {
		if (!f->bare)
			return bare_error(opts, path, f);
		DLT_TRY(layer_key(opts, path, f->keys[0], depth, l));
		return layer_check(layer, opts, path, l);
	}
	DLT_TRY(as_map_named(opts, path, f->keys));
	for (size_t i = 0; opts && i < opts->n; i++) {
		const dlt_node *v = &opts->items[i];

		if (!is_null(v))
			DLT_TRY(layer_key(v, join(p, path, v->key), v->key, depth, l));
	}
	for (int i = 0; i < f->required; i++)
		if (!get(opts, f->keys[i]))
			return bad(opts ? opts : layer, path, "%s is required (%s)", f->keys[i],
				   f->usage);
	rc = layer_check(layer, opts, path, l);
fail:
	return rc;
}

static void layer_defaults(dlt_layer_cfg *l, int kind, int line)
{
	*l = (dlt_layer_cfg){ .kind = kind, .line = line, .bias = 1, .slope = 0.01f };
	if (kind == DLT_LAYER_CONV2D) {
		l->stride[0] = l->stride[1] = 1;
		l->dilation[0] = l->dilation[1] = 1;
		l->groups = 1;
	}
	if (kind == DLT_LAYER_BATCHNORM) {
		l->momentum = 0.1f;
		l->eps = 1e-5f;
	}
	if (kind == DLT_LAYER_LAYERNORM)
		l->eps = 1e-5f;
	if (kind == DLT_LAYER_ATTENTION)
		l->causal = 1;
	/* a pool's stride is its kernel unless given: 0 until then */
}

static int parse_layer(const dlt_node *n, const char *path, int depth, dlt_layer_cfg *l)
{
	const dlt_node *opts, *at;
	const char *name;
	path_t kpath;
	int rc, kind;

	DLT_TRY(choice(n, path, "layer", &name, &opts, &at));
	kind = lookup(name, layer_names);
	if (!kind)
		return unknown(at, "layer", name, layer_names);
	layer_defaults(l, kind, n->line);
	rc = layer_options(n, opts, join(kpath, path, name), depth, l);
fail:
	return rc;
}

/* The layers of model: or of a residual block, depth blocks deep.  The
 * count is set before the layers are parsed, so that dlt_config_free
 * frees what a failure leaves. */
static int to_layers(const dlt_node *n, const char *path, int depth, int min,
		     dlt_layer_cfg **out, int *n_out)
{
	char index[24];
	path_t p;
	int rc = 0;

	if (n->type != DLT_NODE_SEQ)
		return type_error(n, path, "a sequence of layers");
	if (n->n < (size_t)min)
		return bad(n, path, "must have at least one layer");
	if (n->n > INT_MAX)
		return bad(n, path, "too many layers");
	if (depth > MAX_NESTING)
		return bad(n, path, "residual blocks nested too deep (more than %d levels)",
			   MAX_NESTING);
	if (!n->n)
		return 0;
	*out = dlt_calloc(n->n, sizeof(**out));
	if (!*out)
		return DLT_ENOMEM;
	*n_out = (int)n->n;
	for (size_t i = 0; i < n->n; i++) {
		snprintf(index, sizeof(index), "%zu", i);
		DLT_TRY(parse_layer(&n->items[i], join(p, path, index), depth, &(*out)[i]));
	}
fail:
	return rc;
}

static int parse_model(const dlt_node *root, dlt_config *c)
{
	const dlt_node *n = get(root, "model");

	if (!n)
		return dlt_node_error(dlt_node_get(root, "model") ?: root, "model is required");
	c->model_line = n->line;
	return to_layers(n, "model", 0, 1, &c->layers, &c->n_layers);
}

/* Optimizers, indexed by enum dlt_optim_kind. */
static const char *const optim_names[] = { "sgd", "adam", "adamw", NULL };
static const char *const sgd_keys[] = { "lr", "momentum", "nesterov", "weight_decay", NULL };
static const char *const adam_keys[] = { "lr", "beta1", "beta2", "eps", "weight_decay", NULL };
static const char *const adamw_keys[] = { "lr", "beta1", "beta2", "eps", "weight_decay", "decay",
					  NULL };

static void optim_defaults(dlt_optim_cfg *o, int kind)
{
	memset(o, 0, sizeof(*o));
	o->kind = kind;
	if (kind == DLT_OPT_SGD) {
		o->lr = 1e-2;
		return;
	}
	o->lr = 1e-3;
	o->beta1 = 0.9;
	o->beta2 = 0.999;
	o->eps = 1e-8;
	o->weight_decay = kind == DLT_OPT_ADAMW ? 1e-2 : 0;
}

static int parse_optim(const dlt_node *train, dlt_optim_cfg *o)
{
	const char *path = "train.optimizer", *name;
	const dlt_node *n = get(train, "optimizer"), *opts, *at;
	path_t p, np;
	int rc;

	optim_defaults(o, DLT_OPT_ADAM);
	if (!n)
		return 0;
	DLT_TRY(choice(n, path, "optimizer", &name, &opts, &at));
	if (!lookup(name, optim_names))
		return unknown(at, "optimizer", name, optim_names);
	optim_defaults(o, lookup(name, optim_names));
	join(p, path, name);
	DLT_TRY(as_map(opts, p, o->kind == DLT_OPT_SGD ? sgd_keys
			 : o->kind == DLT_OPT_ADAMW ? adamw_keys : adam_keys));
	{
		static const char *const decays[] = { "all", "matrices", NULL };
		int decay = 0;
		DLT_TRY(get_word(opts, p, "decay", "all or matrices", decays, &decay));
		o->decay_matrices = decay == 2;
	}
	DLT_TRY(get_f64(opts, p, "lr", POSITIVE, &o->lr));
	DLT_TRY(get_f64(opts, p, "momentum", UNIT_CLOSED_OPEN, &o->momentum));
	DLT_TRY(get_bool(opts, p, "nesterov", &o->nesterov));
	DLT_TRY(get_f64(opts, p, "weight_decay", NONNEG, &o->weight_decay));
	DLT_TRY(get_f64(opts, p, "beta1", UNIT_CLOSED_OPEN, &o->beta1));
	DLT_TRY(get_f64(opts, p, "beta2", UNIT_CLOSED_OPEN, &o->beta2));
	DLT_TRY(get_f64(opts, p, "eps", POSITIVE, &o->eps));
	if (o->nesterov && o->momentum <= 0)
		return bad(get(opts, "nesterov"), join(np, p, "nesterov"), "needs momentum > 0");
fail:
	return rc;
}

/* Schedules, indexed by enum dlt_sched_kind. */
static const char *const sched_names[] = { "constant", "step", "cosine", NULL };
static const char *const constant_keys[] = { "warmup", NULL };
static const char *const step_keys[] = { "every", "gamma", "warmup", NULL };
static const char *const cosine_keys[] = { "warmup", "min_lr", NULL };

static int parse_sched(const dlt_node *train, dlt_sched_cfg *s)
{
	static const char *const *const keys[] = { NULL, constant_keys, step_keys, cosine_keys };
	const char *path = "train.schedule", *name;
	const dlt_node *n = get(train, "schedule"), *opts, *at;
	path_t p;
	int rc;

	*s = (dlt_sched_cfg){ .kind = DLT_SCHED_CONSTANT, .step_every = 1, .gamma = 0.1 };
	if (!n)
		return 0;
	DLT_TRY(choice(n, path, "schedule", &name, &opts, &at));
	s->kind = lookup(name, sched_names);
	if (!s->kind)
		return unknown(at, "schedule", name, sched_names);
	join(p, path, name);
	DLT_TRY(as_map(opts, p, keys[s->kind]));
	DLT_TRY(get_int(opts, p, "warmup", 0, INT_MAX, &s->warmup));
	DLT_TRY(get_int(opts, p, "every", 1, INT_MAX, &s->step_every));
	DLT_TRY(get_f64(opts, p, "gamma", UNIT_OPEN_CLOSED, &s->gamma));
	DLT_TRY(get_f64(opts, p, "min_lr", NONNEG, &s->min_lr));
fail:
	return rc;
}

const char *const dlt_loss_names[] = { "cross_entropy", "mse", "l1", "huber", "bce", NULL };

/* train.loss: a name, or huber: {delta} */
static int parse_loss(const dlt_node *train, dlt_config *c)
{
	static const char *const huber_keys[] = { "delta", NULL };
	const char *path = "train.loss", *name;
	const dlt_node *n = get(train, "loss"), *opts, *at;
	int rc;

	c->train.huber_delta = 1.0;
	if (!n)
		return 0;
	DLT_TRY(choice(n, path, "loss", &name, &opts, &at));
	c->train.loss = lookup(name, dlt_loss_names);
	if (!c->train.loss)
		return unknown(at, "loss", name, dlt_loss_names);
	if (!strcmp(name, "huber")) {
		DLT_TRY(as_map(opts, "train.loss.huber", huber_keys));
		DLT_TRY(get_f64(opts, "train.loss.huber", "delta", POSITIVE, &c->train.huber_delta));
	} else if (opts) {
		return bad(opts, path, "%s takes no options", name);
	}
fail:
	return rc;
}

static int parse_precision(const dlt_node *train, dlt_config *c)
{
	const dlt_node *n = get(train, "precision");
	char *s = NULL;
	int rc;

	strcpy(c->train.precision, "fp32");
	DLT_TRY(get_str(train, "train", "precision", "a precision", &s));
	if (!s)
		goto fail;
	if (!strcmp(s, "fp32") || !strcmp(s, "bf16") || !strcmp(s, "fp16"))
		strcpy(c->train.precision, s);
	else
		rc = bad(n, "train.precision", "unknown precision '%.64s' (fp32, bf16, fp16)", s);
fail:
	free(s);
	return rc;
}

/* train.storage: auto, 16 or 32 (bf16 and fp16 only) */
static int parse_storage(const dlt_node *train, dlt_config *c)
{
	static const char *const names[] = { "auto", "16", "32", NULL };
	static const int bits[] = { 0, 16, 32 };
	const dlt_node *n = get(train, "storage");
	int rc, at = 0;

	c->train.storage = 0;
	DLT_TRY(get_word(train, "train", "storage", "auto, 16 or 32", names, &at));
	if (at)
		c->train.storage = bits[at - 1];
	if (c->train.storage && !strcmp(c->train.precision, "fp32"))
		rc = bad(n, "train.storage", "applies to precision bf16 and fp16 only, not fp32");
fail:
	return rc;
}

/* train.loss_scale: {init, growth_interval}, fp16's dynamic loss scaling.
 * The scale is a power of two so that scaling and unscaling are exact. */
static int parse_loss_scale(const dlt_node *train, dlt_config *c)
{
	static const char *const keys[] = { "init", "growth_interval", NULL };
	const dlt_node *n = get(train, "loss_scale"), *init;
	const char *p = "train.loss_scale";
	int rc, e;

	c->train.loss_scale.init = 65536;
	c->train.loss_scale.growth_interval = 2000;
	if (!n)
		return 0;
	if (strcmp(c->train.precision, "fp16"))
		return bad(n, p, "applies to precision fp16 only, not %s", c->train.precision);
	DLT_TRY(as_map(n, p, keys));
	DLT_TRY(get_f64(n, p, "init", POSITIVE, &c->train.loss_scale.init));
	DLT_TRY(get_int(n, p, "growth_interval", 1, INT_MAX,
			&c->train.loss_scale.growth_interval));
	init = get(n, "init");
	if (frexp(c->train.loss_scale.init, &e) != 0.5 || e < -125 || e > 128)
		rc = bad(init, "train.loss_scale.init", "must be a power of two from 2^-126 to "
			 "2^127, got %s", init->value);
fail:
	return rc;
}

static int parse_train(const dlt_node *root, dlt_config *c)
{
	static const char *const keys[] = {
		"epochs", "batch", "seed", "threads", "log_every", "precision", "storage",
		"loss_scale", "optimizer", "schedule", "loss", "steps", "context", "eval_every",
		"eval_batches", "clip", "accumulate", "init", NULL,
	};
	static const char *const inits[] = { "default", "gpt2", NULL };
	const dlt_node *t = get(root, "train");
	int rc;

	c->train.epochs = 1;
	c->train.batch = 32;
	c->train.log_every = 100;
	DLT_TRY(as_map(t, "train", keys));
	DLT_TRY(get_int(t, "train", "epochs", 1, INT_MAX, &c->train.epochs));
	DLT_TRY(get_int(t, "train", "batch", 1, INT_MAX, &c->train.batch));
	DLT_TRY(get_i64(t, "train", "seed", 0, &c->train.seed));
	DLT_TRY(get_int(t, "train", "threads", 0, INT_MAX, &c->train.threads));
	DLT_TRY(get_int(t, "train", "log_every", 1, INT_MAX, &c->train.log_every));
	DLT_TRY(parse_precision(t, c));
	DLT_TRY(parse_storage(t, c));
	DLT_TRY(parse_loss_scale(t, c));
	DLT_TRY(parse_optim(t, &c->train.optim));
	DLT_TRY(parse_sched(t, &c->train.sched));
	DLT_TRY(parse_loss(t, c));
	DLT_TRY(get_i64(t, "train", "steps", 0, &c->train.steps));
	DLT_TRY(get_int(t, "train", "context", 1, 1 << 20, &c->train.context));
	DLT_TRY(get_i64(t, "train", "eval_every", 0, &c->train.eval_every));
	c->train.eval_batches = 20;
	DLT_TRY(get_int(t, "train", "eval_batches", 1, 1 << 20, &c->train.eval_batches));
	DLT_TRY(get_f64(t, "train", "clip", NONNEG, &c->train.clip));
	c->train.accumulate = 1;
	DLT_TRY(get_int(t, "train", "accumulate", 1, 1 << 16, &c->train.accumulate));
	{
		int init = 0;
		DLT_TRY(get_word(t, "train", "init", "default or gpt2", inits, &init));
		c->train.init_gpt2 = init == 2;
	}
fail:
	return rc;
}

/* data.train or data.test: a path or a list of paths, read as one
 * dataset; *first is the first one's copy */
static int get_paths(const dlt_node *d, const char *key, char **first, char ***paths, int *n)
{
	const dlt_node *v = get(d, key);
	char index[24];
	path_t path;
	size_t count = v && v->type == DLT_NODE_SEQ ? v->n : 1;
	int rc = 0;

	if (!v)
		return 0;
	join(path, "data", key);
	if (v->type == DLT_NODE_SEQ && v->n == 0)
		return bad(v, path, "must list at least one archive");
	if (v->type == DLT_NODE_SEQ && v->n > 1u << 16)
		return bad(v, path, "lists too many archives");
	if (!(*paths = dlt_calloc(count, sizeof(**paths))))
		return DLT_ENOMEM;
	if (v->type != DLT_NODE_SEQ) {
		DLT_TRY(get_str(d, "data", key, "a path", &(*paths)[0]));
		*n = 1;
	} else {
		for (size_t i = 0; i < count; i++) {
			const dlt_node *item = &v->items[i];
			snprintf(index, sizeof(index), "%s[%zu]", key, i);
			join(path, "data", index);
			if (item->type != DLT_NODE_SCALAR)
				return type_error(item, path, "a path");
			if (!item->value[0] || is_null(item))
				return bad(item, path, "must not be empty");
			if (!((*paths)[i] = dlt_strdup(item->value)))
				return DLT_ENOMEM;
			*n = (int)i + 1;
		}
	}
	if (!(*first = dlt_strdup((*paths)[0])))
		return DLT_ENOMEM;
fail:
	return rc;
}

static int parse_data(const dlt_node *root, dlt_config *c)
{
	static const char *const keys[] = { "train", "test", "val", "val_split", "augment", NULL };
	static const char *const augment_keys[] = { "crop", "flip", NULL };
	const dlt_node *d = get(root, "data"), *a = get(d, "augment");
	int rc;

	DLT_TRY(as_map(d, "data", keys));
	DLT_TRY(get_paths(d, "train", &c->data.train, &c->data.train_paths,
			  &c->data.n_train_paths));
	DLT_TRY(get_paths(d, "test", &c->data.test, &c->data.test_paths,
			  &c->data.n_test_paths));
	DLT_TRY(get_str(d, "data", "val", "a path", &c->data.val));
	DLT_TRY(get_f64(d, "data", "val_split", UNIT_CLOSED_OPEN, &c->data.val_split));
	DLT_TRY(as_map(a, "data.augment", augment_keys));
	DLT_TRY(get_int(a, "data.augment", "crop", 0, MAX_CROP, &c->data.augment.crop));
	DLT_TRY(get_bool(a, "data.augment", "flip", &c->data.augment.flip));
	if (!c->data.train)
		return dlt_node_error(dlt_node_get(root, "data") ?: root, "data.train is required");
fail:
	return rc;
}

/* every: epoch, N (steps), "N steps" or "N seconds" ("N s", "Ns"). */
static int parse_every(const dlt_node *ck, dlt_config *c)
{
	static const char *const units[] = { "step", "steps", "s", "second", "seconds", NULL };
	const char *path = "checkpoint.every", *want = "epoch, N steps or N seconds";
	const dlt_node *n = get(ck, "every");
	const char *unit;
	long long v;
	double d;
	size_t digits;

	c->ckpt.every = DLT_CKPT_EPOCH;
	c->ckpt.every_n = 1;
	if (!n)
		return 0;
	if (n->type != DLT_NODE_SCALAR)
		return type_error(n, path, want);
	if (!strcmp(n->value, "epoch"))
		return 0;
	c->ckpt.every = DLT_CKPT_STEPS;
	if (is_plain(n) && dlt_parse_f64(n->value, &d, path) == 0)
		return to_int(n, path, 1, INT_MAX, &c->ckpt.every_n);
	digits = strspn(n->value, "0123456789");
	unit = n->value + digits + strspn(n->value + digits, " ");
	if (!digits || !lookup(unit, units))
		return bad(n, path, "expected %s, got '%.64s'", want, n->value);
	if (lookup(unit, units) > 2)
		c->ckpt.every = DLT_CKPT_SECONDS;
	errno = 0;
	v = strtoll(n->value, NULL, 10);
	if (v < 1)
		return bad(n, path, "must be >= 1, got %.64s", n->value);
	if (v > INT_MAX || errno)
		return bad(n, path, "must be <= %d, got %.64s", INT_MAX, n->value);
	c->ckpt.every_n = v;
	return 0;
}

/* The metrics a run records (dlt-train(1) METRICS): which of them the
 * task has is known once the data is (dlt_train_run checks). */
static const char *const metric_splits[] = { "train", "val", "test", NULL };
static const char *const metric_kinds[] = { "loss", "acc", "top5", "rmse", "mae", "r2", "f1",
					    NULL };

/* The metric best: SPLIT.NAME, and the split must exist in every run of
 * this config. */
static int check_metric(const dlt_node *n, const dlt_config *c, const char *metric)
{
	const char *dot = strchr(metric, '.');
	char split[8];
	if (!dot || dot - metric >= (int)sizeof(split) || !lookup(dot + 1, metric_kinds))
		goto unknown;
	memcpy(split, metric, (size_t)(dot - metric));
	split[dot - metric] = 0;
	if (!lookup(split, metric_splits))
		goto unknown;
	if (!strncmp(metric, "val.", 4) && c->data.val_split <= 0 && !c->data.val)
		return bad(n, "checkpoint.best", "%s needs data.val_split > 0 (or data.val)", metric);
	if (!strncmp(metric, "test.", 5) && !c->data.test)
		return bad(n, "checkpoint.best", "%s needs data.test", metric);
	return 0;
unknown:
	return bad(n, "checkpoint.best", "unknown metric '%.64s' (train, val or test, then "
		   "loss, acc, top5, rmse, mae, r2 or f1: e.g. val.rmse)", metric);
}

static int parse_ckpt(const dlt_node *root, dlt_config *c)
{
	static const char *const keys[] = { "every", "keep", "best", "mode", NULL };
	static const char *const modes[] = { "max", "min", NULL };
	const dlt_node *k = get(root, "checkpoint");
	char *metric = NULL;
	int rc, mode = 0;

	c->ckpt.keep = 3;
	DLT_TRY(as_map(k, "checkpoint", keys));
	DLT_TRY(parse_every(k, c));
	DLT_TRY(get_int(k, "checkpoint", "keep", 1, INT_MAX, &c->ckpt.keep));
	DLT_TRY(get_str(k, "checkpoint", "best", "a metric", &metric));
	DLT_TRY(get_word(k, "checkpoint", "mode", "max or min", modes, &mode));
	if (mode && !metric)
		return bad(get(k, "mode"), "checkpoint.mode", "needs checkpoint.best");
	if (!metric)
		return 0;
	DLT_TRY(check_metric(get(k, "best"), c, metric));
	c->ckpt.best_max = mode ? mode == 1 : dlt_metric_mode(metric) > 0;
	c->ckpt.best = metric;
	metric = NULL;
fail:
	free(metric);
	return rc;
}

/* dist.pipeline: {stages: S, microbatches: M, schedule: 1f1b|gpipe,
 * split: [layer, ...]}; M defaults to S */
static int parse_pipeline(const dlt_node *d, dlt_config *c)
{
	static const char *const keys[] = { "stages", "microbatches", "schedule", "split", NULL };
	static const char *const schedules[] = { "1f1b", "gpipe", NULL };
	const dlt_node *p = get(d, "pipeline"), *sp;
	int rc;

	if (!p || is_null(p))
		return 0;
	DLT_TRY(as_map(p, "dist.pipeline", keys));
	if (!get(p, "stages"))
		return dlt_node_error(p, "dist.pipeline: stages is required");
	DLT_TRY(get_int(p, "dist.pipeline", "stages", 2, DLT_MAX_STAGES, &c->dist.pipe.stages));
	c->dist.pipe.micro = c->dist.pipe.stages;
	DLT_TRY(get_int(p, "dist.pipeline", "microbatches", 1, 1 << 16, &c->dist.pipe.micro));
	c->dist.pipe.schedule = DLT_PIPE_1F1B;
	DLT_TRY(get_word(p, "dist.pipeline", "schedule", "1f1b or gpipe", schedules,
			 &c->dist.pipe.schedule));
	if (!(sp = get(p, "split")))
		return 0;
	if (sp->type != DLT_NODE_SEQ || sp->n != (size_t)c->dist.pipe.stages - 1)
		return dlt_node_error(sp, "dist.pipeline.split: a list of stages - 1 = %d indices "
				      "of the layers where stages 2 to %d begin",
				      c->dist.pipe.stages - 1, c->dist.pipe.stages);
	for (size_t i = 0; i < sp->n; i++) {
		path_t path;
		char index[24];
		int *at = &c->dist.pipe.split[i];
		snprintf(index, sizeof(index), "%zu", i);
		DLT_TRY(to_i32(&sp->items[i], join(path, "dist.pipeline.split", index), 1, 1 << 20,
			       at));
		if (i && *at <= at[-1])
			return dlt_node_error(&sp->items[i], "dist.pipeline.split: the layers must "
					      "increase (%d after %d)", *at, at[-1]);
	}
	c->dist.pipe.n_split = (int)sp->n;
fail:
	return rc;
}

/* dist: {timeout: seconds, bucket_mb: MB, zero: 0|1|2|3, pipeline: ...},
 * data parallelism's: how long a rank waits for the others before it
 * ends the job, the size of the gradient buckets summed while backward
 * goes on, and the ZeRO stage; and the pipeline of stages. */
static int parse_dist(const dlt_node *root, dlt_config *c)
{
	static const char *const keys[] = { "timeout", "bucket_mb", "zero", "pipeline", NULL };
	const dlt_node *d = get(root, "dist");
	int rc;

	c->dist.timeout = 300;
	c->dist.bucket_mb = 25;
	c->dist.zero = -1;
	DLT_TRY(as_map(d, "dist", keys));
	DLT_TRY(get_f64(d, "dist", "timeout", POSITIVE, &c->dist.timeout));
	DLT_TRY(get_f64(d, "dist", "bucket_mb", POSITIVE, &c->dist.bucket_mb));
	DLT_TRY(get_int(d, "dist", "zero", 0, 3, &c->dist.zero));
	DLT_TRY(parse_pipeline(d, c));
	if (c->dist.timeout > 86400 || c->dist.bucket_mb > 4096)
		rc = dlt_node_error(d, "dist: timeout is at most 86400 s, bucket_mb 4096");
fail:
	return rc;
}

/* device: cpu (default), cuda (the first GPU) or cuda:N */
static int parse_device(const dlt_node *root, dlt_config *c)
{
	const dlt_node *n = get(root, "device");
	char *s = NULL, *end;
	long v;
	int rc;

	c->device = -1;
	DLT_TRY(get_str(root, "", "device", "a device", &s));
	if (!s || !strcmp(s, "cpu"))
		goto fail;
	if (!strcmp(s, "cuda")) {
		c->device = 0;
		goto fail;
	}
	errno = 0;
	if (strncmp(s, "cuda:", 5) || !isdigit((unsigned char)s[5]) ||
	    (v = strtol(s + 5, &end, 10), *end) || errno || v > 1023)
		rc = bad(n, "device", "unknown device '%.64s' (cpu, cuda, cuda:N)", s);
	else
		c->device = (int)v;
fail:
	free(s);
	return rc;
}

static int from_tree(dlt_config *c, const dlt_node *root)
{
	static const char *const keys[] = { "data", "model", "train", "checkpoint", "dist",
					    "device", NULL };
	int rc;

	if (is_null(root))
		return dlt_node_error(root, "data.train is required");
	if (root->type != DLT_NODE_MAP)
		return type_error(root, "the document", "a mapping");
	DLT_TRY(check_keys(root, "", keys));
	DLT_TRY(parse_data(root, c));
	DLT_TRY(parse_model(root, c));
	DLT_TRY(parse_train(root, c));
	DLT_TRY(parse_ckpt(root, c));
	DLT_TRY(parse_dist(root, c));
	DLT_TRY(parse_device(root, c));
	/* a rank lets the weights outside its range go by giving their pages
	 * back (madvise); a GPU's memory would need its virtual memory calls
	 * (cuMemMap) for that */
	if (c->dist.zero == 3 && c->device >= 0)
		rc = dlt_node_error(get(get(root, "dist"), "zero"), "dist.zero 3 runs on CPU "
				    "ranks only; on GPUs use dist.zero 2");
fail:
	return rc;
}

static int load(dlt_config *c, const char *text, size_t len, const char *name, const char *path,
		char *const *overrides, int n_overrides)
{
	dlt_node root;
	int rc;

	memset(c, 0, sizeof(*c));
	DLT_TRY(dlt_node_parse(&root, text, len, name));
	for (int i = 0; i < n_overrides; i++)
		DLT_TRY(dlt_node_override(&root, overrides[i]));
	DLT_TRY(from_tree(c, &root));
	c->path = dlt_strdup(path);
	if (!c->path)
		rc = DLT_ENOMEM;
fail:
	dlt_node_free(&root);
	if (rc < 0)
		dlt_config_free(c);
	return rc;
}

int dlt_config_load_string(dlt_config *c, const char *text, size_t len, const char *name,
			   char *const *overrides, int n_overrides)
{
	return load(c, text, len, name, name, overrides, n_overrides);
}

int dlt_config_load(dlt_config *c, const char *path, char *const *overrides, int n_overrides)
{
	const char *name = strcmp(path, "-") ? path : "<stdin>";
	char *text = NULL;
	size_t len = 0;
	int rc;

	memset(c, 0, sizeof(*c));
	rc = dlt_read_file(path, MAX_CONFIG_BYTES, &text, &len);
	if (rc < 0)
		return rc;
	rc = load(c, text, len, name, path, overrides, n_overrides);
	free(text);
	return rc;
}

static void free_layers(dlt_layer_cfg *l, int n)
{
	for (int i = 0; i < n; i++) {
		free_layers(l[i].body, l[i].n_body);
		free_layers(l[i].shortcut, l[i].n_shortcut);
	}
	free(l);
}

void dlt_config_free(dlt_config *c)
{
	free(c->path);
	free(c->data.train);
	free(c->data.test);
	for (int i = 0; i < c->data.n_train_paths; i++)
		free(c->data.train_paths[i]);
	free(c->data.train_paths);
	for (int i = 0; i < c->data.n_test_paths; i++)
		free(c->data.test_paths[i]);
	free(c->data.test_paths);
	free(c->data.val);
	free_layers(c->layers, c->n_layers);
	free(c->ckpt.best);
	memset(c, 0, sizeof(*c));
}
