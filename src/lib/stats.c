/*
 * stats.c -- the health and distribution stats of ARCHITECTURE 5, computed
 * from a contiguous host buffer.
 *
 * This is the probe's CPU hot path: every observed CPU tensor goes through
 * tm_stats_compute() once per module call, so the common case (all elements
 * finite) must run at memory speed.  The main pass works on blocks of LANES
 * elements with independent accumulators per lane, which lets the compiler
 * keep them in vector registers and needs no branch per element; one test
 * per block ("is any element NaN or Inf?") sends the rare block with a
 * non-finite element to a per-element path.
 *
 * Numerics: sums are kept in double.  The variance uses sums of x - K where
 * K is the first finite element (a shifted-data computation), so a tensor
 * whose mean is large against its spread (10000 +- 1) keeps its precision;
 * the plain sum of squares is kept apart for l2.  std is the population
 * standard deviation (divide by n, torch's correction=0).  For f64 input
 * whose sums overflow a double, a rescaled pass recomputes them.
 *
 * The histogram needs min and max first, so it is a second pass (level 2).
 * Its bins split [min, max] of the finite elements evenly; the last bin is
 * closed.  When min == max the range is [min - 1, max + 1], as torch.histc
 * does, and every element falls into the middle bin.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "tm-internal.h"
#include "tm-stats.h"

#define LANES 8     /* the level-1 loop below works in two halves of 4 */

/*
 * The kernels are built twice on x86-64, for the baseline (SSE2) and for
 * AVX2, and the loader picks one per CPU (GNU ifunc): twice the width for
 * the double accumulators, about 1.8x the throughput where AVX2 exists.
 */
#if defined(__x86_64__) && defined(__GLIBC__) && \
	((defined(__clang__) && __clang_major__ >= 14) || \
	 (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 6))
#define TM_KERNEL_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TM_KERNEL_CLONES
#endif

/* What a pass collects; lanes are folded into it at the end of the pass. */
struct acc {
	uint64_t nan, pinf, ninf, zeros;
	double lo, hi;          /* finite min/max */
	double k;               /* shift: the first finite element */
	double s1, s2;          /* sum (x - k), sum (x - k)^2 */
	double q;               /* sum x^2 */
	int any;                /* a finite element was seen */
};

/* ------------------------------------------------------------- conversions */

static inline float f32_from_bits(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

/*
 * IEEE binary16 to float by integer arithmetic.  Subnormals are built as an
 * integer times 2^-24 rather than by multiplying a denormal float, so the
 * result is right even when the process runs with flush-to-zero or
 * denormals-are-zero set (torch.set_flush_denormal).
 */
static inline float f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t em = h & 0x7fffu;
	uint32_t u;

	if (em >= 0x7c00u) {            /* Inf / NaN: keep the payload */
		u = 0x7f800000u | ((em & 0x3ffu) << 13);
	} else if (em >= 0x0400u) {     /* normal: rebias 15 -> 127 */
		u = (em << 13) + (112u << 23);
	} else {                        /* zero / subnormal: m * 2^-24 */
		float f = (float)em * 0x1p-24f;

		memcpy(&u, &f, sizeof(u));
	}
	return f32_from_bits(u | sign);
}

static inline float bf16_to_f32(uint16_t h)
{
	return f32_from_bits((uint32_t)h << 16);
}

double tm_f16_to_double(uint16_t h)
{
	return (double)f16_to_f32(h);
}

double tm_bf16_to_double(uint16_t h)
{
	return (double)bf16_to_f32(h);
}

/* OCP FP8 E4M3 ("fn": no infinities, S.1111.111 is NaN, max 448). */
static float f8e4m3_to_f32(uint8_t b)
{
	float sign = (b & 0x80) ? -1.0f : 1.0f;
	int e = (b >> 3) & 0xf, m = b & 7;

	if (e == 15 && m == 7)
		return NAN;
	if (e == 0)
		return sign * ldexpf((float)m, -9);
	return sign * ldexpf((float)(8 + m), e - 10);
}

/* OCP FP8 E5M2: IEEE-like, with infinities and NaNs. */
static float f8e5m2_to_f32(uint8_t b)
{
	float sign = (b & 0x80) ? -1.0f : 1.0f;
	int e = (b >> 2) & 0x1f, m = b & 3;

	if (e == 31)
		return m ? NAN : sign * INFINITY;
	if (e == 0)
		return sign * ldexpf((float)m, -16);
	return sign * ldexpf((float)(4 + m), e - 17);
}

