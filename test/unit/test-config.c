/* config: YAML to dlt_config, -s overrides, errors with file:line, round trip. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "tap.h"

#define BASE "data: {train: t.dlt}\nmodel: [relu]\n"

static dlt_config cfg;

/* Loads text as "cnn.yaml" with the overrides that follow it (NULL ends). */
static int load(const char *text, ...)
{
	char *ov[16];
	int n = 0;
	va_list ap;

	va_start(ap, text);
	while (n < 16 && (ov[n] = va_arg(ap, char *)))
		n++;
	va_end(ap);
	dlt_config_free(&cfg);
	return dlt_config_load_string(&cfg, text, strlen(text), "cnn.yaml", ov, n);
}

/* ok when the last message is exactly want. */
static void is_msg(const char *want)
{
	if (!ok(!strcmp(dlt_errmsg(), want), "message: %s", want))
		diag("got '%s'", dlt_errmsg());
}

static void fails(const char *text, const char *want)
{
	ok_rc(load(text, NULL), DLT_EINPUT, "refused: %s", want);
	is_msg(want);
}

static void fails_s(const char *text, char *override, const char *want)
{
	ok_rc(load(text, override, NULL), DLT_EINPUT, "refused: %s", want);
	is_msg(want);
}

static const char example[] =
	"# an MLP\n"
	"data: {train: fmnist-train.dlt, test: fmnist-test.dlt, val_split: 0.1}\n"
	"model:\n"
	"  - dense: 256\n"
	"  - relu\n"
	"  - leaky_relu\n"
	"  - gelu\n"
	"  - tanh\n"
	"  - sigmoid\n"
	"  - dropout: 0.2\n"
	"  - flatten\n"
	"  - dense: {units: 10, bias: false}\n"
	"train:\n"
	"  epochs: 10\n"
	"  batch: 128\n"
	"  seed: 7\n"
	"  threads: 4\n"
	"  log_every: 50\n"
	"  precision: fp32\n"
	"  optimizer: {adamw: {lr: 3e-4, beta1: 0.8, beta2: 0.99, eps: 1e-7, weight_decay: 0.05}}\n"
	"  schedule: {step: {every: 2, gamma: 0.5, warmup: 100}}\n";

static void test_example(void)
{
	static const int kinds[] = {
		DLT_LAYER_DENSE, DLT_LAYER_RELU, DLT_LAYER_LEAKY_RELU, DLT_LAYER_GELU,
		DLT_LAYER_TANH, DLT_LAYER_SIGMOID, DLT_LAYER_DROPOUT, DLT_LAYER_FLATTEN,
		DLT_LAYER_DENSE,
	};
	int kinds_ok = 1, lines_ok = 1;

	ok_rc(load(example, NULL), 0, "the example loads");
	ok(!strcmp(cfg.path, "cnn.yaml"), "path is the name");
	ok(!strcmp(cfg.data.train, "fmnist-train.dlt") && !strcmp(cfg.data.test, "fmnist-test.dlt"),
	   "data paths");
	ok(cfg.data.val_split == 0.1, "val_split 0.1");
	ok(cfg.n_layers == 9 && cfg.model_line == 3, "9 layers, model on line 3");
	for (int i = 0; i < 9 && cfg.n_layers == 9; i++) {
		kinds_ok &= cfg.layers[i].kind == kinds[i];
		lines_ok &= cfg.layers[i].line == 4 + i;
	}
	ok(kinds_ok, "layer kinds in order");
	ok(lines_ok, "layer lines");
	ok(cfg.layers[0].units == 256 && cfg.layers[0].bias == 1, "dense: 256 has bias");
	ok(cfg.layers[8].units == 10 && cfg.layers[8].bias == 0, "dense {units: 10, bias: false}");
	ok(cfg.layers[2].slope == 0.01f, "leaky_relu slope defaults to 0.01");
	ok(cfg.layers[6].rate == 0.2f, "dropout rate 0.2");
	ok(cfg.train.epochs == 10 && cfg.train.batch == 128 && cfg.train.seed == 7 &&
	   cfg.train.threads == 4 && cfg.train.log_every == 50, "train integers");
	ok(!strcmp(cfg.train.precision, "fp32"), "precision fp32");
	ok(cfg.train.optim.kind == DLT_OPT_ADAMW && cfg.train.optim.lr == 3e-4 &&
	   cfg.train.optim.beta1 == 0.8 && cfg.train.optim.beta2 == 0.99 &&
	   cfg.train.optim.eps == 1e-7 && cfg.train.optim.weight_decay == 0.05, "adamw settings");
	ok(cfg.train.sched.kind == DLT_SCHED_STEP && cfg.train.sched.step_every == 2 &&
	   cfg.train.sched.gamma == 0.5 && cfg.train.sched.warmup == 100, "step schedule");
}

