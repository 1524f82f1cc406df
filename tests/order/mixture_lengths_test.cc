// Mixture stages with their own seq_length: the configuration, the layout, each source read
// from its own Megatron tables at the stage's length (checked against Megatron's single-source
// order at that length, itself checked against golden vectors), the table image, and caps that
// count tokens across lengths.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "golden_util.h"
#include "gridfeed/config/mixture_schedule.h"
#include "gridfeed/order/megatron/megatron_pipeline.h"
#include "gridfeed/order/mixture/mixture_pipeline.h"
#include "gridfeed/order/mixture/order_prefix.h"
#include "gridfeed/order/pipeline.h"
#include "gridfeed/order/split.h"
#include "gridfeed/order/table_image.h"
#include "testing/paths.h"

namespace gridfeed::order {
namespace {

using gridfeed::testing::GoldenDir;
using nlohmann::json;

config::JobOptions Options(const std::string& schedule_json, int64_t micro_batch = 1) {
  config::JobOptions o;
  auto parsed = config::ParseMixtureSchedule(schedule_json);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  if (parsed.ok()) o.data.mixture_schedule = config::MixtureScheduleJson(*parsed);
  o.data.seq_length = 128;
  o.data.seed = 555;
  o.data.split = "99,1,0";
  o.batch.micro_batch_size = micro_batch;
  return o;
}

TEST(MixtureStageLength, ParsesRoundTripsAndIsAbsentUnlessSet) {
  const std::string with = R"({"sources": {"a": "p/a", "b": "p/b"},
      "schedule": [{"name": "main", "samples": 10, "mixture": {"a": 1, "b": 1}},
                   {"name": "long", "samples": 4, "seq_length": 256, "mixture": {"a": 1}}]})";
  auto s = config::ParseMixtureSchedule(with);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->stages[0].seq_length, 0);
  EXPECT_EQ(s->stages[1].seq_length, 256);
  const std::string canonical = config::MixtureScheduleJson(*s);
  auto again = config::ParseMixtureSchedule(canonical);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(config::MixtureScheduleJson(*again), canonical);
  const json j = json::parse(canonical);
  EXPECT_FALSE(j["schedule"][0].contains("seq_length"));
  EXPECT_EQ(j["schedule"][1]["seq_length"].get<int64_t>(), 256);
}

TEST(MixtureStageLength, BadValuesAndSharedStoresNameTheKey) {
  auto zero = config::ParseMixtureSchedule(R"({"sources": {"a": "p/a"},
      "schedule": [{"samples": 4, "seq_length": 0, "mixture": {"a": 1}}]})");
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("schedule[0].seq_length"), std::string::npos)
      << zero.status().ToString();
  auto shared = config::ParseMixtureSchedule(R"({"sources": {"a": "p/a", "b": "p/a"},
      "schedule": [{"samples": 4, "mixture": {"a": 1}}]})");
  ASSERT_FALSE(shared.ok());
  EXPECT_NE(shared.status().message().find("sources.b.path"), std::string::npos)
      << shared.status().ToString();
}

TEST(MixtureStageLength, ContextParallelNeedsEveryStageLengthDivisible) {
  config::JobOptions o = Options(R"({"sources": {"a": "p/a"},
      "schedule": [{"samples": 8, "mixture": {"a": 1}},
                   {"samples": 8, "seq_length": 102, "mixture": {"a": 1}}]})");
  o.grid.context_parallel_size = 2;
  const Status st = config::Validate(o);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("schedule[1].seq_length 102"), std::string::npos) << st.ToString();
}

