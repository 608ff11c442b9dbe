/* The training config (lib/config): YAML text and -s overrides.  Input:
 * the YAML, then after each NUL byte an override "key=value" (at most 8).
 * A config that loads is written back as YAML (dlt_config_write_yaml),
 * which must load to a config that writes the same YAML again, and its
 * model is planned and built (lib/nn) for 1x28x28 images of 10 classes
 * on a machine of 64 MiB. */
#define _GNU_SOURCE
#include <dlfcn.h>

#include "config/config.h"
#include "kernels/kernels.h"
#include "nn/nn.h"
#include "util/util.h"

#include "fuzz.h"

/* The machine's memory for dlt_mem_total: 64 MiB, so that a model
 * larger than that is refused before it is allocated, as on any machine,
 * and the fuzzer's memory limit is not reached.  A harness is a program
 * of its own: its sysconf is the one the library calls. */
long sysconf(int name)
{
	static long (*real)(int);

	if (name == _SC_PHYS_PAGES)
		return (64 << 20) / getpagesize();
	if (!real)
		real = (long (*)(int))dlsym(RTLD_NEXT, "sysconf");
	return real(name);
}

#define MAX_OVERRIDES 8

static void build(const dlt_config *c)
{
	dlt_model m;

	if (dlt_model_init(&m, c, dlt_backend_cpu(), (dlt_shape){ 1, 28, 28 }, 10, 2) == 0)
		dlt_model_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *ov[MAX_OVERRIDES] = { 0 };
	const uint8_t *yaml, *piece;
	size_t nyaml = fuzz_piece(&data, &size, &yaml);
	int n = 0;
	dlt_config c, c2;
	dlt_buf out = { 0 }, out2 = { 0 };

	while (size && n < MAX_OVERRIDES) {
		size_t len = fuzz_piece(&data, &size, &piece);
		ov[n] = malloc(len + 1);
		memcpy(ov[n], piece, len);
		ov[n++][len] = 0;
	}
	if (dlt_config_load_string(&c, (const char *)yaml, nyaml, "fuzz.yaml", ov, n) == 0) {
		if (dlt_config_write_yaml(&c, &out) < 0 ||
		    dlt_config_load_string(&c2, out.data, out.len, "resolved.yaml", NULL, 0) < 0 ||
		    dlt_config_write_yaml(&c2, &out2) < 0 || out.len != out2.len ||
		    memcmp(out.data, out2.data, out.len)) {
			fprintf(stderr, "resolved config does not load back the same: %s\n%.*s",
				dlt_errmsg(), (int)out.len, out.data);
			abort();
		}
		dlt_config_free(&c2);
		build(&c);
	}
	dlt_config_free(&c);
	dlt_buf_free(&out);
	dlt_buf_free(&out2);
	for (int i = 0; i < n; i++)
		free(ov[i]);
	return 0;
}
