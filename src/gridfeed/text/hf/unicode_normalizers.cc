// The library's character-level normalizers: NFC, NFD, NFKC, NFKD (ICU), Lowercase, Strip,
// StripAccents, Nmt and ByteLevel, and the BertNormalizer built from the same steps.
#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/uniset.h>

#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>

#include "gridfeed/text/hf/byte_level_alphabet.h"
#include "gridfeed/text/hf/component_json.h"
#include "gridfeed/text/hf/normalizers.h"
#include "gridfeed/text/hf/split_spans.h"
#include "gridfeed/text/hf/unicode_props.h"
#include "gridfeed/text/hf/utf8.h"

namespace gridfeed::text::hf {
namespace {

bool IsAscii(const std::string& s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

enum class Form { kNfc, kNfd, kNfkc, kNfkd };

// The library's normalization tables (unicode-normalization-alignments) are Unicode 9.0's: ICU's
// forms restricted to the characters assigned by 9.0 (later ones are left as they are and, like
// unknown characters there, act as starters).
struct FilteredForms {
  UErrorCode err = U_ZERO_ERROR;
  icu::UnicodeSet by_9_0{icu::UnicodeString(u"[:age=9.0:]"), err};
  std::unique_ptr<icu::FilteredNormalizer2> forms[4];
  FilteredForms() {
    const icu::Normalizer2* base[4] = {
        icu::Normalizer2::getNFCInstance(err), icu::Normalizer2::getNFDInstance(err),
        icu::Normalizer2::getNFKCInstance(err), icu::Normalizer2::getNFKDInstance(err)};
    if (U_FAILURE(err)) return;
    by_9_0.freeze();
    for (int i = 0; i < 4; ++i)
      forms[i] = std::make_unique<icu::FilteredNormalizer2>(*base[i], by_9_0);
  }
};

Status Normalize(Form form, std::string* text) {
  if (IsAscii(*text)) return Status::Ok();  // every form leaves ASCII as it is
  static const FilteredForms filtered;
  UErrorCode err = filtered.err;
  if (U_FAILURE(err)) return Internal(std::string("ICU normalizer: ") + u_errorName(err));
  const icu::Normalizer2* n = filtered.forms[static_cast<int>(form)].get();
  std::string out;
  out.reserve(text->size() + text->size() / 4);
  icu::StringByteSink<std::string> sink(&out);
  n->normalizeUTF8(0, icu::StringPiece(text->data(), static_cast<int32_t>(text->size())), sink,
                   nullptr, err);
  if (U_FAILURE(err)) return Internal(std::string("ICU normalization: ") + u_errorName(err));
  text->swap(out);
  return Status::Ok();
}

class FormNormalizer final : public Normalizer {
 public:
  explicit FormNormalizer(Form form) : form_(form) {}
  Status Normalize(std::string* text) const override { return hf::Normalize(form_, text); }

 private:
  Form form_;
};

// Rewrites `text` character by character: `fn(c, &out)` appends c's replacement.
template <typename Fn>
void MapChars(std::string* text, Fn fn) {
  std::string out;
  out.reserve(text->size());
  for (size_t i = 0; i < text->size();) {
    size_t len;
    const char32_t c = Utf8Decode(*text, i, &len);
    fn(c, &out);
    i += len;
  }
  text->swap(out);
}

void Lowercase(std::string* text) {
  if (IsAscii(*text)) {
    for (char& c : *text) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
    }
    return;
  }
  MapChars(text, [](char32_t c, std::string* out) { AppendLowercase(c, out); });
}

class LowercaseNormalizer final : public Normalizer {
 public:
  Status Normalize(std::string* text) const override {
    Lowercase(text);
    return Status::Ok();
  }
};

class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  Status Normalize(std::string* text) const override {
    size_t begin = 0, end = text->size();
    if (left_) {
      while (begin < end) {
        size_t len;
        if (!IsWhitespace(Utf8Decode(*text, begin, &len))) break;
        begin += len;
      }
    }
    if (right_) {
      while (end > begin) {
        size_t start = end - 1;
        while (start > begin && (static_cast<unsigned char>((*text)[start]) & 0xC0) == 0x80)
          --start;
        size_t len;
        if (!IsWhitespace(Utf8Decode(*text, start, &len))) break;
        end = start;
      }
    }
    *text = text->substr(begin, end - begin);
    return Status::Ok();
  }

