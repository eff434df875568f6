/*
 * recover.c -- tm_recover(): make a damaged or unfinished trace whole again.
 *
 * A killed writer leaves intact chunks, perhaps a torn last chunk, and no
 * index; a damaged disk or transfer leaves a flipped byte anywhere.
 * Recovery finds the chunks through the index when it is intact (its
 * copies of the chunk headers survive damage to the headers in the file),
 * else by walking the chunk headers and, past a damaged one, searching for
 * the next intact header.  The file header is not needed: it holds nothing
 * the chunks do not.  Every chunk found gets a full check (payload
 * checksum, decompression, every record decodes, its nodes and events fit
 * the node table of the chunks kept before it); those that pass are copied
 * verbatim, those that fail are named and dropped, and the seqs they held
 * become a DAMAGED gap.  What was lost is said, never hidden: an
 * unfinished trace gets a TRUNCATED gap after its last record, since events
 * after it may or may not have happened (ARCHITECTURE 6).
 *
 * Recovery never keeps less than the reader reads: the result is written
 * to a temporary file, its readable events are counted against the
 * original's, and it replaces the output (the original, in place) only
 * when it holds at least as many.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tm-internal.h"
#include "tm-tmrun.h"
#include "tmrun-format.h"

/* Appends a report line to *rep (best effort: a failed allocation drops text). */
static void say(char **rep, const char *line)
{
	char *n;

	if (!rep)
		return;
	n = tm_asprintf("%s%s%s", *rep ? *rep : "", *rep ? "\n" : "", line);
	if (n) {
		free(*rep);
		*rep = n;
	}
}

/* Events an ordinary reader reads from path, from the start until the end
 * or the first error (what tmdb shows of it). */
static uint64_t readable_events(const char *path)
{
	struct tm_record rec;
	tm_reader *r = NULL;
	uint64_t n = 0;

	if (tm_reader_open(path, 0, &r, NULL) != TM_OK)
		return 0;
	while (tm_reader_next(r, &rec) == TM_OK)
		n += rec.type == TM_REC_EVENT;
	tm_reader_close(r);
	return n;
}

static const char *index_words(int why)
{
	switch (why) {
	case TM_INDEX_TRAILER: return "the trailer is damaged";
	case TM_INDEX_INDEX: return "the INDEX chunk is damaged";
	case TM_INDEX_SUMMARY: return "the SUMMARY chunk is damaged";
	default: return NULL;
	}
}

/* Two headers of the same chunk (an uncompressed INDEX holds copies). */
static int same_chunk(const struct tmrun_chunk *a, const struct tmrun_chunk *b)
{
	return a->type == b->type && a->payload_crc == b->payload_crc &&
	       a->stored_len == b->stored_len && a->raw_len == b->raw_len &&
	       a->nrecords == b->nrecords && a->first_seq == b->first_seq &&
	       a->last_seq == b->last_seq;
}

struct lost {
	int any;                /* something was dropped since the last kept chunk */
	uint64_t first_seq;     /* the dropped range, where chunk headers said */
	int have_range;
};

/* The DAMAGED gap for what was dropped between the last kept events and
 * next_first (UINT64_MAX: the end). */
static int damaged_gap(tm_writer *w, const struct tm_summary *kept, struct lost *l,
		       uint64_t next_first, uint32_t extra_reason, char **report)
{
	struct tm_gap g = { 0 };
	char *line;
	int err;

	g.first_seq = kept->nrecords ? kept->last_seq + 1 : 0;
	g.last_seq = next_first == UINT64_MAX ? g.first_seq : next_first - 1;
	if (next_first != UINT64_MAX && next_first <= g.first_seq) {
		l->any = 0;     /* nothing in between held a seq (a META chunk) */
		return TM_OK;
	}
	g.count = 0;            /* unknown: the damaged chunks cannot say */
	g.reason = (l->any ? TM_GAP_DAMAGED : 0) | extra_reason;
	g.step = kept->last_step;
	g.time_ns = kept->last_time_ns;
	if ((err = tm_writer_gap(w, &g)) != TM_OK)
		return err;
	if (l->any) {
		if (next_first == UINT64_MAX)
			line = tm_asprintf("the damaged part ends the trace: added a gap "
					   "(damaged%s) from seq %llu",
					   extra_reason ? "|truncated" : "",
					   (unsigned long long)g.first_seq);
		else
			line = tm_asprintf("added a damaged gap for seq %llu-%llu",
					   (unsigned long long)g.first_seq,
					   (unsigned long long)g.last_seq);
		say(report, line);
		free(line);
	}
	l->any = 0;
	return TM_OK;
}