TEST(MixtureStageLength, LayoutConvertsTokensAtTheStageLength) {
  // Tokens convert at the stage's own length; the long stage starts after 12 samples.
  config::JobOptions o = Options(R"({"sources": {"a": "p/a"},
      "schedule": [{"name": "main", "tokens": 1536, "mixture": {"a": 1}},
                   {"name": "long", "tokens": 2561, "seq_length": 256, "mixture": {"a": 1}},
                   {"name": "more", "samples": 5, "seq_length": 256, "mixture": {"a": 1}}]})",
                                 /*micro_batch=*/4);
  auto l = LayoutMixture(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->stage_samples, (std::vector<int64_t>{12, 11, 5}));
  EXPECT_EQ(l->stage_seq_length, (std::vector<int64_t>{128, 256, 256}));
  // Whether a change of length falls between global batches depends on the batches a run
  // reads (from where it resumes): the feeder checks it (mpi_feeder, cli_mixture_mpi), not the
  // layout.
  o = Options(R"({"sources": {"a": "p/a"},
      "schedule": [{"name": "main", "tokens": 1536, "mixture": {"a": 1}},
                   {"name": "long", "tokens": 2561, "seq_length": 256, "mixture": {"a": 1}},
                   {"name": "again", "samples": 5, "mixture": {"a": 1}}]})",
              4);
  l = LayoutMixture(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->stage_begin, (std::vector<int64_t>{0, 12, 23, 28}));
}

TEST(MixtureStageLength, SeqLengthsMergeStagesOfOneLength) {
  const config::JobOptions o = Options(R"({"sources": {"a": "p/a"},
      "schedule": [{"samples": 4, "mixture": {"a": 1}},
                   {"samples": 4, "seq_length": 128, "mixture": {"a": 1}},
                   {"samples": 8, "seq_length": 512, "mixture": {"a": 1}},
                   {"samples": 2, "mixture": {"a": 1}}]})",
                                       4);
  auto s = SeqLengthsOf(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->begin, (std::vector<int64_t>{0, 8, 16}));
  EXPECT_EQ(s->length, (std::vector<int64_t>{128, 512, 128}));
  EXPECT_EQ(s->At(7), 128);
  EXPECT_EQ(s->At(8), 512);
  EXPECT_EQ(s->At(15), 512);
  EXPECT_EQ(s->At(16), 128);
  EXPECT_EQ(s->max(), 512);
}

using gridfeed::testing::InGoldenDir;

const char* kPrefixes[] = {"corpora/corpus_u16", "corpora/corpus_i32", "corpora/corpus_multi"};

