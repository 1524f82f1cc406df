// gridfeed tables' writer (apps/gridfeed/offline_writer.h): arrays handed early from several
// threads and the rest at Finish are published together, as one folder swapped in; a writer
// that does not finish leaves nothing; a non-empty output is refused unless replaced whole.
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

// The writer for `out`; the test process ends if it cannot be made (also in a forked child).
std::unique_ptr<OfflineWriter> Writer(const std::string& out, bool replace = false) {
  auto w = OfflineWriter::Create(out, replace);
  if (!w.ok()) {
    std::fprintf(stderr, "OfflineWriter::Create: %s\n", w.status().ToString().c_str());
    std::abort();
  }
  return std::move(*w);
}

// A file named `name` in the staging folder of the writer for `out`, where a folder goes next.
void BlockInStaging(const std::string& out, const std::string& name) {
  for (const auto& e : fs::directory_iterator(fs::path(out).parent_path())) {
    if (e.path().filename().string().find(".gridfeed-staging.") != std::string::npos) {
      ASSERT_TRUE(io::WriteStringToFile((e.path() / name).string(), "not a folder").ok());
      return;
    }
  }
  FAIL() << "no staging folder beside " << out;
}

order::OutputArray Array(const std::string& path, const std::vector<int32_t>& v) {
  return {path, "<i4", {static_cast<int64_t>(v.size())}, v.data(), v.size() * 4, nullptr, {}};
}

TEST(OfflineWriter, EarlyAndLateArraysArePublishedTogether) {
  const std::string out = testing::ScratchDir("offline_writer_publish") + "/out";
  std::vector<int32_t> a = {1, 2, 3}, b = {4, 5}, c = {6};
  {
    auto writer = Writer(out);
    OfflineWriter& w = *writer;
    std::thread t1([&] { EXPECT_TRUE(w.Put(Array("train/mid_0/x.npy", a)).ok()); });
    std::thread t2([&] { EXPECT_TRUE(w.Put(Array("train/mid_1/x.npy", b)).ok()); });
    t1.join();
    t2.join();
    // Nothing is published before Finish: the output folder does not exist yet.
    EXPECT_FALSE(fs::exists(out));
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

TEST(OfflineWriter, MakesTheOutputsParentFolders) {
  const std::string out = testing::ScratchDir("offline_writer_parents") + "/a/b/out";
  auto w = Writer(out);
  order::OfflineOutput rest;
  rest.texts.push_back({"summary.json", "{}\n"});
  ASSERT_TRUE(w->Finish(rest).ok());
  EXPECT_EQ(Tree(out), (std::set<std::string>{"summary.json"}));
}

TEST(OfflineWriter, UnfinishedWriterLeavesNothing) {
  const std::string base = testing::ScratchDir("offline_writer_unfinished");
  const std::string out = base + "/out";
  std::vector<int32_t> a = {1, 2, 3};
  {
    auto w = Writer(out);
    ASSERT_TRUE(w->Put(Array("train/mid_0/x.npy", a)).ok());
    ASSERT_TRUE(w->Put(Array("train/mid_1/x.npy", a)).ok());
    EXPECT_FALSE(Tree(base).empty());  // the staging folder beside `out`
    EXPECT_FALSE(fs::exists(out));
  }  // the build failed: no Finish
  EXPECT_TRUE(Tree(base).empty()) << "left: " << *Tree(base).begin();
}

// A folder holding another run is refused (naming it and the flag) before anything is
// written; with `replace` it is swapped out whole once the new output is complete: nothing of
// the old run stays beside the new one, and an unfinished replacement leaves the old intact.
TEST(OfflineWriter, ANonEmptyOutputIsRefusedOrReplacedWhole) {
  const std::string out = testing::ScratchDir("offline_writer_existing");
  ASSERT_TRUE(io::WriteStringToFile(out + "/summary.json", "old").ok());
  fs::create_directories(out + "/train/mid_9");
  ASSERT_TRUE(io::WriteStringToFile(out + "/train/mid_9/x.npy", "old").ok());
  auto refused = OfflineWriter::Create(out, /*replace=*/false);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(out), std::string::npos);
  EXPECT_NE(refused.status().message().find("--replace"), std::string::npos);
  const auto old_tree = Tree(out);
  std::vector<int32_t> a = {1};
  {
    auto w = Writer(out, /*replace=*/true);
    ASSERT_TRUE(w->Put(Array("train/mid_0/x.npy", a)).ok());
  }  // failed before Finish
  EXPECT_EQ(Tree(out), old_tree);
  {
    auto w = Writer(out, /*replace=*/true);
    ASSERT_TRUE(w->Put(Array("train/mid_0/x.npy", a)).ok());
    order::OfflineOutput rest;
    rest.texts.push_back({"summary.json", "{}\n"});
    ASSERT_TRUE(w->Finish(rest).ok());
  }
  EXPECT_EQ(Tree(out),
            (std::set<std::string>{"summary.json", "train/", "train/mid_0/", "train/mid_0/x.npy"}));
  EXPECT_EQ(io::ReadFileToString(out + "/summary.json").value(), "{}\n");
  // Nothing left beside it: the staging folder and the old output are gone.
  for (const auto& e : fs::directory_iterator(fs::path(out).parent_path())) {
    EXPECT_EQ(e.path().filename().string().find("gridfeed-staging"), std::string::npos) << e.path();
  }
}

TEST(OfflineWriter, AFailedPutNamesTheFileAndFailsTheLaterOnes) {
  const std::string out = testing::ScratchDir("offline_writer_failed_put") + "/out";
  std::vector<int32_t> a = {1};
  {
    auto w = Writer(out);
    ASSERT_TRUE(w->Put(Array("train/mid_0/x.npy", a)).ok());
    BlockInStaging(out, "valid");
    for (const char* path : {"valid/mid_0/x.npy", "train/mid_1/x.npy"}) {
      const Status st = w->Put(Array(path, a));
      ASSERT_FALSE(st.ok()) << path;
      EXPECT_NE(st.message().find("/valid"), std::string::npos) << st.message();
    }
  }
  EXPECT_FALSE(fs::exists(out));
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
    auto writer = Writer(out);
    OfflineWriter& w = *writer;
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
    auto writer = Writer(out);
    OfflineWriter& w = *writer;
    ASSERT_TRUE(w.PutAll(arrays).ok());
    ASSERT_TRUE(w.Finish(order::OfflineOutput()).ok());
  }
  for (size_t k = 0; k < v.size(); ++k) {
    const auto f = io::ReadFileToString(out + "/" + arrays[k].path);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    ASSERT_GE(f->size(), n * 4);
    EXPECT_EQ(0, std::memcmp(f->data() + f->size() - n * 4, v[k].data(), n * 4)) << arrays[k].path;
  }

  const std::string blocked = testing::ScratchDir("offline_writer_put_all_fails") + "/out";
  {
    auto writer = Writer(blocked);
    OfflineWriter& w = *writer;
    BlockInStaging(blocked, "valid");
    std::vector<order::OutputArray> with_bad = arrays;
    with_bad[1].path = "valid/mid_0/b.npy";
    const Status st = w.PutAll(with_bad);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("/valid"), std::string::npos) << st.message();
  }
  EXPECT_FALSE(fs::exists(blocked));
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
      auto writer = Writer(out);
      OfflineWriter& w = *writer;
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
