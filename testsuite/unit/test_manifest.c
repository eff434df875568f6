/*
 * test_manifest.c -- run manifests (doc/tmrun.md, "Run manifest"): the
 * file tying a distributed recording's per-rank traces together.  Good and
 * bad texts with the messages a user sees, path resolution, the caps,
 * per-rank and manifest names for a record path, and write + read through
 * a temporary directory.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tensormorph.h"
#include "tm-test.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

static int parse(const char *text, const char *dir, struct tm_manifest **m,
		 char **detail)
{
	return tm_manifest_parse(text, strlen(text), dir, m, detail);
}

static void test_parse_good(void)
{
	struct tm_manifest *m = NULL;
	char *detail = (char *)1;

	CU_ASSERT_EQUAL_FATAL(parse("tmrun-manifest 1\n"
				    "world_size 2\n"
				    "rank 0 run.rank0.tmrun\n"
				    "rank 1 run.rank1.tmrun\n", NULL, &m, &detail), TM_OK);
	CU_ASSERT_PTR_NULL(detail);
	CU_ASSERT_EQUAL(m->world_size, 2);
	CU_ASSERT_STRING_EQUAL(m->paths[0], "run.rank0.tmrun");
	CU_ASSERT_STRING_EQUAL(m->paths[1], "run.rank1.tmrun");
	tm_manifest_free(m);

	/* comments, blank lines, CRLF, blanks around, ranks in any order,
	 * spaces inside a path, absolute paths, no final newline */
	CU_ASSERT_EQUAL_FATAL(parse("# recorded by tensormorph\r\n"
				    "\n"
				    "  tmrun-manifest   1  \r\n"
				    "\t# a comment\n"
				    "world_size\t3\n"
				    "   \n"
				    "rank 2 /abs/r2.tmrun\n"
				    "rank 0 my run/rank 0.tmrun  \r\n"
				    "rank   1   sub/r1.tmrun", "/data/out", &m, &detail), TM_OK);
	CU_ASSERT_EQUAL(m->world_size, 3);
	CU_ASSERT_STRING_EQUAL(m->paths[0], "/data/out/my run/rank 0.tmrun");
	CU_ASSERT_STRING_EQUAL(m->paths[1], "/data/out/sub/r1.tmrun");
	CU_ASSERT_STRING_EQUAL(m->paths[2], "/abs/r2.tmrun");
	tm_manifest_free(m);

	/* a dir with its own '/', and "" as no dir */
	CU_ASSERT_EQUAL_FATAL(parse("tmrun-manifest 1\nworld_size 1\nrank 0 a.tmrun\n",
				    "out/", &m, NULL), TM_OK);
	CU_ASSERT_STRING_EQUAL(m->paths[0], "out/a.tmrun");
	tm_manifest_free(m);
	CU_ASSERT_EQUAL_FATAL(parse("tmrun-manifest 1\nworld_size 1\nrank 0 a.tmrun\n",
				    "", &m, NULL), TM_OK);
	CU_ASSERT_STRING_EQUAL(m->paths[0], "a.tmrun");
	tm_manifest_free(m);

	tm_manifest_free(NULL);
	CU_ASSERT_EQUAL(tm_manifest_parse("x", 1, NULL, NULL, NULL), TM_ERR_INVALID_ARG);
	CU_ASSERT_EQUAL(tm_manifest_parse(NULL, 1, NULL, &m, NULL), TM_ERR_INVALID_ARG);
	CU_ASSERT_PTR_NULL(m);
}

