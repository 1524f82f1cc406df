// One GPT sample's fields written straight where they are consumed (a micro-batch payload):
// only the fields a pipeline stage needs, only this context-parallel rank's zigzag slice
// (cp_zigzag.h), each field in one pass over the gathered tokens, no allocation once the
// scratch has grown. Values are exactly AssembleSample's (sample.h), which is built on this.
// Thread safety: pure apart from the scratch, which one thread uses at a time.
#pragma once

#include <cstdint>
#include <vector>

#include "gridfeed/io/indexed_dataset.h"
#include "gridfeed/order/gpt_tables.h"
#include "gridfeed/order/sample.h"

namespace gridfeed::order {

// Where each field goes; null = not wanted. Not owned. Each points at L = S / cp_size elements
// (the attention mask at L * S bytes: this rank's query rows, every key column), laid out as
// CpZigzagSlice lays out the whole sample's field. REQUIRES S % (2 * cp_size) == 0 when
// cp_size > 1.
struct FieldTargets {
  int64_t* tokens = nullptr;
  int64_t* position_ids = nullptr;
  int64_t* labels = nullptr;
  float* loss_mask = nullptr;
  uint8_t* attention_mask = nullptr;  // written only with SampleOptions::create_attention_mask
  int64_t cp_size = 1;
  int64_t cp_rank = 0;
};

// Memory reused from sample to sample; owned by one thread.
struct AssemblyScratch {
  std::vector<std::byte> gathered;   // the sample's tokens in the store's integer type
  std::vector<int64_t> raw;          // general path: the tokens widened, pad-filled
  std::vector<int64_t> full_tokens;  // whole-sample tokens, when a CP slice must be hashed
  Sample sample;                     // for orders that only assemble whole samples
};

// Writes the wanted fields of sample `index` (a position before shuffle_index) of a GPT dataset.
void AssembleFields(const io::IndexedDataset& dataset, const GptTablesView& tables, int64_t index,
                    const SampleOptions& options, const FieldTargets& out,
                    AssemblyScratch* scratch);

// The S + 1 tokens sample `index` (before shuffle_index) gathers with one extra token whatever
// options.add_extra_token says (what GPTFIMDataset reads), widened to int64, never padded: fewer
// only for a partial last sample. Replaces *window.
void GatherWindow(const io::IndexedDataset& dataset, const GptTablesView& tables, int64_t index,
                  int64_t seq_length, std::vector<int64_t>* window);
// The wanted fields from a given window v of S + 1 tokens (v[i + 1] is input i's label), as
// AssembleFields computes them from a gathered one (masks and positions before the pad clean-up).
void WindowFields(const int64_t* window, const SampleOptions& options, const FieldTargets& out);

// Copies the wanted fields of a whole assembled sample into `out` (the path of orders without
// their own AssembleFields).
void SliceFields(const Sample& sample, int64_t seq_length, const FieldTargets& out);

}  // namespace gridfeed::order
