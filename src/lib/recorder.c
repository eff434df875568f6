/*
 * recorder.c -- the bounded ring with gap accounting (ARCHITECTURE 1 and 6).
 *
 * A probe submits batches of fixed-layout events (tm-recorder.h); the
 * recorder numbers them, copies them into three circular stores -- event
 * slots, tensor summaries and payload bytes, each released in FIFO order --
 * and a writer thread drains them into a tm_writer.  The producer holds the
 * ring lock only while copying a batch in; the consumer holds it only to
 * read and to move the tail, and writes with the lock released, so a slow
 * disk never stalls the producer beyond the point where the ring is full.
 * Then the producer drops (counting the lost seqs into one pending gap that
 * is written just before the next event that fits) or, lossless, waits.
 *
 * Node and metadata records bypass the ring: they go to the writer at once,
 * under the writer lock, so they always precede the events naming them.
 *
 * With a live server attached (tm_recorder_serve) every batch is also
 * forwarded to tm_server_event, on the submitting thread, after its events
 * are in the ring and with the ring lock released: a breakpoint hit blocks
 * the submitter there while the writer thread keeps draining.  A third lock
 * (flock) is held across a whole submit so that concurrent submitters
 * forward in seq order.  Without a writer the recorder keeps no ring at all
 * and only numbers, counts and forwards.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tm-flight.h"
#include "tm-internal.h"
#include "tm-recorder.h"
#include "tm-server.h"
#include "tm-stats.h"
#include "tm-wire.h"

_Static_assert(sizeof(struct tm_rec_tensor) == 336, "tm_rec_tensor layout is ABI");
_Static_assert(sizeof(struct tm_rec_event) == 48, "tm_rec_event layout is ABI");

_Static_assert(sizeof(struct tm_rec_batch) == 24, "tm_rec_batch layout is ABI");

enum { SLOT_EVENT = 0, SLOT_GAP = 1 };

/* Events forwarded per ring-lock hold while a debugger is subscribed. */
#define FWD_CHUNK 64
/* Batches the crash handler believes (a garbage nev must not run forever). */
#define CRASH_MAX_BATCH (1u << 22)

/* What the consumer needs besides the tm_event itself to release a slot. */
struct slot {
	uint8_t type;
	uint32_t tused;         /* tensor units taken, padding included */
	uint64_t pused;         /* payload bytes taken, padding included */
	struct tm_gap gap;
};

struct tm_recorder {
	tm_writer *w;                   /* NULL: no file (no ring unless flight) */
	int ring;                       /* a ring and a writer thread: w or fl */
	/* flight mode (flight.c): the writer thread encodes into fl until a
	 * trigger opens w on fl_path; fl_word counts the dumps (the probe
	 * reads it) */
	struct tm_flight *fl;
	int fl_on;                      /* records go into fl, not w (w may be
					 * open: set probe-flight on a recording) */
	char *fl_path, *fl_mark;
	uint64_t fl_poll_at;
	uint32_t fl_word;
	uint32_t fl_steps;
	uint64_t fl_budget;
	struct tm_flight_window fl_win;
	char fl_reason[200];
	int crash_on;
	struct tm_recorder_opts o;

	pthread_mutex_t flock;          /* a whole submit: forwarding order */
	pthread_mutex_t lock;           /* the ring and the counters */
	pthread_cond_t not_empty;       /* producer -> consumer */
	pthread_cond_t not_full;        /* consumer -> lossless producers */
	pthread_cond_t drained;         /* consumer -> flush/close */
	pthread_mutex_t wlock;          /* the writer (consumer vs nodes/meta),
					 * nodes, meta_enc and setting srv */
	pthread_t thread;
	int have_thread;
	int stop;
	int closed;

	/* event slots: evs[i] and slots[i], i = counter % ring_events */
	struct tm_event *evs;
	struct slot *slots;
	uint64_t head, tail;
	/* tensor store */
	struct tm_tensor *tens;
	uint64_t thead, ttail;
	/* payload store */
	uint8_t *pay;
	uint64_t phead, ptail;

	uint64_t next_seq;
	/* the pending gap: dropped seqs not yet written as a gap record */
	uint64_t gap_first, gap_count, gap_step, gap_time;
	uint32_t gap_reason;

	struct tm_recorder_stats st;
	char detail[256];

	/* Annotations wait here, encoded, until the writer reaches the ring
	 * position (head) they were made at: a file keeps them in stream
	 * order, which seeking by step relies on.  alock is a leaf lock. */
	pthread_mutex_t alock;
	struct pending_annot *annq;
	size_t annq_first, annq_len, annq_cap;
	int crashing;                   /* the fatal-signal handler writes */

	/* live forwarding (tm_recorder_serve) */
	_Atomic(tm_server *) srv;
	tm_nodetab *nodes;              /* what the writer has, with its ids */
	struct tm_buf meta_enc;         /* the run metadata, encoded */
	struct tm_tensor *fwd_tens;     /* TM_MAX_TENSORS, under flock */

	/* for the fatal-signal handler (read there without locks) */
	_Atomic(const struct tm_rec_batch *) batch;
	const struct tm_rec_event *cur_ev;  /* batch being submitted (flock) */
	size_t cur_done;                /* its events that got a seq (lock) */
	_Atomic int lock_owned;         /* lock held by lock_owner in submit */
	pthread_t lock_owner;
	uint64_t written_to;            /* slots written by write_range (wlock) */
	struct tm_tensor *crash_tens;   /* TM_MAX_TENSORS, preallocated */
	/* the model's last position: the last event submitted (lock) */
	int have_last;
	uint64_t last_seq, last_step, last_time, last_gen;
	uint32_t last_node;
	uint8_t last_phase;
};

struct pending_annot {
	uint64_t at;                    /* written before ring slot counter at */
	struct tm_buf rec;
};

void tm_recorder_opts_default(struct tm_recorder_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->ring_events = 65536;
	o->ring_tensors = 0;            /* 4 * ring_events */
	o->ring_payload_bytes = UINT64_C(64) << 20;
	o->drain_interval_ns = UINT64_C(10000000);
}

static void set_detail(tm_recorder *r, const char *what, int err)
{
	const char *wd = r->w ? tm_writer_detail(r->w) : NULL;

	snprintf(r->detail, sizeof(r->detail), "%s: %s%s%s", what,
		 tm_strerror(err), wd && *wd ? ": " : "", wd ? wd : "");
}

/*
 * Circular allocation of k contiguous units from a store of cap units whose
 * used region is [tail, head) (monotonic counters).  A run that would wrap
 * skips to the start, and the skipped units count as used until released,
 * so that FIFO release stays a single subtraction.  Returns 0 and sets
 * *start (an index) and *used, or -1 when it does not fit now.
 */
static int ring_alloc(uint64_t cap, uint64_t *head, uint64_t *tail, uint64_t k,
		      uint64_t *start, uint64_t *used)
{
	uint64_t pos, pad;

	if (k == 0) {
		*start = 0;
		*used = 0;
		return 0;
	}
	/* An empty store restarts at index 0, so anything up to cap fits. */
	if (*head == *tail && *head % cap) {
		*head += cap - *head % cap;
		*tail = *head;
	}
	pos = *head % cap;
	pad = pos + k > cap ? cap - pos : 0;
	if (pad + k > cap - (*head - *tail))
		return -1;
	*start = (pos + pad) % cap;
	*used = pad + k;
	return 0;
}

/* Saturates instead of wrapping: a huge numel must read as "never fits",
 * not as a small size that memcpy would then overrun. */
static uint64_t payload_len(const struct tm_rec_tensor *t)
{
	uint64_t esz;

	if (!t->capture || !t->data)
		return 0;
	esz = tm_dtype_size(t->dtype);
	if (esz && t->numel > UINT64_MAX / esz)
		return UINT64_MAX;
	return t->numel * esz;
}

/* Rounded to 8 so that payloads stay aligned for readers that cast them. */
static uint64_t payload_units(uint64_t len)
{
	return (len + 7) & ~UINT64_C(7);
}

