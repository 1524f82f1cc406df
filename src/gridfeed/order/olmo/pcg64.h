// numpy's Generator(PCG64(seed)).shuffle, bit for bit (numpy 1.17 .. 2.x): SeedSequence's
// entropy pool, PCG64 (XSL-RR 128/64) seeding, step and output, the masked-rejection bounded
// draw (random_interval, not Lemire) and the Fisher-Yates walk. OLMo's only randomness.
// Values; an object is used by one thread at a time.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gridfeed/core/status.h"

namespace gridfeed::order {

// A non-negative integer of any size as 32-bit words, least significant first, at least one
// word (SeedSequence's entropy; 0 -> {0}). The number of words is part of the seed.
using SeedWords = std::vector<uint32_t>;
SeedWords SeedWordsOf(uint64_t value);
// Decimal text ("6198", "340282366920938463463374607431768211457"); InvalidArgument otherwise.
Result<SeedWords> ParseSeedWords(const std::string& decimal);
// value + addend (OLMo's seed + epoch on an unbounded integer).
SeedWords AddToSeed(const SeedWords& value, uint64_t addend);
std::string SeedText(const SeedWords& value);  // decimal

// SeedSequence(entropy) with pool size 4 and no spawn key.
class SeedSequence {
 public:
  explicit SeedSequence(const SeedWords& entropy);
  const uint32_t* pool() const { return pool_; }
  // generate_state(n_words, uint32).
  std::vector<uint32_t> GenerateState32(int n_words) const;

 private:
  uint32_t pool_[4];
};

class Pcg64 {
 public:
  explicit Pcg64(const SeedWords& seed);  // PCG64(seed) through SeedSequence
  Pcg64(unsigned __int128 initstate, unsigned __int128 initseq);
  unsigned __int128 state() const { return state_; }
  unsigned __int128 inc() const { return inc_; }
  uint64_t Next64();  // steps first, then XSL-RR output
  uint32_t Next32();  // low half of a 64-bit output, then its buffered high half
  // A value in [0, max] by masked rejection on 32-bit draws (max < 2^32) or 64-bit draws.
  uint64_t Interval(uint64_t max);

 private:
  unsigned __int128 state_ = 0;
  unsigned __int128 inc_ = 0;
  bool has_uint32_ = false;
  uint32_t uinteger_ = 0;
};

// Generator.shuffle of a 1-D array (for i = n-1 .. 1: swap x[i], x[Interval(i)]); the
// generator's state carries over (a buffered half included) as numpy's does. Swap targets are
// drawn ahead and prefetched.
void ShuffleUint32(Pcg64& rng, std::span<uint32_t> x);
// The same shuffle of the concatenation head ++ tail, for a caller that keeps only a prefix
// (OLMo's drop_last truncation) and so needs no second copy of a large array.
void ShuffleUint32(Pcg64& rng, std::span<uint32_t> head, std::span<uint32_t> tail);

}  // namespace gridfeed::order
