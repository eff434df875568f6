/*
 * tmrun-format.h -- constants and layouts of the .tmrun file format, shared
 * by writer.c, reader.c and recover.c.  doc/tmrun.md is the specification;
 * every number here appears there with the same name.
 */
#ifndef TMRUN_FORMAT_H
#define TMRUN_FORMAT_H

#include <stdint.h>
#include "tm-tmrun.h"

#define TMRUN_VERSION_MAJOR 1
#define TMRUN_VERSION_MINOR 3     /* 1.1: ANNOT records; 1.2: op events; 1.3: log2 histograms */

/* File header: 32 bytes at offset 0. */
#define TMRUN_FILE_HEADER_SIZE 32
/* "\x89TMRUN\r\n": the high byte and CR LF catch 7-bit and text-mode mangling, as in PNG. */
static const uint8_t tmrun_magic[8] = { 0x89, 'T', 'M', 'R', 'U', 'N', '\r', '\n' };

/* Chunk header: 88 bytes before every chunk payload. */
#define TMRUN_CHUNK_HEADER_SIZE 88
#define TMRUN_CHUNK_MAGIC 0x4b434d54u      /* "TMCK" little-endian */

enum tmrun_chunk_type {
	TMRUN_CHUNK_META = 1,      /* run metadata and node definitions */
	TMRUN_CHUNK_EVENTS = 2,    /* events, gaps, crashes */
	TMRUN_CHUNK_INDEX = 3,     /* one entry per chunk before it */
	TMRUN_CHUNK_SUMMARY = 4    /* totals over the file */
};

enum tmrun_codec {
	TMRUN_CODEC_NONE = 0,
	TMRUN_CODEC_ZSTD = 1
};

/* Caps on declared sizes: anything larger is TM_ERR_TOO_LARGE. */
#define TMRUN_MAX_CHUNK_RAW (256u << 20)     /* decompressed chunk payload */
#define TMRUN_MAX_CHUNK_STORED (257u << 20)  /* stored chunk payload */
#define TMRUN_MAX_RECORD (TMRUN_MAX_CHUNK_RAW)
#define TMRUN_MAX_STRING 65536u
#define TMRUN_MAX_INDEX_ENTRIES (1u << 26)

/* Trailer: the last 32 bytes of a properly closed file. */
#define TMRUN_TRAILER_SIZE 32
static const uint8_t tmrun_end_magic[8] = { 'T', 'M', 'R', 'U', 'N', 'E', 'N', 'D' };

/* One index entry: chunk offset + a copy of its header. */
#define TMRUN_INDEX_ENTRY_SIZE (8 + TMRUN_CHUNK_HEADER_SIZE)

/* A chunk header, decoded. */
struct tmrun_chunk {
	uint64_t offset;        /* file offset of the header */
	uint8_t type;
	uint8_t codec;
	uint16_t flags;
	uint32_t stored_len;
	uint32_t raw_len;
	uint32_t nrecords;
	uint32_t payload_crc;
	uint64_t first_seq;     /* smallest seq in the chunk (a gap counts its range) */
	uint64_t last_seq;      /* largest */
	uint64_t min_step, max_step;
	uint64_t min_time, max_time;
	uint32_t nevents;
	uint32_t ngaps;
	uint32_t ncrashes;
};

int tmrun_chunk_header_decode(const uint8_t *p, struct tmrun_chunk *c);
void tmrun_chunk_header_encode(uint8_t *p, const struct tmrun_chunk *c);

/* Totals over the EVENTS chunks of a list (the SUMMARY chunk's contents). */
void tmrun_summarise(const struct tmrun_chunk *chunks, size_t n, struct tm_summary *s);

/* For tm_recover(): the reader's chunk list, a full check of one chunk
 * (checksum, decompression, every record decodes), and the writer's
 * verbatim copy of a checked chunk. */
struct tm_reader;
struct tm_writer;
size_t tmrun_reader_nchunks(const struct tm_reader *r);
const struct tmrun_chunk *tmrun_reader_chunk(const struct tm_reader *r, size_t i);
int tmrun_reader_verify_chunk(struct tm_reader *r, size_t i, const uint8_t **stored);
int tmrun_writer_copy_chunk(struct tm_writer *w, const struct tmrun_chunk *c,
			    const uint8_t *stored);

/*
 * Recovery's reader (TMRUN_READER_SALVAGE): a damaged file header is noted,
 * not fatal; without a usable index the scan skips damaged regions to the
 * next intact chunk header instead of stopping; no tables are built (the
 * cursor functions must not be used).
 */
#define TMRUN_READER_SALVAGE (1u << 30)
struct tmrun_skip {
	uint64_t off, end;      /* [off, end) held no intact chunk header */
	int err;                /* what was wrong at off */
};
int tmrun_reader_open_salvage(const char *path, struct tm_reader **out, char **detail);
int tmrun_reader_header_damage(const struct tm_reader *r, const char **detail);
const struct tmrun_skip *tmrun_reader_skips(const struct tm_reader *r, size_t *n);
int tmrun_reader_check_chunk(struct tm_reader *r, const struct tmrun_chunk *c,
			     const uint8_t **stored);

#endif /* TMRUN_FORMAT_H */
