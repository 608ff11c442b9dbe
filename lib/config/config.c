/* config: the dlt-train schema, from a dlt_node tree to struct dlt_config.
 *
 * Every key is checked: an unknown one is an error (with a suggestion when
 * it is close to a known one), because a misspelt "epoch: 100" silently
 * training for one epoch costs a user far more than a refusal.  A null value
 * ("key:", "key: ~") is the same as an absent key: the default. */
#include "config/config.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CONFIG_BYTES (4 << 20)

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

static int get_i64(const dlt_node *map, const char *parent, const char *key, long long min,
		   long long *out)
{
	const dlt_node *n = get(map, key);
	path_t path;

	return n ? to_int(n, join(path, parent, key), min, LLONG_MAX, out) : 0;
}

static int get_int(const dlt_node *map, const char *parent, const char *key, int min, int *out)
{
	const dlt_node *n = get(map, key);
	long long v;
	path_t path;
	int rc;

	if (!n)
		return 0;
	DLT_TRY(to_int(n, join(path, parent, key), min, INT_MAX, &v));
	*out = (int)v;
fail:
	return rc;
}

/* Ranges of real-valued settings. */
enum range { ANY, POSITIVE, NONNEG, UNIT_CLOSED_OPEN, UNIT_OPEN_CLOSED };

