/*
 * live.h -- debugging a live process: the live RuntimeProbe
 * (probe-remote.c) that `attach` and `run` use, and the program tmdb
 * launches itself (inferior.c, cmd-live.c).
 */
#ifndef TMDB_LIVE_H
#define TMDB_LIVE_H

#include <stdint.h>

#include "probe.h"

struct tm_session;
struct cmd_entry;

/*
 * Connects to a probe's wire server: target is a socket path, or a pid whose
 * socket is found in the private socket directory (tm_server_socket_path).
 * Handshakes, subscribes to every event and pauses the model at its next
 * event.  On failure returns the tm_err code and a malloc'd message in
 * *detail.
 */
/* The same for TCP targets (tcp://HOST:PORT or HOST:PORT) with a token
 * (NULL: $TENSORMORPH_TOKEN, else the probe's token file on this host). */
int tm_probe_remote_open_token(const char *target, const char *token,
			       struct tm_probe **out, char **detail);
/* What the probe said at HELLO besides DESCRIBE ("took over from ..."). */
const char *tm_probe_remote_note(struct tm_probe *p);
int tm_probe_remote_open(const char *target, struct tm_probe **out,
			 char **detail);
/*
 * A flight-mode probe that had written its window when tmdb attached
 * (doc/manual.md, "Unattended runs"): the window, read from the trace the
 * probe named in DESCRIBE, is the start of the history.  Returns the
 * number of records taken from it (0: none), with the seq of the window's
 * last record (the triggering event of a TQL trigger), the trigger's
 * reason and the trace's path (valid while p is).
 */
size_t tm_probe_remote_window(struct tm_probe *p, uint64_t *end_seq, const char **reason,
			      const char **trace);

/*
 * A live process or job's own questions (struct tm_probe_process_ops),
 * asked of any probe: a replay answers 0, 1 (closed), NULL.
 */
uint32_t tm_probe_pid(struct tm_probe *p);
int tm_probe_closed(struct tm_probe *p);
const char *tm_probe_end_note(struct tm_probe *p);
const char *tm_probe_process(struct tm_probe *p);
/* Asks a live program to end with its recording whole (wire KILL). */
void tm_probe_kill(struct tm_probe *p);
const char *tm_probe_recording(struct tm_probe *p, uint64_t *events, const char **note);

/* 1 for a live process or job (remote, or multi-rank over remotes). */
int tm_probe_is_live(struct tm_probe *p);
/*
 * hold 1: reading forward ends where the history does, and the model is
 * not resumed (find over what has arrived); 0: as before.  Returns 0 when
 * p cannot hold (a replay, a multi-rank job).
 */
int tm_probe_hold(struct tm_probe *p, int hold);

/*
 * One rank among several (probe-multi.c): the history so far and record i
 * of it (valid until the next call), the socket to poll, reading what is
 * there, letting a paused model take its next step (or run ahead: 1 if it
 * was resumed), and pausing a running one.
 */
size_t tm_probe_remote_count(struct tm_probe *p);
int tm_probe_remote_peek(struct tm_probe *p, size_t i, struct tm_record *rec);
int tm_probe_remote_fd(struct tm_probe *p);
int tm_probe_remote_pump(struct tm_probe *p, int timeout_ms);
int tm_probe_remote_go(struct tm_probe *p);
/* 1 while the model is paused (after reading what the probe sent). */
int tm_probe_remote_paused(struct tm_probe *p);
void tm_probe_remote_interrupt(struct tm_probe *p);

/* ------------------------------------------------------------- the program (inferior.c) */

/*
 * The program `run` starts (GDB's inferior): its path and argument string,
 * the child's pid while it lives, and the live settings.  Owned by the
 * session (s->live), created on first use.
 */
struct tm_live {
	char *prog;             /* as the user named it */
	char *args;             /* "set args": shell words, NULL: none */
	long pid;               /* the child, 0: none */
	struct tm_probe *probe; /* the probe run attached to it, while loaded */
	int lockstep;           /* set lockstep on: no running ahead */
	int non_stop;           /* set non-stop on: a stop pauses its rank only */
	int level;              /* set probe-level N, -1: the probe's own */
	char *ops;              /* set probe-ops PATTERN, NULL: the probe's own */
	char *tty;              /* -inferior-tty-set: its stdin/out/err, NULL: ours */
	int stdin_null;         /* stdin from /dev/null (MI reads ours) */
	unsigned runs;          /* programs started, for the socket name */
	char sock[108];         /* the socket the probe is asked to listen on */
};

struct tm_live *tm_live_get(struct tm_session *s);
/* Sets the program (file PROG, tmdb --args PROG ARGS...); args may be NULL. */
int tm_live_set_program(struct tm_session *s, const char *prog, const char *args);
/* 1 if path names a program rather than a trace: not *.tmrun, executable. */
int tm_live_is_program(const char *path);
/*
 * Starts the program and waits for its probe's socket (DIR/PID.sock);
 * returns the connected probe, or -1 after saying why.
 */
int tm_inferior_start(struct tm_session *s, struct tm_probe **out);
/* Kills the child (its process group) and reaps it; says "[Process N killed]"
 * when verbose. */
void tm_inferior_kill(struct tm_session *s, int verbose);
/*
 * The child closed its connection or crashed: waits up to ms (Ctrl-C ends
 * the wait) for it to exit and says how it ended, GDB's way; quiet: say
 * nothing if it does not end by then.
 */
void tm_inferior_reap(struct tm_session *s, int ms, int quiet);
/* Frees s->live, killing a child still running (tmdb quits). */
void tm_live_free(struct tm_session *s);

/* ------------------------------------------------------------- hooks (cmd-live.c) */

/* `file PATH`: sets the program when PATH is one; returns 1 if handled. */
int tm_live_file(struct tm_session *s, const char *path, int *rc);
/* set/show args, lockstep, probe-level; returns 1 if handled. */
int tm_live_setting(struct tm_session *s, const char *args, int show, int *rc);
/* set/show environment, inferior-tty, breakpoint pending, mi-async
 * (cmd-front.c); returns 1 if handled. */
int tm_front_setting(struct tm_session *s, const char *args, int show, int *rc);
/* The program's terminal (tty, -tty, -inferior-tty-set); "" or NULL: ours. */
int tm_front_set_tty(struct tm_session *s, const char *path);
/* `run` with a program set: (re)starts it; 1 if handled. */
int tm_live_run(struct tm_session *s, const char *args, int from_tty, int *rc);
/* Before (ahead 1) and after (ahead 0) a forward scan: tm_probe_ops.flow. */
void tm_live_flow(struct tm_session *s, int ahead);
/*
 * After a stop at the end of the history (crashed 0) or at a crash record
 * (1): a program run started is reaped and its end reported; an attached
 * process's closed connection is reported once.
 */
void tm_live_ended(struct tm_session *s, int crashed);

#endif /* TMDB_LIVE_H */
