/*
 * test_encode.c -- the record encoding: every record type round-trips at
 * every probe level, and hostile bytes give error codes, never crashes.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensormorph.h"
#include "tm-internal.h"
#include "tm-test.h"

/* A tensor as a probe at `level` would fill it. */
static void make_tensor(struct tm_tensor *t, int level, unsigned salt)
{
	unsigned i;

	memset(t, 0, sizeof(*t));
	t->slot.kind = TM_SLOT_OUT;
	t->slot.index = (uint16_t)(salt % 3);
	t->dtype = TM_DT_BF16;
	t->rank = 3;
	t->shape[0] = 4;
	t->shape[1] = 32;
	t->shape[2] = 64 + salt;
	t->device_type = 1;
	t->device_index = 2;
	if (level >= 1) {
		t->have = TM_STATS_L1_MASK;
		t->stat[TM_STAT_NUMEL] = 4 * 32 * (64 + salt);
		t->stat[TM_STAT_NAN_COUNT] = salt;
		t->stat[TM_STAT_INF_COUNT] = 3;
		t->stat[TM_STAT_POSINF_COUNT] = 2;
		t->stat[TM_STAT_NEGINF_COUNT] = 1;
		t->stat[TM_STAT_MIN] = -1.5 - salt;
		t->stat[TM_STAT_MAX] = 1e30;
		t->stat[TM_STAT_MEAN] = 0.125;
		t->stat[TM_STAT_ABS_MAX] = 1e30;
		t->stat[TM_STAT_L2] = 3.25e15;
	}
	if (level >= 2) {
		t->have = TM_STATS_L2_MASK;
		t->stat[TM_STAT_STD] = 0.5;
		t->stat[TM_STAT_ZERO_COUNT] = 17;
		/* both kinds of histogram (tmrun 1.3 adds log2) */
		t->have_hist = salt == 1 ? TM_HIST_LOG2 : TM_HIST_LINEAR;
		t->hist_lo = -1.5;
		t->hist_hi = 1e30;
		for (i = 0; i < TM_HIST_BINS; i++)
			t->hist[i] = i * 1000 + salt;
	}
}

static uint16_t payload_bytes[4 * 4];

static void check_tensor_equal(const struct tm_tensor *a, const struct tm_tensor *b)
{
	unsigned i;

	CU_ASSERT_EQUAL(a->slot.kind, b->slot.kind);
	CU_ASSERT_EQUAL(a->slot.index, b->slot.index);
	CU_ASSERT_EQUAL(a->dtype, b->dtype);
	CU_ASSERT_EQUAL(a->rank, b->rank);
	for (i = 0; i < a->rank; i++)
		CU_ASSERT_EQUAL(a->shape[i], b->shape[i]);
	CU_ASSERT_EQUAL(a->device_type, b->device_type);
	CU_ASSERT_EQUAL(a->device_index, b->device_index);
	CU_ASSERT_EQUAL(a->have, b->have);
	for (i = 0; i < TM_STAT__COUNT; i++)
		if (a->have & TM_STAT_BIT(i))
			CU_ASSERT_EQUAL(a->stat[i], b->stat[i]);
	CU_ASSERT_EQUAL(a->have_hist, b->have_hist);
	if (a->have_hist) {
		CU_ASSERT_EQUAL(a->hist_lo, b->hist_lo);
		CU_ASSERT_EQUAL(a->hist_hi, b->hist_hi);
		CU_ASSERT(!memcmp(a->hist, b->hist, sizeof(a->hist)));
	}
	CU_ASSERT_EQUAL(a->payload_len, b->payload_len);
	CU_ASSERT_EQUAL(!a->payload, !b->payload);
	if (a->payload && b->payload)
		CU_ASSERT(!memcmp(a->payload, b->payload, (size_t)a->payload_len));
}

