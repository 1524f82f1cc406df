#include "gridfeed/order/numpy_random.h"

namespace gridfeed::order {

uint64_t NumpyRandomState::Interval(uint64_t max) {
  if (max == 0) return 0;
  uint64_t mask = max;
  mask |= mask >> 1;
  mask |= mask >> 2;
  mask |= mask >> 4;
  mask |= mask >> 8;
  mask |= mask >> 16;
  mask |= mask >> 32;
  uint64_t value;
  if (max <= 0xffffffffULL) {
    while ((value = (Next32() & mask)) > max) {
    }
  } else {
    while ((value = (Next64() & mask)) > max) {
    }
  }
  return value;
}

std::vector<int64_t> TorchRandperm(int64_t n, uint64_t seed) {
  std::vector<int64_t> r(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < n; ++i) r[i] = i;
  std::mt19937 mt(static_cast<uint32_t>(seed));
  for (int64_t i = 0; i + 1 < n; ++i) {
    const uint64_t z = static_cast<uint32_t>(mt()) % static_cast<uint64_t>(n - i);
    std::swap(r[i], r[i + static_cast<int64_t>(z)]);
  }
  return r;
}

}  // namespace gridfeed::order
