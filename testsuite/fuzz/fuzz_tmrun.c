/*
 * fuzz_tmrun.c -- libFuzzer target for the .tmrun reader and recovery
 * (doc/tmrun.md).
 *
 * The input is a whole file.  It is written to a temporary file and opened
 * the ways tmdb opens traces (with the index, by scanning, strictly); each
 * reader is walked forwards and backwards, seeked by seq, step and time,
 * and filtered by a node pattern, touching every byte a record points to
 * so that ASan sees any dangling or out-of-bounds pointer.  tm_recover()
 * then rewrites the file and the result is read again.  Then the same is
 * done to a copy whose checksums have been repaired: most mutations only
 * break a CRC, and the repaired copy lets them reach chunk and record
 * decoding behind it.  Checked beyond "no
 * crash, no leak": a walk that reaches both ends sees as many records
 * backwards as forwards, and a recovered file opens.
 * Built with standalone.c it replays the corpus in `make check`.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tensormorph.h"
#include "tm-internal.h"
#include "tmrun-format.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define WALK_MAX 20000

static volatile size_t sink;

/* Reads everything a record refers to. */
static void touch(const struct tm_record *rec)
{
	size_t s = rec->type, i, j;

	switch (rec->type) {
	case TM_REC_EVENT:
		s += rec->u.event.seq + rec->u.event.node + rec->u.event.ntensors;
		for (i = 0; i < rec->u.event.ntensors; i++) {
			const struct tm_tensor *t = &rec->u.event.tensors[i];
			const uint8_t *p = t->payload;

			for (j = 0; j < t->rank && j < TM_MAX_RANK; j++)
				s += (size_t)t->shape[j];
			if (p)
				for (j = 0; j < t->payload_len; j++)
					s += p[j];
		}
		break;
	case TM_REC_CRASH:
		for (i = 0; i < rec->u.crash.nframes && i < TM_MAX_FRAMES; i++)
			if (rec->u.crash.frames[i])
				s += strlen(rec->u.crash.frames[i]);
		break;
	case TM_REC_GAP:
		s += rec->u.gap.first_seq + rec->u.gap.reason;
		break;
	default:
		break;
	}
	sink += s;
}

/* Walks from the current position to an end; returns records seen, or
 * SIZE_MAX if the walk stopped on an error rather than TM_ERR_END. */
static size_t walk(tm_reader *r, int forward)
{
	struct tm_record rec;
	size_t n = 0;
	int err;

	while (n < WALK_MAX) {
		err = forward ? tm_reader_next(r, &rec) : tm_reader_prev(r, &rec);
		if (err == TM_ERR_END)
			return n;
		if (err)
			return SIZE_MAX;
		touch(&rec);
		/* the step's annotation, looked up while rec is held: rec must
		 * come out of it unchanged */
		if (rec.type == TM_REC_EVENT) {
			const struct tm_annot *a;
			uint64_t seq = rec.u.event.seq;
			uint32_t k;

			if (tm_reader_annotation(r, rec.u.event.step, "request", &a) == TM_OK)
				for (k = 0; k < a->nvalues; k++)
					sink += strlen(a->values[k]) + a->count;
			if (rec.u.event.seq != seq)
				abort();
			touch(&rec);
		}
		n++;
	}
	return SIZE_MAX;
}

static void exercise(tm_reader *r)
{
	const struct tm_summary *s = tm_reader_summary(r);
	const struct tm_run_meta *m = tm_reader_meta(r);
	const tm_nodetab *nodes = tm_reader_nodes(r);
	struct tm_record rec;
	tm_address *pat;
	size_t fwd, back;
	uint32_t i;

	if (m && m->probe_kind)
		sink += strlen(m->probe_kind);
	for (i = 0; i < tm_nodetab_count(nodes); i++) {
		const struct tm_node *n = tm_nodetab_get(nodes, i);

		sink += strlen(n->address) + (n->type ? strlen(n->type) : 0);
		if (tm_nodetab_find(nodes, n->address) != n)
			abort();
	}
	sink += strlen(tm_reader_detail(r));

	fwd = walk(r, 1);
	back = walk(r, 0);
	if (fwd != SIZE_MAX && back != SIZE_MAX && fwd != back)
		abort();

	tm_reader_seek_seq(r, s->first_seq + (s->last_seq - s->first_seq) / 2);
	if (tm_reader_next(r, &rec) == TM_OK)
		touch(&rec);
	if (tm_reader_prev(r, &rec) == TM_OK)
		touch(&rec);
	tm_reader_seek_step(r, s->last_step);
	if (tm_reader_next(r, &rec) == TM_OK)
		touch(&rec);
	tm_reader_seek_time(r, s->first_time_ns + 1);
	if (tm_reader_prev(r, &rec) == TM_OK)
		touch(&rec);
	tm_reader_seek_seq(r, UINT64_MAX);
	tm_reader_seek_end(r);
	if (tm_reader_prev(r, &rec) == TM_OK)
		touch(&rec);
	tm_reader_rewind(r);
	if (tm_reader_next(r, &rec) == TM_OK)
		touch(&rec);

	if (tm_address_parse("model.**.fc*", &pat, NULL, NULL) == TM_OK) {
		tm_reader_rewind(r);
		if (tm_reader_set_filter(r, pat) == TM_OK)
			walk(r, 1);
		tm_address_free(pat);
		tm_reader_set_filter(r, NULL);
	}
}

