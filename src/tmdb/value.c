/*
 * value.c -- the values tmdb keeps: tm_vals (history entries, convenience
 * variables, watchpoints' old values) that own their strings, their
 * formatting and comparison, the value history ($N, $, $$), convenience
 * variables, and TQL's view of both (tm_session_variable).  Session state
 * the session itself sets ($_step, $bpnum) and frees; no command in here.
 */
#include "config.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tmdb.h"

/* ------------------------------------------------------------- values */

void tm_val_clear(struct tm_val *v)
{
	free(v->str);
	memset(v, 0, sizeof(*v));
}

int tm_val_set_scalar(struct tm_val *v, const struct tm_tql_value *src)
{
	tm_val_clear(v);
	v->kind = VAL_SCALAR;
	v->v = *src;
	if (src->type == TM_TQL_STR) {
		v->str = malloc(src->v.str.len + 1);
		if (!v->str) {
			v->v.type = TM_TQL_UNKNOWN;
			return -1;
		}
		memcpy(v->str, src->v.str.s, src->v.str.len);
		v->str[src->v.str.len] = 0;
		v->v.v.str.s = v->str;
	} else if (src->type == TM_TQL_LIST) {
		/* one block: the item pointers, then the strings they point to */
		size_t need = src->v.list.n * sizeof(char *), off;
		const char **items;
		uint32_t i;

		for (i = 0; i < src->v.list.n; i++)
			need += strlen(src->v.list.items[i]) + 1;
		v->str = malloc(need ? need : 1);
		if (!v->str) {
			v->v.type = TM_TQL_UNKNOWN;
			return -1;
		}
		items = (const char **)(void *)v->str;
		off = src->v.list.n * sizeof(char *);
		for (i = 0; i < src->v.list.n; i++) {
			size_t l = strlen(src->v.list.items[i]) + 1;

			memcpy(v->str + off, src->v.list.items[i], l);
			items[i] = v->str + off;
			off += l;
		}
		v->v.v.list.items = items;
	} else if (src->type == TM_TQL_SHAPE) {
		uint8_t r = src->v.shape.rank > TM_MAX_RANK ? TM_MAX_RANK :
							      src->v.shape.rank;

		if (r)
			memcpy(v->dims, src->v.shape.dims, r * sizeof(int64_t));
		v->v.v.shape.dims = v->dims;
		v->v.v.shape.rank = r;
	}
	return 0;
}

void tm_val_set_tensor(struct tm_val *v, const struct tm_tensor *t)
{
	tm_val_clear(v);
	v->kind = VAL_TENSOR;
	v->t = *t;
	v->t.payload = NULL;
	v->t.payload_len = 0;
}

int tm_val_copy(struct tm_val *dst, const struct tm_val *src)
{
	if (src->kind == VAL_TENSOR) {
		tm_val_set_tensor(dst, &src->t);
		return 0;
	}
	return tm_val_set_scalar(dst, &src->v);
}

/* The shortest text that reads back as the same double. */
static void fmt_double(double d, char *buf, size_t len)
{
	int prec;

	if (isnan(d)) {
		snprintf(buf, len, "nan");
		return;
	}
	if (isinf(d)) {
		snprintf(buf, len, d < 0 ? "-inf" : "inf");
		return;
	}
	/* Enough digits for the integer part, so 20 prints as 20, not 2e+01. */
	prec = 1;
	if (fabs(d) >= 1 && fabs(d) < 1e16)
		prec = (int)floor(log10(fabs(d))) + 1;
	for (; prec <= 17; prec++) {
		snprintf(buf, len, "%.*g", prec, d);
		if (strtod(buf, NULL) == d)
			return;
	}
}

static void fmt_unknown(uint32_t reason, char *buf, size_t len)
{
	char why[96];

	if (reason == TM_TQL_VOID) {
		snprintf(buf, len, "void");
		return;
	}
	if (tm_tql_reason_format(reason, why, sizeof(why)) == TM_OK)
		snprintf(buf, len, "<unknown: %s>", why);
	else
		snprintf(buf, len, "<unknown: not recorded>");
}

