// The Hugging Face tokenizer's load-time semantics and its refusals. Expected ids are the
// `tokenizers` library's (npm 0.23.2, /work/oracle), run on the same inputs:
//   phi3:  encode("Hello world<|end|>\n x") -> [15043, 3186, 32007, 921]
//   gpt2 + addSpecialTokens(["<|endoftext|>", "<my_new>", "<|fim|>"]):
//          encode("a<my_new>b <|fim|>") -> [64, 50257, 65, 220, 50258], getVocabSize(true) 50259
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gridfeed/io/file_util.h"
#include "gridfeed/text/hf/components.h"
#include "gridfeed/text/text_tokenizer.h"
#include "testing/paths.h"

namespace gridfeed::text {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string Family(const std::string& name) {
  return testing::GoldenDir() + "/../hf-tokenizers/tokenizers/" + name;
}

json ReadJson(const std::string& path) { return json::parse(io::ReadFileToString(path).value()); }

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// A copy of a golden family's folder with tokenizer.json / tokenizer_config.json replaced.
std::string Folder(const std::string& name, const json& tokenizer, const json& config) {
  const std::string dir = testing::ScratchDir(name + "_" + std::to_string(::getpid()));
  Write(dir + "/tokenizer.json", tokenizer.dump());
  Write(dir + "/tokenizer_config.json", config.dump());
  return dir;
}

std::vector<int64_t> Ids(const TextTokenizer& t, const std::string& text) {
  auto ids = t.Encode(text);
  EXPECT_TRUE(ids.ok()) << ids.status().message();
  return ids.ok() ? ids.value() : std::vector<int64_t>{};
}

std::string Error(const std::string& dir, const TextTokenizerOptions& o = {}) {
  auto t = LoadTextTokenizer(dir, o);
  EXPECT_FALSE(t.ok());
  return t.ok() ? "" : t.status().message();
}

// Megatron's HuggingFaceTokenizer completes eos from sep and bos from cls (and the other way
// round): a BERT-style tokenizer without eos_token takes [SEP] as its EOS, hence as EOD.
TEST(HfTokenizer, WithoutEosTokenSepIsTheEos) {
  const json tj = {{"version", "1.0"},
                   {"added_tokens", json::array({{{"id", 0},
                                                  {"content", "[UNK]"},
                                                  {"single_word", false},
                                                  {"lstrip", false},
                                                  {"rstrip", false},
                                                  {"normalized", false},
                                                  {"special", true}},
                                                 {{"id", 1},
                                                  {"content", "[CLS]"},
                                                  {"single_word", false},
                                                  {"lstrip", false},
                                                  {"rstrip", false},
                                                  {"normalized", false},
                                                  {"special", true}},
                                                 {{"id", 2},
                                                  {"content", "[SEP]"},
                                                  {"single_word", false},
                                                  {"lstrip", false},
                                                  {"rstrip", false},
                                                  {"normalized", false},
                                                  {"special", true}}})},
                   {"normalizer", nullptr},
                   {"pre_tokenizer", {{"type", "WhitespaceSplit"}}},
                   {"post_processor", nullptr},
                   {"decoder", nullptr},
                   {"model",
                    {{"type", "WordLevel"},
                     {"vocab", {{"[UNK]", 0}, {"[CLS]", 1}, {"[SEP]", 2}, {"hello", 3}}},
                     {"unk_token", "[UNK]"}}}};
  const json cfg = {{"tokenizer_class", "BertTokenizer"},
                    {"unk_token", "[UNK]"},
                    {"sep_token", "[SEP]"},
                    {"cls_token", "[CLS]"}};
  auto t = LoadTextTokenizer(Folder("bert_like", tj, cfg));
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t.value()->eos_id(), std::optional<int64_t>(2));
  EXPECT_EQ(t.value()->bos_id(), std::optional<int64_t>(1));
  EXPECT_EQ(Ids(*t.value(), "hello [SEP] x"), (std::vector<int64_t>{3, 2, 0}));
}

// A key tokenizer_config.json leaves out takes the class's default (transformers' __init__
// keywords): BERT's real folder with only its class named still has [SEP] (102) as EOS through
// Megatron's sep -> eos, [CLS] (101) as BOS and [PAD] (0) as pad; an explicit null stays none.
TEST(HfTokenizer, AbsentSpecialTokensTakeTheClassDefaults) {
  const std::string bert = testing::GoldenDir() + "/../hf-tokenizers/extra/bert-base-uncased";
  const json tj = ReadJson(bert + "/tokenizer.json");
  auto t = LoadTextTokenizer(Folder("bert_class", tj, {{"tokenizer_class", "BertTokenizerFast"}}));
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t.value()->eos_id(), std::optional<int64_t>(102));
  EXPECT_EQ(t.value()->bos_id(), std::optional<int64_t>(101));
  EXPECT_EQ(t.value()->pad_id(), std::optional<int64_t>(0));
  EXPECT_EQ(t.value()->unk_id(), std::optional<int64_t>(100));
  auto none = LoadTextTokenizer(
      Folder("bert_null_pad", tj, {{"tokenizer_class", "BertTokenizer"}, {"pad_token", nullptr}}));
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_EQ(none.value()->pad_id(), std::nullopt);
}

