#include "gridfeed/io/mmap_file.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

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

}  // namespace
}  // namespace gridfeed::io
