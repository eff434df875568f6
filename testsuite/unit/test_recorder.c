/*
 * test_recorder.c -- the ring between probe and writer: seq numbering, gap
 * records when the ring is full, lossless blocking, stats computed in C,
 * payload copies, and batch validation.  Every trace is read back through
 * the real reader, as tmdb would.
 */
#include "config.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tensormorph.h"
#include "tm-recorder.h"
#include "tm-test.h"

static char path[256];

static const char *tmp_path(const char *name)
{
	snprintf(path, sizeof(path), "test_recorder_%s_%ld.tmrun", name,
		 (long)getpid());
	return path;
}

static tm_recorder *open_rec(const char *name, uint32_t events, int lossless,
			     int manual, uint32_t *node)
{
	struct tm_recorder_opts o;
	tm_recorder *r = NULL;

	tm_recorder_opts_default(&o);
	o.ring_events = events;
	o.lossless = lossless;
	o.manual_drain = manual;
	CU_ASSERT_EQUAL_FATAL(tm_recorder_open(tmp_path(name), &o, &r), TM_OK);
	CU_ASSERT_EQUAL(tm_recorder_node2(r, "model", "Net", "net.py", 3,
					  TM_NODE_NONE, 0, TM_NODE_MODULE, node),
			TM_OK);
	return r;
}

/* A batch of n EXIT events of node, one f32 tensor each (values 0..3 + i). */
static int submit_n(tm_recorder *r, uint32_t node, size_t n, float *data)
{
	struct tm_rec_event *ev = calloc(n, sizeof(*ev));
	struct tm_rec_tensor *t = calloc(n, sizeof(*t));
	size_t i;
	int err;

	for (i = 0; i < n; i++) {
		ev[i].kind = TM_EV_EXIT;
		ev[i].node = node;
		ev[i].call = (uint32_t)i + 1;
		ev[i].level = 1;
		ev[i].ntensors = 1;
		t[i].slot_kind = TM_SLOT_OUT;
		t[i].dtype = TM_DT_F32;
		t[i].rank = 1;
		t[i].shape[0] = 4;
		t[i].numel = 4;
		t[i].level = data ? 1 : 0;
		t[i].data = (uint64_t)(uintptr_t)data;
	}
	err = tm_recorder_submit(r, ev, n, t, n, NULL);
	free(ev);
	free(t);
	return err;
}

struct coverage {
	uint64_t next;          /* next seq expected */
	uint64_t events, gaps, dropped;
	uint32_t reasons;
	int ok;
};

/* Reads the trace back and checks events and gaps tile 0..n-1 in order. */
static struct coverage read_coverage(const char *p)
{
	struct coverage c = { 0, 0, 0, 0, 0, 1 };
	struct tm_record rec;
	tm_reader *rd = NULL;
	char *detail = NULL;

	if (tm_reader_open(p, 0, &rd, &detail) != TM_OK) {
		fprintf(stderr, "open %s: %s\n", p, detail ? detail : "?");
		free(detail);
		c.ok = 0;
		return c;
	}
	while (tm_reader_next(rd, &rec) == TM_OK) {
		if (rec.type == TM_REC_EVENT) {
			if (rec.u.event.seq != c.next)
				c.ok = 0;
			c.next = rec.u.event.seq + 1;
			c.events++;
		} else if (rec.type == TM_REC_GAP) {
			if (rec.u.gap.first_seq != c.next ||
			    rec.u.gap.last_seq < rec.u.gap.first_seq ||
			    rec.u.gap.count != rec.u.gap.last_seq - rec.u.gap.first_seq + 1)
				c.ok = 0;
			c.next = rec.u.gap.last_seq + 1;
			c.gaps++;
			c.dropped += rec.u.gap.count;
			c.reasons |= rec.u.gap.reason;
		}
	}
	tm_reader_close(rd);
	return c;
}

/* Ring of 4: a batch of 10 keeps 4 and drops 6; the next batch first writes
 * the gap (taking a slot), so keeps 3 and drops 7; close writes that gap. */
