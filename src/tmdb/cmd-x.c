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
 * x [/NFU] ADDR:SLOT[index]
 * Examines N units from index on (row-major, across rows), printed as F.
 * As GDB's x reads memory: the unit is the element unless U (b h w g)
 * says otherwise, and the integer letters (x d u o t c a z) show a unit's
 * bits as an integer of its size, so x/d of f32 1.0 is 1065353216; f and e
 * show the element's value (a unit of 4 or 8 bytes as a float or double).
 */
static uint64_t unit_bits(const struct tm_tensor *t, uint64_t off, int unit)
{
	const uint8_t *q = (const uint8_t *)t->payload + off;
	uint64_t u = 0;
	int k;

	for (k = 0; k < unit; k++)
		u |= (uint64_t)q[k] << (8 * k);
	return u;
}

static int cmd_x_exec(struct tm_session *s, const char *args, int from_tty)
{
	const struct tm_tensor *t;
	const struct tm_event *ev;
	uint64_t count = 1, numel, start = 0, i, stride[TM_MAX_RANK], nunits, byte0;
	const char *p = tm_skip_ws(args);
	struct tm_fmt f;
	char fmt = 'f';
	struct tref r;
	struct rbuf b;
	int d, per_line, esize, unit, again = 0;
	char cont[TM_ADDRESS_MAX + 256];
	const char *fmt_text = "";
	size_t fmt_len = 0;

	(void)from_tty;
	memset(&f, 0, sizeof(f));
	if (!*p || (*p == '/' && p[strcspn(p, " \t") - 1] != 'i' &&
		    !*tm_skip_ws(p + strcspn(p, " \t")))) {
		/* GDB: x without an address goes on after the last one, in the
		 * format given or the last one's */
		size_t o;
		uint64_t rem = s->x_next;

		if (!s->x_name) {
			tm_error(s, "Argument required (starting display address).");
			return -1;
		}
		again = 1;
		o = (size_t)snprintf(cont, sizeof(cont), "%s %s", *p ? p : s->x_fmtstr,
				     s->x_name);
		if (s->x_rank > 0 && o < sizeof(cont)) {
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
			if (o < sizeof(cont))
				snprintf(cont + o, sizeof(cont) - o, "]");
		}
		p = tm_skip_ws(cont);
	}
	if (*p == '/') {
		fmt_text = p;
		fmt_len = strcspn(p, " \t");
	}
	if (*p == '/') {
		const char *q = p + 1;

		while (isdigit((unsigned char)*q))
			q++;
		if (*q == 'i' && (!q[1] || q[1] == ' ' || q[1] == '\t'))
			return tm_op_examine(s, strtoull(p + 1, NULL, 10) ?
						strtoull(p + 1, NULL, 10) : 1, q + 1);      /* cmd-ops.c */
		if (tm_fmt_parse(s, &p, &f, "x", 1))
			return -1;
		count = f.count;
		if (f.letter)
			fmt = f.letter;
		if (fmt == 's' || fmt == 'i') {
			tm_error(s, "Format \"%c\" does not apply to tensor elements "
				 "(use x, d, u, o, t, c, a, z, f or e).", fmt);
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
	esize = (int)tm_dtype_size(t->dtype);
	unit = f.size ? f.size : esize;
	byte0 = start * (uint64_t)esize;
	/* view_payload_ok: the payload holds numel elements */
	nunits = t->payload_len > byte0 ? (t->payload_len - byte0) / (uint64_t)unit : 0;
	if (!nunits) {
		tm_error(s, "No elements there.");
		return -1;
	}
	if (count > nunits)
		count = nunits;
	per_line = fmt == 'f' || fmt == 'e' ? 4 : 8;
	rb_init(&b);
	for (i = 0; i < count; i++) {
		uint64_t off = byte0 + i * (uint64_t)unit;
		uint64_t e = off / (uint64_t)esize, bits = unit_bits(t, off, unit);
		double v;

		if (i % (uint64_t)per_line == 0) {
			uint64_t rem = e;

			if (i)
				rb_puts(&b, "\n");
			rb_printf(&b, "%s[", r.focus ? "tensor" : r.name);
			for (d = 0; d < t->rank; d++) {
				rb_printf(&b, "%s%" PRIu64, d ? "," : "", rem / stride[d]);
				rem %= stride[d];
			}
			rb_puts(&b, "]");
			if (off % (uint64_t)esize)
				rb_printf(&b, "+%" PRIu64, off % (uint64_t)esize);
			rb_puts(&b, ":");
		}
		if (fmt == 'f' || fmt == 'e') {
			union { uint32_t u; float f; } f32;
			union { uint64_t u; double d; } f64;

			if (unit == esize) {
				v = tm_tensor_element(t, e);
			} else if (unit == 4) {
				f32.u = (uint32_t)bits;
				v = f32.f;
			} else if (unit == 8) {
				f64.u = bits;
				v = f64.d;
			} else {
				char num[80];

				tm_fmt_int((int64_t)bits, 'd', unit, num, sizeof(num));
				rb_printf(&b, "\t%s", num);
				continue;
			}
			if (isnan(v) || isinf(v))
				rb_printf(&b, "\t%s", isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
			else if (fmt == 'e')
				rb_printf(&b, "\t%e", v);
			else
				rb_printf(&b, "\t%g", v);
		} else {
			char num[80];

			/* GDB's x pads hex to the unit's width */
			tm_fmt_int((int64_t)bits, fmt == 'x' ? 'z' : fmt, unit, num, sizeof(num));
			rb_printf(&b, "\t%s", num);
		}
	}
	rb_puts(&b, "\n");
	view_flush_rb(s, &b);
	/* where a repeated x goes on: the element after the last unit shown */
	if (!again) {
		size_t nl = strcspn(p, "[");

		while (nl > 0 && isspace((unsigned char)p[nl - 1]))
			nl--;
		free(s->x_name);
		s->x_name = strndup(p, nl);
	}
	snprintf(s->x_fmtstr, sizeof(s->x_fmtstr), "%.*s",
		 fmt_len < sizeof(s->x_fmtstr) ? (int)fmt_len : 0, fmt_text);
	s->x_next = (byte0 + count * (uint64_t)unit + (uint64_t)esize - 1) / (uint64_t)esize;
	s->x_rank = t->rank;
	for (d = 0; d < t->rank; d++)
		s->x_shape[d] = t->shape[d];
	return 0;
}

const struct cmd_entry cmd_x_entry = {
	.name = "x",
	.usage = "x/NFU ADDR:SLOT[index]",
	.help = "Examine elements of a captured tensor.\n"
		"N units from index on, row-major, in format F: f (default) or e\n"
		"(values), or x d u o t c a z (each unit's bits as an integer, as\n"
		"GDB reads memory); U is the unit, b h w g (default: the element).\n"
		"E.g. \"x/8f model.layers.2:out[0,3,0]\", \"x/4xb tensor\".\n"
		"x/Ni lists N ops of the module call at the playhead around it (\"=>\"\n"
		"marks the current one) with their source lines.",
	.exec = cmd_x_exec, .flags = CMD_NEEDS_TRACE | CMD_FORMAT, .klass = "data",
};
