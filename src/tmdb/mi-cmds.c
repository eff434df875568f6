/*
 * mi-cmds.c -- the GDB/MI commands (doc/mi.md lists them with examples).
 *
 * Every command that changes something runs the code the CLI command
 * runs: breakpoints are created with the typed call the CLI's break uses
 * (tm_bp_create, GDB's create_breakpoint); movement, evaluation and loading
 * a trace run the CLI command itself (mi_cli).  What MI adds here is
 * argument translation and result records built from the session's
 * structures.
 * GDB settings that mean nothing to a trace (mi-async, width, print pretty)
 * are accepted and remembered, so that front ends' start-up scripts pass.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tmdb.h"
#include "live.h"
#include "mi.h"

struct mi_cmd {
	const char *name;
	int (*fn)(struct mi *m, struct mi_parse *c);
};

/* ------------------------------------------------------------- helpers */

/* argv[from..] joined with spaces, malloc'd ("" when none). */
static char *join(struct mi_parse *c, size_t from)
{
	struct mi_buf b = { 0 };
	size_t i;

	mi_buf_puts(&b, "");
	for (i = from; i < c->argc; i++) {
		if (i > from)
			mi_buf_puts(&b, " ");
		mi_buf_puts(&b, c->argv[i]);
	}
	if (b.oom) {
		mi_buf_free(&b);
		return NULL;
	}
	return b.p;
}

static int need_args(struct mi *m, struct mi_parse *c, size_t n, const char *usage)
{
	if (c->argc >= n)
		return 0;
	return mi_error(m, "-%s: Usage: %s", c->op, usage);
}

/* --no-values/--all-values/--simple-values or 0/1/2; -1 when not one. */
static int print_values(const char *a)
{
	if (!strcmp(a, "0") || !strcmp(a, "--no-values"))
		return 0;
	if (!strcmp(a, "1") || !strcmp(a, "--all-values"))
		return 1;
	if (!strcmp(a, "2") || !strcmp(a, "--simple-values"))
		return 2;
	return -1;
}

static int need_playhead(struct mi *m)
{
	if (!m->s->probe)
		return mi_error(m, "No trace loaded.  Use the \"file\" command.");
	if (!m->s->have_cur)
		return mi_error(m, "No stack.");
	return 0;
}

/* Value text as print shows it, without print's history entry. */
static void val_text(const struct tm_val *v, char *buf, size_t len)
{
	tm_val_format(v, buf, len);
}

/* The fields of a tensor value, as children and variables: dtype, shape
 * and the statistics present.  Returns how many; names[k] and texts. */
static size_t tensor_fields(const struct tm_tensor *t, const char **names,
			    char texts[][64], const char **types, size_t max)
{
	struct tm_tql_value v;
	size_t n = 0;
	int i;

	if (n < max) {
		names[n] = "dtype";
		types[n] = "string";
		snprintf(texts[n++], 64, "%s", tm_dtype_name(t->dtype));
	}
	if (n < max) {
		memset(&v, 0, sizeof(v));
		v.type = TM_TQL_SHAPE;
		v.v.shape.dims = t->shape;
		v.v.shape.rank = t->rank;
		names[n] = "shape";
		types[n] = "shape";
		tm_tql_format(&v, texts[n++], 64);
	}
	for (i = 0; i < TM_STAT__COUNT && n < max; i++) {
		if (!(t->have & TM_STAT_BIT(i)))
			continue;
		memset(&v, 0, sizeof(v));
		if (tm_stat_table[i].integer) {
			v.type = TM_TQL_INT;
			v.v.i = (int64_t)t->stat[i];
			types[n] = "int";
		} else {
			v.type = TM_TQL_NUM;
			v.v.d = t->stat[i];
			types[n] = "float";
		}
		names[n] = tm_stat_table[i].name;
		tm_tql_format(&v, texts[n++], 64);
	}
	return n;
}

#define MAX_FIELDS (TM_STAT__COUNT + 2)

/* ------------------------------------------------------------- general */

static int mi_gdb_exit(struct mi *m, struct mi_parse *c)
{
	(void)c;
	/* GDB kills the program it started; the records come before ^exit */
	if (m->s->live && m->s->live->pid)
		tm_inferior_kill(m->s, 0);
	m->s->quit = 1;
	m->s->exit_code = 0;
	m->klass = "exit";
	return 0;
}

/* Not GDB, and says so; a "GDB/MI" line for adapters that look for one. */
static int mi_gdb_version(struct mi *m, struct mi_parse *c)
{
	(void)c;
	tm_out(m->s, "tmdb (tensormorph) %s\n", PACKAGE_VERSION);
	tm_out(m->s, "GDB/MI %d machine interface of tmdb, the debugger for "
	       "neural networks (not GDB).\n", m->version < 3 ? 3 : m->version);
	return 0;
}

static int mi_list_features(struct mi *m, struct mi_parse *c)
{
	static const char *const f[] = {
		"thread-info", "breakpoint-notifications",
		"undefined-command-error-code", "info-gdb-mi-command",
		"exec-run-start-option", "tmdb-graph", "tmdb-compare", NULL
	};
	size_t i;

	(void)c;
	mi_open(&m->res, "features", '[');
	for (i = 0; f[i]; i++)
		mi_val(&m->res, f[i]);
	mi_close(&m->res, ']');
	return 0;
}

static int mi_list_target_features(struct mi *m, struct mi_parse *c)
{
	struct tm_probe_info pi;

	(void)c;
	mi_open(&m->res, "features", '[');
	if (m->s->probe) {
		memset(&pi, 0, sizeof(pi));
		m->s->probe->ops->describe(m->s->probe, &pi);
		if (pi.can_reverse)
			mi_val(&m->res, "reverse");
	}
	mi_close(&m->res, ']');
	return 0;
}

static int mi_info_gdb_mi_command(struct mi *m, struct mi_parse *c)
{
	const char *name;

	if (need_args(m, c, 1, "-info-gdb-mi-command NAME"))
		return -1;
	name = c->argv[0][0] == '-' ? c->argv[0] + 1 : c->argv[0];
	mi_open(&m->res, "command", '{');
	mi_kv(&m->res, "exists", mi_command_exists(name) ? "true" : "false");
	mi_close(&m->res, '}');
	return 0;
}

/* Is word the name of one of tmdb's own settings? */
static int tmdb_setting(const char *word)
{
	size_t i;
	const char *n;

	for (i = 0; (n = tm_setting_name(i)); i++)
		if (!strcmp(n, word))
			return 1;
	/* the live settings (cmd-live.c) */
	return !strcmp(word, "args") || !strcmp(word, "run-ahead") ||
	       !strcmp(word, "probe-level") || !strcmp(word, "non-stop") ||
	       !strcmp(word, "probe-ops");
}

static struct mi_setting *setting_find(struct mi *m, const char *name)
{
	struct mi_setting *st;

	for (st = m->sets; st; st = st->next)
		if (!strcmp(st->name, name))
			return st;
	return NULL;
}

/*
 * -gdb-set: tmdb's own settings and $variables go to "set"; anything else
 * is a GDB setting (mi-async, width, print pretty on, ...): remembered for
 * -gdb-show and otherwise ignored, since it means nothing to a trace.
 */
static int mi_gdb_set(struct mi *m, struct mi_parse *c)
{
	struct mi_setting *st;
	char *all, *name, *val;
	int rc;

	if (need_args(m, c, 1, "-gdb-set NAME [VALUE]"))
		return -1;
	all = join(c, 0);
	if (!all)
		return mi_error(m, "Out of memory.");
	if (c->argv[0][0] == '$' || !strcmp(c->argv[0], "var") ||
	    !strcmp(c->argv[0], "variable") || tmdb_setting(c->argv[0])) {
		rc = mi_cli(m, NULL, "set %s", all);
		free(all);
		return rc;
	}
	if (c->argc == 1) {
		name = all;
		val = "on";
	} else {
		char *sp = strrchr(all, ' ');

		*sp = 0;
		name = all;
		val = sp + 1;
	}
	st = setting_find(m, name);
	if (!st) {
		st = calloc(1, sizeof(*st));
		if (!st || !(st->name = strdup(name))) {
			free(st);
			free(all);
			return mi_error(m, "Out of memory.");
		}
		st->next = m->sets;
		m->sets = st;
	}
	free(st->value);
	st->value = strdup(val);
	free(all);
	return 0;
}

