/*
 * cmd-run.c -- moving the playhead: run, continue, step, next, finish,
 * until, the reverse-* commands, goto and find.
 *
 * Every movement is one scan loop (scan()) over probe records in one
 * direction with a predicate saying where to stop; breakpoints and
 * watchpoints are checked on the way.  The loop touches the event only
 * through the breakpoints' node bitmaps until something might fire, so a
 * `continue` over a big trace costs little more than reading it.  Gaps
 * crossed are reported; Ctrl-C stops at the event being looked at.
 */
#include "config.h"

#include <ctype.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tmdb.h"
#include "live.h"

/* Where a scan wants to stop: returns 1 to stop at ev. */
typedef int (*stop_fn)(struct tm_session *s, const struct tm_event *ev,
		       void *arg);

struct stop {
	int why;
	struct bp *bp;
	uint32_t focus;
	struct tm_val old, new_;   /* watchpoints */
	int signo;                 /* STOP_CRASH */
	struct tm_crash crash;     /* STOP_CRASH: the record (MI), its */
	char frames[16][160];      /* first frames copied: seeking reuses them */
	int finish;                /* finish reached the call's EXIT */
	int gap;                   /* STOP_BREAK: a catch gap at a gap record */
};

/* ------------------------------------------------------------- moving one record */

/*
 * The record after/before the playhead in direction dir.  The probe's cursor
 * may sit on either side of the playhead event, depending on the last move,
 * so the first move in a new direction skips over the playhead itself.
 */
static int move(struct tm_session *s, int dir, struct tm_record *rec)
{
	struct tm_probe *p = s->probe;
	int err;

	if (s->have_cur && (dir == TM_DIR_FWD) != s->cursor_after) {
		err = p->ops->next_event(p, dir, rec);
		if (err != TM_OK)
			return err;
		s->cursor_after = dir == TM_DIR_FWD;
	}
	err = p->ops->next_event(p, dir, rec);
	if (err == TM_OK || err == TM_ERR_END)
		s->cursor_after = dir == TM_DIR_FWD;
	return err;
}

/* Puts the playhead on the event with this seq (or the first after it). */
static int seek_playhead(struct tm_session *s, uint64_t seq)
{
	struct tm_record rec;
	int err;

	err = s->probe->ops->seek(s->probe, TM_SEEK_SEQ, seq);
	while (err == TM_OK) {
		err = s->probe->ops->next_event(s->probe, TM_DIR_FWD, &rec);
		if (err == TM_OK && rec.type == TM_REC_EVENT) {
			tm_playhead_set(s, &rec.u.event);
			s->cursor_after = 1;
			return 0;
		}
	}
	return -1;
}

/* After running off either end: the playhead goes to the last event seen. */
static void settle_at_end(struct tm_session *s, int dir)
{
	struct tm_record rec;
	int back = dir == TM_DIR_FWD ? TM_DIR_BWD : TM_DIR_FWD;

	while (s->probe->ops->next_event(s->probe, back, &rec) == TM_OK) {
		if (rec.type == TM_REC_EVENT) {
			tm_playhead_set(s, &rec.u.event);
			s->cursor_after = back == TM_DIR_FWD;
			return;
		}
	}
	tm_playhead_clear(s);
	s->probe->ops->seek(s->probe, TM_SEEK_START, 0);
}

/* ------------------------------------------------------------- watchpoints */

static int watch_check(struct tm_session *s, struct bp *b,
		       const struct tm_event *ev, struct stop *st)
{
	struct tm_val v;
	struct tm_tql_ctx ctx;

	if (b->watch_node_only && ev->node != b->watch_node)
		return 0;
	if (!b->wexpr || (!b->wexpr->simple && !b->wexpr->prog))
		return 0;       /* did not compile against this trace */
	memset(&v, 0, sizeof(v));
	if (tm_expr_eval(s, b->wexpr, &v))
		return 0;
	if (v.kind == VAL_SCALAR && v.v.type == TM_TQL_UNKNOWN) {
		tm_val_clear(&v);
		return 0;
	}
	if (b->have_old && tm_val_equal(&b->old, &v)) {
		tm_val_clear(&v);
		return 0;
	}
	if (b->core.cond) {
		tm_tql_ctx_init(s, &ctx, ev, NULL);
		if (tm_tql_test(b->core.cond, &ctx) <= 0) {
			tm_val_clear(&b->old);
			b->old = v;
			b->have_old = 1;
			return 0;
		}
	}
	st->why = STOP_WATCH;
	st->bp = b;
	if (b->have_old)
		tm_val_copy(&st->old, &b->old);
	else
		memset(&st->old, 0, sizeof(st->old));
	tm_val_copy(&st->new_, &v);
	tm_val_clear(&b->old);
	b->old = v;
	b->have_old = 1;
	return 1;
}

/* Breakpoints and watchpoints at one event; fills st for the first that fires. */
static int bps_check(struct tm_session *s, const struct tm_event *ev,
		     struct stop *st)
{
	struct bp *b;
	uint32_t focus;

	for (b = s->bps; b; b = b->next) {
		if (!b->enabled || b->catch_kind == TM_CATCH_GAP ||
		    b->catch_kind == TM_CATCH_SIGNAL)
			continue;       /* those stop at records (catch_record) */
		if (b->type == BP_WATCH) {
			if (watch_check(s, b, ev, st))
				return 1;
			continue;
		}
		if (!tm_bp_match(s, b, ev, &focus))
			continue;
		b->hits++;
		if (b->ignore) {
			b->ignore--;
			continue;
		}
		st->why = STOP_BREAK;
		st->bp = b;
		st->focus = focus;
		return 1;
	}
	return 0;
}

/*
 * catch gap / catch signal at a gap or crash record: the first enabled
 * one of kind whose signal (catch_arg) and condition agree fires.  The
 * condition sees the record's seq, step and time (and the crash's node
 * and phase) as an event's, without a tensor.
 */
static struct bp *catch_record(struct tm_session *s, int kind, const struct tm_record *rec)
{
	struct tm_event ev;
	struct tm_tql_ctx ctx;
	struct bp *b;

	memset(&ev, 0, sizeof(ev));
	ev.node = TM_NODE_NONE;
	if (rec->type == TM_REC_GAP) {
		ev.seq = rec->u.gap.first_seq;
		ev.step = rec->u.gap.step;
		ev.time_ns = rec->u.gap.time_ns;
	} else {
		ev.seq = rec->u.crash.seq;
		ev.step = rec->u.crash.step;
		ev.time_ns = rec->u.crash.time_ns;
		ev.node = rec->u.crash.node;
		ev.phase = rec->u.crash.phase;
	}
	for (b = s->bps; b; b = b->next) {
		if (!b->enabled || b->catch_kind != kind)
			continue;
		if (kind == TM_CATCH_SIGNAL && b->catch_arg &&
		    (!tm_signal_name(rec->u.crash.signo, NULL) ||
		     strcmp(b->catch_arg, tm_signal_name(rec->u.crash.signo, NULL))))
			continue;
		if (b->core.cond) {
			tm_tql_ctx_init(s, &ctx, &ev, NULL);
			if (tm_tql_test(b->core.cond, &ctx) <= 0)
				continue;
		}
		b->hits++;
		if (b->ignore) {
			b->ignore--;
			continue;
		}
		return b;
	}
	return NULL;
}

/* The signal's name, or "signal N" for one without a name. */
static const char *signal_name(int signo, char *buf, size_t len)
{
	const char *name = tm_signal_name(signo, NULL);

	if (name)
		return name;
	snprintf(buf, len, "signal %d", signo);
	return buf;
}

/* ------------------------------------------------------------- the scan loop */

/*
 * Moves in direction dir until fn says stop, a breakpoint fires (use_bps),
 * the trace ends, or Ctrl-C.  On return the playhead is where it stopped and
 * st says why.
 */
