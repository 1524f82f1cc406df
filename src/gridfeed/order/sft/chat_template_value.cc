// Values of the chat-template renderer with Python's semantics where they show in output:
// str() and repr() of values (True, None, 1.0, [1, 'a'], (1,)), truthiness, equality and
// ordering, and json.dumps as transformers' tojson calls it (internal contract:
// chat_template_ast.h).

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

#include "gridfeed/order/sft/chat_template_ast.h"

namespace gridfeed::order::sft::chat_template_internal {

const Value* DictFind(const Dict& d, std::string_view key) {
  for (const auto& [k, v] : d) {
    if (k == key) return &v;
  }
  return nullptr;
}

std::string TypeName(const Value& v) {
  using K = Value::Kind;
  if (v.IsSeq() && v.flavor == Value::Flavor::kGenerator) return "generator";
  if (v.IsSeq() && v.flavor == Value::Flavor::kView) return "view";
  switch (v.kind) {
    case K::kUndefined:
      return "Undefined";
    case K::kNone:
      return "NoneType";
    case K::kBool:
      return "bool";
    case K::kInt:
      return "int";
    case K::kFloat:
      return "float";
    case K::kStr:
      return v.markup ? "Markup" : "str";
    case K::kList:
      return "list";
    case K::kTuple:
      return "tuple";
    case K::kDict:
      return "dict";
    case K::kNamespace:
      return "Namespace";
    case K::kCallable:
      return "function";
  }
  return "?";
}

bool Truthy(const Value& v) {
  using K = Value::Kind;
  switch (v.kind) {
    case K::kUndefined:
    case K::kNone:
      return false;
    case K::kBool:
      return v.b;
    case K::kInt:
      return v.i != 0;
    case K::kFloat:
      return v.f != 0;
    case K::kStr:
      return !v.s.empty();
    case K::kList:
    case K::kTuple:
      // A generator is an object: always true, even when it would yield nothing.
      return v.flavor == Value::Flavor::kGenerator || !v.list->empty();
    case K::kDict:
      return !v.dict->empty();
    case K::kNamespace:
    case K::kCallable:
      return true;
  }
  return false;
}

bool PyEquals(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.IsUndefined() || b.IsUndefined()) return a.kind == b.kind;
  if (a.IsNumber() && b.IsNumber()) {
    if (a.IsIntLike() && b.IsIntLike()) return a.AsInt() == b.AsInt();
    return a.AsDouble() == b.AsDouble();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case K::kNone:
      return true;
    case K::kStr:
      return a.s == b.s;
    case K::kList:
    case K::kTuple:
      if (a.flavor == Value::Flavor::kGenerator || b.flavor == Value::Flavor::kGenerator) {
        return a.list == b.list;  // identity
      }
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
    case K::kNamespace:
      return a.ns == b.ns;
    case K::kCallable:
      return a.fn == b.fn;
    default:
      return false;
  }
}

Result<int> PyCompare(const Value& a, const Value& b) {
  auto sign = [](auto x, auto y) { return x < y ? -1 : (y < x ? 1 : 0); };
  if (a.IsNumber() && b.IsNumber()) {
    if (a.IsIntLike() && b.IsIntLike()) return sign(a.AsInt(), b.AsInt());
    const double x = a.AsDouble(), y = b.AsDouble();
    if (std::isnan(x) || std::isnan(y)) return 2;  // unordered: every comparison false
    return sign(x, y);
  }
  if (a.IsStr() && b.IsStr()) {
    const int c = a.s.compare(b.s);  // UTF-8 byte order is code point order
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.kind == b.kind && a.IsPlainSeq() && b.IsPlainSeq()) {
    const size_t n = std::min(a.list->size(), b.list->size());
    for (size_t k = 0; k < n; ++k) {
      if (PyEquals((*a.list)[k], (*b.list)[k])) continue;
      return PyCompare((*a.list)[k], (*b.list)[k]);
    }
    return sign(a.list->size(), b.list->size());
  }
  return InvalidArgument("'<' not supported between instances of '" + TypeName(a) + "' and '" +
                         TypeName(b) + "'");
}

std::string FloatRepr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), x, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  const size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  int exp10 = 0;  // to_chars wrote it: "+dd" or "-dd"
  const char* exp_begin = sci.data() + e + 1 + (sci[e + 1] == '+' ? 1 : 0);
  std::from_chars(exp_begin, sci.data() + sci.size(), exp10);
  bool neg = false;
  if (!mant.empty() && mant[0] == '-') {
    neg = true;
    mant.erase(0, 1);
  }
  std::string digits;
  for (char c : mant) {
    if (c != '.') digits += c;
  }
  std::string out;
  if (exp10 < -4 || exp10 >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof(eb), "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    out += eb;
  } else if (exp10 < 0) {
    out = "0." + std::string(static_cast<size_t>(-exp10 - 1), '0') + digits;
  } else {
    const auto point = static_cast<size_t>(exp10) + 1;
    if (digits.size() <= point) {
      out = digits + std::string(point - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, point) + "." + digits.substr(point);
    }
  }
  return neg ? "-" + out : out;
}

