// numpy-compatible randomness, bit for bit:
// - NumpyRandomState: numpy.random.RandomState(seed) (legacy MT19937) and its shuffle();
// - TorchRandperm: torch.randperm(n, generator=torch.Generator().manual_seed(seed)) on CPU.
// Local; an object is used by one thread at a time.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "gridfeed/core/check.h"

namespace gridfeed::order {

// The swaps of a Fisher-Yates shuffle whose targets come one at a time from `next()`:
// swap(k, target k) for k < count, each target prefetched (`prefetch(target)`) kAhead swaps
// before its swap, in a window that slides one swap at a time, so kAhead misses stay in flight.
// (Blocks of kAhead, prefetched then swapped, waited a whole miss at each block's start:
// 146.5M documents, 2.9-4.5 s of swaps against 2.2-2.9 s, alternated on one VM.) `next()` is
// called exactly `count` times, in order.
template <typename Target, size_t kAhead = 32, typename Next, typename Prefetch, typename Swap>
void PrefetchedSwaps(size_t count, Next next, Prefetch prefetch, Swap swap) {
  static_assert(kAhead > 0 && (kAhead & (kAhead - 1)) == 0);  // slots are k % kAhead
  Target ring[kAhead];  // the target of swap k in slot k % kAhead
  const size_t lead = std::min(kAhead, count);
  for (size_t k = 0; k < lead; ++k) {
    ring[k] = next();
    prefetch(ring[k]);
  }
  size_t k = 0;
  for (; k + kAhead < count; ++k) {
    const Target target = ring[k % kAhead];
    ring[k % kAhead] = next();
    prefetch(ring[k % kAhead]);
    swap(k, target);
  }
  for (; k < count; ++k) swap(k, ring[k % kAhead]);
}

// MT19937 (the output of std::mt19937), generating and tempering 624 words at a time (with
// AVX2 where the CPU has it: the same words), measured about 2x faster than std::mt19937 one
// call at a time.
class Mt19937 {
 public:
  explicit Mt19937(uint32_t seed);  // init_genrand, as numpy's integer seeding
  uint32_t operator()() {
    if (pos_ == kN) Generate();
    return out_[pos_++];
  }
  // The words generated and not yet taken, at least one (a block is generated when none is
  // left); Take(n) consumes the first n of them. For loops over many words, which then need no
  // end-of-block test (nor a reload of the position after each store) per word.
  std::span<const uint32_t> Pending() {
    if (pos_ == kN) Generate();
    return {out_ + pos_, static_cast<size_t>(kN - pos_)};
  }
  void Take(size_t n) {
    GRIDFEED_CHECK(n <= static_cast<size_t>(kN - pos_));
    pos_ += static_cast<int>(n);
  }

  // Whether blocks are generated with AVX2; tests turn it off (and on only where supported)
  // to compare both with std::mt19937. Process-wide.
  static bool VectorGenerate();
  static void SetVectorGenerateForTesting(bool on);

 private:
  static constexpr int kN = 624;
  void Generate();
  uint32_t state_[kN];
  uint32_t out_[kN];
  int pos_ = kN;
};

class NumpyRandomState {
 public:
  explicit NumpyRandomState(uint32_t seed) : mt_(seed) {}

  uint32_t Next32() { return mt_(); }
  // Two draws, the first one becomes the high half (numpy's mt19937_next64).
  uint64_t Next64() {
    const uint64_t hi = Next32();
    return (hi << 32) | Next32();
  }
  // A value in [0, max] by masked rejection (numpy's random_interval): 32-bit draws while
  // max fits in 32 bits, 64-bit draws above.
  uint64_t Interval(uint64_t max);
  // The same for max < 2^32 (always 32-bit draws), inline for the hot shuffle loops.
  uint32_t Interval32(uint32_t max) {
    if (max == 0) return 0;
    const uint32_t mask = 0xffffffffu >> __builtin_clz(max);
    uint32_t value;
    while ((value = (Next32() & mask)) > max) {
    }
    return value;
  }

  // out[k] = Interval32(max - k) for k < count: the same draws, in the same order, without a
  // branch per draw (a rejected draw is written, then overwritten). REQUIRES: count <= max.
  void FillIntervals32(uint32_t max, uint32_t* out, size_t count) {
    size_t k = 0;
    // While the bound keeps its bit length the mask is fixed, and a draw is kept when it is at
    // most max - k: one add and one compare from a draw to the next.
    while (k < count) {
      const uint32_t mask = 0xffffffffu >> __builtin_clz(max);
      const uint32_t floor = (mask >> 1) + 1;  // the smallest bound with this mask
      const size_t run = std::min<size_t>(count - k, max - floor + 1);
      const size_t end = k + run;
      const uint32_t top = max + static_cast<uint32_t>(k);  // bound at draw j: top - j
      while (k < end) {
        // A word gives at most one value, so end - k words cannot overshoot `end`.
        const std::span<const uint32_t> words = mt_.Pending();
        const size_t take = std::min(words.size(), end - k);
        for (size_t j = 0; j < take; ++j) {
          const uint32_t value = words[j] & mask;
          out[k] = value;
          k += value <= top - static_cast<uint32_t>(k) ? 1 : 0;
        }
        mt_.Take(take);
      }
      max = top - static_cast<uint32_t>(k);
    }
  }

  // RandomState.shuffle of a 1-D array: for i = n-1 .. 1, swap x[i] with x[Interval(i)].
  // The permutation does not depend on T. Swap targets are drawn and prefetched a fixed
  // number of swaps ahead, which hides the random-access latency of large arrays.
  template <typename T>
  void Shuffle(std::span<T> x) {
    size_t i = x.size();
    ShuffleSome(x, i, x.size());
  }
  // Shuffle a part at a time: continues the shuffle of x at position `i` (x.size() to begin)
  // for at most `swaps` swaps, and leaves `i` where it stopped (done at i <= 1). The draws are
  // Shuffle's, in its order, however the calls split it.
  template <typename T>
  void ShuffleSome(std::span<T> x, size_t& i, size_t swaps);

 private:
  Mt19937 mt_;
};

// torch.randperm(n) with a CPU generator seeded with `seed` (forward Fisher-Yates with a
// 32-bit draw modulo the remaining length, the branch torch uses below 214,748,364).
std::vector<int64_t> TorchRandperm(int64_t n, uint64_t seed);

template <typename T>
void NumpyRandomState::ShuffleSome(std::span<T> x, size_t& i, size_t swaps) {
  // Positions i-1 .. 1 get swapped, in that order, for at most `swaps` of them.
  const size_t count = std::min(i > 1 ? i - 1 : 0, swaps);
  if (count == 0) return;
  const size_t top = i - 1;  // a local: stores through x could alias `i`
  size_t drawn = 0;
  PrefetchedSwaps<size_t>(
      count,
      [this, top, &drawn] {
        const size_t max = top - drawn++;
        return max <= 0xffffffffu ? size_t{Interval32(static_cast<uint32_t>(max))}
                                  : static_cast<size_t>(Interval(max));
      },
      [&x](size_t target) { __builtin_prefetch(&x[target], 1); },
      [&x, top](size_t k, size_t target) { std::swap(x[top - k], x[target]); });
  i -= count;
}

}  // namespace gridfeed::order