static void test_defaults(void)
{
	const dlt_optim_cfg *o = &cfg.train.optim;
	const dlt_sched_cfg *s = &cfg.train.sched;

	ok_rc(load(BASE, NULL), 0, "a minimal config loads");
	ok(cfg.data.test == NULL && cfg.data.val_split == 0, "no test set, no validation split");
	ok(cfg.train.epochs == 1 && cfg.train.batch == 32 && cfg.train.seed == 0 &&
	   cfg.train.threads == 0 && cfg.train.log_every == 100, "train defaults");
	ok(!strcmp(cfg.train.precision, "fp32"), "precision defaults to fp32");
	ok(o->kind == DLT_OPT_ADAM && o->lr == 1e-3 && o->beta1 == 0.9 && o->beta2 == 0.999 &&
	   o->eps == 1e-8 && o->weight_decay == 0, "adam with its defaults");
	ok(s->kind == DLT_SCHED_CONSTANT && s->warmup == 0, "constant schedule, no warmup");
	ok_rc(load("data:\n  train: t.dlt\n  test:\nmodel: [relu]\ntrain:\n", NULL), 0,
	      "null values are defaults");
	ok(cfg.data.test == NULL && cfg.train.batch == 32, "null test, null train");
	ok_rc(load("data: {train: '123', test: \"a b.dlt\"}\nmodel: [relu]\n", NULL), 0,
	      "quoted paths");
	ok(!strcmp(cfg.data.train, "123") && !strcmp(cfg.data.test, "a b.dlt"), "paths as written");
	ok_rc(load("data: {train: t.dlt}\nmodel: [relu]\ntrain: {batch: 1e3, seed: 9007199254740993}\n",
		   NULL), 0, "integers written as floats, seeds past 2^53");
	ok(cfg.train.batch == 1000 && cfg.train.seed == 9007199254740993LL, "1e3 and a big seed");
	ok_rc(load(BASE "train: {seed: 1e17}\n", NULL), 0, "a seed of 1e17");
	ok(cfg.train.seed == 100000000000000000LL, "is exact");
}

static void test_layers(void)
{
	ok_rc(load("data: {train: t.dlt}\nmodel:\n"
		   "  - dense: {units: 3}\n"
		   "  - leaky_relu: 0.2\n"
		   "  - leaky_relu: {slope: 0.3}\n"
		   "  - dropout: {rate: 0.5}\n"
		   "  - relu: {}\n"
		   "  - gelu: ~\n"
		   "  - {tanh: }\n"
		   "  - sigmoid\n"
		   "  - flatten\n"
		   "  - dense: {bias: no, units: 1}\n", NULL), 0, "layers in both syntaxes");
	ok(cfg.n_layers == 10, "10 layers");
	if (cfg.n_layers != 10)
		return;
	ok(cfg.layers[0].kind == DLT_LAYER_DENSE && cfg.layers[0].units == 3 && cfg.layers[0].bias,
	   "dense {units: 3}");
	ok(cfg.layers[1].kind == DLT_LAYER_LEAKY_RELU && cfg.layers[1].slope == 0.2f,
	   "leaky_relu: 0.2");
	ok(cfg.layers[2].slope == 0.3f, "leaky_relu {slope: 0.3}");
	ok(cfg.layers[3].kind == DLT_LAYER_DROPOUT && cfg.layers[3].rate == 0.5f,
	   "dropout {rate: 0.5}");
	ok(cfg.layers[4].kind == DLT_LAYER_RELU && cfg.layers[5].kind == DLT_LAYER_GELU &&
	   cfg.layers[6].kind == DLT_LAYER_TANH && cfg.layers[7].kind == DLT_LAYER_SIGMOID &&
	   cfg.layers[8].kind == DLT_LAYER_FLATTEN, "empty options are no options");
	ok(cfg.layers[9].bias == 0 && cfg.layers[9].units == 1, "bias: no");
	ok(cfg.layers[0].line == 3 && cfg.layers[9].line == 12, "layer lines");
	ok_rc(load("data: {train: t.dlt}\nmodel: [{dense: 4}, relu, {dropout: 0}]\n", NULL), 0,
	      "a flow sequence of layers");
	ok(cfg.n_layers == 3 && cfg.layers[2].rate == 0 && cfg.layers[0].line == 2, "flow layers");
}

static void test_optimizers(void)
{
	const dlt_optim_cfg *o = &cfg.train.optim;

	ok_rc(load(BASE "train: {optimizer: adam}\n", NULL), 0, "optimizer: adam");
	ok(o->kind == DLT_OPT_ADAM && o->lr == 1e-3 && o->weight_decay == 0, "adam defaults");
	ok_rc(load(BASE "train: {optimizer: {adam: {lr: 0.1, beta1: 0, beta2: 0.5, eps: 1e-6, "
		   "weight_decay: 1e-4}}}\n", NULL), 0, "adam with every key");
	ok(o->lr == 0.1 && o->beta1 == 0 && o->beta2 == 0.5 && o->eps == 1e-6 &&
	   o->weight_decay == 1e-4, "adam values");
	ok_rc(load(BASE "train: {optimizer: adamw}\n", NULL), 0, "optimizer: adamw");
	ok(o->kind == DLT_OPT_ADAMW && o->lr == 1e-3 && o->weight_decay == 1e-2 && o->beta1 == 0.9,
	   "adamw defaults: weight decay 1e-2");
	ok_rc(load(BASE "train: {optimizer: {adamw: {lr: 2e-3}}}\n", NULL), 0, "adamw {lr}");
	ok(o->lr == 2e-3 && o->weight_decay == 1e-2, "adamw keeps its weight decay default");
	ok_rc(load(BASE "train: {optimizer: sgd}\n", NULL), 0, "optimizer: sgd");
	ok(o->kind == DLT_OPT_SGD && o->lr == 0.01 && o->momentum == 0 && !o->nesterov &&
	   o->weight_decay == 0, "sgd defaults");
	ok_rc(load(BASE "train:\n  optimizer:\n    sgd:\n      lr: 0.5\n      momentum: 0.9\n"
		   "      nesterov: true\n      weight_decay: 5e-4\n", NULL), 0, "sgd with every key");
	ok(o->lr == 0.5 && o->momentum == 0.9 && o->nesterov && o->weight_decay == 5e-4,
	   "sgd values");
	ok_rc(load(BASE "train: {optimizer: {sgd: }}\n", NULL), 0, "an optimizer with null options");
	ok(o->kind == DLT_OPT_SGD, "sgd");
}

