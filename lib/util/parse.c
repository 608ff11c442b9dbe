#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "util.h"

int dlt_parse_i64(const char *s, long long min, long long max, long long *out, const char *what)
{
	char *end;
	long long v;
	errno = 0;
	if (!*s || *s == ' ' || *s == '\t')
		return dlt_error(DLT_EINPUT, "%s: expected an integer, got '%s'", what, s);
	v = strtoll(s, &end, 10);
	if (*end)
		return dlt_error(DLT_EINPUT, "%s: expected an integer, got '%s'", what, s);
	if (errno == ERANGE || v < min || v > max)
		return dlt_error(DLT_EINPUT, "%s: %s is out of range [%lld, %lld]", what, s, min, max);
	*out = v;
	return 0;
}

int dlt_parse_f64(const char *s, double *out, const char *what)
{
	char *end;
	double v;
	errno = 0;
	if (!*s || *s == ' ' || *s == '\t')
		return dlt_error(DLT_EINPUT, "%s: expected a number, got '%s'", what, s);
	v = strtod(s, &end);
	if (*end)
		return dlt_error(DLT_EINPUT, "%s: expected a number, got '%s'", what, s);
	/* ERANGE also flags underflow to a subnormal or zero, which is fine */
	if (!isfinite(v) || (errno == ERANGE && fabs(v) > 1))
		return dlt_error(DLT_EINPUT, "%s: %s is not a finite number", what, s);
	*out = v;
	return 0;
}
