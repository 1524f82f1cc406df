// The library's Unigram model (models/unigram/model.rs), as its `tokenize` runs it: the best
// segmentation of a piece by the sum of piece scores (its `encode_optimized`, a Viterbi pass over
// byte positions), where a character that starts no one-character vocabulary entry may be the
// unknown token with score min_score - 10; consecutive unknowns are fused into one string; each
// resulting string is then looked up, and one that is not in the vocabulary becomes its <0xNN>
// byte tokens (`byte_fallback`, when all of them exist) or `unk_id`.
//
// Ties keep the first candidate found: candidates are visited by start position, then by length
// (the trie's prefix order), as in the library. Duplicate pieces behave as in the library: the
// last id of a piece wins in lookups, every entry counts in vocab_size.
#include <cmath>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "gridfeed/text/hf/bpe_model.h"
#include "gridfeed/text/hf/component_json.h"
#include "gridfeed/text/hf/models.h"
#include "gridfeed/text/hf/utf8.h"

namespace gridfeed::text::hf {
namespace {

using nlohmann::json;

constexpr size_t kMaxPieces = size_t{1} << 24;
constexpr double kUnkPenalty = 10.0;

// A byte trie over the pieces: node 0 is the root; each node knows the id ending there.
class ByteTrie {
 public:
  ByteTrie() : ends_(1, -1) {}
  void Insert(std::string_view s, int32_t id) {
    uint32_t node = 0;
    for (unsigned char c : s) {
      auto [it, added] = edges_.try_emplace(Key(node, c), static_cast<uint32_t>(ends_.size()));
      if (added) ends_.push_back(-1);
      node = it->second;
    }
    ends_[node] = id;  // a later duplicate replaces the earlier one, as the library's map does
  }
  // Calls f(length, id) for every piece that is a prefix of `s`, shortest first.
  template <typename F>
  void ForEachPrefix(std::string_view s, F&& f) const {
    uint32_t node = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      auto it = edges_.find(Key(node, static_cast<unsigned char>(s[i])));
      if (it == edges_.end()) return;
      node = it->second;
      if (ends_[node] >= 0) f(i + 1, ends_[node]);
    }
  }

 private:
  static uint64_t Key(uint32_t node, unsigned char c) { return (uint64_t{node} << 8) | c; }
  std::unordered_map<uint64_t, uint32_t> edges_;
  std::vector<int32_t> ends_;
};

class UnigramModel final : public Model {
 public:
  UnigramModel(std::vector<std::pair<std::string, double>> vocab, std::optional<int32_t> unk_id,
               bool byte_fallback, std::string where)
      : vocab_(std::move(vocab)),
        unk_id_(unk_id),
        byte_fallback_(byte_fallback),
        where_(std::move(where)) {
    ids_.reserve(vocab_.size());
    double min_score = std::numeric_limits<double>::infinity();
    for (size_t id = 0; id < vocab_.size(); ++id) {
      ids_[vocab_[id].first] = static_cast<int32_t>(id);
      trie_.Insert(vocab_[id].first, static_cast<int32_t>(id));
      if (vocab_[id].second < min_score) min_score = vocab_[id].second;
    }
    unk_score_ = min_score - kUnkPenalty;
  }

  Status Tokenize(std::string_view piece, std::vector<int32_t>* ids) const override {
    if (piece.empty()) return Status::Ok();
    std::vector<std::string_view> strings;
    GRIDFEED_RETURN_IF_ERROR(Encode(piece, &strings));
    for (std::string_view s : strings) {
      if (auto it = ids_.find(s); it != ids_.end()) {
        ids->push_back(it->second);
        continue;
      }
      if (byte_fallback_ && AppendBytes(s, ids)) continue;
      if (!unk_id_) return MissingUnk();
      ids->push_back(*unk_id_);
    }
    return Status::Ok();
  }
  std::optional<int32_t> TokenToId(std::string_view token) const override {
    auto it = ids_.find(token);
    if (it == ids_.end()) return std::nullopt;
    return it->second;
  }
  std::optional<std::string_view> IdToToken(int32_t id) const override {
    if (id < 0 || static_cast<size_t>(id) >= vocab_.size()) return std::nullopt;
    return std::string_view(vocab_[id].first);
  }
  int64_t vocab_size() const override { return static_cast<int64_t>(vocab_.size()); }

 private:
  struct Best {
    double score = 0;
    int64_t starts_at = -1;  // -1: not reached yet
    int32_t id = 0;
  };

  Status MissingUnk() const {
    return InvalidArgument("Unigram: encountered an unknown token but unk_id is missing (" +
                           where_ + ")");
  }

