/*
 * probe-multi.c -- one RuntimeProbe over the ranks of a distributed job.
 *
 * A torchrun job is several processes, each with its own probe, node table
 * and seq counter.  tmdb debugs it as one program, the way GDB shows several
 * inferiors in one session: this probe wraps one probe per rank (replays of
 * the per-rank .tmrun files a manifest names, or live connections to each
 * rank's socket) and presents
 *
 *   - one node table holding every rank's nodes under a rank qualifier,
 *     "@1:model.layers.3" (tm-address.h), so that every command that takes
 *     an address or a pattern works across ranks unchanged;
 *   - one time axis: the records of all ranks merged, replays on the ranks'
 *     clocks (meta.start_unix_ns + time_ns), live runs in the order records
 *     arrive (a rank blocked in a collective sends nothing, so waiting for
 *     the "earliest" record of every rank could wait forever).  seq is the
 *     position on that axis; each rank's own order is kept.
 *
 * The merged axis is an index of (rank, local record) pairs.  The cursor is
 * a position in it, and each rank's own cursor is kept right after the
 * records of that rank that lie before it, so that moving one record is one
 * call on one rank's probe.  A seek repositions every rank.
 *
 * Live, the model of every rank is driven together: when tmdb reads past
 * the newest record, every paused rank is resumed (one step, or running
 * ahead to its breakpoints), because a rank that alone moves may only block
 * in an all-reduce waiting for the others.  A stop interrupts every rank
 * (flow(0)): all-stop, so that collectives do not time out unnoticed while
 * the user looks at one rank.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tmdb.h"
#include "live.h"

#define POLL_MS 100
#define SETTLE_MS 5000          /* the ranks' first pause after attaching */
#define ALIGN_WALK 8            /* records a reseek looks at before rescanning */

/* One record of a rank, as the merge knows it. */
struct lrec {
	uint8_t type;
	uint64_t key;           /* seek key: seq, gap first_seq, crash seq */
	uint64_t bound;         /* latest() bound: seq, gap last_seq, crash seq */
	uint64_t gpos;          /* position on the merged axis, UINT64_MAX: none yet */
	uint64_t t;             /* merged clock, monotone within the rank */
	uint64_t step;
};

struct rank {
	struct tm_probe *p;
	int rank;
	int live;
	uint32_t *map;          /* local node id -> merged id */
	uint32_t nmap;
	struct lrec *recs;      /* what this rank has sent / recorded */
	size_t n, cap;
	size_t indexed;         /* recs[0..indexed) are on the merged axis */
	size_t at;              /* the rank's cursor is after recs[at - 1] */
	uint64_t off_ns;        /* its clock's start after the earliest rank's */
	uint64_t last_t;
};

/* A position on the merged axis. */
struct gent {
	uint32_t rank;
	uint32_t i;             /* index into that rank's recs */
};

struct multi {
	struct tm_probe base;   /* first: the vtable pointer */
	char *source;
	int live;
	struct rank *r;
	size_t nr;
	tm_nodetab *nodes;
	uint32_t *owner;        /* merged node id -> index into r[] */
	uint32_t *local;        /* merged node id -> the rank's own id */
	uint32_t nowned;
	struct gent *idx;
	size_t n, cap, pos;
	struct tm_run_meta meta;
	struct tm_summary sum;
	int have_sum;
	int int_pending;        /* Ctrl-C: INTERRUPT sent, waiting for a record */
	int non_stop;           /* a stop pauses only the rank it is on */
	struct pollfd *pf;      /* one per rank, for fill() */
	char *rec_path;         /* record FILE: the manifest written */
	char detail[512];
	char rec_note[600];     /* a rank's recording that stopped on its own */
	char desc[256];
};

static const struct tm_probe_ops multi_replay_ops, multi_live_ops;

static struct multi *impl(struct tm_probe *p)
{
	return (struct multi *)p;
}

static struct multi *as_multi(struct tm_probe *p)
{
	return p && (p->ops == &multi_replay_ops || p->ops == &multi_live_ops) ?
	       impl(p) : NULL;
}

/* ------------------------------------------------------------- nodes */

/* Adds the rank's nodes not merged yet, as @R:ADDRESS. */
static int sync_nodes(struct multi *m, struct rank *rk)
{
	const tm_nodetab *t = rk->p->ops->nodes(rk->p);
	uint32_t n = tm_nodetab_count(t), i, id;
	char addr[TM_ADDRESS_MAX + 16];
	uint32_t *nm;
	int err;

	if (n <= rk->nmap)
		return TM_OK;
	nm = realloc(rk->map, n * sizeof(*nm));
	if (!nm)
		return TM_ERR_NOMEM;
	rk->map = nm;
	for (i = rk->nmap; i < n; i++) {
		const struct tm_node *ln = tm_nodetab_get(t, i);
		struct tm_node g = *ln;

		snprintf(addr, sizeof(addr), "@%d:%s", rk->rank, ln->address);
		g.address = addr;
		g.parent = ln->parent < i ? rk->map[ln->parent] : TM_NODE_NONE;
		err = tm_nodetab_add(m->nodes, &g, &id);
		if (err == TM_ERR_INVALID_ARG && id != TM_NODE_NONE)
			err = TM_OK;    /* already there: id is the existing one */
		if (err) {
			/* the rank's own table took it, but "@R:" can make it
			 * one the merged table cannot (too long) */
			snprintf(m->detail, sizeof(m->detail), "rank %d: node %u (%.200s...): %s",
				 rk->rank, i, ln->address, tm_strerror(err));
			return err == TM_ERR_INVALID_ARG ? TM_ERR_TOO_LARGE : err;
		}
		rk->map[i] = id;
		if (id >= m->nowned) {
			uint32_t *no = realloc(m->owner, (id + 1) * sizeof(*no));
			uint32_t *nl = no ? realloc(m->local, (id + 1) * sizeof(*nl)) : NULL;

			if (no)
				m->owner = no;
			if (!nl)
				return TM_ERR_NOMEM;
			m->local = nl;
			m->nowned = id + 1;
		}
		m->owner[id] = (uint32_t)(rk - m->r);
		m->local[id] = i;
	}
	rk->nmap = n;
	return TM_OK;
}

