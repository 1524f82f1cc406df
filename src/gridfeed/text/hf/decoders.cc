// The library's decoders (tokenizers/src/decoders, plus the Decoder impls of the ByteLevel and
// Metaspace pre-tokenizers and the Replace normalizer), each as its `decode_chain`.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "gridfeed/text/hf/byte_level_alphabet.h"
#include "gridfeed/text/hf/component_json.h"
#include "gridfeed/text/hf/components.h"
#include "gridfeed/text/hf/regex.h"
#include "gridfeed/text/hf/utf8.h"

namespace gridfeed::text::hf {
namespace {

using nlohmann::json;
using Tokens = std::vector<std::string>;

// Sequences nest; deeper than this is refused rather than recursed into.
constexpr int kMaxDepth = 32;
constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

// A Rust `usize` field (no serde default).
Result<size_t> RequiredSize(const json& j, std::string_view key, const JsonWhere& where) {
  GRIDFEED_ASSIGN_OR_RETURN(const json* v, RequiredField(j, key, where));
  if (!v->is_number_unsigned()) {
    return InvalidArgument("expected a non-negative integer at " + where.Field(key).str());
  }
  return static_cast<size_t>(v->get<uint64_t>());
}

// ByteLevel: every token spelled in GPT-2's alphabet becomes its bytes (a token with a
// character outside the alphabet keeps its UTF-8 bytes); the bytes of all tokens, read as UTF-8
// lossily, make one string.
class ByteLevelDecoder final : public Decoder {
 public:
  Result<Tokens> DecodeChain(Tokens tokens) const override {
    std::string bytes;
    for (const std::string& t : tokens) {
      if (!DecodeByteLevel(t, &bytes)) bytes += t;
    }
    return Tokens{Utf8Lossy(bytes)};
  }
};

// Replace: in each token, every match of the pattern becomes `content`.
class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(Regex re, std::string content)
      : re_(std::move(re)), content_(std::move(content)) {}
  Result<Tokens> DecodeChain(Tokens tokens) const override {
    std::vector<Span> spans;
    for (std::string& t : tokens) {
      GRIDFEED_RETURN_IF_ERROR(re_.FindMatches(t, &spans));
      std::string out;
      for (const Span& s : spans) {
        if (s.is_match) {
          out += content_;
        } else {
          out.append(t, s.begin, s.end - s.begin);
        }
      }
      t = std::move(out);
    }
    return tokens;
  }

