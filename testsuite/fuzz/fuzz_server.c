/*
 * fuzz_server.c -- libFuzzer target for the probe-side server's state
 * machine (src/lib/server.c, doc/wire.md section 2): the input is what a
 * hostile or broken debugger sends over a real connection while the model
 * runs.
 *
 * Byte 0 chooses: bit 0 the TCP server (token checked at HELLO; byte 1
 * set: the real token is put into the first HELLO the input holds, so the
 * session gets past the handshake), bit 1 a model thread emitting events
 * meanwhile (breakpoints may stop it), bit 2 a second connection that
 * knocks while the first talks (refusal, takeover), bits 4-7 how the rest
 * is cut into writes.  Then the client half-closes and reads until the
 * server closes.  Properties, besides no crash and no sanitizer report:
 * the server closes the connection once the client has gone quiet, and
 * the model never stays paused after its debugger left -- both within 5 s,
 * else abort().  Built with standalone.c it replays corpus/server in
 * `make check`.
 */
#include "config.h"

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include "tensormorph.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tm_server *usrv, *tsrv;
static char upath[108];
static unsigned tport;

static const char *const names[] = { "model", "model.fc1", "model.act", "model.fc2" };

static tm_server *start(const char *path)
{
	struct tm_server_opts o;
	struct tm_run_meta meta;
	tm_server *srv = NULL;
	uint32_t i;

	tm_server_opts_default(&o);
	o.path = path;
	o.hello_ms = 300;
	o.takeover_ms = 50;
	o.max_queue = 64u << 10;
	if (tm_server_start(&o, &srv))
		return NULL;
	memset(&meta, 0, sizeof(meta));
	meta.probe_kind = "synthetic";
	meta.rank = -1;
	tm_server_meta(srv, &meta);
	for (i = 0; i < 4; i++) {
		struct tm_node n;

		memset(&n, 0, sizeof(n));
		n.id = i;
		n.parent = i ? 0 : TM_NODE_NONE;
		n.depth = i ? 1 : 0;
		n.address = names[i];
		n.type = i ? "Linear" : "Net";
		tm_server_node(srv, &n);
	}
	return srv;
}

static int setup(void)
{
	const char *tmp = getenv("TMPDIR");
	static char xdg[96];

	snprintf(xdg, sizeof(xdg), "%s/fuzz-server-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(xdg))
		return -1;
	setenv("XDG_RUNTIME_DIR", xdg, 1);      /* the token file goes there */
	snprintf(upath, sizeof(upath), "%s/s.sock", xdg);
	usrv = start(upath);
	tsrv = start("tcp://127.0.0.1:0");
	if (!usrv || !tsrv ||
	    sscanf(tm_server_path(tsrv), "tcp://127.0.0.1:%u", &tport) != 1)
		return -1;
	return 0;
}

static int dial(int tcp)
{
	int fd;

	if (tcp) {
		struct sockaddr_in sa;

		memset(&sa, 0, sizeof(sa));
		sa.sin_family = AF_INET;
		sa.sin_port = htons((uint16_t)tport);
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
			close(fd);
			fd = -1;
		}
	} else {
		struct sockaddr_un sa;

		memset(&sa, 0, sizeof(sa));
		sa.sun_family = AF_UNIX;
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", upath);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
			close(fd);
			fd = -1;
		}
	}
	return fd;
}

struct model {
	tm_server *srv;
	atomic_int done;
};

