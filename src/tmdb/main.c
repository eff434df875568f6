/*
 * main.c -- tmdb's entry point: options, init files, batch and interactive
 * modes.
 *
 * The order follows GDB: ~/.tmdbinit, the trace named on the command line,
 * ./.tmdbinit (only when ~/.tmdbinit allows it), then every -ex and -x in
 * the order given; -batch exits after them with 0 if the last command
 * succeeded and 1 if it failed, `quit N` exits with N.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tmdb.h"
#include "live.h"
#include "dap.h"

struct action {
	int is_file;            /* -x FILE, else -ex CMD */
	int early;              /* -iex/-ix: before the trace or program loads */
	const char *arg;
};

static void usage(FILE *fp)
{
	fprintf(fp,
		"Usage: tmdb [OPTIONS] [TRACE.tmrun | PROGRAM]\n"
		"       tmdb [OPTIONS] --args PROGRAM [ARGS...]\n"
		"Debug a recorded neural-network run the way GDB debugs a program,\n"
		"or a program that loads the tensormorph probe (\"run\" starts it).\n"
		"\n"
		"Options:\n"
		"  --args PROGRAM ARGS... the program to run and its arguments: every\n"
		"                        word after --args belongs to it\n"
		"  -q, -quiet, -silent   do not print the introductory message\n"
		"  -batch                exit after processing options; status 0 if the\n"
		"                        last command succeeded, 1 if it failed\n"
		"  -ex CMD               execute a single command (repeatable)\n"
		"  -iex CMD              execute a command before the trace or program\n"
		"                        loads (GDB's init-eval-command)\n"
		"  -x FILE               execute commands from FILE (repeatable)\n"
		"  -ix FILE              execute FILE before the trace or program loads\n"
		"  -p PID, --pid=PID     attach to the probe of running process PID\n"
		"  -nx, -n               do not read any .tmdbinit file\n"
		"  -nh                   do not read ~/.tmdbinit\n"
		"  -tty=TTY, -t TTY      the terminal of the program run starts\n"
		"  --interpreter=mi|mi2|mi3|mi4|dap|console, -i mi\n"
		"                        speak GDB/MI (mi and mi3: mi3 syntax) on\n"
		"                        stdin/stdout, for IDEs (see doc/mi.md), or\n"
		"                        the Debug Adapter Protocol (dap: VS Code,\n"
		"                        doc/ide.md); console is the default command line\n"
		"  --reference FILE      compare the run with the recording FILE (as\n"
		"                        the command compare FILE does)\n"
		"  --recover FILE [-o OUT]\n"
		"                        rewrite the index of a trace whose writer died\n"
		"                        (in place, or into OUT) and exit\n"
		"  --version             print the version and exit\n"
		"  --help                print this help and exit\n"
		"\n"
		"Init files: ~/.tmdbinit, and ./.tmdbinit when ~/.tmdbinit says\n"
		"\"set auto-load local-tmdbinit on\".  See tmdb(1).\n");
}

/* Accepts -opt, --opt and --opt=VALUE spellings of GDB's options. */
static int opt_is(const char *arg, const char *name, const char **value)
{
	const char *a = arg;
	size_t l = strlen(name);

	if (a[0] != '-')
		return 0;
	a++;
	if (a[0] == '-')
		a++;
	if (strncmp(a, name, l))
		return 0;
	if (a[l] == 0) {
		if (value)
			*value = NULL;
		return 1;
	}
	if (a[l] == '=' && value) {
		*value = a + l + 1;
		return 1;
	}
	return 0;
}

/* The value of option argv[*i]: after '=' (already in *value) or the next
 * argument, which it consumes.  0, said on stderr, when there is none. */
static int opt_value(int argc, char **argv, int *i, const char **value)
{
	if (*value)
		return 1;
	if (*i + 1 >= argc) {
		fprintf(stderr, "tmdb: option '%s' requires an argument\n"
			"Use `tmdb --help' for a complete list of options.\n", argv[*i]);
		return 0;
	}
	*value = argv[++*i];
	return 1;
}

/* "tmdb --args PROG A 'B C'": the arguments as one shell string. */
static char *join_args(int argc, char **argv)
{
	size_t l = 1, o = 0;
	char *out;
	int i;

	for (i = 0; i < argc; i++)
		l += 4 * strlen(argv[i]) + 3;
	out = malloc(l);
	if (!out)
		return NULL;
	out[0] = 0;
	for (i = 0; i < argc; i++) {
		const char *w = argv[i];

		if (i)
			out[o++] = ' ';
		if (*w && strspn(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				 "0123456789_-+=./:,@%") == strlen(w)) {
			memcpy(out + o, w, strlen(w));
			o += strlen(w);
			continue;
		}
		out[o++] = '\'';
		for (; *w; w++) {
			if (*w == '\'') {
				memcpy(out + o, "'\\''", 4);
				o += 4;
			} else {
				out[o++] = *w;
			}
		}
		out[o++] = '\'';
	}
	out[o] = 0;
	return out;
}

