// Node images (--node-window): an image of some positions of a split reads, and records, every
// held position exactly as the whole image does, holds nothing else, keeps each source's
// sample for records and the whole source index where asked, and a damaged one is refused.
#include "gridfeed/order/node_image.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "gridfeed/order/read_schedule.h"
#include "gridfeed/order/sample.h"
#include "gridfeed/order/sample_record.h"
#include "gridfeed/order/table_image.h"
#include "testing/paths.h"

namespace gridfeed::order {
namespace {

BuiltDatasets Build(std::vector<std::string> data_path) {
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(gridfeed::testing::GoldenDir());
  DatasetConfig c;
  c.data_path = std::move(data_path);
  c.split = "969,30,1";
  c.sizes = {2000, 100, 20};
  c.seq_length = 128;
  auto b = BuildDatasets(c);
  std::filesystem::current_path(cwd);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return std::move(b).value();
}

BuiltDatasets Blend() { return Build({"0.3", "corpora/corpus_u16", "0.7", "corpora/corpus_i32"}); }

// Every `stride`-th run of `run` positions from `first`: a node's share of a schedule.
std::vector<int64_t> Share(int64_t length, int64_t first, int64_t run, int64_t stride) {
  std::vector<int64_t> held;
  for (int64_t p = first; p < length; p += stride) {
    for (int64_t q = p; q < std::min(p + run, length); ++q) held.push_back(q);
  }
  return held;
}

std::vector<std::byte> Image(ImageWriter& w) {
  std::vector<std::byte> image(w.size());
  w.WriteTo(image.data());
  return image;
}

void ExpectSameSamples(const BuiltDatasets& built, std::vector<int64_t> held) {
  const TableView whole = ViewOf(built);
  const SplitView& w = *whole.splits[0];
  auto writer = NodeImageOf(built, Split::kTrain, held, false);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  const std::vector<std::byte> image = Image(**writer);
  auto parsed = ParseTableImage(image);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const SplitView& n = *parsed->splits[0];
  EXPECT_TRUE(n.held_only);
  EXPECT_EQ(parsed->prefixes, whole.prefixes);  // the same stores opened and proved
  EXPECT_EQ(n.length, w.length);
  EXPECT_FALSE(parsed->splits[1].has_value());
  std::vector<char> is_held(static_cast<size_t>(w.length), 0);
  for (int64_t p : held) is_held[static_cast<size_t>(p)] = 1;
  for (int64_t p = 0; p < w.length; ++p) ASSERT_EQ(n.Holds(p), is_held[p] == 1) << p;
  EXPECT_FALSE(n.Holds(-1));
  EXPECT_FALSE(n.Holds(w.length));
  SampleOptions o;
  o.seq_length = 128;
  for (int64_t p : held) {
    const auto [kw, jw] = w.Locate(p);
    const auto [kn, jn] = n.Locate(p);
    ASSERT_EQ(kn, kw) << p;
    EXPECT_EQ(n.SourceSample(p), jw) << p;
    EXPECT_EQ(n.SourceAt(p), kw) << p;
    const auto& ds = *built.splits[0]->mids[kw].dataset;
    Sample a, b;
    AssembleSample(ds, w.sources[kw].tables, jw, o, &a);
    AssembleSample(ds, n.sources[kn].tables, jn, o, &b);
    ASSERT_EQ(a.tokens, b.tokens) << p;
    ASSERT_EQ(a.labels, b.labels) << p;
    ASSERT_EQ(a.loss_mask, b.loss_mask) << p;
    SampleRecord ra = MakeSampleRecord(p, kw, jw, w.sources[kw].tables, a.tokens);
    SampleRecord rb = MakeSampleRecord(p, kn, jn, n.sources[kn].tables, b.tokens);
    rb.dataset_sample = n.SourceSample(p);
    ASSERT_EQ(ra, rb) << p;
  }
  // Smaller than the whole image: each held sample's rows and documents only.
  EXPECT_LT(
      image.size(),
      SerializeTables(Build({"0.3", "corpora/corpus_u16", "0.7", "corpora/corpus_i32"})).size());
}

TEST(NodeImage, BlendReadsAsTheWholeImage) {
  const BuiltDatasets built = Blend();
  const int64_t length = built.splits[0]->length;
  // Two DP ranks of micro-batch 4 out of 16, one node of three, the first and last positions.
  ExpectSameSamples(built, Share(length, 8, 8, 64));
  ExpectSameSamples(built, Share(length, 3, 1, 3));
  ExpectSameSamples(built, {0, length - 1});
}

TEST(NodeImage, SingleSourceAndRandomSubsets) {
  const BuiltDatasets built = Build({"corpora/corpus_u16"});
  const int64_t length = built.splits[0]->length;
  ExpectSameSamples(built, Share(length, 0, 4, 32));
  std::mt19937_64 rng(7);
  std::vector<int64_t> held;
  for (int64_t p = 0; p < length; ++p) {
    if (rng() % 5 == 0) held.push_back(p);
  }
  ExpectSameSamples(built, held);
}

TEST(NodeImage, EmptyNodeHoldsNothing) {
  const BuiltDatasets built = Blend();
  auto writer = NodeImageOf(built, Split::kTrain, {}, false);
  ASSERT_TRUE(writer.ok());
  const std::vector<std::byte> image = Image(**writer);
  auto parsed = ParseTableImage(image);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_FALSE(parsed->splits[0]->Holds(0));
}

TEST(NodeImage, KeepsTheSourceOfEveryPositionWhereAsked) {
  const BuiltDatasets built = Blend();
  const TableView whole = ViewOf(built);
  const SplitView& w = *whole.splits[0];
  auto writer = NodeImageOf(built, Split::kTrain, {5, 6, 7}, true);
  ASSERT_TRUE(writer.ok());
  const std::vector<std::byte> image = Image(**writer);
  auto parsed = ParseTableImage(image);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const SplitView& n = *parsed->splits[0];
  for (int64_t p = 0; p < w.length; ++p) ASSERT_EQ(n.SourceAt(p), w.Locate(p).first) << p;
}

TEST(NodeImage, RefusesUnsortedPositionsAndDamage) {
  const BuiltDatasets built = Blend();
  auto unsorted = NodeImageOf(built, Split::kTrain, {4, 3}, false);
  EXPECT_EQ(unsorted.status().code(), StatusCode::kInvalidArgument);
  auto outside = NodeImageOf(built, Split::kTrain, {built.splits[0]->length}, false);
  EXPECT_EQ(outside.status().code(), StatusCode::kInvalidArgument);
  auto writer = NodeImageOf(built, Split::kTrain, {10, 11, 40}, false);
  ASSERT_TRUE(writer.ok());
  std::vector<std::byte> image = Image(**writer);
  ASSERT_TRUE(ParseTableImage(image).ok());
  // A held run moved past the split's end (the directory says where the runs lie).
  uint64_t dir_len = 0;
  std::memcpy(&dir_len, image.data() + 16, 8);
  const auto* dir_begin = reinterpret_cast<const char*>(image.data() + 24);
  const auto dir = nlohmann::json::parse(dir_begin, dir_begin + dir_len);
  const size_t head = (24 + dir_len + 7) / 8 * 8;
  const size_t runs = head + dir["splits"][0]["run_begin"][0].get<size_t>();
  const int64_t past = built.splits[0]->length;
  std::memcpy(image.data() + runs, &past, 8);
  auto damaged = ParseTableImage(image);
  ASSERT_FALSE(damaged.ok());
  EXPECT_EQ(damaged.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(damaged.status().message().find("held run 0"), std::string::npos)
      << damaged.status().ToString();
}

// What a node's image holds: ReadSchedule::PositionsOf against the one rule of who reads a
// position (OwnerOf), for random geometries, starts and sets of DP ranks.
TEST(NodeImage, PositionsAreThoseTheRanksRead) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    ScheduleOptions o;
    o.micro_batch_size = 1 + static_cast<int64_t>(rng() % 4);
    o.dp_size = 1 + static_cast<int64_t>(rng() % 9);
    o.global_batch_size = o.micro_batch_size * o.dp_size * (1 + static_cast<int64_t>(rng() % 3));
    o.total_samples = static_cast<int64_t>(rng() % 300);
    o.start_consumed = static_cast<int64_t>(rng() % 100);
    auto schedule = ReadSchedule::Create(o);
    ASSERT_TRUE(schedule.ok()) << schedule.status().ToString();
    std::vector<int> ranks;
    for (int r = 0; r < o.dp_size; ++r) {
      if (rng() % 3 == 0) ranks.push_back(r);
    }
    if (!ranks.empty()) ranks.push_back(ranks.front());  // a rank twice (two stages) counts once
    std::vector<int64_t> want;
    for (int64_t p = 0; p < o.total_samples; ++p) {
      const auto owner = schedule->OwnerOf(p);
      if (owner && std::count(ranks.begin(), ranks.end(), owner->dp_rank) > 0) want.push_back(p);
    }
    ASSERT_EQ(schedule->PositionsOf(ranks), want) << "trial " << trial;
  }
}

}  // namespace
}  // namespace gridfeed::order
