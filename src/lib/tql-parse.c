/*
 * tql-parse.c -- the TQL parser: tokens to a syntax tree, by precedence
 * climbing (doc/tql.md has the whole grammar).
 *
 * Precedence, loosest first:
 *   0  ?:             right (C's conditional; a ? b : c ? d : e)
 *   1  || or          left
 *   2  && and         left
 *   3  ! not          prefix (looser than comparison: `not x > 0` negates
 *                     the comparison, as in Python)
 *   4  == != < <= > >= =~   non-associative (a < b < c is an error)
 *   5  + -            left
 *   6  * / %          left
 *   7  - +            prefix
 *   8  **             right; binds tighter than a prefix minus on its left
 *   9  a[i, j]        postfix indexing
 *
 * The parser recovers where it can so that one compile reports several
 * errors: a missing operand becomes an error node, a missing ')' is
 * reported and assumed.  Nesting is capped (TQL_MAX_DEPTH) so hostile input
 * cannot exhaust the C stack.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tql-int.h"

enum {
	PREC_OR = 1, PREC_AND, PREC_NOT, PREC_CMP, PREC_ADD, PREC_MUL,
	PREC_NEG, PREC_POW
};

/* Nodes live in blocks freed together when compilation ends. */
#define ARENA_BLOCK 128
struct tql_arena {
	struct tql_arena *next;
	unsigned used;
	struct tql_node nodes[ARENA_BLOCK];
};

struct tql_node *tql_node_new(struct tql_cc *cc, int kind, uint32_t lo, uint32_t hi)
{
	struct tql_arena *a = cc->arena;
	struct tql_node *n;

	if (!a || a->used == ARENA_BLOCK) {
		a = calloc(1, sizeof(*a));
		if (!a) {
			cc->nomem = 1;
			cc->fatal = 1;
			return NULL;
		}
		a->next = cc->arena;
		cc->arena = a;
	}
	n = &a->nodes[a->used++];
	n->kind = (uint8_t)kind;
	n->height = 1;
	n->lo = lo;
	n->hi = hi;
	n->pos = lo;
	return n;
}

void tql_arena_free(struct tql_cc *cc)
{
	while (cc->arena) {
		struct tql_arena *a = cc->arena;

		cc->arena = a->next;
		free(a);
	}
}

/*
 * The checker and the generator recurse over the tree, so its height is
 * capped as well as the parser's nesting: `1 + 1 + ...` is parsed in a loop
 * but makes a tree as deep as it is long.
 */
static void set_height(struct tql_cc *cc, struct tql_node *n)
{
	const struct tql_node *x;
	uint32_t h = 0;

	if (n->a && n->a->height > h)
		h = n->a->height;
	if (n->b && n->b->height > h)
		h = n->b->height;
	for (x = n->args; x; x = x->next)
		if (x->height > h)
			h = x->height;
	n->height = h + 1;
	if (n->height > TQL_MAX_HEIGHT && !cc->fatal) {
		tql_error(cc, n->pos, n->lo, n->hi, 0, 0,
			  "expression too complex (more than %d operations deep)",
			  TQL_MAX_HEIGHT);
		cc->fatal = 1;
	}
}

static int binop_prec(int tok)
{
	switch (tok) {
	case TK_OR: return PREC_OR;
	case TK_AND: return PREC_AND;
	case TK_EQ: case TK_NE: case TK_LT: case TK_LE: case TK_GT: case TK_GE:
	case TK_MATCH:
		return PREC_CMP;
	case TK_PLUS: case TK_MINUS: return PREC_ADD;
	case TK_STAR: case TK_SLASH: case TK_PERCENT: return PREC_MUL;
	case TK_POW: return PREC_POW;
	default: return 0;
	}
}

static struct tql_node *parse_expr(struct tql_cc *cc, int minprec);
static struct tql_node *parse_prefix(struct tql_cc *cc);
static struct tql_node *parse_cond(struct tql_cc *cc);

static int starts_operand(int tok)
{
	switch (tok) {
	case TK_INT: case TK_NUM: case TK_STR: case TK_WORD: case TK_VAR:
	case TK_TRUE: case TK_FALSE: case TK_NOT: case TK_MINUS: case TK_PLUS:
	case TK_LPAREN: case TK_LBRACK:
		return 1;
	default:
		return 0;
	}
}

