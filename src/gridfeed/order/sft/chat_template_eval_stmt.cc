// Evaluation of a parsed chat template, the statements: output, set (names, unpacking, namespace
// attributes, blocks), if, for with `loop`, break/continue, macros, call and filter blocks
// (internal contract: chat_template_ast.h and chat_template_eval_internal.h).

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gridfeed/order/sft/chat_template_ast.h"
#include "gridfeed/order/sft/chat_template_eval_internal.h"

namespace gridfeed::order::sft::chat_template_internal::detail {

Status Renderer::Exec(const std::vector<Node>& nodes) {
  for (const Node& n : nodes) {
    GRIDFEED_RETURN_IF_ERROR(Exec(n));
    if (ctrl_ != Ctrl::kNone) break;
  }
  return Status::Ok();
}

Status Renderer::Exec(const Node& n) {
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
Result<Value> Renderer::Capture(const std::vector<Node>& body, size_t pos) {
  (void)pos;
  std::string buf;
  std::string* saved = out_;
  out_ = &buf;
  Status st = Exec(body);
  out_ = saved;
  GRIDFEED_RETURN_IF_ERROR(st);
  return Value::Str(std::move(buf));
}

Status Renderer::Bind(const std::vector<std::string>& targets, const Value& v, size_t pos,
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
            : "not enough values to unpack (expected " + std::to_string(targets.size()) + ", got " +
                  std::to_string(items.size()) + ")",
        pos);
  }
  for (size_t k = 0; k < targets.size(); ++k) (*scope)[targets[k]] = items[k];
  return Status::Ok();
}

Status Renderer::Set(const Node& n) {
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

Status Renderer::For(const Node& n) {
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

// A macro (snapshot null) or a call block's `caller` (the scopes of its call site).
Value Renderer::MakeMacro(const Node& n, std::shared_ptr<Scopes> snapshot) {
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

}  // namespace gridfeed::order::sft::chat_template_internal::detail
