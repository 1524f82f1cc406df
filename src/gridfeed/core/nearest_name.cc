#include "gridfeed/core/nearest_name.h"

#include <algorithm>
#include <cctype>

namespace gridfeed {
namespace {

char Fold(char c) {
  if (c == '-') return '_';
  return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
}

// Levenshtein distance over folded characters, one row at a time.
size_t Distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      const size_t cost = Fold(a[i - 1]) == Fold(b[j - 1]) ? 0 : 1;
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + cost});
      diagonal = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string NearestName(std::string_view given, const std::vector<std::string>& valid) {
  std::string best;
  size_t best_distance = 0;
  for (const auto& name : valid) {
    if (name.empty()) continue;
    const size_t d = Distance(given, name);
    const size_t allowed = std::max<size_t>(2, std::max(given.size(), name.size()) / 3);
    if (d > allowed) continue;
    if (best.empty() || d < best_distance) best = name, best_distance = d;
  }
  return best;
}

std::string DidYouMean(std::string_view given, const std::vector<std::string>& valid) {
  const std::string name = NearestName(given, valid);
  return name.empty() ? "" : " (did you mean '" + name + "'?)";
}

}  // namespace gridfeed
