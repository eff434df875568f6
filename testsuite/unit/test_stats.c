/*
 * test_stats.c -- tm_stats_compute against values computed independently
 * here (a plain, obviously correct loop in long double), for every dtype,
 * with NaN, +Inf and -Inf mixed in, all-NaN and empty tensors, and the
 * half/fp8 conversions of special values.  What the user sees is the stat
 * values and which of them are present, so both are checked.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensormorph.h"
#include "tm-test.h"

/* The reference: stats of values already converted to double. */
struct ref {
	uint64_t numel, nan, pinf, ninf, zeros, nf;
	double min, max, mean, abs_max, l2, std;
	uint32_t hist[TM_HIST_BINS];
	int top;                        /* the histogram's E */
};

/*
 * The log2 histogram (tm-stats.h) by its definition, with frexp: sign bit
 * and octave of each finite element in the window below 2^top.
 */
static void ref_hist(const double *v, uint64_t n, double abs_max, uint32_t *hist, int *top)
{
	uint64_t i;

	(void)frexp(abs_max, top);
	for (i = 0; i < n; i++) {
		int e = 0, j = 0;

		if (!isfinite(v[i]))
			continue;
		if (v[i] != 0) {
			(void)frexp(v[i], &e);          /* |x| in [2^(e-1), 2^e) */
			j = (e - 1) - *top + TM_HIST_BINS / 2;
			j = j < 0 ? 0 : j > TM_HIST_BINS / 2 - 1 ? TM_HIST_BINS / 2 - 1 : j;
		}
		hist[signbit(v[i]) ? TM_HIST_BINS / 2 - 1 - j : TM_HIST_BINS / 2 + j]++;
	}
}

static void reference(const double *v, uint64_t n, struct ref *r)
{
	long double sum = 0, sq = 0, dev = 0;
	uint64_t i;

	memset(r, 0, sizeof(*r));
	r->numel = n;
	r->min = INFINITY;
	r->max = -INFINITY;
	for (i = 0; i < n; i++) {
		if (isnan(v[i])) {
			r->nan++;
		} else if (isinf(v[i])) {
			if (v[i] > 0)
				r->pinf++;
			else
				r->ninf++;
		} else {
			r->nf++;
			sum += v[i];
			sq += (long double)v[i] * v[i];
			if (v[i] < r->min)
				r->min = v[i];
			if (v[i] > r->max)
				r->max = v[i];
			if (v[i] == 0)
				r->zeros++;
		}
	}
	if (!r->nf)
		return;
	r->mean = (double)(sum / r->nf);
	for (i = 0; i < n; i++)
		if (isfinite(v[i]))
			dev += ((long double)v[i] - r->mean) * ((long double)v[i] - r->mean);
	r->std = (double)sqrtl(dev / r->nf);
	r->l2 = (double)sqrtl(sq);
	r->abs_max = fabs(r->min) > fabs(r->max) ? fabs(r->min) : fabs(r->max);
	ref_hist(v, n, r->abs_max, r->hist, &r->top);
}

static int close_to(double got, double want, double rel)
{
	if (got == want)
		return 1;
	return fabs(got - want) <= rel * (fabs(want) > 1 ? fabs(want) : 1);
}

#define CHECK_CLOSE(got, want, rel) do { \
	CU_ASSERT(close_to((got), (want), (rel))); \
	if (!close_to((got), (want), (rel))) \
		fprintf(stderr, "\n  %s:%d %s = %.17g, want %.17g\n", __FILE__, \
			__LINE__, #got, (double)(got), (double)(want)); \
} while (0)

