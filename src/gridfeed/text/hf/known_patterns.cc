#include "gridfeed/text/hf/known_patterns.h"

#include <oniguruma.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "gridfeed/text/hf/onig_library.h"
#include "gridfeed/text/hf/utf8.h"

namespace gridfeed::text::hf {
namespace {

constexpr std::string_view kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kCl100k =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr char kContractionLetters[] = "strevmld";
constexpr char32_t kCodePoints = 0x110000;

// Class bits (low 3) and the contraction letter's index + 1 (high bits) of every code point, in
// 256-code-point blocks, identical blocks shared.
struct ClassTable {
  std::array<uint16_t, kCodePoints / 256> block_of{};
  std::vector<std::array<uint8_t, 256>> blocks;

  uint8_t At(char32_t c) const { return c < kCodePoints ? blocks[block_of[c >> 8]][c & 255] : 0; }
};

void MarkRanges(OnigEncoding enc, int ctype, uint8_t bit, std::vector<uint8_t>* flat) {
  for (char32_t c = 0; c < 0x80; ++c) {
    if (ONIGENC_IS_CODE_CTYPE(enc, c, ctype)) (*flat)[c] |= bit;
  }
  OnigCodePoint sb_out = 0;
  const OnigCodePoint* ranges = nullptr;
  if (ONIGENC_GET_CTYPE_CODE_RANGE(enc, ctype, &sb_out, &ranges) == 0 && ranges != nullptr) {
    for (int i = 0; i < ONIGENC_CODE_RANGE_NUM(ranges); ++i) {
      const OnigCodePoint from = ONIGENC_CODE_RANGE_FROM(ranges, i);
      const OnigCodePoint to = ONIGENC_CODE_RANGE_TO(ranges, i);
      for (OnigCodePoint c = std::max<OnigCodePoint>(from, 0x80); c <= to && c < kCodePoints; ++c) {
        (*flat)[c] |= bit;
      }
    }
    return;
  }
  for (char32_t c = 0x80; c < kCodePoints; ++c) {  // no range table: ask per code point
    if (ONIGENC_IS_CODE_CTYPE(enc, c, ctype)) (*flat)[c] |= bit;
  }
}

std::unique_ptr<ClassTable> BuildClassTable() {
  // Oniguruma's Unicode tables are ready once it is initialized; loading it does that.
  const OnigLibrary& onig = *LoadOnigLibrary().value();
  OnigEncoding enc = onig.encoding_utf8;
  std::vector<uint8_t> flat(kCodePoints, 0);
  const auto ctype = [&](std::string_view name) {
    auto* p = reinterpret_cast<OnigUChar*>(const_cast<char*>(name.data()));
    return ONIGENC_PROPERTY_NAME_TO_CTYPE(enc, p, p + name.size());
  };
  MarkRanges(enc, ONIGENC_CTYPE_SPACE, kOnigSpace, &flat);
  MarkRanges(enc, ctype("L"), kOnigLetter, &flat);
  MarkRanges(enc, ctype("N"), kOnigNumber, &flat);
  // Each contraction letter and what Oniguruma folds together with it (as (?i:...) matches).
  for (int k = 0; kContractionLetters[k] != 0; ++k) {
    const uint8_t tag = static_cast<uint8_t>((k + 1) << 3);
    const auto* s = reinterpret_cast<const OnigUChar*>(&kContractionLetters[k]);
    flat[kContractionLetters[k]] |= tag;
    OnigCaseFoldCodeItem items[ONIGENC_GET_CASE_FOLD_CODES_MAX_NUM];
    const int n =
        ONIGENC_GET_CASE_FOLD_CODES_BY_STR(enc, *onig.default_case_fold_flag, s, s + 1, items);
    for (int i = 0; i < n; ++i) {
      if (items[i].byte_len == 1 && items[i].code_len == 1 && items[i].code[0] < kCodePoints) {
        flat[items[i].code[0]] |= tag;
      }
    }
  }
  for (char32_t c = 0xD800; c < 0xE000; ++c) flat[c] = 0;  // surrogates never occur in UTF-8
  auto t = std::make_unique<ClassTable>();
  std::map<std::array<uint8_t, 256>, uint16_t> ids;
  for (size_t b = 0; b < t->block_of.size(); ++b) {
    std::array<uint8_t, 256> block;
    std::copy(flat.begin() + b * 256, flat.begin() + (b + 1) * 256, block.begin());
    auto [it, added] = ids.emplace(block, static_cast<uint16_t>(t->blocks.size()));
    if (added) t->blocks.push_back(block);
    t->block_of[b] = it->second;
  }
  return t;
}

const ClassTable& Classes() {
  static const std::unique_ptr<ClassTable> table = BuildClassTable();
  return *table;
}

// A text walker: the code point and byte length at a position, and the class of it.
class Text {
 public:
  Text(std::string_view s, const ClassTable& t) : s_(s), t_(t) {}
  size_t size() const { return s_.size(); }
  // The code point at byte i (< size()), its length in *len.
  char32_t At(size_t i, size_t* len) const { return Utf8Decode(s_, i, len); }
  uint8_t Class(char32_t c) const { return t_.At(c); }
  // Class bits at byte i, and its length; 0 past the end (no class: every test fails there).
  uint8_t ClassAt(size_t i, size_t* len) const {
    if (i >= s_.size()) {
      *len = 0;
      return 0;
    }
    return t_.At(At(i, len));
  }
  // End of the run of characters from i whose class has any of `bits`.
  size_t RunEnd(size_t i, uint8_t bits) const {
    size_t len;
    while (i < s_.size() && (ClassAt(i, &len) & bits) != 0) i += len;
    return i;
  }
  // End of the run from i of characters that are none of \s, \p{L}, \p{N}.
  size_t OtherRunEnd(size_t i) const {
    size_t len;
    while (i < s_.size() && (ClassAt(i, &len) & kAnyClass) == 0) i += len;
    return i;
  }
  size_t CrLfRunEnd(size_t i) const {
    while (i < s_.size() && (s_[i] == '\r' || s_[i] == '\n')) ++i;
    return i;
  }
  char byte(size_t i) const { return i < s_.size() ? s_[i] : '\0'; }
  // The contraction letter c folds to in Oniguruma ((?i)), or 0.
  char Folded(size_t i, size_t* len) const {
    if (i >= s_.size()) {
      *len = 0;
      return 0;
    }
    const uint8_t tag = t_.At(At(i, len)) >> 3;
    return tag ? kContractionLetters[tag - 1] : 0;
  }
  static constexpr uint8_t kAnyClass = kOnigSpace | kOnigLetter | kOnigNumber;

