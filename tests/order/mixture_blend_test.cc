// The scheduled blend (order/mixture/mixture_blend.h) and the mixture pipeline against Megatron's
// golden blends, a property over random ramped schedules, and caps.
#include "gridfeed/order/mixture/mixture_blend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <random>

#include "golden_util.h"
#include "gridfeed/config/mixture_schedule.h"
#include "gridfeed/order/blend.h"
#include "gridfeed/order/mixture/mixture_pipeline.h"
#include "gridfeed/order/split.h"
#include "gridfeed/order/table_image.h"
#include "testing/paths.h"

namespace gridfeed::order {
namespace {

using gridfeed::testing::ExpectMidTablesEqual;
using gridfeed::testing::ExpectNpyEquals;
using gridfeed::testing::GoldenDir;
using gridfeed::testing::ReadJson;
using nlohmann::json;

BlendStage Stage(const std::string& name, int64_t samples, std::vector<double> weights,
                 int64_t ramp = 0) {
  BlendStage s;
  s.name = name;
  s.samples = samples;
  s.weights = std::move(weights);
  s.ramp_samples = ramp;
  return s;
}

TEST(MixtureBlend, OneStageEqualsMegatronGoldenUnits) {
  const json units = ReadJson(GoldenDir() + "/helpers_units/units.json");
  ASSERT_FALSE(units["build_blending_indices"].empty());
  for (const auto& e : units["build_blending_indices"]) {
    const std::string dir = GoldenDir() + "/helpers_units/" + e["name"].get<std::string>();
    SCOPED_TRACE(dir);
    std::vector<double> raw;
    for (const auto& v : e["raw_weights"]) raw.push_back(v.get<double>());
    const int64_t size = e["size"].get<int64_t>();
    if (size == 0) continue;  // a schedule's stage has samples
    auto b = BuildScheduledBlend({Stage("one", size, Normalize(raw))},
                                 std::vector<int64_t>(raw.size(), -1));
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    std::vector<int16_t> di(b->tables.dataset_index.begin(), b->tables.dataset_index.end());
    ExpectNpyEquals(dir + "/dataset_index.npy", di, {size});
    ExpectNpyEquals(dir + "/dataset_sample_index.npy", b->tables.dataset_sample_index, {size});
  }
}

TEST(MixtureBlend, OneStageEqualsMegatronOnRandomWeights) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const size_t n = 1 + rng() % 12;
    std::vector<double> raw(n);
    for (auto& w : raw) w = 1e-3 + std::uniform_real_distribution<double>(0, 10)(rng);
    const int64_t size = 1 + static_cast<int64_t>(rng() % 5000);
    const auto w = Normalize(raw);
    auto b = BuildScheduledBlend({Stage("one", size, w)}, std::vector<int64_t>(n, -1));
    ASSERT_TRUE(b.ok());
    const BlendTables want = BuildBlendingIndices(w, size);
    ASSERT_EQ(b->tables.dataset_index, want.dataset_index) << "trial " << trial;
    ASSERT_EQ(b->tables.dataset_sample_index, want.dataset_sample_index) << "trial " << trial;
  }
}

// Property: after every position, each source's count is within one sample of its cumulative
// target (the integral of its possibly ramping weight), over random multi-stage schedules.
TEST(MixtureBlend, SharesStayWithinOneSampleOfTheCumulativeTarget) {
  std::mt19937_64 rng(2024);
  double worst = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const size_t n = 2 + rng() % 5;
    const size_t stages = 1 + rng() % 4;
    std::vector<BlendStage> st;
    for (size_t s = 0; s < stages; ++s) {
      std::vector<double> raw(n);
      for (auto& w : raw) {
        w = rng() % 4 == 0 ? 0.0 : std::uniform_real_distribution<double>(0.01, 1)(rng);
      }
      raw[rng() % n] = 0.5;  // some weight
      const int64_t samples = 1 + static_cast<int64_t>(rng() % 3000);
      const int64_t ramp =
          s == 0 || rng() % 3 == 0 ? 0 : static_cast<int64_t>(rng() % (samples + 1));
      st.push_back(Stage("s" + std::to_string(s), samples, Normalize(raw), ramp));
    }
    auto b = BuildScheduledBlend(st, std::vector<int64_t>(n, -1));
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    std::vector<int64_t> count(n, 0);
    const int64_t length = b->stage_begin.back();
    for (int64_t p = 0; p < length; ++p) {
      ++count[static_cast<size_t>(b->tables.dataset_index[p])];
      for (size_t k = 0; k < n; ++k) {
        // Megatron's convention: the n-th draw (position n - 1) serves the target of
        // max(n - 1, 1) positions.
        const double target = CumulativeTarget(b->segments, k, std::max<int64_t>(p, 1));
        const double gap = std::fabs(static_cast<double>(count[k]) - target);
        worst = std::max(worst, gap);
        ASSERT_LE(gap, 1.0 + 1e-9)
            << "trial " << trial << " position " << p << " source " << k << " count " << count[k]
            << " target " << target << " stage begins " << ::testing::PrintToString(b->stage_begin)
            << " ramps " << ::testing::PrintToString(b->segments.back().ramp) << " weight "
            << st[0].weights[k];
      }
    }
  }
  RecordProperty("worst_gap", std::to_string(worst));
}

