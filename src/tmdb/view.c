/*
 * view.c -- what the views of a trace share: the options they take before
 * their operand (-color, -width, -png, ...), tensor references with slices
 * (ADDR:SLOT[...] or tensor[...]) and their elements, and the view kinds of
 * `display` (view-display.c).  One view per file: cmd-heatmap.c,
 * cmd-plot.c, cmd-x.c, view-graph.c (info graph), view-stats.c (info
 * stats); view-series.c reads one stat over steps for heatmap and plot.
 *
 * Every view shows the moment at the playhead and is also a `display` kind,
 * so that it is drawn again after each stop: scrubbing the playhead animates
 * them.  Data comes through the session and its probe only (lookups, seek
 * and next_event), never from a reader, so the same code serves a live
 * probe.  Views that span the trace ("over steps", plot) read it in one pass
 * that Ctrl-C stops, and put the probe's cursor back afterwards.
 *
 * Drawing (characters, colours, PNG) is render.c's business; the view
 * files decide what goes into the cells.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tmdb.h"
#include "render.h"
#include "view.h"
#include "view-int.h"

/* ------------------------------------------------------------- options */

static int auto_mode(struct tm_session *s)
{
	const char *nc = getenv("NO_COLOR"), *ct = getenv("COLORTERM");

	if (!s->set.style || s->out_fn || (nc && *nc) || !s->out ||
	    !isatty(fileno(s->out)))
		return RENDER_PLAIN;
	if (ct && (strstr(ct, "truecolor") || strstr(ct, "24bit")))
		return RENDER_24BIT;
	return RENDER_256;
}

size_t view_word_len(const char *p)
{
	return strcspn(p, " \t");
}

int view_word_eq(const char *p, size_t l, const char *w)
{
	return l == strlen(w) && !strncmp(p, w, l);
}

/* -png, -svg, -pdf (one dash or two): the format, or -1. */
static int pic_option(const char *w, size_t wl)
{
	int f;

	for (f = 0; f < PIC__COUNT; f++)
		if (view_word_eq(w, wl, pic_format_name(f)))
			return f;
	return -1;
}

/*
 * "heatmap abs_max over steps --png F": GDB's options come before the
 * operand; a known option word after it gets a message that says so.
 */
static int trailing_option(struct tm_session *s, const char *p)
{
	static const char *const names[] = {
		"png", "svg", "pdf", "width", "height", "scale", "log", "color",
		"colour", "color256", "nocolor", "no-color"
	};
	const char *q;
	size_t i;

	for (q = p; *q; q++) {
		const char *w;
		size_t wl;

		if (*q != '-' || (q > p && !isspace((unsigned char)q[-1])))
			continue;
		w = q + (q[1] == '-' ? 2 : 1);
		wl = view_word_len(w);
		for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			if (view_word_eq(w, wl, names[i])) {
				const char *e = w + wl;

				if (i < 6) {    /* the option's argument */
					e = tm_skip_ws(e);
					e += view_word_len(e);
				}
				tm_error(s, "Options come first, as in GDB: put "
					 "\"%.*s\" before the expression.",
					 (int)(e - q), q);
				return -1;
			}
	}
	return 0;
}

/* Returns the rest of the arguments after the options, or NULL on an error
 * already reported. */