void tm_tql_format(const struct tm_tql_value *v, char *buf, size_t len)
{
	size_t off;
	unsigned i;

	switch (v->type) {
	case TM_TQL_BOOL:
		snprintf(buf, len, "%s", v->v.b ? "true" : "false");
		break;
	case TM_TQL_INT:
		snprintf(buf, len, "%" PRId64, v->v.i);
		break;
	case TM_TQL_NUM:
		fmt_double(v->v.d, buf, len);
		break;
	case TM_TQL_STR:
		snprintf(buf, len, "\"%.*s\"", (int)v->v.str.len, v->v.str.s);
		break;
	case TM_TQL_SHAPE:
		off = (size_t)snprintf(buf, len, "[");
		for (i = 0; i < v->v.shape.rank && off < len; i++)
			off += (size_t)snprintf(buf + off, len - off, "%s%" PRId64,
						i ? ", " : "", v->v.shape.dims[i]);
		if (off < len)
			snprintf(buf + off, len - off, "]");
		break;
	case TM_TQL_LIST:
		/* the library's text: a long batch is cut at len, as a long
		 * string would be */
		if (tm_tql_value_format(v, buf, len) && len > 4)
			snprintf(buf + len - 5, 5, "...]");
		break;
	default:
		fmt_unknown(v->unknown_reason, buf, len);
		break;
	}
}

/* ------------------------------------------------------------- formats */

/*
 * print/FMT, display/FMT, output/FMT: GDB's letters.  An integer is shown
 * in the letter's base at the size's width (8 bytes unless b h w g says
 * otherwise); a number is converted to an integer first, as GDB 8 and
 * later do for p/x 2.5; /f shows an integer as a number.
 */
int tm_fmt_parse(struct tm_session *s, const char **args, struct tm_fmt *f,
		 const char *cmd, int allow_count)
{
	const char *p = *args;

	memset(f, 0, sizeof(*f));
	f->count = 1;
	if (*p != '/')
		return 0;
	p++;
	if (isdigit((unsigned char)*p)) {
		char *end;
		unsigned long n = strtoul(p, &end, 10);

		if (!allow_count && n != 1) {
			tm_error(s, "Item count other than 1 is meaningless in \"%s\" command.",
				 cmd);
			return -1;
		}
		f->count = n > 1000000 ? 1000001 : (unsigned)n;   /* x says "Bad count" */
		p = end;
	}
	while (*p && !isspace((unsigned char)*p)) {
		switch (*p) {
		case 'b': f->size = 1; break;
		case 'h': f->size = 2; break;
		case 'w': f->size = 4; break;
		case 'g': f->size = 8; break;
		case 'x': case 'd': case 'u': case 'o': case 't': case 'c':
		case 'f': case 'a': case 's': case 'z': case 'i':
			f->letter = *p;
			break;
		case 'e':       /* x's own: %e */
			if (!strcmp(cmd, "x")) {
				f->letter = *p;
				break;
			}
			/* fall through */
		default:
			tm_error(s, "Undefined output format \"%c\".", *p);
			return -1;
		}
		p++;
	}
	if (f->letter == 'i' && strcmp(cmd, "display") && strcmp(cmd, "x")) {
		tm_error(s, "Format letter \"i\" is meaningless in \"%s\" command.", cmd);
		return -1;
	}
	*args = tm_skip_ws(p);
	return 0;
}

/* "/x" for display's heading, "" without a format. */
void tm_fmt_text(const struct tm_fmt *f, char *buf, size_t len)
{
	static const char sizes[] = { 0, 'b', 'h', 0, 'w', 0, 0, 0, 'g' };
	size_t off = 0;

	buf[0] = 0;
	if (!f->letter && !f->size)
		return;
	off += (size_t)snprintf(buf, len, "/");
	if (f->count > 1 && off < len)
		off += (size_t)snprintf(buf + off, len - off, "%u", f->count);
	if (f->letter && off < len)
		off += (size_t)snprintf(buf + off, len - off, "%c", f->letter);
	if (f->size && off < len)
		snprintf(buf + off, len - off, "%c", sizes[f->size]);
}

