// gridfeed tables' writer (apps/gridfeed/offline_writer.h): arrays handed early from several
// threads and the rest at Finish are published together; a writer that does not finish leaves
// no temporary and removes the folders it made.
#include "gridfeed/offline_writer.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <latch>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gridfeed/io/file_util.h"
#include "gridfeed/io/publish_all.h"
#include "testing/paths.h"

namespace gridfeed::app {
namespace {

namespace fs = std::filesystem;

// Every file under `dir`, relative.
std::set<std::string> Tree(const std::string& dir) {
  std::set<std::string> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    out.insert(fs::relative(e.path(), dir).string() + (e.is_directory() ? "/" : ""));
  }
  return out;
}

order::OutputArray Array(const std::string& path, const std::vector<int32_t>& v) {
  return {path, "<i4", {static_cast<int64_t>(v.size())}, v.data(), v.size() * 4, nullptr, {}};
}

TEST(OfflineWriter, EarlyAndLateArraysArePublishedTogether) {
  const std::string out = testing::ScratchDir("offline_writer_publish") + "/out";
  std::vector<int32_t> a = {1, 2, 3}, b = {4, 5}, c = {6};
  {
    OfflineWriter w(out);
    std::thread t1([&] { EXPECT_TRUE(w.Put(Array("train/mid_0/x.npy", a)).ok()); });
    std::thread t2([&] { EXPECT_TRUE(w.Put(Array("train/mid_1/x.npy", b)).ok()); });
    t1.join();
    t2.join();
    // Nothing is published before Finish: only temporaries, under their own names.
    for (const auto& f : Tree(out))
      EXPECT_EQ(f.find("x.npy", f.size() - 5), std::string::npos) << f;
    order::OfflineOutput rest;
    rest.AddView("train/blend/y.npy", std::span<const int32_t>(c), {}, nullptr);
    rest.texts.push_back({"summary.json", "{}\n"});
    ASSERT_TRUE(w.Finish(rest).ok());
  }
  EXPECT_EQ(Tree(out),
            (std::set<std::string>{"summary.json", "train/", "train/blend/", "train/blend/y.npy",
                                   "train/mid_0/", "train/mid_0/x.npy", "train/mid_1/",
                                   "train/mid_1/x.npy"}));
  const std::string x1 = io::ReadFileToString(out + "/train/mid_1/x.npy").value();
  ASSERT_GE(x1.size(), 8u);
  EXPECT_EQ(x1.substr(x1.size() - 8), std::string("\4\0\0\0\5\0\0\0", 8));
}

TEST(OfflineWriter, UnfinishedWriterLeavesNothing) {
  const std::string base = testing::ScratchDir("offline_writer_unfinished");
  const std::string out = base + "/out";
  std::vector<int32_t> a = {1, 2, 3};
  {
    OfflineWriter w(out);
    ASSERT_TRUE(w.Put(Array("train/mid_0/x.npy", a)).ok());
    ASSERT_TRUE(w.Put(Array("train/mid_1/x.npy", a)).ok());
    EXPECT_FALSE(Tree(out).empty());
  }  // the build failed: no Finish
  EXPECT_FALSE(fs::exists(out)) << "left: " << *Tree(out).begin();
}

TEST(OfflineWriter, FoldersThatExistedStayAndAFailedPutNamesTheFolderAndFailsTheLaterOnes) {
  const std::string out = testing::ScratchDir("offline_writer_existing");
  ASSERT_TRUE(io::WriteStringToFile(out + "/keep.txt", "mine").ok());
  ASSERT_TRUE(io::WriteStringToFile(out + "/valid", "a file where a folder would go").ok());
  std::vector<int32_t> a = {1};
  {
    OfflineWriter w(out);
    ASSERT_TRUE(w.Put(Array("train/mid_0/x.npy", a)).ok());
    for (const char* path : {"valid/mid_0/x.npy", "train/mid_1/x.npy"}) {
      const Status st = w.Put(Array(path, a));
      ASSERT_FALSE(st.ok()) << path;
      EXPECT_NE(st.message().find(out + "/valid"), std::string::npos) << st.message();
    }
  }
  EXPECT_EQ(Tree(out), (std::set<std::string>{"keep.txt", "valid"}));
}

// `written` hears of each piece only once it is in the file: the owner may then give the
// piece's pages back. Here it overwrites them at once, and the file still holds the values.
TEST(OfflineWriter, WrittenIsToldOfEachPieceOnlyOnceItIsInTheFile) {
  const std::string out = testing::ScratchDir("offline_writer_written") + "/out";
  const size_t n = 2 * io::kWrittenPiece / 4 + 1000;  // three pieces, the last one short
  std::vector<int32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>(3 * i + 1);
  order::OutputArray a = Array("train/mid_0/x.npy", v);
  std::vector<size_t> told;
  a.written = [&](size_t bytes) {
    const size_t from = told.empty() ? 0 : told.back();
    ASSERT_LE(bytes, v.size() * 4);
    std::memset(reinterpret_cast<char*>(v.data()) + from, 0xab, bytes - from);
    told.push_back(bytes);
  };
  {
    OfflineWriter w(out);
    ASSERT_TRUE(w.Put(a).ok());
    ASSERT_TRUE(w.Finish(order::OfflineOutput()).ok());
  }
  EXPECT_EQ(told, (std::vector<size_t>{io::kWrittenPiece, 2 * io::kWrittenPiece, n * 4}));
  const auto f = io::ReadFileToString(out + "/train/mid_0/x.npy");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_GE(f->size(), n * 4);
  const char* data = f->data() + (f->size() - n * 4);
  for (size_t i = 0; i < n; ++i) {
    int32_t x;
    std::memcpy(&x, data + 4 * i, 4);
    ASSERT_EQ(x, static_cast<int32_t>(3 * i + 1)) << "entry " << i;
  }
}

// A dataset's arrays together (two threads from kPutAllTwoThreadsFrom bytes): every one is
// written and published with its bytes; a failing one is the error, and nothing is published.
TEST(OfflineWriter, PutAllWritesEveryArrayAndReturnsTheFailure) {
  const std::string out = testing::ScratchDir("offline_writer_put_all") + "/out";
  const size_t n = OfflineWriter::kPutAllTwoThreadsFrom / 4 / 2;  // 3 arrays: 1.5x the mark
  std::vector<std::vector<int32_t>> v(3, std::vector<int32_t>(n));
  for (size_t k = 0; k < v.size(); ++k) {
    for (size_t i = 0; i < n; ++i) v[k][i] = static_cast<int32_t>(k * n + i);
  }
  const std::vector<order::OutputArray> arrays = {Array("train/mid_0/a.npy", v[0]),
                                                  Array("train/mid_0/b.npy", v[1]),
                                                  Array("train/mid_0/c.npy", v[2])};
  {
    OfflineWriter w(out);
    ASSERT_TRUE(w.PutAll(arrays).ok());
    ASSERT_TRUE(w.Finish(order::OfflineOutput()).ok());
  }
  for (size_t k = 0; k < v.size(); ++k) {
    const auto f = io::ReadFileToString(out + "/" + arrays[k].path);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    ASSERT_GE(f->size(), n * 4);
    EXPECT_EQ(0, std::memcmp(f->data() + f->size() - n * 4, v[k].data(), n * 4)) << arrays[k].path;
  }

  const std::string blocked = testing::ScratchDir("offline_writer_put_all_fails");
  ASSERT_TRUE(io::WriteStringToFile(blocked + "/valid", "a file where a folder would go").ok());
  {
    OfflineWriter w(blocked);
    std::vector<order::OutputArray> with_bad = arrays;
    with_bad[1].path = "valid/mid_0/b.npy";
    const Status st = w.PutAll(with_bad);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find(blocked + "/valid"), std::string::npos) << st.message();
  }
  EXPECT_EQ(Tree(blocked), (std::set<std::string>{"valid"}));
}

