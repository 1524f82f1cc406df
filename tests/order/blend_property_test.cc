// The greedy blend rule's fast paths (order/blend.h, order/mixture/mixture_blend.h) against
// straightforward references that scan every source at every position: the tables must be
// identical (same source and sample at every position) on random weights of many shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gridfeed/order/blend.h"
#include "gridfeed/order/mixture/mixture_blend.h"
#include "gridfeed/order/split.h"

namespace gridfeed::order {
namespace {

// Megatron's greedy rule by definition: at position p, with q = max(p, 1) as a double, the
// lowest k with the largest w_k * q - count_k.
BlendTables ReferenceGreedy(const std::vector<double>& w, int64_t size) {
  BlendTables t;
  t.dataset_index.resize(static_cast<size_t>(size));
  t.dataset_sample_index.resize(static_cast<size_t>(size));
  std::vector<int64_t> count(w.size(), 0);
  for (int64_t p = 0; p < size; ++p) {
    const double q = static_cast<double>(p < 1 ? 1 : p);
    size_t best = 0;
    double best_error = 0;
    for (size_t k = 0; k < w.size(); ++k) {
      const double error = w[k] * q - static_cast<double>(count[k]);
      if (k == 0 || error > best_error) {
        best = k;
        best_error = error;
      }
    }
    t.dataset_index[static_cast<size_t>(p)] = static_cast<int32_t>(best);
    t.dataset_sample_index[static_cast<size_t>(p)] = count[best]++;
  }
  return t;
}

// The first position at which two tables differ, or -1.
int64_t FirstDifference(const BlendTables& got, const BlendTables& want) {
  if (got.dataset_index.size() != want.dataset_index.size()) return 0;
  for (size_t p = 0; p < want.dataset_index.size(); ++p) {
    if (got.dataset_index[p] != want.dataset_index[p] ||
        got.dataset_sample_index[p] != want.dataset_sample_index[p]) {
      return static_cast<int64_t>(p);
    }
  }
  return -1;
}

enum class Shape {
  kUniform,      // uniform raw weights, normalised
  kEqual,        // every weight the same double (1/n)
  kEqualRaw,     // every weight 1.0 (sum n)
  kFewValues,    // drawn from {1, 2, 3}, normalised: many exact ties in groups
  kTiny,         // a quarter of them 1e-12, the rest uniform, normalised
  kAllTiny,      // every weight about 1e-12 (sum far below 1)
  kSumTwo,       // uniform, scaled to sum 2
  kSumHalf,      // uniform, scaled to sum 0.5
  kSomeZero,     // a third of them 0
  kHeavyTail,    // lognormal (files of very different sizes), normalised
  kNearlyEqual,  // 1 + k * 1e-15 (distinct doubles, almost equal), normalised
};

const char* Name(Shape s) {
  static const char* const kNames[] = {"uniform",   "equal",      "equal_raw",   "few_values",
                                       "tiny",      "all_tiny",   "sum_two",     "sum_half",
                                       "some_zero", "heavy_tail", "nearly_equal"};
  return kNames[static_cast<int>(s)];
}

std::vector<double> Weights(Shape shape, size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0.01, 1.0);
  std::vector<double> w(n);
  switch (shape) {
    case Shape::kUniform:
      for (auto& x : w) x = u(rng);
      return Normalize(w);
    case Shape::kEqual:
      return std::vector<double>(n, 1.0 / static_cast<double>(n));
    case Shape::kEqualRaw:
      return std::vector<double>(n, 1.0);
    case Shape::kFewValues:
      for (auto& x : w) x = static_cast<double>(1 + rng() % 3);
      return Normalize(w);
    case Shape::kTiny:
      for (auto& x : w) x = rng() % 4 == 0 ? 1e-12 : u(rng);
      return Normalize(w);
    case Shape::kAllTiny:
      for (auto& x : w) x = 1e-12 * (1 + static_cast<double>(rng() % 3));
      return w;
    case Shape::kSumTwo:
    case Shape::kSumHalf: {
      for (auto& x : w) x = u(rng);
      w = Normalize(w);
      for (auto& x : w) x *= shape == Shape::kSumTwo ? 2.0 : 0.5;
      return w;
    }
    case Shape::kSomeZero:
      for (auto& x : w) x = rng() % 3 == 0 ? 0.0 : u(rng);
      w[rng() % n] = 0.5;
      return Normalize(w);
    case Shape::kHeavyTail: {
      std::lognormal_distribution<double> ln(0.0, 2.5);
      for (auto& x : w) x = ln(rng);
      return Normalize(w);
    }
    case Shape::kNearlyEqual:
      for (size_t k = 0; k < n; ++k) w[k] = 1.0 + static_cast<double>(rng() % 1000) * 1e-15;
      return Normalize(w);
  }
  return w;
}

constexpr Shape kShapes[] = {Shape::kUniform,   Shape::kEqual,      Shape::kEqualRaw,
                             Shape::kFewValues, Shape::kTiny,       Shape::kAllTiny,
                             Shape::kSumTwo,    Shape::kSumHalf,    Shape::kSomeZero,
                             Shape::kHeavyTail, Shape::kNearlyEqual};

// Positions per case: the reference costs sources x positions. Unoptimised builds (the
// sanitizer stage) check every shape and source count on a tenth of the positions, still
// many blocks of the fast paths.
#ifdef NDEBUG
constexpr int64_t kScale = 1;
#else
constexpr int64_t kScale = 10;
#endif
int64_t SizeFor(size_t n) {
  if (n <= 17) return 1'000'000 / kScale;
  if (n <= 1000) return 200'000 / kScale;
  return 40'000 / kScale;
}

TEST(BlendProperty, StaticEqualsReferenceOnEveryShape) {
  std::mt19937_64 rng(25);
  for (size_t n :
       {size_t{1}, size_t{2}, size_t{3}, size_t{17}, size_t{200}, size_t{1000}, size_t{5000}}) {
    for (Shape shape : kShapes) {
      const auto w = Weights(shape, n, rng);
      const int64_t size = SizeFor(n);
      SCOPED_TRACE(std::string(Name(shape)) + ", " + std::to_string(n) + " sources, " +
                   std::to_string(size) + " positions");
      const BlendTables got = BuildBlendingIndices(w, size);
      const BlendTables want = ReferenceGreedy(w, size);
      ASSERT_EQ(FirstDifference(got, want), -1);
    }
  }
}

TEST(BlendProperty, StaticEqualsReferenceOnSmallRandomCases) {
  // Many short runs: every prefix length, mixed shapes, sizes 0 to a few thousand.
  std::mt19937_64 rng(2502);
  for (int trial = 0; trial < 400; ++trial) {
    const size_t n = 1 + rng() % 300;
    const Shape shape = kShapes[rng() % std::size(kShapes)];
    const auto w = Weights(shape, n, rng);
    const int64_t size = static_cast<int64_t>(rng() % 4000);
    SCOPED_TRACE("trial " + std::to_string(trial) + ": " + Name(shape) + ", " + std::to_string(n) +
                 " sources, " + std::to_string(size) + " positions");
    ASSERT_EQ(FirstDifference(BuildBlendingIndices(w, size), ReferenceGreedy(w, size)), -1);
  }
}

TEST(BlendProperty, StaticExactTiesAtZeroGoToTheLowestIndex) {
  // Dyadic weights make every error exactly 0 at some positions; Megatron's rule then gives the
  // position to source 0, whose weight is 0 (at position 512, once, by the rule itself).
  std::vector<double> w = {0.0};
  for (int i = 0; i < 32; ++i) w.push_back(1.0 / 64);
  for (int i = 0; i < 64; ++i) w.push_back(1.0 / 256);
  for (int i = 0; i < 128; ++i) w.push_back(1.0 / 512);
  for (int64_t size : {int64_t{511}, int64_t{512}, int64_t{513}, int64_t{100000}}) {
    SCOPED_TRACE(std::to_string(size) + " positions");
    const BlendTables want = ReferenceGreedy(w, size);
    ASSERT_EQ(FirstDifference(BuildBlendingIndices(w, size), want), -1);
  }
}

TEST(BlendProperty, StaticOutsideTheFastPathStillEqualsReference) {
  // Weights the fast path declines (above 2^10, NaN-free but huge): the plain scan answers.
  std::mt19937_64 rng(3);
  std::vector<double> w(40);
  for (auto& x : w) x = std::uniform_real_distribution<double>(0, 5000)(rng);
  ASSERT_EQ(FirstDifference(BuildBlendingIndices(w, 20000), ReferenceGreedy(w, 20000)), -1);
}

// ---- Mixture schedules ----------------------------------------------------------------------

// The scheduled rule by definition, position by position over the builder's own segments (which
// only restate the stages' weights, ramps and the cap events): every active source's error
// T_k(max(p, 1)) - count_k with T_k from BlendSegment::Target; a source is eligible while its
// weight there is > 0 or its error is > 0; the lowest k with the largest error; a source whose
// cap units reach its cap leaves from the next position. Checks the tables, counts and caps.
void ExpectScheduledEqualsReference(const std::vector<BlendStage>& stages,
                                    const std::vector<int64_t>& caps, const ScheduledBlend& b) {
  const size_t n = caps.size();
  const int64_t length = b.stage_begin.back();
  std::vector<int64_t> count(n, 0), used(n, 0);
  std::vector<char> active(n, 1);
  std::vector<CapEvent> events;
  for (size_t k = 0; k < n; ++k) {
    if (caps[k] == 0) {
      active[k] = 0;
      events.push_back({static_cast<int>(k), 0, 0, 0});
    }
  }
  size_t s = 0;
  size_t stage = 0;
  for (int64_t p = 0; p < length; ++p) {
    while (s + 1 < b.segments.size() && b.segments[s + 1].begin <= p) ++s;
    while (stage + 1 < stages.size() && b.stage_begin[stage + 1] <= p) ++stage;
    const BlendSegment& seg = b.segments[s];
    const double x = static_cast<double>((p < 1 ? 1 : p) - seg.begin);
    size_t best = n;
    double best_error = -std::numeric_limits<double>::infinity();
    for (size_t k = 0; k < n; ++k) {
      if (!active[k]) continue;
      const double error = seg.Target(k, x) - static_cast<double>(count[k]);
      if (!(error > 0 || seg.Weight(k, x) > 0)) continue;
      if (best == n || error > best_error) {
        best = k;
        best_error = error;
      }
    }
    ASSERT_NE(best, n) << "position " << p;
    ASSERT_EQ(b.tables.dataset_index[static_cast<size_t>(p)], static_cast<int32_t>(best))
        << "position " << p;
    ASSERT_EQ(b.tables.dataset_sample_index[static_cast<size_t>(p)], count[best])
        << "position " << p;
    ++count[best];
    used[best] += stages[stage].cap_cost;
    if (caps[best] >= 0 && used[best] >= caps[best]) {
      active[best] = 0;
      events.push_back({static_cast<int>(best), static_cast<int>(stage), p + 1, count[best]});
    }
  }
  EXPECT_EQ(b.counts, count);
  ASSERT_EQ(b.caps.size(), events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(b.caps[i].source, events[i].source) << "cap " << i;
    EXPECT_EQ(b.caps[i].stage, events[i].stage) << "cap " << i;
    EXPECT_EQ(b.caps[i].position, events[i].position) << "cap " << i;
    EXPECT_EQ(b.caps[i].samples, events[i].samples) << "cap " << i;
  }
}

BlendStage Stage(std::string name, int64_t samples, std::vector<double> weights, int64_t ramp) {
  BlendStage s;
  s.name = std::move(name);
  s.samples = samples;
  s.weights = std::move(weights);
  s.ramp_samples = ramp;
  return s;
}

// A stage's weights: a random shape, made a valid stage (normalised, some weight).
std::vector<double> StageWeights(Shape shape, size_t n, std::mt19937_64& rng) {
  auto w = Weights(shape, n, rng);
  double sum = 0;
  for (double x : w) sum += x;
  if (!(sum > 0)) w[0] = 1;
  return Normalize(w);
}

TEST(BlendProperty, ScheduledEqualsReferenceOverStagesRampsAndCaps) {
  std::mt19937_64 rng(2525);
  for (size_t n : {size_t{2}, size_t{3}, size_t{17}, size_t{200}, size_t{1000}}) {
    const int trials = n <= 17 ? 60 : 8;
    const int64_t stage_max = n <= 17 ? 20000 : 30000;
    for (int trial = 0; trial < trials; ++trial) {
      const size_t count_stages = 1 + rng() % 4;
      std::vector<BlendStage> stages;
      int64_t length = 0;
      for (size_t s = 0; s < count_stages; ++s) {
        const Shape shape = kShapes[rng() % std::size(kShapes)];
        const int64_t samples = 1 + static_cast<int64_t>(rng() % stage_max);
        const int64_t ramp =
            s == 0 || rng() % 2 == 0 ? 0 : static_cast<int64_t>(rng() % (samples / 4 + 1));
        stages.push_back(Stage(std::string(Name(shape)) + std::to_string(s), samples,
                               StageWeights(shape, n, rng), ramp));
        if (rng() % 3 == 0) stages.back().cap_cost = 1 + static_cast<int64_t>(rng() % 3);
        length += samples;
      }
      // Caps on a few sources, loose enough that some weighted source always remains.
      std::vector<int64_t> caps(n, -1);
      if (trial % 2 == 1) {
        for (size_t c = 0; c < 1 + n / 8; ++c) {
          const size_t k = 1 + rng() % (n - 1);
          caps[k] = static_cast<int64_t>(rng() % static_cast<uint64_t>(length / n + 2));
        }
      }
      SCOPED_TRACE("n " + std::to_string(n) + " trial " + std::to_string(trial) + ", stages " +
                   std::to_string(count_stages) + ", positions " + std::to_string(length));
      auto b = BuildScheduledBlend(stages, caps);
      if (!b.ok()) continue;  // every weighted source capped: an error, not a draw
      ExpectScheduledEqualsReference(stages, caps, *b);
      if (HasFatalFailure()) return;
    }
  }
}

TEST(BlendProperty, ScheduledOneStageEqualsStaticReference) {
  std::mt19937_64 rng(52);
  for (size_t n : {size_t{3}, size_t{17}, size_t{200}, size_t{1000}}) {
    for (Shape shape :
         {Shape::kUniform, Shape::kEqual, Shape::kTiny, Shape::kHeavyTail, Shape::kFewValues}) {
      const auto w = StageWeights(shape, n, rng);
      const int64_t size = (n <= 17 ? 300000 : 100000) / kScale;
      SCOPED_TRACE(std::string(Name(shape)) + ", " + std::to_string(n) + " sources");
      auto b = BuildScheduledBlend({Stage("one", size, w, 0)}, std::vector<int64_t>(n, -1));
      ASSERT_TRUE(b.ok()) << b.status().ToString();
      ASSERT_EQ(FirstDifference(b->tables, ReferenceGreedy(w, size)), -1);
    }
  }
}

}  // namespace
}  // namespace gridfeed::order
