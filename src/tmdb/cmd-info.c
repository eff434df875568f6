/*
 * cmd-info.c -- `info` and its sub-commands: probe, steps, gaps, nodes,
 * event, frame, source, breakpoints, watchpoints, display.
 *
 * Sub-commands form a small table of their own with the same unique-prefix
 * rules and GDB's messages as the top level.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "tmdb.h"
#include "live.h"
#include "view.h"

struct info_sub {
	const char *name;
	int (*fn)(struct tm_session *s, const char *args);
	int needs_trace;
	const char *help;
};

/* ------------------------------------------------------------- probe */

/* The compiled regions of the playhead's step so far (torch.compile,
 * annotated by the probe: "compiled" their outermost modules,
 * "compiled-levels" the levels each one's calls are observed at).  A region
 * the probe does not observe makes no events and is not listed; a level
 * changed by the debugger shows as a region listed again, recompiled. */
static void info_probe_compiled(struct tm_session *s)
{
	const struct tm_annot *a;
	char *addrs[TM_ANNOT_MAX_VALUES];
	uint32_t i, n;

	if (!s->have_cur || !s->probe->ops->annotation)
		return;
	a = s->probe->ops->annotation(s->probe, &s->cur, "compiled");
	if (!a || !a->nvalues)
		return;
	/* valid until the next call */
	for (n = 0; n < a->nvalues && n < TM_ANNOT_MAX_VALUES; n++)
		if (!(addrs[n] = strdup(a->values[n])))
			break;
	a = s->probe->ops->annotation(s->probe, &s->cur, "compiled-levels");
	if (n > 1)
		tm_out(s, "Compiled: step %" PRIu64 " ran %u regions compiled (torch.compile); "
		       "their forward events come when each region ends:\n", s->cur.step, n);
	for (i = 0; i < n; i++) {
		const char *lv = a && i < a->nvalues ? a->values[i] : "?";

		if (n == 1)
			tm_out(s, "Compiled: step %" PRIu64 " ran region %s compiled "
			       "(torch.compile), observed at level %s; its forward events come "
			       "when the region ends\n", s->cur.step, addrs[i], lv);
		else
			tm_out(s, "  region %s observed at level %s\n", addrs[i], lv);
	}
	for (i = 0; i < n; i++)
		free(addrs[i]);
}

static int info_probe(struct tm_session *s, const char *args)
{
	struct tm_probe_info pi;
	const struct tm_summary *sum;
	const struct tm_run_meta *m;
	uint32_t i;

	(void)args;
	s->probe->ops->describe(s->probe, &pi);
	tm_out(s, "Probe: %s of %s\n", pi.kind, pi.source ? pi.source : "?");
	m = pi.meta;
	if (m) {
		tm_out(s, "Recorded by: %s probe, level %u", m->probe_kind ?
		       m->probe_kind : "unknown", m->default_level);
		if (m->torch_version && *m->torch_version)
			tm_out(s, ", torch %s", m->torch_version);
		if (m->host && *m->host)
			tm_out(s, ", host %s", m->host);
		if (m->world_size > 0 && m->rank >= 0)
			tm_out(s, ", rank %d of %d", m->rank, m->world_size);
		else if (m->world_size > 0)
			tm_out(s, ", %d ranks", m->world_size);
		tm_out(s, "\n");
		if (m->command && *m->command)
			tm_out(s, "Command: %s\n", m->command);
		/* what the probe added: patterns, levels, a server's serving.* */
		for (i = 0; i < m->npairs && i < TM_META_MAX_PAIRS; i++)
			tm_out(s, "  %s = %s\n", m->keys[i] ? m->keys[i] : "",
			       m->values[i] ? m->values[i] : "");
	}
	sum = pi.summary;
	if (sum) {
		tm_out(s, "Format: tmrun %u.%u, %s, %s%s\n", sum->version_major,
		       sum->version_minor, sum->indexed ? "indexed" : "not indexed",
		       sum->complete ? "complete" : "incomplete",
		       sum->damaged ? ", damaged tail cut off" : "");
		tm_out(s, "Events: %" PRIu64 " (seq %" PRIu64 "..%" PRIu64 "), "
		       "%" PRIu64 " gap%s, %" PRIu64 " crash%s\n",
		       sum->nevents, sum->first_seq, sum->last_seq, sum->ngaps,
		       sum->ngaps == 1 ? "" : "s", sum->ncrashes,
		       sum->ncrashes == 1 ? "" : "es");
		if (sum->nevents)
			tm_out(s, "Steps: %" PRIu64 "..%" PRIu64 "\n",
			       sum->first_step, sum->last_step);
		tm_out(s, "File: %" PRIu64 " bytes in %" PRIu64 " chunk%s\n",
		       sum->file_bytes, sum->nchunks, sum->nchunks == 1 ? "" : "s");
	}
	tm_out(s, "Nodes: %u\n", tm_nodetab_count(s->nodes));
	tm_out(s, "Capabilities: reverse %s, pause %s, capture %s\n",
	       pi.can_reverse ? "yes" : "no", pi.can_pause ? "yes" : "no",
	       pi.can_capture ? "yes" : "no");
	info_probe_compiled(s);
	if (s->have_cur)
		tm_out(s, "Playhead: seq %" PRIu64 ", step %" PRIu64 ", %s\n",
		       s->cur.seq, s->cur.step, tm_phase_name(s->cur.phase));
	else
		tm_out(s, "Playhead: not started\n");
	return 0;
}

