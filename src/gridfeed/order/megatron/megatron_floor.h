// `gridfeed bench`'s assembly floor and table size for Megatron-format images (Megatron's
// order, scheduled mixtures): a sample is seq_length (+1) tokens from its sample_index row on,
// across the documents of document_index (a mixture stage's table at its own length).
#pragma once

#include <memory>
#include <span>

#include "gridfeed/order/assembly_floor.h"

namespace gridfeed::order {

Result<std::unique_ptr<AssemblyFloor>> MegatronFloor(const config::JobOptions& options,
                                                     std::span<const std::byte> image);
// Document, sample, shuffle and blend indexes.
Result<uint64_t> MegatronTableBytes(const config::JobOptions& options,
                                    std::span<const std::byte> image);

}  // namespace gridfeed::order
