/* config: the resolved config as YAML, which loads back to the same struct.
 *
 * Numbers are printed in the shortest form that reads back to the same bits
 * (0.001, not 0.0010000000000000000208), so the file stays readable and the
 * round trip stays exact. */
#include "config/config.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

struct out {
	dlt_buf *buf;
	int rc;			/* the first error; later writes are skipped */
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
	char s[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(s, sizeof(s), fmt, ap);
	va_end(ap);
	if (o->rc < 0)
		return;
	if (n < 0 || (size_t)n >= sizeof(s))	/* only short pieces come here */
		o->rc = dlt_error(DLT_EFAIL, "config: line too long to write");
	else if (dlt_buf_append(o->buf, s, (size_t)n) < 0)
		o->rc = DLT_ENOMEM;
}

static const char *f64(char *s, size_t size, double v)
{
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(s, size, "%.*g", prec, v);
		if (strtod(s, NULL) == v)
			break;
	}
	return s;
}

static const char *f32(char *s, size_t size, float v)
{
	for (int prec = 1; prec <= 9; prec++) {
		snprintf(s, size, "%.*g", prec, v);
		if ((float)strtod(s, NULL) == v)
			break;
	}
	return s;
}

/* Plain when YAML cannot read it as anything else (no indicator, no null
 * word), double-quoted with escapes otherwise. */
static int plain_ok(const char *s)
{
	static const char word[] = "abcdefghijklmnopqrstuvwxyz"
				   "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./";

	if (!s[0] || !strchr(word, s[0]))
		return 0;
	if (!strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL"))
		return 0;
	for (; *s; s++)
		if (!strchr(word, *s) && *s != '-' && *s != '+')
			return 0;
	return 1;
}

static void str(struct out *o, const char *s)
{
	if (plain_ok(s)) {
		if (o->rc >= 0 && dlt_buf_append(o->buf, s, strlen(s)) < 0)
			o->rc = DLT_ENOMEM;
		return;
	}
	put(o, "\"");
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			put(o, "\\%c", ch);
		else if (ch < 0x20 || ch == 0x7f)
			put(o, "\\x%02x", ch);
		else
			put(o, "%c", ch);
	}
	put(o, "\"");
}

/* A hand-built config may lack a path; null keeps the output YAML. */
static void str_or_null(struct out *o, const char *s)
{
	if (s)
		str(o, s);
	else
		put(o, "null");
}

static const char *bool_text(int v)
{
	return v ? "true" : "false";
}

/* A path, or a flow list of several: one path writes what it always did,
 * so the config in a checkpoint of an older run keeps its bytes. */
static void paths(struct out *o, const char *first, char *const *v, int n)
{
	if (n < 2) {
		str_or_null(o, first);
		return;
	}
	put(o, "[");
	for (int i = 0; i < n; i++) {
		put(o, i ? ", " : "");
		str(o, v[i]);
	}
	put(o, "]");
}

static void data(struct out *o, const dlt_config *c)
{
	char s[32];

	put(o, "data:\n  train: ");
	paths(o, c->data.train, c->data.train_paths, c->data.n_train_paths);
	put(o, "\n  test: ");
	paths(o, c->data.test, c->data.test_paths, c->data.n_test_paths);
	if (c->data.val) {	/* only when set: older configs keep their bytes */
		put(o, "\n  val: ");
		str_or_null(o, c->data.val);
	}
	put(o, "\n  val_split: %s\n", f64(s, sizeof(s), c->data.val_split));
	put(o, "  augment: {crop: %d, flip: %s}\n", c->data.augment.crop,
	    bool_text(c->data.augment.flip));
}

/* ", key: 3" or ", key: [3, 5]"; first omits the comma. */
static void pair(struct out *o, const char *key, const int v[2], int first)
{
	put(o, "%s%s: ", first ? "" : ", ", key);
	if (v[0] == v[1])
		put(o, "%d", v[0]);
	else
		put(o, "[%d, %d]", v[0], v[1]);
}

static void layers(struct out *o, const dlt_layer_cfg *l, int n, int indent);

/* Residual blocks nest, so each line starts at indent; the options of a
 * layer are a flow mapping on its line. */
