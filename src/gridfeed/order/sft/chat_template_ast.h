// Internal to order/sft: what the pieces of the chat-template renderer (chat_template.cc and
// chat_template_{pystr,value,lexer,parser,eval}.cc) share: Python string helpers, the Value
// model, the lexer's tokens and segments, the AST, and the entry points of each stage. Not for
// other modules: the public contract is chat_template.h (and PyStrip in conversation.h); nothing
// here is stable or checked beyond what ChatTemplate needs.
//
// Stages: NormalizeNewlines + Lex (chat_template_lexer.cc) -> ParseTemplate
// (chat_template_parser.cc) -> RenderTemplate (chat_template_eval.cc), driven by
// chat_template.cc. Text handed to these functions is valid UTF-8 (checked at the boundary).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gridfeed/core/status.h"

namespace gridfeed::order::sft::chat_template_internal {

// ---------------------------------------------------------------------------------------------
// Python string semantics on UTF-8 (chat_template_pystr.cc).

// Code points of text that is valid UTF-8 by construction (validated at the boundary).
std::vector<char32_t> Cps(std::string_view s);
std::string FromCps(std::span<const char32_t> cps);
// str.strip/lstrip/rstrip: `chars` nullopt means whitespace.
std::string PyStripImpl(std::string_view s, const std::optional<std::string>& chars, bool left,
                        bool right);
// Length of the run of Python whitespace starting at byte `p` of `s`.
size_t SpaceRun(std::string_view s, size_t p);
bool AllPySpace(std::string_view s);
// str.replace(old, new, count) with Python's rule for an empty `old` (insert between every
// code point, count-limited).
std::string PyReplace(const std::string& s, const std::string& old, const std::string& rep,
                      int64_t count);
bool IsAscii(std::string_view s);

// ---------------------------------------------------------------------------------------------
// Values (chat_template_value.cc).

struct Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;

struct Value {
  enum class Kind { kUndefined, kNone, kBool, kInt, kStr, kList, kDict };
  Kind kind = Kind::kUndefined;
  bool b = false;
  int64_t i = 0;
  std::string s;  // kStr: the text; kUndefined: what was missing, for messages
  std::shared_ptr<const List> list;
  std::shared_ptr<const Dict> dict;

  static Value Undefined(std::string what) {
    Value v;
    v.s = std::move(what);
    return v;
  }
  static Value None() {
    Value v;
    v.kind = Kind::kNone;
    return v;
  }
  static Value Bool(bool x) {
    Value v;
    v.kind = Kind::kBool;
    v.b = x;
    return v;
  }
  static Value Int(int64_t x) {
    Value v;
    v.kind = Kind::kInt;
    v.i = x;
    return v;
  }
  static Value Str(std::string x) {
    Value v;
    v.kind = Kind::kStr;
    v.s = std::move(x);
    return v;
  }
  static Value MakeList(List x) {
    Value v;
    v.kind = Kind::kList;
    v.list = std::make_shared<const List>(std::move(x));
    return v;
  }
  static Value MakeDict(Dict x) {
    Value v;
    v.kind = Kind::kDict;
    v.dict = std::make_shared<const Dict>(std::move(x));
    return v;
  }
  bool is(Kind k) const { return kind == k; }
  // Python's bool is an int subtype: True + 1, 'ab'[True].
  bool IsIntLike() const { return kind == Kind::kInt || kind == Kind::kBool; }
  int64_t AsInt() const { return kind == Kind::kBool ? (b ? 1 : 0) : i; }
};

const Value* DictFind(const Dict& d, std::string_view key);
bool Truthy(const Value& v);
bool PyEquals(const Value& a, const Value& b);
// str(v), what {{ v }}, ~ and the string filters produce.
Result<std::string> ToStr(const Value& v);
Result<std::string> Repr(const Value& v);

// ---------------------------------------------------------------------------------------------
// Lexer: Jinja's, for the default delimiters (chat_template_lexer.cc).

struct Token {
  enum class Type { kName, kStr, kInt, kOp, kEnd };
  Type type = Type::kEnd;
  std::string s;  // name, unescaped string, operator
  int64_t i = 0;
  size_t pos = 0;  // byte offset in the (newline-normalised) source
};

struct Segment {
  enum class Kind { kText, kVar, kBlock };
  Kind kind = Kind::kText;
  std::string text;
  std::vector<Token> tokens;  // the last is kEnd
  size_t pos = 0;
};

// InvalidArgument "chat template: <what> at offset <pos>", for parse-time errors.
Status SyntaxError(const std::string& what, size_t pos);
// Jinja 3 splits on \r\n, \r and \n only, joins with \n and drops one trailing newline
// (keep_trailing_newline is false).
std::string NormalizeNewlines(std::string_view src);
// Segments of newline-normalised source, with trim_blocks and lstrip_blocks applied.
Result<std::vector<Segment>> Lex(std::string src);

// ---------------------------------------------------------------------------------------------
// AST (built by chat_template_parser.cc).

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLit,
    kName,
    kAttr,   // args[0].name
    kItem,   // args[0][args[1]]
    kSlice,  // args[0][args[1]:args[2]:args[3]], missing parts null
    kList,
    kBinary,  // name is the operator: + - * // % ** / ~
    kNot,
    kNeg,
    kPos,
    kAnd,
    kOr,
    kCond,     // args: value, condition, else (null: undefined)
    kCompare,  // args[0] (ops[k] args[k+1])*
    kFilter,   // name(args[0], args[1:]...)
    kTest,     // args[0] is name; negated
    kRaise,
    kMethod,  // args[0].name(args[1:]...)
  };
  Kind kind = Kind::kLit;
  size_t pos = 0;
  Value lit;
  std::string name;
  std::vector<ExprPtr> args;
  std::vector<std::string> ops;
  bool negated = false;
};

struct Node {
  enum class Kind { kText, kOutput, kFor, kIf, kSet };
  Kind kind = Kind::kText;
  size_t pos = 0;
  std::string text;  // kText
  std::string var;   // kFor target, kSet name
  ExprPtr expr;      // kOutput, kFor iterable, kSet value
  std::vector<std::pair<ExprPtr, std::vector<Node>>> branches;  // kIf; kFor uses branches[0]
  std::vector<Node> else_body;                                  // kIf and kFor
};

// The str methods the parser accepts as calls; attribute access to them is refused at runtime.
extern const std::vector<std::string_view> kStrMethods;
bool Contains(const std::vector<std::string_view>& v, std::string_view s);

// Statements over segments.
Result<std::vector<Node>> ParseTemplate(std::vector<Segment> segs);

// ---------------------------------------------------------------------------------------------
// Evaluation (chat_template_eval.cc).

// Renders `nodes` with `globals` as the outermost scope.
Result<std::string> RenderTemplate(const std::vector<Node>& nodes,
                                   std::map<std::string, Value> globals);

}  // namespace gridfeed::order::sft::chat_template_internal
