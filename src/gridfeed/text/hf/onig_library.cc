#include "gridfeed/text/hf/onig_library.h"

#include <dlfcn.h>

#include <string>

namespace gridfeed::text::hf {
namespace {

constexpr char kSoname[] = "libonig.so.5";

Status LoadError(const std::string& what) {
  return FailedPrecondition("Oniguruma (" + std::string(kSoname) +
                            "), which Hugging Face and tiktoken regexes run on, " + what +
                            "; install Debian's package libonig5");
}

std::string DlError() {
  const char* e = dlerror();
  return e != nullptr ? e : "no reason given";
}

// Reads `name` from `lib` into `*out`; false (and the reason in `*why`) when absent.
template <typename T>
bool Symbol(void* lib, const char* name, T* out, std::string* why) {
  dlerror();
  void* p = dlsym(lib, name);
  if (p == nullptr) {
    *why = "lacks the symbol " + std::string(name) + ": " + DlError();
    return false;
  }
  *out = reinterpret_cast<T>(p);
  return true;
}

Result<const OnigLibrary*> Load() {
  // Never closed: see the header. RTLD_LOCAL keeps its regcomp & co. out of the program.
  void* lib = dlopen(kSoname, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return LoadError("could not be loaded: " + DlError());
  static OnigLibrary l;
  std::string why;
  const bool found =
      Symbol(lib, "onig_new", &l.onig_new, &why) && Symbol(lib, "onig_free", &l.onig_free, &why) &&
      Symbol(lib, "onig_search_with_param", &l.onig_search_with_param, &why) &&
      Symbol(lib, "onig_region_new", &l.onig_region_new, &why) &&
      Symbol(lib, "onig_region_free", &l.onig_region_free, &why) &&
      Symbol(lib, "onig_region_clear", &l.onig_region_clear, &why) &&
      Symbol(lib, "onig_new_match_param", &l.onig_new_match_param, &why) &&
      Symbol(lib, "onig_initialize_match_param", &l.onig_initialize_match_param, &why) &&
      Symbol(lib, "onig_set_retry_limit_in_match_of_match_param",
             &l.onig_set_retry_limit_in_match_of_match_param, &why) &&
      Symbol(lib, "onig_free_match_param", &l.onig_free_match_param, &why) &&
      Symbol(lib, "onig_error_code_to_str", &l.onig_error_code_to_str, &why) &&
      Symbol(lib, "OnigEncodingUTF8", &l.encoding_utf8, &why) &&
      Symbol(lib, "OnigSyntaxOniguruma", &l.syntax_oniguruma, &why) &&
      Symbol(lib, "OnigDefaultCaseFoldFlag", &l.default_case_fold_flag, &why);
  decltype(&::onig_initialize) initialize = nullptr;
  if (!found || !Symbol(lib, "onig_initialize", &initialize, &why)) return LoadError(why);
  OnigEncoding encodings[] = {l.encoding_utf8};
  const int rc = initialize(encodings, 1);
  if (rc != ONIG_NORMAL) {
    OnigUChar buf[ONIG_MAX_ERROR_MESSAGE_LEN];
    const int n = l.onig_error_code_to_str(buf, rc);
    return LoadError("failed to initialize: " + std::string(reinterpret_cast<const char*>(buf),
                                                            n > 0 ? static_cast<size_t>(n) : 0));
  }
  return static_cast<const OnigLibrary*>(&l);
}

}  // namespace

const Result<const OnigLibrary*>& LoadOnigLibrary() {
  // Never destroyed: a Regex in a static object may be freed after this one's destructor ran.
  static const auto* library = new Result<const OnigLibrary*>(Load());
  return *library;
}

}  // namespace gridfeed::text::hf
