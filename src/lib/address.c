/*
 * address.c -- graph node addresses and patterns (ARCHITECTURE 3).
 *
 * Users name what they want to look at with addresses: breakpoints, print,
 * watch, TQL addressed terms, reader filters and level overrides all parse
 * their text here, so there is exactly one grammar and one canonical
 * spelling.  Parsing normalises (trims whitespace, turns "layers[3]" into
 * "layers.3", folds ":out.0" to ":out") and compiles the path into segments
 * so that matching, which callers run once per node when they build per-node
 * bitmaps, is a walk over the node's address with no allocation.
 *
 * Unknown addresses are answered with suggestions (tm_address_suggest), by
 * edit distance plus a bonus for a missing root ("layers.3.mlp" ->
 * "model.layers.3.mlp"), the way git and GDB say "did you mean".
 *
 * A multi-rank session (torch.distributed) has one node table for every
 * rank, its addresses prefixed "@R:" ("@1:model.fc").  An address may name
 * the rank the same way ("@1:model.fc:out", "@*:model.**"); written without
 * one it applies to every rank, as GDB's `break foo` applies to every
 * inferior.  The prefix is kept beside the path, never inside it, so the
 * path matching below is the same for both kinds of table.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tm-internal.h"
#include "tm-address.h"

enum seg_kind {
	SEG_LIT,        /* plain name: "mlp", "3" */
	SEG_STAR,       /* "*": exactly one segment */
	SEG_DSTAR,      /* "**": zero or more segments */
	SEG_GLOB        /* a name with '*' inside: "layer*", "*_proj" */
};

struct seg {
	uint16_t off;   /* into path */
	uint16_t len;
	uint8_t kind;
};

struct tm_address {
	char *path;             /* canonical path, NUL-terminated, no "@R:" */
	size_t pathlen;
	int32_t rank;           /* TM_RANK_NONE, TM_RANK_ANY or 0..TM_RANK_MAX */
	uint32_t call;          /* #N, 0 = any */
	struct tm_slot slot;
	uint8_t has_slot;
	uint8_t any_index;      /* ":out.*" */
	uint8_t wild_path;      /* the path has a '*' somewhere */
	uint8_t has_op;         /* "!OP": an operation inside the call */
	uint32_t op_index;      /* "!3": the op's index in the call, 0 any */
	uint32_t op_line;       /* "!div@42", "!@42": its source line, 0 any */
	char op_name[TM_OP_NAME_MAX];   /* "!div": a glob over op names, "" any */
	uint32_t nsegs;
	struct seg segs[];      /* the path string follows the segments */
};

/* Segment characters: what named_modules() produces for Python attribute
 * names and ModuleList indices (Unicode identifiers pass as UTF-8 bytes).
 * Everything else is syntax, so that TQL can find where an address ends. */
static inline int is_name_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '_' || c >= 0x80;
}

static inline int is_space(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
	       c == '\v';
}

static const char *const slot_names[TM_SLOT__COUNT] = {
	"out", "in", "grad_out", "grad_in", "data", "grad"
};

static int slot_kind_lookup(const char *s, size_t len)
{
	int k;

	for (k = 0; k < TM_SLOT__COUNT; k++)
		if (strlen(slot_names[k]) == len && !memcmp(s, slot_names[k], len))
			return k;
	return -1;
}

/*
 * The length of a canonical rank prefix at s ("@0:", "@12:": no sign, no
 * leading zero, at most TM_RANK_MAX), 0 when there is none; *rank gets R.
 * Node tables hold rank-prefixed addresses only in this spelling, so exact
 * lookups (tm_nodetab_find) agree with tm_address_format.
 */
static size_t rank_prefix(const char *s, size_t len, int32_t *rank)
{
	size_t i = 1;
	int32_t v = 0;

	if (len < 3 || s[0] != '@')
		return 0;
	while (i < len && i <= 6 && s[i] >= '0' && s[i] <= '9') {
		v = v * 10 + (s[i] - '0');
		i++;
	}
	if (i == 1 || i == len || s[i] != ':' || v > TM_RANK_MAX ||
	    (s[1] == '0' && i > 2))
		return 0;
	if (rank)
		*rank = v;
	return i + 1;
}

int tm_path_valid(const char *s, size_t len)
{
	size_t i, seglen = 0, nsegs = 1;

	if (!s || len == 0 || len >= TM_ADDRESS_MAX)
		return 0;
	i = rank_prefix(s, len, NULL);
	s += i;
	len -= i;
	if (len == 0)
		return 0;
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '.') {
			if (seglen == 0 || ++nsegs > TM_ADDRESS_MAX_SEGMENTS)
				return 0;
			seglen = 0;
		} else if (is_name_char(c)) {
			seglen++;
		} else {
			return 0;
		}
	}
	return seglen > 0;
}

/*
 * Module names are arbitrary strings (ModuleDict keys such as "conv-1" or
 * "b c"); addresses are not, so that TQL can tell where one ends.  Every
 * character that cannot stand in a segment becomes '_'.
 */
