#include "gridfeed/order/blend.h"

#include <algorithm>
#include <cstddef>

#include "gridfeed/core/page_array.h"

namespace gridfeed::order {

BlendTables BuildBlendingIndices(const std::vector<double>& weights, int64_t size) {
  BlendTables t;
  ResizeOnHugePages(&t.dataset_index, static_cast<size_t>(size));
  ResizeOnHugePages(&t.dataset_sample_index, static_cast<size_t>(size));
  const size_t k_count = weights.size();
  std::vector<int64_t> counts(k_count, 0);
  for (int64_t p = 0; p < size; ++p) {
    const double q = static_cast<double>(std::max<int64_t>(p, 1));
    size_t best = 0;
    double best_error = weights[0] * q - static_cast<double>(counts[0]);
    for (size_t k = 1; k < k_count; ++k) {
      const double error = weights[k] * q - static_cast<double>(counts[k]);
      if (error > best_error) {
        best_error = error;
        best = k;
      }
    }
    t.dataset_index[p] = static_cast<int32_t>(best);
    t.dataset_sample_index[p] = counts[best];
    ++counts[best];
  }
  return t;
}

BlendTables BuildExhaustiveBlendingIndices(const std::vector<int64_t>& sizes) {
  BlendTables t;
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  std::vector<double> weights(sizes.size());
  for (size_t k = 0; k < sizes.size(); ++k) {
    weights[k] = static_cast<double>(sizes[k]) / static_cast<double>(total);
  }
  std::vector<int64_t> counts(sizes.size(), 0);
  std::vector<size_t> active;
  for (size_t k = 0; k < sizes.size(); ++k) {
    if (sizes[k] > 0) active.push_back(k);
  }
  ResizeOnHugePages(&t.dataset_index, static_cast<size_t>(total));
  ResizeOnHugePages(&t.dataset_sample_index, static_cast<size_t>(total));
  for (int64_t p = 0; p < total; ++p) {
    const double q = static_cast<double>(std::max<int64_t>(p, 1));
    size_t best_pos = 0;
    double best_error = weights[active[0]] * q - static_cast<double>(counts[active[0]]);
    for (size_t i = 1; i < active.size(); ++i) {
      const size_t k = active[i];
      const double error = weights[k] * q - static_cast<double>(counts[k]);
      if (error > best_error) {
        best_error = error;
        best_pos = i;
      }
    }
    const size_t best = active[best_pos];
    t.dataset_index[p] = static_cast<int32_t>(best);
    t.dataset_sample_index[p] = counts[best];
    if (++counts[best] == sizes[best])
      active.erase(active.begin() + static_cast<ptrdiff_t>(best_pos));
  }
  return t;
}

}  // namespace gridfeed::order
