// The tokenizer flags of SFT and FIM (config/tokenizer_options.h) and SFT's pad ids with real
// Hugging Face tokenizers. Ids are the `tokenizers` library's token_to_id on the fixtures
// (tests/golden/hf-tokenizers; recorded with the oracle in /work/oracle), and what
// tests/golden/hf-tokenizers/sft/README.md states (GPT-2's built-in-format pad: 50256).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gridfeed/config/canonical.h"
#include "gridfeed/config/options.h"
#include "gridfeed/config/tokenizer_options.h"
#include "gridfeed/order/sft/conversation.h"

namespace gridfeed {
namespace {

const std::string kHf = GRIDFEED_HF_GOLDEN_DIR;

config::JobOptions SftJob() {
  config::JobOptions o;
  o.data.sft = true;
  o.data.data_path = {"x.jsonl"};
  o.data.seq_length = 64;
  return o;
}

std::string Refusal(const config::JobOptions& o) {
  Status s = config::Validate(o);
  EXPECT_FALSE(s.ok());
  return s.message();
}

TEST(SftTokenizerFlags, ValidateAsksForATokenizerByFlag) {
  config::JobOptions o = SftJob();
  EXPECT_NE(Refusal(o).find("--tokenizer-model"), std::string::npos) << Refusal(o);
  // GPT2BPETokenizer reads --vocab-file/--merge-file, not --tokenizer-model.
  o.data.tokenizer_type = "GPT2BPETokenizer";
  EXPECT_NE(Refusal(o).find("--vocab-file"), std::string::npos) << Refusal(o);
  o.data.vocab_file = "vocab.json";
  EXPECT_NE(Refusal(o).find("--merge-file"), std::string::npos) << Refusal(o);
  o.data.merge_file = "merges.txt";
  EXPECT_TRUE(config::Validate(o).ok()) << config::Validate(o).message();
  // NullTokenizer needs --vocab-size (0 is "not given", as in Megatron).
  o = SftJob();
  o.data.tokenizer_type = "NullTokenizer";
  EXPECT_NE(Refusal(o).find("--vocab-size"), std::string::npos) << Refusal(o);
  o.data.vocab_size = 100;
  EXPECT_TRUE(config::Validate(o).ok()) << config::Validate(o).message();
  // A flag the type does not read, and a type gridfeed does not support, by name.
  o.data.tiktoken_pattern = "v1";
  EXPECT_NE(Refusal(o).find("--tiktoken-pattern"), std::string::npos) << Refusal(o);
  o = SftJob();
  o.data.tokenizer_type = "BertWordPieceCase";
  o.data.tokenizer_model = "x";
  EXPECT_NE(Refusal(o).find("BertWordPieceCase"), std::string::npos) << Refusal(o);
  // FIM the same way.
  o = config::JobOptions();
  o.data.fim_data = true;
  o.data.data_path = {"x"};
  o.data.seq_length = 64;
  EXPECT_NE(Refusal(o).find("--fim-data needs a tokenizer"), std::string::npos) << Refusal(o);
}

TEST(SftTokenizerFlags, DefaultsLeaveTheCanonicalTextAndSetFlagsEnterIt) {
  config::JobOptions o = SftJob();
  o.data.tokenizer_model = "tok";
  const std::string before = config::CanonicalText(o.data);
  for (const char* flag : {"tokenizer-type", "vocab-file", "merge-file", "tiktoken-pattern",
                           "tiktoken-num-special-tokens", "tokenizer-special-tokens"}) {
    EXPECT_EQ(before.find(flag), std::string::npos) << flag << " in " << before;
  }
  o.data.tokenizer_type = "TikTokenizer";
  o.data.tiktoken_pattern = "v1";
  o.data.tiktoken_num_special_tokens = 7;
  o.data.tokenizer_special_tokens = {"<a>", "<b>"};
  const std::string after = config::CanonicalText(o.data);
  EXPECT_NE(after, before);
  auto back = config::FromCanonical(after);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->tokenizer_type, "TikTokenizer");
  EXPECT_EQ(back->tiktoken_pattern, "v1");
  EXPECT_EQ(back->tiktoken_num_special_tokens, 7);
  EXPECT_EQ(back->tokenizer_special_tokens, (std::vector<std::string>{"<a>", "<b>"}));
  const text::TokenizerSpec spec = config::TokenizerSpecOf(*back);
  EXPECT_EQ(spec.type, "TikTokenizer");
  EXPECT_EQ(spec.model, "tok");
  ASSERT_TRUE(spec.tokenizer_special_tokens.has_value());
  EXPECT_EQ(spec.tokenizer_special_tokens->size(), 2u);
}

int64_t PadOf(const std::string& folder, order::sft::PromptFormat format) {
  config::DataOptions d;
  d.tokenizer_model = folder;
  auto tok = config::LoadDataTokenizer(d);
  EXPECT_TRUE(tok.ok()) << tok.status().message();
  if (!tok.ok()) return -2;
  auto f = order::sft::ChatFormatter::Make(format, *tok->tokenizer);
  EXPECT_TRUE(f.ok()) << f.status().message();
  return f.ok() ? (*f)->pad_id() : -2;
}

TEST(SftTokenizerFlags, PadIdsWithHuggingFaceTokenizers) {
  using order::sft::PromptFormat;
  const std::string gpt2 = kHf + "/sft/tokenizers/gpt2", phi3 = kHf + "/sft/tokenizers/phi3";
  // GPT-2 has neither <unk> nor <SPECIAL_233>: unk_token <|endoftext|> = 50256; no pad: eos.
  EXPECT_EQ(PadOf(gpt2, PromptFormat::kNemotronHAligned), 50256);
  EXPECT_EQ(PadOf(gpt2, PromptFormat::kIdentity), 50256);
  EXPECT_EQ(PadOf(gpt2, PromptFormat::kDefault), 50256);
  // phi-3: <unk> is 0, <SPECIAL_233> is not a token (unk, 0); pad_token <|endoftext|> 32000.
  EXPECT_EQ(PadOf(phi3, PromptFormat::kIdentity), 0);
  EXPECT_EQ(PadOf(phi3, PromptFormat::kNemotronHAligned), 0);
  EXPECT_EQ(PadOf(phi3, PromptFormat::kDefault), 32000);
}

TEST(SftTokenizerFlags, TypedLoadAndDigest) {
  config::DataOptions d;
  d.tokenizer_model = kHf + "/sft/tokenizers/gpt2";
  auto detected = config::LoadDataTokenizer(d);
  ASSERT_TRUE(detected.ok()) << detected.status().message();
  d.tokenizer_type = "HuggingFaceTokenizer";
  auto typed = config::LoadDataTokenizer(d);
  ASSERT_TRUE(typed.ok()) << typed.status().message();
  EXPECT_EQ(typed->tokenizer->kind(), "huggingface");
  EXPECT_EQ(typed->xxh3, detected->xxh3);
  EXPECT_GT(typed->bytes, 0);
  // Another tokenizer, another digest; a missing folder names the flag.
  d.tokenizer_model = kHf + "/sft/tokenizers/phi3";
  auto other = config::LoadDataTokenizer(d);
  ASSERT_TRUE(other.ok()) << other.status().message();
  EXPECT_NE(other->xxh3, typed->xxh3);
  d.tokenizer_model = kHf + "/no-such-folder";
  auto missing = config::LoadDataTokenizer(d);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("--tokenizer-model"), std::string::npos)
      << missing.status().message();
}

