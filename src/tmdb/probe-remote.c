/*
 * probe-remote.c -- the RuntimeProbe over a live process (doc/wire.md).
 *
 * tmdb's commands move a cursor over records (probe.h); here the records
 * are those received so far, kept in memory in arrival order, so that
 * reverse-*, goto, find and addressed TQL terms work on the history exactly
 * as on a replayed trace.  Only moving forward past the newest record
 * touches the process: the model is kept paused at the newest event tmdb
 * has seen (INTERRUPT on attach), and each step forward past it is one
 * RESUME step -- the probe sends the next event and pauses again.  tmdb's
 * own breakpoint, step, next and finish logic then decides where to stop,
 * the same code that runs over a replay, so a command file prints the same
 * stops live and replayed.
 *
 * One round trip per event is slow (a few ten thousand events a second),
 * so `continue` lets the model run ahead (flow()): tmdb's breakpoints are
 * mirrored to the probe, which evaluates them with the same matcher
 * (tm-breakpoint.h) and pauses the model at every event where one of them could fire, and the
 * model is resumed with RESUME continue.  tmdb still reads and judges every
 * event; when it stops where the probe did not (Ctrl-C), it interrupts the
 * model, which pauses at its next event.
 *
 * A dead or misbehaving probe ends the history (TM_ERR_END, "End of
 * trace."); what was received stays browsable.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "tmdb.h"
#include "live.h"

#define CONNECT_TIMEOUT_MS 5000
#define POLL_MS 100
#define MAX_RECORDS (1u << 26)

/* One record of the history: events and crashes deep-copied. */
struct hrec {
	uint8_t type;
	union {
		struct tm_event event;
		struct tm_gap gap;
		struct tm_crash crash;
	} u;
};

struct remote {
	struct tm_probe base;   /* first: the vtable pointer */
	char *path;
	char *trace;            /* the .tmrun the probe writes (DESCRIBE) */
	int fd;
	tm_frame_decoder *dec;
	tm_decoder *rd;
	struct tm_msg *msg;     /* scratch: messages are big */

	/* what the probe said */
	uint32_t pid;
	uint32_t caps;
	char kind[64];
	char describe_text[128];
	struct tm_run_meta meta;
	int have_meta;
	tm_nodetab *nodes;

	/* the history and the cursor between its records */
	struct hrec *recs;
	size_t n, cap, pos;

	int stopped;            /* the model is paused (STOP received) */
	int hold;               /* reading forward ends with the history
				 * (tm_probe_hold): the model is not resumed */
	int closed;             /* BYE or a broken connection */
	char note[300];         /* the probe's word at HELLO (a takeover) */
	int last_result;        /* code of the last RESULT */
	char result_text[TM_MSG_MAX_STR + 1];   /* its text */
	int result_for;         /* request type it answered, -1 none yet */
	int described;          /* DESCRIBE received */
	char detail[512];

	/* running ahead (flow()) */
	int ahead;              /* resume with RESUME continue */
	int rerun;              /* the next resume is RESUME rerun */
	int running;            /* resumed with continue, no STOP since */
	int int_pending;        /* Ctrl-C: INTERRUPT sent, waiting for an event */
	int end_noted;          /* remote_end_note said why */
	char end_note[256];
	struct mirror *mir;     /* breakpoints as the probe has them */
	size_t nmir;

	/* annotations (a serving probe's request ids), in arrival order */
	struct rannot *ann;
	size_t nann, anncap;
	tm_decoder *adec;       /* decodes the one asked for last */
	size_t ann_cur;         /* its index, SIZE_MAX: none */
	struct tm_annot ann_out;

	/* a flight window read from the probe's trace (preload_window): the
	 * first live record joins it at join_seq */
	size_t win_recs;
	uint64_t win_end, join_seq;
	int joining;
	char win_reason[200];

	/* record FILE: the history so far, then each record as it comes */
	tm_writer *rec;
	char *rec_path;
	uint64_t rec_events;
	char rec_note[512];     /* why recording stopped on its own */
};

/* An annotation as received, re-encoded; at: history records before it. */
struct rannot {
	size_t at;
	uint64_t step, seq;
	char key[TM_ANNOT_MAX_KEY];
	struct tm_buf enc;
};

/* A breakpoint mirrored to the probe: what tmdb asked, what the probe took. */
struct mirror {
	int num;
	char *where;
	char *cond;             /* as tmdb has it, NULL: none */
	int state;              /* MIR_* */
};

enum {
	MIR_COND = 0,           /* the probe evaluates the condition */
	MIR_PLAIN,              /* condition refused: it stops at every candidate */
	MIR_REFUSED             /* not set: the model cannot run ahead */
};

static const struct tm_probe_ops remote_ops;

static struct remote *impl(struct tm_probe *p)
{
	return (struct remote *)p;
}

/* ------------------------------------------------------------- receiving */

static char *dup0(const char *s)
{
	return s ? strdup(s) : NULL;
}

static void free_meta(struct tm_run_meta *m)
{
	free((char *)m->probe_kind);
	free((char *)m->torch_version);
	free((char *)m->host);
	free((char *)m->command);
	memset(m, 0, sizeof(*m));
}

static void hrec_free(struct hrec *h)
{
	uint32_t i;

	if (h->type == TM_REC_EVENT) {
		tm_event_release(&h->u.event);
	} else if (h->type == TM_REC_CRASH) {
		for (i = 0; i < h->u.crash.nframes && i < TM_MAX_FRAMES; i++)
			free((char *)h->u.crash.frames[i]);
	}
}

static struct hrec *hrec_new(struct remote *rp)
{
	if (rp->n == rp->cap) {
		size_t cap = rp->cap ? rp->cap * 2 : 1024;
		struct hrec *nr;

		if (cap > MAX_RECORDS)
			return NULL;
		nr = realloc(rp->recs, cap * sizeof(*nr));
		if (!nr)
			return NULL;
		rp->recs = nr;
		rp->cap = cap;
	}
	memset(&rp->recs[rp->n], 0, sizeof(rp->recs[rp->n]));
	return &rp->recs[rp->n];
}

/* ------------------------------------------------------------- record FILE */

static int rec_write(tm_writer *w, const struct hrec *h)
{
	if (h->type == TM_REC_EVENT)
		return tm_writer_event(w, &h->u.event);
	if (h->type == TM_REC_GAP)
		return tm_writer_gap(w, &h->u.gap);
	return tm_writer_crash(w, &h->u.crash);
}

