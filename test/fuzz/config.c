/* The training config (lib/config): YAML text and -s overrides.  Input:
 * the YAML, then after each NUL byte an override "key=value" (at most 8).
 * A config that loads is written back as YAML (dlt_config_write_yaml),
 * which must load to a config that writes the same YAML again. */
#include "config/config.h"
#include "util/util.h"

#include "fuzz.h"

#define MAX_OVERRIDES 8

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
	}
	dlt_config_free(&c);
	dlt_buf_free(&out);
	dlt_buf_free(&out2);
	for (int i = 0; i < n; i++)
		free(ov[i]);
	return 0;
}
