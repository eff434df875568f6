/*
 * cmd-x.c -- `x`, GDB's examine, on tensor elements.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tmdb.h"
#include "render.h"
#include "view.h"
#include "view-int.h"

/* ------------------------------------------------------------- x */

/*
 * x [/NF] ADDR:SLOT[index]
 * Examines N elements from index on (row-major, across rows), printed as F:
 * f (default, %g), e (%e), d (integer), x (the element's raw bits in hex).
 */
static int cmd_x_exec(struct tm_session *s, const char *args, int from_tty)
{
	const struct tm_tensor *t;
	const struct tm_event *ev;
	uint64_t count = 1, numel, start = 0, i, stride[TM_MAX_RANK];
	const char *p = tm_skip_ws(args);
	char fmt = 'f';
	struct tref r;
	struct rbuf b;
	int d, per_line, again = 0;
	char cont[TM_ADDRESS_MAX + 256];

	(void)from_tty;
	if (!*p || (*p == '/' && p[strcspn(p, " \t") - 1] != 'i' &&
		    !*tm_skip_ws(p + strcspn(p, " \t")))) {
		/* GDB: x without an address goes on after the last one */
		size_t o;
		uint64_t rem;

		if (!s->x_name) {
			tm_error(s, "Argument required (starting display address).");
			return -1;
		}
		again = 1;
		fmt = s->x_fmt;
		count = s->x_count;
		o = (size_t)snprintf(cont, sizeof(cont), "%s", s->x_name);
		if (s->x_rank > 0) {
			rem = s->x_next;
			o += (size_t)snprintf(cont + o, sizeof(cont) - o, "[");
			for (d = 0; d < s->x_rank && o < sizeof(cont); d++) {
				uint64_t st = 1;
				int k;

				for (k = d + 1; k < s->x_rank; k++)
					st *= (uint64_t)s->x_shape[k];
				o += (size_t)snprintf(cont + o, sizeof(cont) - o, "%s%" PRIu64,
						      d ? "," : "", st ? rem / st : 0);
				rem = st ? rem % st : 0;
			}
			snprintf(cont + o, sizeof(cont) - o, "]");
		}
		if (*p == '/') {
			char *end;

			p++;
			if (isdigit((unsigned char)*p)) {
				count = strtoull(p, &end, 10);
				p = end;
			}
			if (*p && *p != ' ' && *p != '\t')
				fmt = *p;
		}
		p = cont;
	}
	if (!again && *p == '/') {
		char *end;

		p++;
		if (isdigit((unsigned char)*p)) {
			count = strtoull(p, &end, 10);
			p = end;
		}
		if (*p && *p != ' ' && *p != '\t')
			fmt = *p++;
		if (fmt == 'i' && (!*p || *p == ' ' || *p == '\t'))
			return tm_op_examine(s, count, p);      /* cmd-ops.c */
		if (!strchr("fedx", fmt) || (*p && *p != ' ' && *p != '\t')) {
			tm_error(s, "Invalid format: use x/NF with F one of f, e, d, x.");
			return -1;
		}
		if (!count || count > 100000) {
			tm_error(s, "Bad count %" PRIu64 " (1..100000).", count);
			return -1;
		}
	}
	if (view_parse_tref(s, p, &r))
		return -1;
	t = view_get_tensor(s, &r, &ev);
	if (!t || view_payload_ok(s, &r, t))
		return -1;
	numel = view_tensor_numel(t);
	if (r.nslice > t->rank) {
		tm_error(s, "%s has %d dimension%s, %d indices given.", r.name,
			 t->rank, t->rank == 1 ? "" : "s", r.nslice);
		return -1;
	}
	for (d = t->rank - 1; d >= 0; d--)
		stride[d] = d == t->rank - 1 ? 1 : stride[d + 1] * (uint64_t)t->shape[d + 1];
	for (d = 0; d < r.nslice; d++) {
		int64_t ix = r.lo[d] < 0 ? r.lo[d] + t->shape[d] : r.lo[d];

		if (!r.is_index[d] || ix < 0 || ix >= t->shape[d]) {
			tm_error(s, "Index out of range (or a slice) in dimension %d "
				 "of size %" PRId64 ".", d, t->shape[d]);
			return -1;
		}
		start += (uint64_t)ix * stride[d];
	}
	if (start >= numel) {
		tm_error(s, "No elements there.");
		return -1;
	}
	if (count > numel - start)
		count = numel - start;
	per_line = fmt == 'x' || fmt == 'd' ? 8 : 4;
	rb_init(&b);
	for (i = 0; i < count; i++) {
		uint64_t e = start + i;
		double v = view_elem(t, e);

		if (i % (uint64_t)per_line == 0) {
			uint64_t rem = e;

			if (i)
				rb_puts(&b, "\n");
			rb_printf(&b, "%s[", r.focus ? "tensor" : r.name);
			for (d = 0; d < t->rank; d++) {
				rb_printf(&b, "%s%" PRIu64, d ? "," : "", rem / stride[d]);
				rem %= stride[d];
			}
			rb_puts(&b, "]:");
		}
		if (fmt == 'x') {
			const uint8_t *q = (const uint8_t *)t->payload +
					   e * tm_dtype_size(t->dtype);
			size_t k, sz = tm_dtype_size(t->dtype);

			rb_puts(&b, "\t0x");
			for (k = sz; k > 0; k--)
				rb_printf(&b, "%02x", q[k - 1]);
		} else if (isnan(v) || isinf(v)) {
			rb_printf(&b, "\t%s", isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
		} else if (fmt == 'd') {
			rb_printf(&b, "\t%.0f", trunc(v));
		} else if (fmt == 'e') {
			rb_printf(&b, "\t%e", v);
		} else {
			rb_printf(&b, "\t%g", v);
		}
	}
	rb_puts(&b, "\n");
	view_flush_rb(s, &b);
	/* where a repeated x goes on */
	if (!again) {
		size_t nl = strcspn(p, "[");

		while (nl > 0 && isspace((unsigned char)p[nl - 1]))
			nl--;
		free(s->x_name);
		s->x_name = strndup(p, nl);
	}
	s->x_fmt = fmt;
	s->x_count = count;
	s->x_next = start + count;
	s->x_rank = t->rank;
	for (d = 0; d < t->rank; d++)
		s->x_shape[d] = t->shape[d];
	return 0;
}

const struct cmd_entry cmd_x_entry = {
	.name = "x",
	.usage = "x/NF ADDR:SLOT[index]",
	.help = "Examine elements of a captured tensor.\n"
		"N elements from index on, row-major, in format F: f (default), e,\n"
		"d or x (raw bits).  E.g. \"x/8f model.layers.2:out[0,3,0]\".\n"
		"x/Ni lists N ops of the module call at the playhead around it (\"=>\"\n"
		"marks the current one) with their source lines.",
	.exec = cmd_x_exec, .flags = CMD_NEEDS_TRACE | CMD_FORMAT, .klass = "data",
};
