/*
 * cmd-ops.c -- op events: the instructions of a module call.
 *
 * A probe recording with an op pattern writes one OP event for each tensor
 * operation run directly in a selected module's forward (doc/tmrun.md 4.3):
 * its node is the op's site (a TM_NODE_OP node whose parent is the module,
 * whose type is the aten overload and whose file and line are the caller's),
 * its call the module's call number, op_index its place in that call.
 * GDB's words for instructions apply: stepi/nexti (cmd-run.c) move op by
 * op, x/Ni lists the ops of the current call around the playhead ("=>"
 * marks the current one), display/i shows the current op at every stop,
 * and `info op` says whether the op at the playhead made the non-finite
 * values it holds or passed them on.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tmdb.h"
#include "live.h"

const struct tm_node *tm_op_site(const struct tm_session *s, const struct tm_event *ev)
{
	const struct tm_node *n;

	if (!ev || ev->kind != TM_EV_OP || !s->nodes)
		return NULL;
	n = tm_nodetab_get(s->nodes, ev->node);
	return n && n->kind == TM_NODE_OP ? n : NULL;
}

/* "model.attn#2!8 aten::div.Tensor": the module, its call when not the
 * first, the op's index, and its name. */
void tm_op_label(struct tm_session *s, const struct tm_event *ev, char *buf, size_t len)
{
	const struct tm_node *n = tm_op_site(s, ev);
	const char *mod = n ? tm_node_name(s, n->parent) : tm_node_name(s, ev->node);
	char call[16] = "";

	if (ev->call > 1)
		snprintf(call, sizeof(call), "#%u", ev->call);
	snprintf(buf, len, "%s%s!%u %s", mod, call, ev->op_index,
		 n && n->type ? n->type : "?");
}

void tm_op_conv(struct tm_session *s)
{
	const struct tm_node *n = s->have_cur ? tm_op_site(s, &s->cur) : NULL;

	tm_conv_set_str(s, "_op", n && n->type ? n->type : "");
}

static const char *base_name(const char *path)
{
	const char *b = path ? strrchr(path, '/') : NULL;

	return b ? b + 1 : path ? path : "";
}

/* ", 50 inf (made here)": what an op's outputs hold that is not finite. */
static void op_health(const struct tm_event *ev, char *buf, size_t len)
{
	double nan = 0, inf = 0;
	uint32_t i;
	int r;

	buf[0] = '\0';
	for (i = 0; i < ev->ntensors; i++) {
		const struct tm_tensor *t = &ev->tensors[i];

		if (t->have & TM_STAT_BIT(TM_STAT_NAN_COUNT))
			nan += t->stat[TM_STAT_NAN_COUNT];
		if (t->have & TM_STAT_BIT(TM_STAT_INF_COUNT))
			inf += t->stat[TM_STAT_INF_COUNT];
	}
	if (nan == 0 && inf == 0)
		return;
	r = tm_event_op_made_nonfinite(ev);
	snprintf(buf, len, "\t%.0f nan, %.0f inf%s", nan, inf,
		 r > 0 ? " (made here)" : r == 0 ? " (passed on)" : "");
}

struct op_ent {
	uint64_t seq;
	uint32_t node;
	uint32_t index;
	struct tm_event ev;     /* a copy: its tensors for the health column */
};

static void ents_free(struct op_ent *e, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		tm_event_release(&e[i].ev);
	free(e);
}

/*
 * The module call whose ops x/i lists: the op's own call at an op, else the
 * innermost call open at the playhead (its ENTER or EXIT included).
 */
static int current_call(struct tm_session *s, uint32_t *mod, uint32_t *call)
{
	const struct tm_node *n = tm_op_site(s, &s->cur);

	if (n) {
		*mod = n->parent;
		*call = s->cur.call;
		return 0;
	}
	if (s->cur.kind != TM_EV_ENTER && s->cur.kind != TM_EV_EXIT)
		return -1;
	if (tm_frames_compute(s) || !s->nframes)
		return -1;
	*mod = s->frames[s->nframes - 1].node;
	*call = s->frames[s->nframes - 1].call;
	return 0;
}

