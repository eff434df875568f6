/*
 * cmd-break.c -- breakpoints and watchpoints: break, tbreak, watch,
 * condition, ignore, delete, disable, enable, commands, info breakpoints.
 *
 * A breakpoint's address (possibly a pattern) is compiled once into a byte
 * per node id holding the event kinds it fires on, so that checking an event
 * is one array load and a bit test; only then does the TQL condition run,
 * once per candidate tensor, with that tensor as `tensor`.  A module address
 * without a slot fires on the module's EXIT (its outputs), :in.N on ENTER,
 * :grad_* on BWD events and a parameter's :data/:grad on PARAM events.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "tmdb.h"

struct bp *tm_bp_find(struct tm_session *s, int num)
{
	struct bp *b;

	for (b = s->bps; b; b = b->next)
		if (b->num == num)
			return b;
	return NULL;
}

/*
 * Binds an address or pattern to the node table (the library's
 * tm_breakpoint: a byte of event kinds per node); the condition stays.
 * quiet: no message (rebinding after "file").
 */
int tm_bp_bind(struct tm_session *s, struct bp *b, const char *where, int quiet)
{
	struct tm_breakpoint *c = &b->core;
	const char *msg = NULL;
	int col = 0;

	if (tm_breakpoint_set_where(c, where, &col, &msg) != TM_OK) {
		if (!quiet)
			tm_error(s, "Malformed address \"%s\": %s at column %d.",
				 where, msg ? msg : "syntax error", col + 1);
		return -1;
	}
	free(b->where);
	b->where = strdup(c->where ? c->where : "");
	if (c->every_node)
		return 0;       /* a catchpoint: every node, now and later */
	if (tm_breakpoint_bind(c, s->nodes) != TM_OK)
		return -1;
	if (c->nmatch == 0) {
		if (!quiet) {
			if (tm_address_is_pattern(c->addr))
				tm_error(s, "No node matches \"%s\".", where);
			else if (c->has_slot && tm_session_node(s, c->addr))
				tm_error(s, "Node \"%s\" has no %s slot.",
					 tm_address_path(c->addr),
					 tm_slot_kind_name(c->slot.kind));
			else
				tm_address_error(s, tm_address_path(c->addr));
		}
		return -1;
	}
	return 0;
}

/* Binds b's location to the nodes known now, quietly; 0 when it binds.
 * FILE:LINE is resolved again first: more modules may hold the line. */
static int bp_rebind(struct tm_session *s, struct bp *b)
{
	char loc[TM_ADDRESS_MAX + 1];

	if (!b->src_file)
		return tm_bp_bind(s, b, b->where, 1) != 0;
	b->src_seen = s->nodes ? tm_nodetab_count(s->nodes) : 0;
	return tm_source_resolve(s, b->src_file, b->src_line, loc, sizeof(loc), 1) ||
	       tm_bp_bind(s, b, loc, 1);
}

const char *tm_catch_kind_name(int kind)
{
	static const char *const names[] = {
		[TM_CATCH_EXCEPTION] = "exception", [TM_CATCH_NAN] = "nan",
		[TM_CATCH_INF] = "inf", [TM_CATCH_GAP] = "gap", [TM_CATCH_SIGNAL] = "signal",
	};

	return kind > 0 && kind < (int)(sizeof(names) / sizeof(names[0])) ? names[kind] : "?";
}

/*
 * The source of the condition b's matcher runs: a catchpoint's own test
 * and then user's (NULL or "": none).  malloc'd; NULL with *none set when
 * there is nothing to test.
 */
static char *bp_core_cond(const struct bp *b, const char *user, int *none)
{
	char guard[160];
	size_t l;
	char *out;

	*none = 0;
	guard[0] = 0;
	switch (b->catch_kind) {
	case TM_CATCH_EXCEPTION:
		if (b->catch_arg)
			snprintf(guard, sizeof(guard),
				 "event == \"raise\" && exception.type == \"%s\"", b->catch_arg);
		else
			snprintf(guard, sizeof(guard), "event == \"raise\"");
		break;
	case TM_CATCH_NAN:
		snprintf(guard, sizeof(guard), "tensor.nan_count > 0");
		break;
	case TM_CATCH_INF:
		snprintf(guard, sizeof(guard), "tensor.inf_count > 0");
		break;
	default:
		break;
	}
	if (user && !*user)
		user = NULL;
	if (!guard[0] && !user) {
		*none = 1;
		return NULL;
	}
	if (!guard[0])
		return strdup(user);
	if (!user)
		return strdup(guard);
	l = strlen(guard) + strlen(user) + 16;
	out = malloc(l);
	if (out)
		snprintf(out, l, "(%s) && (%s)", guard, user);
	return out;
}

/* Compiles what b's matcher runs for condition user (bp_core_cond) into
 * *prog (NULL: unconditional), keeping its source in *src when src is
 * not NULL (a catchpoint's, for the live probe).  0, or -1 after an error
 * message (a catchpoint's own test always compiles, so it is the user's). */
static int bp_compile(struct tm_session *s, const struct bp *b, const char *user,
		      tm_tql_prog **prog, char **src)
{
	int none;
	char *text = bp_core_cond(b, user, &none);

	*prog = NULL;
	if (src)
		*src = NULL;
	if (none)
		return 0;
	if (!text)
		return -1;
	if (b->catch_kind && user && *user) {
		/* errors name the user's text, not the combination */
		if (tm_compile(s, user, 1, prog)) {
			free(text);
			return -1;
		}
		tm_tql_free(*prog);
		*prog = NULL;
	}
	if (tm_compile(s, text, 1, prog)) {
		free(text);
		return -1;
	}
	if (src && b->catch_kind)
		*src = text;
	else
		free(text);
	return 0;
}

/*
 * A pending breakpoint (no node matched when it was set) and a live
 * process announced nodes since: bind again, and when it resolves, compile
 * its condition then, against the nodes it may name.  0 when b cannot
 * fire (its condition does not compile: it is disabled).
 */
static int bp_resolve(struct tm_session *s, struct bp *b)
{
	tm_tql_prog *cond = NULL;

	/* FILE:LINE: nothing new to look at since it last failed */
	if (b->src_file && s->nodes && tm_nodetab_count(s->nodes) == b->src_seen)
		return 1;
	if (bp_rebind(s, b))
		return 1;
	b->pending = 0;
	if (b->cond_src && !b->core.cond) {
		if (tm_compile(s, b->cond_src, 1, &cond)) {
			tm_error(s, "warning: breakpoint %d's condition does not "
				 "compile; disabled.", b->num);
			b->enabled = 0;
			return 0;
		}
		tm_breakpoint_set_cond(&b->core, cond);
	}
	return 1;
}