static void test_tiny_ring_gaps(void)
{
	struct tm_recorder_stats st;
	struct coverage c;
	uint32_t node;
	tm_recorder *r = open_rec("tiny", 4, 0, 1, &node);

	CU_ASSERT_EQUAL(submit_n(r, node, 10, NULL), TM_OK);
	CU_ASSERT_EQUAL(tm_recorder_drain(r), TM_OK);
	CU_ASSERT_EQUAL(submit_n(r, node, 10, NULL), TM_OK);
	tm_recorder_get_stats(r, &st);
	CU_ASSERT_EQUAL(st.next_seq, 20);
	CU_ASSERT_EQUAL(st.events_dropped, 13);
	CU_ASSERT_EQUAL(tm_recorder_close(r), TM_OK);

	c = read_coverage(path);
	CU_ASSERT(c.ok);
	CU_ASSERT_EQUAL(c.next, 20);
	CU_ASSERT_EQUAL(c.events, 7);
	CU_ASSERT_EQUAL(c.gaps, 2);
	CU_ASSERT_EQUAL(c.dropped, 13);
	CU_ASSERT_EQUAL(c.reasons, TM_GAP_BACKPRESSURE);
	unlink(path);
}

/* A drained ring restarts at slot 0 (the same few pages every batch): with
 * a ring of 8 and batches of 3 drained in turn, positions pass the ring's
 * size many times, and the trace still holds every event in order with no
 * gap, each annotation made between batches before the next batch's
 * events. */
static void test_ring_restarts_empty(void)
{
	const char *vals[1] = { "x" };
	const struct tm_annot *an;
	struct tm_recorder_stats st;
	struct coverage c;
	tm_reader *rd = NULL;
	uint32_t node;
	int k;
	tm_recorder *r = open_rec("restart", 8, 0, 1, &node);

	for (k = 0; k < 7; k++) {
		CU_ASSERT_EQUAL(tm_recorder_annotate(r, (uint64_t)k, 0, "k", vals, 1, 1), TM_OK);
		CU_ASSERT_EQUAL(submit_n(r, node, 3, NULL), TM_OK);
		CU_ASSERT_EQUAL(tm_recorder_drain(r), TM_OK);
	}
	tm_recorder_get_stats(r, &st);
	CU_ASSERT_EQUAL(st.next_seq, 21);
	CU_ASSERT_EQUAL(st.events_dropped, 0);
	CU_ASSERT_EQUAL(tm_recorder_close(r), TM_OK);

	c = read_coverage(path);
	CU_ASSERT(c.ok);
	CU_ASSERT_EQUAL(c.events, 21);
	CU_ASSERT_EQUAL(c.gaps, 0);
	CU_ASSERT_EQUAL_FATAL(tm_reader_open(path, 0, &rd, NULL), TM_OK);
	for (k = 0; k < 7; k++) {
		/* annotation k was made before batch k's first event, 3k */
		an = NULL;
		CU_ASSERT_EQUAL(tm_reader_annotation_at(rd, (uint64_t)k, 3 * (uint64_t)k, "k",
							&an), TM_OK);
		CU_ASSERT(an != NULL && an->seq == 3 * (uint64_t)k && an->nvalues == 1 &&
			  strcmp(an->values[0], "x") == 0);
	}
	tm_reader_close(rd);
	unlink(path);
}

/* The writer thread is named in the user's process (top -H, py-spy). */
static void test_writer_thread_named(void)
{
#ifdef __linux__
	uint32_t node;
	tm_recorder *r = open_rec("named", 64, 0, 0, &node);
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	int found = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	while ((de = readdir(d)) != NULL) {
		char p[300], comm[32] = "";
		FILE *f;

		snprintf(p, sizeof(p), "/proc/self/task/%s/comm", de->d_name);
		if ((f = fopen(p, "r")) == NULL)
			continue;
		if (fgets(comm, sizeof(comm), f) && !strcmp(comm, "tm-recorder\n"))
			found = 1;
		fclose(f);
	}
	closedir(d);
	CU_ASSERT(found);
	CU_ASSERT_EQUAL(tm_recorder_close(r), TM_OK);
	unlink(path);
#endif
}

