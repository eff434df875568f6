/*
 * tmdb.h -- the debugger session and the command table.
 *
 * struct tm_session holds everything one debugging session has: the probe,
 * the playhead, breakpoints, displays, value history, convenience variables,
 * user-defined commands and settings.  There are no mutable globals besides
 * the interrupt flag that SIGINT forces on us; every command handler gets the
 * session, and prints through tm_out()/tm_error() so that the MI front end
 * can reuse the same handlers with its own output functions.
 *
 * Commands are `const struct cmd_entry`s, one family per cmd-*.c file, listed
 * in one table in cmd.c (as tmux does).
 */
#ifndef TMDB_H
#define TMDB_H

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>

#include "tensormorph.h"
#include "probe.h"

/* Set by the SIGINT handler; scanning loops poll it. */
extern volatile sig_atomic_t tm_interrupted;

/* ------------------------------------------------------------- values */

enum val_kind {
	VAL_SCALAR = 0,
	VAL_TENSOR
};

/* A value owned by tmdb: history entries and convenience variables. */
struct tm_val {
	int kind;
	struct tm_tql_value v;          /* VAL_SCALAR; strings/dims owned below */
	char *str;
	int64_t dims[TM_MAX_RANK];
	struct tm_tensor t;             /* VAL_TENSOR, payload dropped */
};

/* print/FMT: GDB's format letter (0: none), size in bytes (0: natural)
 * and count (x). */
struct tm_fmt {
	char letter;
	int size;
	unsigned count;
};

/* ------------------------------------------------------------- breakpoints */

enum bp_type {
	BP_BREAK = 0,
	BP_WATCH
};

enum bp_disp {
	BP_KEEP = 0,
	BP_DEL,         /* tbreak */
	BP_DIS          /* enable once */
};

/*
 * A breakpoint or watchpoint as the front end keeps it: its number,
 * counts, commands and disposition.  What makes it stop is the library's
 * (tm-breakpoint.h): the location bound to nodes, and the condition.
 */
struct bp {
	struct bp *next;
	int num;
	int type;
	int disp;
	int enabled;
	char *where;            /* the location (canonical) or watch expression */
	char *cond_src;         /* NULL: unconditional */
	struct tm_breakpoint core;      /* location and condition (BP_BREAK);
					 * only the condition for BP_WATCH */
	int pending;            /* matches no node yet (live): binds as nodes come */
	char *src_file;         /* set as FILE:LINE: resolved again as nodes come */
	unsigned src_line;
	uint32_t src_seen;      /* nodes there were when FILE:LINE last failed */
	uint64_t hits;
	uint64_t ignore;
	char **cmds;
	size_t ncmds;
	/* watchpoints: the expression compiled once */
	struct tm_expr *wexpr;
	int have_old;
	struct tm_val old;
	int watch_node_only;    /* re-evaluate only on events of watch_node */
	uint32_t watch_node;
	/* catchpoints (catch ...): a BP_BREAK on every node whose matcher
	 * runs the catchpoint's own test and then cond_src (core_src, what
	 * the live probe is sent); gap and signal ones match no event, the
	 * scan tests them at gap and crash records (cmd-run.c) */
	int catch_kind;         /* enum tm_catch_kind, 0: a breakpoint */
	char *catch_arg;        /* exception type or signal name, NULL: any */
	char *core_src;
};

enum tm_catch_kind {
	TM_CATCH_NONE = 0,
	TM_CATCH_EXCEPTION,     /* a RAISE event (of catch_arg's type) */
	TM_CATCH_NAN,           /* any tensor with a NaN */
	TM_CATCH_INF,           /* any tensor with an Inf */
	TM_CATCH_GAP,           /* a gap record: events were lost */
	TM_CATCH_SIGNAL         /* a crash record: the program got a fatal signal */
};
/* "exception", "nan", ...; what info breakpoints shows in What */
const char *tm_catch_kind_name(int kind);

struct display {
	struct display *next;
	int num;
	int enabled;
	char *expr;
	struct tm_fmt fmt;      /* display/x: kept for every stop */
};

