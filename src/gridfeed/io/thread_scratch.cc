#include "gridfeed/io/thread_scratch.h"

#include <array>

#include "gridfeed/core/page_array.h"

namespace gridfeed::io {

std::span<std::byte> ThreadScratch(ScratchSlot slot, size_t bytes) {
  thread_local std::array<PageArray<std::byte>, static_cast<size_t>(ScratchSlot::kCount)> buffers;
  PageArray<std::byte>& b = buffers[static_cast<size_t>(slot)];
  if (b.size() < bytes) b = PageArray<std::byte>(bytes);
  return {b.data(), bytes};
}

}  // namespace gridfeed::io
