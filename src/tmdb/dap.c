/*
 * dap.c -- tmdb --interpreter=dap: the Debug Adapter Protocol on stdin and
 * stdout, as `gdb -i=dap`, for VS Code and the other DAP clients.
 *
 * The session is the CLI's: movement requests run the command table's
 * continue, next, step, finish, reverse-step and reverse-continue; stops
 * come back through s->on_stop and become `stopped` events; breakpoints
 * are made with the one typed call (tm_bp_create/tm_bp_change), source
 * lines resolved by tm_source_location as MI's are.  What commands print
 * is collected (s->out_fn) and goes out as `output` events.
 *
 * Threads are ranks (thread 1 for one process); the stack is the module
 * call stack at the playhead (bt); each frame's scopes are the focus
 * tensor (frame 0), the call's inputs and outputs and the module's own
 * parameters, every tensor expandable into its statistics, shape and
 * histogram.  evaluate is TQL for watch and hover, and a CLI command line
 * in the debug console (repl).
 *
 * As in mi.c a thread reads stdin, so that a `pause` that comes while the
 * model runs (or a long replay scan) is seen: it raises SIGINT in the main
 * thread, which makes the scan stop where it is (reason "pause").  Every
 * other request waits its turn.  Writes to stdout hold out_lock, because
 * the reader answers pause and the program's output arrives on a thread of
 * its own (a pipe that is the program's stdout and stderr).
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
#include "dap.h"

enum dbp_kind {
	DBP_SOURCE = 0,
	DBP_FUNCTION
};

/* A breakpoint the client set: its DAP id is tmdb's number. */
struct dap_bp {
	struct dap_bp *next;
	int kind;               /* enum dbp_kind */
	int id;                 /* the client's id: num */
	int num;                /* tmdb's number, 0: not made (unverified) */
	int verified;           /* as the client was last told */
	char *file;             /* DBP_SOURCE: the path the client gave */
	unsigned line;
	char *log;              /* a log point's message, NULL */
};

/* What a variablesReference stands for (valid until the next resume). */
enum ref_kind {
	REF_FOCUS = 1,          /* the focus tensor's fields */
	REF_INPUTS,             /* a frame's call: its input tensors */
	REF_OUTPUTS,            /* its outputs */
	REF_PARAMS,             /* the module's parameters */
	REF_TENSOR,             /* one tensor's fields */
	REF_SHAPE,              /* its dimensions */
	REF_HIST                /* its histogram's bins */
};

struct dap_ref {
	int kind;
	size_t level;           /* REF_INPUTS..REF_PARAMS: the frame */
	char expr[TM_ADDRESS_MAX + 32];  /* REF_TENSOR: what evaluates to it */
	struct tm_tensor t;     /* REF_TENSOR..REF_HIST, payload dropped */
};

/* A message read, waiting for the main thread. */
struct dap_msg {
	struct dap_msg *next;
	json_t *j;
};

struct dap {
	struct tm_session *s;
	pthread_mutex_t out_lock;
	long next_seq;

	/* input (reader thread) */
	pthread_t reader, main;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int wake[2];
	struct dap_msg *head, **tail;
	int eof, stop_reader, running;
	int starting;           /* run is starting the program: a pause waits */
	int pause_pending;      /* for the model's first event (on_resume) */
	int reader_on;

	/* the program's output */
	int out_pipe[2];
	pthread_t out_thread;
	int out_thread_on;

	/* the running request's text */
	struct mi_buf con, err;
	int quiet;              /* drop what commands print (lookups) */

	struct dap_bp *bps;
	struct dap_ref *refs;
	size_t nrefs, caprefs;

	/* the last stop of the running command */
	int stopped;
	int why, bpnum, signo;
	int log_hit;            /* it was a log point: go on */
	int exited, exit_code;  /* the program ended (exited event sent) */
	int gone;               /* the live process went: terminated */
	int terminated;         /* terminated event sent */

	int launched;           /* a trace, a program or a process */
	int is_program;         /* launch started a program */
	int is_attach;
	int stop_on_entry;
	int quit;
	char goto_loc[TM_ADDRESS_MAX + 1];  /* gotoTargets' location */
};

static struct dap *dap_of(struct tm_session *s)
{
	return s->ui;
}

/* ------------------------------------------------------------- output */

static void send_msg(struct dap *d, json_t *j)
{
	char *buf;
	size_t len;

	pthread_mutex_lock(&d->out_lock);
	json_object_set_new(j, "seq", json_integer(d->next_seq++));
	buf = dap_frame_encode(j, &len);
	if (buf) {
		fwrite(buf, 1, len, stdout);
		fflush(stdout);
		free(buf);
	}
	pthread_mutex_unlock(&d->out_lock);
	json_decref(j);
}

static void send_event(struct dap *d, const char *event, json_t *body)
{
	json_t *j = json_object();

	json_object_set_new(j, "type", json_string("event"));
	json_object_set_new(j, "event", json_string(event));
	if (body)
		json_object_set_new(j, "body", body);
	send_msg(d, j);
}

static void send_output(struct dap *d, const char *category, const char *text,
			size_t n)
{
	if (!n)
		return;
	send_event(d, "output", json_pack("{s:s,s:s%}", "category", category,
					  "output", text, n));
}

static void send_response(struct dap *d, json_int_t req_seq, const char *cmd,
			  json_t *body)
{
	json_t *j = json_object();

	json_object_set_new(j, "type", json_string("response"));
	json_object_set_new(j, "request_seq", json_integer(req_seq));
	json_object_set_new(j, "success", json_true());
	json_object_set_new(j, "command", json_string(cmd));
	if (body)
		json_object_set_new(j, "body", body);
	send_msg(d, j);
}

static void send_error(struct dap *d, json_int_t req_seq, const char *cmd,
		       const char *text)
{
	json_t *j = json_object();
	char buf[2048];
	size_t n;

	snprintf(buf, sizeof(buf), "%s", text && *text ? text : "Command failed.");
	n = strlen(buf);
	while (n && buf[n - 1] == '\n')
		buf[--n] = 0;
	json_object_set_new(j, "type", json_string("response"));
	json_object_set_new(j, "request_seq", json_integer(req_seq));
	json_object_set_new(j, "success", json_false());
	json_object_set_new(j, "command", json_string(cmd));
	json_object_set_new(j, "message", json_string(buf));
	json_object_set_new(j, "body", json_pack("{s:{s:i,s:s,s:b}}", "error",
						 "id", 1, "format", buf,
						 "showUser", 0));
	send_msg(d, j);
}

/* The running request's error text (and forget it). */
static char *take_err(struct dap *d)
{
	char *t = strndup(d->err.p ? d->err.p : "", d->err.len);

	mi_buf_reset(&d->err);
	return t;
}

/* Console text so far as an output event. */
static void flush_console(struct dap *d)
{
	if (d->con.len)
		send_output(d, "console", d->con.p, d->con.len);
	mi_buf_reset(&d->con);
}

static void dap_out_fn(struct tm_session *s, int is_err, const char *text)
{
	struct dap *d = dap_of(s);

	if (d->quiet)
		return;
	mi_buf_puts(is_err ? &d->err : &d->con, text);
}

/* ------------------------------------------------------------- input */

/* Reader: a `pause` (or disconnect) while a command runs interrupts it. */
static int urgent(struct dap *d, json_t *j)
{
	const char *cmd;
	json_int_t seq;
	json_t *args;

	if ((!d->running && !d->starting) ||
	    dap_request_parts(j, &cmd, &seq, &args, NULL, 0))
		return 0;
	if (!strcmp(cmd, "pause")) {
		send_response(d, seq, cmd, NULL);
		/* SIGINT while run waits for the program's probe would kill
		 * it (the CLI's Ctrl-C): the pause waits for its first event */
		if (d->starting)
			d->pause_pending = 1;
		else
			pthread_kill(d->main, SIGINT);
		return 1;
	}
	if ((!strcmp(cmd, "disconnect") || !strcmp(cmd, "terminate")) && d->running)
		pthread_kill(d->main, SIGINT);
	return 0;
}