struct ucmd {
	struct ucmd *next;
	char *name;
	char **lines;
	size_t nlines;
	char *doc;
};

struct conv {
	struct conv *next;
	char *name;
	struct tm_val val;
};

/* A module call open at the playhead (bt). */
struct frame {
	uint32_t node;
	uint32_t call;
	uint64_t enter_seq;     /* UINT64_MAX when not seen */
	int returning;          /* frame 0 at an EXIT event */
	int have_enter;
	struct tm_event enter;  /* the call's ENTER event (its inputs), a copy */
};

/*
 * One cached "latest event of node/kind/call holding slot" for addressed
 * terms.  Keyed by the slot, not only the event kind: a probe may record
 * a parameter's data and grad in separate PARAM events.
 */
struct lookup_ent {
	uint32_t node;
	uint8_t kind;
	struct tm_slot slot;
	uint32_t call;
	int have;
	uint32_t reason;        /* unknown because of a gap */
	struct tm_event ev;
};

/* One rank's value at one step (TQL's cross-rank aggregates). */
struct step_ent {
	struct lookup_ent e;
	uint64_t step;
	uint64_t at;            /* the seq it was looked up at */
	uint64_t final_from;    /* from this seq on it cannot change */
};

struct tm_session;

/* A source of command lines: a file, readline, or stored lines. */
struct tm_input {
	struct tm_input *prev;
	FILE *fp;               /* NULL: lines[] or readline */
	const char *name;
	unsigned line;
	/* interactive prompt: the front end's line editor (cli.c) */
	char *(*readline)(struct tm_session *s, const char *prompt);
	char **lines;
	size_t nlines, pos;
};

struct tm_session;
struct tm_stop;

enum cmd_flags {
	CMD_NEEDS_TRACE = 1u << 0,   /* "No trace loaded." without one */
	CMD_RESUMES = 1u << 1,       /* moves the playhead */
	CMD_BLOCK = 1u << 2,         /* reads a body up to "end" */
	CMD_FORMAT = 1u << 3,        /* takes /FMT itself (x/8f) */
	CMD_PROGRAM = 1u << 4,       /* runs with a program set and no trace yet */
	CMD_FORWARD = 1u << 5,       /* runs the program on: needs it running */
};

struct cmd_entry {
	const char *name;
	const char *alias;           /* space-separated extra names, may be NULL */
	const char *usage;
	const char *help;            /* first line is the summary */
	int (*exec)(struct tm_session *s, const char *args, int from_tty);
	unsigned flags;
	const char *klass;           /* help class: "running", "breakpoints", ... */
	/* "help NAME" prints this after help: a list kept in one table. */
	void (*help_more)(struct tm_session *s);
	/* What the command cannot do without (tm_execute says "Argument
	 * required (WHAT)." when the arguments are empty); NULL: optional. */
	const char *arg_required;
};

/* Settings that `set`/`show` know. */
struct settings {
	int listsize;
	int confirm;
	int pagination;
	int progress;
	int local_init;
	int verbose;
	int history_size;
	int max_gap_lines;
	int style;              /* colour where the output is a terminal */
	int trace_commands;     /* echo each command, '+' per nesting level */
	int height;             /* lines in a page, 0: unlimited (set height) */
	int print_pretty;       /* set print pretty: a tensor one field a line */
	char *prompt;
	/* set logging: copy (redirect: send) the output to log_file */
	int log_enabled;
	int log_overwrite;
	int log_redirect;
	char *log_file;
};

/* A skip entry: step passes over the calls of the modules it names. */
struct skip {
	struct skip *next;
	int num;
	int enabled;
	int is_class;           /* matches the module's class, else its address */
	char *pattern;
};

struct tm_session {
	/* output: MI replaces these */
	FILE *out;
	FILE *err;
	void (*out_fn)(struct tm_session *s, int is_err, const char *text);
	/* structured stops and breakpoint changes (MI; NULL for the CLI) */
	void (*on_stop)(struct tm_session *s, const struct tm_stop *st);
	void (*on_bp_event)(struct tm_session *s, int what, struct bp *b);
	/* a forward scan is about to wait on a live process (MI: ^running
	 * goes out now, and -exec-interrupt is listened for) */
	void (*on_resume)(struct tm_session *s);
	/* the program or process came or went (MI: =thread-group-*):
	 * enum tm_inferior_event, status a wait status for TM_INF_EXITED */
	void (*on_inferior)(struct tm_session *s, int what, long pid, int status);
	void *ui;               /* the front end's own state (mi.c) */
	void *ui_quiet;         /* an apply's output while it switches ranks */

