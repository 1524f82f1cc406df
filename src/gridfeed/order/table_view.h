// The one view of Megatron-order tables, wherever they live: in a table image (a node-shared
// window on the feeder's readers) or in tables built in process (offline tools, the audit).
// Spans only; valid as long as the viewed memory. Locate() is the single place that maps a
// split's top-level position to its blend source and that source's sample. Thread safe.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gridfeed/order/gpt_tables.h"

namespace gridfeed::order {

struct BuiltDatasets;

// One mid-level dataset (a prefix's share of a split): its tables.
struct SourceView {
  std::string prefix;
  int64_t begin = 0, end = 0;  // sequence ids of the split
  int64_t samples_per_epoch = 0;
  int64_t seq_length = 0;  // tokens per sample when not the run's --seq-length (0)
  GptTablesView tables;
};

struct SplitView {
  bool blended = false;
  int64_t length = 0;
  std::vector<SourceView> sources;
  std::vector<double> weights;  // the blend's weights (empty without a blend)
  std::span<const int32_t> dataset_index;
  std::span<const int64_t> dataset_sample_index;

  // (source, sample of that source) serving top-level position p. REQUIRES 0 <= p < length.
  std::pair<int, int64_t> Locate(int64_t p) const {
    if (!blended) return {0, p};
    return {dataset_index[p], dataset_sample_index[p]};
  }
};

struct TableView {
  std::array<std::optional<SplitView>, 3> splits;
  // Every distinct data prefix, in order of first use.
  std::vector<std::string> prefixes;
};

// A view over tables built in process; `built` must outlive it.
TableView ViewOf(const BuiltDatasets& built);

}  // namespace gridfeed::order
