/*
 * server.c -- the probe side of live debugging (doc/wire.md section 2).
 *
 * A thread in the probed process accepts one debugger at a time on a Unix
 * socket in a private directory, answers its requests, and writes what the
 * model thread queued.  The model thread itself only ever calls
 * tm_server_event(): with no debugger that is one atomic load; with one, the
 * event is encoded into the outgoing queue (never blocking: a full queue
 * drops the event and announces a BACKPRESSURE gap instead), the debugger's
 * breakpoints are evaluated with the TQL VM exactly as tmdb's replay does
 * (node bitmap first, then the condition per tensor), and on a hit the model
 * thread sends STOP and sleeps on a condition variable until RESUME.
 *
 * The debugger is not trusted to stay: disconnection, DETACH, a malformed
 * frame or message, or tm_server_stop() all clear its breakpoints and wake
 * the model thread; the model thread also rechecks every 100 ms, so it never
 * stays paused more than that after its debugger is gone.
 *
 * Locking: one mutex guards everything but `active` (the fast-path flag)
 * and `state` (the word the Python probe polls); both are only written with
 * the mutex held, and read without it.  Socket writes happen under it too,
 * non-blocking, from whichever thread has queued bytes; the server thread
 * polls for POLLOUT when some are left.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "tm-internal.h"
#include "tm-breakpoint.h"
#include "tm-server.h"
#include "tm-tql.h"
#include "tm-wire.h"

#define DEFAULT_MAX_QUEUE (8u << 20)
#define DEFAULT_MAX_FRAME (64u << 10)
#define MAX_STACK 1024          /* open calls tracked for finish */
#define MAX_BREAKPOINTS 1024
#define MAX_LEVELS 256
#define MAX_CAPTURES 256
#define STOP_RECHECK_NS 100000000ull
/*
 * Streamed events are not sent one by one: a send() per event, and the
 * debugger woken per event, cost the model more than encoding them.  They
 * go out when this much is queued, or when the server thread next wakes
 * (every FLUSH_MS while a debugger is subscribed); anything that asks for
 * the debugger's attention (STOP, RESULT, BYE) flushes at once.
 */
#define FLUSH_BYTES (64u << 10)
#define FLUSH_MS 2
/* At shutdown a debugger that takes nothing for this long is given up. */
#define DRAIN_MS 2000
/*
 * Connections that have not said HELLO yet wait in a few slots of their
 * own, each for at most hello_ms: one that never speaks (a port scanner, a
 * half-open TCP connection, a stuck client) neither holds the debugger's
 * place nor keeps the next debugger out.
 */
#define MAX_CANDS 4
#define DEFAULT_HELLO_MS 3000
/* An attached debugger silent this long may be taken over by a new one. */
#define DEFAULT_TAKEOVER_MS 10000
/* Bytes of a TCP token: 32 random bytes, sent as 64 hex digits. */
#define TOKEN_BYTES 32

/* A debugger's breakpoint: its wire id and the library's matcher
 * (tm-breakpoint.h), which tmdb's breakpoints use as well. */
struct sbp {
	struct sbp *next;
	uint32_t id;
	struct tm_breakpoint bp;
};

struct lvl {
	tm_address *pat;
	uint8_t level;
};

struct cap {
	uint32_t node;
	struct tm_slot slot;
};

struct open_call {
	uint32_t node, call;
};

static const struct tm_annot *server_annotation(void *user, const struct tm_event *ev,
					      const char *key);

/* The latest annotation of one key (tm_server_annot), a decoded copy. */
#define MAX_ANNOT_KEYS 8
struct sannot {
	struct tm_buf enc;
	tm_decoder *dec;
	struct tm_annot a;      /* points into dec */
	int pending;            /* not sent yet: the queue was full */
};

struct cand {                   /* a connection before its HELLO */
	int fd;
	tm_frame_decoder *dec;
	uint64_t t0;
};

struct tm_server {
	struct tm_server_opts o;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char *probe_kind, *trace;
	int lfd, cfd;
	struct cand cands[MAX_CANDS];
	int tcp;                /* listening on TCP: HELLO must carry the token */
	char token[2 * TOKEN_BYTES + 1];
	char token_path[sizeof(((struct sockaddr_un *)0)->sun_path) + 32];
	uint64_t last_rx_ns;    /* when the debugger last sent a message */
	char peer[64];          /* its HELLO name */
	int wake[2];            /* self-pipe: wakes poll() */
	pthread_t thread;
	int thread_started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	atomic_int active;      /* a client has said HELLO */
	atomic_int killed;      /* KILL: the model thread ends the process */
	_Atomic uint32_t state; /* tm_server_state(): bit 0 subscribed, 1.. requests */
	int stopping;
	int inside;             /* threads in tm_server_event or tm_server_wait_client
				 * (stop waits for them) */
	int waiters;            /* threads in tm_server_wait_client */

	/* the connection */
	tm_frame_decoder *dec;
	int greeted;
	/* FLIGHT requests: a flight-mode recorder's handler, run without
	 * the lock; flight_busy while it runs (removal waits on cond) */
	tm_server_flight_fn flight_fn;
	void *flight_user;
	const uint32_t *flight_dumps;   /* non-zero: a window was written */
	int flight_busy;
	int subscribed;
	uint64_t from_seq;
	tm_address *filter;
	struct tm_buf out;      /* queued bytes; out_off already sent */
	size_t out_off;
	int out_blocked;        /* the socket said EAGAIN: wait for POLLOUT */
	struct tm_buf scratch;  /* the record being queued */
	struct tm_buf gscratch; /* the pending gap, encoded */

	/* what every client is told on SUBSCRIBE */
	tm_nodetab *nodes;
	struct tm_buf meta;     /* encoded META record, empty if none */
	int32_t rank;           /* the meta's rank when >= 0, else 0: TQL `rank` */
	struct sannot annots[MAX_ANNOT_KEYS];
	unsigned nannots;
	int annots_pending;     /* some annots[].pending */
	struct tm_tql_env env;  /* breakpoint conditions: annotations only */

	/* breakpoints and resume state */
	struct sbp *bps;
	uint32_t nbps;
	int stopped;
	uint64_t stop_ns;       /* when it stopped (pause_ms) */
	int self_resumed;       /* pause_ms ended the last stop */
	uint64_t stop_gen;      /* bumped by every resume */
	int step_mode;          /* -1 none, else enum tm_resume_mode (not CONTINUE) */
	uint32_t step_left;
	int step_depth;         /* next: the stop event's depth */
	uint32_t fin_node, fin_call;
	struct tm_event last;   /* the stop event's header (tensors not kept) */
	struct tm_event seen;   /* the last event sent (a hold stops after it) */
	int have_seen;
	/* INTERRUPT between events: pause_fn asks the program to call
	 * tm_server_hold now (tm_server_pause_handler); hold_wanted until it
	 * does, or a stop at an event makes it moot */
	tm_server_pause_fn pause_fn;
	void *pause_user;
	int hold_wanted;
	struct open_call *stack;
	size_t nstack;

	/* op patterns a debugger set (SET_OPS), have_ops: any */
	char ops[TM_MSG_MAX_STR + 1];
	int have_ops;
	/* probe-level requests */
	struct lvl *levels;
	size_t nlevels;
	int default_level;      /* -1: the probe's own */
	struct cap *caps;
	size_t ncaps;

	/* a pending gap: seqs filtered or dropped since the last record sent */
	struct tm_gap gap;
	int have_gap;

	struct tm_server_stats st;
	char detail[1024];
};

void tm_server_opts_default(struct tm_server_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->hello_ms = DEFAULT_HELLO_MS;
	o->takeover_ms = DEFAULT_TAKEOVER_MS;
	o->probe_kind = "synthetic";
	o->max_level = 3;
	o->caps = TM_CAP_PAUSE | TM_CAP_LEVEL | TM_CAP_CAPTURE;
	o->max_queue = DEFAULT_MAX_QUEUE;
	o->max_frame = DEFAULT_MAX_FRAME;
}

/*
 * The state word: bit 0 mirrors `subscribed`, bits 1..31 count changes of
 * the level and capture requests, so that the probe notices any of them
 * with one relaxed load per event.  Lock held (writers are serialised).
 */
static void state_set(tm_server *srv, int subscribed, int bump)
{
	uint32_t s = atomic_load_explicit(&srv->state, memory_order_relaxed);

	s = (s & ~UINT32_C(1)) + (bump ? 2u : 0u);
	atomic_store_explicit(&srv->state, s | (subscribed ? 1u : 0u),
			      memory_order_release);
}

static void requests_changed(tm_server *srv)
{
	state_set(srv, srv->subscribed, 1);
}

/* Absolute deadline ms from now on the clock srv->cond waits on. */
static void deadline_ms(struct timespec *ts, long ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

static uint64_t mono_ns(void);

/* ------------------------------------------------------------- the directory */

/* A private directory: ours, a real directory (not a link), mode 0700. */
static int check_dir(const char *dir)
{
	struct stat st;

	if (lstat(dir, &st))
		return errno == ENOENT ? TM_ERR_NOT_FOUND : TM_ERR_IO;
	if (!S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077))
		return TM_ERR_IO;
	return TM_OK;
}

int tm_server_socket_dir(char *buf, size_t len, int create)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	int n;

	if (!buf || !len)
		return TM_ERR_INVALID_ARG;
	if (xdg && xdg[0] == '/')
		n = snprintf(buf, len, "%s/tensormorph", xdg);
	else
		n = snprintf(buf, len, "/tmp/tensormorph-%u", (unsigned)getuid());
	if (n < 0 || (size_t)n >= len)
		return TM_ERR_TOO_LARGE;
	if (create && mkdir(buf, 0700) && errno != EEXIST)
		return TM_ERR_IO;
	return check_dir(buf);
}

int tm_server_socket_path(pid_t pid, char *buf, size_t len)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int err, n;

	err = tm_server_socket_dir(dir, sizeof(dir), 0);
	if (err)
		return err;
	n = snprintf(buf, len, "%s/%ld.sock", dir, (long)pid);
	if (n < 0 || (size_t)n >= len)
		return TM_ERR_TOO_LARGE;
	return TM_OK;
}

int tm_server_rank_path(const char *path, int32_t rank, char *buf, size_t len)
{
	size_t l;
	int n;

	if (!path || rank < 0)
		return TM_ERR_INVALID_ARG;
	{
		/* TCP: rank R listens on PORT + R (PORT 0: each picks one) */
		char host[256];
		unsigned port;

		if (tm_server_parse_tcp(path, host, sizeof(host), &port) == 1) {
			if (port && port + (unsigned)rank > 65535)
				return TM_ERR_TOO_LARGE;
			n = snprintf(buf, len, strchr(host, ':') ? "tcp://[%s]:%u" : "tcp://%s:%u",
				     host, port ? port + (unsigned)rank : 0);
			return n < 0 || (size_t)n >= len ? TM_ERR_TOO_LARGE : TM_OK;
		}
	}
	l = strlen(path);
	if (l > 5 && !strcmp(path + l - 5, ".sock"))
		n = snprintf(buf, len, "%.*s.rank%d.sock", (int)(l - 5), path, (int)rank);
	else
		n = snprintf(buf, len, "%s.rank%d", path, (int)rank);
	if (n < 0 || (size_t)n >= len)
		return TM_ERR_TOO_LARGE;
	return TM_OK;
}