/* Compares t (at level 2) with the reference, with a tolerance on reals. */
static void check_against(const struct tm_tensor *t, const struct ref *r, double rel)
{
	uint64_t sum = 0;
	int b;

	CU_ASSERT_EQUAL(t->stat[TM_STAT_NUMEL], (double)r->numel);
	CU_ASSERT_EQUAL(t->stat[TM_STAT_NAN_COUNT], (double)r->nan);
	CU_ASSERT_EQUAL(t->stat[TM_STAT_POSINF_COUNT], (double)r->pinf);
	CU_ASSERT_EQUAL(t->stat[TM_STAT_NEGINF_COUNT], (double)r->ninf);
	CU_ASSERT_EQUAL(t->stat[TM_STAT_INF_COUNT], (double)(r->pinf + r->ninf));
	CU_ASSERT_EQUAL(t->stat[TM_STAT_ZERO_COUNT], (double)r->zeros);
	if (!r->nf) {
		CU_ASSERT_EQUAL(t->have, TM_STAT_BIT(TM_STAT_NUMEL) |
				TM_STAT_BIT(TM_STAT_NAN_COUNT) | TM_STAT_BIT(TM_STAT_INF_COUNT) |
				TM_STAT_BIT(TM_STAT_POSINF_COUNT) |
				TM_STAT_BIT(TM_STAT_NEGINF_COUNT) |
				TM_STAT_BIT(TM_STAT_ZERO_COUNT));
		CU_ASSERT_EQUAL(t->have_hist, 0);
		return;
	}
	CU_ASSERT_EQUAL(t->have, TM_STATS_L2_MASK);
	CU_ASSERT_EQUAL(t->stat[TM_STAT_MIN], r->min);
	CU_ASSERT_EQUAL(t->stat[TM_STAT_MAX], r->max);
	CU_ASSERT_EQUAL(t->stat[TM_STAT_ABS_MAX], r->abs_max);
	CHECK_CLOSE(t->stat[TM_STAT_MEAN], r->mean, rel);
	CHECK_CLOSE(t->stat[TM_STAT_L2], r->l2, rel);
	CHECK_CLOSE(t->stat[TM_STAT_STD], r->std, rel);
	CU_ASSERT_EQUAL_FATAL(t->have_hist, TM_HIST_LOG2);
	for (b = 0; b < TM_HIST_BINS; b++) {
		sum += t->hist[b];
		CU_ASSERT_EQUAL(t->hist[b], r->hist[b]);
		if (t->hist[b] != r->hist[b])
			fprintf(stderr, "\n  bin %d: %u, want %u\n", b, t->hist[b],
				r->hist[b]);
	}
	CU_ASSERT_EQUAL(sum, r->nf);
	CU_ASSERT_EQUAL(t->hist_hi, r->top);
	CU_ASSERT_EQUAL(t->hist_lo, r->top - 15);
}

/* Deterministic pseudo-random values (xorshift), no libc rand state. */
static uint64_t rng_state = 88172645463325252ull;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static double rnd_unit(void)
{
	return (double)(rnd() >> 11) / 9007199254740992.0;
}

/* ------------------------------------------------------------- float dtypes */

/* n values with sprinkled specials; returns them as doubles and as float. */
static void make_f32(float *f, double *d, size_t n, int specials)
{
	size_t i;

	for (i = 0; i < n; i++) {
		f[i] = (float)(rnd_unit() * 20 - 7);
		if (i % 17 == 3)
			f[i] = 0.0f;
		if (specials) {
			if (i % 97 == 5)
				f[i] = NAN;
			if (i % 131 == 7)
				f[i] = INFINITY;
			if (i % 151 == 9)
				f[i] = -INFINITY;
		}
		d[i] = f[i];
	}
}

static void test_f32(void)
{
	size_t sizes[] = { 1, 2, 7, 8, 9, 15, 16, 17, 100, 1000, 12345 };
	size_t i;
	int specials;

	for (specials = 0; specials < 2; specials++) {
		for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			size_t n = sizes[i];
			float *f = malloc(n * sizeof(*f));
			double *d = malloc(n * sizeof(*d));
			struct tm_tensor t;
			struct ref r;

			make_f32(f, d, n, specials);
			reference(d, n, &r);
			CU_ASSERT_EQUAL(tm_stats_compute(&t, f, n, TM_DT_F32, 2), TM_OK);
			check_against(&t, &r, 1e-9);
			free(f);
			free(d);
		}
	}
}

/* Odd alignment must not matter (tensors can be views into a buffer). */
static void test_f32_unaligned(void)
{
	float f[64];
	double d[64];
	unsigned char *raw = malloc(64 * sizeof(float) + 1);
	struct tm_tensor t;
	struct ref r;

	make_f32(f, d, 64, 1);
	memcpy(raw + 1, f, sizeof(f));
	reference(d, 64, &r);
	CU_ASSERT_EQUAL(tm_stats_compute(&t, raw + 1, 64, TM_DT_F32, 2), TM_OK);
	check_against(&t, &r, 1e-9);
	free(raw);
}

static void test_f64(void)
{
	double v[1000];
	struct tm_tensor t;
	struct ref r;
	size_t i;

	for (i = 0; i < 1000; i++) {
		v[i] = rnd_unit() * 1e6 - 3e5;
		if (i % 50 == 1)
			v[i] = NAN;
		if (i % 77 == 2)
			v[i] = -INFINITY;
	}
	reference(v, 1000, &r);
	CU_ASSERT_EQUAL(tm_stats_compute(&t, v, 1000, TM_DT_F64, 2), TM_OK);
	check_against(&t, &r, 1e-12);
}

/* Sums that overflow a double still give finite, correct stats. */
static void test_f64_huge(void)
{
	double v[4] = { 8e307, 9e307, -8e307, -8e307 };
	struct tm_tensor t;
	struct ref r;

	reference(v, 4, &r);
	CU_ASSERT_EQUAL(tm_stats_compute(&t, v, 4, TM_DT_F64, 2), TM_OK);
	check_against(&t, &r, 1e-12);
	CHECK_CLOSE(t.stat[TM_STAT_MEAN], 0.25e307, 1e-12);
	CHECK_CLOSE(t.stat[TM_STAT_L2] / 1e307, sqrt(273), 1e-12);
	CU_ASSERT(isfinite(t.stat[TM_STAT_STD]));
	/* the window 2^1009..2^1024 is past the fine counters: the exact
	 * pass; 9e307 is above 2^1023, 8e307 below */
	CU_ASSERT_EQUAL(t.hist_hi, 1024);
	CU_ASSERT_EQUAL(t.hist[1], 2);
	CU_ASSERT_EQUAL(t.hist[TM_HIST_BINS - 2], 1);
	CU_ASSERT_EQUAL(t.hist[TM_HIST_BINS - 1], 1);
}

