// The table image that rank 0 broadcasts: a round trip gives views equal to the built tables,
// and damaged images are refused before any view is handed out.
#include "gridfeed/order/table_image.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "testing/paths.h"

namespace gridfeed::order {
namespace {

BuiltDatasets BuildBlend() {
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(gridfeed::testing::GoldenDir());
  DatasetConfig c;
  c.data_path = std::vector<std::string>{"0.3", "corpora/corpus_u16", "0.7", "corpora/corpus_i32"};
  c.split = "969,30,1";
  c.sizes = {2000, 100, 20};
  c.seq_length = 128;
  auto b = BuildDatasets(c);
  std::filesystem::current_path(cwd);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return std::move(b).value();
}

TEST(TableImage, RoundTripsEveryTable) {
  const BuiltDatasets built = BuildBlend();
  BuiltDatasets copy = BuildBlend();
  std::vector<std::byte> image = SerializeTables(std::move(copy));
  auto parsed = ParseTableImage(image);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->prefixes,
            (std::vector<std::string>{"corpora/corpus_u16", "corpora/corpus_i32"}));
  // The arrays' section starts on a page: magic, version, directory length, directory.
  uint64_t dir_len = 0;
  std::memcpy(&dir_len, image.data() + 16, 8);
  EXPECT_EQ((24 + dir_len) % 4096, 0u);
  const TableView in_process = ViewOf(built);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(parsed->splits[i].has_value(), built.splits[i].has_value());
    if (!built.splits[i]) continue;
    const auto& want = *in_process.splits[i];
    const auto& got = *parsed->splits[i];
    EXPECT_EQ(got.blended, want.blended);
    EXPECT_EQ(got.length, want.length);
    EXPECT_EQ(got.weights, want.weights);
    ASSERT_EQ(got.sources.size(), want.sources.size());
    for (size_t k = 0; k < want.sources.size(); ++k) {
      EXPECT_EQ(got.sources[k].prefix, want.sources[k].prefix);
      EXPECT_EQ(got.sources[k].samples_per_epoch, want.sources[k].samples_per_epoch);
      const auto& w = want.sources[k].tables;
      const auto& g = got.sources[k].tables;
      EXPECT_TRUE(std::equal(w.document_index.begin(), w.document_index.end(),
                             g.document_index.begin(), g.document_index.end()));
      EXPECT_TRUE(std::equal(w.sample_index32.begin(), w.sample_index32.end(),
                             g.sample_index32.begin(), g.sample_index32.end()));
      EXPECT_TRUE(std::equal(w.shuffle_index32.begin(), w.shuffle_index32.end(),
                             g.shuffle_index32.begin(), g.shuffle_index32.end()));
    }
    for (int64_t p = 0; p < want.length; ++p) ASSERT_EQ(got.Locate(p), want.Locate(p));
  }
  EXPECT_NE(ImageDigest(image), 0u);
}

TEST(TableImage, RefusesDamagedImages) {
  std::vector<std::byte> image = SerializeTables(BuildBlend());
  auto truncated = image;
  truncated.resize(image.size() / 2);
  auto t = ParseTableImage(truncated);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(t.status().message().find("outside the image"), std::string::npos)
      << t.status().message();
  auto bad_magic = image;
  bad_magic[0] = std::byte{'X'};
  EXPECT_EQ(ParseTableImage(bad_magic).status().code(), StatusCode::kDataLoss);
  auto bad_version = image;
  bad_version[8] = std::byte{9};
  EXPECT_NE(ParseTableImage(bad_version).status().message().find("version"), std::string::npos);
  // A different image has a different digest.
  auto flipped = image;
  flipped.back() ^= std::byte{1};
  EXPECT_NE(ImageDigest(flipped), ImageDigest(image));
}

// Images of several 64 MiB blocks (hashed block by block on threads): the same bytes give the
// same digest every time, one flipped bit in any block or one byte more changes it.
TEST(TableImage, DigestOfALargeImageSeesEveryBlock) {
  std::vector<std::byte> image((size_t{64} << 20) * 3 + 12345);
  for (size_t i = 0; i < image.size(); i += 4093) image[i] = std::byte(i % 251);
  const uint64_t d = ImageDigest(image);
  EXPECT_EQ(ImageDigest(image), d);
  for (size_t at : {size_t{0}, (size_t{64} << 20) + 7, image.size() - 1}) {
    auto flipped = image;
    flipped[at] ^= std::byte{0x10};
    EXPECT_NE(ImageDigest(flipped), d) << at;
  }
  auto longer = image;
  longer.push_back(std::byte{0});
  EXPECT_NE(ImageDigest(longer), d);
}

// The digest is what image_writer.h says, whatever way the blocks are read (the kernel reads
// them through a small buffer): XXH3-64 of each 64 MiB block, then of those, seeded with the
// size. Here in a shared mapping, like a node window.
TEST(TableImage, DigestIsTheHashOfTheBlockHashes) {
  const size_t block = size_t{64} << 20, n = block * 2 + (size_t{3} << 20) + 5;
  void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  auto* image = static_cast<std::byte*>(p);
  for (size_t i = 0; i < n; i += 511) image[i] = std::byte(i % 253 + 1);
  std::vector<uint64_t> parts;
  for (size_t at = 0; at < n; at += block) {
    parts.push_back(XXH3_64bits(image + at, std::min(block, n - at)));
  }
  const uint64_t expected = XXH3_64bits_withSeed(parts.data(), parts.size() * 8, n);
  EXPECT_EQ(ImageDigest(std::span<const std::byte>(image, n)), expected);
  EXPECT_EQ(ImageDigest(std::span<const std::byte>(image, n), /*untouched=*/true), expected);
  // One block: XXH3-64 of the bytes, read either way.
  const std::span<const std::byte> small(image + 5, (size_t{3} << 20) + 3);
  EXPECT_EQ(ImageDigest(small, true), XXH3_64bits(small.data(), small.size()));
  EXPECT_EQ(ImageDigest(small, false), XXH3_64bits(small.data(), small.size()));
  ::munmap(p, n);
}

}  // namespace
}  // namespace gridfeed::order
