#include "gridfeed/text/tokenizer_spec.h"

#include <algorithm>
#include <array>
#include <span>

namespace gridfeed::text {
namespace {

constexpr std::array<std::string_view, 7> kSupported = {
    "HuggingFaceTokenizer",      "GPT2BPETokenizer", "TikTokenizer", "SentencePieceTokenizer",
    "GPTSentencePieceTokenizer", "Llama2Tokenizer",  "NullTokenizer"};
// Megatron's other tokenizer types (build_tokenizer.py's SUPPORTED_TOKENIZERS).
constexpr std::array<std::string_view, 5> kMegatronOnly = {
    "BertWordPieceLowerCase", "BertWordPieceCase", "MultimodalTokenizer", "NullMultimodalTokenizer",
    "SFTTokenizer"};

bool IsSentencePiece(std::string_view t) {
  return t == "SentencePieceTokenizer" || t == "GPTSentencePieceTokenizer" ||
         t == "Llama2Tokenizer";
}

std::string Joined(std::span<const std::string_view> names) {
  std::string s;
  for (auto n : names) {
    if (!s.empty()) s += ", ";
    s += n;
  }
  return s;
}

// The Megatron `special_tokens` list: --tokenizer-special-tokens or gridfeed's --special-tokens.
std::optional<std::vector<std::string>> SpecialList(const TokenizerSpec& s) {
  if (s.tokenizer_special_tokens) return s.tokenizer_special_tokens;
  if (!s.special_tokens.empty()) return s.special_tokens;
  return std::nullopt;
}

Status Unread(const TokenizerSpec& s, std::string_view flag) {
  return InvalidArgument(std::string(flag) + " is not read by --tokenizer-type " +
                         (s.type.empty() ? std::string("(detected)") : s.type));
}

}  // namespace

Status CheckTokenizerSpec(const TokenizerSpec& s) {
  const std::string& t = s.type;
  if (!t.empty() && std::find(kSupported.begin(), kSupported.end(), t) == kSupported.end()) {
    if (std::find(kMegatronOnly.begin(), kMegatronOnly.end(), t) != kMegatronOnly.end()) {
      return InvalidArgument("--tokenizer-type " + t +
                             " is one of Megatron's tokenizers that gridfeed does not support "
                             "(supported: " +
                             Joined(kSupported) + ")");
    }
    return InvalidArgument("--tokenizer-type '" + t + "' is not a Megatron tokenizer type " +
                           "gridfeed knows (supported: " + Joined(kSupported) + ")");
  }
  if (s.tokenizer_special_tokens && !s.special_tokens.empty()) {
    return InvalidArgument(
        "--tokenizer-special-tokens and --special-tokens name the same list; give one");
  }
  const bool gpt2 = t == "GPT2BPETokenizer", tik = t == "TikTokenizer", null = t == "NullTokenizer";
  if (!gpt2 && !s.vocab_file.empty()) return Unread(s, "--vocab-file");
  if (!gpt2 && !s.merge_file.empty()) return Unread(s, "--merge-file");
  if (!tik && !s.tiktoken_pattern.empty()) return Unread(s, "--tiktoken-pattern");
  if (!tik && s.tiktoken_num_special_tokens != kDefaultTiktokenNumSpecialTokens) {
    return Unread(s, "--tiktoken-num-special-tokens");
  }
  if (!s.tiktoken_pattern.empty() && s.tiktoken_pattern != "v1" && s.tiktoken_pattern != "v2") {
    return InvalidArgument("--tiktoken-pattern '" + s.tiktoken_pattern + "': expected v1 or v2");
  }
  if (s.vocab_size < 0) {
    return InvalidArgument("--vocab-size " + std::to_string(s.vocab_size) + " is negative");
  }
  if (gpt2) {
    if (s.vocab_file.empty()) {
      return InvalidArgument(
          "--tokenizer-type GPT2BPETokenizer needs --vocab-file (GPT-2's vocab.json; Megatron "
          "would download it, gridfeed does not)");
    }
    if (s.merge_file.empty()) {
      return InvalidArgument(
          "--tokenizer-type GPT2BPETokenizer needs --merge-file (GPT-2's merges.txt)");
    }
    if (!s.model.empty()) return Unread(s, "--tokenizer-model");
  } else if (null) {
    if (s.vocab_size <= 0) {
      return InvalidArgument("--tokenizer-type NullTokenizer needs --vocab-size N");
    }
    if (!s.model.empty()) return Unread(s, "--tokenizer-model");
  } else if (s.model.empty()) {
    return InvalidArgument(t.empty() ? std::string("give --tokenizer-model (or --tokenizer-type)")
                                     : "--tokenizer-type " + t + " needs --tokenizer-model");
  }
  if (IsSentencePiece(t) && SpecialList(s)) {
    return InvalidArgument("--tokenizer-special-tokens with --tokenizer-type " + t +
                           ": Megatron's SentencePiece wrapper refuses special tokens unless "
                           "its legacy mode is on, which gridfeed does not implement");
  }
  if (tik && s.tiktoken_num_special_tokens < 0) {
    return InvalidArgument("--tiktoken-num-special-tokens must be >= 0");
  }
  return Status::Ok();
}

Result<std::unique_ptr<TextTokenizer>> LoadTokenizer(const TokenizerSpec& s) {
  GRIDFEED_RETURN_IF_ERROR(CheckTokenizerSpec(s));
  const std::string& t = s.type;
  const auto specials = SpecialList(s);
  TextTokenizerOptions options;
  if (specials) options.special_tokens = *specials;
  if (t == "GPT2BPETokenizer")
    return LoadGpt2BpeTokenizer(s.vocab_file, s.merge_file, options.special_tokens);
  if (t == "NullTokenizer") return MakeNullTokenizer(s.vocab_size);
  if (t == "TikTokenizer") {
    // Megatron's TikTokenTokenizer default vocab_size, used when --vocab-size is not given.
    constexpr int64_t kDefaultTiktokenVocab = int64_t{1} << 17;
    return LoadTiktokenTokenizer(s.model, s.tiktoken_pattern, s.tiktoken_num_special_tokens,
                                 specials, s.vocab_size > 0 ? s.vocab_size : kDefaultTiktokenVocab);
  }
  if (IsSentencePiece(t)) return LoadSentencePieceTokenizer(s.model, options);
  GRIDFEED_ASSIGN_OR_RETURN(auto tok, LoadTextTokenizer(s.model, options));
  if (t == "HuggingFaceTokenizer" && tok->kind() == "sentencepiece") {
    return InvalidArgument("--tokenizer-type HuggingFaceTokenizer: '" + s.model +
                           "' is a SentencePiece model, not a Hugging Face folder (use "
                           "--tokenizer-type SentencePieceTokenizer)");
  }
  return tok;
}

}  // namespace gridfeed::text