TEST(MixtureBlend, RampMovesTheShareLinearly) {
  // 0 -> 1 for source 1 over a 1000-sample ramp: it gets about 500 of those samples.
  auto b = BuildScheduledBlend({Stage("a", 1000, {1.0, 0.0}), Stage("b", 1000, {0.0, 1.0}, 1000)},
                               {-1, -1});
  ASSERT_TRUE(b.ok());
  int64_t first = 0, second = 0;
  for (int64_t p = 1000; p < 2000; ++p) (b->tables.dataset_index[p] == 1 ? second : first)++;
  EXPECT_NEAR(second, 500, 1);
  EXPECT_EQ(b->tables.dataset_index[1000], 0);  // weight 0 at the ramp's start
  EXPECT_EQ(b->tables.dataset_index[1999], 1);
}

TEST(MixtureBlend, CapBindsAtItsSampleCountAndTheRestRenormalise) {
  // Source 2 asks for half of 10000 samples but may give 1234.
  auto b = BuildScheduledBlend(
      {Stage("main", 6000, {0.25, 0.25, 0.5}), Stage("anneal", 4000, {0.1, 0.4, 0.5}, 1000)},
      {-1, -1, 1234});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->counts[2], 1234);
  ASSERT_EQ(b->caps.size(), 1u);
  const CapEvent& e = b->caps[0];
  EXPECT_EQ(e.source, 2);
  EXPECT_EQ(e.stage, 0);
  EXPECT_EQ(e.samples, 1234);
  // The cap binds after the source's 1234th sample, near 1234 / 0.5 positions in.
  EXPECT_NEAR(static_cast<double>(e.position), 2468, 2);
  EXPECT_EQ(b->tables.dataset_index[e.position - 1], 2);
  for (int64_t p = e.position; p < 10000; ++p) ASSERT_NE(b->tables.dataset_index[p], 2);
  // After the cap, sources 0 and 1 share the main stage evenly.
  int64_t c0 = 0, c1 = 0;
  for (int64_t p = e.position; p < 6000; ++p) (b->tables.dataset_index[p] == 0 ? c0 : c1)++;
  EXPECT_LE(std::abs(c0 - c1), 2);
}

TEST(MixtureBlend, EveryWeightedSourceCappedIsAnErrorNamingTheStage) {
  auto b = BuildScheduledBlend({Stage("main", 100, {0.5, 0.5}), Stage("code", 100, {0.0, 1.0})},
                               {-1, 120});
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("'code'"), std::string::npos) << b.status().ToString();
}

using gridfeed::testing::InGoldenDir;

config::JobOptions MixtureOptions(const std::string& schedule_json) {
  config::JobOptions o;
  o.data.mixture_schedule = schedule_json;
  o.data.seq_length = 128;
  o.data.seed = 555;
  o.data.split = "99,1,0";
  return o;
}

// A golden case that blends weighted --data-path corpora into a train split of a given size, as
// a one-stage schedule over the same corpora (sources s00, s01, ... in data-path order) with the
// case's seed, length, split and surplus. Empty when the case is not of that kind.
struct GoldenBlendCase {
  std::string schedule;
  config::JobOptions options;
  int64_t samples = 0;
  size_t sources = 0;
};

std::optional<GoldenBlendCase> OneStageScheduleOf(const json& in) {
  const json& path = in["data_path"];
  const json& sizes = in["sizes"];
  if (!path.is_array() || path.empty() || path.size() % 2 != 0) return std::nullopt;
  if (!in["per_split_data_path"].is_null() || !sizes.is_array() || !sizes[0].is_number_integer() ||
      sizes[0].get<int64_t>() <= 0) {
    return std::nullopt;
  }
  GoldenBlendCase c;
  c.samples = sizes[0].get<int64_t>();
  json sources = json::object(), mixture = json::object();
  for (size_t i = 0; i < path.size(); i += 2) {
    char* end = nullptr;
    const std::string w = path[i].get<std::string>();
    const double weight = std::strtod(w.c_str(), &end);
    if (end == w.c_str() || *end != '\0' || !(weight > 0)) return std::nullopt;
    char name[24];
    std::snprintf(name, sizeof name, "s%02zu", i / 2);
    sources[name] = path[i + 1].get<std::string>();
    mixture[name] = weight;
  }
  c.sources = path.size() / 2;
  c.schedule =
      json{{"sources", sources},
           {"schedule",
            json::array({json{{"name", "one"}, {"samples", c.samples}, {"mixture", mixture}}})}}
          .dump();
  c.options.data.seq_length = in["seq_length"].get<int64_t>();
  c.options.data.seed = in["seed"].get<int64_t>();
  c.options.data.split = in["split"].is_string() ? in["split"].get<std::string>() : "";
  c.options.data.no_add_extra_token = !in.value("add_extra_token_to_sequence", true);
  c.options.data.mid_level_dataset_surplus = in.value("mid_level_dataset_surplus", 0.005);
  return c;
}