/* A large mean against a small spread: the shifted sums keep std exact. */
static void test_std_precision(void)
{
	enum { N = 100000 };
	float *f = malloc(N * sizeof(*f));
	struct tm_tensor t;
	size_t i;

	for (i = 0; i < N; i++)
		f[i] = (i & 1) ? 10001.0f : 9999.0f;
	CU_ASSERT_EQUAL(tm_stats_compute(&t, f, N, TM_DT_F32, 2), TM_OK);
	CU_ASSERT_EQUAL(t.stat[TM_STAT_MEAN], 10000.0);
	CHECK_CLOSE(t.stat[TM_STAT_STD], 1.0, 1e-12);
	/* 9999 and 10001 share the octave [2^13, 2^14) */
	CU_ASSERT_EQUAL(t.hist_hi, 14);
	CU_ASSERT_EQUAL(t.hist[TM_HIST_BINS - 1], N);
	free(f);
}

/* binary16 bit patterns of interest and their values. */
static const struct {
	uint16_t bits;
	double value;
} f16_cases[] = {
	{ 0x0000, 0.0 }, { 0x8000, -0.0 }, { 0x3c00, 1.0 }, { 0xc000, -2.0 },
	{ 0x7bff, 65504.0 }, { 0xfbff, -65504.0 },
	{ 0x0400, 6.103515625e-05 },            /* smallest normal */
	{ 0x0001, 5.9604644775390625e-08 },     /* smallest subnormal */
	{ 0x03ff, 6.097555160522461e-05 },      /* largest subnormal */
	{ 0x3555, 0.333251953125 },
	{ 0x7c00, INFINITY }, { 0xfc00, -INFINITY },
};

static void test_f16_conversions(void)
{
	size_t i;

	for (i = 0; i < sizeof(f16_cases) / sizeof(f16_cases[0]); i++) {
		double got = tm_f16_to_double(f16_cases[i].bits);

		CU_ASSERT_EQUAL(got, f16_cases[i].value);
		CU_ASSERT_EQUAL(signbit(got) != 0, signbit(f16_cases[i].value) != 0);
	}
	CU_ASSERT(isnan(tm_f16_to_double(0x7e00)));
	CU_ASSERT(isnan(tm_f16_to_double(0x7c01)));
	CU_ASSERT(isnan(tm_f16_to_double(0xfe00)));

	CU_ASSERT_EQUAL(tm_bf16_to_double(0x3f80), 1.0);
	CU_ASSERT_EQUAL(tm_bf16_to_double(0xc040), -3.0);
	CU_ASSERT_EQUAL(tm_bf16_to_double(0x7f80), INFINITY);
	CU_ASSERT_EQUAL(tm_bf16_to_double(0xff80), -INFINITY);
	CU_ASSERT(isnan(tm_bf16_to_double(0x7fc0)));
	CU_ASSERT(isnan(tm_bf16_to_double(0xffc1)));
	CU_ASSERT_EQUAL(tm_bf16_to_double(0x0001), ldexp(1, -133));   /* subnormal */
	CU_ASSERT_EQUAL(tm_bf16_to_double(0x7f7f), 0x1.fep127);
	CU_ASSERT(signbit(tm_bf16_to_double(0x8000)));
}

/* Every f16 bit pattern through the stats path, against the helper. */
static void test_f16_all_patterns(void)
{
	uint16_t *h = malloc(65536 * sizeof(*h));
	double *d = malloc(65536 * sizeof(*d));
	struct tm_tensor t;
	struct ref r;
	uint32_t i;

	for (i = 0; i < 65536; i++) {
		h[i] = (uint16_t)i;
		d[i] = tm_f16_to_double((uint16_t)i);
	}
	reference(d, 65536, &r);
	/* 2 * 1023 NaN patterns, one +Inf, one -Inf. */
	CU_ASSERT_EQUAL(r.nan, 2046);
	CU_ASSERT_EQUAL(r.pinf, 1);
	CU_ASSERT_EQUAL(r.max, 65504.0);
	CU_ASSERT_EQUAL(tm_stats_compute(&t, h, 65536, TM_DT_F16, 2), TM_OK);
	check_against(&t, &r, 1e-9);
	free(h);
	free(d);
}

