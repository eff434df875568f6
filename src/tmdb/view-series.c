/*
 * view-series.c -- one stat of the nodes a pattern matches, read over
 * steps in one pass of the trace (heatmap ... over steps, plot).
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

/* ------------------------------------------------------------- series */

int view_stat_from(const char *name)
{
	if (!strcmp(name, "time"))
		return -1;
	return tm_stat_from_name(name);
}

void view_stat_names(char *buf, size_t len)
{
	size_t off = 0;
	int i;

	for (i = 0; i < TM_STAT__COUNT && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s, ",
					tm_stat_table[i].name);
	if (off < len)
		snprintf(buf + off, len - off, "time");
}

int view_parse_sterm(struct tm_session *s, const char *text, int need_one,
		     struct sterm *st)
{
	char buf[TM_ADDRESS_MAX + 64], names[512], inner[TM_ADDRESS_MAX + 64];
	const char *colon, *dot, *stat;
	int col = 0;
	const char *msg = NULL;

	memset(st, 0, sizeof(*st));
	text = tm_skip_ws(text);
	if (!*text) {
		tm_error(s, "Argument required (NODE:SLOT.STAT).");
		return -1;
	}
	snprintf(st->text, sizeof(st->text), "%s", text);
	/* reldiff(TERM): against the reference loaded by compare */
	if (!strncmp(text, "reldiff(", 8)) {
		size_t l = strlen(text);

		while (l && (text[l - 1] == ' ' || text[l - 1] == '\t'))
			l--;
		if (l < 10 || text[l - 1] != ')' || l - 9 >= sizeof(inner)) {
			tm_error(s, "Write reldiff(NODE:SLOT.STAT).");
			return -1;
		}
		if (!s->ref) {
			tm_error(s, "reldiff() needs a reference (compare FILE loads one).");
			return -1;
		}
		memcpy(inner, text + 8, l - 9);
		inner[l - 9] = 0;
		text = tm_skip_ws(inner);
		st->ref = 1;
	}
	colon = strchr(text, ':');
	if (!colon) {
		if (need_one) {
			tm_error(s, "Name a node: ADDRESS:SLOT.STAT, e.g. model.head:out.abs_max.");
			return -1;
		}
		snprintf(buf, sizeof(buf), "**:out");
		stat = text;
	} else {
		dot = strrchr(colon, '.');
		if (!dot) {
			tm_error(s, "\"%s\" names no stat: write ADDRESS:SLOT.STAT.", text);
			return -1;
		}
		if ((size_t)(dot - text) >= sizeof(buf)) {
			tm_error(s, "Address too long.");
			return -1;
		}
		memcpy(buf, text, (size_t)(dot - text));
		buf[dot - text] = 0;
		stat = dot + 1;
	}
	st->stat = view_stat_from(stat);
	if (st->stat == -1 && strcmp(stat, "time"))
		st->stat = -2;
	if (st->ref && st->stat < 0)
		st->stat = -2;
	if (st->stat == -2) {
		view_stat_names(names, sizeof(names));
		tm_error(s, "Unknown stat \"%s\".  Stats: %s.", stat, names);
		return -1;
	}
	if (tm_address_parse(buf, &st->a, &col, &msg) != TM_OK) {
		tm_error(s, "Malformed address \"%s\": %s at column %d.", buf,
			 msg ? msg : "syntax error", col + 1);
		return -1;
	}
	if (!tm_address_is_pattern(st->a) &&
	    !tm_session_node(s, st->a)) {
		char path[TM_ADDRESS_MAX];

		snprintf(path, sizeof(path), "%s", tm_address_path(st->a));
		tm_address_free(st->a);
		st->a = NULL;
		return tm_address_error(s, path);
	}
	st->slot = tm_address_slot(st->a, NULL);
	st->evkind = tm_slot_event_kind(st->slot.kind);
	return 0;
}

/* "A..B", "A", or nothing (everything). */
int view_parse_range(struct tm_session *s, const char *p, uint64_t *a,
		     uint64_t *b)
{
	char *end;

	*a = 0;
	*b = UINT64_MAX;
	p = tm_skip_ws(p);
	if (!*p)
		return 0;
	if (isdigit((unsigned char)*p)) {
		*a = strtoull(p, &end, 10);
		p = end;
	}
	if (!strncmp(p, "..", 2)) {
		p += 2;
		if (isdigit((unsigned char)*p)) {
			*b = strtoull(p, &end, 10);
			p = end;
		}
	} else {
		*b = *a;
	}
	if (*tm_skip_ws(p) || *b < *a) {
		tm_error(s, "Bad step range: write A..B (either may be left out).");
		return -1;
	}
	return 0;
}

