#include "gridfeed/core/python_float.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <regex>

namespace gridfeed {

std::optional<double> ParsePythonFloat(const std::string& text) {
  size_t b = 0, e = text.size();
  while (b < e && std::isspace(static_cast<unsigned char>(text[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(text[e - 1]))) --e;
  if (b == e) return std::nullopt;
  std::string lower;
  for (size_t i = b; i < e; ++i) {
    lower += static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
  }
  std::string body = lower;
  double sign = 1.0;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    sign = body[0] == '-' ? -1.0 : 1.0;
    body = body.substr(1);
  }
  if (body == "nan") return std::nan("");
  if (body == "inf" || body == "infinity") return sign * HUGE_VAL;
  // Underscores are allowed only between two digits.
  std::string clean;
  for (size_t i = 0; i < lower.size(); ++i) {
    if (lower[i] == '_') {
      if (i == 0 || i + 1 == lower.size() ||
          !std::isdigit(static_cast<unsigned char>(lower[i - 1])) ||
          !std::isdigit(static_cast<unsigned char>(lower[i + 1]))) {
        return std::nullopt;
      }
      continue;
    }
    clean += lower[i];
  }
  static const std::regex decimal(R"([+-]?((\d+\.?\d*)|(\.\d+))(e[+-]?\d+)?)");
  if (!std::regex_match(clean, decimal)) return std::nullopt;
  return std::strtod(clean.c_str(), nullptr);
}

}  // namespace gridfeed
