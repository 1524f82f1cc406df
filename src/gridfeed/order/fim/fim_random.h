// The random draws of Megatron's GPTFIMDataset, bit for bit: numpy 1.24's legacy
// RandomState(seed) methods `binomial(1, p)` and `randint(0, high, size=2)` on MT19937
// (design: shared/design/megatron-sft-fim.md part B, "numpy 1.24 draws"). One object is one
// dataset object's stream; an object is used by one thread at a time.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "gridfeed/order/numpy_random.h"

namespace gridfeed::order::fim {

// One call on the stream, as the golden rng_trace.jsonl records it.
struct FimDraw {
  enum Kind { kBinomial, kRandint } kind = kBinomial;
  double p = 0;                     // binomial: the probability
  int64_t high = 0;                 // randint: the exclusive upper bound
  std::array<int64_t, 2> values{};  // binomial: values[0]; randint: both, as drawn
  bool operator==(const FimDraw&) const = default;
};

class FimRandom {
 public:
  explicit FimRandom(uint32_t seed) : rs_(seed) {}

  // numpy's legacy double: (a >> 5) * 2^26 + (b >> 6), over 2^53, from two 32-bit draws.
  double NextDouble();
  // legacy binomial(1, p) by inversion; every call consumes at least one double, also for
  // p = 0 or 1. REQUIRES 0 <= p <= 1.
  int64_t Binomial1(double p);
  // randint(0, high, size=2) (int64, masked rejection), values as drawn (unsorted); both 0 and
  // nothing drawn when high == 1. REQUIRES high >= 1.
  std::array<int64_t, 2> RandInt2(int64_t high);

  // When set, every call is appended here (tests, debugging). Not owned.
  void set_trace(std::vector<FimDraw>* trace) { trace_ = trace; }

 private:
  int64_t Inversion(double p);
  NumpyRandomState rs_;
  std::vector<FimDraw>* trace_ = nullptr;
};

}  // namespace gridfeed::order::fim
