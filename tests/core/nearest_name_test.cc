#include "gridfeed/core/nearest_name.h"

#include <gtest/gtest.h>

namespace gridfeed {
namespace {

const std::vector<std::string> kKeys = {"global_train_batch_size",
                                        "device_train_batch_size",
                                        "seed",
                                        "epoch",
                                        "seq-length",
                                        "data-path"};

TEST(NearestNameTest, FindsOneTypo) {
  EXPECT_EQ(NearestName("global_train_batch_sise", kKeys), "global_train_batch_size");
  EXPECT_EQ(NearestName("sed", kKeys), "seed");
}

TEST(NearestNameTest, DashAndUnderscoreAndCaseAreTheSame) {
  EXPECT_EQ(NearestName("seq_length", kKeys), "seq-length");
  EXPECT_EQ(NearestName("DATA_PATH", kKeys), "data-path");
}

TEST(NearestNameTest, NothingCloseGivesNothing) {
  EXPECT_EQ(NearestName("optimizer", kKeys), "");
  EXPECT_EQ(DidYouMean("optimizer", kKeys), "");
  EXPECT_EQ(NearestName("x", {}), "");
}

TEST(NearestNameTest, DidYouMeanQuotesTheName) {
  EXPECT_EQ(DidYouMean("epoh", kKeys), " (did you mean 'epoch'?)");
}

TEST(NearestNameTest, PrefersTheClosest) {
  EXPECT_EQ(NearestName("device_train_batch_sise", kKeys), "device_train_batch_size");
}

}  // namespace
}  // namespace gridfeed
