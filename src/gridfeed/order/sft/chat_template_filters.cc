// The filters and tests of jinja2 3.1 that chat templates use, with transformers' tojson
// (json.dumps with ensure_ascii=False, indent, separators, sort_keys) in place of jinja2's
// (internal contract: chat_template_ast.h). Jinja's generators (map, select, reverse...) are
// lists of flavor kGenerator: always true, no len(), not printable, as in Python.

#include <unicode/uchar.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "gridfeed/order/sft/chat_template_ast.h"

namespace gridfeed::order::sft::chat_template_internal {
namespace {

const std::vector<std::string_view> kFilters = {
    "abs",      "attr",  "capitalize", "center", "count",      "d",           "default",
    "dictsort", "e",     "escape",     "first",  "float",      "forceescape", "format",
    "indent",   "int",   "items",      "join",   "last",       "length",      "list",
    "lower",    "map",   "max",        "min",    "reject",     "rejectattr",  "replace",
    "reverse",  "round", "safe",       "select", "selectattr", "sort",        "string",
    "sum",      "title", "tojson",     "trim",   "unique",     "upper",       "wordcount"};

const std::vector<std::string_view> kTests = {
    "defined", "undefined", "none",        "boolean", "false",    "true",     "integer",
    "float",   "number",    "string",      "mapping", "iterable", "sequence", "callable",
    "sameas",  "escaped",   "in",          "lower",   "upper",    "eq",       "equalto",
    "==",      "ne",        "!=",          "lt",      "lessthan", "<",        "le",
    "<=",      "gt",        "greaterthan", ">",       "ge",       ">=",       "divisibleby",
    "odd",     "even",      "filter",      "test"};

bool In(const std::vector<std::string_view>& v, std::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

Status FilterError(const std::string& what, size_t pos) { return RuntimeError(what, pos); }

// soft_str: str() of the value, refusing what Python would print as an address.
Result<std::string> SoftStr(const Value& v, size_t pos) {
  auto s = ToStr(v);
  if (!s.ok()) return RuntimeError(s.status().message(), pos);
  return s;
}

Result<std::string> PlainStr(const Value& v, size_t pos, const char* filter) {
  if (v.markup) {
    return RuntimeError(
        std::string("|") + filter + " of a Markup string (from |safe or |escape) is not supported",
        pos);
  }
  return SoftStr(v, pos);
}

Result<int64_t> Len(const Value& v, size_t pos) {
  switch (v.kind) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kStr:
      return static_cast<int64_t>(CpCount(v.s));
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      if (v.flavor == Value::Flavor::kGenerator) break;
      return static_cast<int64_t>(v.list->size());
    case Value::Kind::kDict:
      return static_cast<int64_t>(v.dict->size());
    default:
      break;
  }
  return RuntimeError("object of type '" + TypeName(v) + "' has no len()", pos);
}

// make_attrgetter: "a.b.0" looked up part by part with environment.getitem.
Result<Value> AttrGet(Evaluator& ev, const Value& item, const Value& attribute, size_t pos) {
  if (attribute.IsIntLike()) return ev.GetItem(item, attribute, pos);
  if (!attribute.IsStr()) return RuntimeError("attribute must be a string or an integer", pos);
  Value cur = item;
  size_t start = 0;
  const std::string& a = attribute.s;
  while (true) {
    const size_t dot = a.find('.', start);
    const std::string part =
        a.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    Value key = Value::Str(part);
    if (!part.empty() &&
        std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      key = Value::Int(std::strtoll(part.c_str(), nullptr, 10));
    }
    GRIDFEED_ASSIGN_OR_RETURN(cur, ev.GetItem(cur, key, pos));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return cur;
}

Value IgnoreCase(const Value& v) {
  if (v.IsStr()) return Value::Str(PyLower(v.s));
  return v;
}

Result<bool> ArgBool(const std::optional<Value>& v, bool dflt) {
  if (!v) return dflt;
  return Truthy(*v);
}

std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

Value Gen(List items) { return Value::MakeList(std::move(items), Value::Flavor::kGenerator); }

// Python's int(str): optional sign, digits with single underscores, surrounding whitespace.
std::optional<int64_t> ParsePyInt(const std::string& text, int base) {
  std::string s = PyStripImpl(text, std::nullopt, true, true);
  if (s.empty()) return std::nullopt;
  bool neg = false;
  size_t k = 0;
  if (s[0] == '+' || s[0] == '-') {
    neg = s[0] == '-';
    k = 1;
  }
  if (base == 16 && s.compare(k, 2, "0x") == 0) k += 2;
  if (k >= s.size()) return std::nullopt;
  uint64_t v = 0;
  bool prev_digit = false;
  for (; k < s.size(); ++k) {
    const char c = s[k];
    if (c == '_') {
      if (!prev_digit || k + 1 >= s.size()) return std::nullopt;
      prev_digit = false;
      continue;
    }
    int d = -1;
    if (c >= '0' && c <= '9') d = c - '0';
    if (c >= 'a' && c <= 'z') d = c - 'a' + 10;
    if (c >= 'A' && c <= 'Z') d = c - 'A' + 10;
    if (d < 0 || d >= base) return std::nullopt;
    if (v > (static_cast<uint64_t>(INT64_MAX) + (neg ? 1 : 0) - static_cast<uint64_t>(d)) /
                static_cast<uint64_t>(base)) {
      return std::nullopt;
    }
    v = v * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
    prev_digit = true;
  }
  return neg ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
}

// Python's float(str).
std::optional<double> ParsePyFloat(const std::string& text) {
  std::string s = PyStripImpl(text, std::nullopt, true, true);
  if (s.empty()) return std::nullopt;
  std::string t;
  for (size_t k = 0; k < s.size(); ++k) {
    if (s[k] == '_') {
      if (k == 0 || k + 1 >= s.size() || !isdigit(static_cast<unsigned char>(s[k - 1])) ||
          !isdigit(static_cast<unsigned char>(s[k + 1]))) {
        return std::nullopt;
      }
      continue;
    }
    t += s[k];
  }
  std::string low;
  for (char c : t) low += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string body = low;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) body = body.substr(1);
  if (body == "inf" || body == "infinity" || body == "nan") {
    const double v = body == "nan" ? NAN : INFINITY;
    return low[0] == '-' ? -v : v;
  }
  for (char c : body) {
    if (!(isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == '+' || c == '-')) {
      return std::nullopt;
    }
  }
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size()) return std::nullopt;
  return v;
}

Result<Value> PyAdd(const Value& a, const Value& b, size_t pos) {
  if (a.IsIntLike() && b.IsIntLike()) {
    int64_t r;
    if (__builtin_add_overflow(a.AsInt(), b.AsInt(), &r)) {
      return RuntimeError("integer overflow (beyond int64)", pos);
    }
    return Value::Int(r);
  }
  if (a.IsNumber() && b.IsNumber()) return Value::Float(a.AsDouble() + b.AsDouble());
  if (a.IsPlainSeq() && b.IsPlainSeq() && a.kind == b.kind) {
    List l = *a.list;
    l.insert(l.end(), b.list->begin(), b.list->end());
    return a.is(Value::Kind::kTuple) ? Value::MakeTuple(std::move(l))
                                     : Value::MakeList(std::move(l));
  }
  return RuntimeError(
      "unsupported operand type(s) for +: '" + TypeName(a) + "' and '" + TypeName(b) + "'", pos);
}

// Python's round(x, ndigits) on a float: correctly rounded, half to even on the exact value.
double PyRoundFloat(double x, int64_t nd) {
  if (!std::isfinite(x)) return x;
  if (nd > 300) return x;
  if (nd < -300) return std::copysign(0.0, x);
  if (nd >= 0) {
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(nd), x);
    return std::strtod(buf, nullptr);
  }
  const double p = std::pow(10.0, static_cast<double>(-nd));
  const double y = x / p;
  double z = std::round(y);
  if (std::fabs(y - std::trunc(y)) == 0.5) z = 2.0 * std::round(y / 2.0);
  return z * p;
}