static int check_range(const dlt_node *n, const char *path, double v, enum range r)
{
	static const char *const text[] = {
		[POSITIVE] = "> 0", [NONNEG] = ">= 0",
		[UNIT_CLOSED_OPEN] = "in [0, 1)", [UNIT_OPEN_CLOSED] = "in (0, 1]",
	};
	int fits = r == ANY ||
		   (r == POSITIVE && v > 0) || (r == NONNEG && v >= 0) ||
		   (r == UNIT_CLOSED_OPEN && v >= 0 && v < 1) ||
		   (r == UNIT_OPEN_CLOSED && v > 0 && v <= 1);

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

static int get_f32(const dlt_node *map, const char *parent, const char *key, enum range r,
		   float *out)
{
	const dlt_node *n = get(map, key);
	path_t path;

	return n ? to_f32(n, join(path, parent, key), r, out) : 0;
}

static int get_bool(const dlt_node *map, const char *parent, const char *key, int *out)
{
	static const char *const yes[] = { "true", "True", "TRUE", "yes", "Yes", "YES", NULL };
	static const char *const no[] = { "false", "False", "FALSE", "no", "No", "NO", NULL };
	const dlt_node *n = get(map, key);
	path_t path;

	if (!n)
		return 0;
	for (int i = 0; is_plain(n) && yes[i]; i++) {
		if (!strcmp(n->value, yes[i]) || !strcmp(n->value, no[i])) {
			*out = !strcmp(n->value, yes[i]);
			return 0;
		}
	}
	return type_error(n, join(path, parent, key), "true or false");
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

/* Layers.  Indexed by enum dlt_layer_kind; option is the key a bare value
 * sets (dense: 256 is dense: {units: 256}), and it is required when the
 * layer has no default for it. */
static const char *const layer_names[] = {
	"dense", "relu", "leaky_relu", "gelu", "tanh", "sigmoid", "dropout", "flatten", NULL,
};
static const char *const dense_keys[] = { "units", "bias", NULL };
static const char *const leaky_keys[] = { "slope", NULL };
static const char *const dropout_keys[] = { "rate", NULL };
static const char *const no_keys[] = { NULL };

static const char *const *layer_keys(int kind)
{
	switch (kind) {
	case DLT_LAYER_DENSE: return dense_keys;
	case DLT_LAYER_LEAKY_RELU: return leaky_keys;
	case DLT_LAYER_DROPOUT: return dropout_keys;
	default: return no_keys;
	}
}

/* The bare value of a layer: dense: 256 is dense: {units: 256}. */
static int layer_value(const dlt_node *v, const char *path, dlt_layer_cfg *l)
{
	long long units;
	int rc;

	switch (l->kind) {
	case DLT_LAYER_DENSE:
		DLT_TRY(to_int(v, path, 1, INT_MAX, &units));
		l->units = (int)units;
		return 0;
	case DLT_LAYER_LEAKY_RELU:
		return to_f32(v, path, ANY, &l->slope);
	case DLT_LAYER_DROPOUT:
		return to_f32(v, path, UNIT_CLOSED_OPEN, &l->rate);
	default:
		return bad(v, path, "takes no options, got '%.64s'", v->value);
	}
fail:
	return rc;
}

static int layer_options(const dlt_node *layer, const dlt_node *opts, const char *path,
			 dlt_layer_cfg *l)
{
	const char *const *keys = layer_keys(l->kind);
	const char *name = layer_names[l->kind - 1];
	int rc;

	if (opts && opts->type == DLT_NODE_SCALAR && !is_null(opts))
		return layer_value(opts, path, l);
	if (opts && opts->type == DLT_NODE_SEQ)
		return type_error(opts, path, keys[0] ? "a number or a mapping" : "no options");
	DLT_TRY(as_map(opts, path, keys));
	DLT_TRY(get_int(opts, path, "units", 1, &l->units));
	DLT_TRY(get_bool(opts, path, "bias", &l->bias));
	DLT_TRY(get_f32(opts, path, "slope", ANY, &l->slope));
	DLT_TRY(get_f32(opts, path, "rate", UNIT_CLOSED_OPEN, &l->rate));
	/* dense and dropout have no sensible default */
	if ((l->kind == DLT_LAYER_DENSE || l->kind == DLT_LAYER_DROPOUT) && !get(opts, keys[0]))
		return bad(opts ? opts : layer, path, "%s is required (%s: N or %s: {%s: N})",
			   keys[0], name, name, keys[0]);
fail:
	return rc;
}

static int parse_layer(const dlt_node *n, int i, dlt_layer_cfg *l)
{
	const dlt_node *opts, *at;
	const char *name;
	path_t path, kpath;
	int rc;

	snprintf(path, sizeof(path), "model.%d", i);
	DLT_TRY(choice(n, path, "layer", &name, &opts, &at));
	l->kind = lookup(name, layer_names);
	if (!l->kind)
		return unknown(at, "layer", name, layer_names);
	l->line = n->line;
	l->bias = 1;
	l->slope = 0.01f;
	rc = layer_options(n, opts, join(kpath, path, name), l);
fail:
	return rc;
}

static int parse_model(const dlt_node *root, dlt_config *c)
{
	const dlt_node *n = get(root, "model");
	int rc = 0;

	if (!n)
		return dlt_node_error(dlt_node_get(root, "model") ?: root, "model is required");
	if (n->type != DLT_NODE_SEQ)
		return type_error(n, "model", "a sequence of layers");
	if (!n->n)
		return bad(n, "model", "must have at least one layer");
	if (n->n > INT_MAX)
		return bad(n, "model", "too many layers");
	c->model_line = n->line;
	c->layers = dlt_calloc(n->n, sizeof(*c->layers));
	if (!c->layers)
		return DLT_ENOMEM;
	for (size_t i = 0; i < n->n; i++) {
		DLT_TRY(parse_layer(&n->items[i], (int)i, &c->layers[i]));
		c->n_layers++;
	}
fail:
	return rc;
}

/* Optimizers, indexed by enum dlt_optim_kind. */
static const char *const optim_names[] = { "sgd", "adam", "adamw", NULL };
static const char *const sgd_keys[] = { "lr", "momentum", "nesterov", "weight_decay", NULL };
static const char *const adam_keys[] = { "lr", "beta1", "beta2", "eps", "weight_decay", NULL };

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
	DLT_TRY(as_map(opts, p, o->kind == DLT_OPT_SGD ? sgd_keys : adam_keys));
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
	DLT_TRY(get_int(opts, p, "warmup", 0, &s->warmup));
	DLT_TRY(get_int(opts, p, "every", 1, &s->step_every));
	DLT_TRY(get_f64(opts, p, "gamma", UNIT_OPEN_CLOSED, &s->gamma));
	DLT_TRY(get_f64(opts, p, "min_lr", NONNEG, &s->min_lr));
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
	if (!s || !strcmp(s, "fp32"))
		goto fail;
	if (!strcmp(s, "bf16") || !strcmp(s, "fp16"))
		rc = bad(n, "train.precision", "'%s' is not supported yet (fp32)", s);
	else
		rc = bad(n, "train.precision", "unknown precision '%.64s' (fp32)", s);
fail:
	free(s);
	return rc;
}

static int parse_train(const dlt_node *root, dlt_config *c)
{
	static const char *const keys[] = {
		"epochs", "batch", "seed", "threads", "log_every", "precision", "optimizer",
		"schedule", NULL,
	};
	const dlt_node *t = get(root, "train");
	int rc;

	c->train.epochs = 1;
	c->train.batch = 32;
	c->train.log_every = 100;
	DLT_TRY(as_map(t, "train", keys));
	DLT_TRY(get_int(t, "train", "epochs", 1, &c->train.epochs));
	DLT_TRY(get_int(t, "train", "batch", 1, &c->train.batch));
	DLT_TRY(get_i64(t, "train", "seed", 0, &c->train.seed));
	DLT_TRY(get_int(t, "train", "threads", 0, &c->train.threads));
	DLT_TRY(get_int(t, "train", "log_every", 1, &c->train.log_every));
	DLT_TRY(parse_precision(t, c));
	DLT_TRY(parse_optim(t, &c->train.optim));
	DLT_TRY(parse_sched(t, &c->train.sched));
fail:
	return rc;
}

static int parse_data(const dlt_node *root, dlt_config *c)
{
	static const char *const keys[] = { "train", "test", "val_split", NULL };
	const dlt_node *d = get(root, "data");
	int rc;

	DLT_TRY(as_map(d, "data", keys));
	DLT_TRY(get_str(d, "data", "train", "a path", &c->data.train));
	DLT_TRY(get_str(d, "data", "test", "a path", &c->data.test));
	DLT_TRY(get_f64(d, "data", "val_split", UNIT_CLOSED_OPEN, &c->data.val_split));
	if (!c->data.train)
		return dlt_node_error(dlt_node_get(root, "data") ?: root, "data.train is required");
fail:
	return rc;
}

static int from_tree(dlt_config *c, const dlt_node *root)
{
	static const char *const keys[] = { "data", "model", "train", NULL };
	int rc;

	if (is_null(root))
		return dlt_node_error(root, "data.train is required");
	if (root->type != DLT_NODE_MAP)
		return type_error(root, "the document", "a mapping");
	DLT_TRY(check_keys(root, "", keys));
	DLT_TRY(parse_data(root, c));
	DLT_TRY(parse_model(root, c));
	DLT_TRY(parse_train(root, c));
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

void dlt_config_free(dlt_config *c)
{
	free(c->path);
	free(c->data.train);
	free(c->data.test);
	free(c->layers);
	memset(c, 0, sizeof(*c));
}