 private:
  Regex re_;
  std::string content_;
};

// The byte of a "<0xNN>" token: exactly 6 bytes, and NN read as Rust's u8::from_str_radix(_, 16)
// does (which also takes "+N").
std::optional<uint8_t> FallbackByte(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return std::nullopt;
  const auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (t[3] == '+') {
    const int d = hex(t[4]);
    if (d < 0) return std::nullopt;
    return static_cast<uint8_t>(d);
  }
  const int hi = hex(t[3]), lo = hex(t[4]);
  if (hi < 0 || lo < 0) return std::nullopt;
  return static_cast<uint8_t>(hi * 16 + lo);
}

// ByteFallback: each run of "<0xNN>" tokens becomes one token, its bytes if they are valid
// UTF-8, else one U+FFFD per byte token.
class ByteFallbackDecoder final : public Decoder {
 public:
  Result<Tokens> DecodeChain(Tokens tokens) const override {
    Tokens out;
    std::string run;
    size_t run_tokens = 0;
    const auto flush = [&] {
      if (run_tokens == 0) return;
      if (Utf8ValidPrefix(run) == run.size()) {
        out.push_back(run);
      } else {
        for (size_t i = 0; i < run_tokens; ++i) out.emplace_back(kReplacementChar);
      }
      run.clear();
      run_tokens = 0;
    };
    for (std::string& t : tokens) {
      if (auto b = FallbackByte(t)) {
        run.push_back(static_cast<char>(*b));
        ++run_tokens;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    return out;
  }
};

class FuseDecoder final : public Decoder {
 public:
  Result<Tokens> DecodeChain(Tokens tokens) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    return Tokens{std::move(all)};
  }
};

// Strip: removes up to `start` leading and `stop` trailing `content` characters of each token.
class StripDecoder final : public Decoder {
 public:
  StripDecoder(char32_t content, size_t start, size_t stop)
      : content_(content), start_(start), stop_(stop) {}
  Result<Tokens> DecodeChain(Tokens tokens) const override {
    std::vector<char32_t> chars;
    for (std::string& t : tokens) {
      chars.clear();
      for (size_t i = 0, n = 0; i < t.size(); i += n) chars.push_back(Utf8Decode(t, i, &n));
      size_t start_cut = 0;
      while (start_cut < start_ && start_cut < chars.size() && chars[start_cut] == content_) {
        ++start_cut;
      }
      size_t stop_cut = chars.size();
      for (size_t i = 0; i < stop_; ++i) {
        // The library indexes chars[len - i - 1] unchecked: it panics past the front.
        if (i >= chars.size()) return Panic(t);
        if (chars[chars.size() - i - 1] != content_) break;
        stop_cut = chars.size() - i - 1;
      }
      if (start_cut > stop_cut) return Panic(t);
      std::string out;
      for (size_t i = start_cut; i < stop_cut; ++i) AppendUtf8(chars[i], &out);
      t = std::move(out);
    }
    return tokens;
  }

 private:
  static Status Panic(const std::string& t) {
    return InvalidArgument("Strip decoder: token \"" + t +
                           "\" is shorter than the characters to strip (the library panics)");
  }
  char32_t content_;
  size_t start_, stop_;
};

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> decoders)
      : decoders_(std::move(decoders)) {}
  Result<Tokens> DecodeChain(Tokens tokens) const override {
    for (const auto& d : decoders_) {
      GRIDFEED_ASSIGN_OR_RETURN(tokens, d->DecodeChain(std::move(tokens)));
    }
    return tokens;
  }

 private:
  std::vector<std::unique_ptr<Decoder>> decoders_;
};

// Metaspace: the replacement character becomes a space, except in the first token, where
// every replacement character is dropped unless prepend_scheme is "never".
class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool drop_in_first)
      : replacement_(std::move(replacement)), drop_in_first_(drop_in_first) {}
  Result<Tokens> DecodeChain(Tokens tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = ReplaceAll(tokens[i], replacement_, i == 0 && drop_in_first_ ? "" : " ");
    }
    return tokens;
  }

 private:
  std::string replacement_;
  bool drop_in_first_;
};

// The library's wordpiece::cleanup, token by token.
std::string Cleanup(std::string s) {
  static constexpr std::pair<std::string_view, std::string_view> kRules[] = {
      {" .", "."},   {" ?", "?"},     {" !", "!"},    {" ,", ","},
      {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},  {" do not", " don't"},
      {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules) s = ReplaceAll(s, from, to);
  return s;
}

// WordPiece: tokens after the first lose `prefix` if they start with it, else get a space
// before them; `cleanup` then tidies punctuation spacing in each token.
class WordPieceDecoder final : public Decoder {
 public:
  WordPieceDecoder(std::string prefix, bool cleanup)
      : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  Result<Tokens> DecodeChain(Tokens tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      if (i != 0) {
        if (std::string_view(t).starts_with(prefix_)) {
          t.erase(0, prefix_.size());
        } else {
          t.insert(0, " ");
        }
      }
      if (cleanup_) t = Cleanup(std::move(t));
    }
    return tokens;
  }

 private:
  std::string prefix_;
  bool cleanup_;
};