int tm_server_parse_tcp(const char *spec, char *host, size_t hlen, unsigned *port);

/* ------------------------------------------------------------- sending */

/* Writes what is queued without blocking; lock held.  A hard error drops. */
static void drop_client(tm_server *srv, int bad);

/* A debugger that reads slowly never empties the queue: what it took is
 * dropped from the front, so that the buffer stays near max_queue. */
static void compact_out(tm_server *srv)
{
	if (srv->out_off < (1u << 20) || srv->out_off < srv->out.len / 2)
		return;
	memmove(srv->out.data, srv->out.data + srv->out_off, srv->out.len - srv->out_off);
	srv->out.len -= srv->out_off;
	srv->out_off = 0;
}

static void flush_out(tm_server *srv)
{
	while (srv->cfd >= 0 && srv->out_off < srv->out.len) {
		ssize_t n = send(srv->cfd, srv->out.data + srv->out_off,
				 srv->out.len - srv->out_off,
				 MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n > 0) {
			srv->out_off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			/* The server thread will wait for POLLOUT; it is told
			 * once, not at every event a full socket refuses (a
			 * debugger that does not read must not cost the model
			 * a syscall per event, nor spin the server thread). */
			if (!srv->out_blocked) {
				srv->out_blocked = 1;
				if (write(srv->wake[1], "o", 1) < 0) {
					/* pipe full: the thread is awake anyway */
				}
			}
			compact_out(srv);
			return;
		}
		drop_client(srv, 0);
		return;
	}
	srv->out_blocked = 0;
	if (srv->out_off == srv->out.len)
		srv->out.len = srv->out_off = 0;
}

/* The hook path's flush: once a batch worth sending is queued.  It also
 * tries while the socket is full: leaving that to the server thread alone
 * stalled the stream (an MI -exec-interrupt of a running model never got
 * its stop; tmdb.mi/ide-live.pygdbmi), at the price of one refused send
 * per event while a debugger does not read. */
static void flush_some(tm_server *srv)
{
	if (srv->out.len - srv->out_off >= FLUSH_BYTES)
		flush_out(srv);
}

static int queued(const tm_server *srv)
{
	return srv->out.len - srv->out_off > 0;
}

static void send_msg(tm_server *srv, const struct tm_msg *m)
{
	if (srv->cfd < 0)
		return;
	if (tm_msg_encode(&srv->out, m) == TM_OK)
		flush_out(srv);
}

static void send_result(tm_server *srv, uint8_t type, uint8_t request,
			uint32_t id, int code, const char *text)
{
	struct tm_msg *m = calloc(1, sizeof(*m));

	if (!m)
		return;
	m->type = type;
	m->u.result.request = request;
	m->u.result.id = id;
	m->u.result.code = (uint32_t)code;
	snprintf(m->u.result.text, sizeof(m->u.result.text), "%s", text ? text : "");
	send_msg(srv, m);
	free(m);
}

/*
 * Appends one record frame from srv->scratch.  Events obey the queue cap
 * (force 0); nodes, gaps and metadata are never dropped (force 1): without
 * them the stream would not make sense.
 */
static int queue_buf(tm_server *srv, uint8_t type, const struct tm_buf *b, int force)
{
	if (!force && srv->out.len - srv->out_off + b->len > srv->o.max_queue)
		return TM_ERR_AGAIN;
	if (b->len > UINT32_MAX)
		return TM_ERR_TOO_LARGE;
	return tm_frame_encode(&srv->out, type, 0, b->data, (uint32_t)b->len);
}

static int queue_record(tm_server *srv, uint8_t type, int force)
{
	return queue_buf(srv, type, &srv->scratch, force);
}

/*
 * Annotations that did not fit the queue go out, as the gap does, before
 * the next event that fits (the queue's cap holds for them too: a stalled
 * debugger must not grow the model's memory).  Lock held.
 */
static void flush_annots(tm_server *srv)
{
	unsigned i;

	srv->annots_pending = 0;
	for (i = 0; i < srv->nannots; i++) {
		struct sannot *sa = &srv->annots[i];

		if (sa->pending && queue_buf(srv, TM_REC_ANNOT, &sa->enc, 0) == TM_OK)
			sa->pending = 0;
		srv->annots_pending |= sa->pending;
	}
}

/* Sends the pending gap, if any, before the next record. */
static void flush_gap(tm_server *srv)
{
	if (!srv->have_gap)
		return;
	srv->gscratch.len = 0;
	if (tm_encode_gap(&srv->gscratch, &srv->gap) == TM_OK &&
	    queue_buf(srv, TM_REC_GAP, &srv->gscratch, 1) == TM_OK)
		srv->have_gap = 0;
}

/* Adds seq to the pending gap (one gap may collect several reasons). */
static void note_gap(tm_server *srv, const struct tm_event *ev, uint32_t reason)
{
	if (srv->have_gap && ev->seq == srv->gap.last_seq + 1) {
		srv->gap.last_seq = ev->seq;
		srv->gap.count++;
		srv->gap.reason |= reason;
		return;
	}
	flush_gap(srv);
	srv->gap.first_seq = srv->gap.last_seq = ev->seq;
	srv->gap.count = 1;
	srv->gap.reason = reason;
	srv->gap.time_ns = ev->time_ns;
	srv->gap.step = ev->step;
	srv->have_gap = 1;
}

/* ------------------------------------------------------------- breakpoints */

static void sbp_free(struct sbp *b)
{
	if (!b)
		return;
	tm_breakpoint_clear(&b->bp);
	free(b);
}

static void bps_clear(tm_server *srv, uint32_t id)
{
	struct sbp **pp = &srv->bps, *b;

	while ((b = *pp)) {
		if (id && b->id != id) {
			pp = &b->next;
			continue;
		}
		*pp = b->next;
		sbp_free(b);
		srv->nbps--;
	}
}

/* Does b fire at ev?  *focus: the tensor that made it fire. */
static int sbp_match(tm_server *srv, struct sbp *b, const struct tm_event *ev,
		     uint32_t *focus)
{
	struct tm_tql_ctx ctx;

	memset(&ctx, 0, sizeof(ctx));
	ctx.event = ev;
	ctx.nodes = srv->nodes;
	ctx.rank = srv->rank;
	ctx.env = &srv->env;
	return tm_breakpoint_match(&b->bp, &ctx, focus) > 0;
}

/*
 * BREAK_SET: parse, bind, compile; the old breakpoint with this id goes.  An
 * address that matches no node yet is kept pending: tmdb sets breakpoints
 * before `run`, when the model has not registered its modules, and checks
 * the address against its own knowledge first.
 */
static void do_break_set(tm_server *srv, const struct tm_msg *m)
{
	struct tm_tql_compile_opts co;
	const char *emsg = NULL;
	char *errs = NULL;
	struct sbp *b;
	int col = 0, err, pending;
	char note[256];

	if (!m->u.brk.id) {
		send_result(srv, TM_MSG_RESULT, m->type, 0, TM_ERR_INVALID_ARG,
			    "breakpoint id 0 is reserved");
		return;
	}
	if (srv->nbps >= MAX_BREAKPOINTS) {
		send_result(srv, TM_MSG_RESULT, m->type, m->u.brk.id,
			    TM_ERR_TOO_LARGE, "too many breakpoints");
		return;
	}
	b = calloc(1, sizeof(*b));
	if (!b) {
		send_result(srv, TM_MSG_RESULT, m->type, m->u.brk.id, TM_ERR_NOMEM, NULL);
		return;
	}
	b->id = m->u.brk.id;
	if (tm_breakpoint_init(&b->bp, m->u.brk.where, &col, &emsg)) {
		snprintf(srv->detail, sizeof(srv->detail),
			 "malformed address \"%.160s\": %s at column %d", m->u.brk.where,
			 emsg ? emsg : "syntax error", col + 1);
		err = TM_ERR_ADDRESS;
		goto fail;
	}
	pending = tm_breakpoint_bind(&b->bp, srv->nodes) != TM_OK || !b->bp.nmatch;
	if (m->u.brk.cond[0]) {
		tm_tql_prog *cond = NULL;
		const char *why;

		memset(&co, 0, sizeof(co));
		co.nodes = srv->nodes;
		co.want_bool = 1;
		err = tm_tql_compile(m->u.brk.cond, &co, &cond, &errs);
		if (err) {
			snprintf(srv->detail, sizeof(srv->detail), "%s",
				 errs ? errs : tm_strerror(err));
			free(errs);
			goto fail;
		}
		tm_breakpoint_set_cond(&b->bp, cond);
		/* The probe keeps no history of other nodes' values and has
		 * none of the debugger's $variables. */
		if (!tm_breakpoint_cond_portable(cond, &why)) {
			snprintf(srv->detail, sizeof(srv->detail), "%s", why);
			err = TM_ERR_UNSUPPORTED;
			goto fail;
		}
	}
	bps_clear(srv, b->id);
	b->next = srv->bps;
	srv->bps = b;
	srv->nbps++;
	note[0] = 0;
	if (pending)
		snprintf(note, sizeof(note), "pending: no node matches \"%.200s\" yet",
			 m->u.brk.where);
	send_result(srv, TM_MSG_RESULT, m->type, b->id, TM_OK, note);
	return;
fail:
	send_result(srv, TM_MSG_RESULT, m->type, m->u.brk.id, err, srv->detail);
	sbp_free(b);
}

/* ------------------------------------------------------------- levels, captures */

static void do_set_level(tm_server *srv, const struct tm_msg *m)
{
	tm_address *a = NULL;
	struct lvl *nl;

	if (!m->u.level.pattern[0]) {
		srv->default_level = m->u.level.level;
		requests_changed(srv);
		send_result(srv, TM_MSG_RESULT, m->type, 0, TM_OK, NULL);
		return;
	}
	if (srv->nlevels >= MAX_LEVELS) {
		send_result(srv, TM_MSG_RESULT, m->type, 0, TM_ERR_TOO_LARGE,
			    "too many level overrides");
		return;
	}
	if (tm_address_parse(m->u.level.pattern, &a, NULL, NULL)) {
		send_result(srv, TM_MSG_RESULT, m->type, 0, TM_ERR_ADDRESS,
			    "malformed pattern");
		return;
	}
	nl = realloc(srv->levels, (srv->nlevels + 1) * sizeof(*nl));
	if (!nl) {
		tm_address_free(a);
		send_result(srv, TM_MSG_RESULT, m->type, 0, TM_ERR_NOMEM, NULL);
		return;
	}
	srv->levels = nl;
	nl[srv->nlevels].pat = a;
	nl[srv->nlevels].level = m->u.level.level;
	srv->nlevels++;
	requests_changed(srv);
	send_result(srv, TM_MSG_RESULT, m->type, 0, TM_OK, NULL);
}

