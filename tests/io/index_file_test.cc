#include "gridfeed/io/index_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "testing/paths.h"
#include "testing/synthetic_store.h"

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

// An index of `s` sequences of 1 or 2 int32 tokens, one document each (the parts of the full
// check hold 2^21 entries, so s > 2^21 crosses a part boundary).
std::vector<std::byte> LongIndex(uint64_t s) { return gridfeed::testing::SyntheticIndex(s, 1); }

// The full check read through a descriptor (MappedFileReader) and through the mapping gives the
// same verdict, naming the same element, for damage on either side of a part boundary.
TEST(ParseIndex, ReadThroughADescriptorSameVerdictsAsTheMapping) {
  const uint64_t s = (uint64_t{1} << 21) + 7;
  const std::string path = gridfeed::testing::ScratchDir("parse_reader") + "/long.idx";
  struct Damage {
    const char* field;
    uint64_t offset;  // of the damaged 8 bytes, in the file
    int64_t value;
  };
  const uint64_t lens = 34, ptrs = lens + s * 4, docs = ptrs + s * 8;
  for (const Damage& dmg : {Damage{"none", 0, 0}, Damage{"sequence_pointers[5]", ptrs + 5 * 8, 99},
                            Damage{"sequence_pointers[2097155]", ptrs + 2097155 * 8, -1},
                            Damage{"document_indices[2097152]", docs + 2097152 * 8, 0},
                            Damage{"document_indices[2097153]", docs + 2097153 * 8, 1},
                            Damage{"sequence_lengths[2097152]", lens + 2097152 * 4, -1}}) {
    SCOPED_TRACE(dmg.field);
    auto bytes = LongIndex(s);
    if (dmg.offset) std::memcpy(bytes.data() + dmg.offset, &dmg.value, 8);
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(bytes.data()),
                static_cast<std::streamsize>(bytes.size()));
    }
    auto file = MMapFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    const MappedFileReader reader(*file);
    ASSERT_TRUE(reader.ok());
    // Parts read through the mapping are handed to `checked`: none when the reader serves.
    int mapped_parts = 0;
    const CheckedFn count = [&](std::span<const std::byte>) { ++mapped_parts; };
    auto through_reader = ParseIndex(file->bytes(), path, false, IndexCheck::kFull, count, &reader);
    EXPECT_EQ(mapped_parts, 0);
    auto through_map = ParseIndex(file->bytes(), path, false, IndexCheck::kFull, count, nullptr);
    if (dmg.offset == 0) {
      EXPECT_GT(mapped_parts, 1);
    }
    ASSERT_EQ(through_reader.ok(), through_map.ok());
    if (through_map.ok()) {
      EXPECT_STREQ(dmg.field, "none");
      EXPECT_EQ(through_reader->total_tokens, through_map->total_tokens);
      EXPECT_EQ(through_reader->bin_bytes_needed, through_map->bin_bytes_needed);
      EXPECT_EQ(through_map->total_tokens, s / 2 * 3 + 1);
    } else {
      EXPECT_EQ(through_reader.status().ToString(), through_map.status().ToString());
      EXPECT_NE(through_map.status().message().find(std::string("field ") + dmg.field + ":"),
                std::string::npos)
          << through_map.status().ToString();
    }
  }
}

// The in-order feed hands over every byte of the file once, in order, through a descriptor and
// through the mapping: across the check's parts, with modes, with a plain reading's trailing
// mode bytes, and with no sequence at all.
TEST(ParseIndex, InOrderFeedIsTheWholeFile) {
  const std::string dir = gridfeed::testing::ScratchDir("parse_feed");
  // No sequence, one document entry (0).
  std::vector<std::byte> empty(9);
  std::memcpy(empty.data(), kIndexMagic, 9);
  auto put = [&empty](const auto& v) {
    const auto* c = reinterpret_cast<const std::byte*>(&v);
    empty.insert(empty.end(), c, c + sizeof(v));
  };
  put(uint64_t{1});  // version
  put(uint8_t{4});   // int32
  put(uint64_t{0});  // sequences
  put(uint64_t{1});  // document entries
  put(int64_t{0});
  struct Case {
    const char* name;
    std::vector<std::byte> bytes;
    bool multimodal;
  };
  const Case cases[] = {{"long", LongIndex((uint64_t{1} << 21) + 7), false},
                        {"hand", HandIndex(false), false},
                        {"hand_modes", HandIndex(true), true},
                        {"hand_modes_as_plain", HandIndex(true), false},
                        {"empty", empty, false}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir + "/" + c.name + ".idx";
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(c.bytes.data()),
                static_cast<std::streamsize>(c.bytes.size()));
    }
    auto file = MMapFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    const MappedFileReader reader(*file);
    ASSERT_TRUE(reader.ok());
    for (const MappedFileReader* through :
         {&reader, static_cast<const MappedFileReader*>(nullptr)}) {
      std::vector<std::byte> fed;
      const InOrderFn feed = [&](std::span<const std::byte> part) {
        fed.insert(fed.end(), part.begin(), part.end());
      };
      auto v = ParseIndex(file->bytes(), path, c.multimodal, IndexCheck::kFull, {}, through, feed);
      ASSERT_TRUE(v.ok()) << v.status().ToString();
      EXPECT_TRUE(fed == c.bytes) << "fed " << fed.size() << " of " << c.bytes.size() << " bytes"
                                  << (through ? ", through the reader" : ", through the mapping");
    }
  }
}

// A reader onto a path that names another file by now is not used.
TEST(MappedFileReader, RefusesAFileReplacedSinceTheMapping) {
  const std::string dir = gridfeed::testing::ScratchDir("reader_replaced");
  std::ofstream(dir + "/a") << "first";
  auto file = MMapFile::Open(dir + "/a");
  ASSERT_TRUE(file.ok());
  EXPECT_TRUE(MappedFileReader(*file).ok());
  std::ofstream(dir + "/b") << "other";
  std::filesystem::rename(dir + "/b", dir + "/a");
  EXPECT_FALSE(MappedFileReader(*file).ok());
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
