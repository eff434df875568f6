/*
 * cmd.c -- the command table, command lookup and execution, and the input
 * sources commands are read from (readline, files, stored lines).
 *
 * Lookup follows GDB: an exact name or alias wins, then a unique prefix;
 * several prefixes give `Ambiguous command "de": define, delete, ...` and
 * none gives `Undefined command: "foo".  Try "help".`.  Block commands
 * (define, while, if, commands, document) read their bodies from whatever
 * source the command came from, so they nest the same way in files, in
 * user-defined commands and at the prompt.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tmdb.h"
#include "live.h"

/* The one table, from tmdb.h's list of commands. */
#define TM_CMD_ENTRY(n) &cmd_##n##_entry,
const struct cmd_entry *const tm_cmd_table[] = {
	TM_COMMANDS(TM_CMD_ENTRY)
};
#undef TM_CMD_ENTRY
const size_t tm_cmd_count = sizeof(tm_cmd_table) / sizeof(tm_cmd_table[0]);

/* Nesting of user commands, sources and blocks: deep enough for any real
 * script, shallow enough for the stack (sanitizer builds included). */
#define MAX_DEPTH 256

static int lines_push(char ***lines, size_t *n, const char *line)
{
	char **grown = realloc(*lines, (*n + 1) * sizeof(**lines));

	if (!grown)
		return -1;
	*lines = grown;
	grown[*n] = strdup(line);
	if (!grown[*n])
		return -1;
	(*n)++;
	return 0;
}

/* ------------------------------------------------------------- lookup */

static size_t word_len(const char *p)
{
	size_t n = 0;

	while (p[n] && (isalnum((unsigned char)p[n]) || p[n] == '-' ||
			p[n] == '_' || p[n] == '.'))
		n++;
	return n;
}

/* Does name (or one of the space-separated aliases) equal / start with w? */
static int names_match(const char *names, const char *w, size_t wl, int exact)
{
	const char *p = names;

	while (p && *p) {
		size_t l = strcspn(p, " ");

		if (exact ? (l == wl && !strncmp(p, w, wl)) :
			    (l >= wl && !strncmp(p, w, wl)))
			return 1;
		p += l;
		while (*p == ' ')
			p++;
	}
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * Finds the command a word names.  User-defined commands come after the
 * built-in ones so that a definition never hides a built-in.  quiet: no
 * message on failure (completion, help).
 */
const struct cmd_entry *tm_cmd_lookup(struct tm_session *s, const char *word,
				      int quiet, struct ucmd **ucmd)
{
	const struct cmd_entry *hit = NULL;
	struct ucmd *u, *uhit = NULL;
	const char *names[128];
	size_t nn = 0, wl = strlen(word), i;
	char buf[1024];
	size_t off;

	if (ucmd)
		*ucmd = NULL;
	for (i = 0; i < tm_cmd_count; i++) {
		const struct cmd_entry *c = tm_cmd_table[i];

		if ((wl == strlen(c->name) && !strcmp(c->name, word)) ||
		    (c->alias && names_match(c->alias, word, wl, 1)))
			return c;
	}
	for (u = s->ucmds; u; u = u->next) {
		if (!strcmp(u->name, word)) {
			if (ucmd)
				*ucmd = u;
			return NULL;
		}
	}
	for (i = 0; i < tm_cmd_count; i++) {
		const struct cmd_entry *c = tm_cmd_table[i];

		if (c == &cmd_end_entry)
			continue;
		if (!strncmp(c->name, word, wl)) {
			hit = c;
			if (nn < 128)
				names[nn++] = c->name;
		}
	}
	for (u = s->ucmds; u; u = u->next) {
		if (!strncmp(u->name, word, wl)) {
			uhit = u;
			if (nn < 128)
				names[nn++] = u->name;
		}
	}
	if (nn == 1) {
		if (uhit && ucmd)
			*ucmd = uhit;
		return uhit ? NULL : hit;
	}
	if (quiet)
		return NULL;
	if (nn == 0) {
		tm_error(s, "Undefined command: \"%s\".  Try \"help\".", word);
		return NULL;
	}
	qsort(names, nn, sizeof(names[0]), cmp_str);
	off = (size_t)snprintf(buf, sizeof(buf), "Ambiguous command \"%s\": ", word);
	for (i = 0; i < nn && off < sizeof(buf); i++)
		off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%s%s",
					i ? ", " : "", names[i]);
	if (off < sizeof(buf))
		snprintf(buf + off, sizeof(buf) - off, ".");
	tm_error(s, "%s", buf);
	return NULL;
}

