// TableImage: every table of a BuiltDatasets in one contiguous, position-independent byte
// image, so world rank 0 can broadcast it and readers can use it in place (in a node-shared
// window) without copying or rebuilding.
//
// Layout (little endian): "GFTABLES" magic, u64 version, u64 directory length, the directory
// as JSON (splits, datasets, array offsets and counts), zero padding to 8 bytes, then the
// arrays, each 8-byte aligned. ParseTableImage validates every offset and count against the
// image size before handing out views.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gridfeed/core/status.h"
#include "gridfeed/order/dataset_builder.h"

namespace gridfeed::order {

// Writes the image of `built` straight into memory of the caller's choosing (e.g. a shared
// window), freeing each table as soon as it is copied, so the tables and the image are never
// both held in full. Create takes the tables over; WriteTo may be called once.
class TableImageWriter {
 public:
  static std::unique_ptr<TableImageWriter> Create(BuiltDatasets&& built);
  ~TableImageWriter();
  size_t size() const;
  // REQUIRES: `dst` holds size() bytes and is 8-byte aligned.
  void WriteTo(std::byte* dst);

 private:
  struct Plan;
  TableImageWriter();
  std::unique_ptr<Plan> plan_;
};

// The image as a byte vector (for tests and tools).
std::vector<std::byte> SerializeTables(BuiltDatasets built);

struct ImageMid {
  std::string prefix;
  int64_t begin = 0, end = 0;
  GptTablesView tables;
};

struct ImageSplit {
  bool blended = false;
  int64_t length = 0;
  std::vector<ImageMid> mids;
  std::span<const int32_t> dataset_index;
  std::span<const int64_t> dataset_sample_index;

  std::pair<int, int64_t> Locate(int64_t p) const {
    if (!blended) return {0, p};
    return {dataset_index[p], dataset_sample_index[p]};
  }
};

// Views into `image`, which must outlive the result and be 8-byte aligned.
struct TableImage {
  std::array<std::optional<ImageSplit>, 3> splits;
  int64_t pad_id_used = -1;
  // Every distinct data prefix, in order of first use.
  std::vector<std::string> prefixes;
};

Result<TableImage> ParseTableImage(std::span<const std::byte> image);

// XXH3-64 of the image: the digest every reader checks after the broadcast.
uint64_t TableImageDigest(std::span<const std::byte> image);

}  // namespace gridfeed::order