static int scan(struct tm_session *s, int dir, stop_fn fn, void *arg,
		int use_bps, struct stop *st)
{
	struct tm_record rec;
	unsigned gaps = 0, tick = 0;
	int err, first_intr = 0, rank = -1, have_last = 0;
	struct bp *cb, *gap_bp = NULL;  /* a catch gap stops at the next event */
	uint64_t last_seq = 0;          /* the last event read */

	memset(st, 0, sizeof(*st));
	/* step, next, finish move within the playhead's rank, as GDB steps
	 * the selected thread; breakpoints stop on any rank */
	if (fn && s->have_cur && s->probe->ops->rank_of)
		rank = tm_session_rank(s);
	st->focus = UINT32_MAX;
	if (dir == TM_DIR_BWD)
		tm_lookup_invalidate(s);
	/* A live model may run ahead between breakpoints (probe.h flow). */
	tm_live_flow(s, dir == TM_DIR_FWD && use_bps && !fn);
	if (dir == TM_DIR_FWD && s->on_resume)
		s->on_resume(s);
	for (;;) {
		err = move(s, dir, &rec);
		if (err == TM_ERR_END) {
			st->why = dir == TM_DIR_FWD ? STOP_END : STOP_START;
			s->scan_ev = NULL;
			settle_at_end(s, dir);
			if (gap_bp) {
				st->why = STOP_BREAK;
				st->bp = gap_bp;
				st->gap = 1;
			}
			break;
		}
		if (err == TM_ERR_AGAIN && s->have_cur) {
			/* Ctrl-C while a live model computed: the model is
			 * held right after the last event it made (a stop is a
			 * stop), and the playhead goes there. */
			s->scan_ev = NULL;
			seek_playhead(s, have_last ? last_seq : s->cur.seq);
			st->why = STOP_INTERRUPT;
			break;
		}
		if (err == TM_ERR_AGAIN && !first_intr) {
			/* Interrupted before the first event (MI's -exec-run
			 * then -exec-interrupt): there is nowhere to stay, so
			 * stop at the first event. */
			tm_interrupted = 0;
			first_intr = 1;
			continue;
		}
		if (err != TM_OK) {
			uint64_t back = s->have_cur ? s->cur.seq : 0;

			s->scan_ev = NULL;
			tm_live_flow(s, 0);
			tm_progress(s, 0, 1);
			tm_error(s, "Cannot read the trace: %s.\n"
				 "Use \"tmdb --recover %s\" if the file is damaged.",
				 s->probe->ops->detail(s->probe)[0] ?
				 s->probe->ops->detail(s->probe) : tm_strerror(err),
				 s->trace_path ? s->trace_path : "FILE");
			tm_lookup_invalidate(s);
			if (s->have_cur)
				seek_playhead(s, back);
			st->why = STOP_ERROR;
			return -1;
		}
		if (dir == TM_DIR_FWD) {
			if (s->nlk)
				tm_lookup_advance(s, &rec);
		} else if (s->nlk) {
			tm_lookup_invalidate(s);
		}
		if (rec.type == TM_REC_GAP) {
			cb = use_bps && s->bps ? catch_record(s, TM_CATCH_GAP, &rec) : NULL;
			if ((cb || !s->scan_quiet) && gaps++ < (unsigned)s->set.max_gap_lines) {
				tm_progress(s, 0, 1);
				tm_print_gap(s, &rec.u.gap, dir);
			}
			/* the stop is at the first event past the hole, so
			 * that continuing does not cross it again */
			if (cb && !gap_bp)
				gap_bp = cb;
			continue;
		}
		if (rec.type == TM_REC_CRASH) {
			struct tm_crash c = rec.u.crash;
			char sb[32];
			uint32_t k;

			s->scan_ev = NULL;
			tm_progress(s, 0, 1);
			tm_out(s, "\nProgram received signal %s at step %" PRIu64
			       " in %s.\n", signal_name(c.signo, sb, sizeof(sb)),
			       c.step, c.node == TM_NODE_NONE ? "?" :
			       tm_node_name(s, c.node));
			for (k = 0; k < c.nframes && k < TM_MAX_FRAMES; k++)
				if (c.frames[k])
					tm_out(s, "  #%u %s\n", k, c.frames[k]);
			st->why = STOP_CRASH;
			st->signo = c.signo;
			st->crash = c;
			for (k = 0; k < TM_MAX_FRAMES; k++) {
				st->crash.frames[k] = NULL;
				if (k < 16 && k < c.nframes && c.frames[k]) {
					snprintf(st->frames[k], sizeof(st->frames[k]),
						 "%s", c.frames[k]);
					st->crash.frames[k] = st->frames[k];
				}
			}
			st->crash.nframes = c.nframes < 16 ? c.nframes : 16;
			if (use_bps && s->bps)
				st->bp = catch_record(s, TM_CATCH_SIGNAL, &rec);
			seek_playhead(s, c.seq);
			break;
		}
		if (rec.type != TM_REC_EVENT)
			continue;
		have_last = 1;
		last_seq = rec.u.event.seq;
		if (gap_bp) {
			s->scan_ev = NULL;
			st->why = STOP_BREAK;
			st->bp = gap_bp;
			st->gap = 1;
			tm_playhead_set(s, &rec.u.event);
			break;
		}
		s->scan_ev = &rec.u.event;
		if ((++tick & 0xffff) == 0)
			tm_progress(s, rec.u.event.seq, 0);
		if (use_bps && s->bps && bps_check(s, &rec.u.event, st)) {
			s->scan_ev = NULL;
			tm_playhead_set(s, &rec.u.event);
			s->focus = st->focus == UINT32_MAX ? s->focus : st->focus;
			break;
		}
		if (fn && (rank < 0 || tm_event_rank(s, &rec.u.event) == rank) &&
		    fn(s, &rec.u.event, arg)) {
			s->scan_ev = NULL;
			st->why = STOP_STEP;
			tm_playhead_set(s, &rec.u.event);
			break;
		}
		if (tm_interrupted || first_intr) {
			s->scan_ev = NULL;
			st->why = STOP_INTERRUPT;
			tm_playhead_set(s, &rec.u.event);
			break;
		}
	}
	s->scan_ev = NULL;
	tm_live_flow(s, 0);
	tm_progress(s, 0, 1);
	if (gaps > (unsigned)s->set.max_gap_lines)
		tm_out(s, "(%u more gaps crossed)\n",
		       gaps - (unsigned)s->set.max_gap_lines);
	return 0;
}

/* ------------------------------------------------------------- reporting a stop */

static void queue_commands(struct tm_session *s, struct bp *b)
{
	size_t i, start = 0;

	tm_lines_free(s->pending, s->npending);
	s->pending = NULL;
	s->npending = 0;
	s->pending_silent = 0;
	if (!b->ncmds)
		return;
	if (!strcmp(b->cmds[0], "silent")) {
		s->pending_silent = 1;
		start = 1;
	}
	s->pending = calloc(b->ncmds, sizeof(char *));
	if (!s->pending)
		return;
	for (i = start; i < b->ncmds; i++)
		s->pending[s->npending++] = strdup(b->cmds[i]);
}

/*
 * Runs the commands of the breakpoint that stopped us.  A command that moves
 * the playhead again queues the next breakpoint's commands; they run here,
 * in a loop, not recursively.
 */