int tm_recover(const char *in_path, const char *out_path, char **report)
{
	tm_reader *r = NULL;
	tm_writer *w = NULL;
	char *detail = NULL, *tmp = NULL, *line;
	const char *hdetail;
	struct tm_summary kept = { 0 };
	const struct tm_summary *orig;
	const struct tmrun_skip *skips;
	struct lost lost = { 0 };
	struct stat st;
	uint64_t before, after;
	size_t i, n, nskips, nkept = 0, si = 0;
	int err, fd = -1;
	struct tmrun_chunk *chunks = NULL;

	if (report)
		*report = NULL;
	if (!in_path || !out_path)
		return TM_ERR_INVALID_ARG;

	/* What tmdb shows of it now: recovery must not keep less. */
	before = readable_events(in_path);

	err = tmrun_reader_open_salvage(in_path, &r, &detail);
	if (err) {
		say(report, detail ? detail : tm_strerror(err));
		free(detail);
		return err;
	}
	orig = tm_reader_summary(r);
	n = tmrun_reader_nchunks(r);
	if (tmrun_reader_header_damage(r, &hdetail)) {
		if (!n) {
			/* nothing of a trace in it: not ours to rewrite */
			say(report, hdetail);
			line = tm_asprintf("%s: no intact chunk found: nothing to recover", in_path);
			say(report, line);
			free(line);
			err = tmrun_reader_header_damage(r, NULL);
			goto out;
		}
		line = tm_asprintf("%s; rebuilt from the chunks", hdetail);
		say(report, line);
		free(line);
	}
	if (!orig->indexed && index_words(orig->index_damage)) {
		line = tm_asprintf("%s: %s: the chunks were found by scanning the file",
				   in_path, index_words(orig->index_damage));
		say(report, line);
		free(line);
	}

	tmp = tm_asprintf("%s.recover-XXXXXX", out_path);
	if (!tmp) {
		err = TM_ERR_NOMEM;
		goto out;
	}
	fd = mkstemp(tmp);
	if (fd < 0) {
		line = tm_asprintf("%s: cannot create: %s", tmp, strerror(errno));
		say(report, line);
		free(line);
		free(tmp);
		tmp = NULL;
		err = TM_ERR_IO;
		goto out;
	}
	/* the recovered file is the original's, with its permissions */
	if (!stat(in_path, &st) && fchmod(fd, st.st_mode & 07777)) {
		/* mkstemp's 0600 is the safe side */
	}
	err = tm_writer_fdopen(fd, NULL, &w);
	if (err)
		goto out;
	fd = -1;

	chunks = calloc(n ? n : 1, sizeof(*chunks));
	if (!chunks) {
		err = TM_ERR_NOMEM;
		goto out;
	}
	skips = tmrun_reader_skips(r, &nskips);
	for (i = 0; i <= n; i++) {
		const struct tmrun_chunk *c = i < n ? tmrun_reader_chunk(r, i) : NULL;
		const uint8_t *stored;
		size_t k;
		int dup = 0;

		/* the regions the scan skipped before this chunk */
		for (; si < nskips && (!c || skips[si].off < c->offset); si++) {
			/* a torn last chunk of an unfinished trace is its end,
			 * which the truncated gap covers; anything else was
			 * damaged */
			int torn = !orig->complete && skips[si].end >= orig->file_bytes &&
				   skips[si].err == TM_ERR_TRUNCATED;

			if (torn)
				line = tm_asprintf("%s: readable part ends at byte %llu of %llu: %s",
						   in_path, (unsigned long long)skips[si].off,
						   (unsigned long long)orig->file_bytes,
						   tm_strerror(skips[si].err));
			else
				line = tm_asprintf("%s: chunk header at offset %llu: %s; skipped to "
						   "%s %llu", in_path,
						   (unsigned long long)skips[si].off,
						   tm_strerror(skips[si].err),
						   skips[si].end < orig->file_bytes ?
						   "the next intact chunk at offset" :
						   "the end of the file, byte",
						   (unsigned long long)skips[si].end);
			say(report, line);
			free(line);
			if (!torn)
				lost.any = 1;
		}
		if (!c)
			break;
		for (k = 0; k < nkept && !dup; k++)
			dup = same_chunk(&chunks[k], c);
		if (dup)
			continue;
		err = tmrun_reader_check_chunk(r, c, &stored);
		if (err == TM_ERR_NOMEM)
			goto out;
		if (err) {
			line = tm_asprintf("%s; dropped", tm_reader_detail(r));
			say(report, line);
			free(line);
			lost.any = 1;
			continue;
		}
		if (c->type == TMRUN_CHUNK_EVENTS && lost.any && c->nrecords) {
			tmrun_summarise(chunks, nkept, &kept);
			if ((err = damaged_gap(w, &kept, &lost, c->first_seq, 0, report)))
				goto out;
		}
		if ((err = tmrun_writer_copy_chunk(w, c, stored)) != TM_OK)
			goto out;
		chunks[nkept++] = *c;
	}
	tmrun_summarise(chunks, nkept, &kept);
	line = tm_asprintf("%s: kept %llu events, %llu gaps and %llu crash records in %zu "
			   "intact chunks", in_path, (unsigned long long)kept.nevents,
			   (unsigned long long)kept.ngaps, (unsigned long long)kept.ncrashes,
			   nkept);
	say(report, line);
	free(line);

	if (lost.any) {
		/* the end was damaged: what it held, and whether more came
		 * after, is unknown */
		if ((err = damaged_gap(w, &kept, &lost, UINT64_MAX,
				       orig->complete ? 0 : TM_GAP_TRUNCATED, report)))
			goto out;
	} else if (!orig->complete) {
		struct tm_gap g = { 0 };

		g.first_seq = kept.nrecords ? kept.last_seq + 1 : 0;
		g.last_seq = g.first_seq;
		g.count = 0;           /* unknown: the writer did not live to say */
		g.reason = TM_GAP_TRUNCATED;
		g.step = kept.last_step;
		g.time_ns = kept.last_time_ns;
		if ((err = tm_writer_gap(w, &g)) != TM_OK)
			goto out;
		if (kept.nrecords)
			line = tm_asprintf("the trace was not closed: what came after seq %llu "
					   "(step %llu) is unknown; added a truncated gap there",
					   (unsigned long long)kept.last_seq,
					   (unsigned long long)kept.last_step);
		else
			line = tm_asprintf("the trace was not closed and no event survived: "
					   "added a truncated gap from seq 0");
		say(report, line);
		free(line);
	}
	err = tm_writer_close(w);
	w = NULL;
	if (err)
		goto out;
	after = readable_events(tmp);
	if (after < before) {
		line = tm_asprintf("%s: the recovered trace would read %llu events where the "
				   "damaged one reads %llu: %s is left as it was", in_path,
				   (unsigned long long)after, (unsigned long long)before,
				   out_path);
		say(report, line);
		free(line);
		err = TM_ERR_CORRUPT;
		goto out;
	}
	if (rename(tmp, out_path)) {
		line = tm_asprintf("%s: cannot rename to %s: %s", tmp, out_path, strerror(errno));
		say(report, line);
		free(line);
		err = TM_ERR_IO;
		goto out;
	}
	free(tmp);
	tmp = NULL;
	line = tm_asprintf("wrote %s", out_path);
	say(report, line);
	free(line);
out:
	if (w)
		tm_writer_abandon(w);
	if (fd >= 0)
		close(fd);
	if (tmp) {
		unlink(tmp);
		free(tmp);
	}
	free(chunks);
	tm_reader_close(r);
	return err;
}
