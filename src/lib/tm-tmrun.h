/*
 * tm-tmrun.h -- the record encoding and the .tmrun trace file (doc/tmrun.md).
 *
 * Records (meta, node, event, gap, crash) have one binary encoding, used both
 * inside .tmrun chunks and in wire frames.  The writer appends zstd chunks,
 * closed by size or by age so a killed writer loses at most max_age of
 * events, and ends the file with an index and a summary.  The reader seeks by
 * seq, step or time through the index (binary search plus one chunk decode),
 * or, when the index is missing, by scanning chunk headers; it iterates in
 * both directions and can filter by node pattern.
 */
#ifndef TM_TMRUN_H
#define TM_TMRUN_H

#include <stdio.h>
#include "tm-types.h"
#include "tm-address.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------- encoding */

/* Growable byte buffer. */
struct tm_buf {
	uint8_t *data;
	size_t len;
	size_t cap;
};
void tm_buf_free(struct tm_buf *b);
int tm_buf_reserve(struct tm_buf *b, size_t extra);

/* Appends one record (type byte, length, body) to b. */
int tm_encode_meta(struct tm_buf *b, const struct tm_run_meta *m);
int tm_encode_node(struct tm_buf *b, const struct tm_node *n);
int tm_encode_event(struct tm_buf *b, const struct tm_event *e);
int tm_encode_gap(struct tm_buf *b, const struct tm_gap *g);
int tm_encode_crash(struct tm_buf *b, const struct tm_crash *c);
int tm_encode_annot(struct tm_buf *b, const struct tm_annot *a);
int tm_encode_record(struct tm_buf *b, const struct tm_record *r);

/*
 * Record decoder.  Owns scratch memory (tensor arrays, strings) that decoded
 * records point into; it is reused by the next decode.
 */
typedef struct tm_decoder tm_decoder;
tm_decoder *tm_decoder_new(void);
void tm_decoder_free(tm_decoder *d);
/*
 * Decodes one record from buf[0..len).  On success *used is the number of
 * bytes consumed.  TM_ERR_TRUNCATED if the record is incomplete,
 * TM_ERR_CORRUPT / TM_ERR_TOO_LARGE for bad content; never reads past len.
 * Record types this version does not know are skipped: *used is set and
 * rec->type holds the unknown type (callers ignore it).
 */
int tm_decode_record(tm_decoder *d, const uint8_t *buf, size_t len,
		     struct tm_record *rec, size_t *used);
/* Text of the last decode error ("event: rank 12 exceeds 8"). */
const char *tm_decoder_detail(const tm_decoder *d);

/* Deep copy of an event (tensors and payloads) into malloc'd memory, and its release. */
int tm_event_copy(struct tm_event *dst, const struct tm_event *src);
void tm_event_release(struct tm_event *e);

/* ------------------------------------------------------------- writer */

struct tm_writer_opts {
	size_t chunk_bytes;         /* close a chunk at this many uncompressed bytes (default 1 MiB) */
	uint64_t max_age_ns;        /* ... or when its oldest record is this old (default 1 s) */
	int zstd_level;             /* default 1; negative levels are faster */
	int fsync_chunks;           /* fsync after each chunk */
	int flush_thread;           /* a background thread closes aged chunks even when idle */
};
void tm_writer_opts_default(struct tm_writer_opts *o);

typedef struct tm_writer tm_writer;

/* Creates (truncates) path and writes the file header.  opts may be NULL. */
int tm_writer_open(const char *path, const struct tm_writer_opts *opts,
		   tm_writer **out);
/* Same, onto an already-open file descriptor: on success the writer owns it
 * (closes it in close/abandon); on failure the caller still does. */
int tm_writer_fdopen(int fd, const struct tm_writer_opts *opts, tm_writer **out);
int tm_writer_meta(tm_writer *w, const struct tm_run_meta *m);
/* Registers a node; the writer assigns the id (dense, from 0). */
int tm_writer_node(tm_writer *w, const struct tm_node *n, uint32_t *id);
int tm_writer_event(tm_writer *w, const struct tm_event *e);
int tm_writer_events(tm_writer *w, const struct tm_event *e, size_t n);
int tm_writer_gap(tm_writer *w, const struct tm_gap *g);
int tm_writer_crash(tm_writer *w, const struct tm_crash *c);
int tm_writer_annot(tm_writer *w, const struct tm_annot *a);
/* Appends an already-encoded record stream (from tm_encode_*). */
int tm_writer_raw(tm_writer *w, const uint8_t *recs, size_t len);
/* Closes the open chunk now (and fsyncs if asked). */
int tm_writer_flush(tm_writer *w);
/* Closes the open chunk if it is older than max_age (for callers without flush_thread). */
int tm_writer_poll(tm_writer *w);
/*
 * Async-signal-safe emergency flush for fatal-signal handlers: compresses and
 * writes the open chunk without locks or allocation where possible.  Leaves
 * the file without an index (readable by scanning, fixable by tm_recover).
 */
