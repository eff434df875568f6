/*
 * probe.h -- the RuntimeProbe interface (ARCHITECTURE 2) as tmdb sees it.
 *
 * A probe is where events come from: a recorded .tmrun (probe-replay.c),
 * a live process over the wire (probe-remote.c), or the ranks of a
 * distributed job as one (probe-multi.c).  Every tmdb command talks to this
 * vtable only, never to tm_reader, so that the three are interchangeable.
 * The interface is deliberately narrow and event-oriented: a cursor that
 * sits between records and moves one record at a time in either direction,
 * seeks, and a "latest event of this node before that seq" query that
 * addressed TQL terms need.
 *
 * Breakpoints are not a probe operation: the session judges every event it
 * reads with the library's matcher (tm-breakpoint.h), live or replayed, so
 * that a command file stops in the same places both ways.  A live probe is
 * told them only through flow(), so that the model can run ahead between
 * them; the probe then pauses it where one of them could fire.
 */
#ifndef TMDB_PROBE_H
#define TMDB_PROBE_H

#include "tensormorph.h"

enum tm_dir {
	TM_DIR_FWD = 1,
	TM_DIR_BWD = -1
};

enum tm_seek {
	TM_SEEK_START = 0,
	TM_SEEK_END,
	TM_SEEK_SEQ,
	TM_SEEK_STEP,
	TM_SEEK_TIME
};

/* describe(): what the probe is and what it can do. */
struct tm_probe_info {
	const char *kind;               /* "replay", "live" */
	const char *source;             /* trace path or socket */
	int can_reverse;                /* replay: yes */
	int can_pause;                  /* live: yes */
	int can_capture;                /* on-demand full tensors */
	const struct tm_run_meta *meta; /* may be NULL */
	const struct tm_summary *summary; /* replay only, else NULL */
};

struct tm_probe;

/* A breakpoint as a live probe is asked to evaluate it (flow()). */
struct tm_probe_bp {
	int num;
	const char *where;              /* canonical address or pattern */
	const char *cond;               /* TQL, NULL: none */
};

/*
 * What only a live process or job answers (probe-remote.c, and a live
 * probe-multi.c over one remote per rank); a replay has none.
 */
struct tm_probe_process_ops {
	uint32_t (*pid)(struct tm_probe *p);            /* as DESCRIBE said; a job: rank 0's */
	int (*closed)(struct tm_probe *p);              /* every connection ended */
	/* Why it ended ("the probe went away"), the first time it is asked
	 * after it did; NULL otherwise. */
	const char *(*end_note)(struct tm_probe *p);
	/* "process 4242 (pytorch)", "2 ranks (processes 4242, 4243)" */
	const char *(*describe)(struct tm_probe *p);
	/* The file record FILE writes (NULL: none), its events so far, and
	 * why an earlier recording stopped on its own (NULL: it did not). */
	const char *(*recording)(struct tm_probe *p, uint64_t *events,
				 const char **note);
	/* Asks the program to end (wire KILL): its probe finishes the
	 * recording and the process dies of SIGKILL.  The caller waits for
	 * that and kills by signal what does not die. */
	void (*kill)(struct tm_probe *p);
};

