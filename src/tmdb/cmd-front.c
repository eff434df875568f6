/*
 * cmd-front.c -- what GDB front ends send at start-up that concerns the
 * program tmdb starts (Vim's termdebug: tty, set env, set breakpoint
 * pending, set mi-async; tmdb -tty): its terminal and its environment,
 * and two GDB settings tmdb always behaves as "on" for.
 */
#include "config.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "tmdb.h"
#include "live.h"

static int word_is(const char *args, const char *name, const char **rest)
{
	size_t l = strlen(name);

	if (strncmp(args, name, l) || (args[l] && !isspace((unsigned char)args[l])))
		return 0;
	*rest = tm_skip_ws(args + l);
	return 1;
}

int tm_front_set_tty(struct tm_session *s, const char *path)
{
	struct tm_live *lv = tm_live_get(s);

	if (!lv)
		return -1;
	free(lv->tty);
	lv->tty = path && *path ? strdup(path) : NULL;
	return 0;
}

/* set environment NAME [=] VALUE: the program's (tmdb's own, which it
 * inherits), as GDB's. */
static int set_env(struct tm_session *s, const char *rest)
{
	size_t n = strcspn(rest, " \t=");
	char name[256];
	const char *val;

	if (!n || n >= sizeof(name)) {
		tm_error(s, "Argument required (environment variable and value).");
		return -1;
	}
	memcpy(name, rest, n);
	name[n] = 0;
	val = tm_skip_ws(rest + n);
	if (*val == '=')
		val = tm_skip_ws(val + 1);
	if (setenv(name, val, 1)) {
		tm_error(s, "Cannot set environment variable \"%s\".", name);
		return -1;
	}
	return 0;
}

int tm_front_setting(struct tm_session *s, const char *args, int show, int *rc)
{
	const char *rest, *v;
	int b;

	*rc = 0;
	if (word_is(args, "environment", &rest) || word_is(args, "env", &rest)) {
		if (show) {
			size_t n = strcspn(rest, " \t");

			if (!n) {
				tm_error(s, "Name of an environment variable required.");
				*rc = -1;
			} else {
				char name[256];

				snprintf(name, sizeof(name), "%.*s", (int)n, rest);
				v = getenv(name);
				if (v)
					tm_out(s, "%s = %s\n", name, v);
				else
					tm_out(s, "Environment variable \"%s\" not defined.\n", name);
			}
		} else {
			*rc = set_env(s, rest);
		}
		return 1;
	}
	if (word_is(args, "inferior-tty", &rest)) {
		struct tm_live *lv = tm_live_get(s);

		if (!lv)
			*rc = -1;
		else if (show)
			tm_out(s, "Terminal for future runs of program being debugged "
			       "is \"%s\".\n", lv->tty ? lv->tty : "");
		else
			*rc = tm_front_set_tty(s, rest);
		return 1;
	}
	/* tmdb makes a breakpoint pending wherever nodes may still come, and
	 * its MI takes -exec-interrupt while a live model runs: "on" both. */
	if ((word_is(args, "breakpoint", &rest) && word_is(rest, "pending", &rest)) ||
	    word_is(args, "mi-async", &rest)) {
		if (show) {
			tm_out(s, "%s is on.\n", args[0] == 'b' ? "Debugger's behavior regarding "
			       "pending breakpoints" : "Whether MI is in asynchronous mode");
		} else if (*rest && strcmp(rest, "auto") && tm_parse_bool(rest, &b)) {
			tm_error(s, "\"on\", \"off\" or \"auto\" expected.");
			*rc = -1;
		}
		return 1;
	}
	return 0;
}

/* tty PATH: GDB's alias of set inferior-tty. */
static int cmd_tty_exec(struct tm_session *s, const char *args, int from_tty)
{
	(void)from_tty;
	return tm_front_set_tty(s, args);
}

const struct cmd_entry cmd_tty_entry = {
	.name = "tty",
	.usage = "tty PATH",
	.help = "Set the terminal (or file) of the program tmdb starts: its\n"
		"standard input, output and error (set inferior-tty).",
	.exec = cmd_tty_exec, .klass = "running", .arg_required = "terminal for future runs",
};

/* new-ui INTERPRETER TTY: GDB's second UI (Vim's termdebug opens MI on a
 * terminal of its own this way). */
static int cmd_new_ui_exec(struct tm_session *s, const char *args, int from_tty)
{
	char interp[16];
	size_t n = strcspn(args, " \t");
	const char *tty = tm_skip_ws(args + n);

	(void)from_tty;
	if (!n || n >= sizeof(interp) || !*tty) {
		tm_error(s, "Usage: new-ui INTERPRETER TTY");
		return -1;
	}
	memcpy(interp, args, n);
	interp[n] = 0;
	/* the second UI is served while the command line waits for a key */
	if (!s->interactive) {
		tm_error(s, "new-ui needs tmdb's command line at a terminal.");
		return -1;
	}
	if (tm_mi_new_ui(s, interp, tty))
		return -1;
	tm_out(s, "New UI allocated\n");
	return 0;
}

const struct cmd_entry cmd_new_ui_entry = {
	.name = "new-ui",
	.usage = "new-ui INTERPRETER TTY",
	.help = "Start a second UI on TTY beside this command line, as GDB's new-ui:\n"
		"INTERPRETER is mi (or mi2, mi3, mi4).  Every stop, breakpoint\n"
		"change and program start or end is announced there, whichever UI\n"
		"caused it.  Vim's termdebug uses it.",
	.exec = cmd_new_ui_exec, .klass = "support",
	.arg_required = "interpreter and terminal",
};
