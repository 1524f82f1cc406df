// Many producers (order/node_image.h): a weighted blend's stores divided among producers, each
// building only its share; every node's image assembled from their sections is byte for byte
// the image one process's whole build gives. Sections that were changed, are missing, come
// from the wrong producer or from a producer with another blend are refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "gridfeed/order/dataset_builder.h"
#include "gridfeed/order/node_image.h"
#include "gridfeed/order/table_view.h"
#include "testing/paths.h"

namespace gridfeed::order {
namespace {

const std::vector<std::string> kStores = {"corpora/corpus_u16", "corpora/corpus_i32",
                                          "corpora/corpus_multi", "corpora/corpus_tiny"};

const std::vector<std::string> kWeights = {"0.4", "0.3", "0.2", "0.1"};

Result<BuiltDatasets> Build(std::function<bool(const std::string&)> builds_store,
                            const std::vector<std::string>& weights = kWeights) {
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(gridfeed::testing::GoldenDir());
  DatasetConfig c;
  c.data_path = std::vector<std::string>();
  for (size_t s = 0; s < kStores.size(); ++s) {
    if (!weights.empty()) c.data_path->push_back(weights[s]);
    c.data_path->push_back(kStores[s]);
  }
  c.split = "100,0,0";
  c.sizes = {3000, 0, 0};
  c.seq_length = 64;
  c.builds_store = std::move(builds_store);
  auto b = BuildDatasets(c);
  std::filesystem::current_path(cwd);
  return b;
}

std::vector<std::byte> Image(ImageWriter& w) {
  std::vector<std::byte> image(w.size());
  w.WriteTo(image.data());
  return image;
}

// Node n of `nodes`: every nodes-th run of 8 positions (a DP share of a schedule).
std::vector<int64_t> Held(int64_t length, int n, int nodes) {
  std::vector<int64_t> held;
  for (int64_t p = 8 * n; p < length; p += 8 * nodes) {
    for (int64_t q = p; q < std::min(p + 8, length); ++q) held.push_back(q);
  }
  return held;
}

// Each producer's share with every other producer's facts adopted.
std::vector<BuiltDatasets> Shares(const std::vector<int>& owner, int producers,
                                  const std::vector<std::string>& weights = kWeights) {
  std::vector<BuiltDatasets> shares;
  std::vector<int64_t> facts;
  for (int p = 0; p < producers; ++p) {
    auto b = Build(
        [&, p](const std::string& prefix) {
          const auto s = std::find(kStores.begin(), kStores.end(), prefix) - kStores.begin();
          return owner[static_cast<size_t>(s)] == p;
        },
        weights);
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    const auto mine = OwnMidFacts(*b);
    facts.insert(facts.end(), mine.begin(), mine.end());
    shares.push_back(std::move(b).value());
  }
  for (auto& share : shares) {
    const Status adopted = AdoptMidFacts(facts, &share);
    EXPECT_TRUE(adopted.ok()) << adopted.ToString();
  }
  return shares;
}

TEST(NodeSections, ManyProducersGiveOneProducersImage) {
  auto whole = Build({});
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  const int64_t length = whole->splits[0]->length;
  constexpr int kNodes = 3;
  for (int producers : {1, 2, 3, 4}) {
    const std::vector<int> owner = PlanProducers(std::vector<uint64_t>{40, 30, 20, 10}, producers);
    std::vector<BuiltDatasets> shares = Shares(owner, producers);
    for (const auto& share : shares) {  // a share opens its own stores only
      for (size_t k = 0; k < kStores.size(); ++k) {
        EXPECT_EQ(share.splits[0]->mids[k].dataset != nullptr, owner[k] == &share - shares.data());
      }
    }
    std::vector<std::vector<std::vector<std::byte>>> to(kNodes);  // [node][producer]
    for (int n = 0; n < kNodes; ++n) {
      for (int p = 0; p < producers; ++p) {
        auto s = NodeSectionsOf(shares[p], Split::kTrain, Held(length, n, kNodes), p);
        ASSERT_TRUE(s.ok()) << s.status().ToString();
        to[n].push_back(std::move(s).value());
      }
    }
    for (auto& share : shares) ReleaseSourceTables(&share);
    for (int n = 0; n < kNodes; ++n) {
      const bool keep = n == 0;  // world rank 0's node keeps every position's source
      auto one = NodeImageOf(*whole, Split::kTrain, Held(length, n, kNodes), keep);
      ASSERT_TRUE(one.ok()) << one.status().ToString();
      auto many = AssembleNodeImage(shares[n % producers], Split::kTrain, Held(length, n, kNodes),
                                    keep, std::move(to[n]));
      ASSERT_TRUE(many.ok()) << many.status().ToString();
      EXPECT_TRUE(Image(**one) == Image(**many))
          << producers << " producers, node " << n << ": the images differ";
    }
  }
}

// Node 1's sections from three producers, `change` applied, assembled on producer 0's share.
Status AssembleChanged(const std::function<void(std::vector<std::vector<std::byte>>*)>& change,
                       const std::vector<std::string>& other_weights = kWeights) {
  const std::vector<int> owner = {0, 1, 2, 0};
  std::vector<BuiltDatasets> shares = Shares(owner, 3);
  const int64_t length = shares[0].splits[0]->length;
  std::vector<std::vector<std::byte>> sections;
  for (int p = 0; p < 3; ++p) {
    BuiltDatasets other;
    const BuiltDatasets* from = &shares[p];
    if (p == 2 && other_weights != kWeights) {  // producer 2 with another blend
      other = std::move(Shares(owner, 3, other_weights)[2]);
      from = &other;
    }
    auto s = NodeSectionsOf(*from, Split::kTrain, Held(length, 1, 3), p);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    sections.push_back(std::move(s).value());
  }
  if (change) change(&sections);
  return AssembleNodeImage(shares[0], Split::kTrain, Held(length, 1, 3), false, std::move(sections))
      .status();
}

TEST(NodeSections, UnchangedSectionsAssemble) { EXPECT_TRUE(AssembleChanged({}).ok()); }

TEST(NodeSections, ChangedByteIsRefusedByItsDigest) {
  const Status st = AssembleChanged([](auto* s) { (*s)[1][s->at(1).size() / 2] ^= std::byte{4}; });
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_NE(st.message().find("producer 1 fail their digest"), std::string::npos) << st.ToString();
}

TEST(NodeSections, MissingProducerIsNamed) {
  const Status st = AssembleChanged([](auto* s) { s->pop_back(); });
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_NE(st.message().find("no producer gave the sections of source 2"), std::string::npos)
      << st.ToString();
}

TEST(NodeSections, SectionsOfAnotherProducerAreRefused) {
  const Status st = AssembleChanged([](auto* s) { std::swap((*s)[0], (*s)[1]); });
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_NE(st.message().find("producer 0 are not sections"), std::string::npos) << st.ToString();
}

TEST(NodeSections, ProducerWithAnotherBlendIsRefused) {
  const Status st = AssembleChanged({}, {"0.1", "0.2", "0.3", "0.4"});
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_NE(st.message().find("producers disagree"), std::string::npos) << st.ToString();
}

TEST(NodeSections, FactsMustNameEveryMidOnce) {
  auto share = Build([](const std::string& p) { return p == kStores[0]; });
  ASSERT_TRUE(share.ok()) << share.status().ToString();
  const std::vector<int64_t> facts = OwnMidFacts(*share);
  Status st = AdoptMidFacts(facts, &*share);  // the other three stores' mids: none gave them
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_NE(st.message().find("no producer built dataset 'corpora/corpus_i32'"), std::string::npos)
      << st.ToString();
  std::vector<int64_t> twice = facts;
  twice.insert(twice.end(), facts.begin(), facts.end());
  st = AdoptMidFacts(twice, &*share);
  EXPECT_NE(st.message().find("given twice"), std::string::npos) << st.ToString();
}

TEST(NodeSections, ShareNeedsWeightedBlend) {
  auto share = Build([](const std::string& p) { return p == kStores[0]; }, {});
  ASSERT_FALSE(share.ok());
  EXPECT_NE(share.status().message().find("need a weighted blend"), std::string::npos)
      << share.status().ToString();
}

TEST(NodeSections, PlanGivesTheLargestFirstToTheLeastLoaded) {
  EXPECT_EQ(PlanProducers(std::vector<uint64_t>{10, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 2),
            (std::vector<int>{0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(PlanProducers(std::vector<uint64_t>{5, 7, 3, 7}, 3), (std::vector<int>{2, 0, 2, 1}));
  EXPECT_EQ(PlanProducers(std::vector<uint64_t>{1, 2}, 1), (std::vector<int>{0, 0}));
  // Producers without a unit build nothing and are not counted as builders.
  EXPECT_EQ(Builders(PlanProducers(std::vector<uint64_t>{3, 2, 1}, 4)), 3);
  EXPECT_EQ(Builders(PlanProducers(std::vector<uint64_t>{5, 7, 3, 7}, 3)), 3);
  EXPECT_EQ(Builders(std::vector<int>{}), 0);
}

}  // namespace
}  // namespace gridfeed::order