/*
 * Does b fire at ev?  The library decides (tm_breakpoint_covers, then the
 * condition over each candidate tensor with this session's lookups and
 * variables); an event where every evaluation was unknown counts as
 * unknown.  *focus gets the index of the tensor that fired.
 */
int tm_bp_match(struct tm_session *s, struct bp *b, const struct tm_event *ev,
		uint32_t *focus)
{
	struct tm_tql_ctx ctx;

	*focus = UINT32_MAX;
	/* catch gap / catch signal stop at records, never at an event */
	if (b->catch_kind == TM_CATCH_GAP || b->catch_kind == TM_CATCH_SIGNAL)
		return 0;
	if (b->pending && ev->node >= b->core.nkinds &&
	    tm_nodetab_count(s->nodes) > b->core.nkinds && !bp_resolve(s, b))
		return 0;
	if (b->pending)
		return 0;
	if (!tm_breakpoint_covers(&b->core, s->nodes, ev))
		return 0;
	tm_tql_ctx_init(s, &ctx, ev, NULL);
	return tm_breakpoint_test(&b->core, &ctx, focus) > 0;
}

int tm_bp_rebind_all(struct tm_session *s)
{
	struct bp *b;

	for (b = s->bps; b; b = b->next) {
		if (b->type == BP_WATCH) {
			tm_expr_free(b->wexpr);
			tm_val_clear(&b->old);
			b->have_old = 0;
			if (tm_expr_compile(s, b->where, 0, b->wexpr)) {
				tm_error(s, "warning: watchpoint %d (%s) does not apply "
					 "to this trace; disabled.", b->num, b->where);
				b->enabled = 0;
				/* keep an empty expression: evaluating it fails */
				memset(b->wexpr, 0, sizeof(*b->wexpr));
				continue;
			}
			b->watch_node_only = b->wexpr->simple;
			b->watch_node = b->wexpr->node;
		} else if (bp_rebind(s, b)) {
			if (tm_session_can_pend(s)) {
				/* The process may announce the node later. */
				b->pending = 1;
				tm_breakpoint_set_cond(&b->core, NULL);
				continue;
			}
			tm_error(s, "warning: breakpoint %d (%s) matches no node "
				 "of this trace; disabled.", b->num, b->where);
			b->enabled = 0;
		} else {
			b->pending = 0;
		}
		if (b->cond_src || b->catch_kind) {
			tm_tql_prog *cond = NULL;
			char *src = NULL;

			tm_breakpoint_set_cond(&b->core, NULL);
			if (bp_compile(s, b, b->cond_src, &cond, &src))
				b->enabled = 0;
			tm_breakpoint_set_cond(&b->core, cond);
			free(b->core_src);
			b->core_src = src;
		}
	}
	return 0;
}

static void bp_append(struct tm_session *s, struct bp *b)
{
	struct bp **pp = &s->bps;

	while (*pp)
		pp = &(*pp)->next;
	*pp = b;
	tm_conv_set_int(s, "bpnum", b->num);
	tm_bp_notify(s, TM_BP_CREATED, b);
}

/* Splits "ADDR [if COND]"; returns the malloc'd address, *cond into args,
 * *junk at anything else after the address. */
static char *split_if(const char *args, const char **cond, const char **junk)
{
	const char *p = tm_skip_ws(args);
	size_t l = strcspn(p, " \t");
	char *addr = malloc(l + 1);
	const char *rest;

	if (!addr)
		return NULL;
	memcpy(addr, p, l);
	addr[l] = 0;
	rest = tm_skip_ws(p + l);
	*cond = NULL;
	*junk = NULL;
	if (!strncmp(rest, "if", 2) && (!rest[2] || isspace((unsigned char)rest[2])))
		*cond = tm_skip_ws(rest + 2);
	else if (*rest)
		*junk = rest;
	return addr;
}

/* What a breakpoint stops on, for messages and info breakpoints:
 * "model.fc1 (out)", "model.fc1:in", "model.fc1.weight (data, grad)". */
static void bp_what(struct tm_session *s, const struct bp *b, char *buf, size_t len)
{
	const struct tm_node *n = NULL;
	uint32_t i;

	if (b->catch_kind) {
		/* GDB's What of a catchpoint: "exception throw" */
		snprintf(buf, len, "%s%s%s%s", tm_catch_kind_name(b->catch_kind),
			 b->catch_kind == TM_CATCH_EXCEPTION ? " raise" : "",
			 b->catch_arg ? " " : "", b->catch_arg ? b->catch_arg : "");
		return;
	}
	if (b->pending) {
		snprintf(buf, len, "<PENDING>  %s", b->where);
		return;
	}
	if (b->core.has_slot || b->type == BP_WATCH) {
		snprintf(buf, len, "%s", b->where);
		return;
	}
	for (i = 0; i < b->core.nkinds && b->core.nmatch == 1; i++)
		if (b->core.kinds[i]) {
			n = tm_nodetab_get(s->nodes, i);
			break;
		}
	snprintf(buf, len, "%s (%s)", b->where,
		 n && n->kind != TM_NODE_MODULE && n->kind != TM_NODE_OP ? "data, grad" : "out");
}

/*
 * What a location without a slot binds, by kind of node: "outputs of 12
 * modules, data and gradients of 8 parameters".  A pattern's count of
 * nodes alone hid that model.** also stops at parameters' gradients.
 */
static void bp_binds(struct tm_session *s, const struct bp *b, char *buf, size_t len)
{
	static const char *const what[] = {
		[TM_NODE_MODULE] = "outputs of %u module%s",
		[TM_NODE_PARAM] = "data and gradients of %u parameter%s",
		[TM_NODE_BUFFER] = "values of %u buffer%s",
		[TM_NODE_OP] = "outputs of %u op site%s",
	};
	uint32_t count[sizeof(what) / sizeof(what[0])] = { 0 }, i;
	size_t k, l = 0;

	for (i = 0; i < b->core.nkinds; i++) {
		const struct tm_node *n;

		if (b->core.kinds[i] && (n = tm_nodetab_get(s->nodes, i)) &&
		    n->kind < sizeof(what) / sizeof(what[0]))
			count[n->kind]++;
	}
	buf[0] = 0;
	for (k = 0; k < sizeof(what) / sizeof(what[0]); k++) {
		if (!count[k] || l >= len)
			continue;
		if (l) {
			snprintf(buf + l, len - l, ", ");
			l = strlen(buf);
		}
		snprintf(buf + l, len - l, what[k], count[k], count[k] == 1 ? "" : "s");
		l = strlen(buf);
	}
}