static int mi_gdb_show(struct mi *m, struct mi_parse *c)
{
	static const char *const defaults[][2] = {
		{ "mi-async", "off" }, { "width", "unlimited" },
		{ "height", "unlimited" }, { "language", "auto" },
		{ "charset", "auto" }, { "print pretty", "off" },
		{ "breakpoint pending", "auto" }, { "disassembly-flavor", "att" },
		{ "host-charset", "UTF-8" }, { "target-charset", "UTF-8" },
		{ "target-wide-charset", "UTF-32" },
		{ NULL, NULL }
	};
	struct mi_setting *st;
	struct mi_buf out = { 0 };
	char *name;
	size_t i, n;
	int rc;

	if (need_args(m, c, 1, "-gdb-show NAME"))
		return -1;
	name = join(c, 0);
	if (!name)
		return mi_error(m, "Out of memory.");
	if (!strcmp(name, "version")) {
		mi_kvf(&m->res, "value", "tmdb (tensormorph) %s", PACKAGE_VERSION);
		free(name);
		return 0;
	}
	if (!strcmp(name, "non-stop")) {
		/* on|off, as front ends parse it (tmdb's own sentence is the CLI's) */
		mi_kv(&m->res, "value", m->s->live && m->s->live->non_stop ? "on" : "off");
		free(name);
		return 0;
	}
	if (!strcmp(name, "prompt")) {
		/* the prompt itself (Emacs prints it), not show's sentence */
		mi_kv(&m->res, "value", m->s->set.prompt ? m->s->set.prompt : "(tmdb) ");
		free(name);
		return 0;
	}
	if (!strcmp(name, "args")) {
		/* the value alone, as GDB's -gdb-show args */
		mi_kv(&m->res, "value", m->s->live && m->s->live->args ?
		      m->s->live->args : "");
		free(name);
		return 0;
	}
	if ((st = setting_find(m, name))) {
		mi_kv(&m->res, "value", st->value);
		free(name);
		return 0;
	}
	if (tmdb_setting(c->argv[0])) {
		rc = mi_cli(m, &out, "show %s", name);
		if (rc == 0) {
			n = out.len;
			while (n && (out.p[n - 1] == '\n' || out.p[n - 1] == ' '))
				n--;
			mi_buf_add(&m->res, "value=", 6);
			mi_buf_cstr(&m->res, out.p ? out.p : "", n);
		}
		mi_buf_free(&out);
		free(name);
		return rc;
	}
	for (i = 0; defaults[i][0]; i++) {
		if (!strcmp(defaults[i][0], name)) {
			mi_kv(&m->res, "value", defaults[i][1]);
			free(name);
			return 0;
		}
	}
	mi_error(m, "Undefined show command: \"%s\".  Try \"help show\".", name);
	free(name);
	return -1;
}

/* -interpreter-exec console "CMD"...: the CLI, output as ~ records. */
static int mi_interpreter_exec(struct mi *m, struct mi_parse *c)
{
	size_t i;
	int rc = 0;

	if (need_args(m, c, 2, "-interpreter-exec console COMMAND"))
		return -1;
	if (strcmp(c->argv[0], "console"))
		return mi_error(m, "-interpreter-exec: interpreter \"%s\" is not "
				"supported (only \"console\").", c->argv[0]);
	for (i = 1; i < c->argc && rc == 0 && !m->s->quit; i++)
		rc = mi_cli(m, NULL, "%s", c->argv[i]);
	if (m->s->quit)
		m->klass = "exit";
	return rc;
}

static int mi_file_exec_and_symbols(struct mi *m, struct mi_parse *c)
{
	char *f;
	int rc;

	if (need_args(m, c, 1, "-file-exec-and-symbols FILE"))
		return -1;
	f = join(c, 0);
	if (!f)
		return mi_error(m, "Out of memory.");
	/* a trace, or a program for -exec-run (as the CLI's file) */
	rc = mi_cli(m, NULL, "file %s", f);
	free(f);
	return rc;
}

/* -exec-arguments ARGS: "set args ARGS", the text as written (shell words:
 * the program runs through /bin/sh). */
static int mi_exec_arguments(struct mi *m, struct mi_parse *c)
{
	int rc;

	free(m->exec_args);
	/* as written, quotes and redirections included (GDB's way) */
	m->exec_args = m->raw ? strdup(m->raw) : join(c, 0);
	if (!m->exec_args)
		return mi_error(m, "Out of memory.");
	rc = mi_cli(m, NULL, "set args %s", m->exec_args);
	return rc;
}

/* -inferior-tty-set [TTY]: the program's stdin, stdout and stderr (a
 * terminal, or any file: IDEs give a pty of their own). */
static int mi_inferior_tty_set(struct mi *m, struct mi_parse *c)
{
	struct tm_live *lv = tm_live_get(m->s);
	char *t = NULL;

	if (!lv)
		return mi_error(m, "Out of memory.");
	if (c->argc && !(t = strdup(c->argv[0])))
		return mi_error(m, "Out of memory.");
	free(lv->tty);
	lv->tty = t;
	return 0;
}

static int mi_inferior_tty_show(struct mi *m, struct mi_parse *c)
{
	(void)c;
	if (m->s->live && m->s->live->tty)
		mi_kv(&m->res, "inferior_tty_terminal", m->s->live->tty);
	return 0;
}

/* -target-attach PID|SOCKET: the CLI's attach; the paused model is a stop. */
static int mi_target_attach(struct mi *m, struct mi_parse *c)
{
	char *t;
	int rc;

	if (need_args(m, c, 1, "-target-attach PID|SOCKET"))
		return -1;
	t = join(c, 0);
	if (!t)
		return mi_error(m, "Out of memory.");
	rc = mi_cli(m, NULL, "attach %s", t);
	free(t);
	if (rc == 0)
		mi_attached(m);
	return rc;
}

static int mi_target_detach(struct mi *m, struct mi_parse *c)
{
	(void)c;
	return mi_cli(m, NULL, "detach");
}

/* -exec-abort (documented, not in GDB): kill the program. */
static int mi_exec_abort(struct mi *m, struct mi_parse *c)
{
	(void)c;
	return mi_cli(m, NULL, "kill");
}

static int mi_noop(struct mi *m, struct mi_parse *c)
{
	(void)m;
	(void)c;
	return 0;
}

/* -target-select native: tmdb's only target (cdt-gdb-adapter sends it). */
static int mi_target_select(struct mi *m, struct mi_parse *c)
{
	if (need_args(m, c, 1, "-target-select native"))
		return -1;
	if (strcmp(c->argv[0], "native"))
		return mi_error(m, "tmdb has no \"%s\" target: it debugs a trace or "
				"a program it runs or attaches to (native).", c->argv[0]);
	m->klass = "connected";
	return 0;
}

/* A trace has no registers; front ends ask anyway. */
static int mi_data_list_register_values(struct mi *m, struct mi_parse *c)
{
	(void)c;
	mi_open(&m->res, "register-values", '[');
	mi_close(&m->res, ']');
	return 0;
}

/* A trace has no registers; front ends ask anyway. */
static int mi_data_list_register_names(struct mi *m, struct mi_parse *c)
{
	(void)c;
	mi_open(&m->res, "register-names", '[');
	mi_close(&m->res, ']');
	return 0;
}

static int mi_environment_cd(struct mi *m, struct mi_parse *c)
{
	if (need_args(m, c, 1, "-environment-cd DIR"))
		return -1;
	if (chdir(c->argv[0]))
		return mi_error(m, "%s: %s.", c->argv[0], strerror(errno));
	return 0;
}