// Many builder threads at once under a low limit on open files: every Put waits for a
// descriptor rather than failing, and every file is published. In a child process, whose
// limit can be lowered for good; SIGALRM ends it if it hangs.
TEST(OfflineWriter, ManyConcurrentPutsStayWithinTheOpenFileLimit) {
  const std::string out = testing::ScratchDir("offline_writer_fd_limit") + "/out";
  constexpr int kThreads = 120, kPerThread = 2;
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::alarm(120);
    const struct rlimit low = {100, 100};
    if (::setrlimit(RLIMIT_NOFILE, &low) != 0) ::_exit(3);
    std::vector<int32_t> data(256 * 1024, 7);  // 1 MB: each write holds its descriptor a while
    int failures = 0;
    {
      OfflineWriter w(out);
      std::latch start(kThreads);
      std::vector<std::thread> pool;
      std::mutex mu;
      for (int t = 0; t < kThreads; ++t) {
        pool.emplace_back([&, t] {
          start.arrive_and_wait();  // all at once, into one folder (no mkdir between them)
          for (int i = 0; i < kPerThread; ++i) {
            const std::string path =
                "train/mid_0/t" + std::to_string(t) + "_" + std::to_string(i) + ".npy";
            if (Status st = w.Put(Array(path, data)); !st.ok()) {
              std::lock_guard<std::mutex> lock(mu);
              if (failures++ == 0) std::fprintf(stderr, "%s\n", st.ToString().c_str());
            }
          }
        });
      }
      for (auto& th : pool) th.join();
      if (failures == 0 && !w.Finish(order::OfflineOutput()).ok()) failures = -1;
    }
    ::_exit(failures == 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  ASSERT_EQ(WEXITSTATUS(status), 0);
  size_t files = 0;
  for (const auto& f : Tree(out)) files += f.size() > 4 && f.substr(f.size() - 4) == ".npy";
  EXPECT_EQ(files, static_cast<size_t>(kThreads * kPerThread));
}

}  // namespace
}  // namespace gridfeed::app
