// The chat-template subset of Jinja (contract: chat_template.h), reproducing jinja2 3.1's
// ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) as transformers 4.x builds
// it for apply_chat_template. Beyond the header's list it also accepts what Megatron's own
// prompt templates use: the str methods strip/lstrip/rstrip/replace/lower/upper/startswith/
// endswith, slices, list literals, `x if c else y`, `{% for %}...{% else %}`, and binds
// `tools`/`documents` to none as transformers does.
//
// Also home of PyStrip (conversation.h): Python's whitespace set is needed by both files and
// lives in one place.
//
// Python semantics followed where they show in output: str() of values (True, None), and/or
// returning an operand, truthiness, int arithmetic, Undefined (prints as "", fails in + and
// attribute access, `in` it is false), code-point indexing of strings. lower/upper are
// ASCII-only and refuse other text (full Unicode case mapping is not carried here).

#include "gridfeed/order/sft/chat_template.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "gridfeed/io/text_tokenizer.h"

namespace gridfeed::order::sft {
namespace {

// ---------------------------------------------------------------------------------------------
// Python string semantics on UTF-8.

// str.isspace(): bidirectional class WS/B/S or category Zs (also what re's \s matches).
bool IsPySpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// Code points of text that is valid UTF-8 by construction (validated at the boundary).
std::vector<char32_t> Cps(std::string_view s) {
  auto r = io::DecodeUtf8(s);
  return r.ok() ? std::move(r).value() : std::vector<char32_t>{};
}

std::string FromCps(std::span<const char32_t> cps) {
  std::string out;
  io::AppendUtf8(cps, &out);
  return out;
}

size_t Utf8Len(char32_t c) { return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4; }

// str.strip/lstrip/rstrip: `chars` nullopt means whitespace.
std::string PyStripImpl(std::string_view s, const std::optional<std::string>& chars, bool left,
                        bool right) {
  const std::vector<char32_t> cps = Cps(s);
  std::vector<char32_t> set;
  if (chars) set = Cps(*chars);
  auto strip = [&](char32_t c) {
    return chars ? std::find(set.begin(), set.end(), c) != set.end() : IsPySpace(c);
  };
  size_t b = 0, e = cps.size();
  if (left) {
    while (b < e && strip(cps[b])) ++b;
  }
  if (right) {
    while (e > b && strip(cps[e - 1])) --e;
  }
  size_t byte_b = 0, byte_len = 0;
  for (size_t k = 0; k < b; ++k) byte_b += Utf8Len(cps[k]);
  for (size_t k = b; k < e; ++k) byte_len += Utf8Len(cps[k]);
  return std::string(s.substr(byte_b, byte_len));
}

// Length of the run of Python whitespace starting at byte `p` of `s`.
size_t SpaceRun(std::string_view s, size_t p) {
  const size_t start = p;
  while (p < s.size()) {
    // Decode one code point by hand: this runs on every tag end.
    const unsigned char b0 = static_cast<unsigned char>(s[p]);
    size_t n = b0 < 0x80 ? 1 : b0 < 0xE0 ? 2 : b0 < 0xF0 ? 3 : 4;
    if (p + n > s.size()) break;
    auto cp = io::DecodeUtf8(s.substr(p, n));
    if (!cp.ok() || cp->size() != 1 || !IsPySpace((*cp)[0])) break;
    p += n;
  }
  return p - start;
}

bool AllPySpace(std::string_view s) { return SpaceRun(s, 0) == s.size(); }

// str.replace(old, new, count) with Python's rule for an empty `old` (insert between every
// code point, count-limited).
std::string PyReplace(const std::string& s, const std::string& old, const std::string& rep,
                      int64_t count) {
  std::string out;
  if (old.empty()) {
    const std::vector<char32_t> cps = Cps(s);
    int64_t done = 0;
    for (size_t k = 0; k <= cps.size(); ++k) {
      if (count < 0 || done < count) {
        out += rep;
        ++done;
      }
      if (k < cps.size()) io::AppendUtf8(std::span<const char32_t>(&cps[k], 1), &out);
    }
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t hit = s.find(old, pos);
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out += rep;
    pos = hit + old.size();
    ++done;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

bool IsAscii(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

// ---------------------------------------------------------------------------------------------
// Values.

struct Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;

struct Value {
  enum class Kind { kUndefined, kNone, kBool, kInt, kStr, kList, kDict };
  Kind kind = Kind::kUndefined;
  bool b = false;
  int64_t i = 0;
  std::string s;  // kStr: the text; kUndefined: what was missing, for messages
  std::shared_ptr<const List> list;
  std::shared_ptr<const Dict> dict;

  static Value Undefined(std::string what) {
    Value v;
    v.s = std::move(what);
    return v;
  }
  static Value None() {
    Value v;
    v.kind = Kind::kNone;
    return v;
  }
  static Value Bool(bool x) {
    Value v;
    v.kind = Kind::kBool;
    v.b = x;
    return v;
  }
  static Value Int(int64_t x) {
    Value v;
    v.kind = Kind::kInt;
    v.i = x;
    return v;
  }
  static Value Str(std::string x) {
    Value v;
    v.kind = Kind::kStr;
    v.s = std::move(x);
    return v;
  }
  static Value MakeList(List x) {
    Value v;
    v.kind = Kind::kList;
    v.list = std::make_shared<const List>(std::move(x));
    return v;
  }
  static Value MakeDict(Dict x) {
    Value v;
    v.kind = Kind::kDict;
    v.dict = std::make_shared<const Dict>(std::move(x));
    return v;
  }
  bool is(Kind k) const { return kind == k; }
  // Python's bool is an int subtype: True + 1, 'ab'[True].
  bool IsIntLike() const { return kind == Kind::kInt || kind == Kind::kBool; }
  int64_t AsInt() const { return kind == Kind::kBool ? (b ? 1 : 0) : i; }
};

const Value* DictFind(const Dict& d, std::string_view key) {
  for (const auto& [k, v] : d) {
    if (k == key) return &v;
  }
  return nullptr;
}

bool Truthy(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return false;
    case Value::Kind::kBool:
      return v.b;
    case Value::Kind::kInt:
      return v.i != 0;
    case Value::Kind::kStr:
      return !v.s.empty();
    case Value::Kind::kList:
      return !v.list->empty();
    case Value::Kind::kDict:
      return !v.dict->empty();
  }
  return false;
}

bool PyEquals(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is(K::kUndefined) || b.is(K::kUndefined)) return a.kind == b.kind;
  if (a.IsIntLike() && b.IsIntLike()) return a.AsInt() == b.AsInt();
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case K::kNone:
      return true;
    case K::kStr:
      return a.s == b.s;
    case K::kList:
      if (a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k) {
        if (!PyEquals((*a.list)[k], (*b.list)[k])) return false;
      }
      return true;
    case K::kDict:
      if (a.dict->size() != b.dict->size()) return false;
      for (const auto& [k, v] : *a.dict) {
        const Value* o = DictFind(*b.dict, k);
        if (!o || !PyEquals(v, *o)) return false;
      }
      return true;
    default:
      return false;
  }
}

// Python repr of a str, ASCII-printable text only (non-ASCII printability is Unicode-table
// dependent and not carried here).
Result<std::string> ReprStr(const std::string& s) {
  if (!IsAscii(s)) return InvalidArgument("printing a list or dict holding non-ASCII text");
  const char q =
      (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    if (c == q || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      static const char* kHex = "0123456789abcdef";
      out += "\\x";
      out += kHex[(c >> 4) & 0xF];
      out += kHex[c & 0xF];
    } else {
      out += c;
    }
  }
  out += q;
  return out;
}

Result<std::string> Repr(const Value& v);

// str(v), what {{ v }}, ~ and the string filters produce.
Result<std::string> ToStr(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined:
      return std::string();
    case Value::Kind::kNone:
      return std::string("None");
    case Value::Kind::kBool:
      return std::string(v.b ? "True" : "False");
    case Value::Kind::kInt:
      return std::to_string(v.i);
    case Value::Kind::kStr:
      return v.s;
    default:
      return Repr(v);
  }
}

Result<std::string> Repr(const Value& v) {
  if (v.is(Value::Kind::kStr)) return ReprStr(v.s);
  if (v.is(Value::Kind::kList)) {
    std::string out = "[";
    for (size_t k = 0; k < v.list->size(); ++k) {
      if (k) out += ", ";
      GRIDFEED_ASSIGN_OR_RETURN(std::string e, Repr((*v.list)[k]));
      out += e;
    }
    return out + "]";
  }
  if (v.is(Value::Kind::kDict)) {
    std::string out = "{";
    bool first = true;
    for (const auto& [k, e] : *v.dict) {
      if (!first) out += ", ";
      first = false;
      GRIDFEED_ASSIGN_OR_RETURN(std::string ks, ReprStr(k));
      GRIDFEED_ASSIGN_OR_RETURN(std::string es, Repr(e));
      out += ks + ": " + es;
    }
    return out + "}";
  }
  if (v.is(Value::Kind::kUndefined))
    return InvalidArgument("printing an undefined value in a list");
  return ToStr(v);
}

// ---------------------------------------------------------------------------------------------
// Lexer: Jinja's, for the default delimiters.

struct Token {
  enum class Type { kName, kStr, kInt, kOp, kEnd };
  Type type = Type::kEnd;
  std::string s;  // name, unescaped string, operator
  int64_t i = 0;
  size_t pos = 0;  // byte offset in the (newline-normalised) source
};

struct Segment {
  enum class Kind { kText, kVar, kBlock };
  Kind kind = Kind::kText;
  std::string text;
  std::vector<Token> tokens;  // the last is kEnd
  size_t pos = 0;
};

Status SyntaxError(const std::string& what, size_t pos) {
  return InvalidArgument("chat template: " + what + " at offset " + std::to_string(pos));
}

// Jinja 3 splits on \r\n, \r and \n only, joins with \n and drops one trailing newline
// (keep_trailing_newline is false).
std::string NormalizeNewlines(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (size_t k = 0; k < src.size(); ++k) {
    if (src[k] == '\r') {
      out += '\n';
      if (k + 1 < src.size() && src[k + 1] == '\n') ++k;
    } else {
      out += src[k];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Jinja unescapes literals with .encode("ascii", "backslashreplace").decode("unicode-escape").
Result<std::string> UnescapeLiteral(std::string_view raw, size_t pos) {
  std::vector<char32_t> out;
  const std::vector<char32_t> in = Cps(raw);
  for (size_t k = 0; k < in.size(); ++k) {
    if (in[k] != '\\') {
      out.push_back(in[k]);
      continue;
    }
    if (k + 1 >= in.size()) return SyntaxError("\\ at end of string literal", pos);
    const char32_t c = in[++k];
    auto hex = [&](size_t digits) -> Result<char32_t> {
      char32_t v = 0;
      for (size_t d = 0; d < digits; ++d) {
        const int h =
            (k + 1 < in.size() && in[k + 1] < 0x80) ? HexValue(static_cast<char>(in[k + 1])) : -1;
        if (h < 0) return SyntaxError("truncated \\x, \\u or \\U escape in string literal", pos);
        v = v * 16 + static_cast<char32_t>(h);
        ++k;
      }
      return v;
    };
    switch (c) {
      case '\n':
        break;  // line continuation
      case '\\':
      case '\'':
      case '"':
        out.push_back(c);
        break;
      case 'a':
        out.push_back(7);
        break;
      case 'b':
        out.push_back(8);
        break;
      case 'f':
        out.push_back(12);
        break;
      case 'n':
        out.push_back('\n');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'v':
        out.push_back(11);
        break;
      case 'x':
      case 'u':
      case 'U': {
        GRIDFEED_ASSIGN_OR_RETURN(char32_t v, hex(c == 'x' ? 2 : c == 'u' ? 4 : 8));
        if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
          return SyntaxError("escape outside the Unicode scalar values in string literal", pos);
        }
        out.push_back(v);
        break;
      }
      case 'N':
        return SyntaxError("\\N{...} escapes are not supported", pos);
      default:
        if (c >= '0' && c <= '7') {
          char32_t v = c - '0';
          for (int d = 0; d < 2 && k + 1 < in.size() && in[k + 1] >= '0' && in[k + 1] <= '7'; ++d) {
            v = v * 8 + (in[++k] - '0');
          }
          out.push_back(v);
        } else if (c >= 0x80) {
          // backslashreplace spelled the character as an escape, which the decode keeps verbatim
          // after the literal backslash.
          static const char* kHex = "0123456789abcdef";
          std::string esc = c < 0x100 ? "x" : c < 0x10000 ? "u" : "U";
          const int digits = c < 0x100 ? 2 : c < 0x10000 ? 4 : 8;
          for (int d = digits - 1; d >= 0; --d) esc += kHex[(c >> (4 * d)) & 0xF];
          out.push_back('\\');
          for (char e : esc) out.push_back(static_cast<unsigned char>(e));
        } else {
          out.push_back('\\');  // unknown escapes stay as written
          out.push_back(c);
        }
    }
  }
  return FromCps(out);
}

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {}

  Result<std::vector<Segment>> Run() {
    std::vector<Segment> segs;
    size_t pos = 0;
    bool line_starting = true;
    while (pos < src_.size()) {
      size_t q = pos;
      while (q + 1 < src_.size() && !(src_[q] == '{' && (src_[q + 1] == '{' || src_[q + 1] == '%' ||
                                                         src_[q + 1] == '#'))) {
        ++q;
      }
      if (q + 1 >= src_.size()) {
        segs.push_back({Segment::Kind::kText, src_.substr(pos), {}, pos});
        break;
      }
      const char kind = src_[q + 1];
      const char sign =
          (q + 2 < src_.size() && (src_[q + 2] == '-' || src_[q + 2] == '+')) ? src_[q + 2] : 0;
      std::string text = src_.substr(pos, q - pos);
      if (sign == '-') {
        text = PyStripImpl(text, std::nullopt, false, true);
      } else if (sign != '+' && kind != '{') {
        // lstrip_blocks: drop the whitespace between the line start and a block or comment tag.
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        if ((l_pos > 0 || line_starting) && l_pos < text.size() &&
            AllPySpace(std::string_view(text).substr(l_pos))) {
          text.resize(l_pos);
        }
      }
      if (!text.empty()) segs.push_back({Segment::Kind::kText, std::move(text), {}, pos});
      size_t p = q + 2 + (sign ? 1 : 0);
      if (kind == '#') {
        GRIDFEED_ASSIGN_OR_RETURN(p, CommentEnd(p, q));
      } else {
        Segment seg{kind == '%' ? Segment::Kind::kBlock : Segment::Kind::kVar, {}, {}, q};
        GRIDFEED_ASSIGN_OR_RETURN(p, Tag(p, kind == '%', &seg.tokens));
        if (kind == '%' && !seg.tokens.empty() && seg.tokens[0].type == Token::Type::kName &&
            seg.tokens[0].s == "raw") {
          return SyntaxError("{% raw %} is not supported", q);
        }
        segs.push_back(std::move(seg));
      }
      line_starting = p > 0 && src_[p - 1] == '\n';
      pos = p;
    }
    return segs;
  }

 private:
  // After `{#`: the earliest `+#}`, `-#}` (and following whitespace) or `#}` (and one newline).
  Result<size_t> CommentEnd(size_t p, size_t open) {
    for (size_t r = p; r + 1 < src_.size(); ++r) {
      if (src_.compare(r, 3, "+#}") == 0) return r + 3;
      if (src_.compare(r, 3, "-#}") == 0) return r + 3 + SpaceRun(src_, r + 3);
      if (src_.compare(r, 2, "#}") == 0)
        return r + 2 + (r + 2 < src_.size() && src_[r + 2] == '\n');
    }
    return SyntaxError("missing end of comment tag", open);
  }

  // Tokens of a tag body from `p`; returns the offset after the tag end.
  Result<size_t> Tag(size_t p, bool block, std::vector<Token>* out) {
    std::vector<char> balance;
    const size_t open = p;
    while (true) {
      if (balance.empty()) {
        if (block) {
          if (src_.compare(p, 3, "+%}") == 0) return Finish(p, p + 3, out);
          if (src_.compare(p, 3, "-%}") == 0) return Finish(p, p + 3 + SpaceRun(src_, p + 3), out);
          if (src_.compare(p, 2, "%}") == 0) {
            return Finish(p, p + 2 + (p + 2 < src_.size() && src_[p + 2] == '\n'),
                          out);  // trim_blocks
          }
        } else {
          if (src_.compare(p, 3, "-}}") == 0) return Finish(p, p + 3 + SpaceRun(src_, p + 3), out);
          if (src_.compare(p, 2, "}}") == 0) return Finish(p, p + 2, out);
        }
      }
      if (p >= src_.size()) return SyntaxError("unexpected end of template inside a tag", open);
      if (const size_t ws = SpaceRun(src_, p)) {
        p += ws;
        continue;
      }
      const char c = src_[p];
      Token t;
      t.pos = p;
      if (IsDigit(c)) {
        size_t e = p;
        while (e < src_.size() && (IsDigit(src_[e]) || src_[e] == '_')) ++e;
        const bool frac = e + 1 < src_.size() && src_[e] == '.' && IsDigit(src_[e + 1]);
        size_t x = e + 1;
        if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
        const bool expo = e < src_.size() && (src_[e] == 'e' || src_[e] == 'E') &&
                          x < src_.size() && IsDigit(src_[x]);
        if (frac || expo) return SyntaxError("float literals are not supported", p);
        if (c == '0' && p + 1 < src_.size() &&
            std::string_view("bBoOxX").find(src_[p + 1]) != std::string_view::npos) {
          return SyntaxError("binary, octal and hex literals are not supported", p);
        }
        // Jinja's decimal: [1-9](_?\d)* or 0(_?0)*.
        size_t k = p + 1;
        int64_t v = c - '0';
        while (k < src_.size()) {
          const size_t d = src_[k] == '_' ? k + 1 : k;
          if (d >= src_.size() || !IsDigit(src_[d]) || (c == '0' && src_[d] != '0')) break;
          if (v > (INT64_MAX - 9) / 10) return SyntaxError("integer literal too large", p);
          v = v * 10 + (src_[d] - '0');
          k = d + 1;
        }
        t.type = Token::Type::kInt;
        t.i = v;
        p = k;
      } else if (IsNameStart(c)) {
        size_t e = p;
        while (e < src_.size() && IsNameChar(src_[e])) ++e;
        t.type = Token::Type::kName;
        t.s = src_.substr(p, e - p);
        p = e;
      } else if (c == '\'' || c == '"') {
        size_t e = p + 1;
        while (e < src_.size() && src_[e] != c) e += src_[e] == '\\' ? 2 : 1;
        if (e >= src_.size()) return SyntaxError("unterminated string literal", p);
        t.type = Token::Type::kStr;
        GRIDFEED_ASSIGN_OR_RETURN(
            t.s, UnescapeLiteral(std::string_view(src_).substr(p + 1, e - p - 1), p));
        p = e + 1;
      } else {
        static const char* kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
        t.type = Token::Type::kOp;
        for (const char* two : kTwo) {
          if (src_.compare(p, 2, two) == 0) t.s = two;
        }
        if (t.s.empty()) {
          if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos) {
            return SyntaxError(std::string("unexpected character '") + c + "'", p);
          }
          t.s = std::string(1, c);
        }
        p += t.s.size();
        if (c == '(' || c == '[' || c == '{')
          balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
        if (t.s == ")" || t.s == "]" || t.s == "}") {
          if (balance.empty() || balance.back() != c)
            return SyntaxError("unbalanced '" + t.s + "'", t.pos);
          balance.pop_back();
        }
      }
      out->push_back(std::move(t));
    }
  }

  size_t Finish(size_t end_pos, size_t after, std::vector<Token>* out) {
    Token end;
    end.pos = end_pos;
    out->push_back(end);
    return after;
  }

  std::string src_;
};

// ---------------------------------------------------------------------------------------------
// AST.

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLit,
    kName,
    kAttr,   // args[0].name
    kItem,   // args[0][args[1]]
    kSlice,  // args[0][args[1]:args[2]:args[3]], missing parts null
    kList,
    kBinary,  // name is the operator: + - * // % ** / ~
    kNot,
    kNeg,
    kPos,
    kAnd,
    kOr,
    kCond,     // args: value, condition, else (null: undefined)
    kCompare,  // args[0] (ops[k] args[k+1])*
    kFilter,   // name(args[0], args[1:]...)
    kTest,     // args[0] is name; negated
    kRaise,
    kMethod,  // args[0].name(args[1:]...)
  };
  Kind kind = Kind::kLit;
  size_t pos = 0;
  Value lit;
  std::string name;
  std::vector<ExprPtr> args;
  std::vector<std::string> ops;
  bool negated = false;
};

