/*
 * standalone.c -- a main() for the libFuzzer targets, so that `make check`
 * replays their corpora with any compiler, no libFuzzer needed.
 *
 *   replay_frame [FILE|DIR]...     runs LLVMFuzzerTestOneInput on each file,
 *                                  and on each file of each directory (sorted)
 *
 * With no arguments it replays TM_FUZZ_CORPUS, the corpus directory the
 * Makefile compiled in.  A target signals failure by crashing or abort()ing
 * (ASan/UBSan in a sanitizer build), exactly as under libFuzzer, so a
 * corpus file that broke once is a regression test forever.
 *
 * Longer fuzz sessions use the libFuzzer builds (clang):
 *
 *   ../configure --enable-fuzzers && make -C testsuite fuzzers
 *   mkdir -p /tmp/frame && cp -r ../testsuite/fuzz/corpus/frame/. /tmp/frame/
 *   testsuite/fuzz/fuzz_frame -max_total_time=600 -jobs=2 /tmp/frame
 *   testsuite/fuzz/fuzz_tmrun -max_total_time=600 -max_len=65536 /tmp/tmrun
 *
 * (the first directory given collects new inputs; keep the seed corpus
 * small by adding only the crashers, renamed, see testsuite/fuzz/README).
 */
#include "config.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MAX_INPUT (16u << 20)

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	size_t n;

	if (!f) {
		perror(path);
		return 1;
	}
	buf = malloc(FUZZ_MAX_INPUT);
	if (!buf) {
		fclose(f);
		return 1;
	}
	n = fread(buf, 1, FUZZ_MAX_INPUT, f);
	fclose(f);
	/* Copy to an exact-size block so ASan catches a read one past the end. */
	{
		uint8_t *exact = malloc(n ? n : 1);

		if (!exact) {
			free(buf);
			return 1;
		}
		memcpy(exact, buf, n);
		free(buf);
		LLVMFuzzerTestOneInput(exact, n);
		free(exact);
	}
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_path(const char *path, unsigned *count)
{
	struct stat st;
	struct dirent *e;
	char **names = NULL;
	size_t n = 0, cap = 0, i;
	int bad = 0;
	DIR *d;

	if (stat(path, &st)) {
		perror(path);
		return 1;
	}
	if (!S_ISDIR(st.st_mode)) {
		++*count;
		return run_file(path);
	}
	d = opendir(path);
	if (!d) {
		perror(path);
		return 1;
	}
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (n == cap) {
			char **nn = realloc(names, (cap = cap ? cap * 2 : 64) * sizeof(*names));

			if (!nn)
				abort();
			names = nn;
		}
		names[n] = malloc(strlen(path) + strlen(e->d_name) + 2);
		if (!names[n])
			abort();
		sprintf(names[n], "%s/%s", path, e->d_name);
		n++;
	}
	closedir(d);
	qsort(names, n, sizeof(*names), cmp_names);
	for (i = 0; i < n; i++) {
		if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
			++*count;
			bad |= run_file(names[i]);
		}
		free(names[i]);
	}
	free(names);
	return bad;
}

int main(int argc, char **argv)
{
	unsigned count = 0;
	int i, bad = 0;

	if (argc < 2) {
#ifdef TM_FUZZ_CORPUS
		bad = run_path(TM_FUZZ_CORPUS, &count);
#else
		fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
		return 2;
#endif
	}
	for (i = 1; i < argc; i++)
		bad |= run_path(argv[i], &count);
	printf("%s: %u input%s replayed\n", argv[0], count, count == 1 ? "" : "s");
	return bad;
}
