/*
 * view-graph.c -- `info graph`: the architecture as a tree, with a stat
 * of each node at the playhead, folding repeated blocks.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tmdb.h"
#include "render.h"
#include "view.h"
#include "view-int.h"

/* ------------------------------------------------------------- info graph */

enum { NS_NONE = 0, NS_HAVE, NS_PENDING, NS_GAP };
enum { SUB_BAD = 1, SUB_GAP = 2, SUB_CUR = 4 };

struct gnode {
	uint8_t state;
	uint8_t bad;            /* its tensor holds NaN or Inf */
	uint8_t sub;            /* SUB_* of itself and everything below */
	uint8_t shown;
	struct tm_tensor t;     /* stats only (payload dropped) */
	uint8_t level;          /* level of the event t came from */
	uint64_t dur;
	uint32_t kid, sib;      /* first child, next sibling (shown ones) */
	uint64_t sig;           /* structure of the subtree, for folding */
};

struct gline {
	char mark[3];
	int cls;                /* 0 plain, 1 NaN/Inf, 2 gap, 3 pending */
	int cur;
	char tree[192];
	char type[48];
	char over[160];
};

struct graph {
	struct tm_session *s;
	struct gnode *n;
	uint32_t nn;
	int stat;               /* -1 time, -3 default (abs_max + counts) */
	struct tm_slot slot;
	int evkind;
	int depth, fold, mode;
	int unicode;            /* box drawing without colour */
	const struct vopts *o;  /* -png, -svg, -pdf: also a picture */
	uint32_t cur;           /* the shown node the playhead is in */
	struct gline *ln;
	size_t nln, capln;
	int step_gap;
};

static const char *rel_name(const struct tm_session *s, uint32_t id)
{
	const struct tm_node *n = tm_nodetab_get(s->nodes, id);
	const struct tm_node *p = n && n->parent != TM_NODE_NONE ?
				  tm_nodetab_get(s->nodes, n->parent) : NULL;
	size_t l;

	if (!n)
		return "?";
	if (!p)
		return n->address;
	l = strlen(p->address);
	if (!strncmp(n->address, p->address, l) && n->address[l] == '.')
		return n->address + l + 1;
	return n->address;
}

static uint64_t fnv(uint64_t h, const char *str)
{
	while (str && *str) {
		h ^= (unsigned char)*str++;
		h *= 0x100000001b3ull;
	}
	return h * 0x100000001b3ull;
}

/* Bottom-up: ids are given out parent-first, so children have larger ids. */
static void graph_signatures(struct graph *g)
{
	uint32_t i = g->nn, k;

	while (i-- > 0) {
		const struct tm_node *n = tm_nodetab_get(g->s->nodes, i);
		uint64_t h = fnv(0xcbf29ce484222325ull, n ? n->type : "");

		for (k = g->n[i].kid; k != TM_NODE_NONE; k = g->n[k].sib) {
			h = fnv(h, rel_name(g->s, k));
			h = (h ^ g->n[k].sig) * 0x100000001b3ull;
		}
		g->n[i].sig = h;
	}
}

/*
 * Reads the playhead's step once: for every node, its latest event of the
 * viewed kind at or before the playhead; nodes that come later in the step
 * are pending, and nodes absent from a step with a gap are lost to it.
 */