static void test_schedules(void)
{
	const dlt_sched_cfg *s = &cfg.train.sched;

	ok_rc(load(BASE "train: {schedule: constant}\n", NULL), 0, "schedule: constant");
	ok(s->kind == DLT_SCHED_CONSTANT && s->warmup == 0, "constant");
	ok_rc(load(BASE "train: {schedule: {constant: {warmup: 50}}}\n", NULL), 0,
	      "constant with warmup");
	ok(s->warmup == 50, "warmup 50");
	ok_rc(load(BASE "train: {schedule: step}\n", NULL), 0, "schedule: step");
	ok(s->kind == DLT_SCHED_STEP && s->step_every == 1 && s->gamma == 0.1 && s->warmup == 0,
	   "step defaults");
	ok_rc(load(BASE "train: {schedule: {step: {every: 3, gamma: 1, warmup: 7}}}\n", NULL), 0,
	      "step with every key");
	ok(s->step_every == 3 && s->gamma == 1 && s->warmup == 7, "step values");
	ok_rc(load(BASE "train: {schedule: cosine}\n", NULL), 0, "schedule: cosine");
	ok(s->kind == DLT_SCHED_COSINE && s->min_lr == 0 && s->warmup == 0, "cosine defaults");
	ok_rc(load(BASE "train: {schedule: {cosine: {warmup: 100, min_lr: 1e-5}}}\n", NULL), 0,
	      "cosine with every key");
	ok(s->warmup == 100 && s->min_lr == 1e-5, "cosine values");
}

static void test_value_errors(void)
{
	fails("data: {train: t.dlt}\nmodel:\n  - relu\n  - convv\n",
	      "cnn.yaml:4: unknown layer 'convv'");
	fails("data: {train: t.dlt}\nmodel:\n  - rellu\n",
	      "cnn.yaml:3: unknown layer 'rellu' (did you mean 'relu'?)");
	fails("data: {train: t.dlt}\nmodel:\n  - {convv: 3}\n", "cnn.yaml:3: unknown layer 'convv'");
	fails(BASE "train:\n  epoch: 3\n",
	      "cnn.yaml:4: unknown key 'epoch' in train (did you mean 'epochs'?)");
	fails(BASE "checkpoint: {every: epoch}\n", "cnn.yaml:3: unknown key 'checkpoint'");
	fails(BASE "train:\n  batch: abc\n", "cnn.yaml:4: train.batch: expected an integer, got 'abc'");
	fails(BASE "train:\n  batch: 0\n", "cnn.yaml:4: train.batch: must be >= 1, got 0");
	fails(BASE "train:\n  batch: 1.5\n", "cnn.yaml:4: train.batch: expected an integer, got '1.5'");
	fails(BASE "train:\n  batch: '32'\n",
	      "cnn.yaml:4: train.batch: expected an integer, got the string '32'");
	fails(BASE "train:\n  batch: [1]\n",
	      "cnn.yaml:4: train.batch: expected an integer, got a sequence");
	fails(BASE "train:\n  batch: 99999999999\n",
	      "cnn.yaml:4: train.batch: must be <= 2147483647, got 99999999999");
	fails(BASE "train: {batch: 1e30}\n", "cnn.yaml:3: train.batch: must be <= 2147483647, got 1e30");
	fails(BASE "train: {seed: 1e19}\n",
	      "cnn.yaml:3: train.seed: must be <= 9223372036854775807, got 1e19");
	fails(BASE "train: {seed: -1e300}\n", "cnn.yaml:3: train.seed: must be >= 0, got -1e300");
	fails(BASE "train: {epochs: 0}\n", "cnn.yaml:3: train.epochs: must be >= 1, got 0");
	fails(BASE "train: {seed: -1}\n", "cnn.yaml:3: train.seed: must be >= 0, got -1");
	fails(BASE "train: {threads: -2}\n", "cnn.yaml:3: train.threads: must be >= 0, got -2");
	fails(BASE "train: {log_every: 0}\n", "cnn.yaml:3: train.log_every: must be >= 1, got 0");
	fails(BASE "train: 3\n", "cnn.yaml:3: train: expected a mapping, got '3'");
	fails(BASE "train:\n  precision: bf16\n",
	      "cnn.yaml:4: train.precision: 'bf16' is not supported yet (fp32)");
	fails(BASE "train:\n  precision: fp64\n",
	      "cnn.yaml:4: train.precision: unknown precision 'fp64' (fp32)");
	fails("model: [relu]\ndata:\n  test: x.dlt\n", "cnn.yaml:2: data.train is required");
	fails("model: [relu]\n", "cnn.yaml:1: data.train is required");
	fails("data: {train: ''}\nmodel: [relu]\n", "cnn.yaml:1: data.train: must not be empty");
	fails("data: {train: {a: b}}\nmodel: [relu]\n",
	      "cnn.yaml:1: data.train: expected a path, got a mapping");
	fails("data: {train: t, val_split: 1}\nmodel: [relu]\n",
	      "cnn.yaml:1: data.val_split: must be in [0, 1), got 1");
	fails("data: {train: t, val_split: nan}\nmodel: [relu]\n",
	      "cnn.yaml:1: data.val_split: expected a number, got 'nan'");
	fails("data: {train: t, tset: x}\nmodel: [relu]\n",
	      "cnn.yaml:1: unknown key 'tset' in data (did you mean 'test'?)");
}

