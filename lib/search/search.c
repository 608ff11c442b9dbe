/* Search files and the grid and random samplers. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "runs/runs.h"
#include "search/search.h"

#define MAX_TRIALS 100000

static int is_scalar(const dlt_node *n)
{
	return n->type == DLT_NODE_SCALAR && n->value && n->value[0];
}

static int get_scalar(const dlt_node *n, const char *key, const char **out)
{
	if (!is_scalar(n))
		return dlt_node_error(n, "%s: expected a value", key);
	*out = n->value;
	return 0;
}

static int get_int(const dlt_node *n, const char *key, long long min, long long max,
		   long long *out)
{
	const char *v = NULL;
	DLT_TRY_RC(get_scalar(n, key, &v));
	if (dlt_parse_i64(v, min, max, out, key) < 0)
		return dlt_node_error(n, "%s", dlt_errmsg());
	return 0;
}

static int get_num(const dlt_node *n, const char *key, double *out)
{
	const char *v = NULL;
	DLT_TRY_RC(get_scalar(n, key, &v));
	if (dlt_parse_f64(v, out, key) < 0 || !isfinite(*out))
		return dlt_node_error(n, "%s: '%s' is not a finite number", key, v);
	return 0;
}

/* A base path relative to the directory of the search file. */
static char *beside(const char *file, const char *path)
{
	const char *slash = strrchr(file, '/');
	dlt_buf b = { 0 };

	if (path[0] == '/' || !slash)
		return dlt_strdup(path);
	if (dlt_buf_printf(&b, "%.*s/%s", (int)(slash - file), file, path) < 0)
		return NULL;
	return b.data;
}

static int parse_range(const dlt_node *v, dlt_search_param *p, const char *what)
{
	if (v->type != DLT_NODE_SEQ || v->n != 2)
		return dlt_node_error(v, "%s: %s: expected [low, high]", p->key, what);
	DLT_TRY_RC(get_num(&v->items[0], what, &p->lo));
	DLT_TRY_RC(get_num(&v->items[1], what, &p->hi));
	if (p->kind == DLT_PARAM_INT) {
		if (p->lo != floor(p->lo) || p->hi != floor(p->hi) || fabs(p->lo) > 1e15 ||
		    fabs(p->hi) > 1e15)
			return dlt_node_error(v, "%s: int: bounds must be integers", p->key);
		if (p->lo > p->hi)
			return dlt_node_error(v, "%s: int: low > high", p->key);
	} else if (!(p->lo < p->hi)) {
		return dlt_node_error(v, "%s: %s: low must be below high", p->key, what);
	}
	if ((p->kind == DLT_PARAM_LOGUNIFORM || (p->kind == DLT_PARAM_INT && p->log)) && p->lo <= 0)
		return dlt_node_error(v, "%s: %s: a log scale needs low > 0", p->key, what);
	return 0;
}

static int parse_param(const dlt_node *n, dlt_search_param *p)
{
	const dlt_node *v = NULL;

	p->line = n->line;
	if (!(p->key = dlt_strdup(n->key)))
		return DLT_ENOMEM;
	if (n->type != DLT_NODE_MAP)
		return dlt_node_error(n, "%s: expected {choice: [...]}, {uniform: [a, b]}, "
				      "{loguniform: [a, b]} or {int: [a, b]}", p->key);
	for (size_t i = 0; i < n->n; i++) {
		const dlt_node *it = &n->items[i];
		static const char *const kinds[] = { "choice", "uniform", "loguniform", "int" };
		int kind = 0;

		for (int k = 0; k < 4; k++)
			if (!strcmp(it->key, kinds[k]))
				kind = k + 1;
		if (kind) {
			if (p->kind)
				return dlt_node_error(it, "%s: one of choice, uniform, loguniform, int",
						      p->key);
			p->kind = kind;
			v = it;
		} else if (!strcmp(it->key, "log")) {
			if (!is_scalar(it) || (strcmp(it->value, "true") && strcmp(it->value, "false")))
				return dlt_node_error(it, "%s: log: expected true or false", p->key);
			p->log = !strcmp(it->value, "true");
		} else {
			return dlt_node_error(it, "%s: unknown key '%s'", p->key, it->key);
		}
	}
	if (!p->kind)
		return dlt_node_error(n, "%s: missing choice, uniform, loguniform or int", p->key);
	if (p->log && p->kind != DLT_PARAM_INT)
		return dlt_node_error(n, "%s: log: only with int", p->key);
	if (p->kind != DLT_PARAM_CHOICE)
		return parse_range(v, p, v->key);
	if (v->type != DLT_NODE_SEQ || v->n == 0)
		return dlt_node_error(v, "%s: choice: expected a list of values", p->key);
	if (!(p->choices = dlt_calloc(v->n, sizeof(*p->choices))))
		return DLT_ENOMEM;
	for (size_t i = 0; i < v->n; i++) {
		if (v->items[i].type != DLT_NODE_SCALAR)
			return dlt_node_error(&v->items[i], "%s: choice: values must be scalars",
					      p->key);
		if (!(p->choices[i] = dlt_strdup(v->items[i].value)))
			return DLT_ENOMEM;
		p->nchoices++;
	}
	return 0;
}

