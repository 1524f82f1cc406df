// What the offline tools give for --fim-data (registry.h): `tables` are GPT's index tables
// (megatron_outputs.h); `samples` writes items_index, tokens, labels, loss_mask, position_ids
// (+ attention_mask without inter-document masking, + cu_seqlens [n, L + 1] and max_seqlen
// with it, + dataset_id for a blend, + window_before_fim [n, L + 1] when every window is
// whole) of the positions in the order given, drawn from one fresh dataset's stream.
// Offline; thread-compatible.
#pragma once

namespace gridfeed::order {
struct PipelineKind;
}  // namespace gridfeed::order

namespace gridfeed::order::fim {

const PipelineKind& FimKind();

}  // namespace gridfeed::order::fim
