// Megatron's TikTokenizer (megatron/core/tokenizers/text/libraries/tiktoken_tokenizer.py at
// d98e8a6) over tiktoken's CoreBPE: the contract is in tokenizer_spec.h.
#include <algorithm>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_set>

#include "gridfeed/text/base64.h"
#include "gridfeed/text/bounded_file.h"
#include "gridfeed/text/hf/bpe_model.h"
#include "gridfeed/text/hf/regex.h"
#include "gridfeed/text/hf/utf8.h"
#include "gridfeed/text/tokenizer_spec.h"

namespace gridfeed::text {
namespace {

using nlohmann::json;

// Megatron's _PATTERN_TIKTOKEN_V1 / _V2, verbatim.
constexpr std::string_view kPatternV1 =
    R"([^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";
constexpr std::string_view kPatternV2 =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kRequiredSpecials[] = {"<unk>", "<s>",   "</s>", "<mask>",
                                             "<pad>", "<cls>", "<sep>"};
// A 130k-entry vocabulary file is about 10 MB; refuse what no real one approaches.
constexpr uint64_t kMaxVocabFileBytes = 512ull << 20;
constexpr int64_t kMaxVocabSize = int64_t{1} << 30;
constexpr uint32_t kNoRank = std::numeric_limits<uint32_t>::max();

class TiktokenTokenizer final : public TextTokenizer {
 public:
  explicit TiktokenTokenizer(hf::Regex pattern) : pattern_(std::move(pattern)) {}

  std::string_view kind() const override { return "tiktoken"; }

  // tiktoken's CoreBPE::encode(text, allowed_special = all): the text between special-token
  // matches is split by the pattern, each piece one token if it is a vocabulary entry, else
  // merged by byte_pair_merge.
  Result<std::vector<int64_t>> Encode(std::string_view text) const override {
    GRIDFEED_RETURN_IF_ERROR(hf::CheckUtf8(text));
    std::vector<int64_t> ids;
    std::vector<hf::Span> matches;
    size_t start = 0;
    while (true) {
      size_t special_at = text.size();
      int64_t special_id = -1;
      size_t special_len = 0;
      for (size_t p = start; p < text.size(); ++p) {
        if (!special_first_byte_[static_cast<unsigned char>(text[p])]) continue;
        for (size_t len : special_lengths_) {
          if (p + len > text.size()) continue;
          auto it = special_ids_.find(text.substr(p, len));
          if (it != special_ids_.end()) {
            special_at = p;
            special_id = it->second;
            special_len = len;
            break;
          }
        }
        if (special_id >= 0) break;
      }
      const std::string_view segment = text.substr(start, special_at - start);
      matches.clear();
      GRIDFEED_RETURN_IF_ERROR(pattern_.FindAll(segment, &matches));
      for (const hf::Span& m : matches) {
        EncodePiece(segment.substr(m.begin, m.end - m.begin), &ids);
      }
      if (special_id < 0) break;
      ids.push_back(special_id);
      start = special_at + special_len;
    }
    return ids;
  }

  // ids_to_text(remove_special_tokens=True): ids below num_special_tokens dropped, the bytes of
  // the rest joined and decoded with errors="replace".
  Result<std::string> Decode(std::span<const int64_t> ids) const override {
    std::string bytes;
    for (size_t i = 0; i < ids.size(); ++i) {
      const int64_t id = ids[i];
      if (id >= 0 && id < num_special_) continue;
      if (id < 0 || id >= vocab_size_) {
        return InvalidArgument("token id " + std::to_string(id) + " at position " +
                               std::to_string(i) + " is not a token of " + path_);
      }
      bytes += *by_id_[static_cast<size_t>(id - num_special_)];
    }
    return hf::Utf8Lossy(bytes);
  }

  // Special tokens only: Megatron's token_to_id adds num_special_tokens to an id that already
  // includes it, so no ordinary token has a usable id there; gridfeed answers none.
  std::optional<int64_t> TokenId(std::string_view token) const override {
    auto it = special_ids_.find(token);
    if (it == special_ids_.end()) return std::nullopt;
    return it->second;
  }

  Status Load(const std::string& path, int64_t num_special,
              const std::optional<std::vector<std::string>>& given_specials, int64_t vocab_size);