/* All one-byte types read through a 256-entry table built per call (cheap
 * next to any tensor worth summarising, and no global state). */
static void byte_table(int dtype, float *tab)
{
	int i;

	for (i = 0; i < 256; i++) {
		switch (dtype) {
		case TM_DT_F8E4M3: tab[i] = f8e4m3_to_f32((uint8_t)i); break;
		case TM_DT_F8E5M2: tab[i] = f8e5m2_to_f32((uint8_t)i); break;
		case TM_DT_I8: tab[i] = (float)(int8_t)i; break;
		case TM_DT_U8: tab[i] = (float)i; break;
		default: tab[i] = i ? 1.0f : 0.0f; break;     /* bool */
		}
	}
}

/* Element loaders: unaligned-safe, little-endian host. */
static inline float ld_f32(const uint8_t *p, uint64_t i, const float *tab)
{
	float v;

	memcpy(&v, p + 4 * i, 4);
	return v;
}

static inline double ld_f64(const uint8_t *p, uint64_t i, const float *tab)
{
	double v;

	memcpy(&v, p + 8 * i, 8);
	return v;
}

#define LD_INT(NAME, T, VT) \
static inline VT NAME(const uint8_t *p, uint64_t i, const float *tab) \
{ \
	T v; \
	memcpy(&v, p + sizeof(T) * i, sizeof(T)); \
	return (VT)v; \
}
LD_INT(ld_i16, int16_t, float)
LD_INT(ld_u16, uint16_t, float)
LD_INT(ld_i32, int32_t, double)
LD_INT(ld_u32, uint32_t, double)
LD_INT(ld_i64, int64_t, double)
LD_INT(ld_u64, uint64_t, double)

static inline float ld_f16(const uint8_t *p, uint64_t i, const float *tab)
{
	uint16_t h;

	memcpy(&h, p + 2 * i, 2);
	return f16_to_f32(h);
}

static inline float ld_bf16(const uint8_t *p, uint64_t i, const float *tab)
{
	uint16_t h;

	memcpy(&h, p + 2 * i, 2);
	return bf16_to_f32(h);
}

static inline float ld_byte(const uint8_t *p, uint64_t i, const float *tab)
{
	return tab[p[i]];
}

/* ------------------------------------------------------------- kernels */

/*
 * Whether any lane of a comparison mask (a vector of n bytes, n a multiple
 * of 8 up to 32) is set, tested in 64-bit words: testing it lane by lane
 * extracts each lane to a general register, a third of the level-1 loop's
 * work.
 */
static inline int any_lane(const void *mask, size_t n)
{
	uint64_t w[4], acc = 0;
	size_t i;

	memcpy(w, mask, n);
	for (i = 0; i < n / 8; i++)
		acc |= w[i];
	return acc != 0;
}

/*
 * x - x is 0 for every finite x and NaN for Inf and NaN: one subtract and
 * one compare, the same for every width, and it vectorises.
 */
#define NONFINITE(x) ((x) - (x) != 0)

/*
 * The per-element path, for blocks holding a NaN or Inf and for the tail:
 * classify, and fold finite values into lane L.
 */
#define SLOW_ELEMENT(v, L, FULL) do { \
	if ((v) != (v)) { \
		r->nan++; \
	} else if (NONFINITE(v)) { \
		if ((v) > 0) \
			r->pinf++; \
		else \
			r->ninf++; \
	} else { \
		double d_ = (double)(v) - k; \
		lo[L] = (v) < lo[L] ? (v) : lo[L]; \
		hi[L] = (v) > hi[L] ? (v) : hi[L]; \
		s1[L] += d_; \
		if (FULL) \
			s2[L] += d_ * d_; \
		q[L] += (double)(v) * (double)(v); \
		if (FULL) \
			z[L] += (v) == 0; \
	} \
} while (0)

/*
 * One kernel per value type and loader.  VT is the type values are
 * compared in (float when it holds the source exactly, else double).
 * FULL 0 builds the level-1 variant: without the sum of squared deviations
 * and the zero count, which only level 2 reports, its accumulators fit in
 * registers (the loop below); what it computes is computed in the same
 * lanes and order, so level-1 stats are the same bits as the full
 * kernel's (test_stats checks this).
 */
