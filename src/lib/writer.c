/*
 * writer.c -- appends records to a .tmrun file in zstd chunks.
 *
 * Records are encoded into an open EVENTS chunk; node definitions and run
 * metadata go into a separate META buffer that is always written before the
 * events chunk that needs it, so a reader can restore the node table from
 * the small META chunks alone.  A chunk is closed when it reaches
 * chunk_bytes or when its oldest record is max_age old, which bounds what a
 * killed writer loses.  close() appends the index, the summary and the
 * trailer that make seeking a binary search.
 *
 * Every entry point takes the writer's mutex: the probe's threads and the
 * optional flush thread share one writer.  Batch calls take it once.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "tm-internal.h"
#include "tm-tmrun.h"
#include "tmrun-format.h"

struct tm_writer {
	int fd;
	struct tm_writer_opts opts;
	pthread_mutex_t lock;
	uint64_t off;                /* bytes written to the file */

	struct tm_buf meta;          /* pending META records */
	uint32_t meta_nrecords;
	struct tm_buf raw;           /* the open EVENTS chunk */
	struct tmrun_chunk cur;      /* its running header fields */
	uint64_t cur_born_ns;        /* monotonic time of its first record */

	ZSTD_CCtx *cctx;
	uint8_t *comp;               /* compression output, preallocated */
	size_t comp_cap;

	struct tmrun_chunk *index;   /* every chunk written */
	size_t nindex, index_cap;

	tm_nodetab *nodes;           /* to reject duplicate addresses */

	pthread_t thread;
	int thread_running;
	int stopping;
	pthread_cond_t cond;

	int failed;                  /* sticky error: the file is unusable */
	char detail[256];

	/*
	 * A write that failed (a full disk): the file was cut back to its last
	 * whole chunk, said once on stderr, and from then on events, gaps and
	 * crashes are not written but counted into one lost range, written as
	 * a WRITE_ERROR gap at close if there is room by then.  Node
	 * definitions are kept (in meta) so that the file stays consistent.
	 */
	int werrno;                  /* errno of the first failed write, or 0 */
	int reported;                /* it was said on stderr */
	int have_lost;
	struct tm_gap lost;
	char *path;                  /* for the message; NULL: "the trace" */
};

void tm_writer_opts_default(struct tm_writer_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->chunk_bytes = 1u << 20;
	o->max_age_ns = 1000000000ull;
	o->zstd_level = 1;
}

__attribute__((format(printf, 3, 4)))
static int wfail(tm_writer *w, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(w->detail, sizeof(w->detail), fmt, ap);
	va_end(ap);
	return err;
}

/* write() all of it; EINTR-safe and usable from a signal handler. */
static int write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int ensure_comp(tm_writer *w, size_t raw_len)
{
	size_t need = ZSTD_compressBound(raw_len);
	uint8_t *p;

	if (need <= w->comp_cap)
		return TM_OK;
	p = realloc(w->comp, need);
	if (!p)
		return TM_ERR_NOMEM;
	w->comp = p;
	w->comp_cap = need;
	return TM_OK;
}

static int index_add(tm_writer *w, const struct tmrun_chunk *c)
{
	if (w->nindex == w->index_cap) {
		size_t cap = w->index_cap ? w->index_cap * 2 : 64;
		struct tmrun_chunk *p = realloc(w->index, cap * sizeof(*p));

		if (!p)
			return TM_ERR_NOMEM;
		w->index = p;
		w->index_cap = cap;
	}
	w->index[w->nindex++] = *c;
	return TM_OK;
}

/* "ENOSPC": the symbolic name, which a user can search for. */
static const char *errno_name(int e)
{
	switch (e) {
	case ENOSPC: return "ENOSPC";
	case EDQUOT: return "EDQUOT";
	case EFBIG: return "EFBIG";
	case EIO: return "EIO";
	case EROFS: return "EROFS";
	case EBADF: return "EBADF";
	case EPIPE: return "EPIPE";
	case ENXIO: return "ENXIO";
	default: return "errno";
	}
}

