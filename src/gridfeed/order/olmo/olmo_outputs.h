// What the offline tools give for an OLMo configuration (the `gridfeed tables` / `samples`
// commands and the Python module's functions): OLMo's global order for the configured epoch
// and DP size with its summary, and dataset[i]'s fields. Offline (no MPI); thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gridfeed/config/options.h"
#include "gridfeed/core/status.h"
#include "gridfeed/order/offline_output.h"

namespace gridfeed::order {

struct OlmoTables {
  std::vector<uint32_t> global_indices;  // OLMo's global_indices for the configured epoch
  std::string summary_json;              // N, W, sizes, seeds, per-file instances and tails
};
// FailedPrecondition for an empty order, InvalidArgument naming the flag or file.
Result<OlmoTables> BuildOlmoTables(const config::JobOptions& options);

// The configured fields of dataset[i] for each index (negative: from the end), stacked.
struct OlmoItems {
  int64_t seq_length = 0;
  std::vector<int64_t> index;      // resolved instance indices
  std::vector<int64_t> input_ids;  // [n, L]
  bool has_label_mask = false, has_attention_mask = false, has_instance_mask = false,
       has_doc_lens = false;
  std::vector<uint8_t> label_mask;      // [n, L]
  std::vector<int64_t> attention_mask;  // [n, L]
  std::vector<uint8_t> instance_mask;   // [n]
  std::vector<int32_t> doc_lens_flat;   // item j: [doc_lens_offsets[j], doc_lens_offsets[j+1])
  std::vector<int64_t> doc_lens_offsets = {0};
  std::string metadata_json;  // a list of {"path": p} or {"label": l}
};
// OutOfRange "<i> is out of bounds for dataset of size <n>" (OLMo's IndexError) before reading.
Result<OlmoItems> ReadOlmoItems(const config::JobOptions& options,
                                const std::vector<int64_t>& indices);

struct PipelineKind;
// The registry's entry (registry.h): `tables` writes global_indices.npy and summary.json (the
// Python result: {"summary", "global_indices"}); `samples` reads instance indices (negative:
// from the end; the command's text "A:B" or single indices, at most 2^24) and writes index,
// input_ids and the configured masks, doc lengths and metadata.json.
const PipelineKind& OlmoKind();

}  // namespace gridfeed::order
