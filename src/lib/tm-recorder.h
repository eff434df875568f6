/*
 * tm-recorder.h -- the bounded ring between a probe and a .tmrun writer.
 *
 * A probe (the PyTorch one loads this library through ctypes) hands events
 * over in batches of fixed-layout structs, so that Python fills them cheaply
 * (struct.pack_into, numpy structured arrays) and crosses into C once per
 * batch.  The recorder assigns seq numbers, computes stats of host tensors in
 * C (tm_stats_compute, without the GIL), copies the events into a ring of
 * fixed capacity and lets a writer thread drain the ring into a tm_writer.
 *
 * When the ring is full the recorder drops the event and, before the next
 * event that fits, emits a gap record {first_seq, last_seq, count,
 * BACKPRESSURE}: dropped events consume their seqs, so events and gaps
 * together cover every seq (ARCHITECTURE 6).  A lossless recorder blocks the
 * producer instead.
 *
 * Live debugging: tm_recorder_serve() attaches a tm_server, and from then
 * on the recorder feeds it everything (events, gaps, nodes, metadata) with
 * the seqs and ids of the trace, so the probe talks to one object.  A
 * recorder without a writer (tm_recorder_new(NULL), tm_recorder_open(NULL))
 * only numbers, computes stats, counts and forwards: `tmdb --args` without
 * a recording.
 *
 * Crashes: tm_recorder_crash_install() makes the fatal-signal handler write
 * what the ring and the producer's unsubmitted batch still hold before the
 * crash record (see there for what is guaranteed).
 */
#ifndef TM_RECORDER_H
#define TM_RECORDER_H

#include "tm-types.h"
#include "tm-tmrun.h"
#include "tm-server.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * One tensor of a batch, fixed layout (no implicit padding, 8-byte aligned,
 * 336 bytes) so that other languages can mirror it exactly.
 *
 * If data is not 0 it is the address of numel contiguous elements of dtype in
 * host memory: tm_recorder_stats() (or tm_recorder_submit(), for tensors whose
 * stats are still missing) computes the stats of `level` from it, and when
 * `capture` is set, submit copies its bytes into the ring as the payload.
 * Stats computed elsewhere (on a GPU) are passed in stat/have/hist directly.
 */
struct tm_rec_tensor {
	uint64_t data;                  /* host address, 0 if none */
	uint64_t numel;
	uint32_t have;                  /* TM_STAT_BIT()s present */
	uint16_t slot_index;
	uint16_t device_index;
	uint8_t slot_kind;              /* enum tm_slot_kind */
	uint8_t dtype;                  /* enum tm_dtype */
	uint8_t rank;
	uint8_t device_type;            /* 0 cpu, 1 cuda, 2 other */
	uint8_t level;                  /* stats level to compute from data */
	uint8_t capture;                /* 1: copy data as the payload */
	uint8_t have_hist;
	uint8_t done;                   /* set once stats were computed from data */
	/* what the probe writes per tensor ends with the shape: one short
	 * store; the stats below are filled by C or by device reductions */
	int64_t shape[TM_MAX_RANK];
	double stat[TM_STAT__COUNT];
	double hist_lo, hist_hi;
	uint32_t hist[TM_HIST_BINS];
};

/*
 * One event of a batch; its tensors are the next ntensors entries of the
 * batch's tensor array.  seq is assigned by the recorder.
 */
struct tm_rec_event {
	uint64_t step;
	uint64_t time_ns;
	uint64_t start_ns;
	uint64_t end_ns;
	uint32_t node;
	uint32_t call;
	uint16_t ntensors;
	uint16_t op_index;              /* TM_EV_OP: index in the call (saturates) */
	uint8_t kind;                   /* enum tm_event_kind */
	uint8_t phase;                  /* enum tm_phase */
	uint8_t level;
	uint8_t op_flags;               /* TM_EV_OP: enum tm_op_flags, else 0 */
};

