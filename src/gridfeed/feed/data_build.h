// From the user's DataOptions to order's dataset configuration, and the table build that
// world rank 0 runs. Local; thread safe.
#pragma once

#include "gridfeed/config/data_options.h"
#include "gridfeed/core/status.h"
#include "gridfeed/order/dataset_builder.h"
#include "gridfeed/order/sample.h"

namespace gridfeed::feed {

Result<order::DatasetConfig> ToDatasetConfig(const config::DataOptions& o);
order::SampleOptions ToSampleOptions(const config::DataOptions& o, int64_t pad_id_used);
// Builds every table; logs warnings and phase times.
Result<order::BuiltDatasets> BuildFromOptions(const config::DataOptions& o);

}  // namespace gridfeed::feed
