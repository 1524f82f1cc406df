// The SFT split and blend layout (order/sft/sft_layout.h) with hand-worked expectations.
#include "gridfeed/order/sft/sft_layout.h"

#include <gtest/gtest.h>

namespace gridfeed::order::sft {
namespace {

config::DataOptions Data(std::vector<std::string> path, std::string split,
                         std::array<const char*, 3> sizes) {
  config::DataOptions d;
  d.sft = true;
  d.data_path = std::move(path);
  d.split = std::move(split);
  d.train_samples = sizes[0];
  d.valid_samples = sizes[1];
  d.test_samples = sizes[2];
  return d;
}

int64_t Rows(const std::string& path) { return path == "a.jsonl" ? 10 : 3; }

TEST(SftLayout, SplitDividesRowsAndItemsWrapModulo) {
  auto l = LayoutSft(Data({"a.jsonl"}, "70,20,10", {"25", "4", "2"}), Rows);
  ASSERT_TRUE(l.ok()) << l.status().message();
  const SftSplit& train = *l->splits[0];
  EXPECT_FALSE(train.blended);
  EXPECT_EQ(train.length, 25);
  EXPECT_EQ(train.mids[0].begin, 0);
  EXPECT_EQ(train.mids[0].end, 7);
  EXPECT_EQ(l->Locate(Split::kTrain, 8).second, 1);   // 8 mod 7
  EXPECT_EQ(l->Locate(Split::kTrain, 20).second, 6);  // 20 mod 7
  EXPECT_EQ(l->splits[1]->mids[0].begin, 7);
  EXPECT_EQ(l->splits[1]->mids[0].end, 9);
  EXPECT_EQ(l->Locate(Split::kValid, 3).second, 8);  // 7 + 3 mod 2
  EXPECT_EQ(l->splits[2]->mids[0].begin, 9);
  EXPECT_EQ(l->splits[2]->mids[0].end, 10);
}

TEST(SftLayout, AbsentSplitsAreNotBuilt) {
  auto l = LayoutSft(Data({"a.jsonl"}, "100,0,0", {"5", "0", "0"}), Rows);
  ASSERT_TRUE(l.ok());
  EXPECT_TRUE(l->splits[0].has_value());
  EXPECT_FALSE(l->splits[1].has_value());
  EXPECT_FALSE(l->splits[2].has_value());
}

TEST(SftLayout, APresentSplitWithoutASizeIsAnErrorNamingTheFlag) {
  auto l = LayoutSft(Data({"a.jsonl"}, "90,10,0", {"5", "none", "0"}), Rows);
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("--valid-samples"), std::string::npos);
}

TEST(SftLayout, WeightedBlendAsksEachFileForTheSurplusInflatedCount) {
  // weights 3:1 of 10 samples: targets ceil(7.5) = 8 and ceil(2.5) = 3, size 11; mid sizes
  // ceil(8 x 1.005) = 9 and ceil(3 x 1.005) = 4.
  auto l = LayoutSft(Data({"3", "a.jsonl", "1", "b.jsonl"}, "100,0,0", {"10", "0", "0"}), Rows);
  ASSERT_TRUE(l.ok()) << l.status().message();
  const SftSplit& s = *l->splits[0];
  EXPECT_TRUE(s.blended);
  EXPECT_EQ(s.length, 11);
  EXPECT_EQ(s.mids[0].num_samples, 9);
  EXPECT_EQ(s.mids[1].num_samples, 4);
  EXPECT_EQ(s.mids[1].end, 3);
  // Greedy blend: position 0 goes to the heavier source; b's third sample reads row 2.
  EXPECT_EQ(s.blend.dataset_index[0], 0);
  int b_seen = 0;
  for (int64_t p = 0; p < s.length; ++p) {
    const auto [k, row] = l->Locate(Split::kTrain, p);
    if (k == 1) {
      EXPECT_EQ(row, b_seen++ % 3);
    }
  }
  EXPECT_EQ(b_seen, 3);
}

TEST(SftLayout, UnweightedBlendIsAnError) {
  auto l = LayoutSft(Data({"a.jsonl", "b.jsonl", "a.jsonl"}, "100,0,0", {"5", "0", "0"}), Rows);
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("weights"), std::string::npos);
}

TEST(SftLayout, ASplitWithoutRowsAskedForSamplesIsAnError) {
  // b.jsonl has 3 rows: 90,5,5 gives valid round(2.7) .. round(2.85) = [3, 3).
  auto l = LayoutSft(Data({"b.jsonl"}, "90,5,5", {"4", "2", "0"}), Rows);
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("b.jsonl"), std::string::npos);
}

TEST(SftLayout, SftFilesListsEachFileOnce) {
  auto f = SftFiles(Data({"1", "a.jsonl", "2", "b.jsonl", "1", "a.jsonl"}, "", {"1", "0", "0"}));
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(*f, (std::vector<std::string>{"a.jsonl", "b.jsonl"}));
}

}  // namespace
}  // namespace gridfeed::order::sft