static void layer(struct out *o, const dlt_layer_cfg *l, int indent)
{
	static const char *const names[] = {
		[DLT_LAYER_DENSE] = "dense", [DLT_LAYER_RELU] = "relu",
		[DLT_LAYER_LEAKY_RELU] = "leaky_relu", [DLT_LAYER_GELU] = "gelu",
		[DLT_LAYER_TANH] = "tanh", [DLT_LAYER_SIGMOID] = "sigmoid",
		[DLT_LAYER_DROPOUT] = "dropout", [DLT_LAYER_FLATTEN] = "flatten",
		[DLT_LAYER_CONV2D] = "conv2d", [DLT_LAYER_MAXPOOL] = "maxpool",
		[DLT_LAYER_AVGPOOL] = "avgpool", [DLT_LAYER_GLOBAL_AVGPOOL] = "global_avgpool",
		[DLT_LAYER_BATCHNORM] = "batchnorm", [DLT_LAYER_RESIDUAL] = "residual",
		[DLT_LAYER_EMBEDDING] = "embedding", [DLT_LAYER_POSITIONAL] = "positional",
		[DLT_LAYER_LAYERNORM] = "layernorm", [DLT_LAYER_ATTENTION] = "attention",
	};
	char s[32], t[32], e[48];
	/* the options' closing brace, after the name when there is one */
	const char *end = "}";

	put(o, "%*s- %s", indent, "", names[l->kind]);
	if (l->name[0]) {
		snprintf(e, sizeof(e), ", name: %s}", l->name);
		end = e;
	}
	switch (l->kind) {
	case DLT_LAYER_DENSE:
		if (l->tie[0])
			put(o, ": {tie: %s, bias: %s%s", l->tie, bool_text(l->bias), end);
		else
			put(o, ": {units: %d, bias: %s%s", l->units, bool_text(l->bias), end);
		break;
	case DLT_LAYER_GELU:
		if (l->tanh)
			put(o, ": {approximate: tanh%s", end);
		else if (l->name[0])
			put(o, ": {name: %s}", l->name);
		break;
	case DLT_LAYER_EMBEDDING:
		put(o, ": {vocab: %d, dim: %d%s", l->vocab, l->dim, end);
		break;
	case DLT_LAYER_POSITIONAL:
		put(o, ": {max: %d%s", l->max, end);
		break;
	case DLT_LAYER_LAYERNORM:
		put(o, ": {eps: %s%s", f32(s, sizeof(s), l->eps), end);
		break;
	case DLT_LAYER_ATTENTION:
		put(o, ": {heads: %d, causal: %s, dropout: %s%s", l->heads, bool_text(l->causal),
		    f32(s, sizeof(s), l->rate), end);
		break;
	case DLT_LAYER_LEAKY_RELU:
		put(o, ": {slope: %s%s", f32(s, sizeof(s), l->slope), end);
		break;
	case DLT_LAYER_DROPOUT:
		put(o, ": {rate: %s%s", f32(s, sizeof(s), l->rate), end);
		break;
	case DLT_LAYER_CONV2D:
		put(o, ": {filters: %d, ", l->filters);
		pair(o, "kernel", l->kernel, 1);
		pair(o, "stride", l->stride, 0);
		pair(o, "pad", l->pad, 0);
		pair(o, "dilation", l->dilation, 0);
		put(o, ", groups: %d, bias: %s%s", l->groups, bool_text(l->bias), end);
		break;
	case DLT_LAYER_MAXPOOL:
	case DLT_LAYER_AVGPOOL:
		put(o, ": {");
		pair(o, "kernel", l->kernel, 1);
		pair(o, "stride", l->stride, 0);
		pair(o, "pad", l->pad, 0);
		put(o, "%s", end);
		break;
	case DLT_LAYER_BATCHNORM:
		put(o, ": {momentum: %s, eps: %s%s", f32(s, sizeof(s), l->momentum),
		    f32(t, sizeof(t), l->eps), end);
		break;
	case DLT_LAYER_RESIDUAL:
		put(o, ":\n%*slayers:\n", indent + 4, "");
		if (l->name[0])
			put(o, "%*sname: %s\n", indent + 4, "", l->name);
		layers(o, l->body, l->n_body, indent + 6);
		put(o, "%*sshortcut:%s", indent + 4, "", l->n_shortcut ? "\n" : " []\n");
		layers(o, l->shortcut, l->n_shortcut, indent + 6);
		return;
	default:	/* relu, tanh, ...: options only for a name */
		if (l->name[0])
			put(o, ": {name: %s}", l->name);
	}
	put(o, "\n");
}

static void layers(struct out *o, const dlt_layer_cfg *l, int n, int indent)
{
	for (int i = 0; i < n; i++)
		layer(o, &l[i], indent);
}

static void optim(struct out *o, const dlt_optim_cfg *p)
{
	char lr[32], a[32], b[32], c[32], wd[32];

	f64(lr, sizeof(lr), p->lr);
	f64(wd, sizeof(wd), p->weight_decay);
	if (p->kind == DLT_OPT_SGD) {
		put(o, "  optimizer:\n    sgd: {lr: %s, momentum: %s, nesterov: %s, "
		    "weight_decay: %s}\n", lr, f64(a, sizeof(a), p->momentum),
		    bool_text(p->nesterov), wd);
		return;
	}
	put(o, "  optimizer:\n    %s: {lr: %s, beta1: %s, beta2: %s, eps: %s, weight_decay: %s%s}\n",
	    p->kind == DLT_OPT_ADAMW ? "adamw" : "adam", lr, f64(a, sizeof(a), p->beta1),
	    f64(b, sizeof(b), p->beta2), f64(c, sizeof(c), p->eps), wd,
	    p->decay_matrices ? ", decay: matrices" : "");
}

