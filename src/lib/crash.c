/*
 * crash.c -- the fatal-signal handler: "Program received signal SIGSEGV at
 * step 120 in model.layers.3.attn", with a native backtrace, in the trace.
 *
 * When the probed process dies of SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGABRT
 * (a CUDA extension dereferencing garbage, an assert in a kernel launcher),
 * the handler writes one CRASH record into the .tmrun writer -- the signal,
 * the model's position that the hook path keeps in a few atomics, and the
 * native stack from libunwind -- flushes the open chunk with the writer's
 * lock-free emergency path, puts the default action back and re-raises, so
 * the process dies of its own signal as it would have without us.
 *
 * Installed through a recorder (tm_recorder_crash_install), the handler
 * first has the recorder write what its ring and the producer's pending
 * batch still hold (tm_recorder__crash), so the trace ends with the events
 * leading up to the crash, then writes the crash record at the last of
 * them, and pushes it to a subscribed debugger too.
 *
 * Signal handlers get no user argument, so the writer, the recorder and the
 * position are the library's only process-wide state (set by install).
 * The handler runs on an alternate stack (a stack overflow is a SIGSEGV
 * too) and avoids what is not async-signal-safe where it can: frames are
 * formatted by hand into static buffers, the unwinder uses its local-only
 * mode.  Two things remain best effort: tm_writer_crash takes the writer's
 * lock and may grow a buffer (an alarm bounds the wait if the crashing
 * thread itself held that lock), and symbol lookup reads the ELF tables.
 */
#include "config.h"

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tm-internal.h"
#include "tm-server.h"

#define ALT_STACK_SIZE (256u << 10)
#define FRAME_TEXT 160
#define WATCHDOG_S 5

static const int fatal_signals[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT };
#define NSIG_FATAL ((int)TM_ARRAY_LEN(fatal_signals))

/* Where the model is: written by the hook path, read by the handler. */
static _Atomic uint64_t pos_seq, pos_step, pos_time;
static _Atomic uint32_t pos_node = TM_NODE_NONE;
static _Atomic uint8_t pos_phase;
static _Atomic uint64_t pos_gen;        /* tm_crash_position calls */

static _Atomic(tm_writer *) crash_writer;
static _Atomic(struct tm_recorder *) crash_recorder;
static struct sigaction old_actions[NSIG_FATAL];
static void *alt_stack;
static stack_t old_alt;
static int installed;
static atomic_int in_handler;

/* Preallocated: the handler must not allocate to describe its own stack. */
static char frame_text[TM_MAX_FRAMES][FRAME_TEXT];

void tm_crash_position(uint64_t seq, uint64_t step, uint32_t node, uint8_t phase,
		       uint64_t time_ns)
{
	atomic_store_explicit(&pos_seq, seq, memory_order_relaxed);
	atomic_store_explicit(&pos_step, step, memory_order_relaxed);
	atomic_store_explicit(&pos_node, node, memory_order_relaxed);
	atomic_store_explicit(&pos_phase, phase, memory_order_relaxed);
	atomic_store_explicit(&pos_time, time_ns, memory_order_relaxed);
	atomic_fetch_add_explicit(&pos_gen, 1, memory_order_relaxed);
}

uint64_t tm_crash__gen(void)
{
	return atomic_load_explicit(&pos_gen, memory_order_relaxed);
}

/* Appends s to buf (bounded); snprintf is not async-signal-safe. */
static size_t put_s(char *buf, size_t at, const char *s)
{
	while (*s && at + 1 < FRAME_TEXT)
		buf[at++] = *s++;
	buf[at] = 0;
	return at;
}

static size_t put_hex(char *buf, size_t at, uint64_t v, int width)
{
	char tmp[17];
	int n = 0;

	do {
		tmp[n++] = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v || n < width);
	at = put_s(buf, at, "0x");
	while (n > 0 && at + 1 < FRAME_TEXT)
		buf[at++] = tmp[--n];
	buf[at] = 0;
	return at;
}

/* frame n: "0x00007f12... in sym+0x2a" (no symbol: the address alone). */
static void frame_format(unw_cursor_t *cur, uint32_t n, unw_word_t ip)
{
	unw_word_t off;
	char name[96];
	size_t at = put_hex(frame_text[n], 0, ip, 16);

	if (unw_get_proc_name(cur, name, sizeof(name), &off) == 0) {
		at = put_s(frame_text[n], at, " in ");
		at = put_s(frame_text[n], at, name);
		at = put_s(frame_text[n], at, "+");
		put_hex(frame_text[n], at, off, 1);
	}
}

/*
 * The native stack of the interrupted code, innermost first.  Where the
 * kernel's ucontext is libunwind's context (x86-64, AArch64), the walk
 * starts at the faulting instruction itself; elsewhere it starts in the
 * handler and skips frames up to the signal trampoline.
 */
