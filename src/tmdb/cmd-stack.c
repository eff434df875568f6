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
	return tm_frame_at(s, k);
}

/* "f32[4,32,64] nan=12": a tensor as bt's argument list shows it. */
void tm_tensor_brief(const struct tm_tensor *t, char *buf, size_t len)
{
	size_t off;
	unsigned i;

#define APP(...) do { if (off < len) off += (size_t)snprintf(buf + off, len - off, __VA_ARGS__); } while (0)
	off = 0;
	APP("%s[", tm_dtype_name(t->dtype));
	for (i = 0; i < t->rank && i < TM_MAX_RANK; i++)
		APP("%s%" PRId64, i ? "," : "", t->shape[i]);
	APP("]");
	if ((t->have & TM_STAT_BIT(TM_STAT_NAN_COUNT)) && t->stat[TM_STAT_NAN_COUNT] > 0)
		APP(" nan=%.0f", t->stat[TM_STAT_NAN_COUNT]);
	if ((t->have & TM_STAT_BIT(TM_STAT_INF_COUNT)) && t->stat[TM_STAT_INF_COUNT] > 0)
		APP(" inf=%.0f", t->stat[TM_STAT_INF_COUNT]);
#undef APP
}

/* "in=f32[4,32,64] nan=12, in.1=i64[4,32]": a call's inputs, at most a few. */
static void frame_args(const struct frame *f, char *buf, size_t len)
{
	char slot[32], brief[160];
	size_t off = 0;
	uint32_t i;

	buf[0] = 0;
	for (i = 0; i < f->enter.ntensors && off < len; i++) {
		if (i == 4) {
			snprintf(buf + off, len - off, ", ...");
			return;
		}
		tm_slot_format(f->enter.tensors[i].slot, slot, sizeof(slot));
		tm_tensor_brief(&f->enter.tensors[i], brief, sizeof(brief));
		off += (size_t)snprintf(buf + off, len - off, "%s%s=%s", i ? ", " : "",
					slot, brief);
	}
}

static void print_frame(struct tm_session *s, size_t k)
{
	const struct frame *f = frame_at(s, k);
	const struct tm_node *n = f ? tm_nodetab_get(s->nodes, f->node) : NULL;
	char call[16] = "", args[512];

	if (!n)
		return;
	if (f->call > 1)
		snprintf(call, sizeof(call), "#%u", f->call);
	tm_out(s, "#%-2zu %s%s (%s)", k, n->address, call, n->type ? n->type : "?");
	/* GDB's argument list: the call's inputs as it entered */
	if (f->have_enter) {
		frame_args(f, args, sizeof(args));
		tm_out(s, " (%s)", args);
	}
	if (n->file && n->line)
		tm_out(s, " at %s:%u", n->file, n->line);
	tm_out(s, "\n");
}

/* One tensor as "NAME = {summary}" under indent (info args, bt full). */
static void print_named(struct tm_session *s, const char *indent, const char *name,
			const struct tm_tensor *t)
{
	char buf[4096];

	tm_tensor_format_as(t, NULL, s->set.print_pretty, buf, sizeof(buf));
	tm_out(s, "%s%s = %s\n", indent, name, buf);
}

/* The call's inputs; 0 when it has none recorded. */
static int show_args(struct tm_session *s, const struct frame *f, const char *indent)
{
	char slot[32];
	uint32_t i;

	if (!f->have_enter)
		return 0;
	for (i = 0; i < f->enter.ntensors; i++) {
		tm_slot_format(f->enter.tensors[i].slot, slot, sizeof(slot));
		print_named(s, indent, slot, &f->enter.tensors[i]);
	}
	return (int)f->enter.ntensors;
}

/* The call's outputs (at its EXIT), its parameters' latest values and the
 * ops it has run so far (with op events); returns how many were shown. */
