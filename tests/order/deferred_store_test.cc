// A reader whose token files start-up proved to be rank 0's very files opens each store at its
// first read (order/megatron/deferred_store.h): nothing at OpenTokenStores(true), the same
// samples after, and a store removed under the job ends it with a message naming the store.
#include <gtest/gtest.h>

#include <filesystem>

#include "gridfeed/order/pipeline.h"
#include "testing/paths.h"

namespace gridfeed::order {
namespace {

namespace fs = std::filesystem;

std::string CopyCorpus(const std::string& dir) {
  const std::string from = gridfeed::testing::GoldenDir() + "/corpora/corpus_u16";
  const std::string to = dir + "/c";
  fs::copy_file(from + ".idx", to + ".idx", fs::copy_options::overwrite_existing);
  fs::copy_file(from + ".bin", to + ".bin", fs::copy_options::overwrite_existing);
  return to;
}

struct Built {
  std::unique_ptr<Pipeline> pipeline;
  std::vector<std::byte> image;
  std::vector<int64_t> tokens;  // of sample 0, as the build's own view reads it
};

Built BuildOnce(const std::string& prefix) {
  config::JobOptions o;
  o.data.data_path = {prefix};
  o.data.split = "100,0,0";
  o.data.seq_length = 64;
  o.data.train_samples = "200";
  o.data.valid_samples = "0";
  o.data.test_samples = "0";
  Built b;
  auto p = Pipeline::For(o);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  b.pipeline = std::move(p).value();
  auto built = b.pipeline->Build();
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  Sample s;
  (*built)->view().Read(Split::kTrain, 0, &s, false);
  b.tokens = s.tokens;
  auto writer = (*built)->TakeImage();
  b.image.resize(writer->size());
  writer->WriteTo(b.image.data());
  return b;
}

TEST(DeferredStore, AProvenReaderReadsTheSameSamples) {
  const std::string prefix = CopyCorpus(gridfeed::testing::ScratchDir("deferred_same"));
  Built b = BuildOnce(prefix);
  auto view = b.pipeline->ViewImage(b.image);
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  ASSERT_TRUE((*view)->OpenTokenStores(/*checked_on_node=*/true).ok());
  Sample s;
  (*view)->Read(Split::kTrain, 0, &s, false);
  EXPECT_EQ(s.tokens, b.tokens);
  EXPECT_FALSE(s.tokens.empty());
}

TEST(DeferredStoreDeathTest, AStoreRemovedBeforeItsFirstReadEndsTheJobNamingIt) {
  const std::string prefix = CopyCorpus(gridfeed::testing::ScratchDir("deferred_removed"));
  Built b = BuildOnce(prefix);
  auto view = b.pipeline->ViewImage(b.image);
  ASSERT_TRUE(view.ok());
  // Opened at start-up, the store would serve from its maps after the files go; deferred, it
  // is opened only now, and the job ends.
  ASSERT_TRUE((*view)->OpenTokenStores(/*checked_on_node=*/true).ok());
  fs::remove(prefix + ".idx");
  fs::remove(prefix + ".bin");
  Sample s;
  EXPECT_EXIT((*view)->Read(Split::kTrain, 0, &s, false), ::testing::ExitedWithCode(1),
              "token store '.*deferred_removed/c' changed under the job.*the job ends");
}

TEST(DeferredStore, AFullCheckStillOpensAtStartUp) {
  const std::string prefix = CopyCorpus(gridfeed::testing::ScratchDir("deferred_full"));
  Built b = BuildOnce(prefix);
  auto view = b.pipeline->ViewImage(b.image);
  ASSERT_TRUE(view.ok());
  ASSERT_TRUE((*view)->OpenTokenStores(/*checked_on_node=*/false).ok());
  fs::remove(prefix + ".idx");
  fs::remove(prefix + ".bin");
  Sample s;
  (*view)->Read(Split::kTrain, 0, &s, false);  // from the maps made at start-up
  EXPECT_EQ(s.tokens, b.tokens);
}

}  // namespace
}  // namespace gridfeed::order
