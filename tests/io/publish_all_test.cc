#include "gridfeed/io/publish_all.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gridfeed/io/npy.h"
#include "testing/paths.h"

namespace gridfeed::io {
namespace {

namespace fs = std::filesystem;
using gridfeed::testing::ScratchDir;

// Every file name under `dir`, relative to it.
std::set<std::string> Tree(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out.insert(fs::relative(e.path(), dir).string());
  }
  return out;
}

Result<TempFile> Temp(const std::string& target, const std::string& text) {
  const std::span<const std::byte> parts[] = {std::as_bytes(std::span(text))};
  return WriteTemp(target, parts);
}

// More files than the signal registry's first chunk (64) and than its old fixed size (256).
constexpr int kMany = 600;

TEST(PublishAll, PublishesEveryFileWithItsBytesAndNoTemporaryRemains) {
  const std::string dir = ScratchDir("publish_all");
  std::set<std::string> want;
  std::vector<TempFile> files;
  for (int i = 0; i < kMany; ++i) {
    const std::string name = "mid_" + std::to_string(i % 3) + "/f" + std::to_string(i);
    fs::create_directories(dir + "/mid_" + std::to_string(i % 3));
    auto t = Temp(dir + "/" + name, "payload " + std::to_string(i));
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    files.push_back(std::move(*t));
    want.insert(name);
  }
  EXPECT_EQ(Tree(dir).size(), static_cast<size_t>(kMany));  // temporaries only, none published
  EXPECT_EQ(Tree(dir).count("mid_0/f0"), 0u);
  ASSERT_TRUE(PublishAll(files).ok());
  EXPECT_EQ(Tree(dir), want);
  for (int i = 0; i < kMany; i += 97) {
    const std::string name = "/mid_" + std::to_string(i % 3) + "/f" + std::to_string(i);
    EXPECT_EQ(ReadFileToString(dir + name).value(), "payload " + std::to_string(i));
  }
}

TEST(PublishAll, AFailedRenameStopsThereAndRemovesTheRest) {
  const std::string dir = ScratchDir("publish_all_fail");
  ASSERT_TRUE(WriteStringToFile(dir + "/c", "old c").ok());
  fs::create_directories(dir + "/b/inside");  // a non-empty folder: renaming a file over it fails
  std::vector<TempFile> files;
  for (const char* name : {"a", "b", "c"}) files.push_back(Temp(dir + "/" + name, name).value());
  const Status st = PublishAll(files);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kIoError);
  EXPECT_NE(st.message().find(dir + "/b"), std::string::npos) << st.ToString();
  EXPECT_EQ(ReadFileToString(dir + "/a").value(), "a");      // renamed before the failure
  EXPECT_EQ(ReadFileToString(dir + "/c").value(), "old c");  // never replaced
  EXPECT_EQ(Tree(dir), (std::set<std::string>{"a", "c"}));   // no temporary left
}

TEST(PublishAll, AFullDiskFailsInWriteTempAndLeavesNothing) {
  const std::string dir = ScratchDir("publish_all_full");
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {100, 100};
    if (::setrlimit(RLIMIT_FSIZE, &rl) != 0) ::_exit(99);
    const std::vector<int64_t> big(1000, 7);
    auto t = WriteNpyTemp(dir + "/x.npy", "<i8", {1000}, big.data(), big.size() * 8);
    if (t.ok()) ::_exit(1);
    ::_exit(t.status().code() == StatusCode::kIoError &&
                    t.status().message().find(dir + "/x.npy") != std::string::npos
                ? 0
                : 2);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(Tree(dir).empty());
}

TEST(PublishAll, ASignalRemovesEveryUnpublishedTemporary) {
  const std::string dir = ScratchDir("publish_all_signal");
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (!RemoveTempFilesOnSignal().ok()) ::_exit(2);
    std::vector<TempFile> files;
    for (int i = 0; i < kMany; ++i) {
      auto t = Temp(dir + "/f" + std::to_string(i), "x");
      if (!t.ok()) ::_exit(3);
      files.push_back(std::move(*t));
    }
    ::raise(SIGTERM);
    ::_exit(4);  // not reached
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit " << WEXITSTATUS(status);
  const auto left = Tree(dir);
  EXPECT_TRUE(left.empty()) << left.size() << " temporaries left, e.g. " << *left.begin();
}

TEST(PublishAll, NpyTemporaryReadsBackAsTheArray) {
  const std::string dir = ScratchDir("publish_all_npy");
  const std::vector<int32_t> v = {3, 1, 4, 1, 5, 9};
  std::vector<TempFile> files;
  files.push_back(WriteNpyTemp(dir + "/v.npy", "<i4", {3, 2}, v.data(), 24).value());
  ASSERT_TRUE(PublishAll(files).ok());
  auto a = ReadNpy(dir + "/v.npy");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->shape, (std::vector<int64_t>{3, 2}));
  ASSERT_TRUE(a->Is<int32_t>());
  EXPECT_EQ(a->As<int32_t>(), v);
}

// Four threads register and drop temporaries at once (the offline writer registers from two):
// every temporary still alive when the signal comes is removed, none is missed.
TEST(PublishAll, ASignalAfterConcurrentRegistrationsRemovesEveryTemporary) {
  const std::string dir = ScratchDir("publish_all_threads");
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (!RemoveTempFilesOnSignal().ok()) ::_exit(2);
    std::vector<std::vector<TempFile>> kept(4);
    std::atomic<int> failures{0};
    {
      std::vector<std::jthread> threads;
      for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
          for (int i = 0; i < 300; ++i) {
            auto f = Temp(dir + "/t" + std::to_string(t) + "_" + std::to_string(i), "x");
            if (!f.ok()) {
              ++failures;
              return;
            }
            if (i % 3 != 0) kept[t].push_back(std::move(*f));  // every third is dropped at once
          }
        });
      }
    }
    if (failures != 0) ::_exit(3);
    ::raise(SIGTERM);
    ::_exit(4);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit " << WEXITSTATUS(status);
  const auto left = Tree(dir);
  EXPECT_TRUE(left.empty()) << left.size() << " temporaries left, e.g. " << *left.begin();
}

TEST(PublishAll, NothingToPublishIsFine) {
  std::vector<TempFile> none;
  EXPECT_TRUE(PublishAll(none).ok());
}

// OpenFileRoom raises the soft limit on open files toward the hard one, and says when even the
// hard limit leaves too little room (the writer then syncs each file at once).
TEST(PublishAll, OpenFileRoomRaisesTheSoftLimitUpToTheHardOne) {
  for (const rlim_t hard : {rlim_t{4000}, rlim_t{300}}) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      struct rlimit rl = {200, hard};
      if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) ::_exit(99);
      const size_t room = OpenFileRoom(1000);
      ::getrlimit(RLIMIT_NOFILE, &rl);
      if (hard == 4000) ::_exit(room >= 1000 && rl.rlim_cur > 1000 && rl.rlim_cur <= 4000 ? 0 : 1);
      ::_exit(room < 1000 && rl.rlim_cur == 300 ? 0 : 2);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "hard limit " << hard;
  }
}

}  // namespace
}  // namespace gridfeed::io
