// Megatron's tokenizer flags and kinds (text/tokenizer_spec.h): GPT2BPETokenizer and TikTokenizer
// against their oracles (tests/text/oracle/gpt2_bpe_cases.js: the `tokenizers` library on the
// gpt2 tokenizer.json; tiktoken_cases.js: the real tiktoken), NullTokenizer against Python's
// int(), and the flags' errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gridfeed/io/file_util.h"
#include "gridfeed/text/tokenizer_spec.h"

namespace gridfeed::text {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string TestDir() { return std::string(GRIDFEED_GOLDEN_DIR) + "/../.."; }

json ReadJson(const std::string& path) {
  auto text = io::ReadFileToString(path);
  EXPECT_TRUE(text.ok()) << path;
  return json::parse(*text);
}

void WriteFile(const fs::path& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary);
  f << s;
}

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("gf_megatron_tok_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

// vocab.json and merges.txt as GPT-2 ships them, taken from the golden gpt2 tokenizer.json.
void WriteGpt2Files(const fs::path& dir) {
  const json tj = ReadJson(TestDir() + "/golden/hf-tokenizers/tokenizers/gpt2/tokenizer.json");
  WriteFile(dir / "vocab.json", tj["model"]["vocab"].dump());
  std::string merges = "#version: 0.2\n";
  for (const auto& m : tj["model"]["merges"]) merges += m.get<std::string>() + "\n";
  WriteFile(dir / "merges.txt", merges);
}

TokenizerSpec Gpt2Spec(const fs::path& dir) {
  TokenizerSpec s;
  s.type = "GPT2BPETokenizer";
  s.vocab_file = (dir / "vocab.json").string();
  s.merge_file = (dir / "merges.txt").string();
  return s;
}

TEST(Gpt2BpeTokenizer, IdsAndDecodeEqualTheOracle) {
  TempDir dir;
  WriteGpt2Files(dir.path());
  auto tok = LoadTokenizer(Gpt2Spec(dir.path()));
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->vocab_size(), 50257);
  EXPECT_EQ((*tok)->eos_id(), 50256);
  EXPECT_EQ((*tok)->bos_id(), 50256);
  EXPECT_EQ((*tok)->TokenId("<|endoftext|>"), 50256);
  const json cases = ReadJson(TestDir() + "/text/data/gpt2_bpe_cases.json")["cases"];
  ASSERT_GE(cases.size(), 50u);
  for (const auto& c : cases) {
    const std::string text = c["text"];
    auto ids = (*tok)->Encode(text);
    ASSERT_TRUE(ids.ok()) << ids.status().ToString();
    EXPECT_EQ(*ids, c["ids"].get<std::vector<int64_t>>()) << json(text).dump();
    auto back = (*tok)->Decode(*ids);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, c["decoded"].get<std::string>()) << json(text).dump();
  }
}

TEST(Gpt2BpeTokenizer, AdditionalSpecialTokensAreMatched) {
  TempDir dir;
  WriteGpt2Files(dir.path());
  TokenizerSpec s = Gpt2Spec(dir.path());
  s.tokenizer_special_tokens = std::vector<std::string>{"<fim_prefix>", "Hello"};
  auto tok = LoadTokenizer(s);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  // A string the vocabulary lacks gets the next id; "Hello" keeps its vocabulary id (15496) and
  // is now matched before pre-tokenization, so " Hello" loses its space-glued token (ids from
  // the npm `tokenizers` oracle after addSpecialTokens(["<fim_prefix>", "Hello"])).
  EXPECT_EQ((*tok)->vocab_size(), 50258);
  EXPECT_EQ((*tok)->TokenId("<fim_prefix>"), 50257);
  auto ids = (*tok)->Encode("<fim_prefix>x Hello");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<int64_t>{50257, 87, 220, 15496}));
}

TEST(Gpt2BpeTokenizer, RefusesBadFiles) {
  TempDir dir;
  WriteGpt2Files(dir.path());
  WriteFile(dir.path() / "bad_merges.txt", "#version: 0.2\nĠ t\nĠa\n");
  TokenizerSpec s = Gpt2Spec(dir.path());
  s.merge_file = (dir.path() / "bad_merges.txt").string();
  auto tok = LoadTokenizer(s);
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.status().message().find("line 3"), std::string::npos) << tok.status().ToString();

  WriteFile(dir.path() / "no_eot.json", R"({"a": 0, "b": 1})");
  WriteFile(dir.path() / "none.txt", "#version: 0.2\n");
  s.vocab_file = (dir.path() / "no_eot.json").string();
  s.merge_file = (dir.path() / "none.txt").string();
  tok = LoadTokenizer(s);
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.status().message().find("<|endoftext|>"), std::string::npos);

  WriteFile(dir.path() / "not_object.json", "[1, 2]");
  s.vocab_file = (dir.path() / "not_object.json").string();
  tok = LoadTokenizer(s);
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.status().message().find("--vocab-file"), std::string::npos);
}