#define STATS_KERNEL(NAME, VT, LOAD, FULL) \
TM_KERNEL_CLONES \
static void NAME(struct acc *r, const uint8_t *p, uint64_t n, const float *tab) \
{ \
	VT lo[LANES], hi[LANES], kv = 0; \
	double s1[LANES], s2[LANES], q[LANES], k; \
	uint64_t z[LANES], i = 0; \
	int l; \
\
	/* Find the shift: the first finite element. */ \
	for (; i < n; i++) { \
		VT v = LOAD(p, i, tab); \
		if (!NONFINITE(v)) { \
			kv = v; \
			break; \
		} \
		if (v != v) \
			r->nan++; \
		else if (v > 0) \
			r->pinf++; \
		else \
			r->ninf++; \
	} \
	if (i == n) \
		return; \
	k = (double)kv; \
	for (l = 0; l < LANES; l++) { \
		lo[l] = hi[l] = kv; \
		s1[l] = s2[l] = q[l] = 0; \
		z[l] = 0; \
	} \
	/* Two blocks per iteration: the lane accumulators (arrays, so \
	 * kept in memory) are loaded and stored once for 2 * LANES \
	 * elements; each lane still adds its elements in order. */ \
	for (; FULL && i + 2 * LANES <= n; i += 2 * LANES) { \
		VT x[2 * LANES]; \
		int bad = 0; \
\
		for (l = 0; l < 2 * LANES; l++) { \
			x[l] = LOAD(p, i + l, tab); \
			bad |= NONFINITE(x[l]); \
		} \
		if (TM_UNLIKELY(bad)) { \
			for (l = 0; l < 2 * LANES; l++) \
				SLOW_ELEMENT(x[l], l % LANES, FULL); \
			continue; \
		} \
		for (l = 0; l < LANES; l++) { \
			VT v = x[l], w = x[l + LANES]; \
			double d = (double)v - k, e = (double)w - k; \
\
			lo[l] = v < lo[l] ? v : lo[l]; \
			lo[l] = w < lo[l] ? w : lo[l]; \
			hi[l] = v > hi[l] ? v : hi[l]; \
			hi[l] = w > hi[l] ? w : hi[l]; \
			s1[l] = s1[l] + d + e; \
			s2[l] = s2[l] + d * d + e * e; \
			q[l] = q[l] + (double)v * (double)v + (double)w * (double)w; \
			z[l] += (v == 0) + (w == 0); \
		} \
	} \
	/* at most one block left */ \
	for (; FULL && i + LANES <= n; i += LANES) { \
		VT x[LANES]; \
		int bad = 0; \
\
		for (l = 0; l < LANES; l++) { \
			x[l] = LOAD(p, i + l, tab); \
			bad |= NONFINITE(x[l]); \
		} \
		if (TM_UNLIKELY(bad)) { \
			for (l = 0; l < LANES; l++) \
				SLOW_ELEMENT(x[l], l, FULL); \
			continue; \
		} \
		for (l = 0; l < LANES; l++) { \
			VT v = x[l]; \
			double d = (double)v - k; \
\
			lo[l] = v < lo[l] ? v : lo[l]; \
			hi[l] = v > hi[l] ? v : hi[l]; \
			s1[l] += d; \
			s2[l] += d * d; \
			q[l] += (double)v * (double)v; \
			z[l] += v == 0; \
		} \
	} \
	while (!FULL && i + LANES <= n) { \
		/* Level 1: the lanes live in vector variables (two halves \
		 * of four, the width AVX2 has for doubles) while blocks \
		 * are all finite: arrays indexed by lane keep them in \
		 * memory, a store-forwarding chain per block (f32 about \
		 * 20%, f64 about 50% slower).  Each lane does the same \
		 * operations in the same order as SLOW_ELEMENT, so the sums \
		 * are the same bits.  The full kernel written this way has \
		 * more accumulators than AVX2 has registers and measured \
		 * 10% slower on f32: it keeps the arrays. */ \
		typedef VT vt_ __attribute__((vector_size(4 * sizeof(VT)))); \
		typedef __typeof__((vt_){0} < (vt_){0}) vm_; \
		typedef double vd_ __attribute__((vector_size(4 * sizeof(double)))); \
		vt_ loa, lob, hia, hib; \
		vd_ s1a, s1b, qa, qb, kvec = { k, k, k, k }; \
\
		memcpy(&loa, lo, sizeof(loa)); \
		memcpy(&lob, lo + 4, sizeof(lob)); \
		memcpy(&hia, hi, sizeof(hia)); \
		memcpy(&hib, hi + 4, sizeof(hib)); \
		memcpy(&s1a, s1, sizeof(s1a)); \
		memcpy(&s1b, s1 + 4, sizeof(s1b)); \
		memcpy(&qa, q, sizeof(qa)); \
		memcpy(&qb, q + 4, sizeof(qb)); \
		for (; i + LANES <= n; i += LANES) { \
			VT x[LANES]; \
			vt_ xa, xb; \
			vm_ ma, mb; \
			vd_ da, db, ea, eb; \
\
			for (l = 0; l < LANES; l++) \
				x[l] = LOAD(p, i + l, tab); \
			memcpy(&xa, x, sizeof(xa)); \
			memcpy(&xb, x + 4, sizeof(xb)); \
			ma = ((xa - xa) != 0) | ((xb - xb) != 0); \
			if (TM_UNLIKELY(any_lane(&ma, sizeof(ma)))) \
				break; \
			ma = xa < loa; \
			mb = xb < lob; \
			loa = (vt_)(((vm_)xa & ma) | ((vm_)loa & ~ma)); \
			lob = (vt_)(((vm_)xb & mb) | ((vm_)lob & ~mb)); \
			ma = xa > hia; \
			mb = xb > hib; \
			hia = (vt_)(((vm_)xa & ma) | ((vm_)hia & ~ma)); \
			hib = (vt_)(((vm_)xb & mb) | ((vm_)hib & ~mb)); \
			ea = __builtin_convertvector(xa, vd_); \
			eb = __builtin_convertvector(xb, vd_); \
			da = ea - kvec; \
			db = eb - kvec; \
			s1a += da; \
			s1b += db; \
			qa += ea * ea; \
			qb += eb * eb; \
		} \
		memcpy(lo, &loa, sizeof(loa)); \
		memcpy(lo + 4, &lob, sizeof(lob)); \
		memcpy(hi, &hia, sizeof(hia)); \
		memcpy(hi + 4, &hib, sizeof(hib)); \
		memcpy(s1, &s1a, sizeof(s1a)); \
		memcpy(s1 + 4, &s1b, sizeof(s1b)); \
		memcpy(q, &qa, sizeof(qa)); \
		memcpy(q + 4, &qb, sizeof(qb)); \
		if (i + LANES <= n) {   /* a block with a NaN or Inf */ \
			VT x[LANES]; \
\
			for (l = 0; l < LANES; l++) \
				x[l] = LOAD(p, i + l, tab); \
			for (l = 0; l < LANES; l++) \
				SLOW_ELEMENT(x[l], l, FULL); \
			i += LANES; \
		} \
	} \
	for (; i < n; i++) { \
		VT v = LOAD(p, i, tab); \
		SLOW_ELEMENT(v, 0, FULL); \
	} \
	r->any = 1; \
	r->k = k; \
	r->lo = lo[0]; \
	r->hi = hi[0]; \
	for (l = 0; l < LANES; l++) { \
		if (lo[l] < r->lo) \
			r->lo = lo[l]; \
		if (hi[l] > r->hi) \
			r->hi = hi[l]; \
		r->s1 += s1[l]; \
		r->s2 += s2[l]; \
		r->q += q[l]; \
		r->zeros += z[l]; \
	} \
}