int tm_writer_emergency_flush(tm_writer *w);
/* Writes index, summary and trailer, closes the file, frees w. */
int tm_writer_close(tm_writer *w);
/* Frees w without finishing the file (as if killed). */
void tm_writer_abandon(tm_writer *w);
const char *tm_writer_detail(const tm_writer *w);
uint64_t tm_writer_bytes(const tm_writer *w);    /* file bytes written so far */

/* ------------------------------------------------------------- reader */

typedef struct tm_reader tm_reader;

enum tm_reader_flags {
	TM_READER_NO_INDEX = 1u << 0,   /* ignore the index: scan chunk headers */
	TM_READER_STRICT = 1u << 1      /* a damaged chunk is an error, not the end */
};

/* What the reader found out about the file when it opened it. */
struct tm_summary {
	uint16_t version_major, version_minor;
	int indexed;                    /* 1 if the index was used */
	int complete;                   /* 1 if the file was properly closed */
	int damaged;                    /* 1 if a bad/truncated chunk ended the readable part */
	int damage_err;                 /* tm_err of the damage */
	uint64_t damage_offset;         /* where the readable part ends */
	uint64_t nchunks;
	uint64_t nevents, ngaps, ncrashes, nrecords;
	uint64_t first_seq, last_seq;   /* over events and gaps */
	uint64_t first_step, last_step;
	uint64_t first_time_ns, last_time_ns;
	uint64_t file_bytes;
	uint64_t uncompressed_bytes;
	int index_damage;               /* why the index was not used (enum tm_index_damage) */
};

/* Why a trace's index was not used (tm_summary.index_damage, when !indexed). */
enum tm_index_damage {
	TM_INDEX_ABSENT = 0,            /* no trailer: the writer did not finish */
	TM_INDEX_TRAILER = 1,           /* the trailer is damaged */
	TM_INDEX_INDEX = 2,             /* the INDEX chunk is damaged */
	TM_INDEX_SUMMARY = 3,           /* the SUMMARY chunk is damaged */
	TM_INDEX_IGNORED = 4            /* TM_READER_NO_INDEX */
};

/*
 * Opens a trace.  A file without index (killed writer) opens fine with
 * summary.indexed == 0; a damaged tail is cut off with summary.damaged set
 * (unless TM_READER_STRICT).  On failure *out is NULL and, if detail is not
 * NULL, *detail receives a malloc'd message naming the file and the problem.
 */
int tm_reader_open(const char *path, unsigned flags, tm_reader **out,
		   char **detail);
void tm_reader_close(tm_reader *r);
const struct tm_summary *tm_reader_summary(const tm_reader *r);
const struct tm_run_meta *tm_reader_meta(const tm_reader *r);  /* NULL if none */
const tm_nodetab *tm_reader_nodes(const tm_reader *r);
const char *tm_reader_detail(const tm_reader *r);
const char *tm_reader_path(const tm_reader *r);

/*
 * Cursor.  The reader has one position between records.  next() returns the
 * record after it and advances; prev() the one before it and steps back.
 * Only EVENT, GAP and CRASH records are returned (meta and nodes are folded
 * into the reader's tables).  TM_ERR_END at either end.
 */
int tm_reader_next(tm_reader *r, struct tm_record *rec);
int tm_reader_prev(tm_reader *r, struct tm_record *rec);
/* Position before the first record with seq >= target (events and gaps). */
int tm_reader_seek_seq(tm_reader *r, uint64_t seq);
/* ... first record with step >= target, or time >= target. */
int tm_reader_seek_step(tm_reader *r, uint64_t step);
int tm_reader_seek_time(tm_reader *r, uint64_t time_ns);
int tm_reader_rewind(tm_reader *r);     /* before the first record */
int tm_reader_seek_end(tm_reader *r);   /* after the last record */
/*
 * The annotation key of step (tm_annot: a serving probe's "request" ids),
 * written anywhere in the file: TM_OK with *out valid until the next call
 * of this function, TM_ERR_NOT_FOUND if there is none, or the error of a
 * damaged chunk.  Does not move the cursor or touch the record it returned.
 */
int tm_reader_annotation(tm_reader *r, uint64_t step, const char *key,
			 const struct tm_annot **out);
/*
 * Only events of nodes matching the pattern are returned (gaps and crashes
 * always are).  NULL removes the filter.  The reader keeps its own copy.
 */
int tm_reader_set_filter(tm_reader *r, const tm_address *pattern);

/*
 * Rewrites the index of a trace whose writer died: keeps every intact chunk,
 * drops a damaged tail (recording it as a TRUNCATED gap), and writes index,
 * summary and trailer to out_path (may equal in_path: done via a temp file
 * and rename).  report, if not NULL, gets a one-paragraph malloc'd account.
 */
int tm_recover(const char *in_path, const char *out_path, char **report);

/* CRC32C (Castagnoli) used by the format; exposed for tests and tools. */
uint32_t tm_crc32c(uint32_t crc, const void *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* TM_TMRUN_H */
