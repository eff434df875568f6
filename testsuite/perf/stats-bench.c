/*
 * stats-bench.c -- nanoseconds per tm_stats_compute call, by level and size
 * (on demand, `make -C testsuite perf`): the probe's CPU stats kernel with
 * nothing else in the way.  Data is random normal f32 (what activations
 * look like), in cache, as the probe sees it right after a module's
 * forward.  Thread CPU time, best of rounds: steady on a shared machine.
 *
 * Usage: stats-bench [NUMEL...]   (default 64 8192 131072); a block of rows
 * per instruction set this CPU runs (tm_stats_use_isa).
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tensormorph.h"

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void fill_normal(float *x, uint64_t n)
{
	uint64_t i;

	srand(1);
	for (i = 0; i < n; i++) {
		double u = (rand() + 1.0) / (RAND_MAX + 2.0), v = rand() / (RAND_MAX + 1.0);

		x[i] = (float)(sqrt(-2 * log(u)) * cos(2 * M_PI * v));
	}
}

static double bench(const float *x, uint64_t n, int level)
{
	struct tm_tensor t;
	double best = INFINITY;
	int round, it, iters = (int)(4000000 / (n + 64)) + 1;

	memset(&t, 0, sizeof(t));
	for (round = 0; round < 15; round++) {
		double t0 = now_ns(), dt;

		for (it = 0; it < iters; it++)
			tm_stats_compute(&t, x, n, TM_DT_F32, level);
		dt = (now_ns() - t0) / iters;
		if (dt < best)
			best = dt;
	}
	return best;
}

int main(int argc, char **argv)
{
	static const char *const isas[] = { "avx512", "avx2", "sse2", "generic" };
	uint64_t sizes[16] = { 64, 8192, 131072 };
	int ns = 3, i, level;
	size_t k;

	if (argc > 1) {
		for (ns = 0; ns < argc - 1 && ns < 16; ns++)
			sizes[ns] = strtoull(argv[ns + 1], NULL, 0);
	}
	printf("tm_stats_compute, f32 normal data in cache, ns per call (best of 15 rounds)\n");
	printf("%-7s %10s %12s %12s %12s %10s %10s\n", "isa", "numel", "L1 ns", "L2 ns",
	       "L1 GB/s", "L2 GB/s", "L1 el/ns");
	/* every instruction set this CPU runs, best first */
	for (k = 0; k < sizeof(isas) / sizeof(isas[0]); k++) {
		if (tm_stats_use_isa(isas[k]) != TM_OK)
			continue;
		for (i = 0; i < ns; i++) {
			float *x = malloc(sizes[i] * sizeof(float) + 1);
			double t[3] = { 0, 0, 0 };

			fill_normal(x, sizes[i]);
			for (level = 1; level <= 2; level++)
				t[level] = bench(x, sizes[i], level);
			printf("%-7s %10llu %12.0f %12.0f %12.2f %10.2f %10.2f\n", isas[k],
			       (unsigned long long)sizes[i], t[1], t[2],
			       sizes[i] * 4 / t[1], sizes[i] * 4 / t[2], sizes[i] / t[1]);
			free(x);
		}
	}
	return 0;
}
