// The schedule's configuration (errors name the key), the plan's arithmetic against figures
// worked by hand (the seed notes' mixture and shard examples).
#include "gridfeed/order/mixture/mixture_plan.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <fstream>

#include "gridfeed/config/flags.h"
#include "gridfeed/config/mixture_schedule.h"
#include "gridfeed/order/shard_plan.h"
#include "gridfeed/order/split.h"
#include "testing/paths.h"

namespace gridfeed::order {
namespace {

std::string ErrorOf(const std::string& schedule) {
  auto s = config::ParseMixtureSchedule(schedule);
  return s.ok() ? "" : s.status().message();
}

TEST(MixtureSchedule, ErrorsNameTheKey) {
  const std::string src = R"("sources": {"web": "w", "code": "c"}, )";
  EXPECT_NE(
      ErrorOf("{" + src + R"("schedule": [{"tokens": 10, "mixture": {"web": 1, "math": 1}}]})")
          .find("schedule[0].mixture.math"),
      std::string::npos);
  EXPECT_NE(ErrorOf("{" + src + R"("schedule": [{"tokens": 10, "samples": 3, "alpha": 0.5}]})")
                .find("schedule[0]"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{" + src + R"("schedule": [{"tokens": 1.5, "alpha": 0.5}]})")
                .find("schedule[0].tokens"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{" + src +
                    R"("schedule": [{"samples": 10, "alpha": 1}, {"samples": 5, "alpha": 1,
                        "ramp_samples": 6}]})")
                .find("schedule[1].ramp_samples"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{" + src + R"("schedule": [{"samples": 10, "alpha": 1, "ramp_samples": 2}]})")
                .find("schedule[0].ramp_samples"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{" + src + R"("schedule": [{"samples": 10, "alpha": 1}],
                    "max_epochs": {"books": 2}})")
                .find("max_epochs.books"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{" + src + R"("schedule": [{"samples": 10, "alpha": 1, "seq_length": -8}]})")
                .find("schedule[0].seq_length"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{" + src + R"("schedule": [{"samples": 10, "mixture": {"web": 0}}]})")
                .find("schedule[0].mixture"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"schedule": [{"samples": 10, "alpha": 1}]})").find("sources"),
            std::string::npos);
}

// --split weights (also a mixture's train parts): a negative one is refused naming the flag;
// Megatron's separators ("90-5-5") and its reading of "1e-3" (1 and 3) stay.
TEST(Split, NegativeWeightsAreRefusedNamingTheFlag) {
  for (const std::string bad : {"1,-2,3", "-1", "1, -.5", "98 , -2,0"}) {
    auto v = ParseAndNormalizeSplit(bad);
    ASSERT_FALSE(v.ok()) << bad;
    EXPECT_NE(v.status().message().find("--split '" + bad + "'"), std::string::npos)
        << v.status().ToString();
    EXPECT_NE(v.status().message().find("is negative"), std::string::npos) << v.status().ToString();
  }
  auto sep = ParseAndNormalizeSplit("90-5-5");
  ASSERT_TRUE(sep.ok()) << sep.status().ToString();
  EXPECT_EQ((*sep)[0], 0.9);
  auto exponent = ParseAndNormalizeSplit("1e-3");
  ASSERT_TRUE(exponent.ok()) << exponent.status().ToString();
  EXPECT_EQ((*exponent)[0], 0.25);
}

TEST(MixtureSchedule, AReorderOfTheSourcesIsNamed) {
  const std::string stage = R"("schedule": [{"samples": 4, "mixture": {"a": 1, "b": 1}}]})";
  const std::string ab = R"({"sources": {"a": "p/a", "b": "p/b"}, )" + stage;
  const std::string ba = R"({"sources": {"b": "p/b", "a": "p/a"}, )" + stage;
  const std::string other = R"({"sources": {"b": "p/c", "a": "p/a"}, )" + stage;
  EXPECT_NE(
      config::DescribeSourceReorder(ab, ba).find("reorders the sources (saved: a, b; now: b, a)"),
      std::string::npos)
      << config::DescribeSourceReorder(ab, ba);
  EXPECT_EQ(config::DescribeSourceReorder(ab, ab), "");
  EXPECT_EQ(config::DescribeSourceReorder(ab, other), "");  // another store: not a reorder
}

TEST(MixtureSchedule, YamlBecomesCanonicalJsonAndWithoutScheduleNothingChanges) {
  const std::string dir = gridfeed::testing::ScratchDir("mixture_yaml");
  const std::string with = dir + "/with.yaml", without = dir + "/without.yaml";
  std::ofstream(with) << "seq-length: 64\n"
                         "sources: {web: data/web, code: {path: data/code, tokens: 100e9}}\n"
                         "schedule:\n"
                         "  - {name: main, tokens: 800e9, mixture: {web: 0.6, code: 0.4}}\n"
                         "  - {name: anneal, tokens: 50e9, mixture: {web: 0.3, code: 0.7},"
                         " ramp_tokens: 10e9}\n"
                         "max_epochs: {code: 2.5}\n";
  std::ofstream(without) << "seq-length: 64\ndata-path: [data/web]\n";
  config::JobOptions o;
  ASSERT_TRUE(config::ApplyYaml(with, config::Groups::All(), &o).ok());
  auto s = config::ParseMixtureSchedule(o.data.mixture_schedule);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->sources.size(), 2u);
  EXPECT_EQ(s->sources[0].name, "web");  // the YAML's order is the source order
  EXPECT_EQ(s->sources[1].tokens, 100000000000);
  ASSERT_EQ(s->stages.size(), 2u);
  EXPECT_EQ(s->stages[0].budget, 800000000000);
  EXPECT_EQ(s->stages[1].ramp, 10000000000);
  EXPECT_EQ(s->max_epochs[1], 2.5);
  EXPECT_EQ(config::MixtureScheduleJson(*s), o.data.mixture_schedule);  // canonical: a fixpoint
  config::JobOptions plain;
  ASSERT_TRUE(config::ApplyYaml(without, config::Groups::All(), &plain).ok());
  EXPECT_TRUE(plain.data.mixture_schedule.empty());
  std::ofstream(with) << "sources: {web: data/web}\nschedule: [{samples: 5, mixture: {webb: 1}}]\n";
  const Status bad = config::ApplyYaml(with, config::Groups::All(), &o);
  EXPECT_NE(bad.message().find("schedule[0].mixture.webb"), std::string::npos) << bad.ToString();
  EXPECT_NE(bad.message().find(with), std::string::npos);
}

MixtureLayout SeedLayout(const std::string& extra_stages, const std::string& caps) {
  config::JobOptions o;
  o.data.seq_length = 4096;
  o.data.mixture_schedule =
      R"({"sources": {"web": {"path": "w", "tokens": 800e9}, "code": {"path": "c", "tokens": 100e9},
          "books": {"path": "b", "tokens": 50e9}},
          "schedule": [{"name": "main", "tokens": 1000e9,
                        "mixture": {"web": 0.5, "code": 0.3, "books": 0.2}})" +
      extra_stages + "]" + caps + "}";
  auto l = LayoutMixture(o);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  return l.ok() ? *l : MixtureLayout{};
}

TEST(MixturePlan, SeedFiguresEffectiveEpochs) {
  const MixtureLayout l = SeedLayout("", "");
  auto p = PlanMixture(l, {800e9, 100e9, 50e9}, {true, true, true});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  // 1000B tokens at 0.5/0.3/0.2 over 800B/100B/50B: 500/800, 300/100, 200/50.
  EXPECT_NEAR(p->total_epochs[0], 0.625, 1e-9);
  EXPECT_NEAR(p->total_epochs[1], 3.0, 1e-9);
  EXPECT_NEAR(p->total_epochs[2], 4.0, 1e-9);
  EXPECT_NEAR(p->total_tokens[0], 500e9, 1e3);
  EXPECT_NEAR(p->natural_share[0], 800.0 / 950, 1e-12);
  EXPECT_EQ(EpochVerdict(p->total_epochs[0]), "part never seen (37.5% unseen)");
  EXPECT_EQ(EpochVerdict(p->total_epochs[1]), "ok");
  EXPECT_EQ(EpochVerdict(p->total_epochs[2]), "memorisation risk (>= 4 epochs)");
  const std::string text = PlanText(*p);
  EXPECT_NE(text.find("0.625"), std::string::npos) << text;
  EXPECT_NE(text.find("memorisation risk"), std::string::npos);
}

TEST(MixturePlan, CapBindsWhereTheCumulativeTargetReachesIt) {
  // books capped at 2.5 epochs = 125B tokens at a 0.2 share: after 625B of the 1000B. As the
  // run counts it: an epoch of books is floor((50e9 - 1) / 4096) = 12207031 samples, the cap
  // floor(2.5 x 12207031) = 30517577 samples, reached at 0.2 x p = 30517577: p = 152587885.
  const MixtureLayout l = SeedLayout("", R"(, "max_epochs": {"books": 2.5})");
  auto p = PlanMixture(l, {800e9, 100e9, 50e9}, {true, true, true});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->caps.size(), 1u);
  EXPECT_EQ(p->caps[0].source, 2);
  EXPECT_EQ(p->caps[0].position, 152587885);
  EXPECT_NEAR(static_cast<double>(p->caps[0].position) * 4096, 625e9, 4096 * 8);
  EXPECT_NEAR(p->total_epochs[2], 2.5, 1e-6);
  // The remaining 375B go 5:3 to web and code.
  EXPECT_NEAR(p->total_tokens[0], 312.5e9 + 375e9 * 5 / 8, 1e4);
  EXPECT_NEAR(p->total_tokens[1], 187.5e9 + 375e9 * 3 / 8, 1e4);
}

TEST(MixturePlan, TemperatureWeightsFollowTheSizes) {
  const MixtureLayout l =
      SeedLayout(R"(, {"name": "t", "tokens": 100e9, "temperature": 2, "ramp_tokens": 10e9})", "");
  auto p = PlanMixture(l, {800e9, 100e9, 50e9}, {true, true, true});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->stages.size(), 2u);
  const double a = std::sqrt(800.0), b = std::sqrt(100.0), c = std::sqrt(50.0);
  EXPECT_NEAR(p->stages[1].weights[0], a / (a + b + c), 1e-12);
  EXPECT_NEAR(p->stages[1].weights[2], c / (a + b + c), 1e-12);
}

