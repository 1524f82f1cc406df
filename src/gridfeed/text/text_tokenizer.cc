#include "gridfeed/text/text_tokenizer.h"

#include <sentencepiece_processor.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "gridfeed/io/file_util.h"
#include "gridfeed/text/hf/hf_tokenizer.h"
#include "gridfeed/text/hf/utf8.h"

namespace gridfeed::text {
namespace {

using nlohmann::json;

// A gf_tokenizer.json is a few kilobytes; anything this large is not one.
constexpr uint64_t kMaxJsonBytes = 64ull << 20;
// Token ids are stored as int32 at most (Megatron's .bin dtypes).
constexpr int64_t kMaxVocab = INT32_MAX;
constexpr size_t kMaxNameBytes = 4096;
// gf-charvocab-v1: ch(A-1) must stay a Unicode scalar value (0x100 + a + 0x800 <= 0x10FFFF).
constexpr int64_t kMaxAlphabet = 0x10FFFF - 0x100 - 0x800 + 1;

std::string Hex(uint32_t v, int width) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%0*X", width, v);
  return buf;
}

// Decodes one code point at text[i]; returns its length in bytes, 0 if invalid there.
size_t DecodeOne(std::string_view text, size_t i, char32_t* cp) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  size_t n;
  char32_t v, min;
  if ((c & 0xE0) == 0xC0) {
    n = 2, v = c & 0x1F, min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3, v = c & 0x0F, min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4, v = c & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (i + n > text.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    v = (v << 6) | (b(i + k) & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
  *cp = v;
  return n;
}

Status InvalidUtf8(std::string_view text, size_t i, const std::string& what) {
  return InvalidArgument(what + " is not valid UTF-8 at byte " + std::to_string(i) + " (0x" +
                         Hex(static_cast<unsigned char>(text[i]), 2) + ")");
}

Status ValidateUtf8(std::string_view text, const std::string& what) {
  char32_t cp;
  for (size_t i = 0; i < text.size();) {
    // ASCII fast path: most text is.
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t n = DecodeOne(text, i, &cp);
    if (n == 0) return InvalidUtf8(text, i, what);
    i += n;
  }
  return Status::Ok();
}

Status IdInRange(int64_t id, int64_t vocab, size_t pos, const std::string& path) {
  if (id < 0 || id >= vocab) {
    return InvalidArgument("token id " + std::to_string(id) + " at position " +
                           std::to_string(pos) + " is outside the vocabulary [0, " +
                           std::to_string(vocab) + ") of " + path);
  }
  return Status::Ok();
}

// ---- SentencePiece ----

class SentencePieceText final : public TextTokenizer {
 public:
  SentencePieceText(std::unique_ptr<sentencepiece::SentencePieceProcessor> sp, std::string path)
      : sp_(std::move(sp)) {
    path_ = std::move(path);
    vocab_size_ = sp_->GetPieceSize();
    auto opt = [](int id) { return id < 0 ? std::nullopt : std::optional<int64_t>(id); };
    bos_ = opt(sp_->bos_id());
    eos_ = opt(sp_->eos_id());
    pad_ = opt(sp_->pad_id());
    unk_ = opt(sp_->unk_id());
  }
  Status AddSpecials(const TextTokenizerOptions& o) {
    for (const auto& id : {bos_, eos_, unk_, pad_}) {
      if (id) special_.push_back({sp_->IdToPiece(static_cast<int>(*id)), *id});
    }
    for (const auto& name : o.special_tokens) {
      auto id = TokenId(name);
      if (!id) {
        return InvalidArgument("--special-tokens: '" + name + "' is not a piece of " + path_);
      }
      special_.push_back({name, *id});
    }
    IndexSpecials();
    return Status::Ok();
  }

  std::string_view kind() const override { return "sentencepiece"; }
  Result<std::vector<int64_t>> Encode(std::string_view text) const override {
    GRIDFEED_RETURN_IF_ERROR(ValidateUtf8(text, "text"));
    std::vector<int> ids;
    auto st = sp_->Encode(text, &ids);
    if (!st.ok()) return InvalidArgument("sentencepiece (" + path_ + "): " + st.ToString());
    return std::vector<int64_t>(ids.begin(), ids.end());
  }
  Result<std::string> Decode(std::span<const int64_t> ids) const override {
    std::vector<int> kept;
    kept.reserve(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      GRIDFEED_RETURN_IF_ERROR(IdInRange(ids[i], vocab_size_, i, path_));
      if (!IsSpecial(ids[i])) kept.push_back(static_cast<int>(ids[i]));
    }
    std::string out;
    auto st = sp_->Decode(kept, &out);
    if (!st.ok()) return InvalidArgument("sentencepiece (" + path_ + "): " + st.ToString());
    return out;
  }
  std::optional<int64_t> TokenId(std::string_view token) const override {
    const int id = sp_->PieceToId(token);
    // PieceToId answers unk for an unknown piece: only an exact spelling counts.
    if (id < 0 || sp_->IdToPiece(id) != token) return std::nullopt;
    return id;
  }

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

// ---- gf_tokenizer.json, common fields ----

class JsonFields {
 public:
  JsonFields(const json& j, const std::string& path) : j_(j), path_(path) {}

  Status Error(const std::string& field, const std::string& what) const {
    return InvalidArgument(path_ + ": field '" + field + "' " + what);
  }
  Result<int64_t> Int(const std::string& field, int64_t lo, int64_t hi) const {
    auto it = j_.find(field);
    if (it == j_.end()) return Error(field, "is missing");
    if (!it->is_number_integer()) return Error(field, "is not an integer: " + it->dump());
    if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(hi)) {
      return Error(field, "is " + it->dump() + ", outside [" + std::to_string(lo) + ", " +
                              std::to_string(hi) + "]");
    }
    const int64_t v = it->get<int64_t>();
    if (v < lo || v > hi) {
      return Error(field, "is " + it->dump() + ", outside [" + std::to_string(lo) + ", " +
                              std::to_string(hi) + "]");
    }
    return v;
  }
  Result<bool> Bool(const std::string& field, bool dflt) const {
    auto it = j_.find(field);
    if (it == j_.end()) return dflt;
    if (!it->is_boolean()) return Error(field, "is not true or false: " + it->dump());
    return it->get<bool>();
  }
  // null or absent -> nullopt.
  Result<std::optional<std::string>> OptString(const std::string& field) const {
    auto it = j_.find(field);
    if (it == j_.end() || it->is_null()) return std::optional<std::string>();
    if (!it->is_string()) return Error(field, "is not a string or null: " + it->dump());
    return std::optional<std::string>(it->get<std::string>());
  }
  // named_tokens: {name: id}, ids unique in [0, id_limit), names valid non-empty UTF-8.
  Result<std::map<std::string, int64_t>> NamedTokens(int64_t id_limit) const {
    auto it = j_.find("named_tokens");
    if (it == j_.end()) return Error("named_tokens", "is missing");
    if (!it->is_object()) return Error("named_tokens", "is not an object");
    if (static_cast<int64_t>(it->size()) > id_limit) {
      return Error("named_tokens", "has " + std::to_string(it->size()) + " entries, more than " +
                                       std::to_string(id_limit) + " ids");
    }
    std::map<std::string, int64_t> out;
    std::map<int64_t, std::string> by_id;
    for (auto e = it->begin(); e != it->end(); ++e) {
      const std::string field = "named_tokens." + e.key();
      if (e.key().empty() || e.key().size() > kMaxNameBytes) {
        return Error(field, "has a name of " + std::to_string(e.key().size()) + " bytes (1.." +
                                std::to_string(kMaxNameBytes) + ")");
      }
      GRIDFEED_RETURN_IF_ERROR(ValidateUtf8(e.key(), path_ + ": name in '" + field + "'"));
      if (!e->is_number_integer()) return Error(field, "is not an integer: " + e->dump());
      const int64_t id =
          e->is_number_unsigned() && e->get<uint64_t>() > INT64_MAX ? -1 : e->get<int64_t>();
      if (id < 0 || id >= id_limit) {
        return Error(field, "is " + e->dump() + ", outside [0, " + std::to_string(id_limit) + ")");
      }
      auto [pos, fresh] = by_id.emplace(id, e.key());
      if (!fresh)
        return Error(field, "repeats id " + std::to_string(id) + " of '" + pos->second + "'");
      out.emplace(e.key(), id);
    }
    return out;
  }

 private:
  const json& j_;
  const std::string& path_;
};

// bos/eos/unk/sep/pad/cls/mask tokens, additional_special_tokens and options, as the special
// list; every named token joins it (the gf contracts make all of them special).
Status FillSpecials(const JsonFields& f, const json& j, const std::map<std::string, int64_t>& named,
                    const TextTokenizerOptions& options, const std::string& path, bool eos_required,
                    std::vector<NamedToken>* special,
                    std::array<std::optional<int64_t>, 4>* bos_eos_unk_pad) {
  std::vector<std::string> seen;
  auto add = [&](const std::string& name, int64_t id) {
    if (std::find(seen.begin(), seen.end(), name) != seen.end()) return;
    seen.push_back(name);
    special->push_back({name, id});
  };
  const char* attrs[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                         "pad_token", "cls_token", "mask_token"};
  for (const char* attr : attrs) {
    GRIDFEED_ASSIGN_OR_RETURN(std::optional<std::string> name, f.OptString(attr));
    if (!name) {
      if (eos_required && std::string_view(attr) == "eos_token") {
        return f.Error(attr, "is missing (this kind needs an end-of-document token)");
      }
      continue;
    }
    auto it = named.find(*name);
    if (it == named.end()) return f.Error(attr, "names '" + *name + "', not in named_tokens");
    add(*name, it->second);
    const std::string_view a(attr);
    if (a == "bos_token") (*bos_eos_unk_pad)[0] = it->second;
    if (a == "eos_token") (*bos_eos_unk_pad)[1] = it->second;
    if (a == "unk_token") (*bos_eos_unk_pad)[2] = it->second;
    if (a == "pad_token") (*bos_eos_unk_pad)[3] = it->second;
  }
  if (auto it = j.find("additional_special_tokens"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) return f.Error("additional_special_tokens", "is not a list");
    for (const auto& e : *it) {
      if (!e.is_string()) return f.Error("additional_special_tokens", "holds " + e.dump());
      auto n = named.find(e.get<std::string>());
      if (n == named.end()) {
        return f.Error("additional_special_tokens",
                       "names '" + e.get<std::string>() + "', not in named_tokens");
      }
      add(n->first, n->second);
    }
  }
  for (const auto& name : options.special_tokens) {
    auto n = named.find(name);
    if (n == named.end()) {
      return InvalidArgument("--special-tokens: '" + name + "' is not a named token of " + path +
                             " (this kind cannot add tokens)");
    }
    add(n->first, n->second);
  }
  std::vector<NamedToken> rest;
  for (const auto& [name, id] : named) {
    if (std::find(seen.begin(), seen.end(), name) == seen.end()) rest.push_back({name, id});
  }
  std::sort(rest.begin(), rest.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  special->insert(special->end(), rest.begin(), rest.end());
  return Status::Ok();
}

// ---- gf-chat-bytes-v1 ----

class ChatBytes final : public TextTokenizer {
 public:
  static constexpr int64_t kVocab = 512;
  static constexpr int64_t kByteBase = 256;

  Status Load(const json& j, const std::string& path, const TextTokenizerOptions& options) {
    path_ = path;
    JsonFields f(j, path_);
    GRIDFEED_ASSIGN_OR_RETURN(vocab_size_, f.Int("vocab_size", 1, kMaxVocab));
    if (vocab_size_ != kVocab) {
      return f.Error("vocab_size", "is " + std::to_string(vocab_size_) +
                                       "; gf-chat-bytes-v1 has 256 named ids and 256 bytes = 512");
    }
    GRIDFEED_ASSIGN_OR_RETURN(named_, f.NamedTokens(kByteBase));
    std::array<std::optional<int64_t>, 4> ids;
    GRIDFEED_RETURN_IF_ERROR(
        FillSpecials(f, j, named_, options, path_, /*eos_required=*/false, &special_, &ids));
    std::tie(bos_, eos_, unk_, pad_) = std::tie(ids[0], ids[1], ids[2], ids[3]);
    GRIDFEED_ASSIGN_OR_RETURN(chat_template_, f.OptString("chat_template"));
    for (const auto& [name, id] : named_) {
      by_first_byte_[static_cast<unsigned char>(name[0])].push_back({name, id});
      name_of_[id] = name;
    }
    // Longest name first: the contract emits the longest name starting at a position.
    for (auto& v : by_first_byte_) {
      std::sort(v.begin(), v.end(),
                [](const auto& a, const auto& b) { return a.name.size() > b.name.size(); });
    }
    IndexSpecials();
    return Status::Ok();
  }

  std::string_view kind() const override { return "gf-chat-bytes-v1"; }
  Result<std::vector<int64_t>> Encode(std::string_view text) const override {
    // Names are valid UTF-8, so on valid text a byte-level scan only matches them at
    // character starts: the same as the contract's character scan.
    GRIDFEED_RETURN_IF_ERROR(ValidateUtf8(text, "text"));
    std::vector<int64_t> out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
      const unsigned char c = static_cast<unsigned char>(text[i]);
      bool matched = false;
      for (const auto& t : by_first_byte_[c]) {
        if (text.compare(i, t.name.size(), t.name) == 0) {
          out.push_back(t.id);
          i += t.name.size();
          matched = true;
          break;
        }
      }
      if (!matched) {
        out.push_back(kByteBase + c);
        ++i;
      }
    }
    return out;
  }
  Result<std::string> Decode(std::span<const int64_t> ids) const override {
    std::string out;
    out.reserve(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      GRIDFEED_RETURN_IF_ERROR(IdInRange(ids[i], vocab_size_, i, path_));
      if (ids[i] >= kByteBase) {
        out.push_back(static_cast<char>(ids[i] - kByteBase));
      } else if (name_of_[ids[i]].empty()) {
        return InvalidArgument("token id " + std::to_string(ids[i]) + " at position " +
                               std::to_string(i) + " has no name in " + path_);
      }  // else a named (special) token: dropped
    }
    GRIDFEED_RETURN_IF_ERROR(ValidateUtf8(out, "decoded text"));
    return out;
  }
  std::optional<int64_t> TokenId(std::string_view token) const override {
    auto it = named_.find(std::string(token));
    if (it == named_.end()) return std::nullopt;
    return it->second;
  }

 private:
  std::map<std::string, int64_t> named_;
  std::array<std::vector<NamedToken>, 256> by_first_byte_;
  std::array<std::string, kByteBase> name_of_;
};

// ---- gf-charvocab-v1 ----

class CharVocab final : public TextTokenizer {
 public:
  Status Load(const json& j, const std::string& path, const TextTokenizerOptions& options) {
    path_ = path;
    JsonFields f(j, path_);
    GRIDFEED_ASSIGN_OR_RETURN(vocab_size_, f.Int("vocab_size", 1, kMaxVocab));
    GRIDFEED_ASSIGN_OR_RETURN(alphabet_, f.Int("alphabet_size", 1, kMaxAlphabet));
    GRIDFEED_ASSIGN_OR_RETURN(named_, f.NamedTokens(vocab_size_));
    std::array<std::optional<int64_t>, 4> ids;
    GRIDFEED_RETURN_IF_ERROR(
        FillSpecials(f, j, named_, options, path_, /*eos_required=*/true, &special_, &ids));
    std::tie(bos_, eos_, unk_, pad_) = std::tie(ids[0], ids[1], ids[2], ids[3]);
    GRIDFEED_ASSIGN_OR_RETURN(call_adds_bos_, f.Bool("call_adds_bos", false));
    if (call_adds_bos_ && !bos_) return f.Error("call_adds_bos", "is true but bos_token is null");
    GRIDFEED_ASSIGN_OR_RETURN(chat_template_, f.OptString("chat_template"));
    for (const auto& [name, id] : named_) named_sorted_.push_back(id);
    std::sort(named_sorted_.begin(), named_sorted_.end());
    for (size_t k = 0; k < named_sorted_.size(); ++k) {
      named_shifted_.push_back(named_sorted_[k] - static_cast<int64_t>(k));
    }
    plain_ = vocab_size_ - static_cast<int64_t>(named_sorted_.size());
    // Pair ranks A + a*A + b need a, b < A: a vocabulary beyond that has tokens of no spelling.
    if (plain_ > alphabet_ && plain_ - alphabet_ > alphabet_ * alphabet_) {
      return f.Error("vocab_size", "leaves " + std::to_string(plain_) +
                                       " plain ids, more than alphabet_size + alphabet_size^2");
    }
    IndexSpecials();
    return Status::Ok();
  }

  std::string_view kind() const override { return "gf-charvocab-v1"; }
  Result<std::vector<int64_t>> Encode(std::string_view text) const override {
    GRIDFEED_ASSIGN_OR_RETURN(std::vector<char32_t> cps, DecodeUtf8(text));
    std::vector<int64_t> out;
    out.reserve(cps.size() + 1);
    if (call_adds_bos_) out.push_back(*bos_);
    const int64_t singles = std::min(alphabet_, plain_);
    for (size_t i = 0; i < cps.size();) {
      const int64_t a = Index(cps[i]);
      if (a < 0 || a >= singles) {
        return InvalidArgument("character U+" + Hex(cps[i], 4) + " at code point " +
                               std::to_string(i) + " has no token in " + path_);
      }
      if (i + 1 < cps.size()) {
        const int64_t b = Index(cps[i + 1]);
        if (b >= 0 && b < alphabet_ && alphabet_ + a * alphabet_ + b < plain_) {
          out.push_back(IdOfRank(alphabet_ + a * alphabet_ + b));
          i += 2;
          continue;
        }
      }
      out.push_back(IdOfRank(a));
      ++i;
    }
    return out;
  }
  Result<std::string> Decode(std::span<const int64_t> ids) const override {
    std::string out;
    out.reserve(ids.size() * 2);
    char32_t cps[2];
    for (size_t i = 0; i < ids.size(); ++i) {
      GRIDFEED_RETURN_IF_ERROR(IdInRange(ids[i], vocab_size_, i, path_));
      const int64_t r = RankOf(ids[i]);
      if (r < 0) continue;  // named tokens are special: dropped
      if (r < alphabet_) {
        cps[0] = Ch(r);
        AppendUtf8({cps, 1}, &out);
      } else {
        cps[0] = Ch((r - alphabet_) / alphabet_);
        cps[1] = Ch((r - alphabet_) % alphabet_);
        AppendUtf8({cps, 2}, &out);
      }
    }
    return out;
  }
  std::optional<int64_t> TokenId(std::string_view token) const override {
    if (auto it = named_.find(std::string(token)); it != named_.end()) return it->second;
    auto cps = DecodeUtf8(token);
    if (!cps.ok() || cps->empty() || cps->size() > 2) return std::nullopt;
    const int64_t a = Index((*cps)[0]);
    if (a < 0 || a >= alphabet_) return std::nullopt;
    int64_t r = a;
    if (cps->size() == 2) {
      const int64_t b = Index((*cps)[1]);
      if (b < 0 || b >= alphabet_) return std::nullopt;
      r = alphabet_ + a * alphabet_ + b;
    }
    if (r >= plain_) return std::nullopt;
    return IdOfRank(r);
  }

 private:
  static char32_t Ch(int64_t a) {
    const int64_t c = 0x100 + a;
    return static_cast<char32_t>(c >= 0xD800 ? c + 0x800 : c);
  }
  // Inverse of Ch: the alphabet index of code point c, -1 if c is no ch(a).
  static int64_t Index(char32_t c) {
    if (c < 0x100 || (c >= 0xD800 && c < 0xE000)) return -1;
    return c >= 0xE000 ? static_cast<int64_t>(c) - 0x100 - 0x800 : static_cast<int64_t>(c) - 0x100;
  }
  // The plain id of rank r (r < plain_): r plus the named ids at or below it, which are the
  // k with named_sorted_[k] - k <= r (non-decreasing in k, so a binary search).
  int64_t IdOfRank(int64_t r) const {
    return r + (std::upper_bound(named_shifted_.begin(), named_shifted_.end(), r) -
                named_shifted_.begin());
  }
  // The rank of plain id `id`, -1 if it is named.
  int64_t RankOf(int64_t id) const {
    auto it = std::lower_bound(named_sorted_.begin(), named_sorted_.end(), id);
    if (it != named_sorted_.end() && *it == id) return -1;
    return id - (it - named_sorted_.begin());
  }

  int64_t alphabet_ = 0;
  int64_t plain_ = 0;
  bool call_adds_bos_ = false;
  std::map<std::string, int64_t> named_;
  std::vector<int64_t> named_sorted_;
  std::vector<int64_t> named_shifted_;  // named_sorted_[k] - k
};

}  // namespace

bool TextTokenizer::IsSpecial(int64_t id) const {
  return std::binary_search(special_ids_sorted_.begin(), special_ids_sorted_.end(), id);
}

void TextTokenizer::IndexSpecials() {
  special_ids_sorted_.clear();
  for (const auto& t : special_) special_ids_sorted_.push_back(t.id);
  std::sort(special_ids_sorted_.begin(), special_ids_sorted_.end());
}

Result<std::vector<char32_t>> DecodeUtf8(std::string_view text) {
  std::vector<char32_t> out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    char32_t cp;
    const size_t n = DecodeOne(text, i, &cp);
    if (n == 0) return InvalidUtf8(text, i, "text");
    out.push_back(cp);
    i += n;
  }
  return out;
}

void AppendUtf8(std::span<const char32_t> code_points, std::string* out) {
  for (char32_t c : code_points) hf::AppendUtf8(c, out);
}

Result<std::unique_ptr<TextTokenizer>> ParseGfTokenizerJson(std::string_view text,
                                                            const std::string& path,
                                                            const TextTokenizerOptions& options) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    const bool blank = text.find_first_not_of(" \t\r\n") == std::string_view::npos;
    return InvalidArgument(path + (blank ? ": holds no JSON (blank)" : ": not valid JSON"));
  }
  if (!j.is_object()) return InvalidArgument(path + ": not a JSON object");
  auto kind = j.find("kind");
  if (kind == j.end() || !kind->is_string()) {
    return InvalidArgument(path + ": field 'kind' is missing or not a string");
  }
  const std::string k = kind->get<std::string>();
  if (k == "gf-chat-bytes-v1") {
    auto t = std::make_unique<ChatBytes>();
    GRIDFEED_RETURN_IF_ERROR(t->Load(j, path, options));
    return std::unique_ptr<TextTokenizer>(std::move(t));
  }
  if (k == "gf-charvocab-v1") {
    auto t = std::make_unique<CharVocab>();
    GRIDFEED_RETURN_IF_ERROR(t->Load(j, path, options));
    return std::unique_ptr<TextTokenizer>(std::move(t));
  }
  return InvalidArgument(path + ": field 'kind' is '" + k +
                         "'; known kinds: gf-chat-bytes-v1, gf-charvocab-v1");
}

