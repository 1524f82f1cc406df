#include "gridfeed/order/olmo/pcg64.h"

#include <algorithm>
#include <bit>

namespace gridfeed::order {
namespace {

// SeedSequence's hashing constants (design note, section 3.2).
constexpr uint32_t kInitA = 0x43b0d7e5u;
constexpr uint32_t kMultA = 0x931e8875u;
constexpr uint32_t kInitB = 0x8b51f9ddu;
constexpr uint32_t kMultB = 0x58f38dedu;
constexpr uint32_t kMixMultL = 0xca01f9ddu;
constexpr uint32_t kMixMultR = 0x4973f715u;
constexpr int kPoolSize = 4;

// PCG64's 128-bit LCG multiplier.
constexpr unsigned __int128 kPcgMult =
    (static_cast<unsigned __int128>(0x2360ED051FC65DA4ULL) << 64) | 0x4385DF649FCCF645ULL;

// Drops high zero words; the integer's size decides the word count, and 0 keeps one word.
void Normalize(SeedWords& w) {
  while (w.size() > 1 && w.back() == 0) w.pop_back();
  if (w.empty()) w.push_back(0);
}

uint32_t Mix(uint32_t x, uint32_t y) {
  uint32_t r = kMixMultL * x - kMixMultR * y;
  return r ^ (r >> 16);
}

}  // namespace

SeedWords SeedWordsOf(uint64_t value) {
  SeedWords w{static_cast<uint32_t>(value), static_cast<uint32_t>(value >> 32)};
  Normalize(w);
  return w;
}

Result<SeedWords> ParseSeedWords(const std::string& decimal) {
  if (decimal.empty()) return InvalidArgument("empty seed");
  SeedWords w{0};
  for (char c : decimal) {
    if (c < '0' || c > '9') {
      return InvalidArgument("seed '" + decimal + "' is not a non-negative decimal integer");
    }
    uint64_t carry = static_cast<uint64_t>(c - '0');
    for (uint32_t& word : w) {  // w = w * 10 + digit
      const uint64_t v = uint64_t{word} * 10 + carry;
      word = static_cast<uint32_t>(v);
      carry = v >> 32;
    }
    if (carry != 0) w.push_back(static_cast<uint32_t>(carry));
  }
  Normalize(w);
  return w;
}

SeedWords AddToSeed(const SeedWords& value, uint64_t addend) {
  SeedWords w = value;
  if (w.empty()) w.push_back(0);
  uint64_t carry = addend;
  for (size_t i = 0; i < w.size() && carry != 0; ++i) {
    const uint64_t v = uint64_t{w[i]} + (carry & 0xffffffffu);
    w[i] = static_cast<uint32_t>(v);
    carry = (carry >> 32) + (v >> 32);
  }
  while (carry != 0) {
    w.push_back(static_cast<uint32_t>(carry));
    carry >>= 32;
  }
  Normalize(w);
  return w;
}

std::string SeedText(const SeedWords& value) {
  SeedWords w = value;
  Normalize(w);
  std::string digits;
  while (!(w.size() == 1 && w[0] == 0)) {
    uint64_t rem = 0;  // w /= 10, most significant word first
    for (size_t i = w.size(); i-- > 0;) {
      const uint64_t cur = (rem << 32) | w[i];
      w[i] = static_cast<uint32_t>(cur / 10);
      rem = cur % 10;
    }
    digits.push_back(static_cast<char>('0' + rem));
    Normalize(w);
  }
  if (digits.empty()) return std::string(1, '0');
  return std::string(digits.rbegin(), digits.rend());
}

SeedSequence::SeedSequence(const SeedWords& entropy) {
  uint32_t h = kInitA;  // one running constant across every hash of the pool build
  auto hashmix = [&h](uint32_t v) {
    v ^= h;
    h *= kMultA;
    v *= h;
    return v ^ (v >> 16);
  };
  for (int i = 0; i < kPoolSize; ++i) {
    pool_[i] = hashmix(static_cast<size_t>(i) < entropy.size() ? entropy[i] : 0u);
  }
  for (int s = 0; s < kPoolSize; ++s) {
    for (int d = 0; d < kPoolSize; ++d) {
      if (s != d) pool_[d] = Mix(pool_[d], hashmix(pool_[s]));
    }
  }
  for (size_t s = kPoolSize; s < entropy.size(); ++s) {
    for (int d = 0; d < kPoolSize; ++d) pool_[d] = Mix(pool_[d], hashmix(entropy[s]));
  }
}

std::vector<uint32_t> SeedSequence::GenerateState32(int n_words) const {
  std::vector<uint32_t> out(static_cast<size_t>(std::max(n_words, 0)));
  uint32_t g = kInitB;
  for (size_t k = 0; k < out.size(); ++k) {
    uint32_t v = pool_[k % kPoolSize] ^ g;
    g *= kMultB;
    v *= g;
    out[k] = v ^ (v >> 16);
  }
  return out;
}

namespace {
unsigned __int128 U128(uint64_t hi, uint64_t lo) {
  return (static_cast<unsigned __int128>(hi) << 64) | lo;
}
}  // namespace

Pcg64::Pcg64(const SeedWords& seed) {
  const std::vector<uint32_t> w = SeedSequence(seed).GenerateState32(8);
  uint64_t s[4];
  for (int k = 0; k < 4; ++k) s[k] = uint64_t{w[2 * k]} | (uint64_t{w[2 * k + 1]} << 32);
  // The first word of each pair is the high half.
  *this = Pcg64(U128(s[0], s[1]), U128(s[2], s[3]));
}

Pcg64::Pcg64(unsigned __int128 initstate, unsigned __int128 initseq) {
  inc_ = (initseq << 1) | 1u;
  state_ = 0;
  state_ = state_ * kPcgMult + inc_;
  state_ += initstate;
  state_ = state_ * kPcgMult + inc_;
}

uint64_t Pcg64::Next64() {
  state_ = state_ * kPcgMult + inc_;
  const uint64_t hi = static_cast<uint64_t>(state_ >> 64);
  const uint64_t lo = static_cast<uint64_t>(state_);
  return std::rotr(hi ^ lo, static_cast<int>(hi >> 58));  // rotr by 0 is the identity
}

uint32_t Pcg64::Next32() {
  if (has_uint32_) {
    has_uint32_ = false;
    return uinteger_;
  }
  const uint64_t v = Next64();
  has_uint32_ = true;
  uinteger_ = static_cast<uint32_t>(v >> 32);
  return static_cast<uint32_t>(v);
}

uint64_t Pcg64::Interval(uint64_t max) {
  if (max == 0) return 0;  // no draw
  const uint64_t mask = ~uint64_t{0} >> std::countl_zero(max);
  uint64_t v;
  if (max <= 0xffffffffULL) {
    while ((v = (Next32() & mask)) > max) {
    }
  } else {
    while ((v = (Next64() & mask)) > max) {
    }
  }
  return v;
}

namespace {

// The Fisher-Yates walk over n elements reached through `at(i)`. Swap targets are drawn a
// block ahead and prefetched: the draws do not depend on the array, and the random accesses
// of a large array are then served from cache. The permutation is unchanged.
template <typename At>
void ShuffleBlocked(Pcg64& rng, size_t n, At at) {
  constexpr size_t kAhead = 128;  // 64..256 measured alike under load; 16 clearly slower
  size_t targets[kAhead];
  size_t i = n;
  while (i > 1) {  // positions i-1 .. 1, in that order
    const size_t block = std::min(kAhead, i - 1);
    for (size_t k = 0; k < block; ++k) {
      targets[k] = static_cast<size_t>(rng.Interval(i - 1 - k));
      __builtin_prefetch(&at(targets[k]), 1);
    }
    for (size_t k = 0; k < block; ++k) std::swap(at(i - 1 - k), at(targets[k]));
    i -= block;
  }
}

}  // namespace

void ShuffleUint32(Pcg64& rng, std::span<uint32_t> x) {
  ShuffleBlocked(rng, x.size(), [x](size_t i) -> uint32_t& { return x[i]; });
}

void ShuffleUint32(Pcg64& rng, std::span<uint32_t> head, std::span<uint32_t> tail) {
  const size_t h = head.size();
  ShuffleBlocked(rng, h + tail.size(),
                 [head, tail, h](size_t i) -> uint32_t& { return i < h ? head[i] : tail[i - h]; });
}

}  // namespace gridfeed::order
