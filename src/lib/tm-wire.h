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

/* ------------------------------------------------------------- messages */

/*
 * Wire-protocol messages (doc/wire.md section 2), frame types 64..127.
 * A message is one frame; its payload is the fields below in order, integers
 * as LEB128 uvarints unless noted, strings as a uvarint length then the bytes
 * (no NUL inside, at most TM_MSG_MAX_STR).  Decoded strings are copied into
 * the fixed arrays of struct tm_msg, NUL-terminated, so nothing points into
 * the frame after tm_msg_decode returns.
 */
#define TM_WIRE_VERSION_MAJOR 1
#define TM_WIRE_VERSION_MINOR 2
#define TM_MSG_MAX_STR 4096
#define TM_MSG_MAX_TOKEN 128

enum tm_msg_type {
	/* debugger -> probe */
	TM_MSG_HELLO = 64,        /* version, client name: first message */
	TM_MSG_SUBSCRIBE = 65,    /* stream events: from_seq, node pattern */
	TM_MSG_BREAK_SET = 66,    /* id, address pattern, TQL condition */
	TM_MSG_BREAK_CLEAR = 67,  /* id (0: all) */
	TM_MSG_CAPTURE = 68,      /* full tensor of node:slot at next occurrence */
	TM_MSG_RESUME = 69,       /* continue | step | next | finish, count */
	TM_MSG_SET_LEVEL = 70,    /* probe level for nodes matching a pattern */
	TM_MSG_DETACH = 71,       /* the debugger leaves; the run goes on */
	TM_MSG_INTERRUPT = 72,    /* stop at the next event (attach, Ctrl-C) */
	TM_MSG_KILL = 73,         /* end the program: finish the recording, die */
	TM_MSG_SET_OPS = 74,      /* op patterns (u.level.pattern; "": none) */
	TM_MSG_FLIGHT = 75,       /* flight window: dump it, or keep N steps */
	/* probe -> debugger (records 1..63 travel as their own frames) */
	TM_MSG_DESCRIBE = 96,     /* answer to HELLO: version, capabilities */
	TM_MSG_STOP = 97,         /* the model thread is paused at seq */
	TM_MSG_RESULT = 98,       /* outcome of a request (code 0: done) */
	TM_MSG_BYE = 99           /* the probe closes the connection */
};

/* DESCRIBE capability bits. */
enum tm_wire_caps {
	TM_CAP_PAUSE = 1u << 0,     /* breakpoints stop the model thread */
	TM_CAP_CAPTURE = 1u << 1,   /* CAPTURE requests are honoured */
	TM_CAP_LEVEL = 1u << 2,     /* SET_LEVEL is honoured */
	TM_CAP_GRADIENTS = 1u << 3, /* backward events are observed */
	TM_CAP_OPS = 1u << 4,       /* SET_OPS is honoured (op events) */
	TM_CAP_FLIGHT = 1u << 5,    /* FLIGHT is honoured (a recorder with a trace) */
	TM_CAP_WINDOW = 1u << 6     /* its trace holds a written flight window */
};

enum tm_resume_mode {
	TM_RESUME_CONTINUE = 0,
	TM_RESUME_STEP = 1,       /* the next event */
	TM_RESUME_NEXT = 2,       /* next event at the same or a shallower depth */
	TM_RESUME_FINISH = 3,     /* the exit of the current call */
	TM_RESUME_RERUN = 4,      /* re-run the compiled region eagerly, stop at
				   * its first event (tm_server_rerun) */
	TM_RESUME__COUNT
};

enum tm_flight_op {
	TM_FLIGHT_DUMP = 0,       /* write the window now (reason) */
	TM_FLIGHT_STEPS = 1,      /* keep the last `steps` complete steps */
	TM_FLIGHT__COUNT
};

enum tm_stop_reason {
	TM_STOP_BREAKPOINT = 0,   /* stop.id is the breakpoint */
	TM_STOP_STEP = 1,         /* a step/next/finish completed */
	TM_STOP__COUNT
};

struct tm_msg {
	uint8_t type;             /* enum tm_msg_type */
	union {
		/* HELLO and DESCRIBE */
		struct {
			uint16_t major, minor;
			uint32_t pid;             /* DESCRIBE: the probed process */
			uint32_t caps;            /* DESCRIBE: tm_wire_caps */
			uint8_t max_level;        /* DESCRIBE: deepest level offered */
			char name[TM_MSG_MAX_STR + 1];   /* client or probe kind */
			char trace[TM_MSG_MAX_STR + 1];  /* DESCRIBE: .tmrun being written, "" */
			/* HELLO over TCP (since 1.2): the probe's token; "" over a
			 * Unix socket.  Absent from a 1.1 HELLO (reads as ""). */
			char token[TM_MSG_MAX_TOKEN + 1];
		} hello;
		struct {
			uint64_t from_seq;        /* first seq wanted */
			char pattern[TM_MSG_MAX_STR + 1];  /* "" : every node */
		} subscribe;
		/* BREAK_SET, BREAK_CLEAR (id only) */
		struct {
			uint32_t id;
			char where[TM_MSG_MAX_STR + 1];
			char cond[TM_MSG_MAX_STR + 1];     /* "" : unconditional */
		} brk;
		struct {
			uint32_t node;
			struct tm_slot slot;
		} capture;
		struct {
			uint8_t mode;             /* enum tm_resume_mode */
			uint32_t count;           /* >= 1 */
		} resume;
		struct {
			uint8_t level;            /* 0..3 */
			char pattern[TM_MSG_MAX_STR + 1];  /* "" : the default level */
		} level;
		struct {
			uint8_t op;               /* enum tm_flight_op */
			uint32_t steps;           /* STEPS: >= 1 */
			char reason[TM_MSG_MAX_STR + 1];  /* DUMP: "" : "dump" */
		} flight;
		struct {
			uint8_t reason;           /* enum tm_stop_reason */
			uint32_t id;              /* breakpoint, 0 for a step */
			uint64_t seq;             /* event the model is paused after */
			uint32_t node;
			uint32_t tensor;          /* tensor that fired, UINT32_MAX none */
		} stop;
		/* RESULT and BYE */
		struct {
			uint8_t request;          /* RESULT: message type answered */
			uint32_t id;              /* RESULT: its breakpoint id, 0 */
			uint32_t code;            /* enum tm_err, 0: done */
			char text[TM_MSG_MAX_STR + 1];
		} result;
	} u;
};

/* Name of a message type ("hello"), NULL if not a message. */
const char *tm_msg_name(int type);
/* Appends m as one frame.  TM_ERR_INVALID_ARG for an unknown type or a field
 * out of range, TM_ERR_TOO_LARGE for a string over TM_MSG_MAX_STR. */
int tm_msg_encode(struct tm_buf *b, const struct tm_msg *m);
/*
 * Decodes a message frame.  TM_ERR_UNSUPPORTED for a type in 64..127 this
 * version does not know (skip it), TM_ERR_INVALID_ARG for a record type,
 * TM_ERR_CORRUPT / TM_ERR_TOO_LARGE for a malformed payload.  Bytes after
 * the known fields are ignored (later minor versions append fields).
 */
int tm_msg_decode(const struct tm_frame *f, struct tm_msg *m);

#ifdef __cplusplus
}
#endif
#endif /* TM_WIRE_H */
