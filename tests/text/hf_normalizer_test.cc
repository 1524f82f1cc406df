// The Hugging Face normalizers against the real `tokenizers` library:
// tests/text/data/hf_component_cases.json (written by tests/text/oracle/hf_component_cases.js)
// holds, per normalizer JSON, the library's normalized string for ~150 texts, or its refusal.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "gridfeed/text/hf/components.h"

namespace gridfeed::text::hf {
namespace {

using nlohmann::json;

TEST(HfNormalizer, MatchesTheLibraryOnEveryCase) {
  std::ifstream in(std::string(GRIDFEED_GOLDEN_DIR) + "/../../text/data/hf_component_cases.json");
  ASSERT_TRUE(in.good());
  const json cases = json::parse(in)["normalizers"];
  ASSERT_GT(cases.size(), 10u);
  size_t checked = 0;
  for (const json& c : cases) {
    const std::string name = c["component"].dump();
    auto made = MakeNormalizer(c["component"], JsonWhere{"/x/tokenizer.json", "normalizer"});
    if (c.contains("error")) {
      EXPECT_FALSE(made.ok()) << name << " is refused by the library: " << c["error"];
      if (!made.ok()) {
        EXPECT_EQ(made.status().code(), StatusCode::kInvalidArgument);
        EXPECT_NE(made.status().message().find("/x/tokenizer.json: normalizer"), std::string::npos)
            << made.status().message();
      }
      continue;
    }
    ASSERT_TRUE(made.ok()) << name << ": " << made.status().ToString();
    for (const json& t : c["texts"]) {
      std::string text = t[0];
      const Status s = (*made)->Normalize(&text);
      if (t[1].is_null()) {
        EXPECT_FALSE(s.ok()) << name << " on " << t[0].dump();
        continue;
      }
      ASSERT_TRUE(s.ok()) << name << ": " << s.ToString();
      EXPECT_EQ(text, t[1].get<std::string>()) << name << " on " << t[0].dump();
      ++checked;
    }
  }
  EXPECT_GT(checked, 1000u);
}

TEST(HfNormalizer, UnknownTypeNamesTypeFileAndPath) {
  auto made =
      MakeNormalizer(json::parse(R"({"type":"Sequence","normalizers":[{"type":"Uppercase"}]})"),
                     JsonWhere{"/m/tokenizer.json", "normalizer"});
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.status().message().find("\"Uppercase\""), std::string::npos);
  EXPECT_NE(made.status().message().find("/m/tokenizer.json: normalizer.normalizers[0].type"),
            std::string::npos)
      << made.status().message();
}

}  // namespace
}  // namespace gridfeed::text::hf