static int mi_environment_pwd(struct mi *m, struct mi_parse *c)
{
	char buf[PATH_MAX];

	(void)c;
	if (!getcwd(buf, sizeof(buf)))
		return mi_error(m, "Cannot get the working directory.");
	mi_kv(&m->res, "cwd", buf);
	return 0;
}

/* ------------------------------------------------------------- compare */

/*
 * -tmdb-compare [FILE [-map RUN=REF]... [-by step|request] | off]: the
 * CLI's compare, then what is loaded: reference={file,events,ranks,
 * aligned-by,map=[...]}, nothing when none is.
 */
static int mi_tmdb_compare(struct mi *m, struct mi_parse *c)
{
	struct tm_compare_state cs;
	struct mi_buf b = { 0 };
	size_t i;
	int rc = 0;

	if (c->argc) {
		/* each argument one word for the CLI's splitting */
		mi_buf_puts(&b, "compare");
		for (i = 0; i < c->argc; i++) {
			mi_buf_puts(&b, strchr(c->argv[i], '"') ? " '" : " \"");
			mi_buf_puts(&b, c->argv[i]);
			mi_buf_puts(&b, strchr(c->argv[i], '"') ? "'" : "\"");
		}
		if (b.oom) {
			mi_buf_free(&b);
			return mi_error(m, "Out of memory.");
		}
		rc = mi_cli(m, NULL, "%s", b.p);
		mi_buf_free(&b);
		if (rc)
			return -1;
	}
	if (!tm_compare_loaded(m->s, &cs))
		return 0;
	mi_open(&m->res, "reference", '{');
	mi_kv(&m->res, "file", cs.path);
	mi_kvf(&m->res, "events", "%" PRIu64, cs.events);
	mi_kvf(&m->res, "ranks", "%d", cs.manifest ? cs.ranks : 1);
	mi_kv(&m->res, "aligned-by", cs.by_request ? "request" : "step");
	mi_open(&m->res, "map", '[');
	for (i = 0; i < tm_cmp_map_count(cs.map); i++)
		mi_val(&m->res, tm_cmp_map_rule(cs.map, i));
	mi_close(&m->res, ']');
	mi_close(&m->res, '}');
	return 0;
}

/* ------------------------------------------------------------- breakpoints */

/* LOC as an IDE writes it into what break understands. */
static int resolve_location(struct mi *m, const char *loc, char *out, size_t len)
{
	if (loc[0] == '*')
		return mi_error(m, "tmdb has no code addresses; break on a graph "
				"node address (doc/mi.md).");
	/* FILE:LINE stays: tm_bp_create resolves it, or makes it pending */
	if (loc[0] && strspn(loc, "0123456789") == strlen(loc)) {
		if (!m->s->list_file)
			return mi_error(m, "No default source file now.");
		snprintf(out, len, "%s:%s", m->s->list_file, loc);
		return 0;
	}
	if ((size_t)snprintf(out, len, "%s", loc) >= len)
		return mi_error(m, "Location too long.");
	return 0;
}

/*
 * -break-insert [-t] [-h] [-f] [-d] [-c COND] [-i N] [-p THREAD]
 *               [--function F | --source FILE --line N] [LOCATION]
 */
static int mi_break_insert(struct mi *m, struct mi_parse *c)
{
	struct tm_session *s = m->s;
	const char *cond = NULL, *ignore = NULL, *func = NULL, *src = NULL,
		*line = NULL, *loc = NULL;
	char where[TM_ADDRESS_MAX + PATH_MAX + 32], spec[TM_ADDRESS_MAX + PATH_MAX + 32];
	struct tm_bp_spec bs;
	int temp = 0, disabled = 0, rc;
	size_t i;
	struct bp *b = NULL;

	for (i = 0; i < c->argc; i++) {
		const char *a = c->argv[i];

		if (!strcmp(a, "--")) {
			i++;
			break;
		}
		if (!strcmp(a, "-t"))
			temp = 1;
		else if (!strcmp(a, "-d"))
			disabled = 1;
		else if (!strcmp(a, "-h") || !strcmp(a, "-f") || !strcmp(a, "-g") ||
			 !strcmp(a, "--qualified") || !strcmp(a, "--force-condition"))
			continue;
		else if (!strcmp(a, "-a"))
			return mi_error(m, "Tracepoints are not supported.");
		else if ((!strcmp(a, "-c") || !strcmp(a, "-i") || !strcmp(a, "-p") ||
			  !strcmp(a, "--function") || !strcmp(a, "--source") ||
			  !strcmp(a, "--line") || !strcmp(a, "--label")) &&
			 i + 1 < c->argc) {
			const char *v = c->argv[++i];

			if (a[1] == 'c')
				cond = v;
			else if (a[1] == 'i')
				ignore = v;
			else if (!strcmp(a, "--function"))
				func = v;
			else if (!strcmp(a, "--source"))
				src = v;
			else if (!strcmp(a, "--line"))
				line = v;
			else if (!strcmp(a, "--label"))
				return mi_error(m, "Labels are not supported.");
		} else if (a[0] == '-' && a[1]) {
			return mi_error(m, "-break-insert: Unknown option \"%s\".", a);
		} else {
			break;
		}
	}
	if (i < c->argc)
		loc = c->argv[i];
	if (i + 1 < c->argc)
		return mi_error(m, "-break-insert: Garbage following <location>: "
				"\"%s\".", c->argv[i + 1]);
	if (func) {
		loc = func;
	} else if (src && line) {
		snprintf(where, sizeof(where), "%s:%s", src, line);
		loc = where;
	} else if (line && !loc) {
		loc = line;
	}
	spec[0] = 0;
	if (loc && resolve_location(m, loc, spec, sizeof(spec)))
		return -1;
	tm_bp_spec_init(&bs);
	bs.location = spec;
	bs.cond = cond;
	bs.disp = temp ? BP_DEL : BP_KEEP;
	bs.enabled = !disabled;
	if (ignore && tm_parse_uint(ignore, &bs.ignore))
		return mi_error(m, "Second argument (specified ignore-count) is missing.");
	m->quiet_bp = 1;
	rc = tm_bp_create(s, &bs, &b);
	m->quiet_bp = 0;
	if (rc)
		return -1;
	if (!b)
		return mi_error(m, "No breakpoint was created.");
	mi_bkpt(m, &m->res, "bkpt", b);
	return 0;
}

/* -catch-throw [-t] [-r TYPE]: GDB's C++ throw catchpoint is catch
 * exception (a forward that raised); the other catchpoints go through
 * -interpreter-exec console. */
static int mi_catch_throw(struct mi *m, struct mi_parse *c)
{
	char args[96];
	const char *type = NULL;
	int temp = 0, rc;
	size_t i;
	struct bp *b = NULL;

	for (i = 0; i < c->argc; i++) {
		if (!strcmp(c->argv[i], "-t"))
			temp = 1;
		else if (!strcmp(c->argv[i], "-r") && i + 1 < c->argc)
			type = c->argv[++i];
		else
			return mi_error(m, "-catch-throw: Unknown option \"%s\".", c->argv[i]);
	}
	if (type && strlen(type) > 63)
		return mi_error(m, "-catch-throw: type name too long");
	snprintf(args, sizeof(args), "exception%s%s", type ? " " : "", type ? type : "");
	m->quiet_bp = 1;
	rc = tm_catch(m->s, args, temp ? BP_DEL : BP_KEEP, 0, &b);
	m->quiet_bp = 0;
	if (rc)
		return -1;
	if (!b)
		return mi_error(m, "No catchpoint was created.");
	mi_bkpt(m, &m->res, "bkpt", b);
	return 0;
}

