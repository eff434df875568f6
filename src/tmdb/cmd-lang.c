/*
 * cmd-lang.c -- the command language: set, show, define, document, if,
 * while, end, source, quit; file, which opens a trace (or sets the program
 * `run` starts); and what only a live probe answers: capture (a full
 * tensor at its next occurrence), record (save what it sent as a .tmrun)
 * and level (its probe level per node pattern).
 *
 * Settings are a table (name, kind, where the value lives, the sentence
 * `show` answers with) so that set, show and completion agree.
 */
#include "config.h"

#include <ctype.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "tmdb.h"
#include "live.h"
#include "view.h"

enum set_kind { SET_BOOL, SET_INT, SET_STR, SET_IGNORE };

struct setting {
	const char *name;
	int kind;
	size_t off;             /* offset in struct settings */
	const char *show;       /* printf format of the show sentence */
	const char *accepts;    /* SET_IGNORE: the values that are what tmdb does */
};

#define OFF(f) offsetof(struct settings, f)
static const struct setting settings[] = {
	{ "auto-load local-tmdbinit", SET_BOOL, OFF(local_init),
	  "Auto-loading of ./.tmdbinit is %s.", NULL },
	{ "confirm", SET_BOOL, OFF(confirm),
	  "Whether to confirm potentially dangerous operations is %s.", NULL },
	{ "history size", SET_INT, OFF(history_size),
	  "The size of the command history is %d.", NULL },
	{ "listsize", SET_INT, OFF(listsize),
	  "Number of source lines tmdb will list by default is %d.", NULL },
	{ "max-gap-lines", SET_INT, OFF(max_gap_lines),
	  "Gaps reported one by one during a single move: %d.", NULL },
	{ "pagination", SET_BOOL, OFF(pagination), "State of pagination is %s.", NULL },
	{ "progress", SET_BOOL, OFF(progress),
	  "Whether to show the progress of long scans is %s.", NULL },
	{ "prompt", SET_STR, OFF(prompt), "Tmdb's prompt is \"%s\".", NULL },
	{ "verbose", SET_BOOL, OFF(verbose), "Verbosity is %s.", NULL },
	{ "style enabled", SET_BOOL, OFF(style), "CLI output styling is %s.", NULL },
	{ "trace-commands", SET_BOOL, OFF(trace_commands),
	  "State of GDB CLI command tracing is %s.", NULL },
	{ "height", SET_IGNORE, 0, "Number of lines tmdb thinks are in a page is unlimited.",
	  " 0 unlimited " },
	{ "width", SET_IGNORE, 0, "Number of characters tmdb thinks are in a line is unlimited.",
	  " 0 unlimited " },
	{ "print pretty", SET_BOOL, OFF(print_pretty),
	  "Pretty formatting of structures is %s.", NULL },
	{ NULL, 0, 0, NULL, NULL }
};
#undef OFF

/* Matches a setting name at the start of args; *rest gets its value text. */
static const struct setting *find_setting(const char *args, const char **rest)
{
	size_t i;

	for (i = 0; settings[i].name; i++) {
		size_t l = strlen(settings[i].name);

		if (!strncmp(args, settings[i].name, l) &&
		    (!args[l] || isspace((unsigned char)args[l]))) {
			*rest = tm_skip_ws(args + l);
			return &settings[i];
		}
	}
	return NULL;
}

/* Completion of "set X" / "show X" (cli.c). */
const char *tm_setting_name(size_t i)
{
	return i < sizeof(settings) / sizeof(settings[0]) ? settings[i].name : NULL;
}

static void show_setting(struct tm_session *s, const struct setting *st)
{
	char *base = (char *)&s->set;

	switch (st->kind) {
	case SET_BOOL:
		tm_out(s, st->show, *(int *)(base + st->off) ? "on" : "off");
		break;
	case SET_INT:
		tm_out(s, st->show, *(int *)(base + st->off));
		break;
	case SET_STR:
		tm_out(s, st->show, *(char **)(base + st->off));
		break;
	default:
		tm_out(s, "%s", st->show);
		break;
	}
	tm_out(s, "\n");
}

