/*
 * cmd-inferior.c -- the ranks of a distributed job as GDB's inferiors:
 * `info inferiors`, `inferior [N]`, and the "[Switching to ...]" line a
 * stop on another rank prints.
 *
 * Inferior N is the job's N-th rank (rank N-1 when every rank is there).
 * There is one playhead for the whole job (probe-multi.c merges the ranks
 * on one axis); the selected inferior is the rank of the playhead's event,
 * so `inferior N` moves the playhead to that rank's latest event at or
 * before it, and every view then shows that rank's data.
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tmdb.h"
#include "live.h"

static int nranks(struct tm_session *s)
{
	return s->probe && s->probe->ops->nranks ? s->probe->ops->nranks(s->probe) : 0;
}

/* The inferior number of a rank, 0 if none. */
static int inferior_of(struct tm_session *s, int rank)
{
	int i, r;

	for (i = 0; tm_probe_multi_sub(s->probe, (size_t)i, &r); i++)
		if (r == rank)
			return i + 1;
	return 0;
}

/* "[Switching to inferior 2 (rank 1)]" when a stop lands on another rank. */
void tm_inferior_note_switch(struct tm_session *s)
{
	int r;

	if (!nranks(s) || !s->have_cur)
		return;
	r = tm_session_rank(s);
	if (r == s->shown_rank)
		return;
	s->shown_rank = r;
	tm_out(s, "[Switching to inferior %d (rank %d)]\n", inferior_of(s, r), r);
}

static void describe_one(struct tm_probe *p, char *desc, size_t dlen,
			 const char **source)
{
	struct tm_probe_info pi;

	p->ops->describe(p, &pi);
	*source = pi.source ? pi.source : "";
	if (tm_probe_is_live(p)) {
		/* GDB's "(running)" of non-stop mode; "gone" once it hung up */
		snprintf(desc, dlen, "%s %s", tm_probe_process(p),
			 tm_probe_closed(p) ? "(gone)" :
			 tm_probe_remote_paused(p) ? "(paused)" : "(running)");
	} else if (pi.summary) {
		snprintf(desc, dlen, "trace, %" PRIu64 " events", pi.summary->nevents);
	} else {
		snprintf(desc, dlen, "trace");
	}
}

int tm_info_inferiors(struct tm_session *s, const char *args)
{
	char desc[160];
	const char *source;
	struct tm_probe *sub;
	int i, r, cur;

	(void)args;
	if (!s->probe) {
		tm_out(s, "No inferiors.\n");
		return 0;
	}
	tm_out(s, "  Num  Rank  %-32s %s\n", "Description", "Source");
	if (!nranks(s)) {
		describe_one(s->probe, desc, sizeof(desc), &source);
		tm_out(s, "* 1    -     %-32s %s\n", desc, source);
		return 0;
	}
	cur = tm_session_rank(s);
	for (i = 0; (sub = tm_probe_multi_sub(s->probe, (size_t)i, &r)); i++) {
		char rank[16];

		describe_one(sub, desc, sizeof(desc), &source);
		snprintf(rank, sizeof(rank), "%d", r);
		tm_out(s, "%c %-4d %-5s %-32s %s\n", r == cur ? '*' : ' ', i + 1,
		       rank, desc, source);
	}
	return 0;
}

/* The latest record of rank at or before seq, else its first after; -1 none. */
static int64_t rank_record(struct tm_session *s, int rank, uint64_t seq)
{
	struct tm_probe *p = s->probe;
	uint64_t i;
	int r;

	for (i = seq + 1; i-- > 0;)
		if (p->ops->rank_of(p, i) == rank)
			return (int64_t)i;
	for (i = seq + 1; (r = p->ops->rank_of(p, i)) >= 0; i++)
		if (r == rank)
			return (int64_t)i;
	return -1;
}

static int cmd_inferior_apply(struct tm_session *s, const char *args);

