// Values of the chat-template renderer with Python's semantics where they show in output:
// str() of values (True, None), truthiness, equality, repr of lists and dicts (internal
// contract: chat_template_ast.h).

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

namespace {

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

}  // namespace

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

}  // namespace gridfeed::order::sft::chat_template_internal
