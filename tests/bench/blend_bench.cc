// Blend-table build for N samples (GRIDFEED_BENCH_BLEND_SAMPLES, default 20,000,000): the
// scheduled builder (order/mixture/mixture_blend.h) next to Megatron's static greedy blend
// (order/blend.h, helpers.cpp's algorithm) over the same count in the same run. Issue 11's goal:
// a 3-stage schedule over 10 sources within 2x the static 10-source build.
//   BM_Static/sources3, /sources10   the floors (the issue quotes Megatron at 0.27 s and 0.49 s,
//                                    measured elsewhere; not compared here)
//   BM_Scheduled/one_stage           1 stage, no ramp, 10 sources (the same tables as the floor)
//   BM_Scheduled/three_stages        70% / 20% / 10% of N, ramps of 5% and 2.5% of N, no caps
//   BM_Scheduled/three_stages_capped the same with one source capped at about 60% of its share
//   BM_Wide/fast, /reference         1,000 sources of very different sizes (lognormal weights)
//                                    over GRIDFEED_BENCH_BLEND_WIDE_SAMPLES (default 5,000,000):
//                                    BuildBlendingIndices against the rule that scans every
//                                    source at every position (issue 25); ratio printed
//   BM_WideScheduled/one_stage       the same weights as one mixture stage
// Exits non-zero when the one-stage tables differ from the static ones or the wide fast tables
// from the reference; time is only printed.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "gridfeed/order/blend.h"
#include "gridfeed/order/mixture/mixture_blend.h"
#include "gridfeed/order/split.h"
#include "ratio_reporter.h"

namespace {

using namespace gridfeed;
using Clock = std::chrono::steady_clock;

constexpr size_t kSources = 10;
constexpr int kCappedSource = 2;

constexpr size_t kWideSources = 1000;

int64_t WideSamples() {
  const char* v = std::getenv("GRIDFEED_BENCH_BLEND_WIDE_SAMPLES");
  return v ? std::atoll(v) : 5'000'000;
}

// Megatron's greedy rule as helpers.cpp runs it: every source at every position.
order::BlendTables ScanEverySource(const std::vector<double>& w, int64_t size) {
  order::BlendTables t;
  t.dataset_index.resize(static_cast<size_t>(size));
  t.dataset_sample_index.resize(static_cast<size_t>(size));
  std::vector<int64_t> count(w.size(), 0);
  for (int64_t p = 0; p < size; ++p) {
    const double q = static_cast<double>(std::max<int64_t>(p, 1));
    size_t best = 0;
    double best_error = w[0] * q - static_cast<double>(count[0]);
    for (size_t k = 1; k < w.size(); ++k) {
      const double error = w[k] * q - static_cast<double>(count[k]);
      if (error > best_error) {
        best_error = error;
        best = k;
      }
    }
    t.dataset_index[static_cast<size_t>(p)] = static_cast<int32_t>(best);
    t.dataset_sample_index[static_cast<size_t>(p)] = count[best]++;
  }
  return t;
}

// Files of very different sizes: lognormal weights from a fixed seed.
std::vector<double> WideWeights() {
  std::mt19937_64 rng(25);
  std::lognormal_distribution<double> d(0.0, 1.5);
  std::vector<double> raw(kWideSources);
  for (auto& w : raw) w = d(rng);
  return order::Normalize(raw);
}

int64_t Samples() {
  const char* v = std::getenv("GRIDFEED_BENCH_BLEND_SAMPLES");
  return v ? std::atoll(v) : 20'000'000;
}

// Uneven weights from a fixed seed, so the greedy race is not a round robin.
std::vector<double> Weights(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> d(0.05, 1.0);
  std::vector<double> raw(n);
  for (auto& w : raw) w = d(rng);
  return order::Normalize(raw);
}

order::BlendStage Stage(const std::string& name, int64_t samples, uint64_t seed, int64_t ramp) {
  order::BlendStage s;
  s.name = name;
  s.samples = samples;
  s.weights = Weights(kSources, seed);
  s.ramp_samples = ramp;
  return s;
}

std::vector<order::BlendStage> ThreeStages(int64_t n) {
  const int64_t a = n * 7 / 10, b = n * 2 / 10;
  return {Stage("warmup", a, 1, 0), Stage("middle", b, 2, n / 20),
          Stage("anneal", n - a - b, 3, n / 40)};
}

// About 60% of the capped source's share over the whole schedule (ramps ignored), so the cap
// binds well inside the run.
std::vector<int64_t> OneCap(const std::vector<order::BlendStage>& stages) {
  double share = 0;
  for (const auto& s : stages) share += s.weights[kCappedSource] * static_cast<double>(s.samples);
  std::vector<int64_t> caps(kSources, -1);
  caps[kCappedSource] = static_cast<int64_t>(0.6 * share);
  return caps;
}

void BM_Static(benchmark::State& state, size_t sources) {
  const auto w = Weights(sources, 1);
  const int64_t n = Samples();
  for (auto _ : state) {
    auto t0 = Clock::now();
    order::BlendTables t = order::BuildBlendingIndices(w, n);
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - t0).count());
    benchmark::DoNotOptimize(t.dataset_index.data());
  }
  state.counters["samples"] = static_cast<double>(n);
}