/*
 * Histogram pass: bin = floor((x - lo) / (hi - lo) * 32), the top edge
 * going into the last bin.  The division is correctly rounded and the
 * scaling by 32 exact, so a value on a bin edge lands in the bin it starts
 * (the same bins as torch.histc's (x - lo) * 32 / (hi - lo)).  Values are
 * halved first (also exact) so that an f64 range wider than DBL_MAX cannot
 * overflow.
 *
 * Bins are computed for a block first, with no branch (a NaN or Inf goes
 * to the extra bin TM_HIST_BINS, which is dropped), so that loop
 * vectorises, divisions included; the counting loop after it spreads over
 * four sub-histograms so runs of equal bins do not serialise on one counter,
 * unrolled by hand: a sub-histogram index (j & 3) computed per element made
 * the pass about 1.6x slower.  (A multiplication by 32 / width instead of
 * the division, with the division again for results near a bin edge,
 * measured slower still: the division is not what this pass waits on.)
 */
#define HIST_BLOCK 256

static inline uint8_t hist_bin_f(float v, double lo2, double width2)
{
	double t = ((double)v * 0.5 - lo2) / width2 * TM_HIST_BINS;

	t = t < TM_HIST_BINS ? t : TM_HIST_BINS - 1;
	t = NONFINITE(v) ? TM_HIST_BINS : t;
	return (uint8_t)t;
}

