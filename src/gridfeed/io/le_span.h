// LeSpan<T>: a zero-copy view of a little-endian array inside a mapping that may not be
// aligned for T (Megatron's .idx arrays start at byte 34). Elements are read with memcpy,
// which compiles to a plain load and is defined behaviour at any alignment.
#pragma once

#include <cstddef>
#include <cstring>
#include <span>
#include <vector>

namespace gridfeed::io {

template <typename T>
class LeSpan {
 public:
  LeSpan() = default;
  LeSpan(const std::byte* data, size_t size) : data_(data), size_(size) {}

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T operator[](size_t i) const {
    T v;
    std::memcpy(&v, data_ + i * sizeof(T), sizeof(T));
    return v;
  }
  T front() const { return (*this)[0]; }
  T back() const { return (*this)[size_ - 1]; }
  std::span<const std::byte> bytes() const { return {data_, size_ * sizeof(T)}; }
  std::vector<T> ToVector() const {
    std::vector<T> out(size_);
    if (size_ > 0) std::memcpy(out.data(), data_, size_ * sizeof(T));
    return out;
  }

 private:
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace gridfeed::io
