// Megatron's GPT2BPETokenizer (tokenizer_spec.h): the Hugging Face pipeline's ByteLevel
// pre-tokenizer, BPE model and ByteLevel decoder, assembled from vocab.json and merges.txt the
// way transformers' GPT2TokenizerFast holds them (the `gpt2` tokenizer.json), with
// "<|endoftext|>" as its one added special token.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "gridfeed/text/bounded_file.h"
#include "gridfeed/text/hf/added_vocabulary.h"
#include "gridfeed/text/hf/bpe_model.h"
#include "gridfeed/text/hf/components.h"
#include "gridfeed/text/hf/hf_tokenizer.h"
#include "gridfeed/text/hf/pre_tokenizers.h"
#include "gridfeed/text/hf/utf8.h"
#include "gridfeed/text/tokenizer_spec.h"

namespace gridfeed::text {
namespace {

using nlohmann::json;

// GPT-2's vocab.json is 1 MB and merges.txt 0.5 MB; refuse files far beyond any real one.
constexpr uint64_t kMaxFileBytes = 256ull << 20;
constexpr std::string_view kEndOfText = "<|endoftext|>";

Result<std::string> ReadBounded(const std::string& path, const char* flag) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return NotFound(std::string(flag) + " '" + path + "': no such file");
  }
  const std::string name = std::string(flag) + " '" + path + "': ";
  return ReadFileBounded(path, kMaxFileBytes, name, [&](uint64_t size) {
    return name + std::to_string(size) + " bytes, more than gridfeed reads (" +
           std::to_string(kMaxFileBytes) + ")";
  });
}

// vocab.json: {"token": id, ...}.
Result<hf::StringIdMap> ReadVocab(const std::string& path) {
  GRIDFEED_ASSIGN_OR_RETURN(std::string text, ReadBounded(path, "--vocab-file"));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("--vocab-file '" + path + "': not valid JSON");
  if (!j.is_object()) {
    return InvalidArgument("--vocab-file '" + path + "': not a JSON object of token -> id");
  }
  hf::StringIdMap vocab;
  vocab.reserve(j.size());
  for (auto it = j.begin(); it != j.end(); ++it) {
    const json& v = it.value();
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > INT32_MAX) ||
        v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX) {
      return InvalidArgument("--vocab-file '" + path + "': token '" + it.key() + "' has id " +
                             v.dump() + " (ids are integers in [0, 2^31))");
    }
    vocab.emplace(it.key(), static_cast<int32_t>(v.get<int64_t>()));
  }
  return vocab;
}

// merges.txt: an optional "#version" first line, then one "LEFT RIGHT" per line, in rank order
// (the `tokenizers` library's BPE::read_file).
Result<std::vector<std::pair<std::string, std::string>>> ReadMerges(const std::string& path) {
  GRIDFEED_ASSIGN_OR_RETURN(std::string text, ReadBounded(path, "--merge-file"));
  std::vector<std::pair<std::string, std::string>> merges;
  size_t pos = 0;
  int64_t line_no = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (line_no == 1 && line.starts_with("#version")) continue;
    const size_t sp = line.find(' ');
    if (sp == std::string_view::npos || sp == 0 || sp + 1 == line.size() ||
        line.find(' ', sp + 1) != std::string_view::npos) {
      return InvalidArgument("--merge-file '" + path + "': line " + std::to_string(line_no) +
                             " is not two tokens separated by one space: '" + std::string(line) +
                             "'");
    }
    merges.emplace_back(std::string(line.substr(0, sp)), std::string(line.substr(sp + 1)));
  }
  return merges;
}

class Gpt2BpeTokenizer final : public TextTokenizer {
 public:
  std::string_view kind() const override { return "gpt2-bpe"; }

  Result<std::vector<int64_t>> Encode(std::string_view text) const override {
    GRIDFEED_RETURN_IF_ERROR(hf::CheckUtf8(text));
    std::vector<int32_t> ids;
    GRIDFEED_RETURN_IF_ERROR(hf::EncodeWithPipeline(text, added_, /*normalizer=*/nullptr,
                                                    pre_tokenizer_.get(), *model_, &ids));
    // The ByteLevel post-processor adds no token.
    return std::vector<int64_t>(ids.begin(), ids.end());
  }