/* Puts the pending gap into a free slot; the caller checked there is one. */
static void push_gap(tm_recorder *r)
{
	uint64_t i = r->head % r->o.ring_events;
	struct slot *s = &r->slots[i];

	s->type = SLOT_GAP;
	s->tused = 0;
	s->pused = 0;
	s->gap.first_seq = r->gap_first;
	s->gap.last_seq = r->gap_first + r->gap_count - 1;
	s->gap.count = r->gap_count;
	s->gap.reason = r->gap_reason;
	s->gap.step = r->gap_step;
	s->gap.time_ns = r->gap_time;
	r->gap_count = 0;
	r->gap_reason = 0;
	r->head++;
}

static void add_to_gap(tm_recorder *r, uint64_t seq, uint64_t count,
		       uint32_t reason, uint64_t step, uint64_t time_ns)
{
	if (r->gap_count == 0) {
		r->gap_first = seq;
		r->gap_step = step;
		r->gap_time = time_ns;
	}
	r->gap_count += count;
	r->gap_reason |= reason;
	if (reason & TM_GAP_BACKPRESSURE)
		r->st.events_dropped += count;
}

/*
 * The one conversion from the batch layout to the event model.  With plen,
 * the payload is copied into copy_to (the ring) or, without copy_to,
 * referenced in place (forwarding, while the caller's tensor is alive).
 */
static void fill_tensor(struct tm_tensor *d, const struct tm_rec_tensor *s,
			uint8_t *copy_to, uint64_t plen)
{
	memset(d, 0, sizeof(*d));
	d->slot.kind = s->slot_kind;
	d->slot.index = s->slot_index;
	d->dtype = s->dtype;
	d->rank = s->rank;
	d->device_type = s->device_type;
	d->device_index = s->device_index;
	memcpy(d->shape, s->shape, sizeof(d->shape));
	d->have = s->have;
	memcpy(d->stat, s->stat, sizeof(d->stat));
	d->have_hist = s->have_hist;
	if (s->have_hist) {
		d->hist_lo = s->hist_lo;
		d->hist_hi = s->hist_hi;
		memcpy(d->hist, s->hist, sizeof(d->hist));
	}
	if (plen && copy_to) {
		memcpy(copy_to, (const void *)(uintptr_t)s->data, plen);
		d->payload = copy_to;
		d->payload_len = plen;
	} else if (plen) {
		d->payload = (const void *)(uintptr_t)s->data;
		d->payload_len = plen;
	}
}

static void fill_event(struct tm_event *d, const struct tm_rec_event *s,
		       uint64_t seq, struct tm_tensor *tens)
{
	d->seq = seq;
	d->step = s->step;
	d->phase = s->phase;
	d->kind = s->kind;
	d->level = s->level;
	d->node = s->node;
	d->call = s->call;
	d->time_ns = s->time_ns;
	d->start_ns = s->start_ns;
	d->end_ns = s->end_ns;
	d->ntensors = s->ntensors;
	d->tensors = s->ntensors ? tens : NULL;
	d->op_index = s->kind == TM_EV_OP ? s->op_index : 0;
	d->op_flags = s->kind == TM_EV_OP ? (uint8_t)(s->op_flags & TM_OPF__ALL) : 0;
}

/*
 * Tries to put one event (and the pending gap before it) into the ring.
 * Returns 0 when stored, 1 when it does not fit now, 2 when it never can.
 */
static int try_push(tm_recorder *r, const struct tm_rec_event *e,
		    const struct tm_rec_tensor *t, uint64_t seq)
{
	uint64_t need = r->gap_count ? 2 : 1;
	uint64_t plen_total = 0, tstart, tused, pstart = 0, pused = 0, i, off;
	struct tm_event *ev;
	struct slot *s;

	/* Summed against the ring size as we go, so neither the rounding nor
	 * the sum can wrap; more than the ring never fits: stats only. */
	for (i = 0; i < e->ntensors; i++) {
		uint64_t len = payload_len(&t[i]);

		if (len > r->o.ring_payload_bytes ||
		    payload_units(len) > r->o.ring_payload_bytes - plen_total) {
			plen_total = 0;
			break;
		}
		plen_total += payload_units(len);
	}
	if (e->ntensors > r->o.ring_tensors || need > r->o.ring_events)
		return 2;
	if (r->head - r->tail + need > r->o.ring_events)
		return 1;
	/* An empty ring restarts at slot 0, as the tensor store does
	 * (ring_alloc): the writer drains every few steps, and each step's
	 * events then land on the same few pages, still in cache, instead of
	 * first-touching new ones (page faults) on a pass over the whole
	 * ring.  Annotations wait for positions at or below the old head:
	 * they still go before these events. */
	if (r->head == r->tail && r->head % r->o.ring_events) {
		r->head += r->o.ring_events - r->head % r->o.ring_events;
		r->tail = r->head;
	}
	if (ring_alloc(r->o.ring_tensors, &r->thead, &r->ttail, e->ntensors,
		       &tstart, &tused))
		return 1;
	if (plen_total && ring_alloc(r->o.ring_payload_bytes, &r->phead,
				     &r->ptail, plen_total, &pstart, &pused))
		return 1;

	if (r->gap_count)
		push_gap(r);
	i = r->head % r->o.ring_events;
	s = &r->slots[i];
	ev = &r->evs[i];
	s->type = SLOT_EVENT;
	s->tused = (uint32_t)tused;
	s->pused = pused;
	fill_event(ev, e, seq, &r->tens[tstart]);
	off = 0;
	for (i = 0; i < e->ntensors; i++) {
		uint64_t len = plen_total ? payload_len(&t[i]) : 0;
		uint8_t *p = len ? r->pay + pstart + off : NULL;

		fill_tensor(&r->tens[tstart + i], &t[i], p, len);
		off += payload_units(len);
		r->st.payload_bytes += len;
	}
	r->thead += tused;
	r->phead += pused;
	r->head++;
	return 0;
}

int tm_recorder_stats(tm_recorder *r, struct tm_rec_tensor *t, size_t n)
{
	size_t i;

	TM_UNUSED(r);
	if (!t && n)
		return TM_ERR_INVALID_ARG;
	for (i = 0; i < n; i++) {
		struct tm_tensor tmp;

		/* (an empty tensor has no address, and its counts) */
		if ((!t[i].data && t[i].numel) || !t[i].level || t[i].done)
			continue;
		memset(&tmp, 0, sizeof(tmp));
		t[i].done = 1;
		/* An unreadable dtype (complex) stays without stats: a level
		 * gap, never zeros. */
		if (tm_stats_compute(&tmp, (const void *)(uintptr_t)t[i].data,
				     t[i].numel, t[i].dtype, t[i].level) != TM_OK)
			continue;
		t[i].have |= tmp.have;
		memcpy(t[i].stat, tmp.stat, sizeof(t[i].stat));
		if (tmp.have_hist) {
			t[i].have_hist = tmp.have_hist;
			t[i].hist_lo = tmp.hist_lo;
			t[i].hist_hi = tmp.hist_hi;
			memcpy(t[i].hist, tmp.hist, sizeof(t[i].hist));
		}
	}
	return TM_OK;
}

static int check_batch(const struct tm_rec_event *ev, size_t nev,
		       const struct tm_rec_tensor *t, size_t nt)
{
	size_t i, sum = 0;

	if ((!ev && nev) || (!t && nt))
		return TM_ERR_INVALID_ARG;
	for (i = 0; i < nev; i++) {
		if (ev[i].ntensors > TM_MAX_TENSORS || ev[i].kind >= TM_EV__COUNT ||
		    ev[i].phase > TM_PHASE_BWD)
			return TM_ERR_INVALID_ARG;
		sum += ev[i].ntensors;
	}
	if (sum != nt)
		return TM_ERR_INVALID_ARG;
	for (i = 0; i < nt; i++)
		if (t[i].rank > TM_MAX_RANK || t[i].slot_kind >= TM_SLOT__COUNT ||
		    t[i].dtype >= TM_DT__COUNT)
			return TM_ERR_INVALID_ARG;
	return TM_OK;
}

/* The ring lock, as submit takes it: the crash handler must know when the
 * thread it runs on is the one holding it. */
static void lock_ring(tm_recorder *r)
{
	pthread_mutex_lock(&r->lock);
	r->lock_owner = pthread_self();
	atomic_store_explicit(&r->lock_owned, 1, memory_order_relaxed);
}

static void unlock_ring(tm_recorder *r)
{
	atomic_store_explicit(&r->lock_owned, 0, memory_order_relaxed);
	pthread_mutex_unlock(&r->lock);
}

