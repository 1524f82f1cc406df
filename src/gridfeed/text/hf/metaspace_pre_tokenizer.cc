// The library's Metaspace pre-tokenizer (pre_tokenizers/metaspace.rs): ' ' becomes the
// replacement character, which is prepended per prepend_scheme (always; first: only to a piece
// that starts the input; never), then (split) each replacement character starts a new piece.
#include <nlohmann/json.hpp>

#include "gridfeed/text/hf/component_json.h"
#include "gridfeed/text/hf/pre_tokenizers.h"
#include "gridfeed/text/hf/split_spans.h"

namespace gridfeed::text::hf {
namespace {

enum class PrependScheme { kAlways, kFirst, kNever };

class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, PrependScheme scheme, bool split)
      : rep_(std::move(replacement)), scheme_(scheme), split_(split) {
    size_t len;
    rep_cp_ = Utf8Decode(rep_, 0, &len);
  }

  Status PreTokenize(std::vector<Piece>* pieces) const override {
    thread_local std::vector<Piece> out;
    thread_local std::vector<Span> spans;
    out.clear();
    for (Piece& p : *pieces) {
      std::string text;
      text.reserve(p.text.size() + rep_.size());
      if (scheme_ == PrependScheme::kAlways || (scheme_ == PrependScheme::kFirst && p.at_origin)) {
        // Prepended unless the text (spaces replaced) already starts with the replacement.
        const bool starts = p.text.starts_with(' ') || p.text.starts_with(rep_);
        if (!starts && !p.text.empty()) text = rep_;
      }
      for (char c : p.text) {
        if (c == ' ') {
          text += rep_;
        } else {
          text.push_back(c);
        }
      }
      Piece piece{std::move(text), p.at_origin};
      if (!split_) {
        if (!piece.text.empty()) out.push_back(std::move(piece));
        continue;
      }
      const char32_t rep = rep_cp_;
      FindCharMatches(
          piece.text, [rep](char32_t c) { return c == rep; }, &spans);
      SplitBySpans(piece, spans, SplitBehavior::kMergedWithNext, &out);
    }
    pieces->swap(out);
    return Status::Ok();
  }

 private:
  std::string rep_;
  char32_t rep_cp_;
  PrependScheme scheme_;
  bool split_;
};

}  // namespace

Result<std::unique_ptr<PreTokenizer>> MakeMetaspacePreTokenizer(const nlohmann::json& j,
                                                                const JsonWhere& where) {
  GRIDFEED_ASSIGN_OR_RETURN(std::string replacement, RequiredChar(j, "replacement", where));
  PrependScheme scheme = PrependScheme::kAlways;
  if (j.contains("prepend_scheme")) {
    const nlohmann::json& s = j["prepend_scheme"];
    if (s == "always") {
      scheme = PrependScheme::kAlways;
    } else if (s == "first") {
      scheme = PrependScheme::kFirst;
    } else if (s == "never") {
      scheme = PrependScheme::kNever;
    } else {
      return InvalidArgument("unsupported prepend_scheme " + s.dump() + " at " +
                             where.Field("prepend_scheme").str() +
                             " (expected \"always\", \"first\" or \"never\")");
    }
  }
  // The legacy field: false means never (and contradicts any other declared scheme).
  if (j.contains("add_prefix_space") && !j["add_prefix_space"].is_null()) {
    GRIDFEED_ASSIGN_OR_RETURN(bool add, RequiredBool(j, "add_prefix_space", where));
    if (!add) {
      if (scheme != PrependScheme::kNever) {
        return InvalidArgument("add_prefix_space false does not match prepend_scheme at " +
                               where.str());
      }
      scheme = PrependScheme::kNever;
    }
  }
  bool split = true;
  if (j.contains("split") && !j["split"].is_null()) {
    GRIDFEED_ASSIGN_OR_RETURN(split, RequiredBool(j, "split", where));
  }
  return std::unique_ptr<PreTokenizer>(
      std::make_unique<MetaspacePreTokenizer>(std::move(replacement), scheme, split));
}

}  // namespace gridfeed::text::hf
