// Chat-template evaluation, expressions: literals, names, attributes, items and slices, Python's
// operators (int64 with overflow checks, floats as floatobject.c), comparisons and `in`, filters,
// tests and calls (contract: chat_template_ast.h, chat_template_eval_internal.h).

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "gridfeed/order/sft/chat_template_ast.h"
#include "gridfeed/order/sft/chat_template_eval_internal.h"

namespace gridfeed::order::sft::chat_template_internal::detail {
namespace {

// Python's float floor division and modulo (floatobject.c).
void FloatDivMod(double vx, double wx, double* floordiv, double* mod) {
  double m = std::fmod(vx, wx);
  double div = (vx - m) / wx;
  if (m != 0) {
    if ((wx < 0) != (m < 0)) {
      m += wx;
      div -= 1.0;
    }
  } else {
    m = std::copysign(0.0, wx);
  }
  double fd;
  if (div != 0) {
    fd = std::floor(div);
    if (div - fd > 0.5) fd += 1.0;
  } else {
    fd = std::copysign(0.0, vx / wx);
  }
  *floordiv = fd;
  *mod = m;
}

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

Result<CallArgs> Renderer::EvalArgs(const Expr& e, size_t first) {
  CallArgs a;
  for (size_t k = first; k < e.args.size(); ++k) {
    GRIDFEED_ASSIGN_OR_RETURN(Value v, Eval(*e.args[k]));
    a.pos.push_back(std::move(v));
  }
  for (const auto& [key, x] : e.kwargs) {
    GRIDFEED_ASSIGN_OR_RETURN(Value v, Eval(*x));
    a.kw.emplace_back(key, std::move(v));
  }
  return a;
}

Result<Value> Renderer::Eval(const Expr& e) {
  DepthGuard guard(this);
  GRIDFEED_RETURN_IF_ERROR(CheckDepth(e.pos));
  GRIDFEED_RETURN_IF_ERROR(Step(e.pos, 1));
  using K = Expr::Kind;
  switch (e.kind) {
    case K::kLit:
      return e.lit;
    case K::kName:
      return Lookup(e.name);
    case K::kBlockValue:
      return block_values_.back();
    case K::kAttr: {
      GRIDFEED_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0]));
      return GetAttr(obj, e.name, e.pos);
    }
    case K::kItem: {
      GRIDFEED_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0]));
      GRIDFEED_ASSIGN_OR_RETURN(Value key, Eval(*e.args[1]));
      return GetItem(obj, key, e.pos);
    }
    case K::kSlice:
      return Slice(e);
    case K::kList:
    case K::kTuple: {
      List items;
      for (const auto& a : e.args) {
        GRIDFEED_ASSIGN_OR_RETURN(Value v, Eval(*a));
        items.push_back(std::move(v));
      }
      return e.kind == K::kList ? Value::MakeList(std::move(items))
                                : Value::MakeTuple(std::move(items));
    }
    case K::kDict: {
      Dict d;
      for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
        GRIDFEED_ASSIGN_OR_RETURN(Value key, Eval(*e.args[k]));
        GRIDFEED_ASSIGN_OR_RETURN(Value v, Eval(*e.args[k + 1]));
        if (!key.IsStr()) {
          return RuntimeError("dict keys other than strings are not supported", e.args[k]->pos);
        }
        bool replaced = false;
        for (auto& kv : d) {
          if (kv.first == key.s) {
            kv.second = v;
            replaced = true;
          }
        }
        if (!replaced) d.emplace_back(key.s, std::move(v));
      }
      return Value::MakeDict(std::move(d));
    }
    case K::kNot: {
      GRIDFEED_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0]));
      return Value::Bool(!Truthy(v));
    }
    case K::kNeg:
    case K::kPos: {
      GRIDFEED_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0]));
      if (v.IsUndefined()) return UndefinedError(v, e.pos);
      if (v.is(Value::Kind::kFloat)) return Value::Float(e.kind == K::kPos ? v.f : -v.f);
      if (!v.IsIntLike()) {
        return RuntimeError("bad operand type for unary " +
                                std::string(e.kind == K::kPos ? "+" : "-") + ": '" + TypeName(v) +
                                "'",
                            e.pos);
      }
      if (e.kind == K::kPos) return Value::Int(v.AsInt());
      if (v.AsInt() == INT64_MIN) return RuntimeError("integer overflow (beyond int64)", e.pos);
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
      return Value::Undefined(
          "the inline if-expression evaluated to false and no else section was defined");
    }
    case K::kConcat: {
      std::string s;
      for (const auto& a : e.args) {
        GRIDFEED_ASSIGN_OR_RETURN(Value v, Eval(*a));
        if (v.markup) return MarkupRefused(e.pos);
        GRIDFEED_ASSIGN_OR_RETURN(std::string part, Stringify(v, e.pos));
        GRIDFEED_RETURN_IF_ERROR(CheckBytes(e.pos, s.size() + part.size(), "a string"));
        s += part;
      }
      return Value::Str(std::move(s));
    }
    case K::kBinary:
      return Binary(e);
    case K::kCompare:
      return Compare(e);
    case K::kFilter: {
      GRIDFEED_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0]));
      GRIDFEED_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1));
      return ApplyFilter(e.name, v, args, e.pos);
    }
    case K::kTest: {
      GRIDFEED_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0]));
      GRIDFEED_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1));
      GRIDFEED_ASSIGN_OR_RETURN(bool r, ApplyTest(e.name, v, args, e.pos));
      return Value::Bool(e.negated ? !r : r);
    }
    case K::kCall: {
      GRIDFEED_ASSIGN_OR_RETURN(Value callee, Eval(*e.args[0]));
      GRIDFEED_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1));
      return Call(callee, args, e.pos);
    }
  }
  return RuntimeError("unknown expression", e.pos);
}