/* A write failed (disk full): stop recording, keep debugging. */
static void rec_fail(struct remote *rp, int err)
{
	snprintf(rp->rec_note, sizeof(rp->rec_note), "Recording to %.400s stopped: %s.",
		 rp->rec_path, tm_strerror(err));
	tm_writer_abandon(rp->rec);
	rp->rec = NULL;
	free(rp->rec_path);
	rp->rec_path = NULL;
}

/* Keeps one record frame: nodes into the table, the rest into the history. */
/*
 * Keeps an annotation, re-encoded (the decoder's copy is gone with the next
 * frame), and writes it to a recording at once: it came before the events
 * of its step, and a trace keeps stream order.  A second one of the same
 * step and key replaces the first.
 */
static int take_annot(struct remote *rp, const struct tm_annot *a)
{
	struct rannot *ra = NULL;
	int err;

	if (rp->nann && rp->ann[rp->nann - 1].step == a->step &&
	    rp->ann[rp->nann - 1].seq == a->seq && !strcmp(rp->ann[rp->nann - 1].key, a->key)) {
		ra = &rp->ann[rp->nann - 1];
		if (rp->ann_cur == rp->nann - 1)
			rp->ann_cur = SIZE_MAX;
	} else {
		if (rp->nann == rp->anncap) {
			size_t cap = rp->anncap ? rp->anncap * 2 : 64;
			struct rannot *na;

			if (cap > MAX_RECORDS || !(na = realloc(rp->ann, cap * sizeof(*na))))
				return TM_ERR_NOMEM;
			rp->ann = na;
			rp->anncap = cap;
		}
		ra = &rp->ann[rp->nann++];
		memset(ra, 0, sizeof(*ra));
	}
	ra->at = rp->n;
	ra->step = a->step;
	ra->seq = a->seq;
	snprintf(ra->key, sizeof(ra->key), "%s", a->key);
	ra->enc.len = 0;
	err = tm_encode_annot(&ra->enc, a);
	if (err) {
		tm_buf_free(&ra->enc);
		rp->nann--;
		return err;
	}
	if (rp->rec) {
		int werr = tm_writer_raw(rp->rec, ra->enc.data, ra->enc.len);

		if (werr)
			rec_fail(rp, werr);
	}
	return TM_OK;
}

static int join(struct remote *rp, struct tm_record *rec);

static int take_record(struct remote *rp, const struct tm_frame *f)
{
	struct tm_record rec;
	struct hrec *h;
	size_t used;
	uint32_t i;
	int err;

	err = tm_decode_record(rp->rd, f->payload, f->len, &rec, &used);
	if (err) {
		snprintf(rp->detail, sizeof(rp->detail), "bad record from the probe: %s",
			 tm_decoder_detail(rp->rd));
		return err;
	}
	switch (rec.type) {
	case TM_REC_META:
		free_meta(&rp->meta);
		rp->meta = rec.u.meta;
		rp->meta.probe_kind = dup0(rec.u.meta.probe_kind);
		rp->meta.torch_version = dup0(rec.u.meta.torch_version);
		rp->meta.host = dup0(rec.u.meta.host);
		rp->meta.command = dup0(rec.u.meta.command);
		rp->meta.npairs = 0;    /* the extras are not kept */
		rp->have_meta = 1;
		return TM_OK;
	case TM_REC_NODE:
		err = tm_nodetab_put(rp->nodes, &rec.u.node);
		if (!err && rp->rec) {
			uint32_t id;
			int werr = tm_writer_node(rp->rec, &rec.u.node, &id);

			if (werr)
				rec_fail(rp, werr);
		}
		return err;
	case TM_REC_ANNOT:
		return take_annot(rp, &rec.u.annot);
	case TM_REC_EVENT:
	case TM_REC_GAP:
	case TM_REC_CRASH:
		break;
	default:
		return TM_OK;   /* a newer record type: skip */
	}
	if (join(rp, &rec))
		return TM_OK;
	h = hrec_new(rp);
	if (!h)
		return TM_ERR_NOMEM;
	h->type = rec.type;
	if (rec.type == TM_REC_EVENT) {
		err = tm_event_copy(&h->u.event, &rec.u.event);
		if (err)
			return err;
	} else if (rec.type == TM_REC_GAP) {
		h->u.gap = rec.u.gap;
	} else {
		h->u.crash = rec.u.crash;
		for (i = 0; i < rec.u.crash.nframes && i < TM_MAX_FRAMES; i++)
			h->u.crash.frames[i] = dup0(rec.u.crash.frames[i]);
	}
	rp->n++;
	if (rp->rec) {
		err = rec_write(rp->rec, h);
		if (err)
			rec_fail(rp, err);
		else if (h->type == TM_REC_EVENT)
			rp->rec_events++;
	}
	return TM_OK;
}

/*
 * The first live record after a preloaded window: what the trace held
 * already is dropped, and seqs neither in the trace nor sent (the writer
 * had not written them yet) are a NOT_KEPT gap, so the history still
 * covers every seq.  1: drop the record.
 */
static int join(struct remote *rp, struct tm_record *rec)
{
	uint64_t first, last, step;
	struct hrec *h;

	if (!rp->joining)
		return 0;
	if (rec->type == TM_REC_EVENT) {
		first = last = rec->u.event.seq;
		step = rec->u.event.step;
	} else if (rec->type == TM_REC_GAP) {
		first = rec->u.gap.first_seq;
		last = rec->u.gap.last_seq;
		step = rec->u.gap.step;
	} else {
		first = last = rec->u.crash.seq;
		step = rec->u.crash.step;
	}
	if (last < rp->join_seq)
		return rec->type != TM_REC_CRASH;
	rp->joining = 0;
	if (rec->type == TM_REC_GAP && first < rp->join_seq) {
		uint64_t cut = rp->join_seq - first;

		rec->u.gap.count = rec->u.gap.count > cut ? rec->u.gap.count - cut : 1;
		rec->u.gap.first_seq = rp->join_seq;
	} else if (first > rp->join_seq && (h = hrec_new(rp)) != NULL) {
		h->type = TM_REC_GAP;
		h->u.gap.first_seq = rp->join_seq;
		h->u.gap.last_seq = first - 1;
		h->u.gap.count = first - rp->join_seq;
		h->u.gap.reason = TM_GAP_NOT_KEPT;
		h->u.gap.step = step;
		rp->n++;
	}
	return 0;
}

/*
 * Before SUBSCRIBE: a flight-mode probe whose window is written (its trace
 * names the trigger) gives tmdb the history before it attached, read from
 * that trace when this host can read it (an absolute path: the probe's
 * working directory is not ours).  Anything else keeps the history empty.
 */
