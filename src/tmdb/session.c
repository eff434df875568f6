/*
 * session.c -- the debugging session: output, loading a trace, the playhead
 * and what hangs off it (focus tensor, module call stack, the cache that
 * answers addressed TQL terms), and the lines a stop prints.
 *
 * The playhead is the event the session is stopped at (s->cur, a deep copy).
 * The probe's cursor sits right after it (cursor_after) or right before it,
 * depending on the direction of the last move; cmd-run.c keeps that straight.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "tmdb.h"
#include "live.h"

volatile sig_atomic_t tm_interrupted;

/* ------------------------------------------------------------- output */

int tm_paging_active(const struct tm_session *s)
{
	return s->set.pagination && s->set.height > 0 && s->interactive &&
	       !s->batch && !s->out_fn && s->out == stdout &&
	       isatty(fileno(s->out)) && isatty(STDIN_FILENO) && !s->page_off;
}

void tm_page_reset(struct tm_session *s)
{
	s->page_lines = 0;
	s->page_off = 0;
	s->page_quit = 0;
}

/*
 * GDB's pager: after a page of lines, the question, answered by a line
 * (RET: one more page, c: no more paging until the prompt, q: the rest of
 * this command's output is dropped and it is interrupted, as GDB's Quit).
 */
static void page_prompt(struct tm_session *s)
{
	char buf[64];

	fputs("--Type <RET> for more, q to quit, c to continue without paging--", s->out);
	fflush(s->out);
	if (!fgets(buf, sizeof(buf), stdin) || tm_interrupted) {
		/* end of input or Ctrl-C: GDB's Quit */
		clearerr(stdin);
		buf[0] = 'q';
		fputc('\n', s->out);
	}
	s->page_lines = 0;
	switch (buf[0]) {
	case 'q':
	case 'Q':
		s->page_quit = 1;
		tm_interrupted = 1;
		fputs("Quit\n", s->out);
		fflush(s->out);
		break;
	case 'c':
	case 'C':
		s->page_off = 1;
		break;
	default:
		break;
	}
}

/* Writes text to stdout a page at a time. */
static void paged_write(struct tm_session *s, const char *text)
{
	while (*text && !s->page_quit) {
		const char *nl = strchr(text, '\n');
		size_t l = nl ? (size_t)(nl - text) + 1 : strlen(text);

		fwrite(text, 1, l, s->out);
		text += l;
		if (nl && tm_paging_active(s) && ++s->page_lines >= s->set.height - 1)
			page_prompt(s);
	}
}

void tm_vout(struct tm_session *s, int is_err, const char *fmt, va_list ap)
{
	char buf[1024];
	char *big = NULL;
	const char *text;
	va_list cp;
	int n;

	va_copy(cp, ap);
	n = vsnprintf(buf, sizeof(buf), fmt, cp);
	va_end(cp);
	if (n < 0)
		return;
	if (n >= (int)sizeof(buf)) {
		big = malloc((size_t)n + 1);
		if (big)
			vsnprintf(big, (size_t)n + 1, fmt, ap);
	}
	text = big ? big : buf;
	if (s->log_fp) {
		fputs(text, s->log_fp);
		fflush(s->log_fp);
	}
	if (s->out_fn) {
		s->out_fn(s, is_err, text);
	} else if (is_err) {
		/* Keep stdout and stderr in order when both go to one pipe. */
		fflush(s->out);
		fputs(text, s->err);
		fflush(s->err);
	} else if (s->log_fp && s->set.log_redirect) {
		/* set logging redirect on: the file only */
	} else if (s->page_quit) {
		/* q at the pager: the rest of the command's output */
	} else if (tm_paging_active(s)) {
		paged_write(s, text);
	} else {
		fputs(text, s->out);
	}
	free(big);
}

void tm_out(struct tm_session *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	tm_vout(s, 0, fmt, ap);
	va_end(ap);
}

int tm_query(struct tm_session *s, const char *question)
{
	char buf[64];

	if (s->out_fn || !isatty(STDIN_FILENO)) {
		tm_out(s, "%s(y or n) [answered N; input not from terminal]\n", question);
		return 0;
	}
	for (;;) {
		tm_out(s, "%s(y or n) ", question);
		fflush(s->out);
		if (!fgets(buf, sizeof(buf), stdin) || tm_interrupted) {
			clearerr(stdin);
			/* EOF answers yes in GDB; Ctrl-C (Quit) no */
			if (tm_interrupted) {
				tm_out(s, "\n");
				return 0;
			}
			tm_out(s, "[answered Y; input not from terminal]\n");
			return 1;
		}
		if (buf[0] == 'y' || buf[0] == 'Y')
			return 1;
		if (buf[0] == 'n' || buf[0] == 'N')
			return 0;
		tm_out(s, "Please answer y or n.\n");
	}
}

int tm_confirm(struct tm_session *s, int from_tty, const char *question)
{
	if (!from_tty || !s->set.confirm || s->batch || !s->interactive ||
	    s->out_fn || !isatty(STDIN_FILENO))
		return 1;
	/* the question is part of this page */
	s->page_lines = 0;
	return tm_query(s, question);
}

/* The sourced file a failing command came from: the innermost file among
 * the sources (user commands and loop bodies run inside it). */
static const struct tm_input *sourced_file(const struct tm_session *s)
{
	const struct tm_input *in;

	for (in = s->in; in; in = in->prev)
		if (in->fp && !in->readline && strcmp(in->name, "stdin"))
			return in;
	return NULL;
}