static void test_event_roundtrip_every_level(void)
{
	tm_decoder *d = tm_decoder_new();
	int level;

	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	for (level = 0; level <= 3; level++) {
		struct tm_tensor ts[3];
		struct tm_event e = { 0 }, *o;
		struct tm_buf b = { 0 };
		struct tm_record rec;
		size_t used, i;

		for (i = 0; i < 3; i++)
			make_tensor(&ts[i], level, (unsigned)i);
		if (level == 3) {
			for (i = 0; i < sizeof(payload_bytes) / sizeof(payload_bytes[0]); i++)
				payload_bytes[i] = (uint16_t)(0x3f80 + i);
			ts[1].payload = payload_bytes;
			ts[1].payload_len = sizeof(payload_bytes);
		}
		e.seq = 1234567890123ull;
		e.step = 40000;
		e.phase = TM_PHASE_BWD;
		e.kind = TM_EV_BWD;
		e.level = (uint8_t)level;
		e.node = 77;
		e.call = 2;
		e.time_ns = 5000000000ull;
		e.start_ns = 4999990000ull;
		e.end_ns = 5000000000ull;
		e.ntensors = 3;
		e.tensors = ts;
		CU_ASSERT_EQUAL_FATAL(tm_encode_event(&b, &e), TM_OK);
		CU_ASSERT_EQUAL_FATAL(tm_decode_record(d, b.data, b.len, &rec, &used), TM_OK);
		CU_ASSERT_EQUAL(used, b.len);
		CU_ASSERT_EQUAL(rec.type, TM_REC_EVENT);
		o = &rec.u.event;
		CU_ASSERT_EQUAL(o->seq, e.seq);
		CU_ASSERT_EQUAL(o->step, e.step);
		CU_ASSERT_EQUAL(o->phase, e.phase);
		CU_ASSERT_EQUAL(o->kind, e.kind);
		CU_ASSERT_EQUAL(o->level, e.level);
		CU_ASSERT_EQUAL(o->node, e.node);
		CU_ASSERT_EQUAL(o->call, e.call);
		CU_ASSERT_EQUAL(o->time_ns, e.time_ns);
		CU_ASSERT_EQUAL(o->start_ns, e.start_ns);
		CU_ASSERT_EQUAL(o->end_ns, e.end_ns);
		CU_ASSERT_EQUAL_FATAL(o->ntensors, 3);
		for (i = 0; i < 3; i++)
			check_tensor_equal(&ts[i], &o->tensors[i]);
		/* level 0 stores no stats at all: absent, not zero */
		if (level == 0)
			CU_ASSERT_EQUAL(o->tensors[0].have, 0);
		tm_buf_free(&b);
	}
	tm_decoder_free(d);
}

/* A decoder that skips histograms (the reference of a comparison reads
 * stats only): the same record, bytes consumed and stats, no histogram;
 * a histogram cut short is still an error. */
static void test_skip_hist(void)
{
	tm_decoder *d = tm_decoder_new();
	struct tm_tensor ts[2];
	struct tm_event e = { 0 };
	struct tm_buf b = { 0 };
	struct tm_record rec;
	size_t used, i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	tm_decoder_skip_hist(d, 1);
	for (i = 0; i < 2; i++)
		make_tensor(&ts[i], 2, (unsigned)i);
	CU_ASSERT(ts[0].have_hist && ts[1].have_hist);
	ts[0].hist[3] = 300000;         /* a varint of three bytes */
	e.kind = TM_EV_EXIT;
	e.level = 2;
	e.ntensors = 2;
	e.tensors = ts;
	CU_ASSERT_EQUAL_FATAL(tm_encode_event(&b, &e), TM_OK);
	CU_ASSERT_EQUAL_FATAL(tm_decode_record(d, b.data, b.len, &rec, &used), TM_OK);
	CU_ASSERT_EQUAL(used, b.len);
	CU_ASSERT_EQUAL_FATAL(rec.u.event.ntensors, 2);
	for (i = 0; i < 2; i++) {
		const struct tm_tensor *o = &rec.u.event.tensors[i];

		CU_ASSERT_EQUAL(o->have_hist, 0);
		CU_ASSERT_EQUAL(o->have, ts[i].have);
		CU_ASSERT_EQUAL(memcmp(o->stat, ts[i].stat, sizeof(o->stat)), 0);
		CU_ASSERT_EQUAL(o->shape[2], ts[i].shape[2]);
	}
	/* cut inside the second tensor's bins */
	CU_ASSERT_NOT_EQUAL(tm_decode_record(d, b.data, b.len - 20, &rec, &used), TM_OK);
	tm_decoder_skip_hist(d, 0);
	CU_ASSERT_EQUAL_FATAL(tm_decode_record(d, b.data, b.len, &rec, &used), TM_OK);
	CU_ASSERT_EQUAL(rec.u.event.tensors[0].hist[3], 300000);
	tm_buf_free(&b);
	tm_decoder_free(d);
}