/* With the writer thread racing the producer, whatever is dropped, events
 * and gaps still cover every seq exactly once. */
static void test_threaded_coverage(void)
{
	struct tm_recorder_stats st;
	struct coverage c;
	uint32_t node;
	tm_recorder *r = open_rec("thread", 8, 0, 0, &node);
	int i;

	for (i = 0; i < 200; i++)
		CU_ASSERT_EQUAL(submit_n(r, node, 5, NULL), TM_OK);
	tm_recorder_get_stats(r, &st);
	CU_ASSERT_EQUAL(st.next_seq, 1000);
	CU_ASSERT_EQUAL(tm_recorder_close(r), TM_OK);
	c = read_coverage(path);
	CU_ASSERT(c.ok);
	CU_ASSERT_EQUAL(c.next, 1000);
	CU_ASSERT_EQUAL(c.events + c.dropped, 1000);
	unlink(path);
}

/* Lossless: the producer waits, nothing is dropped. */
static void test_lossless(void)
{
	struct coverage c;
	uint32_t node;
	tm_recorder *r = open_rec("lossless", 4, 1, 0, &node);
	int i;

	for (i = 0; i < 50; i++)
		CU_ASSERT_EQUAL(submit_n(r, node, 10, NULL), TM_OK);
	CU_ASSERT_EQUAL(tm_recorder_close(r), TM_OK);
	c = read_coverage(path);
	CU_ASSERT(c.ok);
	CU_ASSERT_EQUAL(c.events, 500);
	CU_ASSERT_EQUAL(c.gaps, 0);
	unlink(path);

	/* The same with manual drain: the producer drains for itself. */
	r = open_rec("lossless2", 4, 1, 1, &node);
	CU_ASSERT_EQUAL(submit_n(r, node, 30, NULL), TM_OK);
	CU_ASSERT_EQUAL(tm_recorder_close(r), TM_OK);
	c = read_coverage(path);
	CU_ASSERT_EQUAL(c.events, 30);
	CU_ASSERT_EQUAL(c.gaps, 0);
	unlink(path);
}

/* Stats computed in C from the tensor's memory reach the trace. */
static void test_stats_and_payload(void)
{
	float data[4] = { 1.0f, -3.0f, NAN, 2.0f };
	struct tm_rec_event ev;
	struct tm_rec_tensor t[2];
	struct tm_record rec;
	tm_reader *rd = NULL;
	uint32_t node;
	int n = 0;
	tm_recorder *r = open_rec("stats", 16, 0, 1, &node);

	memset(&ev, 0, sizeof(ev));
	memset(t, 0, sizeof(t));
	ev.kind = TM_EV_EXIT;
	ev.node = node;
	ev.call = 1;
	ev.level = 3;
	ev.step = 7;
	ev.ntensors = 2;
	t[0].slot_kind = TM_SLOT_OUT;
	t[0].dtype = TM_DT_F32;
	t[0].rank = 2;
	t[0].shape[0] = 2;
	t[0].shape[1] = 2;
	t[0].numel = 4;
	t[0].level = 2;
	t[0].capture = 1;
	t[0].data = (uint64_t)(uintptr_t)data;
	/* the second one arrives with stats done elsewhere (a GPU) */
	t[1].slot_kind = TM_SLOT_OUT;
	t[1].slot_index = 1;
	t[1].dtype = TM_DT_F16;
	t[1].have = TM_STAT_BIT(TM_STAT_MAX);
	t[1].stat[TM_STAT_MAX] = 5.5;
	CU_ASSERT_EQUAL(tm_recorder_stats(r, t, 1), TM_OK);
	CU_ASSERT(t[0].done);
	data[0] = 100.0f;       /* in-place change after the hook: not seen */
	CU_ASSERT_EQUAL(tm_recorder_submit(r, &ev, 1, t, 2, NULL), TM_OK);
	CU_ASSERT_EQUAL(tm_recorder_close(r), TM_OK);

	CU_ASSERT_EQUAL_FATAL(tm_reader_open(path, 0, &rd, NULL), TM_OK);
	while (tm_reader_next(rd, &rec) == TM_OK) {
		const struct tm_tensor *x;

		if (rec.type != TM_REC_EVENT)
			continue;
		n++;
		CU_ASSERT_EQUAL(rec.u.event.step, 7);
		CU_ASSERT_EQUAL_FATAL(rec.u.event.ntensors, 2);
		x = &rec.u.event.tensors[0];
		CU_ASSERT(x->have & TM_STAT_BIT(TM_STAT_NAN_COUNT));
		CU_ASSERT_EQUAL(x->stat[TM_STAT_NAN_COUNT], 1);
		CU_ASSERT_EQUAL(x->stat[TM_STAT_MIN], -3.0);
		CU_ASSERT_EQUAL(x->stat[TM_STAT_MAX], 2.0);
		CU_ASSERT_EQUAL(x->rank, 2);
		CU_ASSERT_EQUAL(x->payload_len, 16);
		if (x->payload_len == 16)
			CU_ASSERT_EQUAL(((const uint8_t *)x->payload)[0],
					((const uint8_t *)data)[4]);
		x = &rec.u.event.tensors[1];
		CU_ASSERT_EQUAL(x->slot.index, 1);
		CU_ASSERT_EQUAL(x->have, TM_STAT_BIT(TM_STAT_MAX));
		CU_ASSERT_EQUAL(x->stat[TM_STAT_MAX], 5.5);
		CU_ASSERT_PTR_NULL(x->payload);
	}
	CU_ASSERT_EQUAL(n, 1);
	tm_reader_close(rd);
	unlink(path);
}