/* The values of p that a grid walks through; 0 for a continuous param. */
static long long grid_size(const dlt_search_param *p)
{
	if (p->kind == DLT_PARAM_CHOICE)
		return (long long)p->nchoices;
	if (p->kind == DLT_PARAM_INT)
		return (long long)(p->hi - p->lo) + 1;
	return 0;
}

static int check(dlt_search *s, const dlt_node *root)
{
	long long n = 1;

	if (!s->base)
		return dlt_node_error(root, "missing base: the training config");
	if (!s->metric)
		return dlt_node_error(root, "missing metric: e.g. test.acc");
	if (!s->method)
		return dlt_node_error(root, "missing method: grid, random or asha");
	if (s->nparams == 0)
		return dlt_node_error(root, "missing params: the keys to search");
	if (s->method != DLT_SEARCH_GRID && s->trials == 0)
		return dlt_node_error(root, "missing trials: the number of trials");
	if (s->method == DLT_SEARCH_ASHA) {
		const char *unit = s->steps ? "steps" : "epochs";
		if (!s->min_budget || !s->max_budget)
			return dlt_node_error(root, "asha needs min_epochs and max_epochs (or "
					      "min_steps and max_steps)");
		if (s->min_budget > s->max_budget)
			return dlt_node_error(root, "min_%s > max_%s", unit, unit);
		for (size_t i = 0; i < s->nparams; i++)
			if (!strcmp(s->params[i].key, s->steps ? "train.steps" : "train.epochs"))
				return dlt_error(DLT_EINPUT, "%s:%d: train.%s: asha sets it "
						 "(min_%s, max_%s)", s->path, s->params[i].line,
						 unit, unit, unit);
	}
	if (s->method != DLT_SEARCH_GRID)
		return 0;
	for (size_t i = 0; i < s->nparams; i++) {
		const dlt_search_param *p = &s->params[i];
		long long k = grid_size(p);
		if (!k)
			return dlt_error(DLT_EINPUT, "%s:%d: %s: grid needs choice or int params, "
					 "not %s", s->path, p->line, p->key,
					 p->kind == DLT_PARAM_UNIFORM ? "uniform" : "loguniform");
		if (k > MAX_TRIALS || n * k > MAX_TRIALS)
			return dlt_error(DLT_EINPUT, "%s:%d: %s: grid of more than %d trials",
					 s->path, p->line, p->key, MAX_TRIALS);
		n *= k;
	}
	return 0;
}

