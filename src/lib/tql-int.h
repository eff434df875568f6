/*
 * tql-int.h -- what the parts of TQL share: tokens (tql-lex.c), the syntax
 * tree (tql-parse.c), the compiler state and the compiled program
 * (tql-compile.c), the instruction set (opcodes.def, run by tql-vm.c) and
 * the extension-function registry (tql-ffi.c).  Not installed.
 *
 * The pipeline: tql_lex_next() hands tokens to the precedence-climbing
 * parser, which builds nodes in a compile-time arena; tql_check() resolves
 * names, types and folds constants; tql_gen() emits bytecode into the
 * program.  Only the program survives compilation.
 */
#ifndef TQL_INT_H
#define TQL_INT_H

#include <ffi.h>

#include "tm-internal.h"
#include "tm-address.h"
#include "tm-tql.h"

#define TQL_MAX_SOURCE (64 * 1024)   /* bytes of TQL text */
#define TQL_MAX_DEPTH 200            /* nesting of the parser */
#define TQL_MAX_HEIGHT 1000          /* of the tree: bounds the checker's recursion */
#define TQL_MAX_ERRORS 16            /* reported per compile */
#define TQL_MAX_ARGS 8               /* per function call */
#define TQL_MAX_CODE 65536           /* instructions per program */
#define TQL_HIST_MAX_KEYS 65536      /* (node, slot) pairs prev() remembers */
#define TQL_MAX_RANKSET UINT16_MAX   /* ranks one "@*:" term expands to */

/* ---------------------------------------------------------------- tokens */

enum tql_tok {
	TK_EOF = 0, TK_ERROR,
	TK_INT, TK_NUM, TK_STR, TK_WORD, TK_VAR,
	TK_TRUE, TK_FALSE, TK_AND, TK_OR, TK_NOT,
	TK_PLUS, TK_MINUS, TK_STAR, TK_SLASH, TK_PERCENT, TK_POW,
	TK_EQ, TK_NE, TK_LT, TK_LE, TK_GT, TK_GE, TK_MATCH,
	TK_LPAREN, TK_RPAREN, TK_LBRACK, TK_RBRACK, TK_COMMA,
	TK_QUEST, TK_COLON,
	TK__COUNT
};

struct tql_token {
	uint8_t kind;           /* enum tql_tok */
	uint32_t lo, hi;        /* byte span in the source */
	union {
		int64_t i;
		double d;
		struct { const char *s; uint32_t len; } str;  /* STR, WORD, VAR */
	} v;
};

/* ---------------------------------------------------------------- types */

/* Static types: tm_tql_type values plus these two. */
enum {
	T_DYN = 16,     /* known only at run time ($variables) */
	T_ERR = 17      /* already reported: silences follow-on errors */
};

/* ---------------------------------------------------------------- tree */

enum tql_node_kind {
	N_ERROR = 0,
	N_CONST,        /* literal or folded */
	N_WORD,         /* field or addressed term, resolved by the checker */
	N_VAR,
	N_UNARY,        /* op: TK_MINUS, TK_PLUS, TK_NOT */
	N_BINARY,       /* op: the operator token */
	N_CALL,         /* name in word; arguments in args */
	N_LIST,         /* [a, b]: elements in args */
	N_COND,         /* a ? b : args (one node) */
	N_INDEX         /* a[args]: a shape's dimension, a captured element */
};

/* Tensor fields beyond the stats (which are 0..TM_STAT__COUNT-1). */
enum {
	TF_SHAPE = TM_STAT__COUNT,
	TF_DTYPE,
	TF_RANK,
	TF_NUMEL,       /* the NUMEL stat, else the product of the shape */
	TF__END
};

