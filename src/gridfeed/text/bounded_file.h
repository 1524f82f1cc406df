// The text module's one way of reading a whole tokenizer file whose size is bounded before
// anything is allocated (the preamble's rule: sizes from files are bounded before allocating).
// Header-only: it is small and has no other home.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

#include "gridfeed/core/status.h"
#include "gridfeed/io/file_util.h"

namespace gridfeed::text {

// Reads the file `path` whole when it holds at most `max_bytes`. Errors, each caller's own text:
// NotFound(`cannot_size` + the system's message) when its size cannot be had;
// InvalidArgument(too_large(size)) when it is larger; else io::ReadFileToString's.
template <typename TooLarge>
Result<std::string> ReadFileBounded(const std::string& path, uint64_t max_bytes,
                                    std::string_view cannot_size, TooLarge too_large) {
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) return NotFound(std::string(cannot_size) + ec.message());
  if (size > max_bytes) return InvalidArgument(too_large(size));
  return io::ReadFileToString(path);
}

}  // namespace gridfeed::text