static void *reader_main(void *arg)
{
	struct dap *d = arg;
	char *buf = NULL, chunk[65536], err[256];
	size_t len = 0, cap = 0, used;

	for (;;) {
		struct pollfd pf[2];
		ssize_t n;
		json_t *j;
		int rc;

		pf[0].fd = 0;
		pf[0].events = POLLIN;
		pf[1].fd = d->wake[0];
		pf[1].events = POLLIN;
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			n = -1;
		} else if (pf[1].revents) {
			break;
		} else {
			n = read(0, chunk, sizeof(chunk));
			if (n < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
		}
		if (n <= 0)
			break;
		if (len + (size_t)n > cap) {
			size_t nc = cap ? cap : 65536;
			char *p;

			while (nc < len + (size_t)n)
				nc *= 2;
			p = realloc(buf, nc);
			if (!p)
				break;
			buf = p;
			cap = nc;
		}
		memcpy(buf + len, chunk, (size_t)n);
		len += (size_t)n;
		while ((rc = dap_frame_take(buf, len, &used, &j, err, sizeof(err))) != 0) {
			memmove(buf, buf + used, len - used);
			len -= used;
			if (rc < 0) {
				char line[300];

				snprintf(line, sizeof(line), "tmdb: %s\n", err);
				send_output(d, "stderr", line, strlen(line));
				continue;
			}
			pthread_mutex_lock(&d->lock);
			if (urgent(d, j)) {
				pthread_mutex_unlock(&d->lock);
				json_decref(j);
				continue;
			}
			{
				struct dap_msg *m = calloc(1, sizeof(*m));

				if (m) {
					m->j = j;
					*d->tail = m;
					d->tail = &m->next;
				} else {
					json_decref(j);
				}
			}
			pthread_cond_broadcast(&d->cond);
			pthread_mutex_unlock(&d->lock);
		}
	}
	free(buf);
	pthread_mutex_lock(&d->lock);
	d->eof = 1;
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

static json_t *next_msg(struct dap *d)
{
	struct dap_msg *m;
	json_t *j = NULL;

	pthread_mutex_lock(&d->lock);
	while (!d->head && !d->eof)
		pthread_cond_wait(&d->cond, &d->lock);
	if ((m = d->head)) {
		d->head = m->next;
		if (!d->head)
			d->tail = &d->head;
		j = m->j;
		free(m);
	}
	pthread_mutex_unlock(&d->lock);
	return j;
}

static void set_running(struct dap *d, int on)
{
	pthread_mutex_lock(&d->lock);
	/* a program not connected yet: starting until on_resume */
	d->starting = on && d->is_program && !tm_probe_is_live(d->s->probe);
	d->running = on && !d->starting;
	if (!on)
		d->pause_pending = 0;
	pthread_mutex_unlock(&d->lock);
}

/* A scan is about to wait on the live model: from here a pause is SIGINT,
 * and one that came while the program started takes effect now. */
static void dap_on_resume(struct tm_session *s)
{
	struct dap *d = dap_of(s);

	pthread_mutex_lock(&d->lock);
	if (d->starting) {
		d->starting = 0;
		d->running = 1;
	}
	if (d->pause_pending) {
		d->pause_pending = 0;
		tm_interrupted = 1;
	}
	pthread_mutex_unlock(&d->lock);
}

/* The program's stdout and stderr: a pipe, read into output events. */
static void *out_main(void *arg)
{
	struct dap *d = arg;
	char buf[4096];

	for (;;) {
		struct pollfd pf[2];
		ssize_t n;

		pf[0].fd = d->out_pipe[0];
		pf[0].events = POLLIN;
		pf[1].fd = d->wake[0];
		pf[1].events = POLLIN;
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return NULL;
		}
		if (pf[0].revents & POLLIN) {
			n = read(d->out_pipe[0], buf, sizeof(buf));
			if (n > 0) {
				send_output(d, "stdout", buf, (size_t)n);
				continue;
			}
			if (n < 0 && errno == EINTR)
				continue;
			return NULL;
		}
		if (pf[1].revents || (pf[0].revents & (POLLHUP | POLLERR)))
			return NULL;
	}
}

/* The program tmdb starts writes into a pipe we read (its "terminal"). */
static int program_output(struct dap *d)
{
	struct tm_live *lv = tm_live_get(d->s);
	char path[64];
	sigset_t block, old;

	if (!lv)
		return -1;
	lv->stdin_null = 1;
	if (d->out_thread_on)
		return 0;
	if (pipe(d->out_pipe))
		return -1;
	fcntl(d->out_pipe[0], F_SETFD, FD_CLOEXEC);
	fcntl(d->out_pipe[1], F_SETFD, FD_CLOEXEC);
	/* the child opens it by name, as a terminal it was given */
	snprintf(path, sizeof(path), "/proc/%ld/fd/%d", (long)getpid(), d->out_pipe[1]);
	free(lv->tty);
	lv->tty = strdup(path);
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	d->out_thread_on = !pthread_create(&d->out_thread, NULL, out_main, d);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return 0;
}

/* ------------------------------------------------------------- references */

static void refs_clear(struct dap *d)
{
	d->nrefs = 0;
}

/* A new reference (1-based), or 0. */
static int ref_add(struct dap *d, int kind, size_t level, const char *expr,
		   const struct tm_tensor *t)
{
	struct dap_ref *r;

	if (d->nrefs == d->caprefs) {
		size_t cap = d->caprefs ? 2 * d->caprefs : 64;
		struct dap_ref *p = realloc(d->refs, cap * sizeof(*p));

		if (!p)
			return 0;
		d->refs = p;
		d->caprefs = cap;
	}
	r = &d->refs[d->nrefs];
	memset(r, 0, sizeof(*r));
	r->kind = kind;
	r->level = level;
	if (expr)
		snprintf(r->expr, sizeof(r->expr), "%s", expr);
	if (t) {
		r->t = *t;
		r->t.payload = NULL;
		r->t.payload_len = 0;
	}
	return (int)++d->nrefs;
}

/* ------------------------------------------------------------- stops */

static struct dap_bp *dbp_of(struct dap *d, int num)
{
	struct dap_bp *b;

	for (b = d->bps; b && num; b = b->next)
		if (b->num == num)
			return b;
	return NULL;
}

static void format_value(struct dap *d, const char *expr, char *out, size_t len)
{
	struct tm_val v;

	memset(&v, 0, sizeof(v));
	d->quiet++;
	if (tm_evaluate(d->s, expr, &v)) {
		snprintf(out, len, "<error: %.200s>", expr);
	} else {
		tm_val_format(&v, out, len);
		tm_val_clear(&v);
	}
	d->quiet--;
}

/* A log point's message with each {EXPR} replaced by its value. */
static void log_message(struct dap *d, const char *msg)
{
	struct mi_buf b = { 0 };
	const char *p;

	for (p = msg; *p; p++) {
		const char *e;
		char expr[1024], val[1024];

		if (*p != '{' || !(e = strchr(p + 1, '}')) ||
		    (size_t)(e - p - 1) >= sizeof(expr)) {
			mi_buf_add(&b, p, 1);
			continue;
		}
		memcpy(expr, p + 1, (size_t)(e - p - 1));
		expr[e - p - 1] = 0;
		format_value(d, expr, val, sizeof(val));
		mi_buf_puts(&b, val);
		p = e;
	}
	mi_buf_puts(&b, "\n");
	send_output(d, "console", b.p, b.len);
	mi_buf_free(&b);
}

static void dap_on_stop(struct tm_session *s, const struct tm_stop *st)
{
	struct dap *d = dap_of(s);
	struct dap_bp *b;

	d->stopped = 1;
	d->why = st->why;
	d->bpnum = st->bpnum;
	d->signo = st->signo;
	d->log_hit = 0;
	if (st->why == STOP_BREAK && (b = dbp_of(d, st->bpnum)) && b->log) {
		log_message(d, b->log);
		d->log_hit = 1;
	}
}

static void dap_on_bp_event(struct tm_session *s, int what, struct bp *b)
{
	(void)s;
	(void)what;
	(void)b;
}

static void dap_on_inferior(struct tm_session *s, int what, long pid, int status)
{
	struct dap *d = dap_of(s);

	if (what == TM_INF_STARTED) {
		d->exited = 0;
		d->gone = 0;
		send_event(d, "process", json_pack("{s:s,s:I,s:b,s:s}",
			"name", s->live && s->live->prog ? s->live->prog : "program",
			"systemProcessId", (json_int_t)pid, "isLocalProcess", 1,
			"startMethod", d->is_attach ? "attach" : "launch"));
		return;
	}
	d->gone = 1;
	if (what == TM_INF_EXITED && !d->exited) {
		d->exited = 1;
		d->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) :
			       WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
		send_event(d, "exited", json_pack("{s:i}", "exitCode", d->exit_code));
	}
}

