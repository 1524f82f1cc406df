// A {token: id} vocabulary as WordPiece and WordLevel models read it from tokenizer.json, with
// the reverse table. Ids must be in [0, 2^31) and distinct (the library would keep an arbitrary
// one of two tokens sharing an id), and not so sparse that the reverse table would dwarf the
// vocabulary.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gridfeed/text/hf/bpe_model.h"
#include "gridfeed/text/hf/components.h"

namespace gridfeed::text::hf {

class TokenVocab {
 public:
  // `j` is the "vocab" object; `where` its location.
  static Result<TokenVocab> Parse(const nlohmann::json& j, const JsonWhere& where);

  TokenVocab(TokenVocab&&) noexcept = default;
  TokenVocab& operator=(TokenVocab&&) noexcept = default;

  std::optional<int32_t> Find(std::string_view token) const {
    auto it = ids_.find(token);
    if (it == ids_.end()) return std::nullopt;
    return it->second;
  }
  std::optional<std::string_view> Token(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= by_id_.size() || by_id_[id] == nullptr) {
      return std::nullopt;
    }
    return std::string_view(*by_id_[id]);
  }
  // Number of tokens (the library's get_vocab_size for these models).
  int64_t size() const { return static_cast<int64_t>(ids_.size()); }

 private:
  TokenVocab() = default;
  StringIdMap ids_;
  std::vector<const std::string*> by_id_;  // into ids_' keys (stable in an unordered_map)
};

}  // namespace gridfeed::text::hf
