// Window shares of audit accounting against hand-computed values.
#include <gtest/gtest.h>

#include "gridfeed/audit/replay.h"

namespace gridfeed::audit {
namespace {

IterationReads Reads(int64_t iteration, int64_t begin, int64_t end, std::vector<int64_t> counts) {
  IterationReads r;
  r.iteration = iteration;
  r.begin = begin;
  r.end = end;
  r.counts = std::move(counts);
  return r;
}

double Half(size_t, int64_t q) { return 0.5 * static_cast<double>(q); }

TEST(WindowShares, ConstantTargetTiesKeepTheFirstWindow) {
  // Iterations 10, 11, 12 read positions [0,4), [4,8), [8,12): source 0 got 3, 2, 1 samples.
  const std::vector<IterationReads> reads = {Reads(10, 0, 4, {3, 1}), Reads(11, 4, 8, {2, 2}),
                                             Reads(12, 8, 12, {1, 3})};
  const WindowShares w = ComputeWindowShares(reads, 2, 2, Half);
  // Windows {10,11}: 5/8 vs 1/2; {11,12}: 3/8 vs 1/2; both 1/8 off: the first is reported.
  ASSERT_EQ(w.largest.size(), 2u);
  EXPECT_DOUBLE_EQ(w.largest[0].deviation, 0.125);
  EXPECT_DOUBLE_EQ(w.largest[0].share, 0.625);
  EXPECT_DOUBLE_EQ(w.largest[0].target, 0.5);
  EXPECT_EQ(w.largest[0].first_iteration, 10);
  EXPECT_EQ(w.largest[0].last_iteration, 11);
  EXPECT_DOUBLE_EQ(w.largest[1].share, 0.375);
  // The trailing series: the first point is the partial window of iteration 10 alone.
  EXPECT_EQ(w.share[0], (std::vector<double>{0.75, 0.625, 0.375}));
  EXPECT_EQ(w.target[1], (std::vector<double>{0.5, 0.5, 0.5}));

  const WindowShares one = ComputeWindowShares(reads, 1, 2, Half);
  EXPECT_DOUBLE_EQ(one.largest[0].deviation, 0.25);  // 3/4 in iteration 10
  EXPECT_EQ(one.largest[0].first_iteration, 10);
  EXPECT_EQ(one.largest[0].last_iteration, 10);

  // Fewer iterations than the window: the one window of all of them, 6/12 vs 1/2.
  const WindowShares all = ComputeWindowShares(reads, 5, 2, Half);
  EXPECT_DOUBLE_EQ(all.largest[0].deviation, 0.0);
  EXPECT_EQ(all.largest[0].first_iteration, 10);
  EXPECT_EQ(all.largest[0].last_iteration, 12);
}

TEST(WindowShares, RampingTarget) {
  // Source 0's target rises: T0(q) = q^2 / 24 over [0, 12), T1 = q - T0.
  auto t = [](size_t k, int64_t q) {
    const double t0 = static_cast<double>(q * q) / 24.0;
    return k == 0 ? t0 : static_cast<double>(q) - t0;
  };
  const std::vector<IterationReads> reads = {Reads(0, 0, 4, {3, 1}), Reads(1, 4, 8, {2, 2}),
                                             Reads(2, 8, 12, {2, 2})};
  const WindowShares w = ComputeWindowShares(reads, 2, 2, t);
  // [0,8): share 5/8, target (64/24)/8 = 1/3, off by 7/24; [4,12): 4/8 vs (128/24)/8 = 2/3.
  EXPECT_DOUBLE_EQ(w.largest[0].deviation, 7.0 / 24.0);
  EXPECT_DOUBLE_EQ(w.largest[0].target, 1.0 / 3.0);
  EXPECT_EQ(w.largest[0].first_iteration, 0);
  EXPECT_DOUBLE_EQ(w.largest[1].deviation, 7.0 / 24.0);
  EXPECT_DOUBLE_EQ(w.largest[1].target, 2.0 / 3.0);
  ASSERT_EQ(w.target[0].size(), 3u);
  EXPECT_DOUBLE_EQ(w.target[0][0], 1.0 / 6.0);  // (16/24)/4
  EXPECT_DOUBLE_EQ(w.target[0][2], 2.0 / 3.0);
}

}  // namespace
}  // namespace gridfeed::audit
