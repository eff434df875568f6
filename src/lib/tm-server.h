/*
 * tm-server.h -- the live side of a probe: the wire server a debugger
 * attaches to (doc/wire.md section 2) and the fatal-signal handler that
 * records a crash into the trace (ARCHITECTURE 10, 11).
 *
 * The server is a thread in the probed process listening on a Unix socket
 * named by pid in a private (0700) directory.  The probe's hook path calls
 * tm_server_event() for every event: it is forwarded to the attached
 * debugger, and the debugger's breakpoints are evaluated there, with the
 * same TQL VM tmdb uses.  On a hit the calling (model) thread blocks until
 * the debugger resumes it, or until the debugger goes away: the model never
 * hangs because the debugger died.  A breakpoint whose address matches no
 * node yet is kept pending and binds as nodes arrive (tm_server_node).
 *
 * A tm_recorder can feed the server itself (tm_recorder_serve): then the
 * probe only submits batches, and the recorder forwards every event, gap,
 * node and the run metadata here with the seqs and ids of the trace.
 */
#ifndef TM_SERVER_H
#define TM_SERVER_H

#include <sys/types.h>

#include "tm-types.h"
#include "tm-tmrun.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------- server */

struct tm_server_opts {
	const char *path;           /* socket path; NULL: tm_server_socket_path(getpid()) */
	const char *probe_kind;     /* DESCRIBE name: "pytorch", "synthetic" */
	const char *trace;          /* .tmrun being written, for DESCRIBE; may be NULL */
	uint8_t max_level;          /* deepest level the probe offers (default 3) */
	uint32_t caps;              /* tm_wire_caps; 0: pause | level | capture */
	size_t max_queue;           /* bytes queued for a slow client before events
				     * are dropped (as BACKPRESSURE gaps); default 8 MiB */
	uint32_t max_frame;         /* cap on a client frame (default 64 KiB) */
	/*
	 * How a stop (breakpoint, step, interrupt) holds the model.  no_pause
	 * 1: record and notify -- the debugger gets the STOP and every event,
	 * but the model never waits (TM_CAP_PAUSE is not offered): for a server
	 * that must keep answering.  Else pause_ms 0: until the debugger
	 * resumes it; N: at most N ms, then the model resumes by itself.
	 */
	uint8_t no_pause;
	uint32_t pause_ms;
	/* A connection that has not sent HELLO after hello_ms is closed
	 * (default 3000); an attached debugger that has sent nothing for
	 * takeover_ms may be replaced by a new one (default 10000). */
	uint32_t hello_ms;
	uint32_t takeover_ms;
};
void tm_server_opts_default(struct tm_server_opts *o);

typedef struct tm_server tm_server;

/*
 * The directory live sockets go in: $XDG_RUNTIME_DIR/tensormorph, else
 * /tmp/tensormorph-UID.  With create, it is made (0700) when missing.
 * Either way it must be a real directory owned by this user with no group
 * or other permissions, or TM_ERR_IO is returned (someone else could
 * otherwise plant or read the socket).
 */
int tm_server_socket_dir(char *buf, size_t len, int create);
/* DIR/PID.sock for a process (tmdb attach PID); checks DIR as above. */
int tm_server_socket_path(pid_t pid, char *buf, size_t len);
/*
 * The socket rank R of a distributed job listens on when every rank was
 * given the same path (tmdb --args torchrun ...): "dbg.sock" ->
 * "dbg.rank1.sock", "dbg" -> "dbg.rank1".  TM_ERR_TOO_LARGE if len is too
 * small, TM_ERR_INVALID_ARG for a negative rank.
 */
int tm_server_rank_path(const char *path, int32_t rank, char *buf, size_t len);

/*
 * Binds the socket and starts the server thread.  opts may be NULL.
 * opts->path may name TCP instead: "tcp://HOST:PORT" ("tcp://:PORT" and
 * "HOST:PORT" too; HOST defaults to 127.0.0.1, PORT 0 picks one).  Then a
 * random token is made and written to DIR/tcp-PORT.token (0600, DIR as
 * below); every HELLO must carry it (doc/wire.md 2.5).  A Unix socket path
 * that exists is reused only when it is a stale socket of ours (nobody
 * listens); anything else there is left alone and the start fails.
 */
int tm_server_start(const struct tm_server_opts *opts, tm_server **out);
/* Why this thread's last tm_server_start failed, naming the path or the
 * directory and the problem ("" after a success). */
const char *tm_server_start_error(void);
/* 1 if spec names TCP (host and port filled in), 0 if a socket path, -1
 * if it is a malformed TCP spec. */
