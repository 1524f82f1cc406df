// Internal to order/sft: what the pieces of the chat-template renderer (chat_template.cc and
// chat_template_{pystr,value,lexer,parser_*,eval*,filters*,methods}.cc) share: Python string
// helpers, the Value model, the lexer's tokens and segments, the AST, and the entry points of
// each stage. Not for other modules: the public contract is chat_template.h (and PyStrip in
// conversation.h); nothing here is stable or checked beyond what ChatTemplate needs.
//
// Stages: NormalizeNewlines + Lex (chat_template_lexer.cc) -> ParseTemplate
// (chat_template_parser_stmt.cc, _expr.cc, _primary.cc) -> RenderTemplate (chat_template_eval.cc,
// _stmt.cc, _expr.cc, with the filters and tests in chat_template_filters*.cc and the methods of
// str/dict/list in chat_template_methods.cc), driven by chat_template.cc. Text handed to these
// functions is valid UTF-8 (checked at the boundary). Every error is InvalidArgument
// "chat template: <what> at offset <pos>"; the boundary turns the offset into a line and column.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <functional>
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
size_t CpCount(std::string_view s);
bool IsPySpace(char32_t c);
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
// Full Unicode case mappings as CPython's str methods (ICU's root-locale full mappings, with
// final sigma in lower()).
std::string PyLower(std::string_view s);
std::string PyUpper(std::string_view s);
std::string PyTitle(std::string_view s);       // str.title()
std::string PyCapitalize(std::string_view s);  // str.capitalize()
std::string PySwapcase(std::string_view s);
std::string PyCasefold(std::string_view s);
bool PyIsAlnumCp(char32_t c);      // str.isalnum() of one code point (re's \w minus '_')
bool PyIsPrintableCp(char32_t c);  // str.isprintable() of one code point
bool PyIsCasedCp(char32_t c);
bool PyIsLowerCp(char32_t c);
bool PyIsUpperCp(char32_t c);
bool PyIsDigitCp(char32_t c);    // str.isdigit()
bool PyIsDecimalCp(char32_t c);  // str.isdecimal()
bool PyIsNumericCp(char32_t c);  // str.isnumeric()
bool PyIsAlphaCp(char32_t c);    // str.isalpha()
// str.split(sep, maxsplit) / rsplit; sep nullopt splits on whitespace runs.
std::vector<std::string> PySplit(std::string_view s, const std::optional<std::string>& sep,
                                 int64_t maxsplit, bool from_right);
std::vector<std::string> PySplitLines(std::string_view s, bool keepends);

// ---------------------------------------------------------------------------------------------
// Values (chat_template_value.cc).

struct Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;

struct CallArgs;
// A function value: globals (raise_exception, namespace, range...), bound methods, macros.
struct Callable {
  std::string name;
  std::function<Result<Value>(CallArgs&, size_t pos)> fn;
};

struct Value {
  enum class Kind {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kStr,
    kList,
    kTuple,
    kDict,
    kNamespace,
    kCallable
  };
  // How a list-like value came to be: Python gives generators (map, select, reverse...) and
  // dict views / ranges other truthiness, len, printing and indexing than lists.
  enum class Flavor : uint8_t { kPlain, kGenerator, kView };
  Kind kind = Kind::kUndefined;
  Flavor flavor = Flavor::kPlain;
  bool markup = false;  // a str made by |safe or |escape (Markup)
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;                       // kStr: the text; kUndefined: what was missing, for messages
  std::shared_ptr<const List> list;    // kList, kTuple
  std::shared_ptr<const Dict> dict;    // kDict
  std::shared_ptr<Dict> ns;            // kNamespace (mutable through {% set ns.x %})
  std::shared_ptr<const Callable> fn;  // kCallable

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
  static Value Float(double x) {
    Value v;
    v.kind = Kind::kFloat;
    v.f = x;
    return v;
  }
  static Value Str(std::string x) {
    Value v;
    v.kind = Kind::kStr;
    v.s = std::move(x);
    return v;
  }
  static Value MakeList(List x, Flavor flavor = Flavor::kPlain) {
    Value v;
    v.kind = Kind::kList;
    v.flavor = flavor;
    v.list = std::make_shared<const List>(std::move(x));
    return v;
  }
  static Value MakeTuple(List x) {
    Value v;
    v.kind = Kind::kTuple;
    v.list = std::make_shared<const List>(std::move(x));
    return v;
  }
  static Value MakeDict(Dict x) {
    Value v;
    v.kind = Kind::kDict;
    v.dict = std::make_shared<const Dict>(std::move(x));
    return v;
  }
  static Value MakeNamespace(Dict x) {
    Value v;
    v.kind = Kind::kNamespace;
    v.ns = std::make_shared<Dict>(std::move(x));
    return v;
  }
  static Value MakeCallable(std::string name,
                            std::function<Result<Value>(CallArgs&, size_t pos)> fn) {
    Value v;
    v.kind = Kind::kCallable;
    v.fn = std::make_shared<const Callable>(Callable{std::move(name), std::move(fn)});
    return v;
  }
  bool is(Kind k) const { return kind == k; }
  bool IsUndefined() const { return kind == Kind::kUndefined; }
  bool IsStr() const { return kind == Kind::kStr; }
  // list or tuple (any flavor)
  bool IsSeq() const { return kind == Kind::kList || kind == Kind::kTuple; }
  bool IsPlainSeq() const { return IsSeq() && flavor == Flavor::kPlain; }
  // Python's bool is an int subtype: True + 1, 'ab'[True].
  bool IsIntLike() const { return kind == Kind::kInt || kind == Kind::kBool; }
  bool IsNumber() const { return IsIntLike() || kind == Kind::kFloat; }
  int64_t AsInt() const { return kind == Kind::kBool ? (b ? 1 : 0) : i; }
  double AsDouble() const { return kind == Kind::kFloat ? f : static_cast<double>(AsInt()); }
};

