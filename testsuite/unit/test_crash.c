/*
 * test_crash.c -- the fatal-signal handler (tm_crash_install): a child
 * process records a few events, says where it is, and writes through a
 * wild pointer.  It must still die of SIGSEGV, and its trace -- never
 * closed, so read by scanning -- must hold the events and then a crash
 * record with the signal, the position and a native backtrace that names
 * the function that crashed.
 *
 * Through a recorder (tm_recorder_crash_install), as the Python probe uses
 * it: the newest events are still in the ring and in the producer's
 * unsubmitted batch when the process dies, and the trace must end with all
 * of them, numbered on, and a crash record at the last one.
 */
#include "config.h"

#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tensormorph.h"
#include "tm-recorder.h"
#include "tm-test.h"

#define NEV 5

static char path[64];

/* Not static-inlined away: the backtrace must show it. */
void tm_test_crash_here(volatile uintptr_t addr);
__attribute__((noinline)) void tm_test_crash_here(volatile uintptr_t addr)
{
	/* Not a null pointer, so UBSan's null check does not get there first. */
	*(volatile int *)addr = 42;
}

static void child(int how)
{
	struct rlimit rl = { 0, 0 };
	struct tm_node n;
	struct tm_event ev;
	tm_writer *w;
	uint32_t id;
	uint64_t i;

	setrlimit(RLIMIT_CORE, &rl);
	if (tm_writer_open(path, NULL, &w))
		_exit(2);
	memset(&n, 0, sizeof(n));
	n.parent = TM_NODE_NONE;
	n.address = "model";
	n.type = "Net";
	tm_writer_node(w, &n, &id);
	n.parent = id;
	n.depth = 1;
	n.address = "model.attn";
	n.type = "Attention";
	tm_writer_node(w, &n, &id);
	if (tm_crash_install(w))
		_exit(3);
	for (i = 0; i < NEV; i++) {
		memset(&ev, 0, sizeof(ev));
		ev.seq = i;
		ev.step = 7;
		ev.node = id;
		ev.call = 1;
		ev.kind = i & 1 ? TM_EV_EXIT : TM_EV_ENTER;
		ev.time_ns = 1000 * (i + 1);
		tm_writer_event(w, &ev);
		tm_crash_position(ev.seq, ev.step, ev.node, ev.phase, ev.time_ns);
	}
	if (how == SIGABRT)
		abort();
	tm_test_crash_here(16);
	_exit(0);
}

/* Forks a child that dies of how; returns the signal it died of. */
static int run_child(int how)
{
	pid_t pid;
	int status = 0;

	snprintf(path, sizeof(path), "/tmp/tm-test-crash-%ld.tmrun", (long)getpid());
	fflush(NULL);
	pid = fork();
	if (pid == 0)
		child(how);
	CU_ASSERT_FATAL(pid > 0);
	CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
	CU_ASSERT(WIFSIGNALED(status));
	return WIFSIGNALED(status) ? WTERMSIG(status) : -1;
}

static void check_trace(int signo, int want_function)
{
	tm_reader *r = NULL;
	struct tm_record rec;
	char *detail = NULL;
	int events = 0, crashes = 0, named = 0;
	uint32_t i;

	CU_ASSERT_EQUAL_FATAL(tm_reader_open(path, 0, &r, &detail), TM_OK);
	CU_ASSERT_FALSE(tm_reader_summary(r)->complete);
	while (tm_reader_next(r, &rec) == TM_OK) {
		if (rec.type == TM_REC_EVENT) {
			CU_ASSERT_EQUAL(crashes, 0);    /* frames come after events */
			events++;
			continue;
		}
		if (rec.type != TM_REC_CRASH)
			continue;
		crashes++;
		CU_ASSERT_EQUAL(rec.u.crash.signo, signo);
		CU_ASSERT_EQUAL(rec.u.crash.seq, NEV - 1);
		CU_ASSERT_EQUAL(rec.u.crash.step, 7);
		CU_ASSERT_EQUAL(rec.u.crash.node, 1);
		CU_ASSERT(rec.u.crash.nframes >= 2);
		for (i = 0; i < rec.u.crash.nframes; i++) {
			CU_ASSERT_NSTRING_EQUAL(rec.u.crash.frames[i], "0x", 2);
			if (strstr(rec.u.crash.frames[i], want_function ?
				   "tm_test_crash_here" : "abort"))
				named = 1;
		}
		if (!named)
			for (i = 0; i < rec.u.crash.nframes; i++)
				fprintf(stderr, "  #%u %s\n", i, rec.u.crash.frames[i]);
	}
	CU_ASSERT_EQUAL(events, NEV);
	CU_ASSERT_EQUAL(crashes, 1);
	CU_ASSERT(named);
	tm_reader_close(r);
	free(detail);
	unlink(path);
}

static void test_segv(void)
{
	CU_ASSERT_EQUAL(run_child(SIGSEGV), SIGSEGV);
	check_trace(SIGSEGV, 1);
}

