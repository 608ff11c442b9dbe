/* fuzz: what the harnesses of test/fuzz/ share.
 *
 * Each test/fuzz/NAME.c defines LLVMFuzzerTestOneInput for one reader of
 * dlt and feeds it the bytes, in memory or through a file of its own
 * temporary directory.  It is built twice: with clang's libFuzzer (make
 * fuzz), and with replay.c's main, which feeds it every file of its
 * corpus test/fuzz/NAME/ under the normal compiler (make check, and make
 * check-asan with the sanitizers).  An input may make the reader fail,
 * never crash, hang or allocate more than its size calls for; a harness
 * that finds a broken promise (a round trip that differs) aborts. */
#ifndef DLT_FUZZ_H
#define DLT_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MAX_FILES 16

static char fuzz_tmp[256];
static char fuzz_files[FUZZ_MAX_FILES][320];
static int fuzz_nfiles;

static inline void fuzz_cleanup(void)
{
	for (int i = fuzz_nfiles - 1; i >= 0; i--)
		if (unlink(fuzz_files[i]) < 0)
			rmdir(fuzz_files[i]);
	rmdir(fuzz_tmp);
}

/* The harness's temporary directory: on /dev/shm where there is one, as
 * the writers fsync. */
static const char *fuzz_dir(void)
{
	if (!*fuzz_tmp) {
		const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
		snprintf(fuzz_tmp, sizeof(fuzz_tmp), "%s/dlt-fuzz.XXXXXX", base);
		if (!mkdtemp(fuzz_tmp)) {
			perror(fuzz_tmp);
			abort();
		}
		atexit(fuzz_cleanup);
	}
	return fuzz_tmp;
}

/* The path of name in the temporary directory; it is removed at exit. */
static const char *fuzz_path(const char *name)
{
	static char path[320];
	const char *dir = fuzz_dir();
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	for (int i = 0; i < fuzz_nfiles; i++)
		if (strcmp(fuzz_files[i], path) == 0)
			return fuzz_files[i];
	if (fuzz_nfiles == FUZZ_MAX_FILES)
		abort();
	strcpy(fuzz_files[fuzz_nfiles], path);
	return fuzz_files[fuzz_nfiles++];
}

/* Writes n bytes to name in the temporary directory; returns its path. */
static const char *fuzz_file(const char *name, const void *data, size_t n)
{
	const char *path = fuzz_path(name);
	FILE *f = fopen(path, "wb");
	if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0) {
		perror(path);
		abort();
	}
	return path;
}

/* The next piece of data up to a NUL byte (or its end): how a harness
 * splits one input into several files or strings.  Returns its length
 * and moves *data and *size past it and its NUL. */
static inline size_t fuzz_piece(const uint8_t **data, size_t *size, const uint8_t **piece)
{
	const uint8_t *nul = memchr(*data, 0, *size);
	size_t n = nul ? (size_t)(nul - *data) : *size;
	*piece = *data;
	*data += n + (nul != NULL);
	*size -= n + (nul != NULL);
	return n;
}

/* A run directory runs/r of the temporary directory from the pieces of
 * the input: metrics.jsonl, status, config.yaml (the readers of dlt-runs
 * and dlt-smi).  Returns the path of runs. */
static inline const char *fuzz_run_dir(const uint8_t *data, size_t size)
{
	static const char *const files[] = { "runs/r/metrics.jsonl", "runs/r/status",
					     "runs/r/config.yaml" };
	const uint8_t *piece;

	mkdir(fuzz_path("runs"), 0777);
	mkdir(fuzz_path("runs/r"), 0777);
	for (int i = 0; i < 3; i++) {
		size_t n = fuzz_piece(&data, &size, &piece);
		fuzz_file(files[i], piece, n);
	}
	return fuzz_path("runs");
}

#endif