/* A numel whose byte size wraps 64 bits is "too big for the ring" (stats
 * only), never a small size that the payload copy would overrun. */
static void test_huge_payload_no_wrap(void)
{
	struct tm_rec_event ev;
	struct tm_rec_tensor t[2];
	tm_reader *rd = NULL;
	struct tm_record rec;
	float data[4] = { 1, 2, 3, 4 };
	uint32_t node;
	int n = 0, i;
	tm_recorder *r = open_rec("huge", 16, 0, 1, &node);

	memset(&ev, 0, sizeof(ev));
	memset(t, 0, sizeof(t));
	ev.kind = TM_EV_EXIT;
	ev.node = node;
	ev.call = 1;
	ev.level = 3;
	ev.ntensors = 2;
	for (i = 0; i < 2; i++) {
		t[i].slot_kind = TM_SLOT_OUT;
		t[i].slot_index = (uint16_t)i;
		t[i].dtype = TM_DT_F32;
		t[i].capture = 1;
		t[i].data = (uint64_t)(uintptr_t)data;
	}
	/* 4 * numel is 2^64 - 8: rounded and summed with 16 it used to be 8 */
	t[0].numel = (UINT64_MAX - 7) / 4;
	t[1].numel = 4;
	CU_ASSERT_EQUAL(tm_recorder_submit(r, &ev, 1, t, 2, NULL), TM_OK);
	CU_ASSERT_EQUAL(tm_recorder_close(r), TM_OK);

	CU_ASSERT_EQUAL_FATAL(tm_reader_open(path, 0, &rd, NULL), TM_OK);
	while (tm_reader_next(rd, &rec) == TM_OK) {
		if (rec.type != TM_REC_EVENT)
			continue;
		n++;
		CU_ASSERT_EQUAL_FATAL(rec.u.event.ntensors, 2);
		CU_ASSERT_PTR_NULL(rec.u.event.tensors[0].payload);
		CU_ASSERT_PTR_NULL(rec.u.event.tensors[1].payload);
	}
	CU_ASSERT_EQUAL(n, 1);
	tm_reader_close(rd);
	unlink(path);
}

/* A malformed batch is refused whole and consumes no seqs; a probe gap
 * (LEVEL) takes seqs and is written before the next event. */