size_t tm_path_segment(const char *name, char *out, size_t len)
{
	size_t i, n = name ? strlen(name) : 0;

	if (len == 0)
		return 0;
	if (n == 0) {
		if (len < 2)
			return 0;
		memcpy(out, "_", 2);
		return 1;
	}
	if (n >= len)
		return 0;
	for (i = 0; i < n; i++)
		out[i] = is_name_char((unsigned char)name[i]) ? name[i] : '_';
	out[n] = '\0';
	return n;
}

/* ------------------------------------------------------------- parsing */

/* Parser state: the text, the trimmed end, and the canonical output. */
struct parser {
	const char *text;
	size_t pos;
	size_t end;
	int errcol;
	const char *errmsg;
	char path[TM_ADDRESS_MAX];
	size_t pathlen;
	struct seg segs[TM_ADDRESS_MAX_SEGMENTS];
	uint32_t nsegs;
};

static int fail(struct parser *p, size_t col, const char *msg)
{
	p->errcol = (int)col;
	p->errmsg = msg;
	return TM_ERR_ADDRESS;
}

/* Appends one segment to the canonical path.  Runs of "**" fold to one,
 * since "a.**.**.b" and "a.**.b" match the same paths. */
static int emit_seg(struct parser *p, const char *s, size_t len, int kind,
		    size_t col)
{
	size_t need = len + (p->nsegs ? 1 : 0);

	if (kind == SEG_DSTAR && p->nsegs &&
	    p->segs[p->nsegs - 1].kind == SEG_DSTAR)
		return TM_OK;
	if (p->nsegs >= TM_ADDRESS_MAX_SEGMENTS)
		return fail(p, col, "too many segments");
	if (p->pathlen + need >= TM_ADDRESS_MAX)
		return fail(p, col, "address too long");
	if (p->nsegs)
		p->path[p->pathlen++] = '.';
	p->segs[p->nsegs].off = (uint16_t)p->pathlen;
	p->segs[p->nsegs].len = (uint16_t)len;
	p->segs[p->nsegs].kind = (uint8_t)kind;
	p->nsegs++;
	memcpy(p->path + p->pathlen, s, len);
	p->pathlen += len;
	return TM_OK;
}

/*
 * segment := ( name-char | '*' )+
 * A segment of only stars is "*" or "**"; a star among name characters is
 * an in-segment glob ("layer*"), where "**" would be ambiguous and is refused.
 */
static int parse_segment(struct parser *p)
{
	size_t start = p->pos, i, stars = 0;
	const char *s = p->text + start;
	size_t len;
	int kind = SEG_LIT;

	while (p->pos < p->end) {
		unsigned char c = (unsigned char)p->text[p->pos];

		if (c == '*')
			stars++;
		else if (!is_name_char(c))
			break;
		p->pos++;
	}
	len = p->pos - start;
	if (len == 0) {
		char c = p->pos < p->end ? p->text[p->pos] : '\0';

		if (is_space((unsigned char)c))
			return fail(p, p->pos, "unexpected space");
		if (c && c != '.' && c != '[' && c != '#' && c != ':' && c != '!')
			return fail(p, p->pos, "unexpected character");
		return fail(p, p->pos, "empty segment");
	}
	if (stars == len) {
		if (len > 2)
			return fail(p, start + 2, "too many '*' (use '*' or '**')");
		kind = len == 1 ? SEG_STAR : SEG_DSTAR;
	} else if (stars) {
		for (i = 0; i + 1 < len; i++)
			if (s[i] == '*' && s[i + 1] == '*')
				return fail(p, start + i,
					    "'**' must be a whole segment");
		kind = SEG_GLOB;
	}
	return emit_seg(p, s, len, kind, start);
}

/* Parses decimal digits at pos into *v (capped at max); 0 if none. */
static size_t parse_number(struct parser *p, uint64_t max, uint64_t *v,
			   int *overflow)
{
	size_t n = 0;

	*v = 0;
	*overflow = 0;
	while (p->pos < p->end && p->text[p->pos] >= '0' && p->text[p->pos] <= '9') {
		*v = *v * 10 + (uint64_t)(p->text[p->pos] - '0');
		if (*v > max) {
			*overflow = 1;
			*v = max;
		}
		p->pos++;
		n++;
	}
	return n;
}

/*
 * index := '[' ( digit+ | '*' | '**' ) ']'
 * Python spells ModuleList members layers[3]; named_modules() says layers.3.
 */