static int cmd_inferior_exec(struct tm_session *s, const char *args, int from_tty)
{
	struct tm_probe *sub;
	char buf[64];
	uint64_t n;
	int64_t at;
	int rank;

	if (!strncmp(args, "apply", 5) && (!args[5] || args[5] == ' ' || args[5] == '\t'))
		return cmd_inferior_apply(s, args + 5);
	if (!*args) {
		if (!s->probe) {
			tm_out(s, "[Current inferior is 1 [<null>]]\n");
			return 0;
		}
		rank = nranks(s) ? tm_session_rank(s) : -1;
		tm_out(s, "[Current inferior is %d", rank >= 0 ? inferior_of(s, rank) : 1);
		if (rank >= 0)
			tm_out(s, " (rank %d)", rank);
		tm_out(s, " [%s]]\n", tm_probe_is_live(s->probe) ?
		       tm_probe_process(s->probe) : s->trace_path ? s->trace_path : "");
		return 0;
	}
	if (tm_parse_uint(args, &n) || n == 0) {
		tm_error(s, "Invalid inferior number \"%s\".", args);
		return -1;
	}
	if (!nranks(s)) {
		if (n == 1 && s->probe)
			return 0;
		tm_error(s, "Inferior ID %" PRIu64 " not known.", n);
		return -1;
	}
	sub = tm_probe_multi_sub(s->probe, (size_t)(n - 1), &rank);
	if (!sub) {
		tm_error(s, "Inferior ID %" PRIu64 " not known.", n);
		return -1;
	}
	at = rank_record(s, rank, s->have_cur ? s->cur.seq : 0);
	s->shown_rank = rank;
	tm_out(s, "[Switching to inferior %" PRIu64 " (rank %d)]\n", n, rank);
	if (at < 0) {
		tm_out(s, "Rank %d has sent nothing yet.\n", rank);
		return 0;
	}
	snprintf(buf, sizeof(buf), "seq %" PRId64, at);
	return cmd_goto_entry.exec(s, buf, from_tty);
}

const struct cmd_entry cmd_inferior_entry = {
	.name = "inferior", .usage = "inferior [N] | inferior apply all|N... COMMAND",
	.help = "Select inferior N: one rank of a distributed job.\n"
		"The playhead moves to that rank's latest event at or before it,\n"
		"so that print, backtrace and the views show that rank.  Without N,\n"
		"say which inferior is selected.  \"info inferiors\" lists them.",
	.exec = cmd_inferior_exec, .klass = "running",
};

/* ------------------------------------------------------------- apply */

/* While switching ranks for an apply: the goto's location lines are not
 * the command's output; errors still are. */
struct quiet_out {
	void (*out_fn)(struct tm_session *s, int is_err, const char *text);
	FILE *out;
};

static void drop_out(struct tm_session *s, int is_err, const char *text)
{
	struct quiet_out *q = s->ui_quiet;

	if (!is_err)
		return;
	if (q && q->out_fn) {
		q->out_fn(s, is_err, text);
	} else {
		fflush(q ? q->out : stdout);
		fputs(text, s->err);
		fflush(s->err);
	}
}

static int goto_quietly(struct tm_session *s, int64_t seq)
{
	struct quiet_out q = { s->out_fn, s->out };
	void *prev = s->ui_quiet;
	char buf[64];
	int rc;

	snprintf(buf, sizeof(buf), "seq %" PRId64, seq);
	s->ui_quiet = &q;
	s->out_fn = drop_out;
	rc = cmd_goto_entry.exec(s, buf, 0);
	s->out_fn = q.out_fn;
	s->ui_quiet = prev;
	return rc;
}

/*
 * GDB's "thread apply all CMD" and "inferior apply all CMD" over the ranks
 * of a job (a one-process trace is inferior 1): CMD runs on each rank's
 * latest event at or before the playhead, under a header naming it; the
 * playhead comes back where it was.  thread apply goes from the last
 * rank down, inferior apply up, as GDB orders threads and inferiors.
 */
