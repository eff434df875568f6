/*
 * align-bench.c -- aligning a run with its reference (tm-compare.h) against
 * scanning the run alone: the goal is alignment at >= 0.5x the speed of a
 * scan, in bounded memory (< 200 MB, whatever the recordings' sizes).
 *
 *   align-bench [-sync] [-n REPEATS] RUN.tmrun REF.tmrun [-map RUN=REF ...]
 *
 * Each measurement runs in a child process of its own, so that its peak
 * resident memory (getrusage ru_maxrss) is its own: "scan" reads every
 * record of RUN; "align" reads RUN the same way and aligns every event
 * with REF (reading REF step by step as it goes, as tmdb's info compare
 * does, with tm_align_set_prefetch: a thread decodes the reference a few
 * steps ahead; -sync reads it on demand in the one thread instead).  Both files are read once beforehand so that the page cache holds
 * them for every repeat.  Prints, per phase, the best and median wall time
 * of the repeats, events and MB of RUN per second, the CPU time (user +
 * system, all threads), the peak RSS, and the ratio of align speed to scan
 * speed.
 *
 * Recordings of any size come from lib/mktrace, e.g. 1 GB each:
 *   mktrace -o run.tmrun --events 14000000 --nan-step 50 --level 2
 *   mktrace -o ref.tmrun --events 14000000 --nan-step -1 --level 2
 *   align-bench run.tmrun ref.tmrun
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tensormorph.h"

static int sync_mode;   /* -sync: no prefetching thread */

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct result {
	double secs, cpu;
	long maxrss_kb;
	unsigned long long events, aligned;
};

static int scan(const char *run, struct result *res)
{
	tm_reader *r = NULL;
	struct tm_record rec;
	char *detail = NULL;

	if (tm_reader_open(run, 0, &r, &detail)) {
		fprintf(stderr, "%s\n", detail ? detail : run);
		return 1;
	}
	while (tm_reader_next(r, &rec) == TM_OK)
		res->events += rec.type == TM_REC_EVENT;
	tm_reader_close(r);
	return 0;
}

static int align(const char *run, const char *refp, const tm_cmp_map *map,
		 struct result *res)
{
	tm_reader *r = NULL, *ref = NULL;
	tm_align *a = NULL;
	struct tm_record rec;
	char *detail = NULL;

	if (tm_reader_open(run, 0, &r, &detail) || tm_reader_open(refp, 0, &ref, &detail) ||
	    tm_align_new(ref, map, &a) || (!sync_mode && tm_align_set_prefetch(a, 1))) {
		fprintf(stderr, "%s\n", detail ? detail : "cannot open");
		return 1;
	}
	while (tm_reader_next(r, &rec) == TM_OK) {
		const struct tm_node *n;
		const struct tm_event *rev;
		uint32_t why;

		if (rec.type != TM_REC_EVENT)
			continue;
		res->events++;
		n = tm_nodetab_get(tm_reader_nodes(r), rec.u.event.node);
		if (n && tm_align_event(a, n->address, &rec.u.event, &rev, &why) == TM_OK)
			res->aligned++;
	}
	tm_align_free(a);
	tm_reader_close(r);
	return 0;
}

/* Runs one phase in a child; its result comes back through a pipe. */
static int measure(int phase, const char *run, const char *ref, const tm_cmp_map *map,
		   struct result *out)
{
	int fd[2], st;
	pid_t pid;

	if (pipe(fd))
		return 1;
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		struct result res = { 0 };
		struct rusage ru;
		double t0 = now();
		int rc = phase ? align(run, ref, map, &res) : scan(run, &res);

		res.secs = now() - t0;
		getrusage(RUSAGE_SELF, &ru);
		res.maxrss_kb = ru.ru_maxrss;
		res.cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 +
			  ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
		if (write(fd[1], &res, sizeof(res)) != (ssize_t)sizeof(res))
			rc = 1;
		_exit(rc);
	}
	close(fd[1]);
	if (read(fd[0], out, sizeof(*out)) != (ssize_t)sizeof(*out))
		out->secs = -1;
	close(fd[0]);
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
		return 1;
	return out->secs < 0;
}

static void warm(const char *path)
{
	char buf[1 << 16];
	FILE *f = fopen(path, "rb");

	while (f && fread(buf, 1, sizeof(buf), f) == sizeof(buf))
		;
	if (f)
		fclose(f);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	const char *run = NULL, *ref = NULL;
	tm_cmp_map *map = tm_cmp_map_new();
	struct result res[2][16];
	double t[2][16], c[2][16], best[2], median[2], cbest[2], mb;
	struct stat sb;
	int reps = 3, i, p;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-sync")) {
			sync_mode = 1;
		} else if (!strcmp(argv[i], "-n") && i + 1 < argc) {
			reps = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "-map") && i + 1 < argc) {
			char *err = NULL;

			if (tm_cmp_map_add(map, argv[++i], &err)) {
				fprintf(stderr, "align-bench: %s\n", err ? err : "bad rule");
				return 2;
			}
		} else if (!run) {
			run = argv[i];
		} else if (!ref) {
			ref = argv[i];
		} else {
			run = NULL;
			break;
		}
	}
	if (!run || !ref || reps < 1 || reps > 16) {
		fprintf(stderr, "usage: align-bench [-sync] [-n REPEATS] RUN.tmrun REF.tmrun "
			"[-map RUN=REF ...]\n");
		return 2;
	}
	if (stat(run, &sb))
		return 2;
	mb = sb.st_size / 1e6;
	warm(run);
	warm(ref);
	for (i = 0; i < reps; i++)
		for (p = 0; p < 2; p++) {
			memset(&res[p][i], 0, sizeof(res[p][i]));
			if (measure(p, run, ref, map, &res[p][i])) {
				fprintf(stderr, "align-bench: the %s phase failed\n",
					p ? "align" : "scan");
				return 1;
			}
			t[p][i] = res[p][i].secs;
			c[p][i] = res[p][i].cpu;
		}
	printf("run %s: %.1f MB, %llu events; reference %s\n", run, mb, res[0][0].events, ref);
	for (p = 0; p < 2; p++) {
		long rss = 0;

		for (i = 0; i < reps; i++)
			if (res[p][i].maxrss_kb > rss)
				rss = res[p][i].maxrss_kb;
		qsort(t[p], (size_t)reps, sizeof(double), cmp_double);
		qsort(c[p], (size_t)reps, sizeof(double), cmp_double);
		cbest[p] = c[p][0];
		best[p] = t[p][0];
		median[p] = t[p][reps / 2];
		printf("%-5s best %.3f s, median %.3f s of %d (%.0f MB/s, %.2f M events/s), "
		       "peak RSS %.1f MB", p ? "align" : "scan", best[p], median[p], reps,
		       mb / best[p], res[p][0].events / best[p] / 1e6, rss / 1024.0);
		printf(", CPU %.3f s", cbest[p]);
		if (p)
			printf(", %llu aligned", res[p][0].aligned);
		printf("\n");
	}
	printf("align speed / scan speed: %.2f (best), %.2f (median); goal >= 0.5\n",
	       best[0] / best[1], median[0] / median[1]);
	/* on a loaded machine the wall clock says more about the neighbours */
	printf("scan CPU / align CPU: %.2f\n", cbest[0] / cbest[1]);
	tm_cmp_map_free(map);
	return 0;
}
