/*
 * test_wire.c -- the frame codec of doc/wire.md: many frames through the
 * incremental decoder fed byte by byte and in random splits, the layout on
 * the wire, and every hard error a hostile or broken peer can cause
 * (truncation is not an error: it is AGAIN).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tensormorph.h"
#include "tm-test.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

#define NFRAMES 200

struct sample {
	uint8_t type;
	uint32_t len;
	uint8_t *payload;
};

/* Frames of varied types and sizes (including empty), encoded back to back. */
static void make_stream(struct sample *s, struct tm_buf *b)
{
	int i;
	uint32_t j;

	memset(b, 0, sizeof(*b));
	for (i = 0; i < NFRAMES; i++) {
		s[i].type = (uint8_t)(1 + rnd() % 127);
		s[i].len = i % 10 == 0 ? 0 : (uint32_t)(rnd() % (i % 7 == 0 ? 5000 : 60));
		s[i].payload = malloc(s[i].len + 1);
		for (j = 0; j < s[i].len; j++)
			s[i].payload[j] = (uint8_t)rnd();
		CU_ASSERT_EQUAL(tm_frame_encode(b, s[i].type, 0, s[i].payload, s[i].len), TM_OK);
	}
}

static void free_stream(struct sample *s, struct tm_buf *b)
{
	int i;

	for (i = 0; i < NFRAMES; i++)
		free(s[i].payload);
	tm_buf_free(b);
}

/* Drains every whole frame, checking each against the next sample. */
static int drain(tm_frame_decoder *d, const struct sample *s, int *next)
{
	struct tm_frame f;
	int r;

	while ((r = tm_frame_decoder_next(d, &f)) == TM_OK) {
		if (*next >= NFRAMES)
			return -1;
		if (f.type != s[*next].type || f.flags != 0 || f.len != s[*next].len ||
		    (f.len && memcmp(f.payload, s[*next].payload, f.len)))
			return -1;
		++*next;
	}
	return r;
}

static void test_layout(void)
{
	struct tm_buf b;
	const uint8_t payload[3] = { 'a', 'b', 'c' };

	memset(&b, 0, sizeof(b));
	CU_ASSERT_EQUAL_FATAL(tm_frame_encode(&b, TM_REC_EVENT, 0, payload, 3), TM_OK);
	CU_ASSERT_EQUAL_FATAL(b.len, TM_WIRE_HEADER_SIZE + 3 + 4);
	CU_ASSERT_EQUAL(b.data[0], 0x54);       /* 'T' */
	CU_ASSERT_EQUAL(b.data[1], 0x4D);       /* 'M' */
	CU_ASSERT_EQUAL(b.data[2], TM_REC_EVENT);
	CU_ASSERT_EQUAL(b.data[3], 0);
	CU_ASSERT_EQUAL(b.data[4], 3);
	CU_ASSERT_EQUAL(b.data[5] | b.data[6] | b.data[7], 0);
	/* Header CRC covers bytes 0..7, the trailer the payload. */
	CU_ASSERT_EQUAL(b.data[8] | (b.data[9] << 8) | (b.data[10] << 16) |
			((uint32_t)b.data[11] << 24), tm_crc32c(0, b.data, 8));
	CU_ASSERT_EQUAL(b.data[15] | (b.data[16] << 8) | (b.data[17] << 16) |
			((uint32_t)b.data[18] << 24), tm_crc32c(0, "abc", 3));
	CU_ASSERT(!memcmp(b.data + 12, "abc", 3));
	/* Appends. */
	CU_ASSERT_EQUAL(tm_frame_encode(&b, 64, 0, NULL, 0), TM_OK);
	CU_ASSERT_EQUAL(b.len, 2 * TM_WIRE_HEADER_SIZE + 3 + 8);
	tm_buf_free(&b);
}

static void test_encode_rejects(void)
{
	struct tm_buf b;

	memset(&b, 0, sizeof(b));
	CU_ASSERT_EQUAL(tm_frame_encode(&b, 0, 0, "x", 1), TM_ERR_INVALID_ARG);
	CU_ASSERT_EQUAL(tm_frame_encode(&b, 128, 0, "x", 1), TM_ERR_INVALID_ARG);
	CU_ASSERT_EQUAL(tm_frame_encode(&b, 1, 1, "x", 1), TM_ERR_INVALID_ARG);
	CU_ASSERT_EQUAL(tm_frame_encode(&b, 1, 0, NULL, 1), TM_ERR_INVALID_ARG);
	CU_ASSERT_EQUAL(tm_frame_encode(NULL, 1, 0, "x", 1), TM_ERR_INVALID_ARG);
	CU_ASSERT_EQUAL(b.len, 0);
	tm_buf_free(&b);
}