/* Whether addr parses (a pending breakpoint must be well-formed). */
static int address_ok(const char *addr)
{
	tm_address *a = NULL;
	const char *msg = NULL;
	int col = 0;

	if (tm_address_parse(addr, &a, &col, &msg) != TM_OK)
		return 0;
	tm_address_free(a);
	return 1;
}

void tm_bp_spec_init(struct tm_bp_spec *spec)
{
	memset(spec, 0, sizeof(*spec));
	spec->disp = BP_KEEP;
	spec->enabled = 1;
	spec->rank = -1;
}

/* spec's location as text: the playhead's node when none, "@R:" added for
 * a rank.  NULL after an error message. */
static char *spec_location(struct tm_session *s, const struct tm_bp_spec *spec)
{
	const char *loc = spec->location;
	char *out;
	size_t l;

	if (!loc || !*loc) {
		if (!s->have_cur) {
			tm_error(s, "No default breakpoint address now.");
			return NULL;
		}
		loc = tm_node_name(s, s->cur.node);
	}
	if (spec->rank < 0 || loc[0] == '@')
		return strdup(loc);
	/* One process's nodes carry no "@R:": its own rank is every node. */
	if (s->probe && !s->probe->ops->nranks) {
		struct tm_probe_info pi;
		int rank;

		s->probe->ops->describe(s->probe, &pi);
		rank = pi.meta && pi.meta->rank >= 0 ? pi.meta->rank : 0;
		if (spec->rank == rank)
			return strdup(loc);
		tm_error(s, "No rank %d: the program is one process (rank %d).",
			 spec->rank, rank);
		return NULL;
	}
	l = strlen(loc) + 16;
	out = malloc(l);
	if (out)
		snprintf(out, l, "@%d:%s", spec->rank, loc);
	return out;
}

int tm_bp_create(struct tm_session *s, const struct tm_bp_spec *spec,
		 struct bp **out)
{
	char *addr, file[PATH_MAX], loc[TM_ADDRESS_MAX + 1];
	struct tm_bp_spec sp = *spec;
	unsigned line = 0;
	struct bp *b;
	int pend, src = 0;

	if (out)
		*out = NULL;
	if (!s->probe && !tm_session_can_pend(s))
		return tm_need_trace(s);
	/* FILE:LINE, as IDEs send a click in the margin: the modules whose
	 * forward() holds that line; pending until they come, live */
	if (!spec->catch_kind && spec->location &&
	    tm_source_split(spec->location, file, sizeof(file), &line)) {
		src = 1;
		if (tm_source_resolve(s, file, line, loc, sizeof(loc),
				      tm_session_can_pend(s)) == 0)
			sp.location = loc;
		else if (!tm_session_can_pend(s))
			return -1;
		else
			sp.location = NULL;
	}
	if (src && !sp.location) {
		addr = NULL;
	} else {
		addr = spec->catch_kind ? strdup("") : spec_location(s, &sp);
		if (!addr)
			return -1;
	}
	b = calloc(1, sizeof(*b));
	if (!b) {
		free(addr);
		return -1;
	}
	b->type = BP_BREAK;
	b->disp = spec->disp;
	b->enabled = spec->enabled;
	b->ignore = spec->ignore;
	if (src) {
		b->src_file = strdup(file);
		b->src_line = line;
	}
	if (!addr) {
		/* a pending FILE:LINE: bp_resolve finds its nodes */
		b->where = strdup(spec->location);
		b->pending = 1;
		b->src_seen = s->nodes ? tm_nodetab_count(s->nodes) : 0;
		if (spec->cond && *spec->cond)
			b->cond_src = strdup(spec->cond);
		b->num = s->next_bpnum++;
		bp_append(s, b);
		if (out)
			*out = b;
		return 0;
	}
	b->where = strdup(addr);
	b->catch_kind = spec->catch_kind;
	if (spec->catch_arg)
		b->catch_arg = strdup(spec->catch_arg);
	pend = !spec->catch_kind && tm_session_can_pend(s) && address_ok(addr);
	if (tm_bp_bind(s, b, addr, pend)) {
		if (!pend) {
			tm_bp_free(b);
			free(addr);
			return -1;
		}
		/* GDB in batch mode answers "Make breakpoint pending?" with y. */
		b->pending = 1;
	}
	free(addr);
	if ((spec->cond && *spec->cond) || b->catch_kind) {
		/* A pending breakpoint's condition compiles when it binds. */
		if (!b->pending && bp_compile(s, b, spec->cond, &b->core.cond, &b->core_src)) {
			tm_bp_free(b);
			return -1;
		}
		if (spec->cond && *spec->cond)
			b->cond_src = strdup(spec->cond);
	}
	b->num = s->next_bpnum++;
	bp_append(s, b);
	if (out)
		*out = b;
	return 0;
}

int tm_bp_change(struct tm_session *s, struct bp *b, const struct tm_bp_spec *spec,
		 unsigned what)
{
	tm_tql_prog *prog = NULL;
	char *src = NULL, *addr = NULL, *csrc = NULL;
	struct bp tmp;

	memset(&tmp, 0, sizeof(tmp));
	if ((what & TM_BP_SET_LOCATION) && b->type == BP_BREAK) {
		addr = spec_location(s, spec);
		if (!addr || tm_bp_bind(s, &tmp, addr, 0)) {
			tm_breakpoint_clear(&tmp.core);
			free(tmp.where);
			free(addr);
			return -1;
		}
		free(addr);
	}
	if ((what & TM_BP_SET_LOCATION) && b->catch_kind) {
		tm_error(s, "Catchpoint %d has no location to change.", b->num);
		return -1;
	}
	if ((what & TM_BP_SET_COND) && ((spec->cond && *spec->cond) || b->catch_kind)) {
		if (bp_compile(s, b, spec->cond, &prog, &csrc)) {
			tm_breakpoint_clear(&tmp.core);
			free(tmp.where);
			return -1;
		}
		if (spec->cond && *spec->cond)
			src = strdup(spec->cond);
	}
	if ((what & TM_BP_SET_LOCATION) && b->type == BP_BREAK) {
		/* the new location keeps the condition and its counts */
		tmp.core.cond = b->core.cond;
		tmp.core.unknown = b->core.unknown;
		b->core.cond = NULL;
		tm_breakpoint_clear(&b->core);
		b->core = tmp.core;
		free(b->where);
		b->where = tmp.where;
		b->pending = 0;
		free(b->src_file);      /* a node address now */
		b->src_file = NULL;
	}
	if (what & TM_BP_SET_COND) {
		tm_breakpoint_set_cond(&b->core, prog);
		free(b->cond_src);
		b->cond_src = src;
		free(b->core_src);
		b->core_src = csrc;
	}
	if (what & TM_BP_SET_IGNORE)
		b->ignore = spec->ignore;
	if (what & TM_BP_SET_ENABLED)
		b->enabled = spec->enabled;
	if (what & TM_BP_SET_DISP)
		b->disp = spec->disp;
	tm_bp_notify(s, TM_BP_MODIFIED, b);
	return 0;
}

