/*
 * wire-msg.c -- the messages of the live wire protocol (doc/wire.md,
 * section 2): handshake, subscription, breakpoints, resume, stop, results.
 *
 * Framing (wire.c) delimits and checks bytes; this file gives the payloads
 * of frame types 64..127 their meaning.  Records (events, gaps, nodes) are
 * not messages: they travel in frames 1..63 in the .tmrun record encoding.
 *
 * Every field is a LEB128 uvarint, a single byte, or a string (uvarint
 * length, then the bytes).  The decoder reads through struct tm_rd, so a
 * short or hostile payload is an error code, never an out-of-bounds read;
 * every string is capped at TM_MSG_MAX_STR and copied into the message's own
 * array, and every integer is range-checked against its field's width.
 */
#include "config.h"

#include <string.h>

#include "tm-internal.h"
#include "tm-wire.h"

#define MSG_FIRST 64
#define MSG_LAST 127

const char *tm_msg_name(int type)
{
	switch (type) {
	case TM_MSG_HELLO: return "hello";
	case TM_MSG_SUBSCRIBE: return "subscribe";
	case TM_MSG_BREAK_SET: return "break-set";
	case TM_MSG_BREAK_CLEAR: return "break-clear";
	case TM_MSG_CAPTURE: return "capture";
	case TM_MSG_RESUME: return "resume";
	case TM_MSG_SET_LEVEL: return "set-level";
	case TM_MSG_DETACH: return "detach";
	case TM_MSG_INTERRUPT: return "interrupt";
	case TM_MSG_KILL: return "kill";
	case TM_MSG_SET_OPS: return "set-ops";
	case TM_MSG_DESCRIBE: return "describe";
	case TM_MSG_STOP: return "stop";
	case TM_MSG_RESULT: return "result";
	case TM_MSG_BYE: return "bye";
	default: return NULL;
	}
}

/* ------------------------------------------------------------- encoding */

/* The payload is built in a small scratch buffer, then framed. */
struct wr {
	struct tm_buf b;
	int err;
};

static void put_uv(struct wr *w, uint64_t v)
{
	if (w->err)
		return;
	w->err = tm_buf_reserve(&w->b, 10);
	if (!w->err)
		w->b.len += tm_put_uvarint(w->b.data + w->b.len, v);
}

static void put_u8(struct wr *w, uint8_t v)
{
	if (w->err)
		return;
	w->err = tm_buf_reserve(&w->b, 1);
	if (!w->err)
		w->b.data[w->b.len++] = v;
}

/* A string field; longer than the cap is refused, not cut. */
static void put_str(struct wr *w, const char *s)
{
	size_t n;

	if (w->err)
		return;
	n = strnlen(s, TM_MSG_MAX_STR + 1);
	if (n > TM_MSG_MAX_STR) {
		w->err = TM_ERR_TOO_LARGE;
		return;
	}
	put_uv(w, n);
	if (w->err)
		return;
	w->err = tm_buf_reserve(&w->b, n);
	if (!w->err) {
		memcpy(w->b.data + w->b.len, s, n);
		w->b.len += n;
	}
}

