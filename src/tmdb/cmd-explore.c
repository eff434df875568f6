/*
 * cmd-explore.c -- exploring a model as GDB explores a program's symbols:
 * whatis, ptype, info types, info functions and rbreak.
 *
 * A module class is a type (ptype shows its children and parameters as a
 * class's members), a tensor's type is its dtype and shape ("f32[32,16]"),
 * and the module calls are the functions: what "break" and "rbreak" stop at.
 */
#include "config.h"

#include <inttypes.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "tmdb.h"

/* "f32[64,256]" */
static void tensor_type(const struct tm_tensor *t, char *buf, size_t len)
{
	size_t off;
	unsigned i;

	off = (size_t)snprintf(buf, len, "%s[", tm_dtype_name(t->dtype));
	for (i = 0; i < t->rank && i < TM_MAX_RANK && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%" PRId64, i ? "," : "",
					t->shape[i]);
	if (off < len)
		snprintf(buf + off, len - off, "]");
}

/*
 * The type of a parameter or buffer node: its data's dtype and shape at the
 * playhead (the last recorded before a replay starts); "?" when none is.
 */
static void param_type(struct tm_session *s, const struct tm_node *n, char *buf,
		       size_t len)
{
	struct tm_slot data = { TM_SLOT_DATA, 0 };
	const struct tm_tensor *t = NULL;
	const struct tm_event *ev = NULL;
	struct tm_event own;
	uint32_t reason = 0;
	int have_own = 0;

	snprintf(buf, len, "?");
	if (s->have_cur) {
		t = s->env.lookup(s, n->id, data, 0, &ev, &reason);
	} else if (s->probe && s->probe->ops->latest &&
		   s->probe->ops->latest(s->probe, n->id, TM_EV_PARAM, &data, 0,
					 UINT64_MAX, &own, &reason) == TM_OK) {
		have_own = 1;
		t = tm_event_tensor(&own, data);
	}
	if (t)
		tensor_type(t, buf, len);
	if (have_own)
		tm_event_release(&own);
}

static const char *last_segment(const char *address)
{
	const char *b = strrchr(address, '.');

	return b ? b + 1 : address;
}

/* ptype NODE: the class and its members, children first, then parameters. */
static void ptype_node(struct tm_session *s, const struct tm_node *n)
{
	uint32_t id, count = tm_nodetab_count(s->nodes);
	char ty[128];
	int pass;

	tm_out(s, "type = class %s {\n", n->type ? n->type : "?");
	for (pass = 0; pass < 2; pass++) {
		for (id = 0; id < count; id++) {
			const struct tm_node *c = tm_nodetab_get(s->nodes, id);

			if (!c || c->parent != n->id)
				continue;
			if (pass == 0 && c->kind == TM_NODE_MODULE)
				tm_out(s, "    %s %s;\n", c->type ? c->type : "?",
				       last_segment(c->address));
			else if (pass == 1 && (c->kind == TM_NODE_PARAM ||
					       c->kind == TM_NODE_BUFFER)) {
				param_type(s, c, ty, sizeof(ty));
				tm_out(s, "    %s %s;%s\n", ty, last_segment(c->address),
				       c->kind == TM_NODE_BUFFER ? "  /* buffer */" : "");
			}
		}
	}
	tm_out(s, "}");
	if (n->file && n->line)
		tm_out(s, "  /* forward at %s:%u */", n->file, n->line);
	tm_out(s, "\n");
}

/* A node named on its own (no slot, no field): "model.layers.0.mlp". */
static const struct tm_node *named_node(struct tm_session *s, const char *args)
{
	if (!s->nodes || strchr(args, ':') || strchr(args, ' ') || !strcmp(args, "tensor"))
		return NULL;
	return tm_session_node_text(s, args);
}

