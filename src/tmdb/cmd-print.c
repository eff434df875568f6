/*
 * cmd-print.c -- looking at values: print, output, printf, echo, display,
 * undisplay; the value history ($N, $, $$) and convenience variables.
 *
 * Expressions are TQL (doc/tql.md) compiled once, with one shortcut: a bare
 * tensor term (`tensor`, `model.fc1:out`, `model.fc1:out.nan_count`) is
 * answered here so that a whole tensor summary can be printed and an
 * unknown address gets "did you mean" suggestions.  Values kept by tmdb
 * (history, variables, watch old values) are tm_vals that own their strings.
 */
#include "config.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tmdb.h"
#include "view.h"

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

/* GDB prints structures as {a = 1, b = 2}; a tensor summary is one. */
void tm_tensor_format(const struct tm_tensor *t, char *buf, size_t len)
{
	char num[64];
	size_t off;
	unsigned i;

#define APP(...) do { if (off < len) off += (size_t)snprintf(buf + off, len - off, __VA_ARGS__); } while (0)
	off = 0;
	APP("{dtype = %s, shape = [", tm_dtype_name(t->dtype));
	for (i = 0; i < t->rank && i < TM_MAX_RANK; i++)
		APP("%s%" PRId64, i ? ", " : "", t->shape[i]);
	APP("]");
	for (i = 0; i < TM_STAT__COUNT; i++) {
		if (!(t->have & TM_STAT_BIT(i)))
			continue;
		if (tm_stat_table[i].integer)
			snprintf(num, sizeof(num), "%.0f", t->stat[i]);
		else
			fmt_double(t->stat[i], num, sizeof(num));
		APP(", %s = %s", tm_stat_table[i].name, num);
	}
	if (t->payload_len)
		APP(", payload = <%" PRIu64 " bytes>", t->payload_len);
	APP("}");
#undef APP
}

