// Text tokenizers shared by `gridfeed prep`, the SFT and the FIM pipelines (docs/tokenizers.md).
//
// A TextTokenizer turns UTF-8 text into token ids and back, and names its special tokens. Four
// kinds exist:
//   * "sentencepiece"    a SentencePiece model file (what prep has always used);
//   * "gf-chat-bytes-v1" a gf_tokenizer.json: ids 256 + b are the raw bytes b, the ids below are
//                        named special tokens whose literal spelling in text encodes to their id
//                        (contract: tests/golden/megatron-sft/README.md, "Tokenizer");
//   * "gf-charvocab-v1"  a gf_tokenizer.json: a character vocabulary of one- and two-character
//                        tokens plus named special tokens (contract:
//                        tests/golden/megatron-fim/README.md, "Tokenizer");
//   * "huggingface"      a Hugging Face folder (tokenizer.json, tokenizer_config.json,
//                        special_tokens_map.json) with transformers 4.x and Megatron's
//                        HuggingFaceTokenizer semantics (hf/hf_tokenizer.h). Its Decode keeps
//                        the library's behaviour: bytes that are not UTF-8 become U+FFFD.
//
// Contract of every kind:
//   * Encode(text) is what calling the tokenizer does (Hugging Face `tokenizer(text).input_ids`,
//     Megatron's `text_to_ids`): it adds a BOS only where that tokenizer's call does
//     (gf-charvocab-v1 with `call_adds_bos`); it never adds EOS.
//   * Decode(ids) is Megatron's `ids_to_text(ids, remove_special_tokens=True)`: special ids are
//     dropped, the rest concatenated. No pipeline needs a decode that keeps them (FIM decodes with
//     them removed only; design doc part B), so none is offered.
//   * Text is UTF-8. Encode refuses invalid UTF-8 (overlong forms, surrogates, > U+10FFFF,
//     truncated sequences) with InvalidArgument naming the byte offset; Decode refuses ids outside
//     [0, vocab_size) and a byte-token result that is not valid UTF-8 (no U+FFFD repair).
//   * Loading validates every field of the file; errors name the file and the field. No size
//     read from a file decides an allocation before it is bounded.
//
// Thread safety: a loaded tokenizer is immutable; every method is const and safe to call from
// many threads at once (prep's workers share one).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gridfeed/core/status.h"

namespace gridfeed::text {

struct NamedToken {
  std::string name;
  int64_t id = 0;
  bool operator==(const NamedToken&) const = default;
};

struct TextTokenizerOptions {
  // Megatron's `--special-tokens`: names to count as special. The gf contracts and SentencePiece
  // give no ids to new names, so there each must already be a token of the vocabulary
  // (InvalidArgument otherwise); they join special_tokens() after the file's own, in the order
  // given. A Hugging Face tokenizer adds them as transformers' add_special_tokens does (a new
  // name gets the next id) and they replace its additional special tokens.
  std::vector<std::string> special_tokens;
};

class TextTokenizer {
 public:
  virtual ~TextTokenizer() = default;

  // "sentencepiece", "gf-chat-bytes-v1", "gf-charvocab-v1" or "huggingface".
  virtual std::string_view kind() const = 0;
  virtual Result<std::vector<int64_t>> Encode(std::string_view text) const = 0;
  virtual Result<std::string> Decode(std::span<const int64_t> ids) const = 0;
  // The id of the vocabulary entry spelled `token`: a named special token, a SentencePiece
  // piece, or a gf-charvocab-v1 plain token's characters. nullopt if there is none.
  virtual std::optional<int64_t> TokenId(std::string_view token) const = 0;

  int64_t vocab_size() const { return vocab_size_; }
  std::optional<int64_t> bos_id() const { return bos_; }
  std::optional<int64_t> eos_id() const { return eos_; }
  std::optional<int64_t> pad_id() const { return pad_; }
  std::optional<int64_t> unk_id() const { return unk_; }
  // Hugging Face's `all_special_tokens` order: bos, eos, unk, sep, pad, cls, mask, then the
  // additional ones (the file's, then TextTokenizerOptions::special_tokens), each once; for the
  // gf kinds, where every named token is special, any named token not listed yet follows in id
  // order.
  const std::vector<NamedToken>& special_tokens() const { return special_; }
  bool IsSpecial(int64_t id) const;
  // `path` for messages: the file this tokenizer was loaded from.
  const std::string& path() const { return path_; }
  // The file's `chat_template` (Jinja source, used by SFT's prompt format `default`), if any.
  const std::optional<std::string>& chat_template() const { return chat_template_; }

 protected:
  std::string path_;
  int64_t vocab_size_ = 0;
  std::optional<int64_t> bos_, eos_, pad_, unk_;
  std::vector<NamedToken> special_;
  std::optional<std::string> chat_template_;
  std::vector<int64_t> special_ids_sorted_;  // for IsSpecial
  void IndexSpecials();                      // fills special_ids_sorted_ from special_
};

// `path` is a gf_tokenizer.json file, a folder holding one (Megatron's `--tokenizer-model DIR`),
// a Hugging Face folder holding a tokenizer.json (when it holds no gf_tokenizer.json) or such a
// tokenizer.json file, or a SentencePiece model file. A file whose first non-blank byte is '{' is read as JSON, any
// other as a SentencePiece model. NotFound if nothing is there.
Result<std::unique_ptr<TextTokenizer>> LoadTextTokenizer(const std::string& path,
                                                         const TextTokenizerOptions& options = {});
Result<std::unique_ptr<TextTokenizer>> LoadSentencePieceTokenizer(
    const std::string& model_path, const TextTokenizerOptions& options = {});
// `json` is the text of a gf_tokenizer.json; `path` names it in messages.
Result<std::unique_ptr<TextTokenizer>> ParseGfTokenizerJson(
    std::string_view json, const std::string& path, const TextTokenizerOptions& options = {});

// UTF-8 helpers for text-level pipelines (FIM cuts text at code points).
// The code points of `text`; InvalidArgument naming the byte offset of the first invalid byte.
Result<std::vector<char32_t>> DecodeUtf8(std::string_view text);
// Appends the UTF-8 form of each code point (all must be valid scalar values).
void AppendUtf8(std::span<const char32_t> code_points, std::string* out);

}  // namespace gridfeed::text
