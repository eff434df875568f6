/*
 * render.c -- cells to characters, escape codes and PNG files (render.h).
 *
 * One colour map (viridis: ordered, readable on dark and light terminals and
 * by most colour-blind readers), one set of colours for the values that are
 * not on the map (NaN magenta, +Inf red, -Inf cyan, gaps a grey hatch), and
 * a PNG writer that needs no zlib: deflate's stored blocks are valid
 * compressed data, so the file is a little larger but any decoder reads it.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render.h"

/* ------------------------------------------------------------- strings */

void rb_init(struct rbuf *b)
{
	memset(b, 0, sizeof(*b));
}

void rb_free(struct rbuf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

static int rb_grow(struct rbuf *b, size_t more)
{
	size_t cap;
	char *p;

	if (b->oom)
		return -1;
	if (b->len + more + 1 <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 256;
	while (cap < b->len + more + 1)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p) {
		b->oom = 1;
		return -1;
	}
	b->p = p;
	b->cap = cap;
	return 0;
}

void rb_putn(struct rbuf *b, const char *str, size_t n)
{
	if (rb_grow(b, n))
		return;
	memcpy(b->p + b->len, str, n);
	b->len += n;
	b->p[b->len] = 0;
}

void rb_puts(struct rbuf *b, const char *str)
{
	rb_putn(b, str, strlen(str));
}

void rb_printf(struct rbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || rb_grow(b, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

/* UTF-8 continuation bytes do not take a column. */
void rb_pad(struct rbuf *b, size_t from, size_t width)
{
	size_t i, cols = 0;

	for (i = from; i < b->len; i++)
		if (((unsigned char)b->p[i] & 0xc0) != 0x80)
			cols++;
	while (cols++ < width)
		rb_putn(b, " ", 1);
}

/* ------------------------------------------------------------- grid */

int rgrid_init(struct rgrid *g, int w, int h)
{
	memset(g, 0, sizeof(*g));
	if (w <= 0 || h <= 0 || w > 4096 || h > 4096)
		return -1;
	g->kind = calloc((size_t)w * (size_t)h, 1);
	g->level = calloc((size_t)w * (size_t)h, 1);
	if (!g->kind || !g->level) {
		rgrid_free(g);
		return -1;
	}
	g->w = w;
	g->h = h;
	return 0;
}

void rgrid_free(struct rgrid *g)
{
	free(g->kind);
	free(g->level);
	memset(g, 0, sizeof(*g));
}

void rgrid_set_kind(struct rgrid *g, int x, int y, int kind)
{
	g->kind[(size_t)y * (size_t)g->w + (size_t)x] = (uint8_t)kind;
}

void rgrid_set(struct rgrid *g, int x, int y, double v)
{
	size_t i = (size_t)y * (size_t)g->w + (size_t)x;
	double t;
	int lv;

	if (isnan(v)) {
		g->kind[i] = CELL_NAN;
		return;
	}
	if (isinf(v)) {
		g->kind[i] = v > 0 ? CELL_POSINF : CELL_NEGINF;
		return;
	}
	t = g->hi > g->lo ? (v - g->lo) / (g->hi - g->lo) : 0.5;
	if (t < 0)
		t = 0;
	if (t > 1)
		t = 1;
	lv = (int)(t * (RENDER_LEVELS - 1) + 0.5);
	g->kind[i] = CELL_VAL;
	g->level[i] = (uint8_t)lv;
}

/* ------------------------------------------------------------- colour */

/* viridis at t = 0, 1/8, ..., 1 (matplotlib's table, rounded). */
static const struct rgb viridis[9] = {
	{ 68, 1, 84 }, { 71, 44, 122 }, { 59, 81, 139 }, { 44, 113, 142 },
	{ 33, 144, 141 }, { 39, 173, 129 }, { 92, 200, 99 }, { 170, 220, 50 },
	{ 253, 231, 37 }
};

struct rgb render_colour(int level)
{
	double t = (double)level / (RENDER_LEVELS - 1) * 8;
	int i = (int)t;
	double f;
	struct rgb c;

	if (i >= 8)
		return viridis[8];
	if (i < 0)
		return viridis[0];
	f = t - i;
	c.r = (uint8_t)(viridis[i].r + f * (viridis[i + 1].r - viridis[i].r) + 0.5);
	c.g = (uint8_t)(viridis[i].g + f * (viridis[i + 1].g - viridis[i].g) + 0.5);
	c.b = (uint8_t)(viridis[i].b + f * (viridis[i + 1].b - viridis[i].b) + 0.5);
	return c;
}

struct rgb render_special(int pal)
{
	static const struct rgb sp[] = {
		{ 255, 0, 255 },        /* NaN */
		{ 255, 48, 48 },        /* +Inf */
		{ 0, 224, 255 },        /* -Inf */
		{ 160, 160, 160 },      /* gap, light stripe */
		{ 72, 72, 72 },         /* gap, dark stripe */
		{ 0, 0, 0 }             /* empty */
	};

	if (pal < PAL_NAN || pal > PAL_EMPTY)
		return render_colour(pal);
	return sp[pal - PAL_NAN];
}

int render_cell_pal(const struct rgrid *g, int x, int y)
{
	size_t i = (size_t)y * (size_t)g->w + (size_t)x;

	switch (g->kind[i]) {
	case CELL_VAL: return g->level[i];
	case CELL_NAN: return PAL_NAN;
	case CELL_POSINF: return PAL_POSINF;
	case CELL_NEGINF: return PAL_NEGINF;
	case CELL_GAP: return (x + y) % 2 ? PAL_GAP_DARK : PAL_GAP_LIGHT;
	default: return PAL_EMPTY;
	}
}

char render_cell_char(const struct rgrid *g, int x, int y)
{
	static const char ramp[] = RAMP_CHARS;
	size_t i = (size_t)y * (size_t)g->w + (size_t)x;

	switch (g->kind[i]) {
	case CELL_VAL:
		return ramp[g->level[i] * (sizeof(ramp) - 1) / RENDER_LEVELS];
	case CELL_NAN: return CH_NAN;
	case CELL_POSINF: return CH_POSINF;
	case CELL_NEGINF: return CH_NEGINF;
	case CELL_GAP: return CH_GAP;
	default: return CH_EMPTY;
	}
}

/* The nearest colour of xterm's 6x6x6 cube. */
static int cube256(struct rgb c)
{
	int r = (c.r * 5 + 127) / 255, g = (c.g * 5 + 127) / 255,
	    b = (c.b * 5 + 127) / 255;

	return 16 + 36 * r + 6 * g + b;
}

void render_sgr(struct rbuf *b, int mode, struct rgb c, int fg)
{
	if (mode == RENDER_24BIT)
		rb_printf(b, "\033[%d;2;%u;%u;%um", fg ? 38 : 48, c.r, c.g, c.b);
	else if (mode == RENDER_256)
		rb_printf(b, "\033[%d;5;%dm", fg ? 38 : 48, cube256(c));
}

/* ------------------------------------------------------------- text */

/*
 * Two cell rows per line: the upper cell is the foreground of an upper
 * half-block, the lower one its background.  An empty half keeps the
 * terminal's own background.
 */
static void half_line(struct rbuf *b, const struct rgrid *g, int mode, int y)
{
	int x, up, lo;

	for (x = 0; x < g->w; x++) {
		up = render_cell_pal(g, x, y);
		lo = y + 1 < g->h ? render_cell_pal(g, x, y + 1) : PAL_EMPTY;
		if (up == PAL_EMPTY && lo == PAL_EMPTY) {
			rb_puts(b, SGR_RESET " ");
		} else if (lo == PAL_EMPTY) {
			rb_puts(b, "\033[49m");
			render_sgr(b, mode, render_special(up), 1);
			rb_puts(b, "\xe2\x96\x80");      /* U+2580 upper half */
		} else if (up == PAL_EMPTY) {
			rb_puts(b, "\033[49m");
			render_sgr(b, mode, render_special(lo), 1);
			rb_puts(b, "\xe2\x96\x84");      /* U+2584 lower half */
		} else {
			render_sgr(b, mode, render_special(up), 1);
			render_sgr(b, mode, render_special(lo), 0);
			rb_puts(b, "\xe2\x96\x80");
		}
	}
	rb_puts(b, SGR_RESET);
}

void render_grid(struct rbuf *b, const struct rgrid *g, int mode,
		 const char *indent)
{
	int x, y;

	for (y = 0; y < g->h; y += mode == RENDER_PLAIN ? 1 : 2) {
		rb_puts(b, indent);
		if (mode == RENDER_PLAIN) {
			for (x = 0; x < g->w; x++) {
				char c = render_cell_char(g, x, y);

				rb_putn(b, &c, 1);
			}
		} else {
			half_line(b, g, mode, y);
		}
		rb_puts(b, "\n");
	}
}

void render_cell(struct rbuf *b, const struct rgrid *g, int x, int y, int mode)
{
	int pal;
	char c;

	if (mode == RENDER_PLAIN) {
		c = render_cell_char(g, x, y);
		rb_putn(b, &c, 1);
		return;
	}
	pal = render_cell_pal(g, x, y);
	if (pal == PAL_EMPTY) {
		rb_puts(b, SGR_RESET " ");
		return;
	}
	render_sgr(b, mode, render_special(pal), 1);
	if (pal == PAL_GAP_LIGHT || pal == PAL_GAP_DARK)
		rb_puts(b, "\xe2\x95\xb1" SGR_RESET);   /* U+2571 hatch */
	else
		rb_puts(b, "\xe2\x96\x88" SGR_RESET);   /* U+2588 full block */
}

void render_num(char *buf, size_t len, double v)
{
	if (isnan(v))
		snprintf(buf, len, "nan");
	else if (isinf(v))
		snprintf(buf, len, v > 0 ? "inf" : "-inf");
	else
		snprintf(buf, len, "%.4g", v);
}

double render_log(double v)
{
	if (isnan(v) || isinf(v))
		return v;
	return v < 0 ? -log10(1 - v) : log10(1 + v);
}

double render_unlog(double v)
{
	return v < 0 ? 1 - pow(10, -v) : pow(10, v) - 1;
}

void render_legend(struct rbuf *b, const struct rgrid *g, int mode)
{
	static const int sp[] = { PAL_NAN, PAL_POSINF, PAL_NEGINF, PAL_GAP_LIGHT };
	static const char *const names[] = { "NaN", "+Inf", "-Inf", "gap" };
	static const char chars[] = { CH_NAN, CH_POSINF, CH_NEGINF, CH_GAP };
	char lo[32], hi[32];
	int i;

	render_num(lo, sizeof(lo), g->log ? render_unlog(g->lo) : g->lo);
	render_num(hi, sizeof(hi), g->log ? render_unlog(g->hi) : g->hi);
	rb_printf(b, "Legend: %s ", lo);
	if (mode == RENDER_PLAIN) {
		rb_puts(b, RAMP_CHARS);
	} else {
		for (i = 0; i < 16; i++) {
			render_sgr(b, mode, render_colour(i * (RENDER_LEVELS - 1) / 15), 1);
			rb_puts(b, "\xe2\x96\x88");
		}
		rb_puts(b, SGR_RESET);
	}
	rb_printf(b, " %s%s", hi, g->log ? " (log scale)" : "");
	for (i = 0; i < 4; i++) {
		if (mode == RENDER_PLAIN) {
			rb_printf(b, "  %c %s", chars[i], names[i]);
		} else {
			rb_puts(b, "  ");
			render_sgr(b, mode, render_special(sp[i]), 1);
			rb_printf(b, "%s" SGR_RESET " %s", i == 3 ? "\xe2\x95\xb1" :
				  "\xe2\x96\x88", names[i]);
		}
	}
	rb_puts(b, "\n");
}