Status Renderer::MarkupRefused(size_t pos) {
  return RuntimeError(
      "combining a Markup string (from |safe or |escape) with other values is not supported", pos);
}

Result<Value> Renderer::Slice(const Expr& e) {
  GRIDFEED_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0]));
  Value vals[3];
  bool given[3] = {false, false, false};
  int64_t idx[3] = {0, 0, 1};
  for (size_t k = 0; k < 3; ++k) {
    if (!e.args[k + 1]) continue;
    GRIDFEED_ASSIGN_OR_RETURN(vals[k], Eval(*e.args[k + 1]));
    if (vals[k].is(Value::Kind::kNone)) continue;
    if (!vals[k].IsIntLike()) {
      return RuntimeError("slice indices must be integers or None", e.pos);
    }
    idx[k] = vals[k].AsInt();
    given[k] = true;
  }
  if (obj.IsUndefined()) return UndefinedError(obj, e.pos);
  const bool str = obj.IsStr();
  if (!str && !obj.IsPlainSeq()) {
    return Value::Undefined("'" + TypeName(obj) + " object' is not subscriptable");
  }
  if (given[2] && idx[2] == 0) return RuntimeError("slice step cannot be zero", e.pos);
  std::vector<char32_t> cps;
  if (str) cps = Cps(obj.s);
  const int64_t n = str ? static_cast<int64_t>(cps.size()) : static_cast<int64_t>(obj.list->size());
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
  GRIDFEED_RETURN_IF_ERROR(Step(e.pos, static_cast<int64_t>(out_cps.size() + out_list.size())));
  if (str) return Value::Str(FromCps(out_cps));
  return obj.is(Value::Kind::kTuple) ? Value::MakeTuple(std::move(out_list))
                                     : Value::MakeList(std::move(out_list));
}