const char *view_parse_opts(struct tm_session *s, const char *p,
			    struct vopts *o, int def_w, int def_h)
{
	memset(o, 0, sizeof(*o));
	o->mode = -1;
	o->width = def_w;
	o->height = def_h;
	for (p = tm_skip_ws(p); *p == '-'; p = tm_skip_ws(p)) {
		const char *w = p + (p[1] == '-' ? 2 : 1);
		size_t l = view_word_len(p), wl = view_word_len(w);
		uint64_t v;

		if (l == 2 && p[1] == '-') {
			p += 2;
			break;
		}
		if (view_word_eq(w, wl, "color") || view_word_eq(w, wl, "colour")) {
			o->mode = RENDER_24BIT;
		} else if (view_word_eq(w, wl, "color256")) {
			o->mode = RENDER_256;
		} else if (view_word_eq(w, wl, "nocolor") || view_word_eq(w, wl, "no-color")) {
			o->mode = RENDER_PLAIN;
		} else if (view_word_eq(w, wl, "log")) {
			o->log = 1;
		} else if (view_word_eq(w, wl, "unicode")) {
			o->unicode = 1;
		} else if (view_word_eq(w, wl, "width") || view_word_eq(w, wl, "height") ||
			   view_word_eq(w, wl, "scale")) {
			const char *n = tm_skip_ws(w + wl);
			size_t nl = view_word_len(n);
			char num[32];

			if (!nl || nl >= sizeof(num)) {
				tm_error(s, "Option -%.*s needs a number.", (int)wl, w);
				return NULL;
			}
			memcpy(num, n, nl);
			num[nl] = 0;
			if (tm_parse_uint(num, &v) || v < 1 || v > 1024 ||
			    (w[0] == 's' && v > 64)) {
				tm_error(s, "Bad number \"%s\" for -%.*s.", num, (int)wl, w);
				return NULL;
			}
			if (w[0] == 'w')
				o->width = (int)v;
			else if (w[0] == 'h')
				o->height = (int)v;
			else
				o->pic.cell = (int)v;
			p = n + nl;
			continue;
		} else if (pic_option(w, wl) >= 0) {
			const char *n = tm_skip_ws(w + wl);
			size_t nl = view_word_len(n);
			int f = pic_option(w, wl);

			if (!nl || nl >= sizeof(o->pic.path[f]) || *n == '-') {
				tm_error(s, "Option -%s needs a file name.",
					 pic_format_name(f));
				return NULL;
			}
			memcpy(o->pic.path[f], n, nl);
			o->pic.path[f][nl] = 0;
			p = n + nl;
			continue;
		} else {
			/* A negative number or similar: the operand starts here. */
			if (isdigit((unsigned char)w[0]))
				break;
			tm_error(s, "Unrecognized option at: %.*s", (int)l, p);
			return NULL;
		}
		p += l;
	}
	if (o->mode < 0)
		o->mode = auto_mode(s);
	if (trailing_option(s, p))
		return NULL;
	return p;
}

int view_write_heatmap(struct tm_session *s, const struct vopts *o,
		       const struct pic_heatmap *hm)
{
	char err[1200];
	int f, w, h;

	for (f = 0; f < PIC__COUNT; f++) {
		if (!o->pic.path[f][0])
			continue;
		if (picture_heatmap(o->pic.path[f], f, hm, o->pic.cell, &w, &h,
				    err, sizeof(err))) {
			tm_error(s, "%s", err);
			return -1;
		}
		tm_out(s, "Wrote %s (%d x %d %s).\n", o->pic.path[f], w, h,
		       f == PIC_PNG ? "pixels" : "points");
	}
	return 0;
}

int view_write_text(struct tm_session *s, const struct vopts *o,
		    const struct pic_text *tx)
{
	char err[1200];
	int f, w, h;

	for (f = 0; f < PIC__COUNT; f++) {
		if (!o->pic.path[f][0])
			continue;
		if (picture_text(o->pic.path[f], f, tx, &w, &h, err, sizeof(err))) {
			tm_error(s, "%s", err);
			return -1;
		}
		tm_out(s, "Wrote %s (%d x %d %s).\n", o->pic.path[f], w, h,
		       f == PIC_PNG ? "pixels" : "points");
	}
	return 0;
}

int view_write_plot(struct tm_session *s, const struct vopts *o,
		    const struct pic_plot *pl)
{
	char err[1200];
	int f, w, h;

	for (f = 0; f < PIC__COUNT; f++) {
		if (!o->pic.path[f][0])
			continue;
		if (picture_plot(o->pic.path[f], f, pl, &w, &h, err, sizeof(err))) {
			tm_error(s, "%s", err);
			return -1;
		}
		tm_out(s, "Wrote %s (%d x %d %s).\n", o->pic.path[f], w, h,
		       f == PIC_PNG ? "pixels" : "points");
	}
	return 0;
}