static int do_recover_manifest(const char *in, const char *out);

static int do_recover(const char *in, const char *out)
{
	char *report = NULL;
	int err;

	if (tm_probe_multi_is_manifest(in))
		return do_recover_manifest(in, out);
	err = tm_recover(in, out ? out : in, &report);

	if (report) {
		size_t l = strlen(report);

		fputs(report, stdout);
		if (l && report[l - 1] != '\n')
			fputc('\n', stdout);
	}
	free(report);
	if (err != TM_OK) {
		fprintf(stderr, "tmdb: cannot recover \"%s\": %s.\n", in,
			tm_strerror(err));
		return 1;
	}
	return 0;
}

/* A distributed job's recording: every rank's file, each in place. */
static int do_recover_manifest(const char *in, const char *out)
{
	struct tm_manifest *m = NULL;
	char *detail = NULL, *mpath = NULL;
	struct stat st;
	int32_t r;
	int rc = 0, err, is_dir = !stat(in, &st) && S_ISDIR(st.st_mode);

	if (is_dir) {
		err = tm_probe_multi_find_manifest(in, &mpath, &detail);
		if (err) {
			fprintf(stderr, "tmdb: \"%s\" is a directory: --recover takes a trace, "
				"a run manifest or a directory holding one (%s)\n", in,
				detail ? detail : tm_strerror(err));
			free(detail);
			return 1;
		}
	}
	if (out) {
		if (is_dir)
			fprintf(stderr, "tmdb: \"%s\" is a directory: the rank files of its "
				"run manifest %s are recovered in place, -o does not apply.\n",
				in, mpath);
		else
			fprintf(stderr, "tmdb: \"%s\" is a run manifest: its rank files are "
				"recovered in place, -o does not apply.\n", in);
		free(mpath);
		return 1;
	}
	err = tm_manifest_read(mpath ? mpath : in, &m, &detail);
	free(mpath);
	if (err) {
		fprintf(stderr, "tmdb: %s\n", detail ? detail : tm_strerror(err));
		free(detail);
		return 1;
	}
	for (r = 0; r < m->world_size; r++) {
		printf("Rank %d: %s\n", (int)r, m->paths[r]);
		fflush(stdout);
		rc |= do_recover(m->paths[r], NULL);
	}
	tm_manifest_free(m);
	return rc;
}

/* ./.tmdbinit runs only where ~/.tmdbinit allows it (it could be anyone's). */
static void local_init(struct tm_session *s, const char *home_init)
{
	struct stat a, b;

	if (stat(".tmdbinit", &a))
		return;
	if (home_init && !stat(home_init, &b) && a.st_dev == b.st_dev &&
	    a.st_ino == b.st_ino)
		return;
	if (!s->set.local_init) {
		tm_error(s, "warning: File \"./.tmdbinit\" auto-loading has been "
			 "declined.  To enable it, add \"set auto-load "
			 "local-tmdbinit on\" to ~/.tmdbinit.");
		return;
	}
	tm_source_file(s, ".tmdbinit", 0);
}

static void run_action(struct tm_session *s, const struct action *a, int batch)
{
	if (a->is_file)
		s->last_failed = tm_source_file(s, a->arg, 1) != 0;
	else
		s->last_failed = tm_execute(s, a->arg, !batch) != 0;
}

/* GDB's height: the terminal's rows, unlimited without a terminal. */
static int terminal_rows(void)
{
	struct winsize ws;

	if (!isatty(STDOUT_FILENO) || !isatty(STDIN_FILENO) ||
	    ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) || ws.ws_row < 2)
		return 0;
	return ws.ws_row;
}

