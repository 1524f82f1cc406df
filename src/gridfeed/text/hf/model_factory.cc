// MakeModel: tokenizer.json's "model" object -> the model of its "type".
#include <nlohmann/json.hpp>

#include "gridfeed/text/hf/components.h"
#include "gridfeed/text/hf/models.h"

namespace gridfeed::text::hf {

Result<std::unique_ptr<Model>> MakeModel(const nlohmann::json& j, const JsonWhere& where) {
  if (!j.is_object()) return InvalidArgument(where.str() + ": the model is not an object");
  auto t = j.find("type");
  // Without "type" the library's untagged model enum tries BPE, WordPiece, WordLevel and
  // Unigram in that order, the first whose fields fit wins (older files, e.g. BERT's). The
  // fields that tell them apart: BPE has merges, WordPiece a continuing_subword_prefix or
  // max_input_chars_per_word, WordLevel a {token: id} vocab, Unigram a [piece, score] list.
  if (t == j.end()) {
    const auto vocab = j.find("vocab");
    if (j.contains("merges")) return MakeBpeModel(j, where);
    if (j.contains("continuing_subword_prefix") || j.contains("max_input_chars_per_word")) {
      return MakeWordPieceModel(j, where);
    }
    if (vocab != j.end() && vocab->is_object()) return MakeWordLevelModel(j, where);
    if (vocab != j.end() && vocab->is_array()) return MakeUnigramModel(j, where);
    return InvalidArgument(where.str() + ": the model has no 'type' and fits none of BPE, " +
                           "WordPiece, WordLevel, Unigram");
  }
  if (!t->is_string()) return InvalidArgument(where.Field("type").str() + ": not a string");
  const auto& type = t->get_ref<const std::string&>();
  if (type == "BPE") return MakeBpeModel(j, where);
  if (type == "Unigram") return MakeUnigramModel(j, where);
  if (type == "WordPiece") return MakeWordPieceModel(j, where);
  if (type == "WordLevel") return MakeWordLevelModel(j, where);
  return InvalidArgument(where.Field("type").str() + ": model type '" + type +
                         "' is not supported (gridfeed reads BPE, Unigram, WordPiece, WordLevel)");
}

}  // namespace gridfeed::text::hf