static struct tql_node *error_node(struct tql_cc *cc, uint32_t lo, uint32_t hi)
{
	struct tql_node *n = tql_node_new(cc, N_ERROR, lo, hi);

	if (n)
		n->type = T_ERR;
	return n;
}

/* Describes the current token for "expected X, found Y" messages. */
static void found_text(const struct tql_cc *cc, char *buf, size_t len)
{
	const struct tql_token *t = &cc->tok;

	if (t->kind == TK_EOF)
		snprintf(buf, len, "the end of the expression");
	else
		snprintf(buf, len, "'%.*s'", (int)(t->hi - t->lo > 40 ? 40 : t->hi - t->lo),
			 cc->src + t->lo);
}

/*
 * args := [ expr { "," expr } ]     up to the closing token `close`
 * Returns the argument list; the caller has consumed the opening token.
 */
static struct tql_node *parse_list(struct tql_cc *cc, int close, uint32_t open,
				   uint32_t *count, uint32_t *end)
{
	struct tql_node *head = NULL, **tail = &head;

	*count = 0;
	*end = open + 1;
	if (cc->tok.kind != close) {
		for (;;) {
			struct tql_node *e = parse_cond(cc);

			if (!e)
				return NULL;
			*tail = e;
			tail = &e->next;
			++*count;
			if (cc->tok.kind != TK_COMMA)
				break;
			tql_lex_next(cc);
		}
	}
	if (cc->tok.kind == close) {
		*end = cc->tok.hi;
		tql_lex_next(cc);
	} else if (!cc->fatal) {
		char found[64];

		found_text(cc, found, sizeof(found));
		tql_error(cc, cc->tok.lo, cc->tok.lo, cc->tok.hi, open, open + 1,
			  "expected ',' or %s to close the list, found %s",
			  tql_tok_name(close), found);
	}
	if (head)
		*end = *end > head->hi ? *end : head->hi;
	return head;
}

/*
 * primary := INT | NUM | STRING | "true" | "false" | VAR
 *          | WORD [ "(" args ")" ]          field, addressed term or call
 *          | "(" expr ")"
 *          | "[" args "]"                  shape literal
 */
static struct tql_node *parse_primary(struct tql_cc *cc)
{
	struct tql_token t = cc->tok;
	struct tql_node *n;
	uint32_t count;

