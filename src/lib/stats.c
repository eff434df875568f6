/*
 * stats.c -- the health and distribution stats of ARCHITECTURE 5, computed
 * from a contiguous host buffer.
 *
 * This is the probe's CPU hot path: every observed CPU tensor goes through
 * tm_stats_compute() once per module call, so the common case (all elements
 * finite) must run at memory speed.  The main pass works on groups of SETS
 * blocks of LANES elements, with independent accumulators per lane and per
 * block of the group (SETS chains of vector adds instead of one, which ran
 * at a fraction of the adder's rate: testsuite/perf/stats-bench), which
 * lets the compiler keep them in vector registers and needs no branch per
 * element; one test per group ("is any element NaN or Inf?") sends the
 * rare group with a non-finite element to a per-element path.
 *
 * Numerics: sums are kept in double.  The variance uses sums of x - K where
 * K is the first finite element (a shifted-data computation), so a tensor
 * whose mean is large against its spread (10000 +- 1) keeps its precision;
 * the plain sum of squares is kept apart for l2.  std is the population
 * standard deviation (divide by n, torch's correction=0).  For f64 input
 * whose sums overflow a double, a rescaled pass recomputes them.
 *
 * The level-2 histogram (TM_HIST_LOG2) is filled in the same pass: each
 * finite element is counted by its sign and binary exponent, read from its
 * bits (a fine histogram of 2 x 256 counters, no min or max needed), and
 * the 32 bins are folded from it at the end, when abs_max and so the
 * window of octaves are known.  The fine counters are exact for magnitudes
 * from 2^-126 to 2^128; a window reaching past them (a tensor whose
 * abs_max is below 2^-112, or an f64 one above 2^127) takes a second,
 * exact pass, and so does a tensor too small to be worth the fold
 * (FINE_MIN).  The definition is in tm-stats.h.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tm-internal.h"
#include "tm-stats.h"

/*
 * The kernels are built once per instruction set on x86-64: AVX-512
 * (x86-64-v4), AVX2 with FMA, and the baseline SSE2; tm_stats_compute
 * picks the best this CPU runs (TENSORMORPH_STATS_ISA or
 * tm_stats_use_isa() can ask for a lower one, for tests and benchmarks).
 * Each set is sized to its registers: LANES elements to a block, SETS
 * independent accumulator sets.  AVX-512 takes 8 x 4 (32 registers of 8
 * doubles); AVX2 and SSE2 take 4 x 2: 8 x 4's accumulators are more than
 * their 16 registers hold, and spilled, level 1 on 8192 floats took 1.7
 * and 6.4 times as long (testsuite/perf/stats-bench; 2 lanes, half an
 * SSE register of floats, were 2.8 times slower than 4).  The summation
 * order follows LANES x SETS, so the last bits of a mean or l2 can differ
 * between CPUs with different vector widths, as torch's own kernels' do;
 * on one CPU they never vary.  Elsewhere one generic build, 8 x 4.
 */
#if defined(__x86_64__) && defined(__GLIBC__) && \
	((defined(__clang__) && __clang_major__ >= 14) || \
	 (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 11))
#define TM_X86_ISAS 1
#define TM_KERNEL_CLONES \
	__attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#define TM_ATTR_V4 __attribute__((target("arch=x86-64-v4")))
#define TM_ATTR_AVX2 __attribute__((target("avx2,fma")))
#else
#define TM_KERNEL_CLONES
#endif

/*
 * The fine histogram: sign * 256 + the exponent field an f32 of the value
 * would have (1..254 exact octaves 2^-126 .. 2^127; 0 every magnitude below
 * 2^-126, zero included; 255 every one from 2^128, f64 only), four copies
 * so that runs of equal values (most of a tensor is in its top octaves) do
 * not serialise on one counter.  32-bit counters keep the table at 8 KB;
 * a tensor of more elements than they hold takes the exact pass.
 */
#define FINE 512
#define FINE_COPIES 4
typedef uint32_t fine_hist[FINE_COPIES][FINE];