static void test_bf16(void)
{
	uint16_t h[300];
	double d[300];
	struct tm_tensor t;
	struct ref r;
	size_t i;

	for (i = 0; i < 300; i++) {
		float f = (float)(rnd_unit() * 8 - 4);
		uint32_t u;

		memcpy(&u, &f, 4);
		h[i] = (uint16_t)(u >> 16);
		if (i == 10)
			h[i] = 0x7fc0;  /* NaN */
		if (i == 20)
			h[i] = 0xff80;  /* -Inf */
		d[i] = tm_bf16_to_double(h[i]);
	}
	reference(d, 300, &r);
	CU_ASSERT_EQUAL(r.nan, 1);
	CU_ASSERT_EQUAL(r.ninf, 1);
	CU_ASSERT_EQUAL(tm_stats_compute(&t, h, 300, TM_DT_BF16, 2), TM_OK);
	check_against(&t, &r, 1e-9);
}

/* FP8 values decoded here from the OCP spec formulas, independently. */
static double e4m3(uint8_t b)
{
	int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
	double v;

	if (e == 15 && m == 7)
		return NAN;
	v = e ? ldexp(1 + m / 8.0, e - 7) : ldexp(m / 8.0, -6);
	return s ? -v : v;
}

static double e5m2(uint8_t b)
{
	int s = b >> 7, e = (b >> 2) & 31, m = b & 3;
	double v;

	if (e == 31)
		return m ? NAN : (s ? -INFINITY : INFINITY);
	v = e ? ldexp(1 + m / 4.0, e - 15) : ldexp(m / 4.0, -14);
	return s ? -v : v;
}

static void test_fp8(void)
{
	uint8_t b[256];
	double d[256];
	struct tm_tensor t;
	struct ref r;
	int i;

	for (i = 0; i < 256; i++) {
		b[i] = (uint8_t)i;
		d[i] = e4m3((uint8_t)i);
	}
	reference(d, 256, &r);
	CU_ASSERT_EQUAL(r.nan, 2);
	CU_ASSERT_EQUAL(r.pinf + r.ninf, 0);
	CU_ASSERT_EQUAL(r.max, 448.0);
	CU_ASSERT_EQUAL(tm_stats_compute(&t, b, 256, TM_DT_F8E4M3, 2), TM_OK);
	check_against(&t, &r, 1e-12);

	for (i = 0; i < 256; i++)
		d[i] = e5m2((uint8_t)i);
	reference(d, 256, &r);
	CU_ASSERT_EQUAL(r.nan, 6);
	CU_ASSERT_EQUAL(r.pinf, 1);
	CU_ASSERT_EQUAL(r.ninf, 1);
	CU_ASSERT_EQUAL(r.max, 57344.0);
	CU_ASSERT_EQUAL(tm_stats_compute(&t, b, 256, TM_DT_F8E5M2, 2), TM_OK);
	check_against(&t, &r, 1e-12);
}

/* ------------------------------------------------------------- integers */

#define INT_CASE(T, DT, GEN) do { \
	T a[N]; \
	double d[N]; \
	struct tm_tensor t; \
	struct ref r; \
	size_t i; \
\
	for (i = 0; i < N; i++) { \
		a[i] = (T)(GEN); \
		d[i] = (double)a[i]; \
	} \
	reference(d, N, &r); \
	CU_ASSERT_EQUAL(tm_stats_compute(&t, a, N, DT, 2), TM_OK); \
	CU_ASSERT_EQUAL(t.stat[TM_STAT_NAN_COUNT], 0); \
	CU_ASSERT_EQUAL(t.stat[TM_STAT_INF_COUNT], 0); \
	check_against(&t, &r, 1e-12); \
} while (0)

static void test_integers(void)
{
	enum { N = 333 };

	INT_CASE(int8_t, TM_DT_I8, (int)(rnd() % 256) - 128);
	INT_CASE(uint8_t, TM_DT_U8, rnd() % 256);
	INT_CASE(int16_t, TM_DT_I16, (int)(rnd() % 65536) - 32768);
	INT_CASE(uint16_t, TM_DT_U16, rnd() % 65536);
	INT_CASE(int32_t, TM_DT_I32, (int64_t)(rnd() % 4294967296u) - 2147483648);
	INT_CASE(uint32_t, TM_DT_U32, rnd());
	INT_CASE(int64_t, TM_DT_I64, (int64_t)(rnd() % 2000001) - 1000000);
	INT_CASE(uint64_t, TM_DT_U64, rnd() % 1000000000000u);
	INT_CASE(int32_t, TM_DT_I32, i % 3);
}

