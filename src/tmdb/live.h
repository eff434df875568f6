/*
 * live.h -- the live RuntimeProbe (probe-remote.c) that `attach` uses.
 */
#ifndef TMDB_LIVE_H
#define TMDB_LIVE_H

#include "probe.h"

/*
 * Connects to a probe's wire server: target is a socket path, or a pid whose
 * socket is found in the private socket directory (tm_server_socket_path).
 * Handshakes, subscribes to every event and pauses the model at its next
 * event.  On failure returns the tm_err code and a malloc'd message in
 * *detail.
 */
int tm_probe_remote_open(const char *target, struct tm_probe **out,
			 char **detail);

/* "process 4242 (pytorch)": what the probe said it is; the probe must be remote. */
const char *tm_probe_remote_describe(struct tm_probe *p);

#endif /* TMDB_LIVE_H */
