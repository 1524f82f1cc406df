// The order fingerprint: a canonical JSON text of everything that decides the sample order and
// contents (the data options, plus each token store's sizes and the XXH3-64 of its .idx), and
// its hash. Checkpoints carry both, so a resume can say which field changed. Local.
#pragma once

#include <string>

#include "gridfeed/config/data_options.h"
#include "gridfeed/core/status.h"
#include "gridfeed/order/dataset_builder.h"

namespace gridfeed::feed {

// Canonical text for options `o` whose datasets were built into `b` (on world rank 0).
std::string CanonicalConfig(const config::DataOptions& o, const order::BuiltDatasets& b);
// Hex XXH3-64 of a canonical text.
std::string FingerprintOf(const std::string& canonical);
// Names the first differing field of two canonical texts, e.g. "seed: 1234 -> 99".
std::string DescribeChange(const std::string& before, const std::string& after);

}  // namespace gridfeed::feed