static int parse_index(struct parser *p)
{
	size_t start, len, stars = 0;
	int kind = SEG_LIT;

	p->pos++;       /* '[' */
	start = p->pos;
	while (p->pos < p->end && ((p->text[p->pos] >= '0' && p->text[p->pos] <= '9') ||
				   p->text[p->pos] == '*')) {
		stars += p->text[p->pos] == '*';
		p->pos++;
	}
	len = p->pos - start;
	if (len == 0)
		return fail(p, start, "expected an index inside '[]'");
	if (stars) {
		if (stars != len || len > 2)
			return fail(p, start, "bad index (use a number, '*' or '**')");
		kind = len == 1 ? SEG_STAR : SEG_DSTAR;
	}
	if (p->pos >= p->end || p->text[p->pos] != ']')
		return fail(p, p->pos, "expected ']'");
	p->pos++;
	return emit_seg(p, p->text + start, len, kind, start);
}

/*
 * rows := '[' 'r' digit+ ']' after a slot: one request's rows of it
 * (TM_SLOT_ROWS), as stop lines and info stats name them.
 */
static int parse_rows(struct parser *p, tm_address *a)
{
	size_t start = p->pos;
	uint64_t v;
	int overflow;

	if (p->pos >= p->end || p->text[p->pos] != '[')
		return TM_OK;
	if (a->any_index)
		return fail(p, start, "a slot index '*' takes no request rows");
	if (a->slot.index >= TM_SLOT_ROW_INDEX_MAX)
		return fail(p, start, "slot index too large for request rows");
	p->pos++;
	if (p->pos >= p->end || p->text[p->pos] != 'r')
		return fail(p, p->pos, "expected 'r' and a request number, as in out[r0]");
	p->pos++;
	start = p->pos;
	if (!parse_number(p, TM_SLOT_ROW_MAX - 1, &v, &overflow))
		return fail(p, start, "expected a request number, as in out[r0]");
	if (overflow || v >= TM_SLOT_ROW_MAX)
		return fail(p, start, "request number too large (rows of 128 requests at most)");
	if (p->pos >= p->end || p->text[p->pos] != ']')
		return fail(p, p->pos, "expected ']'");
	p->pos++;
	a->slot = tm_slot_row_of(a->slot, (unsigned)v);
	return TM_OK;
}

/*
 * slot := slot-name [ '.' ( digit+ | '*' ) ] [ rows ]
 * slot-name := out | in | grad_out | grad_in | data | grad
 */
static int parse_slot(struct parser *p, tm_address *a)
{
	size_t start = p->pos;
	uint64_t v;
	int k, overflow;

	while (p->pos < p->end && ((p->text[p->pos] >= 'a' && p->text[p->pos] <= 'z') ||
				   p->text[p->pos] == '_'))
		p->pos++;
	if (p->pos == start)
		return fail(p, start, "expected a slot name after ':'");
	k = slot_kind_lookup(p->text + start, p->pos - start);
	if (k < 0)
		return fail(p, start, "bad slot name (out, in, grad_out, grad_in, data, grad)");
	a->has_slot = 1;
	a->slot.kind = (uint8_t)k;
	a->slot.index = 0;
	if (p->pos >= p->end || p->text[p->pos] != '.')
		return parse_rows(p, a);
	if (k == TM_SLOT_DATA || k == TM_SLOT_GRAD)
		return fail(p, p->pos, "'data' and 'grad' slots take no index");
	p->pos++;
	if (p->pos < p->end && p->text[p->pos] == '*') {
		p->pos++;
		a->any_index = 1;
		return parse_rows(p, a);
	}
	start = p->pos;
	/* indexes from TM_SLOT_ROWS on are requests' rows, written out[rJ] */
	if (!parse_number(p, TM_SLOT_ROWS - 1, &v, &overflow))
		return fail(p, start, "expected a slot index or '*'");
	if (overflow)
		return fail(p, start, "slot index too large");
	a->slot.index = (uint16_t)v;
	return parse_rows(p, a);
}

/*
 * rank := '@' ( digit+ | '*' ) ':'
 * "@1:" names rank 1 of a distributed run, "@*:" every rank.
 */
static int parse_rank(struct parser *p, tm_address *a)
{
	size_t start = ++p->pos;        /* '@' */
	uint64_t v;
	int overflow;

	if (p->pos < p->end && p->text[p->pos] == '*') {
		p->pos++;
		a->rank = TM_RANK_ANY;
	} else {
		if (!parse_number(p, TM_RANK_MAX + 1, &v, &overflow))
			return fail(p, start, "expected a rank number or '*' after '@'");
		if (v > TM_RANK_MAX)
			return fail(p, start, "rank too large (ranks are 0..65535)");
		a->rank = (int32_t)v;
	}
	if (p->pos >= p->end || p->text[p->pos] != ':')
		return fail(p, p->pos, "expected ':' after the rank (\"@1:model.fc\")");
	p->pos++;
	return TM_OK;
}

/*
 * op := '!' ( digit+ | op-name [ '@' digit+ ] | '@' digit+ )
 * op-name := ( name-char | '*' | '.' | "::" )+
 * An operation inside a module call (doc/manual.md "Operations"): its
 * index in the call from 1, a glob over its name ("div", "aten::div.Tensor",
 * "*mm*"), its source line, or a name and a line.
 */
