// Evaluation of a parsed chat template: scopes, `loop`, macros and call blocks, Jinja's sandboxed
// getattr/getitem and Undefined, Python's operators, comparisons and slices, the globals
// transformers gives (raise_exception, strftime_now) and jinja2's (namespace, range, dict), and
// the bounds on work, output, value sizes and recursion (internal contract:
// chat_template_ast.h).

#include <locale.h>

#include <algorithm>
#include <clocale>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gridfeed/order/sft/chat_template_ast.h"

namespace gridfeed::order::sft::chat_template_internal {

Status RuntimeError(const std::string& what, size_t pos) {
  return InvalidArgument("chat template: " + what + " at offset " + std::to_string(pos));
}

Result<List> Iterate(const Value& v, size_t pos) {
  switch (v.kind) {
    case Value::Kind::kUndefined:
      return List{};
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      return *v.list;
    case Value::Kind::kStr: {
      List out;
      for (char32_t c : Cps(v.s))
        out.push_back(Value::Str(FromCps(std::span<const char32_t>(&c, 1))));
      return out;
    }
    case Value::Kind::kDict: {
      List out;
      for (const auto& kv : *v.dict) out.push_back(Value::Str(kv.first));
      return out;
    }
    default:
      return RuntimeError("'" + TypeName(v) + "' object is not iterable", pos);
  }
}

Result<std::vector<std::optional<Value>>> BindArgs(const CallArgs& args,
                                                   const std::vector<std::string_view>& params,
                                                   size_t required, const std::string& what,
                                                   size_t pos) {
  std::vector<std::optional<Value>> out(params.size());
  if (args.pos.size() > params.size()) {
    return RuntimeError(what + " takes at most " + std::to_string(params.size()) + " arguments (" +
                            std::to_string(args.pos.size()) + " given)",
                        pos);
  }
  for (size_t k = 0; k < args.pos.size(); ++k) out[k] = args.pos[k];
  for (const auto& [key, v] : args.kw) {
    auto it = std::find(params.begin(), params.end(), key);
    if (it == params.end()) {
      return RuntimeError(what + " got an unexpected keyword argument '" + key + "'", pos);
    }
    auto& slot = out[static_cast<size_t>(it - params.begin())];
    if (slot) return RuntimeError(what + " got multiple values for argument '" + key + "'", pos);
    slot = v;
  }
  for (size_t k = 0; k < required; ++k) {
    if (!out[k]) {
      return RuntimeError(what + " missing required argument '" + std::string(params[k]) + "'",
                          pos);
    }
  }
  return out;
}

namespace {

Status UndefinedError(const Value& v, size_t pos) { return RuntimeError(v.s, pos); }

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

class Renderer final : public Evaluator {
 public:
  Renderer(const std::vector<Node>& nodes, std::map<std::string, Value> globals,
           const RenderEnv& env)
      : nodes_(nodes), env_(env) {
    AddGlobals(&globals);
    scopes_.push_back(std::move(globals));
  }

  Result<std::string> Run() {
    std::string out;
    out_ = &out;
    GRIDFEED_RETURN_IF_ERROR(Exec(nodes_));
    return out;
  }

  // Evaluator ----------------------------------------------------------------------------------

  Status Step(size_t pos, int64_t n) override {
    steps_ += n;
    if (steps_ > env_.limits.max_steps) {
      return RuntimeError("rendering took more than " + std::to_string(env_.limits.max_steps) +
                              " steps (the step limit)",
                          pos);
    }
    return Status::Ok();
  }

  Status CheckBytes(size_t pos, uint64_t bytes, const char* what) override {
    if (bytes > static_cast<uint64_t>(env_.limits.max_bytes)) {
      return RuntimeError(std::string(what) + " would need " + std::to_string(bytes) +
                              " bytes, over the limit of " + std::to_string(env_.limits.max_bytes) +
                              " bytes",
                          pos);
    }
    return Status::Ok();
  }

  Result<Value> ApplyFilter(const std::string& name, const Value& v, CallArgs& args,
                            size_t pos) override {
    GRIDFEED_RETURN_IF_ERROR(Step(pos, 1));
    return RunFilter(*this, name, v, args, pos);
  }

  Result<bool> ApplyTest(const std::string& name, const Value& v, CallArgs& args,
                         size_t pos) override {
    GRIDFEED_RETURN_IF_ERROR(Step(pos, 1));
    return RunTest(*this, name, v, args, pos);
  }

