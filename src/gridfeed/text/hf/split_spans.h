// The library's `NormalizedString::split`: a text covered by match / non-match spans (a
// `Pattern::find_matches` result) is cut into pieces according to a delimiter behavior. Shared
// by the Split, ByteLevel, Punctuation, Digits, Whitespace, Metaspace... pre-tokenizers.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string_view>
#include <vector>

#include "gridfeed/core/status.h"
#include "gridfeed/text/hf/components.h"
#include "gridfeed/text/hf/regex.h"
#include "gridfeed/text/hf/utf8.h"

namespace gridfeed::text::hf {

// For delimiter '-' on "the-final--countdown":
//   kRemoved            the | final | countdown
//   kIsolated           the | - | final | - | - | countdown
//   kMergedWithPrevious the- | final- | - | countdown
//   kMergedWithNext     the | -final | - | -countdown
//   kContiguous         the | - | final | -- | countdown
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Reads "Removed", "Isolated", ... (serde's spelling of the enum) at `where`.
Result<SplitBehavior> ParseSplitBehavior(const nlohmann::json& j, const JsonWhere& where);

// Flips every span's is_match (the library's `Invert` pattern).
void InvertSpans(std::vector<Span>* spans);

// The library's `find_matches` for a character predicate: each character for which `pred`
// (a code point) holds is its own match span; the runs between are non-match spans.
template <typename Pred>
void FindCharMatches(std::string_view text, Pred pred, std::vector<Span>* out);

// Cuts `piece` by `spans` (covering piece.text) under `behavior`, appending the non-empty pieces
// to `out`. A piece is at_origin when `piece` is and it starts at byte 0 of `piece`.
void SplitBySpans(const Piece& piece, const std::vector<Span>& spans, SplitBehavior behavior,
                  std::vector<Piece>* out);

template <typename Pred>
void FindCharMatches(std::string_view text, Pred pred, std::vector<Span>* out) {
  out->clear();
  if (text.empty()) {
    out->push_back({0, 0, false});
    return;
  }
  size_t last = 0;
  for (size_t i = 0; i < text.size();) {
    size_t len;
    const char32_t c = Utf8Decode(text, i, &len);
    if (pred(c)) {
      if (last < i) out->push_back({last, i, false});
      out->push_back({i, i + len, true});
      last = i + len;
    }
    i += len;
  }
  if (last < text.size()) out->push_back({last, text.size(), false});
}

}  // namespace gridfeed::text::hf