static int parse_op(struct parser *p, tm_address *a)
{
	size_t start = ++p->pos, n = 0;         /* '!' */
	uint64_t v;
	int overflow;

	a->has_op = 1;
	if (p->pos < p->end && p->text[p->pos] >= '0' && p->text[p->pos] <= '9') {
		parse_number(p, UINT32_MAX, &v, &overflow);
		if (overflow)
			return fail(p, start, "op index too large");
		if (v == 0)
			return fail(p, start, "op indexes start at 1");
		a->op_index = (uint32_t)v;
		return TM_OK;
	}
	while (p->pos < p->end) {
		unsigned char c = (unsigned char)p->text[p->pos];

		if (c == ':' && p->pos + 1 < p->end && p->text[p->pos + 1] == ':') {
			if (n + 2 >= TM_OP_NAME_MAX)
				return fail(p, p->pos, "op name too long");
			a->op_name[n++] = ':';
			a->op_name[n++] = ':';
			p->pos += 2;
			continue;
		}
		if (!is_name_char(c) && c != '*' && c != '.')
			break;
		if (n + 1 >= TM_OP_NAME_MAX)
			return fail(p, p->pos, "op name too long");
		a->op_name[n++] = (char)c;
		p->pos++;
	}
	a->op_name[n] = '\0';
	if (p->pos < p->end && p->text[p->pos] == '@') {
		size_t lstart = ++p->pos;

		if (!parse_number(p, UINT32_MAX, &v, &overflow) || v == 0)
			return fail(p, lstart, "expected a source line after '@'");
		if (overflow)
			return fail(p, lstart, "source line too large");
		a->op_line = (uint32_t)v;
	} else if (n == 0) {
		return fail(p, start, "expected an op index, name or '@LINE' after '!'");
	}
	if (n && (a->op_name[0] == '.' || a->op_name[n - 1] == '.'))
		return fail(p, start, "bad op name");
	return TM_OK;
}

/*
 * address := ws [ rank ] path [ '#' digit+ ] [ op ] [ ':' slot ] ws
 * path    := segment index* ( '.' segment index* )*
 */
static int parse(struct parser *p, tm_address *a)
{
	uint64_t v;
	int err, overflow;

	if (p->pos == p->end)
		return fail(p, p->pos, "empty address");
	if (p->text[p->pos] == '@') {
		err = parse_rank(p, a);
		if (err)
			return err;
		if (p->pos == p->end)
			return fail(p, p->pos, "missing node path after the rank");
	}
	if (p->text[p->pos] == ':' || p->text[p->pos] == '#' || p->text[p->pos] == '!')
		return fail(p, p->pos, "missing node path");
	for (;;) {
		err = parse_segment(p);
		if (err)
			return err;
		while (p->pos < p->end && p->text[p->pos] == '[') {
			err = parse_index(p);
			if (err)
				return err;
		}
		if (p->pos < p->end && p->text[p->pos] == '.') {
			p->pos++;
			if (p->pos == p->end)
				return fail(p, p->pos, "empty segment");
			continue;
		}
		break;
	}
	if (p->pos < p->end && p->text[p->pos] == '#') {
		size_t start = ++p->pos;

		if (!parse_number(p, UINT32_MAX, &v, &overflow))
			return fail(p, start, "expected a call number after '#'");
		if (overflow)
			return fail(p, start, "call number too large");
		if (v == 0)
			return fail(p, start, "call numbers start at 1");
		a->call = (uint32_t)v;
	}
	if (p->pos < p->end && p->text[p->pos] == '!') {
		err = parse_op(p, a);
		if (err)
			return err;
	}
	if (p->pos < p->end && p->text[p->pos] == ':') {
		p->pos++;
		err = parse_slot(p, a);
		if (err)
			return err;
	}
	if (p->pos < p->end) {
		if (is_space((unsigned char)p->text[p->pos]))
			return fail(p, p->pos, "unexpected space");
		return fail(p, p->pos, "unexpected character");
	}
	return TM_OK;
}

