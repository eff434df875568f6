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
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "tmdb.h"
#include "live.h"

void tm_bp_free(struct bp *b)
{
	if (!b)
		return;
	free(b->where);
	free(b->cond_src);
	tm_tql_free(b->cond);
	if (b->wexpr) {
		tm_expr_free(b->wexpr);
		free(b->wexpr);
	}
	free(b->kinds);
	tm_lines_free(b->cmds, b->ncmds);
	tm_val_clear(&b->old);
	free(b);
}

void tm_bp_free_all(struct tm_session *s)
{
	struct bp *b;

	while ((b = s->bps)) {
		s->bps = b->next;
		tm_bp_free(b);
	}
}

struct bp *tm_bp_find(struct tm_session *s, int num)
{
	struct bp *b;

	for (b = s->bps; b; b = b->next)
		if (b->num == num)
			return b;
	return NULL;
}

/*
 * Compiles an address or pattern against the node table into b->kinds.
 * quiet: no message (rebinding after "file").
 */
int tm_bp_bind(struct tm_session *s, struct bp *b, const char *where, int quiet)
{
	tm_address *a = NULL;
	const char *msg = NULL;
	char canon[TM_ADDRESS_MAX + 32];
	int col = 0, any = 0;

	if (tm_address_parse(where, &a, &col, &msg) != TM_OK) {
		if (!quiet)
			tm_error(s, "Malformed address \"%s\": %s at column %d.",
				 where, msg ? msg : "syntax error", col + 1);
		return -1;
	}
	free(b->kinds);
	if (tm_address_bind(a, s->nodes, &b->kinds, &b->nmatch) != TM_OK) {
		b->nkinds = 0;
		tm_address_free(a);
		return -1;
	}
	b->nkinds = tm_nodetab_count(s->nodes);
	b->has_slot = tm_address_has_slot(a);
	b->slot = tm_address_slot(a, &any);
	b->any_index = any;
	b->call = tm_address_call(a);
	b->op_index = tm_address_op_index(a);
	if (tm_address_format(a, canon, sizeof(canon)) == TM_OK) {
		free(b->where);
		b->where = strdup(canon);
	}
	if (b->nmatch == 0) {
		if (!quiet) {
			if (tm_address_is_pattern(a))
				tm_error(s, "No node matches \"%s\".", where);
			else if (b->has_slot && tm_session_node(s, a))
				tm_error(s, "Node \"%s\" has no %s slot.",
					 tm_address_path(a),
					 tm_slot_kind_name(b->slot.kind));
			else
				tm_address_error(s, tm_address_path(a));
		}
		tm_address_free(a);
		return -1;
	}
	tm_address_free(a);
	return 0;
}

/*
 * A live process announced nodes after b was bound (ev names one b has no
 * byte for): bind again, so that patterns cover the new nodes and a pending
 * breakpoint resolves (its condition compiles then, against the nodes it
 * may name).  Returns 1 if node is covered now.
 */
static int bp_grow(struct tm_session *s, struct bp *b, uint32_t node)
{
	if (tm_nodetab_count(s->nodes) <= b->nkinds)
		return 0;
	if (!tm_bp_bind(s, b, b->where, 1) && b->pending) {
		b->pending = 0;
		if (b->cond_src && !b->cond && tm_compile(s, b->cond_src, 1, &b->cond)) {
			tm_error(s, "warning: breakpoint %d's condition does not "
				 "compile; disabled.", b->num);
			b->enabled = 0;
			return 0;
		}
	}
	return node < b->nkinds;
}

static int tensor_wanted(const struct bp *b, const struct tm_tensor *t)
{
	if (!b->has_slot)
		return 1;
	if (t->slot.kind != b->slot.kind)
		return 0;
	return b->any_index || t->slot.index == b->slot.index;
}

/*
 * Does b fire at ev?  The node/kind test first (the hot path of every
 * continue), then the condition over each candidate tensor until one is
 * true.  An event where every evaluation was unknown counts as unknown.
 * *focus gets the index of the tensor that fired.
 */