/* ------------------------------------------------------------- input sources */

static void input_push(struct tm_session *s, struct tm_input *in)
{
	in->prev = s->in;
	s->in = in;
}

static void input_pop(struct tm_session *s, struct tm_input *in)
{
	s->in = in->prev;
}

/*
 * The next line of the current source, malloc'd, without its newline;
 * NULL at the end.  Lines of a file may be continued with a backslash.
 */
char *tm_read_line(struct tm_session *s, const char *prompt)
{
	struct tm_input *in = s->in;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;

	if (!in)
		return NULL;
	if (in->lines) {
		if (in->pos >= in->nlines)
			return NULL;
		return strdup(in->lines[in->pos++]);
	}
	if (in->readline)
		return in->readline(s, prompt);
	if (!in->fp)
		return NULL;
	if (s->interactive && in->fp == stdin && prompt) {
		tm_out(s, "%s", prompt);
		fflush(s->out);
	}
	n = getline(&line, &cap, in->fp);
	if (n < 0) {
		free(line);
		return NULL;
	}
	in->line++;
	while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		line[--n] = 0;
	return line;
}

static int is_block_start(const char *line)
{
	static const char *const starts[] = {
		"while", "if", "define", "document", "commands", NULL
	};
	const char *p = tm_skip_ws(line);
	size_t wl = word_len(p), i;

	if (!wl)
		return 0;
	for (i = 0; starts[i]; i++)
		if (wl == strlen(starts[i]) && !strncmp(p, starts[i], wl))
			return 1;
	/* GDB's abbreviations of while / commands */
	return (wl == 2 && !strncmp(p, "ws", 2)) ||
	       (wl >= 4 && !strncmp(p, "commands", wl) && wl <= 8);
}

/*
 * Reads a block body up to its "end", keeping nested blocks whole.  With
 * allow_else an "else" at the outer level switches to else_lines.
 */
int tm_read_body(struct tm_session *s, char ***lines, size_t *n,
		 int allow_else, char ***else_lines, size_t *nelse)
{
	int depth = 0, in_else = 0;
	char *raw, *line;

	*lines = NULL;
	*n = 0;
	if (else_lines) {
		*else_lines = NULL;
		*nelse = 0;
	}
	for (;;) {
		raw = tm_read_line(s, ">");
		if (!raw) {
			tm_error(s, "End of input inside a block: missing \"end\".");
			goto fail;
		}
		line = tm_strip(raw);
		if (!strcmp(line, "end")) {
			if (depth == 0) {
				free(raw);
				return 0;
			}
			depth--;
		} else if (depth == 0 && allow_else && !strcmp(line, "else")) {
			if (in_else) {
				tm_error(s, "Only one \"else\" allowed in an \"if\".");
				free(raw);
				goto fail;
			}
			in_else = 1;
			free(raw);
			continue;
		} else if (is_block_start(line)) {
			depth++;
		}
		if (in_else ? lines_push(else_lines, nelse, line) :
			      lines_push(lines, n, line)) {
			free(raw);
			goto fail;
		}
		free(raw);
	}
fail:
	tm_lines_free(*lines, *n);
	*lines = NULL;
	*n = 0;
	if (else_lines) {
		tm_lines_free(*else_lines, *nelse);
		*else_lines = NULL;
		*nelse = 0;
	}
	return -1;
}

/* ------------------------------------------------------------- execution */

/* Splits user-command arguments (quotes keep spaces) for $argN. */
static size_t split_args(const char *p, char **argv, size_t max)
{
	size_t n = 0;

	while (n < max) {
		const char *start;
		char q = 0;
		size_t l;

		p = tm_skip_ws(p);
		if (!*p)
			break;
		start = p;
		while (*p && (q || !isspace((unsigned char)*p))) {
			if (*p == '"' || *p == '\'')
				q = q == *p ? 0 : q ? q : *p;
			p++;
		}
		l = (size_t)(p - start);
		argv[n] = malloc(l + 1);
		if (!argv[n])
			break;
		memcpy(argv[n], start, l);
		argv[n][l] = 0;
		n++;
	}
	return n;
}