 private:
  bool left_, right_;
};

class StripAccentsNormalizer final : public Normalizer {
 public:
  Status Normalize(std::string* text) const override {
    if (IsAscii(*text)) return Status::Ok();
    MapChars(text, [](char32_t c, std::string* out) {
      if (!IsCombiningMark(c)) AppendUtf8(c, out);
    });
    return Status::Ok();
  }
};

// Nmt: drops ASCII controls, maps the other "whitespace" code points to ' '.
class NmtNormalizer final : public Normalizer {
 public:
  Status Normalize(std::string* text) const override {
    MapChars(text, [](char32_t c, std::string* out) {
      if ((c >= 0x01 && c <= 0x08) || c == 0x0B || (c >= 0x0E && c <= 0x1F) || c == 0x7F ||
          c == 0x8F || c == 0x9F) {
        return;
      }
      const bool space = c == 0x09 || c == 0x0A || c == 0x0C || c == 0x0D || c == 0x1680 ||
                         (c >= 0x200B && c <= 0x200F) || c == 0x2028 || c == 0x2029 ||
                         c == 0x2581 || c == 0xFEFF || c == 0xFFFD;
      AppendUtf8(space ? U' ' : c, out);
    });
    return Status::Ok();
  }
};

class ByteLevelNormalizer final : public Normalizer {
 public:
  Status Normalize(std::string* text) const override {
    std::string out;
    out.reserve(text->size() * 2);
    AppendByteLevel(*text, &out);
    text->swap(out);
    return Status::Ok();
  }
};

bool IsChineseChar(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

class BertNormalizer final : public Normalizer {
 public:
  BertNormalizer(bool clean_text, bool chinese, bool strip_accents, bool lowercase)
      : clean_text_(clean_text),
        chinese_(chinese),
        strip_accents_(strip_accents),
        lowercase_(lowercase) {}

  Status Normalize(std::string* text) const override {
    if (clean_text_) {
      // Drops NUL, U+FFFD and "other" characters (but \t \n \r); whitespace becomes ' '.
      MapChars(text, [](char32_t c, std::string* out) {
        const bool tnr = c == '\t' || c == '\n' || c == '\r';
        if (c == 0 || c == 0xFFFD || (!tnr && IsOther(c))) return;
        AppendUtf8(tnr || IsWhitespace(c) ? U' ' : c, out);
      });
    }
    if (chinese_) {
      MapChars(text, [](char32_t c, std::string* out) {
        if (IsChineseChar(c)) {
          out->push_back(' ');
          AppendUtf8(c, out);
          out->push_back(' ');
        } else {
          AppendUtf8(c, out);
        }
      });
    }
    if (strip_accents_) {
      GRIDFEED_RETURN_IF_ERROR(hf::Normalize(Form::kNfd, text));
      MapChars(text, [](char32_t c, std::string* out) {
        if (!IsMarkNonspacing(c)) AppendUtf8(c, out);
      });
    }
    if (lowercase_) Lowercase(text);
    return Status::Ok();
  }

 private:
  bool clean_text_, chinese_, strip_accents_, lowercase_;
};

}  // namespace

Result<std::unique_ptr<Normalizer>> MakeCharNormalizer(const std::string& type,
                                                       const nlohmann::json& j,
                                                       const JsonWhere& where) {
  if (type == "NFC") return std::unique_ptr<Normalizer>(new FormNormalizer(Form::kNfc));
  if (type == "NFD") return std::unique_ptr<Normalizer>(new FormNormalizer(Form::kNfd));
  if (type == "NFKC") return std::unique_ptr<Normalizer>(new FormNormalizer(Form::kNfkc));
  if (type == "NFKD") return std::unique_ptr<Normalizer>(new FormNormalizer(Form::kNfkd));
  if (type == "Lowercase") return std::unique_ptr<Normalizer>(new LowercaseNormalizer());
  if (type == "StripAccents") return std::unique_ptr<Normalizer>(new StripAccentsNormalizer());
  if (type == "Nmt") return std::unique_ptr<Normalizer>(new NmtNormalizer());
  if (type == "ByteLevel") return std::unique_ptr<Normalizer>(new ByteLevelNormalizer());
  if (type == "Strip") {
    GRIDFEED_ASSIGN_OR_RETURN(bool left, RequiredBool(j, "strip_left", where));
    GRIDFEED_ASSIGN_OR_RETURN(bool right, RequiredBool(j, "strip_right", where));
    return std::unique_ptr<Normalizer>(new StripNormalizer(left, right));
  }
  if (type == "BertNormalizer" || type == "Bert") {  // the library reads both
    GRIDFEED_ASSIGN_OR_RETURN(bool clean, RequiredBool(j, "clean_text", where));
    GRIDFEED_ASSIGN_OR_RETURN(bool chinese, RequiredBool(j, "handle_chinese_chars", where));
    GRIDFEED_ASSIGN_OR_RETURN(bool lowercase, RequiredBool(j, "lowercase", where));
    bool strip = lowercase;  // strip_accents null or absent follows lowercase
    if (j.contains("strip_accents") && !j["strip_accents"].is_null()) {
      GRIDFEED_ASSIGN_OR_RETURN(strip, RequiredBool(j, "strip_accents", where));
    }
    return std::unique_ptr<Normalizer>(new BertNormalizer(clean, chinese, strip, lowercase));
  }
  return UnsupportedType("normalizer", type, where);
}

}  // namespace gridfeed::text::hf