int tm_address_parse(const char *text, tm_address **out, int *errcol,
		     const char **errmsg)
{
	struct parser *p;
	tm_address a0, *a;
	size_t len, i;
	int err;

	if (out)
		*out = NULL;
	if (errcol)
		*errcol = -1;
	if (errmsg)
		*errmsg = NULL;
	if (!text || !out)
		return TM_ERR_INVALID_ARG;
	/* The parser holds a path-sized buffer and the segment table; keep it
	 * off the stack of whoever calls us (readline handlers, the probe). */
	p = malloc(sizeof(*p));
	if (!p)
		return TM_ERR_NOMEM;
	p->text = text;
	p->pos = 0;
	p->end = strlen(text);
	p->errcol = -1;
	p->errmsg = NULL;
	p->pathlen = 0;
	p->nsegs = 0;
	while (p->pos < p->end && is_space((unsigned char)text[p->pos]))
		p->pos++;
	while (p->end > p->pos && is_space((unsigned char)text[p->end - 1]))
		p->end--;
	memset(&a0, 0, sizeof(a0));
	a0.rank = TM_RANK_NONE;
	err = parse(p, &a0);
	if (err) {
		if (errcol)
			*errcol = p->errcol;
		if (errmsg)
			*errmsg = p->errmsg;
		free(p);
		return err;
	}
	len = sizeof(*a) + p->nsegs * sizeof(struct seg) + p->pathlen + 1;
	a = malloc(len);
	if (!a) {
		free(p);
		return TM_ERR_NOMEM;
	}
	*a = a0;
	a->nsegs = p->nsegs;
	memcpy(a->segs, p->segs, p->nsegs * sizeof(struct seg));
	a->path = (char *)(a->segs + p->nsegs);
	memcpy(a->path, p->path, p->pathlen);
	a->path[p->pathlen] = '\0';
	a->pathlen = p->pathlen;
	for (i = 0; i < a->nsegs; i++)
		if (a->segs[i].kind != SEG_LIT)
			a->wild_path = 1;
	free(p);
	*out = a;
	return TM_OK;
}

void tm_address_free(tm_address *a)
{
	free(a);
}

int tm_address_format(const tm_address *a, char *buf, size_t len)
{
	char slot[32] = "", rank[16] = "", op[TM_OP_NAME_MAX + 16] = "", call[16] = "";
	int n;

	if (!a || !buf || len == 0)
		return TM_ERR_INVALID_ARG;
	if (a->has_slot) {
		slot[0] = ':';
		if (a->any_index)
			snprintf(slot, sizeof(slot), ":%s.*", slot_names[a->slot.kind]);
		else if (a->slot.kind == TM_SLOT_DATA || a->slot.kind == TM_SLOT_GRAD)
			snprintf(slot, sizeof(slot), ":%s", slot_names[a->slot.kind]);
		else if (tm_slot_format(a->slot, slot + 1, sizeof(slot) - 1) != TM_OK)
			return TM_ERR_INVALID_ARG;
	}
	if (a->rank == TM_RANK_ANY)
		snprintf(rank, sizeof(rank), "@*:");
	else if (a->rank >= 0)
		snprintf(rank, sizeof(rank), "@%d:", (int)a->rank);
	if (a->call)
		snprintf(call, sizeof(call), "#%u", a->call);
	if (a->has_op && a->op_index)
		snprintf(op, sizeof(op), "!%u", a->op_index);
	else if (a->has_op && a->op_line)
		snprintf(op, sizeof(op), "!%s@%u", a->op_name, a->op_line);
	else if (a->has_op)
		snprintf(op, sizeof(op), "!%s", a->op_name);
	n = snprintf(buf, len, "%s%s%s%s%s", rank, a->path, call, op, slot);
	return n < 0 || (size_t)n >= len ? TM_ERR_INVALID_ARG : TM_OK;
}

const char *tm_address_path(const tm_address *a)
{
	return a ? a->path : NULL;
}

int tm_address_rank(const tm_address *a)
{
	return a ? a->rank : TM_RANK_NONE;
}

int tm_address_node_rank(const char *node_address, const char **rest)
{
	int32_t r = TM_RANK_NONE;
	size_t n = 0;

	if (node_address)
		n = rank_prefix(node_address, strnlen(node_address, 8), &r);
	if (rest)
		*rest = node_address ? node_address + n : NULL;
	return n ? r : TM_RANK_NONE;
}

int tm_address_is_pattern(const tm_address *a)
{
	return a && (a->wild_path || a->any_index);
}

int tm_address_has_slot(const tm_address *a)
{
	return a && a->has_slot;
}

struct tm_slot tm_address_slot(const tm_address *a, int *any_index)
{
	struct tm_slot none = { 0, 0 };

	if (any_index)
		*any_index = a ? a->any_index : 0;
	return a ? a->slot : none;
}

uint32_t tm_address_call(const tm_address *a)
{
	return a ? a->call : 0;
}

int tm_address_has_op(const tm_address *a)
{
	return a && a->has_op;
}

uint32_t tm_address_op_index(const tm_address *a)
{
	return a && a->has_op ? a->op_index : 0;
}

/* ------------------------------------------------------------- matching */

/* Character glob inside one segment: '*' is any run, possibly empty.  One
 * backtrack point suffices because '*' is the only wildcard. */
static int glob_chars(const char *pat, size_t plen, const char *s, size_t slen)
{
	size_t pi = 0, si = 0, star_pi = SIZE_MAX, star_si = 0;

	while (si < slen) {
		if (pi < plen && pat[pi] == '*') {
			star_pi = pi++;
			star_si = si;
		} else if (pi < plen && pat[pi] == s[si]) {
			pi++;
			si++;
		} else if (star_pi != SIZE_MAX) {
			pi = star_pi + 1;
			si = ++star_si;
		} else {
			return 0;
		}
	}
	while (pi < plen && pat[pi] == '*')
		pi++;
	return pi == plen;
}

