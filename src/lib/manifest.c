/*
 * manifest.c -- run manifests (doc/tmrun.md, "Run manifest"): the text file
 * that ties the per-rank .tmrun files of a distributed recording together.
 *
 * The probe of rank 0 writes it (tm_manifest_write), every rank names its
 * own trace with tm_manifest_rank_path, and tmdb reads it back
 * (tm_manifest_read) to replay the ranks together.  The format is a few
 * lines a person can read and fix by hand, so errors name the line and say
 * what was expected there.  A manifest may come from anywhere: the file and
 * each path are capped, every rank must be listed exactly once, and the
 * parser reads only within the given length.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tm-internal.h"
#include "tm-manifest.h"

static int is_blank(char c)
{
	return c == ' ' || c == '\t';
}

/* One parse: where messages point and what has been read so far. */
struct mparse {
	const char *name;       /* the file, for messages */
	unsigned line;
	char **detail;
	struct tm_manifest *m;
	unsigned *rank_line;    /* [world_size]: where each rank was listed, 0: not yet */
	unsigned ws_line;
};

static int perr(struct mparse *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Sets *detail to "NAME:LINE: MESSAGE" and returns TM_ERR_CORRUPT. */
static int perr(struct mparse *p, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	if (p->detail && !*p->detail) {
		va_start(ap, fmt);
		vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
		if (p->line)
			*p->detail = tm_asprintf("%s:%u: %s", p->name, p->line, msg);
		else
			*p->detail = tm_asprintf("%s: %s", p->name, msg);
	}
	return TM_ERR_CORRUPT;
}

/* A short, printable copy of untrusted text for a message. */
static const char *shown(const char *s, size_t len, char *buf, size_t size)
{
	size_t i, n = len < size - 4 ? len : size - 4;

	for (i = 0; i < n; i++)
		buf[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
	if (n < len) {
		memcpy(buf + n, "...", 4);
		return buf;
	}
	buf[n] = '\0';
	return buf;
}

/* Strict decimal: digits only, at most 9 (callers cap the value). */
static int parse_uint(const char *s, size_t len, long *v)
{
	size_t i;

	*v = 0;
	if (len == 0 || len > 9)
		return -1;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		*v = *v * 10 + (s[i] - '0');
	}
	return 0;
}

/* The next blank-separated token of [*s, end); *s moves past it and the
 * blanks after it. */
static size_t token(const char **s, const char *end, const char **tok)
{
	const char *t = *s;

	size_t n;

	while (t < end && !is_blank(*t))
		t++;
	*tok = *s;
	n = (size_t)(t - *s);
	while (t < end && is_blank(*t))
		t++;
	*s = t;
	return n;
}

static char *resolve(const char *dir, const char *path, size_t len)
{
	size_t dlen;

	if (!dir || !*dir || path[0] == '/')
		return tm_asprintf("%.*s", (int)len, path);
	dlen = strlen(dir);
	if (dir[dlen - 1] == '/')
		return tm_asprintf("%s%.*s", dir, (int)len, path);
	return tm_asprintf("%s/%.*s", dir, (int)len, path);
}

/* "tmrun-manifest 1": the first line that is not blank or a comment. */
static int parse_header(struct mparse *p, const char *s, const char *end)
{
	const char *line = s, *kw, *ver;
	size_t klen = token(&s, end, &kw), vlen;
	char b[48];
	long v;

	if (klen != 14 || memcmp(kw, "tmrun-manifest", 14))
		return perr(p, "not a run manifest (the first line must be "
			    "'tmrun-manifest %d')", TM_MANIFEST_VERSION);
	vlen = token(&s, end, &ver);
	if (parse_uint(ver, vlen, &v) || s != end)
		return perr(p, "expected 'tmrun-manifest %d', not '%s'",
			    TM_MANIFEST_VERSION, shown(line, (size_t)(end - line), b, sizeof(b)));
	if (v != TM_MANIFEST_VERSION)
		return perr(p, "manifest version %ld is not supported (this reader "
			    "knows version %d)", v, TM_MANIFEST_VERSION);
	return TM_OK;
}

/* "world_size N", right after the header, so that rank lines can be
 * checked against it as they come. */
static int parse_world(struct mparse *p, const char *s, const char *end)
{
	const char *kw, *num;
	size_t klen = token(&s, end, &kw), nlen;
	char b[48];
	long v;

	if (klen != 10 || memcmp(kw, "world_size", 10))
		return perr(p, "expected 'world_size N' after the header, not '%s'",
			    shown(kw, (size_t)(end - kw), b, sizeof(b)));
	nlen = token(&s, end, &num);
	if (nlen == 0)
		return perr(p, "world_size needs a number");
	if (parse_uint(num, nlen, &v) || s != end || v < 1 ||
	    v > TM_MANIFEST_MAX_WORLD)
		return perr(p, "world_size must be a number 1..%d, not '%s'",
			    TM_MANIFEST_MAX_WORLD,
			    shown(num, (size_t)(end - num), b, sizeof(b)));
	p->m->world_size = (int32_t)v;
	p->m->paths = calloc((size_t)v, sizeof(char *));
	p->rank_line = calloc((size_t)v, sizeof(unsigned));
	if (!p->m->paths || !p->rank_line)
		return TM_ERR_NOMEM;
	p->ws_line = p->line;
	return TM_OK;
}

/* "rank R PATH": PATH is the rest of the line (it may hold spaces). */
static int parse_rank(struct mparse *p, const char *s, const char *end,
		      const char *dir)
{
	const char *kw, *num;
	size_t klen = token(&s, end, &kw), nlen, plen;
	char b[48];
	long r;

	if (klen == 10 && !memcmp(kw, "world_size", 10))
		return perr(p, "world_size given twice (first on line %u)", p->ws_line);
	if (klen != 4 || memcmp(kw, "rank", 4))
		return perr(p, "expected 'rank R PATH', not '%s'",
			    shown(kw, (size_t)(end - kw), b, sizeof(b)));
	nlen = token(&s, end, &num);
	if (nlen == 0)
		return perr(p, "expected 'rank R PATH': the rank is missing");
	if (parse_uint(num, nlen, &r))
		return perr(p, "bad rank '%s' (ranks are numbers 0..%d)",
			    shown(num, nlen, b, sizeof(b)), p->m->world_size - 1);
	if (r >= p->m->world_size)
		return perr(p, "rank %ld is not below world_size %d", r,
			    p->m->world_size);
	if (p->rank_line[r])
		return perr(p, "rank %ld is listed twice (first on line %u)", r,
			    p->rank_line[r]);
	plen = (size_t)(end - s);
	if (plen == 0)
		return perr(p, "rank %ld has no path", r);
	if (plen >= TM_MANIFEST_MAX_PATH)
		return perr(p, "the path of rank %ld is too long (%zu bytes; the "
			    "limit is %d)", r, plen, TM_MANIFEST_MAX_PATH - 1);
	p->m->paths[r] = resolve(dir, s, plen);
	if (!p->m->paths[r])
		return TM_ERR_NOMEM;
	p->rank_line[r] = p->line;
	return TM_OK;
}

static int parse_text(const char *text, size_t len, const char *dir,
		      const char *name, struct tm_manifest **out, char **detail)
{
	struct mparse p;
	size_t pos = 0;
	int err = TM_OK, state = 0;
	int32_t r;

	if (out)
		*out = NULL;
	if (detail)
		*detail = NULL;
	if ((!text && len) || !out)
		return TM_ERR_INVALID_ARG;
	memset(&p, 0, sizeof(p));
	p.name = name;
	p.detail = detail;
	if (len >= TM_MANIFEST_MAX_SIZE)
		return perr(&p, "too large (%zu bytes; a manifest is under 1 MiB)", len);
	p.m = calloc(1, sizeof(*p.m));
	if (!p.m)
		return TM_ERR_NOMEM;
	while (!err && pos < len) {
		const char *s = text + pos, *nl = memchr(s, '\n', len - pos);
		const char *end = nl ? nl : text + len;

		pos = (size_t)(end - text) + (nl ? 1 : 0);
		p.line++;
		if (memchr(s, '\0', (size_t)(end - s))) {
			err = perr(&p, "a NUL byte (a manifest is text)");
			break;
		}
		while (end > s && (end[-1] == '\r' || is_blank(end[-1])))
			end--;
		while (s < end && is_blank(*s))
			s++;
		if (s == end || *s == '#')
			continue;
		if (state == 0)
			err = parse_header(&p, s, end);
		else if (state == 1)
			err = parse_world(&p, s, end);
		else
			err = parse_rank(&p, s, end, dir);
		if (state < 2)
			state++;
	}
	if (!err) {
		if (state == 0) {
			p.line = 0;
			err = perr(&p, "empty: not a run manifest (the first line "
				   "must be 'tmrun-manifest %d')", TM_MANIFEST_VERSION);
		} else if (state == 1) {
			err = perr(&p, "no 'world_size N' line");
		} else {
			for (r = 0; r < p.m->world_size; r++)
				if (!p.rank_line[r]) {
					p.line = p.ws_line;
					err = perr(&p, "rank %d is not listed (world_size %d)",
						   (int)r, (int)p.m->world_size);
					break;
				}
		}
	}
	free(p.rank_line);
	if (err) {
		tm_manifest_free(p.m);
		return err;
	}
	*out = p.m;
	return TM_OK;
}

int tm_manifest_parse(const char *text, size_t len, const char *dir,
		      struct tm_manifest **out, char **detail)
{
	return parse_text(text, len, dir, "manifest", out, detail);
}

int tm_manifest_read(const char *path, struct tm_manifest **out, char **detail)
{
	struct stat st;
	char *buf = NULL, *dir = NULL, *slash;
	size_t got = 0;
	ssize_t n;
	int fd, err;

	if (out)
		*out = NULL;
	if (detail)
		*detail = NULL;
	if (!path || !out)
		return TM_ERR_INVALID_ARG;
	/* O_NONBLOCK: a FIFO must not hang the open; it is refused below
	 * (not a regular file), and reads of a regular file never block */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		goto io;
	if (fstat(fd, &st))
		goto io;
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		if (detail)
			*detail = tm_asprintf("%s: not a regular file", path);
		return TM_ERR_IO;
	}
	if (st.st_size >= TM_MANIFEST_MAX_SIZE) {
		close(fd);
		if (detail)
			*detail = tm_asprintf("%s: too large (%lld bytes; a manifest is "
					      "under 1 MiB)", path, (long long)st.st_size);
		return TM_ERR_CORRUPT;
	}
	/* Read up to the cap, whatever fstat said: the file may grow. */
	buf = malloc(TM_MANIFEST_MAX_SIZE);
	if (!buf) {
		close(fd);
		return TM_ERR_NOMEM;
	}
	while (got < TM_MANIFEST_MAX_SIZE) {
		n = read(fd, buf + got, TM_MANIFEST_MAX_SIZE - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			goto io;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	fd = -1;
	slash = strrchr(path, '/');
	if (slash) {
		dir = tm_asprintf("%.*s", (int)(slash == path ? 1 : slash - path), path);
		if (!dir) {
			free(buf);
			return TM_ERR_NOMEM;
		}
	}
	err = parse_text(buf, got, dir, path, out, detail);
	free(dir);
	free(buf);
	return err;
io:
	err = errno;
	if (detail)
		*detail = tm_asprintf("%s: %s", path, strerror(err));
	if (fd >= 0)
		close(fd);
	free(buf);
	return TM_ERR_IO;
}

/* What a line of the format can hold as a path (the parser's inverse). */
static int writable_name(const char *f)
{
	size_t len;

	if (!f)
		return 0;
	len = strlen(f);
	if (len == 0 || len >= TM_MANIFEST_MAX_PATH || is_blank(f[0]) ||
	    is_blank(f[len - 1]) || f[len - 1] == '\r' || strchr(f, '\n'))
		return 0;
	return 1;
}

int tm_manifest_write(const char *path, int32_t world_size, const char *const *files)
{
	char *tmp;
	FILE *f;
	int32_t r;
	int ok;

	if (!path || !*path || !files || world_size < 1 ||
	    world_size > TM_MANIFEST_MAX_WORLD)
		return TM_ERR_INVALID_ARG;
	for (r = 0; r < world_size; r++)
		if (!writable_name(files[r]))
			return TM_ERR_INVALID_ARG;
	tmp = tm_asprintf("%s.tmp", path);
	if (!tmp)
		return TM_ERR_NOMEM;
	f = fopen(tmp, "we");
	if (!f) {
		free(tmp);
		return TM_ERR_IO;
	}
	ok = fprintf(f, "tmrun-manifest %d\n"
		     "# one .tmrun per rank of a distributed run (doc/tmrun.md)\n"
		     "world_size %d\n", TM_MANIFEST_VERSION, (int)world_size) > 0;
	for (r = 0; ok && r < world_size; r++)
		ok = fprintf(f, "rank %d %s\n", (int)r, files[r]) > 0;
	ok = ok && fflush(f) == 0;
	/* The manifest is what a crash or a kill leaves behind with the
	 * traces: let rename publish only bytes that are on disk. */
	if (ok && fsync(fileno(f)) && errno != EINVAL && errno != EROFS)
		ok = 0;
	if (fclose(f))
		ok = 0;
	if (ok && rename(tmp, path))
		ok = 0;
	if (!ok)
		unlink(tmp);
	free(tmp);
	return ok ? TM_OK : TM_ERR_IO;
}

void tm_manifest_free(struct tm_manifest *m)
{
	int32_t r;

	if (!m)
		return;
	if (m->paths)
		for (r = 0; r < m->world_size; r++)
			free(m->paths[r]);
	free(m->paths);
	free(m);
}

/*
 * "DIR/NAME.tmrun" -> "DIR/NAME" ins [".tmrun" when keep_ext]; a record
 * path without ".tmrun" gets ins appended.
 */
static int derive(const char *record, const char *ins, int keep_ext,
		  char *out, size_t len)
{
	size_t rlen, base;
	const char *ext = "";
	int n;

	if (!record || !out || len == 0)
		return TM_ERR_INVALID_ARG;
	rlen = strlen(record);
	base = rlen;
	if (rlen >= 6 && !strcmp(record + rlen - 6, ".tmrun")) {
		base = rlen - 6;
		if (keep_ext)
			ext = ".tmrun";
	}
	if (base > INT32_MAX)
		return TM_ERR_TOO_LARGE;
	n = snprintf(out, len, "%.*s%s%s", (int)base, record, ins, ext);
	if (n < 0)
		return TM_ERR_INVALID_ARG;
	if ((size_t)n >= len) {
		out[0] = '\0';
		return TM_ERR_TOO_LARGE;
	}
	return TM_OK;
}

int tm_manifest_rank_path(const char *record, int32_t rank, char *out, size_t len)
{
	char ins[24];

	if (rank < 0)
		return TM_ERR_INVALID_ARG;
	snprintf(ins, sizeof(ins), ".rank%d", (int)rank);
	return derive(record, ins, 1, out, len);
}

int tm_manifest_path(const char *record, char *out, size_t len)
{
	return derive(record, ".manifest", 0, out, len);
}
