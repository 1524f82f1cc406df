// The string filters of jinja2 3.1 that chat templates use: safe and escape (Markup), string,
// trim, upper, lower, capitalize, title, replace, indent, center, wordcount and format
// (internal contract: chat_template_ast.h and chat_template_filters_internal.h).

#include <algorithm>
#include <string>
#include <vector>

#include "gridfeed/order/sft/chat_template_ast.h"
#include "gridfeed/order/sft/chat_template_filters_internal.h"

namespace gridfeed::order::sft::chat_template_internal::detail {
namespace {

std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Indent(const std::string& s0, const std::string& ind, bool first, bool blank) {
  const std::string s = s0 + "\n";
  std::vector<std::string> lines = PySplitLines(s, false);
  std::string rv;
  if (blank) {
    for (size_t k = 0; k < lines.size(); ++k) {
      if (k) rv += "\n" + ind;
      rv += lines[k];
    }
  } else {
    rv = lines.empty() ? std::string() : lines[0];
    if (lines.size() > 1) {
      rv += "\n";
      for (size_t k = 1; k < lines.size(); ++k) {
        if (k > 1) rv += "\n";
        rv += lines[k].empty() ? lines[k] : ind + lines[k];
      }
    }
  }
  if (first) rv = ind + rv;
  return rv;
}

// Jinja's title filter: split on runs of [-\s({\[<], then first char upper, the rest lower.
std::string JinjaTitle(const std::string& s) {
  const std::vector<char32_t> cps = Cps(s);
  auto sep = [](char32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || IsPySpace(c);
  };
  std::string out;
  size_t k = 0;
  while (k < cps.size()) {
    size_t e = k;
    const bool is_sep = sep(cps[k]);
    while (e < cps.size() && sep(cps[e]) == is_sep) ++e;
    const std::string item = FromCps(std::span<const char32_t>(cps.data() + k, e - k));
    if (is_sep) {
      out += item;
    } else {
      out += PyUpper(FromCps(std::span<const char32_t>(cps.data() + k, 1)));
      out += PyLower(FromCps(std::span<const char32_t>(cps.data() + k + 1, e - k - 1)));
    }
    k = e;
  }
  return out;
}

}  // namespace

Result<Value> StringFilter(Evaluator& ev, const std::string& name, const Value& v, CallArgs& args,
                           size_t pos) {
  const FilterBinder bind{args, name + "()", pos};
  if (name == "safe" || name == "escape" || name == "e" || name == "forceescape") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({}));
    if (v.markup && name != "forceescape") return v;
    GRIDFEED_ASSIGN_OR_RETURN(std::string s, SoftStr(v, pos));
    Value r = Value::Str(name == "safe" ? s : HtmlEscape(s));
    r.markup = true;
    return r;
  }
  if (name == "string") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({}));
    if (v.IsStr()) return v;
    GRIDFEED_ASSIGN_OR_RETURN(std::string s, SoftStr(v, pos));
    return Value::Str(std::move(s));
  }
  if (name == "trim") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({"chars"}));
    GRIDFEED_ASSIGN_OR_RETURN(std::string s, PlainStr(v, pos, "trim"));
    std::optional<std::string> chars;
    if (b[0] && !b[0]->is(Value::Kind::kNone)) {
      if (!b[0]->IsStr()) return FilterError("trim(): chars must be a string or none", pos);
      chars = b[0]->s;
    }
    return Value::Str(PyStripImpl(s, chars, true, true));
  }
  if (name == "upper" || name == "lower" || name == "capitalize" || name == "title") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({}));
    GRIDFEED_ASSIGN_OR_RETURN(std::string s, PlainStr(v, pos, name.c_str()));
    if (name == "upper") return Value::Str(PyUpper(s));
    if (name == "lower") return Value::Str(PyLower(s));
    if (name == "capitalize") return Value::Str(PyCapitalize(s));
    return Value::Str(JinjaTitle(s));
  }
  if (name == "replace") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({"old", "new", "count"}, 2));
    GRIDFEED_ASSIGN_OR_RETURN(std::string s, PlainStr(v, pos, "replace"));
    GRIDFEED_ASSIGN_OR_RETURN(std::string o, SoftStr(*b[0], pos));
    GRIDFEED_ASSIGN_OR_RETURN(std::string n, SoftStr(*b[1], pos));
    int64_t count = -1;
    if (b[2] && !b[2]->is(Value::Kind::kNone)) {
      if (!b[2]->IsIntLike()) return FilterError("replace(): count must be an integer", pos);
      count = b[2]->AsInt();
    }
    if (o.empty() || !n.empty()) {
      const uint64_t hits = o.empty() ? CpCount(s) + 1 : 0;
      GRIDFEED_RETURN_IF_ERROR(ev.CheckBytes(pos, s.size() + hits * n.size(), "replace()"));
    }
    std::string r = PyReplace(s, o, n, count);
    GRIDFEED_RETURN_IF_ERROR(ev.CheckBytes(pos, r.size(), "replace()"));
    return Value::Str(std::move(r));
  }
  if (name == "indent") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({"width", "first", "blank"}));
    GRIDFEED_ASSIGN_OR_RETURN(std::string s, PlainStr(v, pos, "indent"));
    std::string ind(4, ' ');
    if (b[0]) {
      if (b[0]->IsStr()) {
        ind = b[0]->s;
      } else if (b[0]->IsIntLike()) {
        ind = std::string(static_cast<size_t>(std::max<int64_t>(0, b[0]->AsInt())), ' ');
        GRIDFEED_RETURN_IF_ERROR(ev.CheckBytes(pos, ind.size(), "indent()"));
      } else {
        return FilterError("indent(): width must be an int or a str", pos);
      }
    }
    GRIDFEED_RETURN_IF_ERROR(
        ev.CheckBytes(pos, s.size() + (CpCount(s) + 1) * ind.size(), "indent()"));
    return Value::Str(Indent(s, ind, b[1] && Truthy(*b[1]), b[2] && Truthy(*b[2])));
  }
  if (name == "center") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({"width"}));
    GRIDFEED_ASSIGN_OR_RETURN(std::string s, PlainStr(v, pos, "center"));
    int64_t width = 80;
    if (b[0]) {
      if (!b[0]->IsIntLike()) return FilterError("center(): width must be an integer", pos);
      width = b[0]->AsInt();
    }
    const int64_t len = static_cast<int64_t>(CpCount(s));
    if (width <= len) return Value::Str(s);
    GRIDFEED_RETURN_IF_ERROR(ev.CheckBytes(pos, static_cast<uint64_t>(width), "center()"));
    const int64_t marg = width - len;
    const int64_t left = marg / 2 + (marg & width & 1);
    return Value::Str(std::string(static_cast<size_t>(left), ' ') + s +
                      std::string(static_cast<size_t>(marg - left), ' '));
  }
  if (name == "wordcount") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({}));
    GRIDFEED_ASSIGN_OR_RETURN(std::string s, SoftStr(v, pos));
    int64_t n = 0;
    bool in_word = false;
    for (char32_t c : Cps(s)) {
      const bool w = c == '_' || PyIsAlnumCp(c);
      if (w && !in_word) ++n;
      in_word = w;
    }
    return Value::Int(n);
  }
  if (name == "format") {
    GRIDFEED_ASSIGN_OR_RETURN(std::string s, PlainStr(v, pos, "format"));
    if (!args.pos.empty() && !args.kw.empty()) {
      return FilterError("can't handle positional and keyword arguments at the same time", pos);
    }
    Value fa;
    if (!args.kw.empty()) {
      Dict d;
      for (const auto& kv : args.kw) d.emplace_back(kv.first, kv.second);
      fa = Value::MakeDict(std::move(d));
    } else {
      fa = Value::MakeTuple(args.pos);
    }
    GRIDFEED_ASSIGN_OR_RETURN(std::string r, PercentFormat(s, fa, pos));
    return Value::Str(std::move(r));
  }
  return FilterError("filter '" + name + "' is not supported", pos);
}

}  // namespace gridfeed::order::sft::chat_template_internal::detail