int main(int argc, char **argv)
{
	struct action *acts;
	struct tm_session *s;
	const char *trace = NULL, *recover = NULL, *recover_out = NULL, *v;
	const char *home = getenv("HOME");
	char *home_init = NULL;
	int quiet = 0, batch = 0, nx = 0, nh = 0, is_file, early = 0, i, rc;
	const char *pid = NULL; /* -p PID */
	char *prog_args = NULL;         /* --args: after the program */
	int prog_argc = 0;
	int mi = 0;             /* --interpreter=mi: the MI version, 2 to 4 */
	int dap = 0;            /* --interpreter=dap */
	const char *tty = NULL; /* -tty: the program's terminal */
	const char *reference = NULL;   /* --reference FILE */
	size_t nacts = 0;

	/* Only the character type: the TUI draws line characters and node names
	 * may be UTF-8, while numbers must keep printing with a '.'. */
	setlocale(LC_CTYPE, "");
	acts = calloc((size_t)argc + 1, sizeof(*acts));
	if (!acts)
		return 1;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (opt_is(a, "q", NULL) || opt_is(a, "quiet", NULL) ||
		    opt_is(a, "silent", NULL)) {
			quiet = 1;
		} else if (opt_is(a, "batch", NULL)) {
			batch = 1;
		} else if (opt_is(a, "nx", NULL) || opt_is(a, "n", NULL)) {
			nx = 1;
		} else if (opt_is(a, "nh", NULL)) {
			nh = 1;
		} else if ((is_file = opt_is(a, "x", &v) || opt_is(a, "command", &v)) ||
			   opt_is(a, "ex", &v) || opt_is(a, "eval-command", &v) ||
			   (early = (is_file = opt_is(a, "ix", &v) ||
				     opt_is(a, "init-command", &v)) ||
			    opt_is(a, "iex", &v) || opt_is(a, "init-eval-command", &v))) {
			if (!opt_value(argc, argv, &i, &v)) {
				free(acts);
				return 1;
			}
			acts[nacts].is_file = is_file;
			acts[nacts].early = early;
			acts[nacts].arg = v;
			nacts++;
			early = 0;
		} else if (opt_is(a, "p", &v) || opt_is(a, "pid", &v)) {
			/* GDB's -p PID: attach once the init files have run */
			if (!opt_value(argc, argv, &i, &v)) {
				free(acts);
				return 1;
			}
			pid = v;
		} else if (opt_is(a, "interpreter", &v) || opt_is(a, "i", &v)) {
			if (!v && i + 1 < argc)
				v = argv[++i];
			if (v && (!strcmp(v, "mi") || !strcmp(v, "mi3"))) {
				mi = 3;
			} else if (v && !strcmp(v, "mi2")) {
				mi = 2;         /* same records: no multi-location output */
			} else if (v && !strcmp(v, "mi4")) {
				mi = 4;
			} else if (v && !strcmp(v, "dap")) {
				dap = 1;
				mi = 0;
			} else if (v && !strcmp(v, "console")) {
				mi = 0;
				dap = 0;
			} else {
				fprintf(stderr, "tmdb: Interpreter `%s' unrecognized "
					"(use mi, mi2, mi3, mi4, dap or console)\n", v ? v : "");
				free(acts);
				return 1;
			}
		} else if (opt_is(a, "reference", &v)) {
			if (!opt_value(argc, argv, &i, &v)) {
				free(acts);
				return 1;
			}
			reference = v;
		} else if (opt_is(a, "tty", &v) || opt_is(a, "t", &v)) {
			/* GDB's -tty (Vim's termdebug passes it) */
			if (!opt_value(argc, argv, &i, &v)) {
				free(acts);
				return 1;
			}
			tty = v;
		} else if (opt_is(a, "recover", &v)) {
			if (!v) {
				if (i + 1 >= argc) {
					fprintf(stderr, "tmdb: option '--recover' requires a trace file\n");
					free(acts);
					return 1;
				}
				v = argv[++i];
			}
			recover = v;
		} else if (!strcmp(a, "-o") && recover && i + 1 < argc) {
			recover_out = argv[++i];
		} else if (opt_is(a, "args", NULL)) {
			/* GDB: the program and its arguments end the options. */
			if (i + 1 >= argc) {
				fprintf(stderr, "tmdb: option '--args' requires a program\n"
					"Use `tmdb --help' for a complete list of options.\n");
				free(acts);
				return 1;
			}
			if (trace) {
				fprintf(stderr, "tmdb: too many arguments: '%s'\n"
					"Use `tmdb --help' for a complete list of options.\n",
					argv[i + 1]);
				free(acts);
				return 1;
			}
			trace = argv[i + 1];
			prog_argc = argc - i - 2;
			if (prog_argc) {
				prog_args = join_args(prog_argc, argv + i + 2);
				if (!prog_args) {
					free(acts);
					return 1;
				}
			}
			break;
		} else if (opt_is(a, "version", NULL) || !strcmp(a, "-v")) {
			printf("tmdb (tensormorph) %s\n", PACKAGE_VERSION);
			/* For IDE adapters that look for a GDB version here
			 * (cdt-gdb-adapter): what tmdb's MI follows, not a claim
			 * to be GDB (doc/mi.md). */
			printf("Speaks GDB/MI 3 like gdb 13.1 for IDE front ends "
			       "(--interpreter=mi); it is not GDB.\n");
			free(acts);
			return 0;
		} else if (opt_is(a, "help", NULL) || !strcmp(a, "-h")) {
			usage(stdout);
			free(acts);
			return 0;
		} else if (a[0] == '-' && a[1]) {
			fprintf(stderr, "tmdb: unrecognized option '%s'\n"
				"Use `tmdb --help' for a complete list of options.\n", a);
			free(acts);
			return 1;
		} else if (!trace) {
			trace = a;
		} else {
			fprintf(stderr, "tmdb: too many arguments: '%s'\n"
				"Use `tmdb --help' for a complete list of options.\n", a);
			free(acts);
			return 1;
		}
	}
	if (recover) {
		free(acts);
		free(prog_args);
		return do_recover(recover, recover_out);
	}

	s = tm_session_new();
	if (!s) {
		free(acts);
		free(prog_args);
		return 1;
	}
	s->batch = batch;
	s->interactive = !batch && isatty(STDIN_FILENO);
	if (batch)
		s->set.confirm = 0;
	else if (s->interactive)
		s->set.height = terminal_rows();
	if (dap) {
		/* From here on stdout is DAP messages (dap.c). */
		s->interactive = 0;
		quiet = 1;
		if (tm_dap_init(s)) {
			tm_session_free(s);
			free(acts);
			return 1;
		}
	} else if (mi) {
		/* From here on all output is MI records (mi.c). */
		s->interactive = 0;
		if (tm_mi_init(s, mi)) {
			tm_session_free(s);
			free(acts);
			return 1;
		}
	}
	if (tty && tm_front_set_tty(s, tty)) {
		tm_session_free(s);
		free(acts);
		free(prog_args);
		return 1;
	}
	if (s->interactive)
		tm_install_sigint();
	if (!quiet && !batch)
		tm_out(s, "tmdb (tensormorph) %s, the debugger for neural networks.\n"
		       "Type \"help\" for a list of commands.\n", PACKAGE_VERSION);

	if (!nx && !nh && home && *home) {
		home_init = malloc(strlen(home) + 12);
		if (home_init) {
			sprintf(home_init, "%s/.tmdbinit", home);
			tm_source_file(s, home_init, 0);
		}
	}
	/* GDB runs -iex and -ix after ~/.gdbinit, before the program loads. */
	for (i = 0; (size_t)i < nacts && !s->quit; i++)
		if (acts[i].early)
			run_action(s, &acts[i], batch);
	/* A program (tmdb --args PROG, tmdb PROG) is started by "run";
	 * a name ending in .tmrun is a trace all the same. */
	if (trace && !s->quit && tm_live_is_program(trace))
		s->last_failed = tm_live_set_program(s, trace, prog_args) != 0;
	else if (trace && !s->quit && !(s->last_failed = tm_session_load(s, trace) != 0))
		tm_bp_rebind_all(s);
	free(prog_args);
	if (reference && !s->quit) {
		/* the file name as one word, whatever it holds */
		size_t rl = strlen(reference) * 5 + 16;
		char *cmd = malloc(rl), *q;
		const char *c;

		if (cmd) {
			q = cmd + sprintf(cmd, "compare \"");
			for (c = reference; *c; c++) {
				if (*c == '"') {
					memcpy(q, "\"'\"'\"", 5);
					q += 5;
				}
				else
					*q++ = *c;
			}
			strcpy(q, "\"");
			s->last_failed = tm_execute(s, cmd, 0) != 0;
			free(cmd);
		}
	}
	if (!nx && !s->quit)
		local_init(s, home_init);
	free(home_init);

	if (pid && !s->quit) {
		char cmd[256];

		snprintf(cmd, sizeof(cmd), "attach %s", pid);
		s->last_failed = tm_execute(s, cmd, !batch) != 0;
	}
	for (i = 0; (size_t)i < nacts && !s->quit; i++)
		if (!acts[i].early)
			run_action(s, &acts[i], batch);
	free(acts);

	if (dap && !s->quit) {
		rc = tm_dap_run(s);
	} else if (mi && !batch && !s->quit) {
		rc = tm_mi_run(s);
	} else if (!batch && !s->quit) {
		if (s->interactive)
			tm_cli_init(s);
		tm_run_interactive(s, s->interactive ? tm_cli_readline : NULL);
		if (s->interactive)
			tm_cli_done(s);
		rc = s->quit ? s->exit_code : 0;
	} else {
		rc = s->quit ? s->exit_code : s->last_failed ? 1 : 0;
	}
	fflush(stdout);
	/* A program run started dies with tmdb, as in GDB's batch mode. */
	tm_live_free(s);
	if (dap)
		tm_dap_done(s);
	else
		tm_mi_done(s);
	tm_session_free(s);
	return rc;
}