int tm_server_parse_tcp(const char *spec, char *host, size_t hlen, unsigned *port);
/* The TCP token and the file it was written to ("" for a Unix socket). */
const char *tm_server_token(const tm_server *srv);
const char *tm_server_token_path(const tm_server *srv);
/*
 * Stops the thread, says BYE to a client, removes the socket, frees.  A model
 * thread paused in tm_server_event is released and waited for; calling
 * tm_server_event after (or during) stop is the caller's bug.  NULL-safe.
 */
void tm_server_stop(tm_server *srv);
const char *tm_server_path(const tm_server *srv);
/*
 * Drops the attached debugger as if it had gone away: its breakpoints and
 * requests are forgotten and a paused model resumes; the socket stays open
 * for the next one (a serving probe's pause timeout).  NULL-safe.
 */
void tm_server_drop(tm_server *srv);
/*
 * FLIGHT requests (doc/wire.md) go to fn, set by a recorder with a ring
 * or a file that serves this server (tm_recorder_serve): called on the server's
 * thread without its lock with op (enum tm_flight_op), steps and reason;
 * it returns a tm_err and may write a text for the RESULT into detail.
 * DESCRIBE offers TM_CAP_FLIGHT while one is set; a request that
 * succeeds bumps the state word's counter (the probe may have to install
 * its own triggers).  *dumps (NULL: none), read at each DESCRIBE, counts
 * the windows written: while it is not 0 DESCRIBE offers TM_CAP_WINDOW
 * too, and a debugger reads the trace's window as history.  fn NULL removes it,
 * waiting for a call in progress.
 */
typedef int (*tm_server_flight_fn)(void *user, int op, uint32_t steps,
				   const char *reason, char *detail, size_t len);
void tm_server_flight_handler(tm_server *srv, tm_server_flight_fn fn, void *user,
			      const uint32_t *dumps);
/*
 * A stop is a stop: an INTERRUPT that finds the model between events (in
 * the loss, the backward's untracked part, the optimizer, logging) calls
 * fn(user) on the server's thread, with the server's lock held: fn must
 * only ask the program to call tm_server_hold soon, on the thread that
 * runs the model (the PyTorch probe's C path: Py_AddPendingCall, which
 * Python runs at its next bytecode).  The model also stops at its next
 * event, whichever comes first.  fn NULL removes it.
 */
typedef void (*tm_server_pause_fn)(void *user);
void tm_server_pause_handler(tm_server *srv, tm_server_pause_fn fn, void *user);
/*
 * Holds the calling thread where it is, as a stop right after the last
 * event sent (STOP reason STEP with that event's seq), until RESUME or
 * the debugger leaves -- if an INTERRUPT asked for it and no stop at an
 * event came first.  TM_OK when it held, TM_ERR_NOT_FOUND when nothing
 * was asked (a late call after the model stopped at an event anyway).
 * Call it without locks of the probe's own held.
 */
int tm_server_hold(tm_server *srv);
/* Last error text (for a failed start, use the code). */
const char *tm_server_detail(const tm_server *srv);

/*
 * Blocks the caller until a debugger has sent HELLO and SUBSCRIBE, for at
 * most timeout_ms (< 0: forever).  On success the model stops at its very
 * next tm_server_event (the first one the debugger is sent), exactly as if
 * the debugger had sent INTERRUPT: the stop is armed under the same lock as
 * the subscription, so no event slips past it.  That is how `tmdb --args
 * python train.py` gets the model paused before its first module event, so
 * breakpoints set before `run` apply from the start.  If a debugger is
 * already subscribed, the stop is armed and this returns at once.  A
 * debugger that subscribes while nobody waits gets no such stop.
 * Returns TM_OK, TM_ERR_AGAIN when the time ran out, TM_ERR_CLOSED when the
 * server is stopping (tm_server_stop wakes the waiter and waits for it).
 */
int tm_server_wait_client(tm_server *srv, int timeout_ms);

/*
 * The fast-path state word, valid until tm_server_stop: bit 0 is set while
 * a debugger is subscribed; bits 1..31 are a counter (wrapping) bumped
 * whenever the debugger's level requests (SET_LEVEL) or capture requests
 * (CAPTURE, and a capture satisfied by an event) change, including when
 * they are cleared because the debugger left.  A probe reads it on every
 * event with a relaxed load (Python: ctypes.c_uint32.from_address) and
 * calls tm_server_level / tm_server_wants_capture only when the word
 * differs from what it saw last; a change is seen on some later read, not
 * necessarily at once.  Never NULL for a started server.
 */
const uint32_t *tm_server_state(const tm_server *srv);

/* Run metadata and nodes: kept, and sent to every client that subscribes.
 * Nodes must be added with dense ids (as the writer assigns them); a node
 * whose id is already known is refused (TM_ERR_CORRUPT) and changes nothing. */