/*
 * SET_OPS: the op patterns the debugger wants (doc/wire.md); the probe reads
 * them with tm_server_ops when the state word moves, on its model thread.
 */
static void do_set_ops(tm_server *srv, const struct tm_msg *m)
{
	const char *p = m->u.level.pattern;
	char one[TM_ADDRESS_MAX + 1];
	size_t n;

	/* comma-separated patterns, each well-formed */
	while (*p) {
		n = strcspn(p, ",");
		if (n && n < sizeof(one)) {
			tm_address *a = NULL;

			memcpy(one, p, n);
			one[n] = '\0';
			if (tm_address_parse(one, &a, NULL, NULL) || tm_address_has_op(a) ||
			    tm_address_has_slot(a) || tm_address_call(a)) {
				tm_address_free(a);
				send_result(srv, TM_MSG_RESULT, m->type, 0, TM_ERR_ADDRESS,
					    "malformed op pattern");
				return;
			}
			tm_address_free(a);
		} else if (n) {
			send_result(srv, TM_MSG_RESULT, m->type, 0, TM_ERR_ADDRESS,
				    "op pattern too long");
			return;
		}
		p += n;
		if (*p == ',')
			p++;
	}
	/* lock held: the server thread handles frames under it */
	snprintf(srv->ops, sizeof(srv->ops), "%s", m->u.level.pattern);
	srv->have_ops = 1;
	requests_changed(srv);
	send_result(srv, TM_MSG_RESULT, m->type, 0, TM_OK, NULL);
}

int tm_server_ops(tm_server *srv, char *buf, size_t len)
{
	int have;

	if (!srv || !buf || !len)
		return -1;
	pthread_mutex_lock(&srv->lock);
	have = srv->have_ops;
	snprintf(buf, len, "%s", have ? srv->ops : "");
	pthread_mutex_unlock(&srv->lock);
	return have;
}

static void levels_clear(tm_server *srv)
{
	size_t i;

	if (srv->nlevels || srv->default_level != -1 || srv->have_ops)
		requests_changed(srv);
	srv->have_ops = 0;
	srv->ops[0] = '\0';
	for (i = 0; i < srv->nlevels; i++)
		tm_address_free(srv->levels[i].pat);
	free(srv->levels);
	srv->levels = NULL;
	srv->nlevels = 0;
	srv->default_level = -1;
}

int tm_server_level(tm_server *srv, uint32_t node)
{
	const struct tm_node *nd;
	int lv = -1;
	size_t i;

	if (!srv || !atomic_load_explicit(&srv->active, memory_order_relaxed))
		return -1;
	pthread_mutex_lock(&srv->lock);
	lv = srv->default_level;
	nd = tm_nodetab_get(srv->nodes, node);
	/* The last override that matches wins, as `level` commands stack. */
	for (i = srv->nlevels; nd && i-- > 0;) {
		if (tm_address_match_path(srv->levels[i].pat, nd->address)) {
			lv = srv->levels[i].level;
			break;
		}
	}
	pthread_mutex_unlock(&srv->lock);
	return lv;
}

static void do_capture(tm_server *srv, const struct tm_msg *m)
{
	struct cap *nc;

	if (!tm_nodetab_get(srv->nodes, m->u.capture.node)) {
		send_result(srv, TM_MSG_RESULT, m->type, 0, TM_ERR_NOT_FOUND,
			    "no such node");
		return;
	}
	if (srv->ncaps >= MAX_CAPTURES) {
		send_result(srv, TM_MSG_RESULT, m->type, 0, TM_ERR_TOO_LARGE,
			    "too many pending captures");
		return;
	}
	nc = realloc(srv->caps, (srv->ncaps + 1) * sizeof(*nc));
	if (!nc) {
		send_result(srv, TM_MSG_RESULT, m->type, 0, TM_ERR_NOMEM, NULL);
		return;
	}
	srv->caps = nc;
	nc[srv->ncaps].node = m->u.capture.node;
	nc[srv->ncaps].slot = m->u.capture.slot;
	srv->ncaps++;
	requests_changed(srv);
	send_result(srv, TM_MSG_RESULT, m->type, 0, TM_OK, NULL);
}

int tm_server_rerun(tm_server *srv)
{
	int ret = 0;

	if (!srv)
		return 0;
	pthread_mutex_lock(&srv->lock);
	if (srv->step_mode == TM_RESUME_RERUN) {
		srv->step_mode = TM_RESUME_STEP;
		srv->step_left = 1;
		ret = 1;
	}
	pthread_mutex_unlock(&srv->lock);
	return ret;
}

int tm_server_wants_capture(tm_server *srv, uint32_t node)
{
	size_t i;
	int want = 0;

	if (!srv || !atomic_load_explicit(&srv->active, memory_order_relaxed))
		return 0;
	pthread_mutex_lock(&srv->lock);
	for (i = 0; i < srv->ncaps && !want; i++)
		want = srv->caps[i].node == node;
	pthread_mutex_unlock(&srv->lock);
	return want;
}

/* An event carried the payload a capture asked for: the request is done. */
static void captures_satisfy(tm_server *srv, const struct tm_event *ev)
{
	size_t i, j;

	for (i = 0; i < srv->ncaps;) {
		int done = 0;

		for (j = 0; j < ev->ntensors && !done; j++)
			done = srv->caps[i].node == ev->node && ev->tensors[j].payload &&
			       ev->tensors[j].slot.kind == srv->caps[i].slot.kind &&
			       ev->tensors[j].slot.index == srv->caps[i].slot.index;
		if (done) {
			srv->caps[i] = srv->caps[--srv->ncaps];
			requests_changed(srv);
		} else
			i++;
	}
}

/* ------------------------------------------------------------- the connection */

/* Forgets everything the debugger asked for and lets the model run. */
static void session_reset(tm_server *srv)
{
	unsigned i;

	bps_clear(srv, 0);
	levels_clear(srv);
	free(srv->caps);
	srv->caps = NULL;
	state_set(srv, 0, srv->ncaps != 0);
	srv->ncaps = 0;
	srv->greeted = srv->subscribed = 0;
	tm_address_free(srv->filter);
	srv->filter = NULL;
	srv->have_gap = 0;
	for (i = 0; i < srv->nannots; i++)
		srv->annots[i].pending = 0;     /* the next one gets them at SUBSCRIBE */
	srv->annots_pending = 0;
	srv->step_mode = -1;
	if (srv->stopped) {
		srv->stopped = 0;
		srv->stop_gen++;
	}
	atomic_store(&srv->active, 0);
	pthread_cond_broadcast(&srv->cond);
}

static void drop_client(tm_server *srv, int bad)
{
	if (srv->cfd < 0)
		return;
	close(srv->cfd);
	srv->cfd = -1;
	if (bad)
		srv->st.bad_frames++;
	tm_frame_decoder_free(srv->dec);
	srv->dec = NULL;
	srv->out.len = srv->out_off = 0;
	srv->out_blocked = 0;
	srv->st.connected = 0;
	session_reset(srv);
}

/* Says BYE (best effort: the socket is non-blocking) and drops. */
static void bye(tm_server *srv, int code, const char *text, int bad)
{
	send_result(srv, TM_MSG_BYE, 0, 0, code, text);
	drop_client(srv, bad);
}

/* Compares the whole token whatever differs where: no timing tells an
 * attacker how much of a guess was right. */
static int token_ok(const tm_server *srv, const char *given)
{
	size_t i, n = strlen(srv->token), g = strnlen(given, TM_MSG_MAX_TOKEN + 1);
	unsigned char diff = (unsigned char)(g != n);

	for (i = 0; i < n; i++)
		diff |= (unsigned char)(srv->token[i] ^ (i < g ? given[i] : 0));
	return diff == 0;
}

static void do_hello(tm_server *srv, const struct tm_msg *m)
{
	struct tm_msg *d;

	if (srv->tcp && !token_ok(srv, m->u.hello.token)) {
		const char *t = m->u.hello.token[0] ? "wrong token" :
				"a token is required over TCP (tmdb reads it from the "
				"probe's token file, or --token)";

		send_result(srv, TM_MSG_RESULT, m->type, 0, TM_ERR_INVALID_ARG, t);
		bye(srv, TM_ERR_INVALID_ARG, t, 1);
		return;
	}
	snprintf(srv->peer, sizeof(srv->peer), "%.63s", m->u.hello.name[0] ?
		 m->u.hello.name : "a debugger");

	if (m->u.hello.major != TM_WIRE_VERSION_MAJOR) {
		char t[96];

		snprintf(t, sizeof(t), "wire protocol %u.x is not supported (this "
			 "probe speaks %d.%d)", m->u.hello.major,
			 TM_WIRE_VERSION_MAJOR, TM_WIRE_VERSION_MINOR);
		send_result(srv, TM_MSG_RESULT, m->type, 0, TM_ERR_VERSION, t);
		bye(srv, TM_ERR_VERSION, t, 0);
		return;
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		bye(srv, TM_ERR_NOMEM, "out of memory", 0);
		return;
	}
	d->type = TM_MSG_DESCRIBE;
	d->u.hello.major = TM_WIRE_VERSION_MAJOR;
	d->u.hello.minor = TM_WIRE_VERSION_MINOR;
	d->u.hello.pid = (uint32_t)getpid();
	d->u.hello.caps = srv->o.caps | (srv->flight_fn ? (uint32_t)TM_CAP_FLIGHT : 0u);
	if (srv->flight_fn && srv->flight_dumps &&
	    __atomic_load_n(srv->flight_dumps, __ATOMIC_ACQUIRE))
		d->u.hello.caps |= TM_CAP_WINDOW;
	d->u.hello.max_level = srv->o.max_level;
	snprintf(d->u.hello.name, sizeof(d->u.hello.name), "%s", srv->probe_kind);
	snprintf(d->u.hello.trace, sizeof(d->u.hello.trace), "%s",
		 srv->trace ? srv->trace : "");
	send_msg(srv, d);
	free(d);
	srv->greeted = 1;
	atomic_store(&srv->active, 1);
}

