/*
 * view-display.c -- the views as `display` kinds: "display heatmap ...",
 * "display info graph", ... are drawn again after every stop, so that
 * scrubbing the playhead animates them.
 */
#include "config.h"

#include <string.h>

#include "tmdb.h"
#include "view.h"

/* The views `display` accepts, as the user types them. */
static const char *view_kind(const char *expr, const char **args)
{
	static const char *const kinds[] = {
		"info graph", "info stats", "heatmap", "plot", "x", NULL
	};
	size_t i, l;

	expr = tm_skip_ws(expr);
	for (i = 0; kinds[i]; i++) {
		l = strlen(kinds[i]);
		if (!strncmp(expr, kinds[i], l) &&
		    (!expr[l] || expr[l] == ' ' || expr[l] == '\t' ||
		     (expr[l] == '/' && kinds[i][0] == 'x'))) {
			*args = tm_skip_ws(expr + l);
			return kinds[i];
		}
	}
	return NULL;
}

int tm_view_is_display(const char *expr)
{
	const char *args;

	return view_kind(expr, &args) != NULL;
}

int tm_view_display(struct tm_session *s, int num, const char *expr)
{
	const char *args, *k = view_kind(expr, &args);

	if (!k)
		return -1;
	tm_out(s, "%d: %s\n", num, tm_skip_ws(expr));
	if (!strcmp(k, "info graph"))
		return tm_view_info_graph(s, args);
	if (!strcmp(k, "info stats"))
		return tm_view_info_stats(s, args);
	if (!strcmp(k, "heatmap"))
		return cmd_heatmap_entry.exec(s, args, 0);
	if (!strcmp(k, "plot"))
		return cmd_plot_entry.exec(s, args, 0);
	return cmd_x_entry.exec(s, args, 0);
}