static inline unsigned fine_f(float v)
{
	uint32_t u;

	memcpy(&u, &v, sizeof(u));
	return u >> 23;
}

static inline unsigned fine_d(double v)
{
	uint64_t u;
	int e;

	memcpy(&u, &v, sizeof(u));
	e = (int)((u >> 52) & 0x7ff) - 1023 + 127;
	e = e < 0 ? 0 : e > 255 ? 255 : e;
	return (unsigned)((u >> 63) << 8) | (unsigned)e;
}

/*
 * Below FINE_MIN elements the exact pass (about 2 ns an element) is cheaper
 * than folding the fine counters (reading and zeroing all 4 x 512 of them,
 * some 150 ns), and the main pass counts none: a bias or a norm's weight of
 * 16 to 64 floats took 3 times as long at level 2 as at level 1, mostly
 * for the fold (testsuite/perf/stats-bench).
 */
#ifndef FINE_MIN
#define FINE_MIN 96
#endif

#define FINE_IDX(v) _Generic((v), float: fine_f, double: fine_d)(v)

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
 * of 8 up to 64) is set, tested in 64-bit words: testing it lane by lane
 * extracts each lane to a general register, a third of the level-1 loop's
 * work.
 */
static inline int any_lane(const void *mask, size_t n)
{
	uint64_t w[8], acc = 0;
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
 * An element's fine field in the main loop, FINE_IDX of its value v, for
 * LOADERS' FINE column: f32 and bf16 read it from the source's bits with
 * an integer load (in cache: the block was just loaded), other types take
 * it from the value (fine_of_value).  Taking each lane out of the vector
 * register that holds the block costs a shuffle an element on the ports
 * the vector work needs; level 2 on 8192 f32 took 5.7 us this way against
 * 7.2 (AVX-512; AVX2 8.6 against 10.0; stats-bench, best of 10 runs, a
 * noisy host).  Storing the block's fields as a vector and reading them
 * back is worse: each read waits on the store (1.6 ns an element against
 * 0.6 in a loop of counts alone).
 */
static inline unsigned fine_bits_f32(const uint8_t *p, uint64_t i, float v)
{
	uint32_t u;

	(void)v;
	memcpy(&u, p + 4 * i, 4);
	return u >> 23;
}

static inline unsigned fine_bits_bf16(const uint8_t *p, uint64_t i, float v)
{
	uint16_t h;

	(void)v;
	memcpy(&h, p + 2 * i, 2);
	return (unsigned)h >> 7;        /* the f32 it widens to, shifted by 23 */
}

#define fine_of_value(p, i, v) ((void)(p), (void)(i), FINE_IDX(v))

/*
 * The per-element path, for blocks holding a NaN or Inf and for the tail:
 * classify, and fold finite values into lane L of accumulator set U.
 */
#define SLOW_ELEMENT(v, U, L, FULL) do { \
	if ((v) != (v)) { \
		r->nan++; \
	} else if (NONFINITE(v)) { \
		if ((v) > 0) \
			r->pinf++; \
		else \
			r->ninf++; \
	} else { \
		double d_ = (double)(v) - k; \
		lo[U][L] = (v) < lo[U][L] ? (v) : lo[U][L]; \
		hi[U][L] = (v) > hi[U][L] ? (v) : hi[U][L]; \
		s1[U][L] += d_; \
		if (FULL) \
			s2[U][L] += d_ * d_; \
		q[U][L] += (double)(v) * (double)(v); \
		if (FULL) { \
			z[U][L] += (v) == 0; \
			if (fh) \
				fh[(L) & (FINE_COPIES - 1)][FINE_IDX(v)]++; \
		} \
	} \
} while (0)

/*
 * Independent accumulator sets: the main loop takes SETS blocks of LANES
 * elements at a time, one block into each set, so that the additions into
 * a set do not wait for each other (a vector add's latency is several of
 * its issue slots; one chain of adds ran at half the loop's speed).  Both
 * are constants of each kernel (STATS_KERNEL's NL and NS).
 */

