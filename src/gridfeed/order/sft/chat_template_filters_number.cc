// The number filters of jinja2 3.1 that chat templates use: abs, int and float (with Python's
// int(str) and float(str)) and round (Python's correctly rounded round()) (internal contract:
// chat_template_ast.h and chat_template_filters_internal.h).

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "gridfeed/order/sft/chat_template_ast.h"
#include "gridfeed/order/sft/chat_template_filters_internal.h"

namespace gridfeed::order::sft::chat_template_internal::detail {
namespace {

// Python's int(str): optional sign, digits with single underscores, surrounding whitespace.
std::optional<int64_t> ParsePyInt(const std::string& text, int base) {
  std::string s = PyStripImpl(text, std::nullopt, true, true);
  if (s.empty()) return std::nullopt;
  bool neg = false;
  size_t k = 0;
  if (s[0] == '+' || s[0] == '-') {
    neg = s[0] == '-';
    k = 1;
  }
  if (base == 16 && s.compare(k, 2, "0x") == 0) k += 2;
  if (k >= s.size()) return std::nullopt;
  uint64_t v = 0;
  bool prev_digit = false;
  for (; k < s.size(); ++k) {
    const char c = s[k];
    if (c == '_') {
      if (!prev_digit || k + 1 >= s.size()) return std::nullopt;
      prev_digit = false;
      continue;
    }
    int d = -1;
    if (c >= '0' && c <= '9') d = c - '0';
    if (c >= 'a' && c <= 'z') d = c - 'a' + 10;
    if (c >= 'A' && c <= 'Z') d = c - 'A' + 10;
    if (d < 0 || d >= base) return std::nullopt;
    if (v > (static_cast<uint64_t>(INT64_MAX) + (neg ? 1 : 0) - static_cast<uint64_t>(d)) /
                static_cast<uint64_t>(base)) {
      return std::nullopt;
    }
    v = v * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
    prev_digit = true;
  }
  return neg ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
}

// Python's float(str).
std::optional<double> ParsePyFloat(const std::string& text) {
  std::string s = PyStripImpl(text, std::nullopt, true, true);
  if (s.empty()) return std::nullopt;
  std::string t;
  for (size_t k = 0; k < s.size(); ++k) {
    if (s[k] == '_') {
      if (k == 0 || k + 1 >= s.size() || !isdigit(static_cast<unsigned char>(s[k - 1])) ||
          !isdigit(static_cast<unsigned char>(s[k + 1]))) {
        return std::nullopt;
      }
      continue;
    }
    t += s[k];
  }
  std::string low;
  for (char c : t) low += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string body = low;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) body = body.substr(1);
  if (body == "inf" || body == "infinity" || body == "nan") {
    const double v = body == "nan" ? NAN : INFINITY;
    return low[0] == '-' ? -v : v;
  }
  for (char c : body) {
    if (!(isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == '+' || c == '-')) {
      return std::nullopt;
    }
  }
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size()) return std::nullopt;
  return v;
}

// Python's round(x, ndigits) on a float: correctly rounded, half to even on the exact value.
double PyRoundFloat(double x, int64_t nd) {
  if (!std::isfinite(x)) return x;
  if (nd > 300) return x;
  if (nd < -300) return std::copysign(0.0, x);
  if (nd >= 0) {
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(nd), x);
    return std::strtod(buf, nullptr);
  }
  const double p = std::pow(10.0, static_cast<double>(-nd));
  const double y = x / p;
  double z = std::round(y);
  if (std::fabs(y - std::trunc(y)) == 0.5) z = 2.0 * std::round(y / 2.0);
  return z * p;
}

}  // namespace

Result<Value> NumberFilter(Evaluator& /*ev*/, const std::string& name, const Value& v,
                           CallArgs& args, size_t pos) {
  const FilterBinder bind{args, name + "()", pos};
  if (name == "abs") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({}));
    if (v.is(Value::Kind::kFloat)) return Value::Float(std::fabs(v.f));
    if (v.IsIntLike()) {
      if (v.AsInt() == INT64_MIN) return FilterError("integer overflow (beyond int64)", pos);
      return Value::Int(std::llabs(v.AsInt()));
    }
    return FilterError("bad operand type for abs(): '" + TypeName(v) + "'", pos);
  }
  if (name == "int") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({"default", "base"}));
    const Value dflt = b[0] ? *b[0] : Value::Int(0);
    int64_t base = 10;
    if (b[1]) {
      if (!b[1]->IsIntLike()) return FilterError("int(): base must be an integer", pos);
      base = b[1]->AsInt();
    }
    if (v.IsIntLike()) return Value::Int(v.AsInt());
    if (v.is(Value::Kind::kFloat)) {
      if (!std::isfinite(v.f))
        return FilterError("cannot convert float infinity or NaN to integer", pos);
      if (std::fabs(v.f) >= 9.2e18) return FilterError("integer overflow (beyond int64)", pos);
      return Value::Int(static_cast<int64_t>(std::trunc(v.f)));
    }
    if (v.IsStr()) {
      if (base != 10 && base != 16 && base != 2 && base != 8) {
        return FilterError("int(): only bases 2, 8, 10 and 16 are supported", pos);
      }
      if (auto i = ParsePyInt(v.s, static_cast<int>(base))) return Value::Int(*i);
      if (auto f = ParsePyFloat(v.s)) {
        if (!std::isfinite(*f))
          return FilterError("cannot convert float infinity or NaN to integer", pos);
        if (std::fabs(*f) >= 9.2e18) return FilterError("integer overflow (beyond int64)", pos);
        return Value::Int(static_cast<int64_t>(std::trunc(*f)));
      }
    }
    return dflt;
  }
  if (name == "float") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({"default"}));
    const Value dflt = b[0] ? *b[0] : Value::Float(0.0);
    if (v.IsNumber()) return Value::Float(v.AsDouble());
    if (v.IsStr()) {
      if (auto f = ParsePyFloat(v.s)) return Value::Float(*f);
    }
    return dflt;
  }
  if (name == "round") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({"precision", "method"}));
    int64_t precision = 0;
    if (b[0]) {
      if (!b[0]->IsIntLike()) return FilterError("round(): precision must be an integer", pos);
      precision = b[0]->AsInt();
    }
    const std::string method = b[1] && b[1]->IsStr() ? b[1]->s : "common";
    if (!v.IsNumber()) return FilterError("round(): not a number", pos);
    if (method == "common") {
      if (v.IsIntLike()) {
        if (precision >= 0) return Value::Int(v.AsInt());
        return FilterError("round() of an integer to negative digits is not supported", pos);
      }
      return Value::Float(PyRoundFloat(v.f, precision));
    }
    if (method != "ceil" && method != "floor") {
      return FilterError("method must be common, ceil or floor", pos);
    }
    const double p = std::pow(10.0, static_cast<double>(precision));
    const double x = v.AsDouble() * p;
    return Value::Float((method == "ceil" ? std::ceil(x) : std::floor(x)) / p);
  }
  return FilterError("filter '" + name + "' is not supported", pos);
}

}  // namespace gridfeed::order::sft::chat_template_internal::detail
