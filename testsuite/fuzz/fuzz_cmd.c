/*
 * fuzz_cmd.c -- libFuzzer target for tmdb's command lines against a
 * recorded trace: the CLI parser, every command's argument parsing and the
 * evaluation they do (print, printf, goto, find, break ... if, x, info,
 * frame, list, display, plot, heatmap ...), as a user or a command file
 * could type them.
 *
 * Input: up to 16 lines, run by one fresh session over a small trace this
 * target writes once (events with stats, a gap, an annotation, a crash),
 * each with tm_execute as the CLI runs a typed line.  Commands that reach outside
 * the session -- start or attach a process, read or write files (save, set
 * logging), quit, run other lines (define, commands, if, while, thread and
 * inferior apply) -- are skipped, so that
 * an input can neither escape nor loop.  Properties: no crash, no sanitizer
 * report, no hang (libFuzzer's -timeout), and the session frees cleanly.
 * Built with standalone.c it replays corpus/cmd in `make check`.
 */
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tmdb.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char trace[256];

static const char *const blocked[] = {
	"run", "attach", "target", "detach", "kill", "file", "source", "record",
	"quit", "tui", "layout", "while", "if", "define", "document", "commands",
	"shell", "cd", "capture", "level", "save", "start", "thread", NULL
};

static void sink(struct tm_session *s, int is_err, const char *text)
{
	(void)s;
	(void)is_err;
	(void)text;
}

static void add_node(tm_writer *w, const char *addr, uint32_t parent, uint32_t depth)
{
	struct tm_node n;
	uint32_t id;

	memset(&n, 0, sizeof(n));
	n.address = addr;
	n.type = depth ? "Linear" : "Net";
	n.parent = parent;
	n.depth = depth;
	n.file = "model.py";
	n.line = 10 + depth;
	tm_writer_node(w, &n, &id);
}

static void remove_trace(void)
{
	unlink(trace);
}

/* A small trace: 4 nodes, 6 steps of 8 events, a gap, an annotation, a crash. */
static int make_trace(void)
{
	const char *dir = getenv("TMPDIR");
	struct tm_run_meta meta;
	tm_writer *w;
	uint64_t seq = 0, step;
	int fd;

	snprintf(trace, sizeof(trace), "%s/fuzz-cmd-XXXXXX", dir && *dir ? dir : "/tmp");
	fd = mkstemp(trace);
	if (fd < 0)
		return -1;
	close(fd);
	if (tm_writer_open(trace, NULL, &w))
		return -1;
	memset(&meta, 0, sizeof(meta));
	meta.probe_kind = "synthetic";
	meta.default_level = 2;
	meta.rank = -1;
	tm_writer_meta(w, &meta);
	add_node(w, "model", TM_NODE_NONE, 0);
	add_node(w, "model.fc1", 0, 1);
	add_node(w, "model.act", 0, 1);
	add_node(w, "model.fc2", 0, 1);
	for (step = 0; step < 6; step++) {
		static const uint8_t nodes[8] = { 0, 1, 1, 2, 2, 3, 3, 0 };
		const char *req[2] = { "cmpl-1", "cmpl-2" };
		struct tm_annot an;
		int i;

		memset(&an, 0, sizeof(an));
		an.seq = seq;
		an.step = step;
		an.key = "request";
		an.count = 2;
		an.nvalues = 2;
		an.values = req;
		tm_writer_annot(w, &an);
		if (step == 3) {
			struct tm_gap g = { seq, seq + 7, 8, TM_GAP_BACKPRESSURE, seq * 1000, step };

			tm_writer_gap(w, &g);
			seq += 8;
			continue;
		}
		for (i = 0; i < 8; i++, seq++) {
			struct tm_event e;
			struct tm_tensor t;

			memset(&e, 0, sizeof(e));
			memset(&t, 0, sizeof(t));
			e.seq = seq;
			e.step = step;
			e.node = nodes[i];
			e.call = 1;
			e.kind = (i == 0 || i == 1 || i == 3 || i == 5) ? TM_EV_ENTER : TM_EV_EXIT;
			e.phase = TM_PHASE_FWD;
			e.level = 2;
			e.time_ns = seq * 1000 + 1;
			e.start_ns = seq * 1000;
			e.end_ns = e.kind == TM_EV_EXIT ? e.time_ns : 0;
			t.slot.kind = e.kind == TM_EV_ENTER ? TM_SLOT_IN : TM_SLOT_OUT;
			t.dtype = TM_DT_F32;
			t.rank = 2;
			t.shape[0] = 2;
			t.shape[1] = 3;
			t.have = TM_STATS_L1_MASK;
			t.stat[TM_STAT_NUMEL] = 6;
			t.stat[TM_STAT_NAN_COUNT] = step == 5 && nodes[i] == 3 ? 2 : 0;
			t.stat[TM_STAT_MIN] = -1.0 * (double)step;
			t.stat[TM_STAT_MAX] = 2.0 * (double)step;
			t.stat[TM_STAT_MEAN] = 0.5;
			t.stat[TM_STAT_ABS_MAX] = 2.0 * (double)step;
			t.stat[TM_STAT_L2] = 1.5;
			e.ntensors = 1;
			e.tensors = &t;
			tm_writer_event(w, &e);
		}
	}
	{
		struct tm_crash c;

		memset(&c, 0, sizeof(c));
		c.seq = seq - 1;
		c.step = 5;
		c.time_ns = seq * 1000;
		c.signo = 11;
		c.node = 4;
		tm_writer_crash(w, &c);
	}
	if (tm_writer_close(w))
		return -1;
	atexit(remove_trace);
	return 0;
}