struct Node {
  enum class Kind { kText, kOutput, kFor, kIf, kSet };
  Kind kind = Kind::kText;
  size_t pos = 0;
  std::string text;  // kText
  std::string var;   // kFor target, kSet name
  ExprPtr expr;      // kOutput, kFor iterable, kSet value
  std::vector<std::pair<ExprPtr, std::vector<Node>>> branches;  // kIf; kFor uses branches[0]
  std::vector<Node> else_body;                                  // kIf and kFor
};

const std::vector<std::string_view> kStrMethods = {"strip", "lstrip", "rstrip",     "replace",
                                                   "lower", "upper",  "startswith", "endswith"};
const std::vector<std::string_view> kFilters = {"trim", "lower", "upper", "length", "count"};
const std::vector<std::string_view> kTests = {"defined", "undefined", "none",  "string", "number",
                                              "boolean", "true",      "false", "mapping"};

bool Contains(const std::vector<std::string_view>& v, std::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// Jinja's expression grammar (jinja2/parser.py) over one tag's tokens.
class ExprParser {
 public:
  explicit ExprParser(const std::vector<Token>& t) : t_(t) {}

  const Token& Cur() const { return t_[k_]; }
  const Token& Peek(size_t ahead = 1) const { return t_[std::min(k_ + ahead, t_.size() - 1)]; }
  bool AtEnd() const { return Cur().type == Token::Type::kEnd; }
  bool IsOp(std::string_view s) const { return Cur().type == Token::Type::kOp && Cur().s == s; }
  bool IsName(std::string_view s) const { return Cur().type == Token::Type::kName && Cur().s == s; }
  void Next() {
    if (!AtEnd()) ++k_;
  }
  Status Expect(std::string_view op) {
    if (!IsOp(op)) return SyntaxError("expected '" + std::string(op) + "'", Cur().pos);
    Next();
    return Status::Ok();
  }
  Status ExpectEnd() {
    if (!AtEnd()) return SyntaxError("unexpected '" + Describe(Cur()) + "'", Cur().pos);
    return Status::Ok();
  }
  static std::string Describe(const Token& t) {
    switch (t.type) {
      case Token::Type::kInt:
        return std::to_string(t.i);
      case Token::Type::kStr:
        return "string literal";
      case Token::Type::kEnd:
        return "end of tag";
      default:
        return t.s;
    }
  }

  Result<ExprPtr> Expression() { return CondExpr(); }

  Result<ExprPtr> CondExpr() {
    GRIDFEED_ASSIGN_OR_RETURN(ExprPtr e, Or());
    while (IsName("if")) {
      auto node = Make(Expr::Kind::kCond, Cur().pos);
      Next();
      GRIDFEED_ASSIGN_OR_RETURN(ExprPtr cond, Or());
      ExprPtr other;
      if (IsName("else")) {
        Next();
        GRIDFEED_ASSIGN_OR_RETURN(other, CondExpr());
      }
      node->args.push_back(std::move(e));
      node->args.push_back(std::move(cond));
      node->args.push_back(std::move(other));
      e = std::move(node);
    }
    return e;
  }

  Result<ExprPtr> Or() {
    GRIDFEED_ASSIGN_OR_RETURN(ExprPtr e, And());
    while (IsName("or")) {
      auto node = Make(Expr::Kind::kOr, Cur().pos);
      Next();
      GRIDFEED_ASSIGN_OR_RETURN(ExprPtr r, And());
      node->args.push_back(std::move(e));
      node->args.push_back(std::move(r));
      e = std::move(node);
    }
    return e;
  }

  Result<ExprPtr> And() {
    GRIDFEED_ASSIGN_OR_RETURN(ExprPtr e, Not());
    while (IsName("and")) {
      auto node = Make(Expr::Kind::kAnd, Cur().pos);
      Next();
      GRIDFEED_ASSIGN_OR_RETURN(ExprPtr r, Not());
      node->args.push_back(std::move(e));
      node->args.push_back(std::move(r));
      e = std::move(node);
    }
    return e;
  }

  Result<ExprPtr> Not() {
    if (IsName("not")) {
      auto node = Make(Expr::Kind::kNot, Cur().pos);
      Next();
      GRIDFEED_ASSIGN_OR_RETURN(ExprPtr e, Not());
      node->args.push_back(std::move(e));
      return ExprPtr(std::move(node));
    }
    return Compare();
  }

  Result<ExprPtr> Compare() {
    const size_t pos = Cur().pos;
    GRIDFEED_ASSIGN_OR_RETURN(ExprPtr e, Math1());
    auto node = Make(Expr::Kind::kCompare, pos);
    node->args.push_back(std::move(e));
    while (true) {
      std::string op;
      if (Cur().type == Token::Type::kOp &&
          (Cur().s == "==" || Cur().s == "!=" || Cur().s == "<" || Cur().s == "<=" ||
           Cur().s == ">" || Cur().s == ">=")) {
        op = Cur().s;
        Next();
      } else if (IsName("in")) {
        op = "in";
        Next();
      } else if (IsName("not") && Peek().type == Token::Type::kName && Peek().s == "in") {
        op = "not in";
        Next();
        Next();
      } else {
        break;
      }
      GRIDFEED_ASSIGN_OR_RETURN(ExprPtr r, Math1());
      node->ops.push_back(op);
      node->args.push_back(std::move(r));
    }
    if (node->ops.empty()) return std::move(node->args[0]);
    return ExprPtr(std::move(node));
  }

  Result<ExprPtr> Binary(std::initializer_list<std::string_view> ops,
                         Result<ExprPtr> (ExprParser::*sub)()) {
    GRIDFEED_ASSIGN_OR_RETURN(ExprPtr e, (this->*sub)());
    while (Cur().type == Token::Type::kOp &&
           std::find(ops.begin(), ops.end(), Cur().s) != ops.end()) {
      auto node = Make(Expr::Kind::kBinary, Cur().pos);
      node->name = Cur().s;
      Next();
      GRIDFEED_ASSIGN_OR_RETURN(ExprPtr r, (this->*sub)());
      node->args.push_back(std::move(e));
      node->args.push_back(std::move(r));
      e = std::move(node);
    }
    return e;
  }
  // + and - bind looser than ~, which binds looser than * / // %, then **.
  Result<ExprPtr> Math1() { return Binary({"+", "-"}, &ExprParser::Concat); }
  Result<ExprPtr> Concat() { return Binary({"~"}, &ExprParser::Math2); }
  Result<ExprPtr> Math2() { return Binary({"*", "/", "//", "%"}, &ExprParser::Pow); }
  Result<ExprPtr> Pow() { return Binary({"**"}, &ExprParser::UnaryWithFilter); }
  Result<ExprPtr> UnaryWithFilter() { return Unary(true); }

  Result<ExprPtr> Unary(bool with_filter) {
    ExprPtr e;
    if (IsOp("-") || IsOp("+")) {
      auto node = Make(IsOp("-") ? Expr::Kind::kNeg : Expr::Kind::kPos, Cur().pos);
      Next();
      GRIDFEED_ASSIGN_OR_RETURN(ExprPtr operand, Unary(false));
      node->args.push_back(std::move(operand));
      e = std::move(node);
    } else {
      GRIDFEED_ASSIGN_OR_RETURN(e, Primary());
    }
    GRIDFEED_ASSIGN_OR_RETURN(e, Postfix(std::move(e)));
    if (with_filter) {
      GRIDFEED_ASSIGN_OR_RETURN(e, FilterExpr(std::move(e)));
    }
    return e;
  }

  Result<ExprPtr> Primary() {
    const Token& t = Cur();
    if (t.type == Token::Type::kName) {
      auto node = Make(Expr::Kind::kLit, t.pos);
      if (t.s == "true" || t.s == "True") {
        node->lit = Value::Bool(true);
      } else if (t.s == "false" || t.s == "False") {
        node->lit = Value::Bool(false);
      } else if (t.s == "none" || t.s == "None") {
        node->lit = Value::None();
      } else {
        node->kind = Expr::Kind::kName;
        node->name = t.s;
      }
      Next();
      return ExprPtr(std::move(node));
    }
    if (t.type == Token::Type::kStr) {
      auto node = Make(Expr::Kind::kLit, t.pos);
      std::string s;
      while (Cur().type == Token::Type::kStr) {  // adjacent literals concatenate
        s += Cur().s;
        Next();
      }
      node->lit = Value::Str(std::move(s));
      return ExprPtr(std::move(node));
    }
    if (t.type == Token::Type::kInt) {
      auto node = Make(Expr::Kind::kLit, t.pos);
      node->lit = Value::Int(t.i);
      Next();
      return ExprPtr(std::move(node));
    }
    if (IsOp("(")) {
      Next();
      GRIDFEED_ASSIGN_OR_RETURN(ExprPtr e, Expression());
      if (IsOp(",")) return SyntaxError("tuples are not supported", Cur().pos);
      GRIDFEED_RETURN_IF_ERROR(Expect(")"));
      return e;
    }
    if (IsOp("[")) {
      auto node = Make(Expr::Kind::kList, t.pos);
      Next();
      while (!IsOp("]")) {
        if (!node->args.empty()) GRIDFEED_RETURN_IF_ERROR(Expect(","));
        if (IsOp("]")) break;
        GRIDFEED_ASSIGN_OR_RETURN(ExprPtr e, Expression());
        node->args.push_back(std::move(e));
      }
      Next();
      return ExprPtr(std::move(node));
    }
    if (IsOp("{")) return SyntaxError("dict literals are not supported", t.pos);
    return SyntaxError("unexpected '" + Describe(t) + "'", t.pos);
  }

  Result<ExprPtr> Postfix(ExprPtr e) {
    while (true) {
      if (IsOp(".")) {
        const size_t pos = Cur().pos;
        Next();
        if (Cur().type == Token::Type::kName) {
          auto node = Make(Expr::Kind::kAttr, pos);
          node->name = Cur().s;
          node->args.push_back(std::move(e));
          Next();
          e = std::move(node);
        } else if (Cur().type == Token::Type::kInt) {
          auto node = Make(Expr::Kind::kItem, pos);
          auto idx = Make(Expr::Kind::kLit, Cur().pos);
          idx->lit = Value::Int(Cur().i);
          node->args.push_back(std::move(e));
          node->args.push_back(std::move(idx));
          Next();
          e = std::move(node);
        } else {
          return SyntaxError("expected a name after '.'", Cur().pos);
        }
      } else if (IsOp("[")) {
        GRIDFEED_ASSIGN_OR_RETURN(e, Subscript(std::move(e)));
      } else if (IsOp("(")) {
        GRIDFEED_ASSIGN_OR_RETURN(e, Call(std::move(e)));
      } else {
        return e;
      }
    }
  }

  Result<ExprPtr> Subscript(ExprPtr e) {
    const size_t pos = Cur().pos;
    Next();  // [
    ExprPtr parts[3];
    bool slice = false;
    for (int part = 0; part < 3; ++part) {
      if (!IsOp(":") && !IsOp("]")) {
        GRIDFEED_ASSIGN_OR_RETURN(parts[part], Expression());
      }
      if (IsOp(",")) return SyntaxError("tuple subscripts are not supported", Cur().pos);
      if (part < 2 && IsOp(":")) {
        slice = true;
        Next();
        continue;
      }
      break;
    }
    GRIDFEED_RETURN_IF_ERROR(Expect("]"));
    auto node = Make(slice ? Expr::Kind::kSlice : Expr::Kind::kItem, pos);
    node->args.push_back(std::move(e));
    if (slice) {
      for (auto& p : parts) node->args.push_back(std::move(p));
    } else {
      if (!parts[0]) return SyntaxError("empty subscript", pos);
      node->args.push_back(std::move(parts[0]));
    }
    return ExprPtr(std::move(node));
  }

  Status Args(Expr* node) {
    Next();  // (
    while (!IsOp(")")) {
      if (node->args.size() > (node->kind == Expr::Kind::kRaise ? 0u : 1u)) {
        GRIDFEED_RETURN_IF_ERROR(Expect(","));
        if (IsOp(")")) break;
      }
      if (Cur().type == Token::Type::kName && Peek().type == Token::Type::kOp && Peek().s == "=") {
        return SyntaxError("keyword arguments are not supported", Cur().pos);
      }
      if (IsOp("*") || IsOp("**")) return SyntaxError("*args are not supported", Cur().pos);
      GRIDFEED_ASSIGN_OR_RETURN(ExprPtr a, Expression());
      node->args.push_back(std::move(a));
    }
    Next();
    return Status::Ok();
  }

  Result<ExprPtr> Call(ExprPtr callee) {
    const size_t pos = Cur().pos;
    if (callee->kind == Expr::Kind::kName && callee->name == "raise_exception") {
      auto node = Make(Expr::Kind::kRaise, pos);
      GRIDFEED_RETURN_IF_ERROR(Args(node.get()));
      if (node->args.size() != 1) return SyntaxError("raise_exception takes one argument", pos);
      return ExprPtr(std::move(node));
    }
    if (callee->kind == Expr::Kind::kAttr && Contains(kStrMethods, callee->name)) {
      auto node = Make(Expr::Kind::kMethod, pos);
      node->name = callee->name;
      node->args.push_back(std::move(callee->args[0]));
      GRIDFEED_RETURN_IF_ERROR(Args(node.get()));
      const size_t n = node->args.size() - 1;
      const bool ok = (node->name == "lower" || node->name == "upper") ? n == 0
                      : node->name == "replace"                        ? (n == 2 || n == 3)
                      : (node->name == "startswith" || node->name == "endswith") ? n == 1
                                                                                 : n <= 1;
      if (!ok) return SyntaxError("wrong number of arguments to ." + node->name + "()", pos);
      return ExprPtr(std::move(node));
    }
    std::string what = callee->kind == Expr::Kind::kName   ? "function '" + callee->name + "'"
                       : callee->kind == Expr::Kind::kAttr ? "method '" + callee->name + "'"
                                                           : std::string("expression");
    return SyntaxError("call of " + what + " is not supported", pos);
  }

  Result<ExprPtr> FilterExpr(ExprPtr e) {
    while (true) {
      if (IsOp("|")) {
        Next();
        if (Cur().type != Token::Type::kName)
          return SyntaxError("expected a filter name", Cur().pos);
        if (!Contains(kFilters, Cur().s)) {
          return SyntaxError("filter '" + Cur().s + "' is not supported", Cur().pos);
        }
        auto node = Make(Expr::Kind::kFilter, Cur().pos);
        node->name = Cur().s;
        Next();
        if (IsOp(".")) return SyntaxError("dotted filter names are not supported", Cur().pos);
        node->args.push_back(std::move(e));
        if (IsOp("(")) GRIDFEED_RETURN_IF_ERROR(Args(node.get()));
        if (node->args.size() > (node->name == "trim" ? 2u : 1u)) {
          return SyntaxError("too many arguments to filter '" + node->name + "'", node->pos);
        }
        e = std::move(node);
      } else if (IsName("is")) {
        auto node = Make(Expr::Kind::kTest, Cur().pos);
        Next();
        if (IsName("not")) {
          node->negated = true;
          Next();
        }
        if (Cur().type != Token::Type::kName) return SyntaxError("expected a test name", Cur().pos);
        if (!Contains(kTests, Cur().s)) {
          return SyntaxError("test '" + Cur().s + "' is not supported", Cur().pos);
        }
        node->name = Cur().s;
        Next();
        // Jinja would read an argument here; none of the supported tests takes one.
        const Token& a = Cur();
        if (a.type == Token::Type::kStr || a.type == Token::Type::kInt ||
            (a.type == Token::Type::kOp && (a.s == "(" || a.s == "[" || a.s == "{")) ||
            (a.type == Token::Type::kName && a.s != "else" && a.s != "or" && a.s != "and")) {
          return SyntaxError("tests with arguments are not supported", a.pos);
        }
        node->args.push_back(std::move(e));
        e = std::move(node);
      } else if (IsOp("(")) {
        return SyntaxError("call of a filtered value is not supported", Cur().pos);
      } else {
        return e;
      }
    }
  }

 private:
  static std::unique_ptr<Expr> Make(Expr::Kind kind, size_t pos) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = pos;
    return e;
  }
  const std::vector<Token>& t_;
  size_t k_ = 0;
};