static int thread_id(struct dap *d)
{
	struct tm_session *s = d->s;

	if (s->probe && tm_probe_multi_sub(s->probe, 0, NULL))
		return tm_session_rank(s) + 1;
	return 1;
}

static void send_terminated(struct dap *d)
{
	if (d->terminated)
		return;
	d->terminated = 1;
	send_event(d, "terminated", NULL);
}

/* The stopped event for the last stop (or exited/terminated at the end of
 * a live process); reason overrides the stop's own. */
static void report_stop(struct dap *d, const char *reason)
{
	struct tm_session *s = d->s;
	const char *desc = NULL;
	json_t *body;
	char text[256];

	text[0] = 0;
	if (!reason) {
		switch (d->why) {
		case STOP_BREAK:
			reason = "breakpoint";
			if (dbp_of(d, d->bpnum) && dbp_of(d, d->bpnum)->kind == DBP_FUNCTION)
				reason = "function breakpoint";
			break;
		case STOP_WATCH:
			reason = "data breakpoint";
			break;
		case STOP_INTERRUPT:
			reason = "pause";
			break;
		case STOP_CRASH: {
			const char *meaning = NULL;
			const char *name = tm_signal_name(d->signo, &meaning);

			reason = "exception";
			snprintf(text, sizeof(text), "%s", name ? name : "signal");
			desc = meaning ? meaning : "The program crashed";
			break;
		}
		case STOP_ERROR:
			reason = "exception";
			desc = "The recording cannot be read further";
			break;
		case STOP_START:
			reason = "entry";
			desc = "Start of the recording";
			break;
		case STOP_END:
			reason = "end";
			desc = "End of the recording";
			break;
		default:
			reason = "step";
			break;
		}
	}
	if (d->why == STOP_END && (d->gone || tm_probe_is_live(s->probe))) {
		send_terminated(d);
		return;
	}
	body = json_pack("{s:s,s:i,s:b}", "reason", reason, "threadId",
			 thread_id(d), "allThreadsStopped", 1);
	if (desc)
		json_object_set_new(body, "description", json_string(desc));
	if (text[0])
		json_object_set_new(body, "text", json_string(text));
	if (d->why == STOP_BREAK && d->bpnum)
		json_object_set_new(body, "hitBreakpointIds", json_pack("[i]",
			dbp_of(d, d->bpnum) ? dbp_of(d, d->bpnum)->id : d->bpnum));
	send_event(d, "stopped", body);
}

static void bps_sync(struct dap *d);

/*
 * Runs a movement command; the stop it makes is reported.  A log point's
 * stop goes on in the same direction (continue, reverse-continue).
 */
static void resume(struct dap *d, const char *cmd, const char *reason)
{
	struct tm_session *s = d->s;
	int rc, again = !strcmp(cmd, "continue") || !strcmp(cmd, "run") ||
		!strcmp(cmd, "reverse-continue");
	const char *next = strcmp(cmd, "reverse-continue") ? "continue" :
			   "reverse-continue";
	char *e;

	refs_clear(d);
	d->stopped = 0;
	tm_interrupted = 0;
	set_running(d, 1);
	rc = tm_execute(s, cmd, 0);
	while (rc == 0 && again && d->stopped && d->log_hit && !tm_interrupted &&
	       !s->quit) {
		/* a log point says its message, not the CLI's stop */
		mi_buf_reset(&d->con);
		d->stopped = 0;
		rc = tm_execute(s, next, 0);
	}
	set_running(d, 0);
	tm_interrupted = 0;
	flush_console(d);
	e = take_err(d);
	if (*e)
		send_output(d, "stderr", e, strlen(e));
	free(e);
	if (d->gone && (!d->stopped || d->why == STOP_END || !s->have_cur)) {
		send_terminated(d);
		return;
	}
	bps_sync(d);
	if (d->stopped) {
		report_stop(d, reason);
	} else if (s->have_cur) {
		/* it failed where it stood: the client must see it stopped */
		d->why = STOP_NONE;
		report_stop(d, "pause");
	} else if (d->is_program && !tm_probe_is_live(s->probe)) {
		send_terminated(d);
	}
}

/* ------------------------------------------------------------- breakpoints */

static void dbp_free(struct dap_bp *b)
{
	free(b->file);
	free(b->log);
	free(b);
}

/* hitCondition: "N", "==N", ">=N" stop from the Nth hit on, ">N" after it. */
static int hit_ignore(const char *hc, uint64_t *ignore)
{
	const char *p = tm_skip_ws(hc);
	uint64_t n;
	int after = 0;
	char num[32];
	size_t l;

	if (!strncmp(p, ">=", 2) || !strncmp(p, "==", 2))
		p += 2;
	else if (*p == '>' && (p++, 1))
		after = 1;
	else if (*p == '=')
		p++;
	p = tm_skip_ws(p);
	l = strspn(p, "0123456789");
	if (!l || l >= sizeof(num) || *tm_skip_ws(p + l))
		return -1;
	memcpy(num, p, l);
	num[l] = 0;
	if (tm_parse_uint(num, &n))
		return -1;
	*ignore = after ? n : n ? n - 1 : 0;
	return 0;
}

/*
 * Makes db's tmdb breakpoint from the client's SourceBreakpoint or
 * FunctionBreakpoint (in): condition, hitCondition, the location.
 * Returns 0, or -1 with the reason in d->err.
 */
static int bp_create(struct dap *d, struct dap_bp *db, json_t *in, const char *name)
{
	struct tm_session *s = d->s;
	struct tm_bp_spec spec;
	const char *hc = json_string_value(json_object_get(in, "hitCondition"));
	char loc[PATH_MAX + 16];
	struct bp *b = NULL;

	tm_bp_spec_init(&spec);
	spec.cond = json_string_value(json_object_get(in, "condition"));
	if (hc && *hc && hit_ignore(hc, &spec.ignore)) {
		tm_error(s, "Hit condition must be N, >=N or >N.");
		return -1;
	}
	if (db->kind == DBP_SOURCE) {
		/* tm_bp_create finds the modules whose forward() holds the
		 * line; before they are known (a program to start), pending */
		snprintf(loc, sizeof(loc), "%s:%u", db->file, db->line);
		spec.location = loc;
	} else {
		spec.location = name;
	}
	if (tm_bp_create(s, &spec, &b))
		return -1;
	db->num = b->num;
	if (!db->id)
		db->id = b->num;
	db->verified = !b->pending;
	return 0;
}

/* The Breakpoint a response or event lists for db. */
static json_t *bp_json(struct dap_bp *db, const char *message)
{
	json_t *out = json_pack("{s:b}", "verified", db->verified);

	if (db->id)
		json_object_set_new(out, "id", json_integer(db->id));
	if (message && *message)
		json_object_set_new(out, "message", json_string(message));
	if (db->kind == DBP_SOURCE) {
		json_object_set_new(out, "line", json_integer(db->line));
		json_object_set_new(out, "source", json_pack("{s:s}", "path", db->file));
	}
	return out;
}

/* Makes one breakpoint; returns the Breakpoint the response lists. */
static json_t *make_bp(struct dap *d, int kind, const char *file, unsigned line,
		       const char *name, json_t *in)
{
	struct dap_bp *db = calloc(1, sizeof(*db));
	const char *log = json_string_value(json_object_get(in, "logMessage"));
	json_t *out;
	char *e;

	if (!db)
		return json_pack("{s:b,s:s}", "verified", 0, "message", "Out of memory.");
	db->kind = kind;
	db->line = line;
	db->file = file ? strdup(file) : NULL;
	db->log = log && *log ? strdup(log) : NULL;
	db->next = d->bps;
	d->bps = db;
	if (bp_create(d, db, in, name)) {
		e = take_err(d);
		out = bp_json(db, *e ? e : "Cannot set the breakpoint.");
		free(e);
	} else {
		out = bp_json(db, db->verified ? NULL : "Pending: no node matches "
			      "yet; it binds as the program's modules appear.");
	}
	mi_buf_reset(&d->con);
	return out;
}

/*
 * After a stop: breakpoints that bound since (pending ones, source lines
 * among them, as the program's modules came) are verified; the client
 * hears of each (breakpoint event, reason changed).
 */
static void bps_sync(struct dap *d)
{
	struct dap_bp *db;

	for (db = d->bps; db; db = db->next) {
		struct bp *b;

		b = db->num ? tm_bp_find(d->s, db->num) : NULL;
		if (b && (!b->pending) != db->verified) {
			db->verified = !b->pending;
			send_event(d, "breakpoint", json_pack("{s:s,s:o}", "reason",
				"changed", "breakpoint", bp_json(db, NULL)));
		}
	}
	mi_buf_reset(&d->con);
	mi_buf_reset(&d->err);
}


