/*
 * test_tmrun.c -- the .tmrun writer, reader and recovery, as a user of a
 * trace meets them: what was written reads back, seeks land where a linear
 * scan says, a killed writer's file opens and recovers, and a damaged or
 * truncated file gives an error code and its readable prefix, never a crash.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tensormorph.h"
#include "tm-test.h"

static char tmpdir[] = "/tmp/tm-test-tmrun-XXXXXX";

static char *tmp_path(const char *name)
{
	static char buf[4][256];
	static int k;

	k = (k + 1) % 4;
	snprintf(buf[k], sizeof(buf[k]), "%s/%s", tmpdir, name);
	return buf[k];
}

/* Deterministic content: event i is on node i % nnodes, step i / per_step. */
struct gen {
	unsigned nnodes;
	uint64_t per_step;
	uint64_t gap_every;     /* every gap_every-th seq starts a 3-seq gap */
};

static void gen_event(const struct gen *g, uint64_t seq, struct tm_event *e,
		      struct tm_tensor *t)
{
	memset(e, 0, sizeof(*e));
	memset(t, 0, sizeof(*t));
	e->seq = seq;
	e->step = seq / g->per_step;
	e->phase = (seq / 7) % 2;
	e->kind = seq % 2 ? TM_EV_EXIT : TM_EV_ENTER;
	e->level = 1;
	e->node = (uint32_t)(seq % g->nnodes);
	e->call = 1;
	e->time_ns = seq * 1000 + 17;
	e->start_ns = seq * 1000;
	e->end_ns = e->time_ns;
	e->ntensors = 1;
	e->tensors = t;
	t->slot.kind = TM_SLOT_OUT;
	t->dtype = TM_DT_F32;
	t->rank = 2;
	t->shape[0] = 4;
	t->shape[1] = 64;
	t->have = TM_STATS_L1_MASK;
	t->stat[TM_STAT_NUMEL] = 256;
	t->stat[TM_STAT_NAN_COUNT] = seq % 1000 == 999 ? 3 : 0;
	t->stat[TM_STAT_MEAN] = (double)seq * 0.5;
	t->stat[TM_STAT_MAX] = (double)(seq % 97);
}

static void add_nodes(tm_writer *w, unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++) {
		struct tm_node node = { 0 };
		char addr[64];
		uint32_t id;

		if (i == 0)
			snprintf(addr, sizeof(addr), "model");
		else
			snprintf(addr, sizeof(addr), "model.layers.%u", i - 1);
		node.address = addr;
		node.type = i ? "Block" : "Model";
		node.parent = i ? 0 : TM_NODE_NONE;
		node.depth = i ? 1 : 0;
		node.file = "model.py";
		node.line = 10 + i;
		CU_ASSERT_EQUAL(tm_writer_node(w, &node, &id), TM_OK);
		CU_ASSERT_EQUAL(id, i);
	}
}

/* Writes seqs [0, n) with gaps; returns the writer still open if keep_open. */
static tm_writer *write_trace(const char *path, const struct gen *g, uint64_t n,
			      size_t chunk_bytes, int keep_open)
{
	struct tm_writer_opts o;
	struct tm_run_meta m = { 0 };
	tm_writer *w;
	uint64_t seq;

	tm_writer_opts_default(&o);
	o.chunk_bytes = chunk_bytes;
	CU_ASSERT_EQUAL_FATAL(tm_writer_open(path, &o, &w), TM_OK);
	m.probe_kind = "synthetic";
	m.default_level = 1;
	m.rank = -1;
	m.host = "testhost";
	CU_ASSERT_EQUAL(tm_writer_meta(w, &m), TM_OK);
	add_nodes(w, g->nnodes);
	for (seq = 0; seq < n; seq++) {
		struct tm_event e;
		struct tm_tensor t;

		if (g->gap_every && seq % g->gap_every == g->gap_every - 1 && seq + 3 < n) {
			struct tm_gap gap = { seq, seq + 2, 3, TM_GAP_BACKPRESSURE,
					      seq * 1000, seq / g->per_step };

			CU_ASSERT_EQUAL(tm_writer_gap(w, &gap), TM_OK);
			seq += 2;
			continue;
		}
		gen_event(g, seq, &e, &t);
		if (tm_writer_event(w, &e) != TM_OK) {
			CU_FAIL("tm_writer_event");
			break;
		}
	}
	if (keep_open)
		return w;
	CU_ASSERT_EQUAL(tm_writer_close(w), TM_OK);
	return NULL;
}

/* The seq a record covers first (events: seq, gaps: first_seq). */
static uint64_t rec_seq(const struct tm_record *r)
{
	return r->type == TM_REC_GAP ? r->u.gap.first_seq :
	       r->type == TM_REC_EVENT ? r->u.event.seq : r->u.crash.seq;
}

