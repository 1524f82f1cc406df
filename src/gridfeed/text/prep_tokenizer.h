// Tokenizers used by `gridfeed prep`.
//
// A tokenizer turns the value of one JSON key into the sequences of one document.
// Encode is const and thread safe, so prep's worker threads share one tokenizer.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gridfeed/core/status.h"

namespace gridfeed::text {

using Sequence = std::vector<int64_t>;

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // `value` is the JSON value of the key. InvalidArgument describes what is wrong with it
  // (the caller adds the line number).
  virtual Result<std::vector<Sequence>> Encode(const nlohmann::json& value) const = 0;
  virtual int64_t vocab_size() const = 0;
  // The tokenizer's own end-of-document id, if it has one.
  virtual std::optional<int64_t> eos_id() const = 0;
};

class TextTokenizer;

// Any text tokenizer (text_tokenizer.h). Strings are encoded as one sequence; a list of strings
// as one sequence per entry that encodes to something.
std::unique_ptr<Tokenizer> MakePrepTokenizer(std::unique_ptr<TextTokenizer> text);

// What `--tokenizer-model PATH` names: a SentencePiece model file, a gf_tokenizer.json or a
// folder holding one (LoadTextTokenizer decides by content).
Result<std::unique_ptr<Tokenizer>> MakeTextTokenizer(const std::string& path);

// A SentencePiece model file. Strings are encoded as one sequence; a list of strings as one
// sequence per non-empty entry (like Megatron's preprocessing).
Result<std::unique_ptr<Tokenizer>> MakeSentencePieceTokenizer(const std::string& model_path);

// Already tokenized input: a list of ints is one sequence, a list of lists several sequences;
// empty lists give no sequence (an empty document has none, as in text mode). Every id must lie
// in [0, vocab_size).
std::unique_ptr<Tokenizer> MakePretokenizedTokenizer(int64_t vocab_size);

}  // namespace gridfeed::text
