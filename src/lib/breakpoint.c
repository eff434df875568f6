/*
 * breakpoint.c -- the one definition of a stop (tm-breakpoint.h): a
 * location bound to nodes and slots, a compiled condition, and the test of
 * an event.  server.c and tmdb both call it.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tm-internal.h"
#include "tm-breakpoint.h"

/* Every event kind a slot-less location of find looks at (not ops: they
 * are taken by their module below). */
#define EVERY_KIND ((1u << TM_EV_ENTER) | (1u << TM_EV_EXIT) | (1u << TM_EV_BWD) | \
		    (1u << TM_EV_PARAM) | (1u << TM_EV_RAISE))

static void where_clear(struct tm_breakpoint *b)
{
	tm_address_free(b->addr);
	free(b->where);
	free(b->kinds);
	b->addr = NULL;
	b->where = NULL;
	b->kinds = NULL;
	b->nkinds = 0;
	b->nmatch = 0;
	b->every_node = 0;
	b->has_slot = 0;
	b->any_index = 0;
	b->call = 0;
	b->op_index = 0;
	memset(&b->slot, 0, sizeof(b->slot));
}

int tm_breakpoint_set_where(struct tm_breakpoint *b, const char *where,
			    int *col, const char **msg)
{
	char canon[TM_ADDRESS_MAX + 32];
	tm_address *a = NULL;
	char *text;
	int err, any = 0;

	if (!b || !where)
		return TM_ERR_INVALID_ARG;
	if (!*where) {
		/* no location: every node (a catchpoint, whose condition
		 * says which events; the wire's BREAK_SET with "") */
		where_clear(b);
		b->every_node = 1;
		return TM_OK;
	}
	err = tm_address_parse(where, &a, col, msg);
	if (err != TM_OK)
		return err;
	if (tm_address_format(a, canon, sizeof(canon)) == TM_OK)
		text = strdup(canon);
	else
		text = strdup(where);
	if (!text) {
		tm_address_free(a);
		return TM_ERR_NOMEM;
	}
	where_clear(b);
	b->addr = a;
	b->where = text;
	b->has_slot = tm_address_has_slot(a);
	b->slot = tm_address_slot(a, &any);
	b->any_index = any;
	b->call = tm_address_call(a);
	b->op_index = tm_address_op_index(a);
	return TM_OK;
}

int tm_breakpoint_init(struct tm_breakpoint *b, const char *where, int *col,
		       const char **msg)
{
	if (!b)
		return TM_ERR_INVALID_ARG;
	memset(b, 0, sizeof(*b));
	return tm_breakpoint_set_where(b, where, col, msg);
}

void tm_breakpoint_init_every(struct tm_breakpoint *b)
{
	memset(b, 0, sizeof(*b));
	b->every_node = 1;
}

int tm_breakpoint_bind(struct tm_breakpoint *b, const tm_nodetab *nodes)
{
	uint8_t *k = NULL;
	uint32_t hits = 0, i;
	int err;

	if (!b)
		return TM_ERR_INVALID_ARG;
	if (b->every_node)
		return TM_OK;
	if (!b->addr)
		return TM_ERR_INVALID_ARG;
	err = tm_address_bind(b->addr, nodes, &k, &hits);
	if (err != TM_OK)
		return err;
	free(b->kinds);
	b->kinds = k;
	b->nkinds = nodes ? tm_nodetab_count(nodes) : 0;
	b->nmatch = hits;
	if (b->every_kind && !b->has_slot && !tm_address_has_op(b->addr)) {
		for (i = 0; i < b->nkinds; i++)
			if (b->kinds[i])
				b->kinds[i] = EVERY_KIND;
		/* "in MODULE" takes the ops of its calls too (op sites come
		 * after their module in the table) */
		for (i = 0; i < b->nkinds; i++) {
			const struct tm_node *n = tm_nodetab_get(nodes, i);

			if (n && n->kind == TM_NODE_OP && n->parent < i &&
			    (b->kinds[n->parent] & EVERY_KIND))
				b->kinds[i] = (uint8_t)(1u << TM_EV_OP);
		}
	}
	return TM_OK;
}