/* Tensor flags (doc/tmrun.md 4.3): bit 2 (log2) without bit 0 is
 * corrupt, bit 3 reserved.  A level-1 tensor ends the record with them. */
static void test_hist_flag_needs_histogram(void)
{
	tm_decoder *d = tm_decoder_new();
	struct tm_tensor t;
	struct tm_event e = { 0 };
	struct tm_buf b = { 0 };
	struct tm_record rec;
	size_t used;

	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	make_tensor(&t, 1, 0);
	e.kind = TM_EV_EXIT;
	e.level = 1;
	e.ntensors = 1;
	e.tensors = &t;
	CU_ASSERT_EQUAL_FATAL(tm_encode_event(&b, &e), TM_OK);
	CU_ASSERT_EQUAL_FATAL(b.data[b.len - 1], 0);
	b.data[b.len - 1] = 0x04;
	CU_ASSERT_EQUAL(tm_decode_record(d, b.data, b.len, &rec, &used), TM_ERR_CORRUPT);
	b.data[b.len - 1] = 0x08;
	CU_ASSERT_EQUAL(tm_decode_record(d, b.data, b.len, &rec, &used), TM_ERR_RESERVED);
	tm_buf_free(&b);
	tm_decoder_free(d);
}

/* An OP event's appended fields (doc/tmrun.md 4.3): index and flags round
 * trip; reserved flag bits are refused; a body without them reads as 0. */
static void test_op_event_roundtrip(void)
{
	tm_decoder *d = tm_decoder_new();
	struct tm_tensor ts[1];
	struct tm_event e = { 0 };
	struct tm_buf b = { 0 };
	struct tm_record rec;
	size_t used;

	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	make_tensor(&ts[0], 1, 0);
	e.seq = 9;
	e.step = 2;
	e.kind = TM_EV_OP;
	e.level = 1;
	e.node = 5;
	e.call = 3;
	e.ntensors = 1;
	e.tensors = ts;
	e.op_index = 70000;
	e.op_flags = TM_OPF_INPUTS_CHECKED | TM_OPF_INPUTS_FINITE;
	CU_ASSERT_EQUAL_FATAL(tm_encode_event(&b, &e), TM_OK);
	CU_ASSERT_EQUAL_FATAL(tm_decode_record(d, b.data, b.len, &rec, &used), TM_OK);
	CU_ASSERT_EQUAL(rec.u.event.kind, TM_EV_OP);
	CU_ASSERT_EQUAL(rec.u.event.op_index, 70000);
	CU_ASSERT_EQUAL(rec.u.event.op_flags, 3);
	CU_ASSERT_EQUAL(rec.u.event.call, 3);
	CU_ASSERT_STRING_EQUAL(tm_event_kind_name(TM_EV_OP), "op");
	/* the last byte is the flags: reserved bits refused */
	b.data[b.len - 1] = 0x80;
	CU_ASSERT_EQUAL(tm_decode_record(d, b.data, b.len, &rec, &used), TM_ERR_RESERVED);
	tm_buf_free(&b);
	e.op_flags = 0x10;
	CU_ASSERT_EQUAL(tm_encode_event(&b, &e), TM_ERR_INVALID_ARG);
	tm_buf_free(&b);
	/* other kinds carry no op fields */
	e.kind = TM_EV_EXIT;
	e.op_flags = 0;
	CU_ASSERT_EQUAL_FATAL(tm_encode_event(&b, &e), TM_OK);
	CU_ASSERT_EQUAL_FATAL(tm_decode_record(d, b.data, b.len, &rec, &used), TM_OK);
	CU_ASSERT_EQUAL(rec.u.event.op_index, 0);
	tm_buf_free(&b);
	tm_decoder_free(d);
}