int dlt_search_load(dlt_search *s, const char *path)
{
	dlt_node root = { 0 };
	char *text = NULL;
	size_t len;
	long long v;
	int rc;

	memset(s, 0, sizeof(*s));
	s->eta = 3;
	s->parallel = 4;
	if (!(s->path = dlt_strdup(path)))
		return DLT_ENOMEM;
	DLT_TRY(dlt_read_file(path, 1 << 20, &text, &len));
	DLT_TRY(dlt_node_parse(&root, text, len, s->path));
	if (root.type != DLT_NODE_MAP) {
		rc = dlt_node_error(&root, "expected a mapping");
		goto fail;
	}
	for (size_t i = 0; i < root.n; i++) {
		const dlt_node *n = &root.items[i];
		const char *k = n->key, *val = NULL;

		if (!strcmp(k, "base")) {
			if (n->type == DLT_NODE_MAP) {
				rc = dlt_node_error(n, "base: an inline mapping is not supported yet; "
						    "name a file");
				goto fail;
			}
			DLT_TRY(get_scalar(n, k, &val));
			s->base_line = n->line;
			if (!(s->base = beside(path, val))) {
				rc = DLT_ENOMEM;
				goto fail;
			}
		} else if (!strcmp(k, "metric")) {
			DLT_TRY(get_scalar(n, k, &val));
			if (!(s->metric = dlt_runs_metric_name(val))) {
				rc = DLT_ENOMEM;
				goto fail;
			}
			if (!s->mode)
				s->mode = dlt_metric_mode(s->metric);
		} else if (!strcmp(k, "mode")) {
			DLT_TRY(get_scalar(n, k, &val));
			if (strcmp(val, "max") && strcmp(val, "min")) {
				rc = dlt_node_error(n, "mode: expected max or min, got '%s'", val);
				goto fail;
			}
			s->mode = !strcmp(val, "max") ? 1 : -1;
		} else if (!strcmp(k, "method")) {
			DLT_TRY(get_scalar(n, k, &val));
			s->method_line = n->line;
			if (!strcmp(val, "grid"))
				s->method = DLT_SEARCH_GRID;
			else if (!strcmp(val, "random"))
				s->method = DLT_SEARCH_RANDOM;
			else if (!strcmp(val, "asha"))
				s->method = DLT_SEARCH_ASHA;
			else {
				rc = dlt_node_error(n, "method: expected grid, random or asha, got '%s'",
						    val);
				goto fail;
			}
		} else if (!strcmp(k, "trials")) {
			DLT_TRY(get_int(n, k, 1, MAX_TRIALS, &s->trials));
		} else if (!strcmp(k, "seed")) {
			DLT_TRY(get_int(n, k, 0, INT64_MAX, &s->seed));
		} else if (!strcmp(k, "eta")) {
			DLT_TRY(get_int(n, k, 2, 100, &v));
			s->eta = (int)v;
		} else if (!strcmp(k, "parallel")) {
			DLT_TRY(get_int(n, k, 1, 4096, &v));
			s->parallel = (int)v;
		} else if (!strcmp(k, "min_epochs") || !strcmp(k, "max_epochs") ||
			   !strcmp(k, "min_steps") || !strcmp(k, "max_steps")) {
			/* budgets in epochs, or in steps (token data): one or the other */
			int steps = strstr(k, "steps") != NULL;
			if ((s->min_budget || s->max_budget) && steps != s->steps) {
				rc = dlt_node_error(n, "%s: min_epochs and max_epochs, or "
						    "min_steps and max_steps, not both", k);
				goto fail;
			}
			DLT_TRY(get_int(n, k, 1, steps ? 1000000000 : 1000000, &v));
			s->steps = steps;
			if (k[1] == 'i')
				s->min_budget = (int)v;
			else
				s->max_budget = (int)v;
		} else if (!strcmp(k, "params")) {
			if (n->type != DLT_NODE_MAP) {
				rc = dlt_node_error(n, "params: expected a mapping of config keys");
				goto fail;
			}
			if (!(s->params = dlt_calloc(n->n ? n->n : 1, sizeof(*s->params)))) {
				rc = DLT_ENOMEM;
				goto fail;
			}
			for (size_t j = 0; j < n->n; j++) {
				s->nparams++;
				DLT_TRY(parse_param(&n->items[j], &s->params[j]));
			}
		} else {
			rc = dlt_node_error(n, "unknown key '%s'", k);
			goto fail;
		}
	}
	DLT_TRY(check(s, &root));
	dlt_node_free(&root);
	free(text);
	return 0;
fail:
	dlt_node_free(&root);
	free(text);
	dlt_search_free(s);
	return rc;
}

void dlt_search_free(dlt_search *s)
{
	for (size_t i = 0; i < s->nparams; i++) {
		for (size_t j = 0; j < s->params[i].nchoices; j++)
			free(s->params[i].choices[j]);
		free(s->params[i].choices);
		free(s->params[i].key);
	}
	free(s->params);
	free(s->path);
	free(s->base);
	free(s->metric);
	memset(s, 0, sizeof(*s));
}

long long dlt_search_count(const dlt_search *s)
{
	long long n = 1;

	if (s->method != DLT_SEARCH_GRID)
		return s->trials;
	for (size_t i = 0; i < s->nparams; i++)
		n *= grid_size(&s->params[i]);
	return s->trials && s->trials < n ? s->trials : n;
}

