/*
 * tm-manifest.h -- run manifests: the recording of a distributed
 * (torch.distributed) job is one .tmrun per rank plus a small text file
 * naming them (doc/tmrun.md, "Run manifest"):
 *
 *   tmrun-manifest 1
 *   world_size 2
 *   rank 0 run.rank0.tmrun
 *   rank 1 run.rank1.tmrun
 *
 * Rank 0 writes it; tmdb reads it to replay every rank on one time axis.
 * Manifests are untrusted input: sizes are capped and every error names
 * its line.
 */
#ifndef TM_MANIFEST_H
#define TM_MANIFEST_H

#include "tm-types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TM_MANIFEST_VERSION 1
#define TM_MANIFEST_MAX_WORLD 4096          /* world_size is 1..this */
#define TM_MANIFEST_MAX_PATH 4096           /* bytes in a path as written, exclusive */
#define TM_MANIFEST_MAX_SIZE (1024 * 1024)  /* bytes in the file, exclusive */

struct tm_manifest {
	int32_t world_size;
	char **paths;   /* [world_size], by rank, resolved against the dir */
};

/*
 * Parses a manifest's text.  Relative paths are resolved against dir (the
 * manifest's directory); dir NULL or "": paths as written.  On error
 * returns TM_ERR_CORRUPT (or TM_ERR_NOMEM, TM_ERR_INVALID_ARG) and, if
 * detail is not NULL, a malloc'd one-line message naming the line
 * ("manifest:3: rank 5 is not below world_size 2"); *detail is NULL on
 * success.
 */
int tm_manifest_parse(const char *text, size_t len, const char *dir,
		      struct tm_manifest **out, char **detail);
/* Reads and parses the file at path; paths resolve against its directory
 * and messages name it ("out/run.manifest:3: ...").  TM_ERR_IO when it
 * cannot be read. */
int tm_manifest_read(const char *path, struct tm_manifest **out, char **detail);
/*
 * Writes a manifest atomically (PATH.tmp, then rename); files[r] is the
 * trace of rank r, written as given (name them relative to the manifest's
 * directory).  TM_ERR_INVALID_ARG for a world_size out of range or a name
 * the format cannot hold (empty, too long, a line break, blanks at either
 * end); TM_ERR_IO when the file cannot be written.
 */
int tm_manifest_write(const char *path, int32_t world_size, const char *const *files);
void tm_manifest_free(struct tm_manifest *m);

/*
 * The per-rank trace name and the manifest name for a record path:
 * "out/run.tmrun", 2 -> "out/run.rank2.tmrun"; manifest "out/run.manifest".
 * A path not ending in .tmrun gets ".rankR" / ".manifest" appended.
 * TM_ERR_TOO_LARGE if len is too small, TM_ERR_INVALID_ARG for a negative
 * rank or NULL.
 */
int tm_manifest_rank_path(const char *record, int32_t rank, char *out, size_t len);
int tm_manifest_path(const char *record, char *out, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* TM_MANIFEST_H */