TEST(TiktokenTokenizer, IdsAndDecodeEqualTheOracle) {
  const std::string vocab = TestDir() + "/text/data/tiktoken_vocab.json";
  const json all = ReadJson(TestDir() + "/text/data/tiktoken_cases.json");
  ASSERT_EQ(all["configs"].size(), 3u);
  for (const auto& cfg : all["configs"]) {
    TokenizerSpec s;
    s.type = "TikTokenizer";
    s.model = vocab;
    s.tiktoken_pattern = cfg["pattern"];
    s.tiktoken_num_special_tokens = cfg["num_special_tokens"];
    if (!cfg["special_tokens"].is_null()) {
      s.tokenizer_special_tokens = cfg["special_tokens"].get<std::vector<std::string>>();
    }
    s.vocab_size = cfg["vocab_size"];
    const std::string name =
        cfg["pattern"].get<std::string>() + "/" + std::to_string(s.tiktoken_num_special_tokens);
    auto tok = LoadTokenizer(s);
    ASSERT_TRUE(tok.ok()) << name << ": " << tok.status().ToString();
    EXPECT_EQ((*tok)->vocab_size(), s.vocab_size);
    EXPECT_EQ((*tok)->bos_id(), 1);
    EXPECT_EQ((*tok)->eos_id(), 2);
    EXPECT_EQ((*tok)->unk_id(), 0);
    EXPECT_EQ((*tok)->pad_id(), 4);
    EXPECT_TRUE((*tok)->IsSpecial(s.tiktoken_num_special_tokens - 1));
    EXPECT_FALSE((*tok)->IsSpecial(s.tiktoken_num_special_tokens));
    for (const auto& c : cfg["cases"]) {
      const std::string text = c["text"];
      auto ids = (*tok)->Encode(text);
      ASSERT_TRUE(ids.ok()) << ids.status().ToString();
      EXPECT_EQ(*ids, c["ids"].get<std::vector<int64_t>>()) << name << " " << json(text).dump();
      auto back = (*tok)->Decode(*ids);
      ASSERT_TRUE(back.ok()) << back.status().ToString();
      EXPECT_EQ(*back, c["decoded"].get<std::string>()) << name << " " << json(text).dump();
    }
  }
}

TEST(TiktokenTokenizer, DecodeReplacesInvalidUtf8) {
  TokenizerSpec s;
  s.type = "TikTokenizer";
  s.model = TestDir() + "/text/data/tiktoken_vocab.json";
  s.tiktoken_num_special_tokens = 10;
  s.vocab_size = 10 + 300;
  auto tok = LoadTokenizer(s);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  // Bytes 0xE2 0x82 (a cut-off 3-byte sequence), then 'A': one U+FFFD (Python's maximal
  // subpart), then "A"; id 2 (</s>) is dropped.
  auto text = (*tok)->Decode(std::vector<int64_t>{10 + 0xE2, 10 + 0x82, 2, 10 + 'A'});
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text,
            "\xEF\xBF\xBD"
            "A");
  EXPECT_FALSE((*tok)->Decode(std::vector<int64_t>{310}).ok());
}

TEST(TiktokenTokenizer, RefusesWhatMegatronRefuses) {
  TokenizerSpec s;
  s.type = "TikTokenizer";
  s.model = TestDir() + "/text/data/tiktoken_vocab.json";
  // Megatron's default vocab_size (131072) needs 130072 ranks; the file has fewer.
  auto tok = LoadTokenizer(s);
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.status().message().find("--vocab-size"), std::string::npos)
      << tok.status().ToString();

  s.vocab_size = 1500;
  s.tokenizer_special_tokens = std::vector<std::string>{"<unk>", "<s>", "</s>"};
  tok = LoadTokenizer(s);
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.status().message().find("<mask>"), std::string::npos) << tok.status().ToString();

  s.tokenizer_special_tokens =
      std::vector<std::string>{"<unk>", "<s>", "</s>", "<mask>", "<pad>", "<cls>", "<sep>", "<s>x"};
  tok = LoadTokenizer(s);
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.status().message().find("prefix"), std::string::npos) << tok.status().ToString();

  s.tokenizer_special_tokens.reset();
  s.tiktoken_num_special_tokens = 2000;
  tok = LoadTokenizer(s);
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.status().message().find("--tiktoken-num-special-tokens"), std::string::npos);
}