/* "Breakpoint 3 at model.fc1 (out): file model.py, line 12." */
static void bp_announce(struct tm_session *s, const struct bp *b)
{
	const char *kind = b->disp == BP_DEL ? "Temporary breakpoint" : "Breakpoint";
	char what[TM_ADDRESS_MAX + 64];

	if (b->catch_kind) {
		bp_what(s, b, what, sizeof(what));
		tm_out(s, "%s %d (%s)\n", b->disp == BP_DEL ? "Temporary catchpoint" :
		       "Catchpoint", b->num, what);
		return;
	}
	if (b->pending) {
		tm_out(s, "%s %d (%s) pending.\n", kind, b->num, b->where);
		return;
	}
	bp_what(s, b, what, sizeof(what));
	if (b->core.nmatch == 1) {
		const struct tm_node *n = NULL;
		uint32_t i;

		for (i = 0; i < b->core.nkinds; i++)
			if (b->core.kinds[i]) {
				n = tm_nodetab_get(s->nodes, i);
				break;
			}
		if (n && n->file && n->line)
			tm_out(s, "%s %d at %s: file %s, line %u.\n",
			       kind, b->num, what, n->file, n->line);
		else
			tm_out(s, "%s %d at %s.\n", kind, b->num, what);
	} else if (b->core.has_slot || b->type == BP_WATCH) {
		tm_out(s, "%s %d at %s: %u nodes.\n", kind, b->num, what,
		       b->core.nmatch);
	} else {
		char binds[256];

		bp_binds(s, b, binds, sizeof(binds));
		tm_out(s, "%s %d at %s: %s.\n", kind, b->num, b->where, binds);
	}
}

/* break/tbreak [ADDRESS] [if COND] */
static int do_break(struct tm_session *s, const char *args, int disp)
{
	const char *junk = NULL;
	struct tm_bp_spec spec;
	char *addr = NULL;
	struct bp *b;
	int rc;

	tm_bp_spec_init(&spec);
	spec.disp = disp;
	if (*args) {
		addr = split_if(args, &spec.cond, &junk);
		if (!addr)
			return -1;
		if (junk) {
			tm_error(s, "Junk at end of arguments: \"%s\".", junk);
			free(addr);
			return -1;
		}
		/* FILE:LINE too (Emacs's C-x C-a C-b): tm_bp_create */
		spec.location = addr;
	}
	rc = tm_bp_create(s, &spec, &b);
	free(addr);
	if (rc == 0 && b)
		bp_announce(s, b);
	return rc;
}

static int cmd_break_exec(struct tm_session *s, const char *args, int from_tty)
{
	return do_break(s, args, BP_KEEP);
}

const struct cmd_entry cmd_break_entry = {
	.name = "break", .alias = "b br bre brea",
	.usage = "break [ADDRESS] [if CONDITION]",
	.help = "Set a breakpoint at a graph node address or pattern.\n"
		"A module address stops at the module's output (EXIT) event,\n"
		"NODE:in.N at its ENTER event, NODE:grad_out/grad_in at its backward\n"
		"event, PARAM:data/PARAM:grad at parameter events.  Patterns use *\n"
		"(one segment) and ** (any depth): break model.layers.*.mlp.\n"
		"CONDITION is TQL and sees the slot's tensor as `tensor`:\n"
		"  break model.** if tensor.nan_count > 0",
	.exec = cmd_break_exec, .flags = CMD_NEEDS_TRACE | CMD_PROGRAM,
	.klass = "breakpoints",
};

static int cmd_tbreak_exec(struct tm_session *s, const char *args, int from_tty)
{
	return do_break(s, args, BP_DEL);
}

const struct cmd_entry cmd_tbreak_entry = {
	.name = "tbreak", .usage = "tbreak [ADDRESS] [if CONDITION]",
	.help = "Set a temporary breakpoint: deleted when it is hit.",
	.exec = cmd_tbreak_exec, .flags = CMD_NEEDS_TRACE | CMD_PROGRAM,
	.klass = "breakpoints",
};

/* ------------------------------------------------------------- catch */

/*
 * catch KIND [ARG] [if COND]: a catchpoint (GDB's catch), made by
 * tm_bp_create as a breakpoint on every node whose matcher tests the
 * event kind first (bp_core_cond).  Announces it; *out (may be NULL) gets
 * it.  0, or -1 after an error message.
 */
int tm_catch(struct tm_session *s, const char *args, int disp, int announce,
	     struct bp **out)
{
	static const struct {
		const char *word;
		int kind;
	} kinds[] = {
		{ "exception", TM_CATCH_EXCEPTION }, { "throw", TM_CATCH_EXCEPTION },
		{ "raise", TM_CATCH_EXCEPTION }, { "nan", TM_CATCH_NAN },
		{ "inf", TM_CATCH_INF }, { "gap", TM_CATCH_GAP },
		{ "signal", TM_CATCH_SIGNAL },
	};
	struct tm_bp_spec spec;
	const char *p = tm_skip_ws(args), *q;
	char word[32], arg[64];
	size_t l, i;
	struct bp *b;