/* SUBSCRIBE: answer, then the metadata and every node known so far. */
static void do_subscribe(tm_server *srv, const struct tm_msg *m)
{
	tm_address *a = NULL;
	uint32_t i, n;
	int first;

	if (m->u.subscribe.pattern[0] &&
	    tm_address_parse(m->u.subscribe.pattern, &a, NULL, NULL)) {
		send_result(srv, TM_MSG_RESULT, m->type, 0, TM_ERR_ADDRESS,
			    "malformed pattern");
		return;
	}
	tm_address_free(srv->filter);
	srv->filter = a;
	srv->from_seq = m->u.subscribe.from_seq;
	first = !srv->subscribed;
	/* Visible before the debugger hears back, as the lock is for events. */
	srv->subscribed = 1;
	state_set(srv, 1, 0);
	send_result(srv, TM_MSG_RESULT, m->type, 0, TM_OK, NULL);
	if (first) {
		if (srv->meta.len)
			tm_frame_encode(&srv->out, TM_REC_META, 0, srv->meta.data,
					(uint32_t)srv->meta.len);
		n = tm_nodetab_count(srv->nodes);
		for (i = 0; i < n; i++) {
			srv->scratch.len = 0;
			if (tm_encode_node(&srv->scratch, tm_nodetab_get(srv->nodes, i)) == TM_OK)
				queue_record(srv, TM_REC_NODE, 1);
		}
		/* the current step's annotations: a debugger attaching in the
		 * middle of a forward knows its requests */
		for (i = 0; i < srv->nannots; i++)
			if (srv->annots[i].enc.len)
				queue_buf(srv, TM_REC_ANNOT, &srv->annots[i].enc, 1);
		/* tm_server_wait_client: the model stops at its next event, as
		 * after INTERRUPT, decided under the same lock as the
		 * subscription so no event can slip through in between. */
		if (srv->waiters && !srv->stopped) {
			srv->step_mode = TM_RESUME_STEP;
			srv->step_left = 1;
		}
	}
	pthread_cond_broadcast(&srv->cond);
	flush_out(srv);
}

static int node_depth(tm_server *srv, uint32_t id)
{
	const struct tm_node *n = tm_nodetab_get(srv->nodes, id);

	return n ? n->depth : 0;
}

/*
 * RESUME: step/next/finish become a one-shot internal breakpoint checked
 * before the user's on the following events.
 */
static void do_resume(tm_server *srv, const struct tm_msg *m)
{
	const struct tm_event *e = &srv->last;

	if (!srv->stopped && (srv->o.no_pause || srv->self_resumed)) {
		/* the stop did not hold the model (notify only, or pause_ms
		 * ended it): the debugger's resume is late, not wrong */
		srv->self_resumed = 0;
		send_result(srv, TM_MSG_RESULT, m->type, 0, TM_OK, NULL);
		return;
	}
	if (!srv->stopped) {
		send_result(srv, TM_MSG_RESULT, m->type, 0, TM_ERR_INVALID_ARG,
			    "the model is running");
		return;
	}
	srv->step_mode = -1;
	switch (m->u.resume.mode) {
	case TM_RESUME_STEP:
		srv->step_mode = TM_RESUME_STEP;
		break;
	case TM_RESUME_NEXT:
		srv->step_mode = TM_RESUME_NEXT;
		srv->step_depth = node_depth(srv, e->node);
		break;
	case TM_RESUME_FINISH:
		if (e->kind == TM_EV_ENTER) {
			srv->fin_node = e->node;
			srv->fin_call = e->call;
		} else if ((e->kind == TM_EV_EXIT || e->kind == TM_EV_RAISE) && srv->nstack) {
			/* The stack no longer holds the call that just returned. */
			srv->fin_node = srv->stack[srv->nstack - 1].node;
			srv->fin_call = srv->stack[srv->nstack - 1].call;
		} else {
			send_result(srv, TM_MSG_RESULT, m->type, 0, TM_ERR_INVALID_ARG,
				    e->kind == TM_EV_EXIT ?
				    "\"finish\" not meaningful in the outermost frame" :
				    "\"finish\" not meaningful at this event");
			return;
		}
		srv->step_mode = TM_RESUME_FINISH;
		break;
	case TM_RESUME_RERUN:
		/* no stop until the probe begins the re-run (tm_server_rerun) */
		srv->step_mode = TM_RESUME_RERUN;
		break;
	default:
		break;
	}
	srv->step_left = m->u.resume.count;
	srv->stopped = 0;
	srv->stop_gen++;
	send_result(srv, TM_MSG_RESULT, m->type, 0, TM_OK, NULL);
	pthread_cond_broadcast(&srv->cond);
}

/* FLIGHT: the recorder's handler, with the lock released (it takes the
 * recorder's locks, which are held around calls into this server). */
static void do_flight(tm_server *srv, const struct tm_msg *m)
{
	tm_server_flight_fn fn = srv->flight_fn;
	void *user = srv->flight_user;
	char detail[512];
	int err;

	if (!fn) {
		send_result(srv, TM_MSG_RESULT, m->type, 0, TM_ERR_UNSUPPORTED,
			    "this probe writes no trace to keep a flight window for");
		return;
	}
	detail[0] = 0;
	srv->flight_busy = 1;
	pthread_mutex_unlock(&srv->lock);
	err = fn(user, m->u.flight.op, m->u.flight.steps, m->u.flight.reason,
		 detail, sizeof(detail));
	pthread_mutex_lock(&srv->lock);
	srv->flight_busy = 0;
	pthread_cond_broadcast(&srv->cond);
	/* flight mode may have come on: the probe installs its own triggers
	 * when it next looks at its requests */
	if (!err)
		requests_changed(srv);
	send_result(srv, TM_MSG_RESULT, m->type, 0, (uint32_t)err, detail);
}

void tm_server_flight_handler(tm_server *srv, tm_server_flight_fn fn, void *user,
			      const uint32_t *dumps)
{
	if (!srv)
		return;
	pthread_mutex_lock(&srv->lock);
	while (srv->flight_busy)
		pthread_cond_wait(&srv->cond, &srv->lock);
	srv->flight_fn = fn;
	srv->flight_user = user;
	srv->flight_dumps = fn ? dumps : NULL;
	pthread_mutex_unlock(&srv->lock);
}

static void handle(tm_server *srv, const struct tm_frame *f)
{
	struct tm_msg *m;
	int err;

	srv->last_rx_ns = mono_ns();
	if (f->type < 64)
		return;         /* a debugger sends no records: ignore */
	m = malloc(sizeof(*m));
	if (!m) {
		bye(srv, TM_ERR_NOMEM, "out of memory", 0);
		return;
	}
	err = tm_msg_decode(f, m);
	if (err == TM_ERR_UNSUPPORTED)
		goto out;       /* a newer debugger's message: skip */
	if (err) {
		bye(srv, err, "malformed message", 1);
		goto out;
	}
	if (!srv->greeted && m->type != TM_MSG_HELLO) {
		send_result(srv, TM_MSG_RESULT, m->type, 0, TM_ERR_INVALID_ARG,
			    "HELLO must come first");
		bye(srv, TM_ERR_INVALID_ARG, "HELLO must come first", 1);
		goto out;
	}
	switch (m->type) {
	case TM_MSG_HELLO: do_hello(srv, m); break;
	case TM_MSG_SUBSCRIBE: do_subscribe(srv, m); break;
	case TM_MSG_BREAK_SET: do_break_set(srv, m); break;
	case TM_MSG_BREAK_CLEAR:
		bps_clear(srv, m->u.brk.id);
		send_result(srv, TM_MSG_RESULT, m->type, m->u.brk.id, TM_OK, NULL);
		break;
	case TM_MSG_CAPTURE: do_capture(srv, m); break;
	case TM_MSG_RESUME: do_resume(srv, m); break;
	case TM_MSG_SET_LEVEL: do_set_level(srv, m); break;
	case TM_MSG_SET_OPS: do_set_ops(srv, m); break;
	case TM_MSG_FLIGHT: do_flight(srv, m); break;
	case TM_MSG_DETACH: bye(srv, TM_OK, "detached", 0); break;
	case TM_MSG_KILL:
		/* The model thread, paused or at its next event, sees this,
		 * and the recorder finishes the trace before the process
		 * dies (tm_recorder_submit): a killed run leaves a whole
		 * file, not what happened to be flushed. */
		atomic_store(&srv->killed, 1);
		send_result(srv, TM_MSG_RESULT, m->type, 0, TM_OK, NULL);
		pthread_cond_broadcast(&srv->cond);
		break;
	case TM_MSG_INTERRUPT:
		/* A step from wherever the model is; nothing to do if paused.
		 * Between events the program is asked to hold where it is
		 * (tm_server_hold), so that nothing of it runs on while the
		 * debugger shows its stop; whichever comes first stops it. */
		if (!srv->stopped) {
			srv->step_mode = TM_RESUME_STEP;
			srv->step_left = 1;
			if (srv->pause_fn && !srv->inside && srv->have_seen && !srv->o.no_pause) {
				srv->hold_wanted = 1;
				srv->pause_fn(srv->pause_user);
			}
		}
		send_result(srv, TM_MSG_RESULT, m->type, 0, TM_OK, NULL);
		break;
	default:
		/* Probe-to-debugger messages make no sense here. */
		bye(srv, TM_ERR_INVALID_ARG, "unexpected message", 1);
		break;
	}
out:
	free(m);
}

/* Reads what the debugger sent and handles every whole frame; lock held. */
static void read_client(tm_server *srv)
{
	uint8_t buf[16384];
	struct tm_frame f;
	ssize_t n;
	int err;

	n = recv(srv->cfd, buf, sizeof(buf), MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0) {
		drop_client(srv, 0);
		return;
	}
	if (tm_frame_decoder_feed(srv->dec, buf, (size_t)n)) {
		drop_client(srv, 1);
		return;
	}
	while (srv->cfd >= 0) {
		err = tm_frame_decoder_next(srv->dec, &f);
		if (err == TM_ERR_AGAIN)
			break;
		if (err) {
			bye(srv, err, "bad frame", 1);
			break;
		}
		handle(srv, &f);
	}
}