/* 1 if the line's command may run here. */
static int allowed(struct tm_session *s, const char *line)
{
	char word[64];
	const struct cmd_entry *c;
	struct ucmd *u = NULL;
	size_t n, i;

	/* the word as tm_execute takes it (cmd.c word_len) */
	line = tm_skip_ws(line);
	if (*line == '!' || *line == '|')
		return 0;
	for (n = 0; line[n] && (isalnum((unsigned char)line[n]) || line[n] == '-' ||
				line[n] == '_' || line[n] == '.'); n++)
		;
	if (!n || n >= sizeof(word))
		return 1;
	memcpy(word, line, n);
	word[n] = 0;
	c = tm_cmd_lookup(s, word, 1, &u);
	if (u)
		return 0;
	for (i = 0; c && blocked[i]; i++)
		if (!strcmp(c->name, blocked[i]))
			return 0;
	/* inferior apply runs other lines; set logging writes a file */
	line = tm_skip_ws(line + n);
	if (c && ((!strcmp(c->name, "inferior") && !strncmp(line, "apply", 5)) ||
		  (!strcmp(c->name, "set") && !strncmp(line, "log", 3))))
		return 0;
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready = -1;
	struct tm_session *s;
	char *text, *lines[16], *p;
	size_t n = 0, i;

	if (ready < 0)
		ready = make_trace() == 0;
	if (!ready || size > 4096)
		return 0;
	text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = 0;
	s = tm_session_new();
	if (!s) {
		free(text);
		return 0;
	}
	/* TM_FUZZ_VERBOSE=1 shows the session's output (reproducing a crash) */
	if (!getenv("TM_FUZZ_VERBOSE"))
		s->out_fn = sink;
	s->set.confirm = 0;
	s->set.pagination = 0;
	s->set.progress = 0;
	if (tm_session_load(s, trace) == TM_OK) {
		for (p = text; p && n < 16;) {
			char *nl = strchr(p, '\n');

			if (nl)
				*nl = 0;
			if (allowed(s, p))
				lines[n++] = p;
			p = nl ? nl + 1 : NULL;
		}
		/* each line on its own: an error does not end the input, as
		 * it ends a command file */
		for (i = 0; i < n && !s->quit; i++)
			tm_execute(s, lines[i], 0);
	}
	tm_session_free(s);
	free(text);
	return 0;
}
