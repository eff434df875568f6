/*
 * test_crash.c -- the fatal-signal handler (tm_crash_install): a child
 * process records a few events, says where it is, and writes through a
 * wild pointer.  It must still die of SIGSEGV, and its trace -- never
 * closed, so read by scanning -- must hold the events and then a crash
 * record with the signal, the position and a native backtrace that names
 * the function that crashed.
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
		{ NULL, NULL }
	};

	return tm_test_run("crash", cases);
}