	switch (t.kind) {
	case TK_INT:
	case TK_NUM:
	case TK_STR:
	case TK_TRUE:
	case TK_FALSE:
		n = tql_node_new(cc, N_CONST, t.lo, t.hi);
		if (!n)
			return NULL;
		if (t.kind == TK_INT) {
			n->val.type = TM_TQL_INT;
			n->val.v.i = t.v.i;
		} else if (t.kind == TK_NUM) {
			n->val.type = TM_TQL_NUM;
			n->val.v.d = t.v.d;
		} else if (t.kind == TK_STR) {
			n->val.type = TM_TQL_STR;
			n->val.v.str.s = t.v.str.s;
			n->val.v.str.len = t.v.str.len;
		} else {
			n->val.type = TM_TQL_BOOL;
			n->val.v.b = t.kind == TK_TRUE;
		}
		n->type = n->val.type;
		tql_lex_next(cc);
		return n;
	case TK_VAR:
		n = tql_node_new(cc, N_VAR, t.lo, t.hi);
		if (!n)
			return NULL;
		n->word.s = t.v.str.s;
		n->word.len = t.v.str.len;
		tql_lex_next(cc);
		return n;
	case TK_WORD:
		tql_lex_next(cc);
		if (cc->tok.kind == TK_LPAREN) {
			uint32_t open = cc->tok.lo;

			tql_lex_next(cc);
			n = tql_node_new(cc, N_CALL, t.lo, t.hi);
			if (!n)
				return NULL;
			n->args = parse_list(cc, TK_RPAREN, open, &count, &n->hi);
			n->nargs = count;
			set_height(cc, n);
		} else {
			n = tql_node_new(cc, N_WORD, t.lo, t.hi);
			if (!n)
				return NULL;
		}
		n->word.s = t.v.str.s;
		n->word.len = t.v.str.len;
		return n;
	case TK_LPAREN:
		tql_lex_next(cc);
		n = parse_cond(cc);
		if (!n)
			return NULL;
		if (cc->tok.kind == TK_RPAREN) {
			n->lo = t.lo;
			n->hi = cc->tok.hi;
			tql_lex_next(cc);
		} else if (!cc->fatal) {
			char found[64];

			found_text(cc, found, sizeof(found));
			tql_error(cc, cc->tok.lo, cc->tok.lo, cc->tok.hi, t.lo, t.hi,
				  "expected ')' to match this '(', found %s", found);
		}
		return n;
	case TK_LBRACK:
		tql_lex_next(cc);
		n = tql_node_new(cc, N_LIST, t.lo, t.hi);
		if (!n)
			return NULL;
		n->args = parse_list(cc, TK_RBRACK, t.lo, &count, &n->hi);
		n->nargs = count;
		set_height(cc, n);
		return n;
	case TK_ERROR:
		/* already reported by the lexer */
		tql_lex_next(cc);
		return error_node(cc, t.lo, t.hi);
	default: {
		char found[64];

		found_text(cc, found, sizeof(found));
		tql_error(cc, t.lo, t.lo, t.hi, 0, 0,
			  "expected an expression, found %s", found);
		/* Skip the stray token unless something outside wants it. */
		if (t.kind == TK_EOF || t.kind == TK_RPAREN || t.kind == TK_RBRACK ||
		    t.kind == TK_COMMA)
			return error_node(cc, t.lo, t.hi);
		tql_lex_next(cc);
		/* `1 +* 2`: an operator too many; take what follows as the
		 * operand so the rest of the expression is still checked */
		if (binop_prec(t.kind) && starts_operand(cc->tok.kind)) {
			struct tql_node *e = parse_prefix(cc);

			n = error_node(cc, t.lo, e ? e->hi : t.hi);
			return n;
		}
		return error_node(cc, t.lo, t.hi);
	}
	}
}

/* postfix := primary { "[" args "]" } */
static struct tql_node *parse_postfix(struct tql_cc *cc)
{
	struct tql_node *n = parse_primary(cc);

	while (n && !cc->fatal && cc->tok.kind == TK_LBRACK) {
		struct tql_node *x;
		uint32_t open = cc->tok.lo, count;

		tql_lex_next(cc);
		x = tql_node_new(cc, N_INDEX, n->lo, open + 1);
		if (!x)
			return NULL;
		x->pos = open;
		x->a = n;
		x->args = parse_list(cc, TK_RBRACK, open, &count, &x->hi);
		x->nargs = count;
		if (!count && !cc->fatal)
			tql_error(cc, open, open, x->hi, 0, 0, "an index is missing between '[' and ']'");
		set_height(cc, x);
		n = x;
	}
	return n;
}

/*
 * prefix := ( "!" | "not" ) expr(PREC_NOT)
 *         | ( "-" | "+" ) expr(PREC_NEG)
 *         | primary
 */
static struct tql_node *parse_prefix(struct tql_cc *cc)
{
	struct tql_token t = cc->tok;
	struct tql_node *n, *e;

	if (t.kind != TK_NOT && t.kind != TK_MINUS && t.kind != TK_PLUS)
		return parse_postfix(cc);
	tql_lex_next(cc);
	e = parse_expr(cc, t.kind == TK_NOT ? PREC_NOT : PREC_NEG);
	if (!e)
		return NULL;
	n = tql_node_new(cc, N_UNARY, t.lo, e->hi);
	if (!n)
		return NULL;
	n->op = t.kind;
	n->pos = t.lo;
	n->a = e;
	set_height(cc, n);
	return n;
}

/*
 * expr(p) := prefix { binop expr(q) }   for binops of precedence >= p, where
 *            q = prec + 1 (left associative, comparisons), prec (for **)
 */
static struct tql_node *parse_expr(struct tql_cc *cc, int minprec)
{
	struct tql_node *lhs;
	int chained = 0;