static uint32_t map_node(struct multi *m, struct rank *rk, uint32_t local)
{
	if (local == TM_NODE_NONE)
		return TM_NODE_NONE;
	if (local >= rk->nmap)
		sync_nodes(m, rk);
	return local < rk->nmap ? rk->map[local] : TM_NODE_NONE;
}

/* The rank owning a merged node id and its local id there. */
static struct rank *node_rank(struct multi *m, uint32_t node, uint32_t *local)
{
	if (node >= m->nowned)
		return NULL;
	*local = m->local[node];
	return &m->r[m->owner[node]];
}

/* ------------------------------------------------------------- the index */

static int rank_push(struct rank *rk, const struct tm_record *rec)
{
	struct lrec *l;
	uint64_t t;

	if (rk->n == rk->cap) {
		size_t cap = rk->cap ? rk->cap * 2 : 1024;
		struct lrec *nr = realloc(rk->recs, cap * sizeof(*nr));

		if (!nr)
			return TM_ERR_NOMEM;
		rk->recs = nr;
		rk->cap = cap;
	}
	l = &rk->recs[rk->n];
	memset(l, 0, sizeof(*l));
	l->type = rec->type;
	l->gpos = UINT64_MAX;
	if (rec->type == TM_REC_EVENT) {
		l->key = l->bound = rec->u.event.seq;
		l->step = rec->u.event.step;
		t = rec->u.event.time_ns;
	} else if (rec->type == TM_REC_GAP) {
		l->key = rec->u.gap.first_seq;
		l->bound = rec->u.gap.last_seq;
		l->step = rec->u.gap.step;
		t = rec->u.gap.time_ns;
	} else {
		l->key = l->bound = rec->u.crash.seq;
		l->step = rec->u.crash.step;
		t = rec->u.crash.time_ns;
	}
	/* a gap is stamped when noticed: keep the rank's order on the axis */
	t += rk->off_ns;
	if (t < rk->last_t)
		t = rk->last_t;
	rk->last_t = l->t = t;
	rk->n++;
	return TM_OK;
}

static int idx_push(struct multi *m, size_t r, size_t i)
{
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 4096;
		struct gent *ni = realloc(m->idx, cap * sizeof(*ni));

		if (!ni)
			return TM_ERR_NOMEM;
		m->idx = ni;
		m->cap = cap;
	}
	m->r[r].recs[i].gpos = m->n;
	m->idx[m->n].rank = (uint32_t)r;
	m->idx[m->n].i = (uint32_t)i;
	m->n++;
	return TM_OK;
}

/*
 * Puts every rank's records not on the axis yet onto it, earliest first
 * (ties: lower rank).  Returns how many, or -TM_ERR_NOMEM.
 */
static long merge_new(struct multi *m)
{
	long added = 0;

	for (;;) {
		size_t r, best = m->nr;

		for (r = 0; r < m->nr; r++) {
			struct rank *rk = &m->r[r];

			if (rk->indexed == rk->n)
				continue;
			if (best == m->nr ||
			    rk->recs[rk->indexed].t < m->r[best].recs[m->r[best].indexed].t)
				best = r;
		}
		if (best == m->nr)
			return added;
		if (idx_push(m, best, m->r[best].indexed))
			return -(long)TM_ERR_NOMEM;
		m->r[best].indexed++;
		added++;
	}
}

/* ------------------------------------------------------------- rank cursors */

static int sub_move(struct rank *rk, int dir, struct tm_record *rec)
{
	int err = rk->p->ops->next_event(rk->p, dir, rec);

	if (err == TM_OK)
		rk->at += dir == TM_DIR_FWD ? 1 : (size_t)-1;
	return err;
}

static int same_rec(const struct lrec *l, const struct tm_record *rec)
{
	uint64_t key;

	if (rec->type != l->type)
		return 0;
	key = rec->type == TM_REC_EVENT ? rec->u.event.seq :
	      rec->type == TM_REC_GAP ? rec->u.gap.first_seq : rec->u.crash.seq;
	return key == l->key;
}

/*
 * Puts the rank's cursor after its first c records.  Short moves walk;
 * longer ones seek by the seq of record c and then find it among the next
 * few (a crash shares its seq with the event before it).
 */
static int sub_align(struct rank *rk, size_t c)
{
	struct tm_record rec;
	size_t k;
	int err;

	if (rk->at == c)
		return TM_OK;
	if (c > rk->at && c - rk->at <= ALIGN_WALK) {
		while (rk->at < c)
			if ((err = sub_move(rk, TM_DIR_FWD, &rec)))
				return err;
		return TM_OK;
	}
	if (c < rk->at && rk->at - c <= ALIGN_WALK) {
		while (rk->at > c)
			if ((err = sub_move(rk, TM_DIR_BWD, &rec)))
				return err;
		return TM_OK;
	}
	if (c == 0 || (!rk->live && c == rk->n)) {
		err = rk->p->ops->seek(rk->p, c ? TM_SEEK_END : TM_SEEK_START, 0);
		if (!err)
			rk->at = c;
		return err;
	}
	/* after record c - 1 (a live rank's history may hold more than we know) */
	err = rk->p->ops->seek(rk->p, TM_SEEK_SEQ, rk->recs[c - 1].key);
	if (err)
		return err;
	for (k = 0; k < ALIGN_WALK; k++) {
		if (rk->p->ops->next_event(rk->p, TM_DIR_FWD, &rec))
			break;
		if (same_rec(&rk->recs[c - 1], &rec)) {
			rk->at = c;
			return TM_OK;
		}
	}
	/* Not where the seq said: walk from the start (always right). */
	err = rk->p->ops->seek(rk->p, TM_SEEK_START, 0);
	if (err)
		return err;
	rk->at = 0;
	while (rk->at < c)
		if ((err = sub_move(rk, TM_DIR_FWD, &rec)))
			return err;
	return TM_OK;
}

