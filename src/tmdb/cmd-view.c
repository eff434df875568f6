/*
 * cmd-view.c -- looking at a trace rather than reading it: the architecture
 * view (`info graph`), heatmaps of captured tensors and of one stat over
 * steps (`heatmap`), every stat of one tensor (`info stats`), a line chart
 * of a stat over time (`plot`) and `x`, GDB's examine, on tensor elements.
 *
 * Every view shows the moment at the playhead and is also a `display` kind,
 * so that it is drawn again after each stop: scrubbing the playhead animates
 * them.  Data comes through the session and its probe only (lookups, seek
 * and next_event), never from a reader, so the same code serves a live
 * probe.  Views that span the trace ("over steps", plot) read it in one pass
 * that Ctrl-C stops, and put the probe's cursor back afterwards.
 *
 * Drawing (characters, colours, PNG) is render.c's business; this file
 * decides what goes into the cells.
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

/* ------------------------------------------------------------- options */

/*
 * Options shared by the views, GDB style, before the operand:
 *   -color | -color256 | -nocolor   force the colour mode (else: a terminal
 *                                   without NO_COLOR gets colour)
 *   -width N, -height N             the most cells drawn across and down
 *   -png FILE (or --png FILE)       also write the picture as a PNG
 *   -scale N                        PNG pixels per cell (default 8)
 *   -log                            colours on a log scale (counts)
 */
struct vopts {
	int mode;               /* -1: decide from the terminal */
	int width, height;
	char png[1024];
	int scale;
	int log;
};

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

static size_t word_len(const char *p)
{
	return strcspn(p, " \t");
}

static int word_eq(const char *p, size_t l, const char *w)
{
	return l == strlen(w) && !strncmp(p, w, l);
}

/* Returns the rest of the arguments after the options, or NULL on an error
 * already reported. */
