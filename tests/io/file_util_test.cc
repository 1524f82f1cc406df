#include "gridfeed/io/file_util.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/fs.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "corpus_fixture.h"
#include "gridfeed/io/indexed_dataset.h"
#include "gridfeed/io/mmap_file.h"
#include "gridfeed/io/npy.h"
#include "testing/paths.h"

namespace gridfeed::io {
namespace {

namespace fs = std::filesystem;
using gridfeed::testing::ScratchDir;

std::set<std::string> Names(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

// A file outside the output folder that a symlink planted in it points at.
struct Victim {
  std::string path;
  explicit Victim(const std::string& dir) : path(dir + "/victim") {
    EXPECT_TRUE(WriteStringToFile(path, "precious").ok());
  }
  std::string contents() const { return ReadFileToString(path).value(); }
};

// Plants "<target>.tmp.<pid>" (the old predictable temporary name) as a symlink to `victim`.
void Plant(const std::string& target, const Victim& victim) {
  fs::create_symlink(victim.path, target + ".tmp." + std::to_string(::getpid()));
}

// The folder's FS_IOC_GETFLAGS flags; nullopt where the filesystem has none.
std::optional<int> InodeFlags(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  int flags = 0;
  const bool ok = ::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
  ::close(fd);
  return ok ? std::optional<int>(flags) : std::nullopt;
}

TEST(MakeDirsSpread, MarksTheFoldersItCreatesAndNoOther) {
  const std::string base = ScratchDir("make_dirs_spread");
  // Whether this filesystem keeps the flag at all, probed on a folder of the test's own.
  const std::string probe = base + "/probe";
  fs::create_directory(probe);
  const int fd = ::open(probe.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  int set = FS_TOPDIR_FL;
  const bool keeps =
      ::ioctl(fd, FS_IOC_SETFLAGS, &set) == 0 && InodeFlags(probe).value_or(0) & FS_TOPDIR_FL;
  ::close(fd);
  // Where it does not, the flag is advice left untaken: the folders are made all the same.
  const auto before = InodeFlags(base);
  ASSERT_TRUE(MakeDirsSpread(base + "/out/train/mid_0").ok());
  ASSERT_TRUE(MakeDirsSpread(base + "/out/train/mid_1").ok());
  EXPECT_EQ(InodeFlags(base), before);  // it existed: left as it was
  for (const char* made : {"/out", "/out/train", "/out/train/mid_0", "/out/train/mid_1"}) {
    EXPECT_TRUE(fs::is_directory(base + made)) << made;
    EXPECT_EQ(static_cast<bool>(InodeFlags(base + made).value_or(0) & FS_TOPDIR_FL), keeps) << made;
  }
}

// The path as the kernel resolves it: ".." after a link is the link target's parent, not the
// folder the text would suggest; `created` lists what it made.
TEST(MakeDirsSpread, FollowsTheKernelThroughLinksAndDotDot) {
  const std::string base = ScratchDir("make_dirs_spread_links");
  fs::create_directories(base + "/real/sub");
  fs::create_symlink(base + "/real/sub", base + "/link");
  std::vector<std::string> created;
  ASSERT_TRUE(MakeDirsSpread(base + "/link/../outx/train", &created).ok());
  EXPECT_TRUE(fs::is_directory(base + "/real/outx/train"));
  EXPECT_FALSE(fs::exists(base + "/outx"));
  EXPECT_EQ(created,
            (std::vector<std::string>{base + "/link/../outx", base + "/link/../outx/train"}));
  // A file where the text's folder would be does not matter either.
  ASSERT_TRUE(WriteStringToFile(base + "/outy", "x").ok());
  EXPECT_TRUE(MakeDirsSpread(base + "/link/../outy/train").ok());
  EXPECT_TRUE(fs::is_directory(base + "/real/outy/train"));
}

TEST(MakeDirsSpread, ErrorsAsMkdirP) {
  const std::string base = ScratchDir("make_dirs_spread_errors");
  ASSERT_TRUE(WriteStringToFile(base + "/file", "x").ok());
  const Status st = MakeDirsSpread(base + "/file/sub");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(base + "/file"), std::string::npos) << st.message();
  EXPECT_TRUE(MakeDirsSpread(base).ok());  // an existing folder is fine
}

TEST(AtomicPublish, PlantedSymlinkIsNotFollowedByWriteStringToFile) {
  const std::string dir = ScratchDir("atomic_symlink_string");
  const std::string out = ScratchDir("atomic_symlink_string_out");
  Victim victim(dir);
  Plant(out + "/file.txt", victim);
  ASSERT_TRUE(WriteStringToFile(out + "/file.txt", "new contents").ok());
  EXPECT_EQ(victim.contents(), "precious");
  EXPECT_EQ(ReadFileToString(out + "/file.txt").value(), "new contents");
  // Only the target and the planted link: no temporary of ours remains.
  EXPECT_EQ(Names(out).size(), 2u);
}

TEST(AtomicPublish, PlantedSymlinksAreNotFollowedByTheBuilderAndNpy) {
  const std::string dir = ScratchDir("atomic_symlink_builder");
  const std::string out = ScratchDir("atomic_symlink_builder_out");
  Victim victim(dir);
  Plant(out + "/c.bin", victim);
  Plant(out + "/c.idx", victim);
  Plant(out + "/a.npy", victim);
  gridfeed::testing::WriteCorpus(out + "/c", DType::kUInt16, {{{1, 2, 3}}, {{4}}});
  ASSERT_TRUE(WriteNpy(out + "/a.npy", std::vector<int32_t>{1, 2}).ok());
  EXPECT_EQ(victim.contents(), "precious");
  auto ds = IndexedDataset::Open(out + "/c");
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ(ds->num_sequences(), 2);
  EXPECT_EQ(ReadNpy(out + "/a.npy")->As<int32_t>(), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(Names(out).size(), 6u);  // c.bin c.idx a.npy + the three planted links
}

TEST(AtomicPublish, NoTemporaryRemainsAfterSuccessOrAbandon) {
  const std::string dir = ScratchDir("atomic_clean");
  ASSERT_TRUE(WriteStringToFile(dir + "/a", "x").ok());
  {
    auto f = AtomicFile::Create(dir + "/b");
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    ASSERT_TRUE(f->Write("abc", 3).ok());
    EXPECT_EQ(Names(dir).size(), 2u);  // a + the temporary
  }                                    // abandoned before Commit
  {
    auto f = AtomicFile::Create(dir + "/c");
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE(f->Commit(/*publish=*/false).ok());
  }  // committed but never published
  EXPECT_EQ(Names(dir), (std::set<std::string>{"a"}));
}

// Runs `body` in a child whose files may not grow past `limit` bytes (writes fail with EFBIG);
// returns the child's exit status.
template <typename F>
int InChildWithFileSizeLimit(rlim_t limit, F body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {limit, limit};
    if (::setrlimit(RLIMIT_FSIZE, &rl) != 0) ::_exit(99);
    ::_exit(body());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(AtomicPublish, FullDiskFailsCleanlyAndKeepsTheOldFile) {
  const std::string dir = ScratchDir("atomic_full");
  ASSERT_TRUE(WriteStringToFile(dir + "/f", "old").ok());
  for (size_t size : {size_t{200}, size_t{3} << 20}) {  // fails in flush / in write
    const int rc = InChildWithFileSizeLimit(100, [&] {
      Status st = WriteStringToFile(dir + "/f", std::string(size, 'x'));
      if (st.ok()) return 1;
      return st.code() == StatusCode::kIoError ? 0 : 2;
    });
    EXPECT_EQ(rc, 0) << size;
    EXPECT_EQ(ReadFileToString(dir + "/f").value(), "old");
    EXPECT_EQ(Names(dir), (std::set<std::string>{"f"}));
  }
}

// Runs `body` in a child and returns its exit code, or -1 if it did not finish within 10 s
// (the child is killed then): a blocking open() fails the test instead of hanging it.
template <typename F>
int ExitCodeWithin10s(F body) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  for (int i = 0; i < 1000; ++i) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    ::usleep(10000);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return -1;
}

// 0 if `st` is an IoError naming `path` and "not a regular file".
int RejectsNonRegular(const Status& st, const std::string& path) {
  if (st.ok()) return 1;
  if (st.code() != StatusCode::kIoError) return 2;
  if (st.message().find(path) == std::string::npos) return 3;
  if (st.message().find("not a regular file") == std::string::npos) return 4;
  return 0;
}

TEST(NonRegularFiles, FifoTokenFilesAreRejectedAtOnce) {
  const std::string dir = ScratchDir("fifo_tokens");
  gridfeed::testing::WriteCorpus(dir + "/c", DType::kUInt16, {{{1, 2, 3}}});
  ASSERT_EQ(::mkfifo((dir + "/f.idx").c_str(), 0644), 0);
  ASSERT_EQ(::mkfifo((dir + "/g.bin").c_str(), 0644), 0);
  fs::copy_file(dir + "/c.bin", dir + "/f.bin");
  fs::copy_file(dir + "/c.idx", dir + "/g.idx");
  EXPECT_EQ(ExitCodeWithin10s([&] {
              return RejectsNonRegular(IndexedDataset::Open(dir + "/f").status(), dir + "/f.idx");
            }),
            0);
  EXPECT_EQ(ExitCodeWithin10s([&] {
              return RejectsNonRegular(IndexedDataset::Open(dir + "/g").status(), dir + "/g.bin");
            }),
            0);
  EXPECT_EQ(ExitCodeWithin10s([&] {
              return RejectsNonRegular(MMapFile::Open(dir + "/f.idx").status(), dir + "/f.idx");
            }),
            0);
  EXPECT_EQ(ExitCodeWithin10s([&] {
              return RejectsNonRegular(ReadFileToString(dir + "/f.idx").status(), dir + "/f.idx");
            }),
            0);
  EXPECT_EQ(ExitCodeWithin10s([&] {
              return RejectsNonRegular(ReadNpy(dir + "/f.idx").status(), dir + "/f.idx");
            }),
            0);
  EXPECT_EQ(
      ExitCodeWithin10s([&] { return RejectsNonRegular(ReadFileToString(dir).status(), dir); }), 0);
  EXPECT_TRUE(IndexedDataset::Open(dir + "/c").ok());
}

TEST(AtomicPublish, SignalRemovesLiveTemporaries) {
  for (int sig : {SIGINT, SIGTERM}) {
    const std::string dir = ScratchDir("atomic_signal");
    const pid_t pid = ::fork();
    if (pid == 0) {
      if (!RemoveTempFilesOnSignal().ok()) ::_exit(2);
      auto a = AtomicFile::Create(dir + "/a");
      auto b = IndexedDatasetBuilder::Create(dir + "/c", DType::kUInt16);
      if (!a.ok() || !b.ok() || !a->Write("x", 1).ok()) ::_exit(3);
      ::raise(sig);
      ::_exit(4);  // not reached: the signal's default action ends the process
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "exit " << WEXITSTATUS(status);
    EXPECT_EQ(WTERMSIG(status), sig);
    EXPECT_TRUE(Names(dir).empty()) << *Names(dir).begin();
  }
}

}  // namespace
}  // namespace gridfeed::io