/* ------------------------------------------------------------- steps */

/*
 * A decimal step number at p; *end is left after the blanks that follow.
 * A sign, a missing digit or an overflow is no step number.
 */
static int step_number(const char *p, const char **end, uint64_t *out)
{
	char *e;

	p = tm_skip_ws(p);
	if (!isdigit((unsigned char)*p))
		return -1;
	errno = 0;
	*out = strtoull(p, &e, 10);
	if (errno)
		return -1;
	*end = tm_skip_ws(e);
	return 0;
}

static int info_steps(struct tm_session *s, const char *args)
{
	struct tm_summary live;
	struct tm_probe_info pi;
	int held;
	struct tm_record rec;
	uint64_t first, last, st, shown = 0;
	const char *end;

	s->probe->ops->describe(s->probe, &pi);
	/* a live process: the steps of the history that has arrived, without
	 * letting the model run on */
	held = tm_probe_hold(s->probe, 1);
	if (!pi.summary) {
		int any = 0;

		memset(&live, 0, sizeof(live));
		if (s->probe->ops->seek(s->probe, TM_SEEK_START, 0) == TM_OK)
			while (!tm_interrupted &&
			       s->probe->ops->next_event(s->probe, TM_DIR_FWD, &rec) == TM_OK) {
				if (rec.type != TM_REC_EVENT)
					continue;
				if (!any || rec.u.event.step < live.first_step)
					live.first_step = rec.u.event.step;
				if (!any || rec.u.event.step > live.last_step)
					live.last_step = rec.u.event.step;
				any = 1;
				live.nevents++;
			}
		tm_cursor_restore(s);
		pi.summary = &live;
	}
	if (!pi.summary->nevents) {
		tm_out(s, "No steps.\n");
		if (held)
			tm_probe_hold(s->probe, 0);
		return 0;
	}
	first = pi.summary->first_step;
	last = pi.summary->last_step;
	if (*args) {
		/* "3x" or "1 abc" is a typo, not steps 3..0 (an empty table). */
		if (step_number(args, &end, &first)) {
			tm_error(s, "Usage: info steps [FIRST [LAST]]");
			goto usage;
		}
		last = first;
		if (*end && (step_number(end, &end, &last) || *end)) {
			tm_error(s, "Usage: info steps [FIRST [LAST]]");
			goto usage;
		}
		if (last > pi.summary->last_step)
			last = pi.summary->last_step;
	} else if (last - first >= 100) {
		last = first + 99;
	}
	tm_out(s, "%-8s %-12s %s\n", "Step", "First seq", "Time (ns)");
	for (st = first; st <= last && !tm_interrupted; st++) {
		if (s->probe->ops->seek(s->probe, TM_SEEK_STEP, st) != TM_OK)
			break;
		while (s->probe->ops->next_event(s->probe, TM_DIR_FWD, &rec) == TM_OK) {
			if (rec.type != TM_REC_EVENT)
				continue;
			if (rec.u.event.step == st) {
				tm_out(s, "%-8" PRIu64 " %-12" PRIu64 " %" PRIu64 "\n",
				       st, rec.u.event.seq, rec.u.event.time_ns);
				shown++;
			}
			break;
		}
		if (st == last)
			break;          /* st++ would wrap when last is UINT64_MAX */
	}
	if (!*args && pi.summary->last_step > last)
		tm_out(s, "(%" PRIu64 " more steps: use \"info steps FIRST LAST\")\n",
		       pi.summary->last_step - last);
	tm_cursor_restore(s);
	if (held) {
		tm_probe_hold(s->probe, 0);
		if (!tm_probe_closed(s->probe))
			tm_out(s, "(the steps recorded so far: the program is paused)\n");
	}
	return 0;
usage:
	if (held)
		tm_probe_hold(s->probe, 0);
	return -1;
}