/* Block u of a group (x[u], xv[u]) into accumulator set u. */
/*
 * What differs by instruction set in a block (OPS of STATS_KERNEL: PLAIN_
 * or V4_): its min and max into the running ones, its values as doubles
 * (x the lanes, v the same as a vector), and whether a group holds a NaN
 * or Inf.  Generic vectors serve every set, but for AVX-512 GCC makes each
 * extreme a compare into a mask and a masked move, converts 8 floats to 8
 * doubles in two halves and a merge, and tests a mask lane by lane: most
 * of it on the one port that takes the compares, which bound the loop.
 * vminps/vmaxps compute exactly x < lo ? x : lo (x > hi ? x : hi), signed
 * zeros included, vcvtps2pd is one instruction, and one compare tests a
 * group: the same bits, level 1 on 8192 floats in 1287 ns against 2561,
 * level 2 in 4210 against 5227 (stats-bench, an AVX-512 Xeon).
 */
#define PLAIN_MIN(a, b) ((vt_)(((vm_)(a) & ((a) < (b))) | ((vm_)(b) & ~((a) < (b)))))
#define PLAIN_MAX(a, b) ((vt_)(((vm_)(a) & ((a) > (b))) | ((vm_)(b) & ~((a) > (b)))))
#define PLAIN_CVT(x, v) __builtin_convertvector(v, vd_)
/* Whether a lane of the n vectors xv holds a NaN or Inf (m: a mask
 * variable to use).  x - x is 0 for every finite x and NaN for the rest,
 * and so is their sum: V4 tests the sum with one compare into a mask. */
#define PLAIN_NONFINITE(xv, n, m) ({ \
	m = ((xv)[0] - (xv)[0]) != 0; \
	_Pragma("GCC unroll 8") \
	for (u = 1; u < (n); u++) \
		m |= ((xv)[u] - (xv)[u]) != 0; \
	any_lane(&m, sizeof(m)); })
#ifdef TM_X86_ISAS
#include <immintrin.h>

typedef float tm_v8f __attribute__((vector_size(32)));
typedef double tm_v8d __attribute__((vector_size(64)));

TM_ATTR_V4 static inline tm_v8f min8f(tm_v8f a, tm_v8f b)
{
	return (tm_v8f)_mm256_min_ps((__m256)a, (__m256)b);
}

TM_ATTR_V4 static inline tm_v8f max8f(tm_v8f a, tm_v8f b)
{
	return (tm_v8f)_mm256_max_ps((__m256)a, (__m256)b);
}

TM_ATTR_V4 static inline tm_v8d min8d(tm_v8d a, tm_v8d b)
{
	return (tm_v8d)_mm512_min_pd((__m512d)a, (__m512d)b);
}

TM_ATTR_V4 static inline tm_v8d max8d(tm_v8d a, tm_v8d b)
{
	return (tm_v8d)_mm512_max_pd((__m512d)a, (__m512d)b);
}

TM_ATTR_V4 static inline tm_v8d cvt8_v4(const float *x)
{
	return (tm_v8d)_mm512_cvtps_pd(_mm256_loadu_ps(x));
}

TM_ATTR_V4 static inline int nan8f(tm_v8f t)
{
	return _mm256_cmp_ps_mask((__m256)t, (__m256)t, _CMP_UNORD_Q) != 0;
}

TM_ATTR_V4 static inline int nan8d(tm_v8d t)
{
	return _mm512_cmp_pd_mask((__m512d)t, (__m512d)t, _CMP_UNORD_Q) != 0;
}

#define V4_NONFINITE(xv, n, m) ({ \
	vt_ t_ = (xv)[0] - (xv)[0]; \
	(void)m; \
	_Pragma("GCC unroll 8") \
	for (u = 1; u < (n); u++) \
		t_ += (xv)[u] - (xv)[u]; \
	_Generic(t_, tm_v8f: nan8f, default: nan8d)(t_); })
#define V4_MIN(a, b) _Generic((a), tm_v8f: min8f, default: min8d)(a, b)
#define V4_MAX(a, b) _Generic((a), tm_v8f: max8f, default: max8d)(a, b)
#define V4_CVT(x, v) (sizeof((x)[0]) == sizeof(float) ? cvt8_v4((const float *)(x)) : \
		      __builtin_convertvector(v, vd_))
