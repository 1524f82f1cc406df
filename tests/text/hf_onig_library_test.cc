// Oniguruma stays out of the program's symbol namespace (text/hf/onig_library.h): libonig.so
// also exports POSIX regcomp/regexec/regfree/regerror, and linked, it interposed them on glibc's
// in every program linking gridfeed_text (gtest's death-test matcher hung under ASan).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <regex.h>

#include <string>
#include <vector>

#include "gridfeed/text/hf/regex.h"

namespace gridfeed::text::hf {
namespace {

bool IsSanitizerRuntime(const std::string& object) {
  return object.find("libasan") != std::string::npos ||
         object.find("libtsan") != std::string::npos ||
         object.find("libubsan") != std::string::npos;
}

TEST(HfOnigLibrary, ProgramKeepsGlibcPosixRegex) {
  // Oniguruma loaded and in use.
  auto re = Regex::Compile(R"( ?\p{L}+)");
  ASSERT_TRUE(re.ok()) << re.status().ToString();
  std::vector<Span> matches;
  ASSERT_TRUE(re->FindAll("ab cd", &matches).ok());
  EXPECT_EQ(matches.size(), 2u);

  // None of its symbols (regcomp and friends included) is visible to the program.
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "onig_new"), nullptr);

  // The program's regcomp is glibc's (under a sanitizer, the runtime's interceptor, which
  // forwards to the next definition in the program's namespace: glibc's, Oniguruma's being
  // absent from it per the check above).
  Dl_info info{};
  ASSERT_NE(dladdr(reinterpret_cast<void*>(&regcomp), &info), 0);
  const std::string object = info.dli_fname != nullptr ? info.dli_fname : "";
  if (!IsSanitizerRuntime(object)) {
    EXPECT_NE(object.find("libc.so"), std::string::npos) << object;
  }

  // glibc's regcomp and regexec work together. re_nsub sits where glibc's regex_t has it
  // (Oniguruma's POSIX regex_t is a different struct: it would leave that field 0).
  regex_t posix{};
  ASSERT_EQ(regcomp(&posix, "^(a+)(b)$", REG_EXTENDED), 0);
  EXPECT_EQ(posix.re_nsub, 2u);
  regmatch_t groups[3];
  EXPECT_EQ(regexec(&posix, "aab", 3, groups, 0), 0);
  EXPECT_EQ(groups[1].rm_so, 0);
  EXPECT_EQ(groups[1].rm_eo, 2);
  EXPECT_EQ(regexec(&posix, "abb", 0, nullptr, 0), REG_NOMATCH);
  regfree(&posix);
}

}  // namespace
}  // namespace gridfeed::text::hf
