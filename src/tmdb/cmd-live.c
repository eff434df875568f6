/*
 * cmd-live.c -- debugging a running process: attach, detach, run (of a
 * program tmdb starts), kill, set args, and the hooks other commands call
 * for the live case.
 *
 * `attach PATH|PID` connects to a probe's wire server (probe-remote.c) and
 * makes it the session's probe in place of a trace file: every other
 * command then works on the live process through the same RuntimeProbe
 * vtable.  The model is paused at its next event; `continue`, `step`, `next`
 * and `finish` move it, and `detach` lets it run on (and keep recording).
 * `run` starts the program set by `tmdb --args` or `file` (inferior.c) and
 * attaches to it the same way.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tmdb.h"
#include "live.h"

static int is_live(const struct tm_session *s)
{
	return tm_probe_is_live(s->probe);
}

/* The front end's record of the process coming and going (MI). */
static void notify(struct tm_session *s, int what, long pid)
{
	if (s->on_inferior)
		s->on_inferior(s, what, pid, 0);
}

/*
 * attach PID|SOCKET|tcp://HOST:PORT [--token TOKEN | --token-file FILE]:
 * the options only for TCP, whose probe wants its token at HELLO.
 */
static int attach_target(struct tm_session *s, const char *args, int tcp_only)
{
	struct tm_probe_info pi;
	struct tm_probe *p = NULL;
	char *detail = NULL, *target, *word, *save = NULL, *token = NULL, *tfile = NULL;
	char tokbuf[TM_MSG_MAX_TOKEN + 2], host[256], buf[48];
	const char *why, *wtrace;
	unsigned port;
	uint64_t wend;
	size_t nwin;
	int err;

	/* an empty argument never gets here: the entries' arg_required */
	target = strdup(args);
	if (!target)
		return -1;
	word = strtok_r(target, " \t", &save);
	while (word) {
		char *opt = strtok_r(NULL, " \t", &save);

		if (!opt)
			break;
		if (!strcmp(opt, "--token") || !strcmp(opt, "--token-file")) {
			char *v = strtok_r(NULL, " \t", &save);

			if (!v) {
				tm_error(s, "Option \"%s\" requires an argument.", opt);
				free(target);
				return -1;
			}
			if (opt[7])
				tfile = v;
			else
				token = v;
		} else {
			tm_error(s, "Junk at end of arguments: \"%s\".", opt);
			free(target);
			return -1;
		}
	}
	if (tm_server_parse_tcp(word, host, sizeof(host), &port) != 1) {
		if (tcp_only || token || tfile) {
			tm_error(s, "\"%s\" is not HOST:PORT (a probe listening on "
				 "TENSORMORPH_LISTEN=tcp://HOST:PORT).", word);
			free(target);
			return -1;
		}
	}
	if (tfile) {
		FILE *f = fopen(tfile, "r");

		if (!f || !fgets(tokbuf, sizeof(tokbuf), f)) {
			tm_error(s, "%s: %s.", tfile, f ? "empty" : strerror(errno));
			if (f)
				fclose(f);
			free(target);
			return -1;
		}
		fclose(f);
		tokbuf[strcspn(tokbuf, "\r\n")] = 0;
		token = tokbuf;
	}
	err = tm_probe_remote_open_token(word, token, &p, &detail);
	if (err != TM_OK) {
		tm_error(s, "Cannot attach to %s: %s.", word,
			 detail ? detail : tm_strerror(err));
		free(detail);
		free(target);
		return -1;
	}
	if (s->live && s->live->pid) {
		/* GDB kills the program it started before attaching elsewhere. */
		tm_inferior_kill(s, 1);
	} else if (is_live(s)) {
		tm_out(s, "Detaching from %s.\n", tm_probe_process(s->probe));
		notify(s, TM_INF_GONE, (long)tm_probe_pid(s->probe));
	}
	tm_session_unload(s);
	s->probe = p;
	s->nodes = p->ops->nodes(p);
	memmove(target, word, strlen(word) + 1);
	s->trace_path = target;
	if (tm_probe_remote_note(p)[0])
		tm_out(s, "The probe says: %s.\n", tm_probe_remote_note(p));
	tm_out(s, "Attaching to %s, %u nodes.\n", tm_probe_process(p),
	       tm_nodetab_count(s->nodes));
	p->ops->describe(p, &pi);
	if (!pi.can_pause)
		tm_out(s, "The probe records and notifies: a stop is shown here but does "
		       "not pause the process,\nwhich runs on; what tmdb cannot read in "
		       "time is dropped as gaps.\n");
	notify(s, TM_INF_STARTED, (long)tm_probe_pid(p));
	tm_bp_rebind_all(s);
	nwin = tm_probe_remote_window(p, &wend, &why, &wtrace);
	if (nwin) {
		/* just-in-time debugging: the window is the history, and the
		 * playhead starts where it ends (the trigger) */
		tm_out(s, "The probe wrote its flight window (%s) to %s: its %zu records "
		       "are the history.\n", why, wtrace, nwin);
		snprintf(buf, sizeof(buf), "seq %" PRIu64, wend);
		cmd_goto_entry.exec(s, buf, 0);
	}
	return 0;
}