static void test_model_errors(void)
{
	fails("data: {train: t}\n", "cnn.yaml:1: model is required");
	fails("data: {train: t}\nmodel:\n", "cnn.yaml:2: model is required");
	fails("data: {train: t}\nmodel: []\n", "cnn.yaml:2: model: must have at least one layer");
	fails("data: {train: t}\nmodel: relu\n",
	      "cnn.yaml:2: model: expected a sequence of layers, got 'relu'");
	fails("data: {train: t}\nmodel:\n  - dense\n",
	      "cnn.yaml:3: model.0.dense: units is required (dense: N or dense: {units: N})");
	fails("data: {train: t}\nmodel:\n  - dense: {bias: true}\n",
	      "cnn.yaml:3: model.0.dense: units is required (dense: N or dense: {units: N})");
	fails("data: {train: t}\nmodel:\n  - dense: 0\n", "cnn.yaml:3: model.0.dense: must be >= 1, got 0");
	fails("data: {train: t}\nmodel:\n  - relu\n  - dense: {units: 0}\n",
	      "cnn.yaml:4: model.1.dense.units: must be >= 1, got 0");
	fails("data: {train: t}\nmodel:\n  - dense: {units: 2, bias: maybe}\n",
	      "cnn.yaml:3: model.0.dense.bias: expected true or false, got 'maybe'");
	fails("data: {train: t}\nmodel:\n  - dense: {units: 2, unit: 3}\n",
	      "cnn.yaml:3: unknown key 'unit' in model.0.dense (did you mean 'units'?)");
	fails("data: {train: t}\nmodel:\n  - dropout\n",
	      "cnn.yaml:3: model.0.dropout: rate is required (dropout: N or dropout: {rate: N})");
	fails("data: {train: t}\nmodel:\n  - dropout: 1\n",
	      "cnn.yaml:3: model.0.dropout: must be in [0, 1), got 1");
	fails("data: {train: t}\nmodel:\n  - dropout: 0.99999999999\n",
	      "cnn.yaml:3: model.0.dropout: must be in [0, 1), got 0.99999999999");
	fails("data: {train: t}\nmodel:\n  - dropout: -0.1\n",
	      "cnn.yaml:3: model.0.dropout: must be in [0, 1), got -0.1");
	fails("data: {train: t}\nmodel:\n  - relu: 3\n",
	      "cnn.yaml:3: model.0.relu: takes no options, got '3'");
	fails("data: {train: t}\nmodel:\n  - relu: {slope: 3}\n",
	      "cnn.yaml:3: unknown key 'slope' in model.0.relu");
	fails("data: {train: t}\nmodel:\n  - {dense: 3, relu: }\n",
	      "cnn.yaml:3: model.0: expected one layer (one key), got 2 keys");
	fails("data: {train: t}\nmodel:\n  - [relu]\n",
	      "cnn.yaml:3: model.0: expected a layer name or {name: options}, got a sequence");
	fails("data: {train: t}\nmodel:\n  - leaky_relu: {slope: x}\n",
	      "cnn.yaml:3: model.0.leaky_relu.slope: expected a number, got 'x'");
}

