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
					double e = tm_tensor_element(t, v->base + (uint64_t)rr * rs +
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
	rc = 0;
	if (pic_any(&o->pic)) {
		struct pic_heatmap hm;
		char title[2 * TM_ADDRESS_MAX + 400], sub[400];
		int64_t rows = v.nk == 2 ? v.count[0] : 1;
		int64_t cols = v.nk ? v.count[v.nk - 1] : 1;

		memset(&hm, 0, sizeof(hm));
		snprintf(title, sizeof(title), "%s%s%s%s  %s %s", r.name,
			 r.focus ? " (" : "", r.focus ? tm_node_name(s, ev->node) : "",
			 r.focus ? ")" : "", tm_dtype_name(t->dtype), shape);
		snprintf(sub, sizeof(sub), "step %" PRIu64 ", seq %" PRIu64
			 "; showing %s: %" PRId64 " x %" PRId64 " elements in %d x %d "
			 "cells (mean of each)", ev->step, ev->seq, v.desc, rows,
			 cols, g.h, g.w);
		hm.title = title;
		hm.subtitle = sub;
		hm.g = &g;
		hm.xlabel = "column (element index)";
		hm.ylabel = "row";
		hm.x0 = 0;
		hm.x1 = (double)cols;
		hm.y0 = 0;
		hm.y1 = (double)rows;
		hm.pcol = -1;
		hm.scale_label = "value";
		rc = view_write_heatmap(s, o, &hm);
	}
	rgrid_free(&g);
	return rc;
}

/*
 * A bare "heatmap": abs_max of the playhead node's family (its parent's
 * children) over the steps so far, or of every node's output before the
 * first step; the line above the picture says what was drawn.
 */
static int heatmap_default(struct tm_session *s, const struct vopts *o)
{
	char expr[TM_ADDRESS_MAX + 64];
	const char *name = s->have_cur ? tm_node_name(s, s->cur.node) : NULL;
	const char *dot = name ? strrchr(name, '.') : NULL;

	if (dot && (size_t)(dot - name) < TM_ADDRESS_MAX)
		snprintf(expr, sizeof(expr), "%.*s.*:out.abs_max", (int)(dot - name),
			 name);
	else
		snprintf(expr, sizeof(expr), "**:out.abs_max");
	tm_out(s, "heatmap %s over steps%s  (for a tensor: heatmap ADDR:SLOT; "
	       "\"help heatmap\")\n", expr, s->have_cur ? " (the playhead's family)" : "");
	return heatmap_over_steps(s, expr, "", o);
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
	if (!*tm_skip_ws(p))
		return heatmap_default(s, &o);
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
	.usage = "heatmap [-nocolor|-color|-color256] [-width N] [-height N] [-log] "
		 "[-png FILE] [-svg FILE] [-pdf FILE] [-scale N] "
		 "ADDR:SLOT[slices] | [PATTERN:SLOT.]STAT over steps [A..B]",
	.help = "Draw a captured tensor, or one stat of many nodes over steps.\n"
		"With ADDR:SLOT, the tensor at the playhead (level-3 contents) as a\n"
		"picture: a 2-D slice, e.g. model.layers.0:out[0] or [0, :16, :].\n"
		"With \"STAT over steps\", nodes as rows and steps as columns, e.g.\n"
		"\"heatmap model.**:out.abs_max over steps 0..100\".  NaN, +Inf and\n"
		"-Inf have colours of their own; gaps are hatched, never filled in.\n"
		"A long run is drawn in -width columns, each the worst of its steps.\n"
		"-png, -svg, -pdf FILE also draw it as a labelled picture (-scale N:\n"
		"pixels a cell).  With no argument: abs_max of the playhead's node\n"
		"and its siblings over the steps so far.",
	.exec = cmd_heatmap_exec, .flags = CMD_NEEDS_TRACE, .klass = "data",
};


