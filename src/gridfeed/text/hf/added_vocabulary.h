// The `tokenizers` library's AddedVocabulary (tokenizer/added_vocabulary.rs): the tokens of
// tokenizer.json's "added_tokens" (and those transformers and Megatron add at load time), matched
// in the text before the model sees it.
//
// Encoding splits the raw text at the tokens with normalized=false, normalizes each remaining
// split on its own (so a Prepend normalizer prepends to every split), splits those at the tokens
// with normalized=true (matched in their normalized spelling), and hands the rest on. Matches are
// leftmost-longest and non-overlapping over all contents of one kind; `single_word` discards a
// match glued to a word character (\w as the library's regex crate means it), `lstrip`/`rstrip`
// take the whitespace (\s) before/after a match into the token.
//
// Thread safety: Add is not; once built, the const methods may be called from many threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gridfeed/text/hf/bpe_model.h"
#include "gridfeed/text/hf/components.h"

namespace gridfeed::text::hf {

struct AddedToken {
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
  bool operator==(const AddedToken&) const = default;
};

// One split of the input after added-token extraction: either an added token's id, or text for
// the pre-tokenizer and the model (already normalized).
struct AddedSplit {
  std::string text;
  bool at_origin = false;
  std::optional<int32_t> id;
};

class AddedVocabulary {
 public:
  // The library's `add_tokens`: tokens with empty content, or already present with the same
  // flags, are skipped; a content already known (added or in the model) keeps its id, any other
  // gets the next id after the model's vocabulary and the added ids. `expected_ids` (same size as
  // `tokens`, or empty) are the ids a file states; a different outcome is refused (the library
  // only warns and uses its own id). `where` names the list in messages.
  Status Add(const std::vector<AddedToken>& tokens, const std::vector<int64_t>& expected_ids,
             const Model& model, const Normalizer* normalizer, const JsonWhere& where);

  // extract_and_normalize: appends the splits of `text` (valid UTF-8) to `out`; empty splits are
  // dropped.
  Status ExtractAndNormalize(std::string_view text, const Normalizer* normalizer,
                             std::vector<AddedSplit>* out) const;

  std::optional<int32_t> TokenToId(std::string_view content) const;
  // The library's simple_id_to_token: the content, or its normalized spelling for a normalized
  // token whose normalized form differs.
  std::optional<std::string_view> IdToToken(int32_t id) const;
  const AddedToken* TokenById(int32_t id) const;
  bool IsSpecial(std::string_view content) const;
  // content -> id, every added token.
  const StringIdMap& vocab() const { return by_content_; }

 private:
  struct Trie {
    struct Node {
      std::vector<std::pair<unsigned char, int32_t>> next;  // sorted by byte
      std::optional<int32_t> value;                         // added token id ending here
    };
    std::vector<Node> nodes;
    bool first_byte[256] = {};
    bool empty() const { return nodes.size() <= 1; }
  };
  struct Match {
    size_t start, end;
    int32_t id;
  };
  Status Rebuild(const JsonWhere& where);
  static Status BuildTrie(const std::vector<std::pair<std::string_view, int32_t>>& patterns,
                          Trie* trie, const JsonWhere& where);
  // Leftmost-longest match at or after `from`.
  static std::optional<Match> NextMatch(const Trie& trie, std::string_view s, size_t from);
  // find_matches: (id or none, [start, end)) covering `s`.
  void FindMatches(
      std::string_view s, const Trie& trie,
      std::vector<std::pair<std::optional<int32_t>, std::pair<size_t, size_t>>>* splits) const;

  StringIdMap by_content_;
  std::unordered_map<int32_t, AddedToken> by_id_;
  std::unordered_map<int32_t, std::string> normalized_;  // normalized spelling where it differs
  Trie raw_trie_, normalized_trie_;
};

}  // namespace gridfeed::text::hf
