/*
 * test_server.c -- the probe-side live server (tm-server.h, doc/wire.md
 * section 2) against a debugger played by this process: a real Unix socket,
 * the model in a second thread calling tm_server_event().
 *
 * The model is three layers called once per step (model, model.fc1,
 * model.act, model.fc2: 8 events a step, seq = 8 * step + i), fc2's output
 * max growing as 2 * step, so that a condition picks one known seq.  The
 * tests check what a user of tmdb relies on: the model stops exactly where
 * the breakpoint says and stays stopped, step/next/finish land where
 * ARCHITECTURE 4 says, and a debugger that dies or talks garbage never
 * leaves the model hanging.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "tensormorph.h"
#include "tm-recorder.h"
#include "tm-test.h"

#define STEPS 10
#define PER_STEP 8
#define NEVENTS (STEPS * PER_STEP)

static char tmpdir[64];

/* ------------------------------------------------------------- the model */

struct model {
	tm_server *srv;
	pthread_t th;
	atomic_int emitted;     /* events tm_server_event returned from */
	atomic_int done;
	atomic_int quit;        /* stop calling tm_server_event */
	int rerun;              /* a step is a compiled region: tm_server_rerun at its end */
	atomic_int reruns;      /* how many times it said yes */
};

static const char *const node_names[] = { "model", "model.fc1", "model.act", "model.fc2" };

static void add_nodes(tm_server *srv)
{
	struct tm_run_meta meta;
	uint32_t i;

	memset(&meta, 0, sizeof(meta));
	meta.probe_kind = "synthetic";
	meta.rank = -1;
	CU_ASSERT_EQUAL(tm_server_meta(srv, &meta), TM_OK);
	for (i = 0; i < 4; i++) {
		struct tm_node n;

		memset(&n, 0, sizeof(n));
		n.id = i;
		n.parent = i ? 0 : TM_NODE_NONE;
		n.depth = i ? 1 : 0;
		n.address = node_names[i];
		n.type = i ? "Linear" : "Net";
		CU_ASSERT_EQUAL(tm_server_node(srv, &n), TM_OK);
	}
}

/* The i-th event of step s: ENTER/EXIT of model around fc1, act, fc2. */
static void make_event(uint64_t seq, struct tm_event *ev, struct tm_tensor *t)
{
	static const uint8_t nodes[PER_STEP] = { 0, 1, 1, 2, 2, 3, 3, 0 };
	uint64_t s = seq / PER_STEP;
	int i = (int)(seq % PER_STEP);

	memset(ev, 0, sizeof(*ev));
	memset(t, 0, sizeof(*t));
	ev->seq = seq;
	ev->step = s;
	ev->node = nodes[i];
	ev->call = 1;
	ev->kind = (i == 0 || i == 1 || i == 3 || i == 5) ? TM_EV_ENTER : TM_EV_EXIT;
	ev->time_ns = seq * 1000;
	ev->level = 1;
	t->slot.kind = ev->kind == TM_EV_ENTER ? TM_SLOT_IN : TM_SLOT_OUT;
	t->dtype = TM_DT_F32;
	t->rank = 1;
	t->shape[0] = 4;
	t->have = TM_STAT_BIT(TM_STAT_NUMEL) | TM_STAT_BIT(TM_STAT_MAX);
	t->stat[TM_STAT_NUMEL] = 4;
	t->stat[TM_STAT_MAX] = ev->node == 3 ? 2.0 * (double)s : 1.0;
	ev->ntensors = 1;
	ev->tensors = t;
}

static void *model_main(void *arg)
{
	struct model *m = arg;
	struct tm_event ev;
	struct tm_tensor t;
	uint64_t seq;

	for (seq = 0; seq < NEVENTS && !atomic_load(&m->quit); seq++) {
		make_event(seq, &ev, &t);
		tm_server_event(m->srv, &ev);
		atomic_fetch_add(&m->emitted, 1);
		if (m->rerun && seq % PER_STEP == PER_STEP - 1 && tm_server_rerun(m->srv))
			atomic_fetch_add(&m->reruns, 1);
	}
	atomic_store(&m->done, 1);
	return NULL;
}

static void model_start(struct model *m, tm_server *srv)
{
	m->srv = srv;
	atomic_store(&m->emitted, 0);
	atomic_store(&m->done, 0);
	atomic_store(&m->quit, 0);
	atomic_store(&m->reruns, 0);
	pthread_create(&m->th, NULL, model_main, m);
}

/* Waits up to ms for the model to finish; 1 if it did. */
static int model_finishes(struct model *m, int ms)
{
	while (ms-- > 0 && !atomic_load(&m->done))
		usleep(1000);
	return atomic_load(&m->done);
}

/* ------------------------------------------------------------- the debugger */

struct client {
	int fd;
	tm_frame_decoder *d;
	tm_decoder *rd;
	uint64_t next_seq;      /* every seq seen so far, by events and gaps */
	int seq_hole;           /* a seq was neither an event nor in a gap */
	int nodes, metas, events, gaps, crashes, annots;
	uint32_t gap_reasons;
	uint64_t annot_step;            /* the last annotation's */
	uint64_t annot_seq;
	struct tm_crash crash;          /* the last crash record (frames dropped) */
	struct {                        /* the first events, as received */
		uint64_t seq;
		uint32_t node;
		uint32_t have;
		double max;
	} log[128];
	struct tm_msg m;
};

static struct client *cl_connect(const char *path)
{
	struct client *c = calloc(1, sizeof(*c));
	struct sockaddr_un sa;