int tm_bp_match(struct tm_session *s, struct bp *b, const struct tm_event *ev,
		uint32_t *focus)
{
	struct tm_tql_ctx ctx;
	uint32_t i, cand = 0;
	int unknown = 0, r;

	*focus = UINT32_MAX;
	if (!b->all_nodes) {
		if (ev->node >= b->nkinds && !bp_grow(s, b, ev->node))
			return 0;
		if (!(b->kinds[ev->node] & (1u << ev->kind)))
			return 0;
		if (b->call && ev->call != b->call)
			return 0;
		if (b->op_index && ev->op_index != b->op_index)
			return 0;
	}
	for (i = 0; i < ev->ntensors; i++) {
		if (!tensor_wanted(b, &ev->tensors[i]))
			continue;
		cand++;
		if (!b->cond) {
			*focus = i;
			return 1;
		}
		tm_tql_ctx_init(s, &ctx, ev, &ev->tensors[i]);
		r = tm_tql_test(b->cond, &ctx);
		if (r > 0) {
			*focus = i;
			return 1;
		}
		if (r < 0)
			unknown++;
	}
	if (!cand) {
		/* A level-0 event without tensors (or a slot the event lacks). */
		if (ev->ntensors && b->has_slot)
			return 0;
		if (!b->cond)
			return 1;
		tm_tql_ctx_init(s, &ctx, ev, NULL);
		r = tm_tql_test(b->cond, &ctx);
		if (r > 0)
			return 1;
		if (r < 0)
			unknown++;
	}
	if (unknown)
		b->unknown++;
	return 0;
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
		} else if (tm_bp_bind(s, b, b->where, 1)) {
			if (tm_live_can_pend(s)) {
				/* The process may announce the node later. */
				b->pending = 1;
				tm_tql_free(b->cond);
				b->cond = NULL;
				continue;
			}
			tm_error(s, "warning: breakpoint %d (%s) matches no node "
				 "of this trace; disabled.", b->num, b->where);
			b->enabled = 0;
		} else {
			b->pending = 0;
		}
		if (b->cond_src) {
			tm_tql_free(b->cond);
			b->cond = NULL;
			if (tm_compile(s, b->cond_src, 1, &b->cond))
				b->enabled = 0;
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

	if (b->pending) {
		snprintf(buf, len, "<PENDING>  %s", b->where);
		return;
	}
	if (b->has_slot || b->type == BP_WATCH) {
		snprintf(buf, len, "%s", b->where);
		return;
	}
	for (i = 0; i < b->nkinds && b->nmatch == 1; i++)
		if (b->kinds[i]) {
			n = tm_nodetab_get(s->nodes, i);
			break;
		}
	snprintf(buf, len, "%s (%s)", b->where,
		 n && n->kind != TM_NODE_MODULE && n->kind != TM_NODE_OP ? "data, grad" : "out");
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

static int do_break(struct tm_session *s, const char *args, int disp)
{
	const char *cond = NULL, *junk = NULL;
	char what[TM_ADDRESS_MAX + 64];
	char *addr;
	struct bp *b;

	if (!*args) {
		if (!s->have_cur) {
			tm_error(s, "No default breakpoint address now.");
			return -1;
		}
		args = tm_node_name(s, s->cur.node);
	}
	addr = split_if(args, &cond, &junk);
	if (!addr)
		return -1;
	if (junk) {
		tm_error(s, "Junk at end of arguments: \"%s\".", junk);
		free(addr);
		return -1;
	}
	b = calloc(1, sizeof(*b));
	if (!b) {
		free(addr);
		return -1;
	}
	b->type = BP_BREAK;
	b->disp = disp;
	b->enabled = 1;
	b->where = strdup(addr);
	if (tm_bp_bind(s, b, addr, tm_live_can_pend(s) && address_ok(addr))) {
		if (!tm_live_can_pend(s) || !address_ok(addr)) {
			tm_bp_free(b);
			free(addr);
			return -1;
		}
		/* GDB in batch mode answers "Make breakpoint pending?" with y. */
		b->pending = 1;
	}
	free(addr);
	if (cond && *cond) {
		/* A pending breakpoint's condition compiles when it binds. */
		if (!b->pending && tm_compile(s, cond, 1, &b->cond)) {
			tm_bp_free(b);
			return -1;
		}
		b->cond_src = strdup(cond);
	}
	b->num = s->next_bpnum++;
	bp_append(s, b);
	if (s->probe)
		s->probe->ops->set_breakpoint(s->probe, b->num, b->where, b->cond_src);
	if (b->pending) {
		tm_out(s, "%s %d (%s) pending.\n",
		       disp == BP_DEL ? "Temporary breakpoint" : "Breakpoint",
		       b->num, b->where);
		return 0;
	}
	bp_what(s, b, what, sizeof(what));
	if (b->nmatch == 1) {
		const struct tm_node *n = NULL;
		uint32_t i;

		for (i = 0; i < b->nkinds; i++)
			if (b->kinds[i]) {
				n = tm_nodetab_get(s->nodes, i);
				break;
			}
		if (n && n->file && n->line)
			tm_out(s, "%s %d at %s: file %s, line %u.\n",
			       disp == BP_DEL ? "Temporary breakpoint" : "Breakpoint",
			       b->num, what, n->file, n->line);
		else
			tm_out(s, "%s %d at %s.\n",
			       disp == BP_DEL ? "Temporary breakpoint" : "Breakpoint",
			       b->num, what);
	} else {
		tm_out(s, "%s %d at %s: %u nodes.\n",
		       disp == BP_DEL ? "Temporary breakpoint" : "Breakpoint",
		       b->num, what, b->nmatch);
	}
	return 0;
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
	.exec = cmd_break_exec, .flags = CMD_NEEDS_TRACE, .klass = "breakpoints",
};

static int cmd_tbreak_exec(struct tm_session *s, const char *args, int from_tty)
{
	return do_break(s, args, BP_DEL);
}

const struct cmd_entry cmd_tbreak_entry = {
	.name = "tbreak", .usage = "tbreak [ADDRESS] [if CONDITION]",
	.help = "Set a temporary breakpoint: deleted when it is hit.",
	.exec = cmd_tbreak_exec, .flags = CMD_NEEDS_TRACE, .klass = "breakpoints",
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
		if (tm_compile(s, tm_skip_ws(cond), 1, &b->cond)) {
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
	tm_tql_prog *prog = NULL;
	struct bp *b;
	const char *p = args;

	if (!*p) {
		tm_error(s, "Argument required (breakpoint number).");
		return -1;
	}
	if (parse_bpnum(s, &p, &b))
		return -1;
	p = tm_skip_ws(p);
	if (!*p) {
		tm_tql_free(b->cond);
		free(b->cond_src);
		b->cond = NULL;
		b->cond_src = NULL;
		tm_out(s, "Breakpoint %d now unconditional.\n", b->num);
		tm_bp_notify(s, TM_BP_MODIFIED, b);
		return 0;
	}
	if (tm_compile(s, p, 1, &prog))
		return -1;
	tm_tql_free(b->cond);
	free(b->cond_src);
	b->cond = prog;
	b->cond_src = strdup(p);
	tm_bp_notify(s, TM_BP_MODIFIED, b);
	return 0;
}

const struct cmd_entry cmd_condition_entry = {
	.name = "condition", .usage = "condition N [CONDITION]",
	.help = "Set (or with no CONDITION, remove) the condition of breakpoint N.",
	.exec = cmd_condition_exec, .klass = "breakpoints",
};

static int cmd_ignore_exec(struct tm_session *s, const char *args, int from_tty)
{
	const char *p = args;
	uint64_t count;
	struct bp *b;

	if (!*p) {
		tm_error(s, "Argument required (a breakpoint number).");
		return -1;
	}
	if (parse_bpnum(s, &p, &b))
		return -1;
	if (tm_parse_uint(p, &count)) {
		tm_error(s, "Second argument (specified ignore-count) is missing.");
		return -1;
	}
	b->ignore = count;
	tm_bp_notify(s, TM_BP_MODIFIED, b);
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
				tm_error(s, "No breakpoint number %ld.", lo);
				rc = -1;
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
			if (s->probe)
				s->probe->ops->clear_breakpoint(s->probe, b->num);
			tm_bp_notify(s, TM_BP_DELETED, b);
			tm_bp_free(b);
			return;
		}
	}
}

