// DrawStream: a single-producer/single-consumer stream of Fisher-Yates swap targets.
// One thread draws the targets of a numpy shuffle (the serial RNG work) while another applies
// the swaps, so the document-index shuffle uses both cores without changing a single draw.
// Thread safety: PushBlock and Finish from one thread, Pop from one other thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "gridfeed/core/check.h"
#include "gridfeed/core/page_array.h"

namespace gridfeed::order {

class DrawStream {
 public:
  static constexpr size_t kDefaultChunk = size_t{1} << 14;
  static constexpr size_t kChunks = 16;

  // `chunk`: targets published at a time, a power of two (tests use small ones so that the
  // stream fills); the stream holds kChunks of them.
  explicit DrawStream(size_t chunk = kDefaultChunk)
      : chunk_(chunk), size_(chunk * kChunks), buffer_(size_) {
    GRIDFEED_CHECK(chunk > 0 && (chunk & (chunk - 1)) == 0);  // indices are masked
  }
  size_t chunk() const { return chunk_; }

  // Producer: appends targets[0, n); publishes whole chunks (and the tail on Finish). With
  // streaming stores where the CPU has them: the consumer reads on another core, and a plain
  // store first fetches its line back from that core's cache (146.5M targets: perf put half
  // of the drawing loop's samples on those stores).
  void PushBlock(const uint32_t* targets, size_t n) {
    while (n > 0) {
      const size_t in_chunk = chunk_ - (written_ & (chunk_ - 1));
      const size_t k = n < in_chunk ? n : in_chunk;
      uint32_t* const to = buffer_.data() + (written_ & (size_ - 1));
#if defined(__SSE2__)
      for (size_t j = 0; j < k; ++j) {
        _mm_stream_si32(reinterpret_cast<int*>(to + j), static_cast<int>(targets[j]));
      }
#else
      std::memcpy(to, targets, k * sizeof(uint32_t));
#endif
      written_ += k;
      targets += k;
      n -= k;
      if ((written_ & (chunk_ - 1)) == 0) Publish();
    }
  }
  void Finish() { Publish(); }
  // Whether chunk() more targets, pushed from a chunk boundary, publish without waiting for the
  // consumer (it may have read more than it has said: then this is false for a while).
  bool CanPushChunk() const {
    return written_ - consumed_.load(std::memory_order_acquire) <= size_ - 2 * chunk_;
  }

  // Consumer: the next target (blocks until the producer has published it).
  uint32_t Pop() {
    if (read_ == available_) Acquire();
    // Tells the producer of each chunk read, so CanPushChunk sees room before this side runs
    // dry (no wake-up: a producer asleep in Publish is woken by Acquire).
    if ((read_ & (chunk_ - 1)) == 0) consumed_.store(read_, std::memory_order_release);
    return buffer_[read_++ & (size_ - 1)];
  }

 private:
  void Publish() {
    // Wait while the consumer is a whole ring behind.
    for (uint64_t c = consumed_.load(std::memory_order_acquire); written_ - c > size_ - chunk_;
         c = consumed_.load(std::memory_order_acquire)) {
      consumed_.wait(c, std::memory_order_acquire);
    }
#if defined(__SSE2__)
    _mm_sfence();  // streaming stores are not ordered by the release below
#endif
    published_.store(written_, std::memory_order_release);
    published_.notify_one();
  }
  void Acquire() {
    consumed_.store(read_, std::memory_order_release);
    consumed_.notify_one();
    uint64_t p;
    while ((p = published_.load(std::memory_order_acquire)) == read_) {
      published_.wait(p, std::memory_order_acquire);
    }
    available_ = p;
  }

  const size_t chunk_, size_;   // size_ = chunk_ * kChunks, a power of two: indices are masked
  PageArray<uint32_t> buffer_;  // page aligned: a chunk's streamed lines are whole lines
  // Producer and consumer state live on separate cache lines (no false sharing).
  alignas(64) uint64_t written_ = 0;
  alignas(64) uint64_t read_ = 0;
  uint64_t available_ = 0;
  alignas(64) std::atomic<uint64_t> published_{0};
  alignas(64) std::atomic<uint64_t> consumed_{0};
};

}  // namespace gridfeed::order