#define MAX_WINDOW_RECORDS (1u << 20)
static void preload_window(struct remote *rp, const char *trace)
{
	const struct tm_run_meta *meta;
	const char *reason = NULL, *end = NULL;
	struct tm_record rec;
	tm_reader *r;
	struct hrec *h;
	uint32_t i;

	if (!(rp->caps & TM_CAP_WINDOW) || trace[0] != '/' ||
	    tm_reader_open(trace, 0, &r, NULL) != TM_OK)
		return;
	meta = tm_reader_meta(r);
	for (i = 0; meta && i < meta->npairs; i++) {
		if (!strcmp(meta->keys[i], "flight.trigger"))
			reason = meta->values[i];
		else if (!strcmp(meta->keys[i], "flight.window_end"))
			end = meta->values[i];
	}
	if (!reason || !end) {
		tm_reader_close(r);
		return;
	}
	rp->win_end = strtoull(end, NULL, 10);
	snprintf(rp->win_reason, sizeof(rp->win_reason), "%s", reason);
	while (rp->n < MAX_WINDOW_RECORDS && tm_reader_next(r, &rec) == TM_OK) {
		if (rec.type != TM_REC_EVENT && rec.type != TM_REC_GAP &&
		    rec.type != TM_REC_CRASH)
			continue;
		h = hrec_new(rp);
		if (!h)
			break;
		h->type = rec.type;
		if (rec.type == TM_REC_EVENT) {
			if (tm_event_copy(&h->u.event, &rec.u.event))
				break;
			rp->join_seq = rec.u.event.seq + 1;
		} else if (rec.type == TM_REC_GAP) {
			h->u.gap = rec.u.gap;
			rp->join_seq = rec.u.gap.last_seq + 1;
		} else {
			h->u.crash = rec.u.crash;
			for (i = 0; i < rec.u.crash.nframes && i < TM_MAX_FRAMES; i++)
				h->u.crash.frames[i] = dup0(rec.u.crash.frames[i]);
		}
		rp->n++;
	}
	tm_reader_close(r);
	rp->win_recs = rp->n;
	rp->joining = rp->n > 0;
}

size_t tm_probe_remote_window(struct tm_probe *p, uint64_t *end_seq, const char **reason,
			      const char **trace)
{
	struct remote *rp;

	if (!p || p->ops != &remote_ops)
		return 0;
	rp = impl(p);
	*end_seq = rp->win_end;
	*reason = rp->win_reason;
	*trace = rp->trace;
	return rp->win_recs;
}

static void take_msg(struct remote *rp, const struct tm_msg *m)
{
	switch (m->type) {
	case TM_MSG_DESCRIBE:
		rp->described = 1;
		rp->pid = m->u.hello.pid;
		rp->caps = m->u.hello.caps;
		snprintf(rp->kind, sizeof(rp->kind), "%.63s", m->u.hello.name);
		free(rp->trace);
		rp->trace = m->u.hello.trace[0] ? strdup(m->u.hello.trace) : NULL;
		break;
	case TM_MSG_STOP:
		rp->stopped = 1;
		rp->running = 0;
		break;
	case TM_MSG_RESULT:
		if (m->u.result.request == TM_MSG_HELLO && !m->u.result.code) {
			/* not an answer to a request: news (we took over) */
			snprintf(rp->note, sizeof(rp->note), "%.290s", m->u.result.text);
			break;
		}
		rp->last_result = (int)m->u.result.code;
		rp->result_for = m->u.result.request;
		snprintf(rp->result_text, sizeof(rp->result_text), "%s", m->u.result.text);
		if (m->u.result.code)
			snprintf(rp->detail, sizeof(rp->detail), "the probe refused %s: %.400s",
				 tm_msg_name(m->u.result.request) ?
				 tm_msg_name(m->u.result.request) : "a request",
				 m->u.result.text[0] ? m->u.result.text :
				 tm_strerror((int)m->u.result.code));
		break;
	case TM_MSG_BYE:
		rp->closed = 1;
		snprintf(rp->detail, sizeof(rp->detail), "the probe closed the "
			 "connection: %.400s", m->u.result.text);
		snprintf(rp->end_note, sizeof(rp->end_note), "the probe closed the "
			 "connection (%.200s)", m->u.result.text[0] ?
			 m->u.result.text : tm_strerror((int)m->u.result.code));
		break;
	default:
		break;
	}
}

static void hang_up(struct remote *rp)
{
	if (!rp->end_note[0])
		snprintf(rp->end_note, sizeof(rp->end_note), "%.200s",
			 rp->detail[0] ? rp->detail : "the connection closed");
	rp->closed = 1;
	rp->stopped = 0;
	rp->running = 0;
	if (rp->fd >= 0)
		close(rp->fd);
	rp->fd = -1;
}

/*
 * Reads what is there (waiting up to timeout_ms for the first bytes) and
 * takes every whole frame.  Returns the number of frames taken; a broken
 * stream hangs up.
 */
