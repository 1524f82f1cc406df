// The chat-template parser: Jinja's expression grammar (jinja2/parser.py) over one tag's tokens
// and the statements (for, if, set) over segments; anything outside the subset is refused here,
// naming it (internal contract: chat_template_ast.h).

#include <algorithm>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "gridfeed/order/sft/chat_template_ast.h"

namespace gridfeed::order::sft::chat_template_internal {

const std::vector<std::string_view> kStrMethods = {"strip", "lstrip", "rstrip",     "replace",
                                                   "lower", "upper",  "startswith", "endswith"};

bool Contains(const std::vector<std::string_view>& v, std::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

namespace {

const std::vector<std::string_view> kFilters = {"trim", "lower", "upper", "length", "count"};
const std::vector<std::string_view> kTests = {"defined", "undefined", "none",  "string", "number",
                                              "boolean", "true",      "false", "mapping"};

// Jinja's expression grammar (jinja2/parser.py) over one tag's tokens.
class ExprParser {
 public:
  explicit ExprParser(const std::vector<Token>& t) : t_(t) {}

  const Token& Cur() const { return t_[k_]; }
  const Token& Peek(size_t ahead = 1) const { return t_[std::min(k_ + ahead, t_.size() - 1)]; }
  bool AtEnd() const { return Cur().type == Token::Type::kEnd; }
  bool IsOp(std::string_view s) const { return Cur().type == Token::Type::kOp && Cur().s == s; }
  bool IsName(std::string_view s) const { return Cur().type == Token::Type::kName && Cur().s == s; }
  void Next() {
    if (!AtEnd()) ++k_;
  }
  Status Expect(std::string_view op) {
    if (!IsOp(op)) return SyntaxError("expected '" + std::string(op) + "'", Cur().pos);
    Next();
    return Status::Ok();
  }
  Status ExpectEnd() {
    if (!AtEnd()) return SyntaxError("unexpected '" + Describe(Cur()) + "'", Cur().pos);
    return Status::Ok();
  }
  static std::string Describe(const Token& t) {
    switch (t.type) {
      case Token::Type::kInt:
        return std::to_string(t.i);
      case Token::Type::kStr:
        return "string literal";
      case Token::Type::kEnd:
        return "end of tag";
      default:
        return t.s;
    }
  }

  Result<ExprPtr> Expression() { return CondExpr(); }

  Result<ExprPtr> CondExpr() {
    GRIDFEED_ASSIGN_OR_RETURN(ExprPtr e, Or());
    while (IsName("if")) {
      auto node = Make(Expr::Kind::kCond, Cur().pos);
      Next();
      GRIDFEED_ASSIGN_OR_RETURN(ExprPtr cond, Or());
      ExprPtr other;
      if (IsName("else")) {
        Next();
        GRIDFEED_ASSIGN_OR_RETURN(other, CondExpr());
      }
      node->args.push_back(std::move(e));
      node->args.push_back(std::move(cond));
      node->args.push_back(std::move(other));
      e = std::move(node);
    }
    return e;
  }

  Result<ExprPtr> Or() {
    GRIDFEED_ASSIGN_OR_RETURN(ExprPtr e, And());
    while (IsName("or")) {
      auto node = Make(Expr::Kind::kOr, Cur().pos);
      Next();
      GRIDFEED_ASSIGN_OR_RETURN(ExprPtr r, And());
      node->args.push_back(std::move(e));
      node->args.push_back(std::move(r));
      e = std::move(node);
    }
    return e;
  }

  Result<ExprPtr> And() {
    GRIDFEED_ASSIGN_OR_RETURN(ExprPtr e, Not());
    while (IsName("and")) {
      auto node = Make(Expr::Kind::kAnd, Cur().pos);
      Next();
      GRIDFEED_ASSIGN_OR_RETURN(ExprPtr r, Not());
      node->args.push_back(std::move(e));
      node->args.push_back(std::move(r));
      e = std::move(node);
    }
    return e;
  }

  Result<ExprPtr> Not() {
    if (IsName("not")) {
      auto node = Make(Expr::Kind::kNot, Cur().pos);
      Next();
      GRIDFEED_ASSIGN_OR_RETURN(ExprPtr e, Not());
      node->args.push_back(std::move(e));
      return ExprPtr(std::move(node));
    }
    return Compare();
  }

  Result<ExprPtr> Compare() {
    const size_t pos = Cur().pos;
    GRIDFEED_ASSIGN_OR_RETURN(ExprPtr e, Math1());
    auto node = Make(Expr::Kind::kCompare, pos);
    node->args.push_back(std::move(e));
    while (true) {
      std::string op;
      if (Cur().type == Token::Type::kOp &&
          (Cur().s == "==" || Cur().s == "!=" || Cur().s == "<" || Cur().s == "<=" ||
           Cur().s == ">" || Cur().s == ">=")) {
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
      GRIDFEED_ASSIGN_OR_RETURN(ExprPtr r, Math1());
      node->ops.push_back(op);
      node->args.push_back(std::move(r));
    }
    if (node->ops.empty()) return std::move(node->args[0]);
    return ExprPtr(std::move(node));
  }

  Result<ExprPtr> Binary(std::initializer_list<std::string_view> ops,
                         Result<ExprPtr> (ExprParser::*sub)()) {
    GRIDFEED_ASSIGN_OR_RETURN(ExprPtr e, (this->*sub)());
    while (Cur().type == Token::Type::kOp &&
           std::find(ops.begin(), ops.end(), Cur().s) != ops.end()) {
      auto node = Make(Expr::Kind::kBinary, Cur().pos);
      node->name = Cur().s;
      Next();
      GRIDFEED_ASSIGN_OR_RETURN(ExprPtr r, (this->*sub)());
      node->args.push_back(std::move(e));
      node->args.push_back(std::move(r));
      e = std::move(node);
    }
    return e;
  }
  // + and - bind looser than ~, which binds looser than * / // %, then **.
  Result<ExprPtr> Math1() { return Binary({"+", "-"}, &ExprParser::Concat); }
  Result<ExprPtr> Concat() { return Binary({"~"}, &ExprParser::Math2); }
  Result<ExprPtr> Math2() { return Binary({"*", "/", "//", "%"}, &ExprParser::Pow); }
  Result<ExprPtr> Pow() { return Binary({"**"}, &ExprParser::UnaryWithFilter); }
  Result<ExprPtr> UnaryWithFilter() { return Unary(true); }

  Result<ExprPtr> Unary(bool with_filter) {
    ExprPtr e;
    if (IsOp("-") || IsOp("+")) {
      auto node = Make(IsOp("-") ? Expr::Kind::kNeg : Expr::Kind::kPos, Cur().pos);
      Next();
      GRIDFEED_ASSIGN_OR_RETURN(ExprPtr operand, Unary(false));
      node->args.push_back(std::move(operand));
      e = std::move(node);
    } else {
      GRIDFEED_ASSIGN_OR_RETURN(e, Primary());
    }
    GRIDFEED_ASSIGN_OR_RETURN(e, Postfix(std::move(e)));
    if (with_filter) {
      GRIDFEED_ASSIGN_OR_RETURN(e, FilterExpr(std::move(e)));
    }
    return e;
  }

  Result<ExprPtr> Primary() {
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
    if (t.type == Token::Type::kInt) {
      auto node = Make(Expr::Kind::kLit, t.pos);
      node->lit = Value::Int(t.i);
      Next();
      return ExprPtr(std::move(node));
    }
    if (IsOp("(")) {
      Next();
      GRIDFEED_ASSIGN_OR_RETURN(ExprPtr e, Expression());
      if (IsOp(",")) return SyntaxError("tuples are not supported", Cur().pos);
      GRIDFEED_RETURN_IF_ERROR(Expect(")"));
      return e;
    }
    if (IsOp("[")) {
      auto node = Make(Expr::Kind::kList, t.pos);
      Next();
      while (!IsOp("]")) {
        if (!node->args.empty()) GRIDFEED_RETURN_IF_ERROR(Expect(","));
        if (IsOp("]")) break;
        GRIDFEED_ASSIGN_OR_RETURN(ExprPtr e, Expression());
        node->args.push_back(std::move(e));
      }
      Next();
      return ExprPtr(std::move(node));
    }
    if (IsOp("{")) return SyntaxError("dict literals are not supported", t.pos);
    return SyntaxError("unexpected '" + Describe(t) + "'", t.pos);
  }

  Result<ExprPtr> Postfix(ExprPtr e) {
    while (true) {
      if (IsOp(".")) {
        const size_t pos = Cur().pos;
        Next();
        if (Cur().type == Token::Type::kName) {
          auto node = Make(Expr::Kind::kAttr, pos);
          node->name = Cur().s;
          node->args.push_back(std::move(e));
          Next();
          e = std::move(node);
        } else if (Cur().type == Token::Type::kInt) {
          auto node = Make(Expr::Kind::kItem, pos);
          auto idx = Make(Expr::Kind::kLit, Cur().pos);
          idx->lit = Value::Int(Cur().i);
          node->args.push_back(std::move(e));
          node->args.push_back(std::move(idx));
          Next();
          e = std::move(node);
        } else {
          return SyntaxError("expected a name after '.'", Cur().pos);
        }
      } else if (IsOp("[")) {
        GRIDFEED_ASSIGN_OR_RETURN(e, Subscript(std::move(e)));
      } else if (IsOp("(")) {
        GRIDFEED_ASSIGN_OR_RETURN(e, Call(std::move(e)));
      } else {
        return e;
      }
    }
  }

  Result<ExprPtr> Subscript(ExprPtr e) {
    const size_t pos = Cur().pos;
    Next();  // [
    ExprPtr parts[3];
    bool slice = false;
    for (int part = 0; part < 3; ++part) {
      if (!IsOp(":") && !IsOp("]")) {
        GRIDFEED_ASSIGN_OR_RETURN(parts[part], Expression());
      }
      if (IsOp(",")) return SyntaxError("tuple subscripts are not supported", Cur().pos);
      if (part < 2 && IsOp(":")) {
        slice = true;
        Next();
        continue;
      }
      break;
    }
    GRIDFEED_RETURN_IF_ERROR(Expect("]"));
    auto node = Make(slice ? Expr::Kind::kSlice : Expr::Kind::kItem, pos);
    node->args.push_back(std::move(e));
    if (slice) {
      for (auto& p : parts) node->args.push_back(std::move(p));
    } else {
      if (!parts[0]) return SyntaxError("empty subscript", pos);
      node->args.push_back(std::move(parts[0]));
    }
    return ExprPtr(std::move(node));
  }

  Status Args(Expr* node) {
    Next();  // (
    while (!IsOp(")")) {
      if (node->args.size() > (node->kind == Expr::Kind::kRaise ? 0u : 1u)) {
        GRIDFEED_RETURN_IF_ERROR(Expect(","));
        if (IsOp(")")) break;
      }
      if (Cur().type == Token::Type::kName && Peek().type == Token::Type::kOp && Peek().s == "=") {
        return SyntaxError("keyword arguments are not supported", Cur().pos);
      }
      if (IsOp("*") || IsOp("**")) return SyntaxError("*args are not supported", Cur().pos);
      GRIDFEED_ASSIGN_OR_RETURN(ExprPtr a, Expression());
      node->args.push_back(std::move(a));
    }
    Next();
    return Status::Ok();
  }

  Result<ExprPtr> Call(ExprPtr callee) {
    const size_t pos = Cur().pos;
    if (callee->kind == Expr::Kind::kName && callee->name == "raise_exception") {
      auto node = Make(Expr::Kind::kRaise, pos);
      GRIDFEED_RETURN_IF_ERROR(Args(node.get()));
      if (node->args.size() != 1) return SyntaxError("raise_exception takes one argument", pos);
      return ExprPtr(std::move(node));
    }
    if (callee->kind == Expr::Kind::kAttr && Contains(kStrMethods, callee->name)) {
      auto node = Make(Expr::Kind::kMethod, pos);
      node->name = callee->name;
      node->args.push_back(std::move(callee->args[0]));
      GRIDFEED_RETURN_IF_ERROR(Args(node.get()));
      const size_t n = node->args.size() - 1;
      const bool ok = (node->name == "lower" || node->name == "upper") ? n == 0
                      : node->name == "replace"                        ? (n == 2 || n == 3)
                      : (node->name == "startswith" || node->name == "endswith") ? n == 1
                                                                                 : n <= 1;
      if (!ok) return SyntaxError("wrong number of arguments to ." + node->name + "()", pos);
      return ExprPtr(std::move(node));
    }
    std::string what = callee->kind == Expr::Kind::kName   ? "function '" + callee->name + "'"
                       : callee->kind == Expr::Kind::kAttr ? "method '" + callee->name + "'"
                                                           : std::string("expression");
    return SyntaxError("call of " + what + " is not supported", pos);
  }

  Result<ExprPtr> FilterExpr(ExprPtr e) {
    while (true) {
      if (IsOp("|")) {
        Next();
        if (Cur().type != Token::Type::kName)
          return SyntaxError("expected a filter name", Cur().pos);
        if (!Contains(kFilters, Cur().s)) {
          return SyntaxError("filter '" + Cur().s + "' is not supported", Cur().pos);
        }
        auto node = Make(Expr::Kind::kFilter, Cur().pos);
        node->name = Cur().s;
        Next();
        if (IsOp(".")) return SyntaxError("dotted filter names are not supported", Cur().pos);
        node->args.push_back(std::move(e));
        if (IsOp("(")) GRIDFEED_RETURN_IF_ERROR(Args(node.get()));
        if (node->args.size() > (node->name == "trim" ? 2u : 1u)) {
          return SyntaxError("too many arguments to filter '" + node->name + "'", node->pos);
        }
        e = std::move(node);
      } else if (IsName("is")) {
        auto node = Make(Expr::Kind::kTest, Cur().pos);
        Next();
        if (IsName("not")) {
          node->negated = true;
          Next();
        }
        if (Cur().type != Token::Type::kName) return SyntaxError("expected a test name", Cur().pos);
        if (!Contains(kTests, Cur().s)) {
          return SyntaxError("test '" + Cur().s + "' is not supported", Cur().pos);
        }
        node->name = Cur().s;
        Next();
        // Jinja would read an argument here; none of the supported tests takes one.
        const Token& a = Cur();
        if (a.type == Token::Type::kStr || a.type == Token::Type::kInt ||
            (a.type == Token::Type::kOp && (a.s == "(" || a.s == "[" || a.s == "{")) ||
            (a.type == Token::Type::kName && a.s != "else" && a.s != "or" && a.s != "and")) {
          return SyntaxError("tests with arguments are not supported", a.pos);
        }
        node->args.push_back(std::move(e));
        e = std::move(node);
      } else if (IsOp("(")) {
        return SyntaxError("call of a filtered value is not supported", Cur().pos);
      } else {
        return e;
      }
    }
  }

 private:
  static std::unique_ptr<Expr> Make(Expr::Kind kind, size_t pos) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = pos;
    return e;
  }
  const std::vector<Token>& t_;
  size_t k_ = 0;
};

// Statements over segments.
class TemplateParser {
 public:
  explicit TemplateParser(std::vector<Segment> segs) : segs_(std::move(segs)) {}

  Result<std::vector<Node>> Run() {
    std::vector<Node> body;
    std::string stop;
    GRIDFEED_RETURN_IF_ERROR(Body({}, &body, &stop));
    return body;
  }

 private:
  // Parses nodes until a block tag named in `stops` (left for the caller in *stop, its segment
  // consumed) or the end of the template (stop empty).
  Status Body(const std::vector<std::string_view>& stops, std::vector<Node>* out,
              std::string* stop) {
    while (k_ < segs_.size()) {
      Segment& seg = segs_[k_++];
      if (seg.kind == Segment::Kind::kText) {
        Node n;
        n.kind = Node::Kind::kText;
        n.text = std::move(seg.text);
        out->push_back(std::move(n));
        continue;
      }
      ExprParser p(seg.tokens);
      if (seg.kind == Segment::Kind::kVar) {
        Node n;
        n.kind = Node::Kind::kOutput;
        n.pos = seg.pos;
        GRIDFEED_ASSIGN_OR_RETURN(n.expr, p.Expression());
        if (p.IsOp(",")) return SyntaxError("tuples are not supported", p.Cur().pos);
        GRIDFEED_RETURN_IF_ERROR(p.ExpectEnd());
        out->push_back(std::move(n));
        continue;
      }
      if (p.Cur().type != Token::Type::kName) return SyntaxError("expected a tag name", seg.pos);
      const std::string tag = p.Cur().s;
      cur_block_ = &seg;
      if (Contains(stops, tag)) {
        *stop = tag;
        return Status::Ok();
      }
      p.Next();
      if (tag == "for") {
        GRIDFEED_RETURN_IF_ERROR(For(p, seg.pos, out));
      } else if (tag == "if") {
        GRIDFEED_RETURN_IF_ERROR(If(p, seg.pos, out));
      } else if (tag == "set") {
        GRIDFEED_RETURN_IF_ERROR(Set(p, seg.pos, out));
      } else {
        return SyntaxError("tag '" + tag + "' is not supported or unexpected here", seg.pos);
      }
    }
    if (!stops.empty()) {
      std::string want;
      for (auto s : stops) want += (want.empty() ? "" : " or ") + std::string(s);
      return SyntaxError("unexpected end of template, expected " + want, open_pos_);
    }
    stop->clear();
    return Status::Ok();
  }

  // The tag that ended a body: its tokens after the name.
  ExprParser StopParser() {
    ExprParser p(cur_block_->tokens);
    p.Next();
    return p;
  }

  Status For(ExprParser& p, size_t pos, std::vector<Node>* out) {
    Node n;
    n.kind = Node::Kind::kFor;
    n.pos = pos;
    if (p.Cur().type != Token::Type::kName)
      return SyntaxError("expected a loop variable", p.Cur().pos);
    n.var = p.Cur().s;
    p.Next();
    if (p.IsOp(",")) return SyntaxError("tuple loop targets are not supported", p.Cur().pos);
    if (!p.IsName("in")) return SyntaxError("expected 'in'", p.Cur().pos);
    p.Next();
    GRIDFEED_ASSIGN_OR_RETURN(n.expr, p.Or());  // Jinja reads `if` here as a loop filter
    if (p.IsName("if"))
      return SyntaxError("loop filters ('for ... if') are not supported", p.Cur().pos);
    if (p.IsName("recursive")) return SyntaxError("recursive loops are not supported", p.Cur().pos);
    GRIDFEED_RETURN_IF_ERROR(p.ExpectEnd());
    open_pos_ = pos;
    std::vector<Node> body;
    std::string stop;
    GRIDFEED_RETURN_IF_ERROR(Body({"endfor", "else"}, &body, &stop));
    GRIDFEED_RETURN_IF_ERROR(StopParser().ExpectEnd());
    if (stop == "else") {
      open_pos_ = pos;
      GRIDFEED_RETURN_IF_ERROR(Body({"endfor"}, &n.else_body, &stop));
      GRIDFEED_RETURN_IF_ERROR(StopParser().ExpectEnd());
    }
    n.branches.emplace_back(nullptr, std::move(body));
    out->push_back(std::move(n));
    return Status::Ok();
  }

  Status If(ExprParser& p, size_t pos, std::vector<Node>* out) {
    Node n;
    n.kind = Node::Kind::kIf;
    n.pos = pos;
    GRIDFEED_ASSIGN_OR_RETURN(ExprPtr cond, p.Expression());
    GRIDFEED_RETURN_IF_ERROR(p.ExpectEnd());
    while (true) {
      open_pos_ = pos;
      std::vector<Node> body;
      std::string stop;
      GRIDFEED_RETURN_IF_ERROR(Body({"elif", "else", "endif"}, &body, &stop));
      n.branches.emplace_back(std::move(cond), std::move(body));
      ExprParser sp = StopParser();
      if (stop == "elif") {
        GRIDFEED_ASSIGN_OR_RETURN(cond, sp.Expression());
        GRIDFEED_RETURN_IF_ERROR(sp.ExpectEnd());
        continue;
      }
      GRIDFEED_RETURN_IF_ERROR(sp.ExpectEnd());
      if (stop == "else") {
        open_pos_ = pos;
        GRIDFEED_RETURN_IF_ERROR(Body({"endif"}, &n.else_body, &stop));
        GRIDFEED_RETURN_IF_ERROR(StopParser().ExpectEnd());
      }
      break;
    }
    out->push_back(std::move(n));
    return Status::Ok();
  }

  Status Set(ExprParser& p, size_t pos, std::vector<Node>* out) {
    Node n;
    n.kind = Node::Kind::kSet;
    n.pos = pos;
    if (p.Cur().type != Token::Type::kName)
      return SyntaxError("expected a name after set", p.Cur().pos);
    n.var = p.Cur().s;
    p.Next();
    if (p.IsOp(".") || p.IsOp(",")) {
      return SyntaxError("only '{% set name = value %}' is supported", p.Cur().pos);
    }
    if (!p.IsOp("="))
      return SyntaxError("block assignments ('{% set x %}') are not supported", pos);
    p.Next();
    GRIDFEED_ASSIGN_OR_RETURN(n.expr, p.Expression());
    if (p.IsOp(",")) return SyntaxError("tuples are not supported", p.Cur().pos);
    GRIDFEED_RETURN_IF_ERROR(p.ExpectEnd());
    out->push_back(std::move(n));
    return Status::Ok();
  }

  std::vector<Segment> segs_;
  size_t k_ = 0;
  Segment* cur_block_ = nullptr;
  size_t open_pos_ = 0;
};

}  // namespace

Result<std::vector<Node>> ParseTemplate(std::vector<Segment> segs) {
  return TemplateParser(std::move(segs)).Run();
}

}  // namespace gridfeed::order::sft::chat_template_internal
