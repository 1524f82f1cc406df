// The rows of a JSON Lines file, as Megatron's SFT low-level dataset addresses them: row k is
// the k-th line that holds something other than whitespace (blank lines are skipped, as the
// JSON Lines loaders do). The file is memory-mapped; rows are found once, on Open.
//
// Thread safety: immutable after Open; Row() may be called from any thread. Move-only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gridfeed/core/status.h"
#include "gridfeed/io/mmap_file.h"

namespace gridfeed::order::sft {

class JsonlRows {
 public:
  // NotFound / IoError naming `path`; InvalidArgument for a file without rows.
  static Result<JsonlRows> Open(const std::string& path);

  int64_t size() const { return static_cast<int64_t>(begin_.size()); }
  // Row `k` without its line break. REQUIRES: 0 <= k < size().
  std::string_view Row(int64_t k) const;
  const std::string& path() const { return file_.path(); }
  // The whole file (for the data facts).
  std::span<const std::byte> bytes() const { return file_.bytes(); }

 private:
  io::MMapFile file_;
  std::vector<uint64_t> begin_, end_;  // byte range of each row
};

}  // namespace gridfeed::order::sft