enum tql_efield {
	EF_STEP = 0, EF_SEQ, EF_TIME, EF_PHASE,
	EF_NODE_PATH, EF_NODE_TYPE, EF_NODE_DEPTH,
	EF_RANK,        /* the process's rank: ctx->rank, not the event's */
	EF_REQUEST,     /* the step's request ids: env->annotation("request") */
	EF_REQUEST_COUNT,
	/* an op event's (TM_EV_OP): unknown at other events */
	EF_OP_NAME, EF_OP_INDEX, EF_OP_LINE, EF_OP_FILE,
	EF_OP_INPUTS_FINITE, EF_OP_MADE_NONFINITE,
	EF_CALL,        /* the event's call number (#N; the root's: micro-batch) */
	EF_SCALER_SCALE,        /* annotation "scaler.scale" as a number */
	EF_SCALER_SKIPPED,      /* annotation "scaler.skipped": absent is false */
	EF_ANNOT,       /* annot.KEY: any key's values, a list; insn b = the key
			 * (NUL-ended, in the pool) */
	EF_EVENT,       /* the event's kind: "enter", "exit", "raise", ... */
	/* a raise event's (TM_EV_RAISE): its "exception" annotation; unknown
	 * at other events */
	EF_EXC_TYPE, EF_EXC_MESSAGE,
	EF__COUNT
};

/* What a checked N_WORD or N_CALL became. */
enum tql_resolved {
	R_NONE = 0,
	R_TENSOR,       /* aux = stat or TF_* */
	R_EVENT,        /* aux = EF_* */
	R_ADDR,         /* aux = index into the program's addressed-term table */
	R_BUILTIN,      /* aux = builtin function id */
	R_EXTERN,       /* aux = index into the funcs registry */
	R_PREV,         /* aux = site */
	R_DELTA,        /* aux = site */
	R_REF,          /* ref.tensor.FIELD: aux = stat or TF_* */
	R_REF_ADDR,     /* ref.NODE:SLOT.field: aux as R_ADDR */
	R_RANKSET       /* "@*:" argument of max/min/spread: aux = first index
			 * into the addressed-term table, nargs = how many
			 * (one per rank, in rank order) */
};

struct tql_node {
	uint8_t kind;           /* enum tql_node_kind */
	uint8_t op;             /* token kind of the operator */
	uint8_t type;           /* static type once checked */
	uint8_t res;            /* enum tql_resolved */
	uint32_t aux;
	uint32_t lo, hi;        /* source span of the whole node */
	uint32_t pos;           /* operator / name position for the caret */
	uint32_t nargs;
	uint32_t height;        /* 1 for a leaf */
	struct tql_node *a, *b; /* operands */
	struct tql_node *args;  /* call arguments / list elements, via next */
	struct tql_node *next;
	struct { const char *s; uint32_t len; } word;  /* N_WORD, N_CALL, N_VAR */
	struct tm_tql_value val;                       /* N_CONST */
};

/* ---------------------------------------------------------------- program */

struct tql_insn {
	uint16_t op;
	uint16_t a;
	uint32_t b;
};

struct tql_addr {
	uint32_t node;
	struct tm_slot slot;
	uint32_t call;
	uint32_t field;         /* stat or TF_* */
	char *text;             /* for the disassembler */
};

struct tql_ext;             /* one loaded extension function (tql-ffi.c) */

/* prev()/delta() memory: open addressing over (node, slot) keys. */
struct tql_hist {
	uint64_t *keys;         /* 0: empty slot */
	struct tm_tql_value *vals;  /* cap * nsites */
	uint32_t cap;           /* power of two */
	uint32_t used;
	uint32_t limit;         /* keys accepted before new ones are refused */
};

/*
 * A list test against a constant (request == "x") gives the same answer at
 * every event of a step: the answer is kept for the list it was computed
 * on.  A list is known by where its items are and its annotation's seq,
 * step, time and sizes: a producer reuses one buffer for every step, and
 * a deterministic rerun repeats seqs and steps, but not times to the
 * nanosecond.  tm_tql_reset forgets them (tmdb: another trace or run).
 */
#define TQL_MEMOS 4
struct tql_memo {
	const char *const *items;       /* NULL: nothing kept */
	uint64_t seq, step, time_ns;
	uint32_t n, count;
	int result;                     /* 1, 0, -1 unknown */
};

