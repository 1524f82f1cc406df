// Oniguruma, loaded at run time instead of linked. Debian's libonig.so also exports the POSIX
// regcomp/regexec/regfree/regerror; linked, it would interpose them on glibc's in every program
// that links gridfeed_text (gtest's death-test matcher hung on that pairing under ASan). Loaded
// with dlopen(RTLD_LOCAL), none of its symbols enters the program's namespace: only the pointers
// below reach it. oniguruma.h still gives the types and constants; its functions and the data
// behind ONIG_ENCODING_UTF8 / ONIG_SYNTAX_ONIGURUMA / ONIGENC_CASE_FOLD_DEFAULT must be reached
// through OnigLibrary instead (a direct use no longer links).
//
// Ownership: the library is opened once per process, on the first LoadOnigLibrary(), initialized
// for UTF-8 (onig_initialize), and never closed: the table, and everything Oniguruma returns
// through it, stays valid until exit.
// Thread safety: LoadOnigLibrary() may be called from any thread, at once (a function-local
// static); the table is immutable. The functions keep Oniguruma's own rules (compiling is not
// thread-safe; searching one compiled regex from many threads is).
#pragma once

#include <oniguruma.h>

#include "gridfeed/core/status.h"

namespace gridfeed::text::hf {

struct OnigLibrary {
  decltype(&::onig_new) onig_new;
  decltype(&::onig_free) onig_free;
  decltype(&::onig_search_with_param) onig_search_with_param;
  decltype(&::onig_region_new) onig_region_new;
  decltype(&::onig_region_free) onig_region_free;
  decltype(&::onig_region_clear) onig_region_clear;
  decltype(&::onig_new_match_param) onig_new_match_param;
  decltype(&::onig_initialize_match_param) onig_initialize_match_param;
  decltype(&::onig_set_retry_limit_in_match_of_match_param)
      onig_set_retry_limit_in_match_of_match_param;
  decltype(&::onig_free_match_param) onig_free_match_param;
  decltype(&::onig_error_code_to_str) onig_error_code_to_str;  // (buf, code[, OnigErrorInfo*])
  OnigEncoding encoding_utf8;                                  // ONIG_ENCODING_UTF8
  OnigSyntaxType* syntax_oniguruma;                            // ONIG_SYNTAX_ONIGURUMA
  const OnigCaseFoldType* default_case_fold_flag;  // ONIGENC_CASE_FOLD_DEFAULT's variable
};

// The loaded, initialized library. FailedPrecondition, naming libonig.so.5, dlerror()'s reason
// and the Debian package (libonig5), when it cannot be opened, lacks one of the symbols above or
// fails to initialize; the same Status on every later call.
const Result<const OnigLibrary*>& LoadOnigLibrary();

}  // namespace gridfeed::text::hf
