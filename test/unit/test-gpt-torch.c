/* A GPT's logits, loss and gradients, for PyTorch to check: the peer
 * is test/py/gpt-torch.py, run by test/t2610-gpt-torch.sh.
 *
 *   test-gpt-torch --dump DIR CONFIG [MODEL]
 * builds CONFIG's model for train.batch (B) windows of train.context (T)
 * tokens, with the config's init (train.seed, train.init) or, given
 * MODEL (a model file or checkpoint), with its weights; draws B windows
 * of T + 1 ids, the first T the input and the last T the targets (the
 * next tokens), as a token stream gives them; runs forward, the mean
 * per-token cross-entropy and backward once, as a training step does.
 * Writes DIR/model.dlt (the weights as a model file, for dlt-ckpt
 * export), DIR/ids.npy and DIR/targets.npy (i32 [B, T]), DIR/logits.npy
 * (f32 [B, T, V]), DIR/loss (the loss, %.17g) and DIR/grad/NAME.npy for
 * every param (f32, of the param's shape).
 *
 * Without arguments it checks what needs no PyTorch: the loss is the
 * mean cross-entropy of the logits (in double), the logits of a position
 * do not depend on the tokens after it, and the dump writes a gradient
 * for every param. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tap.h"
#include "archive/archive.h"
#include "ckpt/ckpt.h"
#include "nn/nn.h"
#include "train/ckpt.h"

/* the shape of the test: 2 blocks of 2 heads, C 32, T 16 */
static const char gpt_yaml[] =
	"data: {train: t.dlt}\n"
	"model:\n"
	"  - embedding: {vocab: 256, dim: 32, name: wte}\n"
	"  - positional: {max: 16}\n"
	"  - residual: [layernorm, attention: {heads: 2}]\n"
	"  - residual: [layernorm, dense: 128, gelu: tanh, dense: 32]\n"
	"  - residual: [layernorm, attention: {heads: 2}]\n"
	"  - residual: [layernorm, dense: 128, gelu: tanh, dense: 32]\n"
	"  - layernorm\n"
	"  - dense: {tie: wte, bias: false}\n"
	"train: {steps: 1, context: 16, batch: 4, seed: 5, init: %s}\n";

typedef struct gpt {
	dlt_config c;
	dlt_model m;
	int B, T, V;
	int32_t *ids, *targets;
	float *logits;		/* the last step's, taken before its loss */
	double loss;
} gpt;

static void gpt_free(gpt *g)
{
	dlt_model_free(&g->m);
	dlt_config_free(&g->c);
	free(g->ids);
	free(g->targets);
	free(g->logits);
}

/* Builds the model of g->c (loaded) and draws its windows. */
static int gpt_build(gpt *g, const char *model)
{
	dlt_loss l;
	dlt_archive *a = NULL;
	dlt_rng r;
	int rc;

	g->B = g->c.train.batch;
	g->T = g->c.train.context;
	if (g->T < 1 || !g->c.n_layers || g->c.layers[0].kind != DLT_LAYER_EMBEDDING)
		return dlt_error(DLT_EINPUT, "the config needs train.context and an embedding first");
	g->V = g->c.layers[0].vocab;
	DLT_TRY_RC(dlt_model_init(&g->m, &g->c, dlt_backend_cpu(), (dlt_shape){ g->T, 1, 1 }, g->V,
				  g->B));
	if (g->m.out_features != g->V || g->m.out_rows != g->T)
		return dlt_error(DLT_EINPUT, "the model's outputs are not logits over the "
				 "vocabulary for each position");
	DLT_TRY_RC(dlt_loss_init(&l, DLT_TASK_CLASS, g->V, 0, 0, "config"));
	l.rows = g->T;
	DLT_TRY_RC(dlt_model_set_loss(&g->m, &l));
	if (model) {
		DLT_TRY_RC(dlt_archive_open(&a, model));
		rc = dlt_model_read(&g->m, a);
		dlt_archive_close(a);
		if (rc < 0)
			return rc;
	}
	g->ids = malloc((size_t)g->B * g->T * sizeof(int32_t));
	g->targets = malloc((size_t)g->B * g->T * sizeof(int32_t));
	g->logits = malloc((size_t)g->B * g->T * g->V * sizeof(float));
	if (!g->ids || !g->targets || !g->logits)
		return dlt_error(DLT_ENOMEM, "out of memory");
	dlt_rng_init(&r, 2610, 1);
	for (int b = 0; b < g->B; b++) {
		int32_t w[1024 + 1];
		for (int t = 0; t <= g->T && t <= 1024; t++)
			w[t] = (int32_t)dlt_rng_below(&r, (uint32_t)g->V);
		memcpy(g->ids + (size_t)b * g->T, w, (size_t)g->T * sizeof(int32_t));
		memcpy(g->targets + (size_t)b * g->T, w + 1, (size_t)g->T * sizeof(int32_t));
	}
	return 0;
}