static void test_abort(void)
{
	CU_ASSERT_EQUAL(run_child(SIGABRT), SIGABRT);
	check_trace(SIGABRT, 0);
}

/* ------------------------------------------------------------- through a recorder */

enum { BATCH_PLAIN, BATCH_POSITION, BATCH_IN_STATS, BATCH_IN_COPY };

/* The probe's batch buffer, watched by the handler. */
static struct tm_rec_event bev[8];
static struct tm_rec_tensor bt[8];
static struct tm_rec_batch batch;
static float ones[6] = { 1, 1, 1, 1, 1, 1 };

/* Fills the next event of the batch as the probe does: event and tensor
 * first, then nev. */
static void fill(uint64_t step, uint32_t node, int kind, uint64_t data, int level)
{
	uint32_t i = batch.nev;

	memset(&bev[i], 0, sizeof(bev[i]));
	memset(&bt[i], 0, sizeof(bt[i]));
	bev[i].step = step;
	bev[i].node = node;
	bev[i].call = 1;
	bev[i].kind = (uint8_t)kind;
	bev[i].time_ns = 1000 * (step * 10 + i + 1);
	bev[i].ntensors = 1;
	bt[i].slot_kind = kind == TM_EV_ENTER ? TM_SLOT_IN : TM_SLOT_OUT;
	bt[i].dtype = TM_DT_F32;
	bt[i].rank = 2;
	bt[i].shape[0] = 2;
	bt[i].shape[1] = 3;
	bt[i].numel = 6;
	bt[i].level = (uint8_t)level;
	bt[i].data = data;
	batch.nev = i + 1;
}

static void submit_batch(tm_recorder *r)
{
	tm_recorder_submit(r, bev, batch.nev, bt, batch.nev, NULL);
	batch.nev = 0;
}

static void batch_child(int how)
{
	struct rlimit rl = { 0, 0 };
	struct tm_recorder_opts o;
	tm_recorder *r = NULL;
	uint32_t id;

	setrlimit(RLIMIT_CORE, &rl);
	tm_recorder_opts_default(&o);
	o.manual_drain = 1;     /* the ring keeps what is not drained by hand */
	o.ring_events = 64;
	if (tm_recorder_open(path, &o, &r))
		_exit(2);
	tm_recorder_node2(r, "model", "Net", NULL, 0, TM_NODE_NONE, 0, TM_NODE_MODULE, &id);
	tm_recorder_node2(r, "model.attn", "Attention", NULL, 0, 0, 1, TM_NODE_MODULE, &id);
	batch.events = (uint64_t)(uintptr_t)bev;
	batch.tensors = (uint64_t)(uintptr_t)bt;
	if (tm_recorder_watch_batch(r, &batch) || tm_recorder_crash_install(r))
		_exit(3);
	/* step 7: three events drained into the writer, three left in the ring */
	fill(7, 0, TM_EV_ENTER, (uint64_t)(uintptr_t)ones, 1);
	fill(7, 1, TM_EV_ENTER, (uint64_t)(uintptr_t)ones, 1);
	fill(7, 1, TM_EV_EXIT, (uint64_t)(uintptr_t)ones, 1);
	submit_batch(r);
	tm_recorder_drain(r);
	fill(7, 0, TM_EV_EXIT, (uint64_t)(uintptr_t)ones, 1);
	fill(8, 0, TM_EV_ENTER, (uint64_t)(uintptr_t)ones, 1);
	fill(8, 1, TM_EV_ENTER, (uint64_t)(uintptr_t)ones, 1);
	submit_batch(r);
	switch (how) {
	case BATCH_PLAIN:
	case BATCH_POSITION:
		/* step 8 goes on in the batch: stats computed for one
		 * tensor (on a device, say), not for the next */
		fill(8, 1, TM_EV_EXIT, 0, 0);
		bt[0].have = TM_STAT_BIT(TM_STAT_MAX);
		bt[0].stat[TM_STAT_MAX] = 42;
		fill(8, 0, TM_EV_EXIT, (uint64_t)(uintptr_t)ones, 1);
		if (how == BATCH_POSITION)
			tm_crash_position(999, 8, 1, TM_PHASE_BWD, 1000000);
		tm_test_crash_here(16);
		break;
	case BATCH_IN_STATS:
		/* the stats of a bad pointer, computed in submit */
		fill(8, 1, TM_EV_EXIT, (uint64_t)(uintptr_t)ones, 1);
		fill(8, 0, TM_EV_EXIT, 16, 1);
		submit_batch(r);
		break;
	case BATCH_IN_COPY:
		/* copying a bad pointer into the ring: the crash is inside
		 * submit, with the ring lock held by the crashing thread */
		fill(8, 1, TM_EV_EXIT, (uint64_t)(uintptr_t)ones, 0);
		fill(8, 0, TM_EV_EXIT, 16, 0);
		bt[1].capture = 1;
		submit_batch(r);
		break;
	}
	_exit(0);
}

