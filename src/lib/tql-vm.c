/*
 * tql-vm.c -- the TQL virtual machine, the disassembler and value printing.
 *
 * A stack machine over struct tm_tql_value.  The stack, the prev()/delta()
 * registers and their history table belong to the program and were sized by
 * the compiler, so an evaluation allocates nothing and runs each instruction
 * at most once (jumps only go forward): time proportional to the program.
 * Instructions are typed by the compiler; at run time they only check for
 * *unknown*, which propagates with the union of the operands' reasons.
 * A program is therefore not reentrant: evaluate it from one thread at a
 * time (each breakpoint owns its program).
 */
#include "config.h"

#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tm-stats.h"
#include "tm-address.h"
#include "tm-compare.h"
#include "tql-int.h"

enum {
	OPND_NONE, OPND_K, OPND_STAT, OPND_SK, OPND_EK, OPND_TF, OPND_EF, OPND_ADDR, OPND_VAR,
	OPND_SITE, OPND_JUMP, OPND_FUNC, OPND_RSET, OPND_COUNT
};

static const struct {
	const char *name;
	int8_t operand, pops, pushes;
} op_info[OP__COUNT] = {
#define TQL_OP(name, operand, pops, pushes) \
	[OP_##name] = { #name, OPND_##operand, pops, pushes },
#include "opcodes.def"
#undef TQL_OP
};

const char *tql_op_name(int op)
{
	return op >= 0 && op < OP__COUNT ? op_info[op].name : "?";
}

int tql_op_pops(int op)
{
	return op_info[op].pops;
}

int tql_op_pushes(int op)
{
	return op_info[op].pushes;
}

/* ---------------------------------------------------------------- fields */

static inline void set_unknown(struct tm_tql_value *v, uint32_t reason)
{
	v->type = TM_TQL_UNKNOWN;
	v->unknown_reason = reason;
}

static inline void set_int(struct tm_tql_value *v, int64_t i)
{
	v->type = TM_TQL_INT;
	v->unknown_reason = 0;
	v->v.i = i;
}

static inline void set_num(struct tm_tql_value *v, double d)
{
	v->type = TM_TQL_NUM;
	v->unknown_reason = 0;
	v->v.d = d;
}

static inline int dyn_number(const struct tm_tql_value *v)
{
	return v->type == TM_TQL_INT || v->type == TM_TQL_NUM;
}

static inline double dyn_to_double(const struct tm_tql_value *v)
{
	return v->type == TM_TQL_INT ? (double)v->v.i : v->v.d;
}

static inline void set_bool(struct tm_tql_value *v, int b)
{
	v->type = TM_TQL_BOOL;
	v->unknown_reason = 0;
	v->v.b = b;
}

static inline void set_str(struct tm_tql_value *v, const char *s)
{
	v->type = TM_TQL_STR;
	v->unknown_reason = 0;
	v->v.str.s = s;
	v->v.str.len = strlen(s);
}

/* A count stored as a double (file data: may be anything) as an int64. */
static inline void set_count(struct tm_tql_value *v, double d)
{
	if (d >= -9.2e18 && d <= 9.2e18)
		set_int(v, (int64_t)d);
	else
		set_unknown(v, 0);
}

/*
 * Why stat f is absent from a tensor of ev: not captured at the event's
 * level, or, when the level does capture it, because the tensor had no
 * finite element to take it over (the stats leave min..std out then).
 */
uint32_t tm_tql_absent_reason(const struct tm_event *ev, int stat)
{
	if (ev && stat >= 0 && stat < TM_STAT__COUNT &&
	    ev->level >= tm_stat_table[stat].level)
		return TM_TQL_NO_FINITE;
	return TM_GAP_LEVEL;
}

/* A field of t, a tensor of ev (NULL: not known). */
static void tensor_field(const struct tm_event *ev, const struct tm_tensor *t,
			 uint32_t f, struct tm_tql_value *v)
{
	int64_t n = 1;
	unsigned i;

	if (f < TM_STAT__COUNT) {
		if (!(t->have & TM_STAT_BIT(f)))
			set_unknown(v, tm_tql_absent_reason(ev, (int)f));
		else if (tm_stat_table[f].integer)
			set_count(v, t->stat[f]);
		else
			set_num(v, t->stat[f]);
		return;
	}
	switch (f) {
	case TF_SHAPE:
		v->type = TM_TQL_SHAPE;
		v->unknown_reason = 0;
		v->v.shape.dims = t->shape;
		v->v.shape.rank = t->rank > TM_MAX_RANK ? TM_MAX_RANK : t->rank;
		return;
	case TF_DTYPE:
		set_str(v, tm_dtype_name(t->dtype));
		return;
	case TF_RANK:
		set_int(v, t->rank);
		return;
	case TF_NUMEL:
		if (t->have & TM_STAT_BIT(TM_STAT_NUMEL)) {
			set_count(v, t->stat[TM_STAT_NUMEL]);
			return;
		}
		for (i = 0; i < t->rank && i < TM_MAX_RANK; i++)
			if (t->shape[i] < 0 || __builtin_mul_overflow(n, t->shape[i], &n)) {
				set_unknown(v, 0);
				return;
			}
		set_int(v, n);
		return;
	default:
		set_unknown(v, 0);
		return;
	}
}

/* The annotation key of the event's step that was made at or before the
 * event (env->annotation answers so, live and on replay alike). */
static const struct tm_annot *annot_of(const struct tm_tql_ctx *ctx, const struct tm_event *e,
				       const char *key)
{
	return ctx->env && ctx->env->annotation ?
		ctx->env->annotation(ctx->env->user, e, key) : NULL;
}

static void set_list(struct tm_tql_value *v, const struct tm_annot *a)
{
	v->type = TM_TQL_LIST;
	v->unknown_reason = 0;
	v->v.list.items = a->values;
	v->v.list.n = a->nvalues;
	v->v.list.count = a->count;
	v->v.list.seq = a->seq;
	v->v.list.step = a->step;
	v->v.list.time_ns = a->time_ns;
}

/* request / request.count / annot.KEY / scaler.*: annotations of the
 * event's step.  A list that is absent is unknown ("not recorded"), which
 * == / != / =~ then take as an empty list. */
static void annot_field(const struct tm_tql_ctx *ctx, const struct tm_event *e,
			uint32_t f, const char *key, struct tm_tql_value *v)
{
	const struct tm_annot *a = annot_of(ctx, e, f == EF_ANNOT ? key :
					    f == EF_SCALER_SCALE ? "scaler.scale" :
					    f == EF_SCALER_SKIPPED ? "scaler.skipped" : "request");

	if (f == EF_SCALER_SKIPPED) {
		/* a step the scaler did not skip (or no scaler) has no record */
		set_bool(v, a && a->nvalues && (!strcmp(a->values[0], "true") ||
						!strcmp(a->values[0], "1")));
	} else if (!a) {
		set_unknown(v, 0);
	} else if (f == EF_REQUEST_COUNT) {
		set_int(v, a->count);
	} else if (f == EF_SCALER_SCALE) {
		char *end;
		double d = a->nvalues ? strtod(a->values[0], &end) : 0;

		if (!a->nvalues || end == a->values[0] || *end)
			set_unknown(v, 0);
		else
			set_num(v, d);
	} else {
		set_list(v, a);
	}
}

/* op.*: the op event's site (name, source) and what it did (doc/tql.md). */
static void op_field(const struct tm_tql_ctx *ctx, const struct tm_event *e,
		     uint32_t f, struct tm_tql_value *v)
{
	const struct tm_node *n;
	int r;

	if (e->kind != TM_EV_OP) {
		set_unknown(v, 0);
		return;
	}
	switch (f) {
	case EF_OP_INDEX:
		set_int(v, e->op_index);
		return;
	case EF_OP_INPUTS_FINITE:
		if (e->op_flags & TM_OPF_INPUTS_CHECKED)
			set_bool(v, !!(e->op_flags & TM_OPF_INPUTS_FINITE));
		else
			set_unknown(v, 0);
		return;
	case EF_OP_MADE_NONFINITE:
		r = tm_event_op_made_nonfinite(e);
		if (r < 0)
			set_unknown(v, 0);
		else
			set_bool(v, r);
		return;
	default:
		break;
	}
	n = ctx->nodes ? tm_nodetab_get(ctx->nodes, e->node) : NULL;
	if (!n || n->kind != TM_NODE_OP)
		set_unknown(v, 0);
	else if (f == EF_OP_NAME && n->type)
		set_str(v, n->type);
	else if (f == EF_OP_FILE && n->file)
		set_str(v, n->file);
	else if (f == EF_OP_LINE && n->line)
		set_int(v, n->line);
	else
		set_unknown(v, 0);
}

static void event_field(const struct tm_tql_ctx *ctx, uint32_t f, const char *key,
			struct tm_tql_value *v)
{
	const struct tm_event *e = ctx ? ctx->event : NULL;
	const struct tm_node *n;

	/* The rank belongs to the process, not the event: it is known with or
	 * without one (print rank), and a negative one means "not known". */
	if (f == EF_RANK) {
		if (ctx && ctx->rank >= 0)
			set_int(v, ctx->rank);
		else
			set_unknown(v, 0);
		return;
	}
	if (!e) {
		set_unknown(v, 0);
		return;
	}
	switch (f) {
	case EF_STEP:
	case EF_SEQ:
	case EF_TIME: {
		uint64_t u = f == EF_STEP ? e->step : f == EF_SEQ ? e->seq : e->time_ns;

		if (u > INT64_MAX)
			set_unknown(v, 0);
		else
			set_int(v, (int64_t)u);
		return;
	}
	case EF_PHASE:
		set_str(v, tm_phase_name(e->phase));
		return;
	case EF_REQUEST:
	case EF_REQUEST_COUNT:
	case EF_SCALER_SCALE:
	case EF_SCALER_SKIPPED:
	case EF_ANNOT:
		annot_field(ctx, e, f, key, v);
		return;
	case EF_CALL:
		set_int(v, e->call);
		return;
	case EF_EVENT:
		set_str(v, tm_event_kind_name(e->kind));
		return;
	case EF_EXC_TYPE:
	case EF_EXC_MESSAGE: {
		/* what a raise raised (tm-types.h TM_EV_RAISE) */
		const struct tm_annot *a = e->kind == TM_EV_RAISE ?
			annot_of(ctx, e, "exception") : NULL;
		unsigned k = f == EF_EXC_TYPE ? 0 : 1;

		if (a && a->nvalues > k)
			set_str(v, a->values[k]);
		else
			set_unknown(v, 0);
		return;
	}
	case EF_OP_NAME:
	case EF_OP_INDEX:
	case EF_OP_LINE:
	case EF_OP_FILE:
	case EF_OP_INPUTS_FINITE:
	case EF_OP_MADE_NONFINITE:
		op_field(ctx, e, f, v);
		return;
	default:
		n = ctx->nodes ? tm_nodetab_get(ctx->nodes, e->node) : NULL;
		if (!n) {
			set_unknown(v, 0);
		} else if (f == EF_NODE_PATH && n->address) {
			set_str(v, n->address);
		} else if (f == EF_NODE_TYPE && n->type) {
			set_str(v, n->type);
		} else if (f == EF_NODE_DEPTH) {
			set_int(v, n->depth);
		} else {
			set_unknown(v, 0);
		}
		return;
	}
}

/* ---------------------------------------------------------------- history */

static inline uint64_t hist_key(const struct tm_tql_ctx *ctx)
{
	uint64_t kind = 0xff, index = 0;

	if (ctx->tensor) {
		kind = ctx->tensor->slot.kind;
		index = ctx->tensor->slot.index;
	}
	return (((uint64_t)ctx->event->node << 24) | (kind << 16) | index) + 1;
}

/* The history row of the event in focus, made on first sight; NULL when
 * there is no event or the table is at its cap. */
static struct tm_tql_value *hist_row(tm_tql_prog *p, const struct tm_tql_ctx *ctx)
{
	struct tql_hist *h = &p->hist;
	uint64_t key;
	uint32_t i, mask;

	if (!ctx || !ctx->event || !h->keys)
		return NULL;
	key = hist_key(ctx);
	mask = h->cap - 1;
	i = (uint32_t)((key * UINT64_C(0x9E3779B97F4A7C15)) >> 40) & mask;
	for (;;) {
		if (h->keys[i] == key)
			return &h->vals[(size_t)i * p->nsites];
		if (!h->keys[i])
			break;
		i = (i + 1) & mask;
	}
	if (h->used >= h->limit)
		return NULL;
	h->keys[i] = key;
	h->used++;
	return &h->vals[(size_t)i * p->nsites];
}

/* ---------------------------------------------------------------- ranks */

/*
 * max/min/spread (op) over count per-rank addressed terms from first: each
 * rank's value at the step of the event being evaluated, so that ranks
 * running at different speeds are compared at the same step.  One loop
 * over the terms, whatever the world size: no recursion, no allocation.
 * Any unknown member makes the result unknown, with the members' reasons
 * joined; a NaN member makes it NaN as for max()/min().
 */
static void rank_fold(const tm_tql_prog *p, const struct tm_tql_ctx *ctx, int op,
		      uint32_t first, uint32_t count, struct tm_tql_value *out)
{
	int64_t imin = 0, imax = 0;
	double dmin = 0, dmax = 0;
	uint32_t i, reason = 0;
	int unknown = 0, seen = 0, finite = 0, nan = 0, type = TM_TQL_UNKNOWN;
	uint64_t step;

	if (!ctx || !ctx->event || !ctx->env || !ctx->env->lookup_step || !count) {
		set_unknown(out, 0);
		return;
	}
	step = ctx->event->step;
	for (i = 0; i < count; i++) {
		const struct tql_addr *ad = &p->addrs[first + i];
		const struct tm_event *ev = NULL;
		const struct tm_tensor *t;
		struct tm_tql_value v;
		uint32_t r = 0;

		t = ctx->env->lookup_step(ctx->env->user, ad->node, ad->slot, ad->call,
					  step, &ev, &r);
		if (!t) {
			unknown = 1;
			reason |= r & TM_GAP__ALL;
			continue;
		}
		tensor_field(ev, t, ad->field, &v);
		if (v.type == TM_TQL_UNKNOWN) {
			unknown = 1;
			reason |= v.unknown_reason;
			continue;
		}
		if (unknown)
			continue;
		if (v.type == TM_TQL_INT && (!seen || type == TM_TQL_INT)) {
			if (!seen || v.v.i < imin)
				imin = v.v.i;
			if (!seen || v.v.i > imax)
				imax = v.v.i;
		} else if (v.type == TM_TQL_NUM && (!seen || type == TM_TQL_NUM)) {
			if (isnan(v.v.d)) {
				nan = 1;
			} else {
				if (!finite || v.v.d < dmin)
					dmin = v.v.d;
				if (!finite || v.v.d > dmax)
					dmax = v.v.d;
				finite = 1;
			}
		} else {
			/* the checker allows numeric fields only; one field
			 * has one type, so this is defence */
			unknown = 1;
			continue;
		}
		type = v.type;
		seen = 1;
	}
	if (unknown) {
		set_unknown(out, reason);
		return;
	}
	if (type == TM_TQL_INT) {
		if (op == OP_RANKS_MAX)
			set_int(out, imax);
		else if (op == OP_RANKS_MIN)
			set_int(out, imin);
		else if (__builtin_sub_overflow(imax, imin, &imax))
			set_unknown(out, 0);
		else
			set_int(out, imax);
		return;
	}
	/* NaN in, NaN out: a NaN must not hide behind the other ranks */
	if (nan)
		set_num(out, NAN);
	else
		set_num(out, op == OP_RANKS_MAX ? dmax :
			op == OP_RANKS_MIN ? dmin : dmax - dmin);
}

/* ---------------------------------------------------------------- helpers */

/* Python's modulo: the result has the sign of the divisor. */
static inline double fmod_py(double a, double b)
{
	double r = fmod(a, b);

	if (r != 0 && ((r < 0) != (b < 0)))
		r += b;
	return r;
}

static int glob_match(tm_tql_prog *p, const struct tm_tql_value *s,
		      const struct tm_tql_value *pat)
{
	if (s->v.str.len > TM_ADDRESS_MAX || pat->v.str.len > TM_ADDRESS_MAX)
		return -1;
	/* strings from variables need not be NUL-terminated */
	if (s->v.str.len)
		memcpy(p->scratch[0], s->v.str.s, s->v.str.len);
	p->scratch[0][s->v.str.len] = '\0';
	if (pat->v.str.len)
		memcpy(p->scratch[1], pat->v.str.s, pat->v.str.len);
	p->scratch[1][pat->v.str.len] = '\0';
	if ((!p->glob && !p->glob_bad) || strcmp(p->scratch[1], p->glob_src)) {
		tm_address_free(p->glob);
		p->glob = NULL;
		memcpy(p->glob_src, p->scratch[1], pat->v.str.len + 1);
		/* a pattern of node paths only: no slot, no #N (tm_path_glob's rule) */
		p->glob_bad = tm_address_parse(p->glob_src, &p->glob, NULL, NULL) != TM_OK ||
			      tm_address_has_slot(p->glob) || tm_address_call(p->glob);
	}
	return p->glob_bad ? -1 : tm_address_match_path(p->glob, p->scratch[0]);
}

static int any_item_scan(tm_tql_prog *p, const struct tm_tql_value *list,
			 const struct tm_tql_value *s, int match,
			 const struct tql_memo *m)
{
	uint32_t i;

	if (m && m->items && m->items == list->v.list.items && m->n == list->v.list.n &&
	    m->count == list->v.list.count && m->seq == list->v.list.seq &&
	    m->step == list->v.list.step && m->time_ns == list->v.list.time_ns)
		return m->result;
	if (match) {
		if (s->v.str.len > TM_ADDRESS_MAX)
			return -1;
		if (s->v.str.len)
			memcpy(p->scratch[1], s->v.str.s, s->v.str.len);
		p->scratch[1][s->v.str.len] = '\0';
	}
	for (i = 0; i < list->v.list.n; i++) {
		const char *it = list->v.list.items[i];

		if (match ? fnmatch(p->scratch[1], it, 0) == 0 :
		    strlen(it) == s->v.str.len && !memcmp(it, s->v.str.s, s->v.str.len))
			return 1;
	}
	return 0;
}

/* Does one item of list equal (match: fnmatch) the string s?  Strings from
 * variables need not be NUL-terminated: the pattern is copied.  -1: the
 * pattern is too long.  With a memo slot (s is a constant) a list seen
 * last time gets last time's answer. */
static int any_item(tm_tql_prog *p, const struct tm_tql_value *list,
		    const struct tm_tql_value *s, int match, uint32_t slot)
{
	struct tql_memo *m = slot < TQL_MEMOS ? &p->memo[slot] : NULL;
	int r = any_item_scan(p, list, s, match, m);

	if (m) {
		m->items = list->v.list.items;
		m->seq = list->v.list.seq;
		m->step = list->v.list.step;
		m->time_ns = list->v.list.time_ns;
		m->n = list->v.list.n;
		m->count = list->v.list.count;
		m->result = r;
	}
	return r;
}

static int str_eq(const struct tm_tql_value *a, const struct tm_tql_value *b)
{
	return a->v.str.len == b->v.str.len &&
	       (!a->v.str.len || !memcmp(a->v.str.s, b->v.str.s, a->v.str.len));
}

static int shape_eq(const struct tm_tql_value *a, const struct tm_tql_value *b)
{
	return a->v.shape.rank == b->v.shape.rank &&
	       (!a->v.shape.rank ||
		!memcmp(a->v.shape.dims, b->v.shape.dims,
			a->v.shape.rank * sizeof(int64_t)));
}

/* ---------------------------------------------------------------- the VM */

void tql_run(tm_tql_prog *p, const struct tql_insn *code,
	     const struct tm_tql_ctx *ctx, struct tm_tql_value *out)
{
	struct tm_tql_value *sp = p->stack, *a, *b;
	struct tm_tql_value *row = NULL;
	const struct tm_tensor *tensor = ctx ? ctx->tensor : NULL;
	const struct tql_insn *ip = code;
	struct tql_insn in;
	/* Threaded dispatch: one indirect jump per instruction site predicts
	 * far better than the single jump of a switch. */
	static const void *const labels[OP__COUNT] = {
#define TQL_OP(name, operand, pops, pushes) [OP_##name] = &&L_##name,
#include "opcodes.def"
#undef TQL_OP
	};

/* Binary instructions: a op b -> a; unknown in, unknown out. */
#define BINARY() \
	b = --sp; a = sp - 1; \
	if (TM_UNLIKELY(a->type == TM_TQL_UNKNOWN || b->type == TM_TQL_UNKNOWN)) { \
		a->unknown_reason = (a->type == TM_TQL_UNKNOWN ? a->unknown_reason : 0) | \
				    (b->type == TM_TQL_UNKNOWN ? b->unknown_reason : 0); \
		a->type = TM_TQL_UNKNOWN; \
		DISPATCH(); \
	}
#define UNARY() \
	a = sp - 1; \
	if (TM_UNLIKELY(a->type == TM_TQL_UNKNOWN)) \
		DISPATCH();
#define CMP(T, F, f, OP) \
	L_##T##_##F: BINARY(); set_bool(a, a->v.f OP b->v.f); DISPATCH(); \
	L_##T##_##F##K: \
	a = sp - 1; b = &p->k[in.b]; \
	if (TM_UNLIKELY(a->type == TM_TQL_UNKNOWN)) \
		DISPATCH(); \
	set_bool(a, a->v.f OP b->v.f); \
	DISPATCH();
#define SCMP(T, F, OP) \
	L_STAT_##T##_##F##K: \
	if (TM_UNLIKELY(!tensor)) { \
		set_unknown(sp++, 0); \
		DISPATCH(); \
	} \
	if (TM_UNLIKELY(!(tensor->have & TM_STAT_BIT(in.a)))) { \
		set_unknown(sp++, tm_tql_absent_reason(ctx->event, (int)in.a)); \
		DISPATCH(); \
	} \
	if (#F[0] == 'I') { \
		double d = tensor->stat[in.a]; \
		if (TM_LIKELY(d >= -9.2e18 && d <= 9.2e18)) \
			set_bool(sp, (int64_t)d OP p->k[in.b].v.i); \
		else \
			set_unknown(sp, 0); \
	} else { \
		set_bool(sp, tensor->stat[in.a] OP p->k[in.b].v.d); \
	} \
	sp++; \
	DISPATCH();
#define ECMP(T, OP) \
	L_EV_##T##_IK: \
	if (TM_LIKELY(in.a == EF_STEP && ctx && ctx->event && \
		      ctx->event->step <= INT64_MAX)) \
		set_int(sp, (int64_t)ctx->event->step); \
	else \
		event_field(ctx, in.a, NULL, sp); \
	if (TM_LIKELY(sp->type == TM_TQL_INT)) \
		set_bool(sp, sp->v.i OP p->k[in.b].v.i); \
	sp++; \
	DISPATCH();
#define DISPATCH() do { in = *ip++; goto *labels[in.op]; } while (0)

	DISPATCH();
	L_CONST:
		*sp++ = p->k[in.b];
		DISPATCH();
	L_STAT_I:
		if (TM_UNLIKELY(!tensor))
			set_unknown(sp, 0);
		else if (TM_UNLIKELY(!(tensor->have & TM_STAT_BIT(in.a))))
			set_unknown(sp, tm_tql_absent_reason(ctx->event, (int)in.a));
		else
			set_count(sp, tensor->stat[in.a]);
		sp++;
		DISPATCH();
	L_STAT_N:
		if (TM_UNLIKELY(!tensor))
			set_unknown(sp, 0);
		else if (TM_UNLIKELY(!(tensor->have & TM_STAT_BIT(in.a))))
			set_unknown(sp, tm_tql_absent_reason(ctx->event, (int)in.a));
		else
			set_num(sp, tensor->stat[in.a]);
		sp++;
		DISPATCH();
	L_TFIELD:
		if (!ctx || !ctx->tensor)
			set_unknown(sp, 0);
		else
			tensor_field(ctx->event, ctx->tensor, in.a, sp);
		sp++;
		DISPATCH();
	L_EFIELD:
		if (TM_LIKELY(ctx && ctx->event && in.a == EF_STEP &&
			      ctx->event->step <= INT64_MAX))
			set_int(sp, (int64_t)ctx->event->step);
		else
			event_field(ctx, in.a, in.a == EF_ANNOT ? p->pool + in.b : NULL, sp);
		sp++;
		DISPATCH();
	L_ADDR: {
		const struct tql_addr *ad = &p->addrs[in.b];
		const struct tm_tensor *t = NULL;
		const struct tm_event *ev = NULL;
		uint32_t reason = 0;

		if (ctx && ctx->env && ctx->env->lookup)
			t = ctx->env->lookup(ctx->env->user, ad->node, ad->slot,
					     ad->call, &ev, &reason);
		if (t)
			tensor_field(ev, t, ad->field, sp);
		else
			set_unknown(sp, reason & TM_GAP__ALL);
		sp++;
		DISPATCH();
	}
	L_REF: {
		const struct tm_tensor *t = NULL;
		const struct tm_event *rev = NULL;
		uint32_t reason = TM_REF_NONE;
		struct tm_slot slot;

		if (ctx && ctx->env && ctx->env->reference) {
			/* nothing in focus: only the reason (no reference?) */
			slot = tensor ? tensor->slot : (struct tm_slot){ 0, 0 };
			reason = 0;
			t = ctx->env->reference(ctx->env->user,
						tensor ? ctx->event : NULL, slot, 0,
						&rev, &reason);
		}
		if (t)
			tensor_field(rev, t, in.a, sp);
		else
			set_unknown(sp, reason);
		sp++;
		DISPATCH();
	}
	L_REF_ADDR: {
		/* the reference event aligned with the run's event that the
		 * addressed term reads */
		const struct tql_addr *ad = &p->addrs[in.b];
		const struct tm_tensor *t = NULL;
		const struct tm_event *ev = NULL, *rev = NULL;
		uint32_t reason = TM_REF_NONE, why = 0;

		if (ctx && ctx->env && ctx->env->reference) {
			reason = 0;
			if (ctx->env->lookup)
				t = ctx->env->lookup(ctx->env->user, ad->node, ad->slot,
						     ad->call, &ev, &why);
			if (!t || !ev) {
				/* no run event: its reason, and "no reference"
				 * when there is none */
				ctx->env->reference(ctx->env->user, NULL, ad->slot, 0,
						    &rev, &reason);
				reason |= why & TM_GAP__ALL;
				t = NULL;
			} else {
				t = ctx->env->reference(ctx->env->user, ev, ad->slot, 0,
							&rev, &reason);
			}
		}
		if (t)
			tensor_field(rev, t, ad->field, sp);
		else
			set_unknown(sp, reason);
		sp++;
		DISPATCH();
	}
	L_RELDIFF:
		BINARY();
		set_num(a, tm_reldiff(a->v.d, b->v.d));
		DISPATCH();
	L_CMP_CONTENTS: {
		const struct tm_tensor *t = NULL;
		const struct tm_event *rev = NULL;
		uint32_t reason = TM_REF_NONE;
		struct tm_contents_diff d;
		int rc;

		if (ctx && ctx->env && ctx->env->reference) {
			reason = 0;
			t = ctx->env->reference(ctx->env->user,
						tensor ? ctx->event : NULL,
						tensor ? tensor->slot : (struct tm_slot){ 0, 0 },
						1, &rev, &reason);
		}
		if (!t) {
			set_unknown(sp++, reason);
			DISPATCH();
		}
		rc = tm_contents_diff(tensor, t, &d);
		if (rc == TM_ERR_INVALID_ARG)
			set_unknown(sp, TM_TQL_SHAPES);
		else if (rc)
			set_unknown(sp, TM_GAP_LEVEL);
		else
			set_num(sp, in.a == 0 ? d.maxabsdiff : in.a == 1 ? d.relerr : d.cosine);
		sp++;
		DISPATCH();
	}
	L_VAR:
		/* the environment's answer is checked like any input */
		if (!ctx || !ctx->env || !ctx->env->variable ||
		    ctx->env->variable(ctx->env->user, p->pool + in.b, sp) != TM_OK ||
		    sp->type > TM_TQL_SHAPE ||
		    (sp->type == TM_TQL_STR && !sp->v.str.s && sp->v.str.len) ||
		    (sp->type == TM_TQL_SHAPE &&
		     (sp->v.shape.rank > TM_MAX_RANK || (!sp->v.shape.dims && sp->v.shape.rank))))
			set_unknown(sp, 0);
		else if (sp->type != TM_TQL_UNKNOWN)
			sp->unknown_reason = 0;
		sp++;
		DISPATCH();

	L_TONUM:
		a = sp - 1;
		if (a->type == TM_TQL_INT)
			set_num(a, (double)a->v.i);
		DISPATCH();
	L_DYN_NUM:
		a = sp - 1;
		if (a->type == TM_TQL_INT)
			set_num(a, (double)a->v.i);
		else if (a->type != TM_TQL_NUM && a->type != TM_TQL_UNKNOWN)
			set_unknown(a, 0);
		DISPATCH();
	L_DYN_INT:
		a = sp - 1;
		if (a->type != TM_TQL_INT && a->type != TM_TQL_UNKNOWN)
			set_unknown(a, 0);
		DISPATCH();
	L_DYN_BOOL:
		a = sp - 1;
		if (a->type != TM_TQL_BOOL && a->type != TM_TQL_UNKNOWN)
			set_unknown(a, 0);
		DISPATCH();
	L_DYN_STR:
		a = sp - 1;
		if (a->type != TM_TQL_STR && a->type != TM_TQL_UNKNOWN)
			set_unknown(a, 0);
		DISPATCH();
	L_DYN_SHAPE:
		a = sp - 1;
		if (a->type != TM_TQL_SHAPE && a->type != TM_TQL_UNKNOWN)
			set_unknown(a, 0);
		DISPATCH();

	/* Integer overflow has no right answer: unknown. */
	L_ADD_I:
		BINARY();
		if (__builtin_add_overflow(a->v.i, b->v.i, &a->v.i))
			set_unknown(a, TM_TQL_OVERFLOW);
		DISPATCH();
	L_SUB_I:
		BINARY();
		if (__builtin_sub_overflow(a->v.i, b->v.i, &a->v.i))
			set_unknown(a, TM_TQL_OVERFLOW);
		DISPATCH();
	L_MUL_I:
		BINARY();
		if (__builtin_mul_overflow(a->v.i, b->v.i, &a->v.i))
			set_unknown(a, TM_TQL_OVERFLOW);
		DISPATCH();
	L_MOD_I:
		BINARY();
		if (b->v.i == 0) {
			set_unknown(a, TM_TQL_DIV_ZERO);
		} else if (b->v.i == -1) {
			a->v.i = 0;
		} else {
			int64_t r = a->v.i % b->v.i;

			if (r != 0 && ((r < 0) != (b->v.i < 0)))
				r += b->v.i;
			a->v.i = r;
		}
		DISPATCH();
	L_ADD_N: BINARY(); a->v.d += b->v.d; DISPATCH();
	L_SUB_N: BINARY(); a->v.d -= b->v.d; DISPATCH();
	L_MUL_N: BINARY(); a->v.d *= b->v.d; DISPATCH();
	L_DIV_I:
		BINARY();
		if (b->v.i == 0)
			set_unknown(a, TM_TQL_DIV_ZERO);
		else if (b->v.i == -1 && a->v.i == INT64_MIN)
			set_unknown(a, TM_TQL_OVERFLOW);
		else
			a->v.i /= b->v.i;
		DISPATCH();
	L_DIV_N: BINARY(); a->v.d /= b->v.d; DISPATCH();
	L_DIV_DYN:
		BINARY();
		if (a->type == TM_TQL_INT && b->type == TM_TQL_INT) {
			if (b->v.i == 0)
				set_unknown(a, TM_TQL_DIV_ZERO);
			else if (b->v.i == -1 && a->v.i == INT64_MIN)
				set_unknown(a, TM_TQL_OVERFLOW);
			else
				a->v.i /= b->v.i;
		} else if (dyn_number(a) && dyn_number(b)) {
			set_num(a, dyn_to_double(a) / dyn_to_double(b));
		} else {
			set_unknown(a, 0);
		}
		DISPATCH();
	L_SELECT: {
		struct tm_tql_value *c = sp - 3;

		sp -= 2;
		if (c->type != TM_TQL_BOOL)
			set_unknown(c, c->type == TM_TQL_UNKNOWN ? c->unknown_reason : 0);
		else
			*c = c->v.b ? c[1] : c[2];
		DISPATCH();
	}
	L_SHAPE_AT:
		BINARY();
		if (a->type != TM_TQL_SHAPE || b->type != TM_TQL_INT)
			set_unknown(a, 0);
		else if (b->v.i < 0 || b->v.i >= a->v.shape.rank)
			set_unknown(a, TM_TQL_RANGE);
		else
			set_int(a, a->v.shape.dims[b->v.i]);
		DISPATCH();
	L_ELEM: {
		struct tm_tql_value *x = sp - in.a;
		const struct tm_tensor *t = ctx ? ctx->tensor : NULL;
		uint64_t off = 0;
		uint32_t k, why = 0;
		int bad = 0;

		for (k = 0; k < in.a; k++) {
			if (x[k].type == TM_TQL_UNKNOWN) {
				why |= x[k].unknown_reason;
				bad = 1;
			} else if (x[k].type != TM_TQL_INT) {
				why |= TM_TQL_RANGE;
				bad = 1;
			}
		}
		if (bad) {
			sp = x + 1;
			set_unknown(x, why);
			DISPATCH();
		}
		if (!t || !t->payload)
			why = TM_TQL_NO_PAYLOAD;
		if (!why && in.a != t->rank)
			why = TM_TQL_RANGE;
		for (k = 0; !why && k < in.a; k++) {
			if (x[k].v.i < 0 || x[k].v.i >= t->shape[k])
				why = TM_TQL_RANGE;
			else
				off = off * (uint64_t)t->shape[k] + (uint64_t)x[k].v.i;
		}
		if (!why && (off + 1) * tm_dtype_size(t->dtype) > t->payload_len)
			why = TM_TQL_NO_PAYLOAD;
		sp = x + 1;
		if (why)
			set_unknown(x, why);
		else
			set_num(x, tm_tensor_element(t, off));
		DISPATCH();
	}
	L_MOD_N: BINARY(); a->v.d = fmod_py(a->v.d, b->v.d); DISPATCH();
	L_POW_N: BINARY(); a->v.d = pow(a->v.d, b->v.d); DISPATCH();
	L_NEG_I:
		UNARY();
		if (a->v.i == INT64_MIN)
			set_unknown(a, TM_TQL_OVERFLOW);
		else
			a->v.i = -a->v.i;
		DISPATCH();
	L_NEG_N: UNARY(); a->v.d = -a->v.d; DISPATCH();

	CMP(EQ, I, i, ==) CMP(NE, I, i, !=) CMP(LT, I, i, <)
	CMP(LE, I, i, <=) CMP(GT, I, i, >) CMP(GE, I, i, >=)
	CMP(EQ, N, d, ==) CMP(NE, N, d, !=) CMP(LT, N, d, <)
	CMP(LE, N, d, <=) CMP(GT, N, d, >) CMP(GE, N, d, >=)
	SCMP(EQ, I, ==) SCMP(NE, I, !=) SCMP(LT, I, <)
	SCMP(LE, I, <=) SCMP(GT, I, >) SCMP(GE, I, >=)
	SCMP(EQ, N, ==) SCMP(NE, N, !=) SCMP(LT, N, <)
	SCMP(LE, N, <=) SCMP(GT, N, >) SCMP(GE, N, >=)
	ECMP(EQ, ==) ECMP(NE, !=) ECMP(LT, <)
	ECMP(LE, <=) ECMP(GT, >) ECMP(GE, >=)
	L_EQ_B: BINARY(); set_bool(a, !a->v.b == !b->v.b); DISPATCH();
	L_NE_B: BINARY(); set_bool(a, !a->v.b != !b->v.b); DISPATCH();
	L_EQ_S: BINARY(); set_bool(a, str_eq(a, b)); DISPATCH();
	L_NE_S: BINARY(); set_bool(a, !str_eq(a, b)); DISPATCH();
	L_EQ_SH: BINARY(); set_bool(a, shape_eq(a, b)); DISPATCH();
	L_NE_SH: BINARY(); set_bool(a, !shape_eq(a, b)); DISPATCH();
	L_MATCH: {
		int m;

		BINARY();
		m = glob_match(p, a, b);
		if (m < 0)
			set_unknown(a, 0);
		else
			set_bool(a, m);
		DISPATCH();
	}

	/* Kleene logic: false wins for &&, true for ||. */
	/* an annotation that is absent ("not recorded") is an empty list:
	 * no item equals or matches, so `annot.k != "x"` holds */
#define LIST_BINARY() \
	if (sp[-2].type == TM_TQL_UNKNOWN && !sp[-2].unknown_reason && \
	    sp[-1].type != TM_TQL_UNKNOWN) { \
		--sp; \
		set_bool(sp - 1, 0); \
		DISPATCH(); \
	} \
	BINARY()
	L_ANY_EQ_S: LIST_BINARY(); set_bool(a, any_item(p, a, b, 0, in.b)); DISPATCH();
	L_ANY_MATCH: {
		int m;

		LIST_BINARY();
		m = any_item(p, a, b, 1, in.b);
		if (m < 0)
			set_unknown(a, 0);
		else
			set_bool(a, m);
		DISPATCH();
	}

	L_NOT: UNARY(); a->v.b = !a->v.b; DISPATCH();
	L_JFALSE:
		if (sp[-1].type == TM_TQL_BOOL && !sp[-1].v.b)
			ip = code + in.b;
		DISPATCH();
	L_JTRUE:
		if (sp[-1].type == TM_TQL_BOOL && sp[-1].v.b)
			ip = code + in.b;
		DISPATCH();
	L_AND:
		b = --sp;
		a = sp - 1;
		if ((a->type == TM_TQL_BOOL && !a->v.b) ||
		    (b->type == TM_TQL_BOOL && !b->v.b))
			set_bool(a, 0);
		else if (a->type == TM_TQL_BOOL && b->type == TM_TQL_BOOL)
			set_bool(a, 1);
		else
			set_unknown(a, (a->type ? 0 : a->unknown_reason) |
					(b->type ? 0 : b->unknown_reason));
		DISPATCH();
	L_OR:
		b = --sp;
		a = sp - 1;
		if ((a->type == TM_TQL_BOOL && a->v.b) ||
		    (b->type == TM_TQL_BOOL && b->v.b))
			set_bool(a, 1);
		else if (a->type == TM_TQL_BOOL && b->type == TM_TQL_BOOL)
			set_bool(a, 0);
		else
			set_unknown(a, (a->type ? 0 : a->unknown_reason) |
					(b->type ? 0 : b->unknown_reason));
		DISPATCH();

	L_ABS_I:
		UNARY();
		if (a->v.i == INT64_MIN)
			set_unknown(a, 0);
		else if (a->v.i < 0)
			a->v.i = -a->v.i;
		DISPATCH();
	L_ABS_N: UNARY(); a->v.d = fabs(a->v.d); DISPATCH();
	L_SQRT: UNARY(); a->v.d = sqrt(a->v.d); DISPATCH();
	L_LOG: UNARY(); a->v.d = log(a->v.d); DISPATCH();
	L_LOG2: UNARY(); a->v.d = log2(a->v.d); DISPATCH();
	L_LOG10: UNARY(); a->v.d = log10(a->v.d); DISPATCH();
	L_EXP: UNARY(); a->v.d = exp(a->v.d); DISPATCH();
	L_MIN_I: BINARY(); if (b->v.i < a->v.i) a->v.i = b->v.i; DISPATCH();
	L_MAX_I: BINARY(); if (b->v.i > a->v.i) a->v.i = b->v.i; DISPATCH();
	/* NaN in, NaN out: a NaN must not hide behind min/max */
	L_MIN_N:
		BINARY();
		if (isnan(b->v.d) || b->v.d < a->v.d)
			a->v.d = isnan(a->v.d) ? a->v.d : b->v.d;
		DISPATCH();
	L_MAX_N:
		BINARY();
		if (isnan(b->v.d) || b->v.d > a->v.d)
			a->v.d = isnan(a->v.d) ? a->v.d : b->v.d;
		DISPATCH();
	L_ISNAN: UNARY(); set_bool(a, isnan(a->v.d)); DISPATCH();
	L_ISINF: UNARY(); set_bool(a, isinf(a->v.d)); DISPATCH();
	L_ISFINITE: UNARY(); set_bool(a, isfinite(a->v.d)); DISPATCH();
	L_CALL: {
		struct tm_tql_value r;
		uint32_t i, reason = 0;
		int unk = 0;

		sp -= in.a;
		for (i = 0; i < in.a; i++)
			if (sp[i].type == TM_TQL_UNKNOWN) {
				unk = 1;
				reason |= sp[i].unknown_reason;
			}
		if (unk)
			set_unknown(&r, reason);
		else
			tql_ext_call(p->ext[in.b], sp, &r);
		*sp++ = r;
		DISPATCH();
	}

	L_RANKS_MAX:
	L_RANKS_MIN:
	L_RANKS_SPREAD:
		rank_fold(p, ctx, in.op, in.b, in.a, sp);
		sp++;
		DISPATCH();

	L_HKEY:
		row = hist_row(p, ctx);
		DISPATCH();
	L_HSAVE:
		a = --sp;
		p->cur[in.b] = *a;
		if (row) {
			p->prev[in.b] = row[in.b];
			row[in.b] = *a;
		} else {
			set_unknown(&p->prev[in.b], 0);
		}
		DISPATCH();
	L_LOAD_CUR:
		*sp++ = p->cur[in.b];
		DISPATCH();
	L_LOAD_PREV:
		*sp++ = p->prev[in.b];
		DISPATCH();

	L_RET:
		*out = sp[-1];
		return;
#undef BINARY
#undef UNARY
#undef CMP
#undef SCMP
#undef ECMP
#undef DISPATCH
}

int tm_tql_eval(tm_tql_prog *p, const struct tm_tql_ctx *ctx,
		struct tm_tql_value *out)
{
	if (!p || !out || !p->code)
		return TM_ERR_INVALID_ARG;
	tql_run(p, p->code, ctx, out);
	return TM_OK;
}

int tm_tql_test(tm_tql_prog *p, const struct tm_tql_ctx *ctx)
{
	struct tm_tql_value v;

	if (TM_UNLIKELY(!p || !p->code))
		return -1;
	tql_run(p, p->code, ctx, &v);
	switch (v.type) {
	case TM_TQL_BOOL: return v.v.b != 0;
	case TM_TQL_INT: return v.v.i != 0;
	case TM_TQL_NUM: return isnan(v.v.d) ? -1 : v.v.d != 0;
	default: return -1;
	}
}

/* ---------------------------------------------------------------- printing */

/*
 * The fewest significant digits that read back as the same double, shown
 * the way %g would with at least 6 digits of room: "10", "15000", "0.1",
 * "1.4142135623730951", "1e+06", "2.5e-07".
 */
static int format_double(double d, char *buf, size_t len)
{
	char tmp[64];
	int prec, x, room;
	const char *e;

	if (isnan(d))
		return snprintf(buf, len, "nan");
	if (isinf(d))
		return snprintf(buf, len, d < 0 ? "-inf" : "inf");
	for (prec = 1; prec < 17; prec++) {
		snprintf(tmp, sizeof(tmp), "%.*e", prec - 1, d);
		if (strtod(tmp, NULL) == d)
			break;
	}
	snprintf(tmp, sizeof(tmp), "%.*e", prec - 1, d);
	e = strchr(tmp, 'e');
	x = e ? atoi(e + 1) : 0;
	room = prec > 6 ? prec : 6;
	if (x >= -4 && x < room)
		return snprintf(buf, len, "%.*f", prec - 1 - x > 0 ? prec - 1 - x : 0, d);
	return snprintf(buf, len, "%s", tmp);
}

int tm_tql_reason_format(uint32_t reason, char *buf, size_t len)
{
	static const struct { uint32_t bit; const char *word; } own[] = {
		{ TM_TQL_NO_FINITE, "no finite elements" },
		{ TM_TQL_OVERFLOW, "integer overflow" },
		{ TM_TQL_DIV_ZERO, "division by zero" },
		{ TM_REF_NONE, "no reference" },
		{ TM_REF_NO_NODE, "no reference node" },
		{ TM_REF_NO_EVENT, "no reference event" },
		{ TM_REF_UNMAPPED, "unmapped" },
		{ TM_REF_BATCH, "batched differently" },
		{ TM_TQL_SHAPES, "shapes differ" },
		{ TM_TQL_RANGE, "index out of range" },
		{ TM_TQL_NO_PAYLOAD, "contents not captured" },
		{ TM_TQL_VOID, "void" },
	};
	uint32_t gap = reason & (uint32_t)TM_GAP__ALL;
	size_t i, off;
	int n;

	if (!buf || !len)
		return TM_ERR_INVALID_ARG;
	buf[0] = 0;
	if (!(reason & ((uint32_t)TM_GAP__ALL | TM_TQL_NO_FINITE | TM_TQL_OVERFLOW |
			TM_TQL_DIV_ZERO | TM_REF__ALL | TM_TQL_SHAPES | TM_TQL_RANGE |
			TM_TQL_NO_PAYLOAD | TM_TQL_VOID))) {
		n = snprintf(buf, len, "not recorded");
		return n < 0 || (size_t)n >= len ? TM_ERR_INVALID_ARG : TM_OK;
	}
	if (gap && tm_gap_reason_format(gap, buf, len) != TM_OK)
		return TM_ERR_INVALID_ARG;
	for (i = 0; i < TM_ARRAY_LEN(own); i++) {
		if (!(reason & own[i].bit))
			continue;
		off = strlen(buf);
		n = snprintf(buf + off, len - off, "%s%s", off ? "|" : "", own[i].word);
		if (n < 0 || (size_t)n >= len - off)
			return TM_ERR_INVALID_ARG;
	}
	return TM_OK;
}

int tm_tql_value_format(const struct tm_tql_value *v, char *buf, size_t len)
{
	size_t used = 0, i;
	int n = 0;

	if (!v || !buf || !len)
		return TM_ERR_INVALID_ARG;
	switch (v->type) {
	case TM_TQL_UNKNOWN: {
		char why[96];

		if (v->unknown_reason == TM_TQL_VOID)
			n = snprintf(buf, len, "void");
		else if (v->unknown_reason &&
		    tm_tql_reason_format(v->unknown_reason, why, sizeof(why)) == TM_OK)
			n = snprintf(buf, len, "<unknown: %s>", why);
		else
			n = snprintf(buf, len, "<unknown>");
		break;
	}
	case TM_TQL_BOOL:
		n = snprintf(buf, len, "%s", v->v.b ? "true" : "false");
		break;
	case TM_TQL_INT:
		n = snprintf(buf, len, "%lld", (long long)v->v.i);
		break;
	case TM_TQL_NUM:
		n = format_double(v->v.d, buf, len);
		break;
	case TM_TQL_STR:
		/* quoted, with the escapes the lexer reads back */
		if (len < 3)
			return TM_ERR_INVALID_ARG;
		buf[used++] = '"';
		for (i = 0; i < v->v.str.len; i++) {
			char c = v->v.str.s[i], e = 0;

			if (c == '"' || c == '\\')
				e = c;
			else if (c == '\n')
				e = 'n';
			else if (c == '\t')
				e = 't';
			if (used + (e ? 2 : 1) + 2 > len)
				return TM_ERR_INVALID_ARG;
			if (e) {
				buf[used++] = '\\';
				buf[used++] = e;
			} else {
				buf[used++] = c;
			}
		}
		buf[used++] = '"';
		buf[used] = '\0';
		return TM_OK;
	case TM_TQL_SHAPE:
		n = snprintf(buf, len, "[");
		for (i = 0; i < v->v.shape.rank && n >= 0 && (size_t)n < len; i++)
			n += snprintf(buf + n, len - (size_t)n, "%s%lld", i ? ", " : "",
				      (long long)v->v.shape.dims[i]);
		if (n >= 0 && (size_t)n < len)
			n += snprintf(buf + n, len - (size_t)n, "]");
		break;
	case TM_TQL_LIST:
		n = snprintf(buf, len, "[");
		for (i = 0; i < v->v.list.n && n >= 0 && (size_t)n < len; i++)
			n += snprintf(buf + n, len - (size_t)n, "%s\"%s\"", i ? ", " : "",
				      v->v.list.items[i]);
		if (n >= 0 && (size_t)n < len && v->v.list.count > v->v.list.n)
			n += snprintf(buf + n, len - (size_t)n, "%s... (%u more)",
				      v->v.list.n ? ", " : "",
				      v->v.list.count - v->v.list.n);
		if (n >= 0 && (size_t)n < len)
			n += snprintf(buf + n, len - (size_t)n, "]");
		break;
	default:
		return TM_ERR_INVALID_ARG;
	}
	return n < 0 || (size_t)n >= len ? TM_ERR_INVALID_ARG : TM_OK;
}

/* ---------------------------------------------------------------- listing */

static const char *const tf_names[] = { "shape", "dtype", "rank", "numel" };
static const char *const ef_names[EF__COUNT] = {
	[EF_STEP] = "step", [EF_SEQ] = "seq", [EF_TIME] = "time", [EF_PHASE] = "phase",
	[EF_NODE_PATH] = "node.path", [EF_NODE_TYPE] = "node.type",
	[EF_NODE_DEPTH] = "node.depth", [EF_RANK] = "rank", [EF_REQUEST] = "request",
	[EF_REQUEST_COUNT] = "request.count",
	[EF_OP_NAME] = "op.name", [EF_OP_INDEX] = "op.index", [EF_OP_LINE] = "op.line",
	[EF_OP_FILE] = "op.file", [EF_OP_INPUTS_FINITE] = "op.inputs_finite",
	[EF_OP_MADE_NONFINITE] = "op.made_nonfinite",
	[EF_CALL] = "call", [EF_SCALER_SCALE] = "scaler.scale",
	[EF_SCALER_SKIPPED] = "scaler.skipped", [EF_ANNOT] = "annot",
	[EF_EVENT] = "event", [EF_EXC_TYPE] = "exception.type",
	[EF_EXC_MESSAGE] = "exception.message",
};

/*
 *    0  STAT_I      tensor.nan_count
 *    1  CONST       0
 *    2  GT_I
 *    3  JFALSE      -> 7
 */
int tm_tql_disassemble(const tm_tql_prog *p, FILE *out)
{
	uint32_t i;

	if (!p || !out)
		return TM_ERR_INVALID_ARG;
	for (i = 0; i < p->ncode; i++) {
		const struct tql_insn *in = &p->code[i];
		char opnd[TM_ADDRESS_MAX + 64], val[128];

		opnd[0] = '\0';
		switch (op_info[in->op].operand) {
		case OPND_K:
			if (tm_tql_value_format(&p->k[in->b], val, sizeof(val)))
				snprintf(val, sizeof(val), "...");
			snprintf(opnd, sizeof(opnd), "%s", val);
			break;
		case OPND_STAT:
			snprintf(opnd, sizeof(opnd), "tensor.%s", tm_stat_table[in->a].name);
			break;
		case OPND_SK:
			if (tm_tql_value_format(&p->k[in->b], val, sizeof(val)))
				snprintf(val, sizeof(val), "...");
			snprintf(opnd, sizeof(opnd), "tensor.%s, %s",
				 tm_stat_table[in->a].name, val);
			break;
		case OPND_TF:
			snprintf(opnd, sizeof(opnd), "tensor.%s",
				 in->a >= TF_SHAPE && in->a < TF__END ?
				 tf_names[in->a - TF_SHAPE] : tm_stat_table[in->a].name);
			break;
		case OPND_EK:
			if (tm_tql_value_format(&p->k[in->b], val, sizeof(val)))
				snprintf(val, sizeof(val), "...");
			snprintf(opnd, sizeof(opnd), "%s, %s", ef_names[in->a], val);
			break;
		case OPND_EF:
			if (in->a == EF_ANNOT)
				snprintf(opnd, sizeof(opnd), "annot.%s", p->pool + in->b);
			else
				snprintf(opnd, sizeof(opnd), "%s", ef_names[in->a]);
			break;
		case OPND_ADDR:
			snprintf(opnd, sizeof(opnd), "%s (node %u)", p->addrs[in->b].text,
				 p->addrs[in->b].node);
			break;
		case OPND_VAR:
			snprintf(opnd, sizeof(opnd), "$%s", p->pool + in->b);
			break;
		case OPND_SITE:
			snprintf(opnd, sizeof(opnd), "site %u", in->b);
			break;
		case OPND_JUMP:
			snprintf(opnd, sizeof(opnd), "-> %u", in->b);
			break;
		case OPND_FUNC:
			snprintf(opnd, sizeof(opnd), "%s/%u", tql_ext_name(p->ext[in->b]), in->a);
			break;
		case OPND_COUNT:
			snprintf(opnd, sizeof(opnd), "%u", in->a);
			break;
		case OPND_RSET:
			/* the first and last rank's terms: a world of 4096 ranks
			 * would not fit a line */
			if (in->a == 1)
				snprintf(opnd, sizeof(opnd), "%.*s (1 rank)", TM_ADDRESS_MAX / 2,
					 p->addrs[in->b].text);
			else
				snprintf(opnd, sizeof(opnd), "%.*s .. %.*s (%u ranks)",
					 TM_ADDRESS_MAX / 2, p->addrs[in->b].text,
					 TM_ADDRESS_MAX / 2, p->addrs[in->b + in->a - 1].text,
					 in->a);
			break;
		default:
			break;
		}
		if (opnd[0])
			fprintf(out, "%4u  %-10s  %s\n", i, tql_op_name(in->op), opnd);
		else
			fprintf(out, "%4u  %s\n", i, tql_op_name(in->op));
	}
	return ferror(out) ? TM_ERR_IO : TM_OK;
}
