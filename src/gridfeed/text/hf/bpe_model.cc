#include "gridfeed/text/hf/bpe_model.h"

#include <atomic>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <queue>

#include "gridfeed/text/hf/models.h"

namespace gridfeed::text::hf {
namespace {

using nlohmann::json;

// The library caches pieces shorter than this many bytes, at most kCacheEntries of them.
constexpr size_t kCacheMaxBytes = 256;
constexpr size_t kCacheEntries = 10000;
// A thread keeps the caches of this many models; older ones are dropped.
constexpr size_t kCachedModelsPerThread = 8;
// Ids are u32 in the library and int32 in .bin files; a vocabulary is a JSON object in memory,
// so its ids are bounded by a dense table no larger than this many times its entries.
constexpr int64_t kMaxIdSpread = 4;

std::atomic<uint64_t> next_cache_key{1};

struct PieceCache {
  uint64_t key = 0;
  std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> map;
};

// Most recently used first.
thread_local std::vector<std::unique_ptr<PieceCache>> thread_caches;

PieceCache& CacheFor(uint64_t key) {
  auto& v = thread_caches;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i]->key == key) {
      if (i != 0) std::swap(v[0], v[i]);
      return *v[0];
    }
  }
  if (v.size() >= kCachedModelsPerThread) v.pop_back();
  auto c = std::make_unique<PieceCache>();
  c->key = key;
  v.insert(v.begin(), std::move(c));
  return *v[0];
}

size_t Utf8Length(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 1;  // not reached on valid UTF-8
}

struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  uint32_t len;  // bytes of the piece it covers; 0 once merged into its left neighbour
};

// The library's heap pops the lowest rank, then the lowest position: one key, rank << 32 | pos.
struct QueuedMerge {
  uint64_t key;
  int32_t new_id;
  int32_t pos() const { return static_cast<int32_t>(key & 0xFFFFFFFF); }
};
QueuedMerge Queued(int32_t pos, int32_t rank, int32_t new_id) {
  return {(static_cast<uint64_t>(static_cast<uint32_t>(rank)) << 32) | static_cast<uint32_t>(pos),
          new_id};
}
struct LaterMerge {
  bool operator()(const QueuedMerge& a, const QueuedMerge& b) const { return a.key > b.key; }
};

// The code point of the whole UTF-8 character `ch` in its shortest form, else -1.
int32_t OneCodePoint(std::string_view ch) {
  const auto* b = reinterpret_cast<const unsigned char*>(ch.data());
  const size_t n = ch.size();
  if (n == 1) return b[0] < 0x80 ? b[0] : -1;
  for (size_t k = 1; k < n; ++k) {
    if ((b[k] & 0xC0) != 0x80) return -1;
  }
  int32_t c;
  if (n == 2 && (b[0] & 0xE0) == 0xC0) {
    c = ((b[0] & 0x1F) << 6) | (b[1] & 0x3F);
    return c >= 0x80 ? c : -1;
  }
  if (n == 3 && (b[0] & 0xF0) == 0xE0) {
    c = ((b[0] & 0x0F) << 12) | ((b[1] & 0x3F) << 6) | (b[2] & 0x3F);
    return c >= 0x800 ? c : -1;
  }
  if (n == 4 && (b[0] & 0xF8) == 0xF0) {
    c = ((b[0] & 0x07) << 18) | ((b[1] & 0x3F) << 12) | ((b[2] & 0x3F) << 6) | (b[3] & 0x3F);
    return c >= 0x10000 && c < 0x110000 ? c : -1;
  }
  return -1;
}

struct Scratch {
  std::vector<Symbol> symbols;
  std::vector<QueuedMerge> heap;
  std::string buf;
};
thread_local Scratch scratch;

uint64_t PairKey(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

Result<std::optional<std::string>> OptString(const json& j, std::string_view key,
                                             const JsonWhere& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) return InvalidArgument(where.Field(key).str() + ": not a string");
  return std::optional<std::string>(it->get<std::string>());
}