/* One training step's forward, loss and backward on g's windows; its
 * logits, taken before the loss writes their gradient over them */
static float *gpt_step(gpt *g)
{
	memcpy(dlt_model_input(&g->m), g->ids, (size_t)g->B * g->T * sizeof(int32_t));
	if (!dlt_model_forward(&g->m, g->B, 1, 0))
		return NULL;
	dlt_model_output(&g->m, g->logits, g->B);
	g->loss = dlt_model_loss(&g->m, g->targets, g->B, NULL);
	dlt_model_backward(&g->m, g->B);
	return g->logits;
}

static int write_model(const gpt *g, const char *path)
{
	dlt_archive_writer *w = NULL;
	dlt_buf yaml = { 0 };
	dlt_json j;
	char input[128];
	int rc;

	snprintf(input, sizeof(input), "{\"shape\":[%d,1,1],\"num_classes\":%d,\"scale\":1,"
		 "\"mean\":[0],\"std\":[1]}", g->T, g->V);
	dlt_json_begin(&j);
	DLT_TRY(dlt_config_write_yaml(&g->c, &yaml));
	dlt_json_str(&j, "kind", "model");
	dlt_json_int(&j, "format", DLT_CKPT_FORMAT);
	dlt_json_int(&j, "step", 0);
	dlt_json_str(&j, "config", yaml.data);
	dlt_json_raw(&j, "input", input);
	dlt_json_end(&j);
	DLT_TRY(dlt_json_ok(&j));
	DLT_TRY(dlt_archive_create(&w, path));
	DLT_TRY(dlt_model_write(&g->m, w, DLT_RAW, 0));
	DLT_TRY(dlt_archive_write_meta(w, j.buf.data));
	rc = dlt_archive_writer_close(w);
	w = NULL;
fail:
	if (w)
		dlt_archive_writer_abort(w);
	dlt_json_free(&j);
	dlt_buf_free(&yaml);
	return rc;
}

static int npy(const char *dir, const char *name, int dtype, int ndim, const uint64_t *dims,
	       const void *data)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s.npy", dir, name);
	return dlt_npy_write(path, dtype, ndim, dims, data);
}

/* Everything the header comment lists, after gpt_step */
static int dump(const gpt *g, const char *dir, const float *logits)
{
	char path[4096];
	uint64_t dims[4] = { (uint64_t)g->B, (uint64_t)g->T, (uint64_t)g->V };
	FILE *f;

	snprintf(path, sizeof(path), "%s/grad", dir);
	if (mkdir(dir, 0777) < 0 && errno != EEXIST)
		return dlt_error_errno(DLT_EIO, "%s", dir);
	if (mkdir(path, 0777) < 0 && errno != EEXIST)
		return dlt_error_errno(DLT_EIO, "%s", path);
	snprintf(path, sizeof(path), "%s/model.dlt", dir);
	DLT_TRY_RC(write_model(g, path));
	DLT_TRY_RC(npy(dir, "ids", DLT_I32, 2, dims, g->ids));
	DLT_TRY_RC(npy(dir, "targets", DLT_I32, 2, dims, g->targets));
	DLT_TRY_RC(npy(dir, "logits", DLT_F32, 3, dims, logits));
	for (int i = 0; i < g->m.n_params; i++) {
		const dlt_param *q = &g->m.params[i];
		char name[128];
		for (int d = 0; d < q->ndim; d++)
			dims[d] = (uint64_t)q->dims[d];
		snprintf(name, sizeof(name), "grad/%s", q->name);
		DLT_TRY_RC(npy(dir, name, DLT_F32, q->ndim, dims, q->g));
	}
	snprintf(path, sizeof(path), "%s/loss", dir);
	if (!(f = fopen(path, "w")))
		return dlt_error_errno(DLT_EIO, "%s", path);
	fprintf(f, "%.17g\n", g->loss);
	if (fclose(f) != 0)
		return dlt_error_errno(DLT_EIO, "%s", path);
	return 0;
}