/* -break-watch [-a|-r] EXPR */
static int mi_break_watch(struct mi *m, struct mi_parse *c)
{
	struct tm_session *s = m->s;
	struct mi_buf sink = { 0 };
	int before = s->next_bpnum, rc;
	struct bp *b;
	char *e;

	if (c->argc && (!strcmp(c->argv[0], "-a") || !strcmp(c->argv[0], "-r")))
		return mi_error(m, "Read and access watchpoints are not supported: "
				"a trace records values, not reads.");
	if (need_args(m, c, 1, "-break-watch EXPR"))
		return -1;
	e = join(c, 0);
	if (!e)
		return mi_error(m, "Out of memory.");
	m->quiet_bp = 1;
	rc = mi_cli(m, &sink, "watch %s", e);
	m->quiet_bp = 0;
	free(e);
	mi_buf_free(&sink);
	b = rc == 0 && s->next_bpnum > before ? tm_bp_find(s, s->next_bpnum - 1) : NULL;
	if (rc || !b)
		return -1;
	mi_open(&m->res, "wpt", '{');
	mi_kvf(&m->res, "number", "%d", b->num);
	mi_kv(&m->res, "exp", b->where);
	mi_close(&m->res, '}');
	return 0;
}

/* -break-delete/-enable/-disable N...: the CLI's, without notifications. */
static int bp_numbers(struct mi *m, struct mi_parse *c, const char *cli)
{
	struct mi_buf sink = { 0 };
	char *nums;
	size_t i;
	int rc;

	if (need_args(m, c, 1, "N..."))
		return -1;
	for (i = 0; i < c->argc; i++)
		if (!c->argv[i][0] || strspn(c->argv[i], "0123456789-") != strlen(c->argv[i]))
			return mi_error(m, "Bad breakpoint number '%s'", c->argv[i]);
	/* the CLI only says so and goes on, as GDB's; a front end wants the
	 * error (and nothing done) */
	for (i = 0; i < c->argc; i++)
		if (!strchr(c->argv[i], '-') && !tm_bp_find(m->s, atoi(c->argv[i])))
			return mi_error(m, "No breakpoint number %s.", c->argv[i]);
	nums = join(c, 0);
	if (!nums)
		return mi_error(m, "Out of memory.");
	m->quiet_bp = 1;
	rc = mi_cli(m, &sink, "%s %s", cli, nums);
	m->quiet_bp = 0;
	free(nums);
	mi_buf_free(&sink);
	return rc;
}

static int mi_break_delete(struct mi *m, struct mi_parse *c)
{
	return bp_numbers(m, c, "delete");
}

static int mi_break_enable(struct mi *m, struct mi_parse *c)
{
	return bp_numbers(m, c, "enable");
}

static int mi_break_disable(struct mi *m, struct mi_parse *c)
{
	return bp_numbers(m, c, "disable");
}

/* -break-condition [--force] N [COND] */
static int mi_break_condition(struct mi *m, struct mi_parse *c)
{
	struct mi_buf sink = { 0 };
	size_t from = c->argc && !strcmp(c->argv[0], "--force") ? 1 : 0;
	char *cond;
	int rc;

	if (need_args(m, c, from + 1, "-break-condition N [COND]"))
		return -1;
	cond = join(c, from + 1);
	if (!cond)
		return mi_error(m, "Out of memory.");
	m->quiet_bp = 1;
	rc = mi_cli(m, &sink, "condition %s %s", c->argv[from], cond);
	m->quiet_bp = 0;
	free(cond);
	mi_buf_free(&sink);
	return rc;
}

static int mi_break_after(struct mi *m, struct mi_parse *c)
{
	struct mi_buf sink = { 0 };
	int rc;

	if (need_args(m, c, 2, "-break-after N COUNT"))
		return -1;
	m->quiet_bp = 1;
	rc = mi_cli(m, &sink, "ignore %s %s", c->argv[0], c->argv[1]);
	m->quiet_bp = 0;
	mi_buf_free(&sink);
	return rc;
}

/* -break-commands N [COMMAND...]: replaces the breakpoint's commands. */
static int mi_break_commands(struct mi *m, struct mi_parse *c)
{
	struct bp *b;
	char **lines;
	size_t i;

	if (need_args(m, c, 1, "-break-commands N [COMMAND...]"))
		return -1;
	b = tm_bp_find(m->s, atoi(c->argv[0]));
	if (!b)
		return mi_error(m, "No breakpoint number %s.", c->argv[0]);
	lines = calloc(c->argc, sizeof(*lines));
	if (!lines)
		return mi_error(m, "Out of memory.");
	for (i = 1; i < c->argc; i++) {
		lines[i - 1] = strdup(c->argv[i]);
		if (!lines[i - 1]) {
			tm_lines_free(lines, i - 1);
			return mi_error(m, "Out of memory.");
		}
	}
	tm_lines_free(b->cmds, b->ncmds);
	b->cmds = lines;
	b->ncmds = c->argc - 1;
	return 0;
}

/* BreakpointTable={nr_rows,nr_cols,hdr=[...],body=[bkpt={...}...]} */
static void bp_table(struct mi *m, int only)
{
	static const char *const hdr[6][4] = {
		{ "7", "-1", "number", "Num" }, { "14", "-1", "type", "Type" },
		{ "4", "-1", "disp", "Disp" }, { "3", "-1", "enabled", "Enb" },
		{ "18", "-1", "addr", "Address" }, { "40", "2", "what", "What" },
	};
	struct mi_buf *r = &m->res;
	struct bp *b;
	int rows = 0, i;

	for (b = m->s->bps; b; b = b->next)
		rows += !only || b->num == only;
	mi_open(r, "BreakpointTable", '{');
	mi_kvf(r, "nr_rows", "%d", rows);
	mi_kv(r, "nr_cols", "6");
	mi_open(r, "hdr", '[');
	for (i = 0; i < 6; i++) {
		mi_open(r, NULL, '{');
		mi_kv(r, "width", hdr[i][0]);
		mi_kv(r, "alignment", hdr[i][1]);
		mi_kv(r, "col_name", hdr[i][2]);
		mi_kv(r, "colhdr", hdr[i][3]);
		mi_close(r, '}');
	}
	mi_close(r, ']');
	mi_open(r, "body", '[');
	for (b = m->s->bps; b; b = b->next)
		if (!only || b->num == only)
			mi_bkpt(m, r, "bkpt", b);
	mi_close(r, ']');
	mi_close(r, '}');
}

static int mi_break_list(struct mi *m, struct mi_parse *c)
{
	(void)c;
	bp_table(m, 0);
	return 0;
}

static int mi_break_info(struct mi *m, struct mi_parse *c)
{
	if (need_args(m, c, 1, "-break-info N"))
		return -1;
	if (!tm_bp_find(m->s, atoi(c->argv[0])))
		return mi_error(m, "No breakpoint number %s.", c->argv[0]);
	bp_table(m, atoi(c->argv[0]));
	return 0;
}

/* ------------------------------------------------------------- running */

/* Strips --reverse/--all/--thread-group X; returns whether --reverse was
 * there and leaves the first other argument's index in *first. */
static int exec_opts(struct mi_parse *c, size_t *first)
{
	size_t i;
	int rev = 0;

	for (i = 0; i < c->argc; i++) {
		if (!strcmp(c->argv[i], "--reverse"))
			rev = 1;
		else if (!strcmp(c->argv[i], "--all") || !strcmp(c->argv[i], "--start"))
			continue;
		else if (!strcmp(c->argv[i], "--thread-group") && i + 1 < c->argc)
			i++;
		else
			break;
	}
	*first = i;
	return rev;
}

static int exec_cli(struct mi *m, struct mi_parse *c, const char *fwd,
		    const char *bwd)
{
	size_t first;
	int rev = exec_opts(c, &first);
	char *rest;
	int rc;

	if (rev && !bwd)
		return mi_error(m, "-%s: --reverse is not supported.", c->op);
	if (!rev && mi_program_gone(m))
		return mi_error(m, "The program is not being run.");
	rest = join(c, first);
	if (!rest)
		return mi_error(m, "Out of memory.");
	rc = mi_cli(m, NULL, "%s%s%s", rev ? bwd : fwd, *rest ? " " : "", rest);
	free(rest);
	return rc;
}

