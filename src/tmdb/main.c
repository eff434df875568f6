/* main.c -- placeholder entry point of tmdb until the CLI lands. */
#include "config.h"
#include <stdio.h>
#include "tensormorph.h"

int main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	printf("%s\n", tm_version_string());
	return 0;
}
