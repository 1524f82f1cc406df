// Which JSON Lines rows each SFT split reads, as Megatron's BlendedMegatronDatasetBuilder lays
// out SFTDatasets: --split divides each file's rows (round half to even), every split must be
// given a sample count, item i of a mid-level dataset reads row begin + (i mod (end - begin)),
// and weighted blends (also per-split --train/valid/test-data-path) spread the positions with
// Megatron's blending table over mid-level datasets asked for the surplus-inflated counts.
// Differences from Megatron, each an error naming the flag instead of a late crash: a split
// without a size, an unweighted blend of several files, a split with no rows asked for samples.
//
// Pure; thread safe.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gridfeed/config/options.h"
#include "gridfeed/core/status.h"
#include "gridfeed/order/blend.h"
#include "gridfeed/order/split.h"

namespace gridfeed::order::sft {

struct SftMid {
  std::string path;            // the JSON Lines file, as --data-path names it
  int64_t begin = 0, end = 0;  // rows [begin, end) of the split
  int64_t num_samples = 0;     // its length
};

struct SftSplit {
  bool blended = false;         // a BlendedDataset on top (also with one weighted file)
  std::vector<SftMid> mids;     // one when not blended
  std::vector<double> weights;  // the BlendedDataset's (normalised)
  BlendTables blend;            // when blended
  int64_t length = 0;
};

struct SftLayout {
  std::array<std::optional<SftSplit>, 3> splits;  // none: the split is absent
  SplitMatrix split_matrix;
  std::vector<std::string> warnings;
  // The mid-level dataset and its row that serve `position`. REQUIRES: the split is present
  // and 0 <= position < its length.
  std::pair<int, int64_t> Locate(Split split, int64_t position) const;
};

// `rows_of(path)` is the number of rows of a file (the caller has opened it).
Result<SftLayout> LayoutSft(const config::DataOptions& data,
                            const std::function<int64_t(const std::string&)>& rows_of);

// Every JSON Lines file the options name, each once, in order of appearance.
Result<std::vector<std::string>> SftFiles(const config::DataOptions& data);

}  // namespace gridfeed::order::sft