/* -exec-run [--start]: from the beginning of the trace to the first stop
 * (with --start: to the first event). */
static int mi_exec_run(struct mi *m, struct mi_parse *c)
{
	size_t i;
	int live = m->s->live && m->s->live->prog;

	/* A replay's run is a program starting too: front ends (cdt) wait
	 * for its thread before they take the first stop.  As GDB, before
	 * ^running. */
	if (!live && m->s->probe && !m->replay_started) {
		long pid = (long)tm_probe_pid(m->s->probe);

		m->replay_started = 1;
		fprintf(m->fp, "=thread-group-started,id=\"i1\",pid=\"%ld\"\n"
		       "=thread-created,id=\"1\",group-id=\"i1\"\n", pid ? pid : 1);
	}
	for (i = 0; i < c->argc; i++)
		if (!strcmp(c->argv[i], "--start"))
			return live ? mi_cli(m, NULL, "run") : mi_cli(m, NULL, "goto start");
	return mi_cli(m, NULL, "run");
}

static int mi_exec_continue(struct mi *m, struct mi_parse *c)
{
	return exec_cli(m, c, "continue", "reverse-continue");
}

static int mi_exec_next(struct mi *m, struct mi_parse *c)
{
	return exec_cli(m, c, "next", "reverse-next");
}

static int mi_exec_step(struct mi *m, struct mi_parse *c)
{
	return exec_cli(m, c, "step", "reverse-step");
}

/* GDB's instruction steps: op by op (cmd-ops.c) */
static int mi_exec_stepi(struct mi *m, struct mi_parse *c)
{
	return exec_cli(m, c, "stepi", "reverse-stepi");
}

static int mi_exec_nexti(struct mi *m, struct mi_parse *c)
{
	return exec_cli(m, c, "nexti", "reverse-nexti");
}

/* As GDB's: the finish command without its text (GDB runs it with
 * from_tty 0); the value returned is in *stopped. */
static int mi_exec_finish(struct mi *m, struct mi_parse *c)
{
	int rc;

	m->s->finish_mi = 1;
	rc = exec_cli(m, c, "finish", "reverse-finish");
	m->s->finish_mi = 0;
	return rc;
}

static int mi_exec_until(struct mi *m, struct mi_parse *c)
{
	return exec_cli(m, c, "until", NULL);
}

/* Replay runs within the command: by the time -exec-interrupt is read
 * nothing runs any more (a long scan is stopped by SIGINT).  One read
 * while a live model runs is taken by mi.c's input thread instead. */
static int mi_exec_interrupt(struct mi *m, struct mi_parse *c)
{
	(void)c;
	if (!m->s->probe || mi_program_gone(m))
		return mi_error(m, "The program is not being run.");
	return 0;
}

/* ------------------------------------------------------------- data, stack */

static int mi_data_evaluate_expression(struct mi *m, struct mi_parse *c)
{
	struct tm_val v;
	char buf[4096];
	char *e;
	int rc;

	if (need_args(m, c, 1, "-data-evaluate-expression EXPR"))
		return -1;
	e = join(c, 0);
	if (!e)
		return mi_error(m, "Out of memory.");
	memset(&v, 0, sizeof(v));
	rc = tm_evaluate(m->s, e, &v);
	free(e);
	if (rc)
		return -1;
	val_text(&v, buf, sizeof(buf));
	tm_val_clear(&v);
	mi_kv(&m->res, "value", buf);
	return 0;
}

/* [LOW HIGH] after skipped options */
static void frame_range(struct mi_parse *c, size_t from, size_t *lo, size_t *hi)
{
	*lo = 0;
	*hi = SIZE_MAX;
	while (from < c->argc && c->argv[from][0] == '-')
		from++;
	if (from + 1 < c->argc) {
		*lo = strtoul(c->argv[from], NULL, 10);
		*hi = strtoul(c->argv[from + 1], NULL, 10);
	}
}

static int mi_stack_list_frames(struct mi *m, struct mi_parse *c)
{
	size_t lo, hi, k;

	if (need_playhead(m))
		return -1;
	frame_range(c, 0, &lo, &hi);
	mi_open(&m->res, "stack", '[');
	for (k = lo; k <= hi; k++)
		if (mi_frame(m, &m->res, "frame", k))
			break;
	mi_close(&m->res, ']');
	return 0;
}

static int mi_stack_info_depth(struct mi *m, struct mi_parse *c)
{
	size_t n;

	(void)c;
	if (need_playhead(m))
		return -1;
	n = tm_frames_compute(m->s) || !m->s->nframes ? 1 : m->s->nframes;
	mi_kvf(&m->res, "depth", "%zu", n);
	return 0;
}

static int mi_stack_info_frame(struct mi *m, struct mi_parse *c)
{
	(void)c;
	if (need_playhead(m))
		return -1;
	return mi_frame(m, &m->res, "frame", m->s->sel_frame) ? mi_error(m, "No stack.") : 0;
}

static int mi_stack_select_frame(struct mi *m, struct mi_parse *c)
{
	uint64_t k;

	if (need_args(m, c, 1, "-stack-select-frame N") || need_playhead(m))
		return -1;
	/* "abc" or "-1" is no frame, not frame 0 or a wrapped huge level. */
	if (tm_parse_uint(c->argv[0], &k))
		return mi_error(m, "Invalid frame level \"%s\".", c->argv[0]);
	tm_frames_compute(m->s);
	if (k >= (m->s->nframes ? m->s->nframes : 1))
		return mi_error(m, "No frame at level %s.", c->argv[0]);
	m->s->sel_frame = k;
	return 0;
}

/*
 * -stack-list-arguments PRINT-VALUES [LOW HIGH]: each call's inputs as it
 * entered (the CLI's bt and info args), {name="in",value="f32[4,32,64]"};
 * the value is the summary bt shows ("f32[4,32,64] nan=12").
 */
static int mi_stack_list_arguments(struct mi *m, struct mi_parse *c)
{
	size_t lo, hi, k, n;
	int pv = c->argc ? print_values(c->argv[0]) : 0;

	if (need_playhead(m))
		return -1;
	if (pv < 0)
		pv = 0;
	frame_range(c, 1, &lo, &hi);
	n = tm_frames_compute(m->s) || !m->s->nframes ? 1 : m->s->nframes;
	mi_open(&m->res, "stack-args", '[');
	for (k = lo; k <= hi && k < n; k++) {
		const struct frame *f = tm_frame_at(m->s, k);
		uint32_t i;

		mi_open(&m->res, "frame", '{');
		mi_kvf(&m->res, "level", "%zu", k);
		mi_open(&m->res, "args", '[');
		for (i = 0; f && f->have_enter && i < f->enter.ntensors; i++) {
			char name[32], brief[160];

			tm_slot_format(f->enter.tensors[i].slot, name, sizeof(name));
			tm_tensor_brief(&f->enter.tensors[i], brief, sizeof(brief));
			mi_open(&m->res, NULL, '{');
			mi_kv(&m->res, "name", name);
			if (pv == 2)
				mi_kv(&m->res, "type", "tensor");
			if (pv)
				mi_kv(&m->res, "value", brief);
			mi_close(&m->res, '}');
		}
		mi_close(&m->res, ']');
		mi_close(&m->res, '}');
	}
	mi_close(&m->res, ']');
	return 0;
}

/*
 * The playhead's focus tensor as variables: dtype, shape and each
 * statistic present, with --simple-values types (all are simple).
 */
static int list_vars(struct mi *m, struct mi_parse *c, const char *key)
{
	const struct tm_tensor *t;
	const char *names[MAX_FIELDS], *types[MAX_FIELDS];
	char texts[MAX_FIELDS][64];
	size_t i, n;
	int pv = 0;

	for (i = 0; i < c->argc; i++)
		if (print_values(c->argv[i]) >= 0)
			pv = print_values(c->argv[i]);
	if (need_playhead(m))
		return -1;
	t = tm_focus_tensor(m->s);
	n = t ? tensor_fields(t, names, texts, types, MAX_FIELDS) : 0;
	mi_open(&m->res, key, '[');
	for (i = 0; i < n; i++) {
		mi_open(&m->res, NULL, '{');
		mi_kv(&m->res, "name", names[i]);
		if (pv == 2)
			mi_kv(&m->res, "type", types[i]);
		if (pv)
			mi_kv(&m->res, "value", texts[i]);
		mi_close(&m->res, '}');
	}
	mi_close(&m->res, ']');
	return 0;
}