static inline int seg_match(const tm_address *a, const struct seg *g,
			    const char *s, size_t len)
{
	switch (g->kind) {
	case SEG_LIT:
		return len == g->len && !memcmp(a->path + g->off, s, len);
	case SEG_STAR:
		return len > 0;
	case SEG_GLOB:
		return glob_chars(a->path + g->off, g->len, s, len);
	default:
		return 0;
	}
}

/*
 * Segment-wise glob of the compiled pattern over a dotted path.  "**" is the
 * only multi-segment wildcard, so the classic single-backtrack-point walk is
 * exact: on a mismatch the last "**" swallows one more segment and the rest
 * of the pattern is retried from there.
 */
static int match_segments(const tm_address *a, const char *path)
{
	uint32_t pi = 0, star_pi = UINT32_MAX;
	const char *p = path, *star_p = NULL;

	if (!*path)
		p = NULL;
	while (p) {
		const char *dot = strchr(p, '.');
		size_t len = dot ? (size_t)(dot - p) : strlen(p);
		const char *next = dot ? dot + 1 : NULL;

		if (pi < a->nsegs && a->segs[pi].kind == SEG_DSTAR) {
			star_pi = pi++;
			star_p = p;
			continue;
		}
		if (pi < a->nsegs && seg_match(a, &a->segs[pi], p, len)) {
			pi++;
			p = next;
			continue;
		}
		if (star_pi == UINT32_MAX)
			return 0;
		/* Let the last "**" take one more segment. */
		dot = strchr(star_p, '.');
		star_p = dot ? dot + 1 : NULL;
		p = star_p;
		pi = star_pi + 1;
	}
	while (pi < a->nsegs && a->segs[pi].kind == SEG_DSTAR)
		pi++;
	return pi == a->nsegs;
}

/* The rank rule first (an unqualified or "@*:" address takes every rank,
 * "@R:" only nodes prefixed "@R:"), then the path without its prefix. */
int tm_address_match_path(const tm_address *a, const char *node_address)
{
	const char *path;
	int r;

	if (!a || !node_address)
		return 0;
	r = tm_address_node_rank(node_address, &path);
	if (a->rank >= 0 && r != a->rank)
		return 0;
	if (!a->wild_path)
		return !strcmp(a->path, path);
	return match_segments(a, path);
}

/*
 * An op name glob matches the whole name ("aten::div.Tensor"), the name
 * without its "aten::" namespace ("div.Tensor"), or either without the
 * overload ("aten::div", "div"), so that "div" finds every division.
 */
int tm_op_name_match(const char *pattern, const char *name)
{
	const char *bare, *dot;
	size_t plen, blen;

	if (!pattern || !name)
		return 0;
	if (!*pattern)
		return 1;
	plen = strlen(pattern);
	if (glob_chars(pattern, plen, name, strlen(name)))
		return 1;
	bare = strstr(name, "::");
	bare = bare && !strncmp(name, "aten::", 6) ? bare + 2 : name;
	if (glob_chars(pattern, plen, bare, strlen(bare)))
		return 1;
	dot = strchr(bare, '.');
	blen = dot ? (size_t)(dot - bare) : strlen(bare);
	if (glob_chars(pattern, plen, bare, blen))
		return 1;
	dot = strchr(name + (bare - name), '.');
	return dot && glob_chars(pattern, plen, name, (size_t)(dot - name));
}

/* Does an op site (a TM_NODE_OP node) match the address's op name and line?
 * Its module, the parent, is matched by the path. */
static int op_site_match(const tm_address *a, const struct tm_node *nd)
{
	if (a->op_line && nd->line != a->op_line)
		return 0;
	return tm_op_name_match(a->op_name, nd->type ? nd->type : "");
}

int tm_address_match(const tm_address *a, const char *node_address,
		     uint32_t call, struct tm_slot slot)
{
	if (!a || !node_address)
		return 0;
	if (a->call && a->call != call)
		return 0;
	if (a->has_slot) {
		if (slot.kind != a->slot.kind)
			return 0;
		if (!a->any_index && slot.index != a->slot.index)
			return 0;
	}
	return tm_address_match_path(a, node_address);
}

