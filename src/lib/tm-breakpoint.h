/*
 * tm-breakpoint.h -- what makes a stop: a location bound to the nodes and
 * slots it names, a compiled TQL condition, and the test of one event.
 *
 * This is the one definition of a breakpoint's matching.  The probe-side
 * server (server.c) evaluates a debugger's breakpoints with it in the
 * probed process; tmdb evaluates its own with it while it replays a trace
 * or reads a live one, and `until`/`find` use it for their node filters.
 * What only a front end has (a number, hit and ignore counts, commands,
 * temporary, enabled) is not here: tmdb's struct bp wraps this one.
 *
 * A location (an address or a pattern, doc/manual.md "Addresses") is
 * parsed once and bound to a node table into a byte per node id holding
 * the event kinds it fires on (tm_address_bind's rules: a module address
 * without a slot fires on EXIT, :in.N on ENTER, :grad_* on BWD, a
 * parameter's :data/:grad on PARAM), so that testing an event is one array
 * load and a bit test.  Only then does the condition run, once per tensor
 * the location's slot selects, with that tensor as TQL's `tensor`, until
 * one is true.  Nodes announced after binding (a live process registers
 * modules as it goes) are covered by binding again: tm_breakpoint_match
 * does that itself when an event names a node past the bound table.
 *
 * The condition keeps its own history (prev(), delta()): tm_tql_reset it
 * (tm_breakpoint_reset) when the events it sees stop being consecutive.
 * Whether the probe can evaluate a condition at all is decided here too
 * (tm_breakpoint_cond_portable): one that reads other nodes' values or the
 * debugger's $variables can only be answered by the debugger; the server
 * refuses it with a message saying so, and the debugger evaluates it.
 */
#ifndef TM_BREAKPOINT_H
#define TM_BREAKPOINT_H

#include "tm-types.h"
#include "tm-address.h"
#include "tm-tql.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The fields are read by front ends (to describe a breakpoint); they are
 * written only by the functions below.  A zeroed struct is a valid empty
 * breakpoint (no location, no condition) that tm_breakpoint_clear accepts.
 */
struct tm_breakpoint {
	tm_address *addr;       /* the location; NULL: every node (every_node) */
	char *where;            /* its canonical spelling, NULL for every_node */
	int every_node;         /* no location: every event of every node */
	int every_kind;         /* a slot-less location fires on all four event
				 * kinds of its nodes, not only the default one
				 * (find ... in PATTERN) */
	int has_slot;           /* the location named a slot */
	int any_index;          /* :out.* */
	struct tm_slot slot;
	uint32_t call;          /* #N, 0: any call */
	uint32_t op_index;      /* !N: an op's index in its call, 0: any */
	uint8_t *kinds;         /* per node id: bit (1 << event kind) */
	uint32_t nkinds;        /* nodes covered by kinds[] */
	uint32_t nmatch;        /* nodes the location matched at the last bind */
	tm_tql_prog *cond;      /* NULL: unconditional */
	uint64_t unknown;       /* events where the condition was only unknown */
};

/*
 * Parses where into b (zeroed first); "" is every node of every kind, as
 * tm_breakpoint_init_every (catchpoints: their condition selects).  TM_ERR_ADDRESS on a malformed
 * address, with *col (0-based) and *msg (static text) as tm_address_parse
 * sets them (either may be NULL); TM_ERR_NOMEM.  b binds to no node until
 * tm_breakpoint_bind.
 */
int tm_breakpoint_init(struct tm_breakpoint *b, const char *where, int *col,
		       const char **msg);
/* As init, but replaces only the location of b: its condition and counts
 * stay.  On failure b is unchanged. */
int tm_breakpoint_set_where(struct tm_breakpoint *b, const char *where,
			    int *col, const char **msg);
/* A breakpoint on every event of every node (find without "in"). */
void tm_breakpoint_init_every(struct tm_breakpoint *b);

/*
 * (Re)binds b's location to nodes: kinds[] for every node of the table,
 * and nmatch.  TM_OK even when nothing matches (nmatch 0: a pending
 * breakpoint, until the nodes it names are announced).
 */
int tm_breakpoint_bind(struct tm_breakpoint *b, const tm_nodetab *nodes);

/* Whether t is a tensor b's location selects (any, without a slot). */
int tm_breakpoint_wants(const struct tm_breakpoint *b, const struct tm_tensor *t);

/* Replaces b's condition (NULL: unconditional); b owns cond from now on. */
void tm_breakpoint_set_cond(struct tm_breakpoint *b, tm_tql_prog *cond);
/* Forgets the condition's prev()/delta() history (the playhead jumped). */
void tm_breakpoint_reset(struct tm_breakpoint *b);

/*
 * Whether a probe can evaluate cond with no debugger behind it: 1 yes; 0
 * no, with *why (static text, may be NULL) saying what needs the debugger:
 * addressed terms (other nodes' values, which the probe keeps no history
 * of) or $variables (the debugger's convenience variables and value
 * history).  An unconditional breakpoint (NULL) is portable.
 */
int tm_breakpoint_cond_portable(const tm_tql_prog *cond, const char **why);

/*
 * Is ctx->event at one of b's nodes, with an event kind and call number
 * b's location fires on?  The hot path of every continue: an array load
 * and a bit test.  Binds again first when the event's node is past the
 * bound table and nodes has grown.  1 yes, 0 no.
 */
int tm_breakpoint_covers(struct tm_breakpoint *b, const tm_nodetab *nodes,
			 const struct tm_event *ev);
/*
 * The condition at ctx->event, an event b covers: evaluated over each
 * tensor the location selects (ctx->tensor set to each in turn) until one
 * is true; an event without candidates (a level-0 event) is tested once
 * with no tensor, unless the location names a slot the event lacks.
 * ctx is the caller's evaluation context (nodes, env, rank).
 * Returns 1 (fires; *focus the index of the tensor that fired, UINT32_MAX
 * when none did), 0 (does not), -1 (only unknown: every evaluation was
 * unknown, counted in b->unknown; it does not fire).
 */
int tm_breakpoint_test(struct tm_breakpoint *b, struct tm_tql_ctx *ctx,
		       uint32_t *focus);
/* Both: covers(b, ctx->nodes, ctx->event), then test.  match(event) -> stop. */
int tm_breakpoint_match(struct tm_breakpoint *b, struct tm_tql_ctx *ctx,
			uint32_t *focus);

/* Frees what b holds and zeroes it. */
void tm_breakpoint_clear(struct tm_breakpoint *b);

#ifdef __cplusplus
}
#endif
#endif /* TM_BREAKPOINT_H */
