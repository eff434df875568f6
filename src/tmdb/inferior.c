/*
 * inferior.c -- the program tmdb starts itself: `tmdb --args PROG ARGS`,
 * `file PROG`, `run`, `kill`.
 *
 * The program runs through /bin/sh (as GDB's startup-with-shell: `set args`
 * may hold quotes and redirections) in a process group of its own, so that
 * Ctrl-C at the terminal reaches tmdb only, with stdin, stdout and stderr
 * inherited so its output passes through.  The environment asks the probe
 * inside it to serve the wire protocol on a socket tmdb names
 * (DIR/tmdb-PID-N.sock) and to wait for the debugger before the model's
 * first event (TENSORMORPH_LISTEN, TENSORMORPH_WAIT); tmdb polls for that
 * socket while the child lives and attaches as `attach` does.
 *
 * A launcher such as torchrun starts one Python process per rank, all with
 * that environment; the probe of rank R then listens on DIR/tmdb-PID-N.rankR
 * .sock (tm_server_rank_path).  tmdb connects to rank 0, learns the world
 * size from its metadata, connects to every other rank and debugs them as
 * one program (probe-multi.c).
 *
 * The child is always reaped: when its connection ends, on `kill`, on a
 * re-run and when tmdb quits; every wait is bounded or ends at Ctrl-C.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <glob.h>
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
#define FINISH_TIMEOUT_MS 5000  /* a probe asked to end writes its trace out */
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
			tm_out(s, "[Inferior 1 (process %ld) exited with code %02o]\n", pid,
			       (unsigned)WEXITSTATUS(status));
		else
			tm_out(s, "[Inferior 1 (process %ld) exited normally]\n", pid);
		if (!startup)
			tm_conv_set_int(s, "_exitcode", WEXITSTATUS(status));
	} else if (WIFSIGNALED(status)) {
		say_signal(WTERMSIG(status), &name, &meaning, buf, sizeof(buf));
		if (startup)
			tm_error(s, "During startup program terminated with signal "
				 "%s, %s.", name, meaning);
		else
			tm_out(s, "\nProgram terminated with signal %s, %s.\n"
			       "The program no longer exists.\n", name, meaning);
		if (!startup)
			tm_conv_set_int(s, "_exitsignal", WTERMSIG(status));
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

/*
 * torchrun starts each rank in a session of its own, so killing the
 * launcher's group leaves them running: they are killed by the pids their
 * probes reported.
 */
static void kill_rank(struct tm_probe *sub)
{
	pid_t pid = (pid_t)tm_probe_pid(sub);

	if (pid > 1 && !tm_probe_closed(sub)) {
		kill(-pid, SIGKILL);
		kill(pid, SIGKILL);
	}
}

static void kill_ranks(struct tm_session *s)
{
	struct tm_probe *sub;
	size_t i;

	if (!s->live->probe)
		return;
	for (i = 0; (sub = tm_probe_multi_sub(s->live->probe, i, NULL)); i++)
		kill_rank(sub);
}

/* Whether a process that is not our child has gone (or is a zombie). */
static int gone(pid_t pid)
{
	char path[64], buf[256], *p;
	FILE *f;

	if (kill(pid, 0) < 0 && errno == ESRCH)
		return 1;
	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	if (!(f = fopen(path, "r")))
		return 1;
	p = fgets(buf, sizeof(buf), f);
	fclose(f);
	p = p ? strrchr(buf, ')') : NULL;
	return p && p[1] == ' ' && p[2] == 'Z';
}

/*
 * Asks the program's probes to end (wire KILL: each finishes its
 * recording, index included, and dies of SIGKILL) and waits up to
 * FINISH_TIMEOUT_MS for the child and every rank.  Returns 1 when the
 * child has been reaped.  Killing by signal alone would leave the trace
 * without the chunk still in memory and without its index.
 */
static int ask_to_end(struct tm_session *s, long pid, int *status)
{
	struct tm_live *lv = s->live;
	struct tm_probe *sub;
	size_t i;
	int waited, reaped = 0;

	if (!lv->probe || tm_probe_closed(lv->probe))
		return 0;
	tm_probe_kill(lv->probe);
	for (waited = 0; waited < FINISH_TIMEOUT_MS; waited += POLL_US / 1000) {
		int all = 1;

		if (!reaped)
			reaped = waitpid((pid_t)pid, status, WNOHANG) == (pid_t)pid;
		for (i = 0; all && (sub = tm_probe_multi_sub(lv->probe, i, NULL)); i++)
			if (tm_probe_pid(sub) > 1 && !gone((pid_t)tm_probe_pid(sub)))
				all = 0;
		if (i == 0 && !reaped)
			all = 0;        /* one process: the child itself */
		if (all)
			break;
		usleep(POLL_US);
	}
	return reaped;
}

/*
 * The probe's socket files (one, or one per rank) once the program is
 * gone: a probe killed by signal cannot remove them itself.
 */
static void remove_sockets(struct tm_live *lv)
{
	char pat[sizeof(lv->sock) + 16];
	struct stat st;
	glob_t g;
	size_t i, l = strlen(lv->sock);

	if (!l)
		return;
	if (!lstat(lv->sock, &st) && S_ISSOCK(st.st_mode))
		unlink(lv->sock);
	if (l > 5 && snprintf(pat, sizeof(pat), "%.*s.rank*.sock", (int)(l - 5),
			      lv->sock) < (int)sizeof(pat) &&
	    glob(pat, GLOB_NOSORT, NULL, &g) == 0) {
		for (i = 0; i < g.gl_pathc; i++)
			if (!lstat(g.gl_pathv[i], &st) && S_ISSOCK(st.st_mode))
				unlink(g.gl_pathv[i]);
		globfree(&g);
	}
}

void tm_inferior_kill(struct tm_session *s, int verbose)
{
	struct tm_live *lv = s->live;
	long pid;
	int status, reaped;

	if (!lv || !lv->pid)
		return;
	pid = lv->pid;
	reaped = ask_to_end(s, pid, &status);
	kill_ranks(s);
	unload_ours(s);
	/* what the probe did not end: the launcher, a child of the program */
	kill(-(pid_t)pid, SIGKILL);
	if (!reaped) {
		kill((pid_t)pid, SIGKILL);
		if (!wait_child(pid, KILL_TIMEOUT_MS, &status) && verbose)
			tm_error(s, "warning: process %ld did not die within %d seconds.",
				 pid, KILL_TIMEOUT_MS / 1000);
	}
	remove_sockets(lv);
	lv->pid = 0;
	if (verbose)
		tm_out(s, "[Inferior 1 (process %ld) killed]\n", pid);
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
	remove_sockets(lv);
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
	free(lv->ops);
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
static void child_exec(const struct tm_live *lv, const char *cmd)
{
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
	setenv("TENSORMORPH_LISTEN", lv->sock, 1);
	setenv("TENSORMORPH_WAIT", "30", 1);
	if (lv->level >= 0) {
		snprintf(lvl, sizeof(lvl), "%d", lv->level);
		setenv("TENSORMORPH_LEVEL", lvl, 1);
	}
	if (lv->ops)
		setenv("TENSORMORPH_OPS", lv->ops, 1);
	/* python, or a launcher (torchrun, a shell script) that starts it */
	python_env();
	execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
	_exit(127);
}

/* DIR/tmdb-PID-N.sock: ours alone, a new one each run. */
static int socket_name(struct tm_live *lv)
{
	char dir[sizeof(lv->sock)];
	int n;

	if (tm_server_socket_dir(dir, sizeof(dir), 1))
		return -1;
	n = snprintf(lv->sock, sizeof(lv->sock), "%s/tmdb-%ld-%u.sock", dir,
		     (long)getpid(), ++lv->runs);
	return n < 0 || (size_t)n >= sizeof(lv->sock) - 16 ? -1 : 0;
}

/* The child ended before its probe answered: say how; -1. */
static int child_gone(struct tm_session *s, long pid, int status)
{
	s->live->pid = 0;
	say_status(s, pid, status, 1);
	notify(s, TM_INF_EXITED, pid, status);
	return -1;
}

/*
 * Waits until one of the n sockets appears and connects to it; returns its
 * index, or -1 when the child is gone or the wait ended (said why).
 */
static int connect_first(struct tm_session *s, long pid, const char *const *paths,
			 int n, struct tm_probe **out)
{
	char *detail = NULL;
	int waited, status, i;

	for (waited = 0; ; waited += POLL_US / 1000) {
		pid_t r = waitpid((pid_t)pid, &status, WNOHANG);

		if (r == (pid_t)pid) {
			free(detail);
			return child_gone(s, pid, status);
		}
		for (i = 0; i < n; i++) {
			if (access(paths[i], F_OK))
				continue;
			free(detail);
			detail = NULL;
			if (tm_probe_remote_open(paths[i], out, &detail) == TM_OK)
				return i;
		}
		if (tm_interrupted || waited >= START_TIMEOUT_MS) {
			if (tm_interrupted)
				tm_error(s, "Interrupted while waiting for process %ld's "
					 "probe.", pid);
			else if (detail)
				tm_error(s, "Cannot attach to process %ld: %s.", pid, detail);
			else
				tm_error(s, "Process %ld did not open the tensormorph "
					 "probe's socket %s within %d seconds (is the "
					 "probe loaded?).", pid, paths[0], START_TIMEOUT_MS / 1000);
			free(detail);
			tm_inferior_kill(s, 1);
			return -1;
		}
		usleep(POLL_US);
	}
}

/*
 * Rank 0 of a distributed job answered: connects to the other ranks its
 * metadata counts and makes one probe of them all.
 */
static int connect_ranks(struct tm_session *s, long pid, struct tm_probe *p0,
			 struct tm_probe **out)
{
	struct tm_live *lv = s->live;
	struct tm_probe_info pi;
	struct tm_probe **subs;
	char path[sizeof(lv->sock) + 16], *detail = NULL;
	uint32_t *pids;
	int32_t world, r;
	int err;

	p0->ops->describe(p0, &pi);
	world = pi.meta ? pi.meta->world_size : 0;
	if (world <= 1) {
		*out = p0;
		return 0;
	}
	if (world > TM_MANIFEST_MAX_WORLD) {
		tm_error(s, "Rank 0 says the job has %d ranks; tmdb debugs at most %d.",
			 (int)world, TM_MANIFEST_MAX_WORLD);
		kill_rank(p0);
		p0->ops->detach(p0);
		tm_inferior_kill(s, 1);
		return -1;
	}
	subs = calloc((size_t)world, sizeof(*subs));
	pids = calloc((size_t)world, sizeof(*pids));
	if (!subs || !pids) {
		free(subs);
		free(pids);
		kill_rank(p0);
		p0->ops->detach(p0);
		tm_inferior_kill(s, 1);
		return -1;
	}
	subs[0] = p0;
	for (r = 1; r < world; r++) {
		const char *one = path;

		if (tm_server_rank_path(lv->sock, r, path, sizeof(path)) ||
		    connect_first(s, pid, &one, 1, &subs[r]) < 0) {
			/* the ranks connected so far are processes of their
			 * own that the launcher's kill may not reach */
			while (r-- > 0) {
				kill_rank(subs[r]);
				subs[r]->ops->detach(subs[r]);
			}
			free(subs);
			free(pids);
			if (lv->pid)
				tm_inferior_kill(s, 1);
			return -1;
		}
	}
	for (r = 0; r < world; r++)
		pids[r] = tm_probe_pid(subs[r]);
	err = tm_probe_multi_new(subs, (size_t)world, lv->prog, out, &detail);
	free(subs);
	if (err) {
		/* the ranks were detached with the refusal: their processes go too */
		for (r = 0; r < world; r++)
			if (pids[r] > 1) {
				kill(-(pid_t)pids[r], SIGKILL);
				kill((pid_t)pids[r], SIGKILL);
			}
	}
	free(pids);
	if (err) {
		tm_error(s, "Cannot debug the ranks together: %s.",
			 detail ? detail : tm_strerror(err));
		free(detail);
		tm_inferior_kill(s, 1);
		return -1;
	}
	tm_out(s, "[Attached to %s]\n", tm_probe_process(*out));
	return 0;
}

/* Connects to the program's probe once its socket appears (rank 0's for a
 * distributed job); -1 when the child is gone. */
static int wait_socket(struct tm_session *s, long pid, struct tm_probe **out)
{
	struct tm_live *lv = s->live;
	char rank0[sizeof(lv->sock) + 16];
	const char *paths[2] = { lv->sock, rank0 };
	struct tm_probe *p = NULL;
	int which;

	if (tm_server_rank_path(lv->sock, 0, rank0, sizeof(rank0))) {
		tm_inferior_kill(s, 1);
		return -1;
	}
	which = connect_first(s, pid, paths, 2, &p);
	if (which < 0)
		return -1;
	if (which == 0) {
		*out = p;
		return 0;
	}
	return connect_ranks(s, pid, p, out);
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
	if (socket_name(lv)) {
		tm_error(s, "No private directory for the probe's socket "
			 "(see tm_server_socket_dir: $XDG_RUNTIME_DIR/tensormorph "
			 "or /tmp/tensormorph-UID, ours and mode 0700).");
		free(cmd);
		return -1;
	}
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
		child_exec(lv, cmd);
	free(cmd);
	setpgid(pid, pid);      /* as the child does: whoever runs first */
	lv->pid = pid;
	notify(s, TM_INF_STARTED, pid, 0);
	return wait_socket(s, pid, out);
}