static void test_other_records_roundtrip(void)
{
	tm_decoder *d = tm_decoder_new();
	struct tm_buf b = { 0 };
	struct tm_record rec;
	size_t used, off = 0;
	struct tm_run_meta m = { 0 };
	struct tm_node n = { 0 };
	struct tm_gap g = { 0 };
	struct tm_crash c = { 0 };

	m.probe_kind = "pytorch";
	m.default_level = 2;
	m.torch_version = "2.13.0+cpu";
	m.host = "node17";
	m.start_unix_ns = 1764400000000000000ull;
	m.rank = -1;
	m.world_size = 0;
	m.command = "python train.py --lr 3e-4";
	m.npairs = 1;
	m.keys[0] = "level:model.layers.3.**";
	m.values[0] = "3";
	n.id = 5;
	n.parent = TM_NODE_NONE;
	n.depth = 0;
	n.kind = TM_NODE_MODULE;
	n.address = "model";
	n.type = "GPT2LMHeadModel";
	n.file = "/usr/lib/python3/transformers/models/gpt2/modeling_gpt2.py";
	n.line = 1021;
	g.first_seq = 100;
	g.last_seq = 199;
	g.count = 100;
	g.reason = TM_GAP_BACKPRESSURE | TM_GAP_LEVEL;
	g.time_ns = 42;
	g.step = 7;
	c.seq = 500;
	c.step = 8;
	c.time_ns = 99;
	c.signo = 11;
	c.node = TM_NODE_NONE;
	c.phase = TM_PHASE_FWD;
	c.nframes = 2;
	c.frames[0] = "#0 0x7f00 in crash_me+12";
	c.frames[1] = "#1 0x7f10 in main";

	CU_ASSERT_EQUAL_FATAL(tm_encode_meta(&b, &m), TM_OK);
	CU_ASSERT_EQUAL_FATAL(tm_encode_node(&b, &n), TM_OK);
	CU_ASSERT_EQUAL_FATAL(tm_encode_gap(&b, &g), TM_OK);
	CU_ASSERT_EQUAL_FATAL(tm_encode_crash(&b, &c), TM_OK);

	CU_ASSERT_EQUAL_FATAL(tm_decode_record(d, b.data, b.len, &rec, &used), TM_OK);
	CU_ASSERT_EQUAL(rec.type, TM_REC_META);
	CU_ASSERT_STRING_EQUAL(rec.u.meta.probe_kind, "pytorch");
	CU_ASSERT_STRING_EQUAL(rec.u.meta.torch_version, "2.13.0+cpu");
	CU_ASSERT_STRING_EQUAL(rec.u.meta.command, m.command);
	CU_ASSERT_EQUAL(rec.u.meta.rank, -1);
	CU_ASSERT_EQUAL(rec.u.meta.default_level, 2);
	CU_ASSERT_EQUAL(rec.u.meta.start_unix_ns, m.start_unix_ns);
	CU_ASSERT_EQUAL_FATAL(rec.u.meta.npairs, 1);
	CU_ASSERT_STRING_EQUAL(rec.u.meta.values[0], "3");
	off += used;

	CU_ASSERT_EQUAL_FATAL(tm_decode_record(d, b.data + off, b.len - off, &rec, &used), TM_OK);
	CU_ASSERT_EQUAL(rec.type, TM_REC_NODE);
	CU_ASSERT_EQUAL(rec.u.node.id, 5);
	CU_ASSERT_EQUAL(rec.u.node.parent, TM_NODE_NONE);
	CU_ASSERT_STRING_EQUAL(rec.u.node.address, "model");
	CU_ASSERT_STRING_EQUAL(rec.u.node.type, "GPT2LMHeadModel");
	CU_ASSERT_EQUAL(rec.u.node.line, 1021);
	off += used;

	CU_ASSERT_EQUAL_FATAL(tm_decode_record(d, b.data + off, b.len - off, &rec, &used), TM_OK);
	CU_ASSERT_EQUAL(rec.type, TM_REC_GAP);
	CU_ASSERT_EQUAL(rec.u.gap.first_seq, 100);
	CU_ASSERT_EQUAL(rec.u.gap.last_seq, 199);
	CU_ASSERT_EQUAL(rec.u.gap.count, 100);
	CU_ASSERT_EQUAL(rec.u.gap.reason, TM_GAP_BACKPRESSURE | TM_GAP_LEVEL);
	off += used;

	CU_ASSERT_EQUAL_FATAL(tm_decode_record(d, b.data + off, b.len - off, &rec, &used), TM_OK);
	CU_ASSERT_EQUAL(rec.type, TM_REC_CRASH);
	CU_ASSERT_EQUAL(rec.u.crash.signo, 11);
	CU_ASSERT_EQUAL(rec.u.crash.node, TM_NODE_NONE);
	CU_ASSERT_EQUAL_FATAL(rec.u.crash.nframes, 2);
	CU_ASSERT_STRING_EQUAL(rec.u.crash.frames[1], "#1 0x7f10 in main");
	off += used;
	CU_ASSERT_EQUAL(off, b.len);

	tm_buf_free(&b);
	tm_decoder_free(d);
}

