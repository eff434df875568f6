/*
 * cmd-heatmap.c -- `heatmap`: a captured tensor's elements as coloured
 * cells, or one stat of the nodes a pattern matches over steps.
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
					double e = view_elem(t, v->base + (uint64_t)rr * rs +
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

	if (view_parse_tref(s, args, &r))
		return -1;
	t = view_get_tensor(s, &r, &ev);
	if (!t || view_payload_ok(s, &r, t) || view_resolve_slices(s, &r, t, &v))
		return -1;
	if (fill_tensor_grid(t, &v, o->width, o->height, o->log, &g)) {
		tm_error(s, "Out of memory.");
		return -1;
	}
	rb_init(&b);
	view_format_shape(t, shape, sizeof(shape));
	rb_printf(&b, "%s %s %s at ", r.name, tm_dtype_name(t->dtype), shape);
	view_where_line(s, &b, ev);
	rb_printf(&b, "\nShowing %s%s: %" PRId64 " x %" PRId64 " elements in "
		  "%d x %d cells\n", v.desc,
		  v.auto_fixed ? " (leading dimensions fixed at 0)" : "",
		  v.nk == 2 ? v.count[0] : 1, v.nk ? v.count[v.nk - 1] : 1,
		  g.h, g.w);
	render_grid(&b, &g, o->mode, "  ");
	render_legend(&b, &g, o->mode);
	view_flush_rb(s, &b);
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
	p = view_parse_opts(s, args, &o, 64, 32);
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

	if (view_parse_range(s, range, &a, &b) || view_parse_sterm(s, expr, 0, &st))
		return -1;
	if (view_scan_series(s, &st, a, b, &sr)) {
		tm_address_free(st.a);
		return -1;
	}
	memset(&g, 0, sizeof(g));
	rb_init(&out);
	if (!sr.n) {
		tm_out(s, "No values of %s in %s.\n", view_stat_label(&st),
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
		view_cell_merge(&kind[y * w + x], &val[y * w + x], sp->kind, sp->v);
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
	view_range_note(&out, a, b, &sr);
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
		  view_axis_gap(w, sr.first), sr.first, sr.last);
	if (pcol >= 0)
		rb_printf(&out, "%*s^ playhead (step %" PRIu64 ")\n", labw + 2 + pcol,
			  "", s->cur.step);
	render_legend(&out, &g, o->mode);
	if (sr.interrupted)
		rb_puts(&out, "Interrupted: the picture covers the steps read so far.\n");
	view_flush_rb(s, &out);
	rc = write_png(s, o, &g);
	goto done;
oom:
	tm_error(s, "Out of memory.");
done:
	view_flush_rb(s, &out);
	rgrid_free(&g);
	free(row);
	free(rownode);
	free(kind);
	free(val);
	view_series_free(&sr);
	tm_address_free(st.a);
	return rc;
}
