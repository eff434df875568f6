/*
 * test_compare.c -- a run beside a reference (tm-compare.h): map rules
 * (parsing, errors, captures, prefixes, exclusion, rank prefixes), the
 * aligner over real .tmrun files (keys, duplicate keys of a parameter's
 * data and grad, steps read in any order, gaps, what no run event asked
 * for), contents read back, and the measures.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tensormorph.h"
#include "tm-test.h"

static char tmpdir[] = "/tmp/tm-test-compare-XXXXXX";

static char *tmp_path(const char *name)
{
	static char buf[4][256];
	static int k;

	k = (k + 1) % 4;
	snprintf(buf[k], sizeof(buf[k]), "%s/%s", tmpdir, name);
	return buf[k];
}

/* ------------------------------------------------------------- map */

static const char *apply(const tm_cmp_map *m, const char *addr)
{
	static char buf[256];
	int rc = tm_cmp_map_apply(m, addr, buf, sizeof(buf));

	return rc == TM_OK ? buf : rc == TM_ERR_NOT_FOUND ? "<excluded>" : "<error>";
}

static void test_map_rules(void)
{
	tm_cmp_map *m = tm_cmp_map_new();
	char *err = NULL;

	CU_ASSERT_PTR_NOT_NULL_FATAL(m);
	CU_ASSERT_STRING_EQUAL(apply(m, "model.fc"), "model.fc");       /* no rule */
	CU_ASSERT_EQUAL(tm_cmp_map_add(m, "model.blocks.*.attn_norm="
				       "model.model.layers.*.input_layernorm", &err), TM_OK);
	CU_ASSERT_EQUAL(tm_cmp_map_add(m, "model.blocks.*=model.model.layers.*", &err), TM_OK);
	CU_ASSERT_EQUAL(tm_cmp_map_add(m, "model.x.*.*=model.y.*.z.*", &err), TM_OK);
	CU_ASSERT_EQUAL(tm_cmp_map_add(m, "model.rotary=", &err), TM_OK);
	CU_ASSERT_EQUAL(tm_cmp_map_count(m), 4);
	CU_ASSERT_STRING_EQUAL(tm_cmp_map_rule(m, 3), "model.rotary=");
	CU_ASSERT_PTR_NULL(tm_cmp_map_rule(m, 4));
	/* the first rule that applies wins; the rest of the address is kept */
	CU_ASSERT_STRING_EQUAL(apply(m, "model.blocks.3.attn_norm"),
			       "model.model.layers.3.input_layernorm");
	CU_ASSERT_STRING_EQUAL(apply(m, "model.blocks.3.attn_norm.weight"),
			       "model.model.layers.3.input_layernorm.weight");
	CU_ASSERT_STRING_EQUAL(apply(m, "model.blocks.12.mlp.up"), "model.model.layers.12.mlp.up");
	CU_ASSERT_STRING_EQUAL(apply(m, "model.blocks.0"), "model.model.layers.0");
	/* a rule longer than the address, or another name, does not apply */
	CU_ASSERT_STRING_EQUAL(apply(m, "model.blocks"), "model.blocks");
	CU_ASSERT_STRING_EQUAL(apply(m, "model.blocksX.1"), "model.blocksX.1");
	/* captures in order */
	CU_ASSERT_STRING_EQUAL(apply(m, "model.x.a.b.c"), "model.y.a.z.b.c");
	/* an empty right side excludes the address and what is under it */
	CU_ASSERT_STRING_EQUAL(apply(m, "model.rotary"), "<excluded>");
	CU_ASSERT_STRING_EQUAL(apply(m, "model.rotary.inv"), "<excluded>");
	/* a rank prefix passes through */
	CU_ASSERT_STRING_EQUAL(apply(m, "@1:model.blocks.2"), "@1:model.model.layers.2");
	/* too long for the buffer */
	{
		char small[8];

		CU_ASSERT_EQUAL(tm_cmp_map_apply(m, "model.blocks.1", small, sizeof(small)),
				TM_ERR_TOO_LARGE);
	}
	tm_cmp_map_free(m);
}