Result<Value> SortedBy(Evaluator& ev, List items, const std::optional<Value>& attribute,
                       bool case_sensitive, bool reverse, size_t pos) {
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& it : items) {
    Value key = it;
    if (attribute) {
      GRIDFEED_ASSIGN_OR_RETURN(key, AttrGet(ev, it, *attribute, pos));
    }
    if (!case_sensitive) key = IgnoreCase(key);
    keyed.emplace_back(std::move(key), std::move(it));
  }
  GRIDFEED_RETURN_IF_ERROR(ev.Step(pos, static_cast<int64_t>(keyed.size()) * 8));
  Status err = Status::Ok();
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    if (!err.ok()) return false;
    auto c = reverse ? PyCompare(y.first, x.first) : PyCompare(x.first, y.first);
    if (!c.ok()) {
      err = RuntimeError(c.status().message(), pos);
      return false;
    }
    return *c == -1;
  });
  GRIDFEED_RETURN_IF_ERROR(err);
  List out;
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return Value::MakeList(std::move(out));
}

Result<Value> SelectOrReject(Evaluator& ev, const Value& v, CallArgs& args, bool select,
                             bool lookup_attr, size_t pos, const std::string& name) {
  GRIDFEED_ASSIGN_OR_RETURN(List items, Iterate(v, pos));
  size_t off = 0;
  Value attr;
  if (lookup_attr) {
    if (args.pos.empty()) return RuntimeError("Missing parameter for attribute name", pos);
    attr = args.pos[0];
    off = 1;
  }
  std::optional<std::string> test;
  CallArgs targs;
  if (args.pos.size() > off) {
    if (!args.pos[off].IsStr()) return RuntimeError(name + ": the test name must be a string", pos);
    test = args.pos[off].s;
    if (!IsTest(*test))
      return RuntimeError("No test named '" + *test + "' (or not supported)", pos);
    targs.pos.assign(args.pos.begin() + static_cast<std::ptrdiff_t>(off + 1), args.pos.end());
    targs.kw = args.kw;
  } else if (!args.kw.empty()) {
    return RuntimeError(name + " got unexpected keyword arguments", pos);
  }
  List out;
  for (const Value& item : items) {
    Value x = item;
    if (lookup_attr) {
      GRIDFEED_ASSIGN_OR_RETURN(x, AttrGet(ev, item, attr, pos));
    }
    bool r;
    if (test) {
      CallArgs copy = targs;
      GRIDFEED_ASSIGN_OR_RETURN(r, ev.ApplyTest(*test, x, copy, pos));
    } else {
      r = Truthy(x);
    }
    if (r == select) out.push_back(item);
  }
  return Gen(std::move(out));
}

