/*
 * hello-trace.c -- built by `make installcheck' against the installed
 * headers and library through pkg-config: what a user's program needs to
 * write a trace and read it back.
 */
#include <stdio.h>
#include <tensormorph.h>

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "hello.tmrun";
	struct tm_node n = { 0 };
	struct tm_event e = { 0 };
	struct tm_record rec;
	tm_writer *w;
	tm_reader *r;
	uint32_t id;
	int err;

	n.address = "model";
	n.parent = TM_NODE_NONE;
	if ((err = tm_writer_open(path, NULL, &w)) || (err = tm_writer_node(w, &n, &id)))
		goto fail;
	e.node = id;
	e.kind = TM_EV_EXIT;
	if ((err = tm_writer_event(w, &e)) || (err = tm_writer_close(w)))
		goto fail;
	if ((err = tm_reader_open(path, 0, &r, NULL)) || (err = tm_reader_next(r, &rec)))
		goto fail;
	printf("%s: read back event %llu of %s\n", tm_version_string(),
	       (unsigned long long)rec.u.event.seq,
	       tm_nodetab_get(tm_reader_nodes(r), rec.u.event.node)->address);
	tm_reader_close(r);
	return 0;
fail:
	fprintf(stderr, "hello-trace: %s\n", tm_strerror(err));
	return 1;
}
