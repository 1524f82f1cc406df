#include "gridfeed/checkpoint/cursor.h"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "gridfeed/io/file_util.h"
#include "testing/paths.h"

namespace gridfeed::checkpoint {
namespace {

Cursor Sample() {
  Cursor c;
  c.fingerprint = "0123456789abcdef";
  c.canonical_config = R"({"seed":1234,"split":"969,30,1"})";
  c.iteration = 42;
  c.consumed_train_samples = 123456789;
  c.consumed_valid_samples = 77;
  c.source_samples = {100, 200};
  c.source_tokens = {6400, 12800};
  c.dp = 2, c.tp = 2, c.pp = 2, c.cp = 1;
  c.micro_batch_size = 4, c.global_batch_size = 16;
  return c;
}

TEST(Cursor, RoundTrips) {
  const std::string path = gridfeed::testing::ScratchDir("cursor") + "/ckpt.h5";
  ASSERT_TRUE(WriteCursor(path, Sample()).ok());
  auto c = ReadCursor(path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->fingerprint, "0123456789abcdef");
  EXPECT_EQ(c->canonical_config, Sample().canonical_config);
  EXPECT_EQ(c->iteration, 42);
  EXPECT_EQ(c->consumed_train_samples, 123456789);
  EXPECT_EQ(c->consumed_valid_samples, 77);
  EXPECT_EQ(c->source_samples, (std::vector<int64_t>{100, 200}));
  EXPECT_EQ(c->source_tokens, (std::vector<int64_t>{6400, 12800}));
  EXPECT_EQ(c->dp, 2);
  EXPECT_EQ(c->global_batch_size, 16);
  // Overwriting replaces the file whole.
  Cursor later = Sample();
  later.iteration = 43;
  ASSERT_TRUE(WriteCursor(path, later).ok());
  EXPECT_EQ(ReadCursor(path)->iteration, 43);
  EXPECT_EQ(std::distance(
                std::filesystem::directory_iterator(std::filesystem::path(path).parent_path()), {}),
            1);  // no temporary left behind
}

TEST(Cursor, FlippedByteIsReportedAsCorruption) {
  const std::string path = gridfeed::testing::ScratchDir("cursor_flip") + "/ckpt.h5";
  ASSERT_TRUE(WriteCursor(path, Sample()).ok());
  std::string bytes = io::ReadFileToString(path).value();
  const int64_t value = 123456789;
  const auto at = bytes.find(std::string(reinterpret_cast<const char*>(&value), 8));
  ASSERT_NE(at, std::string::npos);
  bytes[at] ^= 0x01;
  ASSERT_TRUE(io::WriteStringToFile(path, bytes).ok());
  auto c = ReadCursor(path);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(c.status().message().find("Fletcher32"), std::string::npos) << c.status().message();
}

TEST(Cursor, TruncatedAndMissingFiles) {
  const std::string dir = gridfeed::testing::ScratchDir("cursor_trunc");
  ASSERT_TRUE(WriteCursor(dir + "/ckpt.h5", Sample()).ok());
  std::string bytes = io::ReadFileToString(dir + "/ckpt.h5").value();
  ASSERT_TRUE(io::WriteStringToFile(dir + "/short.h5", bytes.substr(0, bytes.size() / 2)).ok());
  auto t = ReadCursor(dir + "/short.h5");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(ReadCursor(dir + "/none.h5").status().code(), StatusCode::kNotFound);
}

TEST(Cursor, NewerFormatIsRejectedClearly) {
  const std::string path = gridfeed::testing::ScratchDir("cursor_version") + "/ckpt.h5";
  ASSERT_TRUE(WriteCursor(path, Sample()).ok());
  {
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, "/gridfeed/format_version", H5P_DEFAULT);
    const int64_t next = kFormatVersion + 1;
    ASSERT_GE(H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &next), 0);
    H5Dclose(d);
    H5Fclose(f);
  }
  auto c = ReadCursor(path);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(c.status().message().find("format version 2"), std::string::npos);
}

TEST(Cursor, FailedWriteKeepsTheOldCheckpoint) {
  const std::string dir = gridfeed::testing::ScratchDir("cursor_keep");
  ASSERT_TRUE(WriteCursor(dir + "/ckpt.h5", Sample()).ok());
  const std::string before = io::ReadFileToString(dir + "/ckpt.h5").value();
  EXPECT_FALSE(WriteCursor(dir + "/missing_dir/ckpt.h5", Sample()).ok());
  EXPECT_EQ(io::ReadFileToString(dir + "/ckpt.h5").value(), before);
}

// --- Full disk: writes fail with EFBIG in a child limited by RLIMIT_FSIZE. ---

std::vector<std::string> DirNames(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Cursor, FullDiskFailsAndKeepsTheOldCheckpoint) {
  const std::string dir = gridfeed::testing::ScratchDir("cursor_full");
  const std::string path = dir + "/ckpt.h5";
  ASSERT_TRUE(WriteCursor(path, Sample()).ok());
  const std::string before = io::ReadFileToString(path).value();
  for (rlim_t limit : {rlim_t{0}, rlim_t{512}, static_cast<rlim_t>(before.size() / 2),
                       static_cast<rlim_t>(before.size() - 1)}) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::signal(SIGXFSZ, SIG_IGN);
      struct rlimit rl = {limit, limit};
      if (::setrlimit(RLIMIT_FSIZE, &rl) != 0) ::_exit(99);
      Cursor later = Sample();
      later.iteration = 43;
      Status st = WriteCursor(path, later);
      ::_exit(st.ok() ? 1 : (st.code() == StatusCode::kIoError ? 0 : 2));
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status)) << "child died of signal " << WTERMSIG(status);
    EXPECT_EQ(WEXITSTATUS(status), 0) << "limit " << limit;
    EXPECT_TRUE(io::ReadFileToString(path).value() == before) << "limit " << limit;
    auto c = ReadCursor(path);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(c->iteration, 42);
    EXPECT_EQ(DirNames(dir), std::vector<std::string>{"ckpt.h5"}) << "limit " << limit;
  }
}

}  // namespace
}  // namespace gridfeed::checkpoint
