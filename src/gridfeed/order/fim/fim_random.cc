#include "gridfeed/order/fim/fim_random.h"

#include <algorithm>
#include <cmath>

namespace gridfeed::order::fim {

double FimRandom::NextDouble() {
  const uint32_t a = rs_.Next32() >> 5;
  const uint32_t b = rs_.Next32() >> 6;
  return (a * 67108864.0 + b) / 9007199254740992.0;
}

int64_t FimRandom::Inversion(double p) {
  constexpr int64_t n = 1;
  const double q = 1.0 - p;
  const double qn = std::exp(static_cast<double>(n) * std::log(q));
  const double np = static_cast<double>(n) * p;
  const auto bound = static_cast<int64_t>(std::min<double>(n, np + 10.0 * std::sqrt(np * q + 1)));
  int64_t x = 0;
  double px = qn;
  double u = NextDouble();
  while (u > px) {
    ++x;
    if (x > bound) {
      x = 0;
      px = qn;
      u = NextDouble();
    } else {
      u -= px;
      px = (static_cast<double>(n - x + 1) * p * px) / (static_cast<double>(x) * q);
    }
  }
  return x;
}

int64_t FimRandom::Binomial1(double p) {
  const int64_t v = p <= 0.5 ? Inversion(p) : 1 - Inversion(1.0 - p);
  if (trace_) trace_->push_back({FimDraw::kBinomial, p, 0, {v, 0}});
  return v;
}

std::array<int64_t, 2> FimRandom::RandInt2(int64_t high) {
  std::array<int64_t, 2> v{0, 0};
  const auto rng = static_cast<uint64_t>(high - 1);
  if (rng != 0) {
    for (auto& x : v) {
      x = rng <= 0xffffffffu ? static_cast<int64_t>(rs_.Interval32(static_cast<uint32_t>(rng)))
                             : static_cast<int64_t>(rs_.Interval(rng));
    }
  }
  if (trace_) trace_->push_back({FimDraw::kRandint, 0, high, v});
  return v;
}

}  // namespace gridfeed::order::fim