Result<Value> MinMax(Evaluator& ev, const Value& v, CallArgs& args, bool want_max, size_t pos) {
  GRIDFEED_ASSIGN_OR_RETURN(auto b, BindArgs(args, {"case_sensitive", "attribute"}, 0,
                                             want_max ? "max()" : "min()", pos));
  GRIDFEED_ASSIGN_OR_RETURN(List items, Iterate(v, pos));
  if (items.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
  GRIDFEED_ASSIGN_OR_RETURN(bool cs, ArgBool(b[0], false));
  size_t best = 0;
  Value best_key;
  for (size_t k = 0; k < items.size(); ++k) {
    Value key = items[k];
    if (b[1] && !b[1]->is(Value::Kind::kNone)) {
      GRIDFEED_ASSIGN_OR_RETURN(key, AttrGet(ev, items[k], *b[1], pos));
    }
    if (!cs) key = IgnoreCase(key);
    if (k == 0) {
      best_key = key;
      continue;
    }
    auto c = PyCompare(key, best_key);
    if (!c.ok()) return RuntimeError(c.status().message(), pos);
    if ((want_max && *c == 1) || (!want_max && *c == -1)) {
      best = k;
      best_key = key;
    }
  }
  return items[best];
}

Result<Value> ToJsonFilter(const Value& v, CallArgs& args, size_t pos) {
  GRIDFEED_ASSIGN_OR_RETURN(
      auto b,
      BindArgs(args, {"ensure_ascii", "indent", "separators", "sort_keys"}, 0, "tojson()", pos));
  JsonOptions o;
  o.ensure_ascii = b[0] && Truthy(*b[0]);
  o.sort_keys = b[3] && Truthy(*b[3]);
  if (b[1] && !b[1]->is(Value::Kind::kNone)) {
    if (b[1]->IsStr()) {
      o.indent = b[1]->s;
    } else if (b[1]->IsIntLike()) {
      o.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, b[1]->AsInt())), ' ');
    } else {
      return RuntimeError("tojson(): indent must be an int or a str", pos);
    }
    o.item_sep = ",";
  }
  if (b[2] && !b[2]->is(Value::Kind::kNone)) {
    const Value& s = *b[2];
    if (!s.IsPlainSeq() || s.list->size() != 2 || !(*s.list)[0].IsStr() || !(*s.list)[1].IsStr()) {
      return RuntimeError("tojson(): separators must be a pair of strings", pos);
    }
    o.item_sep = (*s.list)[0].s;
    o.key_sep = (*s.list)[1].s;
  }
  auto r = ToJson(v, o);
  if (!r.ok()) return RuntimeError(r.status().message(), pos);
  return Value::Str(std::move(r).value());
}

std::string Indent(const std::string& s0, const std::string& ind, bool first, bool blank) {
  const std::string s = s0 + "\n";
  std::vector<std::string> lines = PySplitLines(s, false);
  std::string rv;
  if (blank) {
    for (size_t k = 0; k < lines.size(); ++k) {
      if (k) rv += "\n" + ind;
      rv += lines[k];
    }
  } else {
    rv = lines.empty() ? std::string() : lines[0];
    if (lines.size() > 1) {
      rv += "\n";
      for (size_t k = 1; k < lines.size(); ++k) {
        if (k > 1) rv += "\n";
        rv += lines[k].empty() ? lines[k] : ind + lines[k];
      }
    }
  }
  if (first) rv = ind + rv;
  return rv;
}