	if (cc->fatal)
		return error_node(cc, cc->tok.lo, cc->tok.hi);
	if (++cc->depth > TQL_MAX_DEPTH) {
		tql_error(cc, cc->tok.lo, cc->tok.lo, cc->tok.hi, 0, 0,
			  "expression nested too deeply (over %d levels)", TQL_MAX_DEPTH);
		cc->fatal = 1;
		cc->depth--;
		return error_node(cc, cc->tok.lo, cc->tok.hi);
	}
	lhs = parse_prefix(cc);
	while (lhs && !cc->fatal) {
		struct tql_token op = cc->tok;
		int prec = binop_prec(op.kind);
		struct tql_node *rhs, *n;

		if (!prec || prec < minprec)
			break;
		tql_lex_next(cc);
		rhs = parse_expr(cc, prec == PREC_POW ? prec : prec + 1);
		if (!rhs) {
			lhs = NULL;
			break;
		}
		/* a chained comparison was reported: no follow-on type error */
		n = tql_node_new(cc, chained ? N_ERROR : N_BINARY, lhs->lo, rhs->hi);
		if (!n) {
			lhs = NULL;
			break;
		}
		if (chained)
			n->type = T_ERR;
		chained = 0;
		n->op = op.kind;
		n->pos = op.lo;
		n->a = lhs;
		n->b = rhs;
		set_height(cc, n);
		lhs = n;
		if (prec == PREC_CMP && binop_prec(cc->tok.kind) == PREC_CMP) {
			tql_error(cc, cc->tok.lo, lhs->lo, lhs->hi, cc->tok.lo, cc->tok.hi,
				  "comparisons do not chain: write 'a < b && b < c'");
			/* parse on as if it were allowed, to find more errors */
			chained = 1;
		}
	}
	cc->depth--;
	return lhs;
}

/* cond := expr(PREC_OR) [ "?" cond ":" cond ] */
static struct tql_node *parse_cond(struct tql_cc *cc)
{
	struct tql_node *c, *a, *b, *n;
	uint32_t q;

	c = parse_expr(cc, PREC_OR);
	if (!c || cc->fatal || cc->tok.kind != TK_QUEST)
		return c;
	q = cc->tok.lo;
	if (++cc->depth > TQL_MAX_DEPTH) {
		tql_error(cc, q, q, q + 1, 0, 0,
			  "expression nested too deeply (over %d levels)", TQL_MAX_DEPTH);
		cc->fatal = 1;
		cc->depth--;
		return error_node(cc, q, q + 1);
	}
	tql_lex_next(cc);
	a = parse_cond(cc);
	if (!a) {
		cc->depth--;
		return NULL;
	}
	if (cc->tok.kind != TK_COLON) {
		if (!cc->fatal) {
			char found[64];

			found_text(cc, found, sizeof(found));
			tql_error(cc, cc->tok.lo, cc->tok.lo, cc->tok.hi, q, q + 1,
				  "expected ':' for this '?', found %s", found);
		}
		cc->depth--;
		return error_node(cc, c->lo, a->hi);
	}
	tql_lex_next(cc);
	b = parse_cond(cc);
	cc->depth--;
	if (!b)
		return NULL;
	n = tql_node_new(cc, N_COND, c->lo, b->hi);
	if (!n)
		return NULL;
	n->pos = q;
	n->a = c;
	n->b = a;
	n->args = b;
	set_height(cc, n);
	return n;
}

/* program := cond EOF */
struct tql_node *tql_parse(struct tql_cc *cc)
{
	struct tql_node *n;

	tql_lex_next(cc);
	if (cc->tok.kind == TK_EOF) {
		tql_error(cc, 0, 0, 0, 0, 0, "empty expression");
		return NULL;
	}
	n = parse_cond(cc);
	if (n && !cc->fatal && cc->tok.kind != TK_EOF) {
		char found[64];

		found_text(cc, found, sizeof(found));
		tql_error(cc, cc->tok.lo, cc->tok.lo, cc->tok.hi, 0, 0,
			  "expected an operator or the end of the expression, found %s",
			  found);
	}
	return n;
}