void tm_after_stop(struct tm_session *s)
{
	char **lines;
	size_t n;

	if (s->in_stop_cmds)
		return;
	s->in_stop_cmds = 1;
	while (s->npending && !s->quit && !tm_interrupted) {
		lines = s->pending;
		n = s->npending;
		s->pending = NULL;
		s->npending = 0;
		if (tm_execute_lines(s, lines, n)) {
			tm_lines_free(lines, n);
			break;
		}
		tm_lines_free(lines, n);
	}
	/* Ctrl-C between a breakpoint's commands: say where it left off,
	 * as a stop does (unless the stop it interrupted said so) */
	if (tm_interrupted && !s->intr_reported && !s->quit && s->have_cur) {
		s->intr_reported = 1;
		tm_out(s, "\nInterrupted.\n");
		tm_print_location(s, NULL);
		tm_print_source_line(s);
	}
	tm_lines_free(s->pending, s->npending);
	s->pending = NULL;
	s->npending = 0;
	s->in_stop_cmds = 0;
}

static void report(struct tm_session *s, struct stop *st)
{
	char buf[64], ob[2048], nb[2048];
	struct bp *b = st->bp;
	struct tm_stop ev;      /* the same stop, for s->on_stop (MI) */
	int silent = 0;

	memset(&ev, 0, sizeof(ev));
	ev.why = st->why;
	ev.finish = st->finish;
	ev.signo = st->signo;
	ev.crash = st->why == STOP_CRASH ? &st->crash : NULL;
	ev.old = &st->old;
	ev.new_ = &st->new_;
	if (b) {
		ev.bpnum = b->num;
		ev.bptype = b->type;
		ev.bpdisp = b->disp;
		snprintf(ev.where, sizeof(ev.where), "%s", b->where ? b->where : "");
	}
	if (b)
		queue_commands(s, b);
	silent = b && s->pending_silent;
	/* the end of a job's records is nobody's stop in particular */
	if (!silent && st->why != STOP_END && st->why != STOP_START)
		tm_inferior_note_switch(s);
	switch (st->why) {
	case STOP_BREAK:
		s->stopped_bp = b->num;
		if (!silent && b->catch_kind) {
			/* GDB: "Catchpoint 1 (exception thrown), ..." */
			snprintf(buf, sizeof(buf), "%s %d (%s), ",
				 b->disp == BP_DEL ? "Temporary catchpoint" : "Catchpoint",
				 b->num, b->catch_kind == TM_CATCH_EXCEPTION ? "exception raised" :
				 st->gap ? "gap" : tm_catch_kind_name(b->catch_kind));
			tm_out(s, "\n");
			tm_print_location(s, buf);
			tm_print_source_line(s);
		} else if (!silent) {
			snprintf(buf, sizeof(buf), "%s %d, ",
				 b->disp == BP_DEL ? "Temporary breakpoint" :
				 "Breakpoint", b->num);
			tm_out(s, "\n");
			tm_print_location(s, buf);
			tm_print_source_line(s);
		}
		if (b->disp == BP_DEL) {
			char num[16];

			snprintf(num, sizeof(num), "%d", b->num);
			cmd_delete_entry.exec(s, num, 0);
			b = NULL;
		} else if (b->disp == BP_DIS) {
			b->enabled = 0;
			b->disp = BP_KEEP;
		}
		break;
	case STOP_WATCH:
		s->stopped_bp = b->num;
		if (!silent) {
			if (st->old.kind == VAL_SCALAR && st->old.v.type == TM_TQL_UNKNOWN &&
			    !st->old.v.unknown_reason)
				snprintf(ob, sizeof(ob), "<unknown>");
			else
				tm_val_format(&st->old, ob, sizeof(ob));
			tm_val_format(&st->new_, nb, sizeof(nb));
			tm_out(s, "\nWatchpoint %d: %s\n\nOld value = %s\nNew value = %s\n",
			       b->num, b->where, ob, nb);
			tm_print_location(s, NULL);
			tm_print_source_line(s);
		}
		break;
	case STOP_END: {
		struct tm_probe_info pi;

		s->probe->ops->describe(s->probe, &pi);
		if (pi.summary && pi.summary->damaged)
			tm_out(s, "\nEnd of the readable trace: the file is damaged "
			       "after seq %" PRIu64 " (see \"tmdb --recover\").\n",
			       pi.summary->last_seq);
		else
			tm_out(s, "\nEnd of trace.\n");
		tm_print_location(s, NULL);
		tm_live_ended(s, 0);
		break;
	}
	case STOP_START:
		tm_out(s, "\nNo more reverse-execution history.\n");
		tm_print_location(s, NULL);
		tm_print_source_line(s);
		break;
	case STOP_INTERRUPT:
		s->intr_reported = 1;
		tm_out(s, "\nInterrupted.\n");
		tm_print_location(s, NULL);
		tm_print_source_line(s);
		break;
	case STOP_CRASH:
		if (b) {
			/* catch signal: counted, its commands run */
			s->stopped_bp = b->num;
			snprintf(buf, sizeof(buf), "%s %d (signal %s), ",
				 b->disp == BP_DEL ? "Temporary catchpoint" : "Catchpoint",
				 b->num, tm_signal_name(st->signo, NULL) ?
				 tm_signal_name(st->signo, NULL) : "?");
			if (!silent)
				tm_print_location(s, buf);
		} else {
			tm_print_location(s, NULL);
		}
		if (!silent || !b)
			tm_print_source_line(s);
		if (b && b->disp == BP_DEL) {
			char num[16];

			snprintf(num, sizeof(num), "%d", b->num);
			cmd_delete_entry.exec(s, num, 0);
			b = NULL;
		}
		tm_live_ended(s, 1);
		break;
	case STOP_STEP:
		tm_print_location(s, NULL);
		tm_print_source_line(s);
		break;
	default:
		break;
	}
	if (s->on_stop)
		s->on_stop(s, &ev);
	tm_val_clear(&st->old);
	tm_val_clear(&st->new_);
	if (s->have_cur)
		tm_displays_show(s);
	tm_after_stop(s);
}

/* ------------------------------------------------------------- run, continue */

static int start_over(struct tm_session *s)
{
	tm_playhead_clear(s);
	if (s->probe->ops->seek(s->probe, TM_SEEK_START, 0) != TM_OK) {
		tm_error(s, "Cannot rewind the trace: %s.",
			 s->probe->ops->detail(s->probe));
		return -1;
	}
	return 0;
}

static int run_to_stop(struct tm_session *s, int dir, stop_fn fn, void *arg,
		       int use_bps)
{
	struct stop st;

	if (scan(s, dir, fn, arg, use_bps, &st))
		return -1;
	report(s, &st);
	return 0;
}

static int cmd_run_exec(struct tm_session *s, const char *args, int from_tty)
{
	int rc;

	/* A program to start (tmdb --args, file PROG): live.h. */
	if (tm_live_run(s, args, from_tty, &rc))
		return rc;
	if (start_over(s))
		return -1;
	return run_to_stop(s, TM_DIR_FWD, NULL, NULL, 1);
}

/*
 * start's temporary breakpoint: the entry of the model's outermost module
 * (what main is to GDB's start), once the nodes are known.  0, or -1 when
 * the nodes have no root module.
 */
int tm_start_tbreak(struct tm_session *s)
{
	const struct tm_node *n, *root = NULL;
	uint32_t i, count = s->nodes ? tm_nodetab_count(s->nodes) : 0;
	char loc[TM_ADDRESS_MAX + 8];

	s->starting = 0;
	for (i = 0; i < count && !root; i++) {
		n = tm_nodetab_get(s->nodes, i);
		if (n && n->kind == TM_NODE_MODULE && n->parent == TM_NODE_NONE)
			root = n;
	}
	if (!root) {
		tm_error(s, "No module to start at: the trace has no root module.");
		return -1;
	}
	snprintf(loc, sizeof(loc), "%s:in", root->address);
	return cmd_tbreak_entry.exec(s, loc, 0);
}