/*
 * The producer's batch buffer as the crash handler sees it (24 bytes, fixed
 * layout): events and tensors are the addresses of its tm_rec_event[] and
 * tm_rec_tensor[] arrays, nev how many events are filled and not submitted
 * yet.  The producer stores nev after each event it fills (event and
 * tensors complete first) and sets it to 0 after tm_recorder_submit
 * returns; each event's tensors follow the previous event's in the tensor
 * array, starting at its first entry.
 */
struct tm_rec_batch {
	uint64_t events;
	uint64_t tensors;
	uint32_t nev;
	uint32_t reserved;
};

struct tm_recorder_opts {
	uint32_t ring_events;           /* events the ring holds (default 65536) */
	uint32_t ring_tensors;          /* tensor summaries it holds (default 4 * ring_events) */
	uint64_t ring_payload_bytes;    /* bytes of level-3 payloads (default 64 MiB) */
	int lossless;                   /* block the producer instead of dropping */
	int manual_drain;               /* no writer thread: tm_recorder_drain() does it */
	uint64_t drain_interval_ns;     /* writer thread drains this often (default 10 ms) */
};
void tm_recorder_opts_default(struct tm_recorder_opts *o);

typedef struct tm_recorder tm_recorder;

/* Counters for the caller's report (and tests). */
struct tm_recorder_stats {
	uint64_t next_seq;              /* seqs assigned so far */
	uint64_t events_written;
	uint64_t events_dropped;
	uint64_t gaps_written;
	uint64_t payload_bytes;         /* payload bytes written */
	int writer_err;                 /* first writer error, 0 if none */
};

/*
 * Takes ownership of w (closed by tm_recorder_close) and starts the writer
 * thread unless manual_drain.  opts may be NULL.  w NULL: a recorder that
 * writes nothing and keeps no ring (the ring options are ignored, nothing is
 * ever dropped); it assigns seqs and node ids, computes stats, counts
 * (next_seq; events_written stays 0) and forwards to a served server.
 */
int tm_recorder_new(tm_writer *w, const struct tm_recorder_opts *opts,
		    tm_recorder **out);
/* tm_writer_open(path) + tm_recorder_new; path NULL: no writer, as above. */
int tm_recorder_open(const char *path, const struct tm_recorder_opts *opts,
		     tm_recorder **out);

/*
 * Forwards to srv from now on (NULL: stop forwarding).  First the run
 * metadata and every node registered so far go to tm_server_meta /
 * tm_server_node, then every later node and the metadata as they come,
 * with the ids the writer assigns.  Every submitted event goes to
 * tm_server_event with its seq, its stats (as computed by submit) and its
 * payload (capture set: referenced in the caller's memory, not copied), in
 * seq order, on the submitting thread and outside the ring lock: a
 * breakpoint hit blocks the caller inside tm_recorder_submit until the
 * debugger resumes (that is the pause), while the writer thread keeps
 * draining, and other submitting threads wait for it.  Events the ring
 * dropped and tm_recorder_gap ranges reach the server as gaps, so the
 * debugger never sees a silent hole.  With no debugger subscribed the cost
 * per batch is one uncontended lock and one relaxed load.
 * srv must outlive forwarding: call tm_recorder_serve(r, NULL) before
 * tm_server_stop; it waits for a submit that is forwarding, so a model
 * thread paused at a breakpoint delays it until the debugger resumes or
 * leaves.
 */
int tm_recorder_serve(tm_recorder *r, tm_server *srv);

/* Run metadata and nodes go straight to the writer (before any event that
 * could refer to them, since the ring is drained after), and to a served
 * server. */
int tm_recorder_meta(tm_recorder *r, const struct tm_run_meta *m);
int tm_recorder_node(tm_recorder *r, const struct tm_node *n, uint32_t *id);
/* Scalar form for foreign callers: parent TM_NODE_NONE for a root. */
int tm_recorder_node2(tm_recorder *r, const char *address, const char *type,
		      const char *file, uint32_t line, uint32_t parent,
		      uint32_t depth, uint32_t kind, uint32_t *id);

/*
 * Computes the stats of n tensors from their data now (the caller's tensor
 * may change later: in-place ops).  Safe without the recorder's lock; r may
 * be NULL.  Tensors without data or with level 0 are left alone.
 */
int tm_recorder_stats(tm_recorder *r, struct tm_rec_tensor *t, size_t n);

