// Which tokenizer a program loads: Megatron's tokenizer flags (megatron/training/config
// TokenizerConfig and megatron/core/tokenizers/utils/build_tokenizer.py at the commit the golden
// sets name, d98e8a6), in one place for `gridfeed prep`, SFT, FIM and the Python module.
//
//   --tokenizer-type            HuggingFaceTokenizer | GPT2BPETokenizer | TikTokenizer |
//                               SentencePieceTokenizer | GPTSentencePieceTokenizer |
//                               Llama2Tokenizer | NullTokenizer; absent: detected from
//                               --tokenizer-model (LoadTextTokenizer: a folder with tokenizer.json
//                               -> Hugging Face, gf_tokenizer.json -> the gf kinds, any other file
//                               -> SentencePiece). Megatron's other names (BertWordPieceLowerCase,
//                               BertWordPieceCase, MultimodalTokenizer, NullMultimodalTokenizer,
//                               SFTTokenizer) are refused by name.
//   --tokenizer-model           the model (HF folder, SentencePiece file, TikToken vocabulary)
//   --vocab-file, --merge-file  GPT2BPETokenizer's vocab.json and merges.txt (both required:
//                               Megatron would download GPT-2's, gridfeed does not)
//   --tiktoken-pattern          v1 | v2 (default v2, Megatron's TikTokenTokenizer default)
//   --tiktoken-num-special-tokens (default 1000)
//   --tokenizer-special-tokens  Megatron's `special_tokens`: TikTokenizer's special-token list
//                               (default <unk> <s> </s> <mask> <pad> <cls> <sep>), the additional
//                               special tokens of HuggingFaceTokenizer / GPT2BPETokenizer; refused
//                               with the SentencePiece types (Megatron's wrapper refuses them
//                               unless its legacy mode is on). gridfeed's older --special-tokens
//                               fills the same list; giving both is refused.
//   --vocab-size                NullTokenizer: the vocabulary size (required; eod = size - 1);
//                               TikTokenizer: the vocabulary size, special tokens included
//                               (default 131072); 0 means not given, as in Megatron.
//
// A flag that the chosen type does not read (--vocab-file with TikTokenizer, --tiktoken-pattern
// with GPT2BPETokenizer, ...) is refused rather than ignored. Every error names the flag.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gridfeed/core/status.h"
#include "gridfeed/text/text_tokenizer.h"

namespace gridfeed::text {

inline constexpr int64_t kDefaultTiktokenNumSpecialTokens = 1000;

struct TokenizerSpec {
  std::string type;              // --tokenizer-type; empty = detect from `model`
  std::string model;             // --tokenizer-model
  std::string vocab_file;        // --vocab-file
  std::string merge_file;        // --merge-file
  std::string tiktoken_pattern;  // --tiktoken-pattern: "v1", "v2" or empty (= v2)
  int64_t tiktoken_num_special_tokens = kDefaultTiktokenNumSpecialTokens;
  // --tokenizer-special-tokens; nullopt = not given (TikTokenizer then uses Megatron's default).
  std::optional<std::vector<std::string>> tokenizer_special_tokens;
  // gridfeed's --special-tokens (the Hugging Face additional special tokens).
  std::vector<std::string> special_tokens;
  int64_t vocab_size = 0;  // --vocab-size; 0 = not given
};

// The flags alone (no file is read): a known type, the flags it needs, none it does not read.
Status CheckTokenizerSpec(const TokenizerSpec& spec);

// Checks `spec`, then loads the tokenizer it names.
Result<std::unique_ptr<TextTokenizer>> LoadTokenizer(const TokenizerSpec& spec);

// Megatron's TikTokenTokenizer (tiktoken_tokenizer.cc): `vocab_path` is its JSON list of
// {"rank", "token_bytes" (base64), "token_str"}; ids below num_special_tokens are the special
// tokens (the list given, then "<SPECIAL_i>" fillers), rank r has id r + num_special_tokens, the
// list cut to vocab_size - num_special_tokens entries. Encode matches every special token in the
// text (tiktoken's allowed_special="all"), splits the rest with the v1/v2 pattern and merges
// bytes as tiktoken's byte_pair_merge. Decode drops ids below num_special_tokens and decodes the
// bytes with U+FFFD for invalid UTF-8 (Python's errors="replace"). eos = eod = "</s>".
Result<std::unique_ptr<TextTokenizer>> LoadTiktokenTokenizer(
    const std::string& vocab_path, std::string_view pattern_name, int64_t num_special_tokens,
    const std::optional<std::vector<std::string>>& special_tokens, int64_t vocab_size);

// Megatron's GPT2BPETokenizer (gpt2_bpe_tokenizer.cc): at d98e8a6 it is transformers'
// AutoTokenizer for "gpt2" (GPT2TokenizerFast) behind Megatron's HuggingFaceTokenizer, built
// here from vocab.json and merges.txt: the ByteLevel pre-tokenizer (GPT-2 regex, no prefix
// space), byte-level BPE, the ByteLevel decoder; "<|endoftext|>" is bos, eos (= eod), unk, sep
// and cls, an added special token matched in the text; `special_tokens` are added as Megatron's
// additional special tokens. vocab_size() = len(tokenizer).
Result<std::unique_ptr<TextTokenizer>> LoadGpt2BpeTokenizer(
    const std::string& vocab_file, const std::string& merge_file,
    const std::vector<std::string>& special_tokens = {});

// Megatron's NullTokenizer (null_tokenizer.cc): Encode is Python's `[int(x) for x in
// text.split(' ')]`, each id checked against [0, vocab_size); eod = eos = vocab_size - 1;
// Decode joins the ids with single spaces.
Result<std::unique_ptr<TextTokenizer>> MakeNullTokenizer(int64_t vocab_size);

}  // namespace gridfeed::text
