#include "gridfeed/core/kernel_copy.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "gridfeed/core/page_array.h"

#if defined(__SANITIZE_ADDRESS__)
#define GRIDFEED_KERNEL_COPY 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GRIDFEED_KERNEL_COPY 0
#endif
#endif
#ifndef GRIDFEED_KERNEL_COPY
#define GRIDFEED_KERNEL_COPY 1
#endif

namespace gridfeed {

namespace {

// Each direction stops asking once the kernel has refused it.
std::atomic<bool> g_write_refused{false}, g_read_refused{false};

constexpr size_t kPage = 4096;
// One call's bytes: short enough that a call does not run long, far below the kernel's cap.
constexpr size_t kPiece = size_t{16} << 20;

bool Aliased(const std::byte* dst, const std::byte* src) {
  const uintptr_t d = (reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src)) % kPage;
  return d >= 1 && d <= 63;
}

// The kernel copies what it can of [0, n); returns how much.
template <typename Call>
size_t KernelPart(std::byte* dst, const std::byte* src, size_t n, std::atomic<bool>& refused,
                  Call call) {
  size_t done = 0;
  while (done < n && !refused.load(std::memory_order_relaxed)) {
    const size_t k = std::min(kPiece, n - done);
    const ssize_t got = call(dst + done, src + done, k);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      if (got < 0 && (errno == ENOSYS || errno == EPERM)) {
        refused.store(true, std::memory_order_relaxed);
      }
      break;
    }
    done += static_cast<size_t>(got);
  }
  return done;
}

ssize_t Write(std::byte* d, const std::byte* s, size_t k) {
  iovec local{const_cast<std::byte*>(s), k}, remote{d, k};
  return ::process_vm_writev(::getpid(), &local, 1, &remote, 1, 0);
}

ssize_t Read(std::byte* d, const std::byte* s, size_t k) {
  iovec local{d, k}, remote{const_cast<std::byte*>(s), k};
  return ::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0);
}

}  // namespace

size_t CopyIntoUntouched(std::byte* dst, const std::byte* src, size_t n) {
  size_t kernel = 0;
  if (GRIDFEED_KERNEL_COPY && n > 0 && !Aliased(dst, src)) {
    kernel = KernelPart(dst, src, n, g_write_refused, Write);
  } else if (GRIDFEED_KERNEL_COPY && n > 0 && !g_write_refused.load(std::memory_order_relaxed)) {
    // Through a buffer half a page past the destination's offset, a piece at a time.
    try {
      PageArray<std::byte> bounce(std::min(n, kPiece) + kPage);
      std::byte* const b = bounce.data() + (reinterpret_cast<uintptr_t>(dst) + kPage / 2) % kPage;
      while (kernel < n) {
        const size_t k = std::min(kPiece, n - kernel);
        std::memcpy(b, src + kernel, k);
        const size_t got = KernelPart(dst + kernel, b, k, g_write_refused, Write);
        kernel += got;
        if (got < k) break;
      }
    } catch (const std::bad_alloc&) {
      // no buffer: memcpy below
    }
  }
  if (kernel < n) {
    PopulateForWrite(dst + kernel, n - kernel);  // a fraction of a fault per page
    std::memcpy(dst + kernel, src + kernel, n - kernel);
  }
  return kernel;
}

size_t CopyOutOfUntouched(std::byte* dst, const std::byte* src, size_t n) {
  size_t kernel = 0;
  if (GRIDFEED_KERNEL_COPY && n > 0) kernel = KernelPart(dst, src, n, g_read_refused, Read);
  if (kernel < n) std::memcpy(dst + kernel, src + kernel, n - kernel);
  return kernel;
}

}  // namespace gridfeed
