/*
 * tql-lex.c -- the TQL lexer: source bytes to tokens, one at a time, for the
 * parser's single token of lookahead.
 *
 * A "word" is an identifier that may continue with '.', ':' or '#' when the
 * next byte continues a name, so that `tensor.nan_count`, `node.path` and
 * addressed terms such as `model.layers.0:out.std` are one token; the checker
 * decides what a word means.  A word may open with a rank,
 * `@1:model.fc:out.std` (multi-rank sessions), part of the same token.
 * Number literals may carry a time unit (`1ms` = 1000000, an integer of
 * nanoseconds) to compare with `time`.
 * Errors become TK_ERROR tokens after being reported, so the parser only has
 * to make an error node of them.  Every read is bounded by cc->len.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tql-int.h"

static const char *const tok_names[TK__COUNT] = {
	[TK_EOF] = "end of input", [TK_ERROR] = "error",
	[TK_INT] = "integer", [TK_NUM] = "number", [TK_STR] = "string",
	[TK_WORD] = "name", [TK_VAR] = "variable",
	[TK_TRUE] = "'true'", [TK_FALSE] = "'false'",
	[TK_AND] = "'&&'", [TK_OR] = "'||'", [TK_NOT] = "'!'",
	[TK_PLUS] = "'+'", [TK_MINUS] = "'-'", [TK_STAR] = "'*'",
	[TK_SLASH] = "'/'", [TK_PERCENT] = "'%'", [TK_POW] = "'**'",
	[TK_EQ] = "'=='", [TK_NE] = "'!='", [TK_LT] = "'<'", [TK_LE] = "'<='",
	[TK_GT] = "'>'", [TK_GE] = "'>='", [TK_MATCH] = "'=~'",
	[TK_LPAREN] = "'('", [TK_RPAREN] = "')'", [TK_LBRACK] = "'['",
	[TK_RBRACK] = "']'", [TK_COMMA] = "','",
	[TK_QUEST] = "'?'", [TK_COLON] = "':'",
};

const char *tql_tok_name(int kind)
{
	return kind >= 0 && kind < TK__COUNT ? tok_names[kind] : "?";
}

static int is_name_start(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int is_name_char(int c)
{
	return is_name_start(c) || (c >= '0' && c <= '9');
}

static int is_digit(int c)
{
	return c >= '0' && c <= '9';
}

static int at(const struct tql_cc *cc, uint32_t i)
{
	return i < cc->len ? (unsigned char)cc->src[i] : 0;
}

/* Copies bytes into the string pool (sized at compile start to hold every
 * literal of the source, escapes only shrink) and NUL-terminates them. */
const char *tql_pool_add(struct tql_cc *cc, const char *s, uint32_t n)
{
	char *d;

	if (cc->poolused + n + 1 > cc->poolcap)
		return NULL;
	d = cc->pool + cc->poolused;
	memcpy(d, s, n);
	d[n] = '\0';
	cc->poolused += n + 1;
	return d;
}

/* Time-unit suffixes of number literals, in nanoseconds. */
static const struct {
	const char *name;
	double scale;
} units[] = {
	{ "ns", 1 }, { "us", 1e3 }, { "ms", 1e6 }, { "s", 1e9 },
};

static int digit_value(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return 99;
}

/* 0x... (base 16) or 0... (base 8), digits from i on; no unit suffix. */
static void lex_c_int(struct tql_cc *cc, struct tql_token *t, int base, uint32_t i)
{
	uint32_t first = i;
	uint64_t v = 0;
	int over = 0, bad = 0;

	while (is_name_char(at(cc, i))) {
		int d = digit_value(at(cc, i));

		if (d >= base)
			bad = 1;
		else if (v > (uint64_t)INT64_MAX / (uint64_t)base ||
			 v * (uint64_t)base + (uint64_t)d > (uint64_t)INT64_MAX)
			over = 1;
		else
			v = v * (uint64_t)base + (uint64_t)d;
		i++;
	}
	t->hi = cc->pos = i;
	if (bad || i == first) {
		tql_error(cc, t->lo, t->lo, t->hi, 0, 0, "invalid number \"%.*s\"",
			  (int)(t->hi - t->lo > 40 ? 40 : t->hi - t->lo), cc->src + t->lo);
		t->kind = TK_ERROR;
		return;
	}
	if (over) {
		tql_error(cc, t->lo, t->lo, t->hi, 0, 0,
			  "integer literal too large (the limit is %lld)",
			  (long long)INT64_MAX);
		t->kind = TK_ERROR;
		return;
	}
	t->kind = TK_INT;
	t->v.i = (int64_t)v;
}