	if (out)
		*out = NULL;
	l = strcspn(p, " \t");
	if (!l) {
		tm_error(s, "Catch requires an event name: exception [TYPE], nan, inf, "
			 "gap or signal [SIGNAL].");
		return -1;
	}
	snprintf(word, sizeof(word), "%.*s", (int)(l < sizeof(word) ? l : sizeof(word) - 1), p);
	tm_bp_spec_init(&spec);
	spec.disp = disp;
	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (!strcmp(word, kinds[i].word))
			spec.catch_kind = kinds[i].kind;
	if (!spec.catch_kind) {
		tm_error(s, "Undefined catch command: \"%s\".  Try \"help catch\".", word);
		return -1;
	}
	p = tm_skip_ws(p + l);
	l = strcspn(p, " \t");
	if (l && !(l == 2 && !strncmp(p, "if", 2))) {
		/* an exception type or a signal: a name, never an expression */
		if (spec.catch_kind != TM_CATCH_EXCEPTION && spec.catch_kind != TM_CATCH_SIGNAL) {
			tm_error(s, "Junk at end of arguments: \"%s\".", p);
			return -1;
		}
		if (l >= sizeof(arg)) {
			tm_error(s, "Name too long: \"%.*s\".", (int)l, p);
			return -1;
		}
		snprintf(arg, sizeof(arg), "%.*s", (int)l, p);
		for (q = arg; *q; q++)
			if (!isalnum((unsigned char)*q) && *q != '_' && *q != '.')
				break;
		if (*q || isdigit((unsigned char)arg[0]) != (spec.catch_kind == TM_CATCH_SIGNAL &&
							     isdigit((unsigned char)arg[0]))) {
			tm_error(s, "Bad %s name: \"%s\".",
				 spec.catch_kind == TM_CATCH_SIGNAL ? "signal" : "exception type", arg);
			return -1;
		}
		if (spec.catch_kind == TM_CATCH_SIGNAL) {
			/* SIGSEGV, SEGV or 11, kept as GDB names it */
			char canon[80];
			const char *name = NULL;

			if (isdigit((unsigned char)arg[0])) {
				name = tm_signal_name(atoi(arg), NULL);
			} else {
				snprintf(canon, sizeof(canon), "%s%s",
					 strncmp(arg, "SIG", 3) ? "SIG" : "", arg);
				for (i = 1; i < 65 && !name; i++) {
					const char *n = tm_signal_name((int)i, NULL);

					if (n && !strcmp(n, canon))
						name = n;
				}
			}
			if (!name) {
				tm_error(s, "Only signals 1-15 are valid as numeric signals.\n"
					 "Unknown signal \"%s\".", arg);
				return -1;
			}
			snprintf(arg, sizeof(arg), "%s", name);
		}
		spec.catch_arg = arg;
		p = tm_skip_ws(p + l);
	}
	if (!strncmp(p, "if", 2) && (!p[2] || isspace((unsigned char)p[2]))) {
		spec.cond = tm_skip_ws(p + 2);
		if (!*spec.cond) {
			tm_error(s, "Argument required (boolean expression).");
			return -1;
		}
	} else if (*p) {
		tm_error(s, "Junk at end of arguments: \"%s\".", p);
		return -1;
	}
	if (tm_bp_create(s, &spec, &b))
		return -1;
	if (announce)
		bp_announce(s, b);
	if (out)
		*out = b;
	return 0;
}

static int cmd_catch_exec(struct tm_session *s, const char *args, int from_tty)
{
	(void)from_tty;
	return tm_catch(s, args, BP_KEEP, 1, NULL);
}

#define CATCH_HELP \
	"  exception [TYPE]  an exception leaving a module's forward (a (raise)\n" \
	"                    event), of Python type TYPE if given (also: throw)\n" \
	"  nan               the first tensor holding a NaN, anywhere\n" \
	"  inf               the first tensor holding an Inf, anywhere\n" \
	"  gap               events were lost (a gap in the recording)\n" \
	"  signal [SIGNAL]   the program got a fatal signal (a crash record)\n" \
	"Conditions, ignore counts, commands, disable and delete work as for\n" \
	"breakpoints:  catch nan if !scaler.skipped"

const struct cmd_entry cmd_catch_entry = {
	.name = "catch", .usage = "catch EVENT [ARG] [if CONDITION]",
	.help = "Set a catchpoint: stop when an event of this kind happens.\n" CATCH_HELP,
	.exec = cmd_catch_exec, .flags = CMD_NEEDS_TRACE | CMD_PROGRAM,
	.klass = "breakpoints", .arg_required = "event name",
};

static int cmd_tcatch_exec(struct tm_session *s, const char *args, int from_tty)
{
	(void)from_tty;
	return tm_catch(s, args, BP_DEL, 1, NULL);
}

const struct cmd_entry cmd_tcatch_entry = {
	.name = "tcatch", .usage = "tcatch EVENT [ARG] [if CONDITION]",
	.help = "Set a temporary catchpoint: deleted when it is hit.\n" CATCH_HELP,
	.exec = cmd_tcatch_exec, .flags = CMD_NEEDS_TRACE | CMD_PROGRAM,
	.klass = "breakpoints", .arg_required = "event name",
};

/* ------------------------------------------------------------- watch */

/*
 * Watch expressions of the form NODE:SLOT.FIELD change only at events of
 * NODE, so they are evaluated only there; anything else is evaluated at
 * every event.
 */
static int cmd_watch_exec(struct tm_session *s, const char *args, int from_tty)
{
	struct tm_expr e;
	struct bp *b;
	char *expr, *ifp;
	const char *cond = NULL;
	struct tm_val v;

	expr = strdup(args);
	if (!expr)
		return -1;
	ifp = strstr(expr, " if ");
	if (ifp) {
		*ifp = 0;
		cond = ifp + 4;
	}
	tm_strip(expr);
	if (tm_expr_compile(s, tm_strip(expr), 0, &e)) {
		free(expr);
		return -1;
	}
	if (e.is_focus || e.history) {
		tm_error(s, "Cannot watch \"%s\": it changes with every stop.  "
			 "Watch a node's value instead, e.g. NODE:out.nan_count.",
			 e.src);
		tm_expr_free(&e);
		free(expr);
		return -1;
	}
	b = calloc(1, sizeof(*b));
	if (!b) {
		tm_expr_free(&e);
		free(expr);
		return -1;
	}
	b->type = BP_WATCH;
	b->enabled = 1;
	b->where = strdup(e.src);
	if (e.simple && !e.is_focus && !e.history) {
		b->watch_node_only = 1;
		b->watch_node = e.node;
	}
	b->wexpr = malloc(sizeof(*b->wexpr));
	if (!b->wexpr) {
		tm_expr_free(&e);
		tm_bp_free(b);
		free(expr);
		return -1;
	}
	*b->wexpr = e;
	if (cond && *tm_skip_ws(cond)) {
		if (tm_compile(s, tm_skip_ws(cond), 1, &b->core.cond)) {
			tm_bp_free(b);
			free(expr);
			return -1;
		}
		b->cond_src = strdup(tm_skip_ws(cond));
	}
	free(expr);
	memset(&v, 0, sizeof(v));
	if (s->have_cur && tm_expr_eval(s, b->wexpr, &v) == 0) {
		b->old = v;
		b->have_old = 1;
	}
	b->num = s->next_bpnum++;
	bp_append(s, b);
	tm_out(s, "Watchpoint %d: %s\n", b->num, b->where);
	return 0;
}