static int show_locals(struct tm_session *s, const struct frame *f, const char *indent)
{
	const struct tm_node *n;
	struct tm_record rec;
	char slot[32], brief[160];
	uint32_t i, id, count;
	int shown = 0, err;

	if (f->returning && s->have_cur) {
		for (i = 0; i < s->cur.ntensors; i++) {
			tm_slot_format(s->cur.tensors[i].slot, slot, sizeof(slot));
			print_named(s, indent, slot, &s->cur.tensors[i]);
			shown++;
		}
	}
	count = s->nodes ? tm_nodetab_count(s->nodes) : 0;
	for (id = 0; id < count; id++) {
		const struct tm_tensor *t;
		const struct tm_event *ev = NULL;
		struct tm_slot data = { TM_SLOT_DATA, 0 };
		uint32_t reason = 0;
		const char *base;

		n = tm_nodetab_get(s->nodes, id);
		if (!n || n->parent != f->node || n->kind != TM_NODE_PARAM)
			continue;
		base = strrchr(n->address, '.');
		base = base ? base + 1 : n->address;
		t = s->env.lookup(s, id, data, 0, &ev, &reason);
		if (t) {
			print_named(s, indent, base, t);
		} else {
			struct tm_tql_value v;
			char why[96];

			memset(&v, 0, sizeof(v));
			v.unknown_reason = reason;
			tm_tql_format(&v, why, sizeof(why));
			tm_out(s, "%s%s = %s\n", indent, base, why);
		}
		shown++;
	}
	/* the ops of this call up to the playhead */
	if (f->enter_seq == UINT64_MAX || !s->probe || !s->have_cur)
		return shown;
	err = s->probe->ops->seek(s->probe, TM_SEEK_SEQ, f->enter_seq);
	while (err == TM_OK) {
		const struct tm_node *site;

		err = s->probe->ops->next_event(s->probe, TM_DIR_FWD, &rec);
		if (err != TM_OK || (rec.type == TM_REC_EVENT && rec.u.event.seq > s->cur.seq))
			break;
		if (rec.type != TM_REC_EVENT || rec.u.event.kind != TM_EV_OP ||
		    rec.u.event.call != f->call || rec.u.event.step != s->cur.step)
			continue;
		site = tm_op_site(s, &rec.u.event);
		if (!site || site->parent != f->node)
			continue;
		brief[0] = 0;
		if (rec.u.event.ntensors)
			tm_tensor_brief(&rec.u.event.tensors[0], brief, sizeof(brief));
		tm_out(s, "%s!%u %s = %s\n", indent, rec.u.event.op_index,
		       site->type ? site->type : "?", *brief ? brief : "<no tensor>");
		shown++;
	}
	tm_cursor_restore(s);
	return shown;
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
	const char *a = args;
	int full = 0;
	size_t k;

	/* bt full [N], bt -full [N]: each frame with its tensors */
	if (!strncmp(a, "full", 4) && (!a[4] || a[4] == ' ')) {
		full = 1;
		a = tm_skip_ws(a + 4);
	} else if (!strncmp(a, "-full", 5) && (!a[5] || a[5] == ' ')) {
		full = 1;
		a = tm_skip_ws(a + 5);
	}
	if (*a && tm_parse_uint(a, &limit)) {
		tm_error(s, "Invalid backtrace limit \"%s\".", args);
		return -1;
	}
	if (need_frames(s))
		return -1;
	for (k = 0; k < s->nframes && k < limit; k++) {
		print_frame(s, k);
		if (full) {
			const struct frame *f = frame_at(s, k);
			int n = show_args(s, f, "        ");

			n += show_locals(s, f, "        ");
			if (!n)
				tm_out(s, "        No locals.\n");
		}
	}
	if (k < s->nframes)
		tm_out(s, "(More stack frames follow...)\n");
	if (s->frames_gap)
		tm_out(s, "(A gap in this step: the stack may be incomplete.)\n");
	return 0;
}

const struct cmd_entry cmd_backtrace_entry = {
	.name = "backtrace", .alias = "bt where",
	.usage = "backtrace [full] [N]",
	.help = "Print the module call stack at the playhead, innermost call first.\n"
		"Each call shows its inputs as GDB shows arguments: slot=dtype[shape],\n"
		"with nan=N and inf=N where it holds non-finite values.\n"
		"\"bt full\": each frame with its tensors (info args and info locals).",
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

/* info args: the selected call's inputs. */
int tm_info_args(struct tm_session *s, const char *args)
{
	const struct frame *f;

	(void)args;
	if (need_frames(s))
		return -1;
	f = frame_at(s, s->sel_frame);
	if (!f->have_enter) {
		tm_out(s, f->enter_seq == UINT64_MAX && !f->returning ?
		       "No arguments: %s's call was not recorded entering (a backward "
		       "or parameter event has no call).\n" :
		       "No arguments recorded for %s.\n", tm_node_name(s, f->node));
		return 0;
	}
	if (!show_args(s, f, ""))
		tm_out(s, "No arguments.\n");
	return 0;
}

/* info locals: the selected call's outputs, parameters and ops. */
int tm_info_locals(struct tm_session *s, const char *args)
{
	(void)args;
	if (need_frames(s))
		return -1;
	if (!show_locals(s, frame_at(s, s->sel_frame), ""))
		tm_out(s, "No locals.\n");
	return 0;
}

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