int tm_address_bind(const tm_address *a, const tm_nodetab *t, uint8_t **kinds,
		    uint32_t *nmatch)
{
	uint32_t n = tm_nodetab_count(t), i;
	uint8_t *k;

	*kinds = NULL;
	*nmatch = 0;
	if (!a)
		return TM_ERR_INVALID_ARG;
	k = calloc(n ? n : 1, 1);
	if (!k)
		return TM_ERR_NOMEM;
	for (i = 0; i < n; i++) {
		const struct tm_node *nd = tm_nodetab_get(t, i);
		const struct tm_node *mod;
		int param, ek;

		if (!nd)
			continue;
		/* an op address selects op sites by their module and the op;
		 * any other address never selects one */
		if (nd->kind == TM_NODE_OP || a->has_op) {
			if (nd->kind != TM_NODE_OP || !a->has_op ||
			    (a->has_slot && a->slot.kind != TM_SLOT_OUT))
				continue;
			mod = tm_nodetab_get(t, nd->parent);
			if (!mod || !tm_address_match_path(a, mod->address) ||
			    !op_site_match(a, nd))
				continue;
			k[i] = (uint8_t)(1u << TM_EV_OP);
			(*nmatch)++;
			continue;
		}
		if (!tm_address_match_path(a, nd->address))
			continue;
		param = nd->kind != TM_NODE_MODULE;
		if (a->has_slot) {
			ek = tm_slot_event_kind(a->slot.kind);
			if ((ek == TM_EV_PARAM) != param)
				continue;
		} else {
			ek = param ? TM_EV_PARAM : TM_EV_EXIT;
		}
		k[i] = (uint8_t)(1u << ek);
		(*nmatch)++;
	}
	*kinds = k;
	return TM_OK;
}

int tm_path_glob(const char *pattern, const char *path)
{
	tm_address *a;
	int r;

	if (!pattern || !path)
		return -1;
	if (tm_address_parse(pattern, &a, NULL, NULL))
		return -1;
	if (a->has_slot || a->call || a->has_op)
		r = -1;
	else
		r = tm_address_match_path(a, path);
	tm_address_free(a);
	return r;
}

/* ------------------------------------------------------------- suggestions */

/*
 * Levenshtein distance restricted to the diagonal band |i - j| <= limit
 * (Ukkonen): cells outside it are over the limit anyway, so the cost is
 * O(len * limit), and a row entirely over the limit stops the walk.
 */
size_t tm_edit_distance(const char *a, const char *b, size_t limit)
{
	size_t la, lb, i, j, big, result;
	size_t stackrow[TM_ADDRESS_MAX + 1], *row = stackrow;

	if (!a || !b)
		return limit == SIZE_MAX ? limit : limit + 1;
	la = strlen(a);
	lb = strlen(b);
	if (la < lb) {
		const char *t = a;

		a = b;
		b = t;
		i = la;
		la = lb;
		lb = i;
	}
	/* Now lb <= la; the distance is at most la. */
	if (limit > la)
		limit = la;
	big = limit + 1;
	if (la - lb > limit)
		return big;
	if (lb == 0)
		return la;
	if (lb + 1 > TM_ARRAY_LEN(stackrow)) {
		row = malloc((lb + 1) * sizeof(*row));
		if (!row)
			return big;
	}
	for (j = 0; j <= lb; j++)
		row[j] = j <= limit ? j : big;
	for (i = 1; i <= la; i++) {
		size_t lo = i > limit ? i - limit : 1;
		size_t hi = i + limit < lb ? i + limit : lb;
		size_t diag = row[lo - 1], rowmin;

		row[lo - 1] = lo == 1 ? (i <= limit ? i : big) : big;
		rowmin = row[lo - 1];
		for (j = lo; j <= hi; j++) {
			size_t up = row[j];
			size_t v = diag + (a[i - 1] != b[j - 1]);

			if (up + 1 < v)
				v = up + 1;
			if (row[j - 1] + 1 < v)
				v = row[j - 1] + 1;
			if (v > big)
				v = big;
			diag = up;
			row[j] = v;
			if (v < rowmin)
				rowmin = v;
		}
		if (rowmin >= big) {
			if (row != stackrow)
				free(row);
			return big;
		}
	}
	result = row[lb] < big ? row[lb] : big;
	if (row != stackrow)
		free(row);
	return result;
}

struct cand {
	size_t score;
	uint32_t id;
};

/* Last segment of a dotted path. */
static const char *last_seg(const char *s, size_t len, size_t *seglen)
{
	const char *dot = NULL;
	size_t i;

	for (i = len; i > 0; i--) {
		if (s[i - 1] == '.') {
			dot = s + i - 1;
			break;
		}
	}
	*seglen = dot ? len - (size_t)(dot + 1 - s) : len;
	return dot ? dot + 1 : s;
}

/*
 * Scores are in half steps of edit distance so bonuses can break ties
 * without outweighing a real edit:
 *   0        the address itself
 *   1        the query is a whole-segment suffix (root left out)
 *   2d - 1   d edits, and the last segments agree
 *   2d       d edits
 * Ties keep table order (the model's own order), which is deterministic.
 */
