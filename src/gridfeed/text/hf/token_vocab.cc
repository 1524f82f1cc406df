#include "gridfeed/text/hf/token_vocab.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace gridfeed::text::hf {
namespace {

// Largest vocabulary read; larger ones are refused before building tables.
constexpr size_t kMaxTokens = size_t{1} << 24;
// Reverse tables are at most this many times the number of tokens (+ 64Ki).
constexpr int64_t kMaxIdSpread = 4;

}  // namespace

Result<TokenVocab> TokenVocab::Parse(const nlohmann::json& j, const JsonWhere& where) {
  if (!j.is_object()) return InvalidArgument("expected a {token: id} object at " + where.str());
  if (j.size() > kMaxTokens) {
    return InvalidArgument(where.str() + ": " + std::to_string(j.size()) +
                           " tokens, more than gridfeed reads (" + std::to_string(kMaxTokens) +
                           ")");
  }
  TokenVocab v;
  v.ids_.reserve(j.size());
  int64_t max_id = -1;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > INT32_MAX) {
      return InvalidArgument(where.Field(it.key()).str() + ": id " + it->dump() +
                             " is not in [0, 2^31)");
    }
    const auto id = static_cast<int32_t>(it->get<int64_t>());
    v.ids_[it.key()] = id;
    max_id = std::max<int64_t>(max_id, id);
  }
  const auto n = static_cast<int64_t>(v.ids_.size());
  if (max_id >= kMaxIdSpread * n + 65536) {
    return InvalidArgument(where.str() + ": ids up to " + std::to_string(max_id) + " for " +
                           std::to_string(n) +
                           " tokens; gridfeed does not implement so sparse a vocabulary");
  }
  v.by_id_.assign(static_cast<size_t>(max_id + 1), nullptr);
  for (const auto& [tok, id] : v.ids_) {
    if (v.by_id_[id] != nullptr) {
      return InvalidArgument(where.str() + ": id " + std::to_string(id) + " is given to both \"" +
                             *v.by_id_[id] + "\" and \"" + tok + "\"");
    }
    v.by_id_[id] = &tok;
  }
  return v;
}

}  // namespace gridfeed::text::hf
