/*
 * picture.c -- heatmaps and plots as PNG, SVG and PDF files (picture.h).
 *
 * Layout code draws through a small canvas: cairo for PNG and PDF, an SVG
 * writer of our own for SVG (labels stay <text>).  Sizes are in pixels for
 * PNG and points for the others.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cairo.h>
#include <cairo-pdf.h>
#include <fontconfig/fontconfig.h>

#include "picture.h"

#define FONT "DejaVu Sans"
#define TM_PIC_LABEL 512
#define MONO "DejaVu Sans Mono"
#define SVG_MONO "DejaVu Sans Mono, Menlo, Consolas, monospace"
#define SVG_FONT "DejaVu Sans, Verdana, Arial, sans-serif"

int pic_any(const struct pic_files *f)
{
	int i;

	for (i = 0; i < PIC__COUNT; i++)
		if (f->path[i][0])
			return 1;
	return 0;
}

const char *pic_format_name(int fmt)
{
	static const char *const n[] = { "png", "svg", "pdf" };

	return fmt >= 0 && fmt < PIC__COUNT ? n[fmt] : "?";
}

/* ------------------------------------------------------------- canvas */

enum { AL_LEFT, AL_CENTRE, AL_RIGHT };
enum { MK_POINT, MK_NAN, MK_POSINF, MK_NEGINF };

struct canvas {
	int fmt;
	cairo_t *cr;            /* PNG, PDF; and text measurement for SVG */
	cairo_surface_t *surf;
	FILE *svg;
	int mono;               /* text in the monospace face */
};

static struct rgb mkrgb(int r, int g, int b)
{
	struct rgb c = { (uint8_t)r, (uint8_t)g, (uint8_t)b };

	return c;
}

static void set_rgb(struct canvas *c, struct rgb k)
{
	cairo_set_source_rgb(c->cr, k.r / 255.0, k.g / 255.0, k.b / 255.0);
}

static void svg_escape(FILE *fp, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '&': fputs("&amp;", fp); break;
		case '<': fputs("&lt;", fp); break;
		case '>': fputs("&gt;", fp); break;
		case '"': fputs("&quot;", fp); break;
		default: fputc(*s, fp);
		}
	}
}