  Result<Value> Call(const Value& callee, CallArgs& args, size_t pos) override {
    if (callee.is(Value::Kind::kCallable)) {
      GRIDFEED_RETURN_IF_ERROR(Step(pos, 1));
      return callee.fn->fn(args, pos);
    }
    if (callee.IsUndefined()) return UndefinedError(callee, pos);
    return RuntimeError("'" + TypeName(callee) + "' object is not callable", pos);
  }

  Result<Value> GetAttr(const Value& obj, const std::string& name, size_t pos) override {
    using K = Value::Kind;
    switch (obj.kind) {
      case K::kUndefined:
        return UndefinedError(obj, pos);
      case K::kDict: {
        if (auto m = BindMethod(*this, obj, name)) return *m;
        if (const Value* v = DictFind(*obj.dict, name)) return *v;
        return Value::Undefined("'dict object' has no attribute '" + name + "'");
      }
      case K::kNamespace:
        if (const Value* v = DictFind(*obj.ns, name)) return *v;
        return Value::Undefined("'Namespace object' has no attribute '" + name + "'");
      default:
        if (auto m = BindMethod(*this, obj, name)) return *m;
        return Value::Undefined("'" + TypeName(obj) + " object' has no attribute '" + name + "'");
    }
  }

  Result<Value> GetItem(const Value& obj, const Value& key, size_t pos) override {
    using K = Value::Kind;
    if (obj.IsUndefined()) return UndefinedError(obj, pos);
    if (obj.is(K::kDict) && key.IsStr()) {
      if (const Value* v = DictFind(*obj.dict, key.s)) return *v;
    }
    if ((obj.IsPlainSeq() || obj.IsStr()) && key.IsIntLike()) {
      const int64_t n = obj.IsStr() ? static_cast<int64_t>(CpCount(obj.s))
                                    : static_cast<int64_t>(obj.list->size());
      int64_t k = key.AsInt();
      if (k < 0) k += n;
      if (k >= 0 && k < n) {
        if (!obj.IsStr()) return (*obj.list)[static_cast<size_t>(k)];
        const std::vector<char32_t> cps = Cps(obj.s);
        return Value::Str(FromCps(std::span<const char32_t>(&cps[static_cast<size_t>(k)], 1)));
      }
      return Value::Undefined("'" + TypeName(obj) + " object' has no element " +
                              std::to_string(key.AsInt()));
    }
    // jinja2 falls back to the attribute of that name.
    if (key.IsStr()) return GetAttr(obj, key.s, pos);
    auto r = Repr(key);
    return Value::Undefined("'" + TypeName(obj) + " object' has no element " +
                            (r.ok() ? *r : std::string("?")));
  }

 private:
  enum class Ctrl { kNone, kBreak, kContinue };

  struct DepthGuard {
    explicit DepthGuard(Renderer* r) : r_(r) { ++r_->depth_; }
    ~DepthGuard() { --r_->depth_; }
    Renderer* r_;
  };
  Status CheckDepth(size_t pos) {
    if (depth_ > 2 * env_.limits.max_depth) {
      return RuntimeError("rendering nested deeper than " +
                              std::to_string(2 * env_.limits.max_depth) + " (macro recursion?)",
                          pos);
    }
    return Status::Ok();
  }

  Status Emit(std::string_view s, size_t pos) {
    if (out_->size() + s.size() > static_cast<uint64_t>(env_.limits.max_bytes)) {
      return RuntimeError(
          "the output passed the limit of " + std::to_string(env_.limits.max_bytes) + " bytes",
          pos);
    }
    out_->append(s);
    return Status::Ok();
  }