  // Megatron's ids_to_text(remove_special_tokens=True) on the Hugging Face tokenizer: token
  // strings, all_special_tokens dropped, the ByteLevel decoder (invalid UTF-8 -> U+FFFD).
  Result<std::string> Decode(std::span<const int64_t> ids) const override {
    GRIDFEED_ASSIGN_OR_RETURN(std::vector<std::string> tokens,
                              hf::IdsToTokens(ids, added_, *model_, &special_strings_, path_));
    return hf::DecodeTokens(decoder_.get(), std::move(tokens));
  }

  std::optional<int64_t> TokenId(std::string_view token) const override {
    if (auto id = added_.TokenToId(token)) return *id;
    if (auto id = model_->TokenToId(token)) return *id;
    return std::nullopt;
  }

  Status Load(const std::string& vocab_file, const std::string& merge_file,
              const std::vector<std::string>& special_tokens) {
    path_ = vocab_file;
    GRIDFEED_ASSIGN_OR_RETURN(hf::StringIdMap vocab, ReadVocab(vocab_file));
    GRIDFEED_ASSIGN_OR_RETURN(auto merges, ReadMerges(merge_file));
    if (!vocab.contains(kEndOfText)) {
      // transformers would give it the next id, but Megatron's GPT2BPETokenizer loads the `gpt2`
      // tokenizer, whose vocabulary has it at 50256: a vocabulary without it is not GPT-2's.
      return InvalidArgument("--vocab-file '" + vocab_file + "' has no \"<|endoftext|>\" token " +
                             "(GPT2BPETokenizer's bos, eos and unk)");
    }
    const hf::JsonWhere where{vocab_file + " + " + merge_file, ""};
    GRIDFEED_ASSIGN_OR_RETURN(auto model,
                              hf::BpeModel::Create(std::move(vocab), merges, {}, where));
    model_ = std::move(model);
    const json pre = {{"type", "ByteLevel"},
                      {"add_prefix_space", false},
                      {"trim_offsets", true},
                      {"use_regex", true}};
    GRIDFEED_ASSIGN_OR_RETURN(pre_tokenizer_, hf::MakeByteLevelPreTokenizer(pre, where));
    const json dec = {{"type", "ByteLevel"},
                      {"add_prefix_space", true},
                      {"trim_offsets", true},
                      {"use_regex", true}};
    GRIDFEED_ASSIGN_OR_RETURN(decoder_, hf::MakeDecoder(dec, where));

    // The tokenizer's own added token, then Megatron's add_special_tokens: eos as sep, bos as
    // cls (the same string, already there), and the additional special tokens (special,
    // normalized false, no strip; one the vocabulary lacks gets the next id).
    std::vector<hf::AddedToken> added{{std::string(kEndOfText), false, false, false,
                                       /*normalized=*/false, /*special=*/true}};
    for (const auto& s : special_tokens) {
      added.push_back({s, false, false, false, /*normalized=*/false, /*special=*/true});
    }
    GRIDFEED_RETURN_IF_ERROR(
        added_.Add(added, {}, *model_, nullptr, hf::JsonWhere{"--tokenizer-special-tokens", ""}));
    vocab_size_ = model_->vocab_size();
    for (const auto& [content, id] : added_.vocab()) {
      if (!model_->TokenToId(content)) ++vocab_size_;
    }
    const int64_t eot = *TokenId(kEndOfText);
    bos_ = eos_ = unk_ = eot;
    // all_special_tokens: bos, eos, unk, sep, cls (all "<|endoftext|>"), then the additional.
    std::set<std::string, std::less<>> seen;
    const auto push = [&](const std::string& s) {
      if (!seen.insert(s).second) return;
      special_strings_.insert(s);
      special_.push_back({s, *TokenId(s)});
    };
    push(std::string(kEndOfText));
    for (const auto& s : special_tokens) push(s);
    IndexSpecials();
    return Status::Ok();
  }

 private:
  std::unique_ptr<hf::Model> model_;
  std::unique_ptr<hf::PreTokenizer> pre_tokenizer_;
  std::unique_ptr<hf::Decoder> decoder_;
  hf::AddedVocabulary added_;
  std::set<std::string, std::less<>> special_strings_;
};

}  // namespace

Result<std::unique_ptr<TextTokenizer>> LoadGpt2BpeTokenizer(
    const std::string& vocab_file, const std::string& merge_file,
    const std::vector<std::string>& special_tokens) {
  auto t = std::make_unique<Gpt2BpeTokenizer>();
  GRIDFEED_RETURN_IF_ERROR(t->Load(vocab_file, merge_file, special_tokens));
  return std::unique_ptr<TextTokenizer>(std::move(t));
}

}  // namespace gridfeed::text
