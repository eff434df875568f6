/*
 * tm-stats.h -- computing the stats of ARCHITECTURE 5 from host memory.
 *
 * The probe hands CPU tensors here: one pass over the data computes every
 * level-1 and level-2 stat together (nan, inf, min, max, sum, sum of squares,
 * abs max, zeros), a second pass fills the histogram once min and max are
 * known.  Device tensors are reduced on their device by the probe instead.
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
 * population deviation (torch's correction=0); histogram bins split
 * [min, max] of the finite elements evenly, bin = floor((x - min) /
 * (max - min) * 32), x == max in the last bin; if min == max the range is
 * [min - 1, max + 1] (as torch.histc) and all elements fall in bin 16.
 * With no finite element only the counts are present.
 */
int tm_stats_compute(struct tm_tensor *t, const void *data, uint64_t numel,
		     int dtype, int level);

/* Half-precision helpers, exposed for tests and the views. */
double tm_f16_to_double(uint16_t h);
double tm_bf16_to_double(uint16_t h);
/* Element i (row-major) of t's captured payload; NaN without one. */
double tm_tensor_element(const struct tm_tensor *t, uint64_t i);

#ifdef __cplusplus
}
#endif
#endif /* TM_STATS_H */