int tm_msg_encode(struct tm_buf *b, const struct tm_msg *m)
{
	struct wr w;
	int err;

	if (!b || !m)
		return TM_ERR_INVALID_ARG;
	memset(&w, 0, sizeof(w));
	switch (m->type) {
	case TM_MSG_HELLO:
	case TM_MSG_DESCRIBE:
		put_uv(&w, m->u.hello.major);
		put_uv(&w, m->u.hello.minor);
		put_uv(&w, m->u.hello.pid);
		put_uv(&w, m->u.hello.caps);
		put_u8(&w, m->u.hello.max_level);
		put_str(&w, m->u.hello.name);
		put_str(&w, m->u.hello.trace);
		if (m->type == TM_MSG_HELLO)
			put_str(&w, m->u.hello.token);
		break;
	case TM_MSG_SUBSCRIBE:
		put_uv(&w, m->u.subscribe.from_seq);
		put_str(&w, m->u.subscribe.pattern);
		break;
	case TM_MSG_BREAK_SET:
		put_uv(&w, m->u.brk.id);
		put_str(&w, m->u.brk.where);
		put_str(&w, m->u.brk.cond);
		break;
	case TM_MSG_BREAK_CLEAR:
		put_uv(&w, m->u.brk.id);
		break;
	case TM_MSG_CAPTURE:
		if (m->u.capture.slot.kind >= TM_SLOT__COUNT)
			return TM_ERR_INVALID_ARG;
		put_uv(&w, m->u.capture.node);
		put_u8(&w, m->u.capture.slot.kind);
		put_uv(&w, m->u.capture.slot.index);
		break;
	case TM_MSG_RESUME:
		if (m->u.resume.mode >= TM_RESUME__COUNT || !m->u.resume.count)
			return TM_ERR_INVALID_ARG;
		put_u8(&w, m->u.resume.mode);
		put_uv(&w, m->u.resume.count);
		break;
	case TM_MSG_SET_LEVEL:
		if (m->u.level.level > 3)
			return TM_ERR_INVALID_ARG;
		put_u8(&w, m->u.level.level);
		put_str(&w, m->u.level.pattern);
		break;
	case TM_MSG_SET_OPS:
		put_str(&w, m->u.level.pattern);
		break;
	case TM_MSG_DETACH:
	case TM_MSG_INTERRUPT:
	case TM_MSG_KILL:
		break;
	case TM_MSG_STOP:
		if (m->u.stop.reason >= TM_STOP__COUNT)
			return TM_ERR_INVALID_ARG;
		put_u8(&w, m->u.stop.reason);
		put_uv(&w, m->u.stop.id);
		put_uv(&w, m->u.stop.seq);
		put_uv(&w, m->u.stop.node);
		/* UINT32_MAX ("none") travels as 0, index i as i + 1. */
		put_uv(&w, (uint64_t)m->u.stop.tensor + 1 > UINT32_MAX ? 0 :
		       (uint64_t)m->u.stop.tensor + 1);
		break;
	case TM_MSG_RESULT:
	case TM_MSG_BYE:
		put_u8(&w, m->u.result.request);
		put_uv(&w, m->u.result.id);
		put_uv(&w, m->u.result.code);
		put_str(&w, m->u.result.text);
		break;
	default:
		return TM_ERR_INVALID_ARG;
	}
	err = w.err;
	if (!err)
		err = tm_frame_encode(b, m->type, 0, w.b.data, (uint32_t)w.b.len);
	tm_buf_free(&w.b);
	return err;
}

/* ------------------------------------------------------------- decoding */

/* A uvarint that must fit max; sets bad otherwise. */
static uint64_t get_uv(struct tm_rd *r, uint64_t max, int *too_large)
{
	uint64_t v = tm_rd_uvarint(r);

	if (!r->bad && v > max) {
		*too_large = 1;
		r->bad = 1;
		return 0;
	}
	return v;
}

/* string := uvarint len, len bytes (no NUL), copied NUL-terminated into dst. */
static void get_str(struct tm_rd *r, char *dst, int *too_large)
{
	uint64_t n = get_uv(r, TM_MSG_MAX_STR, too_large);
	const uint8_t *s;

	dst[0] = 0;
	if (r->bad)
		return;
	s = tm_rd_bytes(r, n);
	if (!s)
		return;
	if (memchr(s, 0, n)) {
		r->bad = 1;
		return;
	}
	memcpy(dst, s, n);
	dst[n] = 0;
}