void view_series_free(struct series *sr)
{
	uint32_t i;

	for (i = 0; sr->kind && i < sr->nn; i++) {
		free(sr->kind[i]);
		free(sr->val[i]);
	}
	free(sr->kind);
	free(sr->val);
	free(sr->gap);
	memset(sr, 0, sizeof(*sr));
}

int view_series_col(const struct series *sr, uint64_t step)
{
	if (!sr->any || step < sr->first || step > sr->last)
		return -1;
	return (int)((step - sr->first) / sr->per);
}

void view_series_what(struct rbuf *out, const struct series *sr)
{
	uint64_t n = sr->last - sr->first + 1;

	rb_printf(out, "%" PRIu64 " step%s, ", n, n == 1 ? "" : "s");
	if (sr->per == 1)
		rb_puts(out, "one a column");
	else
		rb_printf(out, "%" PRIu64 " a column, worst of each", sr->per);
}

/*
 * Twice as many steps a column: when steps arrive past the last column
 * (a range not known before the scan), neighbours merge pairwise.
 */
static void series_coarsen(struct series *sr)
{
	int c, m = (sr->maxcol + 1) / 2;
	uint32_t i;

	for (i = 0; i < sr->nn; i++) {
		uint8_t *k = sr->kind[i];
		double *v = sr->val[i];

		if (!k)
			continue;
		for (c = 0; c < m; c++) {
			uint8_t k0 = k[2 * c];
			double v0 = v[2 * c];

			if (2 * c + 1 < sr->maxcol)
				view_cell_merge(&k0, &v0, k[2 * c + 1], v[2 * c + 1]);
			k[c] = k0;
			v[c] = v0;
		}
		memset(k + m, CELL_EMPTY, (size_t)(sr->maxcol - m));
	}
	for (c = 0; c < m; c++)
		sr->gap[c] = sr->gap[2 * c] |
			     (2 * c + 1 < sr->maxcol ? sr->gap[2 * c + 1] : 0);
	memset(sr->gap + m, 0, (size_t)(sr->maxcol - m));
	sr->per *= 2;
}

static int see_step(struct series *sr, uint64_t step)
{
	if (!sr->any) {
		sr->first = sr->last = step;
		sr->any = 1;
	}
	if (step < sr->first)   /* records out of step order: keep the axis */
		return -1;
	while ((step - sr->first) / sr->per >= (uint64_t)sr->maxcol)
		series_coarsen(sr);
	if (step > sr->last)
		sr->last = step;
	sr->ncol = (int)((sr->last - sr->first) / sr->per) + 1;
	return (int)((step - sr->first) / sr->per);
}

/* The step of the first record at or after step a, and of the last one,
 * so that the columns are sized once; -1 when the trace has none. */
static int series_bounds(struct tm_session *s, uint64_t a, uint64_t *first,
			 uint64_t *last, uint64_t *last_seq, int *have_seq)
{
	struct tm_record rec;
	int err, got = 0;

	*have_seq = 0;
	err = a ? s->probe->ops->seek(s->probe, TM_SEEK_STEP, a) :
		  s->probe->ops->seek(s->probe, TM_SEEK_START, 0);
	while (err == TM_OK &&
	       s->probe->ops->next_event(s->probe, TM_DIR_FWD, &rec) == TM_OK) {
		if (rec.type == TM_REC_EVENT || rec.type == TM_REC_GAP) {
			*first = rec.type == TM_REC_EVENT ? rec.u.event.step :
							    rec.u.gap.step;
			got = 1;
			break;
		}
	}
	if (!got)
		return -1;
	err = s->probe->ops->seek(s->probe, TM_SEEK_END, 0);
	while (err == TM_OK &&
	       s->probe->ops->next_event(s->probe, TM_DIR_BWD, &rec) == TM_OK) {
		if (rec.type == TM_REC_EVENT) {
			*last = rec.u.event.step;
			*last_seq = rec.u.event.seq;
			*have_seq = 1;
			return 0;
		}
		if (rec.type == TM_REC_GAP) {
			*last = rec.u.gap.step;
			return 0;
		}
	}
	*last = *first;
	return 0;
}

/*
 * A view never moves a live model: on a live run it reads the history that
 * has arrived and stops at its newest record, because reading past it
 * resumes the model (probe-remote.c).  This is the one place that decides
 * it; returns 1 when the scan must stop after record seq last_seq.
 */
static int view_hold_history(struct tm_session *s)
{
	return s->probe->ops->process != NULL;
}

static int series_row(struct series *sr, uint32_t node)
{
	if (sr->kind[node])
		return 0;
	sr->kind[node] = calloc((size_t)sr->maxcol, 1);
	sr->val[node] = calloc((size_t)sr->maxcol, sizeof(double));
	if (!sr->kind[node] || !sr->val[node])
		return -1;
	sr->nrows++;
	return 0;
}

