// Helpers for comparing gridfeed's arrays with golden .npy files: same dtype, same shape,
// same bytes.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gridfeed/io/file_util.h"
#include "gridfeed/io/npy.h"
#include "testing/paths.h"

namespace gridfeed::testing {

inline nlohmann::json ReadJson(const std::string& path) {
  auto text = io::ReadFileToString(path);
  EXPECT_TRUE(text.ok()) << path;
  return nlohmann::json::parse(text.ok() ? *text : "null");
}

// Adds a failure naming the file and the first differing element.
template <typename T>
void ExpectNpyEquals(const std::string& path, std::span<const T> actual,
                     const std::vector<int64_t>& shape, const std::string& descr = "") {
  auto expected = io::ReadNpy(path);
  ASSERT_TRUE(expected.ok()) << expected.status().ToString();
  EXPECT_EQ(expected->descr, descr.empty() ? io::NpyDescr<T>() : descr) << path;
  EXPECT_EQ(expected->shape, shape) << path;
  auto want = expected->As<T>();
  ASSERT_EQ(want.size(), actual.size()) << path;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::memcmp(&want[i], &actual[i], sizeof(T)) != 0) {
      ADD_FAILURE() << path << ": element " << i << " expected " << +want[i] << ", got "
                    << +actual[i];
      return;
    }
  }
}
template <typename T>
void ExpectNpyEquals(const std::string& path, const std::vector<T>& actual,
                     const std::vector<int64_t>& shape, const std::string& descr = "") {
  ExpectNpyEquals(path, std::span<const T>(actual), shape, descr);
}
template <typename T>
void ExpectNpyEquals(const std::string& path, const PageArray<T>& actual,
                     const std::vector<int64_t>& shape, const std::string& descr = "") {
  ExpectNpyEquals(path, std::span<const T>(actual), shape, descr);
}

// Runs each test with the golden folder as the working directory (Megatron ran there: the
// corpora's paths are relative to it), and restores the previous one after.
class InGoldenDir : public ::testing::Test {
 protected:
  void SetUp() override {
    cwd_ = std::filesystem::current_path();
    std::filesystem::current_path(GoldenDir());
  }
  void TearDown() override { std::filesystem::current_path(cwd_); }
  std::filesystem::path cwd_;
};

}  // namespace gridfeed::testing
