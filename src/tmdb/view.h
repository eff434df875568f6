/*
 * view.h -- the views of a trace (view*.c, cmd-heatmap.c, cmd-plot.c,
 * cmd-x.c) as other tmdb files call them: the `info graph` and `info stats`
 * sub-commands (cmd-info.c) and the view kinds of `display` (cmd-print.c),
 * re-rendered at every playhead move.
 */
#ifndef TMDB_VIEW_H
#define TMDB_VIEW_H

struct tm_session;

int tm_view_info_graph(struct tm_session *s, const char *args);
int tm_view_info_stats(struct tm_session *s, const char *args);

/* Is a display expression a view ("heatmap ...", "info graph", ...)? */
int tm_view_is_display(const char *expr);
/*
 * Shows display number num if expr is a view; returns -1 (and prints
 * nothing) when it is not one, so the caller evaluates it as an expression.
 */
int tm_view_display(struct tm_session *s, int num, const char *expr);

struct tm_slot;
/*
 * ADDRESS:SLOT of one node (as heatmap and x take it, without slices or
 * "tensor") as a node id and slot, for capture; -1 after an error message.
 */
int tm_view_tensor_ref(struct tm_session *s, const char *text, uint32_t *node,
		       struct tm_slot *slot);

#endif /* TMDB_VIEW_H */
