/*
 * cmd-stack.c -- the module call stack at the playhead and its source:
 * backtrace, frame, up, down, list.
 *
 * Frames are the module calls open at the playhead (ENTER seen, EXIT not
 * yet), innermost first as in GDB; at an EXIT event the returning call is
 * still frame 0.  session.c builds the stack lazily; here it is shown.
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tmdb.h"

static const struct frame *frame_at(struct tm_session *s, size_t k)
{
	return k < s->nframes ? &s->frames[s->nframes - 1 - k] : NULL;
}

static void print_frame(struct tm_session *s, size_t k)
{
	const struct frame *f = frame_at(s, k);
	const struct tm_node *n = f ? tm_nodetab_get(s->nodes, f->node) : NULL;
	char call[16] = "";

	if (!n)
		return;
	if (f->call > 1)
		snprintf(call, sizeof(call), "#%u", f->call);
	tm_out(s, "#%-2zu %s%s (%s)", k, n->address, call, n->type ? n->type : "?");
	if (n->file && n->line)
		tm_out(s, " at %s:%u", n->file, n->line);
	tm_out(s, "\n");
}

static int need_frames(struct tm_session *s)
{
	if (!s->have_cur) {
		tm_error(s, "No stack.");
		return -1;
	}
	if (tm_frames_compute(s) || !s->nframes) {
		tm_error(s, "No stack.");
		return -1;
	}
	return 0;
}

static int cmd_backtrace_exec(struct tm_session *s, const char *args, int from_tty)
{
	uint64_t limit = UINT64_MAX;
	size_t k, first = 0;
	int outer = args[0] == '-' && args[1] >= '0' && args[1] <= '9';

	/* bt -N: the outermost N frames, as GDB's */
	if (outer ? tm_parse_uint(args + 1, &limit) :
	    *args && strcmp(args, "full") && tm_parse_uint(args, &limit)) {
		tm_error(s, "Invalid backtrace limit \"%s\".", args);
		return -1;
	}
	if (need_frames(s))
		return -1;
	if (outer) {
		first = limit < s->nframes ? s->nframes - (size_t)limit : 0;
		limit = UINT64_MAX;
	}
	for (k = first; k < s->nframes && k - first < limit; k++)
		print_frame(s, k);
	if (k < s->nframes)
		tm_out(s, "(More stack frames follow...)\n");
	if (s->frames_gap)
		tm_out(s, "(A gap in this step: the stack may be incomplete.)\n");
	return 0;
}

const struct cmd_entry cmd_backtrace_entry = {
	.name = "backtrace", .alias = "bt where",
	.usage = "backtrace [N | -N]",
	.help = "Print the module call stack at the playhead, innermost call first.",
	.exec = cmd_backtrace_exec, .flags = CMD_NEEDS_TRACE, .klass = "stack",
};

/* Prints frame k with its source line (frame, up, down). */
static void show_selected(struct tm_session *s)
{
	const struct frame *f = frame_at(s, s->sel_frame);
	const struct tm_node *n = f ? tm_nodetab_get(s->nodes, f->node) : NULL;
	char *path;

	print_frame(s, s->sel_frame);
	if (!n || !n->file || !n->line)
		return;
	path = tm_resolve_source(s, n->file);
	if (path) {
		FILE *fp = fopen(path, "r");
		char buf[512];
		unsigned line = 0;

		while (fp && fgets(buf, sizeof(buf), fp)) {
			if (++line == n->line) {
				buf[strcspn(buf, "\n")] = 0;
				tm_out(s, "%u\t%s\n", line, buf);
				break;
			}
		}
		if (fp)
			fclose(fp);
	}
	free(s->list_file);
	s->list_file = strdup(n->file);
	s->list_first = (int)n->line;
	s->list_last = 0;
	free(path);
}

static int cmd_frame_exec(struct tm_session *s, const char *args, int from_tty)
{
	uint64_t k;

	if (need_frames(s))
		return -1;
	if (*args) {
		const char *a = args;

		if (!strncmp(a, "level ", 6))
			a += 6;
		if (tm_parse_uint(a, &k)) {
			tm_error(s, "Invalid frame number \"%s\".", args);
			return -1;
		}
		if (k >= s->nframes) {
			tm_error(s, "No frame at level %s.", args);
			return -1;
		}
		s->sel_frame = (size_t)k;
	}
	show_selected(s);
	return 0;
}

const struct cmd_entry cmd_frame_entry = {
	.name = "frame", .alias = "f",
	.usage = "frame [N]",
	.help = "Select and print frame N of the module call stack (default: print the selected one).",
	.exec = cmd_frame_exec, .flags = CMD_NEEDS_TRACE, .klass = "stack",
};

static int move_frame(struct tm_session *s, const char *args, int up)
{
	uint64_t n = 1;

	if (*args && tm_parse_uint(args, &n)) {
		tm_error(s, "Invalid count \"%s\".", args);
		return -1;
	}
	if (need_frames(s))
		return -1;
	if (up) {
		if (s->sel_frame + 1 >= s->nframes) {
			tm_error(s, "Initial frame selected; you cannot go up.");
			return -1;
		}
		s->sel_frame = n >= s->nframes - 1 - s->sel_frame ? s->nframes - 1 :
								   s->sel_frame + (size_t)n;
	} else {
		if (s->sel_frame == 0) {
			tm_error(s, "Bottom (innermost) frame selected; you cannot go down.");
			return -1;
		}
		s->sel_frame = n > s->sel_frame ? 0 : s->sel_frame - (size_t)n;
	}
	show_selected(s);
	return 0;
}