static void test_invalid_and_probe_gap(void)
{
	struct tm_recorder_stats st;
	struct tm_rec_event ev;
	struct tm_rec_tensor t;
	struct coverage c;
	uint64_t first = 99;
	uint32_t node;
	tm_recorder *r = open_rec("gap", 16, 0, 1, &node);

	memset(&ev, 0, sizeof(ev));
	memset(&t, 0, sizeof(t));
	ev.ntensors = 2;        /* but only one tensor given */
	CU_ASSERT_EQUAL(tm_recorder_submit(r, &ev, 1, &t, 1, NULL), TM_ERR_INVALID_ARG);
	ev.ntensors = 1;
	t.rank = 9;
	CU_ASSERT_EQUAL(tm_recorder_submit(r, &ev, 1, &t, 1, NULL), TM_ERR_INVALID_ARG);
	tm_recorder_get_stats(r, &st);
	CU_ASSERT_EQUAL(st.next_seq, 0);

	CU_ASSERT_EQUAL(submit_n(r, node, 2, NULL), TM_OK);
	CU_ASSERT_EQUAL(tm_recorder_gap(r, 3, TM_GAP_LEVEL, 0, 0, &first), TM_OK);
	CU_ASSERT_EQUAL(first, 2);
	CU_ASSERT_EQUAL(tm_recorder_gap(r, 1, 0, 0, 0, NULL), TM_ERR_INVALID_ARG);
	CU_ASSERT_EQUAL(submit_n(r, node, 2, NULL), TM_OK);
	CU_ASSERT_EQUAL(tm_recorder_close(r), TM_OK);
	c = read_coverage(path);
	CU_ASSERT(c.ok);
	CU_ASSERT_EQUAL(c.next, 7);
	CU_ASSERT_EQUAL(c.events, 4);
	CU_ASSERT_EQUAL(c.gaps, 1);
	CU_ASSERT_EQUAL(c.reasons, TM_GAP_LEVEL);
	unlink(path);
	CU_ASSERT_EQUAL(tm_recorder_close(NULL), TM_OK);
}

/*
 * No writer (tmdb --args without a recording): seqs, node ids and stats as
 * usual, nothing dropped even from a "tiny" ring, nothing written, no file.
 */
static void test_no_writer(void)
{
	struct tm_recorder_opts o;
	struct tm_recorder_stats st;
	struct tm_rec_event ev[100];
	struct tm_rec_tensor t[100];
	float data[4] = { 1, -5, 3, 2 };
	tm_recorder *r = NULL;
	uint64_t first = 99;
	uint32_t id = 99, id2 = 99;
	size_t i;

	tm_recorder_opts_default(&o);
	o.ring_events = 4;
	CU_ASSERT_EQUAL_FATAL(tm_recorder_open(NULL, &o, &r), TM_OK);
	CU_ASSERT_EQUAL(tm_recorder_node2(r, "model", "Net", NULL, 0, TM_NODE_NONE, 0,
					  TM_NODE_MODULE, &id), TM_OK);
	CU_ASSERT_EQUAL(id, 0);
	CU_ASSERT_EQUAL(tm_recorder_node2(r, "model.fc", "Linear", NULL, 0, 0, 1,
					  TM_NODE_MODULE, &id), TM_OK);
	CU_ASSERT_EQUAL(id, 1);
	CU_ASSERT_EQUAL(tm_recorder_node2(r, "model", "Net", NULL, 0, TM_NODE_NONE, 0,
					  TM_NODE_MODULE, &id2), TM_ERR_INVALID_ARG);
	CU_ASSERT_EQUAL(id2, 0);
	memset(ev, 0, sizeof(ev));
	memset(t, 0, sizeof(t));
	for (i = 0; i < 100; i++) {
		ev[i].node = 1;
		ev[i].kind = TM_EV_EXIT;
		ev[i].ntensors = 1;
		t[i].slot_kind = TM_SLOT_OUT;
		t[i].dtype = TM_DT_F32;
		t[i].rank = 1;
		t[i].shape[0] = 4;
		t[i].numel = 4;
		t[i].level = 1;
		t[i].data = (uint64_t)(uintptr_t)data;
	}
	CU_ASSERT_EQUAL(tm_recorder_submit(r, ev, 100, t, 100, &first), TM_OK);
	CU_ASSERT_EQUAL(first, 0);
	CU_ASSERT(t[99].have & TM_STAT_BIT(TM_STAT_MIN));
	CU_ASSERT_EQUAL(t[99].stat[TM_STAT_MIN], -5.0);
	CU_ASSERT_EQUAL(tm_recorder_gap(r, 3, TM_GAP_LEVEL, 0, 0, &first), TM_OK);
	CU_ASSERT_EQUAL(first, 100);
	CU_ASSERT_EQUAL(tm_recorder_submit(r, ev, 1, t, 1, &first), TM_OK);
	CU_ASSERT_EQUAL(first, 103);
	CU_ASSERT_EQUAL(tm_recorder_drain(r), TM_OK);
	CU_ASSERT_EQUAL(tm_recorder_flush(r), TM_OK);
	tm_recorder_get_stats(r, &st);
	CU_ASSERT_EQUAL(st.next_seq, 104);
	CU_ASSERT_EQUAL(st.events_written, 0);
	CU_ASSERT_EQUAL(st.events_dropped, 0);
	CU_ASSERT_EQUAL(st.gaps_written, 0);
	CU_ASSERT_EQUAL(st.writer_err, 0);
	CU_ASSERT_EQUAL(tm_recorder_serve(r, NULL), TM_OK);
	CU_ASSERT_EQUAL(tm_recorder_watch_batch(r, NULL), TM_OK);
	CU_ASSERT_EQUAL(tm_recorder_close(r), TM_OK);
	CU_ASSERT_EQUAL(tm_recorder_serve(NULL, NULL), TM_ERR_INVALID_ARG);
	CU_ASSERT_EQUAL(tm_recorder_watch_batch(NULL, NULL), TM_ERR_INVALID_ARG);
	CU_ASSERT_EQUAL(tm_recorder_crash_install(NULL), TM_ERR_INVALID_ARG);
}