static int serving(tm_server *srv)
{
	return srv && (__atomic_load_n(tm_server_state(srv), __ATOMIC_RELAXED) & 1u);
}

/*
 * Numbers n events and puts them into the ring (dropping or waiting when it
 * is full); ring lock held.  dropped[i], when given, says which of them the
 * ring lost.  Returns 1 when the writer thread should be woken.
 */
static int push_events(tm_recorder *r, const struct tm_rec_event *ev, size_t n,
		       const struct tm_rec_tensor *t, uint8_t *dropped)
{
	size_t i, ti = 0;
	int pushed = 0;

	for (i = 0; i < n; i++) {
		uint64_t seq = r->next_seq;
		int rc = 0;

		while (r->ring) {
			rc = try_push(r, &ev[i], t + ti, seq);
			if (rc != 1 || !r->o.lossless || r->closed)
				break;
			if (!r->have_thread) {
				/* Manual drain: the producer is the consumer. */
				unlock_ring(r);
				tm_recorder_drain(r);
				lock_ring(r);
				continue;
			}
			/* Lossless: let the consumer see what we have
			 * pushed, then wait for room. */
			pthread_cond_signal(&r->not_empty);
			atomic_store_explicit(&r->lock_owned, 0, memory_order_relaxed);
			pthread_cond_wait(&r->not_full, &r->lock);
			r->lock_owner = pthread_self();
			atomic_store_explicit(&r->lock_owned, 1, memory_order_relaxed);
		}
		if (rc == 0)
			pushed = 1;
		else
			add_to_gap(r, seq, 1, TM_GAP_BACKPRESSURE, ev[i].step,
				   ev[i].time_ns);
		if (dropped)
			dropped[i] = rc != 0;
		/* Only now: a crash inside try_push (a bad data pointer) leaves
		 * this event to the handler, with this seq. */
		r->next_seq++;
		r->cur_done++;
		ti += ev[i].ntensors;
	}
	if (n) {
		const struct tm_rec_event *e = &ev[n - 1];

		r->have_last = 1;
		r->last_seq = r->next_seq - 1;
		r->last_step = e->step;
		r->last_node = e->node;
		r->last_phase = e->phase;
		r->last_time = e->time_ns;
		r->last_gen = tm_crash__gen();
	}
	if (!r->ring)
		return 0;
	/* The writer thread wakes on its own every drain_interval; waking it
	 * per batch would cost two context switches per step on a busy
	 * machine.  Only a ring a quarter full calls it early. */
	return pushed && ((r->head - r->tail) * 4 >= r->o.ring_events ||
			  (r->thead - r->ttail) * 4 >= r->o.ring_tensors ||
			  (r->phead - r->ptail) * 4 >= r->o.ring_payload_bytes);
}

/*
 * Hands n events numbered from seq to the server, the ring's losses as
 * BACKPRESSURE gaps; flock held, ring lock not (a breakpoint blocks here).
 */
static void forward(tm_recorder *r, tm_server *srv, const struct tm_rec_event *ev,
		    size_t n, const struct tm_rec_tensor *t, uint64_t seq,
		    const uint8_t *dropped)
{
	struct tm_event e;
	struct tm_gap g;
	size_t i;
	uint32_t j;
	int have_gap = 0;

	for (i = 0; i < n; i++, seq++) {
		if (dropped[i]) {
			if (!have_gap) {
				memset(&g, 0, sizeof(g));
				g.first_seq = seq;
				g.reason = TM_GAP_BACKPRESSURE;
				g.step = ev[i].step;
				g.time_ns = ev[i].time_ns;
				have_gap = 1;
			}
			g.last_seq = seq;
			g.count++;
			t += ev[i].ntensors;
			continue;
		}
		if (have_gap) {
			tm_server_gap(srv, &g);
			have_gap = 0;
		}
		for (j = 0; j < ev[i].ntensors; j++) {
			uint64_t plen = payload_len(&t[j]);

			fill_tensor(&r->fwd_tens[j], &t[j], NULL,
				    plen == UINT64_MAX ? 0 : plen);
		}
		fill_event(&e, &ev[i], seq, r->fwd_tens);
		tm_server_event(srv, &e);
		t += ev[i].ntensors;
	}
	if (have_gap)
		tm_server_gap(srv, &g);
}

/*
 * The debugger killed the program (wire KILL): the model thread, which
 * was paused in this submit or has just sent an event, finishes the trace
 * -- the ring written out, index and trailer -- and the process dies of
 * SIGKILL as it would have without us, before any more of the model runs.
 * r is left allocated: other threads may still hold it for an instant.
 */
static int finish(tm_recorder *r);

static void die_killed(tm_recorder *r)
{
	tm_crash__forget(r);
	finish(r);
	fflush(NULL);
	raise(SIGKILL);
	_exit(128 + SIGKILL);
}

int tm_recorder_submit(tm_recorder *r, const struct tm_rec_event *ev,
		       size_t nev, struct tm_rec_tensor *t, size_t nt,
		       uint64_t *first_seq)
{
	uint8_t dropped[FWD_CHUNK];
	size_t i = 0, k, ti = 0;
	tm_server *srv;
	int err;

	if (!r)
		return TM_ERR_INVALID_ARG;
	err = check_batch(ev, nev, t, nt);
	if (err)
		return err;
	/* Stats the caller left to us are computed before taking the lock. */
	tm_recorder_stats(r, t, nt);

	pthread_mutex_lock(&r->flock);
	srv = atomic_load_explicit(&r->srv, memory_order_relaxed);
	lock_ring(r);
	if (r->closed) {
		unlock_ring(r);
		pthread_mutex_unlock(&r->flock);
		return TM_ERR_CLOSED;
	}
	if (first_seq)
		*first_seq = r->next_seq;
	r->cur_ev = ev;
	r->cur_done = 0;
	for (;;) {
		/* With nobody subscribed the whole batch goes in at once;
		 * with a debugger, in chunks forwarded between lock holds. */
		int fwd = serving(srv);
		size_t n = fwd && nev - i > FWD_CHUNK ? FWD_CHUNK : nev - i;
		uint64_t base = r->next_seq;
		int wake = push_events(r, ev + i, n, t + ti, fwd ? dropped : NULL);

		unlock_ring(r);
		if (wake)
			pthread_cond_signal(&r->not_empty);
		if (fwd)
			forward(r, srv, ev + i, n, t + ti, base, dropped);
		for (k = 0; k < n; k++)
			ti += ev[i + k].ntensors;
		i += n;
		if (i >= nev)
			break;
		lock_ring(r);
	}
	r->cur_ev = NULL;
	pthread_mutex_unlock(&r->flock);
	if (srv && tm_server_killed(srv))
		die_killed(r);
	return TM_OK;
}

/*
 * For a record that takes its place between two submits (a gap, an
 * annotation): flock, then the ring lock, and the server being fed.
 * TM_ERR_CLOSED, with neither held, after close.
 */
static int lock_between_submits(tm_recorder *r, tm_server **srv)
{
	pthread_mutex_lock(&r->flock);
	*srv = atomic_load_explicit(&r->srv, memory_order_relaxed);
	pthread_mutex_lock(&r->lock);
	if (r->closed) {
		pthread_mutex_unlock(&r->lock);
		pthread_mutex_unlock(&r->flock);
		return TM_ERR_CLOSED;
	}
	return TM_OK;
}

int tm_recorder_gap(tm_recorder *r, uint64_t count, uint32_t reason,
		    uint64_t step, uint64_t time_ns, uint64_t *first_seq)
{
	struct tm_gap g;
	tm_server *srv;

	if (!r || !count || !reason || (reason & ~(uint32_t)TM_GAP__ALL) ||
	    count > UINT64_MAX / 2)
		return TM_ERR_INVALID_ARG;
	if (lock_between_submits(r, &srv))
		return TM_ERR_CLOSED;
	if (first_seq)
		*first_seq = r->next_seq;
	memset(&g, 0, sizeof(g));
	g.first_seq = r->next_seq;
	g.last_seq = r->next_seq + count - 1;
	g.count = count;
	g.reason = reason;
	g.step = step;
	g.time_ns = time_ns;
	/* Joins the pending gap; it is written before the next event. */
	if (r->ring)
		add_to_gap(r, r->next_seq, count, reason, step, time_ns);
	r->next_seq += count;
	pthread_mutex_unlock(&r->lock);
	if (serving(srv))
		tm_server_gap(srv, &g);
	pthread_mutex_unlock(&r->flock);
	return TM_OK;
}

