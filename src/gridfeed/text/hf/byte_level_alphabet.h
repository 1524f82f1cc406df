// GPT-2's byte-level alphabet (`bytes_to_unicode` of openai/gpt-2 encoder.py, the `tokenizers`
// library's `bytes_char`): each of the 256 byte values stands for one printable Unicode
// character, so any byte string becomes a printable string and back.
//
//   bytes '!'..'~', 0xA1..0xAC, 0xAE..0xFF  -> the code point of the same value;
//   the other 68 bytes (0x00..0x20, 0x7F..0xA0, 0xAD), in increasing order -> U+0100, U+0101, ...
//                                                                               up to U+0143.
// So ' ' (0x20) is U+0120 'Ġ' and '\n' (0x0A) is U+010A 'Ċ'.
//
// Used by the ByteLevel pre-tokenizer (bytes -> alphabet) and the ByteLevel decoder (alphabet ->
// bytes). Pure functions over constant tables; thread safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gridfeed::text::hf {

// The code point byte `b` maps to.
char32_t ByteLevelCodepoint(uint8_t b);

// The UTF-8 encoding of ByteLevelCodepoint(b) (1 or 2 bytes; a view of a static table).
std::string_view ByteLevelUtf8(uint8_t b);

// The byte whose alphabet character is `c`; nullopt when `c` is not in the alphabet.
std::optional<uint8_t> ByteLevelByte(char32_t c);

// Appends the alphabet spelling of every byte of `bytes` to `out`.
void AppendByteLevel(std::string_view bytes, std::string* out);

// Decodes an alphabet spelling (valid UTF-8) back to bytes, appended to `out`. Returns false,
// appending nothing, when some character is not in the alphabet (the library's decoder then
// keeps that token's text unchanged).
bool DecodeByteLevel(std::string_view alphabet_text, std::string* out);

}  // namespace gridfeed::text::hf
