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
	ok(cfg.device == -1, "device defaults to the cpu");
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
	      "cnn.yaml:4: unknown layer 'convv' (did you mean 'conv2d'?)");
	fails("data: {train: t.dlt}\nmodel:\n  - rellu\n",
	      "cnn.yaml:3: unknown layer 'rellu' (did you mean 'relu'?)");
	fails("data: {train: t.dlt}\nmodel:\n  - {convv: 3}\n",
	      "cnn.yaml:3: unknown layer 'convv' (did you mean 'conv2d'?)");
	fails(BASE "train:\n  epoch: 3\n",
	      "cnn.yaml:4: unknown key 'epoch' in train (did you mean 'epochs'?)");
	fails(BASE "checkpoints: {every: epoch}\n",
	      "cnn.yaml:3: unknown key 'checkpoints' (did you mean 'checkpoint'?)");
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
	fails(BASE "train:\n  precision: fp64\n",
	      "cnn.yaml:4: train.precision: unknown precision 'fp64' (fp32, bf16, fp16)");
	fails(BASE "device: gpu\n", "cnn.yaml:3: device: unknown device 'gpu' (cpu, cuda, cuda:N)");
	fails(BASE "device: 'cuda:'\n",
	      "cnn.yaml:3: device: unknown device 'cuda:' (cpu, cuda, cuda:N)");
	fails(BASE "device: cuda:1x\n",
	      "cnn.yaml:3: device: unknown device 'cuda:1x' (cpu, cuda, cuda:N)");
	fails(BASE "device: cuda:-1\n",
	      "cnn.yaml:3: device: unknown device 'cuda:-1' (cpu, cuda, cuda:N)");
	fails(BASE "device: cuda:99999999999999999999\n",
	      "cnn.yaml:3: device: unknown device 'cuda:99999999999999999999' (cpu, cuda, cuda:N)");
	fails(BASE "device: [cuda]\n", "cnn.yaml:3: device: expected a device, got a sequence");
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
	      "cnn.yaml:3: model.0.dense: units is required (dense: N or dense: {units: N}, or dense: {tie: NAME})");
	fails("data: {train: t}\nmodel:\n  - dense: {bias: true}\n",
	      "cnn.yaml:3: model.0.dense: units is required (dense: N or dense: {units: N}, or dense: {tie: NAME})");
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

static void round_trip(const char *text, const char *what);

#define CNN_HEAD "data: {train: t}\nmodel:\n"

static void test_conv(void)
{
	const dlt_layer_cfg *l;

	ok_rc(load(CNN_HEAD
		   "  - conv2d: {filters: 32, kernel: 3}\n"
		   "  - conv2d: {filters: 8, kernel: [3, 5], stride: [1, 2], pad: [1, 2], "
		   "dilation: 2, groups: 4, bias: false}\n"
		   "  - conv2d:\n      filters: 65536\n      kernel: 1024\n      groups: 65536\n"
		   "      pad: 1024\n      stride: 1e3\n      dilation: [1024, 1]\n", NULL), 0,
	      "conv2d layers");
	l = cfg.layers;
	if (cfg.n_layers != 3)
		return;
	ok(l[0].kind == DLT_LAYER_CONV2D && l[0].filters == 32 && l[0].kernel[0] == 3 &&
	   l[0].kernel[1] == 3 && l[0].line == 3, "conv2d {filters: 32, kernel: 3}");
	ok(l[0].stride[0] == 1 && l[0].stride[1] == 1 && l[0].pad[0] == 0 && l[0].pad[1] == 0 &&
	   l[0].dilation[0] == 1 && l[0].dilation[1] == 1 && l[0].groups == 1 && l[0].bias == 1,
	   "conv2d defaults: stride 1, pad 0, dilation 1, groups 1, bias");
	ok(l[1].filters == 8 && l[1].kernel[0] == 3 && l[1].kernel[1] == 5 &&
	   l[1].stride[0] == 1 && l[1].stride[1] == 2 && l[1].pad[0] == 1 && l[1].pad[1] == 2 &&
	   l[1].dilation[0] == 2 && l[1].dilation[1] == 2 && l[1].groups == 4 && !l[1].bias,
	   "conv2d with every key, pairs [h, w]");
	ok(l[2].filters == 65536 && l[2].kernel[0] == 1024 && l[2].groups == 65536 &&
	   l[2].pad[1] == 1024 && l[2].stride[0] == 1000 && l[2].dilation[0] == 1024 &&
	   l[2].dilation[1] == 1 && l[2].line == 5, "conv2d at its upper bounds");
}

