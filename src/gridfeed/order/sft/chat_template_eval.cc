// Evaluation of a parsed chat template: scopes, `loop`, Jinja's getattr/getitem and Undefined,
// Python's operators, comparisons, slices, the filters, tests and str methods of the subset
// (internal contract: chat_template_ast.h).

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gridfeed/order/sft/chat_template_ast.h"

namespace gridfeed::order::sft::chat_template_internal {
namespace {

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

}  // namespace

Result<std::string> RenderTemplate(const std::vector<Node>& nodes,
                                   std::map<std::string, Value> globals) {
  return Renderer(nodes, std::move(globals)).Run();
}

}  // namespace gridfeed::order::sft::chat_template_internal