enum lfield { BY_GPOS, BY_BOUND, BY_STEP };

/*
 * The first of the rank's records on the axis whose field is >= value
 * (every one of these rises along a rank's records).
 */
static size_t first_from(const struct rank *rk, enum lfield f, uint64_t value)
{
	size_t lo = 0, hi = rk->indexed;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct lrec *l = &rk->recs[mid];
		uint64_t v = f == BY_GPOS ? l->gpos : f == BY_BOUND ? l->bound : l->step;

		if (v < value)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Records of rank rk on the axis before position pos. */
static size_t count_before(const struct rank *rk, uint64_t pos)
{
	return first_from(rk, BY_GPOS, pos);
}

/* Rewrites a rank's record onto the merged axis. */
static void translate(struct multi *m, struct rank *rk, struct tm_record *rec,
		      uint64_t gpos)
{
	if (rec->type == TM_REC_EVENT) {
		struct tm_event *e = &rec->u.event;

		e->seq = gpos;
		e->node = map_node(m, rk, e->node);
		e->time_ns += rk->off_ns;
		e->start_ns += rk->off_ns;
		if (e->end_ns)
			e->end_ns += rk->off_ns;
	} else if (rec->type == TM_REC_GAP) {
		rec->u.gap.first_seq = rec->u.gap.last_seq = gpos;
		rec->u.gap.time_ns += rk->off_ns;
	} else {
		rec->u.crash.seq = gpos;
		rec->u.crash.node = map_node(m, rk, rec->u.crash.node);
		rec->u.crash.time_ns += rk->off_ns;
	}
}

/* ------------------------------------------------------------- live */

static int multi_closed(struct tm_probe *p);

/* Takes what every rank sent since; returns records added to the axis,
 * or minus a tm_err. */
static long absorb(struct multi *m)
{
	size_t r, i;
	int err;

	for (r = 0; r < m->nr; r++) {
		struct rank *rk = &m->r[r];
		size_t have = tm_probe_remote_count(rk->p);
		struct tm_record rec;

		if ((err = sync_nodes(m, rk)))
			return -(long)err;
		for (i = rk->n; i < have; i++) {
			if ((err = tm_probe_remote_peek(rk->p, i, &rec)) ||
			    (err = rank_push(rk, &rec)))
				return -(long)err;
		}
	}
	return merge_new(m);
}

/*
 * Reading past the newest record of a live job: every rank that is paused
 * moves, and whatever arrives first is next.  Ctrl-C interrupts every rank
 * (each pauses at its next event, which the scan then stops at); a second
 * one stops waiting.
 */
static int fill(struct multi *m)
{
	struct pollfd *pf = m->pf;
	size_t r, np, paused;
	long got;

	for (;;) {
		got = absorb(m);
		if (got < 0)
			return (int)-got;
		if (got > 0) {
			if (m->int_pending) {
				m->int_pending = 0;
				tm_interrupted = 1;
			}
			return TM_OK;
		}
		if (multi_closed(&m->base))
			return TM_ERR_END;
		if (tm_interrupted && m->int_pending) {
			snprintf(m->detail, sizeof(m->detail),
				 "interrupted while waiting for the model");
			return TM_ERR_AGAIN;
		}
		if (tm_interrupted) {
			for (r = 0; r < m->nr; r++)
				tm_probe_remote_interrupt(m->r[r].p);
			m->int_pending = 1;
			tm_interrupted = 0;
		}
		for (r = paused = 0; r < m->nr; r++) {
			struct tm_probe *p = m->r[r].p;

			if (m->int_pending)
				paused += tm_probe_closed(p) ||
					  tm_probe_remote_paused(p);
			else
				tm_probe_remote_go(p);
		}
		if (m->int_pending && paused == m->nr) {
			/* every rank paused with nothing new: stay where we are */
			m->int_pending = 0;
			snprintf(m->detail, sizeof(m->detail), "interrupted");
			return TM_ERR_AGAIN;
		}
		for (r = np = 0; r < m->nr; r++) {
			int fd = tm_probe_remote_fd(m->r[r].p);

			if (fd < 0)
				continue;
			pf[np].fd = fd;
			pf[np].events = POLLIN;
			pf[np].revents = 0;
			np++;
		}
		if (!np || poll(pf, np, POLL_MS) <= 0)
			continue;
		for (r = 0; r < m->nr; r++)
			tm_probe_remote_pump(m->r[r].p, 0);
	}
}

/* ------------------------------------------------------------- the vtable */

static int multi_describe(struct tm_probe *p, struct tm_probe_info *out)
{
	struct multi *m = impl(p);

	memset(out, 0, sizeof(*out));
	out->kind = m->live ? "live" : "replay";
	out->source = m->source;
	out->can_reverse = 1;
	if (m->live) {
		struct tm_probe_info ri;

		m->r[0].p->ops->describe(m->r[0].p, &ri);
		out->can_pause = ri.can_pause;
		out->can_capture = ri.can_capture;
	}
	out->meta = &m->meta;
	out->summary = m->have_sum ? &m->sum : NULL;
	return TM_OK;
}

static const tm_nodetab *multi_nodes(struct tm_probe *p)
{
	return impl(p)->nodes;
}

static int multi_next(struct tm_probe *p, int dir, struct tm_record *rec)
{
	struct multi *m = impl(p);
	struct gent g;
	struct rank *rk;
	uint64_t at;
	int err;

	if (dir == TM_DIR_BWD) {
		if (!m->pos)
			return TM_ERR_END;
		g = m->idx[m->pos - 1];
		rk = &m->r[g.rank];
		if ((err = sub_align(rk, g.i + 1)) ||
		    (err = sub_move(rk, TM_DIR_BWD, rec)))
			goto fail;
		at = --m->pos;
	} else {
		if (m->pos == m->n) {
			if (!m->live)
				return TM_ERR_END;
			err = fill(m);
			if (err)
				return err;
		}
		g = m->idx[m->pos];
		rk = &m->r[g.rank];
		if ((err = sub_align(rk, g.i)) ||
		    (err = sub_move(rk, TM_DIR_FWD, rec)))
			goto fail;
		at = m->pos++;
	}
	translate(m, rk, rec, at);
	return TM_OK;
fail:
	if (err != TM_ERR_END)
		snprintf(m->detail, sizeof(m->detail), "rank %d: %s", rk->rank,
			 rk->p->ops->detail(rk->p));
	return err == TM_ERR_END ? TM_ERR_CORRUPT : err;
}

/* Puts every rank's cursor where the merged cursor pos says. */
static int place(struct multi *m, size_t pos)
{
	size_t r;
	int err;

	for (r = 0; r < m->nr; r++) {
		err = sub_align(&m->r[r], count_before(&m->r[r], pos));
		if (err) {
			snprintf(m->detail, sizeof(m->detail), "rank %d: %s",
				 m->r[r].rank, m->r[r].p->ops->detail(m->r[r].p));
			return err;
		}
	}
	m->pos = pos;
	return TM_OK;
}

static int multi_seek(struct tm_probe *p, int kind, uint64_t value)
{
	struct multi *m = impl(p);
	size_t pos;

	switch (kind) {
	case TM_SEEK_START:
		return place(m, 0);
	case TM_SEEK_END:
		return place(m, m->n);
	case TM_SEEK_SEQ:
		return place(m, value < m->n ? (size_t)value : m->n);
	case TM_SEEK_STEP:
	case TM_SEEK_TIME:
		/* steps and times rise along the axis only per rank: first hit */
		for (pos = 0; pos < m->n; pos++) {
			const struct lrec *l = &m->r[m->idx[pos].rank].recs[m->idx[pos].i];

			if ((kind == TM_SEEK_STEP ? l->step : l->t) >= value)
				break;
		}
		return place(m, pos);
	default:
		return TM_ERR_INVALID_ARG;
	}
}

/* The merged position of the rank's event with local seq. */
static uint64_t gpos_of_seq(const struct rank *rk, uint64_t seq)
{
	size_t i;

	for (i = first_from(rk, BY_BOUND, seq); i < rk->indexed && rk->recs[i].key <= seq; i++)
		if (rk->recs[i].type == TM_REC_EVENT && rk->recs[i].key == seq)
			return rk->recs[i].gpos;
	return UINT64_MAX;
}

/* A rank's deep-copied answer, onto the merged axis and node table. */
static void found_event(const struct rank *rk, struct tm_event *out, uint32_t node)
{
	out->seq = gpos_of_seq(rk, out->seq);
	out->node = node;
	out->time_ns += rk->off_ns;
	out->start_ns += rk->off_ns;
	if (out->end_ns)
		out->end_ns += rk->off_ns;
}

static int multi_latest(struct tm_probe *p, uint32_t node, int evkind,
			const struct tm_slot *slot, uint32_t call,
			uint64_t at_seq, struct tm_event *out, uint32_t *reason)
{
	struct multi *m = impl(p);
	struct rank *rk;
	uint32_t local;
	uint64_t bound;
	size_t c;
	int err;

	*reason = 0;
	rk = node_rank(m, node, &local);
	if (!rk)
		return TM_ERR_NOT_FOUND;
	c = count_before(rk, at_seq == UINT64_MAX ? UINT64_MAX : at_seq + 1);
	if (!c)
		return TM_ERR_NOT_FOUND;
	bound = rk->recs[c - 1].bound;
	err = rk->p->ops->latest(rk->p, local, evkind, slot, call, bound, out,
				 reason);
	if (err)
		return err;
	found_event(rk, out, node);
	return TM_OK;
}

/* Local records of the rank up to its last record of step. */
static size_t count_to_step(const struct rank *rk, uint64_t step)
{
	return step == UINT64_MAX ? rk->indexed : first_from(rk, BY_STEP, step + 1);
}

static int multi_latest_in_step(struct tm_probe *p, uint32_t node, int evkind,
				const struct tm_slot *slot, uint32_t call,
				uint64_t step, uint64_t at_seq, struct tm_event *out,
				uint32_t *reason, uint64_t *final_from)
{
	struct multi *m = impl(p);
	struct rank *rk;
	uint32_t local;
	size_t c, seen;
	int err;

	*reason = 0;
	*final_from = UINT64_MAX;
	rk = node_rank(m, node, &local);
	if (!rk)
		return TM_ERR_NOT_FOUND;
	c = count_to_step(rk, step);
	/* the rank's first record after the step: from there on it is settled */
	if (c < rk->indexed)
		*final_from = rk->recs[c].gpos;
	seen = count_before(rk, at_seq == UINT64_MAX ? UINT64_MAX : at_seq + 1);
	if (seen < c)
		c = seen;
	if (!c || rk->recs[c - 1].step != step)
		return TM_ERR_NOT_FOUND;
	err = rk->p->ops->latest(rk->p, local, evkind, slot, call,
				 rk->recs[c - 1].bound, out, reason);
	if (err)
		return err;
	if (out->step != step) {
		tm_event_release(out);
		return TM_ERR_NOT_FOUND;
	}
	found_event(rk, out, node);
	return TM_OK;
}

static int multi_capture(struct tm_probe *p, uint32_t node, struct tm_slot slot)
{
	struct multi *m = impl(p);
	struct rank *rk;
	uint32_t local;

	rk = node_rank(m, node, &local);
	if (!rk)
		return TM_ERR_NOT_FOUND;
	return rk->p->ops->capture(rk->p, local, slot);
}

static const char *multi_detail(struct tm_probe *p)
{
	return impl(p)->detail;
}

static void multi_detach(struct tm_probe *p)
{
	struct multi *m = impl(p);
	size_t r;

	if (!m)
		return;
	for (r = 0; r < m->nr; r++) {
		if (m->r[r].p)
			m->r[r].p->ops->detach(m->r[r].p);
		free(m->r[r].map);
		free(m->r[r].recs);
	}
	free(m->r);
	free(m->pf);
	free(m->owner);
	free(m->local);
	free(m->idx);
	tm_nodetab_free(m->nodes);
	free(m->rec_path);
	free(m->source);
	free(m);
}

/*
 * A breakpoint as rank r's probe takes it: @R: qualifiers name one rank
 * (the others do not get it), and the probe's own table has no prefix.
 */
static int for_rank(const char *where, int r, const char **path)
{
	tm_address *a = NULL;
	int ar;

	*path = where;
	if (tm_address_parse(where, &a, NULL, NULL))
		return 1;       /* the probe refuses it and says why */
	ar = tm_address_rank(a);
	tm_address_free(a);
	if (ar >= 0 && ar != r)
		return 0;
	if (*where == '@')
		*path = strchr(where, ':') + 1;
	return 1;
}

static int multi_flow(struct tm_probe *p, int ahead,
		      const struct tm_probe_bp *bps, size_t n)
{
	struct multi *m = impl(p);
	struct tm_probe_bp *mine = NULL;
	size_t r, i, k;
	int all = ahead;

	if (!m->live)
		return 0;
	if (n) {
		mine = calloc(n, sizeof(*mine));
		if (!mine)
			ahead = all = 0;
	}
	/*
	 * all-stop: when the session stops, every rank pauses at its next
	 * event.  Non-stop: only the rank of the event it stopped at; the
	 * others keep running to their own breakpoints.
	 */
	for (r = 0; r < m->nr; r++) {
		struct rank *rk = &m->r[r];

		if (!ahead && m->non_stop && m->pos &&
		    m->idx[m->pos - 1].rank != (uint32_t)r)
			continue;

		for (i = k = 0; ahead && i < n; i++) {
			const char *path;

			if (!for_rank(bps[i].where, rk->rank, &path))
				continue;
			mine[k] = bps[i];
			mine[k++].where = path;
		}
		if (!rk->p->ops->flow(rk->p, ahead, mine, ahead ? k : 0))
			all = 0;
	}
	free(mine);
	return all;
}

/* every rank's probe gets the same op patterns (their paths have no @R:) */
static int multi_set_ops(struct tm_probe *p, const char *patterns)
{
	struct multi *m = impl(p);
	size_t r;
	int err;

	if (!m->live)
		return TM_ERR_UNSUPPORTED;
	for (r = 0; r < m->nr; r++) {
		struct rank *rk = &m->r[r];

		if (!rk->p->ops->set_ops)
			continue;
		err = rk->p->ops->set_ops(rk->p, patterns);
		if (err) {
			snprintf(m->detail, sizeof(m->detail), "rank %d: %s",
				 rk->rank, rk->p->ops->detail(rk->p));
			return err;
		}
	}
	return TM_OK;
}

static int multi_set_level(struct tm_probe *p, const char *pattern, int level)
{
	struct multi *m = impl(p);
	size_t r;
	int err, any = 0;

	if (!m->live)
		return TM_ERR_UNSUPPORTED;
	for (r = 0; r < m->nr; r++) {
		struct rank *rk = &m->r[r];
		const char *path;

		if (*pattern && !for_rank(pattern, rk->rank, &path))
			continue;
		err = rk->p->ops->set_level(rk->p, *pattern ? path : pattern, level);
		if (err) {
			snprintf(m->detail, sizeof(m->detail), "rank %d: %s",
				 rk->rank, rk->p->ops->detail(rk->p));
			return err;
		}
		any = 1;
	}
	return any ? TM_OK : TM_ERR_NOT_FOUND;
}

/*
 * record FILE of a live job: one .tmrun per rank, named as the probe names
 * them (tm_manifest_rank_path), and the manifest that replays them together.
 */
static int multi_record(struct tm_probe *p, const char *path)
{
	struct multi *m = impl(p);
	char **files;
	size_t r, started = 0;
	int err = TM_OK;

	if (!path) {
		for (r = 0; r < m->nr; r++) {
			const char *note;
			uint64_t n;
			int e;

			/* a rank whose recording stopped on its own has said so
			 * (multi_recording's note): stop the others */
			if (!tm_probe_recording(m->r[r].p, &n, &note))
				continue;
			e = m->r[r].p->ops->record(m->r[r].p, NULL);
			if (e && !err)
				err = e;
		}
		snprintf(m->detail, sizeof(m->detail), "%s", m->rec_path ? m->rec_path : "");
		free(m->rec_path);
		m->rec_path = NULL;
		return err;
	}
	if (m->rec_path) {
		/* as one process's probe answers: the ranks are recording */
		snprintf(m->detail, sizeof(m->detail), "already recording to %.400s",
			 m->rec_path);
		return TM_ERR_INVALID_ARG;
	}
	files = calloc(m->nr, sizeof(*files));
	m->rec_path = malloc(PATH_MAX);
	if (!files || !m->rec_path ||
	    tm_manifest_path(path, m->rec_path, PATH_MAX)) {
		free(files);
		free(m->rec_path);
		m->rec_path = NULL;
		return TM_ERR_NOMEM;
	}
	for (r = 0; !err && r < m->nr; r++) {
		struct rank *rk = &m->r[r];

		files[r] = malloc(PATH_MAX);
		if (!files[r] || tm_manifest_rank_path(path, rk->rank, files[r], PATH_MAX))
			err = TM_ERR_TOO_LARGE;
		else if ((err = rk->p->ops->record(rk->p, files[r])))
			snprintf(m->detail, sizeof(m->detail), "rank %d: %s", rk->rank,
				 rk->p->ops->detail(rk->p));
		else
			started++;
	}
	if (!err) {
		/* the manifest names the files relative to its own directory */
		const char **names = calloc(m->nr, sizeof(*names));

		for (r = 0; names && r < m->nr; r++) {
			const char *slash = strrchr(files[r], '/');

			names[r] = slash ? slash + 1 : files[r];
		}
		err = names ? tm_manifest_write(m->rec_path, (int32_t)m->nr, names) :
			      TM_ERR_NOMEM;
		free(names);
		if (err)
			snprintf(m->detail, sizeof(m->detail), "%s: %s", m->rec_path,
				 tm_strerror(err));
	}
	for (r = 0; r < m->nr; r++)
		free(files[r]);
	free(files);
	if (err) {
		for (r = 0; r < started; r++)
			m->r[r].p->ops->record(m->r[r].p, NULL);
		free(m->rec_path);
		m->rec_path = NULL;
	}
	return err;
}

static int multi_nranks(struct tm_probe *p)
{
	return (int)impl(p)->nr;
}

static int multi_rank_of(struct tm_probe *p, uint64_t seq)
{
	struct multi *m = impl(p);

	if (seq >= m->n)
		return -1;
	return m->r[m->idx[seq].rank].rank;
}

/* The rank's own probe knows its steps: ev in its node ids. */
static const struct tm_annot *multi_annotation(struct tm_probe *p,
					       const struct tm_event *ev,
					       const char *key)
{
	struct multi *m = impl(p);
	struct tm_event local_ev;
	struct rank *rk;
	uint32_t local;

	rk = node_rank(m, ev->node, &local);
	if (!rk || !rk->p->ops->annotation)
		return NULL;
	local_ev = *ev;
	local_ev.node = local;
	return rk->p->ops->annotation(rk->p, &local_ev, key);
}

/* ------------------------------------------------------------- the job's processes */

static uint32_t multi_pid(struct tm_probe *p)
{
	return tm_probe_pid(impl(p)->r[0].p);
}

static int multi_closed(struct tm_probe *p)
{
	struct multi *m = impl(p);
	size_t r;

	for (r = 0; r < m->nr; r++)
		if (!tm_probe_closed(m->r[r].p))
			return 0;
	return 1;
}

/* Once every rank's connection has ended: the first reason says it. */
static const char *multi_end_note(struct tm_probe *p)
{
	struct multi *m = impl(p);
	const char *note = NULL, *n;
	size_t r;

	if (!multi_closed(p))
		return NULL;
	for (r = 0; r < m->nr; r++)
		if ((n = tm_probe_end_note(m->r[r].p)) && !note)
			note = n;
	return note;
}

static const char *multi_process(struct tm_probe *p)
{
	struct multi *m = impl(p);
	size_t r, off;

	off = (size_t)snprintf(m->desc, sizeof(m->desc), "%zu ranks", m->nr);
	for (r = 0; r < m->nr && off < sizeof(m->desc); r++)
		off += (size_t)snprintf(m->desc + off, sizeof(m->desc) - off,
					"%s%u", r ? ", " : " (processes ",
					tm_probe_pid(m->r[r].p));
	if (off < sizeof(m->desc))
		snprintf(m->desc + off, sizeof(m->desc) - off, ")");
	return m->desc;
}

/* What record FILE of a live job writes: the manifest, and events so far. */
static const char *multi_recording(struct tm_probe *p, uint64_t *events,
				   const char **note)
{
	struct multi *m = impl(p);
	const char *rn;
	uint64_t n;
	size_t r;

	*events = 0;
	*note = NULL;
	if (!m->rec_path)
		return NULL;
	for (r = 0; r < m->nr; r++) {
		tm_probe_recording(m->r[r].p, &n, &rn);
		*events += n;
		/* a rank whose file failed: the manifest names a broken file */
		if (rn && !*note) {
			snprintf(m->rec_note, sizeof(m->rec_note), "Rank %d: %s",
				 m->r[r].rank, rn);
			*note = m->rec_note;
		}
	}
	return m->rec_path;
}

/*
 * A paused rank finishes its recording and dies (wire KILL).  A rank that
 * is running is most likely waiting in a collective for a paused one, sends
 * no event that would let it see KILL, and would print the peer's death as
 * a traceback: it dies of SIGKILL first, and its trace is one a reader
 * scans.
 */
static void multi_kill(struct tm_probe *p)
{
	struct multi *m = impl(p);
	size_t r;

	for (r = 0; r < m->nr; r++) {
		struct tm_probe *sub = m->r[r].p;
		pid_t pid = (pid_t)tm_probe_pid(sub);

		if (!tm_probe_closed(sub) && !tm_probe_remote_paused(sub) && pid > 1)
			kill(pid, SIGKILL);
	}
	for (r = 0; r < m->nr; r++)
		if (tm_probe_remote_paused(m->r[r].p))
			tm_probe_kill(m->r[r].p);
}

static const struct tm_probe_process_ops multi_process_ops = {
	.kill = multi_kill,
	.pid = multi_pid,
	.closed = multi_closed,
	.end_note = multi_end_note,
	.describe = multi_process,
	.recording = multi_recording,
};

/* What a replayed and a live job share; a replay has no process to move,
 * set levels in or record from. */
#define MULTI_OPS \
	.name = "multi", \
	.describe = multi_describe, \
	.nodes = multi_nodes, \
	.next_event = multi_next, \
	.seek = multi_seek, \
	.latest = multi_latest, \
	.capture = multi_capture, \
	.detail = multi_detail, \
	.detach = multi_detach, \
	.nranks = multi_nranks, \
	.rank_of = multi_rank_of, \
	.latest_in_step = multi_latest_in_step, \
	.annotation = multi_annotation

static const struct tm_probe_ops multi_replay_ops = {
	MULTI_OPS,
};

static const struct tm_probe_ops multi_live_ops = {
	MULTI_OPS,
	.process = &multi_process_ops,
	.flow = multi_flow,
	.set_level = multi_set_level,
	.set_ops = multi_set_ops,
	.record = multi_record,
};

/* ------------------------------------------------------------- opening */

static int fail(struct multi *m, int err, char **detail)
{
	if (detail && !*detail)
		*detail = strdup(m->detail[0] ? m->detail : tm_strerror(err));
	multi_detach(&m->base);
	return err;
}

/* Reads a replayed rank whole into its record list. */
static int scan_rank(struct multi *m, struct rank *rk)
{
	struct tm_record rec;
	int err;

	err = rk->p->ops->seek(rk->p, TM_SEEK_START, 0);
	while (!err && (err = rk->p->ops->next_event(rk->p, TM_DIR_FWD, &rec)) == TM_OK)
		err = rank_push(rk, &rec);
	if (err != TM_ERR_END) {
		snprintf(m->detail, sizeof(m->detail), "rank %d: %s", rk->rank,
			 rk->p->ops->detail(rk->p));
		return err ? err : TM_ERR_CORRUPT;
	}
	rk->at = rk->n;
	return TM_OK;
}

static void sum_add(struct multi *m, const struct tm_summary *s, int first)
{
	struct tm_summary *t = &m->sum;

	if (first) {
		*t = *s;
		return;
	}
	t->indexed = t->indexed && s->indexed;
	t->complete = t->complete && s->complete;
	if (s->damaged && !t->damaged) {
		t->damaged = 1;
		t->damage_err = s->damage_err;
		t->damage_offset = s->damage_offset;
	}
	t->nchunks += s->nchunks;
	t->nevents += s->nevents;
	t->ngaps += s->ngaps;
	t->ncrashes += s->ncrashes;
	t->nrecords += s->nrecords;
	if (s->nevents && (!t->nevents || s->first_step < t->first_step))
		t->first_step = s->first_step;
	if (s->last_step > t->last_step)
		t->last_step = s->last_step;
	t->file_bytes += s->file_bytes;
	t->uncompressed_bytes += s->uncompressed_bytes;
}

/*
 * Every rank was asked to pause at its next event when tmdb connected; waits
 * (a few seconds at most) until each has, so that the job starts from a
 * known state: the first read past the end resumes them all, and a stop in
 * non-stop mode leaves no rank held by that first pause.
 */
static void settle(struct multi *m)
{
	size_t r, paused;
	int waited;

	for (waited = 0; waited < SETTLE_MS && !tm_interrupted; waited += POLL_MS / 10) {
		for (r = paused = 0; r < m->nr; r++)
			paused += tm_probe_closed(m->r[r].p) ||
				  tm_probe_remote_paused(m->r[r].p);
		if (paused == m->nr)
			return;
		usleep(POLL_MS * 100);
	}
}

int tm_probe_multi_new(struct tm_probe **subs, size_t n, const char *source,
		       struct tm_probe **out, char **detail)
{
	struct multi *m;
	uint64_t t0 = UINT64_MAX;
	size_t r;
	int err;

	*out = NULL;
	if (detail)
		*detail = NULL;
	m = calloc(1, sizeof(*m));
	if (!m) {
		for (r = 0; r < n; r++)
			subs[r]->ops->detach(subs[r]);
		return TM_ERR_NOMEM;
	}
	m->base.ops = &multi_replay_ops;
	m->r = calloc(n ? n : 1, sizeof(*m->r));
	m->pf = calloc(n ? n : 1, sizeof(*m->pf));
	m->nodes = tm_nodetab_new();
	m->source = strdup(source);
	if (!m->r || !m->pf || !m->nodes || !m->source) {
		for (r = 0; r < n; r++)
			subs[r]->ops->detach(subs[r]);
		return fail(m, TM_ERR_NOMEM, detail);
	}
	/* all taken over first: a refusal below detaches every one */
	m->nr = n;
	for (r = 0; r < n; r++)
		m->r[r].p = subs[r];
	for (r = 0; r < n; r++) {
		struct tm_probe_info pi;

		subs[r]->ops->describe(subs[r], &pi);
		m->r[r].live = !strcmp(pi.kind, "live");
		m->r[r].rank = (int)r;
		if (pi.meta && pi.meta->start_unix_ns && pi.meta->start_unix_ns < t0)
			t0 = pi.meta->start_unix_ns;
		/* a manifest naming the wrong file for a rank would merge two
		 * copies of one rank's nodes into one table */
		if (pi.meta && pi.meta->rank >= 0 && pi.meta->rank != (int32_t)r) {
			snprintf(m->detail, sizeof(m->detail), "rank %zu: %s was recorded "
				 "by rank %d", r, pi.source ? pi.source : "its trace",
				 (int)pi.meta->rank);
			return fail(m, TM_ERR_CORRUPT, detail);
		}
	}
	m->live = m->r[0].live;
	if (m->live)
		m->base.ops = &multi_live_ops;
	for (r = 0; r < n; r++) {
		struct rank *rk = &m->r[r];
		struct tm_probe_info pi;

		rk->p->ops->describe(rk->p, &pi);
		if (!r && pi.meta) {
			m->meta = *pi.meta;
			m->meta.npairs = 0;
		}
		if (pi.meta && pi.meta->start_unix_ns && t0 != UINT64_MAX)
			rk->off_ns = pi.meta->start_unix_ns - t0;
		if (pi.summary) {
			sum_add(m, pi.summary, !m->have_sum);
			m->have_sum = 1;
		}
		err = sync_nodes(m, rk);
		if (!err && !m->live)
			err = scan_rank(m, rk);
		if (err)
			return fail(m, err, detail);
	}
	if (m->live)
		settle(m);
	m->meta.rank = -1;
	m->meta.world_size = (int32_t)n;
	if (merge_new(m) < 0)
		return fail(m, TM_ERR_NOMEM, detail);
	if (m->have_sum) {
		m->sum.first_seq = 0;
		m->sum.last_seq = m->n ? m->n - 1 : 0;
	}
	err = place(m, 0);
	if (err)
		return fail(m, err, detail);
	*out = &m->base;
	return TM_OK;
}

/* A directory: the one manifest in it. */
int tm_probe_multi_find_manifest(const char *dir, char **path, char **detail)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	size_t found = 0;
	char *p = NULL;

	if (!d) {
		if (asprintf(detail, "%s: %s.", dir, strerror(errno)) < 0)
			*detail = NULL;
		return TM_ERR_IO;
	}
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);

		if (len > 9 && !strcmp(de->d_name + len - 9, ".manifest")) {
			found++;
			free(p);
			if (asprintf(&p, "%s/%s", dir, de->d_name) < 0)
				p = NULL;
		}
	}
	closedir(d);
	if (found != 1) {
		free(p);
		if (asprintf(detail, "%s: %s run manifest (*.manifest) in this "
			     "directory.", dir, found ? "more than one" : "no") < 0)
			*detail = NULL;
		return TM_ERR_NOT_FOUND;
	}
	*path = p;
	return p ? TM_OK : TM_ERR_NOMEM;
}

