// A view of an image built in the same process (world rank 0's) serves from the token stores
// the build opened and checked, unless a file changed since: then it opens the file anew.
#include <gtest/gtest.h>

#include <filesystem>

#include "gridfeed/order/pipeline.h"
#include "testing/paths.h"

namespace gridfeed::order {
namespace {

namespace fs = std::filesystem;

// A copy of the golden corpus, so the test may remove or replace its files.
std::string CopyCorpus(const std::string& dir, const std::string& name) {
  const std::string from = gridfeed::testing::GoldenDir() + "/corpora/" + name;
  const std::string to = dir + "/c";
  fs::copy_file(from + ".idx", to + ".idx", fs::copy_options::overwrite_existing);
  fs::copy_file(from + ".bin", to + ".bin", fs::copy_options::overwrite_existing);
  return to;
}

config::JobOptions Options(const std::string& prefix) {
  config::JobOptions o;
  o.data.data_path = {prefix};
  o.data.split = "100,0,0";
  o.data.seq_length = 64;
  o.data.train_samples = "200";
  o.data.valid_samples = "0";
  o.data.test_samples = "0";
  return o;
}

struct Built {
  std::unique_ptr<Pipeline> pipeline;
  std::vector<std::byte> image;
  OpenStores stores;
  std::vector<StoreFacts> facts;  // the build's own view's
  std::vector<int64_t> tokens;    // of its sample 0
};

Built BuildOnce(const std::string& prefix) {
  Built b;
  auto p = Pipeline::For(Options(prefix));
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  b.pipeline = std::move(p).value();
  auto built = b.pipeline->Build();
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  b.stores = (*built)->OpenedStores();
  b.facts = (*built)->view().TokenStoreFacts(7);
  Sample s;
  (*built)->view().Read(Split::kTrain, 0, &s, false);
  b.tokens = s.tokens;
  auto writer = (*built)->TakeImage();
  b.image.resize(writer->size());
  writer->WriteTo(b.image.data());
  return b;
}

TEST(AdoptTokenStores, AViewServesFromTheBuildsStoresWithoutOpeningThem) {
  const std::string prefix = CopyCorpus(gridfeed::testing::ScratchDir("adopt_same"), "corpus_u16");
  Built b = BuildOnce(prefix);
  ASSERT_EQ(b.stores.size(), 1u);
  auto view = b.pipeline->ViewImage(b.image);
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  (*view)->AdoptTokenStores(b.stores);
  // The files are gone: only an adopted store can serve.
  fs::remove(prefix + ".idx");
  fs::remove(prefix + ".bin");
  ASSERT_TRUE((*view)->OpenTokenStores(false).ok());
  EXPECT_EQ((*view)->TokenStoreFacts(7), b.facts);
  Sample s;
  (*view)->Read(Split::kTrain, 0, &s, false);
  EXPECT_EQ(s.tokens, b.tokens);
  EXPECT_EQ(s.tokens.size(), 64u);
}

TEST(AdoptTokenStores, AViewWithoutThemOpensTheFiles) {
  const std::string prefix = CopyCorpus(gridfeed::testing::ScratchDir("adopt_none"), "corpus_u16");
  Built b = BuildOnce(prefix);
  auto view = b.pipeline->ViewImage(b.image);
  ASSERT_TRUE(view.ok());
  fs::remove(prefix + ".idx");
  EXPECT_FALSE((*view)->OpenTokenStores(false).ok());
}

TEST(AdoptTokenStores, AFileReplacedSinceTheBuildIsOpenedAnew) {
  const std::string dir = gridfeed::testing::ScratchDir("adopt_changed");
  const std::string prefix = CopyCorpus(dir, "corpus_u16");
  Built b = BuildOnce(prefix);
  // Another corpus under the same prefix: the build's stores are not the files any more.
  const std::string other = gridfeed::testing::GoldenDir() + "/corpora/corpus_i32";
  fs::copy_file(other + ".idx", dir + "/n.idx");
  fs::copy_file(other + ".bin", dir + "/n.bin");
  fs::rename(dir + "/n.idx", prefix + ".idx");
  fs::rename(dir + "/n.bin", prefix + ".bin");
  auto view = b.pipeline->ViewImage(b.image);
  ASSERT_TRUE(view.ok());
  (*view)->AdoptTokenStores(b.stores);
  ASSERT_TRUE((*view)->OpenTokenStores(false).ok());
  const auto facts = (*view)->TokenStoreFacts(7);
  ASSERT_EQ(facts.size(), 1u);
  EXPECT_NE(facts[0].index_xxh3, b.facts[0].index_xxh3);  // the new file's, as readers will see
}

}  // namespace
}  // namespace gridfeed::order