// Statements over segments.
class TemplateParser {
 public:
  explicit TemplateParser(std::vector<Segment> segs) : segs_(std::move(segs)) {}

  Result<std::vector<Node>> Run() {
    std::vector<Node> body;
    std::string stop;
    GRIDFEED_RETURN_IF_ERROR(Body({}, &body, &stop));
    return body;
  }

 private:
  // Parses nodes until a block tag named in `stops` (left for the caller in *stop, its segment
  // consumed) or the end of the template (stop empty).
  Status Body(const std::vector<std::string_view>& stops, std::vector<Node>* out,
              std::string* stop) {
    while (k_ < segs_.size()) {
      Segment& seg = segs_[k_++];
      if (seg.kind == Segment::Kind::kText) {
        Node n;
        n.kind = Node::Kind::kText;
        n.text = std::move(seg.text);
        out->push_back(std::move(n));
        continue;
      }
      ExprParser p(seg.tokens);
      if (seg.kind == Segment::Kind::kVar) {
        Node n;
        n.kind = Node::Kind::kOutput;
        n.pos = seg.pos;
        GRIDFEED_ASSIGN_OR_RETURN(n.expr, p.Expression());
        if (p.IsOp(",")) return SyntaxError("tuples are not supported", p.Cur().pos);
        GRIDFEED_RETURN_IF_ERROR(p.ExpectEnd());
        out->push_back(std::move(n));
        continue;
      }
      if (p.Cur().type != Token::Type::kName) return SyntaxError("expected a tag name", seg.pos);
      const std::string tag = p.Cur().s;
      cur_block_ = &seg;
      if (Contains(stops, tag)) {
        *stop = tag;
        return Status::Ok();
      }
      p.Next();
      if (tag == "for") {
        GRIDFEED_RETURN_IF_ERROR(For(p, seg.pos, out));
      } else if (tag == "if") {
        GRIDFEED_RETURN_IF_ERROR(If(p, seg.pos, out));
      } else if (tag == "set") {
        GRIDFEED_RETURN_IF_ERROR(Set(p, seg.pos, out));
      } else {
        return SyntaxError("tag '" + tag + "' is not supported or unexpected here", seg.pos);
      }
    }
    if (!stops.empty()) {
      std::string want;
      for (auto s : stops) want += (want.empty() ? "" : " or ") + std::string(s);
      return SyntaxError("unexpected end of template, expected " + want, open_pos_);
    }
    stop->clear();
    return Status::Ok();
  }

