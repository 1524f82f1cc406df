// OLMo's whole image made by several producers (Pipeline::WholeShareUnits/BuildWholeShare,
// BuiltOrder::WholeSections/AssembleWholeImage): one unit per epoch; every producer's assembly
// of every producer's sections is byte for byte one process's Build()->TakeImage(), and
// sections that are damaged, missing, doubled, misnamed or of another order are refused.
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "gridfeed/order/node_image.h"
#include "gridfeed/order/olmo/olmo_pipeline.h"
#include "gridfeed/order/sections.h"
#include "testing/paths.h"

namespace gridfeed::order {
namespace {

constexpr int64_t kSeq = 16;

// `tokens` random uint16 tokens (and a 0/1 label mask byte per token beside them).
void WriteTokens(const std::string& path, int64_t tokens, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint16_t> t(static_cast<size_t>(tokens));
  for (auto& x : t) x = static_cast<uint16_t>(rng() % 50000);
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(t.data()), static_cast<std::streamsize>(t.size() * 2));
  std::vector<uint8_t> mask(static_cast<size_t>(tokens));
  for (auto& x : mask) x = static_cast<uint8_t>(rng() % 4 != 0);
  std::ofstream m(path.substr(0, path.size() - 4) + ".mask.npy", std::ios::binary);
  m.write(reinterpret_cast<const char*>(mask.data()), static_cast<std::streamsize>(mask.size()));
}

// A data mix with labels over five files (one empty, tails that do not fill an instance):
// 30 + 7 + 0 + 21 + 1 = 59 instances of 16 tokens.
config::JobOptions MixOptions() {
  const std::string dir = testing::ScratchDir("olmo_producers");
  const std::vector<std::pair<int64_t, std::string>> files = {{30 * kSeq + 5, "web"},
                                                              {7 * kSeq, "books"},
                                                              {0, "web"},
                                                              {21 * kSeq + 15, "code"},
                                                              {kSeq, "books"}};
  config::JobOptions o;
  for (size_t k = 0; k < files.size(); ++k) {
    const std::string path = dir + "/part-" + std::to_string(k) + ".npy";
    WriteTokens(path, files[k].first, static_cast<uint32_t>(k + 1));
    o.data.olmo_paths.push_back(path);
    o.data.olmo_path_labels.push_back(files[k].second);
    o.data.olmo_label_mask_paths.push_back(dir + "/part-" + std::to_string(k) + ".mask.npy");
  }
  o.data.seq_length = kSeq;
  o.data.seed = 6198;
  o.grid.data_parallel_size = 2;
  o.batch.global_batch_size = 4;
  o.batch.micro_batch_size = 2;
  o.run.train_iters = 70;  // 5 epochs of 59 instances at DP 2
  return o;
}

// A restart inside the order (--consumed-samples), drop_last, DataLoader workers, DP 3.
config::JobOptions RestartOptions() {
  config::JobOptions o = MixOptions();
  o.grid.data_parallel_size = 3;
  o.batch.global_batch_size = 6;
  o.batch.micro_batch_size = 1;
  o.data.olmo_drop_last = true;
  o.data.olmo_num_workers = 2;
  o.data.olmo_epoch = 2;
  o.resume.consumed_samples = 70;
  o.run.train_iters = 25;
  return o;
}

std::unique_ptr<Pipeline> PipelineOf(const config::JobOptions& o) { return MakeOlmoPipeline(o); }

std::vector<std::byte> BytesOf(ImageWriter& w) {
  std::vector<uint64_t> words((w.size() + 7) / 8);  // 8-byte aligned
  w.WriteTo(reinterpret_cast<std::byte*>(words.data()));
  const auto* p = reinterpret_cast<const std::byte*>(words.data());
  return std::vector<std::byte>(p, p + w.size());
}

std::vector<std::byte> WholeImage(const config::JobOptions& o, std::string* facts = nullptr,
                                  int64_t* length = nullptr) {
  auto built = PipelineOf(o)->Build();
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  if (facts) *facts = (*built)->DataFacts();
  if (length) *length = (*built)->view().length(Split::kTrain);
  return BytesOf(*(*built)->TakeImage());
}

// Producers' shares as the feeder makes them: units planned by cost, every share built, its
// facts gathered and adopted by every share.
struct Shares {
  std::vector<std::unique_ptr<BuiltOrder>> share;
  std::vector<int> owner;  // producer of each epoch
};
Shares BuildShares(const config::JobOptions& o, int producers) {
  auto pipeline = PipelineOf(o);
  auto units = pipeline->WholeShareUnits();
  EXPECT_TRUE(units.ok()) << units.status().ToString();
  Shares s;
  s.owner = PlanProducers(*units, producers);
  std::vector<int64_t> facts;
  for (int p = 0; p < producers; ++p) {
    auto share = pipeline->BuildWholeShare([&](size_t e) { return s.owner.at(e) == p; });
    EXPECT_TRUE(share.ok()) << share.status().ToString();
    const auto f = (*share)->ShareFacts();
    facts.insert(facts.end(), f.begin(), f.end());
    s.share.push_back(std::move(share).value());
  }
  for (auto& share : s.share) {
    const Status adopted = share->AdoptShareFacts(facts);
    EXPECT_TRUE(adopted.ok()) << adopted.ToString();
  }
  return s;
}

std::vector<std::vector<std::byte>> SectionsOf(const Shares& s) {
  std::vector<std::vector<std::byte>> out;
  for (size_t p = 0; p < s.share.size(); ++p) {
    auto bytes = s.share[p]->WholeSections(static_cast<int>(p));
    EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
    out.push_back(std::move(bytes).value());
  }
  return out;
}

TEST(OlmoProducers, UnitsAreEpochs) {
  const config::JobOptions o = MixOptions();
  auto plan = PlanOlmoOrder(o);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->instances, 59);
  ASSERT_EQ(plan->epochs, 5);
  auto units = PipelineOf(o)->WholeShareUnits();
  ASSERT_TRUE(units.ok());
  EXPECT_EQ(*units, std::vector<uint64_t>(5, 59));
  // One epoch: nothing to divide.
  config::JobOptions one = o;
  one.run.train_iters = 2;
  auto none = PipelineOf(one)->WholeShareUnits();
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(PipelineOf(one)->BuildWholeShare([](size_t) { return true; }).status().code(),
            StatusCode::kFailedPrecondition);
  // A whole build has no sections.
  auto whole = PipelineOf(o)->Build();
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ((*whole)->WholeSections(0).status().code(), StatusCode::kFailedPrecondition);
}