static int type_of(struct tm_session *s, const char *args, int expand)
{
	const struct tm_node *n;
	struct tm_val v;
	char ty[128];
	unsigned i;

	if (!*args) {
		tm_error(s, "Argument required (one or more choices).");
		return -1;
	}
	n = named_node(s, args);
	if (n) {
		if (n->kind == TM_NODE_PARAM || n->kind == TM_NODE_BUFFER) {
			param_type(s, n, ty, sizeof(ty));
			tm_out(s, "type = %s\n", ty);
		} else if (expand && n->kind == TM_NODE_MODULE) {
			ptype_node(s, n);
		} else {
			tm_out(s, "type = %s\n", n->type ? n->type : "?");
		}
		return 0;
	}
	memset(&v, 0, sizeof(v));
	if (tm_evaluate(s, args, &v))
		return -1;
	if (v.kind == VAL_TENSOR) {
		tensor_type(&v.t, ty, sizeof(ty));
		if (!expand) {
			tm_out(s, "type = %s\n", ty);
		} else {
			/* the summary's members, as ptype shows a struct's */
			tm_out(s, "type = struct tensor %s {\n    string dtype;\n    shape shape;\n", ty);
			for (i = 0; i < TM_STAT__COUNT; i++)
				if (v.t.have & TM_STAT_BIT(i))
					tm_out(s, "    %s %s;\n",
					       tm_stat_table[i].integer ? "int" : "float",
					       tm_stat_table[i].name);
			tm_out(s, "}\n");
		}
	} else if (v.v.type == TM_TQL_UNKNOWN) {
		tm_out(s, "type = %s\n", v.v.unknown_reason == TM_TQL_VOID ? "void" : "unknown");
	} else {
		tm_out(s, "type = %s\n", tm_val_type_name(&v));
	}
	tm_val_clear(&v);
	return 0;
}

static int cmd_whatis_exec(struct tm_session *s, const char *args, int from_tty)
{
	(void)from_tty;
	return type_of(s, args, 0);
}

const struct cmd_entry cmd_whatis_entry = {
	.name = "whatis", .usage = "whatis EXPR|NODE",
	.help = "Print the type of a node or an expression.\n"
		"A module's type is its class (Linear), a parameter's or tensor's its\n"
		"dtype and shape (f32[64,256]); a value's int, float, bool, string or shape.",
	.exec = cmd_whatis_exec, .klass = "data",
};

static int cmd_ptype_exec(struct tm_session *s, const char *args, int from_tty)
{
	(void)from_tty;
	return type_of(s, args, 1);
}

const struct cmd_entry cmd_ptype_entry = {
	.name = "ptype", .usage = "ptype EXPR|NODE",
	.help = "Print the definition of a node's class or an expression's type.\n"
		"A module prints as a class whose members are its child modules and its\n"
		"parameters with their shapes; a tensor as a struct of its summary.",
	.exec = cmd_ptype_exec, .klass = "data",
};

/* ------------------------------------------------------------- by regex */

static int compile_regex(struct tm_session *s, const char *args, regex_t *re)
{
	char msg[128];
	int rc = regcomp(re, *args ? args : ".", REG_EXTENDED | REG_NOSUB);

	if (rc) {
		regerror(rc, re, msg, sizeof(msg));
		regfree(re);
		tm_error(s, "Invalid regexp: %s", msg);
		return -1;
	}
	return 0;
}

/* Module nodes, with a source file first, by file then address (as GDB
 * sorts its symbols by file and name). */
static const struct tm_node **sorted_modules(struct tm_session *s, size_t *n)
{
	uint32_t id, count = tm_nodetab_count(s->nodes);
	const struct tm_node **v = calloc(count ? count : 1, sizeof(*v));
	size_t i, j;

	*n = 0;
	if (!v)
		return NULL;
	for (id = 0; id < count; id++) {
		const struct tm_node *nd = tm_nodetab_get(s->nodes, id);

		if (nd && nd->kind == TM_NODE_MODULE)
			v[(*n)++] = nd;
	}
	/* insertion sort: a model has hundreds of modules, not millions */
	for (i = 1; i < *n; i++) {
		const struct tm_node *x = v[i];

		for (j = i; j > 0; j--) {
			const struct tm_node *y = v[j - 1];
			int c;

			if (!x->file != !y->file)
				c = x->file ? -1 : 1;
			else
				c = x->file ? strcmp(x->file, y->file) : 0;
			if (!c)
				c = strcmp(x->address, y->address);
			if (c >= 0)
				break;
			v[j] = y;
		}
		v[j] = x;
	}
	return v;
}

static void heading(struct tm_session *s, const char *what, const char *args)
{
	if (*args)
		tm_out(s, "All %s matching regular expression \"%s\":\n", what, args);
	else
		tm_out(s, "All defined %s:\n", what);
}

/* info functions [REGEX]: the module calls, where break and rbreak stop. */
int tm_info_functions(struct tm_session *s, const char *args)
{
	const struct tm_node **v;
	const char *file = NULL;
	size_t n, i;
	int nofile = 0;
	regex_t re;

	if (compile_regex(s, args, &re))
		return -1;
	v = sorted_modules(s, &n);
	heading(s, "functions", args);
	for (i = 0; v && i < n; i++) {
		if (regexec(&re, v[i]->address, 0, NULL, 0))
			continue;
		if (v[i]->file && (!file || strcmp(file, v[i]->file))) {
			file = v[i]->file;
			tm_out(s, "\nFile %s:\n", file);
		} else if (!v[i]->file && !nofile++) {
			tm_out(s, "\nNon-debugging symbols:\n");
		}
		if (v[i]->file && v[i]->line)
			tm_out(s, "%u:\t%s (%s);\n", v[i]->line, v[i]->address,
			       v[i]->type ? v[i]->type : "?");
		else
			tm_out(s, "\t%s (%s);\n", v[i]->address, v[i]->type ? v[i]->type : "?");
	}
	free(v);
	regfree(&re);
	return 0;
}

