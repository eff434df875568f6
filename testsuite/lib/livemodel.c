/*
 * livemodel.c -- a process that plays "the model" for live tests of tmdb:
 * it runs the probe-side wire server (tm_server_*) and sends its events
 * through tm_server_event() exactly as a probe's hook path would.
 *
 *   livemodel [OPTIONS] SOCKET [STEPS [TRACE]]
 *   TENSORMORPH_LISTEN=1|PATH livemodel [OPTIONS] [STEPS [TRACE]]
 *
 * In the first form it goes to the background once the socket is listening
 * (so that a test can attach right after) and waits up to 30 s for a
 * debugger to subscribe.  In the second, the way `tmdb --args` starts a
 * program, it stays in the foreground (its output passes through tmdb),
 * listens on DIR/PID.sock (or PATH) as a probe does, and waits up to
 * $TENSORMORPH_WAIT seconds for the debugger with tm_server_wait_client
 * (the model then pauses at its first event).  It prints one line,
 * "livemodel: N steps", before it listens.  Then it runs STEPS steps
 * (default 10) of a three-layer model:
 *
 *   model (Net) -> model.fc1 (Linear) -> model.act (ReLU) -> model.fc2 (Linear)
 *
 * 8 events a step (ENTER/EXIT of each call, seq = 8 * step + i); the output
 * max of fc2 is 2 * step, of the others 1, so that a condition like
 * `tensor.max > 10` picks a known event (step 6, seq 54).  With TRACE it
 * also records every event into that .tmrun, closed before the server says
 * BYE, so that a test can check that a command file prints the same stops
 * live and replayed (ARCHITECTURE 2).  Then it stops the server and exits.
 *
 * Options, for tests of how tmdb reports the end of a program:
 *   --exit=CODE    exit with CODE (after the run, or at --at)
 *   --signal=N     die of signal N at --at (default: after the run)
 *   --at=STEP      before the first event of STEP
 * and, as a serving probe does, --requests=N: step S runs requests
 * req-S .. req-(S+N-1), announced before its first event (TQL `request`).
 */
#include "config.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tensormorph.h"

#define PER_STEP 8

static const char *const names[] = { "model", "model.fc1", "model.act", "model.fc2" };
static const char *const types[] = { "Net", "Linear", "ReLU", "Linear" };

static void emit(tm_server *srv, tm_writer *w, uint64_t seq)
{
	static const uint8_t nodes[PER_STEP] = { 0, 1, 1, 2, 2, 3, 3, 0 };
	uint64_t step = seq / PER_STEP;
	int i = (int)(seq % PER_STEP);
	struct tm_event ev;
	struct tm_tensor t;

	memset(&ev, 0, sizeof(ev));
	memset(&t, 0, sizeof(t));
	ev.seq = seq;
	ev.step = step;
	ev.node = nodes[i];
	ev.call = 1;
	ev.kind = (i == 0 || i == 1 || i == 3 || i == 5) ? TM_EV_ENTER : TM_EV_EXIT;
	ev.time_ns = (seq + 1) * 1000;
	ev.start_ns = ev.time_ns;
	ev.level = 1;
	t.slot.kind = ev.kind == TM_EV_ENTER ? TM_SLOT_IN : TM_SLOT_OUT;
	t.dtype = TM_DT_F32;
	t.rank = 2;
	t.shape[0] = 4;
	t.shape[1] = 8;
	t.have = TM_STAT_BIT(TM_STAT_NUMEL) | TM_STAT_BIT(TM_STAT_NAN_COUNT) |
		 TM_STAT_BIT(TM_STAT_MAX);
	t.stat[TM_STAT_NUMEL] = 32;
	t.stat[TM_STAT_MAX] = ev.node == 3 ? 2.0 * (double)step : 1.0;
	ev.ntensors = 1;
	ev.tensors = &t;
	tm_crash_position(ev.seq, ev.step, ev.node, ev.phase, ev.time_ns);
	if (w)
		tm_writer_event(w, &ev);
	tm_server_event(srv, &ev);
}

/* --requests: the step's batch, as a serving probe annotates it. */
static void annotate(tm_server *srv, tm_writer *w, uint64_t seq, int nreq)
{
	char ids[16][24];
	const char *vals[16];
	struct tm_annot a;
	int j;

	memset(&a, 0, sizeof(a));
	for (j = 0; j < nreq && j < 16; j++) {
		snprintf(ids[j], sizeof(ids[j]), "req-%llu",
			 (unsigned long long)(seq / PER_STEP) + (unsigned long long)j);
		vals[j] = ids[j];
	}
	a.seq = seq;
	a.step = seq / PER_STEP;
	a.time_ns = (seq + 1) * 1000;
	a.key = "request";
	a.values = vals;
	a.nvalues = (uint32_t)j;
	a.count = (uint32_t)nreq;
	if (w)
		tm_writer_annot(w, &a);
	tm_server_annot(srv, &a);
}

