#include "gridfeed/order/numpy_random.h"

namespace gridfeed::order {

Mt19937::Mt19937(uint32_t seed) {
  state_[0] = seed;
  for (int i = 1; i < kN; ++i) {
    state_[i] = 1812433253u * (state_[i - 1] ^ (state_[i - 1] >> 30)) + static_cast<uint32_t>(i);
  }
}

void Mt19937::Generate() {
  constexpr int kM = 397;
  auto twist = [](uint32_t upper, uint32_t lower, uint32_t far) {
    const uint32_t y = (upper & 0x80000000u) | (lower & 0x7fffffffu);
    return far ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
  };
  int k = 0;
  for (; k < kN - kM; ++k) state_[k] = twist(state_[k], state_[k + 1], state_[k + kM]);
  for (; k < kN - 1; ++k) state_[k] = twist(state_[k], state_[k + 1], state_[k + kM - kN]);
  state_[kN - 1] = twist(state_[kN - 1], state_[0], state_[kM - 1]);
  for (int i = 0; i < kN; ++i) {
    uint32_t z = state_[i];
    z ^= z >> 11;
    z ^= (z << 7) & 0x9d2c5680u;
    z ^= (z << 15) & 0xefc60000u;
    z ^= z >> 18;
    out_[i] = z;
  }
  pos_ = 0;
}

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
  Mt19937 mt(static_cast<uint32_t>(seed));
  for (int64_t i = 0; i + 1 < n; ++i) {
    const uint64_t z = mt() % static_cast<uint64_t>(n - i);
    std::swap(r[i], r[i + static_cast<int64_t>(z)]);
  }
  return r;
}

}  // namespace gridfeed::order