static void test_bool(void)
{
	uint8_t b[10] = { 0, 1, 1, 0, 1, 1, 1, 0, 2, 1 };   /* 2 reads as true */
	struct tm_tensor t;

	CU_ASSERT_EQUAL(tm_stats_compute(&t, b, 10, TM_DT_BOOL, 2), TM_OK);
	CU_ASSERT_EQUAL(t.stat[TM_STAT_MIN], 0);
	CU_ASSERT_EQUAL(t.stat[TM_STAT_MAX], 1);
	CU_ASSERT_EQUAL(t.stat[TM_STAT_MEAN], 0.7);
	CU_ASSERT_EQUAL(t.stat[TM_STAT_ZERO_COUNT], 3);
	CHECK_CLOSE(t.stat[TM_STAT_L2], sqrt(7), 1e-15);
	/* 1 is the top octave, [2^0, 2^1); zeros in the innermost bin */
	CU_ASSERT_EQUAL(t.hist_hi, 1);
	CU_ASSERT_EQUAL(t.hist[TM_HIST_BINS / 2], 3);
	CU_ASSERT_EQUAL(t.hist[TM_HIST_BINS - 1], 7);
}

/* ------------------------------------------------------------- edge cases */

static void test_empty(void)
{
	struct tm_tensor t;

	memset(&t, 0xff, sizeof(t));
	CU_ASSERT_EQUAL(tm_stats_compute(&t, NULL, 0, TM_DT_F32, 2), TM_OK);
	CU_ASSERT_EQUAL(t.stat[TM_STAT_NUMEL], 0);
	CU_ASSERT_EQUAL(t.stat[TM_STAT_NAN_COUNT], 0);
	CU_ASSERT_EQUAL(t.stat[TM_STAT_ZERO_COUNT], 0);
	CU_ASSERT(t.have & TM_STAT_BIT(TM_STAT_NUMEL));
	CU_ASSERT(!(t.have & TM_STAT_BIT(TM_STAT_MIN)));
	CU_ASSERT(!(t.have & TM_STAT_BIT(TM_STAT_MEAN)));
	CU_ASSERT(!(t.have & TM_STAT_BIT(TM_STAT_L2)));
	CU_ASSERT(!(t.have & TM_STAT_BIT(TM_STAT_STD)));
	CU_ASSERT_EQUAL(t.have_hist, 0);
}

static void test_all_nan(void)
{
	float f[20];
	struct tm_tensor t;
	struct ref r;
	double d[20];
	int i;

	for (i = 0; i < 20; i++) {
		f[i] = i == 3 ? INFINITY : i == 4 ? -INFINITY : NAN;
		d[i] = f[i];
	}
	reference(d, 20, &r);
	CU_ASSERT_EQUAL(tm_stats_compute(&t, f, 20, TM_DT_F32, 2), TM_OK);
	check_against(&t, &r, 0);
	CU_ASSERT_EQUAL(t.stat[TM_STAT_NAN_COUNT], 18);
	CU_ASSERT_EQUAL(t.stat[TM_STAT_INF_COUNT], 2);
	/* At level 1 the mask holds exactly the five counts. */
	CU_ASSERT_EQUAL(tm_stats_compute(&t, f, 20, TM_DT_F32, 1), TM_OK);
	CU_ASSERT_EQUAL(t.have, TM_STAT_BIT(TM_STAT_NUMEL) |
			TM_STAT_BIT(TM_STAT_NAN_COUNT) | TM_STAT_BIT(TM_STAT_INF_COUNT) |
			TM_STAT_BIT(TM_STAT_POSINF_COUNT) |
			TM_STAT_BIT(TM_STAT_NEGINF_COUNT));
}

/* Only the last element is finite: it must be found past the blocks. */
static void test_late_finite(void)
{
	float f[33];
	struct tm_tensor t;
	int i;

	for (i = 0; i < 33; i++)
		f[i] = NAN;
	f[32] = -2.5f;
	CU_ASSERT_EQUAL(tm_stats_compute(&t, f, 33, TM_DT_F32, 2), TM_OK);
	CU_ASSERT_EQUAL(t.stat[TM_STAT_NAN_COUNT], 32);
	CU_ASSERT_EQUAL(t.stat[TM_STAT_MIN], -2.5);
	CU_ASSERT_EQUAL(t.stat[TM_STAT_MAX], -2.5);
	CU_ASSERT_EQUAL(t.stat[TM_STAT_MEAN], -2.5);
	CU_ASSERT_EQUAL(t.stat[TM_STAT_ABS_MAX], 2.5);
	CU_ASSERT_EQUAL(t.stat[TM_STAT_STD], 0);
	/* -2.5 is in the top negative octave, (-2^2, -2^1] */
	CU_ASSERT_EQUAL(t.hist_lo, -13);
	CU_ASSERT_EQUAL(t.hist_hi, 2);
	CU_ASSERT_EQUAL(t.hist[0], 1);
}