/* Says BYE on a connection that is not the debugger's and closes it. */
static void refuse_text(int fd, int code, const char *text)
{
	struct tm_msg *m = calloc(1, sizeof(*m));
	struct tm_buf b = { 0 };

	if (m) {
		m->type = TM_MSG_BYE;
		m->u.result.code = (uint32_t)code;
		snprintf(m->u.result.text, sizeof(m->u.result.text), "%s", text);
		if (tm_msg_encode(&b, m) == TM_OK &&
		    send(fd, b.data, b.len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
			/* nothing to do: it is being closed */
		}
	}
	tm_buf_free(&b);
	free(m);
	close(fd);
}

/* A second debugger while the first is active is told no at once. */
static void refuse(tm_server *srv, int fd)
{
	char t[200];
	uint64_t idle = (mono_ns() - srv->last_rx_ns) / 1000000000ull;

	if (srv->tcp)   /* nothing about the session to whoever knocks */
		snprintf(t, sizeof(t), "another debugger is attached");
	else
		snprintf(t, sizeof(t), "another debugger is attached (%s, last heard from "
			 "%llu s ago; it can be taken over once it has been silent for %u s)",
			 srv->peer, (unsigned long long)idle,
			 (unsigned)((srv->o.takeover_ms + 999) / 1000));
	refuse_text(fd, TM_ERR_GENERIC, t);
}

static void cand_close(tm_server *srv, struct cand *c, int code, const char *text, int bad)
{
	if (text)
		refuse_text(c->fd, code, text);
	else
		close(c->fd);
	tm_frame_decoder_free(c->dec);
	c->fd = -1;
	c->dec = NULL;
	if (bad)
		srv->st.bad_frames++;
}

/*
 * A candidate said HELLO: it becomes the debugger -- in place of an
 * attached one that has been silent for takeover_ms, which is told why it
 * lost its place -- or is refused.  Lock held.
 */
static void cand_promote(tm_server *srv, struct cand *c, const struct tm_frame *f)
{
	char note[300] = "";
	uint64_t now = mono_ns();

	if (srv->cfd >= 0) {
		uint64_t idle = now - srv->last_rx_ns;
		char t[200];

		if (idle < (uint64_t)srv->o.takeover_ms * 1000000ull) {
			c->fd = (refuse(srv, c->fd), -1);
			tm_frame_decoder_free(c->dec);
			c->dec = NULL;
			return;
		}
		snprintf(t, sizeof(t), "another debugger took over: this one had been "
			 "silent for %llu s", (unsigned long long)(idle / 1000000000ull));
		snprintf(note, sizeof(note), "took over from %s, silent for %llu s",
			 srv->peer, (unsigned long long)(idle / 1000000000ull));
		bye(srv, TM_ERR_CLOSED, t, 0);
	}
	srv->cfd = c->fd;
	srv->dec = c->dec;
	c->fd = -1;
	c->dec = NULL;
	srv->st.connected = 1;
	srv->last_rx_ns = now;
	handle(srv, f);
	if (note[0] && srv->cfd >= 0 && srv->greeted) {
		/* the new debugger hears why the old one is gone */
		send_result(srv, TM_MSG_RESULT, TM_MSG_HELLO, 0, TM_OK, note);
	}
}

/* Reads a candidate's bytes; its first frame must be HELLO.  Lock held. */
static void read_cand(tm_server *srv, struct cand *c)
{
	uint8_t buf[4096];
	struct tm_frame f;
	ssize_t n;
	int err;

	n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0) {
		cand_close(srv, c, 0, NULL, 0);
		return;
	}
	if (tm_frame_decoder_feed(c->dec, buf, (size_t)n)) {
		cand_close(srv, c, 0, NULL, 1);
		return;
	}
	err = tm_frame_decoder_next(c->dec, &f);
	if (err == TM_ERR_AGAIN)
		return;
	if (err) {
		cand_close(srv, c, err, "bad frame", 1);
		return;
	}
	if (f.type != TM_MSG_HELLO) {
		struct tm_msg *m = calloc(1, sizeof(*m));
		struct tm_buf b = { 0 };

		/* as wire.md 2.4 says: RESULT, then BYE */
		if (m) {
			m->type = TM_MSG_RESULT;
			m->u.result.request = f.type;
			m->u.result.code = TM_ERR_INVALID_ARG;
			snprintf(m->u.result.text, sizeof(m->u.result.text),
				 "HELLO must come first");
			if (tm_msg_encode(&b, m) == TM_OK &&
			    send(c->fd, b.data, b.len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
				/* it is being closed */
			}
			tm_buf_free(&b);
			free(m);
		}
		cand_close(srv, c, TM_ERR_INVALID_ARG, "HELLO must come first", 1);
		return;
	}
	if (srv->tcp) {
		/* the token before anything else: a client without it must
		 * not even take an idle debugger's place */
		struct tm_msg *m = malloc(sizeof(*m));
		const char *why = NULL;

		if (!m) {
			cand_close(srv, c, TM_ERR_NOMEM, "out of memory", 0);
			return;
		}
		if (tm_msg_decode(&f, m))
			why = "malformed message";
		else if (!token_ok(srv, m->u.hello.token))
			why = m->u.hello.token[0] ? "wrong token" :
			      "a token is required over TCP (tmdb reads it from the probe's "
			      "token file, or --token)";
		if (why) {
			struct tm_msg *r = calloc(1, sizeof(*r));
			struct tm_buf b = { 0 };

			if (r) {
				r->type = TM_MSG_RESULT;
				r->u.result.request = TM_MSG_HELLO;
				r->u.result.code = TM_ERR_INVALID_ARG;
				snprintf(r->u.result.text, sizeof(r->u.result.text), "%s", why);
				if (tm_msg_encode(&b, r) == TM_OK &&
				    send(c->fd, b.data, b.len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
					/* it is being closed */
				}
				tm_buf_free(&b);
				free(r);
			}
			free(m);
			cand_close(srv, c, TM_ERR_INVALID_ARG, why, 1);
			return;
		}
		free(m);
	}
	cand_promote(srv, c, &f);
	/* what it sent after HELLO, in the same read */
	while (srv->cfd >= 0 && srv->dec) {
		err = tm_frame_decoder_next(srv->dec, &f);
		if (err == TM_ERR_AGAIN)
			break;
		if (err) {
			bye(srv, err, "bad frame", 1);
			break;
		}
		handle(srv, &f);
	}
}

static void accept_one(tm_server *srv)
{
	int fd = accept4(srv->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	unsigned i;

	if (fd < 0)
		return;
	srv->st.clients++;
	if (srv->cfd >= 0 &&
	    mono_ns() - srv->last_rx_ns < (uint64_t)srv->o.takeover_ms * 1000000ull) {
		refuse(srv, fd);
		return;
	}
	for (i = 0; i < MAX_CANDS; i++) {
		if (srv->cands[i].fd >= 0)
			continue;
		srv->cands[i].dec = tm_frame_decoder_new(srv->o.max_frame);
		if (!srv->cands[i].dec)
			break;
		srv->cands[i].fd = fd;
		srv->cands[i].t0 = mono_ns();
		return;
	}
	refuse_text(fd, TM_ERR_AGAIN, "too many connections waiting to say HELLO");
}

/* Closes candidates past their HELLO deadline; returns ms to the next. */
static int expire_cands(tm_server *srv, int timeout)
{
	uint64_t now = mono_ns(), lim = (uint64_t)srv->o.hello_ms * 1000000ull;
	unsigned i;

	for (i = 0; i < MAX_CANDS; i++) {
		struct cand *c = &srv->cands[i];
		int left;

		if (c->fd < 0)
			continue;
		if (now - c->t0 >= lim) {
			char t[96];

			snprintf(t, sizeof(t), "no HELLO within %u ms", srv->o.hello_ms);
			cand_close(srv, c, TM_ERR_AGAIN, t, 1);
			continue;
		}
		left = (int)((lim - (now - c->t0)) / 1000000ull) + 1;
		if (left < timeout)
			timeout = left;
	}
	return timeout;
}

/*
 * Waits (lock held, released while polling) until the debugger has taken
 * what is queued: at shutdown the queue is the end of the run, which a
 * non-blocking send into a full socket would lose.  A debugger that reads
 * is waited for (a slow one on a loaded machine too); one that has taken
 * nothing for idle_ms is given up.
 */
static void drain_out(tm_server *srv, int idle_ms)
{
	struct timespec t0, t;
	struct pollfd pf;
	size_t left_bytes;
	long left;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	flush_out(srv);
	while (srv->cfd >= 0 && queued(srv)) {
		left_bytes = srv->out.len - srv->out_off;
		clock_gettime(CLOCK_MONOTONIC, &t);
		left = idle_ms - ((t.tv_sec - t0.tv_sec) * 1000L +
				  (t.tv_nsec - t0.tv_nsec) / 1000000L);
		if (left <= 0)
			break;
		pf.fd = srv->cfd;
		pf.events = POLLOUT;
		pthread_mutex_unlock(&srv->lock);
		poll(&pf, 1, (int)left);
		pthread_mutex_lock(&srv->lock);
		flush_out(srv);
		if (srv->out.len - srv->out_off < left_bytes)
			clock_gettime(CLOCK_MONOTONIC, &t0);    /* progress */
	}
}

static void *server_main(void *arg)
{
	tm_server *srv = arg;
	struct pollfd pf[3 + MAX_CANDS];
	int ci[MAX_CANDS];
	char junk[64];
	int timeout;

	pthread_mutex_lock(&srv->lock);
	while (!srv->stopping) {
		nfds_t n = 2, k, nc = 0, cpos;
		int cl = -1;
		unsigned i;

		pf[0].fd = srv->wake[0];
		pf[0].events = POLLIN;
		pf[1].fd = srv->lfd;
		pf[1].events = POLLIN;
		if (srv->cfd >= 0) {
			cl = (int)n;
			pf[n].fd = srv->cfd;
			pf[n].events = POLLIN | (srv->out_blocked ? POLLOUT : 0);
			n++;
		}
		cpos = n;
		for (i = 0; i < MAX_CANDS; i++) {
			if (srv->cands[i].fd < 0)
				continue;
			ci[nc++] = (int)i;
			pf[n].fd = srv->cands[i].fd;
			pf[n].events = POLLIN;
			n++;
		}
		timeout = cl >= 0 && srv->subscribed ? FLUSH_MS : 1000;
		timeout = expire_cands(srv, timeout);
		pthread_mutex_unlock(&srv->lock);
		if (poll(pf, n, timeout) < 0 && errno != EINTR) {
			pthread_mutex_lock(&srv->lock);
			break;
		}
		pthread_mutex_lock(&srv->lock);
		if (pf[0].revents & POLLIN)
			while (read(srv->wake[0], junk, sizeof(junk)) > 0)
				;
		if (srv->stopping)
			break;
		if (cl >= 0 && srv->cfd == pf[cl].fd) {
			/* a full socket is retried when it has room, not at
			 * every wake-up */
			if (queued(srv) && (!srv->out_blocked || (pf[cl].revents & POLLOUT)))
				flush_out(srv);
			if (srv->cfd >= 0 && (pf[cl].revents & (POLLIN | POLLHUP | POLLERR)))
				read_client(srv);
		}
		for (k = 0; k < nc; k++) {
			struct cand *c = &srv->cands[ci[k]];

			if (c->fd == pf[cpos + k].fd &&
			    (pf[cpos + k].revents & (POLLIN | POLLHUP | POLLERR)))
				read_cand(srv, c);
		}
		if (pf[1].revents & POLLIN)
			accept_one(srv);
	}
	for (timeout = 0; timeout < MAX_CANDS; timeout++)
		if (srv->cands[timeout].fd >= 0)
			cand_close(srv, &srv->cands[timeout], TM_OK,
				   "the probe is shutting down", 0);
	if (srv->cfd >= 0) {
		/* The seqs filtered or dropped last are still owed a gap. */
		flush_gap(srv);
		drain_out(srv, DRAIN_MS);
		send_result(srv, TM_MSG_BYE, 0, 0, TM_OK, "the probe is shutting down");
		drain_out(srv, DRAIN_MS / 4);
		drop_client(srv, 0);
	}
	pthread_mutex_unlock(&srv->lock);
	return NULL;
}

/* ------------------------------------------------------------- start, stop */

/* Why the last tm_server_start of this thread failed (tm_server_start_error). */
static __thread char start_error[512];

__attribute__((format(printf, 2, 3)))
static int start_fail(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(start_error, sizeof(start_error), fmt, ap);
	va_end(ap);
	return err;
}

const char *tm_server_start_error(void)
{
	return start_error;
}

/* What is wrong with a socket directory, for the message. */
static void dir_problem(const char *dir, char *buf, size_t len)
{
	struct stat st;

	if (lstat(dir, &st))
		snprintf(buf, len, "%s", strerror(errno));
	else if (S_ISLNK(st.st_mode))
		snprintf(buf, len, "a symbolic link, not a directory");
	else if (!S_ISDIR(st.st_mode))
		snprintf(buf, len, "not a directory");
	else if (st.st_uid != getuid())
		snprintf(buf, len, "owned by uid %u, not by us (uid %u)",
			 (unsigned)st.st_uid, (unsigned)getuid());
	else
		snprintf(buf, len, "mode %04o: others can enter it (it must be 0700)",
			 (unsigned)(st.st_mode & 07777));
}

/*
 * A listen path may be reused only when it is a stale socket of ours: a
 * socket file we own that nobody listens on.  Anything else -- a regular
 * file, a link, a live socket -- is left alone and the start fails.
 */
static int path_free(const char *path)
{
	struct sockaddr_un sa;
	struct stat st;
	int fd, rc;

	if (lstat(path, &st))
		return errno == ENOENT ? TM_OK :
		       start_fail(TM_ERR_IO, "%s: %s", path, strerror(errno));
	if (!S_ISSOCK(st.st_mode))
		return start_fail(TM_ERR_IO, "%s: exists and is not a socket: not removed "
				  "(choose another listen path)", path);
	if (st.st_uid != getuid())
		return start_fail(TM_ERR_IO, "%s: a socket of uid %u: not removed", path,
				  (unsigned)st.st_uid);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return start_fail(TM_ERR_IO, "socket: %s", strerror(errno));
	rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	close(fd);
	if (rc == 0)
		return start_fail(TM_ERR_IO, "%s: another process listens on it", path);
	if (errno != ECONNREFUSED)
		return start_fail(TM_ERR_IO, "%s: %s", path, strerror(errno));
	unlink(path);           /* ours, and dead */
	return TM_OK;
}

/*
 * "tcp://HOST:PORT", "tcp://:PORT", "tcp://PORT" and "HOST:PORT" (digits
 * after the last colon, no slash) are TCP; HOST defaults to 127.0.0.1.
 * Returns 1 for TCP, 0 for a socket path, -1 for a malformed TCP spec.
 */
int tm_server_parse_tcp(const char *spec, char *host, size_t hlen, unsigned *port)
{
	const char *p = spec, *colon;
	char *end;
	unsigned long v;
	size_t n;

	if (!spec)
		return 0;
	if (!strncmp(p, "tcp://", 6))
		p += 6;
	else if (strchr(p, '/') || !(colon = strrchr(p, ':')) || !colon[1] ||
		 strspn(colon + 1, "0123456789") != strlen(colon + 1))
		return 0;
	colon = strrchr(p, ':');
	if (p[0] == '[') {
		/* [v6]:port */
		const char *rb = strchr(p, ']');

		if (!rb || rb[1] != ':')
			return -1;
		colon = rb + 1;
		n = (size_t)(rb - p - 1);
		p++;
	} else {
		n = colon ? (size_t)(colon - p) : 0;
	}
	if (n >= hlen)
		return -1;
	if (n)
		memcpy(host, p, n);
	else
		snprintf(host, hlen, "127.0.0.1"), n = strlen(host);
	host[n] = 0;
	p = colon ? colon + 1 : p;
	if (!*p || strspn(p, "0123456789") != strlen(p))
		return -1;
	errno = 0;
	v = strtoul(p, &end, 10);
	if (errno || *end || v > 65535)
		return -1;
	*port = (unsigned)v;
	return 1;
}

/* Random token, written to DIR/tcp-PORT.token (0600) for tmdb to read. */
static int make_token(tm_server *srv, unsigned port)
{
	static const char hex[] = "0123456789abcdef";
	uint8_t raw[TOKEN_BYTES];
	char dir[sizeof(srv->path)], prob[128];
	size_t got = 0;
	int fd, err;
	unsigned i;

	while (got < sizeof(raw)) {
		ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return start_fail(TM_ERR_IO, "getrandom: %s", strerror(errno));
		got += (size_t)n;
	}
	for (i = 0; i < TOKEN_BYTES; i++) {
		srv->token[2 * i] = hex[raw[i] >> 4];
		srv->token[2 * i + 1] = hex[raw[i] & 15];
	}
	srv->token[2 * TOKEN_BYTES] = 0;
	err = tm_server_socket_dir(dir, sizeof(dir), 1);
	if (err) {
		dir_problem(dir, prob, sizeof(prob));
		return start_fail(err, "%s: cannot keep the TCP token there: %s", dir, prob);
	}
	snprintf(srv->token_path, sizeof(srv->token_path), "%s/tcp-%u.token", dir, port);
	unlink(srv->token_path);        /* a dead probe's, in our private directory */
	fd = open(srv->token_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, srv->token, 2 * TOKEN_BYTES) != 2 * TOKEN_BYTES ||
	    write(fd, "\n", 1) != 1) {
		err = start_fail(TM_ERR_IO, "%s: %s", srv->token_path, strerror(errno));
		if (fd >= 0)
			close(fd);
		unlink(srv->token_path);
		srv->token_path[0] = 0;
		return err;
	}
	close(fd);
	return TM_OK;
}

static int listen_tcp(tm_server *srv, const char *host, unsigned port)
{
	struct addrinfo hints, *ai = NULL, *a;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char ps[8], shown[64];
	int one = 1, rc, err;
	unsigned actual;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	snprintf(ps, sizeof(ps), "%u", port);
	rc = getaddrinfo(host, ps, &hints, &ai);
	if (rc)
		return start_fail(TM_ERR_IO, "tcp://%s:%u: %s", host, port, gai_strerror(rc));
	err = TM_ERR_IO;
	for (a = ai; a; a = a->ai_next) {
		srv->lfd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
				  a->ai_protocol);
		if (srv->lfd < 0)
			continue;
		setsockopt(srv->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (!bind(srv->lfd, a->ai_addr, a->ai_addrlen) && !listen(srv->lfd, 4))
			break;
		start_fail(TM_ERR_IO, "tcp://%s:%u: %s", host, port, strerror(errno));
		close(srv->lfd);
		srv->lfd = -1;
	}
	freeaddrinfo(ai);
	if (srv->lfd < 0)
		return err;
	if (getsockname(srv->lfd, (struct sockaddr *)&ss, &sl))
		return start_fail(TM_ERR_IO, "getsockname: %s", strerror(errno));
	if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		actual = ntohs(s6->sin6_port);
		inet_ntop(AF_INET6, &s6->sin6_addr, shown, sizeof(shown));
		snprintf(srv->path, sizeof(srv->path), "tcp://[%s]:%u", shown, actual);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		actual = ntohs(s4->sin_port);
		inet_ntop(AF_INET, &s4->sin_addr, shown, sizeof(shown));
		snprintf(srv->path, sizeof(srv->path), "tcp://%s:%u", shown, actual);
	}
	srv->tcp = 1;
	return make_token(srv, actual);
}

int tm_server_start(const struct tm_server_opts *opts, tm_server **out)
{
	struct sockaddr_un sa;
	tm_server *srv;
	char dir[sizeof(sa.sun_path)], host[256], prob[128];
	unsigned port = 0, i;
	int err, tcp;

	start_error[0] = 0;
	if (!out)
		return TM_ERR_INVALID_ARG;
	*out = NULL;
	srv = calloc(1, sizeof(*srv));
	if (!srv)
		return TM_ERR_NOMEM;
	if (opts)
		srv->o = *opts;
	else
		tm_server_opts_default(&srv->o);
	if (!srv->o.max_queue)
		srv->o.max_queue = DEFAULT_MAX_QUEUE;
	if (!srv->o.max_frame)
		srv->o.max_frame = DEFAULT_MAX_FRAME;
	if (!srv->o.hello_ms)
		srv->o.hello_ms = DEFAULT_HELLO_MS;
	if (!srv->o.takeover_ms)
		srv->o.takeover_ms = DEFAULT_TAKEOVER_MS;
	if (!srv->o.caps)
		srv->o.caps = TM_CAP_PAUSE | TM_CAP_LEVEL | TM_CAP_CAPTURE;
	if (srv->o.no_pause)
		srv->o.caps &= ~(uint32_t)TM_CAP_PAUSE;
	if (srv->o.max_level > 3)
		srv->o.max_level = 3;
	srv->lfd = srv->cfd = -1;
	for (i = 0; i < MAX_CANDS; i++)
		srv->cands[i].fd = -1;
	srv->wake[0] = srv->wake[1] = -1;
	srv->step_mode = -1;
	srv->default_level = -1;
	pthread_mutex_init(&srv->lock, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&srv->cond, &ca);
		pthread_condattr_destroy(&ca);
	}
	srv->probe_kind = tm_strdup0(srv->o.probe_kind ? srv->o.probe_kind : "synthetic");
	srv->trace = tm_strdup0(srv->o.trace);
	srv->nodes = tm_nodetab_new();
	srv->env.user = srv;
	srv->env.annotation = server_annotation;
	if (!srv->probe_kind || !srv->nodes) {
		err = TM_ERR_NOMEM;
		goto fail;
	}
	srv->o.probe_kind = srv->probe_kind;
	srv->o.trace = srv->trace;
	if (pipe2(srv->wake, O_CLOEXEC | O_NONBLOCK)) {
		err = start_fail(TM_ERR_IO, "pipe: %s", strerror(errno));
		goto fail;
	}
	tcp = tm_server_parse_tcp(srv->o.path, host, sizeof(host), &port);
	if (tcp < 0) {
		err = start_fail(TM_ERR_INVALID_ARG, "%s: not tcp://HOST:PORT", srv->o.path);
		goto fail;
	}
	if (tcp) {
		err = listen_tcp(srv, host, port);
		if (err)
			goto fail;
		srv->o.path = srv->path;
		goto listening;
	}
	if (srv->o.path) {
		if (strlen(srv->o.path) + 4 >= sizeof(srv->path)) {
			err = start_fail(TM_ERR_TOO_LARGE, "%s: too long for a socket path",
					 srv->o.path);
			goto fail;
		}
		snprintf(srv->path, sizeof(srv->path), "%s", srv->o.path);
	} else {
		err = tm_server_socket_dir(dir, sizeof(dir), 1);
		if (err) {
			dir_problem(dir, prob, sizeof(prob));
			err = start_fail(err, "%s: not a private socket directory: %s", dir,
					 prob);
			goto fail;
		}
		if ((size_t)snprintf(srv->path, sizeof(srv->path), "%s/%ld.sock", dir,
				     (long)getpid()) >= sizeof(srv->path)) {
			err = start_fail(TM_ERR_TOO_LARGE, "%s: too long for a socket path", dir);
			goto fail;
		}
	}
	srv->o.path = srv->path;
	srv->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (srv->lfd < 0) {
		err = start_fail(TM_ERR_IO, "socket: %s", strerror(errno));
		goto fail;
	}
	/*
	 * Bound under a temporary name and renamed once listening: debuggers
	 * (tmdb run) wait for the socket file to appear, and one that
	 * connected between bind() and listen() would be refused.
	 */
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s.tmp", srv->path) >=
	    sizeof(sa.sun_path)) {
		err = start_fail(TM_ERR_TOO_LARGE, "%s: too long for a socket path", srv->path);
		goto fail;
	}
	/* a socket left by a dead process of ours is stale; nothing else is
	 * ours to remove */
	if ((err = path_free(sa.sun_path)) || (err = path_free(srv->path)))
		goto fail;
	if (bind(srv->lfd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    chmod(sa.sun_path, 0600) || listen(srv->lfd, 4) ||
	    rename(sa.sun_path, srv->path)) {
		err = start_fail(TM_ERR_IO, "%s: %s", srv->path, strerror(errno));
		unlink(sa.sun_path);
		goto fail;
	}
listening:
	if (pthread_create(&srv->thread, NULL, server_main, srv)) {
		if (!srv->tcp)
			unlink(srv->path);
		err = start_fail(TM_ERR_GENERIC, "cannot start the server thread");
		goto fail;
	}
	tm_thread_name(srv->thread, "tm-server");
	srv->thread_started = 1;
	*out = srv;
	return TM_OK;
fail:
	if (!start_error[0])
		start_fail(err, "%s", tm_strerror(err));
	srv->path[0] = 0;       /* not ours to unlink */
	tm_server_stop(srv);
	return err;
}