static void test_pools(void)
{
	const dlt_layer_cfg *l;

	ok_rc(load(CNN_HEAD
		   "  - maxpool: 2\n"
		   "  - maxpool: {kernel: 3, stride: 1, pad: 1}\n"
		   "  - avgpool: [2, 3]\n"
		   "  - avgpool: {kernel: [4, 2], pad: [2, 1]}\n"
		   "  - global_avgpool\n"
		   "  - {global_avgpool: }\n"
		   "  - batchnorm\n"
		   "  - batchnorm: {momentum: 0, eps: 1e-3}\n"
		   "  - batchnorm: {momentum: 1}\n", NULL), 0, "pools and batchnorm");
	l = cfg.layers;
	if (cfg.n_layers != 9)
		return;
	ok(l[0].kind == DLT_LAYER_MAXPOOL && l[0].kernel[0] == 2 && l[0].kernel[1] == 2 &&
	   l[0].stride[0] == 2 && l[0].stride[1] == 2 && l[0].pad[0] == 0 && l[0].pad[1] == 0,
	   "maxpool: 2 has stride 2, pad 0");
	ok(l[1].kernel[0] == 3 && l[1].stride[0] == 1 && l[1].stride[1] == 1 && l[1].pad[0] == 1 &&
	   l[1].pad[1] == 1, "maxpool {kernel: 3, stride: 1, pad: 1}");
	ok(l[2].kind == DLT_LAYER_AVGPOOL && l[2].kernel[0] == 2 && l[2].kernel[1] == 3 &&
	   l[2].stride[0] == 2 && l[2].stride[1] == 3, "avgpool: [2, 3], stride its kernel");
	ok(l[3].kernel[0] == 4 && l[3].kernel[1] == 2 && l[3].pad[0] == 2 && l[3].pad[1] == 1 &&
	   l[3].stride[0] == 4 && l[3].stride[1] == 2, "avgpool pad at half the kernel");
	ok(l[4].kind == DLT_LAYER_GLOBAL_AVGPOOL && l[5].kind == DLT_LAYER_GLOBAL_AVGPOOL,
	   "global_avgpool");
	ok(l[6].kind == DLT_LAYER_BATCHNORM && l[6].momentum == 0.1f && l[6].eps == 1e-5f,
	   "batchnorm defaults: momentum 0.1, eps 1e-5");
	ok(l[7].momentum == 0 && l[7].eps == 1e-3f && l[8].momentum == 1 && l[8].eps == 1e-5f,
	   "batchnorm momentum 0 and 1");
}

static void test_residual(void)
{
	const dlt_layer_cfg *r;

	ok_rc(load(CNN_HEAD
		   "  - residual:\n"
		   "      - conv2d: {filters: 16, kernel: 3, pad: 1}\n"
		   "      - relu\n"
		   "  - residual:\n"
		   "      layers: [batchnorm, {residual: [gelu]}]\n"
		   "      shortcut:\n"
		   "        - conv2d: {filters: 32, kernel: 1, stride: 2}\n"
		   "  - residual: {layers: [relu], shortcut: []}\n"
		   "  - residual: {layers: [relu], shortcut: }\n", NULL), 0, "residual blocks");
	if (cfg.n_layers != 4)
		return;
	r = &cfg.layers[0];
	ok(r->kind == DLT_LAYER_RESIDUAL && r->n_body == 2 && r->n_shortcut == 0 && !r->shortcut &&
	   r->line == 3, "residual: [layers] has an identity shortcut");
	ok(r->n_body == 2 && r->body[0].kind == DLT_LAYER_CONV2D && r->body[0].filters == 16 &&
	   r->body[0].pad[0] == 1 && r->body[0].line == 4 && r->body[1].kind == DLT_LAYER_RELU &&
	   r->body[1].line == 5, "its layers, with their lines");
	r = &cfg.layers[1];
	ok(r->n_body == 2 && r->body[0].kind == DLT_LAYER_BATCHNORM &&
	   r->body[1].kind == DLT_LAYER_RESIDUAL && r->body[1].n_body == 1 &&
	   r->body[1].body[0].kind == DLT_LAYER_GELU, "a residual block inside one");
	ok(r->n_shortcut == 1 && r->shortcut[0].kind == DLT_LAYER_CONV2D &&
	   r->shortcut[0].stride[0] == 2 && r->shortcut[0].kernel[1] == 1 &&
	   r->shortcut[0].line == 9, "a shortcut");
	ok(cfg.layers[2].n_body == 1 && cfg.layers[2].n_shortcut == 0 &&
	   cfg.layers[3].n_body == 1 && cfg.layers[3].n_shortcut == 0,
	   "an empty or null shortcut is the identity");
}

/* model: [{residual: [... relu ...]}], n blocks deep. */
static const char *nested(int n)
{
	static char text[1024];

	strcpy(text, CNN_HEAD "  - ");
	for (int i = 0; i < n; i++)
		strcat(text, "{residual: [");
	strcat(text, "relu");
	for (int i = 0; i < n; i++)
		strcat(text, "]}");
	strcat(text, "\n");
	return text;
}

static void test_residual_depth(void)
{
	const dlt_layer_cfg *l;
	int depth = 0;

	ok_rc(load(nested(16), NULL), 0, "residual blocks 16 deep");
	for (l = cfg.layers; l && l->kind == DLT_LAYER_RESIDUAL; l = l->body)
		depth++;
	ok(depth == 16 && l && l->kind == DLT_LAYER_RELU, "16 blocks, then relu");
	round_trip(nested(16), "residual blocks 16 deep");
	ok_rc(load(nested(17), NULL), DLT_EINPUT, "17 deep");
	ok_msg(": residual blocks nested too deep (more than 16 levels)", "is too deep");
	ok(!strncmp(dlt_errmsg(), "cnn.yaml:3: model.0.residual.0.residual.0.", 42),
	   "names the place: %s", dlt_errmsg());
}

static void test_augment(void)
{
	ok_rc(load(BASE, NULL), 0, "no augment");
	ok(cfg.data.augment.crop == 0 && cfg.data.augment.flip == 0, "no crop, no flip by default");
	ok_rc(load("data: {train: t, augment: {crop: 4, flip: true}}\nmodel: [relu]\n", NULL), 0,
	      "augment: {crop: 4, flip: true}");
	ok(cfg.data.augment.crop == 4 && cfg.data.augment.flip == 1, "crop 4, flip");
	ok_rc(load("data:\n  train: t\n  augment:\n    crop: 64\n", NULL), DLT_EINPUT,
	      "no model");
	ok_rc(load("data:\n  train: t\n  augment:\n    crop: 64\nmodel: [relu]\n", NULL), 0,
	      "crop 64");
	ok(cfg.data.augment.crop == 64 && !cfg.data.augment.flip, "crop 64, no flip");
	ok_rc(load("data: {train: t, augment: }\nmodel: [relu]\n", NULL), 0, "augment: null");
	ok(cfg.data.augment.crop == 0, "is the default");
}