static int mi_stack_list_variables(struct mi *m, struct mi_parse *c)
{
	return list_vars(m, c, "variables");
}

static int mi_stack_list_locals(struct mi *m, struct mi_parse *c)
{
	return list_vars(m, c, "locals");
}

/* ------------------------------------------------------------- variable objects */

static struct mi_var *var_find(struct mi *m, const char *name)
{
	struct mi_var *v;

	for (v = m->vars; v; v = v->next)
		if (!strcmp(v->name, name))
			return v;
	return NULL;
}

static void var_free(struct mi_var *v)
{
	free(v->name);
	free(v->expr);
	free(v->value);
	free(v);
}

void mi_vars_free(struct mi *m)
{
	struct mi_var *v;

	while ((v = m->vars)) {
		m->vars = v->next;
		var_free(v);
	}
}

static struct mi_var *var_add(struct mi *m, const char *name, const char *expr)
{
	struct mi_var *v = calloc(1, sizeof(*v));

	if (!v)
		return NULL;
	v->name = strdup(name);
	v->expr = strdup(expr);
	if (!v->name || !v->expr) {
		var_free(v);
		return NULL;
	}
	v->next = m->vars;
	m->vars = v;
	return v;
}

/* Evaluates a variable now; its text into buf.  0 or -1 (error text set). */
static int var_eval(struct mi *m, struct mi_var *var, struct tm_val *v,
		    char *buf, size_t len)
{
	memset(v, 0, sizeof(*v));
	if (tm_evaluate(m->s, var->expr, v)) {
		/* -stack-list-variables names the focus tensor's fields (dtype,
		 * nan_count): front ends hand those names back to -var-create */
		size_t l = strlen(var->expr);
		char *alt;

		if (!l || strspn(var->expr, "abcdefghijklmnopqrstuvwxyz_0123456789") != l ||
		    !(alt = malloc(l + 8)))
			return -1;
		snprintf(alt, l + 8, "tensor.%s", var->expr);
		memset(v, 0, sizeof(*v));
		if (tm_evaluate(m->s, alt, v)) {
			free(alt);
			return -1;
		}
		mi_buf_reset(&m->err);
		free(var->expr);
		var->expr = alt;
	}
	val_text(v, buf, len);
	return 0;
}

static size_t val_children(const struct tm_val *v)
{
	const char *names[MAX_FIELDS], *types[MAX_FIELDS];
	char texts[MAX_FIELDS][64];

	if (v->kind != VAL_TENSOR)
		return 0;
	return tensor_fields(&v->t, names, texts, types, MAX_FIELDS);
}

/* -var-create {NAME|-} {FRAME|*|@} EXPR */
static int mi_var_create(struct mi *m, struct mi_parse *c)
{
	struct mi_var *var;
	struct tm_val v;
	char name[32], buf[4096], *expr;

	if (need_args(m, c, 3, "-var-create {NAME|-} {FRAME|*|@} EXPR"))
		return -1;
	if (strcmp(c->argv[0], "-"))
		snprintf(name, sizeof(name), "%.31s", c->argv[0]);
	else
		snprintf(name, sizeof(name), "var%u", m->next_var++);
	if (var_find(m, name))
		return mi_error(m, "Duplicate variable object name.");
	expr = join(c, 2);
	if (!expr)
		return mi_error(m, "Out of memory.");
	var = var_add(m, name, expr);
	free(expr);
	if (!var)
		return mi_error(m, "Out of memory.");
	if (var_eval(m, var, &v, buf, sizeof(buf))) {
		m->vars = var->next;
		var_free(var);
		return -1;
	}
	var->value = strdup(buf);
	mi_kv(&m->res, "name", var->name);
	mi_kvf(&m->res, "numchild", "%zu", val_children(&v));
	mi_kv(&m->res, "value", buf);
	mi_kv(&m->res, "type", tm_val_type_name(&v));
	mi_kv(&m->res, "thread-id", "1");
	mi_kv(&m->res, "has_more", "0");
	tm_val_clear(&v);
	return 0;
}

/* -var-list-children [PRINT] NAME [FROM TO]: a tensor's fields. */
static int mi_var_list_children(struct mi *m, struct mi_parse *c)
{
	const char *names[MAX_FIELDS], *types[MAX_FIELDS];
	char texts[MAX_FIELDS][64], cname[512], cexpr[4200], buf[4096];
	struct mi_var *var;
	struct tm_val v;
	size_t i = 0, n;
	int pv = 0;

	if (c->argc && print_values(c->argv[0]) >= 0)
		pv = print_values(c->argv[i++]);
	if (i >= c->argc)
		return mi_error(m, "-var-list-children: Usage: [PRINT] NAME");
	var = var_find(m, c->argv[i]);
	if (!var)
		return mi_error(m, "Variable object not found");
	if (var_eval(m, var, &v, buf, sizeof(buf)))
		return -1;
	n = v.kind == VAL_TENSOR ? tensor_fields(&v.t, names, texts, types,
						 MAX_FIELDS) : 0;
	mi_kvf(&m->res, "numchild", "%zu", n);
	mi_open(&m->res, "children", '[');
	for (i = 0; i < n; i++) {
		snprintf(cname, sizeof(cname), "%s.%s", var->name, names[i]);
		snprintf(cexpr, sizeof(cexpr), "%s.%s", var->expr, names[i]);
		if (!var_find(m, cname) && !var_add(m, cname, cexpr)) {
			tm_val_clear(&v);
			return mi_error(m, "Out of memory.");
		}
		mi_open(&m->res, "child", '{');
		mi_kv(&m->res, "name", cname);
		mi_kv(&m->res, "exp", names[i]);
		mi_kv(&m->res, "numchild", "0");
		if (pv)
			mi_kv(&m->res, "value", texts[i]);
		mi_kv(&m->res, "type", types[i]);
		mi_kv(&m->res, "thread-id", "1");
		mi_close(&m->res, '}');
	}
	mi_close(&m->res, ']');
	mi_kv(&m->res, "has_more", "0");
	tm_val_clear(&v);
	return 0;
}

static struct mi_var *var_arg(struct mi *m, struct mi_parse *c)
{
	size_t i = 0;
	struct mi_var *v;

	if (c->argc >= 2 && !strcmp(c->argv[0], "-f"))
		i = 2;
	else if (c->argc >= 2 && (!strcmp(c->argv[0], "-c") ||
				  print_values(c->argv[0]) >= 0))
		i = 1;
	if (i >= c->argc) {
		mi_error(m, "-%s: Usage: NAME", c->op);
		return NULL;
	}
	v = var_find(m, c->argv[i]);
	if (!v)
		mi_error(m, "Variable object not found");
	return v;
}

static int mi_var_evaluate_expression(struct mi *m, struct mi_parse *c)
{
	struct mi_var *var = var_arg(m, c);
	struct tm_val v;
	char buf[4096];

	if (!var || var_eval(m, var, &v, buf, sizeof(buf)))
		return -1;
	tm_val_clear(&v);
	mi_kv(&m->res, "value", buf);
	return 0;
}

