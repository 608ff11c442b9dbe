/* config: the training configuration, from YAML (libyaml) and -s overrides.
 *
 * Loading is two steps.  The YAML is parsed into a tree of nodes that keep
 * the file and line they came from; -s key=value overrides edit that tree
 * (a dotted path, sequence items by 0-based index: model.3.dense=64; the
 * value is parsed as YAML, so -s 'train.optimizer={sgd: {lr: 0.1}}' works).
 * Then the tree is checked against the schema and turned into dlt_config:
 * unknown keys, wrong types and bad values are DLT_EINPUT errors naming
 * "file:line: ..." (or "-s key=value: ..." for an override). */
#ifndef DLT_CONFIG_H
#define DLT_CONFIG_H

#include "util/util.h"

/* A YAML node.  Mappings keep their keys in order. */
enum { DLT_NODE_SCALAR = 1, DLT_NODE_MAP, DLT_NODE_SEQ };
/* dist.pipeline's stages at most, and its schedules */
#define DLT_MAX_STAGES 64
enum dlt_pipe_schedule { DLT_PIPE_1F1B = 1, DLT_PIPE_GPIPE };

typedef struct dlt_node {
	int type;
	char *value;		/* scalar text */
	int quoted;		/* scalar was quoted: always a string */
	char *key;		/* when this node is a mapping value */
	const char *file;	/* "cnn.yaml" or "-s train.batch=abc" */
	int line;		/* 1-based; 0 for an override */
	struct dlt_node *items;	/* mapping values (with key) or sequence items */
	size_t n;
	char *own_file;		/* the "-s ..." string, on the top node an override added */
} dlt_node;

/* Parses YAML text into a tree; file names the source in messages (the
 * string must outlive the tree).  An empty document is an empty mapping. */
int dlt_node_parse(dlt_node *root, const char *text, size_t len, const char *file);
/* Applies "a.b.c=value" to the tree.  A missing mapping key is added; a
 * sequence index must exist or be the length (append).  A scalar on the
 * path stands for a mapping of that one key when the next part names it
 * (optimizer: adam, -s train.optimizer.adam.lr=3e-4).  The tree is
 * unchanged when it fails. */
int dlt_node_override(dlt_node *root, const char *assignment);
/* Frees what n holds (not n itself) and zeroes it. */
void dlt_node_free(dlt_node *n);
dlt_node *dlt_node_get(const dlt_node *map, const char *key);	/* NULL if absent */
/* Sets a DLT_EINPUT error "file:line: ..." (just "file: ..." when line is
 * 0, as for an override) and returns DLT_EINPUT. */