TEST(NullTokenizer, IsPythonIntOfEachSpaceSeparatedPart) {
  TokenizerSpec s;
  s.type = "NullTokenizer";
  s.vocab_size = 5000;
  auto tok = LoadTokenizer(s);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->eos_id(), 4999);
  EXPECT_EQ((*tok)->vocab_size(), 5000);
  // Python: [int(x) for x in "7 1_000 \t12\n +3 ٣٤".split(' ')] == [7, 1000, 12, 3, 34]
  auto ids = (*tok)->Encode("7 1_000 \t12\n +3 \xd9\xa3\xd9\xa4");
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  EXPECT_EQ(*ids, (std::vector<int64_t>{7, 1000, 12, 3, 34}));
  // int('') (two spaces, or an empty text), int('1__0'), int('0x1') raise in Python.
  EXPECT_FALSE((*tok)->Encode("1  2").ok());
  EXPECT_FALSE((*tok)->Encode("").ok());
  EXPECT_FALSE((*tok)->Encode("1__0").ok());
  EXPECT_FALSE((*tok)->Encode("0x1").ok());
  EXPECT_FALSE((*tok)->Encode("5000").ok());  // beyond the vocabulary
  auto text = (*tok)->Decode(std::vector<int64_t>{3, 1, 4});
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "3 1 4");
}

void ExpectRefused(const TokenizerSpec& s, std::string_view needle) {
  const Status st = CheckTokenizerSpec(s);
  ASSERT_FALSE(st.ok()) << needle;
  EXPECT_NE(st.message().find(needle), std::string::npos) << st.ToString();
  EXPECT_FALSE(LoadTokenizer(s).ok());
}

TEST(TokenizerSpec, FlagErrorsNameTheFlag) {
  TokenizerSpec s;
  s.type = "WordPieceMagic";
  ExpectRefused(s, "--tokenizer-type 'WordPieceMagic'");
  s.type = "BertWordPieceLowerCase";
  ExpectRefused(s, "gridfeed does not support");
  s.type = "MultimodalTokenizer";
  ExpectRefused(s, "MultimodalTokenizer");

  s = {};
  s.type = "GPT2BPETokenizer";
  s.merge_file = "m.txt";
  ExpectRefused(s, "needs --vocab-file");
  s.vocab_file = "v.json";
  s.merge_file.clear();
  ExpectRefused(s, "needs --merge-file");

  s = {};
  s.type = "NullTokenizer";
  ExpectRefused(s, "needs --vocab-size");

  s = {};
  s.type = "TikTokenizer";
  ExpectRefused(s, "needs --tokenizer-model");
  s.model = "x.json";
  s.tiktoken_pattern = "v3";
  ExpectRefused(s, "--tiktoken-pattern 'v3'");

  s = {};
  s.type = "SentencePieceTokenizer";
  s.model = "x.model";
  s.vocab_file = "v.json";
  ExpectRefused(s, "--vocab-file is not read");
  s.vocab_file.clear();
  s.tiktoken_pattern = "v1";
  ExpectRefused(s, "--tiktoken-pattern is not read");
  s.tiktoken_pattern.clear();
  s.tiktoken_num_special_tokens = 5;
  ExpectRefused(s, "--tiktoken-num-special-tokens is not read");
  s.tiktoken_num_special_tokens = kDefaultTiktokenNumSpecialTokens;
  s.tokenizer_special_tokens = std::vector<std::string>{"<x>"};
  ExpectRefused(s, "--tokenizer-special-tokens");

  s = {};
  s.model = "folder";
  s.special_tokens = {"<a>"};
  s.tokenizer_special_tokens = std::vector<std::string>{"<a>"};
  ExpectRefused(s, "give one");

  s = {};
  ExpectRefused(s, "--tokenizer-model");
}

TEST(TokenizerSpec, DetectsAHuggingFaceFolderAndRefusesSentencePieceAsHf) {
  TokenizerSpec s;
  s.model = TestDir() + "/golden/hf-tokenizers/tokenizers/gpt2";
  auto tok = LoadTokenizer(s);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->kind(), "huggingface");
  s.type = "HuggingFaceTokenizer";
  tok = LoadTokenizer(s);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->kind(), "huggingface");
}

}  // namespace
}  // namespace gridfeed::text