/*
 * A write failed: cut the file back to the last whole chunk (so that it
 * reads as a trace whose writer stopped there, and the space a partial
 * chunk took is free again), say so once on stderr, and go on counting
 * what cannot be written.  The caller keeps the records it was writing:
 * they are added to the lost range.
 */
static void write_failed(tm_writer *w, int e)
{
	if (ftruncate(w->fd, (off_t)w->off) || lseek(w->fd, (off_t)w->off, SEEK_SET) < 0) {
		/* cannot even cut back: the file's tail is torn, which a
		 * reader handles as the end of the readable part */
	}
	if (w->werrno)
		return;
	w->werrno = e;
	if (w->reported)
		return;         /* said once: the close's own attempt failed too */
	w->reported = 1;
	wfail(w, TM_ERR_IO, "%s: %s (%s)", w->path ? w->path : "the trace", strerror(e),
	      errno_name(e));
	fprintf(stderr, "tensormorph: cannot write %s: %s (%s); events from here on are not "
		"recorded (a \"write error\" gap); the trace stays readable up to here\n",
		w->path ? w->path : "the trace", strerror(e), errno_name(e));
}

/* Adds a record's seq range to the lost range (a failed writer). */
static void lose(tm_writer *w, uint64_t lo, uint64_t hi, uint64_t count, uint64_t step,
		 uint64_t time)
{
	if (!w->have_lost) {
		w->have_lost = 1;
		w->lost.first_seq = lo;
		w->lost.last_seq = hi;
		w->lost.count = 0;
		w->lost.reason = TM_GAP_WRITE_ERROR;
		w->lost.step = step;
		w->lost.time_ns = time;
	}
	if (lo < w->lost.first_seq)
		w->lost.first_seq = lo;
	if (hi > w->lost.last_seq)
		w->lost.last_seq = hi;
	w->lost.count += count;
}

/*
 * Writes one chunk (header + payload) from raw bytes.  emergency: no
 * allocation (stores uncompressed when the preallocated buffer is short)
 * and no index bookkeeping, for the fatal-signal path.
 */
static int write_chunk(tm_writer *w, struct tmrun_chunk *c, const uint8_t *raw,
		       size_t raw_len, int emergency)
{
	uint8_t hdr[TMRUN_CHUNK_HEADER_SIZE];
	const uint8_t *payload = raw;
	size_t stored = raw_len;

	if (raw_len > TMRUN_MAX_CHUNK_RAW)
		return wfail(w, TM_ERR_TOO_LARGE, "chunk of %zu bytes exceeds the cap", raw_len);
	c->codec = TMRUN_CODEC_NONE;
	if (emergency ? ZSTD_compressBound(raw_len) <= w->comp_cap
		      : ensure_comp(w, raw_len) == TM_OK) {
		size_t n = ZSTD_compressCCtx(w->cctx, w->comp, w->comp_cap, raw,
					     raw_len, w->opts.zstd_level);

		if (!ZSTD_isError(n) && n < raw_len) {
			payload = w->comp;
			stored = n;
			c->codec = TMRUN_CODEC_ZSTD;
		}
	}
	c->flags = 0;
	c->stored_len = (uint32_t)stored;
	c->raw_len = (uint32_t)raw_len;
	c->payload_crc = tm_crc32c(0, payload, stored);
	c->offset = w->off;
	tmrun_chunk_header_encode(hdr, c);
	if (write_all(w->fd, hdr, sizeof(hdr)) || write_all(w->fd, payload, stored)) {
		if (emergency) {
			w->failed = TM_ERR_IO;
			return TM_ERR_IO;
		}
		write_failed(w, errno);
		return TM_ERR_IO;
	}
	w->off += sizeof(hdr) + stored;
	if (emergency)
		return TM_OK;
	if (w->opts.fsync_chunks)
		fsync(w->fd);
	return index_add(w, c);
}