Result<bool> OptBool(const json& j, std::string_view key, const JsonWhere& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return false;
  if (!it->is_boolean()) return InvalidArgument(where.Field(key).str() + ": not a boolean");
  return it->get<bool>();
}

}  // namespace

size_t StringHash::operator()(std::string_view s) const noexcept {
  return std::hash<std::string_view>{}(s);
}

BpeModel::~BpeModel() = default;

Result<std::unique_ptr<BpeModel>> BpeModel::Create(
    StringIdMap vocab, const std::vector<std::pair<std::string, std::string>>& merges,
    BpeOptions options, const JsonWhere& where) {
  std::unique_ptr<BpeModel> m(new BpeModel());
  m->vocab_ = std::move(vocab);
  int64_t max_id = -1;
  for (const auto& [tok, id] : m->vocab_) {
    if (id < 0) {
      return InvalidArgument(where.Field("vocab").str() + ": token '" + tok + "' has id " +
                             std::to_string(id) + " (ids are unsigned)");
    }
    max_id = std::max<int64_t>(max_id, id);
  }
  const int64_t n = static_cast<int64_t>(m->vocab_.size());
  if (max_id >= kMaxIdSpread * n + 65536) {
    return InvalidArgument(where.Field("vocab").str() + ": ids up to " + std::to_string(max_id) +
                           " for " + std::to_string(n) +
                           " tokens; gridfeed does not implement so sparse a vocabulary");
  }
  m->by_id_.assign(static_cast<size_t>(max_id + 1), nullptr);
  for (const auto& [tok, id] : m->vocab_) {
    if (m->by_id_[id] != nullptr) {
      return InvalidArgument(where.Field("vocab").str() + ": id " + std::to_string(id) +
                             " is given to both '" + *m->by_id_[id] + "' and '" + tok + "'");
    }
    m->by_id_[id] = &tok;
  }
  const size_t prefix_len = options.continuing_subword_prefix.size();
  std::string merged;
  m->merges_.Reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const auto& [a, b] = merges[i];
    const auto what = [&] { return where.Field("merges").Index(i).str(); };
    auto ia = m->vocab_.find(a);
    if (ia == m->vocab_.end()) {
      return InvalidArgument(what() + ": merge token '" + a + "' is not in the vocabulary");
    }
    auto ib = m->vocab_.find(b);
    if (ib == m->vocab_.end()) {
      return InvalidArgument(what() + ": merge token '" + b + "' is not in the vocabulary");
    }
    // The library drops the prefix's length from the right token, whatever it starts with.
    if (b.size() < prefix_len) {
      return InvalidArgument(what() + ": merge token '" + b +
                             "' is shorter than the continuing_subword_prefix");
    }
    merged.assign(a);
    merged.append(b, prefix_len);
    auto inew = m->vocab_.find(merged);
    if (inew == m->vocab_.end()) {
      return InvalidArgument(what() + ": merged token '" + merged + "' is not in the vocabulary");
    }
    if (i > static_cast<size_t>(INT32_MAX)) return InvalidArgument(what() + ": too many merges");
    // A repeated pair takes its last rank, as the library's map does.
    m->merges_.Set(PairKey(ia->second, ib->second),
                   MergeValue{static_cast<int32_t>(i), inew->second});
  }
  for (const auto& [tok, id] : m->vocab_) {
    if (const int32_t c = OneCodePoint(tok); c >= 0) m->char_ids_.Set(c, MergeValue{0, id});
  }
  // Long pieces are cut into segments (TokenizeSegments) when a symbol is one character: no
  // prefix or suffix, and no ignore_merges (which looks the whole piece up first). The adjacent
  // character pairs of every token say where a merge may join two characters.
  m->segmentable_ = options.continuing_subword_prefix.empty() &&
                    options.end_of_word_suffix.empty() && !options.ignore_merges;
  for (const auto& [tok, id] : m->vocab_) {
    if (!m->segmentable_) break;
    int32_t prev = -1;
    for (size_t i = 0; i < tok.size();) {
      const size_t len = Utf8Length(static_cast<unsigned char>(tok[i]));
      const int32_t c =
          i + len <= tok.size() ? OneCodePoint(std::string_view(tok).substr(i, len)) : -1;
      if (c < 0) {  // not UTF-8: no cuts at all
        m->segmentable_ = false;
        break;
      }
      if (prev >= 0) {
        m->bigrams_.Set((static_cast<uint64_t>(prev) << 21) | static_cast<uint64_t>(c),
                        MergeValue{0, 0});
      }
      prev = c;
      i += len;
    }
  }
  if (options.unk_token) {
    if (auto it = m->vocab_.find(*options.unk_token); it != m->vocab_.end()) {
      m->unk_id_ = it->second;
    }
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    if (auto it = m->vocab_.find(std::string_view(name)); it != m->vocab_.end()) {
      m->byte_ids_[b] = it->second;
    }
  }
  m->options_ = std::move(options);
  m->cache_key_ = next_cache_key.fetch_add(1);
  return m;
}

