/*
 * render.h -- text and picture rendering for tmdb's views (view*.c, cmd-heatmap.c, ...).
 *
 * The views build a grid of cells (a value in [0, 1] on the colour scale, or
 * NaN, +Inf, -Inf, a gap, or nothing) and hand it to one of three renderers:
 * plain characters (colour off), Unicode half-blocks with 256 or 24-bit
 * colour; picture.c draws the same grid with the same colour map as PNG,
 * SVG or PDF, so a picture and a plain render of one tensor agree cell for
 * cell (the transcript tests check exactly that).  Nothing here knows about sessions
 * or traces: output goes into a growable string buffer that the caller
 * prints once through tm_out().
 */
#ifndef TMDB_RENDER_H
#define TMDB_RENDER_H

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------- strings */

struct rbuf {
	char *p;
	size_t len, cap;
	int oom;                /* a failed allocation: p holds what fitted */
};

void rb_init(struct rbuf *b);
void rb_free(struct rbuf *b);
void rb_puts(struct rbuf *b, const char *str);
void rb_putn(struct rbuf *b, const char *str, size_t n);
void rb_printf(struct rbuf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Pads with blanks to a display width counted in characters, not bytes. */
void rb_pad(struct rbuf *b, size_t from, size_t width);

/* ------------------------------------------------------------- colour */

enum render_mode {
	RENDER_PLAIN = 0,       /* characters only, no escape codes */
	RENDER_256,             /* xterm 256-colour palette */
	RENDER_24BIT            /* direct RGB */
};

struct rgb {
	uint8_t r, g, b;
};

/*
 * Cell kinds.  Values are quantised to RENDER_LEVELS steps so that a PNG
 * palette index, a colour and a plain character all name the same level.
 */
enum cell_kind {
	CELL_EMPTY = 0,         /* no data (not recorded, not yet run) */
	CELL_VAL,
	CELL_NAN,
	CELL_POSINF,
	CELL_NEGINF,
	CELL_GAP                /* lost to a gap: hatched, never interpolated */
};

#define RENDER_LEVELS 250
/* PNG palette indices past the value levels. */
#define PAL_NAN 250
#define PAL_POSINF 251
#define PAL_NEGINF 252
#define PAL_GAP_LIGHT 253
#define PAL_GAP_DARK 254
#define PAL_EMPTY 255

/* The plain-text ramp, darkest (lowest) first, and the special characters. */
#define RAMP_CHARS ".:-=+*#%@"
#define CH_NAN '!'
#define CH_POSINF '^'
#define CH_NEGINF 'v'
#define CH_GAP '/'
#define CH_EMPTY ' '

struct rgrid {
	int w, h;
	uint8_t *kind;          /* enum cell_kind, row-major */
	uint8_t *level;         /* 0..RENDER_LEVELS-1 for CELL_VAL */
	double lo, hi;          /* the value range the levels span */
	int log;                /* values went through render_log() */
};

int rgrid_init(struct rgrid *g, int w, int h);
void rgrid_free(struct rgrid *g);
/* Quantises v in [lo, hi] (set in g) into the cell at (x, y). */
void rgrid_set(struct rgrid *g, int x, int y, double v);
void rgrid_set_kind(struct rgrid *g, int x, int y, int kind);

/* The colour of a level on the map (viridis), and of the special kinds. */
struct rgb render_colour(int level);
struct rgb render_special(int pal);
/* The palette index of a cell: its level or a PAL_* value. */
int render_cell_pal(const struct rgrid *g, int x, int y);
char render_cell_char(const struct rgrid *g, int x, int y);

/* SGR escape for a colour as foreground (fg = 1) or background. */
void render_sgr(struct rbuf *b, int mode, struct rgb c, int fg);
#define SGR_RESET "\033[0m"

/*
 * Draws the grid: plain gives one character per cell and row; the colour
 * modes put two rows in one line of half-blocks.  Each line starts with
 * indent and ends with a newline.
 */
void render_grid(struct rbuf *b, const struct rgrid *g, int mode,
		 const char *indent);
/* One cell as a full-width block (rows with labels: heatmap over steps). */
void render_cell(struct rbuf *b, const struct rgrid *g, int x, int y, int mode);
/* "range [lo, hi]" with the ramp and the special kinds, one line. */
void render_legend(struct rbuf *b, const struct rgrid *g, int mode);

/* The -log scale: sign(v) * log10(1 + |v|), and back. */
double render_log(double v);
double render_unlog(double v);

/* A number in at most about 8 characters ("1.234e+05", "-0.5"). */
void render_num(char *buf, size_t len, double v);

#endif /* TMDB_RENDER_H */
