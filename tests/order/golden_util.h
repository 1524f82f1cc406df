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
#include "gridfeed/order/gpt_tables.h"
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

// A mid-level dataset's document, sample and shuffle index against a golden mid_<k> folder.
inline void ExpectMidTablesEqual(const std::string& md, const order::GptTablesView& t) {
  ExpectNpyEquals(md + "/document_index.npy", t.document_index,
                  {static_cast<int64_t>(t.document_index.size())});
  const int64_t rows = t.num_samples() + 1;
  if (t.sample_index64.empty()) {
    ExpectNpyEquals(md + "/sample_index.npy", t.sample_index32, {rows, 2});
  } else {
    ExpectNpyEquals(md + "/sample_index.npy", t.sample_index64, {rows, 2});
  }
  if (t.shuffle_index_is_int64) {
    ExpectNpyEquals(md + "/shuffle_index.npy", t.shuffle_index64, {rows - 1});
  } else {
    ExpectNpyEquals(md + "/shuffle_index.npy", t.shuffle_index32, {rows - 1});
  }
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