/* Deletes the client's breakpoints of a kind (and file). */
static void drop_bps(struct dap *d, int kind, const char *file)
{
	struct dap_bp **pp = &d->bps, *b;

	while ((b = *pp)) {
		if (b->kind != kind || (file && (!b->file || strcmp(b->file, file)))) {
			pp = &b->next;
			continue;
		}
		*pp = b->next;
		if (b->num) {
			struct bp *tb = tm_bp_find(d->s, b->num);

			if (tb)
				tm_bp_delete(d->s, tb);
		}
		dbp_free(b);
	}
}

static int req_set_breakpoints(struct dap *d, json_int_t seq, const char *cmd,
			       json_t *args)
{
	json_t *src = json_object_get(args, "source"), *list, *out, *e;
	const char *path = json_string_value(json_object_get(src, "path"));
	size_t i;

	if (!path)
		path = json_string_value(json_object_get(src, "name"));
	if (!path) {
		send_error(d, seq, cmd, "setBreakpoints needs a source path.");
		return 0;
	}
	drop_bps(d, DBP_SOURCE, path);
	list = json_object_get(args, "breakpoints");
	out = json_array();
	json_array_foreach(list, i, e) {
		json_int_t line = json_integer_value(json_object_get(e, "line"));

		json_array_append_new(out, make_bp(d, DBP_SOURCE, path,
						   line > 0 ? (unsigned)line : 0, NULL, e));
	}
	send_response(d, seq, cmd, json_pack("{s:o}", "breakpoints", out));
	return 0;
}

static int req_set_function_breakpoints(struct dap *d, json_int_t seq,
					const char *cmd, json_t *args)
{
	json_t *list = json_object_get(args, "breakpoints"), *out, *e;
	size_t i;

	drop_bps(d, DBP_FUNCTION, NULL);
	out = json_array();
	json_array_foreach(list, i, e) {
		const char *name = json_string_value(json_object_get(e, "name"));

		json_array_append_new(out, name ? make_bp(d, DBP_FUNCTION, NULL, 0,
							   name, e) :
				      json_pack("{s:b,s:s}", "verified", 0,
						"message", "No name."));
	}
	send_response(d, seq, cmd, json_pack("{s:o}", "breakpoints", out));
	return 0;
}

/* ------------------------------------------------------------- stack */

/* Frame LEVEL's node and call; -1 when there is none. */
static int frame_at(struct tm_session *s, size_t level, uint32_t *node,
		    uint32_t *call)
{
	if (!s->have_cur)
		return -1;
	if (tm_frames_compute(s) || !s->nframes) {
		if (level)
			return -1;
		*node = s->cur.node;
		*call = s->cur.call;
		return 0;
	}
	if (level >= s->nframes)
		return -1;
	*node = s->frames[s->nframes - 1 - level].node;
	*call = s->frames[s->nframes - 1 - level].call;
	return 0;
}

static size_t frame_count(struct tm_session *s)
{
	if (!s->have_cur)
		return 0;
	return tm_frames_compute(s) || !s->nframes ? 1 : s->nframes;
}

/* NODE or NODE#CALL, as addresses name a call. */
static void call_name(struct tm_session *s, uint32_t node, uint32_t call,
		      char *buf, size_t len)
{
	if (call > 1)
		snprintf(buf, len, "%s#%u", tm_node_name(s, node), call);
	else
		snprintf(buf, len, "%s", tm_node_name(s, node));
}

static json_t *source_of(struct tm_session *s, uint32_t node, unsigned *line)
{
	const struct tm_node *n = tm_source_node(s, node);
	char *path, real[PATH_MAX];
	const char *base;
	json_t *src;

	*line = 0;
	if (!n || !n->file)
		return NULL;
	*line = n->line;
	base = strrchr(n->file, '/');
	src = json_pack("{s:s}", "name", base ? base + 1 : n->file);
	path = tm_resolve_source(s, n->file);
	json_object_set_new(src, "path", json_string(path && realpath(path, real) ?
						     real : n->file));
	free(path);
	return src;
}

static int req_stack_trace(struct dap *d, json_int_t seq, const char *cmd,
			   json_t *args)
{
	struct tm_session *s = d->s;
	json_int_t start = json_integer_value(json_object_get(args, "startFrame"));
	json_int_t levels = json_integer_value(json_object_get(args, "levels"));
	size_t n = frame_count(s), k;
	json_t *frames = json_array();

	if (start < 0)
		start = 0;
	for (k = (size_t)start; k < n && (levels <= 0 || k < (size_t)(start + levels)); k++) {
		uint32_t node, call;
		unsigned line;
		char name[TM_ADDRESS_MAX + 64];
		const struct tm_node *nd;
		json_t *f, *src;

		if (frame_at(s, k, &node, &call))
			break;
		call_name(s, node, call, name, sizeof(name));
		nd = tm_nodetab_get(s->nodes, node);
		if (nd && nd->type) {
			size_t l = strlen(name);

			snprintf(name + l, sizeof(name) - l, " (%s)", nd->type);
		}
		if (k == 0) {
			size_t l = strlen(name);

			snprintf(name + l, sizeof(name) - l, " %s",
				 tm_event_kind_name(s->cur.kind));
		}
		src = source_of(s, node, &line);
		f = json_pack("{s:I,s:s,s:i,s:i}", "id", (json_int_t)k + 1, "name",
			      name, "line", (int)line, "column", line ? 1 : 0);
		if (src)
			json_object_set_new(f, "source", src);
		else
			json_object_set_new(f, "presentationHint", json_string("subtle"));
		json_array_append_new(frames, f);
	}
	send_response(d, seq, cmd, json_pack("{s:o,s:I}", "stackFrames", frames,
					     "totalFrames", (json_int_t)n));
	return 0;
}

static int req_scopes(struct dap *d, json_int_t seq, const char *cmd, json_t *args)
{
	struct tm_session *s = d->s;
	json_int_t id = json_integer_value(json_object_get(args, "frameId"));
	json_t *scopes = json_array();
	size_t level = id > 0 ? (size_t)id - 1 : 0;
	uint32_t node, call;

	if (frame_at(s, level, &node, &call)) {
		send_error(d, seq, cmd, "No such frame.");
		json_decref(scopes);
		return 0;
	}
	if (level == 0 && tm_focus_tensor(s)) {
		char slot[32], name[64];

		tm_slot_format(tm_focus_tensor(s)->slot, slot, sizeof(slot));
		snprintf(name, sizeof(name), "Tensor (%s)", slot);
		json_array_append_new(scopes, json_pack("{s:s,s:i,s:b,s:s}",
			"name", name, "variablesReference",
			ref_add(d, REF_FOCUS, 0, NULL, NULL), "expensive", 0,
			"presentationHint", "locals"));
	}
	json_array_append_new(scopes, json_pack("{s:s,s:i,s:b,s:s}", "name", "Inputs",
		"variablesReference", ref_add(d, REF_INPUTS, level, NULL, NULL),
		"expensive", 0, "presentationHint", "arguments"));
	json_array_append_new(scopes, json_pack("{s:s,s:i,s:b}", "name", "Outputs",
		"variablesReference", ref_add(d, REF_OUTPUTS, level, NULL, NULL),
		"expensive", 0));
	json_array_append_new(scopes, json_pack("{s:s,s:i,s:b}", "name", "Parameters",
		"variablesReference", ref_add(d, REF_PARAMS, level, NULL, NULL),
		"expensive", 0));
	send_response(d, seq, cmd, json_pack("{s:o}", "scopes", scopes));
	return 0;
}

static json_t *var(const char *name, const char *value, const char *type,
		   int ref, const char *eval)
{
	json_t *v = json_pack("{s:s,s:s,s:i}", "name", name, "value", value,
			      "variablesReference", ref);

	if (type)
		json_object_set_new(v, "type", json_string(type));
	if (eval)
		json_object_set_new(v, "evaluateName", json_string(eval));
	return v;
}

