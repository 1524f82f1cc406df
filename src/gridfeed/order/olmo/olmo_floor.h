// `gridfeed bench`'s assembly floor and table size for OLMo's order: an instance is one
// contiguous run of a token file, located by the SampleRecord Read() returned.
#pragma once

#include <memory>
#include <span>

#include "gridfeed/order/assembly_floor.h"

namespace gridfeed::order {

Result<std::unique_ptr<AssemblyFloor>> OlmoFloor(const config::JobOptions& options,
                                                 std::span<const std::byte> image);
// One permutation per epoch.
Result<uint64_t> OlmoTableBytes(const config::JobOptions& options,
                                std::span<const std::byte> image);

}  // namespace gridfeed::order
