/*
 * tensormorph.h -- the public interface of libtensormorph.
 *
 * One include for the whole library: the event model, addresses, the record
 * encoding and .tmrun files, wire framing, stats and TQL.  Link with
 * `pkg-config --libs tensormorph`.
 */
#ifndef TENSORMORPH_H
#define TENSORMORPH_H

#include "tm-types.h"
#include "tm-address.h"
#include "tm-tmrun.h"
#include "tm-wire.h"
#include "tm-stats.h"
#include "tm-tql.h"
#include "tm-recorder.h"
#include "tm-breakpoint.h"
#include "tm-server.h"
#include "tm-manifest.h"
#include "tm-compare.h"

#endif /* TENSORMORPH_H */