static void test_encoder_rejects_nonsense(void)
{
	struct tm_buf b = { 0 };
	struct tm_event e = { 0 };
	struct tm_tensor t;
	struct tm_gap g = { 0 };

	make_tensor(&t, 1, 0);
	e.node = 1;
	e.ntensors = 1;
	e.tensors = &t;
	e.level = 4;
	CU_ASSERT_EQUAL(tm_encode_event(&b, &e), TM_ERR_INVALID_ARG);
	e.level = 1;
	t.rank = TM_MAX_RANK + 1;
	CU_ASSERT_EQUAL(tm_encode_event(&b, &e), TM_ERR_INVALID_ARG);
	CU_ASSERT_EQUAL(b.len, 0);   /* a failed encode leaves nothing behind */
	e.ntensors = TM_MAX_TENSORS + 1;
	CU_ASSERT_EQUAL(tm_encode_event(&b, &e), TM_ERR_INVALID_ARG);
	g.first_seq = 10;
	g.last_seq = 9;
	CU_ASSERT_EQUAL(tm_encode_gap(&b, &g), TM_ERR_INVALID_ARG);
	tm_buf_free(&b);
}

/* Every prefix of a valid record is TRUNCATED; absurd declared sizes are TOO_LARGE. */
static void test_decoder_hostile_input(void)
{
	tm_decoder *d = tm_decoder_new();
	struct tm_buf b = { 0 };
	struct tm_tensor ts[2];
	struct tm_event e = { 0 };
	struct tm_record rec;
	size_t used, cut;
	uint8_t huge[16] = { TM_REC_EVENT, 0xff, 0xff, 0xff, 0xff, 0x7f };
	uint8_t many[32];
	size_t n = 0;

	make_tensor(&ts[0], 2, 1);
	make_tensor(&ts[1], 1, 2);
	e.node = 3;
	e.ntensors = 2;
	e.tensors = ts;
	CU_ASSERT_EQUAL_FATAL(tm_encode_event(&b, &e), TM_OK);
	for (cut = 0; cut < b.len; cut++) {
		int err = tm_decode_record(d, b.data, cut, &rec, &used);

		CU_ASSERT(err == TM_ERR_TRUNCATED);
	}
	CU_ASSERT_EQUAL(tm_decode_record(d, huge, sizeof(huge), &rec, &used), TM_ERR_TOO_LARGE);

	/* an event declaring 2^40 tensors */
	many[n++] = TM_REC_EVENT;
	many[n++] = 20;
	many[n++] = 1;  /* seq */
	many[n++] = 0;  /* step */
	many[n++] = 0;  /* bits */
	many[n++] = 0;  /* node */
	many[n++] = 0;  /* call */
	many[n++] = 0;
	many[n++] = 0;
	many[n++] = 0;  /* times */
	many[n++] = 0x80; many[n++] = 0x80; many[n++] = 0x80; many[n++] = 0x80;
	many[n++] = 0x80; many[n++] = 0x20;  /* ntensors = 2^40 */
	while (n < 22)
		many[n++] = 0;
	CU_ASSERT_EQUAL(tm_decode_record(d, many, n, &rec, &used), TM_ERR_TOO_LARGE);
	CU_ASSERT(strlen(tm_decoder_detail(d)) > 0);

	/* reserved bits in the event's packed byte */
	b.len = 0;
	e.ntensors = 0;  /* short body: a one-byte length */
	CU_ASSERT_EQUAL_FATAL(tm_encode_event(&b, &e), TM_OK);
	b.data[4] |= 0x80;  /* type, len, seq, step, then the packed byte */
	CU_ASSERT_EQUAL(tm_decode_record(d, b.data, b.len, &rec, &used), TM_ERR_RESERVED);

	/* random garbage: any result but a crash (ASan watches) */
	{
		uint8_t junk[512];
		unsigned seed = 12345, i, k;

		for (k = 0; k < 2000; k++) {
			for (i = 0; i < sizeof(junk); i++) {
				seed = seed * 1103515245u + 12345u;
				junk[i] = (uint8_t)(seed >> 16);
			}
			junk[0] = (uint8_t)(1 + k % 5);
			(void)tm_decode_record(d, junk, 1 + k % sizeof(junk), &rec, &used);
		}
	}
	tm_buf_free(&b);
	tm_decoder_free(d);
}

