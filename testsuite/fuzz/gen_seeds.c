/*
 * gen_seeds.c -- writes the seed corpora of the fuzz targets:
 * DIR/frame/ (wire streams, see fuzz_frame.c) and DIR/tmrun/ (traces, see
 * fuzz_tmrun.c): a few valid inputs made with the library's own encoder and
 * writer, and broken variants of them (cut, flipped, oversized, reserved
 * bits set).  `make -C testsuite fuzz-seeds` runs it over the source tree's
 * corpus; the output is deterministic apart from time fields, so rerun it
 * only when a format changes.  One tmrun seed is stored uncompressed
 * (codec 0): mutations of it reach the record decoder, which zstd and the
 * chunk CRCs otherwise shield (fuzz_tmrun.c also repairs CRCs).  Files have no .tmrun suffix on purpose
 * (.gitignore drops *.tmrun).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "tensormorph.h"
#include "tmrun-format.h"

static const char *outdir;

static void put(const char *sub, const char *name, const void *p, size_t n)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s/%s", outdir, sub, name);
	f = fopen(path, "wb");
	if (!f || fwrite(p, 1, n, f) != n || fclose(f)) {
		perror(path);
		exit(1);
	}
}

static uint8_t *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	uint8_t *p;
	long len;

	if (!f || fseek(f, 0, SEEK_END) || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
		perror(path);
		exit(1);
	}
	p = malloc((size_t)len + 1);
	if (!p || fread(p, 1, (size_t)len, f) != (size_t)len) {
		perror(path);
		exit(1);
	}
	fclose(f);
	*n = (size_t)len;
	return p;
}

static void check(int err, const char *what)
{
	if (err) {
		fprintf(stderr, "gen_seeds: %s: %s\n", what, tm_strerror(err));
		exit(1);
	}
}

/* One event with two tensors (stats and a histogram; a payload if asked). */
static void make_event(struct tm_event *e, struct tm_tensor *t, uint64_t seq,
		       uint32_t node, const float *payload, size_t n)
{
	memset(e, 0, sizeof(*e));
	memset(t, 0, 2 * sizeof(*t));
	e->seq = seq;
	e->step = seq / 10;
	e->phase = (seq / 5) & 1;
	e->kind = e->phase ? TM_EV_BWD : (seq & 1 ? TM_EV_EXIT : TM_EV_ENTER);
	e->level = payload ? 3 : 2;
	e->node = node;
	e->call = 1;
	e->time_ns = 1000 * seq;
	e->start_ns = 1000 * seq;
	e->end_ns = 1000 * seq + 500;
	e->ntensors = 2;
	e->tensors = t;
	t[0].slot.kind = TM_SLOT_OUT;
	t[0].dtype = TM_DT_F32;
	t[0].rank = 2;
	t[0].shape[0] = 2;
	t[0].shape[1] = (int64_t)(n / 2 ? n / 2 : 1);
	if (payload) {
		check(tm_stats_compute(&t[0], payload, n, TM_DT_F32, 2), "stats");
		t[0].payload = payload;
		t[0].payload_len = n * sizeof(float);
	} else {
		float v[4] = { (float)seq, -1.0f, 0.5f, (float)node };

		check(tm_stats_compute(&t[0], v, 4, TM_DT_F32, 2), "stats");
	}
	t[1].slot.kind = TM_SLOT_IN;
	t[1].slot.index = 1;
	t[1].dtype = TM_DT_BF16;
	t[1].rank = 1;
	t[1].shape[0] = 3;
	t[1].have = TM_STAT_BIT(TM_STAT_NUMEL) | TM_STAT_BIT(TM_STAT_NAN_COUNT);
	t[1].stat[TM_STAT_NUMEL] = 3;
	t[1].stat[TM_STAT_NAN_COUNT] = 1;
}

static const char *const node_names[] = {
	"model", "model.embed", "model.layers", "model.layers.0",
	"model.layers.0.fc1", "model.layers.0.fc1.weight", "model.head",
};

