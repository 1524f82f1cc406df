// An image of a data order's tables: position independent bytes that world rank 0 writes
// straight into the memory that will be broadcast (a node-shared window), and its digest, which
// every node checks after the broadcast. Implemented by each pipeline's table image.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace gridfeed::order {

class ImageWriter {
 public:
  virtual ~ImageWriter() = default;
  virtual size_t size() const = 0;
  // Writes the image once. REQUIRES: `dst` holds size() bytes and is 8-byte aligned.
  virtual void WriteTo(std::byte* dst) = 0;
  // Whether WriteTo leaves `dst`'s pages to the kernel (core/kernel_copy.h), untouched from
  // user space: its digest then reads them through the kernel too.
  virtual bool leaves_dst_untouched() const { return false; }
};

// The digest every node checks after the broadcast: XXH3-64 of the image up to 64 MiB, else
// XXH3-64 (seeded with the size) of the XXH3-64 of each 64 MiB block, the blocks hashed on up
// to 8 threads. Only compared within one job: not stored anywhere. `untouched`: the image's
// pages were written by the kernel and not touched from user space since (the blocks are then
// read through the kernel, core/kernel_copy.h); the same digest either way.
uint64_t ImageDigest(std::span<const std::byte> image, bool untouched = false);

}  // namespace gridfeed::order
