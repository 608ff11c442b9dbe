/* The tasks' losses and metrics (loss.h). */
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "config/config.h"
#include "util/util.h"
#include "nn/loss.h"

/* The loss each task trains with by default, and which it may take */
static int task_loss(int task)
{
	return task == DLT_TASK_CLASS ? DLT_LOSS_XENT
	     : task == DLT_TASK_REGRESS ? DLT_LOSS_MSE : DLT_LOSS_BCE;
}

static const char *task_name(int task)
{
	return task == DLT_TASK_CLASS ? "class ids" : task == DLT_TASK_REGRESS
	     ? "float targets" : "multi-hot labels";
}

int dlt_loss_init(dlt_loss *l, int task, int outputs, int cfg_loss, double delta,
		  const char *config)
{
	int kind = cfg_loss ? cfg_loss - 1 : task_loss(task);
	int fits = task == DLT_TASK_CLASS ? kind == DLT_LOSS_XENT
		 : task == DLT_TASK_MULTI ? kind == DLT_LOSS_BCE
		 : kind != DLT_LOSS_XENT && kind != DLT_LOSS_BCE;

	memset(l, 0, sizeof(*l));
	if (!fits)
		return dlt_error(DLT_EINPUT, "%s: train.loss %s does not fit data with %s "
				 "(use %s)", config, dlt_loss_names[kind], task_name(task),
				 task == DLT_TASK_REGRESS ? "mse, l1 or huber"
				 : dlt_loss_names[task_loss(task)]);
	l->task = task;
	l->kind = kind;
	l->delta = (float)delta;
	l->outputs = outputs;
	l->rows = 1;
	return 0;
}

size_t dlt_loss_target_size(const dlt_loss *l)
{
	return (size_t)l->rows *
	       (l->task == DLT_TASK_CLASS ? sizeof(int32_t) : (size_t)l->outputs * sizeof(float));
}

int dlt_loss_metric_names(const dlt_loss *l, int eval, const char **names)
{
	int n = 0;
	switch (l->task) {
	case DLT_TASK_CLASS:
		names[n++] = "acc";
		if (l->bytes_per_token > 0) {
			names[n++] = "ppl";
			names[n++] = "bpb";
		} else if (eval && l->outputs > 5) {
			names[n++] = "top5";
		}
		break;
	case DLT_TASK_REGRESS:
		names[n++] = "rmse";
		names[n++] = "mae";
		if (eval)
			names[n++] = "r2";
		break;
	default:
		names[n++] = "acc";
		names[n++] = "f1";
	}
	return n;
}

/* Sums, by task:
 *   class      hits, top-5 hits (eval)
 *   regression squared errors, absolute errors, then per output (eval):
 *              squared errors, targets, squared targets (for R^2)
 *   multi      right labels, true positives, false positives, false
 *              negatives */
size_t dlt_loss_n_sums(const dlt_loss *l, int eval)
{
	switch (l->task) {
	case DLT_TASK_CLASS:
		return 2;
	case DLT_TASK_REGRESS:
		return 2 + (eval ? 3 * (size_t)l->outputs : 0);
	default:
		return 4;
	}
}

/* Whether label is among the 5 largest of row (ties: the lower index
 * first, as the argmax) */
static int in_top5(const float *row, int cols, int label)
{
	int above = 0;
	if (label < 0 || label >= cols)
		return 0;
	for (int j = 0; j < cols && above < 5; j++)
		above += row[j] > row[label] || (row[j] == row[label] && j < label);
	return above < 5;
}

void dlt_loss_add(const dlt_loss *l, int eval, const float *y, const void *targets, int rows,
		  int hits, double *sums)
{
	const int k = l->outputs;
	const float *t = targets;

	if (l->task == DLT_TASK_CLASS) {
		sums[0] += hits;
		for (int r = 0; eval && k > 5 && !(l->bytes_per_token > 0) && r < rows; r++)
			sums[1] += in_top5(y + (size_t)r * k, k, ((const int32_t *)targets)[r]);
		return;
	}
	for (int r = 0; r < rows; r++)
		for (int j = 0; j < k; j++) {
			size_t i = (size_t)r * k + j;
			if (l->task == DLT_TASK_REGRESS) {
				double std = l->t_std ? l->t_std[j] : 1;
				double mean = l->t_mean ? l->t_mean[j] : 0;
				double e = ((double)y[i] - t[i]) * std, tv = t[i] * std + mean;
				sums[0] += e * e;
				sums[1] += fabs(e);
				if (eval) {
					sums[2 + 3 * j] += e * e;
					sums[3 + 3 * j] += tv;
					sums[4 + 3 * j] += tv * tv;
				}
			} else {
				int p = y[i] > l->cut, truth = t[i] > 0.5f;
				sums[0] += p == truth;
				sums[1] += p && truth;
				sums[2] += p && !truth;
				sums[3] += !p && truth;
			}
		}
}

void dlt_loss_metrics(const dlt_loss *l, int eval, const double *sums, double n, double loss,
		      double *values)
{
	const double k = l->outputs;

	switch (l->task) {
	case DLT_TASK_CLASS:
		values[0] = sums[0] / (n * l->rows);
		if (l->bytes_per_token > 0) {
			values[1] = exp(loss);
			values[2] = loss / M_LN2 / l->bytes_per_token;
		} else if (eval && l->outputs > 5) {
			values[1] = sums[1] / n;
		}
		return;
	case DLT_TASK_REGRESS:
		values[0] = sqrt(sums[0] / (n * k));
		values[1] = sums[1] / (n * k);
		if (eval) {	/* R^2 per output, averaged (scikit-learn's r2_score) */
			double r2 = 0;
			for (int j = 0; j < l->outputs; j++) {
				const double *s = sums + 2 + 3 * j;
				double sst = s[2] - s[1] * s[1] / n;
				r2 += sst > 0 ? 1 - s[0] / sst : s[0] > 0 ? 0 : 1;
			}
			values[2] = r2 / k;
		}
		return;
	default:	/* multi-label: accuracy over every label, micro F1 */
		values[0] = sums[0] / (n * k);
		values[1] = sums[1] + sums[2] + sums[3] > 0
			  ? 2 * sums[1] / (2 * sums[1] + sums[2] + sums[3]) : 1;
	}
}