static void test_checkpoint(void)
{
	static const struct {
		const char *every;
		int kind;
		long long n;
	} everies[] = {
		{ "epoch", DLT_CKPT_EPOCH, 1 },
		{ "'epoch'", DLT_CKPT_EPOCH, 1 },
		{ "500", DLT_CKPT_STEPS, 500 },
		{ "1e3", DLT_CKPT_STEPS, 1000 },
		{ "100 steps", DLT_CKPT_STEPS, 100 },
		{ "1 step", DLT_CKPT_STEPS, 1 },
		{ "\"2147483647 steps\"", DLT_CKPT_STEPS, 2147483647 },
		{ "600 seconds", DLT_CKPT_SECONDS, 600 },
		{ "1 second", DLT_CKPT_SECONDS, 1 },
		{ "30 s", DLT_CKPT_SECONDS, 30 },
		{ "30s", DLT_CKPT_SECONDS, 30 },
		{ "'007s'", DLT_CKPT_SECONDS, 7 },
	};
	static const struct {
		const char *best, *mode;
		int max;
	} bests[] = {
		{ "train.loss", "", 0 }, { "train.acc", "", 1 }, { "val.loss", "", 0 },
		{ "val.acc", "", 1 }, { "test.loss", "", 0 }, { "test.acc", "", 1 },
		{ "test.acc", ", mode: min", 0 }, { "'val.loss'", ", mode: max", 1 },
		{ "train.loss", ", mode: ~", 0 },
	};
	char text[256];

	ok_rc(load(BASE, NULL), 0, "no checkpoint key");
	ok(cfg.ckpt.every == DLT_CKPT_EPOCH && cfg.ckpt.every_n == 1 && cfg.ckpt.keep == 3 &&
	   cfg.ckpt.best == NULL && cfg.ckpt.best_max == 0, "every epoch, keep 3, no best");
	ok_rc(load(BASE "checkpoint:\n", NULL), 0, "checkpoint: null");
	ok(cfg.ckpt.every == DLT_CKPT_EPOCH && cfg.ckpt.keep == 3, "is the default");
	for (size_t i = 0; i < sizeof(everies) / sizeof(everies[0]); i++) {
		snprintf(text, sizeof(text), BASE "checkpoint: {every: %s, keep: 1}\n",
			 everies[i].every);
		ok_rc(load(text, NULL), 0, "every: %s", everies[i].every);
		ok(cfg.ckpt.every == everies[i].kind && cfg.ckpt.every_n == everies[i].n &&
		   cfg.ckpt.keep == 1, "is kind %d, %lld", everies[i].kind, everies[i].n);
	}
	for (size_t i = 0; i < sizeof(bests) / sizeof(bests[0]); i++) {
		snprintf(text, sizeof(text), "data: {train: t, test: u, val_split: 0.1}\n"
			 "model: [relu]\ncheckpoint: {best: %s%s}\n", bests[i].best, bests[i].mode);
		ok_rc(load(text, NULL), 0, "best: %s%s", bests[i].best, bests[i].mode);
		ok(cfg.ckpt.best && strstr(bests[i].best, cfg.ckpt.best) &&
		   cfg.ckpt.best_max == bests[i].max, "mode %s", bests[i].max ? "max" : "min");
	}
}

