// TableImage: every table of a BuiltDatasets in one contiguous, position-independent byte
// image, so world rank 0 can broadcast it and readers can use it in place (in a node-shared
// window) without copying or rebuilding.
//
// Layout (little endian): "GFTABLES" magic, u64 version, u64 directory length, the directory
// as JSON (splits, sources, weights, array offsets and counts) followed by blanks up to a 4 KiB
// boundary (older writers: zero padding to 8 bytes), then the arrays, each 8-byte aligned (from
// 64 KiB up, page aligned). ParseTableImage validates every offset and count against the image
// size before handing out views.
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
#include "gridfeed/order/image_writer.h"
#include "gridfeed/order/table_view.h"

namespace gridfeed::order {

// Writes the image of `built` straight into memory of the caller's choosing (e.g. a shared
// window), freeing each table as soon as it is copied, so the tables and the image are never
// both held in full. Create takes the tables over; WriteTo may be called once.
// A node image's (node_image.h) tables of one source: its held samples as GptTablesView's
// `held` form describes them.
struct HeldSource {
  std::vector<int32_t> document_index;
  std::vector<int32_t> first_doc32;  // exactly one of the two is used
  std::vector<int64_t> first_doc64;
  std::vector<int32_t> start_offset, end_offset;
};

// What a node image adds to its one split (the split's mids give prefixes and sizes, their
// tables are replaced): the runs of positions it holds (SplitView), their sources' own samples
// (blended splits), where kept the whole split's dataset_index, and each source's held tables.
struct HeldPositions {
  Split split = Split::kTrain;
  // Every token store of the whole order (TableView::prefixes): a node reads one split, but it
  // opens and proves the same files as the whole image's readers, so checkpoints agree.
  std::vector<std::string> prefixes;
  std::vector<int64_t> run_begin, run_index, held_sample;
  std::vector<int32_t> source_index;
  std::vector<HeldSource> sources;
};

class TableImageWriter final : public ImageWriter {
 public:
  static std::unique_ptr<TableImageWriter> Create(BuiltDatasets&& built,
                                                  std::optional<HeldPositions> held = {});
  ~TableImageWriter() override;
  size_t size() const override;
  void WriteTo(std::byte* dst) override;
  bool leaves_dst_untouched() const override { return true; }

 private:
  struct Plan;
  TableImageWriter();
  std::unique_ptr<Plan> plan_;
};

// The image as a byte vector (for tests and tools).
std::vector<std::byte> SerializeTables(BuiltDatasets built);

// Views into `image`, which must outlive the result and be 8-byte aligned. DataLoss for an
// image whose header, directory or any array does not fit its size, or a node image whose held
// positions are not sorted in the split or do not match its tables.
Result<TableView> ParseTableImage(std::span<const std::byte> image);

}  // namespace gridfeed::order
