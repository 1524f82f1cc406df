#include "gridfeed/core/kernel_copy.h"

#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "gridfeed/core/page_array.h"

namespace gridfeed {
namespace {

// A fresh shared mapping, like a node window: nothing touched.
struct SharedMapping {
  explicit SharedMapping(size_t n) : size(n) {
    void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    base = p == MAP_FAILED ? nullptr : static_cast<std::byte*>(p);
  }
  ~SharedMapping() {
    if (base) ::munmap(base, size);
  }
  std::byte* base;
  size_t size;
};

std::vector<std::byte> Pattern(size_t n, uint32_t seed) {
  std::vector<std::byte> v(n);
  uint32_t x = seed;
  for (auto& b : v) {
    x = x * 1664525u + 1013904223u;
    b = std::byte(x >> 24);
  }
  return v;
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kKernelCopies = false;  // memcpy under ASan (kernel_copy.h)
#else
constexpr bool kKernelCopies = true;
#endif

// Whether this process may copy within itself through the kernel (not under a filter).
bool KernelAllowed() {
  std::byte x{1}, y{0};
  iovec l{&x, 1}, r{&y, 1};
  return ::process_vm_writev(::getpid(), &l, 1, &r, 1, 0) == 1 && y == x;
}

// More than one of the kernel's pieces (16 MiB), a tail, and ends inside pages, from a
// page-aligned source to destinations at 0, 1, 16 (4K-aliased: through the bounce buffer) and
// 4095 bytes into a page: every byte lands, nothing outside the range is written. `kernel`:
// whether the kernel must have copied them all.
void CopiesEveryByteBothWays(bool kernel) {
  const size_t n = (size_t{16} << 20) * 2 + 4097;
  const auto pattern = Pattern(n, 7);
  PageArray<std::byte> src(n);
  std::memcpy(src.data(), pattern.data(), n);
  for (size_t offset : {size_t{0}, size_t{1}, size_t{16}, size_t{4095}}) {
    SharedMapping window(n + 8192);
    ASSERT_NE(window.base, nullptr);
    const size_t in = CopyIntoUntouched(window.base + offset, src.data(), n);
    EXPECT_EQ(std::memcmp(window.base + offset, src.data(), n), 0) << offset;
    for (size_t i = 0; i < offset; ++i) ASSERT_EQ(window.base[i], std::byte{0}) << offset;
    EXPECT_EQ(window.base[offset + n], std::byte{0}) << offset;
    std::vector<std::byte> back(n + 2, std::byte{0x5a});
    const size_t out = CopyOutOfUntouched(back.data() + 1, window.base + offset, n);
    EXPECT_EQ(std::memcmp(back.data() + 1, src.data(), n), 0) << offset;
    EXPECT_EQ(back[0], std::byte{0x5a});
    EXPECT_EQ(back[n + 1], std::byte{0x5a});
    if (kernel) {
      EXPECT_EQ(in, n) << offset;
      EXPECT_EQ(out, n) << offset;
    } else {
      EXPECT_EQ(in, 0u) << offset;
      EXPECT_EQ(out, 0u) << offset;
    }
  }
}

// Where this process may not copy through the kernel (a filter outside the test), memcpy
// copies everything: the bytes are checked either way.
TEST(KernelCopy, CopiesEveryByteBothWays) {
  CopiesEveryByteBothWays(kKernelCopies && KernelAllowed());
}

TEST(KernelCopy, ZeroBytesIsANoOp) {
  std::byte a{1}, b{2};
  CopyIntoUntouched(&a, &b, 0);
  CopyOutOfUntouched(&a, &b, 0);
  EXPECT_EQ(a, std::byte{1});
}

// Under a seccomp filter that refuses process_vm_writev/readv (EPERM), in a child process so
// the filter stays there: exits 0 when the copies still complete (memcpy takes over).
[[noreturn]] void CopyUnderAFilterThatRefuses() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_writev, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])), filter};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
    std::_Exit(3);
  }
  if (KernelAllowed()) std::_Exit(4);  // the filter holds: the call itself fails
  CopiesEveryByteBothWays(false);
  std::_Exit(::testing::Test::HasFailure() ? 1 : 0);
}

TEST(KernelCopy, CompletesWhereTheKernelRefuses) {
  EXPECT_EXIT(CopyUnderAFilterThatRefuses(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace gridfeed
