// What `gridfeed bench` reads out of a data order's table image (order/pipeline.h) besides the
// order's own view: the bytes of its tables, and the memcpy floor of sample assembly.
//
// The floor is the least any reader must do for a sample: copy the sample's token pieces out
// of the token store's mapping and widen them to int64. It walks the very pieces Read()
// assembles: for Megatron-format images (Megatron's order, scheduled mixtures) it follows the
// image's tables; an OLMo instance is one contiguous run of a token file, located by the
// SampleRecord Read() returned. The floor opens its own mappings of the token stores.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "gridfeed/config/options.h"
#include "gridfeed/core/status.h"
#include "gridfeed/order/sample_record.h"
#include "gridfeed/order/split.h"

namespace gridfeed::app {

class AssemblyFloor {
 public:
  virtual ~AssemblyFloor() = default;
  // Copies and widens sample `position` of `split`, whose Read() returned `record`; returns a
  // value that depends on the copied tokens (so the copy cannot be optimised away). REQUIRES:
  // the position and record of a Read() of the image this floor was made for. Not thread safe.
  virtual int64_t Copy(order::Split split, int64_t position, const order::SampleRecord& record) = 0;
  // Tokens copied per sample (Megatron: seq_length + 1 with the extra token).
  virtual int64_t tokens_per_sample() const = 0;
};

// `options` as the pipeline that wrote `image` was given them (DP size resolved); `image` must
// outlive the floor. DataLoss for an image that does not parse; the token stores' errors.
Result<std::unique_ptr<AssemblyFloor>> MakeAssemblyFloor(const config::JobOptions& options,
                                                         std::span<const std::byte> image);

// Bytes of the tables the image holds (the arrays, without the image's header): Megatron's
// document, sample, shuffle and blend indexes; OLMo's one permutation per epoch.
Result<uint64_t> TableBytesOf(const config::JobOptions& options, std::span<const std::byte> image);

}  // namespace gridfeed::app