/* ------------------------------------------------------------- tensors */

/*
 * slices := '[' item (',' item)* ']'
 * item   := INT | [INT] ':' [INT]
 * Negative numbers count from the end, as in Python.
 */
static int parse_slices(struct tm_session *s, const char *p, struct tref *r)
{
	char *end;

	p = tm_skip_ws(p + 1);
	for (;;) {
		int k = r->nslice;

		if (k >= TM_MAX_RANK) {
			tm_error(s, "Too many indices (at most %d).", TM_MAX_RANK);
			return -1;
		}
		r->lo[k] = 0;
		r->hi[k] = 0;
		r->open_hi[k] = 0;
		r->is_index[k] = 0;
		if (*p == ':') {
			r->open_hi[k] = 1;
		} else {
			r->lo[k] = strtoll(p, &end, 10);
			if (end == p) {
				tm_error(s, "Bad index at \"%s\".", p);
				return -1;
			}
			p = tm_skip_ws(end);
			if (*p != ':') {
				r->is_index[k] = 1;
				r->hi[k] = r->lo[k] + 1;
			} else {
				r->open_hi[k] = 1;
			}
		}
		if (*p == ':') {
			p = tm_skip_ws(p + 1);
			if (*p != ',' && *p != ']') {
				r->hi[k] = strtoll(p, &end, 10);
				if (end == p) {
					tm_error(s, "Bad index at \"%s\".", p);
					return -1;
				}
				r->open_hi[k] = 0;
				p = tm_skip_ws(end);
			}
		}
		r->nslice++;
		if (*p == ']')
			break;
		if (*p != ',') {
			tm_error(s, "Expected \",\" or \"]\" at \"%s\".", p);
			return -1;
		}
		p = tm_skip_ws(p + 1);
	}
	if (*tm_skip_ws(p + 1)) {
		tm_error(s, "Junk after \"]\": \"%s\".", tm_skip_ws(p + 1));
		return -1;
	}
	return 0;
}

/* Parses the operand (one word plus slices) into r; -1 after an error. */
int view_parse_tref(struct tm_session *s, const char *text, struct tref *r)
{
	char buf[TM_ADDRESS_MAX + 40];
	const struct tm_node *n;
	tm_address *a = NULL;
	const char *br;
	size_t l;

	memset(r, 0, sizeof(*r));
	text = tm_skip_ws(text);
	/* slices start at the first '[' that is not a request's rows ("[r1]") */
	for (br = strchr(text, '['); br && br[1] == 'r' && isdigit((unsigned char)br[2]);
	     br = strchr(br + 1, '['))
		;
	l = br ? (size_t)(br - text) : strlen(text);
	while (l && (text[l - 1] == ' ' || text[l - 1] == '\t'))
		l--;
	if (!l) {
		tm_error(s, "Argument required (ADDRESS:SLOT of a tensor).");
		return -1;
	}
	if (l >= sizeof(buf)) {
		tm_error(s, "Address too long.");
		return -1;
	}
	memcpy(buf, text, l);
	buf[l] = 0;
	snprintf(r->name, sizeof(r->name), "%s", buf);
	if (br && parse_slices(s, br, r))
		return -1;
	if (!strcmp(buf, "tensor")) {
		r->focus = 1;
		return 0;
	}
	if (tm_address_parse(buf, &a, NULL, NULL) != TM_OK ||
	    !tm_address_has_slot(a) || tm_address_is_pattern(a)) {
		tm_address_free(a);
		tm_error(s, "\"%s\" is not a tensor: write ADDRESS:SLOT, "
			 "e.g. model.layers.0:out, or \"tensor\".", buf);
		return -1;
	}
	n = tm_session_node(s, a);
	if (!n) {
		char path[TM_ADDRESS_MAX];

		snprintf(path, sizeof(path), "%s", tm_address_path(a));
		tm_address_free(a);
		return tm_address_error(s, path);
	}
	r->node = n->id;
	r->slot = tm_address_slot(a, NULL);
	r->call = tm_address_call(a);
	tm_address_free(a);
	return 0;
}

