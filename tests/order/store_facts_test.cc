// Store facts of stores without an index (OLMo's and SFT's files) name the XXH3 of no bytes, as
// checkpoints written by every release say: a resume compares them exactly.
#include "gridfeed/order/store_facts.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace gridfeed::order {
namespace {

TEST(StoreFacts, NoIndexIsTheDigestOfNoBytes) {
  const std::vector<std::byte> data(10000, std::byte{7});
  const StoreFacts f = FactsOf("tokens.npy", {}, data, 5);
  EXPECT_EQ(f.index_xxh3, XXH3_64bits(nullptr, 0));
  EXPECT_EQ(f.index_xxh3, 0x2d06800538d394c2ULL);  // xxHash's XXH3-64 of the empty input
  EXPECT_EQ(EncodeFacts({f}).substr(0, 17), "2d06800538d394c2 ");
  // A known digest is taken as given; the sampled data digest is the same either way.
  const StoreFacts g = FactsWithIndexDigest("tokens.npy", 42, data, 5);
  EXPECT_EQ(g.index_xxh3, 42u);
  EXPECT_EQ(g.data_sample_xxh3, f.data_sample_xxh3);
  EXPECT_EQ(g.data_bytes, 10000u);
}

// Positional reads give the mapping's digest; a read that fails falls back to the mapping; the
// bytes read are the ones digested (a reader seeing other bytes gets another digest).
TEST(StoreFacts, SampledBlocksReadThroughACallbackDigestTheSame) {
  std::vector<std::byte> data(300000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>(i * 7 + i / 4096);
  const StoreFacts mapped = FactsWithIndexDigest("x", 1, data, 99);
  int reads = 0;
  const StoreFacts read =
      FactsWithIndexDigestRead("x", 1, data, 99, [&](uint64_t offset, std::span<std::byte> out) {
        ++reads;
        std::memcpy(out.data(), data.data() + offset, out.size());
        return true;
      });
  EXPECT_EQ(read, mapped);
  EXPECT_EQ(reads, 64);  // the first, the last and 62 sampled blocks
  const StoreFacts failing = FactsWithIndexDigestRead(
      "x", 1, data, 99, [](uint64_t, std::span<std::byte>) { return false; });
  EXPECT_EQ(failing, mapped);
  const StoreFacts other =
      FactsWithIndexDigestRead("x", 1, data, 99, [&](uint64_t offset, std::span<std::byte> out) {
        std::memcpy(out.data(), data.data() + offset, out.size());
        out[0] ^= std::byte{1};
        return true;
      });
  EXPECT_NE(other.data_sample_xxh3, mapped.data_sample_xxh3);
}

class FileFactsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("gridfeed_file_facts_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    return path;
  }
  std::filesystem::path dir_;
};

TEST_F(FileFactsTest, TheVeryFileIsTheSameACopyIsNot) {
  const std::string a = Write("a.idx", "0123456789");
  const FileFacts fa = StatFile(a);
  ASSERT_TRUE(fa.exists);
  EXPECT_EQ(fa.size, 10u);
  EXPECT_TRUE(SameFile(fa, StatFile(a)));
  // The same file seen from a node that numbers the shared mount differently.
  FileFacts elsewhere = fa;
  elsewhere.device += 1;
  EXPECT_TRUE(SameFile(elsewhere, fa));
  // A copy with the same bytes and the same mtime (cp -p, rsync -a) is another file object.
  const std::string b = Write("b.idx", "0123456789");
  struct timespec times[2] = {{0, UTIME_OMIT}, {0, 0}};
  times[1].tv_sec = fa.mtime_ns / 1000000000;
  times[1].tv_nsec = fa.mtime_ns % 1000000000;
  ASSERT_EQ(::utimensat(AT_FDCWD, b.c_str(), times, 0), 0);
  const FileFacts fb = StatFile(b);
  EXPECT_EQ(fb.mtime_ns, fa.mtime_ns);
  EXPECT_EQ(fb.size, fa.size);
  EXPECT_FALSE(SameFile(fb, fa));
  // The file rewritten in place, same size: its ctime (and mtime) moved on (after a clock tick
  // of the filesystem's timestamps: a few milliseconds).
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  Write("a.idx", "9876543210");
  const FileFacts again = StatFile(a);
  EXPECT_EQ(again.inode, fa.inode);
  EXPECT_FALSE(SameFile(again, fa));
  // What cannot be stat'ed is nobody's same file.
  const FileFacts missing = StatFile((dir_ / "missing").string());
  EXPECT_FALSE(missing.exists);
  EXPECT_FALSE(SameFile(missing, missing));
}

TEST_F(FileFactsTest, EncodeDecodeAndSizeDifferences) {
  std::vector<FileFacts> files = {StatFile(Write("x.idx", "abc")), StatFile(Write("x.bin", "")),
                                  StatFile((dir_ / "none").string())};
  files[0].ctime_ns = -5;  // any int64 survives
  EXPECT_EQ(DecodeFileFacts(EncodeFileFacts(files)), files);
  EXPECT_TRUE(DecodeFileFacts("1 2 3\n").empty());
  EXPECT_TRUE(DecodeFileFacts("2 1 1 1 1 1\n").empty());
  EXPECT_TRUE(DecodeFileFacts("").empty());

  const std::vector<std::string> paths = {"c/x.idx", "c/x.bin", "c/none"};
  EXPECT_EQ(DescribeSizeDifference(paths, files, files), "");
  std::vector<FileFacts> mine = files;
  mine[1].size = 7;
  EXPECT_EQ(DescribeSizeDifference(paths, mine, files),
            "token file 'c/x.bin' differs from rank 0's: 7 bytes here, 0 there");
  // A file missing on one side is the open's to report.
  mine = files;
  mine[0].exists = false;
  EXPECT_EQ(DescribeSizeDifference(paths, mine, files), "");
  mine.pop_back();
  EXPECT_EQ(DescribeSizeDifference({"c/x.idx", "c/x.bin"}, mine, files),
            "it has 2 token files, rank 0 3");
}

}  // namespace
}  // namespace gridfeed::order
