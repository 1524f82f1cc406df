// Megatron's SFT datasets of a job: the JSON Lines files, the tokenizer and prompt format,
// the split layout (sft_layout.h) and the packing (pack.h), so that Read(split, position) is
// what Megatron's top-level dataset[position] returns for --sft.
//
// Options used: --data-path (or per-split paths), --split, --train/valid/test-samples,
// --seq-length, --tokenizer-model, --sft-tokenizer-prompt-format, --mid-level-dataset-surplus
// and --context-parallel-size (SFTDataset pads each conversation to a multiple of 2 x CP).
//
// Thread safety: immutable after Open; Read may be called from many threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gridfeed/config/options.h"
#include "gridfeed/core/status.h"
#include "gridfeed/text/text_tokenizer.h"
#include "gridfeed/order/sft/conversation.h"
#include "gridfeed/order/sft/jsonl_rows.h"
#include "gridfeed/order/sft/pack.h"
#include "gridfeed/order/sft/sft_layout.h"

namespace gridfeed::order::sft {

// Where one packed sample came from.
struct SftSource {
  int dataset = 0;  // mid-level dataset of the split (0 without a blend)
  int64_t row = 0;  // its JSON Lines row
};

class SftDataset {
 public:
  // Opens the tokenizer and every file (relative paths from the working directory) and lays
  // out the splits. Errors name the flag or file.
  static Result<std::unique_ptr<SftDataset>> Open(const config::JobOptions& options);

  const SftLayout& layout() const { return layout_; }
  int64_t length(Split split) const;
  bool is_blend(Split split) const;
  int64_t pad_id() const { return formatter_->pad_id(); }
  int64_t seq_length() const { return seq_length_; }
  const text::TextTokenizer& tokenizer() const { return *tokenizer_; }
  // Every JSON Lines file, each once, and its rows. REQUIRES: `path` is one of paths().
  const std::vector<std::string>& paths() const { return paths_; }
  const JsonlRows& file(const std::string& path) const;
  // XXH3-64 of the tokenizer's file (it decides every token).
  uint64_t tokenizer_digest() const { return tokenizer_digest_; }
  // The file behind mid-level dataset `dataset` of `split`.
  const JsonlRows& rows(Split split, int dataset) const;
  SftSource Locate(Split split, int64_t position) const;
  // Megatron's dataset[position] of `split`. Errors name the file and row (a row Megatron
  // fails on: malformed, an empty assistant message, nothing to pack).
  // REQUIRES: 0 <= position < length(split).
  Result<PackedSample> Read(Split split, int64_t position, SftSource* source = nullptr) const;

 private:
  SftDataset() = default;
  int64_t seq_length_ = 0;
  int64_t cp_ = 1;
  uint64_t tokenizer_digest_ = 0;
  std::unique_ptr<text::TextTokenizer> tokenizer_;
  std::unique_ptr<ChatFormatter> formatter_;
  std::vector<std::string> paths_;
  std::vector<JsonlRows> files_;  // paths_[k]'s rows
  SftLayout layout_;
  std::array<std::vector<int>, 3> file_of_mid_;  // index into files_ per split and mid
};

}  // namespace gridfeed::order::sft
