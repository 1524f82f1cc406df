// File helpers: atomic publication (write a temporary, fsync, rename over the target, fsync the
// directory, so a crash leaves the old file or the new one, never a half-written one), whole-file
// reads that refuse FIFOs and devices, and removal of temporaries when the process is killed.
//
// Temporaries are "<target>.tmp.<12 random characters>" in the target's directory, created with
// O_CREAT|O_EXCL|O_NOFOLLOW (a name planted in advance, a symlink included, is never opened).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gridfeed/core/status.h"

namespace gridfeed::io {

struct TempSlot;  // file_util.cc: a temporary's name, read by the signal handler

// An exclusively created, empty temporary file next to `target`, open for writing (fd()).
// Publish() fsyncs and closes it, renames it over `target` and fsyncs the directory. Until then
// the destructor (and a signal, see RemoveTempFilesOnSignal) removes it. For writers that need a
// file *name* (HDF5, torch::save): create it here, let the library write path() (reopening the
// existing file, not recreating it), then Publish(). Move-only; not thread safe.
class TempFile {
 public:
  static Result<TempFile> Create(const std::string& target);
  TempFile(TempFile&& other) noexcept;
  TempFile& operator=(TempFile&& other) = delete;
  TempFile(const TempFile&) = delete;
  ~TempFile();

  int fd() const { return fd_; }  // -1 once closed
  const std::string& path() const { return path_; }
  const std::string& target() const { return target_; }
  // fsync + close; idempotent once it succeeded. On failure (IoError naming the file) the
  // temporary is removed.
  Status Close();
  // Starts the writeback of bytes [offset, offset + size) without waiting for it (WriteTemp,
  // a piece at a time: the later fsync waits for work already under way). A hint: nothing is
  // reported. The descriptor stays open until Close.
  void StartWriteback(size_t offset, size_t size);
  // Close(), rename over target and (with `sync_dir`) fsync the directory. On failure the
  // temporary is removed.
  Status Publish(bool sync_dir = true);
  // Directory fsync of a published target's folder (PublishAll does it once per folder).
  static Status SyncDir(const std::string& dir);
  // Removes the temporary now (nothing happens after Publish).
  void Discard();

 private:
  TempFile() = default;
  std::string target_;
  std::string path_;
  int fd_ = -1;
  TempSlot* slot_ = nullptr;  // signal-cleanup registration
  bool done_ = false;         // published or discarded
  bool synced_ = false;       // fsynced and closed
};

// Buffered writes to a TempFile. Every write, the fsync and the close are checked; the first
// error is sticky (later calls return it). The destructor removes the temporary if it was not
// published. Move-only; not thread safe.
class AtomicFile {
 public:
  static Result<AtomicFile> Create(const std::string& path);
  AtomicFile(AtomicFile&& other) noexcept = default;
  AtomicFile& operator=(AtomicFile&& other) = delete;
  AtomicFile(const AtomicFile&) = delete;
  ~AtomicFile() = default;

  Status Write(const void* data, size_t size);
  Status Write(std::span<const std::byte> bytes) { return Write(bytes.data(), bytes.size()); }
  // Flushes, fsyncs, closes and (with `publish`) publishes. With `publish` false the file stays
  // under its temporary name until Publish(), so several files can appear together.
  Status Commit(bool publish = true);
  Status Publish();
  const std::string& path() const { return tmp_.target(); }
  const std::string& temp_path() const { return tmp_.path(); }
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  explicit AtomicFile(TempFile tmp) : tmp_(std::move(tmp)) {}
  Status Flush();
  Status Fail(Status st);

  TempFile tmp_;
  std::vector<char> buffer_;
  Status error_;
  bool committed_ = false;
  uint64_t bytes_written_ = 0;
};

// On SIGINT, SIGTERM and SIGHUP, removes every temporary a live TempFile holds (async-signal-safe
// unlink), then lets the signal take its previous course (default: the process dies of it).
// Programs that write outputs call it once at start; idempotent. IoError if sigaction fails.
Status RemoveTempFilesOnSignal();
// Removes every temporary a live TempFile holds now, for a signal handler that ends the process
// (mapped_fault.h). Async-signal-safe.
void RemoveLiveTemporaries();

// Reads a whole (small) regular file. NotFound if missing; IoError for a FIFO, device or
// directory (never blocks opening one).
Result<std::string> ReadFileToString(const std::string& path);
// Opens `path` for reading without blocking on a FIFO and rejects anything but a regular file
// (IoError naming `what` and the path). Returns the descriptor (O_CLOEXEC, blocking
// reads) for the caller to close. NotFound if missing.
Result<int> OpenRegularFile(const std::string& path, const std::string& what = "file");
// Writes a whole file atomically (AtomicFile).
Status WriteStringToFile(const std::string& path, const std::string& contents);
// mkdir -p.
Status MakeDirs(const std::string& path);
// mkdir -p for a folder that will hold many unrelated subfolders (a folder per dataset). Each
// folder it creates (never one that existed) is marked, where the filesystem has the flag, as
// the top of a directory hierarchy (FS_TOPDIR_FL, `chattr +T`), so ext2/3/4 spread the inodes
// of its subfolders and their files over block groups instead of packing them into the first
// group beside it. Why: ext4 without a journal skips inodes freed in the last 1-6 minutes, one
// lookup each, so rewriting a thousand folders where the last run's were just removed costs
// seconds. The flag is advice: where it cannot be set, this is MakeDirs. `created` (if given)
// gets each folder it made, in order, also when it fails part way.
Status MakeDirsSpread(const std::string& path, std::vector<std::string>* created = nullptr);

// Whether `a` and `b` name the same file (device and inode, links followed); false when either
// does not exist.
bool SameFile(const std::string& a, const std::string& b);

// "device:inode:size:mtime_ns" of the file `path` names (links followed): two processes on one
// machine that get the same text read the same bytes (unless a writer changes a file in place
// within one mtime tick). IoError naming the path.
Result<std::string> FileIdentity(const std::string& path);
// The same text for an open descriptor (fstat): what a file had when it was opened.
Result<std::string> FileIdentity(int fd, const std::string& path);

}  // namespace gridfeed::io