/*
 * Hands over a batch: nev events whose tensors are t[0..nt) in order (the
 * sum of ntensors must equal nt).  Assigns consecutive seqs, the first in
 * *first_seq (may be NULL).  Events that do not fit are dropped (gap) or,
 * when lossless, waited for.  Returns TM_ERR_CLOSED after close,
 * TM_ERR_INVALID_ARG on a malformed batch (nothing is submitted then).
 */
int tm_recorder_submit(tm_recorder *r, const struct tm_rec_event *ev,
		       size_t nev, struct tm_rec_tensor *t, size_t nt,
		       uint64_t *first_seq);

/* Records a gap that the probe itself decided on (FILTERED, LEVEL), taking
 * count seqs; *first_seq gets the first. */
int tm_recorder_gap(tm_recorder *r, uint64_t count, uint32_t reason,
		    uint64_t step, uint64_t time_ns, uint64_t *first_seq);

/*
 * Annotates step (struct tm_annot; key "request": a serving probe's request
 * ids): written to the trace in stream order, after the events submitted
 * before this call and before those after it, and forwarded at once to a
 * served server, whose breakpoint conditions read it (TQL `request`).
 * values holds nvalues strings (at most TM_ANNOT_MAX_VALUES, each under
 * TM_ANNOT_MAX_VALUE bytes), count the step's true number (>= nvalues).
 * Annotations not yet written when the process dies are lost with it,
 * unless the fatal-signal handler can still write them with the ring.
 */
int tm_recorder_annotate(tm_recorder *r, uint64_t step, uint64_t time_ns,
			 const char *key, const char *const *values,
			 uint32_t nvalues, uint32_t count);

/* Writes what is in the ring now (manual_drain, or to force progress). */
int tm_recorder_drain(tm_recorder *r);
/* Waits until everything submitted so far is written, then flushes the chunk. */
int tm_recorder_flush(tm_recorder *r);
void tm_recorder_get_stats(tm_recorder *r, struct tm_recorder_stats *s);
/* Drains, writes the pending gap, closes the writer and frees r.  NULL-safe.
 * Returns the first error the writer met. */
int tm_recorder_close(tm_recorder *r);
const char *tm_recorder_detail(const tm_recorder *r);

/* The producer's batch buffer, for the crash handler (NULL: none).  b must
 * stay valid until it is replaced or the recorder is closed. */
int tm_recorder_watch_batch(tm_recorder *r, const struct tm_rec_batch *b);

/*
 * Installs the fatal-signal handler of tm_crash_install (tm-server.h) for
 * this recorder's writer, replacing any earlier install; tm_crash_uninstall
 * and tm_recorder_close undo it.  On SIGSEGV, SIGBUS, SIGFPE, SIGILL or
 * SIGABRT the handler writes, in this order:
 *   1. the ring's events and gaps not drained yet, and the pending gap;
 *   2. the watched batch's first nev events, with the next seqs (those
 *      a submit in progress on that same buffer already numbered are
 *      skipped); their tensors carry stats only where they were already
 *      computed (have or done set), else shapes only, and no payload;
 *   3. the crash record, at the position (seq, step, node, phase, time) of
 *      the last event submitted or written in 2, unless tm_crash_position
 *      was called after it (after the last submit, or, when batch events
 *      were written, with a later time_ns: compare times on one clock);
 * then flushes the open chunk (tm_writer_emergency_flush), sends the crash
 * record to a subscribed debugger of a served server (tm_server_crash), and
 * re-raises.  Best effort, bounded by a 5 s alarm: a ring lock held by
 * another thread for over 100 ms, or a writer thread busy for over 2 s,
 * skips step 1 (a crash inside submit on the same thread does not); a
 * crash inside the writer's own code or with a corrupt batch may lose
 * steps 1-3; events drained before the crash are in the file in any case.
 * Without a writer only the position and the debugger's copy remain.
 */
int tm_recorder_crash_install(tm_recorder *r);

