// Hand-written matchers for the pre-tokenizer regexes most byte-level BPE tokenizers use, giving
// exactly the spans Oniguruma gives (Regex::FindMatches) at a fraction of its cost:
//
//   kGpt2    GPT-2 (ByteLevel's)  's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+|
//   ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ kCl100k  cl100k / Llama-3
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//                                 ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   kQwen2   Qwen2                the same with \p{N} for \p{N}{1,3}
//
// A matcher is chosen only when a pattern string is exactly one of these. The character classes
// (\s, \p{L}, \p{N} and the case-insensitive letters of the contractions) are read from
// Oniguruma itself once per process, for every code point, so they are Oniguruma's by
// construction; tests/text/hf_known_patterns_test.cc checks them and the matchers against
// Oniguruma's regexes.
#pragma once

#include <string_view>
#include <vector>

#include "gridfeed/text/hf/regex.h"

namespace gridfeed::text::hf {

enum class KnownPattern { kNone, kGpt2, kCl100k, kQwen2 };

// kNone unless `pattern` (the regex source as compiled) is exactly one of the patterns above.
KnownPattern IdentifyKnownPattern(std::string_view pattern);

// What Regex::FindMatches gives for the pattern `p` (not kNone) on `text` (valid UTF-8): these
// patterns match every character, so the matches cover the text; empty text gives one empty
// non-match span. `out` is cleared first. REQUIRES: LoadOnigLibrary() (onig_library.h) succeeded
// (the classes are read from Oniguruma; without it this aborts with that Status).
void KnownFindMatches(KnownPattern p, std::string_view text, std::vector<Span>* out);

// Oniguruma's classes of a code point, as bits (exposed for the tests).
enum OnigClassBits : unsigned char {
  kOnigSpace = 1,   // \s
  kOnigLetter = 2,  // \p{L}
  kOnigNumber = 4,  // \p{N}
};
// REQUIRES, for both: as KnownFindMatches.
unsigned char OnigClassOf(char32_t c);
// The contraction letter (one of "strevmld") that `c` matches case-insensitively in Oniguruma
// (e.g. 'S' and U+017F give 's'), or 0.
char OnigFoldedContractionLetter(char32_t c);

}  // namespace gridfeed::text::hf
