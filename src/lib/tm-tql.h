/*
 * tm-tql.h -- TQL, the condition and query language (doc/tql.md).
 *
 * Breakpoint conditions, watch expressions, print, find and display all
 * compile a TQL source once to bytecode and evaluate it per event on a VM
 * that does no allocation.  Values are three-valued where data is missing:
 * a field inside a gap or not captured at the event's level is *unknown*,
 * which propagates, and a condition that is unknown does not fire.
 */
#ifndef TM_TQL_H
#define TM_TQL_H

#include <stdio.h>
#include "tm-types.h"

#ifdef __cplusplus
extern "C" {
#endif

enum tm_tql_type {
	TM_TQL_UNKNOWN = 0,   /* no value: gap, level, no such data */
	TM_TQL_BOOL,
	TM_TQL_INT,           /* int64 */
	TM_TQL_NUM,           /* double */
	TM_TQL_STR,
	TM_TQL_SHAPE,         /* tensor.shape: rank + dims */
	TM_TQL_LIST           /* request: strings, tested with == and =~ */
};

struct tm_tql_value {
	uint8_t type;                 /* enum tm_tql_type */
	uint32_t unknown_reason;      /* tm_gap_reason bits and TM_TQL_NO_FINITE
				       * when UNKNOWN (0: not recorded) */
	union {
		int b;
		int64_t i;
		double d;
		struct { const char *s; size_t len; } str;
		struct { const int64_t *dims; uint8_t rank; } shape;
		/* n items kept of count (count > n: the list was cut short);
		 * seq, step and time_ns are its annotation's, which with items
		 * tell one list from another (an answer about it may be
		 * reused) */
		struct {
			const char *const *items;
			uint32_t n, count;
			uint64_t seq, step, time_ns;
		} list;
	} v;
};
/*
 * Unknown-reason bit beside the tm_gap_reason bits: a min/max/mean/abs_max/
 * l2/std the event's level captures is absent because the tensor has no
 * finite element (all NaN or Inf).  Printed "no finite elements".
 */
#define TM_TQL_NO_FINITE (1u << 16)
/* Beside them too: an integer result that does not fit 64 bits ("integer
 * overflow"), an integer % 0 ("division by zero"): no right answer, and
 * not a missing record either. */
#define TM_TQL_OVERFLOW (1u << 17)
#define TM_TQL_DIV_ZERO (1u << 18)
/* Bits 19..22 and 27 are tm-compare.h's TM_REF_* (why there is no
 * aligned reference), and TM_TQL_SHAPES: the run's and the reference's
 * contents differ in size ("shapes differ"). */
#define TM_TQL_SHAPES (1u << 23)
/* Beside them too: an index past a shape's rank or a tensor's size ("index
 * out of range"), an element of a tensor whose contents were not captured
 * ("contents not captured"), and a convenience variable never set, which
 * GDB prints "void" (tm_tql_value_format prints just that). */
#define TM_TQL_RANGE (1u << 24)
#define TM_TQL_NO_PAYLOAD (1u << 25)
#define TM_TQL_VOID (1u << 26)
/* Why stat (enum tm_stat) is absent from a tensor of ev (NULL: unknown). */
uint32_t tm_tql_absent_reason(const struct tm_event *ev, int stat);

/* "3", "1.5e+06", "true", "\"model.fc1\"", "[4, 32]", "<unknown: level>",
 * "[\"cmpl-1\", \"cmpl-2\"]" (a list cut short ends ", ... (N more)]"). */
int tm_tql_value_format(const struct tm_tql_value *v, char *buf, size_t len);
/*
 * The words inside "<unknown: ...>" for unknown_reason bits: gap reasons
 * joined by "|", "no finite elements", "integer overflow", "division by
 * zero", or "not recorded" for none of them.
 */
int tm_tql_reason_format(uint32_t reason, char *buf, size_t len);

/*
 * What an evaluation looks at.  tensor is the tensor in focus (the slot the
 * breakpoint or find is about), NULL when the event has none.  Addressed
 * terms (NODE:SLOT.field) and $variables are answered by the environment.
 */
struct tm_tql_env {
	void *user;
	/* Latest tensor of node/slot/call (call 0 = any) at or before the
	 * playhead; NULL if unknown, with *reason set (tm_gap_reason bits). */
	const struct tm_tensor *(*lookup)(void *user, uint32_t node,
					 struct tm_slot slot, uint32_t call,
					 const struct tm_event **event,
					 uint32_t *reason);
	/* Convenience variable $name, or value history $N / $ / $$ / $$N
	 * (name is "3", "", "$", "$2"): TM_OK or TM_ERR_NOT_FOUND. */
	int (*variable)(void *user, const char *name, struct tm_tql_value *out);
	/*
	 * Step-aligned values for the cross-rank aggregates max/min/spread
	 * (@*:NODE:SLOT.field): the latest tensor of node/slot/call (call 0 =
	 * any) among the events of `step`, *event set to its event; NULL if
	 * unknown, with *reason set as for lookup.  The VM passes the step of
	 * the event being evaluated (ctx->event->step).  NULL here, or a ctx
	 * without an event, makes those aggregates unknown: they never fall
	 * back to lookup, whose "latest at the playhead" would compare ranks
	 * at different steps.
	 */
	const struct tm_tensor *(*lookup_step)(void *user, uint32_t node,
					      struct tm_slot slot, uint32_t call,
					      uint64_t step,
					      const struct tm_event **event,
					      uint32_t *reason);
	/*
	 * The annotation key of ev's step (struct tm_annot): TQL `request` and
	 * `request.count` read key "request".  NULL, or a NULL answer, makes
	 * them unknown ("not recorded"): a step whose batch is not known.
	 */
	const struct tm_annot *(*annotation)(void *user, const struct tm_event *ev,
					     const char *key);
	/*
	 * A run beside a reference (tm-compare.h): the tensor in slot of the
	 * reference event aligned with ev, with its contents (payload) when
	 * contents is 1; NULL with *reason (TM_REF_* bits, gap reasons,
	 * TM_GAP_LEVEL for contents not captured) when there is none.  NULL
	 * here makes every ref. term unknown with reason TM_REF_NONE.  ev is
	 * NULL when no event or no tensor is in focus: the answer is NULL
	 * with the reason (TM_REF_NONE without a reference, else 0).
	 */
	const struct tm_tensor *(*reference)(void *user, const struct tm_event *ev,
					     struct tm_slot slot, int contents,
					     const struct tm_event **ref_event,
					     uint32_t *reason);
};

struct tm_tql_ctx {
	const struct tm_event *event;     /* may be NULL (print with no trace) */
	const struct tm_tensor *tensor;   /* may be NULL */
	const tm_nodetab *nodes;          /* may be NULL */
	const struct tm_tql_env *env;     /* may be NULL */
	/* The rank of the process that produced the event, the TQL field
	 * `rank`: 0 when not distributed (a zeroed ctx), negative: unknown. */
	int32_t rank;
};

typedef struct tm_tql_funcs tm_tql_funcs;   /* extension functions (libffi) */
typedef struct tm_tql_prog tm_tql_prog;

struct tm_tql_compile_opts {
	const tm_nodetab *nodes;   /* to resolve addressed terms; NULL: none allowed */
	const tm_tql_funcs *funcs; /* extension functions; may be NULL */
	int want_bool;             /* 1: a condition; non-bool result is an error */
	/*
	 * Multi-rank node tables ("@0:model.fc", "@1:model.fc", ...): an
	 * addressed term written without "@R:" that is not in nodes as written
	 * resolves to "@<rank>:PATH" when that exists, so a zeroed opts reads
	 * rank 0.  "@1:model.fc:out.std" resolves as written.  Negative: no
	 * such resolution.
	 */
	int32_t rank;
};

/*
 * Compiles src.  On TM_ERR_TQL, *errors (if not NULL) receives a malloc'd
 * text with every error found, each as
 *     tql:1:18: error: MESSAGE
 *     tensor.nan_count > "x"
 *                        ^~~
 * Other codes for out-of-memory etc.
 */
int tm_tql_compile(const char *src, const struct tm_tql_compile_opts *opts,
		   tm_tql_prog **out, char **errors);
void tm_tql_free(tm_tql_prog *p);
const char *tm_tql_source(const tm_tql_prog *p);
int tm_tql_result_type(const tm_tql_prog *p);   /* static type, UNKNOWN if dynamic */

/* Evaluates p on ctx.  Strings/shapes in *out point into p or the ctx and
 * are valid until the next evaluation. */
int tm_tql_eval(tm_tql_prog *p, const struct tm_tql_ctx *ctx,
		struct tm_tql_value *out);
/* Condition convenience: 1 true, 0 false, -1 unknown. */
int tm_tql_test(tm_tql_prog *p, const struct tm_tql_ctx *ctx);
/* Forgets prev()/delta() history (the playhead jumped), and the answers
 * kept about request lists (another trace or run). */
void tm_tql_reset(tm_tql_prog *p);
/* Bytecode listing, one instruction a line. */
int tm_tql_disassemble(const tm_tql_prog *p, FILE *out);

/* Does the program read addressed terms (needs env->lookup, or
 * env->lookup_step for max/min/spread over "@*:")? */
int tm_tql_uses_lookup(const tm_tql_prog *p);
/* Does it read the reference (ref.*, maxabsdiff(), ...: env->reference)? */
int tm_tql_uses_reference(const tm_tql_prog *p);
/* Does it read $variables or value history (needs env->variable)? */
int tm_tql_uses_variables(const tm_tql_prog *p);

/* Extension functions through libffi (trusted code: it runs native code). */
tm_tql_funcs *tm_tql_funcs_new(void);
void tm_tql_funcs_free(tm_tql_funcs *f);
/* spec: "LIB SYMBOL(double, int64) -> bool"; *error gets a malloc'd message. */
int tm_tql_funcs_load(tm_tql_funcs *f, const char *spec, char **error);
/* Name of the n-th loaded function, NULL past the end. */
const char *tm_tql_funcs_name(const tm_tql_funcs *f, size_t n);

/* Field names for completion: "tensor.nan_count", "node.path", "step",
 * ..., "rank", "request", "request.count". */
const char *const *tm_tql_field_names(void);

#ifdef __cplusplus
}
#endif
#endif /* TM_TQL_H */
