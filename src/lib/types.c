/*
 * types.c -- names of the event model's enumerations (phases, kinds, slots,
 * dtypes, stats, gap reasons), the one table each so that the encoder, TQL
 * and tmdb print and parse them the same way.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "tm-internal.h"

const char *tm_phase_name(int phase)
{
	switch (phase) {
	case TM_PHASE_FWD: return "fwd";
	case TM_PHASE_BWD: return "bwd";
	default: return "?";
	}
}

const char *tm_event_kind_name(int kind)
{
	static const char *const names[TM_EV__COUNT] = {
		[TM_EV_ENTER] = "enter", [TM_EV_EXIT] = "exit",
		[TM_EV_BWD] = "bwd", [TM_EV_PARAM] = "param", [TM_EV_RAISE] = "raise",
		[TM_EV_OP] = "op"
	};
	return kind >= 0 && kind < TM_EV__COUNT && names[kind] ? names[kind] : "?";
}

int tm_event_op_made_nonfinite(const struct tm_event *ev)
{
	const uint32_t both = TM_STAT_BIT(TM_STAT_NAN_COUNT) | TM_STAT_BIT(TM_STAT_INF_COUNT);
	int unknown = 0;
	uint32_t i;

	if (!ev || ev->kind != TM_EV_OP || ev->phase != TM_PHASE_FWD)
		return -1;
	for (i = 0; i < ev->ntensors; i++) {
		const struct tm_tensor *t = &ev->tensors[i];

		if ((t->have & both) != both) {
			unknown = 1;
			continue;
		}
		if (t->stat[TM_STAT_NAN_COUNT] > 0 || t->stat[TM_STAT_INF_COUNT] > 0) {
			if (!(ev->op_flags & TM_OPF_INPUTS_CHECKED))
				return -1;
			return !!(ev->op_flags & TM_OPF_INPUTS_FINITE);
		}
	}
	return unknown ? -1 : 0;
}

static const char *const slot_names[TM_SLOT__COUNT] = {
	"out", "in", "grad_out", "grad_in", "data", "grad"
};

const char *tm_slot_kind_name(int kind)
{
	return kind >= 0 && kind < TM_SLOT__COUNT ? slot_names[kind] : "?";
}

int tm_slot_event_kind(int slot_kind)
{
	switch (slot_kind) {
	case TM_SLOT_IN: return TM_EV_ENTER;
	case TM_SLOT_OUT: return TM_EV_EXIT;
	case TM_SLOT_GRAD_OUT:
	case TM_SLOT_GRAD_IN: return TM_EV_BWD;
	default: return TM_EV_PARAM;
	}
}

const struct tm_tensor *tm_event_tensor(const struct tm_event *ev,
					struct tm_slot slot)
{
	uint32_t i;

	for (i = 0; i < ev->ntensors; i++)
		if (ev->tensors[i].slot.kind == slot.kind &&
		    ev->tensors[i].slot.index == slot.index)
			return &ev->tensors[i];
	return NULL;
}

int tm_event_holds_slot(const struct tm_event *ev, const struct tm_slot *slot)
{
	return !slot || tm_event_tensor(ev, *slot) != NULL;
}

int tm_event_slot(const struct tm_event *ev, struct tm_slot *slot)
{
	slot->index = 0;
	switch (ev->kind) {
	case TM_EV_ENTER: slot->kind = TM_SLOT_IN; break;
	case TM_EV_EXIT: slot->kind = TM_SLOT_OUT; break;
	case TM_EV_BWD: slot->kind = TM_SLOT_GRAD_OUT; break;
	default: slot->kind = TM_SLOT_DATA; break;
	}
	return 0;
}

int tm_slot_is_row(struct tm_slot s)
{
	return (s.index & TM_SLOT_ROWS) != 0;
}

unsigned tm_slot_row(struct tm_slot s)
{
	return (s.index >> 8) & (TM_SLOT_ROW_MAX - 1);
}

struct tm_slot tm_slot_row_base(struct tm_slot s)
{
	struct tm_slot b = s;

	if (tm_slot_is_row(s))
		b.index = s.index & (TM_SLOT_ROW_INDEX_MAX - 1);
	return b;
}

struct tm_slot tm_slot_row_of(struct tm_slot base, unsigned request)
{
	struct tm_slot r = base;

	r.index = (uint16_t)(TM_SLOT_ROWS | ((request & (TM_SLOT_ROW_MAX - 1)) << 8) |
			     (base.index & (TM_SLOT_ROW_INDEX_MAX - 1)));
	return r;
}

int tm_slot_format(struct tm_slot s, char *buf, size_t len)
{
	int n;

	if (s.kind >= TM_SLOT__COUNT)
		return TM_ERR_INVALID_ARG;
	if (tm_slot_is_row(s)) {
		char b[32];
		int rc = tm_slot_format(tm_slot_row_base(s), b, sizeof(b));

		if (rc)
			return rc;
		n = snprintf(buf, len, "%s[r%u]", b, tm_slot_row(s));
		return n < 0 || (size_t)n >= len ? TM_ERR_INVALID_ARG : TM_OK;
	}
	/* ARCHITECTURE 3: NODE:out is NODE:out.0, so index 0 prints bare. */
	if (s.index == 0 || s.kind == TM_SLOT_DATA || s.kind == TM_SLOT_GRAD)
		n = snprintf(buf, len, "%s", slot_names[s.kind]);
	else
		n = snprintf(buf, len, "%s.%u", slot_names[s.kind], s.index);
	return n < 0 || (size_t)n >= len ? TM_ERR_INVALID_ARG : TM_OK;
}

