// Megatron's blending tables (helpers.cpp build_blending_indices and
// build_exhaustive_blending_indices): which mid-level dataset serves each top-level position
// and which of its samples. Pure; thread safe.
//
// dataset_index is kept as int32 so more than 32767 sources work (Megatron's int16 wraps);
// it is written as int16, Megatron's dtype, whenever the source count allows.
#pragma once

#include <cstdint>
#include <stop_token>
#include <vector>

namespace gridfeed::order {

struct BlendTables {
  std::vector<int32_t> dataset_index;
  std::vector<int64_t> dataset_sample_index;
};

// Greedy: at position p pick the k with the largest w_k * max(p, 1) - count_k (first on ties),
// the doubles compared exactly as helpers.cpp forms them. Equal weights are drawn as round-robin
// groups and each block of positions scans only the sources whose error can reach the largest
// (blend.cc argues why the tables are identical to scanning every source at every position):
// a small multiple of sqrt(sources) exact errors per position on uneven weights, not `sources`;
// weights that are nearly but not exactly equal leave more candidates (no worse than the scan
// asymptotically). Fewer than 96 sources, weights outside [0, 2^10] or more than 2^40
// positions take the plain scan.
// `stop`: once requested, the build returns early with unfinished tables (for a caller that
// has failed meanwhile and discards them).
BlendTables BuildBlendingIndices(const std::vector<double>& weights, int64_t size,
                                 std::stop_token stop = {});
// Exhaustive: weights from the sizes; a dataset leaves the race once all its samples are used.
BlendTables BuildExhaustiveBlendingIndices(const std::vector<int64_t>& sizes);

}  // namespace gridfeed::order
