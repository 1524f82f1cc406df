// Megatron's GPTFIMDataset for `gridfeed samples --fim-data`: GPTDataset's index tables (built
// as BlendedMegatronDatasetBuilder builds them), each fetched sample's L + 1 token window
// rearranged by FimTransform (fim_transform.h) and then assembled into GPT fields from the
// result (masks with the tokenizer's eod, pad handling with the tokenizer's pad).
//
// Random stream: like Megatron, one numpy RandomState(--seed) per mid-level dataset object,
// created fresh when this object is opened and advanced by every Read of a position it serves,
// in call order. Reading positions in Megatron's fetch order therefore reproduces its items;
// reading a position twice gives the second fetch's result. Not thread safe.
#pragma once

#include <array>
#include <memory>
#include <span>
#include <vector>

#include "gridfeed/config/options.h"
#include "gridfeed/core/status.h"
#include "gridfeed/order/dataset_builder.h"
#include "gridfeed/order/fim/fim_transform.h"
#include "gridfeed/order/sample.h"
#include "gridfeed/order/split.h"
#include "gridfeed/order/table_view.h"
#include "gridfeed/text/text_tokenizer.h"

namespace gridfeed::order::fim {

struct FimSource {
  int dataset = 0;              // the blend source (mid-level dataset)
  int64_t sample = 0;           // position in that source
  std::vector<int64_t> window;  // the L + 1 tokens before FIM
};

// What FIM needs beside the GPT tables, the same on every rank: the tokenizer (loaded from
// --tokenizer-model with --special-tokens), FIM's ids and rates, and the GPT side (the
// tokenizer's eod and pad: the options the tables are built from and the samples assembled with).
struct FimSetup {
  std::shared_ptr<const text::TextTokenizer> tokenizer;
  uint64_t tokenizer_xxh3 = 0;  // of its file
  int64_t tokenizer_bytes = 0;
  FimConfig fim;
  config::DataOptions gpt;
  SampleOptions sample_options;
  bool inter_document_masking = false;
  uint32_t seed = 0;
};
// InvalidArgument names the flag of a token the tokenizer does not have.
Result<FimSetup> OpenFimSetup(const config::JobOptions& o);

// One fetch: the L + 1 token `window` rearranged with draws from `rng`, then assembled into
// GPT fields: tokens, labels, loss_mask, position_ids, attention_mask (with
// --create-attention-mask), cu_seqlens/max_seqlen (with --dataloader-inter-document-masking).
Status FimSample(const FimSetup& setup, std::span<const int64_t> window, FimRandom* rng,
                 Sample* out);

// `st`, an error of FimSample, with the sample it was making: "FIM sample at <split> position
// P (sample S of the store 'PREFIX'): ...".
Status FimSampleError(const Status& st, Split split, int64_t position, const std::string& store,
                      int64_t sample);

class FimDataset {
 public:
  // Loads --tokenizer-model with --special-tokens, resolves the FIM token ids and builds the
  // tables. InvalidArgument names the flag of a token the tokenizer does not have.
  static Result<std::unique_ptr<FimDataset>> Open(const config::JobOptions& o);

  int64_t length(Split split) const;
  bool is_blend(Split split) const;
  int64_t seq_length() const { return setup_.sample_options.seq_length; }
  const SampleOptions& sample_options() const { return setup_.sample_options; }
  const text::TextTokenizer& tokenizer() const { return *setup_.tokenizer; }
  // The FIM ids of a split's source (the same for every source: one tokenizer).
  const FimConfig& fim_config() const { return setup_.fim; }

  // The next fetch of top-level position p of `split` (REQUIRES 0 <= p < length(split)):
  // tokens, labels, loss_mask, position_ids, attention_mask (with --create-attention-mask),
  // cu_seqlens/max_seqlen (with --dataloader-inter-document-masking). `trace`, if given,
  // receives this fetch's draws.
  Status Read(Split split, int64_t p, Sample* out, FimSource* source,
              std::vector<FimDraw>* trace = nullptr);

 private:
  FimDataset() = default;
  FimSetup setup_;
  BuiltDatasets built_;
  TableView view_;
  std::array<std::vector<std::unique_ptr<FimRandom>>, 3> streams_;  // per split, per source
};

}  // namespace gridfeed::order::fim