struct tm_tql_prog {
	char *src;
	char *pool;             /* string literals and variable names (NUL-ended) */
	int64_t *dims;          /* shape literals */
	struct tql_insn *code;
	uint32_t ncode;
	struct tm_tql_value *k;
	uint32_t nk;
	struct tql_addr *addrs;
	uint32_t naddrs;
	const struct tql_ext **ext;   /* extension functions called */
	uint32_t next;
	uint32_t maxstack;
	struct tm_tql_value *stack;
	uint32_t nsites;
	struct tm_tql_value *cur, *prev;  /* per site, this evaluation */
	struct tql_hist hist;
	uint8_t result_type;
	uint8_t uses_lookup;
	uint8_t uses_reference;         /* ref.*, maxabsdiff(), ... */
	char scratch[2][TM_ADDRESS_MAX + 1];  /* NUL-terminated copies for =~ */
	/* The last =~ pattern, parsed: a constant pattern is parsed once, not
	 * at every evaluation (the VM does not allocate per event). */
	tm_address *glob;
	int glob_bad;                  /* the pattern in glob_src does not parse */
	char glob_src[TM_ADDRESS_MAX + 1];
	struct tql_memo memo[TQL_MEMOS];   /* ANY_* with b < TQL_MEMOS */
};

/* ---------------------------------------------------------------- compiler */

struct tql_err {
	uint32_t pos;           /* caret */
	uint32_t lo[2], hi[2];  /* underlined ranges (empty when lo == hi) */
	char msg[320];
};

struct tql_arena;

struct tql_cc {
	const char *src;
	uint32_t len;
	const struct tm_tql_compile_opts *opts;
	/* lexer */
	uint32_t pos;
	struct tql_token tok;
	char *pool;
	uint32_t poolused, poolcap;
	/* parser */
	int depth;
	int fatal;              /* stop parsing: too deep, too many errors */
	struct tql_arena *arena;
	/* checker */
	int in_prev;
	int rankset_ok;         /* the word being checked may be "@*:" */
	uint32_t nsites;
	struct tql_node *sites[256];
	uint32_t ndims, dimscap;
	int64_t *dims;
	tm_tql_prog *prog;
	/* errors */
	struct tql_err errs[TQL_MAX_ERRORS];
	int nerrs;
	int nomem;
};

void tql_lex_next(struct tql_cc *cc);
const char *tql_tok_name(int kind);
/* Copies n bytes into the compile pool, NUL-ended; NULL when it is full. */
const char *tql_pool_add(struct tql_cc *cc, const char *s, uint32_t n);

struct tql_node *tql_parse(struct tql_cc *cc);
struct tql_node *tql_node_new(struct tql_cc *cc, int kind, uint32_t lo, uint32_t hi);
void tql_arena_free(struct tql_cc *cc);

/* Records an error with a caret at pos and ranges [lo0, hi0), [lo1, hi1). */
void tql_error(struct tql_cc *cc, uint32_t pos, uint32_t lo0, uint32_t hi0,
	       uint32_t lo1, uint32_t hi1, const char *fmt, ...)
	__attribute__((format(printf, 7, 8)));

/* The VM core: runs code from pc 0 with the program's stack. */
void tql_run(tm_tql_prog *p, const struct tql_insn *code,
	     const struct tm_tql_ctx *ctx, struct tm_tql_value *out);
/* Operand kind and stack effect of an opcode. */
int tql_op_pops(int op);
int tql_op_pushes(int op);
const char *tql_op_name(int op);

/* Extension functions (tql-ffi.c). */
const struct tql_ext *tql_ext_find(const tm_tql_funcs *f, const char *name,
				   size_t len);
int tql_ext_nargs(const struct tql_ext *e);
int tql_ext_arg_type(const struct tql_ext *e, int i);   /* TM_TQL_NUM/INT/BOOL */
int tql_ext_ret_type(const struct tql_ext *e);
const char *tql_ext_name(const struct tql_ext *e);
void tql_ext_call(const struct tql_ext *e, const struct tm_tql_value *args,
		  struct tm_tql_value *out);

/* Builtin function table (tql-compile.c). */
int tql_builtin_find(const char *name, size_t len);

/* Bounded Levenshtein for "did you mean" among a fixed list of names. */
size_t tql_edit_distance(const char *a, size_t alen, const char *b, size_t blen);

enum tql_opcode {
#define TQL_OP(name, operand, pops, pushes) OP_##name,
#include "opcodes.def"
#undef TQL_OP
	OP__COUNT
};

#endif /* TQL_INT_H */