void tm_val_format(const struct tm_val *v, char *buf, size_t len)
{
	if (v->kind == VAL_TENSOR)
		tm_tensor_format(&v->t, buf, len);
	else
		tm_tql_format(&v->v, buf, len);
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

static int history_add(struct tm_session *s, const struct tm_val *v)
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
static const struct tm_val *history_ref(struct tm_session *s, const char *name)
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
static int is_history_name(const char *name)
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
int tm_session_variable(void *user, const char *name, struct tm_tql_value *out)
{
	struct tm_session *s = user;
	const struct tm_val *v = history_ref(s, name);
	struct conv *c;

	if (!v && (c = tm_conv_find(s, name)))
		v = &c->val;
	if (!v) {
		/* GDB: an unset convenience variable is void, not an error. */
		memset(out, 0, sizeof(*out));
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

/* ------------------------------------------------------------- expressions */

static int slot_name_ok(const char *p, size_t l)
{
	static const char *const names[] = {
		"out", "in", "grad_out", "grad_in", "data", "grad", NULL
	};
	size_t i;

	for (i = 0; names[i]; i++)
		if (l == strlen(names[i]) && !strncmp(p, names[i], l))
			return 1;
	return 0;
}

/* A field after "tensor." or "ADDR:SLOT.": a stat, dtype, shape or rank. */
static int field_from(const char *p)
{
	int st;

	if (!strcmp(p, "dtype"))
		return TF_DTYPE;
	if (!strcmp(p, "shape"))
		return TF_SHAPE;
	if (!strcmp(p, "rank"))
		return TF_RANK;
	st = tm_stat_from_name(p);
	return st >= 0 ? st : -100;
}

/*
 * Recognises the bare tensor terms answered without TQL:
 *   tensor [. FIELD]  |  ADDRESS : SLOT [. INDEX] [. FIELD]  |  $N (a tensor)
 * Returns 1 if e was filled, 0 if src is something else (TQL's business),
 * -1 on an error already reported (unknown address).
 */
static int simple_term(struct tm_session *s, const char *src, struct tm_expr *e)
{
	const char *colon, *p, *dot;
	char path[TM_ADDRESS_MAX], addr[TM_ADDRESS_MAX + 32];
	const struct tm_node *n;
	tm_address *a = NULL;
	size_t l;
	int field = TF_WHOLE;

	if (!strcmp(src, "tensor")) {
		e->is_focus = 1;
		e->field = TF_WHOLE;
		return 1;
	}
	if (!strncmp(src, "tensor.", 7)) {
		field = field_from(src + 7);
		if (field == -100)
			return 0;
		e->is_focus = 1;
		e->field = field;
		return 1;
	}
	if (src[0] == '$' && is_history_name(src + 1) &&
	    !history_ref(s, src + 1)) {
		/* GDB: "print $" on an empty history is an error, not a value. */
		if (!s->nhist)
			tm_error(s, "History is empty.");
		else
			tm_error(s, "History has not yet reached %s.", src);
		return -1;
	}
	if (src[0] == '$' && s->nhist) {
		const struct tm_val *v = history_ref(s, src + 1);

		if (v && v->kind == VAL_TENSOR) {
			e->history = 1;
			e->field = TF_WHOLE;
			return 1;
		}
		return 0;
	}
	/* Only address characters: anything else is an expression. */
	for (p = src; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("._:#*[]", *p))
			return 0;
	colon = strchr(src, ':');
	if (!colon || !isalpha((unsigned char)src[0]) || strchr(src, '*'))
		return 0;
	l = (size_t)(colon - src);
	if (l >= sizeof(path))
		return 0;
	memcpy(path, src, l);
	path[l] = 0;
	p = colon + 1;
	l = strcspn(p, ".");
	if (!slot_name_ok(p, l))
		return 0;
	dot = p + l;
	if (*dot == '.' && isdigit((unsigned char)dot[1])) {
		dot++;
		while (isdigit((unsigned char)*dot))
			dot++;
	}
	if (*dot == '.') {
		field = field_from(dot + 1);
		if (field == -100)
			return 0;
	} else if (*dot) {
		return 0;
	}
	snprintf(addr, sizeof(addr), "%s:%.*s", path, (int)(dot - p), p);
	if (tm_address_parse(addr, &a, NULL, NULL) != TM_OK)
		return 0;
	n = tm_session_node(s, a);
	if (!n) {
		tm_address_free(a);
		if (!s->nodes)
			return tm_need_trace(s);
		return tm_address_error(s, path);
	}
	e->node = n->id;
	e->slot = tm_address_slot(a, NULL);
	e->call = tm_address_call(a);
	e->field = field;
	tm_address_free(a);
	return 1;
}

int tm_expr_compile(struct tm_session *s, const char *src, int want_bool,
		    struct tm_expr *e)
{
	char *text;
	int rc;

	memset(e, 0, sizeof(*e));
	e->src = strdup(src);
	if (!e->src)
		return -1;
	text = tm_strip(e->src);
	memmove(e->src, text, strlen(text) + 1);
	if (!*e->src) {
		tm_error(s, "Argument required (expression to compute).");
		tm_expr_free(e);
		return -1;
	}
	if (!want_bool) {
		rc = simple_term(s, e->src, e);
		if (rc < 0) {
			tm_expr_free(e);
			return -1;
		}
		if (rc == 1) {
			e->simple = 1;
			return 0;
		}
	}
	if (tm_compile(s, e->src, want_bool, &e->prog)) {
		tm_expr_free(e);
		return -1;
	}
	return 0;
}

void tm_expr_free(struct tm_expr *e)
{
	free(e->src);
	tm_tql_free(e->prog);
	memset(e, 0, sizeof(*e));
}

/* Reads one field of a tensor of ev (or its whole summary) into a value. */
static void tensor_field(const struct tm_event *ev, const struct tm_tensor *t,
			 int field, struct tm_val *out)
{
	struct tm_tql_value v;

	memset(&v, 0, sizeof(v));
	switch (field) {
	case TF_WHOLE:
		tm_val_set_tensor(out, t);
		return;
	case TF_DTYPE:
		v.type = TM_TQL_STR;
		v.v.str.s = tm_dtype_name(t->dtype);
		v.v.str.len = strlen(v.v.str.s);
		break;
	case TF_SHAPE:
		v.type = TM_TQL_SHAPE;
		v.v.shape.dims = t->shape;
		v.v.shape.rank = t->rank;
		break;
	case TF_RANK:
		v.type = TM_TQL_INT;
		v.v.i = t->rank;
		break;
	default:
		if (field < 0 || field >= TM_STAT__COUNT ||
		    !(t->have & TM_STAT_BIT(field))) {
			v.type = TM_TQL_UNKNOWN;
			v.unknown_reason = tm_tql_absent_reason(ev, field);
		} else if (tm_stat_table[field].integer) {
			v.type = TM_TQL_INT;
			v.v.i = (int64_t)t->stat[field];
		} else {
			v.type = TM_TQL_NUM;
			v.v.d = t->stat[field];
		}
		break;
	}
	tm_val_set_scalar(out, &v);
}

int tm_expr_eval(struct tm_session *s, struct tm_expr *e, struct tm_val *out)
{
	const struct tm_event *now = s->scan_ev ? s->scan_ev :
				     s->have_cur ? &s->cur : NULL;
	struct tm_tql_value v;
	struct tm_tql_ctx ctx;
	const struct tm_tensor *t;
	const struct tm_event *tev = NULL;
	uint32_t reason = 0;
	int err;

	memset(&v, 0, sizeof(v));
	if (e->simple && e->history) {
		const struct tm_val *h = history_ref(s, e->src + 1);

		if (!h) {
			tm_error(s, "History has not yet reached %s.", e->src);
			return -1;
		}
		return tm_val_copy(out, h);
	}
	if (e->simple) {
		if (!now) {
			tm_error(s, "No current event.  Use \"run\", \"step\" "
				 "or \"goto\" first.");
			return -1;
		}
		if (e->is_focus) {
			t = s->scan_ev ? NULL : tm_focus_tensor(s);
			if (!t) {
				tm_error(s, "No tensor in focus at this event.");
				return -1;
			}
			tev = now;
		} else {
			t = s->env.lookup(s, e->node, e->slot, e->call, &tev,
					  &reason);
		}
		if (!t) {
			v.type = TM_TQL_UNKNOWN;
			v.unknown_reason = reason;
			return tm_val_set_scalar(out, &v);
		}
		tensor_field(tev, t, e->field, out);
		return 0;
	}
	tm_tql_ctx_init(s, &ctx, now, s->scan_ev ? NULL : tm_focus_tensor(s));
	err = tm_tql_eval(e->prog, &ctx, &v);
	if (err != TM_OK) {
		tm_error(s, "Cannot evaluate \"%s\": %s.", e->src,
			 tm_strerror(err));
		return -1;
	}
	return tm_val_set_scalar(out, &v);
}

int tm_evaluate(struct tm_session *s, const char *expr, struct tm_val *out)
{
	struct tm_expr e;
	int rc;

	if (tm_expr_compile(s, expr, 0, &e))
		return -1;
	rc = tm_expr_eval(s, &e, out);
	tm_expr_free(&e);
	return rc;
}

/* ------------------------------------------------------------- print, output */

static int cmd_print_exec(struct tm_session *s, const char *args, int from_tty)
{
	struct tm_val v;
	char buf[2048];
	int n;

	memset(&v, 0, sizeof(v));
	if (!*args) {
		if (!s->nhist) {
			tm_error(s, "Argument required (expression to compute).");
			return -1;
		}
		tm_val_copy(&v, s->hist[s->nhist - 1]);
	} else if (tm_evaluate(s, args, &v)) {
		return -1;
	}
	tm_val_format(&v, buf, sizeof(buf));
	n = history_add(s, &v);
	tm_out(s, "$%d = %s\n", n, buf);
	tm_val_clear(&v);
	return 0;
}

const struct cmd_entry cmd_print_entry = {
	.name = "print", .alias = "p inspect call",
	.usage = "print [EXPR]",
	.help = "Print the value of a TQL expression and record it as $N.\n"
		"EXPR may be a whole tensor (tensor, NODE:SLOT), a field of one\n"
		"(model.layers.2.mlp.fc2:out.nan_count), or any TQL expression.\n"
		"Addressed terms read the latest value at the playhead; a value\n"
		"lost in a gap prints <unknown: REASON>.",
	.exec = cmd_print_exec, .klass = "data",
};

static int cmd_output_exec(struct tm_session *s, const char *args, int from_tty)
{
	struct tm_val v;
	char buf[2048];

	memset(&v, 0, sizeof(v));
	if (tm_evaluate(s, args, &v))
		return -1;
	tm_val_format(&v, buf, sizeof(buf));
	tm_out(s, "%s", buf);
	tm_val_clear(&v);
	return 0;
}

const struct cmd_entry cmd_output_entry = {
	.name = "output", .usage = "output EXPR",
	.help = "Print the value of EXPR with no newline and no history entry.",
	.exec = cmd_output_exec, .klass = "data",
};

/* ------------------------------------------------------------- echo, printf */

/* C escapes of echo and printf formats; returns the end of the text. */
static size_t unescape(const char *p, char *out, size_t cap, const char *stop)
{
	size_t n = 0;

	while (*p && n + 1 < cap && !(stop && strchr(stop, *p))) {
		char c = *p++;

		if (c == '\\' && *p) {
			c = *p++;
			switch (c) {
			case 'n': c = '\n'; break;
			case 't': c = '\t'; break;
			case 'r': c = '\r'; break;
			case 'a': c = '\a'; break;
			case 'e': c = 27; break;
			case '0': c = 0; break;
			default: break;
			}
			if (!c)
				break;
		}
		out[n++] = c;
	}
	out[n] = 0;
	return n;
}

static int cmd_echo_exec(struct tm_session *s, const char *args, int from_tty)
{
	char buf[4096];

	unescape(args, buf, sizeof(buf), NULL);
	tm_out(s, "%s", buf);
	return 0;
}

const struct cmd_entry cmd_echo_entry = {
	.name = "echo", .usage = "echo TEXT",
	.help = "Print TEXT; C escapes such as \\n are honoured, no newline is added.",
	.exec = cmd_echo_exec, .klass = "support",
};

/* Splits "a, f(b, c), \"x,y\"" at top-level commas. */
static size_t split_commas(const char *p, char **out, size_t max)
{
	size_t n = 0;

	while (*p && n < max) {
		const char *start = p;
		int depth = 0;
		char q = 0;
		size_t l;

		for (; *p; p++) {
			if (q) {
				if (*p == '\\' && p[1])
					p++;
				else if (*p == q)
					q = 0;
				continue;
			}
			if (*p == '"' || *p == '\'')
				q = *p;
			else if (*p == '(' || *p == '[')
				depth++;
			else if (*p == ')' || *p == ']')
				depth--;
			else if (*p == ',' && depth <= 0)
				break;
		}
		l = (size_t)(p - start);
		out[n] = malloc(l + 1);
		if (!out[n])
			break;
		memcpy(out[n], start, l);
		out[n][l] = 0;
		{
			char *t = tm_strip(out[n]);

			memmove(out[n], t, strlen(t) + 1);
		}
		n++;
		if (*p == ',')
			p++;
	}
	return n;
}

static double val_num(const struct tm_val *v)
{
	switch (v->v.type) {
	case TM_TQL_BOOL: return v->v.v.b;
	case TM_TQL_INT: return (double)v->v.v.i;
	case TM_TQL_NUM: return v->v.v.d;
	default: return NAN;
	}
}

/*
 * Widths and precisions are capped: "%.999999999f" would have the C
 * library build a gigabyte, and nothing a terminal shows needs more.
 */
#define PRINTF_MAX_WIDTH 1024

static int spec_too_wide(const char *p, size_t n)
{
	size_t i = 0;

	while (i < n) {
		unsigned long v = 0;

		if (p[i] < '1' || p[i] > '9') {
			i++;
			continue;
		}
		while (i < n && p[i] >= '0' && p[i] <= '9') {
			if (v <= PRINTF_MAX_WIDTH)
				v = v * 10 + (unsigned long)(p[i] - '0');
			i++;
		}
		if (v > PRINTF_MAX_WIDTH)
			return 1;
	}
	return 0;
}

static int cmd_printf_exec(struct tm_session *s, const char *args, int from_tty)
{
	char fmt[2048], out[8192], spec[64], piece[2048];
	char *argv[32];
	size_t argc, ai = 1, off = 0, i;
	const char *f;
	int rc = 0;

	args = tm_skip_ws(args);
	if (*args != '"') {
		tm_error(s, "Bad format string");
		return -1;
	}
	argc = split_commas(args, argv, 32);
	if (!argc) {
		tm_error(s, "Bad format string");
		return -1;
	}
	{
		size_t l = strlen(argv[0]);

		if (l < 2 || argv[0][l - 1] != '"') {
			tm_error(s, "Bad format string, non-terminated '\"'");
			rc = -1;
			goto out;
		}
		argv[0][l - 1] = 0;
		unescape(argv[0] + 1, fmt, sizeof(fmt), NULL);
	}
	for (f = fmt; *f && off < sizeof(out) - 1; f++) {
		struct tm_val v;
		size_t sl;
		char conv;

		if (*f != '%') {
			out[off++] = *f;
			continue;
		}
		if (f[1] == '%') {
			out[off++] = '%';
			f++;
			continue;
		}
		sl = strspn(f + 1, "-+ #0123456789.lhz");
		conv = f[1 + sl];
		if (!conv || !strchr("diouxXeEfgGsc", conv) || sl > 30) {
			tm_error(s, "Bad format string");
			rc = -1;
			goto out;
		}
		if (spec_too_wide(f + 1, sl)) {
			tm_error(s, "Field width or precision too large in \"%%%.*s%c\" "
				 "(at most %d).", (int)sl, f + 1, conv, PRINTF_MAX_WIDTH);
			rc = -1;
			goto out;
		}
		if (ai >= argc) {
			tm_error(s, "Bad format string, missing '\"'");
			rc = -1;
			goto out;
		}
		memset(&v, 0, sizeof(v));
		if (tm_evaluate(s, argv[ai++], &v)) {
			rc = -1;
			goto out;
		}
		/* Drop length modifiers; tmdb supplies its own. */
		{
			size_t k = 0, j;

			spec[k++] = '%';
			for (j = 0; j < sl; j++)
				if (!strchr("lhz", f[1 + j]))
					spec[k++] = f[1 + j];
			spec[k] = 0;
		}
		if (strchr("diouxXc", conv)) {
			double d = val_num(&v);
			int64_t iv = 0;

			/* A double outside int64 has no integer to print (and
			 * converting it is undefined behaviour). */
			if (!isnan(d) && !(d >= -9223372036854775808.0 &&
					   d < 9223372036854775808.0)) {
				char num[64];

				tm_val_format(&v, num, sizeof(num));
				tm_val_clear(&v);
				tm_error(s, "Value %s is out of range for %%%c.", num, conv);
				rc = -1;
				goto out;
			}
			if (!isnan(d))
				iv = (int64_t)d;
			if (conv == 'c' && (iv < 0 || iv > 255)) {
				tm_val_clear(&v);
				tm_error(s, "Value %lld is not a character (0..255) for %%c.",
					 (long long)iv);
				rc = -1;
				goto out;
			}
			if (conv == 'c')
				snprintf(piece, sizeof(piece), "%c", (int)iv);
			else {
				char cs[80];

				snprintf(cs, sizeof(cs), "%sll%c", spec, conv);
				snprintf(piece, sizeof(piece), cs, (long long)iv);
			}
		} else if (conv == 's') {
			char val[1024], cs[80];

			if (v.kind == VAL_SCALAR && v.v.type == TM_TQL_STR)
				snprintf(val, sizeof(val), "%s", v.str);
			else
				tm_val_format(&v, val, sizeof(val));
			snprintf(cs, sizeof(cs), "%ss", spec);
			snprintf(piece, sizeof(piece), cs, val);
		} else {
			char cs[80];

			snprintf(cs, sizeof(cs), "%s%c", spec, conv);
			snprintf(piece, sizeof(piece), cs, val_num(&v));
		}
		tm_val_clear(&v);
		off += (size_t)snprintf(out + off, sizeof(out) - off, "%s", piece);
		if (off >= sizeof(out))
			off = sizeof(out) - 1;
		f += sl + 1;
	}
	out[off] = 0;
	if (ai < argc) {
		tm_error(s, "Extra arguments at end of format string.");
		rc = -1;
		goto out;
	}
	tm_out(s, "%s", out);
out:
	for (i = 0; i < argc; i++)
		free(argv[i]);
	return rc;
}

const struct cmd_entry cmd_printf_entry = {
	.name = "printf", .usage = "printf \"FORMAT\", EXPR...",
	.help = "Print values under a C format (%d %u %x %f %g %e %s %c).",
	.exec = cmd_printf_exec, .klass = "support",
};

/* ------------------------------------------------------------- display */

static void display_one(struct tm_session *s, struct display *d)
{
	struct tm_val v;
	char buf[2048];

	memset(&v, 0, sizeof(v));
	if (tm_view_is_display(d->expr)) {
		/* a view kind ("display info graph", cmd-view.c): its own errors */
		tm_view_display(s, d->num, d->expr);
		return;
	}
	if (tm_evaluate(s, d->expr, &v))
		return;
	tm_val_format(&v, buf, sizeof(buf));
	tm_out(s, "%d: %s = %s\n", d->num, d->expr, buf);
	tm_val_clear(&v);
}

/* Every stop re-shows the enabled displays, oldest first. */
void tm_displays_show(struct tm_session *s)
{
	struct display *d, *order[256];
	size_t n = 0;

	if (!s->have_cur)
		return;
	for (d = s->displays; d && n < 256; d = d->next)
		order[n++] = d;
	while (n > 0) {
		d = order[--n];
		if (d->enabled)
			display_one(s, d);
	}
}

static int cmd_display_exec(struct tm_session *s, const char *args, int from_tty)
{
	struct display *d;
	struct tm_expr e;

	if (!*args) {
		tm_displays_show(s);
		return 0;
	}
	if (!tm_view_is_display(args)) {
		if (tm_expr_compile(s, args, 0, &e))
			return -1;
		tm_expr_free(&e);
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return -1;
	d->expr = strdup(args);
	d->num = s->next_display++;
	d->enabled = 1;
	d->next = s->displays;
	s->displays = d;
	if (s->have_cur)
		display_one(s, d);
	else if (tm_view_is_display(d->expr))
		/* GDB shows a display it cannot evaluate yet with the reason. */
		tm_out(s, "%d: %s\n<error: No event selected yet.>\n", d->num,
		       d->expr);
	else
		tm_out(s, "%d: %s = <error: No event selected yet.>\n", d->num,
		       d->expr);
	return 0;
}

const struct cmd_entry cmd_display_entry = {
	.name = "display", .alias = "disp",
	.usage = "display [EXPR]",
	.help = "Print EXPR now and each time the playhead stops.\n"
		"With no argument, show every display again.",
	.exec = cmd_display_exec, .klass = "data",
};

static int cmd_undisplay_exec(struct tm_session *s, const char *args, int from_tty)
{
	struct display **pp, *d;
	const char *p = args;

	if (!*p) {
		while ((d = s->displays)) {
			s->displays = d->next;
			free(d->expr);
			free(d);
		}
		return 0;
	}
	while (*(p = tm_skip_ws(p))) {
		char *end;
		long num = strtol(p, &end, 10);

		if (end == p || num <= 0) {
			tm_error(s, "Arguments must be display numbers.");
			return -1;
		}
		for (pp = &s->displays; *pp; pp = &(*pp)->next)
			if ((*pp)->num == num)
				break;
		if (!*pp) {
			tm_error(s, "No display number %ld.", num);
			return -1;
		}
		d = *pp;
		*pp = d->next;
		free(d->expr);
		free(d);
		p = end;
	}
	return 0;
}

const struct cmd_entry cmd_undisplay_entry = {
	.name = "undisplay", .usage = "undisplay [NUM...]",
	.help = "Cancel some expressions to be displayed at each stop (all without arguments).",
	.exec = cmd_undisplay_exec, .klass = "data",
};
