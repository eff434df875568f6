/*
 * tm-test.h -- the few lines every CUnit suite shares: run the registered
 * suites, print CUnit's summary, and exit non-zero on any failure so that
 * automake's test driver counts it.
 */
#ifndef TM_TEST_H
#define TM_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <CUnit/Basic.h>

#define TM_TEST(fn) { #fn, fn }

struct tm_test_case {
	const char *name;
	void (*fn)(void);
};

/* Registers one suite from a NULL-terminated table and runs everything. */
static inline int tm_test_run(const char *suite, const struct tm_test_case *cases)
{
	CU_pSuite s;
	unsigned fails;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 99;
	s = CU_add_suite(suite, NULL, NULL);
	if (!s)
		return 99;
	for (; cases->name; cases++)
		if (!CU_add_test(s, cases->name, cases->fn))
			return 99;
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	fails = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	return fails ? 1 : 0;
}

#endif /* TM_TEST_H */
