/*
 * flight.c -- the flight ring (tm-flight.h): encoded records kept per step.
 *
 * Records are kept encoded, as the file will hold them, so that a dump is a
 * copy and the budget counts what level-3 payloads really cost.  A step is
 * complete when a record of a later step arrives; the oldest complete step
 * goes when more than N are held or the bytes exceed the budget.  A step
 * that alone exceeds the budget keeps only its seq range and is written as
 * a NOT_KEPT gap, so that it is never a silent hole.
 *
 * Triggers are breakpoint conditions: an address bound to node kinds by
 * tm_address_bind and a TQL condition run by tm_tql_test per tensor, as the
 * probe-side server evaluates a breakpoint (server.c, sbp_match).  They run
 * on the writer thread, off the model's path.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tm-address.h"
#include "tm-flight.h"
#include "tm-internal.h"
#include "tm-tql.h"

#define MAX_TRIGGERS 32

struct fstep {
	uint64_t step;
	uint64_t first_seq, last_seq;   /* of its events and gaps */
	uint64_t nseq;                  /* seqs it covers */
	uint64_t time_ns;
	int have_seq;
	int over;                       /* did not fit: seq range only */
	struct tm_buf buf;
};

struct trig {
	char *src;
	tm_address *addr;
	tm_tql_prog *cond;
	uint8_t *kinds;
	uint32_t nkinds;
	int has_slot, any_index;
	struct tm_slot slot;
	uint32_t call;
};

struct tm_flight {
	uint32_t n;                     /* complete steps kept */
	uint64_t budget;
	struct fstep *done;             /* circular, n entries */
	uint32_t first, count;
	struct fstep cur;
	int have_cur;
	uint64_t bytes;                 /* encoded bytes held */
	uint64_t dropped, over;
	uint64_t kept_from;             /* seqs below were not kept */
	uint64_t base_seq, base_step;   /* the first record seen since (re)start */
	int have_base;
	struct trig trig[MAX_TRIGGERS];
	uint32_t ntrig;
	struct tm_buf scratch;
};

struct tm_flight *tm_flight__new(uint32_t steps, uint64_t budget)
{
	struct tm_flight *f;

	if (!steps)
		return NULL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->done = calloc(steps, sizeof(*f->done));
	if (!f->done) {
		free(f);
		return NULL;
	}
	f->n = steps;
	f->budget = budget ? budget : UINT64_C(64) << 20;
	/* the run's first seq: what is not kept starts at 0, step 0 */
	f->have_base = 1;
	return f;
}

static void step_free(struct fstep *s)
{
	tm_buf_free(&s->buf);
	memset(s, 0, sizeof(*s));
}

void tm_flight__clear(struct tm_flight *f)
{
	uint32_t i;

	if (!f)
		return;
	for (i = 0; i < f->n; i++)
		step_free(&f->done[i]);
	step_free(&f->cur);
	f->have_cur = 0;
	f->first = f->count = 0;
	f->bytes = 0;
}

void tm_flight__restart(struct tm_flight *f)
{
	tm_flight__clear(f);
	f->dropped = f->over = 0;
	f->have_base = 0;
}

int tm_flight__unkept(const struct tm_flight *f, struct tm_gap *g)
{
	struct tm_flight_window w;

	tm_flight__window(f, &w);
	if (!f->have_base || !w.have_last || w.last_seq < f->base_seq)
		return 0;
	memset(g, 0, sizeof(*g));
	g->first_seq = f->base_seq;
	g->last_seq = w.last_seq;
	g->count = w.last_seq - f->base_seq + 1;
	g->reason = TM_GAP_NOT_KEPT;
	g->step = f->base_step;
	return 1;
}

void tm_flight__free(struct tm_flight *f)
{
	uint32_t i;

	if (!f)
		return;
	tm_flight__clear(f);
	for (i = 0; i < f->ntrig; i++) {
		free(f->trig[i].src);
		tm_address_free(f->trig[i].addr);
		tm_tql_free(f->trig[i].cond);
		free(f->trig[i].kinds);
	}
	tm_buf_free(&f->scratch);
	free(f->done);
	free(f);
}

static char *dup_str(const char *s, size_t n)
{
	char *d = malloc(n + 1);

	if (d) {
		memcpy(d, s, n);
		d[n] = 0;
	}
	return d;
}

