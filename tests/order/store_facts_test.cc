// Store facts of stores without an index (OLMo's and SFT's files) name the XXH3 of no bytes, as
// checkpoints written by every release say: a resume compares them exactly.
#include "gridfeed/order/store_facts.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <vector>

namespace gridfeed::order {
namespace {

TEST(StoreFacts, NoIndexIsTheDigestOfNoBytes) {
  const std::vector<std::byte> data(10000, std::byte{7});
  const StoreFacts f = FactsOf("tokens.npy", {}, data, 5);
  EXPECT_EQ(f.index_xxh3, XXH3_64bits(nullptr, 0));
  EXPECT_EQ(f.index_xxh3, 0x2d06800538d394c2ULL);  // xxHash's XXH3-64 of the empty input
  EXPECT_EQ(EncodeFacts({f}).substr(0, 17), "2d06800538d394c2 ");
  // A known digest is taken as given; the sampled data digest is the same either way.
  const StoreFacts g = FactsWithIndexDigest("tokens.npy", 42, data, 5);
  EXPECT_EQ(g.index_xxh3, 42u);
  EXPECT_EQ(g.data_sample_xxh3, f.data_sample_xxh3);
  EXPECT_EQ(g.data_bytes, 10000u);
}

}  // namespace
}  // namespace gridfeed::order
