/*
 * inferior.c -- the program tmdb starts itself: `tmdb --args PROG ARGS`,
 * `file PROG`, `run`, `kill`.
 *
 * The program runs through /bin/sh (as GDB's startup-with-shell: `set args`
 * may hold quotes and redirections) in a process group of its own, so that
 * Ctrl-C at the terminal reaches tmdb only, with stdin, stdout and stderr
 * inherited so its output passes through.  The environment asks the probe
 * inside it to serve the wire protocol on DIR/PID.sock and to wait for the
 * debugger before the model's first event (TENSORMORPH_LISTEN,
 * TENSORMORPH_WAIT); tmdb polls for that socket while the child lives and
 * attaches as `attach PID` does.  The child is always reaped: when its
 * connection ends, on `kill`, on a re-run and when tmdb quits; every wait
 * is bounded or ends at Ctrl-C.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tmdb.h"
#include "live.h"

#ifndef TM_PROBE_DIR
#define TM_PROBE_DIR "probes/pytorch"
#endif

#define START_TIMEOUT_MS 30000  /* the probe's socket must appear by then */
#define KILL_TIMEOUT_MS 5000
#define POLL_US 10000

struct tm_live *tm_live_get(struct tm_session *s)
{
	if (!s->live) {
		s->live = calloc(1, sizeof(*s->live));
		if (s->live)
			s->live->level = -1;
	}
	return s->live;
}

static int is_exec_file(const char *path)
{
	struct stat st;

	return !stat(path, &st) && S_ISREG(st.st_mode) && !access(path, X_OK);
}

/* PROG as execvp finds it: a path with a slash as is, else along $PATH. */
static int find_program(const char *prog, char *out, size_t len)
{
	const char *path = getenv("PATH"), *p, *e;

	if (!*prog)
		return -1;
	if (strchr(prog, '/')) {
		if (!is_exec_file(prog) || strlen(prog) >= len)
			return -1;
		snprintf(out, len, "%s", prog);
		return 0;
	}
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (p = path; ; p = e + 1) {
		int n;

		e = strchr(p, ':');
		if (!e)
			e = p + strlen(p);
		n = snprintf(out, len, "%.*s%s%s", (int)(e - p), p, e > p ? "/" : "", prog);
		if (n > 0 && (size_t)n < len && is_exec_file(out))
			return 0;
		if (!*e)
			break;
	}
	return -1;
}

int tm_live_is_program(const char *path)
{
	char buf[PATH_MAX];
	size_t l = strlen(path);

	if (l >= 6 && !strcmp(path + l - 6, ".tmrun"))
		return 0;
	return !find_program(path, buf, sizeof(buf));
}

int tm_live_set_program(struct tm_session *s, const char *prog, const char *args)
{
	struct tm_live *lv = tm_live_get(s);
	char *p, *a = NULL;

	if (!lv)
		return -1;
	p = strdup(prog);
	if (args && *args)
		a = strdup(args);
	if (!p || (args && *args && !a)) {
		free(p);
		free(a);
		return -1;
	}
	free(lv->prog);
	lv->prog = p;
	if (args) {
		free(lv->args);
		lv->args = a;
	}
	return 0;
}

/* ------------------------------------------------------------- exit status */

/* The front end's record of the program coming and going (MI). */
static void notify(struct tm_session *s, int what, long pid, int status)
{
	if (s->on_inferior)
		s->on_inferior(s, what, pid, status);
}

static void say_signal(int signo, const char **name, const char **meaning,
		       char *buf, size_t len)
{
	*name = tm_signal_name(signo, meaning);
	if (!*name) {
		snprintf(buf, len, "SIG%d", signo);
		*name = buf;
		*meaning = "Unknown signal";
	}
}

/* How the child ended, as GDB says it. */
static void say_status(struct tm_session *s, long pid, int status, int startup)
{
	const char *name, *meaning;
	char buf[32];

	if (WIFEXITED(status)) {
		if (startup)
			tm_error(s, "During startup program exited with code %d.",
				 WEXITSTATUS(status));
		else if (WEXITSTATUS(status))
			tm_out(s, "[Process %ld exited with code %02o]\n", pid,
			       (unsigned)WEXITSTATUS(status));
		else
			tm_out(s, "[Process %ld exited normally]\n", pid);
	} else if (WIFSIGNALED(status)) {
		say_signal(WTERMSIG(status), &name, &meaning, buf, sizeof(buf));
		if (startup)
			tm_error(s, "During startup program terminated with signal "
				 "%s, %s.", name, meaning);
		else
			tm_out(s, "\nProgram terminated with signal %s, %s.\n"
			       "The program no longer exists.\n", name, meaning);
	}
}

