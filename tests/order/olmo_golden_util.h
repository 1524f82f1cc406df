// Shared by the OLMo golden tests: where the vectors are (tests/golden/olmo, or the folder in
// GRIDFEED_OLMO_GOLDEN_DIR for another set such as the holdout), the cases of one kind listed
// in its index.json, and exact comparisons that count what they checked.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "gridfeed/io/file_util.h"
#include "gridfeed/io/npy.h"
#include "gridfeed/order/olmo/pcg64.h"

namespace gridfeed::testing {

inline std::string OlmoGoldenDir() {
  const char* env = std::getenv("GRIDFEED_OLMO_GOLDEN_DIR");
  return env != nullptr && *env != '\0' ? std::string(env) : std::string(GRIDFEED_OLMO_GOLDEN_DIR);
}

// Values and arrays compared, over the whole binary (printed at the end of each kind's test).
inline std::atomic<int64_t>& OlmoValuesChecked() {
  static std::atomic<int64_t> n{0};
  return n;
}
inline std::atomic<int64_t>& OlmoArraysChecked() {
  static std::atomic<int64_t> n{0};
  return n;
}

inline nlohmann::json ReadOlmoJson(const std::string& path) {
  auto text = io::ReadFileToString(path);
  if (!text.ok()) {
    ADD_FAILURE() << text.status().ToString();
    return nlohmann::json();
  }
  return nlohmann::json::parse(*text);
}

struct OlmoCase {
  std::string name;
  std::string dir;  // absolute
  nlohmann::json json;
};

// Every case of `kind` in index.json, with its case.json read. A listed case whose folder or
// case.json is missing, or whose case.json names another kind, is a failure.
inline std::vector<OlmoCase> OlmoCasesOfKind(const std::string& kind) {
  std::vector<OlmoCase> out;
  const std::string root = OlmoGoldenDir();
  const nlohmann::json index = ReadOlmoJson(root + "/index.json");
  if (!index.contains("cases")) {
    ADD_FAILURE() << root << "/index.json has no cases";
    return out;
  }
  for (const auto& c : index["cases"]) {
    if (c.at("kind").get<std::string>() != kind) continue;
    OlmoCase oc;
    oc.name = c.at("name").get<std::string>();
    oc.dir = root + "/" + c.at("dir").get<std::string>();
    if (!std::filesystem::is_regular_file(oc.dir + "/case.json")) {
      ADD_FAILURE() << "case " << oc.name << ": " << oc.dir << "/case.json is missing";
      continue;
    }
    oc.json = ReadOlmoJson(oc.dir + "/case.json");
    EXPECT_EQ(oc.json.value("kind", ""), kind) << oc.dir;
    out.push_back(std::move(oc));
  }
  return out;
}

// A seed as index.json writes it: a JSON integer, or a decimal string when it is large.
inline order::SeedWords SeedFromJson(const nlohmann::json& j) {
  if (j.is_string()) {
    auto w = order::ParseSeedWords(j.get<std::string>());
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    return w.ok() ? *w : order::SeedWords{0};
  }
  return order::SeedWordsOf(j.get<uint64_t>());
}

// Element-wise equality of two integer sequences, counted; the first difference is reported.
template <typename A, typename B>
void ExpectSameValues(const A& want, const B& got, const std::string& what) {
  OlmoArraysChecked() += 1;
  ASSERT_EQ(std::size(want), std::size(got)) << what << ": length";
  size_t i = 0;
  for (auto w = std::begin(want), g = std::begin(got); w != std::end(want); ++w, ++g, ++i) {
    if (static_cast<int64_t>(*w) != static_cast<int64_t>(*g)) {
      ADD_FAILURE() << what << ": element " << i << " expected " << +*w << ", got " << +*g;
      return;
    }
  }
  OlmoValuesChecked() += static_cast<int64_t>(i);
}

// A golden .npy file equals `actual` in dtype, shape and every byte (so -inf, -0.0 and NaN
// payloads of float arrays are compared too).
template <typename T>
void ExpectNpy(const std::string& path, const std::vector<T>& actual,
               const std::vector<int64_t>& shape) {
  OlmoArraysChecked() += 1;
  auto npy = io::ReadNpy(path);
  ASSERT_TRUE(npy.ok()) << npy.status().ToString();
  EXPECT_EQ(npy->descr, io::NpyDescr<T>()) << path;
  EXPECT_EQ(npy->shape, shape) << path;
  const std::vector<T> want = npy->As<T>();
  ASSERT_EQ(want.size(), actual.size()) << path;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::memcmp(&want[i], &actual[i], sizeof(T)) != 0) {
      ADD_FAILURE() << path << ": element " << i << " expected " << +want[i] << ", got "
                    << +actual[i];
      return;
    }
  }
  OlmoValuesChecked() += static_cast<int64_t>(want.size());
}

inline void PrintOlmoCounts(const std::string& what, int cases) {
  std::printf("[olmo golden] %s: %d cases; %lld arrays/lists and %lld values compared so far\n",
              what.c_str(), cases, static_cast<long long>(OlmoArraysChecked().load()),
              static_cast<long long>(OlmoValuesChecked().load()));
}

}  // namespace gridfeed::testing