  // The segmentation as strings (views of `s`), unknowns fused.
  Status Encode(std::string_view s, std::vector<std::string_view>* out) const {
    std::vector<Best> best(s.size() + 1);
    const auto offer = [&](size_t end, double score, size_t start, int32_t id) {
      Best& t = best[end];
      if (t.starts_at < 0 || score > t.score) {
        t.score = score;
        t.starts_at = static_cast<int64_t>(start);
        t.id = id;
      }
    };
    for (size_t start = 0; start < s.size();) {
      const double here = best[start].score;
      const size_t mblen = Utf8CharLen(s, start);
      bool has_single = false;
      trie_.ForEachPrefix(s.substr(start), [&](size_t len, int32_t id) {
        offer(start + len, vocab_[id].second + here, start, id);
        if (len == mblen) has_single = true;
      });
      if (!has_single) {
        // The library needs unk_id only where the unknown would be the best path so far.
        const Best& t = best[start + mblen];
        const double score = unk_score_ + here;
        if (t.starts_at < 0 || score > t.score) {
          if (!unk_id_) return MissingUnk();
          offer(start + mblen, score, start, *unk_id_);
        }
      }
      start += mblen;
    }
    // Walk back; runs of unknowns become one string.
    const size_t first = out->size();
    size_t end = s.size();
    size_t unk_end = 0;
    bool in_unk = false;
    while (end > 0) {
      const Best& b = best[end];
      const auto start = static_cast<size_t>(b.starts_at);
      if (unk_id_ && b.id == *unk_id_) {
        if (!in_unk) unk_end = end;
        in_unk = true;
      } else {
        if (in_unk) out->push_back(s.substr(end, unk_end - end));
        in_unk = false;
        out->push_back(s.substr(start, end - start));
      }
      end = start;
    }
    if (in_unk) out->push_back(s.substr(0, unk_end));
    std::reverse(out->begin() + static_cast<std::ptrdiff_t>(first), out->end());
    return Status::Ok();
  }

  // The <0xNN> tokens of every byte of `s`; false (nothing appended) if one is missing.
  bool AppendBytes(std::string_view s, std::vector<int32_t>* ids) const {
    static constexpr char kHex[] = "0123456789ABCDEF";
    const size_t first = ids->size();
    std::string name = "<0x00>";
    for (unsigned char c : s) {
      name[3] = kHex[c >> 4];
      name[4] = kHex[c & 15];
      auto it = ids_.find(name);
      if (it == ids_.end()) {
        ids->resize(first);
        return false;
      }
      ids->push_back(it->second);
    }
    return true;
  }

  std::vector<std::pair<std::string, double>> vocab_;
  StringIdMap ids_;
  ByteTrie trie_;
  std::optional<int32_t> unk_id_;
  bool byte_fallback_;
  double unk_score_ = 0;
  std::string where_;
};

}  // namespace

Result<std::unique_ptr<Model>> MakeUnigramModel(const json& j, const JsonWhere& where) {
  GRIDFEED_ASSIGN_OR_RETURN(const json* v, RequiredField(j, "vocab", where));
  const JsonWhere vw = where.Field("vocab");
  if (!v->is_array()) return InvalidArgument("expected a list of [piece, score] at " + vw.str());
  if (v->size() > kMaxPieces) {
    return InvalidArgument(vw.str() + ": " + std::to_string(v->size()) +
                           " pieces, more than gridfeed reads (" + std::to_string(kMaxPieces) +
                           ")");
  }
  std::vector<std::pair<std::string, double>> vocab;
  vocab.reserve(v->size());
  for (size_t i = 0; i < v->size(); ++i) {
    const json& e = (*v)[i];
    if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number()) {
      return InvalidArgument("expected [piece, score] at " + vw.Index(i).str());
    }
    vocab.emplace_back(e[0].get<std::string>(), e[1].get<double>());
  }
  std::optional<int32_t> unk_id;
  if (auto it = j.find("unk_id"); it != j.end() && !it->is_null()) {
    if (!it->is_number_unsigned()) {
      return InvalidArgument("expected a non-negative integer or null at " +
                             where.Field("unk_id").str());
    }
    // The library: an unk_id needs a non-empty vocabulary that holds it.
    if (vocab.empty() || it->get<uint64_t>() >= vocab.size()) {
      return InvalidArgument("unk_id " + it->dump() + " is not an id of the " +
                             std::to_string(vocab.size()) + "-piece vocabulary (" +
                             where.Field("unk_id").str() + ")");
    }
    unk_id = static_cast<int32_t>(it->get<uint64_t>());
  }
  GRIDFEED_ASSIGN_OR_RETURN(bool byte_fallback, OptionalBool(j, "byte_fallback", false, where));
  return std::unique_ptr<Model>(
      std::make_unique<UnigramModel>(std::move(vocab), unk_id, byte_fallback, where.str()));
}

}  // namespace gridfeed::text::hf
