// A read-only memory map of a whole file. Move-only; the mapping lives until destruction,
// and every span handed out by users of the mapping is valid exactly that long.
// Thread safety: const methods may be called from any thread.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "gridfeed/core/status.h"

namespace gridfeed::io {

class MMapFile {
 public:
  // NotFound if the file does not exist, IoError (at once, never blocking) for a FIFO,
  // device or directory, IoError if it cannot be opened or mapped.
  static Result<MMapFile> Open(const std::string& path);

  MMapFile() = default;
  MMapFile(MMapFile&& other) noexcept;
  MMapFile& operator=(MMapFile&& other) noexcept;
  MMapFile(const MMapFile&) = delete;
  MMapFile& operator=(const MMapFile&) = delete;
  ~MMapFile();

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // FileIdentity (file_util.h) of the file as it was when mapped.
  const std::string& identity() const { return identity_; }
  // Unmaps this process's copies of the whole pages inside `part` (the file's page cache
  // stays; the next access maps them again), so a pass over a large file does not leave all
  // of it counted in resident memory. REQUIRES: `part` lies inside bytes().
  void DropPages(std::span<const std::byte> part) const;

 private:
  void Reset();

  const std::byte* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
  std::string identity_;
};

// The size of a regular file in bytes; NotFound or IoError (also for a non-regular file).
Result<size_t> FileSize(const std::string& path);

}  // namespace gridfeed::io
