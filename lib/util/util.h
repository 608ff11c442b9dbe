/* util: errors, allocation, checksums, RNG, JSON, files, time.
 * The bottom layer of libdlt: everything may use it, it uses nothing of dlt.
 * The library never prints and never exits; it returns a status and leaves a
 * one-line message in a thread-local buffer that the program prints. */
#ifndef DLT_UTIL_H
#define DLT_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Status codes.  0 is success; errors are negative so that functions that
 * return a count can share the return value.  DLT_EINPUT (bad input, bad
 * usage) maps to exit status 2, every other error to exit status 1. */
enum {
	DLT_OK = 0,
	DLT_EINPUT = -2,	/* bad input: a damaged file, a bad config, a bad value */
	DLT_EIO = -3,		/* an operating-system call failed (disk full, EIO, ...) */
	DLT_ENOMEM = -4,	/* an allocation failed */
	DLT_EFAIL = -5,		/* the job failed for another reason (diverged, ...) */
	DLT_EINTR = -6,		/* stopped by a signal on request */
};

/* Sets the thread's error message and returns code. */
int dlt_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Like dlt_error, appending ": strerror(errno)". */
int dlt_error_errno(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefixes the current message with "where: " (a file name, a tensor). */
int dlt_error_prefix(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *dlt_errmsg(void);
/* Exit status for a status code: 0, 1 or 2. */
int dlt_exit_status(int code);

/* NCCL-style: run expr, jump to the function's fail label on error. */
#define DLT_TRY(expr) do { if ((rc = (expr)) < 0) goto fail; } while (0)
/* The same for a function with nothing to clean up: returns the error. */
#define DLT_TRY_RC(expr) do { int rc_ = (expr); if (rc_ < 0) return rc_; } while (0)

/* Allocation that reports through dlt_error.  Sizes are checked for
 * overflow; dlt_malloc(0) returns a valid pointer. */
void *dlt_malloc(size_t n);
void *dlt_calloc(size_t n, size_t size);
void *dlt_realloc(void *p, size_t n);
void *dlt_malloc_aligned(size_t n);	/* 64-byte aligned, free with free() */
/* 64-byte aligned and zeroed by calloc, not by writing: a large block is
 * fresh zero pages that take no time or memory until written (a model's
 * gradients and moments start that way).  Free with dlt_free_aligned. */
void *dlt_zalloc_aligned(size_t n);
void dlt_free_aligned(void *p);
/* ZeRO's params and gradients outside a rank's range: the pages wholly
 * inside [p, p + n) go back to the system, and read as zeros (and take
 * no memory) until written again. */
void dlt_mem_release(void *p, size_t n);
/* The bytes of the pages of [p, p + n) that are in memory now. */
size_t dlt_mem_resident(const void *p, size_t n);
char *dlt_strdup(const char *s);
/* Makes room for n elements of size bytes in the array *(T **)array of
 * capacity *cap, doubling it as needed (at least 8); 0 or DLT_ENOMEM. */
int dlt_grow(void *array, size_t *cap, size_t n, size_t size);
/* a*b with overflow check: returns 0 on overflow */
int dlt_mul_ok(size_t a, size_t b, size_t *out);
/* Bytes of physical memory of the machine; 0 if unknown. */
double dlt_mem_total(void);
/* The process's peak resident memory so far, bytes (getrusage) */
double dlt_mem_peak(void);

/* Growable byte buffer. */
typedef struct dlt_buf {
	char *data;
	size_t len, cap;
} dlt_buf;
int dlt_buf_append(dlt_buf *b, const void *p, size_t n);
int dlt_buf_printf(dlt_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void dlt_buf_free(dlt_buf *b);

/* xxh64 of bytes (streaming state for data that arrives in pieces). */
uint64_t dlt_xxh64(const void *p, size_t n, uint64_t seed);
typedef struct dlt_hash { void *state; } dlt_hash;
int dlt_hash_init(dlt_hash *h);
void dlt_hash_update(dlt_hash *h, const void *p, size_t n);
uint64_t dlt_hash_final(dlt_hash *h);	/* also frees */

/* Philox-4x32-10 counter-based RNG: the same (key, counter) gives the same
 * numbers on every machine and on the GPU, so a stream can be restarted at
 * any point from two integers. */
typedef struct dlt_rng {
	uint64_t key;		/* seed */
	uint64_t ctr;		/* blocks of 4 outputs consumed */
	uint32_t buf[4];
	int have;		/* outputs left in buf */
} dlt_rng;
void dlt_rng_init(dlt_rng *r, uint64_t seed, uint64_t stream);
uint32_t dlt_rng_u32(dlt_rng *r);
float dlt_rng_uniform(dlt_rng *r);	/* [0, 1) */
uint32_t dlt_rng_below(dlt_rng *r, uint32_t n);	/* unbiased [0, n) */
void dlt_rng_permute(dlt_rng *r, uint32_t *idx, size_t n);	/* Fisher-Yates of 0..n-1 */
/* p[0..n) = N(0, std^2) by Box-Muller from stream's numbers of seed (a
 * pair from each two, as dlt_rng_init's stream would give them), in
 * float: the same bits on every CPU and any number of threads. */
void dlt_rng_normals(float *p, size_t n, float std, uint64_t seed, uint64_t stream);

/* Numbers with range checks (like OpenBSD strtonum): the whole string must
 * be the number.  On error returns DLT_EINPUT with a message naming what. */
int dlt_parse_i64(const char *s, long long min, long long max, long long *out, const char *what);
int dlt_parse_f64(const char *s, double *out, const char *what);

/* Files.  An output file is written under a temporary name in the same
 * directory and renamed into place only by dlt_ofile_commit, after fsync of
 * the file and of the directory: a crash, a full disk or an error leaves the
 * old file (or none), never a half-written one.  "-" is standard output. */
typedef struct dlt_ofile {
	FILE *fp;
	char *path;		/* final name, NULL for stdout */
	char *tmp;
} dlt_ofile;
int dlt_ofile_open(dlt_ofile *f, const char *path);
int dlt_ofile_commit(dlt_ofile *f);	/* flush, fsync, rename, fsync dir */
void dlt_ofile_abort(dlt_ofile *f);	/* removes the temporary file */
int dlt_write_file_atomic(const char *path, const void *p, size_t n);
/* Reads a whole file (or "-" for stdin) into memory, NUL-terminated;
 * more than max bytes (0: half the machine's memory) is an input error,
 * found before reading them all, so /dev/zero or an endless pipe cannot
 * exhaust memory. */
int dlt_read_file(const char *path, size_t max, char **data, size_t *len);
/* The bytes of path, in place: a regular file is mapped (*map, to
 * munmap(*map, *size)); a pipe, a device, a /proc file or "-" (standard
 * input) is read to its end into *mem (to free), at most half the
 * machine's memory of it.  Errors name the file; a missing or unreadable
 * one is DLT_EINPUT. */
int dlt_file_bytes(const char *path, void **map, char **mem, size_t *size);
int dlt_mkdir_p(const char *path);
int dlt_fsync_dir(const char *dir);
/* All n bytes of p to fd at off (pwrite until done): 0, or -1 with errno
 * set (ENOSPC, EIO, ...), the caller's to say. */
int dlt_pwrite_all(int fd, const void *p, size_t n, uint64_t off);

/* JSON writer for metrics and metadata: compact, one object per line. */
typedef struct dlt_json {
	dlt_buf buf;
	int need_comma;
	int failed;		/* an append ran out of memory */
} dlt_json;
void dlt_json_begin(dlt_json *j);	/* "{" */
void dlt_json_end(dlt_json *j);		/* "}" */
void dlt_json_key(dlt_json *j, const char *key);
void dlt_json_str(dlt_json *j, const char *key, const char *v);
void dlt_json_int(dlt_json *j, const char *key, long long v);
/* Numbers print with %.9g (floats) or %.17g (doubles) so they read back
 * exactly; NaN and infinities print as null. */
void dlt_json_num(dlt_json *j, const char *key, double v);
void dlt_json_f32(dlt_json *j, const char *key, float v);
void dlt_json_bool(dlt_json *j, const char *key, int v);
void dlt_json_raw(dlt_json *j, const char *key, const char *json);	/* a ready value */
void dlt_json_array_begin(dlt_json *j, const char *key);
void dlt_json_array_end(dlt_json *j);
void dlt_json_object_begin(dlt_json *j, const char *key);	/* nested */
/* key may be NULL inside arrays */
int dlt_json_ok(const dlt_json *j);	/* 0, or DLT_ENOMEM if an append failed */
void dlt_json_free(dlt_json *j);
int dlt_json_escape(dlt_buf *b, const char *s);	/* a quoted JSON string */

/* JSON reader: parses a document into a tree of values. */
enum { DLT_JNULL, DLT_JBOOL, DLT_JNUM, DLT_JSTR, DLT_JARR, DLT_JOBJ };
typedef struct dlt_jval {
	int type;
	double num;		/* DLT_JNUM, DLT_JBOOL */
	char *str;		/* DLT_JSTR; for members of an object, key is set */
	char *key;
	struct dlt_jval *items;	/* DLT_JARR, DLT_JOBJ */
	size_t n;
} dlt_jval;
/* Parses n bytes; depth and sizes are bounded by the input.  Errors say
 * "offset N: ..." */
int dlt_json_parse(const char *s, size_t n, dlt_jval *out);
void dlt_jval_free(dlt_jval *v);
const dlt_jval *dlt_jval_get(const dlt_jval *obj, const char *key);	/* NULL if absent */
/* Whether v is a whole number in [lo, hi] (|lo|, |hi| at most 2^53);
 * sets *out when it is. */
int dlt_jval_int(const dlt_jval *v, long long lo, long long hi, long long *out);

/* Metrics.  Which way the metric named name improves, from the part after
 * its last '.' ("val.rmse": "rmse"): -1 when smaller is better (*loss,
 * *error, err, rmse, mae, mse, ppl, bpb), 1 when larger is (acc, top5, f1,
 * r2, and any name not known). */
int dlt_metric_mode(const char *name);

/* Time. */
double dlt_now(void);		/* monotonic seconds */
double dlt_wall(void);		/* seconds since the epoch */

/* Environment knobs, read in one place (dlt(7) documents them). */
/* DLT_THREADS, else OMP_NUM_THREADS, else the cores this process may use;
 * DLT_EINPUT when a variable is set to something other than 1..4096. */
int dlt_env_threads(void);
/* The same for one of local_ranks processes of a job on this machine:
 * they share the cores unless the launcher bound each to its own. */
int dlt_env_threads_shared(int local_ranks);
/* DLT_TEST_STEP_DELAY, for tests: seconds to sleep after each step (0). */
double dlt_env_test_step_delay(void);
/* DLT_TEST_FAULT=KIND:RANK:STEP, for tests: a fault the training loop
 * injects on that rank at that step (1-based): "nan" (its loss is NaN)
 * or "extra" (one sum of the gradients more than the other ranks make).
 * Returns the kind (DLT_FAULT_*), 0 when unset or unreadable. */
enum { DLT_FAULT_NAN = 1, DLT_FAULT_EXTRA };
int dlt_env_test_fault(int *rank, long long *step);
/* DLT_TEST_CKPT_ON_RESUME=1, for tests: a resumed run writes the
 * checkpoint it loaded again before its first step, in its own layout */
int dlt_env_test_ckpt_on_resume(void);
/* DLT_TEST_CKPT_FAULT=KIND:RANK:STEP, for tests: a failure of that rank
 * in the checkpoint of a sharded run at that step (and the model file, at
 * the last step): "open" (it cannot open the file rank 0 made, as on a
 * machine without rank 0's file system: ENOENT) or "write" (its writes
 * fail: ENOSPC).  Returns the kind (DLT_CKPT_FAULT_*), 0 when unset. */
enum { DLT_CKPT_FAULT_OPEN = 1, DLT_CKPT_FAULT_WRITE };
int dlt_env_test_ckpt_fault(int *rank, long long *step);
void dlt_sleep(double seconds);

/* Opens dlt's shared object soname: from the path in the environment
 * variable env, else beside the program as installed (PREFIX/bin and
 * PREFIX/lib/dlt) or as built (bin/, build/test/ and build/).  NULL with
 * the reason in why when it cannot (missing: the reason when it is not
 * found; NULL: "not beside ..."). */
void *dlt_plugin_open(const char *soname, const char *env, const char *missing, char *why,
		      size_t n);
/* dlsym, with the reason in why when the symbol is not there. */
void *dlt_plugin_sym(void *lib, const char *soname, const char *name, char *why, size_t n);

#endif
