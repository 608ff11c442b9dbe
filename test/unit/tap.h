/* Minimal TAP producer for the C unit tests, run by prove. */
#ifndef DLT_TAP_H
#define DLT_TAP_H

#include <stddef.h>

/* ok(cond, "what %d", ...) prints "ok N - what" or "not ok N - what". */
int ok(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Compares with a relative-or-absolute tolerance, printing both on failure. */
int ok_near(double got, double want, double tol, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* A library status: ok when rc == want, printing dlt_errmsg() otherwise. */
int ok_rc(int rc, int want, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* ok when the last error message contains needle. */
int ok_msg(const char *needle, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A test that cannot run here: "ok N # skip why". */
void skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints the plan "1..N" and returns the exit status (1 if any failed). */
int done_testing(void);
/* A fresh temporary directory for this test program (removed at exit). */
const char *tap_tmpdir(void);

#endif
