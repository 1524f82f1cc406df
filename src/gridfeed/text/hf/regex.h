// Oniguruma regexes as the Hugging Face `tokenizers` library runs them (its `SysRegex`, on the
// `onig` crate): UTF-8, ONIG_OPTION_NONE, the Oniguruma syntax (the crate's `Syntax::default()`
// is OnigDefaultSyntax, which is ONIG_SYNTAX_ONIGURUMA), and the crate's default match
// parameters, whose retry limit (10,000,000 backtracks per match attempt) makes a catastrophic
// pattern fail instead of hanging: the library panics there, gridfeed returns InvalidArgument.
//
// Thread safety: a compiled Regex is immutable; FindAll may run on one Regex from many threads
// at once (Oniguruma's search only reads the compiled pattern; each thread has its own region
// and match parameters). Compilation is serialized, as the crate does.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gridfeed/core/status.h"

struct re_pattern_buffer;  // Oniguruma's regex_t

namespace gridfeed::text::hf {

// A byte range [begin, end) of the searched text; `is_match` for a span the pattern matched.
struct Span {
  size_t begin = 0;
  size_t end = 0;
  bool is_match = false;
};

class Regex {
 public:
  // InvalidArgument with Oniguruma's message when `pattern` does not compile.
  static Result<Regex> Compile(std::string_view pattern);
  // The pattern matching `literal` exactly (the library escapes with Rust's regex::escape and
  // compiles that with Oniguruma; the escaped metacharacters are literal there too).
  static Result<Regex> Literal(std::string_view literal);

  Regex(Regex&&) noexcept = default;
  Regex& operator=(Regex&&) noexcept = default;
  ~Regex();

  const std::string& pattern() const { return pattern_; }

  // The onig crate's `find_iter` over all of `text` (valid UTF-8): leftmost matches, each search
  // starting where the previous match ended; an empty match right where the previous match
  // ended is skipped by stepping one character. Appends (begin, end, true) per match.
  Status FindAll(std::string_view text, std::vector<Span>* matches) const;

  // The library's `Pattern::find_matches` for a regex: `text` covered by consecutive spans,
  // the matches and the gaps between them (gaps never empty; matches may be). Empty text gives
  // one empty non-match span. `out` is cleared first.
  Status FindMatches(std::string_view text, std::vector<Span>* out) const;

 private:
  struct Free {
    void operator()(re_pattern_buffer* r) const;
  };
  Regex(std::unique_ptr<re_pattern_buffer, Free> re, std::string pattern)
      : re_(std::move(re)), pattern_(std::move(pattern)) {}

  std::unique_ptr<re_pattern_buffer, Free> re_;
  std::string pattern_;
};

// The escaping of Rust's `regex::escape` (a backslash before each of \.+*?()|[]{}^$#&-~).
std::string EscapeRegex(std::string_view literal);

}  // namespace gridfeed::text::hf
