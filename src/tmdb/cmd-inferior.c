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

static int cmd_inferior_exec(struct tm_session *s, const char *args, int from_tty)
{
	struct tm_probe *sub;
	char buf[64];
	uint64_t n;
	int64_t at;
	int rank;

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
	.name = "inferior", .usage = "inferior [N]",
	.help = "Select inferior N: one rank of a distributed job.\n"
		"The playhead moves to that rank's latest event at or before it,\n"
		"so that print, backtrace and the views show that rank.  Without N,\n"
		"say which inferior is selected.  \"info inferiors\" lists them.",
	.exec = cmd_inferior_exec, .klass = "running",
};
