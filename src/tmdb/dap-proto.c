/*
 * dap-proto.c -- the Debug Adapter Protocol's framing: a header block of
 * "Name: value" lines ended by an empty line, of which Content-Length is
 * the one that matters, then that many bytes of JSON (UTF-8).
 *
 * Everything a front end writes passes through here first, so it refuses
 * rather than guesses: a header without Content-Length, a length that is
 * not a decimal number or is over DAP_BODY_MAX, a body that is not one JSON
 * object.  A refused message is dropped whole where its length is known,
 * so that the next one is read as it should be.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dap.h"

static void say(char *err, size_t errlen, const char *text)
{
	if (errlen)
		snprintf(err, errlen, "%s", text);
}

/* Where the header block ends ("\r\n\r\n", or "\n\n" from a lenient
 * writer), as the offset of the body; 0 when it has not ended yet. */
static size_t header_end(const char *buf, size_t len)
{
	size_t i;

	for (i = 0; i + 1 < len; i++) {
		if (buf[i] != '\n')
			continue;
		if (buf[i + 1] == '\n')
			return i + 2;
		if (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n')
			return i + 3;
	}
	return 0;
}

/* Content-Length's value from the header block [0, n); -1 when absent or
 * not a number, -2 when too big. */
static long long content_length(const char *h, size_t n)
{
	static const char name[] = "content-length:";
	size_t i = 0, l = sizeof(name) - 1;
	long long v = -1;

	while (i < n) {
		size_t e = i;

		while (e < n && h[e] != '\n')
			e++;
		if (e - i > l && !strncasecmp(h + i, name, l)) {
			size_t k = i + l;
			int digits = 0;

			while (k < e && (h[k] == ' ' || h[k] == '\t'))
				k++;
			v = 0;
			while (k < e && h[k] >= '0' && h[k] <= '9') {
				if (v > (long long)DAP_BODY_MAX)
					return -2;
				v = v * 10 + (h[k] - '0');
				digits++;
				k++;
			}
			while (k < e && (h[k] == ' ' || h[k] == '\t' || h[k] == '\r'))
				k++;
			if (!digits || k != e)
				return -1;
			if (v > (long long)DAP_BODY_MAX)
				return -2;
		}
		i = e + 1;
	}
	return v;
}

int dap_frame_take(const char *buf, size_t len, size_t *used, json_t **msg,
		   char *err, size_t errlen)
{
	size_t body;
	long long n;
	json_error_t je;
	json_t *j;

	*used = 0;
	*msg = NULL;
	body = header_end(buf, len);
	if (!body) {
		if (len > DAP_HEADER_MAX) {
			/* no blank line in sight: drop up to the last newline */
			size_t k = len;

			while (k > 0 && buf[k - 1] != '\n')
				k--;
			*used = k ? k : len;
			say(err, errlen, "Message header too long.");
			return -1;
		}
		return 0;
	}
	n = content_length(buf, body);
	if (n < 0) {
		*used = body;
		say(err, errlen, n == -2 ? "Content-Length too big." :
		    "Message header without a valid Content-Length.");
		return -1;
	}
	if ((size_t)n > len - body)
		return 0;
	*used = body + (size_t)n;
	j = json_loadb(buf + body, (size_t)n, JSON_REJECT_DUPLICATES, &je);
	if (!j) {
		if (errlen)
			snprintf(err, errlen, "Message body is not JSON: %s.", je.text);
		return -1;
	}
	if (!json_is_object(j)) {
		json_decref(j);
		say(err, errlen, "Message body is not a JSON object.");
		return -1;
	}
	*msg = j;
	return 1;
}

int dap_request_parts(json_t *msg, const char **command, json_int_t *seq,
		      json_t **args, char *err, size_t errlen)
{
	json_t *t = json_object_get(msg, "type"), *c, *q, *a;

	*command = NULL;
	*seq = 0;
	*args = NULL;
	if (!json_is_string(t) || strcmp(json_string_value(t), "request")) {
		say(err, errlen, "Not a request: only requests are read.");
		return -1;
	}
	q = json_object_get(msg, "seq");
	if (!json_is_integer(q) || json_integer_value(q) < 0) {
		say(err, errlen, "Request without a valid seq.");
		return -1;
	}
	c = json_object_get(msg, "command");
	if (!json_is_string(c) || !json_string_length(c)) {
		say(err, errlen, "Request without a command.");
		return -1;
	}
	a = json_object_get(msg, "arguments");
	if (a && !json_is_object(a) && !json_is_null(a)) {
		say(err, errlen, "Request arguments are not an object.");
		return -1;
	}
	*command = json_string_value(c);
	*seq = json_integer_value(q);
	*args = json_is_object(a) ? a : NULL;
	return 0;
}

char *dap_frame_encode(json_t *msg, size_t *len)
{
	char *body = json_dumps(msg, JSON_COMPACT | JSON_ENSURE_ASCII);
	char *out;
	size_t bl;
	int hl;

	if (!body)
		return NULL;
	bl = strlen(body);
	out = malloc(bl + 40);
	if (!out) {
		free(body);
		return NULL;
	}
	hl = snprintf(out, 40, "Content-Length: %zu\r\n\r\n", bl);
	memcpy(out + hl, body, bl);
	*len = (size_t)hl + bl;
	free(body);
	return out;
}
