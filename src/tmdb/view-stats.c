/*
 * view-stats.c -- `info stats`: every stat of one tensor, with a
 * sparkline of its histogram.
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

/* ------------------------------------------------------------- info stats */

static void sparkline(struct rbuf *b, const struct tm_tensor *t, int mode)
{
	static const char *const bars[] = {
		" ", "\xe2\x96\x81", "\xe2\x96\x82", "\xe2\x96\x83", "\xe2\x96\x84",
		"\xe2\x96\x85", "\xe2\x96\x86", "\xe2\x96\x87", "\xe2\x96\x88"
	};
	static const char ramp[] = " " RAMP_CHARS;
	uint32_t max = 0;
	int i, lv;

	for (i = 0; i < TM_HIST_BINS; i++)
		if (t->hist[i] > max)
			max = t->hist[i];
	for (i = 0; i < TM_HIST_BINS; i++) {
		if (mode == RENDER_PLAIN) {
			lv = max ? (int)((uint64_t)t->hist[i] * 9 / max) : 0;
			if (t->hist[i] && !lv)
				lv = 1;
			rb_putn(b, &ramp[lv], 1);
		} else {
			lv = max ? (int)((uint64_t)t->hist[i] * 8 / max) : 0;
			if (t->hist[i] && !lv)
				lv = 1;
			rb_puts(b, bars[lv]);
		}
	}
}

int tm_view_info_stats(struct tm_session *s, const char *args)
{
	const struct tm_tensor *t, *rt = NULL;
	const struct tm_event *ev, *rev = NULL;
	uint32_t rwhy = 0;
	struct vopts o;
	struct tref r;
	struct rbuf b;
	char shape[160], num[48], lo[32], hi[32];
	const char *p;
	int i;

	p = view_parse_opts(s, args, &o, 64, 32);
	if (!p || view_parse_tref(s, *p ? p : "tensor", &r))
		return -1;
	t = view_get_tensor(s, &r, &ev);
	if (!t)
		return -1;
	rb_init(&b);
	view_format_shape(t, shape, sizeof(shape));
	rb_printf(&b, "%s at ", r.focus ? "tensor" : r.name);
	view_where_line(s, &b, ev);
	if (ev)
		rb_printf(&b, " (%s of %s, recorded at level %u)",
			  tm_event_kind_name(ev->kind), tm_node_name(s, ev->node),
			  ev->level);
	rb_printf(&b, "\n  %-13s %s\n  %-13s %s\n  %-13s %s:%u\n", "dtype",
		  tm_dtype_name(t->dtype), "shape", shape, "device",
		  t->device_type == 0 ? "cpu" : t->device_type == 1 ? "cuda" : "other",
		  t->device_index);
	/* one request's rows of a batched tensor: which request */
	if (ev && tm_slot_is_row(t->slot)) {
		const struct tm_annot *an = s->probe && s->probe->ops->annotation ?
			s->probe->ops->annotation(s->probe, ev, "request") : NULL;
		unsigned j = tm_slot_row(t->slot);
		char bs[32];

		if (tm_slot_format(tm_slot_row_base(t->slot), bs, sizeof(bs)))
			bs[0] = 0;
		rb_printf(&b, "  %-13s %s (its rows of %s)\n", "request",
			  an && j < an->nvalues ? an->values[j] : "?", bs);
	}
	/* With a reference loaded, its aligned tensor stands beside (or the
	 * reason there is none), and the relative difference of each stat. */
	if (s->ref && ev) {
		rt = tm_compare_reference(s, ev, t->slot, 0, &rev, &rwhy);
		if (!rt) {
			char rs[128];

			tm_tql_reason_format(rwhy, rs, sizeof(rs));
			rb_printf(&b, "  %-13s <unknown: %s>\n", "reference", rs);
		}
	}
	if (rt)
		rb_printf(&b, "  %-13s %-14s %-14s %-10s %s\n", "Stat", "Value",
			  "Reference", "Reldiff", "Level");
	else
		rb_printf(&b, "  %-13s %-14s %s\n", "Stat", "Value", "Level");
	for (i = 0; i < TM_STAT__COUNT; i++) {
		const struct tm_stat_info *si = &tm_stat_table[i];
		const char *note = "";
		char rnum[48], rd[24];

		if (!(t->have & TM_STAT_BIT(i))) {
			/* The reason print gives: no finite element, or the level. */
			uint32_t why = tm_tql_absent_reason(ev, (int)i);

			snprintf(num, sizeof(num), "-");
			note = why & TM_TQL_NO_FINITE ? " (no finite elements)" :
							" (not captured)";
		} else if (si->integer) {
			snprintf(num, sizeof(num), "%.0f", t->stat[i]);
		} else {
			snprintf(num, sizeof(num), "%.6g", t->stat[i]);
		}
		if (rt) {
			if (!(rt->have & TM_STAT_BIT(i)))
				snprintf(rnum, sizeof(rnum), "-");
			else
				snprintf(rnum, sizeof(rnum), si->integer ? "%.0f" : "%.6g",
					 rt->stat[i]);
			if ((t->have & rt->have & TM_STAT_BIT(i)) && !si->integer)
				snprintf(rd, sizeof(rd), "%.2e",
					 tm_reldiff(t->stat[i], rt->stat[i]));
			else if (t->have & rt->have & TM_STAT_BIT(i))
				snprintf(rd, sizeof(rd), "%+.0f", t->stat[i] - rt->stat[i]);
			else
				snprintf(rd, sizeof(rd), "-");
			rb_printf(&b, "  %-13s %-14s %-14s %-10s %u%s\n", si->name, num,
				  rnum, rd, si->level, note);
			continue;
		}
		rb_printf(&b, "  %-13s %-14s %u%s\n", si->name, num, si->level,
			  note);
	}
	if (t->have_hist == TM_HIST_LOG2) {
		/* negative values left, by octave, the two middle bins down
		 * to zero; positive right */
		rb_printf(&b, "  %-13s [", "histogram");
		sparkline(&b, t, o.mode);
		rb_printf(&b, "] octaves -2^%.0f..-2^%.0f | 2^%.0f..2^%.0f  2\n",
			  t->hist_hi, t->hist_lo, t->hist_lo, t->hist_hi);
	} else if (t->have_hist) {
		render_num(lo, sizeof(lo), t->hist_lo);
		render_num(hi, sizeof(hi), t->hist_hi);
		rb_printf(&b, "  %-13s [", "histogram");
		sparkline(&b, t, o.mode);
		rb_printf(&b, "] %d bins over %s..%s  2\n", TM_HIST_BINS, lo, hi);
	} else {
		/* Left out with std when there is no finite element. */
		rb_printf(&b, "  %-13s %-14s 2 %s\n", "histogram", "-",
			  !(t->have & TM_STAT_BIT(TM_STAT_STD)) &&
			  (tm_tql_absent_reason(ev, TM_STAT_STD) & TM_TQL_NO_FINITE) ?
			  "(no finite elements)" : "(not captured)");
	}
	if (t->payload)
		rb_printf(&b, "  %-13s %-14s 3\n", "contents", "captured");
	else
		rb_printf(&b, "  %-13s %-14s 3 (not captured)\n", "contents", "-");
	view_flush_rb(s, &b);
	return 0;
}
