/*
 * mi.c -- the GDB/MI front end: output redirection, the command loop, and
 * the structured records (*stopped, =breakpoint-*, frames, breakpoints).
 *
 * Command handlers print through tm_out()/tm_error(); here s->out_fn turns
 * that text into MI: console text becomes ~"..." stream records, one per
 * line, and error text becomes the ^error message of the command that
 * printed it (a &"..." log record when the command still succeeded).
 * While a command runs its out-of-band records are held, because the result
 * record must come first when the command resumed the trace:
 *
 *   -exec-continue              any other command
 *   ^running                    ~"..." / =breakpoint-... records
 *   *running,thread-id="all"    ^done,... or ^error,msg="..."
 *   (gdb)                       (gdb)
 *   ~"..."  (the CLI's stop text)
 *   *stopped,reason=...
 *   (gdb)
 *
 * Stops and breakpoint changes come in through s->on_stop and
 * s->on_bp_event, which cmd-run.c and cmd-break.c call for the CLI code
 * the MI commands share.  Replay is synchronous: a resume has finished
 * (stopped) by the time the command returns.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "tmdb.h"
#include "mi.h"

static struct mi *mi_of(struct tm_session *s)
{
	return s->ui;
}

/* Writes and empties a buffer of whole records. */
static void emit(struct mi_buf *b)
{
	if (b->len)
		fwrite(b->p, 1, b->len, stdout);
	mi_buf_reset(b);
}

/* Console text up to the last newline (all: everything) into ~ records. */
void mi_flush_console(struct mi *m, int all)
{
	size_t n = m->con.len, start = 0, i;

	if (!all) {
		while (n && m->con.p[n - 1] != '\n')
			n--;
	}
	for (i = 0; i < n; i++) {
		if (m->con.p[i] == '\n' || i + 1 == n) {
			mi_stream(&m->oob, '~', m->con.p + start, i + 1 - start);
			start = i + 1;
		}
	}
	if (n) {
		memmove(m->con.p, m->con.p + n, m->con.len - n);
		m->con.len -= n;
		m->con.p[m->con.len] = 0;
	}
	if (!m->in_cmd)
		emit(&m->oob);
}

static void mi_out_fn(struct tm_session *s, int is_err, const char *text)
{
	struct mi *m = mi_of(s);
	size_t n = strlen(text);

	if (is_err) {
		if (m->in_cmd) {
			mi_buf_add(&m->err, text, n);
		} else {
			mi_flush_console(m, 1);
			mi_stream(&m->oob, '&', text, n);
			emit(&m->oob);
		}
		return;
	}
	if (m->sink) {
		mi_buf_add(m->sink, text, n);
		return;
	}
	mi_buf_add(&m->con, text, n);
	if (memchr(text, '\n', n))
		mi_flush_console(m, 0);
}

/* ------------------------------------------------------------- helpers */