static int graph_scan(struct graph *g)
{
	struct tm_session *s = g->s;
	struct tm_record rec;
	uint64_t step = s->cur.step, at = s->cur.seq;
	int err;
	uint32_t i;

	err = s->probe->ops->seek(s->probe, TM_SEEK_STEP, step);
	while (err == TM_OK) {
		const struct tm_event *ev = &rec.u.event;

		err = s->probe->ops->next_event(s->probe, TM_DIR_FWD, &rec);
		if (err != TM_OK)
			break;
		if (rec.type == TM_REC_GAP) {
			if (rec.u.gap.step > step)
				break;
			if (rec.u.gap.step == step && rec.u.gap.first_seq <= at)
				g->step_gap = 1;
			continue;
		}
		if (rec.type != TM_REC_EVENT || ev->step < step)
			continue;
		if (ev->step > step)
			break;
		if (ev->kind != g->evkind || ev->node >= g->nn)
			continue;
		if (ev->seq > at) {
			if (g->n[ev->node].state != NS_HAVE)
				g->n[ev->node].state = NS_PENDING;
			continue;
		}
		for (i = 0; i < ev->ntensors; i++) {
			const struct tm_tensor *t = &ev->tensors[i];

			if (t->slot.kind != g->slot.kind || t->slot.index != g->slot.index)
				continue;
			g->n[ev->node].t = *t;
			g->n[ev->node].t.payload = NULL;
			g->n[ev->node].t.payload_len = 0;
			g->n[ev->node].level = ev->level;
			g->n[ev->node].state = NS_HAVE;
			g->n[ev->node].dur = ev->end_ns - ev->start_ns;
			break;
		}
	}
	tm_cursor_restore(s);
	if (err != TM_OK && err != TM_ERR_END) {
		tm_error(s, "Cannot read the trace: %s.", s->probe->ops->detail(s->probe));
		return -1;
	}
	/*
	 * Absent from a step with a gap: lost to it, unless its children ran
	 * (a container such as ModuleList that records nothing itself).
	 * Children have larger ids, so going backwards sees them first.
	 */
	for (i = g->nn; i-- > 0; ) {
		struct gnode *n = &g->n[i];
		uint32_t k;
		int kids_ran = 0;

		if (n->state != NS_NONE || !g->step_gap)
			continue;
		for (k = n->kid; k != TM_NODE_NONE; k = g->n[k].sib)
			kids_ran |= g->n[k].state == NS_HAVE || g->n[k].state == NS_PENDING;
		if (!kids_ran)
			n->state = NS_GAP;
	}
	for (i = 0; i < g->nn; i++) {
		struct gnode *n = &g->n[i];
		const struct tm_tensor *t = &n->t;

		if (n->state == NS_HAVE &&
		    (((t->have & TM_STAT_BIT(TM_STAT_NAN_COUNT)) &&
		      t->stat[TM_STAT_NAN_COUNT] > 0) ||
		     ((t->have & TM_STAT_BIT(TM_STAT_INF_COUNT)) &&
		      t->stat[TM_STAT_INF_COUNT] > 0)))
			n->bad = 1;
	}
	return 0;
}

/* A stat of node n, or why it is unknown (the reason print gives). */
static void fmt_stat(char *buf, size_t len, const struct gnode *n, int st)
{
	const struct tm_tensor *t = &n->t;

	if (!(t->have & TM_STAT_BIT(st))) {
		struct tm_event ev;
		char why[32];

		memset(&ev, 0, sizeof(ev));
		ev.level = n->level;
		if (tm_tql_reason_format(tm_tql_absent_reason(&ev, st), why,
					 sizeof(why)) != TM_OK)
			snprintf(why, sizeof(why), "level");
		snprintf(buf, len, "<unknown: %s>", why);
	} else if (tm_stat_table[st].integer) {
		snprintf(buf, len, "%.0f", t->stat[st]);
	} else {
		render_num(buf, len, t->stat[st]);
	}
}

static void fmt_dur(char *buf, size_t len, uint64_t ns)
{
	if (ns >= 10000000)
		snprintf(buf, len, "%.3g ms", (double)ns / 1e6);
	else if (ns >= 10000)
		snprintf(buf, len, "%.3g us", (double)ns / 1e3);
	else
		snprintf(buf, len, "%" PRIu64 " ns", ns);
}

