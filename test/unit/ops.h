/* The op table, as ggml's test-backend-ops: every entry of a backend
 * against the reference backend's (dlt_backend_ref) on random inputs of a
 * set of shapes, one row an op and its variant.  test-kernels runs it for
 * the CPU backend, test/gpu's test-cuda for the CUDA backend: a new
 * kernel gets its test on every backend by adding a row to ops.c. */
#ifndef DLT_TEST_OPS_H
#define DLT_TEST_OPS_H

#include "kernels/kernels.h"

/* The backends with a column of tolerances in the table */
enum ops_column { OPS_CPU, OPS_CUDA, OPS_COLUMNS };

/* Every row with a tolerance in column whose name begins with prefix
 * (NULL: every one) on be, one TAP test a row and shape; returns the
 * number that failed. */
int ops_run(const dlt_backend *be, int column, const char *prefix);
/* The rows ops_run would run, as TAP comments; returns how many. */
int ops_list(int column, const char *prefix);

/* The pooling shapes of the table, which test-layers' finite
 * differences use too */
typedef struct pool_case {
	int n, c, h, w, kh, kw, sh, sw, ph, pw;
} pool_case;
extern const pool_case ops_pools[];
extern const size_t ops_n_pools;
/* A case as the kernels take it, oh and ow worked out, relu 0 */
dlt_pool ops_pool_shape(const pool_case *pc);

#endif
