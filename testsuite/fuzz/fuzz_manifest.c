/*
 * fuzz_manifest.c -- libFuzzer target for run manifests (src/lib/manifest.c,
 * doc/tmrun.md "Run manifest"): the text file tmdb reads to find the
 * per-rank traces of a distributed recording.
 *
 * Input: the manifest's bytes.  Checked beyond "no crash": a parse either
 * succeeds with every rank 0..world_size-1 holding a non-empty path, or
 * fails with TM_ERR_CORRUPT and a message naming the manifest; a parsed
 * manifest written back in the canonical form (as tm_manifest_write does)
 * parses to the same paths; a dir prefixes exactly the relative paths; the
 * record-path helpers either fit or say TM_ERR_TOO_LARGE.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensormorph.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The canonical text of m, as tm_manifest_write lays it out. */
static char *canonical(const struct tm_manifest *m, size_t *len)
{
	size_t cap = 64, n, i;
	char *s, *p;

	for (i = 0; i < (size_t)m->world_size; i++)
		cap += strlen(m->paths[i]) + 24;
	s = malloc(cap);
	if (!s)
		return NULL;
	p = s + sprintf(s, "tmrun-manifest 1\nworld_size %d\n", (int)m->world_size);
	for (i = 0; i < (size_t)m->world_size; i++)
		p += sprintf(p, "rank %zu %s\n", i, m->paths[i]);
	n = (size_t)(p - s);
	*len = n;
	return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tm_manifest *m = NULL, *m2 = NULL, *md = NULL;
	char *detail = NULL, *text, buf[256];
	char *rec;
	size_t len, i;
	int r;

	r = tm_manifest_parse((const char *)data, size, NULL, &m, &detail);
	if (r == TM_OK) {
		if (detail || !m || m->world_size < 1 ||
		    m->world_size > TM_MANIFEST_MAX_WORLD || !m->paths)
			abort();
		for (i = 0; i < (size_t)m->world_size; i++)
			if (!m->paths[i] || !m->paths[i][0] ||
			    strlen(m->paths[i]) >= TM_MANIFEST_MAX_PATH)
				abort();
		text = canonical(m, &len);
		if (text) {
			if (tm_manifest_parse(text, len, NULL, &m2, NULL) != TM_OK ||
			    m2->world_size != m->world_size)
				abort();
			for (i = 0; i < (size_t)m->world_size; i++)
				if (strcmp(m->paths[i], m2->paths[i]))
					abort();
			tm_manifest_free(m2);
			free(text);
		}
		if (tm_manifest_parse((const char *)data, size, "d", &md, NULL) != TM_OK)
			abort();
		for (i = 0; i < (size_t)m->world_size; i++) {
			const char *a = m->paths[i], *b = md->paths[i];

			if (a[0] == '/' ? strcmp(a, b) :
			    (strncmp(b, "d/", 2) || strcmp(a, b + 2)))
				abort();
		}
		tm_manifest_free(md);
		tm_manifest_free(m);
	} else if (r == TM_ERR_CORRUPT) {
		if (m || !detail || strncmp(detail, "manifest", 8))
			abort();
		free(detail);
	} else if (r != TM_ERR_NOMEM) {
		abort();
	}

	/* The input as a record path. */
	rec = malloc(size + 1);
	if (!rec)
		return 0;
	memcpy(rec, data, size);
	rec[size] = '\0';
	r = tm_manifest_rank_path(rec, (int32_t)(size % 5000), buf, sizeof(buf));
	if (r == TM_OK ? !strstr(buf, ".rank") : r != TM_ERR_TOO_LARGE)
		abort();
	r = tm_manifest_path(rec, buf, sizeof(buf));
	if (r == TM_OK ? !strstr(buf, ".manifest") : r != TM_ERR_TOO_LARGE)
		abort();
	free(rec);
	return 0;
}
