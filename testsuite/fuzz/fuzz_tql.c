/*
 * fuzz_tql.c -- libFuzzer target for TQL: the input is TQL source, run
 * through the lexer, parser, checker and compiler (with a node table and
 * as a condition or not), then, when it compiles, the disassembler and the
 * VM on a fixed event.  The table also holds rank-prefixed nodes
 * ("@0:model.fc1" ...) so that "@*:" aggregates expand and run.  Nothing may crash, leak or read out of bounds; an
 * error must come with its report.  The corpus (corpus/tql) is replayed by
 * make check through standalone.c.
 */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensormorph.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct tm_tensor *lookup(void *user, uint32_t node, struct tm_slot slot,
				      uint32_t call, const struct tm_event **event,
				      uint32_t *reason)
{
	static struct tm_tensor t = {
		.have = TM_STATS_L1_MASK, .rank = 1, .shape = { 3 },
		.stat = { 3, 0, 0, 0, 0, -1, 1, 0, 1, 1.5 }
	};

	if (node % 2) {
		*reason = TM_GAP_BACKPRESSURE;
		return NULL;
	}
	return &t;
}

/* Per-rank values at a step: some ranks unknown, some NaN. */
static const struct tm_tensor *lookup_step(void *user, uint32_t node, struct tm_slot slot,
					   uint32_t call, uint64_t step,
					   const struct tm_event **event, uint32_t *reason)
{
	static struct tm_tensor t;

	(void)user;
	(void)slot;
	(void)call;
	if ((node + step) % 5 == 0) {
		*reason = TM_GAP_LEVEL;
		return NULL;
	}
	memset(&t, 0, sizeof(t));
	t.have = TM_STATS_L1_MASK;
	t.rank = 1;
	t.shape[0] = 3;
	for (int i = 0; i < TM_STAT__COUNT; i++)
		t.stat[i] = node == 7 ? NAN : (double)(node % 3);
	*event = NULL;
	return &t;
}

static int variable(void *user, const char *name, struct tm_tql_value *out)
{
	if (name[0] == 's') {
		out->type = TM_TQL_STR;
		out->v.str.s = "model.fc1";      /* not NUL-terminated use: len */
		out->v.str.len = 5;
		return TM_OK;
	}
	if (name[0] >= '0' && name[0] <= '9') {
		out->type = TM_TQL_NUM;
		out->v.d = 2.5;
		return TM_OK;
	}
	return TM_ERR_NOT_FOUND;
}

/* request: a batch of ids, some cut off (count > nvalues) */
static const struct tm_annot *annotation(void *user, const struct tm_event *ev,
					 const char *key)
{
	static const char *const ids[] = { "cmpl-1-0", "", "chatcmpl-x*[" };
	static const struct tm_annot a = { .step = 120, .key = "request",
					   .values = ids, .nvalues = 3, .count = 9 };

	(void)user;
	return ev->step == a.step && !strcmp(key, a.key) ? &a : NULL;
}

/* the aligned reference: a tensor of 3 elements (one NaN), with contents
 * when asked for, against the focus's 4 x 32 (shapes differ) */
static const struct tm_tensor *reference(void *user, const struct tm_event *ev,
					 struct tm_slot slot, int contents,
					 const struct tm_event **ref_event, uint32_t *reason)
{
	static const float elems[3] = { 1.0f, -2.0f, NAN };
	static struct tm_tensor t;

	(void)user;
	*ref_event = ev;
	if (!ev) {
		*reason = TM_REF_NO_EVENT;
		return NULL;
	}
	memset(&t, 0, sizeof(t));
	t.slot = slot;
	t.dtype = TM_DT_F32;
	t.rank = 1;
	t.shape[0] = 3;
	t.have = TM_STATS_L1_MASK;
	t.stat[TM_STAT_MEAN] = 0.25;
	if (contents) {
		t.payload = elems;
		t.payload_len = sizeof(elems);
	}
	return &t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static tm_nodetab *nodes;
	static const char *const addrs[] = {
		"model", "model.embed", "model.layers.0", "model.layers.0.mlp", "model.fc1",
		"@2:model.fc1", "@0:model.fc1", "@1:model.fc1", "@0:model", "@1:model"
	};
	struct tm_tensor t = {
		.slot = { TM_SLOT_OUT, 0 }, .dtype = TM_DT_F32, .rank = 2,
		.shape = { 4, 32 }, .have = TM_STATS_L1_MASK,
		.stat = { 128, 1, 0, 0, 0, -2, 2, 0.5, 2, 10 }
	};
	struct tm_event ev = { .seq = 7, .step = 120, .node = 2, .time_ns = 5000000,
			       .ntensors = 1, .tensors = &t };
	struct tm_tql_env env = { NULL, lookup, variable, lookup_step, annotation, reference };
	struct tm_tql_ctx ctx = { &ev, &t, NULL, &env, 0 };
	struct tm_tql_compile_opts opts = { 0 };
	tm_tql_prog *p = NULL;
	char *src, *err = NULL;
	int rc, round;

	if (!nodes) {
		size_t i;

		nodes = tm_nodetab_new();
		for (i = 0; i < sizeof(addrs) / sizeof(addrs[0]); i++) {
			struct tm_node n = { .parent = TM_NODE_NONE, .address = addrs[i],
					     .type = "Linear" };
			uint32_t id;

			tm_nodetab_add(nodes, &n, &id);
		}
	}
	ctx.nodes = nodes;
	src = malloc(size + 1);
	if (!src)
		return 0;
	memcpy(src, data, size);
	src[size] = '\0';
	opts.nodes = nodes;
	for (round = 0; round < 2; round++) {
		opts.want_bool = round;
		rc = tm_tql_compile(src, &opts, &p, &err);
		if (rc == TM_OK) {
			struct tm_tql_value v;
			char buf[256];
			FILE *devnull = fopen("/dev/null", "w");

			if (err || !p)
				abort();
			if (devnull) {
				tm_tql_disassemble(p, devnull);
				fclose(devnull);
			}
			for (int i = 0; i < 3; i++) {
				ev.node = (uint32_t)i;
				if (tm_tql_eval(p, &ctx, &v) != TM_OK)
					abort();
				tm_tql_value_format(&v, buf, sizeof(buf));
			}
			tm_tql_eval(p, NULL, &v);
			tm_tql_free(p);
		} else if (rc == TM_ERR_TQL) {
			if (!err || strncmp(err, "tql:", 4) || p)
				abort();
		}
		free(err);
		err = NULL;
	}
	free(src);
	return 0;
}
