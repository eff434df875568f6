/*
 * cmd-tui.c -- the full-screen layout, as GDB's TUI: `tui enable` or
 * `layout [views|graph|heatmap|scalar]`.
 *
 * Panes show the views (view.c; architecture, heatmap, scalar: info
 * stats or a plot) above a log of command output and a command line.  After
 * every playhead move each pane runs its view command again, so scrubbing
 * with single keys animates them.  Pane contents are the views' plain text,
 * captured by pointing the session's output streams at a memory stream for
 * the duration of one command: the views need no TUI-specific code, and the
 * TUI needs no state outside this command's stack frame.
 *
 * Keys: s/Right step, S/Left reverse-step, n/Down next training step,
 * p/Up previous training step, g next gap, c continue (next breakpoint hit),
 * C reverse-continue, : or Enter a command line, q leave, Ctrl-L redraw.
 * On the command line, "heatmap ...", "plot ...", "info graph ..." and
 * "info stats ..." set what a pane shows; anything else runs as usual.
 */
#include "config.h"

#include <curses.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <langinfo.h>
#include <string.h>
#include <unistd.h>

#include "tmdb.h"

#define LOG_LINES 200

enum { P_GRAPH = 0, P_HEAT, P_SCALAR, P__COUNT };

struct pane {
	const char *title;
	char kind[16];          /* "info graph", "heatmap", "info stats", "plot" */
	char args[512];
	int shown;
	WINDOW *w;
};

struct tui {
	struct tm_session *s;
	struct pane p[P__COUNT];
	WINDOW *log, *status, *cmd;
	char *logl[LOG_LINES];
	size_t nlog;
	int quit;
};

/* Runs one command line with its output captured; returns malloc'd text. */
static char *run_captured(struct tm_session *s, const char *line)
{
	FILE *so = s->out, *se = s->err, *m;
	char *buf = NULL;
	size_t len = 0;
	int progress = s->set.progress;

	m = open_memstream(&buf, &len);
	if (!m)
		return NULL;
	s->out = s->err = m;
	s->set.progress = 0;
	tm_execute(s, line, 0);
	s->set.progress = progress;
	s->out = so;
	s->err = se;
	fclose(m);
	return buf;
}

static void log_add(struct tui *t, const char *text)
{
	const char *p = text;

	while (p && *p) {
		size_t l = strcspn(p, "\n");
		char *line = strndup(p, l);

		if (!line)
			return;
		if (t->nlog == LOG_LINES) {
			free(t->logl[0]);
			memmove(t->logl, t->logl + 1, (LOG_LINES - 1) * sizeof(char *));
			t->nlog--;
		}
		t->logl[t->nlog++] = line;
		p += l;
		if (*p == '\n')
			p++;
	}
}

static void run_logged(struct tui *t, const char *line)
{
	char *out = run_captured(t->s, line);

	log_add(t, out);
	free(out);
}

/* The bytes of the first cols characters of p[0..l) (UTF-8). */
static size_t cols_bytes(const char *p, size_t l, int cols)
{
	size_t i = 0;

	while (i < l && cols > 0) {
		i++;
		while (i < l && ((unsigned char)p[i] & 0xc0) == 0x80)
			i++;
		cols--;
	}
	return i;
}

/*
 * Text into a boxed window; a line wider than the pane goes on, indented,
 * on the next row instead of being cut.  The playhead's graph line in bold.
 */
static void draw_text(WINDOW *w, const char *title, const char *text)
{
	int h, wd, row = 1;
	const char *p = text;

	getmaxyx(w, h, wd);
	werase(w);
	box(w, 0, 0);
	mvwaddnstr(w, 0, 2, title, wd - 4);
	while (p && *p && row < h - 1) {
		size_t l = strcspn(p, "\n"), n;
		int cont = 0;

		if (*p == '>')
			wattron(w, A_BOLD);
		while (l && row < h - 1 && wd > 6) {
			n = cols_bytes(p, l, cont ? wd - 5 : wd - 2);
			/* break at a blank in the second half, not mid-word */
			if (n < l) {
				size_t b = n;

				while (b > n / 2 && p[b - 1] != ' ')
					b--;
				if (b > n / 2)
					n = b;
			}
			mvwaddnstr(w, row++, cont ? 4 : 1, p, (int)n);
			p += n;
			l -= n;
			cont = 1;
		}
		wattroff(w, A_BOLD);
		p += l;
		if (*p == '\n')
			p++;
	}
	wnoutrefresh(w);
}