/* The overlay of one node: the field, or abs_max with the NaN/Inf counts. */
static void node_overlay(const struct graph *g, uint32_t id, char *buf, size_t len)
{
	const struct gnode *n = &g->n[id];
	char a[48], b[48], c[48];

	switch (n->state) {
	case NS_PENDING:
		snprintf(buf, len, "-");
		return;
	case NS_GAP:
		snprintf(buf, len, "<gap>");
		return;
	case NS_NONE:
		buf[0] = 0;
		return;
	default:
		break;
	}
	if (g->stat == -1) {
		fmt_dur(a, sizeof(a), n->dur);
		snprintf(buf, len, "time=%s", a);
	} else if (g->stat >= 0) {
		fmt_stat(a, sizeof(a), n, g->stat);
		snprintf(buf, len, "%s=%s", tm_stat_table[g->stat].name, a);
	} else {
		fmt_stat(a, sizeof(a), n, TM_STAT_ABS_MAX);
		fmt_stat(b, sizeof(b), n, TM_STAT_NAN_COUNT);
		fmt_stat(c, sizeof(c), n, TM_STAT_INF_COUNT);
		snprintf(buf, len, "abs_max=%s nan=%s inf=%s", a, b, c);
	}
}

static struct gline *new_line(struct graph *g)
{
	struct gline *l;

	if (g->nln == g->capln) {
		size_t cap = g->capln ? 2 * g->capln : 64;
		struct gline *p = realloc(g->ln, cap * sizeof(*p));

		if (!p)
			return NULL;
		g->ln = p;
		g->capln = cap;
	}
	l = &g->ln[g->nln++];
	memset(l, 0, sizeof(*l));
	memcpy(l->mark, "  ", 3);
	return l;
}

static void set_marks(struct gline *l, int cur, int sub_flags)
{
	l->mark[0] = cur ? '>' : ' ';
	l->mark[1] = sub_flags & SUB_BAD ? '!' : sub_flags & SUB_GAP ? '?' : ' ';
	l->cur = cur;
	l->cls = sub_flags & SUB_BAD ? 1 : sub_flags & SUB_GAP ? 2 : 0;
}

/* A number at the end of an address segment: "layers.7" gives 7. */
static long seg_index(const char *rel)
{
	char *end;
	long v;

	if (!isdigit((unsigned char)*rel))
		return -1;
	v = strtol(rel, &end, 10);
	return *end ? -1 : v;
}

/* Joins up to four strings into dst, cut to fit (tree lines, prefixes). */
static void join4(char *dst, size_t len, const char *a, const char *b,
		  const char *c, const char *d)
{
	const char *parts[4] = { a, b, c, d };
	size_t off = 0, l;
	int i;

	for (i = 0; i < 4; i++) {
		if (!parts[i])
			continue;
		l = strlen(parts[i]);
		if (off + l >= len)
			l = len - 1 - off;
		memcpy(dst + off, parts[i], l);
		off += l;
	}
	dst[off] = 0;
}

static void graph_node(struct graph *g, uint32_t id, int depth,
		       const char *prefix, const char *conn, const char *cont);

