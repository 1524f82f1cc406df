// Megatron's FIM (--fim-data) as a Pipeline (order/pipeline.h): GPT's tables and image
// (megatron_pipeline.h), built with the tokenizer's eod and pad, and a view that rearranges
// each fetched sample's window into fill-in-the-middle form (fim_dataset.h's FimSample).
//
// The random streams (a fetch-ordered view, pipeline.h): as in Megatron, where every DP rank
// builds its own datasets and each DataLoader worker holds a copy, each reader keeps one numpy
// RandomState(--seed) per worker and per blend source, fresh when the run (or its resume)
// starts. With --num-workers W > 0, worker w fetches this DP rank's micro-batches w, w + W, ...
// of the run, in order; with W = 0 one stream fetches them all. Every reader of a DP rank (first
// and last stage, each CP rank) walks the same micro-batches, so they draw the same. Offline
// views draw from one stream in call order (`samples`), or walk a DP rank's micro-batches from
// a run's first step (audit/replay.h's WalkedRecord), so a ledger's FIM records are recomputed.
// --dataloader-inter-document-masking (cu_seqlens per sample) is not fed yet.
#pragma once

#include <memory>

#include "gridfeed/config/options.h"
#include "gridfeed/order/pipeline.h"

namespace gridfeed::order::fim {

std::unique_ptr<Pipeline> MakeFimPipeline(const config::JobOptions& options);

}  // namespace gridfeed::order::fim
