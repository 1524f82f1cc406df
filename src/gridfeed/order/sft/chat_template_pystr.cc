// Python string semantics on UTF-8 for the chat-template renderer (internal contract:
// chat_template_ast.h): whitespace, strip, replace, split, splitlines, and the full Unicode case
// mappings and character classes of CPython's str methods, taken from ICU (the Unicode versions
// of ICU and of the reference Python may differ on characters assigned recently). PyStrip
// (conversation.h), defined in chat_template.cc, is PyStripImpl on whitespace: Python's
// whitespace set lives here, in one place.

#include <unicode/uchar.h>
#include <unicode/ustring.h>

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "gridfeed/order/sft/chat_template_ast.h"
#include "gridfeed/text/text_tokenizer.h"

namespace gridfeed::order::sft::chat_template_internal {
namespace {

size_t Utf8Len(char32_t c) { return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4; }

// ICU's full mapping of a UTF-16 buffer; `kind` 0 lower, 1 upper, 2 title, 3 fold.
std::u16string IcuMap(const std::u16string& in, int kind) {
  std::u16string out(in.size() * 3 + 8, u'\0');
  UErrorCode err = U_ZERO_ERROR;
  int32_t n = 0;
  auto run = [&]() {
    err = U_ZERO_ERROR;
    const auto* src = reinterpret_cast<const UChar*>(in.data());
    auto* dst = reinterpret_cast<UChar*>(out.data());
    const auto cap = static_cast<int32_t>(out.size());
    const auto len = static_cast<int32_t>(in.size());
    switch (kind) {
      case 0:
        n = u_strToLower(dst, cap, src, len, "", &err);
        break;
      case 1:
        n = u_strToUpper(dst, cap, src, len, "", &err);
        break;
      case 2:
        n = u_strToTitle(dst, cap, src, len, nullptr, "", &err);
        break;
      default:
        n = u_strFoldCase(dst, cap, src, len, U_FOLD_CASE_DEFAULT, &err);
    }
  };
  run();
  if (err == U_BUFFER_OVERFLOW_ERROR) {
    out.assign(static_cast<size_t>(n) + 1, u'\0');
    run();
  }
  if (U_FAILURE(err)) return in;
  out.resize(static_cast<size_t>(n));
  return out;
}

std::u16string ToU16(std::span<const char32_t> cps) {
  std::u16string out;
  for (char32_t c : cps) {
    if (c >= 0x10000) {
      out += static_cast<char16_t>(0xD800 + ((c - 0x10000) >> 10));
      out += static_cast<char16_t>(0xDC00 + ((c - 0x10000) & 0x3FF));
    } else {
      out += static_cast<char16_t>(c);
    }
  }
  return out;
}

std::vector<char32_t> FromU16(const std::u16string& s) {
  std::vector<char32_t> out;
  for (size_t k = 0; k < s.size(); ++k) {
    char32_t c = s[k];
    if (c >= 0xD800 && c < 0xDC00 && k + 1 < s.size()) {
      c = 0x10000 + ((c - 0xD800) << 10) + (s[k + 1] - 0xDC00);
      ++k;
    }
    out.push_back(c);
  }
  return out;
}

std::string MapWhole(std::string_view s, int kind) {
  if (IsAscii(s) && kind != 2) {
    std::string out(s);
    for (char& c : out) {
      if (kind == 1) {
        if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
      } else if (c >= 'A' && c <= 'Z') {
        c = static_cast<char>(c - 'A' + 'a');
      }
    }
    return out;
  }
  const std::vector<char32_t> cps = Cps(s);
  return FromCps(FromU16(IcuMap(ToU16(cps), kind)));
}

void AppendMapped(char32_t c, int kind, std::vector<char32_t>* out) {
  const std::vector<char32_t> m = FromU16(IcuMap(ToU16(std::span<const char32_t>(&c, 1)), kind));
  out->insert(out->end(), m.begin(), m.end());
}

bool CaseIgnorable(char32_t c) { return u_hasBinaryProperty(c, UCHAR_CASE_IGNORABLE); }

// CPython's lower of cps[k] inside its string: final sigma by context.
void AppendLowerAt(const std::vector<char32_t>& cps, size_t k, std::vector<char32_t>* out) {
  if (cps[k] != 0x3A3) return AppendMapped(cps[k], 0, out);
  size_t j = k;
  bool before = false;
  while (j > 0) {
    --j;
    if (CaseIgnorable(cps[j])) continue;
    before = PyIsCasedCp(cps[j]);
    break;
  }
  bool after = false;
  for (j = k + 1; j < cps.size(); ++j) {
    if (CaseIgnorable(cps[j])) continue;
    after = PyIsCasedCp(cps[j]);
    break;
  }
  out->push_back(before && !after ? 0x3C2 : 0x3C3);
}

}  // namespace

bool IsPySpace(char32_t c) {
  // str.isspace(): bidirectional class WS/B/S or category Zs (also what re's \s matches).
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

std::vector<char32_t> Cps(std::string_view s) {
  auto r = text::DecodeUtf8(s);
  return r.ok() ? std::move(r).value() : std::vector<char32_t>{};
}

std::string FromCps(std::span<const char32_t> cps) {
  std::string out;
  text::AppendUtf8(cps, &out);
  return out;
}

size_t CpCount(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

std::string PyStripImpl(std::string_view s, const std::optional<std::string>& chars, bool left,
                        bool right) {
  const std::vector<char32_t> cps = Cps(s);
  std::vector<char32_t> set;
  if (chars) set = Cps(*chars);
  auto strip = [&](char32_t c) {
    return chars ? std::find(set.begin(), set.end(), c) != set.end() : IsPySpace(c);
  };
  size_t b = 0, e = cps.size();
  if (left) {
    while (b < e && strip(cps[b])) ++b;
  }
  if (right) {
    while (e > b && strip(cps[e - 1])) --e;
  }
  size_t byte_b = 0, byte_len = 0;
  for (size_t k = 0; k < b; ++k) byte_b += Utf8Len(cps[k]);
  for (size_t k = b; k < e; ++k) byte_len += Utf8Len(cps[k]);
  return std::string(s.substr(byte_b, byte_len));
}

size_t SpaceRun(std::string_view s, size_t p) {
  const size_t start = p;
  while (p < s.size()) {
    const unsigned char b0 = static_cast<unsigned char>(s[p]);
    size_t n = b0 < 0x80 ? 1 : b0 < 0xE0 ? 2 : b0 < 0xF0 ? 3 : 4;
    if (p + n > s.size()) break;
    auto cp = text::DecodeUtf8(s.substr(p, n));
    if (!cp.ok() || cp->size() != 1 || !IsPySpace((*cp)[0])) break;
    p += n;
  }
  return p - start;
}

bool AllPySpace(std::string_view s) { return SpaceRun(s, 0) == s.size(); }

std::string PyReplace(const std::string& s, const std::string& old, const std::string& rep,
                      int64_t count) {
  std::string out;
  if (old.empty()) {
    const std::vector<char32_t> cps = Cps(s);
    int64_t done = 0;
    for (size_t k = 0; k <= cps.size(); ++k) {
      if (count < 0 || done < count) {
        out += rep;
        ++done;
      }
      if (k < cps.size()) text::AppendUtf8(std::span<const char32_t>(&cps[k], 1), &out);
    }
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t hit = s.find(old, pos);
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out += rep;
    pos = hit + old.size();
    ++done;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

bool IsAscii(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

std::string PyLower(std::string_view s) { return MapWhole(s, 0); }
std::string PyUpper(std::string_view s) { return MapWhole(s, 1); }
std::string PyCasefold(std::string_view s) { return MapWhole(s, 3); }

std::string PyTitle(std::string_view s) {
  const std::vector<char32_t> cps = Cps(s);
  std::vector<char32_t> out;
  bool prev_cased = false;
  for (size_t k = 0; k < cps.size(); ++k) {
    if (prev_cased) {
      AppendLowerAt(cps, k, &out);
    } else {
      AppendMapped(cps[k], 2, &out);
    }
    prev_cased = PyIsCasedCp(cps[k]);
  }
  return FromCps(out);
}

std::string PyCapitalize(std::string_view s) {
  const std::vector<char32_t> cps = Cps(s);
  std::vector<char32_t> out;
  for (size_t k = 0; k < cps.size(); ++k) {
    if (k == 0) {
      AppendMapped(cps[k], 2, &out);
    } else {
      AppendLowerAt(cps, k, &out);
    }
  }
  return FromCps(out);
}

std::string PySwapcase(std::string_view s) {
  const std::vector<char32_t> cps = Cps(s);
  std::vector<char32_t> out;
  for (size_t k = 0; k < cps.size(); ++k) {
    if (PyIsUpperCp(cps[k])) {
      AppendLowerAt(cps, k, &out);
    } else if (PyIsLowerCp(cps[k])) {
      AppendMapped(cps[k], 1, &out);
    } else {
      out.push_back(cps[k]);
    }
  }
  return FromCps(out);
}

bool PyIsAlphaCp(char32_t c) {
  const int8_t t = u_charType(c);
  return t == U_UPPERCASE_LETTER || t == U_LOWERCASE_LETTER || t == U_TITLECASE_LETTER ||
         t == U_MODIFIER_LETTER || t == U_OTHER_LETTER;
}
bool PyIsDecimalCp(char32_t c) {
  return u_getIntPropertyValue(c, UCHAR_NUMERIC_TYPE) == U_NT_DECIMAL;
}
bool PyIsDigitCp(char32_t c) {
  const int32_t t = u_getIntPropertyValue(c, UCHAR_NUMERIC_TYPE);
  return t == U_NT_DECIMAL || t == U_NT_DIGIT;
}
bool PyIsNumericCp(char32_t c) { return u_getIntPropertyValue(c, UCHAR_NUMERIC_TYPE) != U_NT_NONE; }
bool PyIsAlnumCp(char32_t c) { return PyIsAlphaCp(c) || PyIsNumericCp(c); }
bool PyIsCasedCp(char32_t c) { return u_hasBinaryProperty(c, UCHAR_CASED); }
bool PyIsLowerCp(char32_t c) { return u_hasBinaryProperty(c, UCHAR_LOWERCASE); }
bool PyIsUpperCp(char32_t c) { return u_hasBinaryProperty(c, UCHAR_UPPERCASE); }
bool PyIsPrintableCp(char32_t c) {
  if (c == ' ') return true;
  switch (u_charType(c)) {
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
    case U_SURROGATE:
    case U_PRIVATE_USE_CHAR:
    case U_UNASSIGNED:
    case U_LINE_SEPARATOR:
    case U_PARAGRAPH_SEPARATOR:
    case U_SPACE_SEPARATOR:
      return false;
    default:
      return true;
  }
}

std::vector<std::string> PySplit(std::string_view s, const std::optional<std::string>& sep,
                                 int64_t maxsplit, bool from_right) {
  std::vector<std::string> out;
  if (sep) {
    if (!from_right) {
      size_t pos = 0;
      while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
        const size_t hit = s.find(*sep, pos);
        if (hit == std::string_view::npos) break;
        out.emplace_back(s.substr(pos, hit - pos));
        pos = hit + sep->size();
      }
      out.emplace_back(s.substr(pos));
      return out;
    }
    size_t end = s.size();
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      if (end < sep->size()) break;
      const size_t hit = s.rfind(*sep, end - sep->size());
      if (hit == std::string_view::npos) break;
      out.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
      end = hit;
    }
    out.emplace_back(s.substr(0, end));
    std::reverse(out.begin(), out.end());
    return out;
  }
  // Whitespace runs; empty pieces dropped; the remainder after maxsplit keeps its inner spaces
  // but not its leading (split) or trailing (rsplit) ones.
  const std::vector<char32_t> cps = Cps(s);
  std::vector<std::vector<char32_t>> parts;
  if (!from_right) {
    size_t k = 0;
    while (k < cps.size()) {
      while (k < cps.size() && IsPySpace(cps[k])) ++k;
      if (k >= cps.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t e = cps.size();
        while (e > k && IsPySpace(cps[e - 1])) --e;
        parts.emplace_back(cps.begin() + static_cast<std::ptrdiff_t>(k), cps.end());
        // Python keeps trailing whitespace of the remainder when splitting from the left.
        (void)e;
        break;
      }
      size_t e = k;
      while (e < cps.size() && !IsPySpace(cps[e])) ++e;
      parts.emplace_back(cps.begin() + static_cast<std::ptrdiff_t>(k),
                         cps.begin() + static_cast<std::ptrdiff_t>(e));
      k = e;
    }
  } else {
    size_t k = cps.size();
    while (k > 0) {
      while (k > 0 && IsPySpace(cps[k - 1])) --k;
      if (k == 0) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        parts.emplace_back(cps.begin(), cps.begin() + static_cast<std::ptrdiff_t>(k));
        break;
      }
      size_t b = k;
      while (b > 0 && !IsPySpace(cps[b - 1])) --b;
      parts.emplace_back(cps.begin() + static_cast<std::ptrdiff_t>(b),
                         cps.begin() + static_cast<std::ptrdiff_t>(k));
      k = b;
    }
    std::reverse(parts.begin(), parts.end());
  }
  for (const auto& p : parts) out.push_back(FromCps(p));
  return out;
}

std::vector<std::string> PySplitLines(std::string_view s, bool keepends) {
  const std::vector<char32_t> cps = Cps(s);
  std::vector<std::string> out;
  size_t start = 0, k = 0;
  auto is_break = [](char32_t c) {
    return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D ||
           c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
  };
  while (k < cps.size()) {
    if (!is_break(cps[k])) {
      ++k;
      continue;
    }
    size_t eol = k + 1;
    if (cps[k] == '\r' && eol < cps.size() && cps[eol] == '\n') ++eol;
    const size_t end = keepends ? eol : k;
    out.push_back(FromCps(std::span<const char32_t>(cps.data() + start, end - start)));
    start = k = eol;
  }
  if (start < cps.size()) {
    out.push_back(FromCps(std::span<const char32_t>(cps.data() + start, cps.size() - start)));
  }
  return out;
}

}  // namespace gridfeed::order::sft::chat_template_internal
