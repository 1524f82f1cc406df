// The seams of a Hugging Face `tokenizer.json` pipeline (docs/tokenizers.md), as the `tokenizers`
// library runs it on one input text:
//
//   added tokens split the raw text -> Normalizer -> added tokens (normalized: true) split again
//   -> PreTokenizer -> Model on each piece -> post-processor -> ids
//
// and, for decoding, ids -> token strings -> Decoder::DecodeChain -> concatenation.
//
// gridfeed needs ids, not offsets, so a piece is its text plus the one positional fact a
// component reads: whether it starts at offset 0 of the original input (Metaspace's
// prepend_scheme "first"). Components are built from their JSON object by the factories below;
// a type or field value gridfeed does not implement is refused (InvalidArgument naming the type
// and `where`), never approximated.
//
// Thread safety: a built component is immutable; its methods are const and may be called from
// many threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gridfeed/core/status.h"

namespace gridfeed::text::hf {

// Where a JSON value sits, for messages: "FILE: JSON-PATH" (e.g. `.../tokenizer.json:
// pre_tokenizer.pretokenizers[0].pattern`).
struct JsonWhere {
  std::string file;
  std::string path;
  JsonWhere Field(std::string_view name) const;  // path + "." + name
  JsonWhere Index(size_t i) const;               // path + "[i]"
  std::string str() const;                       // "file: path"
};

// One split of the text between pre-tokenization steps. Never empty in a pipeline: the library
// drops empty splits after every step, and so do the components here.
struct Piece {
  std::string text;        // UTF-8 (normalized) text of the split
  bool at_origin = false;  // starts at byte 0 of the original input text
};

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // Rewrites `text` (valid UTF-8) in place as the library's normalizer does.
  virtual Status Normalize(std::string* text) const = 0;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Splits each piece further (or rewrites it: ByteLevel maps bytes to its alphabet, Metaspace
  // replaces spaces). Empty results are dropped.
  virtual Status PreTokenize(std::vector<Piece>* pieces) const = 0;
};

class Decoder {
 public:
  virtual ~Decoder() = default;
  // The library's `decode_chain`: token strings in, token strings out; the caller joins them.
  virtual Result<std::vector<std::string>> DecodeChain(std::vector<std::string> tokens) const = 0;
};

class Model {
 public:
  virtual ~Model() = default;
  // Appends the ids of one pre-tokenized piece.
  virtual Status Tokenize(std::string_view piece, std::vector<int32_t>* ids) const = 0;
  virtual std::optional<int32_t> TokenToId(std::string_view token) const = 0;
  virtual std::optional<std::string_view> IdToToken(int32_t id) const = 0;
  // Size of the model's vocabulary (the largest id + 1 for the library's `get_vocab_size(false)`).
  virtual int64_t vocab_size() const = 0;
};

// Factories: `j` is the component's JSON object (never null here: a null component is absent
// and the caller skips it). Each refuses an unknown "type" or an unsupported value by name.
Result<std::unique_ptr<Normalizer>> MakeNormalizer(const nlohmann::json& j, const JsonWhere& where);
Result<std::unique_ptr<PreTokenizer>> MakePreTokenizer(const nlohmann::json& j,
                                                       const JsonWhere& where);
Result<std::unique_ptr<Decoder>> MakeDecoder(const nlohmann::json& j, const JsonWhere& where);
Result<std::unique_ptr<Model>> MakeModel(const nlohmann::json& j, const JsonWhere& where);

}  // namespace gridfeed::text::hf