size_t tm_address_suggest(const tm_nodetab *t, const char *text,
			  const char **out, size_t max)
{
	char q[TM_ADDRESS_MAX + 16];
	size_t qlen, limit, qlast_len, n = 0, k;
	const char *qlast;
	struct cand *best;
	uint32_t id, count;
	tm_address *a;
	int qualified = 0;

	if (!t || !text || !out || max == 0)
		return 0;
	/* Compare canonical paths when the text parses, else the trimmed text.
	 * A query that names a rank is compared with whole node addresses; one
	 * that does not, with their paths, so that "model.fc" finds
	 * "@0:model.fc" in a multi-rank table as it finds "model.fc" in a
	 * single-process one. */
	if (!tm_address_parse(text, &a, NULL, NULL)) {
		qlen = 0;
		if (a->rank == TM_RANK_ANY) {
			memcpy(q, "@*:", 3);
			qlen = 3;
		} else if (a->rank >= 0) {
			qlen = (size_t)snprintf(q, sizeof(q), "@%d:", (int)a->rank);
		}
		qualified = qlen > 0;
		memcpy(q + qlen, a->path, a->pathlen);
		qlen += a->pathlen;
		tm_address_free(a);
	} else {
		const char *s = text, *e;

		while (is_space((unsigned char)*s))
			s++;
		e = s + strlen(s);
		while (e > s && is_space((unsigned char)e[-1]))
			e--;
		qlen = (size_t)(e - s);
		if (qlen >= sizeof(q))
			return 0;
		memcpy(q, s, qlen);
	}
	q[qlen] = '\0';
	if (qlen == 0)
		return 0;
	limit = qlen / 3 > 2 ? qlen / 3 : 2;
	qlast = last_seg(q, qlen, &qlast_len);

	count = tm_nodetab_count(t);
	if (max > count)
		max = count;
	if (max == 0)
		return 0;
	best = malloc(max * sizeof(*best));
	if (!best)
		return 0;
	for (id = 0; id < count; id++) {
		const struct tm_node *node = tm_nodetab_get(t, id);
		const char *s = node->address;
		size_t len, score, d, llen;
		const char *last;

		if (!qualified)
			tm_address_node_rank(s, &s);
		len = strlen(s);

		if (len == qlen && !memcmp(s, q, qlen)) {
			score = 0;
		} else if (len > qlen && s[len - qlen - 1] == '.' &&
			   !memcmp(s + len - qlen, q, qlen)) {
			score = 1;
		} else {
			d = tm_edit_distance(q, s, limit);
			if (d > limit)
				continue;
			score = 2 * d;
			last = last_seg(s, len, &llen);
			if (llen == qlast_len && !memcmp(last, qlast, llen))
				score--;
		}
		if (n == max && score >= best[n - 1].score)
			continue;
		/* Insertion into the sorted top list; equal scores keep id order. */
		k = n < max ? n++ : n - 1;
		while (k > 0 && best[k - 1].score > score) {
			best[k] = best[k - 1];
			k--;
		}
		best[k].score = score;
		best[k].id = id;
	}
	for (k = 0; k < n; k++)
		out[k] = tm_nodetab_get(t, best[k].id)->address;
	free(best);
	return n;
}

/* slot := slot-name [ '.' digit+ ], as in an address after ':' */
int tm_slot_parse(const char *text, struct tm_slot *out)
{
	const char *dot, *br = text ? strchr(text, '[') : NULL;
	size_t len;
	int k;

	if (!text || !out)
		return TM_ERR_INVALID_ARG;
	if (br) {
		/* one request's rows: "out[r1]", "out.2[r0]" (tm_slot_row_of) */
		char base[32];
		unsigned long r = 0;
		const char *s = br + 2;
		int rc;

		if (br[1] != 'r' || (size_t)(br - text) >= sizeof(base) || *s < '0' || *s > '9')
			return TM_ERR_ADDRESS;
		for (; *s >= '0' && *s <= '9'; s++)
			if ((r = r * 10 + (unsigned long)(*s - '0')) >= TM_SLOT_ROW_MAX)
				return TM_ERR_ADDRESS;
		if (strcmp(s, "]"))
			return TM_ERR_ADDRESS;
		memcpy(base, text, (size_t)(br - text));
		base[br - text] = 0;
		if ((rc = tm_slot_parse(base, out)) != TM_OK)
			return rc;
		if (out->index >= TM_SLOT_ROW_INDEX_MAX)
			return TM_ERR_ADDRESS;
		*out = tm_slot_row_of(*out, (unsigned)r);
		return TM_OK;
	}
	dot = strchr(text, '.');
	len = dot ? (size_t)(dot - text) : strlen(text);
	k = slot_kind_lookup(text, len);
	if (k < 0)
		return TM_ERR_ADDRESS;
	out->kind = (uint8_t)k;
	out->index = 0;
	if (dot) {
		const char *s = dot + 1;
		unsigned long v = 0;

		if (k == TM_SLOT_DATA || k == TM_SLOT_GRAD || !*s)
			return TM_ERR_ADDRESS;
		for (; *s; s++) {
			if (*s < '0' || *s > '9')
				return TM_ERR_ADDRESS;
			v = v * 10 + (unsigned long)(*s - '0');
			if (v >= TM_SLOT_ROWS)     /* out[rJ] writes those */
				return TM_ERR_ADDRESS;
		}
		out->index = (uint16_t)v;
	}
	return TM_OK;
}
