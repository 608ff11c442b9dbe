/* loss: what a model is trained to predict, its loss and its named
 * metrics (dlt-train(1) METRICS), through one interface for every task.
 *
 * The targets reach the loss as the loader gives them: class ids (i32,
 * one a sample) for classification; floats (outputs a sample) for the
 * other tasks, standardised with the training set's mean and std for
 * regression, 0 or 1 for multi-label.  The metrics are sums over the
 * samples (dlt_loss_add) turned into values at the end of a window, an
 * epoch or an evaluation (dlt_loss_metrics), so that ranks add their
 * sums and a checkpoint keeps them. */
#ifndef DLT_NN_LOSS_H
#define DLT_NN_LOSS_H

#include <stddef.h>
#include <stdint.h>

enum dlt_task { DLT_TASK_CLASS = 0, DLT_TASK_REGRESS, DLT_TASK_MULTI };

/* The most metrics a task has, and the most sums its training window
 * keeps (the checkpoint holds them) */
#define DLT_MAX_METRICS 4
#define DLT_TRAIN_SUMS 4

typedef struct dlt_loss {
	int task;		/* enum dlt_task */
	int kind;		/* enum dlt_loss_kind (kernels.h) */
	float delta;		/* huber */
	int outputs;		/* a sample's: classes, targets or labels */
	/* positions a sample with a label each (a language model's T), 1
	 * otherwise; with bytes_per_token > 0 (token data) the metrics are
	 * acc, ppl and bpb (bits per byte: loss / ln 2 / bytes a token) */
	int rows;
	double bytes_per_token;
	/* regression: the targets' mean and std (outputs each), for
	 * errors in the targets' own units */
	const float *t_mean, *t_std;
	/* multi-label: a label is predicted where its logit is above this
	 * (0: a sigmoid above 1/2) */
	float cut;
} dlt_loss;

/* The task's loss from train.loss (enum dlt_loss_kind + 1, 0: the task's
 * own); an error naming the config when the two do not fit. */
int dlt_loss_init(dlt_loss *l, int task, int outputs, int cfg_loss, double delta,
		  const char *config);
/* Bytes of one sample's target as the loader hands it over (rows of them) */
size_t dlt_loss_target_size(const dlt_loss *l);
/* The metrics' names ("acc", "rmse", ...): training windows (eval 0) or
 * evaluations (1) */
int dlt_loss_metric_names(const dlt_loss *l, int eval, const char **names);
/* How many sums dlt_loss_add keeps (at most DLT_TRAIN_SUMS for eval 0) */
size_t dlt_loss_n_sums(const dlt_loss *l, int eval);
/* Adds the sums of rows outputs y (host memory, [rows, outputs]) against
 * their targets; hits: classification's count of argmax == label, which
 * softmax_xent gave already. */
void dlt_loss_add(const dlt_loss *l, int eval, const float *y, const void *targets, int rows,
		  int hits, double *sums);
/* The metrics of sums over n samples whose mean loss is loss, in
 * dlt_loss_metric_names' order */
void dlt_loss_metrics(const dlt_loss *l, int eval, const double *sums, double n, double loss,
		      double *values);

#endif
