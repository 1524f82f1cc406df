// One packed SFT sample as Megatron's SFTDataset.__getitem__ builds it: a row's conversations,
// tokenized, concatenated into one sequence of L + 1 tokens (cut or padded), with the
// boundaries of its sequences (cu_seqlens) for THD attention. Algorithm and traps: the design
// note on Megatron's SFT, part A "Packing one item" (tests/golden/megatron-sft/README.md has
// the field table).
//
// Pure functions; thread safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gridfeed/core/status.h"

namespace gridfeed::order::sft {

// One conversation as ChatFormatter::Tokenize returns it (targets: -100 on prompt tokens).
struct TokenizedConversation {
  std::vector<int64_t> tokens;
  std::vector<int64_t> targets;
};

// The fields of one packed sample, L = seq_length.
struct PackedSample {
  std::vector<int64_t> tokens;        // [L]
  std::vector<int64_t> labels;        // [L] targets shifted by one; pad on padding
  std::vector<float> loss_mask;       // [L] 0 where the label is pad or -100
  std::vector<int64_t> position_ids;  // [L] restart per conversation; padding continues
  std::vector<int32_t> cu_seqlens;    // [L + 1] boundaries, right-padded with L
  int32_t max_seqlen = 0;             // the longest sequence
  int32_t num_cu_seqlens = 0;         // entries of cu_seqlens before the padding with L
};

// Packs conversations in order: each appended (padded to a multiple of 2 x `cp` when cp > 1),
// the pack cut at L + 1 tokens with its last token replaced by `pad`, or padded to L + 1 with
// `pad` (positions continuing the last sequence). Conversations are added one at a time, as
// Megatron tokenizes them, so one after the cut is never tokenized (nor its errors raised).
// Thread-compatible.
class Packer {
 public:
  // REQUIRES: seq_length >= 1, cp >= 1.
  Packer(int64_t seq_length, int64_t pad, int64_t cp);
  // Appends one conversation; true when the pack is full (add nothing more).
  // REQUIRES: tokens and targets of equal length; not full.
  bool Add(const TokenizedConversation& conversation);
  bool full() const { return cut_; }
  // The sample. InvalidArgument naming `where` when nothing was packed (no conversation, or
  // only ones of zero tokens: Megatron crashes there) or when there are more sequences than
  // cu_seqlens has room for.
  Result<PackedSample> Finish(const std::string& where);

 private:
  void AppendPad(int64_t count);
  int64_t L_, pad_, cp_;
  std::vector<int64_t> T_, G_, P_, cu_ = {0};
  bool cut_ = false;
};

// All of `conversations` through one Packer.
Result<PackedSample> PackConversations(std::span<const TokenizedConversation> conversations,
                                       int64_t seq_length, int64_t pad, int64_t cp,
                                       const std::string& where);

}  // namespace gridfeed::order::sft