static void test_map_errors(void)
{
	static const struct { const char *rule, *msg; } bad[] = {
		{ "model.x", "map rule 'model.x': write it RUN=REF (one '=')" },
		{ "a=b=c", "map rule 'a=b=c': write it RUN=REF (one '=')" },
		{ "=model", "map rule '=model': each side is a dotted address whose segments "
			    "are names or '*' (the left one not empty)" },
		{ "model..x=y", "map rule 'model..x=y': each side is a dotted address whose "
				"segments are names or '*' (the left one not empty)" },
		{ "model.a*=y", "map rule 'model.a*=y': each side is a dotted address whose "
				"segments are names or '*' (the left one not empty)" },
		{ "model.*=model.x", "map rule 'model.*=model.x': both sides need as many '*'" },
		{ "model.*.*=model.*", "map rule 'model.*.*=model.*': both sides need as many '*'" },
	};
	tm_cmp_map *m = tm_cmp_map_new();
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *err = NULL;

		CU_ASSERT_EQUAL(tm_cmp_map_add(m, bad[i].rule, &err), TM_ERR_ADDRESS);
		CU_ASSERT_PTR_NOT_NULL_FATAL(err);
		if (strcmp(err, bad[i].msg))
			fprintf(stderr, "\n  got: %s\n  want: %s\n", err, bad[i].msg);
		CU_ASSERT_STRING_EQUAL(err, bad[i].msg);
		free(err);
	}
	CU_ASSERT_EQUAL(tm_cmp_map_count(m), 0);
	CU_ASSERT_EQUAL(tm_cmp_map_add(NULL, "a=b", NULL), TM_ERR_INVALID_ARG);
	tm_cmp_map_free(m);
	tm_cmp_map_free(NULL);
}

/* ------------------------------------------------------------- traces */

static const char *const ref_nodes[] = {
	"model", "model.layers.0", "model.layers.0.weight", "model.layers.1", "model.head"
};

/*
 * The reference: per step, model ENTER, layers.0 EXIT (call 1 and 2),
 * layers.0.weight as two PARAM events (grad, then data), layers.1 EXIT,
 * head EXIT (the head's contents captured), model EXIT.  A gap in step
 * gap_step takes layers.1's event.
 */
static void write_ref(const char *path, const char *const *names, size_t nnames,
		      unsigned steps, int gap_step, float bias)
{
	struct tm_writer_opts o;
	struct tm_run_meta meta = { 0 };
	tm_writer *w;
	uint64_t seq = 0;
	unsigned s;
	size_t i;

	tm_writer_opts_default(&o);
	o.chunk_bytes = 512;    /* many chunks: seeks by step are real */
	CU_ASSERT_EQUAL_FATAL(tm_writer_open(path, &o, &w), TM_OK);
	meta.probe_kind = "synthetic";
	meta.default_level = 3;
	meta.rank = -1;
	CU_ASSERT_EQUAL(tm_writer_meta(w, &meta), TM_OK);
	for (i = 0; i < nnames; i++) {
		struct tm_node n = { 0 };
		uint32_t id;

		n.address = names[i];
		n.type = "M";
		n.parent = i ? 0 : TM_NODE_NONE;
		n.kind = strstr(names[i], "weight") ? TM_NODE_PARAM : TM_NODE_MODULE;
		CU_ASSERT_EQUAL(tm_writer_node(w, &n, &id), TM_OK);
	}
	for (s = 0; s < steps; s++) {
		static const struct { uint32_t node, call; uint8_t kind, slot; } evs[] = {
			{ 0, 1, TM_EV_ENTER, TM_SLOT_IN }, { 1, 1, TM_EV_EXIT, TM_SLOT_OUT },
			{ 1, 2, TM_EV_EXIT, TM_SLOT_OUT }, { 2, 1, TM_EV_PARAM, TM_SLOT_GRAD },
			{ 2, 1, TM_EV_PARAM, TM_SLOT_DATA }, { 3, 1, TM_EV_EXIT, TM_SLOT_OUT },
			{ 4, 1, TM_EV_EXIT, TM_SLOT_OUT }, { 0, 1, TM_EV_EXIT, TM_SLOT_OUT },
		};
		for (i = 0; i < sizeof(evs) / sizeof(evs[0]); i++, seq++) {
			struct tm_event e = { 0 };
			struct tm_tensor t = { 0 };
			float elems[4];
			int k;

			if ((int)s == gap_step && evs[i].node == 3) {
				struct tm_gap g = { seq, seq, 1, TM_GAP_BACKPRESSURE, seq, s };

				CU_ASSERT_EQUAL(tm_writer_gap(w, &g), TM_OK);
				continue;
			}
			e.seq = seq;
			e.step = s;
			e.kind = evs[i].kind;
			e.phase = TM_PHASE_FWD;
			e.level = 3;
			e.node = evs[i].node;
			e.call = evs[i].call;
			e.time_ns = seq;
			e.ntensors = 1;
			e.tensors = &t;
			t.slot.kind = evs[i].slot;
			t.dtype = TM_DT_F32;
			t.rank = 1;
			t.shape[0] = 4;
			t.have = TM_STAT_BIT(TM_STAT_MEAN);
			/* the value says which event it is */
			t.stat[TM_STAT_MEAN] = s * 100 + evs[i].node * 10 + evs[i].call +
					       (evs[i].slot == TM_SLOT_DATA ? 0.5 : 0);
			if (evs[i].node == 4) {
				for (k = 0; k < 4; k++)
					elems[k] = (float)(k + 1) + (k == 3 ? bias : 0);
				t.payload = elems;
				t.payload_len = sizeof(elems);
			}
			CU_ASSERT_EQUAL(tm_writer_event(w, &e), TM_OK);
		}
	}
	CU_ASSERT_EQUAL(tm_writer_close(w), TM_OK);
}

