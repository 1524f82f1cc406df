// The text module's one base64 decoder (TikToken vocabularies' token_bytes, the Precompiled
// normalizer's precompiled_charsmap). Header-only: it is small and has no other home.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gridfeed::text {

// Decodes standard base64 (alphabet A-Z a-z 0-9 + /) with its padding: the length a multiple of
// 4, '=' only as the last one or two characters, no whitespace; anything else is nullopt. The
// bits that padding leaves over in the last group are discarded, as Python's b64decode does,
// or, when `reject_nonzero_trailing_bits`, must be zero, as the base64 crate's BASE64_STANDARD
// requires.
inline std::optional<std::string> DecodeBase64(std::string_view in,
                                               bool reject_nonzero_trailing_bits) {
  if (in.size() % 4 != 0) return std::nullopt;
  const auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  out.reserve(in.size() / 4 * 3);
  for (size_t i = 0; i < in.size(); i += 4) {
    const bool last = i + 4 == in.size();
    size_t pad = 0;
    if (last) pad = (in[i + 3] == '=') + (in[i + 2] == '=' && in[i + 3] == '=');
    uint32_t bits = 0;
    for (size_t k = 0; k < 4; ++k) {
      const int v = k >= 4 - pad ? 0 : value(in[i + k]);  // a '=' elsewhere is refused here
      if (v < 0) return std::nullopt;
      bits = (bits << 6) | static_cast<uint32_t>(v);
    }
    if (reject_nonzero_trailing_bits) {
      if (pad == 1 && (bits & 0xFF) != 0) return std::nullopt;
      if (pad == 2 && (bits & 0xFFFF) != 0) return std::nullopt;
    }
    out.push_back(static_cast<char>(bits >> 16));
    if (pad < 2) out.push_back(static_cast<char>((bits >> 8) & 0xFF));
    if (pad < 1) out.push_back(static_cast<char>(bits & 0xFF));
  }
  return out;
}

}  // namespace gridfeed::text
