/*
 * tql-compile.c -- from a TQL syntax tree to a program the VM runs.
 *
 * The checker walks the tree once: it resolves names (fields, addressed
 * terms against the node table, functions), gives every node a static type,
 * reports every type error it finds (an erroneous node gets T_ERR, which
 * silences errors about its parents so one mistake is reported once) and
 * folds constant subtrees by running their code on the VM itself, so folding
 * and evaluation can never disagree.  The generator then emits typed
 * instructions: the VM never dispatches on types, it only notices *unknown*.
 *
 * prev(x) and delta(x) must see x at every event, even when a short-circuit
 * skips the call this time, so each call site's argument is compiled into a
 * prologue that runs first; the body reads the saved values.
 *
 * This file also owns the public entry points: compile, free, the error
 * report (line, column, source line, caret), and the field-name list.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tm-address.h"
#include "tql-int.h"

/* ---------------------------------------------------------------- names */

/* the first N_TENSOR_FIELDS are the tensor's */
#define N_TENSOR_FIELDS 15
static const char *const field_names[] = {
	"tensor.numel", "tensor.nan_count", "tensor.inf_count",
	"tensor.posinf_count", "tensor.neginf_count", "tensor.min", "tensor.max",
	"tensor.mean", "tensor.abs_max", "tensor.l2", "tensor.std",
	"tensor.zero_count", "tensor.shape", "tensor.dtype", "tensor.rank",
	"node.path", "node.type", "node.depth",
	"step", "phase", "seq", "time", "rank", "request", "request.count",
	"call", "scaler.scale", "scaler.skipped", "event", "exception.type",
	"exception.message",
	NULL
};

const char *const *tm_tql_field_names(void)
{
	return field_names;
}

static const char *const efield_names[EF__COUNT] = {
	[EF_STEP] = "step", [EF_SEQ] = "seq", [EF_TIME] = "time",
	[EF_PHASE] = "phase", [EF_NODE_PATH] = "node.path",
	[EF_NODE_TYPE] = "node.type", [EF_NODE_DEPTH] = "node.depth",
	[EF_RANK] = "rank", [EF_REQUEST] = "request",
	[EF_REQUEST_COUNT] = "request.count",
	[EF_OP_NAME] = "op.name", [EF_OP_INDEX] = "op.index",
	[EF_OP_LINE] = "op.line", [EF_OP_FILE] = "op.file",
	[EF_OP_INPUTS_FINITE] = "op.inputs_finite",
	[EF_OP_MADE_NONFINITE] = "op.made_nonfinite",
	[EF_CALL] = "call",
	[EF_SCALER_SCALE] = "scaler.scale", [EF_SCALER_SKIPPED] = "scaler.skipped",
	[EF_ANNOT] = "annot", [EF_EVENT] = "event",
	[EF_EXC_TYPE] = "exception.type", [EF_EXC_MESSAGE] = "exception.message",
};

enum {
	B_ABS = 0, B_SQRT, B_LOG, B_LOG2, B_LOG10, B_EXP, B_MIN, B_MAX,
	B_ISNAN, B_ISINF, B_ISFINITE, B_PREV, B_DELTA, B_SPREAD,
	B_RELDIFF, B_MAXABSDIFF, B_RELERR, B_COSINE, B__COUNT
};

static const struct {
	const char *name;
	uint8_t min, max;       /* argument count; max 0: any */
} builtins[B__COUNT] = {
	[B_ABS] = { "abs", 1, 1 }, [B_SQRT] = { "sqrt", 1, 1 },
	[B_LOG] = { "log", 1, 1 }, [B_LOG2] = { "log2", 1, 1 },
	[B_LOG10] = { "log10", 1, 1 }, [B_EXP] = { "exp", 1, 1 },
	[B_MIN] = { "min", 1, 0 }, [B_MAX] = { "max", 1, 0 },
	[B_ISNAN] = { "isnan", 1, 1 }, [B_ISINF] = { "isinf", 1, 1 },
	[B_ISFINITE] = { "isfinite", 1, 1 },
	[B_PREV] = { "prev", 1, 1 }, [B_DELTA] = { "delta", 1, 1 },
	[B_SPREAD] = { "spread", 1, 1 },
	/* a run beside a reference: max 0 with min 0 is checked as "none" */
	[B_RELDIFF] = { "reldiff", 2, 2 }, [B_MAXABSDIFF] = { "maxabsdiff", 0, 0 },
	[B_RELERR] = { "relerr", 0, 0 }, [B_COSINE] = { "cosine", 0, 0 },
};

int tql_builtin_find(const char *name, size_t len)
{
	int i;

	for (i = 0; i < B__COUNT; i++)
		if (strlen(builtins[i].name) == len && !memcmp(builtins[i].name, name, len))
			return i;
	return -1;
}

