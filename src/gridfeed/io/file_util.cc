#include "gridfeed/io/file_util.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>
#include <utility>

namespace gridfeed::io {

struct TempSlot {
  std::atomic<int> state{0};
  char path[4096] = {};  // zero-initialized: the slots need no start-up code (constinit below)
};

namespace {

std::string Errno(int err) { return std::strerror(err); }

// The directory holding `path` ("." for a bare name).
std::string DirOf(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string RandomSuffix() {
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::array<unsigned char, 12> raw{};
  if (::getrandom(raw.data(), raw.size(), 0) != static_cast<ssize_t>(raw.size())) {
    std::random_device rd;  // getrandom unavailable: still unpredictable
    for (auto& b : raw) b = static_cast<unsigned char>(rd());
  }
  std::string out;
  for (unsigned char b : raw) out += kChars[b % (sizeof(kChars) - 1)];
  return out;
}

Status FsyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return IoError("cannot open directory '" + dir + "' to fsync: " + Errno(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return IoError("cannot fsync directory '" + dir + "': " + Errno(err));
  return Status::Ok();
}

// Names of live temporaries, read by the signal handler. A slot is free (0), being written (1)
// or holds a name (2); the handler only reads slots in state 2. Slots come in chunks that are
// allocated when every earlier chunk is full and never freed, so a writer of thousands of files
// (PublishAll) keeps every temporary registered and the handler walks a list that only grows.
constexpr int kSlotsPerChunk = 64;
struct SlotChunk {
  TempSlot slots[kSlotsPerChunk];
  std::atomic<SlotChunk*> next{nullptr};
};
constinit SlotChunk g_first_chunk;  // in .bss: its 256 KiB are touched only when used

std::atomic<SlotChunk*> g_hint{&g_first_chunk};  // where the last registration found room

TempSlot* TryClaim(SlotChunk* c, const std::string& path) {
  for (TempSlot& s : c->slots) {
    int expected = 0;
    if (s.state.load(std::memory_order_relaxed) == 0 &&
        s.state.compare_exchange_strong(expected, 1)) {
      std::memcpy(s.path, path.c_str(), path.size() + 1);
      s.state.store(2, std::memory_order_release);
      return &s;
    }
  }
  return nullptr;
}

TempSlot* RegisterTemp(const std::string& path) {
  if (path.size() >= sizeof(TempSlot::path)) return nullptr;  // not removed on a signal
  // From the hint to the tail, then from the first chunk to the hint: thousands of live
  // temporaries do not make each registration scan every taken slot.
  SlotChunk* const start = g_hint.load(std::memory_order_acquire);
  SlotChunk* tail = start;
  for (SlotChunk* c = start; c != nullptr; c = c->next.load(std::memory_order_acquire)) {
    if (TempSlot* s = TryClaim(c, path)) {
      g_hint.store(c, std::memory_order_release);
      return s;
    }
    tail = c;
  }
  for (SlotChunk* c = &g_first_chunk; c != start; c = c->next.load(std::memory_order_acquire)) {
    if (TempSlot* s = TryClaim(c, path)) return s;
  }
  // Every slot taken: append a chunk. It lives as long as the process (the handler may read it).
  for (SlotChunk* c = tail;;) {
    SlotChunk* next = c->next.load(std::memory_order_acquire);
    if (next == nullptr) {
      auto* fresh = new SlotChunk;
      if (c->next.compare_exchange_strong(next, fresh, std::memory_order_acq_rel)) {
        next = fresh;
      } else {
        delete fresh;  // another thread appended first; `next` is its chunk
      }
    }
    if (TempSlot* s = TryClaim(next, path)) {
      g_hint.store(next, std::memory_order_release);
      return s;
    }
    c = next;
  }
}

void UnregisterTemp(TempSlot* slot) {
  if (slot != nullptr) slot->state.store(0, std::memory_order_release);
}

constexpr int kCleanupSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_previous[std::size(kCleanupSignals)];

void UnlinkLiveTemporaries() {
  for (SlotChunk* c = &g_first_chunk; c != nullptr; c = c->next.load(std::memory_order_acquire)) {
    for (TempSlot& s : c->slots) {
      if (s.state.load(std::memory_order_acquire) == 2) ::unlink(s.path);
    }
  }
}

extern "C" void RemoveTempsAndReraise(int sig) {
  UnlinkLiveTemporaries();
  for (size_t i = 0; i < std::size(kCleanupSignals); ++i) {
    if (kCleanupSignals[i] == sig) ::sigaction(sig, &g_previous[i], nullptr);
  }
  ::raise(sig);  // delivered when this handler returns, to the previous disposition
}

}  // namespace

Result<TempFile> TempFile::Create(const std::string& target) {
  TempFile t;
  t.target_ = target;
  for (int attempt = 0; attempt < 100; ++attempt) {
    t.path_ = target + ".tmp." + RandomSuffix();
    t.fd_ = ::open(t.path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (t.fd_ >= 0) {
      t.slot_ = RegisterTemp(t.path_);
      return t;
    }
    if (errno != EEXIST) {
      const int err = errno;
      t.done_ = true;  // nothing of ours to remove
      return IoError("cannot create a temporary file for '" + target + "' in '" + DirOf(target) +
                     "': " + Errno(err));
    }
  }
  t.done_ = true;
  return IoError("cannot create a temporary file for '" + target + "': 100 names taken");
}

TempFile::TempFile(TempFile&& o) noexcept
    : target_(std::move(o.target_)),
      path_(std::move(o.path_)),
      fd_(std::exchange(o.fd_, -1)),
      slot_(std::exchange(o.slot_, nullptr)),
      done_(std::exchange(o.done_, true)),
      synced_(std::exchange(o.synced_, false)) {}

TempFile::~TempFile() { Discard(); }

void TempFile::StartWriteback(size_t offset, size_t size) {
  if (fd_ < 0 || size == 0) return;
  // Only a hint (Close's fsync waits for the rest), so its result does not matter.
  ::sync_file_range(fd_, static_cast<off64_t>(offset), static_cast<off64_t>(size),
                    SYNC_FILE_RANGE_WRITE);
}

Status TempFile::Close() {
  if (synced_) return Status::Ok();
  if (done_ || fd_ < 0) return Internal("Close of a finished temporary for '" + target_ + "'");
  // fsync through the descriptor that wrote: a new one could miss a writeback error.
  const int fd = std::exchange(fd_, -1);
  Status st;
  if (::fsync(fd) != 0) {
    st = IoError("cannot fsync '" + path_ + "': " + Errno(errno));
    ::close(fd);
  } else if (::close(fd) != 0) {
    st = IoError("cannot close '" + path_ + "': " + Errno(errno));
  }
  if (!st.ok()) {
    Discard();  // a failure is final: a second Close must not report success
    return st;
  }
  synced_ = true;
  return Status::Ok();
}

Status TempFile::Publish(bool sync_dir) {
  if (done_) return Internal("Publish of a finished temporary for '" + target_ + "'");
  Status st = Close();
  if (st.ok() && ::rename(path_.c_str(), target_.c_str()) != 0) {
    st = IoError("cannot rename '" + path_ + "' to '" + target_ + "': " + Errno(errno));
  }
  if (!st.ok()) {
    Discard();
    return st;
  }
  done_ = true;
  UnregisterTemp(std::exchange(slot_, nullptr));
  return sync_dir ? FsyncDir(DirOf(target_)) : Status::Ok();
}

Status TempFile::SyncDir(const std::string& dir) { return FsyncDir(dir); }

void TempFile::Discard() {
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
  if (!done_) ::unlink(path_.c_str());
  done_ = true;
  UnregisterTemp(std::exchange(slot_, nullptr));
}

Result<AtomicFile> AtomicFile::Create(const std::string& path) {
  GRIDFEED_ASSIGN_OR_RETURN(TempFile tmp, TempFile::Create(path));
  AtomicFile f(std::move(tmp));
  f.buffer_.reserve(1 << 20);
  return f;
}

Status AtomicFile::Fail(Status st) {
  if (error_.ok()) error_ = std::move(st);
  tmp_.Discard();
  return error_;
}

Status AtomicFile::Flush() {
  const char* p = buffer_.data();
  size_t left = buffer_.size();
  while (left > 0) {
    const ssize_t n = ::write(tmp_.fd(), p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return Fail(IoError("cannot write '" + tmp_.path() +
                          "': " + (n < 0 ? Errno(errno) : std::string("no progress"))));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  buffer_.clear();
  return Status::Ok();
}

Status AtomicFile::Write(const void* data, size_t size) {
  if (!error_.ok()) return error_;
  if (committed_) return Internal("Write after Commit on '" + path() + "'");
  if (size == 0) return Status::Ok();
  if (buffer_.capacity() == 0) buffer_.reserve(1 << 20);
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const size_t n = std::min(size, buffer_.capacity() - buffer_.size());
    buffer_.insert(buffer_.end(), p, p + n);
    p += n;
    size -= n;
    bytes_written_ += n;
    if (buffer_.size() == buffer_.capacity()) GRIDFEED_RETURN_IF_ERROR(Flush());
  }
  return Status::Ok();
}

Status AtomicFile::Commit(bool publish) {
  if (!error_.ok()) return error_;
  if (committed_) return Internal("Commit called twice on '" + path() + "'");
  GRIDFEED_RETURN_IF_ERROR(Flush());
  if (Status st = tmp_.Close(); !st.ok()) return Fail(st);
  committed_ = true;
  return publish ? Publish() : Status::Ok();
}

Status AtomicFile::Publish() {
  if (!error_.ok()) return error_;
  if (!committed_) return Internal("Publish before Commit for '" + path() + "'");
  if (Status st = tmp_.Publish(); !st.ok()) return Fail(st);
  return Status::Ok();
}

Status RemoveTempFilesOnSignal() {
  static std::mutex mu;
  static bool installed = false;
  std::lock_guard lock(mu);
  if (installed) return Status::Ok();
  for (size_t i = 0; i < std::size(kCleanupSignals); ++i) {
    struct sigaction sa {};
    sa.sa_handler = RemoveTempsAndReraise;
    sigemptyset(&sa.sa_mask);
    for (int s : kCleanupSignals) sigaddset(&sa.sa_mask, s);
    if (::sigaction(kCleanupSignals[i], nullptr, &g_previous[i]) != 0) {
      return IoError(std::string("sigaction: ") + Errno(errno));
    }
    if (g_previous[i].sa_handler == SIG_IGN) continue;  // an ignored signal stays ignored
    if (::sigaction(kCleanupSignals[i], &sa, nullptr) != 0) {
      return IoError(std::string("sigaction: ") + Errno(errno));
    }
  }
  installed = true;
  return Status::Ok();
}

void RemoveLiveTemporaries() { UnlinkLiveTemporaries(); }

Result<int> OpenRegularFile(const std::string& path, const std::string& what) {
  // O_NONBLOCK: opening a FIFO without a writer would otherwise wait forever.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const std::string m = "cannot open " + what + " '" + path + "': " + Errno(err);
    return err == ENOENT ? NotFound(m) : IoError(m);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return IoError("cannot stat " + what + " '" + path + "': " + Errno(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return IoError(what + " '" + path + "' is not a regular file (" +
                   (S_ISFIFO(st.st_mode)  ? "a FIFO"
                    : S_ISDIR(st.st_mode) ? "a directory"
                                          : "a device or socket") +
                   ")");
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

Result<std::string> ReadFileToString(const std::string& path) {
  GRIDFEED_ASSIGN_OR_RETURN(const int fd, OpenRegularFile(path));
  std::string out;
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return IoError("cannot read '" + path + "': " + Errno(err));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

Status WriteStringToFile(const std::string& path, const std::string& contents) {
  GRIDFEED_ASSIGN_OR_RETURN(AtomicFile f, AtomicFile::Create(path));
  GRIDFEED_RETURN_IF_ERROR(f.Write(contents.data(), contents.size()));
  return f.Commit();
}

namespace {

std::string IdentityText(const struct stat& st) {
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" +
         std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec);
}

}  // namespace

Result<std::string> FileIdentity(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return IoError("cannot stat '" + path + "': " + std::strerror(errno));
  }
  return IdentityText(st);
}

Result<std::string> FileIdentity(int fd, const std::string& path) {
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    return IoError("cannot stat '" + path + "': " + std::strerror(errno));
  }
  return IdentityText(st);
}

Status MakeDirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return IoError("cannot create directory '" + path + "': " + ec.message());
  return Status::Ok();
}

Status MakeDirsSpread(const std::string& path, std::vector<std::string>* created) {
  // Each prefix of the path as given (not normalised: the kernel resolves ".." after a link),
  // made where missing; EEXIST is a folder already there (or made meanwhile: not ours).
  for (size_t end = 1; end <= path.size(); ++end) {
    if (end < path.size() && path[end] != '/') continue;
    if (path[end - 1] == '/') continue;  // "//", or a trailing '/'
    const std::string prefix = path.substr(0, end);
    if (::mkdir(prefix.c_str(), 0777) != 0) {
      if (errno == EEXIST) continue;
      return IoError("cannot create directory '" + prefix + "': " + Errno(errno));
    }
    if (created != nullptr) created->push_back(prefix);
    const int fd = ::open(prefix.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) continue;  // the check below names a folder that is not one
    int flags = 0;
    if (::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0 && !(flags & FS_TOPDIR_FL)) {
      flags |= FS_TOPDIR_FL;
      (void)::ioctl(fd, FS_IOC_SETFLAGS, &flags);  // advice only
    }
    ::close(fd);
  }
  return MakeDirs(path);  // the same errors as mkdir -p for what is not a folder
}

bool SameFile(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

}  // namespace gridfeed::io