std::string Schedule(bool long_stage) {
  return std::string(R"({"sources": {"u16": "corpora/corpus_u16", "i32": "corpora/corpus_i32",
      "multi": "corpora/corpus_multi"},
      "schedule": [{"name": "main", "samples": 96, "mixture": {"u16": 2, "i32": 3, "multi": 5}},
                   {"name": "long", "samples": 64, "ramp_samples": 16,)") +
         (long_stage ? R"("seq_length": 256,)" : "") +
         R"("mixture": {"u16": 6, "i32": 1, "multi": 3}}]})";
}

// Megatron's own order of one source at one length, one epoch (whose tables do not depend on
// the samples asked for within it).
std::unique_ptr<BuiltOrder> MegatronAlone(const std::string& prefix, int64_t seq_length) {
  config::DataOptions d;
  d.data_path = {prefix};
  d.split = "99,1,0";
  d.seq_length = seq_length;
  d.seed = 555;
  d.train_samples = "1";
  auto built = MakeMegatronPipeline(d)->Build();
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  return built.ok() ? std::move(built).value() : nullptr;
}

TEST_F(InGoldenDir, LongStageReadsEachSourceFromItsOwnTablesAtThatLength) {
  auto with = MakeMixturePipeline(Options(Schedule(true)))->Build();
  ASSERT_TRUE(with.ok()) << with.status().ToString();
  auto without = MakeMixturePipeline(Options(Schedule(false)))->Build();
  ASSERT_TRUE(without.ok()) << without.status().ToString();
  const OrderView& a = (*with)->view();
  const OrderView& b = (*without)->view();
  ASSERT_EQ(a.length(Split::kTrain), 160);
  const auto sources = a.Sources(Split::kTrain);
  ASSERT_EQ(sources.size(), 3u);
  EXPECT_EQ(sources[1].name, "i32");
  std::vector<std::unique_ptr<BuiltOrder>> alone;
  for (const char* prefix : kPrefixes) {
    alone.push_back(MegatronAlone(prefix, 256));
    ASSERT_NE(alone.back(), nullptr);
  }
  std::map<int, int64_t> drawn_long;
  for (int64_t p = 0; p < 160; ++p) {
    // Which source serves a position does not depend on lengths given in samples.
    const int k = a.SourceOf(Split::kTrain, p);
    ASSERT_EQ(k, b.SourceOf(Split::kTrain, p)) << p;
    Sample got, want;
    const SampleRecord r = a.Read(Split::kTrain, p, &got, true);
    EXPECT_EQ(r.dataset, k);
    if (p < 96) {  // the main stage is the order without stage lengths
      const SampleRecord w = b.Read(Split::kTrain, p, &want, true);
      ASSERT_EQ(r, w) << p;
      ASSERT_EQ(got.tokens, want.tokens) << p;
      continue;
    }
    // The long stage: the source's j-th sample at 256 tokens in Megatron's own order.
    const int64_t j = drawn_long[k]++;
    ASSERT_EQ(got.tokens.size(), 256u);
    const OrderView& m = alone[static_cast<size_t>(k)]->view();
    ASSERT_LT(j, m.Sources(Split::kTrain)[0].samples_per_epoch) << "one epoch at most";
    const SampleRecord w = m.Read(Split::kTrain, j, &want, true);
    EXPECT_EQ(r.dataset_sample, j) << p;
    EXPECT_EQ(r.first_document, w.first_document) << p;
    EXPECT_EQ(r.first_offset, w.first_offset) << p;
    EXPECT_EQ(r.token_xxh3, w.token_xxh3) << p;
    ASSERT_EQ(got.tokens, want.tokens) << p;
    ASSERT_EQ(got.labels, want.labels) << p;
  }
  EXPECT_EQ(drawn_long.size(), 3u);
  // The resolved lengths are in the data facts (fingerprint), not there without them.
  EXPECT_EQ(json::parse((*with)->DataFacts())["mixture"]["stage_seq_length"],
            json::parse("[128, 256]"));
  EXPECT_FALSE(json::parse((*without)->DataFacts())["mixture"].contains("stage_seq_length"));
}

TEST_F(InGoldenDir, TheImageKeepsEachTablesLength) {
  const config::JobOptions o = Options(Schedule(true));
  auto pipeline = MakeMixturePipeline(o);
  auto built = pipeline->Build();
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  std::vector<SampleRecord> want;
  for (int64_t p = 0; p < 160; ++p) {
    Sample s;
    want.push_back((*built)->view().Read(Split::kTrain, p, &s, true));
  }
  auto writer = (*built)->TakeImage();
  std::vector<std::byte> image(writer->size());
  writer->WriteTo(image.data());
  auto view = pipeline->ViewImage(image);
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  ASSERT_TRUE((*view)->OpenTokenStores(false).ok());
  for (int64_t p = 0; p < 160; ++p) {
    Sample s;
    EXPECT_EQ((*view)->Read(Split::kTrain, p, &s, true), want[static_cast<size_t>(p)]) << p;
    EXPECT_EQ(s.tokens.size(), p < 96 ? 128u : 256u);
  }
  // The same image under a schedule without the long stage's length is refused.
  auto other = MakeMixturePipeline(Options(Schedule(false)))->ViewImage(image);
  EXPECT_FALSE(other.ok());
}

TEST_F(InGoldenDir, CapsCountTokensAcrossLengths) {
  // multi is capped at 0.2 epochs of 128-token samples; a 256-token sample counts twice.
  const std::string schedule = R"({"sources": {"i32": "corpora/corpus_i32",
      "multi": "corpora/corpus_multi"},
      "schedule": [{"name": "main", "samples": 40, "mixture": {"i32": 1, "multi": 1}},
                   {"name": "long", "samples": 400, "seq_length": 256,
                    "mixture": {"i32": 1, "multi": 1}}],
      "max_epochs": {"multi": 0.2}})";
  auto built = MakeMixturePipeline(Options(schedule))->Build();
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  const OrderView& v = (*built)->view();
  const auto sources = v.Sources(Split::kTrain);
  ASSERT_EQ(sources[1].seq_length, 0) << "epochs are counted at --seq-length";
  const int64_t cap = static_cast<int64_t>(std::floor(0.2 * sources[1].samples_per_epoch)) * 128;
  int64_t tokens = 0, bound_at = -1;
  for (int64_t p = 0; p < v.length(Split::kTrain); ++p) {
    if (v.SourceOf(Split::kTrain, p) != 1) continue;
    ASSERT_LT(tokens, cap) << "drawn after its cap, at " << p;
    tokens += p < 40 ? 128 : 256;
    if (tokens >= cap) bound_at = p + 1;
  }
  ASSERT_GT(bound_at, 40) << "the cap must bind in the long stage for this test";
  ASSERT_LT(bound_at, 440);
  const json facts = json::parse((*built)->DataFacts());
  ASSERT_EQ(facts["mixture"]["caps"].size(), 1u);
  EXPECT_EQ(facts["mixture"]["caps"][0]["position"].get<int64_t>(), bound_at);
}