	c->fd = socket(AF_UNIX, SOCK_STREAM, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	CU_ASSERT_EQUAL_FATAL(connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	c->d = tm_frame_decoder_new(0);
	c->rd = tm_decoder_new();
	return c;
}

static void cl_close(struct client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	tm_frame_decoder_free(c->d);
	tm_decoder_free(c->rd);
	free(c);
}

static void cl_send(struct client *c, struct tm_msg *m)
{
	struct tm_buf b = { 0 };

	CU_ASSERT_EQUAL(tm_msg_encode(&b, m), TM_OK);
	CU_ASSERT_EQUAL(write(c->fd, b.data, b.len), (ssize_t)b.len);
	tm_buf_free(&b);
}

/* Accounts for a record: events and gaps must cover every seq in order. */
static void cl_record(struct client *c, const struct tm_frame *f)
{
	struct tm_record rec;
	size_t used;

	if (tm_decode_record(c->rd, f->payload, f->len, &rec, &used) != TM_OK)
		return;
	switch (rec.type) {
	case TM_REC_META: c->metas++; break;
	case TM_REC_NODE: c->nodes++; break;
	case TM_REC_EVENT:
		if (rec.u.event.seq != c->next_seq)
			c->seq_hole = 1;
		c->next_seq = rec.u.event.seq + 1;
		if (c->events < (int)(sizeof(c->log) / sizeof(c->log[0]))) {
			c->log[c->events].seq = rec.u.event.seq;
			c->log[c->events].node = rec.u.event.node;
			c->log[c->events].have = rec.u.event.ntensors ?
				rec.u.event.tensors[0].have : 0;
			c->log[c->events].max = rec.u.event.ntensors ?
				rec.u.event.tensors[0].stat[TM_STAT_MAX] : 0;
		}
		c->events++;
		break;
	case TM_REC_ANNOT:
		/* before the events of its step, in the stream's order */
		if (rec.u.annot.seq != c->next_seq)
			c->seq_hole = 1;
		c->annots++;
		c->annot_step = rec.u.annot.step;
		c->annot_seq = rec.u.annot.seq;
		break;
	case TM_REC_CRASH:
		c->crashes++;
		c->crash = rec.u.crash;
		c->crash.nframes = 0;
		break;
	case TM_REC_GAP:
		if (rec.u.gap.first_seq != c->next_seq)
			c->seq_hole = 1;
		c->next_seq = rec.u.gap.last_seq + 1;
		c->gaps++;
		c->gap_reasons |= rec.u.gap.reason;
		break;
	default:
		break;
	}
}

/*
 * Reads until the next message (records on the way are accounted for).
 * Returns its type, 0 on timeout, -1 at end of stream or a bad stream.
 */
static int cl_next(struct client *c, int timeout_ms)
{
	struct tm_frame f;
	uint8_t buf[8192];
	struct pollfd pf;
	ssize_t n;
	int err;

	for (;;) {
		while ((err = tm_frame_decoder_next(c->d, &f)) == TM_OK) {
			if (f.type < 64) {
				cl_record(c, &f);
				continue;
			}
			if (tm_msg_decode(&f, &c->m) != TM_OK)
				return -1;
			return c->m.type;
		}
		if (err != TM_ERR_AGAIN)
			return -1;
		pf.fd = c->fd;
		pf.events = POLLIN;
		if (poll(&pf, 1, timeout_ms) <= 0)
			return 0;
		n = read(c->fd, buf, sizeof(buf));
		if (n <= 0)
			return -1;
		tm_frame_decoder_feed(c->d, buf, (size_t)n);
	}
}

/* Expects a RESULT for request, returns its code (-1 if none came). */
static int cl_result(struct client *c, int request)
{
	int t = cl_next(c, 2000);

	CU_ASSERT_EQUAL(t, TM_MSG_RESULT);
	if (t != TM_MSG_RESULT)
		return -1;
	CU_ASSERT_EQUAL(c->m.u.result.request, request);
	return (int)c->m.u.result.code;
}

static void cl_hello(struct client *c)
{
	memset(&c->m, 0, sizeof(c->m));
	c->m.type = TM_MSG_HELLO;
	c->m.u.hello.major = TM_WIRE_VERSION_MAJOR;
	c->m.u.hello.minor = TM_WIRE_VERSION_MINOR;
	strcpy(c->m.u.hello.name, "test_server");
	cl_send(c, &c->m);
	CU_ASSERT_EQUAL(cl_next(c, 2000), TM_MSG_DESCRIBE);
}

static int cl_break(struct client *c, uint32_t id, const char *where, const char *cond)
{
	memset(&c->m, 0, sizeof(c->m));
	c->m.type = TM_MSG_BREAK_SET;
	c->m.u.brk.id = id;
	strcpy(c->m.u.brk.where, where);
	strcpy(c->m.u.brk.cond, cond);
	cl_send(c, &c->m);
	return cl_result(c, TM_MSG_BREAK_SET);
}

static int cl_subscribe(struct client *c, const char *pattern)
{
	memset(&c->m, 0, sizeof(c->m));
	c->m.type = TM_MSG_SUBSCRIBE;
	strcpy(c->m.u.subscribe.pattern, pattern);
	cl_send(c, &c->m);
	return cl_result(c, TM_MSG_SUBSCRIBE);
}

static void cl_resume(struct client *c, int mode, uint32_t count)
{
	memset(&c->m, 0, sizeof(c->m));
	c->m.type = TM_MSG_RESUME;
	c->m.u.resume.mode = (uint8_t)mode;
	c->m.u.resume.count = count;
	cl_send(c, &c->m);
	CU_ASSERT_EQUAL(cl_result(c, TM_MSG_RESUME), TM_OK);
}

/* Expects STOP (after any records); returns its seq, UINT64_MAX if none. */
static uint64_t cl_stop(struct client *c, int reason, uint32_t id)
{
	int t = cl_next(c, 3000);

	CU_ASSERT_EQUAL(t, TM_MSG_STOP);
	if (t != TM_MSG_STOP)
		return UINT64_MAX;
	CU_ASSERT_EQUAL(c->m.u.stop.reason, reason);
	CU_ASSERT_EQUAL(c->m.u.stop.id, id);
	/* The stop event itself was sent before STOP. */
	CU_ASSERT_EQUAL(c->next_seq, c->m.u.stop.seq + 1);
	return c->m.u.stop.seq;
}

static tm_server *start_with(int no_pause, uint32_t pause_ms)
{
	struct tm_server_opts o;
	char path[128];
	tm_server *srv = NULL;

	snprintf(path, sizeof(path), "%s/test.sock", tmpdir);
	tm_server_opts_default(&o);
	o.no_pause = (uint8_t)no_pause;
	o.pause_ms = pause_ms;
	o.path = path;
	o.probe_kind = "synthetic";
	o.trace = "/nonexistent/run.tmrun";
	CU_ASSERT_EQUAL_FATAL(tm_server_start(&o, &srv), TM_OK);
	add_nodes(srv);
	return srv;
}

static tm_server *start(void)
{
	return start_with(0, 0);
}

/* ------------------------------------------------------------- tests */

static void test_handshake(void)
{
	tm_server *srv = start();
	struct client *c = cl_connect(tm_server_path(srv));
	struct tm_server_stats st;

	cl_hello(c);
	CU_ASSERT_EQUAL(c->m.u.hello.major, TM_WIRE_VERSION_MAJOR);
	CU_ASSERT_EQUAL(c->m.u.hello.pid, (uint32_t)getpid());
	CU_ASSERT(c->m.u.hello.caps & TM_CAP_PAUSE);
	CU_ASSERT_STRING_EQUAL(c->m.u.hello.name, "synthetic");
	CU_ASSERT_STRING_EQUAL(c->m.u.hello.trace, "/nonexistent/run.tmrun");
	/* Refused breakpoints name the problem and are not set; one that
	 * matches no node yet is accepted, pending, and says so. */
	CU_ASSERT_EQUAL(cl_break(c, 2, "model.nope", ""), TM_OK);
	CU_ASSERT_PTR_NOT_NULL(strstr(c->m.u.result.text, "pending"));
	CU_ASSERT_EQUAL(cl_break(c, 1, "model..fc1", ""), TM_ERR_ADDRESS);
	CU_ASSERT_EQUAL(cl_break(c, 1, "model.fc1", "tensor.max >"), TM_ERR_TQL);
	CU_ASSERT_PTR_NOT_NULL(strstr(c->m.u.result.text, "tql:1:"));
	CU_ASSERT_EQUAL(cl_break(c, 0, "model.fc1", ""), TM_ERR_INVALID_ARG);
	CU_ASSERT_EQUAL(cl_break(c, 1, "model.fc*", "tensor.max > 1"), TM_OK);
	tm_server_get_stats(srv, &st);
	CU_ASSERT_EQUAL(st.breakpoints, 2);
	/* RESUME while running is an error, not a crash. */
	memset(&c->m, 0, sizeof(c->m));
	c->m.type = TM_MSG_RESUME;
	c->m.u.resume.count = 1;
	cl_send(c, &c->m);
	CU_ASSERT_EQUAL(cl_result(c, TM_MSG_RESUME), TM_ERR_INVALID_ARG);
	/* A second debugger is turned away. */
	{
		struct client *c2 = cl_connect(tm_server_path(srv));

		CU_ASSERT_EQUAL(cl_next(c2, 2000), TM_MSG_BYE);
		CU_ASSERT_EQUAL(c2->m.u.result.code, TM_ERR_GENERIC);
		cl_close(c2);
	}
	memset(&c->m, 0, sizeof(c->m));
	c->m.type = TM_MSG_DETACH;
	cl_send(c, &c->m);
	CU_ASSERT_EQUAL(cl_next(c, 2000), TM_MSG_BYE);
	CU_ASSERT_EQUAL(c->m.u.result.code, TM_OK);
	CU_ASSERT_EQUAL(cl_next(c, 2000), -1);
	tm_server_get_stats(srv, &st);
	CU_ASSERT_EQUAL(st.breakpoints, 0);
	cl_close(c);
	tm_server_stop(srv);
}

static void test_version_and_order(void)
{
	tm_server *srv = start();
	struct client *c = cl_connect(tm_server_path(srv));

	memset(&c->m, 0, sizeof(c->m));
	c->m.type = TM_MSG_HELLO;
	c->m.u.hello.major = TM_WIRE_VERSION_MAJOR + 1;
	cl_send(c, &c->m);
	CU_ASSERT_EQUAL(cl_result(c, TM_MSG_HELLO), TM_ERR_VERSION);
	CU_ASSERT_EQUAL(cl_next(c, 2000), TM_MSG_BYE);
	CU_ASSERT_EQUAL(cl_next(c, 2000), -1);
	cl_close(c);

	c = cl_connect(tm_server_path(srv));
	CU_ASSERT_EQUAL(cl_subscribe(c, ""), TM_ERR_INVALID_ARG);
	CU_ASSERT_EQUAL(cl_next(c, 2000), TM_MSG_BYE);
	cl_close(c);
	tm_server_stop(srv);
}

/* The whole debugging session of the file comment. */
static void test_break_and_resume(void)
{
	tm_server *srv = start();
	struct client *c = cl_connect(tm_server_path(srv));
	struct tm_server_stats st;
	struct model m;

	cl_hello(c);
	/* The debugger's $variables are refused by name, never dropped
	 * (tm_breakpoint_cond_portable): tmdb then evaluates the condition. */
	CU_ASSERT_EQUAL(cl_break(c, 1, "model.fc2:out", "tensor.max > $limit"),
			TM_ERR_UNSUPPORTED);
	CU_ASSERT_PTR_NOT_NULL(strstr(c->m.u.result.text, "$variables"));
	CU_ASSERT_EQUAL(cl_break(c, 1, "model.fc2:out", "tensor.max > 10"), TM_OK);
	CU_ASSERT_EQUAL(cl_subscribe(c, ""), TM_OK);
	model_start(&m, srv);
	/* fc2's max is 2 * step: first > 10 at step 6, its EXIT is i = 6. */
	CU_ASSERT_EQUAL(cl_stop(c, TM_STOP_BREAKPOINT, 1), 6 * PER_STEP + 6);
	CU_ASSERT_EQUAL(c->m.u.stop.node, 3);
	CU_ASSERT_EQUAL(c->m.u.stop.tensor, 0);
	CU_ASSERT_EQUAL(c->metas, 1);
	CU_ASSERT_EQUAL(c->nodes, 4);
	/* Paused: the model thread does not get past the stop event. */
	usleep(100000);
	CU_ASSERT_EQUAL(atomic_load(&m.emitted), 6 * PER_STEP + 6);
	tm_server_get_stats(srv, &st);
	CU_ASSERT_EQUAL(st.stopped, 1);

	cl_resume(c, TM_RESUME_STEP, 1);        /* EXIT model */
	CU_ASSERT_EQUAL(cl_stop(c, TM_STOP_STEP, 0), 6 * PER_STEP + 7);
	cl_resume(c, TM_RESUME_STEP, 2);        /* ENTER model, ENTER fc1 */
	CU_ASSERT_EQUAL(cl_stop(c, TM_STOP_STEP, 0), 7 * PER_STEP + 1);
	cl_resume(c, TM_RESUME_FINISH, 1);      /* EXIT fc1 */
	CU_ASSERT_EQUAL(cl_stop(c, TM_STOP_STEP, 0), 7 * PER_STEP + 2);
	/* finish from an EXIT: the enclosing call (model), but the breakpoint
	 * at fc2's exit (max 14) comes first. */
	cl_resume(c, TM_RESUME_FINISH, 1);
	CU_ASSERT_EQUAL(cl_stop(c, TM_STOP_BREAKPOINT, 1), 7 * PER_STEP + 6);
	memset(&c->m, 0, sizeof(c->m));
	c->m.type = TM_MSG_BREAK_CLEAR;
	c->m.u.brk.id = 1;
	cl_send(c, &c->m);
	CU_ASSERT_EQUAL(cl_result(c, TM_MSG_BREAK_CLEAR), TM_OK);
	/* next from fc2 (depth 1): EXIT model (depth 0), then over the
	 * children of step 8's model call to its EXIT. */
	cl_resume(c, TM_RESUME_NEXT, 1);
	CU_ASSERT_EQUAL(cl_stop(c, TM_STOP_STEP, 0), 7 * PER_STEP + 7);
	cl_resume(c, TM_RESUME_NEXT, 2);
	CU_ASSERT_EQUAL(cl_stop(c, TM_STOP_STEP, 0), 8 * PER_STEP + 7);
	cl_resume(c, TM_RESUME_CONTINUE, 1);
	CU_ASSERT(model_finishes(&m, 3000));
	pthread_join(m.th, NULL);
	/* Everything arrived, in order, nothing lost. */
	CU_ASSERT_EQUAL(cl_next(c, 200), 0);
	CU_ASSERT_EQUAL(c->events, NEVENTS);
	CU_ASSERT_EQUAL(c->next_seq, NEVENTS);
	CU_ASSERT_FALSE(c->seq_hole);
	tm_server_get_stats(srv, &st);
	CU_ASSERT_EQUAL(st.stops, 7);
	CU_ASSERT_EQUAL(st.events_dropped, 0);
	cl_close(c);
	tm_server_stop(srv);
}

/* RESUME rerun: the rest of the region (here a step) passes without a stop,
 * the breakpoint included; where it ends the probe's tm_server_rerun says
 * yes once, and the next event (the re-run's first) stops. */
static void test_resume_rerun(void)
{
	tm_server *srv = start();
	struct client *c = cl_connect(tm_server_path(srv));
	struct model m;

	memset(&m, 0, sizeof(m));
	m.rerun = 1;
	cl_hello(c);
	/* fc1 exits at +2 of every step, fc2 at +6, model at +7 */
	CU_ASSERT_EQUAL(cl_break(c, 1, "model.fc1", ""), TM_OK);
	CU_ASSERT_EQUAL(cl_break(c, 2, "model.fc2", ""), TM_OK);
	CU_ASSERT_EQUAL(cl_subscribe(c, ""), TM_OK);
	model_start(&m, srv);
	CU_ASSERT_EQUAL(cl_stop(c, TM_STOP_BREAKPOINT, 1), 2);
	CU_ASSERT_EQUAL(atomic_load(&m.reruns), 0);
	cl_resume(c, TM_RESUME_RERUN, 1);
	/* fc2's exit at +6 would stop at breakpoint 2: it does not */
	CU_ASSERT_EQUAL(cl_stop(c, TM_STOP_STEP, 0), PER_STEP);
	CU_ASSERT_EQUAL(atomic_load(&m.reruns), 1);
	/* an ordinary resume: the next region's end says no */
	cl_resume(c, TM_RESUME_CONTINUE, 1);
	CU_ASSERT_EQUAL(cl_stop(c, TM_STOP_BREAKPOINT, 1), PER_STEP + 2);
	CU_ASSERT_EQUAL(atomic_load(&m.reruns), 1);
	memset(&c->m, 0, sizeof(c->m));
	c->m.type = TM_MSG_BREAK_CLEAR;
	c->m.u.brk.id = 0;
	cl_send(c, &c->m);
	CU_ASSERT_EQUAL(cl_result(c, TM_MSG_BREAK_CLEAR), TM_OK);
	cl_resume(c, TM_RESUME_CONTINUE, 1);
	CU_ASSERT(model_finishes(&m, 3000));
	pthread_join(m.th, NULL);
	CU_ASSERT_EQUAL(atomic_load(&m.reruns), 1);
	cl_close(c);
	tm_server_stop(srv);
}

/* INTERRUPT (what tmdb sends on attach) stops the model at its next event. */
static void test_interrupt(void)
{
	tm_server *srv = start();
	struct client *c = cl_connect(tm_server_path(srv));
	struct model m;

	cl_hello(c);
	CU_ASSERT_EQUAL(cl_subscribe(c, ""), TM_OK);
	memset(&c->m, 0, sizeof(c->m));
	c->m.type = TM_MSG_INTERRUPT;
	cl_send(c, &c->m);
	CU_ASSERT_EQUAL(cl_result(c, TM_MSG_INTERRUPT), TM_OK);
	model_start(&m, srv);
	CU_ASSERT_EQUAL(cl_stop(c, TM_STOP_STEP, 0), 0);
	usleep(50000);
	CU_ASSERT_EQUAL(atomic_load(&m.emitted), 0);
	cl_resume(c, TM_RESUME_CONTINUE, 1);
	CU_ASSERT(model_finishes(&m, 3000));
	pthread_join(m.th, NULL);
	cl_close(c);
	tm_server_stop(srv);
}

/*
 * KILL while the model is paused: the paused thread is let go, the server
 * says so (tm_server_killed, which the recorder acts on) and neither stops
 * nor sends any more.
 */
static void test_kill(void)
{
	tm_server *srv = start();
	struct client *c = cl_connect(tm_server_path(srv));
	struct tm_server_stats st;
	struct model m;

	cl_hello(c);
	CU_ASSERT_EQUAL(cl_break(c, 1, "model.fc2:out", ""), TM_OK);
	CU_ASSERT_EQUAL(cl_subscribe(c, ""), TM_OK);
	model_start(&m, srv);
	CU_ASSERT(cl_stop(c, TM_STOP_BREAKPOINT, 1) != UINT64_MAX);
	CU_ASSERT_FALSE(tm_server_killed(srv));
	memset(&c->m, 0, sizeof(c->m));
	c->m.type = TM_MSG_KILL;
	cl_send(c, &c->m);
	CU_ASSERT_EQUAL(cl_result(c, TM_MSG_KILL), TM_OK);
	CU_ASSERT(model_finishes(&m, 3000));
	pthread_join(m.th, NULL);
	CU_ASSERT(tm_server_killed(srv));
	tm_server_get_stats(srv, &st);
	CU_ASSERT_EQUAL(st.stops, 1);
	cl_close(c);
	tm_server_stop(srv);
}

/*
 * Record and notify (a server that must keep answering): the breakpoint's
 * STOP arrives, the model does not wait for the debugger, every event is
 * sent, and a late RESUME is answered OK.  TM_CAP_PAUSE is not offered.
 */
static void test_notify_only(void)
{
	tm_server *srv = start_with(1, 0);
	struct client *c = cl_connect(tm_server_path(srv));
	struct tm_server_stats st;
	struct model m;

	cl_hello(c);
	CU_ASSERT_FALSE(c->m.u.hello.caps & TM_CAP_PAUSE);
	CU_ASSERT_EQUAL(cl_break(c, 1, "model.fc2:out", "tensor.max > 10 && step < 7"), TM_OK);
	CU_ASSERT_EQUAL(cl_subscribe(c, ""), TM_OK);
	model_start(&m, srv);
	CU_ASSERT_EQUAL(cl_stop(c, TM_STOP_BREAKPOINT, 1), 6 * PER_STEP + 6);
	/* nobody resumes it, and it finishes */
	CU_ASSERT(model_finishes(&m, 3000));
	pthread_join(m.th, NULL);
	cl_resume(c, TM_RESUME_CONTINUE, 1);      /* late: answered OK */
	while (cl_next(c, 200) > 0)
		;
	CU_ASSERT_EQUAL(c->events, NEVENTS);
	CU_ASSERT_FALSE(c->seq_hole);
	tm_server_get_stats(srv, &st);
	CU_ASSERT(st.stops >= 1);
	CU_ASSERT_EQUAL(st.stopped, 0);
	CU_ASSERT_EQUAL(st.timed_out, 0);
	cl_close(c);
	tm_server_stop(srv);
}

/* pause_ms: a stop holds the model that long, then it resumes by itself. */
static void test_pause_timeout(void)
{
	tm_server *srv = start_with(0, 300);
	struct client *c = cl_connect(tm_server_path(srv));
	struct tm_server_stats st;
	struct model m;

	cl_hello(c);
	CU_ASSERT(c->m.u.hello.caps & TM_CAP_PAUSE);
	CU_ASSERT_EQUAL(cl_break(c, 1, "model.fc2:out", "tensor.max > 10 && step < 7"), TM_OK);
	CU_ASSERT_EQUAL(cl_subscribe(c, ""), TM_OK);
	model_start(&m, srv);
	CU_ASSERT_EQUAL(cl_stop(c, TM_STOP_BREAKPOINT, 1), 6 * PER_STEP + 6);
	usleep(100000);         /* held meanwhile */
	CU_ASSERT_EQUAL(atomic_load(&m.emitted), 6 * PER_STEP + 6);
	CU_ASSERT(model_finishes(&m, 3000));
	pthread_join(m.th, NULL);
	tm_server_get_stats(srv, &st);
	CU_ASSERT_EQUAL(st.timed_out, 1);
	CU_ASSERT_EQUAL(st.stopped, 0);
	/* the debugger's resume comes late: not an error */
	cl_resume(c, TM_RESUME_CONTINUE, 1);
	cl_close(c);
	tm_server_stop(srv);
}

/* The debugger dies while the model is paused: the model runs on. */
static void test_debugger_dies(void)
{
	tm_server *srv = start();
	struct client *c = cl_connect(tm_server_path(srv));
	struct model m;

	cl_hello(c);
	CU_ASSERT_EQUAL(cl_break(c, 1, "model.fc1", ""), TM_OK);
	CU_ASSERT_EQUAL(cl_subscribe(c, ""), TM_OK);
	model_start(&m, srv);
	CU_ASSERT_EQUAL(cl_stop(c, TM_STOP_BREAKPOINT, 1), 2);
	close(c->fd);
	c->fd = -1;
	CU_ASSERT(model_finishes(&m, 1000));
	pthread_join(m.th, NULL);
	cl_close(c);
	tm_server_stop(srv);
}

/* The probe shuts down while its model thread is paused: both end cleanly. */
static void test_stop_while_paused(void)
{
	tm_server *srv = start();
	struct client *c = cl_connect(tm_server_path(srv));
	struct model m;

	cl_hello(c);
	CU_ASSERT_EQUAL(cl_break(c, 1, "model.fc1", ""), TM_OK);
	CU_ASSERT_EQUAL(cl_subscribe(c, ""), TM_OK);
	model_start(&m, srv);
	CU_ASSERT_EQUAL(cl_stop(c, TM_STOP_BREAKPOINT, 1), 2);
	/* The model leaves tm_server_event before srv is freed and must not
	 * call it again. */
	atomic_store(&m.quit, 1);
	tm_server_stop(srv);
	CU_ASSERT(model_finishes(&m, 1000));
	CU_ASSERT_EQUAL(atomic_load(&m.emitted), 3);
	CU_ASSERT_EQUAL(cl_next(c, 2000), TM_MSG_BYE);
	cl_close(c);
	pthread_join(m.th, NULL);
}

/* Garbage, a cut frame, an oversized frame: the connection goes, the model runs. */
static void test_bad_input(void)
{
	static const char *const junk[] = { "GET / HTTP/1.0\r\n\r\n", NULL };
	tm_server *srv = start();
	struct tm_server_stats st;
	struct client *c;
	struct model m;
	uint8_t hdr[12];
	uint32_t crc;

	/* Garbage while paused. */
	c = cl_connect(tm_server_path(srv));
	cl_hello(c);
	CU_ASSERT_EQUAL(cl_break(c, 1, "model.act", ""), TM_OK);
	CU_ASSERT_EQUAL(cl_subscribe(c, ""), TM_OK);
	model_start(&m, srv);
	CU_ASSERT_EQUAL(cl_stop(c, TM_STOP_BREAKPOINT, 1), 4);
	CU_ASSERT_EQUAL(write(c->fd, junk[0], strlen(junk[0])), (ssize_t)strlen(junk[0]));
	CU_ASSERT_EQUAL(cl_next(c, 2000), TM_MSG_BYE);
	CU_ASSERT_EQUAL(c->m.u.result.code, TM_ERR_BAD_MAGIC);
	CU_ASSERT(model_finishes(&m, 1000));
	pthread_join(m.th, NULL);
	cl_close(c);

	/* A header announcing more than the server accepts (64 KiB). */
	c = cl_connect(tm_server_path(srv));
	cl_hello(c);
	hdr[0] = 0x54;
	hdr[1] = 0x4d;
	hdr[2] = TM_MSG_BREAK_SET;
	hdr[3] = 0;
	hdr[4] = 0;
	hdr[5] = 0;
	hdr[6] = 0;
	hdr[7] = 0x10;          /* 256 MiB */
	crc = tm_crc32c(0, hdr, 8);
	memcpy(hdr + 8, &crc, 4);   /* little-endian host */
	CU_ASSERT_EQUAL(write(c->fd, hdr, 12), 12);
	CU_ASSERT_EQUAL(cl_next(c, 2000), TM_MSG_BYE);
	CU_ASSERT_EQUAL(c->m.u.result.code, TM_ERR_TOO_LARGE);
	cl_close(c);

	/* A well-framed message with a malformed body. */
	c = cl_connect(tm_server_path(srv));
	cl_hello(c);
	{
		struct tm_buf b = { 0 };
		static const uint8_t body[] = { 9, 1 };     /* resume mode 9 */

		tm_frame_encode(&b, TM_MSG_RESUME, 0, body, 2);
		CU_ASSERT_EQUAL(write(c->fd, b.data, b.len), (ssize_t)b.len);
		tm_buf_free(&b);
	}
	CU_ASSERT_EQUAL(cl_next(c, 2000), TM_MSG_BYE);
	CU_ASSERT_EQUAL(c->m.u.result.code, TM_ERR_CORRUPT);
	cl_close(c);

	/* A cut frame, then the debugger leaves. */
	c = cl_connect(tm_server_path(srv));
	cl_hello(c);
	CU_ASSERT_EQUAL(write(c->fd, "TM\x45", 3), 3);
	cl_close(c);
	usleep(50000);
	tm_server_get_stats(srv, &st);
	CU_ASSERT_EQUAL(st.bad_frames, 3);
	CU_ASSERT_EQUAL(st.connected, 0);
	CU_ASSERT_EQUAL(st.clients, 4);
	tm_server_stop(srv);
}

/* A subscription to some nodes: the rest is announced as FILTERED gaps. */
static void test_filter(void)
{
	tm_server *srv = start();
	struct client *c = cl_connect(tm_server_path(srv));
	struct model m;

	cl_hello(c);
	CU_ASSERT_EQUAL(cl_subscribe(c, "model.fc2"), TM_OK);
	model_start(&m, srv);
	CU_ASSERT(model_finishes(&m, 3000));
	pthread_join(m.th, NULL);
	tm_server_stop(srv);    /* says BYE: everything before it has arrived */
	CU_ASSERT_EQUAL(cl_next(c, 2000), TM_MSG_BYE);
	CU_ASSERT_EQUAL(c->events, 2 * STEPS);
	CU_ASSERT_EQUAL(c->gap_reasons, TM_GAP_FILTERED);
	CU_ASSERT_FALSE(c->seq_hole);
	/* the tail after the last fc2 event (EXIT model) came before BYE */
	CU_ASSERT_EQUAL(c->next_seq, NEVENTS);
	cl_close(c);
}

/* A debugger that cannot keep up: events are dropped, never silently. */
static void test_backpressure(void)
{
	struct tm_server_opts o;
	struct tm_server_stats st;
	struct client *c;
	tm_server *srv = NULL;
	char path[128];
	struct model m;

	snprintf(path, sizeof(path), "%s/bp.sock", tmpdir);
	tm_server_opts_default(&o);
	o.path = path;
	o.max_queue = 1;        /* no event fits */
	CU_ASSERT_EQUAL_FATAL(tm_server_start(&o, &srv), TM_OK);
	add_nodes(srv);
	c = cl_connect(path);
	cl_hello(c);
	/* Breakpoints cannot fire at events the debugger never saw. */
	CU_ASSERT_EQUAL(cl_break(c, 1, "model.fc1", ""), TM_OK);
	CU_ASSERT_EQUAL(cl_subscribe(c, ""), TM_OK);
	model_start(&m, srv);
	CU_ASSERT(model_finishes(&m, 3000));
	pthread_join(m.th, NULL);
	tm_server_get_stats(srv, &st);
	CU_ASSERT_EQUAL(st.events_dropped, NEVENTS);
	CU_ASSERT_EQUAL(st.stops, 0);
	tm_server_stop(srv);
	CU_ASSERT_EQUAL(cl_next(c, 2000), TM_MSG_BYE);
	CU_ASSERT_EQUAL(c->events, 0);
	/* How many gap records the drops make depends on when the sender
	 * thread finds room; what must hold is that they tile every seq. */
	CU_ASSERT(c->gaps >= 1);
	CU_ASSERT_EQUAL(c->gap_reasons, TM_GAP_BACKPRESSURE);
	CU_ASSERT_EQUAL(c->next_seq, NEVENTS);
	cl_close(c);
}

static void test_levels_and_capture(void)
{
	tm_server *srv = start();
	struct client *c = cl_connect(tm_server_path(srv));
	struct tm_event ev;
	struct tm_tensor t;
	float data[4] = { 1, 2, 3, 4 };

	CU_ASSERT_EQUAL(tm_server_level(srv, 1), -1);
	cl_hello(c);
	memset(&c->m, 0, sizeof(c->m));
	c->m.type = TM_MSG_SET_LEVEL;
	c->m.u.level.level = 3;
	strcpy(c->m.u.level.pattern, "model.fc*");
	cl_send(c, &c->m);
	CU_ASSERT_EQUAL(cl_result(c, TM_MSG_SET_LEVEL), TM_OK);
	CU_ASSERT_EQUAL(tm_server_level(srv, 1), 3);
	CU_ASSERT_EQUAL(tm_server_level(srv, 3), 3);
	CU_ASSERT_EQUAL(tm_server_level(srv, 2), -1);
	c->m.type = TM_MSG_SET_LEVEL;
	c->m.u.level.level = 1;
	c->m.u.level.pattern[0] = 0;
	cl_send(c, &c->m);
	CU_ASSERT_EQUAL(cl_result(c, TM_MSG_SET_LEVEL), TM_OK);
	CU_ASSERT_EQUAL(tm_server_level(srv, 2), 1);

	memset(&c->m, 0, sizeof(c->m));
	c->m.type = TM_MSG_CAPTURE;
	c->m.u.capture.node = 3;
	c->m.u.capture.slot.kind = TM_SLOT_OUT;
	cl_send(c, &c->m);
	CU_ASSERT_EQUAL(cl_result(c, TM_MSG_CAPTURE), TM_OK);
	c->m.type = TM_MSG_CAPTURE;
	c->m.u.capture.node = 99;
	cl_send(c, &c->m);
	CU_ASSERT_EQUAL(cl_result(c, TM_MSG_CAPTURE), TM_ERR_NOT_FOUND);
	CU_ASSERT_EQUAL(tm_server_wants_capture(srv, 3), 1);
	CU_ASSERT_EQUAL(tm_server_wants_capture(srv, 1), 0);
	make_event(6, &ev, &t);         /* EXIT fc2, with the full tensor */
	t.payload = data;
	t.payload_len = sizeof(data);
	CU_ASSERT_EQUAL(tm_server_event(srv, &ev), TM_OK);
	CU_ASSERT_EQUAL(tm_server_wants_capture(srv, 3), 0);
	/* Leaving forgets what the debugger asked for. */
	cl_close(c);
	usleep(50000);
	CU_ASSERT_EQUAL(tm_server_level(srv, 1), -1);
	tm_server_stop(srv);
}

static void test_socket_dir(void)
{
	char dir[256], path[256], want[300];
	struct stat st;
	tm_server *srv = NULL;

	setenv("XDG_RUNTIME_DIR", tmpdir, 1);
	CU_ASSERT_EQUAL(tm_server_socket_dir(dir, sizeof(dir), 0), TM_ERR_NOT_FOUND);
	CU_ASSERT_EQUAL(tm_server_socket_path(getpid(), path, sizeof(path)),
			TM_ERR_NOT_FOUND);
	CU_ASSERT_EQUAL(tm_server_socket_dir(dir, sizeof(dir), 1), TM_OK);
	snprintf(want, sizeof(want), "%s/tensormorph", tmpdir);
	CU_ASSERT_STRING_EQUAL(dir, want);
	CU_ASSERT_EQUAL(stat(dir, &st), 0);
	CU_ASSERT_EQUAL(st.st_mode & 0777, 0700);
	/* Started without a path: DIR/PID.sock, which attach PID finds. */
	CU_ASSERT_EQUAL_FATAL(tm_server_start(NULL, &srv), TM_OK);
	CU_ASSERT_EQUAL(tm_server_socket_path(getpid(), path, sizeof(path)), TM_OK);
	CU_ASSERT_STRING_EQUAL(tm_server_path(srv), path);
	CU_ASSERT_EQUAL(stat(path, &st), 0);
	CU_ASSERT(S_ISSOCK(st.st_mode));
	tm_server_stop(srv);
	CU_ASSERT_NOT_EQUAL(stat(path, &st), 0);
	/* A directory others can enter is refused. */
	chmod(dir, 0755);
	CU_ASSERT_EQUAL(tm_server_socket_dir(dir, sizeof(dir), 1), TM_ERR_IO);
	srv = NULL;
	CU_ASSERT_EQUAL(tm_server_start(NULL, &srv), TM_ERR_IO);
	CU_ASSERT_PTR_NULL(srv);
	/* named, with what is wrong (F7) */
	CU_ASSERT_PTR_NOT_NULL(strstr(tm_server_start_error(), dir));
	CU_ASSERT_PTR_NOT_NULL(strstr(tm_server_start_error(), "mode 0755"));
	chmod(dir, 0700);
	/* So is a symlink in its place. */
	rmdir(dir);
	CU_ASSERT_EQUAL(symlink("/tmp", dir), 0);
	CU_ASSERT_EQUAL(tm_server_socket_dir(dir, sizeof(dir), 1), TM_ERR_IO);
	unlink(dir);
	unsetenv("XDG_RUNTIME_DIR");
}

static void test_no_client(void)
{
	tm_server *srv = start();
	struct tm_event ev;
	struct tm_tensor t;
	struct tm_server_stats st;

	make_event(0, &ev, &t);
	CU_ASSERT_EQUAL(tm_server_event(srv, &ev), TM_OK);
	CU_ASSERT_EQUAL(tm_server_event(NULL, &ev), TM_ERR_INVALID_ARG);
	tm_server_get_stats(srv, &st);
	CU_ASSERT_EQUAL(st.events_sent, 0);
	tm_server_stop(srv);
	tm_server_stop(NULL);
}

/* ------------------------------------------------------------- waiting for tmdb */

struct waiter {
	tm_server *srv;
	int timeout_ms;
	atomic_int rc;          /* -1 while waiting */
	pthread_t th;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;

	atomic_store(&w->rc, tm_server_wait_client(w->srv, w->timeout_ms));
	return NULL;
}

static void waiter_start(struct waiter *w, tm_server *srv, int timeout_ms)
{
	w->srv = srv;
	w->timeout_ms = timeout_ms;
	atomic_store(&w->rc, -1);
	pthread_create(&w->th, NULL, waiter_main, w);
}

/* Nobody comes: the wait ends with AGAIN after about the time given. */
static void test_wait_timeout(void)
{
	tm_server *srv = start();
	struct timespec a, b;
	long ms;

	clock_gettime(CLOCK_MONOTONIC, &a);
	CU_ASSERT_EQUAL(tm_server_wait_client(srv, 150), TM_ERR_AGAIN);
	clock_gettime(CLOCK_MONOTONIC, &b);
	ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
	CU_ASSERT(ms >= 140 && ms < 2000);
	CU_ASSERT_EQUAL(tm_server_wait_client(srv, 0), TM_ERR_AGAIN);
	CU_ASSERT_EQUAL(tm_server_wait_client(NULL, 0), TM_ERR_INVALID_ARG);
	tm_server_stop(srv);
}

/* A waiter forever is released by tm_server_stop with CLOSED. */
static void test_wait_stop(void)
{
	tm_server *srv = start();
	struct waiter w;

	waiter_start(&w, srv, -1);
	usleep(50000);
	CU_ASSERT_EQUAL(atomic_load(&w.rc), -1);
	tm_server_stop(srv);
	pthread_join(w.th, NULL);
	CU_ASSERT_EQUAL(atomic_load(&w.rc), TM_ERR_CLOSED);
}

/*
 * `tmdb --args`: the probe waits for tmdb before the model runs.  HELLO
 * alone does not end the wait, SUBSCRIBE does, and the model then stops at
 * its very first event without any INTERRUPT; a breakpoint set before
 * SUBSCRIBE on a node that does not exist yet binds when it is registered.
 */
static void test_wait_client(void)
{
	struct tm_server_opts o;
	struct waiter w;
	struct client *c;
	tm_server *srv = NULL;
	char path[128];
	struct model m;

	snprintf(path, sizeof(path), "%s/wait.sock", tmpdir);
	tm_server_opts_default(&o);
	o.path = path;
	CU_ASSERT_EQUAL_FATAL(tm_server_start(&o, &srv), TM_OK);
	waiter_start(&w, srv, 5000);
	c = cl_connect(path);
	cl_hello(c);
	/* No node yet: pending. */
	CU_ASSERT_EQUAL(cl_break(c, 1, "model.fc2:out", "tensor.max > 10"), TM_OK);
	CU_ASSERT_PTR_NOT_NULL(strstr(c->m.u.result.text, "pending"));
	usleep(50000);
	CU_ASSERT_EQUAL(atomic_load(&w.rc), -1);
	CU_ASSERT_EQUAL(cl_subscribe(c, ""), TM_OK);
	pthread_join(w.th, NULL);
	CU_ASSERT_EQUAL(atomic_load(&w.rc), TM_OK);
	/* The model registers its modules, then runs. */
	add_nodes(srv);
	model_start(&m, srv);
	CU_ASSERT_EQUAL(cl_stop(c, TM_STOP_STEP, 0), 0);
	usleep(50000);
	CU_ASSERT_EQUAL(atomic_load(&m.emitted), 0);
	CU_ASSERT_EQUAL(c->nodes, 4);
	cl_resume(c, TM_RESUME_CONTINUE, 1);
	/* the pending breakpoint is bound now: first fc2 max > 10 at step 6 */
	CU_ASSERT_EQUAL(cl_stop(c, TM_STOP_BREAKPOINT, 1), 6 * PER_STEP + 6);
	cl_resume(c, TM_RESUME_CONTINUE, 1);
	CU_ASSERT_EQUAL(cl_stop(c, TM_STOP_BREAKPOINT, 1), 7 * PER_STEP + 6);
	memset(&c->m, 0, sizeof(c->m));
	c->m.type = TM_MSG_DETACH;
	cl_send(c, &c->m);
	CU_ASSERT(model_finishes(&m, 3000));
	pthread_join(m.th, NULL);
	cl_close(c);
	/* A wait with a debugger already subscribed returns at once and stops
	 * the model at its next event; one that nobody waited for does not. */
	c = cl_connect(path);
	cl_hello(c);
	CU_ASSERT_EQUAL(cl_subscribe(c, ""), TM_OK);
	model_start(&m, srv);
	CU_ASSERT(model_finishes(&m, 3000));
	pthread_join(m.th, NULL);
	CU_ASSERT_EQUAL(cl_next(c, 200), 0);    /* no STOP came */
	CU_ASSERT_EQUAL(c->events, NEVENTS);
	CU_ASSERT_EQUAL(tm_server_wait_client(srv, 0), TM_OK);
	model_start(&m, srv);
	CU_ASSERT_EQUAL(cl_stop(c, TM_STOP_STEP, 0), 0);
	cl_resume(c, TM_RESUME_CONTINUE, 1);
	CU_ASSERT(model_finishes(&m, 3000));
	pthread_join(m.th, NULL);
	cl_close(c);
	tm_server_stop(srv);
}

/* The word the Python probe polls: bit 0 subscribed, the rest a counter of
 * level/capture request changes. */
static void test_state_word(void)
{
	tm_server *srv = start();
	const uint32_t *st = tm_server_state(srv);
	struct client *c;
	struct tm_event ev;
	struct tm_tensor t;
	float data[4] = { 1, 2, 3, 4 };
	uint32_t s0, s1;

	CU_ASSERT_PTR_NULL(tm_server_state(NULL));
	CU_ASSERT_PTR_NOT_NULL_FATAL(st);
	s0 = *st;
	CU_ASSERT_EQUAL(s0 & 1, 0);
	c = cl_connect(tm_server_path(srv));
	cl_hello(c);
	CU_ASSERT_EQUAL(*st, s0);               /* HELLO is not a subscription */
	CU_ASSERT_EQUAL(cl_subscribe(c, ""), TM_OK);
	CU_ASSERT_EQUAL(*st, s0 | 1);
	/* a level request bumps the counter, bit 0 stays */
	memset(&c->m, 0, sizeof(c->m));
	c->m.type = TM_MSG_SET_LEVEL;
	c->m.u.level.level = 3;
	strcpy(c->m.u.level.pattern, "model.fc*");
	cl_send(c, &c->m);
	CU_ASSERT_EQUAL(cl_result(c, TM_MSG_SET_LEVEL), TM_OK);
	s1 = *st;
	CU_ASSERT_EQUAL(s1 & 1, 1);
	CU_ASSERT_NOT_EQUAL(s1 >> 1, s0 >> 1);
	/* a refused request changes nothing */
	memset(&c->m, 0, sizeof(c->m));
	c->m.type = TM_MSG_SET_LEVEL;
	c->m.u.level.level = 2;
	strcpy(c->m.u.level.pattern, "model..x");
	cl_send(c, &c->m);
	CU_ASSERT_EQUAL(cl_result(c, TM_MSG_SET_LEVEL), TM_ERR_ADDRESS);
	CU_ASSERT_EQUAL(*st, s1);
	/* a capture request, and its completion by an event, bump it too */
	memset(&c->m, 0, sizeof(c->m));
	c->m.type = TM_MSG_CAPTURE;
	c->m.u.capture.node = 3;
	c->m.u.capture.slot.kind = TM_SLOT_OUT;
	cl_send(c, &c->m);
	CU_ASSERT_EQUAL(cl_result(c, TM_MSG_CAPTURE), TM_OK);
	CU_ASSERT_NOT_EQUAL(*st, s1);
	s1 = *st;
	make_event(6, &ev, &t);
	t.payload = data;
	t.payload_len = sizeof(data);
	CU_ASSERT_EQUAL(tm_server_event(srv, &ev), TM_OK);
	CU_ASSERT_NOT_EQUAL(*st, s1);
	CU_ASSERT_EQUAL(tm_server_wants_capture(srv, 3), 0);
	s1 = *st;
	/* the debugger leaves: bit 0 clears and the level request is gone */
	cl_close(c);
	usleep(100000);
	CU_ASSERT_EQUAL(*st & 1, 0);
	CU_ASSERT_NOT_EQUAL(*st >> 1, s1 >> 1);
	CU_ASSERT_EQUAL(tm_server_level(srv, 1), -1);
	tm_server_stop(srv);
}

/* ------------------------------------------------------------- through a recorder */

/*
 * The same model, as the Python probe drives it: one batch of PER_STEP
 * tm_rec_events per step, tensors given by their data (the recorder
 * computes the stats), fc2's output max 2 * step.
 */
struct rmodel {
	tm_recorder *r;
	pthread_t th;
	atomic_int steps;       /* submits that returned */
	atomic_int done;
	int annotate;           /* each step serves requests req-S, req-S+1 */
	float data[STEPS][4];
	float ones[4];
};

static void rec_nodes(tm_recorder *r, uint32_t from, uint32_t to)
{
	uint32_t i, id;

	for (i = from; i < to; i++) {
		CU_ASSERT_EQUAL(tm_recorder_node2(r, node_names[i], i ? "Linear" : "Net",
						  NULL, 0, i ? 0 : TM_NODE_NONE, i ? 1 : 0,
						  TM_NODE_MODULE, &id), TM_OK);
		CU_ASSERT_EQUAL(id, i);
	}
}

static void rec_batch(struct rmodel *m, uint64_t s, struct tm_rec_event *ev,
		      struct tm_rec_tensor *t)
{
	static const uint8_t nodes[PER_STEP] = { 0, 1, 1, 2, 2, 3, 3, 0 };
	int i;

	memset(ev, 0, PER_STEP * sizeof(*ev));
	memset(t, 0, PER_STEP * sizeof(*t));
	for (i = 0; i < PER_STEP; i++) {
		ev[i].step = s;
		ev[i].node = nodes[i];
		ev[i].call = 1;
		ev[i].kind = (i == 0 || i == 1 || i == 3 || i == 5) ? TM_EV_ENTER : TM_EV_EXIT;
		ev[i].time_ns = (s * PER_STEP + (uint64_t)i) * 1000;
		ev[i].level = 1;
		ev[i].ntensors = 1;
		t[i].slot_kind = ev[i].kind == TM_EV_ENTER ? TM_SLOT_IN : TM_SLOT_OUT;
		t[i].dtype = TM_DT_F32;
		t[i].rank = 1;
		t[i].shape[0] = 4;
		t[i].numel = 4;
		t[i].level = 1;
		t[i].data = (uint64_t)(uintptr_t)(nodes[i] == 3 ? m->data[s] : m->ones);
	}
}

static void *rmodel_main(void *arg)
{
	struct rmodel *m = arg;
	struct tm_rec_event ev[PER_STEP];
	struct tm_rec_tensor t[PER_STEP];
	uint64_t s;

	for (s = 0; s < STEPS; s++) {
		if (m->annotate) {
			char ids[2][16];
			const char *vals[2] = { ids[0], ids[1] };

			snprintf(ids[0], sizeof(ids[0]), "req-%d", (int)s);
			snprintf(ids[1], sizeof(ids[1]), "req-%d", (int)s + 1);
			tm_recorder_annotate(m->r, s, s * PER_STEP * 1000, "request",
					     vals, 2, 2);
		}
		rec_batch(m, s, ev, t);
		tm_recorder_submit(m->r, ev, PER_STEP, t, PER_STEP, NULL);
		atomic_fetch_add(&m->steps, 1);
	}
	atomic_store(&m->done, 1);
	return NULL;
}

static void rmodel_start(struct rmodel *m, tm_recorder *r)
{
	int s;

	m->r = r;
	for (s = 0; s < STEPS; s++) {
		m->data[s][0] = 0;
		m->data[s][1] = -2;
		m->data[s][2] = 2.0f * (float)s;
		m->data[s][3] = -1;
	}
	m->ones[0] = m->ones[1] = m->ones[2] = m->ones[3] = 1;
	atomic_store(&m->steps, 0);
	atomic_store(&m->done, 0);
	pthread_create(&m->th, NULL, rmodel_main, m);
}

static int rmodel_finishes(struct rmodel *m, int ms)
{
	while (ms-- > 0 && !atomic_load(&m->done))
		usleep(1000);
	return atomic_load(&m->done);
}

static tm_server *start_bare(const char *name)
{
	struct tm_server_opts o;
	char path[128];
	tm_server *srv = NULL;

	snprintf(path, sizeof(path), "%s/%s.sock", tmpdir, name);
	tm_server_opts_default(&o);
	o.path = path;
	o.probe_kind = "pytorch";
	CU_ASSERT_EQUAL_FATAL(tm_server_start(&o, &srv), TM_OK);
	return srv;
}

/*
 * The probe only submits: the debugger gets the recorder's nodes (those
 * registered before serve and after), its seqs and the stats it computed;
 * a breakpoint pauses the submitting thread inside tm_recorder_submit while
 * the writer thread goes on draining, and RESUME lets it go.  The trace
 * and the debugger's stream hold the same events.
 */
static void test_serve_pause(void)
{
	tm_server *srv = start_bare("serve");
	struct tm_recorder_stats rs;
	struct tm_run_meta meta;
	struct tm_record rec;
	tm_recorder *r = NULL;
	tm_reader *rd = NULL;
	char trace[128];
	struct client *c;
	struct rmodel m;
	int i, n;

	snprintf(trace, sizeof(trace), "%s/serve.tmrun", tmpdir);
	CU_ASSERT_EQUAL_FATAL(tm_recorder_open(trace, NULL, &r), TM_OK);
	memset(&meta, 0, sizeof(meta));
	meta.probe_kind = "pytorch";
	meta.rank = -1;
	CU_ASSERT_EQUAL(tm_recorder_meta(r, &meta), TM_OK);
	rec_nodes(r, 0, 2);
	CU_ASSERT_EQUAL(tm_recorder_serve(r, srv), TM_OK);
	CU_ASSERT_EQUAL(tm_recorder_serve(r, srv), TM_OK);     /* again: harmless */
	c = cl_connect(tm_server_path(srv));
	cl_hello(c);
	CU_ASSERT_EQUAL(cl_break(c, 1, "model.fc2:out", "tensor.max > 10"), TM_OK);
	CU_ASSERT_EQUAL(cl_subscribe(c, ""), TM_OK);
	rec_nodes(r, 2, 4);     /* while the debugger watches */
	m.annotate = 0;
	rmodel_start(&m, r);
	CU_ASSERT_EQUAL(cl_stop(c, TM_STOP_BREAKPOINT, 1), 6 * PER_STEP + 6);
	CU_ASSERT_EQUAL(c->metas, 1);
	CU_ASSERT_EQUAL(c->nodes, 4);
	usleep(100000);
	CU_ASSERT_EQUAL(atomic_load(&m.steps), 6);      /* inside submit of step 6 */
	/* The writer thread drains meanwhile: the whole of step 6 is in the
	 * ring, and flush gets it written. */
	CU_ASSERT_EQUAL(tm_recorder_flush(r), TM_OK);
	tm_recorder_get_stats(r, &rs);
	CU_ASSERT_EQUAL(rs.events_written, 7 * PER_STEP);
	cl_resume(c, TM_RESUME_STEP, 1);
	CU_ASSERT_EQUAL(cl_stop(c, TM_STOP_STEP, 0), 6 * PER_STEP + 7);
	CU_ASSERT_EQUAL(atomic_load(&m.steps), 6);
	cl_resume(c, TM_RESUME_CONTINUE, 1);
	CU_ASSERT_EQUAL(cl_stop(c, TM_STOP_BREAKPOINT, 1), 7 * PER_STEP + 6);
	cl_resume(c, TM_RESUME_CONTINUE, 1);
	CU_ASSERT_EQUAL(cl_stop(c, TM_STOP_BREAKPOINT, 1), 8 * PER_STEP + 6);
	cl_resume(c, TM_RESUME_CONTINUE, 1);
	CU_ASSERT_EQUAL(cl_stop(c, TM_STOP_BREAKPOINT, 1), 9 * PER_STEP + 6);
	cl_resume(c, TM_RESUME_CONTINUE, 1);
	CU_ASSERT(rmodel_finishes(&m, 3000));
	pthread_join(m.th, NULL);
	CU_ASSERT_EQUAL(cl_next(c, 200), 0);
	CU_ASSERT_EQUAL(c->events, NEVENTS);
	CU_ASSERT_FALSE(c->seq_hole);
	/* the recorder's seqs, and the stats it computed from the data */
	for (i = 0; i < NEVENTS; i++) {
		CU_ASSERT_EQUAL(c->log[i].seq, (uint64_t)i);
		CU_ASSERT(c->log[i].have & TM_STAT_BIT(TM_STAT_MAX));
		CU_ASSERT_EQUAL(c->log[i].max, c->log[i].node == 3 ?
				2.0 * (i / PER_STEP) : 1.0);
	}
	CU_ASSERT_EQUAL(tm_recorder_serve(r, NULL), TM_OK);
	CU_ASSERT_EQUAL(tm_recorder_close(r), TM_OK);
	tm_server_stop(srv);
	/* The trace has the same events. */
	CU_ASSERT_EQUAL_FATAL(tm_reader_open(trace, 0, &rd, NULL), TM_OK);
	CU_ASSERT_EQUAL(tm_nodetab_count(tm_reader_nodes(rd)), 4);
	n = 0;
	while (tm_reader_next(rd, &rec) == TM_OK) {
		if (rec.type != TM_REC_EVENT)
			continue;
		CU_ASSERT_EQUAL(rec.u.event.seq, (uint64_t)n);
		CU_ASSERT_EQUAL(rec.u.event.tensors[0].stat[TM_STAT_MAX], c->log[n].max);
		n++;
	}
	CU_ASSERT_EQUAL(n, NEVENTS);
	tm_reader_close(rd);
	cl_close(c);
	unlink(trace);
}

/*
 * A server's steps annotated with their request ids: the probe's own
 * breakpoint conditions test them (`request == "req-7"` holds in steps 6
 * and 7 only), the debugger gets each annotation before its step's events,
 * one that subscribes later gets the current one, and the trace has them
 * all, in order.
 */
static void test_serve_annotations(void)
{
	tm_server *srv = start_bare("annot");
	struct tm_run_meta meta;
	const struct tm_annot *a;
	tm_recorder *r = NULL;
	tm_reader *rd = NULL;
	char trace[128], want[16];
	struct client *c;
	struct rmodel m;
	uint64_t s;

	snprintf(trace, sizeof(trace), "%s/annot.tmrun", tmpdir);
	CU_ASSERT_EQUAL_FATAL(tm_recorder_open(trace, NULL, &r), TM_OK);
	memset(&meta, 0, sizeof(meta));
	meta.probe_kind = "vllm";
	meta.rank = -1;
	CU_ASSERT_EQUAL(tm_recorder_meta(r, &meta), TM_OK);
	rec_nodes(r, 0, 4);
	CU_ASSERT_EQUAL(tm_recorder_serve(r, srv), TM_OK);
	c = cl_connect(tm_server_path(srv));
	cl_hello(c);
	CU_ASSERT_EQUAL(cl_break(c, 1, "model.fc2:out", "request == \"req-7\""), TM_OK);
	CU_ASSERT_EQUAL(cl_subscribe(c, ""), TM_OK);
	memset(&m, 0, sizeof(m));
	m.annotate = 1;
	rmodel_start(&m, r);
	CU_ASSERT_EQUAL(cl_stop(c, TM_STOP_BREAKPOINT, 1), 6 * PER_STEP + 6);
	CU_ASSERT_EQUAL(c->annots, 7);
	CU_ASSERT_EQUAL(c->annot_step, 6);
	CU_ASSERT_EQUAL(c->annot_seq, 6 * PER_STEP);
	cl_resume(c, TM_RESUME_CONTINUE, 1);
	CU_ASSERT_EQUAL(cl_stop(c, TM_STOP_BREAKPOINT, 1), 7 * PER_STEP + 6);
	cl_resume(c, TM_RESUME_CONTINUE, 1);
	CU_ASSERT(rmodel_finishes(&m, 3000));
	pthread_join(m.th, NULL);
	CU_ASSERT_EQUAL(cl_next(c, 200), 0);
	CU_ASSERT_EQUAL(c->annots, STEPS);
	CU_ASSERT_EQUAL(c->events, NEVENTS);
	CU_ASSERT_FALSE(c->seq_hole);
	cl_close(c);
	usleep(100000);
	/* a debugger attaching now learns the current step's batch */
	c = cl_connect(tm_server_path(srv));
	cl_hello(c);
	CU_ASSERT_EQUAL(cl_subscribe(c, ""), TM_OK);
	CU_ASSERT_EQUAL(cl_next(c, 200), 0);
	CU_ASSERT_EQUAL(c->annots, 1);
	CU_ASSERT_EQUAL(c->annot_step, STEPS - 1);
	cl_close(c);
	CU_ASSERT_EQUAL(tm_recorder_serve(r, NULL), TM_OK);
	CU_ASSERT_EQUAL(tm_recorder_close(r), TM_OK);
	tm_server_stop(srv);
	CU_ASSERT_EQUAL_FATAL(tm_reader_open(trace, 0, &rd, NULL), TM_OK);
	for (s = 0; s < STEPS; s++) {
		CU_ASSERT_EQUAL_FATAL(tm_reader_annotation(rd, s, "request", &a), TM_OK);
		CU_ASSERT_EQUAL(a->seq, s * PER_STEP);
		CU_ASSERT_EQUAL_FATAL(a->nvalues, 2);
		snprintf(want, sizeof(want), "req-%d", (int)s + 1);
		CU_ASSERT_STRING_EQUAL(a->values[1], want);
	}
	tm_reader_close(rd);
	unlink(trace);
}

/*
 * A ring too small to keep up, and the probe's own gaps: the debugger gets
 * every seq, as events or gaps, in order.  No writer thread drains (manual),
 * so the ring keeps the first events and drops the rest.
 */
static void test_serve_gaps(void)
{
	tm_server *srv = start_bare("gaps");
	struct tm_recorder_opts o;
	tm_recorder *r = NULL;
	char trace[128];
	struct client *c;
	struct rmodel m;
	uint64_t first = 0;

	snprintf(trace, sizeof(trace), "%s/gaps.tmrun", tmpdir);
	tm_recorder_opts_default(&o);
	o.ring_events = 4;
	o.manual_drain = 1;
	CU_ASSERT_EQUAL_FATAL(tm_recorder_open(trace, &o, &r), TM_OK);
	rec_nodes(r, 0, 4);
	CU_ASSERT_EQUAL(tm_recorder_serve(r, srv), TM_OK);
	c = cl_connect(tm_server_path(srv));
	cl_hello(c);
	CU_ASSERT_EQUAL(cl_subscribe(c, ""), TM_OK);
	m.annotate = 0;
	rmodel_start(&m, r);
	CU_ASSERT(rmodel_finishes(&m, 3000));
	pthread_join(m.th, NULL);
	CU_ASSERT_EQUAL(tm_recorder_gap(r, 5, TM_GAP_FILTERED, STEPS, 0, &first), TM_OK);
	CU_ASSERT_EQUAL(first, NEVENTS);
	CU_ASSERT_EQUAL(cl_next(c, 300), 0);
	CU_ASSERT_EQUAL(c->events, 4);
	CU_ASSERT_EQUAL(c->gap_reasons, TM_GAP_BACKPRESSURE | TM_GAP_FILTERED);
	CU_ASSERT_FALSE(c->seq_hole);
	CU_ASSERT_EQUAL(c->next_seq, NEVENTS + 5);
	CU_ASSERT_EQUAL(tm_recorder_close(r), TM_OK);
	cl_close(c);
	tm_server_stop(srv);
	unlink(trace);
}

/*
 * `tmdb --args python train.py` without a recording: a recorder with no
 * writer; the probe waits for tmdb, which stops the model at its first
 * event; then the process crashes and tmdb gets the crash record.  In a
 * child process, so that it can really die.
 */
__attribute__((noinline)) static void crash_now(volatile uintptr_t addr)
{
	*(volatile int *)addr = 42;
}

static void crash_child(const char *path)
{
	struct rlimit rl = { 0, 0 };
	struct tm_server_opts o;
	struct rmodel m;
	struct tm_rec_event ev[PER_STEP];
	struct tm_rec_tensor t[PER_STEP];
	tm_server *srv = NULL;
	tm_recorder *r = NULL;

	setrlimit(RLIMIT_CORE, &rl);
	tm_server_opts_default(&o);
	o.path = path;
	if (tm_server_start(&o, &srv) || tm_recorder_open(NULL, NULL, &r))
		_exit(2);
	rec_nodes(r, 0, 4);
	if (tm_recorder_serve(r, srv) || tm_recorder_crash_install(r))
		_exit(3);
	if (tm_server_wait_client(srv, 10000))
		_exit(4);
	memset(&m, 0, sizeof(m));
	m.ones[0] = m.ones[1] = m.ones[2] = m.ones[3] = 1;
	m.data[1][2] = 2;
	rec_batch(&m, 0, ev, t);
	tm_recorder_submit(r, ev, PER_STEP, t, PER_STEP, NULL);
	rec_batch(&m, 1, ev, t);
	tm_recorder_submit(r, ev, 3, t, 3, NULL);       /* ENTER model, fc1; EXIT fc1 */
	crash_now(16);
	_exit(0);
}

static void test_serve_wait_and_crash(void)
{
	char path[128];
	struct client *c = NULL;
	int status = 0, i, t;
	pid_t pid;

	snprintf(path, sizeof(path), "%s/crash.sock", tmpdir);
	fflush(NULL);
	pid = fork();
	if (pid == 0)
		crash_child(path);
	CU_ASSERT_FATAL(pid > 0);
	for (i = 0; i < 200 && access(path, F_OK); i++)
		usleep(10000);
	c = cl_connect(path);
	cl_hello(c);
	CU_ASSERT_EQUAL(cl_subscribe(c, ""), TM_OK);
	/* paused at the first event, before anything else ran */
	CU_ASSERT_EQUAL(cl_stop(c, TM_STOP_STEP, 0), 0);
	CU_ASSERT_EQUAL(c->nodes, 4);
	CU_ASSERT_EQUAL(c->events, 1);
	cl_resume(c, TM_RESUME_CONTINUE, 1);
	while ((t = cl_next(c, 3000)) > 0)
		;
	CU_ASSERT_EQUAL(t, -1);         /* the connection ends with the process */
	CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
	CU_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV);
	CU_ASSERT_EQUAL(c->events, PER_STEP + 3);
	CU_ASSERT_FALSE(c->seq_hole);
	CU_ASSERT_EQUAL(c->crashes, 1);
	CU_ASSERT_EQUAL(c->crash.signo, SIGSEGV);
	/* at the last event submitted: EXIT model.fc1 of step 1 */
	CU_ASSERT_EQUAL(c->crash.seq, PER_STEP + 2);
	CU_ASSERT_EQUAL(c->crash.step, 1);
	CU_ASSERT_EQUAL(c->crash.node, 1);
	cl_close(c);
	unlink(path);
}

/* ------------------------------------------------------------- issue 25 */

static struct client *cl_wrap(int fd)
{
	struct client *c = calloc(1, sizeof(*c));

