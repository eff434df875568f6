/*
 * reader.c -- opens a .tmrun file and moves a cursor through its records.
 *
 * Opening builds an in-memory chunk list, from the index at the end of the
 * file when it is intact, otherwise by walking the chunk headers from the
 * start (a killed writer leaves no index).  The walk stops at the first
 * damaged or truncated chunk: everything before it stays readable and the
 * summary says where and why the readable part ends.  META chunks are
 * decoded at open to restore the node table and run metadata.
 *
 * Seeking by seq, step or time is a binary search over the running maxima
 * of the EVENTS chunks (correct even if a field is not monotonic) followed
 * by one chunk decode.  One decoded chunk is cached with the offsets of its
 * records, which is what makes backward iteration as cheap as forward.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "tm-internal.h"
#include "tm-tmrun.h"
#include "tmrun-format.h"

struct tm_reader {
	int fd;
	char *path;
	unsigned flags;
	struct tm_summary sum;

	struct tmrun_chunk *chunks;     /* META and EVENTS chunks, file order */
	size_t nchunks;
	size_t *ev;                     /* indexes of EVENTS chunks in chunks[] */
	size_t nev;
	uint64_t *pmax_seq, *pmax_step, *pmax_time;   /* running maxima over ev */

	tm_nodetab *nodes;
	struct tm_run_meta meta;
	int have_meta;
	char **meta_strs;               /* owned copies behind meta's pointers */
	size_t nmeta_strs;

	tm_decoder *dec;
	ZSTD_DCtx *dctx;
	uint8_t *stored;
	size_t stored_cap;
	uint8_t *buf;                   /* decoded payload of the cached chunk */
	size_t buf_cap, buf_len;
	uint32_t *roff;                 /* offsets of its EVENT/GAP/CRASH records */
	size_t nroff, roff_cap;
	size_t cached;                  /* ev index of the cached chunk, or SIZE_MAX */

	size_t ci, ri;                  /* cursor: before record ri of ev chunk ci */

	/* tm_reader_annotation: the last answer, and the chunk it came from */
	tm_decoder *adec;
	uint8_t *abuf;
	size_t abuf_cap, abuf_len;
	size_t acached;                 /* ev index of the chunk in abuf, or SIZE_MAX */
	struct aent { uint64_t step; size_t off; } *aidx;   /* its ANNOT records */
	size_t naidx, aidx_cap;
	struct tm_annot ann;            /* points into adec */
	uint64_t ann_step;
	uint64_t ann_lo, ann_hi;        /* the seqs that answer holds for */
	char ann_key[TM_ANNOT_MAX_KEY];
	int ann_state;                  /* 0 none, 1 found, -1 looked up, none */

	uint8_t *filter;                /* per node id: 1 = events pass */
	int has_filter;

	/* the trailer, when it is intact: where the INDEX chunk begins, and
	 * so where the chunks that hold records end */
	int have_trailer;
	uint64_t trailer_index_off;

	/* tmrun_reader_open_salvage (tm_recover) */
	int salvage;
	int hdr_err;                    /* the file header's damage, or 0 */
	char hdr_detail[512];
	struct tmrun_skip *skips;       /* regions the resyncing scan skipped */
	size_t nskips;

	char detail[512];
};

__attribute__((format(printf, 3, 4)))
static int rfail(tm_reader *r, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->detail, sizeof(r->detail), fmt, ap);
	va_end(ap);
	return err;
}

static int read_at(tm_reader *r, void *buf, size_t len, uint64_t off)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = pread(r->fd, p, len, (off_t)off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return TM_ERR_IO;
		}
		if (n == 0)
			return TM_ERR_TRUNCATED;
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return TM_OK;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
	size_t c = *cap ? *cap : 16;
	void *q;

	if (need <= *cap)
		return TM_OK;
	while (c < need)
		c *= 2;
	q = realloc(*p, c * elem);
	if (!q)
		return TM_ERR_NOMEM;
	*p = q;
	*cap = c;
	return TM_OK;
}

/*
 * "chunk 3 (EVENTS, offset 1234)": which part of the file a message is
 * about.  N counts the file's META and EVENTS chunks from 0 in file order;
 * the INDEX and SUMMARY chunks are named by their type.  One static buffer
 * per reader call site is enough: messages are formatted at once.
 */
static const char *chunk_name(const tm_reader *r, const struct tmrun_chunk *c)
{
	static __thread char buf[96];
	static const char *const types[] = { "?", "META", "EVENTS", "INDEX", "SUMMARY" };
	const char *t = c->type < TM_ARRAY_LEN(types) ? types[c->type] : "?";

	if (r->chunks && c >= r->chunks && c < r->chunks + r->nchunks)
		snprintf(buf, sizeof(buf), "chunk %zu (%s, offset %llu)",
			 (size_t)(c - r->chunks), t, (unsigned long long)c->offset);
	else if (c->type == TMRUN_CHUNK_INDEX || c->type == TMRUN_CHUNK_SUMMARY)
		snprintf(buf, sizeof(buf), "%s chunk (offset %llu)", t,
			 (unsigned long long)c->offset);
	else
		snprintf(buf, sizeof(buf), "chunk at offset %llu (%s)",
			 (unsigned long long)c->offset, t);
	return buf;
}

/*
 * Reads, checks and decompresses one chunk's payload into *buf (c->raw_len
 * bytes).  The caller has validated the header (sizes capped, inside the
 * file).
 */