/* GDB's start: a temporary breakpoint at the model's first call, and run. */
static int cmd_start_exec(struct tm_session *s, const char *args, int from_tty)
{
	int rc;

	if (s->live && s->live->prog) {
		/* the nodes come with the program: tm_live_run sets it */
		s->starting = 1;
		if (tm_live_run(s, args, from_tty, &rc)) {
			s->starting = 0;
			return rc;
		}
		s->starting = 0;
	}
	if (tm_start_tbreak(s) || start_over(s))
		return -1;
	return run_to_stop(s, TM_DIR_FWD, NULL, NULL, 1);
}

const struct cmd_entry cmd_start_entry = {
	.name = "start", .usage = "start [ARGS]",
	.help = "Run to the model's first call: a temporary breakpoint at the entry\n"
		"of its outermost module, then \"run\" (with a program: ARGS as run's).",
	.exec = cmd_start_exec, .flags = CMD_NEEDS_TRACE | CMD_RESUMES | CMD_PROGRAM,
	.klass = "running",
};

const struct cmd_entry cmd_run_entry = {
	.name = "run", .alias = "r",
	.usage = "run [ARGS]",
	.help = "Replay the trace from the beginning until a breakpoint or the end.\n"
		"With a program (tmdb --args PROG ARGS..., file PROG), start it (ARGS\n"
		"replace \"set args\"; a running one is killed first), attach to its\n"
		"probe and run until a breakpoint or until it exits.",
	.exec = cmd_run_exec, .flags = CMD_NEEDS_TRACE | CMD_RESUMES | CMD_PROGRAM,
	.klass = "running",
};

/* "N" argument of continue/step/next: a positive count, default 1. */
static int count_arg(struct tm_session *s, const char *args, uint64_t *n)
{
	*n = 1;
	if (!*args)
		return 0;
	if (tm_parse_uint(args, n) || *n == 0) {
		struct tm_val v;

		/* GDB accepts an expression here. */
		memset(&v, 0, sizeof(v));
		if (tm_evaluate(s, args, &v))
			return -1;
		if (v.kind != VAL_SCALAR || v.v.type != TM_TQL_INT || v.v.v.i <= 0) {
			tm_val_clear(&v);
			tm_error(s, "Invalid count \"%s\".", args);
			return -1;
		}
		*n = (uint64_t)v.v.v.i;
	}
	return 0;
}

static int cmd_continue_exec(struct tm_session *s, const char *args, int from_tty)
{
	uint64_t n;
	struct bp *b;

	if (count_arg(s, args, &n))
		return -1;
	if (n > 1) {
		b = s->stopped_bp ? tm_bp_find(s, s->stopped_bp) : NULL;
		if (!b) {
			tm_error(s, "Not stopped at any breakpoint; argument ignored.");
		} else {
			b->ignore = n - 1;
			tm_out(s, "Will ignore next %" PRIu64 " crossings of "
			       "breakpoint %d.  Continuing.\n", n - 1, b->num);
		}
	}
	if (!s->have_cur && start_over(s))
		return -1;
	return run_to_stop(s, TM_DIR_FWD, NULL, NULL, 1);
}

const struct cmd_entry cmd_continue_entry = {
	.name = "continue", .alias = "c cont fg",
	.usage = "continue [N]",
	.help = "Continue replaying until a breakpoint, a watchpoint or the end.\n"
		"With N, ignore the current breakpoint N-1 more times.",
	.exec = cmd_continue_exec, .flags = CMD_NEEDS_TRACE | CMD_RESUMES | CMD_FORWARD,
	.klass = "running",
};

/* ------------------------------------------------------------- step, next */

/* step counts events and passes over op events, which stepi counts: a
 * module call's ops are its instructions (doc/manual.md "Operations"). */
static int pred_count(struct tm_session *s, const struct tm_event *ev, void *arg)
{
	uint64_t *left = arg;

	(void)s;
	if (ev->kind == TM_EV_OP)
		return 0;
	return --*left == 0;
}

/* step with skip entries: the events of skipped calls do not count */
struct step_arg {
	uint64_t left;
	uint32_t from;          /* the playhead's node, TM_NODE_NONE */
};

static int pred_step_skip(struct tm_session *s, const struct tm_event *ev, void *arg)
{
	struct step_arg *a = arg;

	if (ev->kind == TM_EV_OP || tm_skip_event(s, ev->node, a->from))
		return 0;
	return --a->left == 0;
}

static int pred_count_i(struct tm_session *s, const struct tm_event *ev, void *arg)
{
	uint64_t *left = arg;

	(void)s;
	(void)ev;
	return --*left == 0;
}

static int node_depth(struct tm_session *s, uint32_t id)
{
	const struct tm_node *n = tm_nodetab_get(s->nodes, id);

	return n ? n->depth : 0;
}

/*
 * next/reverse-next step over calls, so "depth" is the depth of the module
 * call stack, not of the address: model.layers.0 is called by model even
 * though a ModuleList sits between them in the tree.  The scan keeps the
 * stack size as it goes; an ENTER is at the size after its push, an EXIT
 * at the size before its pop (mirrored going backwards).  Backward and
 * parameter events have no call structure: their level is their node's
 * depth in the tree, counted from 1 at the root like the stack.
 */
struct next_arg {
	uint64_t left;
	int dir;
	int by_calls;           /* 0: the playhead is a bwd/param event */
	int instr;              /* nexti: op events count too */
	long level;             /* of the playhead */
	long sz;                /* call stack size between events */
};

static int pred_next(struct tm_session *s, const struct tm_event *ev, void *arg)
{
	struct next_arg *a = arg;
	long level;

	if (ev->kind == TM_EV_OP && !a->instr)
		return 0;
	if (!a->by_calls) {
		if (node_depth(s, ev->node) > a->level)
			return 0;
		return --a->left == 0;
	}
	/* a raise ends its call as an exit does */
	if (ev->kind == TM_EV_ENTER && a->dir == TM_DIR_FWD)
		level = ++a->sz;
	else if ((ev->kind == TM_EV_EXIT || ev->kind == TM_EV_RAISE) && a->dir == TM_DIR_BWD)
		level = ++a->sz;
	else if (ev->kind == TM_EV_ENTER || ev->kind == TM_EV_EXIT || ev->kind == TM_EV_RAISE)
		level = a->sz--;
	else if (ev->kind == TM_EV_OP && ev->phase == TM_PHASE_FWD)
		level = a->sz;          /* inside its module's call */
	else
		level = node_depth(s, ev->node) + 1;
	if (level > a->level)
		return 0;
	return --a->left == 0;
}

static int do_step(struct tm_session *s, const char *args, int dir, int over, int instr)
{
	struct next_arg na;
	uint64_t n;

	if (count_arg(s, args, &n))
		return -1;
	if (dir == TM_DIR_BWD && !s->have_cur) {
		tm_error(s, "The trace is not being replayed.");
		return -1;
	}
	if (!over && !instr && s->skips) {
		struct step_arg sa = { n, s->have_cur ? s->cur.node : TM_NODE_NONE };

		return run_to_stop(s, dir, pred_step_skip, &sa, 1);
	}
	if (!over || !s->have_cur)
		return run_to_stop(s, dir, instr ? pred_count_i : pred_count, &n, 1);
	na.left = n;
	na.dir = dir;
	na.instr = instr;
	na.by_calls = s->cur.kind == TM_EV_ENTER || s->cur.kind == TM_EV_EXIT ||
		      s->cur.kind == TM_EV_RAISE ||
		      (s->cur.kind == TM_EV_OP && s->cur.phase == TM_PHASE_FWD);
	if (!na.by_calls) {
		na.level = node_depth(s, s->cur.node);
	} else {
		if (tm_frames_compute(s))
			return -1;
		na.level = (long)s->nframes;
		/* the stack size on the far side of the playhead's own event */
		if (dir == TM_DIR_FWD)
			na.sz = s->cur.kind == TM_EV_EXIT || s->cur.kind == TM_EV_RAISE ?
				na.level - 1 : na.level;
		else
			na.sz = s->cur.kind == TM_EV_ENTER ? na.level - 1 : na.level;
	}
	return run_to_stop(s, dir, pred_next, &na, 1);
}

