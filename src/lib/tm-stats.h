/*
 * tm-stats.h -- computing the stats of ARCHITECTURE 5 from host memory.
 *
 * The probe hands CPU tensors here: one pass over the data computes every
 * level-1 and level-2 stat together (nan, inf, min, max, sum, sum of squares,
 * abs max, zeros, and the histogram, which needs no min or max first).
 * Device tensors are reduced on their device by the probe instead
 * (tensormorph_probe/_devstats.py), to the same definitions.
 */
#ifndef TM_STATS_H
#define TM_STATS_H

#include "tm-types.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Fills t->stat/t->have (and the histogram at level >= 2) from numel
 * elements of dtype at data (contiguous, native little-endian).  level 0
 * computes nothing; level >= 1 the health stats; level >= 2 the rest.
 * Non-float dtypes have no nan/inf (0).  Returns TM_ERR_UNSUPPORTED for a
 * dtype it cannot read (complex), leaving t->have = 0.
 * Conventions a device-side implementation must share: std is the
 * population deviation (torch's correction=0).  The histogram
 * (have_hist = TM_HIST_LOG2) counts the finite elements by sign and
 * octave: with E = floor(log2 abs_max) + 1 (0 when abs_max is 0), so that
 * every |x| < 2^E, and for x != 0 j = clamp(floor(log2 |x|) - E + 16, 0,
 * 15), for x == 0 j = 0, x goes to bin 16 + j when its sign bit is clear
 * and to bin 15 - j when it is set (-0.0 in bin 15).  Bins 17..31 are the
 * octaves [2^(E-15), 2^(E-14)) .. [2^(E-1), 2^E), bin 16 everything
 * smaller (zero included); bins 14..0 mirror them for negative values.
 * hist_lo = E - 15 and hist_hi = E.  The exponent of a subnormal is its
 * own (exact, not flushed).  With no finite element only the counts are
 * present, and no histogram.
 */
int tm_stats_compute(struct tm_tensor *t, const void *data, uint64_t numel,
		     int dtype, int level);

/*
 * The instruction set of the kernels in use: "avx512", "avx2" or "sse2"
 * on x86-64 (the best the CPU runs, unless TENSORMORPH_STATS_ISA names a
 * lower one), "generic" elsewhere.  The last bits of a mean or l2 can
 * differ between instruction sets (their summation orders differ).
 */
const char *tm_stats_isa(void);
/* For tests and benchmarks: use the kernels of instruction set name from
 * now on, in every thread.  TM_ERR_UNSUPPORTED when this CPU cannot run
 * them, TM_ERR_INVALID_ARG for a name not built here. */
int tm_stats_use_isa(const char *name);

/* Half-precision helpers, exposed for tests and the views. */
double tm_f16_to_double(uint16_t h);
double tm_bf16_to_double(uint16_t h);
/* Element i (row-major) of t's captured payload; NaN without one. */
double tm_tensor_element(const struct tm_tensor *t, uint64_t i);

#ifdef __cplusplus
}
#endif
#endif /* TM_STATS_H */