/* Error messages end with a newline added here, as GDB's do. */
void tm_error(struct tm_session *s, const char *fmt, ...)
{
	const struct tm_input *src;
	char buf[2048], where[1100] = "";
	va_list ap;
	int n;

	if (s->progress_shown)
		tm_progress(s, 0, 1);
	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n] = '\n';
	buf[n + 1] = 0;
	/* GDB: "FILE:LINE: Error in sourced command file:" before an error
	 * that stops a command file (not before a warning) */
	if (!s->err_prefixed && strncasecmp(buf, "warning:", 8) &&
	    (src = sourced_file(s))) {
		s->err_prefixed = 1;
		snprintf(where, sizeof(where), "%s:%u: Error in sourced command file:\n",
			 src->name, src->line);
	}
	if (s->log_fp) {
		fputs(where, s->log_fp);
		fputs(buf, s->log_fp);
		fflush(s->log_fp);
	}
	if (s->out_fn) {
		if (*where)
			s->out_fn(s, 1, where);
		s->out_fn(s, 1, buf);
		return;
	}
	fflush(s->out);
	fputs(where, s->err);
	fputs(buf, s->err);
	fflush(s->err);
}

/* set logging enabled on: the file opened as set logging overwrite says. */
int tm_logging_start(struct tm_session *s)
{
	const char *file = s->set.log_file ? s->set.log_file : "tmdb.txt";
	FILE *fp;

	if (s->log_fp) {
		tm_out(s, "Currently logging to \"%s\".\n", file);
		return 0;
	}
	fp = fopen(file, s->set.log_overwrite ? "w" : "a");
	if (!fp) {
		tm_error(s, "%s: %s.", file, strerror(errno));
		return -1;
	}
	/* said on the terminal, before the output goes to the file */
	tm_out(s, "%s output to %s.\n", s->set.log_redirect ? "Redirecting" : "Copying",
	       file);
	tm_out(s, "Copying debug output to %s.\n", file);
	fflush(s->out);
	s->log_fp = fp;
	s->set.log_enabled = 1;
	return 0;
}

void tm_logging_stop(struct tm_session *s)
{
	const char *file = s->set.log_file ? s->set.log_file : "tmdb.txt";

	if (!s->log_fp) {
		s->set.log_enabled = 0;
		return;
	}
	fclose(s->log_fp);
	s->log_fp = NULL;
	s->set.log_enabled = 0;
	tm_out(s, "Done logging to %s.\n", file);
}

/* ------------------------------------------------------------- lifetime */

/* The session owns its breakpoints (cmd-break.c makes them). */
void tm_bp_free(struct bp *b)
{
	if (!b)
		return;
	free(b->where);
	free(b->src_file);
	free(b->cond_src);
	free(b->catch_arg);
	free(b->core_src);
	tm_breakpoint_clear(&b->core);
	if (b->wexpr) {
		tm_expr_free(b->wexpr);
		free(b->wexpr);
	}
	tm_lines_free(b->cmds, b->ncmds);
	tm_val_clear(&b->old);
	free(b);
}

void tm_bp_free_all(struct tm_session *s)
{
	struct bp *b;

	while ((b = s->bps)) {
		s->bps = b->next;
		tm_bp_free(b);
	}
}

static void frames_release(struct tm_session *s, size_t from);

static const struct tm_tensor *session_lookup(void *user, uint32_t node,
					      struct tm_slot slot, uint32_t call,
					      const struct tm_event **event,
					      uint32_t *reason);
static const struct tm_annot *session_annotation(void *user, const struct tm_event *ev,
						 const char *key);

static void step_cache_clear(struct tm_session *s)
{
	size_t i;

	for (i = 0; i < s->nlks; i++)
		if (s->lks[i].e.have)
			tm_event_release(&s->lks[i].e.ev);
	s->nlks = 0;
}

struct tm_session *tm_session_new(void)
{
	struct tm_session *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->out = stdout;
	s->err = stderr;
	s->next_bpnum = 1;
	s->shown_rank = -1;
	s->next_display = 1;
	s->focus = UINT32_MAX;
	s->set.listsize = 10;
	s->set.confirm = 1;
	s->set.pagination = 1;
	s->set.progress = 1;
	s->set.history_size = 256;
	s->set.max_gap_lines = 10;
	s->set.style = 1;
	s->set.prompt = strdup("(tmdb) ");
	s->next_skip = 1;
	s->env.user = s;
	s->env.lookup = session_lookup;
	s->env.variable = tm_session_variable;
	s->env.annotation = session_annotation;
	s->env.reference = tm_compare_reference;
	s->funcs = tm_tql_funcs_new();
	return s;
}

void tm_session_free(struct tm_session *s)
{
	struct display *d;
	struct conv *c;
	struct ucmd *u;
	size_t i;

	if (!s)
		return;
	tm_session_unload(s);
	tm_compare_free(s);
	tm_bp_free_all(s);
	while ((d = s->displays)) {
		s->displays = d->next;
		free(d->expr);
		free(d);
	}
	for (i = 0; i < s->nhist; i++) {
		tm_val_clear(s->hist[i]);
		free(s->hist[i]);
	}
	free(s->hist);
	while ((c = s->convs)) {
		s->convs = c->next;
		tm_val_clear(&c->val);
		free(c->name);
		free(c);
	}
	while ((u = s->ucmds)) {
		s->ucmds = u->next;
		tm_lines_free(u->lines, u->nlines);
		free(u->doc);
		free(u->name);
		free(u);
	}
	tm_lines_free(s->pending, s->npending);
	frames_release(s, 0);
	free(s->frames);
	free(s->lk);
	step_cache_clear(s);
	free(s->lks);
	free(s->list_file);
	free(s->set.prompt);
	if (s->log_fp)
		fclose(s->log_fp);
	free(s->set.log_file);
	free(s->x_name);
	while (s->skips) {
		struct skip *k = s->skips;

		s->skips = k->next;
		free(k->pattern);
		free(k);
	}
	tm_tql_funcs_free(s->funcs);
	free(s);
}

/* Tells the front end (MI) that a breakpoint was created, changed or is
 * about to be deleted; the CLI installs no callback. */
void tm_bp_notify(struct tm_session *s, int what, struct bp *b)
{
	if (s->on_bp_event)
		s->on_bp_event(s, what, b);
}

int tm_session_can_pend(const struct tm_session *s)
{
	return tm_probe_is_live(s->probe) || (!s->probe && s->live && s->live->prog);
}

int tm_need_trace(struct tm_session *s)
{
	if (s->probe)
		return 0;
	tm_error(s, "No trace loaded.  Use the \"file\" command.");
	return -1;
}

