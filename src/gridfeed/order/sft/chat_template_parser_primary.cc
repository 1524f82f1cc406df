// The chat-template parser, primaries and their postfixes: literals, names, parentheses, lists,
// dicts, attributes, subscripts, slices, call arguments, filters and tests (refusing those gridfeed
// does not run) (contract: chat_template_ast.h, chat_template_parser_internal.h).

#include <string>
#include <utility>
#include <vector>

#include "gridfeed/order/sft/chat_template_ast.h"
#include "gridfeed/order/sft/chat_template_parser_internal.h"

namespace gridfeed::order::sft::chat_template_internal::detail {
namespace {

// Jinja 3.1's builtin filters and tests; the implemented ones are in chat_template_filters.cc.
const std::vector<std::string_view> kJinjaFilters = {
    "abs",    "attr",       "batch",       "capitalize", "center",   "count",
    "d",      "default",    "dictsort",    "e",          "escape",   "filesizeformat",
    "first",  "float",      "forceescape", "format",     "groupby",  "indent",
    "int",    "items",      "join",        "last",       "length",   "list",
    "lower",  "map",        "max",         "min",        "pprint",   "random",
    "reject", "rejectattr", "replace",     "reverse",    "round",    "safe",
    "select", "selectattr", "slice",       "sort",       "string",   "striptags",
    "sum",    "title",      "tojson",      "trim",       "truncate", "unique",
    "upper",  "urlencode",  "urlize",      "wordcount",  "wordwrap", "xmlattr"};

}  // namespace

Result<ExprPtr> ExprParser::Primary() {
  const Token& t = Cur();
  if (t.type == Token::Type::kName) {
    auto node = Make(Expr::Kind::kLit, t.pos);
    if (t.s == "true" || t.s == "True") {
      node->lit = Value::Bool(true);
    } else if (t.s == "false" || t.s == "False") {
      node->lit = Value::Bool(false);
    } else if (t.s == "none" || t.s == "None") {
      node->lit = Value::None();
    } else {
      node->kind = Expr::Kind::kName;
      node->name = t.s;
    }
    Next();
    return ExprPtr(std::move(node));
  }
  if (t.type == Token::Type::kStr) {
    auto node = Make(Expr::Kind::kLit, t.pos);
    std::string s;
    while (Cur().type == Token::Type::kStr) {  // adjacent literals concatenate
      s += Cur().s;
      Next();
    }
    node->lit = Value::Str(std::move(s));
    return ExprPtr(std::move(node));
  }
  if (t.type == Token::Type::kInt || t.type == Token::Type::kFloat) {
    auto node = Make(Expr::Kind::kLit, t.pos);
    node->lit = t.type == Token::Type::kInt ? Value::Int(t.i) : Value::Float(t.f);
    Next();
    return ExprPtr(std::move(node));
  }
  if (IsOp("(")) {
    Next();
    GRIDFEED_RETURN_IF_ERROR(Enter());
    auto e = Tuple(true, true);
    --nest_;
    if (!e.ok()) return e.status();
    GRIDFEED_RETURN_IF_ERROR(Expect(")"));
    return std::move(e).value();
  }
  if (IsOp("[") || IsOp("{")) {
    const bool dict = IsOp("{");
    auto node = Make(dict ? Expr::Kind::kDict : Expr::Kind::kList, t.pos);
    Next();
    GRIDFEED_RETURN_IF_ERROR(Enter());
    const char* close = dict ? "}" : "]";
    bool first = true;
    while (!IsOp(close)) {
      if (!first) {
        GRIDFEED_RETURN_IF_ERROR(Expect(","));
        if (IsOp(close)) break;
      }
      first = false;
      GRIDFEED_ASSIGN_OR_RETURN(ExprPtr e, Expression());
      node->args.push_back(std::move(e));
      if (dict) {
        GRIDFEED_RETURN_IF_ERROR(Expect(":"));
        GRIDFEED_ASSIGN_OR_RETURN(ExprPtr v, Expression());
        node->args.push_back(std::move(v));
      }
    }
    --nest_;
    Next();
    return Finish(std::move(node));
  }
  return SyntaxError("unexpected '" + Describe(t) + "'", t.pos);
}

Result<ExprPtr> ExprParser::Postfix(ExprPtr e) {
  while (true) {
    if (IsOp(".") || IsOp("[")) {
      GRIDFEED_ASSIGN_OR_RETURN(e, Subscript(std::move(e)));
    } else if (IsOp("(")) {
      GRIDFEED_ASSIGN_OR_RETURN(e, Call(std::move(e)));
    } else {
      return e;
    }
  }
}

Result<ExprPtr> ExprParser::Subscript(ExprPtr e) {
  const size_t pos = Cur().pos;
  if (IsOp(".")) {
    Next();
    if (Cur().type == Token::Type::kName) {
      auto node = Make(Expr::Kind::kAttr, pos);
      node->name = Cur().s;
      node->args.push_back(std::move(e));
      Next();
      return Finish(std::move(node));
    }
    if (Cur().type == Token::Type::kInt) {
      auto node = Make(Expr::Kind::kItem, pos);
      auto idx = Make(Expr::Kind::kLit, Cur().pos);
      idx->lit = Value::Int(Cur().i);
      node->args.push_back(std::move(e));
      node->args.push_back(std::move(idx));
      Next();
      return Finish(std::move(node));
    }
    return SyntaxError("expected a name after '.'", Cur().pos);
  }
  Next();  // [
  GRIDFEED_RETURN_IF_ERROR(Enter());
  std::vector<ExprPtr> subs;
  bool any_slice = false;
  while (!IsOp("]")) {
    if (!subs.empty()) {
      GRIDFEED_RETURN_IF_ERROR(Expect(","));
      if (IsOp("]")) break;
    }
    ExprPtr parts[3];
    bool slice = false;
    for (int part = 0; part < 3; ++part) {
      if (!IsOp(":") && !IsOp("]") && !IsOp(",")) {
        GRIDFEED_ASSIGN_OR_RETURN(parts[part], Expression());
      }
      if (part < 2 && IsOp(":")) {
        slice = true;
        Next();
        continue;
      }
      break;
    }
    if (slice) {
      any_slice = true;
      auto s = Make(Expr::Kind::kSlice, pos);
      s->args.push_back(nullptr);
      for (auto& p : parts) s->args.push_back(std::move(p));
      subs.push_back(std::move(s));
    } else {
      if (!parts[0]) return SyntaxError("expected an expression in a subscript", Cur().pos);
      subs.push_back(std::move(parts[0]));
    }
  }
  --nest_;
  Next();  // ]
  if (subs.size() != 1) {
    return SyntaxError("tuple subscripts are not supported", pos);
  }
  if (any_slice) {
    subs[0]->args[0] = std::move(e);
    return Finish(std::move(subs[0]));
  }
  auto node = Make(Expr::Kind::kItem, pos);
  node->args.push_back(std::move(e));
  node->args.push_back(std::move(subs[0]));
  return Finish(std::move(node));
}

// Call arguments after `(` into node->args (appended) and node->kwargs.
Result<std::vector<ExprPtr>> ExprParser::Args(Expr* node) {
  Next();  // (
  GRIDFEED_RETURN_IF_ERROR(Enter());
  bool first = true;
  while (!IsOp(")")) {
    if (!first) {
      GRIDFEED_RETURN_IF_ERROR(Expect(","));
      if (IsOp(")")) break;
    }
    first = false;
    if (IsOp("*") || IsOp("**")) {
      return SyntaxError("*args and **kwargs in calls are not supported", Cur().pos);
    }
    if (Cur().type == Token::Type::kName && Peek().type == Token::Type::kOp && Peek().s == "=") {
      std::string key = Cur().s;
      Next();
      Next();
      GRIDFEED_ASSIGN_OR_RETURN(ExprPtr v, Expression());
      node->kwargs.emplace_back(std::move(key), std::move(v));
      continue;
    }
    if (!node->kwargs.empty()) {
      return SyntaxError("positional argument after a keyword argument", Cur().pos);
    }
    GRIDFEED_ASSIGN_OR_RETURN(ExprPtr a, Expression());
    node->args.push_back(std::move(a));
  }
  --nest_;
  Next();
  return std::vector<ExprPtr>{};
}

Result<ExprPtr> ExprParser::Call(ExprPtr callee) {
  auto node = Make(Expr::Kind::kCall, Cur().pos);
  node->args.push_back(std::move(callee));
  GRIDFEED_RETURN_IF_ERROR(Args(node.get()).status());
  return Finish(std::move(node));
}

Result<std::string> ExprParser::DottedName() {
  GRIDFEED_ASSIGN_OR_RETURN(std::string n, ExpectName("a name"));
  while (IsOp(".")) {
    Next();
    GRIDFEED_ASSIGN_OR_RETURN(std::string more, ExpectName("a name"));
    n += "." + more;
  }
  return n;
}

Result<ExprPtr> ExprParser::FilterExpr(ExprPtr e, bool start_inline) {
  while (true) {
    if (IsOp("|") || start_inline) {
      if (!start_inline) Next();
      start_inline = false;
      const size_t pos = Cur().pos;
      GRIDFEED_ASSIGN_OR_RETURN(std::string name, DottedName());
      if (!Contains(kJinjaFilters, name)) {
        return SyntaxError("no filter named '" + name + "'", pos);
      }
      if (!IsFilter(name)) return SyntaxError("filter '" + name + "' is not supported", pos);
      auto node = Make(Expr::Kind::kFilter, pos);
      node->name = name;
      node->args.push_back(std::move(e));
      if (IsOp("(")) GRIDFEED_RETURN_IF_ERROR(Args(node.get()).status());
      GRIDFEED_ASSIGN_OR_RETURN(e, Finish(std::move(node)));
    } else if (IsName("is")) {
      Next();
      auto node = Make(Expr::Kind::kTest, Cur().pos);
      if (IsName("not")) {
        node->negated = true;
        Next();
      }
      const size_t pos = Cur().pos;
      GRIDFEED_ASSIGN_OR_RETURN(std::string name, DottedName());
      if (!IsTest(name)) return SyntaxError("no test named '" + name + "' (or not supported)", pos);
      node->name = name;
      node->args.push_back(std::move(e));
      const Token& a = Cur();
      if (IsOp("(")) {
        GRIDFEED_RETURN_IF_ERROR(Args(node.get()).status());
      } else if (a.type == Token::Type::kStr || a.type == Token::Type::kInt ||
                 a.type == Token::Type::kFloat ||
                 (a.type == Token::Type::kOp && (a.s == "[" || a.s == "{")) ||
                 (a.type == Token::Type::kName && a.s != "else" && a.s != "or" && a.s != "and")) {
        if (a.type == Token::Type::kName && a.s == "is") {
          return SyntaxError("You cannot chain multiple tests with is", a.pos);
        }
        // One argument without parentheses: a primary and its postfix (`is divisibleby 3`).
        GRIDFEED_ASSIGN_OR_RETURN(ExprPtr arg, Primary());
        GRIDFEED_ASSIGN_OR_RETURN(arg, Postfix(std::move(arg)));
        node->args.push_back(std::move(arg));
      }
      GRIDFEED_ASSIGN_OR_RETURN(e, Finish(std::move(node)));
    } else if (IsOp("(")) {
      GRIDFEED_ASSIGN_OR_RETURN(e, Call(std::move(e)));
    } else {
      return e;
    }
  }
}

}  // namespace gridfeed::order::sft::chat_template_internal::detail