static void check_event(const struct gen *g, const struct tm_record *r)
{
	struct tm_event e;
	struct tm_tensor t;

	CU_ASSERT_EQUAL_FATAL(r->type, TM_REC_EVENT);
	gen_event(g, r->u.event.seq, &e, &t);
	CU_ASSERT_EQUAL(r->u.event.step, e.step);
	CU_ASSERT_EQUAL(r->u.event.node, e.node);
	CU_ASSERT_EQUAL(r->u.event.time_ns, e.time_ns);
	CU_ASSERT_EQUAL(r->u.event.kind, e.kind);
	CU_ASSERT_EQUAL_FATAL(r->u.event.ntensors, 1);
	CU_ASSERT_EQUAL(r->u.event.tensors[0].stat[TM_STAT_MEAN], t.stat[TM_STAT_MEAN]);
	CU_ASSERT_EQUAL(r->u.event.tensors[0].shape[1], 64);
}

static void test_roundtrip_forward_backward(void)
{
	struct gen g = { 9, 100, 500 };
	const char *p = tmp_path("rt.tmrun");
	const struct tm_summary *s;
	const struct tm_run_meta *m;
	struct tm_record rec;
	tm_reader *r;
	uint64_t expect = 0, count = 0;
	char *detail;

	write_trace(p, &g, 20000, 4096, 0);
	CU_ASSERT_EQUAL_FATAL(tm_reader_open(p, 0, &r, &detail), TM_OK);
	s = tm_reader_summary(r);
	CU_ASSERT(s->indexed);
	CU_ASSERT(s->complete);
	CU_ASSERT(!s->damaged);
	CU_ASSERT(s->nchunks > 10);
	CU_ASSERT_EQUAL(s->first_seq, 0);
	CU_ASSERT_EQUAL(s->last_seq, 19999);
	CU_ASSERT_EQUAL(s->last_step, 199);
	CU_ASSERT_EQUAL(s->ngaps, 20000 / 500 - 1);  /* none at the very end */
	CU_ASSERT_EQUAL(s->nevents, 20000 - 3 * (20000 / 500 - 1));
	m = tm_reader_meta(r);
	CU_ASSERT_PTR_NOT_NULL_FATAL(m);
	CU_ASSERT_STRING_EQUAL(m->probe_kind, "synthetic");
	CU_ASSERT_STRING_EQUAL(m->host, "testhost");
	CU_ASSERT_EQUAL(tm_nodetab_count(tm_reader_nodes(r)), 9);
	CU_ASSERT_STRING_EQUAL(tm_nodetab_get(tm_reader_nodes(r), 3)->address, "model.layers.2");
	CU_ASSERT_EQUAL(tm_nodetab_get(tm_reader_nodes(r), 3)->line, 13);

	/* forward: seqs tile [0, 20000) exactly, gaps included */
	while (tm_reader_next(r, &rec) == TM_OK) {
		CU_ASSERT_EQUAL_FATAL(rec_seq(&rec), expect);
		if (rec.type == TM_REC_GAP) {
			CU_ASSERT_EQUAL(rec.u.gap.reason, TM_GAP_BACKPRESSURE);
			expect = rec.u.gap.last_seq + 1;
		} else {
			check_event(&g, &rec);
			expect++;
		}
		count++;
	}
	CU_ASSERT_EQUAL(expect, 20000);
	CU_ASSERT_EQUAL(count, s->nevents + s->ngaps);
	CU_ASSERT_EQUAL(tm_reader_next(r, &rec), TM_ERR_END);

	/* backward from the end gives the same records in reverse */
	while (tm_reader_prev(r, &rec) == TM_OK) {
		uint64_t last = rec.type == TM_REC_GAP ? rec.u.gap.last_seq : rec.u.event.seq;

		CU_ASSERT_EQUAL_FATAL(last + 1, expect);
		expect = rec_seq(&rec);
		count--;
	}
	CU_ASSERT_EQUAL(expect, 0);
	CU_ASSERT_EQUAL(count, 0);
	CU_ASSERT_EQUAL(tm_reader_prev(r, &rec), TM_ERR_END);

	/* direction changes in the middle of a chunk */
	CU_ASSERT_EQUAL(tm_reader_seek_seq(r, 1234), TM_OK);
	CU_ASSERT_EQUAL(tm_reader_next(r, &rec), TM_OK);
	CU_ASSERT_EQUAL(rec_seq(&rec), 1234);
	CU_ASSERT_EQUAL(tm_reader_prev(r, &rec), TM_OK);
	CU_ASSERT_EQUAL(rec_seq(&rec), 1234);
	CU_ASSERT_EQUAL(tm_reader_prev(r, &rec), TM_OK);
	CU_ASSERT_EQUAL(rec_seq(&rec), 1233);
	tm_reader_close(r);
}

