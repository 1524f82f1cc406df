#include "gridfeed/text/hf/added_vocabulary.h"

#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include <algorithm>
#include <cstring>

namespace gridfeed::text::hf {
namespace {

// The regex crate's Unicode \w: Alphabetic, marks, decimal digits, connector punctuation,
// Join_Control.
bool IsWordChar(UChar32 c) {
  if (u_hasBinaryProperty(c, UCHAR_ALPHABETIC) || u_hasBinaryProperty(c, UCHAR_JOIN_CONTROL)) {
    return true;
  }
  const int8_t t = u_charType(c);
  return t == U_NON_SPACING_MARK || t == U_ENCLOSING_MARK || t == U_COMBINING_SPACING_MARK ||
         t == U_DECIMAL_DIGIT_NUMBER || t == U_CONNECTOR_PUNCTUATION;
}

// The regex crate's Unicode \s: White_Space.
bool IsSpace(UChar32 c) { return u_hasBinaryProperty(c, UCHAR_WHITE_SPACE); }

UChar32 FirstChar(std::string_view s) {
  int32_t i = 0;
  UChar32 c;
  U8_NEXT(reinterpret_cast<const uint8_t*>(s.data()), i, static_cast<int32_t>(s.size()), c);
  return c;
}

UChar32 LastChar(std::string_view s) {
  int32_t i = static_cast<int32_t>(s.size());
  UChar32 c;
  U8_PREV(reinterpret_cast<const uint8_t*>(s.data()), 0, i, c);
  return c;
}

// Start of the whitespace run that ends `s` (s.size() if none): `\s*$`'s match.
size_t TrailingSpaceStart(std::string_view s) {
  int32_t i = static_cast<int32_t>(s.size());
  while (i > 0) {
    int32_t j = i;
    UChar32 c;
    U8_PREV(reinterpret_cast<const uint8_t*>(s.data()), 0, j, c);
    if (c < 0 || !IsSpace(c)) break;
    i = j;
  }
  return static_cast<size_t>(i);
}

// Length of the whitespace run that starts `s`: `^\s*`'s match.
size_t LeadingSpaceEnd(std::string_view s) {
  int32_t i = 0;
  const int32_t n = static_cast<int32_t>(s.size());
  while (i < n) {
    int32_t j = i;
    UChar32 c;
    U8_NEXT(reinterpret_cast<const uint8_t*>(s.data()), j, n, c);
    if (c < 0 || !IsSpace(c)) break;
    i = j;
  }
  return static_cast<size_t>(i);
}

}  // namespace

Status AddedVocabulary::Add(const std::vector<AddedToken>& tokens,
                            const std::vector<int64_t>& expected_ids, const Model& model,
                            const Normalizer* normalizer, const JsonWhere& where) {
  const int64_t model_size = model.vocab_size();
  int64_t next_id = model_size;
  if (!by_id_.empty()) {
    int64_t max = INT64_MIN;
    for (const auto& [id, t] : by_id_) max = std::max<int64_t>(max, id);
    next_id = (max >= model_size || model_size == 0) ? max + 1 : model_size;
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    const AddedToken& token = tokens[i];
    if (token.content.empty()) continue;
    if (auto it = by_content_.find(token.content); it != by_content_.end()) {
      if (auto t = by_id_.find(it->second); t != by_id_.end() && t->second == token) continue;
    }
    int64_t id;
    if (auto known = TokenToId(token.content)) {
      id = *known;
    } else if (auto in_model = model.TokenToId(token.content)) {
      id = *in_model;
    } else {
      id = next_id++;
      if (id > INT32_MAX) return InvalidArgument(where.Index(i).str() + ": too many tokens");
      if (auto other = model.IdToToken(static_cast<int32_t>(id))) {
        return InvalidArgument(where.Index(i).str() + ": added token '" + token.content +
                               "' would get id " + std::to_string(id) + ", which the model " +
                               "gives to '" + std::string(*other) + "'");
      }
    }
    if (!expected_ids.empty() && expected_ids[i] != id) {
      return InvalidArgument(where.Index(i).str() + ": added token '" + token.content +
                             "' has id " + std::to_string(expected_ids[i]) +
                             " but the tokenizers library gives it id " + std::to_string(id) +
                             " (ids beyond the vocabulary must follow it without gaps, and a " +
                             "token of the vocabulary keeps its id)");
    }
    const int32_t id32 = static_cast<int32_t>(id);
    normalized_.erase(id32);
    if (token.normalized && normalizer != nullptr) {
      std::string s = token.content;
      GRIDFEED_RETURN_IF_ERROR(normalizer->Normalize(&s).WithContext(where.Index(i).str()));
      if (s != token.content) normalized_[id32] = std::move(s);
    }
    by_content_[token.content] = id32;
    by_id_[id32] = token;
  }
  return Rebuild(where);
}

Status AddedVocabulary::Rebuild(const JsonWhere& where) {
  std::vector<std::pair<std::string_view, int32_t>> raw, norm;
  for (const auto& [id, t] : by_id_) {
    if (t.normalized) {
      auto n = normalized_.find(id);
      norm.emplace_back(
          n != normalized_.end() ? std::string_view(n->second) : std::string_view(t.content), id);
    } else {
      raw.emplace_back(t.content, id);
    }
  }
  GRIDFEED_RETURN_IF_ERROR(BuildTrie(raw, &raw_trie_, where));
  return BuildTrie(norm, &normalized_trie_, where);
}

Status AddedVocabulary::BuildTrie(const std::vector<std::pair<std::string_view, int32_t>>& patterns,
                                  Trie* trie, const JsonWhere& where) {
  trie->nodes.assign(1, Trie::Node{});
  std::memset(trie->first_byte, 0, sizeof trie->first_byte);
  for (const auto& [pattern, id] : patterns) {
    int32_t node = 0;
    for (unsigned char c : pattern) {
      auto& next = trie->nodes[node].next;
      auto it = std::lower_bound(next.begin(), next.end(), c,
                                 [](const auto& e, unsigned char b) { return e.first < b; });
      if (it != next.end() && it->first == c) {
        node = it->second;
      } else {
        const int32_t fresh = static_cast<int32_t>(trie->nodes.size());
        next.insert(it, {c, fresh});
        trie->nodes.emplace_back();
        node = fresh;
      }
    }
    if (trie->nodes[node].value) {
      // The library's matcher refuses a repeated pattern, so the tokenizer does not load.
      return InvalidArgument(where.str() + ": two added tokens (ids " +
                             std::to_string(*trie->nodes[node].value) + " and " +
                             std::to_string(id) + ") are matched as the same text '" +
                             std::string(pattern) + "'");
    }
    trie->nodes[node].value = id;
    if (!pattern.empty()) trie->first_byte[static_cast<unsigned char>(pattern[0])] = true;
  }
  return Status::Ok();
}

std::optional<AddedVocabulary::Match> AddedVocabulary::NextMatch(const Trie& trie,
                                                                 std::string_view s, size_t from) {
  for (size_t i = from; i < s.size(); ++i) {
    if (!trie.first_byte[static_cast<unsigned char>(s[i])]) continue;
    int32_t node = 0;
    std::optional<Match> best;
    for (size_t k = i; k < s.size(); ++k) {
      const auto& next = trie.nodes[node].next;
      const unsigned char c = static_cast<unsigned char>(s[k]);
      auto it = std::lower_bound(next.begin(), next.end(), c,
                                 [](const auto& e, unsigned char b) { return e.first < b; });
      if (it == next.end() || it->first != c) break;
      node = it->second;
      if (trie.nodes[node].value) best = Match{i, k + 1, *trie.nodes[node].value};
    }
    if (best) return best;
  }
  return std::nullopt;
}

void AddedVocabulary::FindMatches(
    std::string_view s, const Trie& trie,
    std::vector<std::pair<std::optional<int32_t>, std::pair<size_t, size_t>>>* splits) const {
  splits->clear();
  if (trie.empty()) {
    splits->push_back({std::nullopt, {0, s.size()}});
    return;
  }
  size_t start_offset = 0;
  for (size_t from = 0; auto m = NextMatch(trie, s, from);) {
    from = m->end;  // the matcher goes on after the match, whatever strip or discard follows
    size_t start = m->start, stop = m->end;
    const AddedToken& t = by_id_.at(m->id);
    if (t.single_word) {
      const bool start_space = start == 0 || !IsWordChar(LastChar(s.substr(0, start)));
      const bool stop_space = stop == s.size() || !IsWordChar(FirstChar(s.substr(stop)));
      if (!start_space || !stop_space) continue;
    }
    if (t.lstrip) start = std::max(TrailingSpaceStart(s.substr(0, start)), start_offset);
    if (t.rstrip) stop += LeadingSpaceEnd(s.substr(stop));
    if (start_offset < start) splits->push_back({std::nullopt, {start_offset, start}});
    splits->push_back({m->id, {start, stop}});
    start_offset = stop;
  }
  if (start_offset != s.size()) splits->push_back({std::nullopt, {start_offset, s.size()}});
}

Status AddedVocabulary::ExtractAndNormalize(std::string_view text, const Normalizer* normalizer,
                                            std::vector<AddedSplit>* out) const {
  std::vector<std::pair<std::optional<int32_t>, std::pair<size_t, size_t>>> raw, norm;
  FindMatches(text, raw_trie_, &raw);
  for (const auto& [id, range] : raw) {
    const auto [b, e] = range;
    if (e <= b) continue;
    if (id) {
      out->push_back({std::string(text.substr(b, e - b)), b == 0, id});
      continue;
    }
    std::string piece(text.substr(b, e - b));
    if (normalizer != nullptr) GRIDFEED_RETURN_IF_ERROR(normalizer->Normalize(&piece));
    FindMatches(piece, normalized_trie_, &norm);
    for (const auto& [nid, nrange] : norm) {
      const auto [nb, ne] = nrange;
      if (ne <= nb) continue;
      out->push_back({piece.substr(nb, ne - nb), b == 0 && nb == 0, nid});
    }
  }
  return Status::Ok();
}

std::optional<int32_t> AddedVocabulary::TokenToId(std::string_view content) const {
  auto it = by_content_.find(content);
  if (it == by_content_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string_view> AddedVocabulary::IdToToken(int32_t id) const {
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return std::nullopt;
  if (auto n = normalized_.find(id); n != normalized_.end()) return std::string_view(n->second);
  return std::string_view(it->second.content);
}

const AddedToken* AddedVocabulary::TokenById(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &it->second;
}

bool AddedVocabulary::IsSpecial(std::string_view content) const {
  auto it = by_content_.find(content);
  if (it == by_content_.end()) return false;
  auto t = by_id_.find(it->second);
  return t != by_id_.end() && t->second.special;
}

}  // namespace gridfeed::text::hf