int tm_probe_multi_open(const char *path, struct tm_probe **out, char **detail)
{
	struct tm_manifest *mf = NULL;
	struct tm_probe **subs;
	struct stat st;
	char *mpath = NULL;
	int32_t r;
	int err;

	*out = NULL;
	*detail = NULL;
	if (!stat(path, &st) && S_ISDIR(st.st_mode)) {
		err = tm_probe_multi_find_manifest(path, &mpath, detail);
		if (err)
			return err;
	}
	err = tm_manifest_read(mpath ? mpath : path, &mf, detail);
	free(mpath);
	if (err)
		return err;
	subs = calloc((size_t)mf->world_size, sizeof(*subs));
	if (!subs) {
		tm_manifest_free(mf);
		return TM_ERR_NOMEM;
	}
	for (r = 0; r < mf->world_size; r++) {
		char *d = NULL;

		err = tm_probe_replay_open(mf->paths[r], &subs[r], &d);
		if (err) {
			if (asprintf(detail, "rank %d: %s", r, d ? d : tm_strerror(err)) < 0)
				*detail = NULL;
			free(d);
			while (r-- > 0)
				subs[r]->ops->detach(subs[r]);
			free(subs);
			tm_manifest_free(mf);
			return err;
		}
	}
	err = tm_probe_multi_new(subs, (size_t)mf->world_size, path, out, detail);
	free(subs);
	tm_manifest_free(mf);
	return err;
}