// BPEDecoder: `suffix` becomes a space in every token but the last, where it is removed.
class BpeDecoder final : public Decoder {
 public:
  explicit BpeDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  Result<Tokens> DecodeChain(Tokens tokens) const override {
    // (The library computes tokens.len() - 1 and panics on no tokens; none decode to nothing.)
    for (size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = ReplaceAll(tokens[i], suffix_, i + 1 == tokens.size() ? "" : " ");
    }
    return tokens;
  }

 private:
  std::string suffix_;
};

// CTC: consecutive duplicates collapse, the pad token is removed, and with `cleanup` the
// WordPiece cleanup runs and the word delimiter becomes a space; empty tokens are dropped.
class CtcDecoder final : public Decoder {
 public:
  CtcDecoder(std::string pad, std::string delimiter, bool cleanup)
      : pad_(std::move(pad)), delimiter_(std::move(delimiter)), cleanup_(cleanup) {}
  Result<Tokens> DecodeChain(Tokens tokens) const override {
    Tokens out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0 && tokens[i] == tokens[i - 1]) continue;
      std::string t = ReplaceAll(tokens[i], pad_, "");
      if (cleanup_) t = ReplaceAll(Cleanup(std::move(t)), delimiter_, " ");
      if (!t.empty()) out.push_back(std::move(t));
    }
    return out;
  }

 private:
  std::string pad_, delimiter_;
  bool cleanup_;
};

Result<std::unique_ptr<Decoder>> MakeReplace(const json& j, const JsonWhere& where) {
  GRIDFEED_ASSIGN_OR_RETURN(const json* pattern, RequiredField(j, "pattern", where));
  GRIDFEED_ASSIGN_OR_RETURN(std::string content, RequiredString(j, "content", where));
  const JsonWhere pw = where.Field("pattern");
  if (!pattern->is_object() || pattern->size() != 1) {
    return InvalidArgument("expected {\"String\": ...} or {\"Regex\": ...} at " + pw.str());
  }
  const std::string& kind = pattern->begin().key();
  const json& value = pattern->begin().value();
  if (!value.is_string()) return InvalidArgument("expected a string at " + pw.Field(kind).str());
  const std::string& text = value.get_ref<const std::string&>();
  Result<Regex> re = Status();
  if (kind == "String") {
    re = Regex::Literal(text);
  } else if (kind == "Regex") {
    re = Regex::Compile(text);
  } else {
    return InvalidArgument("unsupported Replace pattern kind \"" + kind + "\" at " + pw.str());
  }
  if (!re.ok()) return re.status().WithContext(pw.Field(kind).str());
  return std::unique_ptr<Decoder>(
      std::make_unique<ReplaceDecoder>(std::move(re).value(), std::move(content)));
}

Result<std::unique_ptr<Decoder>> MakeMetaspace(const json& j, const JsonWhere& where) {
  GRIDFEED_ASSIGN_OR_RETURN(std::string replacement, RequiredChar(j, "replacement", where));
  std::string scheme = "always";  // the serde default
  if (j.contains("prepend_scheme")) {
    GRIDFEED_ASSIGN_OR_RETURN(scheme, RequiredString(j, "prepend_scheme", where));
    if (scheme != "always" && scheme != "first" && scheme != "never") {
      return InvalidArgument("unsupported prepend_scheme \"" + scheme + "\" at " +
                             where.Field("prepend_scheme").str());
    }
  }
  if (j.contains("add_prefix_space") && !j["add_prefix_space"].is_null()) {
    GRIDFEED_ASSIGN_OR_RETURN(bool add, RequiredBool(j, "add_prefix_space", where));
    // The library's rule: add_prefix_space false only with prepend_scheme "never".
    if (!add && scheme != "never") {
      return InvalidArgument("add_prefix_space does not match declared prepend_scheme at " +
                             where.Field("add_prefix_space").str());
    }
  }
  if (j.contains("split") && !j["split"].is_null()) {
    GRIDFEED_RETURN_IF_ERROR(RequiredBool(j, "split", where).status());
  }
  return std::unique_ptr<Decoder>(
      std::make_unique<MetaspaceDecoder>(std::move(replacement), scheme != "never"));
}

