// Many producers of the whole image (Pipeline::WholeShareUnits/BuildWholeShare, BuiltOrder::
// WholeSections/AssembleWholeImage): a Megatron weighted blend's stores and a mixture
// schedule's sources divided among 1 to 4 producers give, on every producer, the image one
// process's Build()->TakeImage() gives, byte for byte, and the data facts merged as world rank 0
// merges them give one process's. Sections that were changed, are missing, give a table twice or
// tables of another length are refused, naming the producer.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "gridfeed/config/mixture_schedule.h"
#include "gridfeed/order/node_image.h"
#include "gridfeed/order/pipeline.h"
#include "testing/paths.h"

namespace gridfeed::order {
namespace {

// Runs in the golden folder (the options' relative store paths), then goes back.
class InGolden {
 public:
  InGolden() : cwd_(std::filesystem::current_path()) {
    std::filesystem::current_path(gridfeed::testing::GoldenDir());
  }
  ~InGolden() { std::filesystem::current_path(cwd_); }

 private:
  std::filesystem::path cwd_;
};

config::JobOptions Megatron(const std::string& split, const std::string& train = "3000",
                            const std::string& valid = "0", const std::string& test = "0") {
  config::JobOptions o;
  o.data.data_path = {"0.4", "corpora/corpus_u16",   "0.3", "corpora/corpus_i32",
                      "0.2", "corpora/corpus_multi", "0.1", "corpora/corpus_tiny"};
  o.data.split = split;
  o.data.seq_length = 64;
  o.data.train_samples = train;
  o.data.valid_samples = valid;
  o.data.test_samples = test;
  return o;
}

// Two stages (the second with a ramp, a cap on one source); `long_anneal`: the second reads
// 128 tokens per sample and draws nothing from i32 there (a source without a table at a length).
config::JobOptions Mixture(bool long_anneal) {
  const std::string anneal_length = long_anneal ? R"(, "seq_length": 128)" : "";
  const std::string anneal_mix =
      long_anneal ? R"({"u16": 0.3, "multi": 0.7})" : R"({"u16": 0.2, "i32": 0.3, "multi": 0.5})";
  const std::string schedule = R"({"sources": {"u16": "corpora/corpus_u16",
      "i32": "corpora/corpus_i32", "multi": "corpora/corpus_multi"},
      "schedule": [{"name": "main", "samples": 96, "mixture": {"u16": 0.6, "i32": 0.3,
                    "multi": 0.1}},
                   {"name": "anneal", "samples": 96, "ramp_samples": 32, "mixture": )" +
                               anneal_mix + anneal_length + R"(}],
      "max_epochs": {"multi": 3}})";
  config::JobOptions o;
  auto parsed = config::ParseMixtureSchedule(schedule);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  if (parsed.ok()) o.data.mixture_schedule = config::MixtureScheduleJson(*parsed);
  o.data.seq_length = 64;
  o.data.split = "969,30,1";
  o.batch.micro_batch_size = 2;
  o.batch.global_batch_size = 16;
  return o;
}

std::unique_ptr<Pipeline> PipelineOf(const config::JobOptions& o) {
  auto p = Pipeline::For(o);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? std::move(p).value() : nullptr;
}

std::vector<std::byte> Bytes(ImageWriter& w) {
  std::vector<std::byte> image(w.size());
  w.WriteTo(image.data());
  return image;
}

// One process's image and data facts.
std::pair<std::vector<std::byte>, std::string> OneProcess(const Pipeline& p) {
  auto built = p.Build();
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  if (!built.ok()) return {};
  const std::string facts = (*built)->DataFacts();
  return {Bytes(*(*built)->TakeImage()), facts};
}

// Each producer's share with every producer's facts adopted, as the feeder leaves them before
// the sections: `owner[u]` builds unit u. The data facts merged as world rank 0 merges them.
std::vector<std::unique_ptr<BuiltOrder>> Shares(const Pipeline& p, const std::vector<int>& owner,
                                                int producers, std::string* merged = nullptr) {
  std::vector<std::unique_ptr<BuiltOrder>> shares;
  std::vector<int64_t> facts;
  nlohmann::json data = nlohmann::json::object();
  for (int q = 0; q < producers; ++q) {
    auto share = p.BuildWholeShare([&, q](size_t u) { return owner.at(u) == q; });
    EXPECT_TRUE(share.ok()) << share.status().ToString();
    if (!share.ok()) return {};
    const auto mine = (*share)->ShareFacts();
    facts.insert(facts.end(), mine.begin(), mine.end());
    data.update(nlohmann::json::parse((*share)->DataFacts()));
    shares.push_back(std::move(share).value());
  }
  for (auto& share : shares) {
    const Status adopted = share->AdoptShareFacts(facts);
    EXPECT_TRUE(adopted.ok()) << adopted.ToString();
  }
  if (merged) *merged = data.dump();
  return shares;
}

// Every producer's sections (its own tables released after, as the feeder does).
std::vector<std::vector<std::byte>> Sections(std::vector<std::unique_ptr<BuiltOrder>>& shares) {
  std::vector<std::vector<std::byte>> out;
  for (size_t q = 0; q < shares.size(); ++q) {
    auto s = shares[q]->WholeSections(static_cast<int>(q));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    out.push_back(s.ok() ? std::move(s).value() : std::vector<std::byte>());
    shares[q]->ReleaseShareTables();
  }
  return out;
}