	/* the trace */
	struct tm_probe *probe;
	const tm_nodetab *nodes;
	char *trace_path;
	struct tm_live *live;   /* the program run starts (live.h), NULL: none */

	/* playhead */
	int have_cur;
	struct tm_event cur;
	int cursor_after;       /* probe cursor sits after cur (else before) */
	int stopped_bp;         /* breakpoint number of the last stop, 0 */
	int shown_rank;         /* rank the last "[Switching to" named, -1 */
	const struct tm_probe *rank_of_probe;   /* trace_rank is this probe's */
	int trace_rank;         /* a one-process trace's rank (meta), else 0 */
	uint32_t focus;         /* focus tensor index in cur, UINT32_MAX none */

	/* module call stack at the playhead (lazy) */
	struct frame *frames;
	size_t nframes, frames_cap;
	int frames_valid;
	int frames_gap;
	size_t sel_frame;

	/* addressed-term cache */
	struct lookup_ent *lk;
	size_t nlk;
	struct step_ent *lks;   /* the same at a step, per rank */
	size_t nlks;

	struct bp *bps;
	int next_bpnum;
	struct display *displays;
	int next_display;
	struct tm_val **hist;
	size_t nhist;
	struct conv *convs;
	struct ucmd *ucmds;
	struct settings set;
	struct tm_tql_env env;
	tm_tql_funcs *funcs;
	struct tm_ref *ref;     /* the reference recording (cmd-compare.c), NULL */

	/* input */
	struct tm_input *in;
	int batch;
	int interactive;
	int quit;
	int exit_code;
	int last_failed;
	int depth;              /* user command / source nesting */
	int in_stop_cmds;
	char **pending;         /* breakpoint commands to run after a stop */
	size_t npending;
	int pending_silent;
	int starting;           /* start: its breakpoint waits for the nodes */
	int intr_reported;      /* this Ctrl-C's "Interrupted." is out */
	int err_prefixed;       /* this command's error has its FILE:LINE prefix */
	int finish_mi;          /* MI's -exec-finish runs finish: as GDB's, no text
				 * ("Run till exit", "Value returned"): the value
				 * goes into the history and *stopped only */

	/* paging (set height, set pagination): lines since the last prompt */
	int page_lines;
	int page_off;           /* "c" at the pager: no more until the prompt */
	int page_quit;          /* "q" at the pager: output dropped until then */
	FILE *log_fp;           /* set logging enabled on */

	struct skip *skips;
	int next_skip;

	/* x with no address (Enter after x) goes on after the last element */
	char *x_name;           /* the tensor x examined, NULL: none yet */
	char x_fmtstr[32];      /* its "/NFU", "" for none */
	uint64_t x_next;
	int x_rank;
	int64_t x_shape[TM_MAX_RANK];

	/* list */
	char *list_file;
	int list_first, list_last;

	/* scanning: the event being looked at (conditions, lookups) */
	const struct tm_event *scan_ev;
	double scan_t0;
	double progress_last;
	int progress_shown;
	int scan_quiet;         /* searches do not report the gaps they cross */
	int scan_gap_after;     /* goto end: gaps read lie after the landing */

	/* the oldest step an evaluation's addressed terms read (lookups), and
	 * print's "  (from step N)" when it is older than the focus's step */
	uint64_t eval_oldest_step;
	char from_note[48];
};