static int run_dump(const char *dir, const char *config, const char *model)
{
	gpt g = { 0 };
	const float *y;
	int rc;
	if ((rc = dlt_config_load(&g.c, config, NULL, 0)) < 0 || (rc = gpt_build(&g, model)) < 0)
		goto done;
	/* the CPU backend's logits are the host's */
	if (!(y = gpt_step(&g)))
		rc = DLT_EINPUT;
	else
		rc = dump(&g, dir, y);
done:
	gpt_free(&g);
	return rc;
}

/* The mean over positions of -log softmax(logits)[target], in double */
static double xent(const float *y, const int32_t *targets, int rows, int V)
{
	double sum = 0.0;
	for (int r = 0; r < rows; r++) {
		const float *row = y + (size_t)r * V;
		double mx = -INFINITY, s = 0.0;
		for (int k = 0; k < V; k++)
			mx = fmax(mx, row[k]);
		for (int k = 0; k < V; k++)
			s += exp(row[k] - mx);
		sum += mx + log(s) - row[targets[r]];
	}
	return sum / rows;
}

static void test_gpt(const char *init)
{
	char yaml[sizeof(gpt_yaml) + 16];
	gpt g = { 0 };
	float *y, *before;
	size_t n;
	double worst = 0.0;
	int t0;

	snprintf(yaml, sizeof(yaml), gpt_yaml, init);
	if (!ok_rc(dlt_config_load_string(&g.c, yaml, strlen(yaml), "gpt.yaml", NULL, 0), 0,
		   "init %s: config", init) ||
	    !ok_rc(gpt_build(&g, NULL), 0, "init %s: the GPT builds", init) ||
	    !ok(!!(y = gpt_step(&g)), "init %s: a step runs", init)) {
		gpt_free(&g);
		return;
	}
	n = (size_t)g.B * g.T * g.V;
	ok_near(g.loss, xent(y, g.targets, g.B * g.T, g.V), 1e-6,
		"init %s: the loss is the mean cross-entropy of the logits", init);
	before = malloc(n * sizeof(float));
	memcpy(before, y, n * sizeof(float));
	/* the tokens from t0 on changed: the positions before see none of it */
	t0 = g.T / 2;
	for (int b = 0; b < g.B; b++)
		for (int t = t0; t < g.T; t++)
			g.ids[(size_t)b * g.T + t] = (g.ids[(size_t)b * g.T + t] + 1) % g.V;
	y = gpt_step(&g);
	for (int b = 0; b < g.B; b++)
		for (size_t k = 0; k < (size_t)t0 * g.V; k++) {
			size_t i = (size_t)b * g.T * g.V + k;
			worst = fmax(worst, fabs((double)y[i] - before[i]));
		}
	ok(worst <= 1e-6, "init %s: causal: the logits before position %d move by %g when the "
	   "tokens from it change", init, t0, worst);
	free(before);
	{
		char dir[4096], path[4200];
		struct stat st;
		int all = 1;
		snprintf(dir, sizeof(dir), "%s/dump-%s", tap_tmpdir(), init);
		ok_rc(dump(&g, dir, y), 0, "init %s: dump", init);
		for (int i = 0; i < g.m.n_params; i++) {
			snprintf(path, sizeof(path), "%s/grad/%s.npy", dir, g.m.params[i].name);
			/* npy's header pads the data to a multiple of 64 bytes */
			all &= stat(path, &st) == 0 &&
			       (size_t)st.st_size >= g.m.params[i].n * sizeof(float) + 64 &&
			       ((size_t)st.st_size - g.m.params[i].n * sizeof(float)) % 64 == 0;
		}
		ok(all && g.m.n_params == 2 + 2 * 12 + 2,
		   "init %s: a gradient file for each of the %d params", init, g.m.n_params);
	}
	gpt_free(&g);
}

int main(int argc, char **argv)
{
	if ((argc == 4 || argc == 5) && !strcmp(argv[1], "--dump")) {
		int rc = run_dump(argv[2], argv[3], argc == 5 ? argv[4] : NULL);
		if (rc < 0)
			fprintf(stderr, "test-gpt-torch: %s\n", dlt_errmsg());
		return rc < 0;
	}
	if (argc > 1) {
		fprintf(stderr, "usage: test-gpt-torch [--dump DIR CONFIG [MODEL]]\n");
		return 2;
	}
	test_gpt("gpt2");
	test_gpt("default");
	return done_testing();
}
