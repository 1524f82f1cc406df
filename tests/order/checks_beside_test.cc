// The full index check beside a build with a drawing thread (2^20 document-index entries and
// up) starts once that thread is done drawing (dataset_builder.cc): it still runs, and a bad
// index is still the build's error, never a wait.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gridfeed/core/usable_cpus.h"
#include "gridfeed/io/file_util.h"
#include "gridfeed/io/index_file.h"
#include "gridfeed/order/dataset_builder.h"
#include "testing/paths.h"

namespace gridfeed::order {
namespace {

constexpr int64_t kDocuments = (int64_t{1} << 20) + 4096;

// An int32 corpus of kDocuments documents of 2 or 3 tokens (the .bin sparse); `bad_pointer`
// moves one sequence pointer in the middle, which only the full check finds.
std::string WriteCorpus(const std::string& name, bool bad_pointer) {
  const std::string prefix = gridfeed::testing::ScratchDir(name) + "/c";
  const uint64_t n = kDocuments;
  std::vector<int32_t> lengths(n);
  std::vector<int64_t> pointers(n), docs(n + 1);
  int64_t bytes = 0;
  for (uint64_t i = 0; i < n; ++i) {
    lengths[i] = 2 + static_cast<int32_t>(i % 2);
    pointers[i] = bytes;
    bytes += int64_t{lengths[i]} * 4;
    docs[i] = static_cast<int64_t>(i);
  }
  docs[n] = static_cast<int64_t>(n);
  if (bad_pointer) pointers[n / 2] += 4;
  std::string idx(io::kIndexMagic, sizeof(io::kIndexMagic));
  const uint64_t version = 1, count = n, doc_count = n + 1;
  const uint8_t code = 4;  // int32
  idx.append(reinterpret_cast<const char*>(&version), 8);
  idx.append(reinterpret_cast<const char*>(&code), 1);
  idx.append(reinterpret_cast<const char*>(&count), 8);
  idx.append(reinterpret_cast<const char*>(&doc_count), 8);
  idx.append(reinterpret_cast<const char*>(lengths.data()), n * 4);
  idx.append(reinterpret_cast<const char*>(pointers.data()), n * 8);
  idx.append(reinterpret_cast<const char*>(docs.data()), (n + 1) * 8);
  EXPECT_TRUE(io::WriteStringToFile(prefix + ".idx", idx).ok());
  const int fd = ::open((prefix + ".bin").c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::ftruncate(fd, bytes), 0);
  ::close(fd);
  return prefix;
}

DatasetConfig Config(const std::string& prefix) {
  DatasetConfig c;
  c.data_path = std::vector<std::string>{prefix};
  c.split = "100,0,0";
  c.seq_length = 16;
  c.seed = 1234;
  c.sizes[0] = 100000;
  c.digest_indexes = true;
  return c;
}

TEST(ChecksBeside, RunWhenTheDrawingThreadIsDone) {
  auto built = BuildDatasets(Config(WriteCorpus("checks_beside_good", false)));
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  EXPECT_EQ(built->splits[0]->mids[0].tables.document_index.size(),
            static_cast<size_t>(kDocuments));
  if (UsableCpus() >= 2) {
    EXPECT_GT(built->seconds_checks_beside, 0.0);
  }
}

TEST(ChecksBeside, ABadIndexIsTheBuildsError) {
  auto built = BuildDatasets(Config(WriteCorpus("checks_beside_bad", true)));
  ASSERT_FALSE(built.ok());
  EXPECT_NE(built.status().ToString().find("sequence_pointers["), std::string::npos)
      << built.status().ToString();
}

}  // namespace
}  // namespace gridfeed::order
