/* The C23 scanf and strtoull of glibc 2.38 on, for the bochscpu-python
 * wheel (built on a newer glibc than Debian 12's) that test/emu/x86-run.py
 * loads: it wants them, and does not use what C23 changed in them (the
 * 0b prefix).  Built -std=c11 without _GNU_SOURCE, so that the headers of
 * a newer glibc do not send these calls back to the C23 names. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int __isoc23_sscanf(const char *s, const char *format, ...);
unsigned long long __isoc23_strtoull(const char *s, char **end, int base);

int __isoc23_sscanf(const char *s, const char *format, ...)
{
	va_list ap;
	int n;
	va_start(ap, format);
	n = vsscanf(s, format, ap);
	va_end(ap);
	return n;
}

unsigned long long __isoc23_strtoull(const char *s, char **end, int base)
{
	return strtoull(s, end, base);
}