/* A run of identical quiet blocks as one line with the range of its values. */
static void graph_fold(struct graph *g, uint32_t first, uint32_t last,
		       uint32_t count, const char *prefix, const char *conn)
{
	struct gline *l = new_line(g);
	const struct tm_node *n = tm_nodetab_get(g->s->nodes, first);
	double lo = INFINITY, hi = -INFINITY;
	uint32_t k, have = 0, pending = 0;
	int st = g->stat == -3 ? TM_STAT_ABS_MAX : g->stat;
	const struct gnode *seen = NULL;
	char a[48], b[48];

	if (!l)
		return;
	set_marks(l, 0, 0);
	{
		char range[96];

		snprintf(range, sizeof(range), "%.40s..%.40s", rel_name(g->s, first),
			 rel_name(g->s, last));
		join4(l->tree, sizeof(l->tree), prefix, conn, range, NULL);
	}
	snprintf(l->type, sizeof(l->type), "%s x%u", n && n->type ? n->type : "-",
		 count);
	for (k = first; ; k = g->n[k].sib) {
		const struct gnode *gn = &g->n[k];
		double v = NAN;

		if (gn->state == NS_HAVE) {
			if (st == -1)
				v = (double)gn->dur;
			else if (gn->t.have & TM_STAT_BIT(st))
				v = gn->t.stat[st];
			have++;
			seen = gn;
		} else if (gn->state == NS_PENDING) {
			pending++;
		}
		if (!isnan(v)) {
			if (v < lo)
				lo = v;
			if (v > hi)
				hi = v;
		}
		if (k == last)
			break;
	}
	if (lo <= hi) {
		render_num(a, sizeof(a), lo);
		render_num(b, sizeof(b), hi);
		snprintf(l->over, sizeof(l->over), "%s=%s..%s%s (identical blocks)",
			 st == -1 ? "time_ns" : tm_stat_table[st].name, a, b,
			 g->stat == -3 ? " nan=0 inf=0" : "");
	} else {
		a[0] = 0;
		if (!pending && seen && st >= 0)
			fmt_stat(a, sizeof(a), seen, st);
		snprintf(l->over, sizeof(l->over), "%s (identical blocks)",
			 pending ? "-" : a);
	}
	if (pending && !have)
		l->cls = 3;
}

static void graph_kids(struct graph *g, uint32_t id, int depth, const char *prefix)
{
	int ascii = g->mode == RENDER_PLAIN && !g->unicode;
	const char *conn_mid = ascii ? "|- " : "\xe2\x94\x9c\xe2\x94\x80 ";
	const char *conn_end = ascii ? "`- " : "\xe2\x94\x94\xe2\x94\x80 ";
	const char *cont_mid = ascii ? "|  " : "\xe2\x94\x82  ";
	uint32_t k = g->n[id].kid, j, last, count;

	while (k != TM_NODE_NONE) {
		const struct tm_node *nk = tm_nodetab_get(g->s->nodes, k);
		long ix = seg_index(rel_name(g->s, k));

		/* extend a run of quiet, identically built, consecutive blocks */
		last = k;
		count = 1;
		if (g->fold && ix >= 0 && !g->n[k].sub) {
			for (j = g->n[k].sib; j != TM_NODE_NONE; j = g->n[j].sib) {
				const struct tm_node *nj = tm_nodetab_get(g->s->nodes, j);

				if (g->n[j].sub || g->n[j].sig != g->n[k].sig ||
				    seg_index(rel_name(g->s, j)) != ix + (long)count ||
				    !nj || !nk || !nj->type || !nk->type ||
				    strcmp(nj->type, nk->type))
					break;
				last = j;
				count++;
			}
		}
		if (count >= 2) {
			graph_fold(g, k, last, count, prefix,
				   g->n[last].sib == TM_NODE_NONE ? conn_end : conn_mid);
			k = g->n[last].sib;
			continue;
		}
		graph_node(g, k, depth + 1, prefix,
			   g->n[k].sib == TM_NODE_NONE ? conn_end : conn_mid,
			   g->n[k].sib == TM_NODE_NONE ? "   " : cont_mid);
		k = g->n[k].sib;
	}
}

static void graph_node(struct graph *g, uint32_t id, int depth,
		       const char *prefix, const char *conn, const char *cont)
{
	const struct tm_node *n = tm_nodetab_get(g->s->nodes, id);
	struct gline *l = new_line(g);
	char sub_prefix[192];
	int hidden = g->depth >= 0 && depth >= g->depth && g->n[id].kid != TM_NODE_NONE;
	int flags;

	if (!l)
		return;
	/* at the depth limit, what lies below still shows in the marks */
	flags = hidden ? g->n[id].sub : (g->n[id].bad ? SUB_BAD : 0) |
		(g->n[id].state == NS_GAP ? SUB_GAP : 0);
	set_marks(l, g->cur == id || (hidden && (g->n[id].sub & SUB_CUR)), flags);
	join4(l->tree, sizeof(l->tree), prefix, conn,
	      depth ? rel_name(g->s, id) : n->address, hidden ? " {...}" : "");
	snprintf(l->type, sizeof(l->type), "%s", n->type ? n->type : "-");
	node_overlay(g, id, l->over, sizeof(l->over));
	if (g->n[id].state == NS_PENDING)
		l->cls = 3;
	if (hidden)
		return;
	join4(sub_prefix, sizeof(sub_prefix), prefix, cont, NULL, NULL);
	graph_kids(g, id, depth, sub_prefix);
}