static int apply(struct tm_session *s, const char *args, int threads)
{
	const char *what = threads ? "Thread" : "Inferior";
	const char *p = tm_skip_ws(args), *cmd;
	int n = nranks(s), count = n ? n : 1, i, rank, rc = 0;
	char sel[256];
	uint64_t home = s->have_cur ? s->cur.seq : 0;
	int had_cur = s->have_cur, home_rank = s->shown_rank;
	size_t wl = strcspn(p, " \t");

	memset(sel, 0, sizeof(sel));
	if (tm_word_is(p, wl, "all", 3)) {
		memset(sel, 1, sizeof(sel));
		cmd = tm_skip_ws(p + wl);
	} else {
		/* a list of numbers and ranges, then the command */
		cmd = p;
		while (*cmd >= '0' && *cmd <= '9') {
			char *end;
			long lo = strtol(cmd, &end, 10), hi = lo, k;

			if (*end == '-')
				hi = strtol(end + 1, &end, 10);
			if (*end && *end != ' ' && *end != '\t') {
				tm_error(s, "Invalid %s ID: %s", threads ? "thread" : "inferior", cmd);
				return -1;
			}
			for (k = lo; k <= hi && k > 0 && k < (long)sizeof(sel); k++)
				sel[k] = 1;
			cmd = tm_skip_ws(end);
		}
		if (cmd == p) {
			tm_error(s, "Please specify a %s ID list", threads ? "thread" : "inferior");
			return -1;
		}
	}
	if (!*cmd) {
		tm_error(s, "Please specify a command %s the %s ID list",
			 threads ? "following" : "at the end of", threads ? "thread" : "inferior");
		return -1;
	}
	if (!s->probe) {
		tm_error(s, "No trace loaded.  Use the \"file\" command.");
		return -1;
	}
	for (i = 0; i < count; i++) {
		int k = threads ? count - i : i + 1;        /* 1-based */
		int64_t at;

		if (k >= (int)sizeof(sel) || !sel[k])
			continue;
		if (n) {
			if (!tm_probe_multi_sub(s->probe, (size_t)(k - 1), &rank))
				continue;
			tm_out(s, "\n%s %d (rank %d):\n", what, k, rank);
			at = rank_record(s, rank, had_cur ? home : 0);
			if (at < 0) {
				tm_out(s, "Rank %d has sent nothing yet.\n", rank);
				continue;
			}
			if (goto_quietly(s, at))
				continue;
			s->shown_rank = rank;
		} else {
			tm_out(s, "\n%s 1 (%s):\n", what,
			       tm_probe_is_live(s->probe) ? tm_probe_process(s->probe) :
			       s->trace_path ? s->trace_path : "trace");
		}
		if (tm_execute(s, cmd, 0))
			rc = -1;
		if (tm_interrupted || s->quit)
			break;
	}
	if (n && had_cur)
		goto_quietly(s, (int64_t)home);
	s->shown_rank = home_rank;
	return rc;
}

static int cmd_inferior_apply(struct tm_session *s, const char *args)
{
	return apply(s, args, 0);
}

static int cmd_thread_exec(struct tm_session *s, const char *args, int from_tty)
{
	const char *p = tm_skip_ws(args);
	size_t wl = strcspn(p, " \t");
	int rank;

	if (tm_word_is(p, wl, "apply", 1))
		return apply(s, p + wl, 1);
	if (*p)
		return cmd_inferior_entry.exec(s, p, from_tty);
	if (!s->probe) {
		tm_error(s, "No thread selected.");
		return -1;
	}
	rank = nranks(s) ? tm_session_rank(s) : -1;
	tm_out(s, "[Current thread is %d", rank >= 0 ? inferior_of(s, rank) : 1);
	if (rank >= 0)
		tm_out(s, " (rank %d)", rank);
	tm_out(s, "]\n");
	return 0;
}

const struct cmd_entry cmd_thread_entry = {
	.name = "thread", .usage = "thread [N] | thread apply all|N... COMMAND",
	.help = "Select thread N: the ranks of a job are its threads as its inferiors.\n"
		"\"thread apply all bt\" runs a command on every rank (from the last),\n"
		"each under a \"Thread N (rank R):\" line; \"inferior apply all CMD\" the\n"
		"same from the first.  The playhead comes back where it was.",
	.exec = cmd_thread_exec, .klass = "running",
};
