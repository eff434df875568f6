/*
 * fuzz_mi.c -- libFuzzer target for tmdb's GDB/MI input parser
 * (src/tmdb/mi-parse.c) and c-string encoder (src/tmdb/mi-out.c), the code
 * that reads what a front end writes to tmdb's stdin.
 *
 * Input: one command line (any bytes; a newline is part of the line, as
 * the parser must refuse it no worse than anything else).  Checked beyond
 * "no crash":
 *   - a failed parse has a message, and only a token;
 *   - an MI command re-encodes (token, "-op", each parameter as a c-string)
 *     to a line that parses back to the same token, op and parameters: the
 *     encoder and the decoder agree on every byte value;
 *   - encoded output is printable ASCII only (what an MI consumer may
 *     assume of every output line);
 *   - a CLI command's text is the input without token and outer blanks.
 * The two files are libc-only and compiled in here, so that this target
 * needs neither the session nor the library.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mi.h"

/* The code under test, built into this target (-I src/tmdb). */
#include "mi-parse.c"
#include "mi-out.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_printable(const struct mi_buf *b)
{
	size_t i;

	for (i = 0; i < b->len; i++)
		if ((unsigned char)b->p[i] < 0x20 || (unsigned char)b->p[i] > 0x7e)
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mi_parse p, q;
	struct mi_buf line = { 0 }, rec = { 0 };
	char err[256], err2[256];
	size_t i;

	if (size > MI_LINE_MAX + 16)
		return 0;
	err[0] = 0;
	if (mi_parse((const char *)data, size, &p, err, sizeof(err))) {
		if (!err[0] || p.op || p.argc || strlen(p.token) > MI_TOKEN_MAX)
			abort();
		mi_parse_free(&p);
		return 0;
	}
	if (!p.op)
		abort();
	if (p.is_cli) {
		/* no token digits left at the front, no blanks at either end */
		size_t l = strlen(p.op);

		if (l && (p.op[0] == ' ' || p.op[0] == '\t' ||
			  p.op[l - 1] == ' ' || p.op[l - 1] == '\t'))
			abort();
		mi_parse_free(&p);
		return 0;
	}
	/* re-encode and parse again */
	mi_buf_puts(&line, p.token);
	mi_buf_puts(&line, "-");
	mi_buf_puts(&line, p.op);
	for (i = 0; i < p.argc; i++) {
		mi_buf_puts(&line, " ");
		mi_buf_cstr(&line, p.argv[i], strlen(p.argv[i]));
	}
	if (line.oom) {
		mi_buf_free(&line);
		mi_parse_free(&p);
		return 0;
	}
	check_printable(&line);
	if (line.len <= MI_LINE_MAX) {
		if (mi_parse(line.p, line.len, &q, err2, sizeof(err2)))
			abort();
		if (q.is_cli || strcmp(q.token, p.token) || strcmp(q.op, p.op) ||
		    q.argc != p.argc)
			abort();
		for (i = 0; i < p.argc; i++)
			if (strcmp(q.argv[i], p.argv[i]))
				abort();
		mi_parse_free(&q);
	}
	/* result and stream records built from the parameters stay printable */
	for (i = 0; i < p.argc; i++) {
		mi_kv(&rec, "value", p.argv[i]);
		mi_open(&rec, "list", '[');
		mi_val(&rec, p.argv[i]);
		mi_close(&rec, ']');
	}
	check_printable(&rec);
	mi_buf_reset(&rec);
	mi_stream(&rec, '~', (const char *)data, size);
	if (rec.len && rec.p[rec.len - 1] == '\n')
		rec.len--;
	if (!rec.oom)
		check_printable(&rec);
	mi_buf_free(&rec);
	mi_buf_free(&line);
	mi_parse_free(&p);
	return 0;
}