#endif

#define STATS_BLOCK(u, FULL, OPS, FINE) do { \
	vd_ e_, d_; \
\
	vlo[u] = OPS##_MIN(xv[u], vlo[u]); \
	vhi[u] = OPS##_MAX(xv[u], vhi[u]); \
	e_ = OPS##_CVT(x[u], xv[u]); \
	d_ = e_ - kvec; \
	vs1[u] += d_; \
	vq[u] += e_ * e_; \
	if (FULL) { \
		vs2[u] += d_ * d_; \
		vz[u] += (vd_)((vdm_)one & (e_ == 0)); \
		for (l = 0; fh && l < LANES; l += FINE_COPIES) { \
			uint64_t j_ = i + (uint64_t)(u) * LANES + l; \
\
			fh[0][FINE(p, j_, x[u][l])]++; \
			fh[1][FINE(p, j_ + 1, x[u][l + 1])]++; \
			fh[2][FINE(p, j_ + 2, x[u][l + 2])]++; \
			fh[3][FINE(p, j_ + 3, x[u][l + 3])]++; \
		} \
	} \
} while (0)

/* The accumulators between their vector variables (the main loop's) and
 * their arrays (the per-element path's and the final fold's). */
#define ACC_TO_ARRAYS() do { \
	memcpy(lo, vlo, sizeof(vlo)); \
	memcpy(hi, vhi, sizeof(vhi)); \
	memcpy(s1, vs1, sizeof(vs1)); \
	memcpy(s2, vs2, sizeof(vs2)); \
	memcpy(q, vq, sizeof(vq)); \
	memcpy(z, vz, sizeof(vz)); \
} while (0)
#define ACC_TO_VECTORS() do { \
	memcpy(vlo, lo, sizeof(vlo)); \
	memcpy(vhi, hi, sizeof(vhi)); \
	memcpy(vs1, s1, sizeof(vs1)); \
	memcpy(vs2, s2, sizeof(vs2)); \
	memcpy(vq, q, sizeof(vq)); \
	memcpy(vz, z, sizeof(vz)); \
} while (0)

/* A group of NB blocks at i holding a NaN or Inf: element by element. */
#define STATS_SLOW_GROUP(NB, VT, LOAD, FULL) do { \
	VT x_[SETS][LANES]; \
\
	ACC_TO_ARRAYS(); \
	for (u = 0; u < (NB); u++) \
		for (l = 0; l < LANES; l++) \
			x_[u][l] = LOAD(p, i + (uint64_t)u * LANES + l, tab); \
	for (u = 0; u < (NB); u++) \
		for (l = 0; l < LANES; l++) \
			SLOW_ELEMENT(x_[u][l], u, l, FULL); \
	ACC_TO_VECTORS(); \
	i += (uint64_t)(NB) * LANES; \
} while (0)

/*
 * One kernel per value type and loader.  VT is the type values are
 * compared in (float when it holds the source exactly, else double).
 * FULL 0 builds the level-1 variant, without the sum of squared deviations,
 * the zero count and the fine histogram, which only level 2 reports.
 *
 * The main loop takes groups of SETS x LANES elements while they are all
 * finite, with every accumulator in a vector variable: GCC's generic
 * vectors of 8 doubles are one register with AVX-512, two with AVX2, four
 * with SSE2, so the one loop serves each clone (TM_KERNEL_CLONES).  What
 * is left after the last whole group goes block by block into set 0, then
 * element by element into its lane 0.  A block holding a NaN or Inf goes
 * element by element (SLOW_ELEMENT), into the same set and lanes in the
 * same order; both levels do the same operations on what they share, so
 * level-1 stats are the same bits as level 2's (test_stats checks this).
 * The fine histogram is counted per element (FINE), apart from
 * the vector sums.
 */