int tm_command_needs_trace(struct tm_session *s, const struct cmd_entry *c)
{
	/* GDB: a program set and not running (not yet run, exited, killed)
	 * is not run on by continue or step, whatever trace is loaded;
	 * reverse execution and goto still browse what it sent. */
	if ((c->flags & CMD_FORWARD) && s->live && s->live->prog && !s->live->pid &&
	    (!s->probe || tm_probe_closed(s->probe))) {
		tm_error(s, "The program is not being run.");
		return -1;
	}
	if (s->probe || !(c->flags & CMD_NEEDS_TRACE))
		return 0;
	if (!s->live || !s->live->prog)
		return tm_need_trace(s);
	if (c->flags & CMD_PROGRAM)
		return 0;
	tm_error(s, "The program is not being run.");
	return -1;
}

void tm_session_unload(struct tm_session *s)
{
	struct bp *b;

	tm_playhead_clear(s);
	step_cache_clear(s);
	/* what a condition remembers (prev(), answers about request lists)
	 * was about the trace going away */
	for (b = s->bps; b; b = b->next)
		tm_tql_reset(b->core.cond);
	if (s->probe)
		s->probe->ops->detach(s->probe);
	s->probe = NULL;
	s->rank_of_probe = NULL;
	s->shown_rank = -1;
	s->nodes = NULL;
	free(s->trace_path);
	s->trace_path = NULL;
	free(s->list_file);
	s->list_file = NULL;
}

/* Says what is wrong with a trace and what to do about it. */
static void trace_warnings(struct tm_session *s, const char *path,
			   const struct tm_summary *sum)
{
	static const char *const idx[] = {
		[TM_INDEX_TRAILER] = "its trailer is damaged",
		[TM_INDEX_INDEX] = "its INDEX chunk is damaged",
		[TM_INDEX_SUMMARY] = "its SUMMARY chunk is damaged",
	};

	if (sum->damaged) {
		tm_error(s, "warning: \"%s\" is damaged after byte %" PRIu64
			 " (%s%s); events after seq %" PRIu64 " are lost.\n"
			 "Use \"tmdb --recover %s\" to rewrite its index "
			 "from the intact chunks.",
			 path, sum->damage_offset,
			 sum->damage_err == TM_ERR_TRUNCATED ? "" : "chunk header: ",
			 tm_strerror(sum->damage_err), sum->last_seq, path);
	} else if (!sum->indexed && sum->index_damage > 0 &&
		   (size_t)sum->index_damage < sizeof(idx) / sizeof(idx[0]) && idx[sum->index_damage]) {
		/* the writer finished; only the way in is damaged */
		tm_error(s, "warning: \"%s\": %s; reading it by scanning (no event "
			 "is lost).\n"
			 "Use \"tmdb --recover %s\" to rewrite its index.",
			 path, idx[sum->index_damage], path);
	} else if (!sum->indexed) {
		tm_error(s, "warning: \"%s\" has no index (its writer did not "
			 "finish); reading it by scanning.\n"
			 "Use \"tmdb --recover %s\" to rewrite its index.",
			 path, path);
	}
}

int tm_session_load(struct tm_session *s, const char *path)
{
	struct tm_probe *p = NULL;
	struct tm_probe_info info;
	char *detail = NULL;
	int err;

	if (tm_probe_multi_is_manifest(path))
		err = tm_probe_multi_open(path, &p, &detail);
	else
		err = tm_probe_replay_open(path, &p, &detail);
	if (err != TM_OK) {
		if (detail)
			tm_error(s, "%s", detail);
		else
			tm_error(s, "\"%s\": %s.", path, tm_strerror(err));
		free(detail);
		if (err == TM_ERR_CRC || err == TM_ERR_TRUNCATED ||
		    err == TM_ERR_CORRUPT || err == TM_ERR_TOO_LARGE ||
		    err == TM_ERR_NO_INDEX || err == TM_ERR_RESERVED)
			tm_error(s, "Use \"tmdb --recover %s\" to rebuild the "
				 "trace from its intact chunks.", path);
		return -1;
	}
	tm_session_unload(s);
	s->probe = p;
	s->nodes = p->ops->nodes(p);
	s->trace_path = strdup(path);
	p->ops->describe(p, &info);
	/* GDB's -batch is silent: no banner, no summary */
	if (!s->batch)
		tm_out(s, "Reading trace from %s...\n", path);
	if (info.summary) {
		const struct tm_summary *sum = info.summary;
		uint64_t steps = sum->nevents ? sum->last_step - sum->first_step + 1 : 0;

		if (p->ops->nranks) {
			struct tm_probe *sub;
			struct tm_probe_info si;
			size_t i;

			/* each rank's file has its own state and its own fix */
			for (i = 0; (sub = tm_probe_multi_sub(p, i, NULL)); i++) {
				sub->ops->describe(sub, &si);
				if (si.summary)
					trace_warnings(s, si.source, si.summary);
			}
		} else {
			trace_warnings(s, path, sum);
		}
		if (p->ops->nranks && !s->batch)
			tm_out(s, "%d ranks, ", p->ops->nranks(p));
		if (!s->batch)
			tm_out(s, "%" PRIu64 " events in %" PRIu64 " step%s, "
			       "%u nodes, %" PRIu64 " gap%s.\n",
			       sum->nevents, steps, steps == 1 ? "" : "s",
			       tm_nodetab_count(s->nodes), sum->ngaps,
			       sum->ngaps == 1 ? "" : "s");
	}
	return 0;
}

/* ------------------------------------------------------------- playhead */

void tm_lookup_invalidate(struct tm_session *s)
{
	size_t i;

	for (i = 0; i < s->nlk; i++)
		if (s->lk[i].have)
			tm_event_release(&s->lk[i].ev);
	s->nlk = 0;
}

