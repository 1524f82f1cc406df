// The bytes one table producer sends another (--table-producers): a head (magic, the XXH3 of
// what follows, the producer's number, how many sections) and its sections, each a run of
// 8-byte aligned arrays. Node images (node_image.h) and whole images (Pipeline::
// BuildWholeShare) frame their sections so; a receiver refuses bytes that are not sections,
// come from another producer, or fail their digest. Plain values; not thread safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gridfeed/core/status.h"

namespace gridfeed::order {

// Builds one producer's sections: the head first, then arrays; Seal() fills in the count and
// the digest and hands the bytes over.
class SectionWriter {
 public:
  explicit SectionWriter(int producer);
  // A section begins (counted by Seal).
  void Begin() { ++count_; }
  template <typename T>
  void Put(std::span<const T> values) {
    const size_t at = out_.size(), bytes = values.size_bytes();
    out_.resize(at + (bytes + 7) / 8 * 8);  // 8-byte aligned, zero padded
    if (bytes > 0) std::memcpy(out_.data() + at, values.data(), bytes);
  }
  void PutWord(uint64_t w) { Put(std::span<const uint64_t>(&w, 1)); }
  std::vector<std::byte> Seal() &&;

 private:
  std::vector<std::byte> out_;
  uint64_t count_ = 0;
};

// Reads one producer's sections after Open checked their head: each call takes the next array,
// bounds checked (false: the bytes end first).
class SectionReader {
 public:
  // Producer `producer`'s sections; DataLoss naming them (who()) for bytes that are truncated,
  // are not sections, come from another producer, or fail their digest.
  static Result<SectionReader> Open(std::span<const std::byte> bytes, int producer);
  // "the sections from producer N", for the caller's own errors.
  const std::string& who() const { return who_; }
  uint64_t count() const { return count_; }
  template <typename T>
  bool Take(uint64_t count, std::vector<T>* out) {
    if (count > (bytes_.size() - at_) / sizeof(T)) return false;
    const size_t bytes = static_cast<size_t>(count) * sizeof(T);
    out->resize(static_cast<size_t>(count));
    if (bytes > 0) std::memcpy(out->data(), bytes_.data() + at_, bytes);
    at_ = std::min(at_ + (bytes + 7) / 8 * 8, bytes_.size());
    return true;
  }
  bool Word(uint64_t* w);
  bool done() const { return at_ == bytes_.size(); }

 private:
  SectionReader(std::span<const std::byte> bytes, uint64_t count, std::string who)
      : bytes_(bytes), count_(count), who_(std::move(who)) {}
  std::span<const std::byte> bytes_;
  uint64_t count_ = 0;
  std::string who_;
  size_t at_ = 0;
};

}  // namespace gridfeed::order
