// The sequence filters of jinja2 3.1 that chat templates use: length, join, first, last, list,
// reverse, map, select/reject(attr), sort, unique, min, max, sum; Jinja's generators are lists of
// flavor kGenerator (contract: chat_template_filters_internal.h).

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gridfeed/order/sft/chat_template_ast.h"
#include "gridfeed/order/sft/chat_template_filters_internal.h"

namespace gridfeed::order::sft::chat_template_internal::detail {
namespace {

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

}  // namespace

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

Result<Value> SequenceFilter(Evaluator& ev, const std::string& name, const Value& v, CallArgs& args,
                             size_t pos) {
  const FilterBinder bind{args, name + "()", pos};
  if (name == "length" || name == "count") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({}));
    GRIDFEED_ASSIGN_OR_RETURN(int64_t n, Len(v, pos));
    return Value::Int(n);
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
  return FilterError("filter '" + name + "' is not supported", pos);
}

}  // namespace gridfeed::order::sft::chat_template_internal::detail