/*
 * One pass over steps a..b merging the term's value for every matching
 * node into its column, and marking the columns with gaps.  Ctrl-C stops
 * it (what was read is kept and the caller says the picture is partial).
 */
int view_scan_series(struct tm_session *s, const struct sterm *st,
		     uint64_t a, uint64_t b, int maxcol, struct series *sr)
{
	uint32_t nn = tm_nodetab_count(s->nodes), i;
	uint8_t *match;
	struct tm_record rec;
	uint64_t tick = 0, first = 0, last = 0, last_seq = 0;
	int err = TM_ERR_END, have_seq = 0, hold;

	memset(sr, 0, sizeof(*sr));
	memset(&rec, 0, sizeof(rec));
	sr->maxcol = maxcol < 1 ? 1 : maxcol;
	sr->per = 1;
	sr->nn = nn;
	match = calloc(nn ? nn : 1, 1);
	sr->kind = calloc(nn ? nn : 1, sizeof(*sr->kind));
	sr->val = calloc(nn ? nn : 1, sizeof(*sr->val));
	sr->gap = calloc((size_t)sr->maxcol, 1);
	if (!match || !sr->kind || !sr->val || !sr->gap) {
		free(match);
		view_series_free(sr);
		tm_error(s, "Out of memory.");
		return -1;
	}
	for (i = 0; i < nn; i++) {
		const struct tm_node *n = tm_nodetab_get(s->nodes, i);

		match[i] = n && tm_address_match_path(st->a, n->address);
	}
	hold = view_hold_history(s);
	sr->live = hold;
	if (series_bounds(s, a, &first, &last, &last_seq, &have_seq) == 0 &&
	    first <= b) {
		if (last > b)
			last = b;
		if (last >= first)
			sr->per = (last - first) / (uint64_t)sr->maxcol + 1;
		err = a ? s->probe->ops->seek(s->probe, TM_SEEK_STEP, a) :
			  s->probe->ops->seek(s->probe, TM_SEEK_START, 0);
	}
	if (hold && !have_seq)
		err = TM_ERR_END;
	while (err == TM_OK) {
		const struct tm_event *ev = &rec.u.event;
		const struct tm_tensor *t = NULL;
		double v;
		int kind = CELL_VAL, col;

		if ((++tick & 0xfff) == 0) {
			if (tm_interrupted) {
				sr->interrupted = 1;
				break;
			}
			tm_progress(s, rec.type == TM_REC_EVENT ? ev->seq : 0, 0);
		}
		if (hold && rec.type == TM_REC_EVENT && ev->seq >= last_seq)
			break;          /* the newest record: the next read resumes */
		err = s->probe->ops->next_event(s->probe, TM_DIR_FWD, &rec);
		if (err != TM_OK)
			break;
		if (rec.type == TM_REC_GAP) {
			if (rec.u.gap.step < a || rec.u.gap.step > b)
				continue;
			col = see_step(sr, rec.u.gap.step);
			if (col >= 0)
				sr->gap[col] = 1;
			continue;
		}
		if (rec.type != TM_REC_EVENT || ev->step < a)
			continue;
		if (ev->step > b)
			break;
		/* The axis spans the steps in the trace, with a value or not. */
		col = see_step(sr, ev->step);
		if (col < 0 || ev->kind != st->evkind || ev->node >= nn ||
		    !match[ev->node])
			continue;
		for (i = 0; i < ev->ntensors && !t; i++)
			if (ev->tensors[i].slot.kind == st->slot.kind &&
			    ev->tensors[i].slot.index == st->slot.index)
				t = &ev->tensors[i];
		if (!t)
			continue;
		if (st->ref) {
			const struct tm_tensor *rt;
			const struct tm_event *rev;
			uint32_t why;

			/* no aligned reference, or a stat missing on a side:
			 * no sample (the cell stays empty, never 0) */
			rt = tm_compare_reference(s, ev, t->slot, 0, &rev, &why);
			if (!rt && (why & TM_REF_BATCH)) {
				/* a step batched otherwise than the reference:
				 * the largest divergence of its requests' rows */
				for (i = 0; i < ev->ntensors; i++) {
					const struct tm_tensor *u = &ev->tensors[i];
					struct tm_slot bs = tm_slot_row_base(u->slot);

					if (!tm_slot_is_row(u->slot) || bs.kind != st->slot.kind ||
					    bs.index != st->slot.index)
						continue;
					rt = tm_compare_reference(s, ev, u->slot, 0, &rev, &why);
					if (!rt || !(u->have & rt->have & TM_STAT_BIT(st->stat)))
						continue;
					v = tm_reldiff(u->stat[st->stat], rt->stat[st->stat]);
					if (series_row(sr, ev->node)) {
						sr->interrupted = 1;
						break;
					}
					view_cell_merge(&sr->kind[ev->node][col],
							&sr->val[ev->node][col],
							isnan(v) ? CELL_NAN : CELL_VAL, v);
					sr->nsamp++;
				}
				if (sr->interrupted)
					break;
				continue;
			}
			if (!rt || !(t->have & rt->have & TM_STAT_BIT(st->stat)))
				continue;
			v = tm_reldiff(t->stat[st->stat], rt->stat[st->stat]);
			if (isnan(v))
				kind = CELL_NAN;
		} else if (st->stat < 0) {
			v = (double)(ev->end_ns - ev->start_ns);
		} else {
			v = t->stat[st->stat];
			/* A real-valued stat skips non-finite elements: say so. */
			if (!tm_stat_table[st->stat].integer) {
				if ((t->have & TM_STAT_BIT(TM_STAT_NAN_COUNT)) &&
				    t->stat[TM_STAT_NAN_COUNT] > 0)
					kind = CELL_NAN;
				else if ((t->have & TM_STAT_BIT(TM_STAT_POSINF_COUNT)) &&
					 t->stat[TM_STAT_POSINF_COUNT] > 0)
					kind = CELL_POSINF;
				else if ((t->have & TM_STAT_BIT(TM_STAT_NEGINF_COUNT)) &&
					 t->stat[TM_STAT_NEGINF_COUNT] > 0)
					kind = CELL_NEGINF;
			}
			/*
			 * Absent: not captured at this level (no sample), or
			 * no finite element to take it over, which the
			 * non-finite mark above stands for.
			 */
			if (!(t->have & TM_STAT_BIT(st->stat)) &&
			    (kind == CELL_VAL ||
			     !(tm_tql_absent_reason(ev, st->stat) & TM_TQL_NO_FINITE)))
				continue;
		}
		if (series_row(sr, ev->node)) {
			sr->interrupted = 1;
			break;
		}
		view_cell_merge(&sr->kind[ev->node][col], &sr->val[ev->node][col],
				kind, v);
		sr->nsamp++;
	}
	free(match);
	tm_progress(s, 0, 1);
	tm_cursor_restore(s);
	if (err != TM_OK && err != TM_ERR_END) {
		tm_error(s, "Cannot read the trace: %s.", s->probe->ops->detail(s->probe));
		view_series_free(sr);
		return -1;
	}
	return 0;
}