static tm_align *open_align(const char *path, const tm_cmp_map *m)
{
	tm_reader *r = NULL;
	tm_align *a = NULL;
	char *detail = NULL;

	CU_ASSERT_EQUAL_FATAL(tm_reader_open(path, 0, &r, &detail), TM_OK);
	CU_ASSERT_EQUAL_FATAL(tm_align_new(r, m, &a), TM_OK);
	return a;
}

static double aligned_mean(tm_align *a, const char *addr, uint64_t step, uint32_t call,
			   uint8_t kind, uint8_t slot, uint32_t *reason)
{
	struct tm_tensor t = { 0 };
	struct tm_event e = { 0 };
	const struct tm_event *ref;
	int rc;

	t.slot.kind = slot;
	e.step = step;
	e.call = call;
	e.kind = kind;
	e.ntensors = 1;
	e.tensors = &t;
	*reason = 0;
	rc = tm_align_event(a, addr, &e, &ref, reason);
	if (rc)
		return rc == TM_ERR_NOT_FOUND ? -1 : -2;
	CU_ASSERT_EQUAL(ref->step, step);
	CU_ASSERT_PTR_NOT_NULL_FATAL(tm_event_tensor(ref, t.slot));
	return tm_event_tensor(ref, t.slot)->stat[TM_STAT_MEAN];
}

static uint64_t unmatched_seen;

static void count_unmatched(void *user, const struct tm_event *ref)
{
	(void)user;
	(void)ref;
	unmatched_seen++;
}

static void test_align(void)
{
	const char *ref = tmp_path("ref.tmrun");
	tm_align *a;
	uint32_t why;

	write_ref(ref, ref_nodes, 5, 6, 2, 0);
	a = open_align(ref, NULL);
	/* by address, call, step and kind */
	CU_ASSERT_EQUAL(aligned_mean(a, "model.layers.0", 0, 1, TM_EV_EXIT, TM_SLOT_OUT, &why), 11);
	CU_ASSERT_EQUAL(aligned_mean(a, "model.layers.0", 0, 2, TM_EV_EXIT, TM_SLOT_OUT, &why), 12);
	CU_ASSERT_EQUAL(aligned_mean(a, "model.layers.0", 3, 2, TM_EV_EXIT, TM_SLOT_OUT, &why), 312);
	CU_ASSERT_EQUAL(aligned_mean(a, "model", 3, 1, TM_EV_ENTER, TM_SLOT_IN, &why), 301);
	CU_ASSERT_EQUAL(aligned_mean(a, "model", 3, 1, TM_EV_EXIT, TM_SLOT_OUT, &why), 301);
	/* a parameter's grad and data events share a key: the slot decides */
	CU_ASSERT_EQUAL(aligned_mean(a, "model.layers.0.weight", 4, 1, TM_EV_PARAM,
				     TM_SLOT_DATA, &why), 421.5);
	CU_ASSERT_EQUAL(aligned_mean(a, "model.layers.0.weight", 4, 1, TM_EV_PARAM,
				     TM_SLOT_GRAD, &why), 421);
	/* backwards, then forwards again */
	CU_ASSERT_EQUAL(aligned_mean(a, "model.head", 1, 1, TM_EV_EXIT, TM_SLOT_OUT, &why), 141);
	CU_ASSERT_EQUAL(aligned_mean(a, "model.head", 5, 1, TM_EV_EXIT, TM_SLOT_OUT, &why), 541);
	CU_ASSERT_EQUAL(aligned_mean(a, "model.head", 0, 1, TM_EV_EXIT, TM_SLOT_OUT, &why), 41);
	/* what cannot be aligned says why */
	CU_ASSERT_EQUAL(aligned_mean(a, "model.nothere", 0, 1, TM_EV_EXIT, TM_SLOT_OUT, &why), -1);
	CU_ASSERT_EQUAL(why, TM_REF_NO_NODE);
	CU_ASSERT_EQUAL(aligned_mean(a, "model.head", 0, 2, TM_EV_EXIT, TM_SLOT_OUT, &why), -1);
	CU_ASSERT_EQUAL(why, TM_REF_NO_EVENT);
	CU_ASSERT_EQUAL(aligned_mean(a, "model.head", 9, 1, TM_EV_EXIT, TM_SLOT_OUT, &why), -1);
	CU_ASSERT_EQUAL(why, TM_REF_NO_EVENT);
	/* lost in the reference's gap: the gap's reason joins */
	CU_ASSERT_EQUAL(aligned_mean(a, "model.layers.1", 2, 1, TM_EV_EXIT, TM_SLOT_OUT, &why), -1);
	CU_ASSERT_EQUAL(why, TM_REF_NO_EVENT | TM_GAP_BACKPRESSURE);
	CU_ASSERT_EQUAL(aligned_mean(a, "model.layers.1", 3, 1, TM_EV_EXIT, TM_SLOT_OUT, &why), 331);
	tm_align_free(a);
}