static uint32_t backtrace_frames(void *uctx)
{
	unw_context_t ctx;
	unw_cursor_t cur;
	unw_word_t ip;
	uint32_t n = 0;
	int guard = 0;

#if defined(__x86_64__) || defined(__aarch64__)
	if (uctx && unw_init_local2(&cur, (unw_context_t *)uctx,
				    UNW_INIT_SIGNAL_FRAME) == 0) {
		do {
			if (unw_get_reg(&cur, UNW_REG_IP, &ip) || !ip)
				break;
			frame_format(&cur, n++, ip);
		} while (n < TM_MAX_FRAMES && guard++ < 256 && unw_step(&cur) > 0);
		return n;
	}
#else
	(void)uctx;
#endif
	if (unw_getcontext(&ctx) || unw_init_local(&cur, &ctx))
		return 0;
	while (guard++ < 256 && unw_step(&cur) > 0)
		if (unw_is_signal_frame(&cur) > 0)
			break;
	while (n < TM_MAX_FRAMES && guard++ < 256 && unw_step(&cur) > 0) {
		if (unw_get_reg(&cur, UNW_REG_IP, &ip) || !ip)
			break;
		frame_format(&cur, n++, ip);
	}
	return n;
}

static void reraise(int signo)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	sigemptyset(&sa.sa_mask);
	sigaction(signo, &sa, NULL);
	/* Delivered when the handler returns (signo is blocked in it); a
	 * faulting instruction would fault again anyway. */
	raise(signo);
}

static void on_fatal(int signo, siginfo_t *si, void *uctx)
{
	tm_writer *w = atomic_load(&crash_writer);
	struct tm_recorder *rec = atomic_load(&crash_recorder);
	struct tm_server *srv = NULL;
	struct tm_crash c;
	uint64_t gen;
	uint32_t i;

	(void)si;
	/* A crash while recording a crash: just die. */
	if (atomic_exchange(&in_handler, 1) || (!w && !rec)) {
		reraise(signo);
		return;
	}
	/* If this thread held the writer's lock, tm_writer_crash would wait
	 * forever; the default SIGALRM action ends that. */
	alarm(WATCHDOG_S);
	memset(&c, 0, sizeof(c));
	c.signo = signo;
	c.seq = atomic_load_explicit(&pos_seq, memory_order_relaxed);
	c.step = atomic_load_explicit(&pos_step, memory_order_relaxed);
	c.node = atomic_load_explicit(&pos_node, memory_order_relaxed);
	c.phase = atomic_load_explicit(&pos_phase, memory_order_relaxed);
	c.time_ns = atomic_load_explicit(&pos_time, memory_order_relaxed);
	gen = atomic_load_explicit(&pos_gen, memory_order_relaxed);
	c.nframes = backtrace_frames(uctx);
	for (i = 0; i < c.nframes; i++)
		c.frames[i] = frame_text[i];
	if (rec)
		srv = tm_recorder__crash(rec, &c, gen != 0, gen);
	/* flight mode: the window was written just now, to a new writer */
	if (rec && !w)
		w = tm_recorder__writer(rec);
	if (w && tm_writer_crash(w, &c) == TM_OK)
		tm_writer_emergency_flush(w);
	/* The file first: it is what outlives the process. */
	if (srv)
		tm_server_crash(srv, &c);
	alarm(0);
	reraise(signo);
}

int tm_crash__install(struct tm_writer *w, struct tm_recorder *r)
{
	struct sigaction sa;
	stack_t ss;
	int i;

	if (!w && !r)
		return TM_ERR_INVALID_ARG;
	atomic_store(&crash_writer, w);
	atomic_store(&crash_recorder, r);
	if (installed)
		return TM_OK;
	alt_stack = malloc(ALT_STACK_SIZE);
	if (!alt_stack)
		return TM_ERR_NOMEM;
	ss.ss_sp = alt_stack;
	ss.ss_size = ALT_STACK_SIZE;
	ss.ss_flags = 0;
	if (sigaltstack(&ss, &old_alt)) {
		free(alt_stack);
		alt_stack = NULL;
		return TM_ERR_IO;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_fatal;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < NSIG_FATAL; i++)
		sigaction(fatal_signals[i], &sa, &old_actions[i]);
	atomic_store(&in_handler, 0);
	installed = 1;
	return TM_OK;
}

int tm_crash_install(tm_writer *w)
{
	if (!w)
		return TM_ERR_INVALID_ARG;
	return tm_crash__install(w, NULL);
}

void tm_crash__forget(const struct tm_recorder *r)
{
	if (r && installed && atomic_load(&crash_recorder) == r)
		tm_crash_uninstall();
}

void tm_crash_uninstall(void)
{
	int i;

	if (!installed)
		return;
	for (i = 0; i < NSIG_FATAL; i++)
		sigaction(fatal_signals[i], &old_actions[i], NULL);
	/* Only the calling thread's alternate stack is ours to take back. */
	sigaltstack(&old_alt, NULL);
	free(alt_stack);
	alt_stack = NULL;
	atomic_store(&crash_writer, NULL);
	atomic_store(&crash_recorder, NULL);
	installed = 0;
}