static int fail(char **errors, const char *what, const char *text)
{
	if (errors) {
		size_t n = strlen(what) + strlen(text) + 16;

		*errors = malloc(n);
		if (*errors)
			snprintf(*errors, n, "%s: %s", what, text);
	}
	return TM_ERR_INVALID_ARG;
}

int tm_flight__add_trigger(struct tm_flight *f, const char *text,
			   const tm_nodetab *nodes, char **errors)
{
	struct tm_tql_compile_opts co;
	const char *cut, *emsg = NULL, *cond = NULL;
	char *where;
	struct trig *t;
	int col = 0, err;

	if (errors)
		*errors = NULL;
	if (!f || !text)
		return TM_ERR_INVALID_ARG;
	if (f->ntrig >= MAX_TRIGGERS)
		return fail(errors, "too many triggers", text);
	while (*text == ' ')
		text++;
	/* "ADDRESS if COND"; a text that is no address is a condition on
	 * model.** (every module's outputs, as `break model.**`) */
	cut = strstr(text, " if ");
	if (cut) {
		where = dup_str(text, (size_t)(cut - text));
		cond = cut + 4;
	} else if (!strchr(text, ' ') && strncmp(text, "model", 5) == 0) {
		where = dup_str(text, strlen(text));
	} else {
		where = dup_str("model.**", 8);
		cond = text;
	}
	if (!where)
		return TM_ERR_NOMEM;
	t = &f->trig[f->ntrig];
	memset(t, 0, sizeof(*t));
	if (tm_address_parse(where, &t->addr, &col, &emsg)) {
		err = fail(errors, "malformed trigger address", where);
		free(where);
		return err;
	}
	free(where);
	t->has_slot = tm_address_has_slot(t->addr);
	t->slot = tm_address_slot(t->addr, &t->any_index);
	t->call = tm_address_call(t->addr);
	if (cond && *cond) {
		memset(&co, 0, sizeof(co));
		co.nodes = nodes;
		co.want_bool = 1;
		err = tm_tql_compile(cond, &co, &t->cond, errors);
		if (err) {
			tm_address_free(t->addr);
			return err;
		}
		/* the ring keeps no history to answer other nodes' values */
		if (tm_tql_uses_lookup(t->cond)) {
			tm_tql_free(t->cond);
			tm_address_free(t->addr);
			return fail(errors, "addressed terms are not allowed in a trigger", cond);
		}
		/* nor a reference, which only a debugger loads */
		if (tm_tql_uses_reference(t->cond)) {
			tm_tql_free(t->cond);
			tm_address_free(t->addr);
			return fail(errors, "reference terms (ref., maxabsdiff(), ...) are not "
				    "allowed in a trigger", cond);
		}
	}
	t->src = dup_str(text, strlen(text));
	if (!t->src) {
		tm_tql_free(t->cond);
		tm_address_free(t->addr);
		return TM_ERR_NOMEM;
	}
	f->ntrig++;
	return TM_OK;
}

static int trig_bind(struct trig *t, const tm_nodetab *nodes)
{
	uint32_t hits;
	uint8_t *k;

	if (tm_address_bind(t->addr, nodes, &k, &hits) != TM_OK)
		return -1;
	free(t->kinds);
	t->kinds = k;
	t->nkinds = tm_nodetab_count(nodes);
	return 0;
}

static int tensor_wanted(const struct trig *t, const struct tm_tensor *x)
{
	if (!t->has_slot)
		return 1;
	if (x->slot.kind != t->slot.kind)
		return 0;
	return t->any_index || x->slot.index == t->slot.index;
}

/* sbp_match of server.c, on the flight ring's side. */
static int trig_match(struct trig *t, const struct tm_event *ev,
		      const tm_nodetab *nodes)
{
	struct tm_tql_ctx ctx;
	uint32_t i, cand = 0;

	if (t->nkinds != tm_nodetab_count(nodes) && trig_bind(t, nodes))
		return 0;
	if (ev->node >= t->nkinds || !(t->kinds[ev->node] & (1u << ev->kind)))
		return 0;
	if (t->call && ev->call != t->call)
		return 0;
	memset(&ctx, 0, sizeof(ctx));
	ctx.event = ev;
	ctx.nodes = nodes;
	for (i = 0; i < ev->ntensors; i++) {
		if (!tensor_wanted(t, &ev->tensors[i]))
			continue;
		cand++;
		ctx.tensor = &ev->tensors[i];
		if (!t->cond || tm_tql_test(t->cond, &ctx) > 0)
			return 1;
	}
	if (!cand && !(ev->ntensors && t->has_slot)) {
		ctx.tensor = NULL;
		return !t->cond || tm_tql_test(t->cond, &ctx) > 0;
	}
	return 0;
}

