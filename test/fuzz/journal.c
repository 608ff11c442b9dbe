/* The journal of dlt-search (lib/search/sched.c): a search directory s/
 * whose journal.jsonl is the input's first piece (up to a NUL byte), read
 * back as dlt-search status reads it (every trial's row and params, the
 * leaderboard, the epochs) and as --resume does, then run on with a
 * launcher whose every start fails, so the replayed decisions are checked
 * against the search's own and the finished ones taken, without a trial
 * trained.  The journal's "config" names the search file by its absolute
 * path, which the temporary directory makes unknown to a corpus: the JSON
 * string "@g" stands for the grid search file below, "@a" for the asha
 * one (their hashes are the seeds').  The next pieces are trial 0's run
 * directory, s/trials/000: metrics.jsonl, status, config.yaml, which the
 * searcher reads through lib/runs to take a result the killed searcher
 * did not journal. */
#include "search/search.h"
#include "util/util.h"

#include "fuzz.h"

static const char grid_yaml[] =
	"base: base.yaml\n"
	"metric: test.acc\n"
	"method: grid\n"
	"params:\n"
	"  train.optimizer.adam.lr: {choice: [1e-2, 1e-4]}\n"
	"  model.0.dense: {choice: [8, 32]}\n";
static const char asha_yaml[] =
	"base: base.yaml\n"
	"metric: test.acc\n"
	"method: asha\n"
	"trials: 9\n"
	"seed: 1\n"
	"eta: 3\n"
	"min_epochs: 1\n"
	"max_epochs: 9\n"
	"parallel: 2\n"
	"params:\n"
	"  train.optimizer.adam.lr: {loguniform: [1e-4, 1e-1]}\n"
	"  model.0.dense: {choice: [8, 16, 32]}\n";
static const char base_yaml[] =
	"data: {train: train.dlt, test: test.dlt}\n"
	"model: [dense: 16, relu, dense: 3]\n"
	"train: {epochs: 2, batch: 16, seed: 7, log_every: 10, optimizer: {adam: {lr: 1e-2}}}\n";

static int no_start(void *ctx, const dlt_trial_cmd *cmd, long long *id)
{
	(void)ctx, (void)cmd, (void)id;
	return dlt_error(DLT_EFAIL, "fuzz: no trial runs here");
}

static int no_poll(void *ctx, double timeout, long long *id, int *status)
{
	(void)ctx, (void)timeout, (void)id, (void)status;
	return 0;
}

static int no_stop(void *ctx, long long id)
{
	(void)ctx, (void)id;
	return 0;
}

/* The journal with "@g" and "@a" replaced by the search files' paths. */
static void journal_file(const uint8_t *data, size_t n, const char *grid, const char *asha)
{
	dlt_buf b = { 0 };

	for (size_t i = 0; i < n; i++) {
		if (i + 4 <= n && data[i] == '"' && data[i + 1] == '@' &&
		    (data[i + 2] == 'g' || data[i + 2] == 'a') && data[i + 3] == '"') {
			if (dlt_buf_printf(&b, "\"%s\"", data[i + 2] == 'g' ? grid : asha) < 0)
				abort();
			i += 3;
		} else if (dlt_buf_append(&b, data + i, 1) < 0) {
			abort();
		}
	}
	fuzz_file("s/journal.jsonl", b.data, b.len);
	dlt_buf_free(&b);
}

static void status(void)
{
	const dlt_trial *const *o;
	dlt_search_run *r;
	dlt_search s;
	dlt_json j;
	size_t n;
	int running, nrungs;

	if (dlt_search_status(&r, &s, fuzz_path("s"), &running) == 0) {
		o = dlt_search_leaderboard(r, &n);
		dlt_json_begin(&j);
		for (size_t i = 0; i < n; i++) {
			dlt_trial_json_params(&j, "params", o[i]);
			dlt_json_str(&j, "status", dlt_trial_state_name(o[i]->state));
			dlt_json_num(&j, "value", o[i]->value);
			if (o[i]->tail)
				dlt_json_str(&j, "log", o[i]->tail);
		}
		dlt_json_end(&j);
		dlt_json_free(&j);
		dlt_search_rungs(r, &nrungs);
		dlt_search_epochs(r);
	}
	dlt_search_run_free(r);
	dlt_search_free(&s);
}

static void resume(void)
{
	dlt_search_opts o = { .slots = 0, .retries = -1, .threads = 1, .trainer = "dlt-train" };
	dlt_launcher l = { .name = "local", .start = no_start, .poll = no_poll, .stop = no_stop };
	dlt_search_run *r;
	dlt_search s;

	if (dlt_search_reopen(&r, &s, fuzz_path("s"), &o) == 0)
		dlt_search_go(r, &l, NULL);
	dlt_search_run_free(r);
	dlt_search_free(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const run[] = { "s/trials/000/metrics.jsonl", "s/trials/000/status",
					   "s/trials/000/config.yaml" };
	static char grid[320], asha[320];
	const uint8_t *piece;
	size_t n;

	if (!*grid) {
		snprintf(grid, sizeof(grid), "%s", fuzz_file("grid.yaml", grid_yaml,
							     sizeof(grid_yaml) - 1));
		snprintf(asha, sizeof(asha), "%s", fuzz_file("asha.yaml", asha_yaml,
							     sizeof(asha_yaml) - 1));
		fuzz_file("base.yaml", base_yaml, sizeof(base_yaml) - 1);
		mkdir(fuzz_path("s"), 0777);
		mkdir(fuzz_path("s/trials"), 0777);
		mkdir(fuzz_path("s/logs"), 0777);
		mkdir(fuzz_path("s/trials/000"), 0777);
		/* what a search that ends writes */
		fuzz_path("s/best.yaml");
		fuzz_path("s/best.dlt");
	}
	unlink(fuzz_path("s/best.yaml"));
	unlink(fuzz_path("s/best.dlt"));
	n = fuzz_piece(&data, &size, &piece);
	journal_file(piece, n, grid, asha);
	for (int i = 0; i < 3; i++) {
		n = fuzz_piece(&data, &size, &piece);
		fuzz_file(run[i], piece, n);
	}
	status();
	resume();
	return 0;
}
