#include "gridfeed/text/hf/unicode_props.h"

#include <unicode/uchar.h>

#include "gridfeed/text/hf/utf8.h"

namespace gridfeed::text::hf {
namespace {

int32_t Category(char32_t c) { return u_charType(static_cast<UChar32>(c)); }

}  // namespace

bool AssignedBy(char32_t c, int major) {
  UVersionInfo age;
  u_charAge(static_cast<UChar32>(c), age);
  return age[0] <= major;
}

bool IsWhitespace(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= '\t' && c <= '\r');
  return u_isUWhiteSpace(static_cast<UChar32>(c));
}

bool IsNumeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  const int32_t t = Category(c);
  return t == U_DECIMAL_DIGIT_NUMBER || t == U_LETTER_NUMBER || t == U_OTHER_NUMBER;
}

bool IsPunctuation(char32_t c) {
  if (c < 0x80)
    return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') ||
           (c >= '{' && c <= '~');
  const int32_t t = Category(c);
  return (t == U_CONNECTOR_PUNCTUATION || t == U_DASH_PUNCTUATION || t == U_START_PUNCTUATION ||
          t == U_END_PUNCTUATION || t == U_INITIAL_PUNCTUATION || t == U_FINAL_PUNCTUATION ||
          t == U_OTHER_PUNCTUATION) &&
         AssignedBy(c, 8);
}

bool IsRegexWord(char32_t c) {
  if (c < 0x80) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  }
  const auto u = static_cast<UChar32>(c);
  if (u_hasBinaryProperty(u, UCHAR_ALPHABETIC) || u_hasBinaryProperty(u, UCHAR_JOIN_CONTROL)) {
    return true;
  }
  const int32_t t = Category(c);
  return t == U_NON_SPACING_MARK || t == U_COMBINING_SPACING_MARK || t == U_ENCLOSING_MARK ||
         t == U_DECIMAL_DIGIT_NUMBER || t == U_CONNECTOR_PUNCTUATION;
}

bool IsCombiningMark(char32_t c) {
  if (c < 0x80) return false;
  const int32_t t = Category(c);
  return (t == U_NON_SPACING_MARK || t == U_COMBINING_SPACING_MARK || t == U_ENCLOSING_MARK) &&
         AssignedBy(c, 9);
}

bool IsMarkNonspacing(char32_t c) {
  return c >= 0x80 && Category(c) == U_NON_SPACING_MARK && AssignedBy(c, 8);
}

bool IsOther(char32_t c) {
  const int32_t t = Category(c);
  return t == U_CONTROL_CHAR || t == U_PRIVATE_USE_CHAR || t == U_SURROGATE ||
         (t == U_FORMAT_CHAR && AssignedBy(c, 8));
}

void AppendLowercase(char32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c));
    return;
  }
  if (c == 0x130) {  // SpecialCasing: İ -> i + COMBINING DOT ABOVE, whatever the context
    out->append("i\xCC\x87");
    return;
  }
  AppendUtf8(static_cast<char32_t>(u_tolower(static_cast<UChar32>(c))), out);
}

}  // namespace gridfeed::text::hf
