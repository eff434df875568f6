/*
 * layout.c -- the layout of the structs and the values of the constants
 * that bindings mirror (tm_layout, tm-types.h).
 *
 * The Python probe declares ctypes and struct.Struct mirrors of these
 * structs and copies the constants; its C fast path (_hook.c) mirrors the
 * batch structs so that pip can build it from the probe's sources alone.
 * Each checks every field, size and constant it mirrors against this table
 * when it is imported, and refuses to run on a mismatch: the compiler
 * fills the table from the headers, so it is the one source of truth.
 */
#include "config.h"

#include <stddef.h>

#include "tm-internal.h"
#include "tm-manifest.h"
#include "tm-recorder.h"
#include "tm-server.h"
#include "tm-tmrun.h"
#include "tm-wire.h"

#define SIZE(T) { #T ".sizeof", (int64_t)sizeof(struct T) }
#define FIELD(T, f) \
	{ #T "." #f ".offset", (int64_t)offsetof(struct T, f) }, \
	{ #T "." #f ".sizeof", (int64_t)sizeof(((struct T *)0)->f) }
#define CONST(c) { #c, (int64_t)(c) }

static const struct tm_layout_item items[] = {
	/* tm-recorder.h: the batch a probe fills */
	SIZE(tm_rec_tensor),
	FIELD(tm_rec_tensor, data), FIELD(tm_rec_tensor, numel),
	FIELD(tm_rec_tensor, have), FIELD(tm_rec_tensor, slot_index),
	FIELD(tm_rec_tensor, device_index), FIELD(tm_rec_tensor, slot_kind),
	FIELD(tm_rec_tensor, dtype), FIELD(tm_rec_tensor, rank),
	FIELD(tm_rec_tensor, device_type), FIELD(tm_rec_tensor, level),
	FIELD(tm_rec_tensor, capture), FIELD(tm_rec_tensor, have_hist),
	FIELD(tm_rec_tensor, done), FIELD(tm_rec_tensor, shape),
	FIELD(tm_rec_tensor, stat), FIELD(tm_rec_tensor, hist_lo),
	FIELD(tm_rec_tensor, hist_hi), FIELD(tm_rec_tensor, hist),
	SIZE(tm_rec_event),
	FIELD(tm_rec_event, step), FIELD(tm_rec_event, time_ns),
	FIELD(tm_rec_event, start_ns), FIELD(tm_rec_event, end_ns),
	FIELD(tm_rec_event, node), FIELD(tm_rec_event, call),
	FIELD(tm_rec_event, ntensors), FIELD(tm_rec_event, op_index),
	FIELD(tm_rec_event, kind), FIELD(tm_rec_event, phase),
	FIELD(tm_rec_event, level), FIELD(tm_rec_event, op_flags),
	SIZE(tm_rec_batch),
	FIELD(tm_rec_batch, events), FIELD(tm_rec_batch, tensors),
	FIELD(tm_rec_batch, nev), FIELD(tm_rec_batch, reserved),
	SIZE(tm_recorder_opts),
	FIELD(tm_recorder_opts, ring_events), FIELD(tm_recorder_opts, ring_tensors),
	FIELD(tm_recorder_opts, ring_payload_bytes), FIELD(tm_recorder_opts, lossless),
	FIELD(tm_recorder_opts, manual_drain), FIELD(tm_recorder_opts, drain_interval_ns),
	SIZE(tm_recorder_stats),
	FIELD(tm_recorder_stats, next_seq), FIELD(tm_recorder_stats, events_written),
	FIELD(tm_recorder_stats, events_dropped), FIELD(tm_recorder_stats, gaps_written),
	FIELD(tm_recorder_stats, payload_bytes), FIELD(tm_recorder_stats, writer_err),
	/* tm-server.h */
	SIZE(tm_server_opts),
	FIELD(tm_server_opts, path), FIELD(tm_server_opts, probe_kind),
	FIELD(tm_server_opts, trace), FIELD(tm_server_opts, max_level),
	FIELD(tm_server_opts, caps), FIELD(tm_server_opts, max_queue),
	FIELD(tm_server_opts, max_frame), FIELD(tm_server_opts, no_pause),
	FIELD(tm_server_opts, pause_ms), FIELD(tm_server_opts, hello_ms),
	FIELD(tm_server_opts, takeover_ms),
	SIZE(tm_server_stats),
	FIELD(tm_server_stats, connected), FIELD(tm_server_stats, subscribed),
	FIELD(tm_server_stats, stopped), FIELD(tm_server_stats, clients),
	FIELD(tm_server_stats, events_sent), FIELD(tm_server_stats, events_dropped),
	FIELD(tm_server_stats, stops), FIELD(tm_server_stats, bad_frames),
	FIELD(tm_server_stats, breakpoints), FIELD(tm_server_stats, timed_out),
	/* tm-types.h: the records a reader hands out */
	SIZE(tm_slot), FIELD(tm_slot, kind), FIELD(tm_slot, index),
	SIZE(tm_tensor),
	FIELD(tm_tensor, slot), FIELD(tm_tensor, dtype), FIELD(tm_tensor, rank),
	FIELD(tm_tensor, device_type), FIELD(tm_tensor, device_index),
	FIELD(tm_tensor, shape), FIELD(tm_tensor, have), FIELD(tm_tensor, stat),
	FIELD(tm_tensor, have_hist), FIELD(tm_tensor, hist_lo),
	FIELD(tm_tensor, hist_hi), FIELD(tm_tensor, hist),
	FIELD(tm_tensor, payload), FIELD(tm_tensor, payload_len),
	SIZE(tm_event),
	FIELD(tm_event, seq), FIELD(tm_event, step), FIELD(tm_event, phase),
	FIELD(tm_event, kind), FIELD(tm_event, level), FIELD(tm_event, node),
	FIELD(tm_event, call), FIELD(tm_event, time_ns), FIELD(tm_event, start_ns),
	FIELD(tm_event, end_ns), FIELD(tm_event, ntensors), FIELD(tm_event, tensors),
	FIELD(tm_event, op_index), FIELD(tm_event, op_flags),
	SIZE(tm_gap),
	FIELD(tm_gap, first_seq), FIELD(tm_gap, last_seq), FIELD(tm_gap, count),
	FIELD(tm_gap, reason), FIELD(tm_gap, time_ns), FIELD(tm_gap, step),
	SIZE(tm_crash),
	FIELD(tm_crash, seq), FIELD(tm_crash, step), FIELD(tm_crash, time_ns),
	FIELD(tm_crash, signo), FIELD(tm_crash, node), FIELD(tm_crash, phase),
	FIELD(tm_crash, nframes), FIELD(tm_crash, frames),
	SIZE(tm_node),
	FIELD(tm_node, id), FIELD(tm_node, parent), FIELD(tm_node, depth),
	FIELD(tm_node, kind), FIELD(tm_node, address), FIELD(tm_node, type),
	FIELD(tm_node, file), FIELD(tm_node, line),
	SIZE(tm_run_meta),
	FIELD(tm_run_meta, probe_kind), FIELD(tm_run_meta, default_level),
	FIELD(tm_run_meta, torch_version), FIELD(tm_run_meta, host),
	FIELD(tm_run_meta, start_unix_ns), FIELD(tm_run_meta, rank),
	FIELD(tm_run_meta, world_size), FIELD(tm_run_meta, command),
	FIELD(tm_run_meta, npairs), FIELD(tm_run_meta, keys),
	FIELD(tm_run_meta, values),
	SIZE(tm_annot),
	FIELD(tm_annot, seq), FIELD(tm_annot, step), FIELD(tm_annot, time_ns),
	FIELD(tm_annot, key), FIELD(tm_annot, count), FIELD(tm_annot, nvalues),
	FIELD(tm_annot, values),
	SIZE(tm_record), FIELD(tm_record, type), FIELD(tm_record, u),
	SIZE(tm_manifest), FIELD(tm_manifest, world_size), FIELD(tm_manifest, paths),
	/* tm-tmrun.h */
	SIZE(tm_summary),
	FIELD(tm_summary, version_major), FIELD(tm_summary, version_minor),
	FIELD(tm_summary, indexed), FIELD(tm_summary, complete),
	FIELD(tm_summary, damaged), FIELD(tm_summary, damage_err),
	FIELD(tm_summary, damage_offset), FIELD(tm_summary, nchunks),
	FIELD(tm_summary, nevents), FIELD(tm_summary, ngaps),
	FIELD(tm_summary, ncrashes), FIELD(tm_summary, nrecords),
	FIELD(tm_summary, first_seq), FIELD(tm_summary, last_seq),
	FIELD(tm_summary, first_step), FIELD(tm_summary, last_step),
	FIELD(tm_summary, first_time_ns), FIELD(tm_summary, last_time_ns),
	FIELD(tm_summary, file_bytes), FIELD(tm_summary, uncompressed_bytes),
	FIELD(tm_summary, index_damage),
	/* sizes and counts */
	CONST(TM_MAX_RANK), CONST(TM_STAT__COUNT), CONST(TM_HIST_BINS), CONST(TM_HIST_LINEAR),
	CONST(TM_HIST_LOG2),
	CONST(TM_MAX_TENSORS), CONST(TM_META_MAX_PAIRS), CONST(TM_MAX_FRAMES),
	CONST(TM_NODE_NONE), CONST(TM_ANNOT_MAX_VALUES), CONST(TM_ANNOT_MAX_VALUE),
	/* enum tm_err */
	CONST(TM_OK), CONST(TM_ERR_GENERIC), CONST(TM_ERR_NOMEM), CONST(TM_ERR_IO),
	CONST(TM_ERR_INVALID_ARG), CONST(TM_ERR_BAD_MAGIC), CONST(TM_ERR_VERSION),
	CONST(TM_ERR_CRC), CONST(TM_ERR_TRUNCATED), CONST(TM_ERR_TOO_LARGE),
	CONST(TM_ERR_CORRUPT), CONST(TM_ERR_NO_INDEX), CONST(TM_ERR_NOT_FOUND),
	CONST(TM_ERR_END), CONST(TM_ERR_ADDRESS), CONST(TM_ERR_TQL),
	CONST(TM_ERR_COMPRESS), CONST(TM_ERR_CLOSED), CONST(TM_ERR_AGAIN),
	CONST(TM_ERR_RESERVED), CONST(TM_ERR_UNSUPPORTED),
	/* enum tm_event_kind, tm_phase, tm_slot_kind, tm_node_kind,
	 * tm_record_type, tm_gap_reason */
	CONST(TM_EV_ENTER), CONST(TM_EV_EXIT), CONST(TM_EV_BWD), CONST(TM_EV_PARAM),
	CONST(TM_EV_RAISE), CONST(TM_EV_OP), CONST(TM_OPF_INPUTS_CHECKED), CONST(TM_OPF_INPUTS_FINITE),
	CONST(TM_CAP_OPS),
	CONST(TM_PHASE_FWD), CONST(TM_PHASE_BWD),
	CONST(TM_SLOT_OUT), CONST(TM_SLOT_IN), CONST(TM_SLOT_GRAD_OUT),
	CONST(TM_SLOT_GRAD_IN), CONST(TM_SLOT_DATA), CONST(TM_SLOT_GRAD),
	CONST(TM_SLOT__COUNT), CONST(TM_SLOT_ROWS), CONST(TM_SLOT_ROW_MAX),
	CONST(TM_SLOT_ROW_INDEX_MAX),
	CONST(TM_NODE_MODULE), CONST(TM_NODE_PARAM), CONST(TM_NODE_BUFFER), CONST(TM_NODE_OP),
	CONST(TM_REC_META), CONST(TM_REC_NODE), CONST(TM_REC_EVENT),
	CONST(TM_REC_GAP), CONST(TM_REC_CRASH), CONST(TM_REC_ANNOT),
	CONST(TM_GAP_BACKPRESSURE), CONST(TM_GAP_LEVEL), CONST(TM_GAP_FILTERED),
	CONST(TM_GAP_CRASH), CONST(TM_GAP_TRUNCATED),
};

const struct tm_layout_item *tm_layout(size_t *n)
{
	if (n)
		*n = sizeof(items) / sizeof(items[0]);
	return items;
}