#define STATS_KERNEL(NAME, VT, LOAD, FINE, FULL, NL, NS, ATTR, OPS) \
ATTR \
static void NAME(struct acc *r, const uint8_t *p, uint64_t n, const float *tab, \
		 fine_hist fh) \
{ \
	enum { LANES = NL, SETS = NS }; \
	_Static_assert(NL % FINE_COPIES == 0, "a block's lanes fill the fine copies"); \
	typedef VT vt_ __attribute__((vector_size(LANES * sizeof(VT)))); \
	typedef __typeof__((vt_){0} < (vt_){0}) vm_; \
	typedef double vd_ __attribute__((vector_size(LANES * sizeof(double)))); \
	typedef __typeof__((vd_){0} < (vd_){0}) vdm_; \
	VT lo[SETS][LANES], hi[SETS][LANES], kv = 0; \
	double s1[SETS][LANES], s2[SETS][LANES], q[SETS][LANES], z[SETS][LANES], k; \
	vt_ vlo[SETS], vhi[SETS]; \
	vd_ vs1[SETS], vs2[SETS], vq[SETS], vz[SETS], kvec, one; \
	uint64_t i = 0; \
	int l, u; \
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
	for (u = 0; u < SETS; u++) { \
		for (l = 0; l < LANES; l++) { \
			lo[u][l] = hi[u][l] = kv; \
			s1[u][l] = s2[u][l] = q[u][l] = z[u][l] = 0; \
		} \
	} \
	for (l = 0; l < LANES; l++) { \
		kvec[l] = k; \
		one[l] = 1.0; \
	} \
	ACC_TO_VECTORS(); \
	/* whole groups of SETS blocks, then single blocks into set 0 */ \
	for (;;) { \
		for (; i + SETS * LANES <= n; i += SETS * LANES) { \
			VT x[SETS][LANES]; \
			vt_ xv[SETS]; \
			vm_ m; \
\
			_Pragma("GCC unroll 8") \
			for (u = 0; u < SETS; u++) { \
				for (l = 0; l < LANES; l++) \
					x[u][l] = LOAD(p, i + (uint64_t)u * LANES + l, tab); \
				memcpy(&xv[u], x[u], sizeof(xv[u])); \
			} \
			if (TM_UNLIKELY(OPS##_NONFINITE(xv, SETS, m))) \
				break; \
			_Pragma("GCC unroll 8") \
			for (u = 0; u < SETS; u++) \
				STATS_BLOCK(u, FULL, OPS, FINE); \
		} \
		if (i + SETS * LANES > n) \
			break; \
		STATS_SLOW_GROUP(SETS, VT, LOAD, FULL); \
	} \
	for (;;) { \
		for (; i + LANES <= n; i += LANES) { \
			VT x[1][LANES]; \
			vt_ xv[1]; \
			vm_ m; \
\
			for (l = 0; l < LANES; l++) \
				x[0][l] = LOAD(p, i + l, tab); \
			memcpy(&xv[0], x[0], sizeof(xv[0])); \
			if (TM_UNLIKELY(OPS##_NONFINITE(xv, 1, m))) \
				break; \
			STATS_BLOCK(0, FULL, OPS, FINE); \
		} \
		if (i + LANES > n) \
			break; \
		STATS_SLOW_GROUP(1, VT, LOAD, FULL); \
	} \
	ACC_TO_ARRAYS(); \
	for (; i < n; i++) { \
		VT v = LOAD(p, i, tab); \
		SLOW_ELEMENT(v, 0, 0, FULL); \
	} \
	r->any = 1; \
	r->k = k; \
	r->lo = lo[0][0]; \
	r->hi = hi[0][0]; \
	for (u = 0; u < SETS; u++) { \
		for (l = 0; l < LANES; l++) { \
			if (lo[u][l] < r->lo) \
				r->lo = lo[u][l]; \
			if (hi[u][l] > r->hi) \
				r->hi = hi[u][l]; \
			r->s1 += s1[u][l]; \
			r->s2 += s2[u][l]; \
			r->q += q[u][l]; \
			r->zeros += (uint64_t)z[u][l]; \
		} \
	} \
}

/*
 * floor(log2 |x|) of a finite non-zero x, from its bits: exact for
 * subnormals too, whatever the FPU's flush-to-zero setting.
 */
static inline int ilog2_f(float v)
{
	uint32_t a;

	memcpy(&a, &v, sizeof(a));
	a &= 0x7fffffffu;
	return (a >> 23) ? (int)(a >> 23) - 127 : (31 - __builtin_clz(a)) - 149;
}

static inline int ilog2_d(double v)
{
	uint64_t a;

	memcpy(&a, &v, sizeof(a));
	a &= 0x7fffffffffffffffull;
	return (a >> 52) ? (int)(a >> 52) - 1023 : (63 - __builtin_clzll(a)) - 1074;
}

static inline int signbit_f(float v)
{
	uint32_t u;

	memcpy(&u, &v, sizeof(u));
	return (int)(u >> 31);
}

static inline int signbit_d(double v)
{
	uint64_t u;

	memcpy(&u, &v, sizeof(u));
	return (int)(u >> 63);
}

/* The bin of a finite x in the window whose top octave ends at 2^top. */
static inline int log2_bin(int neg, int zero, int e, int top)
{
	int j = zero ? 0 : e - top + TM_HIST_BINS / 2;

	j = j < 0 ? 0 : j > TM_HIST_BINS / 2 - 1 ? TM_HIST_BINS / 2 - 1 : j;
	return neg ? TM_HIST_BINS / 2 - 1 - j : TM_HIST_BINS / 2 + j;
}

/*
 * The exact second pass, for the windows the fine histogram cannot fold
 * (see the top of this file): rare, so plain.
 */
#define LOG2_KERNEL(NAME, VT, LOAD, ILOG2, SIGNBIT) \
static void NAME(uint64_t *h, const uint8_t *p, uint64_t n, const float *tab, int top) \
{ \
	uint64_t i; \
\
	for (i = 0; i < n; i++) { \
		VT v = LOAD(p, i, tab); \
\
		if (NONFINITE(v)) \
			continue; \
		h[log2_bin(SIGNBIT(v), v == 0, v == 0 ? 0 : ILOG2(v), top)]++; \
	} \
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

/* Every value type the kernels read: suffix, compare type (float when it
 * holds the source exactly, else double), loader, fine field. */
#define LOADERS(X, ...) \
	X(f32, float, ld_f32, fine_bits_f32, __VA_ARGS__) \
	X(f64, double, ld_f64, fine_of_value, __VA_ARGS__) \
	X(f16, float, ld_f16, fine_of_value, __VA_ARGS__) \
	X(bf16, float, ld_bf16, fine_bits_bf16, __VA_ARGS__) \
	X(byte, float, ld_byte, fine_of_value, __VA_ARGS__) \
	X(i16, float, ld_i16, fine_of_value, __VA_ARGS__) \
	X(u16, float, ld_u16, fine_of_value, __VA_ARGS__) \
	X(i32, double, ld_i32, fine_of_value, __VA_ARGS__) \
	X(u32, double, ld_u32, fine_of_value, __VA_ARGS__) \
	X(i64, double, ld_i64, fine_of_value, __VA_ARGS__) \
	X(u64, double, ld_u64, fine_of_value, __VA_ARGS__)

/* Each dtype's loader suffix, as initialisers of a table by dtype of
 * PRE##SUFFIX##POST. */
#define BY_DTYPE(PRE, POST) \
	[TM_DT_F32] = PRE##f32##POST, [TM_DT_F64] = PRE##f64##POST, \
	[TM_DT_F16] = PRE##f16##POST, [TM_DT_BF16] = PRE##bf16##POST, \
	[TM_DT_F8E4M3] = PRE##byte##POST, [TM_DT_F8E5M2] = PRE##byte##POST, \
	[TM_DT_I8] = PRE##byte##POST, [TM_DT_I16] = PRE##i16##POST, \
	[TM_DT_I32] = PRE##i32##POST, [TM_DT_I64] = PRE##i64##POST, \
	[TM_DT_U8] = PRE##byte##POST, [TM_DT_U16] = PRE##u16##POST, \
	[TM_DT_U32] = PRE##u32##POST, [TM_DT_U64] = PRE##u64##POST, \
	[TM_DT_BOOL] = PRE##byte##POST

/* The exact histogram pass, one per value type. */
#define HIST(SFX, VT, LOAD, FINE, ...) \
	LOG2_KERNEL(hist_##SFX, VT, LOAD, \
		    _Generic((VT)0, float: ilog2_f, double: ilog2_d), \
		    _Generic((VT)0, float: signbit_f, double: signbit_d))
LOADERS(HIST, )
RESCUE_KERNEL(rescue_f64, double, ld_f64)

typedef void stats_fn(struct acc *, const uint8_t *, uint64_t, const float *, fine_hist);
typedef void hist_fn(uint64_t *, const uint8_t *, uint64_t, const float *, int);

static hist_fn *const hist_kernels[TM_DT__COUNT] = { BY_DTYPE(hist_, ) };

/* The level-2 and level-1 kernels of one instruction set, by dtype. */
struct kernel_set {
	const char *isa;
	stats_fn *stats[TM_DT__COUNT], *stats1[TM_DT__COUNT];
};

/* Every kernel of instruction set ISA (LANES NL, SETS NS, attribute ATTR)
 * and their table ks_ISA. */
#define KSET_DT(SFX, VT, LOAD, FINE, ISA, NL, NS, ATTR, OPS) \
	STATS_KERNEL(stats_##SFX##_##ISA, VT, LOAD, FINE, 1, NL, NS, ATTR, OPS) \
	STATS_KERNEL(stats1_##SFX##_##ISA, VT, LOAD, FINE, 0, NL, NS, ATTR, OPS)
#define KERNEL_SET(ISA, NAME, NL, NS, ATTR, OPS) \
	LOADERS(KSET_DT, ISA, NL, NS, ATTR, OPS) \
	static const struct kernel_set ks_##ISA = { NAME, \
		{ BY_DTYPE(stats_, _##ISA) }, { BY_DTYPE(stats1_, _##ISA) } };

#ifdef TM_X86_ISAS
KERNEL_SET(v4, "avx512", 8, 4, TM_ATTR_V4, V4)
KERNEL_SET(avx2, "avx2", 4, 2, TM_ATTR_AVX2, PLAIN)
KERNEL_SET(base, "sse2", 4, 2, , PLAIN)

static int isa_runs(const struct kernel_set *k)
{
	__builtin_cpu_init();
	if (k == &ks_v4)
		return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
			__builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
			__builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx2") &&
			__builtin_cpu_supports("fma");
	if (k == &ks_avx2)
		return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
	return 1;
}

/* best first */
static const struct kernel_set *const kernel_sets[] = { &ks_v4, &ks_avx2, &ks_base };
#else
KERNEL_SET(generic, "generic", 8, 4, , PLAIN)

static int isa_runs(const struct kernel_set *k)
{
	(void)k;
	return 1;
}

static const struct kernel_set *const kernel_sets[] = { &ks_generic };
#endif

#define N_SETS (sizeof(kernel_sets) / sizeof(kernel_sets[0]))

/* The kernels in use; NULL until the first call picks them. */
static const struct kernel_set *kernels_in_use;

/* The best set this CPU runs, or the one TENSORMORPH_STATS_ISA names. */
static const struct kernel_set *pick_kernels(void)
{
	const char *want = getenv("TENSORMORPH_STATS_ISA");
	size_t i;

	if (want && *want) {
		for (i = 0; i < N_SETS; i++)
			if (!strcmp(kernel_sets[i]->isa, want) && isa_runs(kernel_sets[i]))
				return kernel_sets[i];
	}
	for (i = 0; i + 1 < N_SETS; i++)
		if (isa_runs(kernel_sets[i]))
			return kernel_sets[i];
	return kernel_sets[N_SETS - 1];
}

/* Every thread that races here picks the same set: a relaxed store is enough. */
static const struct kernel_set *kernels(void)
{
	const struct kernel_set *k = __atomic_load_n(&kernels_in_use, __ATOMIC_RELAXED);

	if (!k) {
		k = pick_kernels();
		__atomic_store_n(&kernels_in_use, k, __ATOMIC_RELAXED);
	}
	return k;
}

const char *tm_stats_isa(void)
{
	return kernels()->isa;
}

int tm_stats_use_isa(const char *name)
{
	size_t i;

	for (i = 0; name && i < N_SETS; i++) {
		if (!strcmp(kernel_sets[i]->isa, name)) {
			if (!isa_runs(kernel_sets[i]))
				return TM_ERR_UNSUPPORTED;
			__atomic_store_n(&kernels_in_use, kernel_sets[i], __ATOMIC_RELAXED);
			return TM_OK;
		}
	}
	return TM_ERR_INVALID_ARG;
}

static void set_stat(struct tm_tensor *t, int s, double v)
{
	t->stat[s] = v;
	t->have |= TM_STAT_BIT(s);
}

/*
 * The 32 bins of t from the fine histogram, or from a second pass where
 * the window goes past the fine counters' exact range.
 */
TM_KERNEL_CLONES
static void histogram(struct tm_tensor *t, hist_fn *fn, const uint8_t *p,
		      uint64_t numel, const float *tab, double amax, fine_hist fh)
{
	uint64_t h[TM_HIST_BINS];
	int b, f, s, top;

	(void)frexp(amax, &top);        /* amax < 2^top; 0 for amax 0 */
	memset(h, 0, sizeof(h));
	if (fh && top >= -111 && top <= 128 && numel <= UINT32_MAX) {
		/* Fields above the top octave's (top + 126) are empty; those
		 * up to f0 = top + 111 fold into the innermost bin, the 15
		 * after it are one octave each.  Each field is read and zeroed
		 * for the next call in one loop of a fixed count, which
		 * vectorises; 32-bit sums hold numel. */
		int f0 = top + 111, half = TM_HIST_BINS / 2;

		for (s = 0; s < 2; s++) {
			uint32_t in = 0, oct[256];

			memset(oct, 0, sizeof(oct));
			for (b = 0; b < FINE_COPIES; b++) {
				uint32_t *row = &fh[b][s * 256];

				for (f = 0; f < 256; f++) {
					in += f <= f0 ? row[f] : 0;
					oct[f] += row[f];
					row[f] = 0;
				}
			}
			h[s ? half - 1 : half] = in;
			for (f = f0 + 1; f < f0 + half; f++)
				h[s ? half - 1 - (f - f0) : half + (f - f0)] = oct[f];
		}
	} else {
		fn(h, p, numel, tab, top);
		if (fh)
			memset(fh, 0, sizeof(fine_hist));
	}
	for (b = 0; b < TM_HIST_BINS; b++)
		t->hist[b] = h[b] > UINT32_MAX ? UINT32_MAX : (uint32_t)h[b];
	t->have_hist = TM_HIST_LOG2;
	t->hist_lo = top - (TM_HIST_BINS / 2 - 1);
	t->hist_hi = top;
}

int tm_stats_compute(struct tm_tensor *t, const void *data, uint64_t numel,
		     int dtype, int level)
{
	const uint8_t *p = data;
	float tab[256];
	/* Zero between calls (histogram() clears what it read): an 8 KB
	 * memset per call would cost a small tensor more than its pass. */
	static _Thread_local fine_hist fh;
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
	if (!hist_kernels[dtype])
		return TM_ERR_UNSUPPORTED;
	if (!data && numel)
		return TM_ERR_INVALID_ARG;
	if (level == 0)
		return TM_OK;
	if (tm_dtype_size(dtype) == 1)
		byte_table(dtype, tab);

	memset(&r, 0, sizeof(r));
	if (level >= 2)
		kernels()->stats[dtype](&r, p, numel, tab, numel >= FINE_MIN ? fh : NULL);
	else
		kernels()->stats1[dtype](&r, p, numel, tab, NULL);
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
		histogram(t, hist_kernels[dtype], p, numel, tab, amax,
			  numel >= FINE_MIN ? fh : NULL);
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
