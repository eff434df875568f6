/*
 * recover.c -- tm_recover(): make a trace whose writer died whole again.
 *
 * A killed writer leaves intact chunks, perhaps a torn last chunk, and no
 * index.  Recovery keeps every chunk that passes a full check (header and
 * payload checksums, decompression, every record decodes), stops at the
 * first one that does not, and writes the survivors with a new index,
 * summary and trailer.  What was lost is said, never hidden: an unfinished
 * trace gets a TRUNCATED gap after its last record, since events after it
 * may or may not have happened (ARCHITECTURE 6).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
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

int tm_recover(const char *in_path, const char *out_path, char **report)
{
	tm_reader *r = NULL;
	tm_writer *w = NULL;
	char *detail = NULL, *tmp = NULL, *line;
	struct tm_summary kept = { 0 };
	const struct tm_summary *orig;
	size_t i, n, nkept = 0;
	int err, fd = -1, complete, cut = 0;
	struct tmrun_chunk *chunks = NULL;

	if (report)
		*report = NULL;
	if (!in_path || !out_path)
		return TM_ERR_INVALID_ARG;

	/* Was it closed properly?  Then recovery only re-verifies and copies. */
	err = tm_reader_open(in_path, 0, &r, &detail);
	if (err) {
		say(report, detail ? detail : tm_strerror(err));
		free(detail);
		return err;
	}
	complete = tm_reader_summary(r)->complete;
	tm_reader_close(r);
	r = NULL;

	err = tm_reader_open(in_path, TM_READER_NO_INDEX, &r, &detail);
	if (err) {
		say(report, detail ? detail : tm_strerror(err));
		free(detail);
		return err;
	}
	orig = tm_reader_summary(r);
	if (orig->damaged) {
		line = tm_asprintf("%s: readable part ends at byte %llu of %llu: %s",
				   in_path, (unsigned long long)orig->damage_offset,
				   (unsigned long long)orig->file_bytes,
				   tm_strerror(orig->damage_err));
		say(report, line);
		free(line);
		cut = 1;
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
		err = TM_ERR_IO;
		goto out;
	}
	err = tm_writer_fdopen(fd, NULL, &w);
	if (err)
		goto out;
	fd = -1;

	n = tmrun_reader_nchunks(r);
	chunks = calloc(n ? n : 1, sizeof(*chunks));
	if (!chunks) {
		err = TM_ERR_NOMEM;
		goto out;
	}
	for (i = 0; i < n; i++) {
		const uint8_t *stored;
		const struct tmrun_chunk *c = tmrun_reader_chunk(r, i);

		err = tmrun_reader_verify_chunk(r, i, &stored);
		if (err == TM_ERR_NOMEM)
			goto out;
		if (err) {
			say(report, tm_reader_detail(r));
			line = tm_asprintf("dropped %zu damaged or later chunk(s) from offset %llu",
					   n - i, (unsigned long long)c->offset);
			say(report, line);
			free(line);
			cut = 1;
			break;
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

	if (!complete || cut) {
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
