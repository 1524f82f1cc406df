#include "gridfeed/io/indexed_dataset.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "corpus_fixture.h"
#include "gridfeed/io/file_util.h"
#include "testing/paths.h"
#include "testing/sha256.h"

namespace gridfeed::io {
namespace {

using gridfeed::testing::GoldenDir;
using gridfeed::testing::ScratchDir;
using gridfeed::testing::Sha256Hex;

nlohmann::json CorporaJson() {
  auto text = ReadFileToString(GoldenDir() + "/corpora/corpora.json");
  EXPECT_TRUE(text.ok());
  return nlohmann::json::parse(*text);
}

std::string FileSha(const std::string& path) {
  auto text = ReadFileToString(path);
  EXPECT_TRUE(text.ok()) << path;
  return Sha256Hex(std::as_bytes(std::span(text->data(), text->size())));
}

class GoldenCorpus : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenCorpus, ReadsCountsLengthsAndTokens) {
  const auto spec = CorporaJson()[GetParam()];
  auto ds = IndexedDataset::Open(GoldenDir() + "/" + spec["prefix"].get<std::string>());
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ(ds->dtype(), DTypeFromName(spec["bin_dtype"].get<std::string>()).value());
  EXPECT_EQ(static_cast<int>(ds->dtype()), spec["dtype_code"].get<int>());
  EXPECT_EQ(ds->num_sequences(), spec["num_sequences"].get<int64_t>());
  EXPECT_EQ(ds->num_documents(), spec["num_documents"].get<int64_t>());
  EXPECT_EQ(ds->num_tokens(), spec["num_tokens"].get<uint64_t>());
  auto lengths = ds->sequence_lengths().ToVector();
  EXPECT_EQ(*std::min_element(lengths.begin(), lengths.end()),
            spec["min_sequence_length"].get<int>());
  EXPECT_EQ(*std::max_element(lengths.begin(), lengths.end()),
            spec["max_sequence_length"].get<int>());
  EXPECT_EQ(std::count(lengths.begin(), lengths.end(), 1),
            spec["num_sequences_of_length_1"].get<int64_t>());
  EXPECT_EQ(std::count(lengths.begin(), lengths.end(), 2),
            spec["num_sequences_of_length_2"].get<int64_t>());
  EXPECT_EQ(std::count_if(lengths.begin(), lengths.end(), [](int l) { return l > 512; }),
            spec["num_sequences_longer_than_512"].get<int64_t>());

  // Token bytes: every sequence read through Get(), concatenated, hashes to the .bin digest.
  std::string all;
  for (int64_t i = 0; i < ds->num_sequences(); ++i) {
    auto span = ds->Get(i);
    ASSERT_TRUE(span.ok());
    auto b = span->bytes();
    all.append(reinterpret_cast<const char*>(b.data()), b.size());
  }
  EXPECT_EQ(all.size(), spec["bytes_bin"].get<size_t>());
  EXPECT_EQ(Sha256Hex(std::as_bytes(std::span(all.data(), all.size()))),
            spec["sha256_bin"].get<std::string>());
  EXPECT_EQ(ds->index_bytes().size(), spec["bytes_idx"].get<size_t>());
  EXPECT_EQ(Sha256Hex(ds->index_bytes()), spec["sha256_idx"].get<std::string>());
}

TEST_P(GoldenCorpus, RewriteIsByteIdentical) {
  const auto spec = CorporaJson()[GetParam()];
  const std::string src = GoldenDir() + "/" + spec["prefix"].get<std::string>();
  auto ds = IndexedDataset::Open(src);
  ASSERT_TRUE(ds.ok());
  const std::string out = ScratchDir("rewrite_" + GetParam()) + "/copy";
  auto b = IndexedDatasetBuilder::Create(out, ds->dtype());
  ASSERT_TRUE(b.ok());
  auto docs = ds->document_indices();
  std::vector<int64_t> tokens;
  for (size_t d = 0; d + 1 < docs.size(); ++d) {
    for (int64_t s = docs[d]; s < docs[d + 1]; ++s) {
      auto span = ds->Get(s).value();
      tokens.resize(span.length_tokens);
      span.CopyTo(tokens.data());
      ASSERT_TRUE(b->AddItem(tokens).ok());
    }
    b->EndDocument();
  }
  ASSERT_TRUE(b->Finalize().ok());
  EXPECT_EQ(FileSha(out + ".bin"), spec["sha256_bin"].get<std::string>());
  EXPECT_EQ(FileSha(out + ".idx"), spec["sha256_idx"].get<std::string>());
}

INSTANTIATE_TEST_SUITE_P(Corpora, GoldenCorpus,
                         ::testing::Values("corpus_u16", "corpus_i32", "corpus_multi",
                                           "corpus_tiny"));

TEST(IndexedDataset, GetChecksBoundsAndWidens) {
  const std::string prefix = ScratchDir("get") + "/c";
  gridfeed::testing::WriteCorpus(prefix, DType::kInt32, {{{1, 2, 3}, {70000, -5}}, {{6}}});
  auto ds = IndexedDataset::Open(prefix);
  ASSERT_TRUE(ds.ok());
  EXPECT_EQ(ds->num_sequences(), 3);
  EXPECT_EQ(ds->num_documents(), 2);
  auto s = ds->Get(1, 1, 1);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)[0], -5);
  EXPECT_EQ(ds->Get(1).value()[0], 70000);
  EXPECT_EQ(ds->Get(0, 3, 0).value().length_tokens, 0);  // empty run at the end is fine
  for (auto [seq, off, len] : {std::tuple{3, 0, 1}, {-1, 0, 1}, {0, 2, 2}, {0, 4, 0}, {0, -1, 1}}) {
    auto r = ds->Get(seq, off, len);
    ASSERT_FALSE(r.ok()) << seq << " " << off << " " << len;
    EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
  }
}