static int load_payload_into(tm_reader *r, const struct tmrun_chunk *c,
			     uint8_t **buf, size_t *buf_cap)
{
	int err;

	if ((err = grow((void **)&r->stored, &r->stored_cap, c->stored_len + 1, 1)) ||
	    (err = grow((void **)buf, buf_cap, c->raw_len + 1, 1)))
		return rfail(r, err, "%s: out of memory reading chunk at offset %llu",
			     r->path, (unsigned long long)c->offset);
	err = read_at(r, r->stored, c->stored_len, c->offset + TMRUN_CHUNK_HEADER_SIZE);
	if (err)
		return rfail(r, err, "%s: %s: %s", r->path, chunk_name(r, c),
			     tm_strerror(err));
	if (tm_crc32c(0, r->stored, c->stored_len) != c->payload_crc)
		return rfail(r, TM_ERR_CRC, "%s: %s: payload checksum mismatch "
			     "(the file is damaged)", r->path, chunk_name(r, c));
	if (c->codec == TMRUN_CODEC_NONE) {
		memcpy(*buf, r->stored, c->stored_len);
	} else {
		size_t n;

		/* The frame's own content size must agree with the header: zstd
		 * never writes more than raw_len, so a lying frame is an error. */
		n = ZSTD_decompressDCtx(r->dctx, *buf, c->raw_len, r->stored,
					c->stored_len);
		if (ZSTD_isError(n) || n != c->raw_len)
			return rfail(r, TM_ERR_CORRUPT, "%s: %s: "
				     "cannot decompress (%s)", r->path, chunk_name(r, c),
				     ZSTD_isError(n) ? ZSTD_getErrorName(n) : "size differs");
	}
	return TM_OK;
}

/* ... into the cursor's buffer r->buf. */
static int load_payload(tm_reader *r, const struct tmrun_chunk *c)
{
	int err = load_payload_into(r, c, &r->buf, &r->buf_cap);

	r->buf_len = err ? 0 : c->raw_len;
	return err;
}

/* The type and whole size of the record at off in a payload of chunk c:
 * type u8 + length uvarint + body, inside the payload. */
static int record_at(tm_reader *r, const struct tmrun_chunk *c, const uint8_t *buf,
		     size_t len, size_t off, uint8_t *type, size_t *size)
{
	struct tm_rd rd = { buf + off, buf + len, 0 };
	uint64_t blen;
	size_t hdr;

	*type = tm_rd_u8(&rd);
	blen = tm_rd_uvarint(&rd);
	hdr = (size_t)(rd.p - (buf + off));
	if (rd.bad || blen > len - off - hdr || *type == 0)
		return rfail(r, TM_ERR_CORRUPT, "%s: chunk at offset %llu: "
			     "bad record at byte %zu", r->path,
			     (unsigned long long)c->offset, off);
	*size = hdr + (size_t)blen;
	return TM_OK;
}

/* Walks the records of the loaded payload, noting where the cursor's are. */
static int index_records(tm_reader *r, const struct tmrun_chunk *c)
{
	size_t off, size;
	uint8_t type;
	int err;

	r->nroff = 0;
	for (off = 0; off < r->buf_len; off += size) {
		if ((err = record_at(r, c, r->buf, r->buf_len, off, &type, &size)))
			return err;
		if (type == TM_REC_EVENT || type == TM_REC_GAP || type == TM_REC_CRASH) {
			if ((err = grow((void **)&r->roff, &r->roff_cap, r->nroff + 1,
					sizeof(*r->roff))))
				return err;
			r->roff[r->nroff++] = (uint32_t)off;
		}
	}
	return TM_OK;
}

static int load_ev(tm_reader *r, size_t ci)
{
	int err;

	if (r->cached == ci)
		return TM_OK;
	r->cached = SIZE_MAX;
	err = load_payload(r, &r->chunks[r->ev[ci]]);
	if (!err)
		err = index_records(r, &r->chunks[r->ev[ci]]);
	if (err)
		return err;
	r->cached = ci;
	return TM_OK;
}

/* Decodes record ri of the cached chunk and checks it against the node table. */
static int decode_at(tm_reader *r, size_t ri, struct tm_record *rec)
{
	size_t used, off = r->roff[ri];
	int err;

	err = tm_decode_record(r->dec, r->buf + off, r->buf_len - off, rec, &used);
	if (err)
		return rfail(r, err, "%s: chunk at offset %llu: %s", r->path,
			     (unsigned long long)r->chunks[r->ev[r->cached]].offset,
			     tm_decoder_detail(r->dec));
	if (rec->type == TM_REC_EVENT &&
	    rec->u.event.node >= tm_nodetab_count(r->nodes))
		return rfail(r, TM_ERR_CORRUPT, "%s: event %llu refers to undefined node %u",
			     r->path, (unsigned long long)rec->u.event.seq,
			     rec->u.event.node);
	return TM_OK;
}

static int passes(const tm_reader *r, const struct tm_record *rec)
{
	return !r->has_filter || rec->type != TM_REC_EVENT || r->filter[rec->u.event.node];
}

int tm_reader_next(tm_reader *r, struct tm_record *rec)
{
	int err;

	for (;;) {
		if (r->ci >= r->nev)
			return TM_ERR_END;
		if ((err = load_ev(r, r->ci)) != TM_OK)
			return err;
		if (r->ri >= r->nroff) {
			r->ci++;
			r->ri = 0;
			continue;
		}
		if ((err = decode_at(r, r->ri, rec)) != TM_OK)
			return err;
		r->ri++;
		if (passes(r, rec))
			return TM_OK;
	}
}

int tm_reader_prev(tm_reader *r, struct tm_record *rec)
{
	int err;

	for (;;) {
		if (r->ri == 0) {
			if (r->ci == 0)
				return TM_ERR_END;
			if ((err = load_ev(r, r->ci - 1)) != TM_OK)
				return err;
			r->ci--;
			r->ri = r->nroff;
			continue;
		}
		if ((err = load_ev(r, r->ci)) != TM_OK)
			return err;
		if ((err = decode_at(r, r->ri - 1, rec)) != TM_OK)
			return err;
		r->ri--;
		if (passes(r, rec))
			return TM_OK;
	}
}

int tm_reader_rewind(tm_reader *r)
{
	r->ci = 0;
	r->ri = 0;
	return TM_OK;
}