/*
 * Waits up to ms for the child to end (Ctrl-C gives up); returns 1 with
 * *status when it did.
 */
static int wait_child(long pid, int ms, int *status)
{
	int waited;

	for (waited = 0; ; waited += POLL_US / 1000) {
		pid_t r = waitpid((pid_t)pid, status, WNOHANG);

		if (r == (pid_t)pid)
			return 1;
		if (r < 0 && errno != EINTR) {
			*status = 0;    /* not ours any more: nothing to wait for */
			return 1;
		}
		if (waited >= ms || tm_interrupted)
			return 0;
		usleep(POLL_US);
	}
}

/* Drops the probe run attached to the child, if it is still the session's. */
static void unload_ours(struct tm_session *s)
{
	struct tm_live *lv = s->live;

	if (lv->probe && s->probe == lv->probe)
		tm_session_unload(s);
	lv->probe = NULL;
}

void tm_inferior_kill(struct tm_session *s, int verbose)
{
	struct tm_live *lv = s->live;
	long pid;
	int status;

	if (!lv || !lv->pid)
		return;
	pid = lv->pid;
	unload_ours(s);
	kill(-(pid_t)pid, SIGKILL);
	kill((pid_t)pid, SIGKILL);
	if (!wait_child(pid, KILL_TIMEOUT_MS, &status) && verbose)
		tm_error(s, "warning: process %ld did not die within %d seconds.",
			 pid, KILL_TIMEOUT_MS / 1000);
	lv->pid = 0;
	if (verbose)
		tm_out(s, "[Process %ld killed]\n", pid);
	notify(s, TM_INF_GONE, pid, 0);
}

void tm_inferior_reap(struct tm_session *s, int ms, int quiet)
{
	struct tm_live *lv = s->live;
	int status;

	if (!lv || !lv->pid)
		return;
	fflush(s->out);
	if (!wait_child(lv->pid, ms, &status)) {
		if (!quiet)
			tm_out(s, "Process %ld closed its connection and is still "
			       "running; \"kill\" ends it.\n", lv->pid);
		return;
	}
	say_status(s, lv->pid, status, 0);
	notify(s, TM_INF_EXITED, lv->pid, status);
	lv->pid = 0;
	/* The history stays browsable, as a replay: no process behind it. */
	lv->probe = NULL;
}

void tm_live_free(struct tm_session *s)
{
	struct tm_live *lv = s->live;

	if (!lv)
		return;
	/* GDB kills the program it started when it quits. */
	if (lv->pid)
		tm_inferior_kill(s, 0);
	free(lv->prog);
	free(lv->args);
	free(lv->tty);
	free(lv);
	s->live = NULL;
}

/* ------------------------------------------------------------- starting */

/* 'a b' -> "'a b'": one shell word. */
static char *sh_quote(const char *w)
{
	size_t l = strlen(w), i, o = 0;
	char *q = malloc(4 * l + 3);

	if (!q)
		return NULL;
	if (*w && strspn(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			 "0123456789_-+=./:,@%") == l) {
		memcpy(q, w, l + 1);
		return q;
	}
	q[o++] = '\'';
	for (i = 0; i < l; i++) {
		if (w[i] == '\'') {
			memcpy(q + o, "'\\''", 4);
			o += 4;
		} else {
			q[o++] = w[i];
		}
	}
	q[o++] = '\'';
	q[o] = 0;
	return q;
}

/* The PYTHONPATH entries that load the probe into a Python program. */
static void python_env(void)
{
	const char *probe = getenv("TENSORMORPH_PROBE_PATH");
	const char *old = getenv("PYTHONPATH");
	char *v;
	size_t l;

	if (!probe || !*probe)
		probe = TM_PROBE_DIR;
	l = 2 * strlen(probe) + 64 + (old ? strlen(old) : 0);
	v = malloc(l);
	if (!v)
		return;
	snprintf(v, l, "%s/tensormorph_probe/_boot:%s%s%s", probe, probe,
		 old && *old ? ":" : "", old && *old ? old : "");
	setenv("PYTHONPATH", v, 1);
	free(v);
}

