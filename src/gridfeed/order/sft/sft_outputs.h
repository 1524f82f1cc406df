// What the offline tools give for --sft (registry.h), in the layout of the SFT golden cases:
// `tables`: each blended split's <split>/blend/{dataset_index,dataset_sample_index}.npy and
// summary.json (every split's length, row ranges and sample counts); `samples`:
// items_index, tokens, labels, loss_mask, position_ids, cu_seqlens [n, L + 1], max_seqlen,
// row_index (+ dataset_id for a blend) of the positions. Offline; thread-compatible.
#pragma once

namespace gridfeed::order {
struct PipelineKind;
}  // namespace gridfeed::order

namespace gridfeed::order::sft {

const PipelineKind& SftKind();

}  // namespace gridfeed::order::sft
