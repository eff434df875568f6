/* test_address.c -- placeholder suite. */
#include "config.h"
#include "tensormorph.h"
#include "tm-test.h"

static void test_placeholder(void)
{
	CU_ASSERT(1);
}

int main(void)
{
	static const struct tm_test_case cases[] = {
		TM_TEST(test_placeholder),
		{ NULL, NULL }
	};
	return tm_test_run("address", cases);
}