void tm_server_stop(tm_server *srv)
{
	unsigned i;

	if (!srv)
		return;
	if (srv->thread_started) {
		pthread_mutex_lock(&srv->lock);
		srv->stopping = 1;
		pthread_cond_broadcast(&srv->cond);
		/* A model thread paused in tm_server_event wakes up and leaves
		 * before the lock it sleeps on is destroyed. */
		while (srv->inside)
			pthread_cond_wait(&srv->cond, &srv->lock);
		pthread_mutex_unlock(&srv->lock);
		if (write(srv->wake[1], "q", 1) < 0) {
			/* the thread polls with a timeout anyway */
		}
		pthread_join(srv->thread, NULL);
	}
	if (srv->path[0] && !srv->tcp)
		unlink(srv->path);
	if (srv->token_path[0])
		unlink(srv->token_path);
	for (i = 0; i < MAX_CANDS; i++) {
		if (srv->cands[i].fd >= 0)
			close(srv->cands[i].fd);
		tm_frame_decoder_free(srv->cands[i].dec);
	}
	if (srv->lfd >= 0)
		close(srv->lfd);
	if (srv->cfd >= 0)
		close(srv->cfd);
	if (srv->wake[0] >= 0)
		close(srv->wake[0]);
	if (srv->wake[1] >= 0)
		close(srv->wake[1]);
	bps_clear(srv, 0);
	levels_clear(srv);
	free(srv->caps);
	tm_address_free(srv->filter);
	tm_frame_decoder_free(srv->dec);
	tm_buf_free(&srv->out);
	tm_buf_free(&srv->scratch);
	tm_buf_free(&srv->gscratch);
	tm_buf_free(&srv->meta);
	for (i = 0; i < srv->nannots; i++) {
		tm_buf_free(&srv->annots[i].enc);
		tm_decoder_free(srv->annots[i].dec);
	}
	tm_nodetab_free(srv->nodes);
	free(srv->stack);
	free(srv->probe_kind);
	free(srv->trace);
	pthread_cond_destroy(&srv->cond);
	pthread_mutex_destroy(&srv->lock);
	free(srv);
}