Result<std::unique_ptr<Decoder>> MakeDecoderAt(const json& j, const JsonWhere& where, int depth);

Result<std::unique_ptr<Decoder>> MakeSequence(const json& j, const JsonWhere& where, int depth) {
  GRIDFEED_ASSIGN_OR_RETURN(const json* list, RequiredField(j, "decoders", where));
  const JsonWhere lw = where.Field("decoders");
  if (!list->is_array()) return InvalidArgument("expected a list at " + lw.str());
  std::vector<std::unique_ptr<Decoder>> decoders;
  for (size_t i = 0; i < list->size(); ++i) {
    GRIDFEED_ASSIGN_OR_RETURN(auto d, MakeDecoderAt((*list)[i], lw.Index(i), depth + 1));
    decoders.push_back(std::move(d));
  }
  return std::unique_ptr<Decoder>(std::make_unique<SequenceDecoder>(std::move(decoders)));
}

Result<std::unique_ptr<Decoder>> MakeDecoderAt(const json& j, const JsonWhere& where, int depth) {
  if (depth > kMaxDepth) {
    return InvalidArgument("decoders nested deeper than " + std::to_string(kMaxDepth) + " at " +
                           where.str());
  }
  GRIDFEED_ASSIGN_OR_RETURN(std::string type, ComponentType(j, where));
  using Ptr = std::unique_ptr<Decoder>;
  if (type == "ByteLevel") return Ptr(std::make_unique<ByteLevelDecoder>());
  if (type == "Replace") return MakeReplace(j, where);
  if (type == "ByteFallback") return Ptr(std::make_unique<ByteFallbackDecoder>());
  if (type == "Fuse") return Ptr(std::make_unique<FuseDecoder>());
  if (type == "Strip") {
    GRIDFEED_ASSIGN_OR_RETURN(std::string content, RequiredChar(j, "content", where));
    GRIDFEED_ASSIGN_OR_RETURN(size_t start, RequiredSize(j, "start", where));
    GRIDFEED_ASSIGN_OR_RETURN(size_t stop, RequiredSize(j, "stop", where));
    size_t n = 0;
    return Ptr(std::make_unique<StripDecoder>(Utf8Decode(content, 0, &n), start, stop));
  }
  if (type == "Sequence") return MakeSequence(j, where, depth);
  if (type == "Metaspace") return MakeMetaspace(j, where);
  if (type == "WordPiece") {
    GRIDFEED_ASSIGN_OR_RETURN(std::string prefix, RequiredString(j, "prefix", where));
    GRIDFEED_ASSIGN_OR_RETURN(bool cleanup, RequiredBool(j, "cleanup", where));
    return Ptr(std::make_unique<WordPieceDecoder>(std::move(prefix), cleanup));
  }
  if (type == "BPEDecoder") {
    GRIDFEED_ASSIGN_OR_RETURN(std::string suffix, RequiredString(j, "suffix", where));
    return Ptr(std::make_unique<BpeDecoder>(std::move(suffix)));
  }
  if (type == "CTC") {
    GRIDFEED_ASSIGN_OR_RETURN(std::string pad, RequiredString(j, "pad_token", where));
    GRIDFEED_ASSIGN_OR_RETURN(std::string delim, RequiredString(j, "word_delimiter_token", where));
    GRIDFEED_ASSIGN_OR_RETURN(bool cleanup, RequiredBool(j, "cleanup", where));
    return Ptr(std::make_unique<CtcDecoder>(std::move(pad), std::move(delim), cleanup));
  }
  return UnsupportedType("decoder", type, where);
}

}  // namespace

Result<std::unique_ptr<Decoder>> MakeDecoder(const json& j, const JsonWhere& where) {
  return MakeDecoderAt(j, where, 0);
}

}  // namespace gridfeed::text::hf