static int cmd_step_exec(struct tm_session *s, const char *args, int from_tty)
{
	return do_step(s, args, TM_DIR_FWD, 0, 0);
}

const struct cmd_entry cmd_step_entry = {
	.name = "step", .alias = "s",
	.usage = "step [N]",
	.help = "Move to the next event (N times), entering submodule calls.",
	.exec = cmd_step_exec, .flags = CMD_NEEDS_TRACE | CMD_RESUMES | CMD_FORWARD,
	.klass = "running",
};

static int cmd_next_exec(struct tm_session *s, const char *args, int from_tty)
{
	return do_step(s, args, TM_DIR_FWD, 1, 0);
}

const struct cmd_entry cmd_next_entry = {
	.name = "next", .alias = "n",
	.usage = "next [N]",
	.help = "Move to the next event at the same or a shallower depth (over\n"
		"submodule calls), N times.",
	.exec = cmd_next_exec, .flags = CMD_NEEDS_TRACE | CMD_RESUMES | CMD_FORWARD,
	.klass = "running",
};

static int cmd_reverse_step_exec(struct tm_session *s, const char *args, int from_tty)
{
	return do_step(s, args, TM_DIR_BWD, 0, 0);
}

const struct cmd_entry cmd_reverse_step_entry = {
	.name = "reverse-step", .alias = "rs",
	.usage = "reverse-step [N]",
	.help = "Move back to the previous event (N times).",
	.exec = cmd_reverse_step_exec, .flags = CMD_NEEDS_TRACE | CMD_RESUMES,
	.klass = "running",
};

static int cmd_reverse_next_exec(struct tm_session *s, const char *args, int from_tty)
{
	return do_step(s, args, TM_DIR_BWD, 1, 0);
}

const struct cmd_entry cmd_reverse_next_entry = {
	.name = "reverse-next", .alias = "rn",
	.usage = "reverse-next [N]",
	.help = "Move back to the previous event at the same or a shallower depth.",
	.exec = cmd_reverse_next_exec, .flags = CMD_NEEDS_TRACE | CMD_RESUMES,
	.klass = "running",
};

/* stepi, nexti: as step and next, op events included (the ops of a module
 * call are its instructions). */
static int cmd_stepi_exec(struct tm_session *s, const char *args, int from_tty)
{
	return do_step(s, args, TM_DIR_FWD, 0, 1);
}

const struct cmd_entry cmd_stepi_entry = {
	.name = "stepi", .alias = "si",
	.usage = "stepi [N]",
	.help = "Move to the next event (N times), op events included.",
	.exec = cmd_stepi_exec, .flags = CMD_NEEDS_TRACE | CMD_RESUMES | CMD_FORWARD,
	.klass = "running",
};

static int cmd_nexti_exec(struct tm_session *s, const char *args, int from_tty)
{
	return do_step(s, args, TM_DIR_FWD, 1, 1);
}

const struct cmd_entry cmd_nexti_entry = {
	.name = "nexti", .alias = "ni",
	.usage = "nexti [N]",
	.help = "Move to the next op or event at the same or a shallower depth\n"
		"(over submodule calls), N times.",
	.exec = cmd_nexti_exec, .flags = CMD_NEEDS_TRACE | CMD_RESUMES | CMD_FORWARD,
	.klass = "running",
};

static int cmd_reverse_stepi_exec(struct tm_session *s, const char *args, int from_tty)
{
	return do_step(s, args, TM_DIR_BWD, 0, 1);
}

const struct cmd_entry cmd_reverse_stepi_entry = {
	.name = "reverse-stepi", .alias = "rsi",
	.usage = "reverse-stepi [N]",
	.help = "Move back to the previous event (N times), op events included.",
	.exec = cmd_reverse_stepi_exec, .flags = CMD_NEEDS_TRACE | CMD_RESUMES,
	.klass = "running",
};

static int cmd_reverse_nexti_exec(struct tm_session *s, const char *args, int from_tty)
{
	return do_step(s, args, TM_DIR_BWD, 1, 1);
}

const struct cmd_entry cmd_reverse_nexti_entry = {
	.name = "reverse-nexti", .alias = "rni",
	.usage = "reverse-nexti [N]",
	.help = "Move back to the previous op or event at the same or a shallower depth.",
	.exec = cmd_reverse_nexti_exec, .flags = CMD_NEEDS_TRACE | CMD_RESUMES,
	.klass = "running",
};

static int cmd_reverse_continue_exec(struct tm_session *s, const char *args,
				     int from_tty)
{
	if (!s->have_cur) {
		tm_error(s, "The trace is not being replayed.");
		return -1;
	}
	return run_to_stop(s, TM_DIR_BWD, NULL, NULL, 1);
}

const struct cmd_entry cmd_reverse_continue_entry = {
	.name = "reverse-continue", .alias = "rc",
	.usage = "reverse-continue",
	.help = "Replay backwards until a breakpoint, a watchpoint or the start.",
	.exec = cmd_reverse_continue_exec, .flags = CMD_NEEDS_TRACE | CMD_RESUMES,
	.klass = "running",
};

/* ------------------------------------------------------------- finish */

struct call_arg {
	uint32_t node, call;
	int kind;
	uint64_t step;
	int lost;               /* left the step without seeing the boundary */
	size_t level;           /* frame level of the call */
};

/* The call's boundary, or the first event of another step when a gap ate it. */
static int pred_call(struct tm_session *s, const struct tm_event *ev, void *arg)
{
	struct call_arg *a = arg;

	(void)s;
	if (ev->step != a->step) {
		a->lost = 1;
		return 1;
	}
	/* finish ends where the call returns or raises */
	return ev->node == a->node && ev->call == a->call && (ev->kind == a->kind ||
		(a->kind == TM_EV_EXIT && ev->kind == TM_EV_RAISE));
}

/*
 * The call finish/reverse-finish works on: the selected frame, or the one
 * above it when the playhead is that frame's own boundary (an EXIT for
 * finish, an ENTER for reverse-finish).
 */
static int finish_target(struct tm_session *s, int dir, struct call_arg *a)
{
	size_t idx;
	struct frame *f;

	if (!s->have_cur) {
		tm_error(s, "The trace is not being replayed.");
		return -1;
	}
	if (s->cur.kind == TM_EV_BWD || s->cur.kind == TM_EV_PARAM) {
		tm_error(s, "\"%s\" not meaningful at a %s event.",
			 dir == TM_DIR_FWD ? "finish" : "reverse-finish",
			 s->cur.kind == TM_EV_BWD ? "backward" : "parameter");
		return -1;
	}
	if (tm_frames_compute(s) || !s->nframes) {
		tm_error(s, "No module call is open here.");
		return -1;
	}
	idx = s->nframes - 1 - (s->sel_frame < s->nframes ? s->sel_frame : 0);
	f = &s->frames[idx];
	if (idx == s->nframes - 1 && f->node == s->cur.node && f->call == s->cur.call &&
	    (s->cur.kind == (dir == TM_DIR_FWD ? TM_EV_EXIT : TM_EV_ENTER) ||
	     (dir == TM_DIR_FWD && s->cur.kind == TM_EV_RAISE))) {
		if (idx == 0) {
			tm_error(s, "\"%s\" not meaningful in the outermost frame.",
				 dir == TM_DIR_FWD ? "finish" : "reverse-finish");
			return -1;
		}
		f = &s->frames[idx - 1];
		idx--;
	}
	a->level = s->nframes - 1 - idx;
	a->node = f->node;
	a->call = f->call;
	a->kind = dir == TM_DIR_FWD ? TM_EV_EXIT : TM_EV_ENTER;
	a->step = s->cur.step;
	a->lost = 0;
	return 0;
}