static void test_levels(void)
{
	float f[4] = { 1, -2, 0, 3 };
	struct tm_tensor t;

	CU_ASSERT_EQUAL(tm_stats_compute(&t, f, 4, TM_DT_F32, 0), TM_OK);
	CU_ASSERT_EQUAL(t.have, 0);
	CU_ASSERT_EQUAL(t.have_hist, 0);
	CU_ASSERT_EQUAL(tm_stats_compute(&t, f, 4, TM_DT_F32, 1), TM_OK);
	CU_ASSERT_EQUAL(t.have, TM_STATS_L1_MASK);
	CU_ASSERT_EQUAL(t.have_hist, 0);
	CU_ASSERT_EQUAL(t.stat[TM_STAT_ABS_MAX], 3);
	CU_ASSERT_EQUAL(t.stat[TM_STAT_L2], sqrt(14));
	CU_ASSERT_EQUAL(t.stat[TM_STAT_MEAN], 0.5);
	CU_ASSERT_EQUAL(tm_stats_compute(&t, f, 4, TM_DT_F32, 2), TM_OK);
	CU_ASSERT_EQUAL(t.have, TM_STATS_L2_MASK);
	CU_ASSERT_EQUAL(t.stat[TM_STAT_ZERO_COUNT], 1);
	CU_ASSERT_EQUAL(tm_stats_compute(&t, f, 4, TM_DT_F32, 3), TM_OK);
	CU_ASSERT_EQUAL(t.have, TM_STATS_L2_MASK);
	/* Going back down clears what the deeper level set. */
	CU_ASSERT_EQUAL(tm_stats_compute(&t, f, 4, TM_DT_F32, 1), TM_OK);
	CU_ASSERT_EQUAL(t.have, TM_STATS_L1_MASK);
	CU_ASSERT_EQUAL(t.have_hist, 0);
}

/*
 * Level 1 runs a kernel of its own (no std, no zero count): whatever it
 * reports must be exactly what level 2 reports for the same data, for
 * every dtype, across block sizes, with NaN and Inf in blocks and tails
 * and in the first element (the shift).
 */
static void test_level1_matches_level2(void)
{
	static const size_t sizes[] = { 1, 7, 8, 9, 16, 17, 63, 100, 1000, 4099 };
	size_t si, i, n;
	int dt, s;
	uint8_t *buf = malloc(4099 * 8);

	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	for (dt = TM_DT_F32; dt <= TM_DT_BOOL; dt++) {
		for (si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
			struct tm_tensor a, b;

			n = sizes[si];
			for (i = 0; i < n * 8; i++)
				buf[i] = (uint8_t)rnd();
			if (dt == TM_DT_F32) {
				float *f = (float *)buf;

				for (i = 0; i < n; i++)
					f[i] = (float)(rnd_unit() * 20 - 7);
				f[0] = NAN;
				if (n > 40) {
					f[37] = INFINITY;
					f[n - 1] = -INFINITY;
				}
			} else if (dt == TM_DT_F64) {
				double *d = (double *)buf;

				for (i = 0; i < n; i++)
					d[i] = rnd_unit() * 2e6 - 1e6;
				if (n > 40) {
					d[12] = NAN;
					d[n - 2] = INFINITY;
				}
			}
			CU_ASSERT_EQUAL(tm_stats_compute(&a, buf, n, dt, 1), TM_OK);
			CU_ASSERT_EQUAL(tm_stats_compute(&b, buf, n, dt, 2), TM_OK);
			CU_ASSERT_EQUAL(a.have, b.have & TM_STATS_L1_MASK);
			for (s = 0; s < TM_STAT__COUNT; s++) {
				if (!(a.have & TM_STAT_BIT(s)))
					continue;
				CU_ASSERT_EQUAL(memcmp(&a.stat[s], &b.stat[s], sizeof(double)), 0);
				if (memcmp(&a.stat[s], &b.stat[s], sizeof(double)))
					fprintf(stderr, "\n  dtype %d n %zu stat %d: %.17g vs %.17g\n",
						dt, n, s, a.stat[s], b.stat[s]);
			}
		}
	}
	free(buf);
}

/* ------------------------------------------------------------- log2 histogram */

/*
 * Values over 2^-149 .. 2^40 of either sign (random exponents, so every
 * octave and the subnormals are hit), with zeros, -0.0, exact powers of
 * two and NaN/Inf, against the frexp definition, at sizes that end in
 * every part of the kernel's blocks, on either side of FINE_MIN (below it
 * the histogram is the exact pass, from it the fine counters' fold).  Then
 * the same without NaN and Inf, so that every block goes through the main
 * loop, which reads the fields of f32 and bf16 from their bits; and as
 * bf16 (each value's top 16 bits).
 */
