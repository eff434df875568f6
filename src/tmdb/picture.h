/*
 * picture.h -- the views as pictures: PNG, SVG and PDF files of a heatmap
 * or a plot, with titles, labelled axes, a colour scale and a legend.
 *
 * PNG and PDF are drawn with cairo.  SVG is written by picture.c itself
 * from the same drawing calls, because cairo's SVG surface turns text into
 * glyph outlines and an SVG's labels must stay text (searchable, copyable,
 * and the full node name in a <title> when a row label is shortened).
 * Text is measured with cairo for all three, so the layouts agree.
 */
#ifndef TMDB_PICTURE_H
#define TMDB_PICTURE_H

#include <stddef.h>
#include <stdint.h>

#include "render.h"

enum pic_format {
	PIC_PNG = 0,
	PIC_SVG,
	PIC_PDF,
	PIC__COUNT
};

/* The file of each format a command was asked for ("" = none). */
struct pic_files {
	char path[PIC__COUNT][1024];
	int cell;               /* -scale N: pixels a cell; 0: fitted */
};

int pic_any(const struct pic_files *f);
const char *pic_format_name(int fmt);

struct pic_heatmap {
	const char *title, *subtitle;
	const struct rgrid *g;
	const char *const *rowname;     /* g->h names; NULL: a numbered row axis */
	const char *xlabel, *ylabel;
	double x0, x1;          /* axis values at the left edge and right edge */
	double y0, y1;          /* the row axis when rowname is NULL */
	int pcol;               /* the playhead's column, -1: none */
	const char *pnote;      /* "step 4": said at the playhead mark */
	const char *scale_label;
};

struct pic_plot {
	const char *title, *subtitle, *xlabel, *ylabel;
	int n;                  /* columns */
	const double *x;        /* axis value at each column's centre */
	const double *y;        /* value (after -log if log) */
	const uint8_t *kind;    /* enum cell_kind */
	double x0, x1;
	int log;
	int playhead;           /* 1: mark pval */
	double pval;
	const char *pnote;
};

/* Lines of monospace text (info graph): the playhead's line banded, NaN/Inf
 * lines in NaN's colour, lines lost to a gap or not yet run in grey. */
struct pic_text {
	const char *title, *subtitle, *note;
	int n;
	const char *const *line;
	const uint8_t *cls;     /* 0 plain, 1 NaN/Inf, 2 gap, 3 not yet run */
	const uint8_t *cur;     /* the playhead's line */
};

/*
 * Writes the picture in format fmt to path.  Returns 0 and the size
 * (pixels for PNG, points otherwise), or -1 with a message in err.
 */
int picture_heatmap(const char *path, int fmt, const struct pic_heatmap *hm,
		    int cell, int *w, int *h, char *err, size_t errlen);
int picture_plot(const char *path, int fmt, const struct pic_plot *pl,
		 int *w, int *h, char *err, size_t errlen);
int picture_text(const char *path, int fmt, const struct pic_text *tx,
		 int *w, int *h, char *err, size_t errlen);

#endif /* TMDB_PICTURE_H */
