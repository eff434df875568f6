/*
 * mi-parse.c -- the GDB/MI input grammar.
 *
 * Input comes from a front end, but a front end can be anything that writes
 * to tmdb's stdin, so this is a parser of untrusted bytes: lengths are
 * capped, every read is bounds-checked against len (not a terminating NUL),
 * and a NUL byte in a line is an error.  libc only, so that the MI fuzz
 * target (testsuite/fuzz/fuzz_mi.c) links it alone.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mi.h"

static int is_blank(char c)
{
	return c == ' ' || c == '\t';
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

static char *dup_n(const char *s, size_t n)
{
	char *p = malloc(n + 1);

	if (!p)
		return NULL;
	memcpy(p, s, n);
	p[n] = 0;
	return p;
}

static int push_arg(struct mi_parse *p, char *arg)
{
	char **g;

	if (!arg)
		return -1;
	g = realloc(p->argv, (p->argc + 1) * sizeof(*p->argv));
	if (!g) {
		free(arg);
		return -1;
	}
	p->argv = g;
	p->argv[p->argc++] = arg;
	return 0;
}

static int octal(char c)
{
	return c >= '0' && c <= '7';
}

/*
 * c-string → '"' ( char | escape )* '"'
 * escape   → '\' ( ["\\abefnrtv'?] | octal{1,3} )
 * Decodes the c-string starting at line[*pos] (the opening quote) into a
 * malloc'd string; *pos ends after the closing quote.  A decoded \000 is an
 * error: parameters are C strings to the commands.
 */
static char *cstring(const char *line, size_t len, size_t *pos, char *err,
		     size_t errlen)
{
	size_t i = *pos + 1, n = 0;
	char *out = malloc(len - *pos);         /* never longer than the source */

	if (!out) {
		fail(err, errlen, "Out of memory.");
		return NULL;
	}
	for (;;) {
		char c;

		if (i >= len) {
			fail(err, errlen, "Unterminated c-string.");
			goto bad;
		}
		c = line[i++];
		if (c == '"')
			break;
		if (c != '\\') {
			out[n++] = c;
			continue;
		}
		if (i >= len) {
			fail(err, errlen, "Unterminated c-string.");
			goto bad;
		}
		c = line[i++];
		switch (c) {
		case '"': case '\\': case '\'': case '?': out[n++] = c; break;
		case 'a': out[n++] = '\a'; break;
		case 'b': out[n++] = '\b'; break;
		case 'e': out[n++] = '\033'; break;
		case 'f': out[n++] = '\f'; break;
		case 'n': out[n++] = '\n'; break;
		case 'r': out[n++] = '\r'; break;
		case 't': out[n++] = '\t'; break;
		case 'v': out[n++] = '\v'; break;
		default:
			if (octal(c)) {
				unsigned v = (unsigned)(c - '0'), k;

				for (k = 1; k < 3 && i < len && octal(line[i]); k++)
					v = v * 8 + (unsigned)(line[i++] - '0');
				if (v == 0 || v > 0xff) {
					fail(err, errlen, "Bad octal escape in c-string.");
					goto bad;
				}
				out[n++] = (char)v;
				break;
			}
			fail(err, errlen, "Unknown escape \"\\%c\" in c-string.",
			     c >= 0x20 && c < 0x7f ? c : '?');
			goto bad;
		}
	}
	out[n] = 0;
	*pos = i;
	return out;
bad:
	free(out);
	return NULL;
}

void mi_parse_free(struct mi_parse *p)
{
	size_t i;

	for (i = 0; i < p->argc; i++)
		free(p->argv[i]);
	free(p->argv);
	free(p->op);
	p->argv = NULL;
	p->argc = 0;
	p->op = NULL;
}

/*
 * command    → [ token ] ( mi-command | cli-command )
 * token      → digit+
 * mi-command → "-" operation ( blank+ parameter )* blank*
 * operation  → ( alnum | "-" | "_" )+
 * parameter  → c-string | non-blank-sequence
 * cli-command→ anything else, passed to the CLI as it is
 * Options ("-t", "-c COND", "--reverse") are parameters here; each command
 * interprets its own.
 */
int mi_parse(const char *line, size_t len, struct mi_parse *out,
	     char *err, size_t errlen)
{
	size_t i = 0, t = 0, start;

	memset(out, 0, sizeof(*out));
	if (len > MI_LINE_MAX)
		return fail(err, errlen, "Command line too long (over %u bytes).",
			    MI_LINE_MAX);
	if (memchr(line, 0, len))
		return fail(err, errlen, "NUL byte in command.");
	while (i < len && line[i] >= '0' && line[i] <= '9') {
		if (t >= MI_TOKEN_MAX) {
			out->token[0] = 0;      /* not echoed: it is not one */
			return fail(err, errlen, "Token too long.");
		}
		out->token[t++] = line[i++];
	}
	out->token[t] = 0;
	if (i >= len || line[i] != '-') {
		/* CLI command: the rest, blanks trimmed at both ends. */
		while (i < len && is_blank(line[i]))
			i++;
		start = i;
		i = len;
		while (i > start && is_blank(line[i - 1]))
			i--;
		out->is_cli = 1;
		out->op = dup_n(line + start, i - start);
		if (!out->op)
			return fail(err, errlen, "Out of memory.");
		return 0;
	}
	start = ++i;
	while (i < len && (line[i] == '-' || line[i] == '_' ||
			   (line[i] >= 'a' && line[i] <= 'z') ||
			   (line[i] >= 'A' && line[i] <= 'Z') ||
			   (line[i] >= '0' && line[i] <= '9')))
		i++;
	if (i == start)
		return fail(err, errlen, "Missing MI operation after \"-\".");
	if (i < len && !is_blank(line[i]))
		return fail(err, errlen, "Bad character in MI operation.");
	out->op = dup_n(line + start, i - start);
	if (!out->op)
		return fail(err, errlen, "Out of memory.");
	for (;;) {
		char *arg;

		while (i < len && is_blank(line[i]))
			i++;
		if (i >= len)
			break;
		if (out->argc >= MI_ARGC_MAX) {
			mi_parse_free(out);
			return fail(err, errlen, "Too many parameters (over %u).",
				    MI_ARGC_MAX);
		}
		if (line[i] == '"') {
			arg = cstring(line, len, &i, err, errlen);
			if (!arg) {
				mi_parse_free(out);
				return -1;
			}
			if (i < len && !is_blank(line[i])) {
				free(arg);
				mi_parse_free(out);
				return fail(err, errlen, "Junk after c-string parameter.");
			}
		} else {
			start = i;
			while (i < len && !is_blank(line[i]))
				i++;
			arg = dup_n(line + start, i - start);
		}
		if (push_arg(out, arg)) {
			mi_parse_free(out);
			return fail(err, errlen, "Out of memory.");
		}
	}
	return 0;
}