static const struct {
	const char *name;
	size_t size;
} dtypes[TM_DT__COUNT] = {
	[TM_DT_UNKNOWN] = { "unknown", 0 },
	[TM_DT_F32] = { "f32", 4 },
	[TM_DT_F64] = { "f64", 8 },
	[TM_DT_F16] = { "f16", 2 },
	[TM_DT_BF16] = { "bf16", 2 },
	[TM_DT_F8E4M3] = { "f8e4m3", 1 },
	[TM_DT_F8E5M2] = { "f8e5m2", 1 },
	[TM_DT_I8] = { "i8", 1 },
	[TM_DT_I16] = { "i16", 2 },
	[TM_DT_I32] = { "i32", 4 },
	[TM_DT_I64] = { "i64", 8 },
	[TM_DT_U8] = { "u8", 1 },
	[TM_DT_U16] = { "u16", 2 },
	[TM_DT_U32] = { "u32", 4 },
	[TM_DT_U64] = { "u64", 8 },
	[TM_DT_BOOL] = { "bool", 1 },
	[TM_DT_C64] = { "c64", 8 },
	[TM_DT_C128] = { "c128", 16 },
};

/* torch spellings, so the probe can pass str(tensor.dtype) through. */
static const struct {
	const char *alias;
	int dt;
} dtype_aliases[] = {
	{ "float32", TM_DT_F32 }, { "float", TM_DT_F32 },
	{ "float64", TM_DT_F64 }, { "double", TM_DT_F64 },
	{ "float16", TM_DT_F16 }, { "half", TM_DT_F16 },
	{ "bfloat16", TM_DT_BF16 },
	{ "float8_e4m3fn", TM_DT_F8E4M3 }, { "float8_e5m2", TM_DT_F8E5M2 },
	{ "int8", TM_DT_I8 }, { "int16", TM_DT_I16 }, { "short", TM_DT_I16 },
	{ "int32", TM_DT_I32 }, { "int", TM_DT_I32 },
	{ "int64", TM_DT_I64 }, { "long", TM_DT_I64 },
	{ "uint8", TM_DT_U8 }, { "uint16", TM_DT_U16 },
	{ "uint32", TM_DT_U32 }, { "uint64", TM_DT_U64 },
	{ "complex64", TM_DT_C64 }, { "complex128", TM_DT_C128 },
};