/* set $name = EXPR: GDB's convenience variables. */
static int set_variable(struct tm_session *s, const char *args)
{
	const char *p = args + 1, *eq;
	char name[64];
	size_t l = 0;
	struct tm_val v;

	while (p[l] && (isalnum((unsigned char)p[l]) || p[l] == '_'))
		l++;
	eq = tm_skip_ws(p + l);
	if (!l || l >= sizeof(name) || *eq != '=' || eq[1] == '=') {
		tm_error(s, "A syntax error in expression, near `%s'.", args);
		return -1;
	}
	memcpy(name, p, l);
	name[l] = 0;
	if (isdigit((unsigned char)name[0])) {
		tm_error(s, "Left operand of assignment is not an lvalue.");
		return -1;
	}
	memset(&v, 0, sizeof(v));
	if (tm_evaluate(s, eq + 1, &v))
		return -1;
	tm_conv_set(s, name, &v);
	tm_val_clear(&v);
	return 0;
}

static int cmd_set_exec(struct tm_session *s, const char *args, int from_tty)
{
	const struct setting *st;
	const char *val;
	char *base = (char *)&s->set;
	uint64_t n;
	int b, rc;

	if (!strncmp(args, "var ", 4))
		args = tm_skip_ws(args + 4);
	else if (!strncmp(args, "variable ", 9))
		args = tm_skip_ws(args + 9);
	if (*args == '$')
		return set_variable(s, args);
	if (tm_live_setting(s, args, 0, &rc))
		return rc;
	if (!*args) {
		tm_error(s, "Argument required (expression to compute).");
		return -1;
	}
	st = find_setting(args, &val);
	if (!st) {
		tm_error(s, "Undefined set command: \"%s\".  Try \"help set\".", args);
		return -1;
	}
	switch (st->kind) {
	case SET_BOOL:
		if (tm_parse_bool(val, &b)) {
			tm_error(s, "\"on\" or \"off\" expected.");
			return -1;
		}
		*(int *)(base + st->off) = b;
		break;
	case SET_INT:
		if (!strcmp(val, "unlimited"))
			n = 1u << 30;
		else if (tm_parse_uint(val, &n) || n > (1u << 30)) {
			tm_error(s, "integer %s out of range", val);
			return -1;
		}
		*(int *)(base + st->off) = (int)n;
		break;
	case SET_STR: {
		char *dup, *text = strdup(val);
		size_t l;

		if (!text)
			return -1;
		/* GDB keeps quotes literally; strip a surrounding pair. */
		l = strlen(text);
		if (l >= 2 && text[0] == '"' && text[l - 1] == '"') {
			text[l - 1] = 0;
			dup = strdup(text + 1);
			free(text);
			text = dup;
			if (!text)
				return -1;
		}
		free(*(char **)(base + st->off));
		*(char **)(base + st->off) = text;
		break;
	}
	default: {
		/*
		 * GDB settings kept for scripts' sake, fixed at one value:
		 * another value is not taken, and saying nothing would let
		 * "show" contradict the "set" just made.
		 */
		char word[32];

		snprintf(word, sizeof(word), " %s ", val);
		if (!*val || !st->accepts || strlen(val) > 20 ||
		    !strstr(st->accepts, word)) {
			tm_error(s, "warning: \"set %s%s%s\" is not supported: %s",
				 st->name, *val ? " " : "", val, st->show);
			return 0;
		}
		break;
	}
	}
	return 0;
}

const struct cmd_entry cmd_set_entry = {
	.name = "set", .usage = "set SETTING VALUE | set $VAR = EXPR",
	.help = "Change a setting, or set a convenience variable.\n"
		"Settings: auto-load local-tmdbinit, confirm, history size, listsize,\n"
		"max-gap-lines, pagination, progress, prompt, style enabled, trace-commands,\n"
		"verbose.",
	.exec = cmd_set_exec, .klass = "support",
};

