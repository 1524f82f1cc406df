// UTF-8 helpers for the Hugging Face pipeline's components, with Rust's `str`/`String`
// semantics where the library relies on them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace gridfeed::text::hf {

// Length in bytes of the UTF-8 character starting at s[i] of valid UTF-8 `s` (1 for a
// stray byte, so that a walk always advances).
size_t Utf8CharLen(std::string_view s, size_t i);

// The code point starting at s[i] of valid UTF-8 `s`; `*len` receives its length in bytes.
char32_t Utf8Decode(std::string_view s, size_t i, size_t* len);

// Appends the UTF-8 encoding of `cp`.
void AppendUtf8(char32_t cp, std::string* out);

// Number of characters (code points) of valid UTF-8 `s`.
size_t Utf8Length(std::string_view s);

// Length of the longest valid UTF-8 prefix of `bytes` that ends on a character boundary, i.e.
// whether `bytes` is valid UTF-8 when it equals bytes.size().
size_t Utf8ValidPrefix(std::string_view bytes);

// Rust's `String::from_utf8_lossy`: each maximal invalid subpart (the bytes of a sequence that
// starts validly but breaks off, or one stray byte) becomes one U+FFFD.
std::string Utf8Lossy(std::string_view bytes);

// Rust's `str::replace`: every non-overlapping occurrence of `from`, left to right, becomes
// `to`; an empty `from` matches at every character boundary, start and end included.
std::string ReplaceAll(std::string_view s, std::string_view from, std::string_view to);

}  // namespace gridfeed::text::hf