// Positional and keyword arguments of a call, a filter or a test (the value filtered or tested
// is not among them).
struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};

const Value* DictFind(const Dict& d, std::string_view key);
// The Python type name, for messages ('str', 'NoneType', 'generator'...).
std::string TypeName(const Value& v);
bool Truthy(const Value& v);
bool PyEquals(const Value& a, const Value& b);
// Python's <, for sorting and comparisons: -1, 0, 1; InvalidArgument for unorderable types.
Result<int> PyCompare(const Value& a, const Value& b);
// Python's float repr.
std::string FloatRepr(double x);
// str(v), what {{ v }}, ~ and the string filters produce; InvalidArgument (no position) for
// what Python would print as an object address (generators, functions).
Result<std::string> ToStr(const Value& v);
Result<std::string> Repr(const Value& v);
struct JsonOptions {
  std::optional<std::string> indent;  // nullopt: one line
  std::string item_sep = ", ";
  std::string key_sep = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};
// Python's json.dumps; InvalidArgument (no position) for what it cannot serialize.
Result<std::string> ToJson(const Value& v, const JsonOptions& options);

// ---------------------------------------------------------------------------------------------
// Lexer: Jinja's, for the default delimiters (chat_template_lexer.cc).

struct Token {
  enum class Type { kName, kStr, kInt, kFloat, kOp, kEnd };
  Type type = Type::kEnd;
  std::string s;  // name, unescaped string, operator
  int64_t i = 0;
  double f = 0;
  size_t pos = 0;  // byte offset in the (newline-normalised) source
};

struct Segment {
  enum class Kind { kText, kVar, kBlock };
  Kind kind = Kind::kText;
  std::string text;
  std::vector<Token> tokens;  // the last is kEnd
  size_t pos = 0;
};

// InvalidArgument "chat template: <what> at offset <pos>".
Status SyntaxError(const std::string& what, size_t pos);
// Jinja 3 splits on \r\n, \r and \n only, joins with \n and drops one trailing newline
// (keep_trailing_newline is false).
std::string NormalizeNewlines(std::string_view src);
// Segments of newline-normalised source, with trim_blocks and lstrip_blocks applied.
Result<std::vector<Segment>> Lex(std::string src);

// ---------------------------------------------------------------------------------------------
// AST (built by chat_template_parser_*.cc).

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
    kTuple,
    kDict,    // args: key0, value0, key1, value1...
    kBinary,  // name is the operator: + - * // % ** /
    kConcat,  // args joined with ~
    kNot,
    kNeg,
    kPos,
    kAnd,
    kOr,
    kCond,        // args: value, condition, else (null: undefined)
    kCompare,     // args[0] (ops[k] args[k+1])*
    kFilter,      // name(args[0], args[1:]..., kwargs); args[0] null in a filter block
    kTest,        // name(args[0], args[1:]..., kwargs); negated
    kCall,        // args[0](args[1:]..., kwargs)
    kBlockValue,  // the rendered body a {% filter %} or {% set x | f %} block filters
  };
  Kind kind = Kind::kLit;
  size_t pos = 0;
  Value lit;
  std::string name;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  bool negated = false;
  int depth = 1;  // of the tree below, bounded by the parser
};

