// The registry of the filters and tests of jinja2 3.1 that chat templates use (each filter with
// its family: chat_template_filters_{string,sequence,mapping,number}.cc), the tests, and the
// helpers the filter families share (internal contract: chat_template_ast.h).

#include <unicode/uchar.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "gridfeed/order/sft/chat_template_ast.h"
#include "gridfeed/order/sft/chat_template_filters_internal.h"

namespace gridfeed::order::sft::chat_template_internal::detail {

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

Value Gen(List items) { return Value::MakeList(std::move(items), Value::Flavor::kGenerator); }

}  // namespace gridfeed::order::sft::chat_template_internal::detail

namespace gridfeed::order::sft::chat_template_internal {
namespace {

using detail::MappingFilter;
using detail::NumberFilter;
using detail::SequenceFilter;
using detail::StringFilter;

// Each supported filter and the family that runs it.
struct FilterEntry {
  std::string_view name;
  detail::FilterFamily run;
};

const std::vector<FilterEntry> kFilters = {
    {"abs", NumberFilter},         {"attr", MappingFilter},     {"capitalize", StringFilter},
    {"center", StringFilter},      {"count", SequenceFilter},   {"d", MappingFilter},
    {"default", MappingFilter},    {"dictsort", MappingFilter}, {"e", StringFilter},
    {"escape", StringFilter},      {"first", SequenceFilter},   {"float", NumberFilter},
    {"forceescape", StringFilter}, {"format", StringFilter},    {"indent", StringFilter},
    {"int", NumberFilter},         {"items", MappingFilter},    {"join", SequenceFilter},
    {"last", SequenceFilter},      {"length", SequenceFilter},  {"list", SequenceFilter},
    {"lower", StringFilter},       {"map", SequenceFilter},     {"max", SequenceFilter},
    {"min", SequenceFilter},       {"reject", SequenceFilter},  {"rejectattr", SequenceFilter},
    {"replace", StringFilter},     {"reverse", SequenceFilter}, {"round", NumberFilter},
    {"safe", StringFilter},        {"select", SequenceFilter},  {"selectattr", SequenceFilter},
    {"sort", SequenceFilter},      {"string", StringFilter},    {"sum", SequenceFilter},
    {"title", StringFilter},       {"tojson", MappingFilter},   {"trim", StringFilter},
    {"unique", SequenceFilter},    {"upper", StringFilter},     {"wordcount", StringFilter},
};

const FilterEntry* FindFilter(std::string_view name) {
  for (const FilterEntry& f : kFilters) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

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

}  // namespace

bool IsFilter(std::string_view name) { return FindFilter(name) != nullptr; }
bool IsTest(std::string_view name) { return In(kTests, name); }

Result<Value> RunFilter(Evaluator& ev, const std::string& name, const Value& v, CallArgs& args,
                        size_t pos) {
  const FilterEntry* f = FindFilter(name);
  if (f == nullptr) return detail::FilterError("filter '" + name + "' is not supported", pos);
  return f->run(ev, name, v, args, pos);
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
      GRIDFEED_ASSIGN_OR_RETURN(std::string s, detail::SoftStr(v, pos));
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
