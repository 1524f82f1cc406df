// MakeNormalizer: dispatch on "type", and the Sequence and Prepend normalizers.
#include <nlohmann/json.hpp>

#include "gridfeed/text/hf/component_json.h"
#include "gridfeed/text/hf/models.h"
#include "gridfeed/text/hf/normalizers.h"

namespace gridfeed::text::hf {
namespace {

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps)
      : steps_(std::move(steps)) {}

  Status Normalize(std::string* text) const override {
    for (const auto& step : steps_) GRIDFEED_RETURN_IF_ERROR(step->Normalize(text));
    return Status::Ok();
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

// Prepends its string to a non-empty text.
class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prepend) : prepend_(std::move(prepend)) {}

  Status Normalize(std::string* text) const override {
    if (!text->empty()) text->insert(0, prepend_);
    return Status::Ok();
  }

 private:
  std::string prepend_;
};

Result<std::unique_ptr<Normalizer>> MakeSequence(const nlohmann::json& j, const JsonWhere& where) {
  GRIDFEED_ASSIGN_OR_RETURN(const nlohmann::json* list, RequiredField(j, "normalizers", where));
  const JsonWhere list_where = where.Field("normalizers");
  if (!list->is_array()) return InvalidArgument("expected a list at " + list_where.str());
  std::vector<std::unique_ptr<Normalizer>> steps;
  for (size_t i = 0; i < list->size(); ++i) {
    GRIDFEED_ASSIGN_OR_RETURN(auto step, MakeNormalizer((*list)[i], list_where.Index(i)));
    steps.push_back(std::move(step));
  }
  return std::unique_ptr<Normalizer>(std::make_unique<SequenceNormalizer>(std::move(steps)));
}

}  // namespace

Result<std::unique_ptr<Normalizer>> MakeNormalizer(const nlohmann::json& j,
                                                   const JsonWhere& where) {
  GRIDFEED_ASSIGN_OR_RETURN(std::string type, ComponentType(j, where));
  if (type == "Sequence") return MakeSequence(j, where);
  if (type == "Prepend") {
    GRIDFEED_ASSIGN_OR_RETURN(std::string prepend, RequiredString(j, "prepend", where));
    return std::unique_ptr<Normalizer>(std::make_unique<PrependNormalizer>(std::move(prepend)));
  }
  if (type == "Replace") return MakeReplaceNormalizer(j, where);
  if (type == "Precompiled") return MakePrecompiledNormalizer(j, where);
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD" || type == "Lowercase" ||
      type == "StripAccents" || type == "Nmt" || type == "ByteLevel" || type == "Strip" ||
      type == "BertNormalizer" || type == "Bert") {
    return MakeCharNormalizer(type, j, where);
  }
  return UnsupportedType("normalizer", type, where);
}

}  // namespace gridfeed::text::hf
