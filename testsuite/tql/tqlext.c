/*
 * tqlext.c -- a tiny shared object for the TQL extension-function tests
 * (`tql-function load`): built by `make check`, loaded by test_tql through
 * libffi.  One function per argument/return type TQL offers.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

double tqlext_hypot(double a, double b);
int64_t tqlext_add(int64_t a, int64_t b);
bool tqlext_odd(int64_t a);
double tqlext_pick(bool which, double a, double b);
double tqlext_answer(void);

double tqlext_hypot(double a, double b)
{
	return sqrt(a * a + b * b);
}

int64_t tqlext_add(int64_t a, int64_t b)
{
	return a + b;
}

bool tqlext_odd(int64_t a)
{
	return a % 2 != 0;
}

double tqlext_pick(bool which, double a, double b)
{
	return which ? a : b;
}

double tqlext_answer(void)
{
	return 42;
}
