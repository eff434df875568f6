/*
 * error.c -- the text of every tm_err code, and small shared utilities.
 *
 * Codes and their names are stable (see tm-types.h); messages say what went
 * wrong in terms a user of tmdb can act on.
 */
#include "config.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tm-internal.h"

static const struct {
	const char *name;
	const char *text;
} errors[TM_ERR__COUNT] = {
	[TM_OK] = { "TM_OK", "success" },
	[TM_ERR_GENERIC] = { "TM_ERR_GENERIC", "unspecified error" },
	[TM_ERR_NOMEM] = { "TM_ERR_NOMEM", "out of memory" },
	[TM_ERR_IO] = { "TM_ERR_IO", "input/output error" },
	[TM_ERR_INVALID_ARG] = { "TM_ERR_INVALID_ARG", "invalid argument" },
	[TM_ERR_BAD_MAGIC] = { "TM_ERR_BAD_MAGIC", "not a tensormorph trace (bad magic number)" },
	[TM_ERR_VERSION] = { "TM_ERR_VERSION", "unsupported format version" },
	[TM_ERR_CRC] = { "TM_ERR_CRC", "checksum mismatch (data is damaged)" },
	[TM_ERR_TRUNCATED] = { "TM_ERR_TRUNCATED", "data is truncated" },
	[TM_ERR_TOO_LARGE] = { "TM_ERR_TOO_LARGE", "declared size exceeds the allowed limit" },
	[TM_ERR_CORRUPT] = { "TM_ERR_CORRUPT", "data is corrupt" },
	[TM_ERR_NO_INDEX] = { "TM_ERR_NO_INDEX", "trace has no index" },
	[TM_ERR_NOT_FOUND] = { "TM_ERR_NOT_FOUND", "not found" },
	[TM_ERR_END] = { "TM_ERR_END", "end of trace" },
	[TM_ERR_ADDRESS] = { "TM_ERR_ADDRESS", "malformed node address" },
	[TM_ERR_TQL] = { "TM_ERR_TQL", "TQL error" },
	[TM_ERR_COMPRESS] = { "TM_ERR_COMPRESS", "compression error" },
	[TM_ERR_CLOSED] = { "TM_ERR_CLOSED", "connection or handle closed" },
	[TM_ERR_AGAIN] = { "TM_ERR_AGAIN", "more input needed" },
	[TM_ERR_RESERVED] = { "TM_ERR_RESERVED", "reserved field is not zero" },
	[TM_ERR_UNSUPPORTED] = { "TM_ERR_UNSUPPORTED", "not supported" },
};

const char *tm_strerror(int err)
{
	if (err < 0 || err >= TM_ERR__COUNT || !errors[err].text)
		return "unknown error code";
	return errors[err].text;
}

const char *tm_errname(int err)
{
	if (err < 0 || err >= TM_ERR__COUNT || !errors[err].name)
		return "TM_ERR_UNKNOWN";
	return errors[err].name;
}

uint64_t tm_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

char *tm_strdup0(const char *s)
{
	size_t n;
	char *d;

	if (!s)
		return NULL;
	n = strlen(s) + 1;
	d = malloc(n);
	if (d)
		memcpy(d, s, n);
	return d;
}

char *tm_asprintf(const char *fmt, ...)
{
	va_list ap;
	int n;
	char *s;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return NULL;
	s = malloc((size_t)n + 1);
	if (!s)
		return NULL;
	va_start(ap, fmt);
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return s;
}

const char *tm_version_string(void)
{
	return PACKAGE_NAME " " PACKAGE_VERSION;
}

void tm_thread_name(pthread_t th, const char *name)
{
#ifdef __GLIBC__
	pthread_setname_np(th, name);
#else
	(void)th;
	(void)name;
#endif
}