const char *tm_dtype_name(int dt)
{
	return dt >= 0 && dt < TM_DT__COUNT ? dtypes[dt].name : "unknown";
}

int tm_dtype_from_name(const char *name)
{
	size_t i;

	if (!name)
		return TM_DT_UNKNOWN;
	if (!strncmp(name, "torch.", 6))
		name += 6;
	for (i = 1; i < TM_DT__COUNT; i++)
		if (!strcmp(name, dtypes[i].name))
			return (int)i;
	for (i = 0; i < TM_ARRAY_LEN(dtype_aliases); i++)
		if (!strcmp(name, dtype_aliases[i].alias))
			return dtype_aliases[i].dt;
	return TM_DT_UNKNOWN;
}

size_t tm_dtype_size(int dt)
{
	return dt >= 0 && dt < TM_DT__COUNT ? dtypes[dt].size : 0;
}

const struct tm_stat_info tm_stat_table[TM_STAT__COUNT] = {
	[TM_STAT_NUMEL] = { "numel", 1, 1, "number of elements" },
	[TM_STAT_NAN_COUNT] = { "nan_count", 1, 1, "number of NaN elements" },
	[TM_STAT_INF_COUNT] = { "inf_count", 1, 1, "number of +Inf and -Inf elements" },
	[TM_STAT_POSINF_COUNT] = { "posinf_count", 1, 1, "number of +Inf elements" },
	[TM_STAT_NEGINF_COUNT] = { "neginf_count", 1, 1, "number of -Inf elements" },
	[TM_STAT_MIN] = { "min", 1, 0, "smallest finite element" },
	[TM_STAT_MAX] = { "max", 1, 0, "largest finite element" },
	[TM_STAT_MEAN] = { "mean", 1, 0, "mean of the finite elements" },
	[TM_STAT_ABS_MAX] = { "abs_max", 1, 0, "largest absolute finite element" },
	[TM_STAT_L2] = { "l2", 1, 0, "Euclidean norm of the finite elements" },
	[TM_STAT_STD] = { "std", 2, 0, "standard deviation of the finite elements" },
	[TM_STAT_ZERO_COUNT] = { "zero_count", 2, 1, "number of elements equal to zero" },
};

int tm_stat_from_name(const char *name)
{
	int i;

	for (i = 0; i < TM_STAT__COUNT; i++)
		if (!strcmp(name, tm_stat_table[i].name))
			return i;
	return -1;
}

static const char *const gap_reason_names[] = {
	"backpressure", "level", "filtered", "crash", "truncated", "damaged",
	"write error", "not kept (flight window)"
};

int tm_gap_reason_format(uint32_t reasons, char *buf, size_t len)
{
	size_t used = 0, i;

	if (!buf || len == 0)
		return TM_ERR_INVALID_ARG;
	buf[0] = '\0';
	for (i = 0; i < TM_ARRAY_LEN(gap_reason_names); i++) {
		int n;

		if (!(reasons & (1u << i)))
			continue;
		n = snprintf(buf + used, len - used, "%s%s", used ? "|" : "",
			     gap_reason_names[i]);
		if (n < 0 || (size_t)n >= len - used)
			return TM_ERR_INVALID_ARG;
		used += (size_t)n;
	}
	if (reasons & ~(uint32_t)TM_GAP__ALL) {
		int n = snprintf(buf + used, len - used, "%s0x%x", used ? "|" : "",
				 reasons & ~(uint32_t)TM_GAP__ALL);
		if (n < 0 || (size_t)n >= len - used)
			return TM_ERR_INVALID_ARG;
		used += (size_t)n;
	}
	if (used == 0 && snprintf(buf, len, "unknown") >= (int)len)
		return TM_ERR_INVALID_ARG;
	return TM_OK;
}
