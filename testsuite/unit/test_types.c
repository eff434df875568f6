/*
 * test_types.c -- the names of the event model: error texts, dtype names
 * (ours and torch's spellings), slot and gap-reason formatting, stat names.
 * These strings are what users read and type, so each is pinned here.
 */
#include "config.h"

#include <string.h>

#include "tensormorph.h"
#include "tm-test.h"

static void test_strerror_every_code(void)
{
	int e, j;

	for (e = 0; e < TM_ERR__COUNT; e++) {
		const char *s = tm_strerror(e), *n = tm_errname(e);

		CU_ASSERT_PTR_NOT_NULL_FATAL(s);
		CU_ASSERT_PTR_NOT_NULL_FATAL(n);
		CU_ASSERT(strlen(s) > 0);
		CU_ASSERT(strcmp(s, "unknown error code") != 0);
		CU_ASSERT(!strncmp(n, "TM_", 3));
		/* Texts are distinct, so a message identifies its code. */
		for (j = 0; j < e; j++) {
			CU_ASSERT(strcmp(s, tm_strerror(j)) != 0);
			CU_ASSERT(strcmp(n, tm_errname(j)) != 0);
		}
	}
	CU_ASSERT_STRING_EQUAL(tm_errname(TM_ERR_CRC), "TM_ERR_CRC");
	CU_ASSERT_STRING_EQUAL(tm_errname(TM_OK), "TM_OK");
	CU_ASSERT_STRING_EQUAL(tm_strerror(-1), "unknown error code");
	CU_ASSERT_STRING_EQUAL(tm_strerror(TM_ERR__COUNT), "unknown error code");
	CU_ASSERT_STRING_EQUAL(tm_strerror(1000000), "unknown error code");
	CU_ASSERT_STRING_EQUAL(tm_errname(-5), "TM_ERR_UNKNOWN");
}

static void test_dtype_names_round_trip(void)
{
	int dt;

	for (dt = 1; dt < TM_DT__COUNT; dt++) {
		const char *n = tm_dtype_name(dt);
		char torch[64];

		CU_ASSERT_EQUAL(tm_dtype_from_name(n), dt);
		snprintf(torch, sizeof(torch), "torch.%s", n);
		CU_ASSERT_EQUAL(tm_dtype_from_name(torch), dt);
		CU_ASSERT(tm_dtype_size(dt) > 0);
	}
	CU_ASSERT_STRING_EQUAL(tm_dtype_name(TM_DT_BF16), "bf16");
	CU_ASSERT_STRING_EQUAL(tm_dtype_name(-1), "unknown");
	CU_ASSERT_STRING_EQUAL(tm_dtype_name(TM_DT__COUNT), "unknown");
	CU_ASSERT_EQUAL(tm_dtype_size(TM_DT_UNKNOWN), 0);
	CU_ASSERT_EQUAL(tm_dtype_size(TM_DT__COUNT), 0);
	CU_ASSERT_EQUAL(tm_dtype_size(TM_DT_F32), 4);
	CU_ASSERT_EQUAL(tm_dtype_size(TM_DT_BF16), 2);
	CU_ASSERT_EQUAL(tm_dtype_size(TM_DT_F8E4M3), 1);
	CU_ASSERT_EQUAL(tm_dtype_size(TM_DT_C128), 16);
}

/* str(tensor.dtype) in torch gives "torch.float32" etc.; the probe passes
 * those straight through. */
static void test_dtype_torch_spellings(void)
{
	static const struct {
		const char *name;
		int dt;
	} cases[] = {
		{ "torch.float32", TM_DT_F32 }, { "float", TM_DT_F32 },
		{ "torch.float64", TM_DT_F64 }, { "double", TM_DT_F64 },
		{ "torch.float16", TM_DT_F16 }, { "half", TM_DT_F16 },
		{ "torch.bfloat16", TM_DT_BF16 },
		{ "torch.float8_e4m3fn", TM_DT_F8E4M3 },
		{ "torch.float8_e5m2", TM_DT_F8E5M2 },
		{ "torch.int8", TM_DT_I8 }, { "torch.int16", TM_DT_I16 },
		{ "torch.int32", TM_DT_I32 }, { "torch.int64", TM_DT_I64 },
		{ "torch.long", TM_DT_I64 }, { "torch.uint8", TM_DT_U8 },
		{ "torch.bool", TM_DT_BOOL }, { "torch.complex64", TM_DT_C64 },
		{ "torch.complex128", TM_DT_C128 },
		{ "float33", TM_DT_UNKNOWN }, { "", TM_DT_UNKNOWN },
		{ "torch.", TM_DT_UNKNOWN }, { "F32", TM_DT_UNKNOWN },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		CU_ASSERT_EQUAL(tm_dtype_from_name(cases[i].name), cases[i].dt);
		if (tm_dtype_from_name(cases[i].name) != cases[i].dt)
			fprintf(stderr, "dtype %s\n", cases[i].name);
	}
	CU_ASSERT_EQUAL(tm_dtype_from_name(NULL), TM_DT_UNKNOWN);
}

