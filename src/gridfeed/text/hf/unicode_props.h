// The character classes and case mapping the library's normalizers and pre-tokenizers use, from
// Rust's `char` methods and the `unicode_categories` / `unicode-normalization-alignments` crates,
// answered by ICU (Unicode 15 here; the crates' tables may be of another Unicode version, which
// only matters for characters assigned in between).
#pragma once

#include <string>

namespace gridfeed::text::hf {

// Checked with the library: `unicode_categories` answers as of Unicode 8.0 (and its "other"
// never includes unassigned Cn), `unicode-normalization-alignments` as of Unicode 9.0; Rust's
// char methods are current (ICU's Unicode 15 stands for them).

// Rust char::is_whitespace: the White_Space property.
bool IsWhitespace(char32_t c);
// Rust char::is_numeric: general category Nd, Nl or No.
bool IsNumeric(char32_t c);
// char::is_ascii_punctuation || unicode_categories' is_punctuation (Pc Pd Ps Pe Pi Pf Po as of
// Unicode 8.0).
bool IsPunctuation(char32_t c);
// Rust regex's Unicode \w: Alphabetic, M*, Nd, Pc, Join_Control.
bool IsRegexWord(char32_t c);
// unicode-normalization-alignments' is_combining_mark: Mn, Mc or Me as of Unicode 9.0.
bool IsCombiningMark(char32_t c);
// unicode_categories' is_mark_nonspacing: Mn as of Unicode 8.0.
bool IsMarkNonspacing(char32_t c);
// unicode_categories' is_other: Cc, Cf, Co (its Cn table is empty).
bool IsOther(char32_t c);

// Whether `c` was assigned in Unicode `major`.0 or earlier.
bool AssignedBy(char32_t c, int major);

// Rust char::to_lowercase (the full, context-free mapping: only U+0130 maps to two characters),
// appended as UTF-8.
void AppendLowercase(char32_t c, std::string* out);

}  // namespace gridfeed::text::hf
