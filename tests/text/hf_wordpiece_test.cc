// The WordPiece and WordLevel models (src/gridfeed/text/hf/wordpiece_model.cc,
// wordlevel_model.cc) against the real `tokenizers` library's ids for the same pre-tokenized
// pieces: the real BERT base uncased vocabulary (tests/golden/hf-tokenizers/extra/
// bert-base-uncased) and small models (max_input_chars_per_word, an empty prefix, a missing
// unk_token).
#include <gtest/gtest.h>

#include "gridfeed/text/hf/models.h"
#include "hf_model_cases.h"

namespace gridfeed::text::hf {
namespace {

using nlohmann::json;
using testing::HfGoldenDir;
using testing::LoadJson;

TEST(HfWordPiece, MatchesTheLibraryOnRecordedPieces) {
  EXPECT_GE(testing::RunModelCases("WordPiece", MakeWordPieceModel), 580u);
}

TEST(HfWordLevel, MatchesTheLibraryOnRecordedPieces) {
  EXPECT_GE(testing::RunModelCases("WordLevel", MakeWordLevelModel), 7u);
}

TEST(HfWordPiece, VocabularyLookupsAsTheLibrary) {
  auto m = MakeWordPieceModel(
      LoadJson(HfGoldenDir() + "/extra/bert-base-uncased/tokenizer.json")["model"],
      JsonWhere{"bert", "model"});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->vocab_size(), 30522);
  EXPECT_EQ((*m)->TokenToId("[UNK]"), 100);
  EXPECT_EQ((*m)->TokenToId("##able"), 3085);
  EXPECT_EQ((*m)->IdToToken(7592), "hello");
  EXPECT_EQ((*m)->IdToToken(30522), std::nullopt);
}

TEST(HfWordPiece, RefusesBadVocabulariesByField) {
  for (const auto& [text, field] : std::vector<std::pair<const char*, const char*>>{
           {R"({"type":"WordPiece","unk_token":"u","continuing_subword_prefix":"##",
                "max_input_chars_per_word":5,"vocab":{"a":0,"b":0}})",
            "model.vocab"},
           {R"({"type":"WordPiece","unk_token":"u","continuing_subword_prefix":"##",
                "max_input_chars_per_word":5,"vocab":{"a":-1}})",
            "model.vocab.a"},
           {R"({"type":"WordPiece","unk_token":"u","continuing_subword_prefix":"##",
                "max_input_chars_per_word":5,"vocab":{"a":999999999}})",
            "model.vocab"},
           {R"({"type":"WordPiece","unk_token":"u","max_input_chars_per_word":5,"vocab":{}})",
            "model"},
           {R"({"type":"WordPiece","unk_token":"u","continuing_subword_prefix":"##",
                "max_input_chars_per_word":-5,"vocab":{}})",
            "model.max_input_chars_per_word"},
       }) {
    auto m = MakeWordPieceModel(json::parse(text), JsonWhere{"tok.json", "model"});
    ASSERT_FALSE(m.ok()) << text;
    EXPECT_NE(m.status().message().find(std::string("tok.json: ") + field), std::string::npos)
        << text << ": " << m.status().message();
  }
  auto wl = MakeWordLevelModel(json::parse(R"({"type":"WordLevel","vocab":{"a":1,"b":1},
                                              "unk_token":"a"})"),
                               JsonWhere{"tok.json", "model"});
  ASSERT_FALSE(wl.ok());
  EXPECT_NE(wl.status().message().find("tok.json: model.vocab"), std::string::npos);
}

TEST(HfWordPiece, AMissingUnkTokenIsNamedWhenNeeded) {
  auto m = MakeWordPieceModel(json::parse(R"({"type":"WordPiece","unk_token":"<u>",
      "continuing_subword_prefix":"##","max_input_chars_per_word":5,"vocab":{"a":0}})"),
                              JsonWhere{"tok.json", "model"});
  ASSERT_TRUE(m.ok());
  std::vector<int32_t> ids;
  ASSERT_TRUE((*m)->Tokenize("a", &ids).ok());
  const Status s = (*m)->Tokenize("b", &ids);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("tok.json: model.unk_token"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace gridfeed::text::hf