static int flush_meta(tm_writer *w)
{
	struct tmrun_chunk c;
	int err;

	if (!w->meta.len)
		return TM_OK;
	memset(&c, 0, sizeof(c));
	c.type = TMRUN_CHUNK_META;
	c.nrecords = w->meta_nrecords;
	err = write_chunk(w, &c, w->meta.data, w->meta.len, 0);
	if (err)
		return err;
	w->meta.len = 0;
	w->meta_nrecords = 0;
	return TM_OK;
}

static int flush_events(tm_writer *w)
{
	int err;

	if (!w->raw.len)
		return TM_OK;
	err = w->werrno ? TM_ERR_IO : flush_meta(w);
	if (err && w->werrno) {
		/* no room for the nodes: their events cannot be written */
		lose(w, w->cur.first_seq, w->cur.last_seq, w->cur.nevents, w->cur.min_step,
		     w->cur.min_time);
		w->raw.len = 0;
		memset(&w->cur, 0, sizeof(w->cur));
		return TM_OK;
	}
	if (err)
		return err;
	w->cur.type = TMRUN_CHUNK_EVENTS;
	err = write_chunk(w, &w->cur, w->raw.data, w->raw.len, 0);
	if (err && w->werrno) {
		/* the chunk's records are the first the file lacks */
		lose(w, w->cur.first_seq, w->cur.last_seq, w->cur.nevents, w->cur.min_step,
		     w->cur.min_time);
		err = TM_OK;
	}
	if (err)
		return err;
	w->raw.len = 0;
	memset(&w->cur, 0, sizeof(w->cur));
	return TM_OK;
}

/* Bookkeeping after one record landed in the open chunk. */
static int account(tm_writer *w, uint64_t seq_lo, uint64_t seq_hi, uint64_t step,
		   uint64_t time)
{
	struct tmrun_chunk *c = &w->cur;

	if (c->nrecords == 0) {
		c->first_seq = seq_lo;
		c->last_seq = seq_hi;
		c->min_step = c->max_step = step;
		c->min_time = c->max_time = time;
		w->cur_born_ns = tm_now_ns();
	} else {
		if (seq_lo < c->first_seq)
			c->first_seq = seq_lo;
		if (seq_hi > c->last_seq)
			c->last_seq = seq_hi;
		if (step < c->min_step)
			c->min_step = step;
		if (step > c->max_step)
			c->max_step = step;
		if (time < c->min_time)
			c->min_time = time;
		if (time > c->max_time)
			c->max_time = time;
	}
	c->nrecords++;
	if (w->raw.len >= w->opts.chunk_bytes)
		return flush_events(w);
	return TM_OK;
}

