/*
 * tm-internal.h -- helpers shared by the library's own files, not installed.
 *
 * Little-endian loads and stores, LEB128 varints with bounds checks, and the
 * visibility macro.  Everything reading untrusted bytes goes through the
 * checked cursor (struct tm_rd) so that a short or hostile buffer is an
 * error code, never an out-of-bounds read.
 */
#ifndef TM_INTERNAL_H
#define TM_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include "tm-types.h"

#define TM_UNUSED(x) ((void)(x))
#define TM_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#if defined(__GNUC__)
#define TM_LIKELY(x) __builtin_expect(!!(x), 1)
#define TM_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define TM_LIKELY(x) (x)
#define TM_UNLIKELY(x) (x)
#endif

static inline void tm_put_u16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void tm_put_u32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static inline void tm_put_u64(uint8_t *p, uint64_t v)
{
	tm_put_u32(p, (uint32_t)v);
	tm_put_u32(p + 4, (uint32_t)(v >> 32));
}

static inline uint16_t tm_get_u16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t tm_get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | ((uint32_t)p[1] << 8) |
	       ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline uint64_t tm_get_u64(const uint8_t *p)
{
	return (uint64_t)tm_get_u32(p) | ((uint64_t)tm_get_u32(p + 4) << 32);
}

/* Bounded read cursor over untrusted bytes.  Any overrun sets bad and makes
 * every later read return 0, so decoders check once at the end of a record. */
struct tm_rd {
	const uint8_t *p;
	const uint8_t *end;
	int bad;
};

static inline uint64_t tm_rd_uvarint(struct tm_rd *r)
{
	uint64_t v = 0;
	unsigned shift = 0;

	while (r->p < r->end) {
		uint8_t b = *r->p++;
		if (shift == 63 && b > 1) {
			r->bad = 1;
			return 0;
		}
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
		shift += 7;
		if (shift > 63) {
			r->bad = 1;
			return 0;
		}
	}
	r->bad = 1;
	return 0;
}

static inline uint8_t tm_rd_u8(struct tm_rd *r)
{
	if (r->p >= r->end) {
		r->bad = 1;
		return 0;
	}
	return *r->p++;
}

static inline double tm_rd_f64(struct tm_rd *r)
{
	double d;
	uint64_t u;

	if (r->end - r->p < 8) {
		r->bad = 1;
		r->p = r->end;
		return 0;
	}
	u = tm_get_u64(r->p);
	r->p += 8;
	memcpy(&d, &u, 8);
	return d;
}

/* Returns a pointer to n bytes inside the buffer, or NULL (and bad). */
static inline const uint8_t *tm_rd_bytes(struct tm_rd *r, uint64_t n)
{
	const uint8_t *s;

	if ((uint64_t)(r->end - r->p) < n) {
		r->bad = 1;
		r->p = r->end;
		return NULL;
	}
	s = r->p;
	r->p += n;
	return s;
}

static inline int64_t tm_zigzag_dec(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

static inline uint64_t tm_zigzag_enc(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

/* Writes v as LEB128 at p (at least 10 bytes available); returns bytes. */
static inline size_t tm_put_uvarint(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

/* Monotonic clock in ns (CLOCK_MONOTONIC). */
uint64_t tm_now_ns(void);

/* strdup that tolerates NULL. */
char *tm_strdup0(const char *s);

/* malloc'd printf. */
char *tm_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* address.c: 1 if s[0..len) is a canonical concrete node path ("model.fc1"):
 * no pattern, slot or #N.  The node table admits only these. */
int tm_path_valid(const char *s, size_t len);

/*
 * recorder.c <-> crash.c: a recorder's part of the fatal-signal report
 * (tm_recorder_crash_install).  tm_crash__install(w, r) installs the
 * handler for writer w (may be NULL) and recorder r; tm_crash__forget(r)
 * uninstalls it if r is the installed recorder; tm_crash__gen() counts
 * tm_crash_position calls.  tm_recorder__crash runs in the handler: writes
 * what the ring and the watched batch still hold, sets c's position, and
 * returns the server to tell (or NULL).
 */
struct tm_recorder;
struct tm_writer;
struct tm_server;
int tm_crash__install(struct tm_writer *w, struct tm_recorder *r);
void tm_crash__forget(const struct tm_recorder *r);
/* The recorder's writer now (flight mode opens it at a dump). */
struct tm_writer *tm_recorder__writer(struct tm_recorder *r);
uint64_t tm_crash__gen(void);
struct tm_server *tm_recorder__crash(struct tm_recorder *r, struct tm_crash *c,
				     int pos_set, uint64_t pos_gen);

/* nodetab.c: forgets the nodes with ids >= n (tm_recover). */
void tm_nodetab_truncate(tm_nodetab *t, uint32_t n);

/*
 * Histograms skipped (read past, have_hist 0) by a decoder, or by a
 * reader's: for readers of stats only, the reference of a comparison.
 */
struct tm_decoder;
struct tm_reader;
void tm_decoder_skip_hist(struct tm_decoder *d, int on);
void tm_reader_skip_hist(struct tm_reader *r, int on);

/*
 * Names thread th (15 characters at most), so that top -H, perf, py-spy
 * and gdb show the library's threads inside the user's process as what
 * they are.  Called by the creator, right after pthread_create.
 */
void tm_thread_name(pthread_t th, const char *name);

#endif /* TM_INTERNAL_H */
