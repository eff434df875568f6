/*
 * compare.c -- aligning a run with a reference recording (tm-compare.h).
 *
 * The reference is read one step at a time into a window: the step's
 * events (stats only: contents are read back on demand), hashed by (node,
 * call, kind, op index).  A run read forwards asks for steps in order, and
 * the window then follows the reader without seeking (the record read past
 * the step's end is kept for the next one); a run read in any other order
 * costs a seek by step per step change.  Memory is one step's events.
 */
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "tm-internal.h"
#include "tm-address.h"
#include "tm-compare.h"
#include "tm-stats.h"

/* ------------------------------------------------------------- map */

struct cmp_rule {
	char *text;             /* "RUN=REF" */
	char **run, **ref;      /* segments */
	size_t nrun, nref;
};

struct tm_cmp_map {
	struct cmp_rule *rules;
	size_t n;
};

tm_cmp_map *tm_cmp_map_new(void)
{
	return calloc(1, sizeof(tm_cmp_map));
}

static void segs_free(char **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

void tm_cmp_map_free(tm_cmp_map *m)
{
	size_t i;

	if (!m)
		return;
	for (i = 0; i < m->n; i++) {
		free(m->rules[i].text);
		segs_free(m->rules[i].run, m->rules[i].nrun);
		segs_free(m->rules[i].ref, m->rules[i].nref);
	}
	free(m->rules);
	free(m);
}

static char *fmt_error(const char *fmt, const char *a, const char *b)
{
	size_t len = strlen(fmt) + strlen(a) + strlen(b) + 1;
	char *e = malloc(len);

	if (e)
		snprintf(e, len, fmt, a, b);
	return e;
}

/* Splits "a.b.*" into segments; an empty text gives none.  -1: bad. */
static int split(const char *s, size_t len, char ***out, size_t *n)
{
	char **v = NULL;
	size_t k = 0, i = 0;

	*out = NULL;
	*n = 0;
	if (!len)
		return 0;
	while (i <= len) {
		size_t j = i;
		char **nv;

		while (j < len && s[j] != '.')
			j++;
		if (j == i)
			goto bad;
		nv = realloc(v, (k + 1) * sizeof(*v));
		if (!nv)
			goto bad;
		v = nv;
		v[k] = strndup(s + i, j - i);
		if (!v[k])
			goto bad;
		if (strchr(v[k], '*') && strcmp(v[k], "*")) {
			k++;
			goto bad;
		}
		k++;
		i = j + 1;
	}
	*out = v;
	*n = k;
	return 0;
bad:
	segs_free(v, k);
	return -1;
}

static size_t stars(char **v, size_t n)
{
	size_t i, c = 0;

	for (i = 0; i < n; i++)
		c += !strcmp(v[i], "*");
	return c;
}

int tm_cmp_map_add(tm_cmp_map *m, const char *rule, char **error)
{
	const char *eq;
	struct cmp_rule r, *nr;
	size_t lhs;

	if (error)
		*error = NULL;
	if (!m || !rule)
		return TM_ERR_INVALID_ARG;
	memset(&r, 0, sizeof(r));
	eq = strchr(rule, '=');
	if (!eq || strchr(eq + 1, '=')) {
		if (error)
			*error = fmt_error("map rule '%s%s': write it RUN=REF "
					   "(one '=')", rule, "");
		return TM_ERR_ADDRESS;
	}
	lhs = (size_t)(eq - rule);
	if (split(rule, lhs, &r.run, &r.nrun) || !r.nrun ||
	    split(eq + 1, strlen(eq + 1), &r.ref, &r.nref)) {
		if (error)
			*error = fmt_error("map rule '%s': %s", rule,
					   "each side is a dotted address whose "
					   "segments are names or '*' (the left one "
					   "not empty)");
		goto fail;
	}
	if (r.nref && stars(r.run, r.nrun) != stars(r.ref, r.nref)) {
		if (error)
			*error = fmt_error("map rule '%s': %s", rule,
					   "both sides need as many '*'");
		goto fail;
	}
	r.text = strdup(rule);
	nr = r.text ? realloc(m->rules, (m->n + 1) * sizeof(*nr)) : NULL;
	if (!nr) {
		free(r.text);
		segs_free(r.run, r.nrun);
		segs_free(r.ref, r.nref);
		return TM_ERR_NOMEM;
	}
	m->rules = nr;
	m->rules[m->n++] = r;
	return TM_OK;
fail:
	segs_free(r.run, r.nrun);
	segs_free(r.ref, r.nref);
	return TM_ERR_ADDRESS;
}

size_t tm_cmp_map_count(const tm_cmp_map *m)
{
	return m ? m->n : 0;
}

const char *tm_cmp_map_rule(const tm_cmp_map *m, size_t i)
{
	return m && i < m->n ? m->rules[i].text : NULL;
}

static int put(char *buf, size_t len, size_t *at, const char *s, size_t n)
{
	if (*at + n + 1 > len)
		return -1;
	memcpy(buf + *at, s, n);
	*at += n;
	buf[*at] = 0;
	return 0;
}

int tm_cmp_map_apply(const tm_cmp_map *m, const char *addr, char *buf, size_t len)
{
	const char *segs[TM_ADDRESS_MAX_SEGMENTS + 1];
	size_t seglen[TM_ADDRESS_MAX_SEGMENTS + 1];
	const char *path = addr, *p;
	size_t nseg = 0, i, r, at = 0;

	if (!addr || !buf || !len)
		return TM_ERR_INVALID_ARG;
	buf[0] = 0;
	/* "@1:model.fc": the rank prefix passes through */
	if (addr[0] == '@' && (p = strchr(addr, ':')) != NULL) {
		if (put(buf, len, &at, addr, (size_t)(p + 1 - addr)))
			return TM_ERR_TOO_LARGE;
		path = p + 1;
	}
	for (p = path; nseg <= TM_ADDRESS_MAX_SEGMENTS;) {
		const char *q = strchr(p, '.');

		segs[nseg] = p;
		seglen[nseg++] = q ? (size_t)(q - p) : strlen(p);
		if (!q)
			break;
		p = q + 1;
	}
	for (r = 0; m && r < m->n; r++) {
		const struct cmp_rule *ru = &m->rules[r];
		const char *cap[TM_ADDRESS_MAX_SEGMENTS + 1];
		size_t caplen[TM_ADDRESS_MAX_SEGMENTS + 1], nc = 0, k = 0;

		if (ru->nrun > nseg)
			continue;
		for (i = 0; i < ru->nrun; i++) {
			if (!strcmp(ru->run[i], "*")) {
				cap[nc] = segs[i];
				caplen[nc++] = seglen[i];
			} else if (strlen(ru->run[i]) != seglen[i] ||
				   memcmp(ru->run[i], segs[i], seglen[i])) {
				break;
			}
		}
		if (i < ru->nrun)
			continue;
		if (!ru->nref)
			return TM_ERR_NOT_FOUND;
		for (i = 0; i < ru->nref; i++) {
			const char *s = ru->ref[i];
			size_t n = strlen(s);

			if (!strcmp(s, "*")) {
				s = cap[k];
				n = caplen[k++];
			}
			if ((i && put(buf, len, &at, ".", 1)) || put(buf, len, &at, s, n))
				return TM_ERR_TOO_LARGE;
		}
		for (i = ru->nrun; i < nseg; i++)
			if (put(buf, len, &at, ".", 1) ||
			    put(buf, len, &at, segs[i], seglen[i]))
				return TM_ERR_TOO_LARGE;
		return TM_OK;
	}
	return put(buf, len, &at, path, strlen(path)) ? TM_ERR_TOO_LARGE : TM_OK;
}

/* ------------------------------------------------------------- aligner */

/* A run address's reference node, kept by address. */
#define NCACHE 1024
struct name_ent {
	char *addr;             /* NULL: empty */
	uint32_t ref;           /* reference node id, or TM_NODE_NONE */
	uint32_t reason;        /* TM_REF_NO_NODE / TM_REF_UNMAPPED when NONE */
	uint32_t nnodes;        /* the reference's node count when looked up */
};

/*
 * One step of the reference: its events, their tensors without contents,
 * and the reasons of the gaps inside it.  Until win_fix, an event's
 * tensors field holds the offset of its first tensor in ts (the array
 * moves as it grows).
 */
struct win {
	uint64_t step;
	uint32_t gap_reason;
	int end;                /* prefetch: the reference ended (err: how) */
	int err;
	struct tm_event *ev;
	size_t nev, evcap;
	struct tm_tensor *ts;
	size_t nts, tscap;
};

/*
 * Prefetch (tm_align_set_prefetch): a thread reads the reference forwards
 * with a reader of its own into whole step windows, PF_WINS of them in
 * all, so that a forward scan decodes the two recordings side by side.
 */
#define PF_WINS 8
/*
 * A side that waits is woken once half the windows are ready for it, not
 * at each one: with steps of a hundred events a wake-up per step (a
 * futex and a context switch on each side) cost more than it saved.
 */
#define PF_BATCH (PF_WINS / 2)
struct pf {
	pthread_t th;
	tm_reader *r;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct win *q[PF_WINS];         /* made, in step order */
	size_t qh, qn;
	struct win *free[PF_WINS];
	size_t nfree;
	int stop;
	int cwait, pwait;               /* the consumer / the thread waits */
	struct win *held;               /* popped, for a later step */
	int ended;
	int served;                     /* a step was served: last is it */
	uint64_t last;
	struct win wins[PF_WINS];
};

struct tm_align {
	tm_reader *r;
	tm_cmp_map *map;
	struct name_ent cache[NCACHE];

	/* the window: one step of the reference */
	int have;               /* a step is loaded */
	struct win cur;
	uint8_t *hit;           /* per window event: aligned with a run event */
	size_t hitcap;
	uint32_t *hash;         /* index + 1 into cur.ev; 0 empty */
	size_t hcap;
	void (*unmatched)(void *user, const struct tm_event *ref);
	void *unmatched_user;

	/* the record read past the window's end: the reader sits after it */
	int ahead;              /* 1: ahead_ev is valid and the reader follows it */
	struct tm_event ahead_ev;
	struct tm_tensor *ahead_ts;
	size_t ahead_cap;

	struct pf *pf;          /* prefetching, NULL: reads on demand */

	struct byreq *rq;       /* aligning by request ids, NULL: by step */

	/* reference steps read for requests' rows (tm_align_tensor), a few
	 * at once: a batched run step's rows align with as many steps */
	struct rwin *rw;
	size_t nrw;
	uint64_t tick;
};

/* A window of the row cache. */
struct rwin {
	int have;
	uint64_t used;          /* tick of its last use */
	struct win w;
	uint8_t *hit;
	size_t hitcap;
	uint32_t *hash;
	size_t hcap;
};
#define RW_WINS 64

/*
 * Aligning by request ids (tm_align_set_requests).  The reference's side,
 * read once: (request id, k) -> the step of that request's k-th forward,
 * and step -> how many requests it served.  The run's side, built as its
 * steps are asked for, in step order: each request's forwards so far, and
 * what each run step aligns with.
 */
struct rq_ent {
	char *id;               /* NULL: empty */
	uint32_t k;             /* the forward of the request, from 1 */
	uint32_t idx;           /* its place in the step's ids */
	uint64_t step;
};

struct step_ent {
	uint64_t step;
	uint32_t n;             /* requests served (the annotation's count) */
	int used;
};

/* Where one request of a run step had the same forward in the reference. */
struct rq_row {
	uint64_t ref;           /* the reference step */
	uint32_t idx;           /* the request's place in its ids */
	uint32_t n;             /* requests that step served */
	int found;
};

struct run_step {
	uint64_t ref;           /* the reference step */
	uint32_t reason;        /* TM_REF_BATCH / 0 */
	uint32_t count;         /* requests the step served (the annotation's) */
	struct rq_row *rows;    /* by request, as far as ids were kept */
	uint32_t nrows;
};

struct byreq {
	const struct tm_annot *(*fn)(void *user, const struct tm_event *ev, uint64_t step);
	void *user;
	int built;              /* the reference's side is read */
	int any;                /* the reference has request ids */
	struct rq_ent *ref;     /* open addressing */
	size_t nref, capref;
	struct step_ent *steps;
	size_t nsteps, capsteps;
	struct rq_ent *run;     /* id -> forwards so far (k) */
	size_t nrun, caprun;
	struct run_step *map;   /* by run step */
	size_t mapcap;
	uint64_t first, next;   /* run steps [first, next) are mapped; first 0 */
};

static void win_free(struct win *w)
{
	free(w->ev);
	free(w->ts);
	memset(w, 0, sizeof(*w));
}

static void pf_stop(tm_align *a);

int tm_align_new(tm_reader *ref, const tm_cmp_map *map, tm_align **out)
{
	tm_align *a;
	size_t i;

	if (!ref || !out)
		return TM_ERR_INVALID_ARG;
	*out = NULL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return TM_ERR_NOMEM;
	a->map = tm_cmp_map_new();
	if (!a->map) {
		free(a);
		return TM_ERR_NOMEM;
	}
	for (i = 0; map && i < map->n; i++) {
		int rc = tm_cmp_map_add(a->map, map->rules[i].text, NULL);

		if (rc) {
			tm_cmp_map_free(a->map);
			free(a);
			return rc;
		}
	}
	a->r = ref;
	/* the window keeps stats: the reference's histograms are read past */
	tm_reader_skip_hist(ref, 1);
	*out = a;
	return TM_OK;
}

static void byreq_free(struct byreq *q)
{
	size_t i;

	if (!q)
		return;
	for (i = 0; i < q->capref; i++)
		free(q->ref[i].id);
	for (i = 0; i < q->caprun; i++)
		free(q->run[i].id);
	free(q->ref);
	free(q->run);
	free(q->steps);
	for (i = 0; q->map && i < q->next - q->first; i++)
		free(q->map[i].rows);
	free(q->map);
	free(q);
}

void tm_align_free(tm_align *a)
{
	size_t i;

	if (!a)
		return;
	pf_stop(a);
	byreq_free(a->rq);
	for (i = 0; i < a->nrw; i++) {
		win_free(&a->rw[i].w);
		free(a->rw[i].hit);
		free(a->rw[i].hash);
	}
	free(a->rw);
	for (i = 0; i < NCACHE; i++)
		free(a->cache[i].addr);
	tm_reader_close(a->r);
	tm_cmp_map_free(a->map);
	win_free(&a->cur);
	free(a->hash);
	free(a->hit);
	free(a->ahead_ts);
	free(a);
}

tm_reader *tm_align_reader(tm_align *a)
{
	return a ? a->r : NULL;
}

const tm_cmp_map *tm_align_map(const tm_align *a)
{
	return a ? a->map : NULL;
}

static uint64_t fnv(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return h;
}

static int ref_node(tm_align *a, const char *addr, uint32_t *id, uint32_t *reason)
{
	struct name_ent *e = &a->cache[fnv(addr) % NCACHE];
	char buf[TM_ADDRESS_MAX + 1];
	const struct tm_node *n;
	uint32_t count = tm_nodetab_count(tm_reader_nodes(a->r));
	int rc;

	/* a node not there is looked for again once the table has more */
	if (!e->addr || strcmp(e->addr, addr) ||
	    (e->reason == TM_REF_NO_NODE && e->nnodes != count)) {
		char *copy = strdup(addr);

		if (!copy)
			return TM_ERR_NOMEM;
		free(e->addr);
		e->addr = copy;
		rc = tm_cmp_map_apply(a->map, addr, buf, sizeof(buf));
		e->ref = TM_NODE_NONE;
		e->nnodes = count;
		if (rc == TM_ERR_NOT_FOUND) {
			e->reason = TM_REF_UNMAPPED;
		} else if (rc) {
			e->reason = TM_REF_NO_NODE;
		} else {
			n = tm_nodetab_find(tm_reader_nodes(a->r), buf);
			e->ref = n ? n->id : TM_NODE_NONE;
			e->reason = n ? 0 : TM_REF_NO_NODE;
		}
	}
	*id = e->ref;
	*reason = e->reason;
	return TM_OK;
}

static uint64_t ev_key(uint32_t node, uint32_t call, uint8_t kind, uint32_t op)
{
	uint64_t h = ((uint64_t)node << 32) ^ ((uint64_t)call * 0x9e3779b97f4a7c15ull) ^
		     ((uint64_t)kind << 24) ^ ((uint64_t)op * 0xc2b2ae3d27d4eb4full);

	h ^= h >> 31;
	h *= 0xbf58476d1ce4e5b9ull;
	return h ^ (h >> 29);
}

static int same_key(const struct tm_event *e, uint32_t node, uint32_t call,
		    uint8_t kind, uint32_t op)
{
	return e->node == node && e->call == call && e->kind == kind &&
	       e->op_index == op;
}

static void win_reset(struct win *w, uint64_t step)
{
	w->step = step;
	w->gap_reason = 0;
	w->end = 0;
	w->err = 0;
	w->nev = w->nts = 0;
}

/* Appends ev (tensors without contents) to w. */
static int win_add(struct win *w, const struct tm_event *ev)
{
	size_t i;

	if (w->nev == w->evcap) {
		size_t cap = w->evcap ? w->evcap * 2 : 256;
		struct tm_event *p = realloc(w->ev, cap * sizeof(*p));

		if (!p)
			return TM_ERR_NOMEM;
		w->ev = p;
		w->evcap = cap;
	}
	if (w->nts + ev->ntensors > w->tscap) {
		size_t cap = w->tscap ? w->tscap : 512;
		struct tm_tensor *p;

		while (cap < w->nts + ev->ntensors)
			cap *= 2;
		p = realloc(w->ts, cap * sizeof(*p));
		if (!p)
			return TM_ERR_NOMEM;
		w->ts = p;
		w->tscap = cap;
	}
	w->ev[w->nev] = *ev;
	w->ev[w->nev].tensors = (struct tm_tensor *)(uintptr_t)w->nts;
	for (i = 0; i < ev->ntensors; i++) {
		struct tm_tensor *t = &w->ts[w->nts + i];

		/* what comes before the histogram: the stats (the window
		 * keeps neither histograms nor contents) */
		memcpy(t, &ev->tensors[i], offsetof(struct tm_tensor, have_hist));
		t->have_hist = 0;
		t->payload = NULL;
		t->payload_len = 0;
	}
	w->nts += ev->ntensors;
	w->nev++;
	return TM_OK;
}

/* The tensors' offsets become pointers (once w no longer grows). */
static void win_fix(struct win *w)
{
	size_t i;

	for (i = 0; i < w->nev; i++)
		w->ev[i].tensors = w->ev[i].ntensors ?
			w->ts + (size_t)(uintptr_t)w->ev[i].tensors : NULL;
}

/* Hashes window w's events (hit: their flags, cleared). */
static int index_win(struct win *w, uint8_t **hit, size_t *hitcap, uint32_t **hash,
		     size_t *hcap)
{
	size_t i, cap = 16;

	win_fix(w);
	while (cap < w->nev * 2)
		cap *= 2;
	if (w->nev > *hitcap) {
		uint8_t *h = realloc(*hit, w->nev);

		if (!h)
			return TM_ERR_NOMEM;
		*hit = h;
		*hitcap = w->nev;
	}
	if (w->nev)
		memset(*hit, 0, w->nev);
	if (cap > *hcap) {
		uint32_t *h = realloc(*hash, cap * sizeof(*h));

		if (!h)
			return TM_ERR_NOMEM;
		*hash = h;
		*hcap = cap;
	}
	memset(*hash, 0, *hcap * sizeof(**hash));
	for (i = 0; i < w->nev; i++) {
		const struct tm_event *e = &w->ev[i];
		size_t h = ev_key(e->node, e->call, e->kind, e->op_index) & (*hcap - 1);

		/* a key seen before stays too: a parameter's data and grad
		 * may come in two PARAM events of one call */
		while ((*hash)[h])
			h = (h + 1) & (*hcap - 1);
		(*hash)[h] = (uint32_t)(i + 1);
	}
	return TM_OK;
}

static int win_index(tm_align *a)
{
	int rc = index_win(&a->cur, &a->hit, &a->hitcap, &a->hash, &a->hcap);

	if (!rc)
		a->have = 1;
	return rc;
}

/* The event of w aligned with run event ev (node: the reference's), or
 * SIZE_MAX. */
static size_t win_find(const struct win *w, const uint32_t *hash, size_t hcap, uint32_t node,
		       const struct tm_event *ev)
{
	size_t h, found = SIZE_MAX;

	if (!hcap)
		return SIZE_MAX;
	h = ev_key(node, ev->call, ev->kind, ev->op_index) & (hcap - 1);
	for (; hash[h]; h = (h + 1) & (hcap - 1)) {
		size_t i = hash[h] - 1;
		const struct tm_event *e = &w->ev[i];

		if (!same_key(e, node, ev->call, ev->kind, ev->op_index))
			continue;
		/* Of events with one key, the one holding the same kind of
		 * slot (data or grad), else the first. */
		if (!ev->ntensors || (e->ntensors &&
				      e->tensors[0].slot.kind == ev->tensors[0].slot.kind))
			return i;
		if (found == SIZE_MAX)
			found = i;
	}
	return found;
}

static int keep_ahead(tm_align *a, const struct tm_event *ev)
{
	if (ev->ntensors > a->ahead_cap) {
		struct tm_tensor *p = realloc(a->ahead_ts, ev->ntensors * sizeof(*p));

		if (!p)
			return TM_ERR_NOMEM;
		a->ahead_ts = p;
		a->ahead_cap = ev->ntensors;
	}
	a->ahead_ev = *ev;
	if (ev->ntensors)
		memcpy(a->ahead_ts, ev->tensors, ev->ntensors * sizeof(*a->ahead_ts));
	a->ahead_ev.tensors = a->ahead_ts;
	a->ahead = 1;
	return TM_OK;
}

/* Reports the events of w no run event aligned with (hit: NULL for none). */
static void report(tm_align *a, const struct win *w, const uint8_t *hit)
{
	size_t i;

	if (!a->unmatched)
		return;
	for (i = 0; i < w->nev; i++)
		if (!hit || !hit[i])
			a->unmatched(a->unmatched_user, &w->ev[i]);
}

void tm_align_set_unmatched(tm_align *a,
			    void (*fn)(void *user, const struct tm_event *ref),
			    void *user)
{
	if (!a)
		return;
	a->unmatched = fn;
	a->unmatched_user = user;
}

void tm_align_finish(tm_align *a)
{
	size_t i;

	if (!a)
		return;
	if (a->have)
		report(a, &a->cur, a->hit);
	a->have = 0;
	for (i = 0; i < a->nrw; i++) {
		if (a->rw[i].have)
			report(a, &a->rw[i].w, a->rw[i].hit);
		a->rw[i].have = 0;
	}
}

/* ------------------------------------------------------------- prefetch */

static struct win *pf_take_free(struct pf *p)
{
	struct win *w = NULL;

	pthread_mutex_lock(&p->mu);
	while (!p->nfree && !p->stop) {
		p->pwait = 1;
		pthread_cond_wait(&p->cv, &p->mu);
	}
	p->pwait = 0;
	if (!p->stop)
		w = p->free[--p->nfree];
	pthread_mutex_unlock(&p->mu);
	return w;
}

/* Never waits: there are as many places in the queue as windows. */
static void pf_push(struct pf *p, struct win *w)
{
	pthread_mutex_lock(&p->mu);
	p->q[(p->qh + p->qn) % PF_WINS] = w;
	p->qn++;
	if (p->cwait && (p->qn >= PF_BATCH || w->end))
		pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

static void pf_recycle(struct pf *p, struct win *w)
{
	pthread_mutex_lock(&p->mu);
	p->free[p->nfree++] = w;
	if (p->pwait && p->nfree >= PF_BATCH)
		pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

static struct win *pf_pop(struct pf *p)
{
	struct win *w;

	pthread_mutex_lock(&p->mu);
	while (!p->qn) {
		p->cwait = 1;
		pthread_cond_wait(&p->cv, &p->mu);
	}
	p->cwait = 0;
	w = p->q[p->qh];
	p->qh = (p->qh + 1) % PF_WINS;
	p->qn--;
	pthread_mutex_unlock(&p->mu);
	return w;
}

static void *pf_main(void *arg)
{
	struct pf *p = arg;
	struct win *w = NULL;
	struct tm_record rec;
	int rc, started = 0;

	for (;;) {
		uint64_t step;

		rc = tm_reader_next(p->r, &rec);
		if (rc)
			break;
		if (rec.type == TM_REC_EVENT)
			step = rec.u.event.step;
		else if (rec.type == TM_REC_GAP)
			step = rec.u.gap.step;
		else
			continue;
		if (!w || (started && step != w->step)) {
			if (w)
				pf_push(p, w);
			w = pf_take_free(p);
			if (!w)
				return NULL;    /* stopped */
			win_reset(w, step);
			started = 1;
		}
		if (rec.type == TM_REC_GAP) {
			w->gap_reason |= rec.u.gap.reason;
		} else if ((rc = win_add(w, &rec.u.event)) != TM_OK) {
			break;
		}
	}
	if (w)
		pf_push(p, w);
	w = pf_take_free(p);
	if (!w)
		return NULL;
	win_reset(w, UINT64_MAX);
	w->end = 1;
	w->err = rc == TM_ERR_END ? 0 : rc;
	pf_push(p, w);
	return NULL;
}

int tm_align_set_prefetch(tm_align *a, int on)
{
	struct pf *p;
	char *detail = NULL;
	size_t i;
	int rc;

	if (!a)
		return TM_ERR_INVALID_ARG;
	if (!on) {
		pf_stop(a);
		return TM_OK;
	}
	if (a->pf || a->have)
		return a->pf ? TM_OK : TM_ERR_INVALID_ARG;
	p = calloc(1, sizeof(*p));
	if (!p)
		return TM_ERR_NOMEM;
	rc = tm_reader_open(tm_reader_path(a->r), 0, &p->r, &detail);
	free(detail);
	if (rc) {
		free(p);
		return rc;
	}
	tm_reader_skip_hist(p->r, 1);
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	for (i = 0; i < PF_WINS; i++)
		p->free[p->nfree++] = &p->wins[i];
	if (pthread_create(&p->th, NULL, pf_main, p)) {
		tm_reader_close(p->r);
		pthread_mutex_destroy(&p->mu);
		pthread_cond_destroy(&p->cv);
		free(p);
		return TM_ERR_GENERIC;
	}
	tm_thread_name(p->th, "tm-prefetch");
	a->pf = p;
	return TM_OK;
}

static void pf_stop(tm_align *a)
{
	struct pf *p = a->pf;
	size_t i;

	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = 1;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	pthread_join(p->th, NULL);
	tm_reader_close(p->r);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	for (i = 0; i < PF_WINS; i++)
		win_free(&p->wins[i]);
	free(p);
	a->pf = NULL;
	/* the reader of the session seeks afresh */
	a->ahead = 0;
}

/* The prefetched window of step, or an empty one when the reference has
 * none.  Steps go forwards only. */
static int pf_load(tm_align *a, uint64_t step)
{
	struct pf *p = a->pf;
	struct win tmp, *w;

	if (a->have)
		report(a, &a->cur, a->hit);
	a->have = 0;
	for (;;) {
		if (p->ended && !p->held) {
			win_reset(&a->cur, step);
			return win_index(a);
		}
		w = p->held ? p->held : pf_pop(p);
		p->held = NULL;
		if (w->end) {
			int err = w->err;

			p->ended = 1;
			pf_recycle(p, w);
			if (err)
				return err;
			continue;
		}
		if (w->step < step) {
			/* steps the run does not have */
			win_fix(w);
			report(a, w, NULL);
			pf_recycle(p, w);
			continue;
		}
		if (w->step > step) {
			p->held = w;
			win_reset(&a->cur, step);
			return win_index(a);
		}
		tmp = a->cur;
		a->cur = *w;
		*w = tmp;
		pf_recycle(p, w);
		return win_index(a);
	}
}

/* ------------------------------------------------------------- on demand */

/*
 * Reads the reference's records of step into w, the reader at or before
 * them; with keep, the first event of a later step is held for the next
 * window (keep_ahead).  A gap of a later step ends it too: the next window
 * seeks again.
 */
static int read_step(tm_align *a, struct win *w, uint64_t step, int keep)
{
	struct tm_record rec;
	int rc;

	for (;;) {
		rc = tm_reader_next(a->r, &rec);
		if (rc == TM_ERR_END)
			return TM_OK;
		if (rc)
			return rc;
		if (rec.type == TM_REC_EVENT) {
			if (rec.u.event.step > step)
				return keep ? keep_ahead(a, &rec.u.event) : TM_OK;
			if (rec.u.event.step == step && (rc = win_add(w, &rec.u.event)) != TM_OK)
				return rc;
		} else if (rec.type == TM_REC_GAP) {
			if (rec.u.gap.step == step)
				w->gap_reason |= rec.u.gap.reason;
			else if (rec.u.gap.step > step)
				return TM_OK;
		}
	}
}

/* Loads the reference's step into the window. */
static int win_load(tm_align *a, uint64_t step)
{
	int rc;

	if (a->pf) {
		if (!a->pf->served || step > a->pf->last) {
			a->pf->served = 1;
			a->pf->last = step;
			return pf_load(a, step);
		}
		pf_stop(a);     /* backwards: on demand from now on */
	}
	if (a->have)
		report(a, &a->cur, a->hit);
	a->have = 0;
	win_reset(&a->cur, step);
	if (a->ahead && a->ahead_ev.step == step) {
		a->ahead = 0;
		rc = win_add(&a->cur, &a->ahead_ev);
		if (rc)
			return rc;
	} else {
		/* backwards, or a step the reader is not at: seek */
		a->ahead = 0;
		rc = tm_reader_seek_step(a->r, step);
		if (rc && rc != TM_ERR_END && rc != TM_ERR_NOT_FOUND)
			return rc;
	}
	rc = read_step(a, &a->cur, step, 1);
	return rc ? rc : win_index(a);
}

/* ------------------------------------------------------------- by request */

int tm_align_set_requests(tm_align *a,
			  const struct tm_annot *(*fn)(void *user, const struct tm_event *ev,
						       uint64_t step),
			  void *user)
{
	if (!a)
		return TM_ERR_INVALID_ARG;
	byreq_free(a->rq);
	a->rq = NULL;
	if (!fn)
		return TM_OK;
	if (a->have)
		return TM_ERR_INVALID_ARG;
	a->rq = calloc(1, sizeof(*a->rq));
	if (!a->rq)
		return TM_ERR_NOMEM;
	a->rq->fn = fn;
	a->rq->user = user;
	return TM_OK;
}

int tm_align_by_requests(const tm_align *a)
{
	return a && a->rq;
}

static uint64_t rq_hash(const char *id, uint32_t k)
{
	return fnv(id) ^ ((uint64_t)k * 0x9e3779b97f4a7c15ull);
}

/* The slot of (id, k) in t (cap a power of two), empty or equal. */
static struct rq_ent *rq_slot(struct rq_ent *t, size_t cap, const char *id, uint32_t k)
{
	size_t h = rq_hash(id, k) & (cap - 1);

	while (t[h].id && (t[h].k != k || strcmp(t[h].id, id)))
		h = (h + 1) & (cap - 1);
	return &t[h];
}

/* Room for one more entry in table *t (load <= 1/2). */
static int rq_grow(struct rq_ent **t, size_t *n, size_t *cap)
{
	struct rq_ent *nt;
	size_t nc, i;

	if ((*n + 1) * 2 <= *cap)
		return TM_OK;
	nc = *cap ? *cap * 2 : 64;
	nt = calloc(nc, sizeof(*nt));
	if (!nt)
		return TM_ERR_NOMEM;
	for (i = 0; i < *cap; i++)
		if ((*t)[i].id)
			*rq_slot(nt, nc, (*t)[i].id, (*t)[i].k) = (*t)[i];
	free(*t);
	*t = nt;
	*cap = nc;
	return TM_OK;
}

static struct step_ent *step_slot(struct step_ent *t, size_t cap, uint64_t step)
{
	size_t h = (size_t)(step * 0x9e3779b97f4a7c15ull >> 17) & (cap - 1);

	while (t[h].used && t[h].step != step)
		h = (h + 1) & (cap - 1);
	return &t[h];
}

static int step_put(struct byreq *q, uint64_t step, uint32_t n)
{
	struct step_ent *e;

	if ((q->nsteps + 1) * 2 > q->capsteps) {
		size_t nc = q->capsteps ? q->capsteps * 2 : 64, i;
		struct step_ent *nt = calloc(nc, sizeof(*nt));

		if (!nt)
			return TM_ERR_NOMEM;
		for (i = 0; i < q->capsteps; i++)
			if (q->steps[i].used)
				*step_slot(nt, nc, q->steps[i].step) = q->steps[i];
		free(q->steps);
		q->steps = nt;
		q->capsteps = nc;
	}
	e = step_slot(q->steps, q->capsteps, step);
	if (!e->used)
		q->nsteps++;
	e->used = 1;
	e->step = step;
	e->n = n;
	return TM_OK;
}

/*
 * Counts a step's requests in table t: entry (id, 0) holds the request's
 * forwards so far (in its step field), and (id, k) -> step is added for
 * each request's new forward k.
 */
static int count_forwards(struct rq_ent **t, size_t *n, size_t *cap, const struct tm_annot *an,
			  uint64_t step)
{
	uint32_t i;
	int rc;

	for (i = 0; i < an->nvalues; i++) {
		const char *id = an->values[i];
		struct rq_ent *e;
		uint32_t k;

		/* the forward count: entries (id, 0) */
		if ((rc = rq_grow(t, n, cap)))
			return rc;
		e = rq_slot(*t, *cap, id, 0);
		if (!e->id) {
			if (!(e->id = strdup(id)))
				return TM_ERR_NOMEM;
			e->k = 0;
			e->step = 0;
			(*n)++;
		}
		k = (uint32_t)++e->step;
		if ((rc = rq_grow(t, n, cap)))
			return rc;
		e = rq_slot(*t, *cap, id, k);
		if (!e->id) {
			if (!(e->id = strdup(id)))
				return TM_ERR_NOMEM;
			e->k = k;
			e->idx = i;
			e->step = step;
			(*n)++;
		}
	}
	return TM_OK;
}

/* Reads the reference's request ids, every step's. */
static int byreq_build(tm_align *a)
{
	struct byreq *q = a->rq;
	const struct tm_summary *sum = tm_reader_summary(a->r);
	uint64_t st;
	int rc;

	q->built = 1;
	if (!sum->nevents)
		return TM_OK;
	for (st = sum->first_step; st <= sum->last_step; st++) {
		const struct tm_annot *an = NULL;

		rc = tm_reader_annotation(a->r, st, "request", &an);
		/* an empty list (a warm-up forward) is no ids */
		if (rc == TM_ERR_NOT_FOUND || (!rc && !an->nvalues))
			goto next;
		if (rc)
			return rc;
		q->any = 1;
		if ((rc = step_put(q, st, an->count)) ||
		    (rc = count_forwards(&q->ref, &q->nref, &q->capref, an, st)))
			return rc;
next:
		if (st == UINT64_MAX)
			break;
	}
	return TM_OK;
}

/* What run step st (after the steps before it) aligns with. */
static int byreq_map_one(tm_align *a, const struct tm_event *ev, uint64_t st,
			 struct run_step *out)
{
	struct byreq *q = a->rq;
	const struct tm_annot *an = q->fn(q->user, ev, st);
	struct step_ent *se;
	uint32_t i;
	int rc, found = 0;
	uint64_t t = 0;

	out->ref = st;
	out->reason = 0;
	out->count = an ? an->count : 0;
	out->rows = NULL;
	out->nrows = 0;
	if (an && an->nvalues) {
		out->rows = calloc(an->nvalues, sizeof(*out->rows));
		if (!out->rows)
			return TM_ERR_NOMEM;
		out->nrows = an->nvalues;
	}
	if (!an || !an->nvalues) {
		/* no ids: the same number, if the reference's has none either */
		se = q->capsteps ? step_slot(q->steps, q->capsteps, st) : NULL;
		if (se && se->used)
			out->reason = TM_REF_BATCH;
		return TM_OK;
	}
	for (i = 0; i < an->nvalues; i++) {
		const char *id = an->values[i];
		struct rq_ent *e;
		uint32_t k;

		if ((rc = rq_grow(&q->run, &q->nrun, &q->caprun)))
			return rc;
		e = rq_slot(q->run, q->caprun, id, 0);
		if (!e->id) {
			if (!(e->id = strdup(id)))
				return TM_ERR_NOMEM;
			e->k = 0;
			e->step = 0;
			q->nrun++;
		}
		k = (uint32_t)++e->step;
		e = q->capref ? rq_slot(q->ref, q->capref, id, k) : NULL;
		if (!e || !e->id) {
			out->reason = TM_REF_BATCH;
			continue;
		}
		out->rows[i].ref = e->step;
		out->rows[i].idx = e->idx;
		out->rows[i].found = 1;
		se = step_slot(q->steps, q->capsteps, e->step);
		out->rows[i].n = se->used ? se->n : 0;
		if (found && e->step != t)
			out->reason = TM_REF_BATCH;
		t = e->step;
		found = 1;
	}
	if (!found)
		out->reason = TM_REF_BATCH;
	if (!out->reason) {
		se = step_slot(q->steps, q->capsteps, t);
		if (!se->used || se->n != an->count)
			out->reason = TM_REF_BATCH;     /* other requests too */
	}
	out->ref = t;
	return TM_OK;
}

/* The reference step run step st aligns with, or *reason. */
static int byreq_step(tm_align *a, const struct tm_event *ev, uint64_t *st, uint32_t *reason)
{
	struct byreq *q = a->rq;
	int rc;

	*reason = 0;
	if (!q->built && (rc = byreq_build(a)))
		return rc;
	if (!q->any)
		return TM_OK;           /* no ids in the reference: by step */
	/* a request's forwards are counted from the run's step 0, whichever
	 * step is asked for first */
	if (*st >= q->next) {
		uint64_t n = *st - q->first + 1, s;
		struct run_step *m;

		if (n > SIZE_MAX / sizeof(*m) / 2)
			return TM_ERR_NOMEM;
		if (n > q->mapcap) {
			size_t cap = q->mapcap ? q->mapcap : 64;

			while (cap < n)
				cap *= 2;
			m = realloc(q->map, cap * sizeof(*m));
			if (!m)
				return TM_ERR_NOMEM;
			q->map = m;
			q->mapcap = cap;
		}
		for (s = q->next; s <= *st; s++) {
			if ((rc = byreq_map_one(a, ev, s, &q->map[s - q->first])))
				return rc;
			q->next = s + 1;
		}
	}
	*reason = q->map[*st - q->first].reason;
	*st = q->map[*st - q->first].ref;
	return TM_OK;
}

int tm_align_event(tm_align *a, const char *addr, const struct tm_event *ev,
		   const struct tm_event **ref, uint32_t *reason)
{
	uint32_t node, why;
	uint64_t step;
	size_t found;
	int rc;

	if (ref)
		*ref = NULL;
	if (reason)
		*reason = 0;
	if (!a || !addr || !ev || !ref || !reason)
		return TM_ERR_INVALID_ARG;
	rc = ref_node(a, addr, &node, &why);
	if (rc)
		return rc;
	step = ev->step;
	if (a->rq) {
		uint32_t batch;

		rc = byreq_step(a, ev, &step, &batch);
		if (rc)
			return rc;
		if (batch) {
			*reason = node == TM_NODE_NONE ? why : batch;
			return TM_ERR_NOT_FOUND;
		}
	}
	if (!a->have || a->cur.step != step) {
		rc = win_load(a, step);
		if (rc) {
			a->have = 0;
			return rc;
		}
	}
	if (node == TM_NODE_NONE) {
		*reason = why;
		return TM_ERR_NOT_FOUND;
	}
	found = win_find(&a->cur, a->hash, a->hcap, node, ev);
	if (found != SIZE_MAX) {
		a->hit[found] = 1;
		*ref = &a->cur.ev[found];
		return TM_OK;
	}
	*reason = TM_REF_NO_EVENT | a->cur.gap_reason;
	return TM_ERR_NOT_FOUND;
}

/* ------------------------------------------------------------- rows */

/* The row cache's window of reference step (read when not in it). */
static int rw_load(tm_align *a, uint64_t step, struct rwin **out)
{
	struct rwin *w = NULL;
	size_t i;
	int rc;

	for (i = 0; i < a->nrw; i++) {
		if (a->rw[i].have && a->rw[i].w.step == step) {
			a->rw[i].used = ++a->tick;
			*out = &a->rw[i];
			return TM_OK;
		}
	}
	if (!a->rw) {
		a->rw = calloc(RW_WINS, sizeof(*a->rw));
		if (!a->rw)
			return TM_ERR_NOMEM;
		a->nrw = RW_WINS;
	}
	/* an empty window, else the one used longest ago */
	for (i = 0; i < a->nrw; i++)
		if (!w || !a->rw[i].have || (w->have && a->rw[i].used < w->used)) {
			w = &a->rw[i];
			if (!w->have)
				break;
		}
	if (w->have)
		report(a, &w->w, w->hit);
	w->have = 0;
	win_reset(&w->w, step);
	/* the reader moves: the main window's next step seeks */
	a->ahead = 0;
	rc = tm_reader_seek_step(a->r, step);
	if (rc && rc != TM_ERR_END && rc != TM_ERR_NOT_FOUND)
		return rc;
	if (rc == TM_OK && (rc = read_step(a, &w->w, step, 0)) != TM_OK)
		return rc;
	rc = index_win(&w->w, &w->hit, &w->hitcap, &w->hash, &w->hcap);
	if (rc)
		return rc;
	w->have = 1;
	w->used = ++a->tick;
	*out = w;
	return TM_OK;
}

/* The run step's mapping (byreq_step has made it), NULL if none. */
static const struct run_step *byreq_of(tm_align *a, uint64_t step)
{
	struct byreq *q = a->rq;

	if (!q || !q->any || step < q->first || step >= q->next)
		return NULL;
	return &q->map[step - q->first];
}

int tm_align_tensor(tm_align *a, const char *addr, const struct tm_event *ev,
		    struct tm_slot slot, const struct tm_event **ref, struct tm_slot *ref_slot,
		    uint32_t *reason)
{
	const struct run_step *m;
	const struct rq_row *row;
	struct tm_slot base = tm_slot_row_base(slot);
	struct rwin *w;
	uint32_t node, why;
	unsigned j;
	size_t found;
	int rc;

	if (ref_slot)
		*ref_slot = slot;
	if (!ref_slot)
		return TM_ERR_INVALID_ARG;
	rc = tm_align_event(a, addr, ev, ref, reason);
	m = rc == TM_OK || (rc == TM_ERR_NOT_FOUND && (*reason & TM_REF_BATCH)) ?
		byreq_of(a, ev->step) : NULL;
	if (rc == TM_OK) {
		/* the same batch: a request's rows are its rows there, where
		 * the reference may have put it in another place */
		if (m && tm_slot_is_row(slot)) {
			j = tm_slot_row(slot);
			if (j < m->nrows && m->rows[j].found &&
			    m->rows[j].idx < TM_SLOT_ROW_MAX)
				*ref_slot = tm_slot_row_of(base, m->rows[j].idx);
		}
		return TM_OK;
	}
	if (!m)
		return rc;
	/* Batched otherwise: one request's rows align with that request's
	 * forward in the reference -- its own step, or its rows of a step
	 * of another batch.  A tensor of a step that served one request is
	 * that request's rows. */
	if (tm_slot_is_row(slot))
		j = tm_slot_row(slot);
	else if (m->count == 1 && m->nrows == 1)
		j = 0;
	else
		return rc;
	if (j >= m->nrows || !m->rows[j].found)
		return rc;
	row = &m->rows[j];
	if (row->n > 1 && row->idx >= TM_SLOT_ROW_MAX)
		return rc;
	rc = ref_node(a, addr, &node, &why);
	if (rc)
		return rc;
	if (node == TM_NODE_NONE) {
		*reason = why;
		return TM_ERR_NOT_FOUND;
	}
	rc = rw_load(a, row->ref, &w);
	if (rc)
		return rc;
	found = win_find(&w->w, w->hash, w->hcap, node, ev);
	if (found == SIZE_MAX) {
		*reason = TM_REF_NO_EVENT | w->w.gap_reason;
		return TM_ERR_NOT_FOUND;
	}
	*ref_slot = row->n > 1 ? tm_slot_row_of(base, row->idx) : base;
	if (row->n > 1 && !tm_event_tensor(&w->w.ev[found], *ref_slot)) {
		/* the reference's batch has no rows of that request */
		*ref_slot = slot;
		*reason = TM_REF_BATCH;
		return TM_ERR_NOT_FOUND;
	}
	w->hit[found] = 1;
	*ref = &w->w.ev[found];
	*reason = 0;
	return TM_OK;
}

int tm_align_contents(tm_align *a, const struct tm_event *ref, struct tm_slot slot,
		      const struct tm_tensor **t)
{
	struct tm_record rec;
	const struct tm_tensor *x;
	int rc;

	if (t)
		*t = NULL;
	if (!a || !ref || !t)
		return TM_ERR_INVALID_ARG;
	/* the reader moves: the next window seeks (prefetching has a
	 * reader of its own) */
	a->ahead = 0;
	rc = tm_reader_seek_seq(a->r, ref->seq);
	if (rc)
		return rc == TM_ERR_END ? TM_ERR_NOT_FOUND : rc;
	for (;;) {
		rc = tm_reader_next(a->r, &rec);
		if (rc)
			return rc == TM_ERR_END ? TM_ERR_NOT_FOUND : rc;
		if (rec.type != TM_REC_EVENT)
			continue;
		if (rec.u.event.seq > ref->seq)
			return TM_ERR_NOT_FOUND;
		if (rec.u.event.seq == ref->seq)
			break;
	}
	x = tm_event_tensor(&rec.u.event, slot);
	if (!x || !x->payload)
		return TM_ERR_NOT_FOUND;
	*t = x;
	return TM_OK;
}

/* ------------------------------------------------------------- measures */

double tm_reldiff(double a, double b)
{
	double m;

	if (isnan(a) || isnan(b))
		return NAN;
	if (a == b)
		return 0.0;
	m = fmax(fabs(a), fabs(b));
	if (isinf(m))
		return INFINITY;
	return fabs(a - b) / m;
}

static int readable(const struct tm_tensor *t, uint64_t *numel)
{
	uint64_t n = 1;
	size_t sz = tm_dtype_size(t->dtype);
	int i;

	if (!t->payload)
		return TM_ERR_NOT_FOUND;
	switch (t->dtype) {
	case TM_DT_F32: case TM_DT_F64: case TM_DT_F16: case TM_DT_BF16:
	case TM_DT_I8: case TM_DT_I16: case TM_DT_I32: case TM_DT_I64:
	case TM_DT_U8: case TM_DT_U16: case TM_DT_U32: case TM_DT_U64:
	case TM_DT_BOOL:
		break;
	default:
		return TM_ERR_UNSUPPORTED;
	}
	for (i = 0; i < t->rank; i++)
		n *= t->shape[i] > 0 ? (uint64_t)t->shape[i] : 0;
	if (!sz || t->payload_len / sz < n)
		return TM_ERR_NOT_FOUND;
	*numel = n;
	return TM_OK;
}

int tm_contents_diff(const struct tm_tensor *run, const struct tm_tensor *ref,
		     struct tm_contents_diff *out)
{
	uint64_t na, nb, i;
	double dd = 0, bb = 0, aa = 0, ab = 0, mx = 0;
	int rc, apart = 0;

	if (!run || !ref || !out)
		return TM_ERR_INVALID_ARG;
	memset(out, 0, sizeof(*out));
	if ((rc = readable(run, &na)) || (rc = readable(ref, &nb)))
		return rc;
	if (na != nb)
		return TM_ERR_INVALID_ARG;
	for (i = 0; i < na; i++) {
		double x = tm_tensor_element(run, i), y = tm_tensor_element(ref, i);

		if (!isfinite(x) || !isfinite(y)) {
			/* the same infinity on both sides is no difference;
			 * anything else non-finite is the largest there is */
			out->nonfinite++;
			if (!(x == y))
				apart = 1;
			continue;
		}
		mx = fmax(mx, fabs(x - y));
		dd += (x - y) * (x - y);
		aa += x * x;
		bb += y * y;
		ab += x * y;
	}
	out->n = na;
	out->maxabsdiff = mx;
	out->relerr = bb > 0 ? sqrt(dd / bb) : (dd > 0 ? INFINITY : 0.0);
	out->cosine = aa > 0 && bb > 0 ? ab / sqrt(aa * bb) :
		      (aa == 0 && bb == 0 ? 1.0 : 0.0);
	if (apart) {
		out->maxabsdiff = INFINITY;
		out->relerr = INFINITY;
		out->cosine = NAN;
	}
	return TM_OK;
}
