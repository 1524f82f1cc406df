#include "gridfeed/io/npy.h"

#include <gtest/gtest.h>

#include "gridfeed/io/file_util.h"
#include "testing/paths.h"

namespace gridfeed::io {
namespace {

TEST(Npy, RoundTripsShapesAndDtypes) {
  const std::string dir = gridfeed::testing::ScratchDir("npy");
  std::vector<int32_t> a = {1, -2, 3, 4, 5, 6};
  ASSERT_TRUE(WriteNpy(dir + "/a.npy", a, {3, 2}).ok());
  auto r = ReadNpy(dir + "/a.npy");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->descr, "<i4");
  EXPECT_EQ(r->shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(r->As<int32_t>(), a);
  std::vector<float> f = {0.5f};
  ASSERT_TRUE(WriteNpy(dir + "/f.npy", f).ok());
  EXPECT_EQ(ReadNpy(dir + "/f.npy")->As<float>(), f);
  std::vector<uint8_t> empty;
  ASSERT_TRUE(WriteNpy(dir + "/e.npy", empty, {0, 4}).ok());
  EXPECT_EQ(ReadNpy(dir + "/e.npy")->num_elements(), 0);
}

TEST(Npy, HeaderIsNumpyCompatible) {
  const std::string dir = gridfeed::testing::ScratchDir("npy_header");
  std::vector<int64_t> v = {7};
  ASSERT_TRUE(WriteNpy(dir + "/v.npy", v).ok());
  std::string bytes = ReadFileToString(dir + "/v.npy").value();
  // numpy 1.0 format: magic, version 1.0, header padded with spaces and '\n' so the data
  // starts on a multiple of 64 (numpy 1.24 writes 128 bytes for this header).
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_EQ(bytes.size(), 128u + 8u);
  EXPECT_EQ(bytes[127], '\n');
  EXPECT_NE(bytes.find("'shape': (1,)"), std::string::npos);
}

TEST(Npy, ReadsGoldenArrays) {
  auto a = ReadNpy(gridfeed::testing::GoldenDir() +
                   "/cases/u16_s969_L64_seed1234/train/mid_0/sample_index.npy");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->descr, "<i4");
  EXPECT_EQ(a->shape, (std::vector<int64_t>{14639, 2}));
}

TEST(Npy, RejectsCorruptFiles) {
  const std::string dir = gridfeed::testing::ScratchDir("npy_bad");
  std::vector<int64_t> v = {1, 2};
  ASSERT_TRUE(WriteNpy(dir + "/v.npy", v).ok());
  std::string bytes = ReadFileToString(dir + "/v.npy").value();
  ASSERT_TRUE(WriteStringToFile(dir + "/t.npy", bytes.substr(0, bytes.size() - 1)).ok());
  auto t = ReadNpy(dir + "/t.npy");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kDataLoss);
  ASSERT_TRUE(WriteStringToFile(dir + "/m.npy", "not numpy").ok());
  EXPECT_FALSE(ReadNpy(dir + "/m.npy").ok());
  // A shape edited to numbers beyond int64, or whose product overflows: DataLoss, no exception.
  for (const std::string huge : {"(99999999999999999999,", "(4294967296, 4294967296,"}) {
    std::string edited = bytes;
    const auto at = edited.find("(2,");
    ASSERT_NE(at, std::string::npos);
    edited.replace(at, 3, huge);
    ASSERT_TRUE(WriteStringToFile(dir + "/h.npy", edited).ok());
    auto h = ReadNpy(dir + "/h.npy");
    ASSERT_FALSE(h.ok()) << huge;
    EXPECT_EQ(h.status().code(), StatusCode::kDataLoss) << h.status().ToString();
    EXPECT_NE(h.status().message().find("does not fit"), std::string::npos) << h.status().message();
  }
}

}  // namespace
}  // namespace gridfeed::io