  // The tag that ended a body: its tokens after the name.
  ExprParser StopParser() {
    ExprParser p(cur_block_->tokens);
    p.Next();
    return p;
  }

  Status For(ExprParser& p, size_t pos, std::vector<Node>* out) {
    Node n;
    n.kind = Node::Kind::kFor;
    n.pos = pos;
    if (p.Cur().type != Token::Type::kName)
      return SyntaxError("expected a loop variable", p.Cur().pos);
    n.var = p.Cur().s;
    p.Next();
    if (p.IsOp(",")) return SyntaxError("tuple loop targets are not supported", p.Cur().pos);
    if (!p.IsName("in")) return SyntaxError("expected 'in'", p.Cur().pos);
    p.Next();
    GRIDFEED_ASSIGN_OR_RETURN(n.expr, p.Or());  // Jinja reads `if` here as a loop filter
    if (p.IsName("if"))
      return SyntaxError("loop filters ('for ... if') are not supported", p.Cur().pos);
    if (p.IsName("recursive")) return SyntaxError("recursive loops are not supported", p.Cur().pos);
    GRIDFEED_RETURN_IF_ERROR(p.ExpectEnd());
    open_pos_ = pos;
    std::vector<Node> body;
    std::string stop;
    GRIDFEED_RETURN_IF_ERROR(Body({"endfor", "else"}, &body, &stop));
    GRIDFEED_RETURN_IF_ERROR(StopParser().ExpectEnd());
    if (stop == "else") {
      open_pos_ = pos;
      GRIDFEED_RETURN_IF_ERROR(Body({"endfor"}, &n.else_body, &stop));
      GRIDFEED_RETURN_IF_ERROR(StopParser().ExpectEnd());
    }
    n.branches.emplace_back(nullptr, std::move(body));
    out->push_back(std::move(n));
    return Status::Ok();
  }