  void AddGlobals(std::map<std::string, Value>* g) {
    auto put = [&](const char* name, auto fn) {
      if (!g->count(name)) (*g)[name] = Value::MakeCallable(name, fn);
    };
    put("raise_exception", [](CallArgs& a, size_t pos) -> Result<Value> {
      std::string msg;
      if (!a.pos.empty()) {
        auto s = ToStr(a.pos[0]);
        msg = s.ok() ? *s : std::string("?");
      }
      return RuntimeError("raise_exception: " + msg, pos);
    });
    const std::tm now = env_.now;
    put("strftime_now", [now](CallArgs& a, size_t pos) -> Result<Value> {
      GRIDFEED_ASSIGN_OR_RETURN(auto b, BindArgs(a, {"format"}, 1, "strftime_now()", pos));
      if (!b[0]->IsStr()) return RuntimeError("strftime_now() argument must be str", pos);
      const std::string& fmt = b[0]->s;
      for (size_t k = 0; k + 1 < fmt.size(); ++k) {
        if (fmt[k] == '%') {
          const char c = fmt[k + 1];
          if (std::string_view("aAbBcdHIjmMpSUwWxXyYZz%GuVeDFTRrnthCgsk").find(c) ==
              std::string_view::npos) {
            return RuntimeError(std::string("strftime_now: directive %") + c + " is not supported",
                                pos);
          }
          ++k;
        }
      }
      static locale_t c_locale = newlocale(LC_ALL_MASK, "C", static_cast<locale_t>(0));
      std::string out(fmt.size() * 8 + 64, '\0');
      const size_t n = strftime_l(out.data(), out.size(), fmt.c_str(), &now, c_locale);
      if (n == 0 && !fmt.empty()) return RuntimeError("strftime_now: result too long", pos);
      out.resize(n);
      return Value::Str(std::move(out));
    });
    put("namespace", [](CallArgs& a, size_t pos) -> Result<Value> {
      Dict d;
      auto set = [&](const std::string& k, const Value& v) {
        for (auto& kv : d) {
          if (kv.first == k) {
            kv.second = v;
            return;
          }
        }
        d.emplace_back(k, v);
      };
      if (a.pos.size() > 1)
        return RuntimeError("namespace() takes at most one positional argument", pos);
      if (!a.pos.empty()) {
        if (!a.pos[0].is(Value::Kind::kDict)) {
          return RuntimeError("namespace() positional argument must be a dict", pos);
        }
        for (const auto& kv : *a.pos[0].dict) set(kv.first, kv.second);
      }
      for (const auto& kv : a.kw) set(kv.first, kv.second);
      return Value::MakeNamespace(std::move(d));
    });
    put("dict", [](CallArgs& a, size_t pos) -> Result<Value> {
      if (!a.pos.empty())
        return RuntimeError("dict() with positional arguments is not supported", pos);
      Dict d;
      for (const auto& kv : a.kw) d.emplace_back(kv.first, kv.second);
      return Value::MakeDict(std::move(d));
    });
    put("range", [this](CallArgs& a, size_t pos) -> Result<Value> {
      if (!a.kw.empty() || a.pos.empty() || a.pos.size() > 3) {
        return RuntimeError("range() takes 1 to 3 positional arguments", pos);
      }
      int64_t v[3] = {0, 0, 1};
      for (const Value& x : a.pos) {
        if (!x.IsIntLike()) {
          return RuntimeError("'" + TypeName(x) + "' object cannot be interpreted as an integer",
                              pos);
        }
      }
      if (a.pos.size() == 1) {
        v[1] = a.pos[0].AsInt();
      } else {
        v[0] = a.pos[0].AsInt();
        v[1] = a.pos[1].AsInt();
        if (a.pos.size() == 3) v[2] = a.pos[2].AsInt();
      }
      if (v[2] == 0) return RuntimeError("range() arg 3 must not be zero", pos);
      // The sandbox's MAX_RANGE.
      const long double len = v[2] > 0 ? std::ceil((static_cast<long double>(v[1]) - v[0]) / v[2])
                                       : std::ceil((static_cast<long double>(v[0]) - v[1]) /
                                                   -static_cast<long double>(v[2]));
      if (len > 100000) {
        return RuntimeError(
            "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).", pos);
      }
      List out;
      for (int64_t k = v[0]; v[2] > 0 ? k < v[1] : k > v[1]; k += v[2])
        out.push_back(Value::Int(k));
      GRIDFEED_RETURN_IF_ERROR(Step(pos, static_cast<int64_t>(out.size())));
      return Value::MakeList(std::move(out), Value::Flavor::kView);
    });
    for (const char* name : {"lipsum", "cycler", "joiner"}) {
      const std::string n = name;
      put(name, [n](CallArgs&, size_t pos) -> Result<Value> {
        return RuntimeError("the global '" + n + "' is not supported", pos);
      });
    }
  }

  // Statements ---------------------------------------------------------------------------------

  Status Exec(const std::vector<Node>& nodes) {
    for (const Node& n : nodes) {
      GRIDFEED_RETURN_IF_ERROR(Exec(n));
      if (ctrl_ != Ctrl::kNone) break;
    }
    return Status::Ok();
  }

