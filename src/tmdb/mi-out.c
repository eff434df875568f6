/*
 * mi-out.c -- building GDB/MI output: c-strings, results, tuples, lists.
 *
 * Every MI value is a c-string, a tuple or a list; records are built into an
 * mi_buf and written whole.  Escaping follows GDB: \" \\ \n \t \r by name,
 * every other control byte and every byte >= 0x80 as three octal digits, so
 * that any output line is plain printable ASCII whatever a node name, a file
 * name or an error message contains.  Commas are placed by mi_sep(): the
 * caller never tracks "first element" state.  libc only (the MI fuzz target
 * links this file alone).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mi.h"

void mi_buf_free(struct mi_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

void mi_buf_reset(struct mi_buf *b)
{
	b->len = 0;
	if (b->p)
		b->p[0] = 0;
}

static int mi_buf_grow(struct mi_buf *b, size_t more)
{
	size_t cap;
	char *g;

	if (b->oom)
		return -1;
	if (b->len + more + 1 <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 256;
	while (cap < b->len + more + 1) {
		if (cap > ((size_t)-1) / 2) {
			b->oom = 1;
			return -1;
		}
		cap *= 2;
	}
	g = realloc(b->p, cap);
	if (!g) {
		b->oom = 1;
		return -1;
	}
	b->p = g;
	b->cap = cap;
	return 0;
}

void mi_buf_add(struct mi_buf *b, const char *s, size_t n)
{
	if (mi_buf_grow(b, n))
		return;
	if (n)
		memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = 0;
}

void mi_buf_puts(struct mi_buf *b, const char *s)
{
	mi_buf_add(b, s, strlen(s));
}

void mi_buf_printf(struct mi_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || mi_buf_grow(b, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void mi_buf_cstr(struct mi_buf *b, const char *s, size_t n)
{
	char oct[5];
	size_t i, start = 0;

	mi_buf_add(b, "\"", 1);
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		const char *esc = NULL;

		if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
			continue;
		mi_buf_add(b, s + start, i - start);
		start = i + 1;
		switch (c) {
		case '"': esc = "\\\""; break;
		case '\\': esc = "\\\\"; break;
		case '\n': esc = "\\n"; break;
		case '\t': esc = "\\t"; break;
		case '\r': esc = "\\r"; break;
		default:
			snprintf(oct, sizeof(oct), "\\%03o", c);
			esc = oct;
			break;
		}
		mi_buf_puts(b, esc);
	}
	mi_buf_add(b, s + start, n - start);
	mi_buf_add(b, "\"", 1);
}

void mi_sep(struct mi_buf *b)
{
	char last;

	if (!b->len)
		return;
	last = b->p[b->len - 1];
	if (last != '{' && last != '[' && last != '=' && last != ',')
		mi_buf_add(b, ",", 1);
}

void mi_kv(struct mi_buf *b, const char *key, const char *val)
{
	mi_sep(b);
	mi_buf_puts(b, key);
	mi_buf_add(b, "=", 1);
	mi_buf_cstr(b, val ? val : "", val ? strlen(val) : 0);
}

void mi_kvf(struct mi_buf *b, const char *key, const char *fmt, ...)
{
	char small[256], *text = small;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(small)) {
		text = malloc((size_t)n + 1);
		if (!text) {
			b->oom = 1;
			return;
		}
		va_start(ap, fmt);
		vsnprintf(text, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	mi_kv(b, key, text);
	if (text != small)
		free(text);
}

void mi_val(struct mi_buf *b, const char *val)
{
	mi_sep(b);
	mi_buf_cstr(b, val, strlen(val));
}

void mi_open(struct mi_buf *b, const char *key, char bracket)
{
	char c = bracket;

	mi_sep(b);
	if (key) {
		mi_buf_puts(b, key);
		mi_buf_add(b, "=", 1);
	}
	mi_buf_add(b, &c, 1);
}

void mi_close(struct mi_buf *b, char bracket)
{
	char c = bracket;

	mi_buf_add(b, &c, 1);
}

void mi_stream(struct mi_buf *b, char kind, const char *text, size_t n)
{
	mi_buf_add(b, &kind, 1);
	mi_buf_cstr(b, text, n);
	mi_buf_add(b, "\n", 1);
}