/* Seek targets agree with a linear scan, with and without the index. */
static void test_seek_matches_linear_scan(void)
{
	struct gen g = { 5, 37, 211 };
	const char *p = tmp_path("seek.tmrun");
	uint64_t n = 30000, *seqs, *steps, *times;
	size_t nrec = 0, i, cap = 40000;
	unsigned flags[2] = { 0, TM_READER_NO_INDEX }, f, seed = 7;
	struct tm_record rec;
	tm_reader *r;

	write_trace(p, &g, n, 2048, 0);
	seqs = malloc(cap * sizeof(*seqs));
	steps = malloc(cap * sizeof(*steps));
	times = malloc(cap * sizeof(*times));
	CU_ASSERT_EQUAL_FATAL(tm_reader_open(p, 0, &r, NULL), TM_OK);
	while (tm_reader_next(r, &rec) == TM_OK && nrec < cap) {
		seqs[nrec] = rec.type == TM_REC_GAP ? rec.u.gap.last_seq : rec.u.event.seq;
		steps[nrec] = rec.type == TM_REC_GAP ? rec.u.gap.step : rec.u.event.step;
		times[nrec] = rec.type == TM_REC_GAP ? rec.u.gap.time_ns : rec.u.event.time_ns;
		nrec++;
	}
	tm_reader_close(r);

	for (f = 0; f < 2; f++) {
		CU_ASSERT_EQUAL_FATAL(tm_reader_open(p, flags[f], &r, NULL), TM_OK);
		CU_ASSERT_EQUAL(tm_reader_summary(r)->indexed, f == 0);
		for (i = 0; i < 300; i++) {
			uint64_t target;
			size_t want;
			int kind = (int)(i % 3);

			seed = seed * 1103515245u + 12345u;
			target = (seed >> 8) % (n + 50);
			if (kind == 1)
				target /= g.per_step;
			if (kind == 2)
				target *= 1000;
			for (want = 0; want < nrec; want++) {
				uint64_t v = kind == 0 ? seqs[want] : kind == 1 ? steps[want] : times[want];
				if (v >= target)
					break;
			}
			int err = kind == 0 ? tm_reader_seek_seq(r, target) :
				  kind == 1 ? tm_reader_seek_step(r, target) :
					      tm_reader_seek_time(r, target);

			CU_ASSERT_EQUAL(err, TM_OK);
			if (want == nrec) {
				CU_ASSERT_EQUAL(tm_reader_next(r, &rec), TM_ERR_END);
			} else {
				CU_ASSERT_EQUAL_FATAL(tm_reader_next(r, &rec), TM_OK);
				CU_ASSERT_EQUAL(rec.type == TM_REC_GAP ? rec.u.gap.last_seq
						: rec.u.event.seq, seqs[want]);
			}
		}
		tm_reader_close(r);
	}
	free(seqs);
	free(steps);
	free(times);
}

static void test_filter_by_pattern(void)
{
	struct gen g = { 9, 100, 0 };
	const char *p = tmp_path("filter.tmrun");
	struct tm_record rec;
	tm_address *a;
	tm_reader *r;
	unsigned nev = 0;

	write_trace(p, &g, 900, 1024, 0);
	CU_ASSERT_EQUAL_FATAL(tm_reader_open(p, 0, &r, NULL), TM_OK);
	CU_ASSERT_EQUAL_FATAL(tm_address_parse("model.layers.3", &a, NULL, NULL), TM_OK);
	CU_ASSERT_EQUAL(tm_reader_set_filter(r, a), TM_OK);
	while (tm_reader_next(r, &rec) == TM_OK) {
		CU_ASSERT_EQUAL(rec.u.event.node, 4);
		nev++;
	}
	CU_ASSERT_EQUAL(nev, 100);
	nev = 0;
	while (tm_reader_prev(r, &rec) == TM_OK)
		nev++;
	CU_ASSERT_EQUAL(nev, 100);
	CU_ASSERT_EQUAL(tm_reader_set_filter(r, NULL), TM_OK);
	nev = 0;
	while (tm_reader_next(r, &rec) == TM_OK)
		nev++;
	CU_ASSERT_EQUAL(nev, 900);
	tm_address_free(a);
	tm_reader_close(r);
}

static long file_size(const char *p)
{
	FILE *f = fopen(p, "rb");
	long n;

	if (!f)
		return -1;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fclose(f);
	return n;
}

static uint8_t *slurp(const char *p, long *n)
{
	FILE *f = fopen(p, "rb");
	uint8_t *b;

	*n = file_size(p);
	b = malloc((size_t)*n);
	CU_ASSERT_FATAL(f && b && fread(b, 1, (size_t)*n, f) == (size_t)*n);
	fclose(f);
	return b;
}

static void spit(const char *p, const uint8_t *b, long n)
{
	FILE *f = fopen(p, "wb");

	CU_ASSERT_FATAL(f && fwrite(b, 1, (size_t)n, f) == (size_t)n);
	fclose(f);
}

/*
 * A small file cut at every byte offset: it either fails to open with a
 * clear error, or opens and yields a prefix of the original records.
 */