TEST(IndexedDataset, IndexDigestIsTheWholeFilesAndComputedOnce) {
  const std::string prefix = ScratchDir("ds_digest") + "/c";
  gridfeed::testing::WriteCorpus(prefix, DType::kUInt16, {{{1, 2, 3}, {4}}, {{5, 6}}});
  auto ds = IndexedDataset::Open(prefix);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  auto idx = ReadFileToString(prefix + ".idx");
  ASSERT_TRUE(idx.ok());
  const uint64_t want = XXH3_64bits(idx->data(), idx->size());
  // Many threads ask at once: one pass, one answer.
  std::vector<std::thread> threads;
  std::vector<uint64_t> got(8);
  for (size_t i = 0; i < got.size(); ++i) {
    threads.emplace_back([&, i] { got[i] = ds->index_xxh3(); });
  }
  for (auto& t : threads) t.join();
  for (uint64_t g : got) EXPECT_EQ(g, want);
  // A moved dataset keeps the answer.
  IndexedDataset moved = std::move(ds).value();
  EXPECT_EQ(moved.index_xxh3(), want);
}

// Opened with `digest`, the check computes the same digest from its own reads (a corpus of
// more sequences than one part of the check holds, so the feed crosses parts).
TEST(IndexedDataset, IndexDigestFromTheCheckIsTheWholeFiles) {
  const std::string prefix = ScratchDir("ds_digest_check") + "/c";
  std::vector<std::vector<std::vector<int64_t>>> docs;
  for (int i = 0; i < 70000; ++i) docs.push_back({{i % 7, 1}, {2}});
  gridfeed::testing::WriteCorpus(prefix, DType::kUInt16, docs);
  auto idx = ReadFileToString(prefix + ".idx");
  ASSERT_TRUE(idx.ok());
  const uint64_t want = XXH3_64bits(idx->data(), idx->size());
  auto ds = IndexedDataset::Open(prefix, false, IndexCheck::kFull, /*digest=*/true);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  auto lazy = IndexedDataset::Open(prefix, false, IndexCheck::kFull, /*digest=*/false);
  ASSERT_TRUE(lazy.ok()) << lazy.status().ToString();
  // The last byte changed in place (same inode): a digest computed now would differ, so the
  // one Open remembered must be the check's.
  {
    std::fstream f(prefix + ".idx", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(idx->size() - 1));
    f.put(static_cast<char>((*idx)[idx->size() - 1] ^ 1));
    ASSERT_TRUE(f.good());
  }
  EXPECT_EQ(ds->index_xxh3(), want);
  EXPECT_NE(lazy->index_xxh3(), want);  // computed after the change: the test can tell
}