static void char_text(int c, char *buf, size_t len)
{
	switch (c) {
	case '\n': snprintf(buf, len, "\\n"); return;
	case '\t': snprintf(buf, len, "\\t"); return;
	case '\r': snprintf(buf, len, "\\r"); return;
	case '\\': snprintf(buf, len, "\\\\"); return;
	case '\'': snprintf(buf, len, "\\'"); return;
	default: break;
	}
	if (c >= 32 && c < 127)
		snprintf(buf, len, "%c", c);
	else
		snprintf(buf, len, "\\%03o", (unsigned)c & 0xff);
}

/* An integer under a format letter and size (bytes, 0: 8). */
void tm_fmt_int(int64_t v, char letter, int size, char *buf, size_t len)
{
	int bytes = size ? size : 8;
	uint64_t u = (uint64_t)v, mask = bytes >= 8 ? UINT64_MAX :
				       (UINT64_C(1) << (8 * bytes)) - 1;
	int64_t sv;
	char bits[72], ch[8];
	int i, n;

	u &= mask;
	sv = bytes >= 8 ? (int64_t)u :
	     (u & (UINT64_C(1) << (8 * bytes - 1))) ? (int64_t)(u | ~mask) : (int64_t)u;
	switch (letter) {
	case 'x': case 'a':
		snprintf(buf, len, "0x%" PRIx64, u);
		return;
	case 'z':
		snprintf(buf, len, "0x%0*" PRIx64, 2 * bytes, u);
		return;
	case 'o':
		snprintf(buf, len, u ? "0%" PRIo64 : "0", u);
		return;
	case 't':
		n = 0;
		for (i = 8 * bytes - 1; i >= 0; i--)
			if (n || (u >> i) & 1 || i == 0)
				bits[n++] = (char)('0' + ((u >> i) & 1));
		bits[n] = 0;
		snprintf(buf, len, "%s", bits);
		return;
	case 'u':
		snprintf(buf, len, "%" PRIu64, u);
		return;
	case 'c':
		char_text((int)(u & 0xff), ch, sizeof(ch));
		snprintf(buf, len, "%d '%s'", (int)(signed char)(u & 0xff), ch);
		return;
	case 'f':
		fmt_double((double)sv, buf, len);
		return;
	default:
		snprintf(buf, len, "%" PRId64, sv);
		return;
	}
}

/* A number under a format: converted to an integer for the integer letters. */
static void fmt_num_as(double d, char letter, int size, char *buf, size_t len)
{
	if (!letter || letter == 'f' || letter == 's' || isnan(d) || isinf(d) ||
	    !(d > -9223372036854775808.0 && d < 9223372036854775808.0)) {
		fmt_double(d, buf, len);
		return;
	}
	tm_fmt_int((int64_t)d, letter, size, buf, len);
}

static void fmt_scalar(const struct tm_tql_value *v, const struct tm_fmt *f,
		       char *buf, size_t len)
{
	char letter = f ? f->letter : 0;
	int size = f ? f->size : 0;
	size_t off;
	unsigned i;

	if (!letter || letter == 's') {
		tm_tql_format(v, buf, len);
		return;
	}
	switch (v->type) {
	case TM_TQL_BOOL:
		if (letter == 'f')
			snprintf(buf, len, "%d", v->v.b ? 1 : 0);
		else
			tm_fmt_int(v->v.b ? 1 : 0, letter, size, buf, len);
		return;
	case TM_TQL_INT:
		tm_fmt_int(v->v.i, letter, size, buf, len);
		return;
	case TM_TQL_NUM:
		fmt_num_as(v->v.d, letter, size, buf, len);
		return;
	case TM_TQL_SHAPE:
		off = (size_t)snprintf(buf, len, "[");
		for (i = 0; i < v->v.shape.rank && off < len; i++) {
			char num[80];

			tm_fmt_int(v->v.shape.dims[i], letter, size, num, sizeof(num));
			off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? ", " : "", num);
		}
		if (off < len)
			snprintf(buf + off, len - off, "]");
		return;
	default:
		tm_tql_format(v, buf, len);
		return;
	}
}