void BM_Scheduled(benchmark::State& state, int which) {
  const int64_t n = Samples();
  const auto stages =
      which == 0 ? std::vector<order::BlendStage>{Stage("one", n, 1, 0)} : ThreeStages(n);
  const auto caps = which == 2 ? OneCap(stages) : std::vector<int64_t>(kSources, -1);
  for (auto _ : state) {
    auto t0 = Clock::now();
    auto b = order::BuildScheduledBlend(stages, caps);
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - t0).count());
    if (!b.ok()) {
      state.SkipWithError(b.status().ToString().c_str());
      return;
    }
    if (which == 2 && b->caps.size() != 1) {
      state.SkipWithError("the cap did not bind");
      return;
    }
    if (!b->caps.empty()) {
      state.counters["cap_at"] = static_cast<double>(b->caps[0].position) / static_cast<double>(n);
    }
    state.counters["segments"] = static_cast<double>(b->segments.size());
  }
  state.counters["samples"] = static_cast<double>(n);
}

void BM_Wide(benchmark::State& state, bool fast) {
  const auto w = WideWeights();
  const int64_t n = WideSamples();
  for (auto _ : state) {
    auto t0 = Clock::now();
    order::BlendTables t = fast ? order::BuildBlendingIndices(w, n) : ScanEverySource(w, n);
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - t0).count());
    benchmark::DoNotOptimize(t.dataset_index.data());
  }
  state.counters["samples"] = static_cast<double>(n);
  state.counters["sources"] = static_cast<double>(w.size());
}

// The same 1,000 sources as one mixture stage (the scheduled builder's linear-part fast path).
void BM_WideScheduled(benchmark::State& state, int) {
  order::BlendStage s;
  s.name = "one";
  s.samples = WideSamples();
  s.weights = WideWeights();
  for (auto _ : state) {
    auto t0 = Clock::now();
    auto b = order::BuildScheduledBlend({s}, std::vector<int64_t>(kWideSources, -1));
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - t0).count());
    if (!b.ok()) {
      state.SkipWithError(b.status().ToString().c_str());
      return;
    }
  }
  state.counters["samples"] = static_cast<double>(s.samples);
  state.counters["sources"] = static_cast<double>(kWideSources);
}

#define BLEND_BENCH(fn, name, arg) \
  BENCHMARK_CAPTURE(fn, name, arg)->UseManualTime()->Iterations(3)->Unit(benchmark::kMillisecond)
BLEND_BENCH(BM_Static, sources3, size_t{3});
BLEND_BENCH(BM_Static, sources10, kSources);
BLEND_BENCH(BM_Scheduled, one_stage, 0);
BLEND_BENCH(BM_Scheduled, three_stages, 1);
BLEND_BENCH(BM_Scheduled, three_stages_capped, 2);
BENCHMARK_CAPTURE(BM_Wide, fast, true)
    ->UseManualTime()
    ->Iterations(2)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_WideScheduled, one_stage, 0)
    ->UseManualTime()
    ->Iterations(2)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Wide, reference, false)
    ->UseManualTime()
    ->Iterations(2)
    ->Unit(benchmark::kMillisecond);

// One stage without ramp or caps must give Megatron's tables exactly.
bool OneStageEqualsStatic(size_t sources) {
  const int64_t n = Samples();
  const auto w = Weights(sources, 1);
  order::BlendStage s;
  s.name = "one";
  s.samples = n;
  s.weights = w;
  auto b = order::BuildScheduledBlend({s}, std::vector<int64_t>(sources, -1));
  const order::BlendTables want = order::BuildBlendingIndices(w, n);
  const bool same = b.ok() && b->tables.dataset_index == want.dataset_index &&
                    b->tables.dataset_sample_index == want.dataset_sample_index;
  std::printf("one stage, %zu sources, %lld samples: %s the static tables\n", sources,
              static_cast<long long>(n), same ? "equals" : "DIFFERS FROM");
  return same;
}

// The fast greedy blend must give the reference's tables exactly.
bool WideEqualsReference() {
  const auto w = WideWeights();
  const int64_t n = WideSamples();
  const order::BlendTables got = order::BuildBlendingIndices(w, n);
  const order::BlendTables want = ScanEverySource(w, n);
  const bool same = got.dataset_index == want.dataset_index &&
                    got.dataset_sample_index == want.dataset_sample_index;
  std::printf("wide, %zu sources, %lld samples: fast %s the reference tables\n", w.size(),
              static_cast<long long>(n), same ? "equals" : "DIFFERS FROM");
  return same;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  const std::string floor = "BM_Static/sources10";
  gridfeed::bench::RatioReporter reporter(std::vector<std::pair<std::string, std::string>>{
      {"BM_Scheduled/one_stage", floor},
      {"BM_Scheduled/three_stages", floor},
      {"BM_Scheduled/three_stages_capped", floor},
      {"BM_Wide/reference", "BM_Wide/fast"},
      {"BM_WideScheduled/one_stage", "BM_Wide/fast"}});
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  std::printf("goal (issue 11): three_stages and three_stages_capped <= 2x BM_Static/sources10\n");
  std::printf("BM_Wide/reference over BM_Wide/fast: the fast greedy blend's speed-up (issue 25)\n");
  const bool three = OneStageEqualsStatic(3);
  const bool ten = OneStageEqualsStatic(kSources);
  const bool wide = WideEqualsReference();
  return three && ten && wide ? 0 : 1;
}