  Status Exec(const Node& n) {
    DepthGuard guard(this);
    GRIDFEED_RETURN_IF_ERROR(CheckDepth(n.pos));
    GRIDFEED_RETURN_IF_ERROR(Step(n.pos, 1));
    switch (n.kind) {
      case Node::Kind::kText:
        return Emit(n.text, n.pos);
      case Node::Kind::kOutput: {
        GRIDFEED_ASSIGN_OR_RETURN(Value v, Eval(*n.expr));
        GRIDFEED_ASSIGN_OR_RETURN(std::string s, Stringify(v, n.pos));
        return Emit(s, n.pos);
      }
      case Node::Kind::kSet:
        return Set(n);
      case Node::Kind::kSetBlock: {
        GRIDFEED_ASSIGN_OR_RETURN(Value v, Capture(n.branches[0].second, n.pos));
        if (n.expr) {
          block_values_.push_back(v);
          auto r = Eval(*n.expr);
          block_values_.pop_back();
          GRIDFEED_ASSIGN_OR_RETURN(v, std::move(r));
        }
        scopes_.back()[n.targets[0]] = std::move(v);
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
      case Node::Kind::kMacro:
        scopes_.back()[n.text] = MakeMacro(n, nullptr);
        return Status::Ok();
      case Node::Kind::kCallBlock: {
        // The body becomes `caller`, seeing the scopes of the call site.
        auto snapshot = std::make_shared<std::vector<std::map<std::string, Value>>>(scopes_);
        Value caller = MakeMacro(n, snapshot);
        const Expr& call = *n.expr;
        GRIDFEED_ASSIGN_OR_RETURN(Value callee, Eval(*call.args[0]));
        GRIDFEED_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(call, 1));
        args.kw.emplace_back("caller", caller);
        GRIDFEED_ASSIGN_OR_RETURN(Value r, Call(callee, args, call.pos));
        GRIDFEED_ASSIGN_OR_RETURN(std::string s, Stringify(r, n.pos));
        return Emit(s, n.pos);
      }
      case Node::Kind::kFilterBlock: {
        GRIDFEED_ASSIGN_OR_RETURN(Value body, Capture(n.branches[0].second, n.pos));
        block_values_.push_back(body);
        auto r = Eval(*n.expr);
        block_values_.pop_back();
        GRIDFEED_ASSIGN_OR_RETURN(Value v, std::move(r));
        GRIDFEED_ASSIGN_OR_RETURN(std::string s, Stringify(v, n.pos));
        return Emit(s, n.pos);
      }
      case Node::Kind::kGeneration:
        return Exec(n.branches[0].second);
      case Node::Kind::kBreak:
        ctrl_ = Ctrl::kBreak;
        return Status::Ok();
      case Node::Kind::kContinue:
        ctrl_ = Ctrl::kContinue;
        return Status::Ok();
    }
    return Status::Ok();
  }

  // Renders `body` into a string of its own.
  Result<Value> Capture(const std::vector<Node>& body, size_t pos) {
    (void)pos;
    std::string buf;
    std::string* saved = out_;
    out_ = &buf;
    Status st = Exec(body);
    out_ = saved;
    GRIDFEED_RETURN_IF_ERROR(st);
    return Value::Str(std::move(buf));
  }

  Status Bind(const std::vector<std::string>& targets, const Value& v, size_t pos,
              std::map<std::string, Value>* scope) {
    if (targets.size() == 1) {
      (*scope)[targets[0]] = v;
      return Status::Ok();
    }
    if (v.IsUndefined()) return UndefinedError(v, pos);
    GRIDFEED_ASSIGN_OR_RETURN(List items, Iterate(v, pos));
    if (items.size() != targets.size()) {
      return RuntimeError(
          items.size() > targets.size()
              ? "too many values to unpack (expected " + std::to_string(targets.size()) + ")"
              : "not enough values to unpack (expected " + std::to_string(targets.size()) +
                    ", got " + std::to_string(items.size()) + ")",
          pos);
    }
    for (size_t k = 0; k < targets.size(); ++k) (*scope)[targets[k]] = items[k];
    return Status::Ok();
  }

