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
 */
#ifndef TM_RECORDER_H
#define TM_RECORDER_H

#include "tm-types.h"
#include "tm-tmrun.h"

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
	uint32_t ntensors;
	uint8_t kind;                   /* enum tm_event_kind */
	uint8_t phase;                  /* enum tm_phase */
	uint8_t level;
	uint8_t reserved;
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
 * thread unless manual_drain.  opts may be NULL.
 */
int tm_recorder_new(tm_writer *w, const struct tm_recorder_opts *opts,
		    tm_recorder **out);
/* tm_writer_open(path) + tm_recorder_new. */
int tm_recorder_open(const char *path, const struct tm_recorder_opts *opts,
		     tm_recorder **out);

/* Run metadata and nodes go straight to the writer (before any event that
 * could refer to them, since the ring is drained after). */
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

/* Writes what is in the ring now (manual_drain, or to force progress). */
int tm_recorder_drain(tm_recorder *r);
/* Waits until everything submitted so far is written, then flushes the chunk. */
int tm_recorder_flush(tm_recorder *r);
void tm_recorder_get_stats(tm_recorder *r, struct tm_recorder_stats *s);
/* Drains, writes the pending gap, closes the writer and frees r.  NULL-safe.
 * Returns the first error the writer met. */
int tm_recorder_close(tm_recorder *r);
const char *tm_recorder_detail(const tm_recorder *r);

#ifdef __cplusplus
}
#endif
#endif /* TM_RECORDER_H */
