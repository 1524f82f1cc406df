// What the offline tools give for Megatron's GPT order (registry.h): the index tables as
// Megatron's builder caches them, and samples as GPTDataset[i] returns them. Offline (no MPI);
// thread-compatible.
#pragma once

#include "gridfeed/config/options.h"
#include "gridfeed/core/status.h"
#include "gridfeed/order/offline_output.h"

namespace gridfeed::order {

struct PipelineKind;

// Per split and source: document_index, sample_index, shuffle_index (their dtypes as
// Megatron's); per blend: dataset_index (int16, int32 beyond 32767 sources) and
// dataset_sample_index; summary.json with the split's type, length, sources, epochs, weights.
Result<OfflineOutput> MegatronTables(const config::JobOptions& options, ArraySink* early);
// items_index, tokens, labels, loss_mask, position_ids (+ attention_mask uint8 [n, 1, L, L] with
// --create-attention-mask, + dataset_id int16 for a blend) of any pipeline whose view reads
// GPT samples (Megatron's, a mixture's); one sequence length over all positions.
Result<OfflineOutput> GptSamples(const config::JobOptions& options,
                                 const PositionRequest& positions);

const PipelineKind& MegatronKind();

}  // namespace gridfeed::order
