// The library's ByteLevel pre-tokenizer (pre_tokenizers/byte_level.rs). trim_offsets only moves
// offsets, so it is read and ignored.
#include <nlohmann/json.hpp>

#include "gridfeed/text/hf/byte_level_alphabet.h"
#include "gridfeed/text/hf/component_json.h"
#include "gridfeed/text/hf/known_patterns.h"
#include "gridfeed/text/hf/onig_library.h"
#include "gridfeed/text/hf/pre_tokenizers.h"
#include "gridfeed/text/hf/regex.h"
#include "gridfeed/text/hf/split_spans.h"

namespace gridfeed::text::hf {
namespace {

// GPT-2's pattern, as the library compiles it.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space), use_regex_(use_regex) {}

  Status PreTokenize(std::vector<Piece>* pieces) const override {
    thread_local std::vector<Piece> split;
    thread_local std::vector<Span> spans;
    split.clear();
    for (Piece& p : *pieces) {
      if (add_prefix_space_ && !p.text.empty() && p.text[0] != ' ') p.text.insert(0, 1, ' ');
      if (!use_regex_) {
        if (!p.text.empty()) split.push_back(std::move(p));
        continue;
      }
      // The hand-written matcher gives Oniguruma's spans (tests/text/hf_known_patterns_test.cc).
      KnownFindMatches(KnownPattern::kGpt2, p.text, &spans);
      SplitBySpans(p, spans, SplitBehavior::kIsolated, &split);
    }
    pieces->clear();
    for (Piece& p : split) {
      Piece& out = pieces->emplace_back();
      out.at_origin = p.at_origin;
      out.text.reserve(p.text.size() * 2);
      AppendByteLevel(p.text, &out.text);
    }
    return Status::Ok();
  }

 private:
  bool add_prefix_space_;
  bool use_regex_;
};

}  // namespace

Result<std::unique_ptr<PreTokenizer>> MakeByteLevelPreTokenizer(const nlohmann::json& j,
                                                                const JsonWhere& where) {
  GRIDFEED_ASSIGN_OR_RETURN(bool add_prefix_space, RequiredBool(j, "add_prefix_space", where));
  GRIDFEED_ASSIGN_OR_RETURN(bool trim_offsets, RequiredBool(j, "trim_offsets", where));
  (void)trim_offsets;
  GRIDFEED_ASSIGN_OR_RETURN(bool use_regex, OptionalBool(j, "use_regex", true, where));
  if (use_regex && IdentifyKnownPattern(kGpt2Pattern) != KnownPattern::kGpt2) {
    return Internal("ByteLevel: GPT-2's pattern is not the known one");
  }
  // The matcher reads its character classes from Oniguruma.
  if (use_regex) GRIDFEED_RETURN_IF_ERROR(LoadOnigLibrary().status());
  return std::unique_ptr<PreTokenizer>(
      std::make_unique<ByteLevelPreTokenizer>(add_prefix_space, use_regex));
}

}  // namespace gridfeed::text::hf