	c->fd = fd;
	c->d = tm_frame_decoder_new(0);
	c->rd = tm_decoder_new();
	return c;
}

static struct client *cl_connect_tcp(const char *url)
{
	struct sockaddr_in sa;
	unsigned port = 0;
	int fd;

	CU_ASSERT_EQUAL_FATAL(sscanf(url, "tcp://127.0.0.1:%u", &port), 1);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	CU_ASSERT_EQUAL_FATAL(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return cl_wrap(fd);
}

static void cl_hello_token(struct client *c, const char *token)
{
	memset(&c->m, 0, sizeof(c->m));
	c->m.type = TM_MSG_HELLO;
	c->m.u.hello.major = TM_WIRE_VERSION_MAJOR;
	c->m.u.hello.minor = TM_WIRE_VERSION_MINOR;
	strcpy(c->m.u.hello.name, "test_server");
	snprintf(c->m.u.hello.token, sizeof(c->m.u.hello.token), "%s", token);
	cl_send(c, &c->m);
}

static tm_server *start_opts(const char *path, uint32_t hello_ms, uint32_t takeover_ms)
{
	struct tm_server_opts o;
	tm_server *srv = NULL;

	tm_server_opts_default(&o);
	o.path = path;
	o.hello_ms = hello_ms;
	o.takeover_ms = takeover_ms;
	CU_ASSERT_EQUAL_FATAL(tm_server_start(&o, &srv), TM_OK);
	add_nodes(srv);
	return srv;
}

/* F5: a connection that never says HELLO keeps no debugger out, and is
 * closed after hello_ms. */
static void test_silent_connection(void)
{
	char path[128];
	tm_server *srv;
	struct client *mute, *c;

	snprintf(path, sizeof(path), "%s/mute.sock", tmpdir);
	srv = start_opts(path, 300, 0);
	mute = cl_connect(path);
	usleep(50000);
	c = cl_connect(path);
	cl_hello(c);    /* asserts DESCRIBE: not "another debugger is attached" */
	CU_ASSERT_EQUAL(cl_subscribe(c, ""), TM_OK);
	/* the mute one is told why and closed */
	CU_ASSERT_EQUAL(cl_next(mute, 2000), TM_MSG_BYE);
	CU_ASSERT_PTR_NOT_NULL(strstr(mute->m.u.result.text, "no HELLO within"));
	CU_ASSERT_EQUAL(cl_next(mute, 2000), -1);
	cl_close(mute);
	cl_close(c);
	tm_server_stop(srv);
}

/* A debugger silent for takeover_ms can be replaced; both are told. */
static void test_takeover(void)
{
	char path[128];
	tm_server *srv;
	struct client *old, *nw, *third;
	struct model m;

	snprintf(path, sizeof(path), "%s/take.sock", tmpdir);
	srv = start_opts(path, 0, 300);
	old = cl_connect(path);
	cl_hello(old);
	CU_ASSERT_EQUAL(cl_break(old, 1, "model.fc2", ""), TM_OK);
	CU_ASSERT_EQUAL(cl_subscribe(old, ""), TM_OK);
	model_start(&m, srv);
	CU_ASSERT_NOT_EQUAL(cl_stop(old, TM_STOP_BREAKPOINT, 1), UINT64_MAX);
	usleep(400000);         /* old stays silent, the model paused */
	nw = cl_connect(path);
	cl_hello(nw);
	CU_ASSERT_EQUAL(cl_next(nw, 2000), TM_MSG_RESULT);
	CU_ASSERT_EQUAL(nw->m.u.result.request, TM_MSG_HELLO);
	CU_ASSERT_PTR_NOT_NULL(strstr(nw->m.u.result.text, "took over from test_server"));
	/* the old one hears it lost its place; the model runs on */
	while (cl_next(old, 2000) > 0 && old->m.type != TM_MSG_BYE)
		;
	CU_ASSERT_EQUAL(old->m.type, TM_MSG_BYE);
	CU_ASSERT_PTR_NOT_NULL(strstr(old->m.u.result.text, "another debugger took over"));
	CU_ASSERT(model_finishes(&m, 2000));
	pthread_join(m.th, NULL);
	/* the new one is active: a third is turned away at once */
	CU_ASSERT_EQUAL(cl_subscribe(nw, ""), TM_OK);
	third = cl_connect(path);
	CU_ASSERT_EQUAL(cl_next(third, 2000), TM_MSG_BYE);
	CU_ASSERT_EQUAL(third->m.u.result.code, TM_ERR_GENERIC);
	CU_ASSERT_PTR_NOT_NULL(strstr(third->m.u.result.text, "another debugger is attached"));
	cl_close(third);
	cl_close(old);
	cl_close(nw);
	tm_server_stop(srv);
}

/* F7: a listen path is reused only when it is a stale socket of ours. */
static void test_listen_path(void)
{
	char victim[96], stale[96];
	struct tm_server_opts o;
	struct sockaddr_un sa;
	struct stat st;
	tm_server *srv = NULL, *srv2 = NULL;
	int fd;

	snprintf(victim, sizeof(victim), "%s/victim.txt", tmpdir);
	fd = open(victim, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CU_ASSERT_EQUAL(write(fd, "keep me\n", 8), 8);
	close(fd);
	tm_server_opts_default(&o);
	o.path = victim;
	CU_ASSERT_EQUAL(tm_server_start(&o, &srv), TM_ERR_IO);
	CU_ASSERT_PTR_NULL(srv);
	CU_ASSERT_EQUAL(stat(victim, &st), 0);
	CU_ASSERT(S_ISREG(st.st_mode) && st.st_size == 8);
	CU_ASSERT_PTR_NOT_NULL(strstr(tm_server_start_error(), "is not a socket: not removed"));
	CU_ASSERT_PTR_NOT_NULL(strstr(tm_server_start_error(), victim));
	unlink(victim);

	/* a dead process's socket is stale: reused */
	snprintf(stale, sizeof(stale), "%s/stale.sock", tmpdir);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", stale);
	CU_ASSERT_EQUAL(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	o.path = stale;
	CU_ASSERT_EQUAL_FATAL(tm_server_start(&o, &srv), TM_OK);
	/* a live one is not taken from its owner */
	CU_ASSERT_EQUAL(tm_server_start(&o, &srv2), TM_ERR_IO);
	CU_ASSERT_PTR_NOT_NULL(strstr(tm_server_start_error(), "another process listens"));
	{
		struct client *c = cl_connect(stale);

		cl_hello(c);
		cl_close(c);
	}
	tm_server_stop(srv);
}

/* F6: a subscriber that never reads costs the model little and the server
 * thread nothing: the queue fills, events become BACKPRESSURE gaps, and
 * nobody spins on a full socket. */
static double cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_reader_that_never_reads(void)
{
	struct tm_server_opts o;
	struct tm_server_stats st;
	struct tm_event ev;
	struct tm_tensor t;
	char path[128];
	tm_server *srv = NULL;
	struct client *c;
	uint64_t seq;
	double c0, c1;
	int rcv = 4096;

	snprintf(path, sizeof(path), "%s/deaf.sock", tmpdir);
	tm_server_opts_default(&o);
	o.path = path;
	o.max_queue = 256u << 10;
	CU_ASSERT_EQUAL_FATAL(tm_server_start(&o, &srv), TM_OK);
	add_nodes(srv);
	c = cl_connect(path);
	setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
	cl_hello(c);
	CU_ASSERT_EQUAL(cl_subscribe(c, ""), TM_OK);
	/* the model runs on, the queue fills */
	for (seq = 0; seq < 200000; seq++) {
		make_event(seq % NEVENTS + (seq / NEVENTS) * NEVENTS, &ev, &t);
		ev.seq = seq;
		tm_server_event(srv, &ev);
	}
	tm_server_get_stats(srv, &st);
	CU_ASSERT(st.events_dropped > 150000);
	/* idle now, with a full socket: the server thread must sleep */
	c0 = cpu_s();
	usleep(500000);
	c1 = cpu_s();
	CU_ASSERT(c1 - c0 < 0.05);
	if (c1 - c0 >= 0.05)
		fprintf(stderr, "server thread busy: %.3f s CPU in 0.5 s\n", c1 - c0);
	cl_close(c);
	tm_server_stop(srv);
}

/* TCP: the token from the 0600 file lets a debugger in; a wrong token,
 * garbage and a half-open connection are refused; the model runs on. */
static void test_tcp(void)
{
	struct tm_server_opts o;
	struct stat st;
	tm_server *srv = NULL;
	struct client *c;
	struct model m;
	char tok[200] = "";
	FILE *f;

	setenv("XDG_RUNTIME_DIR", tmpdir, 1);
	tm_server_opts_default(&o);
	o.path = "tcp://127.0.0.1:0";
	o.hello_ms = 300;
	CU_ASSERT_EQUAL_FATAL(tm_server_start(&o, &srv), TM_OK);
	add_nodes(srv);
	CU_ASSERT(!strncmp(tm_server_path(srv), "tcp://127.0.0.1:", 16));
	CU_ASSERT_EQUAL(strlen(tm_server_token(srv)), 64);
	CU_ASSERT_EQUAL(stat(tm_server_token_path(srv), &st), 0);
	CU_ASSERT_EQUAL(st.st_mode & 0777, 0600);
	f = fopen(tm_server_token_path(srv), "r");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT(fgets(tok, sizeof(tok), f) != NULL);
	fclose(f);
	tok[strcspn(tok, "\n")] = 0;
	CU_ASSERT_STRING_EQUAL(tok, tm_server_token(srv));
	model_start(&m, srv);

	/* a wrong token, and none */
	c = cl_connect_tcp(tm_server_path(srv));
	cl_hello_token(c, "0000000000000000000000000000000000000000000000000000000000000000");
	CU_ASSERT_EQUAL(cl_result(c, TM_MSG_HELLO), TM_ERR_INVALID_ARG);
	CU_ASSERT_PTR_NOT_NULL(strstr(c->m.u.result.text, "wrong token"));
	CU_ASSERT_EQUAL(cl_next(c, 2000), TM_MSG_BYE);
	cl_close(c);
	c = cl_connect_tcp(tm_server_path(srv));
	cl_hello_token(c, "");
	CU_ASSERT_EQUAL(cl_result(c, TM_MSG_HELLO), TM_ERR_INVALID_ARG);
	cl_close(c);
	/* garbage */
	c = cl_connect_tcp(tm_server_path(srv));
	CU_ASSERT_EQUAL(write(c->fd, "GET / HTTP/1.0\r\n\r\n", 18), 18);
	CU_ASSERT_EQUAL(cl_next(c, 2000), TM_MSG_BYE);
	CU_ASSERT_EQUAL(c->m.u.result.code, TM_ERR_BAD_MAGIC);
	cl_close(c);
	/* half-open: connects, never speaks */
	c = cl_connect_tcp(tm_server_path(srv));
	CU_ASSERT_EQUAL(cl_next(c, 2000), TM_MSG_BYE);
	CU_ASSERT_PTR_NOT_NULL(strstr(c->m.u.result.text, "no HELLO"));
	cl_close(c);
	CU_ASSERT(model_finishes(&m, 2000));
	pthread_join(m.th, NULL);

	/* the right token: a debugging session as over the Unix socket */
	c = cl_connect_tcp(tm_server_path(srv));
	cl_hello_token(c, tok);
	CU_ASSERT_EQUAL(cl_next(c, 2000), TM_MSG_DESCRIBE);
	CU_ASSERT_EQUAL(cl_break(c, 1, "model.fc2:out", "tensor.max > 10"), TM_OK);
	CU_ASSERT_EQUAL(cl_subscribe(c, ""), TM_OK);
	model_start(&m, srv);
	CU_ASSERT_EQUAL(cl_stop(c, TM_STOP_BREAKPOINT, 1), 6 * PER_STEP + 6);
	memset(&c->m, 0, sizeof(c->m));
	c->m.type = TM_MSG_BREAK_CLEAR;
	cl_send(c, &c->m);
	CU_ASSERT_EQUAL(cl_result(c, TM_MSG_BREAK_CLEAR), TM_OK);
	cl_resume(c, TM_RESUME_CONTINUE, 1);
	CU_ASSERT(model_finishes(&m, 2000));
	pthread_join(m.th, NULL);
	cl_close(c);
	{
		char tp[256];

		snprintf(tp, sizeof(tp), "%s", tm_server_token_path(srv));
		tm_server_stop(srv);
		CU_ASSERT_NOT_EQUAL(stat(tp, &st), 0);  /* the token goes with it */
	}
	unsetenv("XDG_RUNTIME_DIR");
}

/* Over TCP the token comes first: without it, no client takes even an
 * idle debugger's place, nor learns who is attached. */
static void test_tcp_takeover_needs_token(void)
{
	struct tm_server_opts o;
	struct tm_server_stats st;
	tm_server *srv = NULL;
	struct client *c1, *c2;

	setenv("XDG_RUNTIME_DIR", tmpdir, 1);
	tm_server_opts_default(&o);
	o.path = "tcp://127.0.0.1:0";
	o.takeover_ms = 100;
	CU_ASSERT_EQUAL_FATAL(tm_server_start(&o, &srv), TM_OK);
	add_nodes(srv);
	c1 = cl_connect_tcp(tm_server_path(srv));
	cl_hello_token(c1, tm_server_token(srv));
	CU_ASSERT_EQUAL(cl_next(c1, 2000), TM_MSG_DESCRIBE);
	CU_ASSERT_EQUAL(cl_subscribe(c1, ""), TM_OK);
	usleep(250000);         /* c1 is idle now */
	c2 = cl_connect_tcp(tm_server_path(srv));
	cl_hello_token(c2, "not-the-token");
	CU_ASSERT_EQUAL(cl_result(c2, TM_MSG_HELLO), TM_ERR_INVALID_ARG);
	CU_ASSERT_PTR_NULL(strstr(c2->m.u.result.text, "test_server"));
	cl_close(c2);
	/* c1 keeps its place: no BYE, still subscribed */
	CU_ASSERT_EQUAL(cl_next(c1, 300), 0);
	tm_server_get_stats(srv, &st);
	CU_ASSERT_EQUAL(st.connected, 1);
	CU_ASSERT_EQUAL(st.subscribed, 1);
	cl_close(c1);
	tm_server_stop(srv);
	unsetenv("XDG_RUNTIME_DIR");
}

int main(void)
{
	static const struct tm_test_case cases[] = {
		TM_TEST(test_handshake),
		TM_TEST(test_version_and_order),
		TM_TEST(test_break_and_resume),
		TM_TEST(test_resume_rerun),
		TM_TEST(test_interrupt),
		TM_TEST(test_kill),
		TM_TEST(test_notify_only),
		TM_TEST(test_pause_timeout),
		TM_TEST(test_debugger_dies),
		TM_TEST(test_stop_while_paused),
		TM_TEST(test_bad_input),
		TM_TEST(test_filter),
		TM_TEST(test_backpressure),
		TM_TEST(test_levels_and_capture),
		TM_TEST(test_socket_dir),
		TM_TEST(test_no_client),
		TM_TEST(test_wait_timeout),
		TM_TEST(test_wait_stop),
		TM_TEST(test_wait_client),
		TM_TEST(test_state_word),
		TM_TEST(test_serve_pause),
		TM_TEST(test_serve_gaps),
		TM_TEST(test_serve_annotations),
		TM_TEST(test_serve_wait_and_crash),
		TM_TEST(test_silent_connection),
		TM_TEST(test_takeover),
		TM_TEST(test_listen_path),
		TM_TEST(test_reader_that_never_reads),
		TM_TEST(test_tcp),
		TM_TEST(test_tcp_takeover_needs_token),
		{ NULL, NULL }
	};
	int rc;

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/tm-test-server-XXXXXX");
	if (!mkdtemp(tmpdir))
		return 99;
	rc = tm_test_run("server", cases);
	rmdir(tmpdir);
	return rc;
}