  Status If(ExprParser& p, size_t pos, std::vector<Node>* out) {
    Node n;
    n.kind = Node::Kind::kIf;
    n.pos = pos;
    GRIDFEED_ASSIGN_OR_RETURN(ExprPtr cond, p.Expression());
    GRIDFEED_RETURN_IF_ERROR(p.ExpectEnd());
    while (true) {
      open_pos_ = pos;
      std::vector<Node> body;
      std::string stop;
      GRIDFEED_RETURN_IF_ERROR(Body({"elif", "else", "endif"}, &body, &stop));
      n.branches.emplace_back(std::move(cond), std::move(body));
      ExprParser sp = StopParser();
      if (stop == "elif") {
        GRIDFEED_ASSIGN_OR_RETURN(cond, sp.Expression());
        GRIDFEED_RETURN_IF_ERROR(sp.ExpectEnd());
        continue;
      }
      GRIDFEED_RETURN_IF_ERROR(sp.ExpectEnd());
      if (stop == "else") {
        open_pos_ = pos;
        GRIDFEED_RETURN_IF_ERROR(Body({"endif"}, &n.else_body, &stop));
        GRIDFEED_RETURN_IF_ERROR(StopParser().ExpectEnd());
      }
      break;
    }
    out->push_back(std::move(n));
    return Status::Ok();
  }