static void drop_oldest(struct tm_flight *f)
{
	struct fstep *s = &f->done[f->first];

	f->bytes -= s->buf.len;
	if (s->have_seq)
		f->kept_from = s->last_seq + 1;
	step_free(s);
	f->first = (f->first + 1) % f->n;
	f->count--;
	f->dropped++;
}

/* A step that did not fit keeps its range, written as a gap. */
static void step_close_over(struct fstep *s)
{
	struct tm_gap g;

	s->buf.len = 0;
	if (!s->have_seq)
		return;
	memset(&g, 0, sizeof(g));
	g.first_seq = s->first_seq;
	g.last_seq = s->last_seq;
	g.count = s->nseq;
	g.reason = TM_GAP_NOT_KEPT;
	g.step = s->step;
	g.time_ns = s->time_ns;
	tm_encode_gap(&s->buf, &g);
}

static void complete_cur(struct tm_flight *f)
{
	if (!f->have_cur)
		return;
	if (f->cur.over) {
		f->bytes -= f->cur.buf.len;
		step_close_over(&f->cur);
		f->bytes += f->cur.buf.len;
	}
	if (f->count == f->n)
		drop_oldest(f);
	f->done[(f->first + f->count) % f->n] = f->cur;
	f->count++;
	memset(&f->cur, 0, sizeof(f->cur));
	f->have_cur = 0;
}

/* Makes room for the current step after it grew; never drops it.  A step
 * bigger than the budget by itself gives up its contents rather than
 * evicting steps that fit. */
static void fit(struct tm_flight *f)
{
	if (f->cur.buf.len > f->budget && !f->cur.over) {
		f->over++;
		f->cur.over = 1;
		f->bytes -= f->cur.buf.len;
		tm_buf_free(&f->cur.buf);
	}
	while (f->bytes > f->budget && f->count)
		drop_oldest(f);
}

static void enter_step(struct tm_flight *f, uint64_t step, uint64_t time_ns)
{
	if (f->have_cur && f->cur.step == step)
		return;
	/* annotations alone (tm_flight__raw knows no step): they go with
	 * the step whose events follow, not as a step of their own */
	if (f->have_cur && !f->cur.have_seq) {
		f->cur.step = step;
		f->cur.time_ns = time_ns;
		return;
	}
	complete_cur(f);
	f->cur.step = step;
	f->cur.time_ns = time_ns;
	f->have_cur = 1;
}

static void note_seq(struct tm_flight *f, struct fstep *s, uint64_t first, uint64_t last)
{
	if (!f->have_base) {
		f->base_seq = first;
		f->base_step = s->step;
		f->have_base = 1;
	}
	if (!s->have_seq) {
		s->first_seq = first;
		s->have_seq = 1;
	}
	s->last_seq = last;
	s->nseq += last - first + 1;
}

static void append(struct tm_flight *f, const struct tm_buf *rec)
{
	if (!f->cur.over) {
		size_t before = f->cur.buf.len;

		if (tm_buf_reserve(&f->cur.buf, rec->len) == TM_OK) {
			memcpy(f->cur.buf.data + before, rec->data, rec->len);
			f->cur.buf.len += rec->len;
			f->bytes += rec->len;
		}
	}
	fit(f);
}

size_t tm_flight__events(struct tm_flight *f, const struct tm_event *e,
			 size_t n, const tm_nodetab *nodes, const char **why)
{
	size_t i;
	uint32_t k;

	*why = NULL;
	for (i = 0; i < n; i++) {
		enter_step(f, e[i].step, e[i].time_ns);
		note_seq(f, &f->cur, e[i].seq, e[i].seq);
		f->scratch.len = 0;
		if (tm_encode_event(&f->scratch, &e[i]) == TM_OK)
			append(f, &f->scratch);
		for (k = 0; k < f->ntrig; k++)
			if (trig_match(&f->trig[k], &e[i], nodes)) {
				*why = f->trig[k].src;
				return i + 1;
			}
	}
	return n;
}