/* Replaces $argc and $argN in line (GDB does this textually). */
static char *subst_args(const char *line, char **argv, size_t argc)
{
	size_t cap = strlen(line) + 64, len = 0;
	char *out = malloc(cap);
	const char *p = line;

	if (!out)
		return NULL;
	while (*p) {
		const char *rep = NULL;
		char num[24];
		size_t skip = 0, rl;

		if (!strncmp(p, "$argc", 5) && !isalnum((unsigned char)p[5])) {
			snprintf(num, sizeof(num), "%zu", argc);
			rep = num;
			skip = 5;
		} else if (!strncmp(p, "$arg", 4) && isdigit((unsigned char)p[4])) {
			char *end;
			unsigned long k = strtoul(p + 4, &end, 10);

			if (k < argc) {
				rep = argv[k];
				skip = (size_t)(end - p);
			}
		}
		if (!rep) {
			rep = p;
			rl = 1;
			skip = 1;
		} else {
			rl = strlen(rep);
		}
		if (len + rl + 1 > cap) {
			char *g;

			cap = (len + rl + 1) * 2;
			g = realloc(out, cap);
			if (!g) {
				free(out);
				return NULL;
			}
			out = g;
		}
		memcpy(out + len, rep, rl);
		len += rl;
		p += skip;
	}
	out[len] = 0;
	return out;
}

static int run_ucmd(struct tm_session *s, struct ucmd *u, const char *args)
{
	char *argv[32];
	char **lines;
	size_t argc, i;
	int rc;

	argc = split_args(args, argv, 32);
	lines = calloc(u->nlines ? u->nlines : 1, sizeof(*lines));
	if (!lines) {
		for (i = 0; i < argc; i++)
			free(argv[i]);
		return -1;
	}
	for (i = 0; i < u->nlines; i++)
		lines[i] = subst_args(u->lines[i], argv, argc);
	rc = tm_execute_lines(s, lines, u->nlines);
	tm_lines_free(lines, u->nlines);
	for (i = 0; i < argc; i++)
		free(argv[i]);
	return rc;
}

/*
 * `set trace-commands on`, as GDB prints it: the line after one '+' per
 * level of nesting (a sourced file, a user command, a loop body), so that a
 * transcript shows which command printed what.
 */
static void trace_command(struct tm_session *s, const char *line)
{
	size_t n = strlen(line);

	while (n > 0 && (line[n - 1] == ' ' || line[n - 1] == '\t' || line[n - 1] == '\n'))
		n--;
	for (int i = 0; i <= s->depth; i++)
		tm_out(s, "+");
	tm_out(s, "%.*s\n", (int)n, line);
	/* before a live program resumes and writes to the same terminal */
	fflush(s->out);
}

/*
 * Executes one command line.  Returns 0 on success, -1 when the command
 * failed (its message already printed).
 */
int tm_execute(struct tm_session *s, const char *line, int from_tty)
{
	const struct cmd_entry *c;
	struct ucmd *u = NULL;
	char word[128];
	const char *p = tm_skip_ws(line), *args, *fmt_args;
	size_t wl;
	int rc;

	/* GDB's "server " prefix, which front ends put before their own
	 * commands (Vim's termdebug: "server new-ui mi PTY"): the command
	 * itself, kept out of the history (cli.c) */
	if (!strncmp(p, "server ", 7))
		p = tm_skip_ws(p + 7);
	if (!*p || *p == '#')
		return 0;
	if (s->set.trace_commands)
		trace_command(s, p);
	wl = word_len(p);
	if (wl == 0 && (*p == '!' || *p == '|')) {
		tm_error(s, "Shell commands are not supported.");
		return s->last_failed = 1, -1;
	}
	if (wl == 0 || wl >= sizeof(word)) {
		int l = (int)strcspn(p, " \t");

		tm_error(s, "Undefined command: \"%.*s\".  Try \"help\".", l, p);
		s->last_failed = 1;
		return -1;
	}
	memcpy(word, p, wl);
	word[wl] = 0;
	args = p + wl;
	fmt_args = tm_skip_ws(args);
	/* print/x and friends: formats are accepted and ignored. */
	if (*args == '/')
		args += strcspn(args, " \t");
	args = tm_skip_ws(args);
	if (s->depth >= MAX_DEPTH) {
		tm_error(s, "Max user call depth exceeded -- command aborted.");
		s->last_failed = 1;
		return -1;
	}
	c = tm_cmd_lookup(s, word, 0, &u);
	if (!c && !u) {
		s->last_failed = 1;
		return -1;
	}
	if (c && (c->flags & CMD_FORMAT))
		args = fmt_args;        /* x/8f: the command reads its format */
	/* A Ctrl-C belongs to the command typed at the prompt, nested ones
	 * (loops, breakpoint commands) must still see it. */
	if (s->depth == 0) {
		tm_interrupted = 0;
		s->intr_reported = 0;
	}
	s->depth++;
	if (u) {
		rc = run_ucmd(s, u, args);
	} else if (tm_command_needs_trace(s, c)) {
		rc = -1;
	} else if (c->arg_required && !*args) {
		tm_error(s, "Argument required (%s).", c->arg_required);
		rc = -1;
	} else {
		rc = c->exec(s, args, from_tty);
	}
	s->depth--;
	s->last_failed = rc != 0;
	fflush(s->out);
	return rc;
}

