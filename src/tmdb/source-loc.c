/*
 * source-loc.c -- FILE:LINE, what an IDE sends when a line is clicked, as
 * the graph nodes it stands for.  MI's -break-insert and DAP's
 * setBreakpoints both resolve source lines here.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tmdb.h"

static int fail(struct tm_session *s, int quiet, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(struct tm_session *s, int quiet, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	if (quiet)
		return -1;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	tm_error(s, "%s", buf);
	return -1;
}

/* Does a recorded file name stand for the file a front end names? */
static int same_file(const char *recorded, const char *given)
{
	const char *a = strrchr(recorded, '/'), *b = strrchr(given, '/');

	if (!strcmp(recorded, given))
		return 1;
	a = a ? a + 1 : recorded;
	b = b ? b + 1 : given;
	return !strcmp(a, b);
}

/*
 * FILE:LINE (what IDEs send when a line is clicked) into a node address or
 * pattern: the modules whose forward() is the function around LINE, i.e.
 * those with the greatest recorded line <= LINE in FILE.  Several modules
 * with the same number of segments become one pattern with * where they
 * differ (model.layers.0.mlp, model.layers.1.mlp: model.layers.*.mlp).
 */
int tm_source_resolve(struct tm_session *s, const char *file, unsigned line,
		      char *out, size_t len, int quiet)
{
	uint32_t i, n = s->nodes ? tm_nodetab_count(s->nodes) : 0;
	unsigned best = 0;
	char segs[TM_ADDRESS_MAX + 1];
	int have = 0, nseg = 0;

	for (i = 0; i < n; i++) {
		const struct tm_node *nd = tm_nodetab_get(s->nodes, i);

		if (nd && nd->file && nd->line && nd->line <= line &&
		    nd->line > best && same_file(nd->file, file))
			best = nd->line;
	}
	if (!best)
		return fail(s, quiet, "No module's forward() in \"%s\" at or before "
				"line %u.", file, line);
	for (i = 0; i < n; i++) {
		const struct tm_node *nd = tm_nodetab_get(s->nodes, i);
		const char *p, *q;
		char merged[TM_ADDRESS_MAX + 1];
		size_t o = 0;
		int k = 0;

		if (!nd || !nd->file || nd->line != best || !same_file(nd->file, file))
			continue;
		if (!have) {
			snprintf(segs, sizeof(segs), "%s", nd->address);
			have = 1;
			for (p = segs, nseg = 1; *p; p++)
				nseg += *p == '.';
			continue;
		}
		/* merge segment by segment */
		for (q = nd->address, k = 1; *q; q++)
			k += *q == '.';
		if (k != nseg)
			return fail(s, quiet, "Line %u of \"%s\" is in modules at "
					"different depths; break on a node "
					"address instead.", line, file);
		p = segs;
		q = nd->address;
		while (*p || *q) {
			size_t lp = strcspn(p, "."), lq = strcspn(q, ".");

			if (o + (lp > 1 ? lp : 1) + 2 >= sizeof(merged))
				return fail(s, quiet, "Address too long.");
			if (lp == lq && !strncmp(p, q, lp)) {
				memcpy(merged + o, p, lp);
				o += lp;
			} else {
				merged[o++] = '*';
			}
			p += lp;
			q += lq;
			if (*p == '.' && *q == '.') {
				merged[o++] = '.';
				p++;
				q++;
			}
		}
		merged[o] = 0;
		snprintf(segs, sizeof(segs), "%s", merged);
	}
	snprintf(out, len, "%s", segs);
	return 0;
}


int tm_source_location(struct tm_session *s, const char *file, unsigned line,
		       char *out, size_t len)
{
	return tm_source_resolve(s, file, line, out, len, 0);
}

int tm_source_split(const char *loc, char *file, size_t len, unsigned *line)
{
	const char *colon = strrchr(loc, ':');
	size_t fl;

	if (!colon || colon == loc || loc[0] == '@' || !colon[1] ||
	    strspn(colon + 1, "0123456789") != strlen(colon + 1))
		return 0;
	fl = (size_t)(colon - loc);
	if (fl >= len)
		return 0;
	memcpy(file, loc, fl);
	file[fl] = 0;
	*line = (unsigned)strtoul(colon + 1, NULL, 10);
	return 1;
}
