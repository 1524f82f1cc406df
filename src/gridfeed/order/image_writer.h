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
};

// The digest every node checks after the broadcast: XXH3-64 of the image up to 64 MiB, else
// XXH3-64 (seeded with the size) of the XXH3-64 of each 64 MiB block, the blocks hashed on up
// to 8 threads. Only compared within one job: not stored anywhere.
uint64_t ImageDigest(std::span<const std::byte> image);

}  // namespace gridfeed::order
