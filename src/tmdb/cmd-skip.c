/*
 * cmd-skip.c -- GDB's skip: module calls that `step` passes over instead of
 * entering, named by address pattern (GDB's skip -function), by module
 * class, or by the source file of their forward() (skip -file/-gfile).
 */
#include "config.h"

#include <ctype.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "tmdb.h"

enum skip_kind { SKIP_ADDRESS = 0, SKIP_CLASS, SKIP_FILE };

static const char *const kind_names[] = { "address", "class", "file" };

static int skip_matches(const struct skip *k, const struct tm_node *n)
{
	const char *base;

	switch (k->is_class) {
	case SKIP_CLASS:
		return n->type && !strcmp(n->type, k->pattern);
	case SKIP_FILE:
		if (!n->file)
			return 0;
		base = strrchr(n->file, '/');
		return !fnmatch(k->pattern, n->file, 0) ||
		       (!strchr(k->pattern, '/') && !fnmatch(k->pattern, base ? base + 1 : n->file, 0));
	default:
		return tm_path_glob(k->pattern, n->address) == 1;
	}
}

/* Is id inside (or equal to) anc? */
static int is_within(const struct tm_session *s, uint32_t id, uint32_t anc)
{
	const struct tm_node *n;

	while (id != TM_NODE_NONE && (n = tm_nodetab_get(s->nodes, id))) {
		if (id == anc)
			return 1;
		id = n->parent;
	}
	return 0;
}

int tm_skip_event(struct tm_session *s, uint32_t node, uint32_t from)
{
	const struct tm_node *n;
	const struct skip *k;
	uint32_t id = node;

	if (!s->skips || !s->nodes)
		return 0;
	while (id != TM_NODE_NONE && (n = tm_nodetab_get(s->nodes, id))) {
		/* a skipped call the step started in is stepped through */
		if (n->kind == TM_NODE_MODULE &&
		    (from == TM_NODE_NONE || !is_within(s, from, id)))
			for (k = s->skips; k; k = k->next)
				if (k->enabled && skip_matches(k, n))
					return 1;
		id = n->parent;
	}
	return 0;
}

static void skip_add(struct tm_session *s, int kind, const char *pattern)
{
	struct skip *k = calloc(1, sizeof(*k)), **pp;

	if (!k || !(k->pattern = strdup(pattern))) {
		free(k);
		tm_error(s, "Out of memory.");
		return;
	}
	k->num = s->next_skip++;
	k->enabled = 1;
	k->is_class = kind;
	for (pp = &s->skips; *pp; pp = &(*pp)->next)
		;
	*pp = k;
	tm_out(s, "%s %s will be skipped when stepping.\n",
	       kind == SKIP_CLASS ? "Module class" : kind == SKIP_FILE ? "File" : "Module",
	       pattern);
}

/* "1 3-4" (all when empty): fn on each skip entry it names. */
static int for_each_skip(struct tm_session *s, const char *args, int what)
{
	const char *p = tm_skip_ws(args);
	struct skip **pp, *k;
	int any = 0;

	for (pp = &s->skips; (k = *pp);) {
		int hit = !*p;
		const char *q = p;

		while (!hit && *(q = tm_skip_ws(q))) {
			char *end;
			long lo = strtol(q, &end, 10), hi;

			if (end == q) {
				tm_error(s, "Arguments must be skip numbers.");
				return -1;
			}
			hi = lo;
			if (*end == '-')
				hi = strtol(end + 1, &end, 10);
			hit = k->num >= lo && k->num <= hi;
			q = end;
		}
		if (!hit) {
			pp = &k->next;
			continue;
		}
		any = 1;
		if (what < 0) {
			*pp = k->next;
			free(k->pattern);
			free(k);
			continue;
		}
		k->enabled = what;
		pp = &k->next;
	}
	if (!any) {
		tm_error(s, *p ? "No skiplist entries found with number %s." :
			 "No skiplist entries found.", p);
		return -1;
	}
	return 0;
}

