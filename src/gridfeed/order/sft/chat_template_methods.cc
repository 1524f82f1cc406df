// Methods of str, dict and list as Python has them, bound when a template reads `x.name`
// (jinja2 tries the attribute before the item), with the sandbox's rules: the methods that
// mutate a list or dict give an Undefined that fails when called; str.format goes through a
// formatter; Python's `%` formatting for the simple conversions (internal contract:
// chat_template_ast.h). A method Python has but gridfeed does not implement fails when called,
// naming it, never renders something else.

#include <unicode/uchar.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "gridfeed/order/sft/chat_template_ast.h"

namespace gridfeed::order::sft::chat_template_internal {
namespace {

const std::vector<std::string_view> kStrAttrs = {
    "capitalize",   "casefold",    "center",    "count",      "encode",       "endswith",
    "expandtabs",   "find",        "format",    "format_map", "index",        "isalnum",
    "isalpha",      "isascii",     "isdecimal", "isdigit",    "isidentifier", "islower",
    "isnumeric",    "isprintable", "isspace",   "istitle",    "isupper",      "join",
    "ljust",        "lower",       "lstrip",    "maketrans",  "partition",    "removeprefix",
    "removesuffix", "replace",     "rfind",     "rindex",     "rjust",        "rpartition",
    "rsplit",       "rstrip",      "split",     "splitlines", "startswith",   "strip",
    "swapcase",     "title",       "translate", "upper",      "zfill"};
const std::vector<std::string_view> kDictAttrs = {"clear",      "copy",   "fromkeys", "get",
                                                  "items",      "keys",   "pop",      "popitem",
                                                  "setdefault", "update", "values"};
const std::vector<std::string_view> kDictUnsafe = {"clear", "pop", "popitem", "setdefault",
                                                   "update"};
const std::vector<std::string_view> kListAttrs = {"append", "clear",   "copy",   "count",
                                                  "extend", "index",   "insert", "pop",
                                                  "remove", "reverse", "sort"};
const std::vector<std::string_view> kListUnsafe = {"append", "clear",  "extend",  "insert",
                                                   "pop",    "remove", "reverse", "sort"};

bool In(const std::vector<std::string_view>& v, std::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

Status NeedStr(const Value& v, const std::string& what, size_t pos) {
  if (!v.IsStr()) {
    return RuntimeError(what + " argument must be str, not " + TypeName(v), pos);
  }
  return Status::Ok();
}

// Code point bounds of s[start:end] as Python's str methods take them.
void Bounds(int64_t n, const std::optional<Value>& start, const std::optional<Value>& end,
            int64_t* b, int64_t* e) {
  auto adj = [n](int64_t v) {
    if (v < 0) v = std::max<int64_t>(0, v + n);
    return std::min(v, n);
  };
  *b = start && start->IsIntLike() ? adj(start->AsInt()) : 0;
  *e = end && end->IsIntLike() ? adj(end->AsInt()) : n;
}

// Index (in code points) of `sub` in s[b:e], from the left or the right; -1 when absent.
int64_t Find(const std::vector<char32_t>& s, const std::vector<char32_t>& sub, int64_t b, int64_t e,
             bool right) {
  const int64_t m = static_cast<int64_t>(sub.size());
  if (e - b < m) return -1;
  if (!right) {
    for (int64_t k = b; k + m <= e; ++k) {
      if (std::equal(sub.begin(), sub.end(), s.begin() + k)) return k;
    }
  } else {
    for (int64_t k = e - m; k >= b; --k) {
      if (std::equal(sub.begin(), sub.end(), s.begin() + k)) return k;
    }
  }
  return -1;
}

Result<std::string> StrFormat(Evaluator& ev, const std::string& fmt, const CallArgs& args,
                              size_t pos) {
  std::string out;
  size_t auto_idx = 0;
  bool used_auto = false, used_manual = false;
  for (size_t k = 0; k < fmt.size(); ++k) {
    const char c = fmt[k];
    if (c == '}') {
      if (k + 1 < fmt.size() && fmt[k + 1] == '}') {
        out += '}';
        ++k;
        continue;
      }
      return RuntimeError("Single '}' encountered in format string", pos);
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (k + 1 < fmt.size() && fmt[k + 1] == '{') {
      out += '{';
      ++k;
      continue;
    }
    const size_t close = fmt.find('}', k);
    if (close == std::string::npos)
      return RuntimeError("Single '{' encountered in format string", pos);
    std::string field = fmt.substr(k + 1, close - k - 1);
    k = close;
    char conv = 0;
    const size_t colon = field.find(':');
    if (colon != std::string::npos) {
      if (colon + 1 < field.size()) {
        return RuntimeError("str.format: format specs are not supported", pos);
      }
      field.resize(colon);
    }
    const size_t bang = field.find('!');
    if (bang != std::string::npos) {
      if (bang + 2 != field.size() || (field[bang + 1] != 's' && field[bang + 1] != 'r')) {
        return RuntimeError("str.format: only the conversions !s and !r are supported", pos);
      }
      conv = field[bang + 1];
      field.resize(bang);
    }
    if (field.find_first_of(".[") != std::string::npos) {
      return RuntimeError("str.format: attribute and item fields are not supported", pos);
    }
    Value v;
    if (field.empty()) {
      if (used_manual)
        return RuntimeError(
            "cannot switch from manual field specification to automatic field numbering", pos);
      used_auto = true;
      if (auto_idx >= args.pos.size())
        return RuntimeError("Replacement index " + std::to_string(auto_idx) +
                                " out of range for positional args tuple",
                            pos);
      v = args.pos[auto_idx++];
    } else if (std::all_of(field.begin(), field.end(),
                           [](char ch) { return ch >= '0' && ch <= '9'; })) {
      if (used_auto)
        return RuntimeError(
            "cannot switch from automatic field numbering to manual field specification", pos);
      used_manual = true;
      size_t idx = 0;
      const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), idx);
      if (ec != std::errc() || end != field.data() + field.size()) {
        return RuntimeError("Too many decimal digits in format string", pos);
      }
      if (idx >= args.pos.size())
        return RuntimeError(
            "Replacement index " + field + " out of range for positional args tuple", pos);
      v = args.pos[idx];
    } else {
      const Value* found = nullptr;
      for (const auto& kv : args.kw) {
        if (kv.first == field) found = &kv.second;
      }
      if (!found) return RuntimeError("KeyError: '" + field + "'", pos);
      v = *found;
    }
    Result<std::string> s = conv == 'r' ? Repr(v) : ToStr(v);
    if (!s.ok()) return RuntimeError(s.status().message(), pos);
    out += *s;
    GRIDFEED_RETURN_IF_ERROR(ev.CheckBytes(pos, out.size(), "str.format()"));
  }
  return out;
}

Value Unsupported(const std::string& type, const std::string& name) {
  return Value::MakeCallable(type + "." + name,
                             [type, name](CallArgs&, size_t pos) -> Result<Value> {
                               return RuntimeError(type + "." + name + "() is not supported", pos);
                             });
}

std::optional<Value> StrMethod(Evaluator& ev, const Value& self, const std::string& m) {
  if (!In(kStrAttrs, m)) return std::nullopt;
  const std::string s = self.s;
  const bool markup = self.markup;
  auto make = [&](auto fn) {
    return Value::MakeCallable(
        "str." + m, [&ev, s, m, markup, fn](CallArgs& a, size_t pos) -> Result<Value> {
          if (markup)
            return RuntimeError("str." + m + "() of a Markup string is not supported", pos);
          return fn(ev, s, a, pos);
        });
  };
  using A = CallArgs;
  if (m == "strip" || m == "lstrip" || m == "rstrip") {
    return make([m](Evaluator&, const std::string& s, A& a, size_t pos) -> Result<Value> {
      GRIDFEED_ASSIGN_OR_RETURN(auto b, BindArgs(a, {"chars"}, 0, "str." + m + "()", pos));
      std::optional<std::string> chars;
      if (b[0] && !b[0]->is(Value::Kind::kNone)) {
        GRIDFEED_RETURN_IF_ERROR(NeedStr(*b[0], m + "()", pos));
        chars = b[0]->s;
      }
      return Value::Str(PyStripImpl(s, chars, m != "rstrip", m != "lstrip"));
    });
  }
  if (m == "split" || m == "rsplit") {
    return make([m](Evaluator& ev, const std::string& s, A& a, size_t pos) -> Result<Value> {
      GRIDFEED_ASSIGN_OR_RETURN(auto b,
                                BindArgs(a, {"sep", "maxsplit"}, 0, "str." + m + "()", pos));
      std::optional<std::string> sep;
      if (b[0] && !b[0]->is(Value::Kind::kNone)) {
        GRIDFEED_RETURN_IF_ERROR(NeedStr(*b[0], m + "()", pos));
        if (b[0]->s.empty()) return RuntimeError("empty separator", pos);
        sep = b[0]->s;
      }
      int64_t maxsplit = -1;
      if (b[1]) {
        if (!b[1]->IsIntLike()) return RuntimeError("maxsplit must be an integer", pos);
        maxsplit = b[1]->AsInt();
      }
      List out;
      for (auto& p : PySplit(s, sep, maxsplit, m == "rsplit"))
        out.push_back(Value::Str(std::move(p)));
      GRIDFEED_RETURN_IF_ERROR(ev.Step(pos, static_cast<int64_t>(out.size())));
      return Value::MakeList(std::move(out));
    });
  }
  if (m == "splitlines") {
    return make([](Evaluator&, const std::string& s, A& a, size_t pos) -> Result<Value> {
      GRIDFEED_ASSIGN_OR_RETURN(auto b, BindArgs(a, {"keepends"}, 0, "str.splitlines()", pos));
      List out;
      for (auto& p : PySplitLines(s, b[0] && Truthy(*b[0])))
        out.push_back(Value::Str(std::move(p)));
      return Value::MakeList(std::move(out));
    });
  }
  if (m == "startswith" || m == "endswith") {
    return make([m](Evaluator&, const std::string& s, A& a, size_t pos) -> Result<Value> {
      GRIDFEED_ASSIGN_OR_RETURN(auto b,
                                BindArgs(a, {"prefix", "start", "end"}, 1, "str." + m + "()", pos));
      std::vector<std::string> cands;
      if (b[0]->IsStr()) {
        cands.push_back(b[0]->s);
      } else if (b[0]->is(Value::Kind::kTuple)) {
        for (const Value& x : *b[0]->list) {
          GRIDFEED_RETURN_IF_ERROR(NeedStr(x, m + "() tuple", pos));
          cands.push_back(x.s);
        }
      } else {
        return RuntimeError(m + " first arg must be str or a tuple of str, not " + TypeName(*b[0]),
                            pos);
      }
      std::string hay = s;
      if (b[1] || b[2]) {
        const std::vector<char32_t> cps = Cps(s);
        int64_t lo, hi;
        Bounds(static_cast<int64_t>(cps.size()), b[1], b[2], &lo, &hi);
        if (lo > hi) return Value::Bool(false);
        hay = FromCps(std::span<const char32_t>(cps.data() + lo, static_cast<size_t>(hi - lo)));
      }
      for (const std::string& c : cands) {
        if (hay.size() < c.size()) continue;
        if (m == "startswith" ? hay.compare(0, c.size(), c) == 0
                              : hay.compare(hay.size() - c.size(), c.size(), c) == 0) {
          return Value::Bool(true);
        }
      }
      return Value::Bool(false);
    });
  }
  if (m == "replace") {
    return make([](Evaluator& ev, const std::string& s, A& a, size_t pos) -> Result<Value> {
      GRIDFEED_ASSIGN_OR_RETURN(auto b,
                                BindArgs(a, {"old", "new", "count"}, 2, "str.replace()", pos));
      GRIDFEED_RETURN_IF_ERROR(NeedStr(*b[0], "replace()", pos));
      GRIDFEED_RETURN_IF_ERROR(NeedStr(*b[1], "replace()", pos));
      int64_t count = -1;
      if (b[2]) {
        if (!b[2]->IsIntLike()) return RuntimeError("replace() count must be an integer", pos);
        count = b[2]->AsInt();
      }
      if (b[0]->s.empty()) {
        GRIDFEED_RETURN_IF_ERROR(
            ev.CheckBytes(pos, s.size() + (CpCount(s) + 1) * b[1]->s.size(), "str.replace()"));
      }
      std::string r = PyReplace(s, b[0]->s, b[1]->s, count);
      GRIDFEED_RETURN_IF_ERROR(ev.CheckBytes(pos, r.size(), "str.replace()"));
      return Value::Str(std::move(r));
    });
  }
  if (m == "lower" || m == "upper" || m == "title" || m == "capitalize" || m == "swapcase" ||
      m == "casefold") {
    return make([m](Evaluator&, const std::string& s, A& a, size_t pos) -> Result<Value> {
      GRIDFEED_ASSIGN_OR_RETURN(auto b, BindArgs(a, {}, 0, "str." + m + "()", pos));
      if (m == "lower") return Value::Str(PyLower(s));
      if (m == "upper") return Value::Str(PyUpper(s));
      if (m == "title") return Value::Str(PyTitle(s));
      if (m == "capitalize") return Value::Str(PyCapitalize(s));
      if (m == "swapcase") return Value::Str(PySwapcase(s));
      return Value::Str(PyCasefold(s));
    });
  }
  if (m == "find" || m == "rfind" || m == "index" || m == "rindex" || m == "count") {
    return make([m](Evaluator&, const std::string& s, A& a, size_t pos) -> Result<Value> {
      GRIDFEED_ASSIGN_OR_RETURN(auto b,
                                BindArgs(a, {"sub", "start", "end"}, 1, "str." + m + "()", pos));
      GRIDFEED_RETURN_IF_ERROR(NeedStr(*b[0], m + "()", pos));
      const std::vector<char32_t> cps = Cps(s), sub = Cps(b[0]->s);
      int64_t lo, hi;
      Bounds(static_cast<int64_t>(cps.size()), b[1], b[2], &lo, &hi);
      if (m == "count") {
        if (lo > hi) return Value::Int(0);
        if (sub.empty()) return Value::Int(hi - lo + 1);
        int64_t n = 0;
        for (int64_t k = lo; k + static_cast<int64_t>(sub.size()) <= hi;) {
          if (std::equal(sub.begin(), sub.end(), cps.begin() + k)) {
            ++n;
            k += static_cast<int64_t>(sub.size());
          } else {
            ++k;
          }
        }
        return Value::Int(n);
      }
      const int64_t r = lo > hi ? -1 : Find(cps, sub, lo, hi, m[0] == 'r');
      if (r < 0 && (m == "index" || m == "rindex")) return RuntimeError("substring not found", pos);
      return Value::Int(r);
    });
  }
  if (m == "join") {
    return make([](Evaluator& ev, const std::string& s, A& a, size_t pos) -> Result<Value> {
      GRIDFEED_ASSIGN_OR_RETURN(auto b, BindArgs(a, {"iterable"}, 1, "str.join()", pos));
      GRIDFEED_ASSIGN_OR_RETURN(List items, Iterate(*b[0], pos));
      std::string out;
      for (size_t k = 0; k < items.size(); ++k) {
        if (!items[k].IsStr()) {
          return RuntimeError("sequence item " + std::to_string(k) + ": expected str instance, " +
                                  TypeName(items[k]) + " found",
                              pos);
        }
        if (k) out += s;
        out += items[k].s;
        GRIDFEED_RETURN_IF_ERROR(ev.CheckBytes(pos, out.size(), "str.join()"));
      }
      return Value::Str(std::move(out));
    });
  }
  if (m == "format") {
    return make([](Evaluator& ev, const std::string& s, A& a, size_t pos) -> Result<Value> {
      GRIDFEED_ASSIGN_OR_RETURN(std::string r, StrFormat(ev, s, a, pos));
      return Value::Str(std::move(r));
    });
  }
  if (m == "removeprefix" || m == "removesuffix") {
    return make([m](Evaluator&, const std::string& s, A& a, size_t pos) -> Result<Value> {
      GRIDFEED_ASSIGN_OR_RETURN(auto b, BindArgs(a, {"affix"}, 1, "str." + m + "()", pos));
      GRIDFEED_RETURN_IF_ERROR(NeedStr(*b[0], m + "()", pos));
      const std::string& x = b[0]->s;
      if (m == "removeprefix" && s.compare(0, x.size(), x) == 0)
        return Value::Str(s.substr(x.size()));
      if (m == "removesuffix" && !x.empty() && s.size() >= x.size() &&
          s.compare(s.size() - x.size(), x.size(), x) == 0) {
        return Value::Str(s.substr(0, s.size() - x.size()));
      }
      return Value::Str(s);
    });
  }
  if (m == "partition" || m == "rpartition") {
    return make([m](Evaluator&, const std::string& s, A& a, size_t pos) -> Result<Value> {
      GRIDFEED_ASSIGN_OR_RETURN(auto b, BindArgs(a, {"sep"}, 1, "str." + m + "()", pos));
      GRIDFEED_RETURN_IF_ERROR(NeedStr(*b[0], m + "()", pos));
      const std::string& sep = b[0]->s;
      if (sep.empty()) return RuntimeError("empty separator", pos);
      const size_t hit = m == "partition" ? s.find(sep) : s.rfind(sep);
      if (hit == std::string::npos) {
        return m == "partition" ? Value::MakeTuple({Value::Str(s), Value::Str(""), Value::Str("")})
                                : Value::MakeTuple({Value::Str(""), Value::Str(""), Value::Str(s)});
      }
      return Value::MakeTuple(
          {Value::Str(s.substr(0, hit)), Value::Str(sep), Value::Str(s.substr(hit + sep.size()))});
    });
  }
  if (m == "center" || m == "ljust" || m == "rjust" || m == "zfill") {
    return make([m](Evaluator& ev, const std::string& s, A& a, size_t pos) -> Result<Value> {
      GRIDFEED_ASSIGN_OR_RETURN(
          auto b, BindArgs(a,
                           m == "zfill" ? std::vector<std::string_view>{"width"}
                                        : std::vector<std::string_view>{"width", "fillchar"},
                           1, "str." + m + "()", pos));
      if (!b[0]->IsIntLike()) return RuntimeError(m + "() width must be an integer", pos);
      std::string fill = " ";
      if (b.size() > 1 && b[1]) {
        if (!b[1]->IsStr() || CpCount(b[1]->s) != 1) {
          return RuntimeError("The fill character must be exactly one character long", pos);
        }
        fill = b[1]->s;
      }
      const int64_t width = b[0]->AsInt();
      const int64_t len = static_cast<int64_t>(CpCount(s));
      if (width <= len) return Value::Str(s);
      GRIDFEED_RETURN_IF_ERROR(
          ev.CheckBytes(pos, static_cast<uint64_t>(width) * fill.size(), "padding"));
      const int64_t marg = width - len;
      auto rep = [&](int64_t n) {
        std::string r;
        for (int64_t k = 0; k < n; ++k) r += fill;
        return r;
      };
      if (m == "ljust") return Value::Str(s + rep(marg));
      if (m == "rjust") return Value::Str(rep(marg) + s);
      if (m == "zfill") {
        std::string body = s;
        std::string sign;
        if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
          sign = body.substr(0, 1);
          body = body.substr(1);
        }
        return Value::Str(sign + std::string(static_cast<size_t>(marg), '0') + body);
      }
      const int64_t left = marg / 2 + (marg & width & 1);
      return Value::Str(rep(left) + s + rep(marg - left));
    });
  }
  if (m == "isalpha" || m == "isdigit" || m == "isdecimal" || m == "isnumeric" || m == "isalnum" ||
      m == "isspace" || m == "islower" || m == "isupper" || m == "isascii" || m == "istitle") {
    return make([m](Evaluator&, const std::string& s, A& a, size_t pos) -> Result<Value> {
      GRIDFEED_ASSIGN_OR_RETURN(auto b, BindArgs(a, {}, 0, "str." + m + "()", pos));
      const std::vector<char32_t> cps = Cps(s);
      if (m == "isascii") return Value::Bool(IsAscii(s));
      if (m == "islower" || m == "isupper") {
        bool cased = false;
        for (char32_t c : cps) {
          const bool lo = PyIsLowerCp(c), up = PyIsUpperCp(c),
                     ti = u_charType(c) == U_TITLECASE_LETTER;
          if (m == "islower" ? (up || ti) : (lo || ti)) return Value::Bool(false);
          if (m == "islower" ? lo : up) cased = true;
        }
        return Value::Bool(cased);
      }
      if (m == "istitle") {
        bool cased = false, prev = false;
        for (char32_t c : cps) {
          const bool up = PyIsUpperCp(c) || u_charType(c) == U_TITLECASE_LETTER;
          const bool lo = PyIsLowerCp(c);
          if (up) {
            if (prev) return Value::Bool(false);
            prev = cased = true;
          } else if (lo) {
            if (!prev) return Value::Bool(false);
            prev = cased = true;
          } else {
            prev = false;
          }
        }
        return Value::Bool(cased);
      }
      if (cps.empty()) return Value::Bool(false);
      for (char32_t c : cps) {
        const bool ok = m == "isalpha"     ? PyIsAlphaCp(c)
                        : m == "isdigit"   ? PyIsDigitCp(c)
                        : m == "isdecimal" ? PyIsDecimalCp(c)
                        : m == "isnumeric" ? PyIsNumericCp(c)
                        : m == "isalnum"   ? PyIsAlnumCp(c)
                                           : IsPySpace(c);
        if (!ok) return Value::Bool(false);
      }
      return Value::Bool(true);
    });
  }
  return Unsupported("str", m);
}

Value Unsafe(const std::string& type, const std::string& name) {
  return Value::Undefined("access to attribute '" + name + "' of '" + type +
                          "' object is unsafe (the sandbox forbids mutating it)");
}

std::optional<Value> DictMethod(const Value& self, const std::string& m) {
  if (!In(kDictAttrs, m)) return std::nullopt;
  if (In(kDictUnsafe, m)) return Unsafe("dict", m);
  auto d = self.dict;
  using A = CallArgs;
  if (m == "items" || m == "keys" || m == "values") {
    return Value::MakeCallable("dict." + m, [d, m](A& a, size_t pos) -> Result<Value> {
      GRIDFEED_ASSIGN_OR_RETURN(auto b, BindArgs(a, {}, 0, "dict." + m + "()", pos));
      List out;
      for (const auto& [k, v] : *d) {
        if (m == "items") {
          out.push_back(Value::MakeTuple({Value::Str(k), v}));
        } else {
          out.push_back(m == "keys" ? Value::Str(k) : v);
        }
      }
      return Value::MakeList(std::move(out), Value::Flavor::kView);
    });
  }
  if (m == "get") {
    return Value::MakeCallable("dict.get", [d](A& a, size_t pos) -> Result<Value> {
      GRIDFEED_ASSIGN_OR_RETURN(auto b, BindArgs(a, {"key", "default"}, 1, "dict.get()", pos));
      if (b[0]->IsStr()) {
        if (const Value* v = DictFind(*d, b[0]->s)) return *v;
      }
      return b[1] ? *b[1] : Value::None();
    });
  }
  if (m == "copy") {
    return Value::MakeCallable("dict.copy", [d](A& a, size_t pos) -> Result<Value> {
      GRIDFEED_ASSIGN_OR_RETURN(auto b, BindArgs(a, {}, 0, "dict.copy()", pos));
      return Value::MakeDict(*d);
    });
  }
  return Unsupported("dict", m);
}

std::optional<Value> ListMethod(const Value& self, const std::string& m) {
  const bool tuple = self.is(Value::Kind::kTuple);
  if (tuple ? (m != "index" && m != "count") : !In(kListAttrs, m)) return std::nullopt;
  if (!tuple && In(kListUnsafe, m)) return Unsafe("list", m);
  auto l = self.list;
  using A = CallArgs;
  if (m == "copy") {
    return Value::MakeCallable("list.copy", [l](A& a, size_t pos) -> Result<Value> {
      GRIDFEED_ASSIGN_OR_RETURN(auto b, BindArgs(a, {}, 0, "list.copy()", pos));
      return Value::MakeList(*l);
    });
  }
  return Value::MakeCallable("list." + m, [l, m](A& a, size_t pos) -> Result<Value> {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, BindArgs(a, {"value"}, 1, m + "()", pos));
    int64_t n = 0;
    for (size_t k = 0; k < l->size(); ++k) {
      if (PyEquals((*l)[k], *b[0])) {
        if (m == "index") return Value::Int(static_cast<int64_t>(k));
        ++n;
      }
    }
    if (m == "index") return RuntimeError("value is not in list", pos);
    return Value::Int(n);
  });
}

}  // namespace