static inline uint8_t hist_bin_d(double v, double lo2, double width2)
{
	double t = (v * 0.5 - lo2) / width2 * TM_HIST_BINS;

	t = t < TM_HIST_BINS ? t : TM_HIST_BINS - 1;
	t = NONFINITE(v) ? TM_HIST_BINS : t;
	return (uint8_t)t;
}

/*
 * The same bins for a tensor known to be all finite (the stats pass counted
 * no NaN or Inf): t is then in [0, 32], since x <= hi and rounding is
 * monotonic, and the top edge (t == 32) is counted in the extra bin and
 * moved to the last one afterwards, which spares the two selects per
 * element.
 */
static inline uint8_t hist_fbin_f(float v, double lo2, double width2)
{
	return (uint8_t)(((double)v * 0.5 - lo2) / width2 * TM_HIST_BINS);
}

static inline uint8_t hist_fbin_d(double v, double lo2, double width2)
{
	return (uint8_t)((v * 0.5 - lo2) / width2 * TM_HIST_BINS);
}

#define HIST_BIN(VT, v, lo2, width2) \
	_Generic((VT)0, float: hist_bin_f, double: hist_bin_d)(v, lo2, width2)
#define HIST_FBIN(VT, v, lo2, width2) \
	_Generic((VT)0, float: hist_fbin_f, double: hist_fbin_d)(v, lo2, width2)
#define HIST_KERNEL(NAME, VT, LOAD) \
TM_KERNEL_CLONES \
static void NAME(uint64_t (*h)[TM_HIST_BINS + 1], const uint8_t *p, uint64_t n, \
		 const float *tab, double lo2, double width2, int finite) \
{ \
	uint8_t bins[HIST_BLOCK]; \
	uint64_t i; \
	size_t j; \
\
	/* A constant trip count lets -O2 vectorise the bin loop. */ \
	for (i = 0; i + HIST_BLOCK <= n; i += HIST_BLOCK) { \
		if (finite) { \
			for (j = 0; j < HIST_BLOCK; j++) \
				bins[j] = HIST_FBIN(VT, LOAD(p, i + j, tab), lo2, \
						    width2); \
		} else { \
			for (j = 0; j < HIST_BLOCK; j++) \
				bins[j] = HIST_BIN(VT, LOAD(p, i + j, tab), lo2, \
						   width2); \
		} \
		for (j = 0; j < HIST_BLOCK; j += 4) { \
			h[0][bins[j]]++; \
			h[1][bins[j + 1]]++; \
			h[2][bins[j + 2]]++; \
			h[3][bins[j + 3]]++; \
		} \
	} \
	for (; i < n; i++) \
		h[0][finite ? HIST_FBIN(VT, LOAD(p, i, tab), lo2, width2) : \
		     HIST_BIN(VT, LOAD(p, i, tab), lo2, width2)]++; \
}

/*
 * Recomputes mean, l2 and std of f64 data scaled by 1/amax, for the rare
 * input whose plain sums overflow a double.
 */
#define RESCUE_KERNEL(NAME, VT, LOAD) \
static void NAME(struct acc *r, const uint8_t *p, uint64_t n, const float *tab, \
		 double amax, uint64_t nf, double *mean, double *l2, double *sd) \
{ \
	double s = 0, qq = 0, ss = 0, m; \
	uint64_t i; \
\
	for (i = 0; i < n; i++) { \
		VT v = LOAD(p, i, tab); \
		if (!NONFINITE(v)) { \
			s += (double)v / amax; \
			qq += ((double)v / amax) * ((double)v / amax); \
		} \
	} \
	m = s / (double)nf; \
	for (i = 0; i < n; i++) { \
		VT v = LOAD(p, i, tab); \
		if (!NONFINITE(v)) \
			ss += ((double)v / amax - m) * ((double)v / amax - m); \
	} \
	*mean = m * amax; \
	*l2 = sqrt(qq) * amax; \
	*sd = sqrt(ss / (double)nf) * amax; \
}