static void test_truncated_at_every_offset(void)
{
	struct gen g = { 4, 10, 40 };
	const char *p = tmp_path("small.tmrun"), *q = tmp_path("cut.tmrun");
	uint8_t *all;
	long n, cut;
	unsigned opened = 0;

	write_trace(p, &g, 300, 512, 0);
	all = slurp(p, &n);
	for (cut = 0; cut < n; cut++) {
		struct tm_record rec;
		tm_reader *r;
		char *detail = NULL;
		uint64_t expect = 0;
		int err;

		spit(q, all, cut);
		err = tm_reader_open(q, 0, &r, &detail);
		if (err) {
			CU_ASSERT(err == TM_ERR_TRUNCATED || err == TM_ERR_BAD_MAGIC);
			CU_ASSERT_PTR_NOT_NULL(detail);
			free(detail);
			continue;
		}
		opened++;
		CU_ASSERT(!tm_reader_summary(r)->complete);
		while ((err = tm_reader_next(r, &rec)) == TM_OK) {
			CU_ASSERT_EQUAL(rec_seq(&rec), expect);
			expect = rec.type == TM_REC_GAP ? rec.u.gap.last_seq + 1 : expect + 1;
		}
		CU_ASSERT_EQUAL(err, TM_ERR_END);
		tm_reader_close(r);
	}
	CU_ASSERT(opened > 0);
	free(all);
}

/* Flipped bytes are found by a checksum, wherever they land. */
static void test_flipped_bytes(void)
{
	struct gen g = { 4, 10, 0 };
	const char *p = tmp_path("flip.tmrun"), *q = tmp_path("flipped.tmrun");
	uint8_t *all;
	long n, pos;
	unsigned errors = 0;

	write_trace(p, &g, 400, 1024, 0);
	all = slurp(p, &n);
	for (pos = 0; pos < n; pos += 7) {
		struct tm_record rec;
		tm_reader *r;
		int err;
		unsigned count = 0;

		all[pos] ^= 0x20;
		spit(q, all, n);
		all[pos] ^= 0x20;
		err = tm_reader_open(q, TM_READER_STRICT, &r, NULL);
		if (!err) {
			while ((err = tm_reader_next(r, &rec)) == TM_OK)
				count++;
			tm_reader_close(r);
		}
		/* Either an error, or the damage hit only the index/summary/trailer
		 * and the reader fell back to scanning: all 400 records read. */
		if (err != TM_ERR_END) {
			errors++;
		} else {
			CU_ASSERT_EQUAL(count, 400);
		}
		CU_ASSERT(err == TM_ERR_END || err == TM_ERR_CRC || err == TM_ERR_BAD_MAGIC ||
			  err == TM_ERR_CORRUPT || err == TM_ERR_TRUNCATED ||
			  err == TM_ERR_RESERVED || err == TM_ERR_TOO_LARGE ||
			  err == TM_ERR_UNSUPPORTED || err == TM_ERR_VERSION);
	}
	CU_ASSERT(errors > 0);
	free(all);
}

/* The events an ordinary reader reads before the end or its first error,
 * as a bitmap of seqs below nmax; returns how many. */
static unsigned read_seqs(const char *path, uint8_t *seen, unsigned nmax, int *clean_end)
{
	struct tm_record rec;
	tm_reader *r;
	unsigned count = 0;
	int err;

	memset(seen, 0, nmax);
	*clean_end = 0;
	if (tm_reader_open(path, 0, &r, NULL) != TM_OK)
		return 0;
	while ((err = tm_reader_next(r, &rec)) == TM_OK) {
		if (rec.type == TM_REC_EVENT && rec.u.event.seq < nmax) {
			seen[rec.u.event.seq] = 1;
			count++;
		}
	}
	*clean_end = err == TM_ERR_END;
	tm_reader_close(r);
	return count;
}

/*
 * Issue 25 (F1, F2): whatever single byte is damaged, recovery keeps at
 * least every event the reader reads of the damaged file -- a damaged file
 * header, a chunk header the index still has a copy of, a damaged chunk in
 * the middle (its seqs become a gap, the chunks after it are kept) -- and
 * what it writes reads to the end without an error.  Run on a closed trace
 * and on a killed writer's; every 11th position also in place.
 */
