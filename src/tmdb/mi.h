/*
 * mi.h -- tmdb's GDB/MI front end (doc/mi.md).
 *
 * Three layers, so that the parts that see untrusted bytes can be fuzzed on
 * their own:
 *   mi-parse.c  the MI input grammar: one command line into a token, an
 *               operation and its c-string-decoded parameters (libc only);
 *   mi-out.c    building output records: c-string escaping, results,
 *               tuples and lists with their commas (libc only);
 *   mi.c        the session side: output redirection, the command loop, the
 *               *stopped and =breakpoint-* records, frames and breakpoints
 *               as MI tuples; mi-cmds.c the -commands themselves, which call
 *               the same command code as the CLI.
 */
#ifndef TMDB_MI_H
#define TMDB_MI_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ------------------------------------------------------------- mi-parse.c */

#define MI_LINE_MAX (64u * 1024)        /* bytes in one command line */
#define MI_ARGC_MAX 256                 /* parameters of one command */
#define MI_TOKEN_MAX 20                 /* digits of a token */

/* One parsed input line. */
struct mi_parse {
	char token[MI_TOKEN_MAX + 1];   /* "" when none */
	int is_cli;                     /* a CLI command, not "-op ..." */
	char *op;                       /* "break-insert"; CLI: the command text */
	char **argv;                    /* decoded parameters (options included) */
	size_t argc;
};

/*
 * Parses one line (without its newline) of len bytes.  Returns 0, or -1
 * with a message in err (the line is not a well-formed MI command; *out is
 * then empty but its token is filled when one was read).
 */
int mi_parse(const char *line, size_t len, struct mi_parse *out,
	     char *err, size_t errlen);
void mi_parse_free(struct mi_parse *p);

/* ------------------------------------------------------------- mi-out.c */

/* A growing output buffer; an allocation failure sets oom and drops text. */
struct mi_buf {
	char *p;
	size_t len, cap;
	int oom;
};

void mi_buf_free(struct mi_buf *b);
void mi_buf_reset(struct mi_buf *b);
void mi_buf_add(struct mi_buf *b, const char *s, size_t n);
void mi_buf_puts(struct mi_buf *b, const char *s);
void mi_buf_printf(struct mi_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* s[0..n) as an MI c-string, quotes included. */
void mi_buf_cstr(struct mi_buf *b, const char *s, size_t n);
/* A comma unless the buffer is empty or just opened a tuple/list/value. */
void mi_sep(struct mi_buf *b);
/* [,]key="val" */
void mi_kv(struct mi_buf *b, const char *key, const char *val);
void mi_kvf(struct mi_buf *b, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* [,]"val" (a list element) */
void mi_val(struct mi_buf *b, const char *val);
/* [,][key=]{ or [  and the closing bracket */
void mi_open(struct mi_buf *b, const char *key, char bracket);
void mi_close(struct mi_buf *b, char bracket);
/* One stream record: ~"text" (kind '~', '@' or '&') and its newline. */
void mi_stream(struct mi_buf *b, char kind, const char *text, size_t n);

/* ------------------------------------------------------------- mi.c, mi-cmds.c */

struct tm_session;
struct bp;
struct mi_input;

/* A variable object (-var-create): re-evaluated on every read. */
struct mi_var {
	struct mi_var *next;
	char *name;             /* "var1", children "var1.nan_count" */
	char *expr;             /* TQL text it evaluates */
	char *value;            /* last value read (-var-update compares) */
};

/* A GDB setting tmdb has no use for, kept so that -gdb-show answers. */
struct mi_setting {
	struct mi_setting *next;
	char *name, *value;
};

struct mi {
	struct tm_session *s;
	int version;            /* 2, 3 or 4 */
	int in_cmd;             /* a command is running: records are held */
	struct mi_buf oob;      /* held out-of-band records, in order */
	struct mi_buf con;      /* console text short of a newline */
	struct mi_buf err;      /* error text of the running command */
	struct mi_buf res;      /* results of the running command (after ^done) */
	struct mi_buf *sink;    /* console text goes here instead (NULL: ~) */
	int stopped;            /* the command stopped the playhead somewhere */
	int replay_started;     /* =thread-group-started said for a replay */
	int quiet_bp;           /* an MI -break-* command: no =breakpoint-* */
	int undefined;          /* ^error gets code="undefined-command" */
	const char *klass;      /* result class: NULL "done", or "exit" */
	struct mi_var *vars;
	unsigned next_var;
	struct mi_setting *sets;
	char *exec_args;

	/* live processes (mi.c) */
	char token[MI_TOKEN_MAX + 1];   /* the running command's */
	const char *raw;        /* its parameters as written (-exec-arguments) */
	int quiet_stop;         /* a stop that is not the front end's (attach) */
	int ended;              /* the command loop is over: no more records */
	int running_sent;       /* ^running went out before the stop (live) */
	int exit_known;         /* exit_status is how the program last ended */
	int exit_status;        /* a wait status */
	int *pend;              /* numbers of pending breakpoints, to announce */
	size_t npend, cappend;  /* their resolution with =breakpoint-modified */
	struct mi_input *in;    /* the stdin reader thread */
	struct mi_buf post;     /* records after the result and its prompt */
	FILE *fp;               /* the records go here: stdout, or new-ui's tty */
	int secondary;          /* new-ui: the command line is the main UI */
	int cli_running;        /* new-ui: *running said for the command line's resume */
	int fin_held;           /* finish stopped: *stopped after its text */
	int end_said;           /* a live program's end was reported, at: */
	uint64_t end_seq;
	size_t fin_hist;        /* the value history's size then */
};

/* mi.c: helpers for the commands */
int mi_cli(struct mi *m, struct mi_buf *sink, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int mi_error(struct mi *m, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int mi_frame(struct mi *m, struct mi_buf *b, const char *key, size_t level);
void mi_bkpt(struct mi *m, struct mi_buf *b, const char *key, struct bp *bp);
void mi_tensor(struct mi *m, struct mi_buf *b, const char *key);
void mi_reference(struct mi *m, struct mi_buf *b, const char *key);
void mi_flush_console(struct mi *m, int all);
/* 1 when the session's probe is a live process */
int mi_is_live(struct mi *m);
/* 1 when a live program's end was reported and the playhead is there */
int mi_program_gone(struct mi *m);
/* A record for after the result: *stopped once attached (-target-attach). */
void mi_attached(struct mi *m);

/* mi-cmds.c */
int mi_dispatch(struct mi *m, struct mi_parse *c);
int mi_command_exists(const char *name);
void mi_vars_free(struct mi *m);

#endif /* TMDB_MI_H */
