#include "gridfeed/config/options.h"

#include <algorithm>

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

Result<int> TableProducers(const FeedOptions& feed, int num_nodes) {
  if (feed.table_producers == "auto") return std::max(num_nodes, 1);
  const auto n = ParseInt64(feed.table_producers);
  if (!n || *n < 1 || *n > (int64_t{1} << 20)) {
    return InvalidArgument("--table-producers must be auto or a count in [1, 2^20], got '" +
                           feed.table_producers + "'");
  }
  return static_cast<int>(std::min<int64_t>(*n, std::max(num_nodes, 1)));
}

}  // namespace gridfeed::config