/* A tensor's fields: dtype, shape, each statistic, the histogram. */
static void tensor_vars(struct dap *d, json_t *out, const struct tm_tensor *t,
			const char *prefix)
{
	struct tm_tql_value v;
	char buf[128], ev[TM_ADDRESS_MAX + 64];
	int i;

	snprintf(ev, sizeof(ev), "%s.dtype", prefix);
	json_array_append_new(out, var("dtype", tm_dtype_name(t->dtype), "string", 0, ev));
	memset(&v, 0, sizeof(v));
	v.type = TM_TQL_SHAPE;
	v.v.shape.dims = t->shape;
	v.v.shape.rank = t->rank;
	tm_tql_format(&v, buf, sizeof(buf));
	snprintf(ev, sizeof(ev), "%s.shape", prefix);
	json_array_append_new(out, var("shape", buf, "shape",
				       t->rank ? ref_add(d, REF_SHAPE, 0, NULL, t) : 0, ev));
	for (i = 0; i < TM_STAT__COUNT; i++) {
		if (!(t->have & TM_STAT_BIT(i)))
			continue;
		memset(&v, 0, sizeof(v));
		if (tm_stat_table[i].integer) {
			v.type = TM_TQL_INT;
			v.v.i = (int64_t)t->stat[i];
		} else {
			v.type = TM_TQL_NUM;
			v.v.d = t->stat[i];
		}
		tm_tql_format(&v, buf, sizeof(buf));
		snprintf(ev, sizeof(ev), "%s.%s", prefix, tm_stat_table[i].name);
		json_array_append_new(out, var(tm_stat_table[i].name, buf,
					       tm_stat_table[i].integer ? "int" : "float",
					       0, ev));
	}
	if (t->have_hist == TM_HIST_LOG2) {
		snprintf(buf, sizeof(buf), "%d bins by sign and octave, |x| < 2^%.0f",
			 TM_HIST_BINS, t->hist_hi);
		json_array_append_new(out, var("histogram", buf, "histogram",
					       ref_add(d, REF_HIST, 0, NULL, t), NULL));
	} else if (t->have_hist) {
		snprintf(buf, sizeof(buf), "%d bins over [%g, %g]", TM_HIST_BINS,
			 t->hist_lo, t->hist_hi);
		json_array_append_new(out, var("histogram", buf, "histogram",
					       ref_add(d, REF_HIST, 0, NULL, t), NULL));
	}
}

/*
 * A tensor on one line of the Variables pane: f32[64, 32] nan=3 mean=0.01
 * abs_max=2.5.  Four digits: the full values are one click away (its
 * fields), and a pane of 400 parameters must not cost 400 shortest
 * round-trip formattings of a dozen doubles each.
 */
static void tensor_summary(const struct tm_tensor *t, char *buf, size_t len)
{
	static const int shown[] = { TM_STAT_NAN_COUNT, TM_STAT_INF_COUNT,
				     TM_STAT_MEAN, TM_STAT_STD, TM_STAT_ABS_MAX };
	static const char *const names[] = { "nan", "inf", "mean", "std", "abs_max" };
	size_t o;
	int i;

	o = (size_t)snprintf(buf, len, "%s[", tm_dtype_name(t->dtype));
	for (i = 0; i < t->rank && i < TM_MAX_RANK && o < len; i++)
		o += (size_t)snprintf(buf + o, len - o, "%s%" PRId64, i ? ", " : "",
				      t->shape[i]);
	if (o < len)
		o += (size_t)snprintf(buf + o, len - o, "]");
	for (i = 0; i < (int)(sizeof(shown) / sizeof(shown[0])) && o < len; i++) {
		if (!(t->have & TM_STAT_BIT(shown[i])))
			continue;
		if (tm_stat_table[shown[i]].integer)
			o += (size_t)snprintf(buf + o, len - o, " %s=%.0f", names[i],
					      t->stat[shown[i]]);
		else
			o += (size_t)snprintf(buf + o, len - o, " %s=%.4g", names[i],
					      t->stat[shown[i]]);
	}
}

/* One tensor as a variable that expands into its fields. */
static void tensor_var(struct dap *d, json_t *out, const char *name,
		       const char *expr, const struct tm_tensor *t)
{
	char buf[512];

	tensor_summary(t, buf, sizeof(buf));
	json_array_append_new(out, var(name, buf, "tensor",
				       ref_add(d, REF_TENSOR, 0, expr, t), expr));
}

/* ADDR:SLOT evaluated at the playhead into a tensor; 0 when it is one. */
static int lookup(struct dap *d, const char *expr, struct tm_val *v)
{
	int rc;

	memset(v, 0, sizeof(*v));
	d->quiet++;
	rc = tm_evaluate(d->s, expr, v);
	d->quiet--;
	if (rc)
		return -1;
	if (v->kind != VAL_TENSOR) {
		tm_val_clear(v);
		return -1;
	}
	return 0;
}

/* A call's inputs or outputs: the event's own tensors where the playhead
 * is at that event, else what the addressed terms find. */
static void slot_vars(struct dap *d, json_t *out, size_t level, int slot_kind)
{
	struct tm_session *s = d->s;
	uint32_t node, call, i;
	char base[TM_ADDRESS_MAX + 16], expr[TM_ADDRESS_MAX + 48], sl[32];
	const char *kn = tm_slot_kind_name(slot_kind);

	if (frame_at(s, level, &node, &call))
		return;
	call_name(s, node, call, base, sizeof(base));
	if (level == 0 && s->cur.node == node &&
	    tm_slot_event_kind(slot_kind) == s->cur.kind) {
		for (i = 0; i < s->cur.ntensors; i++) {
			const struct tm_tensor *t = &s->cur.tensors[i];

			if (t->slot.kind != slot_kind)
				continue;
			tm_slot_format(t->slot, sl, sizeof(sl));
			snprintf(expr, sizeof(expr), "%s:%s", base, sl);
			tensor_var(d, out, sl, expr, t);
		}
		return;
	}
	for (i = 0; i < 8; i++) {
		struct tm_val v;

		if (i)
			snprintf(sl, sizeof(sl), "%s.%u", kn, i);
		else
			snprintf(sl, sizeof(sl), "%s", kn);
		snprintf(expr, sizeof(expr), "%s:%s", base, sl);
		if (lookup(d, expr, &v))
			break;
		tensor_var(d, out, sl, expr, &v.t);
		tm_val_clear(&v);
	}
}

/* Is node id under (or equal to) top in the module tree? */
static int under(struct tm_session *s, uint32_t id, uint32_t top)
{
	const struct tm_node *n;
	int hops = 0;

	while (id != TM_NODE_NONE && hops++ < 4096) {
		if (id == top)
			return 1;
		n = tm_nodetab_get(s->nodes, id);
		if (!n)
			return 0;
		id = n->parent;
	}
	return 0;
}

/* One parameter the Parameters scope shows, and what the scan found. */
struct pwant {
	uint32_t node;
	int have[2];            /* data, grad */
	struct tm_tensor t[2];
};

/*
 * The module's parameters, its submodules' too, named relative to it
 * (fc1.weight), with their gradients where recorded.  One backward pass
 * from the playhead finds the latest data and grad of every one of them
 * (a lookup each would scan once per parameter: a 100-layer model has 200);
 * it stops at a gap, beyond which the newest value may be lost, as the
 * addressed terms do.
 */
static void param_vars(struct dap *d, json_t *out, size_t level)
{
	struct tm_session *s = d->s;
	uint32_t node, call, i, n, *map = NULL;
	struct pwant *want = NULL;
	size_t nwant = 0, left, k;
	struct tm_record rec;
	char expr[TM_ADDRESS_MAX + 32], name[TM_ADDRESS_MAX + 16];
	const char *top;
	size_t tl;

	if (frame_at(s, level, &node, &call) || !s->nodes || !s->probe)
		return;
	n = tm_nodetab_count(s->nodes);
	map = malloc(n * sizeof(*map));
	want = calloc(n, sizeof(*want));
	if (!map || !want)
		goto out;
	for (i = 0; i < n; i++) {
		const struct tm_node *p = tm_nodetab_get(s->nodes, i);

		map[i] = UINT32_MAX;
		if (!p || p->kind == TM_NODE_MODULE || !under(s, p->parent, node))
			continue;
		map[i] = (uint32_t)nwant;
		want[nwant++].node = i;
	}
	if (!nwant)
		goto out;
	left = 2 * nwant;
	if (s->probe->ops->seek(s->probe, TM_SEEK_SEQ, s->cur.seq) == TM_OK) {
		while (left && !tm_interrupted &&
		       s->probe->ops->next_event(s->probe, TM_DIR_BWD, &rec) == TM_OK) {
			const struct tm_event *ev = &rec.u.event;
			struct pwant *w;
			int j;

			if (rec.type == TM_REC_GAP)
				break;
			if (rec.type != TM_REC_EVENT || ev->kind != TM_EV_PARAM ||
			    ev->seq > s->cur.seq || ev->node >= n ||
			    map[ev->node] == UINT32_MAX)
				continue;
			w = &want[map[ev->node]];
			for (j = 0; j < 2; j++) {
				struct tm_slot sl = { j ? TM_SLOT_GRAD : TM_SLOT_DATA, 0 };
				const struct tm_tensor *t = tm_event_tensor(ev, sl);

				if (!t || w->have[j])
					continue;
				w->t[j] = *t;
				w->t[j].payload = NULL;
				w->t[j].payload_len = 0;
				w->have[j] = 1;
				left--;
			}
		}
	}
	tm_cursor_restore(s);
	top = tm_node_name(s, node);
	tl = strlen(top);
	for (k = 0; k < nwant; k++) {
		const char *addr = tm_node_name(s, want[k].node), *rel = addr;

		if (!strncmp(rel, top, tl) && rel[tl] == '.')
			rel += tl + 1;
		snprintf(expr, sizeof(expr), "%s:data", addr);
		if (want[k].have[0])
			tensor_var(d, out, rel, expr, &want[k].t[0]);
		else
			json_array_append_new(out, var(rel, "<unknown: not recorded "
				"before the playhead>", "tensor", 0, expr));
		if (want[k].have[1]) {
			snprintf(expr, sizeof(expr), "%s:grad", addr);
			snprintf(name, sizeof(name), "%s.grad", rel);
			tensor_var(d, out, name, expr, &want[k].t[1]);
		}
	}
out:
	free(map);
	free(want);
}

