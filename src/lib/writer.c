/* writer.c -- placeholder until implemented. */
#include "config.h"
#include "tm-internal.h"