static void show_convenience(struct tm_session *s)
{
	struct conv *c;
	char buf[2048];
	int any = 0;

	for (c = s->convs; c; c = c->next) {
		if (c->val.kind == VAL_SCALAR && c->val.v.type == TM_TQL_UNKNOWN)
			continue;
		tm_val_format(&c->val, buf, sizeof(buf));
		tm_out(s, "$%s = %s\n", c->name, buf);
		any = 1;
	}
	if (!any)
		tm_out(s, "No debugger convenience values now defined.\n"
		       "Convenience variables have names starting with \"$\";\n"
		       "use \"set\" as in \"set $foo = 5\" to define them.\n");
}

static int cmd_show_exec(struct tm_session *s, const char *args, int from_tty)
{
	const struct setting *st;
	const char *rest;
	size_t i;
	int rc;

	if (!*args) {
		for (i = 0; settings[i].name; i++) {
			tm_out(s, "%s:  ", settings[i].name);
			show_setting(s, &settings[i]);
		}
		return 0;
	}
	if (tm_live_setting(s, args, 1, &rc))
		return rc;
	if (!strcmp(args, "version")) {
		tm_out(s, "tmdb (%s)\n", tm_version_string());
		return 0;
	}
	if (!strncmp(args, "conv", 4)) {
		show_convenience(s);
		return 0;
	}
	if (!strcmp(args, "values")) {
		for (i = 0; i < s->nhist; i++) {
			char buf[2048];

			tm_val_format(s->hist[i], buf, sizeof(buf));
			tm_out(s, "$%zu = %s\n", i + 1, buf);
		}
		return 0;
	}
	if (!strncmp(args, "user", 4)) {
		const char *name = tm_skip_ws(args + 4);
		struct ucmd *u;
		int found = 0;

		for (u = s->ucmds; u; u = u->next) {
			if (*name && strcmp(name, u->name))
				continue;
			found = 1;
			tm_out(s, "User command \"%s\":\n", u->name);
			for (i = 0; i < u->nlines; i++)
				tm_out(s, "  %s\n", u->lines[i]);
		}
		if (*name && !found) {
			tm_error(s, "Not a user command.");
			return -1;
		}
		return 0;
	}
	st = find_setting(args, &rest);
	if (!st) {
		tm_error(s, "Undefined show command: \"%s\".  Try \"help show\".", args);
		return -1;
	}
	show_setting(s, st);
	return 0;
}

const struct cmd_entry cmd_show_entry = {
	.name = "show",
	.usage = "show [SETTING | version | convenience | values | user [NAME]]",
	.help = "Show a setting (all of them without argument), the version, the\n"
		"convenience variables, the value history or user-defined commands.",
	.exec = cmd_show_exec, .klass = "support",
};

/* ------------------------------------------------------------- define, document */