static int write_file(const char *path, const uint8_t *data, size_t size)
{
	FILE *f = fopen(path, "wb");
	int ok;

	if (!f)
		return -1;
	ok = fwrite(data, 1, size, f) == size;
	return fclose(f) == 0 && ok ? 0 : -1;
}

/*
 * Recomputes the file header CRC and, walking chunk headers from the start
 * (doc/tmrun.md sections 2 and 3), each chunk's payload and header CRCs.
 * Returns 1 if anything changed.
 */
static int repair_crcs(uint8_t *p, size_t size)
{
	size_t off = TMRUN_FILE_HEADER_SIZE;
	uint32_t crc;
	int changed = 0;

	if (size < TMRUN_FILE_HEADER_SIZE)
		return 0;
	crc = tm_crc32c(0, p, 28);
	if (tm_get_u32(p + 28) != crc) {
		tm_put_u32(p + 28, crc);
		changed = 1;
	}
	while (size - off >= TMRUN_CHUNK_HEADER_SIZE) {
		uint8_t *h = p + off;
		uint32_t stored = tm_get_u32(h + 8);

		if (tm_get_u32(h) != TMRUN_CHUNK_MAGIC ||
		    stored > size - off - TMRUN_CHUNK_HEADER_SIZE)
			break;
		crc = tm_crc32c(0, h + TMRUN_CHUNK_HEADER_SIZE, stored);
		if (tm_get_u32(h + 20) != crc) {
			tm_put_u32(h + 20, crc);
			changed = 1;
		}
		crc = tm_crc32c(0, h, 84);
		if (tm_get_u32(h + 84) != crc) {
			tm_put_u32(h + 84, crc);
			changed = 1;
		}
		off += TMRUN_CHUNK_HEADER_SIZE + stored;
	}
	return changed;
}

static void run_file(const char *in, const char *out)
{
	static const unsigned modes[] = { 0, TM_READER_NO_INDEX, TM_READER_STRICT };
	char *detail, *report = NULL;
	tm_reader *r;
	size_t i;

	for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		detail = NULL;
		if (tm_reader_open(in, modes[i], &r, &detail) == TM_OK) {
			/* the reference reader's path (compare.c): histograms
			 * passed over, not decoded, which damage must not fool */
			tm_reader_skip_hist(r, modes[i] == TM_READER_NO_INDEX);
			exercise(r);
			tm_reader_close(r);
		} else if (!detail) {
			abort();        /* a failed open always says why */
		}
		free(detail);
	}

	if (tm_recover(in, out, &report) == TM_OK) {
		detail = NULL;
		if (tm_reader_open(out, 0, &r, &detail) != TM_OK)
			abort();        /* what recovery wrote must open */
		exercise(r);
		tm_reader_close(r);
		free(detail);
	}
	free(report);
	unlink(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *dir = getenv("TMPDIR");
	char in[4096], out[4096 + 8];
	uint8_t *copy;
	int fd;

	snprintf(in, sizeof(in), "%s/fuzz-tmrun-XXXXXX", dir && *dir ? dir : "/tmp");
	fd = mkstemp(in);
	if (fd < 0)
		return 0;
	close(fd);
	snprintf(out, sizeof(out), "%s.out", in);
	if (write_file(in, data, size) == 0)
		run_file(in, out);
	copy = malloc(size ? size : 1);
	if (copy) {
		memcpy(copy, data, size);
		if (repair_crcs(copy, size) && write_file(in, copy, size) == 0)
			run_file(in, out);
		free(copy);
	}
	unlink(in);
	return 0;
}
