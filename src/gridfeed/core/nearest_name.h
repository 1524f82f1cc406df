// "Did you mean" for unknown keys and flags: the valid name closest to a misspelt one.
// Pure; thread safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gridfeed {

// The name in `valid` nearest to `given` by edit distance, comparing case-insensitively with
// '-' and '_' treated as the same character (so `seq_length` finds `seq-length`). Empty when
// nothing is close: a distance above a third of the longer name (at least 2 edits allowed).
std::string NearestName(std::string_view given, const std::vector<std::string>& valid);

// " (did you mean 'NAME'?)" for NearestName's answer, or "" when there is none.
std::string DidYouMean(std::string_view given, const std::vector<std::string>& valid);

}  // namespace gridfeed