static void flip_every_byte(int closed, long stride)
{
	enum { N = 160 };
	struct gen g = { 4, 10, 0 };
	/* thousands of recoveries, each closing with fsync: on a tmpfs when
	 * there is one, where that costs nothing */
	char shm[] = "/dev/shm/tm-test-flip-XXXXXX";
	int use_shm = mkdtemp(shm) != NULL;
	char pb[64], qb[64], ob[64];
	const char *p = tmp_path("fl.tmrun"), *q = tmp_path("fl-bad.tmrun");
	const char *o = tmp_path("fl-out.tmrun");
	uint8_t *all, before[N], after[N];
	long n, pos;
	unsigned kept_more = 0, rebuilt_header = 0, i;
	tm_writer *w;

	if (use_shm) {
		snprintf(pb, sizeof(pb), "%s/a.tmrun", shm);
		snprintf(qb, sizeof(qb), "%s/b.tmrun", shm);
		snprintf(ob, sizeof(ob), "%s/c.tmrun", shm);
		p = pb;
		q = qb;
		o = ob;
	}
	w = write_trace(p, &g, N, 400, !closed);
	if (w)
		CU_ASSERT_EQUAL(tm_writer_flush(w), TM_OK);
	all = slurp(p, &n);
	if (w)
		tm_writer_abandon(w);
	for (pos = 0; pos < n; pos += pos < 32 ? 1 : stride) {
		char *report = NULL;
		unsigned nb, na;
		int clean, err, in_place = pos % 11 == 0;

		all[pos] ^= 0xff;
		spit(q, all, n);
		all[pos] ^= 0xff;
		nb = read_seqs(q, before, N, &clean);
		err = tm_recover(q, in_place ? q : o, &report);
		if (nb) {
			CU_ASSERT_EQUAL(err, TM_OK);
			if (err != TM_OK)
				fprintf(stderr, "flip at %ld: %s\n", pos, report ? report : "");
		}
		CU_ASSERT_PTR_NOT_NULL(report);
		free(report);
		if (err != TM_OK) {
			/* nothing written: an in-place original is untouched */
			if (in_place)
				CU_ASSERT_EQUAL(read_seqs(q, after, N, &clean), nb);
			continue;
		}
		na = read_seqs(in_place ? q : o, after, N, &clean);
		CU_ASSERT(clean);
		CU_ASSERT(na >= nb);
		for (i = 0; i < N; i++)
			if (before[i] && !after[i]) {
				CU_FAIL("recovery lost an event the reader read");
				fprintf(stderr, "flip at %ld: seq %u lost\n", pos, i);
				break;
			}
		kept_more += na > nb;
		rebuilt_header += pos < 32 && na == N;
	}
	CU_ASSERT(kept_more > 0);
	/* a damaged file header loses nothing (F1) */
	CU_ASSERT_EQUAL(rebuilt_header, 32);
	free(all);
	if (use_shm) {
		unlink(p);
		unlink(q);
		unlink(o);
		rmdir(shm);
	}
}

static void test_recover_every_flipped_byte_closed(void)
{
	flip_every_byte(1, 1);
}

static void test_recover_every_flipped_byte_killed(void)
{
	flip_every_byte(0, 5);	/* the same code paths, fewer times */
}

/*
 * Issue 25 (F3): a damaged INDEX, SUMMARY or trailer is named as such (the
 * writer did finish, no event is lost); recovery names the damaged part.
 */
static void test_index_damage_named(void)
{
	struct gen g = { 4, 10, 0 };
	const char *p = tmp_path("named.tmrun"), *q = tmp_path("named-bad.tmrun");
	const struct tm_summary *s;
	uint8_t *all, tr[32];
	long n;
	tm_reader *r;
	char *report = NULL;
	uint64_t index_off, summary_off;
	struct { uint64_t off; int why; const char *words; } cases[3];
	unsigned k;

	write_trace(p, &g, 300, 512, 0);
	all = slurp(p, &n);
	memcpy(tr, all + n - 32, 32);
	index_off = (uint64_t)tr[0] | (uint64_t)tr[1] << 8 | (uint64_t)tr[2] << 16 |
		    (uint64_t)tr[3] << 24;
	summary_off = (uint64_t)tr[8] | (uint64_t)tr[9] << 8 | (uint64_t)tr[10] << 16 |
		      (uint64_t)tr[11] << 24;
	cases[0].off = index_off + 88 + 1;       /* INDEX payload */
	cases[0].why = TM_INDEX_INDEX;
	cases[0].words = "INDEX chunk is damaged";
	cases[1].off = summary_off + 2;          /* SUMMARY header */
	cases[1].why = TM_INDEX_SUMMARY;
	cases[1].words = "SUMMARY chunk is damaged";
	cases[2].off = (uint64_t)n - 32 + 3;     /* trailer */
	cases[2].why = TM_INDEX_TRAILER;
	cases[2].words = "trailer is damaged";
	for (k = 0; k < 3; k++) {
		all[cases[k].off] ^= 0xff;
		spit(q, all, n);
		all[cases[k].off] ^= 0xff;
		CU_ASSERT_EQUAL_FATAL(tm_reader_open(q, 0, &r, NULL), TM_OK);
		s = tm_reader_summary(r);
		CU_ASSERT(!s->indexed);
		CU_ASSERT(!s->damaged);         /* not "events after seq N are lost" */
		CU_ASSERT(s->complete);         /* the writer did finish */
		CU_ASSERT_EQUAL(s->index_damage, cases[k].why);
		CU_ASSERT_EQUAL(s->nevents, 300);
		tm_reader_close(r);
		CU_ASSERT_EQUAL(tm_recover(q, q, &report), TM_OK);
		CU_ASSERT(report && strstr(report, cases[k].words));
		CU_ASSERT(report && !strstr(report, "truncated"));
		free(report);
		report = NULL;
	}
	/* a damaged chunk payload is named by its number and the checksum */
	all[32 + 88 + 5] ^= 0xff;       /* chunk 0's payload */
	spit(q, all, n);
	CU_ASSERT_EQUAL(tm_recover(q, q, &report), TM_OK);
	CU_ASSERT(report && strstr(report, "chunk 0 (META, offset 32): payload checksum mismatch"));
	free(report);
	free(all);
}