/* ------------------------------------------------------------- flight mode */

static tm_recorder *open_flight(const char *name, uint32_t steps, uint64_t budget,
				uint32_t *node)
{
	struct tm_recorder_opts o;
	struct tm_flight_opts f;
	tm_recorder *r = NULL;

	tm_recorder_opts_default(&o);
	o.manual_drain = 1;
	memset(&f, 0, sizeof(f));
	f.steps = steps;
	f.budget_bytes = budget;
	f.path = tmp_path(name);
	unlink(path);
	CU_ASSERT_EQUAL_FATAL(tm_recorder_open_flight(&o, &f, &r), TM_OK);
	CU_ASSERT_EQUAL(tm_recorder_node2(r, "model", "Net", "net.py", 3,
					  TM_NODE_NONE, 0, TM_NODE_MODULE, node), TM_OK);
	return r;
}

/* n EXIT events of step, one f32 tensor of 4 elements each from data. */
static int submit_step(tm_recorder *r, uint32_t node, uint64_t step, size_t n,
		       float *data)
{
	struct tm_rec_event ev[16];
	struct tm_rec_tensor t[16];
	size_t i;

	memset(ev, 0, sizeof(ev));
	memset(t, 0, sizeof(t));
	for (i = 0; i < n && i < 16; i++) {
		ev[i].kind = TM_EV_EXIT;
		ev[i].node = node;
		ev[i].call = (uint32_t)i + 1;
		ev[i].step = step;
		ev[i].level = 1;
		ev[i].ntensors = 1;
		t[i].slot_kind = TM_SLOT_OUT;
		t[i].dtype = TM_DT_F32;
		t[i].rank = 1;
		t[i].shape[0] = 4;
		t[i].numel = 4;
		t[i].level = 1;
		t[i].data = (uint64_t)(uintptr_t)data;
	}
	return tm_recorder_submit(r, ev, n, t, n, NULL);
}

/* Steps 0..9 of 3 events, a NaN at step 7's second event: the file appears
 * only then and holds steps 4..7 (up to the NaN, then the rest as normal
 * recording), after a NOT_KEPT gap over seqs 0..11. */
