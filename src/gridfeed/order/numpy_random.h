// numpy-compatible randomness, bit for bit:
// - NumpyRandomState: numpy.random.RandomState(seed) (legacy MT19937) and its shuffle();
// - TorchRandperm: torch.randperm(n, generator=torch.Generator().manual_seed(seed)) on CPU.
// Local; an object is used by one thread at a time.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace gridfeed::order {

class NumpyRandomState {
 public:
  // numpy's integer seeding equals std::mt19937's init_genrand.
  explicit NumpyRandomState(uint32_t seed) : mt_(seed) {}

  uint32_t Next32() { return static_cast<uint32_t>(mt_()); }
  // Two draws, the first one becomes the high half (numpy's mt19937_next64).
  uint64_t Next64() {
    const uint64_t hi = Next32();
    return (hi << 32) | Next32();
  }
  // A value in [0, max] by masked rejection (numpy's random_interval): 32-bit draws while
  // max fits in 32 bits, 64-bit draws above.
  uint64_t Interval(uint64_t max);

  // RandomState.shuffle of a 1-D array: for i = n-1 .. 1, swap x[i] with x[Interval(i)].
  // The permutation does not depend on T. Swap targets are drawn a block ahead and
  // prefetched, which hides the random-access latency of large arrays.
  template <typename T>
  void Shuffle(std::span<T> x);

 private:
  std::mt19937 mt_;
};

// torch.randperm(n) with a CPU generator seeded with `seed` (forward Fisher-Yates with a
// 32-bit draw modulo the remaining length, the branch torch uses below 214,748,364).
std::vector<int64_t> TorchRandperm(int64_t n, uint64_t seed);

template <typename T>
void NumpyRandomState::Shuffle(std::span<T> x) {
  constexpr size_t kAhead = 64;
  size_t targets[kAhead];
  size_t i = x.size();
  // Positions i-1 .. 1 get swapped, in that order.
  while (i > 1) {
    const size_t block = std::min(kAhead, i - 1);
    for (size_t k = 0; k < block; ++k) {
      targets[k] = static_cast<size_t>(Interval(i - 1 - k));
      __builtin_prefetch(&x[targets[k]], 1);
    }
    for (size_t k = 0; k < block; ++k) {
      std::swap(x[i - 1 - k], x[targets[k]]);
    }
    i -= block;
  }
}

}  // namespace gridfeed::order
