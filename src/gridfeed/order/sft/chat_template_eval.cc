// Chat-template evaluation, core: the Renderer's services to filters and methods (steps, bounds,
// calls, sandboxed getattr/getitem), scopes and output, the globals (raise_exception,
// strftime_now, namespace, range, dict) and RenderTemplate (contract: chat_template_ast.h).

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
#include "gridfeed/order/sft/chat_template_eval_internal.h"

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

namespace detail {

Renderer::Renderer(const std::vector<Node>& nodes, std::map<std::string, Value> globals,
                   const RenderEnv& env)
    : nodes_(nodes), env_(env) {
  AddGlobals(&globals);
  scopes_.push_back(std::move(globals));
}

Result<std::string> Renderer::Run() {
  std::string out;
  out_ = &out;
  GRIDFEED_RETURN_IF_ERROR(Exec(nodes_));
  return out;
}

// Evaluator ----------------------------------------------------------------------------------

Status Renderer::Step(size_t pos, int64_t n) {
  steps_ += n;
  if (steps_ > env_.limits.max_steps) {
    return RuntimeError("rendering took more than " + std::to_string(env_.limits.max_steps) +
                            " steps (the step limit)",
                        pos);
  }
  return Status::Ok();
}

Status Renderer::CheckBytes(size_t pos, uint64_t bytes, const char* what) {
  if (bytes > static_cast<uint64_t>(env_.limits.max_bytes)) {
    return RuntimeError(std::string(what) + " would need " + std::to_string(bytes) +
                            " bytes, over the limit of " + std::to_string(env_.limits.max_bytes) +
                            " bytes",
                        pos);
  }
  return Status::Ok();
}

Result<Value> Renderer::ApplyFilter(const std::string& name, const Value& v, CallArgs& args,
                                    size_t pos) {
  GRIDFEED_RETURN_IF_ERROR(Step(pos, 1));
  return RunFilter(*this, name, v, args, pos);
}

Result<bool> Renderer::ApplyTest(const std::string& name, const Value& v, CallArgs& args,
                                 size_t pos) {
  GRIDFEED_RETURN_IF_ERROR(Step(pos, 1));
  return RunTest(*this, name, v, args, pos);
}

Result<Value> Renderer::Call(const Value& callee, CallArgs& args, size_t pos) {
  if (callee.is(Value::Kind::kCallable)) {
    GRIDFEED_RETURN_IF_ERROR(Step(pos, 1));
    return callee.fn->fn(args, pos);
  }
  if (callee.IsUndefined()) return UndefinedError(callee, pos);
  return RuntimeError("'" + TypeName(callee) + "' object is not callable", pos);
}

Result<Value> Renderer::GetAttr(const Value& obj, const std::string& name, size_t pos) {
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

Result<Value> Renderer::GetItem(const Value& obj, const Value& key, size_t pos) {
  using K = Value::Kind;
  if (obj.IsUndefined()) return UndefinedError(obj, pos);
  if (obj.is(K::kDict) && key.IsStr()) {
    if (const Value* v = DictFind(*obj.dict, key.s)) return *v;
  }
  if ((obj.IsPlainSeq() || obj.IsStr()) && key.IsIntLike()) {
    const int64_t n =
        obj.IsStr() ? static_cast<int64_t>(CpCount(obj.s)) : static_cast<int64_t>(obj.list->size());
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

Status Renderer::CheckDepth(size_t pos) {
  if (depth_ > 2 * env_.limits.max_depth) {
    return RuntimeError("rendering nested deeper than " +
                            std::to_string(2 * env_.limits.max_depth) + " (macro recursion?)",
                        pos);
  }
  return Status::Ok();
}

Status Renderer::Emit(std::string_view s, size_t pos) {
  if (out_->size() + s.size() > static_cast<uint64_t>(env_.limits.max_bytes)) {
    return RuntimeError(
        "the output passed the limit of " + std::to_string(env_.limits.max_bytes) + " bytes", pos);
  }
  out_->append(s);
  return Status::Ok();
}

void Renderer::AddGlobals(std::map<std::string, Value>* g) {
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
    const long double len =
        v[2] > 0
            ? std::ceil((static_cast<long double>(v[1]) - v[0]) / v[2])
            : std::ceil((static_cast<long double>(v[0]) - v[1]) / -static_cast<long double>(v[2]));
    if (len > 100000) {
      return RuntimeError(
          "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).", pos);
    }
    List out;
    for (int64_t k = v[0]; v[2] > 0 ? k < v[1] : k > v[1]; k += v[2]) out.push_back(Value::Int(k));
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

Value Renderer::Lookup(const std::string& name) const {
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
    auto f = it->find(name);
    if (f != it->end()) return f->second;
  }
  return Value::Undefined("'" + name + "' is undefined");
}

Result<std::string> Renderer::Stringify(const Value& v, size_t pos) {
  auto s = ToStr(v);
  if (!s.ok()) return RuntimeError(s.status().message(), pos);
  return s;
}

}  // namespace detail

Result<std::string> RenderTemplate(const std::vector<Node>& nodes,
                                   std::map<std::string, Value> globals, const RenderEnv& env) {
  return detail::Renderer(nodes, std::move(globals), env).Run();
}

}  // namespace gridfeed::order::sft::chat_template_internal