static void test_cnn_errors(void)
{
	fails(CNN_HEAD "  - conv2d: 32\n",
	      "cnn.yaml:3: model.0.conv2d: expected a mapping (conv2d: {filters: N, kernel: K}), "
	      "got '32'");
	fails(CNN_HEAD "  - conv2d\n",
	      "cnn.yaml:3: model.0.conv2d: filters is required (conv2d: {filters: N, kernel: K})");
	fails(CNN_HEAD "  - conv2d: {kernel: 3}\n",
	      "cnn.yaml:3: model.0.conv2d: filters is required (conv2d: {filters: N, kernel: K})");
	fails(CNN_HEAD "  - conv2d:\n      filters: 3\n",
	      "cnn.yaml:3: model.0.conv2d: kernel is required (conv2d: {filters: N, kernel: K})");
	fails(CNN_HEAD "  - conv2d: [3]\n",
	      "cnn.yaml:3: model.0.conv2d: expected a mapping (conv2d: {filters: N, kernel: K}), "
	      "got a sequence");
	fails(CNN_HEAD "  - conv2d: {filters: 0, kernel: 3}\n",
	      "cnn.yaml:3: model.0.conv2d.filters: must be >= 1, got 0");
	fails(CNN_HEAD "  - conv2d: {filters: 65537, kernel: 3}\n",
	      "cnn.yaml:3: model.0.conv2d.filters: must be <= 65536, got 65537");
	fails(CNN_HEAD "  - conv2d: {filters: 2, kernel: 0}\n",
	      "cnn.yaml:3: model.0.conv2d.kernel: must be >= 1, got 0");
	fails(CNN_HEAD "  - conv2d: {filters: 2, kernel: 1025}\n",
	      "cnn.yaml:3: model.0.conv2d.kernel: must be <= 1024, got 1025");
	fails(CNN_HEAD "  - conv2d: {filters: 2, kernel: [3, 0]}\n",
	      "cnn.yaml:3: model.0.conv2d.kernel.1: must be >= 1, got 0");
	fails(CNN_HEAD "  - conv2d: {filters: 2, kernel: [3, 3, 3]}\n",
	      "cnn.yaml:3: model.0.conv2d.kernel: expected a number or a pair [h, w], got 3 items");
	fails(CNN_HEAD "  - conv2d: {filters: 2, kernel: {h: 3}}\n",
	      "cnn.yaml:3: model.0.conv2d.kernel: expected a number or a pair [h, w], got a mapping");
	fails(CNN_HEAD "  - conv2d: {filters: 2, kernel: 3x3}\n",
	      "cnn.yaml:3: model.0.conv2d.kernel: expected an integer, got '3x3'");
	fails(CNN_HEAD "  - conv2d: {filters: 2, kernel: [a, 3]}\n",
	      "cnn.yaml:3: model.0.conv2d.kernel.0: expected an integer, got 'a'");
	fails(CNN_HEAD "  - conv2d: {filters: 2, kernel: 3, stride: 0}\n",
	      "cnn.yaml:3: model.0.conv2d.stride: must be >= 1, got 0");
	fails(CNN_HEAD "  - conv2d: {filters: 2, kernel: 3, pad: -1}\n",
	      "cnn.yaml:3: model.0.conv2d.pad: must be >= 0, got -1");
	fails(CNN_HEAD "  - conv2d: {filters: 2, kernel: 3, pad: [0, 1025]}\n",
	      "cnn.yaml:3: model.0.conv2d.pad.1: must be <= 1024, got 1025");
	fails(CNN_HEAD "  - conv2d: {filters: 2, kernel: 3, dilation: 0}\n",
	      "cnn.yaml:3: model.0.conv2d.dilation: must be >= 1, got 0");
	fails(CNN_HEAD "  - conv2d: {filters: 2, kernel: 3, groups: 0}\n",
	      "cnn.yaml:3: model.0.conv2d.groups: must be >= 1, got 0");
	fails(CNN_HEAD "  - conv2d: {filters: 6, kernel: 3, groups: 4}\n",
	      "cnn.yaml:3: model.0.conv2d.groups: must divide filters (6), got 4");
	fails(CNN_HEAD "  - conv2d: {filters: 6, kernel: 3, bias: 0}\n",
	      "cnn.yaml:3: model.0.conv2d.bias: expected true or false, got '0'");
	fails(CNN_HEAD "  - conv2d: {filters: 6, kernel: 3, pads: 1}\n",
	      "cnn.yaml:3: unknown key 'pads' in model.0.conv2d (did you mean 'pad'?)");
	fails(CNN_HEAD "  - conv2d: {filters: 6, kernel: 3, units: 1}\n",
	      "cnn.yaml:3: unknown key 'units' in model.0.conv2d");
	fails(CNN_HEAD "  - conv2: {filters: 6, kernel: 3}\n",
	      "cnn.yaml:3: unknown layer 'conv2' (did you mean 'conv2d'?)");

	fails(CNN_HEAD "  - maxpool\n",
	      "cnn.yaml:3: model.0.maxpool: kernel is required (maxpool: K or maxpool: {kernel: K})");
	fails(CNN_HEAD "  - avgpool: {stride: 2}\n",
	      "cnn.yaml:3: model.0.avgpool: kernel is required (avgpool: K or avgpool: {kernel: K})");
	fails(CNN_HEAD "  - maxpool: 0\n", "cnn.yaml:3: model.0.maxpool: must be >= 1, got 0");
	fails(CNN_HEAD "  - maxpool: [2, 0]\n", "cnn.yaml:3: model.0.maxpool.1: must be >= 1, got 0");
	fails(CNN_HEAD "  - maxpool: 2.5\n",
	      "cnn.yaml:3: model.0.maxpool: expected an integer, got '2.5'");
	fails(CNN_HEAD "  - maxpool: {kernel: 3, pad: 2}\n",
	      "cnn.yaml:3: model.0.maxpool.pad: must be <= half the kernel (1), got 2");
	fails(CNN_HEAD "  - avgpool: {kernel: [4, 3], pad: [2, 2]}\n",
	      "cnn.yaml:3: model.0.avgpool.pad: must be <= half the kernel (1), got 2");
	fails(CNN_HEAD "  - avgpool: {kernel: 2, stride: 0}\n",
	      "cnn.yaml:3: model.0.avgpool.stride: must be >= 1, got 0");
	fails(CNN_HEAD "  - maxpool: {kernel: 2, dilation: 2}\n",
	      "cnn.yaml:3: unknown key 'dilation' in model.0.maxpool");
	fails(CNN_HEAD "  - global_avgpool: 2\n",
	      "cnn.yaml:3: model.0.global_avgpool: takes no options, got '2'");
	fails(CNN_HEAD "  - global_avgpool: {kernel: 2}\n",
	      "cnn.yaml:3: unknown key 'kernel' in model.0.global_avgpool");
	fails(CNN_HEAD "  - global_avgpol\n",
	      "cnn.yaml:3: unknown layer 'global_avgpol' (did you mean 'global_avgpool'?)");

	fails(CNN_HEAD "  - batchnorm: 0.1\n",
	      "cnn.yaml:3: model.0.batchnorm: expected a mapping (batchnorm: {momentum: M, eps: E}), "
	      "got '0.1'");
	fails(CNN_HEAD "  - batchnorm: {momentum: 1.5}\n",
	      "cnn.yaml:3: model.0.batchnorm.momentum: must be in [0, 1], got 1.5");
	fails(CNN_HEAD "  - batchnorm: {momentum: -0.1}\n",
	      "cnn.yaml:3: model.0.batchnorm.momentum: must be in [0, 1], got -0.1");
	fails(CNN_HEAD "  - batchnorm: {eps: 0}\n",
	      "cnn.yaml:3: model.0.batchnorm.eps: must be > 0, got 0");
	fails(CNN_HEAD "  - batchnorm: {eps: 1e-50}\n",
	      "cnn.yaml:3: model.0.batchnorm.eps: must be > 0, got 1e-50");
	fails(CNN_HEAD "  - batchnorm: {epsilon: 1e-3}\n",
	      "cnn.yaml:3: unknown key 'epsilon' in model.0.batchnorm");
	fails(CNN_HEAD "  - batchnorm: {eps: 1e-3, momentm: 0.1}\n",
	      "cnn.yaml:3: unknown key 'momentm' in model.0.batchnorm (did you mean 'momentum'?)");

	fails(CNN_HEAD "  - residual\n",
	      "cnn.yaml:3: model.0.residual: layers is required (residual: [layers] or "
	      "residual: {layers: [layers], shortcut: [layers]})");
	fails(CNN_HEAD "  - residual: {shortcut: [relu]}\n",
	      "cnn.yaml:3: model.0.residual: layers is required (residual: [layers] or "
	      "residual: {layers: [layers], shortcut: [layers]})");
	fails(CNN_HEAD "  - residual: []\n",
	      "cnn.yaml:3: model.0.residual: must have at least one layer");
	fails(CNN_HEAD "  - residual: {layers: []}\n",
	      "cnn.yaml:3: model.0.residual.layers: must have at least one layer");
	fails(CNN_HEAD "  - residual: relu\n",
	      "cnn.yaml:3: model.0.residual: expected a sequence of layers, got 'relu'");
	fails(CNN_HEAD "  - residual: {layers: relu}\n",
	      "cnn.yaml:3: model.0.residual.layers: expected a sequence of layers, got 'relu'");
	fails(CNN_HEAD "  - residual: {layers: [relu], shortcut: {relu: }}\n",
	      "cnn.yaml:3: model.0.residual.shortcut: expected a sequence of layers, got a mapping");
	fails(CNN_HEAD "  - residual: {layers: [relu], short: []}\n",
	      "cnn.yaml:3: unknown key 'short' in model.0.residual");
	fails(CNN_HEAD "  - relu\n  - residual:\n      - relu\n      - conv2d: {filters: 2}\n",
	      "cnn.yaml:6: model.1.residual.1.conv2d: kernel is required "
	      "(conv2d: {filters: N, kernel: K})");
	fails(CNN_HEAD "  - residual:\n      layers: [relu]\n      shortcut:\n"
	      "        - {residual: [relu, {maxpool: {kernel: 2, pad: 3}}]}\n",
	      "cnn.yaml:6: model.0.residual.shortcut.0.residual.1.maxpool.pad: "
	      "must be <= half the kernel (1), got 3");
	fails(CNN_HEAD "  - residual: [rellu]\n",
	      "cnn.yaml:3: unknown layer 'rellu' (did you mean 'relu'?)");
}