static int req_variables(struct dap *d, json_int_t seq, const char *cmd,
			 json_t *args)
{
	json_int_t id = json_integer_value(json_object_get(args, "variablesReference"));
	json_t *out = json_array();
	struct dap_ref r;
	char buf[64], name[32];
	int i;

	if (id <= 0 || (size_t)id > d->nrefs) {
		json_decref(out);
		send_error(d, seq, cmd, "No such variables reference (the playhead "
			   "moved since).");
		return 0;
	}
	r = d->refs[id - 1];    /* copied: ref_add may move the table */
	switch (r.kind) {
	case REF_FOCUS:
		if (tm_focus_tensor(d->s))
			tensor_vars(d, out, tm_focus_tensor(d->s), "tensor");
		break;
	case REF_INPUTS:
		slot_vars(d, out, r.level, TM_SLOT_IN);
		break;
	case REF_OUTPUTS:
		slot_vars(d, out, r.level, TM_SLOT_OUT);
		break;
	case REF_PARAMS:
		param_vars(d, out, r.level);
		break;
	case REF_TENSOR:
		tensor_vars(d, out, &r.t, r.expr);
		break;
	case REF_SHAPE:
		for (i = 0; i < r.t.rank && i < TM_MAX_RANK; i++) {
			snprintf(name, sizeof(name), "[%d]", i);
			snprintf(buf, sizeof(buf), "%" PRId64, r.t.shape[i]);
			json_array_append_new(out, var(name, buf, "int", 0, NULL));
		}
		break;
	case REF_HIST: {
		double w = (r.t.hist_hi - r.t.hist_lo) / TM_HIST_BINS;

		for (i = 0; i < TM_HIST_BINS; i++) {
			int half = TM_HIST_BINS / 2, j = i < half ? half - 1 - i : i - half;
			int e = (int)r.t.hist_lo - 1 + j;   /* the octave's bottom */

			if (r.t.have_hist != TM_HIST_LOG2)
				snprintf(name, sizeof(name), "[%.4g, %.4g)",
					 r.t.hist_lo + i * w, r.t.hist_lo + (i + 1) * w);
			else if (j == 0)
				snprintf(name, sizeof(name), i < half ? "(-2^%d, -0]" : "[0, 2^%d)",
					 e + 1);
			else
				snprintf(name, sizeof(name),
					 i < half ? "(-2^%d, -2^%d]" : "[2^%d, 2^%d)",
					 i < half ? e + 1 : e, i < half ? e : e + 1);
			snprintf(buf, sizeof(buf), "%u", r.t.hist[i]);
			json_array_append_new(out, var(name, buf, "int", 0, NULL));
		}
		break;
	}
	}
	send_response(d, seq, cmd, json_pack("{s:o}", "variables", out));
	return 0;
}

/* ------------------------------------------------------------- evaluate */

/* A CLI command line that moves the playhead (continue, step, run...). */
static int is_resume(struct tm_session *s, const char *line)
{
	char word[64];
	size_t l;
	const struct cmd_entry *c;
	struct ucmd *u = NULL;

	line = tm_skip_ws(line);
	l = strcspn(line, " \t/");
	if (!l || l >= sizeof(word))
		return 0;
	memcpy(word, line, l);
	word[l] = 0;
	c = tm_cmd_lookup(s, word, 1, &u);
	return c && (c->flags & CMD_RESUMES);
}

static int req_evaluate(struct dap *d, json_int_t seq, const char *cmd,
			json_t *args)
{
	struct tm_session *s = d->s;
	const char *expr = json_string_value(json_object_get(args, "expression"));
	const char *ctx = json_string_value(json_object_get(args, "context"));
	json_int_t fid = json_integer_value(json_object_get(args, "frameId"));
	struct tm_val v;
	char buf[4096];
	char *e;
	int ref = 0;

	if (!expr) {
		send_error(d, seq, cmd, "evaluate needs an expression.");
		return 0;
	}
	if (ctx && !strcmp(ctx, "repl")) {
		/* the debug console is tmdb's command line */
		if (is_resume(s, expr)) {
			send_response(d, seq, cmd, json_pack("{s:s,s:i}", "result", "",
							     "variablesReference", 0));
			resume(d, expr, NULL);
			return 0;
		}
		(void)tm_execute(s, expr, 0);
		flush_console(d);
		e = take_err(d);
		if (*e)
			send_output(d, "stderr", e, strlen(e));
		free(e);
		refs_clear(d);
		send_response(d, seq, cmd, json_pack("{s:s,s:i}", "result", "",
						     "variablesReference", 0));
		if (s->quit) {
			d->quit = 1;
			send_terminated(d);
		}
		return 0;
	}
	/* the frame a watch is evaluated in: its node's addressed terms see
	 * the playhead all the same; frame selection only changes bt's mark */
	if (fid > 0 && (size_t)fid <= frame_count(s))
		s->sel_frame = (size_t)fid - 1;
	memset(&v, 0, sizeof(v));
	if (tm_evaluate(s, expr, &v)) {
		mi_buf_reset(&d->con);
		e = take_err(d);
		send_error(d, seq, cmd, e);
		free(e);
		return 0;
	}
	mi_buf_reset(&d->con);
	if (v.kind == VAL_TENSOR) {
		tm_tensor_format(&v.t, buf, sizeof(buf));
		ref = ref_add(d, REF_TENSOR, 0, expr, &v.t);
	} else if (v.v.type == TM_TQL_UNKNOWN && !v.v.unknown_reason) {
		snprintf(buf, sizeof(buf), "<unknown>");
	} else {
		tm_val_format(&v, buf, sizeof(buf));
	}
	send_response(d, seq, cmd, json_pack("{s:s,s:s,s:i}", "result", buf, "type",
					     tm_val_type_name(&v), "variablesReference", ref));
	tm_val_clear(&v);
	return 0;
}

/* ------------------------------------------------------------- launch */

/* One shell word, quoted when it has to be. */
static void shell_word(struct mi_buf *b, const char *w)
{
	if (b->len)
		mi_buf_puts(b, " ");
	if (*w && strspn(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			 "0123456789_-+=./:,@%") == strlen(w)) {
		mi_buf_puts(b, w);
		return;
	}
	mi_buf_puts(b, "'");
	for (; *w; w++) {
		if (*w == '\'')
			mi_buf_puts(b, "'\\''");
		else
			mi_buf_add(b, w, 1);
	}
	mi_buf_puts(b, "'");
}

static int ends_with(const char *s, const char *tail)
{
	size_t a = strlen(s), b = strlen(tail);

	return a >= b && !strcmp(s + a - b, tail);
}

/* cwd and env, GDB's launch arguments, apply to tmdb and what it starts. */
static int launch_env(struct dap *d, json_t *args, char *err, size_t errlen)
{
	const char *cwd = json_string_value(json_object_get(args, "cwd"));
	json_t *env = json_object_get(args, "env"), *v;
	const char *k;

	(void)d;
	if (cwd && *cwd && chdir(cwd)) {
		snprintf(err, errlen, "Cannot change to \"%s\": %s.", cwd, strerror(errno));
		return -1;
	}
	json_object_foreach(env, k, v) {
		if (json_is_string(v))
			setenv(k, json_string_value(v), 1);
		else if (json_is_null(v))
			unsetenv(k);
	}
	return 0;
}

