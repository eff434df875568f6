/*
 * tm-address.h -- graph node addresses and patterns (ARCHITECTURE 3).
 *
 *   model.layers.3.mlp.fc1            a module node
 *   model.layers.3.mlp:out.1          a tensor slot of a node
 *   model.layers.3.mlp.fc1.weight:grad  a parameter slot
 *   model.shared#2:out                the second call of a node in a step
 *   model.layers.*.mlp, model.**      patterns: * one segment, ** any depth
 *   @1:model.layers.3.mlp:out         rank 1 of a distributed run
 *   @*:model.**                       every rank (as without "@R:")
 *   model.attn!div                    operations inside a call (TM_EV_OP):
 *   model.attn#2!3, model.attn!@42    by name glob, index in the call
 *   model.attn!aten::div.Tensor@42    (from 1) or source line
 *
 * Parsing normalises (whitespace trimmed, "layers[3]" -> "layers.3"), so that
 * tm_address_format(tm_address_parse(x)) is the canonical spelling of x.
 * Unknown addresses get suggestions: the existing addresses nearest by edit
 * distance, as "did you mean" in git and GDB.
 */
#ifndef TM_ADDRESS_H
#define TM_ADDRESS_H

#include "tm-types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TM_ADDRESS_MAX 1024      /* bytes in a normalised address */
#define TM_ADDRESS_MAX_SEGMENTS 128
#define TM_OP_NAME_MAX 128       /* bytes of an op name glob, with its NUL */

/* The rank of an address (tm_address_rank, tm_address_node_rank). */
#define TM_RANK_NONE (-1)        /* written without "@R:" */
#define TM_RANK_ANY  (-2)        /* "@*:" */
#define TM_RANK_MAX  65535       /* the largest R in "@R:" */

/* A parsed address or pattern. Opaque: parse, match, format, free. */
typedef struct tm_address tm_address;

/*
 * Parses text into *out.  On error returns TM_ERR_ADDRESS and, if errcol is
 * not NULL, the 0-based column of the offending character; if errmsg is not
 * NULL, a static one-line description ("empty segment", "bad slot name").
 */
int tm_address_parse(const char *text, tm_address **out, int *errcol,
		     const char **errmsg);
void tm_address_free(tm_address *a);

/* Canonical text ("@1:model.layers.3.mlp#2:out.1") into buf; the rank
 * prefix only when one was written. */
int tm_address_format(const tm_address *a, char *buf, size_t len);
/* The node path part only, canonical, without "@R:" ("model.layers.*.mlp"). */
const char *tm_address_path(const tm_address *a);
/* The rank written: TM_RANK_NONE, TM_RANK_ANY ("@*:") or R ("@R:"). */
int tm_address_rank(const tm_address *a);
/*
 * The rank prefix of a node-table address: R and *rest pointing after
 * "@R:", or TM_RANK_NONE and *rest = node_address when it has none.  Only
 * the canonical spelling counts ("@1:", not "@01:").  rest may be NULL.
 */
int tm_address_node_rank(const char *node_address, const char **rest);

int tm_address_is_pattern(const tm_address *a);   /* contains * or ** */
int tm_address_has_slot(const tm_address *a);
/* The slot; when the slot index was written as "*" (":out.*"), *any_index is 1. */
struct tm_slot tm_address_slot(const tm_address *a, int *any_index);
/* Occurrence "#N", 0 when not given (any call). */
uint32_t tm_address_call(const tm_address *a);
/* "!OP": does the address name operations (op sites, TM_EV_OP events)?
 * The op's index "!N", 0 when not given; name and line are matched by
 * tm_address_bind against the op site nodes. */
int tm_address_has_op(const tm_address *a);
uint32_t tm_address_op_index(const tm_address *a);
/* Does an op name ("aten::div.Tensor") match a glob as addresses match it:
 * whole, without "aten::", or without the overload ("div")? */
int tm_op_name_match(const char *pattern, const char *name);

/*
 * Does the node path match (ignores slot and #N)? Segment-wise glob.
 * Ranks: an address without "@R:" or with "@*:" matches nodes of every
 * rank and nodes without a prefix; "@R:" only nodes prefixed "@R:".
 */
int tm_address_match_path(const tm_address *a, const char *node_address);
/*
 * Does an event tensor match: path, #N (if given) and slot (if given)?
 * call is the event's occurrence number.
 */
int tm_address_match(const tm_address *a, const char *node_address,
		     uint32_t call, struct tm_slot slot);

/*
 * The events a breakpoint-style address selects, as one byte per node id of
 * t holding bit (1 << event kind): a module without a slot fires at its
 * EXIT, a slot at the event kind that carries it (tm_slot_event_kind), a
 * parameter without a slot at its PARAM events; a module slot never
 * matches a parameter node and the reverse.  An op address ("!OP") selects
 * the op sites (TM_NODE_OP) of the modules its path matches, at their OP
 * events; no other address selects an op site.  *kinds is malloc'd with
 * tm_nodetab_count(t) bytes (at least 1); *nmatch counts the nodes
 * selected.  tmdb's breakpoints and the probe-side server share this.
 */
int tm_address_bind(const tm_address *a, const tm_nodetab *t, uint8_t **kinds,
		    uint32_t *nmatch);

/* Plain string helper: does path match the glob pattern text? -1 on a bad pattern. */
int tm_path_glob(const char *pattern, const char *path);

/*
 * Nearest existing addresses to `text` (edit distance over the node table),
 * best first, at most `max`; returns how many were written to out[] (pointers
 * into the table's strings).  Only reasonably close ones are returned.
 */
size_t tm_address_suggest(const tm_nodetab *t, const char *text,
			  const char **out, size_t max);

/* Levenshtein distance, bounded: returns limit+1 when the distance exceeds limit. */
size_t tm_edit_distance(const char *a, const char *b, size_t limit);

/*
 * The address segment for a module or parameter name: characters that
 * cannot stand in a segment (anything but letters, digits, '_' and UTF-8)
 * become '_', an empty name becomes "_".  Returns the length written to out
 * (NUL-terminated), 0 if it does not fit in len.  Probes map every name
 * through this, so "blocks.conv-1" is recorded as model.blocks.conv_1.
 */
size_t tm_path_segment(const char *name, char *out, size_t len);

/* Parses a slot spelled "out", "out.1", "grad_in.0", "data", "grad". */
int tm_slot_parse(const char *text, struct tm_slot *out);

#ifdef __cplusplus
}
#endif
#endif /* TM_ADDRESS_H */