void ExpectManyGiveOne(const config::JobOptions& o, const std::string& what) {
  InGolden here;
  auto p = PipelineOf(o);
  ASSERT_TRUE(p);
  const auto [one, one_facts] = OneProcess(*p);
  ASSERT_FALSE(one.empty());
  auto units = p->WholeShareUnits();
  ASSERT_TRUE(units.ok()) << units.status().ToString();
  ASSERT_GE(units->size(), 2u) << what << ": not divided";
  for (int producers : {1, 2, 3, 4}) {
    const std::vector<int> owner = PlanProducers(*units, producers);
    std::string merged;
    auto shares = Shares(*p, owner, producers, &merged);
    ASSERT_EQ(shares.size(), static_cast<size_t>(producers));
    EXPECT_EQ(merged, nlohmann::json::parse(one_facts).dump())
        << what << ", " << producers << " producers: the merged data facts differ";
    auto sections = Sections(shares);
    for (int q = 0; q < producers; ++q) {  // every producer assembles the same whole image
      auto image = shares[q]->AssembleWholeImage(sections);
      ASSERT_TRUE(image.ok()) << what << ": " << image.status().ToString();
      EXPECT_TRUE(Bytes(**image) == one)
          << what << ", " << producers << " producers: producer " << q << "'s image differs";
    }
  }
}

TEST(WholeProducers, MegatronBlendGivesOneProcesssImage) {
  ExpectManyGiveOne(Megatron("100,0,0"), "train only");
  config::JobOptions splits = Megatron("90,5,5", "3000", "200", "100");
  splits.data.data_path.resize(6);  // corpus_tiny holds too few documents for three splits
  ExpectManyGiveOne(splits, "three splits");
}

TEST(WholeProducers, MixtureScheduleGivesOneProcesssImage) {
  ExpectManyGiveOne(Mixture(false), "mixture");
  ExpectManyGiveOne(Mixture(true), "mixture with a longer anneal");
}

TEST(WholeProducers, OrdersBuiltWholeHaveNoUnits) {
  InGolden here;
  config::JobOptions o = Megatron("100,0,0");
  o.data.data_path = {"corpora/corpus_u16"};
  auto p = PipelineOf(o);
  ASSERT_TRUE(p);
  auto units = p->WholeShareUnits();
  ASSERT_TRUE(units.ok());
  EXPECT_TRUE(units->empty());
  EXPECT_EQ(p->BuildWholeShare([](size_t) { return true; }).status().code(),
            StatusCode::kFailedPrecondition);
}

// Three producers' sections (units 0 and 3 producer 0's), `change` applied, assembled by
// producer 0.
Status AssembleChanged(
    const config::JobOptions& o,
    const std::function<void(const Pipeline&, std::vector<std::vector<std::byte>>*)>& change) {
  InGolden here;
  auto p = PipelineOf(o);
  const std::vector<int> owner = {0, 1, 2, 0};
  auto shares = Shares(*p, owner, 3);
  auto sections = Sections(shares);
  if (change) change(*p, &sections);
  auto image = shares[0]->AssembleWholeImage(std::move(sections));
  return image.status();
}

void ExpectRefused(const Status& st, const std::string& says) {
  EXPECT_EQ(st.code(), StatusCode::kDataLoss) << st.ToString();
  EXPECT_NE(st.message().find(says), std::string::npos) << st.ToString();
}

TEST(WholeProducers, UnchangedSectionsAssemble) {
  const Status st = AssembleChanged(Megatron("100,0,0"), {});
  EXPECT_TRUE(st.ok()) << st.ToString();
}

TEST(WholeProducers, ChangedByteIsRefusedByItsDigest) {
  for (const auto& o : {Megatron("100,0,0"), Mixture(false)}) {
    ExpectRefused(AssembleChanged(o, [](const Pipeline&,
                                        auto* s) { (*s)[1][s->at(1).size() / 2] ^= std::byte{4}; }),
                  "the sections from producer 1 fail their digest");
  }
}

TEST(WholeProducers, MissingProducerIsNamed) {
  // Producer 2 (unit 2: corpus_multi) sent nothing: its sections are empty, or absent.
  ExpectRefused(
      AssembleChanged(Megatron("100,0,0"), [](const Pipeline&, auto* s) { s->pop_back(); }),
      "no producer gave the tables of dataset 'corpora/corpus_multi'");
  ExpectRefused(
      AssembleChanged(Megatron("100,0,0"), [](const Pipeline&, auto* s) { (*s)[2].clear(); }),
      "the sections from producer 2 are truncated");
}

TEST(WholeProducers, TablesGivenTwiceAreRefused) {
  // Producer 1 sends every table (a share of every unit).
  ExpectRefused(AssembleChanged(Megatron("100,0,0"),
                                [](const Pipeline& p, auto* s) {
                                  auto all = p.BuildWholeShare([](size_t) { return true; });
                                  ASSERT_TRUE(all.ok());
                                  (*s)[1] = (*all)->WholeSections(1).value();
                                }),
                "the sections from producer 1: split 0 dataset 0 unknown or given twice");
}

TEST(WholeProducers, TablesOfAnotherLengthAreRefused) {
  // Producer 1 built its store for ten times the samples: more epochs than its facts need.
  ExpectRefused(AssembleChanged(Megatron("100,0,0"),
                                [](const Pipeline&, auto* s) {
                                  auto other = PipelineOf(Megatron("100,0,0", "30000"));
                                  const std::vector<int> owner = {0, 1, 2, 0};
                                  auto share = other->BuildWholeShare(
                                      [&](size_t u) { return owner[u] == 1; });
                                  ASSERT_TRUE(share.ok()) << share.status().ToString();
                                  (*s)[1] = (*share)->WholeSections(1).value();
                                }),
                "the sections from producer 1: dataset 'corpora/corpus_i32' of split train has");
}

}  // namespace
}  // namespace gridfeed::order
