// Whole-string integer parsing without exceptions (std::sto* throw, and a raw exception on one
// rank can strand its peers in a collective). Pure; thread safe.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>

namespace gridfeed {

// The value of `text` if it is exactly a base-10 integer that fits in int64; none otherwise
// (empty, trailing characters, out of range).
inline std::optional<int64_t> ParseInt64(std::string_view text) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return v;
}

}  // namespace gridfeed