void tm_playhead_clear(struct tm_session *s)
{
	if (s->have_cur)
		tm_event_release(&s->cur);
	memset(&s->cur, 0, sizeof(s->cur));
	s->have_cur = 0;
	s->cursor_after = 0;
	s->focus = UINT32_MAX;
	s->frames_valid = 0;
	frames_release(s, 0);
	s->sel_frame = 0;
	s->stopped_bp = 0;
	tm_lookup_invalidate(s);
	tm_conv_set_int(s, "_step", -1);
}

/*
 * Makes ev the playhead (deep copy).  The focus tensor defaults to the
 * event's first tensor; breakpoints narrow it afterwards.
 */
void tm_playhead_set(struct tm_session *s, const struct tm_event *ev)
{
	struct tm_event copy;

	if (tm_event_copy(&copy, ev) != TM_OK)
		return;
	if (s->have_cur)
		tm_event_release(&s->cur);
	s->cur = copy;
	s->have_cur = 1;
	s->focus = s->cur.ntensors ? 0 : UINT32_MAX;
	s->frames_valid = 0;
	s->sel_frame = 0;
	s->stopped_bp = 0;
	tm_conv_set_int(s, "_step", (int64_t)s->cur.step);
	tm_conv_set_int(s, "_seq", (int64_t)s->cur.seq);
	tm_conv_set_str(s, "_node", tm_node_name(s, s->cur.node));
	tm_op_conv(s);
}

/* After a side trip of the cursor (info steps, bt): back after the playhead. */
void tm_cursor_restore(struct tm_session *s)
{
	struct tm_record rec;

	if (!s->probe)
		return;
	if (!s->have_cur) {
		s->probe->ops->seek(s->probe, TM_SEEK_START, 0);
		return;
	}
	s->probe->ops->seek(s->probe, TM_SEEK_SEQ, s->cur.seq);
	while (s->probe->ops->next_event(s->probe, TM_DIR_FWD, &rec) == TM_OK)
		if (rec.type == TM_REC_EVENT && rec.u.event.seq >= s->cur.seq)
			break;
	s->cursor_after = 1;
}

uint64_t tm_playhead_seq(const struct tm_session *s)
{
	if (s->scan_ev)
		return s->scan_ev->seq;
	return s->have_cur ? s->cur.seq : 0;
}

const struct frame *tm_frame_at(const struct tm_session *s, size_t k)
{
	return k < s->nframes ? &s->frames[s->nframes - 1 - k] : NULL;
}

const struct tm_event *tm_focus_event(const struct tm_session *s)
{
	const struct frame *f;

	if (!s->have_cur)
		return NULL;
	if (!s->sel_frame || !s->frames_valid)
		return &s->cur;
	f = tm_frame_at(s, s->sel_frame);
	return f && f->have_enter ? &f->enter : NULL;
}

const struct tm_tensor *tm_focus_tensor(const struct tm_session *s)
{
	const struct tm_event *ev;

	if (!s->have_cur)
		return NULL;
	if (s->sel_frame && s->frames_valid) {
		ev = tm_focus_event(s);
		return ev && ev->ntensors ? &ev->tensors[0] : NULL;
	}
	if (s->focus >= s->cur.ntensors)
		return NULL;
	return &s->cur.tensors[s->focus];
}

/*
 * The one table of signal names: the CLI crash report and the MI stop record
 * must name a signal the same way.
 */
const char *tm_signal_name(int signo, const char **meaning)
{
	static const struct {
		int no;
		const char *name, *meaning;
	} sigs[] = {
		{ 1, "SIGHUP", "Hangup" }, { 2, "SIGINT", "Interrupt" },
		{ 4, "SIGILL", "Illegal instruction" }, { 6, "SIGABRT", "Aborted" },
		{ 7, "SIGBUS", "Bus error" }, { 8, "SIGFPE", "Arithmetic exception" },
		{ 9, "SIGKILL", "Killed" }, { 11, "SIGSEGV", "Segmentation fault" },
		{ 13, "SIGPIPE", "Broken pipe" }, { 15, "SIGTERM", "Terminated" },
	};
	size_t i;

	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		if (sigs[i].no == signo) {
			if (meaning)
				*meaning = sigs[i].meaning;
			return sigs[i].name;
		}
	}
	return NULL;
}

const char *tm_node_name(const struct tm_session *s, uint32_t id)
{
	const struct tm_node *n = s->nodes ? tm_nodetab_get(s->nodes, id) : NULL;

	return n ? n->address : "?";
}

/* What a RAISE event raised: the "exception" annotation at it (values:
 * the type's name, the message), NULL when unknown or not a raise. */
const struct tm_annot *tm_exception_of(struct tm_session *s, const struct tm_event *ev)
{
	if (!ev || ev->kind != TM_EV_RAISE || !s->probe || !s->probe->ops->annotation)
		return NULL;
	return s->probe->ops->annotation(s->probe, ev, "exception");
}

/* "NODE (SLOT) at step S, PHASE", the contract line of ARCHITECTURE 9. */
void tm_print_location(struct tm_session *s, const char *prefix)
{
	const struct tm_tensor *t = tm_focus_tensor(s);
	struct tm_slot slot;
	char sb[32];
	char call[16] = "";

	if (!s->have_cur)
		return;
	if (t)
		slot = t->slot;
	else
		tm_event_slot(&s->cur, &slot);
	tm_slot_format(slot, sb, sizeof(sb));
	if (s->cur.kind == TM_EV_OP) {
		char op[TM_ADDRESS_MAX + 160];

		tm_op_label(s, &s->cur, op, sizeof(op));
		tm_out(s, "%s%s (%s) at step %" PRIu64 ", %s\n", prefix ? prefix : "",
		       op, sb, s->cur.step, tm_phase_name(s->cur.phase));
		return;
	}
	if (s->cur.call > 1)
		snprintf(call, sizeof(call), "#%u", s->cur.call);
	if (s->cur.kind == TM_EV_RAISE) {
		const struct tm_annot *x = tm_exception_of(s, &s->cur);

		tm_out(s, "%s%s%s (raise) %s at step %" PRIu64 ", %s\n", prefix ? prefix : "",
		       tm_node_name(s, s->cur.node), call,
		       x && x->nvalues && *x->values[0] ? x->values[0] : "exception",
		       s->cur.step, tm_phase_name(s->cur.phase));
		return;
	}
	tm_out(s, "%s%s%s (%s) at step %" PRIu64 ", %s\n", prefix ? prefix : "",
	       tm_node_name(s, s->cur.node), call, sb, s->cur.step,
	       tm_phase_name(s->cur.phase));
}