std::optional<Value> BindMethod(Evaluator& ev, const Value& self, const std::string& name) {
  switch (self.kind) {
    case Value::Kind::kStr:
      return StrMethod(ev, self, name);
    case Value::Kind::kDict:
      return DictMethod(self, name);
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      if (self.flavor != Value::Flavor::kPlain) return std::nullopt;
      return ListMethod(self, name);
    default:
      return std::nullopt;
  }
}

Result<std::string> PercentFormat(const std::string& fmt, const Value& args, size_t pos) {
  std::vector<Value> items;
  const Dict* mapping = nullptr;
  if (args.is(Value::Kind::kTuple)) {
    items = *args.list;
  } else if (args.is(Value::Kind::kDict)) {
    mapping = args.dict.get();
  } else {
    items.push_back(args);
  }
  size_t next = 0;
  std::string out;
  for (size_t k = 0; k < fmt.size(); ++k) {
    if (fmt[k] != '%') {
      out += fmt[k];
      continue;
    }
    if (++k >= fmt.size()) return RuntimeError("incomplete format", pos);
    if (fmt[k] == '%') {
      out += '%';
      continue;
    }
    const Value* v = nullptr;
    if (fmt[k] == '(') {
      const size_t close = fmt.find(')', k);
      if (close == std::string::npos) return RuntimeError("incomplete format key", pos);
      if (!mapping) return RuntimeError("format requires a mapping", pos);
      const std::string key = fmt.substr(k + 1, close - k - 1);
      v = DictFind(*mapping, key);
      if (!v) return RuntimeError("KeyError: '" + key + "'", pos);
      k = close + 1;
      if (k >= fmt.size()) return RuntimeError("incomplete format", pos);
    } else {
      if (next >= items.size()) return RuntimeError("not enough arguments for format string", pos);
      v = &items[next++];
    }
    const char conv = fmt[k];
    Result<std::string> s = std::string();
    if (conv == 's') {
      s = ToStr(*v);
    } else if (conv == 'r') {
      s = Repr(*v);
    } else if (conv == 'd' || conv == 'i') {
      if (v->IsIntLike()) {
        s = std::to_string(v->AsInt());
      } else if (v->is(Value::Kind::kFloat) && std::isfinite(v->f) && std::fabs(v->f) < 9.2e18) {
        s = std::to_string(static_cast<int64_t>(std::trunc(v->f)));
      } else {
        return RuntimeError("%d format: a real number is required, not " + TypeName(*v), pos);
      }
    } else {
      return RuntimeError(std::string("%-formatting with '") + conv +
                              "' (or flags, width, precision) is not supported",
                          pos);
    }
    if (!s.ok()) return RuntimeError(s.status().message(), pos);
    out += *s;
  }
  if (!mapping && next < items.size()) {
    return RuntimeError("not all arguments converted during string formatting", pos);
  }
  return out;
}

}  // namespace gridfeed::order::sft::chat_template_internal