static int cmd_attach_exec(struct tm_session *s, const char *args, int from_tty)
{
	(void)from_tty;
	return attach_target(s, args, 0);
}

const struct cmd_entry cmd_attach_entry = {
	.name = "attach",
	.usage = "attach PID|SOCKET|tcp://HOST:PORT [--token TOKEN|--token-file FILE]",
	.help = "Attach to a running process that loaded the tensormorph probe.\n"
		"PID finds its socket in $XDG_RUNTIME_DIR/tensormorph (or\n"
		"/tmp/tensormorph-UID); a path names the socket itself.  A probe\n"
		"listening on TCP (TENSORMORPH_LISTEN=tcp://HOST:PORT) wants its token:\n"
		"--token, --token-file, $TENSORMORPH_TOKEN, or by default the token file\n"
		"the probe wrote on this host.  The model pauses at its next event;\n"
		"continue, step, next and finish move it, and the events received so\n"
		"far can be browsed backwards.",
	.exec = cmd_attach_exec,
	.klass = "running",
	.arg_required = "process id or socket path to attach",
};

/* "target remote HOST:PORT", as GDB connects to a gdbserver. */
static int cmd_target_exec(struct tm_session *s, const char *args, int from_tty)
{
	const char *p = tm_skip_ws(args);
	size_t wl = strcspn(p, " \t");

	(void)from_tty;
	if (!wl || (strncmp(p, "remote", wl) && strncmp(p, "extended-remote", wl)) ||
	    wl < 3) {
		tm_error(s, "Usage: target remote HOST:PORT [--token TOKEN|--token-file FILE]");
		return -1;
	}
	return attach_target(s, tm_skip_ws(p + wl), 1);
}

const struct cmd_entry cmd_target_entry = {
	.name = "target",
	.usage = "target remote HOST:PORT [--token TOKEN|--token-file FILE]",
	.help = "Attach to a probe listening on TCP (TENSORMORPH_LISTEN=tcp://HOST:PORT),\n"
		"as GDB connects to a gdbserver; the same as \"attach tcp://HOST:PORT\".\n"
		"Through an SSH tunnel (ssh -L 7777:localhost:7777 node) the token the\n"
		"probe printed is given with --token or $TENSORMORPH_TOKEN.",
	.exec = cmd_target_exec,
	.klass = "running",
	.arg_required = "remote HOST:PORT",
};

static int cmd_detach_exec(struct tm_session *s, const char *args, int from_tty)
{
	(void)args;
	(void)from_tty;
	if (!is_live(s)) {
		tm_error(s, "The program is not being run.");
		return -1;
	}
	tm_out(s, "Detaching from %s.\n", tm_probe_process(s->probe));
	notify(s, TM_INF_GONE, (long)tm_probe_pid(s->probe));
	if (s->live && s->live->probe == s->probe) {
		/* It runs on without us: quitting no longer kills it. */
		s->live->pid = 0;
		s->live->probe = NULL;
	}
	tm_session_unload(s);
	return 0;
}

const struct cmd_entry cmd_detach_entry = {
	.name = "detach",
	.usage = "detach",
	.help = "Detach from the live process: its breakpoints are cleared and the\n"
		"model runs on (and keeps recording).",
	.exec = cmd_detach_exec,
	.klass = "running",
};

/* ------------------------------------------------------------- kill */

static int cmd_kill_exec(struct tm_session *s, const char *args, int from_tty)
{
	(void)args;
	(void)from_tty;
	if (!s->live || !s->live->pid) {
		tm_error(s, "The program is not being run.");
		return -1;
	}
	tm_inferior_kill(s, 1);
	return 0;
}

const struct cmd_entry cmd_kill_entry = {
	.name = "kill", .alias = "k",
	.usage = "kill",
	.help = "Kill the program started by \"run\" (and its process group).\n"
		"What it sent is dropped; \"run\" starts it again.",
	.exec = cmd_kill_exec,
	.klass = "running",
};

/* ------------------------------------------------------------- hooks */