static void sched(struct out *o, const dlt_sched_cfg *p)
{
	char s[32];

	put(o, "  schedule:\n");
	if (p->kind == DLT_SCHED_STEP)
		put(o, "    step: {every: %d, gamma: %s, warmup: %d}\n", p->step_every,
		    f64(s, sizeof(s), p->gamma), p->warmup);
	else if (p->kind == DLT_SCHED_COSINE)
		put(o, "    cosine: {warmup: %d, min_lr: %s}\n", p->warmup,
		    f64(s, sizeof(s), p->min_lr));
	else
		put(o, "    constant: {warmup: %d}\n", p->warmup);
}

/* Without best, mode is null: mode alone is an error. */
static void ckpt(struct out *o, const dlt_config *c)
{
	put(o, "checkpoint:\n  every: ");
	if (c->ckpt.every == DLT_CKPT_STEPS)
		put(o, "%lld steps", c->ckpt.every_n);
	else if (c->ckpt.every == DLT_CKPT_SECONDS)
		put(o, "%lld seconds", c->ckpt.every_n);
	else
		put(o, "epoch");
	put(o, "\n  keep: %d\n  best: ", c->ckpt.keep);
	str_or_null(o, c->ckpt.best);
	put(o, "\n  mode: %s\n", c->ckpt.best ? (c->ckpt.best_max ? "max" : "min") : "null");
}

int dlt_config_write_yaml(const dlt_config *c, dlt_buf *buf)
{
	struct out o = { .buf = buf };
	char s[32];

	data(&o, c);
	put(&o, "model:\n");
	layers(&o, c->layers, c->n_layers, 2);
	put(&o, "train:\n  epochs: %d\n  batch: %d\n  seed: %lld\n  threads: %d\n"
	    "  log_every: %d\n  precision: ", c->train.epochs, c->train.batch, c->train.seed,
	    c->train.threads, c->train.log_every);
	str(&o, c->train.precision);
	put(&o, "\n");
	if (c->train.storage)
		put(&o, "  storage: %d\n", c->train.storage);
	if (!strcmp(c->train.precision, "fp16"))
		put(&o, "  loss_scale: {init: %s, growth_interval: %d}\n",
		    f64(s, sizeof(s), c->train.loss_scale.init), c->train.loss_scale.growth_interval);
	optim(&o, &c->train.optim);
	sched(&o, &c->train.sched);
	/* the language-model keys only when set, so that other configs keep
	 * the bytes they had */
	if (c->train.steps)
		put(&o, "  steps: %lld\n", c->train.steps);
	if (c->train.context)
		put(&o, "  context: %d\n", c->train.context);
	if (c->train.eval_every)
		put(&o, "  eval_every: %lld\n", c->train.eval_every);
	if (c->train.eval_batches != 20)
		put(&o, "  eval_batches: %d\n", c->train.eval_batches);
	if (c->train.clip > 0)
		put(&o, "  clip: %s\n", f64(s, sizeof(s), c->train.clip));
	if (c->train.accumulate > 1)
		put(&o, "  accumulate: %d\n", c->train.accumulate);
	if (c->train.init_gpt2)
		put(&o, "  init: gpt2\n");
	/* only when set: a config without it resolves to the task's loss */
	if (c->train.loss && !strcmp(dlt_loss_names[c->train.loss - 1], "huber"))
		put(&o, "  loss: {huber: {delta: %s}}\n", f64(s, sizeof(s), c->train.huber_delta));
	else if (c->train.loss)
		put(&o, "  loss: %s\n", dlt_loss_names[c->train.loss - 1]);
	ckpt(&o, c);
	/* seconds and megabytes: %g's six digits are all they need */
	put(&o, "dist:\n  timeout: %g\n  bucket_mb: %g\n", c->dist.timeout, c->dist.bucket_mb);
	/* only when set: a config without it keeps its bytes, and zero: 0
	 * (the sums in rank order) stays itself in a resumed run */
	if (c->dist.zero >= 0)
		put(&o, "  zero: %d\n", c->dist.zero);
	if (c->dist.pipe.stages) {
		put(&o, "  pipeline: {stages: %d, microbatches: %d, schedule: %s",
		    c->dist.pipe.stages, c->dist.pipe.micro,
		    c->dist.pipe.schedule == DLT_PIPE_GPIPE ? "gpipe" : "1f1b");
		for (int i = 0; i < c->dist.pipe.n_split; i++)
			put(&o, "%s%d", i ? ", " : ", split: [", c->dist.pipe.split[i]);
		put(&o, "%s}\n", c->dist.pipe.n_split ? "]" : "");
	}
	if (c->device >= 0)
		put(&o, "device: cuda:%d\n", c->device);
	else
		put(&o, "device: cpu\n");
	return o.rc;
}