int tm_server_meta(tm_server *srv, const struct tm_run_meta *m);
int tm_server_node(tm_server *srv, const struct tm_node *n);

/*
 * The hook path: forwards ev to the subscribed client and evaluates its
 * breakpoints (and a pending step/next/finish).  On a hit it sends STOP and
 * blocks the calling thread until RESUME, DETACH or disconnection.  With no
 * client it is one atomic load.  Returns TM_OK, or TM_ERR_INVALID_ARG.
 */
int tm_server_event(tm_server *srv, const struct tm_event *ev);
/* A gap the probe recorded: forwarded like an event. */
int tm_server_gap(tm_server *srv, const struct tm_gap *g);
/*
 * Whether the debugger sent KILL: the process is to end.  Once set,
 * tm_server_event neither stops nor sends; the recorder feeding the
 * server finishes its trace and the process dies of SIGKILL
 * (tm_recorder_submit).
 */
int tm_server_killed(tm_server *srv);
/*
 * An annotation of a step (tm_recorder_annotate calls it): forwarded like
 * an event, and kept, the latest of each key (at most 8 keys), for the
 * breakpoint conditions (TQL `request` holds at the events of its step)
 * and for a debugger that subscribes later.
 */
int tm_server_annot(tm_server *srv, const struct tm_annot *a);
/*
 * For a fatal-signal handler: queues a crash record for a subscribed
 * debugger and makes one non-blocking send.  Best effort: the server lock is
 * only tried for about 100 ms (TM_ERR_AGAIN then), bytes the socket does not
 * take at once are lost with the process.  With no subscribed debugger it
 * does nothing.
 */
int tm_server_crash(tm_server *srv, const struct tm_crash *c);

/* Level the client asked for this node (SET_LEVEL), or -1: the probe's own. */
int tm_server_level(tm_server *srv, uint32_t node);
/* The op patterns the debugger set (SET_OPS) into buf, comma-separated, ""
 * for none: returns 1; 0 when it set none (the probe's own apply). */
int tm_server_ops(tm_server *srv, char *buf, size_t len);
/* 1 if the client asked for a full capture of a tensor of this node. */
int tm_server_wants_capture(tm_server *srv, uint32_t node);
/* 1 if the client asked to re-run the compiled region the model is in
 * (RESUME rerun): the events until this call do not stop, the next one does
 * (the re-run's first, or the next event when the probe cannot re-run).
 * 0 otherwise.  The probe calls it where a compiled region ends. */
int tm_server_rerun(tm_server *srv);

/* Counters, for tests and the probe's report. */
struct tm_server_stats {
	int connected;              /* a client is attached */
	int subscribed;
	int stopped;                /* the model thread is paused */
	uint64_t clients;           /* connections accepted so far */
	uint64_t events_sent;
	uint64_t events_dropped;    /* queue full: sent as BACKPRESSURE gaps */
	uint64_t stops;
	uint64_t bad_frames;        /* connections dropped for bad input */
	uint32_t breakpoints;
	uint64_t timed_out;         /* stops that pause_ms ended */
};
void tm_server_get_stats(tm_server *srv, struct tm_server_stats *st);

/* ------------------------------------------------------------- fatal signals */

/*
 * Where the model is: the probe's hook path stores it for every event (a few
 * relaxed atomic stores, no lock, no syscall), and the fatal-signal handler
 * reads it to say "at step 120 in model.layers.3.attn".  One position per
 * process: the handler has no way to find a per-thread one of another
 * thread, and the thread that runs the model is the one that crashes.
 */
void tm_crash_position(uint64_t seq, uint64_t step, uint32_t node, uint8_t phase,
		       uint64_t time_ns);

/*
 * Installs handlers for SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT on an
 * alternate stack.  On a fatal signal the handler records a crash record
 * (signal, current position, native backtrace through libunwind) into w,
 * flushes the open chunk with tm_writer_emergency_flush, restores the default
 * action and re-raises, so the process still dies of its signal (exit status
 * and core dump as without us).  One writer per process: a second install
 * replaces the first.  w must stay valid until tm_crash_uninstall().
 * sigaltstack is per thread: the alternate stack (needed to report a stack
 * overflow) is set up for the calling thread, so call this from the thread
 * that runs the model; other threads' crashes are recorded on their own
 * stacks.  Events still in a tm_recorder ring are not drained (the writer
 * has what was drained before the crash): tm_recorder_crash_install
 * (tm-recorder.h) installs this same handler for a recorder, which writes
 * them, and the producer's unsubmitted batch, before the crash record.
 */
int tm_crash_install(tm_writer *w);
/* Restores the previous handlers (whichever install set them); no-op if
 * not installed. */
void tm_crash_uninstall(void);

#ifdef __cplusplus
}
#endif
#endif /* TM_SERVER_H */
