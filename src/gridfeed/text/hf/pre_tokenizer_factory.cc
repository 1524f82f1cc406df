// MakePreTokenizer: dispatch on "type", and the Sequence pre-tokenizer.
#include <nlohmann/json.hpp>

#include "gridfeed/text/hf/component_json.h"
#include "gridfeed/text/hf/pre_tokenizers.h"

namespace gridfeed::text::hf {
namespace {

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps)
      : steps_(std::move(steps)) {}

  Status PreTokenize(std::vector<Piece>* pieces) const override {
    for (const auto& step : steps_) GRIDFEED_RETURN_IF_ERROR(step->PreTokenize(pieces));
    return Status::Ok();
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

Result<std::unique_ptr<PreTokenizer>> MakeSequence(const nlohmann::json& j,
                                                   const JsonWhere& where) {
  GRIDFEED_ASSIGN_OR_RETURN(const nlohmann::json* list, RequiredField(j, "pretokenizers", where));
  const JsonWhere list_where = where.Field("pretokenizers");
  if (!list->is_array()) return InvalidArgument("expected a list at " + list_where.str());
  std::vector<std::unique_ptr<PreTokenizer>> steps;
  for (size_t i = 0; i < list->size(); ++i) {
    GRIDFEED_ASSIGN_OR_RETURN(auto step, MakePreTokenizer((*list)[i], list_where.Index(i)));
    steps.push_back(std::move(step));
  }
  return std::unique_ptr<PreTokenizer>(std::make_unique<SequencePreTokenizer>(std::move(steps)));
}

}  // namespace

Result<std::unique_ptr<PreTokenizer>> MakePreTokenizer(const nlohmann::json& j,
                                                       const JsonWhere& where) {
  GRIDFEED_ASSIGN_OR_RETURN(std::string type, ComponentType(j, where));
  if (type == "ByteLevel") return MakeByteLevelPreTokenizer(j, where);
  if (type == "Split") return MakeSplitPreTokenizer(j, where);
  if (type == "Sequence") return MakeSequence(j, where);
  if (type == "Metaspace") return MakeMetaspacePreTokenizer(j, where);
  if (type == "Digits" || type == "Whitespace" || type == "WhitespaceSplit" ||
      type == "Punctuation" || type == "BertPreTokenizer" || type == "CharDelimiterSplit") {
    return MakeCharClassPreTokenizer(type, j, where);
  }
  // UnicodeScripts runs on the library's own script table (sentencepiece's, of an older
  // Unicode) and FixedLength cuts by characters: neither is implemented, both are refused.
  return UnsupportedType("pre-tokenizer", type, where);
}

}  // namespace gridfeed::text::hf