static void test_flight_trigger_window(void)
{
	float ok[4] = { 1, 2, 3, 4 }, bad[4] = { 1, NAN, 3, 4 };
	struct tm_flight_info fi;
	struct tm_record rec;
	struct coverage c;
	tm_reader *rd = NULL;
	uint64_t step, first_step = UINT64_MAX;
	uint32_t node, nkept = 0;
	tm_recorder *r = open_flight("flight", 3, 0, &node);

	CU_ASSERT_EQUAL(tm_recorder_flight_trigger(r, "tensor.nan_count >"), TM_ERR_TQL);
	CU_ASSERT(strstr(tm_recorder_detail(r), "error") != NULL);
	CU_ASSERT_EQUAL(tm_recorder_flight_trigger(r, "tensor.nan_count > 0"), TM_OK);
	CU_ASSERT_PTR_NOT_NULL(tm_recorder_flight_word(r));
	for (step = 0; step < 7; step++) {
		CU_ASSERT_EQUAL(submit_step(r, node, step, 3, ok), TM_OK);
		CU_ASSERT_EQUAL(tm_recorder_drain(r), TM_OK);
	}
	CU_ASSERT_EQUAL(access(path, F_OK), -1);        /* nothing on disk yet */
	CU_ASSERT_EQUAL(tm_recorder_flight_info(r, &fi), TM_OK);
	CU_ASSERT_EQUAL(fi.dumps, 0);
	CU_ASSERT_EQUAL(fi.steps_held, 3);
	CU_ASSERT_EQUAL(submit_step(r, node, 7, 1, ok), TM_OK);
	CU_ASSERT_EQUAL(submit_step(r, node, 7, 2, bad), TM_OK);
	CU_ASSERT_EQUAL(tm_recorder_drain(r), TM_OK);
	CU_ASSERT_EQUAL(*tm_recorder_flight_word(r), 1);
	CU_ASSERT_EQUAL(access(path, F_OK), 0);
	CU_ASSERT_EQUAL(tm_recorder_flight_info(r, &fi), TM_OK);
	CU_ASSERT_EQUAL(fi.steps_held, 3);
	CU_ASSERT_EQUAL(fi.first_step, 4);
	CU_ASSERT_EQUAL(fi.not_kept, 12);
	CU_ASSERT(strstr(fi.reason, "trigger tensor.nan_count > 0 at seq 22 step 7") != NULL);
	/* a second dump is a no-op; recording goes on */
	CU_ASSERT_EQUAL(tm_recorder_flight_dump(r, "again", UINT64_MAX), TM_OK);
	CU_ASSERT_EQUAL(submit_step(r, node, 8, 3, ok), TM_OK);
	CU_ASSERT_EQUAL(tm_recorder_close(r), TM_OK);

	c = read_coverage(path);
	CU_ASSERT(c.ok);
	CU_ASSERT_EQUAL(c.next, 27);
	CU_ASSERT_EQUAL(c.gaps, 1);
	CU_ASSERT_EQUAL(c.dropped, 12);
	CU_ASSERT_EQUAL(c.reasons, TM_GAP_NOT_KEPT);
	CU_ASSERT_EQUAL_FATAL(tm_reader_open(path, 0, &rd, NULL), TM_OK);
	while (tm_reader_next(rd, &rec) == TM_OK)
		if (rec.type == TM_REC_EVENT) {
			if (rec.u.event.step < first_step)
				first_step = rec.u.event.step;
			nkept++;
		}
	tm_reader_close(rd);
	CU_ASSERT_EQUAL(first_step, 4);
	CU_ASSERT_EQUAL(nkept, 15);
	unlink(path);
}

