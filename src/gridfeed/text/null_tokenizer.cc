// Megatron's NullTokenizer (megatron/core/tokenizers/text/libraries/null_tokenizer.py at
// d98e8a6): text is space-separated integers. Contract in tokenizer_spec.h.
#include <unicode/uchar.h>

#include "gridfeed/text/hf/utf8.h"
#include "gridfeed/text/tokenizer_spec.h"

namespace gridfeed::text {
namespace {

// Python's str.isspace.
bool PySpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// Python's int(s) in base 10: surrounding whitespace, a sign, decimal digits of any script
// (category Nd) with single underscores between them. nullopt where Python raises or the value
// leaves int64.
std::optional<int64_t> PyInt(std::string_view s) {
  // Transform as CPython does: whitespace -> ' ', digits -> ASCII, anything else kept/invalid.
  std::string t;
  for (size_t i = 0; i < s.size();) {
    size_t len = 0;
    const char32_t c = hf::Utf8Decode(s, i, &len);
    i += len;
    if (PySpace(c)) {
      t.push_back(' ');
    } else if (u_charType(static_cast<UChar32>(c)) == U_DECIMAL_DIGIT_NUMBER) {
      t.push_back(static_cast<char>('0' + u_charDigitValue(static_cast<UChar32>(c))));
    } else if (c < 0x80) {
      t.push_back(static_cast<char>(c));
    } else {
      return std::nullopt;
    }
  }
  size_t p = 0;
  while (p < t.size() && t[p] == ' ') ++p;
  bool neg = false;
  if (p < t.size() && (t[p] == '+' || t[p] == '-')) neg = t[p++] == '-';
  __int128 v = 0;
  bool digit = false, prev_underscore = false;
  for (; p < t.size() && t[p] != ' '; ++p) {
    if (t[p] == '_') {
      if (!digit || prev_underscore) return std::nullopt;
      prev_underscore = true;
      continue;
    }
    if (t[p] < '0' || t[p] > '9') return std::nullopt;
    v = v * 10 + (t[p] - '0');
    if (v > (static_cast<__int128>(1) << 64)) return std::nullopt;
    digit = true;
    prev_underscore = false;
  }
  if (!digit || prev_underscore) return std::nullopt;
  while (p < t.size() && t[p] == ' ') ++p;
  if (p != t.size()) return std::nullopt;
  if (neg) v = -v;
  if (v > INT64_MAX || v < INT64_MIN) return std::nullopt;
  return static_cast<int64_t>(v);
}

class NullTokenizer final : public TextTokenizer {
 public:
  explicit NullTokenizer(int64_t vocab_size) {
    path_ = "NullTokenizer";
    vocab_size_ = vocab_size;
    eos_ = vocab_size - 1;
  }
  std::string_view kind() const override { return "null"; }

  Result<std::vector<int64_t>> Encode(std::string_view text) const override {
    if (hf::Utf8ValidPrefix(text) != text.size()) {
      return InvalidArgument("text is not valid UTF-8 at byte " +
                             std::to_string(hf::Utf8ValidPrefix(text)));
    }
    std::vector<int64_t> ids;
    size_t start = 0;
    while (true) {
      const size_t sp = text.find(' ', start);
      const std::string_view part =
          text.substr(start, sp == std::string_view::npos ? std::string_view::npos : sp - start);
      auto v = PyInt(part);
      if (!v) {
        return InvalidArgument("NullTokenizer: '" + std::string(part.substr(0, 40)) +
                               "' is not an integer (Megatron: int() of each ' '-separated part)");
      }
      if (*v < 0 || *v >= vocab_size_) {
        return InvalidArgument("NullTokenizer: id " + std::to_string(*v) +
                               " is outside the vocabulary [0, " + std::to_string(vocab_size_) +
                               ")");
      }
      ids.push_back(*v);
      if (sp == std::string_view::npos) break;
      start = sp + 1;
    }
    return ids;
  }

  Result<std::string> Decode(std::span<const int64_t> ids) const override {
    std::string out;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) out += ' ';
      out += std::to_string(ids[i]);
    }
    return out;
  }

  std::optional<int64_t> TokenId(std::string_view) const override { return std::nullopt; }
};

}  // namespace

Result<std::unique_ptr<TextTokenizer>> MakeNullTokenizer(int64_t vocab_size) {
  if (vocab_size <= 0 || vocab_size > (int64_t{1} << 40)) {
    return InvalidArgument("--tokenizer-type NullTokenizer needs --vocab-size N > 0, got " +
                           std::to_string(vocab_size));
  }
  return std::unique_ptr<TextTokenizer>(std::make_unique<NullTokenizer>(vocab_size));
}

}  // namespace gridfeed::text