/* info types [REGEX]: the module classes, each where its forward is. */
int tm_info_types(struct tm_session *s, const char *args)
{
	const struct tm_node **v;
	size_t n, i, j, nt = 0;
	struct { const char *type, *file; unsigned line, count; } *t;
	const char *file = NULL;
	regex_t re;
	int pass;

	if (compile_regex(s, args, &re))
		return -1;
	v = sorted_modules(s, &n);
	t = calloc(n ? n : 1, sizeof(*t));
	for (i = 0; v && t && i < n; i++) {
		const char *ty = v[i]->type ? v[i]->type : "?";

		if (regexec(&re, ty, 0, NULL, 0))
			continue;
		for (j = 0; j < nt && strcmp(t[j].type, ty); j++)
			;
		if (j == nt) {
			t[nt].type = ty;
			nt++;
		}
		t[j].count++;
		if (!t[j].file && v[i]->file && v[i]->line) {
			t[j].file = v[i]->file;
			t[j].line = v[i]->line;
		}
	}
	heading(s, "types", args);
	/* by file, then name; classes with no source last, as GDB's base types */
	for (pass = 0; pass < 2 && t; pass++) {
		int first = 1;

		for (;;) {
			size_t best = SIZE_MAX;

			for (j = 0; j < nt; j++) {
				if (!t[j].count || (pass == 0) != !!t[j].file)
					continue;
				if (best == SIZE_MAX ||
				    (pass == 0 && strcmp(t[j].file, t[best].file) < 0) ||
				    ((pass == 1 || !strcmp(t[j].file, t[best].file)) &&
				     strcmp(t[j].type, t[best].type) < 0))
					best = j;
			}
			if (best == SIZE_MAX)
				break;
			if (pass == 0 && (!file || strcmp(file, t[best].file))) {
				file = t[best].file;
				tm_out(s, "\nFile %s:\n", file);
			} else if (pass == 1 && first) {
				tm_out(s, "\n");
			}
			first = 0;
			if (pass == 0)
				tm_out(s, "%u:\t%s;\t/* %u node%s */\n", t[best].line, t[best].type,
				       t[best].count, t[best].count == 1 ? "" : "s");
			else
				tm_out(s, "\t%s;\t/* %u node%s */\n", t[best].type, t[best].count,
				       t[best].count == 1 ? "" : "s");
			t[best].count = 0;
		}
	}
	free(t);
	free(v);
	regfree(&re);
	return 0;
}

/* rbreak REGEX: a breakpoint on every module whose address matches. */
static int cmd_rbreak_exec(struct tm_session *s, const char *args, int from_tty)
{
	const struct tm_node **v;
	char line[TM_ADDRESS_MAX + 16];
	size_t n, i, hits = 0;
	regex_t re;
	int rc = 0;

	(void)from_tty;
	if (compile_regex(s, args, &re))
		return -1;
	v = sorted_modules(s, &n);
	for (i = 0; v && i < n && !tm_interrupted; i++) {
		if (regexec(&re, v[i]->address, 0, NULL, 0))
			continue;
		snprintf(line, sizeof(line), "break %s", v[i]->address);
		if (tm_execute(s, line, 0)) {
			rc = -1;
			break;
		}
		tm_out(s, "%s (%s);\n", v[i]->address, v[i]->type ? v[i]->type : "?");
		hits++;
	}
	free(v);
	regfree(&re);
	if (!rc && !hits)
		tm_out(s, "No module matches \"%s\".\n", args);
	return rc;
}

const struct cmd_entry cmd_rbreak_entry = {
	.name = "rbreak", .usage = "rbreak REGEX",
	.help = "Set a breakpoint on every module whose address matches REGEX.\n"
		"REGEX is a POSIX extended regular expression searched in the address\n"
		"(\"rbreak mlp\\.fc\", \"rbreak ^model\\.layers\\.[01]$\"); \"info functions\n"
		"REGEX\" lists the same modules first.",
	.exec = cmd_rbreak_exec, .flags = CMD_NEEDS_TRACE,
	.klass = "breakpoints", .arg_required = "regular expression",
};
