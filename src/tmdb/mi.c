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
 *
 * A live process is not: the model may run for minutes before the next
 * stop.  So when a forward scan is about to wait on one (s->on_resume),
 * ^running, *running and the prompt go out at once, and *stopped follows
 * when the scan ends, as GDB does.  Meanwhile a thread reads stdin: an
 * -exec-interrupt that arrives while the model runs (the next command in
 * line) is answered ^done at the stop and raises SIGINT in the main
 * thread, which makes the probe pause the model at its next event (every
 * wait on the probe ends at Ctrl-C), so the stop is signal-received
 * SIGINT.  Other commands wait for the stop, in order.  The program's
 * coming and going (inferior.c, cmd-live.c: s->on_inferior) becomes
 * =thread-group-started/exited, and the end of a program tmdb started is
 * exited-normally, exited with its exit code or exited-signalled.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tmdb.h"
#include "live.h"
#include "mi.h"

static struct mi *mi_of(struct tm_session *s)
{
	return s->ui;
}

int mi_is_live(struct mi *m)
{
	return tm_probe_is_live(m->s->probe);
}

/* ------------------------------------------------------------- input */

/*
 * stdin, read by a thread of its own so that -exec-interrupt can be seen
 * while the main thread waits on a live model.  Lines wait in buf; the
 * main thread takes them one by one.  The reader never writes output.
 */
#define INPUT_MAX (MI_LINE_MAX + 8192)

struct mi_input {
	pthread_t thread, main;
	int fd;                 /* the front end's commands come from here */
	int notify[2];          /* new-ui: a byte here when a line came */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int wake[2];            /* a byte here ends the reader (input_stop) */
	char buf[INPUT_MAX];
	size_t len;
	int eof;
	int stop;               /* input_stop: the reader ends */
	int skipping;           /* dropping the rest of an over-long line */
	int running;            /* a live resume waits: take an -exec-interrupt */
	int taken;              /* one was taken; its token: */
	char token[MI_TOKEN_MAX + 1];
};

/*
 * With the lock held: if a live resume waits and the next line is
 * [TOKEN]-exec-interrupt [OPTIONS], takes it and interrupts the main
 * thread (SIGINT: tm_interrupted, and its poll() returns).
 */
static void take_interrupt(struct mi_input *in)
{
	static const char op[] = "-exec-interrupt";
	const char *nl, *p = in->buf;
	size_t t;

	if (!in->running || in->taken || in->skipping)
		return;
	nl = memchr(in->buf, '\n', in->len);
	if (!nl)
		return;
	t = strspn(p, "0123456789");
	if (t > MI_TOKEN_MAX || (size_t)(nl - p) < t + sizeof(op) - 1 ||
	    memcmp(p + t, op, sizeof(op) - 1))
		return;
	p += t + sizeof(op) - 1;
	if (p != nl && *p != ' ' && *p != '\t' && *p != '\r')
		return;
	memcpy(in->token, in->buf, t);
	in->token[t] = 0;
	in->taken = 1;
	in->running = 0;
	t = (size_t)(nl + 1 - in->buf);
	memmove(in->buf, in->buf + t, in->len - t);
	in->len -= t;
	pthread_kill(in->main, SIGINT);
}

static void *reader_main(void *arg)
{
	struct mi_input *in = arg;
	char chunk[4096];
	ssize_t n;

	for (;;) {
		struct pollfd pf[2];

		pf[0].fd = in->fd;
		pf[0].events = POLLIN;
		pf[1].fd = in->wake[0];
		pf[1].events = POLLIN;
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			n = -1;
		} else if (pf[1].revents) {
			return NULL;    /* tmdb is done with its input */
		} else {
			n = read(in->fd, chunk, sizeof(chunk));
			if (n < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
		}
		pthread_mutex_lock(&in->lock);
		if (n <= 0) {
			in->eof = 1;
			pthread_cond_broadcast(&in->cond);
			pthread_mutex_unlock(&in->lock);
			if (in->notify[1] >= 0)
				while (write(in->notify[1], "x", 1) < 0 && errno == EINTR)
					;
			return NULL;
		}
		while (in->len + (size_t)n > sizeof(in->buf) && !in->stop)
			pthread_cond_wait(&in->cond, &in->lock);
		if (in->stop) {
			pthread_mutex_unlock(&in->lock);
			return NULL;
		}
		memcpy(in->buf + in->len, chunk, (size_t)n);
		in->len += (size_t)n;
		take_interrupt(in);
		pthread_cond_broadcast(&in->cond);
		pthread_mutex_unlock(&in->lock);
		if (in->notify[1] >= 0)
			while (write(in->notify[1], "x", 1) < 0 && errno == EINTR)
				;
	}
}