/* ------------------------------------------------------------- gaps */

static int info_gaps(struct tm_session *s, const char *args)
{
	struct tm_record rec;
	uint64_t n = 0, tick = 0;
	char why[128];
	int err;

	(void)args;
	err = s->probe->ops->seek(s->probe, TM_SEEK_START, 0);
	while (err == TM_OK && !tm_interrupted) {
		err = s->probe->ops->next_event(s->probe, TM_DIR_FWD, &rec);
		if (err != TM_OK)
			break;
		if ((++tick & 0xffff) == 0)
			tm_progress(s, rec.type == TM_REC_EVENT ? rec.u.event.seq : 0, 0);
		if (rec.type != TM_REC_GAP)
			continue;
		if (!n++)
			tm_out(s, "%-4s %-22s %-8s %-6s %s\n", "Num", "Seqs", "Lost",
			       "Step", "Reason");
		if (tm_gap_reason_format(rec.u.gap.reason, why, sizeof(why)) != TM_OK)
			snprintf(why, sizeof(why), "?");
		{
			char range[48], lost[24];

			snprintf(range, sizeof(range), "%" PRIu64 "-%" PRIu64,
				 rec.u.gap.first_seq, rec.u.gap.last_seq);
			/* count 0: not known (a cut trace), doc/tmrun.md 4.4 */
			if (rec.u.gap.count)
				snprintf(lost, sizeof(lost), "%" PRIu64, rec.u.gap.count);
			else
				snprintf(lost, sizeof(lost), "?");
			tm_out(s, "%-4" PRIu64 " %-22s %-8s %-6" PRIu64 " %s\n",
			       n, range, lost, rec.u.gap.step, why);
		}
	}
	tm_progress(s, 0, 1);
	{
		struct tm_probe_info pi;
		const struct tm_summary *sum;

		memset(&pi, 0, sizeof(pi));
		s->probe->ops->describe(s->probe, &pi);
		sum = pi.summary;
		if (sum && (!sum->complete || sum->damaged)) {
			/* a trace whose writer did not finish (killed, or the disk
			 * filled up and not even the close could write) does not
			 * know what came after its last record */
			tm_out(s, "%sThe trace was not closed: what came after seq %" PRIu64
			       " is unknown (\"tmdb --recover %s\" records that as a gap).\n",
			       n ? "" : "No gaps recorded.  ", sum->last_seq,
			       s->trace_path ? s->trace_path : "FILE");
		} else if (!n) {
			tm_out(s, "No gaps: every event was recorded.\n");
		}
	}
	tm_cursor_restore(s);
	if (err != TM_OK && err != TM_ERR_END) {
		tm_error(s, "Cannot read the trace: %s.", s->probe->ops->detail(s->probe));
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------- nodes */

static int info_nodes(struct tm_session *s, const char *args)
{
	tm_address *a = NULL;
	const char *msg = NULL;
	uint32_t i, n = tm_nodetab_count(s->nodes), shown = 0;
	int col = 0;

	if (*args && tm_address_parse(args, &a, &col, &msg) != TM_OK) {
		tm_error(s, "Malformed address \"%s\": %s at column %d.", args,
			 msg ? msg : "syntax error", col + 1);
		return -1;
	}
	for (i = 0; i < n; i++) {
		const struct tm_node *nd = tm_nodetab_get(s->nodes, i);

		if (!nd || (a && !tm_address_match_path(a, nd->address)))
			continue;
		if (!shown++)
			tm_out(s, "%-5s %-44s %-14s %s\n", "Id", "Address", "Type",
			       "Source");
		if (nd->file && nd->line)
			tm_out(s, "%-5u %-44s %-14s %s:%u\n", nd->id, nd->address,
			       nd->type ? nd->type : "-", nd->file, nd->line);
		else
			tm_out(s, "%-5u %-44s %s\n", nd->id, nd->address,
			       nd->type ? nd->type : "-");
	}
	if (!shown) {
		if (a && !tm_address_is_pattern(a)) {
			tm_address_free(a);
			return tm_address_error(s, args);
		}
		tm_out(s, "No nodes match \"%s\".\n", args);
	}
	tm_address_free(a);
	return 0;
}

/* ------------------------------------------------------------- event, frame, source */

static int info_event(struct tm_session *s, const char *args)
{
	char buf[2048], sb[32];
	uint32_t i;

	(void)args;
	if (!s->have_cur) {
		tm_error(s, "The trace is not being replayed.");
		return -1;
	}
	tm_out(s, "Event seq %" PRIu64 ": %s of %s", s->cur.seq,
	       tm_event_kind_name(s->cur.kind), tm_node_name(s, s->cur.node));
	if (s->cur.call > 1)
		tm_out(s, "#%u", s->cur.call);
	tm_out(s, " at step %" PRIu64 ", %s, level %u\n", s->cur.step,
	       tm_phase_name(s->cur.phase), s->cur.level);
	tm_out(s, "Time: %" PRIu64 " ns", s->cur.time_ns);
	if (s->cur.kind == TM_EV_EXIT || s->cur.kind == TM_EV_RAISE)
		tm_out(s, " (call %" PRIu64 "..%" PRIu64 " ns, %" PRIu64 " ns)",
		       s->cur.start_ns, s->cur.end_ns,
		       s->cur.end_ns - s->cur.start_ns);
	tm_out(s, "\n");
	if (s->cur.kind == TM_EV_RAISE) {
		const struct tm_annot *x = tm_exception_of(s, &s->cur);

		tm_out(s, "Exception: %s%s%s\n", x && x->nvalues ? x->values[0] : "(not recorded)",
		       x && x->nvalues > 1 && *x->values[1] ? ": " : "",
		       x && x->nvalues > 1 ? x->values[1] : "");
	}
	for (i = 0; i < s->cur.ntensors; i++) {
		tm_slot_format(s->cur.tensors[i].slot, sb, sizeof(sb));
		tm_tensor_format(&s->cur.tensors[i], buf, sizeof(buf));
		tm_out(s, "%s %s = %s\n", i == s->focus ? "*" : " ", sb, buf);
	}
	return 0;
}

/* A step the probe ran compiled (torch.compile) carries the annotation
 * "compiled": the addresses of the regions' outermost modules.  Their
 * forward events reach tmdb when the region ends, so a stop at one holds
 * the model there; a gradient's event comes from the compiled backward as
 * the gradient is made (doc/manual.md, "Compiled models"). */
static void info_frame_compiled(struct tm_session *s, const struct tm_node *n)
{
	const struct tm_annot *a;
	uint32_t i;

	/* parameter events are made at the optimizer, outside compiled code */
	if (!n || !s->probe || !s->probe->ops->annotation || s->cur.kind == TM_EV_PARAM)
		return;
	/* an eager re-run (rerun): "rerun" is [count, region] while it runs,
	 * [count] after it */
	a = s->probe->ops->annotation(s->probe, &s->cur, "rerun");
	if (a && a->nvalues >= 2 && *a->values[1] && s->cur.kind != TM_EV_BWD) {
		tm_out(s, " eager re-run of compiled region %s: the model is paused inside it\n",
		       a->values[1]);
		return;
	}
	a = s->probe->ops->annotation(s->probe, &s->cur, "compiled");
	for (i = 0; a && i < a->nvalues; i++) {
		size_t len = strlen(a->values[i]);

		if (!strncmp(n->address, a->values[i], len) &&
		    (n->address[len] == '\0' || n->address[len] == '.')) {
			if (s->cur.kind == TM_EV_BWD)
				tm_out(s, " compiled region %s, backward: the model is paused in its "
				       "compiled backward, after this gradient\n", a->values[i]);
			else
				tm_out(s, " compiled region %s: the model is paused at the region's "
				       "end\n", a->values[i]);
			/* the same line over the recording: a command file's
			 * output is the same live and replayed */
			if (s->cur.kind != TM_EV_BWD)
				tm_out(s, " live, \"rerun\" runs the region again eagerly from "
				       "its entry and stops inside it\n");
			return;
		}
	}
}

static int info_frame(struct tm_session *s, const char *args)
{
	const struct frame *f;
	const struct tm_node *n;

	(void)args;
	if (!s->have_cur || tm_frames_compute(s) || !s->nframes) {
		tm_error(s, "No stack.");
		return -1;
	}
	f = &s->frames[s->nframes - 1 - s->sel_frame];
	n = tm_nodetab_get(s->nodes, f->node);
	tm_out(s, "Stack level %zu, %s%s:\n", s->sel_frame, n ? n->address : "?",
	       f->returning ? " (returning)" : "");
	if (n) {
		tm_out(s, " module %s, depth %u", n->type ? n->type : "?", n->depth);
		if (f->call)
			tm_out(s, ", call %u", f->call);
		tm_out(s, "\n");
		if (n->file && n->line)
			tm_out(s, " source at %s:%u\n", n->file, n->line);
	}
	if (f->enter_seq != UINT64_MAX)
		tm_out(s, " entered at seq %" PRIu64 "\n", f->enter_seq);
	info_frame_compiled(s, n);
	if (s->sel_frame + 1 < s->nframes)
		tm_out(s, " called by frame at level %zu (%s)\n", s->sel_frame + 1,
		       tm_node_name(s, s->frames[s->nframes - 2 - s->sel_frame].node));
	if (s->sel_frame > 0)
		tm_out(s, " caller of frame at level %zu\n", s->sel_frame - 1);
	tm_out(s, " playhead at seq %" PRIu64 ", step %" PRIu64 ", %s %s\n",
	       s->cur.seq, s->cur.step, tm_phase_name(s->cur.phase),
	       tm_event_kind_name(s->cur.kind));
	return 0;
}

static int info_source(struct tm_session *s, const char *args)
{
	const struct tm_node *n = NULL;
	const char *file = s->list_file;
	char *path;
	int lines = 0, c;
	FILE *fp;

	(void)args;
	if (!file && s->have_cur && s->nodes) {
		n = tm_nodetab_get(s->nodes, s->cur.node);
		while (n && !n->file && n->parent != TM_NODE_NONE)
			n = tm_nodetab_get(s->nodes, n->parent);
		file = n ? n->file : NULL;
	}
	if (!file) {
		tm_out(s, "No current source file.\n");
		return 0;
	}
	tm_out(s, "Current source file is %s\n", file);
	path = tm_resolve_source(s, file);
	if (!path) {
		tm_out(s, "Source file not found (looked in the current directory "
		       "and next to the trace).\n");
		return 0;
	}
	{
		char *abs = realpath(path, NULL);

		tm_out(s, "Located in %s\n", abs ? abs : path);
		free(abs);
	}
	fp = fopen(path, "r");
	while (fp && (c = fgetc(fp)) != EOF)
		lines += c == '\n';
	if (fp)
		fclose(fp);
	tm_out(s, "Contains %d lines.\nSource language is python.\n", lines);
	free(path);
	return 0;
}

static int info_breakpoints(struct tm_session *s, const char *args)
{
	return tm_bp_info(s, args, 0);
}

static int info_watchpoints(struct tm_session *s, const char *args)
{
	return tm_bp_info(s, args, 1);
}

static int info_display(struct tm_session *s, const char *args)
{
	struct display *d, *order[256];
	size_t n = 0;

	(void)args;
	for (d = s->displays; d && n < 256; d = d->next)
		order[n++] = d;
	if (!n) {
		tm_out(s, "There are no auto-display expressions now.\n");
		return 0;
	}
	tm_out(s, "Auto-display expressions now in effect:\nNum Enb Expression\n");
	while (n > 0) {
		char ft[16];

		d = order[--n];
		tm_fmt_text(&d->fmt, ft, sizeof(ft));
		tm_out(s, "%d:   %s  %s%s%s\n", d->num, d->enabled ? "y" : "n", ft,
		       *ft ? " " : "", d->expr);
	}
	return 0;
}

static int info_stack(struct tm_session *s, const char *args)
{
	return cmd_backtrace_entry.exec(s, args, 0);
}

static const struct info_sub subs[] = {
	{ "args", tm_info_args, 1, "The selected call's inputs (frame N selects one)." },
	{ "breakpoints", info_breakpoints, 0, "Status of breakpoints and watchpoints." },
	{ "compare", tm_info_compare, 1, "The run against the reference: what aligns, where it first diverges." },
	{ "display", info_display, 0, "Expressions to display at each stop." },
	{ "event", info_event, 1, "The event at the playhead and all its tensors." },
	{ "frame", info_frame, 1, "The selected frame of the module call stack." },
	{ "functions", tm_info_functions, 1, "Module calls (where break stops) matching a regex." },
	{ "gaps", info_gaps, 1, "Every gap (lost range of events) in the trace." },
	{ "graph", tm_view_info_graph, 1, "The module tree with each node's values at the playhead." },
	{ "inferiors", tm_info_inferiors, 0, "The processes (ranks of a distributed job) debugged." },
	{ "locals", tm_info_locals, 1, "The selected call's outputs, parameters and ops." },
	{ "nodes", info_nodes, 1, "Graph nodes matching a pattern (all by default)." },
	{ "op", tm_info_op, 1, "The op at the playhead: made or passed on non-finite values." },
	{ "probe", info_probe, 1, "The probe: trace file, recording, capabilities." },
	{ "source", info_source, 0, "The current source file." },
	{ "stack", info_stack, 1, "The module call stack (same as backtrace)." },
	{ "stats", tm_view_info_stats, 1, "Every stat of one tensor at the playhead, with its level." },
	{ "steps", info_steps, 1, "Steps of the trace and where each starts." },
	{ "types", tm_info_types, 1, "Module classes matching a regex, with their source." },
	{ "watchpoints", info_watchpoints, 0, "Status of watchpoints." },
	{ NULL, NULL, 0, NULL }
};

/* The sub-commands, from the table: "info" alone and "help info" show it. */
static void list_subs(struct tm_session *s)
{
	size_t i;

	tm_out(s, "List of info subcommands:\n\n");
	for (i = 0; subs[i].name; i++)
		tm_out(s, "info %-12s -- %s\n", subs[i].name, subs[i].help);
}

static int cmd_info_exec(struct tm_session *s, const char *args, int from_tty)
{
	const char *p = tm_skip_ws(args);
	size_t wl = strcspn(p, " \t"), i, nhit = 0;
	const struct info_sub *hit = NULL;
	char list[512];
	size_t off = 0;

	if (!wl) {
		list_subs(s);
		return 0;
	}
	for (i = 0; subs[i].name; i++) {
		if (wl == strlen(subs[i].name) && !strncmp(p, subs[i].name, wl)) {
			hit = &subs[i];
			nhit = 1;
			break;
		}
		if (!strncmp(subs[i].name, p, wl)) {
			hit = &subs[i];
			nhit++;
			off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%s",
						off ? ", " : "", subs[i].name);
		}
	}
	/* GDB's abbreviations: "info b" is breakpoints, "info f" frame */
	if (nhit > 1 && wl == 1 && (p[0] == 'b' || p[0] == 'f')) {
		for (i = 0; subs[i].name; i++)
			if (!strcmp(subs[i].name, p[0] == 'b' ? "breakpoints" : "frame"))
				hit = &subs[i];
		nhit = 1;
	}
	if (nhit == 0) {
		tm_error(s, "Undefined info command: \"%.*s\".  Try \"help info\".",
			 (int)strlen(p), p);
		return -1;
	}
	if (nhit > 1) {
		tm_error(s, "Ambiguous info command \"%.*s\": %s.", (int)wl, p, list);
		return -1;
	}
	if (hit->needs_trace && tm_need_trace(s))
		return -1;
	return hit->fn(s, tm_skip_ws(p + wl));
}

const struct cmd_entry cmd_info_entry = {
	.name = "info", .alias = "i inf",
	.usage = "info SUBCOMMAND",
	.help = "Show things about the trace and the session.",
	.exec = cmd_info_exec, .klass = "status", .help_more = list_subs,
};

/* Completion of "info X" (cli.c). */
const char *tm_info_sub_name(size_t i)
{
	return i < sizeof(subs) / sizeof(subs[0]) ? subs[i].name : NULL;
}
