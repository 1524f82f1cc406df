// A read-only memory map of a whole file. Move-only; the mapping lives until destruction,
// and every span handed out by users of the mapping is valid exactly that long. A read that
// faults because the file was truncated under the mapping ends the process with a message
// naming the file (mapped_fault.h), never a silent SIGBUS.
// Thread safety: const methods may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "gridfeed/core/status.h"

namespace gridfeed::io {

struct MappedSlot;

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
  MappedSlot* slot_ = nullptr;  // mapped_fault.h's registration
  std::string path_;
  std::string identity_;
};

// A descriptor onto the very file an MMapFile maps, for passes over large parts of it: copying
// from the page cache into a small buffer (pread) is several times faster than touching a
// multi-GB mapping page by page where page faults and TLB misses on 4 KiB pages are costly (a
// virtual machine). Not usable (ok() false) when the path names another file by now.
// Move-only; thread safe (positional reads).
class MappedFileReader {
 public:
  explicit MappedFileReader(const MMapFile& file);
  MappedFileReader(MappedFileReader&& other) noexcept;
  MappedFileReader& operator=(MappedFileReader&&) = delete;
  ~MappedFileReader();
  bool ok() const { return fd_ >= 0; }
  // Fills `out` from `offset`; false on an error or a short read (the caller uses the mapping).
  // On x86, a read of 4 KiB or more into memory 1-63 bytes past its source modulo 4 KiB goes
  // through a buffer of 260 KiB per thread (kept until the thread ends; mmap_file.cc says why).
  bool ReadAt(uint64_t offset, std::span<std::byte> out) const;

 private:
  int fd_ = -1;
};

// The size of a regular file in bytes; NotFound or IoError (also for a non-regular file).
Result<size_t> FileSize(const std::string& path);

}  // namespace gridfeed::io
