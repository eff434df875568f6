/*
 * server-bench.c -- what a debugger that subscribes and never reads costs
 * (issue 25, F6): the model thread's CPU per tm_server_event once the
 * probe's queue is full, and the CPU the other threads (the server thread)
 * burn meanwhile, against the same with no client.  Thread CPU time, so
 * that a loaded machine does not blur it.
 *
 *   perf/server-bench 0 2000000     no client
 *   perf/server-bench 1 2000000     a subscriber with a 4 KiB receive buffer
 *                                   that reads nothing
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include "tensormorph.h"
static double tcpu(clockid_t c) { struct timespec t; clock_gettime(c, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static void frame(int fd, int type, const unsigned char *p, unsigned n) { struct tm_buf b = {0}; tm_frame_encode(&b, type, 0, p, n); if (write(fd, b.data, b.len) < 0) {} tm_buf_free(&b); }
int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: server-bench 0|1 EVENTS\n");
		return 2;
	}
	{
	int deaf = atoi(argv[1]); long N = atol(argv[2]);
	struct tm_server_opts o; tm_server *srv; char path[128];
	snprintf(path, sizeof path, "/tmp/tm-server-bench-%d.sock", (int)getpid());
	tm_server_opts_default(&o); o.path = path;
	if (tm_server_start(&o, &srv)) { fprintf(stderr, "start\n"); return 1; }
	struct tm_node n; memset(&n, 0, sizeof n); n.address = "model"; n.type = "Net"; n.parent = TM_NODE_NONE; tm_server_node(srv, &n);
	int fd = -1;
	if (deaf) {
		struct sockaddr_un sa; memset(&sa, 0, sizeof sa); sa.sun_family = AF_UNIX; strcpy(sa.sun_path, path);
		fd = socket(AF_UNIX, SOCK_STREAM, 0); int r = 4096; setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &r, sizeof r);
		connect(fd, (struct sockaddr *)&sa, sizeof sa);
		static const unsigned char hello[] = {1,1,0,0,0,4,'d','e','a','f',0,0}; frame(fd, 64, hello, sizeof hello);
		static const unsigned char sub[] = {0,0}; frame(fd, 65, sub, 2);
		usleep(200000);
	}
	struct tm_event e; struct tm_tensor t; memset(&e, 0, sizeof e); memset(&t, 0, sizeof t);
	t.dtype = TM_DT_F32; t.rank = 1; t.shape[0] = 64; t.have = TM_STATS_L1_MASK; e.ntensors = 1; e.tensors = &t; e.level = 1;
	/* warm: fill the queue */
	long s;
	for (s = 0; s < 200000; s++) { e.seq = s; tm_server_event(srv, &e); }
	double m0 = tcpu(CLOCK_THREAD_CPUTIME_ID), p0 = tcpu(CLOCK_PROCESS_CPUTIME_ID), w0 = tcpu(CLOCK_MONOTONIC);
	for (long i = 0; i < N; i++, s++) { e.seq = s; tm_server_event(srv, &e); }
	double m1 = tcpu(CLOCK_THREAD_CPUTIME_ID), w1 = tcpu(CLOCK_MONOTONIC);
	usleep(500000);
	double p1 = tcpu(CLOCK_PROCESS_CPUTIME_ID), w2 = tcpu(CLOCK_MONOTONIC);
	printf("%s: model thread %.0f ns/event CPU; other threads %.2f CPU-s per wall-s\n", deaf ? "deaf subscriber" : "no client      ",
	       (m1 - m0) / N * 1e9, ((p1 - p0) - (m1 - m0)) / (w2 - w0));
	(void)w1;
	if (fd >= 0) close(fd);
	tm_server_stop(srv);
	return 0;
	}
}