/* In the child, between fork and exec: tmdb is single-threaded here. */
static void child_exec(const struct tm_live *lv, const char *cmd, const char *prog)
{
	const char *base = strrchr(prog, '/');
	sigset_t none;
	char lvl[16];

	setpgid(0, 0);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGINT, SIG_DFL);
	signal(SIGPIPE, SIG_DFL);
	/* -inferior-tty-set: the program's terminal (or file); under MI
	 * without one its stdin is not the front end's command stream. */
	if (lv->tty || lv->stdin_null) {
		int fd = open(lv->tty ? lv->tty : "/dev/null",
			      lv->tty ? O_RDWR | O_NOCTTY | O_CREAT | O_APPEND :
			      O_RDONLY, 0600);

		if (fd < 0)
			_exit(127);
		dup2(fd, 0);
		if (lv->tty) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		if (fd > 2)
			close(fd);
	}
	setenv("TENSORMORPH_LISTEN", "1", 1);
	setenv("TENSORMORPH_WAIT", "30", 1);
	if (lv->level >= 0) {
		snprintf(lvl, sizeof(lvl), "%d", lv->level);
		setenv("TENSORMORPH_LEVEL", lvl, 1);
	}
	base = base ? base + 1 : prog;
	if (!strncmp(base, "python", 6))
		python_env();
	execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
	_exit(127);
}

/* Connects to DIR/PID.sock once it appears; -1 when the child is gone. */
static int wait_socket(struct tm_session *s, long pid, struct tm_probe **out)
{
	char sock[128], *detail = NULL;
	int waited, status, err = TM_ERR_NOT_FOUND;

	for (waited = 0; ; waited += POLL_US / 1000) {
		pid_t r = waitpid((pid_t)pid, &status, WNOHANG);

		if (r == (pid_t)pid) {
			s->live->pid = 0;
			free(detail);
			say_status(s, pid, status, 1);
			notify(s, TM_INF_EXITED, pid, status);
			return -1;
		}
		if (tm_server_socket_path((pid_t)pid, sock, sizeof(sock)) == TM_OK &&
		    !access(sock, F_OK)) {
			free(detail);
			detail = NULL;
			err = tm_probe_remote_open(sock, out, &detail);
			if (err == TM_OK)
				return 0;
		}
		if (tm_interrupted || waited >= START_TIMEOUT_MS) {
			if (tm_interrupted)
				tm_error(s, "Interrupted while waiting for process %ld's "
					 "probe.", pid);
			else if (detail)
				tm_error(s, "Cannot attach to process %ld: %s.", pid, detail);
			else
				tm_error(s, "Process %ld did not open the tensormorph "
					 "probe's socket within %d seconds (is the probe "
					 "loaded?).", pid, START_TIMEOUT_MS / 1000);
			free(detail);
			tm_inferior_kill(s, 1);
			return -1;
		}
		usleep(POLL_US);
	}
}

int tm_inferior_start(struct tm_session *s, struct tm_probe **out)
{
	struct tm_live *lv = s->live;
	char path[PATH_MAX], cwd[PATH_MAX], shown[2 * PATH_MAX + 2];
	char *q, *cmd;
	size_t l;
	pid_t pid;

	*out = NULL;
	if (!lv || !lv->prog) {
		tm_error(s, "No executable file specified.\n"
			 "Use the \"file\" or \"exec-file\" command.");
		return -1;
	}
	if (find_program(lv->prog, path, sizeof(path))) {
		tm_error(s, "%s: No such file or directory.", lv->prog);
		return -1;
	}
	if (path[0] != '/' && getcwd(cwd, sizeof(cwd)))
		snprintf(shown, sizeof(shown), "%s/%s", cwd,
			 path[0] == '.' && path[1] == '/' ? path + 2 : path);
	else
		snprintf(shown, sizeof(shown), "%s", path);
	q = sh_quote(path);
	if (!q)
		return -1;
	l = strlen(q) + (lv->args ? strlen(lv->args) : 0) + 8;
	cmd = malloc(l);
	if (!cmd) {
		free(q);
		return -1;
	}
	snprintf(cmd, l, "exec %s%s%s", q, lv->args ? " " : "", lv->args ? lv->args : "");
	free(q);
	tm_out(s, "Starting program: %s%s%s\n", shown, lv->args ? " " : "",
	       lv->args ? lv->args : "");
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		tm_error(s, "Cannot fork: %s.", strerror(errno));
		free(cmd);
		return -1;
	}
	if (pid == 0)
		child_exec(lv, cmd, lv->prog);
	free(cmd);
	setpgid(pid, pid);      /* as the child does: whoever runs first */
	lv->pid = pid;
	notify(s, TM_INF_STARTED, pid, 0);
	return wait_socket(s, pid, out);
}