const BpeModel::MergeValue* BpeModel::FindMerge(int32_t a, int32_t b) const {
  return merges_.Find(PairKey(a, b));
}

std::optional<int32_t> BpeModel::CharId(std::string_view ch) const {
  if (const int32_t c = OneCodePoint(ch); c >= 0) {
    const MergeValue* v = char_ids_.Find(static_cast<uint64_t>(c));
    if (v == nullptr) return std::nullopt;
    return v->new_id;
  }
  auto it = vocab_.find(ch);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

std::optional<int32_t> BpeModel::TokenToId(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string_view> BpeModel::IdToToken(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= by_id_.size() || by_id_[id] == nullptr) {
    return std::nullopt;
  }
  return std::string_view(*by_id_[id]);
}

Status BpeModel::Tokenize(std::string_view piece, std::vector<int32_t>* ids) const {
  if (piece.empty()) return Status::Ok();
  if (options_.ignore_merges) {
    if (auto it = vocab_.find(piece); it != vocab_.end()) {
      ids->push_back(it->second);
      return Status::Ok();
    }
  }
  if (piece.size() >= kCacheMaxBytes) {
    return segmentable_ ? TokenizeSegments(piece, ids) : MergeWord(piece, ids);
  }
  return TokenizeCached(piece, ids);
}

// A long piece (a whole text where there is no pre-tokenizer) is cut where no merge can ever
// join its two sides: between two characters that are tokens themselves, c1 and c2, when no
// vocabulary token contains c1c2. A merge across that point would make a token whose text holds
// c1c2 (merges concatenate their tokens' texts), so the merges on either side never meet, and
// the library's queue order restricted to one segment is the segment's own: the ids are those of
// MergeWord on the whole piece. Segments are then cached like short pieces.
Status BpeModel::TokenizeSegments(std::string_view piece, std::vector<int32_t>* ids) const {
  size_t start = 0;
  int32_t prev_cp = -1;  // the previous character when it is a token itself, else -1
  const auto flush = [&](size_t end) -> Status {
    const std::string_view seg = piece.substr(start, end - start);
    start = end;
    return seg.size() < kCacheMaxBytes ? TokenizeCached(seg, ids) : MergeWord(seg, ids);
  };
  for (size_t i = 0; i < piece.size();) {
    const size_t len = std::min(Utf8Length(static_cast<unsigned char>(piece[i])), piece.size() - i);
    const int32_t cp = OneCodePoint(piece.substr(i, len));
    const bool token = cp >= 0 && char_ids_.Find(static_cast<uint64_t>(cp)) != nullptr;
    if (token && prev_cp >= 0 &&
        bigrams_.Find((static_cast<uint64_t>(prev_cp) << 21) | static_cast<uint64_t>(cp)) ==
            nullptr) {
      GRIDFEED_RETURN_IF_ERROR(flush(i));
    }
    prev_cp = token ? cp : -1;
    i += len;
  }
  return flush(piece.size());
}

Status BpeModel::TokenizeCached(std::string_view piece, std::vector<int32_t>* ids) const {
  PieceCache& cache = CacheFor(cache_key_);
  if (auto it = cache.map.find(piece); it != cache.map.end()) {
    ids->insert(ids->end(), it->second.begin(), it->second.end());
    return Status::Ok();
  }
  const size_t first = ids->size();
  GRIDFEED_RETURN_IF_ERROR(MergeWord(piece, ids));
  if (cache.map.size() < kCacheEntries) {
    cache.map.emplace(std::string(piece), std::vector<int32_t>(ids->begin() + first, ids->end()));
  }
  return Status::Ok();
}

Status BpeModel::MergeWord(std::string_view w, std::vector<int32_t>* ids) const {
  Scratch& s = scratch;
  auto& symbols = s.symbols;
  symbols.clear();
  const auto add = [&](int32_t id, size_t len) {
    const int32_t i = static_cast<int32_t>(symbols.size());
    symbols.push_back(Symbol{id, i - 1, i + 1, static_cast<uint32_t>(len)});
  };
  // A pending unknown run: (id, bytes), written before the next known character.
  bool unk = false;
  int32_t unk_tok = 0;
  size_t unk_len = 0;
  const auto unk_id = [&]() -> Result<int32_t> {
    if (!unk_id_) {
      return InvalidArgument("BPE unk_token '" + *options_.unk_token +
                             "' is not in the vocabulary");
    }
    return *unk_id_;
  };
  for (size_t i = 0; i < w.size();) {
    const size_t len = std::min(Utf8Length(static_cast<unsigned char>(w[i])), w.size() - i);
    const bool is_first = i == 0;
    const bool is_last = i + len == w.size();
    std::string_view sym = w.substr(i, len);
    if ((!is_first && !options_.continuing_subword_prefix.empty()) ||
        (is_last && !options_.end_of_word_suffix.empty())) {
      s.buf.clear();
      if (!is_first) s.buf += options_.continuing_subword_prefix;
      s.buf += sym;
      if (is_last) s.buf += options_.end_of_word_suffix;
      sym = s.buf;
    }
    i += len;
    if (auto id = CharId(sym)) {
      if (unk) {
        add(unk_tok, unk_len);
        unk = false;
      }
      add(*id, len);
      continue;
    }
    if (options_.byte_fallback) {
      bool all = true;
      for (unsigned char c : sym) all = all && byte_ids_[c].has_value();
      if (all) {
        // As the library does: a pending unknown run stays pending across byte tokens.
        for (unsigned char c : sym) add(*byte_ids_[c], 1);
        continue;
      }
    }
    if (options_.unk_token) {
      if (unk && options_.fuse_unk) {
        unk_len += len;
      } else {
        if (unk) add(unk_tok, unk_len);
        GRIDFEED_ASSIGN_OR_RETURN(unk_tok, unk_id());
        unk = true;
        unk_len = len;
      }
    }
  }
  if (unk) add(unk_tok, unk_len);
  if (symbols.empty()) return Status::Ok();
  symbols.back().next = -1;
  const int32_t n = static_cast<int32_t>(symbols.size());

  auto& heap = s.heap;
  heap.clear();
  for (int32_t i = 0; i + 1 < n; ++i) {
    if (auto m = FindMerge(symbols[i].id, symbols[i + 1].id)) {
      heap.push_back(Queued(i, m->rank, m->new_id));
    }
  }
  std::make_heap(heap.begin(), heap.end(), LaterMerge{});
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), LaterMerge{});
    const QueuedMerge top = heap.back();
    heap.pop_back();
    const int32_t top_pos = top.pos();
    Symbol& cur = symbols[top_pos];
    if (cur.len == 0 || cur.next == -1) continue;
    const int32_t next_pos = cur.next;
    const Symbol right = symbols[next_pos];
    // An entry whose pair has changed since it was queued is stale.
    auto now = FindMerge(cur.id, right.id);
    if (!now || now->new_id != top.new_id) continue;
    cur.id = top.new_id;
    cur.len += right.len;
    cur.next = right.next;
    symbols[next_pos].len = 0;
    if (right.next > -1 && right.next < n) symbols[right.next].prev = top_pos;
    if (cur.prev >= 0) {
      if (auto m = FindMerge(symbols[cur.prev].id, cur.id)) {
        heap.push_back(Queued(cur.prev, m->rank, m->new_id));
        std::push_heap(heap.begin(), heap.end(), LaterMerge{});
      }
    }
    if (cur.next >= 0 && cur.next < n) {
      if (auto m = FindMerge(cur.id, symbols[cur.next].id)) {
        heap.push_back(Queued(top_pos, m->rank, m->new_id));
        std::push_heap(heap.begin(), heap.end(), LaterMerge{});
      }
    }
  }
  for (const Symbol& sym : symbols) {
    if (sym.len != 0) ids->push_back(sym.id);
  }
  return Status::Ok();
}