/*
 * Says so when an explicit range a..b reaches past the steps the trace has:
 * the chart shows only first..last, and that must not pass unremarked.
 */
void view_range_note(struct rbuf *out, uint64_t a, uint64_t b,
		     const struct series *sr)
{
	if (a >= sr->first && (b == UINT64_MAX || b <= sr->last))
		return;
	if (b == UINT64_MAX)
		rb_printf(out, "Steps %" PRIu64 ".. asked; the trace has steps %"
			  PRIu64 "..%" PRIu64 " of them.\n", a, sr->first, sr->last);
	else
		rb_printf(out, "Steps %" PRIu64 "..%" PRIu64 " asked; the trace "
			  "has steps %" PRIu64 "..%" PRIu64 " of them.\n", a, b,
			  sr->first, sr->last);
}

/* Where the last step's label goes on an axis w cells wide: under the last
 * cell, or one blank after the first label when they would touch. */
int view_axis_gap(int w, uint64_t first)
{
	char buf[24];
	int l = snprintf(buf, sizeof(buf), "%" PRIu64, first);

	return w - 1 > l ? w - 1 : l + 1;
}

/* Worse wins when samples share a cell: NaN, +Inf, -Inf, then the maximum. */
void view_cell_merge(uint8_t *kind, double *val, int k, double v)
{
	static const int rank[] = { 0, 1, 4, 3, 2, 0 };

	if (*kind == CELL_EMPTY || rank[k] > rank[*kind] ||
	    (k == CELL_VAL && *kind == CELL_VAL && v > *val)) {
		*kind = (uint8_t)k;
		*val = v;
	}
}

const char *view_stat_label(const struct sterm *st)
{
	if (st->ref)
		return st->stat == TM_STAT_MEAN ? "reldiff(mean)" :
		       st->stat == TM_STAT_STD ? "reldiff(std)" :
		       st->stat == TM_STAT_L2 ? "reldiff(l2)" :
		       st->stat == TM_STAT_ABS_MAX ? "reldiff(abs_max)" : "reldiff";
	return st->stat < 0 ? "time (ns)" : tm_stat_table[st->stat].name;
}
