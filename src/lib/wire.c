/*
 * wire.c -- frames of the live wire protocol (doc/wire.md, "Framing").
 *
 * The probe streams to tmdb exactly the records it would write to a .tmrun
 * file; frames only delimit and check them on a byte stream:
 *
 *   offset 0  u16 magic 0x4D54 ("TM")     LE
 *          2  u8  type (1..127)
 *          3  u8  flags (none defined: must be 0)
 *          4  u32 payload length           LE
 *          8  u32 CRC32C of bytes 0..7     LE
 *         12  payload (length bytes)
 *   12+length u32 CRC32C of the payload    LE
 *
 * The header has its own CRC so that a damaged length is caught before the
 * receiver waits for (or allocates) a payload that is not coming.
 *
 * The decoder is incremental: feed it whatever recv() returned and take
 * whole frames out.  Its input comes from another process, so every size is
 * capped, and a hard error (bad magic, header CRC, reserved bits, oversized
 * frame, payload CRC) poisons it for good: after one the stream cannot be
 * resynchronised, and the connection must be dropped.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tm-internal.h"
#include "tm-wire.h"

/* Flags this version defines; any other bit is reserved. */
#define FRAME_FLAGS_KNOWN 0x00u
#define FRAME_TRAILER_SIZE 4
#define FRAME_TYPE_MAX 127

struct tm_frame_decoder {
	uint8_t *buf;
	size_t start;           /* first byte not yet returned */
	size_t end;             /* one past the last byte fed */
	size_t cap;
	uint32_t max_frame;     /* cap on the payload length */
	int err;                /* sticky hard error */
};

int tm_frame_encode(struct tm_buf *b, uint8_t type, uint8_t flags,
		    const void *payload, uint32_t len)
{
	uint8_t *p;
	int err;

	if (!b || (!payload && len) || type == 0 || type > FRAME_TYPE_MAX ||
	    (flags & ~FRAME_FLAGS_KNOWN))
		return TM_ERR_INVALID_ARG;
	err = tm_buf_reserve(b, TM_WIRE_HEADER_SIZE + (size_t)len + FRAME_TRAILER_SIZE);
	if (err)
		return err;
	p = b->data + b->len;
	tm_put_u16(p, TM_WIRE_MAGIC);
	p[2] = type;
	p[3] = flags;
	tm_put_u32(p + 4, len);
	tm_put_u32(p + 8, tm_crc32c(0, p, 8));
	if (len)
		memcpy(p + TM_WIRE_HEADER_SIZE, payload, len);
	tm_put_u32(p + TM_WIRE_HEADER_SIZE + len, tm_crc32c(0, payload, len));
	b->len += TM_WIRE_HEADER_SIZE + (size_t)len + FRAME_TRAILER_SIZE;
	return TM_OK;
}

tm_frame_decoder *tm_frame_decoder_new(uint32_t max_frame)
{
	tm_frame_decoder *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	d->max_frame = max_frame ? max_frame : TM_WIRE_DEFAULT_MAX_FRAME;
	return d;
}

void tm_frame_decoder_free(tm_frame_decoder *d)
{
	if (!d)
		return;
	free(d->buf);
	free(d);
}

/*
 * Makes room for len more bytes.  Returned frames are consumed from the
 * front; the pending tail is moved down only when the buffer would
 * otherwise grow, so a large frame arriving in small reads is not copied
 * over and over.
 */
static int make_room(tm_frame_decoder *d, size_t len)
{
	size_t pending = d->end - d->start, need, cap;
	uint8_t *nb;

	if (len <= d->cap - d->end)
		return TM_OK;
	if (len > SIZE_MAX / 2 - pending)
		return TM_ERR_TOO_LARGE;
	need = pending + len;
	if (need <= d->cap) {
		memmove(d->buf, d->buf + d->start, pending);
		d->start = 0;
		d->end = pending;
		return TM_OK;
	}
	cap = d->cap ? d->cap : 4096;
	while (cap < need)
		cap *= 2;
	if (d->start) {
		memmove(d->buf, d->buf + d->start, pending);
		d->start = 0;
		d->end = pending;
	}
	nb = realloc(d->buf, cap);
	if (!nb)
		return TM_ERR_NOMEM;
	d->buf = nb;
	d->cap = cap;
	return TM_OK;
}

int tm_frame_decoder_feed(tm_frame_decoder *d, const void *data, size_t len)
{
	int err;

	if (!d || (!data && len))
		return TM_ERR_INVALID_ARG;
	if (d->err)
		return d->err;
	if (!len)
		return TM_OK;
	err = make_room(d, len);
	if (err)
		return err;
	memcpy(d->buf + d->end, data, len);
	d->end += len;
	return TM_OK;
}

static int poison(tm_frame_decoder *d, int err)
{
	d->err = err;
	return err;
}

/*
 * Checks are in the order that names the problem best: a stream that is
 * not ours at all (magic), then damage (header CRC), then a well-formed
 * header this version must refuse (reserved bits and types, size cap).
 */
int tm_frame_decoder_next(tm_frame_decoder *d, struct tm_frame *f)
{
	const uint8_t *h;
	size_t pending;
	uint32_t len;
	uint8_t type, flags;

	if (!d || !f)
		return TM_ERR_INVALID_ARG;
	if (d->err)
		return d->err;
	pending = d->end - d->start;
	if (pending < TM_WIRE_HEADER_SIZE) {
		/* A wrong first byte need not wait for the rest of the header. */
		if (pending >= 1 && d->buf[d->start] != (TM_WIRE_MAGIC & 0xff))
			return poison(d, TM_ERR_BAD_MAGIC);
		if (pending >= 2 && tm_get_u16(d->buf + d->start) != TM_WIRE_MAGIC)
			return poison(d, TM_ERR_BAD_MAGIC);
		return TM_ERR_AGAIN;
	}
	h = d->buf + d->start;
	if (tm_get_u16(h) != TM_WIRE_MAGIC)
		return poison(d, TM_ERR_BAD_MAGIC);
	if (tm_crc32c(0, h, 8) != tm_get_u32(h + 8))
		return poison(d, TM_ERR_CRC);
	type = h[2];
	flags = h[3];
	len = tm_get_u32(h + 4);
	if (type == 0 || type > FRAME_TYPE_MAX || (flags & ~FRAME_FLAGS_KNOWN))
		return poison(d, TM_ERR_RESERVED);
	if (len > d->max_frame)
		return poison(d, TM_ERR_TOO_LARGE);
	if (pending - TM_WIRE_HEADER_SIZE < (size_t)len + FRAME_TRAILER_SIZE)
		return TM_ERR_AGAIN;
	if (tm_crc32c(0, h + TM_WIRE_HEADER_SIZE, len) !=
	    tm_get_u32(h + TM_WIRE_HEADER_SIZE + len))
		return poison(d, TM_ERR_CRC);
	f->type = type;
	f->flags = flags;
	f->payload = h + TM_WIRE_HEADER_SIZE;
	f->len = len;
	d->start += TM_WIRE_HEADER_SIZE + (size_t)len + FRAME_TRAILER_SIZE;
	if (d->start == d->end)
		d->start = d->end = 0;
	return TM_OK;
}

size_t tm_frame_decoder_pending(const tm_frame_decoder *d)
{
	return d ? d->end - d->start : 0;
}