const struct cmd_entry cmd_watch_entry = {
	.name = "watch", .usage = "watch EXPR [if CONDITION]",
	.help = "Stop when the value of EXPR changes, printing the old and new value.\n"
		"  watch model.layers.0.mlp.fc1.weight:data.l2",
	.exec = cmd_watch_exec, .flags = CMD_NEEDS_TRACE, .klass = "breakpoints",
};

/* ------------------------------------------------------------- condition, ignore */

static int parse_bpnum(struct tm_session *s, const char **pp, struct bp **out)
{
	const char *p = tm_skip_ws(*pp);
	char *end;
	long num;

	if (*p == '$') {
		struct conv *c = tm_conv_find(s, "bpnum");

		if (!strncmp(p, "$bpnum", 6) && c && c->val.v.type == TM_TQL_INT) {
			num = (long)c->val.v.v.i;
			end = (char *)p + 6;
		} else {
			tm_error(s, "Convenience variable must have integer value.");
			return -1;
		}
	} else {
		num = strtol(p, &end, 10);
		if (end == p) {
			tm_error(s, "Bad breakpoint argument: '%s'", p);
			return -1;
		}
	}
	*out = tm_bp_find(s, (int)num);
	if (!*out) {
		tm_error(s, "No breakpoint number %ld.", num);
		return -1;
	}
	*pp = end;
	return 0;
}

static int cmd_condition_exec(struct tm_session *s, const char *args, int from_tty)
{
	struct tm_bp_spec spec;
	struct bp *b;
	const char *p = args;

	if (parse_bpnum(s, &p, &b))
		return -1;
	tm_bp_spec_init(&spec);
	spec.cond = tm_skip_ws(p);
	if (tm_bp_change(s, b, &spec, TM_BP_SET_COND))
		return -1;
	if (!*spec.cond)
		tm_out(s, "Breakpoint %d now unconditional.\n", b->num);
	return 0;
}

const struct cmd_entry cmd_condition_entry = {
	.name = "condition", .usage = "condition N [CONDITION]",
	.help = "Set (or with no CONDITION, remove) the condition of breakpoint N.",
	.exec = cmd_condition_exec, .klass = "breakpoints",
	.arg_required = "breakpoint number",
};

static int cmd_ignore_exec(struct tm_session *s, const char *args, int from_tty)
{
	struct tm_bp_spec spec;
	const char *p = args;
	uint64_t count;
	struct bp *b;

	if (parse_bpnum(s, &p, &b))
		return -1;
	if (tm_parse_uint(p, &count)) {
		tm_error(s, "Second argument (specified ignore-count) is missing.");
		return -1;
	}
	tm_bp_spec_init(&spec);
	spec.ignore = count;
	if (tm_bp_change(s, b, &spec, TM_BP_SET_IGNORE))
		return -1;
	if (count == 0)
		tm_out(s, "Will stop next time breakpoint %d is reached.\n", b->num);
	else if (count == 1)
		tm_out(s, "Will ignore next crossing of breakpoint %d.\n", b->num);
	else
		tm_out(s, "Will ignore next %" PRIu64 " crossings of breakpoint %d.\n",
		       count, b->num);
	return 0;
}

const struct cmd_entry cmd_ignore_entry = {
	.name = "ignore", .usage = "ignore N COUNT",
	.help = "Ignore the next COUNT times breakpoint N would stop.",
	.exec = cmd_ignore_exec, .klass = "breakpoints",
	.arg_required = "a breakpoint number",
};

/* ------------------------------------------------------------- delete, disable, enable */

/*
 * Calls fn on every breakpoint named by "1 3-5 $bpnum" (all when empty).
 * Unknown numbers are reported and make the command fail.
 */
static int for_each_bp(struct tm_session *s, const char *args,
		       void (*fn)(struct tm_session *, struct bp *, int), int arg)
{
	const char *p = tm_skip_ws(args);
	struct bp *b, *next;
	int rc = 0;

	if (!*p) {
		for (b = s->bps; b; b = next) {
			next = b->next;
			fn(s, b, arg);
		}
		return 0;
	}
	while (*(p = tm_skip_ws(p))) {
		char *end;
		long lo, hi;

		if (*p == '$') {
			if (parse_bpnum(s, &p, &b))
				return -1;
			fn(s, b, arg);
			continue;
		}
		lo = strtol(p, &end, 10);
		if (end == p || lo < 0) {
			tm_error(s, "Convenience variable must have integer value.\n"
				 "Bad breakpoint number '%s'", p);
			return -1;
		}
		hi = lo;
		if (*end == '-') {
			p = end + 1;
			hi = strtol(p, &end, 10);
			if (end == p || hi < lo) {
				tm_error(s, "Inverted breakpoint range at '%s'", p);
				return -1;
			}
		}
		p = end;
		if (lo == hi) {
			b = lo <= INT_MAX ? tm_bp_find(s, (int)lo) : NULL;
			if (!b) {
				/* a message, not an error: GDB goes on (and so
				 * does a command file) */
				tm_out(s, "No breakpoint number %ld.\n", lo);
				continue;
			}
			fn(s, b, arg);
			continue;
		}
		/* A range visits the breakpoints that exist in it. */
		for (b = s->bps; b; b = next) {
			next = b->next;
			if (b->num >= lo && b->num <= hi)
				fn(s, b, arg);
		}
	}
	return rc;
}

static void bp_delete(struct tm_session *s, struct bp *b, int arg)
{
	struct bp **pp;

	(void)arg;
	for (pp = &s->bps; *pp; pp = &(*pp)->next) {
		if (*pp == b) {
			*pp = b->next;
			tm_bp_notify(s, TM_BP_DELETED, b);
			tm_bp_free(b);
			return;
		}
	}
}

void tm_bp_delete(struct tm_session *s, struct bp *b)
{
	bp_delete(s, b, 0);
}

/* how: -1 disable, else enable with disposition how (enum bp_disp) */
static void bp_enable(struct tm_session *s, struct bp *b, int how)
{
	struct tm_bp_spec spec;

	tm_bp_spec_init(&spec);
	spec.enabled = how >= 0;
	spec.disp = how;
	(void)tm_bp_change(s, b, &spec,
			   TM_BP_SET_ENABLED | (how >= 0 ? TM_BP_SET_DISP : 0));
}