TEST(HfTokenizer, LlamaClassRebuildsThePostProcessorFromAddBosToken) {
  const json tj = ReadJson(Family("phi3") + "/tokenizer.json");
  json cfg = ReadJson(Family("phi3") + "/tokenizer_config.json");
  auto plain = LoadTextTokenizer(Family("phi3"));
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(Ids(*plain.value(), "Hello world<|end|>\n x"),
            (std::vector<int64_t>{15043, 3186, 32007, 921}));
  cfg["add_bos_token"] = true;
  cfg["add_eos_token"] = true;
  auto both = LoadTextTokenizer(Folder("hf_llama_bos_eos", tj, cfg));
  ASSERT_TRUE(both.ok()) << both.status().message();
  // <s> = 1, eos <|endoftext|> = 32000.
  EXPECT_EQ(Ids(*both.value(), "Hello world<|end|>\n x"),
            (std::vector<int64_t>{1, 15043, 3186, 32007, 921, 32000}));
  cfg.erase("add_bos_token");  // LlamaTokenizerFast's default: add_bos_token true
  cfg.erase("add_eos_token");
  auto deflt = LoadTextTokenizer(Folder("hf_llama_default", tj, cfg));
  ASSERT_TRUE(deflt.ok()) << deflt.status().message();
  EXPECT_EQ(Ids(*deflt.value(), "Hello world<|end|>\n x"),
            (std::vector<int64_t>{1, 15043, 3186, 32007, 921}));
}

TEST(HfTokenizer, SpecialTokensOptionAddsNewIdsAndReplacesTheAdditionalList) {
  TextTokenizerOptions o;
  o.special_tokens = {"<my_new>", "<|fim|>"};
  auto t = LoadTextTokenizer(Family("gpt2"), o);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t.value()->vocab_size(), 50259);
  EXPECT_EQ(Ids(*t.value(), "a<my_new>b <|fim|>"),
            (std::vector<int64_t>{64, 50257, 65, 220, 50258}));
  EXPECT_EQ(t.value()->TokenId("<|fim|>"), 50258);
  std::vector<std::string> names;
  for (const auto& s : t.value()->special_tokens()) names.push_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"<|endoftext|>", "<my_new>", "<|fim|>"}));
  // Specials are dropped by Decode.
  auto text = t.value()->Decode(std::vector<int64_t>{64, 50257, 65, 220, 50258});
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text.value(), "ab ");
}

TEST(HfTokenizer, RefusesWhatItDoesNotImplementByName) {
  const json tj = ReadJson(Family("gpt2") + "/tokenizer.json");
  const json cfg = ReadJson(Family("gpt2") + "/tokenizer_config.json");
  {
    json t = tj;
    t["model"]["dropout"] = 0.1;
    const std::string e = Error(Folder("hf_dropout", t, cfg));
    EXPECT_NE(e.find("model.dropout"), std::string::npos) << e;
    EXPECT_NE(e.find("tokenizer.json"), std::string::npos) << e;
  }
  {
    json t = tj;
    t["model"]["type"] = "Fancy";
    const std::string e = Error(Folder("hf_model_type", t, cfg));
    EXPECT_NE(e.find("model.type"), std::string::npos) << e;
    EXPECT_NE(e.find("Fancy"), std::string::npos) << e;
  }
  {
    json t = tj;
    t["post_processor"] = {{"type", "Mystery"}};
    const std::string e = Error(Folder("hf_post", t, cfg));
    EXPECT_NE(e.find("post_processor.type"), std::string::npos) << e;
    EXPECT_NE(e.find("Mystery"), std::string::npos) << e;
  }
}

TEST(HfTokenizer, RefusesBadFiles) {
  const json tj = ReadJson(Family("gpt2") + "/tokenizer.json");
  const json cfg = ReadJson(Family("gpt2") + "/tokenizer_config.json");
  {
    json t = tj;
    t["model"]["merges"].push_back("Ġ zzzunknown");
    const std::string e = Error(Folder("hf_bad_merge", t, cfg));
    EXPECT_NE(e.find("zzzunknown"), std::string::npos) << e;
    EXPECT_NE(e.find("model.merges"), std::string::npos) << e;
  }
  {
    json t = tj;
    t["model"]["vocab"]["zzzdup"] = 5;
    const std::string e = Error(Folder("hf_dup_id", t, cfg));
    EXPECT_NE(e.find("id 5"), std::string::npos) << e;
  }
  {
    json t = tj;
    t["added_tokens"].push_back({{"id", 60000},
                                 {"content", "<gap>"},
                                 {"single_word", false},
                                 {"lstrip", false},
                                 {"rstrip", false},
                                 {"normalized", false},
                                 {"special", true}});
    const std::string e = Error(Folder("hf_added_gap", t, cfg));
    EXPECT_NE(e.find("added_tokens[1]"), std::string::npos) << e;
    EXPECT_NE(e.find("50257"), std::string::npos) << e;
  }
  {
    const std::string dir = testing::ScratchDir("hf_truncated_" + std::to_string(::getpid()));
    const std::string text = tj.dump();
    Write(dir + "/tokenizer.json", text.substr(0, text.size() / 2));
    const std::string e = Error(dir);
    EXPECT_NE(e.find("not valid JSON"), std::string::npos) << e;
  }
  {
    const std::string dir = testing::ScratchDir("hf_empty_folder_" + std::to_string(::getpid()));
    auto t = LoadTextTokenizer(dir);
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.status().message().find("tokenizer.json"), std::string::npos);
  }
}

TEST(HfTokenizer, RefusesInvalidUtf8) {
  auto t = LoadTextTokenizer(Family("gpt2"));
  ASSERT_TRUE(t.ok());
  auto ids = t.value()->Encode(std::string("ab\xC3(", 4));
  ASSERT_FALSE(ids.ok());
  EXPECT_NE(ids.status().message().find("byte 2"), std::string::npos);
}

}  // namespace
}  // namespace gridfeed::text