int tm_breakpoint_wants(const struct tm_breakpoint *b, const struct tm_tensor *t)
{
	if (!b->has_slot)
		return 1;
	if (t->slot.kind != b->slot.kind)
		return 0;
	return b->any_index || t->slot.index == b->slot.index;
}

void tm_breakpoint_set_cond(struct tm_breakpoint *b, tm_tql_prog *cond)
{
	if (b->cond != cond)
		tm_tql_free(b->cond);
	b->cond = cond;
}

void tm_breakpoint_reset(struct tm_breakpoint *b)
{
	if (b && b->cond)
		tm_tql_reset(b->cond);
}

int tm_breakpoint_cond_portable(const tm_tql_prog *cond, const char **why)
{
	const char *w = NULL;

	if (tm_tql_uses_lookup(cond))
		w = "addressed terms are evaluated by the debugger";
	else if (tm_tql_uses_reference(cond))
		w = "reference terms are evaluated by the debugger";
	else if (tm_tql_uses_variables(cond))
		w = "$variables are evaluated by the debugger";
	if (why)
		*why = w;
	return w == NULL;
}

int tm_breakpoint_covers(struct tm_breakpoint *b, const tm_nodetab *nodes,
			 const struct tm_event *ev)
{
	if (b->every_node)
		return 1;
	/* Nodes registered since the last bind are bound here, once per batch
	 * of new nodes, rather than as each is announced (a model registering
	 * thousands of modules would make that quadratic). */
	if (ev->node >= b->nkinds) {
		if (!nodes || tm_nodetab_count(nodes) <= b->nkinds ||
		    tm_breakpoint_bind(b, nodes) != TM_OK || ev->node >= b->nkinds)
			return 0;
	}
	if (!(b->kinds[ev->node] & (1u << ev->kind)))
		return 0;
	if (b->op_index && ev->op_index != b->op_index)
		return 0;
	return !b->call || ev->call == b->call;
}

int tm_breakpoint_test(struct tm_breakpoint *b, struct tm_tql_ctx *ctx,
		       uint32_t *focus)
{
	const struct tm_event *ev = ctx->event;
	const struct tm_tensor *keep = ctx->tensor;
	uint32_t i, cand = 0;
	int unknown = 0, r;

	*focus = UINT32_MAX;
	for (i = 0; i < ev->ntensors; i++) {
		if (!tm_breakpoint_wants(b, &ev->tensors[i]))
			continue;
		cand++;
		if (!b->cond) {
			*focus = i;
			return 1;
		}
		ctx->tensor = &ev->tensors[i];
		r = tm_tql_test(b->cond, ctx);
		if (r > 0) {
			ctx->tensor = keep;
			*focus = i;
			return 1;
		}
		if (r < 0)
			unknown++;
	}
	ctx->tensor = keep;
	if (!cand) {
		/* A level-0 event without tensors (or a slot the event lacks). */
		if (ev->ntensors && b->has_slot)
			return 0;
		if (!b->cond)
			return 1;
		ctx->tensor = NULL;
		r = tm_tql_test(b->cond, ctx);
		ctx->tensor = keep;
		if (r > 0)
			return 1;
		if (r < 0)
			unknown++;
	}
	if (unknown) {
		b->unknown++;
		return -1;
	}
	return 0;
}

int tm_breakpoint_match(struct tm_breakpoint *b, struct tm_tql_ctx *ctx,
			uint32_t *focus)
{
	*focus = UINT32_MAX;
	if (!b || !ctx || !ctx->event)
		return 0;
	if (!tm_breakpoint_covers(b, ctx->nodes, ctx->event))
		return 0;
	return tm_breakpoint_test(b, ctx, focus);
}

void tm_breakpoint_clear(struct tm_breakpoint *b)
{
	if (!b)
		return;
	where_clear(b);
	tm_tql_free(b->cond);
	memset(b, 0, sizeof(*b));
}
