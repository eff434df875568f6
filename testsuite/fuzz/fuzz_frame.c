/*
 * fuzz_frame.c -- libFuzzer target for the wire frame decoder (doc/wire.md).
 *
 * The input is a byte stream as a peer could send it.  The first byte seeds
 * the split sizes, so the fuzzer also explores how the stream is cut into
 * reads.  Properties checked on every input, besides "no crash, no
 * out-of-bounds read, no leak" (ASan, UBSan):
 *   - the frames and the final error are the same whatever the splits;
 *   - every frame returned re-encodes to exactly the bytes it came from;
 *   - an error is sticky: the decoder stays poisoned.
 * Built with standalone.c it replays the corpus in `make check`.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tensormorph.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Small caps keep the fuzzer fast and reach the TOO_LARGE path. */
#define FUZZ_MAX_FRAME 4096
#define FUZZ_MAX_FRAMES 1024

struct result {
	size_t nframes;
	size_t consumed;        /* bytes taken by whole frames */
	int err;                /* last code from next(): AGAIN or a hard error */
};

/* Decodes data fed in pieces (sizes from the seed); whole feed if seed 0. */
static void decode(const uint8_t *data, size_t size, unsigned seed,
		   struct result *res)
{
	tm_frame_decoder *d = tm_frame_decoder_new(FUZZ_MAX_FRAME);
	struct tm_buf b = { 0 };
	struct tm_frame f;
	size_t off = 0;
	int r = TM_ERR_AGAIN;

	if (!d)
		abort();
	memset(res, 0, sizeof(*res));
	while (off < size && r == TM_ERR_AGAIN) {
		size_t n = seed ? 1 + (seed = seed * 1103515245u + 12345u) % 64 : size;

		if (n > size - off)
			n = size - off;
		r = tm_frame_decoder_feed(d, data + off, n);
		if (r)
			abort();        /* only a poisoned decoder refuses input */
		off += n;
		while ((r = tm_frame_decoder_next(d, &f)) == TM_OK) {
			b.len = 0;
			if (tm_frame_encode(&b, f.type, f.flags, f.payload, f.len))
				abort();
			if (res->consumed + b.len > size ||
			    memcmp(b.data, data + res->consumed, b.len))
				abort();
			res->consumed += b.len;
			if (++res->nframes > FUZZ_MAX_FRAMES)
				break;
		}
	}
	res->err = r;
	if (r != TM_OK && r != TM_ERR_AGAIN) {
		if (tm_frame_decoder_next(d, &f) != r)
			abort();
		if (tm_frame_decoder_feed(d, "TM", 2) != r)
			abort();
	} else if (tm_frame_decoder_pending(d) != off - res->consumed) {
		abort();
	}
	tm_buf_free(&b);
	tm_frame_decoder_free(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct result whole, split;
	unsigned seed;

	if (size < 1)
		return 0;
	seed = data[0] | 1u;
	data++;
	size--;
	decode(data, size, 0, &whole);
	decode(data, size, seed, &split);
	/* A frame cap stops early; otherwise the splits must not matter. */
	if (whole.nframes <= FUZZ_MAX_FRAMES &&
	    (whole.nframes != split.nframes || whole.consumed != split.consumed ||
	     whole.err != split.err))
		abort();
	return 0;
}
