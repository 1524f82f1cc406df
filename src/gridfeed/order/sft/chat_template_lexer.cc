// The chat-template lexer: Jinja's, for the default delimiters, with trim_blocks and
// lstrip_blocks on, whitespace control and comments; string literals unescaped as Jinja does
// (internal contract: chat_template_ast.h).

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gridfeed/order/sft/chat_template_ast.h"

namespace gridfeed::order::sft::chat_template_internal {

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

namespace {

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
          if (seg.tokens.size() != 2) return SyntaxError("unexpected tokens after 'raw'", q);
          // Jinja's raw_begin takes no trim_blocks newline.
          if (p >= 3 && src_.compare(p - 3, 3, "%}\n") == 0 &&
              !(p >= 4 && (src_[p - 4] == '-' || src_[p - 4] == '+'))) {
            --p;
          }
          GRIDFEED_ASSIGN_OR_RETURN(p, Raw(p, q, &segs));
          line_starting = p > 0 && src_[p - 1] == '\n';
          pos = p;
          continue;
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
        GRIDFEED_ASSIGN_OR_RETURN(p, Number(p, &t));
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

  // The body of {% raw %} from `p` up to its {% endraw %}, as text; returns the offset after
  // the end tag (whitespace control and trim/lstrip_blocks as on other tags).
  Result<size_t> Raw(size_t p, size_t open, std::vector<Segment>* segs) {
    for (size_t r = src_.find("{%", p); r != std::string::npos; r = src_.find("{%", r + 2)) {
      size_t k = r + 2;
      const char sign = (k < src_.size() && (src_[k] == '-' || src_[k] == '+')) ? src_[k] : 0;
      if (sign) ++k;
      k += SpaceRun(src_, k);
      if (src_.compare(k, 6, "endraw") != 0) continue;
      k += 6;
      k += SpaceRun(src_, k);
      size_t after;
      if (src_.compare(k, 3, "-%}") == 0) {
        after = k + 3 + SpaceRun(src_, k + 3);
      } else if (src_.compare(k, 3, "+%}") == 0) {
        after = k + 3;
      } else if (src_.compare(k, 2, "%}") == 0) {
        after = k + 2 + (k + 2 < src_.size() && src_[k + 2] == '\n');
      } else {
        continue;
      }
      std::string text = src_.substr(p, r - p);
      if (sign == '-') {
        text = PyStripImpl(text, std::nullopt, false, true);
      } else if (sign != '+') {
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        if (l_pos < text.size() && AllPySpace(std::string_view(text).substr(l_pos)) &&
            (l_pos > 0 || (p > 0 && src_[p - 1] == '\n'))) {
          text.resize(l_pos);
        }
      }
      if (!text.empty()) segs->push_back({Segment::Kind::kText, std::move(text), {}, p});
      return after;
    }
    return SyntaxError("missing {% endraw %}", open);
  }

  // Jinja's integer_re and float_re (underscores between digits; 0b/0o/0x prefixes).
  Result<size_t> Number(size_t p, Token* t) {
    auto digits = [&](size_t k, auto is_digit) {
      // (\d_?)* ending on a digit: returns the end, k itself when no digit.
      size_t e = k;
      while (e < src_.size() && is_digit(src_[e])) {
        ++e;
        if (e + 1 < src_.size() && src_[e] == '_' && is_digit(src_[e + 1])) ++e;
      }
      return e;
    };
    auto dec = [](char ch) { return ch >= '0' && ch <= '9'; };
    if (src_[p] == '0' && p + 1 < src_.size() &&
        std::string_view("bBoOxX").find(src_[p + 1]) != std::string_view::npos) {
      const char kind = static_cast<char>(src_[p + 1] | 0x20);
      const int base = kind == 'b' ? 2 : kind == 'o' ? 8 : 16;
      auto is_digit = [&](char ch) {
        const int h = HexValue(ch);
        return h >= 0 && h < base;
      };
      size_t k = p + 2;
      if (k < src_.size() && src_[k] == '_') ++k;
      const size_t e = digits(k, is_digit);
      if (e == k) return SyntaxError("invalid integer literal", p);
      uint64_t v = 0;
      for (size_t q = k; q < e; ++q) {
        if (src_[q] == '_') continue;
        const auto d = static_cast<uint64_t>(HexValue(src_[q]));
        if (v > (static_cast<uint64_t>(INT64_MAX) - d) / static_cast<uint64_t>(base)) {
          return SyntaxError(
              "integer literal beyond int64 (Python's big integers are not supported)", p);
        }
        v = v * static_cast<uint64_t>(base) + d;
      }
      t->type = Token::Type::kInt;
      t->i = static_cast<int64_t>(v);
      return e;
    }
    size_t e = digits(p, dec);
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' && dec(src_[e + 1])) {
      e = digits(e + 1, dec);
      is_float = true;
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t x = e + 1;
      if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
      if (x < src_.size() && dec(src_[x])) {
        e = digits(x, dec);
        is_float = true;
      }
    }
    std::string text;
    for (size_t q = p; q < e; ++q) {
      if (src_[q] != '_') text += src_[q];
    }
    if (is_float) {
      t->type = Token::Type::kFloat;
      t->f = std::strtod(text.c_str(), nullptr);
      return e;
    }
    // Jinja's decimal: [1-9](_?\d)* or 0(_?0)*; "01" lexes as 0 then 1 (a syntax error later).
    if (text.size() > 1 && text[0] == '0') {
      size_t k = p + 1;
      while (k < e && (src_[k] == '0' || src_[k] == '_')) ++k;
      if (k < e) {
        e = p + 1;
        text = "0";
      }
    }
    uint64_t v = 0;
    for (char ch : text) {
      const auto d = static_cast<uint64_t>(ch - '0');
      if (v > (static_cast<uint64_t>(INT64_MAX) - d) / 10) {
        return SyntaxError("integer literal beyond int64 (Python's big integers are not supported)",
                           p);
      }
      v = v * 10 + d;
    }
    t->type = Token::Type::kInt;
    t->i = static_cast<int64_t>(v);
    return e;
  }

  size_t Finish(size_t end_pos, size_t after, std::vector<Token>* out) {
    Token end;
    end.pos = end_pos;
    out->push_back(end);
    return after;
  }

  std::string src_;
};

}  // namespace

Result<std::vector<Segment>> Lex(std::string src) { return Lexer(std::move(src)).Run(); }

}  // namespace gridfeed::order::sft::chat_template_internal