static void test_align_map_and_unmatched(void)
{
	static const char *const run_names[] = {
		"model", "model.blocks.0", "model.blocks.0.weight", "model.blocks.1", "model.out"
	};
	const char *ref = tmp_path("ref2.tmrun");
	tm_cmp_map *m = tm_cmp_map_new();
	tm_align *a;
	uint32_t why;
	unsigned s;
	int i;

	write_ref(ref, ref_nodes, 5, 3, -1, 0);
	CU_ASSERT_EQUAL(tm_cmp_map_add(m, "model.blocks.*=model.layers.*", NULL), TM_OK);
	CU_ASSERT_EQUAL(tm_cmp_map_add(m, "model.out=", NULL), TM_OK);
	a = open_align(ref, m);
	tm_cmp_map_free(m);     /* the aligner keeps its own copy */
	CU_ASSERT_EQUAL(tm_cmp_map_count(tm_align_map(a)), 2);
	unmatched_seen = 0;
	tm_align_set_unmatched(a, count_unmatched, NULL);
	for (s = 0; s < 3; s++) {
		for (i = 0; i < 4; i++) {
			double v = aligned_mean(a, run_names[i], s, 1,
						i == 2 ? TM_EV_PARAM : TM_EV_EXIT,
						i == 2 ? TM_SLOT_DATA : TM_SLOT_OUT, &why);

			CU_ASSERT_EQUAL(v, s * 100 + i * 10 + 1 + (i == 2 ? 0.5 : 0));
		}
		CU_ASSERT_EQUAL(aligned_mean(a, run_names[4], s, 1, TM_EV_EXIT, TM_SLOT_OUT,
					     &why), -1);
		CU_ASSERT_EQUAL(why, TM_REF_UNMAPPED);
	}
	tm_align_finish(a);
	/* per step: model ENTER, layers.0#2, the weight's grad event, head */
	CU_ASSERT_EQUAL(unmatched_seen, 3 * 4);
	tm_align_free(a);
}

/* The same as test_align_map_and_unmatched's scan, with the reference
 * prefetched by a thread; then a step backwards falls back to reading on
 * demand. */
static void test_prefetch(void)
{
	const char *ref = tmp_path("ref4.tmrun");
	tm_align *a;
	uint32_t why;
	unsigned s;

	write_ref(ref, ref_nodes, 5, 40, 7, 0);
	a = open_align(ref, NULL);
	CU_ASSERT_EQUAL_FATAL(tm_align_set_prefetch(a, 1), TM_OK);
	CU_ASSERT_EQUAL(tm_align_set_prefetch(a, 1), TM_OK);   /* already */
	unmatched_seen = 0;
	tm_align_set_unmatched(a, count_unmatched, NULL);
	for (s = 0; s < 40; s += 1 + (s == 10)) {       /* step 11 is skipped */
		CU_ASSERT_EQUAL(aligned_mean(a, "model.layers.0", s, 2, TM_EV_EXIT,
					     TM_SLOT_OUT, &why), s * 100 + 12);
		CU_ASSERT_EQUAL(aligned_mean(a, "model.layers.0.weight", s, 1, TM_EV_PARAM,
					     TM_SLOT_GRAD, &why), s * 100 + 21);
		if (s == 7) {
			CU_ASSERT_EQUAL(aligned_mean(a, "model.layers.1", s, 1, TM_EV_EXIT,
						     TM_SLOT_OUT, &why), -1);
			CU_ASSERT_EQUAL(why, TM_REF_NO_EVENT | TM_GAP_BACKPRESSURE);
		}
	}
	/* steps past the reference's end: empty */
	CU_ASSERT_EQUAL(aligned_mean(a, "model.head", 45, 1, TM_EV_EXIT, TM_SLOT_OUT, &why), -1);
	CU_ASSERT_EQUAL(why, TM_REF_NO_EVENT);
	tm_align_finish(a);
	/* 8 events a step, 2 aligned in 39 steps, and all of step 11; step 7
	 * lost one to its gap */
	CU_ASSERT_EQUAL(unmatched_seen, 39 * 6 + 8 - 1);
	/* backwards */
	CU_ASSERT_EQUAL(aligned_mean(a, "model.head", 3, 1, TM_EV_EXIT, TM_SLOT_OUT, &why), 341);
	CU_ASSERT_EQUAL(aligned_mean(a, "model.head", 39, 1, TM_EV_EXIT, TM_SLOT_OUT, &why),
			3941);
	tm_align_free(a);
	/* started and freed without a question */
	a = open_align(ref, NULL);
	CU_ASSERT_EQUAL(tm_align_set_prefetch(a, 1), TM_OK);
	tm_align_free(a);
}

