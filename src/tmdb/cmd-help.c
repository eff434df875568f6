/*
 * cmd-help.c -- help and apropos, generated from the command table so that
 * a command's documentation lives in one place: its cmd_entry.
 */
#include "config.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tmdb.h"

static const struct {
	const char *name;
	const char *what;
} classes[] = {
	{ "breakpoints", "Making the replay stop at certain events." },
	{ "data", "Examining tensors and values." },
	{ "files", "Specifying and examining files." },
	{ "running", "Moving the playhead through the trace." },
	{ "stack", "Examining the module call stack." },
	{ "status", "Status inquiries." },
	{ "support", "Support facilities: settings, scripting, help." },
	{ "user-defined", "User-defined commands." },
	{ NULL, NULL }
};

/*
 * Length of the first sentence of a help text: up to a '.' followed by
 * white space or the end, except after an abbreviation ("e.g. \"x\"");
 * "0..100" does not end it either.  The whole text when there is none.
 */
static size_t first_sentence(const char *help)
{
	static const char *const abbrev[] = { "e.g", "i.e", "etc", "vs", "cf" };
	const char *p, *w;
	size_t k;

	for (p = help; *p; p++) {
		if (*p != '.' || (p[1] && !isspace((unsigned char)p[1])))
			continue;
		if (p > help && p[-1] == '.')
			continue;
		for (w = p; w > help && !isspace((unsigned char)w[-1]) && w[-1] != '('; w--)
			;
		for (k = 0; k < sizeof(abbrev) / sizeof(abbrev[0]); k++)
			if ((size_t)(p - w) == strlen(abbrev[k]) &&
			    !strncmp(w, abbrev[k], strlen(abbrev[k])))
				break;
		if (k == sizeof(abbrev) / sizeof(abbrev[0]))
			return (size_t)(p + 1 - help);
	}
	return strlen(help);
}

/*
 * "NAME -- the first sentence of its help", its lines joined and rewrapped
 * at 79 columns, continuation lines indented, so no summary stops
 * mid-sentence.
 */
static void summary(struct tm_session *s, const char *name, const char *help)
{
	size_t l = first_sentence(help), i = 0, col;
	char line[128];

	col = (size_t)snprintf(line, sizeof(line), "%s --", name);
	if (col >= sizeof(line))
		col = sizeof(line) - 1;
	while (i < l) {
		size_t w, start;

		while (i < l && isspace((unsigned char)help[i]))
			i++;
		start = i;
		while (i < l && !isspace((unsigned char)help[i]))
			i++;
		w = i - start;
		if (!w)
			break;
		if (col + 1 + w > 79 && col > 4) {
			tm_out(s, "%.*s\n", (int)col, line);
			col = (size_t)snprintf(line, sizeof(line), "   ");
		}
		if (col + 1 + w >= sizeof(line)) {
			/* a word longer than a line goes out on its own */
			tm_out(s, "%.*s %.*s\n", (int)col, line, (int)w, help + start);
			col = (size_t)snprintf(line, sizeof(line), "   ");
			continue;
		}
		line[col++] = ' ';
		memcpy(line + col, help + start, w);
		col += w;
	}
	tm_out(s, "%.*s\n", (int)col, line);
}

static void help_class(struct tm_session *s, const char *klass)
{
	struct ucmd *u;
	size_t i;

	tm_out(s, "\nList of commands:\n\n");
	if (!strcmp(klass, "user-defined")) {
		for (u = s->ucmds; u; u = u->next)
			summary(s, u->name, u->doc ? u->doc : "User-defined.");
	} else {
		for (i = 0; i < tm_cmd_count; i++)
			if (!strcmp(tm_cmd_table[i]->klass ? tm_cmd_table[i]->klass : "",
				    klass))
				summary(s, tm_cmd_table[i]->name, tm_cmd_table[i]->help);
	}
	tm_out(s, "\nType \"help\" followed by command name for full documentation.\n"
	       "Command name abbreviations are allowed if unambiguous.\n");
}

static int cmd_help_exec(struct tm_session *s, const char *args, int from_tty)
{
	const struct cmd_entry *c;
	struct ucmd *u = NULL;
	char word[64];
	size_t i, wl;

	if (!*args) {
		tm_out(s, "List of classes of commands:\n\n");
		for (i = 0; classes[i].name; i++)
			tm_out(s, "%s -- %s\n", classes[i].name, classes[i].what);
		tm_out(s, "\nType \"help\" followed by a class name for a list of commands in that class.\n"
		       "Type \"help all\" for the list of all commands.\n"
		       "Type \"help\" followed by command name for full documentation.\n"
		       "Type \"apropos word\" to search for commands related to \"word\".\n"
		       "Command name abbreviations are allowed if unambiguous.\n");
		return 0;
	}
	if (!strcmp(args, "all")) {
		for (i = 0; i < tm_cmd_count; i++)
			summary(s, tm_cmd_table[i]->name, tm_cmd_table[i]->help);
		for (u = s->ucmds; u; u = u->next)
			summary(s, u->name, u->doc ? u->doc : "User-defined.");
		return 0;
	}
	for (i = 0; classes[i].name; i++) {
		if (!strcmp(args, classes[i].name)) {
			tm_out(s, "%s\n", classes[i].what);
			help_class(s, classes[i].name);
			return 0;
		}
	}
	wl = strcspn(args, " \t");
	if (wl >= sizeof(word)) {
		tm_error(s, "Undefined command: \"%s\".  Try \"help\".", args);
		return -1;
	}
	memcpy(word, args, wl);
	word[wl] = 0;
	c = tm_cmd_lookup(s, word, 0, &u);
	if (u) {
		tm_out(s, "%s\n", u->doc ? u->doc : "User-defined.");
		return 0;
	}
	if (!c)
		return -1;
	tm_out(s, "%s\n", c->help);
	tm_out(s, "Usage: %s\n", c->usage);
	if (c->alias)
		tm_out(s, "Aliases: %s\n", c->alias);
	if (c->help_more) {
		tm_out(s, "\n");
		c->help_more(s);
	}
	return 0;
}

const struct cmd_entry cmd_help_entry = {
	.name = "help", .alias = "h",
	.usage = "help [CLASS | COMMAND | all]",
	.help = "Print the list of commands, or the documentation of one.",
	.exec = cmd_help_exec, .klass = "support",
};

static int cmd_apropos_exec(struct tm_session *s, const char *args, int from_tty)
{
	size_t i;
	struct ucmd *u;

	if (!*args) {
		tm_error(s, "REGEXP string is empty");
		return -1;
	}
	for (i = 0; i < tm_cmd_count; i++) {
		const struct cmd_entry *c = tm_cmd_table[i];

		if (strcasestr(c->name, args) || strcasestr(c->help, args))
			summary(s, c->name, c->help);
	}
	for (u = s->ucmds; u; u = u->next)
		if (strcasestr(u->name, args) || (u->doc && strcasestr(u->doc, args)))
			summary(s, u->name, u->doc ? u->doc : "User-defined.");
	return 0;
}

const struct cmd_entry cmd_apropos_entry = {
	.name = "apropos", .usage = "apropos WORD",
	.help = "Search the commands and their documentation for WORD.",
	.exec = cmd_apropos_exec, .klass = "support",
};