int tm_view_tensor_ref(struct tm_session *s, const char *text, uint32_t *node,
		       struct tm_slot *slot)
{
	struct tref r;

	if (view_parse_tref(s, text, &r))
		return -1;
	if (r.focus || r.nslice) {
		tm_error(s, "\"%s\": name one node's tensor, ADDRESS:SLOT, without slices.",
			 tm_skip_ws(text));
		return -1;
	}
	*node = r.node;
	*slot = r.slot;
	return 0;
}

/* The tensor at the playhead (the latest one, as print shows it). */
const struct tm_tensor *view_get_tensor(struct tm_session *s,
					const struct tref *r,
					const struct tm_event **ev)
{
	const struct tm_tensor *t;
	uint32_t reason = 0;
	char why[128];

	*ev = NULL;
	if (!s->have_cur) {
		tm_error(s, "No current event.  Use \"run\", \"step\" or \"goto\" first.");
		return NULL;
	}
	if (r->focus) {
		/* the selected frame's: its inputs as it entered */
		t = tm_focus_tensor(s);
		*ev = tm_focus_event(s);
		if (!t || !*ev) {
			tm_error(s, "No tensor in focus at this %s.",
				 s->sel_frame ? "frame" : "event");
			return NULL;
		}
		return t;
	}
	t = s->env.lookup(s, r->node, r->slot, r->call, ev, &reason);
	if (!t) {
		if (reason && tm_gap_reason_format(reason, why, sizeof(why)) == TM_OK)
			tm_error(s, "%s is unknown at the playhead: lost to a gap (%s).",
				 r->name, why);
		else
			tm_error(s, "%s has not been recorded up to the playhead.",
				 r->name);
	}
	return t;
}

uint64_t view_tensor_numel(const struct tm_tensor *t)
{
	uint64_t n = 1;
	int i;

	for (i = 0; i < t->rank; i++)
		n *= t->shape[i] > 0 ? (uint64_t)t->shape[i] : 0;
	return n;
}

/* Can we read elements of t?  Says why not. */
int view_payload_ok(struct tm_session *s, const struct tref *r,
		    const struct tm_tensor *t)
{
	size_t sz = tm_dtype_size(t->dtype);

	if (!t->payload) {
		tm_error(s, "%s has no captured contents at the playhead, only stats "
			 "(record at level 3, or \"capture\" it live).", r->name);
		return -1;
	}
	switch (t->dtype) {
	case TM_DT_F32: case TM_DT_F64: case TM_DT_F16: case TM_DT_BF16:
	case TM_DT_I8: case TM_DT_I16: case TM_DT_I32: case TM_DT_I64:
	case TM_DT_U8: case TM_DT_U16: case TM_DT_U32: case TM_DT_U64:
	case TM_DT_BOOL:
		break;
	default:
		tm_error(s, "Cannot show elements of dtype %s.", tm_dtype_name(t->dtype));
		return -1;
	}
	if (!sz || t->payload_len / sz < view_tensor_numel(t)) {
		tm_error(s, "%s: the captured contents are shorter than its shape.",
			 r->name);
		return -1;
	}
	return 0;
}

void view_format_shape(const struct tm_tensor *t, char *buf, size_t len)
{
	size_t off = 0;
	int i;

	off += (size_t)snprintf(buf, len, "[");
	for (i = 0; i < t->rank && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%" PRId64,
					i ? ", " : "", t->shape[i]);
	if (off < len)
		snprintf(buf + off, len - off, "]");
}

