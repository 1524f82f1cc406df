// The chat-template parser: Jinja's expression grammar (jinja2/parser.py) over one tag's tokens
// and the statements over segments (for, if, set, macro, call, filter, generation, break,
// continue); anything else is refused here, naming it, and nesting is bounded (internal
// contract: chat_template_ast.h).

#include <algorithm>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "gridfeed/order/sft/chat_template_ast.h"

namespace gridfeed::order::sft::chat_template_internal {
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

bool Contains(const std::vector<std::string_view>& v, std::string_view s) {
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
  Status Expect(std::string_view op) {
    if (!IsOp(op)) {
      return SyntaxError("expected '" + std::string(op) + "', got '" + Describe(Cur()) + "'",
                         Cur().pos);
    }
    Next();
    return Status::Ok();
  }
  Status ExpectEnd() {
    if (!AtEnd()) return SyntaxError("unexpected '" + Describe(Cur()) + "'", Cur().pos);
    return Status::Ok();
  }
  Result<std::string> ExpectName(const char* what) {
    if (Cur().type != Token::Type::kName) {
      return SyntaxError(std::string("expected ") + what + ", got '" + Describe(Cur()) + "'",
                         Cur().pos);
    }
    std::string n = Cur().s;
    Next();
    return n;
  }
  static std::string Describe(const Token& t) {
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
  Result<ExprPtr> Tuple(bool with_condexpr = true, bool explicit_parens = false) {
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

  Result<ExprPtr> Expression() {
    GRIDFEED_RETURN_IF_ERROR(Enter());
    auto r = CondExpr();
    --nest_;
    return r;
  }

  Result<ExprPtr> Or() {
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

  Result<ExprPtr> FilterChain(ExprPtr e) { return FilterExpr(std::move(e), /*start_inline=*/true); }

  Result<std::vector<ExprPtr>> CallArgsInto(Expr* node) { return Args(node); }

  Status Enter() {
    if (++nest_ > max_depth_) {
      return SyntaxError("expression nested deeper than " + std::to_string(max_depth_), Cur().pos);
    }
    return Status::Ok();
  }

  Result<ExprPtr> Finish(std::unique_ptr<Expr> node) {
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

  static std::unique_ptr<Expr> Make(Expr::Kind kind, size_t pos) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = pos;
    return e;
  }

 private:
  bool TupleEnds(bool explicit_parens) const {
    if (AtEnd()) return true;
    if (explicit_parens && IsOp(")")) return true;
    if (IsOp("=")) return true;  // set targets
    return Cur().type == Token::Type::kName && (Cur().s == "in" || Cur().s == "recursive");
  }

  Result<ExprPtr> CondExpr() {
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

  Result<ExprPtr> And() {
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

  Result<ExprPtr> Not() {
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

  Result<ExprPtr> Compare() {
    const size_t pos = Cur().pos;
    GRIDFEED_ASSIGN_OR_RETURN(ExprPtr e, Math1());
    std::unique_ptr<Expr> node;
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

  using Level = Result<ExprPtr> (ExprParser::*)();

  Result<ExprPtr> Binary(std::initializer_list<const char*> ops, Level next) {
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
  Result<ExprPtr> Math1() { return Binary({"+", "-"}, &ExprParser::Concat); }
  Result<ExprPtr> Concat() {
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
  Result<ExprPtr> Math2() { return Binary({"*", "/", "//", "%"}, &ExprParser::Pow); }
  Result<ExprPtr> Pow() { return Binary({"**"}, &ExprParser::UnaryWithFilter); }
  Result<ExprPtr> UnaryWithFilter() { return Unary(true); }

  Result<ExprPtr> Unary(bool with_filter) {
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

  Result<ExprPtr> Postfix(ExprPtr e) {
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

  Result<ExprPtr> Subscript(ExprPtr e) {
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
  Result<std::vector<ExprPtr>> Args(Expr* node) {
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

  Result<ExprPtr> Call(ExprPtr callee) {
    auto node = Make(Expr::Kind::kCall, Cur().pos);
    node->args.push_back(std::move(callee));
    GRIDFEED_RETURN_IF_ERROR(Args(node.get()).status());
    return Finish(std::move(node));
  }

  Result<std::string> DottedName() {
    GRIDFEED_ASSIGN_OR_RETURN(std::string n, ExpectName("a name"));
    while (IsOp(".")) {
      Next();
      GRIDFEED_ASSIGN_OR_RETURN(std::string more, ExpectName("a name"));
      n += "." + more;
    }
    return n;
  }

  Result<ExprPtr> FilterExpr(ExprPtr e, bool start_inline) {
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
        if (!IsTest(name))
          return SyntaxError("no test named '" + name + "' (or not supported)", pos);
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

  const std::vector<Token>& t_;
  size_t k_ = 0;
  int max_depth_;
  int nest_ = 0;
};

// Statements over segments.
class TemplateParser {
 public:
  TemplateParser(std::vector<Segment> segs, int max_depth)
      : segs_(std::move(segs)), max_depth_(max_depth) {}

  Result<std::vector<Node>> Run() {
    std::vector<Node> body;
    std::string stop;
    GRIDFEED_RETURN_IF_ERROR(Body({}, &body, &stop, 0));
    return body;
  }

 private:
  // Parses nodes until a block tag named in `stops` (left for the caller in *stop, its segment
  // consumed) or the end of the template (stop empty).
  Status Body(const std::vector<std::string_view>& stops, std::vector<Node>* out, std::string* stop,
              size_t open_pos) {
    if (++depth_ > max_depth_) {
      --depth_;
      return SyntaxError("blocks nested deeper than " + std::to_string(max_depth_), open_pos);
    }
    Status st = BodyImpl(stops, out, stop, open_pos);
    --depth_;
    return st;
  }

  Status BodyImpl(const std::vector<std::string_view>& stops, std::vector<Node>* out,
                  std::string* stop, size_t open_pos) {
    while (k_ < segs_.size()) {
      Segment& seg = segs_[k_++];
      if (seg.kind == Segment::Kind::kText) {
        Node n;
        n.kind = Node::Kind::kText;
        n.pos = seg.pos;
        n.text = std::move(seg.text);
        out->push_back(std::move(n));
        continue;
      }
      ExprParser p(seg.tokens, max_depth_);
      if (seg.kind == Segment::Kind::kVar) {
        Node n;
        n.kind = Node::Kind::kOutput;
        n.pos = seg.pos;
        GRIDFEED_ASSIGN_OR_RETURN(n.expr, p.Tuple());
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
      } else if (tag == "macro") {
        GRIDFEED_RETURN_IF_ERROR(Macro(p, seg.pos, out));
      } else if (tag == "call") {
        GRIDFEED_RETURN_IF_ERROR(CallBlock(p, seg.pos, out));
      } else if (tag == "filter") {
        GRIDFEED_RETURN_IF_ERROR(FilterBlock(p, seg.pos, out));
      } else if (tag == "generation") {
        Node n;
        n.kind = Node::Kind::kGeneration;
        n.pos = seg.pos;
        GRIDFEED_RETURN_IF_ERROR(p.ExpectEnd());
        GRIDFEED_RETURN_IF_ERROR(Block(&n, "endgeneration", seg.pos));
        out->push_back(std::move(n));
      } else if (tag == "break" || tag == "continue") {
        if (loop_depth_ == 0) {
          return SyntaxError("'" + tag + "' outside of a loop", seg.pos);
        }
        GRIDFEED_RETURN_IF_ERROR(p.ExpectEnd());
        Node n;
        n.kind = tag == "break" ? Node::Kind::kBreak : Node::Kind::kContinue;
        n.pos = seg.pos;
        out->push_back(std::move(n));
      } else if (tag == "include" || tag == "import" || tag == "from" || tag == "extends" ||
                 tag == "block" || tag == "with" || tag == "autoescape" || tag == "do" ||
                 tag == "trans") {
        return SyntaxError("tag '" + tag + "' is not supported", seg.pos);
      } else {
        std::string msg = "unknown or unexpected tag '" + tag + "'";
        if (!stops.empty()) {
          msg += " (expected ";
          for (size_t k = 0; k < stops.size(); ++k) {
            msg += (k ? " or " : "") + std::string(stops[k]);
          }
          msg += ")";
        }
        return SyntaxError(msg, seg.pos);
      }
    }
    if (!stops.empty()) {
      std::string want;
      for (auto s : stops) want += (want.empty() ? "" : " or ") + std::string(s);
      return SyntaxError("unexpected end of template, expected " + want, open_pos);
    }
    stop->clear();
    return Status::Ok();
  }

  // The tag that ended a body: its tokens after the name.
  ExprParser StopParser() {
    ExprParser p(cur_block_->tokens, max_depth_);
    p.Next();
    return p;
  }

  // A body ending at `end` (whose tag must hold nothing else), into n->branches[0].
  Status Block(Node* n, const char* end, size_t pos) {
    std::vector<Node> body;
    std::string stop;
    GRIDFEED_RETURN_IF_ERROR(Body({end}, &body, &stop, pos));
    ExprParser sp = StopParser();
    // {% endmacro name %} / {% endblock %} may repeat the name.
    if (sp.Cur().type == Token::Type::kName && n->kind == Node::Kind::kMacro) sp.Next();
    GRIDFEED_RETURN_IF_ERROR(sp.ExpectEnd());
    n->branches.emplace_back(nullptr, std::move(body));
    return Status::Ok();
  }

  // parse_assign_target: a name or names separated by commas (optionally in parentheses).
  Status Targets(ExprParser& p, std::vector<std::string>* out) {
    const bool paren = p.IsOp("(");
    if (paren) p.Next();
    while (true) {
      GRIDFEED_ASSIGN_OR_RETURN(std::string n, p.ExpectName("a target name"));
      out->push_back(std::move(n));
      if (!p.IsOp(",")) break;
      p.Next();
      if (paren && p.IsOp(")")) break;
      if (!paren && (p.IsName("in") || p.IsOp("="))) break;
    }
    if (paren) GRIDFEED_RETURN_IF_ERROR(p.Expect(")"));
    return Status::Ok();
  }

  Status For(ExprParser& p, size_t pos, std::vector<Node>* out) {
    Node n;
    n.kind = Node::Kind::kFor;
    n.pos = pos;
    GRIDFEED_RETURN_IF_ERROR(Targets(p, &n.targets));
    if (!p.IsName("in")) return SyntaxError("expected 'in'", p.Cur().pos);
    p.Next();
    GRIDFEED_ASSIGN_OR_RETURN(n.expr, p.Tuple(/*with_condexpr=*/false));
    if (p.IsName("if")) {
      p.Next();
      GRIDFEED_ASSIGN_OR_RETURN(n.cond, p.Expression());
    }
    if (p.IsName("recursive")) return SyntaxError("recursive loops are not supported", p.Cur().pos);
    GRIDFEED_RETURN_IF_ERROR(p.ExpectEnd());
    std::vector<Node> body;
    std::string stop;
    ++loop_depth_;
    Status st = Body({"endfor", "else"}, &body, &stop, pos);
    --loop_depth_;
    GRIDFEED_RETURN_IF_ERROR(st);
    GRIDFEED_RETURN_IF_ERROR(StopParser().ExpectEnd());
    if (stop == "else") {
      const int saved = loop_depth_;
      loop_depth_ = 0;  // Jinja: the else body is outside the loop
      st = Body({"endfor"}, &n.else_body, &stop, pos);
      loop_depth_ = saved;
      GRIDFEED_RETURN_IF_ERROR(st);
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
    GRIDFEED_ASSIGN_OR_RETURN(ExprPtr cond, p.Tuple(/*with_condexpr=*/false));
    GRIDFEED_RETURN_IF_ERROR(p.ExpectEnd());
    while (true) {
      std::vector<Node> body;
      std::string stop;
      GRIDFEED_RETURN_IF_ERROR(Body({"elif", "else", "endif"}, &body, &stop, pos));
      n.branches.emplace_back(std::move(cond), std::move(body));
      ExprParser sp = StopParser();
      if (stop == "elif") {
        GRIDFEED_ASSIGN_OR_RETURN(cond, sp.Tuple(false));
        GRIDFEED_RETURN_IF_ERROR(sp.ExpectEnd());
        continue;
      }
      GRIDFEED_RETURN_IF_ERROR(sp.ExpectEnd());
      if (stop == "else") {
        GRIDFEED_RETURN_IF_ERROR(Body({"endif"}, &n.else_body, &stop, pos));
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
    if (p.Cur().type == Token::Type::kName && p.Peek().type == Token::Type::kOp &&
        p.Peek().s == ".") {
      // {% set ns.attr = value %}
      n.targets.push_back(p.Cur().s);
      p.Next();
      p.Next();
      GRIDFEED_ASSIGN_OR_RETURN(n.text, p.ExpectName("an attribute name"));
      GRIDFEED_RETURN_IF_ERROR(p.Expect("="));
      GRIDFEED_ASSIGN_OR_RETURN(n.expr, p.Tuple());
      GRIDFEED_RETURN_IF_ERROR(p.ExpectEnd());
      out->push_back(std::move(n));
      return Status::Ok();
    }
    GRIDFEED_RETURN_IF_ERROR(Targets(p, &n.targets));
    if (p.IsOp("=")) {
      p.Next();
      GRIDFEED_ASSIGN_OR_RETURN(n.expr, p.Tuple());
      GRIDFEED_RETURN_IF_ERROR(p.ExpectEnd());
      out->push_back(std::move(n));
      return Status::Ok();
    }
    // Block assignment, with an optional filter chain.
    if (n.targets.size() != 1) return SyntaxError("expected '='", p.Cur().pos);
    n.kind = Node::Kind::kSetBlock;
    if (p.IsOp("|")) {
      p.Next();
      auto base = ExprParser::Make(Expr::Kind::kBlockValue, p.Cur().pos);
      GRIDFEED_ASSIGN_OR_RETURN(n.expr, p.FilterChain(std::move(base)));
    }
    GRIDFEED_RETURN_IF_ERROR(p.ExpectEnd());
    GRIDFEED_RETURN_IF_ERROR(Block(&n, "endset", pos));
    out->push_back(std::move(n));
    return Status::Ok();
  }

  // Parameters `(a, b=default, ...)` of a macro or a call block.
  Status Params(ExprParser& p, Node* n) {
    GRIDFEED_RETURN_IF_ERROR(p.Expect("("));
    while (!p.IsOp(")")) {
      if (!n->targets.empty()) GRIDFEED_RETURN_IF_ERROR(p.Expect(","));
      GRIDFEED_ASSIGN_OR_RETURN(std::string name, p.ExpectName("a parameter name"));
      n->targets.push_back(std::move(name));
      ExprPtr dflt;
      if (p.IsOp("=")) {
        p.Next();
        GRIDFEED_ASSIGN_OR_RETURN(dflt, p.Expression());
      } else if (!n->defaults.empty() && n->defaults.back()) {
        return SyntaxError("parameter without a default after one with a default", p.Cur().pos);
      }
      n->defaults.push_back(std::move(dflt));
    }
    p.Next();
    return Status::Ok();
  }

  Status Macro(ExprParser& p, size_t pos, std::vector<Node>* out) {
    Node n;
    n.kind = Node::Kind::kMacro;
    n.pos = pos;
    GRIDFEED_ASSIGN_OR_RETURN(n.text, p.ExpectName("a macro name"));
    GRIDFEED_RETURN_IF_ERROR(Params(p, &n));
    GRIDFEED_RETURN_IF_ERROR(p.ExpectEnd());
    const int saved = loop_depth_;
    loop_depth_ = 0;
    Status st = Block(&n, "endmacro", pos);
    loop_depth_ = saved;
    GRIDFEED_RETURN_IF_ERROR(st);
    out->push_back(std::move(n));
    return Status::Ok();
  }

  Status CallBlock(ExprParser& p, size_t pos, std::vector<Node>* out) {
    Node n;
    n.kind = Node::Kind::kCallBlock;
    n.pos = pos;
    if (p.IsOp("(")) GRIDFEED_RETURN_IF_ERROR(Params(p, &n));
    GRIDFEED_ASSIGN_OR_RETURN(n.expr, p.Expression());
    if (n.expr->kind != Expr::Kind::kCall) return SyntaxError("expected a call", n.expr->pos);
    GRIDFEED_RETURN_IF_ERROR(p.ExpectEnd());
    const int saved = loop_depth_;
    loop_depth_ = 0;
    Status st = Block(&n, "endcall", pos);
    loop_depth_ = saved;
    GRIDFEED_RETURN_IF_ERROR(st);
    out->push_back(std::move(n));
    return Status::Ok();
  }

  Status FilterBlock(ExprParser& p, size_t pos, std::vector<Node>* out) {
    Node n;
    n.kind = Node::Kind::kFilterBlock;
    n.pos = pos;
    auto base = ExprParser::Make(Expr::Kind::kBlockValue, pos);
    GRIDFEED_ASSIGN_OR_RETURN(n.expr, p.FilterChain(std::move(base)));
    GRIDFEED_RETURN_IF_ERROR(p.ExpectEnd());
    GRIDFEED_RETURN_IF_ERROR(Block(&n, "endfilter", pos));
    out->push_back(std::move(n));
    return Status::Ok();
  }

  std::vector<Segment> segs_;
  int max_depth_;
  size_t k_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  Segment* cur_block_ = nullptr;
};

}  // namespace

Result<std::vector<Node>> ParseTemplate(std::vector<Segment> segs, int max_depth) {
  return TemplateParser(std::move(segs), max_depth).Run();
}

}  // namespace gridfeed::order::sft::chat_template_internal
