/* Programs for no OS, run on an emulated CPU by test/emu/x86-run.py:
 * what libc.c gives them.  The program's entry is emu_main, which gets a
 * buffer for its report (TAP here), and returns the count of failures. */
#ifndef DLT_TEST_EMU_H
#define DLT_TEST_EMU_H

#include <stddef.h>
#include <stdint.h>

int emu_main(char *buf, size_t cap);

/* TAP into the buffer that emu_tap_start was given: ok() writes "ok N - "
 * or "not ok N - " and returns cond; the caller ends the line with put. */
void emu_tap_start(char *buf, size_t cap, int plan);
int ok(int cond);
void put(const char *s);
void put_int(long v);
void put_hex(uint32_t v);
int emu_tap_end(void);	/* the count of failures, the buffer NUL-ended */

/* How many of aligned_alloc's requests failed (they send a GEMM past its
 * micro-kernels) */
extern int emu_alloc_failed;

#endif