static int req_launch(struct dap *d, json_int_t seq, const char *cmd, json_t *args)
{
	struct tm_session *s = d->s;
	const char *prog = json_string_value(json_object_get(args, "program"));
	const char *python = json_string_value(json_object_get(args, "python"));
	json_t *argv = json_object_get(args, "args"), *a, *lvl;
	struct mi_buf words = { 0 };
	char err[PATH_MAX + 64], *e;
	size_t i;
	int rc;

	if (!prog || !*prog) {
		send_error(d, seq, cmd, "launch needs a program: a Python script, "
			   "a program that loads the probe, or a .tmrun recording.");
		return 0;
	}
	if (launch_env(d, args, err, sizeof(err))) {
		send_error(d, seq, cmd, err);
		return 0;
	}
	d->stop_on_entry = json_is_true(json_object_get(args, "stopOnEntry"));
	if (ends_with(prog, ".tmrun") || tm_probe_multi_is_manifest(prog) ||
	    (!ends_with(prog, ".py") && !tm_live_is_program(prog))) {
		rc = tm_session_load(s, prog);
		if (!rc)
			tm_bp_rebind_all(s);
	} else {
		struct tm_live *lv;

		d->is_program = 1;
		if (ends_with(prog, ".py"))
			shell_word(&words, prog);
		json_array_foreach(argv, i, a)
			if (json_is_string(a))
				shell_word(&words, json_string_value(a));
		rc = tm_live_set_program(s, ends_with(prog, ".py") ?
					 (python && *python ? python : "python3") : prog,
					 words.p);
		lv = tm_live_get(s);
		lvl = json_object_get(args, "level");
		if (!rc && lv && json_is_integer(lvl)) {
			if (json_integer_value(lvl) < 0 || json_integer_value(lvl) > 3) {
				tm_error(s, "level must be 0 to 3.");
				rc = -1;
			} else {
				lv->level = (int)json_integer_value(lvl);
			}
		}
		if (!rc && program_output(d)) {
			tm_error(s, "Cannot make a pipe for the program's output.");
			rc = -1;
		}
	}
	mi_buf_free(&words);
	mi_buf_reset(&d->con);
	if (rc) {
		e = take_err(d);
		send_error(d, seq, cmd, e);
		free(e);
		return 0;
	}
	d->launched = 1;
	send_response(d, seq, cmd, NULL);
	send_event(d, "initialized", NULL);
	return 0;
}

static int req_attach(struct dap *d, json_int_t seq, const char *cmd, json_t *args)
{
	json_t *pid = json_object_get(args, "pid");
	char line[64], *e;

	if (!pid)
		pid = json_object_get(args, "processId");
	if (json_is_string(pid))
		snprintf(line, sizeof(line), "attach %.40s", json_string_value(pid));
	else if (json_is_integer(pid) && json_integer_value(pid) > 0)
		snprintf(line, sizeof(line), "attach %" JSON_INTEGER_FORMAT,
			 json_integer_value(pid));
	else {
		send_error(d, seq, cmd, "attach needs the pid of a process running "
			   "the probe.");
		return 0;
	}
	d->is_attach = 1;
	d->stop_on_entry = !json_is_false(json_object_get(args, "stopOnEntry"));
	if (tm_execute(d->s, line, 0)) {
		mi_buf_reset(&d->con);
		e = take_err(d);
		send_error(d, seq, cmd, e);
		free(e);
		return 0;
	}
	flush_console(d);
	d->launched = 1;
	send_response(d, seq, cmd, NULL);
	send_event(d, "initialized", NULL);
	return 0;
}

/*
 * Starts the program as far as its first module call (stopOnEntry), where
 * its modules are known: pending breakpoints bind, and it stays there (or
 * reports the breakpoint at that call).
 */
static void start_program(struct dap *d)
{
	struct tm_session *s = d->s;
	struct tm_bp_spec spec;
	struct dap_bp *db;
	struct bp *tb = NULL;
	uint32_t focus;

	tm_bp_spec_init(&spec);
	spec.location = "**";
	spec.disp = BP_DEL;
	if (tm_bp_create(s, &spec, &tb)) {
		resume(d, "run", NULL);
		return;
	}
	d->stopped = 0;
	set_running(d, 1);
	(void)tm_execute(s, "run", 0);
	set_running(d, 0);
	tm_interrupted = 0;
	if ((tb = tm_bp_find(s, tb ? tb->num : 0)))
		tm_bp_delete(s, tb);
	mi_buf_reset(&d->con);
	if (!d->stopped || !s->have_cur || d->gone) {
		/* it ended before any module ran */
		flush_console(d);
		send_terminated(d);
		return;
	}
	bps_sync(d);
	if (d->stop_on_entry) {
		d->why = STOP_NONE;
		report_stop(d, "entry");
		return;
	}
	for (db = d->bps; db; db = db->next) {
		struct bp *b = db->num ? tm_bp_find(s, db->num) : NULL;

		if (b && b->enabled && tm_bp_match(s, b, &s->cur, &focus)) {
			d->why = STOP_BREAK;
			d->bpnum = b->num;
			b->hits++;
			report_stop(d, NULL);
			return;
		}
	}
	resume(d, "continue", NULL);
}

static int req_configuration_done(struct dap *d, json_int_t seq, const char *cmd,
				  json_t *args)
{
	(void)args;
	send_response(d, seq, cmd, NULL);
	if (!d->launched)
		return 0;
	if (d->is_attach)
		resume(d, d->stop_on_entry ? "step" : "continue",
		       d->stop_on_entry ? "entry" : NULL);
	else if (d->stop_on_entry && !d->is_program)
		resume(d, "step", "entry");
	else if (d->is_program && d->stop_on_entry)
		start_program(d);
	else
		resume(d, "run", NULL);
	return 0;
}

static int req_disconnect(struct dap *d, json_int_t seq, const char *cmd,
			  json_t *args)
{
	struct tm_session *s = d->s;
	json_t *t = json_object_get(args, "terminateDebuggee");
	int kill_it = t ? json_is_true(t) : !d->is_attach;

	if (s->live && s->live->pid && kill_it)
		tm_inferior_kill(s, 0);
	else if (tm_probe_is_live(s->probe))
		(void)tm_execute(s, kill_it ? "kill" : "detach", 0);
	mi_buf_reset(&d->con);
	mi_buf_reset(&d->err);
	send_response(d, seq, cmd, NULL);
	d->quit = 1;
	return 0;
}

static int req_terminate(struct dap *d, json_int_t seq, const char *cmd,
			 json_t *args)
{
	struct tm_session *s = d->s;

	(void)args;
	if (s->live && s->live->pid)
		tm_inferior_kill(s, 0);
	else if (tm_probe_is_live(s->probe))
		(void)tm_execute(s, "kill", 0);
	mi_buf_reset(&d->con);
	mi_buf_reset(&d->err);
	send_response(d, seq, cmd, NULL);
	send_terminated(d);
	return 0;
}

/* ------------------------------------------------------------- requests */

static int req_initialize(struct dap *d, json_int_t seq, const char *cmd,
			  json_t *args)
{
	json_t *caps = json_pack(
		"{s:b,s:b,s:b,s:b,s:b,s:b,s:b,s:b,s:b,s:b,s:[]}",
		"supportsConfigurationDoneRequest", 1,
		"supportsFunctionBreakpoints", 1,
		"supportsConditionalBreakpoints", 1,
		"supportsHitConditionalBreakpoints", 1,
		"supportsEvaluateForHovers", 1,
		"supportsStepBack", 1,
		"supportsLogPoints", 1,
		"supportsTerminateRequest", 1,
		"supportsGotoTargetsRequest", 1,
		"supportsDelayedStackTraceLoading", 0,
		"exceptionBreakpointFilters");

	(void)args;
	send_response(d, seq, cmd, caps);
	return 0;
}

