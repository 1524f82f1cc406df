// PageArray<T>: a fixed-size array of trivially copyable T in its own anonymous mapping, for
// tables of tens of millions of entries that are written once in full:
//  - left uninitialised (std::vector's zero fill is a wasted pass over fresh pages);
//  - 2 MiB aligned with transparent huge pages advised, so a table faults 2 MiB at a time and
//    random accesses miss the TLB less.
// Ownership: owns its mapping; a move hands it over, a copy allocates its own. Allocation
// failure throws std::bad_alloc, like std::vector. Not thread safe for mutation; concurrent
// reads are safe.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <span>
#include <type_traits>
#include <utility>

namespace gridfeed {

// Faults in, for writing, the whole pages inside [p, p + bytes) with one call (Linux 5.14's
// MADV_POPULATE_WRITE): a fraction of one fault per page. Advice only: false where the kernel
// refuses it (older kernels: EINVAL), and the writes that follow fault as usual.
inline bool PopulateForWrite(void* p, size_t bytes) {
  constexpr int kPopulateWrite = 23;  // older C libraries lack the name
#ifdef MADV_POPULATE_WRITE
  static_assert(MADV_POPULATE_WRITE == kPopulateWrite);
#endif
  constexpr uintptr_t kPageSize = 4096;
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uintptr_t lo = (a + kPageSize - 1) / kPageSize * kPageSize;
  const uintptr_t hi = (a + bytes) / kPageSize * kPageSize;
  return hi <= lo || ::madvise(reinterpret_cast<void*>(lo), hi - lo, kPopulateWrite) == 0;
}

namespace page_array_internal {

inline constexpr size_t kHugePage = size_t{2} << 20;
inline constexpr size_t kPage = 4096;

// A mapping of at least `bytes` (rounded up to pages), 2 MiB aligned when it is large.
inline std::byte* Map(size_t bytes, size_t* mapped) {
  if (bytes == 0) {
    *mapped = 0;
    return nullptr;
  }
  if (bytes > SIZE_MAX - 2 * kHugePage) throw std::bad_alloc();
  const size_t want = (bytes + kPage - 1) / kPage * kPage;
  const bool huge = want >= kHugePage;
  const size_t ask = huge ? want + kHugePage : want;
  void* p = ::mmap(nullptr, ask, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  auto* base = static_cast<std::byte*>(p);
  if (!huge) {
    *mapped = want;
    return base;
  }
  // Trim to a 2 MiB boundary so whole huge pages fit.
  const auto addr = reinterpret_cast<uintptr_t>(base);
  const size_t head = (kHugePage - addr % kHugePage) % kHugePage;
  if (head) ::munmap(base, head);
  const size_t tail = ask - head - want;
  if (tail) ::munmap(base + head + want, tail);
  ::madvise(base + head, want, MADV_HUGEPAGE);  // advice only: a kernel without THP ignores it
  *mapped = want;
  return base + head;
}

inline void Unmap(std::byte* base, size_t mapped) {
  if (base) ::munmap(base, mapped);
}

}  // namespace page_array_internal

// Advises transparent huge pages for the whole 2 MiB pages inside [p, p + bytes), e.g. a large
// std::vector's reserved storage before its first write, so it faults 2 MiB at a time. Advice
// only: a kernel without THP, or a small range, is left as it is.
inline void AdviseHugePages(void* p, size_t bytes) {
  using page_array_internal::kHugePage;
  const auto begin = reinterpret_cast<uintptr_t>(p);
  const uintptr_t first = (begin + kHugePage - 1) / kHugePage * kHugePage;
  const uintptr_t last = (begin + bytes) / kHugePage * kHugePage;
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
}

// Sizes `v` to `n` value-initialised entries in storage advised for huge pages (see above).
template <typename Vector>
void ResizeOnHugePages(Vector* v, size_t n) {
  v->reserve(n);
  AdviseHugePages(v->data(), n * sizeof(typename Vector::value_type));
  v->resize(n);
}

template <typename T>
class PageArray {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  PageArray() = default;
  // `n` entries with indeterminate values.
  explicit PageArray(size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_alloc();
    base_ = page_array_internal::Map(n * sizeof(T), &mapped_);
    size_ = n;
  }
  PageArray(const PageArray& other) : PageArray(other.size_) {
    if (size_) std::memcpy(data(), other.data(), size_ * sizeof(T));
  }
  PageArray& operator=(const PageArray& other) {
    if (this != &other) {
      PageArray copy(other);
      swap(copy);
    }
    return *this;
  }
  PageArray(PageArray&& other) noexcept { swap(other); }
  PageArray& operator=(PageArray&& other) noexcept {
    PageArray gone(std::move(*this));
    swap(other);
    return *this;
  }
  ~PageArray() { page_array_internal::Unmap(base_, mapped_); }

  void swap(PageArray& other) noexcept {
    std::swap(base_, other.base_);
    std::swap(size_, other.size_);
    std::swap(mapped_, other.mapped_);
  }

  // Faults every page in now (the kernel zeroes them), so that cost falls on the calling
  // thread rather than on the first writer. Contents stay indeterminate.
  void Populate() {
    if (mapped_ == 0 || PopulateForWrite(base_, mapped_)) return;
    for (size_t at = 0; at < mapped_; at += page_array_internal::kPage) {
      *reinterpret_cast<volatile std::byte*>(base_ + at) = std::byte{0};
    }
  }

  // Gives back the whole pages that hold only entries before `n`, which read as zero after:
  // for a table copied out front to back, so the copy and the table are not both held whole.
  void ReleaseFront(size_t n) { ReleaseFrontOf(data(), std::min(n, size_) * sizeof(T)); }
  // The same through the memory alone, for a holder of data() (the memory does not move with
  // the PageArray): the whole pages among the first `bytes` bytes of `data`.
  static void ReleaseFrontOf(const T* data, size_t bytes) {
    bytes = bytes / page_array_internal::kPage * page_array_internal::kPage;
    if (bytes) ::madvise(const_cast<T*>(data), bytes, MADV_DONTNEED);
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return reinterpret_cast<T*>(base_); }
  const T* data() const { return reinterpret_cast<const T*>(base_); }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  operator std::span<T>() { return {data(), size_}; }
  operator std::span<const T>() const { return {data(), size_}; }

  friend bool operator==(const PageArray& a, const PageArray& b) {
    return a.size_ == b.size_ &&
           (a.size_ == 0 || std::memcmp(a.data(), b.data(), a.size_ * sizeof(T)) == 0);
  }

 private:
  std::byte* base_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;  // bytes of the mapping from base_
};

}  // namespace gridfeed
