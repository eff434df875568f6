/*
 * tql-bench.c -- how fast TQL is: evaluations per second of a simple
 * condition and of a 10-term one over N events (default 10M), and the
 * compile time of a typical condition.  Goals (issue): >= 50M simple
 * evaluations/s on one core, compile < 5 us.  Run on demand:
 *     make -C testsuite perf
 *     testsuite/perf/tql-bench [-n EVENTS] [-e CONDITION]
 *                              [simple|10-term|delta|compile]
 * never part of make check.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tensormorph.h"

#define NEV 4096      /* distinct events, cycled: the working set of a scan */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static struct tm_event events[NEV];
static struct tm_tensor tensors[NEV];

static void make_events(tm_nodetab *nodes)
{
	uint32_t i;
	char addr[64];

	for (i = 0; i < 64; i++) {
		struct tm_node n = { .parent = TM_NODE_NONE, .address = addr, .type = "Linear" };
		uint32_t id;

		snprintf(addr, sizeof(addr), "model.layers.%u", i);
		tm_nodetab_add(nodes, &n, &id);
	}
	srand(1);
	for (i = 0; i < NEV; i++) {
		struct tm_tensor *t = &tensors[i];

		t->have = TM_STATS_L2_MASK;
		t->rank = 2;
		t->shape[0] = 4;
		t->shape[1] = 32;
		t->stat[TM_STAT_NUMEL] = 128;
		t->stat[TM_STAT_NAN_COUNT] = rand() % 1000 == 0;
		t->stat[TM_STAT_ABS_MAX] = rand() % 100;
		t->stat[TM_STAT_STD] = (rand() % 1000) / 100.0;
		t->stat[TM_STAT_MEAN] = (rand() % 1000) / 100.0 - 5;
		t->stat[TM_STAT_L2] = rand() % 1000;
		events[i].seq = i;
		events[i].step = i / 32;
		events[i].node = i % 64;
		events[i].phase = (uint8_t)(i % 2);
		events[i].ntensors = 1;
		events[i].tensors = t;
	}
}

static void bench_eval(const char *name, const char *src, tm_nodetab *nodes, long n)
{
	struct tm_tql_compile_opts opts = { nodes, NULL, 1, 0 };
	tm_tql_prog *p;
	char *err = NULL;
	long i, fired = 0, unknown = 0;
	double t0, dt;

	if (tm_tql_compile(src, &opts, &p, &err)) {
		fprintf(stderr, "tql-bench: %s", err ? err : "compile failed\n");
		exit(1);
	}
	t0 = now_s();
	for (i = 0; i < n; i++) {
		struct tm_tql_ctx ctx = {
			&events[i & (NEV - 1)], &tensors[i & (NEV - 1)], nodes, NULL, 0
		};
		int r = tm_tql_test(p, &ctx);

		fired += r == 1;
		unknown += r < 0;
	}
	dt = now_s() - t0;
	printf("%-8s %10.1f M evaluations/s  (%ld events, %.3f s, %.1f ns each; fired %ld, unknown %ld)\n",
	       name, (double)n / dt / 1e6, n, dt, dt / (double)n * 1e9, fired, unknown);
	printf("         %s\n", src);
	tm_tql_free(p);
}

static void bench_compile(const char *src, tm_nodetab *nodes)
{
	struct tm_tql_compile_opts opts = { nodes, NULL, 1, 0 };
	long i, n = 200000;
	double t0, dt;

	t0 = now_s();
	for (i = 0; i < n; i++) {
		tm_tql_prog *p;

		if (tm_tql_compile(src, &opts, &p, NULL))
			exit(1);
		tm_tql_free(p);
	}
	dt = now_s() - t0;
	printf("compile  %10.2f us per compile (+ free) of: %s\n", dt / (double)n * 1e6, src);
}

int main(int argc, char **argv)
{
	tm_nodetab *nodes = tm_nodetab_new();
	const char *only = NULL, *expr = NULL;
	long n = 10000000;
	int i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-n") && i + 1 < argc) {
			n = atol(argv[++i]);
		} else if (!strcmp(argv[i], "-e") && i + 1 < argc) {
			expr = argv[++i];
			only = "expr";
		} else if (argv[i][0] != '-') {
			only = argv[i];
		} else {
			fprintf(stderr, "usage: tql-bench [-n EVENTS] [-e EXPR] [simple|10-term|delta|compile]\n");
			return 2;
		}
	}
	make_events(nodes);
	if (expr)
		bench_eval("expr", expr, nodes, n);
	if (!only || !strcmp(only, "simple"))
		bench_eval("simple", "tensor.nan_count > 0 && step > 100", nodes, n);
	if (!only || !strcmp(only, "10-term"))
		bench_eval("10-term",
			   "tensor.nan_count > 0 || tensor.inf_count > 0 || tensor.abs_max > 1e4 || "
			   "tensor.std > 9.5 && step > 100 || tensor.mean < -4.9 || "
			   "tensor.l2 / tensor.numel > 7.8 || tensor.zero_count == tensor.numel || "
			   "node.depth > 10 || phase == \"bwd\" && tensor.max > 1e3 || "
			   "isnan(tensor.mean)", nodes, n);
	if (!only || !strcmp(only, "delta"))
		bench_eval("delta", "delta(tensor.std) > 9", nodes, n);
	if (!only || !strcmp(only, "compile")) {
		bench_compile("tensor.nan_count > 0 && step > 100", nodes);
		bench_compile("node.path =~ \"model.layers.*\" && abs(delta(tensor.std)) > 2",
			      nodes);
	}
	tm_nodetab_free(nodes);
	return 0;
}