 private:
  // tiktoken's byte_pair_encode: the piece's bytes merged lowest rank first, leftmost on ties,
  // where a pair's rank is that of the concatenated byte string.
  void EncodePiece(std::string_view piece, std::vector<int64_t>* ids) const {
    if (auto it = ranks_.find(piece); it != ranks_.end()) {
      ids->push_back(it->second);
      return;
    }
    // parts[i] = (start offset, rank of merging parts i and i+1).
    std::vector<std::pair<size_t, uint32_t>> parts;
    parts.reserve(piece.size() + 1);
    const auto rank_of = [&](size_t b, size_t e) -> uint32_t {
      auto it = ranks_.find(piece.substr(b, e - b));
      return it == ranks_.end() ? kNoRank : static_cast<uint32_t>(it->second);
    };
    std::pair<uint32_t, size_t> min_rank{kNoRank, SIZE_MAX};
    for (size_t i = 0; i + 1 < piece.size(); ++i) {
      const uint32_t r = rank_of(i, i + 2);
      if (r < min_rank.first) min_rank = {r, i};
      parts.emplace_back(i, r);
    }
    parts.emplace_back(piece.size() - 1, kNoRank);
    parts.emplace_back(piece.size(), kNoRank);
    const auto get_rank = [&](size_t i) -> uint32_t {
      return i + 3 < parts.size() ? rank_of(parts[i].first, parts[i + 3].first) : kNoRank;
    };
    while (min_rank.first != kNoRank) {
      const size_t i = min_rank.second;
      if (i > 0) parts[i - 1].second = get_rank(i - 1);
      parts[i].second = get_rank(i);
      parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      min_rank = {kNoRank, SIZE_MAX};
      for (size_t k = 0; k + 1 < parts.size(); ++k) {
        if (parts[k].second < min_rank.first) min_rank = {parts[k].second, k};
      }
    }
    for (size_t k = 0; k + 1 < parts.size(); ++k) {
      // Every part is a vocabulary entry: single bytes are (checked at load), merged parts were
      // found there.
      ids->push_back(
          ranks_.find(piece.substr(parts[k].first, parts[k + 1].first - parts[k].first))->second);
    }
  }

  hf::Regex pattern_;
  int64_t num_special_ = 0;
  hf::StringIdMap ranks_;                  // token bytes -> id (rank + num_special)
  std::vector<const std::string*> by_id_;  // id - num_special -> bytes
  hf::StringIdMap special_ids_;            // special token -> id
  std::vector<size_t> special_lengths_;    // distinct lengths, longest first
  bool special_first_byte_[256] = {};
};

Status TiktokenTokenizer::Load(const std::string& path, int64_t num_special,
                               const std::optional<std::vector<std::string>>& given_specials,
                               int64_t vocab_size) {
  path_ = path;
  std::vector<std::string> specials =
      given_specials
          ? *given_specials
          : std::vector<std::string>(std::begin(kRequiredSpecials), std::end(kRequiredSpecials));
  {
    std::set<std::string> uniq(specials.begin(), specials.end());
    if (uniq.size() != specials.size()) {
      return InvalidArgument("--tokenizer-special-tokens: special tokens must be unique");
    }
    for (const char* r : kRequiredSpecials) {
      if (!uniq.contains(r)) {
        return InvalidArgument(
            "--tokenizer-special-tokens: TikTokenizer's list must include <unk> <s> </s> <mask> "
            "<pad> <cls> <sep>; '" +
            std::string(r) + "' is missing");
      }
    }
  }
  if (vocab_size <= 0 || vocab_size > kMaxVocabSize) {
    return InvalidArgument("--vocab-size " + std::to_string(vocab_size) +
                           ": TikTokenizer needs a size in (0, 2^30]");
  }
  if (!(static_cast<int64_t>(specials.size()) <= num_special && num_special < vocab_size)) {
    return InvalidArgument("--tiktoken-num-special-tokens " + std::to_string(num_special) +
                           ": must be at least the " + std::to_string(specials.size()) +
                           " special tokens and below --vocab-size " + std::to_string(vocab_size));
  }
  for (int64_t i = static_cast<int64_t>(specials.size()); i < num_special; ++i) {
    specials.push_back("<SPECIAL_" + std::to_string(i) + ">");
  }
  for (size_t i = 0; i < specials.size(); ++i) {
    if (specials[i].empty()) {
      return InvalidArgument("--tokenizer-special-tokens: an empty special token");
    }
    if (!special_ids_.emplace(specials[i], static_cast<int32_t>(i)).second) {
      return InvalidArgument("--tokenizer-special-tokens: '" + specials[i] +
                             "' is also one of the <SPECIAL_i> fillers");
    }
  }
  // tiktoken tries its special tokens as one unordered alternation: where one is a prefix of
  // another, which one matches is not defined, so such a list is refused.
  {
    std::vector<std::string> sorted = specials;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i + 1 < sorted.size(); ++i) {
      if (sorted[i + 1].starts_with(sorted[i])) {
        return InvalidArgument("--tokenizer-special-tokens: '" + sorted[i] + "' is a prefix of '" +
                               sorted[i + 1] + "'; tiktoken's choice between them is undefined");
      }
    }
  }
  std::set<size_t, std::greater<>> lengths;
  for (const auto& s : specials) {
    lengths.insert(s.size());
    special_first_byte_[static_cast<unsigned char>(s[0])] = true;
  }
  special_lengths_.assign(lengths.begin(), lengths.end());