int tm_info_skip(struct tm_session *s, const char *args)
{
	const struct skip *k;
	long only = 0;

	if (*args)
		only = strtol(args, NULL, 10);
	for (k = s->skips; k; k = k->next) {
		if (only && k->num != only)
			continue;
		if (k == s->skips || (only && k->num == only))
			tm_out(s, "Num   Enb Kind     What\n");
		tm_out(s, "%-5d %-3s %-8s %s\n", k->num, k->enabled ? "y" : "n",
		       kind_names[k->is_class], k->pattern);
	}
	if (!s->skips)
		tm_out(s, "Not skipping any modules.\n");
	else if (only && !k) {
		for (k = s->skips; k && k->num != only; k = k->next)
			;
		if (!k)
			tm_out(s, "No skiplist entries found with number %s.\n", args);
	}
	return 0;
}

static int cmd_skip_exec(struct tm_session *s, const char *args, int from_tty)
{
	const char *p = tm_skip_ws(args), *rest;
	size_t wl = strcspn(p, " \t");
	int kind = SKIP_ADDRESS;

	(void)from_tty;
	rest = tm_skip_ws(p + wl);
	if (tm_word_is(p, wl, "delete", 3))
		return for_each_skip(s, rest, -1);
	if (tm_word_is(p, wl, "enable", 2))
		return for_each_skip(s, rest, 1);
	if (tm_word_is(p, wl, "disable", 3))
		return for_each_skip(s, rest, 0);
	if (tm_word_is(p, wl, "class", 5) || tm_word_is(p, wl, "-class", 3)) {
		kind = SKIP_CLASS;
	} else if (tm_word_is(p, wl, "-function", 3) || tm_word_is(p, wl, "-gfunction", 3) ||
		   tm_word_is(p, wl, "function", 8)) {
		kind = SKIP_ADDRESS;
	} else if (tm_word_is(p, wl, "-file", 2) || tm_word_is(p, wl, "-gfile", 3) ||
		   tm_word_is(p, wl, "file", 4)) {
		kind = SKIP_FILE;
	} else if (*p == '-') {
		tm_error(s, "Invalid skip option: %.*s (use -function, -gfile, -file or "
			 "-class).", (int)wl, p);
		return -1;
	} else {
		rest = p;
	}
	if (!*rest) {
		/* GDB: skip without a name skips the current function */
		const struct tm_node *n;
		uint32_t id;

		if (kind == SKIP_FILE || !s->have_cur) {
			tm_error(s, "No default %s now.", kind == SKIP_FILE ? "file" : "module");
			return -1;
		}
		for (id = s->cur.node; (n = tm_nodetab_get(s->nodes, id)) &&
		     n->kind != TM_NODE_MODULE; id = n->parent)
			;
		if (!n) {
			tm_error(s, "No default module now.");
			return -1;
		}
		skip_add(s, kind, kind == SKIP_CLASS ? (n->type ? n->type : "?") : n->address);
		return 0;
	}
	if (kind == SKIP_ADDRESS && tm_path_glob(rest, "model") < 0) {
		tm_error(s, "Invalid module address pattern \"%s\".", rest);
		return -1;
	}
	skip_add(s, kind, rest);
	return 0;
}

const struct cmd_entry cmd_skip_entry = {
	.name = "skip",
	.usage = "skip [PATTERN | class CLASS | -file FILE] | skip delete|enable|disable [N...]",
	.help = "Make step pass over the calls of some modules instead of entering them.\n"
		"skip PATTERN (or -function PATTERN): the modules at an address pattern,\n"
		"e.g. \"skip model.**.act\"; skip class CLASS (or -class): every module of\n"
		"that class, e.g. \"skip class GELU\"; skip -file FILE (or -gfile GLOB):\n"
		"the modules whose forward() is in FILE; skip alone: the module at the\n"
		"playhead.  \"info skip\" lists them; skip delete, enable and disable take\n"
		"their numbers (all without).",
	.exec = cmd_skip_exec, .klass = "running",
};