static void *flush_thread_main(void *arg)
{
	tm_writer *w = arg;
	uint64_t period = w->opts.max_age_ns / 4;

	if (period < 1000000)
		period = 1000000;
	pthread_mutex_lock(&w->lock);
	while (!w->stopping) {
		struct timespec ts;
		uint64_t ns;

		clock_gettime(CLOCK_REALTIME, &ts);
		ns = (uint64_t)ts.tv_nsec + period;
		ts.tv_sec += (time_t)(ns / 1000000000u);
		ts.tv_nsec = (long)(ns % 1000000000u);
		pthread_cond_timedwait(&w->cond, &w->lock, &ts);
		if (!w->stopping && !w->failed && w->raw.len &&
		    tm_now_ns() - w->cur_born_ns >= w->opts.max_age_ns)
			flush_events(w);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

int tm_writer_fdopen(int fd, const struct tm_writer_opts *opts, tm_writer **out)
{
	uint8_t hdr[TMRUN_FILE_HEADER_SIZE];
	struct timespec ts;
	tm_writer *w;
	uint64_t now;

	*out = NULL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return TM_ERR_NOMEM;
	w->fd = fd;
	if (opts)
		w->opts = *opts;
	else
		tm_writer_opts_default(&w->opts);
	if (!w->opts.chunk_bytes || w->opts.chunk_bytes > TMRUN_MAX_CHUNK_RAW / 2)
		w->opts.chunk_bytes = 1u << 20;
	if (!w->opts.max_age_ns)
		w->opts.max_age_ns = 1000000000ull;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	w->cctx = ZSTD_createCCtx();
	w->nodes = tm_nodetab_new();
	if (!w->cctx || !w->nodes ||
	    ensure_comp(w, w->opts.chunk_bytes + (64u << 10)) != TM_OK ||
	    tm_buf_reserve(&w->raw, w->opts.chunk_bytes + (64u << 10)) != TM_OK) {
		w->fd = -1;
		tm_writer_abandon(w);
		return TM_ERR_NOMEM;
	}

	memset(hdr, 0, sizeof(hdr));
	memcpy(hdr, tmrun_magic, 8);
	tm_put_u16(hdr + 8, TMRUN_VERSION_MAJOR);
	tm_put_u16(hdr + 10, TMRUN_VERSION_MINOR);
	clock_gettime(CLOCK_REALTIME, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	tm_put_u64(hdr + 16, now);
	tm_put_u32(hdr + 28, tm_crc32c(0, hdr, 28));
	if (write_all(fd, hdr, sizeof(hdr))) {
		w->fd = -1;
		tm_writer_abandon(w);
		return TM_ERR_IO;
	}
	w->off = sizeof(hdr);
	if (w->opts.flush_thread) {
		if (pthread_create(&w->thread, NULL, flush_thread_main, w) == 0) {
			w->thread_running = 1;
			tm_thread_name(w->thread, "tm-flush");
		}
	}
	*out = w;
	return TM_OK;
}

int tm_writer_open(const char *path, const struct tm_writer_opts *opts,
		   tm_writer **out)
{
	int fd, err;

	*out = NULL;
	if (!path)
		return TM_ERR_INVALID_ARG;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return TM_ERR_IO;
	err = tm_writer_fdopen(fd, opts, out);
	if (err)
		close(fd);
	else
		(*out)->path = tm_strdup0(path);
	return err;
}

/* Runs `stmt` under the lock unless the writer already failed. */
#define LOCKED(w, stmt)                                   \
	do {                                              \
		int err_;                                 \
		if (!(w))                                 \
			return TM_ERR_INVALID_ARG;        \
		pthread_mutex_lock(&(w)->lock);           \
		err_ = (w)->failed ? (w)->failed : (stmt); \
		pthread_mutex_unlock(&(w)->lock);         \
		return err_;                              \
	} while (0)

static int do_meta(tm_writer *w, const struct tm_run_meta *m)
{
	int err = tm_encode_meta(&w->meta, m);

	if (!err)
		w->meta_nrecords++;
	return err;
}

int tm_writer_meta(tm_writer *w, const struct tm_run_meta *m)
{
	LOCKED(w, do_meta(w, m));
}

static int do_node(tm_writer *w, const struct tm_node *n, uint32_t *id)
{
	struct tm_node copy;
	uint32_t nid;
	int err;

	err = tm_nodetab_add(w->nodes, n, &nid);
	if (id)
		*id = nid;
	if (err)
		return err;
	copy = *n;
	copy.id = nid;
	err = tm_encode_node(&w->meta, &copy);
	if (!err)
		w->meta_nrecords++;
	return err;
}

int tm_writer_node(tm_writer *w, const struct tm_node *n, uint32_t *id)
{
	if (!n)
		return TM_ERR_INVALID_ARG;
	LOCKED(w, do_node(w, n, id));
}

static int do_event(tm_writer *w, const struct tm_event *e)
{
	int err;

	if (e->node >= tm_nodetab_count(w->nodes))
		return wfail(w, TM_ERR_INVALID_ARG, "event %llu: node %u is not defined",
			     (unsigned long long)e->seq, e->node);
	if (w->werrno) {
		lose(w, e->seq, e->seq, 1, e->step, e->time_ns);
		return TM_OK;
	}
	err = tm_encode_event(&w->raw, e);
	if (err)
		return err;
	w->cur.nevents++;
	return account(w, e->seq, e->seq, e->step, e->time_ns);
}

int tm_writer_event(tm_writer *w, const struct tm_event *e)
{
	if (!e)
		return TM_ERR_INVALID_ARG;
	LOCKED(w, do_event(w, e));
}

static int do_events(tm_writer *w, const struct tm_event *e, size_t n)
{
	size_t i;
	int err;

	for (i = 0; i < n; i++)
		if ((err = do_event(w, &e[i])) != TM_OK)
			return err;
	return TM_OK;
}

int tm_writer_events(tm_writer *w, const struct tm_event *e, size_t n)
{
	if (!e && n)
		return TM_ERR_INVALID_ARG;
	LOCKED(w, do_events(w, e, n));
}

static int do_gap(tm_writer *w, const struct tm_gap *g)
{
	int err;

	if (w->werrno) {
		lose(w, g->first_seq, g->last_seq, g->count, g->step, g->time_ns);
		return TM_OK;
	}
	err = tm_encode_gap(&w->raw, g);

	if (err)
		return err;
	w->cur.ngaps++;
	return account(w, g->first_seq, g->last_seq, g->step, g->time_ns);
}

int tm_writer_gap(tm_writer *w, const struct tm_gap *g)
{
	if (!g)
		return TM_ERR_INVALID_ARG;
	LOCKED(w, do_gap(w, g));
}

static int do_crash(tm_writer *w, const struct tm_crash *c)
{
	int err;

	if (w->werrno) {
		lose(w, c->seq, c->seq, 0, c->step, c->time_ns);
		return TM_OK;
	}
	err = tm_encode_crash(&w->raw, c);

	if (err)
		return err;
	w->cur.ncrashes++;
	return account(w, c->seq, c->seq, c->step, c->time_ns);
}

int tm_writer_crash(tm_writer *w, const struct tm_crash *c)
{
	if (!c)
		return TM_ERR_INVALID_ARG;
	LOCKED(w, do_crash(w, c));
}

/* An annotation's step counts in the chunk's step range, so that the
 * reader finds it with the same search as the step's events. */
static int do_annot(tm_writer *w, const struct tm_annot *a)
{
	int err;

	if (w->werrno)
		return TM_OK;   /* its step's events are lost with it */
	err = tm_encode_annot(&w->raw, a);

	if (err)
		return err;
	return account(w, a->seq, a->seq, a->step, a->time_ns);
}

int tm_writer_annot(tm_writer *w, const struct tm_annot *a)
{
	if (!a)
		return TM_ERR_INVALID_ARG;
	LOCKED(w, do_annot(w, a));
}

/*
 * Pre-encoded records (the live probe forwards what it received): decoded
 * once to validate them and keep the chunk's seq/step/time ranges exact.
 */
static int do_raw(tm_writer *w, const uint8_t *recs, size_t len)
{
	tm_decoder *d = tm_decoder_new();
	size_t off = 0;
	int err = TM_OK;

	if (!d)
		return TM_ERR_NOMEM;
	while (off < len && !err) {
		struct tm_record rec;
		size_t used;

		err = tm_decode_record(d, recs + off, len - off, &rec, &used);
		if (err)
			break;
		switch (rec.type) {
		case TM_REC_META: err = do_meta(w, &rec.u.meta); break;
		case TM_REC_NODE: err = do_node(w, &rec.u.node, NULL); break;
		case TM_REC_EVENT: err = do_event(w, &rec.u.event); break;
		case TM_REC_GAP: err = do_gap(w, &rec.u.gap); break;
		case TM_REC_CRASH: err = do_crash(w, &rec.u.crash); break;
		case TM_REC_ANNOT: err = do_annot(w, &rec.u.annot); break;
		default: break;
		}
		off += used;
	}
	tm_decoder_free(d);
	return err;
}

int tm_writer_raw(tm_writer *w, const uint8_t *recs, size_t len)
{
	if (!recs && len)
		return TM_ERR_INVALID_ARG;
	LOCKED(w, do_raw(w, recs, len));
}

static int do_flush(tm_writer *w)
{
	int err = flush_events(w);

	if (!err && !w->werrno)
		err = flush_meta(w);
	return err;
}

int tm_writer_flush(tm_writer *w)
{
	LOCKED(w, do_flush(w));
}

static int do_poll(tm_writer *w)
{
	if (w->raw.len && tm_now_ns() - w->cur_born_ns >= w->opts.max_age_ns)
		return do_flush(w);
	return TM_OK;
}

int tm_writer_poll(tm_writer *w)
{
	LOCKED(w, do_poll(w));
}

/*
 * Best effort from a fatal-signal handler: the thread that crashed may hold
 * the lock, so it is not taken.  Appends only complete records: raw.len is
 * advanced only after a record is fully encoded, so raw[0..len) is whole.
 */
int tm_writer_emergency_flush(tm_writer *w)
{
	struct tmrun_chunk c;
	int err;

	if (!w || w->failed)
		return TM_ERR_INVALID_ARG;
	if (w->meta.len) {
		memset(&c, 0, sizeof(c));
		c.type = TMRUN_CHUNK_META;
		c.nrecords = w->meta_nrecords;
		err = write_chunk(w, &c, w->meta.data, w->meta.len, 1);
		if (err)
			return err;
		w->meta.len = 0;
	}
	if (w->raw.len) {
		c = w->cur;
		c.type = TMRUN_CHUNK_EVENTS;
		err = write_chunk(w, &c, w->raw.data, w->raw.len, 1);
		if (err)
			return err;
		w->raw.len = 0;
		memset(&w->cur, 0, sizeof(w->cur));
	}
	fsync(w->fd);
	return TM_OK;
}

static int write_index_and_summary(tm_writer *w)
{
	struct tm_buf b = { 0 };
	struct tmrun_chunk c;
	uint64_t index_off, summary_off;
	uint8_t trailer[TMRUN_TRAILER_SIZE];
	size_t i, nentries = w->nindex;
	int err;

	/* INDEX: offset + header copy for every chunk before it. */
	err = tm_buf_reserve(&b, nentries * TMRUN_INDEX_ENTRY_SIZE + 1);
	if (err)
		return err;
	for (i = 0; i < nentries; i++) {
		tm_put_u64(b.data + b.len, w->index[i].offset);
		tmrun_chunk_header_encode(b.data + b.len + 8, &w->index[i]);
		b.len += TMRUN_INDEX_ENTRY_SIZE;
	}
	memset(&c, 0, sizeof(c));
	c.type = TMRUN_CHUNK_INDEX;
	c.nrecords = (uint32_t)nentries;
	index_off = w->off;
	err = write_chunk(w, &c, b.data, b.len, 0);
	if (err)
		goto out;

	/* SUMMARY: a count of fields, then each as a uvarint (doc/tmrun.md). */
	b.len = 0;
	err = tm_buf_reserve(&b, 16 * 10);
	if (err)
		goto out;
	{
		struct tm_summary sum;
		uint64_t f[11];

		tmrun_summarise(w->index, nentries, &sum);
		f[0] = sum.nevents;
		f[1] = sum.ngaps;
		f[2] = sum.ncrashes;
		f[3] = sum.first_seq;
		f[4] = sum.last_seq;
		f[5] = sum.first_step;
		f[6] = sum.last_step;
		f[7] = sum.first_time_ns;
		f[8] = sum.last_time_ns;
		f[9] = tm_nodetab_count(w->nodes);
		f[10] = sum.uncompressed_bytes;
		b.len += tm_put_uvarint(b.data + b.len, TM_ARRAY_LEN(f));
		for (i = 0; i < TM_ARRAY_LEN(f); i++)
			b.len += tm_put_uvarint(b.data + b.len, f[i]);
	}
	memset(&c, 0, sizeof(c));
	c.type = TMRUN_CHUNK_SUMMARY;
	c.nrecords = 1;
	summary_off = w->off;
	err = write_chunk(w, &c, b.data, b.len, 0);
	if (err)
		goto out;

	memset(trailer, 0, sizeof(trailer));
	tm_put_u64(trailer + 0, index_off);
	tm_put_u64(trailer + 8, summary_off);
	tm_put_u32(trailer + 20, tm_crc32c(0, trailer, 20));
	memcpy(trailer + 24, tmrun_end_magic, 8);
	if (write_all(w->fd, trailer, sizeof(trailer)))
		err = wfail(w, TM_ERR_IO, "write failed: %s", strerror(errno));
	else
		w->off += sizeof(trailer);
out:
	tm_buf_free(&b);
	return err;
}

static void stop_thread(tm_writer *w)
{
	if (!w->thread_running)
		return;
	pthread_mutex_lock(&w->lock);
	w->stopping = 1;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->thread, NULL);
	w->thread_running = 0;
}

int tm_writer_close(tm_writer *w)
{
	int err;

	if (!w)
		return TM_ERR_INVALID_ARG;
	stop_thread(w);
	err = w->failed;
	if (!err)
		err = do_flush(w);
	if (!err && w->werrno) {
		/* Writing failed earlier: now that the partial chunk is gone
		 * there may be room for the nodes, one gap that says what was
		 * lost and why, and the index.  If not, the file is cut back
		 * to its last whole chunk: a trace whose writer stopped there. */
		uint64_t good = w->off;

		w->werrno = 0;
		err = TM_OK;
		if (w->have_lost) {
			err = tm_encode_gap(&w->raw, &w->lost);
			if (!err) {
				w->cur.ngaps++;
				w->cur.nrecords++;
				w->cur.first_seq = w->lost.first_seq;
				w->cur.last_seq = w->lost.last_seq;
				w->cur.min_step = w->cur.max_step = w->lost.step;
				w->cur.min_time = w->cur.max_time = w->lost.time_ns;
			}
		}
		if (!err)
			err = do_flush(w);
		if (!err && w->werrno)
			err = TM_ERR_IO;
		if (!err)
			err = write_index_and_summary(w);
		if (err) {
			if (ftruncate(w->fd, (off_t)good)) {
				/* a torn tail reads as the end of the readable part */
			}
			err = TM_ERR_IO;
		}
	} else if (!err) {
		err = write_index_and_summary(w);
		if (err && w->werrno) {
			/* no room for the index: the file stays a trace whose
			 * writer stopped at its last whole chunk */
			err = TM_ERR_IO;
		}
	}
	if (!err && fsync(w->fd) && errno != EINVAL && errno != EROFS) {
		if (!w->detail[0])
			wfail(w, TM_ERR_IO, "%s: fsync: %s (%s)", w->path ? w->path : "the trace",
			      strerror(errno), errno_name(errno));
		err = TM_ERR_IO;
	}
	if (close(w->fd) && !err)
		err = TM_ERR_IO;
	w->fd = -1;
	tm_writer_abandon(w);
	return err;
}

void tm_writer_abandon(tm_writer *w)
{
	if (!w)
		return;
	stop_thread(w);
	if (w->fd >= 0)
		close(w->fd);
	ZSTD_freeCCtx(w->cctx);
	free(w->comp);
	free(w->index);
	tm_buf_free(&w->raw);
	tm_buf_free(&w->meta);
	tm_nodetab_free(w->nodes);
	free(w->path);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

/* tm_recover(): appends a chunk that was already checked, byte for byte. */
int tmrun_writer_copy_chunk(tm_writer *w, const struct tmrun_chunk *c,
			    const uint8_t *stored)
{
	uint8_t hdr[TMRUN_CHUNK_HEADER_SIZE];
	struct tmrun_chunk copy = *c;
	int err;

	pthread_mutex_lock(&w->lock);
	err = do_flush(w);
	if (!err) {
		copy.offset = w->off;
		tmrun_chunk_header_encode(hdr, &copy);
		if (write_all(w->fd, hdr, sizeof(hdr)) ||
		    write_all(w->fd, stored, copy.stored_len))
			err = wfail(w, TM_ERR_IO, "write failed: %s", strerror(errno));
		else
			w->off += sizeof(hdr) + copy.stored_len;
	}
	if (!err)
		err = index_add(w, &copy);
	pthread_mutex_unlock(&w->lock);
	return err;
}

const char *tm_writer_detail(const tm_writer *w)
{
	return w ? w->detail : "";
}

uint64_t tm_writer_bytes(const tm_writer *w)
{
	return w ? w->off : 0;
}