/* The node that carries a source location: the node or its nearest module. */
const struct tm_node *tm_source_node(struct tm_session *s, uint32_t id)
{
	const struct tm_node *n = s->nodes ? tm_nodetab_get(s->nodes, id) : NULL;
	int guard = 0;

	while (n && (!n->file || !n->line) && n->parent != TM_NODE_NONE &&
	       guard++ < TM_ADDRESS_MAX_SEGMENTS)
		n = tm_nodetab_get(s->nodes, n->parent);
	return n && n->file && n->line ? n : NULL;
}

/*
 * Finds a recorded source file: as written if absolute or relative to the
 * current directory, else next to the trace (traces are often moved
 * together with the script).  Returns a malloc'd path or NULL.
 */
char *tm_resolve_source(struct tm_session *s, const char *file)
{
	const char *slash, *base;
	char *p;
	size_t n;

	if (!file || !*file)
		return NULL;
	if (access(file, R_OK) == 0)
		return strdup(file);
	if (file[0] == '/' || !s->trace_path)
		return NULL;
	slash = strrchr(s->trace_path, '/');
	if (!slash)
		return NULL;
	n = (size_t)(slash - s->trace_path);
	/* Also try the file's base name next to the trace. */
	base = strrchr(file, '/');
	base = base ? base + 1 : file;
	p = malloc(n + strlen(file) + 2);
	if (!p)
		return NULL;
	sprintf(p, "%.*s/%s", (int)n, s->trace_path, file);
	if (access(p, R_OK) == 0)
		return p;
	sprintf(p, "%.*s/%s", (int)n, s->trace_path, base);
	if (access(p, R_OK) == 0)
		return p;
	free(p);
	return NULL;
}

/* Reads line `line` (1-based) of path into buf; 0 on success. */
static int read_source_line(const char *path, unsigned line, char *buf,
			    size_t len)
{
	FILE *fp = fopen(path, "r");
	unsigned n = 0;

	if (!fp)
		return -1;
	while (fgets(buf, (int)len, fp)) {
		size_t l = strlen(buf);
		int whole = l && buf[l - 1] == '\n';

		if (whole)
			buf[l - 1] = 0;
		if (whole || feof(fp))
			n++;
		if (n == line) {
			fclose(fp);
			return 0;
		}
	}
	fclose(fp);
	return -1;
}

void tm_print_source_line(struct tm_session *s)
{
	const struct tm_node *n;
	char buf[512];
	char *path;

	/*
	 * The line is the module's forward: true of a call's ENTER and EXIT,
	 * not of its backward pass or of a parameter observation.  An op's is
	 * the line that called it (its site node's).
	 */
	if (!s->have_cur ||
	    (s->cur.kind != TM_EV_ENTER && s->cur.kind != TM_EV_EXIT &&
	     s->cur.kind != TM_EV_RAISE &&
	     !(s->cur.kind == TM_EV_OP && s->cur.phase == TM_PHASE_FWD)))
		return;
	n = tm_source_node(s, s->cur.node);
	if (!n)
		return;
	path = tm_resolve_source(s, n->file);
	if (path && read_source_line(path, n->line, buf, sizeof(buf)) == 0)
		tm_out(s, "%u\t%s\n", n->line, buf);
	else
		tm_out(s, "%u\tin %s\n", n->line, n->file);
	free(s->list_file);
	s->list_file = strdup(n->file);
	s->list_first = (int)n->line;
	s->list_last = 0;
	free(path);
}

/*
 * One line for a gap the playhead passed.  A gap the scan of "goto end"
 * read on its way back to the last event is not crossed at all: it lies
 * after the playhead.  Count 0 means the count is unknown (doc/tmrun.md
 * 4.4), as for a trace cut short.
 */
void tm_print_gap(struct tm_session *s, const struct tm_gap *g, int dir)
{
	char why[128], lost[48];

	if (tm_gap_reason_format(g->reason, why, sizeof(why)) != TM_OK)
		snprintf(why, sizeof(why), "unknown");
	if (g->count)
		snprintf(lost, sizeof(lost), "%" PRIu64 " event%s", g->count,
			 g->count == 1 ? "" : "s");
	else
		snprintf(lost, sizeof(lost), "an unknown number of events");
	if (s->probe && s->probe->ops->rank_of) {
		/* one rank's loss: its own seqs mean nothing on the merged axis */
		tm_out(s, "%s gap on rank %d at step %" PRIu64 ": seq %" PRIu64
		       ", %s lost (%s).\n",
		       s->scan_gap_after ? "The trace ends with a" :
		       dir == TM_DIR_BWD ? "Crossed back over" : "Crossed",
		       s->probe->ops->rank_of(s->probe, g->first_seq), g->step,
		       g->first_seq, lost, why);
		return;
	}
	tm_out(s, "%s gap at step %" PRIu64 ": seq %" PRIu64 "-%" PRIu64
	       ", %s lost (%s).\n",
	       s->scan_gap_after ? "The trace ends with a" :
	       dir == TM_DIR_BWD ? "Crossed back over" : "Crossed",
	       g->step, g->first_seq, g->last_seq, lost, why);
}

/* ------------------------------------------------------------- addresses */

/* "No node named X." with the nearest existing addresses. */
int tm_address_error(struct tm_session *s, const char *text)
{
	const char *sugg[4];
	size_t n = 0, i;
	char buf[TM_ADDRESS_MAX + 256];
	size_t off;

	if (s->nodes)
		n = tm_address_suggest(s->nodes, text, sugg, 4);
	off = (size_t)snprintf(buf, sizeof(buf), "No node named \"%s\".", text);
	if (n && off < sizeof(buf)) {
		off += (size_t)snprintf(buf + off, sizeof(buf) - off,
					"  Did you mean ");
		for (i = 0; i < n && off < sizeof(buf); i++)
			off += (size_t)snprintf(buf + off, sizeof(buf) - off,
						"%s%s", i ? (i + 1 == n ? " or " : ", ") : "",
						sugg[i]);
		if (off < sizeof(buf))
			snprintf(buf + off, sizeof(buf) - off, "?");
	}
	tm_error(s, "%s", buf);
	return -1;
}