int mi_error(struct mi *m, const char *fmt, ...)
{
	char buf[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	mi_buf_puts(&m->err, buf);
	mi_buf_puts(&m->err, "\n");
	return -1;
}

/*
 * Runs a CLI command line through the command table (the MI commands share
 * the CLI's code).  Its console text goes to sink, or becomes ~ records
 * when sink is NULL; its errors go to the running command's error text.
 */
int mi_cli(struct mi *m, struct mi_buf *sink, const char *fmt, ...)
{
	struct mi_buf line = { 0 };
	struct mi_buf *old = m->sink;
	va_list ap;
	int n, rc;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -1;
	line.p = malloc((size_t)n + 1);
	if (!line.p)
		return mi_error(m, "Out of memory.");
	va_start(ap, fmt);
	vsnprintf(line.p, (size_t)n + 1, fmt, ap);
	va_end(ap);
	m->sink = sink;
	/* GDB's "server " prefix (keeps a command out of the history, which
	 * front ends use) means nothing more here. */
	rc = tm_execute(m->s, strncmp(line.p, "server ", 7) ? line.p :
			line.p + 7, 0);
	m->sink = old;
	free(line.p);
	return rc;
}

/* file, fullname (when the file is found) and line of a node's source. */
static void source_keys(struct mi *m, struct mi_buf *b, uint32_t id)
{
	const struct tm_node *n = tm_source_node(m->s, id);
	char *path, real[PATH_MAX];

	if (!n)
		return;
	mi_kv(b, "file", n->file);
	path = tm_resolve_source(m->s, n->file);
	if (path && realpath(path, real))
		mi_kv(b, "fullname", real);
	free(path);
	mi_kvf(b, "line", "%u", n->line);
}

/*
 * frame={level,addr,func,args,file,fullname,line,arch} as GDB has it, and
 * the graph's keys: node, type, call; the playhead's frame 0 adds the
 * event's kind and phase.  addr is the event's seq (level 0) or the seq of
 * the call's ENTER, in hex: front ends want an address-looking value.
 * Returns -1 when there is no such frame.
 */
int mi_frame(struct mi *m, struct mi_buf *b, const char *key, size_t level)
{
	struct tm_session *s = m->s;
	const struct tm_node *n;
	uint32_t node, call;
	uint64_t addr;
	char func[TM_ADDRESS_MAX + 16];

	if (!s->have_cur)
		return -1;
	if (tm_frames_compute(s) || !s->nframes) {
		if (level)
			return -1;
		node = s->cur.node;
		call = s->cur.call;
		addr = s->cur.seq;
	} else {
		const struct frame *f;

		if (level >= s->nframes)
			return -1;
		f = &s->frames[s->nframes - 1 - level];
		node = f->node;
		call = f->call;
		addr = level == 0 || f->enter_seq == UINT64_MAX ? s->cur.seq :
								   f->enter_seq;
	}
	n = tm_nodetab_get(s->nodes, node);
	if (call > 1)
		snprintf(func, sizeof(func), "%s#%u", tm_node_name(s, node), call);
	else
		snprintf(func, sizeof(func), "%s", tm_node_name(s, node));
	mi_open(b, key, '{');
	mi_kvf(b, "level", "%zu", level);
	mi_kvf(b, "addr", "0x%016" PRIx64, addr);
	mi_kv(b, "func", func);
	mi_open(b, "args", '[');
	mi_close(b, ']');
	source_keys(m, b, node);
	mi_kv(b, "arch", "tmdb");
	mi_kv(b, "node", tm_node_name(s, node));
	if (n && n->type)
		mi_kv(b, "type", n->type);
	mi_kvf(b, "call", "%u", call ? call : 1);
	if (level == 0) {
		mi_kv(b, "kind", tm_event_kind_name(s->cur.kind));
		mi_kv(b, "phase", tm_phase_name(s->cur.phase));
	}
	mi_close(b, '}');
	return 0;
}

/* One statistic as text, the way print shows it. */
static void stat_text(const struct tm_tensor *t, int i, char *buf, size_t len)
{
	struct tm_tql_value v;

	memset(&v, 0, sizeof(v));
	if (tm_stat_table[i].integer) {
		v.type = TM_TQL_INT;
		v.v.i = (int64_t)t->stat[i];
	} else {
		v.type = TM_TQL_NUM;
		v.v.d = t->stat[i];
	}
	tm_tql_format(&v, buf, len);
}

/* tensor={slot,dtype,shape=[...],<stat>=...} for the focus tensor. */
void mi_tensor(struct mi *m, struct mi_buf *b, const char *key)
{
	const struct tm_tensor *t = tm_focus_tensor(m->s);
	char buf[64];
	int i;

	if (!t)
		return;
	mi_open(b, key, '{');
	tm_slot_format(t->slot, buf, sizeof(buf));
	mi_kv(b, "slot", buf);
	mi_kv(b, "dtype", tm_dtype_name(t->dtype));
	mi_open(b, "shape", '[');
	for (i = 0; i < t->rank && i < TM_MAX_RANK; i++) {
		snprintf(buf, sizeof(buf), "%" PRId64, t->shape[i]);
		mi_val(b, buf);
	}
	mi_close(b, ']');
	for (i = 0; i < TM_STAT__COUNT; i++) {
		if (!(t->have & TM_STAT_BIT(i)))
			continue;
		stat_text(t, i, buf, sizeof(buf));
		mi_kv(b, tm_stat_table[i].name, buf);
	}
	mi_close(b, '}');
}

static const char *disp_name(int disp)
{
	return disp == BP_DEL ? "del" : disp == BP_DIS ? "dis" : "keep";
}

/*
 * Do all the nodes a breakpoint matched run the same forward() as node
 * first (model.layers.*.mlp: one MLP class)?  Then the breakpoint has that
 * source line, and an IDE can show it in the margin.
 */
static int same_source(struct mi *m, const struct bp *bp, uint32_t first)
{
	const struct tm_node *a = tm_source_node(m->s, first), *n;
	uint32_t i;

	if (!a)
		return 0;
	for (i = first + 1; i < bp->nkinds; i++) {
		if (!bp->kinds[i])
			continue;
		n = tm_source_node(m->s, i);
		if (!n || n->line != a->line || strcmp(n->file, a->file))
			return 0;
	}
	return 1;
}

/*
 * bkpt={number,type,disp,enabled,addr,func,file,fullname,line,
 * thread-groups,cond,times,ignore,original-location} as GDB's, plus nodes
 * (how many graph nodes the address or pattern matched).  A breakpoint on
 * one node, or on nodes sharing one forward(), gets that source; a
 * pattern gets addr="<MULTIPLE>".
 */
void mi_bkpt(struct mi *m, struct mi_buf *b, const char *key, struct bp *bp)
{
	uint32_t i, one = TM_NODE_NONE;

	mi_open(b, key, '{');
	mi_kvf(b, "number", "%d", bp->num);
	mi_kv(b, "type", bp->type == BP_WATCH ? "watchpoint" : "breakpoint");
	mi_kv(b, "disp", disp_name(bp->disp));
	mi_kv(b, "enabled", bp->enabled ? "y" : "n");
	if (bp->type == BP_WATCH) {
		mi_kv(b, "what", bp->where);
	} else {
		for (i = 0; i < bp->nkinds; i++) {
			if (bp->kinds && bp->kinds[i]) {
				one = i;
				break;
			}
		}
		if (bp->nmatch != 1)
			mi_kv(b, "addr", "<MULTIPLE>");
		mi_kv(b, "func", bp->where);
		if (one != TM_NODE_NONE && same_source(m, bp, one))
			source_keys(m, b, one);
		mi_kvf(b, "nodes", "%u", bp->nmatch);
	}
	mi_open(b, "thread-groups", '[');
	mi_val(b, "i1");
	mi_close(b, ']');
	if (bp->cond_src)
		mi_kv(b, "cond", bp->cond_src);
	mi_kvf(b, "times", "%" PRIu64, bp->hits);
	if (bp->ignore)
		mi_kvf(b, "ignore", "%" PRIu64, bp->ignore);
	if (bp->ncmds) {
		size_t k;

		mi_open(b, "script", '[');
		for (k = 0; k < bp->ncmds; k++)
			mi_val(b, bp->cmds[k]);
		mi_close(b, ']');
	}
	mi_kv(b, "original-location", bp->where);
	mi_close(b, '}');
}

/* ------------------------------------------------------------- events */

static void mi_on_bp_event(struct tm_session *s, int what, struct bp *b)
{
	struct mi *m = mi_of(s);

	if (m->quiet_bp)
		return;
	mi_flush_console(m, 0);
	if (what == TM_BP_DELETED) {
		mi_buf_printf(&m->oob, "=breakpoint-deleted,id=\"%d\"\n", b->num);
	} else {
		mi_buf_puts(&m->oob, what == TM_BP_CREATED ? "=breakpoint-created," :
			    "=breakpoint-modified,");
		mi_bkpt(m, &m->oob, "bkpt", b);
		mi_buf_puts(&m->oob, "\n");
	}
	if (!m->in_cmd)
		emit(&m->oob);
}

static void signal_keys(struct mi_buf *b, int signo)
{
	const char *meaning = NULL;
	const char *name = tm_signal_name(signo, &meaning);

	if (name) {
		mi_kv(b, "signal-name", name);
		mi_kv(b, "signal-meaning", meaning);
		return;
	}
	mi_kvf(b, "signal-name", "SIG%d", signo);
	mi_kv(b, "signal-meaning", "Unknown signal");
}

static void watch_value(const struct tm_val *v, char *buf, size_t len)
{
	if (v->kind == VAL_SCALAR && v->v.type == TM_TQL_UNKNOWN &&
	    !v->v.unknown_reason)
		snprintf(buf, len, "<unknown>");
	else
		tm_val_format(v, buf, len);
}

/*
 * *stopped for one stop.  The end of the trace is the end of the run:
 * exited-normally when the recording was closed properly, exited with
 * exit-code "01" when it was cut off (the recording process died without
 * a crash record).  The playhead's position (frame, step, seq, tensor) is
 * reported where GDB reports the stop location.
 */
static void mi_on_stop(struct tm_session *s, const struct tm_stop *st)
{
	struct mi *m = mi_of(s);
	struct mi_buf *b = &m->oob;
	char ob[1024], nb[1024];
	int where = 1;

	mi_flush_console(m, 0);
	/* A second stop in one command: breakpoint commands resumed. */
	if (m->stopped)
		mi_buf_puts(b, "*running,thread-id=\"all\"\n");
	if (st->why == STOP_BREAK && st->bpnum && !m->quiet_bp) {
		struct bp *bp = tm_bp_find(s, st->bpnum);

		/* times="N" changed (GDB says so too) */
		if (bp) {
			mi_buf_puts(b, "=breakpoint-modified,");
			mi_bkpt(m, b, "bkpt", bp);
			mi_buf_puts(b, "\n");
		}
	}
	mi_buf_puts(b, "*stopped");
	switch (st->why) {
	case STOP_BREAK:
		mi_kv(b, "reason", "breakpoint-hit");
		mi_kv(b, "disp", disp_name(st->bpdisp));
		mi_kvf(b, "bkptno", "%d", st->bpnum);
		break;
	case STOP_WATCH:
		mi_kv(b, "reason", "watchpoint-trigger");
		mi_open(b, "wpt", '{');
		mi_kvf(b, "number", "%d", st->bpnum);
		mi_kv(b, "exp", st->where);
		mi_close(b, '}');
		watch_value(st->old, ob, sizeof(ob));
		watch_value(st->new_, nb, sizeof(nb));
		mi_open(b, "value", '{');
		mi_kv(b, "old", ob);
		mi_kv(b, "new", nb);
		mi_close(b, '}');
		break;
	case STOP_STEP:
		if (st->finish) {
			mi_kv(b, "reason", "function-finished");
		} else {
			mi_kv(b, "reason", "end-stepping-range");
		}
		break;
	case STOP_START:
		mi_kv(b, "reason", "no-history");
		break;
	case STOP_INTERRUPT:
		mi_kv(b, "reason", "signal-received");
		signal_keys(b, SIGINT);
		break;
	case STOP_CRASH:
		mi_kv(b, "reason", "signal-received");
		signal_keys(b, st->signo);
		break;
	case STOP_END: {
		struct tm_probe_info pi;

		memset(&pi, 0, sizeof(pi));
		s->probe->ops->describe(s->probe, &pi);
		if (pi.summary && (pi.summary->damaged || !pi.summary->complete)) {
			mi_kv(b, "reason", "exited");
			mi_kv(b, "exit-code", "01");
		} else {
			mi_kv(b, "reason", "exited-normally");
		}
		where = 0;
		break;
	}
	default:
		mi_kv(b, "reason", "end-stepping-range");
		break;
	}
	if (where && s->have_cur) {
		mi_frame(m, b, "frame", 0);
		if (st->why == STOP_STEP && st->finish && tm_focus_tensor(s)) {
			tm_tensor_format(tm_focus_tensor(s), nb, sizeof(nb));
			mi_kv(b, "return-value", nb);
		}
		mi_kvf(b, "step", "%" PRIu64, s->cur.step);
		mi_kvf(b, "seq", "%" PRIu64, s->cur.seq);
		mi_tensor(m, b, "tensor");
		mi_kv(b, "thread-id", "1");
		mi_kv(b, "stopped-threads", "all");
	}
	mi_buf_puts(b, "\n");
	m->stopped = 1;
	if (!m->in_cmd)
		emit(b);
}

/* ------------------------------------------------------------- the loop */

/* Error text without its last newline, for msg="...". */
static void error_text(struct mi *m, struct mi_buf *out)
{
	size_t n = m->err.len;

	while (n && m->err.p[n - 1] == '\n')
		n--;
	if (!n)
		mi_buf_cstr(out, "Command failed.", 15);
	else
		mi_buf_cstr(out, m->err.p, n);
}

/* Runs one input line and writes its records and the prompt. */
static void mi_handle(struct mi *m, const char *line, size_t len)
{
	struct mi_parse c;
	struct mi_buf out = { 0 };
	char perr[256];
	int rc;

	if (len == 0 || (len == strspn(line, " \t"))) {
		fputs("(gdb) \n", stdout);
		return;
	}
	mi_buf_reset(&m->oob);
	mi_buf_reset(&m->err);
	mi_buf_reset(&m->res);
	m->stopped = 0;
	m->undefined = 0;
	m->klass = NULL;
	m->in_cmd = 1;
	if (mi_parse(line, len, &c, perr, sizeof(perr))) {
		mi_error(m, "%s", perr);
		rc = -1;
	} else if (c.is_cli) {
		/* GDB echoes a CLI command given to MI as a log record. */
		struct mi_buf echo = { 0 };

		mi_buf_puts(&echo, c.op);
		mi_buf_puts(&echo, "\n");
		if (echo.p)
			mi_stream(&m->oob, '&', echo.p, echo.len);
		mi_buf_free(&echo);
		emit(&m->oob);       /* before ^running, as GDB has it */
		rc = mi_cli(m, NULL, "%s", c.op);
		if (m->s->quit)
			m->klass = "exit";
	} else {
		rc = mi_dispatch(m, &c);
	}
	mi_flush_console(m, 1);
	m->in_cmd = 0;
	if (m->stopped) {
		mi_buf_printf(&out, "%s^running\n*running,thread-id=\"all\"\n(gdb) \n",
			      c.token);
		emit(&out);
		if (m->err.len)
			mi_stream(&m->oob, '&', m->err.p, m->err.len);
		emit(&m->oob);
	} else {
		if (rc == 0 && m->err.len)
			mi_stream(&m->oob, '&', m->err.p, m->err.len);
		emit(&m->oob);
		mi_buf_puts(&out, c.token);
		if (rc) {
			mi_buf_puts(&out, "^error,msg=");
			error_text(m, &out);
			if (m->undefined)
				mi_buf_puts(&out, ",code=\"undefined-command\"");
		} else {
			mi_buf_printf(&out, "^%s", m->klass ? m->klass : "done");
			if (m->res.len) {
				mi_buf_puts(&out, ",");
				mi_buf_add(&out, m->res.p, m->res.len);
			}
		}
		mi_buf_puts(&out, "\n");
		emit(&out);
	}
	if (!m->s->quit)
		fputs("(gdb) \n", stdout);
	fflush(stdout);
	mi_buf_free(&out);
	mi_parse_free(&c);
}

/* Installs MI output on a new session (before init files and the trace). */
int tm_mi_init(struct tm_session *s, int version)
{
	struct mi *m = calloc(1, sizeof(*m));

	if (!m)
		return -1;
	m->s = s;
	m->version = version;
	m->next_var = 1;
	s->ui = m;
	s->out_fn = mi_out_fn;
	s->on_stop = mi_on_stop;
	s->on_bp_event = mi_on_bp_event;
	s->set.confirm = 0;
	s->set.pagination = 0;
	/* Front ends interrupt with SIGINT (or -exec-interrupt): a long scan
	 * stops where it is, tmdb does not die. */
	tm_install_sigint();
	fputs("=thread-group-added,id=\"i1\"\n", stdout);
	fflush(stdout);
	return 0;
}

/* Reads MI commands from stdin until -gdb-exit or the end of input. */
int tm_mi_run(struct tm_session *s)
{
	struct mi *m = mi_of(s);
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;

	if (!m)
		return 1;
	mi_flush_console(m, 1);
	fputs("(gdb) \n", stdout);
	fflush(stdout);
	while (!s->quit) {
		errno = 0;
		n = getline(&line, &cap, stdin);
		if (n < 0) {
			if (errno == EINTR && !feof(stdin)) {
				clearerr(stdin);
				tm_interrupted = 0;
				continue;
			}
			break;
		}
		while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
			line[--n] = 0;
		tm_interrupted = 0;
		if ((size_t)n > MI_LINE_MAX) {
			fputs("^error,msg=\"Command line too long.\"\n(gdb) \n", stdout);
			fflush(stdout);
			continue;
		}
		mi_handle(m, line, (size_t)n);
	}
	free(line);
	return s->quit ? s->exit_code : 0;
}

void tm_mi_done(struct tm_session *s)
{
	struct mi *m = mi_of(s);
	struct mi_setting *st;

	if (!m)
		return;
	mi_flush_console(m, 1);
	emit(&m->oob);
	fflush(stdout);
	mi_vars_free(m);
	while ((st = m->sets)) {
		m->sets = st->next;
		free(st->name);
		free(st->value);
		free(st);
	}
	free(m->exec_args);
	mi_buf_free(&m->oob);
	mi_buf_free(&m->con);
	mi_buf_free(&m->err);
	mi_buf_free(&m->res);
	free(m);
	s->ui = NULL;
	s->out_fn = NULL;
	s->on_stop = NULL;
	s->on_bp_event = NULL;
}