/*
 * number := digits [ "." digits ] [ ("e"|"E") ["+"|"-"] digits ] [ unit ]
 * An integer without '.' or exponent is TK_INT (int64); a unit makes the
 * value an integer number of nanoseconds.  As in C, 0x1F is hexadecimal
 * and 017 octal (integers only, no unit).
 */
static void lex_number(struct tql_cc *cc, struct tql_token *t)
{
	uint32_t i = cc->pos, s;
	int real = 0;
	char buf[64];
	size_t n, u;

	/* C integer literals, as GDB reads them: 0x1f is hex, 017 octal */
	if (at(cc, i) == '0' && (at(cc, i + 1) == 'x' || at(cc, i + 1) == 'X')) {
		lex_c_int(cc, t, 16, i + 2);
		return;
	}
	if (at(cc, i) == '0' && is_digit(at(cc, i + 1))) {
		uint32_t j = i;

		while (is_digit(at(cc, j)))
			j++;
		if (at(cc, j) != '.' && at(cc, j) != 'e' && at(cc, j) != 'E') {
			lex_c_int(cc, t, 8, i + 1);
			return;
		}
	}
	while (is_digit(at(cc, i)))
		i++;
	if (at(cc, i) == '.' && is_digit(at(cc, i + 1))) {
		real = 1;
		i++;
		while (is_digit(at(cc, i)))
			i++;
	}
	if ((at(cc, i) == 'e' || at(cc, i) == 'E') &&
	    (is_digit(at(cc, i + 1)) ||
	     ((at(cc, i + 1) == '+' || at(cc, i + 1) == '-') && is_digit(at(cc, i + 2))))) {
		real = 1;
		i += 2;
		while (is_digit(at(cc, i)))
			i++;
	}
	n = i - cc->pos;
	s = i;
	while (is_name_char(at(cc, i)))
		i++;
	t->hi = cc->pos = i;
	if (n >= sizeof(buf)) {
		tql_error(cc, t->lo, t->lo, t->hi, 0, 0, "number literal too long");
		t->kind = TK_ERROR;
		return;
	}
	memcpy(buf, cc->src + t->lo, n);
	buf[n] = '\0';
	errno = 0;
	if (real) {
		t->kind = TK_NUM;
		t->v.d = strtod(buf, NULL);
	} else {
		t->kind = TK_INT;
		t->v.i = (int64_t)strtoll(buf, NULL, 10);
		if (errno == ERANGE) {
			tql_error(cc, t->lo, t->lo, t->hi, 0, 0,
				  "integer literal too large (the limit is %lld)",
				  (long long)INT64_MAX);
			t->kind = TK_ERROR;
			return;
		}
	}
	if (s == i)
		return;
	for (u = 0; u < TM_ARRAY_LEN(units); u++) {
		double d;

		if (strlen(units[u].name) != i - s ||
		    memcmp(units[u].name, cc->src + s, i - s))
			continue;
		d = (real ? t->v.d : (double)t->v.i) * units[u].scale;
		if (!(d < 9.2e18)) {
			tql_error(cc, t->lo, t->lo, t->hi, 0, 0, "time literal too large");
			t->kind = TK_ERROR;
			return;
		}
		t->kind = TK_INT;
		t->v.i = (int64_t)llround(d);
		return;
	}
	tql_error(cc, s, s, i, 0, 0,
		  "bad suffix '%.*s' on a number (time units: ns, us, ms, s)",
		  (int)(i - s), cc->src + s);
	t->kind = TK_ERROR;
}

/* string := '"' { char | '\' ( '"' | '\' | 'n' | 't' ) } '"'  (also '...') */
static void lex_string(struct tql_cc *cc, struct tql_token *t)
{
	int q = at(cc, cc->pos);
	uint32_t i = cc->pos + 1;
	char *d = cc->pool + cc->poolused;
	uint32_t n = 0;

	for (;;) {
		int c = at(cc, i);

		if (i >= cc->len || c == '\n') {
			tql_error(cc, t->lo, t->lo, i, 0, 0,
				  "unterminated string (a closing %c is missing)", q);
			t->kind = TK_ERROR;
			cc->pos = t->hi = i;
			return;
		}
		i++;
		if (c == q)
			break;
		if (c == '\\') {
			int e = at(cc, i);

			switch (e) {
			case '"': case '\'': case '\\': c = e; break;
			case 'n': c = '\n'; break;
			case 't': c = '\t'; break;
			default:
				tql_error(cc, i - 1, i - 1, i + 1, 0, 0,
					  "unknown escape '\\%c' in a string "
					  "(use \\\\, \\\", \\n or \\t)",
					  e >= 32 && e < 127 ? e : '?');
				break;
			}
			i++;
		}
		/* The pool holds at least len + 1 bytes past every earlier
		 * literal, and a literal never decodes longer than its text. */
		if (cc->poolused + n + 1 < cc->poolcap)
			d[n++] = (char)c;
	}
	d[n] = '\0';
	cc->poolused += n + 1;
	t->kind = TK_STR;
	t->v.str.s = d;
	t->v.str.len = n;
	cc->pos = t->hi = i;
}