/* ------------------------------------------------------------- lookups */

/*
 * Keeps the cache right while the playhead moves forward one record at a
 * time: an event refreshes the entries of its node whose slot it holds, a
 * gap makes every entry unknown (the newest value may be among the lost
 * events).
 */
void tm_lookup_advance(struct tm_session *s, const struct tm_record *rec)
{
	size_t i;

	for (i = 0; i < s->nlk; i++) {
		struct lookup_ent *e = &s->lk[i];

		if (rec->type == TM_REC_GAP) {
			if (e->have)
				tm_event_release(&e->ev);
			e->have = 0;
			e->reason = rec->u.gap.reason ? rec->u.gap.reason :
							TM_GAP_BACKPRESSURE;
			continue;
		}
		if (rec->type != TM_REC_EVENT)
			continue;
		if (rec->u.event.node != e->node || rec->u.event.kind != e->kind)
			continue;
		if (e->call && rec->u.event.call != e->call)
			continue;
		if (!tm_event_tensor(&rec->u.event, e->slot))
			continue;
		if (e->have)
			tm_event_release(&e->ev);
		e->have = tm_event_copy(&e->ev, &rec->u.event) == TM_OK;
		e->reason = 0;
	}
}

static const struct tm_tensor *session_lookup(void *user, uint32_t node,
					      struct tm_slot slot, uint32_t call,
					      const struct tm_event **event,
					      uint32_t *reason)
{
	struct tm_session *s = user;
	const struct tm_event *now = s->scan_ev ? s->scan_ev :
				     s->have_cur ? &s->cur : NULL;
	int kind = tm_slot_event_kind(slot.kind);
	struct lookup_ent *e, *grown;
	size_t i;
	int err;

	*reason = 0;
	if (event)
		*event = NULL;
	if (!now || !s->probe)
		return NULL;
	/* The playhead's own event, unless it lacks the slot (a PARAM event
	 * with only the grad): then the latest event holding it answers. */
	if (now->node == node && now->kind == kind &&
	    (!call || now->call == call) && tm_event_tensor(now, slot)) {
		if (event)
			*event = now;
		return tm_event_tensor(now, slot);
	}
	for (i = 0; i < s->nlk; i++) {
		e = &s->lk[i];
		if (e->node == node && e->kind == kind && e->call == call &&
		    e->slot.kind == slot.kind && e->slot.index == slot.index)
			goto found;
	}
	if (s->nlk >= 256)
		tm_lookup_invalidate(s);
	grown = realloc(s->lk, (s->nlk + 1) * sizeof(*s->lk));
	if (!grown)
		return NULL;
	s->lk = grown;
	e = &s->lk[s->nlk++];
	memset(e, 0, sizeof(*e));
	e->node = node;
	e->kind = (uint8_t)kind;
	e->slot = slot;
	e->call = call;
	err = s->probe->ops->latest(s->probe, node, kind, &slot, call, now->seq,
				    &e->ev, &e->reason);
	e->have = err == TM_OK;
found:
	if (!e->have) {
		*reason = e->reason;
		return NULL;
	}
	if (event)
		*event = &e->ev;
	if (e->ev.step < s->eval_oldest_step)
		s->eval_oldest_step = e->ev.step;
	return tm_event_tensor(&e->ev, slot);
}

/*
 * A rank's value at a step, for spread(@*:...) and max/min over ranks:
 * ranks run at their own pace, so they are compared at equal steps, each as
 * far as the merged axis has reached at the event evaluated (a live job's
 * later records do not exist yet; a replay must stop where it would).
 * Answers are kept while they hold: a find asks the same ones at every
 * event of a step.
 */
static const struct tm_tensor *session_lookup_step(void *user, uint32_t node,
						   struct tm_slot slot, uint32_t call,
						   uint64_t step,
						   const struct tm_event **event,
						   uint32_t *reason)
{
	struct tm_session *s = user;
	const struct tm_event *now = s->scan_ev ? s->scan_ev :
				     s->have_cur ? &s->cur : NULL;
	int kind = tm_slot_event_kind(slot.kind), err;
	struct step_ent *e, *grown;
	struct tm_event ev;
	uint64_t at;
	size_t i;

	*reason = 0;
	if (event)
		*event = NULL;
	if (!now || !s->probe || !s->probe->ops->latest_in_step)
		return NULL;
	at = now->seq;
	for (i = 0; i < s->nlks; i++) {
		e = &s->lks[i];
		if (e->e.node == node && e->e.kind == kind && e->e.call == call &&
		    e->step == step && e->e.slot.kind == slot.kind &&
		    e->e.slot.index == slot.index)
			goto found;
	}
	if (s->nlks >= 1024)
		step_cache_clear(s);
	grown = realloc(s->lks, (s->nlks + 1) * sizeof(*s->lks));
	if (!grown)
		return NULL;
	s->lks = grown;
	e = &s->lks[s->nlks++];
	memset(e, 0, sizeof(*e));
	e->e.node = node;
	e->e.kind = (uint8_t)kind;
	e->e.slot = slot;
	e->e.call = call;
	e->step = step;
	e->at = UINT64_MAX;
	e->final_from = UINT64_MAX;
found:
	/* still right: asked at the same seq, or both settled */
	if (e->at != at && !(at >= e->final_from && e->at >= e->final_from)) {
		if (e->e.have)
			tm_event_release(&e->e.ev);
		e->e.have = 0;
		err = s->probe->ops->latest_in_step(s->probe, node, kind, &slot, call,
						    step, at, &ev, &e->e.reason,
						    &e->final_from);
		if (err == TM_OK) {
			e->e.ev = ev;
			e->e.have = 1;
		}
		e->at = at;
	}
	*reason = e->e.reason;
	if (!e->e.have)
		return NULL;
	if (event)
		*event = &e->e.ev;
	return tm_event_tensor(&e->e.ev, slot);
}