static void test_whole_stream(void)
{
	struct sample s[NFRAMES];
	struct tm_buf b;
	tm_frame_decoder *d = tm_frame_decoder_new(0);
	int next = 0;

	make_stream(s, &b);
	CU_ASSERT_EQUAL(tm_frame_decoder_feed(d, b.data, b.len), TM_OK);
	CU_ASSERT_EQUAL(tm_frame_decoder_pending(d), b.len);
	CU_ASSERT_EQUAL(drain(d, s, &next), TM_ERR_AGAIN);
	CU_ASSERT_EQUAL(next, NFRAMES);
	CU_ASSERT_EQUAL(tm_frame_decoder_pending(d), 0);
	tm_frame_decoder_free(d);
	free_stream(s, &b);
}

static void test_byte_by_byte(void)
{
	struct sample s[NFRAMES];
	struct tm_buf b;
	tm_frame_decoder *d = tm_frame_decoder_new(0);
	int next = 0, r = TM_ERR_AGAIN;
	size_t i;

	make_stream(s, &b);
	for (i = 0; i < b.len && r == TM_ERR_AGAIN; i++) {
		CU_ASSERT_EQUAL_FATAL(tm_frame_decoder_feed(d, b.data + i, 1), TM_OK);
		r = drain(d, s, &next);
	}
	CU_ASSERT_EQUAL(r, TM_ERR_AGAIN);
	CU_ASSERT_EQUAL(next, NFRAMES);
	CU_ASSERT_EQUAL(tm_frame_decoder_pending(d), 0);
	tm_frame_decoder_free(d);
	free_stream(s, &b);
}

static void test_random_splits(void)
{
	struct sample s[NFRAMES];
	struct tm_buf b;
	int round;

	make_stream(s, &b);
	for (round = 0; round < 20; round++) {
		tm_frame_decoder *d = tm_frame_decoder_new(0);
		int next = 0, r = TM_ERR_AGAIN;
		size_t i = 0;

		while (i < b.len && r == TM_ERR_AGAIN) {
			size_t n = 1 + rnd() % (round < 10 ? 40 : 9000);

			if (n > b.len - i)
				n = b.len - i;
			CU_ASSERT_EQUAL_FATAL(tm_frame_decoder_feed(d, b.data + i, n), TM_OK);
			i += n;
			r = drain(d, s, &next);
		}
		CU_ASSERT_EQUAL(r, TM_ERR_AGAIN);
		CU_ASSERT_EQUAL(next, NFRAMES);
		tm_frame_decoder_free(d);
	}
	free_stream(s, &b);
}

/* A frame cut anywhere is AGAIN, never an error, and completes later. */
static void test_truncated(void)
{
	struct tm_buf b;
	struct tm_frame f;
	size_t cut;

	memset(&b, 0, sizeof(b));
	CU_ASSERT_EQUAL_FATAL(tm_frame_encode(&b, 5, 0, "hello", 5), TM_OK);
	for (cut = 0; cut < b.len; cut++) {
		tm_frame_decoder *d = tm_frame_decoder_new(0);

		CU_ASSERT_EQUAL(tm_frame_decoder_feed(d, b.data, cut), TM_OK);
		CU_ASSERT_EQUAL(tm_frame_decoder_next(d, &f), TM_ERR_AGAIN);
		CU_ASSERT_EQUAL(tm_frame_decoder_next(d, &f), TM_ERR_AGAIN);
		CU_ASSERT_EQUAL(tm_frame_decoder_pending(d), cut);
		CU_ASSERT_EQUAL(tm_frame_decoder_feed(d, b.data + cut, b.len - cut), TM_OK);
		CU_ASSERT_EQUAL(tm_frame_decoder_next(d, &f), TM_OK);
		CU_ASSERT_EQUAL(f.len, 5);
		CU_ASSERT(!memcmp(f.payload, "hello", 5));
		tm_frame_decoder_free(d);
	}
	tm_buf_free(&b);
}