/*
 * Runs stored lines as a source of their own, so nested blocks read their
 * bodies from them.  Stops at the first failure, as GDB does.
 */
int tm_execute_lines(struct tm_session *s, char **lines, size_t n)
{
	struct tm_input in;
	char *line;
	int rc = 0;

	memset(&in, 0, sizeof(in));
	in.lines = lines;
	in.nlines = n;
	in.name = "commands";
	input_push(s, &in);
	while (!s->quit && (line = tm_read_line(s, NULL))) {
		rc = tm_execute(s, line, 0);
		free(line);
		if (rc || tm_interrupted)
			break;
	}
	input_pop(s, &in);
	return rc;
}

/*
 * Executes a command file.  An error stops the file (GDB's behaviour); the
 * error is reported once, with the file's name for nested sources.
 */
int tm_source_file(struct tm_session *s, const char *path, int must_exist)
{
	struct tm_input in;
	char *line;
	int rc = 0;
	FILE *fp;

	fp = strcmp(path, "-") ? fopen(path, "r") : stdin;
	if (!fp) {
		if (!must_exist && errno == ENOENT)
			return 0;
		tm_error(s, "%s: %s.", path, strerror(errno));
		return -1;
	}
	memset(&in, 0, sizeof(in));
	in.fp = fp;
	in.name = path;
	input_push(s, &in);
	while (!s->quit && (line = tm_read_line(s, NULL))) {
		s->err_prefixed = 0;
		rc = tm_execute(s, line, 0);
		free(line);
		if (rc)
			break;
	}
	input_pop(s, &in);
	if (fp != stdin)
		fclose(fp);
	return rc;
}

/*
 * What Enter after line runs again, as GDB repeats it (NULL: nothing):
 * moving commands, print and its relatives, up and down as typed; list
 * and x go on from where they stopped.
 */
static char *repeat_of(struct tm_session *s, const char *line)
{
	const struct cmd_entry *c;
	struct ucmd *u;
	char w[64];
	const char *p = tm_skip_ws(line);
	size_t wl = word_len(p);

	if (!wl || wl >= sizeof(w))
		return NULL;
	memcpy(w, p, wl);
	w[wl] = 0;
	c = tm_cmd_lookup(s, w, 1, &u);
	if (!c)
		return NULL;
	if (c == &cmd_list_entry)
		return strdup("list");
	if (c == &cmd_x_entry) {
		/* x/FMT ADDR: the same format, at the next element */
		const char *q = p + wl;
		size_t fl = *q == '/' ? strcspn(q, " \t") : 0;
		char buf[80];

		snprintf(buf, sizeof(buf), "x%.*s", (int)(fl < 60 ? fl : 0), q);
		return strdup(buf);
	}
	/* run and start are not repeated (GDB's dont_repeat) */
	if (c == &cmd_run_entry || c == &cmd_start_entry)
		return NULL;
	if (c->flags & CMD_RESUMES || c == &cmd_print_entry ||
	    c == &cmd_up_entry || c == &cmd_down_entry || c == &cmd_output_entry)
		return strdup(line);
	return NULL;
}

/* Pushes the interactive source (readline or a non-terminal stdin). */
int tm_run_interactive(struct tm_session *s,
		       char *(*readline)(struct tm_session *s, const char *prompt))
{
	struct tm_input in;
	char *line, *last = NULL;

	memset(&in, 0, sizeof(in));
	in.readline = readline;
	in.fp = readline ? NULL : stdin;
	in.name = "stdin";
	input_push(s, &in);
	while (!s->quit) {
		tm_page_reset(s);
		line = tm_read_line(s, s->set.prompt);
		if (!line) {
			if (readline)
				tm_out(s, "quit\n");
			break;
		}
		/* An empty line repeats the last command GDB repeats. */
		if (!*tm_skip_ws(line) && last && readline) {
			free(line);
			line = strdup(last);
			if (!line)
				break;
		} else if (*tm_skip_ws(line)) {
			free(last);
			last = repeat_of(s, line);
		}
		tm_execute(s, line, 1);
		free(line);
	}
	free(last);
	input_pop(s, &in);
	return s->last_failed;
}
