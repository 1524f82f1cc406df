// Scratch memory per thread for passes over many files (or many small datasets' tables), kept
// until the thread ends. A fresh
// buffer per file (a PageArray, or malloc's own mapping above 128 KiB) faulted its pages in,
// zeroed them and unmapped them again for each of a blend's 1,000 indexes, and every unmap of
// a process with several threads interrupts the others' cores (TLB shootdowns).
//
// Each slot is one buffer, page aligned (MappedFileReader::ReadAt copies straight into it);
// the span returned is valid on the calling thread until it asks for the same slot again.
// Thread safety: each thread has its own buffers. Throws std::bad_alloc like PageArray.
#pragma once

#include <cstddef>
#include <span>

namespace gridfeed::io {

enum class ScratchSlot {
  kIndexLengths,
  kIndexPointers,
  kIndexFeed,
  kIndexDigest,
  kTablePairs,  // a small table build's lengths and (id, length) pairs (order/gpt_tables.cc)
  kCount
};

// At least `bytes` bytes of the calling thread's buffer `slot` (contents unspecified).
std::span<std::byte> ThreadScratch(ScratchSlot slot, size_t bytes);

// The same, as `count` elements of a trivially copyable T.
template <typename T>
std::span<T> ThreadScratchOf(ScratchSlot slot, size_t count) {
  return {reinterpret_cast<T*>(ThreadScratch(slot, count * sizeof(T)).data()), count};
}

}  // namespace gridfeed::io