/* Every error is TM_ERR_CORRUPT with a message naming the line. */
static void test_parse_bad(void)
{
	static const struct {
		const char *text;
		const char *detail;     /* the whole message */
	} cases[] = {
		{ "", "manifest: empty: not a run manifest (the first line must be "
		  "'tmrun-manifest 1')" },
		{ "# only a comment\n\n", "manifest: empty: not a run manifest (the "
		  "first line must be 'tmrun-manifest 1')" },
		{ "TMRN\x01\x02", "manifest:1: not a run manifest (the first line must "
		  "be 'tmrun-manifest 1')" },
		{ "tmrun-manifest 2\n", "manifest:1: manifest version 2 is not supported "
		  "(this reader knows version 1)" },
		{ "tmrun-manifest\n", "manifest:1: expected 'tmrun-manifest 1', not "
		  "'tmrun-manifest'" },
		{ "tmrun-manifest 1 x\n", "manifest:1: expected 'tmrun-manifest 1', not "
		  "'tmrun-manifest 1 x'" },
		{ "tmrun-manifest 1\n", "manifest:1: no 'world_size N' line" },
		{ "tmrun-manifest 1\nrank 0 a\n", "manifest:2: expected 'world_size N' "
		  "after the header, not 'rank 0 a'" },
		{ "tmrun-manifest 1\nworld_size 0\n", "manifest:2: world_size must be a "
		  "number 1..4096, not '0'" },
		{ "tmrun-manifest 1\nworld_size 4097\n", "manifest:2: world_size must be "
		  "a number 1..4096, not '4097'" },
		{ "tmrun-manifest 1\nworld_size -1\n", "manifest:2: world_size must be "
		  "a number 1..4096, not '-1'" },
		{ "tmrun-manifest 1\nworld_size 99999999999999\n", "manifest:2: "
		  "world_size must be a number 1..4096, not '99999999999999'" },
		{ "tmrun-manifest 1\nworld_size\n", "manifest:2: world_size needs a number" },
		{ "tmrun-manifest 1\nworld_size 2\nrank 0 a\n", "manifest:2: rank 1 is "
		  "not listed (world_size 2)" },
		{ "tmrun-manifest 1\n# x\nworld_size 2\nrank 0 a\nrank 5 b\n",
		  "manifest:5: rank 5 is not below world_size 2" },
		{ "tmrun-manifest 1\nworld_size 2\nrank 0 a\nrank 0 b\n",
		  "manifest:4: rank 0 is listed twice (first on line 3)" },
		{ "tmrun-manifest 1\nworld_size 2\nrank 0\n", "manifest:3: rank 0 has "
		  "no path" },
		{ "tmrun-manifest 1\nworld_size 2\nrank 0   \t\n", "manifest:3: rank 0 "
		  "has no path" },
		{ "tmrun-manifest 1\nworld_size 2\nrank\n", "manifest:3: expected 'rank "
		  "R PATH': the rank is missing" },
		{ "tmrun-manifest 1\nworld_size 2\nrank x a\n", "manifest:3: bad rank "
		  "'x' (ranks are numbers 0..1)" },
		{ "tmrun-manifest 1\nworld_size 2\nrank -1 a\n", "manifest:3: bad rank "
		  "'-1' (ranks are numbers 0..1)" },
		{ "tmrun-manifest 1\nworld_size 2\nrank 0 a\nworld_size 2\n",
		  "manifest:4: world_size given twice (first on line 2)" },
		{ "tmrun-manifest 1\nworld_size 1\npath 0 a\n", "manifest:3: expected "
		  "'rank R PATH', not 'path 0 a'" },
		{ "tmrun-manifest 1\nworld_size 1\nrank 0 a\x1b[2Jb\n", NULL },
	};
	size_t i;

	for (i = 0; i < N_ELEMS(cases); i++) {
		struct tm_manifest *m = (struct tm_manifest *)1;
		char *detail = NULL;
		int r = parse(cases[i].text, NULL, &m, &detail);

		if (!cases[i].detail) {
			/* control bytes inside a path are the path's business */
			CU_ASSERT_EQUAL(r, TM_OK);
			tm_manifest_free(r ? NULL : m);
			continue;
		}
		CU_ASSERT_EQUAL(r, TM_ERR_CORRUPT);
		CU_ASSERT_PTR_NULL(m);
		CU_ASSERT_PTR_NOT_NULL(detail);
		if (detail)
			CU_ASSERT_STRING_EQUAL(detail, cases[i].detail);
		if (r != TM_ERR_CORRUPT || !detail || strcmp(detail, cases[i].detail))
			fprintf(stderr, "\n  case %zu: r=%d detail=%s\n", i, r,
				detail ? detail : "(null)");
		free(detail);
	}
}