static int cmd_finish_exec(struct tm_session *s, const char *args, int from_tty)
{
	struct call_arg a;
	struct stop st;
	int trace, rc;

	if (finish_target(s, TM_DIR_FWD, &a))
		return -1;
	if (!s->finish_mi)
		tm_out(s, "Run till exit from #%zu  %s\n", a.level, tm_node_name(s, a.node));
	if (scan(s, TM_DIR_FWD, pred_call, &a, 1, &st))
		return -1;
	if (a.lost && st.why == STOP_STEP)
		tm_out(s, "The exit of %s was not recorded (a gap); stopped at the "
		       "next step.\n", tm_node_name(s, a.node));
	st.finish = st.why == STOP_STEP && !a.lost;
	report(s, &st);
	/* GDB's "Value returned": the call's output, into the history. */
	if (st.why != STOP_STEP || a.lost || !tm_focus_tensor(s))
		return 0;
	if (s->finish_mi) {
		struct tm_val v;

		/* *stopped names it (gdb-result-var) and shows it: a front end
		 * prints it from there, and once (Emacs looks for the text in
		 * the same read as *stopped, which a pipe may split) */
		memset(&v, 0, sizeof(v));
		if (tm_evaluate(s, "tensor", &v))
			return -1;
		tm_history_add(s, &v);
		tm_val_clear(&v);
		return 0;
	}
	tm_out(s, "Value returned is ");
	/* part of finish's own output: not a command to echo */
	trace = s->set.trace_commands;
	s->set.trace_commands = 0;
	rc = tm_execute(s, "print tensor", 0);
	s->set.trace_commands = trace;
	return rc == 0 ? 0 : -1;
}

const struct cmd_entry cmd_finish_entry = {
	.name = "finish", .alias = "fin",
	.usage = "finish",
	.help = "Run until the selected module call returns (its EXIT event), and\n"
		"print its output tensor.",
	.exec = cmd_finish_exec, .flags = CMD_NEEDS_TRACE | CMD_RESUMES | CMD_FORWARD,
	.klass = "running",
};

/* ------------------------------------------------------------- rerun */

/*
 * A stop in a compiled region (torch.compile) is at the region's end; rerun
 * has the probe run that region again, eagerly, from the snapshot it took
 * at the region's entry, and stops at the re-run's first event.  The probe
 * annotates "rerun" ([count, region], or [count, "", why not]) before it;
 * the scan stops at the first event after a new one.
 */
struct rerun_arg {
	uint64_t from;          /* the model's position */
	char count[32];         /* the latest "rerun" annotation's count, "" */
};

static const struct tm_annot *annot(struct tm_session *s, const struct tm_event *ev,
				    const char *key)
{
	return s->probe->ops->annotation ? s->probe->ops->annotation(s->probe, ev, key) : NULL;
}

static int pred_rerun(struct tm_session *s, const struct tm_event *ev, void *arg)
{
	struct rerun_arg *a = arg;
	const struct tm_annot *an;

	if (ev->seq <= a->from)
		return 0;
	an = annot(s, ev, "rerun");
	return an && an->nvalues && strcmp(an->values[0], a->count) != 0;
}

static int cmd_rerun_exec(struct tm_session *s, const char *args, int from_tty)
{
	struct rerun_arg a;
	const struct tm_annot *an;
	struct stop st;

	(void)from_tty;
	if (*args) {
		tm_error(s, "rerun takes no argument.");
		return -1;
	}
	if (!s->probe->ops->rerun) {
		tm_error(s, "rerun needs a live model: a recording cannot run the step again.");
		return -1;
	}
	if (!s->have_cur) {
		tm_error(s, "The model is not paused.");
		return -1;
	}
	an = annot(s, &s->cur, "compiled");
	if (!an || !an->nvalues) {
		tm_error(s, "Step %" PRIu64 " did not run compiled: step, next and finish "
			 "already stop inside it.", s->cur.step);
		return -1;
	}
	if (s->cur.phase != TM_PHASE_FWD ||
	    (s->cur.kind != TM_EV_ENTER && s->cur.kind != TM_EV_EXIT)) {
		tm_error(s, "rerun re-runs a compiled region's forward; the playhead is at a %s "
			 "event.", s->cur.kind == TM_EV_PARAM ? "parameter" : "gradient");
		return -1;
	}
	memset(&a, 0, sizeof(a));
	a.from = s->cur.seq;
	an = annot(s, &s->cur, "rerun");
	if (an && an->nvalues)
		snprintf(a.count, sizeof(a.count), "%s", an->values[0]);
	if (s->probe->ops->rerun(s->probe)) {
		tm_error(s, "Cannot re-run: %s.", s->probe->ops->detail(s->probe));
		return -1;
	}
	tm_out(s, "Re-running the compiled region of step %" PRIu64 " eagerly from its entry.\n",
	       s->cur.step);
	if (scan(s, TM_DIR_FWD, pred_rerun, &a, 0, &st))
		return -1;
	if (st.why == STOP_STEP && (an = annot(s, &s->cur, "rerun")) && an->nvalues >= 3 &&
	    !*an->values[1]) {
		tm_out(s, "The probe did not re-run it: %s.\n", an->values[2]);
	} else if (st.why == STOP_STEP && an && an->nvalues >= 2) {
		tm_out(s, "Eager re-run of %s; its events follow the region's, in step %" PRIu64
		       ".\n", an->values[1], s->cur.step);
	}
	report(s, &st);
	return 0;
}

const struct cmd_entry cmd_rerun_entry = {
	.name = "rerun",
	.usage = "rerun",
	.help = "Live, stopped in a compiled region (torch.compile): run the region\n"
		"again, eagerly, from the snapshot the probe took at its entry (inputs,\n"
		"buffers, RNG state), and stop at the re-run's first event; step, next,\n"
		"finish, bt and print then work inside it.",
	.exec = cmd_rerun_exec, .flags = CMD_NEEDS_TRACE | CMD_RESUMES,
	.klass = "running",
};

static int cmd_reverse_finish_exec(struct tm_session *s, const char *args,
				   int from_tty)
{
	struct call_arg a;

	if (finish_target(s, TM_DIR_BWD, &a))
		return -1;
	if (!s->finish_mi)
		tm_out(s, "Run back to call of #%zu  %s\n", a.level, tm_node_name(s, a.node));
	{
		struct stop st;

		if (scan(s, TM_DIR_BWD, pred_call, &a, 1, &st))
			return -1;
		if (a.lost && st.why == STOP_STEP)
			tm_out(s, "The call of %s was not recorded (a gap); stopped "
			       "at the previous step.\n", tm_node_name(s, a.node));
		report(s, &st);
	}
	return 0;
}

const struct cmd_entry cmd_reverse_finish_entry = {
	.name = "reverse-finish",
	.usage = "reverse-finish",
	.help = "Move back to where the selected module call was entered.",
	.exec = cmd_reverse_finish_exec, .flags = CMD_NEEDS_TRACE | CMD_RESUMES,
	.klass = "running",
};

/* ------------------------------------------------------------- until */

static int pred_bp(struct tm_session *s, const struct tm_event *ev, void *arg)
{
	uint32_t focus;

	return tm_bp_match(s, arg, ev, &focus);
}