/*
 * The panes draw the tree with the CLI's box-drawing characters where the
 * terminal's locale can show them (ncursesw prints other bytes as ~T...).
 */
static int utf8_locale(void)
{
	const char *cs = nl_langinfo(CODESET);

	return cs && (!strcmp(cs, "UTF-8") || !strcmp(cs, "utf8"));
}

static void draw_pane(struct tui *t, struct pane *pn)
{
	char line[768], title[600];
	char *text;
	int h, wd;

	if (!pn->shown || !pn->w)
		return;
	getmaxyx(pn->w, h, wd);
	if (!strcmp(pn->kind, "heatmap"))
		snprintf(line, sizeof(line), "heatmap -nocolor -width %d -height %d %s",
			 wd - 4 > 1 ? wd - 4 : 1, h - 6 > 1 ? h - 6 : 1, pn->args);
	else if (!strcmp(pn->kind, "plot"))
		snprintf(line, sizeof(line), "plot -nocolor -width %d -height %d %s",
			 wd - 16 > 1 ? wd - 16 : 1, h - 8 > 3 ? h - 8 : 3, pn->args);
	else
		snprintf(line, sizeof(line), "%s -nocolor%s %s", pn->kind,
			 utf8_locale() ? " -unicode" : "", pn->args);
	text = run_captured(t->s, line);
	snprintf(title, sizeof(title), " %s: %s %s ", pn->title, pn->kind, pn->args);
	draw_text(pn->w, title, text ? text : "");
	free(text);
}

static void draw_status(struct tui *t)
{
	struct tm_session *s = t->s;
	char buf[512];
	int wd = getmaxx(t->status);

	if (s->have_cur)
		snprintf(buf, sizeof(buf), " step %" PRIu64 " %s seq %" PRIu64 " %s of %s"
			 "   [s/S step  n/p train step  g gap  c/C break  : cmd  q quit]",
			 s->cur.step, tm_phase_name(s->cur.phase), s->cur.seq,
			 tm_event_kind_name(s->cur.kind), tm_node_name(s, s->cur.node));
	else
		snprintf(buf, sizeof(buf), " not started   [s step  n next training "
			 "step  g gap  c break  : cmd  q quit]");
	werase(t->status);
	wattron(t->status, A_REVERSE);
	mvwaddnstr(t->status, 0, 0, buf, wd);
	for (int x = (int)strlen(buf); x < wd; x++)
		waddch(t->status, ' ');
	wattroff(t->status, A_REVERSE);
	wnoutrefresh(t->status);
}

static void draw_log(struct tui *t)
{
	int h, wd, row;
	size_t first;

	getmaxyx(t->log, h, wd);
	werase(t->log);
	first = t->nlog > (size_t)h ? t->nlog - (size_t)h : 0;
	for (row = 0; first + (size_t)row < t->nlog && row < h; row++)
		mvwaddnstr(t->log, row, 0, t->logl[first + (size_t)row], wd);
	wnoutrefresh(t->log);
}

static void free_windows(struct tui *t)
{
	int i;

	for (i = 0; i < P__COUNT; i++) {
		if (t->p[i].w)
			delwin(t->p[i].w);
		t->p[i].w = NULL;
	}
	if (t->log)
		delwin(t->log);
	if (t->status)
		delwin(t->status);
	if (t->cmd)
		delwin(t->cmd);
	t->log = t->status = t->cmd = NULL;
}

/*
 * Panes on top (graph on the left, heatmap over scalar on the right, or
 * one pane alone), then the log, the status line and the command line.
 */
static void layout(struct tui *t)
{
	int top = LINES - 9, left, right, nright;

	free_windows(t);
	if (top < 6)
		top = 6;
	nright = t->p[P_HEAT].shown + t->p[P_SCALAR].shown;
	left = t->p[P_GRAPH].shown ? (nright ? COLS / 2 : COLS) : 0;
	right = COLS - left;
	if (t->p[P_GRAPH].shown)
		t->p[P_GRAPH].w = newwin(top, left, 0, 0);
	if (t->p[P_HEAT].shown)
		t->p[P_HEAT].w = newwin(nright == 2 ? top / 2 : top, right, 0, left);
	if (t->p[P_SCALAR].shown)
		t->p[P_SCALAR].w = newwin(nright == 2 ? top - top / 2 : top, right,
					  nright == 2 ? top / 2 : 0, left);
	t->log = newwin(LINES - top - 2 > 1 ? LINES - top - 2 : 1, COLS, top, 0);
	t->status = newwin(1, COLS, LINES - 2, 0);
	t->cmd = newwin(1, COLS, LINES - 1, 0);
	keypad(t->cmd, TRUE);
}