  Status Set(ExprParser& p, size_t pos, std::vector<Node>* out) {
    Node n;
    n.kind = Node::Kind::kSet;
    n.pos = pos;
    if (p.Cur().type != Token::Type::kName)
      return SyntaxError("expected a name after set", p.Cur().pos);
    n.var = p.Cur().s;
    p.Next();
    if (p.IsOp(".") || p.IsOp(",")) {
      return SyntaxError("only '{% set name = value %}' is supported", p.Cur().pos);
    }
    if (!p.IsOp("="))
      return SyntaxError("block assignments ('{% set x %}') are not supported", pos);
    p.Next();
    GRIDFEED_ASSIGN_OR_RETURN(n.expr, p.Expression());
    if (p.IsOp(",")) return SyntaxError("tuples are not supported", p.Cur().pos);
    GRIDFEED_RETURN_IF_ERROR(p.ExpectEnd());
    out->push_back(std::move(n));
    return Status::Ok();
  }

  std::vector<Segment> segs_;
  size_t k_ = 0;
  Segment* cur_block_ = nullptr;
  size_t open_pos_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Evaluation.

Status RuntimeError(const std::string& what, size_t pos) {
  return InvalidArgument("chat template: " + what + " at offset " + std::to_string(pos));
}

std::string KindName(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined:
      return "Undefined";
    case Value::Kind::kNone:
      return "NoneType";
    case Value::Kind::kBool:
      return "bool";
    case Value::Kind::kInt:
      return "int";
    case Value::Kind::kStr:
      return "str";
    case Value::Kind::kList:
      return "list";
    case Value::Kind::kDict:
      return "dict";
  }
  return "?";
}

Status UndefinedError(const Value& v, size_t pos) {
  return RuntimeError("'" + v.s + "' is undefined", pos);
}

// Python's floor division and modulo.
int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

class Renderer {
 public:
  Renderer(const std::vector<Node>& nodes, std::map<std::string, Value> globals) : nodes_(nodes) {
    scopes_.push_back(std::move(globals));
  }

  Result<std::string> Run() {
    GRIDFEED_RETURN_IF_ERROR(Exec(nodes_));
    return std::move(out_);
  }

 private:
  Status Exec(const std::vector<Node>& nodes) {
    for (const Node& n : nodes) GRIDFEED_RETURN_IF_ERROR(Exec(n));
    return Status::Ok();
  }

  Status Exec(const Node& n) {
    switch (n.kind) {
      case Node::Kind::kText:
        out_ += n.text;
        return Status::Ok();
      case Node::Kind::kOutput: {
        GRIDFEED_ASSIGN_OR_RETURN(Value v, Eval(*n.expr));
        auto s = ToStr(v);
        if (!s.ok()) return RuntimeError(s.status().message(), n.pos);
        out_ += *s;
        return Status::Ok();
      }
      case Node::Kind::kSet: {
        GRIDFEED_ASSIGN_OR_RETURN(Value v, Eval(*n.expr));
        scopes_.back()[n.var] = std::move(v);
        return Status::Ok();
      }
      case Node::Kind::kIf:
        for (const auto& [cond, body] : n.branches) {
          GRIDFEED_ASSIGN_OR_RETURN(Value c, Eval(*cond));
          if (Truthy(c)) return Exec(body);
        }
        return Exec(n.else_body);
      case Node::Kind::kFor:
        return For(n);
    }
    return Status::Ok();
  }

  Status For(const Node& n) {
    GRIDFEED_ASSIGN_OR_RETURN(Value seq, Eval(*n.expr));
    List items;
    switch (seq.kind) {
      case Value::Kind::kUndefined:
        break;  // Undefined iterates as empty
      case Value::Kind::kList:
        items = *seq.list;
        break;
      case Value::Kind::kStr:
        for (char32_t c : Cps(seq.s))
          items.push_back(Value::Str(FromCps(std::span<const char32_t>(&c, 1))));
        break;
      case Value::Kind::kDict:
        for (const auto& kv : *seq.dict) items.push_back(Value::Str(kv.first));
        break;
      default:
        return RuntimeError("'" + KindName(seq) + "' object is not iterable", n.pos);
    }
    if (items.empty()) return Exec(n.else_body);
    const int64_t len = static_cast<int64_t>(items.size());
    for (int64_t k = 0; k < len; ++k) {
      Dict loop = {{"index", Value::Int(k + 1)},      {"index0", Value::Int(k)},
                   {"revindex", Value::Int(len - k)}, {"revindex0", Value::Int(len - k - 1)},
                   {"first", Value::Bool(k == 0)},    {"last", Value::Bool(k == len - 1)},
                   {"length", Value::Int(len)},       {"depth", Value::Int(1)},
                   {"depth0", Value::Int(0)}};
      if (k > 0) loop.emplace_back("previtem", items[static_cast<size_t>(k - 1)]);
      if (k + 1 < len) loop.emplace_back("nextitem", items[static_cast<size_t>(k + 1)]);
      // Each iteration is a fresh scope: sets inside the body do not outlive it.
      scopes_.push_back(
          {{n.var, items[static_cast<size_t>(k)]}, {"loop", Value::MakeDict(std::move(loop))}});
      Status st = Exec(n.branches[0].second);
      scopes_.pop_back();
      GRIDFEED_RETURN_IF_ERROR(st);
    }
    return Status::Ok();
  }

