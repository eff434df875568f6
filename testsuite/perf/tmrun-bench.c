/*
 * tmrun-bench.c -- how fast .tmrun is written, scanned and sought, with
 * zstd's own decompression of the very same bytes as the baseline.
 *
 *   make -C testsuite perf && testsuite/perf/tmrun-bench [-n EVENTS] [-o FILE] [-g SEEKS] [-l LEVEL] [-c CHUNK_BYTES]
 *
 * Writes N level-1 stat events (one f32 output tensor each, 200 nodes),
 * then measures, in the same run:
 *   write   events/s through tm_writer_event (one core, zstd level 1),
 *           against zstd compressing the same raw chunk bytes alone;
 *   scan    events/s through tm_reader_next over the whole file;
 *   zstd    decompression alone of every chunk payload of the file
 *           (in process, and `zstd -d` of the same frames when installed):
 *           the floor a scan cannot beat; the ratio scan/zstd is printed;
 *   goto    median and p99 latency of random seeks by seq, step and time,
 *           each followed by reading the record there (what `goto` does).
 * Goals (issue 2): scan <= 1.5x zstd -d, write >= 5M events/s, goto < 5 ms.
 * -k keeps the file; -r FILE only scans an existing file (the baseline
 * tmdb's `continue` is compared with).
 * Run on demand, not from make check.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "tensormorph.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

#define NNODES 200
#define PER_STEP 2000

static void make_event(uint64_t seq, struct tm_event *e, struct tm_tensor *t)
{
	e->seq = seq;
	e->step = seq / PER_STEP;
	e->kind = TM_EV_EXIT;
	e->level = 1;
	e->node = (uint32_t)(seq % NNODES);
	e->call = 1;
	e->time_ns = seq * 1500 + (seq * 7919) % 400;
	e->start_ns = e->time_ns - 900;
	e->end_ns = e->time_ns;
	e->ntensors = 1;
	e->tensors = t;
	t->stat[TM_STAT_NUMEL] = 8192;
	t->stat[TM_STAT_NAN_COUNT] = 0;
	t->stat[TM_STAT_MIN] = -3.0 - (double)(seq % 13) * 0.01;
	t->stat[TM_STAT_MAX] = 3.0 + (double)(seq % 11) * 0.01;
	t->stat[TM_STAT_MEAN] = 0.001 * (double)(seq % 17);
	t->stat[TM_STAT_ABS_MAX] = t->stat[TM_STAT_MAX];
	t->stat[TM_STAT_L2] = 90.5 + (double)(seq % 29) * 0.1;
}

int main(int argc, char **argv)
{
	uint64_t n = 10000000, i, nseeks = 200;
	const char *path = "tmrun-bench.tmrun";
	struct tm_tensor t;
	struct tm_event e;
	struct tm_record rec;
	tm_writer *w;
	tm_reader *r;
	double t0, t_write, t_scan, t_zstd, *lat;
	uint64_t scanned = 0;
	char *detail;
	struct tm_writer_opts wo;
	int opt, keep = 0, scan_only = 0;

	tm_writer_opts_default(&wo);
	while ((opt = getopt(argc, argv, "n:o:g:kl:c:r:")) != -1) {
		switch (opt) {
		case 'n': n = strtoull(optarg, NULL, 10); break;
		case 'o': path = optarg; break;
		case 'g': nseeks = strtoull(optarg, NULL, 10); break;
		case 'k': keep = 1; break;
		case 'l': wo.zstd_level = atoi(optarg); break;
		case 'c': wo.chunk_bytes = strtoull(optarg, NULL, 10); break;
		case 'r': path = optarg; scan_only = 1; keep = 1; break;
		default:
			fprintf(stderr, "usage: %s [-n EVENTS] [-o FILE] [-g SEEKS] [-l ZSTD_LEVEL] [-c CHUNK_BYTES] [-k] [-r FILE]\n", argv[0]);
			return 2;
		}
	}

	memset(&e, 0, sizeof(e));
	memset(&t, 0, sizeof(t));
	t.slot.kind = TM_SLOT_OUT;
	t.dtype = TM_DT_F32;
	t.rank = 3;
	t.shape[0] = 4;
	t.shape[1] = 32;
	t.shape[2] = 64;
	t.have = TM_STATS_L1_MASK & ~(TM_STAT_BIT(TM_STAT_INF_COUNT) |
				      TM_STAT_BIT(TM_STAT_POSINF_COUNT) |
				      TM_STAT_BIT(TM_STAT_NEGINF_COUNT));

	if (scan_only)
		goto scan;
	if (tm_writer_open(path, &wo, &w)) {
		perror(path);
		return 1;
	}
	for (i = 0; i < NNODES; i++) {
		struct tm_node node = { 0 };
		char addr[64];

		snprintf(addr, sizeof(addr), i ? "model.layers.%u.mlp.fc%u" : "model",
			 (unsigned)(i / 4), (unsigned)(i % 4));
		node.address = addr;
		node.parent = i ? 0 : TM_NODE_NONE;
		node.depth = i ? 1 : 0;
		node.type = "Linear";
		if (tm_writer_node(w, &node, NULL)) {
			fprintf(stderr, "node %s: %s\n", addr, tm_writer_detail(w));
			return 1;
		}
	}
	t0 = now_s();
	for (i = 0; i < n; i++) {
		make_event(i, &e, &t);
		if (tm_writer_event(w, &e)) {
			fprintf(stderr, "write: %s\n", tm_writer_detail(w));
			return 1;
		}
	}
	if (tm_writer_close(w)) {
		fprintf(stderr, "close failed\n");
		return 1;
	}
	t_write = now_s() - t0;

scan:
	if (tm_reader_open(path, 0, &r, &detail)) {
		fprintf(stderr, "%s\n", detail);
		return 1;
	}
	t0 = now_s();
	while (tm_reader_next(r, &rec) == TM_OK)
		scanned++;
	t_scan = now_s() - t0;
	if (scan_only) {
		/* -r: only the scan, e.g. as the baseline of tmdb's own scans */
		printf("scan      %.2f M events/s  (%.3f s, %llu records)\n",
		       (double)scanned / t_scan / 1e6, t_scan, (unsigned long long)scanned);
		tm_reader_close(r);
		return 0;
	}

	/* Baseline: decompress the same frames with zstd alone, in process,
	 * and with the zstd command over a file holding just those frames. */
	{
		FILE *f = fopen(path, "rb"), *z;
		const struct tm_summary *s = tm_reader_summary(r);
		uint8_t hdr[88], *src = NULL, *dst = NULL;
		size_t srccap = 0, dstcap = 0;
		long off = 32;
		char zpath[1024], cmd[2200];
		ZSTD_DCtx *dctx = ZSTD_createDCtx();
		ZSTD_CCtx *cctx = ZSTD_createCCtx();
		uint8_t *cbuf = NULL;
		size_t ccap = 0;
		double t_cmd = -1, t_cmd0, t_comp = 0;

		snprintf(zpath, sizeof(zpath), "%s.zst", path);
		z = fopen(zpath, "wb");
		t_zstd = 0;
		while (f && fseek(f, off, SEEK_SET) == 0 && fread(hdr, 1, 88, f) == 88 &&
		       !memcmp(hdr, "TMCK", 4)) {
			uint32_t stored = (uint32_t)hdr[8] | (uint32_t)hdr[9] << 8 |
					  (uint32_t)hdr[10] << 16 | (uint32_t)hdr[11] << 24;
			uint32_t raw = (uint32_t)hdr[12] | (uint32_t)hdr[13] << 8 |
				       (uint32_t)hdr[14] << 16 | (uint32_t)hdr[15] << 24;

			if (stored > srccap)
				src = realloc(src, srccap = stored);
			if (raw > dstcap)
				dst = realloc(dst, dstcap = raw);
			if (fread(src, 1, stored, f) != stored)
				break;
			if (hdr[4] == 2 && hdr[5] == 1) {
				t0 = now_s();
				ZSTD_decompressDCtx(dctx, dst, raw, src, stored);
				t_zstd += now_s() - t0;
				/* and the writer's floor: compressing it again */
				if (ZSTD_compressBound(raw) > ccap)
					cbuf = realloc(cbuf, ccap = ZSTD_compressBound(raw));
				t0 = now_s();
				ZSTD_compressCCtx(cctx, cbuf, ccap, dst, raw, wo.zstd_level);
				t_comp += now_s() - t0;
				if (z)
					fwrite(src, 1, stored, z);
			}
			off += 88 + (long)stored;
		}
		if (f)
			fclose(f);
		if (z)
			fclose(z);
		snprintf(cmd, sizeof(cmd), "zstd -q -d -c '%s' > /dev/null 2>&1", zpath);
		t_cmd0 = now_s();
		if (system(cmd) == 0)
			t_cmd = now_s() - t_cmd0;
		unlink(zpath);
		ZSTD_freeDCtx(dctx);
		ZSTD_freeCCtx(cctx);
		free(cbuf);
		free(src);
		free(dst);

		printf("file      %s: %.1f MB, %llu events, %llu chunks, %.1f bytes/event "
		       "(%.1f before zstd)\n", path, (double)s->file_bytes / 1e6,
		       (unsigned long long)s->nevents, (unsigned long long)s->nchunks,
		       (double)s->file_bytes / (double)n,
		       (double)s->uncompressed_bytes / (double)n);
		printf("write     %.2f M events/s  (%.3f s); zstd level %d alone on the same bytes "
		       "%.3f s: write/zstd = %.2fx\n", (double)n / t_write / 1e6, t_write,
		       wo.zstd_level, t_comp, t_write / t_comp);
		printf("scan      %.2f M events/s  (%.3f s, %llu records)\n",
		       (double)scanned / t_scan / 1e6, t_scan, (unsigned long long)scanned);
		printf("zstd      %.3f s in process: scan/zstd = %.2fx\n", t_zstd, t_scan / t_zstd);
		if (t_cmd > 0)
			printf("zstd -d   %.3f s as a command: scan/(zstd -d) = %.2fx\n", t_cmd,
			       t_scan / t_cmd);
	}

	lat = calloc(nseeks * 3, sizeof(*lat));
	{
		const struct tm_summary *s = tm_reader_summary(r);
		unsigned seed = 1;
		uint64_t k;

		for (k = 0; k < nseeks * 3; k++) {
			uint64_t target;
			int err;

			seed = seed * 1103515245u + 12345u;
			target = ((uint64_t)seed << 16 ^ seed) % (s->last_seq + 1);
			t0 = now_s();
			switch (k % 3) {
			case 0: err = tm_reader_seek_seq(r, target); break;
			case 1: err = tm_reader_seek_step(r, target / PER_STEP); break;
			default: err = tm_reader_seek_time(r, target * 1500); break;
			}
			if (!err)
				err = tm_reader_next(r, &rec);
			lat[k] = (now_s() - t0) * 1e3;
			if (err && err != TM_ERR_END) {
				fprintf(stderr, "seek: %s\n", tm_strerror(err));
				return 1;
			}
		}
		qsort(lat, nseeks * 3, sizeof(*lat), cmp_double);
		printf("goto      median %.3f ms, p99 %.3f ms, max %.3f ms (%llu seeks by seq/step/time)\n",
		       lat[nseeks * 3 / 2], lat[nseeks * 3 * 99 / 100], lat[nseeks * 3 - 1],
		       (unsigned long long)nseeks * 3);
	}
	free(lat);
	tm_reader_close(r);
	if (!keep)
		unlink(path);
	return 0;
}
