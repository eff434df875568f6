/*
 * fuzz_dap.c -- libFuzzer target for tmdb's Debug Adapter Protocol input
 * (src/tmdb/dap-proto.c): Content-Length framing and the JSON of each
 * message, the code that reads what a DAP client writes to tmdb's stdin.
 *
 * Input: a byte stream as it arrives on stdin; its first byte seeds how
 * it is split into reads.  Checked beyond "no crash":
 *   - every outcome consumes: a message or an error takes at least one
 *     byte, "need more" takes none (the reader cannot loop forever);
 *   - the messages and errors read do not depend on how the stream was
 *     split into reads;
 *   - a message re-encodes (dap_frame_encode) to a frame that reads back
 *     as an equal object with nothing left over, printable ASCII only;
 *   - a request's parts come out or an error message does, never both.
 * dap-proto.c needs only libc and jansson; it is compiled in here.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dap.h"
#include "dap-proto.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_MSGS 64

/*
 * Reads the stream in chunks of at most `step` bytes (0: all at once) and
 * writes what came out (each message's canonical text, or "E:" and the
 * error) into log.  Returns the number of outcomes.
 */
static size_t read_stream(const uint8_t *data, size_t size, size_t step,
			  char **log)
{
	char *buf = malloc(size + 1);
	size_t have = 0, fed = 0, n = 0, loglen = 0;
	char err[256];

	*log = calloc(1, 1);
	if (!buf || !*log)
		abort();
	while (fed < size || have) {
		size_t used, add = step ? step : size;
		json_t *j;
		int rc;

		if (add > size - fed)
			add = size - fed;
		memcpy(buf + have, data + fed, add);
		have += add;
		fed += add;
		while ((rc = dap_frame_take(buf, have, &used, &j, err, sizeof(err))) != 0) {
			char *text;
			size_t tl;

			if (!used || used > have)
				abort();
			memmove(buf, buf + used, have - used);
			have -= used;
			if (rc < 0) {
				if (!err[0] || j)
					abort();
				text = strdup(err);
			} else {
				const char *cmd;
				json_int_t seq;
				json_t *args;
				char e2[256];

				if (!j || !json_is_object(j))
					abort();
				e2[0] = 0;
				if (dap_request_parts(j, &cmd, &seq, &args, e2, sizeof(e2))) {
					if (!e2[0] || cmd || args)
						abort();
				} else if (!cmd || !*cmd || seq < 0 ||
					   (args && !json_is_object(args))) {
					abort();
				}
				/* the encoder and the reader agree */
				{
					size_t fl, u2;
					char *frame = dap_frame_encode(j, &fl);
					json_t *k;
					size_t i;

					if (!frame)
						abort();
					for (i = 0; i < fl; i++)
						if ((unsigned char)frame[i] > 0x7e ||
						    ((unsigned char)frame[i] < 0x20 &&
						     frame[i] != '\r' && frame[i] != '\n'))
							abort();
					if (dap_frame_take(frame, fl, &u2, &k, err, sizeof(err)) != 1 ||
					    u2 != fl || !json_equal(j, k))
						abort();
					json_decref(k);
					free(frame);
				}
				text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS |
						  JSON_ENSURE_ASCII);
				json_decref(j);
				if (!text)
					abort();
			}
			tl = strlen(text);
			*log = realloc(*log, loglen + tl + 4);
			if (!*log)
				abort();
			memcpy(*log + loglen, rc < 0 ? "E:" : "M:", 2);
			memcpy(*log + loglen + 2, text, tl);
			loglen += tl + 2;
			(*log)[loglen++] = '\n';
			(*log)[loglen] = 0;
			free(text);
			if (++n > MAX_MSGS * 4)
				break;
		}
		if (fed == size)
			break;
	}
	free(buf);
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *whole, *split;
	size_t step;

	if (size < 1 || size > 256 * 1024)
		return 0;
	step = 1 + data[0] % 97;
	data++;
	size--;
	read_stream(data, size, 0, &whole);
	read_stream(data, size, step, &split);
	/*
	 * Splitting only changes what an over-long header without a blank
	 * line looks like when it is dropped (up to its last newline so far);
	 * compare only when no such error happened.
	 */
	if (!strstr(whole, "E:Message header too long.") &&
	    !strstr(split, "E:Message header too long.") && strcmp(whole, split))
		abort();
	free(whole);
	free(split);
	return 0;
}