// A small temperature (exponent 100: 800e9^100 overflows a double) gives finite weights that
// follow the sizes, in the plan and in the blend the run builds; ordinary temperatures keep
// the direct powers' doubles.
TEST(MixturePlan, SmallTemperatureDoesNotOverflow) {
  const MixtureLayout l =
      SeedLayout(R"(, {"name": "t", "tokens": 100e9, "temperature": 0.01})", "");
  const std::vector<double> sizes = {800e9, 100e9, 50e9};
  auto p = PlanMixture(l, sizes, {true, true, true});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const auto& w = p->stages[1].weights;
  EXPECT_EQ(w[0], 1.0);  // (100/800)^100 and (50/800)^100 vanish next to 1
  EXPECT_NEAR(w[1] / std::pow(0.125, 100), 1.0, 1e-9);
  EXPECT_NEAR(w[2] / std::pow(0.0625, 100), 1.0, 1e-9);
  for (double x : p->total_tokens) EXPECT_TRUE(std::isfinite(x));
  EXPECT_TRUE(p->caps.empty());
  auto blend = BuildScheduledBlend(MixtureStages(l, {8e6, 1e6, 5e5}), {-1, -1, -1});
  ASSERT_TRUE(blend.ok()) << blend.status().ToString();
  // temperature 2: the direct powers, normalised as Megatron normalises, to the bit.
  const MixtureLayout two = SeedLayout(R"(, {"name": "t", "tokens": 100e9, "temperature": 2})", "");
  const auto stages = MixtureStages(two, sizes);
  EXPECT_EQ(stages[1].weights,
            Normalize({std::pow(800e9, 0.5), std::pow(100e9, 0.5), std::pow(50e9, 0.5)}));
}