/* "display N..." as the sub-command of delete/disable/enable. */
static int display_sub(struct tm_session *s, const char *args, int what)
{
	const char *p = tm_skip_ws(args);
	struct display *d;

	if (what == 0)
		return cmd_undisplay_entry.exec(s, p, 0);
	if (!*p) {
		for (d = s->displays; d; d = d->next)
			d->enabled = what > 0;
		return 0;
	}
	while (*(p = tm_skip_ws(p))) {
		char *end;
		long k = strtol(p, &end, 10);

		if (end == p) {
			tm_error(s, "Arguments must be display numbers.");
			return -1;
		}
		for (d = s->displays; d; d = d->next)
			if (d->num == k)
				break;
		if (!d) {
			tm_out(s, "No display number %ld.\n", k);
			p = end;
			continue;
		}
		d->enabled = what > 0;
		p = end;
	}
	return 0;
}

/* Strips a leading sub-command word (e.g. "breakpoints", "once"). */
static const char *sub_word(const char *args, const char *word, size_t minlen)
{
	const char *p = tm_skip_ws(args);
	size_t l = strcspn(p, " \t");

	if (tm_word_is(p, l, word, minlen))
		return tm_skip_ws(p + l);
	return NULL;
}

static int cmd_delete_exec(struct tm_session *s, const char *args, int from_tty)
{
	const char *rest;

	if ((rest = sub_word(args, "display", 1)))
		return display_sub(s, rest, 0);
	if ((rest = sub_word(args, "breakpoints", 2)))
		args = rest;
	if (!*tm_skip_ws(args) && s->bps &&
	    !tm_confirm(s, from_tty, "Delete all breakpoints? "))
		return 0;
	return for_each_bp(s, args, bp_delete, 0);
}

/* Is b at the source line FILE:LINE, or at the address want? */
static int bp_is_at(const struct bp *b, const char *file, unsigned line,
		    const char *want)
{
	if (b->type != BP_BREAK)
		return 0;
	if (file && b->src_file && b->src_line == line && !strcmp(b->src_file, file))
		return 1;
	return want && *want && !strcmp(b->where, want);
}

/*
 * clear [LOCATION]: GDB's, which Emacs's C-x C-a C-d sends as "clear
 * FILE:LINE": deletes the breakpoints at LOCATION (set there, or at the
 * address it stands for), or at the playhead's node.
 */
static int cmd_clear_exec(struct tm_session *s, const char *args, int from_tty)
{
	char file[PATH_MAX], loc[TM_ADDRESS_MAX + 1], nums[256];
	const char *want = loc;
	unsigned line = 0;
	int src, n = 0;
	size_t l = 0;
	struct bp *b, *next;

	(void)from_tty;
	args = tm_skip_ws(args);
	src = *args && tm_source_split(args, file, sizeof(file), &line);
	loc[0] = 0;
	if (!*args) {
		if (!s->have_cur) {
			tm_error(s, "No source file specified.");
			return -1;
		}
		want = tm_node_name(s, s->cur.node);
	} else if (src) {
		/* an address the line stands for, if nodes are known */
		if (tm_source_resolve(s, file, line, loc, sizeof(loc), 1))
			loc[0] = 0;
	} else {
		want = args;
	}
	nums[0] = 0;
	for (b = s->bps; b; b = next) {
		next = b->next;
		if (*args ? !bp_is_at(b, src ? file : NULL, line, want) :
		    b->type != BP_BREAK || b->pending || s->cur.node >= b->core.nkinds ||
		    !b->core.kinds[s->cur.node])
			continue;
		if (l < sizeof(nums))
			l += (size_t)snprintf(nums + l, sizeof(nums) - l, " %d", b->num);
		n++;
		bp_delete(s, b, 0);
	}
	if (!n) {
		tm_error(s, "No breakpoint at %s.", *args ? args : want);
		return -1;
	}
	tm_out(s, "Deleted breakpoint%s%s\n", n > 1 ? "s" : "", nums);
	return 0;
}

const struct cmd_entry cmd_clear_entry = {
	.name = "clear", .usage = "clear [LOCATION]",
	.help = "Delete the breakpoints at LOCATION: a node address or pattern as\n"
		"break was given it, or FILE:LINE (what IDEs send); with no\n"
		"argument, those that stop at the playhead's node.",
	.exec = cmd_clear_exec, .klass = "breakpoints",
};

const struct cmd_entry cmd_delete_entry = {
	.name = "delete", .alias = "d",
	.usage = "delete [breakpoints] [N...] | delete display [N...]",
	.help = "Delete breakpoints (all with no arguments) or displays.",
	.exec = cmd_delete_exec, .klass = "breakpoints",
};

static int cmd_disable_exec(struct tm_session *s, const char *args, int from_tty)
{
	const char *rest;

	if ((rest = sub_word(args, "display", 1)))
		return display_sub(s, rest, -1);
	if ((rest = sub_word(args, "breakpoints", 2)))
		args = rest;
	return for_each_bp(s, args, bp_enable, -1);
}

const struct cmd_entry cmd_disable_entry = {
	.name = "disable", .alias = "dis disa",
	.usage = "disable [breakpoints] [N...] | disable display [N...]",
	.help = "Disable breakpoints (all with no arguments) or displays.",
	.exec = cmd_disable_exec, .klass = "breakpoints",
};

static int cmd_enable_exec(struct tm_session *s, const char *args, int from_tty)
{
	const char *rest;

	if ((rest = sub_word(args, "display", 1)))
		return display_sub(s, rest, 1);
	if ((rest = sub_word(args, "breakpoints", 2)))
		args = rest;
	if ((rest = sub_word(args, "once", 1)))
		return for_each_bp(s, rest, bp_enable, BP_DIS);
	if ((rest = sub_word(args, "delete", 1)))
		return for_each_bp(s, rest, bp_enable, BP_DEL);
	return for_each_bp(s, args, bp_enable, BP_KEEP);
}

const struct cmd_entry cmd_enable_entry = {
	.name = "enable", .alias = "en",
	.usage = "enable [once|delete] [N...] | enable display [N...]",
	.help = "Enable breakpoints (all with no arguments) or displays.\n"
		"enable once N: disable again after the next stop;\n"
		"enable delete N: delete after the next stop.",
	.exec = cmd_enable_exec, .klass = "breakpoints",
};

/* ------------------------------------------------------------- commands */