int tm_op_examine(struct tm_session *s, uint64_t count, const char *args)
{
	struct tm_record rec;
	struct op_ent *ents = NULL;
	size_t n = 0, cap = 0, i, first, cur = SIZE_MAX;
	uint32_t mod, call;
	int err;

	(void)args;     /* "$pc", "$_op": always the playhead, as x/i $pc */
	if (!s->have_cur) {
		tm_error(s, "The trace is not being replayed.");
		return -1;
	}
	if (current_call(s, &mod, &call)) {
		tm_error(s, "No module call here: x/i lists the ops of the call at the playhead.");
		return -1;
	}
	err = s->probe->ops->seek(s->probe, TM_SEEK_STEP, s->cur.step);
	while (err == TM_OK) {
		const struct tm_node *site;

		err = s->probe->ops->next_event(s->probe, TM_DIR_FWD, &rec);
		if (err != TM_OK || (rec.type == TM_REC_EVENT && rec.u.event.step > s->cur.step))
			break;
		if (rec.type != TM_REC_EVENT || rec.u.event.kind != TM_EV_OP ||
		    rec.u.event.phase != TM_PHASE_FWD || rec.u.event.call != call ||
		    rec.u.event.step != s->cur.step)
			continue;
		site = tm_op_site(s, &rec.u.event);
		if (!site || site->parent != mod)
			continue;
		if (n == cap) {
			struct op_ent *g;

			cap = cap ? cap * 2 : 64;
			g = realloc(ents, cap * sizeof(*g));
			if (!g)
				break;
			ents = g;
		}
		if (tm_event_copy(&ents[n].ev, &rec.u.event) != TM_OK)
			break;
		ents[n].seq = rec.u.event.seq;
		ents[n].node = rec.u.event.node;
		ents[n].index = rec.u.event.op_index;
		if (rec.u.event.seq <= s->cur.seq)
			cur = n;
		n++;
	}
	tm_cursor_restore(s);
	if (!n) {
		tm_error(s, "No op events in %s%s: record with an op pattern (doc/manual.md, "
			 "\"Operations\").", tm_node_name(s, mod), call > 1 ? " (this call)" : "");
		ents_free(ents, n);
		return -1;
	}
	if (count > n)
		count = n;
	/* around the playhead: the current op in the middle where it can be */
	if (cur == SIZE_MAX)
		first = 0;
	else if (cur < count / 2)
		first = 0;
	else
		first = cur - count / 2;
	if (first + count > n)
		first = n - count;
	for (i = first; i < first + count; i++) {
		const struct tm_node *site = tm_nodetab_get(s->nodes, ents[i].node);
		char health[96];
		int here = cur == i && s->cur.kind == TM_EV_OP && ents[i].seq == s->cur.seq;

		op_health(&ents[i].ev, health, sizeof(health));
		tm_out(s, "%s %s%s!%-3u %-22s %s:%u%s\n", here ? "=>" : "  ",
		       tm_node_name(s, mod), "", ents[i].index,
		       site && site->type ? site->type : "?",
		       base_name(site ? site->file : NULL), site ? site->line : 0, health);
	}
	ents_free(ents, n);
	return 0;
}

/* info op: the op at the playhead, and whether it made its non-finite values. */
int tm_info_op(struct tm_session *s, const char *args)
{
	const struct tm_node *site;
	char label[TM_ADDRESS_MAX + 160];
	int r;

	(void)args;
	if (!s->have_cur) {
		tm_error(s, "The trace is not being replayed.");
		return -1;
	}
	site = tm_op_site(s, &s->cur);
	if (!site) {
		tm_error(s, "The playhead is not at an op event (see \"stepi\").");
		return -1;
	}
	tm_op_label(s, &s->cur, label, sizeof(label));
	tm_out(s, "Op %s, %s, at %s:%u\n", label, tm_phase_name(s->cur.phase),
	       site->file ? site->file : "?", site->line);
	if (s->cur.phase != TM_PHASE_FWD) {
		tm_out(s, "The gradient of its output (grad_out).\n");
		return 0;
	}
	r = tm_event_op_made_nonfinite(&s->cur);
	if (r > 0)
		tm_out(s, "It made the non-finite values: its inputs were finite, its output is not.\n");
	else if (r == 0 && (s->cur.op_flags & TM_OPF_INPUTS_CHECKED) &&
		 !(s->cur.op_flags & TM_OPF_INPUTS_FINITE))
		tm_out(s, "It passed non-finite values on: an input was not finite.\n");
	else if (r == 0)
		tm_out(s, "Its output is finite.\n");
	else
		tm_out(s, "Unknown whether it made non-finite values (stats or the input "
		       "check were not recorded).\n");
	return 0;
}

/*
 * set probe-ops PATTERN[,PATTERN...] | off | default: the op patterns of the
 * programs tmdb starts (TENSORMORPH_OPS) and, when a live probe is attached,
 * of that one now (SET_OPS, applied when the model's current call returns).
 */
int tm_set_probe_ops(struct tm_session *s, struct tm_live *lv, const char *args)
{
	const char *p = tm_skip_ws(args), *emsg = NULL;
	char one[TM_ADDRESS_MAX + 1], *val;
	size_t n;
	int col = 0, err;

	if (!*p) {
		tm_error(s, "Argument required (op patterns, \"off\" or \"default\").");
		return -1;
	}
	if (!strcmp(p, "default")) {
		val = NULL;
	} else {
		const char *q = !strcmp(p, "off") ? "" : p;

		for (; *q; q += n + (q[n] == ',')) {
			tm_address *a = NULL;

			n = strcspn(q, ",");
			if (!n)
				continue;
			if (n >= sizeof(one)) {
				tm_error(s, "Pattern too long.");
				return -1;
			}
			memcpy(one, q, n);
			one[n] = '\0';
			if (tm_address_parse(one, &a, &col, &emsg) || tm_address_has_op(a) ||
			    tm_address_has_slot(a) || tm_address_call(a)) {
				tm_error(s, "Malformed op pattern \"%s\": %s.", one,
					 emsg ? emsg : "a node pattern, without #N, !OP or :SLOT");
				tm_address_free(a);
				return -1;
			}
			tm_address_free(a);
		}
		val = strdup(!strcmp(p, "off") ? "" : p);
		if (!val)
			return -1;
	}
	free(lv->ops);
	lv->ops = val;
	if (s->probe && s->probe->ops->set_ops) {
		err = s->probe->ops->set_ops(s->probe, val ? val : "");
		if (err) {
			const char *why = s->probe->ops->detail(s->probe);

			tm_error(s, "Cannot set the op patterns: %s.", why[0] ? why : tm_strerror(err));
			return -1;
		}
		if (val && *val)
			tm_out(s, "Op events in %s, from the model's next call.\n", val);
		else
			tm_out(s, "No op events from the model's next call.\n");
	}
	return 0;
}