static int req_threads(struct dap *d, json_int_t seq, const char *cmd, json_t *args)
{
	struct tm_session *s = d->s;
	json_t *list = json_array();
	char name[64];
	size_t i;
	int rank;

	(void)args;
	if (s->probe && tm_probe_multi_sub(s->probe, 0, NULL)) {
		for (i = 0; tm_probe_multi_sub(s->probe, i, &rank); i++) {
			snprintf(name, sizeof(name), "rank %d", rank);
			json_array_append_new(list, json_pack("{s:i,s:s}", "id",
							      rank + 1, "name", name));
		}
	} else {
		snprintf(name, sizeof(name), "rank %d", s->probe ? tm_session_rank(s) : 0);
		json_array_append_new(list, json_pack("{s:i,s:s}", "id", 1, "name", name));
	}
	send_response(d, seq, cmd, json_pack("{s:o}", "threads", list));
	return 0;
}

/* Movement requests: the response first, then the stop as an event. */
static int req_move(struct dap *d, json_int_t seq, const char *cmd, json_t *args)
{
	static const struct { const char *req, *cli; } moves[] = {
		{ "continue", "continue" },
		{ "next", "next" },
		{ "stepIn", "step" },
		{ "stepOut", "finish" },
		{ "stepBack", "reverse-step" },
		{ "reverseContinue", "reverse-continue" },
	};
	size_t i;

	(void)args;
	if (!d->s->probe && !d->is_program) {
		send_error(d, seq, cmd, "No trace loaded.");
		return 0;
	}
	for (i = 0; i < sizeof(moves) / sizeof(moves[0]); i++)
		if (!strcmp(cmd, moves[i].req))
			break;
	send_response(d, seq, cmd, !strcmp(cmd, "continue") ?
		      json_pack("{s:b}", "allThreadsContinued", 1) : NULL);
	resume(d, moves[i].cli, NULL);
	return 0;
}

static int req_pause(struct dap *d, json_int_t seq, const char *cmd, json_t *args)
{
	(void)args;
	send_response(d, seq, cmd, NULL);
	/* nothing runs between requests: it is stopped already */
	if (d->s->have_cur) {
		d->why = STOP_INTERRUPT;
		report_stop(d, "pause");
	}
	return 0;
}

/* gotoTargets: the playhead goes to a seq; one target, the line's call. */
static int req_goto_targets(struct dap *d, json_int_t seq, const char *cmd,
			    json_t *args)
{
	struct tm_session *s = d->s;
	json_t *src = json_object_get(args, "source");
	const char *path = json_string_value(json_object_get(src, "path"));
	json_int_t line = json_integer_value(json_object_get(args, "line"));
	char loc[TM_ADDRESS_MAX + 1], label[TM_ADDRESS_MAX + 64];
	char *e;

	if (!path || line <= 0 ||
	    tm_source_location(s, path, (unsigned)line, loc, sizeof(loc))) {
		e = take_err(d);
		send_error(d, seq, cmd, *e ? e : "No source line given.");
		free(e);
		return 0;
	}
	snprintf(label, sizeof(label), "next call of %s", loc);
	snprintf(d->goto_loc, sizeof(d->goto_loc), "%s", loc);
	send_response(d, seq, cmd, json_pack("{s:[{s:i,s:s,s:I}]}", "targets",
					     "id", 1, "label", label, "line", line));
	return 0;
}

static int req_goto(struct dap *d, json_int_t seq, const char *cmd, json_t *args)
{
	struct tm_session *s = d->s;
	char line[TM_ADDRESS_MAX + 32];

	(void)args;
	if (!d->goto_loc[0] || !s->probe) {
		send_error(d, seq, cmd, "No goto target.");
		return 0;
	}
	send_response(d, seq, cmd, NULL);
	snprintf(line, sizeof(line), "until %s", d->goto_loc);
	resume(d, line, "goto");
	return 0;
}

static int req_ignored(struct dap *d, json_int_t seq, const char *cmd, json_t *args)
{
	(void)args;
	if (!strcmp(cmd, "setExceptionBreakpoints"))
		send_response(d, seq, cmd, json_pack("{s:[]}", "breakpoints"));
	else
		send_response(d, seq, cmd, NULL);
	return 0;
}

static const struct dap_req {
	const char *name;
	int (*fn)(struct dap *d, json_int_t seq, const char *cmd, json_t *args);
} dap_reqs[] = {
	{ "initialize", req_initialize },
	{ "launch", req_launch },
	{ "attach", req_attach },
	{ "configurationDone", req_configuration_done },
	{ "setBreakpoints", req_set_breakpoints },
	{ "setFunctionBreakpoints", req_set_function_breakpoints },
	{ "setExceptionBreakpoints", req_ignored },
	{ "threads", req_threads },
	{ "stackTrace", req_stack_trace },
	{ "scopes", req_scopes },
	{ "variables", req_variables },
	{ "evaluate", req_evaluate },
	{ "continue", req_move },
	{ "next", req_move },
	{ "stepIn", req_move },
	{ "stepOut", req_move },
	{ "stepBack", req_move },
	{ "reverseContinue", req_move },
	{ "pause", req_pause },
	{ "gotoTargets", req_goto_targets },
	{ "goto", req_goto },
	{ "disconnect", req_disconnect },
	{ "terminate", req_terminate },
};

static void handle(struct dap *d, json_t *j)
{
	const char *cmd;
	json_int_t seq;
	json_t *args;
	char err[256];
	size_t i;

	if (dap_request_parts(j, &cmd, &seq, &args, err, sizeof(err))) {
		send_output(d, "stderr", err, strlen(err));
		return;
	}
	mi_buf_reset(&d->con);
	mi_buf_reset(&d->err);
	for (i = 0; i < sizeof(dap_reqs) / sizeof(dap_reqs[0]); i++) {
		if (!strcmp(cmd, dap_reqs[i].name)) {
			dap_reqs[i].fn(d, seq, cmd, args);
			return;
		}
	}
	snprintf(err, sizeof(err), "Unrecognized request \"%.100s\".", cmd);
	send_error(d, seq, cmd, err);
}

/* ------------------------------------------------------------- entry */

int tm_dap_init(struct tm_session *s)
{
	struct dap *d = calloc(1, sizeof(*d));

	if (!d)
		return -1;
	d->s = s;
	d->next_seq = 1;
	d->tail = &d->head;
	d->out_pipe[0] = d->out_pipe[1] = -1;
	pthread_mutex_init(&d->out_lock, NULL);
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->cond, NULL);
	s->ui = d;
	s->out_fn = dap_out_fn;
	s->on_stop = dap_on_stop;
	s->on_bp_event = dap_on_bp_event;
	s->on_inferior = dap_on_inferior;
	s->on_resume = dap_on_resume;
	s->set.confirm = 0;
	s->set.pagination = 0;
	s->set.style = 0;
	tm_install_sigint();
	return 0;
}

int tm_dap_run(struct tm_session *s)
{
	struct dap *d = dap_of(s);
	sigset_t block, old;
	json_t *j;

	if (!d)
		return 1;
	/* what init files printed is nobody's: DAP starts with initialize */
	mi_buf_reset(&d->con);
	mi_buf_reset(&d->err);
	d->main = pthread_self();
	if (pipe(d->wake))
		return 1;
	fcntl(d->wake[0], F_SETFD, FD_CLOEXEC);
	fcntl(d->wake[1], F_SETFD, FD_CLOEXEC);
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	d->reader_on = !pthread_create(&d->reader, NULL, reader_main, d);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!d->reader_on)
		return 1;
	while (!d->quit && !s->quit && (j = next_msg(d))) {
		tm_interrupted = 0;
		handle(d, j);
		json_decref(j);
	}
	return s->quit ? s->exit_code : 0;
}

void tm_dap_done(struct tm_session *s)
{
	struct dap *d = dap_of(s);
	struct dap_msg *m;

	if (!d)
		return;
	if (d->reader_on || d->out_thread_on) {
		while (write(d->wake[1], "x", 1) < 0 && errno == EINTR)
			;
	}
	if (d->reader_on)
		pthread_join(d->reader, NULL);
	if (d->out_thread_on)
		pthread_join(d->out_thread, NULL);
	if (d->reader_on) {
		close(d->wake[0]);
		close(d->wake[1]);
	}
	if (d->out_pipe[0] >= 0) {
		close(d->out_pipe[0]);
		close(d->out_pipe[1]);
	}
	while ((m = d->head)) {
		d->head = m->next;
		json_decref(m->j);
		free(m);
	}
	while (d->bps) {
		struct dap_bp *b = d->bps;

		d->bps = b->next;
		dbp_free(b);
	}
	free(d->refs);
	mi_buf_free(&d->con);
	mi_buf_free(&d->err);
	pthread_mutex_destroy(&d->out_lock);
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->cond);
	free(d);
	tm_session_detach_ui(s);
}