/* var := "$" ( name | digits | "$" [ digits ] | nothing ) { "." name } */
static void lex_var(struct tql_cc *cc, struct tql_token *t)
{
	uint32_t i = cc->pos + 1;
	const char *s;

	if (at(cc, i) == '$') {
		i++;
		while (is_digit(at(cc, i)))
			i++;
	} else if (is_name_start(at(cc, i))) {
		while (is_name_char(at(cc, i)))
			i++;
	} else {
		while (is_digit(at(cc, i)))
			i++;
	}
	/* $z.numel, $3.shape: a field of a variable that holds a tensor; the
	 * environment answers the dotted name */
	while (at(cc, i) == '.' && is_name_start(at(cc, i + 1)) && i > cc->pos + 1) {
		i++;
		while (is_name_char(at(cc, i)))
			i++;
	}
	s = tql_pool_add(cc, cc->src + cc->pos + 1, i - cc->pos - 1);
	cc->pos = t->hi = i;
	if (!s) {
		cc->nomem = 1;
		t->kind = TK_ERROR;
		return;
	}
	t->kind = TK_VAR;
	t->v.str.s = s;
	t->v.str.len = i - t->lo - 1;
}

static int word_is(const struct tql_token *t, const char *kw)
{
	size_t n = strlen(kw);

	return t->v.str.len == n && !memcmp(t->v.str.s, kw, n);
}

/*
 * word := name { ( "." | ":" | "#" ) name-or-digits | rows }
 * rows := "[r" digits "]" after a slot (a ':' seen): one request's rows,
 * `model.fc:out[r1].mean`, as stop lines name them; any other '[' is an
 * index of its own.
 */
static void lex_word(struct tql_cc *cc, struct tql_token *t)
{
	uint32_t i = cc->pos, j;
	int slot = 0;

	for (;;) {
		while (is_name_char(at(cc, i)))
			i++;
		if (slot && at(cc, i) == '[' && at(cc, i + 1) == 'r' && is_digit(at(cc, i + 2))) {
			for (j = i + 2; is_digit(at(cc, j)); j++)
				;
			if (at(cc, j) == ']') {
				i = j + 1;
				continue;
			}
		}
		if ((at(cc, i) == '.' || at(cc, i) == ':' || at(cc, i) == '#') &&
		    is_name_char(at(cc, i + 1))) {
			slot |= at(cc, i) == ':';
			i++;
		} else {
			break;
		}
	}
	cc->pos = t->hi = i;
	t->kind = TK_WORD;
	t->v.str.s = cc->src + t->lo;
	t->v.str.len = i - t->lo;
	if (t->v.str.len > TM_ADDRESS_MAX) {
		tql_error(cc, t->lo, t->lo, t->hi, 0, 0, "name too long (over %d bytes)",
			  TM_ADDRESS_MAX);
		t->kind = TK_ERROR;
	} else if (word_is(t, "true")) {
		t->kind = TK_TRUE;
	} else if (word_is(t, "false")) {
		t->kind = TK_FALSE;
	} else if (word_is(t, "and")) {
		t->kind = TK_AND;
	} else if (word_is(t, "or")) {
		t->kind = TK_OR;
	} else if (word_is(t, "not")) {
		t->kind = TK_NOT;
	} else if (word_is(t, "inf")) {
		t->kind = TK_NUM;
		t->v.d = INFINITY;
	} else if (word_is(t, "nan")) {
		t->kind = TK_NUM;
		t->v.d = NAN;
	}
}

/*
 * ranked := "@" ( digits | "*" ) ":" word
 * Only the shape is checked here; the checker reads the rank.
 */
