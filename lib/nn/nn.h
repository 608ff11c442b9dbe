/* nn: layers, the model built from config, forward/backward, optimisers
 * and learning-rate schedules.  Activations are f32, [batch, features]
 * per layer (an image is its C*H*W features, channel-major).  All buffers
 * are planned once for the largest batch: the step allocates nothing. */
#ifndef DLT_NN_H
#define DLT_NN_H

#include "util/util.h"
#include "config/config.h"
#include "kernels/kernels.h"

/* A trainable tensor: weights, gradient and optimiser state together.
 * The w (likewise g, m, v) of all params of a model are slices of one
 * block, in param order: params[0].w spans n_weights floats, so the
 * optimiser and the all-reduce handle the whole model at once. */
typedef struct dlt_param {
	char name[64];		/* "0.w", "0.b": layer index and role */
	float *w, *g;		/* value and gradient, n floats each */
	float *m, *v;		/* optimiser state (adam m/v; sgd momentum in m) */
	size_t n;
	int ndim;
	int64_t dims[4];
} dlt_param;

typedef struct dlt_layer dlt_layer;
typedef struct dlt_model {
	const dlt_backend *be;
	dlt_layer *layers;
	int n_layers;
	int max_batch;
	int in_features, out_features;
	float **act;		/* act[0] = input, act[i+1] = output of layer i */
	/* grad[i] = d loss / d act[i].  grad[0] is NULL (the input's gradient
	 * is not computed) unless the caller points it at max_batch x
	 * in_features floats of its own; with no layers it is the logits'. */
	float **grad;
	dlt_param *params;
	int n_params;
	size_t n_weights;	/* total floats in params */
	uint64_t seed;		/* dropout masks: Philox keyed by seed, step, layer */
} dlt_model;

/* Builds the model of c for inputs of in_features and out classes; checks
 * that shapes fit (errors name "config:line"); initialises weights like
 * PyTorch (uniform +-1/sqrt(fan_in)) from c->train.seed. */
int dlt_model_init(dlt_model *m, const dlt_config *c, const dlt_backend *be,
		   int in_features, int n_classes, int max_batch);
void dlt_model_free(dlt_model *m);
/* Runs layers on m->act[0] (batch rows, filled by the caller); returns the
 * logits (m->act[n_layers]), or NULL if batch is not in 1..max_batch.
 * train != 0 enables dropout; step (>= 0) keys its mask. */
float *dlt_model_forward(dlt_model *m, int batch, int train, long long step);
/* Softmax cross-entropy of the logits against labels; fills the logits'
 * gradient; returns the mean loss, counts correct predictions. */
double dlt_model_loss(dlt_model *m, const int32_t *labels, int batch, int *correct);
/* Backpropagates from the loss gradient, filling every param's g. */
void dlt_model_backward(dlt_model *m, int batch);

/* Writes every param's weights as an f32 tensor named after the param. */
struct dlt_archive_writer;
int dlt_model_write(const dlt_model *m, struct dlt_archive_writer *w);

/* Optimiser over all params of a model (state allocated once, in the
 * params' m and v, freed by dlt_model_free). */
typedef struct dlt_optim {
	dlt_optim_cfg cfg;
	const dlt_backend *be;
	long long step;		/* updates done */
} dlt_optim;
int dlt_optim_init(dlt_optim *o, const dlt_optim_cfg *cfg, dlt_model *m);
void dlt_optim_step(dlt_optim *o, dlt_model *m, double lr);

/* Learning rate at an update step (0-based) of a run of steps_per_epoch x epochs. */
double dlt_lr_at(const dlt_optim_cfg *o, const dlt_sched_cfg *s, long long step,
		 long long steps_per_epoch, long long total_steps);

#endif
