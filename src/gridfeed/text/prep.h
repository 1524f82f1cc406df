// `gridfeed prep`: JSONL -> Megatron .bin/.idx (the role of Megatron's preprocess_data.py).
//
// Each input line is one JSON object; the value under `json_key` becomes one document of one
// or more sequences. Lines are encoded on `workers` threads in batches and written strictly in
// input order, so the output does not depend on the thread count. Output appears under
// `output_prefix` only when complete (temporary names, renamed at the end).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "gridfeed/core/status.h"
#include "gridfeed/io/dtype.h"
#include "gridfeed/text/tokenizer_spec.h"

namespace gridfeed::text {

struct PrepOptions {
  std::string input;          // .jsonl, plain or gzip
  std::string output_prefix;  // writes PREFIX.bin and PREFIX.idx
  std::string json_key = "text";
  std::string tokenizer_model;  // SentencePiece model or gf_tokenizer.json (or its folder)
  // --tokenizer-type, --vocab-file, --merge-file, --tiktoken-*, --tokenizer-special-tokens; its
  // `model` and `vocab_size` are ignored (tokenizer_model and vocab_size fill them).
  TokenizerSpec tokenizer;
  bool pretokenized = false;          // the key holds token ids
  std::optional<int64_t> vocab_size;  // required with `pretokenized`; decides the dtype
  bool append_eod = false;            // append eod_id to the last sequence of a document
  std::optional<int64_t> eod_id;      // default: the tokenizer's EOS; only with append_eod
  bool skip_bad_lines = false;        // count and skip instead of stopping
  int workers = 0;                    // 0 = all cores
  bool progress = false;              // live progress line on stderr
};

struct PrepStats {
  int64_t lines = 0;
  int64_t documents = 0;
  int64_t sequences = 0;
  uint64_t tokens = 0;
  int64_t skipped_lines = 0;
  double seconds = 0;
  io::DType dtype = io::DType::kUInt16;
  std::string first_skipped;  // the first skipped line's problem, for the summary
};

Result<PrepStats> RunPrep(const PrepOptions& options);

}  // namespace gridfeed::text