  Value Lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(name);
      if (f != it->end()) return f->second;
    }
    return Value::Undefined(name);
  }

  // Jinja's getattr/getitem: a missing key or index is Undefined, access on Undefined fails.
  Result<Value> GetItem(const Value& obj, const Value& key, size_t pos) {
    if (obj.is(Value::Kind::kUndefined)) return UndefinedError(obj, pos);
    if (obj.is(Value::Kind::kDict)) {
      if (key.is(Value::Kind::kStr)) {
        if (const Value* v = DictFind(*obj.dict, key.s)) return *v;
      }
      return Value::Undefined(KindName(obj) + " object has no element " +
                              (key.is(Value::Kind::kStr) ? key.s : ""));
    }
    if ((obj.is(Value::Kind::kList) || obj.is(Value::Kind::kStr)) && key.IsIntLike()) {
      const bool str = obj.is(Value::Kind::kStr);
      std::vector<char32_t> cps;
      if (str) cps = Cps(obj.s);
      const int64_t n =
          str ? static_cast<int64_t>(cps.size()) : static_cast<int64_t>(obj.list->size());
      int64_t k = key.AsInt();
      if (k < 0) k += n;
      if (k < 0 || k >= n) return Value::Undefined("index out of range");
      if (str)
        return Value::Str(FromCps(std::span<const char32_t>(&cps[static_cast<size_t>(k)], 1)));
      return (*obj.list)[static_cast<size_t>(k)];
    }
    if (key.is(Value::Kind::kStr) && obj.is(Value::Kind::kStr) && Contains(kStrMethods, key.s)) {
      return RuntimeError("str method '" + key.s + "' used without calling it", pos);
    }
    return Value::Undefined(KindName(obj) + " object has no element");
  }

  Result<Value> Slice(const Value& obj, const Value* parts[3], size_t pos) {
    if (obj.is(Value::Kind::kUndefined)) return UndefinedError(obj, pos);
    int64_t idx[3] = {0, 0, 1};
    bool given[3] = {false, false, false};
    for (int k = 0; k < 3; ++k) {
      if (!parts[k] || parts[k]->is(Value::Kind::kNone)) continue;
      if (!parts[k]->IsIntLike()) return Value::Undefined("bad slice");
      idx[k] = parts[k]->AsInt();
      given[k] = true;
    }
    const bool str = obj.is(Value::Kind::kStr);
    if (!str && !obj.is(Value::Kind::kList)) return Value::Undefined("slice of " + KindName(obj));
    if (given[2] && idx[2] == 0) return RuntimeError("slice step cannot be zero", pos);
    std::vector<char32_t> cps;
    if (str) cps = Cps(obj.s);
    const int64_t n =
        str ? static_cast<int64_t>(cps.size()) : static_cast<int64_t>(obj.list->size());
    const int64_t step = idx[2];
    // CPython's PySlice_AdjustIndices.
    auto adjust = [&](int64_t v, bool has, int64_t dflt) {
      if (!has) return dflt;
      if (v < 0) {
        v += n;
        if (v < 0) v = step < 0 ? -1 : 0;
      } else if (v >= n) {
        v = step < 0 ? n - 1 : n;
      }
      return v;
    };
    const int64_t start = adjust(idx[0], given[0], step < 0 ? n - 1 : 0);
    const int64_t stop = adjust(idx[1], given[1], step < 0 ? -1 : n);
    std::vector<char32_t> out_cps;
    List out_list;
    for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
      if (str) {
        out_cps.push_back(cps[static_cast<size_t>(k)]);
      } else {
        out_list.push_back((*obj.list)[static_cast<size_t>(k)]);
      }
    }
    return str ? Value::Str(FromCps(out_cps)) : Value::MakeList(std::move(out_list));
  }

  Result<std::string> Stringify(const Value& v, size_t pos) {
    auto s = ToStr(v);
    if (!s.ok()) return RuntimeError(s.status().message(), pos);
    return s;
  }

  Result<Value> Eval(const Expr& e) {
    using K = Expr::Kind;
    switch (e.kind) {
      case K::kLit:
        return e.lit;
      case K::kName:
        return Lookup(e.name);
      case K::kAttr: {
        GRIDFEED_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0]));
        return GetItem(obj, Value::Str(e.name), e.pos);
      }
      case K::kItem: {
        GRIDFEED_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0]));
        GRIDFEED_ASSIGN_OR_RETURN(Value key, Eval(*e.args[1]));
        return GetItem(obj, key, e.pos);
      }
      case K::kSlice: {
        GRIDFEED_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0]));
        Value vals[3];
        const Value* parts[3] = {nullptr, nullptr, nullptr};
        for (int k = 0; k < 3; ++k) {
          if (!e.args[static_cast<size_t>(k) + 1]) continue;
          GRIDFEED_ASSIGN_OR_RETURN(vals[k], Eval(*e.args[static_cast<size_t>(k) + 1]));
          parts[k] = &vals[k];
        }
        return Slice(obj, parts, e.pos);
      }
      case K::kList: {
        List items;
        for (const auto& a : e.args) {
          GRIDFEED_ASSIGN_OR_RETURN(Value v, Eval(*a));
          items.push_back(std::move(v));
        }
        return Value::MakeList(std::move(items));
      }
      case K::kNot: {
        GRIDFEED_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0]));
        return Value::Bool(!Truthy(v));
      }
      case K::kNeg:
      case K::kPos: {
        GRIDFEED_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0]));
        if (v.is(Value::Kind::kUndefined)) return UndefinedError(v, e.pos);
        if (!v.IsIntLike())
          return RuntimeError("bad operand type for unary minus or plus: '" + KindName(v) + "'",
                              e.pos);
        if (e.kind == K::kPos) return Value::Int(v.AsInt());
        if (v.AsInt() == INT64_MIN) return RuntimeError("integer overflow", e.pos);
        return Value::Int(-v.AsInt());
      }
      case K::kAnd:
      case K::kOr: {
        GRIDFEED_ASSIGN_OR_RETURN(Value l, Eval(*e.args[0]));
        if (Truthy(l) == (e.kind == K::kOr)) return l;  // Python returns the deciding operand
        return Eval(*e.args[1]);
      }
      case K::kCond: {
        GRIDFEED_ASSIGN_OR_RETURN(Value c, Eval(*e.args[1]));
        if (Truthy(c)) return Eval(*e.args[0]);
        if (e.args[2]) return Eval(*e.args[2]);
        return Value::Undefined("the else branch of an if expression");
      }
      case K::kBinary:
        return Binary(e);
      case K::kCompare:
        return Compare(e);
      case K::kFilter:
        return Filter(e);
      case K::kTest:
        return Test(e);
      case K::kRaise: {
        GRIDFEED_ASSIGN_OR_RETURN(Value msg, Eval(*e.args[0]));
        GRIDFEED_ASSIGN_OR_RETURN(std::string s, Stringify(msg, e.pos));
        return RuntimeError("raise_exception: " + s, e.pos);
      }
      case K::kMethod:
        return Method(e);
    }
    return RuntimeError("unknown expression", e.pos);
  }

  Result<Value> Binary(const Expr& e) {
    GRIDFEED_ASSIGN_OR_RETURN(Value a, Eval(*e.args[0]));
    GRIDFEED_ASSIGN_OR_RETURN(Value b, Eval(*e.args[1]));
    const std::string& op = e.name;
    if (op == "~") {
      GRIDFEED_ASSIGN_OR_RETURN(std::string sa, Stringify(a, e.pos));
      GRIDFEED_ASSIGN_OR_RETURN(std::string sb, Stringify(b, e.pos));
      return Value::Str(sa + sb);
    }
    if (a.is(Value::Kind::kUndefined)) return UndefinedError(a, e.pos);
    if (b.is(Value::Kind::kUndefined)) return UndefinedError(b, e.pos);
    auto type_error = [&]() {
      return RuntimeError("unsupported operand types for " + op + ": '" + KindName(a) + "' and '" +
                              KindName(b) + "'",
                          e.pos);
    };
    if (a.IsIntLike() && b.IsIntLike()) {
      const int64_t x = a.AsInt(), y = b.AsInt();
      int64_t r = 0;
      bool overflow = false;
      if (op == "+") {
        overflow = __builtin_add_overflow(x, y, &r);
      } else if (op == "-") {
        overflow = __builtin_sub_overflow(x, y, &r);
      } else if (op == "*") {
        overflow = __builtin_mul_overflow(x, y, &r);
      } else if (op == "//" || op == "%") {
        if (y == 0) return RuntimeError("integer division or modulo by zero", e.pos);
        if (x == INT64_MIN && y == -1) return RuntimeError("integer overflow", e.pos);
        r = op == "//" ? FloorDiv(x, y) : x - FloorDiv(x, y) * y;
      } else {
        return RuntimeError("operator " + op + " is not supported (it yields a float)", e.pos);
      }
      if (overflow) return RuntimeError("integer overflow", e.pos);
      return Value::Int(r);
    }
    if (op == "+") {
      if (a.is(Value::Kind::kStr) && b.is(Value::Kind::kStr)) return Value::Str(a.s + b.s);
      if (a.is(Value::Kind::kList) && b.is(Value::Kind::kList)) {
        List l = *a.list;
        l.insert(l.end(), b.list->begin(), b.list->end());
        return Value::MakeList(std::move(l));
      }
      return type_error();
    }
    if (op == "*") {
      const Value& seq = a.IsIntLike() ? b : a;
      const Value& cnt = a.IsIntLike() ? a : b;
      if (!cnt.IsIntLike() || !(seq.is(Value::Kind::kStr) || seq.is(Value::Kind::kList)))
        return type_error();
      const int64_t times = std::max<int64_t>(0, cnt.AsInt());
      const size_t unit = seq.is(Value::Kind::kStr) ? seq.s.size() : seq.list->size();
      if (unit != 0 && static_cast<uint64_t>(times) > (uint64_t{1} << 28) / unit) {
        return RuntimeError("repetition too large", e.pos);
      }
      if (seq.is(Value::Kind::kStr)) {
        std::string s;
        for (int64_t k = 0; k < times; ++k) s += seq.s;
        return Value::Str(std::move(s));
      }
      List l;
      for (int64_t k = 0; k < times; ++k) l.insert(l.end(), seq.list->begin(), seq.list->end());
      return Value::MakeList(std::move(l));
    }
    if (op == "%" && a.is(Value::Kind::kStr)) {
      return RuntimeError("printf-style string formatting is not supported", e.pos);
    }
    return type_error();
  }

  Result<bool> CompareOne(const std::string& op, const Value& a, const Value& b, size_t pos) {
    if (op == "==") return PyEquals(a, b);
    if (op == "!=") return !PyEquals(a, b);
    if (op == "in" || op == "not in") {
      bool found = false;
      switch (b.kind) {
        case Value::Kind::kUndefined:
          break;
        case Value::Kind::kStr:
          if (!a.is(Value::Kind::kStr)) {
            return RuntimeError("'in <string>' requires string as left operand, not " + KindName(a),
                                pos);
          }
          found = b.s.find(a.s) != std::string::npos;
          break;
        case Value::Kind::kList:
          for (const Value& v : *b.list) found = found || PyEquals(a, v);
          break;
        case Value::Kind::kDict:
          found = a.is(Value::Kind::kStr) && DictFind(*b.dict, a.s) != nullptr;
          break;
        default:
          return RuntimeError("argument of type '" + KindName(b) + "' is not iterable", pos);
      }
      return op == "in" ? found : !found;
    }
    if (a.is(Value::Kind::kUndefined)) return UndefinedError(a, pos);
    if (b.is(Value::Kind::kUndefined)) return UndefinedError(b, pos);
    int c = 0;
    if (a.IsIntLike() && b.IsIntLike()) {
      c = a.AsInt() < b.AsInt() ? -1 : a.AsInt() > b.AsInt() ? 1 : 0;
    } else if (a.is(Value::Kind::kStr) && b.is(Value::Kind::kStr)) {
      c = a.s.compare(b.s);  // UTF-8 byte order is code point order
      c = c < 0 ? -1 : c > 0 ? 1 : 0;
    } else {
      return RuntimeError(
          "'" + op + "' not supported between '" + KindName(a) + "' and '" + KindName(b) + "'",
          pos);
    }
    if (op == "<") return c < 0;
    if (op == "<=") return c <= 0;
    if (op == ">") return c > 0;
    return c >= 0;
  }

  Result<Value> Compare(const Expr& e) {
    GRIDFEED_ASSIGN_OR_RETURN(Value left, Eval(*e.args[0]));
    for (size_t k = 0; k < e.ops.size(); ++k) {
      GRIDFEED_ASSIGN_OR_RETURN(Value right, Eval(*e.args[k + 1]));
      GRIDFEED_ASSIGN_OR_RETURN(bool r, CompareOne(e.ops[k], left, right, e.pos));
      if (!r) return Value::Bool(false);
      left = std::move(right);
    }
    return Value::Bool(true);
  }

  Result<std::string> AsciiCase(const std::string& s, bool upper, size_t pos) {
    if (!IsAscii(s)) return RuntimeError("lower/upper of non-ASCII text is not supported", pos);
    std::string out = s;
    for (char& c : out) {
      if (upper && c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
      if (!upper && c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    return out;
  }

  Result<Value> Filter(const Expr& e) {
    GRIDFEED_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0]));
    if (e.name == "length" || e.name == "count") {
      switch (v.kind) {
        case Value::Kind::kUndefined:
          return Value::Int(0);
        case Value::Kind::kStr:
          return Value::Int(static_cast<int64_t>(Cps(v.s).size()));
        case Value::Kind::kList:
          return Value::Int(static_cast<int64_t>(v.list->size()));
        case Value::Kind::kDict:
          return Value::Int(static_cast<int64_t>(v.dict->size()));
        default:
          return RuntimeError("object of type '" + KindName(v) + "' has no len()", e.pos);
      }
    }
    // The string filters work on soft_str(value).
    GRIDFEED_ASSIGN_OR_RETURN(std::string s, Stringify(v, e.pos));
    if (e.name == "trim") {
      std::optional<std::string> chars;
      if (e.args.size() > 1) {
        GRIDFEED_ASSIGN_OR_RETURN(Value c, Eval(*e.args[1]));
        if (c.is(Value::Kind::kStr)) {
          chars = c.s;
        } else if (!c.is(Value::Kind::kNone)) {
          return RuntimeError("trim() argument must be a string or none", e.pos);
        }
      }
      return Value::Str(PyStripImpl(s, chars, true, true));
    }
    GRIDFEED_ASSIGN_OR_RETURN(std::string r, AsciiCase(s, e.name == "upper", e.pos));
    return Value::Str(std::move(r));
  }

  Result<Value> Test(const Expr& e) {
    GRIDFEED_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0]));
    using VK = Value::Kind;
    bool r = false;
    const std::string& t = e.name;
    if (t == "defined") r = !v.is(VK::kUndefined);
    if (t == "undefined") r = v.is(VK::kUndefined);
    if (t == "none") r = v.is(VK::kNone);
    if (t == "string") r = v.is(VK::kStr);
    if (t == "number") r = v.IsIntLike();
    if (t == "boolean") r = v.is(VK::kBool);
    if (t == "true") r = v.is(VK::kBool) && v.b;
    if (t == "false") r = v.is(VK::kBool) && !v.b;
    if (t == "mapping") r = v.is(VK::kDict);
    return Value::Bool(e.negated ? !r : r);
  }

  Result<Value> Method(const Expr& e) {
    GRIDFEED_ASSIGN_OR_RETURN(Value self, Eval(*e.args[0]));
    if (self.is(Value::Kind::kUndefined)) return UndefinedError(self, e.pos);
    if (!self.is(Value::Kind::kStr)) {
      return RuntimeError("'" + KindName(self) + "' object has no method '" + e.name + "'", e.pos);
    }
    std::vector<Value> args;
    for (size_t k = 1; k < e.args.size(); ++k) {
      GRIDFEED_ASSIGN_OR_RETURN(Value a, Eval(*e.args[k]));
      args.push_back(std::move(a));
    }
    auto need_str = [&](size_t k) -> Status {
      if (!args[k].is(Value::Kind::kStr)) {
        return RuntimeError("argument " + std::to_string(k + 1) + " of ." + e.name +
                                "() must be str, not " + KindName(args[k]),
                            e.pos);
      }
      return Status::Ok();
    };
    const std::string& m = e.name;
    if (m == "strip" || m == "lstrip" || m == "rstrip") {
      std::optional<std::string> chars;
      if (!args.empty() && !args[0].is(Value::Kind::kNone)) {
        GRIDFEED_RETURN_IF_ERROR(need_str(0));
        chars = args[0].s;
      }
      return Value::Str(PyStripImpl(self.s, chars, m != "rstrip", m != "lstrip"));
    }
    if (m == "replace") {
      GRIDFEED_RETURN_IF_ERROR(need_str(0));
      GRIDFEED_RETURN_IF_ERROR(need_str(1));
      int64_t count = -1;
      if (args.size() == 3) {
        if (!args[2].IsIntLike()) return RuntimeError("replace() count must be an int", e.pos);
        count = args[2].AsInt();
      }
      return Value::Str(PyReplace(self.s, args[0].s, args[1].s, count));
    }
    if (m == "lower" || m == "upper") {
      GRIDFEED_ASSIGN_OR_RETURN(std::string r, AsciiCase(self.s, m == "upper", e.pos));
      return Value::Str(std::move(r));
    }
    GRIDFEED_RETURN_IF_ERROR(need_str(0));
    const std::string& x = args[0].s;
    if (m == "startswith")
      return Value::Bool(self.s.compare(0, x.size(), x) == 0 && self.s.size() >= x.size());
    return Value::Bool(self.s.size() >= x.size() &&
                       self.s.compare(self.s.size() - x.size(), x.size(), x) == 0);
  }

  const std::vector<Node>& nodes_;
  std::vector<std::map<std::string, Value>> scopes_;
  std::string out_;
};

