// The library's Replace normalizer (normalizers/replace.rs, NormalizedString::replace).
#include <nlohmann/json.hpp>

#include "gridfeed/text/hf/component_json.h"
#include "gridfeed/text/hf/normalizers.h"
#include "gridfeed/text/hf/regex.h"

namespace gridfeed::text::hf {
namespace {

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(Regex re, std::string content)
      : re_(std::move(re)), content_(std::move(content)) {}

  Status Normalize(std::string* text) const override {
    // The library's find_matches reports no match at all in an empty text, even for a pattern
    // that matches the empty string.
    if (text->empty()) return Status::Ok();
    thread_local std::vector<Span> spans;
    spans.clear();
    GRIDFEED_RETURN_IF_ERROR(re_.FindAll(*text, &spans));
    if (spans.empty()) return Status::Ok();
    std::string out;
    out.reserve(text->size() + spans.size() * content_.size());
    size_t last = 0;
    for (const Span& m : spans) {
      out.append(*text, last, m.begin - last);
      out += content_;
      last = m.end;
    }
    out.append(*text, last, std::string::npos);
    text->swap(out);
    return Status::Ok();
  }

 private:
  Regex re_;
  std::string content_;
};

}  // namespace

Result<std::unique_ptr<Normalizer>> MakeReplaceNormalizer(const nlohmann::json& j,
                                                          const JsonWhere& where) {
  GRIDFEED_ASSIGN_OR_RETURN(const nlohmann::json* pattern, RequiredField(j, "pattern", where));
  GRIDFEED_ASSIGN_OR_RETURN(Regex re, ParsePattern(*pattern, where.Field("pattern")));
  GRIDFEED_ASSIGN_OR_RETURN(std::string content, RequiredString(j, "content", where));
  return std::unique_ptr<Normalizer>(
      std::make_unique<ReplaceNormalizer>(std::move(re), std::move(content)));
}

}  // namespace gridfeed::text::hf