static void test_log2_wide(void)
{
	size_t sizes[] = { 1, 3, 16, 17, 33, 95, 96, 97, 1000, 4099 };
	size_t i, k;
	int finite;

	for (finite = 0; finite < 2; finite++) {
		for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
			size_t n = sizes[k];
			float *f = malloc(n * sizeof(*f));
			uint16_t *h = malloc(n * sizeof(*h));
			double *d = malloc(n * sizeof(*d));
			struct tm_tensor t;
			struct ref r;

			for (i = 0; i < n; i++) {
				int e = (int)(rnd() % 190) - 149;

				f[i] = ldexpf((float)(1 + rnd_unit()), e) * ((rnd() & 1) ? -1 : 1);
				if (i % 11 == 4)
					f[i] = ldexpf(1, (int)(rnd() % 60) - 30);     /* edges */
				if (i % 13 == 2)
					f[i] = (i & 2) ? -0.0f : 0.0f;
				if (!finite && i % 29 == 6)
					f[i] = (i & 1) ? NAN : -INFINITY;
				d[i] = f[i];
			}
			reference(d, n, &r);
			CU_ASSERT_EQUAL(tm_stats_compute(&t, f, n, TM_DT_F32, 2), TM_OK);
			check_against(&t, &r, 1e-6);

			for (i = 0; i < n; i++) {
				uint32_t u;

				memcpy(&u, &f[i], 4);
				h[i] = (uint16_t)(u >> 16);
				d[i] = tm_bf16_to_double(h[i]);
			}
			reference(d, n, &r);
			CU_ASSERT_EQUAL(tm_stats_compute(&t, h, n, TM_DT_BF16, 2), TM_OK);
			check_against(&t, &r, 1e-2);
			free(f);
			free(h);
			free(d);
		}
	}
}

/*
 * Windows the fine counters cannot fold take the exact pass: a tensor of
 * f32 subnormals only, f64 ones far below 2^-126 and above 2^128, and
 * every bf16 pattern.
 */
static void test_log2_exact_pass(void)
{
	float f[40];
	double d[40], v[40];
	uint16_t *h = malloc(65536 * sizeof(*h));
	double *hd = malloc(65536 * sizeof(*hd));
	struct tm_tensor t;
	struct ref r;
	uint32_t i;

	for (i = 0; i < 40; i++) {
		uint32_t bits = (uint32_t)(rnd() % 0x7fffff) + 1;      /* subnormal */

		memcpy(&f[i], &bits, 4);
		if (i % 3 == 0)
			f[i] = -f[i];
		if (i == 7)
			f[i] = 0;
		d[i] = f[i];
	}
	reference(d, 40, &r);
	CU_ASSERT(r.top < -111);
	CU_ASSERT_EQUAL(tm_stats_compute(&t, f, 40, TM_DT_F32, 2), TM_OK);
	check_against(&t, &r, 1e-6);

	for (i = 0; i < 40; i++)
		v[i] = ldexp(1 + rnd_unit(), -(int)(rnd() % 60) - 1040) * ((i & 1) ? -1 : 1);
	v[5] = 4.9406564584124654e-324;         /* the smallest subnormal */
	reference(v, 40, &r);
	CU_ASSERT_EQUAL(tm_stats_compute(&t, v, 40, TM_DT_F64, 2), TM_OK);
	check_against(&t, &r, 1e-6);
	for (i = 0; i < 40; i++)
		v[i] = ldexp(1 + rnd_unit(), (int)(rnd() % 40) + 120);
	reference(v, 40, &r);
	CU_ASSERT(r.top > 128);
	CU_ASSERT_EQUAL(tm_stats_compute(&t, v, 40, TM_DT_F64, 2), TM_OK);
	check_against(&t, &r, 1e-6);

	for (i = 0; i < 65536; i++) {
		h[i] = (uint16_t)i;
		hd[i] = tm_bf16_to_double((uint16_t)i);
	}
	/* (sums of values up to 3e38 of both signs cancel: only the bins) */
	reference(hd, 65536, &r);
	CU_ASSERT_EQUAL(tm_stats_compute(&t, h, 65536, TM_DT_BF16, 2), TM_OK);
	CU_ASSERT_EQUAL(t.hist_hi, r.top);
	CU_ASSERT(!memcmp(t.hist, r.hist, sizeof(t.hist)));
	free(h);
	free(hd);
}

/* Every element zero: the window is 2^-15 .. 2^0, all in the middle bins. */
static void test_log2_zeros(void)
{
	float f[20];
	struct tm_tensor t;
	int i;

	for (i = 0; i < 20; i++)
		f[i] = i < 5 ? -0.0f : 0.0f;
	CU_ASSERT_EQUAL(tm_stats_compute(&t, f, 20, TM_DT_F32, 2), TM_OK);
	CU_ASSERT_EQUAL(t.have_hist, TM_HIST_LOG2);
	CU_ASSERT_EQUAL(t.hist_hi, 0);
	CU_ASSERT_EQUAL(t.hist_lo, -15);
	CU_ASSERT_EQUAL(t.hist[TM_HIST_BINS / 2 - 1], 5);
	CU_ASSERT_EQUAL(t.hist[TM_HIST_BINS / 2], 15);
}

