// MakeModel: tokenizer.json's "model" object -> the model of its "type".
#include <nlohmann/json.hpp>

#include "gridfeed/text/hf/components.h"
#include "gridfeed/text/hf/models.h"

namespace gridfeed::text::hf {

Result<std::unique_ptr<Model>> MakeModel(const nlohmann::json& j, const JsonWhere& where) {
  if (!j.is_object()) return InvalidArgument(where.str() + ": the model is not an object");
  auto t = j.find("type");
  // The library's untagged model enum also accepts a BPE without "type" (old files).
  if (t == j.end()) {
    if (j.contains("merges")) return MakeBpeModel(j, where);
    return InvalidArgument(where.str() + ": the model has no 'type'");
  }
  if (!t->is_string()) return InvalidArgument(where.Field("type").str() + ": not a string");
  const auto& type = t->get_ref<const std::string&>();
  if (type == "BPE") return MakeBpeModel(j, where);
  if (type == "Unigram") return MakeUnigramModel(j, where);
  if (type == "WordPiece") return MakeWordPieceModel(j, where);
  if (type == "WordLevel") return MakeWordLevelModel(j, where);
  return InvalidArgument(where.Field("type").str() + ": model type '" + type +
                         "' is not implemented (BPE, Unigram, WordPiece, WordLevel are)");
}

}  // namespace gridfeed::text::hf
