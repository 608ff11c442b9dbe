#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

/* One message per thread: the loader thread's errors must not clobber the
 * main thread's. */
static _Thread_local char msg[1024];

int dlt_error(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return code;
}

int dlt_error_errno(int code, const char *fmt, ...)
{
	int e = errno;
	size_t n;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	n = strlen(msg);
	snprintf(msg + n, sizeof(msg) - n, ": %s", strerror(e));
	return code;
}

int dlt_error_prefix(int code, const char *fmt, ...)
{
	char old[sizeof(msg)];
	size_t n;
	va_list ap;
	memcpy(old, msg, sizeof(old));
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	n = strlen(msg);
	/* cut at the buffer's end, as vsnprintf would */
	if (n + 3 <= sizeof(msg)) {
		size_t k = strlen(old), room = sizeof(msg) - n - 3;
		if (k > room)
			k = room;
		memcpy(msg + n, ": ", 2);
		memcpy(msg + n + 2, old, k);
		msg[n + 2 + k] = 0;
	}
	return code;
}

const char *dlt_errmsg(void)
{
	return msg;
}

int dlt_exit_status(int code)
{
	if (code >= 0)
		return 0;
	return code == DLT_EINPUT ? 2 : 1;
}
