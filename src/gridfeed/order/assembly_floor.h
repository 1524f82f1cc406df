// The memcpy floor of sample assembly, which `gridfeed bench` measures a pipeline's reads
// against: the least any reader must do for a sample, namely copy the sample's token pieces
// out of the token store's mapping and widen them to int64. A pipeline that has a floor gives
// it through its PipelineKind (registry.h); the floor walks the very pieces its Read()
// assembles and opens its own mappings of the token stores.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "gridfeed/config/options.h"
#include "gridfeed/core/status.h"
#include "gridfeed/order/sample_record.h"
#include "gridfeed/order/split.h"

namespace gridfeed::order {

class AssemblyFloor {
 public:
  virtual ~AssemblyFloor() = default;
  // Copies and widens sample `position` of `split`, whose Read() returned `record`; returns a
  // value that depends on the copied tokens (so the copy cannot be optimised away). REQUIRES:
  // the position and record of a Read() of the image this floor was made for. Not thread safe.
  virtual int64_t Copy(Split split, int64_t position, const SampleRecord& record) = 0;
  // Tokens copied per sample (Megatron: seq_length + 1 with the extra token).
  virtual int64_t tokens_per_sample() const = 0;
};

// How a kind makes its floor: `options` as the pipeline that wrote `image` was given them (DP
// size resolved); `image` must outlive the floor. DataLoss for an image that does not parse;
// the token stores' errors.
using MakeFloorFn = Result<std::unique_ptr<AssemblyFloor>> (*)(const config::JobOptions& options,
                                                               std::span<const std::byte> image);
// Bytes of the tables an image holds (its arrays, without the image's header).
using TableBytesFn = Result<uint64_t> (*)(const config::JobOptions& options,
                                          std::span<const std::byte> image);

}  // namespace gridfeed::order