/*
 * Flight mode (doc/manual.md, "Unattended runs"): a recorder that keeps the
 * events of the last `steps` complete steps, encoded, in memory -- at most
 * budget_bytes of them (default 64 MiB, level-3 payloads included) -- and
 * writes nothing until a trigger.  Then it writes path: the run metadata
 * (with flight.* pairs saying what the window held), the nodes, a gap of
 * reason TM_GAP_NOT_KEPT for every seq before the window, the kept steps
 * and the step in progress up to the triggering event; from then on it
 * records normally into that file.  A step that alone exceeds the budget
 * is kept as a NOT_KEPT gap over its seqs.  Triggers: a condition added
 * with tm_recorder_flight_trigger, evaluated on the writer thread as the
 * probe-side server evaluates breakpoints (so the model is not slowed, and
 * the dump follows the event by up to a drain interval); a call to
 * tm_recorder_flight_dump; a fatal signal, when the crash handler is
 * installed (the window, then the crash record); and rendezvous: a file
 * that the recorder creates at its dump (holding the reason) and polls
 * for every 20 ms, so that every process of a job given the same path
 * dumps when one does.  A recorder opened with tm_recorder_open and
 * served to a debugger goes into flight mode at the debugger's FLIGHT
 * request (set probe-flight N): nothing more is written until a trigger,
 * and the window then follows a NOT_KEPT gap in the same file, with the
 * flight.* pairs in a second META record; a dump (set probe-flight off)
 * ends it again.
 */
struct tm_flight_opts {
	uint32_t steps;                 /* complete steps kept, >= 1 */
	uint32_t reserved;
	uint64_t budget_bytes;          /* 0: 64 MiB */
	const char *path;               /* the .tmrun a trigger writes */
	const char *rendezvous;         /* NULL: none */
};
int tm_recorder_open_flight(const struct tm_recorder_opts *opts,
			    const struct tm_flight_opts *f, tm_recorder **out);
/* "ADDRESS if COND", "COND" (on model.**, as `break model.** if COND`) or
 * "ADDRESS"; a bad one: TM_ERR_TQL or TM_ERR_ADDRESS/INVALID_ARG with the
 * message in tm_recorder_detail. */
int tm_recorder_flight_trigger(tm_recorder *r, const char *text);
/* Writes the window now (after what was submitted so far); a no-op once
 * the window was written.  step: the producer's step now (UINT64_MAX:
 * unknown), so that a dump between two steps keeps N complete steps and
 * not N + 1.  TM_ERR_UNSUPPORTED if r is not in flight mode. */
int tm_recorder_flight_dump(tm_recorder *r, const char *reason, uint64_t step);
struct tm_flight_info {
	uint32_t steps;                 /* configured */
	uint32_t steps_held;            /* complete steps in the window */
	uint32_t dumps;                 /* 0 until the window was written */
	uint32_t reserved;
	uint64_t first_step;
	uint64_t steps_dropped;         /* complete steps let go (age, budget) */
	uint64_t steps_over;            /* steps over the budget by themselves */
	uint64_t bytes;                 /* encoded bytes held (at the dump) */
	uint64_t budget;
	uint64_t not_kept;              /* seqs before the window */
	char reason[200];               /* what triggered the dump */
};
int tm_recorder_flight_info(tm_recorder *r, struct tm_flight_info *out);
/*
 * Closes r when the process exits, not now: a recorder in flight mode
 * (its window not written since it last came on) then learns the exit
 * status (on_exit), and a status other than 0 triggers ("exit status N", step as for
 * tm_recorder_flight_dump) before the close, as sys.exit(N) does.  That
 * catches what no hook of the program sees: a bare `raise SystemExit(N)`
 * reaching the interpreter's top level.  The caller must not use r again.
 * TM_ERR_UNSUPPORTED (r untouched: close it) where the C library has no
 * on_exit, for a recorder not in flight mode, or when another recorder
 * waits already.
 */
int tm_recorder_close_at_exit(tm_recorder *r, uint64_t step);
/* A word that counts dumps (0 until one), for a probe to poll cheaply;
 * NULL if not in flight mode. */
const uint32_t *tm_recorder_flight_word(tm_recorder *r);

#ifdef __cplusplus
}
#endif
#endif /* TM_RECORDER_H */