static void bp_enable(struct tm_session *s, struct bp *b, int how)
{
	(void)s;
	if (how < 0) {
		b->enabled = 0;
		tm_bp_notify(s, TM_BP_MODIFIED, b);
		return;
	}
	b->enabled = 1;
	if (how == BP_DIS || how == BP_DEL)
		b->disp = how;
	else if (how == BP_KEEP + 100)
		b->disp = BP_KEEP;
	tm_bp_notify(s, TM_BP_MODIFIED, b);
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
			tm_error(s, "No display number %ld.", k);
			return -1;
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
	return for_each_bp(s, args, bp_delete, 0);
}

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
	return for_each_bp(s, args, bp_enable, BP_KEEP + 100);
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
		if (b->type == BP_BREAK && b->nmatch != 1 && !b->pending) {
			size_t l = strlen(what);

			snprintf(what + l, sizeof(what) - l, ", %u nodes", b->nmatch);
		}
		tm_out(s, "%-7d %-14s %-4s %-3s %s\n", b->num,
		       b->type == BP_WATCH ? "watchpoint" : "breakpoint",
		       b->disp == BP_DEL ? "del" : b->disp == BP_DIS ? "dis" : "keep",
		       b->enabled ? "y" : "n", what);
		if (b->cond_src)
			tm_out(s, "\tstop only if %s\n", b->cond_src);
		if (b->hits)
			tm_out(s, "\tbreakpoint already hit %" PRIu64 " time%s\n",
			       b->hits, b->hits == 1 ? "" : "s");
		if (b->unknown)
			tm_out(s, "\tcondition was unknown at %" PRIu64 " event%s\n",
			       b->unknown, b->unknown == 1 ? "" : "s");
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