/* Feeds bytes and expects err from next(), sticky for every later call. */
static void expect_poison(const uint8_t *p, size_t len, uint32_t max, int err)
{
	tm_frame_decoder *d = tm_frame_decoder_new(max);
	struct tm_frame f;
	uint8_t more[TM_WIRE_HEADER_SIZE] = { 0x54, 0x4D };

	CU_ASSERT_EQUAL(tm_frame_decoder_feed(d, p, len), TM_OK);
	CU_ASSERT_EQUAL(tm_frame_decoder_next(d, &f), err);
	CU_ASSERT_EQUAL(tm_frame_decoder_next(d, &f), err);
	CU_ASSERT_EQUAL(tm_frame_decoder_feed(d, more, sizeof(more)), err);
	tm_frame_decoder_free(d);
}

static void test_bad_magic(void)
{
	struct tm_buf b;

	memset(&b, 0, sizeof(b));
	CU_ASSERT_EQUAL_FATAL(tm_frame_encode(&b, 3, 0, "xyz", 3), TM_OK);
	b.data[1] = 'X';
	expect_poison(b.data, b.len, 0, TM_ERR_BAD_MAGIC);
	/* Detected from the first wrong byte, without waiting for a header. */
	expect_poison((const uint8_t *)"GET / HTTP/1.1", 1, 0, TM_ERR_BAD_MAGIC);
	expect_poison((const uint8_t *)"TX", 2, 0, TM_ERR_BAD_MAGIC);
	tm_buf_free(&b);
}

static void test_crc(void)
{
	struct tm_buf b;
	size_t i;

	memset(&b, 0, sizeof(b));
	CU_ASSERT_EQUAL_FATAL(tm_frame_encode(&b, 3, 0, "payload", 7), TM_OK);
	/* A flipped bit anywhere past the magic is a CRC error: the header CRC
	 * is checked before any header field is believed. */
	for (i = 2; i < b.len; i++) {
		tm_frame_decoder *d = tm_frame_decoder_new(0);
		struct tm_frame f;
		int r;

		b.data[i] ^= 0x10;
		tm_frame_decoder_feed(d, b.data, b.len);
		r = tm_frame_decoder_next(d, &f);
		CU_ASSERT(r == TM_ERR_CRC);
		b.data[i] ^= 0x10;
		tm_frame_decoder_free(d);
	}
	b.data[b.len - 1] ^= 1;    /* trailer */
	expect_poison(b.data, b.len, 0, TM_ERR_CRC);
	b.data[b.len - 1] ^= 1;
	b.data[13] ^= 0x80;        /* payload */
	expect_poison(b.data, b.len, 0, TM_ERR_CRC);
	tm_buf_free(&b);
}

/* Writes a header with a valid CRC, so the field checks behind it are reached. */
static void header(uint8_t *h, uint8_t type, uint8_t flags, uint32_t len)
{
	uint32_t crc;

	h[0] = 0x54;
	h[1] = 0x4D;
	h[2] = type;
	h[3] = flags;
	h[4] = (uint8_t)len;
	h[5] = (uint8_t)(len >> 8);
	h[6] = (uint8_t)(len >> 16);
	h[7] = (uint8_t)(len >> 24);
	crc = tm_crc32c(0, h, 8);
	h[8] = (uint8_t)crc;
	h[9] = (uint8_t)(crc >> 8);
	h[10] = (uint8_t)(crc >> 16);
	h[11] = (uint8_t)(crc >> 24);
}

static void test_reserved(void)
{
	uint8_t h[TM_WIRE_HEADER_SIZE];
	int bit;

	for (bit = 0; bit < 8; bit++) {
		header(h, 1, (uint8_t)(1u << bit), 0);
		expect_poison(h, sizeof(h), 0, TM_ERR_RESERVED);
	}
	header(h, 0, 0, 0);
	expect_poison(h, sizeof(h), 0, TM_ERR_RESERVED);
	header(h, 128, 0, 0);
	expect_poison(h, sizeof(h), 0, TM_ERR_RESERVED);
	header(h, 255, 0, 0);
	expect_poison(h, sizeof(h), 0, TM_ERR_RESERVED);
}