  Status Set(const Node& n) {
    GRIDFEED_ASSIGN_OR_RETURN(Value v, Eval(*n.expr));
    if (!n.text.empty()) {  // ns.attr
      Value ns = Lookup(n.targets[0]);
      if (!ns.is(Value::Kind::kNamespace)) {
        return RuntimeError("cannot assign attribute on non-namespace object", n.pos);
      }
      for (auto& kv : *ns.ns) {
        if (kv.first == n.text) {
          kv.second = std::move(v);
          return Status::Ok();
        }
      }
      ns.ns->emplace_back(n.text, std::move(v));
      return Status::Ok();
    }
    return Bind(n.targets, v, n.pos, &scopes_.back());
  }

  Status For(const Node& n) {
    GRIDFEED_ASSIGN_OR_RETURN(Value seq, Eval(*n.expr));
    GRIDFEED_ASSIGN_OR_RETURN(List items, Iterate(seq, n.expr->pos));
    if (n.cond) {
      List kept;
      for (const Value& item : items) {
        GRIDFEED_RETURN_IF_ERROR(Step(n.pos, 1));
        scopes_.emplace_back();
        Status st = Bind(n.targets, item, n.pos, &scopes_.back());
        Result<Value> c = st.ok() ? Eval(*n.cond) : Result<Value>(st);
        scopes_.pop_back();
        GRIDFEED_RETURN_IF_ERROR(c.status());
        if (Truthy(*c)) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) return Exec(n.else_body);
    const int64_t len = static_cast<int64_t>(items.size());
    auto shared_items = std::make_shared<const List>(std::move(items));
    for (int64_t k = 0; k < len; ++k) {
      GRIDFEED_RETURN_IF_ERROR(Step(n.pos, 1));
      const List& its = *shared_items;
      Dict loop = {{"index", Value::Int(k + 1)},      {"index0", Value::Int(k)},
                   {"revindex", Value::Int(len - k)}, {"revindex0", Value::Int(len - k - 1)},
                   {"first", Value::Bool(k == 0)},    {"last", Value::Bool(k == len - 1)},
                   {"length", Value::Int(len)},       {"depth", Value::Int(1)},
                   {"depth0", Value::Int(0)}};
      if (k > 0) loop.emplace_back("previtem", its[static_cast<size_t>(k - 1)]);
      if (k + 1 < len) loop.emplace_back("nextitem", its[static_cast<size_t>(k + 1)]);
      loop.emplace_back(
          "cycle", Value::MakeCallable("loop.cycle", [k](CallArgs& a, size_t pos) -> Result<Value> {
            if (a.pos.empty()) return RuntimeError("no items for cycling given", pos);
            return a.pos[static_cast<size_t>(k) % a.pos.size()];
          }));
      scopes_.emplace_back();
      Status st = Bind(n.targets, its[static_cast<size_t>(k)], n.pos, &scopes_.back());
      if (st.ok()) {
        scopes_.back()["loop"] = Value::MakeDict(std::move(loop));
        st = Exec(n.branches[0].second);
      }
      scopes_.pop_back();
      GRIDFEED_RETURN_IF_ERROR(st);
      if (ctrl_ == Ctrl::kBreak) {
        ctrl_ = Ctrl::kNone;
        break;
      }
      ctrl_ = Ctrl::kNone;
    }
    return Status::Ok();
  }

  using Scopes = std::vector<std::map<std::string, Value>>;

  // A macro (snapshot null) or a call block's `caller` (the scopes of its call site).
  Value MakeMacro(const Node& n, std::shared_ptr<Scopes> snapshot) {
    const Node* node = &n;
    const std::string name = n.kind == Node::Kind::kMacro ? n.text : "caller";
    return Value::MakeCallable(
        name, [this, node, snapshot, name](CallArgs& a, size_t pos) -> Result<Value> {
          std::map<std::string, Value> frame;
          const auto& params = node->targets;
          if (a.pos.size() > params.size()) {
            return RuntimeError("macro '" + name + "' takes not more than " +
                                    std::to_string(params.size()) + " argument(s)",
                                pos);
          }
          std::vector<bool> given(params.size(), false);
          for (size_t k = 0; k < a.pos.size(); ++k) {
            frame[params[k]] = a.pos[k];
            given[k] = true;
          }
          bool caller_given = false;
          for (const auto& [key, v] : a.kw) {
            auto it = std::find(params.begin(), params.end(), key);
            if (it == params.end()) {
              if (key == "caller") {
                frame["caller"] = v;
                caller_given = true;
                continue;
              }
              return RuntimeError("macro '" + name + "' takes no keyword argument '" + key + "'",
                                  pos);
            }
            frame[key] = v;
            given[static_cast<size_t>(it - params.begin())] = true;
          }
          (void)caller_given;
          Scopes saved = std::move(scopes_);
          if (snapshot) {
            scopes_ = *snapshot;
          } else {
            scopes_ = {saved[0]};
          }
          scopes_.push_back(std::move(frame));
          Status st = Status::Ok();
          for (size_t k = 0; k < params.size() && st.ok(); ++k) {
            if (given[k]) continue;
            if (node->defaults[k]) {
              auto d = Eval(*node->defaults[k]);
              if (!d.ok()) {
                st = d.status();
              } else {
                scopes_.back()[params[k]] = std::move(d).value();
              }
            } else {
              scopes_.back()[params[k]] =
                  Value::Undefined("parameter '" + params[k] + "' was not provided");
            }
          }
          Result<Value> body = st.ok() ? Capture(node->branches[0].second, pos) : Result<Value>(st);
          scopes_ = std::move(saved);
          return body;
        });
  }

  Value Lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(name);
      if (f != it->end()) return f->second;
    }
    return Value::Undefined("'" + name + "' is undefined");
  }