/*
 * Starts the reader of fd with SIGINT blocked in it: SIGINT is the main
 * thread's.  notify: a pipe gets a byte whenever input came (new-ui: the
 * CLI's loop polls it); else the main thread waits on the condition.
 */
static struct mi_input *input_start(int fd, int notify)
{
	struct mi_input *in = calloc(1, sizeof(*in));
	sigset_t block, old;

	if (!in)
		return NULL;
	in->main = pthread_self();
	in->fd = fd;
	in->notify[0] = in->notify[1] = -1;
	if (pipe(in->wake)) {
		free(in);
		return NULL;
	}
	if (notify && pipe(in->notify)) {
		close(in->wake[0]);
		close(in->wake[1]);
		free(in);
		return NULL;
	}
	if (notify) {
		fcntl(in->notify[0], F_SETFD, FD_CLOEXEC);
		fcntl(in->notify[1], F_SETFD, FD_CLOEXEC);
		fcntl(in->notify[0], F_SETFL, O_NONBLOCK);
		fcntl(in->notify[1], F_SETFL, O_NONBLOCK);
	}
	/* not the program's (inferior.c forks) */
	fcntl(in->wake[0], F_SETFD, FD_CLOEXEC);
	fcntl(in->wake[1], F_SETFD, FD_CLOEXEC);
	pthread_mutex_init(&in->lock, NULL);
	pthread_cond_init(&in->cond, NULL);
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	if (pthread_create(&in->thread, NULL, reader_main, in)) {
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		close(in->wake[0]);
		close(in->wake[1]);
		if (in->notify[0] >= 0) {
			close(in->notify[0]);
			close(in->notify[1]);
		}
		pthread_mutex_destroy(&in->lock);
		pthread_cond_destroy(&in->cond);
		free(in);
		return NULL;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return in;
}

static void input_stop(struct mi_input *in)
{
	if (!in)
		return;
	pthread_mutex_lock(&in->lock);
	in->stop = 1;
	pthread_cond_broadcast(&in->cond);
	pthread_mutex_unlock(&in->lock);
	while (write(in->wake[1], "x", 1) < 0 && errno == EINTR)
		;
	pthread_join(in->thread, NULL);
	close(in->wake[0]);
	close(in->wake[1]);
	if (in->notify[0] >= 0) {
		close(in->notify[0]);
		close(in->notify[1]);
	}
	pthread_mutex_destroy(&in->lock);
	pthread_cond_destroy(&in->cond);
	free(in);
}

/*
 * The next line into *line (NUL-terminated, newline stripped; *cap grows),
 * its length in *len.
 * Returns 1, 0 at the end of input, 2 for a line longer than
 * MI_LINE_MAX (dropped), or 3 when no whole line has come and !wait.
 */
static int input_line(struct mi_input *in, char **line, size_t *cap,
		      size_t *len, int wait)
{
	int rc = 0;

	pthread_mutex_lock(&in->lock);
	for (;;) {
		char *nl = memchr(in->buf, '\n', in->len);
		size_t n;

		if (nl || (in->eof && in->len && !in->skipping)) {
			n = nl ? (size_t)(nl - in->buf) : in->len;
			if (in->skipping || n > MI_LINE_MAX) {
				in->skipping = 0;
				n += nl ? 1 : 0;
				memmove(in->buf, in->buf + n, in->len - n);
				in->len -= n;
				rc = 2;
				break;
			}
			if (n + 1 > *cap) {
				char *p = realloc(*line, n + 1);

				if (!p) {
					rc = 0;
					break;
				}
				*line = p;
				*cap = n + 1;
			}
			memcpy(*line, in->buf, n);
			(*line)[n] = 0;
			*len = n;
			n += nl ? 1 : 0;
			memmove(in->buf, in->buf + n, in->len - n);
			in->len -= n;
			rc = 1;
			break;
		}
		if (in->len > MI_LINE_MAX) {
			in->skipping = 1;
			in->len = 0;
			pthread_cond_broadcast(&in->cond);
			continue;
		}
		if (in->eof) {
			rc = in->skipping ? 2 : 0;
			in->skipping = 0;
			in->len = 0;
			break;
		}
		if (!wait) {
			rc = 3;
			break;
		}
		pthread_cond_wait(&in->cond, &in->lock);
	}
	pthread_cond_broadcast(&in->cond);
	pthread_mutex_unlock(&in->lock);
	return rc;
}

/* Writes and empties a buffer of whole records. */
static void emit(struct mi *m, struct mi_buf *b)
{
	if (b->len)
		fwrite(b->p, 1, b->len, m->fp);
	mi_buf_reset(b);
	if (m->secondary && !m->in_cmd)
		fflush(m->fp);  /* the command line's doing: nothing else flushes */
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
		emit(m, &m->oob);
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
			emit(m, &m->oob);
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
	rc = tm_execute(m->s, line.p, 0);
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
 * event's kind and phase, and at an op event the op's name and index (its
 * line is the op's).  addr is the event's seq (level 0) or the seq of
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
	/* at an op, frame 0's line is the op's own (its site's), as GDB's
	 * frame line is the pc's */
	if (level == 0 && tm_op_site(s, &s->cur))
		source_keys(m, b, s->cur.node);
	else
		source_keys(m, b, node);
	mi_kv(b, "arch", "tmdb");
	mi_kv(b, "node", tm_node_name(s, node));
	if (n && n->type)
		mi_kv(b, "type", n->type);
	mi_kvf(b, "call", "%u", call ? call : 1);
	if (level == 0) {
		const struct tm_node *op = tm_op_site(s, &s->cur);

		mi_kv(b, "kind", tm_event_kind_name(s->cur.kind));
		mi_kv(b, "phase", tm_phase_name(s->cur.phase));
		if (op) {
			mi_kv(b, "op", op->type ? op->type : "?");
			mi_kvf(b, "op_index", "%u", s->cur.op_index);
		}
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

static void tensor_tuple(struct mi_buf *b, const char *key, const struct tm_tensor *t);

/* tensor={slot,dtype,shape=[...],<stat>=...} for the focus tensor. */
void mi_tensor(struct mi *m, struct mi_buf *b, const char *key)
{
	const struct tm_tensor *t = tm_focus_tensor(m->s);

	if (t)
		tensor_tuple(b, key, t);
}

/*
 * With a reference loaded (compare): reference={...} of the aligned
 * reference event's tensor in the focus tensor's slot, as tensor={...},
 * or reference={unknown="REASON"} where there is none.
 */
void mi_reference(struct mi *m, struct mi_buf *b, const char *key)
{
	const struct tm_tensor *t = tm_focus_tensor(m->s), *rt;
	const struct tm_event *rev = NULL;
	struct tm_compare_state cs;
	uint32_t why = 0;
	char words[128];

	if (!t || !m->s->have_cur || !tm_compare_loaded(m->s, &cs))
		return;
	rt = tm_compare_reference(m->s, &m->s->cur, t->slot, 0, &rev, &why);
	if (rt) {
		tensor_tuple(b, key, rt);
		return;
	}
	tm_tql_reason_format(why, words, sizeof(words));
	mi_open(b, key, '{');
	mi_kv(b, "unknown", words);
	mi_close(b, '}');
}

static void tensor_tuple(struct mi_buf *b, const char *key, const struct tm_tensor *t)
{
	char buf[64];
	int i;

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
		/* a key is letters, '_' and '-' for Emacs's MI parser, which
		 * fails on the whole record otherwise: l2 is "norm" here */
		mi_kv(b, i == TM_STAT_L2 ? "norm" : tm_stat_table[i].name, buf);
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
	for (i = first + 1; i < bp->core.nkinds; i++) {
		if (!bp->core.kinds[i])
			continue;
		n = tm_source_node(m->s, i);
		if (!n || n->line != a->line || strcmp(n->file, a->file))
			return 0;
	}
	return 1;
}

/*
 * thread-groups: the inferiors (ranks) the breakpoint has nodes in, "i1"
 * for one process.  A pending breakpoint or a watchpoint: every one.
 */
static void bkpt_groups(struct mi *m, struct mi_buf *b, const struct bp *bp)
{
	struct tm_probe *p = m->s->probe;
	const tm_nodetab *nodes = m->s->nodes;
	char id[24];
	uint32_t k;
	size_t i;
	int rank;

	mi_open(b, "thread-groups", '[');
	if (!p || !tm_probe_multi_sub(p, 0, NULL))
		mi_val(b, "i1");
	for (i = 0; p && tm_probe_multi_sub(p, i, &rank); i++) {
		int on = bp->type == BP_WATCH || bp->pending || !bp->core.kinds;

		for (k = 0; !on && k < bp->core.nkinds && nodes; k++) {
			const struct tm_node *n = bp->core.kinds[k] ? tm_nodetab_get(nodes, k) : NULL;

			on = n && tm_address_node_rank(n->address, NULL) == rank;
		}
		if (on) {
			snprintf(id, sizeof(id), "i%zu", i + 1);
			mi_val(b, id);
		}
	}
	mi_close(b, ']');
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
	mi_kv(b, "type", bp->type == BP_WATCH ? "watchpoint" :
	      bp->catch_kind ? "catchpoint" : "breakpoint");
	mi_kv(b, "disp", disp_name(bp->disp));
	mi_kv(b, "enabled", bp->enabled ? "y" : "n");
	if (bp->catch_kind) {
		/* GDB: what="exception throw",catch-type="throw" */
		char what[128];

		snprintf(what, sizeof(what), "%s%s%s%s", tm_catch_kind_name(bp->catch_kind),
			 bp->catch_kind == TM_CATCH_EXCEPTION ? " raise" : "",
			 bp->catch_arg ? " " : "", bp->catch_arg ? bp->catch_arg : "");
		mi_kv(b, "what", what);
		mi_kv(b, "catch-type", tm_catch_kind_name(bp->catch_kind));
	} else if (bp->type == BP_WATCH) {
		mi_kv(b, "what", bp->where);
	} else if (bp->pending) {
		/* GDB's pending breakpoint: no location until nodes come */
		mi_kv(b, "addr", "<PENDING>");
		mi_kv(b, "pending", bp->where);
	} else {
		for (i = 0; i < bp->core.nkinds; i++) {
			if (bp->core.kinds && bp->core.kinds[i]) {
				one = i;
				break;
			}
		}
		/* one node: its id, in hex like GDB's addresses */
		if (bp->core.nmatch != 1)
			mi_kv(b, "addr", "<MULTIPLE>");
		else
			mi_kvf(b, "addr", "0x%016" PRIx32, one);
		mi_kv(b, "func", bp->where);
		if (one != TM_NODE_NONE && same_source(m, bp, one))
			source_keys(m, b, one);
		mi_kvf(b, "nodes", "%u", bp->core.nmatch);
	}
	bkpt_groups(m, b, bp);
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
	if (bp->src_file) {
		char loc[PATH_MAX + 16];

		snprintf(loc, sizeof(loc), "%s:%u", bp->src_file, bp->src_line);
		mi_kv(b, "original-location", loc);
	} else {
		mi_kv(b, "original-location", bp->where);
	}
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
		emit(m, &m->oob);
}

/*
 * Pending breakpoints that bound since the last look (the program
 * announced their nodes): =breakpoint-modified, as GDB says when a
 * pending breakpoint resolves.  skip: a breakpoint whose stop reports it.
 */
static void pending_sync(struct mi *m, int skip)
{
	struct bp *b;
	size_t i, o;

	for (i = o = 0; i < m->npend; i++) {
		b = tm_bp_find(m->s, m->pend[i]);
		if (b && b->pending) {
			m->pend[o++] = m->pend[i];
			continue;
		}
		if (!b || b->num == skip)
			continue;
		mi_flush_console(m, 0);
		mi_buf_puts(&m->oob, "=breakpoint-modified,");
		mi_bkpt(m, &m->oob, "bkpt", b);
		mi_buf_puts(&m->oob, "\n");
	}
	m->npend = o;
	for (b = m->s->bps; b; b = b->next) {
		if (!b->pending)
			continue;
		for (i = 0; i < m->npend && m->pend[i] != b->num; i++)
			;
		if (i < m->npend)
			continue;
		if (m->npend == m->cappend) {
			size_t cap = m->cappend ? 2 * m->cappend : 8;
			int *np = realloc(m->pend, cap * sizeof(*np));

			if (!np)
				return;
			m->pend = np;
			m->cappend = cap;
		}
		m->pend[m->npend++] = b->num;
	}
}

/*
 * A forward scan is about to wait on a live model: the command's result is
 * ^running now (with what it printed so far), and an -exec-interrupt read
 * meanwhile is taken.
 */
static void mi_on_resume(struct tm_session *s)
{
	struct mi *m = mi_of(s);

	if (m->secondary && !m->in_cmd && mi_is_live(m) && !m->quiet_stop) {
		/* the command line resumed the model: MI hears of it too, and
		 * an -exec-interrupt (termdebug's :Stop) is taken meanwhile */
		if (!m->cli_running) {
			pending_sync(m, 0);
			emit(m, &m->oob);
			fputs("*running,thread-id=\"all\"\n", m->fp);
			fflush(m->fp);
			m->cli_running = 1;
		}
		goto take;
	}
	if (!m->in_cmd || !mi_is_live(m) || m->quiet_stop)
		return;
	if (!m->running_sent) {
		pending_sync(m, 0);
		mi_flush_console(m, 0);
		emit(m, &m->oob);
		fprintf(m->fp, "%s^running\n*running,thread-id=\"all\"\n(gdb) \n", m->token);
		fflush(m->fp);
		m->running_sent = 1;
	}
take:
	if (m->in) {
		pthread_mutex_lock(&m->in->lock);
		m->in->running = 1;
		take_interrupt(m->in);
		pthread_mutex_unlock(&m->in->lock);
	}
}

/* The model stopped: an -exec-interrupt taken meanwhile gets its ^done. */
static void resume_over(struct mi *m)
{
	int taken = 0;
	char tok[MI_TOKEN_MAX + 1];

	if (!m->in)
		return;
	pthread_mutex_lock(&m->in->lock);
	m->in->running = 0;
	if (m->in->taken) {
		taken = 1;
		memcpy(tok, m->in->token, sizeof(tok));
		m->in->taken = 0;
	}
	pthread_mutex_unlock(&m->in->lock);
	if (taken) {
		emit(m, &m->oob);
		fprintf(m->fp, "%s^done\n(gdb) \n", tok);
		fflush(m->fp);
	}
}

/* =thread-group-started/exited as GDB writes them (with thread 1). */
static void mi_on_inferior(struct tm_session *s, int what, long pid, int status)
{
	struct mi *m = mi_of(s);
	struct mi_buf *b = &m->oob;

	if ((s->quit || m->ended) && !m->in_cmd)
		return;         /* tmdb quits: nothing may follow ^exit */
	mi_flush_console(m, 0);
	if (what == TM_INF_STARTED) {
		m->exit_known = 0;
		m->end_said = 0;
		mi_buf_printf(b, "=thread-group-started,id=\"i1\",pid=\"%ld\"\n", pid);
		mi_buf_puts(b, "=thread-created,id=\"1\",group-id=\"i1\"\n");
	} else {
		mi_buf_puts(b, "=thread-exited,id=\"1\",group-id=\"i1\"\n");
		mi_buf_puts(b, "=thread-group-exited,id=\"i1\"");
		if (what == TM_INF_EXITED) {
			m->exit_known = 1;
			m->exit_status = status;
			if (WIFEXITED(status) && WEXITSTATUS(status))
				mi_kvf(b, "exit-code", "0%o", (unsigned)WEXITSTATUS(status));
			else if (WIFEXITED(status))
				mi_kv(b, "exit-code", "0");
		}
		mi_buf_puts(b, "\n");
	}
	if (!m->in_cmd || m->running_sent)
		emit(m, b);
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

	if (m->quiet_stop)
		return;
	if (st->why == STOP_STEP && st->finish && m->in_cmd && !m->fin_held) {
		/* a typed finish prints "Value returned is $N = ..." after
		 * the stop, and GDB's *stopped comes after that text and names
		 * $N (gdb-result-var); -exec-finish prints no text */
		m->fin_held = 1;
		m->fin_hist = m->s->nhist;
		return;
	}
	mi_flush_console(m, 0);
	resume_over(m);
	pending_sync(m, st->why == STOP_BREAK ? st->bpnum : 0);
	if (m->secondary && !m->in_cmd) {
		/* the command line moved the playhead */
		if (!m->cli_running)
			mi_buf_puts(b, "*running,thread-id=\"all\"\n");
		m->cli_running = 0;
	} else if (m->stopped) {
		/* A second stop in one command: breakpoint commands resumed. */
		mi_buf_puts(b, "*running,thread-id=\"all\"\n");
	}
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
		int ended = m->exit_known && mi_is_live(m);

		if (mi_is_live(m)) {
			/* said once: moving on from here is refused
			 * (mi_program_gone), not a second exit */
			m->end_said = 1;
			m->end_seq = s->have_cur ? s->cur.seq : 0;
		}
		if (ended && WIFSIGNALED(m->exit_status)) {
			/* a program tmdb started died: GDB's exited-signalled */
			mi_kv(b, "reason", "exited-signalled");
			signal_keys(b, WTERMSIG(m->exit_status));
		} else if (ended && WIFEXITED(m->exit_status) &&
			   WEXITSTATUS(m->exit_status)) {
			mi_kv(b, "reason", "exited");
			mi_kvf(b, "exit-code", "0%o",
			       (unsigned)WEXITSTATUS(m->exit_status));
		} else if (mi_is_live(m)) {
			mi_kv(b, "reason", "exited-normally");
		} else if (pi.summary && (pi.summary->damaged || !pi.summary->complete)) {
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
			if (m->fin_hist < s->nhist)
				mi_kvf(b, "gdb-result-var", "$%zu", s->nhist);
			tm_tensor_format(tm_focus_tensor(s), nb, sizeof(nb));
			mi_kv(b, "return-value", nb);
		}
		mi_kvf(b, "step", "%" PRIu64, s->cur.step);
		mi_kvf(b, "seq", "%" PRIu64, s->cur.seq);
		/* a distributed job: which rank stopped (tmdb's extra key) */
		if (s->probe->ops->nranks)
			mi_kvf(b, "rank", "%d", tm_session_rank(s));
		mi_tensor(m, b, "tensor");
		mi_reference(m, b, "reference");
	}
	if (st->why == STOP_CRASH && st->crash) {
		uint32_t k;

		/* where the probe's handler saw the process die */
		mi_open(b, "crash", '{');
		if (st->crash->node != TM_NODE_NONE)
			mi_kv(b, "node", tm_node_name(s, st->crash->node));
		mi_kvf(b, "step", "%" PRIu64, st->crash->step);
		mi_kvf(b, "seq", "%" PRIu64, st->crash->seq);
		mi_open(b, "frames", '[');
		for (k = 0; k < st->crash->nframes && k < TM_MAX_FRAMES; k++)
			if (st->crash->frames[k])
				mi_val(b, st->crash->frames[k]);
		mi_close(b, ']');
		mi_close(b, '}');
	}
	if (where && s->have_cur) {
		mi_kv(b, "thread-id", "1");
		mi_kv(b, "stopped-threads", "all");
	}
	mi_buf_puts(b, "\n");
	m->stopped = 1;
	if (!m->in_cmd || m->running_sent)
		emit(m, b);
}

/*
 * A live program whose end was reported, with the playhead still there:
 * GDB's "The program is not being run." for what would move it forward
 * (an -exec-continue, or an -exec-interrupt that raced the end, would
 * otherwise report a second exit).
 */
int mi_program_gone(struct mi *m)
{
	struct tm_session *s = m->s;

	return m->end_said && mi_is_live(m) && tm_probe_closed(s->probe) &&
	       (!s->have_cur || s->cur.seq == m->end_seq);
}

/* -target-attach: the model is paused; GDB reports the attach as a stop. */
void mi_attached(struct mi *m)
{
	struct mi_buf sink = { 0 };

	/*
	 * The model is paused before its next event; taking that event gives
	 * the stop a frame, which front ends want (GDB's has one).
	 */
	m->quiet_stop = 1;
	if (!m->s->have_cur)
		(void)mi_cli(m, &sink, "step");
	m->quiet_stop = 0;
	mi_buf_free(&sink);
	mi_buf_reset(&m->err);
	mi_buf_puts(&m->post, "*stopped");
	if (m->s->have_cur) {
		mi_frame(m, &m->post, "frame", 0);
		mi_kvf(&m->post, "step", "%" PRIu64, m->s->cur.step);
		mi_kvf(&m->post, "seq", "%" PRIu64, m->s->cur.seq);
	} else {
		/* what GDB said before its stops had frames */
		mi_kv(&m->post, "reason", "signal-received");
		mi_kv(&m->post, "signal-name", "0");
		mi_kv(&m->post, "signal-meaning", "Signal 0");
	}
	mi_kv(&m->post, "thread-id", "1");
	mi_kv(&m->post, "stopped-threads", "all");
	mi_buf_puts(&m->post, "\n");
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
		fputs("(gdb) \n", m->fp);
		return;
	}
	mi_buf_reset(&m->oob);
	mi_buf_reset(&m->err);
	mi_buf_reset(&m->res);
	mi_buf_reset(&m->post);
	m->running_sent = 0;
	m->token[0] = 0;
	m->stopped = 0;
	m->undefined = 0;
	m->klass = NULL;
	m->in_cmd = 1;
	if (mi_parse(line, len, &c, perr, sizeof(perr))) {
		mi_error(m, "%s", perr);
		rc = -1;
	} else if ((memcpy(m->token, c.token, sizeof(m->token)), c.is_cli)) {
		/* GDB echoes a CLI command given to MI as a log record. */
		struct mi_buf echo = { 0 };

		mi_buf_puts(&echo, c.op);
		mi_buf_puts(&echo, "\n");
		if (echo.p)
			mi_stream(&m->oob, '&', echo.p, echo.len);
		mi_buf_free(&echo);
		emit(m, &m->oob);       /* before ^running, as GDB has it */
		rc = mi_cli(m, NULL, "%s", c.op);
		if (m->s->quit)
			m->klass = "exit";
	} else {
		/* the parameters' text: GDB hands -exec-arguments' to set args */
		const char *p = line + strspn(line, "0123456789");

		p += 1 + strcspn(p + 1, " \t");
		m->raw = p + strspn(p, " \t");
		rc = mi_dispatch(m, &c);
		m->raw = NULL;
	}
	mi_flush_console(m, 1);
	if (m->fin_held) {
		struct tm_stop st;

		memset(&st, 0, sizeof(st));
		st.why = STOP_STEP;
		st.finish = 1;
		mi_on_stop(m->s, &st);
		m->fin_held = 0;
		m->fin_hist = SIZE_MAX;
	}
	pending_sync(m, 0);
	resume_over(m);
	m->in_cmd = 0;
	if (m->running_sent) {
		/* ^running went out when the live model started: the rest
		 * (and its errors) follow, and a stop the front end waits for */
		if (m->err.len)
			mi_stream(&m->oob, '&', m->err.p, m->err.len);
		if (!m->stopped) {
			mi_buf_puts(&m->oob, "*stopped");
			if (m->s->have_cur)
				mi_frame(m, &m->oob, "frame", 0);
			mi_kv(&m->oob, "thread-id", "1");
			mi_kv(&m->oob, "stopped-threads", "all");
			mi_buf_puts(&m->oob, "\n");
		}
		emit(m, &m->oob);
	} else if (m->stopped) {
		mi_buf_printf(&out, "%s^running\n*running,thread-id=\"all\"\n(gdb) \n",
			      c.token);
		emit(m, &out);
		if (m->err.len)
			mi_stream(&m->oob, '&', m->err.p, m->err.len);
		emit(m, &m->oob);
	} else {
		if (rc == 0 && m->err.len)
			mi_stream(&m->oob, '&', m->err.p, m->err.len);
		emit(m, &m->oob);
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
		emit(m, &out);
	}
	if (!m->s->quit)
		fputs("(gdb) \n", m->fp);
	if (m->post.len && !m->s->quit) {
		emit(m, &m->post);
		fputs("(gdb) \n", m->fp);
	}
	fflush(m->fp);
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
	m->fp = stdout;
	m->fin_hist = SIZE_MAX;
	s->ui = m;
	s->out_fn = mi_out_fn;
	s->on_stop = mi_on_stop;
	s->on_bp_event = mi_on_bp_event;
	s->on_resume = mi_on_resume;
	s->on_inferior = mi_on_inferior;
	/* The program tmdb starts must not read the front end's commands. */
	if (tm_live_get(s))
		s->live->stdin_null = 1;
	s->set.confirm = 0;
	s->set.pagination = 0;
	/* Front ends interrupt with SIGINT (or -exec-interrupt): a long scan
	 * stops where it is, tmdb does not die. */
	tm_install_sigint();
	fputs("=thread-group-added,id=\"i1\"\n", m->fp);
	fflush(m->fp);
	return 0;
}

/*
 * GDB's "new-ui mi TTY" (Vim's termdebug in its default mode): the command
 * line stays on the terminal and a second UI speaks MI on TTY.  The CLI's
 * input loop polls tm_mi_ui_fd() beside the terminal and runs what came
 * with tm_mi_ui_poll(); while an MI command runs its text is MI's, and
 * every stop, breakpoint change and program start or end is announced on
 * TTY whichever UI caused it, as GDB does.
 */
int tm_mi_new_ui(struct tm_session *s, const char *interp, const char *tty)
{
	struct mi *m;
	int fd, version;

	if (!strcmp(interp, "mi") || !strcmp(interp, "mi3"))
		version = 3;
	else if (!strcmp(interp, "mi2"))
		version = 2;
	else if (!strcmp(interp, "mi4"))
		version = 4;
	else {
		tm_error(s, "Interpreter `%s' unrecognized: tmdb's second UI speaks "
			 "MI (mi, mi2, mi3, mi4).", interp);
		return -1;
	}
	if (s->ui) {
		tm_error(s, "This session has its MI (or DAP) already; new-ui adds "
			 "one beside the command line.");
		return -1;
	}
	fd = open(tty, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		tm_error(s, "%s: %s.", tty, strerror(errno));
		return -1;
	}
	m = calloc(1, sizeof(*m));
	if (!m || !(m->fp = fdopen(fd, "w"))) {
		tm_error(s, "%s: %s.", tty, strerror(ENOMEM));
		free(m);
		close(fd);
		return -1;
	}
	m->s = s;
	m->version = version;
	m->next_var = 1;
	m->secondary = 1;
	m->fin_hist = SIZE_MAX;
	m->in = input_start(fd, 1);
	if (!m->in) {
		tm_error(s, "Cannot start the input thread of %s.", tty);
		fclose(m->fp);
		free(m);
		return -1;
	}
	s->ui = m;
	s->on_stop = mi_on_stop;
	s->on_bp_event = mi_on_bp_event;
	s->on_resume = mi_on_resume;
	s->on_inferior = mi_on_inferior;
	fputs("=thread-group-added,id=\"i1\"\n(gdb) \n", m->fp);
	fflush(m->fp);
	return 0;
}

int tm_mi_ui_fd(struct tm_session *s)
{
	struct mi *m = mi_of(s);

	return m && m->secondary && m->in ? m->in->notify[0] : -1;
}

/* Runs the whole lines the second UI has; 0 at its end of input. */
int tm_mi_ui_poll(struct tm_session *s)
{
	struct mi *m = mi_of(s);
	char drain[64], *line = NULL;
	size_t cap = 0, n;
	int got = 1;

	if (!m || !m->secondary)
		return 1;
	while (read(m->in->notify[0], drain, sizeof(drain)) > 0)
		;
	while (!s->quit) {
		got = input_line(m->in, &line, &cap, &n, 0);
		if (got == 0 || got == 3)
			break;
		tm_interrupted = 0;
		if (got == 2) {
			fputs("^error,msg=\"Command line too long.\"\n(gdb) \n", m->fp);
			fflush(m->fp);
			continue;
		}
		while (n > 0 && line[n - 1] == '\r')
			line[--n] = 0;
		/* the command's text is MI's; the terminal's again after it */
		s->out_fn = mi_out_fn;
		mi_handle(m, line, n);
		s->out_fn = NULL;
	}
	free(line);
	return got != 0;
}

/* Reads MI commands from stdin until -gdb-exit or the end of input. */
int tm_mi_run(struct tm_session *s)
{
	struct mi *m = mi_of(s);
	char *line = NULL;
	size_t cap = 0, n;
	int got;

	if (!m)
		return 1;
	mi_flush_console(m, 1);
	fputs("(gdb) \n", m->fp);
	fflush(m->fp);
	m->in = input_start(0, 0);
	if (!m->in) {
		fputs("&\"Cannot start the input thread.\\n\"\n", m->fp);
		return 1;
	}
	while (!s->quit) {
		got = input_line(m->in, &line, &cap, &n, 1);
		if (got == 0)
			break;
		tm_interrupted = 0;
		if (got == 2) {
			fputs("^error,msg=\"Command line too long.\"\n(gdb) \n", m->fp);
			fflush(m->fp);
			continue;
		}
		while (n > 0 && line[n - 1] == '\r')
			line[--n] = 0;
		mi_handle(m, line, n);
	}
	m->ended = 1;
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
	emit(m, &m->oob);
	fflush(m->fp);
	input_stop(m->in);
	if (m->secondary)
		fclose(m->fp);  /* its fd is the reader's: closed after it ended */
	free(m->pend);
	mi_buf_free(&m->post);
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
	tm_session_detach_ui(s);
}
