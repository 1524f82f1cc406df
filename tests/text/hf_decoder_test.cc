// The Hugging Face decoders (src/gridfeed/text/hf/decoders.cc) against the real `tokenizers`
// library: tests/text/data/hf_decoder_cases.json holds, per case, a decoder's JSON, the tokens
// and the text the library's Tokenizer.decode made of them (tests/text/oracle/
// hf_decoder_cases.js wrote it), or that the library refused the decoder.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gridfeed/text/hf/components.h"

namespace gridfeed::text::hf {
namespace {

using nlohmann::json;

const std::string kCases =
    std::string(GRIDFEED_GOLDEN_DIR) + "/../../text/data/hf_decoder_cases.json";

Result<std::string> Decode(const json& decoder, std::vector<std::string> tokens) {
  GRIDFEED_ASSIGN_OR_RETURN(auto d, MakeDecoder(decoder, JsonWhere{"t.json", "decoder"}));
  GRIDFEED_ASSIGN_OR_RETURN(auto out, d->DecodeChain(std::move(tokens)));
  std::string joined;
  for (const auto& s : out) joined += s;
  return joined;
}

TEST(HfDecoder, MatchesTheLibraryOnEveryRecordedCase) {
  std::ifstream in(kCases);
  ASSERT_TRUE(in) << kCases;
  const json cases = json::parse(in)["cases"];
  ASSERT_GE(cases.size(), 40u);
  for (const json& c : cases) {
    const std::string what = c["decoder"].dump() + " on " + c["tokens"].dump();
    auto got = Decode(c["decoder"], c["tokens"].get<std::vector<std::string>>());
    if (c.value("error", false)) {
      EXPECT_FALSE(got.ok()) << what;
      continue;
    }
    ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
    EXPECT_EQ(*got, c["text"].get<std::string>()) << what;
  }
}

TEST(HfDecoder, RefusesAnUnknownTypeByNameFileAndPath) {
  auto d = MakeDecoder(json::parse(R"({"type":"Sequence","decoders":[{"type":"Fuse"},
                                       {"type":"Nope"}]})"),
                       JsonWhere{"/x/tokenizer.json", "decoder"});
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
  const std::string& m = d.status().message();
  EXPECT_NE(m.find("\"Nope\""), std::string::npos) << m;
  EXPECT_NE(m.find("/x/tokenizer.json: decoder.decoders[1].type"), std::string::npos) << m;
}

TEST(HfDecoder, RefusesBadFieldsByPath) {
  const JsonWhere w{"f.json", "decoder"};
  for (const char* bad : {
           R"({"type":"Strip","content":"ab","start":1,"stop":0})",
           R"({"type":"Strip","content":" ","start":-1,"stop":0})",
           R"({"type":"Replace","pattern":{"Glob":"x"},"content":""})",
           R"({"type":"Replace","pattern":{"Regex":"("},"content":""})",
           R"({"type":"Metaspace","replacement":"▁","prepend_scheme":"sometimes"})",
           R"({"type":"WordPiece","prefix":"##"})",
           R"({"type":"BPEDecoder"})",
           R"({"decoders":[]})",
       }) {
    auto d = MakeDecoder(json::parse(bad), w);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(d.status().message().find("f.json: decoder"), std::string::npos)
        << bad << ": " << d.status().message();
  }
}

TEST(HfDecoder, RefusesNestingPastTheBound) {
  json j = {{"type", "Fuse"}};
  for (int i = 0; i < 40; ++i) j = {{"type", "Sequence"}, {"decoders", json::array({j})}};
  EXPECT_FALSE(MakeDecoder(j, JsonWhere{"f", "decoder"}).ok());
}

TEST(HfDecoder, StripPastTheTokenIsAnErrorWhereTheLibraryPanics) {
  auto d = MakeDecoder(json::parse(R"({"type":"Strip","content":"_","start":1,"stop":1})"),
                       JsonWhere{"f", "decoder"});
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE((*d)->DecodeChain({"__"}).ok());
  EXPECT_FALSE((*d)->DecodeChain({"_"}).ok());
}

}  // namespace
}  // namespace gridfeed::text::hf