static void test_slot_format(void)
{
	char buf[32];
	struct tm_slot s;

	s.kind = TM_SLOT_OUT;
	s.index = 0;
	CU_ASSERT_EQUAL(tm_slot_format(s, buf, sizeof(buf)), TM_OK);
	CU_ASSERT_STRING_EQUAL(buf, "out");
	s.index = 1;
	CU_ASSERT_EQUAL(tm_slot_format(s, buf, sizeof(buf)), TM_OK);
	CU_ASSERT_STRING_EQUAL(buf, "out.1");
	s.kind = TM_SLOT_GRAD_IN;
	s.index = 12;
	CU_ASSERT_EQUAL(tm_slot_format(s, buf, sizeof(buf)), TM_OK);
	CU_ASSERT_STRING_EQUAL(buf, "grad_in.12");
	s.kind = TM_SLOT_DATA;
	s.index = 3;     /* data/grad have no index */
	CU_ASSERT_EQUAL(tm_slot_format(s, buf, sizeof(buf)), TM_OK);
	CU_ASSERT_STRING_EQUAL(buf, "data");
	s.kind = TM_SLOT_GRAD_OUT;
	s.index = 7;
	CU_ASSERT_EQUAL(tm_slot_format(s, buf, 5), TM_ERR_INVALID_ARG);
	s.kind = TM_SLOT__COUNT;
	CU_ASSERT_EQUAL(tm_slot_format(s, buf, sizeof(buf)), TM_ERR_INVALID_ARG);
}

/* Every slot, formatted, parses back to itself. */
static void test_slot_round_trip(void)
{
	int k;
	unsigned idx[] = { 0, 1, 7, 65535 };
	size_t i;

	for (k = 0; k < TM_SLOT__COUNT; k++) {
		CU_ASSERT(strcmp(tm_slot_kind_name(k), "?") != 0);
		for (i = 0; i < 4; i++) {
			struct tm_slot s, back;
			char buf[32];

			s.kind = (uint8_t)k;
			s.index = (k == TM_SLOT_DATA || k == TM_SLOT_GRAD) ? 0 : (uint16_t)idx[i];
			CU_ASSERT_EQUAL_FATAL(tm_slot_format(s, buf, sizeof(buf)), TM_OK);
			CU_ASSERT_EQUAL(tm_slot_parse(buf, &back), TM_OK);
			CU_ASSERT_EQUAL(back.kind, s.kind);
			CU_ASSERT_EQUAL(back.index, s.index);
		}
	}
	CU_ASSERT_STRING_EQUAL(tm_slot_kind_name(-1), "?");
	CU_ASSERT_STRING_EQUAL(tm_slot_kind_name(TM_SLOT__COUNT), "?");
	/* one request's rows */
	{
		static const char *const bad[] = { "out[r]", "out[1]", "out[r128]", "out[r1",
						   "out[r1]x", "out.256[r0]", "bogus[r0]",
						   "out[r1][r2]" };
		struct tm_slot back;

		CU_ASSERT_EQUAL(tm_slot_parse("out.2[r5]", &back), TM_OK);
		CU_ASSERT(tm_slot_is_row(back));
		CU_ASSERT_EQUAL(tm_slot_row(back), 5);
		CU_ASSERT_EQUAL(tm_slot_row_base(back).index, 2);
		CU_ASSERT_EQUAL(back.kind, TM_SLOT_OUT);
		for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			CU_ASSERT_EQUAL(tm_slot_parse(bad[i], &back), TM_ERR_ADDRESS);
	}
}

static void test_stat_names(void)
{
	int s;

	for (s = 0; s < TM_STAT__COUNT; s++) {
		CU_ASSERT_PTR_NOT_NULL_FATAL(tm_stat_table[s].name);
		CU_ASSERT_EQUAL(tm_stat_from_name(tm_stat_table[s].name), s);
		CU_ASSERT(tm_stat_table[s].level == 1 || tm_stat_table[s].level == 2);
		/* The level masks agree with the table. */
		if (tm_stat_table[s].level == 1)
			CU_ASSERT(TM_STATS_L1_MASK & TM_STAT_BIT(s));
		CU_ASSERT(TM_STATS_L2_MASK & TM_STAT_BIT(s));
	}
	CU_ASSERT_EQUAL(tm_stat_from_name("nan_count"), TM_STAT_NAN_COUNT);
	CU_ASSERT_EQUAL(tm_stat_from_name("abs_max"), TM_STAT_ABS_MAX);
	CU_ASSERT_EQUAL(tm_stat_from_name("std"), TM_STAT_STD);
	CU_ASSERT_EQUAL(tm_stat_from_name("nan"), -1);
	CU_ASSERT_EQUAL(tm_stat_from_name(""), -1);
	CU_ASSERT_EQUAL(tm_stat_table[TM_STAT_NUMEL].integer, 1);
	CU_ASSERT_EQUAL(tm_stat_table[TM_STAT_MEAN].integer, 0);
	CU_ASSERT(!(TM_STATS_L1_MASK & TM_STAT_BIT(TM_STAT_STD)));
}

