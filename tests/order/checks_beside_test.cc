// The full index check beside a build with a drawing thread (2^20 document-index entries and
// up) starts once that thread is done drawing (dataset_builder.cc): it still runs, and a bad
// index is still the build's error, never a wait.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "gridfeed/core/usable_cpus.h"
#include "gridfeed/order/dataset_builder.h"
#include "testing/paths.h"
#include "testing/synthetic_store.h"

namespace gridfeed::order {
namespace {

constexpr int64_t kDocuments = (int64_t{1} << 20) + 4096;

// An int32 corpus of kDocuments documents of 2 or 3 tokens (the .bin sparse); `bad_pointer`
// moves one sequence pointer in the middle, which only the full check finds.
std::string WriteCorpus(const std::string& name, bool bad_pointer) {
  const std::string prefix = gridfeed::testing::ScratchDir(name) + "/c";
  EXPECT_TRUE(gridfeed::testing::WriteSyntheticStore(prefix, kDocuments, 2, bad_pointer));
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
