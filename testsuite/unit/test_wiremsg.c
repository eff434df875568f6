/*
 * test_wiremsg.c -- the messages of doc/wire.md section 2: every type
 * survives encode -> frame decoder -> decode, fields out of range are
 * refused on both sides, strings are capped, and a cut or padded payload
 * is an error or ignored exactly as the spec says.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tensormorph.h"
#include "tm-test.h"

/* Encodes m, runs it through the frame decoder and decodes it into out. */
static int roundtrip(const struct tm_msg *m, struct tm_msg *out)
{
	struct tm_buf b = { 0 };
	tm_frame_decoder *d = tm_frame_decoder_new(0);
	struct tm_frame f;
	int err;

	err = tm_msg_encode(&b, m);
	if (!err)
		err = tm_frame_decoder_feed(d, b.data, b.len);
	if (!err)
		err = tm_frame_decoder_next(d, &f);
	if (!err) {
		CU_ASSERT_EQUAL(f.type, m->type);
		err = tm_msg_decode(&f, out);
	}
	tm_frame_decoder_free(d);
	tm_buf_free(&b);
	return err;
}

static struct tm_msg *msg(uint8_t type)
{
	struct tm_msg *m = calloc(1, sizeof(*m));

	m->type = type;
	return m;
}

static void test_hello_describe(void)
{
	struct tm_msg *m = msg(TM_MSG_DESCRIBE), *o = msg(0);

	m->u.hello.major = TM_WIRE_VERSION_MAJOR;
	m->u.hello.minor = TM_WIRE_VERSION_MINOR;
	m->u.hello.pid = 4242;
	m->u.hello.caps = TM_CAP_PAUSE | TM_CAP_LEVEL;
	m->u.hello.max_level = 3;
	strcpy(m->u.hello.name, "pytorch");
	strcpy(m->u.hello.trace, "/tmp/run.tmrun");
	CU_ASSERT_EQUAL(roundtrip(m, o), TM_OK);
	CU_ASSERT_EQUAL(o->type, TM_MSG_DESCRIBE);
	CU_ASSERT_EQUAL(o->u.hello.major, 1);
	CU_ASSERT_EQUAL(o->u.hello.minor, TM_WIRE_VERSION_MINOR);
	CU_ASSERT_EQUAL(o->u.hello.pid, 4242);
	CU_ASSERT_EQUAL(o->u.hello.caps, TM_CAP_PAUSE | TM_CAP_LEVEL);
	CU_ASSERT_EQUAL(o->u.hello.max_level, 3);
	CU_ASSERT_STRING_EQUAL(o->u.hello.name, "pytorch");
	CU_ASSERT_STRING_EQUAL(o->u.hello.trace, "/tmp/run.tmrun");
	m->type = TM_MSG_HELLO;
	m->u.hello.trace[0] = 0;
	CU_ASSERT_EQUAL(roundtrip(m, o), TM_OK);
	CU_ASSERT_EQUAL(o->type, TM_MSG_HELLO);
	CU_ASSERT_STRING_EQUAL(o->u.hello.trace, "");
	free(m);
	free(o);
}