void tm_server_drop(tm_server *srv)
{
	if (!srv)
		return;
	pthread_mutex_lock(&srv->lock);
	if (srv->cfd >= 0) {
		shutdown(srv->cfd, SHUT_RDWR);
		drop_client(srv, 0);
	}
	pthread_mutex_unlock(&srv->lock);
}

const char *tm_server_path(const tm_server *srv)
{
	return srv ? srv->path : "";
}

const char *tm_server_token(const tm_server *srv)
{
	return srv && srv->tcp ? srv->token : "";
}

const char *tm_server_token_path(const tm_server *srv)
{
	return srv && srv->tcp ? srv->token_path : "";
}

const char *tm_server_detail(const tm_server *srv)
{
	return srv ? srv->detail : "";
}

int tm_server_meta(tm_server *srv, const struct tm_run_meta *m)
{
	int err;

	if (!srv || !m)
		return TM_ERR_INVALID_ARG;
	pthread_mutex_lock(&srv->lock);
	srv->meta.len = 0;
	err = tm_encode_meta(&srv->meta, m);
	if (!err)
		srv->rank = m->rank >= 0 ? m->rank : 0;
	if (!err && srv->subscribed) {
		tm_frame_encode(&srv->out, TM_REC_META, 0, srv->meta.data,
				(uint32_t)srv->meta.len);
		flush_out(srv);
	}
	pthread_mutex_unlock(&srv->lock);
	return err;
}

int tm_server_node(tm_server *srv, const struct tm_node *n)
{
	int err;

	if (!srv || !n)
		return TM_ERR_INVALID_ARG;
	pthread_mutex_lock(&srv->lock);
	err = tm_nodetab_put(srv->nodes, n);
	/* Breakpoints that may match the new node rebind at the next event
	 * (tm_breakpoint_covers). */
	if (!err) {
		if (srv->subscribed) {
			srv->scratch.len = 0;
			if (tm_encode_node(&srv->scratch, n) == TM_OK)
				queue_record(srv, TM_REC_NODE, 1);
			flush_out(srv);
		}
	}
	pthread_mutex_unlock(&srv->lock);
	return err;
}

/* ------------------------------------------------------------- the hook path */

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Waits while the model is paused; lock held.  Returns when resumed, or
 * when opts.pause_ms has passed since the stop: the model then resumes by
 * itself (the debugger sees its events arrive and reads on).
 */
static void wait_resumed(tm_server *srv)
{
	struct timespec ts;

	while (srv->stopped && !srv->stopping && srv->cfd >= 0 &&
	       !atomic_load(&srv->killed)) {
		if (srv->o.pause_ms &&
		    mono_ns() - srv->stop_ns >= (uint64_t)srv->o.pause_ms * 1000000ull) {
			srv->st.timed_out++;
			srv->self_resumed = 1;
			break;
		}
		deadline_ms(&ts, (long)(STOP_RECHECK_NS / 1000000));
		pthread_cond_timedwait(&srv->cond, &srv->lock, &ts);
	}
	if (srv->stopped) {
		/* The debugger went away without a word. */
		srv->stopped = 0;
		srv->stop_gen++;
	}
}

static void track_call(tm_server *srv, const struct tm_event *ev)
{
	if (ev->kind == TM_EV_ENTER) {
		if (srv->nstack < MAX_STACK) {
			struct open_call *ns = srv->stack;

			if (!(srv->nstack & 31)) {
				ns = realloc(srv->stack, (srv->nstack + 32) * sizeof(*ns));
				if (!ns)
					return;
				srv->stack = ns;
			}
			ns[srv->nstack].node = ev->node;
			ns[srv->nstack].call = ev->call;
			srv->nstack++;
		}
	} else if (ev->kind == TM_EV_EXIT || ev->kind == TM_EV_RAISE) {
		/* Pop through the matching call (an exit may have been lost;
		 * a raise ends its call as an exit does). */
		size_t i = srv->nstack;

		while (i > 0) {
			i--;
			if (srv->stack[i].node == ev->node && srv->stack[i].call == ev->call) {
				srv->nstack = i;
				break;
			}
		}
	}
}

/* The pending step/next/finish: does it end at ev? */
static int step_done(tm_server *srv, const struct tm_event *ev)
{
	switch (srv->step_mode) {
	case TM_RESUME_STEP:
		break;
	case TM_RESUME_NEXT:
		if (node_depth(srv, ev->node) > srv->step_depth)
			return 0;
		break;
	case TM_RESUME_FINISH:
		if ((ev->kind != TM_EV_EXIT && ev->kind != TM_EV_RAISE) ||
		    ev->node != srv->fin_node ||
		    ev->call != srv->fin_call)
			return 0;
		if (srv->step_left > 1 && srv->nstack) {
			/* finish N: on to the exit of the enclosing call */
			srv->step_left--;
			srv->fin_node = srv->stack[srv->nstack - 1].node;
			srv->fin_call = srv->stack[srv->nstack - 1].call;
			return 0;
		}
		srv->step_left = 1;
		break;
	default:
		return 0;
	}
	return --srv->step_left == 0;
}

static void stop_at(tm_server *srv, const struct tm_event *ev, int reason,
		    uint32_t id, uint32_t focus)
{
	struct tm_msg *m = calloc(1, sizeof(*m));

	srv->last = *ev;
	srv->last.tensors = NULL;
	srv->last.ntensors = 0;
	srv->step_mode = -1;
	srv->hold_wanted = 0;
	/* record and notify: the debugger is told, the model goes on */
	srv->stopped = !srv->o.no_pause;
	srv->stop_ns = mono_ns();
	srv->self_resumed = 0;
	srv->st.stops++;
	if (m) {
		m->type = TM_MSG_STOP;
		m->u.stop.reason = (uint8_t)reason;
		m->u.stop.id = id;
		m->u.stop.seq = ev->seq;
		m->u.stop.node = ev->node;
		m->u.stop.tensor = focus;
		send_msg(srv, m);
		free(m);
	}
	wait_resumed(srv);
}

