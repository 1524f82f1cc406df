// Small file helpers: buffered output to a temporary name that is renamed into place only
// when complete (so a crash never leaves a half-written file under the final name).
#pragma once

#include <cstdio>
#include <span>
#include <string>

#include "gridfeed/core/status.h"

namespace gridfeed::io {

// Writes to "<path>.tmp.<pid>" and renames it to `path` on Commit(). The destructor removes
// the temporary file if Commit() was not reached. Move-only; not thread safe.
class AtomicFile {
 public:
  static Result<AtomicFile> Create(const std::string& path);
  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile& operator=(AtomicFile&& other) = delete;
  AtomicFile(const AtomicFile&) = delete;
  ~AtomicFile();

  Status Write(const void* data, size_t size);
  Status Write(std::span<const std::byte> bytes) { return Write(bytes.data(), bytes.size()); }
  // Flushes, fsyncs, closes and renames. With `publish` false the file stays under its
  // temporary name (see Publish) so several files can appear together.
  Status Commit(bool publish = true);
  Status Publish();
  const std::string& path() const { return path_; }
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  AtomicFile() = default;
  std::string path_;
  std::string tmp_path_;
  FILE* file_ = nullptr;
  bool committed_ = false;
  bool published_ = false;
  uint64_t bytes_written_ = 0;
};

// Reads a whole (small) file.
Result<std::string> ReadFileToString(const std::string& path);
// Writes a whole file atomically.
Status WriteStringToFile(const std::string& path, const std::string& contents);
// mkdir -p.
Status MakeDirs(const std::string& path);

}  // namespace gridfeed::io
