// Every kind of malformed token store gives its own clear error: code, file, field, expected
// and actual. The fixture is a valid int32 corpus of 3 one-sequence documents; each case
// changes some bytes of its .idx (or .bin) and opens the result.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "corpus_fixture.h"
#include "gridfeed/io/file_util.h"
#include "gridfeed/io/indexed_dataset.h"
#include "testing/paths.h"

namespace gridfeed::io {
namespace {

// Offsets in the fixture's .idx (S = 3, D = 4).
constexpr size_t kVersionAt = 9, kDtypeAt = 17, kSeqCountAt = 18, kDocCountAt = 26;
constexpr size_t kLengthsAt = 34, kPointersAt = 46, kDocsAt = 70, kIdxSize = 102;

struct Corruption {
  std::string name;
  std::function<void(std::string& idx, std::string& bin)> mutate;
  StatusCode code;
  std::vector<std::string> message_parts;
};

template <typename T>
void Put(std::string& s, size_t at, T v) {
  std::memcpy(s.data() + at, &v, sizeof(T));
}

class CorruptionTest : public ::testing::TestWithParam<Corruption> {};

// Writes the fixture with `c`'s change as DIR/bad.{idx,bin}; returns the prefix.
std::string WriteCorrupted(const Corruption& c) {
  const std::string dir = gridfeed::testing::ScratchDir("corrupt_" + c.name);
  gridfeed::testing::WriteCorpus(dir + "/good", DType::kInt32, {{{1, 2, 3}}, {{4, 5}}, {{6}}});
  std::string idx = ReadFileToString(dir + "/good.idx").value();
  std::string bin = ReadFileToString(dir + "/good.bin").value();
  EXPECT_EQ(idx.size(), kIdxSize);
  c.mutate(idx, bin);
  EXPECT_TRUE(WriteStringToFile(dir + "/bad.idx", idx).ok());
  EXPECT_TRUE(WriteStringToFile(dir + "/bad.bin", bin).ok());
  return dir + "/bad";
}

TEST_P(CorruptionTest, GivesItsOwnClearError) {
  const Corruption& c = GetParam();
  auto ds = IndexedDataset::Open(WriteCorrupted(c));
  ASSERT_FALSE(ds.ok()) << c.name << " was accepted";
  EXPECT_EQ(ds.status().code(), c.code) << ds.status().ToString();
  for (const auto& part : c.message_parts) {
    EXPECT_NE(ds.status().message().find(part), std::string::npos)
        << "message lacks '" << part << "': " << ds.status().message();
  }
}

const Corruption kCases[] = {
    {"empty_idx",
     [](std::string& i, std::string&) { i.clear(); },
     StatusCode::kDataLoss,
     {"bad.idx", "header", "at least 34 bytes", "0 bytes"}},
    {"truncated_header",
     [](std::string& i, std::string&) { i.resize(20); },
     StatusCode::kDataLoss,
     {"bad.idx", "header", "20 bytes (truncated)"}},
    {"bad_magic",
     [](std::string& i, std::string&) { i[0] = 'X'; },
     StatusCode::kDataLoss,
     {"bad.idx", "magic", "MMIDIDX", "XMIDIDX"}},
    {"version_2",
     [](std::string& i, std::string&) { Put<uint64_t>(i, kVersionAt, 2); },
     StatusCode::kDataLoss,
     {"version", "expected 1", "got 2"}},
    {"dtype_code_0",
     [](std::string& i, std::string&) { Put<uint8_t>(i, kDtypeAt, 0); },
     StatusCode::kDataLoss,
     {"dtype", "1..8", "got 0"}},
    {"dtype_code_9",
     [](std::string& i, std::string&) { Put<uint8_t>(i, kDtypeAt, 9); },
     StatusCode::kDataLoss,
     {"dtype", "got 9"}},
    {"sequence_count_overflows",
     [](std::string& i, std::string&) { Put<uint64_t>(i, kSeqCountAt, uint64_t{1} << 62); },
     StatusCode::kDataLoss,
     {"sequence_count", "4611686018427387904", "more bytes than"}},
    {"document_count_overflows",
     [](std::string& i, std::string&) { Put<uint64_t>(i, kDocCountAt, ~uint64_t{0}); },
     StatusCode::kDataLoss,
     {"document_count=18446744073709551615"}},
    {"truncated_idx",
     [](std::string& i, std::string&) { i.resize(kIdxSize - 8); },
     StatusCode::kDataLoss,
     {"document_count=4", "94 bytes"}},
    {"trailing_bytes",
     [](std::string& i, std::string&) { i += "junk!"; },
     StatusCode::kDataLoss,
     {"file size", "expected 102 bytes", "107 bytes"}},
    {"negative_length",
     [](std::string& i, std::string&) { Put<int32_t>(i, kLengthsAt + 4, -2); },
     StatusCode::kDataLoss,
     {"sequence_lengths[1]", ">= 0", "got -2"}},
    {"pointer_mismatch",
     [](std::string& i, std::string&) { Put<int64_t>(i, kPointersAt + 8, 13); },
     StatusCode::kDataLoss,
     {"sequence_pointers[1]", "expected 12", "got 13"}},
    {"first_pointer_nonzero",
     [](std::string& i, std::string&) { Put<int64_t>(i, kPointersAt, 4); },
     StatusCode::kDataLoss,
     {"sequence_pointers[0]", "expected 0", "got 4"}},
    {"document_index_not_starting_at_0",
     [](std::string& i, std::string&) { Put<int64_t>(i, kDocsAt, 1); },
     StatusCode::kDataLoss,
     {"document_indices[0]", "expected 0", "got 1"}},
    {"document_index_not_ending_at_S",
     [](std::string& i, std::string&) { Put<int64_t>(i, kDocsAt + 24, 2); },
     StatusCode::kDataLoss,
     {"document_indices[3]", "3 (the sequence count)", "got 2"}},
    {"document_index_not_monotonic",
     [](std::string& i, std::string&) { Put<int64_t>(i, kDocsAt + 8, 3); },
     StatusCode::kDataLoss,
     {"document_indices[2]", "non-decreasing", "got 2"}},
    {"no_document_index",
     [](std::string& i, std::string&) {
       Put<uint64_t>(i, kDocCountAt, 0);
       i.resize(kDocsAt);
     },
     StatusCode::kDataLoss,
     {"document_indices", "no entries"}},
    {"bin_shorter_than_last_sequence",
     [](std::string&, std::string& b) { b.resize(b.size() - 1); },
     StatusCode::kDataLoss,
     {"bad.bin", "expected 24 bytes", "got 23 bytes"}},
};

INSTANTIATE_TEST_SUITE_P(Io, CorruptionTest, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return info.param.name; });

// A store opened with the structure check only and checked in full later (beside a build)
// gets the very error a full open gives, for every corruption the structure check lets
// through; and the later check of a good store passes and remembers the file's digest.
TEST(Corruption, TheFullCheckLaterGivesTheFullOpensError) {
  int deferred = 0;
  for (const Corruption& c : kCases) {
    const std::string prefix = WriteCorrupted(c);
    auto full = IndexedDataset::Open(prefix);
    ASSERT_FALSE(full.ok()) << c.name;
    auto opened = IndexedDataset::Open(prefix, false, IndexCheck::kStructure);
    if (!opened.ok()) continue;  // the builder then opens it in full (the error above)
    ++deferred;
    const Status later = opened->CheckIndexFully(/*digest=*/true);
    EXPECT_EQ(later.ToString(), full.status().ToString()) << c.name;
  }
  // Lengths, pointers and document indices are past the structure check.
  EXPECT_GE(deferred, 6);

  const std::string dir = gridfeed::testing::ScratchDir("corrupt_deferred_good");
  gridfeed::testing::WriteCorpus(dir + "/good", DType::kInt32, {{{1, 2, 3}}, {{4, 5}}, {{6}}});
  const std::string idx = ReadFileToString(dir + "/good.idx").value();
  auto good = IndexedDataset::Open(dir + "/good", false, IndexCheck::kStructure);
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  ASSERT_TRUE(good->CheckIndexFully(/*digest=*/true).ok());
  // Changed in place after the check: a digest computed now would differ, so the one
  // remembered is the check's.
  {
    std::fstream f(dir + "/good.idx", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(idx.size() - 1));
    f.put(static_cast<char>(idx.back() ^ 1));
    ASSERT_TRUE(f.good());
  }
  EXPECT_EQ(good->index_xxh3(), XXH3_64bits(idx.data(), idx.size()));
}

TEST(Corruption, MissingFilesAreNamed) {
  const std::string dir = gridfeed::testing::ScratchDir("corrupt_missing");
  auto none = IndexedDataset::Open(dir + "/nothing");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("nothing.idx"), std::string::npos);

  gridfeed::testing::WriteCorpus(dir + "/c", DType::kUInt16, {{{1}}});
  std::filesystem::remove(dir + "/c.bin");
  auto no_bin = IndexedDataset::Open(dir + "/c");
  ASSERT_FALSE(no_bin.ok());
  EXPECT_EQ(no_bin.status().code(), StatusCode::kNotFound);
  EXPECT_NE(no_bin.status().message().find("c.bin"), std::string::npos);
}

TEST(Corruption, DirectoryInsteadOfFileIsUnreadable) {
  const std::string dir = gridfeed::testing::ScratchDir("corrupt_dir");
  std::filesystem::create_directories(dir + "/d.idx");
  auto r = IndexedDataset::Open(dir + "/d");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIoError);
  EXPECT_NE(r.status().message().find("not a regular file"), std::string::npos);
}

}  // namespace
}  // namespace gridfeed::io
