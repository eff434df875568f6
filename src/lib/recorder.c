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
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tm-internal.h"
#include "tm-recorder.h"
#include "tm-stats.h"

_Static_assert(sizeof(struct tm_rec_tensor) == 336, "tm_rec_tensor layout is ABI");
_Static_assert(sizeof(struct tm_rec_event) == 48, "tm_rec_event layout is ABI");

enum { SLOT_EVENT = 0, SLOT_GAP = 1 };

/* What the consumer needs besides the tm_event itself to release a slot. */
struct slot {
	uint8_t type;
	uint32_t tused;         /* tensor units taken, padding included */
	uint64_t pused;         /* payload bytes taken, padding included */
	struct tm_gap gap;
};

struct tm_recorder {
	tm_writer *w;
	struct tm_recorder_opts o;

	pthread_mutex_t lock;           /* the ring and the counters */
	pthread_cond_t not_empty;       /* producer -> consumer */
	pthread_cond_t not_full;        /* consumer -> lossless producers */
	pthread_cond_t drained;         /* consumer -> flush/close */
	pthread_mutex_t wlock;          /* the writer (consumer vs nodes/meta) */
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

static void fill_tensor(struct tm_tensor *d, const struct tm_rec_tensor *s,
			uint8_t *payload, uint64_t plen)
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
	if (payload) {
		memcpy(payload, (const void *)(uintptr_t)s->data, plen);
		d->payload = payload;
		d->payload_len = plen;
	}
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
	ev->seq = seq;
	ev->step = e->step;
	ev->phase = e->phase;
	ev->kind = e->kind;
	ev->level = e->level;
	ev->node = e->node;
	ev->call = e->call;
	ev->time_ns = e->time_ns;
	ev->start_ns = e->start_ns;
	ev->end_ns = e->end_ns;
	ev->ntensors = e->ntensors;
	ev->tensors = e->ntensors ? &r->tens[tstart] : NULL;
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

