/*
 * fuzz_wiremsg.c -- libFuzzer target for the wire-protocol messages
 * (doc/wire.md section 2, src/lib/wire-msg.c).
 *
 * The first input byte picks a frame type (64 + byte % 64); the rest is its
 * payload, as a hostile debugger or probe could send it.  The same bytes are
 * also run through the frame decoder as a stream, and every message frame
 * in it is decoded.  Properties, besides "no crash, no out-of-bounds read,
 * no leak" (ASan, UBSan):
 *   - a message that decodes re-encodes, and decoding that gives back the
 *     same encoding (decode . encode is the identity on decoded messages);
 *   - every decoded string is NUL-terminated within its cap.
 * Built with standalone.c it replays corpus/wiremsg in `make check`.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tensormorph.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_str(const char *s)
{
	if (!memchr(s, 0, TM_MSG_MAX_STR + 1))
		abort();
}

/* Decodes one frame; if it is a valid message, checks the fixed point. */
static void one(const struct tm_frame *f, struct tm_msg *m, struct tm_msg *m2)
{
	struct tm_buf a = { 0 }, b = { 0 };
	tm_frame_decoder *d;
	struct tm_frame f2;

	if (tm_msg_decode(f, m) != TM_OK)
		return;
	switch (m->type) {
	case TM_MSG_HELLO:
	case TM_MSG_DESCRIBE:
		check_str(m->u.hello.name);
		check_str(m->u.hello.trace);
		break;
	case TM_MSG_BREAK_SET:
		check_str(m->u.brk.where);
		check_str(m->u.brk.cond);
		break;
	case TM_MSG_RESULT:
	case TM_MSG_BYE:
		check_str(m->u.result.text);
		break;
	default:
		break;
	}
	if (tm_msg_encode(&a, m) != TM_OK)
		abort();
	d = tm_frame_decoder_new(0);
	if (!d || tm_frame_decoder_feed(d, a.data, a.len) ||
	    tm_frame_decoder_next(d, &f2) || tm_msg_decode(&f2, m2) ||
	    tm_msg_encode(&b, m2) || a.len != b.len || memcmp(a.data, b.data, a.len))
		abort();
	tm_frame_decoder_free(d);
	tm_buf_free(&a);
	tm_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tm_msg *m, *m2;
	struct tm_frame f;
	tm_frame_decoder *d;
	int n = 0;

	if (size < 1 || size > (1u << 20))
		return 0;
	m = malloc(sizeof(*m));
	m2 = malloc(sizeof(*m2));
	if (!m || !m2)
		abort();
	f.type = (uint8_t)(64 + data[0] % 64);
	f.flags = 0;
	f.payload = data + 1;
	f.len = (uint32_t)(size - 1);
	one(&f, m, m2);

	d = tm_frame_decoder_new(1u << 16);
	if (!d)
		abort();
	if (tm_frame_decoder_feed(d, data, size) == TM_OK)
		while (n++ < 256 && tm_frame_decoder_next(d, &f) == TM_OK)
			if (f.type >= 64)
				one(&f, m, m2);
	tm_frame_decoder_free(d);
	free(m);
	free(m2);
	return 0;
}
