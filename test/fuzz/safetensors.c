/* safetensors import (lib/ckpt/safetensors.c): a file of any bytes opened
 * from memory; each tensor found by name, its bytes and, for a float
 * dtype, its values converted. */
#include "ckpt/safetensors.h"
#include "util/util.h"

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	dlt_safetensors *st;

	if (dlt_safetensors_open_mem(&st, data, size, "fuzz.safetensors") < 0)
		return 0;
	for (size_t i = 0; i < dlt_safetensors_count(st); i++) {
		const dlt_st_tensor *t = dlt_safetensors_tensor(st, i);
		float *f;
		if (dlt_safetensors_find(st, t->name) != t || t->end < t->begin ||
		    (t->end > t->begin && !dlt_safetensors_data(st, t)))
			abort();
		if ((f = dlt_malloc(t->count * sizeof(float)))) {
			dlt_safetensors_read_f32(st, t, f, t->count);
			free(f);
		}
	}
	for (size_t i = 0; i < dlt_safetensors_meta_count(st); i++)
		if (dlt_safetensors_meta_get(st, dlt_safetensors_meta_key(st, i)) == NULL)
			abort();
	dlt_safetensors_close(st);
	return 0;
}