  // reload_mergeable_ranks.
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return NotFound("--tokenizer-model '" + path + "': no such file (TikTokenizer's vocabulary)");
  }
  if (!path.ends_with(".json")) {
    return InvalidArgument("--tokenizer-model '" + path +
                           "': TikTokenizer reads a .json vocabulary (Megatron asserts the name)");
  }
  const std::string name = "--tokenizer-model '" + path + "': ";
  GRIDFEED_ASSIGN_OR_RETURN(
      std::string text, ReadFileBounded(path, kMaxVocabFileBytes, name, [&](uint64_t size) {
        return name + std::to_string(size) + " bytes, more than gridfeed reads (" +
               std::to_string(kMaxVocabFileBytes) + ")";
      }));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_array()) {
    return InvalidArgument(path + ": not a JSON list of {rank, token_bytes, token_str}");
  }
  const int64_t inner = vocab_size - num_special;
  if (static_cast<int64_t>(j.size()) < inner) {
    return InvalidArgument(path + ": " + std::to_string(j.size()) + " ranks, fewer than the " +
                           std::to_string(inner) + " that --vocab-size " +
                           std::to_string(vocab_size) + " less " + std::to_string(num_special) +
                           " special tokens needs");
  }
  if (inner < 256) {
    return InvalidArgument("--vocab-size " + std::to_string(vocab_size) +
                           " leaves fewer than the 256 byte tokens after " +
                           std::to_string(num_special) + " special tokens");
  }
  ranks_.reserve(static_cast<size_t>(inner));
  by_id_.reserve(static_cast<size_t>(inner));
  for (int64_t i = 0; i < inner; ++i) {
    const json& e = j[static_cast<size_t>(i)];
    const std::string where = path + ": [" + std::to_string(i) + "]";
    if (!e.is_object() || e.size() != 3 || !e.contains("rank") || !e.contains("token_bytes") ||
        !e.contains("token_str")) {
      return InvalidArgument(where + ": not an object of exactly rank, token_bytes, token_str");
    }
    const json& rank = e["rank"];
    if (!rank.is_number_integer() || rank.get<int64_t>() != i) {
      return InvalidArgument(where + ".rank is " + rank.dump() + ", not " + std::to_string(i));
    }
    if (!e["token_bytes"].is_string()) {
      return InvalidArgument(where + ".token_bytes is not a string");
    }
    // Python's b64decode, as Megatron reads them: the last group's leftover bits are ignored.
    auto bytes = DecodeBase64(e["token_bytes"].get_ref<const std::string&>(),
                              /*reject_nonzero_trailing_bits=*/false);
    if (!bytes) return InvalidArgument(where + ".token_bytes is not base64");
    if (bytes->empty()) return InvalidArgument(where + ".token_bytes is empty");
    if (i < 256 && !(bytes->size() == 1 && static_cast<unsigned char>((*bytes)[0]) == i)) {
      return InvalidArgument(where + ": rank " + std::to_string(i) + " must be the byte " +
                             std::to_string(i));
    }
    auto [it, fresh] = ranks_.emplace(std::move(*bytes), static_cast<int32_t>(i + num_special));
    if (!fresh) {
      return InvalidArgument(where + ".token_bytes repeats rank " +
                             std::to_string(it->second - num_special) + "'s bytes");
    }
    by_id_.push_back(&it->first);
  }
  num_special_ = num_special;
  vocab_size_ = vocab_size;
  auto id_of = [&](const char* s) { return int64_t{special_ids_.find(s)->second}; };
  bos_ = id_of("<s>");
  eos_ = id_of("</s>");
  pad_ = id_of("<pad>");
  unk_ = id_of("<unk>");
  for (size_t i = 0; i < specials.size(); ++i) {
    special_.push_back({specials[i], static_cast<int64_t>(i)});
  }
  IndexSpecials();
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<TextTokenizer>> LoadTiktokenTokenizer(
    const std::string& vocab_path, std::string_view pattern_name, int64_t num_special_tokens,
    const std::optional<std::vector<std::string>>& special_tokens, int64_t vocab_size) {
  std::string_view pattern;
  if (pattern_name.empty() || pattern_name == "v2") {
    pattern = kPatternV2;
  } else if (pattern_name == "v1") {
    pattern = kPatternV1;
  } else {
    return InvalidArgument("--tiktoken-pattern '" + std::string(pattern_name) +
                           "': expected v1 or v2");
  }
  GRIDFEED_ASSIGN_OR_RETURN(hf::Regex re, hf::Regex::Compile(pattern));
  auto t = std::make_unique<TiktokenTokenizer>(std::move(re));
  GRIDFEED_RETURN_IF_ERROR(t->Load(vocab_path, num_special_tokens, special_tokens, vocab_size));
  return std::unique_ptr<TextTokenizer>(std::move(t));
}

}  // namespace gridfeed::text