static void test_contents(void)
{
	const char *run = tmp_path("run3.tmrun"), *ref = tmp_path("ref3.tmrun");
	struct tm_contents_diff d;
	tm_reader *rr = NULL;
	struct tm_record rec;
	const struct tm_event *rev;
	const struct tm_tensor *rt;
	tm_align *a;
	uint32_t why;
	int n = 0;

	write_ref(ref, ref_nodes, 5, 2, -1, 0);
	write_ref(run, ref_nodes, 5, 2, -1, 0.5f);
	a = open_align(ref, NULL);
	CU_ASSERT_EQUAL_FATAL(tm_reader_open(run, 0, &rr, NULL), TM_OK);
	while (tm_reader_next(rr, &rec) == TM_OK) {
		const struct tm_tensor *t;

		if (rec.type != TM_REC_EVENT || rec.u.event.node != 4)
			continue;
		t = &rec.u.event.tensors[0];
		CU_ASSERT_EQUAL_FATAL(tm_align_event(a, "model.head", &rec.u.event, &rev, &why),
				      TM_OK);
		/* the window keeps stats only */
		CU_ASSERT_PTR_NULL(rev->tensors[0].payload);
		CU_ASSERT_EQUAL_FATAL(tm_align_contents(a, rev, t->slot, &rt), TM_OK);
		CU_ASSERT_EQUAL_FATAL(tm_contents_diff(t, rt, &d), TM_OK);
		CU_ASSERT_EQUAL(d.n, 4);
		CU_ASSERT_DOUBLE_EQUAL(d.maxabsdiff, 0.5, 1e-12);
		CU_ASSERT_DOUBLE_EQUAL(d.relerr, 0.5 / sqrt(30.0), 1e-12);
		CU_ASSERT(d.cosine > 0.99 && d.cosine < 1);
		n++;
	}
	CU_ASSERT_EQUAL(n, 2);
	/* an event without contents */
	{
		struct tm_tensor t = { 0 };
		struct tm_event e = { 0 };

		e.kind = TM_EV_EXIT;
		e.call = 1;
		e.ntensors = 1;
		e.tensors = &t;
		CU_ASSERT_EQUAL_FATAL(tm_align_event(a, "model.layers.1", &e, &rev, &why), TM_OK);
		CU_ASSERT_EQUAL(tm_align_contents(a, rev, t.slot, &rt), TM_ERR_NOT_FOUND);
		/* and the window still answers after the reader moved */
		CU_ASSERT_EQUAL(aligned_mean(a, "model.head", 1, 1, TM_EV_EXIT, TM_SLOT_OUT, &why),
				141);
	}
	tm_reader_close(rr);
	tm_align_free(a);
}

static void test_measures(void)
{
	float fa[3] = { 1, 2, 3 }, fb[3] = { 1, 2, 3.5f };
	uint16_t bf[3] = { 0x3f80, 0x4000, 0x4040 };        /* bf16 1, 2, 3 */
	struct tm_tensor a = { 0 }, b = { 0 }, c = { 0 };
	struct tm_contents_diff d;

	CU_ASSERT_EQUAL(tm_reldiff(0, 0), 0);
	CU_ASSERT_EQUAL(tm_reldiff(2, 1), 0.5);
	CU_ASSERT_EQUAL(tm_reldiff(-1, 1), 2);
	CU_ASSERT(isnan(tm_reldiff(NAN, 1)));
	CU_ASSERT(isinf(tm_reldiff(INFINITY, 1)));
	CU_ASSERT_EQUAL(tm_reldiff(INFINITY, INFINITY), 0);
	a.dtype = b.dtype = TM_DT_F32;
	a.rank = b.rank = c.rank = 1;
	a.shape[0] = b.shape[0] = c.shape[0] = 3;
	a.payload = fa;
	b.payload = fb;
	a.payload_len = b.payload_len = sizeof(fa);
	c.dtype = TM_DT_BF16;
	c.payload = bf;
	c.payload_len = sizeof(bf);
	CU_ASSERT_EQUAL(tm_contents_diff(&a, &c, &d), TM_OK);   /* f32 against bf16 */
	CU_ASSERT_EQUAL(d.maxabsdiff, 0);
	CU_ASSERT_EQUAL(d.relerr, 0);
	CU_ASSERT_DOUBLE_EQUAL(d.cosine, 1, 1e-12);
	CU_ASSERT_EQUAL(tm_contents_diff(&a, &b, &d), TM_OK);
	CU_ASSERT_EQUAL(d.maxabsdiff, 0.5);
	/* a NaN on one side is as far apart as can be */
	fb[1] = NAN;
	CU_ASSERT_EQUAL(tm_contents_diff(&a, &b, &d), TM_OK);
	CU_ASSERT(isinf(d.maxabsdiff) && isinf(d.relerr) && isnan(d.cosine));
	CU_ASSERT_EQUAL(d.nonfinite, 1);
	/* the same infinity on both is not */
	fa[1] = fb[1] = INFINITY;
	CU_ASSERT_EQUAL(tm_contents_diff(&a, &b, &d), TM_OK);
	CU_ASSERT_EQUAL(d.maxabsdiff, 0.5);
	/* sizes differ, contents missing, short contents */
	b.shape[0] = 2;
	CU_ASSERT_EQUAL(tm_contents_diff(&a, &b, &d), TM_ERR_INVALID_ARG);
	b.shape[0] = 3;
	b.payload_len = 4;
	CU_ASSERT_EQUAL(tm_contents_diff(&a, &b, &d), TM_ERR_NOT_FOUND);
	b.payload = NULL;
	CU_ASSERT_EQUAL(tm_contents_diff(&a, &b, &d), TM_ERR_NOT_FOUND);
	b.payload = fb;
	b.payload_len = sizeof(fb);
	b.dtype = TM_DT_C64;
	CU_ASSERT_EQUAL(tm_contents_diff(&a, &b, &d), TM_ERR_UNSUPPORTED);
}