static void test_optim_errors(void)
{
	fails(BASE "train:\n  optimizer: adm\n",
	      "cnn.yaml:4: unknown optimizer 'adm' (did you mean 'adam'?)");
	fails(BASE "train:\n  optimizer: {adam: {}, sgd: {}}\n",
	      "cnn.yaml:4: train.optimizer: expected one optimizer (one key), got 2 keys");
	fails(BASE "train:\n  optimizer: {adam: {momentum: 0.9}}\n",
	      "cnn.yaml:4: unknown key 'momentum' in train.optimizer.adam");
	fails(BASE "train:\n  optimizer: {adam: 3}\n",
	      "cnn.yaml:4: train.optimizer.adam: expected a mapping, got '3'");
	fails(BASE "train:\n  optimizer: {adam: {lr: 0}}\n",
	      "cnn.yaml:4: train.optimizer.adam.lr: must be > 0, got 0");
	fails(BASE "train:\n  optimizer: {adam: {lr: '0.1'}}\n",
	      "cnn.yaml:4: train.optimizer.adam.lr: expected a number, got the string '0.1'");
	fails(BASE "train:\n  optimizer: {adamw: {beta1: 1}}\n",
	      "cnn.yaml:4: train.optimizer.adamw.beta1: must be in [0, 1), got 1");
	fails(BASE "train:\n  optimizer: {adam: {beta2: -0.5}}\n",
	      "cnn.yaml:4: train.optimizer.adam.beta2: must be in [0, 1), got -0.5");
	fails(BASE "train:\n  optimizer: {adam: {eps: 0}}\n",
	      "cnn.yaml:4: train.optimizer.adam.eps: must be > 0, got 0");
	fails(BASE "train:\n  optimizer: {adam: {weight_decay: -1e-3}}\n",
	      "cnn.yaml:4: train.optimizer.adam.weight_decay: must be >= 0, got -1e-3");
	fails(BASE "train:\n  optimizer: {sgd: {momentum: 1}}\n",
	      "cnn.yaml:4: train.optimizer.sgd.momentum: must be in [0, 1), got 1");
	fails(BASE "train:\n  optimizer:\n    sgd:\n      nesterov: true\n",
	      "cnn.yaml:6: train.optimizer.sgd.nesterov: needs momentum > 0");
	fails(BASE "train:\n  optimizer: {sgd: {nesterov: 1}}\n",
	      "cnn.yaml:4: train.optimizer.sgd.nesterov: expected true or false, got '1'");
	fails(BASE "train:\n  schedule: linear\n", "cnn.yaml:4: unknown schedule 'linear'");
	fails(BASE "train:\n  schedule: {step: {every: 0}}\n",
	      "cnn.yaml:4: train.schedule.step.every: must be >= 1, got 0");
	fails(BASE "train:\n  schedule: {step: {gamma: 0}}\n",
	      "cnn.yaml:4: train.schedule.step.gamma: must be in (0, 1], got 0");
	fails(BASE "train:\n  schedule: {step: {gamma: 1.5}}\n",
	      "cnn.yaml:4: train.schedule.step.gamma: must be in (0, 1], got 1.5");
	fails(BASE "train:\n  schedule: {cosine: {min_lr: -1}}\n",
	      "cnn.yaml:4: train.schedule.cosine.min_lr: must be >= 0, got -1");
	fails(BASE "train:\n  schedule: {constant: {warmup: -1}}\n",
	      "cnn.yaml:4: train.schedule.constant.warmup: must be >= 0, got -1");
	fails(BASE "train:\n  schedule: {constant: {every: 2}}\n",
	      "cnn.yaml:4: unknown key 'every' in train.schedule.constant");
}

static void test_yaml_errors(void)
{
	char deep[400] = "data: {train: t}\nmodel: [relu]\nx: ";

	fails("data: {train: t.dlt\nmodel: [relu]\n",
	      "cnn.yaml:2: yaml: did not find expected ',' or '}'");
	fails("data:\n  train: t\n   bad: 1\n",
	      "cnn.yaml:3: yaml: mapping values are not allowed in this context");
	fails("data: {train: t}\nmodel: [relu]\nmodel: [gelu]\n", "cnn.yaml:3: duplicate key 'model'");
	fails("data: {train: t}\nmodel: [relu]\ntrain: {batch: 1, epochs: 2, batch: 3}\n",
	      "cnn.yaml:3: duplicate key 'batch'");
	fails("data: {train: &p t}\nmodel: [relu]\n",
	      "cnn.yaml:1: yaml anchors and aliases are not supported");
	fails("data: {train: t}\nmodel: [relu]\ntrain: {batch: *x}\n",
	      "cnn.yaml:3: yaml anchors and aliases are not supported");
	fails("data: {train: t}\nmodel: [relu]\ntrain: {batch: !!int 3}\n",
	      "cnn.yaml:3: yaml tag 'tag:yaml.org,2002:int' is not supported");
	fails("data: {train: t}\nmodel: [relu]\n? [a]\n: 1\n",
	      "cnn.yaml:3: mapping keys must be strings");
	fails("- a\n- b\n", "cnn.yaml:1: the document: expected a mapping, got a sequence");
	fails("hello\n", "cnn.yaml:1: the document: expected a mapping, got 'hello'");
	fails("", "cnn.yaml:1: data.train is required");
	fails("# nothing\n", "cnn.yaml:1: data.train is required");
	fails("data: {train: t}\nmodel: [relu]\n---\nx: 1\n", "cnn.yaml:3: yaml: more than one document");
	fails("data: {train: \"a\\0b\"}\nmodel: [relu]\n", "cnn.yaml:1: strings may not contain NUL");
	fails("data: {train: t}\nmodel: [relu]\n# \xff\n",
	      "cnn.yaml:3: yaml: invalid leading UTF-8 octet");
	for (int i = 0; i < 100; i++)
		strcat(deep, "[");
	fails(deep, "cnn.yaml:3: nested too deep (more than 64 levels)");
	ok_rc(load(BASE "train: {optimizer: {adam: {lr: !!str 0.1}}}\n", NULL), DLT_EINPUT,
	      "!!str makes a string");
	is_msg("cnn.yaml:3: train.optimizer.adam.lr: expected a number, got the string '0.1'");
}

