// The one view of Megatron-order tables, wherever they live: in a table image (a node-shared
// window on the feeder's readers) or in tables built in process (offline tools, the audit).
// Spans only; valid as long as the viewed memory. Locate() is the single place that maps a
// split's top-level position to its blend source and that source's sample. Thread safe.
#pragma once

#include <algorithm>
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
  // A node image (node_image.h) holds only some positions, in runs: run r holds positions
  // [run_begin[r], run_begin[r] + run_index[r + 1] - run_index[r]) at indexes from
  // run_index[r]; dataset_index, dataset_sample_index and each source's tables are indexed by
  // that index. A whole image (held_only false) holds every position, indexed by itself.
  bool held_only = false;
  std::span<const int64_t> run_begin;     // sorted; [runs]
  std::span<const int64_t> run_index;     // [runs + 1]
  std::span<const int64_t> held_sample;   // blended node image: each held position's sample
  std::span<const int32_t> source_index;  // node image: the whole dataset_index when kept

  // The index of position p here; -1 when not held.
  int64_t IndexOf(int64_t p) const {
    if (!held_only) return 0 <= p && p < length ? p : -1;
    const auto it = std::upper_bound(run_begin.begin(), run_begin.end(), p);
    if (it == run_begin.begin()) return -1;
    const size_t r = static_cast<size_t>(it - run_begin.begin()) - 1;
    const int64_t i = run_index[r] + (p - run_begin[r]);
    return i < run_index[r + 1] ? i : -1;
  }
  bool Holds(int64_t p) const { return IndexOf(p) >= 0; }
  // (source, row of that source's tables here) serving top-level position p; on a whole image
  // the row is the source's own sample. REQUIRES Holds(p).
  std::pair<int, int64_t> Locate(int64_t p) const {
    if (held_only) p = IndexOf(p);
    if (!blended) return {0, p};
    return {dataset_index[p], dataset_sample_index[p]};
  }
  // The source's own sample serving p (what records name). REQUIRES Holds(p).
  int64_t SourceSample(int64_t p) const {
    if (!held_only) return Locate(p).second;
    if (!blended) return p;
    return held_sample[IndexOf(p)];
  }
  // The source serving p, for any 0 <= p < length on a whole image or a node image that kept
  // source_index; else REQUIRES Holds(p).
  int SourceAt(int64_t p) const {
    if (!blended) return 0;
    if (!source_index.empty()) return source_index[p];
    return Locate(p).first;
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