/* ------------------------------------------------------------- by request */

/*
 * A serving recording: per step one EXIT of "model" whose mean is the step
 * number, annotated with the step's request ids ("" for none); a step of
 * several requests has each one's rows too (out[rJ]), of mean step +
 * (J + 1) / 10.
 */
static void write_served(const char *path, const char *const *steps, unsigned nsteps)
{
	struct tm_writer_opts o;
	struct tm_run_meta meta = { 0 };
	struct tm_node n = { 0 };
	tm_writer *w;
	uint32_t id;
	unsigned s;

	tm_writer_opts_default(&o);
	o.chunk_bytes = 256;
	CU_ASSERT_EQUAL_FATAL(tm_writer_open(path, &o, &w), TM_OK);
	meta.probe_kind = "vllm";
	meta.rank = -1;
	CU_ASSERT_EQUAL(tm_writer_meta(w, &meta), TM_OK);
	n.address = "model";
	n.type = "M";
	n.parent = TM_NODE_NONE;
	CU_ASSERT_EQUAL(tm_writer_node(w, &n, &id), TM_OK);
	for (s = 0; s < nsteps; s++) {
		struct tm_event e = { 0 };
		struct tm_tensor t[9];
		char buf[64], *save = NULL, *v;
		const char *vals[8];
		struct tm_annot an = { 0 };
		unsigned j;

		snprintf(buf, sizeof(buf), "%s", steps[s]);
		for (v = strtok_r(buf, ",", &save); v && an.nvalues < 8; v = strtok_r(NULL, ",", &save))
			vals[an.nvalues++] = v;
		if (an.nvalues) {
			an.seq = s;
			an.step = s;
			an.time_ns = s;
			an.key = "request";
			an.count = an.nvalues;
			an.values = vals;
			CU_ASSERT_EQUAL(tm_writer_annot(w, &an), TM_OK);
		}
		e.seq = s;
		e.step = s;
		e.kind = TM_EV_EXIT;
		e.phase = TM_PHASE_FWD;
		e.level = 2;
		e.node = id;
		e.call = 1;
		e.time_ns = s;
		e.ntensors = an.nvalues > 1 ? 1 + an.nvalues : 1;
		e.tensors = t;
		memset(t, 0, sizeof(t));
		for (j = 0; j < e.ntensors; j++) {
			t[j].slot.kind = TM_SLOT_OUT;
			if (j)
				t[j].slot = tm_slot_row_of(t[0].slot, j - 1);
			t[j].dtype = TM_DT_F32;
			t[j].have = TM_STAT_BIT(TM_STAT_MEAN);
			t[j].stat[TM_STAT_MEAN] = s + j / 10.0;
		}
		CU_ASSERT_EQUAL(tm_writer_event(w, &e), TM_OK);
	}
	CU_ASSERT_EQUAL(tm_writer_close(w), TM_OK);
}

/* The run's steps, as the run's recording would answer them. */
static const char *const run_steps[] = {
	"",             /* 0: warm-up, as the reference's 0 */
	"",             /* 1: warm-up where the reference serves a, b */
	"a,b",          /* 2: a's and b's first forward: the reference's 1 */
	"b,a",          /* 3: their second, in another order: 2 */
	"c",            /* 4: c alone, as in the reference's 3 */
	"d",            /* 5: d, which the reference served with c */
	"c",            /* 6: c's second, served with d there */
	"e",            /* 7: a request the reference never saw */
	"a,b",          /* 8: their third: 6 (the reference's 5 between) */
};
static struct tm_annot run_an;
static const char *run_vals[8];
static char run_buf[64];
static unsigned run_calls;