size_t tql_edit_distance(const char *a, size_t alen, const char *b, size_t blen)
{
	size_t row[64], i, j;

	if (alen >= TM_ARRAY_LEN(row) || blen >= TM_ARRAY_LEN(row))
		return (size_t)-1;
	for (j = 0; j <= blen; j++)
		row[j] = j;
	for (i = 1; i <= alen; i++) {
		size_t diag = row[0], best;

		row[0] = i;
		for (j = 1; j <= blen; j++) {
			size_t up = row[j];

			best = diag + (a[i - 1] != b[j - 1]);
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[blen];
}

/* The closest of names[] to s within a third of its length, or NULL. */
static const char *closest(const char *s, size_t len, const char *const *names, size_t n)
{
	const char *best = NULL;
	size_t bd = len / 3 + 1, i;

	if (bd > 3)
		bd = 3;
	for (i = 0; i < n && names[i]; i++) {
		size_t d = tql_edit_distance(s, len, names[i], strlen(names[i]));

		if (d <= bd && (!best || d < bd)) {
			best = names[i];
			bd = d;
		}
	}
	return best;
}

static const char *type_name(int t)
{
	switch (t) {
	case TM_TQL_BOOL: return "a boolean";
	case TM_TQL_INT: return "an integer";
	case TM_TQL_NUM: return "a number";
	case TM_TQL_STR: return "a string";
	case TM_TQL_SHAPE: return "a shape";
	case TM_TQL_LIST: return "a list of request ids";
	case T_DYN: return "a variable";
	default: return "unknown";
	}
}

static int is_numeric(int t)
{
	return t == TM_TQL_INT || t == TM_TQL_NUM || t == T_DYN;
}

/* ---------------------------------------------------------------- errors */

void tql_error(struct tql_cc *cc, uint32_t pos, uint32_t lo0, uint32_t hi0,
	       uint32_t lo1, uint32_t hi1, const char *fmt, ...)
{
	struct tql_err *e;
	va_list ap;

	if (cc->nerrs >= TQL_MAX_ERRORS) {
		cc->fatal = 1;
		return;
	}
	/* a second complaint at the same place is a consequence of the first */
	if (cc->nerrs && cc->errs[cc->nerrs - 1].pos == pos)
		return;
	e = &cc->errs[cc->nerrs++];
	e->pos = pos;
	e->lo[0] = lo0;
	e->hi[0] = hi0;
	e->lo[1] = lo1;
	e->hi[1] = hi1;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
}

/*
 * One error as the compiler prints it:
 *     tql:1:18: error: MESSAGE
 *     tensor.nan_count > "x"
 *     ~~~~~~~~~~~~~~~~ ^ ~~~
 * The caret line copies tabs from the source so it lines up in a terminal.
 */
static void format_error(const struct tql_cc *cc, const struct tql_err *e, FILE *f)
{
	uint32_t ls = 0, le, line = 1, i, last;

	for (i = 0; i < e->pos && i < cc->len; i++)
		if (cc->src[i] == '\n') {
			line++;
			ls = i + 1;
		}
	for (le = ls; le < cc->len && cc->src[le] != '\n'; le++)
		;
	fprintf(f, "tql:%u:%u: error: %s\n", line, e->pos - ls + 1, e->msg);
	fwrite(cc->src + ls, 1, le - ls, f);
	fputc('\n', f);
	/* last column that gets a mark: ranges end at the line's end, the
	 * caret may sit just past it (an error at the end of the input) */
	last = e->pos;
	for (i = 0; i < 2; i++) {
		uint32_t end = e->hi[i] < le ? e->hi[i] : le;

		if (end > e->lo[i] && end - 1 > last)
			last = end - 1;
	}
	for (i = ls; i <= last; i++) {
		int in = (i >= e->lo[0] && i < e->hi[0]) || (i >= e->lo[1] && i < e->hi[1]);

		if (i == e->pos)
			fputc('^', f);
		else if (in)
			fputc('~', f);
		else
			fputc(i < le && cc->src[i] == '\t' ? '\t' : ' ', f);
	}
	fputc('\n', f);
}

static char *format_errors(struct tql_cc *cc)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f;
	int i, j;

	/* by position, stable: parse and check errors interleave */
	for (i = 1; i < cc->nerrs; i++) {
		struct tql_err e = cc->errs[i];

		for (j = i; j > 0 && cc->errs[j - 1].pos > e.pos; j--)
			cc->errs[j] = cc->errs[j - 1];
		cc->errs[j] = e;
	}
	f = open_memstream(&buf, &len);
	if (!f)
		return NULL;
	for (i = 0; i < cc->nerrs; i++) {
		if (i && cc->errs[i].pos == cc->errs[i - 1].pos &&
		    !strcmp(cc->errs[i].msg, cc->errs[i - 1].msg))
			continue;
		format_error(cc, &cc->errs[i], f);
	}
	if (cc->nerrs >= TQL_MAX_ERRORS)
		fprintf(f, "tql: too many errors, stopped\n");
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* ---------------------------------------------------------------- emitting */

struct tql_gen {
	struct tql_cc *cc;
	tm_tql_prog *p;
	uint32_t cap, kcap;
	int depth, maxdepth;
	uint32_t nmemo;
};

/* A memo slot for a list test whose string s is a constant, else none. */
static uint32_t memo_slot(struct tql_gen *g, const struct tql_node *s)
{
	if (s->kind != N_CONST || g->nmemo >= TQL_MEMOS)
		return UINT32_MAX;
	return g->nmemo++;
}

static uint32_t emit(struct tql_gen *g, int op, uint32_t a, uint32_t b)
{
	tm_tql_prog *p = g->p;
	int pops = tql_op_pops(op);

	if (p->ncode >= g->cap) {
		uint32_t ncap = g->cap ? g->cap * 2 : 32;
		struct tql_insn *c;

		if (ncap > TQL_MAX_CODE) {
			if (!g->cc->nomem)
				tql_error(g->cc, 0, 0, g->cc->len, 0, 0,
					  "expression too large (over %d instructions)",
					  TQL_MAX_CODE);
			g->cc->nomem = 2;
			return 0;
		}
		c = realloc(p->code, ncap * sizeof(*c));
		if (!c) {
			g->cc->nomem = 1;
			return 0;
		}
		p->code = c;
		g->cap = ncap;
	}
	p->code[p->ncode].op = (uint16_t)op;
	p->code[p->ncode].a = (uint16_t)a;
	p->code[p->ncode].b = b;
	g->depth -= pops < 0 ? (int)a : pops;
	g->depth += tql_op_pushes(op);
	if (g->depth > g->maxdepth)
		g->maxdepth = g->depth;
	return p->ncode++;
}

static uint32_t add_const(struct tql_gen *g, const struct tm_tql_value *v)
{
	tm_tql_prog *p = g->p;

	if (p->nk >= g->kcap) {
		uint32_t ncap = g->kcap ? g->kcap * 2 : 8;
		struct tm_tql_value *k = realloc(p->k, ncap * sizeof(*k));

		if (!k) {
			g->cc->nomem = 1;
			return 0;
		}
		p->k = k;
		g->kcap = ncap;
	}
	p->k[p->nk] = *v;
	return p->nk++;
}

/* Converts the value on top of the stack from type `from` to `to`. */
static void conv(struct tql_gen *g, int from, int to)
{
	if (from == to)
		return;
	if (from == TM_TQL_INT && to == TM_TQL_NUM) {
		emit(g, OP_TONUM, 0, 0);
		return;
	}
	if (from != T_DYN)
		return;
	switch (to) {
	case TM_TQL_NUM: emit(g, OP_DYN_NUM, 0, 0); break;
	case TM_TQL_INT: emit(g, OP_DYN_INT, 0, 0); break;
	case TM_TQL_BOOL: emit(g, OP_DYN_BOOL, 0, 0); break;
	case TM_TQL_STR: emit(g, OP_DYN_STR, 0, 0); break;
	case TM_TQL_SHAPE: emit(g, OP_DYN_SHAPE, 0, 0); break;
	}
}

/* The type both operands of a comparison are brought to. */
static int cmp_type(int a, int b)
{
	if (a == TM_TQL_INT && b == TM_TQL_INT)
		return TM_TQL_INT;
	if (is_numeric(a) && is_numeric(b))
		return TM_TQL_NUM;
	return a == T_DYN ? b : a;
}

/* The type of + - * %: integer when both are, else number. */
static int arith_type(int op, int a, int b)
{
	if (op == TK_POW)
		return TM_TQL_NUM;
	/* C's division: integer when both are; a variable decides at run time */
	if (op == TK_SLASH && ((a == T_DYN && (b == T_DYN || b == TM_TQL_INT)) ||
			       (b == T_DYN && a == TM_TQL_INT)))
		return T_DYN;
	return a == TM_TQL_INT && b == TM_TQL_INT ? TM_TQL_INT : TM_TQL_NUM;
}

static void gen(struct tql_gen *g, const struct tql_node *n);

static void gen_conv(struct tql_gen *g, const struct tql_node *n, int to)
{
	/* an integer constant used as a number is converted now */
	if (n->kind == N_CONST && n->type == TM_TQL_INT && to == TM_TQL_NUM) {
		struct tm_tql_value v = n->val;

		if (v.type == TM_TQL_INT) {
			v.type = TM_TQL_NUM;
			v.v.d = (double)n->val.v.i;
		}
		emit(g, OP_CONST, 0, add_const(g, &v));
		return;
	}
	gen(g, n);
	conv(g, n->type, to);
}

static void gen_binary(struct tql_gen *g, const struct tql_node *n)
{
	int ta = n->a->type, tb = n->b->type, t;
	uint32_t j;

	switch (n->op) {
	case TK_AND:
	case TK_OR:
		gen_conv(g, n->a, TM_TQL_BOOL);
		j = emit(g, n->op == TK_AND ? OP_JFALSE : OP_JTRUE, 0, 0);
		gen_conv(g, n->b, TM_TQL_BOOL);
		emit(g, n->op == TK_AND ? OP_AND : OP_OR, 0, 0);
		if (g->p->code)
			g->p->code[j].b = g->p->ncode;
		return;
	case TK_PLUS: case TK_MINUS: case TK_STAR: case TK_SLASH:
	case TK_PERCENT: case TK_POW: {
		static const uint8_t iop[] = {
			[TK_PLUS] = OP_ADD_I, [TK_MINUS] = OP_SUB_I,
			[TK_STAR] = OP_MUL_I, [TK_SLASH] = OP_DIV_I,
			[TK_PERCENT] = OP_MOD_I,
		};
		static const uint8_t nop[] = {
			[TK_PLUS] = OP_ADD_N, [TK_MINUS] = OP_SUB_N,
			[TK_STAR] = OP_MUL_N, [TK_SLASH] = OP_DIV_N,
			[TK_PERCENT] = OP_MOD_N, [TK_POW] = OP_POW_N,
		};

		t = arith_type(n->op, ta, tb);
		if (t == T_DYN) {
			gen(g, n->a);
			gen(g, n->b);
			emit(g, OP_DIV_DYN, 0, 0);
			return;
		}
		gen_conv(g, n->a, t);
		gen_conv(g, n->b, t);
		emit(g, t == TM_TQL_INT ? iop[n->op] : nop[n->op], 0, 0);
		return;
	}
	case TK_MATCH:
		gen_conv(g, n->a, ta == TM_TQL_LIST ? TM_TQL_LIST : TM_TQL_STR);
		gen_conv(g, n->b, TM_TQL_STR);
		if (ta == TM_TQL_LIST)
			emit(g, OP_ANY_MATCH, 0, memo_slot(g, n->b));
		else
			emit(g, OP_MATCH, 0, 0);
		return;
	default: {
		/* comparisons: EQ NE LT LE GT GE in token order */
		int k = n->op - TK_EQ, base;

		if (ta == TM_TQL_LIST || tb == TM_TQL_LIST) {
			/* == / != only (checked): the list first, whichever
			 * side it was written on */
			gen_conv(g, ta == TM_TQL_LIST ? n->a : n->b, TM_TQL_LIST);
			gen_conv(g, ta == TM_TQL_LIST ? n->b : n->a, TM_TQL_STR);
			emit(g, OP_ANY_EQ_S, 0,
			     memo_slot(g, ta == TM_TQL_LIST ? n->b : n->a));
			if (n->op == TK_NE)
				emit(g, OP_NOT, 0, 0);
			return;
		}
		t = cmp_type(ta, tb);
		switch (t) {
		case TM_TQL_INT: base = OP_EQ_I; break;
		case TM_TQL_STR: base = OP_EQ_S; break;
		case TM_TQL_BOOL: base = OP_EQ_B; break;
		case TM_TQL_SHAPE: base = OP_EQ_SH; break;
		default: base = OP_EQ_N; break;
		}
		gen_conv(g, n->a, t);
		if ((t == TM_TQL_INT || t == TM_TQL_NUM) && n->b->kind == N_CONST &&
		    n->b->val.type != TM_TQL_UNKNOWN) {
			/* x OP constant: one instruction instead of two */
			struct tm_tql_value v = n->b->val;
			int sop = t == TM_TQL_INT ? OP_STAT_I : OP_STAT_N;

			if (t == TM_TQL_NUM && v.type == TM_TQL_INT) {
				v.type = TM_TQL_NUM;
				v.v.d = (double)n->b->val.v.i;
			}
			/* tensor.STAT OP constant: one instruction for all of it */
			if (g->p->ncode && n->a->kind == N_WORD && n->a->res == R_TENSOR &&
			    n->a->aux < TM_STAT__COUNT && n->a->aux != TM_STAT_NUMEL &&
			    (tm_stat_table[n->a->aux].integer ? TM_TQL_INT : TM_TQL_NUM) == t &&
			    g->p->code[g->p->ncode - 1].op == sop) {
				g->p->ncode--;
				g->depth--;
				emit(g, (t == TM_TQL_INT ? OP_STAT_EQ_IK : OP_STAT_EQ_NK) + k,
				     (uint16_t)n->a->aux, add_const(g, &v));
				return;
			}
			/* step/seq/time/node.depth OP integer constant: likewise */
			if (t == TM_TQL_INT && g->p->ncode && n->a->kind == N_WORD &&
			    n->a->res == R_EVENT && g->p->code[g->p->ncode - 1].op == OP_EFIELD) {
				g->p->ncode--;
				g->depth--;
				emit(g, OP_EV_EQ_IK + k, (uint16_t)n->a->aux, add_const(g, &v));
				return;
			}
			emit(g, (t == TM_TQL_INT ? OP_EQ_IK : OP_EQ_NK) + k, 0,
			     add_const(g, &v));
			return;
		}
		gen_conv(g, n->b, t);
		emit(g, base + k, 0, 0);
		return;
	}
	}
}

static void gen_call(struct tql_gen *g, const struct tql_node *n)
{
	const struct tql_node *x;
	int t;

	switch (n->res) {
	case R_PREV:
		emit(g, OP_LOAD_PREV, 0, n->aux);
		return;
	case R_DELTA:
		emit(g, OP_LOAD_CUR, 0, n->aux);
		emit(g, OP_LOAD_PREV, 0, n->aux);
		emit(g, n->type == TM_TQL_INT ? OP_SUB_I : OP_SUB_N, 0, 0);
		return;
	case R_EXTERN: {
		const struct tql_ext *e = g->p->ext[n->aux];
		int i = 0;

		for (x = n->args; x; x = x->next, i++)
			gen_conv(g, x, tql_ext_arg_type(e, i));
		emit(g, OP_CALL, n->nargs, n->aux);
		return;
	}
	default:
		break;
	}
	switch (n->aux) {
	case B_RELDIFF:
		gen_conv(g, n->args, TM_TQL_NUM);
		gen_conv(g, n->args->next, TM_TQL_NUM);
		emit(g, OP_RELDIFF, 0, 0);
		return;
	case B_MAXABSDIFF:
	case B_RELERR:
	case B_COSINE:
		emit(g, OP_CMP_CONTENTS, (uint16_t)(n->aux - B_MAXABSDIFF), 0);
		return;
	case B_ABS:
		gen_conv(g, n->args, n->type);
		emit(g, n->type == TM_TQL_INT ? OP_ABS_I : OP_ABS_N, 0, 0);
		return;
	case B_MIN:
	case B_MAX:
	case B_SPREAD:
		/* over "@*:": one instruction folds every rank, however many */
		if (n->args->res == R_RANKSET) {
			emit(g, n->aux == B_MIN ? OP_RANKS_MIN :
			     n->aux == B_MAX ? OP_RANKS_MAX : OP_RANKS_SPREAD,
			     n->args->nargs, n->args->aux);
			return;
		}
		t = n->type;
		gen_conv(g, n->args, t);
		for (x = n->args->next; x; x = x->next) {
			gen_conv(g, x, t);
			if (n->aux == B_MIN)
				emit(g, t == TM_TQL_INT ? OP_MIN_I : OP_MIN_N, 0, 0);
			else
				emit(g, t == TM_TQL_INT ? OP_MAX_I : OP_MAX_N, 0, 0);
		}
		return;
	default: {
		static const uint8_t ops[B__COUNT] = {
			[B_SQRT] = OP_SQRT, [B_LOG] = OP_LOG, [B_LOG2] = OP_LOG2,
			[B_LOG10] = OP_LOG10, [B_EXP] = OP_EXP, [B_ISNAN] = OP_ISNAN,
			[B_ISINF] = OP_ISINF, [B_ISFINITE] = OP_ISFINITE,
		};

		gen_conv(g, n->args, TM_TQL_NUM);
		emit(g, ops[n->aux], 0, 0);
		return;
	}
	}
}

static void gen(struct tql_gen *g, const struct tql_node *n)
{
	switch (n->kind) {
	case N_CONST:
		emit(g, OP_CONST, 0, add_const(g, &n->val));
		return;
	case N_VAR:
		emit(g, OP_VAR, 0, (uint32_t)(n->word.s - g->p->pool));
		return;
	case N_WORD:
		if (n->res == R_ADDR)
			emit(g, OP_ADDR, 0, n->aux);
		else if (n->res == R_REF)
			emit(g, OP_REF, (uint16_t)n->aux, 0);
		else if (n->res == R_REF_ADDR)
			emit(g, OP_REF_ADDR, 0, n->aux);
		else if (n->res == R_EVENT)
			emit(g, OP_EFIELD, (uint16_t)n->aux,
			     n->aux == EF_ANNOT ? (uint32_t)(n->word.s - g->p->pool) : 0);
		else if (n->aux < TM_STAT__COUNT && n->aux != TM_STAT_NUMEL)
			emit(g, tm_stat_table[n->aux].integer ? OP_STAT_I : OP_STAT_N,
			     (uint16_t)n->aux, 0);
		else
			emit(g, OP_TFIELD, (uint16_t)n->aux, 0);
		return;
	case N_UNARY:
		if (n->op == TK_NOT) {
			gen_conv(g, n->a, TM_TQL_BOOL);
			emit(g, OP_NOT, 0, 0);
		} else if (n->op == TK_MINUS) {
			gen_conv(g, n->a, n->type);
			emit(g, n->type == TM_TQL_INT ? OP_NEG_I : OP_NEG_N, 0, 0);
		} else {
			gen_conv(g, n->a, n->type);
		}
		return;
	case N_BINARY:
		gen_binary(g, n);
		return;
	case N_CALL:
		gen_call(g, n);
		return;
	case N_COND:
		gen_conv(g, n->a, TM_TQL_BOOL);
		gen_conv(g, n->b, n->type);
		gen_conv(g, n->args, n->type);
		emit(g, OP_SELECT, 0, 0);
		return;
	case N_INDEX: {
		const struct tql_node *x;

		if (n->res == R_TENSOR) {
			for (x = n->args; x; x = x->next)
				gen_conv(g, x, TM_TQL_INT);
			emit(g, OP_ELEM, (uint16_t)n->nargs, 0);
		} else {
			gen_conv(g, n->a, TM_TQL_SHAPE);
			gen_conv(g, n->args, TM_TQL_INT);
			emit(g, OP_SHAPE_AT, 0, 0);
		}
		return;
	}
	default:
		/* N_ERROR and N_LIST never reach here: errors stop compilation
		 * and lists fold to shape constants. */
		return;
	}
}

/* ---------------------------------------------------------------- checking */

static int check(struct tql_cc *cc, struct tql_node *n);

/* Replaces a node whose operands are constants by its value, computed by
 * the VM on a scratch program so that folding is exactly evaluation. */
static void fold(struct tql_cc *cc, struct tql_node *n)
{
	struct tm_tql_value stack[16], v;
	struct tql_gen g = { .cc = cc };
	tm_tql_prog *tmp;

	if (cc->nerrs || cc->nomem)
		return;
	tmp = calloc(1, sizeof(*tmp));
	if (!tmp) {
		cc->nomem = 1;
		return;
	}
	tmp->pool = cc->prog->pool;
	g.p = tmp;
	gen(&g, n);
	emit(&g, OP_RET, 0, 0);
	if (!cc->nomem && g.maxdepth <= (int)TM_ARRAY_LEN(stack)) {
		tmp->stack = stack;
		tmp->maxstack = TM_ARRAY_LEN(stack);
		tql_run(tmp, tmp->code, NULL, &v);
		n->kind = N_CONST;
		n->val = v;
	}
	free(tmp->code);
	free(tmp->k);
	tm_address_free(tmp->glob);
	free(tmp);
}

static int all_const(const struct tql_node *n)
{
	const struct tql_node *x;

	if (n->a && n->a->kind != N_CONST)
		return 0;
	if (n->b && n->b->kind != N_CONST)
		return 0;
	for (x = n->args; x; x = x->next)
		if (x->kind != N_CONST)
			return 0;
	return 1;
}

static int word_eq(const struct tql_node *n, size_t off, const char *s)
{
	size_t len = strlen(s);

	return n->word.len - off == len && !memcmp(n->word.s + off, s, len);
}

/* tensor field name (after "tensor.") to stat / TF_*, or -1 */
static int tensor_field(const char *s, size_t len)
{
	static const char *const extra[] = { "shape", "dtype", "rank" };
	int i;

	if (len == 5 && !memcmp(s, "numel", 5))
		return TF_NUMEL;
	for (i = 0; i < TM_STAT__COUNT; i++)
		if (strlen(tm_stat_table[i].name) == len &&
		    !memcmp(tm_stat_table[i].name, s, len))
			return i;
	for (i = 0; i < 3; i++)
		if (strlen(extra[i]) == len && !memcmp(extra[i], s, len))
			return TF_SHAPE + i;
	return -1;
}

static int tensor_field_type(int f)
{
	switch (f) {
	case TF_SHAPE: return TM_TQL_SHAPE;
	case TF_DTYPE: return TM_TQL_STR;
	case TF_RANK: case TF_NUMEL: return TM_TQL_INT;
	default: return tm_stat_table[f].integer ? TM_TQL_INT : TM_TQL_NUM;
	}
}

static void unknown_name(struct tql_cc *cc, struct tql_node *n, const char *what)
{
	const char *s = closest(n->word.s, n->word.len, field_names,
				TM_ARRAY_LEN(field_names));

	if (s)
		tql_error(cc, n->lo, n->lo, n->hi, 0, 0,
			  "unknown %s '%.*s'; did you mean '%s'?", what,
			  (int)n->word.len, n->word.s, s);
	else
		tql_error(cc, n->lo, n->lo, n->hi, 0, 0,
			  "unknown %s '%.*s' (fields: tensor.*, node.path, node.type, "
			  "node.depth, step, phase, seq, time, rank)", what,
			  (int)n->word.len, n->word.s);
}

/* Adds an addressed term to the program's table; returns its index. */
static int add_addr(struct tql_cc *cc, const struct tql_node *n, uint32_t node,
		    struct tm_slot slot, uint32_t call, int field)
{
	tm_tql_prog *p = cc->prog;
	struct tql_addr *a = realloc(p->addrs, (p->naddrs + 1) * sizeof(*a));

	if (!a) {
		cc->nomem = 1;
		return -1;
	}
	p->addrs = a;
	a = &p->addrs[p->naddrs];
	a->node = node;
	a->slot = slot;
	a->call = call;
	a->field = (uint32_t)field;
	a->text = malloc(n->word.len + 1);
	if (!a->text) {
		cc->nomem = 1;
		return -1;
	}
	memcpy(a->text, n->word.s, n->word.len);
	a->text[n->word.len] = '\0';
	return (int)p->naddrs++;
}

static int parse_slot_name(const char *s, size_t len, struct tm_slot *slot)
{
	int k;

	for (k = 0; k < TM_SLOT__COUNT; k++) {
		const char *name = tm_slot_kind_name(k);

		if (strlen(name) == len && !memcmp(name, s, len)) {
			slot->kind = (uint8_t)k;
			slot->index = 0;
			return 0;
		}
	}
	return -1;
}

static int all_digits(const char *s, size_t len)
{
	size_t i;

	if (!len || len > 9)
		return 0;
	for (i = 0; i < len; i++)
		if (s[i] < '0' || s[i] > '9')
			return 0;
	return 1;
}

/*
 * The rank prefix of an addressed term ("@1:", as the lexer shaped it):
 * its length in *plen and the rank in *rank, or TM_RANK_NONE and 0 when
 * there is none.  -1 after reporting a prefix that cannot name one rank.
 */
static int term_rank(struct tql_cc *cc, const struct tql_node *n, int32_t *rank,
		     size_t *plen)
{
	const char *w = n->word.s;
	size_t i = 1;
	int64_t v = 0;

	*rank = TM_RANK_NONE;
	*plen = 0;
	if (n->word.len < 1 || w[0] != '@')
		return 0;
	if (w[1] == '*') {
		int shown = n->word.len - 3 > 60 ? 60 : (int)(n->word.len - 3);

		if (cc->rankset_ok) {
			*rank = TM_RANK_ANY;
			*plen = 3;
			return 0;
		}
		tql_error(cc, n->lo, n->lo, n->lo + 3, 0, 0,
			  "'@*:' names every rank: it is allowed only as the one argument "
			  "of max(), min() or spread(), e.g. 'spread(@*:%.*s)'; to read "
			  "one rank write e.g. '@0:%.*s'", shown, w + 3, shown, w + 3);
		return -1;
	}
	while (i < n->word.len && w[i] >= '0' && w[i] <= '9') {
		if (v <= TM_RANK_MAX)
			v = v * 10 + (w[i] - '0');
		i++;
	}
	if (v > TM_RANK_MAX) {
		tql_error(cc, n->lo, n->lo, n->lo + (uint32_t)i, 0, 0,
			  "rank too large (ranks are 0..%d)", TM_RANK_MAX);
		return -1;
	}
	*rank = (int32_t)v;
	*plen = i + 1;          /* the ':' the lexer made sure of */
	return 0;
}

/* "no node 'path'" with the closest addresses, over lo..hi. */
static void no_node(struct tql_cc *cc, uint32_t lo, uint32_t hi, const char *path)
{
	const char *sug[3];
	size_t ns = tm_address_suggest(cc->opts->nodes, path, sug, 3);

	if (ns == 0)
		tql_error(cc, lo, lo, hi, 0, 0, "no node '%s'", path);
	else if (ns == 1)
		tql_error(cc, lo, lo, hi, 0, 0, "no node '%s'; did you mean '%s'?", path, sug[0]);
	else if (ns == 2)
		tql_error(cc, lo, lo, hi, 0, 0, "no node '%s'; did you mean '%s' or '%s'?",
			  path, sug[0], sug[1]);
	else
		tql_error(cc, lo, lo, hi, 0, 0,
			  "no node '%s'; did you mean '%s', '%s' or '%s'?", path,
			  sug[0], sug[1], sug[2]);
}

/* The tensor field fld (not one) is a near miss of, or NULL. */
static const char *field_near(const char *fld, size_t len)
{
	char want[64];

	if (len >= 48)
		return NULL;
	snprintf(want, sizeof(want), "tensor.%.*s", (int)len, fld);
	return closest(want, strlen(want), field_names, N_TENSOR_FIELDS);
}

/* An addressed term whose last segment fld is no tensor field. */
static void field_error(struct tql_cc *cc, const struct tql_node *n, const char *fld)
{
	const char *end = n->word.s + n->word.len;
	const char *s = field_near(fld, (size_t)(end - fld));
	uint32_t lo = n->lo + (uint32_t)(fld - n->word.s);

	if (s)
		tql_error(cc, lo, lo, n->hi, 0, 0,
			  "unknown tensor field '%.*s'; did you mean '%s'?",
			  (int)(end - fld), fld, s + 7);
	else
		tql_error(cc, lo, lo, n->hi, 0, 0,
			  "unknown tensor field '%.*s' (fields: the stats, shape, "
			  "dtype, rank, numel)", (int)(end - fld), fld);
}

/* ---------------------------------------------------------------- "@*:" */

struct rank_node {
	int32_t rank;
	uint32_t id;
};

static int rank_node_cmp(const void *a, const void *b)
{
	const struct rank_node *x = a, *y = b;

	return (x->rank > y->rank) - (x->rank < y->rank);
}

/*
 * Every node "@R:path" of t, in rank order, into a malloc'd *out (NULL when
 * none); returns how many, or -1 out of memory.  One pass over the table
 * rather than a lookup per possible rank: ranks go to 65535.
 */
static long ranks_of(const tm_nodetab *t, const char *path, struct rank_node **out)
{
	uint32_t i, count = tm_nodetab_count(t);
	struct rank_node *v = NULL, *nv;
	size_t k = 0, cap = 0;

	*out = NULL;
	for (i = 0; i < count; i++) {
		const struct tm_node *nd = tm_nodetab_get(t, i);
		const char *rest;
		int r;

		if (!nd || !nd->address)
			continue;
		r = tm_address_node_rank(nd->address, &rest);
		if (r < 0 || strcmp(rest, path))
			continue;
		if (k == cap) {
			cap = cap ? cap * 2 : 16;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				free(v);
				return -1;
			}
			v = nv;
		}
		v[k].rank = r;
		v[k].id = nd->id;
		k++;
	}
	if (k > 1)
		qsort(v, k, sizeof(*v), rank_node_cmp);
	*out = v;
	return (long)k;
}

/*
 * No rank has node path: the error, with suggestions written "@*:" (they
 * come from one rank's view of the table) and a hint when the table has
 * the node without ranks (a single-process trace).
 */
static void rankset_missing(struct tql_cc *cc, const struct tql_node *n, const char *path,
			    uint32_t hi)
{
	const tm_nodetab *t = cc->opts->nodes;
	char query[TM_ADDRESS_MAX + 48], sug[3][TM_ADDRESS_MAX + 4], list[3 * TM_ADDRESS_MAX + 32];
	const char *raw[3];
	size_t nraw, i, nsug = 0, used = 0;

	if (tm_nodetab_find(t, path)) {
		tql_error(cc, n->lo, n->lo, hi, 0, 0,
			  "no rank has node '%s': '@*:' reads nodes '@R:%s' of a multi-rank "
			  "session, and this node table has no ranks (drop the '@*:')",
			  path, path);
		return;
	}
	snprintf(query, sizeof(query), "@%d:%s",
		 cc->opts->rank >= 0 ? (int)cc->opts->rank : 0, path);
	nraw = tm_address_suggest(t, query, raw, 3);
	for (i = 0; i < nraw; i++) {
		const char *rest;
		size_t j;

		if (tm_address_node_rank(raw[i], &rest) < 0)
			continue;
		snprintf(sug[nsug], sizeof(sug[nsug]), "@*:%s", rest);
		for (j = 0; j < nsug; j++)
			if (!strcmp(sug[j], sug[nsug]))
				break;
		if (j == nsug)
			nsug++;
	}
	list[0] = '\0';
	for (i = 0; i < nsug; i++) {
		int w = snprintf(list + used, sizeof(list) - used, "%s'%s'",
				 i == 0 ? "" : i + 1 == nsug ? " or " : ", ", sug[i]);

		if (w < 0 || (size_t)w >= sizeof(list) - used)
			break;
		used += (size_t)w;
	}
	if (nsug)
		tql_error(cc, n->lo, n->lo, hi, 0, 0,
			  "no rank has node '%s'; did you mean %s?", path, list);
	else
		tql_error(cc, n->lo, n->lo, hi, 0, 0,
			  "no rank has node '%s' (no '@R:%s' in the node table)", path, path);
}

/*
 * "@*:PATH:SLOT.field" as the argument of max/min/spread: one addressed
 * term per rank whose node "@R:PATH" exists, in rank order, consecutive in
 * the program's table so that one instruction walks them.
 */
static int expand_rankset(struct tql_cc *cc, struct tql_node *n, const char *path,
			  uint32_t hi, struct tm_slot slot, int have_slot, uint32_t call,
			  int field)
{
	tm_tql_prog *p = cc->prog;
	struct rank_node *rs;
	struct tql_addr *a;
	long count = ranks_of(cc->opts->nodes, path, &rs);
	const char *body = n->word.s + 3;
	size_t blen = n->word.len - 3;
	long i;

	if (count < 0) {
		cc->nomem = 1;
		return T_ERR;
	}
	if (count == 0) {
		rankset_missing(cc, n, path, hi);
		return T_ERR;
	}
	if (count > TQL_MAX_RANKSET) {
		tql_error(cc, n->lo, n->lo, hi, 0, 0, "'@*:' spans %ld ranks (the limit is %d)",
			  count, TQL_MAX_RANKSET);
		free(rs);
		return T_ERR;
	}
	a = realloc(p->addrs, (p->naddrs + (size_t)count) * sizeof(*a));
	if (!a) {
		free(rs);
		cc->nomem = 1;
		return T_ERR;
	}
	p->addrs = a;
	n->res = R_RANKSET;
	n->aux = p->naddrs;
	n->nargs = (uint32_t)count;
	for (i = 0; i < count; i++) {
		const struct tm_node *node = tm_nodetab_get(cc->opts->nodes, rs[i].id);
		char pre[16];
		size_t plen = (size_t)snprintf(pre, sizeof(pre), "@%d:", (int)rs[i].rank);

		a = &p->addrs[p->naddrs];
		a->node = rs[i].id;
		a->slot = slot;
		/* each rank's own node says what a bare term means */
		if (!have_slot && node && node->kind != TM_NODE_MODULE)
			a->slot.kind = TM_SLOT_DATA;
		a->call = call;
		a->field = (uint32_t)field;
		a->text = malloc(plen + blen + 1);
		if (!a->text) {
			free(rs);
			cc->nomem = 1;
			return T_ERR;
		}
		memcpy(a->text, pre, plen);
		memcpy(a->text + plen, body, blen);
		a->text[plen + blen] = '\0';
		p->naddrs++;
	}
	free(rs);
	cc->prog->uses_lookup = 1;
	return tensor_field_type(field);
}

/*
 * addressed := [ "@" ( digits | "*" ) ":" ] node-path [ "#" digits ]
 *              [ ":" slot [ "." digits ] [ "[r" digits "]" ] ] "." field
 * Without ":SLOT" a module means :out and a parameter :data.  Without
 * "@R:", a path not in the table as written is looked up as
 * "@<opts->rank>:PATH" (multi-rank tables).
 */
static int check_addressed(struct tql_cc *cc, struct tql_node *n)
{
	const char *w = n->word.s, *colon, *hash, *fld, *end = w + n->word.len;
	const char *body;
	char path[TM_ADDRESS_MAX + 16];
	const struct tm_node *node;
	struct tm_slot slot = { TM_SLOT_OUT, 0 };
	uint32_t call = 0;
	size_t plen, pre, off;
	int32_t rank;
	int field, have_slot = 0, idx;

	if (term_rank(cc, n, &rank, &pre) < 0)
		return T_ERR;
	body = w + pre;
	colon = memchr(body, ':', (size_t)(end - body));
	/* the field is the last segment */
	fld = end;
	while (fld > body && fld[-1] != '.' && fld[-1] != ':')
		fld--;
	if (fld == body && !colon) {
		tql_error(cc, n->lo, n->lo, n->hi, 0, 0,
			  "'%.*s' names a node but no field: write e.g. '%.*s:out.std'",
			  (int)n->word.len, w, (int)n->word.len, w);
		return T_ERR;
	}
	if (colon) {
		const char *s = colon + 1, *dot = memchr(s, '.', (size_t)(end - s));
		const char *rows = memchr(s, '[', (size_t)(end - s));

		if (!dot || memchr(s, ':', (size_t)(end - s)) || (rows && fld < rows)) {
			tql_error(cc, n->lo, n->lo, n->hi, 0, 0,
				  "'%.*s' names a tensor slot but no field: write e.g. "
				  "'%.*s.std'", (int)n->word.len, w, (int)n->word.len, w);
			return T_ERR;
		}
		if (rows) {
			/* out[r1], out.2[r0]: a request's rows (the lexer let
			 * "[r" digits "]" through after a slot) */
			char st[40];
			size_t sl = (size_t)(fld - 1 - s);
			uint32_t lo = n->lo + (uint32_t)(s - w);
			int bad = sl >= sizeof(st);

			if (!bad) {
				memcpy(st, s, sl);
				st[sl] = '\0';
				bad = tm_slot_parse(st, &slot) != TM_OK;
			}
			if (bad) {
				tql_error(cc, lo, lo, lo + (uint32_t)sl, 0, 0,
					  "bad slot '%.*s' (a request's rows are e.g. out[r0] "
					  "or out.1[r2], of at most %u requests)", (int)sl, s,
					  TM_SLOT_ROW_MAX);
				return T_ERR;
			}
		} else if (parse_slot_name(s, (size_t)(dot - s), &slot)) {
			uint32_t lo = n->lo + (uint32_t)(s - w);

			tql_error(cc, lo, lo, lo + (uint32_t)(dot - s), 0, 0,
				  "unknown slot '%.*s' (slots: out, in, grad_out, "
				  "grad_in, data, grad)", (int)(dot - s), s);
			return T_ERR;
		}
		have_slot = 1;
		/* :out.1.std: an index before the field */
		if (!rows && fld - 1 > dot) {
			const char *ix = dot + 1;
			size_t ilen = (size_t)(fld - 1 - ix);

			/* slot.index is 16 bits, from TM_SLOT_ROWS on requests'
			 * rows: a larger number must not wrap silently onto
			 * another tensor. */
			if (!all_digits(ix, ilen) || ilen > 5 || atoi(ix) >= (int)TM_SLOT_ROWS ||
			    slot.kind == TM_SLOT_DATA || slot.kind == TM_SLOT_GRAD) {
				uint32_t lo = n->lo + (uint32_t)(ix - w);

				tql_error(cc, lo, lo, lo + (uint32_t)ilen, 0, 0,
					  "bad slot index '%.*s'", (int)ilen, ix);
				return T_ERR;
			}
			slot.index = (uint16_t)atoi(ix);
		}
		plen = (size_t)(colon - w);
	} else {
		if (fld == w) {
			unknown_name(cc, n, "name");
			return T_ERR;
		}
		plen = (size_t)(fld - 1 - w);
	}
	field = tensor_field(fld, (size_t)(end - fld));
	hash = memchr(w, '#', plen);
	if (hash) {
		size_t clen = plen - (size_t)(hash - w) - 1;

		if (!all_digits(hash + 1, clen) || atoi(hash + 1) == 0) {
			uint32_t lo = n->lo + (uint32_t)(hash - w);

			tql_error(cc, lo, lo, lo + (uint32_t)clen + 1, 0, 0,
				  "bad call number '%.*s' (write NODE#2 for the second call)",
				  (int)clen + 1, hash);
			return T_ERR;
		}
		call = (uint32_t)atoi(hash + 1);
		plen = (size_t)(hash - w);
	}
	/* The path looked up: the canonical "@R:" (the lexer let "@01:"
	 * through), then the node path as written. */
	off = 0;
	if (rank >= 0)
		off = (size_t)snprintf(path, sizeof(path), "@%d:", (int)rank);
	memcpy(path + off, body, plen - pre);
	path[off + plen - pre] = '\0';
	if (cc->opts && cc->opts->nodes && !have_slot && field < 0) {
		/* `model.fc1` alone: a node with no field */
		const struct tm_node *whole;
		char full[TM_ADDRESS_MAX + 16];

		memcpy(full, path, off);
		memcpy(full + off, body, (size_t)(end - body));
		full[off + (size_t)(end - body)] = '\0';
		whole = rank == TM_RANK_ANY ? NULL : tm_nodetab_find(cc->opts->nodes, full);
		if (rank == TM_RANK_ANY) {
			struct rank_node *rs;
			long k = ranks_of(cc->opts->nodes, full, &rs);

			if (k < 0) {
				cc->nomem = 1;
				return T_ERR;
			}
			if (k > 0) {
				tql_error(cc, n->lo, n->lo, n->hi, 0, 0,
					  "'@*:%s' is a node, not a value: name a field, e.g. "
					  "'@*:%s:%s.l2'", full, full,
					  tm_nodetab_get(cc->opts->nodes, rs[0].id)->kind ==
					  TM_NODE_MODULE ? "out" : "data");
				free(rs);
				return T_ERR;
			}
		}
		if (!whole && rank == TM_RANK_NONE && cc->opts->rank >= 0) {
			char alt[TM_ADDRESS_MAX + 48];

			snprintf(alt, sizeof(alt), "@%d:%s", (int)cc->opts->rank, full);
			whole = tm_nodetab_find(cc->opts->nodes, alt);
		}
		if (whole) {
			tql_error(cc, n->lo, n->lo, n->hi, 0, 0,
				  "'%s' is a node, not a value: name a field, e.g. '%s.std' "
				  "or '%s:%s.std'", full, full, full,
				  whole->kind == TM_NODE_MODULE ? "out" : "data");
			return T_ERR;
		}
	}
	if (!cc->opts || !cc->opts->nodes) {
		tql_error(cc, n->lo, n->lo, n->hi, 0, 0,
			  "'%.*s' reads node '%s', but there is no node table to find it in "
			  "(no trace loaded?)", (int)n->word.len, w, path);
		return T_ERR;
	}
	if (rank == TM_RANK_ANY) {
		if (field < 0) {
			field_error(cc, n, fld);
			return T_ERR;
		}
		return expand_rankset(cc, n, path, n->lo + (uint32_t)plen, slot, have_slot,
				      call, field);
	}
	node = tm_nodetab_find(cc->opts->nodes, path);
	if (!node && rank == TM_RANK_NONE && cc->opts->rank >= 0) {
		char alt[TM_ADDRESS_MAX + 48];

		snprintf(alt, sizeof(alt), "@%d:%s", (int)cc->opts->rank, path);
		node = tm_nodetab_find(cc->opts->nodes, alt);
	}
	if (!node) {
		no_node(cc, n->lo, n->lo + (uint32_t)plen, path);
		return T_ERR;
	}
	if (field < 0) {
		/* `model.layers.1.nrm`: a mistyped node reads as a field of
		 * its parent: whichever it is nearer, a node or a field, is
		 * what the error suggests */
		const char *sug[1], *fs;
		char full[TM_ADDRESS_MAX + 16];
		size_t pl = strlen(path), fl = (size_t)(end - fld);

		if (!have_slot && pl + fl + 2 <= sizeof(full)) {
			memcpy(full, path, pl);
			full[pl] = '.';
			memcpy(full + pl + 1, fld, fl);
			full[pl + 1 + fl] = '\0';
			if (tm_address_suggest(cc->opts->nodes, full, sug, 1) == 1) {
				size_t dn = tql_edit_distance(full, strlen(full), sug[0],
							      strlen(sug[0])), df = dn + 1;

				if ((fs = field_near(fld, fl)) != NULL)
					df = tql_edit_distance(fld, fl, fs + 7, strlen(fs + 7));
				if (dn <= df)
					no_node(cc, n->lo, n->hi, full);
				else
					field_error(cc, n, fld);
				return T_ERR;
			}
		}
		field_error(cc, n, fld);
		return T_ERR;
	}
	if (!have_slot && node->kind != TM_NODE_MODULE)
		slot.kind = TM_SLOT_DATA;
	idx = add_addr(cc, n, node->id, slot, call, field);
	if (idx < 0)
		return T_ERR;
	n->res = R_ADDR;
	n->aux = (uint32_t)idx;
	cc->prog->uses_lookup = 1;
	return tensor_field_type(field);
}

/*
 * Is "ref.REST" meant as an addressed term?  REST names a node when its
 * first segment is none of TQL's field prefixes (ref.node.path and the
 * like get ref.'s own message).
 */
static int ref_addressed(const struct tql_node *n)
{
	static const char *const fields[] = { "tensor", "node", "annot", "scaler",
					      "exception", "request", "step", "phase",
					      "seq", "time", "rank", "event", "op" };
	const char *rest = n->word.s + 4;
	size_t len = n->word.len - 4, first = 0, i;

	while (first < len && rest[first] != '.' && rest[first] != ':' && rest[first] != '#')
		first++;
	if (first == len)
		return 0;       /* one segment: no field */
	for (i = 0; i < TM_ARRAY_LEN(fields); i++)
		if (strlen(fields[i]) == first && !memcmp(rest, fields[i], first))
			return 0;
	return 1;
}

/*
 * field := "tensor." ( stat | "shape" | "dtype" | "rank" | "numel" )
 *        | "node." ( "path" | "type" | "depth" )
 *        | "step" | "phase" | "seq" | "time" | "rank" | "event"
 *        | "exception." ( "type" | "message" )
 *        | addressed
 *        | "ref.tensor." FIELD | "ref." addressed
 * ("rank" is the process's rank in a distributed run; "tensor.rank" the
 * number of dimensions.)
 */
static int check_word(struct tql_cc *cc, struct tql_node *n)
{
	int i, f;

	for (i = 0; i < EF__COUNT; i++)
		if (i != EF_ANNOT && word_eq(n, 0, efield_names[i])) {
			n->res = R_EVENT;
			n->aux = (uint32_t)i;
			return i == EF_PHASE || i == EF_NODE_PATH || i == EF_NODE_TYPE ||
			       i == EF_OP_NAME || i == EF_OP_FILE || i == EF_EVENT ||
			       i == EF_EXC_TYPE || i == EF_EXC_MESSAGE ? TM_TQL_STR :
			       i == EF_OP_INPUTS_FINITE || i == EF_OP_MADE_NONFINITE ||
			       i == EF_SCALER_SKIPPED ? TM_TQL_BOOL : i == EF_REQUEST ? TM_TQL_LIST :
			       i == EF_SCALER_SCALE ? TM_TQL_NUM : TM_TQL_INT;
		}
	/* annot.KEY: any annotation key of the step (KEY may hold dots) */
	if (n->word.len > 6 && !memcmp(n->word.s, "annot.", 6) &&
	    !memchr(n->word.s, ':', n->word.len) && !memchr(n->word.s, '#', n->word.len)) {
		const char *key = n->word.len - 6 < TM_ANNOT_MAX_KEY ?
			tql_pool_add(cc, n->word.s + 6, n->word.len - 6) : NULL;

		if (!key) {
			tql_error(cc, n->lo, n->lo, n->hi, 0, 0,
				  "annotation key too long (at most %d bytes)",
				  TM_ANNOT_MAX_KEY - 1);
			return T_ERR;
		}
		n->res = R_EVENT;
		n->aux = EF_ANNOT;
		n->word.s = key;        /* gen emits its pool offset */
		n->word.len = (uint32_t)strlen(key);
		return TM_TQL_LIST;
	}
	if (word_eq(n, 0, "annot") || word_eq(n, 0, "scaler")) {
		tql_error(cc, n->lo, n->lo, n->hi, 0, 0,
			  "'%.*s' needs a field, e.g. '%s'", (int)n->word.len, n->word.s,
			  n->word.s[0] == 'a' ? "annot.phase" : "scaler.skipped");
		return T_ERR;
	}
	if (n->word.len > 7 && !memcmp(n->word.s, "scaler.", 7)) {
		unknown_name(cc, n, "field");
		return T_ERR;
	}
	/* ref.tensor.FIELD: the aligned reference event's (tm-compare.h) */
	if (n->word.len > 4 && !memcmp(n->word.s, "ref.", 4)) {
		if (n->word.len > 11 && !memcmp(n->word.s + 4, "tensor.", 7) &&
		    !memchr(n->word.s + 11, '.', n->word.len - 11) &&
		    !memchr(n->word.s, ':', n->word.len) &&
		    (f = tensor_field(n->word.s + 11, n->word.len - 11)) >= 0) {
			n->res = R_REF;
			n->aux = (uint32_t)f;
			cc->prog->uses_reference = 1;
			return tensor_field_type(f);
		}
		if (ref_addressed(n)) {
			/* ref.NODE:SLOT.field: the term checked as written
			 * without "ref.", then read through the reference */
			int t;

			n->word.s += 4;
			n->word.len -= 4;
			n->lo += 4;
			t = check_addressed(cc, n);
			n->word.s -= 4;
			n->word.len += 4;
			n->lo -= 4;
			if (t == T_ERR)
				return T_ERR;
			if (n->res == R_RANKSET) {
				tql_error(cc, n->lo, n->lo, n->hi, 0, 0,
					  "'ref.' reads one rank's term, not '@*:' (write "
					  "'ref.@R:PATH:SLOT.FIELD' for rank R)");
				return T_ERR;
			}
			n->res = R_REF_ADDR;
			cc->prog->uses_reference = 1;
			return t;
		}
		tql_error(cc, n->lo, n->lo, n->hi, 0, 0,
			  "'ref.' reads the reference's tensor in focus (ref.tensor.FIELD, "
			  "e.g. 'ref.tensor.mean') or an addressed term's "
			  "(ref.NODE:SLOT.FIELD, e.g. 'ref.model.fc1:out.std')");
		return T_ERR;
	}
	if (n->word.len > 7 && !memcmp(n->word.s, "tensor.", 7) &&
	    !memchr(n->word.s + 7, '.', n->word.len - 7) &&
	    !memchr(n->word.s, ':', n->word.len)) {
		f = tensor_field(n->word.s + 7, n->word.len - 7);
		if (f < 0) {
			unknown_name(cc, n, "field");
			return T_ERR;
		}
		n->res = R_TENSOR;
		n->aux = (uint32_t)f;
		return tensor_field_type(f);
	}
	if (n->word.len > 5 && !memcmp(n->word.s, "node.", 5) &&
	    !memchr(n->word.s + 5, '.', n->word.len - 5) &&
	    !memchr(n->word.s, ':', n->word.len)) {
		unknown_name(cc, n, "field");
		return T_ERR;
	}
	if (word_eq(n, 0, "tensor") || word_eq(n, 0, "node")) {
		tql_error(cc, n->lo, n->lo, n->hi, 0, 0,
			  "'%.*s' needs a field, e.g. '%s'", (int)n->word.len, n->word.s,
			  n->word.s[0] == 't' ? "tensor.nan_count" : "node.path");
		return T_ERR;
	}
	if (!memchr(n->word.s, '.', n->word.len) && !memchr(n->word.s, ':', n->word.len)) {
		unknown_name(cc, n, "name");
		return T_ERR;
	}
	return check_addressed(cc, n);
}

/* A type error between two operands: caret at the operator, the operands
 * underlined.  The format takes three strings (op, left, right), never the
 * operator spliced into the format itself ('%' is an operator). */
static int binary_error(struct tql_cc *cc, struct tql_node *n, const char *fmt,
			const char *op, const char *ta, const char *tb)
	__attribute__((format(printf, 3, 0)));

static int binary_error(struct tql_cc *cc, struct tql_node *n, const char *fmt,
			const char *op, const char *ta, const char *tb)
{
	char msg[200];

	snprintf(msg, sizeof(msg), fmt, op, ta, tb ? tb : "");
	tql_error(cc, n->pos, n->a->lo, n->a->hi, n->b->lo, n->b->hi, "%s", msg);
	return T_ERR;
}

static int check_binary(struct tql_cc *cc, struct tql_node *n)
{
	int ta = check(cc, n->a), tb = check(cc, n->b);
	const char *opname = tql_tok_name(n->op);

	if (ta == T_ERR || tb == T_ERR)
		return T_ERR;
	/* A step's request ids: does one of them equal / match the string? */
	if ((ta == TM_TQL_LIST || tb == TM_TQL_LIST) && n->op != TK_AND && n->op != TK_OR) {
		int other = ta == TM_TQL_LIST ? tb : ta;

		if ((n->op == TK_EQ || n->op == TK_NE || (n->op == TK_MATCH && ta == TM_TQL_LIST)) &&
		    (other == TM_TQL_STR || other == T_DYN))
			return TM_TQL_BOOL;
		const struct tql_node *l = ta == TM_TQL_LIST ? n->a : n->b;
		int ann = l->kind == N_WORD && l->res == R_EVENT && l->aux == EF_ANNOT;
		char what[TM_ANNOT_MAX_KEY + 8];

		snprintf(what, sizeof(what), "%s%s", ann ? "annot." : "request", ann ? l->word.s : "");
		return binary_error(cc, n, "%s is a list of %s: test it with "
				    "== \"ID\", != \"ID\" or =~ \"PATTERN\"",
				    what, ann ? "annotation values" : "request ids", NULL);
	}
	switch (n->op) {
	case TK_AND:
	case TK_OR:
		if ((ta != TM_TQL_BOOL && ta != T_DYN) || (tb != TM_TQL_BOOL && tb != T_DYN)) {
			const struct tql_node *bad = ta != TM_TQL_BOOL && ta != T_DYN ? n->a : n->b;

			tql_error(cc, n->pos, bad->lo, bad->hi, 0, 0,
				  "%s needs true or false on both sides, but this is %s%s",
				  opname, type_name(bad->type),
				  is_numeric(bad->type) ? " (compare it: 'x > 0')" : "");
			return T_ERR;
		}
		return TM_TQL_BOOL;
	case TK_PLUS: case TK_MINUS: case TK_STAR: case TK_SLASH:
	case TK_PERCENT: case TK_POW:
		if (!is_numeric(ta) || !is_numeric(tb))
			return binary_error(cc, n, "%s needs numbers, not %s and %s",
					    opname, type_name(ta), type_name(tb));
		return arith_type(n->op, ta, tb);
	case TK_MATCH:
		if ((ta != TM_TQL_STR && ta != T_DYN) || (tb != TM_TQL_STR && tb != T_DYN))
			return binary_error(cc, n, "%s matches a string against a glob "
					    "pattern string, not %s and %s",
					    opname, type_name(ta), type_name(tb));
		if (n->b->kind == N_CONST && n->b->val.type == TM_TQL_STR &&
		    tm_path_glob(n->b->val.v.str.s, "") < 0) {
			tql_error(cc, n->b->lo, n->b->lo, n->b->hi, 0, 0,
				  "bad glob pattern (use '*' for one segment, '**' for any depth)");
			return T_ERR;
		}
		return TM_TQL_BOOL;
	default:
		break;
	}
	/* comparisons */
	if (is_numeric(ta) && is_numeric(tb))
		return TM_TQL_BOOL;
	if (ta == tb || ta == T_DYN || tb == T_DYN) {
		int t = ta == T_DYN ? tb : ta;

		if (t == TM_TQL_STR || t == TM_TQL_BOOL || t == TM_TQL_SHAPE) {
			if (n->op != TK_EQ && n->op != TK_NE)
				return binary_error(cc, n, "%s does not order %ss; only == and "
						    "!= compare them", opname,
						    t == TM_TQL_STR ? "string" :
						    t == TM_TQL_BOOL ? "boolean" : "shape", NULL);
			return TM_TQL_BOOL;
		}
	}
	tql_error(cc, n->pos, n->a->lo, n->a->hi, n->b->lo, n->b->hi,
		  "cannot compare %s with %s", type_name(ta), type_name(tb));
	return T_ERR;
}

static int check_list(struct tql_cc *cc, struct tql_node *n)
{
	struct tql_node *x;
	int64_t *d;
	int bad = 0;

	for (x = n->args; x; x = x->next)
		if (check(cc, x) == T_ERR)
			bad = 1;
	if (bad)
		return T_ERR;
	if (n->nargs > TM_MAX_RANK) {
		tql_error(cc, n->lo, n->lo, n->hi, 0, 0,
			  "a shape has at most %d dimensions, this list has %u",
			  TM_MAX_RANK, n->nargs);
		return T_ERR;
	}
	for (x = n->args; x; x = x->next)
		if (x->kind != N_CONST || x->type != TM_TQL_INT ||
		    x->val.type != TM_TQL_INT) {
			tql_error(cc, x->lo, x->lo, x->hi, 0, 0,
				  "a list is a shape: its elements must be integer constants");
			return T_ERR;
		}
	if (cc->ndims + n->nargs > cc->dimscap) {
		tql_error(cc, n->lo, n->lo, n->hi, 0, 0, "too many list elements");
		return T_ERR;
	}
	d = cc->dims + cc->ndims;
	cc->ndims += n->nargs;
	n->val.type = TM_TQL_SHAPE;
	n->val.v.shape.dims = d;
	n->val.v.shape.rank = (uint8_t)n->nargs;
	for (x = n->args; x; x = x->next)
		*d++ = x->val.v.i;
	n->kind = N_CONST;
	return TM_TQL_SHAPE;
}

/* Is x written "@*:..." (every rank)? */
static int is_rankset(const struct tql_node *x)
{
	return x->kind == N_WORD && x->word.len >= 2 && x->word.s[0] == '@' &&
	       x->word.s[1] == '*';
}

static int check_call(struct tql_cc *cc, struct tql_node *n)
{
	int b = tql_builtin_find(n->word.s, n->word.len), t = TM_TQL_INT, i = 0;
	int agg = b == B_MIN || b == B_MAX || b == B_SPREAD;
	struct tql_node *x;
	int bad = 0;

	if (b == B_PREV || b == B_DELTA) {
		if (cc->in_prev) {
			tql_error(cc, n->lo, n->lo, n->hi, 0, 0,
				  "%s() cannot be used inside prev() or delta()",
				  builtins[b].name);
			return T_ERR;
		}
		cc->in_prev = 1;
	}
	for (x = n->args; x; x = x->next) {
		/* "@*:" is a set of values, one per rank: it is what max/min/
		 * spread fold, alone; beside other arguments it is ambiguous */
		if (agg && n->nargs > 1 && is_rankset(x)) {
			tql_error(cc, x->lo, x->lo, x->hi, 0, 0,
				  "'@*:' must be the only argument of %s(): the value of "
				  "every rank is what it compares", builtins[b].name);
			bad = 1;
			continue;
		}
		cc->rankset_ok = agg && n->nargs == 1 && x->kind == N_WORD;
		if (check(cc, x) == T_ERR)
			bad = 1;
		cc->rankset_ok = 0;
	}
	if (b == B_PREV || b == B_DELTA)
		cc->in_prev = 0;
	if (b < 0) {
		const struct tql_ext *e = cc->opts ? tql_ext_find(cc->opts->funcs,
								n->word.s, n->word.len) : NULL;
		const char *names[B__COUNT + 1];
		const char *s;
		tm_tql_prog *p = cc->prog;
		const struct tql_ext **ne;

		if (!e) {
			for (i = 0; i < B__COUNT; i++)
				names[i] = builtins[i].name;
			names[B__COUNT] = NULL;
			s = closest(n->word.s, n->word.len, names, B__COUNT);
			if (s)
				tql_error(cc, n->lo, n->lo, n->lo + n->word.len, 0, 0,
					  "unknown function '%.*s'; did you mean '%s'?",
					  (int)n->word.len, n->word.s, s);
			else
				tql_error(cc, n->lo, n->lo, n->lo + n->word.len, 0, 0,
					  "unknown function '%.*s' (functions: abs sqrt log log2 "
					  "log10 exp min max spread isnan isinf isfinite prev delta "
					  "reldiff maxabsdiff relerr cosine, "
					  "and those loaded with tql-function load)",
					  (int)n->word.len, n->word.s);
			return T_ERR;
		}
		if (bad)
			return T_ERR;
		if ((int)n->nargs != tql_ext_nargs(e)) {
			tql_error(cc, n->lo, n->lo, n->hi, 0, 0,
				  "'%s' takes %d argument%s, not %u", tql_ext_name(e),
				  tql_ext_nargs(e), tql_ext_nargs(e) == 1 ? "" : "s", n->nargs);
			return T_ERR;
		}
		for (x = n->args, i = 0; x; x = x->next, i++) {
			int want = tql_ext_arg_type(e, i), ok;

			ok = x->type == T_DYN || x->type == want ||
			     (want == TM_TQL_NUM && x->type == TM_TQL_INT);
			if (!ok) {
				tql_error(cc, x->lo, x->lo, x->hi, 0, 0,
					  "argument %d of '%s' must be %s, not %s", i + 1,
					  tql_ext_name(e), type_name(want), type_name(x->type));
				bad = 1;
			}
		}
		if (bad)
			return T_ERR;
		for (i = 0; i < (int)p->next; i++)
			if (p->ext[i] == e)
				break;
		if (i == (int)p->next) {
			ne = realloc(p->ext, (p->next + 1) * sizeof(*ne));
			if (!ne) {
				cc->nomem = 1;
				return T_ERR;
			}
			p->ext = ne;
			p->ext[p->next++] = e;
		}
		n->res = R_EXTERN;
		n->aux = (uint32_t)i;
		return tql_ext_ret_type(e);
	}
	if (bad)
		return T_ERR;
	if (b == B_SPREAD && (n->nargs != 1 || n->args->res != R_RANKSET)) {
		tql_error(cc, n->lo, n->lo, n->hi, 0, 0,
			  "spread() takes one '@*:' term, the same value on every rank, "
			  "e.g. 'spread(@*:model.fc.weight:data.l2)'");
		return T_ERR;
	}
	if (b >= B_MAXABSDIFF && b <= B_COSINE) {
		if (n->nargs) {
			tql_error(cc, n->lo, n->lo, n->hi, 0, 0,
				  "'%s' takes no argument: it compares the contents of the "
				  "tensor in focus with the reference's", builtins[b].name);
			return T_ERR;
		}
		n->res = R_BUILTIN;
		n->aux = (uint32_t)b;
		cc->prog->uses_reference = 1;
		return TM_TQL_NUM;
	}
	if (n->nargs < builtins[b].min ||
	    (builtins[b].max && n->nargs > builtins[b].max)) {
		if (builtins[b].max == 1 || builtins[b].max == 2)
			tql_error(cc, n->lo, n->lo, n->hi, 0, 0,
				  "'%s' takes %u argument%s, not %u", builtins[b].name,
				  builtins[b].max, builtins[b].max == 1 ? "" : "s", n->nargs);
		else
			tql_error(cc, n->lo, n->lo, n->hi, 0, 0,
				  "'%s' takes at least 1 argument", builtins[b].name);
		return T_ERR;
	}
	n->res = R_BUILTIN;
	n->aux = (uint32_t)b;
	for (x = n->args, i = 1; x; x = x->next, i++) {
		int ok = is_numeric(x->type) ||
			 (b == B_PREV && x->type == TM_TQL_BOOL);

		if (!ok) {
			tql_error(cc, x->lo, x->lo, x->hi, 0, 0,
				  "'%s' needs a number%s, not %s", builtins[b].name,
				  b == B_PREV ? " or a boolean" : "", type_name(x->type));
			return T_ERR;
		}
		if (x->type != TM_TQL_INT)
			t = TM_TQL_NUM;
	}
	switch (b) {
	case B_ABS: case B_MIN: case B_MAX: case B_SPREAD:
		return t;
	case B_ISNAN: case B_ISINF: case B_ISFINITE:
		return TM_TQL_BOOL;
	case B_PREV:
	case B_DELTA:
		if (cc->nsites >= TM_ARRAY_LEN(cc->sites)) {
			tql_error(cc, n->lo, n->lo, n->hi, 0, 0,
				  "too many prev()/delta() calls (the limit is %zu)",
				  TM_ARRAY_LEN(cc->sites));
			return T_ERR;
		}
		n->res = b == B_PREV ? R_PREV : R_DELTA;
		n->aux = cc->nsites;
		cc->sites[cc->nsites++] = n;
		if (b == B_PREV && n->args->type == TM_TQL_BOOL)
			return TM_TQL_BOOL;
		return t;
	default:
		return TM_TQL_NUM;
	}
}

/* c ? x : y: c is a condition; x and y of one type (numbers meet as a
 * number, a variable takes the other's type). */
static int check_cond(struct tql_cc *cc, struct tql_node *n)
{
	int tc = check(cc, n->a), tx = check(cc, n->b), ty = check(cc, n->args);

	if (tc == T_ERR || tx == T_ERR || ty == T_ERR)
		return T_ERR;
	if (tc != TM_TQL_BOOL && tc != T_DYN) {
		tql_error(cc, n->pos, n->a->lo, n->a->hi, 0, 0,
			  "'?' needs true or false before it, but this is %s%s",
			  type_name(tc), is_numeric(tc) ? " (compare it: 'x > 0 ? a : b')" : "");
		return T_ERR;
	}
	if (tx == ty)
		return tx;
	if (tx == T_DYN)
		return ty;
	if (ty == T_DYN)
		return tx;
	if (is_numeric(tx) && is_numeric(ty))
		return TM_TQL_NUM;
	tql_error(cc, n->pos, n->b->lo, n->b->hi, n->args->lo, n->args->hi,
		  "the two results of '?:' differ: %s and %s", type_name(tx), type_name(ty));
	return T_ERR;
}

/* a[i]: a dimension of a shape; tensor[i, j, ...]: an element of the
 * captured contents of the tensor in focus. */
static int check_index(struct tql_cc *cc, struct tql_node *n)
{
	struct tql_node *x;
	int ta, bad = 0;

	for (x = n->args; x; x = x->next) {
		int t = check(cc, x);

		if (t == T_ERR) {
			bad = 1;
		} else if (t != TM_TQL_INT && t != T_DYN) {
			tql_error(cc, x->lo, x->lo, x->hi, 0, 0,
				  "an index is an integer, not %s", type_name(t));
			bad = 1;
		}
	}
	if (n->a->kind == N_WORD && word_eq(n->a, 0, "tensor")) {
		if (bad)
			return T_ERR;
		if (n->nargs > TM_MAX_RANK) {
			tql_error(cc, n->pos, n->lo, n->hi, 0, 0,
				  "%u indices: a tensor has at most %d dimensions",
				  n->nargs, TM_MAX_RANK);
			return T_ERR;
		}
		n->res = R_TENSOR;
		return TM_TQL_NUM;
	}
	ta = check(cc, n->a);
	if (ta == T_ERR || bad)
		return T_ERR;
	if (ta != TM_TQL_SHAPE && ta != T_DYN) {
		tql_error(cc, n->pos, n->a->lo, n->a->hi, 0, 0,
			  "only a shape (tensor.shape[0]) or the tensor in focus "
			  "(tensor[0, 1]) can be indexed, not %s", type_name(ta));
		return T_ERR;
	}
	if (n->nargs != 1) {
		tql_error(cc, n->pos, n->lo, n->hi, 0, 0,
			  "a shape takes one index, not %u", n->nargs);
		return T_ERR;
	}
	return TM_TQL_INT;
}

/* Type-checks n and its subtree; folds constants; returns n->type. */
static int check(struct tql_cc *cc, struct tql_node *n)
{
	int t;

	switch (n->kind) {
	case N_ERROR:
		t = T_ERR;
		break;
	case N_CONST:
		t = n->type;
		break;
	case N_VAR:
		t = T_DYN;
		break;
	case N_WORD:
		t = check_word(cc, n);
		break;
	case N_LIST:
		t = check_list(cc, n);
		break;
	case N_UNARY:
		t = check(cc, n->a);
		if (t == T_ERR)
			break;
		if (n->op == TK_NOT) {
			if (t != TM_TQL_BOOL && t != T_DYN) {
				tql_error(cc, n->pos, n->a->lo, n->a->hi, 0, 0,
					  "'!' needs true or false, but this is %s%s", type_name(t),
					  is_numeric(t) ? " (compare it: '!(x > 0)')" : "");
				t = T_ERR;
				break;
			}
			t = TM_TQL_BOOL;
		} else {
			if (!is_numeric(t)) {
				tql_error(cc, n->pos, n->a->lo, n->a->hi, 0, 0,
					  "unary '%c' needs a number, not %s",
					  n->op == TK_MINUS ? '-' : '+', type_name(t));
				t = T_ERR;
				break;
			}
			if (t == T_DYN)
				t = TM_TQL_NUM;
		}
		break;
	case N_BINARY:
		t = check_binary(cc, n);
		break;
	case N_CALL:
		t = check_call(cc, n);
		break;
	case N_COND:
		t = check_cond(cc, n);
		break;
	case N_INDEX:
		t = check_index(cc, n);
		break;
	default:
		t = T_ERR;
		break;
	}
	n->type = (uint8_t)t;
	if (t != T_ERR && (n->kind == N_UNARY || n->kind == N_BINARY ||
			   n->kind == N_COND ||
			   (n->kind == N_INDEX && n->res != R_TENSOR) ||
			   (n->kind == N_CALL && n->res == R_BUILTIN &&
			    !(n->aux >= B_MAXABSDIFF && n->aux <= B_COSINE))) && all_const(n))
		fold(cc, n);
	return t;
}

/* ---------------------------------------------------------------- program */

static void hist_free(struct tql_hist *h)
{
	free(h->keys);
	free(h->vals);
	memset(h, 0, sizeof(*h));
}

/*
 * prev()/delta() remember one value per (node, slot) and site.  The table is
 * allocated here, once, so evaluation never allocates: sized from the node
 * table (four slots a node) and capped; keys past the limit read unknown.
 */
static int hist_init(tm_tql_prog *p, const tm_nodetab *nodes)
{
	uint64_t want = 1024, cap = 1;

	if (nodes && (uint64_t)tm_nodetab_count(nodes) * 4 > want)
		want = (uint64_t)tm_nodetab_count(nodes) * 4;
	if (want > TQL_HIST_MAX_KEYS)
		want = TQL_HIST_MAX_KEYS;
	while (cap * 3 < want * 4)
		cap <<= 1;
	p->hist.cap = (uint32_t)cap;
	p->hist.limit = (uint32_t)want;
	p->hist.keys = calloc(cap, sizeof(*p->hist.keys));
	p->hist.vals = calloc(cap * p->nsites, sizeof(*p->hist.vals));
	return p->hist.keys && p->hist.vals ? TM_OK : TM_ERR_NOMEM;
}

void tm_tql_free(tm_tql_prog *p)
{
	uint32_t i;

	if (!p)
		return;
	for (i = 0; i < p->naddrs; i++)
		free(p->addrs[i].text);
	free(p->addrs);
	free(p->src);
	free(p->pool);
	free(p->dims);
	free(p->code);
	free(p->k);
	free(p->ext);
	free(p->stack);
	free(p->cur);
	free(p->prev);
	tm_address_free(p->glob);
	hist_free(&p->hist);
	free(p);
}

const char *tm_tql_source(const tm_tql_prog *p)
{
	return p ? p->src : NULL;
}

int tm_tql_result_type(const tm_tql_prog *p)
{
	return p ? p->result_type : TM_TQL_UNKNOWN;
}

int tm_tql_uses_lookup(const tm_tql_prog *p)
{
	return p ? p->uses_lookup : 0;
}

int tm_tql_uses_reference(const tm_tql_prog *p)
{
	return p ? p->uses_reference : 0;
}

int tm_tql_uses_variables(const tm_tql_prog *p)
{
	uint32_t i;

	for (i = 0; p && i < p->ncode; i++)
		if (p->code[i].op == OP_VAR)
			return 1;
	return 0;
}

void tm_tql_reset(tm_tql_prog *p)
{
	uint32_t i;

	if (!p)
		return;
	memset(p->memo, 0, sizeof(p->memo));
	if (!p->hist.keys)
		return;
	memset(p->hist.keys, 0, p->hist.cap * sizeof(*p->hist.keys));
	for (i = 0; i < p->hist.cap * p->nsites; i++)
		memset(&p->hist.vals[i], 0, sizeof(p->hist.vals[i]));
	p->hist.used = 0;
}

/* Emits the prologue (prev/delta arguments) and the body. */
static int generate(struct tql_cc *cc, struct tql_node *root, int want_bool)
{
	tm_tql_prog *p = cc->prog;
	struct tql_gen g = { .cc = cc, .p = p };
	uint32_t i;

	if (cc->nsites) {
		emit(&g, OP_HKEY, 0, 0);
		for (i = 0; i < cc->nsites; i++) {
			const struct tql_node *arg = cc->sites[i]->args;
			int t = arg->type == T_DYN ? TM_TQL_NUM : arg->type;

			gen_conv(&g, arg, t);
			emit(&g, OP_HSAVE, 0, i);
		}
	}
	gen(&g, root);
	if (want_bool && root->type == T_DYN)
		emit(&g, OP_DYN_BOOL, 0, 0);
	emit(&g, OP_RET, 0, 0);
	if (cc->nomem)
		return cc->nomem == 2 ? TM_ERR_TQL : TM_ERR_NOMEM;
	p->maxstack = (uint32_t)g.maxdepth + 1;
	p->stack = calloc(p->maxstack, sizeof(*p->stack));
	p->nsites = cc->nsites;
	if (!p->stack)
		return TM_ERR_NOMEM;
	if (p->nsites) {
		p->cur = calloc(p->nsites, sizeof(*p->cur));
		p->prev = calloc(p->nsites, sizeof(*p->prev));
		if (!p->cur || !p->prev ||
		    hist_init(p, cc->opts ? cc->opts->nodes : NULL))
			return TM_ERR_NOMEM;
	}
	return TM_OK;
}

int tm_tql_compile(const char *src, const struct tm_tql_compile_opts *opts,
		   tm_tql_prog **out, char **errors)
{
	struct tql_cc *cc;
	struct tql_node *root;
	tm_tql_prog *p;
	size_t len, i;
	uint32_t nbrack = 0;
	int rc = TM_OK, want_bool = opts ? opts->want_bool : 0;

	if (errors)
		*errors = NULL;
	if (!out)
		return TM_ERR_INVALID_ARG;
	*out = NULL;
	if (!src)
		return TM_ERR_INVALID_ARG;
	len = strlen(src);
	cc = calloc(1, sizeof(*cc));
	p = calloc(1, sizeof(*p));
	if (!cc || !p) {
		free(cc);
		free(p);
		return TM_ERR_NOMEM;
	}
	cc->prog = p;
	cc->opts = opts;
	cc->src = src;
	if (len > TQL_MAX_SOURCE) {
		cc->len = 0;
		tql_error(cc, 0, 0, 0, 0, 0, "expression too long (%zu bytes; the limit is %d)",
			  len, TQL_MAX_SOURCE);
		rc = TM_ERR_TQL;
		goto done;
	}
	cc->len = (uint32_t)len;
	for (i = 0; i < len; i++)
		nbrack += src[i] == '[';
	cc->poolcap = cc->len + 16;
	cc->pool = malloc(cc->poolcap);
	cc->dimscap = nbrack * TM_MAX_RANK;
	cc->dims = malloc((cc->dimscap + 1) * sizeof(*cc->dims));
	p->src = tm_strdup0(src);
	p->pool = cc->pool;
	p->dims = cc->dims;
	if (!cc->pool || !cc->dims || !p->src) {
		rc = TM_ERR_NOMEM;
		goto done;
	}
	root = tql_parse(cc);
	if (cc->nomem) {
		rc = TM_ERR_NOMEM;
		goto done;
	}
	if (root && !cc->fatal) {
		int t = check(cc, root);

		if (cc->nomem) {
			rc = TM_ERR_NOMEM;
			goto done;
		}
		if (want_bool && t != T_ERR && t != TM_TQL_BOOL && t != T_DYN)
			tql_error(cc, root->lo, root->lo, root->hi, 0, 0,
				  "a condition must be true or false, but this is %s%s",
				  type_name(t), is_numeric(t) ?
				  " (compare it, e.g. 'tensor.nan_count > 0')" : "");
		p->result_type = t == T_DYN ? (want_bool ? TM_TQL_BOOL : TM_TQL_UNKNOWN) :
				 t == T_ERR ? TM_TQL_UNKNOWN : (uint8_t)t;
	}
	if (cc->nerrs || !root) {
		rc = TM_ERR_TQL;
		goto done;
	}
	rc = generate(cc, root, want_bool);
done:
	if (rc == TM_ERR_TQL && errors)
		*errors = format_errors(cc);
	tql_arena_free(cc);
	free(cc);
	if (rc) {
		tm_tql_free(p);
		return rc;
	}
	*out = p;
	return TM_OK;
}
