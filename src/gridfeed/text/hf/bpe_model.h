// The `tokenizers` library's BPE model (models/bpe), built from tokenizer.json's "model" object
// by MakeBpeModel (models.h).
//
// Tokenize(piece) is the library's `BPE::tokenize`: with `ignore_merges` a piece that is itself
// a vocabulary entry is one token; otherwise the piece is cut into characters (the continuing
// prefix on all but the first, the end-of-word suffix on the last), each looked up in the
// vocabulary, else spelled as its <0xNN> byte tokens (`byte_fallback`), else `unk_token` (runs of
// unknown characters fused into one with `fuse_unk`); then merges are applied lowest rank first,
// leftmost on ties, exactly as the library's queue does. Pieces shorter than 256 bytes are cached
// per thread (as the library does), up to 10,000 per model and thread; longer ones are cut where
// no merge can join the two sides (see TokenizeSegments) and the segments cached alike.
//
// Loading refuses what the library refuses (a merge naming a token outside the vocabulary, a
// merged token that is not in it, a missing unk_token when one is needed at tokenize time) and
// what gridfeed does not implement (a dropout other than null or 0, since the library then
// merges at random), plus duplicate ids, which the library would keep in an arbitrary order.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gridfeed/text/hf/components.h"
#include "gridfeed/text/hf/merge_map.h"

namespace gridfeed::text::hf {

// Hash for string-keyed maps looked up by string_view without allocating.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept;
};
using StringIdMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

struct BpeOptions {
  std::optional<std::string> unk_token;
  std::string continuing_subword_prefix;  // "" = none
  std::string end_of_word_suffix;         // "" = none
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
};

class BpeModel final : public Model {
 public:
  // `merges` in rank order. Errors name `where`.
  static Result<std::unique_ptr<BpeModel>> Create(
      StringIdMap vocab, const std::vector<std::pair<std::string, std::string>>& merges,
      BpeOptions options, const JsonWhere& where);
  ~BpeModel() override;

  Status Tokenize(std::string_view piece, std::vector<int32_t>* ids) const override;
  std::optional<int32_t> TokenToId(std::string_view token) const override;
  std::optional<std::string_view> IdToToken(int32_t id) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(vocab_.size()); }

 private:
  using MergeValue = MergeMap::Value;
  BpeModel() = default;
  Status MergeWord(std::string_view piece, std::vector<int32_t>* ids) const;
  Status TokenizeCached(std::string_view piece, std::vector<int32_t>* ids) const;
  Status TokenizeSegments(std::string_view piece, std::vector<int32_t>* ids) const;
  const MergeValue* FindMerge(int32_t a, int32_t b) const;
  // The id of the one-character token `ch` (a whole UTF-8 character), else vocab_'s answer.
  std::optional<int32_t> CharId(std::string_view ch) const;

  StringIdMap vocab_;
  std::vector<const std::string*> by_id_;  // null where no token has that id
  MergeMap merges_;                        // (left id << 32 | right id) -> rank, merged id
  MergeMap char_ids_;  // code point -> id of the token that is that one character
  MergeMap bigrams_;   // (c1 << 21 | c2) for each two characters adjacent in some token
  bool segmentable_ = false;
  BpeOptions options_;
  std::optional<int32_t> unk_id_;
  std::optional<int32_t> byte_ids_[256];  // <0xNN> tokens, for byte_fallback
  uint64_t cache_key_ = 0;                // this instance's thread-local cache
};

}  // namespace gridfeed::text::hf
