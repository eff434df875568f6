/*
 * cli.c -- the interactive front end: GNU readline with a history file,
 * completion (commands, info/set/show sub-commands, node addresses, slots,
 * TQL fields), and SIGINT handling so that Ctrl-C stops a long continue or
 * find and, at the prompt, discards the line being typed.
 *
 * Readline's completion callbacks take no user pointer, so the session
 * being completed for is kept in the one static below: a global that
 * readline forces on us.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <readline/readline.h>
#include <readline/history.h>

#include "tmdb.h"

static struct tm_session *cli_session;   /* readline has no user pointer */
static int cli_cancelled;                /* Ctrl-C at the prompt */
static char *cli_histfile;

static void on_sigint(int sig)
{
	(void)sig;
	tm_interrupted = 1;
}

void tm_install_sigint(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigint;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
}

/*
 * readline's input function.  readline's own signal handling would only
 * notice Ctrl-C at the next key, so tmdb handles SIGINT itself (without
 * SA_RESTART): the interrupted read() comes here, the line is thrown away
 * and an empty line is accepted, which gives a fresh prompt as in GDB.
 */
static int cli_getc(FILE *fp)
{
	unsigned char c;
	ssize_t n;
	int ui;

	for (;;) {
		/* a second UI (new-ui): its commands run while this one waits */
		ui = cli_session ? tm_mi_ui_fd(cli_session) : -1;
		if (ui >= 0) {
			struct pollfd pf[2];

			pf[0].fd = fileno(fp);
			pf[0].events = POLLIN;
			pf[1].fd = ui;
			pf[1].events = POLLIN;
			n = poll(pf, 2, -1);
			if (n > 0 && pf[1].revents) {
				tm_mi_ui_poll(cli_session);
				if (cli_session->quit)
					return EOF;
				continue;
			}
			if (n > 0)
				n = read(fileno(fp), &c, 1);
		} else {
			n = read(fileno(fp), &c, 1);
		}
		if (n == 1)
			return c;
		if (n == 0)
			return EOF;
		if (errno != EINTR)
			return EOF;
		if (tm_interrupted) {
			tm_interrupted = 0;
			cli_cancelled = 1;
			rl_replace_line("", 0);
			return '\n';
		}
	}
}

/* ------------------------------------------------------------- completion */

struct cands {
	char **v;
	size_t n, cap;
};

static void cand_add(struct cands *c, const char *text, size_t len)
{
	size_t i;
	char **g;

	for (i = 0; i < c->n; i++)
		if (strlen(c->v[i]) == len && !strncmp(c->v[i], text, len))
			return;
	if (c->n + 1 >= c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 32;

		g = realloc(c->v, cap * sizeof(*g));
		if (!g)
			return;
		c->v = g;
		c->cap = cap;
	}
	c->v[c->n] = strndup(text, len);
	if (c->v[c->n])
		c->n++;
}

static void cand_prefixed(struct cands *c, const char *text, const char *word)
{
	if (!strncmp(word, text, strlen(text)))
		cand_add(c, word, strlen(word));
}

/* Node addresses, one segment at a time; then slots and fields after ':'. */
static void complete_address(struct tm_session *s, const char *text,
			     struct cands *c)
{
	static const char *const mslots[] = { "out", "in", "grad_out", "grad_in", NULL };
	static const char *const pslots[] = { "data", "grad", NULL };
	const char *colon = strchr(text, ':');
	size_t tl = strlen(text), i;
	uint32_t id, n;

	if (!s->nodes)
		return;
	if (colon) {
		size_t pl = (size_t)(colon - text);
		char path[TM_ADDRESS_MAX], buf[TM_ADDRESS_MAX + 64];
		const struct tm_node *nd;
		const char *const *sl;
		const char *dot;

		if (pl >= sizeof(path))
			return;
		memcpy(path, text, pl);
		path[pl] = 0;
		nd = tm_nodetab_find(s->nodes, path);
		if (!nd)
			return;
		dot = strchr(colon, '.');
		if (dot) {
			/* NODE:SLOT.field */
			for (i = 0; i < TM_STAT__COUNT; i++) {
				snprintf(buf, sizeof(buf), "%.*s%s", (int)(dot + 1 - text),
					 text, tm_stat_table[i].name);
				cand_prefixed(c, text, buf);
			}
			snprintf(buf, sizeof(buf), "%.*sshape", (int)(dot + 1 - text), text);
			cand_prefixed(c, text, buf);
			snprintf(buf, sizeof(buf), "%.*sdtype", (int)(dot + 1 - text), text);
			cand_prefixed(c, text, buf);
			return;
		}
		for (sl = nd->kind == TM_NODE_MODULE ? mslots : pslots; *sl; sl++) {
			snprintf(buf, sizeof(buf), "%s:%s", path, *sl);
			cand_prefixed(c, text, buf);
		}
		return;
	}
	n = tm_nodetab_count(s->nodes);
	for (id = 0; id < n; id++) {
		const struct tm_node *nd = tm_nodetab_get(s->nodes, id);
		const char *next;

		if (!nd || strncmp(nd->address, text, tl))
			continue;
		next = strchr(nd->address + tl, '.');
		cand_add(c, nd->address, next ? (size_t)(next - nd->address) :
					 strlen(nd->address));
	}
}

static void complete_fields(const char *text, struct cands *c)
{
	const char *const *f = tm_tql_field_names();

	for (; f && *f; f++)
		cand_prefixed(c, text, *f);
}

