#include "gridfeed/core/kernel_copy.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

namespace gridfeed {

namespace {

// Once the kernel has refused (a seccomp filter, no such call), every later copy is memcpy.
std::atomic<bool> g_kernel_refused{false};

// The kernel copies [0, copied) of each call; the rest falls to memcpy. Pieces bound how much
// one call pins.
template <typename Call>
void Copy(std::byte* dst, const std::byte* src, size_t n, Call call) {
  constexpr size_t kPiece = size_t{16} << 20;
  size_t done = 0;
  while (done < n && !g_kernel_refused.load(std::memory_order_relaxed)) {
    const size_t k = std::min(kPiece, n - done);
    const ssize_t got = call(dst + done, src + done, k);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      if (got < 0 && (errno == ENOSYS || errno == EPERM)) {
        g_kernel_refused.store(true, std::memory_order_relaxed);
      }
      break;
    }
    done += static_cast<size_t>(got);
  }
  if (done < n) std::memcpy(dst + done, src + done, n - done);
}

}  // namespace

void CopyIntoUntouched(std::byte* dst, const std::byte* src, size_t n) {
  Copy(dst, src, n, [](std::byte* d, const std::byte* s, size_t k) {
    iovec local{const_cast<std::byte*>(s), k}, remote{d, k};
    return ::process_vm_writev(::getpid(), &local, 1, &remote, 1, 0);
  });
}

void CopyOutOfUntouched(std::byte* dst, const std::byte* src, size_t n) {
  Copy(dst, src, n, [](std::byte* d, const std::byte* s, size_t k) {
    iovec local{d, k}, remote{const_cast<std::byte*>(s), k};
    return ::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0);
  });
}

}  // namespace gridfeed