int tm_live_file(struct tm_session *s, const char *path, int *rc)
{
	struct tm_live *lv = s->live;

	if (!tm_live_is_program(path)) {
		/* A trace replaces the program, as GDB's file replaces both. */
		if (lv) {
			tm_inferior_kill(s, 1);
			free(lv->prog);
			lv->prog = NULL;
		}
		return 0;
	}
	if (lv && lv->pid)
		tm_inferior_kill(s, 1);
	*rc = tm_live_set_program(s, path, NULL);
	return 1;
}

/* The word at args if it is name (then *rest after it). */
static int word_is(const char *args, const char *name, const char **rest)
{
	size_t l = strlen(name);

	if (strncmp(args, name, l) || (args[l] && !isspace((unsigned char)args[l])))
		return 0;
	*rest = tm_skip_ws(args + l);
	return 1;
}

int tm_live_setting(struct tm_session *s, const char *args, int show, int *rc)
{
	struct tm_live *lv;
	const char *rest;
	uint64_t n;
	int b;

	*rc = 0;
	if (word_is(args, "args", &rest)) {
		lv = tm_live_get(s);
		if (!lv) {
			*rc = -1;
			return 1;
		}
		if (show) {
			tm_out(s, "Argument list to give program being debugged when "
			       "it is started is \"%s\".\n", lv->args ? lv->args : "");
			return 1;
		}
		free(lv->args);
		lv->args = *rest ? strdup(rest) : NULL;
		return 1;
	}
	if (word_is(args, "run-ahead", &rest)) {
		lv = tm_live_get(s);
		if (!lv) {
			*rc = -1;
		} else if (show) {
			tm_out(s, "Running a live model ahead between breakpoints is %s.\n",
			       lv->lockstep ? "off" : "on");
		} else if (tm_parse_bool(rest, &b)) {
			tm_error(s, "\"on\" or \"off\" expected.");
			*rc = -1;
		} else {
			lv->lockstep = !b;
		}
		return 1;
	}
	if (word_is(args, "non-stop", &rest)) {
		lv = tm_live_get(s);
		if (!lv) {
			*rc = -1;
		} else if (show) {
			tm_out(s, "Controlling the ranks of a distributed job in non-stop "
			       "mode is %s.\n", lv->non_stop ? "on" : "off");
		} else if (tm_parse_bool(rest, &b)) {
			tm_error(s, "\"on\" or \"off\" expected.");
			*rc = -1;
		} else {
			lv->non_stop = b;
		}
		return 1;
	}
	if (word_is(args, "probe-ops", &rest)) {
		lv = tm_live_get(s);
		if (!lv) {
			*rc = -1;
		} else if (show) {
			if (!lv->ops)
				tm_out(s, "Op events: the probe's own patterns.\n");
			else if (!*lv->ops)
				tm_out(s, "Op events: off.\n");
			else
				tm_out(s, "Op events are recorded in %s.\n", lv->ops);
		} else {
			*rc = tm_set_probe_ops(s, lv, rest);
		}
		return 1;
	}
	if (word_is(args, "probe-flight", &rest)) {
		const char *text = "";
		int err;

		if (show) {
			tm_out(s, "Use \"info probe\" on the written window for what the "
			       "flight ring held.\n");
		} else if (!s->probe || !s->probe->ops->flight) {
			tm_error(s, "No live process: set probe-flight N|off turns flight mode "
				 "on or off in a live process that records.");
			*rc = -1;
		} else if (!strcmp(rest, "off")) {
			/* off: the window goes to the trace, which records
			 * everything from then on, as after a trigger */
			if ((err = s->probe->ops->flight(s->probe, TM_FLIGHT_DUMP, 0,
							 "set probe-flight off", &text))) {
				tm_error(s, "Cannot turn flight mode off: %s.",
					 s->probe->ops->detail(s->probe));
				*rc = -1;
			} else {
				tm_out(s, "Flight mode is off: the probe %s, and records "
				       "everything.\n", text);
			}
		} else if (tm_parse_uint(rest, &n) || n < 1 || n > UINT32_MAX) {
			tm_error(s, "A number of steps (1 or more) or \"off\" expected.");
			*rc = -1;
		} else if ((err = s->probe->ops->flight(s->probe, TM_FLIGHT_STEPS, (uint32_t)n,
							NULL, &text))) {
			tm_error(s, "Cannot set the flight window: %s.",
				 s->probe->ops->detail(s->probe));
			*rc = -1;
		} else {
			tm_out(s, "The probe is %s.\n", text);
		}
		return 1;
	}
	if (word_is(args, "probe-level", &rest)) {
		lv = tm_live_get(s);
		if (!lv) {
			*rc = -1;
		} else if (show) {
			if (lv->level < 0)
				tm_out(s, "The probe level of programs tmdb starts is "
				       "the probe's default.\n");
			else
				tm_out(s, "The probe level of programs tmdb starts is "
				       "%d.\n", lv->level);
		} else if (!strcmp(rest, "default")) {
			lv->level = -1;
		} else if (tm_parse_uint(rest, &n) || n > 3) {
			tm_error(s, "Probe level 0 to 3 expected, or \"default\".");
			*rc = -1;
		} else {
			lv->level = (int)n;
		}
		return 1;
	}
	return tm_front_setting(s, args, show, rc);
}

