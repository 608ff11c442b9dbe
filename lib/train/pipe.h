/* dist.pipeline: the model's ops cut into stages, one a rank, and a
 * step's micro-batches through them in GPipe's order (every forward, then
 * every backward) or 1F1B's (a stage s of S does S - s - 1 forwards, then
 * one forward and one backward by turns).  Before its backward a stage
 * computes its forward again from the input it kept (GPipe's re-
 * materialisation): it holds the activations of one micro-batch, and the
 * inputs of the ones in flight.  The ranks are S stages times W data-
 * parallel replicas, rank r stage r / W of replica r % W; activations
 * and their gradients go point to point within a replica (dlt_comm_send,
 * _recv), and the caller sums each stage's gradients over its replicas. */
#ifndef DLT_TRAIN_PIPE_H
#define DLT_TRAIN_PIPE_H

#include "comm/comm.h"
#include "config/config.h"
#include "nn/nn.h"

typedef struct dlt_pipe {
	int stages, stage, micro, schedule;
	int width, replica;	/* W, and this rank's replica */
	int *first;		/* each stage's first op, then n_layers */
	size_t *ranges;		/* each stage's params in the weight block, then n_weights */
	int lo, hi;		/* this stage's ops */
	size_t w_in, w_out;	/* floats a sample of its input and its output */
	/* the batch's rows of this stage's input, output, output gradient
	 * and input gradient (what it receives and sends), the sums of its
	 * gradients over the micro-batches, and a tied head's */
	float *in, *out, *gout, *gin, *acc, *tied_acc;
	int tied;		/* the embedding param a tied head reads, -1 */
	double waited;		/* seconds this stage has waited to receive: its bubble */
	dlt_model *m;
	dlt_comm *c;
} dlt_pipe;

/* The stages of c->dist.pipeline on comm c's ranks (a multiple of the
 * stages) for m, whose model must cut there (dlt_model_can_cut),
 * balanced by cost where no split is given; batch rows a step at most
 * (a replica's).  DLT_EINPUT (naming where, the config) for a pipeline
 * that does not fit the model or the ranks. */
int dlt_pipe_init(dlt_pipe *p, const dlt_config *c, dlt_model *m, dlt_comm *comm, int batch,
		  const char *where);
void dlt_pipe_free(dlt_pipe *p);
/* Each rank's range of the weight block (stages x width + 1 entries):
 * its stage's params cut into one range a replica, what it updates */
void dlt_pipe_rank_ranges(const dlt_pipe *p, size_t *ranges);

/* The loss of micro-batch rows [k0, k0 + n), on the last stage after its
 * forward: fills the output's gradient (dlt_model_loss) */
typedef int dlt_pipe_loss_fn(void *ctx, int k0, int n);

/* One step of b rows of input x (read by the first stage): its micro-
 * batches through every stage and back.  The stage's weight gradients of
 * the whole batch end in m->dev_g, the tied head's added to its
 * embedding's on the first stage; m->grad_batch is the caller's. */
int dlt_pipe_step(dlt_pipe *p, const float *x, int b, long long step, dlt_pipe_loss_fn *loss,
		  void *ctx);
/* After the optimizer's step: the first stage's new embedding to the
 * tied head's stage. */
int dlt_pipe_after_step(dlt_pipe *p);
/* Evaluation: b rows through the stages, loss(ctx, 0, b) on the last. */
int dlt_pipe_forward(dlt_pipe *p, const float *x, int b, dlt_pipe_loss_fn *loss, void *ctx);

#endif