static void test_parse_limits(void)
{
	struct tm_manifest *m = NULL;
	char *detail = NULL, *text, *p;
	size_t n = 1024 * 1024, i;
	int r;

	/* a NUL byte inside the given length */
	CU_ASSERT_EQUAL(tm_manifest_parse("tmrun-manifest 1\nworld_size 1\nrank 0 a\0b\n",
					  40, NULL, &m, &detail), TM_ERR_CORRUPT);
	CU_ASSERT_PTR_NOT_NULL(detail && strstr(detail, "manifest:3: a NUL byte"));
	free(detail);

	/* only len bytes are read: the text need not be NUL-terminated */
	text = malloc(64);
	CU_ASSERT_PTR_NOT_NULL_FATAL(text);
	memcpy(text, "tmrun-manifest 1\nworld_size 1\nrank 0 abc", 40);
	memset(text + 40, 'x', 24);
	CU_ASSERT_EQUAL_FATAL(tm_manifest_parse(text, 40, NULL, &m, NULL), TM_OK);
	CU_ASSERT_STRING_EQUAL(m->paths[0], "abc");
	tm_manifest_free(m);
	free(text);

	/* 1 MiB is too large */
	text = malloc(n + 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(text);
	memset(text, '#', n);
	text[n] = '\0';
	CU_ASSERT_EQUAL(tm_manifest_parse(text, n, NULL, &m, &detail), TM_ERR_CORRUPT);
	CU_ASSERT_PTR_NOT_NULL(detail && strstr(detail, "too large"));
	free(detail);
	free(text);

	/* paths: 4095 bytes are fine, 4096 are not */
	text = malloc(8192);
	CU_ASSERT_PTR_NOT_NULL_FATAL(text);
	for (i = 0; i < 2; i++) {
		size_t plen = 4095 + i;

		p = text + sprintf(text, "tmrun-manifest 1\nworld_size 1\nrank 0 ");
		memset(p, 'a', plen);
		p[plen] = '\0';
		detail = NULL;
		r = parse(text, NULL, &m, &detail);
		if (i == 0) {
			CU_ASSERT_EQUAL(r, TM_OK);
			CU_ASSERT_EQUAL(r ? 0 : strlen(m->paths[0]), plen);
			tm_manifest_free(r ? NULL : m);
		} else {
			CU_ASSERT_EQUAL(r, TM_ERR_CORRUPT);
			CU_ASSERT_PTR_NOT_NULL(detail && strstr(detail, "manifest:3: the path "
								 "of rank 0 is too long"));
			free(detail);
		}
	}
	free(text);

	/* the largest world */
	text = malloc(4096 * 24 + 64);
	CU_ASSERT_PTR_NOT_NULL_FATAL(text);
	p = text + sprintf(text, "tmrun-manifest 1\nworld_size 4096\n");
	for (i = 4096; i-- > 0;)
		p += sprintf(p, "rank %zu r%zu.tmrun\n", i, i);
	CU_ASSERT_EQUAL_FATAL(parse(text, "d", &m, NULL), TM_OK);
	CU_ASSERT_EQUAL(m->world_size, 4096);
	CU_ASSERT_STRING_EQUAL(m->paths[4095], "d/r4095.tmrun");
	CU_ASSERT_STRING_EQUAL(m->paths[17], "d/r17.tmrun");
	tm_manifest_free(m);
	free(text);
}

static void test_rank_path(void)
{
	char buf[64];

	CU_ASSERT_EQUAL(tm_manifest_rank_path("out/run.tmrun", 2, buf, sizeof(buf)), TM_OK);
	CU_ASSERT_STRING_EQUAL(buf, "out/run.rank2.tmrun");
	CU_ASSERT_EQUAL(tm_manifest_path("out/run.tmrun", buf, sizeof(buf)), TM_OK);
	CU_ASSERT_STRING_EQUAL(buf, "out/run.manifest");
	CU_ASSERT_EQUAL(tm_manifest_rank_path("run.tmrun", 0, buf, sizeof(buf)), TM_OK);
	CU_ASSERT_STRING_EQUAL(buf, "run.rank0.tmrun");
	CU_ASSERT_EQUAL(tm_manifest_rank_path("/a.b/run", 4095, buf, sizeof(buf)), TM_OK);
	CU_ASSERT_STRING_EQUAL(buf, "/a.b/run.rank4095");
	CU_ASSERT_EQUAL(tm_manifest_path("/a.b/run", buf, sizeof(buf)), TM_OK);
	CU_ASSERT_STRING_EQUAL(buf, "/a.b/run.manifest");
	CU_ASSERT_EQUAL(tm_manifest_rank_path("trace.tmrun.bak", 1, buf, sizeof(buf)), TM_OK);
	CU_ASSERT_STRING_EQUAL(buf, "trace.tmrun.bak.rank1");
	CU_ASSERT_EQUAL(tm_manifest_path("x.TMRUN", buf, sizeof(buf)), TM_OK);
	CU_ASSERT_STRING_EQUAL(buf, "x.TMRUN.manifest");
	CU_ASSERT_EQUAL(tm_manifest_rank_path("", 3, buf, sizeof(buf)), TM_OK);
	CU_ASSERT_STRING_EQUAL(buf, ".rank3");

	/* "r.rank2.tmrun" is 13 bytes: 14 fit, 13 do not */
	CU_ASSERT_EQUAL(tm_manifest_rank_path("r.tmrun", 2, buf, 13), TM_ERR_TOO_LARGE);
	CU_ASSERT_EQUAL(tm_manifest_rank_path("r.tmrun", 2, buf, 14), TM_OK);
	CU_ASSERT_STRING_EQUAL(buf, "r.rank2.tmrun");
	CU_ASSERT_EQUAL(tm_manifest_path("r.tmrun", buf, 10), TM_ERR_TOO_LARGE);
	CU_ASSERT_EQUAL(tm_manifest_path("r.tmrun", buf, 11), TM_OK);
	CU_ASSERT_STRING_EQUAL(buf, "r.manifest");

	CU_ASSERT_EQUAL(tm_manifest_rank_path("r.tmrun", -1, buf, sizeof(buf)),
			TM_ERR_INVALID_ARG);
	CU_ASSERT_EQUAL(tm_manifest_rank_path(NULL, 0, buf, sizeof(buf)), TM_ERR_INVALID_ARG);
	CU_ASSERT_EQUAL(tm_manifest_path("r.tmrun", NULL, 8), TM_ERR_INVALID_ARG);
	CU_ASSERT_EQUAL(tm_manifest_path("r.tmrun", buf, 0), TM_ERR_INVALID_ARG);
}

/* What rank 0 of a recording does and tmdb reads back. */
static void test_write_read(void)
{
	char tmpl[] = "/tmp/tm-manifest-XXXXXX", path[128], tmp[160], buf[256];
	const char *files[3] = { "run.rank0.tmrun", "sub dir/run.rank1.tmrun",
				 "/abs/run.rank2.tmrun" };
	const char *bad[1];
	struct tm_manifest *m = NULL;
	char *detail = NULL;
	char *dir = mkdtemp(tmpl);
	struct stat st;
	FILE *f;

	CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
	snprintf(buf, sizeof(buf), "%s/run.tmrun", dir);
	CU_ASSERT_EQUAL_FATAL(tm_manifest_path(buf, path, sizeof(path)), TM_OK);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);

	CU_ASSERT_EQUAL(tm_manifest_write(path, 3, files), TM_OK);
	CU_ASSERT_NOT_EQUAL(stat(tmp, &st), 0);         /* renamed away */
	CU_ASSERT_EQUAL_FATAL(tm_manifest_read(path, &m, &detail), TM_OK);
	CU_ASSERT_PTR_NULL(detail);
	CU_ASSERT_EQUAL(m->world_size, 3);
	snprintf(buf, sizeof(buf), "%s/run.rank0.tmrun", dir);
	CU_ASSERT_STRING_EQUAL(m->paths[0], buf);
	snprintf(buf, sizeof(buf), "%s/sub dir/run.rank1.tmrun", dir);
	CU_ASSERT_STRING_EQUAL(m->paths[1], buf);
	CU_ASSERT_STRING_EQUAL(m->paths[2], "/abs/run.rank2.tmrun");
	tm_manifest_free(m);

	/* rewriting replaces it */
	CU_ASSERT_EQUAL(tm_manifest_write(path, 1, files), TM_OK);
	CU_ASSERT_EQUAL_FATAL(tm_manifest_read(path, &m, NULL), TM_OK);
	CU_ASSERT_EQUAL(m->world_size, 1);
	tm_manifest_free(m);

	/* names the format cannot hold, and world sizes out of range */
	bad[0] = "";
	CU_ASSERT_EQUAL(tm_manifest_write(path, 1, bad), TM_ERR_INVALID_ARG);
	bad[0] = "a\nrank 1 b";
	CU_ASSERT_EQUAL(tm_manifest_write(path, 1, bad), TM_ERR_INVALID_ARG);
	bad[0] = " a";
	CU_ASSERT_EQUAL(tm_manifest_write(path, 1, bad), TM_ERR_INVALID_ARG);
	bad[0] = "a\t";
	CU_ASSERT_EQUAL(tm_manifest_write(path, 1, bad), TM_ERR_INVALID_ARG);
	bad[0] = NULL;
	CU_ASSERT_EQUAL(tm_manifest_write(path, 1, bad), TM_ERR_INVALID_ARG);
	CU_ASSERT_EQUAL(tm_manifest_write(path, 0, files), TM_ERR_INVALID_ARG);
	CU_ASSERT_EQUAL(tm_manifest_write(path, 4097, files), TM_ERR_INVALID_ARG);
	CU_ASSERT_EQUAL(tm_manifest_write(NULL, 1, files), TM_ERR_INVALID_ARG);
	/* the old manifest is still whole */
	CU_ASSERT_EQUAL_FATAL(tm_manifest_read(path, &m, NULL), TM_OK);
	CU_ASSERT_EQUAL(m->world_size, 1);
	tm_manifest_free(m);

	/* a directory that does not exist: nothing written */
	snprintf(buf, sizeof(buf), "%s/nodir/run.manifest", dir);
	CU_ASSERT_EQUAL(tm_manifest_write(buf, 1, files), TM_ERR_IO);

	/* read: missing file, a directory, errors named by the file */
	CU_ASSERT_EQUAL(tm_manifest_read(buf, &m, &detail), TM_ERR_IO);
	CU_ASSERT_PTR_NULL(m);
	CU_ASSERT_PTR_NOT_NULL(detail && strstr(detail, "nodir/run.manifest: No such file"));
	free(detail);
	CU_ASSERT_EQUAL(tm_manifest_read(dir, &m, &detail), TM_ERR_IO);
	CU_ASSERT_PTR_NOT_NULL(detail && strstr(detail, "not a regular file"));
	free(detail);
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs("tmrun-manifest 1\nworld_size 2\nrank 0 a\nrank 5 b\n", f);
	fclose(f);
	CU_ASSERT_EQUAL(tm_manifest_read(path, &m, &detail), TM_ERR_CORRUPT);
	snprintf(buf, sizeof(buf), "%s:4: rank 5 is not below world_size 2", path);
	CU_ASSERT_PTR_NOT_NULL(detail);
	if (detail)
		CU_ASSERT_STRING_EQUAL(detail, buf);
	free(detail);
	CU_ASSERT_EQUAL(tm_manifest_read(NULL, &m, NULL), TM_ERR_INVALID_ARG);

	unlink(path);
	CU_ASSERT_EQUAL(rmdir(dir), 0);
}