/* The end --exit/--signal asked for; returns only without one. */
static void finish(tm_server *srv, tm_writer *w, int code, int signo)
{
	if (w)
		tm_writer_close(w);
	if (signo) {
		/* Dies with the connection open, as a crashing process does. */
		signal(signo, SIG_DFL);
		raise(signo);
	}
	tm_server_stop(srv);
	exit(code);
}

static int all_digits(const char *p)
{
	if (!*p)
		return 0;
	for (; *p; p++)
		if (*p < '0' || *p > '9')
			return 0;
	return 1;
}

int main(int argc, char **argv)
{
	struct tm_server_opts o;
	struct tm_server_stats st;
	struct tm_run_meta meta;
	tm_server *srv = NULL;
	tm_writer *w = NULL;
	const char *listen = getenv("TENSORMORPH_LISTEN"), *wait = getenv("TENSORMORPH_WAIT");
	const char *pos[3] = { NULL, NULL, NULL }, *sock = NULL, *trace;
	uint64_t steps = 10, seq, at = UINT64_MAX;
	int ready[2], i, err, fd, npos = 0, code = 0, signo = 0, fg, nreq = 0;
	char c;
	pid_t pid;

	for (i = 1; i < argc; i++) {
		if (!strncmp(argv[i], "--exit=", 7))
			code = atoi(argv[i] + 7);
		else if (!strncmp(argv[i], "--signal=", 9))
			signo = atoi(argv[i] + 9);
		else if (!strncmp(argv[i], "--at=", 5))
			at = strtoull(argv[i] + 5, NULL, 10);
		else if (!strncmp(argv[i], "--requests=", 11))
			nreq = atoi(argv[i] + 11);
		else if (npos < 3)
			pos[npos++] = argv[i];
	}
	fg = listen && *listen;
	if (fg) {
		/* A SOCKET argument is still accepted, the environment wins. */
		i = npos && !all_digits(pos[0]) ? 1 : 0;
		sock = strcmp(listen, "1") ? listen : NULL;
	} else {
		if (!npos) {
			fprintf(stderr, "usage: livemodel [--exit=N] [--signal=N] "
				"[--at=STEP] [--requests=N] SOCKET [STEPS [TRACE]]\n");
			return 2;
		}
		sock = pos[0];
		i = 1;
	}
	if (i < npos)
		steps = strtoull(pos[i], NULL, 10);
	trace = i + 1 < npos ? pos[i + 1] : NULL;
	if (fg) {
		printf("livemodel: %llu steps\n", (unsigned long long)steps);
		fflush(stdout);
		goto serve;
	}
	if (pipe(ready))
		return 1;
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid > 0) {
		/* The parent returns once the socket listens (or the child failed). */
		close(ready[1]);
		return read(ready[0], &c, 1) == 1 && c == 'y' ? 0 : 1;
	}
	close(ready[0]);
	setsid();
	fd = open("/dev/null", O_RDWR);
	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
serve:
	tm_server_opts_default(&o);
	o.path = sock;
	o.probe_kind = "synthetic";
	o.trace = trace;
	err = tm_server_start(&o, &srv);
	if (!err && o.trace)
		err = tm_writer_open(o.trace, NULL, &w);
	if (err) {
		if (fg) {
			fprintf(stderr, "livemodel: cannot listen: %s\n", tm_strerror(err));
			return 1;
		}
		c = 'n';
		if (write(ready[1], &c, 1) < 0)
			return 1;
		return 1;
	}
	memset(&meta, 0, sizeof(meta));
	meta.probe_kind = "synthetic";
	meta.default_level = 1;
	meta.rank = -1;
	tm_server_meta(srv, &meta);
	if (w)
		tm_writer_meta(w, &meta);
	for (i = 0; i < 4; i++) {
		struct tm_node n;

		memset(&n, 0, sizeof(n));
		n.id = (uint32_t)i;
		n.parent = i ? 0 : TM_NODE_NONE;
		n.depth = i ? 1 : 0;
		n.kind = TM_NODE_MODULE;
		n.address = names[i];
		n.type = types[i];
		tm_server_node(srv, &n);
		if (w)
			tm_writer_node(w, &n, NULL);
	}
	if (fg) {
		if (wait && *wait)
			tm_server_wait_client(srv, atoi(wait) * 1000);
	} else {
		c = 'y';
		if (write(ready[1], &c, 1) < 0)
			return 1;
		close(ready[1]);
		for (i = 0; i < 3000; i++) {
			tm_server_get_stats(srv, &st);
			if (st.subscribed)
				break;
			usleep(10000);
		}
	}
	for (seq = 0; seq < steps * PER_STEP; seq++) {
		if (seq / PER_STEP == at && seq % PER_STEP == 0)
			finish(srv, w, code, signo);
		if (nreq > 0 && seq % PER_STEP == 0)
			annotate(srv, w, seq, nreq);
		emit(srv, w, seq);
	}
	if (code || signo)
		finish(srv, w, code, signo);
	if (w)
		tm_writer_close(w);
	tm_server_stop(srv);
	return 0;
}
