// Packing (order/sft/pack.h) on hand-made conversations; every expectation is worked out by
// hand from the algorithm (design note part A), not produced by the code under test.
#include <gtest/gtest.h>

#include <vector>

#include "gridfeed/order/sft/pack.h"

namespace gridfeed::order::sft {
namespace {

constexpr int64_t kPad = 9;

TokenizedConversation Conv(std::vector<int64_t> tokens, int masked = 0) {
  TokenizedConversation c;
  c.tokens = tokens;
  c.targets = tokens;
  for (int i = 0; i < masked; ++i) c.targets[static_cast<size_t>(i)] = -100;
  return c;
}

TEST(SftPack, ShortPackIsPaddedAndTheLastSequenceAbsorbsThePadding) {
  const std::vector<TokenizedConversation> c = {Conv({1, 2, 3}, 1), Conv({4, 5})};
  auto s = PackConversations(c, 8, kPad, 1, "row 0");
  ASSERT_TRUE(s.ok()) << s.status().message();
  // T = 1 2 3 4 5 9 9 9 9 (L + 1 = 9), G = -100 2 3 4 5 9 9 9 9, P = 0 1 2 0 1 2 3 4 5.
  EXPECT_EQ(s->tokens, (std::vector<int64_t>{1, 2, 3, 4, 5, 9, 9, 9}));
  EXPECT_EQ(s->labels, (std::vector<int64_t>{2, 3, 4, 5, 9, 9, 9, 9}));
  EXPECT_EQ(s->position_ids, (std::vector<int64_t>{0, 1, 2, 0, 1, 2, 3, 4}));
  EXPECT_EQ(s->loss_mask, (std::vector<float>{1, 1, 1, 1, 0, 0, 0, 0}));
  EXPECT_EQ(s->cu_seqlens, (std::vector<int32_t>{0, 3, 8, 8, 8, 8, 8, 8, 8}));
  EXPECT_EQ(s->max_seqlen, 5);
  EXPECT_EQ(s->num_cu_seqlens, 3);
}

TEST(SftPack, ExactlyLPlusOneLosesItsLastTokenToThePad) {
  const std::vector<TokenizedConversation> c = {Conv({1, 2, 3, 4, 5}), Conv({6, 7, 8})};
  auto s = PackConversations(c, 4, kPad, 1, "row 0");
  ASSERT_TRUE(s.ok());
  // The first conversation alone reaches 5 = L + 1: cut, token 5 becomes the pad.
  EXPECT_EQ(s->tokens, (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(s->labels, (std::vector<int64_t>{2, 3, 4, 9}));
  EXPECT_EQ(s->loss_mask, (std::vector<float>{1, 1, 1, 0}));
  EXPECT_EQ(s->cu_seqlens, (std::vector<int32_t>{0, 4, 4, 4, 4}));
  EXPECT_EQ(s->num_cu_seqlens, 2);
  EXPECT_EQ(s->max_seqlen, 4);
}

TEST(SftPack, ConversationOfExactlyLThenAnotherGivesAZeroLengthLastSequence) {
  const std::vector<TokenizedConversation> c = {Conv({1, 2, 3, 4}), Conv({5, 6})};
  auto s = PackConversations(c, 4, kPad, 1, "row 0");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->tokens, (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(s->labels, (std::vector<int64_t>{2, 3, 4, 9}));
  EXPECT_EQ(s->position_ids, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(s->cu_seqlens, (std::vector<int32_t>{0, 4, 4, 4, 4}));
  EXPECT_EQ(s->num_cu_seqlens, 3);  // [0, 4, 4]
}

TEST(SftPack, ContextParallelPadsEveryConversationToTwiceCp) {
  // cp 2: multiples of 4. T after conv 1: 1 2 3 + pad (pos 3); after conv 2: + 4 5 6 7 8, pad x3.
  const std::vector<TokenizedConversation> c = {Conv({1, 2, 3}), Conv({4, 5, 6, 7, 8})};
  auto s = PackConversations(c, 16, kPad, 2, "row 0");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->tokens, (std::vector<int64_t>{1, 2, 3, 9, 4, 5, 6, 7, 8, 9, 9, 9, 9, 9, 9, 9}));
  EXPECT_EQ(s->position_ids,
            (std::vector<int64_t>{0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(s->cu_seqlens[0], 0);
  EXPECT_EQ(s->cu_seqlens[1], 4);
  EXPECT_EQ(s->cu_seqlens[2], 16);
  EXPECT_EQ(s->max_seqlen, 12);
}

TEST(SftPack, ZeroTokenFirstConversationGivesALeadingEmptySequence) {
  const std::vector<TokenizedConversation> c = {Conv({}), Conv({1, 2})};
  auto s = PackConversations(c, 4, kPad, 1, "row 0");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->cu_seqlens, (std::vector<int32_t>{0, 0, 4, 4, 4}));
  EXPECT_EQ(s->position_ids, (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(SftPack, RealTokenEqualToThePadIsMasked) {
  const std::vector<TokenizedConversation> c = {Conv({1, kPad, 2})};
  auto s = PackConversations(c, 4, kPad, 1, "row 0");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->loss_mask, (std::vector<float>{0, 1, 0, 0}));
}

TEST(SftPack, NothingToPackIsAnErrorNamingTheRow) {
  const std::vector<TokenizedConversation> none;
  auto s = PackConversations(none, 4, kPad, 1, "a.jsonl row 7");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("a.jsonl row 7"), std::string::npos);
  const std::vector<TokenizedConversation> empty = {Conv({}), Conv({})};
  EXPECT_FALSE(PackConversations(empty, 4, kPad, 1, "row").ok());
}

TEST(SftPack, MoreSequencesThanCuSeqlensSlotsIsAnError) {
  std::vector<TokenizedConversation> c(6, Conv({}));
  c.push_back(Conv({1}));
  auto s = PackConversations(c, 4, kPad, 1, "row 3");  // 7 sequences, L + 1 = 5 slots
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("row 3"), std::string::npos);
}

TEST(SftPack, PackerStopsAtTheCut) {
  Packer p(4, kPad, 1);
  EXPECT_FALSE(p.Add(Conv({1, 2})));
  EXPECT_TRUE(p.Add(Conv({3, 4, 5})));
  EXPECT_TRUE(p.full());
  auto s = p.Finish("row");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->tokens, (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(s->cu_seqlens, (std::vector<int32_t>{0, 2, 4, 4, 4}));
}

}  // namespace
}  // namespace gridfeed::order::sft