static void test_event_copy_is_deep(void)
{
	struct tm_tensor t;
	struct tm_event e = { 0 }, c;
	uint8_t data[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };

	make_tensor(&t, 3, 0);
	t.payload = data;
	t.payload_len = sizeof(data);
	e.node = 1;
	e.ntensors = 1;
	e.tensors = &t;
	CU_ASSERT_EQUAL_FATAL(tm_event_copy(&c, &e), TM_OK);
	data[0] = 99;
	t.stat[TM_STAT_MEAN] = 7;
	CU_ASSERT_EQUAL(((const uint8_t *)c.tensors[0].payload)[0], 1);
	CU_ASSERT_EQUAL(c.tensors[0].stat[TM_STAT_MEAN], 0.125);
	tm_event_release(&c);
	CU_ASSERT_PTR_NULL(c.tensors);
}

/* A serving step's request ids: round trip, the encoder's limits, and a
 * decoder that holds a file to the same limits. */
static void test_annotation_roundtrip_and_limits(void)
{
	static char many[TM_ANNOT_MAX_VALUES + 1][8];
	const char *vals[TM_ANNOT_MAX_VALUES + 1];
	char longv[TM_ANNOT_MAX_VALUE + 1];
	struct tm_annot a = { 0 };
	struct tm_buf b = { 0 };
	struct tm_record rec;
	tm_decoder *d = tm_decoder_new();
	size_t used, i;

	for (i = 0; i <= TM_ANNOT_MAX_VALUES; i++) {
		snprintf(many[i], sizeof(many[i]), "r%zu", i);
		vals[i] = many[i];
	}
	a.seq = 77;
	a.step = 12;
	a.time_ns = 123456;
	a.key = "request";
	a.values = vals;
	a.nvalues = TM_ANNOT_MAX_VALUES;
	a.count = 5000;
	CU_ASSERT_EQUAL_FATAL(tm_encode_annot(&b, &a), TM_OK);
	CU_ASSERT_EQUAL_FATAL(tm_decode_record(d, b.data, b.len, &rec, &used), TM_OK);
	CU_ASSERT_EQUAL(used, b.len);
	CU_ASSERT_EQUAL(rec.type, TM_REC_ANNOT);
	CU_ASSERT_EQUAL(rec.u.annot.seq, 77);
	CU_ASSERT_EQUAL(rec.u.annot.step, 12);
	CU_ASSERT_EQUAL(rec.u.annot.time_ns, 123456);
	CU_ASSERT_STRING_EQUAL(rec.u.annot.key, "request");
	CU_ASSERT_EQUAL(rec.u.annot.count, 5000);
	CU_ASSERT_EQUAL_FATAL(rec.u.annot.nvalues, TM_ANNOT_MAX_VALUES);
	CU_ASSERT_STRING_EQUAL(rec.u.annot.values[0], "r0");
	CU_ASSERT_STRING_EQUAL(rec.u.annot.values[TM_ANNOT_MAX_VALUES - 1], "r1023");

	/* what a probe cannot say is refused, and nothing is appended */
	b.len = 0;
	a.nvalues = TM_ANNOT_MAX_VALUES + 1;
	CU_ASSERT_EQUAL(tm_encode_annot(&b, &a), TM_ERR_INVALID_ARG);
	a.nvalues = 2;
	a.count = 1;
	CU_ASSERT_EQUAL(tm_encode_annot(&b, &a), TM_ERR_INVALID_ARG);
	a.count = 2;
	a.key = "";
	CU_ASSERT_EQUAL(tm_encode_annot(&b, &a), TM_ERR_INVALID_ARG);
	a.key = "request";
	memset(longv, 'x', TM_ANNOT_MAX_VALUE);
	longv[TM_ANNOT_MAX_VALUE] = 0;
	vals[1] = longv;
	CU_ASSERT_EQUAL(tm_encode_annot(&b, &a), TM_ERR_INVALID_ARG);
	CU_ASSERT_EQUAL(b.len, 0);

	/* a file that says more is refused by the decoder: 1025 values */
	vals[1] = many[1];
	a.nvalues = 1;
	a.count = 1;
	CU_ASSERT_EQUAL_FATAL(tm_encode_annot(&b, &a), TM_OK);
	/* body: seq step time key(len 7 + "request") count nvalues value:
	 * patch nvalues (the byte after count) to 1025 = 0x81 0x08 */
	{
		uint8_t bad[64];
		size_t k = 2 + 1 + 1 + 3 + 1 + 7 + 1;   /* type, len, seq, step, time(3), key, count */

		CU_ASSERT_FATAL(b.len + 1 < sizeof(bad));
		memcpy(bad, b.data, k);
		bad[k] = 0x81;
		bad[k + 1] = 0x08;
		memcpy(bad + k + 2, b.data + k + 1, b.len - k - 1);
		bad[1] = (uint8_t)(b.len + 1 - 2);
		CU_ASSERT_EQUAL(tm_decode_record(d, bad, b.len + 1, &rec, &used),
				TM_ERR_TOO_LARGE);
	}
	tm_buf_free(&b);
	tm_decoder_free(d);
}

int main(void)
{
	static const struct tm_test_case cases[] = {
		TM_TEST(test_event_roundtrip_every_level),
		TM_TEST(test_other_records_roundtrip),
		TM_TEST(test_encoder_rejects_nonsense),
		TM_TEST(test_decoder_hostile_input),
		TM_TEST(test_event_copy_is_deep),
		TM_TEST(test_hist_flag_needs_histogram), TM_TEST(test_skip_hist),
		TM_TEST(test_op_event_roundtrip),
		TM_TEST(test_annotation_roundtrip_and_limits),
		{ NULL, NULL }
	};
	return tm_test_run("encode", cases);
}