/* A budget of about two steps keeps two; a step over it alone is a gap. */
static void test_flight_budget(void)
{
	float ok[4] = { 1, 2, 3, 4 };
	struct tm_flight_info fi;
	struct coverage c;
	uint32_t node;
	uint64_t step, one;
	tm_recorder *r = open_flight("flightb", 8, 0, &node);

	/* the size of one step of 2 events, encoded */
	CU_ASSERT_EQUAL(submit_step(r, node, 0, 2, ok), TM_OK);
	CU_ASSERT_EQUAL(submit_step(r, node, 1, 1, ok), TM_OK);
	CU_ASSERT_EQUAL(tm_recorder_drain(r), TM_OK);
	CU_ASSERT_EQUAL(tm_recorder_flight_info(r, &fi), TM_OK);
	CU_ASSERT_EQUAL(tm_recorder_close(r), TM_OK);
	CU_ASSERT_EQUAL(access(path, F_OK), -1);        /* no trigger: no file */
	one = fi.bytes * 2 / 3;
	CU_ASSERT(one > 0);

	r = open_flight("flightb", 8, one * 2 + one / 2, &node);
	for (step = 0; step < 6; step++) {
		CU_ASSERT_EQUAL(submit_step(r, node, step, step == 3 ? 8 : 2, ok), TM_OK);
		CU_ASSERT_EQUAL(tm_recorder_drain(r), TM_OK);
	}
	CU_ASSERT_EQUAL(tm_recorder_flight_dump(r, "test", 6), TM_OK);
	CU_ASSERT_EQUAL(tm_recorder_flight_info(r, &fi), TM_OK);
	CU_ASSERT_EQUAL(fi.steps_held, 2);      /* 4 and 5; 3 is a gap */
	CU_ASSERT_EQUAL(fi.steps_over, 1);
	CU_ASSERT_EQUAL(tm_recorder_close(r), TM_OK);
	c = read_coverage(path);
	CU_ASSERT(c.ok);
	CU_ASSERT_EQUAL(c.next, 18);
	CU_ASSERT_EQUAL(c.events, 4);
	CU_ASSERT_EQUAL(c.gaps, 2);             /* 0..5 not kept, step 3 over */
	CU_ASSERT_EQUAL(c.reasons, TM_GAP_NOT_KEPT);
	unlink(path);
}

static void test_flight_bad_use(void)
{
	struct tm_recorder_opts o;
	struct tm_flight_opts f;
	uint32_t node;
	tm_recorder *r = NULL;

	tm_recorder_opts_default(&o);
	memset(&f, 0, sizeof(f));
	CU_ASSERT_EQUAL(tm_recorder_open_flight(&o, &f, &r), TM_ERR_INVALID_ARG);
	f.steps = 2;
	CU_ASSERT_EQUAL(tm_recorder_open_flight(&o, &f, &r), TM_ERR_INVALID_ARG);
	r = open_rec("notflight", 64, 0, 1, &node);
	CU_ASSERT_EQUAL(tm_recorder_flight_dump(r, "x", UINT64_MAX), TM_ERR_UNSUPPORTED);
	CU_ASSERT_EQUAL(tm_recorder_flight_trigger(r, "step > 1"), TM_ERR_UNSUPPORTED);
	CU_ASSERT_PTR_NULL(tm_recorder_flight_word(r));
	CU_ASSERT_EQUAL(tm_recorder_close(r), TM_OK);
	unlink(path);
	r = open_flight("flightc", 2, 0, &node);
	CU_ASSERT_NOT_EQUAL(tm_recorder_flight_trigger(r, "model.nope:out if model.fc:out.std > 1"),
			    TM_OK);
	CU_ASSERT_EQUAL(tm_recorder_close(r), TM_OK);
	CU_ASSERT_EQUAL(access(path, F_OK), -1);
}

int main(void)
{
	static const struct tm_test_case cases[] = {
		TM_TEST(test_tiny_ring_gaps),
		TM_TEST(test_ring_restarts_empty),
		TM_TEST(test_threaded_coverage),
		TM_TEST(test_writer_thread_named),
		TM_TEST(test_lossless),
		TM_TEST(test_stats_and_payload),
		TM_TEST(test_huge_payload_no_wrap),
		TM_TEST(test_invalid_and_probe_gap),
		TM_TEST(test_no_writer),
		TM_TEST(test_flight_trigger_window),
		TM_TEST(test_flight_budget),
		TM_TEST(test_flight_bad_use),
		{ NULL, NULL }
	};
	return tm_test_run("recorder", cases);
}