/* A manifest in the current directory resolves to bare names. */
static void test_read_relative(void)
{
	char tmpl[] = "/tmp/tm-manifest-XXXXXX", cwd[4096];
	const char *files[2] = { "r0.tmrun", "r1.tmrun" };
	struct tm_manifest *m = NULL;
	char *dir = mkdtemp(tmpl);

	CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
	CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof(cwd)));
	CU_ASSERT_EQUAL_FATAL(chdir(dir), 0);
	CU_ASSERT_EQUAL(tm_manifest_write("run.manifest", 2, files), TM_OK);
	CU_ASSERT_EQUAL_FATAL(tm_manifest_read("run.manifest", &m, NULL), TM_OK);
	CU_ASSERT_STRING_EQUAL(m->paths[0], "r0.tmrun");
	CU_ASSERT_STRING_EQUAL(m->paths[1], "r1.tmrun");
	tm_manifest_free(m);
	unlink("run.manifest");
	CU_ASSERT_EQUAL(chdir(cwd), 0);
	CU_ASSERT_EQUAL(rmdir(dir), 0);
}

int main(void)
{
	static const struct tm_test_case cases[] = {
		TM_TEST(test_parse_good),
		TM_TEST(test_parse_bad),
		TM_TEST(test_parse_limits),
		TM_TEST(test_rank_path),
		TM_TEST(test_write_read),
		TM_TEST(test_read_relative),
		{ NULL, NULL }
	};
	return tm_test_run("manifest", cases);
}
