#include "gridfeed/io/publish_all.h"

#include <dirent.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <set>
#include <thread>

namespace gridfeed::io {

Result<TempFile> WriteTemp(const std::string& target,
                           std::span<const std::span<const std::byte>> parts,
                           const std::function<void(size_t bytes)>& written) {
  GRIDFEED_ASSIGN_OR_RETURN(TempFile tmp, TempFile::Create(target));
  size_t offset = 0, started = 0;  // bytes in the file; bytes whose writeback has started
  for (size_t i = 0; i < parts.size(); ++i) {
    const bool tell = written && i + 1 == parts.size();
    // Straight from the caller's memory: no copy through a buffer; a piece at a time, each
    // piece's writeback started once it is written, up to its last whole page (the next
    // write fills that page), so the disk works while the rest is copied.
    const std::byte* p = parts[i].data();
    size_t left = parts[i].size();
    while (left > 0) {
      const ssize_t n = ::write(tmp.fd(), p, std::min(left, kWrittenPiece));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        return IoError("cannot write '" + tmp.path() +
                       "': " + (n < 0 ? std::strerror(errno) : std::string("no progress")));
      }
      p += n;
      left -= static_cast<size_t>(n);
      offset += static_cast<size_t>(n);
      if (const size_t whole = offset / 4096 * 4096; whole - started >= kWrittenPiece) {
        tmp.StartWriteback(started, whole - started);
        started = whole;
      }
      if (tell) written(parts[i].size() - left);
    }
  }
  tmp.StartWriteback(started, offset - started);
  return tmp;
}

Status PublishAll(std::vector<TempFile>& files, int threads) {
  if (files.empty()) return Status::Ok();
  std::vector<Status> synced(files.size());
  std::atomic<size_t> next{0};
  auto sync = [&] {
    for (size_t i; (i = next.fetch_add(1)) < files.size();) synced[i] = files[i].Close();
  };
  {
    const size_t n = std::clamp<size_t>(static_cast<size_t>(std::max(threads, 1)), 1, files.size());
    std::vector<std::jthread> pool;
    for (size_t t = 1; t < n; ++t) pool.emplace_back(sync);
    sync();
  }
  // One file that did not reach the disk: none is published (no mix of new and old tables).
  for (size_t i = 0; i < files.size(); ++i) {
    if (!synced[i].ok()) {
      for (TempFile& f : files) f.Discard();
      return synced[i];
    }
  }
  Status first;
  std::set<std::string> folders;
  for (size_t i = 0; i < files.size(); ++i) {
    if (!first.ok()) {
      files[i].Discard();
      continue;
    }
    const std::string& target = files[i].target();
    const size_t slash = target.rfind('/');
    folders.insert(slash == std::string::npos ? "." : slash == 0 ? "/" : target.substr(0, slash));
    if (Status st = files[i].Publish(/*sync_dir=*/false); !st.ok()) first = st;
  }
  for (const std::string& f : folders) {
    if (Status st = TempFile::SyncDir(f); !st.ok() && first.ok()) first = st;
  }
  return first;
}

size_t OpenFileRoom(size_t wanted) {
  constexpr size_t kReserve = 64;
  size_t open_now = 0;  // descriptors open now, counted in /proc/self/fd
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (::readdir(d) != nullptr) ++open_now;
    ::closedir(d);
  }
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0;
  const size_t need = open_now + wanted + kReserve;
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
    const rlim_t raised = rl.rlim_max == RLIM_INFINITY ? need : std::min<rlim_t>(rl.rlim_max, need);
    struct rlimit up = {raised, rl.rlim_max};
    if (raised > rl.rlim_cur && ::setrlimit(RLIMIT_NOFILE, &up) == 0) rl.rlim_cur = raised;
  }
  if (rl.rlim_cur == RLIM_INFINITY) return wanted;
  const size_t limit = static_cast<size_t>(rl.rlim_cur);
  return limit > open_now + kReserve ? limit - open_now - kReserve : 0;
}

}  // namespace gridfeed::io
