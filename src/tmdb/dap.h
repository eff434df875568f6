/*
 * dap.h -- the Debug Adapter Protocol front end (tmdb --interpreter=dap).
 *
 * dap-proto.c is the wire: Content-Length framed JSON messages, parsed with
 * jansson; it needs neither the session nor the library, so that the fuzz
 * target (testsuite/fuzz/fuzz_dap.c) builds it alone.  dap.c maps requests
 * onto the session: breakpoints through tm_bp_create/tm_bp_change, movement
 * through the command table, stops from s->on_stop.
 */
#ifndef TMDB_DAP_H
#define TMDB_DAP_H

#include <stddef.h>

#include <jansson.h>

/* The most one message's body may hold; a bigger one is refused. */
#define DAP_BODY_MAX (16u * 1024 * 1024)
/* The most a header block may hold before its blank line. */
#define DAP_HEADER_MAX 1024u

/*
 * Takes the first message off buf[0..len).  Returns 1 with *msg (a JSON
 * object, owned by the caller) and *used bytes consumed; 0 when more bytes
 * are needed (*used 0); -1 for a malformed message, with a message in err
 * and *used the bytes to drop (at least 1) so that reading can go on.
 */
int dap_frame_take(const char *buf, size_t len, size_t *used, json_t **msg,
		   char *err, size_t errlen);

/*
 * A request's parts: its command, seq and arguments (an object, or NULL
 * when absent).  Returns 0, or -1 with a message in err for anything that
 * is not a request DAP allows (type "request", integer seq >= 0, string
 * command, object arguments).
 */
int dap_request_parts(json_t *msg, const char **command, json_int_t *seq,
		      json_t **args, char *err, size_t errlen);

/*
 * Frames a message: "Content-Length: N\r\n\r\n" and its compact JSON.
 * Returns a malloc'd buffer and its length in *len, or NULL.
 */
char *dap_frame_encode(json_t *msg, size_t *len);

/* dap.c */
struct tm_session;
int tm_dap_init(struct tm_session *s);
int tm_dap_run(struct tm_session *s);
void tm_dap_done(struct tm_session *s);

#endif /* TMDB_DAP_H */
