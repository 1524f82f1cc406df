// Internal to the chat-template parser: the ExprParser (Jinja's expression grammar, defined in
// chat_template_parser_expr.cc) that the statement parser (chat_template_parser_stmt.cc) runs over
// each tag's tokens.
#pragma once

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gridfeed/order/sft/chat_template_ast.h"

namespace gridfeed::order::sft::chat_template_internal::detail {

inline bool Contains(const std::vector<std::string_view>& v, std::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// Jinja's expression grammar (jinja2/parser.py) over one tag's tokens.
class ExprParser {
 public:
  ExprParser(const std::vector<Token>& t, int max_depth) : t_(t), max_depth_(max_depth) {}

  const Token& Cur() const { return t_[k_]; }
  const Token& Peek(size_t ahead = 1) const { return t_[std::min(k_ + ahead, t_.size() - 1)]; }
  bool AtEnd() const { return Cur().type == Token::Type::kEnd; }
  bool IsOp(std::string_view s) const { return Cur().type == Token::Type::kOp && Cur().s == s; }
  bool IsName(std::string_view s) const { return Cur().type == Token::Type::kName && Cur().s == s; }
  void Next() {
    if (!AtEnd()) ++k_;
  }
  Status Expect(std::string_view op);
  Status ExpectEnd();
  Result<std::string> ExpectName(const char* what);
  static std::string Describe(const Token& t);

  // parse_tuple: an expression, or a tuple when commas follow (the statements' values).
  Result<ExprPtr> Tuple(bool with_condexpr = true, bool explicit_parens = false);
  Result<ExprPtr> Expression();
  Result<ExprPtr> Or();

  Result<ExprPtr> FilterChain(ExprPtr e) { return FilterExpr(std::move(e), /*start_inline=*/true); }

  Result<std::vector<ExprPtr>> CallArgsInto(Expr* node) { return Args(node); }

  Status Enter();
  Result<ExprPtr> Finish(std::unique_ptr<Expr> node);

  static std::unique_ptr<Expr> Make(Expr::Kind kind, size_t pos) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = pos;
    return e;
  }

 private:
  using Level = Result<ExprPtr> (ExprParser::*)();

  bool TupleEnds(bool explicit_parens) const;
  Result<ExprPtr> CondExpr();
  Result<ExprPtr> And();
  Result<ExprPtr> Not();
  Result<ExprPtr> Compare();
  Result<ExprPtr> Binary(std::initializer_list<const char*> ops, Level next);
  // Jinja's precedence: + - bind looser than ~, which binds looser than * / // %, then **.
  Result<ExprPtr> Math1();
  Result<ExprPtr> Concat();
  Result<ExprPtr> Math2();
  Result<ExprPtr> Pow();
  Result<ExprPtr> UnaryWithFilter();
  Result<ExprPtr> Unary(bool with_filter);
  Result<ExprPtr> Primary();
  Result<ExprPtr> Postfix(ExprPtr e);
  Result<ExprPtr> Subscript(ExprPtr e);
  // Call arguments after `(` into node->args (appended) and node->kwargs.
  Result<std::vector<ExprPtr>> Args(Expr* node);
  Result<ExprPtr> Call(ExprPtr callee);
  Result<std::string> DottedName();
  Result<ExprPtr> FilterExpr(ExprPtr e, bool start_inline);

  const std::vector<Token>& t_;
  size_t k_ = 0;
  int max_depth_;
  int nest_ = 0;
};

}  // namespace gridfeed::order::sft::chat_template_internal::detail
