/*
 * tm-compare.h -- a run beside a reference recording (doc/manual.md,
 * "Comparing with a reference").
 *
 * An event of the run is aligned with the reference's event of the same
 * address (through the map's rules), call number, step, kind and op index.
 * The aligner reads the reference one step at a time: memory is bounded by
 * one step's events (their stats; contents are read back only when asked
 * for), whatever the length of the recording, and the run may be read in
 * any order (a replay jumping back, a live run going forward).
 */
#ifndef TM_COMPARE_H
#define TM_COMPARE_H

#include "tm-types.h"
#include "tm-tmrun.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Why a run event has no aligned reference event: bits beside the gap
 * reasons and TQL's (tm_tql_reason_format spells them out).
 */
#define TM_REF_NONE (1u << 19)       /* no reference loaded: "no reference" */
#define TM_REF_NO_NODE (1u << 20)    /* the reference has no node of the address
				      * (after the map): "no reference node" */
#define TM_REF_NO_EVENT (1u << 21)   /* it has the node, not this call, step and
				      * kind: "no reference event" */
#define TM_REF_UNMAPPED (1u << 22)   /* a map rule with an empty right side
				      * excludes the address: "unmapped" */
/* Aligned by request ids (tm_align_set_requests): the reference served the
 * run step's requests in other batches, or the run step has no request ids
 * where the reference's step has: "batched differently". */
#define TM_REF_BATCH (1u << 27)
#define TM_REF__ALL (TM_REF_NONE | TM_REF_NO_NODE | TM_REF_NO_EVENT | TM_REF_UNMAPPED | \
		     TM_REF_BATCH)

/* ------------------------------------------------------------- map */

/*
 * Rules "RUN=REF" rename run addresses to reference addresses.  Each side
 * is a dotted address whose "*" segments match one segment each; the two
 * sides have as many "*", and the k-th "*" of REF takes the segment the
 * k-th of RUN matched.  A rule applies to an address that starts with its
 * RUN side, and what follows is kept:
 *     model.model.layers.*=model.blocks.*
 * maps model.model.layers.3.mlp.up_proj to model.blocks.3.mlp.up_proj.
 * An empty REF ("model.**.q_proj=" is not allowed, "model.attn.q_proj=" is)
 * excludes the address and what is under it: such events are named
 * "unmapped", not compared.  The first rule that applies wins; an address
 * no rule applies to stays as it is.  A "@R:" rank prefix is set aside
 * while mapping.
 */
typedef struct tm_cmp_map tm_cmp_map;
tm_cmp_map *tm_cmp_map_new(void);
void tm_cmp_map_free(tm_cmp_map *m);
/* TM_ERR_ADDRESS with a malloc'd *error naming what is wrong. */
int tm_cmp_map_add(tm_cmp_map *m, const char *rule, char **error);
size_t tm_cmp_map_count(const tm_cmp_map *m);
const char *tm_cmp_map_rule(const tm_cmp_map *m, size_t i);   /* "RUN=REF" */
/*
 * The reference address of run address addr into buf: TM_OK, TM_ERR_NOT_FOUND
 * when a rule excludes it, TM_ERR_TOO_LARGE when it does not fit.
 */
int tm_cmp_map_apply(const tm_cmp_map *m, const char *addr, char *buf, size_t len);

/* ------------------------------------------------------------- aligner */

typedef struct tm_align tm_align;

/*
 * Takes ref (closed by tm_align_free) and a copy of map's rules (map may
 * be NULL: addresses as they are).  ref reads past histograms from then
 * on: alignment keeps stats only, and decoding the bins was most of the
 * cost of reading a level-2 reference.
 */
int tm_align_new(tm_reader *ref, const tm_cmp_map *map, tm_align **out);
void tm_align_free(tm_align *a);
tm_reader *tm_align_reader(tm_align *a);
const tm_cmp_map *tm_align_map(const tm_align *a);

/*
 * The reference event aligned with run event ev, whose node's address is
 * addr (the run's node table): TM_OK with *ref valid until the next call
 * (its tensors carry stats, no contents: tm_align_contents reads those);
 * TM_ERR_NOT_FOUND with *reason (TM_REF_* bits, and the reasons of any gap
 * of the reference inside that step); another code if the reference cannot
 * be read.  Reads the reference step of ev when it is not the one in memory.
 */
int tm_align_event(tm_align *a, const char *addr, const struct tm_event *ev,
		   const struct tm_event **ref, uint32_t *reason);