class ChatTemplateImpl final : public ChatTemplate {
 public:
  explicit ChatTemplateImpl(std::vector<Node> nodes) : nodes_(std::move(nodes)) {}

  Result<std::string> Render(const Conversation& messages,
                             const ChatTemplateContext& context) const override {
    List msgs;
    for (size_t k = 0; k < messages.size(); ++k) {
      const Message& m = messages[k];
      if (!io::DecodeUtf8(m.role).ok() || !io::DecodeUtf8(m.content).ok()) {
        return InvalidArgument("chat template: message " + std::to_string(k) +
                               " is not valid UTF-8");
      }
      msgs.push_back(
          Value::MakeDict({{"role", Value::Str(m.role)}, {"content", Value::Str(m.content)}}));
    }
    std::map<std::string, Value> globals;
    globals["messages"] = Value::MakeList(std::move(msgs));
    globals["add_generation_prompt"] = Value::Bool(context.add_generation_prompt);
    // transformers passes tools and documents explicitly (None when not given) and only the
    // special tokens the tokenizer has.
    globals["tools"] = Value::None();
    globals["documents"] = Value::None();
    const std::pair<const char*, const std::string*> tokens[] = {{"bos_token", &context.bos_token},
                                                                 {"eos_token", &context.eos_token},
                                                                 {"pad_token", &context.pad_token},
                                                                 {"unk_token", &context.unk_token}};
    for (const auto& [name, value] : tokens) {
      if (!value->empty()) globals[name] = Value::Str(*value);
    }
    return Renderer(nodes_, std::move(globals)).Run();
  }

 private:
  std::vector<Node> nodes_;
};

}  // namespace

std::string PyStrip(std::string_view text) { return PyStripImpl(text, std::nullopt, true, true); }

Result<std::unique_ptr<ChatTemplate>> ChatTemplate::Parse(std::string_view source) {
  if (auto v = io::DecodeUtf8(source); !v.ok()) {
    return InvalidArgument("chat template: " + v.status().message());
  }
  GRIDFEED_ASSIGN_OR_RETURN(std::vector<Segment> segs, Lexer(NormalizeNewlines(source)).Run());
  GRIDFEED_ASSIGN_OR_RETURN(std::vector<Node> nodes, TemplateParser(std::move(segs)).Run());
  return std::unique_ptr<ChatTemplate>(std::make_unique<ChatTemplateImpl>(std::move(nodes)));
}

}  // namespace gridfeed::order::sft