static void redraw(struct tui *t)
{
	int i;

	for (i = 0; i < P__COUNT; i++)
		draw_pane(t, &t->p[i]);
	draw_log(t);
	draw_status(t);
	werase(t->cmd);
	wnoutrefresh(t->cmd);
	doupdate();
}

/* The next gap after the playhead: the playhead goes to its first event after. */
static void next_gap(struct tui *t)
{
	struct tm_session *s = t->s;
	struct tm_record rec;
	char line[64];
	int err, found = 0;
	uint64_t to = 0;

	err = s->have_cur ? s->probe->ops->seek(s->probe, TM_SEEK_SEQ, s->cur.seq + 1) :
			    s->probe->ops->seek(s->probe, TM_SEEK_START, 0);
	while (err == TM_OK && !tm_interrupted) {
		err = s->probe->ops->next_event(s->probe, TM_DIR_FWD, &rec);
		if (err == TM_OK && rec.type == TM_REC_GAP &&
		    (!s->have_cur || rec.u.gap.first_seq > s->cur.seq)) {
			found = 1;
			to = rec.u.gap.last_seq + 1;
			break;
		}
	}
	tm_cursor_restore(s);
	if (!found) {
		log_add(t, "No gap after the playhead.");
		return;
	}
	snprintf(line, sizeof(line), "goto seq %" PRIu64, to);
	run_logged(t, line);
}

/* A pane's view set from the command line; 0 if line is not a view. */
static int set_pane(struct tui *t, const char *line)
{
	static const struct { const char *kind; int pane; } views[] = {
		{ "info graph", P_GRAPH }, { "heatmap", P_HEAT },
		{ "info stats", P_SCALAR }, { "plot", P_SCALAR }
	};
	size_t i, l;

	for (i = 0; i < sizeof(views) / sizeof(views[0]); i++) {
		struct pane *pn = &t->p[views[i].pane];

		l = strlen(views[i].kind);
		if (strncmp(line, views[i].kind, l) || (line[l] && line[l] != ' '))
			continue;
		snprintf(pn->kind, sizeof(pn->kind), "%s", views[i].kind);
		snprintf(pn->args, sizeof(pn->args), "%s", tm_skip_ws(line + l));
		if (!pn->shown) {
			pn->shown = 1;
			layout(t);
		}
		return 1;
	}
	return 0;
}

/* A line typed at the bottom; Escape abandons it. */
static int read_cmdline(struct tui *t, char *buf, size_t len)
{
	size_t n = 0;
	int ch;

	buf[0] = 0;
	curs_set(1);
	for (;;) {
		werase(t->cmd);
		mvwprintw(t->cmd, 0, 0, "(tmdb) %s", buf);
		wrefresh(t->cmd);
		ch = wgetch(t->cmd);
		if (ch == '\n' || ch == '\r' || ch == KEY_ENTER)
			break;
		if (ch == 27) {
			n = 0;
			buf[0] = 0;
			break;
		}
		if ((ch == KEY_BACKSPACE || ch == 127 || ch == 8) && n > 0) {
			buf[--n] = 0;
			continue;
		}
		if (ch >= 32 && ch < 127 && n + 1 < len) {
			buf[n++] = (char)ch;
			buf[n] = 0;
		}
	}
	curs_set(0);
	return (int)n;
}

static void command_line(struct tui *t)
{
	char line[512], echo[600];
	char *p;

	if (!read_cmdline(t, line, sizeof(line)))
		return;
	p = tm_strip(line);
	snprintf(echo, sizeof(echo), "(tmdb) %s", p);
	log_add(t, echo);
	if (!strcmp(p, "q") || !strcmp(p, "quit") || !strcmp(p, "tui disable")) {
		t->quit = 1;
		return;
	}
	if (set_pane(t, p))
		return;
	run_logged(t, p);
}

