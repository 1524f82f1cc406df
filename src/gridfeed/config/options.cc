#include "gridfeed/config/options.h"

#include "gridfeed/core/parse.h"

namespace gridfeed::config {

void DeriveOptions(JobOptions* o) {
  if (o->data.sft && o->data.sft_context_parallel_size == 0) {
    o->data.sft_context_parallel_size = o->grid.context_parallel_size;
  }
}

Result<int64_t> ParseSampleCount(const std::string& flag, const std::string& value) {
  if (value == "none" || value == "None") return int64_t{-1};
  const auto n = ParseInt64(value);
  if (!n || *n < 0) {
    return InvalidArgument(flag + " must be a non-negative integer (below 2^63) or 'none', got '" +
                           value + "'");
  }
  return *n;
}

}  // namespace gridfeed::config