static int cmd_up_exec(struct tm_session *s, const char *args, int from_tty)
{
	return move_frame(s, args, 1);
}

const struct cmd_entry cmd_up_entry = {
	.name = "up", .usage = "up [N]",
	.help = "Select the frame N levels up (towards the root module).",
	.exec = cmd_up_exec, .flags = CMD_NEEDS_TRACE, .klass = "stack",
};

static int cmd_down_exec(struct tm_session *s, const char *args, int from_tty)
{
	return move_frame(s, args, 0);
}

const struct cmd_entry cmd_down_entry = {
	.name = "down", .alias = "do",
	.usage = "down [N]",
	.help = "Select the frame N levels down (towards the innermost call).",
	.exec = cmd_down_exec, .flags = CMD_NEEDS_TRACE, .klass = "stack",
};

/* ------------------------------------------------------------- list */

static int list_lines(struct tm_session *s, int first, int last)
{
	char *path = tm_resolve_source(s, s->list_file);
	char buf[1024];
	FILE *fp;
	int line = 0, shown = 0;

	if (!path) {
		tm_error(s, "%d\tin %s: No such file or directory.", first,
			 s->list_file);
		return -1;
	}
	fp = fopen(path, "r");
	free(path);
	if (!fp) {
		tm_error(s, "%s: cannot open.", s->list_file);
		return -1;
	}
	while (fgets(buf, sizeof(buf), fp)) {
		size_t l = strlen(buf);

		if (l && buf[l - 1] == '\n')
			buf[l - 1] = 0;
		else if (!feof(fp))
			continue;       /* long line: shown by its last piece */
		line++;
		if (line < first)
			continue;
		if (line > last)
			break;
		tm_out(s, "%d\t%s\n", line, buf);
		shown++;
	}
	fclose(fp);
	if (!shown) {
		tm_error(s, "Line number %d out of range; \"%s\" has %d lines.",
			 first, s->list_file, line);
		return -1;
	}
	s->list_first = first;
	s->list_last = first + shown - 1;
	return 0;
}

/* The source of the node at the playhead (or its nearest module). */
static int list_default(struct tm_session *s)
{
	const struct tm_node *n;
	int guard = 0;

	if (!s->have_cur || !s->nodes)
		return -1;
	n = tm_nodetab_get(s->nodes, s->cur.node);
	while (n && (!n->file || !n->line) && n->parent != TM_NODE_NONE &&
	       guard++ < 1000)
		n = tm_nodetab_get(s->nodes, n->parent);
	if (!n || !n->file || !n->line)
		return -1;
	free(s->list_file);
	s->list_file = strdup(n->file);
	s->list_first = (int)n->line;
	s->list_last = 0;
	return 0;
}

static int cmd_list_exec(struct tm_session *s, const char *args, int from_tty)
{
	int size = s->set.listsize > 0 ? s->set.listsize : 10;
	int center;
	uint64_t n;

	if (!*args) {
		if (!s->list_file && list_default(s)) {
			tm_error(s, "No source file for the current node.");
			return -1;
		}
		if (s->list_last)
			return list_lines(s, s->list_last + 1, s->list_last + size);
		center = s->list_first;
	} else if (!strcmp(args, "-")) {
		int first;

		if (!s->list_file) {
			tm_error(s, "No default source file.");
			return -1;
		}
		first = s->list_first - size;
		if (first < 1)
			first = 1;
		if (first >= s->list_first) {
			tm_error(s, "Already at the start of %s.", s->list_file);
			return -1;
		}
		return list_lines(s, first, s->list_first - 1);
	} else if (tm_parse_uint(args, &n) == 0) {
		if (!s->list_file && list_default(s)) {
			tm_error(s, "No default source file.");
			return -1;
		}
		center = (int)n;
	} else {
		const struct tm_node *nd = tm_session_node_text(s, args);
		const char *colon = strrchr(args, ':');

		if (!nd && colon && tm_parse_uint(colon + 1, &n) == 0) {
			free(s->list_file);
			s->list_file = strndup(args, (size_t)(colon - args));
			center = (int)n;
		} else if (!nd) {
			if (!s->nodes)
				return tm_need_trace(s);
			return tm_address_error(s, args);
		} else if (!nd->file || !nd->line) {
			tm_error(s, "No source location recorded for %s.", args);
			return -1;
		} else {
			free(s->list_file);
			s->list_file = strdup(nd->file);
			center = (int)nd->line;
		}
	}
	center -= size / 2;
	if (center < 1)
		center = 1;
	return list_lines(s, center, center + size - 1);
}

const struct cmd_entry cmd_list_entry = {
	.name = "list", .alias = "l",
	.usage = "list [NODE | LINE | FILE:LINE | -]",
	.help = "List the source of the current module's forward (or of NODE).\n"
		"Again with no argument: the next lines; \"list -\": the lines before.",
	.exec = cmd_list_exec, .klass = "files",
};