TableView ImageOf(const std::string& schedule, std::vector<std::byte>* image) {
  auto built = MakeMixturePipeline(Options(schedule))->Build();
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  if (!built.ok()) return {};
  auto writer = (*built)->TakeImage();
  image->resize(writer->size());
  writer->WriteTo(image->data());
  auto view = ParseTableImage(*image);
  EXPECT_TRUE(view.ok()) << view.status().ToString();
  return view.ok() ? *view : TableView();
}

// An amendment that adds a (length, source) table renumbers the tables after it; the past it
// keeps is still the same samples (what --allow-schedule-change compares).
TEST_F(InGoldenDir, AnAddedTableKeepsThePastIdentical) {
  const std::string saved = R"({"sources": {"u16": "corpora/corpus_u16",
      "i32": "corpora/corpus_i32"},
      "schedule": [{"name": "main", "samples": 64, "mixture": {"u16": 1, "i32": 1}},
                   {"name": "long", "samples": 32, "seq_length": 256, "mixture": {"i32": 1}}]})";
  const std::string amended = R"({"sources": {"u16": "corpora/corpus_u16",
      "i32": "corpora/corpus_i32"},
      "schedule": [{"name": "main", "samples": 64, "mixture": {"u16": 1, "i32": 1}},
                   {"name": "long", "samples": 16, "seq_length": 256, "mixture": {"i32": 1}},
                   {"name": "long2", "samples": 16, "seq_length": 256,
                    "mixture": {"u16": 1, "i32": 1}}]})";
  std::vector<std::byte> ia, ib;
  const TableView a = ImageOf(saved, &ia), b = ImageOf(amended, &ib);
  ASSERT_TRUE(a.splits[0] && b.splits[0]);
  ASSERT_EQ(a.splits[0]->sources.size(), 3u);  // u16, i32 at 128; i32 at 256
  ASSERT_EQ(b.splits[0]->sources.size(), 4u);  // u16, i32 at 128; u16, i32 at 256
  EXPECT_EQ(b.splits[0]->Locate(64).first, 3) << "i32 at 256 is renumbered";
  EXPECT_EQ(FirstDifference(a, b, 80), -1);
  // The positions after the amendment differ (u16 is drawn there now).
  EXPECT_GE(FirstDifference(a, b, 96), 80);
  // A source no stage draws from is reported with weight 0 and no table.
  auto none = MakeMixturePipeline(Options(R"({"sources": {"u16": "corpora/corpus_u16",
      "i32": "corpora/corpus_i32", "multi": "corpora/corpus_multi"},
      "schedule": [{"samples": 16, "mixture": {"u16": 1, "i32": 1}},
                   {"samples": 16, "seq_length": 256, "mixture": {"i32": 1}}]})"))
                  ->Build();
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  const auto sources = (*none)->view().Sources(Split::kTrain);
  ASSERT_EQ(sources.size(), 3u);
  EXPECT_EQ(sources[2].name, "multi");
  EXPECT_EQ(sources[2].weight, 0.0);
  EXPECT_NEAR(sources[0].weight + sources[1].weight, 1.0, 1e-12);
}

}  // namespace
}  // namespace gridfeed::order