// Jinja's title filter: split on runs of [-\s({\[<], then first char upper, the rest lower.
std::string JinjaTitle(const std::string& s) {
  const std::vector<char32_t> cps = Cps(s);
  auto sep = [](char32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || IsPySpace(c);
  };
  std::string out;
  size_t k = 0;
  while (k < cps.size()) {
    size_t e = k;
    const bool is_sep = sep(cps[k]);
    while (e < cps.size() && sep(cps[e]) == is_sep) ++e;
    const std::string item = FromCps(std::span<const char32_t>(cps.data() + k, e - k));
    if (is_sep) {
      out += item;
    } else {
      out += PyUpper(FromCps(std::span<const char32_t>(cps.data() + k, 1)));
      out += PyLower(FromCps(std::span<const char32_t>(cps.data() + k + 1, e - k - 1)));
    }
    k = e;
  }
  return out;
}

}  // namespace

bool IsFilter(std::string_view name) { return In(kFilters, name); }
bool IsTest(std::string_view name) { return In(kTests, name); }

Result<Value> RunFilter(Evaluator& ev, const std::string& name, const Value& v, CallArgs& args,
                        size_t pos) {
  const std::string what = name + "()";
  auto bind = [&](const std::vector<std::string_view>& params, size_t required = 0) {
    return BindArgs(args, params, required, what, pos);
  };
  if (name == "default" || name == "d") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({"default_value", "boolean"}));
    const bool boolean = b[1] && Truthy(*b[1]);
    if (v.IsUndefined() || (boolean && !Truthy(v))) return b[0] ? *b[0] : Value::Str("");
    return v;
  }
  if (name == "length" || name == "count") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({}));
    GRIDFEED_ASSIGN_OR_RETURN(int64_t n, Len(v, pos));
    return Value::Int(n);
  }
  if (name == "tojson") return ToJsonFilter(v, args, pos);
  if (name == "safe" || name == "escape" || name == "e" || name == "forceescape") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({}));
    if (v.markup && name != "forceescape") return v;
    GRIDFEED_ASSIGN_OR_RETURN(std::string s, SoftStr(v, pos));
    Value r = Value::Str(name == "safe" ? s : HtmlEscape(s));
    r.markup = true;
    return r;
  }
  if (name == "string") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({}));
    if (v.IsStr()) return v;
    GRIDFEED_ASSIGN_OR_RETURN(std::string s, SoftStr(v, pos));
    return Value::Str(std::move(s));
  }
  if (name == "trim") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({"chars"}));
    GRIDFEED_ASSIGN_OR_RETURN(std::string s, PlainStr(v, pos, "trim"));
    std::optional<std::string> chars;
    if (b[0] && !b[0]->is(Value::Kind::kNone)) {
      if (!b[0]->IsStr()) return FilterError("trim(): chars must be a string or none", pos);
      chars = b[0]->s;
    }
    return Value::Str(PyStripImpl(s, chars, true, true));
  }
  if (name == "upper" || name == "lower" || name == "capitalize" || name == "title") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({}));
    GRIDFEED_ASSIGN_OR_RETURN(std::string s, PlainStr(v, pos, name.c_str()));
    if (name == "upper") return Value::Str(PyUpper(s));
    if (name == "lower") return Value::Str(PyLower(s));
    if (name == "capitalize") return Value::Str(PyCapitalize(s));
    return Value::Str(JinjaTitle(s));
  }
  if (name == "replace") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({"old", "new", "count"}, 2));
    GRIDFEED_ASSIGN_OR_RETURN(std::string s, PlainStr(v, pos, "replace"));
    GRIDFEED_ASSIGN_OR_RETURN(std::string o, SoftStr(*b[0], pos));
    GRIDFEED_ASSIGN_OR_RETURN(std::string n, SoftStr(*b[1], pos));
    int64_t count = -1;
    if (b[2] && !b[2]->is(Value::Kind::kNone)) {
      if (!b[2]->IsIntLike()) return FilterError("replace(): count must be an integer", pos);
      count = b[2]->AsInt();
    }
    if (o.empty() || !n.empty()) {
      const uint64_t hits = o.empty() ? CpCount(s) + 1 : 0;
      GRIDFEED_RETURN_IF_ERROR(ev.CheckBytes(pos, s.size() + hits * n.size(), "replace()"));
    }
    std::string r = PyReplace(s, o, n, count);
    GRIDFEED_RETURN_IF_ERROR(ev.CheckBytes(pos, r.size(), "replace()"));
    return Value::Str(std::move(r));
  }
  if (name == "join") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({"d", "attribute"}));
    std::string sep;
    if (b[0]) {
      GRIDFEED_ASSIGN_OR_RETURN(sep, PlainStr(*b[0], pos, "join"));
    }
    GRIDFEED_ASSIGN_OR_RETURN(List items, Iterate(v, pos));
    std::string out;
    for (size_t k = 0; k < items.size(); ++k) {
      Value item = items[k];
      if (b[1] && !b[1]->is(Value::Kind::kNone)) {
        GRIDFEED_ASSIGN_OR_RETURN(item, AttrGet(ev, item, *b[1], pos));
      }
      GRIDFEED_ASSIGN_OR_RETURN(std::string s, PlainStr(item, pos, "join"));
      if (k) out += sep;
      out += s;
      GRIDFEED_RETURN_IF_ERROR(ev.CheckBytes(pos, out.size(), "join()"));
    }
    GRIDFEED_RETURN_IF_ERROR(ev.Step(pos, static_cast<int64_t>(items.size())));
    return Value::Str(std::move(out));
  }
  if (name == "first") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({}));
    GRIDFEED_ASSIGN_OR_RETURN(List items, Iterate(v, pos));
    if (items.empty()) return Value::Undefined("No first item, sequence was empty.");
    return items.front();
  }
  if (name == "last") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({}));
    if (v.IsSeq() && v.flavor == Value::Flavor::kGenerator) {
      return FilterError("'generator' object is not reversible", pos);
    }
    GRIDFEED_ASSIGN_OR_RETURN(List items, Iterate(v, pos));
    if (items.empty()) return Value::Undefined("No last item, sequence was empty.");
    return items.back();
  }
  if (name == "list") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({}));
    GRIDFEED_ASSIGN_OR_RETURN(List items, Iterate(v, pos));
    return Value::MakeList(std::move(items));
  }
  if (name == "items") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({}));
    if (v.IsUndefined()) return Gen({});
    if (!v.is(Value::Kind::kDict))
      return FilterError("Can only get item pairs from a mapping.", pos);
    List out;
    for (const auto& [k, x] : *v.dict) out.push_back(Value::MakeTuple({Value::Str(k), x}));
    return Gen(std::move(out));
  }
  if (name == "reverse") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({}));
    if (v.IsStr()) {
      std::vector<char32_t> cps = Cps(v.s);
      std::reverse(cps.begin(), cps.end());
      return Value::Str(FromCps(cps));
    }
    GRIDFEED_ASSIGN_OR_RETURN(List items, Iterate(v, pos));
    std::reverse(items.begin(), items.end());
    if (v.IsSeq() && v.flavor == Value::Flavor::kGenerator)
      return Value::MakeList(std::move(items));
    return Gen(std::move(items));
  }
  if (name == "map") {
    GRIDFEED_ASSIGN_OR_RETURN(List items, Iterate(v, pos));
    List out;
    if (args.pos.empty()) {
      std::optional<Value> attribute, dflt;
      for (const auto& [k, x] : args.kw) {
        if (k == "attribute") {
          attribute = x;
        } else if (k == "default") {
          dflt = x;
        } else {
          return FilterError("Unexpected keyword argument '" + k + "'", pos);
        }
      }
      if (!attribute) return FilterError("map requires a filter argument", pos);
      for (const Value& item : items) {
        GRIDFEED_ASSIGN_OR_RETURN(Value x, AttrGet(ev, item, *attribute, pos));
        if (x.IsUndefined() && dflt) x = *dflt;
        out.push_back(std::move(x));
      }
      return Gen(std::move(out));
    }
    if (!args.pos[0].IsStr()) return FilterError("map(): the filter name must be a string", pos);
    const std::string f = args.pos[0].s;
    if (!IsFilter(f)) return FilterError("No filter named '" + f + "' (or not supported)", pos);
    CallArgs rest;
    rest.pos.assign(args.pos.begin() + 1, args.pos.end());
    rest.kw = args.kw;
    for (const Value& item : items) {
      CallArgs copy = rest;
      GRIDFEED_ASSIGN_OR_RETURN(Value x, ev.ApplyFilter(f, item, copy, pos));
      out.push_back(std::move(x));
    }
    return Gen(std::move(out));
  }
  if (name == "select" || name == "reject") {
    return SelectOrReject(ev, v, args, name == "select", false, pos, name);
  }
  if (name == "selectattr" || name == "rejectattr") {
    return SelectOrReject(ev, v, args, name == "selectattr", true, pos, name);
  }
  if (name == "sort") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({"reverse", "case_sensitive", "attribute"}));
    GRIDFEED_ASSIGN_OR_RETURN(List items, Iterate(v, pos));
    std::optional<Value> attr;
    if (b[2] && !b[2]->is(Value::Kind::kNone)) attr = b[2];
    return SortedBy(ev, std::move(items), attr, b[1] && Truthy(*b[1]), b[0] && Truthy(*b[0]), pos);
  }
  if (name == "dictsort") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({"case_sensitive", "by", "reverse"}));
    if (!v.is(Value::Kind::kDict)) return FilterError("dictsort(): not a mapping", pos);
    int64_t idx = 0;
    if (b[1]) {
      if (b[1]->IsStr() && b[1]->s == "value") {
        idx = 1;
      } else if (!(b[1]->IsStr() && b[1]->s == "key")) {
        return FilterError("You can only sort by either \"key\" or \"value\"", pos);
      }
    }
    List items;
    for (const auto& [k, x] : *v.dict) items.push_back(Value::MakeTuple({Value::Str(k), x}));
    return SortedBy(ev, std::move(items), Value::Int(idx), b[0] && Truthy(*b[0]),
                    b[2] && Truthy(*b[2]), pos);
  }
  if (name == "unique") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({"case_sensitive", "attribute"}));
    GRIDFEED_ASSIGN_OR_RETURN(List items, Iterate(v, pos));
    const bool cs = b[0] && Truthy(*b[0]);
    List seen, out;
    for (const Value& item : items) {
      Value key = item;
      if (b[1] && !b[1]->is(Value::Kind::kNone)) {
        GRIDFEED_ASSIGN_OR_RETURN(key, AttrGet(ev, item, *b[1], pos));
      }
      if (!cs) key = IgnoreCase(key);
      if (key.IsSeq() || key.is(Value::Kind::kDict)) {
        if (!key.is(Value::Kind::kTuple)) {
          return FilterError("unhashable type: '" + TypeName(key) + "'", pos);
        }
      }
      GRIDFEED_RETURN_IF_ERROR(ev.Step(pos, static_cast<int64_t>(seen.size())));
      if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return PyEquals(s, key); })) {
        continue;
      }
      seen.push_back(key);
      out.push_back(item);
    }
    return Gen(std::move(out));
  }
  if (name == "min" || name == "max") return MinMax(ev, v, args, name == "max", pos);
  if (name == "sum") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({"attribute", "start"}));
    GRIDFEED_ASSIGN_OR_RETURN(List items, Iterate(v, pos));
    Value acc = b[1] ? *b[1] : Value::Int(0);
    if (acc.IsStr()) return FilterError("sum() can't sum strings [use ''.join(seq) instead]", pos);
    for (const Value& item : items) {
      Value x = item;
      if (b[0] && !b[0]->is(Value::Kind::kNone)) {
        GRIDFEED_ASSIGN_OR_RETURN(x, AttrGet(ev, item, *b[0], pos));
      }
      GRIDFEED_ASSIGN_OR_RETURN(acc, PyAdd(acc, x, pos));
    }
    return acc;
  }
  if (name == "abs") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({}));
    if (v.is(Value::Kind::kFloat)) return Value::Float(std::fabs(v.f));
    if (v.IsIntLike()) {
      if (v.AsInt() == INT64_MIN) return FilterError("integer overflow (beyond int64)", pos);
      return Value::Int(std::llabs(v.AsInt()));
    }
    return FilterError("bad operand type for abs(): '" + TypeName(v) + "'", pos);
  }
  if (name == "int") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({"default", "base"}));
    const Value dflt = b[0] ? *b[0] : Value::Int(0);
    int64_t base = 10;
    if (b[1]) {
      if (!b[1]->IsIntLike()) return FilterError("int(): base must be an integer", pos);
      base = b[1]->AsInt();
    }
    if (v.IsIntLike()) return Value::Int(v.AsInt());
    if (v.is(Value::Kind::kFloat)) {
      if (!std::isfinite(v.f))
        return FilterError("cannot convert float infinity or NaN to integer", pos);
      if (std::fabs(v.f) >= 9.2e18) return FilterError("integer overflow (beyond int64)", pos);
      return Value::Int(static_cast<int64_t>(std::trunc(v.f)));
    }
    if (v.IsStr()) {
      if (base != 10 && base != 16 && base != 2 && base != 8) {
        return FilterError("int(): only bases 2, 8, 10 and 16 are supported", pos);
      }
      if (auto i = ParsePyInt(v.s, static_cast<int>(base))) return Value::Int(*i);
      if (auto f = ParsePyFloat(v.s)) {
        if (!std::isfinite(*f))
          return FilterError("cannot convert float infinity or NaN to integer", pos);
        if (std::fabs(*f) >= 9.2e18) return FilterError("integer overflow (beyond int64)", pos);
        return Value::Int(static_cast<int64_t>(std::trunc(*f)));
      }
    }
    return dflt;
  }
  if (name == "float") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({"default"}));
    const Value dflt = b[0] ? *b[0] : Value::Float(0.0);
    if (v.IsNumber()) return Value::Float(v.AsDouble());
    if (v.IsStr()) {
      if (auto f = ParsePyFloat(v.s)) return Value::Float(*f);
    }
    return dflt;
  }
  if (name == "round") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({"precision", "method"}));
    int64_t precision = 0;
    if (b[0]) {
      if (!b[0]->IsIntLike()) return FilterError("round(): precision must be an integer", pos);
      precision = b[0]->AsInt();
    }
    const std::string method = b[1] && b[1]->IsStr() ? b[1]->s : "common";
    if (!v.IsNumber()) return FilterError("round(): not a number", pos);
    if (method == "common") {
      if (v.IsIntLike()) {
        if (precision >= 0) return Value::Int(v.AsInt());
        return FilterError("round() of an integer to negative digits is not supported", pos);
      }
      return Value::Float(PyRoundFloat(v.f, precision));
    }
    if (method != "ceil" && method != "floor") {
      return FilterError("method must be common, ceil or floor", pos);
    }
    const double p = std::pow(10.0, static_cast<double>(precision));
    const double x = v.AsDouble() * p;
    return Value::Float((method == "ceil" ? std::ceil(x) : std::floor(x)) / p);
  }
  if (name == "indent") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({"width", "first", "blank"}));
    GRIDFEED_ASSIGN_OR_RETURN(std::string s, PlainStr(v, pos, "indent"));
    std::string ind(4, ' ');
    if (b[0]) {
      if (b[0]->IsStr()) {
        ind = b[0]->s;
      } else if (b[0]->IsIntLike()) {
        ind = std::string(static_cast<size_t>(std::max<int64_t>(0, b[0]->AsInt())), ' ');
        GRIDFEED_RETURN_IF_ERROR(ev.CheckBytes(pos, ind.size(), "indent()"));
      } else {
        return FilterError("indent(): width must be an int or a str", pos);
      }
    }
    GRIDFEED_RETURN_IF_ERROR(
        ev.CheckBytes(pos, s.size() + (CpCount(s) + 1) * ind.size(), "indent()"));
    return Value::Str(Indent(s, ind, b[1] && Truthy(*b[1]), b[2] && Truthy(*b[2])));
  }
  if (name == "center") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({"width"}));
    GRIDFEED_ASSIGN_OR_RETURN(std::string s, PlainStr(v, pos, "center"));
    int64_t width = 80;
    if (b[0]) {
      if (!b[0]->IsIntLike()) return FilterError("center(): width must be an integer", pos);
      width = b[0]->AsInt();
    }
    const int64_t len = static_cast<int64_t>(CpCount(s));
    if (width <= len) return Value::Str(s);
    GRIDFEED_RETURN_IF_ERROR(ev.CheckBytes(pos, static_cast<uint64_t>(width), "center()"));
    const int64_t marg = width - len;
    const int64_t left = marg / 2 + (marg & width & 1);
    return Value::Str(std::string(static_cast<size_t>(left), ' ') + s +
                      std::string(static_cast<size_t>(marg - left), ' '));
  }
  if (name == "wordcount") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({}));
    GRIDFEED_ASSIGN_OR_RETURN(std::string s, SoftStr(v, pos));
    int64_t n = 0;
    bool in_word = false;
    for (char32_t c : Cps(s)) {
      const bool w = c == '_' || PyIsAlnumCp(c);
      if (w && !in_word) ++n;
      in_word = w;
    }
    return Value::Int(n);
  }
  if (name == "attr") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({"name"}, 1));
    if (!b[0]->IsStr()) return FilterError("attr(): the name must be a string", pos);
    if (v.IsUndefined()) return Value::Undefined("'Undefined' has no attribute '" + b[0]->s + "'");
    if (v.is(Value::Kind::kNamespace)) {
      if (const Value* x = DictFind(*v.ns, b[0]->s)) return *x;
    }
    if (auto m = BindMethod(ev, v, b[0]->s)) return *m;
    return Value::Undefined("'" + TypeName(v) + " object' has no attribute '" + b[0]->s + "'");
  }
  if (name == "format") {
    GRIDFEED_ASSIGN_OR_RETURN(std::string s, PlainStr(v, pos, "format"));
    if (!args.pos.empty() && !args.kw.empty()) {
      return FilterError("can't handle positional and keyword arguments at the same time", pos);
    }
    Value fa;
    if (!args.kw.empty()) {
      Dict d;
      for (const auto& kv : args.kw) d.emplace_back(kv.first, kv.second);
      fa = Value::MakeDict(std::move(d));
    } else {
      fa = Value::MakeTuple(args.pos);
    }
    GRIDFEED_ASSIGN_OR_RETURN(std::string r, PercentFormat(s, fa, pos));
    return Value::Str(std::move(r));
  }
  return FilterError("filter '" + name + "' is not supported", pos);
}

