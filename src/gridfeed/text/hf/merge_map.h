// An open-addressing hash map from a 64-bit key to two int32 values, for the BPE model's hot
// lookups (a pair of ids -> its merge, a code point -> its token id): one probe sequence in one
// array, no allocation per entry. Keys never equal kEmpty (~0: ids and code points are below
// 2^31). Built once, then read-only (thread-safe for readers).
#pragma once

#include <bit>
#include <cstdint>
#include <vector>

namespace gridfeed::text::hf {

class MergeMap {
 public:
  struct Value {
    int32_t rank;
    int32_t new_id;
  };

  // Room for `n` keys at a load of at most one half.
  void Reserve(size_t n) {
    const size_t cap = std::bit_ceil(std::max<size_t>(16, 2 * n));
    if (cap <= slots_.size()) return;
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(cap, Slot{});
    shift_ = 64 - std::countr_zero(cap);
    size_ = 0;
    for (const Slot& s : old) {
      if (s.key != kEmpty) Set(s.key, s.value);
    }
  }

  // Inserts or overwrites.
  void Set(uint64_t key, Value v) {
    if (2 * (size_ + 1) > slots_.size()) Reserve(2 * (size_ + 1));
    const size_t mask = slots_.size() - 1;
    for (size_t i = Home(key);; i = (i + 1) & mask) {
      if (slots_[i].key == key) {
        slots_[i].value = v;
        return;
      }
      if (slots_[i].key == kEmpty) {
        slots_[i] = Slot{key, v};
        ++size_;
        return;
      }
    }
  }

  const Value* Find(uint64_t key) const {
    if (slots_.empty()) return nullptr;
    const size_t mask = slots_.size() - 1;
    for (size_t i = Home(key);; i = (i + 1) & mask) {
      if (slots_[i].key == key) return &slots_[i].value;
      if (slots_[i].key == kEmpty) return nullptr;
    }
  }

  size_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  struct Slot {
    uint64_t key = kEmpty;
    Value value{};
  };
  size_t Home(uint64_t key) const { return (key * 0x9E3779B97F4A7C15ull) >> shift_; }

  std::vector<Slot> slots_;
  int shift_ = 64;
  size_t size_ = 0;
};

}  // namespace gridfeed::text::hf
