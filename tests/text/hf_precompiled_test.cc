// The Precompiled normalizer (src/gridfeed/text/hf/precompiled_normalizer.cc) against the real
// library's (spm_precompiled) output with T5's precompiled_charsmap, on the golden texts,
// targeted strings (combining marks, full-width, half-width kana with voicing marks, NUL,
// ligatures, emoji sequences, Hangul jamo) and seeded random strings:
// tests/text/data/hf_precompiled_cases.json, from tests/text/oracle/hf_precompiled_cases.js.
#include <gtest/gtest.h>

#include "gridfeed/text/hf/models.h"
#include "hf_model_cases.h"

namespace gridfeed::text::hf {
namespace {

using nlohmann::json;
using testing::HfGoldenDir;
using testing::LoadJson;

TEST(HfPrecompiled, MatchesTheLibraryOnRecordedTexts) {
  const json d =
      LoadJson(std::string(GRIDFEED_GOLDEN_DIR) + "/../../text/data/hf_precompiled_cases.json");
  const json normalizer =
      LoadJson(HfGoldenDir() + "/" + d["charsmap_file"].get<std::string>())["normalizer"];
  auto n = MakePrecompiledNormalizer(normalizer, JsonWhere{"t5", "normalizer"});
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  size_t changed = 0;
  for (const json& c : d["cases"]) {
    std::string s = c["in"];
    ASSERT_TRUE((*n)->Normalize(&s).ok()) << c["in"];
    EXPECT_EQ(s, c["out"].get<std::string>()) << c["in"];
    changed += c["in"] != c["out"];
  }
  EXPECT_GE(d["cases"].size(), 450u);
  EXPECT_GE(changed, 100u);
}

TEST(HfPrecompiled, RefusesMalformedCharsmapsByField) {
  for (const char* text : {
           R"({"type":"Precompiled","precompiled_charsmap":null})",
           R"({"type":"Precompiled","precompiled_charsmap":"AAA"})",           // length
           R"({"type":"Precompiled","precompiled_charsmap":"AA=A"})",          // padding inside
           R"({"type":"Precompiled","precompiled_charsmap":"AB=="})",          // trailing bits
           R"({"type":"Precompiled","precompiled_charsmap":"AAA="})",          // < 4 bytes
           R"({"type":"Precompiled","precompiled_charsmap":"CAAAAAAAAA=="})",  // trie > data
           R"({"type":"Precompiled","precompiled_charsmap":"BAAAAAAAAAD/"})",  // bad UTF-8
           R"({"type":"Precompiled"})",
       }) {
    auto n = MakePrecompiledNormalizer(json::parse(text), JsonWhere{"tok.json", "normalizer"});
    ASSERT_FALSE(n.ok()) << text;
    EXPECT_EQ(n.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_NE(n.status().message().find("tok.json: normalizer"), std::string::npos)
        << text << ": " << n.status().message();
  }
}

TEST(HfPrecompiled, AnEmptyTrieIsAnErrorWhereTheLibraryPanics) {
  // Trie of 0 units, no strings: loads (as in the library), but a lookup reads past the trie.
  auto n = MakePrecompiledNormalizer(
      json::parse(R"({"type":"Precompiled","precompiled_charsmap":"AAAAAA=="})"),
      JsonWhere{"tok.json", "normalizer"});
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  std::string s = "a";
  EXPECT_FALSE((*n)->Normalize(&s).ok());
  std::string empty;
  EXPECT_TRUE((*n)->Normalize(&empty).ok());
}

}  // namespace
}  // namespace gridfeed::text::hf
