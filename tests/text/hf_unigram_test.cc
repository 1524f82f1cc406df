// The Unigram model (src/gridfeed/text/hf/unigram_model.cc) against the real `tokenizers`
// library's ids for the same pre-tokenized pieces: the real T5 vocabulary
// (tests/golden/hf-tokenizers/extra/t5) and small models for unknown fusing, byte fallback,
// a missing unk_id, ties, duplicate pieces and positive scores.
#include <gtest/gtest.h>

#include "gridfeed/text/hf/models.h"
#include "hf_model_cases.h"

namespace gridfeed::text::hf {
namespace {

using nlohmann::json;
using testing::HfGoldenDir;
using testing::LoadJson;

TEST(HfUnigram, MatchesTheLibraryOnRecordedPieces) {
  EXPECT_GE(testing::RunModelCases("Unigram", MakeUnigramModel), 700u);
}

TEST(HfUnigram, VocabularyLookupsAsTheLibrary) {
  auto m = MakeUnigramModel(LoadJson(HfGoldenDir() + "/extra/t5/tokenizer.json")["model"],
                            JsonWhere{"t5", "model"});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->vocab_size(), 32100);  // the library's get_vocab_size(false)
  EXPECT_EQ((*m)->TokenToId("▁Hello"), 8774);
  EXPECT_EQ((*m)->TokenToId("<extra_id_0>"), 32099);
  EXPECT_EQ((*m)->TokenToId("nope-not-a-piece"), std::nullopt);
  EXPECT_EQ((*m)->IdToToken(296), "▁world");
  EXPECT_EQ((*m)->IdToToken(32100), std::nullopt);
  EXPECT_EQ((*m)->IdToToken(-1), std::nullopt);
}

TEST(HfUnigram, EmptyPieceGivesNothing) {
  auto m = MakeUnigramModel(json::parse(R"({"type":"Unigram","unk_id":0,"vocab":[["<unk>",0]]})"),
                            JsonWhere{"f", "model"});
  ASSERT_TRUE(m.ok());
  std::vector<int32_t> ids;
  ASSERT_TRUE((*m)->Tokenize("", &ids).ok());
  EXPECT_TRUE(ids.empty());
}

TEST(HfUnigram, RefusesWhatTheLibraryRefusesByField) {
  for (const auto& [text, field] : std::vector<std::pair<const char*, const char*>>{
           {R"({"type":"Unigram","unk_id":1,"vocab":[["<unk>",0]]})", "model.unk_id"},
           {R"({"type":"Unigram","unk_id":0,"vocab":[]})", "model.unk_id"},
           {R"({"type":"Unigram","unk_id":-1,"vocab":[["a",0]]})", "model.unk_id"},
           {R"({"type":"Unigram","unk_id":0})", "model"},
           {R"({"type":"Unigram","vocab":[["a",0],["b"]]})", "model.vocab[1]"},
           {R"({"type":"Unigram","vocab":[["a","x"]]})", "model.vocab[0]"},
           {R"({"type":"Unigram","vocab":[["a",0]],"byte_fallback":1})", "model.byte_fallback"},
       }) {
    auto m = MakeUnigramModel(json::parse(text), JsonWhere{"tok.json", "model"});
    ASSERT_FALSE(m.ok()) << text;
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(m.status().message().find(std::string("tok.json: ") + field), std::string::npos)
        << text << ": " << m.status().message();
  }
}

}  // namespace
}  // namespace gridfeed::text::hf