static void font(struct canvas *c, double size, int bold)
{
	cairo_select_font_face(c->cr, c->mono ? MONO : FONT, CAIRO_FONT_SLANT_NORMAL,
			       bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
	cairo_set_font_size(c->cr, size);
}

static double text_w(struct canvas *c, const char *s, double size, int bold)
{
	cairo_text_extents_t e;

	font(c, size, bold);
	cairo_text_extents(c->cr, s, &e);
	return e.x_advance;
}

/*
 * The width layout reserves for a text: an estimate from its length, not
 * the font's measure, so that a picture has the same size on every machine
 * whatever fonts it has (the docs print the sizes and tests compare them).
 * DejaVu Sans averages about 0.6 em a character; the margins leave room.
 */
static double est_w(const char *s, double size, int bold)
{
	size_t n = 0;

	for (; *s; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return (double)n * size * (bold ? 0.66 : 0.6);
}

static void rect(struct canvas *c, double x, double y, double w, double h,
		 struct rgb k)
{
	if (c->svg) {
		fprintf(c->svg, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" "
			"height=\"%.2f\" fill=\"#%02x%02x%02x\"/>\n", x, y, w, h,
			k.r, k.g, k.b);
		return;
	}
	set_rgb(c, k);
	cairo_rectangle(c->cr, x, y, w, h);
	cairo_fill(c->cr);
}

static void line(struct canvas *c, double x0, double y0, double x1, double y1,
		 double width, struct rgb k, int dashed)
{
	if (c->svg) {
		fprintf(c->svg, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" "
			"y2=\"%.2f\" stroke=\"#%02x%02x%02x\" stroke-width=\"%.2f\"%s/>\n",
			x0, y0, x1, y1, k.r, k.g, k.b, width,
			dashed ? " stroke-dasharray=\"4 3\"" : "");
		return;
	}
	set_rgb(c, k);
	cairo_set_line_width(c->cr, width);
	if (dashed) {
		static const double d[] = { 4, 3 };

		cairo_set_dash(c->cr, d, 2, 0);
	}
	cairo_move_to(c->cr, x0, y0);
	cairo_line_to(c->cr, x1, y1);
	cairo_stroke(c->cr);
	cairo_set_dash(c->cr, NULL, 0, 0);
}

static void frame(struct canvas *c, double x, double y, double w, double h,
		  struct rgb k)
{
	line(c, x, y, x + w, y, 1, k, 0);
	line(c, x + w, y, x + w, y + h, 1, k, 0);
	line(c, x + w, y + h, x, y + h, 1, k, 0);
	line(c, x, y + h, x, y, 1, k, 0);
}

/* Grey with dark diagonal stripes: records lost to a gap. */
static void hatch(struct canvas *c, double x, double y, double w, double h)
{
	double d;

	if (c->svg) {
		fprintf(c->svg, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" "
			"height=\"%.2f\" fill=\"url(#gap)\"/>\n", x, y, w, h);
		return;
	}
	cairo_save(c->cr);
	cairo_rectangle(c->cr, x, y, w, h);
	cairo_clip(c->cr);
	set_rgb(c, mkrgb(200, 200, 200));
	cairo_paint(c->cr);
	set_rgb(c, mkrgb(90, 90, 90));
	cairo_set_line_width(c->cr, 1.2);
	for (d = -h; d < w; d += 5) {
		cairo_move_to(c->cr, x + d, y + h);
		cairo_line_to(c->cr, x + d + h, y);
	}
	cairo_stroke(c->cr);
	cairo_restore(c->cr);
}

/*
 * Text at (x, y) on its baseline; rot: rotated a quarter turn
 * anticlockwise (a vertical axis label).  full: the whole text that a
 * shortened label stands for, kept in the SVG.
 */
static void text(struct canvas *c, double x, double y, const char *s,
		 double size, int bold, int align, struct rgb k, int rot,
		 const char *full)
{
	double w = text_w(c, s, size, bold);

	if (c->svg) {
		static const char *const anchor[] = { "start", "middle", "end" };

		fprintf(c->svg, "<text x=\"%.2f\" y=\"%.2f\" font-size=\"%.1f\"%s "
			"text-anchor=\"%s\" fill=\"#%02x%02x%02x\"%s", x, y, size,
			bold ? " font-weight=\"bold\"" : "", anchor[align],
			k.r, k.g, k.b, c->mono ? " font-family=\"" SVG_MONO
			"\" xml:space=\"preserve\"" : "");
		if (rot)
			fprintf(c->svg, " transform=\"rotate(-90 %.2f %.2f)\"", x, y);
		fputs(">", c->svg);
		if (full && strcmp(full, s)) {
			fputs("<title>", c->svg);
			svg_escape(c->svg, full);
			fputs("</title>", c->svg);
		}
		svg_escape(c->svg, s);
		fputs("</text>\n", c->svg);
		return;
	}
	cairo_save(c->cr);
	set_rgb(c, k);
	cairo_move_to(c->cr, x, y);
	if (rot)
		cairo_rotate(c->cr, -M_PI / 2);
	cairo_rel_move_to(c->cr, align == AL_LEFT ? 0 :
			  align == AL_CENTRE ? -w / 2 : -w, 0);
	cairo_show_text(c->cr, s);
	cairo_restore(c->cr);
}

static void poly(struct canvas *c, const double *xy, int n, struct rgb fill)
{
	int i;

	if (c->svg) {
		fputs("<polygon points=\"", c->svg);
		for (i = 0; i < n; i++)
			fprintf(c->svg, "%s%.2f,%.2f", i ? " " : "", xy[2 * i],
				xy[2 * i + 1]);
		fprintf(c->svg, "\" fill=\"#%02x%02x%02x\"/>\n", fill.r, fill.g,
			fill.b);
		return;
	}
	set_rgb(c, fill);
	for (i = 0; i < n; i++)
		(i ? cairo_line_to : cairo_move_to)(c->cr, xy[2 * i], xy[2 * i + 1]);
	cairo_close_path(c->cr);
	cairo_fill(c->cr);
}

static const struct rgb col_nan = { 255, 0, 255 }, col_pinf = { 230, 30, 30 },
	col_ninf = { 0, 190, 230 }, col_empty = { 246, 246, 246 },
	col_ink = { 30, 30, 30 }, col_grey = { 120, 120, 120 },
	col_light = { 225, 225, 225 }, col_white = { 255, 255, 255 },
	col_line = { 33, 113, 181 };

/* A marker centred at (x, y) of radius r: a point, NaN's cross, Inf's
 * triangles (up: +Inf, down: -Inf). */
static void marker(struct canvas *c, int mk, double x, double y, double r)
{
	double t[6];

	switch (mk) {
	case MK_POINT:
		if (c->svg) {
			fprintf(c->svg, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"%.2f\" "
				"fill=\"#%02x%02x%02x\"/>\n", x, y, r, col_line.r,
				col_line.g, col_line.b);
			return;
		}
		set_rgb(c, col_line);
		cairo_arc(c->cr, x, y, r, 0, 2 * M_PI);
		cairo_fill(c->cr);
		return;
	case MK_NAN:
		line(c, x - r, y - r, x + r, y + r, r / 2.5 + 0.6, col_nan, 0);
		line(c, x - r, y + r, x + r, y - r, r / 2.5 + 0.6, col_nan, 0);
		return;
	case MK_POSINF:
	case MK_NEGINF: {
		double s = mk == MK_POSINF ? -1 : 1;

		t[0] = x - r; t[1] = y - s * r * 0.8;
		t[2] = x + r; t[3] = y - s * r * 0.8;
		t[4] = x; t[5] = y + s * r;
		poly(c, t, 3, mk == MK_POSINF ? col_pinf : col_ninf);
		return;
	}
	}
}

/* A cell of a special kind: its colour, and its mark when there is room. */
static void special_cell(struct canvas *c, int kind, double x, double y,
			 double w, double h)
{
	double r = (w < h ? w : h) / 2 - 1.5;
	double t[6];

	switch (kind) {
	case CELL_NAN:
		rect(c, x, y, w, h, col_nan);
		if (r >= 2.5) {
			line(c, x + w / 2 - r, y + h / 2 - r, x + w / 2 + r,
			     y + h / 2 + r, 1.3, col_white, 0);
			line(c, x + w / 2 - r, y + h / 2 + r, x + w / 2 + r,
			     y + h / 2 - r, 1.3, col_white, 0);
		}
		break;
	case CELL_POSINF:
	case CELL_NEGINF: {
		double s = kind == CELL_POSINF ? -1 : 1;

		rect(c, x, y, w, h, kind == CELL_POSINF ? col_pinf : col_ninf);
		if (r >= 2.5) {
			t[0] = x + w / 2 - r; t[1] = y + h / 2 - s * r * 0.8;
			t[2] = x + w / 2 + r; t[3] = y + h / 2 - s * r * 0.8;
			t[4] = x + w / 2; t[5] = y + h / 2 + s * r;
			poly(c, t, 3, col_white);
		}
		break;
	}
	case CELL_GAP:
		hatch(c, x, y, w, h);
		break;
	default:
		rect(c, x, y, w, h, col_empty);
	}
}

/*
 * cairo and fontconfig keep their font caches to the end of the process;
 * handing them back at exit keeps leak checkers (make check under ASan)
 * to leaks of our own.
 */
static void fonts_atexit(void)
{
	cairo_debug_reset_static_data();
	FcFini();
}

static int canvas_open(struct canvas *c, int fmt, const char *path, int w,
		       int h, char *err, size_t errlen)
{
	static int registered;

	if (!registered) {
		atexit(fonts_atexit);
		registered = 1;
	}
	memset(c, 0, sizeof(*c));
	c->fmt = fmt;
	if (fmt == PIC_PNG)
		c->surf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
	else if (fmt == PIC_PDF)
		c->surf = cairo_pdf_surface_create(path, w, h);
	else
		c->surf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1);
	if (cairo_surface_status(c->surf) != CAIRO_STATUS_SUCCESS) {
		snprintf(err, errlen, "Cannot write %s: %s.", path,
			 cairo_status_to_string(cairo_surface_status(c->surf)));
		cairo_surface_destroy(c->surf);
		return -1;
	}
	c->cr = cairo_create(c->surf);
	if (fmt == PIC_SVG) {
		c->svg = fopen(path, "w");
		if (!c->svg) {
			snprintf(err, errlen, "Cannot write %s: %s.", path,
				 strerror(errno));
			cairo_destroy(c->cr);
			cairo_surface_destroy(c->surf);
			return -1;
		}
		fprintf(c->svg, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
			"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
			"height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"%s\">\n"
			"<defs><pattern id=\"gap\" width=\"5\" height=\"5\" "
			"patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(-45)\">"
			"<rect width=\"5\" height=\"5\" fill=\"#c8c8c8\"/>"
			"<rect width=\"1.2\" height=\"5\" fill=\"#5a5a5a\"/></pattern></defs>\n",
			w, h, w, h, SVG_FONT);
	}
	rect(c, 0, 0, w, h, col_white);
	return 0;
}

static int canvas_close(struct canvas *c, const char *path, char *err,
			size_t errlen)
{
	cairo_status_t st;
	int rc = 0;

	if (c->svg) {
		fputs("</svg>\n", c->svg);
		if (ferror(c->svg) | fclose(c->svg)) {
			snprintf(err, errlen, "Cannot write %s: %s.", path,
				 strerror(errno));
			rc = -1;
		}
	}
	cairo_destroy(c->cr);
	if (c->fmt == PIC_PNG && rc == 0) {
		st = cairo_surface_write_to_png(c->surf, path);
		if (st != CAIRO_STATUS_SUCCESS) {
			/* cairo names no errno; the usual cause is the path */
			FILE *fp = fopen(path, "wb");

			snprintf(err, errlen, "Cannot write %s: %s.", path,
				 fp ? cairo_status_to_string(st) : strerror(errno));
			if (fp)
				fclose(fp);
			rc = -1;
		}
	}
	cairo_surface_finish(c->surf);
	if (rc == 0 && cairo_surface_status(c->surf) != CAIRO_STATUS_SUCCESS) {
		snprintf(err, errlen, "Cannot write %s: %s.", path,
			 cairo_status_to_string(cairo_surface_status(c->surf)));
		rc = -1;
	}
	cairo_surface_destroy(c->surf);
	return rc;
}

/* ------------------------------------------------------------- axes */

/* Round tick spacing (1, 2, 5 x 10^k) for about n ticks over span. */
static double nice_step(double span, int n)
{
	double raw = span / (n > 0 ? n : 1), p, f;

	if (!(raw > 0) || !isfinite(raw))
		return 1;
	p = pow(10, floor(log10(raw)));
	f = raw / p;
	return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

static void num(char *buf, size_t len, double v)
{
	v += 0.0;       /* no "-0" */
	if (v == floor(v) && fabs(v) < 1e7)
		snprintf(buf, len, "%.0f", v);
	else
		render_num(buf, len, v);
}

/* How many ticks fit along a length, their labels as wide as v's and apart. */
static int tick_count(double len, double v)
{
	char buf[32];
	int n;

	num(buf, sizeof(buf), v);
	n = (int)(len / (est_w(buf, 11, 0) + 28));
	return n < 1 ? 1 : n > 10 ? 10 : n;
}

/* The shortened row label: the end of a long name, which tells nodes apart. */
static void shorten(char *buf, size_t len, const char *name, size_t keep)
{
	size_t l = strlen(name);

	if (l <= keep || keep < 4)
		snprintf(buf, len, "%s", name);
	else
		snprintf(buf, len, "\xe2\x80\xa6%s", name + l - (keep - 1));
}

/* The legend: swatches and names, wrapped at width; returns its height. */
struct legend_item {
	int kind;               /* a cell kind, or -1: the playhead, -2: the line */
	char name[64];
};

static double legend(struct canvas *c, double x, double y, double width,
		     const struct legend_item *it, int n, int draw)
{
	double cx = x, cy = y;
	int i;

	for (i = 0; i < n; i++) {
		double w = 16 + est_w(it[i].name, 11, 0) + 18;

		if (cx > x && cx + w > x + width) {
			cx = x;
			cy += 18;
		}
		if (draw) {
			if (it[i].kind == -1) {
				line(c, cx + 5, cy - 10, cx + 5, cy + 2, 3, col_ink, 0);
				line(c, cx + 5, cy - 10, cx + 5, cy + 2, 1.2, col_white, 0);
			} else if (it[i].kind == -2) {
				line(c, cx, cy - 4, cx + 12, cy - 4, 1.5, col_line, 0);
				marker(c, MK_POINT, cx + 6, cy - 4, 2.5);
			} else if (it[i].kind >= 100) {
				marker(c, it[i].kind - 100, cx + 6, cy - 4, 5);
			} else {
				special_cell(c, it[i].kind, cx, cy - 10, 12, 12);
				frame(c, cx, cy - 10, 12, 12, col_grey);
			}
			text(c, cx + 16, cy, it[i].name, 11, 0, AL_LEFT, col_ink, 0,
			     NULL);
		}
		cx += w;
	}
	return cy - y + 18;
}

/* ------------------------------------------------------------- heatmap */

int picture_heatmap(const char *path, int fmt, const struct pic_heatmap *hm,
		    int cell, int *outw, int *outh, char *err, size_t errlen)
{
	const struct rgrid *g = hm->g;
	struct canvas c;
	struct legend_item it[8];
	char buf[TM_PIC_LABEL], full[TM_PIC_LABEL];
	double cw, ch, L, T, W, H, bx, R, labw = 0, tickw = 0, lh, x, y, step, v;
	int every, i, j, nit = 0, present[8] = { 0 }, W_img, H_img, k;

	/* Cells: wide enough to see, the whole grid about 700 x 480 units. */
	cw = cell ? cell : fmin(40, fmax(2, floor(700.0 / g->w)));
	ch = cell ? cell : fmin(22, fmax(3, floor(480.0 / g->h)));
	every = ch >= 12 ? 1 : (int)ceil(12 / ch);
	W = cw * g->w;
	H = ch * g->h;

	/* Measure on a scratch surface first: the labels size the margins. */
	if (canvas_open(&c, PIC_PNG, path, 1, 1, err, errlen))
		return -1;
	if (hm->rowname) {
		for (j = 0; j < g->h; j++) {
			shorten(buf, sizeof(buf), hm->rowname[j], 36);
			labw = fmax(labw, est_w(buf, 11, 0));
		}
	} else {
		num(buf, sizeof(buf), hm->y1);
		labw = est_w(buf, 11, 0) + 22;
	}
	for (j = 0; j <= 4; j++) {
		double f = g->lo + (g->hi - g->lo) * j / 4;

		render_num(buf, sizeof(buf), g->log ? render_unlog(f) : f);
		tickw = fmax(tickw, est_w(buf, 11, 0));
	}
	tickw = fmax(tickw, est_w(hm->scale_label, 11, 1) - 24);
	for (i = 0; i < g->w * g->h; i++)
		if (g->kind[i] < 8)
			present[g->kind[i]] = 1;
	if (present[CELL_NAN])
		it[nit].kind = CELL_NAN, snprintf(it[nit++].name, 64, "NaN");
	if (present[CELL_POSINF])
		it[nit].kind = CELL_POSINF, snprintf(it[nit++].name, 64, "+Inf");
	if (present[CELL_NEGINF])
		it[nit].kind = CELL_NEGINF, snprintf(it[nit++].name, 64, "-Inf");
	if (present[CELL_GAP])
		it[nit].kind = CELL_GAP, snprintf(it[nit++].name, 64,
						  "gap (records lost)");
	if (present[CELL_EMPTY])
		it[nit].kind = CELL_EMPTY, snprintf(it[nit++].name, 64, "no value");
	if (hm->pcol >= 0)
		it[nit].kind = -1, snprintf(it[nit++].name, 64, "playhead%s%s",
					    hm->pnote ? ", " : "",
					    hm->pnote ? hm->pnote : "");
	L = 12 + labw + 8;
	T = 12 + 20 + (hm->subtitle ? 16 : 0) + 20;
	bx = L + W + 18;
	R = bx + 14 + 6 + tickw + 14;
	W_img = (int)ceil(fmax(R, fmax(est_w(hm->title, 15, 1) + 24, 360)));
	lh = nit ? legend(&c, 12, 0, W_img - 24, it, nit, 0) : 0;
	H_img = (int)ceil(T + fmax(H, 110) + 44 + lh + 8);
	cairo_destroy(c.cr);
	cairo_surface_destroy(c.surf);

	if (canvas_open(&c, fmt, path, W_img, H_img, err, errlen))
		return -1;
	text(&c, 12, 12 + 15, hm->title, 15, 1, AL_LEFT, col_ink, 0, NULL);
	if (hm->subtitle)
		text(&c, 12, 12 + 15 + 17, hm->subtitle, 11, 0, AL_LEFT, col_grey,
		     0, NULL);
	for (j = 0; j < g->h; j++)
		for (i = 0; i < g->w; i++) {
			k = g->kind[(size_t)j * g->w + i];
			x = L + i * cw;
			y = T + j * ch;
			if (k == CELL_VAL) {
				struct rgb col = render_colour(g->level[(size_t)j * g->w + i]);

				/* a hair wider: no seams between cells in viewers */
				rect(&c, x, y, cw + (i + 1 < g->w ? 0.3 : 0),
				     ch + (j + 1 < g->h ? 0.3 : 0), col);
			} else {
				special_cell(&c, k, x, y, cw, ch);
			}
		}
	frame(&c, L, T, W, H, col_grey);
	/* rows */
	for (j = 0; j < g->h; j++) {
		if (hm->rowname) {
			if (j % every)
				continue;
			shorten(buf, sizeof(buf), hm->rowname[j], 36);
			snprintf(full, sizeof(full), "%s", hm->rowname[j]);
			text(&c, L - 6, T + j * ch + ch / 2 + 4, buf, 11, 0, AL_RIGHT,
			     col_ink, 0, full);
		}
	}
	if (!hm->rowname) {
		step = nice_step(hm->y1 - hm->y0, (int)(H / 40) + 1);
		step = fmax(1, round(step));
		for (v = ceil(hm->y0 / step) * step; v < hm->y1; v += step) {
			y = T + (v + 0.5 - hm->y0) / (hm->y1 - hm->y0) * H;
			line(&c, L - 4, y, L, y, 1, col_ink, 0);
			num(buf, sizeof(buf), v);
			text(&c, L - 6, y + 4, buf, 11, 0, AL_RIGHT, col_ink, 0, NULL);
		}
		if (hm->ylabel)
			text(&c, 14, T + H / 2, hm->ylabel, 11, 0, AL_CENTRE, col_ink,
			     1, NULL);
	}
	/* the step (or column) axis: ticks at cell centres */
	step = fmax(1, round(nice_step(hm->x1 - hm->x0, tick_count(W, hm->x1))));
	for (v = ceil(hm->x0 / step) * step; v < hm->x1; v += step) {
		x = L + (v + 0.5 - hm->x0) / (hm->x1 - hm->x0) * W;
		if (hm->x1 - hm->x0 > g->w)     /* columns of many steps */
			x = L + (v - hm->x0) / (hm->x1 - hm->x0) * W;
		line(&c, x, T + H, x, T + H + 4, 1, col_ink, 0);
		num(buf, sizeof(buf), v);
		text(&c, x, T + H + 16, buf, 11, 0, AL_CENTRE, col_ink, 0, NULL);
	}
	if (hm->xlabel)
		text(&c, L + W / 2, T + H + 32, hm->xlabel, 11, 0, AL_CENTRE,
		     col_ink, 0, NULL);
	/* the playhead */
	if (hm->pcol >= 0) {
		double t[6];

		x = L + (hm->pcol + 0.5) * cw;
		line(&c, x, T - 2, x, T + H, 3, col_ink, 0);
		line(&c, x, T - 2, x, T + H, 1.2, col_white, 0);
		t[0] = x - 5; t[1] = T - 12; t[2] = x + 5; t[3] = T - 12;
		t[4] = x; t[5] = T - 3;
		poly(&c, t, 3, col_ink);
		/* left of the mark in the right half: clear of the scale's title */
		if (hm->pnote)
			text(&c, hm->pcol * 2 >= g->w ? x - 8 : x + 8, T - 5, hm->pnote,
			     10, 0, hm->pcol * 2 >= g->w ? AL_RIGHT : AL_LEFT, col_ink,
			     0, NULL);
	}
	/* the colour scale */
	for (j = 0; j < 100; j++) {
		double bh = fmax(H, 110);

		rect(&c, bx, T + bh * j / 100, 14, bh / 100 + 0.5,
		     render_colour((int)((99 - j) * (RENDER_LEVELS - 1) / 99)));
	}
	frame(&c, bx, T, 14, fmax(H, 110), col_grey);
	for (j = 0; j <= 4; j++) {
		double f = g->lo + (g->hi - g->lo) * j / 4;

		y = T + fmax(H, 110) * (1 - j / 4.0);
		line(&c, bx + 14, y, bx + 18, y, 1, col_ink, 0);
		render_num(buf, sizeof(buf), g->log ? render_unlog(f) : f);
		text(&c, bx + 20, y + 4, buf, 11, 0, AL_LEFT, col_ink, 0, NULL);
		if (g->hi == g->lo)
			break;
	}
	snprintf(buf, sizeof(buf), "%s%s", hm->scale_label, g->log ? " (log)" : "");
	text(&c, bx, T - 8, buf, 11, 1, AL_LEFT, col_ink, 0, NULL);
	if (nit)
		legend(&c, 12, T + fmax(H, 110) + 44 + 12, W_img - 24, it, nit, 1);
	*outw = W_img;
	*outh = H_img;
	return canvas_close(&c, path, err, errlen);
}

/* ------------------------------------------------------------- plot */

int picture_plot(const char *path, int fmt, const struct pic_plot *pl,
		 int *outw, int *outh, char *err, size_t errlen)
{
	struct canvas c;
	struct legend_item it[8];
	char buf[64];
	double lo = INFINITY, hi = -INFINITY, L, T = 58, W, H = 260, x, y, v,
	       step, tickw = 0, lh, prevx = 0, prevy = 0, colw;
	int i, nit = 0, present[8] = { 0 }, W_img = 760, H_img, prev = 0;

	for (i = 0; i < pl->n; i++) {
		present[pl->kind[i] < 8 ? pl->kind[i] : 0] = 1;
		if (pl->kind[i] == CELL_VAL) {
			lo = fmin(lo, pl->y[i]);
			hi = fmax(hi, pl->y[i]);
		}
	}
	if (!(lo <= hi))
		lo = 0, hi = 1;
	if (lo == hi) {
		double d = fabs(lo) > 0 ? fabs(lo) * 0.1 : 1;

		lo -= d;
		hi += d;
	} else {
		double d = (hi - lo) * 0.06;

		lo -= d;
		hi += d;
	}
	if (canvas_open(&c, PIC_PNG, path, 1, 1, err, errlen))
		return -1;
	step = nice_step(hi - lo, 5);
	for (v = ceil(lo / step) * step; v <= hi; v += step) {
		render_num(buf, sizeof(buf), fabs(v) < step * 1e-9 ? 0 :
			   pl->log ? render_unlog(v) : v);
		tickw = fmax(tickw, est_w(buf, 11, 0));
	}
	it[nit].kind = -2;
	snprintf(it[nit++].name, 64, "%s", pl->ylabel);
	if (present[CELL_NAN])
		it[nit].kind = 100 + MK_NAN, snprintf(it[nit++].name, 64, "NaN");
	if (present[CELL_POSINF])
		it[nit].kind = 100 + MK_POSINF, snprintf(it[nit++].name, 64, "+Inf");
	if (present[CELL_NEGINF])
		it[nit].kind = 100 + MK_NEGINF, snprintf(it[nit++].name, 64, "-Inf");
	if (present[CELL_GAP])
		it[nit].kind = CELL_GAP, snprintf(it[nit++].name, 64,
						  "gap (records lost; no line across)");
	if (pl->playhead)
		it[nit].kind = -1, snprintf(it[nit++].name, 64, "playhead%s%s",
					    pl->pnote ? ", " : "",
					    pl->pnote ? pl->pnote : "");
	L = 12 + 16 + tickw + 10;
	W_img = (int)fmax(W_img, est_w(pl->title, 15, 1) + 24);
	W = W_img - L - 24;
	lh = legend(&c, 12, 0, W_img - 24, it, nit, 0);
	H_img = (int)ceil(T + H + 44 + lh + 8);
	cairo_destroy(c.cr);
	cairo_surface_destroy(c.surf);

	if (canvas_open(&c, fmt, path, W_img, H_img, err, errlen))
		return -1;
	text(&c, 12, 27, pl->title, 15, 1, AL_LEFT, col_ink, 0, NULL);
	if (pl->subtitle)
		text(&c, 12, 44, pl->subtitle, 11, 0, AL_LEFT, col_grey, 0, NULL);
#define PX(v) (L + ((v) - pl->x0) / (pl->x1 - pl->x0) * W)
#define PY(v) (T + H - ((v) - lo) / (hi - lo) * H)
	colw = W / (pl->n ? pl->n : 1);
	for (v = ceil(lo / step) * step; v <= hi; v += step) {
		y = PY(v);
		line(&c, L, y, L + W, y, 1, col_light, 0);
		line(&c, L - 4, y, L, y, 1, col_ink, 0);
		render_num(buf, sizeof(buf), fabs(v) < step * 1e-9 ? 0 :
			   pl->log ? render_unlog(v) : v);
		text(&c, L - 6, y + 4, buf, 11, 0, AL_RIGHT, col_ink, 0, NULL);
	}
	/* gaps under everything */
	for (i = 0; i < pl->n; i++)
		if (pl->kind[i] == CELL_GAP)
			hatch(&c, PX(pl->x[i]) - colw / 2, T, colw, H);
	snprintf(buf, sizeof(buf), "%s%s", pl->ylabel, pl->log ? " (log scale)" : "");
	text(&c, 22, T + H / 2, buf, 11, 0, AL_CENTRE, col_ink, 1, NULL);
	step = fmax(1, round(nice_step(pl->x1 - pl->x0, tick_count(W, pl->x1))));
	for (v = ceil(pl->x0 / step) * step; v <= pl->x1; v += step) {
		x = PX(v);
		line(&c, x, T + H, x, T + H + 4, 1, col_ink, 0);
		num(buf, sizeof(buf), v);
		text(&c, x, T + H + 16, buf, 11, 0, AL_CENTRE, col_ink, 0, NULL);
	}
	text(&c, L + W / 2, T + H + 32, pl->xlabel, 11, 0, AL_CENTRE, col_ink, 0,
	     NULL);
	frame(&c, L, T, W, H, col_grey);
	/* the line: joins neighbouring columns only, so a gap breaks it */
	for (i = 0; i < pl->n; i++) {
		if (pl->kind[i] != CELL_VAL) {
			prev = 0;
			continue;
		}
		x = PX(pl->x[i]);
		y = PY(pl->y[i]);
		if (prev)
			line(&c, prevx, prevy, x, y, 1.5, col_line, 0);
		prev = 1;
		prevx = x;
		prevy = y;
	}
	for (i = 0; i < pl->n; i++) {
		x = PX(pl->x[i]);
		switch (pl->kind[i]) {
		case CELL_VAL:
			if (pl->n <= 200)
				marker(&c, MK_POINT, x, PY(pl->y[i]), 2.5);
			break;
		case CELL_NAN:
			marker(&c, MK_NAN, x, T + 8, 5);
			break;
		case CELL_POSINF:
			marker(&c, MK_POSINF, x, T + 8, 5);
			break;
		case CELL_NEGINF:
			marker(&c, MK_NEGINF, x, T + H - 8, 5);
			break;
		}
	}
	if (pl->playhead) {
		x = PX(pl->pval);
		line(&c, x, T, x, T + H, 1.2, col_ink, 1);
		if (pl->pnote)
			text(&c, x + 4, T - 4, pl->pnote, 10, 0, AL_LEFT, col_ink, 0,
			     NULL);
	}
#undef PX
#undef PY
	legend(&c, 12, T + H + 44 + 12, W_img - 24, it, nit, 1);
	*outw = W_img;
	*outh = H_img;
	return canvas_close(&c, path, err, errlen);
}

/* ------------------------------------------------------------- text */

int picture_text(const char *path, int fmt, const struct pic_text *tx,
		 int *outw, int *outh, char *err, size_t errlen)
{
	static const struct rgb band = { 255, 243, 176 };
	struct canvas c;
	double lh = 16, cw = 12 * 0.6, T = 58, wmax = 0, y;
	int i, W_img, H_img;

	for (i = 0; i < tx->n; i++)
		wmax = fmax(wmax, est_w(tx->line[i], 12, 0));
	W_img = (int)ceil(fmax(wmax + 24 + cw, fmax(est_w(tx->title, 15, 1),
						   est_w(tx->subtitle ? tx->subtitle : "", 11, 0)) + 24));
	H_img = (int)ceil(T + lh * tx->n + (tx->note ? 30 : 10));
	if (canvas_open(&c, fmt, path, W_img, H_img, err, errlen))
		return -1;
	text(&c, 12, 27, tx->title, 15, 1, AL_LEFT, col_ink, 0, NULL);
	if (tx->subtitle)
		text(&c, 12, 44, tx->subtitle, 11, 0, AL_LEFT, col_grey, 0, NULL);
	for (i = 0; i < tx->n; i++) {
		y = T + lh * i;
		if (tx->cur[i])
			rect(&c, 8, y - 2, W_img - 16, lh, band);
		c.mono = 1;
		text(&c, 12, y + 10, tx->line[i], 12, tx->cur[i], AL_LEFT,
		     tx->cls[i] == 1 ? mkrgb(200, 0, 200) : tx->cls[i] ? col_grey :
		     col_ink, 0, NULL);
		c.mono = 0;
	}
	if (tx->note)
		text(&c, 12, T + lh * tx->n + 16, tx->note, 11, 0, AL_LEFT, col_grey,
		     0, NULL);
	*outw = W_img;
	*outh = H_img;
	return canvas_close(&c, path, err, errlen);
}
