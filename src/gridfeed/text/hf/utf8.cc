#include "gridfeed/text/hf/utf8.h"

#include <unicode/utf8.h>

#include <cstdint>

namespace gridfeed::text::hf {
namespace {

bool IsCont(unsigned char c) { return (c & 0xC0) == 0x80; }

// Length of the valid character at bytes[i], or 0 with `*bad` = the length of the maximal
// invalid subpart there (>= 1), as Rust's UTF-8 validation delimits it.
size_t ValidCharAt(std::string_view bytes, size_t i, size_t* bad) {
  const auto at = [&](size_t k) -> int {
    return i + k < bytes.size() ? static_cast<unsigned char>(bytes[i + k]) : -1;
  };
  const int b0 = at(0);
  if (b0 < 0x80) return 1;
  size_t width = 0;
  int lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    width = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    width = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    width = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    *bad = 1;
    return 0;
  }
  const int b1 = at(1);
  if (b1 < lo || b1 > hi) {
    *bad = 1;
    return 0;
  }
  for (size_t k = 2; k < width; ++k) {
    const int b = at(k);
    if (b < 0 || !IsCont(static_cast<unsigned char>(b))) {
      *bad = k;
      return 0;
    }
  }
  return width;
}

}  // namespace

size_t Utf8Length(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); i += Utf8CharLen(s, i)) ++n;
  return n;
}

size_t Utf8ValidPrefix(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    size_t bad = 0;
    const size_t n = ValidCharAt(bytes, i, &bad);
    if (n == 0) break;
    i += n;
  }
  return i;
}

std::string Utf8Lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    size_t bad = 0;
    const size_t n = ValidCharAt(bytes, i, &bad);
    if (n > 0) {
      out.append(bytes.substr(i, n));
      i += n;
    } else {
      out.append("\xEF\xBF\xBD");
      i += bad;
    }
  }
  return out;
}

Status CheckUtf8(std::string_view text) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  if (text.size() > static_cast<size_t>(INT32_MAX)) {
    return InvalidArgument("text of " + std::to_string(text.size()) + " bytes is too long");
  }
  const int32_t n = static_cast<int32_t>(text.size());
  for (int32_t i = 0; i < n;) {
    if (s[i] < 0x80) {
      ++i;
      continue;
    }
    const int32_t at = i;
    UChar32 c;
    U8_NEXT(s, i, n, c);
    if (c < 0) return InvalidArgument("text is not valid UTF-8 at byte " + std::to_string(at));
  }
  return Status::Ok();
}

std::string ReplaceAll(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  if (from.empty()) {
    out.append(to);
    for (size_t i = 0; i < s.size();) {
      const size_t n = Utf8CharLen(s, i);
      out.append(s.substr(i, n));
      out.append(to);
      i += n;
    }
    return out;
  }
  size_t i = 0;
  while (true) {
    const size_t at = s.find(from, i);
    if (at == std::string_view::npos) break;
    out.append(s.substr(i, at - i));
    out.append(to);
    i = at + from.size();
  }
  out.append(s.substr(i));
  return out;
}

}  // namespace gridfeed::text::hf