/* A small trace; chunk_bytes small enough to give several chunks. */
static void write_trace(const char *path, int finish, int with_payload, int nevents)
{
	struct tm_writer_opts o;
	struct tm_run_meta m;
	struct tm_event e;
	struct tm_tensor t[2];
	struct tm_gap g;
	struct tm_crash c;
	tm_writer *w;
	float payload[8] = { 1, 2, 3, -4, 0, 0.25f, 7, 8 };
	size_t i;
	uint32_t id;

	tm_writer_opts_default(&o);
	o.chunk_bytes = 700;
	check(tm_writer_open(path, &o, &w), path);
	memset(&m, 0, sizeof(m));
	m.probe_kind = "synthetic";
	m.default_level = 2;
	m.host = "seedhost";
	m.rank = -1;
	m.command = "gen_seeds";
	m.npairs = 1;
	m.keys[0] = "level.model.layers.**";
	m.values[0] = "3";
	check(tm_writer_meta(w, &m), "meta");
	for (i = 0; i < sizeof(node_names) / sizeof(node_names[0]); i++) {
		struct tm_node n;

		memset(&n, 0, sizeof(n));
		n.address = node_names[i];
		n.parent = i ? 0 : TM_NODE_NONE;
		n.depth = i ? 1 : 0;
		n.kind = strstr(node_names[i], "weight") ? TM_NODE_PARAM : TM_NODE_MODULE;
		n.type = n.kind == TM_NODE_PARAM ? "Parameter" : "Linear";
		n.file = "model.py";
		n.line = (uint32_t)(10 + i);
		check(tm_writer_node(w, &n, &id), "node");
	}
	for (i = 0; i < (size_t)nevents; i++) {
		if (i == 20) {
			memset(&g, 0, sizeof(g));
			g.first_seq = 20;
			g.last_seq = 24;
			g.count = 5;
			g.reason = TM_GAP_BACKPRESSURE | TM_GAP_LEVEL;
			g.time_ns = 20000;
			g.step = 2;
			check(tm_writer_gap(w, &g), "gap");
			i = 25;
		}
		if (i % 10 == 0) {
			/* a serving step's request ids (TQL `request`) */
			static const char *const ids[] = { "cmpl-1-0", "chatcmpl-2" };
			struct tm_annot a;

			memset(&a, 0, sizeof(a));
			a.seq = i;
			a.step = i / 10;
			a.time_ns = i * 1000;
			a.key = "request";
			a.values = ids;
			a.nvalues = 2;
			a.count = 3;
			check(tm_writer_annot(w, &a), "annotation");
		}
		make_event(&e, t, i, (uint32_t)(i % 7),
			   with_payload && i % 9 == 0 ? payload : NULL, 8);
		check(tm_writer_event(w, &e), "event");
	}
	if (finish) {
		memset(&c, 0, sizeof(c));
		c.seq = (uint64_t)nevents;
		c.step = (uint64_t)nevents / 10;
		c.signo = 11;
		c.node = 4;
		c.nframes = 2;
		c.frames[0] = "0x401000 forward+0x10";
		c.frames[1] = "0x402000 main+0x20";
		check(tm_writer_crash(w, &c), "crash");
		check(tm_writer_close(w), "close");
	} else {
		check(tm_writer_flush(w), "flush");
		tm_writer_abandon(w);
	}
}

static void set_u32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static uint32_t get_u32(const uint8_t *p)
{
	return p[0] | (p[1] << 8) | (p[2] << 16) | ((uint32_t)p[3] << 24);
}

/*
 * Rewrites the EVENTS and META chunks of a trace with codec 0 (doc/tmrun.md
 * section 3) and drops index, summary and trailer: a valid unindexed trace
 * whose records lie in the file as plain bytes.
 */
static size_t uncompress_trace(const uint8_t *in, size_t n, uint8_t *out)
{
	size_t off = TMRUN_FILE_HEADER_SIZE, len = TMRUN_FILE_HEADER_SIZE;

	memcpy(out, in, TMRUN_FILE_HEADER_SIZE);
	while (off + TMRUN_CHUNK_HEADER_SIZE <= n) {
		const uint8_t *h = in + off;
		uint32_t stored = get_u32(h + 8), raw = get_u32(h + 12);
		uint8_t *oh = out + len;

		if (get_u32(h) != TMRUN_CHUNK_MAGIC || h[4] > TMRUN_CHUNK_EVENTS)
			break;
		memcpy(oh, h, TMRUN_CHUNK_HEADER_SIZE);
		if (h[5] == TMRUN_CODEC_ZSTD) {
			size_t got = ZSTD_decompress(oh + TMRUN_CHUNK_HEADER_SIZE, raw,
						     h + TMRUN_CHUNK_HEADER_SIZE, stored);

			if (ZSTD_isError(got) || got != raw) {
				fprintf(stderr, "gen_seeds: cannot decompress a chunk\n");
				exit(1);
			}
		} else {
			memcpy(oh + TMRUN_CHUNK_HEADER_SIZE, h + TMRUN_CHUNK_HEADER_SIZE, raw);
		}
		oh[5] = TMRUN_CODEC_NONE;
		set_u32(oh + 8, raw);
		set_u32(oh + 20, tm_crc32c(0, oh + TMRUN_CHUNK_HEADER_SIZE, raw));
		set_u32(oh + 84, tm_crc32c(0, oh, 84));
		off += TMRUN_CHUNK_HEADER_SIZE + stored;
		len += TMRUN_CHUNK_HEADER_SIZE + raw;
	}
	return len;
}

