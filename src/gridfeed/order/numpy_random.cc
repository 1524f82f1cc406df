#include "gridfeed/order/numpy_random.h"

#include <atomic>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace gridfeed::order {

Mt19937::Mt19937(uint32_t seed) {
  state_[0] = seed;
  for (int i = 1; i < kN; ++i) {
    state_[i] = 1812433253u * (state_[i - 1] ^ (state_[i - 1] >> 30)) + static_cast<uint32_t>(i);
  }
}

namespace {

constexpr int kWords = 624, kMiddle = 397;
constexpr uint32_t kMatrixA = 0x9908b0dfu, kUpper = 0x80000000u, kLower = 0x7fffffffu;
constexpr uint32_t kTemperB = 0x9d2c5680u, kTemperC = 0xefc60000u;

inline uint32_t Twist(uint32_t upper, uint32_t lower, uint32_t far) {
  const uint32_t y = (upper & kUpper) | (lower & kLower);
  return far ^ (y >> 1) ^ ((y & 1u) ? kMatrixA : 0u);
}

inline uint32_t Temper(uint32_t z) {
  z ^= z >> 11;
  z ^= (z << 7) & kTemperB;
  z ^= (z << 15) & kTemperC;
  return z ^ (z >> 18);
}

void GeneratePortable(uint32_t* state, uint32_t* out) {
  int k = 0;
  for (; k < kWords - kMiddle; ++k) state[k] = Twist(state[k], state[k + 1], state[k + kMiddle]);
  for (; k < kWords - 1; ++k) state[k] = Twist(state[k], state[k + 1], state[k + kMiddle - kWords]);
  state[kWords - 1] = Twist(state[kWords - 1], state[0], state[kMiddle - 1]);
  for (int i = 0; i < kWords; ++i) out[i] = Temper(state[i]);
}

#if defined(__x86_64__)
// Eight words at a time. Word k reads k + 1 (not yet twisted) and k + kMiddle (not yet twisted
// below kWords - kMiddle, already twisted above: k + kMiddle - kWords < k - 8), as the loop one
// word at a time does.
__attribute__((target("avx2"), always_inline)) inline void TwistEight(uint32_t* state, int k,
                                                                      int far) {
  const __m256i upper = _mm256_set1_epi32(static_cast<int>(kUpper));
  const __m256i lower = _mm256_set1_epi32(static_cast<int>(kLower));
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i a = _mm256_set1_epi32(static_cast<int>(kMatrixA));
  const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(state + k));
  const __m256i l = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(state + k + 1));
  const __m256i f = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(state + far));
  const __m256i y = _mm256_or_si256(_mm256_and_si256(u, upper), _mm256_and_si256(l, lower));
  const __m256i odd = _mm256_cmpeq_epi32(_mm256_and_si256(y, one), one);
  const __m256i z =
      _mm256_xor_si256(_mm256_xor_si256(f, _mm256_srli_epi32(y, 1)), _mm256_and_si256(odd, a));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(state + k), z);
}

__attribute__((target("avx2"))) void GenerateAvx2(uint32_t* state, uint32_t* out) {
  int k = 0;
  for (; k + 8 <= kWords - kMiddle; k += 8) TwistEight(state, k, k + kMiddle);
  for (; k < kWords - kMiddle; ++k) state[k] = Twist(state[k], state[k + 1], state[k + kMiddle]);
  for (; k + 8 <= kWords - 1; k += 8) TwistEight(state, k, k + kMiddle - kWords);
  for (; k < kWords - 1; ++k) state[k] = Twist(state[k], state[k + 1], state[k + kMiddle - kWords]);
  state[kWords - 1] = Twist(state[kWords - 1], state[0], state[kMiddle - 1]);
  const __m256i b = _mm256_set1_epi32(static_cast<int>(kTemperB));
  const __m256i c = _mm256_set1_epi32(static_cast<int>(kTemperC));
  static_assert(kWords % 8 == 0);
  for (int i = 0; i < kWords; i += 8) {
    __m256i z = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(state + i));
    z = _mm256_xor_si256(z, _mm256_srli_epi32(z, 11));
    z = _mm256_xor_si256(z, _mm256_and_si256(_mm256_slli_epi32(z, 7), b));
    z = _mm256_xor_si256(z, _mm256_and_si256(_mm256_slli_epi32(z, 15), c));
    z = _mm256_xor_si256(z, _mm256_srli_epi32(z, 18));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), z);
  }
}

bool CpuHasAvx2() { return __builtin_cpu_supports("avx2"); }
#else
void GenerateAvx2(uint32_t* state, uint32_t* out) { GeneratePortable(state, out); }
bool CpuHasAvx2() { return false; }
#endif

std::atomic<bool> vector_generate{CpuHasAvx2()};

}  // namespace

bool Mt19937::VectorGenerate() { return vector_generate.load(std::memory_order_relaxed); }

void Mt19937::SetVectorGenerateForTesting(bool on) {
  vector_generate.store(on && CpuHasAvx2(), std::memory_order_relaxed);
}

void Mt19937::Generate() {
  static_assert(kN == kWords);
  if (VectorGenerate()) {
    GenerateAvx2(state_, out_);
  } else {
    GeneratePortable(state_, out_);
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
