/*
 * cmd-plot.c -- `plot`: a line chart of a stat over steps.
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

static double unlog(int log, double v)
{
	return log ? render_unlog(v) : v;
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
	uint64_t a = 0, b = UINT64_MAX;
	int w, h, x, y, rc = -1, prow = -1, pcol = -1;
	uint32_t i;
	size_t l;
	struct rbuf out;

	(void)from_tty;
	p = view_parse_opts(s, args, &o, 64, 10);
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
	if (steps && view_parse_range(s, steps + 6, &a, &b))
		return -1;
	if (view_parse_sterm(s, tm_strip(term), 1, &st))
		return -1;
	if (view_scan_series(s, &st, a, b, o.width, &sr)) {
		tm_address_free(st.a);
		return -1;
	}
	rb_init(&out);
	if (!sr.nsamp) {
		tm_out(s, "No values of %s in %s.\n", st.text,
		       a || b != UINT64_MAX ? "those steps" :
		       sr.live ? "the steps that have arrived" : "the trace");
		rc = 0;
		goto done;
	}
	w = sr.ncol;
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
	/* a pattern: the worst of its nodes in each column */
	for (i = 0; i < sr.nn; i++)
		for (x = 0; sr.kind[i] && x < w; x++)
			if (sr.kind[i][x] != CELL_EMPTY)
				view_cell_merge(&kind[x], &val[x], sr.kind[i][x],
						sr.val[i][x]);
	for (x = 0; x < w; x++) {
		if (kind[x] == CELL_EMPTY && sr.gap[x])
			kind[x] = CELL_GAP;
		if (kind[x] == CELL_VAL && o.log)
			val[x] = render_log(val[x]);
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
	rb_printf(&out, "%s over steps %" PRIu64 "..%" PRIu64 ": ", st.text,
		  sr.first, sr.last);
	view_series_what(&out, &sr);
	rb_puts(&out, o.log ? ", log scale\n" : "\n");
	if (sr.live)
		rb_printf(&out, "Live: the steps that have arrived so far (to step %"
			  PRIu64 "); the model was not resumed.\n", sr.last);
	view_range_note(&out, a, b, &sr);
	for (y = 0; y < h; y++) {
		lab[0] = 0;
		if (y == 0 && lo < hi)
			render_num(lab, sizeof(lab), unlog(o.log, hi));
		else if (y == h - 1 && lo < hi)
			render_num(lab, sizeof(lab), unlog(o.log, lo));
		else if (y == h / 2 && lo == hi)
			render_num(lab, sizeof(lab), unlog(o.log, lo));
		else if (y == h / 2 && lo < hi)
			render_num(lab, sizeof(lab),
				   unlog(o.log, hi - (hi - lo) * y / (h - 1)));
		rb_printf(&out, "%10s |", lab);
		for (x = 0; x < w; x++)
			chart_char(&out, o.mode, chart[y * w + x], pal[y * w + x]);
		rb_puts(&out, "\n");
	}
	rb_printf(&out, "%10s +", "");
	for (x = 0; x < w; x++)
		rb_puts(&out, "-");
	rb_printf(&out, "\n%10s  %-*" PRIu64 "%" PRIu64 "\n", "step",
		  view_axis_gap(w, sr.first), sr.first, sr.last);
	if (s->have_cur && view_series_col(&sr, s->cur.step) >= 0)
		rb_printf(&out, "%*s^ playhead (step %" PRIu64 ")\n",
			  12 + view_series_col(&sr, s->cur.step), "", s->cur.step);
	if (memchr(sr.gap, 1, (size_t)w) || memchr(kind, CELL_NAN, (size_t)w))
		rb_printf(&out, "%10s  %c NaN  %c +Inf  %c -Inf  %c gap (no line "
			  "drawn across it)\n", "", CH_NAN, CH_POSINF, CH_NEGINF, CH_GAP);
	if (sr.interrupted)
		rb_puts(&out, "Interrupted: the chart covers the steps read so far.\n");
	view_flush_rb(s, &out);
	rc = 0;
	if (pic_any(&o.pic)) {
		struct pic_plot pl;
		char title[TM_ADDRESS_MAX + 200], pnote[64], ylab[80];
		double *xs = malloc((size_t)w * sizeof(*xs));
		struct rbuf sub;

		if (!xs) {
			tm_error(s, "Out of memory.");
			rc = -1;
			goto done;
		}
		for (x = 0; x < w; x++)
			xs[x] = (double)sr.first + (double)sr.per * x +
				(double)(sr.per - 1) / 2;
		memset(&pl, 0, sizeof(pl));
		rb_init(&sub);
		snprintf(title, sizeof(title), "%s over steps %" PRIu64 "..%" PRIu64,
			 st.text, sr.first, sr.last);
		view_series_what(&sub, &sr);
		if (tm_address_is_pattern(st.a))
			rb_puts(&sub, "; the worst of the pattern's nodes");
		if (sr.live)
			rb_puts(&sub, "; live: the steps that have arrived so far");
		if (sr.interrupted)
			rb_puts(&sub, "; interrupted: the steps read so far");
		snprintf(pnote, sizeof(pnote), "step %" PRIu64,
			 s->have_cur ? s->cur.step : 0);
		snprintf(ylab, sizeof(ylab), "%s", view_stat_label(&st));
		pl.title = title;
		pl.subtitle = sub.p ? sub.p : "";
		pl.xlabel = "step";
		pl.ylabel = ylab;
		pl.n = w;
		pl.x = xs;
		pl.y = val;
		pl.kind = kind;
		pl.x0 = (double)sr.first - 0.5;
		pl.x1 = (double)sr.first + (double)sr.per * w - 0.5;
		pl.log = o.log;
		pl.playhead = s->have_cur && view_series_col(&sr, s->cur.step) >= 0;
		pl.pval = s->have_cur ? (double)s->cur.step : 0;
		pl.pnote = pnote;
		rc = view_write_plot(s, &o, &pl);
		free(xs);
		rb_free(&sub);
	}
done:
	view_flush_rb(s, &out);
	free(kind);
	free(val);
	free(chart);
	free(pal);
	view_series_free(&sr);
	tm_address_free(st.a);
	return rc;
}

const struct cmd_entry cmd_plot_entry = {
	.name = "plot",
	.usage = "plot [-nocolor|-color|-color256] [-width N] [-height N] [-log] "
		 "[-png FILE] [-svg FILE] [-pdf FILE] NODE:SLOT.STAT [steps A..B]",
	.help = "Chart one stat of a node over steps, in the terminal.\n"
		"E.g. \"plot model.head:out.abs_max steps 0..500\".  The line breaks\n"
		"at gaps (hatched); NaN and Inf are marked on the top and bottom rows.\n"
		"STAT is any tensor stat or \"time\" (the call's duration).  A long\n"
		"run is drawn in -width columns, each the worst of its steps.\n"
		"-png, -svg, -pdf FILE also draw it as a picture with labelled axes.",
	.exec = cmd_plot_exec, .flags = CMD_NEEDS_TRACE, .klass = "data",
};
