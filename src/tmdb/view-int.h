/*
 * view-int.h -- what the view files (view.c, view-series.c, view-graph.c,
 * view-stats.c, cmd-heatmap.c, cmd-plot.c, cmd-x.c) share among
 * themselves; other tmdb files use view.h.
 */
#ifndef TMDB_VIEW_INT_H
#define TMDB_VIEW_INT_H

#include <stddef.h>
#include <stdint.h>

#include "tmdb.h"
#include "render.h"
#include "picture.h"

/* ------------------------------------------------------------- view.c */

/*
 * Options shared by the views, GDB style, before the operand:
 *   -color | -color256 | -nocolor   force the colour mode (else: a terminal
 *                                   without NO_COLOR gets colour)
 *   -width N, -height N             the most cells drawn across and down
 *   -png FILE, -svg FILE, -pdf FILE also write the picture (cairo)
 *   -scale N                        picture pixels a cell (default: fitted)
 *   -log                            colours on a log scale (counts)
 *   -unicode                        box-drawing characters even without
 *                                   colour (the TUI's panes, as the CLI)
 * An option after the operand is an error that says options come first
 * (GDB's convention), not a confusing complaint about the operand.
 */
struct vopts {
	int mode;               /* -1: decide from the terminal */
	int width, height;
	struct pic_files pic;
	int log;
	int unicode;            /* -unicode: box drawing without colour (TUI) */
};

/* Writes the pictures asked for, saying "Wrote FILE (W x H pixels)." */
int view_write_heatmap(struct tm_session *s, const struct vopts *o,
		       const struct pic_heatmap *hm);
int view_write_plot(struct tm_session *s, const struct vopts *o,
		    const struct pic_plot *pl);
int view_write_text(struct tm_session *s, const struct vopts *o,
		    const struct pic_text *tx);

/* Returns the rest of the arguments after the options, or NULL on an error
 * already reported. */
const char *view_parse_opts(struct tm_session *s, const char *p,
			    struct vopts *o, int def_w, int def_h);

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

size_t view_word_len(const char *p);
int view_word_eq(const char *p, size_t l, const char *w);
int view_parse_tref(struct tm_session *s, const char *text, struct tref *r);
const struct tm_tensor *view_get_tensor(struct tm_session *s,
					const struct tref *r,
					const struct tm_event **ev);
uint64_t view_tensor_numel(const struct tm_tensor *t);
int view_payload_ok(struct tm_session *s, const struct tref *r,
		    const struct tm_tensor *t);
void view_format_shape(const struct tm_tensor *t, char *buf, size_t len);
void view_where_line(struct tm_session *s, struct rbuf *b,
		     const struct tm_event *ev);
void view_flush_rb(struct tm_session *s, struct rbuf *b);
int view_resolve_slices(struct tm_session *s, const struct tref *r,
			const struct tm_tensor *t, struct sview *v);

/* ------------------------------------------------------------- view-series.c */

/* A stat of the nodes a pattern matches: [PATTERN:SLOT.]STAT, STAT "time". */
struct sterm {
	tm_address *a;
	struct tm_slot slot;
	int stat;               /* enum tm_stat, or -1: the call's duration */
	int evkind;
	int ref;                /* reldiff(TERM): the stat's relative difference
				 * from the reference's (cmd-compare.c) */
	char text[TM_ADDRESS_MAX + 64];
};

/*
 * One stat over steps, aggregated while it is read: column c holds steps
 * first + c * per .. first + (c + 1) * per - 1, at most maxcol columns, and
 * a cell keeps the worst of its samples (view_cell_merge).  Memory is rows
 * x maxcol cells whatever the number of steps, so a trace of any length
 * draws in the memory of a short one.
 */
struct series {
	uint64_t first, last;   /* steps seen (the axis), any set */
	uint64_t per;           /* steps a column */
	int maxcol, ncol;       /* ncol = (last - first) / per + 1 */
	uint32_t nn;            /* nodes in the table */
	uint8_t **kind;         /* per node: NULL (no value) or maxcol cells */
	double **val;
	uint8_t *gap;           /* per column: a gap record fell in it */
	uint64_t nsamp;         /* values read */
	uint32_t nrows;         /* nodes with a value */
	int any;
	int interrupted;
	int live;               /* a live run: the history so far, model held */
};

int view_stat_from(const char *name);
void view_stat_names(char *buf, size_t len);
int view_parse_sterm(struct tm_session *s, const char *text, int need_one,
		     struct sterm *st);
int view_parse_range(struct tm_session *s, const char *p, uint64_t *a,
		     uint64_t *b);
void view_series_free(struct series *sr);
int view_scan_series(struct tm_session *s, const struct sterm *st,
		     uint64_t a, uint64_t b, int maxcol, struct series *sr);
/* "45000 steps, 250 a column, worst of each" */
void view_series_what(struct rbuf *out, const struct series *sr);
/* The column of a step, or -1 off the axis. */
int view_series_col(const struct series *sr, uint64_t step);
void view_range_note(struct rbuf *out, uint64_t a, uint64_t b,
		     const struct series *sr);
int view_axis_gap(int w, uint64_t first);
void view_cell_merge(uint8_t *kind, double *val, int k, double v);
const char *view_stat_label(const struct sterm *st);

#endif /* TMDB_VIEW_INT_H */