#define KERNELS(SFX, VT, LOAD) \
	STATS_KERNEL(stats_##SFX, VT, LOAD, 1) \
	STATS_KERNEL(stats1_##SFX, VT, LOAD, 0) \
	HIST_KERNEL(hist_##SFX, VT, LOAD)

KERNELS(f32, float, ld_f32)
KERNELS(f64, double, ld_f64)
KERNELS(f16, float, ld_f16)
KERNELS(bf16, float, ld_bf16)
KERNELS(byte, float, ld_byte)
KERNELS(i16, float, ld_i16)
KERNELS(u16, float, ld_u16)
KERNELS(i32, double, ld_i32)
KERNELS(u32, double, ld_u32)
KERNELS(i64, double, ld_i64)
KERNELS(u64, double, ld_u64)
RESCUE_KERNEL(rescue_f64, double, ld_f64)

typedef void stats_fn(struct acc *, const uint8_t *, uint64_t, const float *);
typedef void hist_fn(uint64_t (*)[TM_HIST_BINS + 1], const uint8_t *, uint64_t,
		     const float *, double, double, int);

static const struct {
	stats_fn *stats, *stats1;       /* levels >= 2, level 1 */
	hist_fn *hist;
} kernels[TM_DT__COUNT] = {
	[TM_DT_F32] = { stats_f32, stats1_f32, hist_f32 },
	[TM_DT_F64] = { stats_f64, stats1_f64, hist_f64 },
	[TM_DT_F16] = { stats_f16, stats1_f16, hist_f16 },
	[TM_DT_BF16] = { stats_bf16, stats1_bf16, hist_bf16 },
	[TM_DT_F8E4M3] = { stats_byte, stats1_byte, hist_byte },
	[TM_DT_F8E5M2] = { stats_byte, stats1_byte, hist_byte },
	[TM_DT_I8] = { stats_byte, stats1_byte, hist_byte },
	[TM_DT_I16] = { stats_i16, stats1_i16, hist_i16 },
	[TM_DT_I32] = { stats_i32, stats1_i32, hist_i32 },
	[TM_DT_I64] = { stats_i64, stats1_i64, hist_i64 },
	[TM_DT_U8] = { stats_byte, stats1_byte, hist_byte },
	[TM_DT_U16] = { stats_u16, stats1_u16, hist_u16 },
	[TM_DT_U32] = { stats_u32, stats1_u32, hist_u32 },
	[TM_DT_U64] = { stats_u64, stats1_u64, hist_u64 },
	[TM_DT_BOOL] = { stats_byte, stats1_byte, hist_byte },
};

static void set_stat(struct tm_tensor *t, int s, double v)
{
	t->stat[s] = v;
	t->have |= TM_STAT_BIT(s);
}

/* Fills the histogram of t (min/max already known and finite). */
static void histogram(struct tm_tensor *t, hist_fn *fn, const uint8_t *p,
		      uint64_t numel, const float *tab, double lo, double hi,
		      uint64_t nf)
{
	uint64_t h[4][TM_HIST_BINS + 1];
	int b, j, finite = nf == numel;

	memset(t->hist, 0, sizeof(t->hist));
	t->have_hist = 1;
	if (lo == hi) {
		t->hist_lo = lo - 1;
		t->hist_hi = hi + 1;
		t->hist[TM_HIST_BINS / 2] = nf > UINT32_MAX ? UINT32_MAX : (uint32_t)nf;
		return;
	}
	t->hist_lo = lo;
	t->hist_hi = hi;
	memset(h, 0, sizeof(h));
	fn(h, p, numel, tab, lo * 0.5, hi * 0.5 - lo * 0.5, finite);
	for (b = 0; b < TM_HIST_BINS; b++) {
		uint64_t c = 0;

		for (j = 0; j < 4; j++) {
			c += h[j][b];
			/* all finite: the extra bin holds the top edge */
			if (finite && b == TM_HIST_BINS - 1)
				c += h[j][TM_HIST_BINS];
		}
		t->hist[b] = c > UINT32_MAX ? UINT32_MAX : (uint32_t)c;
	}
}

int tm_stats_compute(struct tm_tensor *t, const void *data, uint64_t numel,
		     int dtype, int level)
{
	const uint8_t *p = data;
	float tab[256];
	struct acc r;
	uint64_t nf;
	double mean, l2, sd = 0, amax;

	if (!t)
		return TM_ERR_INVALID_ARG;
	t->have = 0;
	t->have_hist = 0;
	memset(t->stat, 0, sizeof(t->stat));
	if (level < 0 || dtype <= TM_DT_UNKNOWN || dtype >= TM_DT__COUNT)
		return TM_ERR_INVALID_ARG;
	if (!kernels[dtype].stats)
		return TM_ERR_UNSUPPORTED;
	if (!data && numel)
		return TM_ERR_INVALID_ARG;
	if (level == 0)
		return TM_OK;
	if (tm_dtype_size(dtype) == 1)
		byte_table(dtype, tab);

	memset(&r, 0, sizeof(r));
	(level >= 2 ? kernels[dtype].stats : kernels[dtype].stats1)(&r, p, numel, tab);
	nf = numel - r.nan - r.pinf - r.ninf;

	set_stat(t, TM_STAT_NUMEL, (double)numel);
	set_stat(t, TM_STAT_NAN_COUNT, (double)r.nan);
	set_stat(t, TM_STAT_INF_COUNT, (double)(r.pinf + r.ninf));
	set_stat(t, TM_STAT_POSINF_COUNT, (double)r.pinf);
	set_stat(t, TM_STAT_NEGINF_COUNT, (double)r.ninf);
	if (level >= 2)
		set_stat(t, TM_STAT_ZERO_COUNT, (double)r.zeros);
	if (!r.any)
		return TM_OK;   /* no finite element: the rest is unknown */

	mean = r.k + r.s1 / (double)nf;
	l2 = sqrt(r.q);
	if (level >= 2) {
		double m1 = r.s1 / (double)nf, var = r.s2 / (double)nf - m1 * m1;

		sd = sqrt(var > 0 ? var : 0);
	}
	amax = fabs(r.lo) > fabs(r.hi) ? fabs(r.lo) : fabs(r.hi);
	if (dtype == TM_DT_F64 && (!isfinite(mean) || !isfinite(l2) || !isfinite(sd)))
		rescue_f64(&r, p, numel, tab, amax, nf, &mean, &l2, &sd);

	set_stat(t, TM_STAT_MIN, r.lo);
	set_stat(t, TM_STAT_MAX, r.hi);
	set_stat(t, TM_STAT_MEAN, mean);
	set_stat(t, TM_STAT_ABS_MAX, amax);
	set_stat(t, TM_STAT_L2, l2);
	if (level >= 2) {
		set_stat(t, TM_STAT_STD, sd);
		histogram(t, kernels[dtype].hist, p, numel, tab, r.lo, r.hi, nf);
	}
	return TM_OK;
}

/* Element i (row-major) of t's captured contents as a double; NaN when
 * there is none or the dtype has no number. */
double tm_tensor_element(const struct tm_tensor *t, uint64_t i)
{
	size_t k, sz = tm_dtype_size(t->dtype);
	const uint8_t *p;
	uint64_t u = 0;
	union { uint32_t u; float f; } f32;
	union { uint64_t u; double d; } f64;

	if (!t->payload || !sz || sz > 8 || (i + 1) * sz > t->payload_len)
		return NAN;
	p = (const uint8_t *)t->payload + i * sz;
	for (k = 0; k < sz; k++)
		u |= (uint64_t)p[k] << (8 * k);
	switch (t->dtype) {
	case TM_DT_F32: f32.u = (uint32_t)u; return f32.f;
	case TM_DT_F64: f64.u = u; return f64.d;
	case TM_DT_F16: return tm_f16_to_double((uint16_t)u);
	case TM_DT_BF16: return tm_bf16_to_double((uint16_t)u);
	case TM_DT_I8: return (int8_t)u;
	case TM_DT_I16: return (int16_t)u;
	case TM_DT_I32: return (int32_t)u;
	case TM_DT_I64: return (double)(int64_t)u;
	case TM_DT_U8: case TM_DT_U16: case TM_DT_U32: case TM_DT_U64:
	case TM_DT_BOOL:
		return (double)u;
	default: return NAN;
	}
}