/* An oversized declared length is refused from the header alone. */
static void test_too_large(void)
{
	uint8_t h[TM_WIRE_HEADER_SIZE];
	tm_frame_decoder *d;
	struct tm_buf b;
	struct tm_frame f;
	uint8_t payload[100];

	header(h, 1, 0, TM_WIRE_DEFAULT_MAX_FRAME + 1);
	expect_poison(h, sizeof(h), 0, TM_ERR_TOO_LARGE);
	header(h, 1, 0, UINT32_MAX);
	expect_poison(h, sizeof(h), 0, TM_ERR_TOO_LARGE);
	header(h, 1, 0, 101);
	expect_poison(h, sizeof(h), 100, TM_ERR_TOO_LARGE);

	/* Exactly at the cap is fine. */
	memset(&b, 0, sizeof(b));
	memset(payload, 7, sizeof(payload));
	CU_ASSERT_EQUAL_FATAL(tm_frame_encode(&b, 1, 0, payload, 100), TM_OK);
	d = tm_frame_decoder_new(100);
	CU_ASSERT_EQUAL(tm_frame_decoder_feed(d, b.data, b.len), TM_OK);
	CU_ASSERT_EQUAL(tm_frame_decoder_next(d, &f), TM_OK);
	CU_ASSERT_EQUAL(f.len, 100);
	tm_frame_decoder_free(d);
	tm_buf_free(&b);
}

/* Good frames before a bad one are delivered; the error comes after them. */
static void test_error_after_good(void)
{
	tm_frame_decoder *d = tm_frame_decoder_new(0);
	struct tm_buf b;
	struct tm_frame f;

	memset(&b, 0, sizeof(b));
	tm_frame_encode(&b, 1, 0, "one", 3);
	tm_frame_encode(&b, 2, 0, "two", 3);
	CU_ASSERT_EQUAL_FATAL(tm_buf_reserve(&b, 4), TM_OK);
	memcpy(b.data + b.len, "junk", 4);
	b.len += 4;
	tm_frame_decoder_feed(d, b.data, b.len);
	CU_ASSERT_EQUAL(tm_frame_decoder_next(d, &f), TM_OK);
	CU_ASSERT_EQUAL(f.type, 1);
	CU_ASSERT_EQUAL(tm_frame_decoder_next(d, &f), TM_OK);
	CU_ASSERT_EQUAL(f.type, 2);
	CU_ASSERT(!memcmp(f.payload, "two", 3));
	CU_ASSERT_EQUAL(tm_frame_decoder_next(d, &f), TM_ERR_BAD_MAGIC);
	CU_ASSERT_EQUAL(tm_frame_decoder_pending(d), 4);
	tm_frame_decoder_free(d);
	tm_buf_free(&b);
}

static void test_null_args(void)
{
	tm_frame_decoder *d = tm_frame_decoder_new(0);
	struct tm_frame f;

	tm_frame_decoder_free(NULL);
	CU_ASSERT_EQUAL(tm_frame_decoder_pending(NULL), 0);
	CU_ASSERT_EQUAL(tm_frame_decoder_next(NULL, &f), TM_ERR_INVALID_ARG);
	CU_ASSERT_EQUAL(tm_frame_decoder_next(d, NULL), TM_ERR_INVALID_ARG);
	CU_ASSERT_EQUAL(tm_frame_decoder_feed(d, NULL, 1), TM_ERR_INVALID_ARG);
	CU_ASSERT_EQUAL(tm_frame_decoder_feed(d, NULL, 0), TM_OK);
	CU_ASSERT_EQUAL(tm_frame_decoder_next(d, &f), TM_ERR_AGAIN);
	tm_frame_decoder_free(d);
}

int main(void)
{
	static const struct tm_test_case cases[] = {
		TM_TEST(test_layout),
		TM_TEST(test_encode_rejects),
		TM_TEST(test_whole_stream),
		TM_TEST(test_byte_by_byte),
		TM_TEST(test_random_splits),
		TM_TEST(test_truncated),
		TM_TEST(test_bad_magic),
		TM_TEST(test_crc),
		TM_TEST(test_reserved),
		TM_TEST(test_too_large),
		TM_TEST(test_error_after_good),
		TM_TEST(test_null_args),
		{ NULL, NULL }
	};
	return tm_test_run("wire", cases);
}
