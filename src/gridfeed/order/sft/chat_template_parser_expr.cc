// The chat-template parser, expressions: token helpers, tuples, and Jinja's operator precedence
// (conditional, or, and, not, comparisons, + - ~ * / // % **, unary signs) with the bound on
// nesting (internal contract: chat_template_ast.h and chat_template_parser_internal.h).

#include <algorithm>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "gridfeed/order/sft/chat_template_ast.h"
#include "gridfeed/order/sft/chat_template_parser_internal.h"

namespace gridfeed::order::sft::chat_template_internal::detail {

Status ExprParser::Expect(std::string_view op) {
  if (!IsOp(op)) {
    return SyntaxError("expected '" + std::string(op) + "', got '" + Describe(Cur()) + "'",
                       Cur().pos);
  }
  Next();
  return Status::Ok();
}
Status ExprParser::ExpectEnd() {
  if (!AtEnd()) return SyntaxError("unexpected '" + Describe(Cur()) + "'", Cur().pos);
  return Status::Ok();
}
Result<std::string> ExprParser::ExpectName(const char* what) {
  if (Cur().type != Token::Type::kName) {
    return SyntaxError(std::string("expected ") + what + ", got '" + Describe(Cur()) + "'",
                       Cur().pos);
  }
  std::string n = Cur().s;
  Next();
  return n;
}
std::string ExprParser::Describe(const Token& t) {
  switch (t.type) {
    case Token::Type::kInt:
      return std::to_string(t.i);
    case Token::Type::kFloat:
      return FloatRepr(t.f);
    case Token::Type::kStr:
      return "string literal";
    case Token::Type::kEnd:
      return "end of tag";
    default:
      return t.s;
  }
}

// parse_tuple: an expression, or a tuple when commas follow (the statements' values).
Result<ExprPtr> ExprParser::Tuple(bool with_condexpr, bool explicit_parens) {
  const size_t pos = Cur().pos;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) GRIDFEED_RETURN_IF_ERROR(Expect(","));
    if (TupleEnds(explicit_parens)) break;
    ExprPtr e;
    if (with_condexpr) {
      GRIDFEED_ASSIGN_OR_RETURN(e, Expression());
    } else {
      GRIDFEED_ASSIGN_OR_RETURN(e, Or());
    }
    items.push_back(std::move(e));
    if (IsOp(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parens) {
      return SyntaxError("expected an expression, got '" + Describe(Cur()) + "'", Cur().pos);
    }
  }
  auto node = Make(Expr::Kind::kTuple, pos);
  node->args = std::move(items);
  return Finish(std::move(node));
}

Result<ExprPtr> ExprParser::Expression() {
  GRIDFEED_RETURN_IF_ERROR(Enter());
  auto r = CondExpr();
  --nest_;
  return r;
}

Result<ExprPtr> ExprParser::Or() {
  GRIDFEED_ASSIGN_OR_RETURN(ExprPtr e, And());
  while (IsName("or")) {
    auto node = Make(Expr::Kind::kOr, Cur().pos);
    Next();
    GRIDFEED_ASSIGN_OR_RETURN(ExprPtr r, And());
    node->args.push_back(std::move(e));
    node->args.push_back(std::move(r));
    GRIDFEED_ASSIGN_OR_RETURN(e, Finish(std::move(node)));
  }
  return e;
}

Status ExprParser::Enter() {
  if (++nest_ > max_depth_) {
    return SyntaxError("expression nested deeper than " + std::to_string(max_depth_), Cur().pos);
  }
  return Status::Ok();
}

Result<ExprPtr> ExprParser::Finish(std::unique_ptr<Expr> node) {
  int d = 0;
  for (const auto& a : node->args) {
    if (a) d = std::max(d, a->depth);
  }
  for (const auto& kv : node->kwargs) d = std::max(d, kv.second->depth);
  node->depth = d + 1;
  if (node->depth > max_depth_) {
    return SyntaxError("expression nested deeper than " + std::to_string(max_depth_), node->pos);
  }
  return ExprPtr(std::move(node));
}

bool ExprParser::TupleEnds(bool explicit_parens) const {
  if (AtEnd()) return true;
  if (explicit_parens && IsOp(")")) return true;
  if (IsOp("=")) return true;  // set targets
  return Cur().type == Token::Type::kName && (Cur().s == "in" || Cur().s == "recursive");
}

Result<ExprPtr> ExprParser::CondExpr() {
  GRIDFEED_ASSIGN_OR_RETURN(ExprPtr e, Or());
  while (IsName("if")) {
    auto node = Make(Expr::Kind::kCond, Cur().pos);
    Next();
    GRIDFEED_ASSIGN_OR_RETURN(ExprPtr cond, Or());
    ExprPtr other;
    if (IsName("else")) {
      Next();
      GRIDFEED_ASSIGN_OR_RETURN(other, Expression());
    }
    node->args.push_back(std::move(e));
    node->args.push_back(std::move(cond));
    node->args.push_back(std::move(other));
    GRIDFEED_ASSIGN_OR_RETURN(e, Finish(std::move(node)));
  }
  return e;
}