static int have_program(const struct tm_session *s)
{
	return s->live && s->live->prog;
}


int tm_live_run(struct tm_session *s, const char *args, int from_tty, int *rc)
{
	struct tm_live *lv = s->live;
	struct tm_probe *p = NULL;
	char *target;

	if (!have_program(s))
		return 0;
	*rc = -1;
	if (*args) {
		free(lv->args);
		lv->args = strdup(args);
	}
	/* Started already: batch GDB answers its question with yes. */
	if (lv->pid)
		tm_inferior_kill(s, 0);
	if (tm_inferior_start(s, &p))
		return 1;
	target = strdup(tm_probe_process(p));
	if (!target) {
		p->ops->detach(p);
		tm_inferior_kill(s, 1);
		return 1;
	}
	tm_session_unload(s);
	s->probe = p;
	s->nodes = p->ops->nodes(p);
	s->trace_path = target;
	lv->probe = p;
	tm_bp_rebind_all(s);
	*rc = cmd_continue_entry.exec(s, "", from_tty);
	return 1;
}

void tm_live_flow(struct tm_session *s, int ahead)
{
	struct tm_probe_bp *bps = NULL;
	struct bp *b;
	size_t n = 0, cap = 0;

	if (!s->probe || !s->probe->ops->flow)
		return;
	if (ahead && s->live && s->live->lockstep)
		ahead = 0;
	for (b = s->bps; ahead && b; b = b->next) {
		if (!b->enabled || b->catch_kind == TM_CATCH_GAP ||
		    b->catch_kind == TM_CATCH_SIGNAL)
			continue;       /* tmdb stops at those records itself */
		if (b->type != BP_BREAK || !b->where) {
			ahead = 0;      /* watchpoints need every event's value */
			break;
		}
		if (n == cap) {
			struct tm_probe_bp *nb;

			cap = cap ? 2 * cap : 8;
			nb = realloc(bps, cap * sizeof(*nb));
			if (!nb) {
				ahead = 0;
				break;
			}
			bps = nb;
		}
		bps[n].num = b->num;
		bps[n].where = b->where;
		/* A condition the probe cannot answer (tmdb's $variables, other
		 * nodes' values) is mirrored without it: the probe pauses at
		 * every candidate and tmdb's own evaluation decides.  One not
		 * compiled yet (pending) goes as it is; the probe refuses it
		 * for the same reasons (tm_breakpoint_cond_portable). */
		bps[n].cond = b->cond_src && (!b->core.cond ||
			      tm_breakpoint_cond_portable(b->core.cond, NULL)) ?
			      b->cond_src : NULL;
		/* a catchpoint's own test goes too: its location is every node */
		if (b->catch_kind)
			bps[n].cond = !b->core.cond ||
				      tm_breakpoint_cond_portable(b->core.cond, NULL) ?
				      b->core_src : NULL;
		n++;
	}
	tm_probe_multi_set_non_stop(s->probe, s->live && s->live->non_stop);
	s->probe->ops->flow(s->probe, ahead, bps, ahead ? n : 0);
	free(bps);
}

/* How long a program that closed its connection (or sent a crash record)
 * gets to exit before tmdb stops waiting for it. */
#define REAP_MS 10000
#define CRASH_REAP_MS 5000

void tm_live_ended(struct tm_session *s, int crashed)
{
	struct tm_live *lv = s->live;
	const char *note;

	if (!is_live(s))
		return;
	if (lv && lv->pid && lv->probe && s->probe == lv->probe) {
		/* A crash record comes from a dying process (the probe's
		 * handler re-raises the signal): report its death too. */
		if (tm_probe_closed(s->probe)) {
			tm_inferior_reap(s, REAP_MS, 0);
			/* The exit status says it all. */
			(void)tm_probe_end_note(s->probe);
		} else if (crashed) {
			tm_inferior_reap(s, CRASH_REAP_MS, 1);
		}
		return;
	}
	note = tm_probe_closed(s->probe) ?
	       tm_probe_end_note(s->probe) : NULL;
	if (note) {
		tm_out(s, "[%s: %s]\n", tm_probe_process(s->probe), note);
		notify(s, TM_INF_GONE, (long)tm_probe_pid(s->probe));
	}
}