int tm_msg_decode(const struct tm_frame *f, struct tm_msg *m)
{
	struct tm_rd r;
	int big = 0;
	uint64_t t;

	if (!f || !m || (!f->payload && f->len))
		return TM_ERR_INVALID_ARG;
	if (f->type < MSG_FIRST || f->type > MSG_LAST)
		return TM_ERR_INVALID_ARG;
	if (!tm_msg_name(f->type))
		return TM_ERR_UNSUPPORTED;
	r.p = f->payload;
	r.end = f->payload + f->len;
	r.bad = 0;
	/* Only the union member of this type is written (the struct is big). */
	m->type = f->type;
	switch (f->type) {
	case TM_MSG_HELLO:
	case TM_MSG_DESCRIBE:
		m->u.hello.major = (uint16_t)get_uv(&r, UINT16_MAX, &big);
		m->u.hello.minor = (uint16_t)get_uv(&r, UINT16_MAX, &big);
		m->u.hello.pid = (uint32_t)get_uv(&r, UINT32_MAX, &big);
		m->u.hello.caps = (uint32_t)get_uv(&r, UINT32_MAX, &big);
		m->u.hello.max_level = tm_rd_u8(&r);
		get_str(&r, m->u.hello.name, &big);
		get_str(&r, m->u.hello.trace, &big);
		m->u.hello.token[0] = 0;
		if (!r.bad && f->type == TM_MSG_HELLO && r.p < r.end) {
			/* 1.2: the TCP token (a 1.1 HELLO ends before it) */
			uint64_t n = get_uv(&r, TM_MSG_MAX_TOKEN, &big);
			const uint8_t *tok = r.bad ? NULL : tm_rd_bytes(&r, n);

			if (tok && memchr(tok, 0, n))
				r.bad = 1;
			else if (tok) {
				memcpy(m->u.hello.token, tok, n);
				m->u.hello.token[n] = 0;
			}
		}
		if (!r.bad && m->u.hello.max_level > 3)
			r.bad = 1;
		break;
	case TM_MSG_SUBSCRIBE:
		m->u.subscribe.from_seq = get_uv(&r, UINT64_MAX, &big);
		get_str(&r, m->u.subscribe.pattern, &big);
		break;
	case TM_MSG_BREAK_SET:
		m->u.brk.id = (uint32_t)get_uv(&r, UINT32_MAX, &big);
		get_str(&r, m->u.brk.where, &big);
		get_str(&r, m->u.brk.cond, &big);
		break;
	case TM_MSG_BREAK_CLEAR:
		m->u.brk.id = (uint32_t)get_uv(&r, UINT32_MAX, &big);
		m->u.brk.where[0] = m->u.brk.cond[0] = 0;
		break;
	case TM_MSG_CAPTURE:
		m->u.capture.node = (uint32_t)get_uv(&r, UINT32_MAX, &big);
		m->u.capture.slot.kind = tm_rd_u8(&r);
		m->u.capture.slot.index = (uint16_t)get_uv(&r, UINT16_MAX, &big);
		if (!r.bad && m->u.capture.slot.kind >= TM_SLOT__COUNT)
			r.bad = 1;
		break;
	case TM_MSG_RESUME:
		m->u.resume.mode = tm_rd_u8(&r);
		m->u.resume.count = (uint32_t)get_uv(&r, UINT32_MAX, &big);
		if (!r.bad && (m->u.resume.mode >= TM_RESUME__COUNT ||
			       !m->u.resume.count))
			r.bad = 1;
		break;
	case TM_MSG_SET_LEVEL:
		m->u.level.level = tm_rd_u8(&r);
		get_str(&r, m->u.level.pattern, &big);
		if (!r.bad && m->u.level.level > 3)
			r.bad = 1;
		break;
	case TM_MSG_SET_OPS:
		get_str(&r, m->u.level.pattern, &big);
		break;
	case TM_MSG_DETACH:
	case TM_MSG_INTERRUPT:
	case TM_MSG_KILL:
		break;
	case TM_MSG_STOP:
		m->u.stop.reason = tm_rd_u8(&r);
		m->u.stop.id = (uint32_t)get_uv(&r, UINT32_MAX, &big);
		m->u.stop.seq = get_uv(&r, UINT64_MAX, &big);
		m->u.stop.node = (uint32_t)get_uv(&r, UINT32_MAX, &big);
		t = get_uv(&r, UINT32_MAX, &big);
		m->u.stop.tensor = t ? (uint32_t)(t - 1) : UINT32_MAX;
		if (!r.bad && m->u.stop.reason >= TM_STOP__COUNT)
			r.bad = 1;
		break;
	case TM_MSG_RESULT:
	case TM_MSG_BYE:
		m->u.result.request = tm_rd_u8(&r);
		m->u.result.id = (uint32_t)get_uv(&r, UINT32_MAX, &big);
		m->u.result.code = (uint32_t)get_uv(&r, UINT32_MAX, &big);
		get_str(&r, m->u.result.text, &big);
		break;
	}
	if (big)
		return TM_ERR_TOO_LARGE;
	return r.bad ? TM_ERR_CORRUPT : TM_OK;
}
