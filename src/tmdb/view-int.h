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

/* ------------------------------------------------------------- view.c */

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
double view_elem(const struct tm_tensor *t, uint64_t i);
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

int view_stat_from(const char *name);
void view_stat_names(char *buf, size_t len);
int view_parse_sterm(struct tm_session *s, const char *text, int need_one,
		     struct sterm *st);
int view_parse_range(struct tm_session *s, const char *p, uint64_t *a,
		     uint64_t *b);
void view_series_free(struct series *sr);
int view_scan_series(struct tm_session *s, const struct sterm *st,
		     uint64_t a, uint64_t b, struct series *sr);
void view_range_note(struct rbuf *out, uint64_t a, uint64_t b,
		     const struct series *sr);
int view_axis_gap(int w, uint64_t first);
void view_cell_merge(uint8_t *kind, double *val, int k, double v);
const char *view_stat_label(const struct sterm *st);

#endif /* TMDB_VIEW_INT_H */
