/*
 * fuzz_address.c -- libFuzzer target for node addresses (src/lib/address.c,
 * nodetab.c): the text users type into break, print, watch, TQL and MI.
 *
 * Input: "PATTERN\nPATH" (PATH defaults to a fixed node address).  Checked
 * beyond "no crash": the canonical spelling is a fixed point of parse and
 * format and matches the same paths; a concrete address matches its own
 * path; a parse error has a column inside the text and a message; the
 * bounded edit distance is symmetric and agrees with the unbounded one;
 * suggestions over a table holding PATH do not fail.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensormorph.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char buf[TM_ADDRESS_MAX + 64], buf2[TM_ADDRESS_MAX + 64];
	char *s = malloc(size + 1), *pat, *path;
	const char *msg, *out[4];
	tm_address *a, *b;
	tm_nodetab *t;
	struct tm_node n;
	size_t d1, d2, full;
	int col;

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	pat = s;
	path = strchr(s, '\n');
	if (path)
		*path++ = '\0';
	else
		path = "model.layers.3.mlp";

	if (tm_address_parse(pat, &a, &col, &msg) == TM_OK) {
		if (tm_address_format(a, buf, sizeof(buf)) ||
		    tm_address_parse(buf, &b, &col, &msg) ||
		    tm_address_format(b, buf2, sizeof(buf2)) || strcmp(buf, buf2))
			abort();
		if (tm_address_match_path(a, path) != tm_address_match_path(b, path))
			abort();
		if (!tm_address_is_pattern(a) && tm_address_rank(a) < 0 &&
		    !tm_address_match_path(a, tm_address_path(a)))
			abort();
		/* "@R:" matches only nodes prefixed "@R:" (multi-rank tables) */
		if (!tm_address_is_pattern(a) && tm_address_rank(a) >= 0) {
			snprintf(buf2, sizeof(buf2), "@%d:%s", tm_address_rank(a),
				 tm_address_path(a));
			if (!tm_address_match_path(a, buf2) ||
			    tm_address_match_path(a, tm_address_path(a)))
				abort();
		}
		tm_address_free(b);
		tm_address_free(a);
	} else if (col < 0 || (size_t)col > strlen(pat) || !msg) {
		abort();
	}

	d1 = tm_edit_distance(pat, path, 8);
	d2 = tm_edit_distance(path, pat, 8);
	full = tm_edit_distance(pat, path, SIZE_MAX);
	if (d1 != d2 || (full <= 8 ? full : 9) != d1)
		abort();

	t = tm_nodetab_new();
	if (t) {
		memset(&n, 0, sizeof(n));
		n.address = "model";
		tm_nodetab_add(t, &n, NULL);
		n.address = "model.layers.3.mlp";
		tm_nodetab_add(t, &n, NULL);
		n.address = path;
		if (tm_nodetab_add(t, &n, NULL) == TM_OK && !tm_nodetab_find(t, path))
			abort();
		tm_address_suggest(t, pat, out, 4);
		tm_nodetab_free(t);
	}
	free(s);
	return 0;
}