// 1 to 4 producers (and 6, some without an epoch): every producer assembles the very image one
// process builds.
TEST(OlmoProducers, AssembledImageIsTheWholeBuilds) {
  for (const auto& o : {MixOptions(), RestartOptions()}) {
    std::string facts;
    int64_t length = 0;
    const std::vector<std::byte> want = WholeImage(o, &facts, &length);
    auto plan = PlanOlmoOrder(o);
    ASSERT_TRUE(plan.ok());
    ASSERT_GE(plan->epochs, 3);
    for (int producers : {1, 2, 3, 4, 6}) {  // 6: more producers than epochs
      SCOPED_TRACE(std::to_string(producers) + " producers, " + std::to_string(plan->epochs) +
                   " epochs, restart " + std::to_string(plan->restart));
      Shares s = BuildShares(o, producers);
      for (int p = 0; p < producers; ++p) {
        EXPECT_EQ(std::count(s.owner.begin(), s.owner.end(), p) > 0, p < plan->epochs);
      }
      for (auto& share : s.share) {
        EXPECT_EQ(share->DataFacts(), facts);  // the merge at rank 0 changes nothing
        EXPECT_EQ(share->view().length(Split::kTrain), length);
        EXPECT_EQ(share->view().length(Split::kValid), 0);
      }
      const auto sections = SectionsOf(s);
      for (auto& share : s.share) {  // as the feeder does once the sections are cut
        share->ReleaseShareTables();
        EXPECT_EQ(share->view().length(Split::kTrain), length);
        EXPECT_EQ(share->WholeSections(0).status().code(), StatusCode::kFailedPrecondition);
      }
      for (int p = 0; p < producers; ++p) {
        auto image = s.share[static_cast<size_t>(p)]->AssembleWholeImage(sections);
        ASSERT_TRUE(image.ok()) << image.status().ToString();
        const std::vector<std::byte> got = BytesOf(**image);
        ASSERT_EQ(got.size(), want.size());
        EXPECT_TRUE(got == want) << "producer " << p << "'s assembly differs";
        EXPECT_EQ(s.share[static_cast<size_t>(p)]->view().length(Split::kTrain), length);
      }
    }
    // The assembled image is one the pipeline views.
    EXPECT_TRUE(PipelineOf(o)->ViewImage(want).ok());
  }
}

// What a producer's assembly refuses, naming the producer.
Status AssembleAt0(const config::JobOptions& o, int producers,
                   const std::function<void(std::vector<std::vector<std::byte>>*)>& change) {
  Shares s = BuildShares(o, producers);
  auto sections = SectionsOf(s);
  change(&sections);
  return s.share[0]->AssembleWholeImage(std::move(sections)).status();
}