struct tm_probe_ops {
	const char *name;
	const struct tm_probe_process_ops *process;     /* NULL: not live */
	int (*describe)(struct tm_probe *p, struct tm_probe_info *out);
	const tm_nodetab *(*nodes)(struct tm_probe *p);
	/*
	 * Returns the record after (FWD) or before (BWD) the cursor and moves
	 * the cursor over it.  Only EVENT, GAP and CRASH records.  TM_ERR_END at
	 * either end.  The record is valid until the next call.
	 */
	int (*next_event)(struct tm_probe *p, int dir, struct tm_record *rec);
	/* Cursor before the first record at or after the target. */
	int (*seek)(struct tm_probe *p, int kind, uint64_t value);
	/*
	 * The latest event of node with the given kind (and call, 0: any) with
	 * seq <= at_seq that holds slot (NULL: any event), deep-copied into
	 * *out (release with tm_event_release).  Events of the node without
	 * the slot are skipped: a probe may write a parameter's data and grad
	 * as separate events.
	 * TM_ERR_NOT_FOUND when there is none; when a gap hides what the answer
	 * would be, TM_ERR_NOT_FOUND with *reason set to the gap's reasons.
	 * Does not move the cursor.
	 */
	int (*latest)(struct tm_probe *p, uint32_t node, int evkind,
		      const struct tm_slot *slot, uint32_t call,
		      uint64_t at_seq, struct tm_event *out, uint32_t *reason);
	/* Full tensor of a node slot at its next occurrence (live only). */
	int (*capture)(struct tm_probe *p, uint32_t node, struct tm_slot slot);
	/* Last error text, never NULL. */
	const char *(*detail)(struct tm_probe *p);
	void (*detach)(struct tm_probe *p);
	/*
	 * Live probes (NULL for replay): how the model moves when a forward
	 * read passes the newest record.  ahead 0: one RESUME step per event,
	 * and a model running ahead is interrupted (it pauses soon after,
	 * the history then holds the events it sent meanwhile).  ahead 1:
	 * RESUME continue, the probe pausing the model at the n breakpoints
	 * bps (mirrored with BREAK_SET/BREAK_CLEAR, only what changed; a
	 * condition the probe refuses is mirrored without it).  Returns 1
	 * when the model runs ahead, 0 when it keeps stepping because a
	 * breakpoint cannot be mirrored.  The session still evaluates every
	 * event itself, so the stops are those of a replay.
	 */
	int (*flow)(struct tm_probe *p, int ahead, const struct tm_probe_bp *bps,
		    size_t n);
	/*
	 * The probe level of the nodes matching pattern ("": every node's
	 * default), from their next call on (live only; NULL for a replay,
	 * whose levels were fixed when it was recorded).
	 */
	int (*set_level)(struct tm_probe *p, const char *pattern, int level);
	/*
	 * The op patterns of a live probe (op events, doc/manual.md
	 * "Operations"): comma-separated, "" for none; applied when the
	 * model's current call returns.  NULL for a replay.
	 */
	int (*set_ops)(struct tm_probe *p, const char *patterns);
	/*
	 * The model's next resume re-runs the compiled region it is paused
	 * in, eagerly (wire RESUME rerun): the rest of the region's events
	 * come without a stop, the re-run's first one stops.  The model must
	 * be paused at the newest record.  NULL for a replay.
	 */
	int (*rerun)(struct tm_probe *p);
	/*
	 * Saves what a live probe sent so far as a .tmrun, and then each
	 * record as it arrives; path NULL stops (live only, NULL for a
	 * replay).
	 */
	int (*record)(struct tm_probe *p, const char *path);
	/*
	 * A flight-mode probe's window (wire FLIGHT; NULL for a replay): op
	 * TM_FLIGHT_DUMP writes it now (reason), TM_FLIGHT_STEPS keeps the
	 * last `steps` steps.  *text gets the probe's answer (what was
	 * written where), valid until the next call.  TM_ERR_UNSUPPORTED when
	 * the probe keeps no window.
	 */
	int (*flight)(struct tm_probe *p, int op, uint32_t steps, const char *reason,
		      const char **text);
	/*
	 * A distributed job's probe (probe-multi.c; NULL for one process):
	 * how many ranks, and the rank of the record at seq (-1: none).
	 */
	int (*nranks)(struct tm_probe *p);
	int (*rank_of)(struct tm_probe *p, uint64_t seq);
	/*
	 * As latest(), but among the events of one step of the node's rank
	 * with seq <= at_seq: ranks compared at equal steps (TQL's
	 * spread(@*:...)), each as far as the merged axis has reached at
	 * at_seq, so that live and replayed sessions agree.  *final_from is
	 * the first seq from which the answer cannot change any more (the rank
	 * is past the step there), UINT64_MAX if not yet known.  NULL for one
	 * process.
	 */
	int (*latest_in_step)(struct tm_probe *p, uint32_t node, int evkind,
			      const struct tm_slot *slot, uint32_t call,
			      uint64_t step, uint64_t at_seq, struct tm_event *out,
			      uint32_t *reason, uint64_t *final_from);
	/*
	 * The annotation key of ev's step (struct tm_annot: a serving
	 * probe's request ids, key "request"), NULL when none is known.
	 * Valid until the next call; does not move the cursor or touch the
	 * record ev came in.  NULL: the probe has none.
	 */
	const struct tm_annot *(*annotation)(struct tm_probe *p,
					     const struct tm_event *ev,
					     const char *key);
};

struct tm_probe {
	const struct tm_probe_ops *ops;
};

/*
 * Opens a .tmrun replay probe.  On failure returns the tm_err code and, in
 * *detail, a malloc'd message naming the file.
 */
int tm_probe_replay_open(const char *path, struct tm_probe **out,
			 char **detail);

/*
 * The ranks of a distributed job as one probe (probe-multi.c): from a run
 * manifest or a directory holding one, or from one probe per rank, subs[r]
 * being rank r's (taken over: they are detached with it, also on failure;
 * one whose metadata names another rank is refused).  source names it in
 * `info program`.
 */
int tm_probe_multi_open(const char *path, struct tm_probe **out, char **detail);
int tm_probe_multi_new(struct tm_probe **subs, size_t n, const char *source,
		       struct tm_probe **out, char **detail);
/* 1 if path is a run manifest or a directory (a multi-rank recording). */
/* The one run manifest in a directory ("DIR: no run manifest ..." else). */
int tm_probe_multi_find_manifest(const char *dir, char **path, char **detail);
int tm_probe_multi_is_manifest(const char *path);
/* Rank i's probe (and its rank), NULL past the last or if p is not multi. */
struct tm_probe *tm_probe_multi_sub(struct tm_probe *p, size_t i, int *rank);
/*
 * Non-stop (1): when the session stops, only the rank it stopped on is
 * paused and the others run on to their own breakpoints; all-stop (0, the
 * default) pauses every rank.  No-op if p is not multi.
 */
void tm_probe_multi_set_non_stop(struct tm_probe *p, int on);

#endif /* TMDB_PROBE_H */