int tm_recorder_annotate(tm_recorder *r, uint64_t step, uint64_t time_ns,
			 const char *key, const char *const *values,
			 uint32_t nvalues, uint32_t count)
{
	struct pending_annot *a;
	struct tm_annot an;
	struct tm_buf enc = { 0 };
	tm_server *srv;
	uint64_t at;
	int err;

	if (!r)
		return TM_ERR_INVALID_ARG;
	memset(&an, 0, sizeof(an));
	an.step = step;
	an.time_ns = time_ns;
	an.key = key;
	an.values = values;
	an.nvalues = nvalues;
	an.count = count;
	/* the seq is the next event's, and the server sees the annotation
	 * before that event */
	if (lock_between_submits(r, &srv))
		return TM_ERR_CLOSED;
	an.seq = r->next_seq;
	at = r->head;
	pthread_mutex_unlock(&r->lock);
	err = tm_encode_annot(&enc, &an);
	if (!err && r->ring) {
		pthread_mutex_lock(&r->alock);
		if (r->annq_first + r->annq_len == r->annq_cap) {
			if (r->annq_first) {
				memmove(r->annq, r->annq + r->annq_first,
					r->annq_len * sizeof(*r->annq));
				r->annq_first = 0;
			} else {
				size_t cap = r->annq_cap ? 2 * r->annq_cap : 16;
				void *p = realloc(r->annq, cap * sizeof(*r->annq));

				if (!p)
					err = TM_ERR_NOMEM;
				else {
					r->annq = p;
					r->annq_cap = cap;
				}
			}
		}
		if (!err) {
			a = &r->annq[r->annq_first + r->annq_len];
			a->at = at;
			a->rec = enc;
			enc.data = NULL;
			__atomic_store_n(&r->annq_len, r->annq_len + 1, __ATOMIC_RELEASE);
		}
		pthread_mutex_unlock(&r->alock);
	}
	tm_buf_free(&enc);
	/* kept even with no debugger: one that attaches mid-step needs it */
	if (!err && srv)
		tm_server_annot(srv, &an);
	pthread_mutex_unlock(&r->flock);
	if (err)
		set_detail(r, "recording an annotation", err);
	return err;
}

static int flight_dump_locked(tm_recorder *r, const char *reason);
static int flight_events(tm_recorder *r, const struct tm_event *e, size_t n);
static void flight_poll(tm_recorder *r);

/*
 * Writes the annotations made at ring positions up to at, in order; returns
 * the position of the next one still waiting (UINT64_MAX: none).  Called
 * where write_slots is (wlock held, or the crash handler's ownership).
 */
static uint64_t write_annots(tm_recorder *r, uint64_t at)
{
	uint64_t next = UINT64_MAX;

	if (!__atomic_load_n(&r->annq_len, __ATOMIC_ACQUIRE))
		return next;
	/* the crashed thread may hold alock: its annotations are lost then */
	if (r->crashing ? pthread_mutex_trylock(&r->alock) != 0 :
	    pthread_mutex_lock(&r->alock) != 0)
		return next;
	while (r->annq_len) {
		struct pending_annot *a = &r->annq[r->annq_first];
		int err;

		if (a->at > at) {
			next = a->at;
			break;
		}
		if (r->fl_on) {
			tm_flight__raw(r->fl, a->rec.data, a->rec.len);
		} else if (!r->st.writer_err) {
			err = tm_writer_raw(r->w, a->rec.data, a->rec.len);
			if (err) {
				r->st.writer_err = err;
				set_detail(r, "writing the trace", err);
			}
		}
		tm_buf_free(&a->rec);
		r->annq_first++;
		__atomic_store_n(&r->annq_len, r->annq_len - 1, __ATOMIC_RELEASE);
	}
	if (!r->annq_len)
		r->annq_first = 0;
	pthread_mutex_unlock(&r->alock);
	return next;
}

/*
 * Writes slots [from, to) and adds up the tensor and payload units they
 * hold.  No locks of its own: write_range holds wlock, and the crash
 * handler holds (or owns) everything.
 */
static void write_slots(tm_recorder *r, uint64_t from, uint64_t to,
			uint64_t *tfree_out, uint64_t *pfree_out)
{
	uint64_t i = from, tfree = 0, pfree = 0;
	int err = 0;

	while (i < to) {
		uint64_t k = i % r->o.ring_events, n = 0;
		uint64_t next_at = write_annots(r, i);

		if (r->slots[k].type == SLOT_GAP) {
			if (r->fl_on) {
				tm_flight__gap(r->fl, &r->slots[k].gap);
			} else if (!r->st.writer_err) {
				err = tm_writer_gap(r->w, &r->slots[k].gap);
				if (!err)
					r->st.gaps_written++;
			}
			i++;
		} else {
			/* A run of event slots that does not wrap goes in one call. */
			while (i + n < to && i + n < next_at &&
			       (i + n) % r->o.ring_events >= k &&
			       r->slots[(i + n) % r->o.ring_events].type == SLOT_EVENT) {
				tfree += r->slots[(i + n) % r->o.ring_events].tused;
				pfree += r->slots[(i + n) % r->o.ring_events].pused;
				n++;
			}
			if (r->fl_on)
				err = flight_events(r, &r->evs[k], (size_t)n);
			else if (!r->st.writer_err) {
				err = tm_writer_events(r->w, &r->evs[k], (size_t)n);
				if (!err)
					r->st.events_written += n;
			}
			i += n;
		}
		if (err && !r->st.writer_err) {
			r->st.writer_err = err;
			set_detail(r, "writing the trace", err);
		}
	}
	write_annots(r, to);
	*tfree_out = tfree;
	*pfree_out = pfree;
}

/*
 * Writes slots [from, to) with the ring lock released (the producer never
 * touches slots below head), then releases them.  Called by the writer
 * thread, or by the caller in manual_drain mode; never both.
 */
static void write_range(tm_recorder *r, uint64_t from, uint64_t to)
{
	uint64_t tfree, pfree;

	pthread_mutex_lock(&r->wlock);
	write_slots(r, from, to, &tfree, &pfree);
	r->written_to = to;
	pthread_mutex_unlock(&r->wlock);

	pthread_mutex_lock(&r->lock);
	r->tail = to;
	r->ttail += tfree;
	r->ptail += pfree;
	pthread_cond_broadcast(&r->not_full);
	pthread_cond_broadcast(&r->drained);
	pthread_mutex_unlock(&r->lock);
}