/* field := [SLOT.]STAT | [SLOT.]time */
static int graph_field(struct tm_session *s, struct graph *g, const char *f)
{
	const char *dot = strrchr(f, '.');
	char names[512];

	if (dot) {
		char slot[32];

		if ((size_t)(dot - f) >= sizeof(slot)) {
			tm_error(s, "Bad field \"%s\".", f);
			return -1;
		}
		memcpy(slot, f, (size_t)(dot - f));
		slot[dot - f] = 0;
		if (tm_slot_parse(slot, &g->slot) != TM_OK) {
			/* "out.1.abs_max": the slot index is part of the slot */
			tm_error(s, "Bad slot \"%s\" in field \"%s\".", slot, f);
			return -1;
		}
		f = dot + 1;
	}
	g->stat = view_stat_from(f);
	if (g->stat == -1 && strcmp(f, "time")) {
		view_stat_names(names, sizeof(names));
		tm_error(s, "Unknown field \"%s\".  Fields: %s.", f, names);
		return -1;
	}
	return 0;
}

/* The same lines, without escapes, as a picture (info graph -png F). */
static int graph_picture(struct graph *g, size_t tw, size_t yw)
{
	struct tm_session *s = g->s;
	struct pic_text tx;
	char **line = calloc(g->nln ? g->nln : 1, sizeof(*line));
	uint8_t *cls = calloc(g->nln ? g->nln : 1, 1);
	uint8_t *cur = calloc(g->nln ? g->nln : 1, 1);
	char title[TM_ADDRESS_MAX + 200];
	size_t i;
	int rc = -1;

	if (!line || !cls || !cur)
		goto oom;
	for (i = 0; i < g->nln; i++) {
		const struct gline *l = &g->ln[i];
		struct rbuf b;
		size_t from;

		rb_init(&b);
		rb_puts(&b, l->mark);
		from = b.len;
		rb_puts(&b, l->tree);
		rb_pad(&b, from, tw + 2);
		rb_printf(&b, "%-*s  %s", (int)yw, l->type, l->over);
		while (b.len && b.p[b.len - 1] == ' ')
			b.p[--b.len] = 0;
		if (b.oom) {
			rb_free(&b);
			goto oom;
		}
		line[i] = b.p;
		cls[i] = (uint8_t)l->cls;
		cur[i] = (uint8_t)l->cur;
	}
	snprintf(title, sizeof(title), "Architecture at step %" PRIu64 ", %s, seq %"
		 PRIu64, s->cur.step, tm_phase_name(s->cur.phase), s->cur.seq);
	memset(&tx, 0, sizeof(tx));
	tx.title = title;
	tx.subtitle = g->stat == -3 ? "overlay: abs_max, nan/inf counts" :
		      g->stat == -1 ? "overlay: time (ns)" :
		      tm_stat_table[g->stat].name;
	tx.note = "> playhead   ! NaN/Inf (magenta)   ? lost to a gap   - not yet "
		  "run in this step (grey)";
	tx.n = (int)g->nln;
	tx.line = (const char *const *)line;
	tx.cls = cls;
	tx.cur = cur;
	rc = view_write_text(s, g->o, &tx);
	goto out;
oom:
	tm_error(s, "Out of memory.");
out:
	for (i = 0; line && i < g->nln; i++)
		free(line[i]);
	free(line);
	free(cls);
	free(cur);
	return rc;
}