static int cmd_until_exec(struct tm_session *s, const char *args, int from_tty)
{
	char file[PATH_MAX], loc[TM_ADDRESS_MAX + 1];
	unsigned line;
	struct bp tmp;
	int rc;

	if (!*args)
		return cmd_next_entry.exec(s, "", from_tty);
	/* FILE:LINE (Emacs's C-x C-a C-u, termdebug's :Until): the modules
	 * whose forward() holds it, as break takes it */
	if (tm_source_split(args, file, sizeof(file), &line)) {
		if (tm_source_location(s, file, line, loc, sizeof(loc)))
			return -1;
		args = loc;
	}
	memset(&tmp, 0, sizeof(tmp));
	if (tm_bp_bind(s, &tmp, args, 0)) {
		tm_breakpoint_clear(&tmp.core);
		free(tmp.where);
		return -1;
	}
	if (!s->have_cur && start_over(s)) {
		rc = -1;
	} else {
		rc = run_to_stop(s, TM_DIR_FWD, pred_bp, &tmp, 1);
	}
	tm_breakpoint_clear(&tmp.core);
	free(tmp.where);
	return rc;
}

/* GDB's advance: until with the location it requires. */
static int cmd_advance_exec(struct tm_session *s, const char *args, int from_tty)
{
	return cmd_until_exec(s, args, from_tty);
}

const struct cmd_entry cmd_advance_entry = {
	.name = "advance", .usage = "advance ADDRESS",
	.help = "Continue until an event of ADDRESS (or a breakpoint).",
	.exec = cmd_advance_exec, .flags = CMD_NEEDS_TRACE | CMD_RESUMES | CMD_FORWARD,
	.klass = "running", .arg_required = "a location",
};

const struct cmd_entry cmd_until_entry = {
	.name = "until", .alias = "u",
	.usage = "until [ADDRESS]",
	.help = "Without argument, like \"next\".  With an address, continue until an\n"
		"event of that address (or a breakpoint).  FILE:LINE: the modules whose\nforward() holds that line.",
	.exec = cmd_until_exec, .flags = CMD_NEEDS_TRACE | CMD_RESUMES | CMD_FORWARD,
	.klass = "running",
};

/* ------------------------------------------------------------- goto */

/* "1.5s", "200ms", "30us", "12ns" or a bare number of ns. */
static int parse_time(const char *p, uint64_t *ns)
{
	char *end;
	double v = strtod(p, &end);
	double mul = 1;

	if (end == p || v < 0)
		return -1;
	end = (char *)tm_skip_ws(end);
	if (!strcmp(end, "s"))
		mul = 1e9;
	else if (!strcmp(end, "ms"))
		mul = 1e6;
	else if (!strcmp(end, "us"))
		mul = 1e3;
	else if (*end && strcmp(end, "ns"))
		return -1;
	/* A time past 2^64 ns (584 years) has no seek key, and converting it
	 * would be undefined: say so rather than jump somewhere. */
	if (!(v * mul < 18446744073709551616.0))
		return -2;
	*ns = (uint64_t)(v * mul);
	return 0;
}

static int pred_first(struct tm_session *s, const struct tm_event *ev, void *arg)
{
	(void)s;
	(void)ev;
	(void)arg;
	return 1;
}

/*
 * The N of "goto step N" / "goto seq N": a number or, as GDB allows, an
 * expression ($s, $_step + 1), read at the playhead before it moves.
 */
static int uint_arg(struct tm_session *s, const char *val, uint64_t *out)
{
	struct tm_val v;

	if (!tm_parse_uint(val, out))
		return 0;
	if (!*val) {
		tm_error(s, "Argument required (a number or an expression).");
		return -1;
	}
	memset(&v, 0, sizeof(v));
	if (tm_evaluate(s, val, &v))
		return -1;
	if (v.kind == VAL_SCALAR && v.v.type == TM_TQL_INT && v.v.v.i >= 0) {
		*out = (uint64_t)v.v.v.i;
	} else if (v.kind == VAL_SCALAR && v.v.type == TM_TQL_NUM &&
		   v.v.v.d >= 0 && v.v.v.d < 1.8e19 &&
		   (double)(uint64_t)v.v.v.d == v.v.v.d) {
		*out = (uint64_t)v.v.v.d;
	} else if (v.kind == VAL_SCALAR && ((v.v.type == TM_TQL_INT && v.v.v.i < 0) ||
					     (v.v.type == TM_TQL_NUM && !isnan(v.v.v.d)))) {
		tm_val_clear(&v);
		tm_error(s, "Number \"%s\" is out of range (0 to 2^64-1, a whole number).",
			 val);
		return -1;
	} else {
		tm_val_clear(&v);
		tm_error(s, "Invalid number \"%s\".", val);
		return -1;
	}
	tm_val_clear(&v);
	return 0;
}

static int cmd_goto_exec(struct tm_session *s, const char *args, int from_tty)
{
	const char *p = tm_skip_ws(args);
	size_t wl = strcspn(p, " \t");
	const char *val = tm_skip_ws(p + wl);
	uint64_t v = 0, old = s->have_cur ? s->cur.seq : UINT64_MAX;
	struct stop st;
	int kind, rc;

	if (tm_word_is(p, wl, "step", 2)) {
		kind = TM_SEEK_STEP;
	} else if (tm_word_is(p, wl, "seq", 2)) {
		kind = TM_SEEK_SEQ;
	} else if (tm_word_is(p, wl, "time", 1)) {
		kind = TM_SEEK_TIME;
	} else if (tm_word_is(p, wl, "start", 3) || tm_word_is(p, wl, "beginning", 1)) {
		kind = TM_SEEK_START;
	} else if (tm_word_is(p, wl, "end", 1)) {
		kind = TM_SEEK_END;
	} else {
		tm_error(s, "Usage: goto step N | seq N | time T | start | end");
		return -1;
	}
	if ((kind == TM_SEEK_STEP || kind == TM_SEEK_SEQ) && uint_arg(s, val, &v))
		return -1;
	if (kind == TM_SEEK_TIME && (rc = parse_time(val, &v)) != 0) {
		if (rc == -2)
			tm_error(s, "Time \"%s\" is out of range (at most 2^64 ns, about "
				 "584 years).", val);
		else
			tm_error(s, "Invalid time \"%s\" (use e.g. 1.5s, 200ms, 30us or ns).",
				 val);
		return -1;
	}
	tm_playhead_clear(s);
	if ((rc = s->probe->ops->seek(s->probe, kind, v)) != TM_OK) {
		/* the chunk that holds the target did not read: say why, as a
		 * scan would, not that there is no such event */
		if (rc != TM_ERR_END && rc != TM_ERR_NOT_FOUND) {
			const char *d = s->probe->ops->detail(s->probe);

			tm_error(s, "Cannot read the trace: %s.\n"
				 "Use \"tmdb --recover %s\" if the file is damaged.",
				 d && d[0] ? d : tm_strerror(rc),
				 s->trace_path ? s->trace_path : "FILE");
			if (old != UINT64_MAX)
				seek_playhead(s, old);
			else
				start_over(s);
			return -1;
		}
		goto nothing;
	}
	if (kind == TM_SEEK_END) {
		s->scan_gap_after = 1;
		rc = scan(s, TM_DIR_BWD, pred_first, NULL, 0, &st);
		s->scan_gap_after = 0;
		if (rc)
			return -1;
	} else if (scan(s, TM_DIR_FWD, pred_first, NULL, 0, &st)) {
		return -1;
	}
	if (st.why != STOP_STEP)
		goto nothing;
	report(s, &st);
	return 0;
nothing:
	tm_error(s, "No event at or after %s %s.", kind == TM_SEEK_STEP ? "step" :
		 kind == TM_SEEK_SEQ ? "seq" : "time", val);
	if (old != UINT64_MAX)
		seek_playhead(s, old);
	else
		start_over(s);
	return -1;
}

