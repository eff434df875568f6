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
	/* ref.NODE:SLOT.field: TQL's, read through the reference */
	if (!strncmp(src, "ref.", 4))
		return 0;
	if (src[0] == '$' && tm_history_is_name(src + 1) &&
	    !tm_history_ref(s, src + 1)) {
		/* GDB: "print $" on an empty history is an error, not a value. */
		if (!s->nhist)
			tm_error(s, "History is empty.");
		else
			tm_error(s, "History has not yet reached %s.", src);
		return -1;
	}
	if (src[0] == '$') {
		const struct tm_val *v = tm_history_ref(s, src + 1);
		struct conv *c;

		/* $z = tensor: a variable that holds a whole tensor */
		if (!v && (c = tm_conv_find(s, src + 1)))
			v = &c->val;
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
	l = strcspn(p, ".[");
	if (!slot_name_ok(p, l))
		return 0;
	dot = p + l;
	if (*dot == '.' && isdigit((unsigned char)dot[1])) {
		dot++;
		while (isdigit((unsigned char)*dot))
			dot++;
	}
	if (dot[0] == '[' && dot[1] == 'r' && isdigit((unsigned char)dot[2])) {
		/* out[r1]: a request's rows (the address parser checks it) */
		dot = strchr(dot, ']');
		if (!dot)
			return 0;
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

/* "  (from step 5)" when an addressed term read a step older than the
 * focus's: a value is never silently stale. */
static void note_oldest(struct tm_session *s, const struct tm_event *now)
{
	if (!s->scan_ev && now && s->eval_oldest_step != UINT64_MAX &&
	    s->eval_oldest_step < now->step)
		snprintf(s->from_note, sizeof(s->from_note), "  (from step %" PRIu64 ")",
			 s->eval_oldest_step);
}

int tm_expr_eval(struct tm_session *s, struct tm_expr *e, struct tm_val *out)
{
	const struct tm_event *now = s->scan_ev ? s->scan_ev : tm_focus_event(s);
	struct tm_tql_value v;
	struct tm_tql_ctx ctx;
	const struct tm_tensor *t;
	const struct tm_event *tev = NULL;
	uint32_t reason = 0;
	int err;

	memset(&v, 0, sizeof(v));
	s->from_note[0] = 0;
	s->eval_oldest_step = UINT64_MAX;
	if (e->simple && e->history) {
		const struct tm_val *h = tm_history_ref(s, e->src + 1);
		struct conv *c;

		if (!h && (c = tm_conv_find(s, e->src + 1)) && c->val.kind == VAL_TENSOR)
			h = &c->val;
		if (!h) {
			tm_error(s, "History has not yet reached %s.", e->src);
			return -1;
		}
		return tm_val_copy(out, h);
	}
	if (e->simple) {
		if (!now && s->have_cur && e->is_focus) {
			tm_error(s, "No tensor in focus at this frame (its call was not "
				 "recorded entering).");
			return -1;
		}
		if (!now) {
			tm_error(s, "No current event.  Use \"run\", \"step\" "
				 "or \"goto\" first.");
			return -1;
		}
		if (e->is_focus) {
			t = s->scan_ev ? NULL : tm_focus_tensor(s);
			if (!t) {
				tm_error(s, "No tensor in focus at this %s.",
					 s->sel_frame ? "frame" : "event");
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
		note_oldest(s, now);
		return 0;
	}
	tm_tql_ctx_init(s, &ctx, now, s->scan_ev ? NULL : tm_focus_tensor(s));
	err = tm_tql_eval(e->prog, &ctx, &v);
	if (err != TM_OK) {
		tm_error(s, "Cannot evaluate \"%s\": %s.", e->src,
			 tm_strerror(err));
		return -1;
	}
	note_oldest(s, now);
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
	/* GDB: an integer division by zero is an error, not a value */
	if (!rc && out->kind == VAL_SCALAR && out->v.type == TM_TQL_UNKNOWN &&
	    (out->v.unknown_reason & TM_TQL_DIV_ZERO)) {
		tm_val_clear(out);
		tm_error(s, "Division by zero");
		return -1;
	}
	return rc;
}

/* ------------------------------------------------------------- print, output */

static int cmd_print_exec(struct tm_session *s, const char *args, int from_tty)
{
	struct tm_val v;
	struct tm_fmt f;
	char buf[4096];
	int n;

	memset(&v, 0, sizeof(v));
	if (tm_fmt_parse(s, &args, &f, "print", 0))
		return -1;
	if (!*args) {
		if (!s->nhist) {
			tm_error(s, "Argument required (expression to compute).");
			return -1;
		}
		tm_val_copy(&v, s->hist[s->nhist - 1]);
	} else if (tm_evaluate(s, args, &v)) {
		return -1;
	}
	tm_val_format_as(&v, &f, s->set.print_pretty, buf, sizeof(buf));
	n = tm_history_add(s, &v);
	tm_out(s, "$%d = %s%s\n", n, buf, s->from_note);
	tm_val_clear(&v);
	if (*args)
		tm_compare_print_beside(s, args);
	return 0;
}

const struct cmd_entry cmd_print_entry = {
	.name = "print", .alias = "p inspect call",
	.usage = "print[/FMT] [EXPR]",
	.help = "Print the value of a TQL expression and record it as $N.\n"
		"EXPR may be a whole tensor (tensor, NODE:SLOT), a field of one\n"
		"(model.layers.2.mlp.fc2:out.nan_count), or any TQL expression.\n"
		"Addressed terms read the latest value at the playhead; a value\n"
		"lost in a gap prints <unknown: REASON>, one from an earlier step\n"
		"than the selected frame's says \"(from step N)\".\n"
		"print/FMT shows numbers in GDB's formats: x d u o t c f a s z,\n"
		"with a size b h w g (p/x tensor.numel, p/t 5, p/c 65).",
	.exec = cmd_print_exec, .flags = CMD_FORMAT, .klass = "data",
};

static int cmd_output_exec(struct tm_session *s, const char *args, int from_tty)
{
	struct tm_val v;
	struct tm_fmt f;
	char buf[4096];

	memset(&v, 0, sizeof(v));
	if (tm_fmt_parse(s, &args, &f, "output", 0))
		return -1;
	if (tm_evaluate(s, args, &v))
		return -1;
	tm_val_format_as(&v, &f, s->set.print_pretty, buf, sizeof(buf));
	tm_out(s, "%s", buf);
	tm_val_clear(&v);
	return 0;
}

const struct cmd_entry cmd_output_entry = {
	.name = "output", .usage = "output[/FMT] EXPR",
	.help = "Print the value of EXPR with no newline and no history entry.",
	.exec = cmd_output_exec, .flags = CMD_FORMAT, .klass = "data",
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
	char buf[4096], ftext[16];

	memset(&v, 0, sizeof(v));
	if (tm_view_is_display(d->expr)) {
		/* a view kind ("display info graph", view.c): its own errors */
		tm_view_display(s, d->num, d->expr);
		return;
	}
	if (tm_evaluate(s, d->expr, &v))
		return;
	tm_val_format_as(&v, &d->fmt, s->set.print_pretty, buf, sizeof(buf));
	tm_fmt_text(&d->fmt, ftext, sizeof(ftext));
	tm_out(s, "%d: %s%s%s = %s%s\n", d->num, ftext, *ftext ? " " : "", d->expr,
	       buf, s->from_note);
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
	struct tm_fmt fmt;
	char ibuf[64];

	memset(&fmt, 0, sizeof(fmt));

	if (*args == '/') {
		/* display/i: the current op at every stop, as x/i (cmd-ops.c);
		 * any other format is kept and applied at every stop */
		size_t fl = strcspn(args, " \t");

		if (memchr(args, 'i', fl)) {
			unsigned long n = strtoul(args + 1, NULL, 10);

			snprintf(ibuf, sizeof(ibuf), "x/%lui $pc", n ? n : 1);
			args = ibuf;
		} else if (tm_fmt_parse(s, &args, &fmt, "display", 0)) {
			return -1;
		}
	}
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
	d->fmt = fmt;
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
	.exec = cmd_display_exec, .flags = CMD_FORMAT, .klass = "data",
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
			/* GDB prints this and goes on */
			tm_out(s, "No display number %ld.\n", num);
			p = end;
			continue;
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
