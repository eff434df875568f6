/*
 * tm-wire.h -- framing of the live wire protocol (doc/wire.md).
 *
 * A frame carries records in the same encoding as .tmrun chunks, so a probe
 * streams exactly what it would write.  The decoder is incremental (feed it
 * whatever the socket returned, take whole frames out) and caps every size,
 * because its input comes from another process.
 */
#ifndef TM_WIRE_H
#define TM_WIRE_H

#include "tm-types.h"
#include "tm-tmrun.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TM_WIRE_MAGIC 0x4D54u          /* "TM" little-endian */
#define TM_WIRE_HEADER_SIZE 12
#define TM_WIRE_DEFAULT_MAX_FRAME (64u << 20)

/* A decoded frame: type (a tm_record_type or a wire message 64..127),
 * flags, and the payload (record encoding or message body). */
struct tm_frame {
	uint8_t type;
	uint8_t flags;
	const uint8_t *payload;
	uint32_t len;
};

/* Appends one frame (header + payload + CRC32C) to b. */
int tm_frame_encode(struct tm_buf *b, uint8_t type, uint8_t flags,
		    const void *payload, uint32_t len);

typedef struct tm_frame_decoder tm_frame_decoder;
/* max_frame: cap on payload size (0: TM_WIRE_DEFAULT_MAX_FRAME). */
tm_frame_decoder *tm_frame_decoder_new(uint32_t max_frame);
void tm_frame_decoder_free(tm_frame_decoder *d);
/* Adds received bytes. */
int tm_frame_decoder_feed(tm_frame_decoder *d, const void *data, size_t len);
/*
 * Takes the next whole frame: TM_OK, TM_ERR_AGAIN (need more bytes), or a
 * hard error (TM_ERR_BAD_MAGIC, TM_ERR_TOO_LARGE, TM_ERR_CRC, TM_ERR_RESERVED)
 * after which the stream is unusable and the connection must be dropped.
 * The frame's payload is valid until the next call.
 */
int tm_frame_decoder_next(tm_frame_decoder *d, struct tm_frame *f);
/* Bytes fed but not yet returned as frames. */
size_t tm_frame_decoder_pending(const tm_frame_decoder *d);

#ifdef __cplusplus
}
#endif
#endif /* TM_WIRE_H */
