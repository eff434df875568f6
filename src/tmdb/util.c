/*
 * util.c -- the small text helpers every tmdb file uses (tmdb.h): skipping
 * and trimming blanks, numbers and booleans as commands take them, command
 * word abbreviations, and lists of lines.  They depend on nothing of the
 * session, so that everything can call them.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tmdb.h"

const char *tm_skip_ws(const char *p)
{
	while (*p && isspace((unsigned char)*p))
		p++;
	return p;
}

/* Trims both ends in place; returns the start. */
char *tm_strip(char *p)
{
	size_t n;

	while (*p && isspace((unsigned char)*p))
		p++;
	n = strlen(p);
	while (n && isspace((unsigned char)p[n - 1]))
		p[--n] = 0;
	return p;
}

int tm_parse_uint(const char *p, uint64_t *out)
{
	char *end;
	unsigned long long v;

	p = tm_skip_ws(p);
	if (!isdigit((unsigned char)*p))
		return -1;
	errno = 0;
	v = strtoull(p, &end, 0);
	if (errno || *tm_skip_ws(end))
		return -1;
	*out = v;
	return 0;
}

int tm_parse_bool(const char *p, int *out)
{
	p = tm_skip_ws(p);
	if (!*p || !strcmp(p, "on") || !strcmp(p, "1") || !strcmp(p, "yes") ||
	    !strcmp(p, "enable"))
		*out = 1;
	else if (!strcmp(p, "off") || !strcmp(p, "0") || !strcmp(p, "no") ||
		 !strcmp(p, "disable"))
		*out = 0;
	else
		return -1;
	return 0;
}

/* Is word[0..len) an abbreviation (at least minlen chars) of full? */
int tm_word_is(const char *word, size_t len, const char *full, size_t minlen)
{
	return len >= minlen && len <= strlen(full) && !strncmp(word, full, len);
}

void tm_lines_free(char **lines, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(lines[i]);
	free(lines);
}