static int pump(struct remote *rp, int timeout_ms)
{
	uint8_t buf[65536];
	struct tm_frame f;
	struct pollfd pf;
	ssize_t got;
	int n = 0, err;

	if (rp->fd < 0)
		return 0;
	pf.fd = rp->fd;
	pf.events = POLLIN;
	if (poll(&pf, 1, timeout_ms) <= 0)
		return 0;
	got = read(rp->fd, buf, sizeof(buf));
	if (got < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (got <= 0) {
		if (!rp->closed)
			snprintf(rp->detail, sizeof(rp->detail),
				 "the probe went away");
		hang_up(rp);
		return 0;
	}
	if (tm_frame_decoder_feed(rp->dec, buf, (size_t)got)) {
		hang_up(rp);
		return 0;
	}
	while ((err = tm_frame_decoder_next(rp->dec, &f)) == TM_OK) {
		n++;
		if (f.type < 64) {
			err = take_record(rp, &f);
		} else {
			err = tm_msg_decode(&f, rp->msg);
			if (err == TM_ERR_UNSUPPORTED)
				err = TM_OK;
			else if (err == TM_OK)
				take_msg(rp, rp->msg);
		}
		if (err) {
			if (!rp->detail[0])
				snprintf(rp->detail, sizeof(rp->detail),
					 "bad message from the probe: %s", tm_strerror(err));
			hang_up(rp);
			return n;
		}
	}
	if (err != TM_ERR_AGAIN) {
		snprintf(rp->detail, sizeof(rp->detail), "bad frame from the probe: %s",
			 tm_strerror(err));
		hang_up(rp);
	}
	return n;
}

static int send_msg(struct remote *rp, struct tm_msg *m)
{
	struct tm_buf b = { 0 };
	size_t off = 0;
	int err;

	if (rp->fd < 0)
		return TM_ERR_CLOSED;
	err = tm_msg_encode(&b, m);
	while (!err && off < b.len) {
		ssize_t w = send(rp->fd, b.data + off, b.len - off, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			hang_up(rp);
			err = TM_ERR_CLOSED;
			break;
		}
		off += (size_t)w;
	}
	tm_buf_free(&b);
	return err;
}

/*
 * Sends a request and waits for its RESULT (records on the way are kept).
 * The timeout counts only silent polls, so a probe that keeps talking but
 * never answers would hold tmdb forever: Ctrl-C gives up waiting.
 */
static int request(struct remote *rp, struct tm_msg *m, int timeout_ms)
{
	int want = m->type, waited = 0, err;

	rp->result_for = -1;
	err = send_msg(rp, m);
	if (err)
		return err;
	while (!rp->closed && waited < timeout_ms && !tm_interrupted) {
		if (!pump(rp, POLL_MS))
			waited += POLL_MS;
		if (rp->result_for == want)
			return rp->last_result;
	}
	if (tm_interrupted && !rp->detail[0])
		snprintf(rp->detail, sizeof(rp->detail),
			 "interrupted while waiting for the probe");
	return TM_ERR_CLOSED;
}

/* ------------------------------------------------------------- the vtable */

static int remote_describe(struct tm_probe *p, struct tm_probe_info *out)
{
	struct remote *rp = impl(p);

	memset(out, 0, sizeof(*out));
	out->kind = "live";
	out->source = rp->path;
	out->can_reverse = 1;
	out->can_pause = !!(rp->caps & TM_CAP_PAUSE);
	out->can_capture = !!(rp->caps & TM_CAP_CAPTURE);
	out->meta = rp->have_meta ? &rp->meta : NULL;
	return TM_OK;
}

static const tm_nodetab *remote_nodes(struct tm_probe *p)
{
	return impl(p)->nodes;
}

static void to_record(const struct hrec *h, struct tm_record *rec)
{
	memset(rec, 0, sizeof(*rec));
	rec->type = h->type;
	if (h->type == TM_REC_EVENT)
		rec->u.event = h->u.event;
	else if (h->type == TM_REC_GAP)
		rec->u.gap = h->u.gap;
	else
		rec->u.crash = h->u.crash;
}

/*
 * A paused model takes its next step, or runs ahead to the mirrored
 * breakpoints; 1 if resumed, 0 if it was not paused, -1 if the connection
 * broke.  A probe that records and notifies never waited: its STOP was
 * news, and nothing is sent.
 */
static int resume_paused(struct remote *rp)
{
	struct tm_msg *m = rp->msg;

	if (!rp->stopped)
		return 0;
	rp->stopped = 0;
	if (!(rp->caps & TM_CAP_PAUSE))
		return 0;
	memset(m, 0, sizeof(*m));
	m->type = TM_MSG_RESUME;
	m->u.resume.mode = rp->rerun ? TM_RESUME_RERUN :
		rp->ahead ? TM_RESUME_CONTINUE : TM_RESUME_STEP;
	m->u.resume.count = 1;
	rp->running = rp->ahead || rp->rerun;
	rp->rerun = 0;
	return send_msg(rp, m) ? -1 : 1;
}

/*
 * Forward past the newest record: let the model take one step and wait for
 * what it sends.  Ctrl-C while the model runs gives up waiting.
 */
static int remote_next(struct tm_probe *p, int dir, struct tm_record *rec)
{
	struct remote *rp = impl(p);
	struct tm_msg *m = rp->msg;

	if (dir == TM_DIR_BWD) {
		if (!rp->pos)
			return TM_ERR_END;
		to_record(&rp->recs[--rp->pos], rec);
		return TM_OK;
	}
	while (rp->pos == rp->n) {
		if (rp->closed || rp->hold)
			return TM_ERR_END;
		if (tm_interrupted && (rp->int_pending || rp->stopped)) {
			/* A second Ctrl-C: stop waiting for a busy model. */
			snprintf(rp->detail, sizeof(rp->detail),
				 "interrupted while waiting for the model");
			return TM_ERR_AGAIN;
		}
		if (tm_interrupted) {
			/*
			 * Ctrl-C while the model computes: it pauses at its
			 * next event, which the scan then stops at (the flag is
			 * raised again when it arrives).
			 */
			memset(m, 0, sizeof(*m));
			m->type = TM_MSG_INTERRUPT;
			if (send_msg(rp, m))
				return TM_ERR_END;
			rp->int_pending = 1;
			tm_interrupted = 0;
		}
		if (resume_paused(rp) < 0)
			return TM_ERR_END;
		pump(rp, POLL_MS);
		if (rp->int_pending && rp->stopped && rp->pos == rp->n) {
			/* A stop is a stop: the probe held the model between
			 * events (tm_server_hold), right after the last one we
			 * have; the scan stays there, and the model with it. */
			rp->int_pending = 0;
			snprintf(rp->detail, sizeof(rp->detail),
				 "the model is held between events");
			return TM_ERR_AGAIN;
		}
	}
	if (rp->int_pending) {
		rp->int_pending = 0;
		tm_interrupted = 1;
	}
	to_record(&rp->recs[rp->pos++], rec);
	return TM_OK;
}

/* The first record whose key is >= value (history is in seq order). */
static size_t first_at(struct remote *rp, int kind, uint64_t value)
{
	size_t i;

	for (i = 0; i < rp->n; i++) {
		const struct hrec *h = &rp->recs[i];
		uint64_t seq, step, t;

		if (h->type == TM_REC_EVENT) {
			seq = h->u.event.seq;
			step = h->u.event.step;
			t = h->u.event.time_ns;
		} else if (h->type == TM_REC_GAP) {
			seq = h->u.gap.last_seq;
			step = h->u.gap.step;
			t = h->u.gap.time_ns;
		} else {
			seq = h->u.crash.seq;
			step = h->u.crash.step;
			t = h->u.crash.time_ns;
		}
		if ((kind == TM_SEEK_SEQ && seq >= value) ||
		    (kind == TM_SEEK_STEP && step >= value) ||
		    (kind == TM_SEEK_TIME && t >= value))
			return i;
	}
	return rp->n;
}

static int remote_seek(struct tm_probe *p, int kind, uint64_t value)
{
	struct remote *rp = impl(p);

	switch (kind) {
	case TM_SEEK_START: rp->pos = 0; return TM_OK;
	case TM_SEEK_END: rp->pos = rp->n; return TM_OK;
	case TM_SEEK_SEQ:
	case TM_SEEK_STEP:
	case TM_SEEK_TIME:
		rp->pos = first_at(rp, kind, value);
		return TM_OK;
	default:
		return TM_ERR_INVALID_ARG;
	}
}

/* As probe-replay.c: walk back from at_seq; a gap on the way hides the answer. */
static int remote_latest(struct tm_probe *p, uint32_t node, int evkind,
			 const struct tm_slot *slot, uint32_t call,
			 uint64_t at_seq, struct tm_event *out, uint32_t *reason)
{
	struct remote *rp = impl(p);
	size_t i = rp->n;

	*reason = 0;
	while (i-- > 0) {
		const struct hrec *h = &rp->recs[i];

		if (h->type == TM_REC_GAP) {
			if (h->u.gap.first_seq > at_seq)
				continue;
			*reason = h->u.gap.reason ? h->u.gap.reason : TM_GAP_BACKPRESSURE;
			return TM_ERR_NOT_FOUND;
		}
		if (h->type != TM_REC_EVENT || h->u.event.seq > at_seq)
			continue;
		if (h->u.event.node != node || h->u.event.kind != evkind)
			continue;
		if (call && h->u.event.call != call)
			continue;
		if (!tm_event_holds_slot(&h->u.event, slot))
			continue;
		return tm_event_copy(out, &h->u.event);
	}
	return TM_ERR_NOT_FOUND;
}

static int remote_set_level(struct tm_probe *p, const char *pattern, int level)
{
	struct remote *rp = impl(p);
	struct tm_msg *m = rp->msg;

	memset(m, 0, sizeof(*m));
	m->type = TM_MSG_SET_LEVEL;
	m->u.level.level = (uint8_t)level;
	snprintf(m->u.level.pattern, sizeof(m->u.level.pattern), "%s", pattern);
	return request(rp, m, CONNECT_TIMEOUT_MS);
}

static int remote_set_ops(struct tm_probe *p, const char *patterns)
{
	struct remote *rp = impl(p);
	struct tm_msg *m = rp->msg;

	if (!(rp->caps & TM_CAP_OPS)) {
		snprintf(rp->detail, sizeof(rp->detail), "the probe records no op events");
		return TM_ERR_UNSUPPORTED;
	}
	memset(m, 0, sizeof(*m));
	m->type = TM_MSG_SET_OPS;
	snprintf(m->u.level.pattern, sizeof(m->u.level.pattern), "%s", patterns);
	return request(rp, m, CONNECT_TIMEOUT_MS);
}

static int remote_rerun(struct tm_probe *p)
{
	struct remote *rp = impl(p);

	if (!rp->stopped || rp->pos != rp->n || !(rp->caps & TM_CAP_PAUSE)) {
		snprintf(rp->detail, sizeof(rp->detail), "the model is not paused at the "
			 "playhead (go to its newest event first)");
		return TM_ERR_INVALID_ARG;
	}
	rp->rerun = 1;
	return TM_OK;
}

static int remote_flight(struct tm_probe *p, int op, uint32_t steps, const char *reason,
			 const char **text)
{
	struct remote *rp = impl(p);
	struct tm_msg *m = rp->msg;
	int err;

	*text = "";
	if (!(rp->caps & TM_CAP_FLIGHT)) {
		snprintf(rp->detail, sizeof(rp->detail), "the probe writes no trace to keep "
			 "a flight window for (tensormorph-probe record, or attach(..., "
			 "record=PATH))");
		return TM_ERR_UNSUPPORTED;
	}
	memset(m, 0, sizeof(*m));
	m->type = TM_MSG_FLIGHT;
	m->u.flight.op = (uint8_t)op;
	m->u.flight.steps = steps;
	snprintf(m->u.flight.reason, sizeof(m->u.flight.reason), "%s", reason ? reason : "");
	/* a dump writes the window: give it longer than a plain request */
	err = request(rp, m, 4 * CONNECT_TIMEOUT_MS);
	if (!err)
		*text = rp->result_text;
	return err;
}

/*
 * record FILE: writes the metadata, the nodes and the history received so
 * far into a new .tmrun, then every record as it arrives, until record
 * stop (path NULL) or the end of the session.
 */
static int remote_record(struct tm_probe *p, const char *path)
{
	struct remote *rp = impl(p);
	tm_writer *w = NULL;
	uint32_t i, n, id;
	size_t k, a;
	int err;

	if (!path) {
		if (!rp->rec)
			return TM_ERR_INVALID_ARG;
		err = tm_writer_close(rp->rec);
		rp->rec = NULL;
		snprintf(rp->detail, sizeof(rp->detail), "%.400s", rp->rec_path);
		free(rp->rec_path);
		rp->rec_path = NULL;
		return err;
	}
	if (rp->rec) {
		snprintf(rp->detail, sizeof(rp->detail), "already recording to %.400s",
			 rp->rec_path);
		return TM_ERR_INVALID_ARG;
	}
	err = tm_writer_open(path, NULL, &w);
	if (err) {
		snprintf(rp->detail, sizeof(rp->detail), "%.400s: %s", path,
			 w ? tm_writer_detail(w) : tm_strerror(err));
		tm_writer_abandon(w);
		return err;
	}
	if (rp->have_meta)
		err = tm_writer_meta(w, &rp->meta);
	n = tm_nodetab_count(rp->nodes);
	for (i = 0; !err && i < n; i++)
		err = tm_writer_node(w, tm_nodetab_get(rp->nodes, i), &id);
	rp->rec_events = 0;
	/* each annotation before the record it preceded: stream order */
	for (k = 0, a = 0; !err && k <= rp->n; k++) {
		while (!err && a < rp->nann && rp->ann[a].at <= k) {
			err = tm_writer_raw(w, rp->ann[a].enc.data, rp->ann[a].enc.len);
			a++;
		}
		if (err || k == rp->n)
			break;
		err = rec_write(w, &rp->recs[k]);
		if (rp->recs[k].type == TM_REC_EVENT)
			rp->rec_events++;
	}
	if (!err)
		err = tm_writer_flush(w);
	if (err) {
		snprintf(rp->detail, sizeof(rp->detail), "%.400s: %s", path,
			 tm_strerror(err));
		tm_writer_abandon(w);
		return err;
	}
	rp->rec = w;
	rp->rec_path = strdup(path);
	rp->rec_note[0] = 0;
	return TM_OK;
}

/* What record is doing, for the record command's messages. */
static const char *remote_recording(struct tm_probe *p, uint64_t *events,
				    const char **note)
{
	struct remote *rp = impl(p);

	*events = rp->rec_events;
	*note = rp->rec_note[0] ? rp->rec_note : NULL;
	return rp->rec ? rp->rec_path : NULL;
}

static int remote_capture(struct tm_probe *p, uint32_t node, struct tm_slot slot)
{
	struct remote *rp = impl(p);
	struct tm_msg *m = rp->msg;

	memset(m, 0, sizeof(*m));
	m->type = TM_MSG_CAPTURE;
	m->u.capture.node = node;
	m->u.capture.slot = slot;
	return request(rp, m, CONNECT_TIMEOUT_MS);
}

static const char *remote_detail(struct tm_probe *p)
{
	return impl(p)->detail;
}

/* DETACH: the probe clears what we asked for and lets the model run. */
static void remote_detach(struct tm_probe *p)
{
	struct remote *rp = impl(p);
	size_t i;

	if (!rp)
		return;
	if (rp->fd >= 0 && !rp->closed) {
		memset(rp->msg, 0, sizeof(*rp->msg));
		rp->msg->type = TM_MSG_DETACH;
		send_msg(rp, rp->msg);
	}
	if (rp->fd >= 0)
		close(rp->fd);
	if (rp->rec) {
		/* the end of the session ends the recording: a whole file */
		tm_writer_close(rp->rec);
		free(rp->rec_path);
	}
	for (i = 0; i < rp->n; i++)
		hrec_free(&rp->recs[i]);
	free(rp->recs);
	for (i = 0; i < rp->nann; i++)
		tm_buf_free(&rp->ann[i].enc);
	free(rp->ann);
	tm_decoder_free(rp->adec);
	for (i = 0; i < rp->nmir; i++) {
		free(rp->mir[i].where);
		free(rp->mir[i].cond);
	}
	free(rp->mir);
	free_meta(&rp->meta);
	tm_nodetab_free(rp->nodes);
	tm_frame_decoder_free(rp->dec);
	tm_decoder_free(rp->rd);
	free(rp->msg);
	free(rp->path);
	free(rp->trace);
	free(rp);
}

/* ------------------------------------------------------------- running ahead */

static int same_str(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

/* BREAK_SET num where cond (NULL: none); the probe's answer. */
static int break_set(struct remote *rp, int num, const char *where,
		     const char *cond)
{
	struct tm_msg *m = rp->msg;

	memset(m, 0, sizeof(*m));
	m->type = TM_MSG_BREAK_SET;
	m->u.brk.id = (uint32_t)num;
	if (strlen(where) >= sizeof(m->u.brk.where) ||
	    (cond && strlen(cond) >= sizeof(m->u.brk.cond)))
		return TM_ERR_TOO_LARGE;
	snprintf(m->u.brk.where, sizeof(m->u.brk.where), "%s", where);
	snprintf(m->u.brk.cond, sizeof(m->u.brk.cond), "%s", cond ? cond : "");
	return request(rp, m, CONNECT_TIMEOUT_MS);
}

static int break_clear(struct remote *rp, int num)
{
	struct tm_msg *m = rp->msg;

	memset(m, 0, sizeof(*m));
	m->type = TM_MSG_BREAK_CLEAR;
	m->u.brk.id = (uint32_t)num;
	return request(rp, m, CONNECT_TIMEOUT_MS);
}

static void mirror_drop(struct remote *rp, size_t i)
{
	free(rp->mir[i].where);
	free(rp->mir[i].cond);
	rp->mir[i] = rp->mir[--rp->nmir];
}

/*
 * Makes the probe's breakpoints those of bps; returns 1 if every one is
 * set (with or without its condition).  A refused condition (addressed
 * terms, tmdb's $variables, TQL the probe's VM does not know) is set
 * without it: the probe then pauses at every candidate event and tmdb's
 * own evaluation decides, as it does for every event anyway.
 */
static int mirror_sync(struct remote *rp, const struct tm_probe_bp *bps, size_t n)
{
	size_t i, j;
	int ok = 1, err;

	for (i = 0; i < rp->nmir;) {
		for (j = 0; j < n && bps[j].num != rp->mir[i].num; j++)
			;
		if (j == n || !same_str(bps[j].where, rp->mir[i].where) ||
		    !same_str(bps[j].cond, rp->mir[i].cond)) {
			if (rp->mir[i].state != MIR_REFUSED &&
			    break_clear(rp, rp->mir[i].num))
				return 0;
			mirror_drop(rp, i);
			continue;
		}
		i++;
	}
	for (j = 0; j < n; j++) {
		struct mirror *mi = NULL, *nm;

		for (i = 0; i < rp->nmir; i++)
			if (rp->mir[i].num == bps[j].num)
				mi = &rp->mir[i];
		if (mi) {
			if (mi->state == MIR_REFUSED)
				ok = 0;
			continue;
		}
		nm = realloc(rp->mir, (rp->nmir + 1) * sizeof(*nm));
		if (!nm)
			return 0;
		rp->mir = nm;
		mi = &rp->mir[rp->nmir];
		mi->num = bps[j].num;
		mi->where = strdup(bps[j].where);
		mi->cond = bps[j].cond ? strdup(bps[j].cond) : NULL;
		if (!mi->where || (bps[j].cond && !mi->cond)) {
			free(mi->where);
			free(mi->cond);
			return 0;
		}
		rp->nmir++;
		err = break_set(rp, mi->num, mi->where, mi->cond);
		mi->state = MIR_COND;
		if (err && mi->cond && !rp->closed) {
			err = break_set(rp, mi->num, mi->where, NULL);
			mi->state = MIR_PLAIN;
		}
		if (err) {
			mi->state = MIR_REFUSED;
			ok = 0;
			if (rp->closed)
				return 0;
		}
	}
	return ok;
}

static int remote_flow(struct tm_probe *p, int ahead,
		       const struct tm_probe_bp *bps, size_t n)
{
	struct remote *rp = impl(p);

	if (rp->closed) {
		rp->ahead = 0;
		return 0;
	}
	if (ahead && !(rp->caps & TM_CAP_PAUSE))
		ahead = 0;
	if (ahead)
		ahead = mirror_sync(rp, bps, n);
	if (!ahead && rp->running && !rp->closed) {
		/* Pause a model running ahead; it stops at its next event. */
		memset(rp->msg, 0, sizeof(*rp->msg));
		rp->msg->type = TM_MSG_INTERRUPT;
		send_msg(rp, rp->msg);
		rp->running = 0;
	}
	rp->ahead = ahead;
	return ahead;
}

/* Annotations arrive in step order: a binary search for the step. */
static const struct tm_annot *remote_annotation(struct tm_probe *p,
						const struct tm_event *ev,
						const char *key)
{
	struct remote *rp = impl(p);
	struct tm_record rec;
	size_t lo = 0, hi = rp->nann, i, used, best;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (rp->ann[mid].step < ev->step)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* the latest made at or before the event, as the probe's server
	 * answers when it evaluates a condition there */
	best = SIZE_MAX;
	for (i = lo; i < rp->nann && rp->ann[i].step == ev->step; i++)
		if (rp->ann[i].seq <= ev->seq && !strcmp(rp->ann[i].key, key))
			best = i;
	if (best == SIZE_MAX)
		return NULL;
	if (rp->ann_cur == best)
		return &rp->ann_out;
	if (!rp->adec && !(rp->adec = tm_decoder_new()))
		return NULL;
	if (tm_decode_record(rp->adec, rp->ann[best].enc.data, rp->ann[best].enc.len,
			     &rec, &used) || rec.type != TM_REC_ANNOT)
		return NULL;
	rp->ann_out = rec.u.annot;
	rp->ann_cur = best;
	return &rp->ann_out;
}

static uint32_t remote_pid(struct tm_probe *p)
{
	return impl(p)->pid;
}

static int remote_closed(struct tm_probe *p)
{
	return impl(p)->closed;
}

static const char *remote_end_note(struct tm_probe *p)
{
	struct remote *rp = impl(p);

	if (!rp->closed || rp->end_noted)
		return NULL;
	rp->end_noted = 1;
	return rp->end_note[0] ? rp->end_note : "the connection closed";
}

static const char *remote_process(struct tm_probe *p)
{
	struct remote *rp = impl(p);

	snprintf(rp->describe_text, sizeof(rp->describe_text), "process %u (%s)",
		 rp->pid, rp->kind);
	return rp->describe_text;
}

static void remote_kill(struct tm_probe *p)
{
	struct remote *rp = impl(p);

	if (rp->fd < 0 || rp->closed)
		return;
	memset(rp->msg, 0, sizeof(*rp->msg));
	rp->msg->type = TM_MSG_KILL;
	send_msg(rp, rp->msg);
}

static const struct tm_probe_process_ops remote_process_ops = {
	.kill = remote_kill,
	.pid = remote_pid,
	.closed = remote_closed,
	.end_note = remote_end_note,
	.describe = remote_process,
	.recording = remote_recording,
};

static const struct tm_probe_ops remote_ops = {
	.name = "remote",
	.process = &remote_process_ops,
	.describe = remote_describe,
	.nodes = remote_nodes,
	.next_event = remote_next,
	.seek = remote_seek,
	.latest = remote_latest,
	.capture = remote_capture,
	.detail = remote_detail,
	.detach = remote_detach,
	.flow = remote_flow,
	.set_level = remote_set_level,
	.set_ops = remote_set_ops,
	.rerun = remote_rerun,
	.record = remote_record,
	.flight = remote_flight,
	.annotation = remote_annotation,
};

/* ------------------------------------------------------------- one rank of many */

/*
 * probe-multi.c drives several of these together and so cannot let one
 * block in next_event() past its newest record: it reads the history
 * directly, polls every socket itself and resumes each paused model.
 */
int tm_probe_hold(struct tm_probe *p, int hold)
{
	if (!p || p->ops != &remote_ops)
		return 0;
	impl(p)->hold = hold;
	return 1;
}

size_t tm_probe_remote_count(struct tm_probe *p)
{
	return impl(p)->n;
}

int tm_probe_remote_peek(struct tm_probe *p, size_t i, struct tm_record *rec)
{
	struct remote *rp = impl(p);

	if (i >= rp->n)
		return TM_ERR_END;
	to_record(&rp->recs[i], rec);
	return TM_OK;
}

int tm_probe_remote_fd(struct tm_probe *p)
{
	return impl(p)->fd;
}

int tm_probe_remote_pump(struct tm_probe *p, int timeout_ms)
{
	return pump(impl(p), timeout_ms);
}

int tm_probe_remote_go(struct tm_probe *p)
{
	struct remote *rp = impl(p);

	return rp->closed ? 0 : resume_paused(rp) > 0;
}

int tm_probe_remote_paused(struct tm_probe *p)
{
	struct remote *rp = impl(p);

	/* a STOP may be on its way: read what is there */
	while (pump(rp, 0))
		;
	return rp->stopped;
}

void tm_probe_remote_interrupt(struct tm_probe *p)
{
	struct remote *rp = impl(p);

	if (rp->closed || rp->stopped)
		return;
	memset(rp->msg, 0, sizeof(*rp->msg));
	rp->msg->type = TM_MSG_INTERRUPT;
	send_msg(rp, rp->msg);
	rp->running = 0;
}

/* A live probe's own questions, for any probe (live.h). */
int tm_probe_is_live(struct tm_probe *p)
{
	return p && p->ops->process;
}

uint32_t tm_probe_pid(struct tm_probe *p)
{
	return tm_probe_is_live(p) ? p->ops->process->pid(p) : 0;
}

int tm_probe_closed(struct tm_probe *p)
{
	return tm_probe_is_live(p) ? p->ops->process->closed(p) : 1;
}

const char *tm_probe_end_note(struct tm_probe *p)
{
	return tm_probe_is_live(p) ? p->ops->process->end_note(p) : NULL;
}

void tm_probe_kill(struct tm_probe *p)
{
	if (tm_probe_is_live(p) && !tm_probe_closed(p))
		p->ops->process->kill(p);
}

const char *tm_probe_process(struct tm_probe *p)
{
	return tm_probe_is_live(p) ? p->ops->process->describe(p) : NULL;
}

const char *tm_probe_recording(struct tm_probe *p, uint64_t *events, const char **note)
{
	*events = 0;
	*note = NULL;
	return tm_probe_is_live(p) ? p->ops->process->recording(p, events, note) : NULL;
}

/* ------------------------------------------------------------- attach */

/* A pid ("4242") names DIR/4242.sock; anything else is a path. */
static int resolve(const char *target, char *path, size_t len)
{
	const char *q = target;

	while (*q >= '0' && *q <= '9')
		q++;
	if (*target && !*q)
		return tm_server_socket_path((pid_t)strtol(target, NULL, 10), path, len);
	if (strlen(target) >= len)
		return TM_ERR_TOO_LARGE;
	snprintf(path, len, "%s", target);
	return TM_OK;
}

static int fail(struct remote *rp, int err, char **detail)
{
	if (detail)
		*detail = strdup(rp->detail[0] ? rp->detail : tm_strerror(err));
	remote_detach(&rp->base);
	return err;
}

/*
 * The token for a TCP target: given, else $TENSORMORPH_TOKEN, else the
 * file the probe wrote on this host (DIR/tcp-PORT.token).  "" when none.
 */
static void find_token(const char *given, unsigned port, char *tok, size_t len)
{
	char dir[256], path[300];
	const char *env = getenv("TENSORMORPH_TOKEN");
	FILE *f;

	tok[0] = 0;
	if (given) {
		snprintf(tok, len, "%s", given);
		return;
	}
	if (env && *env) {
		snprintf(tok, len, "%s", env);
		return;
	}
	if (tm_server_socket_dir(dir, sizeof(dir), 0) != TM_OK)
		return;
	snprintf(path, sizeof(path), "%s/tcp-%u.token", dir, port);
	f = fopen(path, "r");
	if (!f)
		return;
	if (!fgets(tok, (int)len, f))
		tok[0] = 0;
	fclose(f);
	tok[strcspn(tok, "\r\n")] = 0;
}

/* Connects to HOST:PORT; fd or -1 with rp->detail set. */
static int connect_tcp(struct remote *rp, const char *host, unsigned port)
{
	struct addrinfo hints, *ai = NULL, *a;
	char ps[8];
	int fd = -1, rc, one = 1;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV;
	snprintf(ps, sizeof(ps), "%u", port);
	rc = getaddrinfo(host, ps, &hints, &ai);
	if (rc) {
		snprintf(rp->detail, sizeof(rp->detail), "%s:%u: %s", host, port,
			 gai_strerror(rc));
		return -1;
	}
	for (a = ai; a; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
		if (fd < 0)
			continue;
		if (!connect(fd, a->ai_addr, a->ai_addrlen))
			break;
		snprintf(rp->detail, sizeof(rp->detail), "cannot connect to %s:%u: %s",
			 host, port, strerror(errno));
		close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	if (fd >= 0)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

const char *tm_probe_remote_note(struct tm_probe *p)
{
	return p && p->ops == &remote_ops ? impl(p)->note : "";
}

int tm_probe_remote_open(const char *target, struct tm_probe **out, char **detail)
{
	return tm_probe_remote_open_token(target, NULL, out, detail);
}

int tm_probe_remote_open_token(const char *target, const char *token,
			       struct tm_probe **out, char **detail)
{
	struct sockaddr_un sa;
	struct remote *rp;
	struct tm_msg *m;
	char host[256], tok[TM_MSG_MAX_TOKEN + 1] = "";
	unsigned port = 0;
	int err, waited, tcp;

	*out = NULL;
	if (detail)
		*detail = NULL;
	rp = calloc(1, sizeof(*rp));
	if (!rp)
		return TM_ERR_NOMEM;
	rp->base.ops = &remote_ops;
	rp->fd = -1;
	rp->ann_cur = SIZE_MAX;
	rp->msg = malloc(sizeof(*rp->msg));
	rp->dec = tm_frame_decoder_new(0);
	rp->rd = tm_decoder_new();
	rp->nodes = tm_nodetab_new();
	if (!rp->msg || !rp->dec || !rp->rd || !rp->nodes)
		return fail(rp, TM_ERR_NOMEM, detail);
	m = rp->msg;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	tcp = tm_server_parse_tcp(target, host, sizeof(host), &port);
	if (tcp < 0 || (tcp && !port)) {
		snprintf(rp->detail, sizeof(rp->detail), "\"%s\" is not HOST:PORT", target);
		return fail(rp, TM_ERR_INVALID_ARG, detail);
	}
	if (tcp) {
		find_token(token, port, tok, sizeof(tok));
		if (asprintf(&rp->path, strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port) < 0)
			rp->path = NULL;
		rp->fd = connect_tcp(rp, host, port);
		if (!rp->path || rp->fd < 0)
			return fail(rp, TM_ERR_IO, detail);
		goto connected;
	}
	err = resolve(target, sa.sun_path, sizeof(sa.sun_path));
	if (err) {
		snprintf(rp->detail, sizeof(rp->detail), "no socket for \"%s\": %s",
			 target, err == TM_ERR_NOT_FOUND ? "no socket directory" :
			 err == TM_ERR_IO ? "the socket directory is not private "
			 "(must be ours, mode 0700)" : tm_strerror(err));
		return fail(rp, err, detail);
	}
	rp->path = strdup(sa.sun_path);
	rp->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (!rp->path || rp->fd < 0 ||
	    connect(rp->fd, (struct sockaddr *)&sa, sizeof(sa))) {
		snprintf(rp->detail, sizeof(rp->detail), "cannot connect to %s: %s",
			 sa.sun_path, strerror(errno));
		return fail(rp, TM_ERR_IO, detail);
	}
connected:
	memset(m, 0, sizeof(*m));
	m->type = TM_MSG_HELLO;
	m->u.hello.major = TM_WIRE_VERSION_MAJOR;
	m->u.hello.minor = TM_WIRE_VERSION_MINOR;
	snprintf(m->u.hello.name, sizeof(m->u.hello.name), "tmdb");
	snprintf(m->u.hello.token, sizeof(m->u.hello.token), "%s", tok);
	if (send_msg(rp, m))
		return fail(rp, TM_ERR_CLOSED, detail);
	for (waited = 0; !rp->described && !rp->closed && !tm_interrupted &&
	     waited < CONNECT_TIMEOUT_MS;)
		if (!pump(rp, POLL_MS))
			waited += POLL_MS;
	if (!rp->described) {
		if (!rp->detail[0] && tm_interrupted)
			snprintf(rp->detail, sizeof(rp->detail),
				 "interrupted while waiting for %s", rp->path);
		if (!rp->detail[0])
			snprintf(rp->detail, sizeof(rp->detail),
				 "%s did not answer the handshake", rp->path);
		return fail(rp, TM_ERR_CLOSED, detail);
	}
	/*
	 * Pause at the next event: tmdb decides when the model moves.  Before
	 * SUBSCRIBE, so that the model cannot run past the first event sent.
	 */
	memset(m, 0, sizeof(*m));
	m->type = TM_MSG_INTERRUPT;
	err = request(rp, m, CONNECT_TIMEOUT_MS);
	if (err)
		return fail(rp, err, detail);
	if (rp->trace)
		preload_window(rp, rp->trace);
	memset(m, 0, sizeof(*m));
	m->type = TM_MSG_SUBSCRIBE;
	err = request(rp, m, CONNECT_TIMEOUT_MS);
	if (err)
		return fail(rp, err, detail);
	/* The node table follows SUBSCRIBE's answer (a probe that never stops
	 * sending must not hold tmdb past Ctrl-C). */
	while (!tm_interrupted && pump(rp, POLL_MS))
		;
	if (tm_interrupted) {
		snprintf(rp->detail, sizeof(rp->detail),
			 "interrupted while reading the node table");
		return fail(rp, TM_ERR_CLOSED, detail);
	}
	*out = &rp->base;
	return TM_OK;
}
