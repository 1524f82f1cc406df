// Megatron's SFT as a gridfeed pipeline (order/pipeline.h): selected by --sft. World rank 0
// opens the JSON Lines files and the tokenizer and lays out the splits (sft_dataset.h); the
// broadcast image is small (every file's size and row count, so a reader proves it opened the
// same files); each reader opens the files itself and recomputes the layout, a pure function
// of the options and the row counts.
//
// The view is packed(): the feeder hands micro-batches over as Megatron's get_batch leaves them
// for --sft (flattened, cu_seqlens merged, THD CP slices; thd.h). Read() gives one whole sample
// with cu_seqlens [S + 1] and max_seqlen; a row that fails to tokenize or pack (Megatron fails
// there too) makes Read throw std::runtime_error naming the file and row, and ReadPacked return
// it as an error.
//
// Thread safety: as OrderView (const methods from any thread once the stores are open).
#pragma once

#include <memory>

#include "gridfeed/config/options.h"
#include "gridfeed/order/pipeline.h"

namespace gridfeed::order::sft {

std::unique_ptr<Pipeline> MakeSftPipeline(const config::JobOptions& options);

}  // namespace gridfeed::order::sft