static void tmrun_seeds(void)
{
	char tmp[4096];
	uint8_t *p;
	size_t n;

	snprintf(tmp, sizeof(tmp), "%s/tmrun/.gen", outdir);
	write_trace(tmp, 1, 1, 60);
	p = slurp(tmp, &n);
	put("tmrun", "valid-indexed", p, n);
	put("tmrun", "cut-in-middle", p, n / 2);
	put("tmrun", "cut-trailer", p, n - 5);
	put("tmrun", "header-only", p, 32);
	p[n / 3] ^= 0x40;
	put("tmrun", "flipped-chunk-byte", p, n);
	p[n / 3] ^= 0x40;
	p[n - 40] ^= 0x01;
	put("tmrun", "flipped-index-byte", p, n);
	p[n - 40] ^= 0x01;
	p[8] = 2;       /* version_major, with a matching header CRC */
	{
		uint32_t crc = tm_crc32c(0, p, 28);

		p[28] = (uint8_t)crc;
		p[29] = (uint8_t)(crc >> 8);
		p[30] = (uint8_t)(crc >> 16);
		p[31] = (uint8_t)(crc >> 24);
	}
	put("tmrun", "version-2", p, n);
	free(p);

	write_trace(tmp, 0, 0, 40);
	p = slurp(tmp, &n);
	put("tmrun", "valid-unindexed", p, n);
	put("tmrun", "unindexed-torn-tail", p, n - 7);
	free(p);

	write_trace(tmp, 1, 1, 30);
	p = slurp(tmp, &n);
	{
		uint8_t *u = malloc(1u << 20);
		size_t un = uncompress_trace(p, n, u);

		put("tmrun", "valid-uncompressed", u, un);
		free(u);
	}
	free(p);

	write_trace(tmp, 1, 0, 0);
	p = slurp(tmp, &n);
	put("tmrun", "valid-no-events", p, n);
	free(p);
	put("tmrun", "not-a-trace", "GET / HTTP/1.1\r\n\r\n", 18);
	put("tmrun", "empty", "", 0);
	remove(tmp);
}

/* Frame seeds: one split-seed byte, then the stream. */
static void frame_put(const char *name, uint8_t seed, const uint8_t *p, size_t n)
{
	uint8_t *q = malloc(n + 1);

	q[0] = seed;
	memcpy(q + 1, p, n);
	put("frame", name, q, n + 1);
	free(q);
}

static void frame_seeds(void)
{
	struct tm_buf b = { 0 }, rec = { 0 };
	struct tm_event e;
	struct tm_tensor t[2];
	float payload[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	size_t one;

	check(tm_frame_encode(&b, TM_REC_GAP, 0, "abc", 3), "frame");
	one = b.len;
	check(tm_frame_encode(&b, 64, 0, NULL, 0), "frame");
	make_event(&e, t, 7, 3, payload, 8);
	check(tm_encode_event(&rec, &e), "encode");
	check(tm_frame_encode(&b, TM_REC_EVENT, 0, rec.data, (uint32_t)rec.len), "frame");
	frame_put("valid-three", 0x11, b.data, b.len);
	frame_put("valid-three-bytewise", 0x00, b.data, b.len);
	frame_put("truncated", 0x23, b.data, b.len - 3);
	frame_put("truncated-header", 0x23, b.data, 7);

	b.data[0] = 'X';
	frame_put("bad-magic", 0x05, b.data, b.len);
	b.data[0] = 0x54;
	b.data[5] ^= 1;
	frame_put("bad-header-crc", 0x05, b.data, b.len);
	b.data[5] ^= 1;
	b.data[one - 1] ^= 0x80;
	frame_put("bad-payload-crc", 0x05, b.data, b.len);
	b.data[one - 1] ^= 0x80;

	/* Valid CRCs over bad fields: rebuild the header by hand. */
	{
		uint8_t h[16 + 3];
		uint32_t crc;
		struct {
			const char *name;
			uint8_t type, flags;
			uint32_t len;
		} bad[] = {
			{ "reserved-flags", 1, 0x80, 3 },
			{ "reserved-type-0", 0, 0, 3 },
			{ "reserved-type-200", 200, 0, 3 },
			{ "too-large", 1, 0, 5000 },
			{ "huge-length", 1, 0, 0xffffffffu },
		};
		size_t i;

		for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			h[0] = 0x54;
			h[1] = 0x4D;
			h[2] = bad[i].type;
			h[3] = bad[i].flags;
			h[4] = (uint8_t)bad[i].len;
			h[5] = (uint8_t)(bad[i].len >> 8);
			h[6] = (uint8_t)(bad[i].len >> 16);
			h[7] = (uint8_t)(bad[i].len >> 24);
			crc = tm_crc32c(0, h, 8);
			h[8] = (uint8_t)crc;
			h[9] = (uint8_t)(crc >> 8);
			h[10] = (uint8_t)(crc >> 16);
			h[11] = (uint8_t)(crc >> 24);
			memcpy(h + 12, "abc", 3);
			crc = tm_crc32c(0, "abc", 3);
			h[15] = (uint8_t)crc;
			h[16] = (uint8_t)(crc >> 8);
			h[17] = (uint8_t)(crc >> 16);
			h[18] = (uint8_t)(crc >> 24);
			frame_put(bad[i].name, 0x31, h, sizeof(h));
		}
	}
	check(tm_buf_reserve(&b, 5), "reserve");
	memcpy(b.data + b.len, "junk!", 5);
	frame_put("good-then-junk", 0x41, b.data, b.len + 5);
	tm_buf_free(&b);
	tm_buf_free(&rec);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS-DIR (with frame/ and tmrun/ in it)\n", argv[0]);
		return 2;
	}
	outdir = argv[1];
	frame_seeds();
	tmrun_seeds();
	return 0;
}
