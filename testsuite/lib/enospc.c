/*
 * enospc.c -- an LD_PRELOAD shim that plays a disk filling up, for the
 * tests of a full disk (testsuite/probes/test_hostile.py): writes to a
 * file whose name ends in $TM_ENOSPC_SUFFIX (default ".tmrun") fail with
 * ENOSPC once the file would grow past $TM_ENOSPC_LIMIT bytes -- the part
 * that fits is written first, as a real file system does.  Truncating the
 * file frees its space again.  Every other write goes through untouched.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

static ssize_t (*real_write)(int, const void *, size_t);

/* How many bytes of a write of len may land on fd; SIZE_MAX: no limit. */
static size_t room(int fd, size_t len)
{
	const char *lim = getenv("TM_ENOSPC_LIMIT");
	const char *suf = getenv("TM_ENOSPC_SUFFIX");
	char link[64], name[4096];
	struct stat st;
	ssize_t n;
	off_t pos, limit;
	size_t sl;

	if (!lim)
		return (size_t)-1;
	if (!suf)
		suf = ".tmrun";
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, name, sizeof(name) - 1);
	if (n <= 0)
		return (size_t)-1;
	name[n] = 0;
	sl = strlen(suf);
	if ((size_t)n < sl || strcmp(name + n - sl, suf) || fstat(fd, &st) ||
	    !S_ISREG(st.st_mode))
		return (size_t)-1;
	limit = (off_t)strtoll(lim, NULL, 10);
	pos = lseek(fd, 0, SEEK_CUR);
	if (pos < 0)
		return (size_t)-1;
	if (pos >= limit)
		return 0;
	return (size_t)(limit - pos) < len ? (size_t)(limit - pos) : len;
}

ssize_t write(int fd, const void *buf, size_t len)
{
	size_t r;

	if (!real_write)
		real_write = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
	r = room(fd, len);
	if (r == 0 && len) {
		errno = ENOSPC;
		return -1;
	}
	return real_write(fd, buf, r < len ? r : len);
}