const struct cmd_entry cmd_goto_entry = {
	.name = "goto", .alias = "go",
	.usage = "goto step N | seq N | time T | start | end",
	.help = "Move the playhead to the first event of step N, at seq N or at time T\n"
		"(ns since the run started; units s, ms, us, ns accepted).  N may be\n"
		"an expression, as in \"goto step $s + 1\".",
	.exec = cmd_goto_exec, .flags = CMD_NEEDS_TRACE | CMD_RESUMES,
	.klass = "running",
};

/* ------------------------------------------------------------- find */

enum find_mode { F_FIRST, F_LAST, F_NEXT, F_PREV, F_COUNT, F_ALL };

struct find_arg {
	struct bp *bp;          /* node filter + condition */
	int mode;
	uint64_t count;
	uint32_t focus;         /* tensor that matched */
};

static int pred_find(struct tm_session *s, const struct tm_event *ev, void *arg)
{
	struct find_arg *a = arg;
	uint32_t focus;
	char sb[32], call[16];

	if (!tm_bp_match(s, a->bp, ev, &focus))
		return 0;
	if (a->mode != F_COUNT && a->mode != F_ALL) {
		a->focus = focus;       /* the playhead is set after this returns */
		return 1;
	}
	a->count++;
	if (a->mode == F_ALL) {
		struct tm_slot slot;

		if (focus < ev->ntensors)
			slot = ev->tensors[focus].slot;
		else
			tm_event_slot(ev, &slot);
		tm_slot_format(slot, sb, sizeof(sb));
		/* the call as the stop line names it: model#3, a micro-batch */
		call[0] = '\0';
		if (ev->call > 1)
			snprintf(call, sizeof(call), "#%u", ev->call);
		if (ev->kind == TM_EV_RAISE) {
			const struct tm_annot *x = tm_exception_of(s, ev);

			tm_out(s, "seq %" PRIu64 ", step %" PRIu64 ", %s: %s%s (raise) %s\n",
			       ev->seq, ev->step, tm_phase_name(ev->phase),
			       tm_node_name(s, ev->node), call,
			       x && x->nvalues && *x->values[0] ? x->values[0] : "exception");
			return 0;
		}
		tm_out(s, "seq %" PRIu64 ", step %" PRIu64 ", %s: %s%s (%s)\n",
		       ev->seq, ev->step, tm_phase_name(ev->phase),
		       tm_node_name(s, ev->node), call, sb);
	}
	return 0;
}

/* Finds the last " in " outside quotes: COND in PATTERN. */
static const char *find_in(const char *p)
{
	const char *hit = NULL;
	char q = 0;

	for (; *p; p++) {
		if (q) {
			if (*p == q)
				q = 0;
			continue;
		}
		if (*p == '"' || *p == '\'')
			q = *p;
		else if (!strncmp(p, " in ", 4))
			hit = p;
	}
	return hit;
}

static int cmd_find_exec(struct tm_session *s, const char *args, int from_tty)
{
	static const char *const modes[] = { "first", "last", "next", "prev",
					     "count", "all", NULL };
	const char *p = tm_skip_ws(args), *in;
	struct find_arg fa;
	struct bp tmp;
	struct stop st;
	uint64_t old = s->have_cur ? s->cur.seq : UINT64_MAX;
	char *cond;
	size_t wl = strcspn(p, " \t"), i;
	int mode = F_FIRST, rc = 0, dir = TM_DIR_FWD, held;

	for (i = 0; modes[i]; i++) {
		if (wl == strlen(modes[i]) && !strncmp(p, modes[i], wl)) {
			mode = (int)i;
			p = tm_skip_ws(p + wl);
			break;
		}
	}
	if (!*p) {
		tm_error(s, "Usage: find [first|last|next|prev|count|all] CONDITION [in PATTERN]");
		return -1;
	}
	memset(&tmp, 0, sizeof(tmp));
	cond = strdup(p);
	if (!cond)
		return -1;
	in = find_in(cond);
	if (in) {
		cond[in - cond] = 0;
		/* Without a slot, find looks at every event kind of the nodes. */
		tmp.core.every_kind = 1;
		if (tm_bp_bind(s, &tmp, tm_skip_ws(in + 4), 0)) {
			rc = -1;
			goto out;
		}
	} else {
		tm_breakpoint_init_every(&tmp.core);
	}
	if (tm_compile(s, tm_strip(cond), 1, &tmp.core.cond)) {
		rc = -1;
		goto out;
	}
	memset(&fa, 0, sizeof(fa));
	fa.bp = &tmp;
	fa.mode = mode;
	if (mode == F_FIRST || mode == F_COUNT || mode == F_ALL) {
		if (start_over(s)) {
			rc = -1;
			goto out;
		}
	} else if (mode == F_LAST) {
		tm_playhead_clear(s);
		s->probe->ops->seek(s->probe, TM_SEEK_END, 0);
		dir = TM_DIR_BWD;
	} else if (mode == F_PREV) {
		dir = TM_DIR_BWD;
	}
	/* a live program: the history that has arrived, not the rest of its
	 * run (which would run the rest of training to answer) */
	held = dir == TM_DIR_FWD && tm_probe_is_live(s->probe) &&
	       !tm_probe_closed(s->probe) && tm_probe_hold(s->probe, 1);
	s->scan_quiet = 1;
	rc = scan(s, dir, pred_find, &fa, 0, &st);
	s->scan_quiet = 0;
	if (held) {
		tm_probe_hold(s->probe, 0);
		if (!rc && st.why == STOP_END)
			tm_out(s, "Searched what the running program has recorded so far "
			       "(it is paused).\n");
	}
	if (held && !rc && st.why == STOP_END && mode != F_COUNT && mode != F_ALL &&
	    from_tty && s->set.confirm && !s->batch &&
	    tm_query(s, "Run the program on and search what it does next? ")) {
		/* on from the end of the history: the model runs until a match
		 * or its end, as `continue` to a temporary breakpoint would */
		s->scan_quiet = 1;
		rc = scan(s, dir, pred_find, &fa, 0, &st);
		s->scan_quiet = 0;
	}
	if (rc)
		goto out;
	if (mode == F_COUNT || mode == F_ALL) {
		tm_out(s, "%" PRIu64 " matching event%s.\n", fa.count,
		       fa.count == 1 ? "" : "s");
		if (st.why == STOP_INTERRUPT)
			tm_out(s, "(interrupted at seq %" PRIu64 ")\n", s->cur.seq);
		if (old != UINT64_MAX)
			seek_playhead(s, old);
		else
			start_over(s);
		tm_conv_set_int(s, "_find_count", (int64_t)fa.count);
		goto out;
	}
	if (st.why == STOP_STEP) {
		s->focus = fa.focus;
		tm_out(s, "Found at seq %" PRIu64 ":\n", s->cur.seq);
		report(s, &st);
		goto out;
	}
	if (st.why == STOP_INTERRUPT) {
		report(s, &st);
		rc = -1;
		goto out;
	}
	tm_error(s, "Not found.");
	rc = -1;
	if (old != UINT64_MAX)
		seek_playhead(s, old);
	else
		start_over(s);
out:
	tm_breakpoint_clear(&tmp.core);
	free(tmp.where);
	free(cond);
	return rc;
}

const struct cmd_entry cmd_find_entry = {
	.name = "find",
	.usage = "find [first|last|next|prev|count|all] CONDITION [in PATTERN]",
	.help = "Search the trace for events where the TQL CONDITION holds for one of\n"
		"their tensors.  first (the default) and last search the whole trace,\n"
		"next and prev from the playhead; these move the playhead to the\n"
		"match.  count and all report every match and leave it alone.\n"
		"  find tensor.nan_count > 0\n"
		"  find all tensor.abs_max > 1e4 in model.layers.*.mlp",
	.exec = cmd_find_exec, .flags = CMD_NEEDS_TRACE | CMD_RESUMES,
	.klass = "running",
};