namespace {

const char* kHex = "0123456789abcdef";

void AppendHex(std::string* out, char32_t c, int digits) {
  for (int d = digits - 1; d >= 0; --d) *out += kHex[(c >> (4 * d)) & 0xF];
}

std::string ReprStr(const std::string& s) {
  const char q =
      (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, q);
  for (char32_t c : Cps(s)) {
    if (c == static_cast<char32_t>(q) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      out += "\\x";
      AppendHex(&out, c, 2);
    } else if (c < 0x80 || PyIsPrintableCp(c)) {
      out += FromCps(std::span<const char32_t>(&c, 1));
    } else if (c < 0x100) {
      out += "\\x";
      AppendHex(&out, c, 2);
    } else if (c < 0x10000) {
      out += "\\u";
      AppendHex(&out, c, 4);
    } else {
      out += "\\U";
      AppendHex(&out, c, 8);
    }
  }
  out += q;
  return out;
}

Status NotPrintable(const Value& v) {
  return InvalidArgument("printing a " + TypeName(v) +
                         " object is not supported (Python prints its address)");
}

void JsonStr(const std::string& s, bool ensure_ascii, std::string* out) {
  *out += '"';
  for (char32_t c : Cps(s)) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      default:
        if (c < 0x20 || (ensure_ascii && c >= 0x7F && c < 0x10000)) {
          *out += "\\u";
          AppendHex(out, c, 4);
        } else if (ensure_ascii && c >= 0x10000) {
          const char32_t v = c - 0x10000;
          *out += "\\u";
          AppendHex(out, 0xD800 + (v >> 10), 4);
          *out += "\\u";
          AppendHex(out, 0xDC00 + (v & 0x3FF), 4);
        } else {
          *out += FromCps(std::span<const char32_t>(&c, 1));
        }
    }
  }
  *out += '"';
}

Status JsonValue(const Value& v, const JsonOptions& o, int level, std::string* out) {
  using K = Value::Kind;
  auto newline = [&](int lvl) {
    if (!o.indent) return;
    *out += '\n';
    for (int k = 0; k < lvl; ++k) *out += *o.indent;
  };
  switch (v.kind) {
    case K::kNone:
      *out += "null";
      return Status::Ok();
    case K::kBool:
      *out += v.b ? "true" : "false";
      return Status::Ok();
    case K::kInt:
      *out += std::to_string(v.i);
      return Status::Ok();
    case K::kFloat:
      if (std::isnan(v.f)) {
        *out += "NaN";
      } else if (std::isinf(v.f)) {
        *out += v.f < 0 ? "-Infinity" : "Infinity";
      } else {
        *out += FloatRepr(v.f);
      }
      return Status::Ok();
    case K::kStr:
      JsonStr(v.s, o.ensure_ascii, out);
      return Status::Ok();
    case K::kList:
    case K::kTuple: {
      if (v.flavor != Value::Flavor::kPlain) break;
      if (v.list->empty()) {
        *out += "[]";
        return Status::Ok();
      }
      *out += '[';
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) *out += o.item_sep;
        newline(level + 1);
        GRIDFEED_RETURN_IF_ERROR(JsonValue((*v.list)[k], o, level + 1, out));
      }
      newline(level);
      *out += ']';
      return Status::Ok();
    }
    case K::kDict: {
      if (v.dict->empty()) {
        *out += "{}";
        return Status::Ok();
      }
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : *v.dict) items.push_back(&kv);
      if (o.sort_keys) {
        std::stable_sort(items.begin(), items.end(),
                         [](const auto* a, const auto* b) { return a->first < b->first; });
      }
      *out += '{';
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) *out += o.item_sep;
        newline(level + 1);
        JsonStr(items[k]->first, o.ensure_ascii, out);
        *out += o.key_sep;
        GRIDFEED_RETURN_IF_ERROR(JsonValue(items[k]->second, o, level + 1, out));
      }
      newline(level);
      *out += '}';
      return Status::Ok();
    }
    default:
      break;
  }
  return InvalidArgument("Object of type " + TypeName(v) + " is not JSON serializable");
}

}  // namespace

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
    case Value::Kind::kFloat:
      return FloatRepr(v.f);
    case Value::Kind::kStr:
      return v.s;
    default:
      return Repr(v);
  }
}

Result<std::string> Repr(const Value& v) {
  using K = Value::Kind;
  switch (v.kind) {
    case K::kUndefined:
      return std::string("Undefined");
    case K::kStr:
      if (v.markup) return NotPrintable(v);
      return ReprStr(v.s);
    case K::kList:
    case K::kTuple: {
      if (v.flavor != Value::Flavor::kPlain) return NotPrintable(v);
      const bool tuple = v.is(K::kTuple);
      std::string out = tuple ? "(" : "[";
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += ", ";
        GRIDFEED_ASSIGN_OR_RETURN(std::string e, Repr((*v.list)[k]));
        out += e;
      }
      if (tuple && v.list->size() == 1) out += ",";
      return out + (tuple ? ")" : "]");
    }
    case K::kDict:
    case K::kNamespace: {
      const Dict& d = v.is(K::kDict) ? *v.dict : *v.ns;
      std::string out = v.is(K::kDict) ? "{" : "<Namespace {";
      bool first = true;
      for (const auto& [k, e] : d) {
        if (!first) out += ", ";
        first = false;
        GRIDFEED_ASSIGN_OR_RETURN(std::string es, Repr(e));
        out += ReprStr(k) + ": " + es;
      }
      return out + (v.is(K::kDict) ? "}" : "}>");
    }
    case K::kCallable:
      return NotPrintable(v);
    default:
      return ToStr(v);
  }
}

Result<std::string> ToJson(const Value& v, const JsonOptions& options) {
  std::string out;
  GRIDFEED_RETURN_IF_ERROR(JsonValue(v, options, 0, &out));
  return out;
}

}  // namespace gridfeed::order::sft::chat_template_internal