static int cmd_commands_exec(struct tm_session *s, const char *args, int from_tty)
{
	const char *p = tm_skip_ws(args);
	struct bp *b = NULL, *last = NULL;
	char **lines;
	size_t n;

	if (*p) {
		if (parse_bpnum(s, &p, &b))
			return -1;
	} else {
		for (last = s->bps; last && last->next; last = last->next)
			;
		b = last;
		if (!b) {
			tm_error(s, "No breakpoints specified.");
			/* Still consume the body so it is not executed. */
			if (tm_read_body(s, &lines, &n, 0, NULL, NULL) == 0)
				tm_lines_free(lines, n);
			return -1;
		}
	}
	if (from_tty && s->interactive)
		tm_out(s, "Type commands for breakpoint(s) %d, one per line.\n"
		       "End with a line saying just \"end\".\n", b->num);
	if (tm_read_body(s, &lines, &n, 0, NULL, NULL))
		return -1;
	tm_lines_free(b->cmds, b->ncmds);
	b->cmds = lines;
	b->ncmds = n;
	tm_bp_notify(s, TM_BP_MODIFIED, b);
	return 0;
}

const struct cmd_entry cmd_commands_entry = {
	.name = "commands", .alias = "comm",
	.usage = "commands [N]\n  COMMAND...\nend",
	.help = "Give breakpoint N (default: the last one) commands to run when it stops.\n"
		"A first line \"silent\" suppresses the usual stop message.",
	.exec = cmd_commands_exec, .flags = CMD_BLOCK, .klass = "breakpoints",
};

/* ------------------------------------------------------------- info breakpoints */

int tm_bp_info(struct tm_session *s, const char *args, int watch_only)
{
	struct bp *b;
	size_t i;
	int any = 0;

	(void)args;
	for (b = s->bps; b; b = b->next) {
		char what[TM_ADDRESS_MAX + 64];

		if (watch_only && b->type != BP_WATCH)
			continue;
		if (!any)
			tm_out(s, "Num     Type           Disp Enb What\n");
		any = 1;
		bp_what(s, b, what, sizeof(what));
		if (b->type == BP_BREAK && b->core.nmatch != 1 && !b->pending &&
		    !b->catch_kind) {
			if (b->core.has_slot) {
				size_t l = strlen(what);

				snprintf(what + l, sizeof(what) - l, ", %u nodes",
					 b->core.nmatch);
			} else {
				char binds[256];

				bp_binds(s, b, binds, sizeof(binds));
				snprintf(what, sizeof(what), "%s: %s", b->where, binds);
			}
		}
		tm_out(s, "%-7d %-14s %-4s %-3s %s\n", b->num,
		       b->type == BP_WATCH ? "watchpoint" : b->catch_kind ? "catchpoint" :
		       "breakpoint",
		       b->disp == BP_DEL ? "del" : b->disp == BP_DIS ? "dis" : "keep",
		       b->enabled ? "y" : "n", what);
		if (b->cond_src)
			tm_out(s, "\tstop only if %s\n", b->cond_src);
		if (b->hits)
			tm_out(s, "\t%s already hit %" PRIu64 " time%s\n",
			       b->catch_kind ? "catchpoint" : "breakpoint",
			       b->hits, b->hits == 1 ? "" : "s");
		/* a catchpoint's own test is unknown wherever there is no
		 * tensor: that says nothing about the user's condition */
		if (b->core.unknown && !b->catch_kind)
			tm_out(s, "\tcondition was unknown at %" PRIu64 " event%s\n",
			       b->core.unknown, b->core.unknown == 1 ? "" : "s");
		if (b->ignore)
			tm_out(s, "\tWill ignore next %" PRIu64 " crossings of breakpoint.\n",
			       b->ignore);
		for (i = 0; i < b->ncmds; i++)
			tm_out(s, "        %s\n", b->cmds[i]);
	}
	if (!any)
		tm_out(s, watch_only ? "No watchpoints.\n" :
		       "No breakpoints or watchpoints.\n");
	return 0;
}

/* ------------------------------------------------------------- save */

/*
 * save breakpoints FILE: commands that make the breakpoints again when the
 * file is sourced, in GDB's form (each one's condition, ignore count,
 * commands and disabled state against $bpnum, the number just made).
 */
static int save_breakpoints(struct tm_session *s, const char *path)
{
	struct bp *b;
	size_t i;
	FILE *fp;

	if (!*path) {
		tm_error(s, "Argument required (file name in which to save).");
		return -1;
	}
	if (!s->bps) {
		tm_error(s, "Nothing to save.");
		return -1;
	}
	fp = fopen(path, "w");
	if (!fp) {
		tm_error(s, "Unable to open file '%s' for saving (%s)", path, strerror(errno));
		return -1;
	}
	for (b = s->bps; b; b = b->next) {
		if (b->type == BP_WATCH)
			fprintf(fp, "watch %s\n", b->where);
		else if (b->catch_kind)
			fprintf(fp, "%s %s%s%s\n", b->disp == BP_DEL ? "tcatch" : "catch",
				tm_catch_kind_name(b->catch_kind), b->catch_arg ? " " : "",
				b->catch_arg ? b->catch_arg : "");
		else
			fprintf(fp, "%s %s\n", b->disp == BP_DEL ? "tbreak" : "break", b->where);
		if (b->cond_src)
			fprintf(fp, "  condition $bpnum %s\n", b->cond_src);
		if (b->ignore)
			fprintf(fp, "  ignore $bpnum %" PRIu64 "\n", b->ignore);
		if (b->ncmds) {
			fputs("  commands\n", fp);
			for (i = 0; i < b->ncmds; i++)
				fprintf(fp, "    %s\n", b->cmds[i]);
			fputs("  end\n", fp);
		}
		if (!b->enabled)
			fputs("disable $bpnum\n", fp);
		else if (b->disp == BP_DIS)
			fputs("enable once $bpnum\n", fp);
	}
	if (fclose(fp)) {
		tm_error(s, "%s: %s.", path, strerror(errno));
		return -1;
	}
	tm_out(s, "Saved to file '%s'.\n", path);
	return 0;
}

static int cmd_save_exec(struct tm_session *s, const char *args, int from_tty)
{
	const char *p = tm_skip_ws(args);
	size_t wl = strcspn(p, " \t");

	(void)from_tty;
	if (tm_word_is(p, wl, "breakpoints", 1))
		return save_breakpoints(s, tm_skip_ws(p + wl));
	if (!wl)
		tm_error(s, "\"save\" must be followed by the name of a save subcommand.\n"
			 "List of save subcommands:\n\n"
			 "save breakpoints -- Save current breakpoint definitions as a script.");
	else
		tm_error(s, "Undefined save command: \"%s\".  Try \"help save\".", p);
	return -1;
}

const struct cmd_entry cmd_save_entry = {
	.name = "save", .usage = "save breakpoints FILE",
	.help = "Save current breakpoint definitions as a script.\n"
		"\"source FILE\" makes them again: locations, conditions, ignore counts,\n"
		"commands and whether each is enabled.",
	.exec = cmd_save_exec, .klass = "breakpoints",
};