/* A chunk header whose CRC is right but whose sizes are absurd. */
static void test_absurd_declared_sizes(void)
{
	const char *p = tmp_path("absurd.tmrun");
	uint8_t hdr[32 + 88];
	struct tm_writer_opts o;
	tm_writer *w;
	tm_reader *r;
	FILE *f;
	uint32_t crc;
	int err;

	tm_writer_opts_default(&o);
	CU_ASSERT_EQUAL_FATAL(tm_writer_open(p, &o, &w), TM_OK);
	tm_writer_abandon(w);  /* just the 32-byte file header */
	f = fopen(p, "rb");
	CU_ASSERT_FATAL(f && fread(hdr, 1, 32, f) == 32);
	fclose(f);
	memset(hdr + 32, 0, 88);
	memcpy(hdr + 32, "TMCK", 4);
	hdr[32 + 4] = 2;   /* EVENTS */
	hdr[32 + 5] = 1;   /* zstd */
	hdr[32 + 8 + 3] = 0xff;   /* stored_len 0xff000000: 4 GiB-ish */
	hdr[32 + 12 + 3] = 0x7f;  /* raw_len */
	crc = tm_crc32c(0, hdr + 32, 84);
	hdr[32 + 84] = (uint8_t)crc;
	hdr[32 + 85] = (uint8_t)(crc >> 8);
	hdr[32 + 86] = (uint8_t)(crc >> 16);
	hdr[32 + 87] = (uint8_t)(crc >> 24);
	spit(p, hdr, sizeof(hdr));
	err = tm_reader_open(p, TM_READER_STRICT, &r, NULL);
	CU_ASSERT_EQUAL(err, TM_ERR_TOO_LARGE);
	/* not strict: the damage ends the readable part, which is empty */
	CU_ASSERT_EQUAL_FATAL(tm_reader_open(p, 0, &r, NULL), TM_OK);
	CU_ASSERT(tm_reader_summary(r)->damaged);
	CU_ASSERT_EQUAL(tm_reader_summary(r)->damage_err, TM_ERR_TOO_LARGE);
	CU_ASSERT_EQUAL(tm_reader_summary(r)->nevents, 0);
	tm_reader_close(r);
}

static void test_not_a_trace(void)
{
	const char *p = tmp_path("text.tmrun");
	tm_reader *r;
	char *detail = NULL;

	spit(p, (const uint8_t *)"hello, this is not a trace at all\n", 34);
	CU_ASSERT_EQUAL(tm_reader_open(p, 0, &r, &detail), TM_ERR_BAD_MAGIC);
	CU_ASSERT_PTR_NULL(r);
	CU_ASSERT(detail && strstr(detail, "not a .tmrun trace"));
	free(detail);
	CU_ASSERT_EQUAL(tm_reader_open(tmp_path("missing.tmrun"), 0, &r, &detail), TM_ERR_IO);
	CU_ASSERT(detail && strstr(detail, "No such file"));
	free(detail);
}

/* A killed writer: no index, readable by scanning, recoverable. */
static void test_killed_writer_and_recover(void)
{
	struct gen g = { 6, 50, 0 };
	const char *p = tmp_path("killed.tmrun"), *q = tmp_path("recovered.tmrun");
	const struct tm_summary *s;
	struct tm_record rec, last;
	tm_writer *w;
	tm_reader *r;
	char *report = NULL;
	uint64_t nread = 0;
	long n;

	w = write_trace(p, &g, 5000, 2048, 1);
	tm_writer_abandon(w);   /* as if killed: the open chunk is lost */
	CU_ASSERT_EQUAL_FATAL(tm_reader_open(p, 0, &r, NULL), TM_OK);
	s = tm_reader_summary(r);
	CU_ASSERT(!s->indexed);
	CU_ASSERT(!s->complete);
	CU_ASSERT(s->nevents > 4000 && s->nevents < 5000);
	tm_reader_close(r);

	/* and with a torn last chunk */
	n = file_size(p);
	CU_ASSERT_EQUAL(truncate(p, n - 100), 0);
	CU_ASSERT_EQUAL(tm_recover(p, q, &report), TM_OK);
	CU_ASSERT_PTR_NOT_NULL(report);
	CU_ASSERT(report && strstr(report, "truncated gap"));
	free(report);
	CU_ASSERT_EQUAL_FATAL(tm_reader_open(q, 0, &r, NULL), TM_OK);
	s = tm_reader_summary(r);
	CU_ASSERT(s->indexed);
	CU_ASSERT(s->complete);
	CU_ASSERT_EQUAL(s->ngaps, 1);
	CU_ASSERT_EQUAL(tm_nodetab_count(tm_reader_nodes(r)), 6);
	memset(&last, 0, sizeof(last));
	while (tm_reader_next(r, &rec) == TM_OK) {
		if (rec.type == TM_REC_EVENT) {
			check_event(&g, &rec);
			CU_ASSERT_EQUAL(rec.u.event.seq, nread);
			nread++;
		}
		last.type = rec.type;
		if (rec.type == TM_REC_GAP)
			last.u.gap = rec.u.gap;
	}
	CU_ASSERT_EQUAL(last.type, TM_REC_GAP);
	CU_ASSERT_EQUAL(last.u.gap.reason, TM_GAP_TRUNCATED);
	CU_ASSERT_EQUAL(last.u.gap.first_seq, nread);
	tm_reader_close(r);

	/* recovering in place works too */
	CU_ASSERT_EQUAL(tm_recover(q, q, NULL), TM_OK);
	CU_ASSERT_EQUAL_FATAL(tm_reader_open(q, 0, &r, NULL), TM_OK);
	CU_ASSERT(tm_reader_summary(r)->complete);
	CU_ASSERT_EQUAL(tm_reader_summary(r)->nevents, nread);
	tm_reader_close(r);
}