static void lex_ranked(struct tql_cc *cc, struct tql_token *t)
{
	uint32_t i = cc->pos + 1;

	if (at(cc, i) == '*')
		i++;
	else
		while (is_digit(at(cc, i)))
			i++;
	if (i == cc->pos + 1 || at(cc, i) != ':' || !is_name_start(at(cc, i + 1))) {
		if (i == cc->pos + 1 && i < cc->len)
			i++;
		tql_error(cc, t->lo, t->lo, i, 0, 0,
			  "a rank is written '@R:' before a node path, e.g. "
			  "'@1:model.fc:out.std'");
		t->kind = TK_ERROR;
		cc->pos = t->hi = i;
		return;
	}
	cc->pos = i + 1;
	lex_word(cc, t);
}

/* Two-character operators first, then one-character ones. */
static const struct {
	char s[3];
	uint8_t kind;
} ops[] = {
	{ "**", TK_POW }, { "==", TK_EQ }, { "!=", TK_NE }, { "<=", TK_LE },
	{ ">=", TK_GE }, { "=~", TK_MATCH }, { "&&", TK_AND }, { "||", TK_OR },
	{ "+", TK_PLUS }, { "-", TK_MINUS }, { "*", TK_STAR }, { "/", TK_SLASH },
	{ "%", TK_PERCENT }, { "<", TK_LT }, { ">", TK_GT }, { "!", TK_NOT },
	{ "(", TK_LPAREN }, { ")", TK_RPAREN }, { "[", TK_LBRACK },
	{ "]", TK_RBRACK }, { ",", TK_COMMA }, { "?", TK_QUEST },
	{ ":", TK_COLON },
};

/* Advances cc->tok to the next token. */
void tql_lex_next(struct tql_cc *cc)
{
	struct tql_token *t = &cc->tok;
	size_t k;
	int c;

	while (cc->pos < cc->len &&
	       (at(cc, cc->pos) == ' ' || at(cc, cc->pos) == '\t' ||
		at(cc, cc->pos) == '\n' || at(cc, cc->pos) == '\r'))
		cc->pos++;
	memset(t, 0, sizeof(*t));
	t->lo = t->hi = cc->pos;
	if (cc->pos >= cc->len) {
		t->kind = TK_EOF;
		return;
	}
	c = at(cc, cc->pos);
	if (is_digit(c) || (c == '.' && is_digit(at(cc, cc->pos + 1)))) {
		lex_number(cc, t);
		return;
	}
	if (c == '"' || c == '\'') {
		lex_string(cc, t);
		return;
	}
	if (c == '$') {
		lex_var(cc, t);
		return;
	}
	/* "ref.@1:model.fc:out.std": a rank after ref., one token */
	if (c == 'r' && cc->pos + 5 < cc->len && !memcmp(cc->src + cc->pos, "ref.@", 5) &&
	    (cc->pos == 0 || !is_name_char(at(cc, cc->pos - 1)))) {
		cc->pos += 4;
		lex_ranked(cc, t);
		return;
	}
	if (is_name_start(c)) {
		lex_word(cc, t);
		return;
	}
	/* '@' alone stays an unexpected character; "@1", "@*", "@:" are
	 * meant as ranks and get the rank's message. */
	if (c == '@' && (is_digit(at(cc, cc->pos + 1)) || at(cc, cc->pos + 1) == '*' ||
			 at(cc, cc->pos + 1) == ':')) {
		lex_ranked(cc, t);
		return;
	}
	for (k = 0; k < TM_ARRAY_LEN(ops); k++) {
		size_t n = ops[k].s[1] ? 2 : 1;

		if (c == ops[k].s[0] && (n == 1 || at(cc, cc->pos + 1) == ops[k].s[1])) {
			t->kind = ops[k].kind;
			cc->pos = t->hi = cc->pos + (uint32_t)n;
			return;
		}
	}
	t->kind = TK_ERROR;
	t->hi = ++cc->pos;
	if (c == '=')
		tql_error(cc, t->lo, t->lo, t->hi, 0, 0,
			  "'=' is not an operator: use '==' to compare");
	else if (c == '&')
		tql_error(cc, t->lo, t->lo, t->hi, 0, 0, "'&' is not an operator: use '&&'");
	else if (c == '|')
		tql_error(cc, t->lo, t->lo, t->hi, 0, 0, "'|' is not an operator: use '||'");
	else if (c >= 32 && c < 127)
		tql_error(cc, t->lo, t->lo, t->hi, 0, 0, "unexpected character '%c'", c);
	else
		tql_error(cc, t->lo, t->lo, t->hi, 0, 0,
			  "unexpected byte 0x%02x", (unsigned)c);
}