void view_where_line(struct tm_session *s, struct rbuf *b,
		     const struct tm_event *ev)
{
	if (!ev)
		ev = &s->cur;
	rb_printf(b, "step %" PRIu64 ", %s, seq %" PRIu64, ev->step,
		  tm_phase_name(ev->phase), ev->seq);
}

void view_flush_rb(struct tm_session *s, struct rbuf *b)
{
	if (b->len)
		tm_out(s, "%s", b->p);
	if (b->oom)
		tm_error(s, "Out of memory while drawing.");
	rb_free(b);
}

int view_resolve_slices(struct tm_session *s, const struct tref *r,
			const struct tm_tensor *t, struct sview *v)
{
	uint64_t stride[TM_MAX_RANK];
	int64_t lo[TM_MAX_RANK], cnt[TM_MAX_RANK];
	int kept[TM_MAX_RANK], nkept = 0, d, i;
	size_t off = 0;

	memset(v, 0, sizeof(*v));
	if (r->nslice > t->rank) {
		tm_error(s, "%s has %d dimension%s, %d indices given.", r->name,
			 t->rank, t->rank == 1 ? "" : "s", r->nslice);
		return -1;
	}
	for (d = t->rank - 1, i = 0; d >= 0; d--) {
		stride[d] = i ? stride[d + 1] * (uint64_t)t->shape[d + 1] : 1;
		i = 1;
	}
	for (d = 0; d < t->rank; d++) {
		int64_t n = t->shape[d], a = 0, b = n;

		if (d < r->nslice) {
			a = r->lo[d] < 0 ? r->lo[d] + n : r->lo[d];
			if (r->is_index[d]) {
				if (a < 0 || a >= n) {
					tm_error(s, "Index %" PRId64 " out of range for "
						 "dimension %d of size %" PRId64 ".",
						 r->lo[d], d, n);
					return -1;
				}
				b = a + 1;
			} else {
				b = r->open_hi[d] ? n : r->hi[d] < 0 ? r->hi[d] + n : r->hi[d];
				if (a < 0)
					a = 0;
				if (b > n)
					b = n;
				if (b <= a) {
					tm_error(s, "Empty slice in dimension %d.", d);
					return -1;
				}
			}
		}
		lo[d] = a;
		cnt[d] = b - a;
		if (!(d < r->nslice && r->is_index[d]))
			kept[nkept++] = d;
	}
	/* More than two dimensions left: fix the leading ones at their start. */
	while (nkept > 2) {
		cnt[kept[0]] = 1;
		v->auto_fixed++;
		memmove(kept, kept + 1, (size_t)(nkept - 1) * sizeof(kept[0]));
		nkept--;
	}
	for (d = 0; d < t->rank; d++)
		v->base += (uint64_t)lo[d] * stride[d];
	v->nk = nkept;
	for (i = 0; i < nkept; i++) {
		v->stride[i] = stride[kept[i]];
		v->count[i] = cnt[kept[i]];
	}
	off += (size_t)snprintf(v->desc, sizeof(v->desc), "[");
	for (d = 0; d < t->rank && off < sizeof(v->desc); d++) {
		int is_kept = 0;

		for (i = 0; i < nkept; i++)
			is_kept |= kept[i] == d;
		if (!is_kept)
			off += (size_t)snprintf(v->desc + off, sizeof(v->desc) - off,
						"%s%" PRId64, d ? ", " : "", lo[d]);
		else if (lo[d] == 0 && cnt[d] == t->shape[d])
			off += (size_t)snprintf(v->desc + off, sizeof(v->desc) - off,
						"%s:", d ? ", " : "");
		else
			off += (size_t)snprintf(v->desc + off, sizeof(v->desc) - off,
						"%s%" PRId64 ":%" PRId64, d ? ", " : "",
						lo[d], lo[d] + cnt[d]);
	}
	if (off < sizeof(v->desc))
		snprintf(v->desc + off, sizeof(v->desc) - off, "]");
	return 0;
}