static const struct tm_annot *run_requests(void *user, const struct tm_event *ev, uint64_t step)
{
	char *save = NULL, *v;

	(void)user;
	(void)ev;
	run_calls++;
	if (step >= sizeof(run_steps) / sizeof(run_steps[0]) || !run_steps[step][0])
		return NULL;
	memset(&run_an, 0, sizeof(run_an));
	snprintf(run_buf, sizeof(run_buf), "%s", run_steps[step]);
	for (v = strtok_r(run_buf, ",", &save); v && run_an.nvalues < 8;
	     v = strtok_r(NULL, ",", &save))
		run_vals[run_an.nvalues++] = v;
	run_an.key = "request";
	run_an.step = step;
	run_an.count = run_an.nvalues;
	run_an.values = run_vals;
	return &run_an;
}

/* The reference step run step st aligns with (its mean), -1: none. */
static double served_step(tm_align *a, uint64_t st, uint32_t *why)
{
	struct tm_tensor t = { 0 };
	struct tm_event e = { 0 };
	const struct tm_event *ref;
	int rc;

	t.slot.kind = TM_SLOT_OUT;
	e.step = st;
	e.call = 1;
	e.kind = TM_EV_EXIT;
	e.ntensors = 1;
	e.tensors = &t;
	*why = 0;
	rc = tm_align_event(a, "model", &e, &ref, why);
	if (rc)
		return rc == TM_ERR_NOT_FOUND ? -1 : -2;
	return tm_event_tensor(ref, t.slot)->stat[TM_STAT_MEAN];
}

static void test_by_request(void)
{
	static const char *const ref_steps[] = {
		"", "a,b", "a,b", "c", "c,d", "x", "a,b",
	};
	const char *ref = tmp_path("served.tmrun");
	tm_align *a;
	uint32_t why;
	char words[64];

	write_served(ref, ref_steps, 7);
	a = open_align(ref, NULL);
	CU_ASSERT_EQUAL(tm_align_by_requests(a), 0);
	CU_ASSERT_EQUAL(tm_align_set_requests(a, run_requests, NULL), TM_OK);
	CU_ASSERT_EQUAL(tm_align_by_requests(a), 1);
	/* asked out of order: a request's forwards count from step 0 */
	CU_ASSERT_EQUAL(served_step(a, 3, &why), 2);
	CU_ASSERT_EQUAL(served_step(a, 0, &why), 0);
	CU_ASSERT_EQUAL(served_step(a, 1, &why), -1);
	CU_ASSERT_EQUAL(why, TM_REF_BATCH);
	CU_ASSERT_EQUAL(tm_tql_reason_format(why, words, sizeof(words)), TM_OK);
	CU_ASSERT_STRING_EQUAL(words, "batched differently");
	CU_ASSERT_EQUAL(served_step(a, 2, &why), 1);
	CU_ASSERT_EQUAL(served_step(a, 4, &why), 3);
	CU_ASSERT_EQUAL(served_step(a, 5, &why), -1);
	CU_ASSERT_EQUAL(why, TM_REF_BATCH);
	CU_ASSERT_EQUAL(served_step(a, 6, &why), -1);
	CU_ASSERT_EQUAL(why, TM_REF_BATCH);
	CU_ASSERT_EQUAL(served_step(a, 7, &why), -1);
	CU_ASSERT_EQUAL(why, TM_REF_BATCH);
	CU_ASSERT_EQUAL(served_step(a, 8, &why), 6);
	/* each run step's ids are asked for once */
	CU_ASSERT_EQUAL(run_calls, 9);
	CU_ASSERT_EQUAL(served_step(a, 2, &why), 1);
	CU_ASSERT_EQUAL(run_calls, 9);
	/* a reference without request ids: by step */
	tm_align_free(a);
	write_ref(tmp_path("plain.tmrun"), ref_nodes, 5, 4, -1, 0);
	a = open_align(tmp_path("plain.tmrun"), NULL);
	CU_ASSERT_EQUAL(tm_align_set_requests(a, run_requests, NULL), TM_OK);
	CU_ASSERT_EQUAL(served_step(a, 3, &why), 301);
	tm_align_free(a);
	/* by step, the same recordings part at the run's warm-up */
	a = open_align(ref, NULL);
	CU_ASSERT_EQUAL(served_step(a, 2, &why), 2);
	CU_ASSERT_EQUAL(tm_align_set_requests(a, run_requests, NULL), TM_ERR_INVALID_ARG);
	tm_align_free(a);
}

/* The mean of the reference tensor of run step st's tensor in slot
 * (tm_align_tensor), -1: none. */
static double served_tensor(tm_align *a, uint64_t st, struct tm_slot slot, uint32_t *why)
{
	struct tm_tensor t = { 0 };
	struct tm_event e = { 0 };
	const struct tm_event *ref;
	struct tm_slot rs;
	int rc;

	t.slot = slot;
	e.step = st;
	e.call = 1;
	e.kind = TM_EV_EXIT;
	e.ntensors = 1;
	e.tensors = &t;
	*why = 0;
	rc = tm_align_tensor(a, "model", &e, slot, &ref, &rs, why);
	if (rc)
		return rc == TM_ERR_NOT_FOUND ? -1 : -2;
	return tm_event_tensor(ref, rs) ? tm_event_tensor(ref, rs)->stat[TM_STAT_MEAN] : -3;
}

