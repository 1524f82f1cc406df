#include "gridfeed/text/hf/split_spans.h"

#include <nlohmann/json.hpp>

namespace gridfeed::text::hf {

Result<SplitBehavior> ParseSplitBehavior(const nlohmann::json& j, const JsonWhere& where) {
  if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    if (s == "Removed") return SplitBehavior::kRemoved;
    if (s == "Isolated") return SplitBehavior::kIsolated;
    if (s == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
    if (s == "MergedWithNext") return SplitBehavior::kMergedWithNext;
    if (s == "Contiguous") return SplitBehavior::kContiguous;
  }
  return InvalidArgument("unsupported split behavior " + j.dump() + " at " + where.str() +
                         " (expected Removed, Isolated, MergedWithPrevious, MergedWithNext or "
                         "Contiguous)");
}

void InvertSpans(std::vector<Span>* spans) {
  for (Span& s : *spans) s.is_match = !s.is_match;
}

void SplitBySpans(const Piece& piece, const std::vector<Span>& spans, SplitBehavior behavior,
                  std::vector<Piece>* out) {
  // (begin, end, removed) after the behavior, as the library folds them.
  thread_local std::vector<Span> cuts;  // is_match reused as "remove"
  cuts.clear();
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const Span& s : spans) cuts.push_back({s.begin, s.end, false});
      break;
    case SplitBehavior::kRemoved:
      cuts = spans;
      break;
    case SplitBehavior::kContiguous: {
      bool prev = false;
      for (const Span& s : spans) {
        if (s.is_match == prev && !cuts.empty()) {
          cuts.back().end = s.end;
        } else {
          cuts.push_back({s.begin, s.end, false});
        }
        prev = s.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithPrevious: {
      bool prev = false;
      for (const Span& s : spans) {
        if (s.is_match && !prev && !cuts.empty()) {
          cuts.back().end = s.end;
        } else {
          cuts.push_back({s.begin, s.end, false});
        }
        prev = s.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool prev = false;
      for (size_t k = spans.size(); k-- > 0;) {
        const Span& s = spans[k];
        if (s.is_match && !prev && !cuts.empty()) {
          cuts.back().begin = s.begin;
        } else {
          cuts.push_back({s.begin, s.end, false});
        }
        prev = s.is_match;
      }
      std::reverse(cuts.begin(), cuts.end());
      break;
    }
  }
  for (const Span& c : cuts) {
    if (c.is_match || c.begin == c.end) continue;
    out->push_back({piece.text.substr(c.begin, c.end - c.begin), piece.at_origin && c.begin == 0});
  }
}

}  // namespace gridfeed::text::hf
