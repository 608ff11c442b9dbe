/* Checkpoint reading (lib/train/ckpt.c, and dlt-ckpt info of
 * lib/ckpt/tools.c): the metadata of a checkpoint, which the archive's
 * checksums do not protect from whoever wrote it.  Input: the metadata
 * JSON.  The harness writes it into a checkpoint with the tensors of a
 * small model (dense 8, relu, dense 3 on 4 features, Adam), opens it,
 * reads its "input", restores the model and optimiser from it, describes
 * it, strips it, and exports it to safetensors and imports that back
 * (dlt-ckpt info, strip, export, import). */
#include "archive/archive.h"
#include "ckpt/ckpt.h"
#include "kernels/kernels.h"
#include "train/ckpt.h"
#include "util/util.h"

#include "fuzz.h"

static const char yaml[] =
	"data: {train: x.dlt}\nmodel:\n  - dense: 8\n  - relu\n  - dense: 3\n"
	"train: {optimizer: {adam: {lr: 0.01}}}\n";

static dlt_config cfg;
static dlt_model model;
static dlt_optim optim;

static void setup(void)
{
	if (dlt_config_load_string(&cfg, yaml, strlen(yaml), "fuzz.yaml", NULL, 0) < 0 ||
	    dlt_model_init(&model, &cfg, dlt_backend_cpu(), (dlt_shape){ 4, 1, 1 }, 3, 4) < 0 ||
	    dlt_optim_init(&optim, &cfg.train.optim, &model, 0, 2000) < 0) {
		fprintf(stderr, "ckpt harness: %s\n", dlt_errmsg());
		abort();
	}
}

/* The model's tensors and the metadata (NUL-terminated). */
static const char *write_ckpt(const char *meta)
{
	const char *path = fuzz_path("ckpt.dlt");
	dlt_archive_writer *w;

	if (dlt_archive_create(&w, path) < 0)
		abort();
	if (dlt_model_write(&model, w, DLT_RAW, 0) < 0)
		abort();
	for (int i = 0; i < model.n_params; i++) {
		dlt_param *p = &model.params[i];
		float *state[2] = { p->m, p->v };
		char name[96];
		uint64_t n = p->n;
		for (int s = 0; s < 2; s++) {
			snprintf(name, sizeof(name), "optim.%c/%s", "mv"[s], p->name);
			if (state[s] && dlt_archive_write_tensor(w, name, DLT_F32, 1, &n, state[s],
								 DLT_RAW, 0) < 0)
				abort();
		}
	}
	/* metadata that is no JSON object is refused by the writer and the
	 * reader alike: the file then has none */
	dlt_archive_write_meta(w, meta);
	if (dlt_archive_writer_close(w) < 0)
		abort();
	return path;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	char *meta;
	const char *path;
	dlt_config c;
	dlt_ckpt k;
	dlt_buf info = { 0 };

	if (!ready) {
		setup();
		ready = 1;
	}
	if (memchr(data, 0, size))
		return 0;
	meta = malloc(size + 1);
	memcpy(meta, data, size);
	meta[size] = 0;
	path = write_ckpt(meta);
	free(meta);
	if (dlt_ckpt_open(&k, path, &c) == 0) {
		dlt_dataset like;
		dlt_ckpt_state st = { 0 };
		if (dlt_ckpt_input(&k, &like) == 0)
			dlt_dataset_free(&like);
		dlt_ckpt_restore(&k, &model, &optim, &st);
		dlt_buf_free(&st.metrics);
		dlt_ckpt_close(&k);
		dlt_config_free(&c);
	}
	dlt_ckpt_info(path, 0, &info);
	info.len = 0;
	dlt_ckpt_info(path, 1, &info);
	dlt_buf_free(&info);
	dlt_ckpt_strip(path, fuzz_path("stripped.dlt"));
	if (dlt_ckpt_export(path, DLT_EXPORT_SAFETENSORS, fuzz_path("ckpt.safetensors"), 0) == 0)
		dlt_ckpt_import(fuzz_path("ckpt.safetensors"), fuzz_path("imported.dlt"), NULL);
	return 0;
}