static void test_requests(void)
{
	struct tm_msg *m = msg(TM_MSG_BREAK_SET), *o = msg(0);

	m->u.brk.id = 7;
	strcpy(m->u.brk.where, "model.layers.*.mlp:out");
	strcpy(m->u.brk.cond, "tensor.nan_count > 0 && step >= 100");
	CU_ASSERT_EQUAL(roundtrip(m, o), TM_OK);
	CU_ASSERT_EQUAL(o->u.brk.id, 7);
	CU_ASSERT_STRING_EQUAL(o->u.brk.where, "model.layers.*.mlp:out");
	CU_ASSERT_STRING_EQUAL(o->u.brk.cond, "tensor.nan_count > 0 && step >= 100");

	memset(m, 0, sizeof(*m));
	m->type = TM_MSG_SUBSCRIBE;
	m->u.subscribe.from_seq = UINT64_MAX;
	strcpy(m->u.subscribe.pattern, "model.**");
	CU_ASSERT_EQUAL(roundtrip(m, o), TM_OK);
	CU_ASSERT_EQUAL(o->u.subscribe.from_seq, UINT64_MAX);
	CU_ASSERT_STRING_EQUAL(o->u.subscribe.pattern, "model.**");

	memset(m, 0, sizeof(*m));
	m->type = TM_MSG_RESUME;
	m->u.resume.mode = TM_RESUME_FINISH;
	m->u.resume.count = 3;
	CU_ASSERT_EQUAL(roundtrip(m, o), TM_OK);
	CU_ASSERT_EQUAL(o->u.resume.mode, TM_RESUME_FINISH);
	CU_ASSERT_EQUAL(o->u.resume.count, 3);

	memset(m, 0, sizeof(*m));
	m->type = TM_MSG_CAPTURE;
	m->u.capture.node = 12;
	m->u.capture.slot.kind = TM_SLOT_GRAD_IN;
	m->u.capture.slot.index = 2;
	CU_ASSERT_EQUAL(roundtrip(m, o), TM_OK);
	CU_ASSERT_EQUAL(o->u.capture.node, 12);
	CU_ASSERT_EQUAL(o->u.capture.slot.kind, TM_SLOT_GRAD_IN);
	CU_ASSERT_EQUAL(o->u.capture.slot.index, 2);

	memset(m, 0, sizeof(*m));
	m->type = TM_MSG_SET_LEVEL;
	m->u.level.level = 2;
	strcpy(m->u.level.pattern, "model.layers.3.**");
	CU_ASSERT_EQUAL(roundtrip(m, o), TM_OK);
	CU_ASSERT_EQUAL(o->u.level.level, 2);
	CU_ASSERT_STRING_EQUAL(o->u.level.pattern, "model.layers.3.**");

	memset(m, 0, sizeof(*m));
	m->type = TM_MSG_BREAK_CLEAR;
	m->u.brk.id = 9;
	CU_ASSERT_EQUAL(roundtrip(m, o), TM_OK);
	CU_ASSERT_EQUAL(o->u.brk.id, 9);

	memset(m, 0, sizeof(*m));
	m->type = TM_MSG_DETACH;
	CU_ASSERT_EQUAL(roundtrip(m, o), TM_OK);
	CU_ASSERT_EQUAL(o->type, TM_MSG_DETACH);
	m->type = TM_MSG_INTERRUPT;
	CU_ASSERT_EQUAL(roundtrip(m, o), TM_OK);
	CU_ASSERT_EQUAL(o->type, TM_MSG_INTERRUPT);
	m->type = TM_MSG_KILL;
	CU_ASSERT_EQUAL(roundtrip(m, o), TM_OK);
	CU_ASSERT_EQUAL(o->type, TM_MSG_KILL);
	free(m);
	free(o);
}

static void test_replies(void)
{
	struct tm_msg *m = msg(TM_MSG_STOP), *o = msg(0);

	m->u.stop.reason = TM_STOP_BREAKPOINT;
	m->u.stop.id = 2;
	m->u.stop.seq = 1ull << 40;
	m->u.stop.node = 5;
	m->u.stop.tensor = UINT32_MAX;
	CU_ASSERT_EQUAL(roundtrip(m, o), TM_OK);
	CU_ASSERT_EQUAL(o->u.stop.id, 2);
	CU_ASSERT_EQUAL(o->u.stop.seq, 1ull << 40);
	CU_ASSERT_EQUAL(o->u.stop.node, 5);
	CU_ASSERT_EQUAL(o->u.stop.tensor, UINT32_MAX);
	m->u.stop.tensor = 0;
	CU_ASSERT_EQUAL(roundtrip(m, o), TM_OK);
	CU_ASSERT_EQUAL(o->u.stop.tensor, 0);

	memset(m, 0, sizeof(*m));
	m->type = TM_MSG_RESULT;
	m->u.result.request = TM_MSG_BREAK_SET;
	m->u.result.id = 3;
	m->u.result.code = TM_ERR_TQL;
	strcpy(m->u.result.text, "tql:1:8: error: unknown field");
	CU_ASSERT_EQUAL(roundtrip(m, o), TM_OK);
	CU_ASSERT_EQUAL(o->u.result.request, TM_MSG_BREAK_SET);
	CU_ASSERT_EQUAL(o->u.result.id, 3);
	CU_ASSERT_EQUAL(o->u.result.code, TM_ERR_TQL);
	CU_ASSERT_STRING_EQUAL(o->u.result.text, "tql:1:8: error: unknown field");
	m->type = TM_MSG_BYE;
	CU_ASSERT_EQUAL(roundtrip(m, o), TM_OK);
	CU_ASSERT_EQUAL(o->type, TM_MSG_BYE);
	free(m);
	free(o);
}

static void test_encode_refuses(void)
{
	struct tm_msg *m = msg(TM_MSG_RESUME);
	struct tm_buf b = { 0 };

	m->u.resume.mode = TM_RESUME__COUNT;
	m->u.resume.count = 1;
	CU_ASSERT_EQUAL(tm_msg_encode(&b, m), TM_ERR_INVALID_ARG);
	m->u.resume.mode = TM_RESUME_STEP;
	m->u.resume.count = 0;
	CU_ASSERT_EQUAL(tm_msg_encode(&b, m), TM_ERR_INVALID_ARG);
	m->type = TM_MSG_SET_LEVEL;
	m->u.level.level = 4;
	CU_ASSERT_EQUAL(tm_msg_encode(&b, m), TM_ERR_INVALID_ARG);
	m->type = 3;    /* a record, not a message */
	CU_ASSERT_EQUAL(tm_msg_encode(&b, m), TM_ERR_INVALID_ARG);
	m->type = 100;  /* unassigned */
	CU_ASSERT_EQUAL(tm_msg_encode(&b, m), TM_ERR_INVALID_ARG);
	/* A string over the cap is refused, not cut. */
	memset(m, 0, sizeof(*m));
	m->type = TM_MSG_BREAK_SET;
	memset(m->u.brk.cond, 'x', TM_MSG_MAX_STR);
	CU_ASSERT_EQUAL(tm_msg_encode(&b, m), TM_OK);
	b.len = 0;
	/* Without a terminator in range: strnlen stops at the cap + 1. */
	memset(m->u.brk.cond, 'x', sizeof(m->u.brk.cond));
	CU_ASSERT_EQUAL(tm_msg_encode(&b, m), TM_ERR_TOO_LARGE);
	CU_ASSERT_EQUAL(b.len, 0);
	tm_buf_free(&b);
	free(m);
}