/* TQL `request`: the probe's annotation of the event's step. */
static const struct tm_annot *session_annotation(void *user, const struct tm_event *ev,
						 const char *key)
{
	struct tm_session *s = user;

	if (!s->probe || !s->probe->ops->annotation)
		return NULL;
	return s->probe->ops->annotation(s->probe, ev, key);
}

void tm_tql_ctx_init(struct tm_session *s, struct tm_tql_ctx *ctx,
		     const struct tm_event *ev, const struct tm_tensor *t)
{
	s->env.user = s;
	s->env.lookup = session_lookup;
	s->env.variable = tm_session_variable;
	s->env.lookup_step = session_lookup_step;
	s->env.annotation = session_annotation;
	s->env.reference = tm_compare_reference;
	ctx->event = ev;
	ctx->tensor = t;
	ctx->nodes = s->nodes;
	ctx->env = &s->env;
	ctx->rank = ev ? tm_event_rank(s, ev) : tm_session_rank(s);
}

/*
 * The rank an event comes from: the @R: of its node in a distributed job's
 * merged table, else the rank the trace was recorded in (one rank's file
 * replayed alone), else 0.
 */
int tm_event_rank(struct tm_session *s, const struct tm_event *ev)
{
	const struct tm_node *n;
	struct tm_probe_info pi;
	const char *rest;
	int r;

	if (!s->probe)
		return 0;
	if (s->probe->ops->nranks) {
		n = s->nodes ? tm_nodetab_get(s->nodes, ev->node) : NULL;
		r = n ? tm_address_node_rank(n->address, &rest) : TM_RANK_NONE;
		return r >= 0 ? r : 0;
	}
	/* one process: its rank is the trace's, asked once (this is called
	 * for every condition evaluated) */
	if (s->rank_of_probe != s->probe) {
		s->probe->ops->describe(s->probe, &pi);
		s->trace_rank = pi.meta && pi.meta->rank >= 0 ? pi.meta->rank : 0;
		s->rank_of_probe = s->probe;
	}
	return s->trace_rank;
}

/* The rank that unqualified addresses name: the playhead's (inferior N moves it). */
int tm_session_rank(struct tm_session *s)
{
	return s->have_cur ? tm_event_rank(s, &s->cur) : 0;
}

/*
 * The node an exact address names.  In a distributed job's table every
 * node is @R:-qualified; an address written without a rank names the
 * playhead's rank, as GDB evaluates in the selected inferior.
 */
const struct tm_node *tm_session_node(struct tm_session *s, const tm_address *a)
{
	char buf[TM_ADDRESS_MAX + 16];
	const struct tm_node *n;
	int r = tm_address_rank(a);

	if (!s->nodes)
		return NULL;
	if (r >= 0) {
		snprintf(buf, sizeof(buf), "@%d:%s", r, tm_address_path(a));
		return tm_nodetab_find(s->nodes, buf);
	}
	n = tm_nodetab_find(s->nodes, tm_address_path(a));
	if (n || r == TM_RANK_ANY || !s->probe || !s->probe->ops->nranks)
		return n;
	snprintf(buf, sizeof(buf), "@%d:%s", tm_session_rank(s), tm_address_path(a));
	return tm_nodetab_find(s->nodes, buf);
}

/* tm_session_node of a text; NULL if it does not parse. */
const struct tm_node *tm_session_node_text(struct tm_session *s, const char *text)
{
	const struct tm_node *n;
	tm_address *a = NULL;

	if (tm_address_parse(text, &a, NULL, NULL) != TM_OK)
		return NULL;
	n = tm_session_node(s, a);
	tm_address_free(a);
	return n;
}

int tm_compile(struct tm_session *s, const char *src, int want_bool,
	       tm_tql_prog **out)
{
	struct tm_tql_compile_opts o;
	char *errors = NULL;
	int err;

	memset(&o, 0, sizeof(o));
	o.nodes = s->nodes;
	o.funcs = s->funcs;
	o.want_bool = want_bool;
	o.rank = tm_session_rank(s);
	err = tm_tql_compile(src, &o, out, &errors);
	if (err != TM_OK) {
		if (errors) {
			size_t l = strlen(errors);

			while (l && errors[l - 1] == '\n')
				errors[--l] = 0;
			tm_error(s, "%s", errors);
		} else {
			tm_error(s, "Cannot compile \"%s\": %s.", src,
				 tm_strerror(err));
		}
		free(errors);
		*out = NULL;
		return -1;
	}
	free(errors);
	return 0;
}

/* ------------------------------------------------------------- call stack */

static void frames_release(struct tm_session *s, size_t from)
{
	size_t i;

	for (i = from; i < s->nframes; i++)
		if (s->frames[i].have_enter) {
			tm_event_release(&s->frames[i].enter);
			s->frames[i].have_enter = 0;
		}
	s->nframes = from;
}

/* ev: the ENTER event, copied (NULL: none seen). */
static int frames_push(struct tm_session *s, uint32_t node, uint32_t call,
		       uint64_t seq, const struct tm_event *ev)
{
	struct frame *f;

	if (s->nframes == s->frames_cap) {
		size_t cap = s->frames_cap ? s->frames_cap * 2 : 16;

		if (cap > 4096)
			return -1;      /* deeper than any real model */
		f = realloc(s->frames, cap * sizeof(*f));
		if (!f)
			return -1;
		s->frames = f;
		s->frames_cap = cap;
	}
	f = &s->frames[s->nframes++];
	f->node = node;
	f->call = call;
	f->enter_seq = seq;
	f->returning = 0;
	f->have_enter = ev && tm_event_copy(&f->enter, ev) == TM_OK;
	return 0;
}

