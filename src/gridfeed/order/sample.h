// Assembly of one GPT sample exactly as Megatron's GPTDataset.__getitem__: gather tokens
// across sequences, pad, split into tokens/labels, masks and positions, pad clean-up. The whole
// sample, every field; sample_fields.h writes only some fields, or a CP slice, in place.
// Megatron's loss-mask cache (whose result depends on which item a worker fetched first) is
// not reproduced: every sample's masks are computed from that sample alone.
// Thread safe (each call writes only its `out`, through a per-thread scratch).
#pragma once

#include <cstdint>
#include <vector>

#include "gridfeed/io/indexed_dataset.h"
#include "gridfeed/order/gpt_tables.h"

namespace gridfeed::order {

// The pad id samples use: Megatron's NullTokenizer pad collides with its EOD, and then -1 is
// used instead (so padding never looks like a document end).
inline int64_t PadIdUsed(int64_t pad_id, int64_t eod_id) { return pad_id == eod_id ? -1 : pad_id; }

struct SampleOptions {
  int64_t seq_length = 0;
  bool add_extra_token = true;
  int64_t eod_id = 0;
  int64_t pad_id = -1;  // after the pad/EOD collision check
  bool reset_position_ids = false;
  bool reset_attention_mask = false;
  bool eod_mask_loss = false;
  bool create_attention_mask = false;
};

struct Sample {
  std::vector<int64_t> tokens;          // [S]
  std::vector<int64_t> labels;          // [S]
  std::vector<float> loss_mask;         // [S]
  std::vector<int64_t> position_ids;    // [S]
  std::vector<uint8_t> attention_mask;  // [S*S], 1 = masked out; empty unless created
  // Packed sequences (OrderView::packed()): boundaries [S + 1], right-padded with S, and the
  // longest sequence. Empty / 0 otherwise.
  std::vector<int32_t> cu_seqlens;
  int32_t max_seqlen = 0;
};

// Sample `index` (a position in the dataset, before shuffle_index) of a GPT dataset.
void AssembleSample(const io::IndexedDataset& dataset, const GptTablesView& tables, int64_t index,
                    const SampleOptions& options, Sample* out);

}  // namespace gridfeed::order