int tm_reader_seek_end(tm_reader *r)
{
	r->ci = r->nev;
	r->ri = 0;
	return TM_OK;
}

/* First EVENTS chunk whose running maximum of key reaches target (nev: none):
 * every record before it is below target. */
static size_t first_reaching(const tm_reader *r, const uint64_t *pm, uint64_t target)
{
	size_t lo = 0, hi = r->nev;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (pm[mid] >= target)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

enum seek_key { KEY_SEQ, KEY_STEP, KEY_TIME };

/* The largest value of key a record covers (a gap covers up to last_seq). */
static uint64_t rec_key(const struct tm_record *rec, enum seek_key k)
{
	switch (rec->type) {
	case TM_REC_EVENT:
		return k == KEY_SEQ ? rec->u.event.seq :
		       k == KEY_STEP ? rec->u.event.step : rec->u.event.time_ns;
	case TM_REC_GAP:
		return k == KEY_SEQ ? rec->u.gap.last_seq :
		       k == KEY_STEP ? rec->u.gap.step : rec->u.gap.time_ns;
	case TM_REC_CRASH:
		return k == KEY_SEQ ? rec->u.crash.seq :
		       k == KEY_STEP ? rec->u.crash.step : rec->u.crash.time_ns;
	default:
		return 0;
	}
}

static int seek_key(tm_reader *r, enum seek_key k, uint64_t target)
{
	const uint64_t *pm = k == KEY_SEQ ? r->pmax_seq :
			     k == KEY_STEP ? r->pmax_step : r->pmax_time;
	/* This chunk holds a record that reaches target. */
	size_t lo = first_reaching(r, pm, target), i;
	int err;

	if (lo == r->nev)
		return tm_reader_seek_end(r);
	if ((err = load_ev(r, lo)) != TM_OK)
		return err;
	for (i = 0; i < r->nroff; i++) {
		struct tm_record rec;

		if ((err = decode_at(r, i, &rec)) != TM_OK)
			return err;
		if (rec_key(&rec, k) >= target)
			break;
	}
	r->ci = lo;
	r->ri = i;
	return TM_OK;
}

int tm_reader_seek_seq(tm_reader *r, uint64_t seq)
{
	return seek_key(r, KEY_SEQ, seq);
}

int tm_reader_seek_step(tm_reader *r, uint64_t step)
{
	return seek_key(r, KEY_STEP, step);
}

int tm_reader_seek_time(tm_reader *r, uint64_t time_ns)
{
	return seek_key(r, KEY_TIME, time_ns);
}

/*
 * Notes where the ANNOT records of the chunk in r->abuf are, and their
 * steps (the second field of the body): a scan looks a step up at each of
 * its events, and one walk of the chunk then serves all its steps.
 */
static int index_annots(tm_reader *r, const struct tmrun_chunk *c)
{
	size_t off, size;
	uint8_t type;
	int err;

	r->naidx = 0;
	for (off = 0; off < r->abuf_len; off += size) {
		struct tm_rd rd;
		uint64_t step;

		if ((err = record_at(r, c, r->abuf, r->abuf_len, off, &type, &size)))
			return err;
		if (type != TM_REC_ANNOT)
			continue;
		rd = (struct tm_rd){ r->abuf + off, r->abuf + off + size, 0 };
		(void)tm_rd_u8(&rd);            /* type */
		(void)tm_rd_uvarint(&rd);       /* length */
		(void)tm_rd_uvarint(&rd);       /* seq */
		step = tm_rd_uvarint(&rd);
		if (rd.bad)
			return rfail(r, TM_ERR_CORRUPT, "%s: chunk at offset %llu: "
				     "annotation at byte %zu ends early", r->path,
				     (unsigned long long)c->offset, off);
		if ((err = grow((void **)&r->aidx, &r->aidx_cap, r->naidx + 1,
				sizeof(*r->aidx))))
			return err;
		r->aidx[r->naidx].step = step;
		r->aidx[r->naidx++].off = off;
	}
	return TM_OK;
}

/* Looks for the annotation in the chunk held in r->abuf. */
/*
 * The latest ANNOT of step and key made at or before event seq in chunk c
 * (*rec, TM_OK), narrowing [*lo, *hi): the seqs for which that answer
 * holds.  Annotations lie in stream order.
 */
static int find_annot(tm_reader *r, const struct tmrun_chunk *c, uint64_t step, uint64_t seq,
		      const char *key, struct tm_record *rec, uint64_t *lo, uint64_t *hi,
		      size_t *found)
{
	size_t i, used, off;
	int err;

	for (i = 0; i < r->naidx; i++) {
		if (r->aidx[i].step != step)
			continue;
		off = r->aidx[i].off;
		err = tm_decode_record(r->adec, r->abuf + off, r->abuf_len - off, rec, &used);
		if (err)
			return rfail(r, err, "%s: chunk at offset %llu: %s", r->path,
				     (unsigned long long)c->offset, tm_decoder_detail(r->adec));
		if (strcmp(rec->u.annot.key, key))
			continue;
		if (rec->u.annot.seq > seq) {
			if (rec->u.annot.seq < *hi)
				*hi = rec->u.annot.seq;
			return TM_ERR_NOT_FOUND;        /* later ones are later still */
		}
		*lo = rec->u.annot.seq;
		*found = off;
	}
	return TM_ERR_NOT_FOUND;
}

/*
 * The writer counts an annotation's step in its chunk's step range and
 * writes it in stream order among the step's events, so it lies in the
 * first chunk whose running maximum reaches the step, or in a later one
 * that still starts at or before it.  Its own decoder and buffer leave the
 * cursor's record alone: conditions look annotations up while holding an
 * event.  The answer is kept with the range of seqs it holds for.
 */
int tm_reader_annotation_at(tm_reader *r, uint64_t step, uint64_t seq, const char *key,
			    const struct tm_annot **out)
{
	struct tm_record rec;
	uint64_t lo = 0, hi = UINT64_MAX;
	size_t ci, found = SIZE_MAX, found_ci = SIZE_MAX, used;
	int err = TM_ERR_NOT_FOUND;

	if (!r || !key || !out)
		return TM_ERR_INVALID_ARG;
	*out = NULL;
	if (r->ann_state && r->ann_step == step && !strcmp(r->ann_key, key) &&
	    r->ann_lo <= seq && seq < r->ann_hi) {
		*out = r->ann_state > 0 ? &r->ann : NULL;
		return r->ann_state > 0 ? TM_OK : TM_ERR_NOT_FOUND;
	}
	/* a 1.0 file has none: no chunk needs reading to know it */
	if (strlen(key) >= sizeof(r->ann_key) ||
	    (r->sum.version_major == 1 && r->sum.version_minor < 1))
		return TM_ERR_NOT_FOUND;
	if (!r->adec && !(r->adec = tm_decoder_new()))
		return TM_ERR_NOMEM;
	r->ann_state = 0;
	for (ci = first_reaching(r, r->pmax_step, step); ci < r->nev && hi == UINT64_MAX; ci++) {
		const struct tmrun_chunk *c = &r->chunks[r->ev[ci]];
		size_t f = SIZE_MAX;

		if (c->min_step > step)
			break;
		if (r->acached != ci) {
			r->acached = SIZE_MAX;
			if (r->cached == ci) {
				/* the cursor's chunk, decompressed already */
				if ((err = grow((void **)&r->abuf, &r->abuf_cap,
						r->buf_len + 1, 1)))
					return err;
				memcpy(r->abuf, r->buf, r->buf_len);
			} else if ((err = load_payload_into(r, c, &r->abuf, &r->abuf_cap))) {
				return err;
			}
			r->abuf_len = c->raw_len;
			if ((err = index_annots(r, c)))
				return err;
			r->acached = ci;
		}
		err = find_annot(r, c, step, seq, key, &rec, &lo, &hi, &f);
		if (err != TM_ERR_NOT_FOUND)
			return err;
		if (f != SIZE_MAX) {
			found = f;
			found_ci = ci;
		}
	}
	r->ann_step = step;
	r->ann_lo = lo;
	r->ann_hi = hi;
	strcpy(r->ann_key, key);
	r->ann_state = found == SIZE_MAX ? -1 : 1;
	if (found == SIZE_MAX)
		return TM_ERR_NOT_FOUND;
	if (r->acached != found_ci) {
		/* found in an earlier chunk than the last one read: read it again */
		const struct tmrun_chunk *c = &r->chunks[r->ev[found_ci]];

		r->acached = SIZE_MAX;
		if ((err = load_payload_into(r, c, &r->abuf, &r->abuf_cap)))
			return err;
		r->abuf_len = c->raw_len;
		if ((err = index_annots(r, c)))
			return err;
		r->acached = found_ci;
	}
	err = tm_decode_record(r->adec, r->abuf + found, r->abuf_len - found, &rec, &used);
	if (err) {
		r->ann_state = 0;
		return rfail(r, err, "%s: %s", r->path, tm_decoder_detail(r->adec));
	}
	r->ann = rec.u.annot;
	*out = &r->ann;
	return TM_OK;
}

int tm_reader_annotation(tm_reader *r, uint64_t step, const char *key,
			 const struct tm_annot **out)
{
	return tm_reader_annotation_at(r, step, UINT64_MAX, key, out);
}

void tm_reader_skip_hist(tm_reader *r, int on)
{
	if (r)
		tm_decoder_skip_hist(r->dec, on);
}

int tm_reader_set_filter(tm_reader *r, const tm_address *pattern)
{
	uint32_t i, n = tm_nodetab_count(r->nodes);

	if (!pattern) {
		r->has_filter = 0;
		return TM_OK;
	}
	free(r->filter);
	r->filter = calloc(n ? n : 1, 1);
	if (!r->filter) {
		r->has_filter = 0;
		return TM_ERR_NOMEM;
	}
	for (i = 0; i < n; i++)
		r->filter[i] = (uint8_t)(tm_address_match_path(pattern,
					 tm_nodetab_get(r->nodes, i)->address) == 1);
	r->has_filter = 1;
	return TM_OK;
}

/* ------------------------------------------------------------- opening */

static int add_chunk(tm_reader *r, const struct tmrun_chunk *c, size_t *cap)
{
	int err = grow((void **)&r->chunks, cap, r->nchunks + 1, sizeof(*r->chunks));

	if (!err)
		r->chunks[r->nchunks++] = *c;
	return err;
}

/*
 * Index path: trailer -> INDEX chunk -> entries; every entry is checked
 * against the file so that a lying index falls back to a scan.
 */
static int load_index(tm_reader *r)
{
	uint8_t tr[TMRUN_TRAILER_SIZE], hdr[TMRUN_CHUNK_HEADER_SIZE];
	struct tmrun_chunk ic, sc;
	uint64_t index_off, summary_off, prev_end = TMRUN_FILE_HEADER_SIZE;
	size_t cap = 0, i, n;
	int err, crc_ok;

	r->sum.index_damage = TM_INDEX_ABSENT;
	if (r->sum.file_bytes < TMRUN_FILE_HEADER_SIZE + TMRUN_TRAILER_SIZE +
	    2 * TMRUN_CHUNK_HEADER_SIZE)
		return TM_ERR_NO_INDEX;
	if (read_at(r, tr, sizeof(tr), r->sum.file_bytes - sizeof(tr)))
		return TM_ERR_NO_INDEX;
	/* A trailer whose magic or checksum alone is off was written and
	 * then damaged; neither matching is a file that ends without one. */
	crc_ok = tm_get_u32(tr + 20) == tm_crc32c(0, tr, 20);
	if (memcmp(tr + 24, tmrun_end_magic, 8) || !crc_ok) {
		if (crc_ok || !memcmp(tr + 24, tmrun_end_magic, 8))
			r->sum.index_damage = TM_INDEX_TRAILER;
		return TM_ERR_NO_INDEX;
	}
	index_off = tm_get_u64(tr);
	summary_off = tm_get_u64(tr + 8);
	if (index_off < TMRUN_FILE_HEADER_SIZE || summary_off <= index_off ||
	    summary_off > r->sum.file_bytes - sizeof(tr) - TMRUN_CHUNK_HEADER_SIZE) {
		r->sum.index_damage = TM_INDEX_TRAILER;
		return TM_ERR_NO_INDEX;
	}
	r->have_trailer = 1;
	r->trailer_index_off = index_off;
	r->sum.index_damage = TM_INDEX_INDEX;
	if (read_at(r, hdr, sizeof(hdr), index_off) ||
	    tmrun_chunk_header_decode(hdr, &ic) || ic.type != TMRUN_CHUNK_INDEX ||
	    index_off + TMRUN_CHUNK_HEADER_SIZE + ic.stored_len != summary_off ||
	    ic.raw_len % TMRUN_INDEX_ENTRY_SIZE ||
	    ic.raw_len / TMRUN_INDEX_ENTRY_SIZE != ic.nrecords)
		return TM_ERR_NO_INDEX;
	ic.offset = index_off;
	if (load_payload(r, &ic))
		return TM_ERR_NO_INDEX;
	n = ic.nrecords;
	for (i = 0; i < n; i++) {
		const uint8_t *e = r->buf + i * TMRUN_INDEX_ENTRY_SIZE;
		struct tmrun_chunk c;

		if (tmrun_chunk_header_decode(e + 8, &c))
			goto bad;
		c.offset = tm_get_u64(e);
		if (c.offset != prev_end ||
		    (c.type != TMRUN_CHUNK_META && c.type != TMRUN_CHUNK_EVENTS))
			goto bad;
		prev_end = c.offset + TMRUN_CHUNK_HEADER_SIZE + c.stored_len;
		if (prev_end > index_off)
			goto bad;
		if ((err = add_chunk(r, &c, &cap)))
			return err;
	}
	if (prev_end != index_off)
		goto bad;

	/* The SUMMARY chunk must be where the trailer says; the reader derives
	 * its totals from the index, which holds the same numbers. */
	if (read_at(r, hdr, sizeof(hdr), summary_off) ||
	    tmrun_chunk_header_decode(hdr, &sc) || sc.type != TMRUN_CHUNK_SUMMARY ||
	    summary_off + TMRUN_CHUNK_HEADER_SIZE + sc.stored_len !=
	    r->sum.file_bytes - sizeof(tr)) {
		r->sum.index_damage = TM_INDEX_SUMMARY;
		goto bad;
	}
	r->sum.index_damage = TM_INDEX_ABSENT;
	r->sum.indexed = 1;
	r->sum.complete = 1;
	return TM_OK;
bad:
	free(r->chunks);
	r->chunks = NULL;
	r->nchunks = 0;
	return TM_ERR_NO_INDEX;
}

/* Notes a region the resyncing scan could not read (at most 256 kept). */
static int note_skip(tm_reader *r, uint64_t off, uint64_t end, int err)
{
	struct tmrun_skip *p;

	if (r->nskips >= 256) {
		r->skips[255].end = end;
		return TM_OK;
	}
	p = realloc(r->skips, (r->nskips + 1) * sizeof(*p));
	if (!p)
		return TM_ERR_NOMEM;
	r->skips = p;
	p[r->nskips].off = off;
	p[r->nskips].end = end;
	p[r->nskips].err = err;
	r->nskips++;
	return TM_OK;
}

/* Reads and checks the chunk header at off (it must fit the file). */
static int header_at(tm_reader *r, uint64_t off, struct tmrun_chunk *c)
{
	uint8_t hdr[TMRUN_CHUNK_HEADER_SIZE];
	int err;

	if (r->sum.file_bytes - off < TMRUN_CHUNK_HEADER_SIZE)
		return TM_ERR_TRUNCATED;
	if ((err = read_at(r, hdr, sizeof(hdr), off)) != TM_OK)
		return err;
	if ((err = tmrun_chunk_header_decode(hdr, c)) != TM_OK)
		return err;
	c->offset = off;
	if (c->stored_len > r->sum.file_bytes - off - TMRUN_CHUNK_HEADER_SIZE)
		return TM_ERR_TRUNCATED;
	return TM_OK;
}

/*
 * The next offset >= from holding an intact chunk header: its magic, then
 * its header checksum, and a payload inside the file.  A false match needs
 * a 32-bit checksum to agree by chance.
 */
static int find_header(tm_reader *r, uint64_t from, uint64_t *found)
{
	uint8_t buf[65536];
	uint64_t off = from;

	while (off + TMRUN_CHUNK_HEADER_SIZE <= r->sum.file_bytes) {
		size_t want = sizeof(buf), i;
		struct tmrun_chunk c;

		if (r->sum.file_bytes - off < want)
			want = (size_t)(r->sum.file_bytes - off);
		if (read_at(r, buf, want, off))
			return TM_ERR_NOT_FOUND;
		for (i = 0; i + 4 <= want; i++) {
			if (tm_get_u32(buf + i) != TMRUN_CHUNK_MAGIC)
				continue;
			if (header_at(r, off + i, &c) == TM_OK) {
				*found = off + i;
				return TM_OK;
			}
		}
		if (want < sizeof(buf))
			break;
		off += want - 3;        /* a magic across the boundary */
	}
	return TM_ERR_NOT_FOUND;
}

/*
 * The walk over the chunk headers from the start.  The normal scan stops at
 * the first damaged or cut header: the chunks before it are kept and the
 * damage is noted (an error in strict mode).  Recovery's scan (salvage)
 * notes the region up to the next intact header and goes on, so that one
 * flipped byte loses one chunk, not the rest.
 */
static int scan_chunks(tm_reader *r, int salvage)
{
	uint64_t off = TMRUN_FILE_HEADER_SIZE;
	size_t cap = 0;
	int err;

	while (off < r->sum.file_bytes) {
		struct tmrun_chunk c;
		uint64_t next;

		/* An intact trailer says where the chunks that hold records
		 * end: damage after that (INDEX, SUMMARY) loses no event. */
		if (r->have_trailer && off == r->trailer_index_off) {
			r->sum.complete = 1;
			break;
		}
		/* A trailer alone at the end means a closed file whose index
		 * could not be used; recovery wants its magic to believe it. */
		if (r->sum.file_bytes - off == TMRUN_TRAILER_SIZE) {
			uint8_t tr[TMRUN_TRAILER_SIZE];

			if (!salvage || (read_at(r, tr, sizeof(tr), off) == TM_OK &&
					 !memcmp(tr + 24, tmrun_end_magic, 8)))
				break;
		}
		err = header_at(r, off, &c);
		if (err == TM_ERR_NOMEM)
			return err;
		if (err && !salvage)
			goto damaged;
		if (err) {
			if (find_header(r, off + 1, &next) != TM_OK)
				next = r->sum.file_bytes;
			if ((err = note_skip(r, off, next, err)) != TM_OK)
				return err;
			off = next;
			continue;
		}
		if (c.type == TMRUN_CHUNK_META || c.type == TMRUN_CHUNK_EVENTS) {
			if ((err = add_chunk(r, &c, &cap)))
				return err;
		}
		/* a SUMMARY with room for the trailer after it: the writer
		 * finished, whatever became of the trailer since */
		if (c.type == TMRUN_CHUNK_SUMMARY && r->sum.file_bytes >= TMRUN_TRAILER_SIZE &&
		    off + TMRUN_CHUNK_HEADER_SIZE + c.stored_len ==
		    r->sum.file_bytes - TMRUN_TRAILER_SIZE)
			r->sum.complete = 1;
		off += TMRUN_CHUNK_HEADER_SIZE + c.stored_len;
	}
	if (r->have_trailer && off >= r->trailer_index_off)
		r->sum.complete = 1;
	return TM_OK;
damaged:
	r->sum.damaged = 1;
	r->sum.damage_err = err;
	r->sum.damage_offset = off;
	if (r->flags & TM_READER_STRICT)
		return rfail(r, err, "%s: chunk at offset %llu: %s", r->path,
			     (unsigned long long)off, tm_strerror(err));
	return TM_OK;
}

/* ------------------------------------------------------------- salvage */

int tmrun_reader_open_salvage(const char *path, tm_reader **out, char **detail)
{
	return tm_reader_open(path, TMRUN_READER_SALVAGE, out, detail);
}

int tmrun_reader_header_damage(const tm_reader *r, const char **detail)
{
	if (detail)
		*detail = r->hdr_detail;
	return r->hdr_err;
}

const struct tmrun_skip *tmrun_reader_skips(const tm_reader *r, size_t *n)
{
	*n = r->nskips;
	return r->skips;
}

/*
 * Recovery's full check of a chunk: its payload (checksum, decompression),
 * every record decodes, its nodes continue the node table of the chunks
 * kept before it (dense ids, no duplicate address), and every event refers
 * to a node defined by then: what the reader accepts after those chunks.
 * A chunk that fails leaves the table as it was.
 */
int tmrun_reader_check_chunk(tm_reader *r, const struct tmrun_chunk *c,
			     const uint8_t **stored)
{
	uint32_t n0 = tm_nodetab_count(r->nodes);
	size_t off = 0;
	int err;

	r->cached = SIZE_MAX;
	if ((err = load_payload(r, c)) != TM_OK)
		return err;
	while (off < r->buf_len) {
		struct tm_record rec;
		size_t used;

		err = tm_decode_record(r->dec, r->buf + off, r->buf_len - off, &rec, &used);
		if (err) {
			rfail(r, err, "%s: %s: %s", r->path, chunk_name(r, c),
			      tm_decoder_detail(r->dec));
			goto bad;
		}
		if (rec.type == TM_REC_NODE) {
			err = c->type != TMRUN_CHUNK_META ? TM_ERR_CORRUPT :
			      tm_nodetab_put(r->nodes, &rec.u.node);
			if (err == TM_ERR_NOMEM)
				goto bad;
			if (err) {
				err = rfail(r, TM_ERR_CORRUPT, "%s: %s: node %u out of order "
					    "or duplicated", r->path, chunk_name(r, c),
					    rec.u.node.id);
				goto bad;
			}
		} else if (rec.type == TM_REC_EVENT &&
			   rec.u.event.node >= tm_nodetab_count(r->nodes)) {
			err = rfail(r, TM_ERR_CORRUPT, "%s: %s: event %llu refers to "
				    "undefined node %u", r->path, chunk_name(r, c),
				    (unsigned long long)rec.u.event.seq, rec.u.event.node);
			goto bad;
		}
		off += used;
	}
	*stored = r->stored;
	return TM_OK;
bad:
	tm_nodetab_truncate(r->nodes, n0);
	return err;
}

static const char *keep_str(tm_reader *r, const char *s)
{
	char **p;

	if (!s)
		return NULL;
	p = realloc(r->meta_strs, (r->nmeta_strs + 1) * sizeof(*p));
	if (!p)
		return NULL;
	r->meta_strs = p;
	p[r->nmeta_strs] = tm_strdup0(s);
	return p[r->nmeta_strs] ? p[r->nmeta_strs++] : NULL;
}

static int keep_meta(tm_reader *r, const struct tm_run_meta *m)
{
	uint32_t i;

	r->meta = *m;
	r->meta.probe_kind = keep_str(r, m->probe_kind);
	r->meta.torch_version = keep_str(r, m->torch_version);
	r->meta.host = keep_str(r, m->host);
	r->meta.command = keep_str(r, m->command);
	for (i = 0; i < m->npairs; i++) {
		r->meta.keys[i] = keep_str(r, m->keys[i]);
		r->meta.values[i] = keep_str(r, m->values[i]);
		if (!r->meta.keys[i] || !r->meta.values[i])
			return TM_ERR_NOMEM;
	}
	r->have_meta = 1;
	return TM_OK;
}

/* Restores the run metadata and node table from one META chunk record. */
static int take_meta(tm_reader *r, const struct tmrun_chunk *c, const struct tm_record *rec)
{
	int err;

	if (rec->type == TM_REC_META)
		return keep_meta(r, &rec->u.meta);
	if (rec->type != TM_REC_NODE)
		return TM_OK;
	err = tm_nodetab_put(r->nodes, &rec->u.node);
	if (err && err != TM_ERR_NOMEM)
		return rfail(r, TM_ERR_CORRUPT, "%s: chunk at offset %llu: "
			     "node %u (%s) out of order or duplicated", r->path,
			     (unsigned long long)c->offset, rec->u.node.id,
			     rec->u.node.address);
	return err;
}

/*
 * Loads chunk c and decodes every record in it, handing each to fn (which
 * may be NULL: a full check of the chunk).
 */
static int walk_chunk(tm_reader *r, const struct tmrun_chunk *c,
		      int (*fn)(tm_reader *, const struct tmrun_chunk *,
				const struct tm_record *))
{
	size_t off = 0;
	int err;

	r->cached = SIZE_MAX;
	if ((err = load_payload(r, c)) != TM_OK)
		return err;
	while (off < r->buf_len) {
		struct tm_record rec;
		size_t used;

		err = tm_decode_record(r->dec, r->buf + off, r->buf_len - off, &rec, &used);
		if (err)
			return rfail(r, err, "%s: chunk at offset %llu: %s", r->path,
				     (unsigned long long)c->offset, tm_decoder_detail(r->dec));
		if (fn && (err = fn(r, c, &rec)) != TM_OK)
			return err;
		off += used;
	}
	return TM_OK;
}

/*
 * META chunks, the EVENTS list and its running maxima.  A META chunk that
 * does not decode ends the readable part there, like a truncated chunk.
 */
static int build_tables(tm_reader *r)
{
	size_t i;
	int err;

	r->ev = malloc((r->nchunks ? r->nchunks : 1) * sizeof(*r->ev));
	if (!r->ev)
		return TM_ERR_NOMEM;
	for (i = 0; i < r->nchunks; i++) {
		const struct tmrun_chunk *c = &r->chunks[i];

		if (c->type == TMRUN_CHUNK_META) {
			err = walk_chunk(r, c, take_meta);
			if (err == TM_ERR_NOMEM)
				return err;
			if (err) {
				if (r->flags & TM_READER_STRICT)
					return err;
				r->sum.damaged = 1;
				r->sum.damage_err = err;
				r->sum.damage_offset = c->offset;
				r->sum.indexed = 0;
				r->sum.complete = 0;
				r->nchunks = i;
				break;
			}
		} else {
			r->ev[r->nev++] = i;
		}
	}
	r->pmax_seq = malloc((r->nev ? r->nev : 1) * sizeof(uint64_t));
	r->pmax_step = malloc((r->nev ? r->nev : 1) * sizeof(uint64_t));
	r->pmax_time = malloc((r->nev ? r->nev : 1) * sizeof(uint64_t));
	if (!r->pmax_seq || !r->pmax_step || !r->pmax_time)
		return TM_ERR_NOMEM;
	for (i = 0; i < r->nev; i++) {
		const struct tmrun_chunk *c = &r->chunks[r->ev[i]];
		uint64_t s = c->last_seq, st = c->max_step, t = c->max_time;


		if (i) {
			s = s > r->pmax_seq[i - 1] ? s : r->pmax_seq[i - 1];
			st = st > r->pmax_step[i - 1] ? st : r->pmax_step[i - 1];
			t = t > r->pmax_time[i - 1] ? t : r->pmax_time[i - 1];
		}
		r->pmax_seq[i] = s;
		r->pmax_step[i] = st;
		r->pmax_time[i] = t;
	}
	return TM_OK;
}

int tm_reader_open(const char *path, unsigned flags, tm_reader **out, char **detail)
{
	uint8_t hdr[TMRUN_FILE_HEADER_SIZE];
	struct stat st;
	tm_reader *r;
	int err;

	*out = NULL;
	if (detail)
		*detail = NULL;
	if (!path)
		return TM_ERR_INVALID_ARG;
	r = calloc(1, sizeof(*r));
	if (!r)
		return TM_ERR_NOMEM;
	r->fd = -1;
	r->flags = flags;
	r->cached = SIZE_MAX;
	r->acached = SIZE_MAX;
	r->path = tm_strdup0(path);
	r->nodes = tm_nodetab_new();
	r->dec = tm_decoder_new();
	r->dctx = ZSTD_createDCtx();
	if (!r->path || !r->nodes || !r->dec || !r->dctx) {
		err = TM_ERR_NOMEM;
		goto fail;
	}
	/* O_NONBLOCK: a FIFO must not hang the open; it is refused below
	 * (not a regular file), and reads of a regular file never block */
	r->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (r->fd < 0) {
		err = rfail(r, TM_ERR_IO, "%s: %s", path, strerror(errno));
		goto fail;
	}
	if (fstat(r->fd, &st) || !S_ISREG(st.st_mode)) {
		err = rfail(r, TM_ERR_IO, "%s: not a regular file", path);
		goto fail;
	}
	r->sum.file_bytes = (uint64_t)st.st_size;
	if (r->sum.file_bytes < TMRUN_FILE_HEADER_SIZE) {
		size_t n = (size_t)r->sum.file_bytes;

		/* A prefix of the magic is a trace cut short; anything else is not a trace. */
		if (read_at(r, hdr, n, 0) == TM_OK && !memcmp(hdr, tmrun_magic, n < 8 ? n : 8))
			err = rfail(r, TM_ERR_TRUNCATED, "%s: trace is truncated (%zu bytes)",
				    path, n);
		else
			err = rfail(r, TM_ERR_BAD_MAGIC, "%s: not a .tmrun trace", path);
		goto fail;
	}
	if ((err = read_at(r, hdr, sizeof(hdr), 0)) != TM_OK) {
		rfail(r, err, "%s: %s", path, tm_strerror(err));
		goto fail;
	}
	if (memcmp(hdr, tmrun_magic, 8)) {
		err = rfail(r, TM_ERR_BAD_MAGIC, "%s: not a .tmrun trace (bad magic number)", path);
	} else if (tm_get_u32(hdr + 28) != tm_crc32c(0, hdr, 28)) {
		err = rfail(r, TM_ERR_CRC, "%s: file header: checksum mismatch (the file is "
			    "damaged; \"tmdb --recover\" rebuilds it from the chunks)", path);
	} else {
		r->sum.version_major = tm_get_u16(hdr + 8);
		r->sum.version_minor = tm_get_u16(hdr + 10);
		if (r->sum.version_major != TMRUN_VERSION_MAJOR)
			err = rfail(r, TM_ERR_VERSION, "%s: format version %u.%u; this tmdb reads %u.x",
				    path, r->sum.version_major, r->sum.version_minor,
				    TMRUN_VERSION_MAJOR);
		else if (tm_get_u32(hdr + 12) || tm_get_u32(hdr + 24))
			err = rfail(r, TM_ERR_RESERVED, "%s: file header: reserved fields are set",
				    path);
	}
	if (err) {
		if (!(flags & TMRUN_READER_SALVAGE))
			goto fail;
		/* Recovery: the header holds nothing the chunks need (its
		 * version only allows what this reader reads anyway). */
		r->hdr_err = err;
		memcpy(r->hdr_detail, r->detail, sizeof(r->hdr_detail));
		r->detail[0] = 0;
		r->sum.version_major = TMRUN_VERSION_MAJOR;
		r->sum.version_minor = TMRUN_VERSION_MINOR;
		err = TM_OK;
	}

	err = TM_ERR_NO_INDEX;
	r->sum.index_damage = TM_INDEX_IGNORED;
	if (!(flags & TM_READER_NO_INDEX))
		err = load_index(r);
	if (err == TM_ERR_NOMEM)
		goto fail;
	if (err) {
		r->sum.indexed = 0;
		r->sum.complete = 0;
		err = scan_chunks(r, !!(flags & TMRUN_READER_SALVAGE));
		if (err != TM_OK)
			goto fail;
	}
	if (flags & TMRUN_READER_SALVAGE) {
		/* tm_recover checks every chunk itself: no tables */
		r->salvage = 1;
		r->sum.nchunks = r->nchunks;
		tmrun_summarise(r->chunks, r->nchunks, &r->sum);
		*out = r;
		return TM_OK;
	}
	if ((err = build_tables(r)) != TM_OK) {
		if (!r->detail[0])
			rfail(r, err, "%s: %s", path, tm_strerror(err));
		goto fail;
	}
	r->sum.nchunks = r->nchunks;
	tmrun_summarise(r->chunks, r->nchunks, &r->sum);
	r->detail[0] = '\0';
	*out = r;
	return TM_OK;
fail:
	if (detail)
		*detail = tm_strdup0(r->detail[0] ? r->detail : tm_strerror(err));
	tm_reader_close(r);
	return err;
}

void tm_reader_close(tm_reader *r)
{
	size_t i;

	if (!r)
		return;
	if (r->fd >= 0)
		close(r->fd);
	for (i = 0; i < r->nmeta_strs; i++)
		free(r->meta_strs[i]);
	free(r->meta_strs);
	free(r->path);
	free(r->chunks);
	free(r->ev);
	free(r->pmax_seq);
	free(r->pmax_step);
	free(r->pmax_time);
	tm_nodetab_free(r->nodes);
	tm_decoder_free(r->dec);
	tm_decoder_free(r->adec);
	free(r->abuf);
	free(r->aidx);
	ZSTD_freeDCtx(r->dctx);
	free(r->stored);
	free(r->buf);
	free(r->roff);
	free(r->filter);
	free(r->skips);
	free(r);
}

const struct tm_summary *tm_reader_summary(const tm_reader *r)
{
	return &r->sum;
}

const struct tm_run_meta *tm_reader_meta(const tm_reader *r)
{
	return r->have_meta ? &r->meta : NULL;
}

const tm_nodetab *tm_reader_nodes(const tm_reader *r)
{
	return r->nodes;
}

const char *tm_reader_detail(const tm_reader *r)
{
	return r->detail;
}

size_t tmrun_reader_nchunks(const tm_reader *r)
{
	return r->nchunks;
}

const struct tmrun_chunk *tmrun_reader_chunk(const tm_reader *r, size_t i)
{
	return i < r->nchunks ? &r->chunks[i] : NULL;
}

/* Checksum, decompression and a full decode of every record of chunk i;
 * on success *stored points at its stored bytes (valid until the next call). */
int tmrun_reader_verify_chunk(tm_reader *r, size_t i, const uint8_t **stored)
{
	int err = walk_chunk(r, &r->chunks[i], NULL);

	if (!err)
		*stored = r->stored;
	return err;
}

const char *tm_reader_path(const tm_reader *r)
{
	return r->path;
}