Result<std::unique_ptr<TextTokenizer>> LoadSentencePieceTokenizer(
    const std::string& model_path, const TextTokenizerOptions& options) {
  if (!std::filesystem::exists(model_path)) {
    return NotFound("no such tokenizer model: '" + model_path + "'");
  }
  auto sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
  auto st = sp->Load(model_path);
  if (!st.ok()) {
    return InvalidArgument("cannot load SentencePiece model '" + model_path +
                           "': " + st.ToString());
  }
  auto t = std::make_unique<SentencePieceText>(std::move(sp), model_path);
  GRIDFEED_RETURN_IF_ERROR(t->AddSpecials(options));
  return std::unique_ptr<TextTokenizer>(std::move(t));
}

Result<std::unique_ptr<TextTokenizer>> LoadTextTokenizer(const std::string& path,
                                                         const TextTokenizerOptions& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string file = path;
  if (fs::is_directory(path, ec)) {
    file = (fs::path(path) / "gf_tokenizer.json").string();
    if (!fs::exists(file, ec)) {
      // A Hugging Face folder (Megatron's HuggingFaceTokenizer).
      if (fs::exists(fs::path(path) / "tokenizer.json", ec)) {
        return hf::LoadHuggingFaceTokenizer(path, options);
      }
      return NotFound("tokenizer folder '" + path +
                      "' holds neither a tokenizer.json nor a gf_tokenizer.json");
    }
  } else if (!fs::exists(path, ec)) {
    return NotFound("no such tokenizer model: '" + path + "'");
  } else if (fs::path(path).filename() == "tokenizer.json") {
    return hf::LoadHuggingFaceTokenizer(path, options);
  }
  const uint64_t size = fs::file_size(file, ec);
  if (ec) return NotFound("cannot read tokenizer '" + file + "': " + ec.message());
  // Peek at the start: JSON begins with '{', a SentencePiece model (protobuf) never does.
  GRIDFEED_ASSIGN_OR_RETURN(int fd, io::OpenRegularFile(file, "tokenizer"));
  char head[64];
  const ssize_t n = ::read(fd, head, sizeof head);
  ::close(fd);
  if (n < 0) return IoError("cannot read tokenizer '" + file + "'");
  const size_t got = static_cast<size_t>(n);
  const std::string_view h(head, got);
  const size_t first = h.find_first_not_of(" \t\r\n");
  // A file named *.json (gf_tokenizer.json) is JSON whatever it holds: its errors say so.
  const bool json_name = file.size() >= 5 && file.compare(file.size() - 5, 5, ".json") == 0;
  if (size == 0) {
    return InvalidArgument("tokenizer '" + file + "' is empty" +
                           (json_name
                                ? ": a gf_tokenizer.json holds a JSON object"
                                : " (neither a gf_tokenizer.json nor a SentencePiece model)"));
  }
  if (!json_name && (first == std::string_view::npos || h[first] != '{')) {
    return LoadSentencePieceTokenizer(file, options);
  }
  if (size > kMaxJsonBytes) {
    return InvalidArgument(file + ": " + std::to_string(size) + " bytes, more than a " +
                           "gf_tokenizer.json may have (" + std::to_string(kMaxJsonBytes) + ")");
  }
  GRIDFEED_ASSIGN_OR_RETURN(std::string text, io::ReadFileToString(file));
  return ParseGfTokenizerJson(text, file, options);
}

}  // namespace gridfeed::text
