// The library's pre-tokenizers that split on character classes: Digits, Whitespace,
// WhitespaceSplit, Punctuation, BertPreTokenizer and CharDelimiterSplit.
#include <nlohmann/json.hpp>

#include "gridfeed/text/hf/component_json.h"
#include "gridfeed/text/hf/pre_tokenizers.h"
#include "gridfeed/text/hf/split_spans.h"
#include "gridfeed/text/hf/unicode_props.h"

namespace gridfeed::text::hf {
namespace {

// Splits every piece on the characters `pred` selects, under `behavior`.
template <typename Pred>
class CharSplitPreTokenizer final : public PreTokenizer {
 public:
  CharSplitPreTokenizer(Pred pred, SplitBehavior behavior) : pred_(pred), behavior_(behavior) {}

  Status PreTokenize(std::vector<Piece>* pieces) const override {
    thread_local std::vector<Piece> out;
    thread_local std::vector<Span> spans;
    out.clear();
    for (const Piece& p : *pieces) {
      FindCharMatches(p.text, pred_, &spans);
      SplitBySpans(p, spans, behavior_, &out);
    }
    pieces->swap(out);
    return Status::Ok();
  }

 private:
  Pred pred_;
  SplitBehavior behavior_;
};

template <typename Pred>
std::unique_ptr<PreTokenizer> MakeCharSplit(Pred pred, SplitBehavior behavior) {
  return std::make_unique<CharSplitPreTokenizer<Pred>>(pred, behavior);
}

// Whitespace: the matches of Rust regex `\w+|[^\w\s]+` (Unicode classes) are the pieces.
class WhitespacePreTokenizer final : public PreTokenizer {
 public:
  Status PreTokenize(std::vector<Piece>* pieces) const override {
    thread_local std::vector<Piece> out;
    out.clear();
    for (const Piece& p : *pieces) {
      const std::string& s = p.text;
      size_t i = 0;
      while (i < s.size()) {
        size_t len;
        const char32_t c = Utf8Decode(s, i, &len);
        const bool word = IsRegexWord(c);
        if (!word && IsWhitespace(c)) {
          i += len;
          continue;
        }
        size_t j = i + len;
        while (j < s.size()) {
          size_t l;
          const char32_t d = Utf8Decode(s, j, &l);
          if (word ? !IsRegexWord(d) : (IsRegexWord(d) || IsWhitespace(d))) break;
          j += l;
        }
        out.push_back({s.substr(i, j - i), p.at_origin && i == 0});
        i = j;
      }
    }
    pieces->swap(out);
    return Status::Ok();
  }
};

// Bert: whitespace removed, then each punctuation character isolated.
class BertPreTokenizer final : public PreTokenizer {
 public:
  Status PreTokenize(std::vector<Piece>* pieces) const override {
    GRIDFEED_RETURN_IF_ERROR(whitespace_->PreTokenize(pieces));
    return punctuation_->PreTokenize(pieces);
  }

 private:
  std::unique_ptr<PreTokenizer> whitespace_ = MakeCharSplit(IsWhitespace, SplitBehavior::kRemoved);
  std::unique_ptr<PreTokenizer> punctuation_ =
      MakeCharSplit(IsPunctuation, SplitBehavior::kIsolated);
};

}  // namespace

Result<std::unique_ptr<PreTokenizer>> MakeCharClassPreTokenizer(const std::string& type,
                                                                const nlohmann::json& j,
                                                                const JsonWhere& where) {
  if (type == "Digits") {
    GRIDFEED_ASSIGN_OR_RETURN(bool individual, RequiredBool(j, "individual_digits", where));
    return MakeCharSplit(IsNumeric,
                         individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous);
  }
  if (type == "Whitespace") return std::unique_ptr<PreTokenizer>(new WhitespacePreTokenizer());
  if (type == "WhitespaceSplit") return MakeCharSplit(IsWhitespace, SplitBehavior::kRemoved);
  if (type == "BertPreTokenizer") return std::unique_ptr<PreTokenizer>(new BertPreTokenizer());
  if (type == "Punctuation") {
    SplitBehavior behavior = SplitBehavior::kIsolated;
    if (j.contains("behavior")) {
      GRIDFEED_ASSIGN_OR_RETURN(behavior,
                                ParseSplitBehavior(j["behavior"], where.Field("behavior")));
    }
    return MakeCharSplit(IsPunctuation, behavior);
  }
  if (type == "CharDelimiterSplit") {
    GRIDFEED_ASSIGN_OR_RETURN(std::string d, RequiredChar(j, "delimiter", where));
    size_t len;
    const char32_t delimiter = Utf8Decode(d, 0, &len);
    return MakeCharSplit([delimiter](char32_t c) { return c == delimiter; },
                         SplitBehavior::kRemoved);
  }
  return UnsupportedType("pre-tokenizer", type, where);
}

}  // namespace gridfeed::text::hf
