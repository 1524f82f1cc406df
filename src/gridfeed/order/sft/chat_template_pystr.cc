// Python string semantics on UTF-8 for the chat-template renderer (internal contract:
// chat_template_ast.h). PyStrip (conversation.h), defined in chat_template.cc, is
// PyStripImpl on whitespace: Python's whitespace set lives here, in one place.

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "gridfeed/io/text_tokenizer.h"
#include "gridfeed/order/sft/chat_template_ast.h"

namespace gridfeed::order::sft::chat_template_internal {
namespace {

// str.isspace(): bidirectional class WS/B/S or category Zs (also what re's \s matches).
bool IsPySpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

size_t Utf8Len(char32_t c) { return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4; }

}  // namespace

// Code points of text that is valid UTF-8 by construction (validated at the boundary).
std::vector<char32_t> Cps(std::string_view s) {
  auto r = io::DecodeUtf8(s);
  return r.ok() ? std::move(r).value() : std::vector<char32_t>{};
}

std::string FromCps(std::span<const char32_t> cps) {
  std::string out;
  io::AppendUtf8(cps, &out);
  return out;
}

// str.strip/lstrip/rstrip: `chars` nullopt means whitespace.
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

// Length of the run of Python whitespace starting at byte `p` of `s`.
size_t SpaceRun(std::string_view s, size_t p) {
  const size_t start = p;
  while (p < s.size()) {
    // Decode one code point by hand: this runs on every tag end.
    const unsigned char b0 = static_cast<unsigned char>(s[p]);
    size_t n = b0 < 0x80 ? 1 : b0 < 0xE0 ? 2 : b0 < 0xF0 ? 3 : 4;
    if (p + n > s.size()) break;
    auto cp = io::DecodeUtf8(s.substr(p, n));
    if (!cp.ok() || cp->size() != 1 || !IsPySpace((*cp)[0])) break;
    p += n;
  }
  return p - start;
}

bool AllPySpace(std::string_view s) { return SpaceRun(s, 0) == s.size(); }

// str.replace(old, new, count) with Python's rule for an empty `old` (insert between every
// code point, count-limited).
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
      if (k < cps.size()) io::AppendUtf8(std::span<const char32_t>(&cps[k], 1), &out);
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

}  // namespace gridfeed::order::sft::chat_template_internal