TEST(SftTokenizerFlags, BertWithoutEosTakesSepAsEos) {
  // Megatron's HuggingFaceTokenizer: no eos_token but a sep_token -> eos = [SEP] (102), and
  // no bos_token but a cls_token -> bos = [CLS] (101): FIM's and prep's EOD. The fixture's
  // tokenizer.json with the tokenizer_config.json transformers 4.x saves for BERT.
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("gf_sft_tokenizer_bert." + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(kHf + "/extra/bert-base-uncased/tokenizer.json", dir / "tokenizer.json",
                fs::copy_options::overwrite_existing);
  std::ofstream(dir / "tokenizer_config.json")
      << R"({"do_lower_case": true, "tokenizer_class": "BertTokenizer", "unk_token": "[UNK]",
             "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
             "mask_token": "[MASK]"})";
  config::DataOptions d;
  d.tokenizer_model = dir.string();
  auto tok = config::LoadDataTokenizer(d);
  fs::remove_all(dir);
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  EXPECT_EQ(tok->tokenizer->eos_id(), std::optional<int64_t>(102));
  EXPECT_EQ(tok->tokenizer->bos_id(), std::optional<int64_t>(101));
  EXPECT_EQ(tok->tokenizer->pad_id(), std::optional<int64_t>(0));
}

}  // namespace
}  // namespace gridfeed
