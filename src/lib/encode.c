/*
 * encode.c -- the record encoding shared by .tmrun chunks and wire frames.
 *
 * A record is  type (u8) | body length (uvarint) | body.  Bodies are mostly
 * LEB128 varints (small numbers stay small before zstd sees them) and raw
 * little-endian f64 for real-valued stats.  doc/tmrun.md section "Records"
 * is the specification.  The decoder is written for hostile input: every
 * count is capped, every read bounded, and a bad record is an error code
 * with a one-line detail, never a crash.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "tm-internal.h"
#include "tm-tmrun.h"
#include "tmrun-format.h"

/* ------------------------------------------------------------- tm_buf */

void tm_buf_free(struct tm_buf *b)
{
	if (!b)
		return;
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

int tm_buf_reserve(struct tm_buf *b, size_t extra)
{
	size_t need, cap;
	uint8_t *d;

	if (extra > SIZE_MAX - b->len)
		return TM_ERR_NOMEM;
	need = b->len + extra;
	if (need <= b->cap)
		return TM_OK;
	cap = b->cap ? b->cap : 256;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	d = realloc(b->data, cap);
	if (!d)
		return TM_ERR_NOMEM;
	b->data = d;
	b->cap = cap;
	return TM_OK;
}

/* ------------------------------------------------------------- encoding */

/*
 * Records are encoded in two steps: the body into place after a 5-byte
 * hole, then the length varint is written and the body moved down if the
 * length took fewer bytes.  Each encoder reserves an upper bound of its
 * record's size once, so the field writers below never check for room:
 * this is the probe's hot path, one call per event.
 */
#define LEN_HOLE 5
#define UV_MAX 10

struct enc {
	struct tm_buf *b;
	uint8_t *p;       /* write position inside b->data */
	size_t start;     /* offset of the type byte */
	int err;
};

static void enc_begin(struct enc *e, struct tm_buf *b, uint8_t type, size_t bound)
{
	e->b = b;
	e->start = b->len;
	e->err = tm_buf_reserve(b, 1 + LEN_HOLE + bound);
	e->p = e->err ? NULL : b->data + b->len;
	if (!e->err) {
		e->p[0] = type;
		e->p += 1 + LEN_HOLE;
	}
}

static inline void enc_uv(struct enc *e, uint64_t v)
{
	e->p += tm_put_uvarint(e->p, v);
}

static inline void enc_u8(struct enc *e, uint8_t v)
{
	*e->p++ = v;
}

static inline void enc_f64(struct enc *e, double d)
{
	uint64_t u;

	memcpy(&u, &d, 8);
	tm_put_u64(e->p, u);
	e->p += 8;
}

static void enc_bytes(struct enc *e, const void *p, size_t n)
{
	enc_uv(e, n);
	if (n)
		memcpy(e->p, p, n);
	e->p += n;
}

/* Bound of a string field; strings over the cap make the record fail. */
static size_t str_bound(const char *s, int *err)
{
	size_t n = s ? strlen(s) : 0;

	if (n >= TMRUN_MAX_STRING)
		*err = TM_ERR_TOO_LARGE;
	return UV_MAX + n;
}

static void enc_str(struct enc *e, const char *s)
{
	/* NULL and "" are both absent; readers see "" as NULL for optional fields. */
	enc_bytes(e, s, s ? strlen(s) : 0);
}

static int enc_end(struct enc *e)
{
	size_t body, hdr;
	uint8_t tmp[UV_MAX];

	if (e->err) {
		e->b->len = e->start;
		return e->err;
	}
	body = (size_t)(e->p - e->b->data) - e->start - 1 - LEN_HOLE;
	if (body > TMRUN_MAX_RECORD) {
		e->b->len = e->start;
		return TM_ERR_TOO_LARGE;
	}
	hdr = tm_put_uvarint(tmp, body);
	memcpy(e->b->data + e->start + 1, tmp, hdr);
	if (hdr < LEN_HOLE)
		memmove(e->b->data + e->start + 1 + hdr,
			e->b->data + e->start + 1 + LEN_HOLE, body);
	e->b->len = e->start + 1 + hdr + body;
	return TM_OK;
}

int tm_encode_meta(struct tm_buf *b, const struct tm_run_meta *m)
{
	struct enc e;
	uint32_t i;

	size_t bound;
	int err = 0;

	if (!m || m->npairs > TM_META_MAX_PAIRS || m->default_level > 3)
		return TM_ERR_INVALID_ARG;
	bound = 1 + 5 * UV_MAX + str_bound(m->probe_kind, &err) +
		str_bound(m->torch_version, &err) + str_bound(m->host, &err) +
		str_bound(m->command, &err);
	for (i = 0; i < m->npairs; i++)
		bound += str_bound(m->keys[i], &err) + str_bound(m->values[i], &err);
	if (err)
		return err;
	enc_begin(&e, b, TM_REC_META, bound);
	if (e.err)
		return e.err;
	enc_str(&e, m->probe_kind);
	enc_u8(&e, m->default_level);
	enc_str(&e, m->torch_version);
	enc_str(&e, m->host);
	enc_uv(&e, m->start_unix_ns);
	enc_uv(&e, tm_zigzag_enc(m->rank));
	enc_uv(&e, tm_zigzag_enc(m->world_size));
	enc_str(&e, m->command);
	enc_uv(&e, m->npairs);
	for (i = 0; i < m->npairs; i++) {
		enc_str(&e, m->keys[i]);
		enc_str(&e, m->values[i]);
	}
	return enc_end(&e);
}

int tm_encode_node(struct tm_buf *b, const struct tm_node *n)
{
	struct enc e;

	size_t bound;
	int err = 0;

	if (!n || !n->address || !*n->address)
		return TM_ERR_INVALID_ARG;
	bound = 1 + 4 * UV_MAX + str_bound(n->address, &err) + str_bound(n->type, &err) +
		str_bound(n->file, &err);
	if (err)
		return err;
	enc_begin(&e, b, TM_REC_NODE, bound);
	if (e.err)
		return e.err;
	enc_uv(&e, n->id);
	/* parent + 1 so that TM_NODE_NONE (the root's parent) encodes as 0 */
	enc_uv(&e, n->parent == TM_NODE_NONE ? 0 : (uint64_t)n->parent + 1);
	enc_uv(&e, n->depth);
	enc_u8(&e, n->kind);
	enc_str(&e, n->address);
	enc_str(&e, n->type);
	enc_str(&e, n->file);
	enc_uv(&e, n->line);
	return enc_end(&e);
}

#define TENSOR_FLAG_HIST 0x01
#define TENSOR_FLAG_PAYLOAD 0x02
#define TENSOR_FLAG_LOG2 0x04          /* 1.3: the histogram is TM_HIST_LOG2 */
#define TENSOR_FLAGS_ALL 0x07
#define STATS_ALL_MASK ((UINT32_C(1) << TM_STAT__COUNT) - 1)

/* Upper bound of one encoded tensor; also validates it. */
static size_t tensor_bound(const struct tm_tensor *t, int *err)
{
	if (t->rank > TM_MAX_RANK || t->slot.kind >= TM_SLOT__COUNT ||
	    t->dtype >= TM_DT__COUNT || t->device_type > 2) {
		*err = TM_ERR_INVALID_ARG;
		return 0;
	}
	if (t->payload && t->payload_len > TMRUN_MAX_RECORD / 2) {
		*err = TM_ERR_TOO_LARGE;
		return 0;
	}
	return 6 + (2 + TM_MAX_RANK + TM_STAT__COUNT) * UV_MAX + 16 +
	       TM_HIST_BINS * UV_MAX + UV_MAX + (t->payload ? (size_t)t->payload_len : 0);
}

static void enc_tensor(struct enc *e, const struct tm_tensor *t)
{
	uint32_t have = t->have & STATS_ALL_MASK;
	unsigned i;
	uint8_t flags = 0;

	enc_u8(e, t->slot.kind);
	enc_uv(e, t->slot.index);
	enc_u8(e, t->dtype);
	enc_u8(e, t->rank);
	for (i = 0; i < t->rank; i++)
		enc_uv(e, tm_zigzag_enc(t->shape[i]));
	enc_u8(e, t->device_type);
	enc_uv(e, t->device_index);
	enc_uv(e, have);
	for (i = 0; i < TM_STAT__COUNT; i++) {
		if (!(have & TM_STAT_BIT(i)))
			continue;
		if (tm_stat_table[i].integer)
			enc_uv(e, t->stat[i] > 0 ? (uint64_t)t->stat[i] : 0);
		else
			enc_f64(e, t->stat[i]);
	}
	if (t->have_hist)
		flags |= TENSOR_FLAG_HIST;
	if (t->have_hist == TM_HIST_LOG2)
		flags |= TENSOR_FLAG_LOG2;
	if (t->payload)
		flags |= TENSOR_FLAG_PAYLOAD;
	enc_u8(e, flags);
	if (t->have_hist) {
		enc_f64(e, t->hist_lo);
		enc_f64(e, t->hist_hi);
		for (i = 0; i < TM_HIST_BINS; i++)
			enc_uv(e, t->hist[i]);
	}
	if (t->payload)
		enc_bytes(e, t->payload, (size_t)t->payload_len);
}

int tm_encode_event(struct tm_buf *b, const struct tm_event *ev)
{
	struct enc e;
	size_t bound = 1 + 8 * UV_MAX;
	uint32_t i;
	int err = 0;

	if (!ev || ev->phase > 1 || ev->kind >= TM_EV__COUNT || ev->level > 3 ||
	    ev->ntensors > TM_MAX_TENSORS || (ev->ntensors && !ev->tensors) ||
	    ev->node == TM_NODE_NONE || (ev->op_flags & ~TM_OPF__ALL))
		return TM_ERR_INVALID_ARG;
	for (i = 0; i < ev->ntensors; i++)
		bound += tensor_bound(&ev->tensors[i], &err);
	if (err)
		return err;
	enc_begin(&e, b, TM_REC_EVENT, bound);
	if (e.err)
		return e.err;
	enc_uv(&e, ev->seq);
	enc_uv(&e, ev->step);
	/* phase: bit 0; kind: bits 1-3; level: bits 4-5; bits 6-7 reserved */
	enc_u8(&e, (uint8_t)(ev->phase | (ev->kind << 1) | (ev->level << 4)));
	enc_uv(&e, ev->node);
	enc_uv(&e, ev->call);
	enc_uv(&e, ev->time_ns);
	enc_uv(&e, ev->start_ns);
	enc_uv(&e, ev->end_ns);
	enc_uv(&e, ev->ntensors);
	for (i = 0; i < ev->ntensors; i++)
		enc_tensor(&e, &ev->tensors[i]);
	/* appended fields (doc/tmrun.md 4.3): an op's index and flags */
	if (ev->kind == TM_EV_OP) {
		enc_uv(&e, ev->op_index);
		enc_u8(&e, ev->op_flags);
	}
	return enc_end(&e);
}

int tm_encode_gap(struct tm_buf *b, const struct tm_gap *g)
{
	struct enc e;

	if (!g || g->last_seq < g->first_seq)
		return TM_ERR_INVALID_ARG;
	enc_begin(&e, b, TM_REC_GAP, 6 * UV_MAX);
	if (e.err)
		return e.err;
	enc_uv(&e, g->first_seq);
	enc_uv(&e, g->last_seq - g->first_seq);
	enc_uv(&e, g->count);
	enc_uv(&e, g->reason);
	enc_uv(&e, g->time_ns);
	enc_uv(&e, g->step);
	return enc_end(&e);
}

int tm_encode_crash(struct tm_buf *b, const struct tm_crash *c)
{
	struct enc e;
	size_t bound = 1 + 6 * UV_MAX;
	uint32_t i;
	int err = 0;

	if (!c || c->nframes > TM_MAX_FRAMES || c->phase > 1)
		return TM_ERR_INVALID_ARG;
	for (i = 0; i < c->nframes; i++)
		bound += str_bound(c->frames[i], &err);
	if (err)
		return err;
	enc_begin(&e, b, TM_REC_CRASH, bound);
	if (e.err)
		return e.err;
	enc_uv(&e, c->seq);
	enc_uv(&e, c->step);
	enc_uv(&e, c->time_ns);
	enc_uv(&e, tm_zigzag_enc(c->signo));
	enc_uv(&e, c->node == TM_NODE_NONE ? 0 : (uint64_t)c->node + 1);
	enc_u8(&e, c->phase);
	enc_uv(&e, c->nframes);
	for (i = 0; i < c->nframes; i++)
		enc_str(&e, c->frames[i]);
	return enc_end(&e);
}

int tm_encode_annot(struct tm_buf *b, const struct tm_annot *a)
{
	struct enc e;
	size_t bound = 1 + 6 * UV_MAX;
	uint32_t i;
	int err = 0;

	if (!a || !a->key || !*a->key || strlen(a->key) >= TM_ANNOT_MAX_KEY ||
	    a->nvalues > TM_ANNOT_MAX_VALUES || a->count < a->nvalues ||
	    (a->nvalues && !a->values))
		return TM_ERR_INVALID_ARG;
	bound += str_bound(a->key, &err);
	for (i = 0; i < a->nvalues; i++) {
		if (!a->values[i] || strlen(a->values[i]) >= TM_ANNOT_MAX_VALUE)
			return TM_ERR_INVALID_ARG;
		bound += str_bound(a->values[i], &err);
	}
	if (err)
		return err;
	enc_begin(&e, b, TM_REC_ANNOT, bound);
	if (e.err)
		return e.err;
	enc_uv(&e, a->seq);
	enc_uv(&e, a->step);
	enc_uv(&e, a->time_ns);
	enc_str(&e, a->key);
	enc_uv(&e, a->count);
	enc_uv(&e, a->nvalues);
	for (i = 0; i < a->nvalues; i++)
		enc_str(&e, a->values[i]);
	return enc_end(&e);
}

int tm_encode_record(struct tm_buf *b, const struct tm_record *r)
{
	switch (r->type) {
	case TM_REC_META: return tm_encode_meta(b, &r->u.meta);
	case TM_REC_NODE: return tm_encode_node(b, &r->u.node);
	case TM_REC_EVENT: return tm_encode_event(b, &r->u.event);
	case TM_REC_GAP: return tm_encode_gap(b, &r->u.gap);
	case TM_REC_CRASH: return tm_encode_crash(b, &r->u.crash);
	case TM_REC_ANNOT: return tm_encode_annot(b, &r->u.annot);
	default: return TM_ERR_INVALID_ARG;
	}
}

/* ------------------------------------------------------------- decoding */

struct tm_decoder {
	struct tm_tensor tensors[TM_MAX_TENSORS];
	const char *values[TM_ANNOT_MAX_VALUES];    /* an annotation's */
	/* strings of the current record, NUL-terminated copies */
	char *strs;
	size_t strs_len, strs_cap;
	char detail[160];
	int skip_hist;          /* tm_decoder_skip_hist */
};

void tm_decoder_skip_hist(tm_decoder *d, int on)
{
	if (d)
		d->skip_hist = on;
}

/* Passes over a varint as tm_rd_uvarint reads it, without its value. */
static void skip_uvarint(struct tm_rd *r)
{
	const uint8_t *p = r->p, *end = r->end;
	unsigned n = 0;

	while (p < end && (*p & 0x80) && n < 10) {
		p++;
		n++;
	}
	if (p == end || n == 10) {
		r->bad = 1;
		r->p = end;
		return;
	}
	r->p = p + 1;
}

tm_decoder *tm_decoder_new(void)
{
	return calloc(1, sizeof(struct tm_decoder));
}

void tm_decoder_free(tm_decoder *d)
{
	if (!d)
		return;
	free(d->strs);
	free(d);
}

const char *tm_decoder_detail(const tm_decoder *d)
{
	return d->detail;
}

__attribute__((format(printf, 3, 4)))
static int dec_fail(tm_decoder *d, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(d->detail, sizeof(d->detail), fmt, ap);
	va_end(ap);
	return err;
}

/*
 * Strings are copied into one arena per record; offsets are stored first and
 * turned into pointers at the end, because the arena may move while growing.
 */
static size_t dec_str(tm_decoder *d, struct tm_rd *r, int *err)
{
	uint64_t n = tm_rd_uvarint(r);
	const uint8_t *s;
	size_t off;

	if (r->bad)
		return SIZE_MAX;
	if (n >= TMRUN_MAX_STRING) {
		*err = TM_ERR_TOO_LARGE;
		return SIZE_MAX;
	}
	if (n == 0)
		return SIZE_MAX;  /* absent */
	s = tm_rd_bytes(r, n);
	if (!s)
		return SIZE_MAX;
	if (d->strs_len + n + 1 > d->strs_cap) {
		size_t cap = d->strs_cap ? d->strs_cap : 1024;
		char *p;

		while (cap < d->strs_len + n + 1)
			cap *= 2;
		p = realloc(d->strs, cap);
		if (!p) {
			*err = TM_ERR_NOMEM;
			return SIZE_MAX;
		}
		d->strs = p;
		d->strs_cap = cap;
	}
	off = d->strs_len;
	memcpy(d->strs + off, s, n);
	d->strs[off + n] = '\0';
	d->strs_len += n + 1;
	return off;
}

static const char *str_at(const tm_decoder *d, size_t off)
{
	return off == SIZE_MAX ? NULL : d->strs + off;
}

static int dec_meta(tm_decoder *d, struct tm_rd *r, struct tm_run_meta *m)
{
	size_t kind, torch, host, cmd, keys[TM_META_MAX_PAIRS], vals[TM_META_MAX_PAIRS];
	uint64_t np, i;
	int err = 0;

	memset(m, 0, sizeof(*m));
	kind = dec_str(d, r, &err);
	m->default_level = tm_rd_u8(r);
	torch = dec_str(d, r, &err);
	host = dec_str(d, r, &err);
	m->start_unix_ns = tm_rd_uvarint(r);
	m->rank = (int32_t)tm_zigzag_dec(tm_rd_uvarint(r));
	m->world_size = (int32_t)tm_zigzag_dec(tm_rd_uvarint(r));
	cmd = dec_str(d, r, &err);
	np = tm_rd_uvarint(r);
	if (err)
		return dec_fail(d, err, "meta: string too long");
	if (np > TM_META_MAX_PAIRS)
		return dec_fail(d, TM_ERR_TOO_LARGE, "meta: %llu pairs exceed %d",
				(unsigned long long)np, TM_META_MAX_PAIRS);
	for (i = 0; i < np; i++) {
		keys[i] = dec_str(d, r, &err);
		vals[i] = dec_str(d, r, &err);
	}
	if (r->bad || err)
		return dec_fail(d, err ? err : TM_ERR_CORRUPT, "meta: record ends early");
	if (m->default_level > 3)
		return dec_fail(d, TM_ERR_CORRUPT, "meta: level %u", m->default_level);
	m->probe_kind = str_at(d, kind);
	m->torch_version = str_at(d, torch);
	m->host = str_at(d, host);
	m->command = str_at(d, cmd);
	m->npairs = (uint32_t)np;
	for (i = 0; i < np; i++) {
		m->keys[i] = str_at(d, keys[i]);
		m->values[i] = str_at(d, vals[i]);
		if (!m->keys[i])
			m->keys[i] = "";
		if (!m->values[i])
			m->values[i] = "";
	}
	return TM_OK;
}

static int dec_node(tm_decoder *d, struct tm_rd *r, struct tm_node *n)
{
	uint64_t id, parent, depth, line;
	size_t addr, type, file;
	int err = 0;

	id = tm_rd_uvarint(r);
	parent = tm_rd_uvarint(r);
	depth = tm_rd_uvarint(r);
	n->kind = tm_rd_u8(r);
	addr = dec_str(d, r, &err);
	type = dec_str(d, r, &err);
	file = dec_str(d, r, &err);
	line = tm_rd_uvarint(r);
	if (r->bad || err)
		return dec_fail(d, err ? err : TM_ERR_CORRUPT, "node: record ends early");
	if (id >= TM_NODE_NONE || parent > TM_NODE_NONE || depth > TM_ADDRESS_MAX_SEGMENTS ||
	    line > UINT32_MAX || n->kind > TM_NODE_OP || addr == SIZE_MAX)
		return dec_fail(d, TM_ERR_CORRUPT, "node %llu: bad field",
				(unsigned long long)id);
	n->id = (uint32_t)id;
	n->parent = parent ? (uint32_t)(parent - 1) : TM_NODE_NONE;
	n->depth = (uint16_t)depth;
	n->address = str_at(d, addr);
	n->type = str_at(d, type);
	n->file = str_at(d, file);
	n->line = (uint32_t)line;
	return TM_OK;
}

static int dec_tensor(tm_decoder *d, struct tm_rd *r, struct tm_tensor *t)
{
	uint64_t v, have;
	uint8_t flags;
	unsigned i;

	t->slot.kind = tm_rd_u8(r);
	v = tm_rd_uvarint(r);
	if (t->slot.kind >= TM_SLOT__COUNT || v > UINT16_MAX)
		return dec_fail(d, TM_ERR_CORRUPT, "tensor: bad slot");
	t->slot.index = (uint16_t)v;
	t->dtype = tm_rd_u8(r);
	t->rank = tm_rd_u8(r);
	if (t->dtype >= TM_DT__COUNT || t->rank > TM_MAX_RANK)
		return dec_fail(d, TM_ERR_CORRUPT, "tensor: dtype %u rank %u",
				t->dtype, t->rank);
	for (i = 0; i < t->rank; i++)
		t->shape[i] = tm_zigzag_dec(tm_rd_uvarint(r));
	t->device_type = tm_rd_u8(r);
	v = tm_rd_uvarint(r);
	have = tm_rd_uvarint(r);
	if (t->device_type > 2 || v > UINT16_MAX || (have & ~(uint64_t)STATS_ALL_MASK))
		return dec_fail(d, TM_ERR_RESERVED, "tensor: reserved device or stat bits");
	t->device_index = (uint16_t)v;
	t->have = (uint32_t)have;
	for (i = 0; i < TM_STAT__COUNT; i++) {
		if (!(have & TM_STAT_BIT(i)))
			continue;
		if (tm_stat_table[i].integer)
			t->stat[i] = (double)tm_rd_uvarint(r);
		else
			t->stat[i] = tm_rd_f64(r);
	}
	flags = tm_rd_u8(r);
	if (flags & ~TENSOR_FLAGS_ALL)
		return dec_fail(d, TM_ERR_RESERVED, "tensor: reserved flags 0x%02x", flags);
	if ((flags & (TENSOR_FLAG_HIST | TENSOR_FLAG_LOG2)) == TENSOR_FLAG_LOG2)
		return dec_fail(d, TM_ERR_CORRUPT, "tensor: log2 flag without a histogram");
	t->have_hist = !(flags & TENSOR_FLAG_HIST) ? 0 :
		       (flags & TENSOR_FLAG_LOG2) ? TM_HIST_LOG2 : TM_HIST_LINEAR;
	if (t->have_hist && d->skip_hist) {
		/* a reader of stats only (the reference of a comparison):
		 * decoding the bins is most of a level-2 tensor's cost */
		(void)tm_rd_bytes(r, 16);
		for (i = 0; i < TM_HIST_BINS; i++)
			skip_uvarint(r);
		t->have_hist = 0;
	} else if (t->have_hist) {
		t->hist_lo = tm_rd_f64(r);
		t->hist_hi = tm_rd_f64(r);
		for (i = 0; i < TM_HIST_BINS; i++) {
			v = tm_rd_uvarint(r);
			t->hist[i] = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
		}
	}
	t->payload = NULL;
	t->payload_len = 0;
	if (flags & TENSOR_FLAG_PAYLOAD) {
		v = tm_rd_uvarint(r);
		t->payload = tm_rd_bytes(r, v);
		t->payload_len = t->payload ? v : 0;
	}
	if (r->bad)
		return dec_fail(d, TM_ERR_CORRUPT, "tensor: record ends early");
	return TM_OK;
}

static int dec_event(tm_decoder *d, struct tm_rd *r, struct tm_event *e)
{
	uint64_t node, call, nt;
	uint8_t bits;
	uint32_t i;
	int err;

	e->seq = tm_rd_uvarint(r);
	e->step = tm_rd_uvarint(r);
	bits = tm_rd_u8(r);
	node = tm_rd_uvarint(r);
	call = tm_rd_uvarint(r);
	e->time_ns = tm_rd_uvarint(r);
	e->start_ns = tm_rd_uvarint(r);
	e->end_ns = tm_rd_uvarint(r);
	nt = tm_rd_uvarint(r);
	if (r->bad)
		return dec_fail(d, TM_ERR_CORRUPT, "event: record ends early");
	if (bits & 0xc0)
		return dec_fail(d, TM_ERR_RESERVED, "event %llu: reserved bits set",
				(unsigned long long)e->seq);
	e->phase = bits & 1;
	e->kind = (bits >> 1) & 7;
	e->level = (bits >> 4) & 3;
	if (e->kind >= TM_EV__COUNT || node >= TM_NODE_NONE || call > UINT32_MAX)
		return dec_fail(d, TM_ERR_CORRUPT, "event %llu: bad kind, node or call",
				(unsigned long long)e->seq);
	if (nt > TM_MAX_TENSORS)
		return dec_fail(d, TM_ERR_TOO_LARGE, "event %llu: %llu tensors exceed %d",
				(unsigned long long)e->seq, (unsigned long long)nt,
				TM_MAX_TENSORS);
	e->node = (uint32_t)node;
	e->call = (uint32_t)call;
	e->ntensors = (uint32_t)nt;
	e->tensors = d->tensors;
	for (i = 0; i < nt; i++) {
		err = dec_tensor(d, r, &d->tensors[i]);
		if (err)
			return err;
	}
	e->op_index = 0;
	e->op_flags = 0;
	if (e->kind == TM_EV_OP && r->p < r->end) {
		uint64_t idx = tm_rd_uvarint(r);
		uint8_t fl = tm_rd_u8(r);

		if (r->bad || idx > UINT32_MAX)
			return dec_fail(d, TM_ERR_CORRUPT, "event %llu: bad op index",
					(unsigned long long)e->seq);
		if (fl & ~TM_OPF__ALL)
			return dec_fail(d, TM_ERR_RESERVED, "event %llu: reserved op flags",
					(unsigned long long)e->seq);
		e->op_index = (uint32_t)idx;
		e->op_flags = fl;
	}
	return TM_OK;
}

static int dec_gap(tm_decoder *d, struct tm_rd *r, struct tm_gap *g)
{
	uint64_t span;

	g->first_seq = tm_rd_uvarint(r);
	span = tm_rd_uvarint(r);
	g->count = tm_rd_uvarint(r);
	g->reason = (uint32_t)tm_rd_uvarint(r);
	g->time_ns = tm_rd_uvarint(r);
	g->step = tm_rd_uvarint(r);
	if (r->bad)
		return dec_fail(d, TM_ERR_CORRUPT, "gap: record ends early");
	if (span > UINT64_MAX - g->first_seq)
		return dec_fail(d, TM_ERR_CORRUPT, "gap: seq range overflows");
	g->last_seq = g->first_seq + span;
	return TM_OK;
}

static int dec_crash(tm_decoder *d, struct tm_rd *r, struct tm_crash *c)
{
	size_t offs[TM_MAX_FRAMES];
	uint64_t node, nf, i;
	int err = 0;

	c->seq = tm_rd_uvarint(r);
	c->step = tm_rd_uvarint(r);
	c->time_ns = tm_rd_uvarint(r);
	c->signo = (int32_t)tm_zigzag_dec(tm_rd_uvarint(r));
	node = tm_rd_uvarint(r);
	c->phase = tm_rd_u8(r);
	nf = tm_rd_uvarint(r);
	if (r->bad)
		return dec_fail(d, TM_ERR_CORRUPT, "crash: record ends early");
	if (nf > TM_MAX_FRAMES || node > TM_NODE_NONE || c->phase > 1)
		return dec_fail(d, TM_ERR_CORRUPT, "crash: bad frame count, node or phase");
	for (i = 0; i < nf; i++)
		offs[i] = dec_str(d, r, &err);
	if (r->bad || err)
		return dec_fail(d, err ? err : TM_ERR_CORRUPT, "crash: record ends early");
	c->node = node ? (uint32_t)(node - 1) : TM_NODE_NONE;
	c->nframes = (uint32_t)nf;
	for (i = 0; i < nf; i++)
		c->frames[i] = offs[i] == SIZE_MAX ? "" : str_at(d, offs[i]);
	return TM_OK;
}

/* The same limits as the encoder's: a file cannot say more than a probe can. */
static int dec_annot(tm_decoder *d, struct tm_rd *r, struct tm_annot *a)
{
	size_t key, offs[TM_ANNOT_MAX_VALUES];
	uint64_t count, nv, i;
	int err = 0;

	a->seq = tm_rd_uvarint(r);
	a->step = tm_rd_uvarint(r);
	a->time_ns = tm_rd_uvarint(r);
	key = dec_str(d, r, &err);
	count = tm_rd_uvarint(r);
	nv = tm_rd_uvarint(r);
	if (r->bad || err)
		return dec_fail(d, err ? err : TM_ERR_CORRUPT, "annotation: record ends early");
	if (key == SIZE_MAX || strlen(str_at(d, key)) >= TM_ANNOT_MAX_KEY)
		return dec_fail(d, TM_ERR_CORRUPT, "annotation: bad key");
	if (nv > TM_ANNOT_MAX_VALUES || count > UINT32_MAX || count < nv)
		return dec_fail(d, TM_ERR_TOO_LARGE, "annotation: %llu of %llu values",
				(unsigned long long)nv, (unsigned long long)count);
	for (i = 0; i < nv; i++) {
		offs[i] = dec_str(d, r, &err);
		if (r->bad || err)
			return dec_fail(d, err ? err : TM_ERR_CORRUPT,
					"annotation: record ends early");
		if (offs[i] != SIZE_MAX && strlen(str_at(d, offs[i])) >= TM_ANNOT_MAX_VALUE)
			return dec_fail(d, TM_ERR_TOO_LARGE, "annotation: value too long");
	}
	a->key = str_at(d, key);
	a->count = (uint32_t)count;
	a->nvalues = (uint32_t)nv;
	for (i = 0; i < nv; i++)
		d->values[i] = offs[i] == SIZE_MAX ? "" : str_at(d, offs[i]);
	a->values = d->values;
	return TM_OK;
}

int tm_decode_record(tm_decoder *d, const uint8_t *buf, size_t len,
		     struct tm_record *rec, size_t *used)
{
	struct tm_rd r = { buf, buf + len, 0 };
	uint64_t blen;
	size_t hdr;
	int err;

	d->detail[0] = '\0';
	d->strs_len = 0;
	rec->type = tm_rd_u8(&r);
	blen = tm_rd_uvarint(&r);
	if (r.bad)
		return dec_fail(d, TM_ERR_TRUNCATED, "record header ends early");
	if (blen > TMRUN_MAX_RECORD)
		return dec_fail(d, TM_ERR_TOO_LARGE, "record of %llu bytes exceeds the cap",
				(unsigned long long)blen);
	hdr = (size_t)(r.p - buf);
	if (blen > len - hdr)
		return dec_fail(d, TM_ERR_TRUNCATED, "record of %llu bytes, %zu left",
				(unsigned long long)blen, len - hdr);
	r.end = r.p + blen;
	*used = hdr + (size_t)blen;
	switch (rec->type) {
	case TM_REC_META: err = dec_meta(d, &r, &rec->u.meta); break;
	case TM_REC_NODE: err = dec_node(d, &r, &rec->u.node); break;
	case TM_REC_EVENT: err = dec_event(d, &r, &rec->u.event); break;
	case TM_REC_GAP: err = dec_gap(d, &r, &rec->u.gap); break;
	case TM_REC_CRASH: err = dec_crash(d, &r, &rec->u.crash); break;
	case TM_REC_ANNOT: err = dec_annot(d, &r, &rec->u.annot); break;
	case 0:
		return dec_fail(d, TM_ERR_CORRUPT, "record type 0");
	default:
		/* a newer minor version's record: skip it (doc/tmrun.md) */
		return TM_OK;
	}
	/* Trailing bytes are allowed: later minor versions may append fields. */
	return err;
}

/* ------------------------------------------------------------- copies */

int tm_event_copy(struct tm_event *dst, const struct tm_event *src)
{
	uint32_t i;

	*dst = *src;
	dst->tensors = NULL;
	if (!src->ntensors)
		return TM_OK;
	dst->tensors = calloc(src->ntensors, sizeof(*dst->tensors));
	if (!dst->tensors)
		return TM_ERR_NOMEM;
	for (i = 0; i < src->ntensors; i++) {
		dst->tensors[i] = src->tensors[i];
		if (src->tensors[i].payload && src->tensors[i].payload_len) {
			void *p = malloc((size_t)src->tensors[i].payload_len);

			if (!p) {
				dst->tensors[i].payload = NULL;
				tm_event_release(dst);
				return TM_ERR_NOMEM;
			}
			memcpy(p, src->tensors[i].payload, (size_t)src->tensors[i].payload_len);
			dst->tensors[i].payload = p;
		}
	}
	return TM_OK;
}

void tm_event_release(struct tm_event *e)
{
	uint32_t i;

	if (!e || !e->tensors)
		return;
	for (i = 0; i < e->ntensors; i++)
		free((void *)e->tensors[i].payload);
	free(e->tensors);
	e->tensors = NULL;
	e->ntensors = 0;
}

/* ------------------------------------------------------------- chunk headers */

void tmrun_chunk_header_encode(uint8_t *p, const struct tmrun_chunk *c)
{
	tm_put_u32(p + 0, TMRUN_CHUNK_MAGIC);
	p[4] = c->type;
	p[5] = c->codec;
	tm_put_u16(p + 6, c->flags);
	tm_put_u32(p + 8, c->stored_len);
	tm_put_u32(p + 12, c->raw_len);
	tm_put_u32(p + 16, c->nrecords);
	tm_put_u32(p + 20, c->payload_crc);
	tm_put_u64(p + 24, c->first_seq);
	tm_put_u64(p + 32, c->last_seq);
	tm_put_u64(p + 40, c->min_step);
	tm_put_u64(p + 48, c->max_step);
	tm_put_u64(p + 56, c->min_time);
	tm_put_u64(p + 64, c->max_time);
	tm_put_u32(p + 72, c->nevents);
	tm_put_u32(p + 76, c->ngaps);
	tm_put_u32(p + 80, c->ncrashes);
	tm_put_u32(p + 84, tm_crc32c(0, p, 84));
}

/* Checks magic, CRC, caps and reserved fields; c->offset is left alone. */
int tmrun_chunk_header_decode(const uint8_t *p, struct tmrun_chunk *c)
{
	if (tm_get_u32(p) != TMRUN_CHUNK_MAGIC)
		return TM_ERR_BAD_MAGIC;
	if (tm_get_u32(p + 84) != tm_crc32c(0, p, 84))
		return TM_ERR_CRC;
	c->type = p[4];
	c->codec = p[5];
	c->flags = tm_get_u16(p + 6);
	c->stored_len = tm_get_u32(p + 8);
	c->raw_len = tm_get_u32(p + 12);
	c->nrecords = tm_get_u32(p + 16);
	c->payload_crc = tm_get_u32(p + 20);
	c->first_seq = tm_get_u64(p + 24);
	c->last_seq = tm_get_u64(p + 32);
	c->min_step = tm_get_u64(p + 40);
	c->max_step = tm_get_u64(p + 48);
	c->min_time = tm_get_u64(p + 56);
	c->max_time = tm_get_u64(p + 64);
	c->nevents = tm_get_u32(p + 72);
	c->ngaps = tm_get_u32(p + 76);
	c->ncrashes = tm_get_u32(p + 80);
	if (c->flags != 0)
		return TM_ERR_RESERVED;
	if (c->codec > TMRUN_CODEC_ZSTD)
		return TM_ERR_UNSUPPORTED;
	if (c->stored_len > TMRUN_MAX_CHUNK_STORED || c->raw_len > TMRUN_MAX_CHUNK_RAW)
		return TM_ERR_TOO_LARGE;
	if (c->codec == TMRUN_CODEC_NONE && c->stored_len != c->raw_len)
		return TM_ERR_CORRUPT;
	if ((uint64_t)c->nevents + c->ngaps + c->ncrashes > c->nrecords ||
	    c->nrecords > c->raw_len || c->first_seq > c->last_seq ||
	    c->min_step > c->max_step || c->min_time > c->max_time)
		return TM_ERR_CORRUPT;
	return TM_OK;
}

void tmrun_summarise(const struct tmrun_chunk *chunks, size_t n, struct tm_summary *s)
{
	int any = 0;
	size_t i;

	s->nevents = s->ngaps = s->ncrashes = s->nrecords = 0;
	s->uncompressed_bytes = 0;
	s->first_seq = s->last_seq = s->first_step = s->last_step = 0;
	s->first_time_ns = s->last_time_ns = 0;
	for (i = 0; i < n; i++) {
		const struct tmrun_chunk *c = &chunks[i];

		if (c->type != TMRUN_CHUNK_EVENTS)
			continue;
		s->nevents += c->nevents;
		s->ngaps += c->ngaps;
		s->ncrashes += c->ncrashes;
		s->nrecords += c->nrecords;
		s->uncompressed_bytes += c->raw_len;
		if (!c->nrecords)
			continue;
		if (!any || c->first_seq < s->first_seq)
			s->first_seq = c->first_seq;
		if (!any || c->min_step < s->first_step)
			s->first_step = c->min_step;
		if (!any || c->min_time < s->first_time_ns)
			s->first_time_ns = c->min_time;
		if (c->last_seq > s->last_seq)
			s->last_seq = c->last_seq;
		if (c->max_step > s->last_step)
			s->last_step = c->max_step;
		if (c->max_time > s->last_time_ns)
			s->last_time_ns = c->max_time;
		any = 1;
	}
}
