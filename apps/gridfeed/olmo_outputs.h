// What `gridfeed tables` and `gridfeed samples` write for an OLMo configuration, in the layout
// of OLMo's own files and of the golden cases: global_indices.npy + summary.json, and the
// fields of dataset[i] as .npy files + metadata.json. Offline; not thread safe.
#pragma once

#include <string>

#include "gridfeed/config/options.h"
#include "gridfeed/core/status.h"

namespace gridfeed::app {

// DIR/global_indices.npy (uint32, OLMo's order for the configured epoch and DP size) and
// DIR/summary.json.
Status WriteOlmoTables(const config::JobOptions& o, const std::string& out);
// `spec`: instance indices "A:B" (B exclusive) or single ones, negative from the end.
Status WriteOlmoSamples(const config::JobOptions& o, const std::string& spec,
                        const std::string& out);

}  // namespace gridfeed::app
