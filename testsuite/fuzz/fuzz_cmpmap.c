/*
 * fuzz_cmpmap.c -- libFuzzer target for compare's map rules
 * (src/lib/compare.c, tm-compare.h): `compare FILE -map RUN=REF` hands the
 * user's rule text here.
 *
 * Input: lines; each but the last is a rule, the last an address to map.
 * Checked beyond "no crash": a refused rule comes with a message and adds
 * nothing; an accepted one is kept as written; the mapped address fits the
 * buffer and is NUL-terminated, or the call says TM_ERR_TOO_LARGE or
 * TM_ERR_NOT_FOUND (excluded); mapping with no rules gives the address back.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensormorph.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1), *line, *next, *last = NULL;
	tm_cmp_map *m = tm_cmp_map_new(), *none = tm_cmp_map_new();
	char buf[64], big[2048];
	size_t n;
	int rc;

	if (!text || !m || !none)
		abort();
	memcpy(text, data, size);
	text[size] = 0;
	for (line = text; line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		if (!next) {
			last = line;
			break;
		}
		{
			char *err = NULL;

			n = tm_cmp_map_count(m);
			rc = tm_cmp_map_add(m, line, &err);
			if (rc == TM_OK) {
				if (err || tm_cmp_map_count(m) != n + 1 ||
				    strcmp(tm_cmp_map_rule(m, n), line))
					abort();
			} else if (rc == TM_ERR_ADDRESS) {
				if (!err || !*err || tm_cmp_map_count(m) != n)
					abort();
			} else if (rc != TM_ERR_NOMEM) {
				abort();
			}
			free(err);
		}
	}
	if (last) {
		rc = tm_cmp_map_apply(m, last, buf, sizeof(buf));
		if (rc == TM_OK && strlen(buf) >= sizeof(buf))
			abort();
		if (rc != TM_OK && rc != TM_ERR_TOO_LARGE && rc != TM_ERR_NOT_FOUND)
			abort();
		rc = tm_cmp_map_apply(none, last, big, sizeof(big));
		if (rc == TM_OK && strcmp(big, last))
			abort();
	}
	tm_cmp_map_free(m);
	tm_cmp_map_free(none);
	free(text);
	return 0;
}
