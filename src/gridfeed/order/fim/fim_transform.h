// GPTFIMDataset's rearrangement of one sample's L + 1 token window into fill-in-the-middle
// form, bit for bit (design: shared/design/megatron-sft-fim.md part B): segments between FIM
// EOD tokens, optional split-sample fragments, PERMUTE on decoded text (PSM or SPM), then cut or
// FIM-pad to L + 1 tokens. The GPT masks and positions are computed afterwards from the result
// (fim_sample.h). Pure apart from the stream it draws from; thread compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gridfeed/core/status.h"
#include "gridfeed/order/fim/fim_random.h"
#include "gridfeed/text/text_tokenizer.h"

namespace gridfeed::order::fim {

struct FimIds {
  int64_t prefix = 0, middle = 0, suffix = 0, pad = 0, eod = 0;
  std::optional<int64_t> split;  // --fim-split-sample's id
};

struct FimConfig {
  double rate = 0.5;                     // --fim-rate
  double spm_rate = 0.5;                 // --fim-spm-rate
  double fragment_rate = 0;              // --fim-fragment-rate (used with a split id only)
  std::optional<std::string> no_prefix;  // --fim-no-prefix (UTF-8), compared to decoded text
  FimIds ids;
};

// The FIM form of `window`, cut or padded (FIM pad) to `out_length` tokens. Errors only from the
// tokenizer (text it cannot decode or encode), naming the window's tokens it worked on.
Result<std::vector<int64_t>> FimTransform(const text::TextTokenizer& tokenizer,
                                          const FimConfig& config, std::span<const int64_t> window,
                                          int64_t out_length, FimRandom* rng);

}  // namespace gridfeed::order::fim