Result<Value> Renderer::Repeat(const Value& seq, int64_t times, size_t pos) {
  times = std::max<int64_t>(0, times);
  const uint64_t unit = seq.IsStr() ? seq.s.size() : seq.list->size() * sizeof(Value);
  if (unit != 0 && static_cast<uint64_t>(times) > static_cast<uint64_t>(INT64_MAX) / unit) {
    return RuntimeError("repetition would need more than 2^63 bytes", pos);
  }
  GRIDFEED_RETURN_IF_ERROR(CheckBytes(pos, unit * static_cast<uint64_t>(times), "repetition"));
  GRIDFEED_RETURN_IF_ERROR(
      Step(pos, seq.IsStr() ? times : times * static_cast<int64_t>(seq.list->size())));
  if (seq.IsStr()) {
    std::string s;
    s.reserve(seq.s.size() * static_cast<size_t>(times));
    for (int64_t k = 0; k < times; ++k) s += seq.s;
    return Value::Str(std::move(s));
  }
  List l;
  l.reserve(seq.list->size() * static_cast<size_t>(times));
  for (int64_t k = 0; k < times; ++k) l.insert(l.end(), seq.list->begin(), seq.list->end());
  return seq.is(Value::Kind::kTuple) ? Value::MakeTuple(std::move(l))
                                     : Value::MakeList(std::move(l));
}

Result<Value> Renderer::Binary(const Expr& e) {
  GRIDFEED_ASSIGN_OR_RETURN(Value a, Eval(*e.args[0]));
  GRIDFEED_ASSIGN_OR_RETURN(Value b, Eval(*e.args[1]));
  const std::string& op = e.name;
  if (a.IsUndefined()) return UndefinedError(a, e.pos);
  if (b.IsUndefined()) return UndefinedError(b, e.pos);
  if (a.markup || b.markup) return MarkupRefused(e.pos);
  auto type_error = [&]() {
    return RuntimeError("unsupported operand type(s) for " + op + ": '" + TypeName(a) + "' and '" +
                            TypeName(b) + "'",
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
      if (x == INT64_MIN && y == -1) return RuntimeError("integer overflow (beyond int64)", e.pos);
      r = op == "//" ? FloorDiv(x, y) : x - FloorDiv(x, y) * y;
    } else if (op == "/") {
      if (y == 0) return RuntimeError("division by zero", e.pos);
      return Value::Float(static_cast<double>(x) / static_cast<double>(y));
    } else if (op == "**") {
      if (y < 0) {
        if (x == 0) return RuntimeError("0.0 cannot be raised to a negative power", e.pos);
        return Value::Float(std::pow(static_cast<double>(x), static_cast<double>(y)));
      }
      r = 1;
      int64_t base = x, exp = y;
      while (exp > 0 && !overflow) {
        if (exp & 1) overflow = __builtin_mul_overflow(r, base, &r);
        exp >>= 1;
        if (exp > 0 && !overflow) overflow = __builtin_mul_overflow(base, base, &base);
      }
    }
    if (overflow) {
      return RuntimeError(
          "integer overflow (beyond int64; Python's big integers are not "
          "supported)",
          e.pos);
    }
    return Value::Int(r);
  }
  if (a.IsNumber() && b.IsNumber()) {
    const double x = a.AsDouble(), y = b.AsDouble();
    if (op == "+") return Value::Float(x + y);
    if (op == "-") return Value::Float(x - y);
    if (op == "*") return Value::Float(x * y);
    if (op == "/") {
      if (y == 0) return RuntimeError("float division by zero", e.pos);
      return Value::Float(x / y);
    }
    if (op == "//" || op == "%") {
      if (y == 0) return RuntimeError("float floor division or modulo by zero", e.pos);
      double fd, m;
      FloatDivMod(x, y, &fd, &m);
      return Value::Float(op == "//" ? fd : m);
    }
    if (op == "**") {
      if (x == 0 && y < 0) return RuntimeError("0.0 cannot be raised to a negative power", e.pos);
      if (x < 0 && y != std::floor(y)) {
        return RuntimeError(
            "a negative number raised to a fractional power (complex) is not "
            "supported",
            e.pos);
      }
      const double r = std::pow(x, y);
      if (std::isinf(r) && !std::isinf(x) && !std::isinf(y)) {
        return RuntimeError("(34, 'Numerical result out of range')", e.pos);
      }
      return Value::Float(r);
    }
    return type_error();
  }
  if (op == "+") {
    if (a.IsStr() && b.IsStr()) {
      GRIDFEED_RETURN_IF_ERROR(CheckBytes(e.pos, a.s.size() + b.s.size(), "a string"));
      return Value::Str(a.s + b.s);
    }
    if (a.IsPlainSeq() && b.IsPlainSeq() && a.kind == b.kind) {
      GRIDFEED_RETURN_IF_ERROR(
          CheckBytes(e.pos, (a.list->size() + b.list->size()) * sizeof(Value), "a list"));
      List l = *a.list;
      l.insert(l.end(), b.list->begin(), b.list->end());
      return a.is(Value::Kind::kTuple) ? Value::MakeTuple(std::move(l))
                                       : Value::MakeList(std::move(l));
    }
    return type_error();
  }
  if (op == "*") {
    if ((a.IsStr() || a.IsPlainSeq()) && b.IsIntLike()) return Repeat(a, b.AsInt(), e.pos);
    if ((b.IsStr() || b.IsPlainSeq()) && a.IsIntLike()) return Repeat(b, a.AsInt(), e.pos);
    return type_error();
  }
  if (op == "%" && a.IsStr()) {
    GRIDFEED_ASSIGN_OR_RETURN(std::string s, PercentFormat(a.s, b, e.pos));
    GRIDFEED_RETURN_IF_ERROR(CheckBytes(e.pos, s.size(), "a string"));
    return Value::Str(std::move(s));
  }
  return type_error();
}

