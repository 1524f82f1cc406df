// The library's Split pre-tokenizer (pre_tokenizers/split.rs): a String pattern is escaped and
// compiled like a Regex one, so both run on Oniguruma.
#include <nlohmann/json.hpp>

#include "gridfeed/text/hf/component_json.h"
#include "gridfeed/text/hf/known_patterns.h"
#include "gridfeed/text/hf/pre_tokenizers.h"
#include "gridfeed/text/hf/regex.h"
#include "gridfeed/text/hf/split_spans.h"

namespace gridfeed::text::hf {

namespace {

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(Regex re, SplitBehavior behavior, bool invert)
      : re_(std::move(re)),
        known_(IdentifyKnownPattern(re_.pattern())),
        behavior_(behavior),
        invert_(invert) {}

  Status PreTokenize(std::vector<Piece>* pieces) const override {
    thread_local std::vector<Piece> out;
    thread_local std::vector<Span> spans;
    out.clear();
    for (const Piece& p : *pieces) {
      if (known_ != KnownPattern::kNone) {
        KnownFindMatches(known_, p.text, &spans);  // Oniguruma's spans, faster
      } else {
        GRIDFEED_RETURN_IF_ERROR(re_.FindMatches(p.text, &spans));
      }
      if (invert_) InvertSpans(&spans);
      SplitBySpans(p, spans, behavior_, &out);
    }
    pieces->swap(out);
    return Status::Ok();
  }

 private:
  Regex re_;
  KnownPattern known_;
  SplitBehavior behavior_;
  bool invert_;
};

}  // namespace

Result<std::unique_ptr<PreTokenizer>> MakeSplitPreTokenizer(const nlohmann::json& j,
                                                            const JsonWhere& where) {
  GRIDFEED_ASSIGN_OR_RETURN(const nlohmann::json* pattern, RequiredField(j, "pattern", where));
  GRIDFEED_ASSIGN_OR_RETURN(Regex re, ParsePattern(*pattern, where.Field("pattern")));
  GRIDFEED_ASSIGN_OR_RETURN(const nlohmann::json* behavior, RequiredField(j, "behavior", where));
  GRIDFEED_ASSIGN_OR_RETURN(SplitBehavior b,
                            ParseSplitBehavior(*behavior, where.Field("behavior")));
  GRIDFEED_ASSIGN_OR_RETURN(bool invert, RequiredBool(j, "invert", where));
  return std::unique_ptr<PreTokenizer>(
      std::make_unique<SplitPreTokenizer>(std::move(re), b, invert));
}

}  // namespace gridfeed::text::hf
