/* The training loop.  One place where the step happens: next batch,
 * forward, loss, backward, optimiser step, metrics. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "archive/archive.h"
#include "kernels/cpu/threads.h"
#include "rundir.h"
#include "train.h"

/* Philox streams of the run's seed: one for the validation split, one per
 * epoch for the shuffle.  Model init and dropout use their own (nn.c). */
#define STREAM_SPLIT 0x5350ull
#define STREAM_EPOCH(e) ((0x4550ull << 20) + (uint64_t)(e))

typedef struct run_state {
	const dlt_config *c;
	const dlt_train_hooks *h;
	dlt_run run;
	dlt_model m;
	dlt_optim opt;
	dlt_dataset train, test;
	dlt_loader train_ld, test_ld;
	int have_test, train_ld_up, test_ld_up;
	uint32_t *base;		/* samples of train used for training */
	uint32_t *order;	/* base in this epoch's order */
	uint32_t *val_order, *test_order;
	size_t n_train, n_val;
} run_state;

static int emit(run_state *s, dlt_json *j)
{
	int rc;
	dlt_json_end(j);
	if ((rc = dlt_json_ok(j)) == 0)
		rc = dlt_run_record(&s->run, j->buf.data);
	if (rc == 0 && s->h && s->h->record)
		s->h->record(s->h->ctx, j->buf.data);
	dlt_json_free(j);
	return rc;
}

static void step_input(run_state *s, const float *x, int b)
{
	memcpy(s->m.act[0], x, (size_t)b * s->train.features * sizeof(float));
}

/* Mean loss and accuracy of the model on order[0..n) of a dataset. */
static void evaluate(run_state *s, dlt_loader *l, const uint32_t *order, size_t n,
		     double *loss, double *acc)
{
	double sum = 0;
	long long correct = 0;
	float *x;
	int32_t *y;
	int b, c;

	dlt_loader_pass(l, order, n);
	while ((b = dlt_loader_next(l, &x, &y)) > 0) {
		step_input(s, x, b);
		dlt_model_forward(&s->m, b, 0, 0);
		sum += dlt_model_loss(&s->m, y, b, &c) * b;
		correct += c;
	}
	*loss = sum / n;
	*acc = (double)correct / n;
}

static int emit_eval(run_state *s, const char *split, int epoch, double loss, double acc)
{
	dlt_json j;
	dlt_json_begin(&j);
	dlt_json_str(&j, "event", "eval");
	dlt_json_str(&j, "split", split);
	dlt_json_int(&j, "epoch", epoch);
	dlt_json_int(&j, "step", s->opt.step);
	dlt_json_num(&j, "loss", loss);
	dlt_json_num(&j, "acc", acc);
	return emit(s, &j);
}

static uint32_t *identity(size_t n)
{
	uint32_t *p = dlt_malloc(n * sizeof(*p));
	if (p)
		for (size_t i = 0; i < n; i++)
			p[i] = (uint32_t)i;
	return p;
}

static int load_data(run_state *s)
{
	const dlt_config *c = s->c;
	dlt_rng rng;
	uint32_t *all;
	int rc;

	DLT_TRY(dlt_dataset_load(&s->train, c->data.train));
	if (c->data.test) {
		DLT_TRY(dlt_dataset_load(&s->test, c->data.test));
		DLT_TRY(dlt_dataset_use_stats(&s->test, &s->train));
		if (s->test.n_classes > s->train.n_classes)
			return dlt_error(DLT_EINPUT, "%s: %d classes, but %s has %d", c->data.test,
					 s->test.n_classes, c->data.train, s->train.n_classes);
		s->have_test = 1;
		if (!(s->test_order = identity(s->test.n)))
			return DLT_ENOMEM;
	}
	/* the validation split is a fixed random subset: the same for every
	 * epoch and for a resumed run */
	s->n_val = (size_t)floor(c->data.val_split * s->train.n);
	s->n_train = s->train.n - s->n_val;
	if (s->n_train == 0)
		return dlt_error(DLT_EINPUT, "%s: data.val_split %g leaves no training samples",
				 c->data.train, c->data.val_split);
	if (!(all = dlt_malloc(s->train.n * sizeof(*all))))
		return DLT_ENOMEM;
	dlt_rng_init(&rng, (uint64_t)c->train.seed, STREAM_SPLIT);
	if (s->n_val)
		dlt_rng_permute(&rng, all, s->train.n);
	else
		for (size_t i = 0; i < s->train.n; i++)
			all[i] = (uint32_t)i;
	s->base = all;
	if (!(s->order = dlt_malloc(s->n_train * sizeof(uint32_t))))
		return DLT_ENOMEM;
	if (s->n_val) {
		if (!(s->val_order = dlt_malloc(s->n_val * sizeof(uint32_t))))
			return DLT_ENOMEM;
		memcpy(s->val_order, all + s->n_train, s->n_val * sizeof(uint32_t));
	}
	return 0;
fail:
	return rc;
}