/*
 * GDB prints structures as {a = 1, b = 2}; a tensor summary is one.  With
 * pretty (set print pretty on), one member a line, indented as GDB does.
 */
void tm_tensor_format_as(const struct tm_tensor *t, const struct tm_fmt *f,
			 int pretty, char *buf, size_t len)
{
	char letter = f ? f->letter : 0;
	int size = f ? f->size : 0;
	const char *sep = pretty ? ",\n  " : ", ";
	char num[80];
	size_t off;
	unsigned i;

	if (letter == 's')
		letter = 0;
#define APP(...) do { if (off < len) off += (size_t)snprintf(buf + off, len - off, __VA_ARGS__); } while (0)
	off = 0;
	APP("{%sdtype = %s%sshape = [", pretty ? "\n  " : "", tm_dtype_name(t->dtype), sep);
	for (i = 0; i < t->rank && i < TM_MAX_RANK; i++) {
		if (letter)
			tm_fmt_int(t->shape[i], letter, size, num, sizeof(num));
		else
			snprintf(num, sizeof(num), "%" PRId64, t->shape[i]);
		APP("%s%s", i ? ", " : "", num);
	}
	APP("]");
	for (i = 0; i < TM_STAT__COUNT; i++) {
		if (!(t->have & TM_STAT_BIT(i)))
			continue;
		if (letter)
			fmt_num_as(t->stat[i], letter, size, num, sizeof(num));
		else if (tm_stat_table[i].integer)
			snprintf(num, sizeof(num), "%.0f", t->stat[i]);
		else
			fmt_double(t->stat[i], num, sizeof(num));
		APP("%s%s = %s", sep, tm_stat_table[i].name, num);
	}
	if (t->payload_len)
		APP("%spayload = <%" PRIu64 " bytes>", sep, t->payload_len);
	APP("%s}", pretty ? "\n" : "");
#undef APP
}

void tm_tensor_format(const struct tm_tensor *t, char *buf, size_t len)
{
	tm_tensor_format_as(t, NULL, 0, buf, len);
}

void tm_val_format_as(const struct tm_val *v, const struct tm_fmt *f, int pretty,
		      char *buf, size_t len)
{
	if (v->kind == VAL_TENSOR)
		tm_tensor_format_as(&v->t, f, pretty, buf, len);
	else
		fmt_scalar(&v->v, f, buf, len);
}

void tm_val_format(const struct tm_val *v, char *buf, size_t len)
{
	tm_val_format_as(v, NULL, 0, buf, len);
}

int tm_val_equal(const struct tm_val *a, const struct tm_val *b)
{
	if (a->kind != b->kind)
		return 0;
	if (a->kind == VAL_TENSOR)
		return !memcmp(a->t.stat, b->t.stat, sizeof(a->t.stat)) &&
		       a->t.have == b->t.have;
	if (a->v.type != b->v.type)
		return 0;
	switch (a->v.type) {
	case TM_TQL_BOOL: return !a->v.v.b == !b->v.v.b;
	case TM_TQL_INT: return a->v.v.i == b->v.v.i;
	case TM_TQL_NUM:
		return a->v.v.d == b->v.v.d || (isnan(a->v.v.d) && isnan(b->v.v.d));
	case TM_TQL_STR:
		return a->v.v.str.len == b->v.v.str.len &&
		       !memcmp(a->v.v.str.s, b->v.v.str.s, a->v.v.str.len);
	case TM_TQL_SHAPE:
		return a->v.v.shape.rank == b->v.v.shape.rank &&
		       !memcmp(a->v.v.shape.dims, b->v.v.shape.dims,
			       a->v.v.shape.rank * sizeof(int64_t));
	case TM_TQL_LIST: {
		uint32_t i;

		if (a->v.v.list.n != b->v.v.list.n || a->v.v.list.count != b->v.v.list.count)
			return 0;
		for (i = 0; i < a->v.v.list.n; i++)
			if (strcmp(a->v.v.list.items[i], b->v.v.list.items[i]))
				return 0;
		return 1;
	}
	default: return 1;
	}
}

