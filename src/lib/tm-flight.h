/*
 * tm-flight.h -- the flight ring: the recorder's memory-only mode (internal).
 *
 * In flight mode the recorder's writer thread encodes what it drains into
 * per-step buffers here instead of a file: the last N complete steps and
 * the step in progress, within a byte budget.  A trigger (a TQL condition
 * evaluated on the drained events, or a call) has the recorder write the
 * window as an ordinary .tmrun and record normally from then on.
 * Everything here runs under the recorder's wlock.
 */
#ifndef TM_FLIGHT_H
#define TM_FLIGHT_H

#include "tm-types.h"
#include "tm-tmrun.h"

struct tm_flight;

struct tm_flight *tm_flight__new(uint32_t steps, uint64_t budget);
void tm_flight__free(struct tm_flight *f);

/* Adds a trigger "ADDRESS if COND", "COND" (address model.**) or
 * "ADDRESS"; nodes binds the address as the server binds breakpoints.
 * On a bad one *errors gets a malloc'd message. */
int tm_flight__add_trigger(struct tm_flight *f, const char *text,
			   const tm_nodetab *nodes, char **errors);

/*
 * Keeps n events; returns how many were taken before a trigger fired at
 * the last of them (n if none fired: then all were taken).  *why gets the
 * trigger's text when one fired.
 */
size_t tm_flight__events(struct tm_flight *f, const struct tm_event *e,
			 size_t n, const tm_nodetab *nodes, const char **why);
void tm_flight__gap(struct tm_flight *f, const struct tm_gap *g);
/* Empties the ring and its counters for a new window: what it sees first
 * is where the window's NOT_KEPT gap will begin (flight mode turned on in
 * a recording that has a file already). */
void tm_flight__restart(struct tm_flight *f);
/* The seqs the ring saw since it (re)started, as one NOT_KEPT gap: for a
 * recording that ends in flight mode without a trigger.  0: none. */
int tm_flight__unkept(const struct tm_flight *f, struct tm_gap *g);
/* Keeps n complete steps from now on (the oldest go if more are held). */
int tm_flight__set_steps(struct tm_flight *f, uint32_t n);
/* The producer is at step: the step in progress here, if earlier, is complete. */
void tm_flight__at_step(struct tm_flight *f, uint64_t step);
void tm_flight__raw(struct tm_flight *f, const uint8_t *rec, size_t len);

/* What a dump writes: the gap for what was not kept (count 0: none), then
 * the buffers, oldest first, through put(). */
struct tm_flight_window {
	struct tm_gap not_kept;
	uint32_t steps_held;            /* complete steps in the window, with events */
	uint32_t steps_over_held;       /* ... as a gap: over the budget */
	uint64_t first_step;
	uint64_t steps_dropped;         /* complete steps dropped (age or budget) */
	uint64_t steps_over;            /* steps that did not fit the budget */
	uint64_t bytes;
	uint64_t last_seq;              /* of the window's last record (the
					 * triggering event of a TQL trigger) */
	int have_last;
};
void tm_flight__window(const struct tm_flight *f, struct tm_flight_window *out);
int tm_flight__write(struct tm_flight *f, tm_writer *w);
/* Frees the buffers after a dump (the counters stay for info). */
void tm_flight__clear(struct tm_flight *f);

#endif /* TM_FLIGHT_H */
