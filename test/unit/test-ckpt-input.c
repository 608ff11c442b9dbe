/* dlt_ckpt_input: the "input" of a model file gives back the training
 * set's normalisation bit for bit (what dlt-infer relies on to feed new
 * data as training did), and a hostile "input" is DLT_EINPUT naming the
 * file, never a crash or a huge allocation. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive/archive.h"
#include "tap.h"
#include "train/ckpt.h"
#include "util/util.h"

static const char yaml[] = "data: {train: x.dlt}\nmodel:\n  - dense: 8\n  - relu\n  - dense: 3\n";

static const char *tpath(const char *name)
{
	static char buf[4][512];
	static int k;
	char *p = buf[k++ % 4];
	snprintf(p, sizeof(buf[0]), "%s/%s", tap_tmpdir(), name);
	return p;
}

/* A model file from dlt_ckpt_write, with n_stats random stats, read back. */
static void test_round_trip(int n_stats)
{
	dlt_dataset train = { .path = "train.dlt", .features = 12, .n_classes = 3,
			      .sample = { 12, 1, 1 }, .dtype = DLT_F32, .n_stats = n_stats };
	dlt_dataset like;
	dlt_config c, c2;
	dlt_model m;
	dlt_ckpt k;
	dlt_rng r;
	const char *path = tpath("model.dlt");
	int same_mean = 1, same_std = 1;

	train.scale = 1.0f / 255;
	train.mean = calloc(n_stats, sizeof(float));
	train.inv_std = calloc(n_stats, sizeof(float));
	dlt_rng_init(&r, 5, (uint64_t)n_stats);
	for (int i = 0; i < n_stats; i++) {
		/* stds over many binades, as data in any units has */
		train.mean[i] = (dlt_rng_uniform(&r) - 0.5f) * 1e3f;
		train.inv_std[i] = 1.0f / (ldexpf(1.0f + dlt_rng_uniform(&r), (int)dlt_rng_below(&r, 40) - 20));
	}
	ok_rc(dlt_config_load_string(&c, yaml, strlen(yaml), "t.yaml", NULL, 0), 0, "config");
	ok_rc(dlt_model_init(&m, &c, dlt_backend_cpu(), train.sample, 3, 4), 0, "model");
	ok_rc(dlt_ckpt_write(path, &c, &train, &m, NULL, 7), 0, "write a model file");
	ok_rc(dlt_ckpt_open(&k, path, &c2), 0, "open it");
	ok_rc(dlt_ckpt_input(&k, &like), 0, "its input, %d stats", n_stats);
	ok(like.sample.c == 12 && like.sample.h == 1 && like.sample.w == 1 &&
	   like.features == 12 && like.n_classes == 3 && like.n_stats == n_stats,
	   "shape, features, classes, stats");
	ok(like.scale == train.scale, "scale, the same float");
	for (int i = 0; i < n_stats; i++) {
		same_mean &= like.mean[i] == train.mean[i];
		same_std &= like.inv_std[i] == train.inv_std[i];
	}
	ok(same_mean, "every mean the same float");
	ok(same_std, "every inv_std the same float (std written as 1 / inv_std in double)");
	ok(strcmp(like.path, path) == 0, "like.path names the model file");
	dlt_dataset_free(&like);
	dlt_ckpt_close(&k);
	dlt_config_free(&c2);
	dlt_model_free(&m);
	dlt_config_free(&c);
	free(train.mean);
	free(train.inv_std);
}

/* A model file whose "input" is the given JSON (NULL: none). */
static int write_meta(const char *path, const char *input)
{
	dlt_archive_writer *w = NULL;
	dlt_buf meta = { 0 };
	int rc;

	dlt_buf_printf(&meta, "{\"kind\":\"model\",\"format\":1,\"step\":0,\"config\":");
	dlt_json_escape(&meta, yaml);
	if (input)
		dlt_buf_printf(&meta, ",\"input\":%s", input);
	dlt_buf_printf(&meta, "}");
	DLT_TRY(dlt_archive_create(&w, path));
	DLT_TRY(dlt_archive_write_meta(w, meta.data));
	rc = dlt_archive_writer_close(w);
	w = NULL;
fail:
	if (w)
		dlt_archive_writer_abort(w);
	dlt_buf_free(&meta);
	return rc;
}