 private:
  std::string_view s_;
  const ClassTable& t_;
};

// \s+(?!\S)|\s+ from i (a \s character): the run, less its last character when a non-space
// follows and the run has more than one.
size_t SpaceRunMatch(const Text& t, size_t i) {
  size_t j = i, last = i, len;
  while (j < t.size() && (t.ClassAt(j, &len) & kOnigSpace) != 0) {
    last = j;
    j += len;
  }
  if (j == t.size() || last == i) return j;
  return last;
}

// GPT-2's alternatives at i, the first that matches (one always does).
size_t Gpt2MatchEnd(const Text& t, size_t i) {
  size_t len0, len1;
  if (t.byte(i) == '\'') {
    const char a = t.byte(i + 1), b = t.byte(i + 2);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    if ((a == 'r' || a == 'v') && b == 'e') return i + 3;
    if (a == 'l' && b == 'l') return i + 3;
  }
  const uint8_t c0 = t.ClassAt(i, &len0);
  if (t.byte(i) == ' ') {
    const uint8_t c1 = t.ClassAt(i + 1, &len1);
    if (len1 != 0) {
      if (c1 & kOnigLetter) return t.RunEnd(i + 1, kOnigLetter);
      if (c1 & kOnigNumber) return t.RunEnd(i + 1, kOnigNumber);
      if ((c1 & Text::kAnyClass) == 0) return t.OtherRunEnd(i + 1);
    }
  }
  if (c0 & kOnigLetter) return t.RunEnd(i, kOnigLetter);
  if (c0 & kOnigNumber) return t.RunEnd(i, kOnigNumber);
  if ((c0 & Text::kAnyClass) == 0) return t.OtherRunEnd(i);
  return SpaceRunMatch(t, i);
}

// cl100k's (and Qwen2's, max_digits 1) alternatives at i, the first that matches.
size_t Cl100kMatchEnd(const Text& t, size_t i, int max_digits) {
  size_t len0, len1, len2;
  if (t.byte(i) == '\'') {
    const char a = t.Folded(i + 1, &len1);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 1 + len1;
    if (a == 'r' || a == 'v' || a == 'l') {
      const char b = t.Folded(i + 1 + len1, &len2);
      if ((a == 'l' && b == 'l') || (a != 'l' && b == 'e')) return i + 1 + len1 + len2;
    }
  }
  const char32_t cp0 = t.At(i, &len0);
  const uint8_t c0 = t.Class(cp0);
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (c0 & kOnigLetter) return t.RunEnd(i, kOnigLetter);
  if (cp0 != '\r' && cp0 != '\n' && (c0 & kOnigNumber) == 0 &&
      (t.ClassAt(i + len0, &len1) & kOnigLetter) != 0) {
    return t.RunEnd(i + len0, kOnigLetter);
  }
  // \p{N}{1,3}
  if (c0 & kOnigNumber) {
    size_t j = i + len0;
    for (int k = 1; k < max_digits && (t.ClassAt(j, &len1) & kOnigNumber) != 0; ++k) j += len1;
    return j;
  }
  //  ?[^\s\p{L}\p{N}]+[\r\n]*
  if (cp0 == ' ') {
    if (i + 1 < t.size() && (t.ClassAt(i + 1, &len1) & Text::kAnyClass) == 0) {
      return t.CrLfRunEnd(t.OtherRunEnd(i + 1));
    }
  } else if ((c0 & Text::kAnyClass) == 0) {
    return t.CrLfRunEnd(t.OtherRunEnd(i));
  }
  // \s*[\r\n]+: the space run up to its last \r or \n.
  size_t j = i, last_crlf = SIZE_MAX, len;
  while (j < t.size() && (t.ClassAt(j, &len) & kOnigSpace) != 0) {
    if (t.byte(j) == '\r' || t.byte(j) == '\n') last_crlf = j;
    j += len;
  }
  if (last_crlf != SIZE_MAX) return last_crlf + 1;
  return SpaceRunMatch(t, i);
}

}  // namespace

KnownPattern IdentifyKnownPattern(std::string_view pattern) {
  if (pattern == kGpt2) return KnownPattern::kGpt2;
  if (pattern == kCl100k) return KnownPattern::kCl100k;
  if (pattern == kQwen2) return KnownPattern::kQwen2;
  return KnownPattern::kNone;
}

void KnownFindMatches(KnownPattern p, std::string_view text, std::vector<Span>* out) {
  out->clear();
  if (text.empty()) {
    out->push_back({0, 0, false});
    return;
  }
  const Text t(text, Classes());
  for (size_t i = 0; i < text.size();) {
    size_t end;
    switch (p) {
      case KnownPattern::kGpt2:
        end = Gpt2MatchEnd(t, i);
        break;
      case KnownPattern::kCl100k:
        end = Cl100kMatchEnd(t, i, 3);
        break;
      default:
        end = Cl100kMatchEnd(t, i, 1);
        break;
    }
    out->push_back({i, end, true});
    i = end;
  }
}

unsigned char OnigClassOf(char32_t c) { return Classes().At(c) & Text::kAnyClass; }

char OnigFoldedContractionLetter(char32_t c) {
  const uint8_t tag = Classes().At(c) >> 3;
  return tag ? kContractionLetters[tag - 1] : 0;
}

}  // namespace gridfeed::text::hf