int tm_server_event(tm_server *srv, const struct tm_event *ev)
{
	struct sbp *b;
	uint32_t focus;
	int sent = 0;

	if (!srv || !ev)
		return TM_ERR_INVALID_ARG;
	if (!atomic_load_explicit(&srv->active, memory_order_relaxed))
		return TM_OK;
	pthread_mutex_lock(&srv->lock);
	srv->inside++;
	/* Another thread (backward) is paused: the whole model waits. */
	wait_resumed(srv);
	if (atomic_load(&srv->killed)) {
		/* the process is ending: no more stops, no more sends */
		if (--srv->inside == 0 && srv->stopping)
			pthread_cond_broadcast(&srv->cond);
		pthread_mutex_unlock(&srv->lock);
		return TM_OK;
	}
	track_call(srv, ev);
	if (srv->subscribed && ev->seq >= srv->from_seq) {
		const struct tm_node *nd = tm_nodetab_get(srv->nodes, ev->node);

		if (srv->filter && (!nd || !tm_address_match_path(srv->filter, nd->address))) {
			note_gap(srv, ev, TM_GAP_FILTERED);
		} else if (srv->out.len - srv->out_off >= srv->o.max_queue) {
			/* full: not even encoded (a debugger that does not
			 * read costs the model one comparison per event) */
			srv->st.events_dropped++;
			note_gap(srv, ev, TM_GAP_BACKPRESSURE);
		} else {
			/* The gap goes out only in front of an event that fits:
			 * consecutive drops make one gap, not one each. */
			srv->scratch.len = 0;
			if (tm_encode_event(&srv->scratch, ev) == TM_OK &&
			    srv->out.len - srv->out_off + srv->scratch.len <= srv->o.max_queue &&
			    (flush_gap(srv), !srv->have_gap) &&
			    (!srv->annots_pending || (flush_annots(srv), !srv->annots_pending)) &&
			    queue_record(srv, TM_REC_EVENT, 1) == TM_OK) {
				sent = 1;
				srv->seen = *ev;
				srv->seen.tensors = NULL;
				srv->seen.ntensors = 0;
				srv->have_seen = 1;
				srv->st.events_sent++;
				flush_some(srv);
			} else {
				srv->st.events_dropped++;
				note_gap(srv, ev, TM_GAP_BACKPRESSURE);
			}
		}
	}
	if (srv->ncaps)
		captures_satisfy(srv, ev);
	/* Stops only at events the debugger has seen: it must show them. */
	if (sent && srv->cfd >= 0) {
		if (srv->step_mode == TM_RESUME_RERUN) {
			/* the rest of the compiled region: the re-run stops */
		} else if (srv->step_mode >= 0 && step_done(srv, ev)) {
			stop_at(srv, ev, TM_STOP_STEP, 0, UINT32_MAX);
		} else {
			for (b = srv->bps; b; b = b->next) {
				if (sbp_match(srv, b, ev, &focus)) {
					stop_at(srv, ev, TM_STOP_BREAKPOINT, b->id, focus);
					break;
				}
			}
		}
	}
	if (--srv->inside == 0 && srv->stopping)
		pthread_cond_broadcast(&srv->cond);
	pthread_mutex_unlock(&srv->lock);
	return TM_OK;
}

void tm_server_pause_handler(tm_server *srv, tm_server_pause_fn fn, void *user)
{
	if (!srv)
		return;
	pthread_mutex_lock(&srv->lock);
	srv->pause_fn = fn;
	srv->pause_user = user;
	srv->hold_wanted = 0;
	pthread_mutex_unlock(&srv->lock);
}

int tm_server_hold(tm_server *srv)
{
	int held = 0;

	if (!srv)
		return TM_ERR_INVALID_ARG;
	if (!atomic_load_explicit(&srv->active, memory_order_relaxed))
		return TM_OK;
	pthread_mutex_lock(&srv->lock);
	if (srv->hold_wanted && !srv->stopped && srv->cfd >= 0 && srv->have_seen &&
	    !atomic_load(&srv->killed) && !srv->stopping) {
		/* stopped after the last event the debugger was sent, as if
		 * at it: its next/finish start from there */
		srv->inside++;
		stop_at(srv, &srv->seen, TM_STOP_STEP, 0, UINT32_MAX);
		if (--srv->inside == 0 && srv->stopping)
			pthread_cond_broadcast(&srv->cond);
		held = 1;
	}
	srv->hold_wanted = 0;
	pthread_mutex_unlock(&srv->lock);
	return held ? TM_OK : TM_ERR_NOT_FOUND;
}

int tm_server_killed(tm_server *srv)
{
	return srv && atomic_load(&srv->killed);
}

int tm_server_gap(tm_server *srv, const struct tm_gap *g)
{
	if (!srv || !g)
		return TM_ERR_INVALID_ARG;
	if (!atomic_load_explicit(&srv->active, memory_order_relaxed))
		return TM_OK;
	pthread_mutex_lock(&srv->lock);
	if (srv->subscribed && g->last_seq >= srv->from_seq) {
		flush_gap(srv);
		srv->scratch.len = 0;
		if (tm_encode_gap(&srv->scratch, g) == TM_OK)
			queue_record(srv, TM_REC_GAP, 1);
		flush_some(srv);
	}
	pthread_mutex_unlock(&srv->lock);
	return TM_OK;
}

/* TQL's env->annotation for the probe's own breakpoints: the latest
 * annotation of key, if it is of the event's step (lock held). */
static const struct tm_annot *server_annotation(void *user, const struct tm_event *ev,
					      const char *key)
{
	tm_server *srv = user;
	unsigned i;

	for (i = 0; i < srv->nannots; i++)
		if (!strcmp(srv->annots[i].a.key, key))
			return srv->annots[i].a.step == ev->step ? &srv->annots[i].a : NULL;
	return NULL;
}

int tm_server_annot(tm_server *srv, const struct tm_annot *a)
{
	struct sannot *sa = NULL;
	struct tm_record rec;
	size_t used;
	unsigned i;
	int err;

	if (!srv || !a || !a->key)
		return TM_ERR_INVALID_ARG;
	pthread_mutex_lock(&srv->lock);
	for (i = 0; i < srv->nannots; i++)
		if (!strcmp(srv->annots[i].a.key, a->key))
			sa = &srv->annots[i];
	if (!sa && srv->nannots < MAX_ANNOT_KEYS) {
		sa = &srv->annots[srv->nannots];
		memset(sa, 0, sizeof(*sa));
		if (!(sa->dec = tm_decoder_new()))
			sa = NULL;
		else
			srv->nannots++;
	}
	err = sa ? TM_OK : TM_ERR_TOO_LARGE;
	if (sa) {
		/* encoded once: kept for the next subscriber, sent as is now */
		sa->enc.len = 0;
		err = tm_encode_annot(&sa->enc, a);
		if (!err)
			err = tm_decode_record(sa->dec, sa->enc.data, sa->enc.len, &rec, &used);
		if (err) {
			/* the slot stays, harmless, with a key nobody matches */
			sa->a.key = "";
			sa->a.step = UINT64_MAX;
		} else {
			sa->a = rec.u.annot;
			sa->pending = srv->subscribed && a->seq >= srv->from_seq;
			srv->annots_pending |= sa->pending;
			if (sa->pending)
				flush_annots(srv);
		}
	}
	pthread_mutex_unlock(&srv->lock);
	return err;
}

void tm_server_get_stats(tm_server *srv, struct tm_server_stats *st)
{
	if (!srv || !st)
		return;
	pthread_mutex_lock(&srv->lock);
	*st = srv->st;
	st->subscribed = srv->subscribed;
	st->stopped = srv->stopped;
	st->breakpoints = srv->nbps;
	pthread_mutex_unlock(&srv->lock);
}

int tm_server_wait_client(tm_server *srv, int timeout_ms)
{
	struct timespec deadline;
	int err = TM_OK;

	if (!srv)
		return TM_ERR_INVALID_ARG;
	if (timeout_ms >= 0)
		deadline_ms(&deadline, timeout_ms);
	pthread_mutex_lock(&srv->lock);
	if (srv->stopping) {
		pthread_mutex_unlock(&srv->lock);
		return TM_ERR_CLOSED;
	}
	if (srv->subscribed) {
		/* Already there: the same stop do_subscribe would have armed. */
		if (!srv->stopped) {
			srv->step_mode = TM_RESUME_STEP;
			srv->step_left = 1;
		}
		pthread_mutex_unlock(&srv->lock);
		return TM_OK;
	}
	srv->inside++;
	srv->waiters++;
	while (!srv->subscribed && !srv->stopping) {
		if (timeout_ms < 0) {
			pthread_cond_wait(&srv->cond, &srv->lock);
		} else if (pthread_cond_timedwait(&srv->cond, &srv->lock,
						  &deadline) == ETIMEDOUT) {
			break;
		}
	}
	if (srv->stopping)
		err = TM_ERR_CLOSED;
	else if (!srv->subscribed)
		err = TM_ERR_AGAIN;
	srv->waiters--;
	if (--srv->inside == 0 && srv->stopping)
		pthread_cond_broadcast(&srv->cond);
	pthread_mutex_unlock(&srv->lock);
	return err;
}

const uint32_t *tm_server_state(const tm_server *srv)
{
	/* An _Atomic uint32_t has the representation of a uint32_t on every
	 * target we build for (lock-free 32-bit atomics); foreign readers
	 * (ctypes) load it as a plain word. */
	return srv ? (const uint32_t *)(const void *)&srv->state : NULL;
}

/*
 * For a fatal-signal handler: best effort, never waits long.  The lock may
 * be held by the crashing thread itself (a crash inside tm_server_event),
 * so it is only tried for a while; then the record is queued and one
 * non-blocking send is made.  Whatever the socket does not take now is lost
 * with the process.
 */
int tm_server_crash(tm_server *srv, const struct tm_crash *c)
{
	struct timespec nap = { 0, 1000000 };
	int tries;

	if (!srv || !c)
		return TM_ERR_INVALID_ARG;
	if (!atomic_load_explicit(&srv->active, memory_order_relaxed))
		return TM_OK;
	for (tries = 0; pthread_mutex_trylock(&srv->lock); tries++) {
		if (tries >= 100)
			return TM_ERR_AGAIN;
		nanosleep(&nap, NULL);
	}
	if (srv->subscribed && srv->cfd >= 0) {
		flush_gap(srv);
		srv->scratch.len = 0;
		if (tm_encode_crash(&srv->scratch, c) == TM_OK)
			queue_record(srv, TM_REC_CRASH, 1);
		/* Streamed events may still be queued in front of it: give the
		 * debugger up to a second to take them (poll is signal-safe). */
		for (tries = 0; tries < 100 && srv->cfd >= 0; tries++) {
			struct pollfd pf = { .fd = srv->cfd, .events = POLLOUT };

			flush_out(srv);
			if (srv->cfd < 0 || !queued(srv))
				break;
			poll(&pf, 1, 10);
		}
	}
	pthread_mutex_unlock(&srv->lock);
	return TM_OK;
}