static int graph_emit(struct graph *g)
{
	struct tm_session *s = g->s;
	struct rbuf b;
	size_t i, tw = 0, yw = 0;
	char slot[32];

	rb_init(&b);
	tm_slot_format(g->slot, slot, sizeof(slot));
	rb_printf(&b, "Architecture at step %" PRIu64 ", %s, seq %" PRIu64
		  " (%s of %s); overlay: %s ", s->cur.step,
		  tm_phase_name(s->cur.phase), s->cur.seq,
		  tm_event_kind_name(s->cur.kind), tm_node_name(s, s->cur.node), slot);
	if (g->stat == -3)
		rb_puts(&b, "abs_max, nan/inf counts\n");
	else
		rb_printf(&b, "%s\n", g->stat == -1 ? "time" : tm_stat_table[g->stat].name);
	for (i = 0; i < g->nln; i++) {
		size_t l = 0;
		const char *p;

		for (p = g->ln[i].tree; *p; p++)
			l += ((unsigned char)*p & 0xc0) != 0x80;
		if (l > tw)
			tw = l;
		if (strlen(g->ln[i].type) > yw)
			yw = strlen(g->ln[i].type);
	}
	for (i = 0; i < g->nln; i++) {
		const struct gline *l = &g->ln[i];
		size_t from;

		if (g->mode != RENDER_PLAIN && l->cur)
			rb_puts(&b, "\033[1m");
		rb_puts(&b, l->mark);
		from = b.len;
		rb_puts(&b, l->tree);
		rb_pad(&b, from, tw + 2);
		rb_printf(&b, "%-*s  ", (int)yw, l->type);
		if (g->mode != RENDER_PLAIN && l->cls) {
			render_sgr(&b, g->mode, render_special(l->cls == 1 ? PAL_NAN :
				   l->cls == 2 ? PAL_GAP_LIGHT : PAL_GAP_DARK), 1);
			rb_printf(&b, "%s" SGR_RESET, l->over);
		} else {
			rb_puts(&b, l->over);
			if (g->mode != RENDER_PLAIN && l->cur)
				rb_puts(&b, SGR_RESET);
		}
		/* no trailing blanks when there is no overlay */
		while (b.len && b.p[b.len - 1] == ' ')
			b.p[--b.len] = 0;
		rb_puts(&b, "\n");
	}
	rb_puts(&b, "(> playhead, ! NaN/Inf, ? lost to a gap, - not yet run in "
		"this step)\n");
	view_flush_rb(s, &b);
	if (g->o && pic_any(&g->o->pic))
		return graph_picture(g, tw, yw);
	return 0;
}

/*
 * info graph [OPTIONS] [PATTERN] [depth N] [field [SLOT.]STAT|time] [fold off]
 */