static void *writer_main(void *arg)
{
	tm_recorder *r = arg;

	pthread_mutex_lock(&r->lock);
	for (;;) {
		uint64_t from, to;

		while (r->head == r->tail && !r->stop) {
			struct timespec ts;
			uint64_t ns;
			int rc;

			clock_gettime(CLOCK_REALTIME, &ts);
			ns = (uint64_t)ts.tv_nsec + r->o.drain_interval_ns;
			ts.tv_sec += (time_t)(ns / 1000000000u);
			ts.tv_nsec = (long)(ns % 1000000000u);
			rc = pthread_cond_timedwait(&r->not_empty, &r->lock, &ts);
			if (rc == ETIMEDOUT && r->head == r->tail) {
				/* Idle: close a chunk that got old, so a killed
				 * process loses at most max_age of events. */
				pthread_mutex_unlock(&r->lock);
				pthread_mutex_lock(&r->wlock);
				if (r->w && !r->st.writer_err)
					tm_writer_poll(r->w);
				flight_poll(r);
				pthread_mutex_unlock(&r->wlock);
				pthread_mutex_lock(&r->lock);
			}
		}
		if (r->head == r->tail && r->stop)
			break;
		from = r->tail;
		to = r->head;
		pthread_mutex_unlock(&r->lock);
		write_range(r, from, to);
		if (r->fl_mark && !r->w) {
			pthread_mutex_lock(&r->wlock);
			flight_poll(r);
			pthread_mutex_unlock(&r->wlock);
		}
		pthread_mutex_lock(&r->lock);
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

static void free_parts(tm_recorder *r)
{
	free(r->evs);
	free(r->slots);
	free(r->tens);
	free(r->pay);
	free(r->fwd_tens);
	free(r->crash_tens);
	tm_nodetab_free(r->nodes);
	tm_buf_free(&r->meta_enc);
	tm_flight__free(r->fl);
	free(r->fl_path);
	free(r->fl_mark);
	while (r->annq_len) {
		tm_buf_free(&r->annq[r->annq_first++].rec);
		r->annq_len--;
	}
	free(r->annq);
	free(r);
}

static int recorder_new(tm_writer *w, const struct tm_recorder_opts *opts,
			struct tm_flight *fl, tm_recorder **out)
{
	tm_recorder *r;

	if (!out) {
		tm_flight__free(fl);
		return TM_ERR_INVALID_ARG;
	}
	*out = NULL;
	r = calloc(1, sizeof(*r));
	if (!r) {
		tm_flight__free(fl);
		return TM_ERR_NOMEM;
	}
	r->fl = fl;
	if (opts)
		r->o = *opts;
	else
		tm_recorder_opts_default(&r->o);
	if (!r->o.ring_events)
		r->o.ring_events = 65536;
	if (!r->o.ring_tensors)
		r->o.ring_tensors = r->o.ring_events * 4u;
	if (!r->o.ring_payload_bytes)
		r->o.ring_payload_bytes = UINT64_C(64) << 20;
	if (!r->o.drain_interval_ns)
		r->o.drain_interval_ns = UINT64_C(10000000);
	r->nodes = tm_nodetab_new();
	r->fwd_tens = calloc(TM_MAX_TENSORS, sizeof(*r->fwd_tens));
	r->crash_tens = calloc(TM_MAX_TENSORS, sizeof(*r->crash_tens));
	if (!r->nodes || !r->fwd_tens || !r->crash_tens)
		goto nomem;
	if (w || fl) {
		r->evs = calloc(r->o.ring_events, sizeof(*r->evs));
		r->slots = calloc(r->o.ring_events, sizeof(*r->slots));
		r->tens = calloc(r->o.ring_tensors, sizeof(*r->tens));
		r->pay = malloc((size_t)r->o.ring_payload_bytes);
		if (!r->evs || !r->slots || !r->tens || !r->pay)
			goto nomem;
	}
	pthread_mutex_init(&r->flock, NULL);
	pthread_mutex_init(&r->lock, NULL);
	pthread_mutex_init(&r->wlock, NULL);
	pthread_mutex_init(&r->alock, NULL);
	pthread_cond_init(&r->not_empty, NULL);
	pthread_cond_init(&r->not_full, NULL);
	pthread_cond_init(&r->drained, NULL);
	r->w = w;
	r->ring = w || fl;
	if (r->ring && !r->o.manual_drain) {
		if (pthread_create(&r->thread, NULL, writer_main, r)) {
			pthread_mutex_destroy(&r->flock);
			pthread_mutex_destroy(&r->lock);
			pthread_mutex_destroy(&r->wlock);
			pthread_mutex_destroy(&r->alock);
			pthread_cond_destroy(&r->not_empty);
			pthread_cond_destroy(&r->not_full);
			pthread_cond_destroy(&r->drained);
			goto nomem;
		}
		tm_thread_name(r->thread, "tm-recorder");
		r->have_thread = 1;
	}
	*out = r;
	return TM_OK;
nomem:
	free_parts(r);
	return TM_ERR_NOMEM;
}

int tm_recorder_new(tm_writer *w, const struct tm_recorder_opts *opts,
		    tm_recorder **out)
{
	return recorder_new(w, opts, NULL, out);
}

int tm_recorder_open(const char *path, const struct tm_recorder_opts *opts,
		     tm_recorder **out)
{
	tm_writer *w;
	int err;

	if (!out)
		return TM_ERR_INVALID_ARG;
	*out = NULL;
	if (!path)
		return tm_recorder_new(NULL, opts, out);
	err = tm_writer_open(path, NULL, &w);
	if (err)
		return err;
	err = tm_recorder_new(w, opts, out);
	if (err)
		tm_writer_abandon(w);
	else
		(*out)->fl_path = strdup(path);     /* named if flight mode comes on */
	return err;
}

/* Gives a server the metadata and the nodes it has not got yet; wlock held. */
static void serve_known(tm_recorder *r, tm_server *srv)
{
	uint32_t i, n = tm_nodetab_count(r->nodes);

	if (r->meta_enc.len) {
		tm_decoder *d = tm_decoder_new();
		struct tm_record rec;
		size_t used;

		if (d && tm_decode_record(d, r->meta_enc.data, r->meta_enc.len,
					  &rec, &used) == TM_OK &&
		    rec.type == TM_REC_META)
			tm_server_meta(srv, &rec.u.meta);
		tm_decoder_free(d);
	}
	/* Ids the server knows already are refused by it: harmless. */
	for (i = 0; i < n; i++)
		tm_server_node(srv, tm_nodetab_get(r->nodes, i));
}

static int flight_request(void *user, int op, uint32_t steps, const char *reason,
			  char *detail, size_t len);

int tm_recorder_serve(tm_recorder *r, tm_server *srv)
{
	tm_server *old;

	if (!r)
		return TM_ERR_INVALID_ARG;
	/* outside the recorder's locks: the handler takes them */
	old = atomic_load(&r->srv);
	if ((r->fl || r->w) && old && old != srv)
		tm_server_flight_handler(old, NULL, NULL, NULL);
	/* flock: no submit is forwarding to the old server when this
	 * returns; wlock: no node is registered in between. */
	pthread_mutex_lock(&r->flock);
	pthread_mutex_lock(&r->wlock);
	if (srv && srv != atomic_load(&r->srv))
		serve_known(r, srv);
	atomic_store(&r->srv, srv);
	pthread_mutex_unlock(&r->wlock);
	pthread_mutex_unlock(&r->flock);
	/* a recording with a file can turn flight mode on (set probe-flight) */
	if ((r->fl || r->w) && srv)
		tm_server_flight_handler(srv, flight_request, r, &r->fl_word);
	return TM_OK;
}

int tm_recorder_meta(tm_recorder *r, const struct tm_run_meta *m)
{
	tm_server *srv;
	int err = TM_OK;

	if (!r || !m)
		return TM_ERR_INVALID_ARG;
	pthread_mutex_lock(&r->wlock);
	if (r->w)
		err = tm_writer_meta(r->w, m);
	if (!err) {
		r->meta_enc.len = 0;
		err = tm_encode_meta(&r->meta_enc, m);
		if (err)
			r->meta_enc.len = 0;
	}
	srv = atomic_load(&r->srv);
	if (!err && srv)
		tm_server_meta(srv, m);
	pthread_mutex_unlock(&r->wlock);
	if (err)
		set_detail(r, "writing run metadata", err);
	return err;
}

int tm_recorder_node(tm_recorder *r, const struct tm_node *n, uint32_t *id)
{
	struct tm_node copy;
	tm_server *srv;
	uint32_t nid = TM_NODE_NONE;
	int err;

	if (!r || !n)
		return TM_ERR_INVALID_ARG;
	pthread_mutex_lock(&r->wlock);
	/* The recorder's table mirrors the writer's, same ids, for the
	 * server (and is the only one without a writer). */
	if (r->w) {
		err = tm_writer_node(r->w, n, &nid);
		if (!err) {
			copy = *n;
			copy.id = nid;
			if (tm_nodetab_put(r->nodes, &copy) != TM_OK)
				err = TM_ERR_NOMEM;
		}
	} else {
		err = tm_nodetab_add(r->nodes, n, &nid);
	}
	if (id)
		*id = nid;
	srv = atomic_load(&r->srv);
	if (!err && srv) {
		copy = *n;
		copy.id = nid;
		tm_server_node(srv, &copy);
	}
	pthread_mutex_unlock(&r->wlock);
	if (err)
		set_detail(r, "registering a node", err);
	return err;
}

int tm_recorder_node2(tm_recorder *r, const char *address, const char *type,
		      const char *file, uint32_t line, uint32_t parent,
		      uint32_t depth, uint32_t kind, uint32_t *id)
{
	struct tm_node n;

	if (!address || depth > UINT16_MAX || kind > TM_NODE_OP)
		return TM_ERR_INVALID_ARG;
	memset(&n, 0, sizeof(n));
	n.parent = parent;
	n.depth = (uint16_t)depth;
	n.kind = (uint8_t)kind;
	n.address = address;
	n.type = type;
	n.file = file;
	n.line = line;
	return tm_recorder_node(r, &n, id);
}

int tm_recorder_drain(tm_recorder *r)
{
	uint64_t from, to;

	if (!r)
		return TM_ERR_INVALID_ARG;
	if (!r->ring)
		return TM_OK;
	if (r->have_thread) {
		pthread_mutex_lock(&r->lock);
		pthread_cond_signal(&r->not_empty);
		pthread_mutex_unlock(&r->lock);
		return TM_OK;
	}
	pthread_mutex_lock(&r->lock);
	from = r->tail;
	to = r->head;
	pthread_mutex_unlock(&r->lock);
	if (from != to)
		write_range(r, from, to);
	return r->st.writer_err;
}

/* Waits (thread mode) or drains (manual mode) until the ring is empty. */
static void wait_empty(tm_recorder *r)
{
	if (!r->ring)
		return;
	if (!r->have_thread) {
		tm_recorder_drain(r);
		return;
	}
	pthread_mutex_lock(&r->lock);
	while (r->head != r->tail) {
		pthread_cond_signal(&r->not_empty);
		pthread_cond_wait(&r->drained, &r->lock);
	}
	pthread_mutex_unlock(&r->lock);
}

int tm_recorder_flush(tm_recorder *r)
{
	int err;

	if (!r)
		return TM_ERR_INVALID_ARG;
	if (!r->ring)
		return TM_OK;
	wait_empty(r);
	pthread_mutex_lock(&r->wlock);
	write_annots(r, r->written_to);
	err = r->st.writer_err ? r->st.writer_err : r->w ? tm_writer_flush(r->w) : TM_OK;
	pthread_mutex_unlock(&r->wlock);
	return err;
}

void tm_recorder_get_stats(tm_recorder *r, struct tm_recorder_stats *s)
{
	if (!r || !s)
		return;
	pthread_mutex_lock(&r->lock);
	*s = r->st;
	s->next_seq = r->next_seq;
	pthread_mutex_unlock(&r->lock);
}

const char *tm_recorder_detail(const tm_recorder *r)
{
	return r ? r->detail : "";
}

int tm_recorder_watch_batch(tm_recorder *r, const struct tm_rec_batch *b)
{
	if (!r)
		return TM_ERR_INVALID_ARG;
	atomic_store(&r->batch, b);
	return TM_OK;
}

int tm_recorder_crash_install(tm_recorder *r)
{
	if (!r)
		return TM_ERR_INVALID_ARG;
	r->crash_on = 1;
	return tm_crash__install(r->w, r);
}

/* Writes out everything and closes the file; r is not freed. */
static int finish(tm_recorder *r)
{
	int err = TM_OK;

	pthread_mutex_lock(&r->lock);
	r->closed = 1;
	pthread_cond_broadcast(&r->not_full);   /* lossless waiters drop now */
	pthread_mutex_unlock(&r->lock);
	if (r->ring) {
		/* The pending gap still needs a slot: empty the ring first. */
		wait_empty(r);
		pthread_mutex_lock(&r->lock);
		if (r->gap_count)
			push_gap(r);
		r->stop = 1;
		pthread_cond_signal(&r->not_empty);
		pthread_mutex_unlock(&r->lock);
		if (r->have_thread)
			pthread_join(r->thread, NULL);
		else
			tm_recorder_drain(r);
		/* made after the last event: nothing else reaches them */
		write_annots(r, UINT64_MAX);
		err = r->st.writer_err;
		if (r->fl_on && r->w && !err) {
			/* flight mode turned on in a recording, no trigger
			 * since: what the ring saw is not kept, and says so */
			struct tm_gap g;

			if (tm_flight__unkept(r->fl, &g))
				err = tm_writer_gap(r->w, &g);
		}
		if (!r->w) {
			/* flight mode never triggered: no file */
		} else if (err)
			tm_writer_abandon(r->w);
		else
			err = tm_writer_close(r->w);
	}
	return err;
}

int tm_recorder_close(tm_recorder *r)
{
	int err;

	if (!r)
		return TM_OK;
	/* The handler must not look at r once it is freed. */
	tm_crash__forget(r);
	err = finish(r);
	pthread_mutex_destroy(&r->flock);
	pthread_mutex_destroy(&r->lock);
	pthread_mutex_destroy(&r->wlock);
	pthread_mutex_destroy(&r->alock);
	pthread_cond_destroy(&r->not_empty);
	pthread_cond_destroy(&r->not_full);
	pthread_cond_destroy(&r->drained);
	free_parts(r);
	return err;
}

/* ------------------------------------------------------------- flight mode */

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The run metadata as first written, plus what the window held (tmdb's
 * `info probe` shows the pairs). */
static int flight_meta(tm_recorder *r, tm_writer *w, const char *reason)
{
	char vals[6][200], over[64] = "";
	struct tm_run_meta m;
	struct tm_record rec;
	tm_decoder *d;
	size_t used;
	int err = TM_OK;
	static const char *const keys[6] = {
		"flight.steps", "flight.steps_held", "flight.budget",
		"flight.trigger", "flight.not_kept", "flight.window_end"
	};
	uint32_t nkeys = r->fl_win.have_last ? 6 : 5;
	uint32_t i;

	if (!r->meta_enc.len)
		return TM_OK;
	d = tm_decoder_new();
	if (!d)
		return TM_ERR_NOMEM;
	if (tm_decode_record(d, r->meta_enc.data, r->meta_enc.len, &rec, &used) != TM_OK ||
	    rec.type != TM_REC_META) {
		tm_decoder_free(d);
		return tm_writer_raw(w, r->meta_enc.data, r->meta_enc.len);
	}
	m = rec.u.meta;
	snprintf(vals[0], sizeof(vals[0]), "%u", r->fl_steps);
	/* what the ring really held: the steps over the budget among the
	 * window's are named, each being a gap in the file */
	if (r->fl_win.steps_over_held)
		snprintf(over, sizeof(over), " and %u over the budget (gaps)",
			 r->fl_win.steps_over_held);
	snprintf(vals[1], sizeof(vals[1]), "%u complete steps%s from step %llu, %llu bytes",
		 r->fl_win.steps_held, over, (unsigned long long)r->fl_win.first_step,
		 (unsigned long long)r->fl_win.bytes);
	snprintf(vals[2], sizeof(vals[2]), "%llu bytes; %llu step%s did not fit",
		 (unsigned long long)r->fl_budget, (unsigned long long)r->fl_win.steps_over,
		 r->fl_win.steps_over == 1 ? "" : "s");
	snprintf(vals[3], sizeof(vals[3]), "%s", reason);
	snprintf(vals[4], sizeof(vals[4]), "%llu events before the window",
		 (unsigned long long)r->fl_win.not_kept.count);
	/* where tmdb puts the playhead when it attaches to the waiting
	 * program (the triggering event of a TQL trigger) */
	snprintf(vals[5], sizeof(vals[5]), "%llu", (unsigned long long)r->fl_win.last_seq);
	for (i = 0; i < nkeys && m.npairs < TM_META_MAX_PAIRS; i++) {
		m.keys[m.npairs] = keys[i];
		m.values[m.npairs] = vals[i];
		m.npairs++;
	}
	err = tm_writer_meta(w, &m);
	tm_decoder_free(d);
	return err;
}

/* Tells the other processes of the job (rendezvous file), once. */
static void flight_mark(tm_recorder *r, const char *reason)
{
	int fd;

	if (!r->fl_mark || access(r->fl_mark, F_OK) == 0)
		return;
	fd = open(r->fl_mark, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	/* the file's existence is the message; the reason is a courtesy */
	if (write(fd, reason, strlen(reason)) < 0) {
		close(fd);
		return;
	}
	close(fd);
}

/*
 * Writes the window to fl_path and records normally from then on; wlock
 * held (or the crash handler's ownership).  Once only: later calls (and
 * triggers) find w open and do nothing.
 */
static int flight_dump_locked(tm_recorder *r, const char *reason)
{
	tm_writer *w = r->w;
	uint32_t i, n, id;
	int err;

	if (!r->fl_on)
		return TM_OK;
	tm_flight__window(r->fl, &r->fl_win);
	if (w) {
		/* flight mode turned on in a recording: the file goes on
		 * after a NOT_KEPT gap, its metadata updated */
		snprintf(r->fl_reason, sizeof(r->fl_reason), "%s", reason);
		err = flight_meta(r, w, reason);
		if (!err)
			err = tm_flight__write(r->fl, w);
		if (!err && !r->crashing)
			err = tm_writer_flush(w);
		if (err) {
			set_detail(r, "flight dump", err);
			r->st.writer_err = err;
			return err;
		}
		goto written;
	}
	err = tm_writer_open(r->fl_path, NULL, &w);
	if (err) {
		snprintf(r->detail, sizeof(r->detail), "flight dump to %s: %s",
			 r->fl_path, tm_strerror(err));
		return err;
	}
	snprintf(r->fl_reason, sizeof(r->fl_reason), "%s", reason);
	err = flight_meta(r, w, reason);
	n = tm_nodetab_count(r->nodes);
	for (i = 0; !err && i < n; i++) {
		/* dense ids in the same order: the writer's match the table's */
		err = tm_writer_node(w, tm_nodetab_get(r->nodes, i), &id);
		if (!err && id != i)
			err = TM_ERR_CORRUPT;
	}
	if (!err)
		err = tm_flight__write(r->fl, w);
	if (!err && !r->crashing)
		err = tm_writer_flush(w);
	if (err) {
		set_detail(r, "flight dump", err);
		tm_writer_abandon(w);
		return err;
	}
	r->w = w;
	if (r->crash_on && !r->crashing)
		tm_crash__install(w, r);
written:
	r->fl_on = 0;
	tm_flight__clear(r->fl);
	__atomic_add_fetch(&r->fl_word, 1, __ATOMIC_RELEASE);
	flight_mark(r, reason);
	return TM_OK;
}

/* Events into the flight ring; a trigger dumps and the rest go to the file. */
static int flight_events(tm_recorder *r, const struct tm_event *e, size_t n)
{
	const char *why = NULL;
	size_t taken = tm_flight__events(r->fl, e, n, r->nodes, &why);
	char reason[200];
	int err;

	if (!why)
		return TM_OK;
	snprintf(reason, sizeof(reason), "trigger %s at seq %llu step %llu", why,
		 (unsigned long long)e[taken - 1].seq, (unsigned long long)e[taken - 1].step);
	err = flight_dump_locked(r, reason);
	if (err) {
		/* the rest stays in the ring: a later trigger may write it */
		if (taken < n)
			flight_events(r, e + taken, n - taken);
		return err;
	}
	if (taken == n)
		return TM_OK;
	err = tm_writer_events(r->w, e + taken, n - taken);
	if (!err)
		r->st.events_written += n - taken;
	return err;
}

/* Another process of the job triggered: dump too.  wlock held. */
static void flight_poll(tm_recorder *r)
{
	char reason[200], buf[160];
	uint64_t now;
	ssize_t got;
	int fd;

	if (!r->fl_on || !r->fl_mark)
		return;
	now = mono_ns();
	if (now < r->fl_poll_at)
		return;
	r->fl_poll_at = now + UINT64_C(20000000);
	fd = open(r->fl_mark, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	got = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[got > 0 ? got : 0] = 0;
	snprintf(reason, sizeof(reason), "another rank: %s", buf);
	flight_dump_locked(r, reason);
}

int tm_recorder_open_flight(const struct tm_recorder_opts *opts,
			    const struct tm_flight_opts *f, tm_recorder **out)
{
	struct tm_flight *fl;
	tm_recorder *r;
	int err;

	if (!out)
		return TM_ERR_INVALID_ARG;
	*out = NULL;
	if (!f || !f->steps || !f->path || !*f->path)
		return TM_ERR_INVALID_ARG;
	fl = tm_flight__new(f->steps, f->budget_bytes);
	if (!fl)
		return TM_ERR_NOMEM;
	err = recorder_new(NULL, opts, fl, &r);
	if (err)
		return err;
	r->fl_on = 1;
	r->fl_steps = f->steps;
	r->fl_budget = f->budget_bytes ? f->budget_bytes : UINT64_C(64) << 20;
	r->fl_path = strdup(f->path);
	r->fl_mark = f->rendezvous && *f->rendezvous ? strdup(f->rendezvous) : NULL;
	if (!r->fl_path || (f->rendezvous && *f->rendezvous && !r->fl_mark)) {
		tm_recorder_close(r);
		return TM_ERR_NOMEM;
	}
	*out = r;
	return TM_OK;
}

int tm_recorder_flight_trigger(tm_recorder *r, const char *text)
{
	char *errs = NULL;
	int err;

	if (!r || !text)
		return TM_ERR_INVALID_ARG;
	if (!r->fl)
		return TM_ERR_UNSUPPORTED;
	pthread_mutex_lock(&r->wlock);
	err = tm_flight__add_trigger(r->fl, text, r->nodes, &errs);
	pthread_mutex_unlock(&r->wlock);
	if (err)
		snprintf(r->detail, sizeof(r->detail), "%s", errs ? errs : tm_strerror(err));
	free(errs);
	return err;
}

int tm_recorder_flight_dump(tm_recorder *r, const char *reason, uint64_t step)
{
	int err;

	if (!r)
		return TM_ERR_INVALID_ARG;
	if (!r->fl)
		return TM_ERR_UNSUPPORTED;
	/* what was submitted before the call belongs to the window */
	wait_empty(r);
	pthread_mutex_lock(&r->wlock);
	if (r->fl_on && step != UINT64_MAX)
		tm_flight__at_step(r->fl, step);
	err = flight_dump_locked(r, reason && *reason ? reason : "dump");
	pthread_mutex_unlock(&r->wlock);
	return err;
}

int tm_recorder_flight_info(tm_recorder *r, struct tm_flight_info *out)
{
	struct tm_flight_window win;

	if (!r || !out)
		return TM_ERR_INVALID_ARG;
	memset(out, 0, sizeof(*out));
	if (!r->fl)
		return TM_OK;
	pthread_mutex_lock(&r->wlock);
	out->steps = r->fl_steps;
	out->budget = r->fl_budget;
	out->dumps = __atomic_load_n(&r->fl_word, __ATOMIC_ACQUIRE);
	if (!r->fl_on)
		win = r->fl_win;
	else
		tm_flight__window(r->fl, &win);
	out->steps_held = win.steps_held;
	out->first_step = win.first_step;
	out->steps_dropped = win.steps_dropped;
	out->steps_over = win.steps_over;
	out->bytes = win.bytes;
	out->not_kept = win.not_kept.count;
	snprintf(out->reason, sizeof(out->reason), "%s", r->fl_reason);
	pthread_mutex_unlock(&r->wlock);
	return TM_OK;
}

/* A debugger's FLIGHT request (tm_server_flight_handler), on the server's
 * thread. */
static int flight_request(void *user, int op, uint32_t steps, const char *reason,
			  char *detail, size_t len)
{
	tm_recorder *r = user;
	int on, err;

	pthread_mutex_lock(&r->wlock);
	on = r->fl_on;
	pthread_mutex_unlock(&r->wlock);
	if (op == TM_FLIGHT_DUMP) {
		if (!r->fl) {
			snprintf(detail, len, "it records everything: no flight window to write");
			return TM_ERR_UNSUPPORTED;
		}
		err = tm_recorder_flight_dump(r, reason && *reason ? reason : "dump from tmdb",
					      UINT64_MAX);
		if (err)
			snprintf(detail, len, "%s", r->detail);
		else if (!on)
			snprintf(detail, len, "found its window already written to %s (%s)",
				 r->fl_path, r->fl_reason);
		else
			snprintf(detail, len, "wrote the window (%u complete steps from step %llu) "
				 "to %s", r->fl_win.steps_held,
				 (unsigned long long)r->fl_win.first_step, r->fl_path);
		return err;
	}
	pthread_mutex_lock(&r->wlock);
	if (r->fl_on) {
		err = tm_flight__set_steps(r->fl, steps);
	} else if (!r->fl && !(r->fl = tm_flight__new(steps, r->fl_budget))) {
		err = TM_ERR_NOMEM;
	} else {
		/* a recording goes into flight mode from its next record:
		 * what it wrote stays, what follows waits for a trigger */
		err = tm_flight__set_steps(r->fl, steps);
		if (!err) {
			tm_flight__restart(r->fl);
			if (!r->fl_budget)
				r->fl_budget = UINT64_C(64) << 20;
			r->fl_on = 1;
		}
	}
	if (!err)
		r->fl_steps = steps;
	pthread_mutex_unlock(&r->wlock);
	if (!err && !on)
		snprintf(detail, len, "keeping the last %u steps from now on; %s gets them "
			 "at a trigger", steps, r->fl_path ? r->fl_path : "its trace");
	else if (!err)
		snprintf(detail, len, "keeping the last %u steps", steps);
	return err;
}

#ifdef __GLIBC__
/* One recorder per process waits for the exit (the probe's). */
static tm_recorder *exit_rec;
static uint64_t exit_step;
static int exit_registered;

static void close_at_exit(int status, void *arg)
{
	tm_recorder *r = exit_rec;
	char reason[64];

	(void)arg;
	exit_rec = NULL;
	if (!r)
		return;
	if (status != 0 && r->fl_on) {
		snprintf(reason, sizeof(reason), "exit status %d", status);
		if (tm_recorder_flight_dump(r, reason, exit_step) == TM_OK)
			fprintf(stderr, "tensormorph-probe: %s: wrote the last %u steps to %s\n",
				reason, r->fl_win.steps_held, r->fl_path);
		else
			fprintf(stderr, "tensormorph-probe: %s\n", r->detail);
	}
	tm_recorder_close(r);
}
#endif

int tm_recorder_close_at_exit(tm_recorder *r, uint64_t step)
{
#ifdef __GLIBC__
	int on;
#endif

	if (!r)
		return TM_ERR_INVALID_ARG;
#ifdef __GLIBC__
	/* wlock: set probe-flight may be turning it on or off */
	pthread_mutex_lock(&r->wlock);
	on = r->fl_on;
	pthread_mutex_unlock(&r->wlock);
	if (!on || exit_rec)
		return TM_ERR_UNSUPPORTED;
	if (!exit_registered) {
		if (on_exit(close_at_exit, NULL))
			return TM_ERR_UNSUPPORTED;
		exit_registered = 1;
	}
	exit_step = step;
	exit_rec = r;
	return TM_OK;
#else
	(void)step;
	return TM_ERR_UNSUPPORTED;
#endif
}

const uint32_t *tm_recorder_flight_word(tm_recorder *r)
{
	return r && r->fl ? &r->fl_word : NULL;
}

tm_writer *tm_recorder__writer(tm_recorder *r)
{
	return r ? r->w : NULL;
}

/* ------------------------------------------------------------- the crash handler */

/* Tries a lock for about ms milliseconds (nanosleep is async-signal-safe). */
static int try_lock_for(pthread_mutex_t *m, int ms)
{
	struct timespec nap = { 0, 1000000 };

	while (pthread_mutex_trylock(m)) {
		if (ms-- <= 0)
			return -1;
		nanosleep(&nap, NULL);
	}
	return 0;
}

/* A batch entry the handler can convert without reading out of bounds of
 * what the entry itself declares. */
static int crash_event_ok(const tm_recorder *r, const struct tm_rec_event *e,
			  const struct tm_rec_tensor *t)
{
	uint32_t i;

	if (e->ntensors > TM_MAX_TENSORS || e->kind >= TM_EV__COUNT ||
	    e->phase > TM_PHASE_BWD || e->node >= tm_nodetab_count(r->nodes))
		return 0;
	for (i = 0; i < e->ntensors; i++)
		if (t[i].rank > TM_MAX_RANK || t[i].slot_kind >= TM_SLOT__COUNT ||
		    t[i].dtype >= TM_DT__COUNT)
			return 0;
	return 1;
}

/*
 * Runs in the fatal-signal handler (crash.c), before the crash record is
 * written: the ring's undrained slots and pending gap, then the watched
 * batch's filled events, into the writer; c's position becomes the last
 * event's unless tm_crash_position was called since (pos_set, pos_gen,
 * c->time_ns later than that event).  Never waits more than a few seconds:
 * the locks are only tried, and one held by this very thread (a crash
 * inside submit) is used as it is, since its owner will not run again.
 */
tm_server *tm_recorder__crash(tm_recorder *r, struct tm_crash *c, int pos_set,
			      uint64_t pos_gen)
{
	const struct tm_rec_batch *b = atomic_load(&r->batch);
	int have_lock = 0, have_wlock = 0, wrote_batch = 0;
	uint64_t tfree, pfree, seq;

	if (try_lock_for(&r->lock, 100) == 0)
		have_lock = 1;
	else if (atomic_load_explicit(&r->lock_owned, memory_order_relaxed) &&
		 pthread_equal(r->lock_owner, pthread_self()))
		have_lock = 2;
	if (r->ring && have_lock) {
		/* The writer thread finishes the range it is writing (it
		 * holds wlock throughout); the rest of the ring is ours. */
		if (try_lock_for(&r->wlock, 2000) == 0)
			have_wlock = 1;
		if (have_wlock && !r->st.writer_err) {
			uint64_t from = r->written_to > r->tail ? r->written_to : r->tail;

			r->crashing = 1;
			if (from < r->head)
				write_slots(r, from, r->head, &tfree, &pfree);
			else
				write_annots(r, r->head);   /* made after the last event */
			/* flight mode: the window goes out before the rest; the
			 * batch's events say which step the model is in */
			if (r->fl_on) {
				if (b && b->events && b->nev)
					tm_flight__at_step(r->fl, ((const struct tm_rec_event *)
								   (uintptr_t)b->events)->step);
				flight_dump_locked(r, "fatal signal");
			}
			if (r->gap_count && r->w && !r->st.writer_err) {
				struct tm_gap g;

				memset(&g, 0, sizeof(g));
				g.first_seq = r->gap_first;
				g.last_seq = r->gap_first + r->gap_count - 1;
				g.count = r->gap_count;
				g.reason = r->gap_reason;
				g.step = r->gap_step;
				g.time_ns = r->gap_time;
				if (tm_writer_gap(r->w, &g) == TM_OK)
					r->gap_count = 0;
			}
		}
	}

	/* The batch: what was filled and not submitted yet.  A submit under
	 * way on this batch has numbered the first cur_done of them. */
	seq = r->next_seq;
	if (b && b->events && b->nev) {
		const struct tm_rec_event *ev = (const void *)(uintptr_t)b->events;
		const struct tm_rec_tensor *t = (const void *)(uintptr_t)b->tensors;
		uint32_t n = b->nev < CRASH_MAX_BATCH ? b->nev : CRASH_MAX_BATCH, i, j;
		size_t skip = r->cur_ev == ev ? r->cur_done : 0;
		struct tm_event e;

		for (i = 0; i < n; i++) {
			if (ev[i].ntensors && !t)
				break;
			if (i >= skip) {
				if (!crash_event_ok(r, &ev[i], t))
					break;
				/* Stats only where already computed: the data
				 * may be what made the process crash. */
				for (j = 0; j < ev[i].ntensors; j++)
					fill_tensor(&r->crash_tens[j], &t[j], NULL, 0);
				fill_event(&e, &ev[i], seq, r->crash_tens);
				if (r->w && !r->st.writer_err)
					tm_writer_event(r->w, &e);
				r->have_last = 1;
				r->last_seq = seq;
				r->last_step = e.step;
				r->last_node = e.node;
				r->last_phase = e.phase;
				r->last_time = e.time_ns;
				seq++;
				wrote_batch = 1;
			}
			t += ev[i].ntensors;
		}
		r->next_seq = seq;
	}

	/* The position: the last event, unless the probe said more since. */
	if (r->have_last &&
	    !(pos_set && (wrote_batch ? c->time_ns > r->last_time
				      : pos_gen != r->last_gen))) {
		c->seq = r->last_seq;
		c->step = r->last_step;
		c->node = r->last_node;
		c->phase = r->last_phase;
		c->time_ns = r->last_time;
	}
	/* The locks stay held: the process is about to die, and the writer
	 * thread must not write the slots again. */
	return atomic_load(&r->srv);
}