/* One epoch's order: a permutation of the training part from the epoch's
 * own stream, a function of (seed, epoch) alone, so that a resumed run
 * replays any epoch without the ones before it. */
static void shuffle(run_state *s, int epoch)
{
	dlt_rng rng;
	dlt_rng_init(&rng, (uint64_t)s->c->train.seed, STREAM_EPOCH(epoch));
	dlt_rng_permute(&rng, s->order, s->n_train);
	for (size_t i = 0; i < s->n_train; i++)
		s->order[i] = s->base[s->order[i]];
}

static int setup(run_state *s, const char *rundir)
{
	const dlt_config *c = s->c;
	int threads = c->train.threads, rc;

	if (threads == 0 && (threads = dlt_env_threads()) < 0)
		return threads;
	dlt_cpu_set_threads(threads);
	DLT_TRY(load_data(s));
	DLT_TRY(dlt_model_init(&s->m, c, dlt_backend_cpu(), s->train.features,
			       s->train.n_classes, c->train.batch));
	DLT_TRY(dlt_optim_init(&s->opt, &c->train.optim, &s->m));
	DLT_TRY(dlt_loader_start(&s->train_ld, &s->train, c->train.batch));
	s->train_ld_up = 1;
	if (s->have_test) {
		DLT_TRY(dlt_loader_start(&s->test_ld, &s->test, c->train.batch));
		s->test_ld_up = 1;
	}
	/* the run directory last: bad input must not leave one behind */
	DLT_TRY(dlt_run_open(&s->run, rundir, c));
	return 0;
fail:
	return rc;
}

static void teardown(run_state *s)
{
	if (s->train_ld_up)
		dlt_loader_stop(&s->train_ld);
	if (s->test_ld_up)
		dlt_loader_stop(&s->test_ld);
	dlt_model_free(&s->m);
	dlt_dataset_free(&s->train);
	dlt_dataset_free(&s->test);
	free(s->base);
	free(s->order);
	free(s->val_order);
	free(s->test_order);
}

/* The trained weights, RUNDIR/model.dlt: one f32 tensor per param. */
static int save_model(run_state *s, int epoch)
{
	dlt_archive_writer *w = NULL;
	char *path;
	dlt_json j;
	int rc;

	if (!s->run.dir)
		return 0;
	if (!(path = dlt_run_file(&s->run, "model.dlt")))
		return DLT_ENOMEM;
	dlt_json_begin(&j);
	dlt_json_str(&j, "kind", "model");
	dlt_json_int(&j, "epoch", epoch);
	dlt_json_int(&j, "step", s->opt.step);
	dlt_json_int(&j, "in_features", s->train.features);
	dlt_json_int(&j, "num_classes", s->train.n_classes);
	dlt_json_end(&j);
	DLT_TRY(dlt_json_ok(&j));
	DLT_TRY(dlt_archive_create(&w, path));
	DLT_TRY(dlt_archive_write_meta(w, j.buf.data));
	DLT_TRY(dlt_model_write(&s->m, w));
	rc = dlt_archive_writer_close(w);
	w = NULL;
fail:
	if (w)
		dlt_archive_writer_abort(w);
	dlt_json_free(&j);
	free(path);
	return rc;
}

/* Metrics of the steps since the last train record. */
typedef struct window {
	double loss_sum, t0;
	long long correct, samples;
} window;

static int emit_train(run_state *s, int epoch, double lr, window *w)
{
	dlt_json j;
	double now = dlt_now();
	dlt_json_begin(&j);
	dlt_json_str(&j, "event", "train");
	dlt_json_int(&j, "epoch", epoch);
	dlt_json_int(&j, "step", s->opt.step);
	dlt_json_num(&j, "loss", w->loss_sum / w->samples);
	dlt_json_num(&j, "acc", (double)w->correct / w->samples);
	dlt_json_num(&j, "lr", lr);
	dlt_json_num(&j, "samples_per_s", w->samples / (now - w->t0));
	dlt_json_num(&j, "time", now - s->run.start_mono);
	memset(w, 0, sizeof(*w));
	w->t0 = now;
	return emit(s, &j);
}

