#include "gridfeed/order/cp_thd.h"

#include <string>

namespace gridfeed::order {
namespace {

// TE's binary_search over cs[1..len-1]: the first k with cs[k] > target, minus one; when no such
// k exists it returns len - 2 (the last sequence), which is what positions beyond the last
// boundary resolve to.
int64_t TeBinarySearch(int64_t target, const std::vector<int64_t>& cs) {
  int64_t left = 1;
  int64_t right = static_cast<int64_t>(cs.size()) - 1;
  while (left < right) {
    const int64_t mid = (left + right) / 2;
    if (cs[mid] <= target) {
      left = mid + 1;
    } else {
      right = mid;
    }
  }
  return left - 1;
}

}  // namespace

Result<std::vector<int32_t>> ThdPartitionedIndices(std::span<const int32_t> cu, int64_t total,
                                                   int64_t cp, int64_t rank) {
  if (cu.size() < 2) {
    return InvalidArgument(
        "thd_get_partitioned_indices: cu_seqlens needs at least 2 entries, got " +
        std::to_string(cu.size()));
  }
  if (cp <= 0 || rank < 0 || rank >= cp) {
    return InvalidArgument("thd_get_partitioned_indices: rank " + std::to_string(rank) +
                           " outside [0, " + std::to_string(cp) + ")");
  }
  if (total <= 0 || total % (2 * cp) != 0) {
    return InvalidArgument("thd_get_partitioned_indices: total " + std::to_string(total) +
                           " must be positive and divisible by 2*cp = " + std::to_string(2 * cp));
  }
  std::vector<int64_t> cs(cu.size());
  for (size_t k = 0; k < cu.size(); ++k) {
    // TE device-asserts this (compiled out in release); we refuse instead of producing garbage.
    if (cu[k] % (2 * cp) != 0) {
      return InvalidArgument("thd_get_partitioned_indices: cu_seqlens[" + std::to_string(k) +
                             "] = " + std::to_string(cu[k]) +
                             " not divisible by 2*cp = " + std::to_string(2 * cp));
    }
    cs[k] = cu[k] / cp;
  }
  const int64_t local = total / cp;
  std::vector<int32_t> out(static_cast<size_t>(local));
  for (int64_t t = 0; t < local; ++t) {
    const int64_t j = TeBinarySearch(t, cs);
    const int64_t half = (cs[j + 1] - cs[j]) / 2;
    const int64_t u = t - cs[j];
    // The kernel's form: front chunk r, back chunk 2C-1-r (u already counts the front half).
    const int64_t chunk = u < half ? rank : 2 * (cp - 1) - rank;
    out[static_cast<size_t>(t)] = static_cast<int32_t>(u + cs[j] * cp + half * chunk);
  }
  return out;
}

}  // namespace gridfeed::order