Result<bool> Renderer::CompareOne(const std::string& op, const Value& a, const Value& b,
                                  size_t pos) {
  if (op == "==") return PyEquals(a, b);
  if (op == "!=") return !PyEquals(a, b);
  if (op == "in" || op == "not in") {
    bool found = false;
    switch (b.kind) {
      case Value::Kind::kUndefined:
        break;
      case Value::Kind::kStr:
        if (!a.IsStr()) {
          return RuntimeError("'in <string>' requires string as left operand, not " + TypeName(a),
                              pos);
        }
        found = b.s.find(a.s) != std::string::npos;
        break;
      case Value::Kind::kList:
      case Value::Kind::kTuple:
        for (const Value& v : *b.list) {
          if (PyEquals(a, v)) {
            found = true;
            break;
          }
        }
        break;
      case Value::Kind::kDict:
        found = a.IsStr() && DictFind(*b.dict, a.s) != nullptr;
        break;
      default:
        return RuntimeError("argument of type '" + TypeName(b) + "' is not iterable", pos);
    }
    return op == "in" ? found : !found;
  }
  if (a.IsUndefined()) return UndefinedError(a, pos);
  if (b.IsUndefined()) return UndefinedError(b, pos);
  auto c = PyCompare(a, b);
  if (!c.ok()) {
    return RuntimeError("'" + op + "' not supported between instances of '" + TypeName(a) +
                            "' and '" + TypeName(b) + "'",
                        pos);
  }
  if (*c == 2) return false;  // NaN
  if (op == "<") return *c < 0;
  if (op == "<=") return *c <= 0;
  if (op == ">") return *c > 0;
  return *c >= 0;
}

Result<Value> Renderer::Compare(const Expr& e) {
  GRIDFEED_ASSIGN_OR_RETURN(Value left, Eval(*e.args[0]));
  for (size_t k = 0; k < e.ops.size(); ++k) {
    GRIDFEED_ASSIGN_OR_RETURN(Value right, Eval(*e.args[k + 1]));
    GRIDFEED_ASSIGN_OR_RETURN(bool r, CompareOne(e.ops[k], left, right, e.args[k + 1]->pos));
    if (!r) return Value::Bool(false);
    left = std::move(right);
  }
  return Value::Bool(true);
}

}  // namespace gridfeed::order::sft::chat_template_internal::detail