int dlt_train_run(const dlt_config *c, const char *rundir, const dlt_train_hooks *h,
		  dlt_train_result *res)
{
	run_state s = { .c = c, .h = h };
	const int epochs = c->train.epochs;
	long long spe, total;
	double t_start, samples_done = 0;
	int rc;

	res->test_loss = res->test_acc = NAN;
	DLT_TRY(setup(&s, rundir));
	spe = (long long)((s.n_train + c->train.batch - 1) / c->train.batch);
	total = spe * epochs;
	t_start = s.run.start_mono = dlt_now();

	for (int epoch = 1; epoch <= epochs; epoch++) {
		dlt_epoch_summary sum = { .epoch = epoch, .epochs = epochs,
					  .val_loss = NAN, .val_acc = NAN,
					  .test_loss = NAN, .test_acc = NAN };
		window w = { .t0 = dlt_now() };
		double ep_loss = 0, ep_t0 = w.t0, lr = 0;
		long long ep_correct = 0, ep_samples = 0, in_epoch = 0;
		float *x;
		int32_t *y;
		int b;

		shuffle(&s, epoch);
		dlt_loader_pass(&s.train_ld, s.order, s.n_train);
		while ((b = dlt_loader_next(&s.train_ld, &x, &y)) > 0) {
			int correct;
			double loss;

			lr = dlt_lr_at(&c->train.optim, &c->train.sched, s.opt.step, spe, total);
			step_input(&s, x, b);
			dlt_model_forward(&s.m, b, 1, s.opt.step);
			loss = dlt_model_loss(&s.m, y, b, &correct);
			if (!isfinite(loss)) {
				rc = dlt_error(DLT_EFAIL, "step %lld: the loss is %g (diverged; "
					       "try a lower learning rate)", s.opt.step + 1, loss);
				goto fail;
			}
			dlt_model_backward(&s.m, b);
			dlt_optim_step(&s.opt, &s.m, lr);

			w.loss_sum += loss * b;
			w.correct += correct;
			w.samples += b;
			ep_loss += loss * b;
			ep_correct += correct;
			ep_samples += b;
			samples_done += b;
			in_epoch++;
			if (s.opt.step % c->train.log_every == 0 || in_epoch == spe)
				DLT_TRY(emit_train(&s, epoch, lr, &w));
			if (h && h->progress) {
				double el = dlt_now() - t_start, rate = samples_done / el;
				dlt_progress p = {
					.epoch = epoch, .epochs = epochs, .step = s.opt.step,
					.steps_per_epoch = spe, .step_in_epoch = in_epoch,
					.loss = ep_loss / ep_samples, .samples_per_s = rate,
					.elapsed_s = el,
					.eta_s = (double)(total - s.opt.step) * c->train.batch / rate,
				};
				h->progress(h->ctx, &p);
			}
		}
		sum.loss = ep_loss / ep_samples;
		sum.acc = (double)ep_correct / ep_samples;
		sum.samples_per_s = ep_samples / (dlt_now() - ep_t0);
		if (s.n_val) {
			evaluate(&s, &s.train_ld, s.val_order, s.n_val, &sum.val_loss, &sum.val_acc);
			DLT_TRY(emit_eval(&s, "val", epoch, sum.val_loss, sum.val_acc));
		}
		if (s.have_test) {
			evaluate(&s, &s.test_ld, s.test_order, s.test.n, &sum.test_loss, &sum.test_acc);
			DLT_TRY(emit_eval(&s, "test", epoch, sum.test_loss, sum.test_acc));
			res->test_loss = sum.test_loss;
			res->test_acc = sum.test_acc;
		}
		sum.elapsed_s = dlt_now() - t_start;
		if (h && h->epoch)
			h->epoch(h->ctx, &sum);
	}
	res->steps = s.opt.step;
	res->elapsed_s = dlt_now() - t_start;
	DLT_TRY(save_model(&s, epochs));
	{
		dlt_json j;
		dlt_json_begin(&j);
		dlt_json_str(&j, "event", "done");
		dlt_json_int(&j, "epoch", epochs);
		dlt_json_int(&j, "step", s.opt.step);
		if (s.have_test) {
			dlt_json_num(&j, "test.loss", res->test_loss);
			dlt_json_num(&j, "test.acc", res->test_acc);
		}
		dlt_json_num(&j, "samples_per_s", samples_done / res->elapsed_s);
		dlt_json_num(&j, "time", res->elapsed_s);
		DLT_TRY(emit(&s, &j));
	}
	DLT_TRY(dlt_run_status(&s.run, "done"));
	rc = dlt_run_close(&s.run);
	teardown(&s);
	return rc;
fail:
	if (s.run.dir) {
		/* the run's own status says it failed; the error is the caller's to show */
		char msg[1024];
		snprintf(msg, sizeof(msg), "%s", dlt_errmsg());
		dlt_run_status(&s.run, "failed");
		dlt_run_close(&s.run);
		dlt_error(rc, "%s", msg);
	}
	teardown(&s);
	return rc;
}