int tm_view_info_graph(struct tm_session *s, const char *args)
{
	struct graph g;
	struct vopts o;
	tm_address *pat = NULL;
	const char *p;
	uint32_t i;
	int rc = -1, col = 0;
	const char *msg = NULL;
	char patbuf[TM_ADDRESS_MAX];

	memset(&g, 0, sizeof(g));
	g.s = s;
	g.stat = -3;
	g.depth = -1;
	g.fold = 1;
	patbuf[0] = 0;
	p = view_parse_opts(s, args, &o, 64, 32);
	if (!p)
		return -1;
	g.mode = o.mode;
	g.o = &o;
	/* a picture draws the tree with box drawing: so does the text then */
	g.unicode = o.unicode || pic_any(&o.pic);
	while (*(p = tm_skip_ws(p))) {
		size_t l = view_word_len(p);
		const char *v = tm_skip_ws(p + l);
		size_t vl = view_word_len(v);
		char val[128];

		if ((view_word_eq(p, l, "depth") || view_word_eq(p, l, "field") ||
		     view_word_eq(p, l, "fold")) && vl && vl < sizeof(val)) {
			memcpy(val, v, vl);
			val[vl] = 0;
			if (p[0] == 'd') {
				uint64_t d;

				if (tm_parse_uint(val, &d) || d > 1000) {
					tm_error(s, "Bad depth \"%s\".", val);
					return -1;
				}
				g.depth = (int)d;
			} else if (p[1] == 'i') {
				if (graph_field(s, &g, val))
					return -1;
			} else {
				if (tm_parse_bool(val, &g.fold)) {
					tm_error(s, "\"fold\" takes on or off.");
					return -1;
				}
			}
			p = v + vl;
			continue;
		}
		if (patbuf[0] || l >= sizeof(patbuf)) {
			tm_error(s, "Usage: info graph [PATTERN] [depth N] "
				 "[field [SLOT.]STAT|time] [fold on|off]");
			return -1;
		}
		memcpy(patbuf, p, l);
		patbuf[l] = 0;
		p += l;
	}
	if (!s->have_cur) {
		tm_error(s, "No current event.  Use \"run\", \"step\" or \"goto\" first.");
		return -1;
	}
	if (patbuf[0] && tm_address_parse(patbuf, &pat, &col, &msg) != TM_OK) {
		tm_error(s, "Malformed address \"%s\": %s at column %d.", patbuf,
			 msg ? msg : "syntax error", col + 1);
		return -1;
	}
	g.evkind = tm_slot_event_kind(g.slot.kind);
	g.nn = tm_nodetab_count(s->nodes);
	g.n = calloc(g.nn ? g.nn : 1, sizeof(*g.n));
	if (!g.n)
		goto out;
	/* which nodes are drawn: modules, and parameters when the field is theirs */
	for (i = 0; i < g.nn; i++) {
		const struct tm_node *n = tm_nodetab_get(s->nodes, i);

		g.n[i].kid = g.n[i].sib = TM_NODE_NONE;
		g.n[i].shown = n && (n->kind == TM_NODE_MODULE ||
				     g.evkind == TM_EV_PARAM);
	}
	/* children lists in id order (built backwards, so prepend) */
	for (i = g.nn; i-- > 0; ) {
		const struct tm_node *n = tm_nodetab_get(s->nodes, i);

		if (!g.n[i].shown || n->parent == TM_NODE_NONE || n->parent >= g.nn)
			continue;
		g.n[i].sib = g.n[n->parent].kid;
		g.n[n->parent].kid = i;
	}
	if (graph_scan(&g))
		goto out;
	g.cur = s->cur.node;
	while (g.cur < g.nn && !g.n[g.cur].shown)
		g.cur = tm_nodetab_get(s->nodes, g.cur)->parent;
	for (i = g.nn; i-- > 0; ) {
		const struct tm_node *n = tm_nodetab_get(s->nodes, i);

		g.n[i].sub |= (g.n[i].bad ? SUB_BAD : 0) |
			      (g.n[i].state == NS_GAP ? SUB_GAP : 0) |
			      (i == g.cur ? SUB_CUR : 0);
		if (n->parent != TM_NODE_NONE && n->parent < g.nn && g.n[i].shown)
			g.n[n->parent].sub |= g.n[i].sub;
	}
	graph_signatures(&g);
	for (i = 0; i < g.nn; i++) {
		const struct tm_node *n = tm_nodetab_get(s->nodes, i);
		const struct tm_node *par;

		if (!g.n[i].shown)
			continue;
		par = n->parent != TM_NODE_NONE ? tm_nodetab_get(s->nodes, n->parent) : NULL;
		if (pat ? !tm_address_match_path(pat, n->address) ||
			  (par && tm_address_match_path(pat, par->address)) :
			  par != NULL)
			continue;
		graph_node(&g, i, 0, "", "", "");
	}
	if (!g.nln) {
		tm_out(s, "No nodes match \"%s\".\n", patbuf);
		rc = 0;
		goto out;
	}
	rc = graph_emit(&g);
out:
	if (!g.n)
		tm_error(s, "Out of memory.");
	free(g.n);
	free(g.ln);
	tm_address_free(pat);
	return rc;
}