static void test_big_map(void)
{
	dlt_buf b = { 0 };
	int rc = 0;

	for (int i = 0; i < 20000 && rc == 0; i++)
		rc = dlt_buf_printf(&b, "k%d: %d\n", i, i);
	if (rc == 0)
		rc = dlt_buf_printf(&b, "k17: 1\n");
	ok_rc(rc, 0, "a mapping of 20001 keys");
	rc = dlt_config_load_string(&cfg, b.data, b.len, "big.yaml", NULL, 0);
	ok_rc(rc, DLT_EINPUT, "its duplicate is found");
	is_msg("big.yaml:20001: duplicate key 'k17'");
	dlt_buf_free(&b);
}

static void test_overrides(void)
{
	ok_rc(load(example, "train.batch=64", "model.0.dense=64", "model.1=gelu",
		   "model.9={dropout: 0.5}", "data.val_split=0", "data.test=", NULL), 0,
	      "overrides: scalar, into a layer, replace a layer, append one, clear a key");
	ok(cfg.train.batch == 64, "train.batch=64");
	ok(cfg.layers[0].units == 64 && cfg.layers[0].line == 4, "model.0.dense=64 keeps the line");
	ok(cfg.layers[1].kind == DLT_LAYER_GELU && cfg.layers[1].line == 0, "model.1=gelu");
	ok(cfg.n_layers == 10 && cfg.layers[9].kind == DLT_LAYER_DROPOUT &&
	   cfg.layers[9].rate == 0.5f, "model.9 appends a layer");
	ok(cfg.data.val_split == 0 && cfg.data.test == NULL, "data overrides");

	ok_rc(load(BASE, "train.seed=5", "train.optimizer.sgd.momentum=0.9", NULL), 0,
	      "overrides add missing keys");
	ok(cfg.train.seed == 5 && cfg.train.optim.kind == DLT_OPT_SGD &&
	   cfg.train.optim.momentum == 0.9, "added train.seed and an sgd optimizer");

	ok_rc(load(example, "train.optimizer={sgd: {lr: 0.1, nesterov: true, momentum: 0.9}}",
		   NULL), 0, "a flow mapping replaces the optimizer");
	ok(cfg.train.optim.kind == DLT_OPT_SGD && cfg.train.optim.lr == 0.1 &&
	   cfg.train.optim.nesterov && cfg.train.optim.weight_decay == 0, "sgd from the override");

	ok_rc(load(BASE "train: {optimizer: adam, schedule: cosine}\n",
		   "train.optimizer.adam.lr=3e-4", "train.schedule.cosine.warmup=10", NULL), 0,
	      "a key through a bare name");
	ok(cfg.train.optim.kind == DLT_OPT_ADAM && cfg.train.optim.lr == 3e-4 &&
	   cfg.train.sched.warmup == 10, "adam.lr and cosine.warmup");
	ok_rc(load(BASE, "model.0=dense", "model.0.dense.units=5", NULL), 0,
	      "a later override goes into an earlier one");
	ok(cfg.layers[0].kind == DLT_LAYER_DENSE && cfg.layers[0].units == 5, "dense units 5");
	ok_rc(load(BASE, "data.train=a=b.dlt", NULL), 0, "the value is all after the first '='");
	ok(!strcmp(cfg.data.train, "a=b.dlt"), "a=b.dlt");

	fails_s(BASE, "train.batch=abc", "-s train.batch=abc: train.batch: expected an integer, got 'abc'");
	fails_s(BASE, "train.batch=0", "-s train.batch=0: train.batch: must be >= 1, got 0");
	fails_s(BASE, "train.epoch=3",
		"-s train.epoch=3: unknown key 'epoch' in train (did you mean 'epochs'?)");
	fails_s(BASE, "model.0=convv", "-s model.0=convv: unknown layer 'convv'");
	fails_s(BASE, "train.precision=bf16",
		"-s train.precision=bf16: train.precision: 'bf16' is not supported yet (fp32)");
	fails_s(BASE, "foo", "-s foo: expected key=value");
	fails_s(BASE, "=3", "-s =3: empty key");
	fails_s(BASE, "a..b=3", "-s a..b=3: empty part in key 'a..b'");
	fails_s(BASE, ".a=3", "-s .a=3: empty part in key '.a'");
	fails_s(BASE, "a.=3", "-s a.=3: empty part in key 'a.'");
	fails_s(BASE, "model.5.dense=1",
		"-s model.5.dense=1: index 5 is out of range for model (length 1)");
	fails_s(BASE, "model.x=1", "-s model.x=1: model is a sequence: expected an index, got 'x'");
	fails_s(BASE, "model.-1=relu", "-s model.-1=relu: model is a sequence: expected an index, got '-1'");
	fails_s(BASE "train: {batch: 3}\n", "train.batch.x=1",
		"-s train.batch.x=1: train.batch is a scalar, it has no key 'x'");
	fails_s(BASE, "model.0.relu.x=1",
		"-s model.0.relu.x=1: unknown key 'x' in model.0.relu");
	fails_s(BASE, "train.batch={a: ",
		"-s train.batch={a: : yaml: did not find expected node content");
	fails_s(BASE, "train.batch=*x", "-s train.batch=*x: yaml anchors and aliases are not supported");
}

