// Writes what a pipeline's offline function produced (order/offline_output.h) into a folder:
// `gridfeed tables` and `gridfeed samples` for every pipeline.
#pragma once

#include <string>

#include "gridfeed/core/status.h"
#include "gridfeed/order/offline_output.h"

namespace gridfeed::app {

// Every array as .npy and every text under `dir` (folders made as needed; arrays written on
// two threads, each file synced as io::WriteNpy does), warnings to stderr first, then the
// output's summary line with {out} replaced by `dir`. The first error, naming the file.
Status WriteOfflineOutput(const order::OfflineOutput& output, const std::string& dir);

}  // namespace gridfeed::app