/*
 * The trace: 8 events numbered 0..7 in order (3 drained, 3 from the ring,
 * 2 from the batch) and then a crash record where the model was.
 */
static void check_batch_trace(int how)
{
	tm_reader *r = NULL;
	struct tm_record rec;
	int events = 0, crashes = 0;

	CU_ASSERT_EQUAL_FATAL(tm_reader_open(path, 0, &r, NULL), TM_OK);
	while (tm_reader_next(r, &rec) == TM_OK) {
		if (rec.type == TM_REC_EVENT) {
			const struct tm_event *e = &rec.u.event;

			CU_ASSERT_EQUAL(crashes, 0);
			CU_ASSERT_EQUAL(e->seq, (uint64_t)events);
			CU_ASSERT_EQUAL(e->step, events < 4 ? 7u : 8u);
			CU_ASSERT_EQUAL_FATAL(e->ntensors, 1);
			CU_ASSERT_EQUAL(e->tensors[0].rank, 2);
			CU_ASSERT_EQUAL(e->tensors[0].shape[1], 3);
			if (events < 6 && how != BATCH_IN_COPY) {
				CU_ASSERT(e->tensors[0].have & TM_STAT_BIT(TM_STAT_MAX));
				CU_ASSERT_EQUAL(e->tensors[0].stat[TM_STAT_MAX], 1.0);
			}
			if (events == 6 && how == BATCH_PLAIN) {
				CU_ASSERT_EQUAL(e->tensors[0].have, TM_STAT_BIT(TM_STAT_MAX));
				CU_ASSERT_EQUAL(e->tensors[0].stat[TM_STAT_MAX], 42.0);
			}
			if (events == 6 && how == BATCH_IN_STATS)
				CU_ASSERT_EQUAL(e->tensors[0].stat[TM_STAT_MAX], 1.0);
			/* the tensor that crashed has no stats, only its shape */
			if (events == 7) {
				CU_ASSERT_EQUAL(e->tensors[0].have, 0);
				CU_ASSERT_PTR_NULL(e->tensors[0].payload);
			}
			events++;
			continue;
		}
		if (rec.type != TM_REC_CRASH)
			continue;
		crashes++;
		CU_ASSERT_EQUAL(rec.u.crash.signo, SIGSEGV);
		if (how == BATCH_POSITION) {
			CU_ASSERT_EQUAL(rec.u.crash.seq, 999);
			CU_ASSERT_EQUAL(rec.u.crash.node, 1);
			CU_ASSERT_EQUAL(rec.u.crash.phase, TM_PHASE_BWD);
		} else {
			CU_ASSERT_EQUAL(rec.u.crash.seq, 7);
			CU_ASSERT_EQUAL(rec.u.crash.step, 8);
			CU_ASSERT_EQUAL(rec.u.crash.node, 0);
			CU_ASSERT_EQUAL(rec.u.crash.time_ns, bev[1].time_ns);
		}
	}
	CU_ASSERT_EQUAL(events, 8);
	CU_ASSERT_EQUAL(crashes, 1);
	tm_reader_close(r);
	unlink(path);
}

static void run_batch_child(int how)
{
	pid_t pid;
	int status = 0;

	snprintf(path, sizeof(path), "/tmp/tm-test-crash-%ld.tmrun", (long)getpid());
	/* the parent's copy of the batch says what the last event's time is */
	batch.nev = 0;
	fill(8, 1, TM_EV_EXIT, 0, 0);
	fill(8, 0, TM_EV_EXIT, 0, 0);
	batch.nev = 0;
	fflush(NULL);
	pid = fork();
	if (pid == 0)
		batch_child(how);
	CU_ASSERT_FATAL(pid > 0);
	CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
	CU_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV);
	check_batch_trace(how);
}

static void test_batch(void)
{
	run_batch_child(BATCH_PLAIN);
}

static void test_batch_position(void)
{
	run_batch_child(BATCH_POSITION);
}

static void test_batch_crash_in_stats(void)
{
	run_batch_child(BATCH_IN_STATS);
}

static void test_batch_crash_in_copy(void)
{
	run_batch_child(BATCH_IN_COPY);
}

static void test_install_args(void)
{
	CU_ASSERT_EQUAL(tm_crash_install(NULL), TM_ERR_INVALID_ARG);
	tm_crash_uninstall();   /* not installed: no-op */
}

int main(void)
{
	static const struct tm_test_case cases[] = {
		TM_TEST(test_segv),
		TM_TEST(test_abort),
		TM_TEST(test_install_args),
		TM_TEST(test_batch),
		TM_TEST(test_batch_position),
		TM_TEST(test_batch_crash_in_stats),
		TM_TEST(test_batch_crash_in_copy),
		{ NULL, NULL }
	};

	return tm_test_run("crash", cases);
}
