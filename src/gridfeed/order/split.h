// Megatron's --split and --data-path arithmetic, reproduced bit for bit (IEEE doubles in
// Python's order of operations, numpy's pairwise sum, Python's round-half-to-even).
// Pure functions; thread safe.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gridfeed/core/status.h"

namespace gridfeed::order {

enum class Split : int { kTrain = 0, kValid = 1, kTest = 2 };
inline constexpr std::array<const char*, 3> kSplitNames = {"train", "valid", "test"};
// The split of that name (the option table admits only these three); train otherwise.
inline Split SplitNamed(std::string_view name) {
  for (int i = 0; i < 3; ++i) {
    if (name == kSplitNames[i]) return static_cast<Split>(i);
  }
  return Split::kTrain;
}

using Bookend = std::optional<std::pair<double, double>>;
using SplitMatrix = std::array<Bookend, 3>;

// Python float(): surrounding whitespace, '_' between digits, nan/inf, exponents.
std::optional<double> ParsePythonFloat(const std::string& text);

// numpy.sum of a float64 vector (pairwise summation).
double NumpySum(const std::vector<double>& values);
// Megatron's normalize(): each value divided by NumpySum (NaNs when the sum is 0).
std::vector<double> Normalize(const std::vector<double>& values);

// Runs of [.0-9] converted with float(), padded with zeros to 3, then normalised. A negative
// weight ("1,-2,3", which Megatron would read as 2) is InvalidArgument naming --split.
Result<std::array<double, 3>> ParseAndNormalizeSplit(const std::string& split);
// Bookends from running sums; an empty range is absent. With `b`, the intersection.
SplitMatrix SplitVectorToMatrix(const std::array<double, 3>& a,
                                const std::optional<std::array<double, 3>>& b = std::nullopt);
// The split matrix of --split `split` (empty: Megatron's legacy "969, 30, 1", and a warning
// appended to `warnings`). InvalidArgument naming --split when it sums to 0.
Result<SplitMatrix> SplitMatrixOf(const std::string& split, std::vector<std::string>* warnings);
// [round(begin * n), round(end * n)) with round-half-to-even.
std::pair<int64_t, int64_t> BookendToRange(const std::pair<double, double>& bookend,
                                           int64_t num_elements);

// A parsed --data-path token list.
struct Blend {
  std::vector<std::string> prefixes;
  std::optional<std::vector<double>> weights;  // raw (not normalised); none = infer
};
// Odd count: all prefixes. Even: (weight, prefix) pairs; if a weight does not parse as a
// float, all tokens are prefixes, as long as every later weight also fails (Megatron's
// partly consumed iterator; otherwise InvalidArgument).
Result<Blend> ParseDataPath(const std::vector<std::string>& tokens);

// A weighted blend's weights, normalised once (what the builder sizes the sources with).
// InvalidArgument naming --data-path for a weight that is not finite and > 0, or weights whose
// sum overflows.
Result<std::vector<double>> NormalizedBlendWeights(const std::vector<double>& raw);

// Samples each mid-level dataset of a weighted blend is asked for:
// ceil(ceil(size * w) * (1 + surplus)), size 0 stays 0; none stays none.
std::vector<std::array<std::optional<int64_t>, 3>> SizePerSplitPerDataset(
    const std::vector<double>& normalized_weights,
    const std::array<std::optional<int64_t>, 3>& target_size_per_split, double surplus);

}  // namespace gridfeed::order