Result<ExprPtr> ExprParser::And() {
  GRIDFEED_ASSIGN_OR_RETURN(ExprPtr e, Not());
  while (IsName("and")) {
    auto node = Make(Expr::Kind::kAnd, Cur().pos);
    Next();
    GRIDFEED_ASSIGN_OR_RETURN(ExprPtr r, Not());
    node->args.push_back(std::move(e));
    node->args.push_back(std::move(r));
    GRIDFEED_ASSIGN_OR_RETURN(e, Finish(std::move(node)));
  }
  return e;
}

Result<ExprPtr> ExprParser::Not() {
  if (IsName("not")) {
    auto node = Make(Expr::Kind::kNot, Cur().pos);
    Next();
    GRIDFEED_RETURN_IF_ERROR(Enter());
    auto e = Not();
    --nest_;
    if (!e.ok()) return e.status();
    node->args.push_back(std::move(e).value());
    return Finish(std::move(node));
  }
  return Compare();
}

Result<ExprPtr> ExprParser::Compare() {
  const size_t pos = Cur().pos;
  GRIDFEED_ASSIGN_OR_RETURN(ExprPtr e, Math1());
  std::unique_ptr<Expr> node;
  while (true) {
    std::string op;
    if (Cur().type == Token::Type::kOp && (Cur().s == "==" || Cur().s == "!=" || Cur().s == "<" ||
                                           Cur().s == "<=" || Cur().s == ">" || Cur().s == ">=")) {
      op = Cur().s;
      Next();
    } else if (IsName("in")) {
      op = "in";
      Next();
    } else if (IsName("not") && Peek().type == Token::Type::kName && Peek().s == "in") {
      op = "not in";
      Next();
      Next();
    } else {
      break;
    }
    if (!node) {
      node = Make(Expr::Kind::kCompare, pos);
      node->args.push_back(std::move(e));
    }
    GRIDFEED_ASSIGN_OR_RETURN(ExprPtr r, Math1());
    node->ops.push_back(op);
    node->args.push_back(std::move(r));
  }
  if (!node) return e;
  return Finish(std::move(node));
}

Result<ExprPtr> ExprParser::Binary(std::initializer_list<const char*> ops, Level next) {
  GRIDFEED_ASSIGN_OR_RETURN(ExprPtr e, (this->*next)());
  while (Cur().type == Token::Type::kOp &&
         std::any_of(ops.begin(), ops.end(), [&](const char* o) { return Cur().s == o; })) {
    auto node = Make(Expr::Kind::kBinary, Cur().pos);
    node->name = Cur().s;
    Next();
    GRIDFEED_ASSIGN_OR_RETURN(ExprPtr r, (this->*next)());
    node->args.push_back(std::move(e));
    node->args.push_back(std::move(r));
    GRIDFEED_ASSIGN_OR_RETURN(e, Finish(std::move(node)));
  }
  return e;
}

// Jinja's precedence: + - bind looser than ~, which binds looser than * / // %, then **.
Result<ExprPtr> ExprParser::Math1() { return Binary({"+", "-"}, &ExprParser::Concat); }
Result<ExprPtr> ExprParser::Concat() {
  const size_t pos = Cur().pos;
  GRIDFEED_ASSIGN_OR_RETURN(ExprPtr e, Math2());
  if (!IsOp("~")) return e;
  auto node = Make(Expr::Kind::kConcat, pos);
  node->args.push_back(std::move(e));
  while (IsOp("~")) {
    Next();
    GRIDFEED_ASSIGN_OR_RETURN(ExprPtr r, Math2());
    node->args.push_back(std::move(r));
  }
  return Finish(std::move(node));
}
Result<ExprPtr> ExprParser::Math2() { return Binary({"*", "/", "//", "%"}, &ExprParser::Pow); }
Result<ExprPtr> ExprParser::Pow() { return Binary({"**"}, &ExprParser::UnaryWithFilter); }
Result<ExprPtr> ExprParser::UnaryWithFilter() { return Unary(true); }

Result<ExprPtr> ExprParser::Unary(bool with_filter) {
  ExprPtr e;
  if (IsOp("-") || IsOp("+")) {
    auto node = Make(IsOp("-") ? Expr::Kind::kNeg : Expr::Kind::kPos, Cur().pos);
    Next();
    GRIDFEED_RETURN_IF_ERROR(Enter());
    auto operand = Unary(false);
    --nest_;
    if (!operand.ok()) return operand.status();
    node->args.push_back(std::move(operand).value());
    GRIDFEED_ASSIGN_OR_RETURN(e, Finish(std::move(node)));
  } else {
    GRIDFEED_ASSIGN_OR_RETURN(e, Primary());
  }
  GRIDFEED_ASSIGN_OR_RETURN(e, Postfix(std::move(e)));
  if (with_filter) {
    GRIDFEED_ASSIGN_OR_RETURN(e, FilterExpr(std::move(e), false));
  }
  return e;
}

}  // namespace gridfeed::order::sft::chat_template_internal::detail