/* -var-update [PRINT] {NAME|*}: what changed since the last read. */
static int mi_var_update(struct mi *m, struct mi_parse *c)
{
	struct mi_var *var;
	struct tm_val v;
	char buf[4096];
	const char *which;
	int pv = 1;
	size_t i = 0;

	if (c->argc && print_values(c->argv[0]) >= 0)
		pv = print_values(c->argv[i++]);
	if (i >= c->argc)
		return mi_error(m, "-var-update: Usage: [PRINT] {NAME|*}");
	which = c->argv[i];
	if (strcmp(which, "*") && !var_find(m, which))
		return mi_error(m, "Variable object not found");
	mi_open(&m->res, "changelist", '[');
	for (var = m->vars; var; var = var->next) {
		size_t l = strlen(which);
		int bad;

		if (strcmp(which, "*") && strcmp(var->name, which) &&
		    !(strncmp(var->name, which, l) == 0 && var->name[l] == '.'))
			continue;
		/* an expression that cannot be evaluated here is out of scope
		 * (its error text is not the command's) */
		bad = var_eval(m, var, &v, buf, sizeof(buf));
		if (bad) {
			mi_buf_reset(&m->err);
			mi_open(&m->res, NULL, '{');
			mi_kv(&m->res, "name", var->name);
			mi_kv(&m->res, "in_scope", "false");
			mi_kv(&m->res, "type_changed", "false");
			mi_kv(&m->res, "has_more", "0");
			mi_close(&m->res, '}');
			continue;
		}
		tm_val_clear(&v);
		if (var->value && !strcmp(var->value, buf))
			continue;
		free(var->value);
		var->value = strdup(buf);
		mi_open(&m->res, NULL, '{');
		mi_kv(&m->res, "name", var->name);
		if (pv)
			mi_kv(&m->res, "value", buf);
		mi_kv(&m->res, "in_scope", "true");
		mi_kv(&m->res, "type_changed", "false");
		mi_kv(&m->res, "has_more", "0");
		mi_close(&m->res, '}');
	}
	mi_close(&m->res, ']');
	return 0;
}

/* -var-delete [-c] NAME: the variable and its children. */
static int mi_var_delete(struct mi *m, struct mi_parse *c)
{
	struct mi_var **pp, *v;
	const char *name;
	size_t l, n = 0;
	int only_children = 0;

	if (c->argc >= 2 && !strcmp(c->argv[0], "-c"))
		only_children = 1;
	if (need_args(m, c, 1 + (size_t)only_children, "-var-delete [-c] NAME"))
		return -1;
	name = c->argv[only_children];
	if (!var_find(m, name))
		return mi_error(m, "Variable object not found");
	l = strlen(name);
	for (pp = &m->vars; (v = *pp);) {
		int child = !strncmp(v->name, name, l) && v->name[l] == '.';

		if (child || (!only_children && !strcmp(v->name, name))) {
			*pp = v->next;
			var_free(v);
			n++;
		} else {
			pp = &v->next;
		}
	}
	mi_kvf(&m->res, "ndeleted", "%zu", n);
	return 0;
}

static int mi_var_info_type(struct mi *m, struct mi_parse *c)
{
	struct mi_var *var = var_arg(m, c);
	struct tm_val v;
	char buf[4096];

	if (!var || var_eval(m, var, &v, buf, sizeof(buf)))
		return -1;
	mi_kv(&m->res, "type", tm_val_type_name(&v));
	tm_val_clear(&v);
	return 0;
}

static int mi_var_info_num_children(struct mi *m, struct mi_parse *c)
{
	struct mi_var *var = var_arg(m, c);
	struct tm_val v;
	char buf[4096];

	if (!var || var_eval(m, var, &v, buf, sizeof(buf)))
		return -1;
	mi_kvf(&m->res, "numchild", "%zu", val_children(&v));
	tm_val_clear(&v);
	return 0;
}

static int mi_var_info_expression(struct mi *m, struct mi_parse *c)
{
	struct mi_var *var = var_arg(m, c);
	const char *dot;

	if (!var)
		return -1;
	dot = strchr(var->name, '.');
	mi_kv(&m->res, "lang", "TQL");
	mi_kv(&m->res, "exp", dot ? dot + 1 : var->expr);
	return 0;
}

static int mi_var_info_path_expression(struct mi *m, struct mi_parse *c)
{
	struct mi_var *var = var_arg(m, c);

	if (!var)
		return -1;
	mi_kv(&m->res, "path_expr", var->expr);
	return 0;
}

static int mi_var_show_attributes(struct mi *m, struct mi_parse *c)
{
	if (!var_arg(m, c))
		return -1;
	mi_kv(&m->res, "status", "noneditable");
	return 0;
}

static int mi_var_set_format(struct mi *m, struct mi_parse *c)
{
	if (!var_arg(m, c))
		return -1;
	mi_kv(&m->res, "format", "natural");
	return 0;
}

static int mi_var_assign(struct mi *m, struct mi_parse *c)
{
	(void)c;
	return mi_error(m, "Variable object is not editable: a trace is a "
			"record of what happened.");
}

/* ------------------------------------------------------------- threads */

/* One thread: the probe ("replay of TRACE", or a live probe's source). */
static void thread_tuple(struct mi *m, struct mi_buf *b)
{
	struct tm_probe_info pi;

	memset(&pi, 0, sizeof(pi));
	m->s->probe->ops->describe(m->s->probe, &pi);
	mi_open(b, NULL, '{');
	mi_kv(b, "id", "1");
	mi_kvf(b, "target-id", "%s of %s", pi.kind ? pi.kind : "replay",
	       pi.source ? pi.source : m->s->trace_path ? m->s->trace_path : "?");
	mi_kv(b, "name", "tmdb");
	if (m->s->have_cur)
		mi_frame(m, b, "frame", 0);
	mi_kv(b, "state", "stopped");
	mi_close(b, '}');
}

static int mi_thread_info(struct mi *m, struct mi_parse *c)
{
	(void)c;
	mi_open(&m->res, "threads", '[');
	if (m->s->probe)
		thread_tuple(m, &m->res);
	mi_close(&m->res, ']');
	if (m->s->probe)
		mi_kv(&m->res, "current-thread-id", "1");
	return 0;
}

static int mi_thread_list_ids(struct mi *m, struct mi_parse *c)
{
	(void)c;
	mi_open(&m->res, "thread-ids", '{');
	if (m->s->probe)
		mi_kv(&m->res, "thread-id", "1");
	mi_close(&m->res, '}');
	if (m->s->probe)
		mi_kv(&m->res, "current-thread-id", "1");
	mi_kv(&m->res, "number-of-threads", m->s->probe ? "1" : "0");
	return 0;
}

static int mi_thread_select(struct mi *m, struct mi_parse *c)
{
	if (need_args(m, c, 1, "-thread-select ID"))
		return -1;
	if (strcmp(c->argv[0], "1") || !m->s->probe)
		return mi_error(m, "Invalid thread id: %s", c->argv[0]);
	mi_kv(&m->res, "new-thread-id", "1");
	if (m->s->have_cur)
		mi_frame(m, &m->res, "frame", 0);
	return 0;
}

/* One thread group: the program, or one rank of a distributed job. */
static void thread_group(struct mi *m, int num, struct tm_probe *p, int rank)
{
	struct tm_probe_info pi;

	mi_open(&m->res, NULL, '{');
	mi_kvf(&m->res, "id", "i%d", num);
	mi_kv(&m->res, "type", "process");
	/* a live process: its pid (GDB lists one for a running inferior) */
	if (p && tm_probe_is_live(p) && !tm_probe_closed(p))
		mi_kvf(&m->res, "pid", "%" PRIu32, tm_probe_pid(p));
	if (rank >= 0)
		mi_kvf(&m->res, "rank", "%d", rank);
	if (m->s->live && m->s->live->prog) {
		mi_kv(&m->res, "executable", m->s->live->prog);
	} else if (rank >= 0 && p) {
		p->ops->describe(p, &pi);
		if (pi.source)
			mi_kv(&m->res, "executable", pi.source);
	} else if (m->s->trace_path) {
		mi_kv(&m->res, "executable", m->s->trace_path);
	}
	mi_close(&m->res, '}');
}