TEST(IndexedDataset, UnchangedUntilAFileIsReplacedOrTouched) {
  const std::string dir = ScratchDir("ds_unchanged");
  const std::string prefix = dir + "/c";
  gridfeed::testing::WriteCorpus(prefix, DType::kUInt16, {{{1, 2, 3}}, {{5, 6}}});
  auto ds = IndexedDataset::Open(prefix);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_TRUE(ds->Unchanged());
  // Another corpus renamed over the .bin: the mapping still shows the old file.
  gridfeed::testing::WriteCorpus(dir + "/d", DType::kUInt16, {{{7, 8, 9}}, {{1, 1}}});
  std::filesystem::rename(dir + "/d.bin", prefix + ".bin");
  EXPECT_FALSE(ds->Unchanged());
  auto again = IndexedDataset::Open(prefix);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->Unchanged());
  // A new mtime on the index (written in place) counts as a change too.
  std::filesystem::last_write_time(
      prefix + ".idx", std::filesystem::last_write_time(prefix + ".idx") + std::chrono::seconds(5));
  EXPECT_FALSE(again->Unchanged());
  std::filesystem::remove(prefix + ".idx");
  EXPECT_FALSE(again->Unchanged());
}

TEST(IndexedDatasetBuilder, RejectsTokensOutsideTheDtype) {
  const std::string prefix = ScratchDir("range") + "/c";
  auto b = IndexedDatasetBuilder::Create(prefix, DType::kUInt16);
  ASSERT_TRUE(b.ok());
  std::vector<int64_t> bad = {1, 65536};
  Status st = b->AddItem(bad);
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange);
  EXPECT_NE(st.message().find("65536"), std::string::npos);
  EXPECT_NE(st.message().find("uint16"), std::string::npos);
}

// A .bin longer than its .idx says is another file beside this index (e.g. a prep killed
// between publishing the two): Megatron's writer makes them exactly as long, so refuse it.
TEST(IndexedDataset, RefusesABinLongerThanItsIndexSays) {
  const std::string prefix = ScratchDir("longer_bin") + "/c";
  auto b = IndexedDatasetBuilder::Create(prefix, DType::kUInt16);
  ASSERT_TRUE(b.ok());
  std::vector<int64_t> t = {1, 2, 3};
  ASSERT_TRUE(b->AddItem(t).ok());
  b->EndDocument();
  ASSERT_TRUE(b->Finalize().ok());
  {
    auto ok = IndexedDataset::Open(prefix);
    ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  }
  {
    std::ofstream bin(prefix + ".bin", std::ios::binary | std::ios::app);
    bin.write("\1\0", 2);
  }
  auto ds = IndexedDataset::Open(prefix);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(ds.status().message().find("c.bin"), std::string::npos) << ds.status().message();
  EXPECT_NE(ds.status().message().find("8 bytes"), std::string::npos) << ds.status().message();
}

TEST(IndexedDatasetBuilder, LeavesNothingBehindWithoutFinalize) {
  const std::string dir = ScratchDir("abandon");
  {
    auto b = IndexedDatasetBuilder::Create(dir + "/c", DType::kUInt16);
    ASSERT_TRUE(b.ok());
    std::vector<int64_t> t = {1, 2};
    ASSERT_TRUE(b->AddItem(t).ok());
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir));
}

TEST(DType, VocabularyThresholdIs65500) {
  EXPECT_EQ(DTypeForVocabSize(65499), DType::kUInt16);
  EXPECT_EQ(DTypeForVocabSize(65500), DType::kInt32);
  EXPECT_EQ(DTypeForVocabSize(50000), DType::kUInt16);
  EXPECT_EQ(DTypeForVocabSize(128256), DType::kInt32);
}

TEST(DType, AllCodesRoundTrip) {
  for (uint8_t c = 1; c <= 8; ++c) {
    auto d = DTypeFromCode(c);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(DTypeFromName(DTypeName(*d)).value(), *d);
    std::vector<std::byte> buf(DTypeSize(*d) * 2);
    StoreFromInt64(*d, buf.data(), 1, 100);
    EXPECT_EQ(LoadAsInt64(*d, buf.data(), 1), 100);
  }
  EXPECT_FALSE(DTypeFromCode(0).ok());
  EXPECT_FALSE(DTypeFromCode(9).ok());
}

}  // namespace
}  // namespace gridfeed::io