void tm_flight__gap(struct tm_flight *f, const struct tm_gap *g)
{
	enter_step(f, g->step, g->time_ns);
	note_seq(f, &f->cur, g->first_seq, g->last_seq);
	f->cur.nseq += g->count - (g->last_seq - g->first_seq + 1);
	f->scratch.len = 0;
	if (tm_encode_gap(&f->scratch, g) == TM_OK)
		append(f, &f->scratch);
}

void tm_flight__raw(struct tm_flight *f, const uint8_t *rec, size_t len)
{
	struct tm_buf b = { (uint8_t *)(uintptr_t)rec, len, len };

	if (!f->have_cur)
		enter_step(f, 0, 0);
	append(f, &b);
}

int tm_flight__set_steps(struct tm_flight *f, uint32_t n)
{
	struct fstep *d;
	uint32_t i;

	if (!n)
		return TM_ERR_INVALID_ARG;
	while (f->count > n)
		drop_oldest(f);
	d = calloc(n, sizeof(*d));
	if (!d)
		return TM_ERR_NOMEM;
	for (i = 0; i < f->count; i++)
		d[i] = f->done[(f->first + i) % f->n];
	free(f->done);
	f->done = d;
	f->n = n;
	f->first = 0;
	return TM_OK;
}

void tm_flight__at_step(struct tm_flight *f, uint64_t step)
{
	if (f->have_cur && f->cur.step < step)
		complete_cur(f);
}

static const struct fstep *oldest(const struct tm_flight *f)
{
	uint32_t i;

	for (i = 0; i < f->count; i++) {
		const struct fstep *s = &f->done[(f->first + i) % f->n];

		if (s->have_seq)
			return s;
	}
	return f->have_cur && f->cur.have_seq ? &f->cur : NULL;
}

void tm_flight__window(const struct tm_flight *f, struct tm_flight_window *out)
{
	const struct fstep *s = oldest(f);
	uint32_t i;

	memset(out, 0, sizeof(*out));
	for (i = 0; i < f->count; i++)
		if (!f->done[(f->first + i) % f->n].over)
			out->steps_held++;
	out->steps_over_held = f->count - out->steps_held;
	out->steps_dropped = f->dropped;
	out->steps_over = f->over;
	out->bytes = f->bytes;
	out->first_step = f->count ? f->done[f->first].step : f->cur.step;
	if (f->have_cur && f->cur.have_seq) {
		out->last_seq = f->cur.last_seq;
		out->have_last = 1;
	}
	for (i = f->count; !out->have_last && i-- > 0;) {
		const struct fstep *d = &f->done[(f->first + i) % f->n];

		if (d->have_seq) {
			out->last_seq = d->last_seq;
			out->have_last = 1;
		}
	}
	if (s && f->have_base && s->first_seq > f->base_seq) {
		out->not_kept.first_seq = f->base_seq;
		out->not_kept.last_seq = s->first_seq - 1;
		out->not_kept.count = s->first_seq - f->base_seq;
		out->not_kept.reason = TM_GAP_NOT_KEPT;
		/* where the ring began (the run's start: goto step 0 lands
		 * on it) */
		out->not_kept.step = f->base_step;
		out->not_kept.time_ns = 0;
	}
}

int tm_flight__write(struct tm_flight *f, tm_writer *w)
{
	struct tm_flight_window win;
	uint32_t i;
	int err;

	tm_flight__window(f, &win);
	if (win.not_kept.count) {
		err = tm_writer_gap(w, &win.not_kept);
		if (err)
			return err;
	}
	for (i = 0; i < f->count; i++) {
		const struct fstep *s = &f->done[(f->first + i) % f->n];

		if (s->buf.len && (err = tm_writer_raw(w, s->buf.data, s->buf.len)))
			return err;
	}
	if (f->have_cur) {
		if (f->cur.over)
			step_close_over(&f->cur);
		if (f->cur.buf.len &&
		    (err = tm_writer_raw(w, f->cur.buf.data, f->cur.buf.len)))
			return err;
	}
	return TM_OK;
}