static int mi_list_thread_groups(struct mi *m, struct mi_parse *c)
{
	struct tm_probe *sub;
	size_t i;
	int rank;

	(void)c;
	mi_open(&m->res, "groups", '[');
	for (i = 0; (sub = tm_probe_multi_sub(m->s->probe, i, &rank)); i++)
		thread_group(m, (int)i + 1, sub, rank);
	if (!i)
		thread_group(m, 1, m->s->probe, -1);
	mi_close(&m->res, ']');
	return 0;
}

static int mi_file_list_exec_source_file(struct mi *m, struct mi_parse *c)
{
	struct mi_buf tmp = { 0 };
	char *p;

	(void)c;
	if (need_playhead(m))
		return -1;
	/* the frame tuple knows the source; take its keys */
	mi_frame(m, &tmp, NULL, 0);
	p = tmp.p ? strstr(tmp.p, "file=") : NULL;
	if (!p) {
		mi_buf_free(&tmp);
		return mi_error(m, "No source file for the current node.");
	}
	{
		char *end = strstr(p, ",arch=");

		if (end)
			mi_buf_add(&m->res, p, (size_t)(end - p));
	}
	mi_buf_free(&tmp);
	return 0;
}

/*
 * -file-list-exec-source-files: the files the nodes' forward()s are in,
 * each once, as GDB lists a program's sources (Emacs reads the fullnames
 * to know which buffers are the program's).
 */
static int mi_file_list_exec_source_files(struct mi *m, struct mi_parse *c)
{
	struct tm_session *s = m->s;
	uint32_t i, j, n = s->nodes ? tm_nodetab_count(s->nodes) : 0;
	char real[PATH_MAX];

	(void)c;
	mi_open(&m->res, "files", '[');
	for (i = 0; i < n; i++) {
		const struct tm_node *nd = tm_nodetab_get(s->nodes, i), *o;
		char *path;

		if (!nd || !nd->file || !*nd->file)
			continue;
		for (j = 0; j < i; j++) {
			o = tm_nodetab_get(s->nodes, j);
			if (o && o->file && !strcmp(o->file, nd->file))
				break;
		}
		if (j < i)
			continue;
		mi_open(&m->res, NULL, '{');
		mi_kv(&m->res, "filename", nd->file);
		path = tm_resolve_source(s, nd->file);
		if (path && realpath(path, real))
			mi_kv(&m->res, "fullname", real);
		free(path);
		mi_kv(&m->res, "debug-fully-read", "true");
		mi_close(&m->res, '}');
	}
	mi_close(&m->res, ']');
	return 0;
}

/* ------------------------------------------------------------- the table */

static const struct mi_cmd mi_cmds[] = {
	{ "break-after", mi_break_after },
	{ "break-commands", mi_break_commands },
	{ "break-condition", mi_break_condition },
	{ "break-delete", mi_break_delete },
	{ "break-disable", mi_break_disable },
	{ "break-enable", mi_break_enable },
	{ "break-info", mi_break_info },
	{ "break-insert", mi_break_insert },
	{ "catch-throw", mi_catch_throw },
	{ "break-list", mi_break_list },
	{ "break-watch", mi_break_watch },
	{ "data-evaluate-expression", mi_data_evaluate_expression },
	{ "data-list-register-names", mi_data_list_register_names },
	{ "data-list-register-values", mi_data_list_register_values },
	{ "enable-frame-filters", mi_noop },
	{ "enable-pretty-printing", mi_noop },
	{ "environment-cd", mi_environment_cd },
	{ "environment-directory", mi_noop },
	{ "environment-pwd", mi_environment_pwd },
	{ "exec-abort", mi_exec_abort },
	{ "exec-arguments", mi_exec_arguments },
	{ "exec-continue", mi_exec_continue },
	{ "exec-finish", mi_exec_finish },
	{ "exec-interrupt", mi_exec_interrupt },
	{ "exec-next", mi_exec_next },
	{ "exec-next-instruction", mi_exec_nexti },
	{ "exec-run", mi_exec_run },
	{ "exec-step", mi_exec_step },
	{ "exec-step-instruction", mi_exec_stepi },
	{ "exec-until", mi_exec_until },
	{ "file-exec-and-symbols", mi_file_exec_and_symbols },
	{ "file-exec-file", mi_file_exec_and_symbols },
	{ "file-list-exec-source-file", mi_file_list_exec_source_file },
	{ "file-list-exec-source-files", mi_file_list_exec_source_files },
	{ "file-symbol-file", mi_noop },
	{ "gdb-exit", mi_gdb_exit },
	{ "gdb-set", mi_gdb_set },
	{ "gdb-show", mi_gdb_show },
	{ "gdb-version", mi_gdb_version },
	{ "inferior-tty-set", mi_inferior_tty_set },
	{ "inferior-tty-show", mi_inferior_tty_show },
	{ "info-gdb-mi-command", mi_info_gdb_mi_command },
	{ "interpreter-exec", mi_interpreter_exec },
	{ "list-features", mi_list_features },
	{ "list-target-features", mi_list_target_features },
	{ "list-thread-groups", mi_list_thread_groups },
	{ "stack-info-depth", mi_stack_info_depth },
	{ "stack-info-frame", mi_stack_info_frame },
	{ "stack-list-arguments", mi_stack_list_arguments },
	{ "stack-list-frames", mi_stack_list_frames },
	{ "stack-list-locals", mi_stack_list_locals },
	{ "stack-list-variables", mi_stack_list_variables },
	{ "stack-select-frame", mi_stack_select_frame },
	{ "target-attach", mi_target_attach },
	{ "target-select", mi_target_select },
	{ "target-detach", mi_target_detach },
	{ "thread-info", mi_thread_info },
	{ "thread-list-ids", mi_thread_list_ids },
	{ "thread-select", mi_thread_select },
	{ "tmdb-compare", mi_tmdb_compare },
	{ "var-assign", mi_var_assign },
	{ "var-create", mi_var_create },
	{ "var-delete", mi_var_delete },
	{ "var-evaluate-expression", mi_var_evaluate_expression },
	{ "var-info-expression", mi_var_info_expression },
	{ "var-info-num-children", mi_var_info_num_children },
	{ "var-info-path-expression", mi_var_info_path_expression },
	{ "var-info-type", mi_var_info_type },
	{ "var-list-children", mi_var_list_children },
	{ "var-set-format", mi_var_set_format },
	{ "var-set-frozen", mi_noop },
	{ "var-set-update-range", mi_noop },
	{ "var-show-attributes", mi_var_show_attributes },
	{ "var-show-format", mi_var_set_format },
	{ "var-update", mi_var_update },
};

static const struct mi_cmd *cmd_find(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(mi_cmds) / sizeof(mi_cmds[0]); i++)
		if (!strcmp(mi_cmds[i].name, name))
			return &mi_cmds[i];
	return NULL;
}

int mi_command_exists(const char *name)
{
	return cmd_find(name) != NULL;
}

/*
 * Runs one parsed MI command.  The global options GDB allows on any
 * command (--thread N, --thread-group G, --frame N, --language L) are taken
 * out first; --frame selects that frame for the command.
 */
int mi_dispatch(struct mi *m, struct mi_parse *c)
{
	const struct mi_cmd *cmd = cmd_find(c->op);
	size_t i, o = 0;

	if (!cmd) {
		m->undefined = 1;
		return mi_error(m, "Undefined MI command: %s", c->op);
	}
	for (i = 0; i < c->argc; i++) {
		const char *a = c->argv[i];

		if ((!strcmp(a, "--thread") || !strcmp(a, "--language") ||
		     !strcmp(a, "--frame")) && i + 1 < c->argc) {
			if (!strcmp(a, "--frame") && m->s->have_cur) {
				unsigned long k = strtoul(c->argv[i + 1], NULL, 10);

				tm_frames_compute(m->s);
				if (k < m->s->nframes)
					m->s->sel_frame = k;
			}
			free(c->argv[i]);
			free(c->argv[i + 1]);
			i++;
			continue;
		}
		c->argv[o++] = c->argv[i];
	}
	c->argc = o;
	return cmd->fn(m, c);
}
