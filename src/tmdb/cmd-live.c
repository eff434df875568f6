/*
 * cmd-live.c -- attach and detach: debugging a running process.
 *
 * `attach PATH|PID` connects to a probe's wire server (probe-remote.c) and
 * makes it the session's probe in place of a trace file: every other
 * command then works on the live process through the same RuntimeProbe
 * vtable.  The model is paused at its next event; `continue`, `step`, `next`
 * and `finish` move it, and `detach` lets it run on (and keep recording).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tmdb.h"
#include "live.h"

static int is_live(const struct tm_session *s)
{
	return s->probe && !strcmp(s->probe->ops->name, "remote");
}

static int cmd_attach_exec(struct tm_session *s, const char *args, int from_tty)
{
	struct tm_probe *p = NULL;
	char *detail = NULL, *target;
	int err;

	(void)from_tty;
	if (!*args) {
		tm_error(s, "Argument required (process id or socket path to attach).");
		return -1;
	}
	target = strdup(args);
	if (!target)
		return -1;
	err = tm_probe_remote_open(tm_strip(target), &p, &detail);
	if (err != TM_OK) {
		tm_error(s, "Cannot attach to %s: %s.", target,
			 detail ? detail : tm_strerror(err));
		free(detail);
		free(target);
		return -1;
	}
	if (is_live(s))
		tm_out(s, "Detaching from %s.\n", tm_probe_remote_describe(s->probe));
	tm_session_unload(s);
	s->probe = p;
	s->nodes = p->ops->nodes(p);
	s->trace_path = target;
	tm_out(s, "Attaching to %s, %u nodes.\n", tm_probe_remote_describe(p),
	       tm_nodetab_count(s->nodes));
	tm_bp_rebind_all(s);
	return 0;
}

const struct cmd_entry cmd_attach_entry = {
	.name = "attach",
	.usage = "attach PID|SOCKET",
	.help = "Attach to a running process that loaded the tensormorph probe.\n"
		"PID finds its socket in $XDG_RUNTIME_DIR/tensormorph (or\n"
		"/tmp/tensormorph-UID); a path names the socket itself.  The model\n"
		"pauses at its next event; continue, step, next and finish move it,\n"
		"and the events received so far can be browsed backwards.",
	.exec = cmd_attach_exec,
	.klass = "running",
};

static int cmd_detach_exec(struct tm_session *s, const char *args, int from_tty)
{
	(void)args;
	(void)from_tty;
	if (!is_live(s)) {
		tm_error(s, "The program is not being run.");
		return -1;
	}
	tm_out(s, "Detaching from %s.\n", tm_probe_remote_describe(s->probe));
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
