// The OLMo pipeline's own pieces of its plan (olmo_pipeline.h has the public ones): what
// PlanOlmoOrder and an image's view share. Pure functions; thread safe.
#pragma once

#include <cstdint>

#include "gridfeed/config/options.h"
#include "gridfeed/core/status.h"
#include "gridfeed/order/olmo/olmo_pipeline.h"

namespace gridfeed::order::olmo_plan {

// Sources for accounting: data.datasets labels, else the paths (a repeated path is one source).
void AssignSources(const config::DataOptions& d, OlmoPlan* plan);
// The geometry without the files (what an image's header restores): epochs, lengths, the
// restart. InvalidArgument naming the flag.
Status FinishPlan(const config::JobOptions& o, OlmoPlan* p);
// The plan's geometry from the options alone, files excepted.
OlmoPlan GeometryOf(const config::JobOptions& o);
// The seed of epoch offset `e`'s shuffle.
SeedWords EpochSeed(const OlmoPlan& p, int64_t e);

}  // namespace gridfeed::order::olmo_plan
