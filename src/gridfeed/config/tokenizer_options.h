// The tokenizer a job's data options name, as one TokenizerSpec: the single place where
// --tokenizer-model, --tokenizer-type, --vocab-file, --merge-file, --tiktoken-pattern,
// --tiktoken-num-special-tokens, --tokenizer-special-tokens, --special-tokens and --vocab-size
// become what text::LoadTokenizer reads (SFT, FIM, Validate).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gridfeed/config/options.h"
#include "gridfeed/text/tokenizer_spec.h"

namespace gridfeed::config {

// An empty --tokenizer-special-tokens is "not given" (Megatron's nargs='+' cannot be empty).
text::TokenizerSpec TokenizerSpecOf(const DataOptions& d);

// True when any tokenizer flag is given (a model or a type).
bool HasTokenizer(const DataOptions& d);

// The tokenizer the options name (CheckTokenizerSpec's errors as they are; a load error is
// prefixed with the flag naming the file), and a digest of the bytes it was read from: its file
// (for a Hugging Face folder also tokenizer_config.json and special_tokens_map.json, where
// present) and the merge file, in that order; `bytes` is their total size. A single file's
// digest is XXH3-64 of its bytes.
struct DataTokenizer {
  std::unique_ptr<text::TextTokenizer> tokenizer;
  uint64_t xxh3 = 0;
  int64_t bytes = 0;
};
Result<DataTokenizer> LoadDataTokenizer(const DataOptions& d);

// The files the tokenizer is read from (model, vocab and merge files that are given), for the
// feeder's file identity checks.
std::vector<std::string> TokenizerFiles(const DataOptions& d);

}  // namespace gridfeed::config