static char *assign(const char *key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *assign(const char *key, const char *fmt, ...)
{
	dlt_buf b = { 0 };
	char v[64];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(v, sizeof(v), fmt, ap);
	va_end(ap);
	if (dlt_buf_printf(&b, "%s=%s", key, v) < 0)
		return NULL;
	return b.data;
}

/* Value k of p in a grid. */
static char *grid_value(const dlt_search_param *p, long long k)
{
	if (p->kind == DLT_PARAM_CHOICE)
		return assign(p->key, "%s", p->choices[k]);
	return assign(p->key, "%lld", (long long)p->lo + k);
}

/* A double in [0, 1) from two outputs, so the bounds are not rounded to
 * float's 24 bits. */
static double unit(dlt_rng *r)
{
	uint64_t hi = dlt_rng_u32(r) >> 5, lo = dlt_rng_u32(r) >> 6;
	return (double)(hi * 67108864.0 + lo) / 9007199254740992.0;
}

static char *random_value(const dlt_search_param *p, dlt_rng *r)
{
	double u, x;

	switch (p->kind) {
	case DLT_PARAM_CHOICE:
		return assign(p->key, "%s", p->choices[dlt_rng_below(r, (uint32_t)p->nchoices)]);
	case DLT_PARAM_UNIFORM:
		return assign(p->key, "%.6g", p->lo + unit(r) * (p->hi - p->lo));
	case DLT_PARAM_LOGUNIFORM:
		u = unit(r);
		return assign(p->key, "%.6g", exp(log(p->lo) + u * (log(p->hi) - log(p->lo))));
	default:
		u = unit(r);
		if (p->log)
			x = floor(exp(log(p->lo) + u * (log(p->hi + 1) - log(p->lo))));
		else
			x = floor(p->lo + u * (p->hi - p->lo + 1));
		if (x > p->hi)
			x = p->hi;
		if (x < p->lo)
			x = p->lo;
		return assign(p->key, "%lld", (long long)x);
	}
}

int dlt_search_trial(const dlt_search *s, long long i, char ***ov, size_t *n)
{
	char **v = dlt_calloc(s->nparams ? s->nparams : 1, sizeof(*v));
	long long rest = i;
	dlt_rng r;

	*ov = NULL;
	*n = 0;
	if (!v)
		return DLT_ENOMEM;
	dlt_rng_init(&r, (uint64_t)s->seed, (uint64_t)i);
	for (size_t j = s->nparams; j-- > 0;) {
		const dlt_search_param *p = &s->params[j];
		if (s->method == DLT_SEARCH_GRID) {
			long long k = grid_size(p);
			v[j] = grid_value(p, rest % k);
			rest /= k;
		}
		if (s->method == DLT_SEARCH_GRID && !v[j])
			goto nomem;
	}
	/* random draws go in file order, so adding a param at the end keeps
	 * the values of the ones before it */
	for (size_t j = 0; s->method != DLT_SEARCH_GRID && j < s->nparams; j++)
		if (!(v[j] = random_value(&s->params[j], &r)))
			goto nomem;
	*ov = v;
	*n = s->nparams;
	return 0;
nomem:
	dlt_search_free_overrides(v, s->nparams);
	return DLT_ENOMEM;
}

void dlt_search_free_overrides(char **ov, size_t n)
{
	for (size_t i = 0; ov && i < n; i++)
		free(ov[i]);
	free(ov);
}

/* Loads the base config with extra and then ov. */
static int try_config(const dlt_search *s, char *const *extra, size_t nextra, char *const *ov,
		      size_t n)
{
	char **all = dlt_calloc(nextra + n + 1, sizeof(*all));
	dlt_config c;
	int rc;

	if (!all)
		return DLT_ENOMEM;
	/* memcpy from NULL is undefined even for 0 bytes */
	if (nextra)
		memcpy(all, extra, nextra * sizeof(*all));
	if (n)
		memcpy(all + nextra, ov, n * sizeof(*all));
	rc = dlt_config_load(&c, s->base, all, (int)(nextra + n));
	dlt_config_free(&c);
	free(all);
	return rc;
}

int dlt_search_check(const dlt_search *s, char *const *extra, size_t nextra)
{
	long long count = dlt_search_count(s);
	int rc;

	if ((rc = try_config(s, extra, nextra, NULL, 0)) < 0)
		return dlt_error_prefix(rc, "%s:%d: base", s->path, s->base_line);
	/* each value alone first, so the message names the param's line */
	for (size_t i = 0; i < s->nparams; i++) {
		const dlt_search_param *p = &s->params[i];
		size_t nv = p->kind == DLT_PARAM_CHOICE ? p->nchoices : 2;
		for (size_t j = 0; j < nv; j++) {
			char *a = p->kind == DLT_PARAM_CHOICE ? assign(p->key, "%s", p->choices[j])
				: p->kind == DLT_PARAM_INT
				? assign(p->key, "%lld", (long long)(j ? p->hi : p->lo))
				: assign(p->key, "%.6g", j ? p->hi : p->lo);
			if (!a)
				return DLT_ENOMEM;
			rc = try_config(s, extra, nextra, &a, 1);
			free(a);
			if (rc < 0)
				return dlt_error_prefix(rc, "%s:%d: %s", s->path, p->line, p->key);
		}
	}
	for (long long t = 0; t < count; t++) {
		char **ov;
		size_t n;
		DLT_TRY_RC(dlt_search_trial(s, t, &ov, &n));
		rc = try_config(s, extra, nextra, ov, n);
		dlt_search_free_overrides(ov, n);
		if (rc < 0)
			return dlt_error_prefix(rc, "%s: trial %lld", s->path, t);
	}
	return 0;
}
