// A node's share of Megatron-format tables: the table image (table_image.h) of only the
// positions one node's readers read (--node-window), so a node holds what its readers read
// rather than the whole order. Each held sample keeps its own copy of the sample-index rows and
// the document ids it spans; the view (SplitView::held) maps a held position to them, and every
// sample reads, and records, exactly as from the whole image. Pure; thread safe.
#pragma once

#include <memory>
#include <vector>

#include "gridfeed/core/status.h"
#include "gridfeed/order/dataset_builder.h"
#include "gridfeed/order/image_writer.h"
#include "gridfeed/order/split.h"

namespace gridfeed::order {

// The image of positions `held` (sorted, unique, in the split) of `split` of `built`, which
// must outlive nothing (everything is copied). `keep_source_index`: the image also keeps the
// split's source of every position (what a checkpoint counts on world rank 0). InvalidArgument
// for held positions that are not sorted, unique and in the split.
Result<std::unique_ptr<ImageWriter>> NodeImageOf(const BuiltDatasets& built, Split split,
                                                 std::vector<int64_t> held, bool keep_source_index);

}  // namespace gridfeed::order
