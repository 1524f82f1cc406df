#include "gridfeed/io/index_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace gridfeed::io {
namespace {

// Hand-assembled index: 2 sequences (3 and 1 tokens, int32), one document.
std::vector<std::byte> HandIndex(bool multimodal) {
  std::vector<std::byte> b(9);
  std::memcpy(b.data(), kIndexMagic, 9);
  auto put = [&](const void* p, size_t n) {
    auto* c = static_cast<const std::byte*>(p);
    b.insert(b.end(), c, c + n);
  };
  uint64_t version = 1, s = 2, d = 2;
  uint8_t code = 4;
  int32_t lens[2] = {3, 1};
  int64_t ptrs[2] = {0, 12};
  int64_t docs[2] = {0, 2};
  int8_t modes[2] = {5, 6};
  put(&version, 8);
  put(&code, 1);
  put(&s, 8);
  put(&d, 8);
  put(lens, 8);
  put(ptrs, 16);
  put(docs, 16);
  if (multimodal) put(modes, 2);
  return b;
}

TEST(ParseIndex, ReadsHandAssembledIndex) {
  auto bytes = HandIndex(false);
  EXPECT_EQ(bytes.size(), 34u + 2 * 12 + 2 * 8);
  auto v = ParseIndex(bytes, "hand.idx", false);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->dtype, DType::kInt32);
  EXPECT_EQ(v->sequence_lengths.size(), 2u);
  EXPECT_EQ(v->sequence_lengths[0], 3);
  EXPECT_EQ(v->sequence_pointers[1], 12);
  EXPECT_EQ(v->document_indices.back(), 2);
  EXPECT_EQ(v->total_tokens, 4u);
  EXPECT_EQ(v->bin_bytes_needed, 16u);
  EXPECT_TRUE(v->sequence_modes.empty());
}

// Structure-only parsing (for a reader whose node leader checked the same file in full) gives
// the same extents, still refuses a file whose counts do not fit, and skips the per-element
// pass (a bad middle pointer goes unnoticed there, by contract, but not in full).
TEST(ParseIndex, StructureOnlyKeepsExtentsAndSizeChecks) {
  auto bytes = HandIndex(false);
  auto v = ParseIndex(bytes, "hand.idx", false, IndexCheck::kStructure);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->total_tokens, 4u);
  EXPECT_EQ(v->bin_bytes_needed, 16u);
  auto truncated = bytes;
  truncated.resize(truncated.size() - 1);
  EXPECT_FALSE(ParseIndex(truncated, "hand.idx", false, IndexCheck::kStructure).ok());
  auto bad = bytes;
  const int32_t negative = -1;
  std::memcpy(bad.data() + 34, &negative, 4);  // first length
  EXPECT_FALSE(ParseIndex(bad, "hand.idx", false, IndexCheck::kFull).ok());
  EXPECT_TRUE(ParseIndex(bad, "hand.idx", false, IndexCheck::kStructure).ok());
}

TEST(ParseIndex, ReadsMultimodalModes) {
  auto bytes = HandIndex(true);
  auto v = ParseIndex(bytes, "mm.idx", true);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ASSERT_EQ(v->sequence_modes.size(), 2u);
  EXPECT_EQ(v->sequence_modes[0], 5);
  EXPECT_EQ(v->sequence_modes[1], 6);
  // A multimodal file read as plain is accepted (the modes are ignored).
  EXPECT_TRUE(ParseIndex(bytes, "mm.idx", false).ok());
  // A plain file read as multimodal lacks the modes.
  auto plain = HandIndex(false);
  auto bad = ParseIndex(plain, "p.idx", true);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace gridfeed::io