/*
 * Annotations (a serving probe's request ids): written before each step's
 * first event, found by step wherever the chunks cut, without moving the
 * cursor or spoiling the record it returned, and kept by recovery.
 */
static void annot_values(uint64_t step, char ids[2][32], const char *vals[2])
{
	snprintf(ids[0], 32, "cmpl-%llu", (unsigned long long)step);
	snprintf(ids[1], 32, "cmpl-%llu", (unsigned long long)step + 1);
	vals[0] = ids[0];
	vals[1] = ids[1];
}

static tm_writer *write_annotated(const char *path, const struct gen *g, uint64_t n)
{
	struct tm_writer_opts o;
	struct tm_run_meta m = { 0 };
	tm_writer *w;
	uint64_t seq;

	tm_writer_opts_default(&o);
	o.chunk_bytes = 1500;
	CU_ASSERT_EQUAL_FATAL(tm_writer_open(path, &o, &w), TM_OK);
	m.probe_kind = "vllm";
	m.rank = -1;
	CU_ASSERT_EQUAL(tm_writer_meta(w, &m), TM_OK);
	add_nodes(w, g->nnodes);
	for (seq = 0; seq < n; seq++) {
		struct tm_event e;
		struct tm_tensor t;

		if (seq % g->per_step == 0) {
			char ids[2][32];
			const char *vals[2];
			struct tm_annot a = { 0 };

			annot_values(seq / g->per_step, ids, vals);
			a.seq = seq;
			a.step = seq / g->per_step;
			a.time_ns = seq * 1000;
			a.key = "request";
			a.values = vals;
			a.nvalues = 2;
			a.count = 3;    /* one id not kept */
			CU_ASSERT_EQUAL(tm_writer_annot(w, &a), TM_OK);
			if (a.step % 2 == 0) {
				a.key = "lora";
				a.nvalues = 1;
				a.count = 1;
				CU_ASSERT_EQUAL(tm_writer_annot(w, &a), TM_OK);
			}
		}
		gen_event(g, seq, &e, &t);
		CU_ASSERT_EQUAL(tm_writer_event(w, &e), TM_OK);
	}
	return w;
}

/* Steps [0, steps) are annotated; with whole, none after them is. */
static void check_annotations(tm_reader *r, uint64_t steps, int whole)
{
	const struct tm_annot *a;
	uint64_t st;
	char ids[2][32];
	const char *vals[2];

	/* backwards: no help from a cache that only looks ahead */
	for (st = steps; st-- > 0;) {
		annot_values(st, ids, vals);
		CU_ASSERT_EQUAL_FATAL(tm_reader_annotation(r, st, "request", &a), TM_OK);
		CU_ASSERT_EQUAL(a->step, st);
		CU_ASSERT_STRING_EQUAL(a->key, "request");
		CU_ASSERT_EQUAL(a->count, 3);
		CU_ASSERT_EQUAL_FATAL(a->nvalues, 2);
		CU_ASSERT_STRING_EQUAL(a->values[0], vals[0]);
		CU_ASSERT_STRING_EQUAL(a->values[1], vals[1]);
		CU_ASSERT_EQUAL(tm_reader_annotation(r, st, "lora", &a),
				st % 2 ? TM_ERR_NOT_FOUND : TM_OK);
	}
	if (whole) {
		CU_ASSERT_EQUAL(tm_reader_annotation(r, steps, "request", &a),
				TM_ERR_NOT_FOUND);
		CU_ASSERT_PTR_NULL(a);
	}
	CU_ASSERT_EQUAL(tm_reader_annotation(r, 3, "nope", &a), TM_ERR_NOT_FOUND);
}

