#include "gridfeed/text/hf/regex.h"

#include <oniguruma.h>

#include <mutex>

#include "gridfeed/text/hf/onig_library.h"

namespace gridfeed::text::hf {
namespace {

// The onig crate's MatchParam::default(): Oniguruma's defaults, stated here so that a change of
// library default cannot silently lift the bound on backtracking.
constexpr unsigned long kRetryLimitInMatch = 10000000;

std::mutex& CompileMutex() {
  static std::mutex m;
  return m;
}

// The library every Regex was compiled with (a Regex exists only once it loaded).
const OnigLibrary& Onig() { return *LoadOnigLibrary().value(); }

std::string OnigMessage(int code, OnigErrorInfo* info) {
  OnigUChar buf[ONIG_MAX_ERROR_MESSAGE_LEN];
  int n = info != nullptr ? Onig().onig_error_code_to_str(buf, code, info)
                          : Onig().onig_error_code_to_str(buf, code);
  return std::string(reinterpret_cast<const char*>(buf), n > 0 ? static_cast<size_t>(n) : 0);
}

// Per-thread search state: a region and match parameters reused across searches.
struct SearchState {
  const OnigLibrary& onig = Onig();
  OnigRegion* region = onig.onig_region_new();
  OnigMatchParam* param = [this] {
    OnigMatchParam* p = onig.onig_new_match_param();
    onig.onig_initialize_match_param(p);
    onig.onig_set_retry_limit_in_match_of_match_param(p, kRetryLimitInMatch);
    return p;
  }();
  ~SearchState() {
    onig.onig_region_free(region, 1);
    onig.onig_free_match_param(param);
  }
};

SearchState& ThreadSearchState() {
  thread_local SearchState state;
  return state;
}

size_t Utf8Len(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

}  // namespace

void Regex::Free::operator()(re_pattern_buffer* r) const { Onig().onig_free(r); }

Regex::~Regex() = default;

Result<Regex> Regex::Compile(std::string_view pattern) {
  GRIDFEED_ASSIGN_OR_RETURN(const OnigLibrary* onig, LoadOnigLibrary());
  OnigRegex re = nullptr;
  OnigErrorInfo info{};
  int rc;
  {
    std::lock_guard<std::mutex> lock(CompileMutex());
    const auto* p = reinterpret_cast<const OnigUChar*>(pattern.data());
    rc = onig->onig_new(&re, p, p + pattern.size(), ONIG_OPTION_NONE, onig->encoding_utf8,
                        onig->syntax_oniguruma, &info);
  }
  if (rc != ONIG_NORMAL) {
    return InvalidArgument("the regex /" + std::string(pattern) +
                           "/ does not compile in Oniguruma: " + OnigMessage(rc, &info));
  }
  return Regex(std::unique_ptr<re_pattern_buffer, Free>(re), std::string(pattern));
}

Result<Regex> Regex::Literal(std::string_view literal) { return Compile(EscapeRegex(literal)); }

Status Regex::FindAll(std::string_view text, std::vector<Span>* matches) const {
  SearchState& st = ThreadSearchState();
  const auto* str = reinterpret_cast<const OnigUChar*>(text.data());
  const OnigUChar* end = str + text.size();
  size_t last_end = 0;
  bool have_last = false;
  size_t last_match_end = 0;
  while (last_end <= text.size()) {
    st.onig.onig_region_clear(st.region);
    int r = st.onig.onig_search_with_param(re_.get(), str, end, str + last_end, end, st.region,
                                           ONIG_OPTION_NONE, st.param);
    if (r == ONIG_MISMATCH) break;
    if (r < 0) {
      return InvalidArgument("the regex /" + pattern_ + "/ failed on a text of " +
                             std::to_string(text.size()) + " bytes: " + OnigMessage(r, nullptr));
    }
    const auto s = static_cast<size_t>(st.region->beg[0]);
    const auto e = static_cast<size_t>(st.region->end[0]);
    if (s == e && have_last && last_match_end == e) {
      // The crate steps one character (one byte at the very end) and searches again.
      last_end += last_end < text.size() ? Utf8Len(static_cast<unsigned char>(text[last_end])) : 1;
      continue;
    }
    last_end = e;
    last_match_end = e;
    have_last = true;
    matches->push_back({s, e, true});
  }
  return Status::Ok();
}

Status Regex::FindMatches(std::string_view text, std::vector<Span>* out) const {
  out->clear();
  if (text.empty()) {
    out->push_back({0, 0, false});
    return Status::Ok();
  }
  thread_local std::vector<Span> found;
  found.clear();
  GRIDFEED_RETURN_IF_ERROR(FindAll(text, &found));
  size_t prev = 0;
  for (const Span& m : found) {
    if (prev != m.begin) out->push_back({prev, m.begin, false});
    out->push_back(m);
    prev = m.end;
  }
  if (prev != text.size()) out->push_back({prev, text.size(), false});
  return Status::Ok();
}

std::string EscapeRegex(std::string_view literal) {
  std::string out;
  out.reserve(literal.size());
  for (char c : literal) {
    switch (c) {
      case '\\':
      case '.':
      case '+':
      case '*':
      case '?':
      case '(':
      case ')':
      case '|':
      case '[':
      case ']':
      case '{':
      case '}':
      case '^':
      case '$':
      case '#':
      case '&':
      case '-':
      case '~':
        out.push_back('\\');
        break;
      default:
        break;
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace gridfeed::text::hf