static void test_bad_args(void)
{
	float f[2] = { 1, 2 };
	struct tm_tensor t;

	t.have = 5;
	CU_ASSERT_EQUAL(tm_stats_compute(&t, f, 1, TM_DT_C64, 1), TM_ERR_UNSUPPORTED);
	CU_ASSERT_EQUAL(t.have, 0);
	CU_ASSERT_EQUAL(tm_stats_compute(&t, f, 1, TM_DT_C128, 1), TM_ERR_UNSUPPORTED);
	CU_ASSERT_EQUAL(tm_stats_compute(&t, f, 1, TM_DT_UNKNOWN, 1), TM_ERR_INVALID_ARG);
	CU_ASSERT_EQUAL(tm_stats_compute(&t, f, 1, TM_DT__COUNT, 1), TM_ERR_INVALID_ARG);
	CU_ASSERT_EQUAL(tm_stats_compute(&t, f, 1, TM_DT_F32, -1), TM_ERR_INVALID_ARG);
	CU_ASSERT_EQUAL(tm_stats_compute(&t, NULL, 1, TM_DT_F32, 1), TM_ERR_INVALID_ARG);
	CU_ASSERT_EQUAL(tm_stats_compute(NULL, f, 1, TM_DT_F32, 1), TM_ERR_INVALID_ARG);
}

/*
 * The kernels of each instruction set this CPU runs (the whole suite runs
 * once per set) agree with each other: counts, min, max, abs_max and the
 * histogram exactly, mean, l2 and std to their last bits only, on data
 * with NaN, Inf, zeros and subnormals in blocks and tails.
 */
static void test_isas_agree(void)
{
	static const char *const isas[] = { "avx512", "avx2", "sse2", "generic" };
	static const size_t sizes[] = { 5, 64, 67, 1000, 8195 };
	const char *was = tm_stats_isa();
	float *f = malloc(8195 * sizeof(float));
	size_t si, i, k;
	int level, s, b;

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	for (si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		size_t n = sizes[si];

		for (i = 0; i < n; i++)
			f[i] = (float)(rnd_unit() * 6 - 2);
		f[n / 2] = 0;
		f[n - 1] = 1e-42f;              /* subnormal */
		if (n > 60) {
			f[3] = NAN;
			f[40] = -INFINITY;
		}
		for (level = 1; level <= 2; level++) {
			struct tm_tensor ref, t;
			int have_ref = 0;

			for (k = 0; k < sizeof(isas) / sizeof(isas[0]); k++) {
				if (tm_stats_use_isa(isas[k]) != TM_OK)
					continue;
				CU_ASSERT_EQUAL(tm_stats_compute(have_ref ? &t : &ref, f, n,
								 TM_DT_F32, level), TM_OK);
				if (!have_ref) {
					have_ref = 1;
					continue;
				}
				CU_ASSERT_EQUAL(t.have, ref.have);
				for (s = 0; s < TM_STAT__COUNT; s++) {
					double a = ref.stat[s], c = t.stat[s];

					if (s == TM_STAT_MEAN || s == TM_STAT_L2 || s == TM_STAT_STD) {
						CU_ASSERT(fabs(a - c) <= 1e-12 * fabs(a) + 1e-300);
					} else {
						CU_ASSERT_EQUAL(memcmp(&a, &c, sizeof(a)), 0);
					}
				}
				CU_ASSERT_EQUAL(t.have_hist, level >= 2 ? TM_HIST_LOG2 : 0);
				CU_ASSERT_EQUAL(t.have_hist, ref.have_hist);
				for (b = 0; t.have_hist && b < TM_HIST_BINS; b++)
					CU_ASSERT_EQUAL(t.hist[b], ref.hist[b]);
			}
		}
	}
	free(f);
	CU_ASSERT_EQUAL(tm_stats_use_isa(was), TM_OK);
	CU_ASSERT_EQUAL(tm_stats_use_isa("mmx"), TM_ERR_INVALID_ARG);
}

int main(void)
{
	static const char *const isas[] = { "avx512", "avx2", "sse2", "generic" };
	static const struct tm_test_case cases[] = {
		TM_TEST(test_f32),
		TM_TEST(test_f32_unaligned),
		TM_TEST(test_f64),
		TM_TEST(test_f64_huge),
		TM_TEST(test_std_precision),
		TM_TEST(test_f16_conversions),
		TM_TEST(test_f16_all_patterns),
		TM_TEST(test_bf16),
		TM_TEST(test_fp8),
		TM_TEST(test_integers),
		TM_TEST(test_bool),
		TM_TEST(test_empty),
		TM_TEST(test_all_nan),
		TM_TEST(test_late_finite),
		TM_TEST(test_levels),
		TM_TEST(test_level1_matches_level2),
		TM_TEST(test_log2_wide),
		TM_TEST(test_log2_exact_pass),
		TM_TEST(test_log2_zeros),
		TM_TEST(test_bad_args),
		TM_TEST(test_isas_agree),
		{ NULL, NULL }
	};
	char name[32];
	size_t k;
	int fails = 0, ran = 0;

	/* every test on the kernels of each instruction set the CPU runs */
	for (k = 0; k < sizeof(isas) / sizeof(isas[0]); k++) {
		if (tm_stats_use_isa(isas[k]) != TM_OK)
			continue;
		snprintf(name, sizeof(name), "stats (%s)", isas[k]);
		fails |= tm_test_run(name, cases);
		ran++;
	}
	return ran ? fails : 99;
}