Result<bool> RunTest(Evaluator& /*ev*/, const std::string& name, const Value& v, CallArgs& args,
                     size_t pos) {
  using K = Value::Kind;
  auto bind = [&](const std::vector<std::string_view>& params, size_t required) {
    return BindArgs(args, params, required, "test '" + name + "'", pos);
  };
  if (name == "defined" || name == "undefined" || name == "none" || name == "boolean" ||
      name == "false" || name == "true" || name == "integer" || name == "float" ||
      name == "number" || name == "string" || name == "mapping" || name == "iterable" ||
      name == "sequence" || name == "callable" || name == "escaped" || name == "lower" ||
      name == "upper" || name == "odd" || name == "even") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({}, 0));
    if (name == "defined") return !v.IsUndefined();
    if (name == "undefined") return v.IsUndefined();
    if (name == "none") return v.is(K::kNone);
    if (name == "boolean") return v.is(K::kBool);
    if (name == "false") return v.is(K::kBool) && !v.b;
    if (name == "true") return v.is(K::kBool) && v.b;
    if (name == "integer") return v.is(K::kInt);
    if (name == "float") return v.is(K::kFloat);
    if (name == "number") return v.IsNumber();
    if (name == "string") return v.IsStr();
    if (name == "mapping") return v.is(K::kDict);
    if (name == "iterable") return v.IsSeq() || v.IsStr() || v.is(K::kDict) || v.IsUndefined();
    if (name == "sequence") {
      return v.IsStr() || v.is(K::kDict) || v.IsPlainSeq();
    }
    if (name == "callable") return v.is(K::kCallable);
    if (name == "escaped") return v.markup;
    if (name == "lower" || name == "upper") {
      GRIDFEED_ASSIGN_OR_RETURN(std::string s, SoftStr(v, pos));
      bool cased = false;
      for (char32_t c : Cps(s)) {
        const bool lo = PyIsLowerCp(c), up = PyIsUpperCp(c);
        const bool title = u_charType(c) == U_TITLECASE_LETTER;
        if (name == "lower" ? (up || title) : (lo || title)) return false;
        if (name == "lower" ? lo : up) cased = true;
      }
      return cased;
    }
    // odd / even
    if (v.IsUndefined()) return RuntimeError(v.s, pos);
    if (!v.IsNumber())
      return RuntimeError("unsupported operand type(s) for %: '" + TypeName(v) + "' and 'int'",
                          pos);
    if (v.is(K::kFloat)) {
      const double m = std::fmod(std::fmod(v.f, 2.0) + 2.0, 2.0);
      return name == "odd" ? m == 1.0 : m == 0.0;
    }
    const int64_t m = ((v.AsInt() % 2) + 2) % 2;
    return name == "odd" ? m == 1 : m == 0;
  }
  if (name == "divisibleby") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({"num"}, 1));
    if (!v.IsIntLike() || !b[0]->IsIntLike()) {
      return RuntimeError("divisibleby: only integers are supported", pos);
    }
    if (b[0]->AsInt() == 0) return RuntimeError("integer division or modulo by zero", pos);
    return v.AsInt() % b[0]->AsInt() == 0;
  }
  if (name == "in") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({"seq"}, 1));
    const Value& seq = *b[0];
    if (seq.IsStr()) {
      if (!v.IsStr()) return RuntimeError("'in <string>' requires string as left operand", pos);
      return seq.s.find(v.s) != std::string::npos;
    }
    if (seq.is(K::kDict)) return v.IsStr() && DictFind(*seq.dict, v.s) != nullptr;
    if (seq.IsUndefined()) return false;
    if (!seq.IsSeq())
      return RuntimeError("argument of type '" + TypeName(seq) + "' is not iterable", pos);
    for (const Value& x : *seq.list) {
      if (PyEquals(v, x)) return true;
    }
    return false;
  }
  if (name == "sameas") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({"other"}, 1));
    const Value& o = *b[0];
    if (v.is(K::kNone) || v.is(K::kBool) || v.IsUndefined()) {
      return v.kind == o.kind && (v.kind != K::kBool || v.b == o.b);
    }
    if (v.IsSeq() && o.IsSeq()) return v.list == o.list;
    if (v.is(K::kDict) && o.is(K::kDict)) return v.dict == o.dict;
    if (v.is(K::kNamespace) && o.is(K::kNamespace)) return v.ns == o.ns;
    return RuntimeError("test 'sameas' on numbers or strings is not supported (Python identity)",
                        pos);
  }
  if (name == "filter" || name == "test") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({}, 0));
    if (!v.IsStr()) return false;
    return name == "filter" ? IsFilter(v.s) : IsTest(v.s);
  }
  // Comparison tests.
  GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({"other"}, 1));
  const Value& o = *b[0];
  if (name == "eq" || name == "equalto" || name == "==") return PyEquals(v, o);
  if (name == "ne" || name == "!=") return !PyEquals(v, o);
  if (v.IsUndefined()) return RuntimeError(v.s, pos);
  if (o.IsUndefined()) return RuntimeError(o.s, pos);
  auto c = PyCompare(v, o);
  if (!c.ok()) return RuntimeError(c.status().message(), pos);
  if (*c == 2) return false;
  if (name == "lt" || name == "lessthan" || name == "<") return *c < 0;
  if (name == "le" || name == "<=") return *c <= 0;
  if (name == "gt" || name == "greaterthan" || name == ">") return *c > 0;
  return *c >= 0;
}

}  // namespace gridfeed::order::sft::chat_template_internal