static void test_override_depth(void)
{
	char key[300] = "";

	for (int i = 0; i < 70; i++)
		strcat(key, "a.");
	strcat(key, "b=1");
	ok_rc(load(BASE, key, NULL), DLT_EINPUT, "a 71-part key");
	ok_msg("key nested too deep (more than 64 levels)", "is too deep");
	strcpy(key, "train.x=");
	for (int i = 0; i < 64; i++)
		strcat(key, "[");
	for (int i = 0; i < 64; i++)
		strcat(key, "]");
	ok_rc(load(BASE, key, NULL), DLT_EINPUT, "a deep override value");
	ok_msg("nested too deep", "is too deep where it lands");
}

static void test_nodes(void)
{
	static const char text[] = "a:\n  - 1\n  - {b: x}\nc: 'q'\n";
	dlt_node root, *a, *c;

	ok_rc(dlt_node_parse(&root, text, strlen(text), "t.yaml"), 0, "parse a tree");
	a = dlt_node_get(&root, "a");
	c = dlt_node_get(&root, "c");
	ok(root.type == DLT_NODE_MAP && root.n == 2 && a && a->type == DLT_NODE_SEQ && a->n == 2,
	   "a mapping holding a sequence");
	ok(a && a->line == 1 && a->items[1].line == 3 && !strcmp(a->file, "t.yaml"), "lines, file");
	ok(c && c->quoted && !strcmp(c->value, "q") && !a->items[0].quoted, "quoted is kept");
	ok(!dlt_node_get(&root, "z") && !dlt_node_get(a, "b"), "absent keys; get on a sequence");
	ok_rc(dlt_node_override(&root, "a.2=3"), 0, "append to a sequence");
	a = dlt_node_get(&root, "a");
	ok(a->n == 3 && !strcmp(a->items[2].value, "3") && !strcmp(a->items[2].file, "-s a.2=3") &&
	   a->items[2].line == 0, "the new item names its override");
	ok_rc(dlt_node_override(&root, "a.1.b.c.d=[1, 2]"), DLT_EINPUT, "through a scalar");
	ok_rc(dlt_node_override(&root, "a.4=1"), DLT_EINPUT, "past the end");
	a = dlt_node_get(&root, "a");
	ok(a->n == 3 && !strcmp(dlt_node_get(&a->items[1], "b")->value, "x"),
	   "failed overrides leave the tree as it was");
	ok_rc(dlt_node_override(&root, "e.f.g=[1, 2]"), 0, "a new path");
	ok(dlt_node_get(dlt_node_get(dlt_node_get(&root, "e"), "f"), "g")->n == 2, "e.f.g");
	ok_rc(dlt_node_override(&root, "e.f.h=2"), 0, "into what an override added");
	ok_rc(dlt_node_override(&root, "e=1"), 0, "replace what overrides added");
	ok(!strcmp(dlt_node_get(&root, "e")->file, "-s e=1"), "e=1");
	dlt_node_free(&root);

	ok_rc(dlt_node_parse(&root, "", 0, "empty.yaml"), 0, "an empty document");
	ok(root.type == DLT_NODE_MAP && root.n == 0 && root.line == 1, "is an empty mapping");
	ok_rc(dlt_node_override(&root, "x=1"), 0, "override into it");
	dlt_node_free(&root);
	ok_rc(dlt_node_parse(&root, "[1]", 3, "s.yaml"), 0, "a sequence document");
	ok_rc(dlt_node_override(&root, "x=1"), DLT_EINPUT, "a key into the root sequence");
	is_msg("-s x=1: the document is a sequence: expected an index, got 'x'");
	dlt_node_free(&root);
	ok_rc(dlt_node_parse(&root, "x", 1, "s.yaml"), 0, "a scalar document");
	ok_rc(dlt_node_override(&root, "y=1"), DLT_EINPUT, "a key into the root scalar");
	is_msg("-s y=1: the document is a scalar, it has no key 'y'");
	dlt_node_free(&root);
	ok(dlt_node_error(&(dlt_node){ .file = "f.yaml", .line = 3 }, "bad %d", 1) == DLT_EINPUT,
	   "dlt_node_error returns DLT_EINPUT");
	is_msg("f.yaml:3: bad 1");
}

static int write(const dlt_config *c, dlt_buf *b)
{
	dlt_buf_free(b);
	return dlt_config_write_yaml(c, b);
}