int dlt_node_error(const dlt_node *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

enum dlt_layer_kind {
	DLT_LAYER_DENSE = 1,
	DLT_LAYER_RELU,
	DLT_LAYER_LEAKY_RELU,
	DLT_LAYER_GELU,
	DLT_LAYER_TANH,
	DLT_LAYER_SIGMOID,
	DLT_LAYER_DROPOUT,
	DLT_LAYER_FLATTEN,
	DLT_LAYER_CONV2D,
	DLT_LAYER_MAXPOOL,
	DLT_LAYER_AVGPOOL,
	DLT_LAYER_GLOBAL_AVGPOOL,
	DLT_LAYER_BATCHNORM,
	DLT_LAYER_RESIDUAL,
	/* per position of a sequence [T, C] (dlt-train(1) LANGUAGE MODELS) */
	DLT_LAYER_EMBEDDING,
	DLT_LAYER_POSITIONAL,
	DLT_LAYER_LAYERNORM,
	DLT_LAYER_ATTENTION,
	DLT_LAYER_COUNT
};

#define DLT_NAME_MAX 32

/* One layer of model:.  Pairs are [height, width]; a single number in the
 * YAML sets both. */
typedef struct dlt_layer_cfg {
	int kind;
	int line;		/* for messages from later checks (shape errors) */
	char name[DLT_NAME_MAX];	/* name: on any layer, "" without */
	int units;		/* dense (0 with tie: the tied layer's vocab) */
	char tie[DLT_NAME_MAX];	/* dense: the embedding whose weights it shares */
	int vocab, dim;		/* embedding */
	int max;		/* positional: the longest sequence */
	int heads, causal;	/* attention: heads, causal mask (default true) */
	int tanh;		/* gelu: GPT-2's tanh approximation */
	int bias;		/* dense, conv2d: 1 (default) or 0 */
	float slope;		/* leaky_relu: negative slope (default 0.01) */
	float rate;		/* dropout, attention: drop probability, [0, 1) */
	int filters;		/* conv2d: output channels (required) */
	int kernel[2];		/* conv2d (required), maxpool/avgpool (required) */
	int stride[2];		/* conv2d: default 1; pools: default kernel */
	int pad[2];		/* conv2d, pools: zeros on each side, default 0 */
	int dilation[2];	/* conv2d: default 1 */
	int groups;		/* conv2d: default 1 */
	float momentum, eps;	/* batchnorm: 0.1, 1e-5 (PyTorch's); layernorm: eps */
	/* residual: y = body(x) + shortcut(x); no shortcut layers is the
	 * identity.  YAML: residual: [layers] or
	 * residual: {layers: [...], shortcut: [...]} */
	struct dlt_layer_cfg *body, *shortcut;
	int n_body, n_shortcut;
} dlt_layer_cfg;

enum dlt_optim_kind { DLT_OPT_SGD = 1, DLT_OPT_ADAM, DLT_OPT_ADAMW };
typedef struct dlt_optim_cfg {
	int kind;
	double lr;		/* default 1e-3 (adam, adamw), 1e-2 (sgd) */
	double momentum;	/* sgd, default 0 */
	int nesterov;		/* sgd, default 0; needs momentum > 0 */
	double weight_decay;	/* default 0 (adam, sgd), 1e-2 (adamw) */
	int decay_matrices;	/* adamw decay: matrices (GPT-2's: weights of 2+
				 * dimensions only) rather than all */
	double beta1, beta2, eps;	/* adam/adamw: 0.9, 0.999, 1e-8 */
} dlt_optim_cfg;

enum dlt_sched_kind { DLT_SCHED_CONSTANT = 1, DLT_SCHED_STEP, DLT_SCHED_COSINE };
typedef struct dlt_sched_cfg {
	int kind;
	int warmup;		/* steps of linear warmup from 0, any schedule */
	int step_every;		/* step: epochs between decays (default 1) */
	double gamma;		/* step: factor (default 0.1) */
	double min_lr;		/* cosine: floor (default 0) */
} dlt_sched_cfg;

/* train.loss's names, indexed by enum dlt_loss_kind (kernels.h) */
extern const char *const dlt_loss_names[];

typedef struct dlt_config {
	char *path;		/* the file it came from */
	struct {
		char *train, *test;	/* archive paths; test may be NULL */
		/* data.train and data.test may each list several archives,
		 * read as one dataset: all the paths (train_paths[0] is
		 * train's, a copy); n_test_paths 0 without a test set */
		char **train_paths, **test_paths;
		int n_train_paths, n_test_paths;
		char *val;		/* token archives: the validation stream, or NULL */
		double val_split;	/* [0, 1): fraction of train held out */
		/* training images only, in the loader thread: a random crop
		 * of the image zero-padded by crop pixels on each side (0:
		 * none), a horizontal flip with probability 1/2 */
		struct {
			int crop;	/* data.augment.crop, default 0 */
			int flip;	/* data.augment.flip, default 0 */
		} augment;
	} data;
	dlt_layer_cfg *layers;
	int n_layers;
	int model_line;
	struct {
		int epochs;		/* >= 1, default 1 */
		int batch;		/* >= 1, default 32 */
		long long seed;		/* default 0 */
		int threads;		/* 0: DLT_THREADS / OMP_NUM_THREADS / cores */
		int log_every;		/* steps between train records, default 100 */
		char precision[8];	/* "fp32" (default), "bf16", "fp16" */
		/* bf16 and fp16: where backward's activations wait, 16 or 32
		 * bits; 0 (auto): 16 on the CPU where that takes a tenth less
		 * memory, 32 on a GPU */
		int storage;
		/* fp16's dynamic loss scaling: the first scale (a power of
		 * two, default 65536) and the clean steps after which it
		 * doubles (default 2000), as PyTorch's GradScaler */
		struct {
			double init;
			int growth_interval;
		} loss_scale;
		dlt_optim_cfg optim;
		dlt_sched_cfg sched;
		/* train.loss: enum dlt_loss_kind + 1, 0: the task's own
		 * (cross_entropy for classes, mse for float targets, bce for
		 * multi-hot labels); huber: {delta}, default 1 */
		int loss;
		double huber_delta;
		/* language models (dlt-train(1) LANGUAGE MODELS): */
		long long steps;	/* instead of epochs; 0: epochs */
		int context;		/* T: windows of T + 1 tokens */
		long long eval_every;	/* steps between evaluations; 0: at the end */
		int eval_batches;	/* batches of fixed windows an evaluation takes (20) */
		double clip;		/* global gradient-norm clipping; 0: none */
		int accumulate;		/* micro-batches a step (>= 1) */
		int init_gpt2;		/* init: gpt2 (std 0.02, residual projections
					 * by 1/sqrt(2 layers)) */
	} train;
	/* checkpoint: {every: epoch | N steps | N seconds, keep: N,
	 * best: METRIC, mode: max | min} */
	struct {
		int every;		/* DLT_CKPT_EPOCH (default), _STEPS, _SECONDS */
		long long every_n;	/* steps or seconds (1 for epoch) */
		int keep;		/* newest checkpoints kept, default 3, >= 1 */
		char *best;		/* "test.acc", "val.rmse", ...; NULL: none */
		int best_max;		/* mode: 1 max, 0 min; default
					 * dlt_metric_mode's */
	} ckpt;
	/* dist: data parallelism (dlt-train(1) MULTI-GPU AND MULTI-NODE) */
	struct {
		double timeout;		/* s a rank waits for the others, default 300 */
		double bucket_mb;	/* gradient bucket size, default 25 */
		/* ZeRO stage, 0 to 3, which sums the gradients in rank order
		 * (the same bits for every stage); -1 when not set: summed by
		 * the library's all-reduce */
		int zero;
		/* dist.pipeline: stages (0: none), micro-batches a step, the
		 * schedule (enum dlt_pipe_schedule), and the model's layers
		 * (indices in model:) where stages 2 to S begin, n_split of
		 * them (0: the stages balanced by cost) */
		struct {
			int stages, micro, schedule;
			int split[DLT_MAX_STAGES - 1], n_split;
		} pipe;
	} dist;
	int device;		/* -1: cpu (default); N: cuda:N */
} dlt_config;

enum dlt_ckpt_every { DLT_CKPT_EPOCH = 1, DLT_CKPT_STEPS, DLT_CKPT_SECONDS };

/* Loads path (or "-" for stdin), applies the overrides in order, checks
 * everything, fills c with defaults where keys are absent.  A null value
 * ("key:", "key: ~", -s key=) is the same as an absent key.  On error c is
 * left empty (dlt_config_free on it is harmless). */
int dlt_config_load(dlt_config *c, const char *path, char *const *overrides, int n_overrides);
/* The same from text in memory; name is used in messages. */
int dlt_config_load_string(dlt_config *c, const char *text, size_t len, const char *name,
			   char *const *overrides, int n_overrides);
/* The resolved config as YAML, every key with its value, defaults
 * included; loading it gives the same dlt_config. */
int dlt_config_write_yaml(const dlt_config *c, dlt_buf *out);
void dlt_config_free(dlt_config *c);

#endif