static void test_by_request_rows(void)
{
	/* a and b served one at a time, then c and d together */
	static const char *const alone[] = { "", "a", "b", "b", "a", "c,d", "x", "c,d" };
	struct tm_slot out = { TM_SLOT_OUT, 0 };
	struct tm_slot r0 = tm_slot_row_of(out, 0), r1 = tm_slot_row_of(out, 1);
	const char *ref = tmp_path("alone.tmrun");
	char words[32];
	tm_align *a;
	uint32_t why;

	CU_ASSERT(tm_slot_is_row(r1));
	CU_ASSERT(!tm_slot_is_row(out));
	CU_ASSERT_EQUAL(tm_slot_row(r1), 1);
	CU_ASSERT_EQUAL(tm_slot_row_base(r1).index, 0);
	CU_ASSERT_EQUAL(tm_slot_format(r1, words, sizeof(words)), TM_OK);
	CU_ASSERT_STRING_EQUAL(words, "out[r1]");
	CU_ASSERT_EQUAL(tm_slot_format(tm_slot_row_of((struct tm_slot){ TM_SLOT_IN, 2 }, 5),
				       words, sizeof(words)), TM_OK);
	CU_ASSERT_STRING_EQUAL(words, "in.2[r5]");
	write_served(ref, alone, 8);
	a = open_align(ref, NULL);
	CU_ASSERT_EQUAL(tm_align_set_requests(a, run_requests, NULL), TM_OK);
	/* run step 2 served a and b together: the batch has no reference,
	 * a's rows are a's first forward (step 1), b's b's (step 2) */
	CU_ASSERT_EQUAL(served_tensor(a, 2, out, &why), -1);
	CU_ASSERT_EQUAL(why, TM_REF_BATCH);
	CU_ASSERT_EQUAL(served_tensor(a, 2, r0, &why), 1);
	CU_ASSERT_EQUAL(served_tensor(a, 2, r1, &why), 2);
	/* step 3 has them as b, a: b's second forward is step 3, a's 4 */
	CU_ASSERT_EQUAL(served_tensor(a, 3, r0, &why), 3);
	CU_ASSERT_EQUAL(served_tensor(a, 3, r1, &why), 4);
	/* c alone, d alone: their rows of the reference's batch (step 5) */
	CU_ASSERT_EQUAL(served_tensor(a, 4, out, &why), 5.1);
	CU_ASSERT_EQUAL(served_tensor(a, 5, out, &why), 5.2);
	/* c's second forward (step 6) was c, d's second there (step 7) */
	CU_ASSERT_EQUAL(served_tensor(a, 6, out, &why), 7.1);
	/* a request the reference never served */
	CU_ASSERT_EQUAL(served_tensor(a, 7, out, &why), -1);
	CU_ASSERT_EQUAL(why, TM_REF_BATCH);
	/* a row the run does not have a request for */
	CU_ASSERT_EQUAL(served_tensor(a, 2, tm_slot_row_of(out, 5), &why), -1);
	tm_align_free(a);

	/* the same batch as the reference's: a request's rows are its rows
	 * there, wherever the reference put it */
	{
		static const char *const same[] = { "", "", "a,b", "a,b" };

		write_served(ref, same, 4);
		a = open_align(ref, NULL);
		CU_ASSERT_EQUAL(tm_align_set_requests(a, run_requests, NULL), TM_OK);
		CU_ASSERT_EQUAL(served_tensor(a, 2, out, &why), 2);
		CU_ASSERT_EQUAL(served_tensor(a, 2, r0, &why), 2.1);
		/* run step 3 is b, a; the reference's a, b */
		CU_ASSERT_EQUAL(served_tensor(a, 3, r0, &why), 3.2);
		CU_ASSERT_EQUAL(served_tensor(a, 3, r1, &why), 3.1);
		tm_align_free(a);
	}
}

int main(void)
{
	static const struct tm_test_case cases[] = {
		TM_TEST(test_map_rules), TM_TEST(test_map_errors), TM_TEST(test_align),
		TM_TEST(test_align_map_and_unmatched), TM_TEST(test_prefetch),
		TM_TEST(test_contents), TM_TEST(test_by_request), TM_TEST(test_by_request_rows),
		TM_TEST(test_measures), { NULL, NULL }
	};
	char cmd[128];
	int rc;

	if (!mkdtemp(tmpdir))
		return 99;
	rc = tm_test_run("compare", cases);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	if (system(cmd) != 0)
		rc = rc ? rc : 1;
	return rc;
}
