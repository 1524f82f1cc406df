#include "gridfeed/io/mmap_file.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "gridfeed/core/memory_usage.h"
#include "gridfeed/io/file_util.h"
#include "testing/paths.h"

namespace gridfeed::io {
namespace {

uint64_t Sum(std::span<const std::byte> bytes) {
  uint64_t sum = 0;
  for (size_t i = 0; i < bytes.size(); i += 512) sum += static_cast<uint64_t>(bytes[i]);
  return sum;
}

// A pass over a large mapped file, then DropPages: the pages leave this process's resident set
// and the bytes read the same afterwards.
TEST(MMapFile, DropPagesReleasesResidentPagesAndKeepsTheBytes) {
  const std::string path = gridfeed::testing::ScratchDir("mmap_drop") + "/big";
  std::string contents(size_t{48} << 20, '\0');
  for (size_t i = 0; i < contents.size(); i += 512) contents[i] = static_cast<char>(i / 512 % 251);
  ASSERT_TRUE(WriteStringToFile(path, contents).ok());
  auto file = MMapFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const uint64_t want = Sum(std::as_bytes(std::span(contents.data(), contents.size())));
  contents = std::string();

  ASSERT_EQ(Sum(file->bytes()), want);
  const int64_t touched = ResidentBytes();
  file->DropPages(file->bytes());
  const int64_t dropped = ResidentBytes();
  ASSERT_GT(touched, 0);
  EXPECT_GE(touched - dropped, int64_t{40} << 20);
  EXPECT_EQ(Sum(file->bytes()), want);

  // A part that covers no whole page, and an empty one, drop nothing and are allowed.
  file->DropPages(file->bytes().subspan(10, 100));
  file->DropPages(file->bytes().subspan(0, 0));
}

// ReadAt gives the file's bytes wherever the destination lies against the source modulo 4 KiB:
// the aligned and far cases read straight in, a destination a few bytes past its source goes
// through a buffer (several of its 256 KiB parts here, and a tail); a read past the end is
// refused.
TEST(MappedFileReader, ReadsTheBytesAtEveryAlignmentOfTheDestination) {
  const std::string path = gridfeed::testing::ScratchDir("reader_align") + "/data";
  std::string contents((size_t{1} << 20) + 12345, '\0');
  for (size_t i = 0; i < contents.size(); ++i) contents[i] = static_cast<char>(i * 131 % 251);
  ASSERT_TRUE(WriteStringToFile(path, contents).ok());
  auto file = MMapFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const MappedFileReader reader(*file);
  ASSERT_TRUE(reader.ok());
  std::vector<std::byte> space(contents.size() + 2 * 4096);
  const auto base = reinterpret_cast<uintptr_t>(space.data());
  for (const uint64_t offset : {uint64_t{0}, uint64_t{34}, uint64_t{4095}}) {
    for (const uint64_t delta : {uint64_t{0}, uint64_t{4}, uint64_t{16}, uint64_t{63}, uint64_t{64},
                                 uint64_t{2048}, uint64_t{4092}}) {
      SCOPED_TRACE("offset " + std::to_string(offset) + ", delta " + std::to_string(delta));
      // The first address at or after `base` that lies `delta` past the source modulo 4 KiB.
      const uintptr_t want = (offset + delta) % 4096;
      std::byte* dst = space.data() + ((want - base % 4096 + 4096) % 4096);
      const size_t n = contents.size() - offset;
      std::fill(space.begin(), space.end(), std::byte{0});
      ASSERT_TRUE(reader.ReadAt(offset, std::span(dst, n)));
      EXPECT_EQ(std::memcmp(dst, contents.data() + offset, n), 0);
      EXPECT_FALSE(reader.ReadAt(offset + 1, std::span(dst, n)));  // one byte past the end
    }
  }
}

// Reads every 4 KiB page of `bytes` (volatile: the reads happen).
uint64_t TouchPages(std::span<const std::byte> bytes) {
  uint64_t sum = 0;
  for (size_t i = 0; i < bytes.size(); i += 4096) {
    sum += static_cast<uint64_t>(*static_cast<const volatile std::byte*>(&bytes[i]));
  }
  return sum;
}

// A store truncated while mapped (issue 51 item 8): the read past its new end faults, and the
// process ends with a message naming the file, the offset and that it changed under the job,
// instead of dying of SIGBUS silently. The temporaries of outputs being written are removed.
TEST(MMapFileDeathTest, ATruncatedStoreEndsTheProcessWithAMessageNamingTheFile) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string dir = gridfeed::testing::ScratchDir("mmap_truncated");
  const std::string path = dir + "/store.bin";
  ASSERT_TRUE(WriteStringToFile(path, std::string(5 * 4096, 'x')).ok());
  EXPECT_EXIT(
      {
        auto file = MMapFile::Open(path);
        if (!file.ok()) std::_Exit(3);
        auto out = TempFile::Create(dir + "/output");
        if (!out.ok()) std::_Exit(4);
        TouchPages(file->bytes());
        if (::truncate(path.c_str(), 8192) != 0) std::_Exit(5);
        TouchPages(file->bytes());
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(1),
      "gridfeed: error \\(rank 0\\): '" + path +
          "' changed under the job \\(truncated while mapped: a read at offset 8192 faulted; "
          "it is now 8192 bytes, 20480 when mapped\\)");
  // Only the store is left: the output's temporary went with the process.
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 1u);
}

// A SIGBUS outside every store's mapping (here sent by kill) keeps its previous course.
TEST(MMapFileDeathTest, AnotherSigbusKeepsItsPreviousCourse) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string path = gridfeed::testing::ScratchDir("mmap_other_sigbus") + "/store.bin";
  ASSERT_TRUE(WriteStringToFile(path, std::string(4096, 'x')).ok());
  EXPECT_EXIT(
      {
        // A known previous course (under ASan it would be ASan's report and abort).
        std::signal(SIGBUS, SIG_DFL);
        auto file = MMapFile::Open(path);  // the handler is installed with the first mapping
        if (!file.ok()) std::_Exit(3);
        ::kill(::getpid(), SIGBUS);
        std::_Exit(0);
      },
      ::testing::KilledBySignal(SIGBUS), "");
}

}  // namespace
}  // namespace gridfeed::io
