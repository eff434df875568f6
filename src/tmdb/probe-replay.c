/*
 * probe-replay.c -- the RuntimeProbe over a recorded .tmrun file.
 *
 * A thin adapter from the probe vtable (probe.h) to tm_reader: the cursor is
 * the reader's cursor.  "latest" queries use a second reader on the same
 * file, filtered to the one node asked about, so that answering an addressed
 * TQL term never disturbs the playhead's cursor.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"

struct replay {
	struct tm_probe base;   /* first: the vtable pointer */
	tm_reader *r;
	char *path;
	tm_reader *look;        /* opened on the first latest() */
	uint32_t look_node;     /* node the look reader is filtered to */
	char detail[256];
};

static struct replay *impl(struct tm_probe *p)
{
	return (struct replay *)p;
}

static int replay_describe(struct tm_probe *p, struct tm_probe_info *out)
{
	struct replay *rp = impl(p);

	memset(out, 0, sizeof(*out));
	out->kind = "replay";
	out->source = rp->path;
	out->can_reverse = 1;
	out->can_pause = 0;
	out->can_capture = 0;
	out->meta = tm_reader_meta(rp->r);
	out->summary = tm_reader_summary(rp->r);
	return TM_OK;
}

static const tm_nodetab *replay_nodes(struct tm_probe *p)
{
	return tm_reader_nodes(impl(p)->r);
}

static int replay_next(struct tm_probe *p, int dir, struct tm_record *rec)
{
	struct replay *rp = impl(p);
	int err;

	err = dir == TM_DIR_BWD ? tm_reader_prev(rp->r, rec) :
				  tm_reader_next(rp->r, rec);
	if (err != TM_OK && err != TM_ERR_END)
		snprintf(rp->detail, sizeof(rp->detail), "%s",
			 tm_reader_detail(rp->r));
	return err;
}

static int replay_seek(struct tm_probe *p, int kind, uint64_t value)
{
	struct replay *rp = impl(p);
	int err;

	switch (kind) {
	case TM_SEEK_START: err = tm_reader_rewind(rp->r); break;
	case TM_SEEK_END: err = tm_reader_seek_end(rp->r); break;
	case TM_SEEK_SEQ: err = tm_reader_seek_seq(rp->r, value); break;
	case TM_SEEK_STEP: err = tm_reader_seek_step(rp->r, value); break;
	case TM_SEEK_TIME: err = tm_reader_seek_time(rp->r, value); break;
	default: return TM_ERR_INVALID_ARG;
	}
	/* a seek decodes the chunk it lands in: a damaged one is said */
	if (err != TM_OK && err != TM_ERR_END)
		snprintf(rp->detail, sizeof(rp->detail), "%s",
			 tm_reader_detail(rp->r));
	return err;
}

/* Points the look-up reader's filter at one node (kept between calls). */
static int look_filter(struct replay *rp, uint32_t node)
{
	const struct tm_node *n;
	tm_address *a = NULL;
	int err;

	if (rp->look_node == node)
		return TM_OK;
	n = tm_nodetab_get(tm_reader_nodes(rp->look), node);
	if (!n)
		return TM_ERR_NOT_FOUND;
	err = tm_address_parse(n->address, &a, NULL, NULL);
	if (err == TM_OK)
		err = tm_reader_set_filter(rp->look, a);
	tm_address_free(a);
	if (err == TM_OK)
		rp->look_node = node;
	return err;
}

static int replay_latest(struct tm_probe *p, uint32_t node, int evkind,
			 const struct tm_slot *slot, uint32_t call,
			 uint64_t at_seq, struct tm_event *out, uint32_t *reason)
{
	struct replay *rp = impl(p);
	struct tm_record rec;
	char *detail = NULL;
	int err;

	*reason = 0;
	if (!rp->look) {
		err = tm_reader_open(rp->path, 0, &rp->look, &detail);
		free(detail);
		if (err != TM_OK)
			return err;
		rp->look_node = TM_NODE_NONE;
	}
	err = look_filter(rp, node);
	if (err != TM_OK)
		return err;
	if (at_seq == UINT64_MAX)
		err = tm_reader_seek_end(rp->look);
	else
		err = tm_reader_seek_seq(rp->look, at_seq + 1);
	if (err != TM_OK)
		return err;
	for (;;) {
		err = tm_reader_prev(rp->look, &rec);
		if (err == TM_ERR_END)
			return TM_ERR_NOT_FOUND;
		if (err != TM_OK)
			return err;
		if (rec.type == TM_REC_GAP) {
			if (rec.u.gap.first_seq > at_seq)
				continue;
			/* The answer may be among the lost events. */
			*reason = rec.u.gap.reason ? rec.u.gap.reason :
						     TM_GAP_BACKPRESSURE;
			return TM_ERR_NOT_FOUND;
		}
		if (rec.type != TM_REC_EVENT)
			continue;
		if (rec.u.event.seq > at_seq)
			continue;
		if (rec.u.event.node != node || rec.u.event.kind != evkind)
			continue;
		if (call && rec.u.event.call != call)
			continue;
		if (!tm_event_holds_slot(&rec.u.event, slot))
			continue;
		return tm_event_copy(out, &rec.u.event);
	}
}

static int replay_capture(struct tm_probe *p, uint32_t node, struct tm_slot slot)
{
	(void)p;
	(void)node;
	(void)slot;
	return TM_ERR_UNSUPPORTED;
}

static const char *replay_detail(struct tm_probe *p)
{
	return impl(p)->detail;
}

static void replay_detach(struct tm_probe *p)
{
	struct replay *rp = impl(p);

	if (!rp)
		return;
	tm_reader_close(rp->r);
	tm_reader_close(rp->look);
	free(rp->path);
	free(rp);
}

static const struct tm_annot *replay_annotation(struct tm_probe *p,
						const struct tm_event *ev,
						const char *key)
{
	const struct tm_annot *a;

	/* a damaged chunk reads as "not known", as a gap would */
	return tm_reader_annotation(impl(p)->r, ev->step, key, &a) ? NULL : a;
}

static const struct tm_probe_ops replay_ops = {
	.name = "replay",
	.describe = replay_describe,
	.nodes = replay_nodes,
	.next_event = replay_next,
	.seek = replay_seek,
	.latest = replay_latest,
	.capture = replay_capture,
	.detail = replay_detail,
	.detach = replay_detach,
	.annotation = replay_annotation,
};

int tm_probe_replay_open(const char *path, struct tm_probe **out, char **detail)
{
	struct replay *rp;
	int err;

	*out = NULL;
	rp = calloc(1, sizeof(*rp));
	if (!rp)
		return TM_ERR_NOMEM;
	rp->base.ops = &replay_ops;
	rp->path = strdup(path);
	if (!rp->path) {
		free(rp);
		return TM_ERR_NOMEM;
	}
	err = tm_reader_open(path, 0, &rp->r, detail);
	if (err != TM_OK) {
		free(rp->path);
		free(rp);
		return err;
	}
	*out = &rp->base;
	return TM_OK;
}
