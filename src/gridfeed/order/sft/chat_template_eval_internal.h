// Internal to the chat-template evaluator: the Renderer that chat_template_eval.cc (services,
// globals, entry point), chat_template_eval_stmt.cc (statements, blocks, macros) and
// chat_template_eval_expr.cc (expressions, operators) define together.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gridfeed/order/sft/chat_template_ast.h"

namespace gridfeed::order::sft::chat_template_internal::detail {

// Using an Undefined where jinja2 raises: its message says what was missing.
inline Status UndefinedError(const Value& v, size_t pos) { return RuntimeError(v.s, pos); }

// One render of a parsed template: scopes, `loop`, macros and call blocks, and the bounds on
// work, output, value sizes and recursion.
class Renderer final : public Evaluator {
 public:
  Renderer(const std::vector<Node>& nodes, std::map<std::string, Value> globals,
           const RenderEnv& env);

  Result<std::string> Run();

  // Evaluator ----------------------------------------------------------------------------------

  Status Step(size_t pos, int64_t n) override;
  Status CheckBytes(size_t pos, uint64_t bytes, const char* what) override;
  Result<Value> ApplyFilter(const std::string& name, const Value& v, CallArgs& args,
                            size_t pos) override;
  Result<bool> ApplyTest(const std::string& name, const Value& v, CallArgs& args,
                         size_t pos) override;
  Result<Value> Call(const Value& callee, CallArgs& args, size_t pos) override;
  Result<Value> GetAttr(const Value& obj, const std::string& name, size_t pos) override;
  Result<Value> GetItem(const Value& obj, const Value& key, size_t pos) override;

 private:
  enum class Ctrl { kNone, kBreak, kContinue };
  using Scopes = std::vector<std::map<std::string, Value>>;

  struct DepthGuard {
    explicit DepthGuard(Renderer* r) : r_(r) { ++r_->depth_; }
    ~DepthGuard() { --r_->depth_; }
    Renderer* r_;
  };

  // chat_template_eval.cc
  Status CheckDepth(size_t pos);
  Status Emit(std::string_view s, size_t pos);
  void AddGlobals(std::map<std::string, Value>* g);
  Value Lookup(const std::string& name) const;
  Result<std::string> Stringify(const Value& v, size_t pos);

  // Statements (chat_template_eval_stmt.cc) ----------------------------------------------------

  Status Exec(const std::vector<Node>& nodes);
  Status Exec(const Node& n);
  // Renders `body` into a string of its own.
  Result<Value> Capture(const std::vector<Node>& body, size_t pos);
  Status Bind(const std::vector<std::string>& targets, const Value& v, size_t pos,
              std::map<std::string, Value>* scope);
  Status Set(const Node& n);
  Status For(const Node& n);
  // A macro (snapshot null) or a call block's `caller` (the scopes of its call site).
  Value MakeMacro(const Node& n, std::shared_ptr<Scopes> snapshot);

  // Expressions (chat_template_eval_expr.cc) ---------------------------------------------------

  Result<CallArgs> EvalArgs(const Expr& e, size_t first);
  Result<Value> Eval(const Expr& e);
  static Status MarkupRefused(size_t pos);
  Result<Value> Slice(const Expr& e);
  Result<Value> Repeat(const Value& seq, int64_t times, size_t pos);
  Result<Value> Binary(const Expr& e);
  Result<bool> CompareOne(const std::string& op, const Value& a, const Value& b, size_t pos);
  Result<Value> Compare(const Expr& e);

  const std::vector<Node>& nodes_;
  const RenderEnv& env_;
  Scopes scopes_;
  std::string* out_ = nullptr;
  std::vector<Value> block_values_;
  Ctrl ctrl_ = Ctrl::kNone;
  int depth_ = 0;
  int64_t steps_ = 0;
};

}  // namespace gridfeed::order::sft::chat_template_internal::detail