Result<std::unique_ptr<Model>> MakeBpeModel(const json& j, const JsonWhere& where) {
  BpeOptions o;
  if (auto it = j.find("dropout"); it != j.end() && !it->is_null()) {
    if (!it->is_number()) return InvalidArgument(where.Field("dropout").str() + ": not a number");
    const double d = it->get<double>();
    if (d < 0 || d > 1) {
      return InvalidArgument(where.Field("dropout").str() + ": " + it->dump() +
                             " is outside [0, 1]");
    }
    if (d != 0) {
      return InvalidArgument(where.Field("dropout").str() + ": BPE dropout " + it->dump() +
                             " merges at random; gridfeed implements only null or 0");
    }
  }
  GRIDFEED_ASSIGN_OR_RETURN(o.unk_token, OptString(j, "unk_token", where));
  GRIDFEED_ASSIGN_OR_RETURN(auto prefix, OptString(j, "continuing_subword_prefix", where));
  GRIDFEED_ASSIGN_OR_RETURN(auto suffix, OptString(j, "end_of_word_suffix", where));
  o.continuing_subword_prefix = prefix.value_or("");
  o.end_of_word_suffix = suffix.value_or("");
  GRIDFEED_ASSIGN_OR_RETURN(o.fuse_unk, OptBool(j, "fuse_unk", where));
  GRIDFEED_ASSIGN_OR_RETURN(o.byte_fallback, OptBool(j, "byte_fallback", where));
  GRIDFEED_ASSIGN_OR_RETURN(o.ignore_merges, OptBool(j, "ignore_merges", where));

  auto v = j.find("vocab");
  auto mg = j.find("merges");
  if (v == j.end() || mg == j.end()) {
    return InvalidArgument(where.str() + ": BPE needs both 'vocab' and 'merges'");
  }
  if (!v->is_object()) return InvalidArgument(where.Field("vocab").str() + ": not an object");
  if (!mg->is_array()) return InvalidArgument(where.Field("merges").str() + ": not a list");
  StringIdMap vocab;
  vocab.reserve(v->size());
  for (auto it = v->begin(); it != v->end(); ++it) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > INT32_MAX) {
      return InvalidArgument(where.Field("vocab").str() + ": id of '" + it.key() + "' is " +
                             it->dump() + ", not an id in [0, 2^31)");
    }
    vocab[it.key()] = static_cast<int32_t>(it->get<int64_t>());
  }
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(mg->size());
  for (size_t i = 0; i < mg->size(); ++i) {
    const json& e = (*mg)[i];
    if (e.is_string()) {
      // "a b": exactly two parts separated by one space.
      const auto& s = e.get_ref<const std::string&>();
      if (s.starts_with("#version")) continue;  // the library skips these lines
      const auto sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
        return InvalidArgument(where.Field("merges").Index(i).str() + ": '" + s +
                               "' is not two tokens separated by one space");
      }
      merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
    } else {
      return InvalidArgument(where.Field("merges").Index(i).str() +
                             ": a merge is \"a b\" or [\"a\", \"b\"]");
    }
  }
  GRIDFEED_ASSIGN_OR_RETURN(auto model,
                            BpeModel::Create(std::move(vocab), merges, std::move(o), where));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace gridfeed::text::hf