struct Node {
  enum class Kind {
    kText,
    kOutput,
    kFor,
    kIf,
    kSet,        // targets = expr (names, or ns.attr in `attr`)
    kSetBlock,   // {% set x %}body{% endset %}, expr: optional filter chain over kBlockValue
    kMacro,      // name, params (targets) with defaults, body
    kCallBlock,  // {% call(params) macro(...) %}body{% endcall %}
    kFilterBlock,
    kGeneration,  // transformers' {% generation %}: renders its body
    kBreak,
    kContinue,
  };
  Kind kind = Kind::kText;
  size_t pos = 0;
  std::string text;                  // kText; kMacro name; kSet namespace attribute
  std::vector<std::string> targets;  // kFor / kSet / kSetBlock names; kMacro/kCallBlock params
  std::vector<ExprPtr> defaults;     // kMacro / kCallBlock: per param, null when none
  ExprPtr expr;  // kOutput, kFor iterable, kSet value, kCallBlock call, filter chains
  ExprPtr cond;  // kFor `if` filter
  std::vector<std::pair<ExprPtr, std::vector<Node>>> branches;  // kIf; others use branches[0]
  std::vector<Node> else_body;                                  // kIf and kFor
};

// Limits of the parser (nesting) and of a render (steps, output and value bytes, call depth).
struct Limits {
  int max_depth = 256;
  int64_t max_steps = 100'000'000;
  int64_t max_bytes = int64_t{256} << 20;
};

// Known filters and tests (Jinja's others are refused by name).
bool IsFilter(std::string_view name);
bool IsTest(std::string_view name);

// Statements over segments; InvalidArgument naming the offset for anything outside the
// supported set or nested deeper than `max_depth`.
Result<std::vector<Node>> ParseTemplate(std::vector<Segment> segs, int max_depth);

// ---------------------------------------------------------------------------------------------
// Evaluation (chat_template_eval*.cc).

struct RenderEnv {
  Limits limits;
  std::tm now{};  // what strftime_now formats
};

// Renders `nodes` with `globals` as the outermost scope.
Result<std::string> RenderTemplate(const std::vector<Node>& nodes,
                                   std::map<std::string, Value> globals, const RenderEnv& env);

// Services the evaluator offers filters and methods (chat_template_eval.cc).
class Evaluator {
 public:
  virtual ~Evaluator() = default;
  // Counts work; InvalidArgument naming `pos` past the step limit.
  virtual Status Step(size_t pos, int64_t n = 1) = 0;
  // InvalidArgument naming `pos` when a value of `bytes` would pass the byte limit.
  virtual Status CheckBytes(size_t pos, uint64_t bytes, const char* what) = 0;
  virtual Result<Value> ApplyFilter(const std::string& name, const Value& v, CallArgs& args,
                                    size_t pos) = 0;
  virtual Result<bool> ApplyTest(const std::string& name, const Value& v, CallArgs& args,
                                 size_t pos) = 0;
  virtual Result<Value> Call(const Value& callee, CallArgs& args, size_t pos) = 0;
  // Jinja's environment.getattr / getitem (sandboxed).
  virtual Result<Value> GetAttr(const Value& obj, const std::string& name, size_t pos) = 0;
  virtual Result<Value> GetItem(const Value& obj, const Value& key, size_t pos) = 0;
};

Status RuntimeError(const std::string& what, size_t pos);
// Items of an iterable as Python iterates it (str: code points, dict: keys); Undefined is
// empty; InvalidArgument for what is not iterable.
Result<List> Iterate(const Value& v, size_t pos);

// Filters and tests (chat_template_filters.cc, the filters by family in
// chat_template_filters_{string,sequence,mapping,number}.cc).
Result<Value> RunFilter(Evaluator& ev, const std::string& name, const Value& v, CallArgs& args,
                        size_t pos);
Result<bool> RunTest(Evaluator& ev, const std::string& name, const Value& v, CallArgs& args,
                     size_t pos);

// Methods of str, dict and list (chat_template_methods.cc): the bound method named `name` of
// `self`, or nullopt when Python's type has no such attribute. A method the sandbox forbids
// (list.append...) gives an Undefined that fails when called, as jinja2 does.
std::optional<Value> BindMethod(Evaluator& ev, const Value& self, const std::string& name);
// Python's `str % args`.
Result<std::string> PercentFormat(const std::string& fmt, const Value& args, size_t pos);

// Argument binding: positional then keyword, by parameter name; InvalidArgument naming `what`
// for unknown keywords, too many arguments, a parameter given twice or a required one missing.
Result<std::vector<std::optional<Value>>> BindArgs(const CallArgs& args,
                                                   const std::vector<std::string_view>& params,
                                                   size_t required, const std::string& what,
                                                   size_t pos);

}  // namespace gridfeed::order::sft::chat_template_internal
