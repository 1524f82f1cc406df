// --positions of `gridfeed samples`: "0:64,100,4000" -> 0..63, 100, 4000.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gridfeed/core/status.h"

namespace gridfeed::app {

// Every position is checked against the split's `length` before anything is allocated, so a
// huge range is an error, not an exhausted memory. InvalidArgument / OutOfRange name the flag.
Result<std::vector<int64_t>> ParsePositions(const std::string& spec, int64_t length);

}  // namespace gridfeed::app
