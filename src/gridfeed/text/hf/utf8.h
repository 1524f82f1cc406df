// The text module's one home for UTF-8 helpers (the Hugging Face pipeline's components, the
// GPT-2, TikToken and Null tokenizers, and text_tokenizer.h's DecodeUtf8/AppendUtf8), with Rust's
// `str`/`String` semantics where the library relies on them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "gridfeed/core/status.h"

namespace gridfeed::text::hf {

// Length in bytes of the UTF-8 character starting at s[i] of valid UTF-8 `s` (1 for a
// stray byte, so that a walk always advances).
inline size_t Utf8CharLen(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  const size_t n = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
  return i + n <= s.size() ? n : 1;
}

// The code point starting at s[i] of valid UTF-8 `s`; `*len` receives its length in bytes.
// Inline: the pre-tokenizers' and normalizers' per-character walks call it.
inline char32_t Utf8Decode(std::string_view s, size_t i, size_t* len) {
  const size_t n = Utf8CharLen(s, i);
  *len = n;
  const auto c = static_cast<unsigned char>(s[i]);
  if (n == 1) return c;
  char32_t cp = c & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return cp;
}

// Appends the UTF-8 encoding of `cp`. Inline: normalizers and FIM append per character.
inline void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Number of characters (code points) of valid UTF-8 `s`.
size_t Utf8Length(std::string_view s);

// Length of the longest valid UTF-8 prefix of `bytes` that ends on a character boundary, i.e.
// whether `bytes` is valid UTF-8 when it equals bytes.size().
size_t Utf8ValidPrefix(std::string_view bytes);

// Rust's `String::from_utf8_lossy`: each maximal invalid subpart (the bytes of a sequence that
// starts validly but breaks off, or one stray byte) becomes one U+FFFD.
std::string Utf8Lossy(std::string_view bytes);

// Ok when `text` is valid UTF-8 (no overlong forms, surrogates or code points past U+10FFFF);
// else InvalidArgument "text is not valid UTF-8 at byte N". Texts of 2^31 bytes or more are
// refused as too long. The tokenizers' Encode checks its input with it.
Status CheckUtf8(std::string_view text);

// Rust's `str::replace`: every non-overlapping occurrence of `from`, left to right, becomes
// `to`; an empty `from` matches at every character boundary, start and end included.
std::string ReplaceAll(std::string_view s, std::string_view from, std::string_view to);

}  // namespace gridfeed::text::hf