static void round_trip(const char *text, const char *what)
{
	dlt_buf one = { 0 }, two = { 0 };
	dlt_config c = { 0 };
	int same;

	if (!ok_rc(load(text, NULL), 0, "%s: loads", what))
		return;
	ok_rc(write(&cfg, &one), 0, "%s: writes", what);
	ok_rc(dlt_config_load_string(&c, one.data, one.len, "out.yaml", NULL, 0), 0,
	      "%s: what it wrote loads", what);
	ok_rc(write(&c, &two), 0, "%s: writes again", what);
	ok(one.len == two.len && !memcmp(one.data, two.data, one.len), "%s: the same text", what);
	same = c.n_layers == cfg.n_layers && !strcmp(c.data.train, cfg.data.train) &&
	       !memcmp(&c.train, &cfg.train, sizeof(c.train)) &&
	       c.data.val_split == cfg.data.val_split &&
	       (c.data.test ? cfg.data.test && !strcmp(c.data.test, cfg.data.test) : !cfg.data.test);
	for (int i = 0; same && i < c.n_layers; i++)
		same = c.layers[i].kind == cfg.layers[i].kind &&
		       c.layers[i].units == cfg.layers[i].units &&
		       c.layers[i].bias == cfg.layers[i].bias &&
		       c.layers[i].slope == cfg.layers[i].slope &&
		       c.layers[i].rate == cfg.layers[i].rate;
	ok(same, "%s: the same config", what);
	if (!same || one.len != two.len)
		diag("%s", one.data ? one.data : "");
	dlt_config_free(&c);
	dlt_buf_free(&one);
	dlt_buf_free(&two);
}

static void test_round_trip(void)
{
	dlt_buf b = { 0 };

	round_trip(example, "the example");
	round_trip(BASE, "defaults");
	round_trip("data: {train: \"odd \\\"name\\\"\\t#1: x.dlt\", test: 'null', val_split: 0.3}\n"
		   "model: [{leaky_relu: 0.1}, {dropout: 0.7}, {dense: 123456}]\n"
		   "train:\n  seed: 9223372036854775807\n"
		   "  optimizer: {sgd: {lr: 0.30000000000000004, momentum: 0.1, nesterov: yes,"
		   " weight_decay: 1e-300}}\n"
		   "  schedule: {cosine: {warmup: 2147483647, min_lr: 2.2250738585072014e-308}}\n",
		   "odd strings, exact numbers");
	round_trip("data: {train: '-', test: ' '}\nmodel: [relu]\n"
		   "train: {optimizer: {adam: {lr: 1e-3, eps: 1e-300}}, schedule: "
		   "{step: {gamma: 0.1}}}\n", "a stdin path, tiny numbers");
	ok_rc(load(example, NULL), 0, "the example");
	ok_rc(write(&cfg, &b), 0, "written");
	ok(strstr(b.data, "  optimizer:\n    adamw: {lr: 0.0003, beta1: 0.8, beta2: 0.99, "
		  "eps: 1e-07, weight_decay: 0.05}\n") != NULL, "numbers in their shortest form");
	ok(strstr(b.data, "  - leaky_relu: {slope: 0.01}\n") != NULL, "floats in their shortest form");
	ok(strstr(b.data, "  test: fmnist-test.dlt\n") != NULL, "plain paths stay plain");
	ok_rc(write(&(dlt_config){ .train.precision = "fp32" }, &b), 0, "an empty config writes");
	ok(strstr(b.data, "  train: null\n") != NULL, "with a null path");
	dlt_buf_free(&b);
}

static void test_files(void)
{
	char path[512];
	FILE *fp;
	dlt_config c;

	ok_rc(dlt_config_load(&c, "/nonexistent/cnn.yaml", NULL, 0), DLT_EINPUT, "a missing file");
	is_msg("/nonexistent/cnn.yaml: No such file or directory");
	snprintf(path, sizeof(path), "%s/cnn.yaml", tap_tmpdir());
	fp = fopen(path, "w");
	ok(fp && fputs(BASE "train:\n  batch: x\n", fp) >= 0 && fclose(fp) == 0, "write a file");
	ok_rc(dlt_config_load(&c, path, NULL, 0), DLT_EINPUT, "a bad file");
	ok(strstr(dlt_errmsg(), "/cnn.yaml:4: train.batch: expected an integer, got 'x'") != NULL,
	   "its message names the file");
	fp = fopen(path, "w");
	ok(fp && fputs(example, fp) >= 0 && fclose(fp) == 0, "write the example");
	ok_rc(dlt_config_load(&c, path, (char *[]){ "train.epochs=3" }, 1), 0, "load it");
	ok(!strcmp(c.path, path) && c.train.epochs == 3 && c.n_layers == 9, "path and values");
	dlt_config_free(&c);
	dlt_config_free(&c);
	ok(c.layers == NULL, "freeing twice is harmless");
}

int main(void)
{
	test_example();
	test_defaults();
	test_layers();
	test_optimizers();
	test_schedules();
	test_value_errors();
	test_model_errors();
	test_optim_errors();
	test_yaml_errors();
	test_big_map();
	test_overrides();
	test_override_depth();
	test_nodes();
	test_round_trip();
	test_files();
	dlt_config_free(&cfg);
	return done_testing();
}