/* Pops the innermost open call of node#call and whatever is above it. */
static void frames_pop(struct tm_session *s, uint32_t node, uint32_t call)
{
	size_t i = s->nframes;

	while (i > 0) {
		i--;
		if (s->frames[i].node == node && s->frames[i].call == call) {
			frames_release(s, i);
			return;
		}
	}
	s->frames_gap = 1;      /* an exit without its enter */
}

/*
 * The module calls open at the playhead, innermost last.  Forward events
 * get the real call stack, rebuilt by replaying the playhead's step from
 * its start (cheap: one step, through the index); backward and parameter
 * events have no call structure, so they get the node's ancestry.
 */
int tm_frames_compute(struct tm_session *s)
{
	struct tm_record rec;
	const struct tm_node *n;
	uint64_t target;
	int err, guard = 0, rank;

	struct frame ret;       /* the returning call, at an EXIT */

	if (s->frames_valid)
		return 0;
	frames_release(s, 0);
	memset(&ret, 0, sizeof(ret));
	ret.enter_seq = UINT64_MAX;
	s->frames_gap = 0;
	if (!s->have_cur || !s->probe)
		return -1;
	if (s->cur.kind == TM_EV_BWD || s->cur.kind == TM_EV_PARAM ||
	    (s->cur.kind == TM_EV_OP && s->cur.phase == TM_PHASE_BWD)) {
		uint32_t chain[TM_ADDRESS_MAX_SEGMENTS];
		int k = 0;

		for (n = tm_nodetab_get(s->nodes, s->cur.node);
		     n && k < TM_ADDRESS_MAX_SEGMENTS && guard++ < 1000;
		     n = n->parent == TM_NODE_NONE ? NULL :
			 tm_nodetab_get(s->nodes, n->parent))
			chain[k++] = n->id;
		while (k > 0)
			frames_push(s, chain[--k], 0, UINT64_MAX, NULL);
		s->frames_valid = 1;
		return 0;
	}
	target = s->cur.seq;
	/* a distributed job's other ranks have call stacks of their own */
	rank = s->probe->ops->rank_of ? tm_session_rank(s) : -1;
	err = s->probe->ops->seek(s->probe, TM_SEEK_STEP, s->cur.step);
	while (err == TM_OK) {
		err = s->probe->ops->next_event(s->probe, TM_DIR_FWD, &rec);
		if (err != TM_OK)
			break;
		if (rec.type == TM_REC_GAP) {
			if (rec.u.gap.first_seq <= target &&
			    (rank < 0 || s->probe->ops->rank_of(s->probe,
								rec.u.gap.first_seq) == rank))
				s->frames_gap = 1;
			continue;
		}
		if (rec.type != TM_REC_EVENT)
			continue;
		if (rec.u.event.seq > target)
			break;
		/* another rank's, or the end of this rank's previous step */
		if (rank >= 0 && (tm_event_rank(s, &rec.u.event) != rank ||
				  rec.u.event.step != s->cur.step))
			continue;
		if (rec.u.event.kind == TM_EV_ENTER) {
			frames_push(s, rec.u.event.node, rec.u.event.call,
				    rec.u.event.seq, &rec.u.event);
		} else if (rec.u.event.kind == TM_EV_EXIT || rec.u.event.kind == TM_EV_RAISE) {
			/* the playhead's own exit: its call stays, inputs and all */
			if (rec.u.event.seq == target && s->nframes &&
			    s->frames[s->nframes - 1].node == rec.u.event.node &&
			    s->frames[s->nframes - 1].call == rec.u.event.call) {
				ret = s->frames[s->nframes - 1];
				s->frames[s->nframes - 1].have_enter = 0;
			}
			frames_pop(s, rec.u.event.node, rec.u.event.call);
		}
		if (rec.u.event.seq == target)
			break;
	}
	if (s->cur.kind == TM_EV_EXIT || s->cur.kind == TM_EV_RAISE) {
		/* The call that is returning (or raising) is still frame 0. */
		if (frames_push(s, s->cur.node, s->cur.call, ret.enter_seq, NULL) == 0) {
			s->frames[s->nframes - 1].returning = 1;
			s->frames[s->nframes - 1].enter = ret.enter;
			s->frames[s->nframes - 1].have_enter = ret.have_enter;
			ret.have_enter = 0;
		}
	}
	if (ret.have_enter)
		tm_event_release(&ret.enter);
	tm_cursor_restore(s);
	s->frames_valid = 1;
	return 0;
}

/* ------------------------------------------------------------- progress */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * Long scans show where they are on a terminal, after a second, so that a
 * user knows tmdb is working (and that Ctrl-C stops it).  Called every few
 * thousand events; done=1 wipes the line.
 */
void tm_progress(struct tm_session *s, uint64_t seq, int done)
{
	struct tm_probe_info info;
	double t;

	if (done) {
		if (s->progress_shown) {
			fprintf(s->err, "\r%60s\r", "");
			fflush(s->err);
		}
		s->progress_shown = 0;
		s->scan_t0 = 0;
		return;
	}
	if (!s->set.progress || s->out_fn || !isatty(fileno(s->err)))
		return;
	t = now_s();
	if (s->scan_t0 == 0) {
		s->scan_t0 = t;
		return;
	}
	if (t - s->scan_t0 < 1.0 || t - s->progress_last < 0.25)
		return;
	s->progress_last = t;
	s->probe->ops->describe(s->probe, &info);
	if (info.summary && info.summary->last_seq > 0)
		fprintf(s->err, "\rScanning: seq %" PRIu64 " of %" PRIu64
			" (%.0f%%)  ", seq, info.summary->last_seq,
			100.0 * (double)seq / (double)info.summary->last_seq);
	else
		fprintf(s->err, "\rScanning: seq %" PRIu64 "  ", seq);
	fflush(s->err);
	s->progress_shown = 1;
}

/* A front end (MI, DAP) leaves: the session's output and callbacks are the
 * plain CLI's again. */
void tm_session_detach_ui(struct tm_session *s)
{
	s->ui = NULL;
	s->out_fn = NULL;
	s->on_stop = NULL;
	s->on_bp_event = NULL;
	s->on_resume = NULL;
	s->on_inferior = NULL;
}