static int valid_name(const char *p)
{
	if (!*p)
		return 0;
	for (; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_')
			return 0;
	return 1;
}

static struct ucmd *ucmd_find(struct tm_session *s, const char *name)
{
	struct ucmd *u;

	for (u = s->ucmds; u; u = u->next)
		if (!strcmp(u->name, name))
			return u;
	return NULL;
}

/* A name or alias of a built-in command (user commands never hide one). */
static int is_builtin(const char *name)
{
	size_t i, l = strlen(name);

	for (i = 0; i < tm_cmd_count; i++) {
		const char *a = tm_cmd_table[i]->alias;

		if (!strcmp(tm_cmd_table[i]->name, name))
			return 1;
		while (a && *a) {
			size_t al = strcspn(a, " ");

			if (al == l && !strncmp(a, name, l))
				return 1;
			a += al;
			while (*a == ' ')
				a++;
		}
	}
	return 0;
}

static int cmd_define_exec(struct tm_session *s, const char *args, int from_tty)
{
	struct ucmd *u;
	char **lines;
	size_t n;

	if (!valid_name(args)) {
		tm_error(s, *args ? "Invalid command name \"%s\"." :
			 "Argument required (name of command to define).", args);
		/* The body still follows: read it so it is not executed. */
		if (*args && tm_read_body(s, &lines, &n, 0, NULL, NULL) == 0)
			tm_lines_free(lines, n);
		return -1;
	}
	if (is_builtin(args)) {
		tm_error(s, "Command \"%s\" is built-in.", args);
		if (tm_read_body(s, &lines, &n, 0, NULL, NULL) == 0)
			tm_lines_free(lines, n);
		return -1;
	}
	if (from_tty && s->interactive)
		tm_out(s, "Type commands for definition of \"%s\".\n"
		       "End with a line saying just \"end\".\n", args);
	if (tm_read_body(s, &lines, &n, 0, NULL, NULL))
		return -1;
	u = ucmd_find(s, args);
	if (!u) {
		u = calloc(1, sizeof(*u));
		if (!u || !(u->name = strdup(args))) {
			free(u);
			tm_lines_free(lines, n);
			return -1;
		}
		u->next = s->ucmds;
		s->ucmds = u;
	} else {
		tm_lines_free(u->lines, u->nlines);
	}
	u->lines = lines;
	u->nlines = n;
	return 0;
}

const struct cmd_entry cmd_define_entry = {
	.name = "define", .usage = "define NAME\n  COMMAND...\nend",
	.help = "Define a new command.  In its body $argc is the number of arguments\n"
		"and $arg0, $arg1, ... are the arguments.",
	.exec = cmd_define_exec, .flags = CMD_BLOCK, .klass = "support",
};

static int cmd_document_exec(struct tm_session *s, const char *args, int from_tty)
{
	struct ucmd *u = ucmd_find(s, args);
	char **lines;
	size_t n, i, len = 0;
	char *doc;

	if (tm_read_body(s, &lines, &n, 0, NULL, NULL))
		return -1;
	if (!u) {
		tm_lines_free(lines, n);
		tm_error(s, "Undefined command: \"%s\".", args);
		return -1;
	}
	for (i = 0; i < n; i++)
		len += strlen(lines[i]) + 1;
	doc = calloc(1, len + 1);
	if (!doc) {
		tm_lines_free(lines, n);
		return -1;
	}
	for (i = 0; i < n; i++) {
		strcat(doc, lines[i]);
		if (i + 1 < n)
			strcat(doc, "\n");
	}
	tm_lines_free(lines, n);
	free(u->doc);
	u->doc = doc;
	return 0;
}

const struct cmd_entry cmd_document_entry = {
	.name = "document", .usage = "document NAME\n  TEXT...\nend",
	.help = "Document a user-defined command (shown by \"help NAME\").",
	.exec = cmd_document_exec, .flags = CMD_BLOCK, .klass = "support",
};

/* ------------------------------------------------------------- if, while */

static int eval_truth(struct tm_session *s, const char *expr, int *truth)
{
	struct tm_val v;

	memset(&v, 0, sizeof(v));
	if (tm_evaluate(s, expr, &v))
		return -1;
	*truth = tm_val_truth(&v);
	tm_val_clear(&v);
	return 0;
}

static int cmd_if_exec(struct tm_session *s, const char *args, int from_tty)
{
	char **then_l, **else_l;
	size_t nthen, nelse;
	int truth = 0, rc = 0;

	if (tm_read_body(s, &then_l, &nthen, 1, &else_l, &nelse))
		return -1;
	if (!*args) {
		tm_error(s, "if/while commands require arguments.");
		rc = -1;
	} else if (eval_truth(s, args, &truth)) {
		rc = -1;
	} else if (truth) {
		rc = tm_execute_lines(s, then_l, nthen);
	} else {
		rc = tm_execute_lines(s, else_l, nelse);
	}
	tm_lines_free(then_l, nthen);
	tm_lines_free(else_l, nelse);
	return rc;
}

const struct cmd_entry cmd_if_entry = {
	.name = "if", .usage = "if EXPR\n  COMMAND...\n[else\n  COMMAND...]\nend",
	.help = "Execute the commands if EXPR is true (else the else part).",
	.exec = cmd_if_exec, .flags = CMD_BLOCK, .klass = "support",
};

static int cmd_while_exec(struct tm_session *s, const char *args, int from_tty)
{
	char **body;
	size_t n;
	int truth = 0, rc = 0;

	if (tm_read_body(s, &body, &n, 0, NULL, NULL))
		return -1;
	if (!*args) {
		tm_error(s, "if/while commands require arguments.");
		tm_lines_free(body, n);
		return -1;
	}
	while (!s->quit) {
		if (tm_interrupted) {
			tm_error(s, "Quit");
			rc = -1;
			break;
		}
		if (eval_truth(s, args, &truth)) {
			rc = -1;
			break;
		}
		if (!truth)
			break;
		rc = tm_execute_lines(s, body, n);
		if (rc)
			break;
	}
	tm_lines_free(body, n);
	return rc;
}

const struct cmd_entry cmd_while_entry = {
	.name = "while", .alias = "ws",
	.usage = "while EXPR\n  COMMAND...\nend",
	.help = "Execute the commands as long as EXPR is true.",
	.exec = cmd_while_exec, .flags = CMD_BLOCK, .klass = "support",
};

static int cmd_end_exec(struct tm_session *s, const char *args, int from_tty)
{
	tm_error(s, "This command cannot be used at the top level.");
	return -1;
}

const struct cmd_entry cmd_end_entry = {
	.name = "end", .usage = "end",
	.help = "Ends a block (define, document, commands, if, while).",
	.exec = cmd_end_exec, .klass = "support",
};

/* ------------------------------------------------------------- source, quit */

static int cmd_source_exec(struct tm_session *s, const char *args, int from_tty)
{
	if (!*args) {
		tm_error(s, "source command requires file name of file to source.");
		return -1;
	}
	return tm_source_file(s, args, 1);
}

const struct cmd_entry cmd_source_entry = {
	.name = "source", .usage = "source FILE",
	.help = "Read commands from FILE.",
	.exec = cmd_source_exec, .klass = "support",
};

static int cmd_quit_exec(struct tm_session *s, const char *args, int from_tty)
{
	uint64_t n = 0;

	if (*args && tm_parse_uint(args, &n)) {
		struct tm_val v;

		memset(&v, 0, sizeof(v));
		if (tm_evaluate(s, args, &v))
			return -1;
		if (v.kind != VAL_SCALAR || v.v.type != TM_TQL_INT) {
			tm_val_clear(&v);
			tm_error(s, "Invalid exit code \"%s\".", args);
			return -1;
		}
		n = (uint64_t)v.v.v.i;
	}
	s->quit = 1;
	s->exit_code = (int)(n & 0xff);
	return 0;
}

const struct cmd_entry cmd_quit_entry = {
	.name = "quit", .alias = "q exit",
	.usage = "quit [N]",
	.help = "Exit tmdb, with status N (default 0).",
	.exec = cmd_quit_exec, .klass = "support",
};

/* "WHAT [ARG]: why." from the probe's own words, or the code's. */
static int probe_refused(struct tm_session *s, const char *what, const char *arg, int err)
{
	const char *why = s->probe->ops->detail(s->probe);

	tm_error(s, "%s%s%s: %s.", what, arg ? " " : "", arg ? arg : "",
		 why[0] ? why : tm_strerror(err));
	return -1;
}

static int cmd_capture_exec(struct tm_session *s, const char *args, int from_tty)
{
	struct tm_probe_info pi;
	struct tm_slot slot;
	uint32_t node;
	char sb[32];
	int err;

	(void)from_tty;
	s->probe->ops->describe(s->probe, &pi);
	if (!pi.can_capture) {
		tm_error(s, "The %s probe cannot capture tensors: a recording holds "
			 "only what it captured (level 3 nodes).", pi.kind);
		return -1;
	}
	if (tm_view_tensor_ref(s, args, &node, &slot))
		return -1;
	err = s->probe->ops->capture(s->probe, node, slot);
	if (err)
		return probe_refused(s, "Cannot capture", args, err);
	tm_slot_format(slot, sb, sizeof(sb));
	tm_out(s, "Will capture %s:%s at its next call.\n", tm_node_name(s, node), sb);
	return 0;
}

const struct cmd_entry cmd_capture_entry = {
	.name = "capture", .usage = "capture ADDRESS:SLOT",
	.help = "Take one full tensor at the next occurrence of ADDRESS:SLOT (live\n"
		"probes).  The probe copies that call's tensors, which heatmap and x\n"
		"then show.",
	.exec = cmd_capture_exec, .flags = CMD_NEEDS_TRACE, .klass = "data",
};

/* ------------------------------------------------------------- record */

static int cmd_record_exec(struct tm_session *s, const char *args, int from_tty)
{
	const char *path, *note;
	uint64_t events;
	int err;

	(void)from_tty;
	if (!s->probe->ops->record) {
		tm_error(s, "The trace is a recording already (%s).",
			 s->trace_path ? s->trace_path : "?");
		return -1;
	}
	path = tm_probe_recording(s->probe, &events, &note);
	if (!*args) {
		if (note)
			tm_out(s, "%s\n", note);
		if (path)
			tm_out(s, "Recording to %s: %" PRIu64 " events so far.\n", path, events);
		else if (!note)
			tm_out(s, "Not recording.\n");
		return 0;
	}
	if (!strcmp(args, "stop")) {
		if (!path) {
			tm_error(s, "Not recording.");
			return -1;
		}
		err = s->probe->ops->record(s->probe, NULL);
		if (err) {
			tm_error(s, "Recording to %s ended badly: %s.", path, tm_strerror(err));
			return -1;
		}
		tm_out(s, "Recording stopped: %s, %" PRIu64 " events.\n",
		       s->probe->ops->detail(s->probe), events);
		return 0;
	}
	err = s->probe->ops->record(s->probe, args);
	if (err)
		return probe_refused(s, "Cannot record", NULL, err);
	/* a distributed job records one file per rank and their manifest */
	path = tm_probe_recording(s->probe, &events, &note);
	tm_out(s, "Recording to %s: the %" PRIu64 " events received so far, and what comes "
	       "next.\n", path ? path : args, events);
	return 0;
}

const struct cmd_entry cmd_record_entry = {
	.name = "record", .usage = "record FILE | record stop | record",
	.help = "Save what the live process sent so far as a .tmrun, and keep adding\n"
		"what it sends until \"record stop\" or the end of the session; without\n"
		"argument, say whether and where it records.",
	.exec = cmd_record_exec, .flags = CMD_NEEDS_TRACE, .klass = "running",
};

/* ------------------------------------------------------------- dump */

static int cmd_dump_exec(struct tm_session *s, const char *args, int from_tty)
{
	const char *text = "";
	int err;

	(void)from_tty;
	if (!s->probe->ops->flight) {
		tm_error(s, "A recording has no flight window to dump (dump is for a live "
			 "process recording with --flight N).");
		return -1;
	}
	err = s->probe->ops->flight(s->probe, TM_FLIGHT_DUMP, 0,
				    *args ? args : "dump from tmdb", &text);
	if (err)
		return probe_refused(s, "Cannot dump the flight window", NULL, err);
	tm_out(s, "The probe %s.\n", text);
	return 0;
}

const struct cmd_entry cmd_dump_entry = {
	.name = "dump", .usage = "dump [REASON]",
	.help = "Have a live process in flight mode (tensormorph-probe record --flight N,\n"
		"or set probe-flight N) write its window -- the last N steps it kept in\n"
		"memory -- to its trace file now, as a trigger would; it records normally\n"
		"from then on.  REASON goes into the trace's metadata (info probe:\n"
		"flight.trigger).",
	.exec = cmd_dump_exec, .flags = CMD_NEEDS_TRACE, .klass = "running",
};

/* ------------------------------------------------------------- level */

static int cmd_level_exec(struct tm_session *s, const char *args, int from_tty)
{
	char pattern[TM_ADDRESS_MAX + 1];
	const char *sp, *emsg = NULL;
	tm_address *a = NULL;
	size_t plen;
	int level, col = 0, err;

	(void)from_tty;
	if (!s->probe->ops->set_level) {
		tm_error(s, "The probe levels of a recording were fixed when it was "
			 "recorded.");
		return -1;
	}
	/* [PATTERN] N: the level is the last word */
	sp = strrchr(args, ' ');
	sp = sp ? sp + 1 : args;
	if (!*args || strlen(sp) != 1 || *sp < '0' || *sp > '3') {
		tm_error(s, "Usage: level [PATTERN] N, with N a probe level 0..3.");
		return -1;
	}
	level = *sp - '0';
	plen = (size_t)(sp - args);
	while (plen && args[plen - 1] == ' ')
		plen--;
	if (plen >= sizeof(pattern)) {
		tm_error(s, "Pattern too long.");
		return -1;
	}
	memcpy(pattern, args, plen);
	pattern[plen] = 0;
	if (plen) {
		if (tm_address_parse(pattern, &a, &col, &emsg)) {
			tm_error(s, "Malformed pattern \"%s\": %s at column %d.", pattern,
				 emsg ? emsg : "syntax error", col + 1);
			return -1;
		}
		tm_address_free(a);
	}
	err = s->probe->ops->set_level(s->probe, pattern, level);
	if (err)
		return probe_refused(s, "Cannot set the level", NULL, err);
	tm_out(s, "Probe level %d for %s, from their next call.\n", level,
	       plen ? pattern : "every node");
	return 0;
}

const struct cmd_entry cmd_level_entry = {
	.name = "level", .usage = "level [PATTERN] N",
	.help = "Set the probe level (0-3) of the nodes matching PATTERN in the live\n"
		"process (every node without PATTERN), from their next call on: 0\n"
		"shapes only, 1 stats, 2 histograms, inputs and gradients, 3 full\n"
		"tensors.",
	.exec = cmd_level_exec, .flags = CMD_NEEDS_TRACE, .klass = "running",
};

/* ------------------------------------------------------------- file */

static int cmd_file_exec(struct tm_session *s, const char *args, int from_tty)
{
	char *path;
	int rc;

	if (!*args) {
		if (!s->probe) {
			tm_error(s, "No trace file now.");
			return -1;
		}
		tm_session_unload(s);
		tm_out(s, "No trace file now.\n");
		return 0;
	}
	path = strdup(args);
	if (!path)
		return -1;
	{
		size_t l = strlen(path);

		if (l >= 2 && (path[0] == '"' || path[0] == '\'') && path[l - 1] == path[0]) {
			path[l - 1] = 0;
			memmove(path, path + 1, l - 1);
		}
	}
	if (!tm_live_file(s, path, &rc) && (rc = tm_session_load(s, path)) == 0)
		tm_bp_rebind_all(s);    /* the breakpoints, on the new nodes */
	free(path);
	return rc;
}

const struct cmd_entry cmd_file_entry = {
	.name = "file", .alias = "core-file",
	.usage = "file [TRACE.tmrun]",
	.help = "Open a recorded run (.tmrun) for replay; without argument, close it.",
	.exec = cmd_file_exec, .klass = "files",
};