  Result<std::string> Stringify(const Value& v, size_t pos) {
    auto s = ToStr(v);
    if (!s.ok()) return RuntimeError(s.status().message(), pos);
    return s;
  }

  // Expressions --------------------------------------------------------------------------------

  Result<CallArgs> EvalArgs(const Expr& e, size_t first) {
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

  Result<Value> Eval(const Expr& e) {
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

  static Status MarkupRefused(size_t pos) {
    return RuntimeError(
        "combining a Markup string (from |safe or |escape) with other values is not supported",
        pos);
  }

  Result<Value> Slice(const Expr& e) {
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
    GRIDFEED_RETURN_IF_ERROR(Step(e.pos, static_cast<int64_t>(out_cps.size() + out_list.size())));
    if (str) return Value::Str(FromCps(out_cps));
    return obj.is(Value::Kind::kTuple) ? Value::MakeTuple(std::move(out_list))
                                       : Value::MakeList(std::move(out_list));
  }

  Result<Value> Repeat(const Value& seq, int64_t times, size_t pos) {
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

  Result<Value> Binary(const Expr& e) {
    GRIDFEED_ASSIGN_OR_RETURN(Value a, Eval(*e.args[0]));
    GRIDFEED_ASSIGN_OR_RETURN(Value b, Eval(*e.args[1]));
    const std::string& op = e.name;
    if (a.IsUndefined()) return UndefinedError(a, e.pos);
    if (b.IsUndefined()) return UndefinedError(b, e.pos);
    if (a.markup || b.markup) return MarkupRefused(e.pos);
    auto type_error = [&]() {
      return RuntimeError("unsupported operand type(s) for " + op + ": '" + TypeName(a) +
                              "' and '" + TypeName(b) + "'",
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
        if (x == INT64_MIN && y == -1)
          return RuntimeError("integer overflow (beyond int64)", e.pos);
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

  Result<bool> CompareOne(const std::string& op, const Value& a, const Value& b, size_t pos) {
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

  Result<Value> Compare(const Expr& e) {
    GRIDFEED_ASSIGN_OR_RETURN(Value left, Eval(*e.args[0]));
    for (size_t k = 0; k < e.ops.size(); ++k) {
      GRIDFEED_ASSIGN_OR_RETURN(Value right, Eval(*e.args[k + 1]));
      GRIDFEED_ASSIGN_OR_RETURN(bool r, CompareOne(e.ops[k], left, right, e.args[k + 1]->pos));
      if (!r) return Value::Bool(false);
      left = std::move(right);
    }
    return Value::Bool(true);
  }

  const std::vector<Node>& nodes_;
  const RenderEnv& env_;
  Scopes scopes_;
  std::string* out_ = nullptr;
  std::vector<Value> block_values_;
  Ctrl ctrl_ = Ctrl::kNone;
  int depth_ = 0;
  int64_t steps_ = 0;
};

}  // namespace

Result<std::string> RenderTemplate(const std::vector<Node>& nodes,
                                   std::map<std::string, Value> globals, const RenderEnv& env) {
  return Renderer(nodes, std::move(globals), env).Run();
}

}  // namespace gridfeed::order::sft::chat_template_internal