TEST(ShardPlan, HundredShardsOnThirtyTwoConsumers) {
  auto p = PlanShards(100, 8, 4);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->consumers, 32);
  EXPECT_EQ(p->high_load, 4);
  EXPECT_EQ(p->consumers_high, 4);
  EXPECT_EQ(p->low_load, 3);
  EXPECT_NEAR(p->utilisation, 0.78125, 1e-12);
  EXPECT_EQ(p->duplicates, 28);
  EXPECT_NEAR(p->duplicate_rate, 0.28, 1e-12);
  EXPECT_EQ(p->dropped, 4);
  EXPECT_EQ(p->even_below, 96);
  EXPECT_EQ(p->even_above, 128);
  EXPECT_NE(ShardPlanText(*p).find("78.1%"), std::string::npos) << ShardPlanText(*p);
  auto even = PlanShards(128, 8, 4);
  ASSERT_TRUE(even.ok());
  EXPECT_EQ(even->utilisation, 1.0);
  EXPECT_EQ(even->duplicates, 0);
  // An even plan says so, rather than "32 read 4, 0 read 4" and "128 and 128".
  const std::string text = ShardPlanText(*even);
  EXPECT_NE(text.find("load: each of the 32 consumers reads 4 shards"), std::string::npos) << text;
  EXPECT_NE(text.find("128 shards divide evenly"), std::string::npos) << text;
  EXPECT_EQ(text.find(", 0 read"), std::string::npos) << text;
  EXPECT_FALSE(PlanShards(0, 8, 4).ok());
}

}  // namespace
}  // namespace gridfeed::order