static char **to_matches(struct cands *c, const char *text)
{
	char **m;
	size_t i, common;

	if (!c->n) {
		free(c->v);
		return NULL;
	}
	m = calloc(c->n + 2, sizeof(*m));
	if (!m)
		return NULL;
	/* m[0] is the longest common prefix, as readline expects. */
	common = strlen(c->v[0]);
	for (i = 1; i < c->n; i++) {
		size_t k = 0;

		while (k < common && c->v[i][k] == c->v[0][k])
			k++;
		common = k;
	}
	if (common < strlen(text))
		common = strlen(text);
	m[0] = c->n == 1 ? strdup(c->v[0]) : strndup(c->v[0], common);
	for (i = 0; i < c->n; i++)
		m[i + 1] = c->v[i];
	if (c->n == 1) {
		free(m[1]);
		m[1] = NULL;
	}
	free(c->v);
	return m;
}

static char **complete(const char *text, int start, int end)
{
	struct tm_session *s = cli_session;
	struct cands c = { NULL, 0, 0 };
	const char *line = rl_line_buffer;
	char first[64];
	size_t fl, i;
	const char *p;
	struct ucmd *u;

	(void)end;
	rl_attempted_completion_over = 1;
	p = tm_skip_ws(line);
	if (p - line >= start) {
		/* the command word */
		for (i = 0; i < tm_cmd_count; i++)
			if (tm_cmd_table[i] != &cmd_end_entry)
				cand_prefixed(&c, text, tm_cmd_table[i]->name);
		for (u = s->ucmds; u; u = u->next)
			cand_prefixed(&c, text, u->name);
		rl_completion_append_character = ' ';
		return to_matches(&c, text);
	}
	fl = strcspn(p, " \t");
	if (fl >= sizeof(first))
		return NULL;
	memcpy(first, p, fl);
	first[fl] = 0;
	{
		const struct cmd_entry *ce = tm_cmd_lookup(s, first, 1, &u);
		const char *second = tm_skip_ws(p + fl);
		int second_word = second - line >= start;

		rl_completion_append_character = ' ';
		if (ce == &cmd_info_entry && second_word) {
			for (i = 0; tm_info_sub_name(i); i++)
				cand_prefixed(&c, text, tm_info_sub_name(i));
			return to_matches(&c, text);
		}
		if ((ce == &cmd_set_entry || ce == &cmd_show_entry) && second_word) {
			for (i = 0; tm_setting_name(i); i++) {
				const char *nm = tm_setting_name(i);

				cand_add(&c, nm, strcspn(nm, " "));
				if (strncmp(c.v[c.n - 1], text, strlen(text))) {
					free(c.v[--c.n]);
				}
			}
			if (ce == &cmd_show_entry) {
				cand_prefixed(&c, text, "version");
				cand_prefixed(&c, text, "convenience");
				cand_prefixed(&c, text, "values");
				cand_prefixed(&c, text, "user");
			}
			return to_matches(&c, text);
		}
		if (ce == &cmd_help_entry) {
			for (i = 0; i < tm_cmd_count; i++)
				cand_prefixed(&c, text, tm_cmd_table[i]->name);
			return to_matches(&c, text);
		}
		if (ce == &cmd_file_entry || ce == &cmd_source_entry) {
			rl_attempted_completion_over = 0;   /* file names */
			free(c.v);
			return NULL;
		}
	}
	rl_completion_append_character = '\0';
	if (!strncmp(text, "tensor", strlen(text) < 6 ? strlen(text) : 6) ||
	    !strchr(text, '.')) {
		complete_fields(text, &c);
		cand_prefixed(&c, text, "tensor");
		if (!strncmp("if", text, strlen(text)) && strlen(text))
			cand_add(&c, "if", 2);
	}
	complete_address(s, text, &c);
	return to_matches(&c, text);
}

/* ------------------------------------------------------------- setup */

int tm_cli_init(struct tm_session *s)
{
	const char *home = getenv("HOME");
	const char *hf = getenv("TMDB_HISTFILE");

	cli_session = s;
	rl_readline_name = "tmdb";
	rl_attempted_completion_function = complete;
	rl_completer_word_break_characters = " \t\n\"'`@><=;|&{(,!+-/%~^";
	rl_catch_signals = 0;
	rl_getc_function = cli_getc;
	using_history();
	stifle_history(s->set.history_size > 0 ? s->set.history_size : 256);
	if (hf && *hf)
		cli_histfile = strdup(hf);
	else if (home && *home) {
		cli_histfile = malloc(strlen(home) + 16);
		if (cli_histfile)
			sprintf(cli_histfile, "%s/.tmdb_history", home);
	}
	if (cli_histfile)
		read_history(cli_histfile);
	return 0;
}

void tm_cli_done(struct tm_session *s)
{
	(void)s;
	if (cli_histfile) {
		stifle_history(s->set.history_size > 0 ? s->set.history_size : 256);
		write_history(cli_histfile);
	}
	free(cli_histfile);
	cli_histfile = NULL;
	rl_clear_history();
	cli_session = NULL;
}

char *tm_cli_readline(struct tm_session *s, const char *prompt)
{
	HIST_ENTRY *last;
	char *line;

	fflush(s->out);
	cli_cancelled = 0;
	tm_interrupted = 0;
	line = readline(prompt ? prompt : "");
	if (cli_cancelled) {
		free(line);
		cli_cancelled = 0;
		return strdup("#");     /* nothing to run, nothing to repeat */
	}
	if (!line)
		return NULL;
	if (*tm_skip_ws(line) && strncmp(tm_skip_ws(line), "server ", 7)) {
		last = history_length ? history_get(history_base + history_length - 1) : NULL;
		if (!last || strcmp(last->line, line))
			add_history(line);
	}
	return line;
}