// Every golden weighted blend (e.g. blend3_w_L128) as a one-stage schedule: Megatron's blend
// and each source's tables exactly.
TEST_F(InGoldenDir, OneStageScheduleReproducesTheGoldenBlendCases) {
  int checked = 0;
  for (const auto& e : std::filesystem::directory_iterator(GoldenDir() + "/cases")) {
    const json golden = ReadJson(e.path().string() + "/case.json");
    auto c = OneStageScheduleOf(golden["inputs"]);
    if (!c) continue;
    const std::string name = e.path().filename().string();
    SCOPED_TRACE(name);
    ++checked;
    const std::string dir = e.path().string() + "/train";
    auto parsed = config::ParseMixtureSchedule(c->schedule);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    c->options.data.mixture_schedule = config::MixtureScheduleJson(*parsed);
    auto pipeline = MakeMixturePipeline(c->options);
    auto built = pipeline->Build();
    ASSERT_TRUE(built.ok()) << built.status().ToString();
    EXPECT_EQ((*built)->view().length(Split::kTrain), c->samples);
    auto writer = (*built)->TakeImage();
    std::vector<std::byte> image(writer->size());
    writer->WriteTo(image.data());
    auto view = ParseTableImage(image);
    ASSERT_TRUE(view.ok()) << view.status().ToString();
    const SplitView& s = *view->splits[0];
    std::vector<int16_t> di(s.dataset_index.begin(), s.dataset_index.end());
    ExpectNpyEquals(dir + "/blend/dataset_index.npy", di, {c->samples});
    ExpectNpyEquals(
        dir + "/blend/dataset_sample_index.npy",
        std::vector<int64_t>(s.dataset_sample_index.begin(), s.dataset_sample_index.end()),
        {c->samples});
    ASSERT_EQ(s.sources.size(), c->sources);
    for (size_t k = 0; k < c->sources; ++k) {
      ExpectMidTablesEqual(dir + "/mid_" + std::to_string(k), s.sources[k].tables);
    }
  }
  EXPECT_GE(checked, 1) << "no golden case blends weighted corpora into a sized train split";
}

TEST_F(InGoldenDir, MaxEpochsCapBindsAtTheConfiguredEpoch) {
  // corpus_tiny is small: 1.5 epochs of it bind long before its 60% share is drawn.
  const std::string schedule = R"({"sources": {"big": "corpora/corpus_multi",
      "tiny": "corpora/corpus_tiny"},
      "schedule": [{"name": "main", "samples": 3000, "mixture": {"big": 0.4, "tiny": 0.6}}],
      "max_epochs": {"tiny": 1.5}})";
  auto parsed = config::ParseMixtureSchedule(schedule);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  auto pipeline = MakeMixturePipeline(MixtureOptions(config::MixtureScheduleJson(*parsed)));
  auto built = pipeline->Build();
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  const OrderView& v = (*built)->view();
  const auto sources = v.Sources(Split::kTrain);
  ASSERT_EQ(sources.size(), 2u);
  EXPECT_EQ(sources[1].name, "tiny");
  const int64_t per_epoch = sources[1].samples_per_epoch;
  ASSERT_GT(per_epoch, 0);
  ASSERT_LT(per_epoch * 3 / 2, 1800) << "the corpus must be small enough for the cap to bind";
  int64_t tiny = 0, last_tiny = -1;
  for (int64_t p = 0; p < v.length(Split::kTrain); ++p) {
    if (v.SourceOf(Split::kTrain, p) == 1) ++tiny, last_tiny = p;
  }
  EXPECT_EQ(tiny, static_cast<int64_t>(std::floor(1.5 * static_cast<double>(per_epoch))));
  // Where the cap binds is in the data facts, and nothing of the source follows it.
  const json facts = json::parse((*built)->DataFacts());
  ASSERT_EQ(facts["mixture"]["caps"].size(), 1u);
  EXPECT_EQ(facts["mixture"]["caps"][0]["position"].get<int64_t>(), last_tiny + 1);
}

}  // namespace
}  // namespace gridfeed::order