/* 1 if the file starts like a manifest, or is a directory. */
int tm_probe_multi_is_manifest(const char *path)
{
	static const char magic[] = "tmrun-manifest";
	char buf[256];
	struct stat st;
	size_t got, i;
	FILE *f;

	if (stat(path, &st))
		return 0;
	if (S_ISDIR(st.st_mode))
		return 1;
	if (!S_ISREG(st.st_mode))
		return 0;       /* a FIFO would block here: the reader refuses it */
	f = fopen(path, "rb");
	if (!f)
		return 0;
	got = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[got] = 0;
	/* comment lines may come first */
	for (i = 0; i < got;) {
		if (buf[i] == '#' || buf[i] == '\n' || buf[i] == ' ') {
			while (i < got && buf[i] != '\n')
				i++;
			i++;
			continue;
		}
		return !strncmp(buf + i, magic, sizeof(magic) - 1);
	}
	return 0;
}

/* ------------------------------------------------------------- inferiors */

struct tm_probe *tm_probe_multi_sub(struct tm_probe *p, size_t i, int *rank)
{
	struct multi *m = as_multi(p);

	if (!m || i >= m->nr)
		return NULL;
	if (rank)
		*rank = m->r[i].rank;
	return m->r[i].p;
}

void tm_probe_multi_set_non_stop(struct tm_probe *p, int on)
{
	struct multi *m = as_multi(p);

	if (m)
		m->non_stop = on;
}