/* if/while: true, a non-zero number, a non-empty string.  Unknown is false. */
int tm_val_truth(const struct tm_val *v)
{
	if (v->kind == VAL_TENSOR)
		return 1;
	switch (v->v.type) {
	case TM_TQL_BOOL: return v->v.v.b != 0;
	case TM_TQL_INT: return v->v.v.i != 0;
	case TM_TQL_NUM: return v->v.v.d != 0;
	case TM_TQL_STR: return v->v.v.str.len != 0;
	case TM_TQL_SHAPE: return 1;
	case TM_TQL_LIST: return v->v.v.list.count != 0;
	default: return 0;
	}
}

/* ------------------------------------------------------------- history and variables */

int tm_history_add(struct tm_session *s, const struct tm_val *v)
{
	struct tm_val **grown, *c;

	c = calloc(1, sizeof(*c));
	if (!c)
		return -1;
	grown = realloc(s->hist, (s->nhist + 1) * sizeof(*s->hist));
	if (!grown) {
		free(c);
		return -1;
	}
	s->hist = grown;
	tm_val_copy(c, v);
	s->hist[s->nhist++] = c;
	return (int)s->nhist;
}

/*
 * $N (name "N"), $ (""), $$ ("$"), $$N ("$N"): GDB's value history
 * references.  Returns the entry or NULL.
 */
const struct tm_val *tm_history_ref(struct tm_session *s, const char *name)
{
	uint64_t k;

	if (!*name)
		return s->nhist ? s->hist[s->nhist - 1] : NULL;
	if (name[0] == '$') {
		k = 1;
		if (name[1] && tm_parse_uint(name + 1, &k))
			return NULL;
		return k < s->nhist ? s->hist[s->nhist - 1 - k] : NULL;
	}
	if (isdigit((unsigned char)name[0])) {
		if (tm_parse_uint(name, &k) || k == 0 || k > s->nhist)
			return NULL;
		return s->hist[k - 1];
	}
	return NULL;
}

/* Whether name (after the first '$') is a history reference: "", "$", N, $N. */
int tm_history_is_name(const char *name)
{
	if (*name == '$')
		name++;
	while (isdigit((unsigned char)*name))
		name++;
	return !*name;
}

struct conv *tm_conv_find(struct tm_session *s, const char *name)
{
	struct conv *c;

	for (c = s->convs; c; c = c->next)
		if (!strcmp(c->name, name))
			return c;
	return NULL;
}

int tm_conv_set(struct tm_session *s, const char *name, const struct tm_val *v)
{
	struct conv *c = tm_conv_find(s, name);

	if (!c) {
		c = calloc(1, sizeof(*c));
		if (!c)
			return -1;
		c->name = strdup(name);
		if (!c->name) {
			free(c);
			return -1;
		}
		c->next = s->convs;
		s->convs = c;
	}
	return tm_val_copy(&c->val, v);
}

void tm_conv_set_int(struct tm_session *s, const char *name, int64_t i)
{
	struct tm_val v;

	memset(&v, 0, sizeof(v));
	v.v.type = i < 0 ? TM_TQL_UNKNOWN : TM_TQL_INT;
	v.v.v.i = i;
	tm_conv_set(s, name, &v);
}

void tm_conv_set_str(struct tm_session *s, const char *name, const char *str)
{
	struct tm_val v;

	memset(&v, 0, sizeof(v));
	v.v.type = TM_TQL_STR;
	v.v.v.str.s = str;
	v.v.v.str.len = strlen(str);
	tm_conv_set(s, name, &v);
}