void ExpectRefused(const Status& st, const std::string& names) {
  EXPECT_EQ(st.code(), StatusCode::kDataLoss) << st.ToString();
  EXPECT_NE(st.message().find(names), std::string::npos) << st.ToString();
}

TEST(OlmoProducers, FlippedByteRefusedByDigest) {
  const config::JobOptions o = MixOptions();
  for (size_t at : {size_t{40}, size_t{200}, size_t{0}}) {  // a word, a permutation, the magic
    const Status st = AssembleAt0(o, 3, [&](auto* sections) {
      auto& bytes = (*sections)[1];
      ASSERT_LT(at, bytes.size());
      bytes[at] ^= std::byte{0x10};
    });
    ExpectRefused(st, "producer 1");
  }
  const Status st =
      AssembleAt0(o, 3, [](auto* sections) { (*sections)[2].back() ^= std::byte{1}; });
  ExpectRefused(st, "producer 2 fail their digest");
}

TEST(OlmoProducers, MissingEpochRefused) {
  const config::JobOptions o = MixOptions();
  ExpectRefused(AssembleAt0(o, 3,
                            [](auto* sections) {
                              (*sections)[2] = SectionWriter(2).Seal();  // none of its epochs
                            }),
                "no producer gave epoch");
  // Fewer producers' sections than producers.
  ExpectRefused(AssembleAt0(o, 2, [](auto* sections) { sections->pop_back(); }),
                "no producer gave epoch");
}

TEST(OlmoProducers, MisnamedSectionsRefused) {
  const config::JobOptions o = MixOptions();
  // Producer 1's sections passed as producer 0's (and 0's as 1's).
  ExpectRefused(
      AssembleAt0(o, 3, [](auto* sections) { std::swap((*sections)[0], (*sections)[1]); }),
      "producer 0");
}

TEST(OlmoProducers, EpochTwiceOrOfWrongLengthRefused) {
  const config::JobOptions o = MixOptions();
  auto plan = PlanOlmoOrder(o);
  ASSERT_TRUE(plan.ok());
  // Producer 1 also sends an epoch producer 0 gave.
  Shares s = BuildShares(o, 2);
  int given_by_0 = -1;
  for (size_t e = 0; e < s.owner.size(); ++e) {
    if (s.owner[e] == 0 && given_by_0 < 0) given_by_0 = static_cast<int>(e);
  }
  ASSERT_GE(given_by_0, 0);
  auto pipeline = PipelineOf(o);
  auto all = pipeline->BuildWholeShare([](size_t) { return true; });
  ASSERT_TRUE(all.ok());
  auto sections = SectionsOf(s);
  sections[1] = *(*all)->WholeSections(1);
  ExpectRefused(s.share[0]->AssembleWholeImage(std::move(sections)).status(),
                "producer 1: epoch " + std::to_string(given_by_0) + " unknown or given twice");
  // An epoch of another length, or past the last.
  for (const uint64_t epoch : {uint64_t{1}, static_cast<uint64_t>(plan->epochs)}) {
    const uint64_t len = epoch == 1 ? static_cast<uint64_t>(plan->instances - 1) : 1;
    const Status st = AssembleAt0(o, 2, [&](auto* sections) {
      SectionWriter w(1);
      w.Begin();
      w.PutWord(epoch);
      w.PutWord(len);
      const std::vector<uint32_t> perm(len, 0);
      w.Put(std::span<const uint32_t>(perm));
      (*sections)[1] = std::move(w).Seal();
    });
    ExpectRefused(st, "producer 1: epoch " + std::to_string(epoch));
  }
}

// A producer whose token files differ (another order) is refused when the facts are adopted.
TEST(OlmoProducers, ProducersOfAnotherOrderRefused) {
  config::JobOptions o = MixOptions();
  auto mine = PipelineOf(o)->BuildWholeShare([](size_t e) { return e % 2 == 0; });
  config::JobOptions other = o;
  other.data.olmo_paths.pop_back();
  other.data.olmo_path_labels.pop_back();
  other.data.olmo_label_mask_paths.pop_back();
  auto theirs = PipelineOf(other)->BuildWholeShare([](size_t e) { return e % 2 == 1; });
  ASSERT_TRUE(mine.ok() && theirs.ok());
  std::vector<int64_t> facts = (*mine)->ShareFacts();
  const auto t = (*theirs)->ShareFacts();
  facts.insert(facts.end(), t.begin(), t.end());
  ExpectRefused((*mine)->AdoptShareFacts(facts), "table producer 1");
  ExpectRefused((*mine)->AdoptShareFacts(std::span<const int64_t>(facts).first(3)), "malformed");
}

}  // namespace
}  // namespace gridfeed::order