static void test_annotations(void)
{
	struct gen g = { 5, 40, 0 };
	const char *p = tmp_path("annot.tmrun"), *q = tmp_path("annot-rec.tmrun");
	const struct tm_annot *a;
	struct tm_record rec;
	tm_reader *r;
	uint64_t seq = 0, st;

	CU_ASSERT_EQUAL(tm_writer_close(write_annotated(p, &g, 400)), TM_OK);
	CU_ASSERT_EQUAL_FATAL(tm_reader_open(p, 0, &r, NULL), TM_OK);
	CU_ASSERT(tm_reader_summary(r)->nchunks > 20);
	check_annotations(r, 10, 1);
	/* the cursor sees events only, and a lookup leaves its record alone */
	while (tm_reader_next(r, &rec) == TM_OK) {
		CU_ASSERT_EQUAL_FATAL(rec.type, TM_REC_EVENT);
		CU_ASSERT_EQUAL(tm_reader_annotation(r, (seq * 7) % 10, "request", &a), TM_OK);
		CU_ASSERT_EQUAL(rec.u.event.seq, seq);
		check_event(&g, &rec);
		seq++;
	}
	CU_ASSERT_EQUAL(seq, 400);
	/* annotations count in the chunks' steps, and seeking by step still
	 * lands on the step's first event */
	for (st = 0; st < 10; st++) {
		CU_ASSERT_EQUAL(tm_reader_seek_step(r, st), TM_OK);
		CU_ASSERT_EQUAL_FATAL(tm_reader_next(r, &rec), TM_OK);
		CU_ASSERT_EQUAL(rec.u.event.seq, st * g.per_step);
	}
	tm_reader_close(r);
	/* the same without the index (scanned), and after a killed writer's
	 * recovery */
	CU_ASSERT_EQUAL_FATAL(tm_reader_open(p, TM_READER_NO_INDEX, &r, NULL), TM_OK);
	check_annotations(r, 10, 1);
	tm_reader_close(r);
	tm_writer_abandon(write_annotated(p, &g, 400));
	CU_ASSERT_EQUAL(tm_recover(p, q, NULL), TM_OK);
	CU_ASSERT_EQUAL_FATAL(tm_reader_open(q, 0, &r, NULL), TM_OK);
	CU_ASSERT(tm_reader_summary(r)->nevents > 300);
	check_annotations(r, tm_reader_summary(r)->nevents / g.per_step, 0);
	tm_reader_close(r);
}

/* An idle writer still gets its events to disk within max_age. */
static void test_age_flush_thread(void)
{
	struct gen g = { 2, 10, 0 };
	const char *p = tmp_path("age.tmrun");
	struct tm_writer_opts o;
	struct tm_event e;
	struct tm_tensor t;
	tm_writer *w;
	tm_reader *r;
	int i;

	tm_writer_opts_default(&o);
	o.max_age_ns = 50 * 1000 * 1000;
	o.flush_thread = 1;
	CU_ASSERT_EQUAL_FATAL(tm_writer_open(p, &o, &w), TM_OK);
	add_nodes(w, 2);
	for (i = 0; i < 10; i++) {
		gen_event(&g, (uint64_t)i, &e, &t);
		CU_ASSERT_EQUAL(tm_writer_event(w, &e), TM_OK);
	}
	usleep(300 * 1000);
	CU_ASSERT_EQUAL_FATAL(tm_reader_open(p, 0, &r, NULL), TM_OK);
	CU_ASSERT_EQUAL(tm_reader_summary(r)->nevents, 10);
	tm_reader_close(r);
	CU_ASSERT_EQUAL(tm_writer_close(w), TM_OK);
}

/* 1M events through the whole path, and the emergency flush. */
static void test_million_events(void)
{
	struct gen g = { 64, 1000, 0 };
	const char *p = tmp_path("big.tmrun");
	struct tm_record rec;
	tm_writer *w;
	tm_reader *r;
	uint64_t n = 0;

	w = write_trace(p, &g, 1000000, 1u << 20, 1);
	CU_ASSERT_EQUAL(tm_writer_emergency_flush(w), TM_OK);
	tm_writer_abandon(w);
	CU_ASSERT_EQUAL_FATAL(tm_reader_open(p, 0, &r, NULL), TM_OK);
	CU_ASSERT_EQUAL(tm_reader_summary(r)->nevents, 1000000);
	while (tm_reader_next(r, &rec) == TM_OK) {
		if (rec.u.event.seq != n) {
			CU_FAIL("seq out of order");
			break;
		}
		n++;
	}
	CU_ASSERT_EQUAL(n, 1000000);
	CU_ASSERT_EQUAL(tm_reader_seek_step(r, 777), TM_OK);
	CU_ASSERT_EQUAL(tm_reader_next(r, &rec), TM_OK);
	CU_ASSERT_EQUAL(rec.u.event.seq, 777000);
	tm_reader_close(r);
}

static int cleanup(void)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd);
}

int main(void)
{
	static const struct tm_test_case cases[] = {
		TM_TEST(test_roundtrip_forward_backward),
		TM_TEST(test_seek_matches_linear_scan),
		TM_TEST(test_filter_by_pattern),
		TM_TEST(test_truncated_at_every_offset),
		TM_TEST(test_flipped_bytes),
		TM_TEST(test_absurd_declared_sizes),
		TM_TEST(test_not_a_trace),
		TM_TEST(test_killed_writer_and_recover),
		TM_TEST(test_recover_every_flipped_byte_closed),
		TM_TEST(test_recover_every_flipped_byte_killed),
		TM_TEST(test_index_damage_named),
		TM_TEST(test_age_flush_thread),
		TM_TEST(test_annotations),
		TM_TEST(test_million_events),
		{ NULL, NULL }
	};
	int rc;

	if (!mkdtemp(tmpdir))
		return 99;
	rc = tm_test_run("tmrun", cases);
	cleanup();
	return rc;
}