static void *model_main(void *arg)
{
	static const uint8_t nodes[8] = { 0, 1, 1, 2, 2, 3, 3, 0 };
	struct model *m = arg;
	uint64_t seq;

	for (seq = 0; seq < 64; seq++) {
		struct tm_event e;
		struct tm_tensor t;
		int i = (int)(seq % 8);

		memset(&e, 0, sizeof(e));
		memset(&t, 0, sizeof(t));
		e.seq = seq;
		e.step = seq / 8;
		e.node = nodes[i];
		e.call = 1;
		e.kind = (i == 0 || i == 1 || i == 3 || i == 5) ? TM_EV_ENTER : TM_EV_EXIT;
		e.level = 1;
		e.time_ns = seq * 1000;
		t.slot.kind = e.kind == TM_EV_ENTER ? TM_SLOT_IN : TM_SLOT_OUT;
		t.dtype = TM_DT_F32;
		t.rank = 1;
		t.shape[0] = 4;
		t.have = TM_STAT_BIT(TM_STAT_NUMEL) | TM_STAT_BIT(TM_STAT_MAX);
		t.stat[TM_STAT_NUMEL] = 4;
		t.stat[TM_STAT_MAX] = (double)seq;
		e.ntensors = 1;
		e.tensors = &t;
		tm_server_event(m->srv, &e);
	}
	atomic_store(&m->done, 1);
	return NULL;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Reads (and discards) until the server closes; aborts after 5 s. */
static void drain_until_closed(int fd)
{
	double t0 = now_s();
	uint8_t buf[65536];

	for (;;) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (now_s() - t0 > 5.0)
			abort();        /* the server kept a quiet client open */
		if (poll(&pf, 1, 100) <= 0)
			continue;
		n = recv(fd, buf, sizeof(buf), 0);
		if (n <= 0)
			return;
	}
}

/* Puts the TCP token into the input's first HELLO frame (re-framed). */
static uint8_t *with_token(const uint8_t *d, size_t n, size_t *out_n)
{
	tm_frame_decoder *dec = tm_frame_decoder_new(0);
	struct tm_buf b = { 0 };
	struct tm_frame f;
	struct tm_msg *m = malloc(sizeof(*m));
	uint8_t *out = NULL;
	size_t used;

	if (!dec || !m || tm_frame_decoder_feed(dec, d, n))
		goto done;
	if (tm_frame_decoder_next(dec, &f) || f.type != TM_MSG_HELLO || tm_msg_decode(&f, m))
		goto done;
	used = 16 + (size_t)f.len;
	snprintf(m->u.hello.token, sizeof(m->u.hello.token), "%s", tm_server_token(tsrv));
	if (tm_msg_encode(&b, m) || !(out = malloc(b.len + n - used + 1)))
		goto done;
	memcpy(out, b.data, b.len);
	memcpy(out + b.len, d + used, n - used);
	*out_n = b.len + n - used;
done:
	tm_buf_free(&b);
	free(m);
	tm_frame_decoder_free(dec);
	return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready = -1;
	struct model m;
	pthread_t th;
	uint8_t opt, *tok = NULL;
	size_t off = 0, step;
	int fd, fd2 = -1, tcp, run_model;

	if (ready < 0)
		ready = setup() == 0;
	if (!ready || size < 2 || size > 65536)
		return 0;
	opt = data[0];
	tcp = opt & 1;
	run_model = opt & 2;
	step = ((size_t)(opt >> 4) + 1) * 7;
	data += 2;
	size -= 2;
	if (tcp && data[-1]) {
		size_t n2;

		tok = with_token(data, size, &n2);
		if (tok) {
			data = tok;
			size = n2;
		}
	}
	fd = dial(tcp);
	if (fd < 0) {
		free(tok);
		return 0;
	}
	m.srv = tcp ? tsrv : usrv;
	atomic_store(&m.done, 0);
	if (run_model && pthread_create(&th, NULL, model_main, &m))
		run_model = 0;
	while (off < size) {
		size_t k = size - off < step ? size - off : step;

		if (send(fd, data + off, k, MSG_NOSIGNAL) < 0)
			break;
		off += k;
		if ((opt & 4) && fd2 < 0 && off >= size / 2)
			fd2 = dial(tcp);        /* knocks while the first talks */
	}
	shutdown(fd, SHUT_WR);
	drain_until_closed(fd);
	close(fd);
	if (fd2 >= 0) {
		shutdown(fd2, SHUT_WR);
		drain_until_closed(fd2);
		close(fd2);
	}
	if (run_model) {
		double t0 = now_s();

		while (!atomic_load(&m.done)) {
			if (now_s() - t0 > 5.0)
				abort();        /* the model stayed paused, debugger gone */
			usleep(1000);
		}
		pthread_join(th, NULL);
	}
	free(tok);
	return 0;
}