static void test_hostile(void)
{
	static const struct {
		const char *input, *what;
	} bad[] = {
		{ NULL, "holds no 'input'" },
		{ "[]", "'input.shape'" },
		{ "{\"num_classes\":3,\"scale\":1,\"mean\":[0],\"std\":[1]}", "'input.shape'" },
		{ "{\"shape\":[4,1],\"num_classes\":3,\"scale\":1,\"mean\":[0],\"std\":[1]}", "'input.shape'" },
		{ "{\"shape\":[4,1,0],\"num_classes\":3,\"scale\":1,\"mean\":[0],\"std\":[1]}", "'input.shape'" },
		{ "{\"shape\":[4,-1,1],\"num_classes\":3,\"scale\":1,\"mean\":[0],\"std\":[1]}", "'input.shape'" },
		{ "{\"shape\":[4,1.5,1],\"num_classes\":3,\"scale\":1,\"mean\":[0],\"std\":[1]}", "'input.shape'" },
		{ "{\"shape\":[\"4\",1,1],\"num_classes\":3,\"scale\":1,\"mean\":[0],\"std\":[1]}", "'input.shape'" },
		{ "{\"shape\":[65536,65536,65536],\"num_classes\":3,\"scale\":1,\"mean\":[0],\"std\":[1]}", "'input.shape'" },
		{ "{\"shape\":[1e300,1,1],\"num_classes\":3,\"scale\":1,\"mean\":[0],\"std\":[1]}", "'input.shape'" },
		{ "{\"shape\":[4,1,1],\"scale\":1,\"mean\":[0],\"std\":[1]}", "'input.num_classes'" },
		{ "{\"shape\":[4,1,1],\"num_classes\":0,\"scale\":1,\"mean\":[0],\"std\":[1]}", "'input.num_classes'" },
		{ "{\"shape\":[4,1,1],\"num_classes\":1e12,\"scale\":1,\"mean\":[0],\"std\":[1]}", "'input.num_classes'" },
		{ "{\"shape\":[4,1,1],\"num_classes\":2.5,\"scale\":1,\"mean\":[0],\"std\":[1]}", "'input.num_classes'" },
		{ "{\"shape\":[4,1,1],\"num_classes\":3,\"scale\":0,\"mean\":[0],\"std\":[1]}", "'input.scale'" },
		{ "{\"shape\":[4,1,1],\"num_classes\":3,\"scale\":-1,\"mean\":[0],\"std\":[1]}", "'input.scale'" },
		{ "{\"shape\":[4,1,1],\"num_classes\":3,\"scale\":1e300,\"mean\":[0],\"std\":[1]}", "'input.scale'" },
		{ "{\"shape\":[4,1,1],\"num_classes\":3,\"scale\":1e-300,\"mean\":[0],\"std\":[1]}", "'input.scale'" },
		{ "{\"shape\":[4,1,1],\"num_classes\":3,\"scale\":null,\"mean\":[0],\"std\":[1]}", "'input.scale'" },
		{ "{\"shape\":[4,1,1],\"num_classes\":3,\"scale\":1,\"std\":[1]}", "'input.mean'" },
		{ "{\"shape\":[4,1,1],\"num_classes\":3,\"scale\":1,\"mean\":[],\"std\":[]}", "'input.mean'" },
		{ "{\"shape\":[4,1,1],\"num_classes\":3,\"scale\":1,\"mean\":[0,0,0],\"std\":[1,1,1]}", "'input.mean'" },
		{ "{\"shape\":[4,1,1],\"num_classes\":3,\"scale\":1,\"mean\":[0,0,0,0,0],\"std\":[1,1,1,1,1]}", "'input.mean'" },
		{ "{\"shape\":[4,1,1],\"num_classes\":3,\"scale\":1,\"mean\":[null],\"std\":[1]}", "'input.mean'" },
		{ "{\"shape\":[4,1,1],\"num_classes\":3,\"scale\":1,\"mean\":[1e39],\"std\":[1]}", "'input.mean'" },
		{ "{\"shape\":[4,1,1],\"num_classes\":3,\"scale\":1,\"mean\":[0]}", "'input.std'" },
		{ "{\"shape\":[4,1,1],\"num_classes\":3,\"scale\":1,\"mean\":[0],\"std\":[1,1]}", "'input.std'" },
		{ "{\"shape\":[4,1,1],\"num_classes\":3,\"scale\":1,\"mean\":[0],\"std\":[0]}", "'input.std'" },
		{ "{\"shape\":[4,1,1],\"num_classes\":3,\"scale\":1,\"mean\":[0],\"std\":[-1]}", "'input.std'" },
		{ "{\"shape\":[4,1,1],\"num_classes\":3,\"scale\":1,\"mean\":[0],\"std\":[1e-300]}", "'input.std'" },
		{ "{\"shape\":[4,1,1],\"num_classes\":3,\"scale\":1,\"mean\":[0],\"std\":[1e300]}", "'input.std'" },
		{ "{\"shape\":[4,1,1],\"num_classes\":3,\"scale\":1,\"mean\":[0],\"std\":\"1\"}", "'input.std'" },
	};
	const char *path = tpath("bad.dlt");

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		dlt_dataset like;
		dlt_config c;
		dlt_ckpt k;
		int rc;

		if (write_meta(path, bad[i].input) < 0 || dlt_ckpt_open(&k, path, &c) < 0) {
			ok(0, "case %zu: %s", i, dlt_errmsg());
			continue;
		}
		rc = dlt_ckpt_input(&k, &like);
		ok(rc == DLT_EINPUT && strstr(dlt_errmsg(), path) && strstr(dlt_errmsg(), bad[i].what),
		   "input %s: %s", bad[i].input ? bad[i].input : "(none)", dlt_errmsg());
		ok(like.mean == NULL && like.inv_std == NULL && like.path == NULL,
		   "and like is left empty");
		dlt_ckpt_close(&k);
		dlt_config_free(&c);
	}
	/* the good one, for contrast: the same writer, the same checks */
	{
		dlt_dataset like;
		dlt_config c;
		dlt_ckpt k;
		write_meta(path, "{\"shape\":[2,1,2],\"num_classes\":3,\"scale\":0.5,"
			   "\"mean\":[1,2],\"std\":[4,0.5]}");
		ok_rc(dlt_ckpt_open(&k, path, &c), 0, "a good input opens");
		ok_rc(dlt_ckpt_input(&k, &like), 0, "and reads");
		ok(like.features == 4 && like.sample.c == 2 && like.sample.h == 1 &&
		   like.sample.w == 2 && like.scale == 0.5f && like.n_stats == 2 &&
		   like.mean[1] == 2 && like.inv_std[0] == 0.25f && like.inv_std[1] == 2,
		   "with its values");
		dlt_dataset_free(&like);
		dlt_ckpt_close(&k);
		dlt_config_free(&c);
	}
}

int main(void)
{
	test_round_trip(1);
	test_round_trip(12);
	test_round_trip(4);
	test_hostile();
	return done_testing();
}
