// What `gridfeed tables` and `gridfeed samples` write for --sft, in the layout of the SFT golden
// cases: each split's blend tables + summary.json, and the fields of dataset[i] as .npy files.
// Offline; not thread safe.
#pragma once

#include <string>

#include "gridfeed/config/options.h"
#include "gridfeed/core/status.h"
#include "gridfeed/order/split.h"

namespace gridfeed::app {

// DIR/<split>/blend/{dataset_index,dataset_sample_index}.npy for blended splits and
// DIR/summary.json (every split's length, row ranges and sample counts).
Status WriteSftTables(const config::JobOptions& o, const std::string& out);
// DIR/{items_index,tokens,labels,loss_mask,position_ids,cu_seqlens,max_seqlen,row_index}.npy
// (+ dataset_id.npy for a blend) of `positions` (positions.h) of `split`.
Status WriteSftSamples(const config::JobOptions& o, order::Split split,
                       const std::string& positions, const std::string& out);

}  // namespace gridfeed::app
