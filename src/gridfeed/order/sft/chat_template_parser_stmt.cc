// The chat-template parser, statements: the tags over segments (for, if, set, macro, call, filter,
// generation, break, continue) into the AST; any other tag is refused here, naming it, and block
// nesting is bounded (internal contract: chat_template_ast.h).

#include <string>
#include <utility>
#include <vector>

#include "gridfeed/order/sft/chat_template_ast.h"
#include "gridfeed/order/sft/chat_template_parser_internal.h"

namespace gridfeed::order::sft::chat_template_internal {
namespace {

using detail::Contains;
using detail::ExprParser;

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