/* Hand-made payloads: what a hostile peer could send. */
static int decode_raw(uint8_t type, const uint8_t *p, uint32_t len)
{
	struct tm_msg *m = msg(0);
	struct tm_frame f = { type, 0, p, len };
	int err = tm_msg_decode(&f, m);

	free(m);
	return err;
}

static void test_decode_hostile(void)
{
	static const uint8_t resume_bad_mode[] = { 9, 1 };
	static const uint8_t resume_zero[] = { 0, 0 };
	static const uint8_t resume_ok_padded[] = { 1, 2, 0xff, 0xff };
	static const uint8_t brk_cut[] = { 1, 10, 'm', 'o' };
	static const uint8_t brk_nul[] = { 1, 3, 'a', 0, 'b', 0 };
	static const uint8_t brk_huge[] = { 1, 0x81, 0x40, 'a' };    /* 8193 */
	static const uint8_t varint_long[] = { 0xff, 0xff, 0xff, 0xff, 0xff,
					       0xff, 0xff, 0xff, 0xff, 0xff, 0x01 };
	static const uint8_t clear_big_id[] = { 0x80, 0x80, 0x80, 0x80, 0x10 };
	static const uint8_t capture_bad_slot[] = { 1, 9, 0 };

	CU_ASSERT_EQUAL(decode_raw(TM_MSG_RESUME, resume_bad_mode, 2), TM_ERR_CORRUPT);
	CU_ASSERT_EQUAL(decode_raw(TM_MSG_RESUME, resume_zero, 2), TM_ERR_CORRUPT);
	CU_ASSERT_EQUAL(decode_raw(TM_MSG_RESUME, resume_ok_padded, 4), TM_OK);
	CU_ASSERT_EQUAL(decode_raw(TM_MSG_RESUME, resume_ok_padded, 1), TM_ERR_CORRUPT);
	CU_ASSERT_EQUAL(decode_raw(TM_MSG_BREAK_SET, brk_cut, sizeof(brk_cut)),
			TM_ERR_CORRUPT);
	CU_ASSERT_EQUAL(decode_raw(TM_MSG_BREAK_SET, brk_nul, sizeof(brk_nul)),
			TM_ERR_CORRUPT);
	CU_ASSERT_EQUAL(decode_raw(TM_MSG_BREAK_SET, brk_huge, sizeof(brk_huge)),
			TM_ERR_TOO_LARGE);
	CU_ASSERT_EQUAL(decode_raw(TM_MSG_SUBSCRIBE, varint_long, sizeof(varint_long)),
			TM_ERR_CORRUPT);
	CU_ASSERT_EQUAL(decode_raw(TM_MSG_BREAK_CLEAR, clear_big_id, sizeof(clear_big_id)),
			TM_ERR_TOO_LARGE);
	CU_ASSERT_EQUAL(decode_raw(TM_MSG_CAPTURE, capture_bad_slot, 3), TM_ERR_CORRUPT);
	CU_ASSERT_EQUAL(decode_raw(TM_MSG_HELLO, NULL, 0), TM_ERR_CORRUPT);
	CU_ASSERT_EQUAL(decode_raw(TM_MSG_DETACH, NULL, 0), TM_OK);
	/* Unknown message types are skipped, records are not messages. */
	CU_ASSERT_EQUAL(decode_raw(120, NULL, 0), TM_ERR_UNSUPPORTED);
	CU_ASSERT_EQUAL(decode_raw(TM_REC_EVENT, NULL, 0), TM_ERR_INVALID_ARG);
	CU_ASSERT_STRING_EQUAL(tm_msg_name(TM_MSG_RESUME), "resume");
	CU_ASSERT_PTR_NULL(tm_msg_name(TM_REC_EVENT));
}

int main(void)
{
	static const struct tm_test_case cases[] = {
		TM_TEST(test_hello_describe),
		TM_TEST(test_requests),
		TM_TEST(test_replies),
		TM_TEST(test_encode_refuses),
		TM_TEST(test_decode_hostile),
		{ NULL, NULL }
	};

	return tm_test_run("wiremsg", cases);
}