/* ------------------------------------------------------------- session.c */
struct tm_session *tm_session_new(void);
void tm_session_free(struct tm_session *s);
void tm_out(struct tm_session *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void tm_error(struct tm_session *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Asks question "(y or n)" on the terminal: 1 for yes; 0 for no, and
 * without a terminal (it says so, as GDB's query does). */
int tm_query(struct tm_session *s, const char *question);
/* tm_query where GDB asks: only with `set confirm on` at a terminal (the
 * command typed there); else the answer is yes, as GDB's. */
int tm_confirm(struct tm_session *s, int from_tty, const char *question);
/* A new prompt: the pager counts the lines from here. */
void tm_page_reset(struct tm_session *s);
/* 1 where GDB would page: an interactive terminal, pagination on. */
int tm_paging_active(const struct tm_session *s);
/* Logging to a file (set logging): 0, or -1 after an error. */
int tm_logging_start(struct tm_session *s);
void tm_logging_stop(struct tm_session *s);
void tm_vout(struct tm_session *s, int is_err, const char *fmt, va_list ap);
int tm_need_trace(struct tm_session *s);
/* A CMD_NEEDS_TRACE command without a trace: 0 lets it run (CMD_PROGRAM:
 * run and break with a program set), else -1 after the error message. */
int tm_command_needs_trace(struct tm_session *s, const struct cmd_entry *c);
/* 1 where a breakpoint matching no node is made pending: nodes may still
 * come (a live process, or a program `run` will start). */
int tm_session_can_pend(const struct tm_session *s);
/* Opens a trace as the session's probe.  Whoever gives the session a new
 * probe rebinds the breakpoints to its nodes (tm_bp_rebind_all). */
int tm_session_load(struct tm_session *s, const char *path);
void tm_session_unload(struct tm_session *s);
/* A front end (MI, DAP) leaves: no ui, out_fn or callbacks any more. */
void tm_session_detach_ui(struct tm_session *s);
void tm_bp_free(struct bp *b);
void tm_bp_free_all(struct tm_session *s);
void tm_playhead_clear(struct tm_session *s);
void tm_playhead_set(struct tm_session *s, const struct tm_event *ev);
uint64_t tm_playhead_seq(const struct tm_session *s);
void tm_cursor_restore(struct tm_session *s);
/* The tensor print and info stats look at: the playhead's focus tensor, or
 * with frame N selected, that call's first input (its ENTER event). */
const struct tm_tensor *tm_focus_tensor(const struct tm_session *s);
/* The event of the selected frame (the playhead for frame 0), or NULL. */
const struct tm_event *tm_focus_event(const struct tm_session *s);
/* Frame k of the stack (0 innermost), NULL past the end. */
const struct frame *tm_frame_at(const struct tm_session *s, size_t k);
const char *tm_node_name(const struct tm_session *s, uint32_t id);
/* "SIGSEGV" (and *meaning "Segmentation fault") for the signals a training
 * process dies of; NULL for others. */
const char *tm_signal_name(int signo, const char **meaning);
/* The node that carries a source location: the node or its nearest module. */
const struct tm_node *tm_source_node(struct tm_session *s, uint32_t id);
void tm_print_location(struct tm_session *s, const char *prefix);
const struct tm_annot *tm_exception_of(struct tm_session *s, const struct tm_event *ev);
void tm_print_source_line(struct tm_session *s);
void tm_print_gap(struct tm_session *s, const struct tm_gap *g, int dir);
void tm_lookup_invalidate(struct tm_session *s);
void tm_lookup_advance(struct tm_session *s, const struct tm_record *rec);
int tm_frames_compute(struct tm_session *s);
void tm_progress(struct tm_session *s, uint64_t seq, int done);
int tm_address_error(struct tm_session *s, const char *text);
char *tm_resolve_source(struct tm_session *s, const char *file);
void tm_tql_ctx_init(struct tm_session *s, struct tm_tql_ctx *ctx,
		     const struct tm_event *ev, const struct tm_tensor *t);
int tm_compile(struct tm_session *s, const char *src, int want_bool,
	       tm_tql_prog **out);
int tm_event_rank(struct tm_session *s, const struct tm_event *ev);
int tm_session_rank(struct tm_session *s);
const struct tm_node *tm_session_node(struct tm_session *s, const tm_address *a);
const struct tm_node *tm_session_node_text(struct tm_session *s, const char *text);

/* ------------------------------------------------------------- cmd-print.c */
/* expressions: simple terms are answered directly, the rest by TQL
 * (tm_expr_free is value.c's: the session frees watch expressions) */
enum term_field {
	TF_WHOLE = -1,          /* the tensor summary itself */
	TF_DTYPE = -2,
	TF_SHAPE = -3,
	TF_RANK = -4
};
struct tm_expr {
	char *src;
	int simple;             /* 1: tensor[.field] or ADDR:SLOT[.field] */
	int is_focus;           /* "tensor" */
	uint32_t node;
	struct tm_slot slot;
	uint32_t call;
	int field;              /* enum tm_stat or enum term_field */
	int history;            /* $N naming a tensor value: index + 1 */
	tm_tql_prog *prog;
};
int tm_expr_compile(struct tm_session *s, const char *src, int want_bool,
		    struct tm_expr *e);
int tm_expr_eval(struct tm_session *s, struct tm_expr *e, struct tm_val *out);
void tm_expr_free(struct tm_expr *e);
int tm_val_truth(const struct tm_val *v);
/* Reads commands from readline (the CLI's line editor, tm_cli_readline),
 * or from stdin when it is NULL, until quit or the end of input. */
int tm_run_interactive(struct tm_session *s,
		       char *(*readline)(struct tm_session *s, const char *prompt));

int tm_evaluate(struct tm_session *s, const char *expr, struct tm_val *out);
void tm_displays_show(struct tm_session *s);

/* ------------------------------------------------------------- value.c */
/* Reads "/NLS" at *args (nothing there: no format) and skips past it;
 * errors as GDB's for a bad letter, or a count where cmd takes none. */
int tm_fmt_parse(struct tm_session *s, const char **args, struct tm_fmt *f,
		 const char *cmd, int allow_count);
void tm_fmt_text(const struct tm_fmt *f, char *buf, size_t len);
void tm_fmt_int(int64_t v, char letter, int size, char *buf, size_t len);
void tm_val_format_as(const struct tm_val *v, const struct tm_fmt *f, int pretty,
		      char *buf, size_t len);
void tm_tensor_format_as(const struct tm_tensor *t, const struct tm_fmt *f,
			 int pretty, char *buf, size_t len);
void tm_val_clear(struct tm_val *v);
/* "tensor", "bool", "int", "float", "string", "shape", "list" (MI and DAP types). */
const char *tm_val_type_name(const struct tm_val *v);
int tm_val_set_scalar(struct tm_val *v, const struct tm_tql_value *src);
void tm_val_set_tensor(struct tm_val *v, const struct tm_tensor *t);
int tm_val_copy(struct tm_val *dst, const struct tm_val *src);
void tm_val_format(const struct tm_val *v, char *buf, size_t len);
void tm_tql_format(const struct tm_tql_value *v, char *buf, size_t len);
void tm_tensor_format(const struct tm_tensor *t, char *buf, size_t len);
int tm_val_equal(const struct tm_val *a, const struct tm_val *b);
/* The value history: appends a copy (returns its number N, for $N, or -1);
 * $N / $ / $$ / $$N by the name after the '$' ("3", "", "$", "$2"). */
int tm_history_add(struct tm_session *s, const struct tm_val *v);
const struct tm_val *tm_history_ref(struct tm_session *s, const char *name);
int tm_history_is_name(const char *name);
int tm_session_variable(void *user, const char *name, struct tm_tql_value *out);
struct conv *tm_conv_find(struct tm_session *s, const char *name);
int tm_conv_set(struct tm_session *s, const char *name, const struct tm_val *v);
void tm_conv_set_int(struct tm_session *s, const char *name, int64_t i);
void tm_conv_set_str(struct tm_session *s, const char *name, const char *str);

/* ------------------------------------------------------------- util.c */
void tm_lines_free(char **lines, size_t n);
char *tm_strip(char *p);
const char *tm_skip_ws(const char *p);
int tm_parse_uint(const char *p, uint64_t *out);
int tm_parse_bool(const char *p, int *out);
int tm_word_is(const char *word, size_t len, const char *full, size_t minlen);

/* cmd-stack.c */
/* "f32[4,32,64] nan=12": a tensor in a frame's argument list. */
void tm_tensor_brief(const struct tm_tensor *t, char *buf, size_t len);
int tm_info_args(struct tm_session *s, const char *args);
int tm_info_locals(struct tm_session *s, const char *args);
/* cmd-explore.c: module classes and calls by regular expression */
int tm_info_types(struct tm_session *s, const char *args);
int tm_info_functions(struct tm_session *s, const char *args);

/* op events (cmd-ops.c) */
/* "model.attn#2!8 aten::div.Tensor": an op event's address and name */
void tm_op_label(struct tm_session *s, const struct tm_event *ev, char *buf, size_t len);
/* The op site node of an op event, NULL for other events. */
const struct tm_node *tm_op_site(const struct tm_session *s, const struct tm_event *ev);
/* $_op: the playhead's op name, "" away from an op. */
void tm_op_conv(struct tm_session *s);
/* x/Ni: the ops of the playhead's call around it. */
int tm_op_examine(struct tm_session *s, uint64_t count, const char *args);
/* set probe-ops PATTERN|off|default (lv: struct tm_live, live.h) */
struct tm_live;
int tm_set_probe_ops(struct tm_session *s, struct tm_live *lv, const char *args);
/* info op: the playhead's op, and whether it made its non-finite values */
int tm_info_op(struct tm_session *s, const char *args);

/* ------------------------------------------------------------- cmd.c */
int tm_execute(struct tm_session *s, const char *line, int from_tty);
int tm_execute_lines(struct tm_session *s, char **lines, size_t n);
int tm_source_file(struct tm_session *s, const char *path, int must_exist);
char *tm_read_line(struct tm_session *s, const char *prompt);
int tm_read_body(struct tm_session *s, char ***lines, size_t *n,
		 int allow_else, char ***else_lines, size_t *nelse);
const struct cmd_entry *tm_cmd_lookup(struct tm_session *s, const char *word,
				      int quiet, struct ucmd **ucmd);
extern const struct cmd_entry *const tm_cmd_table[];
extern const size_t tm_cmd_count;

/* ------------------------------------------------------------- cmd-break.c */

/*
 * Creating and changing a breakpoint: the one typed call every front end
 * uses (GDB's create_breakpoint).  The CLI's break, tbreak, condition,
 * ignore, enable and disable parse their text into a spec and call these;
 * MI's -break-insert fills one from its options; DAP's setBreakpoints will
 * do the same.  Neither prints anything but errors (tm_error): what to say
 * about a new or changed breakpoint is the front end's business.
 */
struct tm_bp_spec {
	/* An address or pattern (doc/manual.md "Addresses"); NULL or "": the
	 * node at the playhead, as `break` with no argument. */
	const char *location;
	/* TQL condition, NULL or "": none (tm_bp_change: remove it). */
	const char *cond;
	int disp;               /* enum bp_disp: BP_KEEP, BP_DEL (temporary:
				 * deleted when hit), BP_DIS (disabled when hit) */
	uint64_t ignore;        /* crossings to ignore before it stops */
	int enabled;
	/* Only this rank of a distributed job (the location gets "@R:" when
	 * it has no rank of its own); in a one-process program only its own
	 * rank is accepted (any other is an error); -1: every rank. */
	int rank;
	/* A catchpoint (enum tm_catch_kind) instead of a location; catch_arg
	 * narrows it (exception type, signal name), NULL: any. */
	int catch_kind;
	const char *catch_arg;
};
/* A spec with its defaults: enabled, kept, every rank, nothing else. */
void tm_bp_spec_init(struct tm_bp_spec *spec);
/*
 * Creates a breakpoint from spec and appends it (numbered, $bpnum set,
 * on_bp_event told TM_BP_CREATED).  Where no node matches, a live process
 * or a program to run makes it pending (its condition compiles when it
 * binds), else it is an error.  Returns 0 with *out set (may be NULL), or
 * -1 after an error message, having created nothing.
 */
int tm_bp_create(struct tm_session *s, const struct tm_bp_spec *spec,
		 struct bp **out);
/* What tm_bp_change takes from the spec. */
enum tm_bp_change_what {
	TM_BP_SET_LOCATION = 1u << 0,
	TM_BP_SET_COND = 1u << 1,
	TM_BP_SET_IGNORE = 1u << 2,
	TM_BP_SET_ENABLED = 1u << 3,
	TM_BP_SET_DISP = 1u << 4
};
/*
 * Changes the fields `what` names to spec's values, all or none: a
 * location that does not bind or a condition that does not compile is
 * reported and changes nothing.  on_bp_event is told TM_BP_MODIFIED once.
 * Returns 0 or -1.
 */
int tm_bp_change(struct tm_session *s, struct bp *b, const struct tm_bp_spec *spec,
		 unsigned what);

int tm_bp_bind(struct tm_session *s, struct bp *b, const char *where, int quiet);
/* catch/tcatch's arguments ("nan", "exception TYPE if COND"): creates and
 * announces a catchpoint; 0 or -1 after an error message. */
int tm_catch(struct tm_session *s, const char *args, int disp, int announce,
	     struct bp **out);
int tm_bp_match(struct tm_session *s, struct bp *b, const struct tm_event *ev,
		uint32_t *focus);
int tm_bp_info(struct tm_session *s, const char *args, int watch_only);
int tm_bp_rebind_all(struct tm_session *s);
struct bp *tm_bp_find(struct tm_session *s, int num);
/* what on_bp_event reports (session.c calls it) */
enum tm_bp_event {
	TM_BP_CREATED = 0,
	TM_BP_MODIFIED,
	TM_BP_DELETED
};
void tm_bp_notify(struct tm_session *s, int what, struct bp *b);

/* Removes and frees a breakpoint (on_bp_event is told TM_BP_DELETED). */
void tm_bp_delete(struct tm_session *s, struct bp *b);

/* ------------------------------------------------------------- source-loc.c */
/*
 * FILE:LINE into a node address or pattern: the modules whose forward() is
 * the function around LINE (the greatest recorded line <= LINE in FILE,
 * FILE matched by its last component); several at one depth become one
 * pattern with * where their addresses differ.  Returns 0, or -1 after an
 * error message.
 */
int tm_source_location(struct tm_session *s, const char *file, unsigned line,
		       char *out, size_t len);
/* The same, with no message when quiet. */
int tm_source_resolve(struct tm_session *s, const char *file, unsigned line,
		      char *out, size_t len, int quiet);
/* Is loc FILE:LINE (the last ':' followed by digits alone, not "@R:...")?
 * Then 1, with FILE in file and LINE in *line. */
int tm_source_split(const char *loc, char *file, size_t len, unsigned *line);

/* ------------------------------------------------------------- cmd-run.c */
enum stop_why {
	STOP_NONE = 0,
	STOP_BREAK,
	STOP_WATCH,
	STOP_STEP,
	STOP_END,
	STOP_START,
	STOP_INTERRUPT,
	STOP_ERROR,
	STOP_CRASH
};
void tm_after_stop(struct tm_session *s);
/* start's temporary breakpoint at the root module's entry (nodes known). */
int tm_start_tbreak(struct tm_session *s);
/*
 * A stop as a front end sees it: report() fills one after printing the stop
 * and passes it to s->on_stop.  The breakpoint is copied (a tbreak is gone
 * by then); old/new are the watchpoint's values.
 */
struct tm_stop {
	int why;                /* enum stop_why */
	int finish;             /* finish reached the call's EXIT */
	int bpnum;              /* 0: no breakpoint */
	int bptype;             /* enum bp_type */
	int bpdisp;             /* enum bp_disp before the stop */
	char where[TM_ADDRESS_MAX + 1];
	const struct tm_val *old, *new_;
	int signo;              /* STOP_CRASH */
	const struct tm_crash *crash;   /* STOP_CRASH: the crash record */
};

/* what on_inferior reports (inferior.c, cmd-live.c) */
enum tm_inferior_event {
	TM_INF_STARTED = 0,     /* run started it, or attach */
	TM_INF_EXITED,          /* it ended; status says how */
	TM_INF_GONE             /* killed or detached: no exit status */
};

/* cmd-skip.c: does step pass over the event of node (a skipped module
 * call entered after from, the playhead's node or TM_NODE_NONE)? */
int tm_skip_event(struct tm_session *s, uint32_t node, uint32_t from);
int tm_info_skip(struct tm_session *s, const char *args);

/* cmd-inferior.c: the ranks of a distributed job */
int tm_info_inferiors(struct tm_session *s, const char *args);
void tm_inferior_note_switch(struct tm_session *s);

/* names for completion: NULL past the end (cmd-info.c, cmd-lang.c) */
const char *tm_info_sub_name(size_t i);
const char *tm_setting_name(size_t i);

/* ------------------------------------------------------------- cli.c */
int tm_cli_init(struct tm_session *s);
void tm_cli_done(struct tm_session *s);
char *tm_cli_readline(struct tm_session *s, const char *prompt);
void tm_install_sigint(void);

/* ------------------------------------------------------------- mi.c */
int tm_mi_init(struct tm_session *s, int version);
int tm_mi_run(struct tm_session *s);
void tm_mi_done(struct tm_session *s);
/* new-ui INTERP TTY: a second UI speaking MI on TTY beside the command
 * line; the CLI's input loop polls tm_mi_ui_fd (-1: none) and calls
 * tm_mi_ui_poll when it is readable (0: the UI's input ended). */
int tm_mi_new_ui(struct tm_session *s, const char *interp, const char *tty);
int tm_mi_ui_fd(struct tm_session *s);
int tm_mi_ui_poll(struct tm_session *s);

/* ------------------------------------------------------------- cmd-compare.c */
/* tm_tql_env.reference: the aligned reference event's tensor */
const struct tm_tensor *tm_compare_reference(void *user, const struct tm_event *ev,
					     struct tm_slot slot, int contents,
					     const struct tm_event **ref_event,
					     uint32_t *reason);
void tm_compare_free(struct tm_session *s);
int tm_info_compare(struct tm_session *s, const char *args);
/* What is loaded, for front ends (MI's -tmdb-compare): 0 when nothing. */
struct tm_compare_state {
	const char *path;       /* as given */
	int ranks;              /* aligners: one, or a reference job's ranks */
	int manifest;
	uint64_t events;
	int by_request;
	const tm_cmp_map *map;
};
int tm_compare_loaded(struct tm_session *s, struct tm_compare_state *out);
/* print EXPR: the reference's value beside the run's, when one is loaded */
void tm_compare_print_beside(struct tm_session *s, const char *expr);

/* ------------------------------------------------------------- command entries */
/*
 * Every command, in the order `help` and completion list them.  Adding
 * a command: its cmd_entry in a cmd-*.c and its name here; this one list
 * declares the entries and builds cmd.c's table.
 */
#define TM_COMMANDS(X) \
	X(file) X(run) X(continue) X(step) X(next) X(finish) X(rerun) X(until) \
	X(reverse_continue) X(reverse_step) X(reverse_next) X(stepi) X(nexti) X(reverse_stepi) \
	X(reverse_nexti) X(reverse_finish) X(goto) X(find) X(break) X(tbreak) X(catch) \
	X(tcatch) X(watch) X(condition) X(ignore) X(delete) X(clear) X(disable) X(enable) \
	X(commands) X(print) X(output) X(printf) X(echo) X(display) X(undisplay) X(backtrace) \
	X(frame) X(up) X(down) X(list) X(info) X(set) X(show) X(define) X(document) X(if) \
	X(while) X(source) X(help) X(apropos) X(quit) X(end) X(capture) X(level) X(record) \
	X(dump) X(heatmap) X(plot) X(x) X(tui) X(layout) X(attach) X(target) X(detach) X(kill) \
	X(inferior) X(tty) X(start) X(advance) X(skip) X(save) X(thread) X(new_ui) X(compare) \
	X(whatis) X(ptype) X(rbreak)

#define TM_CMD_DECLARE(n) extern const struct cmd_entry cmd_##n##_entry;
TM_COMMANDS(TM_CMD_DECLARE)
#undef TM_CMD_DECLARE

#endif /* TMDB_H */