static const char *parse_opts(struct tm_session *s, const char *p,
			      struct vopts *o, int def_w, int def_h)
{
	memset(o, 0, sizeof(*o));
	o->mode = -1;
	o->width = def_w;
	o->height = def_h;
	o->scale = 8;
	for (p = tm_skip_ws(p); *p == '-'; p = tm_skip_ws(p)) {
		const char *w = p + (p[1] == '-' ? 2 : 1);
		size_t l = word_len(p), wl = word_len(w);
		uint64_t v;

		if (l == 2 && p[1] == '-') {
			p += 2;
			break;
		}
		if (word_eq(w, wl, "color") || word_eq(w, wl, "colour")) {
			o->mode = RENDER_24BIT;
		} else if (word_eq(w, wl, "color256")) {
			o->mode = RENDER_256;
		} else if (word_eq(w, wl, "nocolor") || word_eq(w, wl, "no-color")) {
			o->mode = RENDER_PLAIN;
		} else if (word_eq(w, wl, "log")) {
			o->log = 1;
		} else if (word_eq(w, wl, "width") || word_eq(w, wl, "height") ||
			   word_eq(w, wl, "scale")) {
			const char *n = tm_skip_ws(w + wl);
			size_t nl = word_len(n);
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
				o->scale = (int)v;
			p = n + nl;
			continue;
		} else if (word_eq(w, wl, "png")) {
			const char *n = tm_skip_ws(w + wl);
			size_t nl = word_len(n);

			if (!nl || nl >= sizeof(o->png)) {
				tm_error(s, "Option -png needs a file name.");
				return NULL;
			}
			memcpy(o->png, n, nl);
			o->png[nl] = 0;
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
	return p;
}

/* ------------------------------------------------------------- tensors */

/* ADDR:SLOT[slices] or tensor[slices], resolved against the node table. */
struct tref {
	int focus;              /* "tensor": the focus tensor at the playhead */
	uint32_t node;
	struct tm_slot slot;
	uint32_t call;
	char name[TM_ADDRESS_MAX + 40];
	/* slices: per dimension an index (lo + 1 == hi, is_index) or a range */
	int nslice;
	int64_t lo[TM_MAX_RANK], hi[TM_MAX_RANK];
	int is_index[TM_MAX_RANK], open_hi[TM_MAX_RANK];
};

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
static int parse_tref(struct tm_session *s, const char *text, struct tref *r)
{
	char buf[TM_ADDRESS_MAX + 40];
	const struct tm_node *n;
	tm_address *a = NULL;
	const char *br;
	size_t l;

	memset(r, 0, sizeof(*r));
	text = tm_skip_ws(text);
	br = strchr(text, '[');
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

	if (parse_tref(s, text, &r))
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
static const struct tm_tensor *get_tensor(struct tm_session *s,
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
		t = tm_focus_tensor(s);
		*ev = &s->cur;
		if (!t)
			tm_error(s, "No tensor in focus at this event.");
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

static uint64_t tensor_numel(const struct tm_tensor *t)
{
	uint64_t n = 1;
	int i;

	for (i = 0; i < t->rank; i++)
		n *= t->shape[i] > 0 ? (uint64_t)t->shape[i] : 0;
	return n;
}

static double half_to_double(uint16_t h)
{
	int e = (h >> 10) & 0x1f, m = h & 0x3ff;
	double v;

	if (e == 0)
		v = ldexp(m, -24);
	else if (e == 31)
		v = m ? NAN : INFINITY;
	else
		v = ldexp(m + 1024, e - 25);
	return h & 0x8000 ? -v : v;
}

/* Element i of the payload as a double (little-endian, row-major). */
static double elem(const struct tm_tensor *t, uint64_t i)
{
	const uint8_t *p = (const uint8_t *)t->payload + i * tm_dtype_size(t->dtype);
	uint64_t u = 0;
	size_t k, sz = tm_dtype_size(t->dtype);
	union { uint32_t u; float f; } f32;
	union { uint64_t u; double d; } f64;

	for (k = 0; k < sz && k < 8; k++)
		u |= (uint64_t)p[k] << (8 * k);
	switch (t->dtype) {
	case TM_DT_F32: f32.u = (uint32_t)u; return f32.f;
	case TM_DT_F64: f64.u = u; return f64.d;
	case TM_DT_F16: return half_to_double((uint16_t)u);
	case TM_DT_BF16: f32.u = (uint32_t)u << 16; return f32.f;
	case TM_DT_I8: return (int8_t)u;
	case TM_DT_I16: return (int16_t)u;
	case TM_DT_I32: return (int32_t)u;
	case TM_DT_I64: return (double)(int64_t)u;
	case TM_DT_U8: case TM_DT_U16: case TM_DT_U32: case TM_DT_U64:
	case TM_DT_BOOL:
		return (double)u;
	default: return NAN;
	}
}

/* Can we read elements of t?  Says why not. */
static int payload_ok(struct tm_session *s, const struct tref *r,
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
	if (!sz || t->payload_len / sz < tensor_numel(t)) {
		tm_error(s, "%s: the captured contents are shorter than its shape.",
			 r->name);
		return -1;
	}
	return 0;
}

static void format_shape(const struct tm_tensor *t, char *buf, size_t len)
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

static void where_line(struct tm_session *s, struct rbuf *b,
		       const struct tm_event *ev)
{
	if (!ev)
		ev = &s->cur;
	rb_printf(b, "step %" PRIu64 ", %s, seq %" PRIu64, ev->step,
		  tm_phase_name(ev->phase), ev->seq);
}

static void flush_rb(struct tm_session *s, struct rbuf *b)
{
	if (b->len)
		tm_out(s, "%s", b->p);
	if (b->oom)
		tm_error(s, "Out of memory while drawing.");
	rb_free(b);
}

/*
 * The 2-D (or 1-D, or single element) window of a tensor that the slices
 * select.  Dimensions left over beyond two are fixed at index 0, and the
 * description says so.
 */
struct sview {
	uint64_t base;          /* flat index of the first element */
	int nk;                 /* kept dimensions, 0..2 */
	uint64_t stride[2];
	int64_t count[2];
	int auto_fixed;         /* leading dimensions we fixed at 0 */
	char desc[256];
};

static int resolve_slices(struct tm_session *s, const struct tref *r,
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

/* ------------------------------------------------------------- heatmap */

/*
 * Fills the grid from a window of the tensor.  A cell stands for a block of
 * elements: NaN anywhere in the block makes it NaN, then +Inf, then -Inf;
 * otherwise the block's mean.  (A spike inside a block therefore shows as a
 * brighter cell, not always as the peak; -width/-height give more cells.)
 */
static int fill_tensor_grid(const struct tm_tensor *t, const struct sview *v,
			    int maxw, int maxh, int logscale, struct rgrid *g)
{
	int64_t rows = v->nk == 2 ? v->count[0] : 1;
	int64_t cols = v->nk >= 1 ? v->count[v->nk - 1] : 1;
	uint64_t rs = v->nk == 2 ? v->stride[0] : 0;
	uint64_t cs = v->nk >= 1 ? v->stride[v->nk - 1] : 0;
	int w = cols < maxw ? (int)cols : maxw, h = rows < maxh ? (int)rows : maxh;
	double *cell, lo = INFINITY, hi = -INFINITY;
	int x, y;

	if (rgrid_init(g, w, h))
		return -1;
	cell = malloc((size_t)w * (size_t)h * sizeof(*cell));
	if (!cell) {
		rgrid_free(g);
		return -1;
	}
	for (y = 0; y < h; y++) {
		int64_t r0 = rows * y / h, r1 = rows * (y + 1) / h;

		for (x = 0; x < w; x++) {
			int64_t c0 = cols * x / w, c1 = cols * (x + 1) / w, rr, cc;
			double sum = 0, n = 0;
			int nan = 0, pinf = 0, ninf = 0;

			for (rr = r0; rr < r1; rr++) {
				for (cc = c0; cc < c1; cc++) {
					double e = elem(t, v->base + (uint64_t)rr * rs +
							(uint64_t)cc * cs);

					if (isnan(e))
						nan = 1;
					else if (isinf(e))
						*(e > 0 ? &pinf : &ninf) = 1;
					else {
						sum += e;
						n++;
					}
				}
			}
			cell[y * w + x] = nan ? NAN : pinf ? INFINITY : ninf ? -INFINITY :
					  n ? sum / n : NAN;
			if (logscale)
				cell[y * w + x] = render_log(cell[y * w + x]);
			if (!nan && !pinf && !ninf && n) {
				double m = cell[y * w + x];

				if (m < lo)
					lo = m;
				if (m > hi)
					hi = m;
			}
		}
	}
	g->lo = lo <= hi ? lo : 0;
	g->hi = lo <= hi ? hi : 0;
	g->log = logscale;
	for (y = 0; y < h; y++)
		for (x = 0; x < w; x++)
			rgrid_set(g, x, y, cell[y * w + x]);
	free(cell);
	return 0;
}

/* After the text render, so that messages come in reading order. */
static int write_png(struct tm_session *s, const struct vopts *o,
		     const struct rgrid *g)
{
	int err;

	if (!o->png[0])
		return 0;
	err = render_png(o->png, g, o->scale);
	if (err) {
		tm_error(s, "Cannot write %s: %s.", o->png, strerror(err));
		return -1;
	}
	tm_out(s, "Wrote %s (%d x %d pixels).\n", o->png, g->w * o->scale,
	       g->h * o->scale);
	return 0;
}

static int heatmap_over_steps(struct tm_session *s, const char *expr,
			      const char *range, const struct vopts *o);

static int heatmap_tensor(struct tm_session *s, const char *args,
			  const struct vopts *o)
{
	const struct tm_tensor *t;
	const struct tm_event *ev;
	struct tref r;
	struct sview v;
	struct rgrid g;
	struct rbuf b;
	char shape[160];
	int rc;

	if (parse_tref(s, args, &r))
		return -1;
	t = get_tensor(s, &r, &ev);
	if (!t || payload_ok(s, &r, t) || resolve_slices(s, &r, t, &v))
		return -1;
	if (fill_tensor_grid(t, &v, o->width, o->height, o->log, &g)) {
		tm_error(s, "Out of memory.");
		return -1;
	}
	rb_init(&b);
	format_shape(t, shape, sizeof(shape));
	rb_printf(&b, "%s %s %s at ", r.name, tm_dtype_name(t->dtype), shape);
	where_line(s, &b, ev);
	rb_printf(&b, "\nShowing %s%s: %" PRId64 " x %" PRId64 " elements in "
		  "%d x %d cells\n", v.desc,
		  v.auto_fixed ? " (leading dimensions fixed at 0)" : "",
		  v.nk == 2 ? v.count[0] : 1, v.nk ? v.count[v.nk - 1] : 1,
		  g.h, g.w);
	render_grid(&b, &g, o->mode, "  ");
	render_legend(&b, &g, o->mode);
	flush_rb(s, &b);
	rc = write_png(s, o, &g);
	rgrid_free(&g);
	return rc;
}

/*
 * heatmap [OPTIONS] ADDR:SLOT[slices]
 * heatmap [OPTIONS] [PATTERN:SLOT.]STAT over steps [A..B]
 */
static int cmd_heatmap_exec(struct tm_session *s, const char *args, int from_tty)
{
	struct vopts o;
	const char *p, *over;
	char expr[TM_ADDRESS_MAX + 64];
	int rc;

	(void)from_tty;
	p = parse_opts(s, args, &o, 64, 32);
	if (!p)
		return -1;
	over = strstr(p, " over ");
	if (over && !strncmp(tm_skip_ws(over + 6), "steps", 5)) {
		size_t l = (size_t)(over - p);

		if (l >= sizeof(expr)) {
			tm_error(s, "Expression too long.");
			return -1;
		}
		memcpy(expr, p, l);
		expr[l] = 0;
		rc = heatmap_over_steps(s, tm_strip(expr),
					tm_skip_ws(tm_skip_ws(over + 6) + 5), &o);
		return rc;
	}
	return heatmap_tensor(s, p, &o);
}

const struct cmd_entry cmd_heatmap_entry = {
	.name = "heatmap", .alias = "hm",
	.usage = "heatmap [-nocolor|-color|-color256] [-width N] [-height N] "
		 "[-png FILE] ADDR:SLOT[slices] | [PATTERN:SLOT.]STAT over steps [A..B]",
	.help = "Draw a captured tensor, or one stat of many nodes over steps.\n"
		"With ADDR:SLOT, the tensor at the playhead (level-3 contents) as a\n"
		"picture: a 2-D slice, e.g. model.layers.0:out[0] or [0, :16, :].\n"
		"With \"STAT over steps\", nodes as rows and steps as columns, e.g.\n"
		"\"heatmap model.**:out.abs_max over steps 0..100\".  NaN, +Inf and\n"
		"-Inf have colours of their own; gaps are hatched, never filled in.\n"
		"-png FILE also writes the picture as a PNG (-scale N pixels a cell).",
	.exec = cmd_heatmap_exec, .flags = CMD_NEEDS_TRACE, .klass = "data",
};

/* ------------------------------------------------------------- series */

/* A stat of the nodes a pattern matches: [PATTERN:SLOT.]STAT, STAT "time". */
struct sterm {
	tm_address *a;
	struct tm_slot slot;
	int stat;               /* enum tm_stat, or -1: the call's duration */
	int evkind;
	char text[TM_ADDRESS_MAX + 64];
};

/* One node's value at one step (the last call of the step). */
struct samp {
	uint32_t node;
	uint64_t step;
	double v;
	uint8_t kind;           /* enum cell_kind: VAL, NAN, POSINF, NEGINF */
};

struct series {
	struct samp *v;
	size_t n, cap;
	uint64_t *gap;          /* steps holding a gap record */
	size_t ngap, gcap;
	uint64_t first, last;   /* steps seen */
	int any;
	int interrupted;
};

static int stat_from(const char *name)
{
	if (!strcmp(name, "time"))
		return -1;
	return tm_stat_from_name(name);
}

static void stat_names(char *buf, size_t len)
{
	size_t off = 0;
	int i;

	for (i = 0; i < TM_STAT__COUNT && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s, ",
					tm_stat_table[i].name);
	if (off < len)
		snprintf(buf + off, len - off, "time");
}

static int parse_sterm(struct tm_session *s, const char *text, int need_one,
		       struct sterm *st)
{
	char buf[TM_ADDRESS_MAX + 64], names[512];
	const char *colon, *dot, *stat;
	int col = 0;
	const char *msg = NULL;

	memset(st, 0, sizeof(*st));
	text = tm_skip_ws(text);
	if (!*text) {
		tm_error(s, "Argument required (NODE:SLOT.STAT).");
		return -1;
	}
	snprintf(st->text, sizeof(st->text), "%s", text);
	colon = strchr(text, ':');
	if (!colon) {
		if (need_one) {
			tm_error(s, "Name a node: ADDRESS:SLOT.STAT, e.g. model.head:out.abs_max.");
			return -1;
		}
		snprintf(buf, sizeof(buf), "**:out");
		stat = text;
	} else {
		dot = strrchr(colon, '.');
		if (!dot) {
			tm_error(s, "\"%s\" names no stat: write ADDRESS:SLOT.STAT.", text);
			return -1;
		}
		if ((size_t)(dot - text) >= sizeof(buf)) {
			tm_error(s, "Address too long.");
			return -1;
		}
		memcpy(buf, text, (size_t)(dot - text));
		buf[dot - text] = 0;
		stat = dot + 1;
	}
	st->stat = stat_from(stat);
	if (st->stat == -1 && strcmp(stat, "time"))
		st->stat = -2;
	if (st->stat == -2) {
		stat_names(names, sizeof(names));
		tm_error(s, "Unknown stat \"%s\".  Stats: %s.", stat, names);
		return -1;
	}
	if (tm_address_parse(buf, &st->a, &col, &msg) != TM_OK) {
		tm_error(s, "Malformed address \"%s\": %s at column %d.", buf,
			 msg ? msg : "syntax error", col + 1);
		return -1;
	}
	if (!tm_address_is_pattern(st->a) &&
	    !tm_session_node(s, st->a)) {
		char path[TM_ADDRESS_MAX];

		snprintf(path, sizeof(path), "%s", tm_address_path(st->a));
		tm_address_free(st->a);
		st->a = NULL;
		return tm_address_error(s, path);
	}
	st->slot = tm_address_slot(st->a, NULL);
	st->evkind = tm_slot_event_kind(st->slot.kind);
	return 0;
}

/* "A..B", "A", or nothing (everything). */
static int parse_range(struct tm_session *s, const char *p, uint64_t *a,
		       uint64_t *b)
{
	char *end;

	*a = 0;
	*b = UINT64_MAX;
	p = tm_skip_ws(p);
	if (!*p)
		return 0;
	if (isdigit((unsigned char)*p)) {
		*a = strtoull(p, &end, 10);
		p = end;
	}
	if (!strncmp(p, "..", 2)) {
		p += 2;
		if (isdigit((unsigned char)*p)) {
			*b = strtoull(p, &end, 10);
			p = end;
		}
	} else {
		*b = *a;
	}
	if (*tm_skip_ws(p) || *b < *a) {
		tm_error(s, "Bad step range: write A..B (either may be left out).");
		return -1;
	}
	return 0;
}

static void series_free(struct series *sr)
{
	free(sr->v);
	free(sr->gap);
	memset(sr, 0, sizeof(*sr));
}

static void see_step(struct series *sr, uint64_t step)
{
	if (!sr->any || step < sr->first)
		sr->first = step;
	if (!sr->any || step > sr->last)
		sr->last = step;
	sr->any = 1;
}

/*
 * One pass over steps a..b collecting the term's value for every matching
 * node and step, and the steps with gaps.  Ctrl-C stops it (what was read
 * is kept and the caller says the picture is partial).
 */
static int scan_series(struct tm_session *s, const struct sterm *st,
		       uint64_t a, uint64_t b, struct series *sr)
{
	uint32_t nn = tm_nodetab_count(s->nodes), i;
	uint8_t *match;
	struct tm_record rec;
	uint64_t tick = 0;
	int err;

	memset(sr, 0, sizeof(*sr));
	memset(&rec, 0, sizeof(rec));
	match = calloc(nn ? nn : 1, 1);
	if (!match)
		return -1;
	for (i = 0; i < nn; i++) {
		const struct tm_node *n = tm_nodetab_get(s->nodes, i);

		match[i] = n && tm_address_match_path(st->a, n->address);
	}
	err = a ? s->probe->ops->seek(s->probe, TM_SEEK_STEP, a) :
		  s->probe->ops->seek(s->probe, TM_SEEK_START, 0);
	while (err == TM_OK) {
		const struct tm_event *ev = &rec.u.event;
		const struct tm_tensor *t = NULL;
		struct samp *sp;
		double v;
		int kind = CELL_VAL;

		if ((++tick & 0xfff) == 0) {
			if (tm_interrupted) {
				sr->interrupted = 1;
				break;
			}
			tm_progress(s, rec.type == TM_REC_EVENT ? ev->seq : 0, 0);
		}
		err = s->probe->ops->next_event(s->probe, TM_DIR_FWD, &rec);
		if (err != TM_OK)
			break;
		if (rec.type == TM_REC_GAP) {
			if (rec.u.gap.step < a || rec.u.gap.step > b)
				continue;
			if (sr->ngap == sr->gcap) {
				size_t cap = sr->gcap ? 2 * sr->gcap : 16;
				uint64_t *g = realloc(sr->gap, cap * sizeof(*g));

				if (!g)
					break;
				sr->gap = g;
				sr->gcap = cap;
			}
			sr->gap[sr->ngap++] = rec.u.gap.step;
			see_step(sr, rec.u.gap.step);
			continue;
		}
		if (rec.type != TM_REC_EVENT || ev->step < a)
			continue;
		if (ev->step > b)
			break;
		/* The axis spans the steps in the trace, with a value or not. */
		see_step(sr, ev->step);
		if (ev->kind != st->evkind || ev->node >= nn || !match[ev->node])
			continue;
		for (i = 0; i < ev->ntensors && !t; i++)
			if (ev->tensors[i].slot.kind == st->slot.kind &&
			    ev->tensors[i].slot.index == st->slot.index)
				t = &ev->tensors[i];
		if (!t)
			continue;
		if (st->stat < 0) {
			v = (double)(ev->end_ns - ev->start_ns);
		} else {
			v = t->stat[st->stat];
			/* A real-valued stat skips non-finite elements: say so. */
			if (!tm_stat_table[st->stat].integer) {
				if ((t->have & TM_STAT_BIT(TM_STAT_NAN_COUNT)) &&
				    t->stat[TM_STAT_NAN_COUNT] > 0)
					kind = CELL_NAN;
				else if ((t->have & TM_STAT_BIT(TM_STAT_POSINF_COUNT)) &&
					 t->stat[TM_STAT_POSINF_COUNT] > 0)
					kind = CELL_POSINF;
				else if ((t->have & TM_STAT_BIT(TM_STAT_NEGINF_COUNT)) &&
					 t->stat[TM_STAT_NEGINF_COUNT] > 0)
					kind = CELL_NEGINF;
			}
			/*
			 * Absent: not captured at this level (no sample), or
			 * no finite element to take it over, which the
			 * non-finite mark above stands for.
			 */
			if (!(t->have & TM_STAT_BIT(st->stat)) &&
			    (kind == CELL_VAL ||
			     !(tm_tql_absent_reason(ev, st->stat) & TM_TQL_NO_FINITE)))
				continue;
		}
		if (sr->n == sr->cap) {
			size_t cap = sr->cap ? 2 * sr->cap : 256;
			struct samp *g = realloc(sr->v, cap * sizeof(*g));

			if (!g)
				break;
			sr->v = g;
			sr->cap = cap;
		}
		sp = &sr->v[sr->n++];
		sp->node = ev->node;
		sp->step = ev->step;
		sp->v = v;
		sp->kind = (uint8_t)kind;
		see_step(sr, ev->step);
	}
	free(match);
	tm_progress(s, 0, 1);
	tm_cursor_restore(s);
	if (err != TM_OK && err != TM_ERR_END) {
		tm_error(s, "Cannot read the trace: %s.", s->probe->ops->detail(s->probe));
		series_free(sr);
		return -1;
	}
	return 0;
}

/*
 * Says so when an explicit range a..b reaches past the steps the trace has:
 * the chart shows only first..last, and that must not pass unremarked.
 */
static void range_note(struct rbuf *out, uint64_t a, uint64_t b,
		       const struct series *sr)
{
	if (a >= sr->first && (b == UINT64_MAX || b <= sr->last))
		return;
	if (b == UINT64_MAX)
		rb_printf(out, "Steps %" PRIu64 ".. asked; the trace has steps %"
			  PRIu64 "..%" PRIu64 " of them.\n", a, sr->first, sr->last);
	else
		rb_printf(out, "Steps %" PRIu64 "..%" PRIu64 " asked; the trace "
			  "has steps %" PRIu64 "..%" PRIu64 " of them.\n", a, b,
			  sr->first, sr->last);
}

/* Where the last step's label goes on an axis w cells wide: under the last
 * cell, or one blank after the first label when they would touch. */
static int axis_gap(int w, uint64_t first)
{
	char buf[24];
	int l = snprintf(buf, sizeof(buf), "%" PRIu64, first);

	return w - 1 > l ? w - 1 : l + 1;
}

/* Worse wins when samples share a cell: NaN, +Inf, -Inf, then the maximum. */
static void cell_merge(uint8_t *kind, double *val, int k, double v)
{
	static const int rank[] = { 0, 1, 4, 3, 2, 0 };

	if (*kind == CELL_EMPTY || rank[k] > rank[*kind] ||
	    (k == CELL_VAL && *kind == CELL_VAL && v > *val)) {
		*kind = (uint8_t)k;
		*val = v;
	}
}

static const char *stat_label(const struct sterm *st)
{
	return st->stat < 0 ? "time (ns)" : tm_stat_table[st->stat].name;
}

static int heatmap_over_steps(struct tm_session *s, const char *expr,
			      const char *range, const struct vopts *o)
{
	uint32_t nn = tm_nodetab_count(s->nodes), i;
	struct sterm st;
	struct series sr;
	int32_t *row = NULL;
	uint32_t nrows = 0, *rownode = NULL;
	uint8_t *kind = NULL;
	double *val = NULL, lo = INFINITY, hi = -INFINITY;
	uint64_t a, b, nsteps;
	size_t k;
	int w, x, y, labw = 8, rc = -1, pcol = -1;
	struct rgrid g;
	struct rbuf out;

	if (parse_range(s, range, &a, &b) || parse_sterm(s, expr, 0, &st))
		return -1;
	if (scan_series(s, &st, a, b, &sr)) {
		tm_address_free(st.a);
		return -1;
	}
	memset(&g, 0, sizeof(g));
	rb_init(&out);
	if (!sr.n) {
		tm_out(s, "No values of %s in %s.\n", stat_label(&st),
		       a || b != UINT64_MAX ? "those steps" : "the trace");
		rc = 0;
		goto done;
	}
	row = malloc((nn ? nn : 1) * sizeof(*row));
	rownode = malloc((nn ? nn : 1) * sizeof(*rownode));
	if (!row || !rownode)
		goto oom;
	for (i = 0; i < nn; i++)
		row[i] = -1;
	for (k = 0; k < sr.n; k++)
		row[sr.v[k].node] = 0;
	for (i = 0; i < nn; i++) {
		if (row[i] < 0)
			continue;
		if (nrows >= 400) {
			row[i] = -1;
			continue;
		}
		row[i] = (int32_t)nrows;
		rownode[nrows++] = i;
		if ((int)strlen(tm_node_name(s, i)) > labw)
			labw = (int)strlen(tm_node_name(s, i));
	}
	if (labw > 40)
		labw = 40;
	nsteps = sr.last - sr.first + 1;
	w = nsteps < (uint64_t)o->width ? (int)nsteps : o->width;
	kind = calloc((size_t)w * nrows, 1);
	val = calloc((size_t)w * nrows, sizeof(*val));
	if (!kind || !val || rgrid_init(&g, w, (int)nrows))
		goto oom;
	for (k = 0; k < sr.n; k++) {
		const struct samp *sp = &sr.v[k];

		if (row[sp->node] < 0)
			continue;
		x = (int)((sp->step - sr.first) * (uint64_t)w / nsteps);
		y = row[sp->node];
		cell_merge(&kind[y * w + x], &val[y * w + x], sp->kind, sp->v);
	}
	for (k = 0; k < sr.ngap; k++) {
		x = (int)((sr.gap[k] - sr.first) * (uint64_t)w / nsteps);
		for (y = 0; y < (int)nrows; y++)
			if (kind[y * w + x] == CELL_EMPTY)
				kind[y * w + x] = CELL_GAP;
	}
	for (k = 0; k < (size_t)w * nrows; k++)
		if (kind[k] == CELL_VAL) {
			if (o->log)
				val[k] = render_log(val[k]);
			if (val[k] < lo)
				lo = val[k];
			if (val[k] > hi)
				hi = val[k];
		}
	g.lo = lo <= hi ? lo : 0;
	g.hi = lo <= hi ? hi : 0;
	g.log = o->log;
	for (y = 0; y < (int)nrows; y++)
		for (x = 0; x < w; x++) {
			if (kind[y * w + x] == CELL_VAL)
				rgrid_set(&g, x, y, val[y * w + x]);
			else
				rgrid_set_kind(&g, x, y, kind[y * w + x]);
		}
	if (s->have_cur && s->cur.step >= sr.first && s->cur.step <= sr.last)
		pcol = (int)((s->cur.step - sr.first) * (uint64_t)w / nsteps);

	rb_printf(&out, "%s over steps %" PRIu64 "..%" PRIu64 ": %u node%s, "
		  "%" PRIu64 " step%s a column%s\n", st.text, sr.first, sr.last,
		  nrows, nrows == 1 ? "" : "s",
		  (nsteps + (uint64_t)w - 1) / (uint64_t)w,
		  (nsteps + (uint64_t)w - 1) / (uint64_t)w == 1 ? "" : "s",
		  nsteps > (uint64_t)w ? " (worst of each)" : "");
	range_note(&out, a, b, &sr);
	for (y = 0; y < (int)nrows; y++) {
		const char *name = tm_node_name(s, rownode[y]);
		size_t l = strlen(name);

		if ((int)l > labw)
			rb_printf(&out, "..%s |", name + l - (size_t)(labw - 2));
		else
			rb_printf(&out, "%-*s |", labw, name);
		for (x = 0; x < w; x++)
			render_cell(&out, &g, x, y, o->mode);
		rb_puts(&out, "|\n");
	}
	rb_printf(&out, "%-*s  %-*" PRIu64 "%" PRIu64 "\n", labw, "step",
		  axis_gap(w, sr.first), sr.first, sr.last);
	if (pcol >= 0)
		rb_printf(&out, "%*s^ playhead (step %" PRIu64 ")\n", labw + 2 + pcol,
			  "", s->cur.step);
	render_legend(&out, &g, o->mode);
	if (sr.interrupted)
		rb_puts(&out, "Interrupted: the picture covers the steps read so far.\n");
	flush_rb(s, &out);
	rc = write_png(s, o, &g);
	goto done;
oom:
	tm_error(s, "Out of memory.");
done:
	flush_rb(s, &out);
	rgrid_free(&g);
	free(row);
	free(rownode);
	free(kind);
	free(val);
	series_free(&sr);
	tm_address_free(st.a);
	return rc;
}

/* ------------------------------------------------------------- plot */

/* One character of the chart, coloured in the colour modes. */
static void chart_char(struct rbuf *b, int mode, char c, int pal)
{
	if (mode == RENDER_PLAIN || c == ' ') {
		rb_putn(b, &c, 1);
		return;
	}
	render_sgr(b, mode, render_special(pal), 1);
	rb_putn(b, &c, 1);
	rb_puts(b, SGR_RESET);
}

/*
 * plot [OPTIONS] NODE:SLOT.STAT [steps A..B]
 * A pattern plots the worst (largest) value of its nodes at each step.
 */
static int cmd_plot_exec(struct tm_session *s, const char *args, int from_tty)
{
	struct vopts o;
	struct sterm st;
	struct series sr;
	const char *p, *steps;
	char term[TM_ADDRESS_MAX + 64], lab[32];
	uint8_t *kind = NULL;
	double *val = NULL, lo = INFINITY, hi = -INFINITY;
	char *chart = NULL;
	uint8_t *pal = NULL;
	uint64_t a = 0, b = UINT64_MAX, nsteps;
	int w, h, x, y, rc = -1, prow = -1, pcol = -1;
	size_t k, l;
	struct rbuf out;

	(void)from_tty;
	p = parse_opts(s, args, &o, 64, 10);
	if (!p)
		return -1;
	steps = strstr(p, " steps");
	l = steps ? (size_t)(steps - p) : strlen(p);
	if (l >= sizeof(term)) {
		tm_error(s, "Expression too long.");
		return -1;
	}
	memcpy(term, p, l);
	term[l] = 0;
	if (steps && parse_range(s, steps + 6, &a, &b))
		return -1;
	if (parse_sterm(s, tm_strip(term), 1, &st))
		return -1;
	if (scan_series(s, &st, a, b, &sr)) {
		tm_address_free(st.a);
		return -1;
	}
	rb_init(&out);
	if (!sr.n) {
		tm_out(s, "No values of %s in %s.\n", st.text,
		       a || b != UINT64_MAX ? "those steps" : "the trace");
		rc = 0;
		goto done;
	}
	nsteps = sr.last - sr.first + 1;
	w = nsteps < (uint64_t)o.width ? (int)nsteps : o.width;
	h = o.height < 3 ? 3 : o.height;
	kind = calloc((size_t)w, 1);
	val = calloc((size_t)w, sizeof(*val));
	chart = malloc((size_t)w * (size_t)h);
	pal = malloc((size_t)w * (size_t)h);
	if (!kind || !val || !chart || !pal) {
		tm_error(s, "Out of memory.");
		goto done;
	}
	memset(chart, ' ', (size_t)w * (size_t)h);
	memset(pal, 0, (size_t)w * (size_t)h);
	for (k = 0; k < sr.n; k++) {
		x = (int)((sr.v[k].step - sr.first) * (uint64_t)w / nsteps);
		cell_merge(&kind[x], &val[x], sr.v[k].kind, sr.v[k].v);
	}
	for (k = 0; k < sr.ngap; k++) {
		x = (int)((sr.gap[k] - sr.first) * (uint64_t)w / nsteps);
		if (kind[x] == CELL_EMPTY)
			kind[x] = CELL_GAP;
	}
	for (x = 0; x < w; x++)
		if (kind[x] == CELL_VAL) {
			if (val[x] < lo)
				lo = val[x];
			if (val[x] > hi)
				hi = val[x];
		}
	for (x = 0; x < w; x++) {
		int r;

		switch (kind[x]) {
		case CELL_VAL:
			r = hi > lo ? (int)((val[x] - lo) / (hi - lo) * (h - 1) + 0.5) :
				      h / 2;
			r = h - 1 - r;
			/* join the previous point, never across a gap */
			if (prow >= 0 && pcol == x - 1) {
				for (y = (prow < r ? prow : r) + 1;
				     y < (prow < r ? r : prow); y++) {
					chart[y * w + x] = '|';
					pal[y * w + x] = 150;   /* a level of the map */
				}
			}
			chart[r * w + x] = '*';
			pal[r * w + x] = 200;
			prow = r;
			pcol = x;
			break;
		case CELL_NAN:
			chart[x] = CH_NAN;
			pal[x] = PAL_NAN;
			break;
		case CELL_POSINF:
			chart[x] = CH_POSINF;
			pal[x] = PAL_POSINF;
			break;
		case CELL_NEGINF:
			chart[(h - 1) * w + x] = CH_NEGINF;
			pal[(h - 1) * w + x] = PAL_NEGINF;
			break;
		case CELL_GAP:
			for (y = 0; y < h; y++) {
				chart[y * w + x] = CH_GAP;
				pal[y * w + x] = (x + y) % 2 ? PAL_GAP_DARK :
							       PAL_GAP_LIGHT;
			}
			break;
		default:
			break;
		}
	}
	rb_printf(&out, "%s over steps %" PRIu64 "..%" PRIu64 "%s\n", st.text,
		  sr.first, sr.last, nsteps > (uint64_t)w ?
		  " (worst of the steps in each column)" : "");
	range_note(&out, a, b, &sr);
	for (y = 0; y < h; y++) {
		lab[0] = 0;
		if (y == 0 && lo < hi)
			render_num(lab, sizeof(lab), hi);
		else if (y == h - 1 && lo < hi)
			render_num(lab, sizeof(lab), lo);
		else if (y == h / 2 && lo == hi)
			render_num(lab, sizeof(lab), lo);
		else if (y == h / 2 && lo < hi)
			render_num(lab, sizeof(lab), hi - (hi - lo) * y / (h - 1));
		rb_printf(&out, "%10s |", lab);
		for (x = 0; x < w; x++)
			chart_char(&out, o.mode, chart[y * w + x], pal[y * w + x]);
		rb_puts(&out, "\n");
	}
	rb_printf(&out, "%10s +", "");
	for (x = 0; x < w; x++)
		rb_puts(&out, "-");
	rb_printf(&out, "\n%10s  %-*" PRIu64 "%" PRIu64 "\n", "step",
		  axis_gap(w, sr.first), sr.first, sr.last);
	if (s->have_cur && s->cur.step >= sr.first && s->cur.step <= sr.last)
		rb_printf(&out, "%*s^ playhead (step %" PRIu64 ")\n",
			  12 + (int)((s->cur.step - sr.first) * (uint64_t)w / nsteps),
			  "", s->cur.step);
	if (sr.ngap || memchr(kind, CELL_NAN, (size_t)w))
		rb_printf(&out, "%10s  %c NaN  %c +Inf  %c -Inf  %c gap (no line "
			  "drawn across it)\n", "", CH_NAN, CH_POSINF, CH_NEGINF, CH_GAP);
	if (sr.interrupted)
		rb_puts(&out, "Interrupted: the chart covers the steps read so far.\n");
	rc = 0;
done:
	flush_rb(s, &out);
	free(kind);
	free(val);
	free(chart);
	free(pal);
	series_free(&sr);
	tm_address_free(st.a);
	return rc;
}

const struct cmd_entry cmd_plot_entry = {
	.name = "plot",
	.usage = "plot [-nocolor|-color|-color256] [-width N] [-height N] "
		 "NODE:SLOT.STAT [steps A..B]",
	.help = "Chart one stat of a node over steps, in the terminal.\n"
		"E.g. \"plot model.head:out.abs_max steps 0..500\".  The line breaks\n"
		"at gaps (hatched); NaN and Inf are marked on the top and bottom rows.\n"
		"STAT is any tensor stat or \"time\" (the call's duration).",
	.exec = cmd_plot_exec, .flags = CMD_NEEDS_TRACE, .klass = "data",
};

/* ------------------------------------------------------------- info stats */

static void sparkline(struct rbuf *b, const struct tm_tensor *t, int mode)
{
	static const char *const bars[] = {
		" ", "\xe2\x96\x81", "\xe2\x96\x82", "\xe2\x96\x83", "\xe2\x96\x84",
		"\xe2\x96\x85", "\xe2\x96\x86", "\xe2\x96\x87", "\xe2\x96\x88"
	};
	static const char ramp[] = " " RAMP_CHARS;
	uint32_t max = 0;
	int i, lv;

	for (i = 0; i < TM_HIST_BINS; i++)
		if (t->hist[i] > max)
			max = t->hist[i];
	for (i = 0; i < TM_HIST_BINS; i++) {
		if (mode == RENDER_PLAIN) {
			lv = max ? (int)((uint64_t)t->hist[i] * 9 / max) : 0;
			if (t->hist[i] && !lv)
				lv = 1;
			rb_putn(b, &ramp[lv], 1);
		} else {
			lv = max ? (int)((uint64_t)t->hist[i] * 8 / max) : 0;
			if (t->hist[i] && !lv)
				lv = 1;
			rb_puts(b, bars[lv]);
		}
	}
}

int tm_view_info_stats(struct tm_session *s, const char *args)
{
	const struct tm_tensor *t;
	const struct tm_event *ev;
	struct vopts o;
	struct tref r;
	struct rbuf b;
	char shape[160], num[48], lo[32], hi[32];
	const char *p;
	int i;

	p = parse_opts(s, args, &o, 64, 32);
	if (!p || parse_tref(s, *p ? p : "tensor", &r))
		return -1;
	t = get_tensor(s, &r, &ev);
	if (!t)
		return -1;
	rb_init(&b);
	format_shape(t, shape, sizeof(shape));
	rb_printf(&b, "%s at ", r.focus ? "tensor" : r.name);
	where_line(s, &b, ev);
	if (ev)
		rb_printf(&b, " (%s of %s, recorded at level %u)",
			  tm_event_kind_name(ev->kind), tm_node_name(s, ev->node),
			  ev->level);
	rb_printf(&b, "\n  %-13s %s\n  %-13s %s\n  %-13s %s:%u\n", "dtype",
		  tm_dtype_name(t->dtype), "shape", shape, "device",
		  t->device_type == 0 ? "cpu" : t->device_type == 1 ? "cuda" : "other",
		  t->device_index);
	rb_printf(&b, "  %-13s %-14s %s\n", "Stat", "Value", "Level");
	for (i = 0; i < TM_STAT__COUNT; i++) {
		const struct tm_stat_info *si = &tm_stat_table[i];
		const char *note = "";

		if (!(t->have & TM_STAT_BIT(i))) {
			/* The reason print gives: no finite element, or the level. */
			uint32_t why = tm_tql_absent_reason(ev, (int)i);

			snprintf(num, sizeof(num), "-");
			note = why & TM_TQL_NO_FINITE ? " (no finite elements)" :
							" (not captured)";
		} else if (si->integer) {
			snprintf(num, sizeof(num), "%.0f", t->stat[i]);
		} else {
			snprintf(num, sizeof(num), "%.6g", t->stat[i]);
		}
		rb_printf(&b, "  %-13s %-14s %u%s\n", si->name, num, si->level,
			  note);
	}
	if (t->have_hist) {
		render_num(lo, sizeof(lo), t->hist_lo);
		render_num(hi, sizeof(hi), t->hist_hi);
		rb_printf(&b, "  %-13s [", "histogram");
		sparkline(&b, t, o.mode);
		rb_printf(&b, "] %d bins over %s..%s  2\n", TM_HIST_BINS, lo, hi);
	} else {
		/* Left out with std when there is no finite element. */
		rb_printf(&b, "  %-13s %-14s 2 %s\n", "histogram", "-",
			  !(t->have & TM_STAT_BIT(TM_STAT_STD)) &&
			  (tm_tql_absent_reason(ev, TM_STAT_STD) & TM_TQL_NO_FINITE) ?
			  "(no finite elements)" : "(not captured)");
	}
	if (t->payload)
		rb_printf(&b, "  %-13s %-14s 3\n", "contents", "captured");
	else
		rb_printf(&b, "  %-13s %-14s 3 (not captured)\n", "contents", "-");
	flush_rb(s, &b);
	return 0;
}

/* ------------------------------------------------------------- x */

/*
 * x [/NF] ADDR:SLOT[index]
 * Examines N elements from index on (row-major, across rows), printed as F:
 * f (default, %g), e (%e), d (integer), x (the element's raw bits in hex).
 */
static int cmd_x_exec(struct tm_session *s, const char *args, int from_tty)
{
	const struct tm_tensor *t;
	const struct tm_event *ev;
	uint64_t count = 1, numel, start = 0, i, stride[TM_MAX_RANK];
	const char *p = tm_skip_ws(args);
	char fmt = 'f';
	struct tref r;
	struct rbuf b;
	int d, per_line;

	(void)from_tty;
	if (*p == '/') {
		char *end;

		p++;
		if (isdigit((unsigned char)*p)) {
			count = strtoull(p, &end, 10);
			p = end;
		}
		if (*p && *p != ' ' && *p != '\t')
			fmt = *p++;
		if (fmt == 'i' && (!*p || *p == ' ' || *p == '\t'))
			return tm_op_examine(s, count, p);      /* cmd-ops.c */
		if (!strchr("fedx", fmt) || (*p && *p != ' ' && *p != '\t')) {
			tm_error(s, "Invalid format: use x/NF with F one of f, e, d, x.");
			return -1;
		}
		if (!count || count > 100000) {
			tm_error(s, "Bad count %" PRIu64 " (1..100000).", count);
			return -1;
		}
	}
	if (parse_tref(s, p, &r))
		return -1;
	t = get_tensor(s, &r, &ev);
	if (!t || payload_ok(s, &r, t))
		return -1;
	numel = tensor_numel(t);
	if (r.nslice > t->rank) {
		tm_error(s, "%s has %d dimension%s, %d indices given.", r.name,
			 t->rank, t->rank == 1 ? "" : "s", r.nslice);
		return -1;
	}
	for (d = t->rank - 1; d >= 0; d--)
		stride[d] = d == t->rank - 1 ? 1 : stride[d + 1] * (uint64_t)t->shape[d + 1];
	for (d = 0; d < r.nslice; d++) {
		int64_t ix = r.lo[d] < 0 ? r.lo[d] + t->shape[d] : r.lo[d];

		if (!r.is_index[d] || ix < 0 || ix >= t->shape[d]) {
			tm_error(s, "Index out of range (or a slice) in dimension %d "
				 "of size %" PRId64 ".", d, t->shape[d]);
			return -1;
		}
		start += (uint64_t)ix * stride[d];
	}
	if (start >= numel) {
		tm_error(s, "No elements there.");
		return -1;
	}
	if (count > numel - start)
		count = numel - start;
	per_line = fmt == 'x' || fmt == 'd' ? 8 : 4;
	rb_init(&b);
	for (i = 0; i < count; i++) {
		uint64_t e = start + i;
		double v = elem(t, e);

		if (i % (uint64_t)per_line == 0) {
			uint64_t rem = e;

			if (i)
				rb_puts(&b, "\n");
			rb_printf(&b, "%s[", r.focus ? "tensor" : r.name);
			for (d = 0; d < t->rank; d++) {
				rb_printf(&b, "%s%" PRIu64, d ? "," : "", rem / stride[d]);
				rem %= stride[d];
			}
			rb_puts(&b, "]:");
		}
		if (fmt == 'x') {
			const uint8_t *q = (const uint8_t *)t->payload +
					   e * tm_dtype_size(t->dtype);
			size_t k, sz = tm_dtype_size(t->dtype);

			rb_puts(&b, "\t0x");
			for (k = sz; k > 0; k--)
				rb_printf(&b, "%02x", q[k - 1]);
		} else if (isnan(v) || isinf(v)) {
			rb_printf(&b, "\t%s", isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
		} else if (fmt == 'd') {
			rb_printf(&b, "\t%.0f", trunc(v));
		} else if (fmt == 'e') {
			rb_printf(&b, "\t%e", v);
		} else {
			rb_printf(&b, "\t%g", v);
		}
	}
	rb_puts(&b, "\n");
	flush_rb(s, &b);
	return 0;
}

const struct cmd_entry cmd_x_entry = {
	.name = "x",
	.usage = "x/NF ADDR:SLOT[index]",
	.help = "Examine elements of a captured tensor.\n"
		"N elements from index on, row-major, in format F: f (default), e,\n"
		"d or x (raw bits).  E.g. \"x/8f model.layers.2:out[0,3,0]\".\n"
		"x/Ni lists N ops of the module call at the playhead around it (\"=>\"\n"
		"marks the current one) with their source lines.",
	.exec = cmd_x_exec, .flags = CMD_NEEDS_TRACE | CMD_FORMAT, .klass = "data",
};

/* ------------------------------------------------------------- info graph */

enum { NS_NONE = 0, NS_HAVE, NS_PENDING, NS_GAP };
enum { SUB_BAD = 1, SUB_GAP = 2, SUB_CUR = 4 };

struct gnode {
	uint8_t state;
	uint8_t bad;            /* its tensor holds NaN or Inf */
	uint8_t sub;            /* SUB_* of itself and everything below */
	uint8_t shown;
	struct tm_tensor t;     /* stats only (payload dropped) */
	uint8_t level;          /* level of the event t came from */
	uint64_t dur;
	uint32_t kid, sib;      /* first child, next sibling (shown ones) */
	uint64_t sig;           /* structure of the subtree, for folding */
};

struct gline {
	char mark[3];
	int cls;                /* 0 plain, 1 NaN/Inf, 2 gap, 3 pending */
	int cur;
	char tree[192];
	char type[48];
	char over[160];
};

struct graph {
	struct tm_session *s;
	struct gnode *n;
	uint32_t nn;
	int stat;               /* -1 time, -3 default (abs_max + counts) */
	struct tm_slot slot;
	int evkind;
	int depth, fold, mode;
	uint32_t cur;           /* the shown node the playhead is in */
	struct gline *ln;
	size_t nln, capln;
	int step_gap;
};

static const char *rel_name(const struct tm_session *s, uint32_t id)
{
	const struct tm_node *n = tm_nodetab_get(s->nodes, id);
	const struct tm_node *p = n && n->parent != TM_NODE_NONE ?
				  tm_nodetab_get(s->nodes, n->parent) : NULL;
	size_t l;

	if (!n)
		return "?";
	if (!p)
		return n->address;
	l = strlen(p->address);
	if (!strncmp(n->address, p->address, l) && n->address[l] == '.')
		return n->address + l + 1;
	return n->address;
}

static uint64_t fnv(uint64_t h, const char *str)
{
	while (str && *str) {
		h ^= (unsigned char)*str++;
		h *= 0x100000001b3ull;
	}
	return h * 0x100000001b3ull;
}

/* Bottom-up: ids are given out parent-first, so children have larger ids. */
static void graph_signatures(struct graph *g)
{
	uint32_t i = g->nn, k;

	while (i-- > 0) {
		const struct tm_node *n = tm_nodetab_get(g->s->nodes, i);
		uint64_t h = fnv(0xcbf29ce484222325ull, n ? n->type : "");

		for (k = g->n[i].kid; k != TM_NODE_NONE; k = g->n[k].sib) {
			h = fnv(h, rel_name(g->s, k));
			h = (h ^ g->n[k].sig) * 0x100000001b3ull;
		}
		g->n[i].sig = h;
	}
}

/*
 * Reads the playhead's step once: for every node, its latest event of the
 * viewed kind at or before the playhead; nodes that come later in the step
 * are pending, and nodes absent from a step with a gap are lost to it.
 */
static int graph_scan(struct graph *g)
{
	struct tm_session *s = g->s;
	struct tm_record rec;
	uint64_t step = s->cur.step, at = s->cur.seq;
	int err;
	uint32_t i;

	err = s->probe->ops->seek(s->probe, TM_SEEK_STEP, step);
	while (err == TM_OK) {
		const struct tm_event *ev = &rec.u.event;

		err = s->probe->ops->next_event(s->probe, TM_DIR_FWD, &rec);
		if (err != TM_OK)
			break;
		if (rec.type == TM_REC_GAP) {
			if (rec.u.gap.step > step)
				break;
			if (rec.u.gap.step == step && rec.u.gap.first_seq <= at)
				g->step_gap = 1;
			continue;
		}
		if (rec.type != TM_REC_EVENT || ev->step < step)
			continue;
		if (ev->step > step)
			break;
		if (ev->kind != g->evkind || ev->node >= g->nn)
			continue;
		if (ev->seq > at) {
			if (g->n[ev->node].state != NS_HAVE)
				g->n[ev->node].state = NS_PENDING;
			continue;
		}
		for (i = 0; i < ev->ntensors; i++) {
			const struct tm_tensor *t = &ev->tensors[i];

			if (t->slot.kind != g->slot.kind || t->slot.index != g->slot.index)
				continue;
			g->n[ev->node].t = *t;
			g->n[ev->node].t.payload = NULL;
			g->n[ev->node].t.payload_len = 0;
			g->n[ev->node].level = ev->level;
			g->n[ev->node].state = NS_HAVE;
			g->n[ev->node].dur = ev->end_ns - ev->start_ns;
			break;
		}
	}
	tm_cursor_restore(s);
	if (err != TM_OK && err != TM_ERR_END) {
		tm_error(s, "Cannot read the trace: %s.", s->probe->ops->detail(s->probe));
		return -1;
	}
	/*
	 * Absent from a step with a gap: lost to it, unless its children ran
	 * (a container such as ModuleList that records nothing itself).
	 * Children have larger ids, so going backwards sees them first.
	 */
	for (i = g->nn; i-- > 0; ) {
		struct gnode *n = &g->n[i];
		uint32_t k;
		int kids_ran = 0;

		if (n->state != NS_NONE || !g->step_gap)
			continue;
		for (k = n->kid; k != TM_NODE_NONE; k = g->n[k].sib)
			kids_ran |= g->n[k].state == NS_HAVE || g->n[k].state == NS_PENDING;
		if (!kids_ran)
			n->state = NS_GAP;
	}
	for (i = 0; i < g->nn; i++) {
		struct gnode *n = &g->n[i];
		const struct tm_tensor *t = &n->t;

		if (n->state == NS_HAVE &&
		    (((t->have & TM_STAT_BIT(TM_STAT_NAN_COUNT)) &&
		      t->stat[TM_STAT_NAN_COUNT] > 0) ||
		     ((t->have & TM_STAT_BIT(TM_STAT_INF_COUNT)) &&
		      t->stat[TM_STAT_INF_COUNT] > 0)))
			n->bad = 1;
	}
	return 0;
}

/* A stat of node n, or why it is unknown (the reason print gives). */
static void fmt_stat(char *buf, size_t len, const struct gnode *n, int st)
{
	const struct tm_tensor *t = &n->t;

	if (!(t->have & TM_STAT_BIT(st))) {
		struct tm_event ev;
		char why[32];

		memset(&ev, 0, sizeof(ev));
		ev.level = n->level;
		if (tm_tql_reason_format(tm_tql_absent_reason(&ev, st), why,
					 sizeof(why)) != TM_OK)
			snprintf(why, sizeof(why), "level");
		snprintf(buf, len, "<unknown: %s>", why);
	} else if (tm_stat_table[st].integer) {
		snprintf(buf, len, "%.0f", t->stat[st]);
	} else {
		render_num(buf, len, t->stat[st]);
	}
}

static void fmt_dur(char *buf, size_t len, uint64_t ns)
{
	if (ns >= 10000000)
		snprintf(buf, len, "%.3g ms", (double)ns / 1e6);
	else if (ns >= 10000)
		snprintf(buf, len, "%.3g us", (double)ns / 1e3);
	else
		snprintf(buf, len, "%" PRIu64 " ns", ns);
}

/* The overlay of one node: the field, or abs_max with the NaN/Inf counts. */
static void node_overlay(const struct graph *g, uint32_t id, char *buf, size_t len)
{
	const struct gnode *n = &g->n[id];
	char a[48], b[48], c[48];

	switch (n->state) {
	case NS_PENDING:
		snprintf(buf, len, "-");
		return;
	case NS_GAP:
		snprintf(buf, len, "<gap>");
		return;
	case NS_NONE:
		buf[0] = 0;
		return;
	default:
		break;
	}
	if (g->stat == -1) {
		fmt_dur(a, sizeof(a), n->dur);
		snprintf(buf, len, "time=%s", a);
	} else if (g->stat >= 0) {
		fmt_stat(a, sizeof(a), n, g->stat);
		snprintf(buf, len, "%s=%s", tm_stat_table[g->stat].name, a);
	} else {
		fmt_stat(a, sizeof(a), n, TM_STAT_ABS_MAX);
		fmt_stat(b, sizeof(b), n, TM_STAT_NAN_COUNT);
		fmt_stat(c, sizeof(c), n, TM_STAT_INF_COUNT);
		snprintf(buf, len, "abs_max=%s nan=%s inf=%s", a, b, c);
	}
}

static struct gline *new_line(struct graph *g)
{
	struct gline *l;

	if (g->nln == g->capln) {
		size_t cap = g->capln ? 2 * g->capln : 64;
		struct gline *p = realloc(g->ln, cap * sizeof(*p));

		if (!p)
			return NULL;
		g->ln = p;
		g->capln = cap;
	}
	l = &g->ln[g->nln++];
	memset(l, 0, sizeof(*l));
	memcpy(l->mark, "  ", 3);
	return l;
}

static void set_marks(struct gline *l, int cur, int sub_flags)
{
	l->mark[0] = cur ? '>' : ' ';
	l->mark[1] = sub_flags & SUB_BAD ? '!' : sub_flags & SUB_GAP ? '?' : ' ';
	l->cur = cur;
	l->cls = sub_flags & SUB_BAD ? 1 : sub_flags & SUB_GAP ? 2 : 0;
}

/* A number at the end of an address segment: "layers.7" gives 7. */
static long seg_index(const char *rel)
{
	char *end;
	long v;

	if (!isdigit((unsigned char)*rel))
		return -1;
	v = strtol(rel, &end, 10);
	return *end ? -1 : v;
}

/* Joins up to four strings into dst, cut to fit (tree lines, prefixes). */
static void join4(char *dst, size_t len, const char *a, const char *b,
		  const char *c, const char *d)
{
	const char *parts[4] = { a, b, c, d };
	size_t off = 0, l;
	int i;

	for (i = 0; i < 4; i++) {
		if (!parts[i])
			continue;
		l = strlen(parts[i]);
		if (off + l >= len)
			l = len - 1 - off;
		memcpy(dst + off, parts[i], l);
		off += l;
	}
	dst[off] = 0;
}

static void graph_node(struct graph *g, uint32_t id, int depth,
		       const char *prefix, const char *conn, const char *cont);

/* A run of identical quiet blocks as one line with the range of its values. */
static void graph_fold(struct graph *g, uint32_t first, uint32_t last,
		       uint32_t count, const char *prefix, const char *conn)
{
	struct gline *l = new_line(g);
	const struct tm_node *n = tm_nodetab_get(g->s->nodes, first);
	double lo = INFINITY, hi = -INFINITY;
	uint32_t k, have = 0, pending = 0;
	int st = g->stat == -3 ? TM_STAT_ABS_MAX : g->stat;
	const struct gnode *seen = NULL;
	char a[48], b[48];

	if (!l)
		return;
	set_marks(l, 0, 0);
	{
		char range[96];

		snprintf(range, sizeof(range), "%.40s..%.40s", rel_name(g->s, first),
			 rel_name(g->s, last));
		join4(l->tree, sizeof(l->tree), prefix, conn, range, NULL);
	}
	snprintf(l->type, sizeof(l->type), "%s x%u", n && n->type ? n->type : "-",
		 count);
	for (k = first; ; k = g->n[k].sib) {
		const struct gnode *gn = &g->n[k];
		double v = NAN;

		if (gn->state == NS_HAVE) {
			if (st == -1)
				v = (double)gn->dur;
			else if (gn->t.have & TM_STAT_BIT(st))
				v = gn->t.stat[st];
			have++;
			seen = gn;
		} else if (gn->state == NS_PENDING) {
			pending++;
		}
		if (!isnan(v)) {
			if (v < lo)
				lo = v;
			if (v > hi)
				hi = v;
		}
		if (k == last)
			break;
	}
	if (lo <= hi) {
		render_num(a, sizeof(a), lo);
		render_num(b, sizeof(b), hi);
		snprintf(l->over, sizeof(l->over), "%s=%s..%s%s (identical blocks)",
			 st == -1 ? "time_ns" : tm_stat_table[st].name, a, b,
			 g->stat == -3 ? " nan=0 inf=0" : "");
	} else {
		a[0] = 0;
		if (!pending && seen && st >= 0)
			fmt_stat(a, sizeof(a), seen, st);
		snprintf(l->over, sizeof(l->over), "%s (identical blocks)",
			 pending ? "-" : a);
	}
	if (pending && !have)
		l->cls = 3;
}

static void graph_kids(struct graph *g, uint32_t id, int depth, const char *prefix)
{
	const char *conn_mid = g->mode == RENDER_PLAIN ? "|- " : "\xe2\x94\x9c\xe2\x94\x80 ";
	const char *conn_end = g->mode == RENDER_PLAIN ? "`- " : "\xe2\x94\x94\xe2\x94\x80 ";
	const char *cont_mid = g->mode == RENDER_PLAIN ? "|  " : "\xe2\x94\x82  ";
	uint32_t k = g->n[id].kid, j, last, count;

	while (k != TM_NODE_NONE) {
		const struct tm_node *nk = tm_nodetab_get(g->s->nodes, k);
		long ix = seg_index(rel_name(g->s, k));

		/* extend a run of quiet, identically built, consecutive blocks */
		last = k;
		count = 1;
		if (g->fold && ix >= 0 && !g->n[k].sub) {
			for (j = g->n[k].sib; j != TM_NODE_NONE; j = g->n[j].sib) {
				const struct tm_node *nj = tm_nodetab_get(g->s->nodes, j);

				if (g->n[j].sub || g->n[j].sig != g->n[k].sig ||
				    seg_index(rel_name(g->s, j)) != ix + (long)count ||
				    !nj || !nk || !nj->type || !nk->type ||
				    strcmp(nj->type, nk->type))
					break;
				last = j;
				count++;
			}
		}
		if (count >= 2) {
			graph_fold(g, k, last, count, prefix,
				   g->n[last].sib == TM_NODE_NONE ? conn_end : conn_mid);
			k = g->n[last].sib;
			continue;
		}
		graph_node(g, k, depth + 1, prefix,
			   g->n[k].sib == TM_NODE_NONE ? conn_end : conn_mid,
			   g->n[k].sib == TM_NODE_NONE ? "   " : cont_mid);
		k = g->n[k].sib;
	}
}

static void graph_node(struct graph *g, uint32_t id, int depth,
		       const char *prefix, const char *conn, const char *cont)
{
	const struct tm_node *n = tm_nodetab_get(g->s->nodes, id);
	struct gline *l = new_line(g);
	char sub_prefix[192];
	int hidden = g->depth >= 0 && depth >= g->depth && g->n[id].kid != TM_NODE_NONE;
	int flags;

	if (!l)
		return;
	/* at the depth limit, what lies below still shows in the marks */
	flags = hidden ? g->n[id].sub : (g->n[id].bad ? SUB_BAD : 0) |
		(g->n[id].state == NS_GAP ? SUB_GAP : 0);
	set_marks(l, g->cur == id || (hidden && (g->n[id].sub & SUB_CUR)), flags);
	join4(l->tree, sizeof(l->tree), prefix, conn,
	      depth ? rel_name(g->s, id) : n->address, hidden ? " {...}" : "");
	snprintf(l->type, sizeof(l->type), "%s", n->type ? n->type : "-");
	node_overlay(g, id, l->over, sizeof(l->over));
	if (g->n[id].state == NS_PENDING)
		l->cls = 3;
	if (hidden)
		return;
	join4(sub_prefix, sizeof(sub_prefix), prefix, cont, NULL, NULL);
	graph_kids(g, id, depth, sub_prefix);
}

/* field := [SLOT.]STAT | [SLOT.]time */
static int graph_field(struct tm_session *s, struct graph *g, const char *f)
{
	const char *dot = strrchr(f, '.');
	char names[512];

	if (dot) {
		char slot[32];

		if ((size_t)(dot - f) >= sizeof(slot)) {
			tm_error(s, "Bad field \"%s\".", f);
			return -1;
		}
		memcpy(slot, f, (size_t)(dot - f));
		slot[dot - f] = 0;
		if (tm_slot_parse(slot, &g->slot) != TM_OK) {
			/* "out.1.abs_max": the slot index is part of the slot */
			tm_error(s, "Bad slot \"%s\" in field \"%s\".", slot, f);
			return -1;
		}
		f = dot + 1;
	}
	g->stat = stat_from(f);
	if (g->stat == -1 && strcmp(f, "time")) {
		stat_names(names, sizeof(names));
		tm_error(s, "Unknown field \"%s\".  Fields: %s.", f, names);
		return -1;
	}
	return 0;
}

static int graph_emit(struct graph *g)
{
	struct tm_session *s = g->s;
	struct rbuf b;
	size_t i, tw = 0, yw = 0;
	char slot[32];

	rb_init(&b);
	tm_slot_format(g->slot, slot, sizeof(slot));
	rb_printf(&b, "Architecture at step %" PRIu64 ", %s, seq %" PRIu64
		  " (%s of %s); overlay: %s ", s->cur.step,
		  tm_phase_name(s->cur.phase), s->cur.seq,
		  tm_event_kind_name(s->cur.kind), tm_node_name(s, s->cur.node), slot);
	if (g->stat == -3)
		rb_puts(&b, "abs_max, nan/inf counts\n");
	else
		rb_printf(&b, "%s\n", g->stat == -1 ? "time" : tm_stat_table[g->stat].name);
	for (i = 0; i < g->nln; i++) {
		size_t l = 0;
		const char *p;

		for (p = g->ln[i].tree; *p; p++)
			l += ((unsigned char)*p & 0xc0) != 0x80;
		if (l > tw)
			tw = l;
		if (strlen(g->ln[i].type) > yw)
			yw = strlen(g->ln[i].type);
	}
	for (i = 0; i < g->nln; i++) {
		const struct gline *l = &g->ln[i];
		size_t from;

		if (g->mode != RENDER_PLAIN && l->cur)
			rb_puts(&b, "\033[1m");
		rb_puts(&b, l->mark);
		from = b.len;
		rb_puts(&b, l->tree);
		rb_pad(&b, from, tw + 2);
		rb_printf(&b, "%-*s  ", (int)yw, l->type);
		if (g->mode != RENDER_PLAIN && l->cls) {
			render_sgr(&b, g->mode, render_special(l->cls == 1 ? PAL_NAN :
				   l->cls == 2 ? PAL_GAP_LIGHT : PAL_GAP_DARK), 1);
			rb_printf(&b, "%s" SGR_RESET, l->over);
		} else {
			rb_puts(&b, l->over);
			if (g->mode != RENDER_PLAIN && l->cur)
				rb_puts(&b, SGR_RESET);
		}
		/* no trailing blanks when there is no overlay */
		while (b.len && b.p[b.len - 1] == ' ')
			b.p[--b.len] = 0;
		rb_puts(&b, "\n");
	}
	rb_puts(&b, "(> playhead, ! NaN/Inf, ? lost to a gap, - not yet run in "
		"this step)\n");
	flush_rb(s, &b);
	return 0;
}

/*
 * info graph [OPTIONS] [PATTERN] [depth N] [field [SLOT.]STAT|time] [fold off]
 */
int tm_view_info_graph(struct tm_session *s, const char *args)
{
	struct graph g;
	struct vopts o;
	tm_address *pat = NULL;
	const char *p;
	uint32_t i;
	int rc = -1, col = 0;
	const char *msg = NULL;
	char patbuf[TM_ADDRESS_MAX];

	memset(&g, 0, sizeof(g));
	g.s = s;
	g.stat = -3;
	g.depth = -1;
	g.fold = 1;
	patbuf[0] = 0;
	p = parse_opts(s, args, &o, 64, 32);
	if (!p)
		return -1;
	g.mode = o.mode;
	while (*(p = tm_skip_ws(p))) {
		size_t l = word_len(p);
		const char *v = tm_skip_ws(p + l);
		size_t vl = word_len(v);
		char val[128];

		if ((word_eq(p, l, "depth") || word_eq(p, l, "field") ||
		     word_eq(p, l, "fold")) && vl && vl < sizeof(val)) {
			memcpy(val, v, vl);
			val[vl] = 0;
			if (p[0] == 'd') {
				uint64_t d;

				if (tm_parse_uint(val, &d) || d > 1000) {
					tm_error(s, "Bad depth \"%s\".", val);
					return -1;
				}
				g.depth = (int)d;
			} else if (p[1] == 'i') {
				if (graph_field(s, &g, val))
					return -1;
			} else {
				if (tm_parse_bool(val, &g.fold)) {
					tm_error(s, "\"fold\" takes on or off.");
					return -1;
				}
			}
			p = v + vl;
			continue;
		}
		if (patbuf[0] || l >= sizeof(patbuf)) {
			tm_error(s, "Usage: info graph [PATTERN] [depth N] "
				 "[field [SLOT.]STAT|time] [fold on|off]");
			return -1;
		}
		memcpy(patbuf, p, l);
		patbuf[l] = 0;
		p += l;
	}
	if (!s->have_cur) {
		tm_error(s, "No current event.  Use \"run\", \"step\" or \"goto\" first.");
		return -1;
	}
	if (patbuf[0] && tm_address_parse(patbuf, &pat, &col, &msg) != TM_OK) {
		tm_error(s, "Malformed address \"%s\": %s at column %d.", patbuf,
			 msg ? msg : "syntax error", col + 1);
		return -1;
	}
	g.evkind = tm_slot_event_kind(g.slot.kind);
	g.nn = tm_nodetab_count(s->nodes);
	g.n = calloc(g.nn ? g.nn : 1, sizeof(*g.n));
	if (!g.n)
		goto out;
	/* which nodes are drawn: modules, and parameters when the field is theirs */
	for (i = 0; i < g.nn; i++) {
		const struct tm_node *n = tm_nodetab_get(s->nodes, i);

		g.n[i].kid = g.n[i].sib = TM_NODE_NONE;
		g.n[i].shown = n && (n->kind == TM_NODE_MODULE ||
				     g.evkind == TM_EV_PARAM);
	}
	/* children lists in id order (built backwards, so prepend) */
	for (i = g.nn; i-- > 0; ) {
		const struct tm_node *n = tm_nodetab_get(s->nodes, i);

		if (!g.n[i].shown || n->parent == TM_NODE_NONE || n->parent >= g.nn)
			continue;
		g.n[i].sib = g.n[n->parent].kid;
		g.n[n->parent].kid = i;
	}
	if (graph_scan(&g))
		goto out;
	g.cur = s->cur.node;
	while (g.cur < g.nn && !g.n[g.cur].shown)
		g.cur = tm_nodetab_get(s->nodes, g.cur)->parent;
	for (i = g.nn; i-- > 0; ) {
		const struct tm_node *n = tm_nodetab_get(s->nodes, i);

		g.n[i].sub |= (g.n[i].bad ? SUB_BAD : 0) |
			      (g.n[i].state == NS_GAP ? SUB_GAP : 0) |
			      (i == g.cur ? SUB_CUR : 0);
		if (n->parent != TM_NODE_NONE && n->parent < g.nn && g.n[i].shown)
			g.n[n->parent].sub |= g.n[i].sub;
	}
	graph_signatures(&g);
	for (i = 0; i < g.nn; i++) {
		const struct tm_node *n = tm_nodetab_get(s->nodes, i);
		const struct tm_node *par;

		if (!g.n[i].shown)
			continue;
		par = n->parent != TM_NODE_NONE ? tm_nodetab_get(s->nodes, n->parent) : NULL;
		if (pat ? !tm_address_match_path(pat, n->address) ||
			  (par && tm_address_match_path(pat, par->address)) :
			  par != NULL)
			continue;
		graph_node(&g, i, 0, "", "", "");
	}
	if (!g.nln) {
		tm_out(s, "No nodes match \"%s\".\n", patbuf);
		rc = 0;
		goto out;
	}
	rc = graph_emit(&g);
out:
	if (!g.n)
		tm_error(s, "Out of memory.");
	free(g.n);
	free(g.ln);
	tm_address_free(pat);
	return rc;
}

/* ------------------------------------------------------------- display kinds */

/* The views `display` accepts, as the user types them. */
static const char *view_kind(const char *expr, const char **args)
{
	static const char *const kinds[] = {
		"info graph", "info stats", "heatmap", "plot", "x", NULL
	};
	size_t i, l;

	expr = tm_skip_ws(expr);
	for (i = 0; kinds[i]; i++) {
		l = strlen(kinds[i]);
		if (!strncmp(expr, kinds[i], l) &&
		    (!expr[l] || expr[l] == ' ' || expr[l] == '\t' ||
		     (expr[l] == '/' && kinds[i][0] == 'x'))) {
			*args = tm_skip_ws(expr + l);
			return kinds[i];
		}
	}
	return NULL;
}

int tm_view_is_display(const char *expr)
{
	const char *args;

	return view_kind(expr, &args) != NULL;
}

int tm_view_display(struct tm_session *s, int num, const char *expr)
{
	const char *args, *k = view_kind(expr, &args);

	if (!k)
		return -1;
	tm_out(s, "%d: %s\n", num, tm_skip_ws(expr));
	if (!strcmp(k, "info graph"))
		return tm_view_info_graph(s, args);
	if (!strcmp(k, "info stats"))
		return tm_view_info_stats(s, args);
	if (!strcmp(k, "heatmap"))
		return cmd_heatmap_exec(s, args, 0);
	if (!strcmp(k, "plot"))
		return cmd_plot_exec(s, args, 0);
	return cmd_x_exec(s, args, 0);
}