static void test_gap_reason_format(void)
{
	char buf[128];

	CU_ASSERT_EQUAL(tm_gap_reason_format(TM_GAP_BACKPRESSURE, buf, sizeof(buf)), TM_OK);
	CU_ASSERT_STRING_EQUAL(buf, "backpressure");
	CU_ASSERT_EQUAL(tm_gap_reason_format(TM_GAP_BACKPRESSURE | TM_GAP_LEVEL, buf,
					     sizeof(buf)), TM_OK);
	CU_ASSERT_STRING_EQUAL(buf, "backpressure|level");
	CU_ASSERT_EQUAL(tm_gap_reason_format(TM_GAP__ALL, buf, sizeof(buf)), TM_OK);
	CU_ASSERT_STRING_EQUAL(buf, "backpressure|level|filtered|crash|truncated|damaged|"
			       "write error|not kept (flight window)");
	CU_ASSERT_EQUAL(tm_gap_reason_format(TM_GAP_CRASH | 0x100, buf, sizeof(buf)), TM_OK);
	CU_ASSERT_STRING_EQUAL(buf, "crash|0x100");
	CU_ASSERT_EQUAL(tm_gap_reason_format(0, buf, sizeof(buf)), TM_OK);
	CU_ASSERT_STRING_EQUAL(buf, "unknown");
	CU_ASSERT_EQUAL(tm_gap_reason_format(TM_GAP__ALL, buf, 10), TM_ERR_INVALID_ARG);
	CU_ASSERT_EQUAL(tm_gap_reason_format(TM_GAP_LEVEL, NULL, 10), TM_ERR_INVALID_ARG);
}

static void test_small_names(void)
{
	CU_ASSERT_STRING_EQUAL(tm_phase_name(TM_PHASE_FWD), "fwd");
	CU_ASSERT_STRING_EQUAL(tm_phase_name(TM_PHASE_BWD), "bwd");
	CU_ASSERT_STRING_EQUAL(tm_phase_name(7), "?");
	CU_ASSERT_STRING_EQUAL(tm_event_kind_name(TM_EV_ENTER), "enter");
	CU_ASSERT_STRING_EQUAL(tm_event_kind_name(TM_EV_PARAM), "param");
	CU_ASSERT_STRING_EQUAL(tm_event_kind_name(TM_EV__COUNT), "?");
	CU_ASSERT(!strncmp(tm_version_string(), "tensormorph ", 12));
}

/* The slot helpers the probes and tmdb's lookups share. */
static void test_event_slots(void)
{
	struct tm_tensor t[2];
	struct tm_event ev;
	struct tm_slot out1 = { TM_SLOT_OUT, 1 }, in0 = { TM_SLOT_IN, 0 }, sl;

	memset(t, 0, sizeof(t));
	memset(&ev, 0, sizeof(ev));
	t[0].slot.kind = TM_SLOT_OUT;
	t[1].slot.kind = TM_SLOT_OUT;
	t[1].slot.index = 1;
	ev.kind = TM_EV_EXIT;
	ev.tensors = t;
	ev.ntensors = 2;
	CU_ASSERT_PTR_EQUAL(tm_event_tensor(&ev, out1), &t[1]);
	CU_ASSERT_PTR_NULL(tm_event_tensor(&ev, in0));
	CU_ASSERT(tm_event_holds_slot(&ev, &out1));
	CU_ASSERT(!tm_event_holds_slot(&ev, &in0));
	CU_ASSERT(tm_event_holds_slot(&ev, NULL));
	tm_event_slot(&ev, &sl);
	CU_ASSERT_EQUAL(sl.kind, TM_SLOT_OUT);
	ev.kind = TM_EV_BWD;
	tm_event_slot(&ev, &sl);
	CU_ASSERT_EQUAL(sl.kind, TM_SLOT_GRAD_OUT);
	ev.kind = TM_EV_PARAM;
	tm_event_slot(&ev, &sl);
	CU_ASSERT_EQUAL(sl.kind, TM_SLOT_DATA);
	CU_ASSERT_EQUAL(sl.index, 0);
}

int main(void)
{
	static const struct tm_test_case cases[] = {
		TM_TEST(test_strerror_every_code),
		TM_TEST(test_dtype_names_round_trip),
		TM_TEST(test_dtype_torch_spellings),
		TM_TEST(test_slot_format),
		TM_TEST(test_slot_round_trip),
		TM_TEST(test_stat_names),
		TM_TEST(test_gap_reason_format),
		TM_TEST(test_small_names),
		TM_TEST(test_event_slots),
		{ NULL, NULL }
	};
	return tm_test_run("types", cases);
}