static void key(struct tui *t, int ch)
{
	struct tm_session *s = t->s;
	char line[64];

	switch (ch) {
	case 's': case KEY_RIGHT:
		run_logged(t, "step");
		break;
	case 'S': case KEY_LEFT:
		run_logged(t, "reverse-step");
		break;
	case 'n': case KEY_DOWN:
		snprintf(line, sizeof(line), "goto step %" PRIu64,
			 s->have_cur ? s->cur.step + 1 : 0);
		run_logged(t, line);
		break;
	case 'p': case KEY_UP:
		if (s->have_cur && s->cur.step > 0) {
			snprintf(line, sizeof(line), "goto step %" PRIu64, s->cur.step - 1);
			run_logged(t, line);
		}
		break;
	case 'g':
		next_gap(t);
		break;
	case 'c':
		run_logged(t, "continue");
		break;
	case 'C':
		run_logged(t, "reverse-continue");
		break;
	case ':': case '\n': case '\r': case KEY_ENTER:
		command_line(t);
		break;
	case 'q':
		t->quit = 1;
		break;
	case KEY_RESIZE:
		layout(t);
		break;
	case 12:        /* Ctrl-L */
		clearok(curscr, TRUE);
		break;
	default:
		break;
	}
}

static int tui_run(struct tm_session *s, const char *name)
{
	struct tui t;
	int i;

	if (!isatty(0) || !s->out || !isatty(fileno(s->out)) || s->out_fn) {
		tm_error(s, "Cannot enable the TUI when output is not a terminal");
		return -1;
	}
	memset(&t, 0, sizeof(t));
	t.s = s;
	t.p[P_GRAPH] = (struct pane){ "Architecture", "info graph", "", 1, NULL };
	t.p[P_HEAT] = (struct pane){ "Heatmap", "heatmap", "tensor", 1, NULL };
	t.p[P_SCALAR] = (struct pane){ "Scalar", "info stats", "tensor", 1, NULL };
	if (*name && strcmp(name, "views")) {
		int only = !strcmp(name, "graph") ? P_GRAPH : !strcmp(name, "heatmap") ?
			   P_HEAT : !strcmp(name, "scalar") ? P_SCALAR : -1;

		if (only < 0) {
			tm_error(s, "Unknown layout \"%s\": views, graph, heatmap or scalar.",
				 name);
			return -1;
		}
		for (i = 0; i < P__COUNT; i++)
			t.p[i].shown = i == only;
	}
	fflush(s->out);
	if (!initscr()) {
		tm_error(s, "Cannot initialise the terminal.");
		return -1;
	}
	cbreak();
	noecho();
	curs_set(0);
	keypad(stdscr, TRUE);
	layout(&t);
	log_add(&t, "tmdb TUI: s/S step, n/p training step, g next gap, "
		"c/C breakpoints, : command, q leave.");
	while (!t.quit && !s->quit) {
		redraw(&t);
		key(&t, wgetch(t.cmd));
	}
	free_windows(&t);
	endwin();
	for (i = 0; i < (int)t.nlog; i++)
		free(t.logl[i]);
	return 0;
}

static int cmd_tui_exec(struct tm_session *s, const char *args, int from_tty)
{
	(void)from_tty;
	if (!*args || !strcmp(args, "enable"))
		return tui_run(s, "");
	if (!strcmp(args, "disable"))
		return 0;       /* the TUI is modal: leaving it is "q" */
	tm_error(s, "Usage: tui enable|disable");
	return -1;
}

static int cmd_layout_exec(struct tm_session *s, const char *args, int from_tty)
{
	(void)from_tty;
	return tui_run(s, args);
}

const struct cmd_entry cmd_tui_entry = {
	.name = "tui", .usage = "tui enable|disable",
	.help = "Full-screen views that follow the playhead (q leaves).\n"
		"Panes: architecture, heatmap, scalar; keys scrub the playhead:\n"
		"s/S step and back, n/p next and previous training step, g next gap,\n"
		"c/C next and previous breakpoint hit, : a command line.  There,\n"
		"\"heatmap X\", \"plot X\", \"info graph X\", \"info stats X\" set a pane.",
	.exec = cmd_tui_exec, .flags = CMD_NEEDS_TRACE, .klass = "data",
};

const struct cmd_entry cmd_layout_entry = {
	.name = "layout", .usage = "layout [views|graph|heatmap|scalar]",
	.help = "Enter the full-screen layout with all views or one pane (see \"tui\").",
	.exec = cmd_layout_exec, .flags = CMD_NEEDS_TRACE, .klass = "data",
};