/*
 * The reference tensor of run event ev's tensor in slot: as
 * tm_align_event, and *ref_slot the slot to read in *ref.  Aligned by
 * request ids, a step batched otherwise than in the reference has no
 * reference event (TM_REF_BATCH), but its tensors' rows of one request
 * (tm_slot_is_row) align with that request's same forward there: the
 * reference's step of it when it served that request alone (*ref_slot the
 * batch tensor's slot), else that request's rows of it.  A tensor of a
 * step that served one request stands for that request's rows.
 */
int tm_align_tensor(tm_align *a, const char *addr, const struct tm_event *ev,
		    struct tm_slot slot, const struct tm_event **ref, struct tm_slot *ref_slot,
		    uint32_t *reason);
/*
 * The contents (payload) of tensor slot of reference event ref, as
 * recorded: TM_OK with *t valid until the next call, TM_ERR_NOT_FOUND when
 * the reference did not capture them.
 */
int tm_align_contents(tm_align *a, const struct tm_event *ref, struct tm_slot slot,
		      const struct tm_tensor **t);

/*
 * For a scan of the whole run: fn is called with each reference event that
 * no tm_align_event aligned, when its step leaves memory (another step is
 * read, or tm_align_finish).  Meant for a run read forwards once; steps
 * the run never asks for are not read, so not reported.
 */
void tm_align_set_unmatched(tm_align *a,
			    void (*fn)(void *user, const struct tm_event *ref),
			    void *user);
void tm_align_finish(tm_align *a);
/*
 * For a scan of the whole run forwards: a thread of the aligner reads the
 * reference (with a reader of its own) a few steps ahead, so that the two
 * recordings are decoded side by side; memory stays a few steps.  Call it
 * before the first tm_align_event.  A step asked for before the last one
 * ends prefetching (the reference is then read on demand).
 */
int tm_align_set_prefetch(tm_align *a, int on);

/*
 * Serving recordings: steps aligned by request ids instead of step numbers.
 * Two servers batch requests differently and run warm-up forwards of their
 * own, so step N of one is rarely step N of the other.  Each step of a
 * serving recording carries the ids of the requests its forward served
 * (annotation key "request"); a request's k-th forward is its k-th step
 * in the step order.  Run step S is aligned with the reference step T
 * where each of S's requests had the same forward (the same k) and that
 * served no other request (the same batch); the events of S then align
 * with those of T by address, call, kind and op index as usual.  When
 * S's requests were served in other batches by the reference, or S has
 * no request ids where step T = S of the reference has, its events have
 * no reference (TM_REF_BATCH).  A run step without request ids aligns
 * with the reference's step of the same number if that one has none.
 *
 * fn answers the run's "request" annotation of step (NULL: none); ev is
 * the run event being aligned (a multi-rank session tells the rank by it).
 * Call before the first tm_align_event.  The reference's annotations are
 * read once, at the first alignment (one pass over its chunks).
 */
int tm_align_set_requests(tm_align *a,
			  const struct tm_annot *(*fn)(void *user, const struct tm_event *ev,
						       uint64_t step),
			  void *user);
/* 1 when aligning by request ids. */
int tm_align_by_requests(const tm_align *a);

/* ------------------------------------------------------------- measures */

/* |a - b| / max(|a|, |b|); 0 when both are 0; nan if either is. */
double tm_reldiff(double a, double b);

/* Element-wise comparison of two tensors' contents (level 3). */
struct tm_contents_diff {
	uint64_t n;             /* elements compared */
	double maxabsdiff;      /* max |a - b| over elements finite on both sides */
	double relerr;          /* ||a - b||_2 / ||b||_2 (b: the reference) */
	double cosine;          /* <a, b> / (||a|| ||b||) */
	uint64_t nonfinite;     /* elements where a side is NaN/Inf */
};
/*
 * Elements non-finite on a side are left out of the sums; the same
 * infinity on both sides is no difference, but a NaN, or an infinity
 * facing anything else, makes maxabsdiff and relerr inf and cosine nan:
 * the runs differ there as much as they can.
 */
/*
 * TM_OK, or TM_ERR_NOT_FOUND when a side has no contents, TM_ERR_INVALID_ARG
 * when the shapes (numbers of elements) differ, TM_ERR_UNSUPPORTED for a
 * dtype whose elements cannot be read.  The dtypes may differ (f32 and bf16).
 */
int tm_contents_diff(const struct tm_tensor *run, const struct tm_tensor *ref,
		     struct tm_contents_diff *out);

#ifdef __cplusplus
}
#endif
#endif /* TM_COMPARE_H */