static int heatmap_over_steps(struct tm_session *s, const char *expr,
			      const char *range, const struct vopts *o)
{
	struct sterm st;
	struct series sr;
	uint32_t nrows = 0, *rownode = NULL, i;
	const char **names = NULL;
	double lo = INFINITY, hi = -INFINITY;
	uint64_t a, b;
	int w, x, y, labw = 8, rc = -1, pcol = -1;
	struct rgrid g;
	struct rbuf out;

	if (view_parse_range(s, range, &a, &b) || view_parse_sterm(s, expr, 0, &st))
		return -1;
	if (view_scan_series(s, &st, a, b, o->width, &sr)) {
		tm_address_free(st.a);
		return -1;
	}
	memset(&g, 0, sizeof(g));
	rb_init(&out);
	if (!sr.nsamp) {
		tm_out(s, "No values of %s in %s.\n", view_stat_label(&st),
		       a || b != UINT64_MAX ? "those steps" :
		       sr.live ? "the steps that have arrived" : "the trace");
		rc = 0;
		goto done;
	}
	rownode = malloc((sr.nrows ? sr.nrows : 1) * sizeof(*rownode));
	names = malloc((sr.nrows ? sr.nrows : 1) * sizeof(*names));
	if (!rownode || !names)
		goto oom;
	for (i = 0; i < sr.nn && nrows < 400; i++) {
		if (!sr.kind[i])
			continue;
		rownode[nrows] = i;
		names[nrows++] = tm_node_name(s, i);
		if ((int)strlen(tm_node_name(s, i)) > labw)
			labw = (int)strlen(tm_node_name(s, i));
	}
	if (labw > 40)
		labw = 40;
	w = sr.ncol;
	if (rgrid_init(&g, w, (int)nrows))
		goto oom;
	for (y = 0; y < (int)nrows; y++)
		for (x = 0; x < w; x++) {
			uint8_t *k = &sr.kind[rownode[y]][x];

			if (*k == CELL_EMPTY && sr.gap[x])
				*k = CELL_GAP;
			if (*k != CELL_VAL)
				continue;
			if (o->log)
				sr.val[rownode[y]][x] = render_log(sr.val[rownode[y]][x]);
			lo = fmin(lo, sr.val[rownode[y]][x]);
			hi = fmax(hi, sr.val[rownode[y]][x]);
		}
	g.lo = lo <= hi ? lo : 0;
	g.hi = lo <= hi ? hi : 0;
	g.log = o->log;
	for (y = 0; y < (int)nrows; y++)
		for (x = 0; x < w; x++) {
			if (sr.kind[rownode[y]][x] == CELL_VAL)
				rgrid_set(&g, x, y, sr.val[rownode[y]][x]);
			else
				rgrid_set_kind(&g, x, y, sr.kind[rownode[y]][x]);
		}
	if (s->have_cur)
		pcol = view_series_col(&sr, s->cur.step);

	rb_printf(&out, "%s over steps %" PRIu64 "..%" PRIu64 ": %u node%s, ",
		  st.text, sr.first, sr.last, nrows, nrows == 1 ? "" : "s");
	view_series_what(&out, &sr);
	rb_puts(&out, "\n");
	if (sr.nrows > nrows)
		rb_printf(&out, "The first %u of %u nodes shown.\n", nrows, sr.nrows);
	if (sr.live)
		rb_printf(&out, "Live: the steps that have arrived so far (to step %"
			  PRIu64 "); the model was not resumed.\n", sr.last);
	view_range_note(&out, a, b, &sr);
	for (y = 0; y < (int)nrows; y++) {
		const char *name = names[y];
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
	rc = 0;
	if (pic_any(&o->pic)) {
		struct pic_heatmap hm;
		char title[TM_ADDRESS_MAX + 200], pnote[64];
		struct rbuf sub;

		memset(&hm, 0, sizeof(hm));
		rb_init(&sub);
		snprintf(title, sizeof(title), "%s over steps %" PRIu64 "..%" PRIu64,
			 st.text, sr.first, sr.last);
		rb_printf(&sub, "%u node%s, ", nrows, nrows == 1 ? "" : "s");
		view_series_what(&sub, &sr);
		if (sr.live)
			rb_puts(&sub, "; live: the steps that have arrived so far");
		if (sr.interrupted)
			rb_puts(&sub, "; interrupted: the steps read so far");
		snprintf(pnote, sizeof(pnote), "step %" PRIu64,
			 s->have_cur ? s->cur.step : 0);
		hm.title = title;
		hm.subtitle = sub.p ? sub.p : "";
		hm.g = &g;
		hm.rowname = names;
		hm.xlabel = "step";
		hm.x0 = (double)sr.first;
		hm.x1 = (double)sr.first + (double)sr.per * w;
		hm.pcol = pcol;
		hm.pnote = pnote;
		hm.scale_label = view_stat_label(&st);
		rc = view_write_heatmap(s, o, &hm);
		rb_free(&sub);
	}
	goto done;
oom:
	tm_error(s, "Out of memory.");
done:
	view_flush_rb(s, &out);
	rgrid_free(&g);
	free(rownode);
	free(names);
	view_series_free(&sr);
	tm_address_free(st.a);
	return rc;
}