/* The tm_tql_env variable() callback: history first, then variables. */
/* A field of a tensor a variable holds ($z.numel, $3.shape). */
static int tensor_var_field(struct tm_session *s, const struct tm_tensor *t,
			    const char *field, struct tm_tql_value *out)
{
	int st;

	memset(out, 0, sizeof(*out));
	if (!strcmp(field, "shape")) {
		out->type = TM_TQL_SHAPE;
		out->v.shape.dims = t->shape;
		out->v.shape.rank = t->rank;
	} else if (!strcmp(field, "dtype")) {
		out->type = TM_TQL_STR;
		out->v.str.s = tm_dtype_name(t->dtype);
		out->v.str.len = strlen(out->v.str.s);
	} else if (!strcmp(field, "rank")) {
		out->type = TM_TQL_INT;
		out->v.i = t->rank;
	} else if ((st = tm_stat_from_name(field)) >= 0) {
		if (!(t->have & TM_STAT_BIT(st))) {
			out->type = TM_TQL_UNKNOWN;
			out->unknown_reason = TM_GAP_LEVEL;
		} else if (tm_stat_table[st].integer) {
			out->type = TM_TQL_INT;
			out->v.i = (int64_t)t->stat[st];
		} else {
			out->type = TM_TQL_NUM;
			out->v.d = t->stat[st];
		}
	} else {
		(void)s;
		return TM_ERR_NOT_FOUND;
	}
	return TM_OK;
}

int tm_session_variable(void *user, const char *name, struct tm_tql_value *out)
{
	struct tm_session *s = user;
	const struct tm_val *v;
	const char *dot = strchr(name, '.');
	char base[64];
	struct conv *c;

	if (dot) {
		/* $z.numel: the variable must hold a tensor */
		size_t l = (size_t)(dot - name);

		memset(out, 0, sizeof(*out));
		if (l >= sizeof(base))
			return TM_ERR_NOT_FOUND;
		memcpy(base, name, l);
		base[l] = 0;
		v = tm_history_ref(s, base);
		if (!v && (c = tm_conv_find(s, base)))
			v = &c->val;
		if (!v || v->kind != VAL_TENSOR) {
			out->unknown_reason = v ? 0 : TM_TQL_VOID;
			return v || isdigit((unsigned char)base[0]) || base[0] == '$' ||
			       !base[0] ? TM_ERR_NOT_FOUND : TM_OK;
		}
		return tensor_var_field(s, &v->t, dot + 1, out);
	}
	v = tm_history_ref(s, name);
	if (!v && (c = tm_conv_find(s, name)))
		v = &c->val;
	if (!v) {
		/* GDB: an unset convenience variable is void, not an error. */
		memset(out, 0, sizeof(*out));
		out->unknown_reason = TM_TQL_VOID;
		return isdigit((unsigned char)name[0]) || name[0] == '$' ||
		       !name[0] ? TM_ERR_NOT_FOUND : TM_OK;
	}
	if (v->kind == VAL_TENSOR) {
		memset(out, 0, sizeof(*out));
		return TM_OK;
	}
	*out = v->v;
	return TM_OK;
}

void tm_expr_free(struct tm_expr *e)
{
	free(e->src);
	tm_tql_free(e->prog);
	memset(e, 0, sizeof(*e));
}

/* A value's type as MI's -var-create and DAP's variables name it. */
const char *tm_val_type_name(const struct tm_val *v)
{
	if (v->kind == VAL_TENSOR)
		return "tensor";
	switch (v->v.type) {
	case TM_TQL_BOOL: return "bool";
	case TM_TQL_INT: return "int";
	case TM_TQL_NUM: return "float";
	case TM_TQL_STR: return "string";
	case TM_TQL_SHAPE: return "shape";
	case TM_TQL_LIST: return "list";
	default: return "unknown";
	}
}