		if (!t[i].data || !t[i].level || t[i].done)
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
			t[i].have_hist = 1;
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

int tm_recorder_submit(tm_recorder *r, const struct tm_rec_event *ev,
		       size_t nev, struct tm_rec_tensor *t, size_t nt,
		       uint64_t *first_seq)
{
	size_t i, ti = 0;
	int err, pushed = 0, wake;

	if (!r)
		return TM_ERR_INVALID_ARG;
	err = check_batch(ev, nev, t, nt);
	if (err)
		return err;
	/* Stats the caller left to us are computed before taking the lock. */
	tm_recorder_stats(r, t, nt);

	pthread_mutex_lock(&r->lock);
	if (r->closed) {
		pthread_mutex_unlock(&r->lock);
		return TM_ERR_CLOSED;
	}
	if (first_seq)
		*first_seq = r->next_seq;
	for (i = 0; i < nev; i++) {
		uint64_t seq = r->next_seq++;
		int rc;

		for (;;) {
			rc = try_push(r, &ev[i], t + ti, seq);
			if (rc != 1 || !r->o.lossless || r->closed)
				break;
			if (!r->have_thread) {
				/* Manual drain: the producer is the consumer. */
				pthread_mutex_unlock(&r->lock);
				tm_recorder_drain(r);
				pthread_mutex_lock(&r->lock);
				continue;
			}
			/* Lossless: let the consumer see what we have
			 * pushed, then wait for room. */
			pthread_cond_signal(&r->not_empty);
			pthread_cond_wait(&r->not_full, &r->lock);
		}
		if (rc == 0)
			pushed = 1;
		else
			add_to_gap(r, seq, 1, TM_GAP_BACKPRESSURE, ev[i].step,
				   ev[i].time_ns);
		ti += ev[i].ntensors;
	}
	/* The writer thread wakes on its own every drain_interval; waking it
	 * per batch would cost two context switches per step on a busy
	 * machine.  Only a ring a quarter full calls it early. */
	wake = pushed && ((r->head - r->tail) * 4 >= r->o.ring_events ||
			  (r->thead - r->ttail) * 4 >= r->o.ring_tensors ||
			  (r->phead - r->ptail) * 4 >= r->o.ring_payload_bytes);
	pthread_mutex_unlock(&r->lock);
	if (wake)
		pthread_cond_signal(&r->not_empty);
	return TM_OK;
}

int tm_recorder_gap(tm_recorder *r, uint64_t count, uint32_t reason,
		    uint64_t step, uint64_t time_ns, uint64_t *first_seq)
{
	if (!r || !count || !reason || (reason & ~(uint32_t)TM_GAP__ALL))
		return TM_ERR_INVALID_ARG;
	pthread_mutex_lock(&r->lock);
	if (r->closed) {
		pthread_mutex_unlock(&r->lock);
		return TM_ERR_CLOSED;
	}
	if (first_seq)
		*first_seq = r->next_seq;
	/* Joins the pending gap; it is written before the next event. */
	add_to_gap(r, r->next_seq, count, reason, step, time_ns);
	r->next_seq += count;
	pthread_mutex_unlock(&r->lock);
	return TM_OK;
}

/*
 * Writes slots [from, to) with the ring lock released (the producer never
 * touches slots below head), then releases them.  Called by the writer
 * thread, or by the caller in manual_drain mode; never both.
 */
static void write_range(tm_recorder *r, uint64_t from, uint64_t to)
{
	uint64_t i = from, tfree = 0, pfree = 0;
	int err = 0;

	pthread_mutex_lock(&r->wlock);
	while (i < to) {
		uint64_t k = i % r->o.ring_events, n = 0;

		if (r->slots[k].type == SLOT_GAP) {
			if (!r->st.writer_err) {
				err = tm_writer_gap(r->w, &r->slots[k].gap);
				if (!err)
					r->st.gaps_written++;
			}
			i++;
		} else {
			/* A run of event slots that does not wrap goes in one call. */
			while (i + n < to && (i + n) % r->o.ring_events >= k &&
			       r->slots[(i + n) % r->o.ring_events].type == SLOT_EVENT) {
				tfree += r->slots[(i + n) % r->o.ring_events].tused;
				pfree += r->slots[(i + n) % r->o.ring_events].pused;
				n++;
			}
			if (!r->st.writer_err) {
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
				if (!r->st.writer_err)
					tm_writer_poll(r->w);
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
		pthread_mutex_lock(&r->lock);
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

int tm_recorder_new(tm_writer *w, const struct tm_recorder_opts *opts,
		    tm_recorder **out)
{
	tm_recorder *r;

	if (!out)
		return TM_ERR_INVALID_ARG;
	*out = NULL;
	if (!w)
		return TM_ERR_INVALID_ARG;
	r = calloc(1, sizeof(*r));
	if (!r)
		return TM_ERR_NOMEM;
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
	r->evs = calloc(r->o.ring_events, sizeof(*r->evs));
	r->slots = calloc(r->o.ring_events, sizeof(*r->slots));
	r->tens = calloc(r->o.ring_tensors, sizeof(*r->tens));
	r->pay = malloc((size_t)r->o.ring_payload_bytes);
	if (!r->evs || !r->slots || !r->tens || !r->pay)
		goto nomem;
	pthread_mutex_init(&r->lock, NULL);
	pthread_mutex_init(&r->wlock, NULL);
	pthread_cond_init(&r->not_empty, NULL);
	pthread_cond_init(&r->not_full, NULL);
	pthread_cond_init(&r->drained, NULL);
	r->w = w;
	if (!r->o.manual_drain) {
		if (pthread_create(&r->thread, NULL, writer_main, r)) {
			pthread_mutex_destroy(&r->lock);
			pthread_mutex_destroy(&r->wlock);
			pthread_cond_destroy(&r->not_empty);
			pthread_cond_destroy(&r->not_full);
			pthread_cond_destroy(&r->drained);
			goto nomem;
		}
		r->have_thread = 1;
	}
	*out = r;
	return TM_OK;
nomem:
	free(r->evs);
	free(r->slots);
	free(r->tens);
	free(r->pay);
	free(r);
	return TM_ERR_NOMEM;
}

int tm_recorder_open(const char *path, const struct tm_recorder_opts *opts,
		     tm_recorder **out)
{
	tm_writer *w;
	int err;

	if (!out)
		return TM_ERR_INVALID_ARG;
	*out = NULL;
	err = tm_writer_open(path, NULL, &w);
	if (err)
		return err;
	err = tm_recorder_new(w, opts, out);
	if (err)
		tm_writer_abandon(w);
	return err;
}

int tm_recorder_meta(tm_recorder *r, const struct tm_run_meta *m)
{
	int err;

	if (!r || !m)
		return TM_ERR_INVALID_ARG;
	pthread_mutex_lock(&r->wlock);
	err = tm_writer_meta(r->w, m);
	pthread_mutex_unlock(&r->wlock);
	if (err)
		set_detail(r, "writing run metadata", err);
	return err;
}

int tm_recorder_node(tm_recorder *r, const struct tm_node *n, uint32_t *id)
{
	int err;

	if (!r || !n)
		return TM_ERR_INVALID_ARG;
	pthread_mutex_lock(&r->wlock);
	err = tm_writer_node(r->w, n, id);
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

	if (!address || depth > UINT16_MAX || kind > TM_NODE_BUFFER)
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
	wait_empty(r);
	pthread_mutex_lock(&r->wlock);
	err = r->st.writer_err ? r->st.writer_err : tm_writer_flush(r->w);
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

int tm_recorder_close(tm_recorder *r)
{
	int err;

	if (!r)
		return TM_OK;
	pthread_mutex_lock(&r->lock);
	r->closed = 1;
	pthread_cond_broadcast(&r->not_full);   /* lossless waiters drop now */
	pthread_mutex_unlock(&r->lock);
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
	err = r->st.writer_err;
	if (err)
		tm_writer_abandon(r->w);
	else
		err = tm_writer_close(r->w);
	pthread_mutex_destroy(&r->lock);
	pthread_mutex_destroy(&r->wlock);
	pthread_cond_destroy(&r->not_empty);
	pthread_cond_destroy(&r->not_full);
	pthread_cond_destroy(&r->drained);
	free(r->evs);
	free(r->slots);
	free(r->tens);
	free(r->pay);
	free(r);
	return err;
}
