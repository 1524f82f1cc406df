// What `gridfeed samples --fim-data` writes: the fields of Megatron's GPTFIMDataset items as
// .npy files, in the layout of the FIM golden items. Offline; not thread safe.
#pragma once

#include <string>

#include "gridfeed/config/options.h"
#include "gridfeed/core/status.h"
#include "gridfeed/order/split.h"

namespace gridfeed::app {

// DIR/{items_index,tokens,labels,loss_mask,position_ids}.npy (+ attention_mask with
// --create-attention-mask, cu_seqlens/max_seqlen in its place with
// --dataloader-inter-document-masking,
// dataset_id for a blend, window_before_fim) of `positions` (positions.h) of `split`, fetched
// in the order given from one freshly opened dataset: each mid-level dataset's FIM stream
// starts at --seed and advances with every position it serves (order/fim/fim_dataset.h).
Status WriteFimSamples(const config::JobOptions& o, order::Split split,
                       const std::string& positions, const std::string& out);

}  // namespace gridfeed::app