static void test_data_ckpt_errors(void)
{
	fails("data: {train: t, augment: {crop: -1}}\nmodel: [relu]\n",
	      "cnn.yaml:1: data.augment.crop: must be >= 0, got -1");
	fails("data: {train: t, augment: {crop: 65}}\nmodel: [relu]\n",
	      "cnn.yaml:1: data.augment.crop: must be <= 64, got 65");
	fails("data: {train: t, augment: {flip: 1}}\nmodel: [relu]\n",
	      "cnn.yaml:1: data.augment.flip: expected true or false, got '1'");
	fails("data: {train: t, augment: {flip: true, rotate: 3}}\nmodel: [relu]\n",
	      "cnn.yaml:1: unknown key 'rotate' in data.augment");
	fails("data: {train: t, augment: {crops: 2}}\nmodel: [relu]\n",
	      "cnn.yaml:1: unknown key 'crops' in data.augment (did you mean 'crop'?)");
	fails("data: {train: t, augment: true}\nmodel: [relu]\n",
	      "cnn.yaml:1: data.augment: expected a mapping, got 'true'");
	fails("data: {train: t, augmnt: {}}\nmodel: [relu]\n",
	      "cnn.yaml:1: unknown key 'augmnt' in data (did you mean 'augment'?)");

	fails(BASE "checkpoint: epoch\n", "cnn.yaml:3: checkpoint: expected a mapping, got 'epoch'");
	fails(BASE "checkpoint: {evry: epoch}\n",
	      "cnn.yaml:3: unknown key 'evry' in checkpoint (did you mean 'every'?)");
	fails(BASE "checkpoint: {every: epochs}\n",
	      "cnn.yaml:3: checkpoint.every: expected epoch, N steps or N seconds, got 'epochs'");
	fails(BASE "checkpoint: {every: 2 epochs}\n",
	      "cnn.yaml:3: checkpoint.every: expected epoch, N steps or N seconds, got '2 epochs'");
	fails(BASE "checkpoint: {every: 10 minutes}\n",
	      "cnn.yaml:3: checkpoint.every: expected epoch, N steps or N seconds, got '10 minutes'");
	fails(BASE "checkpoint: {every: steps}\n",
	      "cnn.yaml:3: checkpoint.every: expected epoch, N steps or N seconds, got 'steps'");
	fails(BASE "checkpoint: {every: -5 steps}\n",
	      "cnn.yaml:3: checkpoint.every: expected epoch, N steps or N seconds, got '-5 steps'");
	fails(BASE "checkpoint: {every: 1.5 steps}\n",
	      "cnn.yaml:3: checkpoint.every: expected epoch, N steps or N seconds, got '1.5 steps'");
	fails(BASE "checkpoint: {every: '100'}\n",
	      "cnn.yaml:3: checkpoint.every: expected epoch, N steps or N seconds, got '100'");
	fails(BASE "checkpoint: {every: [1, steps]}\n",
	      "cnn.yaml:3: checkpoint.every: expected epoch, N steps or N seconds, got a sequence");
	fails(BASE "checkpoint: {every: 0}\n", "cnn.yaml:3: checkpoint.every: must be >= 1, got 0");
	fails(BASE "checkpoint: {every: -3}\n", "cnn.yaml:3: checkpoint.every: must be >= 1, got -3");
	fails(BASE "checkpoint: {every: 1.5}\n",
	      "cnn.yaml:3: checkpoint.every: expected an integer, got '1.5'");
	fails(BASE "checkpoint: {every: 0 steps}\n",
	      "cnn.yaml:3: checkpoint.every: must be >= 1, got 0 steps");
	fails(BASE "checkpoint: {every: 0s}\n", "cnn.yaml:3: checkpoint.every: must be >= 1, got 0s");
	fails(BASE "checkpoint: {every: 2147483648 seconds}\n",
	      "cnn.yaml:3: checkpoint.every: must be <= 2147483647, got 2147483648 seconds");
	fails(BASE "checkpoint: {every: 99999999999999999999999 steps}\n",
	      "cnn.yaml:3: checkpoint.every: must be <= 2147483647, got 99999999999999999999999 steps");
	fails(BASE "checkpoint: {every: 2147483648}\n",
	      "cnn.yaml:3: checkpoint.every: must be <= 2147483647, got 2147483648");
	fails(BASE "checkpoint: {keep: 0}\n", "cnn.yaml:3: checkpoint.keep: must be >= 1, got 0");
	fails(BASE "checkpoint: {keep: all}\n",
	      "cnn.yaml:3: checkpoint.keep: expected an integer, got 'all'");
	fails(BASE "checkpoint: {best: accuracy}\n",
	      "cnn.yaml:3: checkpoint.best: unknown metric 'accuracy' (train, val or test, then "
	      "loss, acc, top5, rmse, mae, r2 or f1: e.g. val.rmse)");
	fails(BASE "checkpoint: {best: tset.acc}\n",
	      "cnn.yaml:3: checkpoint.best: unknown metric 'tset.acc' (train, val or test, then "
	      "loss, acc, top5, rmse, mae, r2 or f1: e.g. val.rmse)");
	fails(BASE "checkpoint: {best: val.rsme}\n",
	      "cnn.yaml:3: checkpoint.best: unknown metric 'val.rsme' (train, val or test, then "
	      "loss, acc, top5, rmse, mae, r2 or f1: e.g. val.rmse)");
	fails(BASE "checkpoint: {best: {test: acc}}\n",
	      "cnn.yaml:3: checkpoint.best: expected a metric, got a mapping");
	fails(BASE "checkpoint: {best: test.acc}\n",
	      "cnn.yaml:3: checkpoint.best: test.acc needs data.test");
	fails(BASE "checkpoint:\n  keep: 2\n  best: val.loss\n",
	      "cnn.yaml:5: checkpoint.best: val.loss needs data.val_split > 0 (or data.val)");
	fails(BASE "checkpoint: {best: train.acc, mode: maximum}\n",
	      "cnn.yaml:3: checkpoint.mode: expected max or min, got 'maximum'");
	fails(BASE "checkpoint: {best: train.acc, mode: mx}\n",
	      "cnn.yaml:3: checkpoint.mode: expected max or min, got 'mx' (did you mean 'max'?)");
	fails(BASE "checkpoint:\n  every: epoch\n  mode: max\n",
	      "cnn.yaml:5: checkpoint.mode: needs checkpoint.best");
	fails(BASE "checkpoint: {keep: 2, mode: min, best: }\n",
	      "cnn.yaml:3: checkpoint.mode: needs checkpoint.best");
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
	fails_s(BASE, "model.0=convv",
		"-s model.0=convv: unknown layer 'convv' (did you mean 'conv2d'?)");
	fails_s(BASE, "train.precision=f16",
		"-s train.precision=f16: train.precision: unknown precision 'f16' (fp32, bf16, fp16)");
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

static void test_cnn_overrides(void)
{
	static const char cnn[] =
		"data: {train: t, test: u}\n"
		"model:\n"
		"  - conv2d: {filters: 16, kernel: 3}\n"
		"  - residual:\n"
		"      - conv2d: {filters: 16, kernel: 3, pad: 1}\n"
		"      - batchnorm\n"
		"  - residual:\n"
		"      layers: [relu]\n"
		"      shortcut: [{conv2d: {filters: 8, kernel: 1}}]\n";
	const dlt_layer_cfg *l;

	ok_rc(load(cnn, "model.1.residual.0.conv2d.filters=32", "model.1.residual.1.batchnorm.eps=1e-3",
		   "model.1.residual.2=relu", "model.2.residual.shortcut.0.conv2d.stride=[2, 1]",
		   "model.2.residual.layers.0=maxpool", "model.2.residual.layers.0.maxpool.kernel=3",
		   "model.0.conv2d.kernel=[5, 3]", "data.augment.flip=true",
		   "checkpoint.every=100 steps", "checkpoint.best=test.acc", NULL), 0,
	      "overrides into residual blocks, augment and checkpoint");
	l = cfg.layers;
	if (cfg.n_layers != 3)
		return;
	ok(l[1].n_body == 3 && l[1].body[0].filters == 32 && l[1].body[0].pad[0] == 1 &&
	   l[1].body[0].line == 5, "model.1.residual.0.conv2d.filters=32 keeps the line");
	ok(l[1].body[1].kind == DLT_LAYER_BATCHNORM && l[1].body[1].eps == 1e-3f &&
	   l[1].body[1].momentum == 0.1f, "a bare batchnorm takes a key");
	ok(l[1].body[2].kind == DLT_LAYER_RELU && l[1].body[2].line == 0, "a layer appended");
	ok(l[2].n_shortcut == 1 && l[2].shortcut[0].stride[0] == 2 && l[2].shortcut[0].stride[1] == 1,
	   "into a shortcut");
	ok(l[2].body[0].kind == DLT_LAYER_MAXPOOL && l[2].body[0].kernel[0] == 3 &&
	   l[2].body[0].stride[1] == 3, "a layer replaced, then set");
	ok(l[0].kernel[0] == 5 && l[0].kernel[1] == 3, "a pair");
	ok(cfg.data.augment.flip && cfg.ckpt.every == DLT_CKPT_STEPS && cfg.ckpt.every_n == 100 &&
	   cfg.ckpt.best && !strcmp(cfg.ckpt.best, "test.acc") && cfg.ckpt.best_max,
	   "data.augment and checkpoint keys added");
	fails_s(cnn, "model.1.residual.0.conv2d.filters=0",
		"-s model.1.residual.0.conv2d.filters=0: model.1.residual.0.conv2d.filters: "
		"must be >= 1, got 0");
	fails_s(cnn, "model.1.residual.5=relu",
		"-s model.1.residual.5=relu: index 5 is out of range for model.1.residual (length 2)");
	fails_s(cnn, "model.2.residual.layers.0.relu.x=1",
		"-s model.2.residual.layers.0.relu.x=1: unknown key 'x' in "
		"model.2.residual.layers.0.relu");
	fails_s(cnn, "checkpoint.mode=min", "-s checkpoint.mode=min: checkpoint.mode: "
		"needs checkpoint.best");
	fails_s(cnn, "data.augment.crop=100",
		"-s data.augment.crop=100: data.augment.crop: must be <= 64, got 100");
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

static int same_layers(const dlt_layer_cfg *a, int na, const dlt_layer_cfg *b, int nb)
{
	if (na != nb)
		return 0;
	for (int i = 0; i < na; i++) {
		dlt_layer_cfg x = a[i], y = b[i];

		if (!same_layers(x.body, x.n_body, y.body, y.n_body) ||
		    !same_layers(x.shortcut, x.n_shortcut, y.shortcut, y.n_shortcut))
			return 0;
		/* all but the pointers and the line the layer came from */
		x.body = y.body = x.shortcut = y.shortcut = NULL;
		x.line = y.line = 0;
		if (memcmp(&x, &y, sizeof(x)))
			return 0;
	}
	return 1;
}

static int same_str(const char *a, const char *b)
{
	return a ? b && !strcmp(a, b) : !b;
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
	same = same_layers(c.layers, c.n_layers, cfg.layers, cfg.n_layers) &&
	       !strcmp(c.data.train, cfg.data.train) &&
	       !memcmp(&c.train, &cfg.train, sizeof(c.train)) &&
	       c.data.val_split == cfg.data.val_split && same_str(c.data.test, cfg.data.test) &&
	       !memcmp(&c.data.augment, &cfg.data.augment, sizeof(c.data.augment)) &&
	       c.ckpt.every == cfg.ckpt.every && c.ckpt.every_n == cfg.ckpt.every_n &&
	       c.ckpt.keep == cfg.ckpt.keep && same_str(c.ckpt.best, cfg.ckpt.best) &&
	       c.ckpt.best_max == cfg.ckpt.best_max;
	ok(same, "%s: the same config", what);
	if (!same || one.len != two.len)
		diag("%s", one.data ? one.data : "");
	dlt_config_free(&c);
	dlt_buf_free(&one);
	dlt_buf_free(&two);
}

static const char cnn_every_key[] =
	"data: {train: t.dlt, test: u.dlt, val_split: 0.25, augment: {crop: 4, flip: yes}}\n"
	"model:\n"
	"  - conv2d: {filters: 32, kernel: 3, pad: 1, bias: false}\n"
	"  - batchnorm\n"
	"  - residual:\n"
	"      - conv2d: {filters: 32, kernel: [3, 5], stride: [1, 2], pad: [1, 2], dilation: 2,"
	" groups: 4}\n"
	"      - batchnorm: {momentum: 0.01, eps: 1e-3}\n"
	"      - residual: [relu, {avgpool: {kernel: [2, 3], stride: 1, pad: 1}}]\n"
	"  - residual:\n"
	"      layers: [{maxpool: 2}]\n"
	"      shortcut: [{conv2d: {filters: 8, kernel: 1, stride: 2}}, {dropout: 0.5}]\n"
	"  - maxpool: {kernel: [3, 2], pad: [1, 0]}\n"
	"  - global_avgpool\n"
	"  - flatten\n"
	"  - dense: 10\n"
	"checkpoint: {every: 250 steps, keep: 5, best: val.loss}\n";

static const char cnn_written[] =
	"data:\n"
	"  train: t.dlt\n"
	"  test: u.dlt\n"
	"  val_split: 0.25\n"
	"  augment: {crop: 4, flip: true}\n"
	"model:\n"
	"  - conv2d: {filters: 32, kernel: 3, stride: 1, pad: 1, dilation: 1, groups: 1, bias: false}\n"
	"  - batchnorm: {momentum: 0.1, eps: 1e-05}\n"
	"  - residual:\n"
	"      layers:\n"
	"        - conv2d: {filters: 32, kernel: [3, 5], stride: [1, 2], pad: [1, 2], dilation: 2,"
	" groups: 4, bias: true}\n"
	"        - batchnorm: {momentum: 0.01, eps: 0.001}\n"
	"        - residual:\n"
	"            layers:\n"
	"              - relu\n"
	"              - avgpool: {kernel: [2, 3], stride: 1, pad: 1}\n"
	"            shortcut: []\n"
	"      shortcut: []\n"
	"  - residual:\n"
	"      layers:\n"
	"        - maxpool: {kernel: 2, stride: 2, pad: 0}\n"
	"      shortcut:\n"
	"        - conv2d: {filters: 8, kernel: 1, stride: 2, pad: 0, dilation: 1, groups: 1,"
	" bias: true}\n"
	"        - dropout: {rate: 0.5}\n"
	"  - maxpool: {kernel: [3, 2], stride: [3, 2], pad: [1, 0]}\n"
	"  - global_avgpool\n"
	"  - flatten\n"
	"  - dense: {units: 10, bias: true}\n"
	"train:\n"
	"  epochs: 1\n"
	"  batch: 32\n"
	"  seed: 0\n"
	"  threads: 0\n"
	"  log_every: 100\n"
	"  precision: fp32\n"
	"  optimizer:\n"
	"    adam: {lr: 0.001, beta1: 0.9, beta2: 0.999, eps: 1e-08, weight_decay: 0}\n"
	"  schedule:\n"
	"    constant: {warmup: 0}\n"
	"checkpoint:\n"
	"  every: 250 steps\n"
	"  keep: 5\n"
	"  best: val.loss\n"
	"  mode: min\n"
	"dist:\n"
	"  timeout: 300\n"
	"  bucket_mb: 25\n"
	"device: cpu\n";

static void test_device_precision(void)
{
	static const struct { const char *text; int device; const char *prec; } cases[] = {
		{ BASE "device: cpu\n", -1, "fp32" },
		{ BASE "device: cuda\n", 0, "fp32" },
		{ BASE "device: cuda:3\ntrain: {precision: bf16}\n", 3, "bf16" },
		{ BASE "device: 'cuda:12'\ntrain: {precision: fp16}\n", 12, "fp16" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ok_rc(load(cases[i].text, NULL), 0, "device %d, %s", cases[i].device, cases[i].prec);
		ok(cfg.device == cases[i].device && !strcmp(cfg.train.precision, cases[i].prec),
		   "read as device %d, %s", cases[i].device, cases[i].prec);
		dlt_config_free(&cfg);
	}
	round_trip(BASE "device: cuda:2\ntrain: {precision: fp16}\n", "device and precision");
	ok_rc(load(BASE "train: {precision: bf16, storage: 16}\n", NULL), 0, "storage: 16");
	ok(cfg.train.storage == 16, "read as 16");
	dlt_config_free(&cfg);
	round_trip(BASE "train: {precision: fp16, storage: 32}\n", "storage: 32");
	round_trip(BASE "train: {precision: bf16, storage: auto}\n", "storage: auto");
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
	round_trip(cnn_every_key, "every new key");
	round_trip(BASE "checkpoint: {every: 30s, best: train.loss, mode: max}\n",
		   "every N seconds, best with a mode");
	round_trip(BASE "checkpoint: {every: 7, keep: 1, best: train.acc}\n", "every N steps");
	round_trip("data: {train: '-', test: ' '}\nmodel: [relu]\n"
		   "train: {optimizer: {adam: {lr: 1e-3, eps: 1e-300}}, schedule: "
		   "{step: {gamma: 0.1}}}\n", "a stdin path, tiny numbers");
	ok_rc(load(example, NULL), 0, "the example");
	ok_rc(write(&cfg, &b), 0, "written");
	ok(strstr(b.data, "  optimizer:\n    adamw: {lr: 0.0003, beta1: 0.8, beta2: 0.99, "
		  "eps: 1e-07, weight_decay: 0.05}\n") != NULL, "numbers in their shortest form");
	ok(strstr(b.data, "  - leaky_relu: {slope: 0.01}\n") != NULL, "floats in their shortest form");
	ok(strstr(b.data, "  test: fmnist-test.dlt\n") != NULL, "plain paths stay plain");
	ok_rc(load(cnn_every_key, NULL), 0, "every new key");
	ok_rc(write(&cfg, &b), 0, "written");
	ok(b.data && !strcmp(b.data, cnn_written), "as expected");
	if (b.data && strcmp(b.data, cnn_written))
		diag("%s", b.data);
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
	test_conv();
	test_pools();
	test_residual();
	test_residual_depth();
	test_augment();
	test_checkpoint();
	test_value_errors();
	test_model_errors();
	test_cnn_errors();
	test_data_ckpt_errors();
	test_optim_errors();
	test_yaml_errors();
	test_big_map();
	test_overrides();
	test_cnn_overrides();
	test_override_depth();
	test_nodes();
	test_round_trip();
	test_device_precision();
	test_files();
	dlt_config_free(&cfg);
	return done_testing();
}
